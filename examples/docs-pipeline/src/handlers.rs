//! Small handlers for the four queues. Each records its effect under the job's
//! id in the runtime's Redis result store, so a redelivered job finds the effect
//! and does not repeat it.

use std::time::Duration;

use queuegen_runtime::{JobContext, JobError, Outcome, Redis, RedisResults, Results};

use crate::queues::envelopes::NotificationRequestedChannel;
use crate::queues::{export, notification, ocr, reconciliation};

/// Where handlers store their results: `docs-pipeline:results:{queue}:{job_id}`,
/// kept longer than any queue retains or replays a job.
pub type ResultStore = RedisResults;

const RESULT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Stores `value` as the job's result unless an earlier delivery stored one;
/// true if this delivery did.
async fn record_once(
    results: &ResultStore,
    ctx: &JobContext,
    value: String,
) -> Result<bool, JobError> {
    let committed = results
        .commit(ctx.queue(), ctx.job_id(), value.as_bytes())
        .await
        .map_err(JobError::transient)?;
    Ok(!committed.was_redelivery())
}

pub struct OcrHandler {
    pub results: ResultStore,
}

impl ocr::Handler for OcrHandler {
    async fn handle(&self, job: ocr::OcrRequested, ctx: &JobContext) -> Result<Outcome, JobError> {
        // Stand-in for real text extraction: a little work proportional to the pages.
        let pages = job.pages.unwrap_or(1);
        tokio::time::sleep(Duration::from_millis(u64::from(pages.min(20)))).await;
        let text = format!(
            "{} pages of {} ({:?})",
            pages, job.subject_ref, job.priority
        );
        if !record_once(&self.results, ctx, text).await? {
            tracing::info!(
                job_id = ctx.job_id(),
                "ocr result already stored; redelivery"
            );
        }
        Ok(Outcome::Done)
    }
}

pub struct NotificationHandler {
    pub results: ResultStore,
}

impl notification::Handler for NotificationHandler {
    async fn handle(
        &self,
        job: notification::NotificationRequested,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        if job.template.is_empty() {
            return Err(JobError::permanent("notification without a template"));
        }
        let via = match job.channel {
            NotificationRequestedChannel::Email => "email",
            NotificationRequestedChannel::Sms => "sms",
            NotificationRequestedChannel::Push => "push",
        };
        let sent = format!("{} via {via} to {}", job.template, job.recipient_ref);
        record_once(&self.results, ctx, sent).await?;
        Ok(Outcome::Done)
    }
}

pub struct ExportHandler {
    pub results: ResultStore,
}

impl export::Handler for ExportHandler {
    async fn handle(
        &self,
        job: export::ExportRequested,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        let file = format!(
            "exports/{}.{:?} (rows <= {}, requested {})",
            job.export_ref,
            job.format,
            job.row_limit.map_or("all".to_owned(), |n| n.to_string()),
            job.requested_at
        );
        record_once(&self.results, ctx, file).await?;
        Ok(Outcome::Done)
    }
}

pub struct ReconciliationHandler {
    pub results: ResultStore,
}

impl reconciliation::Handler for ReconciliationHandler {
    async fn handle(
        &self,
        job: reconciliation::ReconciliationRequested,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        if job.window_end < job.window_start {
            return Err(JobError::permanent(
                "reconciliation window ends before it starts",
            ));
        }
        let summary = format!(
            "{} from {} to {}",
            job.ledger_ref, job.window_start, job.window_end
        );
        record_once(&self.results, ctx, summary).await?;
        Ok(Outcome::Done)
    }
}

/// Connects to Redis for queue traffic; a thin wrapper so binaries share the setup.
pub async fn connect(redis_url: &str) -> anyhow::Result<(Redis, ResultStore)> {
    let redis = Redis::connect(redis_url).await?;
    let results = RedisResults::new(&redis, "docs-pipeline", RESULT_TTL);
    Ok((redis, results))
}
