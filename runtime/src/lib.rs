//! queuegen-runtime: what queuegen-generated code calls to publish and work jobs on Redis Streams.
//!
//! The delivery contract every component keeps: a job accepted by `XADD` is
//! pending in a group, scheduled for retry, in the dead-letter stream, or
//! acknowledged after its handler returned a durable outcome — never in none
//! of them. Moves between those places run in one Redis Function each
//! ([`transitions`], through the library's typed client [`functions`]);
//! nothing here acknowledges to go faster.
//!
//! # What a service uses
//!
//! The crate root is the service author's API; the generated module of each
//! queue (`queues::<queue>`) wires most of it up.
//!
//! - **Connecting**: [`Redis`] (built from [`ConnectOptions`], with a
//!   [`PasswordSource`]), its [`Connection`].
//! - **Describing jobs**: the [`Envelope`] trait and derive, [`FieldEnum`],
//!   [`Timestamp`]; [`Upcast`] and [`FieldMap`] to decode older schema
//!   versions.
//! - **Publishing**: [`Producer`], [`NewJob`], [`Durability`]; what a publish
//!   returns: [`Published`], [`Delayed`].
//! - **Working jobs**: implement [`Handler`] (given a [`JobContext`], it
//!   answers an [`Outcome`] or a [`JobError`] of an [`ErrorKind`]), run it
//!   with [`Worker`] until [`shutdown_signal`]; it reports a
//!   [`WorkerReport`].
//! - **Results**: [`Results`] ([`RedisResults`], or with the `postgres`
//!   feature `postgres::PgResults`), which answer [`Committed`].
//! - **Schedules**: [`Scheduler`] of [`Schedule`]s ([`Cadence`], [`Missed`]),
//!   reporting a [`SchedulerReport`].
//! - **Queue settings**: [`QueueConfig`] (generated as each queue's `CONFIG`)
//!   with its [`Lane`]s, [`RateLimit`], [`TenantRateLimit`], [`Jitter`] and
//!   the [`MarkerKind`] of its marker keys; a [`Partition`] of a queue and
//!   a [`StreamSlot`] (one lane of a partition), which its keys take.
//! - **Errors**: [`Error`], [`Result`], [`FieldProblem`], [`NotOwner`].
//!
//! Below the root: [`metrics`] (Prometheus, the default `metrics` feature),
//! `postgres` (durable results and the outbox, the `postgres` feature),
//! [`failpoint`] (crash points for the failure tests, the `failpoints`
//! feature). The wire level — [`functions`] (the library's calls and
//! replies), [`transitions`], [`trim`], [`lease`], [`inventory`] — is
//! public for the CLI, the dashboard and the tests, not for services.
//! [`runs`] runs pipeline stages: [`runs::StageWorker`] wraps a stage's
//! handler, hands on what it returns and keeps each join's fan-in.
//!
//! # The operator side
//!
//! With the `operator` feature (off by default; the CLI, the dashboard, the
//! tests and the bench turn it on): `admin` (`queuegen apply`: load the
//! Function library, create the groups), `ops` (the views of `status`,
//! `pending`, `dlq`, `pause`, the monitor's gauges) and `roles` (the ACL
//! users). A service never links them.

#[cfg(feature = "operator")]
pub mod admin;
pub mod config;
pub mod connect;
mod entry;
pub mod envelope;
pub mod error;
pub mod failpoint;
mod field;
pub mod functions;
mod handler;
pub mod host;
pub mod inventory;
pub mod lease;
pub mod metrics;
#[cfg(feature = "operator")]
pub mod ops;
mod outcome;
pub mod packed;
pub mod partition;
pub mod postgres;
mod producer;
mod results;
pub mod retry;
#[cfg(feature = "operator")]
pub mod roles;
pub mod runs;
pub mod schedule;
mod signal;
pub mod stream_id;
mod stream_slot;
pub mod transitions;
pub mod trim;
pub mod worker;

pub use config::{Jitter, Lane, MarkerKind, QueueConfig, RateLimit, TenantRateLimit};
pub use connect::{ConnectOptions, Connection, PasswordSource, Redis};
pub use envelope::{Envelope, FieldMap, Upcast};
pub use error::{Error, FieldProblem, NotOwner, Result};
pub use field::{FieldValue, Timestamp};
pub use handler::{Handler, JobContext};
pub use outcome::{ErrorKind, JobError, Outcome};
pub use producer::{Delayed, Durability, NewJob, Producer, Published};
pub use queuegen_macros::{Envelope, FieldEnum};
pub use results::{Committed, RedisResults, Results};
pub use schedule::{Cadence, Missed, Schedule, Scheduler, SchedulerReport};
pub use signal::shutdown_signal;
pub use stream_slot::{Partition, StreamSlot};
pub use worker::{Worker, WorkerReport, CONSUMER_ENV, METRICS_ADDR_ENV, QUEUE_ENV};

/// Items the derive macros expand to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::envelope::{same_values, FieldEnumValues, FieldWriter};
}
