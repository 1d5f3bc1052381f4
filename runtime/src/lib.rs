//! queuegen-runtime: what queuegen-generated code calls to publish and work jobs on Redis Streams.
//!
//! The delivery contract every component keeps: a job accepted by `XADD` is
//! pending in a group, scheduled for retry, in the dead-letter stream, or
//! acknowledged after its handler returned a durable outcome — never in none
//! of them. Moves between those places run in one Redis Function each
//! ([`transitions`], through the library's typed client [`functions`]);
//! nothing here acknowledges to go faster.

pub mod admin;
pub mod config;
pub mod connect;
pub mod envelope;
pub mod error;
pub mod failpoint;
pub mod field;
pub mod functions;
pub mod handler;
pub mod host;
pub mod inventory;
pub mod lease;
pub mod metrics;
pub mod ops;
pub mod outcome;
pub mod partition;
pub mod postgres;
pub mod producer;
pub mod results;
pub mod retry;
pub mod roles;
pub mod schedule;
pub mod signal;
pub mod stream_id;
pub mod transitions;
pub mod trim;
pub mod worker;

pub use admin::{ensure_groups, load_library, verify_library, GroupSetup, LibraryLoad};
pub use config::{Jitter, Lane, MarkerKind, QueueConfig, RateLimit, TenantRateLimit};
pub use connect::{ConnectOptions, Connection, PasswordSource, Redis};
pub use envelope::{Envelope, FieldMap, Header, Upcast};
pub use error::{Error, FieldProblem, NotOwner, Result};
pub use field::{FieldValue, Timestamp};
pub use handler::{Handler, JobContext};
pub use outcome::{ErrorKind, JobError, Outcome};
pub use partition::{partition_of, tenant_class};
pub use producer::{Delayed, Durability, NewJob, Producer, Published};
pub use queuegen_macros::{Envelope, FieldEnum};
pub use results::{Committed, RedisResults, Results};
pub use schedule::{Cadence, Missed, Schedule, Scheduler, SchedulerReport};
pub use signal::shutdown_signal;
pub use transitions::{Acked, DeadReason, Moved, Promoted, Refused, Renewal, TransitionCode};
pub use worker::{Worker, WorkerReport, CONSUMER_ENV, METRICS_ADDR_ENV, QUEUE_ENV};

/// Items the derive macros expand to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::envelope::{same_values, FieldEnumValues, FieldWriter};
}
