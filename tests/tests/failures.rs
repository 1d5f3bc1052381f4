//! Each handler failure is settled by its kind (permanent: dead letter, timeout: retry, panic: stays pending); a refused XACK leaves jobs pending, not done; a worker reconnects after its connections are killed.
//!
//! Pending entries deleted from the stream are the failure suite's row 6 (tests/tests/failure_suite).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, Jitter, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    capture_logs, dead_letters, pending_entries, run_until_told, scheduled_retries, unique_prefix,
    url_of_user_without, wait_until,
};
use queuegen_tests::{library, RedisServer};

/// Behaves as the job's `subject_ref` says: `ok`, `error`, `panic` or `hang`.
#[derive(Clone, Default)]
struct Scripted {
    done: Arc<Mutex<Vec<String>>>,
}

impl Handler<TestJob> for Scripted {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        match job.subject_ref.as_str() {
            "error" => Err(JobError::permanent("the document is unreadable")),
            "panic" => panic!("handler bug on {}", ctx.job_id()),
            "hang" => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(Outcome::Done)
            }
            _ => {
                self.done.lock().unwrap().push(ctx.job_id().to_owned());
                Ok(Outcome::Done)
            }
        }
    }
}

async fn start(
    redis: &Redis,
    config: &QueueConfig,
    handler: Scripted,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<queuegen_runtime::Result<queuegen_runtime::WorkerReport>>,
) {
    let worker = Worker::new(redis, config.clone(), handler);
    let (stop, running) = run_until_told(worker);
    (stop, running)
}

// Current-thread runtime (the default): every task logs on this thread, into `capture_logs`.
#[tokio::test]
async fn each_failure_is_settled_by_its_kind() {
    let (logs, _guard) = capture_logs();
    let server = RedisServer::start();
    // A minute's backoff without jitter: the timed-out job's retry stays
    // scheduled (and visible) for the whole test.
    let config = {
        let mut config = test_config(&unique_prefix("failures"), 1);
        config.handler.timeout = Duration::from_millis(300);
        config.retry.backoff.initial = Duration::from_secs(60);
        config.retry.backoff.max = Duration::from_secs(60);
        config.retry.backoff.jitter = Jitter::None;
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let mut ids = Vec::new();
    for behaviour in ["error", "panic", "hang", "ok"] {
        let job = NewJob::new(
            format!("job-{behaviour}"),
            "acme",
            TestJob::new(behaviour, None),
        );
        ids.push(producer.publish(job).await.unwrap().stream_id);
    }

    let handler = Scripted::default();
    let (stop, running) = start(&redis, &config, handler.clone()).await;
    let watched = logs.clone();
    wait_until(
        Duration::from_secs(10),
        "every failure is logged and settled",
        || {
            let logged = [
                "handler failed",
                "handler panicked",
                "handler timed out",
                "job dead-lettered",
                "retry scheduled",
            ]
            .iter()
            .all(|message| watched.lines_with(&[message]).len() == 1);
            async move { logged }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    assert_eq!(*handler.done.lock().unwrap(), ["job-ok"]);
    assert_eq!(
        (
            report.handled,
            report.done,
            report.dead_lettered,
            report.retried,
            report.failed,
            report.in_flight_left_pending
        ),
        (4, 1, 1, 1, 1, 0),
        "{report:?}"
    );
    let mut conn = server.async_connection().await;
    let pending: Vec<String> = pending_entries(&mut conn, &key, &config.group)
        .await
        .into_iter()
        .map(|entry| entry.id)
        .collect();
    assert_eq!(
        pending,
        [ids[1].clone()],
        "only the panicked job stays pending (for redelivery and poison quarantine)"
    );

    // The permanent failure is a dead letter naming the error.
    let dead = dead_letters(&mut conn, &config).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let fields = &dead[0].2;
    assert_eq!(
        (fields["job_id"].as_str(), fields["reason"].as_str()),
        ("job-error", "permanent")
    );
    assert_eq!(fields["source_id"], ids[0]);
    assert!(
        fields["detail"].contains("the document is unreadable"),
        "{fields:?}"
    );
    // The timeout counts as transient: attempt 2 is scheduled a minute out.
    let retries = scheduled_retries(&mut conn, &config).await;
    assert_eq!(retries.len(), 1, "{retries:?}");
    let (_, retry_id, _, envelope) = &retries[0];
    assert_eq!(retry_id, &ids[2]);
    assert_eq!(envelope["job_id"], "job-hang");
    assert_eq!(envelope["attempt"], "2");
    assert_eq!(envelope["prev_id"], ids[2]);
    assert_eq!(envelope["reason"], "timeout");

    let line = &logs.lines_with(&["handler failed"])[0];
    assert!(
        line.contains("job-error") && line.contains("permanent"),
        "{line}"
    );
    let line = &logs.lines_with(&["handler panicked"])[0];
    assert!(line.contains("handler bug on job-panic"), "{line}");
    let line = &logs.lines_with(&["handler timed out"])[0];
    assert!(
        line.contains("job-hang") && line.contains("300ms"),
        "{line}"
    );
}

/// Whether some client of the server is blocked in `XREADGROUP`.
async fn reader_blocked(conn: &mut redis::aio::MultiplexedConnection) -> bool {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    clients
        .lines()
        .any(|client| client.contains("cmd=xreadgroup") && client.contains("flags=b"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_reconnects_after_its_connections_are_killed() {
    queuegen_tests::support::init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("reconnect"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let worker_redis = Redis::connect(server.url()).await.unwrap();
    let handler = Scripted::default();
    let (stop, running) = start(&worker_redis, &config, handler.clone()).await;

    let mut admin = server.async_connection().await;
    wait_until(
        Duration::from_secs(10),
        "the worker blocks in XREADGROUP",
        || {
            let mut admin = admin.clone();
            async move { reader_blocked(&mut admin).await }
        },
    )
    .await;
    // Drops every other client: the worker's reader and its shared connection,
    // and the producer's too.
    let killed: usize = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 3, "killed {killed} clients");

    // The producer's own shared connection reconnects too: retry a failed publish.
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let job = || NewJob::new("job-after-kill", "acme", TestJob::new("ok", None));
    let mut published = producer.publish(job()).await;
    for _ in 0..20 {
        if published.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        published = producer.publish(job()).await;
    }
    published.unwrap();
    let done = handler.done.clone();
    wait_until(
        Duration::from_secs(15),
        "the job published after the kill is done",
        || {
            let finished = done.lock().unwrap().len() == 1;
            async move { finished }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.done, report.failed), (1, 0), "{report:?}");
    for key in config.ready_keys() {
        assert!(
            pending_entries(&mut admin, &key, &config.group)
                .await
                .is_empty(),
            "{key}"
        );
    }
}

// The server refuses XACK to the worker's user (an ACL without it): the
// handlers ran and returned Done, but no job counts as done and every entry
// stays pending, for redelivery once it is idle.
#[tokio::test]
async fn jobs_whose_xack_is_refused_stay_pending_and_are_not_done() {
    let (logs, _guard) = capture_logs();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("xack-refused"), 2);
    let admin = Redis::connect(server.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();
    let mut conn = server.async_connection().await;
    let producer = Producer::<TestJob>::new(&admin, config.clone());
    let jobs = (0..6).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            format!("t-{n}"),
            TestJob::new("ok", None),
        )
    });
    producer.publish_many(jobs).await.unwrap();

    let url = url_of_user_without(&server, "xack").await;
    let redis = Redis::connect(url).await.unwrap();
    let handler = Scripted::default();
    let (stop, running) = start(&redis, &config, handler.clone()).await;
    let done = handler.done.clone();
    let watched = logs.clone();
    wait_until(
        Duration::from_secs(10),
        "every handler ran and every ack failed",
        || {
            let handled = done.lock().unwrap().len() == 6;
            // The library's `ack` runs XACK, which the user may not.
            let refused = watched.lines_with(&["ack failed"]).len();
            async move { handled && refused > 0 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    assert_eq!(
        (report.handled, report.done, report.failed),
        (6, 0, 6),
        "{report:?}"
    );
    let pending: usize = {
        let mut total = 0;
        for key in config.ready_keys() {
            total += pending_entries(&mut conn, &key, &config.group).await.len();
        }
        total
    };
    assert_eq!(pending, 6, "every refused job stays pending");
    let line = &logs.lines_with(&["ack failed"])[0];
    assert!(
        // Redis 7.0 and Valkey 8 word the ACL refusal inside a script differently.
        line.contains("ERROR")
            && (line.contains("can't run this command")
                || line.contains("no permissions to run the 'xack' command")),
        "{line}"
    );
    assert!(
        line.contains(&config.ready_key(StreamSlot::new(0)))
            || line.contains(&config.ready_key(StreamSlot::new(1))),
        "{line}"
    );
}
