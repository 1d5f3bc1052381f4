//! The worker's core: what its loops, job tasks and shutdown share that does not depend on the envelope or the handler.
//!
//! The leadership, pause, promotion and trimmer loops and the shutdown
//! take a [`Core`] alone, so they are compiled once, whatever the queue's
//! envelope and handler; only what starts or runs jobs (the intake,
//! recovery, the job tasks) takes the generic `Runner`, which adds the handler.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::acks::{AckSender, Handling};
use super::epochs::Epochs;
use super::events::Events;
use super::in_flight::InFlight;
use super::leadership::Leadership;
use super::pause::Paused;
use super::shutdown::Flag;
use crate::config::QueueConfig;
use crate::connect::{Connection, Redis};
use crate::handler::Ownership;
use crate::stream_slot::StreamSlot;

/// Longest [`Core::reserve`] waits for half its permits while jobs hold them.
const RESERVE_LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// State shared by every loop and job task of one running worker.
pub(super) struct Core {
    /// The deployment, for what must ask every primary (the trimmer's probe).
    pub redis: Redis,
    pub config: QueueConfig,
    pub consumer: Arc<str>,
    /// The multiplexed connection every command shares (acks, claims,
    /// function calls, leases, pause flags), never a blocking read, which
    /// would hold it until it returns: those get connections of their own.
    pub multiplexed: Connection,
    /// The ready stream key of every stream of the queue (a lane's
    /// partition), by stream number. Without lanes a stream is a partition;
    /// the loops' `partition` arguments are stream numbers throughout.
    pub ready_keys: Arc<[String]>,
    /// The claim epoch key of every stream (see `epochs`), by stream number.
    pub claims_keys: Arc<[String]>,
    /// The `partition` span of every stream this worker reads (a child of
    /// the worker's span, `Span::none()` for the others), by stream number:
    /// each job's span nests under its stream's.
    pub stream_spans: Box<[tracing::Span]>,
    /// Each partition's claim epoch as last seen; reads stamp their entries with it.
    pub epochs: Arc<Epochs>,
    /// The partitions whose recovery and promotion this worker runs now.
    pub leadership: Leadership,
    /// Which partitions are paused: the intake reads no new entries of them.
    pub paused: Paused,
    /// What the running jobs hold and hand on.
    pub jobs: Jobs,
    /// Where every event is reported: the report's counters and the metrics.
    pub events: Arc<Events>,
    /// Whether the intake's last read succeeded and it still reads: `/readyz`.
    pub reading: Arc<AtomicBool>,
    /// Raised when shutdown begins: take no new permits, start no new reads.
    pub stop: Flag,
    /// Raised when the shutdown budget is spent: abandon whatever still runs.
    pub cancel: Flag,
}

/// What the worker's jobs hold while they run, and where a `Done` job hands it on.
pub(super) struct Jobs {
    /// One permit per job that may run at once, held until the job is settled.
    pub permits: Arc<Semaphore>,
    /// Every entry whose job is not settled yet, so that recovery does not
    /// start a second task for an entry this worker is still running.
    pub in_flight: Arc<InFlight>,
    /// The jobs in their handlers now; the acker waits briefly for their acks.
    pub handling: Arc<Handling>,
    /// Where job tasks send `Done` entries to be acknowledged in groups.
    pub acker: AckSender,
    /// What every job's context shares to check and renew its ownership.
    pub ownership: Arc<Ownership>,
}

impl Core {
    /// The span the jobs of `stream` run under.
    pub(super) fn stream_span(&self, stream: StreamSlot) -> &tracing::Span {
        &self.stream_spans[usize::from(stream.index())]
    }

    /// Waits for one free permit (or returns `None` once `stop` is raised),
    /// then takes whatever else is free, up to `max` in total.
    pub(super) async fn reserve(&self, max: usize) -> Option<Vec<OwnedSemaphorePermit>> {
        let permits = &self.jobs.permits;
        let first = tokio::select! {
            biased;
            () = self.stop.raised() => return None,
            permit = permits.clone().acquire_owned() => permit.ok()?,
        };
        let mut taken = vec![first];
        self.take_free(&mut taken, max);
        // Fewer than half free while jobs hold the rest: those jobs' acks
        // free theirs within moments, so wait briefly for a fuller read
        // rather than send one for a few entries (each read and each ack
        // call costs the server as much as dozens of entries do).
        if taken.len() < max / 2 {
            let linger = tokio::time::sleep(RESERVE_LINGER);
            tokio::pin!(linger);
            while taken.len() < max / 2 {
                tokio::select! {
                    biased;
                    () = self.stop.raised() => break,
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => taken.push(permit),
                        Err(_) => break,
                    },
                    () = &mut linger => break,
                }
                self.take_free(&mut taken, max);
            }
        }
        Some(taken)
    }

    /// Adds to `taken` whatever permits are free now, up to `max` in all.
    fn take_free(&self, taken: &mut Vec<OwnedSemaphorePermit>, max: usize) {
        while taken.len() < max {
            match self.jobs.permits.clone().try_acquire_owned() {
                Ok(permit) => taken.push(permit),
                Err(_) => break,
            }
        }
    }

    /// The ready stream key of `stream`.
    pub(super) fn ready_key(&self, stream: StreamSlot) -> &str {
        &self.ready_keys[usize::from(stream.index())]
    }

    /// The claim epoch key of `stream`.
    pub(super) fn claims_key(&self, stream: StreamSlot) -> &str {
        &self.claims_keys[usize::from(stream.index())]
    }
}
