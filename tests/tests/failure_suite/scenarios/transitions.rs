//! kill -9 at each transition point (row 8: the scheduler between two promotion batches): after recovery every job is in exactly one place, its effect applied once.
//!
//! A worker process built with failpoints works the `retrying` queue and
//! dies with SIGKILL the first time it reaches the point under test. A
//! survivor in this process then recovers what it left: claims its pending
//! entries, promotes its retries. Each job must end done (its effect once)
//! or dead-lettered (once), never also pending or scheduled, and a
//! rescheduled attempt must exist exactly once.

use std::time::Duration;

use queuegen_runtime::MarkerKind;
use queuegen_runtime::StreamSlot;
use queuegen_tests::suite::{QueueKind, Script, ScriptedJob, Tuning};
use queuegen_tests::support::{delayed_jobs, scheduled_retries, stream_entries};

use super::Run;
use crate::process::killed;
use crate::stage::{new_job, Stage};
use crate::verdict::Verdict;

/// The victim reaches any of the points within this.
const REACH_TIMEOUT: Duration = Duration::from_secs(20);
/// Recovery: claims after 1.2 s idle, retries after up to 1 s.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// kill -9 at `failpoint` while working flaky, broken and fine jobs.
pub async fn killed_at(run: Run, failpoint: &'static str) -> Verdict {
    let stage = Stage::new(
        run.target,
        failpoint,
        QueueKind::Retrying,
        Tuning::default(),
    )
    .await;
    let jobs: Vec<ScriptedJob> = [("flaky", 3), ("broken", 3), ("ok", 2)]
        .iter()
        .flat_map(|&(script, count)| ScriptedJob::many(script, run.size.jobs(count)))
        .collect();
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    let mut victim = stage.spawn(&stage.spec.named("victim"), Some(failpoint));
    let Some(status) = victim.wait(REACH_TIMEOUT).await else {
        verdict.problem(format!(
            "the victim never reached {failpoint}:\n{}",
            victim.log_tail()
        ));
        return verdict;
    };
    let victim_log = victim.log();

    let survivor = stage.spec.named("survivor").start().await.unwrap();
    stage.settle(&jobs, SETTLE_TIMEOUT).await;
    let report = survivor.stop().await.unwrap();

    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);
    verdict.check(
        killed(status) && victim_log.contains("failpoint reached"),
        || format!("the victim did not die at {failpoint}: {status}\n{victim_log}"),
    );
    verdict.check(report.failed == 0, || {
        format!("the survivor failed jobs: {report:?}")
    });
    for job in &jobs {
        let expected = usize::from(job.script() == Script::Flaky);
        let second = places.entries_at_attempt(&job.job_id, 2);
        verdict.check(second == expected, || {
            format!(
                "{}: {second} second attempts, expected {expected}",
                job.job_id
            )
        });
    }
    verdict.note(format!(
        "died at {failpoint}; survivor: {} claimed, {} promoted",
        report.claimed, report.promoted
    ));
    verdict
}

/// Row 8: the scheduler dies right after its first promotion call while
/// many more retries are due (batches of 4): each retry must be in the
/// retry set or promoted to the ready stream (with its marker), never in
/// neither and never in both; then a survivor finishes the rest.
pub async fn scheduler_killed_mid_batch(run: Run) -> Verdict {
    let tuning = Tuning {
        // Every retry is due at once, a second after its failure: by then
        // all of them are scheduled, and the first promotion call moves 4.
        retry_initial_ms: Some(1000),
        retry_without_jitter: true,
        retry_promote_every_ms: Some(100),
        retry_promote_batch: Some(4),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "scheduler-kill", QueueKind::Retrying, tuning).await;
    let jobs = ScriptedJob::many("flaky", run.size.jobs(24));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    let victim_spec = {
        let mut spec = stage.spec.named("victim");
        spec.tuning.concurrency = Some(jobs.len());
        spec
    };
    if !scheduler_killed_at(&stage, &victim_spec, "after_retry_promote", &mut verdict).await {
        return verdict;
    }

    // The state the kill left, before anyone recovers it.
    let mut conn = stage.conn();
    let scheduled: Vec<String> = scheduled_retries(&mut conn, &stage.config)
        .await
        .into_iter()
        .map(|(_, _, _, fields)| fields["job_id"].clone())
        .collect();
    let mut promoted = Vec::new();
    for partition in StreamSlot::all(stage.config.partitions) {
        let key = stage.config.ready_key(partition);
        for (_, fields) in stream_entries(&mut conn, &key).await {
            if fields["attempt"] != "2" {
                continue;
            }
            let marker =
                stage
                    .config
                    .marker_key(partition, MarkerKind::Promote, &fields["prev_id"]);
            let marked: bool = redis::cmd("EXISTS")
                .arg(&marker)
                .query_async(&mut conn)
                .await
                .unwrap();
            verdict.check(marked, || {
                format!(
                    "{} was promoted without its marker {marker}",
                    fields["job_id"]
                )
            });
            promoted.push(fields["job_id"].clone());
        }
    }
    killed_mid_batch(&mut verdict, &jobs, &scheduled, &promoted, "retry set");
    let report = survivor_finishes(&stage, &mut verdict, &jobs, 2).await;
    verdict.note(format!(
        "killed with {} promoted, {} in the retry set; survivor promoted {}",
        promoted.len(),
        scheduled.len(),
        report.promoted
    ));
    verdict
}

/// The scheduler dies right after its first `delayed_promote` call while
/// many more delayed jobs are due (batches of 4): each job must be in the
/// delayed set or on the ready stream (with its marker), never in neither
/// and never in both; then a survivor promotes and works the rest, each
/// job's effect once.
pub async fn delayed_promoter_killed_mid_batch(run: Run) -> Verdict {
    let tuning = Tuning {
        retry_promote_every_ms: Some(100),
        retry_promote_batch: Some(4),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "delayed-kill", QueueKind::Retrying, tuning).await;
    let jobs = ScriptedJob::many("ok", run.size.jobs(24));
    // All due together a second from now: by then every one is waiting.
    let due = std::time::SystemTime::now() + Duration::from_secs(1);
    let producer = stage.producer().await;
    for job in &jobs {
        let delayed = producer
            .publish_at(new_job(job), due)
            .await
            .unwrap_or_else(|err| panic!("delaying {}: {err}", job.job_id));
        assert!(!delayed.duplicate, "{} waits once", job.job_id);
    }
    let mut verdict = Verdict::new(jobs.len());

    let victim_spec = stage.spec.named("victim");
    if !scheduler_killed_at(&stage, &victim_spec, "after_delayed_promote", &mut verdict).await {
        return verdict;
    }

    // The state the kill left, before anyone recovers it.
    let mut conn = stage.conn();
    let waiting: Vec<String> = delayed_jobs(&mut conn, &stage.config)
        .await
        .into_iter()
        .map(|(_, job_id, _, _)| job_id)
        .collect();
    let mut promoted = Vec::new();
    for partition in StreamSlot::all(stage.config.partitions) {
        let key = stage.config.ready_key(partition);
        for (_, fields) in stream_entries(&mut conn, &key).await {
            let job_id = fields["job_id"].clone();
            let marker = stage
                .config
                .marker_key(partition, MarkerKind::Delayed, &job_id);
            let marked: bool = redis::cmd("EXISTS")
                .arg(&marker)
                .query_async(&mut conn)
                .await
                .unwrap();
            verdict.check(marked, || {
                format!("{job_id} was promoted without its marker {marker}")
            });
            promoted.push(job_id);
        }
    }
    killed_mid_batch(&mut verdict, &jobs, &waiting, &promoted, "delayed set");
    let report = survivor_finishes(&stage, &mut verdict, &jobs, 1).await;
    verdict.note(format!(
        "killed with {} promoted, {} still delayed; survivor promoted {}",
        promoted.len(),
        waiting.len(),
        report.delayed_promoted
    ));
    verdict
}

/// After a scheduler's kill: each job in exactly one of `waiting` (still in
/// `set`) and `promoted` (on the ready stream), and the kill really fell
/// between two batches (some of each).
fn killed_mid_batch(
    verdict: &mut Verdict,
    jobs: &[ScriptedJob],
    waiting: &[String],
    promoted: &[String],
    set: &str,
) {
    for job in jobs {
        let places = waiting.iter().filter(|id| **id == job.job_id).count()
            + promoted.iter().filter(|id| **id == job.job_id).count();
        verdict.check(places == 1, || {
            format!(
                "{}: after the kill it is in {places} places ({set} or ready stream)",
                job.job_id
            )
        });
    }
    verdict.check(!promoted.is_empty() && !waiting.is_empty(), || {
        format!(
            "not killed mid-batch: {} promoted, {} still in the {set}",
            promoted.len(),
            waiting.len()
        )
    });
}

/// A survivor in this process works everything left; judged once settled,
/// each job must have exactly one ready entry at `attempt`.
async fn survivor_finishes(
    stage: &Stage,
    verdict: &mut Verdict,
    jobs: &[ScriptedJob],
    attempt: u32,
) -> queuegen_runtime::WorkerReport {
    let survivor = stage.spec.named("survivor").start().await.unwrap();
    stage.settle(jobs, SETTLE_TIMEOUT).await;
    let report = survivor.stop().await.unwrap();
    let places = stage.places(jobs).await;
    stage.judge(verdict, jobs, &places);
    for job in jobs {
        let entries = places.entries_at_attempt(&job.job_id, attempt);
        verdict.check(entries == 1, || {
            format!(
                "{}: {entries} ready entries at attempt {attempt}, expected 1",
                job.job_id
            )
        });
    }
    report
}

/// Starts `spec` as a worker process that dies at `failpoint` (after a
/// promotion call) and waits for it; false, with the problem noted, when it
/// never got there.
async fn scheduler_killed_at(
    stage: &Stage,
    spec: &queuegen_tests::suite::WorkerSpec,
    failpoint: &str,
    verdict: &mut Verdict,
) -> bool {
    let mut victim = stage.spawn(spec, Some(failpoint));
    let Some(status) = victim.wait(REACH_TIMEOUT).await else {
        verdict.problem(format!(
            "the scheduler never reached {failpoint}:\n{}",
            victim.log_tail()
        ));
        return false;
    };
    verdict.check(killed(status), || {
        format!(
            "the victim ended with {status}, not SIGKILL:\n{}",
            victim.log_tail()
        )
    });
    true
}
