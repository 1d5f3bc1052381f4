//! The runtime's errors, one small enum per domain under one top-level [`Error`]; every failure names the key, partition, job or field it is about.
//!
//! The domains live here, one submodule each, rather than beside the code
//! that raises them: several are raised from many modules (the producer,
//! the worker, the operator's views and the CLI all raise setup and
//! operation errors), and one place keeps the crate's error surface
//! readable without making those modules import each other.
//!
//! Every enum is `#[non_exhaustive]`: a new case (or a feature's case, such
//! as `PostgresError::Driver`) is an addition. The top-level [`Error`]
//! displays exactly as the domain error it holds.

mod connection;
mod decode;
mod operation;
mod pipeline;
mod postgres;
mod publish;
mod redis;
mod results;
mod setup;
mod transition;

pub use connection::{ConnectionError, FileProblem, OptionsProblem};
pub use decode::{DecodeError, FieldProblem};
pub use operation::{InventoryProblem, OperationError};
pub use pipeline::PipelineError;
pub use postgres::PostgresError;
pub use publish::PublishError;
pub use redis::RedisError;
pub use results::ResultError;
pub use setup::{LibraryProblem, SetupError};
pub use transition::{NotOwner, TransitionCode, TransitionError};

/// Any runtime failure, by domain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An entry that cannot be decoded, or a job that cannot be encoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A job or batch the producer refused.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// A pipeline stage's worker set up wrongly, or a hand-off refused.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// A worker or server not set up to run the queue.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A Function library call that refused a transition.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// An operator's request, a trim or a lease that cannot go on.
    #[error(transparent)]
    Operation(#[from] OperationError),
    /// A stored result that is not durable enough yet.
    #[error(transparent)]
    Results(#[from] ResultError),
    /// A Redis connection that cannot work as configured.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// A PostgreSQL database not ready, or a driver error.
    #[error(transparent)]
    Postgres(#[from] PostgresError),
    /// A Redis command or connection that failed.
    #[error(transparent)]
    Redis(#[from] RedisError),
}

impl Error {
    /// Wraps a Redis error with what was being done (key, partition, command).
    pub fn redis(context: impl Into<String>, source: ::redis::RedisError) -> Self {
        Error::Redis(RedisError {
            context: context.into(),
            source,
        })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
