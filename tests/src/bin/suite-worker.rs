//! A worker process for the failure-contract suite: the ledger handler on the queue its spec names, until SIGTERM or SIGINT.
//!
//! Its whole description comes as JSON in `QG_WORKER_SPEC` (see
//! `queuegen_tests::suite::worker`). It is built with failpoints: with
//! `QUEUEGEN_FAILPOINT=<point>` it dies with SIGKILL the first time it
//! reaches that point (a runtime transition point, or `handler_crash`).
//! Logs go to stderr; when it stops by itself it prints its report on stdout.

use std::process::ExitCode;

use queuegen_runtime::{shutdown_signal, Redis};
use queuegen_tests::suite::WorkerSpec;

#[tokio::main]
async fn main() -> ExitCode {
    queuegen_tests::support::process_main("suite-worker", run()).await
}

async fn run() -> Result<(), String> {
    let spec = WorkerSpec::from_env()?;
    let redis = Redis::connect(&spec.url)
        .await
        .map_err(|err| err.to_string())?;
    let report = spec
        .worker(&redis)
        .run_until(shutdown_signal())
        .await
        .map_err(|err| err.to_string())?;
    println!("{report:?}");
    Ok(())
}
