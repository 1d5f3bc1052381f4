//! Redis errors: a command that failed or a connection that broke, with what was being done.

/// Redis answered with an error, or the connection failed.
#[derive(Debug, thiserror::Error)]
#[error("redis: {context}: {source}")]
#[non_exhaustive]
pub struct RedisError {
    /// What was being done: the command, key, partition or server.
    pub context: String,
    #[source]
    pub source: redis::RedisError,
}
