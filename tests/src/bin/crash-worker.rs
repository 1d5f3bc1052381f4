//! A worker process for the crash test: it reads jobs and never finishes them, until it is killed with SIGKILL.
//!
//! It runs the generated `crashy` queue of tests/queues.yaml, with one
//! change: its handler timeout is an hour, so that the jobs it holds stay in
//! flight (pending, owned by it) until the kill, however slowly the test
//! machine runs; a timeout would instead schedule them for retry. Settings
//! come from the environment: `QG_REDIS_URL` and `QG_CONSUMER` (the consumer
//! name the test looks for).

use std::process::ExitCode;
use std::time::Duration;

use queuegen_runtime::{JobContext, JobError, Outcome, QueueConfig, Redis, Worker};
use queuegen_tests::queues::crashy::{self, TestJob};

/// Takes every job and holds it forever, like a handler stuck on a dependency.
struct NeverFinishes;

impl queuegen_runtime::Handler<TestJob> for NeverFinishes {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        std::future::pending().await
    }
}

fn setting(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("crash-worker: {name} is not set"))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("{problem}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let url = setting("QG_REDIS_URL")?;
    let consumer = setting("QG_CONSUMER")?;
    let redis = Redis::connect(&url)
        .await
        .map_err(|err| format!("crash-worker: {err}"))?;
    let config = QueueConfig {
        handler_timeout: Duration::from_secs(3600),
        ..crashy::CONFIG
    };
    Worker::new(&redis, config, NeverFinishes)
        .consumer_name(consumer)
        .run_until(std::future::pending())
        .await
        .map_err(|err| format!("crash-worker: {err}"))?;
    Ok(())
}
