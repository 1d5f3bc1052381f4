//! `#[envelope(spec = ..., queue = ...)]`: structs that match a spec's envelope take
//! its type name, schemas, limits and defaults, and round-trip through the runtime codec.
//!
//! The spec is the fixture `ui/specs/envelopes.yaml`, which the UI tests
//! `ui/envelope_spec_*.rs` drift from. Its path is relative to this crate's
//! Cargo.toml.

// The generated code must not make its users' crates warn.
#![deny(unused)]

use queuegen_runtime::envelope;
use queuegen_runtime::envelope::Header;
use queuegen_runtime::error::DecodeError;
use queuegen_runtime::{Envelope, Error, FieldEnum, FieldMap, FieldProblem, Timestamp, Upcast};

#[derive(Debug, Clone, Copy, PartialEq, Eq, FieldEnum)]
enum Priority {
    Low,
    Normal,
    High,
}

/// In another order than the spec's `[email, sms, push]`: only the set of values matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, FieldEnum)]
enum Channel {
    Sms,
    Email,
    Push,
}

/// `queues.ocr`: everything but the fields comes from the spec. Its enum has
/// no `Default`; the spec's `default: normal` needs none.
#[derive(Debug, Clone, PartialEq, Eq, Envelope)]
#[envelope(spec = "ui/specs/envelopes.yaml", queue = "ocr")]
struct OcrJob {
    subject_ref: String,
    pages: Option<u32>,
    priority: Priority,
    searchable: bool,
    requested_at: Timestamp,
    max_retries: i32,
}

/// The spec accepts schema 2, which had no `searchable`; the derive hands
/// such entries to this impl.
impl Upcast for OcrJob {
    fn decode_older(fields: &FieldMap<'_>, schema: u32) -> Result<Self, Error> {
        assert_eq!(schema, 2, "the only older version the spec accepts");
        Ok(OcrJob {
            subject_ref: fields.field("subject_ref", Some(16))?,
            pages: fields.field("pages", None)?,
            priority: fields
                .field::<Option<Priority>>("priority", None)?
                .unwrap_or(Priority::Normal),
            // Schema 2 entries were all searchable.
            searchable: true,
            requested_at: fields.field("requested_at", None)?,
            max_retries: fields
                .field::<Option<i32>>("max_retries", None)?
                .unwrap_or(3),
        })
    }
}

/// `queues.notification`, repeating what the spec says (which must then agree).
#[derive(Debug, Clone, PartialEq, Eq, Envelope)]
#[envelope(
    spec = "ui/specs/envelopes.yaml",
    queue = "notification",
    name = "NotificationRequested",
    schema = 1,
    accepts = [1]
)]
struct Notify {
    #[envelope(max_bytes = 64)]
    recipient_ref: String,
    #[envelope(rename = "channel")]
    via: Channel,
    #[envelope(default = "false")]
    urgent: bool,
    row_limit: Option<u64>,
}

fn header_for<E: Envelope>(schema: u32) -> Header {
    Header {
        job_id: "job-7".into(),
        envelope_type: E::TYPE.into(),
        tenant: "acme".into(),
        schema,
        created_at: Timestamp::from_unix_millis(1_796_212_301_123),
        trace_id: "trace-1".into(),
        attempt: 1,
        prev_id: None,
        reason: None,
    }
}

fn ocr_job() -> OcrJob {
    OcrJob {
        subject_ref: "doc-42".into(),
        pages: Some(7),
        priority: Priority::High,
        searchable: false,
        requested_at: Timestamp::from_unix_millis(1_796_212_300_000),
        max_retries: -1,
    }
}

fn encode<E: Envelope>(body: &E) -> Vec<(&'static str, String)> {
    envelope::encode(&header_for::<E>(E::SCHEMA), body).expect("the body encodes")
}

fn decode<E: Envelope>(pairs: &[(&'static str, String)]) -> Result<(Header, E), Error> {
    envelope::decode::<E>(&FieldMap::from_pairs(E::TYPE, pairs).unwrap())
}

fn without(pairs: &[(&'static str, String)], names: &[&str]) -> Vec<(&'static str, String)> {
    pairs
        .iter()
        .filter(|(field, _)| !names.contains(field))
        .cloned()
        .collect()
}

fn with(
    pairs: &[(&'static str, String)],
    name: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    let mut pairs = without(pairs, &[name]);
    pairs.push((name, value.to_owned()));
    pairs
}

#[test]
fn type_and_schemas_come_from_the_spec() {
    assert_eq!(OcrJob::TYPE, "OcrRequested");
    assert_eq!(OcrJob::SCHEMA, 3);
    assert_eq!(OcrJob::ACCEPTS, &[2, 3]);

    assert_eq!(Notify::TYPE, "NotificationRequested");
    assert_eq!(Notify::SCHEMA, 1);
    assert_eq!(Notify::ACCEPTS, &[1]);
}

#[test]
fn matching_structs_round_trip() {
    let body = ocr_job();
    let pairs = encode(&body);
    let (header, decoded) = decode::<OcrJob>(&pairs).unwrap();
    assert_eq!(decoded, body);
    assert_eq!(header.schema, 3);

    let body = Notify {
        recipient_ref: "user-1".into(),
        via: Channel::Sms,
        urgent: true,
        row_limit: None,
    };
    let pairs = encode(&body);
    assert!(pairs.contains(&("channel", "sms".to_owned())));
    assert_eq!(decode::<Notify>(&pairs).unwrap().1, body);
}

/// Whether `error` is about a `subject_ref` of 17 bytes where the spec's
/// `max_bytes` is 16.
fn is_subject_ref_17_of_16(error: &Error) -> bool {
    matches!(
        error,
        Error::Decode(DecodeError::Field {
            field: "subject_ref",
            problem: FieldProblem::Oversized { len: 17, max: 16 },
            ..
        })
    )
}

#[test]
fn max_bytes_comes_from_the_spec() {
    let too_long = OcrJob {
        subject_ref: "s".repeat(17),
        ..ocr_job()
    };
    let error = envelope::encode(&header_for::<OcrJob>(3), &too_long).unwrap_err();
    assert!(is_subject_ref_17_of_16(&error), "{error:?}");

    let pairs = with(&encode(&ocr_job()), "subject_ref", &"s".repeat(17));
    let error = decode::<OcrJob>(&pairs).unwrap_err();
    assert!(is_subject_ref_17_of_16(&error), "{error:?}");
}

#[test]
fn absent_fields_take_the_spec_defaults() {
    let pairs = without(
        &encode(&ocr_job()),
        &["priority", "searchable", "max_retries", "pages"],
    );
    let (_, decoded) = decode::<OcrJob>(&pairs).unwrap();
    assert_eq!(decoded.priority, Priority::Normal, "default: normal");
    assert!(decoded.searchable, "default: \"true\"");
    assert_eq!(decoded.max_retries, 3, "default: 3");
    assert_eq!(decoded.pages, None, "optional");

    let pairs = without(
        &encode(&Notify {
            recipient_ref: "user-1".into(),
            via: Channel::Push,
            urgent: true,
            row_limit: Some(10),
        }),
        &["urgent"],
    );
    assert!(!decode::<Notify>(&pairs).unwrap().1.urgent);
}

#[test]
fn required_fields_without_a_default_are_still_required() {
    let pairs = without(&encode(&ocr_job()), &["requested_at"]);
    let error = decode::<OcrJob>(&pairs).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Decode(DecodeError::Field {
                field: "requested_at",
                problem: FieldProblem::Missing,
                ..
            })
        ),
        "{error:?}"
    );
}

#[test]
fn older_accepted_schemas_go_through_upcast() {
    // A schema 2 entry has no `searchable`; decoded directly it would be `true`
    // by the spec's default too, so `false` in the entry tells the paths apart:
    // `Upcast` ignores it.
    let pairs = with(&encode(&ocr_job()), "schema", "2");
    let (header, decoded) = decode::<OcrJob>(&pairs).unwrap();
    assert_eq!(header.schema, 2);
    assert!(decoded.searchable, "decoded by OcrJob::decode_older");
    assert_eq!(
        decoded,
        OcrJob {
            searchable: true,
            ..ocr_job()
        }
    );
}
