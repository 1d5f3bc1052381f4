//! Checks a worker makes before it reads anything: that the server never evicts queue data.

use crate::connect::{Node, Redis};
use crate::error::SetupError;
use crate::error::{Error, Result};

/// The only policy under which Redis never deletes keys to free memory.
const NOEVICTION: &str = "noeviction";

/// Refuses (unless `allow`, which warns) a deployment where any primary's
/// `maxmemory-policy` is not `noeviction`: under memory pressure it would
/// delete keys, stream entries of pending jobs and retry sets included,
/// breaking the delivery contract silently. Reads `INFO memory` on every
/// primary, which a least-privilege ACL user may run (`CONFIG GET` is not
/// needed).
pub(super) async fn eviction_policy(redis: &Redis, allow: bool) -> Result<()> {
    for node in redis.primaries().await? {
        eviction_policy_of(&node, allow).await?;
    }
    Ok(())
}

async fn eviction_policy_of(node: &Node, allow: bool) -> Result<()> {
    let server = node.addr();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut node.connection().await?)
        .await
        .map_err(|err| {
            Error::redis(
                format!(
                    "INFO memory on {server}, to check maxmemory-policy (the user needs +info)"
                ),
                err,
            )
        })?;
    let policy = maxmemory_policy(&info)
        .unwrap_or("(not reported by INFO memory)")
        .to_owned();
    if policy == NOEVICTION {
        return Ok(());
    }
    if allow {
        tracing::warn!(
            server,
            maxmemory_policy = %policy,
            "redis may evict keys (maxmemory-policy is not noeviction), and with them jobs; starting anyway because allow_eviction_policy was set",
        );
        return Ok(());
    }
    Err(Error::Setup(SetupError::EvictionPolicy { server, policy }))
}

/// The `maxmemory_policy` value of an `INFO` reply.
fn maxmemory_policy(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.trim_end().strip_prefix("maxmemory_policy:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_read_from_info_memory() {
        let info = "# Memory\r\nused_memory:1000\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\nallocator_frag_ratio:1.0\r\n";
        assert_eq!(maxmemory_policy(info), Some("allkeys-lru"));
        assert_eq!(maxmemory_policy("# Memory\r\nused_memory:1\r\n"), None);
    }
}
