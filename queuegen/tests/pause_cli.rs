//! `queuegen pause` and `queuegen resume` against a private redis-server holding the example's queues: the flags they write, their human and JSON output, `status` showing the paused partitions, and bad inputs that change nothing.

use std::process::{Command, Output};

use queuegen_tests::cli::stdout;
use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);

fn queuegen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .env_remove("REDIS_URL")
        .env("USER", "ana")
        .output()
        .expect("queuegen runs")
}

fn on(server: &RedisServer, args: &[&str]) -> Output {
    let url = server.url();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--redis", url.as_str()]);
    queuegen(&all)
}

/// `queuegen {command} EXAMPLE --queue ocr` with `extra` against `server`.
fn on_ocr(server: &RedisServer, command: &str, extra: &[&str]) -> Output {
    let mut args = vec![command, EXAMPLE, "--queue", "ocr"];
    args.extend_from_slice(extra);
    on(server, &args)
}

fn paused_keys(conn: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*:paused").query(conn).unwrap();
    keys.sort();
    keys
}

#[test]
fn pause_sets_the_flags_status_shows_them_and_resume_clears_them() {
    let server = RedisServer::start();
    let out = on(&server, &["apply", EXAMPLE]);
    assert!(out.status.success(), "{out:?}");
    let mut conn = server.client().get_connection().unwrap();

    let out = on_ocr(
        &server,
        "pause",
        &[
            "--partition",
            "3",
            "--partition",
            "5",
            "--reason",
            "vendor outage",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("queue ocr partition 3: paused (was running)"),
        "{text}"
    );
    assert!(text.contains("partitions 3, 5"), "{text}");
    assert_eq!(
        paused_keys(&mut conn),
        ["work:{ocr-03}:paused", "work:{ocr-05}:paused"]
    );
    let value: String = redis::cmd("GET")
        .arg("work:{ocr-03}:paused")
        .query(&mut conn)
        .unwrap();
    assert!(value.starts_with("at_ms="), "{value}");
    assert!(value.contains(";by=ana@"), "{value}");
    assert!(value.ends_with(";reason=vendor outage"), "{value}");

    // status: the model (--json) and the table both name them.
    let out = on_ocr(&server, "status", &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let queue = &report["queues"][0];
    assert_eq!(queue["paused_partitions"], serde_json::json!([3, 5]));
    assert_eq!(queue["partitions"][3]["paused"]["reason"], "vendor outage");
    assert!(queue["partitions"][3]["paused"]["by"]
        .as_str()
        .unwrap()
        .starts_with("ana@"));
    assert!(queue["partitions"][3]["paused"]["at_ms"].as_u64().unwrap() > 0);
    assert!(queue["partitions"][4]["paused"].is_null());
    let out = on_ocr(&server, "status", &[]);
    let text = stdout(&out);
    assert!(
        text.contains("PAUSED partition 3 by ana@") && text.contains(": vendor outage"),
        "{text}"
    );
    assert!(text.contains("PAUSED partition 5"), "{text}");
    assert!(!text.contains("PAUSED partition 4"), "{text}");

    // Pausing again names the earlier note; JSON says what was there.
    let out = on_ocr(
        &server,
        "pause",
        &["--partition", "3", "--by", "oncall", "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["action"], "pause");
    assert_eq!(report["note"]["by"], "oncall");
    assert_eq!(report["partitions"][0]["partition"], 3);
    assert_eq!(report["partitions"][0]["before"]["reason"], "vendor outage");

    // Resume all: says which were paused, deletes every flag.
    let out = on_ocr(&server, "resume", &[]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("queue ocr partition 3: resumed (had been paused by oncall at"),
        "{text}"
    );
    assert!(
        text.contains("queue ocr partition 4: was not paused; nothing changed"),
        "{text}"
    );
    assert!(paused_keys(&mut conn).is_empty());
    let out = on_ocr(&server, "resume", &["--partition", "5", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(report["partitions"][0]["before"].is_null(), "{report}");
    let out = on_ocr(&server, "status", &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["queues"][0]["paused_partitions"],
        serde_json::json!([])
    );
}

#[test]
fn a_partition_or_queue_that_does_not_exist_is_refused_and_nothing_is_written() {
    let server = RedisServer::start();
    let mut conn = server.client().get_connection().unwrap();
    let out = on_ocr(&server, "pause", &["--partition", "999"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("queue ocr has no partition 999"), "{err}");
    let out = on(&server, &["pause", EXAMPLE, "--queue", "orc"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no queue named \"orc\""),
        "{out:?}"
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}
