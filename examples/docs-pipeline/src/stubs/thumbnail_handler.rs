//! Handler of the `thumbnail` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::runs::Step;
use queuegen_runtime::{JobContext, JobError};

use crate::queues::thumbnail::{self, ThumbnailRequested};

pub struct ThumbnailHandler;

impl thumbnail::Handler for ThumbnailHandler {
    async fn handle(
        &self,
        job: ThumbnailRequested,
        ctx: &JobContext,
    ) -> Result<Step<thumbnail::Next>, JobError> {
        // A redelivered job must not repeat its effect: look up a durable
        // result by ctx.job_id() first. Then return Step::done(), with
        // `.with_result(..)` to name the result in the joins' summaries.
        let _ = (job, ctx);
        Err(JobError::transient("this handler is not written yet"))
    }
}
