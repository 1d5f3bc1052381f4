//! Driver errors as the runtime's [`Error`]: the constructor sits with the PostgreSQL code that raises them, so that `error` imports nothing of it.

use crate::error::{Error, PostgresError};
use crate::outcome::sqlstate::describe;

impl Error {
    /// Wraps a PostgreSQL driver error with the database and what was being done.
    pub fn postgres(
        target: impl Into<String>,
        context: impl Into<String>,
        source: tokio_postgres::Error,
    ) -> Self {
        Error::Postgres(PostgresError::Driver {
            target: target.into(),
            context: context.into(),
            detail: describe(&source),
            source,
        })
    }
}
