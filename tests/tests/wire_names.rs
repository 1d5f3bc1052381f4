//! The generated enum of `WireNamesJob.level` (tests/queues.yaml) writes the spec's strings and reads them back: the values whose variant names drop an underscore (`a_b` is `AB`) once went out as `ab`.

use queuegen_runtime::envelope::{Envelope, FieldMap, FieldWriter};
use queuegen_runtime::FieldValue;
use queuegen_tests::queues::envelopes::{WireNamesJob, WireNamesJobLevel};

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/queues.yaml");

/// The spec's values of `WireNamesJob.level`, read from the spec itself.
fn spec_values() -> Vec<String> {
    let spec = queuegen::spec::check_file(std::path::Path::new(SPEC))
        .unwrap()
        .spec
        .expect("tests/queues.yaml is valid");
    let envelope = spec
        .envelopes
        .iter()
        .find(|e| e.name == "WireNamesJob")
        .expect("the spec declares WireNamesJob");
    let field = envelope
        .fields
        .iter()
        .find(|f| f.name == "level")
        .expect("WireNamesJob has `level`");
    match &field.ty {
        queuegen::spec::model::FieldType::Enum { values } => values.clone(),
        other => panic!("level is {other:?}, not an enum"),
    }
}

const VARIANTS: [WireNamesJobLevel; 6] = [
    WireNamesJobLevel::AB,
    WireNamesJobLevel::LevelAB,
    WireNamesJobLevel::ABC,
    WireNamesJobLevel::ABCd,
    WireNamesJobLevel::V2AB,
    WireNamesJobLevel::HighPriority,
];

#[test]
fn every_variant_writes_the_spec_value_and_reads_it_back() {
    let values = spec_values();
    assert_eq!(values.len(), VARIANTS.len(), "a variant per spec value");
    for (variant, value) in VARIANTS.into_iter().zip(&values) {
        let mut out = FieldWriter::new("WireNamesJob");
        WireNamesJob { level: variant }
            .encode_body(&mut out)
            .unwrap();
        let pairs = out.into_pairs();
        assert_eq!(pairs, vec![("level", value.clone())], "{variant:?}");

        let fields = [("level", value.as_str())];
        let decoded =
            WireNamesJob::decode_body(&FieldMap::from_pairs("WireNamesJob", &fields).unwrap(), 1)
                .unwrap_or_else(|e| panic!("{value} does not decode: {e}"));
        assert_eq!(decoded.level, variant);
    }
}

#[test]
fn the_derive_drops_no_underscore_from_a_value_a_producer_elsewhere_writes() {
    // What a Python or TypeScript producer following the spec sends.
    assert_eq!(
        WireNamesJobLevel::decode_field(Some("level_a_b")).unwrap(),
        WireNamesJobLevel::LevelAB
    );
    assert!(WireNamesJobLevel::decode_field(Some("level_ab")).is_err());
    assert_eq!(
        WireNamesJobLevel::V2AB.encode_field().as_deref(),
        Some("v2_a_b")
    );
}
