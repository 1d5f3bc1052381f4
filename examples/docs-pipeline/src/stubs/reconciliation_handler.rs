//! Handler of the `reconciliation` queue. Written once by `queuegen generate --stubs`;
//! this file is yours: queuegen never overwrites it.

use queuegen_runtime::postgres::{Begun, PgJob, PgResults};
use queuegen_runtime::{JobContext, JobError, Outcome};

use crate::queues::reconciliation::{self, ReconciliationRequested};

/// Makes each job's change in PostgreSQL, in one transaction with the job's
/// marker. Build it with `reconciliation::results(&pg).await?` as `results`.
pub struct ReconciliationHandler {
    pub results: PgResults,
}

impl reconciliation::Handler for ReconciliationHandler {
    async fn handle(
        &self,
        event: ReconciliationRequested,
        ctx: &JobContext,
    ) -> Result<Outcome, JobError> {
        // The marker commits with the change, so a redelivered job finds it
        // here and is done without making the change twice.
        let job = match self.results.begin(ctx).await? {
            Begun::New(job) => job,
            Begun::Finished(_) => return Ok(Outcome::Done),
        };
        self.change(&job, &event).await?;
        // Done only after the commit: an error before it (returned with `?`)
        // rolls the change and the marker back together, and the job runs again.
        job.commit(b"").await?;
        Ok(Outcome::Done)
    }
}

impl ReconciliationHandler {
    /// The business change of one job, made through `job`'s transaction.
    async fn change(&self, job: &PgJob, event: &ReconciliationRequested) -> Result<(), JobError> {
        // For example:
        //
        // job.execute(
        //     "INSERT INTO my_table (job_id) VALUES ($1)",
        //     &[&job.job_id()],
        // )
        // .await?;
        //
        // A database error returned with `?` is retried or dead-lettered as
        // its SQLSTATE class says: a serialization failure or a lost
        // connection is retried, a constraint violation is not.
        let _ = (job, event);
        Err(JobError::transient("this handler is not written yet"))
    }
}
