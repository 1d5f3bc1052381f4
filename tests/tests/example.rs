//! The committed docs-pipeline example, end to end: its generated producers
//! (and the export outbox) publish, its generated workers run its handlers,
//! every job leaves one result, in Redis or, with its business row, in PostgreSQL.

use std::time::Duration;

use docs_pipeline::handlers::{
    self, ExportHandler, NotificationHandler, OcrHandler, ReconciliationHandler,
};
use docs_pipeline::queues::envelopes::{
    ExportRequestedFormat, NotificationRequestedChannel, OcrRequestedEngine, OcrRequestedPriority,
};
use docs_pipeline::queues::{self, export, notification, ocr, reconciliation};
use docs_pipeline::requests::request_export;
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{NewJob, Timestamp};
use queuegen_tests::support::{init_tracing, pending_count, wait_until};
use queuegen_tests::{library, pg_app, PostgresServer, RedisServer};

const JOBS: u32 = 50;

/// A private PostgreSQL with the example's migrations applied as a team
/// would: queuegen's generated deploy/sql/ files, then the app's own.
fn example_database() -> PostgresServer {
    let server = PostgresServer::start();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/docs-pipeline");
    for dir in ["deploy/sql", "migrations"] {
        let mut files: Vec<_> = std::fs::read_dir(example.join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            server
                .psql_file(&file)
                .unwrap_or_else(|err| panic!("{}: {err}", file.display()));
        }
    }
    server
}

async fn results(conn: &mut redis::aio::MultiplexedConnection, queue: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:results:{queue}:*", ocr::CONFIG.key_prefix))
        .query_async(conn)
        .await
        .unwrap();
    keys.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_producers_and_workers_drain_all_four_queues() {
    init_tracing();
    let server = RedisServer::start();
    let database = example_database();
    let pg = queues::connect_postgres(&database.url()).await.unwrap();
    let db = pg_app::connect(&database.url()).await;
    let (redis, store) = handlers::connect(&server.url()).await.unwrap();
    library::load_example(&redis).await;
    for config in [
        ocr::CONFIG,
        notification::CONFIG,
        export::CONFIG,
        reconciliation::CONFIG,
    ] {
        ensure_groups(&redis, &config).await.unwrap();
    }

    let now = Timestamp::now();
    let tenant = |i: u32| format!("tenant-{}", i % 3);
    ocr::producer(&redis)
        .publish_many((0..JOBS).map(|i| {
            let body = ocr::OcrRequested {
                subject_ref: format!("scan-{i}.pdf"),
                pages: Some(i % 4),
                priority: OcrRequestedPriority::High,
                engine: OcrRequestedEngine::CloudVision,
            };
            NewJob::new(format!("ocr-{i}"), tenant(i), body)
        }))
        .await
        .unwrap();
    notification::producer(&redis)
        .publish_many((0..JOBS).map(|i| {
            let body = notification::NotificationRequested {
                recipient_ref: format!("user-{i}"),
                channel: NotificationRequestedChannel::Push,
                template: "done".into(),
                urgent: i % 2 == 0,
            };
            NewJob::new(format!("notification-{i}"), tenant(i), body)
        }))
        .await
        .unwrap();
    // Export requests go through the outbox, in the request's transaction.
    for i in 0..JOBS {
        let format = [
            ExportRequestedFormat::Csv,
            ExportRequestedFormat::Json,
            ExportRequestedFormat::Parquet,
        ][i as usize % 3];
        request_export(&pg, &tenant(i), &format!("report-{i}"), format)
            .await
            .unwrap();
    }
    reconciliation::producer(&redis)
        .publish_many((0..JOBS).map(|i| {
            let body = reconciliation::ReconciliationRequested {
                ledger_ref: format!("ledger-{i}"),
                window_start: now,
                window_end: now,
            };
            NewJob::new(format!("reconciliation-{i}"), tenant(i), body)
        }))
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let workers = vec![
        tokio::spawn(
            ocr::worker(
                &redis,
                OcrHandler {
                    results: store.clone(),
                },
            )
            .run_until(until_stopped(stopped.clone())),
        ),
        tokio::spawn(
            notification::worker(
                &redis,
                NotificationHandler {
                    results: store.clone(),
                },
            )
            .run_until(until_stopped(stopped.clone())),
        ),
        tokio::spawn(
            export::worker(
                &redis,
                ExportHandler {
                    results: export::results(&pg).await.unwrap(),
                },
            )
            .run_until(until_stopped(stopped.clone())),
        ),
        tokio::spawn(
            reconciliation::worker(
                &redis,
                ReconciliationHandler {
                    results: reconciliation::results(&pg).await.unwrap(),
                    ledger: pg.clone(),
                },
            )
            .run_until(until_stopped(stopped.clone())),
        ),
    ];
    let publisher = tokio::spawn(
        queues::outbox_publisher(&pg, &redis).run_until(until_stopped(stopped.clone())),
    );

    let mut conn = server.async_connection().await;
    let db = &db;
    wait_until(Duration::from_secs(30), "every job has its result", || {
        let mut conn = conn.clone();
        async move {
            let mut done = 0;
            for queue in ["ocr", "notification"] {
                done += results(&mut conn, queue).await as i64;
            }
            done += pg_app::number(db, "SELECT count(*) FROM exports").await;
            done += pg_app::number(db, "SELECT count(*) FROM reconciliation_runs").await;
            done == 4 * i64::from(JOBS)
        }
    })
    .await;
    stop.send(true).unwrap();
    let published = publisher.await.unwrap().unwrap();
    assert_eq!(published.dispatched, u64::from(JOBS), "{published:?}");
    assert_eq!(
        pg_app::number(db, "SELECT count(*) FROM docs_pipeline.results").await,
        2 * i64::from(JOBS),
        "one marker per export and reconciliation job"
    );
    assert_eq!(
        pg_app::number(db, "SELECT count(*) FROM ledger_snapshots WHERE fence = 1").await,
        i64::from(JOBS),
        "each ledger got its one report, with its job's first fence token"
    );
    let mut handled = 0;
    for worker in workers {
        let report = worker.await.unwrap().unwrap();
        assert_eq!(report.failed + report.decode_errors, 0, "{report:?}");
        handled += report.done;
    }
    assert_eq!(handled, 4 * u64::from(JOBS), "each job handled once");
    for config in [
        ocr::CONFIG,
        notification::CONFIG,
        export::CONFIG,
        reconciliation::CONFIG,
    ] {
        for key in config.ready_keys() {
            assert_eq!(
                pending_count(&mut conn, &key, &config.group).await,
                0,
                "{key}"
            );
        }
    }
}

/// The CLI (`apply`, `dlq`) builds a queue's settings from the spec at run
/// time; the generated code bakes them in. They must be the same settings.
#[test]
fn generated_configs_equal_what_the_cli_builds_from_the_spec() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/docs-pipeline/queues.yaml"
    );
    let spec = queuegen::spec::check_file(std::path::Path::new(path))
        .unwrap()
        .spec
        .expect("the example spec is valid");
    for generated in [
        ocr::CONFIG,
        notification::CONFIG,
        export::CONFIG,
        reconciliation::CONFIG,
    ] {
        let queue = spec.queue(&generated.queue).unwrap();
        assert_eq!(
            queuegen::runtime_config::queue_config(&spec, queue),
            generated
        );
    }
}
