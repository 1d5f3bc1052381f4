//! Row 9: redis-server killed with SIGKILL and restarted from its AOF while a worker runs: the worker reconnects and every job ends done; with `appendfsync always` nothing acknowledged is lost, with `everysec` the loss window is measured and reported.
//!
//! The ledger (the jobs' durable results) lives in the same server, so with
//! `everysec` a restart can forget up to about a second of writes: acks,
//! results and the ledger's counts alike. A job whose ack was forgotten is
//! delivered again; if its result was forgotten too, its effect runs again:
//! the row reports those re-runs as the window's cost (the outbox and
//! idempotency keys outside Redis are what reconcile them), and fails only
//! for a lost job. With `always` every reply the worker saw was on disk, so
//! the row also fails for any re-run effect.

use std::time::Duration;

use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};
use queuegen_tests::support::unique_prefix;

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

pub async fn aof_restart(run: Run, fsync: &'static str) -> Verdict {
    let key_prefix = unique_prefix(&format!("aof-{fsync}"));
    let deployment = run
        .target
        .deploy_with(
            &key_prefix,
            &["--appendonly", "yes", "--appendfsync", fsync],
        )
        .await;
    let tuning = Tuning {
        concurrency: Some(4),
        claim_min_idle_ms: Some(1000),
        claim_every_ms: Some(200),
        ..Tuning::default()
    };
    let mut stage = Stage::on(deployment, key_prefix, QueueKind::Jobs, tuning).await;
    let jobs = ScriptedJob::many("slow20", run.size.jobs(60));
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());

    let mut worker = stage.spawn(&stage.spec.named("survivor"), None);
    let quarter = jobs.len() / 4;
    let started = stage
        .until_tally(&jobs, Duration::from_secs(20), |tally| {
            tally.done() >= quarter as u64
        })
        .await;
    if !started {
        verdict.problem(format!(
            "the worker never got going:\n{}",
            worker.log_tail()
        ));
        return verdict;
    }
    let before = stage.tally(&jobs).await.done();
    stage.deployment.crash_and_restart().await;
    let reconnected = stage.admin_answers().await;
    verdict.check(reconnected, || {
        "the admin connection never came back".to_owned()
    });
    let after_restart = stage.tally(&jobs).await.done();

    stage.settle(&jobs, Duration::from_secs(60)).await;
    worker.terminate();
    let status = worker.wait(Duration::from_secs(30)).await;
    verdict.check(status.is_some(), || {
        format!(
            "the worker did not stop after the restart:\n{}",
            worker.log_tail()
        )
    });
    let places = stage.places(&jobs).await;
    let forgotten = before.saturating_sub(after_restart);
    if fsync == "always" {
        stage.judge(&mut verdict, &jobs, &places);
        verdict.check(forgotten == 0, || {
            format!("{forgotten} recorded effect(s) were forgotten by an fsync-always restart")
        });
    } else {
        // Lost jobs still fail the row; effects run again are the window.
        verdict.count(places.lost(&jobs).len() as u64, places.tally.duplicates());
        verdict.problems.extend(places.problems(&jobs));
    }
    verdict.note(format!(
        "appendfsync {fsync}: {before} done just before the kill, {after_restart} on record after the restart; worker reconnected, {} done in the end",
        places.tally.done()
    ));
    verdict
}
