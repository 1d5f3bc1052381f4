//! Producer admission control: refuse to publish to a partition whose oldest
//! undelivered entry, for its slowest group, is older than
//! `admission.max_oldest_ready_age`.
//!
//! Each partition's oldest undelivered entry is read with the stream
//! inventory ([`crate::inventory`]) and cached; a cached reading is
//! trusted for `admission.refresh`, so between refreshes a publish costs a
//! clock read and a short uncontended lock, never a round trip. Its age keeps
//! growing from the reading by the monotonic clock: an entry still undelivered
//! gets older whether or not we look. A partition's reading is refreshed by
//! one task at a time; publishes that find it stale meanwhile wait for that
//! one round instead of sending their own.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::connect::Connection;

use crate::config::QueueConfig;
use crate::error::{Error, PublishError, Result};
use crate::host::now_ms;
use crate::inventory::inventory;
use crate::stream_id::StreamId;
use crate::stream_slot::StreamSlot;

/// The admission state of one queue, shared by every clone of its producer.
pub(crate) struct Admission {
    /// The queue's settings: its name, and which lane and partition each stream is.
    config: QueueConfig,
    limit: Duration,
    refresh: Duration,
    ready_keys: Arc<[String]>,
    /// One gate per stream (a lane's partition), by stream number.
    gates: Box<[Gate]>,
}

/// What one partition's last reading said, and the lock that serialises re-reading it.
#[derive(Default)]
struct Gate {
    /// Held only to copy or replace the reading, never across an await.
    reading: Mutex<Option<Reading>>,
    /// Held while this partition is re-read, so concurrent publishes that find
    /// the reading stale cost one inventory round, not one each.
    refreshing: tokio::sync::Mutex<()>,
}

/// One inventory of a partition's ready stream, as admission needs it.
#[derive(Debug, Clone)]
struct Reading {
    /// When the inventory answered.
    at: Instant,
    /// The oldest entry some group has not been delivered yet; `None` when
    /// every group is caught up (or the stream or its groups do not exist).
    oldest: Option<Oldest>,
    /// Whether a refusal based on this reading was already logged at `warn`:
    /// a producer that keeps retrying gets one warning per refresh, not one per try.
    warned: bool,
}

#[derive(Debug, Clone)]
struct Oldest {
    id: StreamId,
    /// The slowest group: the one this entry has not been delivered to.
    group: Arc<str>,
    /// The entry's age when the inventory answered (by its ID's time).
    age_at_reading: Duration,
}

impl Reading {
    fn is_fresh(&self, now: Instant, refresh: Duration) -> bool {
        now.saturating_duration_since(self.at) < refresh
    }

    /// The oldest undelivered entry's age at `now`, if there is one.
    fn age(&self, now: Instant) -> Option<Duration> {
        self.oldest
            .as_ref()
            .map(|oldest| oldest.age_at_reading + now.saturating_duration_since(self.at))
    }
}

impl Admission {
    /// What tells one queue's admission settings apart, as the name of its
    /// shared state on the `Redis` handle: the first ready key (prefix and
    /// queue), the stream count, the limit and the refresh period.
    pub(crate) fn name(config: &QueueConfig, limit: Duration) -> String {
        format!(
            "admission {} {} {limit:?} {:?}",
            config.ready_key(StreamSlot::new(0)),
            config.streams(),
            config.admission.refresh
        )
    }

    pub(crate) fn new(
        config: &QueueConfig,
        limit: Duration,
        ready_keys: Arc<[String]>,
    ) -> Admission {
        let gates = ready_keys.iter().map(|_| Gate::default()).collect();
        Admission {
            config: config.clone(),
            limit,
            refresh: config.admission.refresh,
            ready_keys,
            gates,
        }
    }

    /// Admits a publish to `stream`, or refuses it with `PublishError::Backpressure`.
    pub(super) async fn admit(&self, conn: &Connection, stream: StreamSlot) -> Result<()> {
        self.admit_all(conn, &[stream]).await
    }

    /// Admits a batch touching `streams` (ascending, no duplicates), or
    /// refuses all of it with `PublishError::Backpressure` naming the lowest refused
    /// stream. Stale readings of these streams are refreshed together
    /// in one inventory round.
    pub(super) async fn admit_all(&self, conn: &Connection, streams: &[StreamSlot]) -> Result<()> {
        debug_assert!(streams.windows(2).all(|pair| pair[0] < pair[1]));
        let now = Instant::now();
        let stale: Vec<StreamSlot> = streams
            .iter()
            .copied()
            .filter(|&stream| !self.is_fresh(stream, now))
            .collect();
        let now = if stale.is_empty() {
            now
        } else {
            self.refresh(conn, &stale).await?;
            Instant::now()
        };
        for &stream in streams {
            self.verdict(stream, now)?;
        }
        Ok(())
    }

    fn gate(&self, stream: StreamSlot) -> &Gate {
        &self.gates[usize::from(stream.index())]
    }

    fn is_fresh(&self, stream: StreamSlot, now: Instant) -> bool {
        lock(&self.gate(stream).reading)
            .as_ref()
            .is_some_and(|reading| reading.is_fresh(now, self.refresh))
    }

    /// Re-reads the streams of `stale` that no other task refreshed while
    /// this one waited for their locks, in one inventory round.
    async fn refresh(&self, conn: &Connection, stale: &[StreamSlot]) -> Result<()> {
        // Locks are taken in ascending stream order, so two batches
        // waiting on each other's streams cannot deadlock.
        let mut guards = Vec::with_capacity(stale.len());
        for &stream in stale {
            guards.push(self.gate(stream).refreshing.lock().await);
        }
        let now = Instant::now();
        let still_stale: Vec<StreamSlot> = stale
            .iter()
            .copied()
            .filter(|&stream| !self.is_fresh(stream, now))
            .collect();
        if still_stale.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = still_stale
            .iter()
            .map(|&stream| self.ready_keys[usize::from(stream.index())].clone())
            .collect();
        let inventories = inventory(&mut conn.clone(), &keys).await?;
        let (at, wall_ms) = (Instant::now(), now_ms());
        for (&stream, inventory) in still_stale.iter().zip(inventories) {
            let oldest = inventory.as_ref().and_then(|inventory| {
                inventory.oldest_undelivered().map(|(group, id)| Oldest {
                    id,
                    group: group.name.as_str().into(),
                    age_at_reading: id.age(wall_ms),
                })
            });
            tracing::trace!(
                queue = &*self.config.queue,
                partition = stream.index(),
                oldest_undelivered = ?oldest,
                "admission reading refreshed"
            );
            *lock(&self.gate(stream).reading) = Some(Reading {
                at,
                oldest,
                warned: false,
            });
        }
        drop(guards);
        Ok(())
    }

    /// Refuses `stream` when its oldest undelivered entry is older than the limit at `now`.
    fn verdict(&self, stream: StreamSlot, now: Instant) -> Result<()> {
        let mut reading = lock(&self.gate(stream).reading);
        let Some(reading) = reading.as_mut() else {
            // Unreachable after a refresh; admitting is the safe answer anyway.
            return Ok(());
        };
        // Whole milliseconds: stream IDs carry no finer time, and the error reads better.
        let Some(age) = reading
            .age(now)
            .map(whole_ms)
            .filter(|age| *age > self.limit)
        else {
            return Ok(());
        };
        let oldest = reading.oldest.as_ref().expect("an age comes from an entry");
        if std::mem::replace(&mut reading.warned, true) {
            tracing::debug!(
                queue = &*self.config.queue,
                partition = stream.index(),
                group = &*oldest.group,
                oldest_undelivered = %oldest.id,
                oldest_ready_age = %humantime::format_duration(age),
                limit = %humantime::format_duration(self.limit),
                "publish refused: backpressure"
            );
        } else {
            tracing::warn!(
                queue = &*self.config.queue,
                partition = stream.index(),
                group = &*oldest.group,
                oldest_undelivered = %oldest.id,
                oldest_ready_age = %humantime::format_duration(age),
                limit = %humantime::format_duration(self.limit),
                "publish refused: backpressure (the slowest group is behind; further refusals until the next refresh log at debug)"
            );
        }
        Err(Error::Publish(PublishError::Backpressure {
            queue: self.config.queue.to_string(),
            partition: self.config.partition_of_stream(stream),
            lane: self
                .config
                .lane_of_stream(stream)
                .map(|lane| lane.name.to_string()),
            oldest_ready_age: age,
            limit: self.limit,
        }))
    }
}

/// A poisoned lock only means another publish panicked mid-copy of plain data: keep going.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `age` truncated to whole milliseconds.
fn whole_ms(age: Duration) -> Duration {
    Duration::from_millis(u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at: Instant, age_at_reading: Option<Duration>) -> Reading {
        Reading {
            at,
            oldest: age_at_reading.map(|age_at_reading| Oldest {
                id: StreamId::new(1, 0),
                group: "workers".into(),
                age_at_reading,
            }),
            warned: false,
        }
    }

    #[test]
    fn a_reading_is_fresh_for_exactly_the_refresh_interval() {
        let at = Instant::now();
        let read = reading(at, None);
        let refresh = Duration::from_secs(1);
        assert!(read.is_fresh(at, refresh));
        assert!(read.is_fresh(at + Duration::from_millis(999), refresh));
        assert!(!read.is_fresh(at + refresh, refresh));
    }

    #[test]
    fn the_age_of_an_undelivered_entry_keeps_growing_after_the_reading() {
        let at = Instant::now();
        let read = reading(at, Some(Duration::from_secs(4)));
        assert_eq!(read.age(at), Some(Duration::from_secs(4)));
        assert_eq!(
            read.age(at + Duration::from_millis(1_500)),
            Some(Duration::from_millis(5_500))
        );
        assert_eq!(reading(at, None).age(at + Duration::from_secs(9)), None);
    }
}
