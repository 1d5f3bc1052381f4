//! Operation errors: an operator's request that names what the queue does not have, and trims and leases that stop.

use crate::stream_id::BadStreamId;

/// An operation (a view, a dead-letter action, a trim, a lease) that cannot go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperationError {
    /// An operator asked about a partition the queue does not have.
    #[error("queue {queue} has no partition {partition}: its partitions are 0 to {}", partitions.saturating_sub(1))]
    NoSuchPartition {
        queue: String,
        partition: u16,
        partitions: u16,
    },

    /// An operator named a lane the queue does not have.
    #[error("queue {queue} has {known}; there is no lane {lane:?}")]
    NoSuchLane {
        queue: String,
        lane: String,
        /// `lanes high, normal` or `no lanes`.
        known: String,
    },

    /// An operator named a dead letter that is not (or no longer) stored.
    #[error("queue {queue}: no dead letter with ID {id} in {place}")]
    NoSuchDeadLetter {
        queue: String,
        id: String,
        /// `partition 3`, `lane high, partition 3` or `any partition`.
        place: String,
    },

    /// An operator gave a dead letter ID that is not a whole stream ID.
    #[error(
        "queue {queue}: dead letter ID {id:?} is not a stream ID: a stream ID is \
         <unix ms>-<sequence>, two whole numbers such as 1733486400000-0 \
         (copy it from `queuegen dlq list` or the partition's page)"
    )]
    BadDeadLetterId { queue: String, id: String },

    /// An operator asked about a pipeline run that no join keeps.
    #[error(
        "pipeline {pipeline}: no run {run_id:?} at any join ({places}): its first stage's \
         job with that job_id has not finished yet, or the run ended more than keep \
         ({keep}) ago, or it never started"
    )]
    NoSuchRun {
        pipeline: String,
        run_id: String,
        /// Where it was looked for: `notify partition 2, archive partition 0`.
        places: String,
        /// The pipeline's `keep`, e.g. `7days`.
        keep: String,
    },

    /// A stream's groups or boundaries could not be read as expected.
    #[error("inventory of stream {key}: {problem}")]
    Inventory {
        key: String,
        problem: InventoryProblem,
    },

    /// A trim stopped before removing anything: what it had inventoried no
    /// longer holds (a group added, removed or moved back with `SETID`).
    #[error("trim of {key} aborted, nothing removed: group {group:?} {change}")]
    TrimAborted {
        key: String,
        group: String,
        /// What changed, as the trim function reported it: its text is the
        /// Function library's, so it stays free text here.
        change: String,
    },

    /// A trim ran, but afterwards an entry it had to keep is gone: a pending
    /// entry without its payload, or a group's next undelivered entry.
    #[error("trim of {key} to MINID {minid}: verification failed: group {group:?} lost its {what} {id}: XRANGE {id} {id} is empty")]
    TrimUnverified {
        key: String,
        minid: String,
        group: String,
        /// `pending entry`, `first undelivered entry` or `pending entry below the MINID`.
        what: &'static str,
        /// The lost entry's ID.
        id: String,
    },

    /// Another process holds the partition's lease (a trimmer, or `apply`).
    #[error("lease {key} is held by {holder:?}: another trimmer or `queuegen apply` is working on this partition")]
    LeaseHeld { key: String, holder: String },
}

/// What in a stream's inventory (or a trim's reply) was not as expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryProblem {
    /// An ID the server answered is not a stream ID.
    #[error("{0}")]
    BadId(BadStreamId),
    /// A pipeline answered fewer replies than it sent commands.
    #[error("the server answered fewer replies than commands sent")]
    ShortReply,
    /// A reply of the right kind but the wrong shape.
    #[error("malformed {command} reply")]
    Malformed { command: String },
    /// A reply of another kind; `found` is the reply as debug text.
    #[error("unexpected {command} reply: {found}")]
    Unexpected { command: String, found: String },
    /// The trim function answered something other than its result.
    #[error("unexpected reply from the trim function")]
    TrimReply,
}
