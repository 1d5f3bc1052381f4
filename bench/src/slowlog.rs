//! The server's slowlog as a per-command profile: every command logged, each `FCALL` named by its Function, with the commands it ran inside.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

/// The slowlog's settings before [`record_everything`], to put back.
pub struct Previous {
    slower_than: String,
    max_len: String,
}

/// Makes the slowlog record every command (and keep them all), emptied;
/// returns the settings it had.
pub async fn record_everything<C: redis::aio::ConnectionLike>(conn: &mut C) -> Result<Previous> {
    let (slower_than, max_len): (Vec<String>, Vec<String>) = redis::pipe()
        .cmd("CONFIG")
        .arg(&["GET", "slowlog-log-slower-than"])
        .cmd("CONFIG")
        .arg(&["GET", "slowlog-max-len"])
        .query_async(conn)
        .await
        .context("CONFIG GET slowlog-log-slower-than / slowlog-max-len")?;
    let value = |reply: Vec<String>| reply.into_iter().nth(1).unwrap_or_default();
    let previous = Previous {
        slower_than: value(slower_than),
        max_len: value(max_len),
    };
    set(conn, "0", "10000000").await?;
    Ok(previous)
}

/// Puts the slowlog's settings back, emptying it.
pub async fn restore<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    previous: &Previous,
) -> Result<()> {
    set(conn, &previous.slower_than, &previous.max_len).await
}

async fn set<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    slower_than: &str,
    max_len: &str,
) -> Result<()> {
    redis::pipe()
        .cmd("CONFIG")
        .arg(&["SET", "slowlog-log-slower-than", slower_than])
        .ignore()
        .cmd("CONFIG")
        .arg(&["SET", "slowlog-max-len", max_len])
        .ignore()
        .cmd("SLOWLOG")
        .arg("RESET")
        .ignore()
        .query_async::<()>(conn)
        .await
        .context("CONFIG SET slowlog-log-slower-than / slowlog-max-len, SLOWLOG RESET")
}

/// One command's slowlog entries: calls and µs, and for an `FCALL`, the
/// commands its Function ran (logged just before it) and their µs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlowUsage {
    pub calls: u64,
    pub usec: u64,
    pub inner_calls: u64,
    pub inner_usec: u64,
}

/// Every entry of the slowlog, by command (an `FCALL` by its Function,
/// the library's prefix left out; a command a Function ran as `in fcall:
/// <command>`, and again within its `FCALL`'s figures).
pub async fn read_slowlog<C: redis::aio::ConnectionLike>(
    conn: &mut C,
) -> Result<BTreeMap<String, SlowUsage>> {
    let mut entries: Vec<(i64, i64, Vec<String>, bool)> = Vec::new();
    let reply: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await
        .context("SLOWLOG GET -1")?;
    for entry in reply {
        let redis::Value::Array(parts) = entry else {
            continue;
        };
        let (Some(redis::Value::Int(id)), Some(redis::Value::Int(usec))) =
            (parts.first(), parts.get(2))
        else {
            continue;
        };
        let Some(redis::Value::Array(argv)) = parts.get(3) else {
            continue;
        };
        let argv: Vec<String> = argv
            .iter()
            .take(2)
            .map(|arg| match arg {
                redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).to_lowercase(),
                _ => String::new(),
            })
            .collect();
        // A command a script runs is logged with the client `?:0`.
        let inner = matches!(parts.get(4), Some(redis::Value::BulkString(addr)) if addr == b"?:0");
        entries.push((*id, *usec, argv, inner));
    }
    // Newest first in the reply; a Function's commands end before it does.
    entries.sort_by_key(|entry| entry.0);
    let mut by_command: BTreeMap<String, SlowUsage> = BTreeMap::new();
    let (mut inner_calls, mut inner_usec) = (0, 0);
    for (_, usec, argv, inner) in entries {
        let usec = u64::try_from(usec).unwrap_or(0);
        let command = argv.first().cloned().unwrap_or_default();
        let name = match command.as_str() {
            "config" | "slowlog" => continue,
            _ if inner => {
                inner_calls += 1;
                inner_usec += usec;
                format!("in fcall: {command}")
            }
            "fcall" | "fcall_ro" => {
                let function = argv.get(1).cloned().unwrap_or_default();
                format!("fcall {}", short_function(&function))
            }
            _ => command,
        };
        let used = by_command.entry(name).or_default();
        used.calls += 1;
        used.usec += usec;
        if !inner {
            used.inner_calls += std::mem::take(&mut inner_calls);
            used.inner_usec += std::mem::take(&mut inner_usec);
        }
    }
    Ok(by_command)
}

/// `qg_<service>_v<N>_<name>` → `<name>` (the last `_v<digits>_`: a
/// service name may hold one too).
fn short_function(function: &str) -> &str {
    function
        .rmatch_indices("_v")
        .find_map(|(at, _)| {
            let rest = &function[at + 2..];
            let digits = rest.find('_')?;
            rest[..digits]
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| &rest[digits + 1..])
        })
        .unwrap_or(function)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fcall_is_named_by_its_function_without_the_library() {
        assert_eq!(
            short_function("qg_queuegen_tests_v14_run_settle"),
            "run_settle"
        );
        assert_eq!(
            short_function("qg_docs_v2_pipeline_v3_publish_once"),
            "publish_once"
        );
        assert_eq!(short_function("my_function"), "my_function");
    }
}
