//! Small handlers for the seven queues, each making its effect once across redeliveries.
//!
//! `ocr`, `index`, `thumbnail`, `document-ready` and `notification` record
//! their effect under the job's id in the runtime's Redis result store. The
//! first four are the `documents` pipeline: OCR hands one index job per page
//! and a thumbnail job on, and `document-ready` runs once per document when
//! both are done, with the run's summary, and asks for the owner's
//! notification. `export` and `reconciliation` change rows
//! in PostgreSQL (spec `results: postgres`): the change and the job's marker
//! commit in one transaction, so a redelivered job finds the marker and
//! does not repeat the change. `reconciliation` also reports to a ledger
//! service outside that transaction, guarded by a fence token.

use std::time::Duration;

use queuegen_runtime::postgres::{Begun, PgResults, Postgres};
use queuegen_runtime::runs::{RunSummary, Step};
use queuegen_runtime::{
    JobContext, JobError, NewJob, Outcome, Producer, Redis, RedisResults, Results,
};

use crate::queues::envelopes::{
    DocumentReady, IndexRequested, NotificationRequested, NotificationRequestedChannel,
    ThumbnailRequested,
};
use crate::queues::{document_ready, export, index, notification, ocr, reconciliation, thumbnail};

/// Where handlers store their results: `work:results:{queue}:{job_id}`, under
/// the spec's `redis.key_prefix` (the only keys the generated worker user may
/// touch), kept longer than any queue retains or replays a job.
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
    async fn handle(
        &self,
        job: ocr::OcrRequested,
        ctx: &JobContext,
    ) -> Result<Step<ocr::Next>, JobError> {
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
        // Handed on after the text is stored, the same on every delivery:
        // one index job per page, a thumbnail, and the document's ready job,
        // which runs once both are done. More than `max_children` (500
        // pages and the thumbnail) dead-letters the document instead.
        let subject = job.subject_ref;
        Ok(Step::hand_on(ocr::Next {
            index: (0..pages)
                .map(|page| IndexRequested {
                    subject_ref: subject.clone(),
                    page,
                })
                .collect(),
            thumbnail: vec![ThumbnailRequested {
                subject_ref: subject.clone(),
            }],
            document_ready: DocumentReady {
                subject_ref: subject,
            },
        }))
    }
}

pub struct IndexHandler {
    pub results: ResultStore,
}

impl index::Handler for IndexHandler {
    async fn handle(
        &self,
        job: IndexRequested,
        ctx: &JobContext,
    ) -> Result<Step<index::Next>, JobError> {
        let entry = format!("page {} of {} indexed", job.page, job.subject_ref);
        record_once(&self.results, ctx, entry).await?;
        // The ready job's summary names each page by it.
        Ok(Step::done().with_result(format!("page-{}", job.page)))
    }
}

pub struct ThumbnailHandler {
    pub results: ResultStore,
}

impl thumbnail::Handler for ThumbnailHandler {
    async fn handle(
        &self,
        job: ThumbnailRequested,
        ctx: &JobContext,
    ) -> Result<Step<thumbnail::Next>, JobError> {
        let file = format!("thumbnails/{}.png", job.subject_ref);
        record_once(&self.results, ctx, file.clone()).await?;
        Ok(Step::done().with_result(file))
    }
}

/// Runs once per document, after its pages are indexed and its thumbnail
/// made: asks for the owner's notification.
pub struct DocumentReadyHandler {
    pub notifications: Producer<NotificationRequested>,
}

impl document_ready::Handler for DocumentReadyHandler {
    async fn handle(
        &self,
        job: DocumentReady,
        summary: RunSummary,
        ctx: &JobContext,
    ) -> Result<Step<document_ready::Next>, JobError> {
        // `on_dead_letter: continue`: a page that could not be indexed is
        // named here rather than holding the document back.
        let template = match summary.dead_lettered().count() {
            0 => "document_ready",
            _ => "document_partly_indexed",
        };
        tracing::info!(
            subject_ref = job.subject_ref,
            finished = summary.finished().count(),
            dead_lettered = summary.dead_lettered().count(),
            "document ready"
        );
        // Under this job's ID: the notification queue's dedup absorbs the
        // repeat of a delivery that crashed before its ack.
        let notification = NotificationRequested {
            recipient_ref: format!("owner@{}", ctx.tenant()),
            channel: NotificationRequestedChannel::Email,
            template: template.to_owned(),
            urgent: false,
        };
        self.notifications
            .publish(
                NewJob::new(ctx.job_id(), ctx.tenant(), notification).with_trace_id(ctx.trace_id()),
            )
            .await
            .map_err(JobError::transient)?;
        Ok(Step::done())
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

/// Writes each export's row in the job's transaction.
pub struct ExportHandler {
    pub results: PgResults,
}

impl export::Handler for ExportHandler {
    async fn handle(
        &self,
        job: export::ExportRequested,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        let tx = match self.results.begin(ctx).await? {
            Begun::New(tx) => tx,
            // An earlier delivery wrote this export and committed: done.
            Begun::Finished(_) => return Ok(Outcome::Done),
        };
        let file = format!(
            "exports/{}.{:?} (rows <= {})",
            job.export_ref,
            job.format,
            job.row_limit.map_or("all".to_owned(), |n| n.to_string()),
        );
        // A database error returned with `?` is retried or dead-lettered by
        // its SQLSTATE class (a second export of one export_ref breaks the
        // primary key: permanent, dead-lettered with the constraint named).
        let insert = tx
            .prepare_cached("INSERT INTO exports (export_ref, file, job_id) VALUES ($1, $2, $3)")
            .await?;
        tx.execute(&insert, &[&job.export_ref, &file, &ctx.job_id()])
            .await?;
        tx.commit(file.as_bytes()).await?;
        Ok(Outcome::Done)
    }
}

/// Reconciles a ledger's window: reports the result to the ledger service
/// (outside the database transaction, fenced) and records the run with the
/// job's marker.
pub struct ReconciliationHandler {
    pub results: PgResults,
    /// The ledger service's connection (here a table of the same database,
    /// written on its own connection, as another system would be).
    pub ledger: Postgres,
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
        // The token first, before anything else: a delivery that stalls
        // past claim.min_idle holds an older token than the one that
        // claimed its job after it, and the ledger service refuses its
        // late report.
        let fence = self.results.fence(ctx).await?;
        let tx = match self.results.begin(ctx).await? {
            Begun::New(tx) => tx,
            Begun::Finished(_) => return Ok(Outcome::Done),
        };
        let until = job.window_end.to_system_time();
        let ledger = self.ledger.pool().get().await?;
        let accepted = ledger
            .execute(
                // A token orders the deliveries of one job: another job's
                // report (another window of the ledger) is not fenced by it.
                "INSERT INTO ledger_snapshots (ledger_ref, reconciled_until, fence, job_id)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (ledger_ref) DO UPDATE
                 SET reconciled_until = EXCLUDED.reconciled_until, fence = EXCLUDED.fence,
                     job_id = EXCLUDED.job_id
                 WHERE ledger_snapshots.job_id <> EXCLUDED.job_id
                    OR ledger_snapshots.fence < EXCLUDED.fence",
                &[&job.ledger_ref, &until, &fence.token(), &ctx.job_id()],
            )
            .await?;
        if accepted == 0 {
            // A newer delivery of this job reported already: it owns the
            // job now, and this delivery's outcome would be refused anyway.
            return Ok(Outcome::reconcile("fenced out by a newer delivery"));
        }
        tx.execute(
            "INSERT INTO reconciliation_runs (job_id, ledger_ref, window_start, window_end, fence)
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &ctx.job_id(),
                &job.ledger_ref,
                &job.window_start.to_system_time(),
                &until,
                &fence.token(),
            ],
        )
        .await?;
        tx.commit(b"").await?;
        Ok(Outcome::Done)
    }
}

/// The handler of `document-ready`, publishing to `notification`.
pub fn document_ready_handler(redis: &Redis) -> DocumentReadyHandler {
    DocumentReadyHandler {
        notifications: notification::producer(redis),
    }
}

/// Connects to Redis for queue traffic; a thin wrapper so binaries share the setup.
pub async fn connect(redis_url: &str) -> anyhow::Result<(Redis, ResultStore)> {
    let redis = Redis::connect(redis_url).await?;
    // The spec's key prefix (every queue's is the same): redis/users.acl
    // gives the worker user `work:results:*`, nothing outside `work:`.
    let results = RedisResults::new(&redis, ocr::CONFIG.key_prefix, RESULT_TTL);
    Ok((redis, results))
}
