//! Which server implementation the harness runs (Redis or Valkey, from `$QUEUEGEN_SERVER`) and the server and CLI binaries of it.
//!
//! `QUEUEGEN_SERVER=valkey` runs `valkey-server` and `valkey-cli`; unset or
//! `redis` runs `redis-server` and `redis-cli`. `$REDIS_SERVER` and
//! `$REDIS_CLI` name exact binaries and win over that choice; a
//! `$REDIS_SERVER` ending in `-server` brings its sibling `-cli` along, so one
//! variable is enough to point the harness at another build.

use std::ffi::OsString;
use std::path::PathBuf;

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
/// `-cli` of a `$REDIS_SERVER` named `*-server`, else the selected
/// implementation's on PATH.
pub fn cli_binary() -> OsString {
    if let Some(cli) = std::env::var_os("REDIS_CLI").filter(|path| !path.is_empty()) {
        return cli;
    }
    if let Some(server) = std::env::var_os("REDIS_SERVER").filter(|path| !path.is_empty()) {
        let server = PathBuf::from(server);
        let sibling = server
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix("-server"))
            .map(|stem| server.with_file_name(format!("{stem}-cli")));
        if let Some(sibling) = sibling {
            return sibling.into_os_string();
        }
    }
    ServerKind::from_env().default_cli().into()
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
