//! Handler of the `ocr` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::runs::Step;
use queuegen_runtime::{JobContext, JobError};

use crate::queues::ocr::{self, OcrRequested};

pub struct OcrHandler;

impl ocr::Handler for OcrHandler {
    async fn handle(
        &self,
        job: OcrRequested,
        ctx: &JobContext,
    ) -> Result<Step<ocr::Next>, JobError> {
        // A redelivered job must not repeat its effect: look up a durable
        // result by ctx.job_id() first. Then return Step::hand_on with what
        // the job hands on (ocr::Next), the same on every delivery.
        let _ = (job, ctx);
        Err(JobError::transient("this handler is not written yet"))
    }
}
