//! What queuegen's spec side (the checker, the generator, the derive) and its
//! runtime must agree on, in one place each: [`units`] (how durations and
//! sizes are written and read) and [`cadence`] (when a schedule ticks, and
//! the job and marker IDs of a tick).

pub mod cadence;
pub mod units;
