//! Transition errors: a Function library call that refused to move or settle a job, writing nothing.

use std::fmt;

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
        partition: crate::Partition,
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
    pub partition: crate::Partition,
    /// The job's `job_id`, or the entry's stream ID when the job is not known.
    pub job: String,
    pub stream_id: String,
    /// The consumer that asked: the one that no longer owns the entry.
    pub consumer: String,
    /// The consumer the entry is pending for now, or `None` when it is no longer pending.
    pub owner: Option<String>,
}

/// The error codes a library function refuses with; none of them wrote anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransitionCode {
    /// `QG_WRONGTYPE <key> <type>`: a key holds the wrong Redis type.
    WrongType,
    /// `QG_BADARG <name> <why>`
    BadArg,
    /// `QG_NOSOURCE <id>`: the source entry does not exist (and no marker says it moved).
    NoSource,
    /// `QG_BADSCHEMA <seen>`: the envelope's schema is not in the accepted list.
    BadSchema,
    /// `QG_BADENVELOPE <why>`
    BadEnvelope,
    /// `QG_BATCH <n> > <max>`
    Batch,
    /// `QG_NOT_OWNER <id> ...`: the entry is pending for another consumer,
    /// or no longer pending. Calls return it as [`TransitionError::NotOwner`].
    NotOwner,
    /// A `QG_` code this runtime does not know (a newer library); the
    /// error's detail starts with the code itself.
    Unknown,
}

impl TransitionCode {
    pub(crate) fn parse(code: &str) -> Option<TransitionCode> {
        let name = code.strip_prefix("QG_")?;
        Some(match name {
            "WRONGTYPE" => TransitionCode::WrongType,
            "BADARG" => TransitionCode::BadArg,
            "NOSOURCE" => TransitionCode::NoSource,
            "BADSCHEMA" => TransitionCode::BadSchema,
            "BADENVELOPE" => TransitionCode::BadEnvelope,
            "BATCH" => TransitionCode::Batch,
            "NOT_OWNER" => TransitionCode::NotOwner,
            _ => TransitionCode::Unknown,
        })
    }
}

impl fmt::Display for TransitionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransitionCode::WrongType => "QG_WRONGTYPE",
            TransitionCode::BadArg => "QG_BADARG",
            TransitionCode::NoSource => "QG_NOSOURCE",
            TransitionCode::BadSchema => "QG_BADSCHEMA",
            TransitionCode::BadEnvelope => "QG_BADENVELOPE",
            TransitionCode::Batch => "QG_BATCH",
            TransitionCode::NotOwner => "QG_NOT_OWNER",
            TransitionCode::Unknown => "QG_(unknown)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_parse_and_print_as_redis_sends_them() {
        for code in [
            "QG_WRONGTYPE",
            "QG_BADARG",
            "QG_NOSOURCE",
            "QG_BADSCHEMA",
            "QG_BADENVELOPE",
            "QG_BATCH",
            "QG_NOT_OWNER",
        ] {
            assert_eq!(TransitionCode::parse(code).unwrap().to_string(), code);
        }
        assert_eq!(
            TransitionCode::parse("QG_FUTURE"),
            Some(TransitionCode::Unknown)
        );
        assert_eq!(TransitionCode::parse("ERR"), None);
    }
}
