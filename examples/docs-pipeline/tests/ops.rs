//! The ops app (src/bin/ops.rs) serves the dashboard mounted at /ops/queues
//! from the generated configs, against a private redis-server.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use docs_pipeline::queues::{export, notification, ocr, reconciliation};
use queuegen_tests::redis_server::free_port;
use queuegen_tests::RedisServer;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` over HTTP/1.0; the status line and the body.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

#[tokio::test]
async fn the_ops_app_serves_the_dashboard_under_its_mount_point() {
    let server = RedisServer::start();
    let redis = queuegen_runtime::Redis::connect(server.url())
        .await
        .unwrap();
    queuegen_runtime::admin::load_library(&redis, include_str!("../deploy/functions.lua"))
        .await
        .unwrap();
    for config in [
        ocr::CONFIG,
        notification::CONFIG,
        export::CONFIG,
        reconciliation::CONFIG,
    ] {
        queuegen_runtime::admin::ensure_groups(&redis, &config)
            .await
            .unwrap();
    }
    let port = free_port();
    let _app = Killed(
        Command::new(env!("CARGO_BIN_EXE_ops"))
            .args([
                "--redis",
                &server.url(),
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .env_remove("QUEUEGEN_DASHBOARD_TOKEN")
            .stdout(Stdio::null())
            .spawn()
            .expect("the ops app starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        if let Some(answer) = get(port, "/ops/queues") {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the ops app did not answer on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.contains("200"), "{status}: {body}");
    for queue in ["ocr", "notification", "export", "reconciliation"] {
        assert!(
            body.contains(&format!("id=\"queue-{queue}\"")),
            "{queue}: {body}"
        );
    }
    assert!(
        body.contains("href=\"/ops/queues/queues/ocr\""),
        "links stay under the mount point"
    );
    assert!(body.contains("read-only"), "no token: read-only");
    // The pipeline's page: its join, from the generated pipeline and configs.
    let (status, body) = get(port, "/ops/queues/pipelines").unwrap();
    assert!(status.contains("200"), "{status}: {body}");
    assert!(
        body.contains("id=\"join-documents-document-ready\"")
            && body.contains("No runs in flight."),
        "{body}"
    );
    let (status, body) = get(port, "/ops/queues/pipelines/documents/runs/doc-none").unwrap();
    assert!(status.contains("404"), "{status}: {body}");
    assert!(
        body.contains(
            "pipeline documents: no run &quot;doc-none&quot; at any join (document-ready partition"
        ),
        "{body}"
    );
    let (status, _) = get(port, "/healthz").unwrap();
    assert!(status.contains("200"), "the app's own route: {status}");
}
