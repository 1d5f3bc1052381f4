//! The transactional outbox: a job enqueued with a business change is published only after its transaction commits, a publisher killed between XADD and marking publishes twice and the job is handled once, and several publishers and workers move thousands of rows with nothing lost or doubled.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use queuegen_runtime::postgres::{OutboxPublisher, PgOutbox, PgResults, Postgres};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{NewJob, QueueConfig, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::pg_app::{
    self, assert_killed_at_failpoint, pg_process, servers, DocumentsHandler, SCHEMA,
};
use queuegen_tests::support::{
    all_pending, init_tracing, last_delivered, stream_entries, unique_prefix, wait_until,
};
use queuegen_tests::PostgresServer;

/// Every entry of every partition's ready stream: (partition, stream ID, fields).
async fn published(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
) -> Vec<(StreamSlot, String, HashMap<String, String>)> {
    let mut all = Vec::new();
    for partition in StreamSlot::all(config.partitions) {
        for (id, fields) in stream_entries(conn, &config.ready_key(partition)).await {
            all.push((partition, id, fields));
        }
    }
    all
}

/// Enqueues `job` with its `documents_log` row in one transaction, and
/// commits or rolls back.
async fn enqueue_with_change(
    db: &mut tokio_postgres::Client,
    outbox: &PgOutbox<TestJob>,
    job: NewJob<TestJob>,
    commit: bool,
) -> queuegen_runtime::postgres::Enqueued {
    let tx = db.transaction().await.unwrap();
    tx.execute(
        "INSERT INTO documents_log (job_id) VALUES ($1)",
        &[&job.job_id],
    )
    .await
    .unwrap();
    let enqueued = outbox.enqueue(&tx, job).await.unwrap();
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    enqueued
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_transaction_publishes_nothing_and_a_committed_one_publishes_its_job() {
    let config = test_config(&unique_prefix("outbox"), 2);
    let mut s = servers(&config).await;
    let outbox = PgOutbox::<TestJob>::new(&s.pg, config.clone());
    let publisher = OutboxPublisher::new(&s.pg, &s.redis, std::slice::from_ref(&config));

    enqueue_with_change(
        &mut s.db,
        &outbox,
        NewJob::new("doc-rolled-back", "acme", TestJob::new("r.pdf", None)),
        false,
    )
    .await;
    assert_eq!(publisher.publish_pending().await.unwrap(), 0);
    let mut conn = s.conn.clone();
    assert!(published(&mut conn, &config).await.is_empty());
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM queuegen.outbox").await,
        0,
        "the row went with the rollback"
    );

    let enqueued = enqueue_with_change(
        &mut s.db,
        &outbox,
        NewJob::new("doc-committed", "acme", TestJob::new("c.pdf", Some(3))),
        true,
    )
    .await;
    assert_eq!(publisher.publish_pending().await.unwrap(), 1);
    let entries = published(&mut conn, &config).await;
    assert_eq!(entries.len(), 1);
    let (partition, stream_id, fields) = &entries[0];
    assert_eq!(
        *partition, enqueued.stream,
        "the partition the producer would pick"
    );
    assert_eq!(fields["job_id"], "doc-committed");
    assert_eq!(fields["subject_ref"], "c.pdf");
    assert_eq!(fields["pages"], "3");
    assert_eq!(fields["attempt"], "1");
    let row =
        s.db.query_one(
            "SELECT dispatched_at IS NOT NULL, stream_id FROM queuegen.outbox WHERE id = $1",
            &[&enqueued.id],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "marked dispatched");
    assert_eq!(&row.get::<_, String>(1), stream_id);
    assert_eq!(
        publisher.publish_pending().await.unwrap(),
        0,
        "a dispatched row is not sent again"
    );
    // An invalid job is refused before anything is written.
    let tx = s.db.transaction().await.unwrap();
    let err = outbox
        .enqueue(&tx, NewJob::new("", "acme", TestJob::new("x", None)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("empty job_id"), "{err}");
    drop(tx);
    drop(s.postgres_server);
}

/// kill -9 of the publisher after its XADD and before it marked the row:
/// the next publisher sends it again, and the consumer handles it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_publisher_between_xadd_and_marking_publishes_twice_and_handles_once() {
    init_tracing();
    let prefix = unique_prefix("outbox-kill");
    let config = test_config(&prefix, 1);
    let mut s = servers(&config).await;
    let outbox = PgOutbox::<TestJob>::new(&s.pg, config.clone());
    enqueue_with_change(
        &mut s.db,
        &outbox,
        NewJob::new("doc-twice", "acme", TestJob::new("t.pdf", None)),
        true,
    )
    .await;

    let mut crashing = pg_process(
        env!("CARGO_BIN_EXE_pg-process"),
        "publisher",
        &s,
        &config,
        &[("QUEUEGEN_FAILPOINT", "outbox_after_xadd")],
    );
    assert_killed_at_failpoint(&mut crashing, Duration::from_secs(30));
    let mut conn = s.conn.clone();
    assert_eq!(published(&mut conn, &config).await.len(), 1, "sent once");
    assert_eq!(
        pg_app::number(
            &s.db,
            "SELECT count(*) FROM queuegen.outbox WHERE dispatched_at IS NULL"
        )
        .await,
        1,
        "but not marked: the crash came first"
    );

    let publisher = OutboxPublisher::new(&s.pg, &s.redis, std::slice::from_ref(&config));
    assert_eq!(publisher.publish_pending().await.unwrap(), 1);
    let entries = published(&mut conn, &config).await;
    assert_eq!(entries.len(), 2, "published twice");
    assert!(entries
        .iter()
        .all(|(_, _, fields)| fields["job_id"] == "doc-twice"));

    let results = PgResults::start(&s.pg, &config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(&s.redis, config.clone(), DocumentsHandler { results });
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let db = &s.db;
    let watched = config.clone();
    wait_until(Duration::from_secs(10), "both entries are handled", || {
        let mut conn = conn.clone();
        let config = watched.clone();
        async move {
            pg_app::number(db, "SELECT count(*) FROM queuegen.results").await == 1
                && all_pending(&mut conn, &config).await.is_empty()
                && group_lag_zero(&mut conn, &config).await
        }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, 2, "both deliveries acked: {report:?}");
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents").await,
        1,
        "handled once"
    );
}

/// Two publishers and three workers, 5,000 rows enqueued in transactions
/// of 100 over 4 partitions: every row dispatched, every job handled once,
/// and each partition's jobs in the order their rows were committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_publishers_and_three_workers_move_5000_rows_each_handled_once_in_order() {
    init_tracing();
    const ROWS: usize = 5_000;
    let config = test_config(&unique_prefix("outbox-many"), 4);
    let mut s = servers(&config).await;
    let outbox = PgOutbox::<TestJob>::new(&s.pg, config.clone());

    let (stop, _) = tokio::sync::watch::channel(false);
    let mut publishers = Vec::new();
    for _ in 0..2 {
        // Each publisher with its own pool and Redis connection, as two pods.
        let pg = Postgres::connect(&s.postgres_server.url(), SCHEMA, 2)
            .await
            .unwrap();
        let redis = Redis::connect(s.redis_server.url()).await.unwrap();
        let mut stopped = stop.subscribe();
        let publisher = OutboxPublisher::new(&pg, &redis, std::slice::from_ref(&config)).batch(200);
        publishers.push(tokio::spawn(publisher.run_until(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })));
    }
    let mut workers = Vec::new();
    for n in 0..3 {
        let pg = Postgres::connect(&s.postgres_server.url(), SCHEMA, 4)
            .await
            .unwrap();
        let redis = Redis::connect(s.redis_server.url()).await.unwrap();
        let results = PgResults::start(&pg, &config).await.unwrap();
        let mut stopped = stop.subscribe();
        let worker = Worker::new(&redis, config.clone(), DocumentsHandler { results })
            .consumer_name(format!("worker-{n}"));
        workers.push(tokio::spawn(worker.run_until(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })));
    }

    // Enqueued while the publishers run: each row's `subject_ref` is its
    // enqueue order, so a partition's stream must hold increasing numbers.
    for chunk in 0..ROWS / 100 {
        let tx = s.db.transaction().await.unwrap();
        for n in chunk * 100..(chunk + 1) * 100 {
            let job = NewJob::new(
                format!("doc-{n}"),
                format!("tenant-{}", n % 7),
                TestJob::new(format!("{n:05}"), None),
            );
            outbox.enqueue(&tx, job).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let db = &s.db;
    wait_until(
        Duration::from_secs(120),
        "every row is dispatched and every job handled",
        || async move {
            pg_app::number(db, "SELECT count(*) FROM documents").await == ROWS as i64
                && pg_app::number(
                    db,
                    "SELECT count(*) FROM queuegen.outbox WHERE dispatched_at IS NULL",
                )
                .await
                    == 0
        },
    )
    .await;
    let mut conn = s.conn.clone();
    let watched = config.clone();
    wait_until(Duration::from_secs(10), "every entry is acked", || {
        let mut conn = conn.clone();
        let config = watched.clone();
        async move { all_pending(&mut conn, &config).await.is_empty() }
    })
    .await;
    stop.send(true).unwrap();
    let mut dispatched = 0;
    for publisher in publishers {
        let report = publisher.await.unwrap().unwrap();
        assert_eq!(report.failed_rounds, 0, "{report:?}");
        dispatched += report.dispatched;
    }
    let mut done = 0;
    for worker in workers {
        done += worker.await.unwrap().unwrap().done;
    }
    assert_eq!(
        dispatched, ROWS as u64,
        "every row sent once: no crash, no resend"
    );
    assert_eq!(done, ROWS as u64);
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(DISTINCT job_id) FROM documents").await,
        ROWS as i64,
        "every job handled once"
    );

    let entries = published(&mut conn, &config).await;
    assert_eq!(entries.len(), ROWS);
    let mut seen = HashSet::new();
    let mut last_per_partition: HashMap<StreamSlot, String> = HashMap::new();
    for (partition, _, fields) in &entries {
        assert!(seen.insert(fields["job_id"].clone()), "{fields:?} twice");
        let order = fields["subject_ref"].clone();
        if let Some(last) = last_per_partition.insert(*partition, order.clone()) {
            assert!(
                last < order,
                "partition {partition}: {order} published after {last}"
            );
        }
    }
    assert!(
        last_per_partition.len() > 1,
        "the jobs spread over partitions"
    );
    // What the workers decoded is what was enqueued.
    assert_eq!(
        pg_app::number(
            &s.db,
            "SELECT count(*) FROM documents WHERE subject_ref <> lpad(substr(job_id, 5), 5, '0')"
        )
        .await,
        0
    );
}

/// The group has delivered everything in every partition.
async fn group_lag_zero(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
) -> bool {
    for partition in StreamSlot::all(config.partitions) {
        let entries = stream_entries(conn, &config.ready_key(partition)).await;
        if let Some((newest, _)) = entries.last() {
            if last_delivered(conn, config, partition).await != *newest {
                return false;
            }
        }
    }
    true
}

/// On a Redis Cluster each partition is its own slot: a round's XADD
/// pipeline names one partition, so it goes to one primary, and the jobs of
/// every partition arrive and are handled once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publisher_and_the_results_work_on_a_cluster() {
    init_tracing();
    const ROWS: usize = 300;
    let cluster = queuegen_tests::RedisCluster::start();
    let postgres_server = PostgresServer::start();
    pg_app::prepare(&postgres_server.url()).await;
    let config = test_config(&unique_prefix("outbox-cluster"), 6);
    let redis = Redis::connect(cluster.url()).await.unwrap();
    queuegen_tests::library::load(&redis).await;
    queuegen_runtime::admin::ensure_groups(&redis, &config)
        .await
        .unwrap();
    let pg = Postgres::connect(&postgres_server.url(), SCHEMA, 4)
        .await
        .unwrap();
    let mut db = pg_app::connect(&postgres_server.url()).await;
    let outbox = PgOutbox::<TestJob>::new(&pg, config.clone());
    let tx = db.transaction().await.unwrap();
    for n in 0..ROWS {
        let job = NewJob::new(
            format!("doc-{n}"),
            format!("tenant-{}", n % 5),
            TestJob::new(format!("{n:05}"), None),
        );
        outbox.enqueue(&tx, job).await.unwrap();
    }
    tx.commit().await.unwrap();

    let publisher = OutboxPublisher::new(&pg, &redis, std::slice::from_ref(&config));
    assert_eq!(publisher.publish_pending().await.unwrap(), ROWS as u64);
    let mut conn = redis.shared();
    let mut per_partition = Vec::new();
    for partition in StreamSlot::all(config.partitions) {
        let ids: Vec<(String, HashMap<String, String>)> =
            stream_entries(&mut conn, &config.ready_key(partition)).await;
        per_partition.push(ids.len());
    }
    assert_eq!(per_partition.iter().sum::<usize>(), ROWS);
    assert!(
        per_partition.iter().filter(|&&n| n > 0).count() > 1,
        "{per_partition:?}"
    );

    let results = PgResults::start(&pg, &config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(&redis, config.clone(), DocumentsHandler { results });
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let db = &db;
    wait_until(
        Duration::from_secs(30),
        "every job is handled",
        || async move { pg_app::number(db, "SELECT count(*) FROM documents").await == ROWS as i64 },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, ROWS as u64, "{report:?}");
    assert_eq!(
        pg_app::number(db, "SELECT count(DISTINCT job_id) FROM documents").await,
        ROWS as i64
    );
}
