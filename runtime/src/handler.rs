//! What application code implements to work a queue, and what it learns about each job.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::config::QueueConfig;
use crate::connect::Connection;
use crate::envelope::{Envelope, Header, RunLink};
use crate::error::Result;
use crate::field::Timestamp;
use crate::outcome::{JobError, Outcome};
use crate::stream_slot::{Partition, StreamSlot};
use crate::transitions::{self, Renewal};

/// Everything about one delivery of a job except its body.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) header: Header,
    /// The job's run, for a job a pipeline stage handed on (read only for
    /// the queues of pipeline stages: [`Handler::READS_RUN`]).
    pub(crate) run: Option<RunLink>,
    pub(crate) stream_id: String,
    /// The stream of the job's lane and partition ([`QueueConfig::streams`]).
    pub(crate) stream: StreamSlot,
    /// The partition's claim epoch before this delivery's read (`None`:
    /// unknown); its ack carries it.
    pub(crate) claim_epoch: Option<u64>,
    /// Shared with the worker: cloned per job, never copied.
    pub(crate) owner: Arc<Ownership>,
}

/// What the jobs of one worker share to ask about, and renew, their pending
/// entries: the worker's consumer name, its queue and its shared connection.
pub(crate) struct Ownership {
    pub(crate) consumer: Arc<str>,
    pub(crate) config: QueueConfig,
    pub(crate) conn: Connection,
    /// Where a pipeline stage's handler counts its runs' events.
    pub(crate) run_events: crate::runs::RunEvents,
}

impl fmt::Debug for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ownership")
            .field("consumer", &self.consumer)
            .field("group", &self.config.group)
            .finish_non_exhaustive()
    }
}

impl JobContext {
    /// The job's stable identity: use it for idempotency, never the stream ID.
    pub fn job_id(&self) -> &str {
        &self.header.job_id
    }

    pub fn tenant(&self) -> &str {
        &self.header.tenant
    }

    pub fn trace_id(&self) -> &str {
        &self.header.trace_id
    }

    /// Application attempt, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.header.attempt
    }

    pub fn created_at(&self) -> Timestamp {
        self.header.created_at
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The pipeline run this job belongs to and the job that handed it on;
    /// `None` for a job that starts a run (its `job_id` is the run's ID) or
    /// a queue outside any pipeline.
    pub fn run(&self) -> Option<&RunLink> {
        self.run.as_ref()
    }

    /// Where a stage's handler counts its runs' events.
    pub(crate) fn run_events(&self) -> &crate::runs::RunEvents {
        &self.owner.run_events
    }

    /// The ID of the pipeline run this job belongs to: its run's, or its
    /// own `job_id` when it starts one.
    pub fn run_id(&self) -> &str {
        self.run.as_ref().map_or(self.job_id(), |run| &run.run_id)
    }

    /// The stream entry this delivery came from.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    pub fn partition(&self) -> Partition {
        self.owner.config.partition_of_stream(self.stream)
    }

    /// The priority lane the job was published to (`lanes:`); `None` for a
    /// queue without lanes. Its retries and replays stay in it.
    pub fn lane(&self) -> Option<&str> {
        self.owner
            .config
            .lane_of_stream(self.stream)
            .map(|lane| &*lane.name)
    }

    pub fn queue(&self) -> &str {
        &self.owner.config.queue
    }

    /// The consumer (worker process) this delivery belongs to.
    pub fn consumer(&self) -> &str {
        &self.owner.consumer
    }

    /// Whether this delivery still owns its job: the entry is still pending
    /// for this worker's consumer (one `XPENDING`). `false` once another
    /// worker claimed it (this process stalled past `claim.min_idle`) or it
    /// was settled: this delivery's outcome will then be refused
    /// (`QG_NOT_OWNER`, nothing written), and the job is the new owner's.
    ///
    /// A `true` is what was true when Redis answered, not a lease: the
    /// process may stall right after it. Guard effects with idempotency by
    /// `job_id` or a fence the target enforces (docs/operations/ownership.md).
    pub async fn still_owner(&self) -> Result<bool> {
        let owner = transitions::pending_owner(
            &mut self.owner.conn.clone(),
            &self.owner.config,
            self.stream,
            &self.stream_id,
        )
        .await?;
        Ok(owner.as_deref() == Some(self.consumer()))
    }

    /// Keeps this job from being claimed by another worker for another
    /// `claim.min_idle`, for a job that may run close to it: resets the
    /// entry's idle time if it is still pending for this consumer (the
    /// library's `renew`: `XCLAIM` to itself with `JUSTID`, in one atomic
    /// call with the owner check, so no delivery is counted).
    ///
    /// `Ok(false)` when this delivery no longer owns the job: nothing is
    /// changed, and a job another worker claimed is never taken back. It does
    /// not extend `handler.timeout`, and like [`JobContext::still_owner`] it
    /// is no fence for effects.
    pub async fn renew(&self) -> Result<bool> {
        let renewal = transitions::renew(
            &mut self.owner.conn.clone(),
            &self.owner.config,
            self.stream,
            self.consumer(),
            &self.stream_id,
        )
        .await?;
        match renewal {
            Renewal::Renewed => Ok(true),
            Renewal::NotOwner { owner } => {
                tracing::warn!(
                    queue = self.queue(),
                    partition = self.partition().index(),
                    lane = self.lane(),
                    job_id = self.job_id(),
                    stream_id = %self.stream_id,
                    owner = owner.as_deref().unwrap_or("(none: no longer pending)"),
                    "renew: this delivery no longer owns its job",
                );
                Ok(false)
            }
        }
    }
}

/// Works jobs of envelope `E`.
///
/// `Ok(Outcome::Done)` is acknowledged; a retry or a dead letter is moved
/// atomically by the Function library; an ambiguous outcome, a panic or a
/// crash leaves the job pending for redelivery (see [`Outcome`]). A job can
/// therefore run more than once: make the effect idempotent by `ctx.job_id()`.
///
/// The jobs of one read run concurrently in one task: a handler that
/// computes for long (rather than awaiting I/O) should move that work to
/// `tokio::task::spawn_blocking`, or it delays the other jobs of its read.
pub trait Handler<E: Envelope>: Send + Sync + 'static {
    /// Whether the worker reads each job's run ([`JobContext::run`]): only
    /// the handlers of pipeline stages need it.
    #[doc(hidden)]
    const READS_RUN: bool = false;

    fn handle(
        &self,
        job: E,
        ctx: &JobContext,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send;

    /// Called after `handle` returned `Outcome::Reconcile` or an ambiguous
    /// error: the effect may or may not have happened. The job stays pending
    /// and is redelivered after `claim.min_idle`; use this hook to start
    /// reconciliation (look the effect up, alert). It runs under the handler
    /// timeout; its panics are logged. The default does nothing.
    fn reconcile(&self, ctx: &JobContext, reason: &str) -> impl Future<Output = ()> + Send {
        let _ = (ctx, reason);
        async {}
    }

    /// Called before the job is dead-lettered by its outcome (a dead
    /// letter, a permanent error, its last attempt failed); the dead letter
    /// waits for it. An error leaves the job pending, for redelivery. A
    /// pipeline stage settles the job as dead at its joins here. The
    /// default does nothing.
    #[doc(hidden)]
    fn dead_lettering(&self, ctx: &JobContext) -> impl Future<Output = Result<()>> + Send {
        let _ = ctx;
        async { Ok(()) }
    }
}
