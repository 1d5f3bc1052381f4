//! `queuegen trim` against a private redis-server holding the example's queues:
//! the dry run's plan, `--json`, a real trim, and bad inputs that change nothing.

use std::process::{Command, Output};

use queuegen_tests::cli::{stderr, stdout};
use queuegen_tests::support::keyspace;
use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
const READY: &str = "work:{ocr-03}:ready";
const DEAD: &str = "work:{ocr-03}:dead";
const DAY_MS: u64 = 86_400_000;

fn queuegen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs")
}

fn trim(server: &RedisServer, extra: &[&str]) -> Output {
    let url = server.url();
    let mut args = vec!["trim", EXAMPLE, "--redis", url.as_str()];
    args.extend_from_slice(extra);
    queuegen(&args)
}

fn xlen(conn: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("XLEN").arg(key).query(conn).unwrap()
}

fn apply(server: &RedisServer) {
    let url = server.url();
    let out = queuegen(&["apply", EXAMPLE, "--redis", &url]);
    assert!(out.status.success(), "{out:?}");
}

/// The state the tests trim, on ocr partition 3 (ready entries are kept 3
/// days, dead letters 14): 20 jobs published 5 days ago, of which the group
/// read 15 and acknowledged #1, #2, #3 and #5, so #4 is the oldest pending;
/// 2 dead letters 15 days old and 1 a day old. Returns the ID of job #4.
fn seed(server: &RedisServer) -> String {
    let mut conn = server.client().get_connection().unwrap();
    let (secs, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let now = secs * 1000;
    let id = |n: u64| format!("{}-0", now - 5 * DAY_MS + n);
    for n in 1..=20 {
        redis::cmd("XADD")
            .arg(READY)
            .arg(id(n))
            .arg("job_id")
            .arg(format!("job-{n}"))
            .exec(&mut conn)
            .unwrap();
    }
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP",
            "ocr-workers",
            "w1",
            "COUNT",
            "15",
            "STREAMS",
            READY,
            ">",
        ])
        .query(&mut conn)
        .unwrap();
    let acked: u64 = redis::cmd("XACK")
        .arg(READY)
        .arg("ocr-workers")
        .arg(&[id(1), id(2), id(3), id(5)])
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 4);
    for at in [now - 15 * DAY_MS, now - 15 * DAY_MS + 1, now - DAY_MS] {
        redis::cmd("XADD")
            .arg(DEAD)
            .arg(format!("{at}-0"))
            .arg("job_id")
            .arg("dead")
            .exec(&mut conn)
            .unwrap();
    }
    id(4)
}

/// A server holding the example's queues (`apply`) and the [`seed`]ed
/// entries; the ID of the entry left pending.
fn seeded_server() -> (RedisServer, String) {
    let server = RedisServer::start();
    apply(&server);
    let pending = seed(&server);
    (server, pending)
}

/// The stderr of a trim refused before it started (exit code 2).
fn refused(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    stderr(out)
}

#[test]
fn a_dry_run_prints_the_plan_and_changes_nothing() {
    let (server, pending) = seeded_server();
    let mut conn = server.client().get_connection().unwrap();
    let before = keyspace(&mut conn);

    let out = trim(&server, &["--queue", "ocr", "--dry-run"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let ready_line = text
        .lines()
        .find(|line| line.starts_with(READY))
        .unwrap_or_else(|| panic!("no row for {READY}:\n{text}"));
    assert!(ready_line.contains(&pending), "{ready_line}");
    assert!(
        ready_line.contains("group ocr-workers pending"),
        "{ready_line}"
    );
    assert!(ready_line.contains("would trim"), "{ready_line}");
    let cells: Vec<&str> = ready_line.split_whitespace().collect();
    assert!(cells.contains(&"3"), "3 entries would go: {ready_line}");
    let dead_line = text.lines().find(|line| line.starts_with(DEAD)).unwrap();
    assert!(
        dead_line.contains("policy (dead_letter.retention 14d)"),
        "{dead_line}"
    );
    assert!(
        dead_line.split_whitespace().any(|c| c == "2"),
        "{dead_line}"
    );
    assert!(text.contains("WOULD GO"), "{text}");
    assert!(
        text.contains("dry run: 5 entries") && text.contains("nothing was changed"),
        "{text}"
    );
    // Every ocr partition's streams are listed: 8 partitions, 2 streams each.
    assert!(text.contains("from 2 of 16 streams"), "{text}");
    assert_eq!(keyspace(&mut conn), before, "--dry-run wrote nothing");
}

#[test]
fn json_has_the_plan_of_every_stream_and_the_totals() {
    let (server, pending) = seeded_server();

    let out = trim(
        &server,
        &["--queue", "ocr", "--partition", "3", "--dry-run", "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["xtrim_acked"], serde_json::Value::Null);
    assert_eq!(report["server"], format!("127.0.0.1:{}", server.port()));
    let streams = report["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{report:#}");

    let ready = &streams[0];
    assert_eq!(ready["key"], READY);
    assert_eq!(ready["queue"], "ocr");
    assert_eq!(ready["partition"], 3);
    assert_eq!(ready["stream"], "ready");
    assert_eq!(ready["exists"], true);
    assert_eq!(ready["length"], 20);
    assert_eq!(ready["retention_setting"], "retention.min_age");
    assert_eq!(ready["retention_ms"], 3 * DAY_MS);
    assert_eq!(ready["minid"], pending.as_str());
    assert_eq!(
        ready["decided_by"],
        serde_json::json!({"kind": "pending", "group": "ocr-workers", "id": pending})
    );
    assert_eq!(ready["entries"], 3);
    assert_eq!(ready["entries_exact"], true);
    assert!(ready["bytes"].is_u64(), "{ready:#}");
    assert_eq!(ready["result"], "would_trim");
    assert_eq!(ready["groups"][0]["name"], "ocr-workers");
    assert_eq!(ready["groups"][0]["lowest_pending"], pending.as_str());

    let dead = &streams[1];
    assert_eq!(dead["key"], DEAD);
    assert_eq!(dead["retention_setting"], "dead_letter.retention");
    assert_eq!(dead["decided_by"]["kind"], "policy");
    assert_eq!(dead["decided_by"]["group"], serde_json::Value::Null);
    assert_eq!(dead["minid"], dead["policy_cutoff"]);
    assert_eq!(dead["entries"], 2);
    assert_eq!(dead["groups"], serde_json::json!([]));

    assert_eq!(report["totals"]["entries"], 5);
    assert_eq!(report["totals"]["entries_exact"], true);
    assert_eq!(report["totals"]["failed"], 0);
}

#[test]
fn a_real_trim_removes_what_the_plan_said_and_leaves_no_lease() {
    let (server, _) = seeded_server();
    let mut conn = server.client().get_connection().unwrap();

    let out = trim(&server, &["--queue", "ocr", "--partition", "3", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dry_run"], false);
    // `XTRIM ... ACKED` where the server has it (Redis 8.2+), asked of the server.
    let has_acked = server.accepts(&["XTRIM", "queuegen-test:probe", "MINID", "0", "ACKED"]);
    assert_eq!(report["xtrim_acked"], has_acked, "{report}");
    assert_eq!(report["streams"][0]["result"], "trimmed");
    assert_eq!(report["streams"][0]["entries"], 3);
    assert_eq!(report["streams"][1]["result"], "trimmed");
    assert_eq!(report["streams"][1]["entries"], 2);
    assert_eq!(xlen(&mut conn, READY), 17);
    assert_eq!(xlen(&mut conn, DEAD), 1);
    let leases: Vec<String> = redis::cmd("KEYS").arg("*lease*").query(&mut conn).unwrap();
    assert!(leases.is_empty(), "{leases:?}");

    // Again: nothing is left to trim.
    let again = trim(&server, &["--queue", "ocr", "--partition", "3"]);
    assert!(again.status.success(), "{again:?}");
    let text = stdout(&again);
    assert!(text.contains("REMOVED"), "{text}");
    assert!(
        text.contains("trimmed 0 entries from 0 of 2 streams"),
        "{text}"
    );
}

#[test]
fn a_wrong_url_is_named_and_nothing_runs() {
    let out = queuegen(&[
        "trim",
        EXAMPLE,
        "--redis",
        "redis://127.0.0.1:1/",
        "--dry-run",
    ]);
    let err = refused(&out);
    assert!(err.contains("connecting to Redis at 127.0.0.1:1"), "{err}");

    let out = queuegen(&["trim", EXAMPLE, "--redis", "http://nowhere"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("is not a Redis URL"), "{out:?}");
}

#[test]
fn a_missing_stream_says_to_run_apply_and_creates_nothing() {
    let server = RedisServer::start();
    let out = trim(&server, &["--queue", "ocr"]);
    let err = refused(&out);
    assert!(
        err.contains("stream work:{ocr-00}:ready does not exist")
            && err.contains("run `queuegen apply`"),
        "{err}"
    );
    assert!(
        err.contains("queue ocr partition 7"),
        "every partition is named: {err}"
    );
    let mut conn = server.client().get_connection().unwrap();
    assert!(keyspace(&mut conn).is_empty(), "nothing was created");
}

#[test]
fn a_key_of_the_wrong_type_is_named_and_nothing_is_trimmed() {
    let (server, _) = seeded_server();
    let mut conn = server.client().get_connection().unwrap();
    let squatted = "work:{ocr-02}:ready";
    redis::cmd("DEL").arg(squatted).exec(&mut conn).unwrap();
    redis::cmd("SET")
        .arg(squatted)
        .arg("not a stream")
        .exec(&mut conn)
        .unwrap();
    let before = keyspace(&mut conn);

    let out = trim(&server, &["--queue", "ocr"]);
    let err = refused(&out);
    assert!(
        err.contains(&format!("key {squatted}")) && err.contains("is a string, not a stream"),
        "{err}"
    );
    assert!(err.contains("nothing was trimmed"), "{err}");
    assert_eq!(keyspace(&mut conn), before, "nothing changed");
    assert_eq!(xlen(&mut conn, READY), 20);
}

#[test]
fn a_spec_that_fails_check_is_reported_and_nothing_runs() {
    let (server, _) = seeded_server();
    let mut conn = server.client().get_connection().unwrap();
    let before = keyspace(&mut conn);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("queues.yaml");
    let text =
        std::fs::read_to_string(EXAMPLE)
            .unwrap()
            .replacen("partitions: 8", "partitions: 0", 1);
    std::fs::write(&broken, text).unwrap();

    let url = server.url();
    let out = queuegen(&[
        "trim",
        broken.to_str().unwrap(),
        "--redis",
        &url,
        "--queue",
        "ocr",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains("partitions"), "{err}");
    assert!(
        err.contains(&format!("{}: not trimming", broken.display())),
        "{err}"
    );
    assert_eq!(keyspace(&mut conn), before, "nothing changed");
}

#[test]
fn a_missing_library_or_partition_is_refused_before_trimming() {
    let (server, _) = seeded_server();
    let mut conn = server.client().get_connection().unwrap();
    let library = queuegen::gen::functions::library_name("docs-pipeline");
    redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(&library)
        .exec(&mut conn)
        .unwrap();
    let before = keyspace(&mut conn);

    let out = trim(&server, &["--queue", "ocr"]);
    let err = refused(&out);
    assert!(
        err.contains(&library) && err.contains("run `queuegen apply`"),
        "{err}"
    );
    assert_eq!(keyspace(&mut conn), before, "nothing changed");

    let out = trim(&server, &["--queue", "ocr", "--partition", "8"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("queue ocr has no partition 8: its partitions are 0 to 7"),
        "{out:?}"
    );
}
