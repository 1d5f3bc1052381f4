//! `#[derive(Envelope)]` and `#[derive(FieldEnum)]` against the runtime codec:
//! round trips, the field layout on the wire, and decode errors that name the field.

// The generated code must not make its users' crates warn.
#![deny(unused)]

use queuegen_runtime::envelope::Header;
use queuegen_runtime::envelope::{self, header_fields};
use queuegen_runtime::error::DecodeError;
use queuegen_runtime::{
    Envelope, Error, FieldEnum, FieldMap, FieldProblem, FieldValue, Timestamp, Upcast,
};

// `HighPriority` is there to exercise the multi-word snake_case wire name.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FieldEnum)]
enum Priority {
    Low,
    #[default]
    Normal,
    HighPriority,
    #[field(rename = "urgent")]
    Immediate,
}

/// One field of every supported kind.
#[derive(Debug, Clone, PartialEq, Eq, Envelope)]
#[envelope(name = "OcrRequested", schema = 3, accepts = [2, 3])]
struct OcrRequest {
    #[envelope(max_bytes = 16)]
    subject_ref: String,
    page_count: u32,
    pages: Option<u64>,
    searchable: bool,
    requested_at: Timestamp,
    priority: Priority,
    #[envelope(default)]
    max_retries: u8,
    #[envelope(rename = "lang")]
    language: String,
    offset: i64,
}

/// Schema 2 had no `offset`; the derive hands schema 2 entries to this impl.
impl Upcast for OcrRequest {
    fn decode_older(fields: &FieldMap<'_>, schema: u32) -> Result<Self, Error> {
        assert_eq!(schema, 2, "the only older version `accepts` lists");
        Ok(OcrRequest {
            subject_ref: fields.field("subject_ref", Some(16))?,
            page_count: fields.field("page_count", None)?,
            pages: fields.field("pages", None)?,
            searchable: fields.field("searchable", None)?,
            requested_at: fields.field("requested_at", None)?,
            priority: fields.field("priority", None)?,
            max_retries: fields
                .field::<Option<u8>>("max_retries", None)?
                .unwrap_or_default(),
            language: fields.field("lang", None)?,
            offset: 0,
        })
    }
}

/// Everything left to the defaults: type name, schema 1, wire names.
#[derive(Debug, PartialEq, Eq, Envelope)]
struct Reindex {
    r#ref: String,
    #[envelope(default)]
    priority: Priority,
}

/// No body fields at all.
#[derive(Debug, PartialEq, Eq, Envelope)]
struct Ping {}

/// Defaults given as the text an absent field decodes as.
#[derive(Debug, PartialEq, Eq, Envelope)]
struct Export {
    export_ref: String,
    #[envelope(default = "urgent")]
    priority: Priority,
    #[envelope(default = "true")]
    compress: bool,
    #[envelope(default = "-7")]
    shift: i32,
    #[envelope(default = "asap")]
    deadline: Priority,
}

/// The header fields every encoded job starts with, in wire order (`prev_id`
/// and `reason` follow on a rescheduled job only), written out here so the
/// tests check the runtime's order rather than read it back.
const HEADER_ALWAYS: [&str; 7] = [
    "job_id",
    "type",
    "tenant",
    "schema",
    "created_at",
    "trace_id",
    "attempt",
];

fn header_for<E: Envelope>() -> Header {
    Header {
        job_id: "job-7".into(),
        envelope_type: E::TYPE.into(),
        tenant: "acme".into(),
        schema: E::SCHEMA,
        created_at: Timestamp::from_unix_millis(1_796_212_301_123),
        trace_id: "trace-1".into(),
        attempt: 1,
        prev_id: None,
        reason: None,
    }
}

fn request() -> OcrRequest {
    OcrRequest {
        subject_ref: "doc-42".into(),
        page_count: 12,
        pages: Some(7),
        searchable: true,
        requested_at: Timestamp::from_unix_millis(1_796_212_300_000),
        priority: Priority::HighPriority,
        max_retries: 3,
        language: "de".into(),
        offset: -5,
    }
}

/// The field/value pairs an `XADD` of `body` would write.
fn encode<E: Envelope>(body: &E) -> Vec<(&'static str, String)> {
    envelope::encode(&header_for::<E>(), body).expect("the body encodes")
}

fn decode<E: Envelope>(pairs: &[(&'static str, String)]) -> Result<(Header, E), Error> {
    envelope::decode::<E>(&FieldMap::from_pairs(E::TYPE, pairs).unwrap())
}

fn names(pairs: &[(&'static str, String)]) -> Vec<&'static str> {
    pairs.iter().map(|(name, _)| *name).collect()
}

fn value<'p>(pairs: &'p [(&'static str, String)], name: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find(|(field, _)| *field == name)
        .map(|(_, value)| value.as_str())
}

/// `pairs` with field `name` set to `value` (appended if it was absent).
fn with(
    pairs: &[(&'static str, String)],
    name: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    let mut pairs = without(pairs, name);
    pairs.push((name, value.to_owned()));
    pairs
}

fn without(pairs: &[(&'static str, String)], name: &str) -> Vec<(&'static str, String)> {
    pairs
        .iter()
        .filter(|(field, _)| *field != name)
        .cloned()
        .collect()
}

/// Decodes `pairs` as an `OcrRequest` expecting an error about `field`, which its text must name.
fn field_error(pairs: &[(&'static str, String)], field: &str) -> FieldProblem {
    let error = decode::<OcrRequest>(pairs).expect_err("decoding fails");
    let text = error.to_string();
    assert!(
        text.contains(&format!("`{field}`")),
        "{text:?} does not name field `{field}`"
    );
    match error {
        Error::Decode(DecodeError::Field {
            envelope,
            field: named,
            problem,
        }) => {
            assert_eq!(envelope, "OcrRequested");
            assert_eq!(named, field);
            problem
        }
        other => panic!("expected a field error about `{field}`, got {other:?}"),
    }
}

#[test]
fn container_attributes_set_type_and_schemas() {
    assert_eq!(OcrRequest::TYPE, "OcrRequested");
    assert_eq!(OcrRequest::SCHEMA, 3);
    assert_eq!(OcrRequest::ACCEPTS, &[2, 3]);

    assert_eq!(Reindex::TYPE, "Reindex");
    assert_eq!(Reindex::SCHEMA, 1);
    assert_eq!(Reindex::ACCEPTS, &[1]);
}

#[test]
fn every_supported_type_round_trips() {
    let body = request();
    let pairs = encode(&body);
    let (header, decoded) = decode::<OcrRequest>(&pairs).unwrap();
    assert_eq!(decoded, body);
    assert_eq!(header, header_for::<OcrRequest>());

    let body = OcrRequest {
        pages: None,
        priority: Priority::Immediate,
        max_retries: 0,
        searchable: false,
        offset: i64::MIN,
        ..request()
    };
    let (_, decoded) = decode::<OcrRequest>(&encode(&body)).unwrap();
    assert_eq!(decoded, body);
}

#[test]
fn header_comes_first_then_body_in_declaration_order() {
    let pairs = encode(&request());
    assert_eq!(
        names(&pairs),
        [
            &HEADER_ALWAYS[..],
            &[
                "subject_ref",
                "page_count",
                "pages",
                "searchable",
                "requested_at",
                "priority",
                "max_retries",
                "lang",
                "offset",
            ],
        ]
        .concat()
    );
    assert_eq!(value(&pairs, "type"), Some("OcrRequested"));
    assert_eq!(value(&pairs, "schema"), Some("3"));
    assert_eq!(value(&pairs, "searchable"), Some("true"));
    assert_eq!(
        value(&pairs, "requested_at"),
        Some("2026-12-02T11:51:40.000Z")
    );
    assert_eq!(value(&pairs, "priority"), Some("high_priority"));
    assert_eq!(value(&pairs, "offset"), Some("-5"));

    let rescheduled = Header {
        prev_id: Some("1-0".into()),
        reason: Some("timeout".into()),
        ..header_for::<Reindex>()
    };
    let body = Reindex {
        r#ref: "doc-1".into(),
        priority: Priority::Low,
    };
    let pairs = envelope::encode(&rescheduled, &body).unwrap();
    assert_eq!(
        names(&pairs),
        [
            &HEADER_ALWAYS[..],
            &["prev_id", "reason", "ref", "priority"]
        ]
        .concat()
    );
}

#[test]
fn rename_is_the_name_on_the_wire() {
    let pairs = encode(&request());
    assert_eq!(value(&pairs, "lang"), Some("de"));
    assert_eq!(value(&pairs, "language"), None);

    let (_, decoded) = decode::<OcrRequest>(&with(&pairs, "lang", "fr")).unwrap();
    assert_eq!(decoded.language, "fr");

    // A raw identifier is written without its `r#`.
    let body = Reindex {
        r#ref: "doc-1".into(),
        priority: Priority::Normal,
    };
    let pairs = encode(&body);
    assert_eq!(value(&pairs, "ref"), Some("doc-1"));
    assert_eq!(decode::<Reindex>(&pairs).unwrap().1, body);
}

#[test]
fn enum_values_are_snake_case_unless_renamed() {
    let wire = |priority: Priority| priority.encode_field();
    assert_eq!(wire(Priority::Low).as_deref(), Some("low"));
    assert_eq!(wire(Priority::Normal).as_deref(), Some("normal"));
    assert_eq!(
        wire(Priority::HighPriority).as_deref(),
        Some("high_priority")
    );
    assert_eq!(wire(Priority::Immediate).as_deref(), Some("urgent"));

    assert_eq!(
        Priority::decode_field(Some("urgent")),
        Ok(Priority::Immediate)
    );
    assert_eq!(Priority::decode_field(None), Err(FieldProblem::Missing));
    assert!(Priority::decode_field(Some("immediate")).is_err());
    assert!(Priority::decode_field(Some("High_Priority")).is_err());
}

#[test]
fn absent_optional_and_default_fields_decode() {
    let body = OcrRequest {
        pages: None,
        ..request()
    };
    let pairs = encode(&body);
    assert_eq!(value(&pairs, "pages"), None, "a None field is left out");
    let (_, decoded) = decode::<OcrRequest>(&pairs).unwrap();
    assert_eq!(decoded.pages, None);

    let (_, decoded) = decode::<OcrRequest>(&without(&pairs, "max_retries")).unwrap();
    assert_eq!(decoded.max_retries, 0);
    assert_eq!(decoded.subject_ref, "doc-42");

    let pairs = encode(&Reindex {
        r#ref: "doc-1".into(),
        priority: Priority::HighPriority,
    });
    let (_, decoded) = decode::<Reindex>(&without(&pairs, "priority")).unwrap();
    assert_eq!(decoded.priority, Priority::Normal);
}

#[test]
fn a_default_field_that_is_present_must_still_be_valid() {
    let pairs = with(&encode(&request()), "max_retries", "lots");
    assert_eq!(
        field_error(&pairs, "max_retries"),
        FieldProblem::Malformed {
            expected: "u8",
            found: "lots".into()
        }
    );
}

#[test]
fn missing_field_is_named() {
    let pairs = without(&encode(&request()), "page_count");
    assert_eq!(field_error(&pairs, "page_count"), FieldProblem::Missing);
    let text = decode::<OcrRequest>(&pairs).unwrap_err().to_string();
    assert_eq!(text, "envelope OcrRequested: field `page_count` is missing");

    let pairs = without(&encode(&request()), "lang");
    assert_eq!(field_error(&pairs, "lang"), FieldProblem::Missing);
}

#[test]
fn malformed_integer_is_named() {
    let pairs = with(&encode(&request()), "page_count", "twelve");
    assert_eq!(
        field_error(&pairs, "page_count"),
        FieldProblem::Malformed {
            expected: "u32",
            found: "twelve".into()
        }
    );

    let pairs = with(&encode(&request()), "pages", "-1");
    assert_eq!(
        field_error(&pairs, "pages"),
        FieldProblem::Malformed {
            expected: "u64",
            found: "-1".into()
        }
    );
}

#[test]
fn unknown_enum_value_lists_the_expected_ones() {
    let pairs = with(&encode(&request()), "priority", "asap");
    assert_eq!(
        field_error(&pairs, "priority"),
        FieldProblem::Malformed {
            expected: "one of low, normal, high_priority, urgent",
            found: "asap".into()
        }
    );
    let text = decode::<OcrRequest>(&pairs).unwrap_err().to_string();
    assert!(
        text.contains("one of low, normal, high_priority, urgent"),
        "{text}"
    );

    // A long unknown value is cut to its first 64 characters.
    let long = "x".repeat(500);
    let pairs = with(&encode(&request()), "priority", &long);
    match field_error(&pairs, "priority") {
        FieldProblem::Malformed { found, .. } => assert_eq!(found, "x".repeat(64)),
        other => panic!("expected a malformed value, got {other:?}"),
    }
}

#[test]
fn oversized_string_is_refused_when_encoding() {
    let fits = OcrRequest {
        subject_ref: "s".repeat(16),
        ..request()
    };
    assert!(envelope::encode(&header_for::<OcrRequest>(), &fits).is_ok());

    let too_long = OcrRequest {
        subject_ref: "s".repeat(17),
        ..request()
    };
    let error = envelope::encode(&header_for::<OcrRequest>(), &too_long).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("`subject_ref`"), "{text}");
    assert!(
        matches!(
            error,
            Error::Decode(DecodeError::Field {
                envelope: "OcrRequested",
                field: "subject_ref",
                problem: FieldProblem::Oversized { len: 17, max: 16 },
            })
        ),
        "{error:?}"
    );
}

#[test]
fn oversized_string_is_refused_when_decoding() {
    let pairs = with(&encode(&request()), "subject_ref", &"s".repeat(17));
    assert_eq!(
        field_error(&pairs, "subject_ref"),
        FieldProblem::Oversized { len: 17, max: 16 }
    );
}

#[test]
fn only_accepted_schemas_decode() {
    let pairs = encode(&request());
    let (header, _) = decode::<OcrRequest>(&with(&pairs, "schema", "2")).unwrap();
    assert_eq!(header.schema, 2);

    let error = decode::<OcrRequest>(&with(&pairs, "schema", "4")).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("OcrRequested"), "{text}");
    assert!(text.contains("schema version 4"), "{text}");
    assert!(
        matches!(
            error,
            Error::Decode(DecodeError::UnsupportedSchema {
                envelope: "OcrRequested",
                seen: 4,
                accepted: &[2, 3],
            })
        ),
        "{error:?}"
    );

    // Without `accepts`, only the struct's own schema decodes.
    let pairs = encode(&Reindex {
        r#ref: "doc-1".into(),
        priority: Priority::Low,
    });
    let error = decode::<Reindex>(&with(&pairs, "schema", "2")).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Decode(DecodeError::UnsupportedSchema {
                seen: 2,
                accepted: &[1],
                ..
            })
        ),
        "{error:?}"
    );
}

#[test]
fn older_accepted_schemas_go_through_upcast() {
    // Schema 2 entries have no `offset`: decoded directly, this would be a
    // missing field.
    let pairs = without(&with(&encode(&request()), "schema", "2"), "offset");
    let (header, decoded) = decode::<OcrRequest>(&pairs).unwrap();
    assert_eq!(header.schema, 2);
    assert_eq!(
        decoded,
        OcrRequest {
            offset: 0,
            ..request()
        }
    );

    // The current schema is decoded directly, `offset` and all.
    let error = decode::<OcrRequest>(&without(&encode(&request()), "offset")).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Decode(DecodeError::Field {
                field: "offset",
                problem: FieldProblem::Missing,
                ..
            })
        ),
        "{error:?}"
    );
}

#[test]
fn absent_fields_decode_the_default_text() {
    let body = Export {
        export_ref: "exp-1".into(),
        priority: Priority::Low,
        compress: false,
        shift: 2,
        deadline: Priority::Normal,
    };
    let pairs = encode(&body);
    assert_eq!(decode::<Export>(&pairs).unwrap().1, body);

    let (_, decoded) =
        decode::<Export>(&without(&without(&pairs, "priority"), "compress")).unwrap();
    assert_eq!(
        decoded.priority,
        Priority::Immediate,
        "default = \"urgent\""
    );
    assert!(decoded.compress, "default = \"true\"");

    let (_, decoded) = decode::<Export>(&without(&pairs, "shift")).unwrap();
    assert_eq!(decoded.shift, -7);
}

#[test]
fn a_default_text_the_type_does_not_take_is_a_malformed_field() {
    let pairs = without(
        &encode(&Export {
            export_ref: "exp-1".into(),
            priority: Priority::Low,
            compress: false,
            shift: 2,
            deadline: Priority::Normal,
        }),
        "deadline",
    );
    let error = decode::<Export>(&pairs).unwrap_err();
    assert_eq!(
        error.to_string(),
        "envelope Export: field `deadline` is not a valid one of low, normal, high_priority, urgent: \"asap\""
    );
    assert!(
        matches!(
            &error,
            Error::Decode(DecodeError::Field {
                envelope: "Export",
                field: "deadline",
                problem: FieldProblem::Malformed { found, .. },
            }) if found == "asap"
        ),
        "{error:?}"
    );
}

#[test]
fn wrong_type_header_is_refused() {
    let pairs = with(&encode(&request()), "type", "Reindex");
    let error = decode::<OcrRequest>(&pairs).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("\"Reindex\""), "{text}");
    assert!(text.contains("OcrRequested"), "{text}");
    assert!(
        matches!(
            &error,
            Error::Decode(DecodeError::WrongType {
                expected: "OcrRequested",
                found,
            }) if found == "Reindex"
        ),
        "{error:?}"
    );
}

#[test]
fn empty_body_round_trips() {
    let pairs = encode(&Ping {});
    assert_eq!(names(&pairs).len(), header_fields::ALL.len() - 2);
    let (header, body) = decode::<Ping>(&pairs).unwrap();
    assert_eq!(body, Ping {});
    assert_eq!(header.envelope_type, "Ping");
}

/// `queuegen-macros` keeps its own copy of the header field names (it cannot
/// depend on the runtime); the UI test `header_name_collision` shows it
/// rejects each of these, so the two lists must stay the same.
#[test]
fn header_field_names_match_what_the_derive_rejects() {
    assert_eq!(
        header_fields::ALL,
        [&HEADER_ALWAYS[..], &["prev_id", "reason"]].concat()
    );
}
