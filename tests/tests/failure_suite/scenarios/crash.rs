//! Rows 1 and 2: a worker process killed with SIGKILL while it holds every job, before or after their effects; another worker recovers them.
//!
//! The victim reads every job and stops inside each handler, either before
//! the effect (row 1) or after the effect is durable in the ledger but before
//! the handler returns `Done`, so before any `XACK` (row 2). Then it is
//! killed with SIGKILL. A survivor claims the entries once they are idle
//! (`XAUTOCLAIM`) and runs them again: row 1 must apply each effect once,
//! row 2 must find each result and apply nothing.

use std::time::Duration;

use queuegen_tests::suite::{Hold, QueueKind, ScriptedJob, Tuning};
use queuegen_tests::support::all_pending;

use super::Run;
use crate::process::killed;
use crate::stage::Stage;
use crate::verdict::Verdict;

pub async fn killed_before_effect(run: Run) -> Verdict {
    killed_holding(run, Hold::BeforeEffect).await
}

pub async fn killed_after_effect(run: Run) -> Verdict {
    killed_holding(run, Hold::AfterEffect).await
}

async fn killed_holding(run: Run, hold: Hold) -> Verdict {
    // The generated `crashy` queue: handler timeout 1s, claims after 2s idle.
    let stage = Stage::new(
        run.target,
        "killed-holding",
        QueueKind::Crashy,
        Tuning::default(),
    )
    .await;
    let jobs = ScriptedJob::many("ok", run.size.jobs(8));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    // The victim takes every job at once and never lets go: an hour's
    // handler timeout keeps them in flight, not rescheduled, until the kill.
    let victim_spec = {
        let mut spec = stage.spec.named("victim");
        spec.hold = hold;
        spec.tuning.concurrency = Some(jobs.len());
        spec.tuning.handler_timeout_ms = Some(3_600_000);
        spec
    };
    let mut victim = stage.spawn(&victim_spec, None);
    let holding = stage
        .until_tally(&jobs, Duration::from_secs(20), |tally| {
            jobs.iter().all(|job| {
                let job = tally.job(&job.job_id);
                match hold {
                    Hold::AfterEffect => job.done,
                    _ => job.deliveries == 1,
                }
            })
        })
        .await;
    if !holding {
        verdict.problem(format!(
            "the victim never held every job ({hold:?}):\n{}",
            victim.log_tail()
        ));
        return verdict;
    }
    let status = victim.kill().await;
    let killed_at = std::time::Instant::now();
    verdict.check(killed(status), || {
        format!("the victim ended with {status}, not SIGKILL")
    });
    let held = all_pending(&mut stage.conn(), &stage.config)
        .await
        .iter()
        .filter(|entry| entry.consumer == victim.consumer)
        .count();
    verdict.check(held == jobs.len(), || {
        format!(
            "the killed victim left {held} of {} jobs pending",
            jobs.len()
        )
    });

    let survivor = stage.spec.named("survivor").start().await.unwrap();
    stage.settle(&jobs, Duration::from_secs(30)).await;
    // Measured, not asserted (speed belongs to the bench): the bound
    // is claim.min_idle + claim.every + 1 s from the kill to the last job done.
    let recovered_in = killed_at.elapsed();
    let bound = stage.config.claim.min_idle + stage.config.claim.every + Duration::from_secs(1);
    let report = survivor.stop().await.unwrap();
    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);

    verdict.check(report.claimed == jobs.len() as u64, || {
        format!(
            "the survivor claimed {} of {} jobs",
            report.claimed,
            jobs.len()
        )
    });
    let tally = &places.tally;
    for job in &jobs {
        let job_tally = tally.job(&job.job_id);
        verdict.check(job_tally.deliveries == 2, || {
            format!(
                "{}: delivered {} times, not twice",
                job.job_id, job_tally.deliveries
            )
        });
        verdict.check(job_tally.applied == 1, || {
            format!(
                "{}: its effect applied {} times",
                job.job_id, job_tally.applied
            )
        });
        let absorbed = u64::from(hold == Hold::AfterEffect);
        verdict.check(job_tally.absorbed == absorbed, || {
            format!(
                "{}: {} redeliveries found the result, expected {absorbed}",
                job.job_id, job_tally.absorbed
            )
        });
    }
    verdict.note(format!(
        "{} claimed by XAUTOCLAIM, {} results found on redelivery; recovered {:.1}s after the kill (bound {:.1}s)",
        report.claimed,
        tally.absorbed(),
        recovered_in.as_secs_f64(),
        bound.as_secs_f64()
    ));
    verdict
}
