//! Rows 4 and 6: two recovery loops racing claim each abandoned entry once; pending entries an outsider deleted are reported loudly, never skipped silently.

use std::collections::BTreeSet;
use std::time::Duration;

use queuegen_runtime::metrics::Registry;
use queuegen_runtime::StreamSlot;
use queuegen_tests::exposition;
use queuegen_tests::suite::{QueueKind, RunningWorker, ScriptedJob, Tuning};
use queuegen_tests::support::{all_pending, deliver_to, pending_entries};

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

/// Row 4: every job was read by a consumer that vanished; two workers
/// started together race to claim the entries once they are idle. Each
/// entry must be claimed, and its handler run, exactly once.
pub async fn two_loops_racing(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(2),
        concurrency: Some(64),
        // Far longer than a handler runs, even on a loaded machine: a second
        // claim here would be a race lost, not a handler found idle.
        claim_min_idle_ms: Some(2000),
        claim_every_ms: Some(20),
        // Small claims, so that the two loops interleave over one pending list.
        claim_batch: Some(4),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "recovery-race", QueueKind::Jobs, tuning).await;
    let jobs = ScriptedJob::many("ok", run.size.jobs(60));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());
    let mut conn = stage.conn();
    for key in stage.config.ready_keys() {
        deliver_to(&mut conn, &key, &stage.config.group, "vanished").await;
    }

    let racer_a = stage.spec.named("racer-a").start().await.unwrap();
    let racer_b = stage.spec.named("racer-b").start().await.unwrap();
    stage.settle(&jobs, Duration::from_secs(30)).await;
    let a = racer_a.stop().await.unwrap();
    let b = racer_b.stop().await.unwrap();
    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);

    verdict.check(a.claimed + b.claimed == jobs.len() as u64, || {
        format!(
            "{} + {} claims for {} abandoned entries",
            a.claimed,
            b.claimed,
            jobs.len()
        )
    });
    for job in &jobs {
        let deliveries = places.tally.job(&job.job_id).deliveries;
        verdict.check(deliveries == 1, || {
            format!("{}: its handler ran {deliveries} times", job.job_id)
        });
    }
    verdict.note(format!(
        "claims: {} by one loop, {} by the other",
        a.claimed, b.claimed
    ));
    verdict
}

/// Row 6: every job was read by a consumer that vanished; then an outsider
/// trims the two oldest entries (`XTRIM MAXLEN`) and deletes two more
/// (`XDEL`), one of them already delivered past `poison.max_deliveries`, so
/// that both the claim and the quarantine path meet a deleted entry. The
/// worker's recovery must report every one of them, in the
/// `queuegen_pending_deleted_total` metric and an error log line naming its
/// ID, and complete the rest.
pub async fn pending_entries_deleted(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(1),
        claim_min_idle_ms: Some(300),
        claim_every_ms: Some(100),
        poison_max_deliveries: Some(3),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "pending-deleted", QueueKind::Jobs, tuning).await;
    let jobs = ScriptedJob::many("ok", run.size.jobs(10));
    let published = stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());
    let key = stage.config.ready_key(StreamSlot::new(0));
    let group = stage.config.group.clone();
    let mut conn = stage.conn();
    deliver_to(&mut conn, &key, &group, "vanished").await;

    // The outsider: the two oldest trimmed away, two in the middle deleted.
    let trimmed: u64 = redis::cmd("XTRIM")
        .arg(&key)
        .arg("MAXLEN")
        .arg(jobs.len() - 2)
        .query_async(&mut conn)
        .await
        .unwrap();
    verdict.check(trimmed == 2, || {
        format!("XTRIM removed {trimmed} entries, not 2")
    });
    let (plain, poison) = (jobs.len() / 2, jobs.len() - 3);
    let poison_id = &published[poison].stream_id;
    let _: redis::Value = redis::cmd("XCLAIM")
        .arg(&key)
        .arg(&*group)
        .arg("vanished")
        .arg(0)
        .arg(poison_id)
        .arg("RETRYCOUNT")
        .arg(stage.config.poison.max_deliveries + 2)
        .arg("JUSTID")
        .query_async(&mut conn)
        .await
        .unwrap();
    let poison_entry = pending_entries(&mut conn, &key, &group)
        .await
        .into_iter()
        .find(|entry| &entry.id == poison_id);
    verdict.check(
        poison_entry.is_some_and(|entry| {
            entry.times_delivered > stage.config.poison.max_deliveries as usize
        }),
        || format!("{poison_id} was not made a poison candidate"),
    );
    for index in [plain, poison] {
        let removed: u64 = redis::cmd("XDEL")
            .arg(&key)
            .arg(&published[index].stream_id)
            .query_async(&mut conn)
            .await
            .unwrap();
        verdict.check(removed == 1, || {
            format!("XDEL of job {index} removed {removed}")
        });
    }
    let destroyed: BTreeSet<usize> = [0, 1, plain, poison].into();
    verdict.expected_lost = destroyed.len() as u64;

    let redis = stage.deployment.worker_redis().await;
    let mut registry = Registry::default();
    let worker = RunningWorker::spawn(
        stage
            .spec
            .named("recoverer")
            .worker(&redis)
            .metrics(&mut registry),
    );
    let (gone, live): (Vec<_>, Vec<_>) = jobs
        .iter()
        .enumerate()
        .partition(|(index, _)| destroyed.contains(index));
    let gone: Vec<ScriptedJob> = gone.into_iter().map(|(_, job)| job.clone()).collect();
    let live: Vec<ScriptedJob> = live.into_iter().map(|(_, job)| job.clone()).collect();
    stage.settle(&live, Duration::from_secs(20)).await;
    let pending_left = all_pending(&mut conn, &stage.config).await.len();
    let report = worker.stop().await.unwrap();
    let places = stage.places(&live).await;
    stage.judge(&mut verdict, &live, &places);
    let lost_with_their_entries = stage.places(&gone).await.lost(&gone).len() as u64;
    verdict.count(lost_with_their_entries, 0);
    verdict.check(pending_left == 0, || {
        format!("{pending_left} entries still pending after recovery")
    });

    let mut text = String::new();
    queuegen_runtime::metrics::prometheus_client::encoding::text::encode(&mut text, &registry)
        .unwrap();
    let reported = exposition::parse(&text)
        .unwrap()
        .sum("queuegen_pending_deleted_total", &[]);
    verdict.check(reported == destroyed.len() as f64, || {
        format!(
            "queuegen_pending_deleted_total is {reported}, {} entries were deleted",
            destroyed.len()
        )
    });
    for &index in &destroyed {
        let id = &published[index].stream_id;
        let logged = run.logs.lines_with(&["ERROR", id]);
        verdict.check(!logged.is_empty(), || {
            format!("no error log line names the deleted pending entry {id} (job {index})")
        });
    }
    verdict.note(format!(
        "metric {reported}, {} error lines; {} claimed",
        run.logs.lines_with(&["ERROR", "deleted"]).len(),
        report.claimed
    ));
    verdict
}
