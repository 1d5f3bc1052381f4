//! Transition errors: a Function library call that refused to move or settle a job, writing nothing.

use crate::functions::TransitionCode;

/// A library function's refusal (a `QG_*` error reply); it wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// A refusal other than `QG_NOT_OWNER`.
    #[error("{function} on {key} (partition {partition}, job {job}) refused: {code} {detail}")]
    Refused {
        function: String,
        /// The transition's source key: ready stream, retry set or dead-letter stream.
        key: String,
        partition: u16,
        /// The job's `job_id`, or the source entry ID when the job is not known.
        job: String,
        code: TransitionCode,
        detail: String,
    },

    /// A refusal to settle (or renew) a pending entry that is no longer
    /// this consumer's (`QG_NOT_OWNER`). Another consumer claimed the entry
    /// after `claim.min_idle` (it settles the job now), or someone settled
    /// it already.
    #[error("{0}")]
    NotOwner(Box<NotOwner>),
}

/// A settlement refused with `QG_NOT_OWNER`: which entry, who asked, who owns it now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{function} on {key} (partition {partition}, job {job}) refused: QG_NOT_OWNER: entry {stream_id} {}",
    match owner {
        Some(owner) => format!("is pending for consumer {owner}, not {consumer}"),
        None => format!("is no longer pending (consumer {consumer} lost it)"),
    }
)]
pub struct NotOwner {
    pub function: String,
    /// The entry's ready stream.
    pub key: String,
    pub partition: u16,
    /// The job's `job_id`, or the entry's stream ID when the job is not known.
    pub job: String,
    pub stream_id: String,
    /// The consumer that asked: the one that no longer owns the entry.
    pub consumer: String,
    /// The consumer the entry is pending for now, or `None` when it is no longer pending.
    pub owner: Option<String>,
}
