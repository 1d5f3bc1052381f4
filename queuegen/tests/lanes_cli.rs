//! The operator commands on a queue with priority lanes (the tests spec's `laned`), against a private redis-server: `apply` creates every lane's streams, `status` and `dlq` show a row per lane, `dlq --lane` selects one and refuses a lane the queue lacks, and `trim` works every lane.

use std::process::{Command, Output};

use queuegen_tests::cli::stdout;
use queuegen_tests::RedisServer;
use serde_json::Value;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/queues.yaml");

fn on(server: &RedisServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .args(["--redis", server.url().as_str()])
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs")
}

fn xadd(conn: &mut redis::Connection, key: &str, job_id: &str) -> String {
    redis::cmd("XADD")
        .arg(key)
        .arg("*")
        .arg(&[
            "job_id",
            job_id,
            "reason",
            "failed",
            "detail",
            "refused by the test",
        ])
        .query(conn)
        .unwrap()
}

#[test]
fn apply_status_dlq_and_trim_work_every_lane() {
    let server = RedisServer::start();
    let out = on(&server, &["apply", SPEC]);
    assert!(out.status.success(), "{out:?}");
    let mut conn = server.client().get_connection().unwrap();
    // Every lane's stream of each partition exists with the group.
    for key in [
        "qgtest:{laned-00}:ready",
        "qgtest:lane-high:{laned-00}:ready",
        "qgtest:lane-low:{laned-01}:ready",
    ] {
        let groups: Vec<redis::Value> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(key)
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("{key}: {err}"));
        assert_eq!(groups.len(), 1, "{key} has the laned-workers group");
    }

    for n in 0..3 {
        xadd(
            &mut conn,
            "qgtest:lane-high:{laned-00}:ready",
            &format!("h{n}"),
        );
    }
    xadd(&mut conn, "qgtest:{laned-01}:ready", "n0");
    let dead = xadd(&mut conn, "qgtest:lane-low:{laned-01}:dead", "l0");

    let out = on(&server, &["status", SPEC, "--queue", "laned", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["queues"][0]["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "2 partitions x 3 lanes");
    let row = |lane: &str, partition: u64| {
        rows.iter()
            .find(|r| r["lane"] == lane && r["partition"] == partition)
            .unwrap_or_else(|| panic!("a row for {lane}/{partition}: {rows:?}"))
    };
    assert_eq!(row("high", 0)["groups"][0]["undelivered"], 3);
    assert_eq!(
        row("high", 0)["ready_key"],
        "qgtest:lane-high:{laned-00}:ready"
    );
    assert_eq!(row("normal", 1)["groups"][0]["undelivered"], 1);
    assert_eq!(row("low", 1)["dead_letters"]["count"], 1);
    assert_eq!(row("low", 0)["history"], 0);

    let out = on(&server, &["status", SPEC, "--queue", "laned"]);
    let table = stdout(&out);
    assert!(table.contains("2 partition(s) × 3 lanes"), "{table}");
    assert!(
        table
            .lines()
            .any(|line| line.trim_start().starts_with("high/0")),
        "{table}"
    );

    let out = on(
        &server,
        &[
            "dlq", "list", SPEC, "--queue", "laned", "--lane", "low", "--json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let letters: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(letters.as_array().unwrap().len(), 1, "{letters}");
    assert_eq!(letters[0]["lane"], "low");
    assert_eq!(letters[0]["partition"], 1);
    assert_eq!(letters[0]["id"], dead.as_str());
    let out = on(
        &server,
        &[
            "dlq", "list", SPEC, "--queue", "laned", "--lane", "high", "--json",
        ],
    );
    let none: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(none.as_array().unwrap().len(), 0, "{none}");

    let out = on(
        &server,
        &["dlq", "list", SPEC, "--queue", "laned", "--lane", "urgent"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("queue laned has lanes high, normal, low; there is no lane \"urgent\""),
        "{err}"
    );

    let out = on(
        &server,
        &["trim", SPEC, "--queue", "laned", "--dry-run", "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = plan.to_string();
    for key in [
        "qgtest:{laned-00}:ready",
        "qgtest:lane-high:{laned-00}:ready",
        "qgtest:lane-low:{laned-01}:dead",
    ] {
        assert!(text.contains(key), "the trim plan covers {key}: {text}");
    }
}
