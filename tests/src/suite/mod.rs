//! The failure-contract suite's shared parts: targets, the durable-effect ledger, the handler and worker description, and where each job is.
//!
//! The suite itself (its scenarios and the table it prints) is the test
//! binary `tests/tests/failure_suite/`; the `suite-worker` binary runs the
//! same handler in a process of its own, for scenarios that kill one.

pub mod handler;
pub mod ledger;
pub mod pipeline;
pub mod places;
pub mod script;
pub mod target;
pub mod worker;

pub use handler::{Hold, LedgerHandler};
pub use ledger::{Effect, JobTally, Ledger, Tally};
pub use places::Places;
pub use script::{Destination, Script, ScriptedJob};
pub use target::{Deployment, Login, Target, Topology};
pub use worker::{QueueKind, RunningWorker, Tuning, WorkerSpec};
