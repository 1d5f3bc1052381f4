//! Row 7: three groups read one queue, one keeping up (and trimming all the time), one lagging, one stuck with pending entries of a killed worker; no entry a group still needs is trimmed.
//!
//! Every worker trims every 100 ms with a retention of 0: whatever every
//! group has acknowledged goes at once. The `fast` group's worker runs
//! throughout, so trims keep coming while the others lag. Wave 1 is worked
//! by all three groups and must be trimmed away. Wave 2 is read by a `stuck`
//! worker that is then killed with SIGKILL (its entries stay pending), and
//! waves 2 and 3 are never read by the `lagging` group while the trimmer
//! keeps running. Then the lagging and stuck groups recover: every group
//! must do every job exactly once, so nothing they needed was trimmed.

use std::time::Duration;

use queuegen_runtime::metrics::Registry;
use queuegen_tests::exposition;
use queuegen_tests::suite::{Hold, QueueKind, RunningWorker, ScriptedJob, Tuning, WorkerSpec};
use queuegen_tests::support::eventually;

use super::Run;
use crate::process::killed;
use crate::stage::{tally, until_tally, Stage};
use crate::verdict::Verdict;

const FAST: &str = "fast";
const LAGGING: &str = "lagging";
const STUCK: &str = "stuck";
/// Trim passes over the streams while the lagging and stuck groups need them.
const PASSES_UNDER_LAG: f64 = 10.0;
const WAIT: Duration = Duration::from_secs(30);

pub async fn under_lag(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(2),
        group: Some(FAST.to_owned()),
        claim_min_idle_ms: Some(1000),
        claim_every_ms: Some(100),
        retention_min_age_ms: Some(0),
        trim_every_ms: Some(100),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "trim-under-lag", QueueKind::Jobs, tuning).await;
    let group = |name: &str| {
        let mut spec = stage.spec.named(name);
        spec.tuning.group = Some(name.to_owned());
        spec
    };
    let (fast, lagging, stuck) = (group(FAST), group(LAGGING), group(STUCK));
    for spec in [&lagging, &stuck] {
        stage.deployment.create_groups(&spec.config()).await;
    }
    let wave = |n: usize| ScriptedJob::many(&format!("ok{n}"), run.size.jobs(10));
    let (wave1, wave2, wave3) = (wave(1), wave(2), wave(3));
    let all: Vec<ScriptedJob> = [&wave1, &wave2, &wave3]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let mut verdict = Verdict::new(all.len() * 3);

    let redis = stage.deployment.worker_redis().await;
    let mut registry = Registry::default();
    let fast_worker = RunningWorker::spawn(fast.worker(&redis).metrics(&mut registry));
    let trim_passes = || {
        let mut text = String::new();
        queuegen_runtime::metrics::prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap();
        exposition::parse(&text)
            .unwrap()
            .sum("queuegen_trim_passes_total", &[("stream", "ready")])
    };

    // Wave 1: every group works it, and the trimmer removes it.
    stage.publish(&wave1).await;
    let lagging_worker = lagging.start().await.unwrap();
    let stuck_worker = stuck.start().await.unwrap();
    for spec in [&fast, &lagging, &stuck] {
        let done = all_done(&stage, spec, &wave1).await;
        verdict.check(done, || format!("{} never finished wave 1", spec.consumer));
    }
    // Every worker trims (under the partition's lease): count them all.
    let mut reports = vec![
        lagging_worker.stop().await.unwrap(),
        stuck_worker.stop().await.unwrap(),
    ];
    let stage_ref = &stage;
    let trimmed_wave1 = eventually(
        WAIT,
        move || async move { ready_length(stage_ref).await == 0 },
    )
    .await;
    verdict.check(trimmed_wave1, || {
        "wave 1, done by every group, was never trimmed".to_owned()
    });

    // Wave 2: read by a stuck worker that is killed; wave 3: read by no one
    // but the fast group. Meanwhile the trimmer keeps trying.
    let mut stuck_victim = stage.spawn(
        &WorkerSpec {
            hold: Hold::BeforeEffect,
            tuning: Tuning {
                handler_timeout_ms: Some(3_600_000),
                concurrency: Some(wave2.len()),
                ..stuck.tuning.clone()
            },
            ..stuck.named("stuck-victim")
        },
        None,
    );
    stage.publish(&wave2).await;
    let held = until_tally(&stuck.ledger(stage.admin()), &wave2, WAIT, |tally| {
        wave2
            .iter()
            .all(|job| tally.job(&job.job_id).deliveries == 1)
    })
    .await;
    verdict.check(held, || {
        format!(
            "the stuck worker never read wave 2:\n{}",
            stuck_victim.log_tail()
        )
    });
    let status = stuck_victim.kill().await;
    verdict.check(killed(status), || {
        format!("the stuck worker ended with {status}")
    });
    stage.publish(&wave3).await;
    let before = trim_passes();
    let fast_done = all_done(&stage, &fast, &all).await;
    let trim_passes_ref = &trim_passes;
    let passes = eventually(WAIT, move || async move {
        trim_passes_ref() >= before + PASSES_UNDER_LAG
    })
    .await;
    verdict.check(fast_done && passes, || {
        format!("the fast group never worked every wave with {PASSES_UNDER_LAG} trim passes after")
    });
    let kept = ready_length(&stage).await;
    let needed = (wave2.len() + wave3.len()) as u64;
    verdict.check(kept == needed, || {
        format!(
            "{kept} entries kept under lag, {needed} are needed by the lagging and stuck groups"
        )
    });

    // The lagging and stuck groups catch up: nothing they need may be gone.
    let lagging_worker = lagging.start().await.unwrap();
    let stuck_worker = stuck.start().await.unwrap();
    let mut tallies = Vec::new();
    for spec in [&fast, &lagging, &stuck] {
        all_done(&stage, spec, &all).await;
        tallies.push((
            spec.consumer.clone(),
            tally(&spec.ledger(stage.admin()), &all).await,
        ));
    }
    reports.push(fast_worker.stop().await.unwrap());
    reports.push(lagging_worker.stop().await.unwrap());
    reports.push(stuck_worker.stop().await.unwrap());

    for (group, tally) in &tallies {
        let not_done: Vec<&str> = all
            .iter()
            .filter(|job| !tally.job(&job.job_id).done)
            .map(|job| job.job_id.as_str())
            .collect();
        verdict.count(not_done.len() as u64, tally.duplicates());
        verdict.check(not_done.is_empty(), || {
            format!("group {group} never did {not_done:?}: a trim removed what it needed")
        });
    }
    let trimmed: u64 = reports.iter().map(|report| report.trimmed).sum();
    let aborts: u64 = reports.iter().map(|report| report.trim_aborts).sum();
    verdict.note(format!(
        "{trimmed} entries trimmed, {aborts} aborts; {kept} kept through {} passes under lag",
        PASSES_UNDER_LAG
    ));
    verdict
}

/// Waits until the group of `spec` did every one of `jobs`; whether it did.
async fn all_done(stage: &Stage, spec: &WorkerSpec, jobs: &[ScriptedJob]) -> bool {
    until_tally(&spec.ledger(stage.admin()), jobs, WAIT, |tally| {
        jobs.iter().all(|job| tally.job(&job.job_id).done)
    })
    .await
}

/// Entries in the ready streams of every partition.
async fn ready_length(stage: &Stage) -> u64 {
    let mut total = 0;
    for key in stage.config.ready_keys() {
        let length: u64 = redis::cmd("XLEN")
            .arg(&key)
            .query_async(&mut stage.conn())
            .await
            .unwrap();
        total += length;
    }
    total
}
