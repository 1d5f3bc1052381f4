//! Operating a queue: what its streams hold and who needs which entry, for the
//! trimmer, the status and pending views, admission control and the monitor.
//!
//! Everything here reads with commands a least-privilege monitor user may
//! run (`XINFO`, `XPENDING`, `XRANGE`, `XLEN`, `ZRANGE`…), except the
//! trimmer and its lease, which also write.

pub mod inventory;
pub mod lease;
pub mod stream_id;
pub mod trim;

pub use inventory::{inventory, GroupInventory, PendingHead, StreamInventory};
pub use lease::Lease;
pub use stream_id::StreamId;
pub use trim::{Boundary, Removable, StreamRole, TrimOptions, TrimPlan, Trimmed};
