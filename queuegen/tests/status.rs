//! `queuegen status` against a private redis-server: every number of
//! `--json` equals a state built on purpose (pending with a known owner and
//! idle, lag and nil lag after an XDEL, undelivered entries, retries and
//! their due time, dead letters, the Function library loaded or missing,
//! the alerts that fire), the table says the same, `--watch` redraws, and
//! bad input exits non-zero naming what and where without writing anything.

mod ops_state;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use ops_state::*;
use queuegen_tests::RedisServer;
use serde_json::Value;

/// The IDs and times the built state was made of.
struct Built {
    /// Partition 0: two old entries delivered (the first claimed by bob),
    /// three new ones undelivered.
    p0: Vec<String>,
    /// Partition 1: the first entry delivered and acknowledged, then the
    /// last one deleted after the group's position: Redis's lag is nil.
    p1: Vec<String>,
    /// Partition 2: retry due times.
    due_soon_ms: u64,
    /// Partition 3: dead-letter IDs.
    dead_ids: Vec<String>,
}

const BOB_IDLE_MS: u64 = 90_000;

fn build(server: &RedisServer) -> Built {
    apply(server);
    let mut conn = server.client().get_connection().unwrap();
    let now = server_now_ms(&mut conn);

    // Partition 0: 20 and 19 minutes old, delivered to alice; the oldest
    // moved to bob with 90 s idle and 3 deliveries. The oldest pending entry
    // (20 min) is above alerts.oldest_pending_age (10m); the first
    // undelivered one is new, below oldest_ready_age (5m).
    let mut p0 = vec![
        add(
            &mut conn,
            &ready(0),
            &format!("{}-0", now - 20 * MINUTE),
            "p0-a",
        ),
        add(
            &mut conn,
            &ready(0),
            &format!("{}-0", now - 19 * MINUTE),
            "p0-b",
        ),
    ];
    for job in ["p0-c", "p0-d", "p0-e"] {
        p0.push(add(&mut conn, &ready(0), "*", job));
    }
    read(&mut conn, &ready(0), "alice", 2);
    claim(&mut conn, &ready(0), &p0[0], "bob", BOB_IDLE_MS, 3);

    // Partition 1: 15 and 14 minutes old, then two new; the first is
    // delivered and acknowledged, the last deleted: the undelivered entry
    // of 14 minutes is above oldest_ready_age, and Redis cannot count the lag.
    let mut p1 = vec![
        add(
            &mut conn,
            &ready(1),
            &format!("{}-0", now - 15 * MINUTE),
            "p1-a",
        ),
        add(
            &mut conn,
            &ready(1),
            &format!("{}-0", now - 14 * MINUTE),
            "p1-b",
        ),
    ];
    for job in ["p1-c", "p1-d"] {
        p1.push(add(&mut conn, &ready(1), "*", job));
    }
    read(&mut conn, &ready(1), "carol", 1);
    let acked: u64 = redis::cmd("XACK")
        .arg(ready(1))
        .arg(GROUP)
        .arg(&p1[0])
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1);
    let deleted: u64 = redis::cmd("XDEL")
        .arg(ready(1))
        .arg(&p1[3])
        .query(&mut conn)
        .unwrap();
    assert_eq!(deleted, 1);

    // Partition 2: two retries, one overdue by 5 s, one due in a year.
    let due_soon_ms = now - 5_000;
    let _: () = redis::cmd("ZADD")
        .arg(retry(2))
        .arg(due_soon_ms)
        .arg("retry-soon")
        .arg(now + 365 * 24 * 60 * MINUTE)
        .arg("retry-later")
        .query(&mut conn)
        .unwrap();

    // Partition 3: two dead letters, 3 and 2 hours old (dead_letters ≥ 1 fires).
    let dead_ids = vec![
        add(
            &mut conn,
            &dead(3),
            &format!("{}-0", now - 180 * MINUTE),
            "d-1",
        ),
        add(
            &mut conn,
            &dead(3),
            &format!("{}-0", now - 120 * MINUTE),
            "d-2",
        ),
    ];
    Built {
        p0,
        p1,
        due_soon_ms,
        dead_ids,
    }
}

fn status_json(server: &RedisServer) -> Value {
    let out = queuegen(server, &["status", EXAMPLE, "--queue", "ocr", "--json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{err}: {}", stdout(&out)))
}

fn u(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not a u64"))
}

#[test]
fn status_json_reports_exactly_the_state_built() {
    let server = RedisServer::start();
    let built = build(&server);
    let mut conn = server.client().get_connection().unwrap();
    let before = keyspace(&mut conn);

    let json = status_json(&server);
    let now = u(&json["server_time_ms"]);
    let age = |id: &str| now - ms_of(id);
    assert_eq!(
        json["libraries"],
        serde_json::json!([{ "name": LIBRARY, "loaded": true, "problem": null, "server": null }])
    );
    let queue = &json["queues"][0];
    assert_eq!(queue["queue"], "ocr");
    assert_eq!(queue["group"], GROUP);
    let partitions = queue["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 8);

    // Partition 0: history 5, 3 undelivered, 2 pending, the oldest held by bob.
    let p0 = &partitions[0];
    assert_eq!(p0["ready_key"], ready(0));
    assert_eq!(p0["history"], 5, "XLEN counts every stored entry");
    let group = &p0["groups"][0];
    assert_eq!(p0["groups"].as_array().unwrap().len(), 1);
    assert_eq!(group["name"], GROUP);
    assert_eq!(group["queue_group"], true);
    assert_eq!(group["lag"], 3);
    assert_eq!(group["undelivered"], 3);
    assert_eq!(group["lag_unavailable"], Value::Null);
    assert_eq!(group["last_delivered"], built.p0[1].as_str());
    assert_eq!(group["oldest_undelivered"]["id"], built.p0[2].as_str());
    assert_eq!(u(&group["oldest_undelivered"]["age_ms"]), age(&built.p0[2]));
    assert_eq!(group["pending"], 2);
    let head = &group["oldest_pending"];
    assert_eq!(head["id"], built.p0[0].as_str());
    assert_eq!(head["owner"], "bob");
    assert_eq!(head["deliveries"], 3);
    assert_eq!(u(&head["age_ms"]), age(&built.p0[0]));
    let idle = u(&head["idle_ms"]);
    assert!(
        (BOB_IDLE_MS..BOB_IDLE_MS + MINUTE).contains(&idle),
        "idle {idle} ms: XCLAIM set 90 s a moment ago"
    );
    let consumers: Vec<(String, u64)> = p0["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_owned(), u(&c["pending"])))
        .collect();
    assert_eq!(consumers, [("alice".into(), 1), ("bob".into(), 1)]);
    let bob_idle = u(&p0["consumers"][1]["idle_ms"]);
    assert!(
        bob_idle < BOB_IDLE_MS,
        "a consumer's idle is since its own last attempt"
    );

    // Partition 1: the lag is nil after the XDEL, and says why.
    let p1 = &partitions[1];
    assert_eq!(p1["history"], 3);
    let group = &p1["groups"][0];
    assert_eq!(group["lag"], Value::Null);
    assert_eq!(
        group["undelivered"],
        Value::Null,
        "at least one, uncountable"
    );
    let why = group["lag_unavailable"].as_str().unwrap();
    assert!(why.contains("XDEL") && why.contains(&built.p1[0]), "{why}");
    assert_eq!(group["entries_read"], 1);
    assert_eq!(group["pending"], 0);
    assert_eq!(group["oldest_pending"], Value::Null);
    assert_eq!(group["oldest_undelivered"]["id"], built.p1[1].as_str());
    assert_eq!(u(&group["oldest_undelivered"]["age_ms"]), age(&built.p1[1]));
    assert_eq!(p1["consumers"][0]["name"], "carol");
    assert_eq!(p1["consumers"][0]["pending"], 0);

    // Partition 2: two retries, the next one overdue.
    let retries = &partitions[2]["retries"];
    assert_eq!(retries["key"], retry(2));
    assert_eq!(retries["scheduled"], 2);
    assert_eq!(u(&retries["next_due_ms"]), built.due_soon_ms);
    assert_eq!(
        retries["next_due_in_ms"].as_i64().unwrap(),
        built.due_soon_ms as i64 - now as i64
    );

    // Partition 3: two dead letters, the newest 2 hours old.
    let dead_letters = &partitions[3]["dead_letters"];
    assert_eq!(dead_letters["key"], dead(3));
    assert_eq!(dead_letters["count"], 2);
    assert_eq!(dead_letters["newest"]["id"], built.dead_ids[1].as_str());
    assert_eq!(
        u(&dead_letters["newest"]["age_ms"]),
        age(&built.dead_ids[1])
    );

    // Partitions 4..8 are empty and applied.
    for empty in &partitions[4..] {
        assert_eq!(empty["history"], 0);
        let group = &empty["groups"][0];
        assert_eq!(
            (&group["lag"], &group["undelivered"]),
            (&0.into(), &0.into())
        );
        assert_eq!(group["pending"], 0);
        assert_eq!(empty["retries"]["scheduled"], 0);
        assert_eq!(empty["retries"]["next_due_ms"], Value::Null);
        assert_eq!(empty["dead_letters"]["count"], 0);
        assert_eq!(empty["consumers"], serde_json::json!([]));
    }

    // Exactly the alerts the state was built to fire.
    let alerts: Vec<(String, u64, Value, u64, u64)> = queue["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["alert"].as_str().unwrap().to_owned(),
                u(&a["partition"]),
                a["group"].clone(),
                u(&a["observed"]),
                u(&a["threshold"]),
            )
        })
        .collect();
    assert_eq!(
        alerts,
        [
            (
                "oldest_pending_age".into(),
                0,
                GROUP.into(),
                age(&built.p0[0]),
                10 * MINUTE
            ),
            (
                "oldest_ready_age".into(),
                1,
                GROUP.into(),
                age(&built.p1[1]),
                5 * MINUTE
            ),
            ("dead_letters".into(), 3, Value::Null, 2, 1),
        ]
    );

    assert_eq!(keyspace(&mut conn), before, "status wrote nothing");
}

#[test]
fn the_table_says_the_same_and_a_missing_library_shows() {
    let server = RedisServer::start();
    let built = build(&server);
    let mut conn = server.client().get_connection().unwrap();

    let out = queuegen(&server, &["status", EXAMPLE, "--queue", "ocr"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    assert!(
        text.contains(&format!("function library {LIBRARY}: loaded")),
        "{text}"
    );
    let row = |partition: &str| -> Vec<String> {
        text.lines()
            .find(|line| {
                let mut cells = line.split_whitespace();
                cells.next() == Some(partition) && cells.next() == Some(GROUP)
            })
            .unwrap_or_else(|| panic!("no row for partition {partition}:\n{text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // PART GROUP UNDELIVERED LAG OLDEST-READY PENDING OLDEST-PENDING OWNER IDLE DELIVERIES
    let p0 = row("0");
    assert_eq!(
        (&p0[2], &p0[3], &p0[5]),
        (&"3".into(), &"3".into(), &"2".into())
    );
    assert_eq!((&p0[7], &p0[9]), (&"bob".into(), &"3".into()));
    let p1 = row("1");
    assert_eq!(
        (&p1[2], &p1[3], &p1[4]),
        (&"≥1".into(), &"n/a".into(), &"[1]".into())
    );
    assert!(
        text.contains(
            "[1] partition 1 group ocr-workers: lag n/a: an entry after the group's position"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "alerts (oldest_pending_age > 10m, oldest_ready_age > 5m, dead_letters ≥ 1): 3 firing"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "FIRING oldest_pending_age queue ocr partition 0 group {GROUP}: entry {} held by bob",
            built.p0[0]
        )),
        "{text}"
    );
    assert!(text.contains("HISTORY counts stored entries"), "{text}");

    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(LIBRARY)
        .query(&mut conn)
        .unwrap();
    let json = status_json(&server);
    assert_eq!(json["libraries"][0]["loaded"], false);
    let problem = json["libraries"][0]["problem"].as_str().unwrap();
    assert!(
        problem.contains(&format!("no function {LIBRARY}_version"))
            && problem.contains("queuegen apply"),
        "{problem}"
    );
    let out = queuegen(&server, &["status", EXAMPLE, "--queue", "ocr"]);
    assert!(
        stdout(&out).contains(&format!("function library {LIBRARY}: MISSING: no function")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn watch_redraws_until_interrupted() {
    let server = RedisServer::start();
    apply(&server);
    let mut child = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args([
            "status", EXAMPLE, "--queue", "export", "--json", "--watch", "1",
        ])
        .args(["--redis", &server.url()])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut history = || -> Value {
        let line = lines.next().expect("a refresh").unwrap();
        let json: Value = serde_json::from_str(&line).unwrap();
        json["queues"][0]["partitions"][1]["history"].clone()
    };
    assert_eq!(history(), 0);
    let mut conn = server.client().get_connection().unwrap();
    let _: String = redis::cmd("XADD")
        .arg("work:{export-01}:ready")
        .arg("*")
        .arg("job_id")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    // A later redraw sees the new entry (the next one, unless it was already
    // on its way when the entry was added).
    let redraws: Vec<Value> = (0..2).map(|_| history()).collect();
    assert!(redraws.contains(&1.into()), "{redraws:?}");
    // Ctrl-C (SIGINT) ends the watch, successfully.
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bad_input_exits_non_zero_naming_what_and_where_and_writes_nothing() {
    // A server nobody listens on.
    for command in [
        vec!["status", EXAMPLE],
        vec!["pending", EXAMPLE, "--queue", "ocr"],
        vec!["monitor", EXAMPLE, "--listen", "127.0.0.1:0"],
    ] {
        let out = queuegen_at("redis://127.0.0.1:1/", &command);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {out:?}");
        assert!(
            stderr(&out).contains("connecting to redis://127.0.0.1:1/"),
            "{command:?}: {}",
            stderr(&out)
        );
    }

    let server = RedisServer::start();
    let mut conn = server.client().get_connection().unwrap();
    // Runs status, pending and monitor; each must fail naming `needles(command)`.
    let expect_error = |conn: &mut redis::Connection, needles: &dyn Fn(&str) -> Vec<String>| {
        for command in [
            vec!["status", EXAMPLE],
            vec!["pending", EXAMPLE, "--queue", "ocr"],
            vec!["monitor", EXAMPLE, "--listen", "127.0.0.1:0"],
        ] {
            let before = keyspace(conn);
            let out = queuegen(&server, &command);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {out:?}");
            let text = stderr(&out);
            for needle in needles(command[0]) {
                assert!(
                    text.contains(&needle),
                    "{command:?}: {needle:?} not in {text}"
                );
            }
            assert!(stdout(&out).is_empty(), "{command:?}: {}", stdout(&out));
            assert_eq!(keyspace(conn), before, "{command:?} wrote nothing");
        }
    };

    // Never applied: the first partition's stream is missing.
    expect_error(&mut conn, &|_| {
        vec!["stream work:{ocr-00}:ready does not exist: run `queuegen apply` to create it".into()]
    });

    // A ready stream that is a string.
    apply(&server);
    let _: () = redis::cmd("DEL").arg(ready(3)).query(&mut conn).unwrap();
    let _: () = redis::cmd("SET")
        .arg(ready(3))
        .arg("not a stream")
        .query(&mut conn)
        .unwrap();
    expect_error(&mut conn, &|command| {
        let read = if command == "pending" {
            "XPENDING"
        } else {
            "XINFO GROUPS"
        };
        vec![format!("{read} work:{{ocr-03}}:ready"), "WRONGTYPE".into()]
    });

    // The stream without the queue's group.
    let _: () = redis::cmd("DEL").arg(ready(3)).query(&mut conn).unwrap();
    apply(&server);
    let _: () = redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg(ready(2))
        .arg(GROUP)
        .query(&mut conn)
        .unwrap();
    expect_error(&mut conn, &|_| {
        vec![
            "stream work:{ocr-02}:ready has no consumer group \"ocr-workers\": run `queuegen apply`"
                .into(),
        ]
    });
    apply(&server);

    // A retry schedule that is a string: status and monitor read it.
    let _: () = redis::cmd("SET")
        .arg(retry(5))
        .arg("not a zset")
        .query(&mut conn)
        .unwrap();
    for command in [
        vec!["status", EXAMPLE],
        vec!["monitor", EXAMPLE, "--listen", "127.0.0.1:0"],
    ] {
        let out = queuegen(&server, &command);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {out:?}");
        let text = stderr(&out);
        assert!(
            text.contains("ZCARD work:{ocr-05}:retry") && text.contains("WRONGTYPE"),
            "{command:?}: {text}"
        );
    }
    let _: () = redis::cmd("DEL").arg(retry(5)).query(&mut conn).unwrap();

    // A spec that fails `check`: nothing is read or written.
    let before = keyspace(&mut conn);
    for (command, doing) in [
        (vec!["status", BROKEN], "not reading the status"),
        (
            vec!["pending", BROKEN, "--queue", "invoice"],
            "not reading pending entries",
        ),
        (
            vec!["monitor", BROKEN, "--listen", "127.0.0.1:0"],
            "not monitoring",
        ),
    ] {
        let out = queuegen(&server, &command);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {out:?}");
        let text = stderr(&out);
        assert!(text.contains("five_mistakes.yaml:"), "{text}");
        assert!(
            text.contains(": error: "),
            "file:line:col: error: …: {text}"
        );
        assert!(text.contains(doing), "{command:?}: {text}");
    }
    assert_eq!(keyspace(&mut conn), before);

    // A queue or partition that does not exist.
    let out = queuegen(&server, &["status", EXAMPLE, "--queue", "orc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no queue named \"orc\""),
        "{}",
        stderr(&out)
    );
    let out = queuegen(
        &server,
        &["pending", EXAMPLE, "--queue", "ocr", "--partition", "8"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("queue ocr has no partition 8: its partitions are 0 to 7"),
        "{}",
        stderr(&out)
    );
}

/// The generated monitor user (redis/users.acl) of the example spec.
fn monitor_acl() -> Vec<String> {
    let spec = queuegen::spec::check_file(std::path::Path::new(EXAMPLE))
        .unwrap()
        .spec
        .unwrap();
    let mut rules = vec!["on".to_owned(), ">monitor-secret".to_owned()];
    rules.extend(queuegen::gen::deploy::acl::rules(
        &spec,
        queuegen_runtime::roles::Role::Monitor,
        queuegen_tests::acl::server_commands(),
    ));
    rules
}

#[test]
fn a_least_privilege_monitor_user_runs_status_pending_and_monitor() {
    let server = RedisServer::start();
    build(&server);
    let mut conn = server.client().get_connection().unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("monitor")
        .arg(monitor_acl())
        .query(&mut conn)
        .unwrap();
    let url = format!(
        "redis://monitor:monitor-secret@127.0.0.1:{}/",
        server.port()
    );
    let before = keyspace(&mut conn);

    let out = queuegen_at(&url, &["status", EXAMPLE, "--queue", "ocr", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["libraries"][0]["loaded"], true, "FCALL_RO is enough");
    assert_eq!(
        json["queues"][0]["partitions"][0]["groups"][0]["pending"],
        2
    );

    let out = queuegen_at(&url, &["pending", EXAMPLE, "--queue", "ocr", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["job_id"], "p0-a");

    let monitor = Monitor::start(&url, "3600");
    assert_eq!(monitor.get("/readyz", None).0, 200);
    drop(monitor);

    // Without FCALL_RO the library's state is unknown, said so, not an error.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("monitor")
        .arg("-fcall_ro")
        .query(&mut conn)
        .unwrap();
    let out = queuegen_at(&url, &["status", EXAMPLE, "--queue", "ocr", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["libraries"][0]["loaded"], Value::Null);
    let problem = json["libraries"][0]["problem"].as_str().unwrap();
    assert!(problem.contains("fcall_ro"), "{problem}");

    assert_eq!(
        keyspace(&mut conn),
        before,
        "the monitor user wrote nothing"
    );
}
