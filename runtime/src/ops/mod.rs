//! The operator's views of a queue: status, pending entries, dead letters,
//! held jobs (scheduled retries and delayed jobs), the pause flags and the monitor's gauges, which the CLI and
//! the dashboard share; and of a pipeline: its runs in flight at each join,
//! and one run's state ([`runs`](mod@runs)).
//!
//! Everything here reads with commands a least-privilege monitor user may
//! run (`XINFO`, `XPENDING`, `XRANGE`, `XLEN`, `ZRANGE`, `HMGET`, `GET`…),
//! except the pause flags' `pause`/`resume`, which also write. The machinery
//! the views share with the worker and the producer sits below them:
//! [`crate::inventory`], [`crate::lease`], [`crate::trim`].

pub mod dead_letters;
#[cfg(feature = "metrics")]
pub mod gauges;
pub mod held;
pub mod pause;
pub mod pending;
pub mod runs;
pub mod status;

pub use dead_letters::{dead_letters, DeadLetter, DeadLetterQuery};
#[cfg(feature = "metrics")]
pub use gauges::{QueueGauges, QueueMonitor};
pub use held::{held_jobs, HeldFor, HeldJob, HeldJobs};
pub use pause::{PauseChange, PauseNote};
pub use pending::{pending, PendingQuery, PendingReport};
pub use runs::{run, runs, RunReport, RunsReport};
pub use status::{status, AlertThresholds, StatusReport, WatchedQueue};
