//! The producer against a real redis-server: what an entry looks like, where it goes, and what is refused.

use std::collections::HashMap;

use queuegen_runtime::envelope::{self, FieldMap};
use queuegen_runtime::error::PublishError;
use queuegen_runtime::partition::partition_of;
use queuegen_runtime::{Error, NewJob, Producer, Redis};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{init_tracing, unique_prefix};
use queuegen_tests::RedisServer;

async fn stream_lengths(server: &RedisServer, keys: &[String]) -> Vec<usize> {
    let mut conn = server.async_connection().await;
    let mut lengths = Vec::new();
    for key in keys {
        let len: usize = redis::cmd("XLEN")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        lengths.push(len);
    }
    lengths
}

#[tokio::test]
async fn publish_writes_a_decodable_entry_to_the_hashed_partition() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("producer"), 4);
    let redis = Redis::connect(server.url()).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let published = producer
        .publish(
            NewJob::new("job-1", "acme", TestJob::new("doc-1", Some(3))).with_trace_id("trace-1"),
        )
        .await
        .unwrap();
    let untraced = producer
        .publish(NewJob::new("job-2", "acme", TestJob::new("doc-2", None)))
        .await
        .unwrap();

    let expected = partition_of(
        &config,
        &[
            ("tenant", "acme".to_owned()),
            ("subject_ref", "doc-1".to_owned()),
        ],
    );
    assert_eq!(published.partition, expected);

    let conn = server.async_connection().await;
    let read = |key: String, id: String| {
        let mut conn = conn.clone();
        async move {
            let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(key)
                .arg(&id)
                .arg(&id)
                .query_async(&mut conn)
                .await
                .unwrap();
            reply
                .ids
                .into_iter()
                .next()
                .expect("the published entry exists")
                .map
        }
    };
    let map: HashMap<String, redis::Value> = read(
        config.ready_key(published.partition.default_stream()),
        published.stream_id,
    )
    .await;
    let (header, body) =
        envelope::decode::<TestJob>(&FieldMap::from_stream_map("TestJob", &map).unwrap()).unwrap();
    assert_eq!(header.job_id, "job-1");
    assert_eq!(header.tenant, "acme");
    assert_eq!(header.envelope_type, "TestJob");
    assert_eq!(header.schema, 2);
    assert_eq!(header.attempt, 1);
    assert_eq!(header.trace_id, "trace-1");
    assert_eq!(body, TestJob::new("doc-1", Some(3)));

    let map = read(
        config.ready_key(untraced.partition.default_stream()),
        untraced.stream_id,
    )
    .await;
    let (header, body) =
        envelope::decode::<TestJob>(&FieldMap::from_stream_map("TestJob", &map).unwrap()).unwrap();
    assert_eq!(
        header.trace_id.len(),
        32,
        "a generated trace id: {}",
        header.trace_id
    );
    assert!(header.trace_id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(body.pages, None);
}

#[tokio::test]
async fn an_oversized_job_is_refused_naming_queue_job_and_sizes() {
    init_tracing();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("producer-size"), 2);
        config.payload.max_bytes = 180;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let err = producer
        .publish(NewJob::new(
            "big-job",
            "acme",
            TestJob::new("x".repeat(150), None),
        ))
        .await
        .unwrap_err();
    match &err {
        Error::Publish(PublishError::PayloadTooLarge {
            queue,
            job_id,
            len,
            max,
        }) => {
            assert_eq!(*queue, "jobs");
            assert_eq!(job_id, "big-job");
            assert_eq!(*max, 180);
            assert!(*len > 180);
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("jobs") && message.contains("big-job"),
        "{message}"
    );
    assert_eq!(stream_lengths(&server, &config.ready_keys()).await, [0, 0]);
}

#[tokio::test]
async fn publish_many_sends_nothing_when_any_job_is_invalid() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("producer-batch"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let good = |i: u32| {
        NewJob::new(
            format!("job-{i}"),
            "acme",
            TestJob::new(format!("doc-{i}"), None),
        )
    };

    let oversized_field = TestJob::new("y".repeat(TestJob::SUBJECT_REF_MAX_BYTES + 1), None);
    let batch = vec![
        good(1),
        NewJob::new("bad-job", "acme", oversized_field),
        good(2),
    ];
    let err = producer.publish_many(batch).await.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, Error::Publish(PublishError::InvalidJob { .. })),
        "{err:?}"
    );
    assert!(message.contains("bad-job"), "{message}");
    assert!(message.contains("subject_ref"), "{message}");

    let err = producer
        .publish_many(vec![
            good(1),
            good(2),
            NewJob::new("", "acme", TestJob::new("doc", None)),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Publish(PublishError::EmptyJobId {
                queue,
                position: 2
            }) if queue == "jobs"
        ),
        "{err:?}"
    );
    assert_eq!(stream_lengths(&server, &config.ready_keys()).await, [0, 0]);

    let published = producer.publish_many((1..=10).map(good)).await.unwrap();
    assert_eq!(published.len(), 10);
    let lengths = stream_lengths(&server, &config.ready_keys()).await;
    assert_eq!(lengths.iter().sum::<usize>(), 10);
    for (partition, len) in lengths.iter().enumerate() {
        let expected = published
            .iter()
            .filter(|p| usize::from(p.partition.index()) == partition)
            .count();
        assert_eq!(*len, expected, "partition {partition}");
    }
    assert!(producer.publish_many(Vec::new()).await.unwrap().is_empty());
}

/// `WAIT` after the `XADD`: with a live replica the count says it holds the
/// job; asking for more replicas than exist returns after the timeout with
/// the count reached, never an error; without durability nothing waits.
#[tokio::test]
async fn durability_reports_how_many_replicas_hold_the_job() {
    use queuegen_runtime::Durability;
    use std::time::{Duration, Instant};

    init_tracing();
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let mut primary_conn = primary.async_connection().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut primary_conn)
            .await
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never came online: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let config = test_config(&unique_prefix("durability"), 4);
    let redis = Redis::connect(primary.url()).await.unwrap();
    let one = Durability {
        replicas: 1,
        timeout: Duration::from_secs(5),
    };
    let producer = Producer::<TestJob>::new(&redis, config.clone()).with_durability(one);

    let published = producer
        .publish(NewJob::new("job-1", "acme", TestJob::new("doc-1", None)))
        .await
        .unwrap();
    assert_eq!(published.replicas, Some(1));
    let mut replica_conn = replica.async_connection().await;
    let on_replica: Vec<redis::Value> = redis::cmd("XRANGE")
        .arg(config.ready_key(published.partition.default_stream()))
        .arg(&published.stream_id)
        .arg(&published.stream_id)
        .query_async(&mut replica_conn)
        .await
        .unwrap();
    assert_eq!(on_replica.len(), 1, "WAIT said the replica holds it");

    let batch = producer
        .publish_many((0..20).map(|i| {
            NewJob::new(
                format!("batch-{i}"),
                "acme",
                TestJob::new(format!("doc-{i}"), None),
            )
        }))
        .await
        .unwrap();
    assert!(
        batch.iter().all(|published| published.replicas == Some(1)),
        "{batch:?}"
    );

    let two = Durability {
        replicas: 2,
        timeout: Duration::from_millis(200),
    };
    let started = Instant::now();
    let short = producer
        .publish_with(
            NewJob::new("job-2", "acme", TestJob::new("doc-2", None)),
            two,
        )
        .await
        .unwrap();
    assert_eq!(
        short.replicas,
        Some(1),
        "one replica exists; the publish still succeeds"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waited the timeout for the second"
    );

    let plain = Producer::<TestJob>::new(&redis, config)
        .publish(NewJob::new("job-3", "acme", TestJob::new("doc-3", None)))
        .await
        .unwrap();
    assert_eq!(plain.replicas, None, "the spec's default (0) does not wait");
}
