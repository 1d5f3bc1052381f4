//! `queuegen dlq list|show|replay` against a private redis-server with the example's library loaded.

use std::process::{Command, Output};

use queuegen_runtime::functions::{self, Function};
use queuegen_tests::cli::stdout;
use queuegen_tests::support::keyspace;
use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
const READY: &str = "work:{ocr-03}:ready";
const DEAD: &str = "work:{ocr-03}:dead";

fn queuegen(server: &RedisServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .args(["--redis", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs")
}

fn dlq(server: &RedisServer, action: &str, extra: &[&str]) -> Output {
    let mut args = vec!["dlq", action, EXAMPLE, "--queue", "ocr"];
    args.extend_from_slice(extra);
    queuegen(server, &args)
}

/// Publishes `count` ocr jobs to partition 3 by hand, delivers them, and
/// dead-letters each through the library's `dead_letter` function.
fn dead_letters(server: &RedisServer, count: usize) -> Vec<String> {
    let mut conn = server.client().get_connection().unwrap();
    let mut dead_ids = Vec::new();
    for n in 0..count {
        let source: String = redis::cmd("XADD")
            .arg(READY)
            .arg("*")
            .arg(&[
                ("job_id", format!("job-{n}")),
                ("type", "OcrRequested".into()),
                ("tenant", "acme".into()),
                ("schema", "1".into()),
                ("created_at", "2026-12-02T11:51:41.123Z".into()),
                ("trace_id", "0123456789abcdef0123456789abcdef".into()),
                ("attempt", "1".into()),
                ("subject_ref", format!("scan-{n}.pdf")),
                ("priority", "high".into()),
            ])
            .query(&mut conn)
            .unwrap();
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg(&[
                "GROUP",
                "ocr-workers",
                "test",
                "COUNT",
                "1",
                "STREAMS",
                READY,
                ">",
            ])
            .query(&mut conn)
            .unwrap();
        let marker = format!("work:{{ocr-03}}:marker:dead:{source}");
        let library = queuegen::gen::functions::library_name("docs-pipeline");
        let call = functions::DeadLetterCall {
            ready_key: READY,
            dead_key: DEAD,
            marker_key: &marker,
            group: "ocr-workers",
            consumer: "test",
            source_id: &source,
            reason: "permanent",
            detail: "test: invalid scan",
            deliveries: 1,
            marker_ttl_ms: 600_000,
            dead_letter_max_len: 1000,
        };
        let (_, dead_id): (String, String) =
            functions::command(&Function::DeadLetter.in_library(&library), &call)
                .query(&mut conn)
                .unwrap();
        dead_ids.push(dead_id);
    }
    dead_ids
}

fn apply(server: &RedisServer) {
    let out = queuegen(server, &["apply", EXAMPLE]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn list_and_show_name_the_job_and_the_reason() {
    let server = RedisServer::start();
    apply(&server);
    let ids = dead_letters(&server, 3);

    let list = dlq(&server, "list", &[]);
    assert!(list.status.success(), "{list:?}");
    let text = stdout(&list);
    assert!(text.contains("PARTITION"), "{text}");
    assert!(
        text.contains("job-2") && text.contains("permanent"),
        "{text}"
    );
    assert!(text.contains("queue ocr: 3 dead letter(s) shown"), "{text}");

    let json = dlq(&server, "list", &["--json", "--limit", "2"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.len(), 2, "the limit holds");
    assert_eq!(rows[0]["id"], ids[2].as_str(), "newest first");
    assert_eq!(rows[0]["partition"], 3);

    let show = dlq(&server, "show", &["--id", &ids[0]]);
    assert!(show.status.success(), "{show:?}");
    let text = stdout(&show);
    assert!(
        text.contains("subject_ref") && text.contains("scan-0.pdf"),
        "{text}"
    );

    let missing = dlq(&server, "show", &["--id", "1-1", "--partition", "3"]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("no dead letter with ID 1-1 in partition 3"),
        "{stderr}"
    );
}

#[test]
fn replay_puts_the_job_back_once_and_dry_run_writes_nothing() {
    let server = RedisServer::start();
    apply(&server);
    let ids = dead_letters(&server, 4);
    let mut conn = server.client().get_connection().unwrap();
    let ready_before: usize = redis::cmd("XLEN").arg(READY).query(&mut conn).unwrap();

    let before = keyspace(&mut conn);
    let dry = dlq(&server, "replay", &["--all", "--dry-run"]);
    assert!(dry.status.success(), "{dry:?}");
    assert!(
        stdout(&dry).contains("4 dead letter(s) would be replayed"),
        "{}",
        stdout(&dry)
    );
    assert_eq!(keyspace(&mut conn), before, "--dry-run wrote nothing");

    let one = dlq(&server, "replay", &["--id", &ids[1], "--json"]);
    assert!(one.status.success(), "{one:?}");
    let replayed: Vec<serde_json::Value> = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(replayed[0]["job_id"], "job-1");
    assert_eq!(replayed[0]["already"], false);
    let ready_id = replayed[0]["ready_id"].as_str().unwrap().to_owned();
    let entry: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(READY)
        .arg(&ready_id)
        .arg(&ready_id)
        .query(&mut conn)
        .unwrap();
    let fields = &entry.ids[0].map;
    assert_eq!(
        fields["job_id"],
        redis::Value::BulkString(b"job-1".to_vec())
    );
    assert_eq!(fields["attempt"], redis::Value::BulkString(b"1".to_vec()));
    assert_eq!(
        fields["replay_of"],
        redis::Value::BulkString(ids[1].clone().into_bytes())
    );

    let all = dlq(&server, "replay", &["--all", "--json"]);
    assert!(all.status.success(), "{all:?}");
    let replayed: Vec<serde_json::Value> = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(replayed.len(), 4);
    let again: Vec<&serde_json::Value> = replayed.iter().filter(|r| r["already"] == true).collect();
    assert_eq!(
        again.len(),
        1,
        "the one replayed before is found by its marker"
    );
    assert_eq!(again[0]["ready_id"], ready_id.as_str());
    let ready_after: usize = redis::cmd("XLEN").arg(READY).query(&mut conn).unwrap();
    assert_eq!(
        ready_after,
        ready_before + 4,
        "each dead letter replayed exactly once"
    );
}

#[test]
fn replay_needs_an_id_or_all() {
    let server = RedisServer::start();
    let out = dlq(&server, "replay", &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--id ID, or --all"), "{stderr}");
}

/// A bare `<ms>` would be read by Redis as every entry of that millisecond:
/// `show` and `replay` refuse a dead letter ID that is not `<ms>-<seq>`,
/// naming it, before anything is read or written.
#[test]
fn an_id_that_is_not_a_whole_stream_id_is_refused_and_nothing_changes() {
    let server = RedisServer::start();
    apply(&server);
    let ids = dead_letters(&server, 1);
    let mut conn = server.connection();
    let before = keyspace(&mut conn);
    let bare = ids[0].split_once('-').unwrap().0.to_owned();
    for (action, id) in [
        ("show", bare.as_str()),
        ("replay", bare.as_str()),
        ("replay", "x-1"),
    ] {
        let out = dlq(&server, action, &["--id", id]);
        assert!(!out.status.success(), "{action} --id {id} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("dead letter ID {id:?} is not a stream ID")),
            "{stderr}"
        );
    }
    assert_eq!(keyspace(&mut conn), before);
}
