//! Which of the worker's partitions are paused (`queuegen pause`), learnt from the queue's pause channel so the intake pays no round trip for it and an idle worker sends nothing.
//!
//! A partition is paused while its flag key (`{prefix}:{queue-NN}:paused`,
//! `ops::pause`) exists. The intake must stop reading new entries of a
//! paused partition within about one read block, without asking Redis
//! before every read, and without polling: a poll of every flag by every
//! worker made an idle fleet cost O(workers × partitions) commands. So
//! `queuegen pause` and `resume` `PUBLISH` to the queue's channel
//! (`QueueConfig::pause_channel`) after changing flags, and this loop:
//! subscribes (a Pub/Sub connection of its own, `Redis::subscriber`, with
//! the worker's TLS and ACL user), then reads every flag once (`EXISTS` of
//! each of the worker's partitions' flags, one pipeline on the core
//! connection, split per slot on a Cluster), then reads them again only
//! when a message arrives (a burst of messages is one read). The intake
//! consults the answer in memory. A pause is noticed one round trip after
//! the `PUBLISH`; a blocking read sent just before may still deliver for up
//! to one block, so new deliveries of a paused partition stop within one
//! read block (1 s by default) plus a few round trips.
//!
//! The subscriber sends no periodic `PING` (its cost would grow with the
//! fleet): TCP keepalive ends a connection to a dead host within about a
//! minute, and a closed connection ends the message stream at once. On any
//! loss the loop subscribes again (retrying every 0.1 s, doubling to 1 s)
//! and re-reads every flag, so a change made while it was cut off is seen
//! once it is back. A flag set or deleted by hand without a `PUBLISH` is
//! noticed only then (docs/operations/flow-control.md says how to publish).
//! A server that refuses the worker's user the channel (`NOPERM`: a users
//! file generated before it) gets an error logged and, meanwhile, the old
//! poll of every flag each quarter read block, trying to subscribe again
//! every minute: pausing keeps working during such an upgrade.
//!
//! Only the intake looks at the flags: recovery (claims of idle entries),
//! acks, retries, dead letters and the trimmer carry on, so nothing a paused
//! partition already delivered stalls. When a read fails the last answer
//! stands (a flag is not dropped because Redis did not answer) and the loop
//! reads again; before the first answer every partition counts as not
//! paused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio::sync::Notify;

use super::events::Events;
use super::Core;
use crate::config::QueueConfig;
use crate::connect::Connection;
use crate::stream_slot::StreamSlot;

/// First wait before subscribing again after a failed (re)subscribe or
/// read; doubled on each failure in a row up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest wait between two attempts: how late a pause made during an
/// outage is noticed after the server is back, at most.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// While the server refuses the subscription (`NOPERM`: a users file from
/// before the pause channel), how long the loop polls the flags before it
/// tries to subscribe again.
const POLL_WHILE_REFUSED: Duration = Duration::from_secs(60);
/// Shortest poll period while refused, whatever the read block.
const MIN_POLL: Duration = Duration::from_millis(5);

/// The pause state of every partition of the queue, as last read.
pub(super) struct Paused {
    flags: Vec<AtomicBool>,
    /// Raised by every change of any flag.
    generation: AtomicU64,
    changed: Notify,
}

impl Paused {
    pub(super) fn new(streams: u16) -> Paused {
        Paused {
            flags: (0..streams).map(|_| AtomicBool::new(false)).collect(),
            generation: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    /// Whether `stream` is paused, as last read.
    pub(super) fn is_paused(&self, stream: StreamSlot) -> bool {
        self.flags
            .get(usize::from(stream.index()))
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// Counts changes: the intake compares it to see whether its set of
    /// readable partitions changed.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Waits for the next change, or `timeout`, whichever comes first.
    pub(super) async fn changed_within(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.changed.notified()).await;
    }

    /// Records a partition's flag as read; `true` if it changed.
    fn set(&self, stream: StreamSlot, paused: bool) -> bool {
        let Some(flag) = self.flags.get(usize::from(stream.index())) else {
            return false;
        };
        if flag.swap(paused, Ordering::Relaxed) == paused {
            return false;
        }
        self.generation.fetch_add(1, Ordering::Release);
        self.changed.notify_waiters();
        true
    }
}

/// Reads the flags of `streams` once (one pipeline) and records them;
/// logs each change. A failed read changes nothing.
pub(super) async fn refresh(
    conn: &mut Connection,
    config: &QueueConfig,
    streams: &[StreamSlot],
    paused: &Paused,
    events: &Events,
) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    for &stream in streams {
        // Every lane of a partition reads the partition's one flag.
        pipe.cmd("EXISTS")
            .arg(config.paused_key(config.partition_of_stream(stream)));
    }
    let flags: Vec<u8> = pipe.query_async(conn).await?;
    for (&stream, flag) in streams.iter().zip(flags) {
        let now = flag != 0;
        events.intake_paused(stream, now);
        if paused.set(stream, now) {
            if now {
                tracing::info!(
                    queue = &*config.queue,
                    partition = stream.index(),
                    key = %config.paused_key(config.partition_of_stream(stream)),
                    "partition paused: reading no new entries of it (recovery carries on)"
                );
            } else {
                tracing::info!(
                    queue = &*config.queue,
                    partition = stream.index(),
                    "partition resumed: reading new entries again"
                );
            }
        }
    }
    Ok(())
}

/// Subscribes to the queue's pause channel, reads every flag, then reads
/// them again whenever a message arrives, until the stop flag is raised. A
/// lost subscription (the stream of messages ends) is made again, and the
/// flags read again after it: a change made while it was gone is seen.
pub(super) async fn run(
    core: Arc<Core>,
    streams: Vec<StreamSlot>,
    block: Duration,
) -> crate::error::Result<()> {
    let channel = core.config.pause_channel();
    let mut conn = core.multiplexed.clone();
    let mut retry = RETRY_MIN;
    // Warn once per outage, not at every attempt.
    let mut failing = false;
    // A subscription was lost before: say so when one is back.
    let mut lost = false;
    loop {
        let subscribed = core.stop.unless_raised(subscribe(&core, &channel)).await;
        let Some(subscribed) = subscribed else {
            return Ok(());
        };
        let mut pubsub = match subscribed {
            Ok(pubsub) => pubsub,
            Err(err) if refused(&err) => {
                tracing::error!(error = %err, channel, "the server refuses this worker's user the pause channel: regenerate and load the users file (`queuegen generate --deploy-out`, `queuegen acl render`; the worker role needs `&<prefix>:*:paused`); polling the pause flags every quarter read block meanwhile");
                if !poll(&core, &mut conn, &streams, block).await {
                    return Ok(());
                }
                continue;
            }
            Err(err) => {
                if !failing {
                    tracing::warn!(error = %err, channel, "subscribing to the pause channel failed; keeping the last known pause state and trying again");
                }
                failing = true;
                if core
                    .stop
                    .unless_raised(tokio::time::sleep(retry))
                    .await
                    .is_none()
                {
                    return Ok(());
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        if failing || lost {
            tracing::info!(
                channel,
                "subscribed to the pause channel again; re-reading the pause flags"
            );
        }
        failing = false;
        retry = RETRY_MIN;
        let mut messages = pubsub.on_message();
        // Read once now (subscribed first, so a change after this read
        // arrives as a message), then once per burst of messages.
        let mut unread = true;
        loop {
            if unread {
                match refresh(
                    &mut conn,
                    &core.config,
                    &streams,
                    &core.paused,
                    &core.events,
                )
                .await
                {
                    Ok(()) => {
                        unread = false;
                        failing = false;
                        retry = RETRY_MIN;
                    }
                    Err(err) => {
                        if !failing {
                            tracing::warn!(error = %err, "reading the pause flags failed; keeping the last known state and reading again");
                        }
                        failing = true;
                    }
                }
            }
            // While a read is owed, wake to try again; else only on a message.
            let wait = async {
                match unread {
                    true => tokio::time::timeout(retry, messages.next()).await.ok(),
                    false => Some(messages.next().await),
                }
            };
            match core.stop.unless_raised(wait).await {
                None => return Ok(()),
                // The retry delay passed with no message: read again.
                Some(None) => retry = (retry * 2).min(RETRY_MAX),
                Some(Some(Some(_message))) => {
                    // Coalesce a burst (one message per `queuegen pause`).
                    while let Some(Some(_)) = messages.next().now_or_never() {}
                    unread = true;
                }
                Some(Some(None)) => {
                    tracing::info!(
                        channel,
                        "the pause channel's connection closed; subscribing again"
                    );
                    lost = true;
                    break;
                }
            }
        }
    }
}

/// Whether `err` is the server refusing the user the channel (`NOPERM`).
fn refused(err: &crate::error::Error) -> bool {
    matches!(err, crate::error::Error::Redis(redis) if redis.source.code() == Some("NOPERM"))
}

/// Polls the flags every quarter read block for [`POLL_WHILE_REFUSED`], as
/// workers did before the pause channel, so that a pause is still noticed
/// (within 1.25 read blocks) until the users file allows the subscription;
/// `false` once the stop flag is raised.
async fn poll(
    core: &Core,
    conn: &mut crate::connect::Connection,
    streams: &[StreamSlot],
    block: Duration,
) -> bool {
    let until = tokio::time::Instant::now() + POLL_WHILE_REFUSED;
    let mut ticker = super::every((block / 4).max(MIN_POLL));
    while tokio::time::Instant::now() < until {
        if core.stop.unless_raised(ticker.tick()).await.is_none() {
            return false;
        }
        // A failed read keeps the last state; the next tick reads again.
        let _ = refresh(conn, &core.config, streams, &core.paused, &core.events).await;
    }
    true
}

/// A subscriber connection subscribed to `channel`.
async fn subscribe(core: &Core, channel: &str) -> crate::error::Result<redis::aio::PubSub> {
    let mut pubsub = core.redis.subscriber().await?;
    pubsub
        .subscribe(channel)
        .await
        .map_err(|err| crate::error::Error::redis(format!("SUBSCRIBE {channel}"), err))?;
    Ok(pubsub)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_raise_the_generation_once() {
        let paused = Paused::new(4);
        assert!(!paused.is_paused(StreamSlot::new(2)));
        assert!(paused.set(StreamSlot::new(2), true));
        assert!(!paused.set(StreamSlot::new(2), true));
        assert!(paused.is_paused(StreamSlot::new(2)));
        assert_eq!(paused.generation(), 1);
        assert!(paused.set(StreamSlot::new(2), false));
        assert_eq!(paused.generation(), 2);
        assert!(!paused.is_paused(StreamSlot::new(9)));
    }
}
