//! Group commit of acknowledgements: job tasks hand over `Done` entries, one
//! task sends them as one ownership-checked `ack` call per flush.
//!
//! A job task hands over its entry only after its handler returned `Done`,
//! together with its permit and its in-flight slot, and ends. The acker
//! counts the job done, and releases the permit and the slot, only once the
//! call carrying it was answered: batching changes when an ack is sent,
//! never whether, and the worker never runs more than its concurrency of
//! unsettled jobs. While one call is on the wire the next requests queue
//! up. Before a flush the acker lingers, at most [`LINGER`], while other
//! jobs are still in their handlers: jobs of one read end together, and
//! their acks then go in one call rather than in a train of small ones, each
//! of which costs the server a function call and frees only a few permits.
//! Handlers that queue for a narrower resource (a database pool) end one by
//! one instead; a flush still small after `LINGER` waits on to [`SLOW_LINGER`].
//! When no other job is in a handler (an idle worker's lone job) the ack
//! goes out at once, unless the acker is busy: jobs arriving one or two at a
//! time at a high rate (a steady stream rather than a backlog) would each
//! cost the server a call, so a flush comes at most once per [`PACE`] while
//! its batch holds fewer than half the worker's permits. A flush releases
//! its permits in one step, so the intake wakes to a whole batch of free
//! permits and reads a whole batch.
//!
//! The library's `ack` acknowledges only entries still pending for this
//! worker's consumer. One that another worker claimed meanwhile (this one
//! stalled past `claim.min_idle`) is refused and left to its new owner: the
//! acker logs it at warn with its owner and counts it (`ownership_lost`),
//! and carries on. Each call carries the partition's claim epoch from before
//! the oldest of its entries was read: while no claim has happened since,
//! the function acknowledges without listing the pending entries (the
//! common case; see `epochs`, and `claim` and `ack` in the library). Its
//! reply tells the current epoch, which later reads stamp. Otherwise it
//! checks each ID, and IDs in ascending order let it list them with one
//! `XPENDING`.
//!
//! On [`AckPath::XackDel`] (a queue with `retention.on_ack: delete`, on
//! servers that have `XACKDEL`) the calls go to the library's `ack_delete`,
//! the same checks with `XACKDEL … ACKED`: an entry is deleted with its ack
//! when every group has read it and none holds it pending, kept otherwise.
//! Deleted and kept are both acknowledged (counted done); the report counts
//! them apart. Should the server refuse `XACKDEL` (the function then acks
//! with `XACK`), the acker says so once and calls `ack` from then on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::connect::Connection;
use crate::stream_slot::StreamSlot;
use redis::cluster_routing::Slot as ClusterSlot;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::epochs::Epochs;
use super::events::Events;
use super::in_flight::Slot;
use super::job::with_retries;
use crate::error::Error;
use crate::functions::AckStream;
use crate::metrics::Settlement;
use crate::transitions::{AckFunction, AckPath, Acked};

/// Most entries one flush takes; bounds the size of one pipeline.
const MAX_FLUSH: usize = 1024;

// A flush on a server is one `ack` call: it must fit the library's limit.
const _: () = assert!(MAX_FLUSH as u64 <= queuegen_core::wire::library::MAX_ACK_IDS);

/// Longest a flush waits for the jobs still in their handlers. Long enough
/// for the rest of a read's jobs to end when handlers are quick; short
/// against any handler that waits on I/O, whose permits it holds longer by
/// at most this much.
const LINGER: Duration = Duration::from_millis(1);

/// A flush of fewer entries than this after [`LINGER`], while jobs are
/// still in their handlers, waits on up to [`SLOW_LINGER`]: handlers that
/// wait on a database (or any shared, narrower resource) end one by one,
/// not as a read, and a call per job or two would cost the server a
/// function call each and let the intake read only that many entries.
const SMALL_FLUSH: usize = 16;

/// Longest a small flush waits (from its first entry) while jobs are still
/// in their handlers.
const SLOW_LINGER: Duration = Duration::from_millis(5);

/// Shortest time from one flush to the next while the acker is busy (the
/// previous flush went out less than this ago) and the batch holds fewer
/// than half the worker's permits. At 2,500 jobs/s a worker otherwise sends
/// one call per job or two, each costing the server several times the
/// `XACK` it carries; paced, a call carries whatever ended since the last.
/// Only the acks wait: a job's handler has already run, and its permit is
/// one of fewer than half.
const PACE: Duration = Duration::from_millis(2);

/// How many of the worker's jobs are in their handlers now.
#[derive(Default)]
pub(super) struct Handling(AtomicUsize);

/// One job in its handler; dropped when the handler ended (on every path).
pub(super) struct InHandler(Arc<Handling>);

impl Handling {
    pub(super) fn enter(self: &Arc<Self>) -> InHandler {
        self.0.fetch_add(1, Ordering::Relaxed);
        InHandler(self.clone())
    }

    fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

impl Drop for InHandler {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One `Done` entry waiting for its ack.
pub(super) struct AckRequest {
    pub stream: StreamSlot,
    pub id: String,
    /// The job's `job_id`, for the log line of a refused ack.
    pub job_id: String,
    /// The partition's claim epoch read before the read that delivered it
    /// (`None`: unknown, so its ack checks each entry).
    pub claim_epoch: Option<u64>,
    /// The job's permit, released once the ack was answered.
    pub permit: OwnedSemaphorePermit,
    /// The job's in-flight entry, released with the permit.
    pub slot: Slot,
}

/// Where job tasks send their acks.
pub(super) type AckSender = mpsc::UnboundedSender<AckRequest>;

/// What the acker needs of its worker.
pub(super) struct Acker {
    pub conn: Connection,
    /// `ack` or `ack_delete`, as the worker chose at start.
    pub function: AckFunction,
    /// `ack`, called instead of `function` once the server refused `XACKDEL`.
    pub keep: AckFunction,
    /// Set when an `ack_delete` call found `XACKDEL` refused.
    pub xackdel_refused: AtomicBool,
    pub queue: std::borrow::Cow<'static, str>,
    /// The queue's partition count: a stream number modulo it is the
    /// partition the logs name (the key names the lane).
    pub partitions: u16,
    /// This worker's consumer: only entries pending for it are acknowledged.
    pub consumer: Arc<str>,
    /// The ready stream key of every partition of the queue, by partition.
    pub keys: Arc<[String]>,
    /// The claim epoch key of every partition, by partition.
    pub claims_keys: Arc<[String]>,
    /// Where each `ack` reply's current epoch goes, for the next reads.
    pub epochs: Arc<Epochs>,
    /// Where the acks' outcomes are reported.
    pub events: Arc<Events>,
    /// The jobs in their handlers, whose acks a flush waits for briefly.
    pub handling: Arc<Handling>,
    /// The worker's handler concurrency (its permits): a batch holding half
    /// of them goes out without pacing.
    pub concurrency: usize,
}

/// Starts the acker; it ends when every sender is gone and the queue is drained.
pub(super) fn start(acker: Acker) -> AckSender {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(run(receiver, acker));
    sender
}

async fn run(mut receiver: mpsc::UnboundedReceiver<AckRequest>, acker: Acker) {
    let mut batch = Vec::with_capacity(MAX_FLUSH);
    let paced_below = (acker.concurrency / 2).clamp(1, MAX_FLUSH);
    let mut last_flush: Option<tokio::time::Instant> = None;
    let groups = CallGroups::new(&acker.keys, acker.conn.is_cluster());
    while receiver.recv_many(&mut batch, MAX_FLUSH).await > 0 {
        // The other jobs of the same read are most likely about to end:
        // their acks join this flush. A job whose handler asked for a retry
        // sends none; the linger then ends at its deadline.
        let first = tokio::time::Instant::now();
        linger(&mut receiver, &mut batch, &acker.handling, first + LINGER).await;
        if batch.len() < SMALL_FLUSH {
            linger(
                &mut receiver,
                &mut batch,
                &acker.handling,
                first + SLOW_LINGER,
            )
            .await;
        }
        if let Some(last) = last_flush {
            // Busy: the last flush went out less than PACE ago.
            gather(&mut receiver, &mut batch, paced_below, last + PACE).await;
        }
        last_flush = Some(tokio::time::Instant::now());
        acker.flush(&mut batch, &groups).await;
    }
}

/// Adds to `batch` the acks that arrive until `deadline`, while jobs are
/// still in their handlers and the batch has room.
async fn linger(
    receiver: &mut mpsc::UnboundedReceiver<AckRequest>,
    batch: &mut Vec<AckRequest>,
    handling: &Handling,
    deadline: tokio::time::Instant,
) {
    receive_until(receiver, batch, MAX_FLUSH, deadline, || handling.any()).await;
}

/// Adds to `batch` the acks that arrive until `deadline`, while it holds
/// fewer than `below`.
async fn gather(
    receiver: &mut mpsc::UnboundedReceiver<AckRequest>,
    batch: &mut Vec<AckRequest>,
    below: usize,
    deadline: tokio::time::Instant,
) {
    receive_until(receiver, batch, below, deadline, || true).await;
}

/// Adds to `batch` what arrives until `deadline`, while it holds fewer than
/// `limit` and `waiting()` holds.
async fn receive_until<T>(
    receiver: &mut mpsc::UnboundedReceiver<T>,
    batch: &mut Vec<T>,
    limit: usize,
    deadline: tokio::time::Instant,
    waiting: impl Fn() -> bool,
) {
    while batch.len() < limit && waiting() {
        let room = limit - batch.len();
        match tokio::time::timeout_at(deadline, receiver.recv_many(batch, room)).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

impl Acker {
    /// Sends one `ack` call per call group (see [`CallGroups`]) in one
    /// pipeline, then settles every request.
    async fn flush(&self, batch: &mut Vec<AckRequest>, groups: &CallGroups) {
        let entries = batch.len();
        // Call groups in order, streams in order within each, ascending
        // stream IDs within each stream.
        batch.sort_unstable_by_key(|request| {
            (
                groups.of(request.stream),
                request.stream,
                request.slot.key(),
            )
        });
        let streams: Vec<&[AckRequest]> = batch.chunk_by(|a, b| a.stream == b.stream).collect();
        let calls: Vec<&[&[AckRequest]]> = streams
            .chunk_by(|a, b| groups.of(a[0].stream) == groups.of(b[0].stream))
            .collect();
        let function = if self.xackdel_refused.load(Ordering::Relaxed) {
            &self.keep
        } else {
            &self.function
        };
        let mut pipe = redis::pipe();
        for call in &calls {
            let ids: Vec<Vec<&str>> = call
                .iter()
                .map(|requests| requests.iter().map(|request| request.id.as_str()).collect())
                .collect();
            let parts: Vec<AckStream<'_>> = call
                .iter()
                .zip(&ids)
                .map(|(requests, ids)| {
                    let stream = usize::from(requests[0].stream.index());
                    AckStream {
                        ready_key: &self.keys[stream],
                        claims_key: &self.claims_keys[stream],
                        // Epochs only rise: entries read under different
                        // epochs take the checked path, as they must (a claim
                        // came between their reads); so does a stream with an
                        // entry whose epoch is unknown.
                        claim_epoch: requests
                            .iter()
                            .map(|request| request.claim_epoch)
                            .min()
                            .flatten(),
                        ids,
                    }
                })
                .collect();
            pipe.add_command(function.command(&self.consumer, &parts));
        }
        pipe.ignore_errors();
        // A retried call may find entries its lost first attempt acknowledged.
        let attempts = AtomicU32::new(0);
        let answer: Result<Vec<redis::RedisResult<redis::Value>>, Error> =
            with_retries("ack", || {
                attempts.fetch_add(1, Ordering::Relaxed);
                let mut conn = self.conn.clone();
                let pipe = &pipe;
                async move {
                    pipe.query_async(&mut conn)
                        .await
                        .map_err(|err| Error::redis(format!("ack of {entries} entries"), err))
                }
            })
            .await;
        let retried = attempts.load(Ordering::Relaxed) > 1;

        match answer {
            Ok(answers) => {
                for (call, answer) in calls.iter().zip(answers) {
                    let keyed: Vec<(&str, StreamSlot)> = call
                        .iter()
                        .map(|requests| (self.key(requests[0].stream), requests[0].stream))
                        .collect();
                    let outcomes = function.replies(&keyed, answer);
                    for (requests, outcome) in call.iter().zip(outcomes) {
                        match outcome {
                            Ok(acked) => {
                                self.epochs.observe(requests[0].stream, acked.epoch);
                                self.settled(requests, acked, retried)
                            }
                            Err(err) => self.failed(requests, &err),
                        }
                    }
                }
            }
            Err(err) => {
                for requests in &streams {
                    self.failed(requests, &err);
                }
            }
        }
        drop(calls);
        drop(streams);
        release(batch);
    }

    /// Counts one partition's answered requests: done, or refused (logged).
    fn settled(&self, requests: &[AckRequest], acked: Acked, retried: bool) {
        let stream = requests[0].stream;
        // For the logs: the partition, and the key, which names the lane.
        let (shown, key) = (stream.index() % self.partitions.max(1), self.key(stream));
        if acked.xackdel_refused && !self.xackdel_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                queue = &*self.queue,
                key,
                "the server refused XACKDEL although the worker found it at start (a failover to an older server, or a users file rendered without +xackdel); acknowledging with XACK from now on: entries stay until the trimmer removes them",
            );
        }
        if self.function.path() == AckPath::XackDel && !acked.xackdel_refused {
            self.events
                .acked_on_delete(stream, acked.deleted, acked.acked - acked.deleted);
        }
        let mut lost = 0;
        for refused in &acked.refused {
            if refused.owner.is_none() && retried {
                // Most likely acknowledged by the attempt whose reply was lost.
                tracing::debug!(partition = shown, key, stream_id = %refused.id, "already acknowledged");
                continue;
            }
            lost += 1;
            let job_id = requests
                .iter()
                .find(|request| request.id == refused.id)
                .map_or("(unknown)", |request| request.job_id.as_str());
            tracing::warn!(
                queue = &*self.queue,
                partition = shown,
                key,
                job_id = %job_id,
                stream_id = %refused.id,
                owner = refused.owner.as_deref().unwrap_or("(none: no longer pending)"),
                "ack refused: the entry is no longer pending for this worker; its new owner settles it",
            );
        }
        if acked.unaccounted > 0 {
            if retried {
                tracing::debug!(
                    partition = shown,
                    key,
                    entries = acked.unaccounted,
                    "already acknowledged"
                );
            } else {
                lost += acked.unaccounted;
                tracing::warn!(
                    queue = &*self.queue,
                    partition = shown,
                    key,
                    entries = acked.unaccounted,
                    "ack found entries no longer pending: acknowledged or removed by someone other than this worker (an XACK, XGROUP DELCONSUMER or XCLAIM outside queuegen)",
                );
            }
        }
        let done = requests.len() as u64 - lost;
        self.events.acked(done);
        if lost > 0 {
            self.events.ownership_lost(stream, Settlement::Ack, lost);
        }
        tracing::debug!(partition = shown, done, key, "acknowledged");
    }

    /// Counts one partition's requests as failed: they stay pending.
    fn failed(&self, requests: &[AckRequest], err: &Error) {
        let stream = requests[0].stream;
        let entries = requests.len() as u64;
        self.events.ack_failed(stream, entries);
        tracing::error!(
            key = self.key(stream),
            entries,
            error = %err,
            "ack failed after the jobs were done; they stay pending and will be redelivered",
        );
    }

    fn key(&self, stream: StreamSlot) -> &str {
        &self.keys[usize::from(stream.index())]
    }
}

/// Which streams' acks share one call: on a standalone server all of them
/// (one function call per flush, however many partitions and lanes it
/// spans: each call costs the server far more than the `XACK`s it makes),
/// on a Cluster those whose keys share a slot (a call's keys must).
struct CallGroups {
    /// By stream index, the smallest stream index of its group.
    group: Vec<u16>,
}

impl CallGroups {
    /// Groups the streams whose ready keys are `keys` (by stream index).
    fn new(keys: &[String], cluster: bool) -> Self {
        let mut firsts: HashMap<ClusterSlot, u16> = HashMap::new();
        let group = (0..keys.len())
            .map(|index| {
                let index = u16::try_from(index).expect("a queue has at most 16,384 streams");
                if !cluster {
                    return 0;
                }
                // A stream's claims key shares its ready key's hash tag.
                let slot = ClusterSlot::for_key(&keys[usize::from(index)]);
                *firsts.entry(slot).or_insert(index)
            })
            .collect();
        CallGroups { group }
    }

    /// The group of `stream`.
    fn of(&self, stream: StreamSlot) -> u16 {
        self.group[usize::from(stream.index())]
    }
}

/// Frees the slots under one lock and the permits in one step.
fn release(batch: &mut Vec<AckRequest>) {
    let mut permits: Option<OwnedSemaphorePermit> = None;
    let mut slots = Vec::with_capacity(batch.len());
    for request in batch.drain(..) {
        slots.push(request.slot);
        match permits.as_mut() {
            Some(held) => held.merge(request.permit),
            None => permits = Some(request.permit),
        }
    }
    Slot::release_all(slots);
    drop(permits);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_paced_flush_takes_what_arrives_until_its_deadline() {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let start = tokio::time::Instant::now();
        // The timer counts whole milliseconds.
        let deadline = start + Duration::from_millis(10);
        tokio::spawn(async move {
            for n in 0..3u32 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                sender.send(n).unwrap();
            }
            // Kept open: the wait ends at the deadline, not at a closed channel.
            std::future::pending::<()>().await;
        });
        let mut batch = Vec::new();
        receive_until(&mut receiver, &mut batch, 50, deadline, || true).await;
        assert_eq!(batch, [0, 1, 2]);
        assert_eq!(tokio::time::Instant::now(), deadline);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_goes_as_soon_as_it_holds_its_limit() {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        for n in 0..5u32 {
            sender.send(n).unwrap();
        }
        let start = tokio::time::Instant::now();
        let mut batch = Vec::new();
        receive_until(&mut receiver, &mut batch, 4, start + PACE, || true).await;
        assert_eq!(batch, [0, 1, 2, 3]);
        assert_eq!(tokio::time::Instant::now(), start);
    }

    #[tokio::test(start_paused = true)]
    async fn a_linger_ends_at_once_when_no_job_is_in_its_handler() {
        let (_sender, mut receiver) = mpsc::unbounded_channel::<u32>();
        let start = tokio::time::Instant::now();
        let mut batch = Vec::new();
        receive_until(&mut receiver, &mut batch, MAX_FLUSH, start + LINGER, || {
            false
        })
        .await;
        assert!(batch.is_empty());
        assert_eq!(tokio::time::Instant::now(), start);
    }

    #[test]
    fn one_call_takes_every_stream_on_a_server_and_a_slot_s_streams_on_a_cluster() {
        let keys: Vec<String> = ["qg:{q:0}:ready", "qg:{q:1}:ready", "other:{q:0}:ready"]
            .map(str::to_owned)
            .into();
        let of = |groups: &CallGroups| {
            (0..3)
                .map(|i| groups.of(StreamSlot::new(i)))
                .collect::<Vec<_>>()
        };
        assert_eq!(of(&CallGroups::new(&keys, false)), [0, 0, 0]);
        // `{q:0}` and `{q:1}` hash to different slots; the third key shares the first's tag.
        assert_ne!(
            ClusterSlot::for_key(&keys[0]),
            ClusterSlot::for_key(&keys[1])
        );
        assert_eq!(of(&CallGroups::new(&keys, true)), [0, 1, 0]);
    }

    #[test]
    fn a_job_counts_as_in_its_handler_until_its_guard_is_dropped() {
        let handling = Arc::new(Handling::default());
        assert!(!handling.any());
        let first = handling.enter();
        let second = handling.enter();
        drop(first);
        assert!(handling.any());
        drop(second);
        assert!(!handling.any());
    }
}
