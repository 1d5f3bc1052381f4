//! What a library function answers beyond its own reply: the refusal codes every function shares, and where a move put a job.

use std::fmt;

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
    /// or no longer pending. Calls return it as [`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner).
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

/// Where a transition put the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The destination: retry id, dead-letter ID or new ready entry ID.
    pub id: String,
    /// `true` when an earlier run had already made this transition (its
    /// marker was found): this call only finished cleanup.
    pub already: bool,
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
