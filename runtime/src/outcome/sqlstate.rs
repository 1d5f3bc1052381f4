//! What a PostgreSQL error means for a job: its SQLSTATE class says whether another attempt can succeed (feature `postgres`).
//!
//! Here, under `outcome`, because `JobError`'s `?` conversion asks it; the
//! `postgres` module re-exports [`error_kind`] and builds on it.
//!
//! A database error a handler returns with `?` becomes a [`JobError`](crate::JobError)
//! of the kind [`error_kind`] gives (the conversion looks for a
//! `tokio_postgres::Error` along the error's source chain), so a constraint
//! violation is dead-lettered at once while a deadlock or a lost connection
//! is retried. A retry is safe even when a commit's answer was lost: the
//! marker committed with the change makes the next attempt find it.

use std::error::Error as StdError;

use tokio_postgres::error::{DbError, SqlState};

use super::{BoxError, ErrorKind};

/// The kind of a driver error: by SQLSTATE class for an error the server
/// sent, transient for a connection that failed or closed.
pub fn error_kind(err: &tokio_postgres::Error) -> ErrorKind {
    // No SQLSTATE: the connection failed, closed or timed out.
    err.code().map_or(ErrorKind::Transient, kind_of_sqlstate)
}

fn kind_of_sqlstate(code: &SqlState) -> ErrorKind {
    let code = code.code();
    match code {
        // The transaction's commit may or may not have happened.
        "40003" => ErrorKind::Ambiguous,
        // Read-only transaction: connected to a standby during a failover.
        "25006" => ErrorKind::Transient,
        // A deferred constraint failed at commit: the data is wrong.
        "40002" => ErrorKind::Permanent,
        _ => match &code[..2] {
            // Connection exception; serialization failure or deadlock;
            // insufficient resources; object in use or lock not available;
            // operator intervention (shutdown, statement timeout); system
            // (I/O) error; internal error.
            "08" | "40" | "53" | "55" | "57" | "58" | "XX" => ErrorKind::Transient,
            // Integrity constraint violation, data exception, syntax or
            // access rule violation, invalid transaction state, a raised
            // exception, anything else: the same statement fails again.
            _ => ErrorKind::Permanent,
        },
    }
}

/// The kind of the first `tokio_postgres::Error` along `err`'s source
/// chain (itself included), if there is one.
pub(crate) fn kind_in_chain(err: &(dyn StdError + 'static)) -> Option<ErrorKind> {
    std::iter::successors(Some(err), |&err| err.source())
        .find_map(|err| err.downcast_ref::<tokio_postgres::Error>())
        .map(error_kind)
}

/// `source` itself when it is not a driver error; a driver error wrapped
/// so that it displays as [`describe`] says (a dead letter's `detail` then
/// names the SQLSTATE and constraint, not only "db error"), with the
/// driver error as its source.
pub(crate) fn with_server_message(source: BoxError) -> BoxError {
    match source.downcast::<tokio_postgres::Error>() {
        Ok(driver) => Box::new(Described {
            text: describe(&driver),
            driver: *driver,
        }),
        Err(other) => other,
    }
}

/// A driver error with its full description.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
struct Described {
    text: String,
    #[source]
    driver: tokio_postgres::Error,
}

/// A driver error in one line: the server's message with its SQLSTATE,
/// constraint and table when it sent one (the driver's own `Display` says
/// only "db error"), else the driver's message and its cause.
pub(crate) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return describe_db(db);
    }
    match err.source() {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

fn describe_db(db: &DbError) -> String {
    let (severity, message, code) = (db.severity(), db.message(), db.code().code());
    let mut text = format!("{severity} {message} (SQLSTATE {code})");
    if let Some(detail) = db.detail() {
        text.push_str(&format!("; {detail}"));
    }
    if let Some(constraint) = db.constraint() {
        text.push_str(&format!("; constraint {constraint}"));
    }
    if let (Some(schema), Some(table)) = (db.schema(), db.table()) {
        text.push_str(&format!("; table {schema}.{table}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstate_classes_map_to_what_another_attempt_can_do() {
        let kind = |code: &str| kind_of_sqlstate(&SqlState::from_code(code));
        assert_eq!(kind("23505"), ErrorKind::Permanent, "unique violation");
        assert_eq!(kind("23503"), ErrorKind::Permanent, "foreign key");
        assert_eq!(
            kind("22P02"),
            ErrorKind::Permanent,
            "bad text representation"
        );
        assert_eq!(kind("42P01"), ErrorKind::Permanent, "undefined table");
        assert_eq!(kind("40001"), ErrorKind::Transient, "serialization failure");
        assert_eq!(kind("40P01"), ErrorKind::Transient, "deadlock");
        assert_eq!(
            kind("40002"),
            ErrorKind::Permanent,
            "deferred constraint at commit"
        );
        assert_eq!(kind("40003"), ErrorKind::Ambiguous, "completion unknown");
        assert_eq!(kind("08006"), ErrorKind::Transient, "connection failure");
        assert_eq!(kind("57P01"), ErrorKind::Transient, "admin shutdown");
        assert_eq!(kind("57014"), ErrorKind::Transient, "statement timeout");
        assert_eq!(kind("55P03"), ErrorKind::Transient, "lock not available");
        assert_eq!(kind("25006"), ErrorKind::Transient, "read-only (a standby)");
        assert_eq!(kind("25P02"), ErrorKind::Permanent, "in failed transaction");
    }
}
