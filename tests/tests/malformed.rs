//! Entries that do not decode: the worker logs the field at fault, dead-letters them with the reason and keeps working.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Timestamp, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    capture_logs, dead_letters, pending_entries, run_until_told, unique_prefix,
    wait_for_dead_letters, wait_until,
};
use queuegen_tests::{library, RedisServer};

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<String>>>,
}

impl Handler<TestJob> for Recorder {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.seen.lock().unwrap().push(ctx.job_id().to_owned());
        Ok(Outcome::Done)
    }
}

/// A well-formed TestJob entry as field/value pairs, for tests to break.
fn entry_fields(job_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("job_id", job_id.to_owned()),
        ("type", "TestJob".to_owned()),
        ("tenant", "acme".to_owned()),
        ("schema", "2".to_owned()),
        ("created_at", Timestamp::now().to_string()),
        ("trace_id", "0af7651916cd43dd8448eb211c80319c".to_owned()),
        ("attempt", "1".to_owned()),
        ("subject_ref", format!("doc-{job_id}")),
        ("pages", "12".to_owned()),
    ]
}

fn without(mut fields: Vec<(&'static str, String)>, name: &str) -> Vec<(&'static str, String)> {
    fields.retain(|(field, _)| *field != name);
    fields
}

fn with(
    mut fields: Vec<(&'static str, String)>,
    name: &str,
    value: &str,
) -> Vec<(&'static str, String)> {
    for (field, old) in &mut fields {
        if *field == name {
            *old = value.to_owned();
        }
    }
    fields
}

/// The fields of the dead letter of entry `source`.
fn dead_letter_of(
    dead: &[(StreamSlot, String, HashMap<String, String>)],
    source: &str,
) -> HashMap<String, String> {
    dead.iter()
        .find(|(_, _, fields)| fields["source_id"] == source)
        .unwrap_or_else(|| panic!("no dead letter of {source}: {dead:?}"))
        .2
        .clone()
}

// The default current-thread runtime keeps every task on this thread, where
// `capture_logs` collects their log lines.
#[tokio::test]
async fn malformed_entries_are_dead_lettered_and_the_worker_keeps_going() {
    let (logs, _guard) = capture_logs();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("malformed"), 1);
        config.handler.concurrency = 4;
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let good = |id: &str| NewJob::new(id, "acme", TestJob::new(format!("doc-{id}"), Some(1)));

    let mut conn = server.async_connection().await;
    let xadd = |fields: Vec<(&'static str, String)>| {
        let mut conn = conn.clone();
        let key = key.clone();
        async move {
            let id: String = redis::cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg(&fields[..])
                .query_async(&mut conn)
                .await
                .unwrap();
            id
        }
    };
    producer.publish(good("good-1")).await.unwrap();
    let missing = xadd(without(entry_fields("bad-missing"), "subject_ref")).await;
    let malformed = xadd(with(entry_fields("bad-integer"), "pages", "many")).await;
    producer.publish(good("good-2")).await.unwrap();
    let unaccepted = xadd(with(entry_fields("bad-schema"), "schema", "9")).await;
    xadd(entry_fields("good-3")).await;

    let recorder = Recorder::default();
    let worker = Worker::new(&redis, config.clone(), recorder.clone());
    let (stop, running) = run_until_told(worker);

    let seen = recorder.seen.clone();
    let decode_logs = logs.clone();
    wait_until(
        Duration::from_secs(10),
        "good jobs are handled and bad ones logged",
        || {
            let handled = seen.lock().unwrap().len();
            let logged = decode_logs.lines_with(&["does not decode"]).len();
            async move { handled == 3 && logged == 3 }
        },
    )
    .await;

    // Still running: a job published after the bad ones is handled too.
    assert!(!running.is_finished(), "the worker keeps running");
    producer.publish(good("good-4")).await.unwrap();
    wait_until(Duration::from_secs(10), "the later job is handled", || {
        let handled = seen.lock().unwrap().len();
        async move { handled == 4 }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    assert_eq!(report.decode_errors, 3, "{report:?}");
    assert_eq!(report.dead_lettered, 3, "{report:?}");
    assert_eq!(
        (report.handled, report.done, report.failed),
        (4, 4, 0),
        "{report:?}"
    );
    let mut handled = recorder.seen.lock().unwrap().clone();
    handled.sort();
    assert_eq!(handled, ["good-1", "good-2", "good-3", "good-4"]);

    // Nothing stays pending: each bad entry is a dead letter with its reason,
    // a detail naming the field (or the schema version) and the original fields.
    assert!(pending_entries(&mut conn, &key, &config.group)
        .await
        .is_empty());
    let dead = dead_letters(&mut conn, &config).await;
    assert_eq!(dead.len(), 3, "{dead:?}");
    let letter = |source: &str| dead_letter_of(&dead, source);
    let fields = letter(&missing);
    assert_eq!(fields["reason"], "decode_error", "{fields:?}");
    assert_eq!(fields["job_id"], "bad-missing");
    assert!(
        fields["detail"].contains("`subject_ref` is missing"),
        "{fields:?}"
    );
    assert!(
        !fields["envelope"].contains("subject_ref") && fields["envelope"].contains("bad-missing"),
        "the original fields, as they were: {fields:?}"
    );
    let fields = letter(&malformed);
    assert_eq!(fields["reason"], "decode_error", "{fields:?}");
    assert!(
        fields["detail"].contains("`pages` is not a valid u32"),
        "{fields:?}"
    );
    let fields = letter(&unaccepted);
    assert_eq!(fields["reason"], "unsupported_schema", "{fields:?}");
    assert_eq!(fields["schema"], "9");
    assert!(fields["detail"].contains("schema version 9"), "{fields:?}");

    // Each log line names the queue, key, stream ID and the field at fault.
    let line_for = |id: &str| {
        let lines = logs.lines_with(&["does not decode", id]);
        assert_eq!(lines.len(), 1, "one error for {id}: {}", logs.text());
        let line = lines[0].clone();
        assert!(line.contains("ERROR"), "{line}");
        assert!(line.contains(&key) && line.contains("jobs"), "{line}");
        line
    };
    let line = line_for(&missing);
    assert!(line.contains("field `subject_ref` is missing"), "{line}");
    assert!(
        line.contains("bad-missing"),
        "names the job when the header decodes: {line}"
    );
    let line = line_for(&malformed);
    assert!(line.contains("field `pages` is not a valid u32"), "{line}");
    assert!(
        line.contains("\\\"many\\\"") || line.contains("\"many\""),
        "{line}"
    );
    let line = line_for(&unaccepted);
    assert!(line.contains("schema version 9 is not accepted"), "{line}");
}

/// The same for packed entries: a value that does not decode names its field,
/// a packed field that does not unpack says so; both are dead-lettered, the
/// first with its job_id and envelope, the second as it was.
#[tokio::test]
async fn packed_entries_that_do_not_decode_are_dead_lettered_too() {
    let (logs, _guard) = capture_logs();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("malformed-packed"), 1);
    let key = config.ready_key(StreamSlot::new(0));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let mut conn = server.async_connection().await;
    let xadd_packed = |value: Vec<u8>| {
        let mut conn = conn.clone();
        let key = key.clone();
        async move {
            let id: String = redis::cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg(queuegen_runtime::packed::PACKED_FIELD)
                .arg(value)
                .query_async(&mut conn)
                .await
                .unwrap();
            id
        }
    };
    let bad_value = with(entry_fields("bad-packed"), "pages", "many");
    let bad_value = xadd_packed(queuegen_runtime::packed::pack(
        bad_value
            .iter()
            .map(|(name, value)| (*name, value.as_str())),
    ))
    .await;
    let broken = xadd_packed(b"\x92\xa1a\x01".to_vec()).await;
    producer
        .publish(NewJob::new(
            "good-1",
            "acme",
            TestJob::new("doc-1", Some(1)),
        ))
        .await
        .unwrap();

    let recorder = Recorder::default();
    let worker = Worker::new(&redis, config.clone(), recorder.clone());
    let (stop, running) = run_until_told(worker);
    let seen = recorder.seen.clone();
    let decode_logs = logs.clone();
    wait_until(
        Duration::from_secs(10),
        "the good job is handled and both bad ones logged",
        || {
            let handled = seen.lock().unwrap().len();
            let logged = decode_logs.lines_with(&["does not decode"]).len();
            async move { handled == 1 && logged == 2 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (report.decode_errors, report.dead_lettered),
        (2, 2),
        "{report:?}"
    );
    assert!(pending_entries(&mut conn, &key, &config.group)
        .await
        .is_empty());

    let dead = dead_letters(&mut conn, &config).await;
    let letter = |source: &str| dead_letter_of(&dead, source);
    let fields = letter(&bad_value);
    assert_eq!(fields["reason"], "decode_error", "{fields:?}");
    assert_eq!(fields["job_id"], "bad-packed", "read from the packed field");
    assert!(
        fields["detail"].contains("`pages` is not a valid u32"),
        "{fields:?}"
    );
    assert!(fields["envelope"].contains("many"), "{fields:?}");
    let fields = letter(&broken);
    assert_eq!(fields["reason"], "decode_error", "{fields:?}");
    assert_eq!(fields["job_id"], "");
    assert!(
        fields["detail"].contains("the packed entry has a non-string at item 2"),
        "{fields:?}"
    );

    let lines = logs.lines_with(&["does not decode", &broken]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(lines[0].contains(&key), "{}", lines[0]);
    assert!(lines[0].contains("the packed entry"), "{}", lines[0]);
}

/// A retry whose stored envelope is neither JSON nor MessagePack could never
/// be promoted: the scheduler dead-letters it, and the worker's report
/// counts it with the dead letters, as the metrics do.
#[tokio::test]
async fn an_unpromotable_retry_is_dead_lettered_and_counted_in_the_report() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("malformed-retry"), 1);
    let stream = StreamSlot::new(0);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();

    let mut conn = server.async_connection().await;
    let member = "1700000000000-0";
    let () = redis::pipe()
        .cmd("HSET")
        .arg(config.retry_jobs_key(stream))
        .arg(member)
        .arg("neither JSON nor MessagePack")
        .ignore()
        .cmd("ZADD")
        .arg(config.retry_key(stream))
        .arg(1)
        .arg(member)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    let worker = Worker::new(&redis, config.clone(), Recorder::default());
    let (stop, running) = run_until_told(worker);
    wait_for_dead_letters(&conn, &config, 1, Duration::from_secs(10)).await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (report.dead_lettered, report.promoted, report.handled),
        (1, 0, 0),
        "{report:?}"
    );
    let dead = dead_letters(&mut conn, &config).await;
    let fields = dead_letter_of(&dead, member);
    assert_eq!(fields["reason"], "decode_error", "{fields:?}");
}
