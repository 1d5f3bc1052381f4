//! A worker process for the transition-crash tests: the `retrying` queue with the scripted handler, built with failpoints.
//!
//! With `QUEUEGEN_FAILPOINT=<point>` in its environment it dies with SIGKILL
//! the first time it reaches that point (see `queuegen_runtime::failpoint`).
//! Settings: `QG_REDIS_URL`, `QG_CONSUMER` (its consumer name) and
//! `QG_KEY_PREFIX` (the key prefix the test uses).

use std::process::ExitCode;

use queuegen_runtime::{Redis, Worker};
use queuegen_tests::fixtures::retrying_config;
use queuegen_tests::scripted::Scripted;

fn setting(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("transition-worker: {name} is not set"))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
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
    let config = retrying_config(&setting("QG_KEY_PREFIX")?);
    let failed = |err: &dyn std::fmt::Display| format!("transition-worker: {err}");
    let redis = Redis::connect(&url).await.map_err(|err| failed(&err))?;
    let handler = Scripted::connect(&url, &config)
        .await
        .map_err(|err| failed(&err))?;
    Worker::new(&redis, config, handler)
        .consumer_name(consumer)
        .run_until(std::future::pending())
        .await
        .map_err(|err| failed(&err))?;
    Ok(())
}
