//! A private `redis-server` per test: free loopback port, no persistence, killed and reaped on drop.
//!
//! [`RedisServer::start`] is synchronous (it blocks for the few milliseconds
//! redis-server needs to answer PING), so it works the same from plain and
//! `#[tokio::test]` tests. It only ever talks to the process it spawned: the
//! readiness check compares the server's `process_id` with the child's PID, so
//! a Redis already running elsewhere (say on 6379) is never used or touched.

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How many times to try another port when redis-server could not bind.
const START_ATTEMPTS: usize = 5;
/// How long one redis-server may take to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running private redis-server; dropping it kills the process and waits for it.
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server from `$REDIS_SERVER`, or `redis-server` on PATH.
    ///
    /// Panics (failing the test) with the server's log if it cannot start.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// As [`RedisServer::start`], with `extra` arguments after the harness's
    /// own, which they override (e.g. `["--maxmemory-policy", "allkeys-lru"]`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(extra) {
                Ok(server) => return server,
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "redis-server did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    fn try_start(extra: &[&str]) -> Result<RedisServer, String> {
        let port = free_port();
        let dir = tempfile::Builder::new()
            .prefix("queuegen-redis-")
            .tempdir()
            .map_err(|err| format!("tempdir: {err}"))?;
        let log_path = dir.path().join("redis.log");
        let log = File::create(&log_path).map_err(|err| format!("log file: {err}"))?;
        let binary = std::env::var_os("REDIS_SERVER").unwrap_or_else(|| "redis-server".into());
        let child = Command::new(&binary)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .args(["--maxmemory-policy", "noeviction"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().map_err(|err| err.to_string())?))
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|err| format!("spawning {binary:?}: {err}"))?;
        let mut server = RedisServer { child, port, dir };
        match server.wait_ready() {
            Ok(()) => Ok(server),
            // Dropping `server` kills and reaps the child.
            Err(problem) => Err(format!("{problem}\n{}", server.log())),
        }
    }

    /// Polls until this very process answers PING on its port (its `INFO`
    /// names our child's PID: another server on that port does not count).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let client = redis::Client::open(self.url()).map_err(|err| err.to_string())?;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited: {status}",
                    self.port
                ));
            }
            if let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut conn);
                let info: redis::RedisResult<String> =
                    pong.and_then(|_| redis::cmd("INFO").arg("server").query(&mut conn));
                if let Ok(info) = info {
                    let ours = format!("process_id:{}", self.child.id());
                    if info.lines().any(|line| line.trim() == ours) {
                        return Ok(());
                    }
                    return Err(format!(
                        "port {} is answered by another redis-server, not ours",
                        self.port
                    ));
                }
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {} never answered", self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The redis-server process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:{port}/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a loopback URL is valid")
    }

    /// The server's working directory (its log is `redis.log` there).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port that was free a moment ago. Another process may take it
/// before redis-server binds (`start` then retries with a new one), or
/// before a test's own listener does.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("binding 127.0.0.1:0")
}
