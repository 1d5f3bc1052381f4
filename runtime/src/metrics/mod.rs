//! Prometheus metrics (feature `metrics`, on by default): what a process exports, and the HTTP endpoints that serve it.
//!
//! Labels are bounded by construction: queue, partition, group, outcome,
//! reason. Never a job_id, tenant, consumer name, stream ID or error text —
//! each would make a new time series per value.

pub mod http;

pub use http::{router, serve, Readiness};
pub use prometheus_client::registry::Registry;
