//! Setting up a queue's Redis state: the consumer group on every partition's stream.

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::redis::Redis;

/// The result of setting up one partition's group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSetup {
    pub key: String,
    pub group: String,
    /// `false` when the group already existed (it is left untouched).
    pub created: bool,
}

/// Creates the queue's consumer group on every partition stream (creating the
/// stream too), starting at `config.group_start`. Safe to run again: an
/// existing group is reported, never reset. Any error other than "group
/// already exists" (a key of the wrong type, missing permissions) stops here
/// and names the key and group.
pub async fn ensure_groups(redis: &Redis, config: &QueueConfig) -> Result<Vec<GroupSetup>> {
    let mut conn = redis.shared();
    let mut setups = Vec::with_capacity(usize::from(config.partitions));
    for key in config.ready_keys() {
        let reply: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&key)
            .arg(config.group)
            .arg(config.group_start)
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
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
            group: config.group.to_owned(),
            created,
        });
    }
    Ok(setups)
}
