//! What a handler reports: an outcome the runtime can act on, or a classified error.
//!
//! How the worker acts on each (see `worker::job`):
//! - `Done`: `XACK`.
//! - `Retry`, a transient error or a handler timeout: the `retry_schedule`
//!   function moves the job to the retry set with `attempt + 1`, unless the
//!   attempt was the last (`retry.max_attempts`): then `dead_letter` with
//!   reason `retries_exhausted`.
//! - `DeadLetter` (reason `handler`) or a permanent error (reason `permanent`):
//!   the `dead_letter` function, at once.
//! - `Reconcile` or an ambiguous error: the job stays pending and the
//!   handler's `reconcile` hook runs; redelivery after `claim.min_idle`
//!   (and, in a loop, poison quarantine) follows as for any pending entry.
//! - A panic: the job stays pending, nothing else. A crash loop is what poison
//!   quarantine (by delivery count) is for, not the retry budget.

#[cfg(feature = "postgres")]
pub(crate) mod sqlstate;

/// What `JobError`'s `?` conversion asks of [`sqlstate`] in a build without
/// the driver: no error can be a driver error, so none has a SQLSTATE to
/// classify it by or a server message to show. The conversion itself is the
/// same code in every build.
#[cfg(not(feature = "postgres"))]
mod sqlstate {
    use std::error::Error as StdError;

    use super::ErrorKind;

    pub(crate) fn kind_in_chain(_err: &(dyn StdError + 'static)) -> Option<ErrorKind> {
        None
    }

    pub(crate) fn with_server_message(source: super::BoxError) -> super::BoxError {
        source
    }
}

use std::fmt;
use std::time::Duration;

/// A handler's outcome: what the runtime does with the job now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The job's effect is durable (or was already, on a redelivery): acknowledge it.
    Done,
    /// Try again later as attempt `attempt + 1`; `after` overrides the spec's
    /// backoff (capped at `retry.backoff.max`). Counts against `retry.max_attempts`.
    Retry {
        after: Option<Duration>,
        /// Short reason, written to the next attempt's `reason` header.
        reason: String,
    },
    /// Will never succeed: move the job to the dead-letter stream now (reason `handler`).
    DeadLetter {
        /// Short, safe diagnostic (never the payload), recorded as the dead letter's `detail`.
        reason: String,
    },
    /// The effect may or may not have happened: leave the job pending and
    /// call the handler's `reconcile` hook.
    Reconcile { reason: String },
}

impl Outcome {
    pub fn retry(reason: impl Into<String>) -> Self {
        Outcome::Retry {
            after: None,
            reason: reason.into(),
        }
    }

    pub fn retry_after(after: Duration, reason: impl Into<String>) -> Self {
        Outcome::Retry {
            after: Some(after),
            reason: reason.into(),
        }
    }

    pub fn dead_letter(reason: impl Into<String>) -> Self {
        Outcome::DeadLetter {
            reason: reason.into(),
        }
    }

    pub fn reconcile(reason: impl Into<String>) -> Self {
        Outcome::Reconcile {
            reason: reason.into(),
        }
    }
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
/// Any error converts with `?` as [`ErrorKind::Transient`], except a
/// PostgreSQL driver error (feature `postgres`), which converts as its
/// SQLSTATE class says (`postgres::error_kind`); use
/// [`JobError::permanent`] or [`JobError::ambiguous`] to say otherwise. Like
/// `anyhow::Error`, it deliberately does not implement `std::error::Error` so
/// that the blanket `From` conversion is possible.
pub struct JobError {
    kind: ErrorKind,
    source: BoxError,
}

/// Any error, as a handler's error holds it.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl JobError {
    pub fn new(kind: ErrorKind, source: impl Into<BoxError>) -> Self {
        JobError {
            kind,
            source: source.into(),
        }
    }

    pub fn transient(source: impl Into<BoxError>) -> Self {
        Self::new(ErrorKind::Transient, source)
    }

    pub fn permanent(source: impl Into<BoxError>) -> Self {
        Self::new(ErrorKind::Permanent, source)
    }

    pub fn ambiguous(source: impl Into<BoxError>) -> Self {
        Self::new(ErrorKind::Ambiguous, source)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn source(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E: Into<BoxError>> From<E> for JobError {
    /// Transient, except a PostgreSQL driver error found anywhere along the
    /// source chain: its SQLSTATE decides (`postgres::error_kind`). The same
    /// code runs in every build; a build without the `postgres` feature
    /// does not link the driver, so it recognises none.
    fn from(source: E) -> Self {
        let source = source.into();
        let kind = sqlstate::kind_in_chain(&*source).unwrap_or(ErrorKind::Transient);
        let source = sqlstate::with_server_message(source);
        JobError { kind, source }
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
