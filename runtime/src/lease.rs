//! A partition's lease: one holder at a time for work that must not overlap
//! on a partition (trimming it, creating its groups), or that one worker is
//! enough for (its recovery and promotion loops, see `worker::leadership`).
//!
//! `SET <key> <holder> NX PX <ttl>` (the library's `lease_acquire`) takes it. Only its holder releases it,
//! with a compare-and-delete (the library's `lease_release`), so a holder
//! whose lease expired never deletes the next holder's; a holder that dies
//! leaves it to expire. A lease alone is no fence (a paused holder may wake
//! after its lease ran out): the trim function re-checks the lease in the
//! same atomic call that removes entries.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;

use crate::error::{Error, OperationError, Result};
use crate::functions::{self, is_function_not_found, Function, LeaseAcquire, LeaseRelease};

/// How long [`acquire_waiting`] sleeps between two attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(25);

/// A lease this process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    key: String,
    holder: String,
}

impl Lease {
    /// The lease key, e.g. `work:{ocr-03}:lease:trim`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Who holds it: the value stored under the key.
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }
}

/// A holder name unique to this process: `{role}:{host}-{pid}-{random hex}`,
/// so [`OperationError::LeaseHeld`] says which host and process holds a lease.
pub fn unique_holder(role: &str) -> String {
    format!(
        "{role}:{}-{}-{:08x}",
        crate::host::hostname(),
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Takes the lease `key` for `holder` for `ttl` (at least 1 ms), or fails
/// with [`OperationError::LeaseHeld`] naming whoever holds it.
///
/// It goes through the library `functions`' `lease_acquire`, which runs past
/// maxmemory (a full server is when trimming is needed most); on a server
/// without the library yet (being set up by `ensure_groups` before `apply`
/// loads it) it sends the same `SET NX PX` itself.
pub async fn acquire<C: ConnectionLike>(
    conn: &mut C,
    functions: &str,
    key: &str,
    holder: &str,
    ttl: Duration,
) -> Result<Lease> {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
    let function = Function::LeaseAcquire.in_library(functions);
    let call = LeaseAcquire {
        lease_key: key,
        holder,
        ttl_ms,
    };
    let reply: redis::RedisResult<(i64, Option<String>)> =
        functions::command(&function, &call).query_async(conn).await;
    let (taken, current) = match reply {
        Err(err) if is_function_not_found(&err) => set_nx(conn, key, holder, ttl_ms).await?,
        other => other.map_err(|err| Error::redis(format!("FCALL {function} {key}"), err))?,
    };
    if taken == 1 {
        return Ok(Lease {
            key: key.to_owned(),
            holder: holder.to_owned(),
        });
    }
    Err(Error::Operation(OperationError::LeaseHeld {
        key: key.to_owned(),
        // Expired between the SET and the GET: the next attempt may win.
        holder: current.unwrap_or_else(|| "(just released)".to_owned()),
    }))
}

/// `SET key holder NX PX ttl_ms`, then `GET key` in one pipeline: (1, holder)
/// when taken, (0, current holder) when not, as `lease_acquire` answers.
async fn set_nx<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    holder: &str,
    ttl_ms: u64,
) -> Result<(i64, Option<String>)> {
    let (set, current): (Value, Option<String>) = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(holder)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("SET {key} NX PX {ttl_ms}"), err))?;
    let taken = match set {
        Value::Okay => true,
        Value::SimpleString(ref ok) => ok == "OK",
        _ => false,
    };
    Ok((i64::from(taken), current))
}

/// Like [`acquire`], but while someone else holds the lease, tries again
/// every 25 ms for up to `wait`; then [`OperationError::LeaseHeld`].
pub(crate) async fn acquire_waiting<C: ConnectionLike>(
    conn: &mut C,
    functions: &str,
    key: &str,
    holder: &str,
    ttl: Duration,
    wait: Duration,
) -> Result<Lease> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match acquire(conn, functions, key, holder, ttl).await {
            Err(Error::Operation(OperationError::LeaseHeld { .. }))
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// Releases `lease` if its holder still holds it (compare-and-delete by the
/// library `functions`, e.g. `qg_docs_pipeline_v14`); `false` when it had
/// expired and nobody, or someone else, holds it now.
pub async fn release<C: ConnectionLike>(
    conn: &mut C,
    functions: &str,
    lease: &Lease,
) -> Result<bool> {
    let function = Function::LeaseRelease.in_library(functions);
    let call = LeaseRelease {
        lease_key: &lease.key,
        holder: &lease.holder,
    };
    let reply: redis::RedisResult<i64> =
        functions::command(&function, &call).query_async(conn).await;
    let released = match reply {
        // A server being set up before `apply` loads the library (the lease
        // was taken with `SET NX PX`): no compare-and-delete without a
        // script, and no role may send scripts of its own (roles.rs), so the
        // lease is left to expire with its TTL.
        Err(err) if is_function_not_found(&err) => 0,
        other => {
            other.map_err(|err| Error::redis(format!("FCALL {function} {}", lease.key), err))?
        }
    };
    Ok(released == 1)
}

/// Extends `lease` to `ttl` from now if its holder still holds it: `GET`
/// and `PEXPIRE` in one `MULTI`, `true` when the `GET` named the holder.
///
/// The `PEXPIRE` does not compare: when the lease expired and another holder
/// took it in between, this extends theirs (by at most `ttl` from now) and
/// answers `false`. That only delays a takeover should that holder die, and
/// it keeps renewal to commands a worker's ACL user already has but one.
pub(crate) async fn renew<C: ConnectionLike>(
    conn: &mut C,
    lease: &Lease,
    ttl: Duration,
) -> Result<bool> {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
    let (current, _extended): (Option<String>, i64) = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg(&lease.key)
        .cmd("PEXPIRE")
        .arg(&lease.key)
        .arg(ttl_ms)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("PEXPIRE {} {ttl_ms}", lease.key), err))?;
    Ok(current.as_deref() == Some(lease.holder.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_name_the_role_and_the_process_and_differ() {
        let a = unique_holder("trim");
        let b = unique_holder("trim");
        assert_ne!(a, b);
        assert!(a.starts_with("trim:"), "{a}");
        assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
        assert!(!a.contains(char::is_whitespace), "{a}");
    }
}
