//! queuegen-runtime: what queuegen-generated code calls to publish and work jobs on Redis Streams.
//!
//! The delivery contract every component keeps: a job accepted by `XADD` is
//! pending in a group or acknowledged after its handler returned a durable
//! outcome — never in neither. Nothing here acknowledges to go faster.

pub mod config;
pub mod envelope;
pub mod error;
pub mod field;
pub mod outcome;

pub use config::QueueConfig;
pub use envelope::{Envelope, FieldMap, Header};
pub use error::{Error, FieldProblem};
pub use field::{FieldValue, Timestamp};
pub use outcome::{ErrorKind, JobError, Outcome};
pub use queuegen_macros::{Envelope, FieldEnum};

/// Items the derive macros expand to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::envelope::FieldWriter;
}
