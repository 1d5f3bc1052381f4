//! Operating a queue: what its streams hold and who needs which entry, for the
//! trimmer, the status and pending views, admission control and the monitor.
//!
//! Everything here reads with commands a least-privilege monitor user may
//! run (`XINFO`, `XPENDING`, `XRANGE`, `XLEN`, `ZRANGE`, `HMGET`, `GET`…), except the
//! trimmer and its lease, and the pause flags' `pause`/`resume`, which also write.

pub mod dead_letters;
#[cfg(feature = "metrics")]
pub mod gauges;
pub mod inventory;
pub mod lease;
pub mod pause;
pub mod pending;
pub mod scheduled;
pub mod status;
pub mod stream_id;
pub mod trim;

pub use dead_letters::{dead_letters, DeadLetter, DeadLetterQuery};
#[cfg(feature = "metrics")]
pub use gauges::{QueueGauges, QueueMonitor};
pub use inventory::{inventory, GroupInventory, PendingHead, StreamInventory};
pub use lease::Lease;
pub use pause::{PauseChange, PauseNote};
pub use pending::{pending, PendingQuery, PendingReport};
pub use scheduled::{scheduled, HeldFor, Scheduled, ScheduledJob};
pub use status::{status, AlertThresholds, StatusReport, WatchedQueue};
pub use stream_id::StreamId;
pub use trim::{Boundary, Removable, StreamRole, TrimOptions, TrimPlan, Trimmed};
