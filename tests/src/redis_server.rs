//! A private `redis-server` per test: free loopback port, no persistence unless asked (AOF), killed and reaped on drop; kill -9, restart, pause and resume for failure tests.
//!
//! [`RedisServer::start`] is synchronous (it blocks for the few milliseconds
//! redis-server needs to answer PING), so it works the same from plain and
//! `#[tokio::test]` tests. It only ever talks to the process it spawned: the
//! readiness check compares the server's `process_id` with the child's PID, so
//! a Redis already running elsewhere (say on 6379) is never used or touched.
//! The binary is Redis or Valkey as [`crate::server_kind`] selects.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::acl::AclUser;
use crate::server_kind;

/// How many times to try another port when redis-server could not bind.
const START_ATTEMPTS: usize = 5;
/// How long one redis-server may take to answer PING (and load its AOF).
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read and write timeout of the harness's own connections, so that a
/// paused server fails a harness call instead of hanging the test.
const HARNESS_IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How often an AOF server fsyncs its log (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// After every write command, before the reply: an acknowledged write survives kill -9.
    Always,
    /// Once a second: kill -9 can lose up to about a second of acknowledged writes.
    EverySec,
}

impl Fsync {
    /// The server arguments that turn the AOF on with this policy.
    pub fn args(self) -> [&'static str; 4] {
        let policy = match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
        };
        ["--appendonly", "yes", "--appendfsync", policy]
    }
}

/// A running private redis-server; dropping it kills the process (paused
/// or not) and waits for it.
pub struct RedisServer {
    child: Child,
    port: u16,
    /// Everything after the binary, for [`RedisServer::restart`].
    args: Vec<OsString>,
    dir: tempfile::TempDir,
    /// Set by [`RedisServer::kill9`], cleared by a restart.
    killed: bool,
}

impl RedisServer {
    /// Starts a server from `$REDIS_SERVER`, or `redis-server` on PATH.
    ///
    /// Panics (failing the test) with the server's log if it cannot start.
    pub fn start() -> RedisServer {
        Self::start_with::<&str>(&[])
    }

    /// As [`RedisServer::start`], with `extra` arguments after the harness's
    /// own, which they override (e.g. `["--maxmemory-policy", "allkeys-lru"]`).
    pub fn start_with<S: AsRef<str>>(extra: &[S]) -> RedisServer {
        Self::start_on_free_port(free_port, extra)
    }

    /// A server with the append-only file on, fsynced as `fsync` says; its
    /// AOF survives [`RedisServer::kill9`] and [`RedisServer::restart`].
    pub fn start_with_aof(fsync: Fsync) -> RedisServer {
        Self::start_with(&fsync.args())
    }

    /// Starts on a port from `pick_port`, retrying with another when the
    /// server could not start (most often: someone took the port first).
    pub(crate) fn start_on_free_port<S: AsRef<str>>(
        pick_port: fn() -> u16,
        extra: &[S],
    ) -> RedisServer {
        Self::start_with_fresh_args(pick_port, || {
            extra.iter().map(|arg| arg.as_ref().to_owned()).collect()
        })
    }

    /// As [`RedisServer::start_on_free_port`], asking `extra` again on every
    /// attempt: arguments that name ports of their own (a TLS port, whose
    /// +10000 is the cluster bus with `tls-cluster yes`) must be picked
    /// afresh when the last pick was taken, not retried as they were.
    pub(crate) fn start_with_fresh_args(
        pick_port: fn() -> u16,
        extra: impl Fn() -> Vec<String>,
    ) -> RedisServer {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(pick_port(), &extra()) {
                Ok(server) => return server,
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "{:?} did not start after {START_ATTEMPTS} attempts:\n{}",
            server_kind::server_binary(),
            failures.join("\n---\n")
        );
    }

    fn try_start<S: AsRef<str>>(port: u16, extra: &[S]) -> Result<RedisServer, String> {
        let dir = tempfile::Builder::new()
            .prefix("queuegen-redis-")
            .tempdir()
            .map_err(|err| format!("tempdir: {err}"))?;
        let mut args: Vec<OsString> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--maxmemory-policy",
            "noeviction",
            // A replica's first sync starts at once, not after the default 5 s.
            "--repl-diskless-sync-delay",
            "0",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push("--dir".into());
        args.push(dir.path().into());
        args.extend(extra.iter().map(|arg| OsString::from(arg.as_ref())));
        let child = spawn(&args, &dir.path().join("redis.log"))?;
        let mut server = RedisServer {
            child,
            port,
            args,
            dir,
            killed: false,
        };
        match server.wait_ready() {
            Ok(()) => Ok(server),
            // Dropping `server` kills and reaps the child.
            Err(problem) => Err(format!("{problem}\n{}", server.log())),
        }
    }

    /// Polls until this very process answers PING on its port and has
    /// finished loading its data (its `INFO` names our child's PID: another
    /// server on that port does not count).
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
                let info: redis::RedisResult<String> = pong.and_then(|_| {
                    redis::cmd("INFO")
                        .arg("server")
                        .arg("persistence")
                        .query(&mut conn)
                });
                if let Ok(info) = info {
                    let ours = format!("process_id:{}", self.child.id());
                    if !info.lines().any(|line| line.trim() == ours) {
                        return Err(format!(
                            "port {} is answered by another redis-server, not ours",
                            self.port
                        ));
                    }
                    if info.lines().any(|line| line.trim() == "loading:0") {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {} never answered", self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server with SIGKILL, as a crash or the OOM killer would, and
    /// reaps it. Its directory (AOF, cluster config) stays for
    /// [`RedisServer::restart`]. Killing a dead server does nothing.
    pub fn kill9(&mut self) {
        self.send_kill();
        let _ = self.child.wait();
    }

    /// Sends SIGKILL without waiting (a cluster kills all its nodes first, then reaps them).
    pub(crate) fn send_kill(&mut self) {
        self.killed = true;
        // Only an unreaped child is signalled: its PID cannot belong to anyone else.
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(self.child.id(), libc::SIGKILL);
            // SIGKILL ends a stopped process too; the SIGCONT is for
            // certainty only.
            signal(self.child.id(), libc::SIGCONT);
        }
    }

    /// Starts the server again on the same port, with the same arguments
    /// and directory (an AOF server reloads its AOF; a cluster node its
    /// `nodes.conf`), killing it first with SIGKILL if it still runs.
    /// Returns when the new process has loaded its data and answers.
    pub fn restart(&mut self) {
        self.kill9();
        let log_path = self.dir.path().join("redis.log");
        let mut failures = Vec::new();
        // The port may still be held for a moment (the kernel closing the
        // killed server's socket): a few tries before failing the test.
        for _ in 0..START_ATTEMPTS {
            match spawn(&self.args, &log_path) {
                Ok(child) => {
                    self.child = child;
                    self.killed = false;
                }
                Err(problem) => panic!("restarting the server on port {}: {problem}", self.port),
            }
            match self.wait_ready() {
                Ok(()) => return,
                Err(problem) => {
                    failures.push(problem);
                    self.kill9();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        panic!(
            "the server on port {} did not restart:\n{}\n{}",
            self.port,
            failures.join("\n"),
            self.log()
        );
    }

    /// Whether the server process runs (paused or not): false after
    /// [`RedisServer::kill9`] until [`RedisServer::restart`].
    pub fn is_running(&self) -> bool {
        !self.killed
    }

    /// Whether the server is stopped by [`RedisServer::pause`].
    pub fn is_paused(&self) -> bool {
        self.is_running() && process_state(self.child.id()) == Some('T')
    }

    /// Whether the server runs and is not paused: it can answer.
    pub fn is_answering(&self) -> bool {
        self.is_running() && !self.is_paused()
    }

    /// Sets the `--replicaof` a later [`RedisServer::restart`] starts with
    /// (`None`: as a primary). The running process is not changed.
    pub(crate) fn restart_as_replica_of(&mut self, primary: Option<u16>) {
        if let Some(at) = self.args.iter().position(|arg| arg == "--replicaof") {
            self.args.drain(at..(at + 3).min(self.args.len()));
        }
        if let Some(port) = primary {
            self.args.extend([
                "--replicaof".into(),
                "127.0.0.1".into(),
                port.to_string().into(),
            ]);
        }
    }

    /// Stops the server process (SIGSTOP): it keeps its sockets but answers
    /// nothing until [`RedisServer::resume`], like a long GC pause or a
    /// stalled VM. Returns once the kernel reports the process stopped.
    pub fn pause(&self) {
        assert!(self.is_running(), "pausing a killed server");
        signal(self.child.id(), libc::SIGSTOP);
        self.wait_for_state(true);
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) {
        assert!(self.is_running(), "resuming a killed server");
        signal(self.child.id(), libc::SIGCONT);
        self.wait_for_state(false);
    }

    fn wait_for_state(&self, stopped: bool) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let Some(state) = process_state(self.child.id()) else {
                return; // gone: nothing left to stop or resume
            };
            if (state == 'T') == stopped {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server {} never became {}",
                self.child.id(),
                if stopped { "stopped" } else { "running" }
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The redis-server process ID (a new one after [`RedisServer::restart`]).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:{port}`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:{port}/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A URL that logs in as `user` (`redis://user:pass@127.0.0.1:{port}/`).
    pub fn url_as(&self, user: &AclUser) -> String {
        user.url_for(self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a loopback URL is valid")
    }

    /// A blocking connection for the harness and tests, with read and write
    /// timeouts so a paused server fails the call instead of hanging it.
    pub fn connection(&self) -> redis::Connection {
        let conn = self
            .client()
            .get_connection_with_timeout(HARNESS_IO_TIMEOUT)
            .unwrap_or_else(|err| panic!("connecting to {}: {err}", self.addr()));
        conn.set_read_timeout(Some(HARNESS_IO_TIMEOUT))
            .and_then(|()| conn.set_write_timeout(Some(HARNESS_IO_TIMEOUT)))
            .expect("setting socket timeouts");
        conn
    }

    /// A multiplexed async connection for the test's own reads and writes
    /// (no timeouts: the code under test's connections are its own).
    pub async fn async_connection(&self) -> redis::aio::MultiplexedConnection {
        self.client()
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|err| panic!("connecting to {}: {err}", self.addr()))
    }

    /// The server's `INFO section` text.
    pub fn info(&self, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query(&mut self.connection())
            .unwrap_or_else(|err| panic!("INFO {section} on {}: {err}", self.addr()))
    }

    /// Whether the server knows the command `args` (a feature check that asks
    /// the server instead of assuming by version, e.g. `["XTRIM", "probe",
    /// "MINID", "0", "ACKED"]`): any reply is yes; an `unknown command`,
    /// `unknown subcommand` or `syntax error` reply is no; any other error
    /// fails the test. Run it on a key the test does not use.
    pub fn accepts(&self, args: &[&str]) -> bool {
        let reply: redis::RedisResult<redis::Value> = redis::cmd(args[0])
            .arg(&args[1..])
            .query(&mut self.connection());
        match reply {
            Ok(_) => true,
            Err(err) => {
                let text = err.to_string().to_ascii_lowercase();
                let unknown = ["unknown command", "unknown subcommand", "syntax error"];
                if unknown.iter().any(|phrase| text.contains(phrase)) {
                    false
                } else {
                    panic!("{args:?} on {}: {err}", self.addr())
                }
            }
        }
    }

    /// Which implementation and version this is, e.g. `valkey 8.0.1`.
    pub fn describe(&self) -> String {
        server_kind::describe(&self.info("server"))
    }

    /// Adds `user` to this server's ACL (`ACL SETUSER`); it lasts until a
    /// restart. To survive restarts, start with [`AclUser::server_args`].
    pub fn add_user(&self, user: &AclUser) {
        user.create(&mut self.connection(), &self.addr());
    }

    /// The server's working directory (its log is `redis.log` there).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// The server's log so far (every run's, after restarts), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Spawns the server binary with `args`, its output appended to `log_path`.
fn spawn(args: &[OsString], log_path: &std::path::Path) -> Result<Child, String> {
    let log: File = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(|err| format!("log file {}: {err}", log_path.display()))?;
    let binary = server_kind::server_binary();
    Command::new(&binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().map_err(|err| err.to_string())?))
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|err| format!("spawning {binary:?}: {err}"))
}

/// The state letter of process `pid` in `/proc/{pid}/stat` (`T`: stopped), if it exists.
fn process_state(pid: u32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ...`: comm may hold spaces, the state follows its `)`.
    let (_, rest) = text.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Sends `signal` to our own child `pid`; an error (it is gone) is ignored.
fn signal(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a PID fits pid_t");
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// A loopback port that was free a moment ago, and that this process has
/// not handed out before. Another process may take it before redis-server
/// binds (`start` then retries with a new one), or before a test's own
/// listener does; but two servers or pods this process starts one after the
/// other never get the same port (the kernel may well offer a port again
/// while the process it went to has not bound it yet).
pub fn free_port() -> u16 {
    for _ in 0..10_000 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("binding 127.0.0.1:0");
        if hand_out(port) {
            return port;
        }
    }
    panic!("no loopback port left that this process has not handed out already");
}

/// A free loopback port whose cluster bus port (port + 10000) was free too;
/// neither handed out before.
pub fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", bus)).is_ok() && hand_out(bus) {
            return port;
        }
    }
}

/// Records `port` as handed out; `false` when it already was.
fn hand_out(port: u16) -> bool {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    HANDED_OUT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(port)
}
