//! What a handler reports: an outcome the runtime can act on, or a classified error.

use std::fmt;

/// A handler's durable outcome. Only an outcome is ever acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The job's effect is durable (or was already, on a redelivery): acknowledge it.
    Done,
}

/// How the runtime should treat a handler error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Worth another attempt later (a timeout, a dependency briefly down).
    Transient,
    /// Will never succeed as sent (invalid input, a rejected request).
    Permanent,
    /// The effect may or may not have happened: needs reconciliation, not a blind retry.
    Ambiguous,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Transient => "transient",
            ErrorKind::Permanent => "permanent",
            ErrorKind::Ambiguous => "ambiguous",
        })
    }
}

/// A handler failure with its classification.
///
/// Any error converts with `?` as [`ErrorKind::Transient`]; use
/// [`JobError::permanent`] or [`JobError::ambiguous`] to say otherwise. Like
/// `anyhow::Error`, it deliberately does not implement `std::error::Error` so
/// that the blanket `From` conversion is possible.
pub struct JobError {
    kind: ErrorKind,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl JobError {
    pub fn new(
        kind: ErrorKind,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        JobError {
            kind,
            source: source.into(),
        }
    }

    pub fn transient(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Transient, source)
    }

    pub fn permanent(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Permanent, source)
    }

    pub fn ambiguous(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Ambiguous, source)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn source(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E> From<E> for JobError
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(source: E) -> Self {
        JobError::transient(source)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobError({}: {:?})", self.kind, self.source)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind, self.source)
    }
}
