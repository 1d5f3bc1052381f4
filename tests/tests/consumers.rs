//! Consumer hygiene: the `consumers_prune` Function removes a group's consumers idle past the bound that hold no pending entry, and the partition's leader calls it, so the consumers each deploy adds do not pile up.
//!
//! `XINFO CONSUMERS` changed between servers (Redis 7.2 added `inactive`
//! beside `idle`), so this binary runs on every server of the matrix.

use std::time::Duration;

use queuegen_runtime::functions::Function;
use queuegen_runtime::ops::status::{status_of, AlertThresholds, WatchedQueue};
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, StreamSlot, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{applied, deliver_to, spawn_worker, unique_prefix, wait_until};
use queuegen_tests::RedisServer;
use redis::aio::MultiplexedConnection;

/// Handles every job at once.
#[derive(Clone)]
struct Quick;

impl Handler<TestJob> for Quick {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        Ok(Outcome::Done)
    }
}

/// The consumers of the queue's group on `key`, by name, with their pending counts.
async fn consumers(conn: &mut MultiplexedConnection, key: &str, group: &str) -> Vec<(String, u64)> {
    let reply: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(key)
        .arg(group)
        .query_async(conn)
        .await
        .unwrap();
    let mut found: Vec<(String, u64)> = reply
        .into_iter()
        .map(|consumer| {
            let name: String = redis::from_redis_value(consumer["name"].clone()).unwrap();
            let pending: u64 = redis::from_redis_value(consumer["pending"].clone()).unwrap();
            (name, pending)
        })
        .collect();
    found.sort();
    found
}

/// Makes `consumer` a consumer of `group` with nothing delivered (a worker
/// whose reads found nothing: `XREADGROUP` itself creates no consumer then).
async fn create_consumer(conn: &mut MultiplexedConnection, key: &str, group: &str, consumer: &str) {
    let created: u64 = redis::cmd("XGROUP")
        .arg("CREATECONSUMER")
        .arg(key)
        .arg(group)
        .arg(consumer)
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(created, 1, "{consumer} was new");
}

/// The partition's count of consumers removed (`pruned`).
async fn pruned_count(conn: &mut MultiplexedConnection, pruned_key: &str) -> u64 {
    redis::cmd("GET")
        .arg(pruned_key)
        .query_async(conn)
        .await
        .unwrap()
}

/// Appends one entry to `key` (what it holds does not matter to a consumer).
async fn append(conn: &mut MultiplexedConnection, key: &str) {
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg("*")
        .arg("x")
        .arg("1")
        .query_async(conn)
        .await
        .unwrap();
}

/// `consumers_prune` on `config`'s first stream, as the leader `keep` calls it.
async fn prune(
    conn: &mut MultiplexedConnection,
    config: &QueueConfig,
    keys: [&str; 2],
    group: &str,
    keep: &str,
    min_idle_ms: &str,
) -> redis::RedisResult<Vec<String>> {
    redis::cmd("FCALL")
        .arg(config.function(Function::ConsumersPrune))
        .arg(2)
        .arg(&keys)
        .arg(group)
        .arg(keep)
        .arg(min_idle_ms)
        .query_async(conn)
        .await
}

#[tokio::test]
async fn prune_removes_only_idle_consumers_holding_nothing_and_counts_them() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("prune-fn"), 1);
    let (_redis, mut conn) = applied(&server, &config).await;
    let stream = StreamSlot::new(0);
    let key = config.ready_key(stream);
    let pruned_key = config.pruned_key(stream);
    let group = &*config.group;

    // `gone` read and left; `busy` holds an entry it never acked; `me` is
    // the caller; all three then idle past the bound. `fresh` reads after.
    create_consumer(&mut conn, &key, group, "gone").await;
    append(&mut conn, &key).await;
    deliver_to(&mut conn, &key, group, "busy").await;
    create_consumer(&mut conn, &key, group, "me").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    create_consumer(&mut conn, &key, group, "fresh").await;

    let removed = prune(&mut conn, &config, [&key, &pruned_key], group, "me", "200")
        .await
        .unwrap();
    assert_eq!(removed, ["gone"]);
    assert_eq!(
        consumers(&mut conn, &key, group).await,
        [
            ("busy".to_owned(), 1),
            ("fresh".to_owned(), 0),
            ("me".to_owned(), 0)
        ]
    );
    assert_eq!(pruned_count(&mut conn, &pruned_key).await, 1);

    // Run again: nothing more to remove, the count stands.
    let again = prune(&mut conn, &config, [&key, &pruned_key], group, "me", "200")
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(pruned_count(&mut conn, &pruned_key).await, 1);

    // A stream that does not exist has no consumers.
    let other = test_config(&unique_prefix("prune-none"), 1);
    let (missing, missing_pruned) = (other.ready_key(stream), other.pruned_key(stream));
    let none = prune(
        &mut conn,
        &config,
        [&missing, &missing_pruned],
        group,
        "me",
        "1",
    )
    .await
    .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn prune_refuses_bad_input_and_removes_nothing() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("prune-bad"), 2);
    let (_redis, mut conn) = applied(&server, &config).await;
    let (first, second) = (StreamSlot::new(0), StreamSlot::new(1));
    let key = config.ready_key(first);
    let pruned_key = config.pruned_key(first);
    let group = &*config.group;
    create_consumer(&mut conn, &key, group, "gone").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let other_partition = config.pruned_key(second);
    // What is wrong, the keys, group, keep, min_idle_ms, and what the refusal says.
    type Case<'a> = (&'a str, [&'a str; 2], &'a str, &'a str, &'a str, &'a str);
    let cases: [Case; 6] = [
        (
            "no group",
            [&key, &pruned_key],
            "nobody",
            "me",
            "1",
            "is not a consumer group of",
        ),
        (
            "an empty keep",
            [&key, &pruned_key],
            group,
            "",
            "1",
            "keep must not be empty",
        ),
        (
            "a zero bound",
            [&key, &pruned_key],
            group,
            "me",
            "0",
            "min_idle_ms",
        ),
        (
            "a bound that is no number",
            [&key, &pruned_key],
            group,
            "me",
            "soon",
            "min_idle_ms",
        ),
        (
            "keys of two partitions",
            [&key, &other_partition],
            group,
            "me",
            "1",
            "KEYS[2]",
        ),
        (
            "the keys swapped",
            [&pruned_key, &key],
            group,
            "me",
            "1",
            "KEYS[1]",
        ),
    ];
    for (what, keys, group_arg, keep, min_idle, says) in cases {
        let err = prune(&mut conn, &config, keys, group_arg, keep, min_idle)
            .await
            .expect_err(what);
        assert_eq!(err.code(), Some("QG_BADARG"), "{what}: {err}");
        assert!(err.to_string().contains(says), "{what}: {err}");
    }
    // A counter of another type: refused by its type, before any removal.
    let _: () = redis::cmd("HSET")
        .arg(&pruned_key)
        .arg("squatter")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = prune(&mut conn, &config, [&key, &pruned_key], group, "me", "1")
        .await
        .expect_err("a squatted counter");
    assert_eq!(err.code(), Some("QG_WRONGTYPE"), "{err}");
    assert_eq!(
        consumers(&mut conn, &key, group).await,
        [("gone".to_owned(), 0)],
        "every refusal removed nothing"
    );
}

/// The leader prunes on its own: a consumer a pod left behind goes, one
/// holding an entry stays (its entry is recovery's), the worker's own
/// stays; the report, the metric's source and `status` count it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_removes_what_old_pods_left_and_status_counts_it() {
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("prune-leader"), 1);
        config.prune_consumers_after = Duration::from_millis(300);
        config.claim.every = Duration::from_millis(100);
        // The held entry is never claimed within the test.
        config.claim.min_idle = Duration::from_secs(60);
        config
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let key = config.ready_key(StreamSlot::new(0));
    let group = config.group.to_string();
    create_consumer(&mut conn, &key, &group, "pod-old-1").await;
    append(&mut conn, &key).await;
    deliver_to(&mut conn, &key, &group, "pod-old-2").await;

    // A job, so that the worker's own consumer exists (a read that finds
    // nothing creates none).
    Producer::<TestJob>::new(&redis, config.clone())
        .publish(NewJob::new("job-1", "acme", TestJob::new("x", None)))
        .await
        .unwrap();
    let worker = spawn_worker(Worker::new(&redis, config.clone(), Quick));
    wait_until(Duration::from_secs(15), "pod-old-1 is removed", || {
        let mut conn = conn.clone();
        let key = key.clone();
        let group = group.clone();
        async move {
            !consumers(&mut conn, &key, &group)
                .await
                .iter()
                .any(|(name, _)| name == "pod-old-1")
        }
    })
    .await;
    // A few more periods: nothing else goes.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let left = consumers(&mut conn, &key, &group).await;
    let report = worker.stop().await;
    assert_eq!(report.consumers_pruned, 1, "{report:?}");
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&("pod-old-2".to_owned(), 1)), "{left:?}");
    assert!(
        left.iter()
            .any(|(name, _)| name.starts_with("vm-") || name.contains('-')),
        "the worker's own consumer stays: {left:?}"
    );

    let report = status_of(
        &redis,
        &[WatchedQueue {
            config: config.clone(),
            alerts: AlertThresholds::default(),
        }],
    )
    .await
    .unwrap();
    assert_eq!(report.queues[0].partitions[0].consumers_pruned, 1);
}
