//! Decode errors: an envelope field, schema version or entry type this build cannot read or write.

/// What is wrong with one envelope field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("is missing")]
    Missing,
    #[error("is not a valid {expected}: {found:?}")]
    Malformed {
        expected: &'static str,
        found: String,
    },
    #[error("is {len} bytes, above its limit of {max} bytes")]
    Oversized { len: usize, max: usize },
}

/// An entry that cannot be decoded (or a job that cannot be encoded) as its envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// An envelope field could not be encoded or decoded.
    #[error("envelope {envelope}: field `{field}` {problem}")]
    Field {
        envelope: &'static str,
        field: &'static str,
        problem: FieldProblem,
    },

    /// The entry names a schema version this build does not decode.
    #[error("envelope {envelope}: schema version {seen} is not accepted (accepted: {accepted:?})")]
    UnsupportedSchema {
        envelope: &'static str,
        seen: u32,
        accepted: &'static [u32],
    },

    /// A packed entry's one field is not a MessagePack array of string
    /// names and values (see `queuegen_core::wire::EntryShape::Packed`).
    #[error("envelope {envelope}: the packed entry {problem}")]
    Packed {
        envelope: &'static str,
        problem: crate::packed::UnpackError,
    },

    /// The entry's `type` header names another envelope.
    #[error("entry has type {found:?}, expected {expected}")]
    WrongType {
        expected: &'static str,
        found: String,
    },
}

// Constructors for the derive and the generated envelopes, so that the code
// they expand to does not spell out the enum's layout.
impl DecodeError {
    /// Field `field` of `envelope` has `problem`.
    pub fn field(envelope: &'static str, field: &'static str, problem: FieldProblem) -> Self {
        DecodeError::Field {
            envelope,
            field,
            problem,
        }
    }

    /// `envelope` does not decode schema version `seen`.
    pub fn unsupported_schema(envelope: &'static str, seen: u32, accepted: &'static [u32]) -> Self {
        DecodeError::UnsupportedSchema {
            envelope,
            seen,
            accepted,
        }
    }
}
