//! Row 5: a job that kills every worker process running it, restarted like a crash-looping pod, is quarantined after `poison.max_deliveries` deliveries: exactly one dead letter.
//!
//! Each worker process dies with SIGKILL (the `handler_crash` failpoint) when
//! it runs the `crash` job; the scenario restarts it, as a supervisor would.
//! The pending list's delivery count grows by one per crash (each new
//! process claims the entry once it is idle), and once it reaches the budget
//! the next process's recovery dead-letters it instead of running it again.

use std::time::Duration;

use queuegen_tests::suite::handler::HANDLER_CRASH;
use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};
use queuegen_tests::support::dead_letters;

use super::Run;
use crate::process::killed;
use crate::stage::Stage;
use crate::verdict::Verdict;

/// How long one process generation may take to crash or to quarantine:
/// `claim.min_idle` (1.2 s) and a recovery period, with room to spare.
const GENERATION_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn crash_loop(run: Run) -> Verdict {
    // `retrying`: poison.max_deliveries 3, claims after 1.2 s idle.
    let stage = Stage::new(
        run.target,
        "crash-loop",
        QueueKind::Retrying,
        Tuning::default(),
    )
    .await;
    let max_deliveries = u64::from(stage.config.poison.max_deliveries);
    let mut jobs = ScriptedJob::many("crash", 1);
    jobs.extend(ScriptedJob::many("ok", run.size.jobs(5)));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    let mut crashes = 0;
    let mut quarantined = false;
    // One more generation than crashes allowed: that one quarantines.
    for generation in 0..=max_deliveries + 1 {
        let mut worker = stage.spawn(
            &stage.spec.named(format!("crash-loop-{generation}")),
            Some(HANDLER_CRASH),
        );
        let deadline = tokio::time::Instant::now() + GENERATION_TIMEOUT;
        let ended = loop {
            if let Some(status) = worker.try_wait() {
                break Some(status);
            }
            if !dead_letters(&mut stage.conn(), &stage.config)
                .await
                .is_empty()
            {
                break None;
            }
            if tokio::time::Instant::now() >= deadline {
                verdict.problem(format!(
                    "generation {generation} neither crashed nor quarantined:\n{}",
                    worker.log_tail()
                ));
                return verdict;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        match ended {
            Some(status) => {
                verdict.check(killed(status), || {
                    format!(
                        "generation {generation} ended with {status}:\n{}",
                        worker.log_tail()
                    )
                });
                crashes += 1;
            }
            None => {
                // Quarantined: this generation works the rest, then stops.
                stage.settle(&jobs, Duration::from_secs(20)).await;
                worker.terminate();
                let status = worker.wait(Duration::from_secs(20)).await;
                verdict.check(status.is_some_and(|status| status.success()), || {
                    format!("the last generation did not stop on SIGTERM: {status:?}")
                });
                let places = stage.places(&jobs).await;
                stage.judge(&mut verdict, &jobs, &places);
                quarantined = true;
                break;
            }
        }
    }
    verdict.check(quarantined, || {
        format!("never quarantined after {crashes} crashes")
    });

    let dead = dead_letters(&mut stage.conn(), &stage.config).await;
    verdict.check(dead.len() == 1, || {
        format!("{} dead letters: {dead:?}", dead.len())
    });
    if let Some((_, _, fields)) = dead.first() {
        verdict.check(
            fields["job_id"] == "crash-0"
                && fields["reason"] == "poison"
                && fields["deliveries"] == max_deliveries.to_string(),
            || format!("the dead letter is not crash-0's quarantine: {fields:?}"),
        );
    }
    verdict.check(crashes == max_deliveries, || {
        format!("{crashes} processes crashed, expected {max_deliveries} (one per delivery)")
    });
    verdict.note(format!(
        "{crashes} processes killed by the job, then 1 dead letter (reason poison)"
    ));
    verdict
}
