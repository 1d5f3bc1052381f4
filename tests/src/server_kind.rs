//! Which server implementation the harness runs (Redis or Valkey, from `$QUEUEGEN_SERVER`) and the server and CLI binaries of it.
//!
//! `QUEUEGEN_SERVER=valkey` runs `valkey-server` and `valkey-cli`; unset or
//! `redis` runs `redis-server` and `redis-cli`. `$REDIS_SERVER` and
//! `$REDIS_CLI` name exact binaries and win over that choice; a
//! `$REDIS_SERVER` ending in `-server` brings its sibling `-cli` along (or,
//! where the build ships none, as the PyPI wheels do not, the `-cli` of that
//! name on PATH), so one variable is enough to point the harness at another
//! build.
//!
//! [`tls_support`] asks the server binary whether it was built with TLS (the
//! PyPI builds of Redis 8.2 and Valkey 9.1 were not): see
//! [`crate::tls::skip_without_tls`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A server implementation the tests run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    Redis,
    Valkey,
}

impl ServerKind {
    /// The implementation `$QUEUEGEN_SERVER` selects; Redis when unset.
    ///
    /// Panics on any other value, so a typo does not silently test Redis.
    pub fn from_env() -> ServerKind {
        match std::env::var("QUEUEGEN_SERVER") {
            Err(std::env::VarError::NotPresent) => ServerKind::Redis,
            Ok(name) if name.is_empty() || name == "redis" => ServerKind::Redis,
            Ok(name) if name == "valkey" => ServerKind::Valkey,
            Ok(other) => panic!("QUEUEGEN_SERVER={other:?}: expected `redis` or `valkey`"),
            Err(err) => panic!("QUEUEGEN_SERVER: {err}"),
        }
    }

    /// `redis` or `valkey`, as `$QUEUEGEN_SERVER` spells it.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Valkey => "valkey",
        }
    }

    fn default_server(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis-server",
            ServerKind::Valkey => "valkey-server",
        }
    }

    fn default_cli(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis-cli",
            ServerKind::Valkey => "valkey-cli",
        }
    }
}

/// The server binary: `$REDIS_SERVER`, else the selected implementation's on PATH.
pub fn server_binary() -> OsString {
    std::env::var_os("REDIS_SERVER")
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| ServerKind::from_env().default_server().into())
}

/// The CLI binary (for `--cluster create`): `$REDIS_CLI`, else the sibling
/// `-cli` of a `$REDIS_SERVER` named `*-server` where that file exists, else
/// the `-cli` of that name on PATH (`redis-cli` for a `.../redis-server`),
/// else the selected implementation's on PATH.
pub fn cli_binary() -> OsString {
    if let Some(cli) = std::env::var_os("REDIS_CLI").filter(|path| !path.is_empty()) {
        return cli;
    }
    if let Some(server) = std::env::var_os("REDIS_SERVER").filter(|path| !path.is_empty()) {
        let server = PathBuf::from(server);
        let stem = server
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix("-server"));
        if let Some(stem) = stem {
            let sibling = server.with_file_name(format!("{stem}-cli"));
            if sibling.is_file() {
                return sibling.into_os_string();
            }
            return format!("{stem}-cli").into();
        }
    }
    ServerKind::from_env().default_cli().into()
}

/// What the server binary's own log says when it has no TLS: Redis and Valkey
/// built without `BUILD_TLS` (or with TLS as a module that is not loaded).
const NO_TLS: &str = "Failed finding TLS support";

/// Whether [`server_binary`] can serve TLS, found by asking it (once per test
/// process): it is started with `--tls-port` and no certificate, on no plain
/// port, in a temporary directory. A build with TLS refuses for the missing
/// certificate (`No tls-cert-file configured`); one without says
/// "Failed finding TLS support". `Err` carries the binary and what it said.
pub fn tls_support() -> Result<(), String> {
    static ANSWER: OnceLock<Result<(), String>> = OnceLock::new();
    ANSWER.get_or_init(probe_tls).clone()
}

fn probe_tls() -> Result<(), String> {
    let binary = server_binary();
    let dir = tempfile::Builder::new()
        .prefix("queuegen-redis-tls-probe-")
        .tempdir()
        .map_err(|err| format!("tempdir: {err}"))?;
    let tls_port = crate::redis_server::free_port().to_string();
    let mut child = Command::new(&binary)
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--tls-port",
            &tls_port,
        ])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("spawning {binary:?}: {err}"))?;
    // Either build exits at once; one still running after this serves TLS
    // with some default certificate, and is stopped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let output = child
        .wait_with_output()
        .map_err(|err| format!("waiting for {binary:?}: {err}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match said.lines().find(|line| line.contains(NO_TLS)) {
        Some(line) => Err(format!(
            "{} says \"{}\"",
            binary.to_string_lossy(),
            line.split(" # ").last().unwrap_or(line).trim()
        )),
        None => Ok(()),
    }
}

/// What a running server says it is, from its `INFO server` text: e.g.
/// `redis 7.0.15` or `valkey 8.0.1` (Valkey also reports a `redis_version`,
/// the Redis version it is compatible with, which this skips).
pub fn describe(info_server: &str) -> String {
    let field = |name: &str| {
        info_server
            .lines()
            .find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
    };
    match field("server_name") {
        Some(name) => {
            let version = field(&format!("{name}_version")).unwrap_or("(no version)");
            format!("{name} {version}")
        }
        None => format!("redis {}", field("redis_version").unwrap_or("(no version)")),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn describe_names_valkey_by_its_own_version() {
        let redis = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(describe(redis), "redis 7.0.15");
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n";
        assert_eq!(describe(valkey), "valkey 8.0.1");
        assert_eq!(describe(""), "redis (no version)");
    }
}
