//! Durable results in PostgreSQL: the business change and the job's marker commit together, a crash after the commit leaves one business row, a failed transaction leaves none, and a bad setup fails at start naming what and where.

use std::time::Duration;

use queuegen_runtime::error::PostgresError;
use queuegen_runtime::postgres::{Begun, PgResults, Postgres};
use queuegen_runtime::{Error, NewJob, Producer, QueueConfig, Redis, Worker};
use queuegen_tests::fixtures::{retrying_config, test_config, TestJob};
use queuegen_tests::pg_app::{
    self, assert_killed_at_failpoint, pg_process, servers, DocumentsHandler, SCHEMA,
    SERIALIZATION_ONCE, VIOLATES_CHECK,
};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, last_delivered, spawn_worker, unique_prefix,
    wait_until, RunningWorker,
};
use queuegen_tests::PostgresServer;

/// Runs a worker in this process until the returned sender fires.
fn start_worker(
    redis: &Redis,
    config: &QueueConfig,
    handler: DocumentsHandler,
    consumer: &str,
) -> RunningWorker {
    spawn_worker(Worker::new(redis, config.clone(), handler).consumer_name(consumer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_commits_its_row_and_marker_together_and_a_duplicate_finds_the_marker() {
    init_tracing();
    let config = test_config(&unique_prefix("pg-results"), 2);
    let s = servers(&config).await;
    let results = PgResults::start(&s.pg, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&s.redis, config.clone());
    let first = producer
        .publish(NewJob::new("doc-1", "acme", TestJob::new("a.pdf", None)))
        .await
        .unwrap();
    // The same intent published again (an outbox row sent twice, a retried publish).
    let second = producer
        .publish(NewJob::new("doc-1", "acme", TestJob::new("a.pdf", None)))
        .await
        .unwrap();
    let running = start_worker(
        &s.redis,
        &config,
        DocumentsHandler {
            results: results.clone(),
        },
        "w1",
    );
    let mut conn = s.conn.clone();
    let watched = config.clone();
    wait_until(
        Duration::from_secs(10),
        "both entries are delivered and acked",
        || {
            let mut conn = conn.clone();
            let config = watched.clone();
            let second = second.stream_id.clone();
            async move {
                last_delivered(&mut conn, &config, first.partition.default_stream()).await == second
                    && all_pending(&mut conn, &config).await.is_empty()
            }
        },
    )
    .await;
    let report = running.stop().await;
    assert_eq!(report.done, 2, "both deliveries are done: {report:?}");

    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents").await,
        1,
        "the duplicate found the marker and wrote nothing"
    );
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents_log").await,
        1
    );
    // The marker holds what the delivery that committed wrote: its stream ID.
    // Both entries are read in one batch and run side by side, so either may
    // take the marker's row lock first; the other then finds it.
    let stored = String::from_utf8(results.find("doc-1").await.unwrap().unwrap()).unwrap();
    assert!(
        stored == first.stream_id || stored == second.stream_id,
        "the marker holds one delivery's stream ID: {stored}"
    );
    match results.begin_job("doc-1", "0-1").await.unwrap() {
        Begun::Finished(result) => assert_eq!(result, stored.as_bytes()),
        Begun::New(_) => panic!("a committed job begins as finished"),
    }
    assert!(all_pending(&mut conn, &config).await.is_empty());
}

/// The marker's row lock orders two deliveries of one job: the second
/// waits on the first's uncommitted marker, then finds it committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_delivery_waits_for_the_first_and_then_finds_its_marker() {
    let config = test_config(&unique_prefix("pg-race"), 1);
    let s = servers(&config).await;
    let results = PgResults::start(&s.pg, &config).await.unwrap();

    let Begun::New(first) = results.begin_job("doc-race", "1-0").await.unwrap() else {
        panic!("nothing committed yet");
    };
    first
        .execute(
            "INSERT INTO documents (job_id, subject_ref, attempt, stream_id) VALUES ('doc-race', 'x', 1, '1-0')",
            &[],
        )
        .await
        .unwrap();
    let racing = results.clone();
    let second = tokio::spawn(async move { racing.begin_job("doc-race", "2-0").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the second delivery waits on the first's marker"
    );
    first.commit(b"first").await.unwrap();
    match second.await.unwrap().unwrap() {
        Begun::Finished(result) => assert_eq!(result, b"first"),
        Begun::New(_) => panic!("the second delivery must find the first's marker"),
    }
    // A transaction dropped without commit rolls back its marker: the job
    // is new again for the next delivery.
    let Begun::New(dropped) = results.begin_job("doc-dropped", "3-0").await.unwrap() else {
        panic!("nothing committed yet");
    };
    drop(dropped);
    let Begun::New(again) = results.begin_job("doc-dropped", "4-0").await.unwrap() else {
        panic!("the dropped transaction's marker was rolled back");
    };
    again.rollback().await.unwrap();
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents").await,
        1
    );
    drop(s.postgres_server);
}

/// kill -9 after the commit and before the XACK: the job stays pending,
/// another worker claims it, finds the marker, and acks; one business row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_commit_before_xack_leaves_exactly_one_business_row() {
    init_tracing();
    let prefix = unique_prefix("pg-kill");
    let config = {
        let mut config = test_config(&prefix, 1);
        config.claim.min_idle = Duration::from_millis(1500);
        config.claim.every = Duration::from_millis(200);
        config
    };
    let s = servers(&config).await;
    let producer = Producer::<TestJob>::new(&s.redis, config.clone());
    let published = producer
        .publish(NewJob::new("doc-kill", "acme", TestJob::new("k.pdf", None)))
        .await
        .unwrap();

    let mut crashing = pg_process(
        env!("CARGO_BIN_EXE_pg-process"),
        "worker",
        &s,
        &config,
        &[("QUEUEGEN_FAILPOINT", "after_results_commit")],
    );
    assert_killed_at_failpoint(&mut crashing, Duration::from_secs(30));
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents").await,
        1,
        "the commit happened before the crash"
    );
    let mut conn = s.conn.clone();
    let pending = all_pending(&mut conn, &config).await;
    assert_eq!(pending.len(), 1, "not acked: the crash came first");

    let results = PgResults::start(&s.pg, &config).await.unwrap();
    let running = start_worker(&s.redis, &config, DocumentsHandler { results }, "w2");
    let watched = config.clone();
    wait_until(
        Duration::from_secs(15),
        "the survivor claims and acks the job",
        || {
            let mut conn = conn.clone();
            let config = watched.clone();
            async move { all_pending(&mut conn, &config).await.is_empty() }
        },
    )
    .await;
    let report = running.stop().await;
    assert_eq!(report.claimed, 1, "{report:?}");
    assert_eq!(report.done, 1, "{report:?}");
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents").await,
        1,
        "exactly one business row"
    );
    let stream_id: String =
        s.db.query_one("SELECT stream_id FROM documents", &[])
            .await
            .unwrap()
            .get(0);
    assert_eq!(stream_id, published.stream_id);
}

/// A transaction that fails is retried or dead-lettered by its SQLSTATE
/// class, and leaves no partial row either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transaction_is_retried_or_dead_lettered_by_class_and_leaves_no_partial_row() {
    init_tracing();
    let config = retrying_config(&unique_prefix("pg-classes"));
    let s = servers(&config).await;
    let results = PgResults::start(&s.pg, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&s.redis, config.clone());
    producer
        .publish(NewJob::new(
            "doc-serial",
            "acme",
            TestJob::new(SERIALIZATION_ONCE, None),
        ))
        .await
        .unwrap();
    producer
        .publish(NewJob::new(
            "doc-check",
            "acme",
            TestJob::new(VIOLATES_CHECK, None),
        ))
        .await
        .unwrap();
    let running = start_worker(&s.redis, &config, DocumentsHandler { results }, "w1");
    let mut conn = s.conn.clone();
    let db = &s.db;
    wait_until(
        Duration::from_secs(20),
        "the transient job is done on its second attempt and the permanent one is dead-lettered",
        || {
            let mut conn = conn.clone();
            let config = config.clone();
            async move {
                let documents = pg_app::number(db, "SELECT count(*) FROM documents").await;
                documents == 1 && dead_letters(&mut conn, &config).await.len() == 1
            }
        },
    )
    .await;
    let report = running.stop().await;
    assert_eq!(report.retried, 1, "{report:?}");

    let row =
        s.db.query_one("SELECT job_id, attempt FROM documents", &[])
            .await
            .unwrap();
    assert_eq!(row.get::<_, String>(0), "doc-serial");
    assert_eq!(
        row.get::<_, i32>(1),
        2,
        "the serialization failure (40001) was retried"
    );
    assert_eq!(
        pg_app::number(&s.db, "SELECT count(*) FROM documents_log").await,
        1,
        "neither failed transaction left its first insert behind"
    );
    assert_eq!(
        pg_app::number(
            &s.db,
            "SELECT count(*) FROM queuegen.results WHERE job_id = 'doc-check'"
        )
        .await,
        0,
        "no marker for the dead-lettered job"
    );
    let (_, _, fields) = dead_letters(&mut conn, &config).await.remove(0);
    assert_eq!(fields["job_id"], "doc-check");
    assert_eq!(
        fields["reason"], "permanent",
        "a CHECK violation (23514) is permanent: {fields:?}"
    );
    assert!(
        fields["detail"].contains("23514") && fields["detail"].contains("documents"),
        "the dead letter says which constraint and table: {fields:?}"
    );
    assert!(all_pending(&mut conn, &config).await.is_empty());
}

/// A wrong URL, a database without the migrations, and a handler name
/// that another queue's results use: each an error at start, naming it.
#[tokio::test]
async fn a_bad_setup_fails_at_start_naming_what_and_where() {
    let postgres_server = PostgresServer::start();
    let port = postgres_server.port();

    // Nothing listens on the port of a server that was stopped.
    let mut stopped = PostgresServer::start();
    let dead_url = stopped.url();
    let dead_port = stopped.port();
    stopped.stop();
    let err = Postgres::connect(&dead_url, SCHEMA, 2)
        .await
        .err()
        .expect("no server");
    let text = err.to_string();
    assert!(
        text.contains(&format!("queuegen@127.0.0.1:{dead_port}/queuegen"))
            && text.contains("connect"),
        "{text}"
    );

    let err = Postgres::connect("postgres://app:s3cret@db:notaport/orders", SCHEMA, 2)
        .await
        .err()
        .expect("a bad URL");
    let text = err.to_string();
    assert!(
        text.contains("app:***@db:notaport/orders") && !text.contains("s3cret"),
        "{text}"
    );

    // The migrations were never applied to this database.
    let err = Postgres::connect(&postgres_server.url(), SCHEMA, 2)
        .await
        .err()
        .expect("no tables");
    let text = err.to_string();
    assert!(
        matches!(err, Error::Postgres(PostgresError::Setup { .. })),
        "{err:?}"
    );
    assert!(
        text.contains(&format!("queuegen@127.0.0.1:{port}/queuegen"))
            && text.contains("queuegen.migrations")
            && text.contains("queuegen.results")
            && text.contains("0001_queuegen_results_outbox.sql"),
        "{text}"
    );

    pg_app::prepare(&postgres_server.url()).await;
    let pg = Postgres::connect(&postgres_server.url(), SCHEMA, 2)
        .await
        .unwrap();
    let jobs = test_config(&unique_prefix("pg-setup"), 1);
    let retrying = retrying_config(&unique_prefix("pg-setup"));
    // Handler "jobs" commits a result for queue `jobs`...
    let results = PgResults::start(&pg, &jobs).await.unwrap();
    let Begun::New(job) = results.begin_job("doc-1", "1-0").await.unwrap() else {
        panic!("new job");
    };
    job.commit(b"").await.unwrap();
    // ...so queue `retrying` cannot use that name,
    let err = PgResults::start_as(&pg, &retrying, "jobs")
        .await
        .err()
        .expect("a handler name of another queue");
    let text = err.to_string();
    assert!(
        text.contains("handler \"jobs\" is registered in queuegen.handlers for queue \"jobs\", not \"retrying\""),
        "{text}"
    );
    // ...and queue `jobs` cannot start under another handler name.
    let err = PgResults::start_as(&pg, &jobs, "jobs-v2")
        .await
        .err()
        .expect("a renamed handler");
    let text = err.to_string();
    assert!(
        text.contains("queue \"jobs\" already has results of handler \"jobs\" in queuegen.results")
            && text.contains("UPDATE queuegen.results SET handler = 'jobs-v2'"),
        "{text}"
    );
    assert_eq!(
        pg_app::number(
            &pg_app::connect(&postgres_server.url()).await,
            "SELECT count(*) FROM queuegen.handlers"
        )
        .await,
        1,
        "a refused start registers nothing"
    );
}
