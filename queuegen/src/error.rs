//! The library's one error type: generation and file-system failures, naming the file.

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
