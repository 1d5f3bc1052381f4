//! The Cluster intake's wake-up: waits for new entries across partitions that live in different slots.
//!
//! On a standalone server the intake blocks on every partition at once with
//! one `XREADGROUP ... BLOCK`. On a Cluster that read would span slots and be
//! refused (CROSSSLOT), and a blocking read per partition would each need
//! permits to hold while it waits. So here each partition gets a watcher with
//! a connection of its own that delivers nothing (one socket, straight to the
//! partition's primary: a routed Cluster connection would open one to every
//! node, per partition and worker; after `MOVED` or a lost node the watcher
//! finds the slot's primary again): when the intake found every
//! partition empty it arms the watchers, each asks the group how far it has
//! delivered (`XINFO GROUPS`) and blocks in `XREAD` for an entry past that
//! point. The first to see one wakes the intake, which then reads with
//! `XREADGROUP` as usual, permits first. `XREAD` has no side effect, so a
//! watcher left blocked (or dropped) costs nothing but its connection.
//!
//! A watcher whose `XREAD` saw nothing re-arms from the same ID without
//! asking the group again: nothing was added past it meanwhile, so the group
//! cannot have delivered past it either. An idle intake then costs one
//! blocking `XREAD` per partition and block period, and nothing more.

use std::sync::Arc;
use std::time::Duration;

use redis::streams::StreamInfoGroupsReply;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

use crate::connect::{Connection, Redis};
use crate::error::{Error, Result};

/// How long a watcher waits after an error before it re-arms.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

/// The watchers of one intake loop; dropping it stops them.
pub(super) struct Wakers {
    armed: watch::Sender<u64>,
    woken: Arc<Notify>,
    _watchers: JoinSet<()>,
}

impl Wakers {
    /// Starts one watcher per stream of `group`, idle until [`Wakers::wait`] arms them.
    pub(super) fn start(redis: &Redis, group: &str, keys: &[String], block: Duration) -> Wakers {
        let (armed, _) = watch::channel(0u64);
        let woken = Arc::new(Notify::new());
        let mut watchers = JoinSet::new();
        for key in keys {
            let watcher = Watcher {
                redis: redis.clone(),
                group: group.to_owned(),
                key: key.clone(),
                block,
                armed: armed.subscribe(),
                woken: woken.clone(),
            };
            watchers.spawn(watcher.run());
        }
        Wakers {
            armed,
            woken,
            _watchers: watchers,
        }
    }

    /// Arms every watcher and returns `true` when one has seen an
    /// undelivered entry (or failed: the intake's read then says why),
    /// `false` after `block` without one. A wake-up can be stale (another
    /// consumer took the entry first): the intake's next read finds nothing.
    pub(super) async fn wait(&self, block: Duration) -> bool {
        self.armed.send_modify(|generation| *generation += 1);
        tokio::select! {
            () = self.woken.notified() => true,
            () = tokio::time::sleep(block) => false,
        }
    }
}

/// Watches one partition's stream for entries its group has not delivered.
struct Watcher {
    redis: Redis,
    group: String,
    key: String,
    block: Duration,
    armed: watch::Receiver<u64>,
    woken: Arc<Notify>,
}

impl Watcher {
    async fn run(mut self) {
        let mut conn: Option<Connection> = None;
        // The ID the last `XREAD` waited past and found nothing after.
        let mut quiet_since: Option<String> = None;
        // Ends when the intake drops its `Wakers`.
        while self.armed.changed().await.is_ok() {
            let reader = match conn.as_mut() {
                Some(reader) => reader,
                None => match self
                    .redis
                    .key_reader_connection(&self.key, self.block)
                    .await
                {
                    Ok(reader) => conn.insert(reader),
                    Err(err) => {
                        self.failed(&err).await;
                        continue;
                    }
                },
            };
            match self.watch_once(reader, quiet_since.take()).await {
                Ok(None) => self.woken.notify_one(),
                // Nothing within the block time: the intake's own wait ends too.
                Ok(Some(since)) => quiet_since = Some(since),
                Err(err) => {
                    conn = None;
                    self.failed(&err).await;
                }
            }
        }
    }

    /// Waits up to the block time for an entry past the group's last
    /// delivered one (`since`, when the last wait already knew it): `None`
    /// when one is there, else the ID it waited past.
    async fn watch_once(
        &self,
        conn: &mut Connection,
        since: Option<String>,
    ) -> Result<Option<String>> {
        let since = match since {
            Some(since) => since,
            None => {
                let groups: StreamInfoGroupsReply = redis::cmd("XINFO")
                    .arg("GROUPS")
                    .arg(&self.key)
                    .query_async(conn)
                    .await
                    .map_err(|err| Error::redis(format!("XINFO GROUPS {}", self.key), err))?;
                let group = groups
                    .groups
                    .into_iter()
                    .find(|group| group.name == self.group);
                match group {
                    Some(group) => group.last_delivered_id,
                    // The intake's own read names the missing group and stops.
                    None => return Ok(None),
                }
            }
        };
        let reply: redis::Value = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(1)
            .arg("BLOCK")
            .arg(self.block.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(&since)
            .query_async(conn)
            .await
            .map_err(|err| Error::redis(format!("XREAD BLOCK on {}", self.key), err))?;
        Ok(matches!(reply, redis::Value::Nil).then_some(since))
    }

    /// Wakes the intake, whose own read reports what is wrong, then pauses.
    async fn failed(&self, err: &Error) {
        tracing::debug!(key = %self.key, error = %err, "intake watcher failed; the intake reads to find out");
        self.woken.notify_one();
        tokio::time::sleep(ERROR_PAUSE).await;
    }
}
