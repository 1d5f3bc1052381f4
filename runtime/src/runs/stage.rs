//! A pipeline stage's worker: runs its handler, hands on what it returns, settles the job at its joins, and only then lets the worker ack.

use std::future::Future;
use std::marker::PhantomData;

use crate::envelope::Envelope;
use crate::error::{Error, PipelineError, PublishError};
use crate::functions::RunOutcome;
use crate::handler::{Handler, JobContext};
use crate::outcome::{JobError, Outcome};

use super::handoff::{HandOn, Handoff, Step};
use super::pipeline::PipelineRuntime;
use super::settle::{self, Ended};
use super::summary::{self, RunSummary};

/// Works the jobs of one pipeline stage (envelope `E`). The generated code
/// gives each stage a trait of its own, typed by what it hands on; this is
/// what those are run through.
pub trait StageHandler<E: Envelope>: Send + Sync + 'static {
    /// What a job of the stage hands on ([`HandOn`]): `()` for a stage
    /// without `then` (other than a first stage with joins).
    type Next: HandOn;

    /// Works one job. `summary` is the run's summary when the stage is a
    /// join, `None` otherwise. As for [`Handler::handle`], the job may run
    /// more than once, and hands on the same jobs each time.
    fn handle(
        &self,
        job: E,
        summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> impl Future<Output = Result<Step<Self::Next>, JobError>> + Send;

    /// As [`Handler::reconcile`]: called after `Outcome::Reconcile` or an
    /// ambiguous error, the job staying pending. Does nothing by default.
    fn reconcile(&self, ctx: &JobContext, reason: &str) -> impl Future<Output = ()> + Send {
        let _ = (ctx, reason);
        async {}
    }
}

/// A [`Handler`] for a stage's queue, wrapping its [`StageHandler`]: give
/// it to [`crate::Worker::new`] as any handler.
///
/// Before the worker acks a job, its children are published and the job is
/// settled at every join it concerns; a job about to be dead-lettered is
/// settled `dead` first. Both happen inside the handler's time
/// (`handler.timeout`); a failure of either leaves the job to be retried
/// (transient) or dead-lettered (a hand-off the pipeline refuses).
pub struct StageWorker<E, H> {
    pipeline: PipelineRuntime,
    stage: &'static str,
    handler: H,
    _envelope: PhantomData<fn(E)>,
}

impl<E: Envelope, H: StageHandler<E>> StageWorker<E, H> {
    /// The worker of `stage` in `pipeline`; refused when it is not one of its stages.
    pub fn new(pipeline: PipelineRuntime, stage: &'static str, handler: H) -> crate::Result<Self> {
        pipeline.config(stage)?;
        Ok(StageWorker {
            pipeline,
            stage,
            handler,
            _envelope: PhantomData,
        })
    }

    fn is_first(&self) -> bool {
        self.stage == self.pipeline.graph().first
    }

    fn max_children(&self) -> usize {
        self.pipeline
            .graph()
            .stage(self.stage)
            .map_or(0, |stage| stage.max_children as usize)
    }

    /// The job's run: its own for the first stage, else the one it carries.
    fn run_id<'c>(&self, ctx: &'c JobContext) -> Result<&'c str, JobError> {
        if self.is_first() {
            return Ok(ctx.job_id());
        }
        ctx.run().map(|run| run.run_id.as_str()).ok_or_else(|| {
            JobError::permanent(Error::from(PipelineError::NoRun {
                pipeline: self.pipeline.name().to_owned(),
                stage: self.stage.to_owned(),
                job_id: ctx.job_id().to_owned(),
                first: self.pipeline.graph().first.clone(),
            }))
        })
    }

    async fn hand_on(
        &self,
        next: H::Next,
        result: Option<String>,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        let run_id = self.run_id(ctx)?;
        let count = next.count();
        let max = self.max_children();
        if count > max {
            // Nothing is published: the job is dead-lettered, and settles dead.
            return Ok(Outcome::dead_letter(format!(
                "too_many_children: handed on {count} jobs, more than max_children {max} of stage {}",
                self.stage
            )));
        }
        let mut handoff = Handoff::new(
            &self.pipeline,
            self.stage,
            run_id,
            ctx.job_id(),
            ctx.tenant(),
            ctx.trace_id(),
        );
        next.hand_on(&mut handoff).map_err(classify)?;
        // The first stage's job that hands on nothing at all ends its run
        // there: no join is opened, so nothing is settled.
        if self.is_first() && handoff.children.is_empty() && handoff.join_envelopes.is_empty() {
            return Ok(Outcome::Done);
        }
        handoff.send().await.map_err(classify)?;
        crate::failpoint::failpoint("after_handoff_published");
        let ended = Ended {
            stage: self.stage,
            run_id,
            job_id: ctx.job_id(),
            outcome: RunOutcome::Done,
            result_ref: result.as_deref().unwrap_or(""),
            children: &handoff.children,
            join_envelopes: &handoff.join_envelopes,
        };
        settle::settle(&self.pipeline, &ended, ctx.run_events())
            .await
            .map_err(classify)?;
        crate::failpoint::failpoint("after_run_settled");
        Ok(Outcome::Done)
    }
}

impl<E: Envelope, H: StageHandler<E>> Handler<E> for StageWorker<E, H> {
    const READS_RUN: bool = true;

    async fn handle(&self, job: E, ctx: &JobContext) -> Result<Outcome, JobError> {
        let run_id = self.run_id(ctx)?;
        let is_join = self
            .pipeline
            .graph()
            .stage(self.stage)
            .is_some_and(|stage| stage.join.is_some());
        let summary = if is_join {
            let config = self.pipeline.config(self.stage).map_err(classify)?;
            Some(
                summary::read(&self.pipeline, config, run_id)
                    .await
                    .map_err(JobError::transient)?,
            )
        } else {
            None
        };
        match self.handler.handle(job, summary, ctx).await? {
            Step::HandOn { next, result } => self.hand_on(next, result, ctx).await,
            Step::Outcome(Outcome::Done) if !self.is_first() => {
                // A later stage's job that hands on nothing still settles.
                self.settle_done(ctx, run_id).await
            }
            Step::Outcome(outcome) => Ok(outcome),
        }
    }

    fn reconcile(&self, ctx: &JobContext, reason: &str) -> impl Future<Output = ()> + Send {
        self.handler.reconcile(ctx, reason)
    }

    async fn dead_lettering(&self, ctx: &JobContext) -> crate::Result<()> {
        let Ok(run_id) = self.run_id(ctx) else {
            // A job outside any run: there is nothing to settle.
            return Ok(());
        };
        let ended = Ended {
            stage: self.stage,
            run_id,
            job_id: ctx.job_id(),
            outcome: RunOutcome::Dead,
            result_ref: "",
            children: &[],
            join_envelopes: &[],
        };
        settle::settle(&self.pipeline, &ended, ctx.run_events()).await
    }
}

impl<E: Envelope, H: StageHandler<E>> StageWorker<E, H> {
    async fn settle_done(&self, ctx: &JobContext, run_id: &str) -> Result<Outcome, JobError> {
        let ended = Ended {
            stage: self.stage,
            run_id,
            job_id: ctx.job_id(),
            outcome: RunOutcome::Done,
            result_ref: "",
            children: &[],
            join_envelopes: &[],
        };
        settle::settle(&self.pipeline, &ended, ctx.run_events())
            .await
            .map_err(classify)?;
        crate::failpoint::failpoint("after_run_settled");
        Ok(Outcome::Done)
    }
}

/// A hand-off the pipeline or the queue refuses would be refused again:
/// permanent. Anything else (a connection, a failover) is worth a retry.
fn classify(err: Error) -> JobError {
    match err {
        Error::Pipeline(_)
        | Error::Decode(_)
        | Error::Publish(
            PublishError::PayloadTooLarge { .. }
            | PublishError::EmptyJobId { .. }
            | PublishError::UnknownLane { .. }
            | PublishError::InvalidJob { .. },
        ) => JobError::permanent(err),
        err => JobError::transient(err),
    }
}
