//! Handler of the `document-ready` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::runs::{RunSummary, Step};
use queuegen_runtime::{JobContext, JobError};

use crate::queues::document_ready::{self, DocumentReady};

pub struct DocumentReadyHandler;

impl document_ready::Handler for DocumentReadyHandler {
    async fn handle(
        &self,
        job: DocumentReady,
        summary: RunSummary,
        ctx: &JobContext,
    ) -> Result<Step<document_ready::Next>, JobError> {
        // A redelivered job must not repeat its effect: look up a durable
        // result by ctx.job_id() first. Then return Step::done(), with
        // `.with_result(..)` to name the result in the joins' summaries.
        let _ = (job, summary, ctx);
        Err(JobError::transient("this handler is not written yet"))
    }
}
