//! Row 17: SIGTERM to a worker process in the middle of a batch: jobs that can finish within the shutdown budget finish and are acknowledged, the rest stay pending (or unread) for another worker.
//!
//! The worker (concurrency 4, budget 2 s) reads the first four jobs: two
//! that take 1 s and two that take a minute (each only on its first
//! delivery). SIGTERM arrives while they run. The short ones must be done;
//! the two long ones must be left pending with the stopped worker as owner,
//! without an effect, and nothing else; the jobs behind them unread (or, if
//! a short job ended before the signal, read and finished). A second worker
//! then claims and reads the rest: every job done once.

use std::time::{Duration, Instant};

use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};
use queuegen_tests::support::all_pending;

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

const BUDGET_MS: u64 = 2000;

pub async fn sigterm_mid_batch(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(1),
        concurrency: Some(4),
        shutdown_budget_ms: Some(BUDGET_MS),
        handler_timeout_ms: Some(120_000),
        claim_min_idle_ms: Some(1000),
        claim_every_ms: Some(200),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "sigterm-mid-batch", QueueKind::Jobs, tuning).await;
    let short = ScriptedJob::many("slow1000", 2);
    let long = ScriptedJob::many("slow60000", 2);
    let behind = ScriptedJob::many("ok", run.size.jobs(8));
    let first: Vec<ScriptedJob> = short.iter().chain(&long).cloned().collect();
    let all: Vec<ScriptedJob> = first.iter().chain(&behind).cloned().collect();
    // One partition: the stream's order is the publishing order.
    stage.publish(&all).await;
    let mut verdict = Verdict::new(all.len());

    let mut worker = stage.spawn(&stage.spec.named("terminated"), None);
    let running = stage
        .until_tally(&first, Duration::from_secs(20), |tally| {
            first
                .iter()
                .all(|job| tally.job(&job.job_id).deliveries == 1)
        })
        .await;
    if !running {
        verdict.problem(format!(
            "the first four jobs never ran:\n{}",
            worker.log_tail()
        ));
        return verdict;
    }
    worker.terminate();
    let terminated_at = Instant::now();
    let status = worker.wait(Duration::from_secs(30)).await;
    let took = terminated_at.elapsed();
    verdict.check(status.is_some_and(|status| status.success()), || {
        format!(
            "the worker did not stop by itself after SIGTERM: {status:?}\n{}",
            worker.log_tail()
        )
    });
    let report = worker.log();
    verdict.check(report.contains("in_flight_left_pending: 2"), || {
        format!(
            "its report does not say 2 jobs were left pending:\n{}",
            worker.log_tail()
        )
    });

    let tally = stage.tally(&all).await;
    for job in &short {
        verdict.check(tally.job(&job.job_id).done, || {
            format!(
                "{} (1 s) did not finish within the {BUDGET_MS} ms budget",
                job.job_id
            )
        });
    }
    let pending = all_pending(&mut stage.conn(), &stage.config).await;
    verdict.check(
        pending.len() == long.len()
            && pending
                .iter()
                .all(|entry| entry.consumer == worker.consumer && entry.times_delivered == 1),
        || format!("left pending: {pending:?}, expected the two long jobs, owned by the stopped worker"),
    );
    for job in &long {
        verdict.check(!tally.job(&job.job_id).done, || {
            format!(
                "{} has an effect though its handler was abandoned",
                job.job_id
            )
        });
    }
    // Whatever else it read before the SIGTERM (the jobs behind, if a short
    // job finished first) it finished too; nothing more is pending.
    let read_behind: Vec<&str> = behind
        .iter()
        .filter(|job| tally.job(&job.job_id).deliveries > 0)
        .map(|job| job.job_id.as_str())
        .collect();
    verdict.check(
        read_behind.iter().all(|job_id| tally.job(job_id).done),
        || format!("jobs behind the batch read but neither done nor pending: {read_behind:?}"),
    );

    let survivor = stage.spec.named("survivor").start().await.unwrap();
    stage.settle(&all, Duration::from_secs(30)).await;
    let survivor_report = survivor.stop().await.unwrap();
    let places = stage.places(&all).await;
    stage.judge(&mut verdict, &all, &places);
    verdict.note(format!(
        "stopped {:.1}s after SIGTERM (budget {:.1}s): {} done, {} left pending, {} unread; survivor claimed {}",
        took.as_secs_f64(),
        BUDGET_MS as f64 / 1000.0,
        short.len(),
        pending.len(),
        behind.len() - read_behind.len(),
        survivor_report.claimed
    ));
    verdict
}
