//! Property: for any snake_case enum value a spec may hold, the variant the generator writes puts exactly that value on the wire — its `#[field(rename)]`, or else the snake case `#[derive(FieldEnum)]` gives the variant's name (the same function the derive calls).

use queuegen::spec::naming::snake_case;

/// Deterministic values in the spec's enum alphabet (xorshift, fixed seed):
/// letters, digits and single underscores, starting with a letter, with the
/// one-letter and digit words that used to lose their underscore.
fn values(count: usize) -> Vec<String> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let mut out = std::collections::BTreeSet::new();
    while out.len() < count {
        let words = 1 + next(4);
        let value: Vec<String> = (0..words)
            .map(|i| {
                let len = 1 + next(3);
                (0..len)
                    .map(|j| {
                        if i + j > 0 && next(4) == 0 {
                            (b'0' + next(10) as u8) as char
                        } else {
                            (b'a' + next(26) as u8) as char
                        }
                    })
                    .collect()
            })
            .collect();
        out.insert(value.join("_"));
    }
    out.into_iter().collect()
}

/// A spec with one envelope whose enum fields hold `values`, 50 to a field.
fn spec_with(values: &[String]) -> String {
    let mut fields = String::new();
    for (i, chunk) in values.chunks(50).enumerate() {
        fields.push_str(&format!(
            "      f{i}: {{ type: enum, values: [{}] }}\n",
            chunk.join(", ")
        ));
    }
    format!(
        "version: 1\nservice: wire\nredis: {{ key_prefix: w }}\nenvelopes:\n  J:\n    schema: 1\n    fields:\n{fields}queues:\n  q:\n    envelope: J\n"
    )
}

/// `(wire value, variant)` of every variant of every enum in `code`, in order.
fn wire_values(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rename: Option<String> = None;
    let mut in_enum = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("pub enum ") {
            in_enum = true;
        } else if in_enum && line == "}" {
            in_enum = false;
        } else if in_enum {
            if let Some(value) = line
                .strip_prefix("#[field(rename = \"")
                .and_then(|rest| rest.strip_suffix("\")]"))
            {
                rename = Some(value.to_owned());
            } else if let Some(variant) = line.strip_suffix(',') {
                let wire = rename.take().unwrap_or_else(|| snake_case(variant));
                out.push((wire, variant.to_owned()));
            }
        }
    }
    out
}

#[test]
fn every_generated_variant_writes_its_spec_value() {
    let values = values(2_000);
    let source = spec_with(&values);
    let checked = queuegen::spec::check_str(&source, "wire.yaml");
    let spec = checked
        .spec
        .unwrap_or_else(|| panic!("spec refused: {:#?}", checked.diagnostics));
    let files = queuegen::gen::rust::generate(&spec, "wire.yaml").unwrap();
    let envelopes = files
        .iter()
        .find(|f| f.path.ends_with("envelopes.rs"))
        .expect("an envelopes.rs");
    let written = wire_values(&envelopes.contents);
    assert_eq!(written.len(), values.len(), "one variant per value");
    let mut renamed = 0;
    for ((wire, variant), value) in written.iter().zip(&values) {
        assert_eq!(wire, value, "variant {variant}");
        renamed += usize::from(snake_case(variant) != *value);
    }
    // The property is only tested if both kinds occur.
    assert!(
        renamed > 100 && renamed < values.len() - 100,
        "{renamed} renamed"
    );
}
