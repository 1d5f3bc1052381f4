//! The library's one error type: generation and file-system failures naming the
//! file, and the dashboard's failures naming the queue, key or request.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A template failed to render: a bug in queuegen, not in the spec.
    #[error("template {template}: {source}")]
    Template {
        template: &'static str,
        #[source]
        source: minijinja::Error,
    },

    /// The spec is valid but asks for something this generator cannot express.
    #[error("{0}")]
    Unsupported(String),

    /// Reading or changing a queue in Redis failed (the dashboard); the
    /// runtime's error names the key, partition and job.
    #[error(transparent)]
    Runtime(#[from] queuegen_runtime::Error),

    /// The dashboard was asked for something the spec does not have (a
    /// queue, a page) or a request it cannot read; says which.
    #[error("{0}")]
    NotFound(String),

    /// A dashboard request that is not well formed (a missing form field).
    #[error("{0}")]
    BadRequest(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
