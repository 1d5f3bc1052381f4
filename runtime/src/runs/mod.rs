//! Pipeline runs: the workers of a pipeline's stages hand jobs on, and keep each join's fan-in, crash-safe.
//!
//! A job of a stage, once its handler returns what it hands on
//! ([`Step`]), goes through three steps before its ack, each safe to
//! repeat when the job is delivered again after a crash:
//!
//! 1. **Publish the children**, each under an ID derived from the run, the
//!    parent and its position ([`child_job_id`]), to its stage's queue,
//!    whose `dedup` absorbs a repeat ([`Handoff`]).
//! 2. **Settle the job at each join it concerns** (the library's
//!    `run_settle`, in the join's partition for the run): the join counts
//!    the children that lead to it as outstanding, records the job, and
//!    publishes its own job once nothing is outstanding ([`settle`]).
//! 3. **Ack**, as for any job.
//!
//! A job dead-lettered settles as `dead` first. The plan, and why it is
//! crash-safe, is in docs/architecture.md#pipelines.

mod batched;
mod coalesce;
mod events;
mod handoff;
mod ids;
mod pipeline;
mod settle;
mod stage;
mod summary;

pub(crate) use events::RunEvents;
pub use handoff::{HandOn, Handoff, Step};
pub use ids::{child_job_id, join_job_id};
pub use pipeline::PipelineRuntime;
pub use queuegen_core::pipeline::{Join, OnDeadLetter, Pipeline, Stage};
pub use stage::{StageHandler, StageWorker};
pub use summary::{RunSummary, SettledJob};
