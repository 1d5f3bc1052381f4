//! Rows 13 and 16: a worker refuses to start, naming the server, where its library version is missing or keys may be evicted; the job waits intact for a worker that may start.

use std::time::Duration;

use queuegen_runtime::error::SetupError;
use queuegen_runtime::functions::{self, Function};
use queuegen_runtime::{Error, Redis, Result, WorkerReport};
use queuegen_tests::library;
use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning, WorkerSpec};
use queuegen_tests::support::{all_pending, unique_prefix};

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

/// A refused worker stops by itself well within this.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a worker of `spec` (logged in as workers are) until it stops by itself.
async fn run_to_refusal(stage: &Stage, spec: &WorkerSpec) -> Option<Result<WorkerReport>> {
    let redis: Redis = stage.deployment.worker_redis().await;
    tokio::time::timeout(
        REFUSAL_TIMEOUT,
        spec.worker(&redis).run_until(std::future::pending()),
    )
    .await
    .ok()
}

/// The error a worker stopped with, as it reads.
fn refusal_message(outcome: &Option<Result<WorkerReport>>) -> String {
    match outcome {
        Some(Err(err)) => err.to_string(),
        _ => String::new(),
    }
}

/// Row 13: no library at all, then only another version: each time the
/// worker refuses to start with `LibraryMissing` naming the server and the
/// library, loads nothing itself and delivers nothing; once `apply` loaded
/// its version, a worker starts and does the job.
pub async fn library_missing(run: Run) -> Verdict {
    let key_prefix = unique_prefix("library-missing");
    let deployment = run.target.deploy(&key_prefix).await;
    let stage = Stage::unapplied(
        deployment,
        key_prefix,
        QueueKind::Retrying,
        Tuning::default(),
    );
    stage.deployment.create_groups(&stage.config).await;
    let jobs = ScriptedJob::many("ok", 1);
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());
    let primaries = stage.deployment.primaries();
    let spec = stage.spec.named("refused");
    let library_name = stage.config.functions.clone();

    let current = queuegen::gen::functions::LIBRARY_VERSION;
    let other_version = library::as_version(
        &library::code(&library::tests_library_path()),
        &stage.config.service,
        current,
        current + 5,
    );
    for situation in ["no library", "only another version"] {
        if situation == "only another version" {
            library::load_code(stage.admin(), &other_version).await;
        }
        let outcome = run_to_refusal(&stage, &spec).await;
        let message = refusal_message(&outcome);
        match outcome {
            Some(Err(Error::Setup(SetupError::LibraryMissing {
                server, library, ..
            }))) => verdict.check(
                // One server, or every Cluster primary without it, by address.
                server
                    .split(", ")
                    .all(|named| primaries.iter().any(|p| p == named))
                    && library == library_name
                    && message.contains("run `queuegen apply`"),
                || format!("{situation}: the refusal names {server} and {library}: {message}"),
            ),
            other => verdict.problem(format!(
                "{situation}: expected LibraryMissing, got {other:?}"
            )),
        }
    }
    let version = stage.config.function(Function::Version);
    let own: redis::RedisResult<String> = functions::command(&version, &functions::Version)
        .query_async(&mut stage.conn())
        .await;
    verdict.check(own.is_err(), || {
        format!("a refused worker loaded its library itself: {own:?}")
    });
    let pending = all_pending(&mut stage.conn(), &stage.config).await;
    let tally = stage.tally(&jobs).await;
    verdict.check(pending.is_empty() && tally.deliveries() == 0, || {
        format!("a refused worker delivered the job: pending {pending:?}, {tally:?}")
    });

    stage.deployment.load_library().await;
    let worker = stage.spec.named("allowed").start().await.unwrap();
    stage.settle(&jobs, Duration::from_secs(20)).await;
    worker.stop().await.unwrap();
    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);
    verdict.note("refused twice, naming the server; done once the library was loaded");
    verdict
}

/// Row 16: `maxmemory-policy allkeys-lru`: the worker refuses to start with
/// `EvictionPolicy` naming the server and the policy, and delivers nothing;
/// once the policy is `noeviction`, a worker starts and does the job.
pub async fn eviction_policy_refused(run: Run) -> Verdict {
    let key_prefix = unique_prefix("eviction-policy");
    let deployment = run
        .target
        .deploy_with(&key_prefix, &["--maxmemory-policy", "allkeys-lru"])
        .await;
    let stage = Stage::on(deployment, key_prefix, QueueKind::Jobs, Tuning::default()).await;
    let jobs = ScriptedJob::many("ok", 1);
    stage.publish(&jobs).await;
    let mut verdict = Verdict::new(jobs.len());
    let primaries = stage.deployment.primaries();

    let outcome = run_to_refusal(&stage, &stage.spec.named("refused")).await;
    let message = refusal_message(&outcome);
    match outcome {
        Some(Err(Error::Setup(SetupError::EvictionPolicy { server, policy }))) => {
            verdict.check(
                primaries.contains(&server) && policy == "allkeys-lru",
                || format!("the refusal names {server} and {policy}"),
            );
            for part in [
                "maxmemory-policy allkeys-lru",
                "noeviction",
                "allow_eviction_policy",
            ] {
                verdict.check(message.contains(part), || format!("{part:?} in {message}"));
            }
        }
        other => verdict.problem(format!("expected EvictionPolicy, got {other:?}")),
    }
    let pending = all_pending(&mut stage.conn(), &stage.config).await;
    let tally = stage.tally(&jobs).await;
    verdict.check(pending.is_empty() && tally.deliveries() == 0, || {
        format!("a refused worker delivered the job: pending {pending:?}, {tally:?}")
    });

    stage
        .deployment
        .config_set("maxmemory-policy", "noeviction")
        .await;
    let worker = stage.spec.named("allowed").start().await.unwrap();
    stage.settle(&jobs, Duration::from_secs(20)).await;
    worker.stop().await.unwrap();
    let places = stage.places(&jobs).await;
    stage.judge(&mut verdict, &jobs, &places);
    verdict.note("refused naming the server; done once the policy was noeviction");
    verdict
}
