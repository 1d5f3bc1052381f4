//! Entry shapes (issue 28, item 2): the baseline's jobs written as today's
//! flat fields, with the body as one encoded field, or as one packed value,
//! and read back into a `TestJob` envelope as a worker would.
//!
//! The body-as-one-field shapes keep as stream fields the header fields the
//! Function library reads from an entry (`field_value` and
//! `rewrite_envelope` in `functions.lua`: `job_id`, `type`, `tenant`,
//! `schema`, `attempt`, and `prev_id`/`reason` on a rescheduled attempt);
//! `created_at`, `trace_id` and the body fields go into the one `body`
//! field. The packed shapes put the whole envelope, header and body, in one
//! flat map (body field names never reuse header names: the spec check
//! rejects them). Values keep their field text (`created_at` as RFC 3339),
//! so the shapes differ in layout, not in what each value costs to parse.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use queuegen_runtime::envelope::{self, header_fields as h, Header};
use queuegen_runtime::{Envelope, FieldMap, FieldValue, Timestamp};
use queuegen_tests::queues::envelopes::TestJob;
use serde::{Deserialize, Serialize};

/// The one field of the body-as-one-field shapes.
pub const BODY_FIELD: &str = "body";
/// The one field of the packed shapes.
pub const PACKED_FIELD: &str = "packed";
/// `TestJob.subject_ref`'s declared limit (queues.yaml: `max_bytes: 200`).
const SUBJECT_REF_MAX_BYTES: usize = 200;

/// How one job's envelope is laid out in its stream entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Today's: every header and body field a stream field (baseF).
    Fields,
    /// The Functions' header fields as stream fields, the rest one JSON `body` (baseB).
    BodyJson,
    /// As `BodyJson`, the `body` in MessagePack (baseM).
    BodyMsgpack,
    /// One `packed` field: the whole envelope as a MessagePack map (baseK).
    PackedMsgpack,
    /// One `packed` field: the whole envelope as a JSON object (baseJ).
    PackedJson,
}

/// `created_at`, `trace_id` and the body: the `body` field of baseB and baseM.
#[derive(Serialize, Deserialize)]
struct Rest {
    created_at: String,
    trace_id: String,
    subject_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pages: Option<u32>,
}

/// The whole envelope as one flat map: the `packed` field of baseK and baseJ.
#[derive(Serialize, Deserialize)]
struct Packed {
    job_id: String,
    #[serde(rename = "type")]
    envelope_type: String,
    tenant: String,
    schema: u32,
    created_at: String,
    trace_id: String,
    attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prev_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    subject_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pages: Option<u32>,
}

impl Shape {
    pub const ALL: [Shape; 5] = [
        Shape::Fields,
        Shape::BodyJson,
        Shape::BodyMsgpack,
        Shape::PackedMsgpack,
        Shape::PackedJson,
    ];

    /// The letter the baseline's slug ends with.
    pub fn letter(self) -> &'static str {
        match self {
            Shape::Fields => "F",
            Shape::BodyJson => "B",
            Shape::BodyMsgpack => "M",
            Shape::PackedMsgpack => "K",
            Shape::PackedJson => "J",
        }
    }

    /// What the variant's name adds.
    pub fn describe(self) -> &'static str {
        match self {
            Shape::Fields => "every field a stream field",
            Shape::BodyJson => "Lua-read header fields + body as one JSON field",
            Shape::BodyMsgpack => "Lua-read header fields + body as one MessagePack field",
            Shape::PackedMsgpack => "one MessagePack field",
            Shape::PackedJson => "one JSON field",
        }
    }

    /// Whether the Functions would decode the entry's one field in Lua.
    pub fn is_packed(self) -> bool {
        matches!(self, Shape::PackedMsgpack | Shape::PackedJson)
    }

    /// The stream entry of one job in this shape.
    pub fn encode(self, header: &Header, job: &TestJob) -> Result<Vec<(&'static str, Vec<u8>)>> {
        let text = |value: &str| value.as_bytes().to_vec();
        match self {
            Shape::Fields => Ok(envelope::encode(header, job)
                .context("encoding a job's fields")?
                .into_iter()
                .map(|(name, value)| (name, value.into_bytes()))
                .collect()),
            Shape::BodyJson | Shape::BodyMsgpack => {
                let rest = Rest {
                    created_at: header.created_at.to_string(),
                    trace_id: header.trace_id.clone(),
                    subject_ref: job.subject_ref.clone(),
                    pages: job.pages,
                };
                let body = if self == Shape::BodyJson {
                    serde_json::to_vec(&rest).context("encoding a body as JSON")?
                } else {
                    rmp_serde::to_vec_named(&rest).context("encoding a body as MessagePack")?
                };
                let mut pairs = vec![
                    (h::JOB_ID, text(&header.job_id)),
                    (h::TYPE, text(TestJob::TYPE)),
                    (h::TENANT, text(&header.tenant)),
                    (h::SCHEMA, TestJob::SCHEMA.to_string().into_bytes()),
                    (h::ATTEMPT, header.attempt.to_string().into_bytes()),
                ];
                pairs.extend(header.prev_id.as_deref().map(|id| (h::PREV_ID, text(id))));
                pairs.extend(header.reason.as_deref().map(|why| (h::REASON, text(why))));
                pairs.push((BODY_FIELD, body));
                Ok(pairs)
            }
            Shape::PackedMsgpack | Shape::PackedJson => {
                let packed = Packed {
                    job_id: header.job_id.clone(),
                    envelope_type: TestJob::TYPE.to_owned(),
                    tenant: header.tenant.clone(),
                    schema: TestJob::SCHEMA,
                    created_at: header.created_at.to_string(),
                    trace_id: header.trace_id.clone(),
                    attempt: header.attempt,
                    prev_id: header.prev_id.clone(),
                    reason: header.reason.clone(),
                    subject_ref: job.subject_ref.clone(),
                    pages: job.pages,
                };
                let value = if self == Shape::PackedJson {
                    serde_json::to_vec(&packed).context("packing an envelope as JSON")?
                } else {
                    rmp_serde::to_vec_named(&packed)
                        .context("packing an envelope as MessagePack")?
                };
                Ok(vec![(PACKED_FIELD, value)])
            }
        }
    }

    /// Decodes one entry's fields (as `XREADGROUP` returns them) into its
    /// header and `TestJob`, with the checks a worker makes: non-empty
    /// `job_id`, the envelope's type, an accepted schema, field limits.
    pub fn decode(self, map: &HashMap<String, redis::Value>) -> Result<(Header, TestJob)> {
        // Not for the packed shapes: their one field is the runtime's packed
        // field's name, holding a map the runtime does not read.
        let fields = || FieldMap::from_stream_map(TestJob::TYPE, map);
        let (header, job) = match self {
            Shape::Fields => return Ok(envelope::decode::<TestJob>(&fields()?)?),
            Shape::BodyJson | Shape::BodyMsgpack => {
                let fields = fields()?;
                let body = bytes_of(map, BODY_FIELD)?;
                let rest: Rest = if self == Shape::BodyJson {
                    serde_json::from_slice(body).context("decoding the JSON body")?
                } else {
                    rmp_serde::from_slice(body).context("decoding the MessagePack body")?
                };
                let header = Header {
                    job_id: fields.field(h::JOB_ID, None)?,
                    envelope_type: fields.field(h::TYPE, None)?,
                    tenant: fields.field(h::TENANT, None)?,
                    schema: fields.field(h::SCHEMA, None)?,
                    created_at: created_at(&rest.created_at)?,
                    trace_id: rest.trace_id,
                    attempt: fields.field(h::ATTEMPT, None)?,
                    prev_id: fields.field(h::PREV_ID, None)?,
                    reason: fields.field(h::REASON, None)?,
                };
                let job = TestJob {
                    subject_ref: rest.subject_ref,
                    pages: rest.pages,
                };
                (header, job)
            }
            Shape::PackedMsgpack | Shape::PackedJson => {
                let value = bytes_of(map, PACKED_FIELD)?;
                let packed: Packed = if self == Shape::PackedJson {
                    serde_json::from_slice(value).context("decoding the JSON envelope")?
                } else {
                    rmp_serde::from_slice(value).context("decoding the MessagePack envelope")?
                };
                let header = Header {
                    job_id: packed.job_id,
                    envelope_type: packed.envelope_type,
                    tenant: packed.tenant,
                    schema: packed.schema,
                    created_at: created_at(&packed.created_at)?,
                    trace_id: packed.trace_id,
                    attempt: packed.attempt,
                    prev_id: packed.prev_id,
                    reason: packed.reason,
                };
                let job = TestJob {
                    subject_ref: packed.subject_ref,
                    pages: packed.pages,
                };
                (header, job)
            }
        };
        check(&header, &job)?;
        Ok((header, job))
    }
}

/// The raw value of field `name`, which the shape requires.
fn bytes_of<'a>(map: &'a HashMap<String, redis::Value>, name: &str) -> Result<&'a [u8]> {
    match map.get(name) {
        Some(redis::Value::BulkString(bytes)) => Ok(bytes.as_slice()),
        Some(other) => bail!("field {name} is not a bulk string: {other:?}"),
        None => bail!("the entry has no {name} field"),
    }
}

fn created_at(text: &str) -> Result<Timestamp> {
    Timestamp::decode_field(Some(text))
        .map_err(|problem| anyhow::anyhow!("{}: created_at: {problem}", TestJob::TYPE))
}

/// What `envelope::decode` and `TestJob`'s derive check beyond parsing.
fn check(header: &Header, job: &TestJob) -> Result<()> {
    if header.job_id.is_empty() {
        bail!("job_id is empty");
    }
    if header.envelope_type != TestJob::TYPE {
        bail!(
            "type is {:?}, expected {:?}",
            header.envelope_type,
            TestJob::TYPE
        );
    }
    if !TestJob::ACCEPTS.contains(&header.schema) {
        bail!(
            "schema {} is not one of {:?}",
            header.schema,
            TestJob::ACCEPTS
        );
    }
    if job.subject_ref.len() > SUBJECT_REF_MAX_BYTES {
        bail!(
            "subject_ref has {} bytes, over its {SUBJECT_REF_MAX_BYTES}",
            job.subject_ref.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            job_id: "job-7".to_owned(),
            envelope_type: TestJob::TYPE.to_owned(),
            tenant: "tenant-7".to_owned(),
            schema: TestJob::SCHEMA,
            created_at: Timestamp::from_unix_millis(1_796_212_301_123),
            trace_id: "ab".repeat(16),
            attempt: 2,
            prev_id: Some("1-0".to_owned()),
            reason: None,
        }
    }

    #[test]
    fn every_shape_decodes_what_it_encodes() {
        let job = TestJob {
            subject_ref: "doc-7".to_owned(),
            pages: Some(7),
        };
        for shape in Shape::ALL {
            let pairs = shape.encode(&header(), &job).unwrap();
            let map: HashMap<String, redis::Value> = pairs
                .into_iter()
                .map(|(name, value)| (name.to_owned(), redis::Value::BulkString(value)))
                .collect();
            let (decoded_header, decoded_job) = shape.decode(&map).unwrap();
            assert_eq!(decoded_header, header(), "{shape:?}");
            assert_eq!(decoded_job, job, "{shape:?}");
        }
    }
}
