//! A process that runs one test schedule's loop (`queuegen_runtime::Scheduler`) until SIGTERM or SIGINT, for the schedule tests to start several of and kill.
//!
//! Its schedule comes in `QG_SCHEDULE` (see `queuegen_tests::schedules`).
//! Logs go to stderr; when it stops by itself it prints its report on stdout.

use std::process::ExitCode;

use queuegen_runtime::{shutdown_signal, Redis, Scheduler};
use queuegen_tests::schedules::TestSchedule;

#[tokio::main]
async fn main() -> ExitCode {
    queuegen_tests::support::process_main("schedule-worker", run()).await
}

async fn run() -> Result<(), String> {
    let spec = TestSchedule::from_env()?;
    let redis = Redis::connect(&spec.url)
        .await
        .map_err(|err| err.to_string())?;
    let report = Scheduler::new(&redis, [spec.schedule()])
        .run_until(shutdown_signal())
        .await
        .map_err(|err| err.to_string())?;
    println!("{report:?}");
    Ok(())
}
