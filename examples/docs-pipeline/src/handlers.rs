//! Small handlers for the four queues. Each records its effect under the job's
//! id with `SET NX`, so a redelivered job finds the effect and does not repeat it.

use std::time::Duration;

use queuegen_runtime::{JobContext, JobError, Outcome, Redis};
use redis::AsyncCommands;

use crate::queues::envelopes::NotificationRequestedChannel;
use crate::queues::{export, notification, ocr, reconciliation};

/// Where handlers store their results: a key per queue and job id.
#[derive(Clone)]
pub struct ResultStore {
    connection: redis::aio::ConnectionManager,
}

impl ResultStore {
    pub async fn open(redis_url: &str) -> anyhow::Result<Self> {
        let client = redis::Client::open(redis_url)?;
        Ok(ResultStore {
            connection: client.get_connection_manager().await?,
        })
    }

    /// Stores `value` as the job's result unless one exists; true if this call stored it.
    async fn record_once(
        &self,
        queue: &str,
        ctx: &JobContext,
        value: String,
    ) -> Result<bool, JobError> {
        let key = format!("docs-pipeline:results:{queue}:{}", ctx.job_id());
        let mut connection = self.connection.clone();
        let stored: bool = connection.set_nx(&key, value).await?;
        Ok(stored)
    }
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
        if !self.results.record_once("ocr", ctx, text).await? {
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
        self.results.record_once("notification", ctx, sent).await?;
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
        self.results.record_once("export", ctx, file).await?;
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
        self.results
            .record_once("reconciliation", ctx, summary)
            .await?;
        Ok(Outcome::Done)
    }
}

/// Connects to Redis for queue traffic; a thin wrapper so binaries share the setup.
pub async fn connect(redis_url: &str) -> anyhow::Result<(Redis, ResultStore)> {
    Ok((
        Redis::connect(redis_url).await?,
        ResultStore::open(redis_url).await?,
    ))
}
