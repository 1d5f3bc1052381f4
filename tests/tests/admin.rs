//! `ensure_groups` against a real redis-server: creates, re-runs idempotently, and names the key on errors.

use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::{RedisError, SetupError};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Error, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{init_tracing, unique_prefix};
use queuegen_tests::{library, RedisServer};

#[tokio::test]
async fn ensure_groups_creates_then_reports_existing_groups() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("admin"), 3);
    let redis = Redis::connect(server.url()).await.unwrap();

    let first = ensure_groups(&redis, &config).await.unwrap();
    let keys: Vec<&str> = first.iter().map(|setup| setup.key.as_str()).collect();
    assert_eq!(keys, config.ready_keys());
    assert!(first.iter().all(|setup| setup.created), "{first:?}");
    assert!(first.iter().all(|setup| setup.group == config.group));

    let second = ensure_groups(&redis, &config).await.unwrap();
    assert_eq!(second.len(), 3);
    assert!(second.iter().all(|setup| !setup.created), "{second:?}");

    let mut conn = server.async_connection().await;
    for key in config.ready_keys() {
        let groups: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let names: Vec<&str> = groups.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, [&*config.group], "groups on {key}");
    }
}

#[tokio::test]
async fn a_key_of_the_wrong_type_is_an_error_naming_the_key() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("admin-wrongtype"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    let mut conn = server.async_connection().await;
    let squatted = config.ready_key(StreamSlot::new(1));
    let () = redis::cmd("SET")
        .arg(&squatted)
        .arg("not a stream")
        .query_async(&mut conn)
        .await
        .unwrap();

    let err = ensure_groups(&redis, &config).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Redis(RedisError { .. })), "{err:?}");
    assert!(message.contains(&squatted), "{message}");
    assert!(message.contains("WRONGTYPE"), "{message}");
    assert!(message.contains(&*config.group), "{message}");
}

#[tokio::test]
async fn a_worker_without_its_group_says_to_run_apply() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("admin-nogroup"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;

    let worker = Worker::new(&redis, config.clone(), NeverCalled);
    let run = worker.run_until(std::future::pending());
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("a missing group stops the worker")
        .unwrap_err();
    match &err {
        Error::Setup(SetupError::NoGroup { key, group }) => {
            assert!(config.ready_keys().contains(key), "{key}");
            assert_eq!(group, &config.group);
        }
        other => panic!("expected NoGroup, got {other:?}"),
    }
    assert!(err.to_string().contains("run `queuegen apply`"), "{err}");
}

struct NeverCalled;

impl queuegen_runtime::Handler<TestJob> for NeverCalled {
    async fn handle(
        &self,
        job: TestJob,
        _ctx: &queuegen_runtime::JobContext,
    ) -> Result<queuegen_runtime::Outcome, queuegen_runtime::JobError> {
        panic!("no job exists, yet the handler got {job:?}");
    }
}

#[tokio::test]
async fn a_worker_for_a_partition_that_does_not_exist_is_refused() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("admin-partitions"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    ensure_groups(&redis, &config).await.unwrap();

    let err = Worker::new(&redis, config, NeverCalled)
        .partitions([1, 5])
        .run_until(std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Setup(SetupError::InvalidWorker { .. })),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("queue jobs has no partition 5: its partitions are 0 to 1"),
        "{err}"
    );
}
