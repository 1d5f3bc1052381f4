//! A PostgreSQL-backed process for the crash tests: `pg-process worker` works the `jobs` queue with the documents handler, `pg-process publisher` publishes the outbox, each until SIGTERM or SIGINT.
//!
//! Configured from the environment: `QG_REDIS_URL`, `QG_DATABASE_URL`,
//! `QG_PREFIX` (key prefix), `QG_PARTITIONS`, `QG_CLAIM_MIN_IDLE_MS`,
//! `QG_CLAIM_EVERY_MS` and
//! `QG_CONSUMER` (worker only). Built with failpoints: with
//! `QUEUEGEN_FAILPOINT=after_results_commit` the worker dies with SIGKILL
//! after its first commit and before the XACK, with
//! `QUEUEGEN_FAILPOINT=outbox_after_xadd` the publisher dies after its first
//! XADDs and before marking the rows dispatched.

use std::process::ExitCode;
use std::time::Duration;

use queuegen_runtime::postgres::{OutboxPublisher, PgResults, Postgres};
use queuegen_runtime::{shutdown_signal, Redis, Worker};
use queuegen_tests::fixtures::test_config;
use queuegen_tests::pg_app::{DocumentsHandler, SCHEMA};

#[tokio::main]
async fn main() -> ExitCode {
    queuegen_tests::support::process_main("pg-process", run()).await
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn env_number<T: std::str::FromStr>(name: &str) -> Result<T, String> {
    env(name)?
        .parse()
        .map_err(|_| format!("{name} is not a number"))
}

async fn run() -> Result<(), String> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let config = {
        let mut config = test_config(&env("QG_PREFIX")?, env_number("QG_PARTITIONS")?);
        config.claim.min_idle = Duration::from_millis(env_number("QG_CLAIM_MIN_IDLE_MS")?);
        // The loops lease lasts three ticks of this = a killed process's
        // partitions pass to the survivor that much later.
        config.claim.every = Duration::from_millis(env_number("QG_CLAIM_EVERY_MS")?);
        config
    };
    let redis = Redis::connect(&env("QG_REDIS_URL")?)
        .await
        .map_err(|err| err.to_string())?;
    let pg = Postgres::connect(&env("QG_DATABASE_URL")?, SCHEMA, 4)
        .await
        .map_err(|err| err.to_string())?;
    match mode.as_str() {
        "worker" => {
            let results = PgResults::start(&pg, &config)
                .await
                .map_err(|err| err.to_string())?;
            let report = Worker::new(&redis, config, DocumentsHandler { results })
                .consumer_name(env("QG_CONSUMER")?)
                .run_until(shutdown_signal())
                .await
                .map_err(|err| err.to_string())?;
            println!("{report:?}");
        }
        "publisher" => {
            let report = OutboxPublisher::new(&pg, &redis, &[config])
                .run_until(shutdown_signal())
                .await
                .map_err(|err| err.to_string())?;
            println!("{report:?}");
        }
        other => {
            return Err(format!(
                "usage: pg-process worker|publisher (got {other:?})"
            ))
        }
    }
    Ok(())
}
