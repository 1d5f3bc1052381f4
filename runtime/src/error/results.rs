//! Result errors: a stored result that is not yet durable enough to acknowledge its job.

/// A result store that cannot be counted on yet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultError {
    /// A result was stored, but fewer replicas than asked acknowledged it
    /// within the timeout: a failover now could forget it, so the job must
    /// not be acknowledged as done yet.
    #[error("result {key}: {acknowledged} of the {replicas} replica(s) asked for acknowledged it within {timeout:?}; a failover could still forget it")]
    NotReplicated {
        key: String,
        replicas: u32,
        acknowledged: u32,
        timeout: std::time::Duration,
    },
}
