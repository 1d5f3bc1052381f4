//! Publishes a batch of example jobs to each queue that takes work from outside (an `ocr` job starts its document's pipeline run; `index`, `thumbnail` and `document-ready` are fed by it); export jobs go through the PostgreSQL outbox with the export request they carry out.

use clap::Parser;
use docs_pipeline::queues::envelopes::{
    ExportRequestedFormat, NotificationRequestedChannel, OcrRequestedEngine, OcrRequestedPriority,
};
use docs_pipeline::queues::{self, notification, ocr, reconciliation};
use docs_pipeline::requests::request_export;
use queuegen_runtime::{NewJob, Redis, Timestamp};

#[derive(Parser)]
#[command(about = "Publish example jobs to the docs-pipeline queues")]
struct Args {
    /// Redis URL.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Jobs per queue.
    #[arg(long, default_value_t = 10)]
    count: u32,
    /// Prefix of every job id; rerun with the same prefix to publish duplicates of the same intents.
    #[arg(long, default_value = "demo")]
    job_prefix: String,
    /// PostgreSQL URL (deploy/sql/ and migrations/ applied): export requests
    /// are recorded there with their job, which the worker's outbox
    /// publisher then sends. Without it, no export jobs.
    #[arg(long, env = "DATABASE_URL")]
    database: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let redis = Redis::connect(&args.redis).await?;
    let tenant = |i: u32| format!("tenant-{}", i % 3);
    let id = |queue: &str, i: u32| format!("{}-{queue}-{i}", args.job_prefix);
    let now = Timestamp::now();

    let ocr_jobs = (0..args.count).map(|i| {
        NewJob::new(
            id("ocr", i),
            tenant(i),
            ocr::OcrRequested {
                subject_ref: format!("s3://scans/{i}.pdf"),
                pages: Some(1 + i % 5),
                priority: if i % 4 == 0 {
                    OcrRequestedPriority::High
                } else {
                    OcrRequestedPriority::Normal
                },
                engine: OcrRequestedEngine::Tesseract,
            },
        )
    });
    let notification_jobs = (0..args.count).map(|i| {
        NewJob::new(
            id("notification", i),
            tenant(i),
            notification::NotificationRequested {
                recipient_ref: format!("user-{i}"),
                channel: NotificationRequestedChannel::Email,
                template: "ocr-finished".into(),
                urgent: false,
            },
        )
    });
    let reconciliation_jobs = (0..args.count).map(|i| {
        NewJob::new(
            id("reconciliation", i),
            tenant(i),
            reconciliation::ReconciliationRequested {
                ledger_ref: format!("ledger-{}", i % 2),
                window_start: Timestamp::from_unix_millis(now.unix_millis() - 86_400_000),
                window_end: now,
            },
        )
    });

    let published = [
        ("ocr", ocr::producer(&redis).publish_many(ocr_jobs).await?),
        (
            "notification",
            notification::producer(&redis)
                .publish_many(notification_jobs)
                .await?,
        ),
        (
            "reconciliation",
            reconciliation::producer(&redis)
                .publish_many(reconciliation_jobs)
                .await?,
        ),
    ];
    for (queue, jobs) in published {
        let partitions: std::collections::BTreeSet<u16> =
            jobs.iter().map(|p| p.partition.index()).collect();
        println!(
            "{queue}: published {} jobs to partitions {partitions:?}",
            jobs.len()
        );
    }
    match &args.database {
        Some(url) => {
            let pg = queues::connect_postgres(url).await?;
            let mut partitions = std::collections::BTreeSet::new();
            for i in 0..args.count {
                let export_ref = format!("{}-export-{i}", args.job_prefix);
                let enqueued =
                    request_export(&pg, &tenant(i), &export_ref, ExportRequestedFormat::Csv)
                        .await?;
                partitions.insert(enqueued.stream.index());
            }
            println!(
                "export: enqueued {} jobs with their requests in the outbox, for partitions {partitions:?}",
                args.count
            );
        }
        None => println!(
            "export: none (export requests go through the PostgreSQL outbox: pass --database)"
        ),
    }
    Ok(())
}
