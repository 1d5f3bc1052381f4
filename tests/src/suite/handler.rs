//! The handler every suite worker runs: each job does what its script says and records its effect in the ledger.

use serde::{Deserialize, Serialize};

use queuegen_runtime::{Handler, JobContext, JobError, Outcome};

use super::ledger::Ledger;
use super::script::Script;
use crate::fixtures::TestJob;

/// The failpoint a `crash-…` job dies at (with SIGKILL, in a worker process
/// started with `QUEUEGEN_FAILPOINT=handler_crash`); elsewhere it panics.
pub const HANDLER_CRASH: &str = "handler_crash";

/// Where a worker stops working its jobs, holding them until it is killed:
/// the state a crash leaves behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hold {
    /// Never: every job runs to its end.
    #[default]
    Never,
    /// After the job was read (and its delivery counted), before its effect.
    BeforeEffect,
    /// After the effect is durable in the ledger, before the handler returns
    /// `Done` (so before the `XACK`).
    AfterEffect,
}

/// Runs each job's script, its effect recorded in `ledger`.
#[derive(Clone)]
pub struct LedgerHandler {
    ledger: Ledger,
    hold: Hold,
}

impl LedgerHandler {
    pub fn new(ledger: Ledger, hold: Hold) -> Self {
        LedgerHandler { ledger, hold }
    }
}

impl Handler<TestJob> for LedgerHandler {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let nth_delivery = self.ledger.delivered(ctx.job_id()).await?;
        match Script::of(&job.subject_ref) {
            Script::Broken => return Err(JobError::permanent("the document is broken")),
            Script::Flaky if ctx.attempt() == 1 => {
                return Err(JobError::transient("the dependency is briefly down"))
            }
            Script::Crash => {
                queuegen_runtime::failpoint::failpoint(HANDLER_CRASH);
                panic!("{} takes down whatever runs it", ctx.job_id());
            }
            Script::SlowOnce(work) if nth_delivery == 1 => tokio::time::sleep(work).await,
            Script::Ok | Script::Flaky | Script::SlowOnce(_) => {}
        }
        if self.hold == Hold::BeforeEffect {
            std::future::pending::<()>().await;
        }
        let delivery = format!("{}@{}", ctx.consumer(), ctx.stream_id());
        self.ledger
            .apply(ctx.job_id(), ctx.trace_id(), &delivery)
            .await?;
        if self.hold == Hold::AfterEffect {
            std::future::pending::<()>().await;
        }
        Ok(Outcome::Done)
    }
}
