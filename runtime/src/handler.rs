//! What application code implements to work a queue, and what it learns about each job.

use std::future::Future;

use crate::envelope::{Envelope, Header};
use crate::field::Timestamp;
use crate::outcome::{JobError, Outcome};

/// Everything about one delivery of a job except its body.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) header: Header,
    pub(crate) stream_id: String,
    pub(crate) partition: u16,
    pub(crate) queue: &'static str,
    /// Shared with the worker: cloned per job, never copied.
    pub(crate) consumer: std::sync::Arc<str>,
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

    /// The stream entry this delivery came from.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    pub fn partition(&self) -> u16 {
        self.partition
    }

    pub fn queue(&self) -> &'static str {
        self.queue
    }

    /// The consumer (worker process) this delivery belongs to.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

/// Works jobs of envelope `E`.
///
/// `Ok(Outcome::Done)` is acknowledged; a retry or a dead letter is moved
/// atomically by the Function library; an ambiguous outcome, a panic or a
/// crash leaves the job pending for redelivery (see [`Outcome`]). A job can
/// therefore run more than once: make the effect idempotent by `ctx.job_id()`.
pub trait Handler<E: Envelope>: Send + Sync + 'static {
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
}
