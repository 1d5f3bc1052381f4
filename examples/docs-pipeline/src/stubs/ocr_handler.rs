//! Handler of the `ocr` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::{JobContext, JobError, Outcome};

use crate::queues::ocr::{self, OcrRequested};

pub struct OcrHandler;

impl ocr::Handler for OcrHandler {
    async fn handle(&self, job: OcrRequested, ctx: &JobContext) -> Result<Outcome, JobError> {
        // A redelivered job must not repeat its effect: look up a durable
        // result by ctx.job_id() first, and return Done once the effect is stored.
        let _ = (job, ctx);
        Err(JobError::transient("this handler is not written yet"))
    }
}
