//! The dashboard's one error type: what a page could not show or an action
//! could not do, naming the queue, key or request; each maps to a status.

/// Why a page or an action failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or changing a queue in Redis failed; the runtime's error
    /// names the key, partition and job.
    #[error(transparent)]
    Runtime(#[from] queuegen_runtime::Error),

    /// Something the spec does not have (a queue, a pipeline); says which exist.
    #[error("{0}")]
    NotFound(String),

    /// A request that is not well formed (a missing or malformed field).
    #[error("{0}")]
    BadRequest(String),
}

impl Error {
    /// The HTTP status a page or JSON answer of this error carries.
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::BadRequest(_)
            | Error::Runtime(queuegen_runtime::Error::Operation(
                queuegen_runtime::error::OperationError::BadDeadLetterId { .. },
            )) => StatusCode::BAD_REQUEST,
            Error::Runtime(
                queuegen_runtime::Error::Operation(
                    queuegen_runtime::error::OperationError::NoSuchPartition { .. },
                )
                | queuegen_runtime::Error::Operation(
                    queuegen_runtime::error::OperationError::NoSuchLane { .. },
                )
                | queuegen_runtime::Error::Operation(
                    queuegen_runtime::error::OperationError::NoSuchDeadLetter { .. },
                )
                | queuegen_runtime::Error::Operation(
                    queuegen_runtime::error::OperationError::NoSuchRun { .. },
                ),
            ) => StatusCode::NOT_FOUND,
            // Redis refused or could not be reached: the dashboard is a gateway to it.
            Error::Runtime(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The error as JSON (`{"error": "..."}`) for scripts and the charts.
    pub(crate) fn json(&self) -> axum::response::Response {
        use axum::response::IntoResponse;
        let body = axum::Json(serde_json::json!({ "error": format!("{self:#}") }));
        (self.status(), body).into_response()
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
