//! Dedup at publish (`dedup.window`): one entry per job_id within the window, atomically, however the publishes race.

use std::collections::BTreeSet;
use std::time::Duration;

use queuegen_runtime::error::TransitionError;
use queuegen_runtime::functions::Function;
use queuegen_runtime::transitions::TransitionCode;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Error, NewJob, Producer, QueueConfig, Redis};
use queuegen_tests::fixtures::{test_config, test_job_pairs, TestJob};
use queuegen_tests::support::{applied, init_tracing, stream_entries, unique_prefix};
use queuegen_tests::RedisServer;

fn deduplicating(name: &str, window: Duration) -> QueueConfig {
    {
        let mut config = test_config(&unique_prefix(name), 4);
        config.dedup = Some(queuegen_runtime::config::DedupConfig { window });
        config
    }
}

fn job(job_id: &str) -> NewJob<TestJob> {
    NewJob::new(job_id, "acme", TestJob::new("doc-1", None))
}

/// Every entry of every partition carrying `job_id`.
async fn entries_of(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
    job_id: &str,
) -> Vec<String> {
    let mut ids = Vec::new();
    for key in config.ready_keys() {
        for (id, fields) in stream_entries(conn, &key).await {
            if fields["job_id"] == job_id {
                ids.push(id);
            }
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_racing_publishes_append_one_entry_and_answer_its_id() {
    init_tracing();
    let server = RedisServer::start();
    let config = deduplicating("dedup-race", Duration::from_secs(60));
    let (_, mut conn) = applied(&server, &config).await;

    // 32 producers on 32 connections, released together.
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(32));
    let mut racers = Vec::new();
    for _ in 0..32 {
        let redis = Redis::connect(server.url()).await.unwrap();
        let producer = Producer::<TestJob>::new(&redis, config.clone());
        let start = start.clone();
        racers.push(tokio::spawn(async move {
            start.wait().await;
            producer.publish(job("contested")).await.unwrap()
        }));
    }
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.unwrap());
    }

    let entries = entries_of(&mut conn, &config, "contested").await;
    assert_eq!(entries.len(), 1, "one entry: {entries:?}");
    let first: Vec<_> = answers.iter().filter(|a| !a.duplicate).collect();
    assert_eq!(first.len(), 1, "exactly one publish wrote: {answers:?}");
    assert_eq!(
        answers.iter().filter(|a| a.duplicate).count(),
        31,
        "{answers:?}"
    );
    let ids: BTreeSet<&str> = answers.iter().map(|a| a.stream_id.as_str()).collect();
    assert_eq!(
        ids,
        BTreeSet::from([entries[0].as_str()]),
        "every duplicate answers the first entry's ID"
    );
}

#[tokio::test]
async fn after_the_window_the_same_job_id_is_accepted_again() {
    init_tracing();
    let server = RedisServer::start();
    let config = deduplicating("dedup-window", Duration::from_millis(300));
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let first = producer.publish(job("again")).await.unwrap();
    let within = producer.publish(job("again")).await.unwrap();
    assert!(!first.duplicate);
    assert!(within.duplicate);
    assert_eq!(within.stream_id, first.stream_id);
    assert_eq!(within.partition, first.partition);

    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = producer.publish(job("again")).await.unwrap();
    assert!(!after.duplicate, "the window is over: {after:?}");
    assert_ne!(after.stream_id, first.stream_id);
    assert_eq!(entries_of(&mut conn, &config, "again").await.len(), 2);
}

#[tokio::test]
async fn a_batch_marks_each_duplicate_and_appends_the_rest() {
    init_tracing();
    let server = RedisServer::start();
    let config = deduplicating("dedup-batch", Duration::from_secs(60));
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let earlier = producer.publish(job("b-1")).await.unwrap();
    let batch = producer
        .publish_many([job("b-1"), job("b-2"), job("b-3"), job("b-2")])
        .await
        .unwrap();
    let duplicates: Vec<bool> = batch.iter().map(|p| p.duplicate).collect();
    assert_eq!(duplicates, [true, false, false, true]);
    assert_eq!(batch[0].stream_id, earlier.stream_id);
    assert_eq!(batch[3].stream_id, batch[1].stream_id);
    for job_id in ["b-1", "b-2", "b-3"] {
        assert_eq!(
            entries_of(&mut conn, &config, job_id).await.len(),
            1,
            "{job_id}"
        );
    }
}

#[tokio::test]
async fn the_function_refuses_a_malformed_call_and_writes_nothing() {
    init_tracing();
    let server = RedisServer::start();
    let config = deduplicating("dedup-preflight", Duration::from_secs(60));
    let (_, mut conn) = applied(&server, &config).await;
    let function = config.function(Function::PublishOnce);
    let ready = config.ready_key(StreamSlot::new(0));
    let marker = |job_id: &str| config.marker_key(StreamSlot::new(0), "publish", job_id);
    let call = |keys: Vec<String>, argv: Vec<String>| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&function).arg(keys.len()).arg(keys).arg(argv);
        cmd
    };
    let pairs: Vec<String> = test_job_pairs("p-1")
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), value])
        .collect();
    // ARGV = [window_ms, max_bytes (the queue's payload.max_bytes), fields...].
    let with = |window: &str, fields: &[String]| {
        [window.to_owned(), config.payload.max_bytes.to_string()]
            .into_iter()
            .chain(fields.iter().cloned())
            .collect::<Vec<_>>()
    };
    let refusals = [
        // An odd field list.
        (
            call(
                vec![ready.clone(), marker("p-1")],
                with("60000", &pairs[..pairs.len() - 1]),
            ),
            "QG_BADARG",
        ),
        // A zero window.
        (
            call(vec![ready.clone(), marker("p-1")], with("0", &pairs)),
            "QG_BADARG",
        ),
        // The marker of another job_id.
        (
            call(vec![ready.clone(), marker("p-2")], with("60000", &pairs)),
            "QG_BADARG",
        ),
        // The stream of another partition.
        (
            call(
                vec![config.ready_key(StreamSlot::new(1)), marker("p-1")],
                with("60000", &pairs),
            ),
            "QG_BADARG",
        ),
        // No job_id at all.
        (
            call(
                vec![ready.clone(), marker("p-1")],
                with("60000", &["tenant".to_owned(), "acme".to_owned()]),
            ),
            "QG_BADENVELOPE",
        ),
    ];
    for (cmd, code) in refusals {
        let err = cmd
            .query_async::<redis::Value>(&mut conn)
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Some(code), "{err}");
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", config.key_prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    let written: Vec<&String> = keys.iter().filter(|key| !key.ends_with(":ready")).collect();
    assert!(written.is_empty(), "nothing written: {written:?}");
    for key in config.ready_keys() {
        assert!(stream_entries(&mut conn, &key).await.is_empty(), "{key}");
    }
}

#[tokio::test]
async fn an_error_of_the_function_names_queue_partition_and_job() {
    init_tracing();
    let server = RedisServer::start();
    let config = deduplicating("dedup-error", Duration::from_secs(60));
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    // Something else holds the job's marker key.
    let partition = producer.publish(job("taken")).await.unwrap().partition;
    let marker = config.marker_key(partition.default_stream(), "publish", "taken");
    let _: () = redis::cmd("DEL")
        .arg(&marker)
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("LPUSH")
        .arg(&marker)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();

    let err = producer.publish(job("taken")).await.unwrap_err();
    match &err {
        Error::Transition(TransitionError::Refused {
            code,
            partition: at,
            job,
            ..
        }) => {
            assert_eq!(*code, TransitionCode::WrongType);
            assert_eq!(*at, partition);
            assert_eq!(job, "taken");
        }
        other => panic!("expected a transition error, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("publish_once") && text.contains("taken"),
        "{text}"
    );
}

#[tokio::test]
async fn a_ready_key_of_another_type_is_refused_and_no_marker_is_left() {
    init_tracing();
    let server = RedisServer::start();
    let config = QueueConfig {
        partitions: 1,
        ..deduplicating("dedup-ready-type", Duration::from_secs(60))
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let ready = config.ready_key(StreamSlot::new(0));
    let _: () = redis::cmd("DEL")
        .arg(&ready)
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&ready)
        .arg("not a stream")
        .query_async(&mut conn)
        .await
        .unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let err = producer.publish(job("nowhere")).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Transition(TransitionError::Refused {
                code: TransitionCode::WrongType,
                ..
            })
        ),
        "{err:?}"
    );
    let marker: bool = redis::cmd("EXISTS")
        .arg(config.marker_key(StreamSlot::new(0), "publish", "nowhere"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!marker, "a refused publish leaves no marker");
}
