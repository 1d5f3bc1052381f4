//! The leadership loop: per partition (and group), only the worker holding the partition's loops lease runs its recovery and retry scheduler.
//!
//! Every `claim.every` (the lease's tick) the loop renews the leases this
//! worker holds, reads the others with one `MGET` and tries to take those
//! it found free (`lease_acquire`, `SET NX PX` of
//! `{prefix}:{queue-NN}:lease:loops-{group}`) for three ticks. Recovery and
//! the scheduler ask [`Leadership::leads`] and skip the partitions led
//! elsewhere: an idle fleet of N workers sends one `XPENDING` and one
//! `ZRANGEBYSCORE` per partition and tick, not N, one renewal per partition
//! and one `MGET` per worker and `claim.every`, so its cost grows with the
//! partitions, not with workers × partitions. A graceful stop releases the leases
//! at once, so the other workers take them at their next tick; a worker
//! killed leaves them to expire, and another takes them within one lease
//! period plus one tick.
//!
//! Leadership is an efficiency measure, not a fence: a paused leader may
//! still run a pass after its lease ran out, beside the new leader, for up
//! to one tick. That is safe because the `claim` function (whose claim epoch
//! fences the previous owner's acks), the poison take-over (`XCLAIM` at the
//! idle threshold) and `retry_promote` are each atomic and safe under
//! concurrency: an entry is claimed, quarantined or promoted once whoever
//! runs them, and however many.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;

use super::{every, Core};
use crate::config::QueueConfig;
use crate::error::{Error, OperationError, Result};
use crate::lease::{self, Lease};
use crate::stream_slot::StreamSlot;

/// Ticks a lease lasts: a leader missing two renewals in a row still leads.
const TICKS_PER_LEASE: u32 = 3;

/// How often the leases are renewed and taken: `claim.every` (at least 1 ms).
pub(super) fn tick(config: &QueueConfig) -> Duration {
    config.claim.every.max(Duration::from_millis(1))
}

/// How long a lease lasts unless renewed: three ticks.
pub(super) fn lease_period(config: &QueueConfig) -> Duration {
    tick(config) * TICKS_PER_LEASE
}

/// Which partitions this worker leads now, as the loops read it.
pub(super) struct Leadership {
    /// By partition of the queue; only the worker's own partitions are ever raised.
    leading: Vec<AtomicBool>,
    /// The value of the leases this worker holds: `worker:{consumer}`.
    holder: String,
}

impl Leadership {
    pub(super) fn new(streams: u16, consumer: &str) -> Self {
        Leadership {
            leading: (0..streams).map(|_| AtomicBool::new(false)).collect(),
            holder: format!("worker:{consumer}"),
        }
    }

    /// Whether this worker runs `stream`'s recovery and scheduler now.
    pub(super) fn leads(&self, stream: StreamSlot) -> bool {
        self.leading[usize::from(stream.index())].load(Ordering::Relaxed)
    }

    /// The partitions of `streams` this worker leads now.
    pub(super) fn led(&self, streams: &[StreamSlot]) -> Vec<StreamSlot> {
        streams
            .iter()
            .copied()
            .filter(|&stream| self.leads(stream))
            .collect()
    }

    fn set(&self, stream: StreamSlot, leading: bool) {
        self.leading[usize::from(stream.index())].store(leading, Ordering::Relaxed);
    }
}

/// One partition's lease as this worker holds it.
struct Held {
    lease: Lease,
    /// When its last renewal (or taking) was sent: it lasts a period from then.
    renewed: Instant,
}

/// The leases of this worker's partitions across ticks.
pub(super) struct Leases {
    streams: Vec<StreamSlot>,
    held: Vec<Option<Held>>,
}

impl Leases {
    pub(super) fn new(streams: Vec<StreamSlot>) -> Self {
        let held = streams.iter().map(|_| None).collect();
        Leases { streams, held }
    }

    /// Renews the leases held and tries to take the free ones among the
    /// others, every partition at once; then raises or lowers each
    /// partition's flag.
    pub(super) async fn pass(&mut self, core: &Core) {
        let config = &core.config;
        let period = lease_period(config);
        let leadership = &core.leadership;
        let unheld: Vec<StreamSlot> = self
            .streams
            .iter()
            .zip(&self.held)
            .filter(|(_, held)| held.is_none())
            .map(|(&stream, _)| stream)
            .collect();
        let holders = match current_holders(&mut core.multiplexed.clone(), config, &unheld).await {
            Ok(holders) => holders,
            // Try none this tick: they were not this worker's anyway.
            Err(err) => {
                tracing::warn!(error = %err, "reading the loops leases failed; trying again next tick");
                Default::default()
            }
        };
        let attempts = self.streams.iter().zip(&self.held).map(|(&stream, held)| {
            let mut conn = core.multiplexed.clone();
            let lease = held.as_ref().map(|held| held.lease.clone());
            let free = holders.get(&stream) == Some(&false);
            async move {
                let sent = Instant::now();
                let outcome = match lease {
                    Some(lease) => match lease::renew(&mut conn, &lease, period).await {
                        Ok(true) => Ok(Some(lease)),
                        // Expired (or taken) since: take it anew if it is free.
                        Ok(false) => take(&mut conn, config, stream, leadership, period).await,
                        Err(err) => Err(err),
                    },
                    // Held by another worker: nothing to send.
                    None if free => take(&mut conn, config, stream, leadership, period).await,
                    None => Ok(None),
                };
                (sent, outcome)
            }
        });
        let outcomes = join_all(attempts).await;
        // One warning per tick, not one per partition, while the server is away.
        let mut failed: Vec<StreamSlot> = Vec::new();
        let mut last_error = None;
        for ((&partition, held), (sent, outcome)) in
            self.streams.iter().zip(&mut self.held).zip(outcomes)
        {
            match outcome {
                Ok(Some(lease)) => {
                    if held.is_none() {
                        core.events.loops_lease_taken();
                        tracing::info!(partition = partition.index(), lease = %lease.key(), "leading the partition's recovery and retry scheduler");
                    }
                    *held = Some(Held {
                        lease,
                        renewed: sent,
                    });
                }
                Ok(None) => {
                    if let Some(lost) = held.take() {
                        tracing::warn!(partition = partition.index(), lease = %lost.lease.key(), "lost the partition's loops lease; another worker leads it");
                    }
                }
                // Unknown: keep leading while the last renewal lasts.
                Err(err) => {
                    let expired = held
                        .as_ref()
                        .is_some_and(|held| held.renewed.elapsed() >= period);
                    if expired {
                        held.take();
                    }
                    failed.push(partition);
                    last_error = Some(err);
                }
            }
            let leading = held.is_some();
            if leading != leadership.leads(partition) {
                leadership.set(partition, leading);
                core.events.loops_leader(partition, leading);
            }
        }
        if let Some(err) = last_error {
            tracing::warn!(partitions = ?failed, error = %err, "renewing or taking the loops leases failed; trying again next tick");
        }
    }

    /// Lowers every flag, then releases the leases held, so that the other
    /// workers take them at their next tick rather than after they expire.
    pub(super) async fn release_all(&mut self, core: &Core) {
        for &partition in &self.streams {
            if core.leadership.leads(partition) {
                core.leadership.set(partition, false);
                core.events.loops_leader(partition, false);
            }
        }
        let functions = &core.config.functions;
        let releases = self.held.iter_mut().filter_map(Option::take).map(|held| {
            let mut conn = core.multiplexed.clone();
            async move {
                if let Err(err) = lease::release(&mut conn, functions, &held.lease).await {
                    tracing::warn!(lease = %held.lease.key(), error = %err, "releasing the loops lease failed; it expires by itself");
                }
            }
        });
        join_all(releases).await;
    }
}

/// Whether `streams`' loops leases are held now, by partition, read
/// with one `MGET` (the Cluster client splits it by slot): most ticks a
/// follower finds every lease held and sends nothing more.
async fn current_holders<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    streams: &[StreamSlot],
) -> Result<std::collections::HashMap<StreamSlot, bool>> {
    if streams.is_empty() {
        return Ok(Default::default());
    }
    let keys: Vec<String> = streams
        .iter()
        .map(|&stream| config.loops_lease_key(stream))
        .collect();
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(conn)
        .await
        .map_err(|err| {
            Error::redis(
                format!("MGET {} loops leases, {} …", keys.len(), keys[0]),
                err,
            )
        })?;
    Ok(streams
        .iter()
        .zip(values)
        .map(|(&stream, value)| (stream, value.is_some()))
        .collect())
}

/// Tries to take `stream`'s loops lease: `Some` when taken, `None` when
/// another worker holds it.
async fn take<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    leadership: &Leadership,
    period: Duration,
) -> Result<Option<Lease>> {
    let key = config.loops_lease_key(stream);
    match lease::acquire(conn, &config.functions, &key, &leadership.holder, period).await {
        Ok(lease) => Ok(Some(lease)),
        Err(Error::Operation(OperationError::LeaseHeld { .. })) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Renews and takes leases every tick until the stop flag is raised, then
/// releases them. `leases` had its first pass before the other loops started.
pub(super) async fn run(core: Arc<Core>, mut leases: Leases) -> Result<()> {
    let mut ticker = every(tick(&core.config));
    // The first tick completes at once: the first pass already ran.
    ticker.tick().await;
    loop {
        if core.stop.unless_raised(ticker.tick()).await.is_none() {
            break;
        }
        leases.pass(&core).await;
    }
    // A release needs the server; give up on it when the budget is spent.
    let _ = core.cancel.unless_raised(leases.release_all(&core)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_lasts_three_claim_periods_and_is_renewed_every_one() {
        let mut config = crate::config::tests::OCR;
        config.claim.every = Duration::from_millis(200);
        assert_eq!(tick(&config), Duration::from_millis(200));
        assert_eq!(lease_period(&config), Duration::from_millis(600));
        let mut zero = config;
        zero.claim.every = Duration::ZERO;
        assert_eq!(lease_period(&zero), Duration::from_millis(3));
    }

    #[test]
    fn a_new_worker_leads_nothing_until_it_takes_a_lease() {
        let leadership = Leadership::new(4, "host-1-abc");
        assert_eq!(leadership.holder, "worker:host-1-abc");
        assert!(leadership
            .led(&StreamSlot::all(4).collect::<Vec<_>>())
            .is_empty());
        leadership.set(StreamSlot::new(2), true);
        assert!(leadership.leads(StreamSlot::new(2)));
        assert_eq!(
            leadership.led(&[0, 2, 3].map(StreamSlot::new)),
            [StreamSlot::new(2)]
        );
    }
}
