//! Row 11: redis-server stopped with SIGSTOP for longer than every client timeout while two workers work and a producer publishes; timeouts never cause a second effect.
//!
//! During the pause every command times out on the client (the shared
//! connection after 10 s, blocking reads after their block time plus 5 s),
//! yet stays in its socket and is applied when the server resumes: a
//! timed-out ledger write, `XACK`, transition or `XADD` may well have
//! happened. Handlers fail and are retried, the producer publishes again
//! what timed out (so a job may be in the stream twice). Every job must
//! still end done, its effect applied once; redeliveries find the result.
//!
//! `claim.min_idle` is longer than the pause: entries whose handlers wait
//! out the pause are not claimed by the other worker meanwhile (a worker
//! stopped past `min_idle` is row 3, ownership-checked completion).

use std::time::{Duration, Instant};

use queuegen_runtime::error::RedisError;
use queuegen_runtime::Error;
use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};

use super::Run;
use crate::stage::{new_job, Stage};
use crate::verdict::Verdict;

/// Longer than the shared connection's response timeout (10 s, in
/// runtime/src/redis.rs) and a blocking read's (its block time + 5 s).
const PAUSE: Duration = Duration::from_secs(12);

pub async fn server_paused(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(2),
        // Longer than the pause and every timeout in it: a handler waiting
        // on Redis is not abandoned, so a count it records is not lost.
        handler_timeout_ms: Some(60_000),
        claim_min_idle_ms: Some(20_000),
        claim_every_ms: Some(500),
        retry_initial_ms: Some(500),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "redis-paused", QueueKind::Jobs, tuning).await;
    let before = ScriptedJob::many("slow200", run.size.jobs(40));
    let during = ScriptedJob::many("ok", run.size.jobs(10));
    let all: Vec<ScriptedJob> = before.iter().chain(&during).cloned().collect();
    let mut verdict = Verdict::new(all.len());

    let in_process = stage.spec.named("paused-a").start().await.unwrap();
    let mut process = stage.spawn(&stage.spec.named("paused-b"), None);
    stage.publish(&before).await;
    let working = stage
        .until_tally(&before, Duration::from_secs(20), |tally| {
            tally.done() >= before.len() as u64 / 4
        })
        .await;
    verdict.check(working, || "the workers never got going".to_owned());

    // The producer publishes through the pause, publishing again whatever
    // failed, as an at-least-once producer does.
    let producer = stage.producer().await;
    let paused = stage.deployment.pause();
    let paused_at = Instant::now();
    let mut publish_failures = 0;
    let publishing = async {
        for job in &during {
            while let Err(err) = producer.publish(new_job(job)).await {
                publish_failures += 1;
                if !matches!(err, Error::Redis(RedisError { .. })) {
                    panic!("publishing {}: {err}", job.job_id);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let resume = async {
        tokio::time::sleep(PAUSE).await;
        paused.resume();
    };
    tokio::join!(publishing, resume);
    let paused_for = paused_at.elapsed();

    stage.settle(&all, Duration::from_secs(60)).await;
    let report = in_process.stop().await.unwrap();
    process.terminate();
    let stopped = process.wait(Duration::from_secs(20)).await;
    let places = stage.places(&all).await;
    stage.judge(&mut verdict, &all, &places);
    verdict.check(stopped.is_some_and(|status| status.success()), || {
        format!(
            "the worker process did not stop cleanly: {stopped:?}\n{}",
            process.log_tail()
        )
    });
    verdict.check(publish_failures > 0, || {
        "no publish timed out: the pause did not outlast the client timeout".to_owned()
    });
    verdict.note(format!(
        "paused {:.0}s; {publish_failures} publish(es) timed out and repeated; {} redeliveries found the result, {} raced a repeated publish; {} retries",
        paused_for.as_secs_f64(),
        places.tally.absorbed(),
        places.tally.raced(),
        report.retried
    ));
    verdict
}
