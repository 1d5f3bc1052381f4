//! The envelope: standard header fields plus a typed body, as flat field/value pairs.
//!
//! The pairs of one envelope: the header fields in a fixed order (`job_id`,
//! `type`, `tenant`, `schema`, `created_at`, `trace_id`, `attempt`, then
//! `prev_id` and `reason` on a rescheduled attempt), followed by the body
//! fields in declaration order. Optional body fields that are `None` are left
//! out. Unknown fields are ignored when decoding, so a newer producer can add
//! fields an older worker does not read. A stream entry holds the pairs as its
//! fields, or packed in one field (`payload.shape`, [`crate::packed`]).

use std::collections::HashMap;

use crate::error::{DecodeError, Error, FieldProblem};
use crate::field::{FieldValue, Timestamp};
use crate::packed;

/// Header field names, in the order they are written; the list lives with
/// the spec's size allowance for each (`queuegen_core::wire`), which the
/// derive and the Function library read too.
pub use queuegen_core::wire::header_fields;
pub use queuegen_core::wire::run_fields;

/// The standard fields every envelope carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Application-chosen, stable identity of the intent; survives retries and replays.
    pub job_id: String,
    /// The envelope type name (`Envelope::TYPE` of the body).
    pub envelope_type: String,
    pub tenant: String,
    /// Schema version the body was written with.
    pub schema: u32,
    pub created_at: Timestamp,
    pub trace_id: String,
    /// Application attempt, starting at 1; drives retry policy.
    pub attempt: u32,
    /// Stream ID of the previous attempt, on a rescheduled attempt.
    pub prev_id: Option<String>,
    /// Why the previous attempt was rescheduled.
    pub reason: Option<String>,
}

/// Where a job handed on by a pipeline stage belongs: its run and the job
/// that handed it on ([`run_fields`], written after the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLink {
    /// The `job_id` of the first stage's job that started the run.
    pub run_id: String,
    /// The `job_id` of the job that handed this one on.
    pub parent: String,
}

/// A typed envelope body. Implemented by `#[derive(Envelope)]`.
pub trait Envelope: Sized + Send + 'static {
    /// The envelope type name written to the `type` header field.
    const TYPE: &'static str;
    /// The schema version this struct is written with.
    const SCHEMA: u32;
    /// Every schema version this struct decodes, including `SCHEMA`.
    const ACCEPTS: &'static [u32];

    /// Appends the body fields, in declaration order.
    fn encode_body(&self, out: &mut FieldWriter) -> Result<(), Error>;

    /// Reads the body fields of an entry written with schema version `schema`.
    fn decode_body(fields: &FieldMap<'_>, schema: u32) -> Result<Self, Error>;
}

/// Decodes entries written with an older accepted schema version into the current struct.
///
/// `#[derive(Envelope)]` calls it for every version in `ACCEPTS` other than
/// `SCHEMA`, so only an envelope that accepts older versions needs it.
/// Generated envelopes implement it with one struct per older version and a
/// `From` conversion for each step between versions, as the spec's `changes`
/// declare them; a step marked `upcast: manual` leaves that `From` to you.
#[diagnostic::on_unimplemented(
    message = "`{Self}` accepts older schema versions, so it needs `impl Upcast for {Self}`",
    label = "decodes older schema versions through `Upcast`",
    note = "implement `queuegen_runtime::Upcast::decode_older` to turn an entry of each older accepted version into `{Self}`, or accept only the current schema"
)]
pub trait Upcast: Sized {
    /// Decodes the body of an entry written with `schema`, one of the
    /// accepted versions older than the current one.
    fn decode_older(fields: &FieldMap<'_>, schema: u32) -> Result<Self, Error>;
}

/// The wire values of an enum deriving `FieldEnum`, which `#[derive(FieldEnum)]`
/// implements so that `#[envelope(spec = ...)]` can compare them with the
/// spec's at compile time. Not public API.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an enum deriving `FieldEnum`",
    label = "the spec says this field is an enum",
    note = "an enum field of an envelope checked against a spec must be an enum deriving `FieldEnum`, with the spec's values"
)]
pub trait FieldEnumValues {
    const VALUES: &'static [&'static str];
}

/// Whether `found` and `expected` hold the same values, in any order; a
/// `const fn` so that the comparison fails the compile. Not public API.
#[doc(hidden)]
pub const fn same_values(found: &[&str], expected: &[&str]) -> bool {
    // Both lists are free of repeats (the derive and the spec check reject
    // them), so equal lengths and every found value expected mean equal sets.
    if found.len() != expected.len() {
        return false;
    }
    let mut i = 0;
    while i < found.len() {
        let mut j = 0;
        while j < expected.len() && !same_str(found[i], expected[j]) {
            j += 1;
        }
        if j == expected.len() {
            return false;
        }
        i += 1;
    }
    true
}

/// `a == b` on `&str`, which is not `const` yet.
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Collects the field/value pairs of one entry while checking size limits.
#[derive(Debug)]
pub struct FieldWriter {
    envelope: &'static str,
    pairs: Vec<(&'static str, String)>,
}

impl FieldWriter {
    pub fn new(envelope: &'static str) -> Self {
        FieldWriter {
            envelope,
            pairs: Vec::with_capacity(16),
        }
    }

    /// Writes one field; `max_bytes` is the field's declared limit, if any.
    pub fn field<T: FieldValue>(
        &mut self,
        name: &'static str,
        value: &T,
        max_bytes: Option<usize>,
    ) -> Result<(), Error> {
        if let Some(encoded) = value.encode_field() {
            if let Some(problem) = oversized(encoded.len(), max_bytes) {
                return Err(field_error(self.envelope, name, problem));
            }
            self.pairs.push((name, encoded));
        }
        Ok(())
    }

    pub fn into_pairs(self) -> Vec<(&'static str, String)> {
        self.pairs
    }
}

/// Read access to the fields of one stream entry.
#[derive(Debug, Default)]
pub struct FieldMap<'a> {
    envelope: &'static str,
    /// Names as bytes: a reader only compares them with the names it wants.
    entries: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> FieldMap<'a> {
    /// Fields as read from an `XRANGE`/`XREADGROUP` reply into a map; a
    /// packed entry's pairs are read from its one field (borrowed, not
    /// copied). Fails only on a packed field that does not unpack.
    pub fn from_stream_map(
        envelope: &'static str,
        map: &'a HashMap<String, redis::Value>,
    ) -> Result<Self, Error> {
        let entries: Vec<(&[u8], &[u8])> = map
            .iter()
            .filter_map(|(name, value)| match value {
                redis::Value::BulkString(bytes) => Some((name.as_bytes(), bytes.as_slice())),
                redis::Value::SimpleString(text) => Some((name.as_bytes(), text.as_bytes())),
                _ => None,
            })
            .collect();
        Self::from_entry(envelope, entries)
    }

    /// Fields as pairs in stream order: an entry as read, in either shape
    /// (a packed entry's pairs are read from its one field, borrowed), or
    /// pairs made by hand (tests, fixtures). Fails only on a packed field
    /// that does not unpack.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<[u8]>>(
        envelope: &'static str,
        pairs: &'a [(K, V)],
    ) -> Result<Self, Error> {
        if let Some(packed) = packed::packed_value(pairs) {
            return Self::unpacked(envelope, packed);
        }
        let entries = pairs
            .iter()
            .map(|(name, value)| (name.as_ref().as_bytes(), value.as_ref()))
            .collect();
        Ok(FieldMap { envelope, entries })
    }

    fn from_entry(
        envelope: &'static str,
        entries: Vec<(&'a [u8], &'a [u8])>,
    ) -> Result<Self, Error> {
        match *entries.as_slice() {
            [(name, packed)] if name == packed::PACKED_FIELD.as_bytes() => {
                Self::unpacked(envelope, packed)
            }
            _ => Ok(FieldMap { envelope, entries }),
        }
    }

    fn unpacked(envelope: &'static str, packed: &'a [u8]) -> Result<Self, Error> {
        let entries = packed::unpack_bytes(packed)
            .map_err(|problem| Error::Decode(DecodeError::Packed { envelope, problem }))?;
        Ok(FieldMap { envelope, entries })
    }

    /// The raw text of a field, if present. Non-UTF-8 values are reported as malformed.
    pub fn raw(&self, name: &'static str) -> Result<Option<&'a str>, Error> {
        match self
            .entries
            .iter()
            .find(|(field, _)| *field == name.as_bytes())
        {
            None => Ok(None),
            Some((_, bytes)) => std::str::from_utf8(bytes).map(Some).map_err(|_| {
                self.problem(
                    name,
                    FieldProblem::Malformed {
                        expected: "UTF-8 text",
                        found: String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned(),
                    },
                )
            }),
        }
    }

    /// Decodes one field; `max_bytes` is the field's declared limit, if any.
    pub fn field<T: FieldValue>(
        &self,
        name: &'static str,
        max_bytes: Option<usize>,
    ) -> Result<T, Error> {
        let raw = self.raw(name)?;
        if let Some(problem) = raw.and_then(|raw| oversized(raw.len(), max_bytes)) {
            return Err(self.problem(name, problem));
        }
        T::decode_field(raw).map_err(|problem| self.problem(name, problem))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn problem(&self, field: &'static str, problem: FieldProblem) -> Error {
        field_error(self.envelope, field, problem)
    }
}

/// Field `field` of an `envelope` entry cannot be written or read.
fn field_error(envelope: &'static str, field: &'static str, problem: FieldProblem) -> Error {
    Error::Decode(DecodeError::Field {
        envelope,
        field,
        problem,
    })
}

/// A value of `len` bytes over the field's declared limit, if it has one.
fn oversized(len: usize, max_bytes: Option<usize>) -> Option<FieldProblem> {
    let max = max_bytes.filter(|max| len > *max)?;
    Some(FieldProblem::Oversized { len, max })
}

/// Encodes header and body into the pairs of one `XADD`.
pub fn encode<E: Envelope>(
    header: &Header,
    body: &E,
) -> Result<Vec<(&'static str, String)>, Error> {
    encode_in_run(header, None, body)
}

/// As [`encode`], with the job's run (a job a pipeline stage handed on)
/// written after the header.
pub fn encode_in_run<E: Envelope>(
    header: &Header,
    run: Option<&RunLink>,
    body: &E,
) -> Result<Vec<(&'static str, String)>, Error> {
    use header_fields as h;
    let mut out = FieldWriter::new(E::TYPE);
    out.field(h::JOB_ID, &header.job_id, None)?;
    out.field(h::TYPE, &E::TYPE.to_owned(), None)?;
    out.field(h::TENANT, &header.tenant, None)?;
    out.field(h::SCHEMA, &E::SCHEMA, None)?;
    out.field(h::CREATED_AT, &header.created_at, None)?;
    out.field(h::TRACE_ID, &header.trace_id, None)?;
    out.field(h::ATTEMPT, &header.attempt, None)?;
    out.field(h::PREV_ID, &header.prev_id, None)?;
    out.field(h::REASON, &header.reason, None)?;
    if let Some(run) = run {
        out.field(run_fields::RUN_ID, &run.run_id, None)?;
        out.field(run_fields::PARENT, &run.parent, None)?;
    }
    body.encode_body(&mut out)?;
    Ok(out.into_pairs())
}

/// Decodes the header only; used before the body type is trusted (and for dead letters).
pub(crate) fn decode_header(fields: &FieldMap<'_>) -> Result<Header, Error> {
    use header_fields as h;
    let job_id: String = fields.field(h::JOB_ID, None)?;
    if job_id.is_empty() {
        return Err(fields.problem(
            h::JOB_ID,
            FieldProblem::Malformed {
                expected: "non-empty job id",
                found: String::new(),
            },
        ));
    }
    Ok(Header {
        job_id,
        envelope_type: fields.field(h::TYPE, None)?,
        tenant: fields.field(h::TENANT, None)?,
        schema: fields.field(h::SCHEMA, None)?,
        created_at: fields.field(h::CREATED_AT, None)?,
        trace_id: fields.field(h::TRACE_ID, None)?,
        attempt: fields.field(h::ATTEMPT, None)?,
        prev_id: fields.field(h::PREV_ID, None)?,
        reason: fields.field(h::REASON, None)?,
    })
}

/// Decodes a whole entry: header, type and schema checks, then the body.
/// The run of a job a pipeline stage handed on; `None` for a job that
/// starts a run, or of a queue outside any pipeline. Only a stage's worker
/// asks: elsewhere a body field may bear either name.
pub fn decode_run_link(fields: &FieldMap<'_>) -> Result<Option<RunLink>, Error> {
    let run_id: Option<String> = fields.field(run_fields::RUN_ID, None)?;
    let parent: Option<String> = fields.field(run_fields::PARENT, None)?;
    Ok(match (run_id, parent) {
        (Some(run_id), Some(parent)) => Some(RunLink { run_id, parent }),
        _ => None,
    })
}

pub fn decode<E: Envelope>(fields: &FieldMap<'_>) -> Result<(Header, E), Error> {
    let header = decode_header(fields)?;
    if header.envelope_type != E::TYPE {
        return Err(Error::Decode(DecodeError::WrongType {
            expected: E::TYPE,
            found: header.envelope_type,
        }));
    }
    if !E::ACCEPTS.contains(&header.schema) {
        return Err(Error::Decode(DecodeError::UnsupportedSchema {
            envelope: E::TYPE,
            seen: header.schema,
            accepted: E::ACCEPTS,
        }));
    }
    let body = E::decode_body(fields, header.schema)?;
    Ok((header, body))
}
