//! A worker process for the failure suite's pipeline rows: the tests spec's `docs` pipeline stages named in `QG_STAGES`, with the recording handlers of `queuegen_tests::suite::pipeline`, until SIGTERM or SIGINT.
//!
//! `REDIS_URL` says where, `QG_STAGES` which stages (comma-separated),
//! `QG_CONSUMER` the consumer name's prefix. Built with failpoints: with
//! `QUEUEGEN_FAILPOINT=<point>` it dies with SIGKILL the first time one of
//! its stages reaches that point (`after_handoff_published`,
//! `after_join_published`, `after_run_settled`).

use std::process::ExitCode;

use queuegen_runtime::{shutdown_signal, Redis};
use queuegen_tests::suite::pipeline;

#[tokio::main]
async fn main() -> ExitCode {
    queuegen_tests::support::process_main("pipeline-worker", run()).await
}

async fn run() -> Result<(), String> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let url = var("REDIS_URL")?;
    let stages = var("QG_STAGES")?;
    let consumer = var("QG_CONSUMER")?;
    let stages: Vec<&str> = stages.split(',').map(str::trim).collect();
    if let Some(unknown) = stages.iter().find(|s| !pipeline::STAGES.contains(s)) {
        return Err(format!(
            "QG_STAGES names {unknown}, not a stage of the docs pipeline ({})",
            pipeline::STAGES.join(", ")
        ));
    }
    let redis = Redis::connect(&url).await.map_err(|err| err.to_string())?;
    let workers = pipeline::start(&redis, &stages, &consumer);
    shutdown_signal().await;
    for worker in workers {
        let report = worker.stop().await;
        println!("{report:?}");
    }
    Ok(())
}
