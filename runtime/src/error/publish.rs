//! Publish errors: a job or batch the producer refused, having written nothing of it.

/// Why a producer refused a job or batch; nothing of the batch was sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The encoded envelope exceeds the queue's `payload.max_bytes`.
    #[error(
        "queue {queue}: job {job_id:?} encodes to {len} bytes, above payload.max_bytes = {max}"
    )]
    PayloadTooLarge {
        queue: String,
        job_id: String,
        len: usize,
        max: usize,
    },

    /// A job handed to a producer has an empty `job_id`; `position` is its index in the batch.
    #[error("queue {queue}: job at position {position} has an empty job_id")]
    EmptyJobId { queue: String, position: usize },

    /// A job names a lane its queue does not have.
    #[error("queue {queue}: job {job_id:?} names lane {lane:?}, which is not one of the queue's lanes ({known})")]
    UnknownLane {
        queue: String,
        job_id: String,
        lane: String,
        /// The queue's lanes, comma-separated, or `none` when it has no lanes.
        known: String,
    },

    /// A job could not be encoded.
    #[error("queue {queue}: job {job_id:?} is invalid: {source}")]
    InvalidJob {
        queue: String,
        job_id: String,
        #[source]
        source: Box<super::Error>,
    },

    /// The partition's oldest undelivered entry (for its slowest group) is
    /// older than `admission.max_oldest_ready_age`.
    #[error(
        "queue {queue} partition {partition}{}: backpressure: the oldest undelivered entry is {}, above admission.max_oldest_ready_age = {}",
        lane.as_ref().map(|lane| format!(" lane {lane}")).unwrap_or_default(),
        humantime::format_duration(*oldest_ready_age),
        humantime::format_duration(*limit)
    )]
    Backpressure {
        queue: String,
        partition: crate::Partition,
        /// The lane, for a queue with lanes: each lane's stream is admitted on its own.
        lane: Option<String>,
        oldest_ready_age: std::time::Duration,
        limit: std::time::Duration,
    },
}
