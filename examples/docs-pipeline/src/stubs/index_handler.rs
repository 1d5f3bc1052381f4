//! Handler of the `index` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::runs::Step;
use queuegen_runtime::{JobContext, JobError};

use crate::queues::index::{self, IndexRequested};

pub struct IndexHandler;

impl index::Handler for IndexHandler {
    async fn handle(
        &self,
        job: IndexRequested,
        ctx: &JobContext,
    ) -> Result<Step<index::Next>, JobError> {
        // A redelivered job must not repeat its effect: look up a durable
        // result by ctx.job_id() first. Then return Step::done(), with
        // `.with_result(..)` to name the result in the joins' summaries.
        let _ = (job, ctx);
        Err(JobError::transient("this handler is not written yet"))
    }
}
