//! What queuegen's spec side (the checker, the generator, the derive) and its
//! runtime must agree on, in one place each: [`units`] (how durations and
//! sizes are written and read), [`cadence`] (when a schedule ticks, and the
//! job and marker IDs of a tick), [`wire`] (the header fields of an entry
//! and the Function library's limits), [`pipeline`] (a pipeline's graph, and
//! which jobs settle at which join) and [`sql`] (which SQL names need no
//! quoting).

pub mod cadence;
pub mod pipeline;
pub mod sql;
pub mod units;
pub mod wire;
