//! Producer admission against a real redis-server: a partition whose slowest
//! group has an undelivered entry older than `admission.max_oldest_ready_age`
//! is refused with `Backpressure` and nothing is written; it is admitted again
//! once the group catches up; readings are cached for `admission.refresh`.
//!
//! Stalled groups are built with entries added under explicit IDs an hour in
//! the past, so their age is known exactly and no test waits for one to age.

use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::PublishError;
use queuegen_runtime::host::now_ms;
use queuegen_runtime::partition::partition_of;
use queuegen_runtime::Partition;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Error, NewJob, Producer, QueueConfig, Redis};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{capture_logs, capture_logs_at, pending_count, unique_prefix};
use queuegen_tests::RedisServer;
use redis::aio::MultiplexedConnection;

const HOUR: Duration = Duration::from_secs(3600);
const LIMIT: Duration = Duration::from_secs(5);

/// A queue of `partitions` with admission at [`LIMIT`], its groups created
/// (starting at `0-0`, so anything added later is undelivered).
struct Setup {
    server: RedisServer,
    config: QueueConfig,
    redis: Redis,
    conn: MultiplexedConnection,
}

async fn setup(name: &str, partitions: u16, refresh: Duration) -> Setup {
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix(name), partitions);
        config.admission.max_oldest_ready_age = Some(LIMIT);
        config.admission.refresh = refresh;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    ensure_groups(&redis, &config).await.unwrap();
    let conn = server.async_connection().await;
    Setup {
        server,
        config,
        redis,
        conn,
    }
}

/// Job number `n` for tenant `acme`, with a subject chosen so it lands on `partition`.
fn job_for(config: &QueueConfig, partition: u16, n: usize) -> NewJob<TestJob> {
    let subject = (0..)
        .map(|i| format!("doc-{n}-{i}"))
        .find(|subject| {
            partition_of(
                config,
                &[
                    ("tenant", "acme".to_owned()),
                    ("subject_ref", subject.clone()),
                ],
            ) == Partition::new(partition)
        })
        .expect("some subject hashes to every partition");
    NewJob::new(
        format!("job-{partition}-{n}"),
        "acme",
        TestJob::new(subject, None),
    )
}

/// Adds an entry under an explicit ID `age` in the past; returns the ID's milliseconds.
async fn add_old_entry(conn: &mut MultiplexedConnection, key: &str, age: Duration) -> u64 {
    let ms = now_ms() - u64::try_from(age.as_millis()).unwrap();
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg(format!("{ms}-0"))
        .arg("job_id")
        .arg("stalled")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XADD {key} {ms}-0: {err}"));
    ms
}

async fn xlen(conn: &mut MultiplexedConnection, key: &str) -> usize {
    redis::cmd("XLEN").arg(key).query_async(conn).await.unwrap()
}

/// Reads every new entry of `key` as `group` and acknowledges it: the group has caught up.
async fn catch_up(conn: &mut MultiplexedConnection, key: &str, group: &str) -> usize {
    let read: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg("catcher")
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query_async(conn)
        .await
        .unwrap();
    let ids: Vec<String> = read
        .keys
        .into_iter()
        .flat_map(|stream| stream.ids)
        .map(|entry| entry.id)
        .collect();
    let acked: usize = redis::cmd("XACK")
        .arg(key)
        .arg(group)
        .arg(&ids)
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(acked, ids.len());
    ids.len()
}

/// `calls` of one command in `INFO commandstats` (e.g. `xinfo|groups`), 0 when never run.
async fn calls(conn: &mut MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

async fn reset_stats(conn: &mut MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
}

/// Unwraps a `Backpressure` refusal into `(queue, partition, age, limit)`.
fn backpressure<T: std::fmt::Debug>(
    result: queuegen_runtime::Result<T>,
) -> (String, Partition, Duration, Duration) {
    match result {
        Err(Error::Publish(PublishError::Backpressure {
            queue,
            partition,
            lane: None,
            oldest_ready_age,
            limit,
        })) => (queue, partition, oldest_ready_age, limit),
        other => panic!("expected Backpressure, got {other:?}"),
    }
}

/// The refused age is the stalled entry's: at least the hour it was backdated
/// by, at most its age now (plus a second for the two clocks involved).
fn assert_age_of(age: Duration, entry_ms: u64) {
    let upper = Duration::from_millis(now_ms() - entry_ms) + Duration::from_secs(1);
    assert_eq!(age.subsec_nanos() % 1_000_000, 0, "{age:?} is in whole ms");
    assert!(
        age >= HOUR && age <= upper,
        "age {age:?} outside [{HOUR:?}, {upper:?}]"
    );
}

#[tokio::test]
async fn a_stalled_group_refuses_publish_until_it_catches_up() {
    let refresh = Duration::from_millis(300);
    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-stalled", 2, refresh).await;
    let key = config.ready_key(StreamSlot::new(1));
    let entry_ms = add_old_entry(&mut conn, &key, HOUR).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let (logs, _guard) = capture_logs();
    let refused = producer.publish(job_for(&config, 1, 0)).await;
    let (queue, partition, age, limit) = backpressure(refused);
    assert_eq!(
        (queue.as_str(), partition, limit),
        ("jobs", Partition::new(1), LIMIT)
    );
    assert_age_of(age, entry_ms);
    assert_eq!(
        xlen(&mut conn, &key).await,
        1,
        "a refused publish writes nothing"
    );
    let message = Error::Publish(PublishError::Backpressure {
        queue,
        partition,
        lane: None,
        oldest_ready_age: Duration::from_secs(3600),
        limit,
    })
    .to_string();
    assert_eq!(
        message,
        "queue jobs partition 1: backpressure: the oldest undelivered entry is 1h, above admission.max_oldest_ready_age = 5s"
    );
    let warnings = logs.lines_with(&[
        "WARN",
        "publish refused: backpressure",
        "queue=\"jobs\"",
        "partition=1",
        "group=\"workers\"",
        "oldest_ready_age=1h",
        "limit=5s",
    ]);
    assert_eq!(warnings.len(), 1, "{}", logs.text());

    // A second try within the same reading is refused too, logged at debug only.
    backpressure(producer.publish(job_for(&config, 1, 1)).await);
    assert_eq!(logs.lines_with(&["WARN"]).len(), 1, "{}", logs.text());

    assert_eq!(catch_up(&mut conn, &key, &config.group).await, 1);
    assert_eq!(pending_count(&mut conn, &key, &config.group).await, 0);

    // Admitted again once the cached reading is refreshed: within `refresh`
    // (the deadline adds slack for a busy machine; no timing is asserted).
    let deadline = tokio::time::Instant::now() + refresh + Duration::from_secs(5);
    let published = loop {
        match producer.publish(job_for(&config, 1, 2)).await {
            Ok(published) => break published,
            Err(Error::Publish(PublishError::Backpressure { .. }))
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => panic!("still refused after refresh + 5s: {err}"),
        }
    };
    assert_eq!(published.partition, Partition::new(1));
    assert_eq!(
        xlen(&mut conn, &key).await,
        2,
        "the stalled entry and exactly one accepted job"
    );
}

#[tokio::test]
async fn the_slowest_group_decides() {
    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-two-groups", 1, Duration::from_millis(100)).await;
    let key = config.ready_key(StreamSlot::new(0));
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&key)
        .arg("audit")
        .arg("0-0")
        .query_async(&mut conn)
        .await
        .unwrap();
    let entry_ms = add_old_entry(&mut conn, &key, HOUR).await;
    // The queue's own group is caught up; only `audit` lags.
    assert_eq!(catch_up(&mut conn, &key, &config.group).await, 1);

    let (logs, _guard) = capture_logs();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let (queue, partition, age, limit) =
        backpressure(producer.publish(job_for(&config, 0, 0)).await);
    assert_eq!(
        (queue.as_str(), partition, limit),
        ("jobs", Partition::new(0), LIMIT)
    );
    assert_age_of(age, entry_ms);
    assert_eq!(xlen(&mut conn, &key).await, 1);
    assert_eq!(
        logs.lines_with(&["WARN", "partition=0", "group=\"audit\""])
            .len(),
        1,
        "{}",
        logs.text()
    );
}

#[tokio::test]
async fn a_partition_that_is_fine_is_admitted_while_another_is_refused() {
    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-per-partition", 2, Duration::from_millis(100)).await;
    add_old_entry(&mut conn, &config.ready_key(StreamSlot::new(0)), HOUR).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let fine = producer.publish(job_for(&config, 1, 0)).await.unwrap();
    assert_eq!(fine.partition, Partition::new(1));
    let (_, partition, _, _) = backpressure(producer.publish(job_for(&config, 0, 0)).await);
    assert_eq!(partition, Partition::new(0));
    assert_eq!(
        xlen(&mut conn, &config.ready_key(StreamSlot::new(0))).await,
        1
    );
    assert_eq!(
        xlen(&mut conn, &config.ready_key(StreamSlot::new(1))).await,
        1
    );
}

#[tokio::test]
async fn publish_many_with_one_refused_partition_writes_nothing() {
    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-batch", 4, Duration::from_millis(100)).await;
    add_old_entry(&mut conn, &config.ready_key(StreamSlot::new(2)), HOUR).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    // Two jobs for every partition, the refused one among them.
    let batch: Vec<_> = (0..8)
        .map(|n| job_for(&config, (n % 4) as u16, n))
        .collect();
    let (queue, partition, _, limit) = backpressure(producer.publish_many(batch).await);
    assert_eq!(
        (queue.as_str(), partition, limit),
        ("jobs", Partition::new(2), LIMIT)
    );
    let mut lengths = Vec::new();
    for p in StreamSlot::all(4) {
        lengths.push(xlen(&mut conn, &config.ready_key(p)).await);
    }
    assert_eq!(lengths, [0, 0, 1, 0], "nothing of the batch was written");

    // The same jobs minus partition 2's are admitted, in one batch.
    let fine: Vec<_> = (0..8)
        .filter(|n| n % 4 != 2)
        .map(|n| job_for(&config, (n % 4) as u16, n))
        .collect();
    let published = producer.publish_many(fine).await.unwrap();
    assert_eq!(published.len(), 6);
    let mut lengths = Vec::new();
    for p in StreamSlot::all(4) {
        lengths.push(xlen(&mut conn, &config.ready_key(p)).await);
    }
    assert_eq!(lengths, [2, 2, 1, 2]);
}

/// Between refreshes a publish sends no inventory command: one reading per
/// partition serves every publish of every producer made from one `Redis`
/// handle, and a batch reads its stale partitions together.
#[tokio::test]
async fn readings_are_cached_per_partition_and_shared_by_producers_of_one_handle() {
    let Setup {
        server,
        config,
        redis,
        mut conn,
    } = setup("admission-cache", 2, HOUR).await;
    reset_stats(&mut conn).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let clone = producer.clone();
    for n in 0..10 {
        producer.publish(job_for(&config, 0, n)).await.unwrap();
        clone.publish(job_for(&config, 0, 10 + n)).await.unwrap();
    }
    assert_eq!(calls(&mut conn, "xadd").await, 20);
    assert_eq!(
        calls(&mut conn, "xinfo|groups").await,
        1,
        "one reading of partition 0 for 20 publishes from two clones"
    );

    // A batch over both partitions reads only partition 1, which was never read.
    let batch: Vec<_> = (0..10)
        .map(|n| job_for(&config, (n % 2) as u16, 100 + n))
        .collect();
    assert_eq!(clone.publish_many(batch).await.unwrap().len(), 10);
    assert_eq!(calls(&mut conn, "xadd").await, 30);
    assert_eq!(calls(&mut conn, "xinfo|groups").await, 2);

    // A producer made anew from the same handle (as `ocr::producer(&redis)`
    // per request does) shares the readings: no new inventory.
    let other = Producer::<TestJob>::new(&redis.clone(), config.clone());
    let batch: Vec<_> = (0..4)
        .map(|n| job_for(&config, (n % 2) as u16, 200 + n))
        .collect();
    other.publish_many(batch).await.unwrap();
    assert_eq!(calls(&mut conn, "xinfo|groups").await, 2);

    // Another connection handle has its own cache: one more reading per partition it touches.
    let elsewhere = queuegen_runtime::Redis::connect(server.url())
        .await
        .unwrap();
    let batch: Vec<_> = (0..4)
        .map(|n| job_for(&config, (n % 2) as u16, 300 + n))
        .collect();
    Producer::<TestJob>::new(&elsewhere, config.clone())
        .publish_many(batch)
        .await
        .unwrap();
    assert_eq!(calls(&mut conn, "xinfo|groups").await, 4);
}

#[tokio::test]
async fn without_a_limit_a_stalled_queue_is_published_to_with_no_inventory() {
    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-off", 1, Duration::from_millis(100)).await;
    let config = {
        let mut config = config;
        config.admission.max_oldest_ready_age = None;
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
    add_old_entry(&mut conn, &key, HOUR).await;
    reset_stats(&mut conn).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer.publish(job_for(&config, 0, 0)).await.unwrap();
    producer
        .publish_many((1..4).map(|n| job_for(&config, 0, n)))
        .await
        .unwrap();
    assert_eq!(xlen(&mut conn, &key).await, 5);
    assert_eq!(calls(&mut conn, "xinfo|groups").await, 0);
    assert_eq!(calls(&mut conn, "xpending").await, 0);
    assert_eq!(calls(&mut conn, "xrange").await, 0);
}

/// Every accepted job is a `debug` event naming job, queue, partition and stream ID.
#[tokio::test]
async fn accepted_jobs_are_debug_events() {
    let Setup {
        server: _server,
        config,
        redis,
        conn: _,
    } = setup("admission-events", 2, Duration::from_millis(100)).await;
    let (logs, _guard) = capture_logs_at("queuegen_runtime=debug");
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let one = producer.publish(job_for(&config, 1, 0)).await.unwrap();
    let many = producer
        .publish_many([job_for(&config, 0, 1), job_for(&config, 1, 2)])
        .await
        .unwrap();
    let expected = [
        ("job-1-0", &one),
        ("job-0-1", &many[0]),
        ("job-1-2", &many[1]),
    ];
    for (job_id, published) in expected {
        let stream_id = format!("stream_id={}", published.stream_id);
        let partition = format!("partition={}", published.partition);
        let job = format!("job_id=\"{job_id}\"");
        let lines = logs.lines_with(&[
            "DEBUG",
            "accepted",
            &job,
            "queue=\"jobs\"",
            &partition,
            &stream_id,
        ]);
        assert_eq!(lines.len(), 1, "{job_id}: {}", logs.text());
    }
    assert_eq!(logs.lines_with(&["accepted"]).len(), 3);
}

/// A producer with metrics counts what it appended and what admission
/// refused, by queue and partition, and nothing for a partition it never touched.
#[tokio::test]
async fn producer_metrics_count_publishes_and_refusals() {
    use queuegen_runtime::metrics::{ProducerMetrics, Registry};
    use queuegen_tests::exposition;

    let Setup {
        server: _server,
        config,
        redis,
        mut conn,
    } = setup("admission-metrics", 3, HOUR).await;
    add_old_entry(&mut conn, &config.ready_key(StreamSlot::new(1)), HOUR).await;
    let metrics = ProducerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let producer = Producer::<TestJob>::new(&redis, config.clone()).with_metrics(metrics);

    producer.publish(job_for(&config, 0, 0)).await.unwrap();
    let batch: Vec<_> = (1..4).map(|n| job_for(&config, 0, n)).collect();
    producer.publish_many(batch).await.unwrap();
    backpressure(producer.publish(job_for(&config, 1, 4)).await);
    let mixed = vec![job_for(&config, 0, 5), job_for(&config, 1, 6)];
    backpressure(producer.publish_many(mixed).await);

    let mut text = String::new();
    queuegen_runtime::metrics::prometheus_client::encoding::text::encode(&mut text, &registry)
        .unwrap();
    let scraped = exposition::parse(&text).unwrap();
    fn at(partition: &str) -> [(&str, &str); 2] {
        [("queue", "jobs"), ("partition", partition)]
    }
    assert_eq!(
        scraped.value("queuegen_jobs_published_total", &at("0")),
        Some(4.0)
    );
    assert_eq!(
        scraped.value("queuegen_backpressure_refusals_total", &at("1")),
        Some(2.0)
    );
    assert_eq!(
        scraped.value("queuegen_jobs_published_total", &at("1")),
        None
    );
    assert_eq!(
        scraped.value("queuegen_backpressure_refusals_total", &at("0")),
        None
    );
    assert_eq!(scraped.sum("queuegen_jobs_published_total", &[]), 4.0);
}
