//! PostgreSQL errors: a database not ready for what was asked, or (feature `postgres`) a driver error.
//!
//! The type exists in every build so that code matching on [`super::Error`]
//! compiles the same with and without the feature; the feature only adds the
//! `PostgresError::Driver` variant, which the enum's `#[non_exhaustive]`
//! makes an addition, not a change.

/// A PostgreSQL failure, naming the database (never the password).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresError {
    /// The database is not ready for what was asked: a URL that does not
    /// parse, migrations not applied, a handler name another queue uses.
    /// Says what to do; `problem` stays free text because each check
    /// explains its own fix.
    #[error("postgres {target}: {problem}")]
    Setup { target: String, problem: String },

    /// PostgreSQL answered with an error, or the connection failed.
    /// `detail` is the server's message with its SQLSTATE (the driver's
    /// own message says only "db error").
    #[cfg(feature = "postgres")]
    #[error("postgres {target}: {context}: {detail}")]
    Driver {
        /// `user@host:port/database`, never the password.
        target: String,
        context: String,
        detail: String,
        #[source]
        source: tokio_postgres::Error,
    },
}
