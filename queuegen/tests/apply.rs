//! `queuegen apply` against a private redis-server: groups created once, reported after, errors named.

use std::path::Path;
use std::process::{Command, Output};

use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
/// 8 + 4 + 2 + 1 partitions in the example.
const PARTITIONS: usize = 15;

fn apply(server: &RedisServer, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .arg("apply")
        .arg(Path::new(EXAMPLE))
        .args(["--redis", &server.url()])
        .args(extra)
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn creates_every_group_once_then_reports_them_as_existing() {
    let server = RedisServer::start();
    let first = apply(&server, &[]);
    assert!(first.status.success(), "{first:?}");
    let stdout = text(&first.stdout);
    assert!(
        stdout.contains(&format!("{PARTITIONS} group(s) created, 0 already existed")),
        "{stdout}"
    );
    assert!(stdout.contains("work:{ocr-07}:ready"), "{stdout}");

    let mut conn = server.client().get_connection().unwrap();
    let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg("work:{export-01}:ready")
        .query(&mut conn)
        .unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(
        groups[0]["name"],
        redis::Value::BulkString(b"export-workers".to_vec())
    );

    let second = apply(&server, &["--json"]);
    assert!(second.status.success(), "{second:?}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(rows.len(), PARTITIONS);
    assert!(rows.iter().all(|row| row["created"] == false), "{rows:?}");
}

#[test]
fn a_key_of_the_wrong_type_stops_the_run_naming_the_key() {
    let server = RedisServer::start();
    let mut conn = server.client().get_connection().unwrap();
    redis::cmd("SET")
        .arg("work:{ocr-02}:ready")
        .arg("not a stream")
        .exec(&mut conn)
        .unwrap();
    let out = apply(&server, &["--queue", "ocr"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("work:{ocr-02}:ready"), "{stderr}");
    assert!(stderr.contains("WRONGTYPE"), "{stderr}");
}

#[test]
fn an_unknown_queue_is_refused_before_touching_redis() {
    let server = RedisServer::start();
    let out = apply(&server, &["--queue", "orc"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no queue named \"orc\""), "{stderr}");
    let mut conn = server.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "nothing was created: {keys:?}");
}
