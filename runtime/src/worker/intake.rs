//! The intake loop: reserve permits, then read at most that many new entries, and start each read's jobs together in one task.
//!
//! `XREADGROUP ... COUNT n` applies COUNT to each stream, not to the reply:
//! a read over several streams can return up to n per stream. So a round
//! first reads the partitions one at a time without blocking, `COUNT` = the
//! permits still free, starting at a rotating partition so that a busy one
//! cannot starve the others. Only when all were empty does it block on all
//! of them at once (one connection, one round trip, woken by any of them).
//! That blocking read can still return more than n entries, when entries
//! arrived on several streams while it was served; those extra entries are
//! already delivered to this consumer, so the loop waits for more permits
//! rather than drop one.
//!
//! The sweep is for a backlog. A round that found the streams drained (it
//! delivered fewer entries than it held permits, or none) is followed by the
//! blocking read alone: a blocking `XREADGROUP` answers at once when any
//! stream has new entries, so under a light load or none the sweep would
//! only cost an empty read per partition, per job or per block period, from
//! every worker. A round that used every permit it held is followed by a
//! sweep again.
//!
//! Reads run on a connection of this loop's own, whose response timeout
//! exceeds the block time; the shared connection never carries a `BLOCK`.
//!
//! Each read stamps its entries with the partition's claim epoch as this
//! worker knew it when the read was sent (`epochs`); their acks carry it.
//!
//! Paused partitions (`queuegen pause`, see `pause.rs`) are left out of
//! every read: the loop reads only the partitions not paused as last
//! refreshed, and when all are paused it holds no permit and waits for a
//! change (or one block). Recovery is another loop and does not look.
//!
//! On a Cluster, partitions live in different slots and one read may not
//! name keys of two slots: the non-blocking reads go one partition at a time
//! as always, and instead of the blocking read the loop waits for a wake-up
//! from the partitions' watchers (`wake.rs`), then sweeps; a round that
//! waited without a wake-up waits again without sweeping first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::cluster_routing::Slot;

use crate::connect::Connection;
use crate::stream_slot::StreamSlot;
use tokio::sync::OwnedSemaphorePermit;

use super::lanes::LaneShares;
use super::reply::{self, Entry, ReadReply};
use super::tenant_rate::TenantGate;
use super::wake::Wakers;
use super::{classify, Core, Delivery, Failure, Ready, Runner};
use crate::connect::Redis;
use crate::envelope::Envelope;
use crate::error::Result;
use crate::handler::Handler;
use crate::transitions;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Reads until the stop flag is raised. Returns an error only for a failure
/// that retrying cannot fix (a missing group, a key of the wrong type).
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Runner<E, H>>,
    redis: Redis,
    streams: Vec<StreamSlot>,
    block: Duration,
) -> Result<()> {
    let ended = read_until_stopped(&shared, redis, streams, block).await;
    // Not reading any more: `/readyz` says so from here on.
    shared.reading.store(false, Ordering::Relaxed);
    ended
}

async fn read_until_stopped<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    redis: Redis,
    streams: Vec<StreamSlot>,
    block: Duration,
) -> Result<()> {
    let streams: Vec<(StreamSlot, String)> = streams
        .iter()
        .map(|&p| (p, shared.config.ready_key(p)))
        .collect();
    // One blocking read over every partition, unless they span Cluster
    // slots: then watchers of the partitions not paused, rebuilt when the
    // paused set changes (a paused partition's backlog must not wake us).
    let cluster = redis.is_cluster() && spans_slots(&streams);
    let mut wakers: Option<(u64, Wakers)> = None;
    let mut conn: Option<Connection> = None;
    // The queue's rate limit, asked once per round on the shared connection.
    let mut limiter = super::rate::Limiter::new(&shared.config);
    let mut rate_conn = shared.multiplexed.clone();
    let mut backoff = BACKOFF_MIN;
    // Workers of one queue start at different partitions: started together at
    // the same one, they would drain it in lockstep and then find it empty
    // together, paying an empty read each on the way to the next.
    let mut start = rand::random_range(0..streams.len());
    // Whether the last round found the streams drained: block, skip the sweep.
    let mut drained = false;
    // With lanes: which lane each round reads first (`lanes.rs`).
    let mut shares = LaneShares::new(&shared.config);
    // With `handler.tenant_rate`: each read's entries pass their tenant's bucket.
    let gate = TenantGate::new(&shared.config);
    loop {
        // The partitions not paused (`pause.rs`), as last read: only they are read.
        let generation = shared.paused.generation();
        let active: Vec<(StreamSlot, String)> = streams
            .iter()
            .filter(|(stream, _)| !shared.paused.is_paused(*stream))
            .cloned()
            .collect();
        if active.is_empty() {
            // Every partition paused: hold no permit, wait for a resume.
            if shared
                .stop
                .unless_raised(shared.paused.changed_within(block))
                .await
                .is_none()
            {
                return Ok(());
            }
            shared.reading.store(true, Ordering::Relaxed);
            continue;
        }
        if cluster && wakers.as_ref().map(|(built, _)| *built) != Some(generation) {
            let keys: Vec<String> = active.iter().map(|(_, key)| key.clone()).collect();
            wakers = Some((
                generation,
                Wakers::start(&redis, &shared.config.group, &keys, block),
            ));
        }
        let Some(mut permits) = shared.reserve(shared.config.handler.concurrency).await else {
            return Ok(());
        };
        let reader = match conn.as_mut() {
            Some(reader) => reader,
            None => match shared
                .cancel
                .unless_raised(redis.blocking_connection(block))
                .await
            {
                None => return Ok(()),
                Some(Ok(reader)) => conn.insert(reader),
                Some(Err(err)) => {
                    tracing::warn!(error = %err, ?backoff, "cannot open the reader connection; retrying");
                    drop(permits);
                    shared.reading.store(false, Ordering::Relaxed);
                    if !pause(shared, &mut backoff).await {
                        return Ok(());
                    }
                    continue;
                }
            },
        };
        let mut granted = None;
        if let Some(limiter) = limiter.as_mut() {
            match limiter.take(&mut rate_conn, permits.len()).await {
                Ok(grant) if grant.granted == 0 => {
                    // Over the limit: hold no permit while the bucket refills.
                    drop(permits);
                    let wait = grant.wait.min(block);
                    let waited = std::time::Instant::now();
                    let slept = shared.stop.unless_raised(tokio::time::sleep(wait)).await;
                    shared.events.rate_limited(waited.elapsed());
                    if slept.is_none() {
                        return Ok(());
                    }
                    continue;
                }
                Ok(grant) => {
                    // The permits beyond the grant go back at once.
                    permits.truncate(grant.granted);
                    granted = Some(grant.granted);
                }
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Cancelled) => return Ok(()),
                Err(Failure::Retry { error, .. }) => {
                    tracing::warn!(error = %error, ?backoff, "asking the rate limit failed; retrying");
                    drop(permits);
                    if !pause(shared, &mut backoff).await {
                        return Ok(());
                    }
                    continue;
                }
            }
        }
        let order = sweep_order(&shared.config, &active, shares.as_ref(), start);
        let slots = shared.config.lanes.len().max(1);
        let round = Round {
            shared,
            streams: &order,
            block,
            wakers: wakers.as_ref().map(|(_, wakers)| wakers),
            drained,
            delivered: AtomicUsize::new(0),
            by_lane: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
            empty: std::sync::Mutex::new(Vec::new()),
            gate: gate.as_ref(),
            ready: std::sync::Mutex::new(Vec::new()),
        };
        let result = round.read(reader, &mut permits).await;
        if let (Some(limiter), Some(granted)) = (limiter.as_mut(), granted) {
            limiter.settle(granted, round.delivered.load(Ordering::Relaxed));
        }
        if let Some(shares) = shares.as_mut() {
            let (delivered, empty) = round.lane_tally();
            for (slot, &entries) in delivered.iter().enumerate() {
                shared.events.lane_delivered(slot, entries as u64);
            }
            shares.record(&delivered, &empty);
        }
        drained = matches!(result, Ok(Ended::Drained));
        // Permits not used by this round go back before the next one.
        drop(permits);
        start = (start + 1) % streams.len();
        match result {
            Ok(_) => {
                backoff = BACKOFF_MIN;
                shared.reading.store(true, Ordering::Relaxed);
            }
            Err(Failure::Fatal(err)) => return Err(err),
            Err(Failure::Cancelled) => return Ok(()),
            Err(Failure::Retry { error, reconnect }) => {
                tracing::warn!(error = %error, reconnect, ?backoff, "XREADGROUP failed; retrying");
                shared.reading.store(false, Ordering::Relaxed);
                if reconnect {
                    // A timed-out or broken connection may still be blocked
                    // server-side: a fresh one is the only safe way on.
                    conn = None;
                }
                if !pause(shared, &mut backoff).await {
                    return Ok(());
                }
            }
        }
    }
}

/// Sleeps for the backoff (doubling it for next time); `false` if stop was raised meanwhile.
async fn pause(shared: &Core, backoff: &mut Duration) -> bool {
    let slept = shared
        .stop
        .unless_raised(tokio::time::sleep(*backoff))
        .await
        .is_some();
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
    slept
}

/// The order a round sweeps `active` streams in: from the rotating `start`;
/// with lanes, lane by lane (the lane furthest behind its share first, see
/// `lanes.rs`), each lane's streams from the rotating start.
fn sweep_order(
    config: &crate::config::QueueConfig,
    active: &[(StreamSlot, String)],
    shares: Option<&LaneShares>,
    start: usize,
) -> Vec<(StreamSlot, String)> {
    let rotated = |streams: Vec<&(StreamSlot, String)>| {
        let len = streams.len().max(1);
        let mut streams: Vec<(StreamSlot, String)> = streams.into_iter().cloned().collect();
        streams.rotate_left(start % len);
        streams
    };
    let Some(shares) = shares else {
        return rotated(active.iter().collect());
    };
    let partitions = config.partitions.max(1);
    shares
        .order()
        .into_iter()
        .flat_map(|slot| {
            rotated(
                active
                    .iter()
                    .filter(|(stream, _)| usize::from(stream.index() / partitions) == slot)
                    .collect(),
            )
        })
        .collect()
}

/// Whether the streams' keys hash to more than one Cluster slot.
fn spans_slots(streams: &[(StreamSlot, String)]) -> bool {
    let mut slots = streams.iter().map(|(_, key)| Slot::for_key(key));
    let first = slots.next();
    slots.any(|slot| Some(slot) != first)
}

/// One read round over the worker's partitions.
struct Round<'a, E, H> {
    shared: &'a Arc<Runner<E, H>>,
    streams: &'a [(StreamSlot, String)],
    block: Duration,
    /// The Cluster's wake-up in place of the blocking read (see module docs).
    wakers: Option<&'a Wakers>,
    /// The last round found the streams drained: skip the sweep.
    drained: bool,
    /// Entries this round handed to job tasks (settled against the rate grant).
    delivered: AtomicUsize,
    /// Of those, per lane slot (one slot without lanes).
    by_lane: Vec<AtomicUsize>,
    /// Streams read with permits to spare that answered nothing.
    empty: std::sync::Mutex<Vec<StreamSlot>>,
    /// With `handler.tenant_rate`: which entries of a read start now.
    gate: Option<&'a TenantGate>,
    /// The jobs of the read in progress, started together once it is
    /// dispatched (or before waiting for a permit).
    ready: std::sync::Mutex<Vec<Ready>>,
}

/// How a round ended.
enum Ended {
    /// It used every permit it held (the streams may hold more), or it
    /// stopped early, or the Cluster's wake-up stood in for its read.
    Full,
    /// It delivered fewer entries than it held permits, or none.
    Drained,
}

impl<E: Envelope, H: Handler<E>> Round<'_, E, H> {
    /// Reads the round's streams: a sweep in their order (unless the last
    /// round found them drained), then, if it found nothing, one blocking read.
    async fn read(
        &self,
        conn: &mut Connection,
        permits: &mut Vec<OwnedSemaphorePermit>,
    ) -> Result<Ended, Failure> {
        let shared = self.shared;
        let held = permits.len();
        let mut delivered = false;
        let sweep = if self.drained { 0 } else { self.streams.len() };
        for (stream, key) in &self.streams[..sweep] {
            if permits.is_empty() || shared.stop.is_raised() {
                break;
            }
            let epoch = shared.epochs.current(*stream);
            let reply = self
                .xreadgroup(conn, &[key.as_str()], permits.len(), None)
                .await?;
            if reply.streams.iter().all(|(_, entries)| entries.is_empty()) {
                self.found_empty([*stream]);
            }
            let entries: Vec<Entry> = reply
                .streams
                .into_iter()
                .flat_map(|(_, entries)| entries)
                .collect();
            let decisions = self.admit(entries.iter().collect()).await;
            for (entry, deferral) in entries.into_iter().zip(decisions) {
                if let Some(due_ms) = deferral {
                    // Over its tenant's rate: set aside, no permit taken.
                    self.defer(*stream, entry, due_ms);
                    continue;
                }
                let permit = permits
                    .pop()
                    .expect("COUNT bounds a one-stream read to the permits held");
                self.dispatch(*stream, epoch, entry, permit);
                delivered = true;
            }
            self.start_ready();
        }
        if shared.stop.is_raised() {
            return Ok(Ended::Full);
        }
        if delivered {
            // The sweep read every partition unless the permits ran out. On
            // a Cluster the next round sweeps again all the same: its
            // wake-up costs more round trips than a sweep, and jobs flow.
            return Ok(if permits.is_empty() || self.wakers.is_some() {
                Ended::Full
            } else {
                Ended::Drained
            });
        }
        if let Some(wakers) = self.wakers {
            // Woken, the next round sweeps for whatever woke us, permits
            // first; the watchers are level-triggered (they look past what
            // the group delivered), so after a quiet wait it need not.
            let woken = shared.stop.unless_raised(wakers.wait(self.block)).await;
            return Ok(if woken == Some(false) {
                Ended::Drained
            } else {
                Ended::Full
            });
        }

        let keys: Vec<&str> = self.streams.iter().map(|(_, key)| key.as_str()).collect();
        // Taken before the read is sent: see `epochs`.
        let epochs: Vec<Option<u64>> = self
            .streams
            .iter()
            .map(|(stream, _)| shared.epochs.current(*stream))
            .collect();
        let reply = self
            .xreadgroup(conn, &keys, permits.len(), Some(self.block))
            .await?;
        if !reply.streams.is_empty() {
            // Woken by some streams: the others had nothing.
            self.found_empty(
                self.streams
                    .iter()
                    .map(|(stream, _)| *stream)
                    .filter(|stream| {
                        !reply.streams.iter().any(|(key, entries)| {
                            !entries.is_empty()
                                && *key == shared.ready_keys[usize::from(stream.index())]
                        })
                    }),
            );
        }
        let entries: Vec<(StreamSlot, Option<u64>, Entry)> = reply
            .streams
            .into_iter()
            .flat_map(|(stream_key, entries)| {
                let index = self
                    .streams
                    .iter()
                    .position(|(_, key)| *key == stream_key)
                    .expect("XREADGROUP answers only for the streams it was given");
                let (stream, epoch) = (self.streams[index].0, epochs[index]);
                entries.into_iter().map(move |entry| (stream, epoch, entry))
            })
            .collect();
        let ended = if entries.len() < held {
            Ended::Drained
        } else {
            Ended::Full
        };
        let decisions = self
            .admit(entries.iter().map(|(_, _, entry)| entry).collect())
            .await;
        let mut entries = entries
            .into_iter()
            .zip(decisions)
            .filter_map(|((stream, epoch, entry), deferral)| match deferral {
                Some(due_ms) => {
                    self.defer(stream, entry, due_ms);
                    None
                }
                None => Some((stream, epoch, entry)),
            })
            .collect::<Vec<_>>()
            .into_iter();
        while let Some((stream, epoch, entry)) = entries.next() {
            let permit = match permits.pop() {
                Some(permit) => permit,
                // More entries than permits (COUNT is per stream, see the
                // module docs): wait for running jobs to free permits, the
                // jobs dispatched so far running meanwhile.
                None => {
                    self.start_ready();
                    let freed = shared
                        .cancel
                        .unless_raised(shared.jobs.permits.clone().acquire_owned())
                        .await;
                    match freed {
                        Some(Ok(permit)) => permit,
                        _ => {
                            // This entry and every one after it.
                            let mut left = 0u64;
                            for (stream, _, _) in
                                std::iter::once((stream, epoch, entry)).chain(entries)
                            {
                                shared.events.left_pending(stream, 1);
                                left += 1;
                            }
                            tracing::warn!(
                            left,
                            "shutdown budget spent before read entries got a permit; they stay pending"
                        );
                            return Err(Failure::Cancelled);
                        }
                    }
                }
            };
            self.dispatch(stream, epoch, entry, permit);
        }
        self.start_ready();
        Ok(ended)
    }

    /// `XREADGROUP GROUP g consumer COUNT n [BLOCK ms] STREAMS k... > ...`
    async fn xreadgroup(
        &self,
        conn: &mut Connection,
        keys: &[&str],
        count: usize,
        block: Option<Duration>,
    ) -> Result<ReadReply, Failure> {
        let shared = self.shared;
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&*shared.config.group)
            .arg(&*shared.consumer)
            .arg("COUNT")
            .arg(count);
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS").arg(keys).arg(vec![">"; keys.len()]);
        let reply = shared
            .cancel
            .unless_raised(reply::xreadgroup(conn, &cmd))
            .await;
        match reply {
            None => Err(Failure::Cancelled),
            Some(Ok(reply)) => Ok(reply),
            Some(Err(err)) => Err(classify(err, "XREADGROUP", keys, &shared.config.group)),
        }
    }

    /// For each entry: `None` to start it, or when to set it aside until
    /// (`handler.tenant_rate`); all `None` without a per-tenant limit.
    async fn admit(&self, entries: Vec<&Entry>) -> Vec<Option<u64>> {
        match self.gate {
            Some(gate) if !entries.is_empty() => {
                gate.admit(&mut self.shared.multiplexed.clone(), &entries)
                    .await
            }
            _ => vec![None; entries.len()],
        }
    }

    /// Sets `entry` of stream `stream` aside until `due_ms` with the
    /// library's `defer` (its attempt kept), in a task of its own. Should the
    /// call fail, the entry stays pending and recovery claims it later.
    fn defer(&self, stream: StreamSlot, entry: Entry, due_ms: u64) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let job_id = entry
                .field_text(crate::envelope::header_fields::JOB_ID)
                .unwrap_or_default();
            let request = transitions::ScheduleRetry {
                stream,
                consumer: &shared.consumer,
                source_id: &entry.id,
                job_id: &job_id,
                due_ms,
                reason: "tenant_rate",
                accepted_schemas: E::ACCEPTS,
            };
            let deferred = super::job::with_retries("defer", || {
                let mut conn = shared.multiplexed.clone();
                let (config, request) = (&shared.config, &request);
                async move { transitions::defer(&mut conn, config, request).await }
            })
            .await;
            match deferred {
                Ok(_) => {
                    shared.events.deferred();
                    tracing::debug!(job_id, stream_id = %entry.id, due_ms, "over its tenant's rate: deferred");
                }
                Err(err) => tracing::warn!(
                    error = %err,
                    job_id,
                    stream_id = %entry.id,
                    "deferring a job over its tenant's rate failed; it stays pending for recovery"
                ),
            }
        });
    }

    fn found_empty(&self, streams: impl IntoIterator<Item = StreamSlot>) {
        if self.by_lane.len() > 1 {
            self.empty
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .extend(streams);
        }
    }

    /// Entries delivered per lane slot, and whether each lane was found
    /// empty: every one of its streams in this round answered nothing.
    fn lane_tally(&self) -> (Vec<usize>, Vec<bool>) {
        let partitions = self.shared.config.partitions.max(1);
        let empty = self
            .empty
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let lane_empty = (0..self.by_lane.len())
            .map(|slot| {
                self.streams
                    .iter()
                    .filter(|(stream, _)| usize::from(stream.index() / partitions) == slot)
                    .all(|(stream, _)| empty.contains(stream))
            })
            .collect();
        let delivered = self
            .by_lane
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .collect();
        (delivered, lane_empty)
    }

    fn dispatch(
        &self,
        stream: StreamSlot,
        claim_epoch: Option<u64>,
        entry: Entry,
        permit: OwnedSemaphorePermit,
    ) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        let slot = usize::from(stream.index() / self.shared.config.partitions.max(1));
        if let Some(count) = self.by_lane.get(slot) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        let delivery = Delivery {
            stream,
            entry,
            claimed: false,
            claim_epoch,
        };
        // A new entry (`>`) cannot already be running here.
        if let Some(ready) = self.shared.prepare(delivery, permit) {
            self.ready
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(ready);
        }
    }

    /// Starts the jobs dispatched since the last call, together (`start_jobs`).
    fn start_ready(&self) {
        let ready = std::mem::take(
            &mut *self
                .ready
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        self.shared.start_jobs(ready);
    }
}
