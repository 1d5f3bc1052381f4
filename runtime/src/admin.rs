//! Setting up a queue's Redis state, as `queuegen apply` does: the consumer group on every partition's stream, and the service's Function library.
//!
//! Operator code (the `operator` feature): a worker never loads a library or
//! creates groups; it only checks the library is there
//! ([`crate::functions::verify_library`]).

use std::time::Duration;

use crate::config::QueueConfig;
use crate::connect::{Node, Redis};
use crate::error::{Error, Result, SetupError};
use crate::lease;
use crate::stream_slot::StreamSlot;

/// The result of setting up one partition's group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSetup {
    pub key: String,
    pub group: String,
    /// `false` when the group already existed (it is left untouched).
    pub created: bool,
}

/// How long `ensure_groups` holds a partition's trim lease: one `XGROUP CREATE`.
const GROUP_LEASE_TTL: Duration = Duration::from_secs(10);
/// How long `ensure_groups` waits for a partition's trim lease: longer than
/// a trimmer's lease lasts, so even one left by a crashed trimmer expires first.
const GROUP_LEASE_WAIT: Duration = Duration::from_secs(31);

/// Creates the queue's consumer group on every partition stream (creating the
/// stream too), starting at `config.group_start`. Safe to run again: an
/// existing group is reported, never reset. Any error other than "group
/// already exists" (a key of the wrong type, missing permissions) stops here
/// and names the key and group.
///
/// Each partition's group is created under the partition's trim lease
/// (`{prefix}:{queue-NN}:lease:trim`, waiting while a trimmer holds it), so
/// a trim never plans with a group set that changes under it.
pub async fn ensure_groups(redis: &Redis, config: &QueueConfig) -> Result<Vec<GroupSetup>> {
    let mut conn = redis.shared();
    let holder = lease::unique_holder("apply");
    let mut setups = Vec::with_capacity(usize::from(config.streams()));
    // Every stream: each partition in each lane.
    for stream in StreamSlot::all(config.streams()) {
        let key = config.ready_key(stream);
        let lease = lease::acquire_waiting(
            &mut conn,
            &config.functions,
            &config.trim_lease_key(stream),
            &holder,
            GROUP_LEASE_TTL,
            GROUP_LEASE_WAIT,
        )
        .await?;
        let reply: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&key)
            .arg(&*config.group)
            .arg(&*config.group_start)
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        lease::release(&mut conn, &config.functions, &lease).await?;
        let created = match reply {
            Ok(()) => true,
            Err(err) if err.code() == Some("BUSYGROUP") => false,
            Err(err) => {
                return Err(Error::redis(
                    format!(
                        "XGROUP CREATE {key} {} {}",
                        config.group, config.group_start
                    ),
                    err,
                ))
            }
        };
        setups.push(GroupSetup {
            key,
            group: config.group.to_string(),
            created,
        });
    }
    Ok(setups)
}

/// What [`load_library`] did on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryLoad {
    /// The library name from the code's `#!lua name=...` line, e.g. `qg_docs_pipeline_v1`.
    pub library: String,
    /// `host:port` of the server it was loaded on.
    pub server: String,
    /// `true` when a library of that name (so of that version) was already
    /// loaded and has been replaced; `false` when it is new on this server.
    pub replaced: bool,
}

/// Loads a generated Function library (`functions.lua`) with
/// `FUNCTION LOAD REPLACE` on every primary (standalone: the one server; in
/// a Cluster each primary, since a library lives on the node that loaded it
/// and FCALL runs on the node owning its keys), one [`LibraryLoad`] each.
/// The library name carries its version, so REPLACE only ever replaces the
/// same version (an older or newer one stays loaded beside it during a
/// rolling deploy). Stops at the first primary that refuses, naming it; the
/// primaries before it keep the library, and running it again is safe.
pub async fn load_library(redis: &Redis, code: &str) -> Result<Vec<LibraryLoad>> {
    let library = library_name_of(code).ok_or_else(|| SetupError::NoLibraryName {
        first_line: code.lines().next().unwrap_or("").chars().take(80).collect(),
    })?;
    let mut loads = Vec::new();
    for node in redis.primaries().await? {
        loads.push(load_on(&node, &library, code).await?);
    }
    Ok(loads)
}

async fn load_on(node: &Node, library: &str, code: &str) -> Result<LibraryLoad> {
    let server = node.addr();
    let mut conn = node.connection().await?;
    let listed: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(library)
        .query_async(&mut conn)
        .await
        .map_err(|err| {
            Error::redis(
                format!("FUNCTION LIST LIBRARYNAME {library} on {server}"),
                err,
            )
        })?;
    let replaced = listed_library_names(&listed)
        .iter()
        .any(|name| name == library);
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(code)
        .query_async(&mut conn)
        .await
        .map_err(|err| Error::redis(format!("FUNCTION LOAD REPLACE {library} on {server}"), err))?;
    if loaded != library {
        return Err(SetupError::LibraryLoadedAs {
            server,
            loaded,
            library: library.to_owned(),
        }
        .into());
    }
    Ok(LibraryLoad {
        library: library.to_owned(),
        server,
        replaced,
    })
}

/// The library name of `#!lua name=<library>` on the code's first line.
fn library_name_of(code: &str) -> Option<String> {
    let first = code.lines().next()?;
    let rest = first.strip_prefix("#!lua")?;
    rest.split_whitespace()
        .find_map(|part| part.strip_prefix("name="))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
}

/// The `library_name` of every library in a `FUNCTION LIST` reply (RESP2 or RESP3).
fn listed_library_names(reply: &redis::Value) -> Vec<String> {
    use redis::Value;
    fn text(value: &Value) -> Option<String> {
        match value {
            Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            Value::SimpleString(text) => Some(text.clone()),
            _ => None,
        }
    }
    let Value::Array(libraries) = reply else {
        return Vec::new();
    };
    libraries
        .iter()
        .filter_map(|library| match library {
            Value::Array(items) => items
                .chunks(2)
                .find(|pair| text(&pair[0]).as_deref() == Some("library_name"))
                .and_then(|pair| pair.get(1).and_then(text)),
            Value::Map(pairs) => pairs
                .iter()
                .find(|(key, _)| text(key).as_deref() == Some("library_name"))
                .and_then(|(_, value)| text(value)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_come_from_the_first_line() {
        assert_eq!(
            library_name_of("#!lua name=qg_docs_pipeline_v1\n-- x\n").as_deref(),
            Some("qg_docs_pipeline_v1")
        );
        assert_eq!(library_name_of("#!lua name=\n"), None);
        assert_eq!(library_name_of("-- no shebang\n#!lua name=x\n"), None);
        assert_eq!(library_name_of(""), None);
    }

    #[test]
    fn function_list_replies_name_their_libraries() {
        use redis::Value;
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![Value::Array(vec![
            bulk("library_name"),
            bulk("qg_a_v1"),
            bulk("engine"),
            bulk("LUA"),
        ])]);
        assert_eq!(listed_library_names(&resp2), ["qg_a_v1"]);
        let resp3 = Value::Array(vec![Value::Map(vec![(
            bulk("library_name"),
            bulk("qg_a_v2"),
        )])]);
        assert_eq!(listed_library_names(&resp3), ["qg_a_v2"]);
        assert!(listed_library_names(&Value::Array(vec![])).is_empty());
    }
}
