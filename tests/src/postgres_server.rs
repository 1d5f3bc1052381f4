//! A private PostgreSQL per test: `initdb` + `pg_ctl` in a temp dir on a free loopback port (never 5432), run as the `postgres` user when the tests run as root, stopped (immediate, then SIGKILL) and removed on drop.
//!
//! [`PostgresServer::start`] is synchronous (initdb and the first start take
//! a second or two), so it works the same from plain and `#[tokio::test]`
//! tests. It only ever talks to the server it started: clients always name
//! 127.0.0.1 and the harness's own port, the caller's `PG*` variables are
//! not passed on (a `PGHOST` or `PGPORT` could point psql at the machine's
//! own cluster), and the readiness check compares the server's
//! `data_directory` with ours, so a PostgreSQL already running elsewhere
//! (say Debian's cluster on 5432) is never used or touched.
//!
//! The binaries come from `$PG_BIN`, else the newest
//! `/usr/lib/postgresql/<version>/bin` (Debian's layout), else the directory
//! of `initdb` on PATH. initdb refuses to run as root, and CI runs as root:
//! then every PostgreSQL program runs as the `postgres` system user that
//! Debian's package creates, and the temp dir belongs to that user.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::redis_server::free_port;

/// How many times to try another port when the server could not start.
const START_ATTEMPTS: usize = 5;
/// How long `pg_ctl start` waits for the server to accept connections (`-t`).
const START_TIMEOUT_SECS: u32 = 30;
/// How long `pg_ctl stop` may take before the harness SIGKILLs the server:
/// an immediate stop takes milliseconds, so a longer one is a hang.
const STOP_TIMEOUT_SECS: u32 = 10;
/// `PGCONNECT_TIMEOUT` of the harness's own psql: a server that stopped
/// answering fails the call instead of hanging the test.
const CONNECT_TIMEOUT_SECS: u32 = 10;
/// How long to wait for killed server processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Debian's own cluster's port: never ours, whatever the OS hands out.
const SYSTEM_PORT: u16 = 5432;
/// The superuser initdb creates and the database `start` creates for it.
const USER: &str = "queuegen";
const DATABASE: &str = "queuegen";

/// A running private PostgreSQL; dropping it stops the server (SIGKILL if
/// `pg_ctl stop` does not end it) and removes its directory.
pub struct PostgresServer {
    port: u16,
    /// The postmaster's PID, from `postmaster.pid` once it started.
    pid: Option<u32>,
    /// Set by [`PostgresServer::stop`] (and drop): nothing left to stop.
    stopped: bool,
    /// `data/` (the cluster), `postgres.log`, `pg_ctl.log`, the unix socket
    /// and copies of [`PostgresServer::psql_file`]'s files. Declared last:
    /// removed after `drop` has stopped the server.
    dir: tempfile::TempDir,
}

impl PostgresServer {
    /// Starts a server with the harness's settings (no fsync: tests kill
    /// processes, never the OS) and a database `queuegen` owned by the
    /// superuser `queuegen`, who logs in without a password.
    ///
    /// Panics (failing the test) with the server's log if it cannot start.
    pub fn start() -> PostgresServer {
        Self::start_with(&[])
    }

    /// As [`PostgresServer::start`], with `extra` settings passed as
    /// `-c name=value` after the harness's own, which they override
    /// (e.g. `[("fsync", "on")]` for a bench that measures durable commits).
    pub fn start_with(extra: &[(&str, &str)]) -> PostgresServer {
        let tools = PgTools::get();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(tools, pick_port(), extra) {
                Ok(server) => return server,
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "PostgreSQL from {} did not start after {START_ATTEMPTS} attempts:\n{}",
            tools.bin_dir.display(),
            failures.join("\n---\n")
        );
    }

    fn try_start(tools: &PgTools, port: u16, extra: &[(&str, &str)]) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("queuegen-pg-")
            .tempdir()
            .map_err(|err| format!("tempdir: {err}"))?;
        let data = dir.path().join("data");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&data)
            .map_err(|err| format!("creating {}: {err}", data.display()))?;
        if let Some(user) = run_as() {
            for path in [dir.path(), &data] {
                std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).map_err(|err| {
                    format!("chown {} to the postgres user: {err}", path.display())
                })?;
            }
        }
        // From here on dropping `server` stops whatever pg_ctl started.
        let server = PostgresServer {
            port,
            pid: None,
            stopped: false,
            dir,
        };
        server.init_and_start(tools, extra)
    }

    fn init_and_start(mut self, tools: &PgTools, extra: &[(&str, &str)]) -> Result<Self, String> {
        let data = self.data_dir();
        let initdb = self
            .command(tools.binary("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output();
        check("initdb", initdb).map_err(|problem| {
            let mut text = self.explain(&problem);
            if run_as().is_some() {
                text.push_str(&format!(
                    "\n(as root the harness runs initdb as the postgres user, who must be \
                     able to reach {}; point TMPDIR at a directory it can reach, like /tmp)",
                    self.dir.path().display()
                ));
            }
            text
        })?;

        let socket_dir = self.dir.path().to_string_lossy().into_owned();
        let port = self.port.to_string();
        let mut options: Vec<String> = ["-p", &port, "-k", &socket_dir]
            .iter()
            .map(|arg| sh_quote(arg))
            .collect();
        let settings = [
            ("listen_addresses", "127.0.0.1"),
            // Tests kill processes, never the OS: what a process wrote is
            // in the page cache and survives it.
            ("fsync", "off"),
            ("full_page_writes", "off"),
            ("max_connections", "200"),
        ];
        for (name, value) in settings.iter().chain(extra) {
            options.push("-c".into());
            options.push(sh_quote(&format!("{name}={value}")));
        }
        let mut log_arg = OsString::from(self.dir.path());
        log_arg.push("/postgres.log");
        let started = self.pg_ctl(
            tools,
            &[
                OsStr::new("-l"),
                &log_arg,
                OsStr::new("-w"),
                OsStr::new("-t"),
                OsStr::new(&START_TIMEOUT_SECS.to_string()),
                // pg_ctl hands -o to the postmaster through /bin/sh: quoted.
                OsStr::new("-o"),
                OsStr::new(&options.join(" ")),
                OsStr::new("start"),
            ],
            START_TIMEOUT_SECS + 10,
        );
        self.pid = read_postmaster_pid(&data);
        started.map_err(|problem| self.explain(&format!("pg_ctl start: {problem}")))?;
        if self.pid.is_none() {
            return Err(
                self.explain("pg_ctl started a server but data/postmaster.pid names no PID")
            );
        }

        // The port may be answered by someone else's server (it took the
        // port between free_port and our bind): only ours has our data dir.
        let shown = self
            .try_psql_db("postgres", "SHOW data_directory")
            .map_err(|problem| self.explain(&format!("SHOW data_directory: {problem}")))?;
        if !same_path(Path::new(shown.trim()), &data) {
            return Err(self.explain(&format!(
                "port {} is answered by a server with data directory {}, not ours",
                self.port,
                shown.trim()
            )));
        }
        self.try_psql_db(
            "postgres",
            &format!("CREATE DATABASE {DATABASE} OWNER {USER}"),
        )
        .map_err(|problem| self.explain(&format!("creating database {DATABASE}: {problem}")))?;
        Ok(self)
    }

    /// `problem`, the pg_ctl output and the server log, for a failed start.
    fn explain(&self, problem: &str) -> String {
        let pg_ctl =
            std::fs::read_to_string(self.dir.path().join("pg_ctl.log")).unwrap_or_default();
        format!(
            "port {}: {problem}\n--- pg_ctl output:\n{pg_ctl}--- server log:\n{}",
            self.port,
            self.log()
        )
    }

    /// A PostgreSQL program, run as the postgres user when we are root, in
    /// our temp dir (a cwd that user can enter), without the caller's `PG*`
    /// variables and with stdin closed.
    fn command(&self, program: PathBuf) -> Command {
        let mut command = Command::new(program);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PG") {
                command.env_remove(name);
            }
        }
        command
            .env("PGCONNECT_TIMEOUT", CONNECT_TIMEOUT_SECS.to_string())
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        if let Some(user) = run_as() {
            command.uid(user.uid).gid(user.gid);
        }
        command
    }

    /// Runs `pg_ctl -D data args`, its output appended to `pg_ctl.log`
    /// (not a pipe: the postmaster it starts must not hold one of ours), and
    /// kills it if it runs longer than `timeout_secs`.
    fn pg_ctl(&self, tools: &PgTools, args: &[&OsStr], timeout_secs: u32) -> Result<(), String> {
        let log_path = self.dir.path().join("pg_ctl.log");
        let log: File = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|err| format!("log file {}: {err}", log_path.display()))?;
        let stderr = log.try_clone().map_err(|err| err.to_string())?;
        let mut child = self
            .command(tools.binary("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .args(args)
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr))
            .spawn()
            .map_err(|err| format!("spawning pg_ctl: {err}"))?;
        let deadline = Instant::now() + Duration::from_secs(timeout_secs.into());
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("pg_ctl exited: {status}")),
                Ok(None) if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("pg_ctl ran longer than {timeout_secs} s"));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(err) => return Err(format!("waiting for pg_ctl: {err}")),
            }
        }
    }

    /// `psql -X -q -A -t -v ON_ERROR_STOP=1` on our port, as `queuegen`,
    /// on `database`, with `input` (`-c sql` or `-f path`).
    fn run_psql(&self, database: &str, input: &[&OsStr]) -> Result<String, String> {
        let tools = PgTools::get();
        let output = self
            .command(tools.psql())
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", USER, "-d", database])
            .args(input)
            .output();
        check("psql", output).map(|stdout| stdout.trim_end_matches('\n').to_owned())
    }

    fn try_psql_db(&self, database: &str, sql: &str) -> Result<String, String> {
        self.run_psql(database, &[OsStr::new("-c"), OsStr::new(sql)])
    }

    /// Runs `sql` on the `queuegen` database through psql (unaligned,
    /// tuples only: `SELECT 1` gives `"1"`) and returns its output without
    /// the final newline. Panics with psql's stderr if it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_db(DATABASE, sql)
    }

    /// As [`PostgresServer::psql`], on `database` (one from
    /// [`PostgresServer::create_database`]).
    pub fn psql_db(&self, database: &str, sql: &str) -> String {
        self.try_psql_db(database, sql).unwrap_or_else(|problem| {
            panic!("psql on {database} at port {}: {sql}\n{problem}", self.port)
        })
    }

    /// Runs the SQL file `path` (a migration) on the `queuegen` database,
    /// stopping at the first error: `Err` holds psql's stderr, which names
    /// the file, the line and the problem, so tests can assert on failures.
    ///
    /// The file is copied into the server's directory first: as root the
    /// harness runs psql as the postgres user, who may not read the original.
    pub fn psql_file(&self, path: &Path) -> Result<String, String> {
        let name = path
            .file_name()
            .ok_or_else(|| format!("{} names no file", path.display()))?;
        let copies = self.dir.path().join("sql");
        std::fs::create_dir_all(&copies)
            .map_err(|err| format!("creating {}: {err}", copies.display()))?;
        let copy = copies.join(name);
        std::fs::copy(path, &copy)
            .map_err(|err| format!("copying {} to {}: {err}", path.display(), copy.display()))?;
        if let Some(user) = run_as() {
            for owned in [copies.as_path(), copy.as_path()] {
                std::os::unix::fs::chown(owned, Some(user.uid), Some(user.gid))
                    .map_err(|err| format!("chown {}: {err}", owned.display()))?;
            }
        }
        self.run_psql(DATABASE, &[OsStr::new("-f"), copy.as_os_str()])
    }

    /// Creates database `name` (owner `queuegen`) so that a test can isolate
    /// itself in a shared server, and returns its URL. `name` is letters,
    /// digits and `_`, so that it needs no quoting in SQL or the URL.
    pub fn create_database(&self, name: &str) -> String {
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "database name {name:?}: use letters, digits and _ only"
        );
        self.psql_db("postgres", &format!("CREATE DATABASE {name} OWNER {USER}"));
        self.url_for(name)
    }

    /// Stops the server now (`pg_ctl stop -m immediate`, then SIGKILL for
    /// any of its processes still alive), as a crash would end it. Its
    /// directory and log stay until drop. Stopping twice does nothing.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let data = self.data_dir();
        // Read again: pg_ctl may have started a server that never answered.
        let pid = read_postmaster_pid(&data).or(self.pid);
        if data.join("postmaster.pid").exists() {
            if let Some(tools) = PgTools::found() {
                let _ = self.pg_ctl(
                    tools,
                    &[
                        OsStr::new("-m"),
                        OsStr::new("immediate"),
                        OsStr::new("-w"),
                        OsStr::new("-t"),
                        OsStr::new(&STOP_TIMEOUT_SECS.to_string()),
                        OsStr::new("stop"),
                    ],
                    STOP_TIMEOUT_SECS + 5,
                );
            }
        }
        // Whatever still runs in our data dir is ours: the postmaster (if
        // pg_ctl failed) and any backend it left behind.
        let Some(data) = canonical(&data) else {
            return;
        };
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            let mut left = processes_in(&data);
            if let Some(pid) = pid {
                if is_alive(pid) && in_dir(pid, &data) && !left.contains(&pid) {
                    left.push(pid);
                }
            }
            if left.is_empty() || Instant::now() > deadline {
                return;
            }
            for pid in left {
                kill9(pid);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The postmaster's process ID.
    pub fn pid(&self) -> u32 {
        self.pid.expect("a started server has a postmaster PID")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://queuegen@127.0.0.1:{port}/queuegen`
    pub fn url(&self) -> String {
        self.url_for(DATABASE)
    }

    fn url_for(&self, database: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{database}", self.port)
    }

    /// The cluster's data directory (`data/` in the server's temp dir).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // Nothing in stop panics: it runs during unwinds too.
        self.stop();
    }
}

/// Where the PostgreSQL programs are.
struct PgTools {
    bin_dir: PathBuf,
}

/// Debian installs each major version under here.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

impl PgTools {
    /// The programs, found once; panics naming where it looked.
    fn get() -> &'static PgTools {
        Self::cached().as_ref().unwrap_or_else(|searched| {
            panic!(
                "PostgreSQL's initdb was not found (searched: {searched}); \
                     install it (apt-get install postgresql) or set PG_BIN to the \
                     directory holding initdb, pg_ctl and psql"
            )
        })
    }

    /// As [`PgTools::get`], without panicking (for drop).
    fn found() -> Option<&'static PgTools> {
        Self::cached().as_ref().ok()
    }

    fn cached() -> &'static Result<PgTools, String> {
        static TOOLS: OnceLock<Result<PgTools, String>> = OnceLock::new();
        TOOLS.get_or_init(Self::find)
    }

    fn find() -> Result<PgTools, String> {
        if let Some(dir) = std::env::var_os("PG_BIN") {
            let dir = PathBuf::from(dir);
            return if dir.join("initdb").is_file() {
                Ok(PgTools { bin_dir: dir })
            } else {
                Err(format!("$PG_BIN={} holds no initdb", dir.display()))
            };
        }
        let mut searched = vec!["$PG_BIN (unset)".to_owned()];
        if let Some(dir) = newest_debian_bin() {
            return Ok(PgTools { bin_dir: dir });
        }
        searched.push(format!("{DEBIAN_ROOT}/<version>/bin/initdb"));
        let path = std::env::var_os("PATH").unwrap_or_default();
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                // The real directory (Debian links only some programs onto
                // PATH): pg_ctl and postgres are beside the real initdb.
                let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                let bin_dir = real.parent().map_or(dir, Path::to_path_buf);
                return Ok(PgTools { bin_dir });
            }
        }
        searched.push("initdb on PATH".to_owned());
        Err(searched.join(", "))
    }

    fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// psql beside initdb, else psql on PATH (some layouts split client and server).
    fn psql(&self) -> PathBuf {
        let beside = self.binary("psql");
        if beside.is_file() {
            beside
        } else {
            PathBuf::from("psql")
        }
    }
}

/// The `bin` of the highest version under `/usr/lib/postgresql` that has
/// initdb, comparing versions numerically (16 after 9.6).
fn newest_debian_bin() -> Option<PathBuf> {
    let entries = std::fs::read_dir(DEBIAN_ROOT).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version: Vec<u32> = name
                .split('.')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

/// The user the PostgreSQL programs run as.
#[derive(Clone, Copy)]
struct RunAs {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

/// `Some(postgres)` when we are root (initdb and postgres refuse to run as
/// root), `None` to run as ourselves. Panics if root has no postgres user.
fn run_as() -> Option<RunAs> {
    static RUN_AS: OnceLock<Option<RunAs>> = OnceLock::new();
    *RUN_AS.get_or_init(|| {
        // SAFETY: geteuid(2) takes nothing and always succeeds.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let user = lookup_user("postgres").unwrap_or_else(|| {
            panic!(
                "running as root, but there is no postgres user to run PostgreSQL as \
                 (initdb refuses root); apt-get install postgresql creates it"
            )
        });
        Some(user)
    })
}

/// The uid and gid of user `name`, through getpwnam_r (the reentrant
/// getpwnam: tests start servers from several threads at once).
fn lookup_user(name: &str) -> Option<RunAs> {
    let name = CString::new(name).ok()?;
    let mut buf: Vec<libc::c_char> = vec![0; 16 * 1024];
    // SAFETY: passwd is plain data (integers and pointers); all-zero is a
    // valid value that getpwnam_r overwrites.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local of the right type, and
    // `buf.len()` is the size of the buffer the strings go into.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some(RunAs {
        uid: entry.pw_uid,
        gid: entry.pw_gid,
    })
}

/// A free loopback port that is not the system cluster's.
fn pick_port() -> u16 {
    loop {
        let port = free_port();
        if port != SYSTEM_PORT {
            return port;
        }
    }
}

/// stdout of a program that succeeded, else its status and stderr.
fn check(program: &str, output: std::io::Result<Output>) -> Result<String, String> {
    let output = output.map_err(|err| format!("running {program}: {err}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        ))
    }
}

/// `text` in single quotes for /bin/sh.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The first line of `data/postmaster.pid`: the postmaster's PID.
fn read_postmaster_pid(data: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Whether two paths name the same directory (`/tmp` may be a link).
fn same_path(a: &Path, b: &Path) -> bool {
    a == b || matches!((canonical(a), canonical(b)), (Some(a), Some(b)) if a == b)
}

/// Whether process `pid` exists and is not a zombie (a postmaster killed
/// after pg_ctl exited is reparented, and its new parent may not reap it).
fn is_alive(pid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: comm may hold spaces, the state follows its `)`.
    let state = text
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// Whether process `pid` runs in `dir` or below (a postmaster and its
/// backends run in their data directory).
fn in_dir(pid: u32, dir: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
}

/// The live processes whose cwd is `dir` or below.
fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| in_dir(pid, dir) && is_alive(pid))
        .collect()
}

/// SIGKILL to `pid`, one of our server's processes; an error (it is gone) is ignored.
fn kill9(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}
