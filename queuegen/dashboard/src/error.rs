//! The dashboard's one error type: what a page could not show or an action
//! could not do, naming the queue, key or request; each maps to a status.

/// Why a page or an action failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or changing a queue in Redis failed; the runtime's error
    /// names the key, partition and job.
    #[error(transparent)]
    Runtime(#[from] queuegen_runtime::Error),

    /// Something the spec does not have (a queue); says which exist.
    #[error("{0}")]
    NotFound(String),

    /// A request that is not well formed (a missing or malformed field).
    #[error("{0}")]
    BadRequest(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
