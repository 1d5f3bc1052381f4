//! `queuegen apply` against a private redis-server: groups created once, reported after, errors
//! named; the Function library loaded, replaced on a re-run, and verified.

use std::path::Path;
use std::process::{Command, Output};

use queuegen_runtime::functions::{self, Function};
use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
/// 8 + 4 + 2 + 1 partitions in the example.
const PARTITIONS: usize = 25;

fn library() -> String {
    queuegen::gen::functions::library_name("docs-pipeline")
}

/// Names of the libraries loaded on the server.
fn libraries(server: &RedisServer) -> Vec<String> {
    let mut conn = server.client().get_connection().unwrap();
    let listed: Vec<Vec<redis::Value>> =
        redis::cmd("FUNCTION").arg("LIST").query(&mut conn).unwrap();
    let mut names: Vec<String> = listed
        .iter()
        .map(|library| match &library[1] {
            redis::Value::BulkString(name) => String::from_utf8_lossy(name).into_owned(),
            other => panic!("library_name is {other:?}"),
        })
        .collect();
    names.sort();
    names
}

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
    assert!(
        stdout.contains(&format!(
            "function library {} on 127.0.0.1:{}: loaded (new on this server), verified",
            library(),
            server.port()
        )),
        "{stdout}"
    );
    assert_eq!(libraries(&server), [library()]);

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

    let version: String = functions::command(
        &Function::Version.in_library(&library()),
        &functions::Version,
    )
    .query(&mut conn)
    .unwrap();
    assert_eq!(version, library());

    let second = apply(&server, &["--json"]);
    assert!(second.status.success(), "{second:?}");
    let report: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    let rows = report["groups"].as_array().unwrap();
    assert_eq!(rows.len(), PARTITIONS);
    assert!(rows.iter().all(|row| row["created"] == false), "{rows:?}");
    assert_eq!(report["library"]["name"], library());
    assert_eq!(report["library"]["servers"][0]["result"], "replaced");
    assert_eq!(report["library"]["verified"], true);
    assert_eq!(libraries(&server), [library()]);
}

#[test]
fn the_library_loads_beside_another_version_and_only_replaces_its_own() {
    let server = RedisServer::start();
    let spec = queuegen::spec::check_file(Path::new(EXAMPLE))
        .unwrap()
        .spec
        .unwrap();
    let next = queuegen::gen::functions::LIBRARY_VERSION + 1;
    let newer = queuegen::gen::functions::render_library(&spec, "queues.yaml", next).unwrap();
    let mut conn = server.client().get_connection().unwrap();
    let newer_name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&newer)
        .query(&mut conn)
        .unwrap();

    let out = apply(&server, &["--queue", "export", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["library"]["servers"][0]["result"], "loaded");
    let mut expected = vec![library(), newer_name];
    expected.sort();
    assert_eq!(libraries(&server), expected);
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
    assert!(libraries(&server).is_empty(), "nothing was loaded");
}

/// A spec that says `deployment: cluster` applied to a lone server is a wrong
/// URL or a wrong spec: refused, naming the key and the server, with nothing
/// loaded or created.
#[test]
fn a_cluster_spec_is_refused_on_a_standalone_server_and_nothing_changes() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(EXAMPLE).unwrap();
    assert!(
        spec.contains("deployment: standalone"),
        "the example is standalone"
    );
    let cluster_spec = dir.path().join("queues.yaml");
    std::fs::write(
        &cluster_spec,
        spec.replace("deployment: standalone", "deployment: cluster"),
    )
    .unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .arg("apply")
        .arg(&cluster_spec)
        .args(["--redis", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs");
    assert!(!out.status.success(), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("redis.deployment is cluster")
            && stderr.contains(&format!(
                "127.0.0.1:{} is a standalone server",
                server.port()
            ))
            && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    assert!(libraries(&server).is_empty(), "no library loaded");
    let mut conn = server.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "nothing created: {keys:?}");
}
