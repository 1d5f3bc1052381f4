//! `publish_batch`, a pipeline hand-off's append: `publish_once` for several envelopes of one partition, each checked before the first write.

use queuegen_runtime::functions::{self, Function, PublishBatch};
use queuegen_runtime::{QueueConfig, StreamSlot};
use queuegen_tests::fixtures::{test_config, test_job_pairs};
use queuegen_tests::support::{applied, init_tracing, stream_entries, unique_prefix};
use queuegen_tests::RedisServer;

const WINDOW_MS: u64 = 60_000;

/// The test job's envelope with `job_id`, as flat field/value strings.
fn envelope(job_id: &str) -> Vec<String> {
    test_job_pairs(job_id)
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), value])
        .collect()
}

fn batch_command(config: &QueueConfig, job_ids: &[&str], envelopes: &[Vec<String>]) -> redis::Cmd {
    let slot = StreamSlot::new(0);
    let markers: Vec<String> = job_ids
        .iter()
        .map(|id| config.marker_key(slot, "publish", id))
        .collect();
    functions::command(
        &config.function(Function::PublishBatch),
        &PublishBatch {
            ready_key: &config.ready_key(slot),
            marker_keys: &markers,
            window_ms: WINDOW_MS,
            payload_max_bytes: config.payload.max_bytes,
            envelopes,
        },
    )
}

/// Every key under the queue's prefix but its ready streams, and every entry.
async fn written(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
) -> (Vec<String>, usize) {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", config.key_prefix))
        .query_async(conn)
        .await
        .unwrap();
    keys.retain(|key| !key.ends_with(":ready"));
    keys.sort();
    let mut entries = 0;
    for key in config.ready_keys() {
        entries += stream_entries(conn, &key).await.len();
    }
    (keys, entries)
}

#[tokio::test]
async fn a_batch_appends_each_new_job_once_and_answers_the_first_id_of_a_repeat() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("publish-batch"), 1);
    let (_, mut conn) = applied(&server, &config).await;

    let first: Vec<(String, String)> =
        batch_command(&config, &["a", "b"], &[envelope("a"), envelope("b")])
            .query_async(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        first
            .iter()
            .map(|(status, _)| status.as_str())
            .collect::<Vec<_>>(),
        ["published", "published"]
    );
    // A parent delivered again: `a` again beside a new `c`, and `d` twice in one call.
    let second: Vec<(String, String)> = batch_command(
        &config,
        &["a", "c", "d", "d"],
        &[envelope("a"), envelope("c"), envelope("d"), envelope("d")],
    )
    .query_async(&mut conn)
    .await
    .unwrap();
    assert_eq!(second[0], ("duplicate".to_owned(), first[0].1.clone()));
    assert_eq!(second[1].0, "published");
    assert_eq!(second[2].0, "published");
    assert_eq!(second[3], ("duplicate".to_owned(), second[2].1.clone()));
    let entries = stream_entries(&mut conn, &config.ready_key(StreamSlot::new(0))).await;
    let ids: Vec<&str> = entries.iter().map(|(_, f)| f["job_id"].as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn the_function_refuses_a_malformed_batch_and_writes_nothing() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("publish-batch-refusals"), 2);
    let (_, mut conn) = applied(&server, &config).await;
    let function = config.function(Function::PublishBatch);
    let slot = StreamSlot::new(0);
    let ready = config.ready_key(slot);
    let marker = |job_id: &str| config.marker_key(slot, "publish", job_id);
    let raw = |keys: Vec<String>, argv: Vec<String>| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&function).arg(keys.len()).arg(keys).arg(argv);
        cmd
    };
    // ARGV = [window_ms, max_bytes, count_1, items_1..., count_2, items_2...].
    let argv = |envelopes: &[Vec<String>]| {
        let mut argv = vec![WINDOW_MS.to_string(), config.payload.max_bytes.to_string()];
        for envelope in envelopes {
            argv.push(envelope.len().to_string());
            argv.extend(envelope.iter().cloned());
        }
        argv
    };
    let oversized = {
        let mut e = envelope("big");
        e.push("padding".to_owned());
        e.push("x".repeat(config.payload.max_bytes));
        e
    };
    let too_many: Vec<Vec<String>> = (0..=100).map(|n| envelope(&format!("m{n}"))).collect();
    let too_many_keys: Vec<String> = std::iter::once(ready.clone())
        .chain((0..=100).map(|n| marker(&format!("m{n}"))))
        .collect();
    // Each refusal has a good first envelope: nothing of it may be written.
    let cases = [
        (
            "a second envelope over payload.max_bytes",
            raw(
                vec![ready.clone(), marker("ok"), marker("big")],
                argv(&[envelope("ok"), oversized]),
            ),
            "QG_BADENVELOPE",
        ),
        (
            "a marker of another job_id",
            raw(
                vec![ready.clone(), marker("ok"), marker("other")],
                argv(&[envelope("ok"), envelope("p-2")]),
            ),
            "QG_BADARG",
        ),
        (
            "a marker of another partition",
            raw(
                vec![
                    ready.clone(),
                    marker("ok"),
                    config.marker_key(StreamSlot::new(1), "publish", "p-2"),
                ],
                argv(&[envelope("ok"), envelope("p-2")]),
            ),
            "QG_BADARG",
        ),
        (
            "an item count past the end",
            raw(vec![ready.clone(), marker("ok")], {
                let mut a = argv(&[envelope("ok")]);
                a[2] = "99".to_owned();
                a
            }),
            "QG_BADARG",
        ),
        (
            "fewer markers than envelopes",
            raw(
                vec![ready.clone(), marker("ok")],
                argv(&[envelope("ok"), envelope("p-2")]),
            ),
            "QG_BADARG",
        ),
        (
            "more than MAX_PUBLISH_BATCH envelopes",
            raw(too_many_keys, argv(&too_many)),
            "QG_BADARG",
        ),
    ];
    for (what, cmd, code) in cases {
        let err = cmd
            .query_async::<redis::Value>(&mut conn)
            .await
            .expect_err(what);
        assert_eq!(err.code(), Some(code), "{what}: {err}");
        assert_eq!(
            written(&mut conn, &config).await,
            (vec![], 0),
            "{what}: something was written"
        );
    }

    // A second marker held by another type: refused before the first append.
    let _: () = redis::cmd("HSET")
        .arg(marker("squatted"))
        .arg("x")
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = batch_command(
        &config,
        &["ok", "squatted"],
        &[envelope("ok"), envelope("squatted")],
    )
    .query_async::<redis::Value>(&mut conn)
    .await
    .expect_err("a hash where a marker goes");
    assert_eq!(err.code(), Some("QG_WRONGTYPE"), "{err}");
    assert!(err.to_string().contains(&marker("squatted")), "{err}");
    assert_eq!(
        written(&mut conn, &config).await,
        (vec![marker("squatted")], 0),
        "nothing appended, no marker set"
    );
}
