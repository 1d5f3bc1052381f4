//! Safe retention trimming of a partition's ready and dead-letter streams:
//! plan the exact MINID from the policy and every group's boundaries, trim
//! through the library's `trim` function, which re-checks the plan
//! atomically, then verify that nothing a group needs is gone.
//!
//! The MINID is the earliest of:
//! - the policy cutoff: server time minus `retention.min_age` (ready) or
//!   `dead_letter.retention` (dead): nothing younger goes;
//! - every group's lowest pending entry: a delivered, unacknowledged job
//!   keeps its payload (and so does everything after it);
//! - every group's first undelivered entry (the first after its
//!   last-delivered ID). A group with nothing undelivered has read every
//!   entry there is: the entries after its position do not exist yet, so
//!   it sets no bound; the function re-checks at trim time that nothing
//!   has appeared below the MINID since.
//!
//! `XTRIM key MINID <minid>` (exact) removes only entries below it. The
//! two steps are public so that dry runs and tests see the plan: [`plan`]
//! (read-only), then [`apply`] under the partition's lease. The function
//! refuses, removing nothing, when the lease is no longer the caller's,
//! a group was created or removed, a group's last-delivered ID moved back
//! (`XGROUP SETID`), or any group's lowest pending or first undelivered
//! entry is now below the MINID. `XTRIM … ACKED` is added only on a server
//! that has it (Redis 8.2+, from `INFO server`).
//!
//! Cost per partition and pass: bounded by the number of groups, never by
//! the stream's length: `SET NX` (lease), `TIME`, the inventory of both
//! streams (two pipelines), and only for a stream with something to remove,
//! one `FCALL` and the verification (the inventory again and one pipeline
//! of `XRANGE id id`), then the lease release.

//!
//! The parts: [`StreamRole`], [`TrimPlan`] and `decide` say what a plan is
//! and how its MINID is chosen (`model`); [`plan`] and [`plan_streams`] read
//! one (`plan`); [`apply`] trims to it and verifies (`apply`);
//! [`trim_partition`] is one leased pass over a partition (`partition`).

use std::time::Duration;

mod apply;
mod model;
mod partition;
mod plan;

pub use apply::{apply, Trimmed};
pub use model::{Boundary, GroupBoundaries, Removable, StreamRole, TrimPlan};
pub use partition::{trim_partition, xtrim_acked_supported, StreamTrim, TrimOptions};
pub use plan::{plan, plan_streams, server_time_ms};

/// How long a trimmer's lease lasts. A pass over one partition takes a few
/// round trips; a trimmer that dies holding it blocks the partition's
/// trimming for at most this long, and one that outlives it is refused by
/// the trim function.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// A dry run counts the entries that would go up to this many (one `XRANGE
/// … COUNT`); past it, it says "at least" this many.
pub const DEFAULT_COUNT_CAP: u64 = 1_000;
