//! Row 3: a worker process stopped with SIGSTOP past `claim.min_idle` while it holds jobs, then resumed: another worker has claimed and settled them, and the stale one learns it lost them.
//!
//! The victim reads every job and sleeps in each handler (1.5 s, first
//! delivery only); it is stopped for longer than `claim.min_idle` (1 s), so
//! a survivor claims every entry and does each job. Resumed, the victim's
//! handlers finish: their effects find the survivor's result (absorbed by
//! the ledger's idempotency check, never applied twice), and their acks are
//! refused by the ownership-checked ack (`QG_NOT_OWNER`): nothing is
//! acknowledged twice and the survivor's settlement stands.

use std::time::Duration;

use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

pub async fn stopped_past_min_idle(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(2),
        concurrency: Some(16),
        handler_timeout_ms: Some(60_000),
        claim_min_idle_ms: Some(1000),
        claim_every_ms: Some(200),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "stalled", QueueKind::Jobs, tuning).await;
    let jobs = ScriptedJob::many("slow1500", run.size.jobs(8));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    let mut victim = stage.spawn(&stage.spec.named("stalled"), None);
    let holding = stage
        .until_tally(&jobs, Duration::from_secs(20), |tally| {
            jobs.iter()
                .all(|job| tally.job(&job.job_id).deliveries == 1)
        })
        .await;
    if !holding {
        verdict.problem(format!(
            "the victim never held every job:\n{}",
            victim.log_tail()
        ));
        return verdict;
    }
    victim.signal("STOP");
    let survivor = stage.spec.named("survivor").start().await.unwrap();
    stage.settle(&jobs, Duration::from_secs(30)).await;
    let settled_before_resume = stage.places(&jobs).await.settled(&jobs);
    verdict.check(settled_before_resume, || {
        "the survivor did not settle the stopped worker's jobs".to_owned()
    });
    victim.signal("CONT");
    // The victim's handlers end about now; let its acks be tried and refused.
    let refused = eventually_refused(&victim, jobs.len(), Duration::from_secs(15)).await;
    victim.terminate();
    verdict.check(victim.wait(Duration::from_secs(30)).await.is_some(), || {
        format!("the resumed victim did not stop:\n{}", victim.log_tail())
    });
    let report = survivor.stop().await.unwrap();
    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);
    verdict.check(refused == jobs.len(), || {
        format!(
            "{refused} of {} acks of the stale worker were refused:\n{}",
            jobs.len(),
            victim.log_tail()
        )
    });
    verdict.note(format!(
        "survivor claimed {}; the resumed worker's {refused} acks refused (QG_NOT_OWNER), {} effects absorbed by the result check",
        report.claimed,
        places.tally.absorbed()
    ));
    verdict
}

/// How many "ack refused" lines the victim logged, once it logged `want` or `timeout` passed.
async fn eventually_refused(
    victim: &crate::process::WorkerProcess,
    want: usize,
    timeout: Duration,
) -> usize {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let refused = victim
            .log()
            .lines()
            .filter(|line| line.contains("ack refused"))
            .count();
        if refused >= want || tokio::time::Instant::now() >= deadline {
            return refused;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
