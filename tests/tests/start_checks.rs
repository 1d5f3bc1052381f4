//! Start checks: a worker told to accept a server that may evict keys starts and warns; on a `noeviction` server it says nothing.
//!
//! The refusal itself is the failure suite's row 16 (tests/tests/failure_suite).

use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{all_pending, capture_logs, unique_prefix, wait_until};
use queuegen_tests::{library, RedisServer};

struct Done;

impl Handler<TestJob> for Done {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        Ok(Outcome::Done)
    }
}

/// A server with `maxmemory-policy allkeys-lru`, the queue set up on it, and one job published.
async fn evicting_server(name: &str) -> (RedisServer, Redis, queuegen_runtime::QueueConfig) {
    let server = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let config = test_config(&unique_prefix(name), 1);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    Producer::<TestJob>::new(&redis, config.clone())
        .publish(NewJob::new("job-1", "acme", TestJob::new("doc-1", None)))
        .await
        .unwrap();
    (server, redis, config)
}

// The default current-thread runtime keeps every task on this thread, where
// `capture_logs` collects their log lines.
#[tokio::test]
async fn with_the_override_it_starts_and_warns() {
    let (logs, _guard) = capture_logs();
    let (server, redis, config) = evicting_server("evicting-allowed").await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        Worker::new(&redis, config.clone(), Done)
            .allow_eviction_policy()
            .run_until(async {
                let _ = stopped.await;
            }),
    );
    let mut conn = server.async_connection().await;
    let key = config.ready_key(StreamSlot::new(0));
    wait_until(Duration::from_secs(10), "the job is acknowledged", || {
        let mut conn = conn.clone();
        let key = key.clone();
        async move {
            let reply: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            reply.groups[0].entries_read == Some(1) && reply.groups[0].pending == 0
        }
    })
    .await;
    stop.send(()).unwrap();
    assert_eq!(running.await.unwrap().unwrap().done, 1);
    assert!(all_pending(&mut conn, &config).await.is_empty());

    let warnings = logs.lines_with(&["maxmemory-policy"]);
    assert_eq!(warnings.len(), 1, "{}", logs.text());
    let warning = &warnings[0];
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("allkeys-lru"), "{warning}");
    assert!(
        warning.contains(&format!("127.0.0.1:{}", server.port())),
        "{warning}"
    );
}

#[tokio::test]
async fn a_noeviction_server_starts_without_a_warning() {
    let (logs, _guard) = capture_logs();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("noeviction"), 1);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(Worker::new(&redis, config, Done).run_until(async {
        let _ = stopped.await;
    }));
    wait_until(Duration::from_secs(10), "the worker starts", || {
        let started = !logs.lines_with(&["worker starting"]).is_empty();
        async move { started }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(
        logs.lines_with(&["maxmemory"]).is_empty(),
        "{}",
        logs.text()
    );
}
