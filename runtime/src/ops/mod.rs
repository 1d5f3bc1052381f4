//! Operating a queue: what its streams hold and who needs which entry, for the
//! trimmer, the status and pending views, admission control and the monitor.
//!
//! Everything here reads with commands a least-privilege monitor user may
//! run (`XINFO`, `XPENDING`, `XRANGE`, `XLEN`, `ZRANGE`…), except the
//! trimmer, which also writes.

#[cfg(feature = "metrics")]
pub mod gauges;
pub mod inventory;
pub mod pending;
pub mod status;
pub mod stream_id;

#[cfg(feature = "metrics")]
pub use gauges::{QueueGauges, QueueMonitor};
pub use inventory::{inventory, GroupInventory, PendingHead, StreamInventory};
pub use pending::{pending, PendingQuery, PendingReport};
pub use status::{status, AlertThresholds, StatusReport, WatchedQueue};
pub use stream_id::StreamId;
