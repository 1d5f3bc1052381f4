//! Rows 10 and 12: a primary failed over (on the pair and the Cluster), and the slots of two partitions resharded (on the Cluster), while a worker process works the queue.
//!
//! Both change which node holds a partition in the middle of the work:
//! entries read, pending, being acknowledged and being published. The
//! worker and the producer must follow (MOVED, reconnect, re-read) without
//! losing an accepted job. Publishes wait for one replica (`WAIT`), so a job
//! the producer was told is accepted is on the replica that takes over, and
//! for a failover the handler's results wait for one too: an effect is
//! durable only once a replica has it. Acks, deliveries and the ledger's
//! counts do not wait: a failover may deliver a job again (an ack the old
//! primary took but had not replicated); the ledger absorbs that, so a
//! re-run *effect* still fails the row. The Cluster's `CLUSTER FAILOVER`
//! lets the replica catch up first and loses nothing; the pair's promotion
//! does not wait (as Sentinel's after a failed primary), so there the note
//! counts results the promotion forgot (none, unless a result's `WAIT` was
//! cut short: its delivery then failed and the job ran again).

use std::time::Duration;

use queuegen_runtime::Durability;
use queuegen_runtime::StreamSlot;
use queuegen_tests::suite::{QueueKind, ScriptedJob, Tally, Tuning, WorkerSpec};

use super::Run;
use crate::stage::{new_job, Stage};
use crate::verdict::Verdict;

/// What happens to the deployment mid-work.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The primary holding partition 0 fails over to its replica
    /// ([`queuegen_tests::suite::Deployment::fail_over`]).
    Failover,
    /// Live resharding of partitions 0 and 1's slots to another primary.
    Reshard,
}

pub async fn changed_mid_work(run: Run, change: Change) -> Verdict {
    let tuning = Tuning {
        partitions: Some(4),
        concurrency: Some(8),
        claim_min_idle_ms: Some(1000),
        claim_every_ms: Some(200),
        ..Tuning::default()
    };
    let name = match change {
        Change::Failover => "failover",
        Change::Reshard => "reshard",
    };
    let mut stage = Stage::new(run.target, name, QueueKind::Jobs, tuning).await;
    let before = ScriptedJob::many("slow20", run.size.jobs(120));
    let after = ScriptedJob::many("ok", run.size.jobs(40));
    let all: Vec<ScriptedJob> = before.iter().chain(&after).cloned().collect();
    let mut verdict = Verdict::new(all.len());
    let producer = stage.producer().await.with_durability(Durability {
        replicas: 1,
        timeout: Duration::from_secs(2),
    });
    let published = producer
        .publish_many(before.iter().map(new_job))
        .await
        .unwrap_or_else(|err| panic!("publishing before the change: {err}"));
    let unreplicated = published.iter().filter(|p| p.replicas != Some(1)).count();
    verdict.check(unreplicated == 0, || {
        format!("{unreplicated} accepted jobs were not on a replica")
    });

    let spec = WorkerSpec {
        // A failover keeps what a replica has: the handler's results wait
        // for one as the publishes do. Resharding moves keys, it loses none.
        effect_replicas: u32::from(change == Change::Failover),
        ..stage.spec.named("worker")
    };
    let mut worker = stage.spawn(&spec, None);
    let working = stage
        .until_tally(&before, Duration::from_secs(20), |tally| tally.done() >= 10)
        .await;
    if !working {
        verdict.problem(format!(
            "the worker never got going:\n{}",
            worker.log_tail()
        ));
        return verdict;
    }
    let done_before: Vec<String> = done_jobs(&stage.tally(&before).await);
    // The worker is a process of its own: it keeps working while this
    // task waits for the servers to agree on the change.
    let detail = match change {
        Change::Failover => stage
            .deployment
            .fail_over(&stage.config.ready_key(StreamSlot::new(0))),
        Change::Reshard => {
            let Some(cluster) = stage.deployment.cluster() else {
                verdict.problem("this row needs a Cluster target");
                return verdict;
            };
            let keys = [
                stage.config.ready_key(StreamSlot::new(0)),
                stage.config.ready_key(StreamSlot::new(1)),
            ];
            let source = cluster.node_for_key(&keys[0]).port;
            let target = cluster
                .primaries()
                .into_iter()
                .find(|primary| primary.port != source)
                .expect("three primaries")
                .port;
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            cluster.migrate_slots_of_keys(&keys, target);
            format!("partitions 0 and 1 moved to 127.0.0.1:{target}")
        }
    };
    verdict.check(stage.admin_answers().await, || {
        "the admin connection never came back after the change".to_owned()
    });
    // Results are never deleted: one done before and missing now is one
    // the change forgot.
    let done_after = done_jobs(&stage.tally(&before).await);
    let forgotten = done_before
        .iter()
        .filter(|job_id| !done_after.contains(job_id))
        .count();
    let mut accepted_after = 0;
    for attempt in 0..50 {
        match producer.publish_many(after.iter().map(new_job)).await {
            Ok(published) => {
                accepted_after = published.len();
                let unreplicated = published.iter().filter(|p| p.replicas != Some(1)).count();
                verdict.check(unreplicated == 0, || {
                    format!("{unreplicated} jobs accepted after the change were not on a replica")
                });
                break;
            }
            // The first publish after a change may meet a closed connection;
            // publishing again is safe (stable job IDs).
            Err(err) if attempt < 49 => {
                tracing::info!(error = %err, "publish after the change failed; again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => verdict.problem(format!("publishing after the change: {err}")),
        }
    }
    verdict.check(accepted_after == after.len(), || {
        format!(
            "{accepted_after} of {} published after the change",
            after.len()
        )
    });

    stage.settle(&all, Duration::from_secs(60)).await;
    worker.terminate();
    verdict.check(worker.wait(Duration::from_secs(30)).await.is_some(), || {
        format!("the worker did not stop:\n{}", worker.log_tail())
    });
    let places = stage.places(&all).await;
    stage.judge(&mut verdict, &all, &places);
    verdict.note(format!(
        "{detail} with {} of {} done; {forgotten} of those results forgotten by it; {} deliveries, {} redeliveries absorbed",
        done_before.len(),
        before.len(),
        places.tally.deliveries(),
        places.tally.absorbed()
    ));
    verdict
}

/// The job_ids whose result is stored.
fn done_jobs(tally: &Tally) -> Vec<String> {
    tally
        .jobs
        .iter()
        .filter(|(_, job)| job.done)
        .map(|(job_id, _)| job_id.clone())
        .collect()
}
