//! Prometheus metrics (feature `metrics`, on by default): what a process exports, and the HTTP endpoints that serve it.
//!
//! Labels are bounded by construction: queue, partition, group, outcome,
//! reason, settlement (and, for trims, the stream kind `ready` or `dead`). Never a
//! job_id, tenant, consumer name, stream ID or error text — each would make
//! a new time series per value. Every label value comes from the queue's
//! generated settings or from one of the closed sets in this module.
//!
//! The label sets (`JobOutcome`, `FailedTransition`, `Settlement`,
//! `StreamRole`, `TrimOutcome`) exist with the feature off too, so that code recording an
//! event compiles either way; the families that hold the numbers, and the
//! endpoints, only with it.

mod labels;

#[cfg(feature = "metrics")]
pub mod http;
#[cfg(feature = "metrics")]
mod producer;
#[cfg(feature = "metrics")]
mod trim;
#[cfg(feature = "metrics")]
mod worker;

pub use labels::{FailedTransition, JobOutcome, Settlement, StreamRole, TrimOutcome};

#[cfg(feature = "metrics")]
pub use http::{router, serve, Readiness};
#[cfg(feature = "metrics")]
pub use producer::ProducerMetrics;
/// The client library the registry and families come from, so that an
/// application encodes or extends them with the very same version.
#[cfg(feature = "metrics")]
pub use prometheus_client;
#[cfg(feature = "metrics")]
pub use prometheus_client::registry::Registry;
#[cfg(feature = "metrics")]
pub use trim::TrimMetrics;
#[cfg(feature = "metrics")]
pub use worker::WorkerMetrics;
#[cfg(feature = "metrics")]
pub(crate) use worker::{PartitionMeters, RunLabels, SecondsCounter};
