//! `queuegen pending` against a private redis-server: rows worst first (most
//! deliveries, then longest idle), each with the job_id read from its entry
//! or shown as deleted, and the filters (--min-idle, --consumer,
//! --partition, --limit) selecting exactly the entries built for them.

mod ops_state;

use ops_state::*;
use queuegen_tests::RedisServer;
use serde_json::Value;

/// Pending entries by name, as built: (partition, id, owner, idle set, deliveries).
struct Built {
    ids: std::collections::HashMap<&'static str, (u16, String)>,
}

/// Partition 2: A (1 delivery, just read), B (carol, 5 deliveries, 1 s idle),
/// C (500 s idle), D (200 s idle, then deleted); partition 5: E (dave,
/// 2 deliveries, 300 s idle).
fn build(server: &RedisServer) -> Built {
    apply(server);
    let mut conn = server.client().get_connection().unwrap();
    let mut ids = std::collections::HashMap::new();
    for name in ["A", "B", "C", "D"] {
        let id = add(&mut conn, &ready(2), "*", &format!("job-{name}"));
        ids.insert(name, (2, id));
    }
    read(&mut conn, &ready(2), "alice", 4);
    claim(&mut conn, &ready(2), &ids["B"].1, "carol", 1_000, 5);
    claim(&mut conn, &ready(2), &ids["C"].1, "alice", 500_000, 1);
    claim(&mut conn, &ready(2), &ids["D"].1, "alice", 200_000, 1);
    let deleted: u64 = redis::cmd("XDEL")
        .arg(ready(2))
        .arg(&ids["D"].1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(deleted, 1);
    let e = add(&mut conn, &ready(5), "*", "job-E");
    read(&mut conn, &ready(5), "dave", 1);
    claim(&mut conn, &ready(5), &e, "dave", 300_000, 2);
    ids.insert("E", (5, e));
    Built { ids }
}

fn pending_json(server: &RedisServer, extra: &[&str]) -> Value {
    let mut args = vec!["pending", EXAMPLE, "--queue", "ocr", "--json"];
    args.extend_from_slice(extra);
    let out = queuegen(server, &args);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{err}: {}", stdout(&out)))
}

/// The rows' entries by name, in order.
fn names(built: &Built, json: &Value) -> Vec<&'static str> {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let at = (
                row["partition"].as_u64().unwrap() as u16,
                row["id"].as_str().unwrap().to_owned(),
            );
            *built
                .ids
                .iter()
                .find(|(_, id)| **id == at)
                .unwrap_or_else(|| panic!("unknown row {row}"))
                .0
        })
        .collect()
}

#[test]
fn rows_come_worst_first_with_their_job_ids() {
    let server = RedisServer::start();
    let built = build(&server);
    let mut conn = server.client().get_connection().unwrap();
    let before = keyspace(&mut conn);

    let json = pending_json(&server, &[]);
    assert_eq!(json["queue"], "ocr");
    assert_eq!(json["group"], GROUP);
    // Most deliveries first (B 5, E 2), then longest idle (C 500 s, D 200 s, A).
    assert_eq!(names(&built, &json), ["B", "E", "C", "D", "A"]);
    let now = json["server_time_ms"].as_u64().unwrap();
    let expected = [
        ("B", Some("job-B"), "carol", 1_000, 5),
        ("E", Some("job-E"), "dave", 300_000, 2),
        ("C", Some("job-C"), "alice", 500_000, 1),
        ("D", None, "alice", 200_000, 1),
        ("A", Some("job-A"), "alice", 0, 1),
    ];
    for (row, (name, job_id, owner, idle_set, deliveries)) in
        json["rows"].as_array().unwrap().iter().zip(expected)
    {
        assert_eq!(
            row["job_id"],
            job_id.map_or(Value::Null, Value::from),
            "{name}"
        );
        assert_eq!(row["deleted"], job_id.is_none(), "{name}");
        assert_eq!(row["owner"], owner, "{name}");
        assert_eq!(row["deliveries"], deliveries, "{name}");
        let idle = row["idle_ms"].as_u64().unwrap();
        assert!(
            (idle_set..idle_set + MINUTE).contains(&idle),
            "{name}: idle {idle} ms, set to {idle_set} ms a moment ago"
        );
        let id = row["id"].as_str().unwrap();
        assert_eq!(row["age_ms"].as_u64().unwrap(), now - ms_of(id), "{name}");
    }
    let partitions: Vec<(u64, u64, u64)> = json["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_u64().unwrap(),
                p["pending"].as_u64().unwrap(),
                p["examined"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(partitions.len(), 8);
    assert_eq!(partitions[2], (2, 4, 4));
    assert_eq!(partitions[5], (5, 1, 1));
    assert!(partitions
        .iter()
        .filter(|p| p.0 != 2 && p.0 != 5)
        .all(|p| p.1 == 0 && p.2 == 0));

    // The filters.
    assert_eq!(
        names(&built, &pending_json(&server, &["--min-idle", "250s"])),
        ["E", "C"]
    );
    assert_eq!(
        names(&built, &pending_json(&server, &["--min-idle", "3m20s"])),
        ["E", "C", "D"]
    );
    assert_eq!(
        names(&built, &pending_json(&server, &["--consumer", "carol"])),
        ["B"]
    );
    assert_eq!(
        names(&built, &pending_json(&server, &["--partition", "2"])),
        ["B", "C", "D", "A"]
    );
    let limited = pending_json(&server, &["--limit", "2"]);
    assert_eq!(names(&built, &limited), ["B", "E"]);
    assert_eq!(
        names(
            &built,
            &pending_json(
                &server,
                &[
                    "--partition",
                    "2",
                    "--consumer",
                    "alice",
                    "--min-idle",
                    "1m"
                ]
            )
        ),
        ["C", "D"]
    );

    // The table.
    let out = queuegen(&server, &["pending", EXAMPLE, "--queue", "ocr"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .take(5)
        .map(|line| line.split_whitespace().collect())
        .collect();
    // PART ID JOB_ID OWNER IDLE DELIVERIES AGE
    assert_eq!(rows[0][..4], ["2", &built.ids["B"].1, "job-B", "carol"]);
    assert_eq!(rows[0][5], "5");
    assert_eq!(rows[3][..4], ["2", &built.ids["D"].1, "(deleted)", "alice"]);
    assert!(
        text.contains("queue ocr group ocr-workers: 5 pending entries shown, worst first"),
        "{text}"
    );
    assert!(text.contains("5 pending in all"), "{text}");

    assert_eq!(keyspace(&mut conn), before, "pending wrote nothing");
}

#[test]
fn a_bad_duration_is_refused_naming_it() {
    let server = RedisServer::start();
    let out = queuegen(
        &server,
        &[
            "pending",
            EXAMPLE,
            "--queue",
            "ocr",
            "--min-idle",
            "ten minutes",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.contains("--min-idle") && text.contains("\"ten minutes\" is not a duration"),
        "{text}"
    );
}
