//! Group commit of acknowledgements: job tasks hand over `Done` entries, one
//! task sends them as one `XACK key group id...` per stream.
//!
//! A job task hands over its entry only after its handler returned `Done`,
//! together with its permit and its in-flight slot, and ends. The acker
//! counts the job done, and releases the permit and the slot, only once the
//! `XACK` carrying it was answered: batching changes when an ack is sent,
//! never whether, and the worker never runs more than its concurrency of
//! unsettled jobs. While one `XACK` is on the wire the next requests queue
//! up: under load a flush carries many entries, when idle an ack goes out at
//! once (no timer). A flush releases its permits in one step, so the intake
//! wakes to a whole batch of free permits rather than to one.

use std::sync::Arc;

use crate::connect::Connection;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::in_flight::Slot;
use super::job::with_retries;
use super::meter::Meter;
use super::Counters;
use crate::error::Error;

/// Most entries one flush takes; bounds the size of one pipeline.
const MAX_FLUSH: usize = 1024;

/// One `Done` entry waiting for its `XACK`.
pub(super) struct AckRequest {
    pub partition: u16,
    pub id: String,
    /// The job's permit, released once the `XACK` was answered.
    pub permit: OwnedSemaphorePermit,
    /// The job's in-flight entry, released with the permit.
    pub slot: Slot,
}

/// Where job tasks send their acks.
pub(super) type AckSender = mpsc::UnboundedSender<AckRequest>;

/// What the acker needs of its worker.
pub(super) struct Acker {
    pub conn: Connection,
    pub group: &'static str,
    /// The ready stream key of every partition of the queue, by partition.
    pub keys: Arc<[String]>,
    pub counters: Arc<Counters>,
    pub meter: Arc<Meter>,
}

/// Starts the acker; it ends when every sender is gone and the queue is drained.
pub(super) fn start(acker: Acker) -> AckSender {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(run(receiver, acker));
    sender
}

async fn run(mut receiver: mpsc::UnboundedReceiver<AckRequest>, acker: Acker) {
    let mut batch = Vec::with_capacity(MAX_FLUSH);
    while receiver.recv_many(&mut batch, MAX_FLUSH).await > 0 {
        // Jobs of the same read finishing right now join this flush: yield
        // while the batch keeps growing (a few times at most).
        for _ in 0..4 {
            tokio::task::yield_now().await;
            let before = batch.len();
            while batch.len() < MAX_FLUSH {
                match receiver.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            if batch.len() == before {
                break;
            }
        }
        acker.flush(&mut batch).await;
    }
}

impl Acker {
    /// Sends one `XACK` per stream in one pipeline, then settles every request.
    async fn flush(&self, batch: &mut Vec<AckRequest>) {
        let entries = batch.len();
        // One XACK per partition, in first-seen order.
        let mut streams: Vec<(u16, Vec<&str>)> = Vec::new();
        for request in batch.iter() {
            match streams.iter_mut().find(|(p, _)| *p == request.partition) {
                Some((_, ids)) => ids.push(&request.id),
                None => streams.push((request.partition, vec![&request.id])),
            }
        }
        let mut pipe = redis::pipe();
        for (partition, ids) in &streams {
            pipe.cmd("XACK")
                .arg(&self.keys[usize::from(*partition)])
                .arg(self.group)
                .arg(ids);
        }
        let answer: Result<Vec<u64>, Error> = with_retries("XACK", || {
            let mut conn = self.conn.clone();
            let pipe = &pipe;
            async move {
                pipe.query_async(&mut conn)
                    .await
                    .map_err(|err| Error::redis(format!("XACK of {entries} entries"), err))
            }
        })
        .await;

        match answer {
            Ok(counts) => {
                for ((partition, ids), acked) in streams.iter().zip(counts) {
                    let sent = ids.len() as u64;
                    let missing = sent - acked.min(sent);
                    if missing > 0 {
                        // Claimed and finished elsewhere meanwhile; harmless, as
                        // effects are idempotent by job_id. XACK does not say which.
                        tracing::warn!(
                            key = %self.keys[usize::from(*partition)],
                            missing,
                            "entries were already acknowledged elsewhere"
                        );
                    }
                }
                Counters::add(&self.counters.done, entries as u64);
                tracing::debug!(entries, streams = streams.len(), "acknowledged");
            }
            Err(err) => {
                Counters::add(&self.counters.failed, entries as u64);
                for (partition, ids) in &streams {
                    self.meter.ack_failed(*partition, ids.len() as u64);
                }
                let keys: Vec<&str> = streams
                    .iter()
                    .map(|(partition, _)| self.keys[usize::from(*partition)].as_str())
                    .collect();
                tracing::error!(
                    ?keys,
                    entries,
                    error = %err,
                    "XACK failed after the jobs were done; they stay pending and will be redelivered",
                );
            }
        }
        drop(streams);
        release(batch);
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
