//! What the status, pending and monitor CLI tests share: running the binary
//! against a private redis-server, building queue state by hand with known
//! IDs, owners, idle times and due times, and proving a command wrote nothing.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};

use queuegen_tests::RedisServer;

/// The example spec: queue `ocr` has 8 partitions, group `ocr-workers`
/// (start `$`) and alerts oldest_pending_age 10m, oldest_ready_age 5m,
/// dead_letters 1.
pub const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
/// A spec that fails `check`.
pub const BROKEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/five_mistakes.yaml"
);
pub const GROUP: &str = "ocr-workers";
pub const LIBRARY: &str = "qg_docs_pipeline_v14";

/// `LIBRARY` follows the generator's library version (bumped with the library's code).
#[test]
fn library_is_the_generated_one() {
    assert_eq!(
        LIBRARY,
        queuegen::gen::functions::library_name("docs-pipeline")
    );
}
pub const MINUTE: u64 = 60_000;

/// Runs `queuegen` with `args` then `--redis url`.
pub fn queuegen_at(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .args(["--redis", url])
        .env_remove("REDIS_URL")
        .env("NO_COLOR", "1")
        .output()
        .expect("queuegen runs")
}

pub fn queuegen(server: &RedisServer, args: &[&str]) -> Output {
    queuegen_at(&server.url(), args)
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `queuegen apply` of the example: every stream, group and the library.
pub fn apply(server: &RedisServer) {
    let out = queuegen(server, &["apply", EXAMPLE]);
    assert!(out.status.success(), "{out:?}");
}

pub fn ready(partition: u16) -> String {
    format!("work:{{ocr-{partition:02}}}:ready")
}

pub fn dead(partition: u16) -> String {
    format!("work:{{ocr-{partition:02}}}:dead")
}

pub fn retry(partition: u16) -> String {
    format!("work:{{ocr-{partition:02}}}:retry")
}

/// The server's clock in Unix ms (the clock stream IDs come from).
pub fn server_now_ms(conn: &mut redis::Connection) -> u64 {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    seconds * 1_000 + micros / 1_000
}

/// Adds an entry carrying `job_id`; `id` is `*` or an explicit `<ms>-<seq>`.
pub fn add(conn: &mut redis::Connection, key: &str, id: &str, job_id: &str) -> String {
    redis::cmd("XADD")
        .arg(key)
        .arg(id)
        .arg("job_id")
        .arg(job_id)
        .arg("type")
        .arg("OcrRequested")
        .query(conn)
        .unwrap()
}

/// Delivers up to `count` new entries of `key` to `consumer`.
pub fn read(conn: &mut redis::Connection, key: &str, consumer: &str, count: usize) {
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query(conn)
        .unwrap();
}

/// Gives pending entry `id` to `consumer` with exactly `idle_ms` idle and
/// `deliveries` deliveries (`XCLAIM … IDLE … RETRYCOUNT …`).
pub fn claim(
    conn: &mut redis::Connection,
    key: &str,
    id: &str,
    consumer: &str,
    idle_ms: u64,
    deliveries: u64,
) {
    let claimed: Vec<String> = redis::cmd("XCLAIM")
        .arg(key)
        .arg(GROUP)
        .arg(consumer)
        .arg(0)
        .arg(id)
        .arg("IDLE")
        .arg(idle_ms)
        .arg("RETRYCOUNT")
        .arg(deliveries)
        .arg("JUSTID")
        .query(conn)
        .unwrap();
    assert_eq!(claimed, [id], "XCLAIM {key} {id}");
}

/// Every key with its type and contents, to prove a command wrote nothing.
pub fn keyspace(conn: &mut redis::Connection) -> BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    let mut dump: BTreeMap<String, String> = keys
        .into_iter()
        .map(|key| {
            let value: Vec<u8> = redis::cmd("DUMP").arg(&key).query(conn).unwrap();
            (key, format!("{value:?}"))
        })
        .collect();
    let libraries: redis::Value = redis::cmd("FUNCTION").arg("DUMP").query(conn).unwrap();
    dump.insert("(function libraries)".into(), format!("{libraries:?}"));
    dump
}

/// The ID's milliseconds: `"1700000000000-3"` → 1700000000000.
pub fn ms_of(id: &str) -> u64 {
    id.split('-').next().unwrap().parse().unwrap()
}

/// A `queuegen monitor` process, killed when dropped.
pub struct Monitor {
    child: Child,
    /// `127.0.0.1:<port>` it serves on.
    pub addr: String,
}

impl Monitor {
    /// Starts `monitor --queue ocr --every {every}` against `url` and waits
    /// for its first refresh (it prints where it serves once that succeeded).
    pub fn start(url: &str, every: &str) -> Monitor {
        Monitor::start_for(EXAMPLE, "ocr", url, every)
    }

    /// As [`Monitor::start`], for `queue` of the spec at `spec`.
    pub fn start_for(spec: &str, queue: &str, url: &str, every: &str) -> Monitor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_queuegen"))
            .args(["monitor", spec, "--queue", queue, "--listen", "127.0.0.1:0"])
            .args(["--every", every, "--redis", url])
            .env_remove("REDIS_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}: {:?}", child.try_wait()))
            .to_owned();
        Monitor { child, addr }
    }

    /// `(status code, body)` of `GET path`.
    pub fn get(&self, path: &str, accept: Option<&str>) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: monitor\r\n{accept}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_owned())
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
