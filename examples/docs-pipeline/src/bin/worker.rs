//! Runs a worker for each of the four queues until Ctrl-C or SIGTERM.

use clap::Parser;
use docs_pipeline::handlers::{
    self, ExportHandler, NotificationHandler, OcrHandler, ReconciliationHandler,
};
use docs_pipeline::queues::{export, notification, ocr, reconciliation};
use tokio::sync::watch;

#[derive(Parser)]
#[command(about = "Work the docs-pipeline queues until Ctrl-C")]
struct Args {
    /// Redis URL.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let (redis, results) = handlers::connect(&args.redis).await?;

    // One signal stops all four workers.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let ocr = ocr::worker(
        &redis,
        OcrHandler {
            results: results.clone(),
        },
    )
    .run_until(stopped(stop_rx.clone()));
    let notification = notification::worker(
        &redis,
        NotificationHandler {
            results: results.clone(),
        },
    )
    .run_until(stopped(stop_rx.clone()));
    let export = export::worker(
        &redis,
        ExportHandler {
            results: results.clone(),
        },
    )
    .run_until(stopped(stop_rx.clone()));
    let reconciliation = reconciliation::worker(&redis, ReconciliationHandler { results })
        .run_until(stopped(stop_rx));

    let signal = async move {
        queuegen_runtime::shutdown_signal().await;
        tracing::info!("shutting down: finishing jobs in flight");
        let _ = stop_tx.send(true);
    };
    let (_, ocr, notification, export, reconciliation) =
        tokio::join!(signal, ocr, notification, export, reconciliation);
    for (queue, report) in [
        ("ocr", ocr?),
        ("notification", notification?),
        ("export", export?),
        ("reconciliation", reconciliation?),
    ] {
        tracing::info!(queue, ?report, "worker stopped");
    }
    Ok(())
}
