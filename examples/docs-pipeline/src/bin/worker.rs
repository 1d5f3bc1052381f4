//! Runs a worker for each of the seven queues (or the `--queue`s named), and with `--outbox-publisher` the export outbox's publisher, until Ctrl-C or SIGTERM.
//!
//! Each process also runs the schedules (queues.yaml `schedules:`) of the
//! queues it works: `ocr-canary` with `ocr`, `daily-digest` with
//! `notification`. Every pod may: each tick is published once.
//!
//! `export` and `reconciliation` keep their results in PostgreSQL
//! (DATABASE_URL): a database that is unreachable or lacks the migrations
//! of deploy/sql/ fails the start, naming it, before any job is read.
//!
//! In the generated Kubernetes Deployments (deploy/k8s/) each pod runs one
//! queue: QUEUEGEN_QUEUE names it, and `Worker::with_env` takes the consumer
//! name (the pod name) and the metrics address from QUEUEGEN_CONSUMER and
//! QUEUEGEN_METRICS_ADDR. The outbox publisher's pods set QUEUEGEN_QUEUE=none
//! and QUEUEGEN_OUTBOX_PUBLISHER=true: the publisher alone, no queue worker.

use clap::Parser;
use docs_pipeline::handlers::{
    self, ExportHandler, IndexHandler, NotificationHandler, OcrHandler, ReconciliationHandler,
    ThumbnailHandler,
};
use docs_pipeline::queues::{
    self, document_ready, export, index, notification, ocr, reconciliation, thumbnail,
};
use queuegen_runtime::postgres::Postgres;
use queuegen_runtime::{
    Envelope, Handler, Scheduler, Worker, WorkerReport, METRICS_ADDR_ENV, QUEUE_ENV,
};
use tokio::sync::watch;
use tokio::task::JoinSet;

const QUEUES: [&str; 7] = [
    "ocr",
    "index",
    "thumbnail",
    "document-ready",
    "notification",
    "export",
    "reconciliation",
];
/// `--queue none`: work no queue (the outbox publisher's pods).
const NO_QUEUE: &str = "none";

#[derive(Parser)]
#[command(about = "Work the docs-pipeline queues until Ctrl-C")]
struct Args {
    /// Redis URL.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Only these queues (repeatable, or comma-separated in QUEUEGEN_QUEUE); default all seven.
    /// `none`: no queue worker at all, only the outbox publisher (needs
    /// --outbox-publisher; not together with queue names).
    #[arg(long, env = QUEUE_ENV, value_delimiter = ',')]
    queue: Vec<String>,
    /// PostgreSQL URL of the database with queuegen's tables (deploy/sql/)
    /// and the app's (migrations/): needed by `export`, `reconciliation`
    /// and the outbox publisher.
    #[arg(long, env = "DATABASE_URL")]
    database: Option<String>,
    /// Also publish the export outbox's committed jobs (any number of
    /// processes may: each partition is published by one at a time).
    #[arg(long, env = "QUEUEGEN_OUTBOX_PUBLISHER")]
    outbox_publisher: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let no_queue = args.queue.iter().any(|q| q == NO_QUEUE);
    if let Some(unknown) = args
        .queue
        .iter()
        .find(|q| q.as_str() != NO_QUEUE && !QUEUES.contains(&q.as_str()))
    {
        anyhow::bail!(
            "no queue `{unknown}`: the queues are {}, or `{NO_QUEUE}` for only the outbox publisher",
            QUEUES.join(", ")
        );
    }
    if no_queue && args.queue.len() > 1 {
        anyhow::bail!(
            "--queue {NO_QUEUE} works no queue, so it cannot be combined with queue names: got {}",
            args.queue.join(", ")
        );
    }
    if no_queue && !args.outbox_publisher {
        anyhow::bail!(
            "--queue {NO_QUEUE} works no queue and --outbox-publisher is not set: there is nothing to do \
             (pass --outbox-publisher, or QUEUEGEN_OUTBOX_PUBLISHER=true)"
        );
    }
    let wanted = |queue: &str| args.queue.is_empty() || args.queue.iter().any(|q| q == queue);
    if std::env::var_os(METRICS_ADDR_ENV).is_some()
        && QUEUES.iter().filter(|q| wanted(q)).count() > 1
    {
        anyhow::bail!(
            "{METRICS_ADDR_ENV} serves one worker's endpoint: name one queue with --queue"
        );
    }
    let (redis, results) = handlers::connect(&args.redis).await?;
    let needs_postgres = wanted("export") || wanted("reconciliation") || args.outbox_publisher;
    let pg: Option<Postgres> = match (&args.database, needs_postgres) {
        (Some(url), true) => Some(queues::connect_postgres(url).await?),
        (None, true) => anyhow::bail!(
            "export, reconciliation and the outbox publisher keep their state in PostgreSQL: \
             pass --database URL (or DATABASE_URL)"
        ),
        (_, false) => None,
    };
    let postgres = || pg.as_ref().expect("connected above when a queue needs it");

    // One signal stops every worker.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut running = Running {
        workers: JoinSet::new(),
        schedulers: JoinSet::new(),
        stop: stop_rx,
    };
    if wanted("ocr") {
        let handler = OcrHandler {
            results: results.clone(),
        };
        running.start("ocr", ocr::worker(&redis, handler).with_env()?);
        running.schedule("ocr", ocr::scheduler(&redis));
    }
    if wanted("index") {
        let handler = IndexHandler {
            results: results.clone(),
        };
        running.start("index", index::worker(&redis, handler).with_env()?);
    }
    if wanted("thumbnail") {
        let handler = ThumbnailHandler {
            results: results.clone(),
        };
        running.start("thumbnail", thumbnail::worker(&redis, handler).with_env()?);
    }
    if wanted("document-ready") {
        let handler = handlers::document_ready_handler(&redis);
        running.start(
            "document-ready",
            document_ready::worker(&redis, handler).with_env()?,
        );
    }
    if wanted("notification") {
        let handler = NotificationHandler {
            results: results.clone(),
        };
        running.start(
            "notification",
            notification::worker(&redis, handler).with_env()?,
        );
        running.schedule("notification", notification::scheduler(&redis));
    }
    if wanted("export") {
        let handler = ExportHandler {
            results: export::results(postgres()).await?,
        };
        running.start("export", export::worker(&redis, handler).with_env()?);
    }
    if wanted("reconciliation") {
        let handler = ReconciliationHandler {
            results: reconciliation::results(postgres()).await?,
            ledger: postgres().clone(),
        };
        running.start(
            "reconciliation",
            reconciliation::worker(&redis, handler).with_env()?,
        );
    }
    let publisher = args.outbox_publisher.then(|| {
        let publisher = queues::outbox_publisher(postgres(), &redis);
        let mut stop = running.stop.clone();
        tokio::spawn(publisher.run_until(async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }))
    });

    tokio::spawn(async move {
        queuegen_runtime::shutdown_signal().await;
        tracing::info!("shutting down: finishing jobs in flight");
        let _ = stop_tx.send(true);
    });
    // Every worker ends (by the signal) before the first failure is returned.
    let mut failed = None;
    while let Some(finished) = running.workers.join_next().await {
        match finished? {
            (queue, Ok(report)) => tracing::info!(queue, ?report, "worker stopped"),
            (queue, Err(err)) => {
                tracing::error!(queue, error = %err, "worker failed");
                failed.get_or_insert(err);
            }
        }
    }
    while let Some(finished) = running.schedulers.join_next().await {
        match finished? {
            (queue, Ok(report)) => tracing::info!(queue, ?report, "schedules stopped"),
            (queue, Err(err)) => {
                tracing::error!(queue, error = %err, "schedules failed");
                failed.get_or_insert(err);
            }
        }
    }
    if let Some(publisher) = publisher {
        match publisher.await? {
            Ok(report) => tracing::info!(?report, "outbox publisher stopped"),
            Err(err) => {
                tracing::error!(error = %err, "outbox publisher failed");
                failed.get_or_insert(err);
            }
        }
    }
    failed.map_or(Ok(()), |err| Err(err.into()))
}

/// The workers and schedulers started, each ending when the stop signal turns true.
struct Running {
    workers: JoinSet<(&'static str, queuegen_runtime::Result<WorkerReport>)>,
    schedulers: JoinSet<(
        &'static str,
        queuegen_runtime::Result<queuegen_runtime::SchedulerReport>,
    )>,
    stop: watch::Receiver<bool>,
}

impl Running {
    fn start<E: Envelope, H: Handler<E>>(&mut self, queue: &'static str, worker: Worker<E, H>) {
        let mut stop = self.stop.clone();
        self.workers.spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            (queue, worker.run_until(stopped).await)
        });
    }

    /// Runs the schedules of `queue` until the stop signal.
    fn schedule(&mut self, queue: &'static str, scheduler: Scheduler) {
        let mut stop = self.stop.clone();
        self.schedulers.spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            (queue, scheduler.run_until(stopped).await)
        });
    }
}
