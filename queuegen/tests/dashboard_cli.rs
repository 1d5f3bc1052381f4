//! `queuegen dashboard`'s start: a bad token, an unknown queue or an
//! unreachable Redis stops it before it listens, naming what is wrong.

use std::process::{Command, Output};

use queuegen_tests::RedisServer;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);

fn dashboard(url: &str, token: Option<&str>, extra: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_queuegen"));
    command
        .args([
            "dashboard",
            EXAMPLE,
            "--redis",
            url,
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env_remove("REDIS_URL")
        .env_remove("QUEUEGEN_DASHBOARD_TOKEN");
    if let Some(token) = token {
        command.env("QUEUEGEN_DASHBOARD_TOKEN", token);
    }
    command.output().expect("queuegen runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_short_or_empty_token_is_refused_before_anything_starts() {
    let server = RedisServer::start();
    let short = dashboard(&server.url(), Some("secret"), &[]);
    assert_eq!(short.status.code(), Some(2), "{short:?}");
    assert!(
        stderr(&short).contains("QUEUEGEN_DASHBOARD_TOKEN) is 6 characters: use at least 16"),
        "{}",
        stderr(&short)
    );
    let empty = dashboard(&server.url(), Some(" "), &[]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(stderr(&empty).contains("is empty"), "{}", stderr(&empty));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "short\n").unwrap();
    let from_file = dashboard(
        &server.url(),
        None,
        &["--token-file", file.to_str().unwrap()],
    );
    assert_eq!(from_file.status.code(), Some(2));
    assert!(
        stderr(&from_file).contains(&format!("({}) is 5 characters", file.display())),
        "{}",
        stderr(&from_file)
    );
}

#[test]
fn an_unknown_queue_or_an_unreachable_redis_is_named() {
    let server = RedisServer::start();
    let unknown = dashboard(&server.url(), None, &["--queue", "orc"]);
    assert_ne!(unknown.status.code(), Some(0));
    assert!(
        stderr(&unknown).contains("orc") && stderr(&unknown).contains("ocr"),
        "suggests the queue: {}",
        stderr(&unknown)
    );

    // Streams not created yet (no `apply`): the first read names the missing stream.
    let missing = dashboard(&server.url(), None, &[]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(
        stderr(&missing).contains("does not exist: run `queuegen apply`"),
        "{}",
        stderr(&missing)
    );

    let port = queuegen_tests::redis_server::free_port();
    let down = dashboard(&format!("redis://127.0.0.1:{port}"), None, &[]);
    assert_eq!(down.status.code(), Some(2));
    assert!(
        stderr(&down).contains(&format!("127.0.0.1:{port}")),
        "{}",
        stderr(&down)
    );
}
