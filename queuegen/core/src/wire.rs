//! The stream entry's wire facts every side must agree on: the header fields
//! a producer writes (with the size allowance the spec's payload check
//! assumes for each), and the Function library's limits, which the spec
//! check, the runtime and `functions.lua` (rendered from here) share.

/// The size budget of one implicit header field: its name plus at most
/// `max_value_bytes` of value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderField {
    pub name: &'static str,
    /// Largest value counted for payload sizing; `None` for `type`, whose
    /// value is the envelope name itself.
    pub max_value_bytes: Option<u64>,
}

/// Header fields in the order they are written, with the allowance the
/// payload check assumes for each. Producers should keep values within these
/// (a `job_id` over 128 bytes may exceed a payload bound that was accepted).
///
/// The one list of the header: the spec check (`queuegen_spec::limits`),
/// the runtime (`queuegen_runtime::envelope::header_fields`), the derive and
/// the Function library (rendered into `functions.lua`) all read it.
pub const HEADER_FIELDS: &[HeaderField] = &[
    HeaderField {
        name: header_fields::JOB_ID,
        max_value_bytes: Some(128),
    },
    HeaderField {
        name: header_fields::TYPE,
        max_value_bytes: None,
    },
    HeaderField {
        name: header_fields::TENANT,
        max_value_bytes: Some(64),
    },
    // u32 in decimal.
    HeaderField {
        name: header_fields::SCHEMA,
        max_value_bytes: Some(10),
    },
    // RFC 3339 UTC with milliseconds: 2024-01-01T00:00:00.000Z.
    HeaderField {
        name: header_fields::CREATED_AT,
        max_value_bytes: Some(24),
    },
    // W3C trace id: 32 hex digits.
    HeaderField {
        name: header_fields::TRACE_ID,
        max_value_bytes: Some(32),
    },
    HeaderField {
        name: header_fields::ATTEMPT,
        max_value_bytes: Some(10),
    },
    // A stream ID: two u64 and a dash.
    HeaderField {
        name: header_fields::PREV_ID,
        max_value_bytes: Some(41),
    },
    HeaderField {
        name: header_fields::REASON,
        max_value_bytes: Some(256),
    },
];

/// The two fields a job handed on by a pipeline stage carries after the
/// header: its run and the job that handed it on. Not in [`HEADER_FIELDS`]:
/// only the envelopes of pipeline stages have them, so a queue outside any
/// pipeline may still have a body field of either name. The Function
/// library keeps them as it keeps body fields, in place, on every rewrite.
/// The allowance is a `job_id`'s: both values are job IDs.
pub const RUN_FIELDS: &[HeaderField] = &[
    HeaderField {
        name: run_fields::RUN_ID,
        max_value_bytes: Some(128),
    },
    HeaderField {
        name: run_fields::PARENT,
        max_value_bytes: Some(128),
    },
];

/// Names of [`RUN_FIELDS`].
pub mod run_fields {
    /// The run's ID: the `job_id` of the first stage's job that started it.
    pub const RUN_ID: &str = "run_id";
    /// The `job_id` of the job that handed this one on.
    pub const PARENT: &str = "parent";
}

/// How a producer lays an envelope out in its stream entry (`payload.shape`).
///
/// Readers (workers, the Function library, the CLI and the dashboard) tell
/// the two apart by the entry itself, not by the spec: an entry whose only
/// field is [`PACKED_FIELD`] is packed. So a queue can change shape with
/// entries of both kinds in its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryShape {
    /// One field, [`PACKED_FIELD`], holding the envelope's field/value pairs
    /// as one MessagePack array `[name, value, name, value, ...]` of strings:
    /// the same pairs as [`EntryShape::Fields`], each value in its field
    /// text. One field per entry halves the server's work per `XADD` and
    /// read, and the client's per decode (docs/benchmarks.md).
    Packed,
    /// Every header and body field a stream field of its own: readable in
    /// `redis-cli XRANGE` and by tools that read streams themselves, at about
    /// half the rate.
    Fields,
}

impl EntryShape {
    /// Every shape, in [`EntryShape::NAMES`] order.
    pub const ALL: [EntryShape; 2] = [EntryShape::Packed, EntryShape::Fields];
    /// The spec's names of the shapes, in [`EntryShape::ALL`] order.
    pub const NAMES: &'static [&'static str] = &["packed", "fields"];

    /// The spec's name of the shape.
    pub fn name(self) -> &'static str {
        match self {
            EntryShape::Packed => Self::NAMES[0],
            EntryShape::Fields => Self::NAMES[1],
        }
    }
}

/// The one field of a packed entry ([`EntryShape::Packed`]).
pub const PACKED_FIELD: &str = "packed";

/// Header field names, in the order they are written ([`HEADER_FIELDS`]).
pub mod header_fields {
    pub const JOB_ID: &str = "job_id";
    pub const TYPE: &str = "type";
    pub const TENANT: &str = "tenant";
    pub const SCHEMA: &str = "schema";
    pub const CREATED_AT: &str = "created_at";
    pub const TRACE_ID: &str = "trace_id";
    pub const ATTEMPT: &str = "attempt";
    pub const PREV_ID: &str = "prev_id";
    pub const REASON: &str = "reason";

    /// Every header field name, in [`super::HEADER_FIELDS`] order; body
    /// fields must not reuse them.
    pub const ALL: &[&str] = &NAMES;

    /// Written by the library's `replay` after the others, on a replayed
    /// job only: the dead letter's ID. Not a name the producer writes, so
    /// not in [`ALL`].
    pub const REPLAY_OF: &str = "replay_of";

    const NAMES: [&str; super::HEADER_FIELDS.len()] = {
        let mut names = [""; super::HEADER_FIELDS.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = super::HEADER_FIELDS[i].name;
            i += 1;
        }
        names
    };
}

/// Limits of the Function library, checked inside every function before its
/// first write and rendered into `functions.lua` from here, so that the spec
/// check, the runtime and the library cannot disagree.
pub mod library {
    /// Most IDs one `ack` call takes (Lua's `unpack` has a limit; the
    /// acker flushes fewer at a time).
    pub const MAX_ACK_IDS: u64 = 4096;
    /// Most fields (name/value pairs, header fields among them) an envelope
    /// may have: an `XADD` unpacks two values per field, and Lua's `unpack`
    /// fails past about 8,000 values. Room is left for the headers a
    /// rewrite adds.
    pub const MAX_ENVELOPE_FIELDS: u64 = 1000;
    /// Most entries one `claim` takes: `XAUTOCLAIM` allocates room for
    /// `COUNT` IDs before it looks. `claim.batch` is at most this.
    pub const MAX_CLAIM_COUNT: u64 = 100_000;
    /// Longest dead-letter `detail` and retry `reason` kept, in bytes,
    /// marker included: a longer one is cut, never refused.
    pub const MAX_DETAIL_BYTES: u64 = 1024;
    pub const MAX_REASON_BYTES: u64 = 1024;
    /// Most jobs one job of a pipeline stage hands on (`max_children` is
    /// at most this), and so most children one `run_settle` call counts.
    pub const MAX_CHILDREN: u64 = 10_000;
    /// Longest result reference a `run_settle` call records for a join's
    /// summary, in bytes (an object key, a row's ID).
    pub const MAX_RESULT_REF_BYTES: u64 = 512;
    /// Most envelopes one `publish_batch` call appends (its keys and
    /// envelopes are unpacked, as for `MAX_ACK_IDS`): a hand-off of more
    /// children to one partition takes several calls.
    pub const MAX_PUBLISH_BATCH: u64 = 100;
    /// Most jobs one `run_settle` call settles (their children together
    /// at most `MAX_CHILDREN`): a worker settles the jobs that end
    /// together at one join partition in one call.
    pub const MAX_SETTLE_BATCH: u64 = 100;
}

/// Header fields that may be used in `partition_by`.
pub const PARTITION_HEADER_FIELDS: &[&str] = &["tenant", "job_id"];
