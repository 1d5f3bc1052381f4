//! The JSON Schema and the reference docs follow the format table: the
//! committed schema is current, it accepts every valid spec and rejects
//! malformed ones as the checker does, and docs/spec.md names every key.

use std::path::{Path, PathBuf};

use queuegen::spec::json_schema::{json_schema, to_pretty_string};
use queuegen::spec::v1::format::all_objects;
use queuegen::spec::{check_file, check_str};
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in a workspace")
        .to_path_buf()
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&json_schema()).expect("the schema compiles")
}

fn as_json(source: &str) -> Value {
    serde_yaml_ng::from_str(source).expect("YAML that maps to JSON")
}

/// Every examples/*/queues.yaml and tests/fixtures/valid/*.yaml.
fn valid_specs() -> Vec<PathBuf> {
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(workspace().join("examples")).expect("examples/") {
        let spec = entry.expect("a directory entry").path().join("queues.yaml");
        if spec.is_file() {
            specs.push(spec);
        }
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid");
    for entry in std::fs::read_dir(fixtures).expect("tests/fixtures/valid") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            specs.push(path);
        }
    }
    specs.sort();
    assert!(
        specs.len() >= 3,
        "expected the example and the valid fixtures: {specs:?}"
    );
    specs
}

#[test]
fn committed_schema_is_current() {
    let path = workspace().join("schemas/queuegen.v1.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == to_pretty_string(),
        "{} is stale: run `cargo run -p queuegen -- schema > schemas/queuegen.v1.json`",
        path.display()
    );
}

#[test]
fn schema_is_valid_draft_2020_12() {
    let schema = json_schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    jsonschema::meta::validate(&schema).expect("a valid JSON Schema");
}

#[test]
fn valid_specs_validate() {
    let validator = validator();
    for path in valid_specs() {
        let checked = check_file(&path).expect("readable");
        assert!(
            !checked.has_errors(),
            "{}: {:#?}",
            path.display(),
            checked.diagnostics
        );
        let source = std::fs::read_to_string(&path).expect("readable");
        let errors: Vec<String> = validator
            .iter_errors(&as_json(&source))
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

const BASE: &str = "\
version: 1
service: shop
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: { type: string, max_bytes: 64 }
queues:
  orders:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
";

/// [`BASE`] with `queue` appended to its queue and `section` as a top-level
/// line after `service`.
fn with_section(section: &str, queue: &str) -> String {
    format!("{BASE}{queue}").replace("service: shop", &format!("service: shop\n{section}"))
}

#[test]
fn lanes_validate() {
    let source = format!(
        "{BASE}    lanes:\n      - {{ name: high, weight: 6 }}\n      - {{ name: normal, weight: 3, default: true }}\n      - {{ name: low }}\n"
    );
    let checked = check_str(&source, "q.yaml");
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    assert!(validator().is_valid(&as_json(&source)));
}

#[test]
fn malformed_specs_are_rejected() {
    let validator = validator();
    assert!(validator.is_valid(&as_json(BASE)));
    let cases = [
        (
            "unknown key",
            BASE.replace(
                "    envelope: OrderPlaced",
                "    envelope: OrderPlaced\n    colour: blue",
            ),
        ),
        ("unknown version", BASE.replace("version: 1", "version: 2")),
        ("missing version", BASE.replace("version: 1\n", "")),
        (
            "duration without unit",
            format!("{BASE}    handler: {{ timeout: 60 }}\n"),
        ),
        (
            "decimal duration",
            format!("{BASE}    claim: {{ every: 1.5s }}\n"),
        ),
        (
            "zero duration",
            format!("{BASE}    claim: {{ every: 0s }}\n"),
        ),
        (
            "bad size unit",
            BASE.replace("max_bytes: 64", "max_bytes: 2KB"),
        ),
        (
            "unknown field type",
            BASE.replace("type: string", "type: uint32"),
        ),
        (
            "enum without values",
            BASE.replace("type: string, max_bytes: 64", "type: enum"),
        ),
        (
            "max_bytes on a u32",
            BASE.replace("type: string", "type: u32"),
        ),
        (
            "optional with a default",
            BASE.replace("max_bytes: 64", "max_bytes: 64, optional: true, default: x"),
        ),
        ("zero partitions", format!("{BASE}    partitions: 0\n")),
        (
            "too many partitions",
            format!("{BASE}    partitions: 16385\n"),
        ),
        (
            "bad group start",
            format!("{BASE}    group: {{ start: latest }}\n"),
        ),
        (
            "factor below 1",
            format!("{BASE}    retry: {{ backoff: {{ factor: 0.5 }} }}\n"),
        ),
        (
            "unknown jitter",
            format!("{BASE}    retry: {{ backoff: {{ jitter: ful }} }}\n"),
        ),
        (
            "missing envelope key",
            BASE.replace("    envelope: OrderPlaced\n", ""),
        ),
        (
            "no queues",
            BASE[..BASE.find("queues:").unwrap()].to_owned() + "queues: {}\n",
        ),
        (
            "unknown results store",
            format!("{BASE}    results: redis\n"),
        ),
        ("outbox as a string", format!("{BASE}    outbox: \"yes\"\n")),
        (
            "postgres pool_size 0",
            with_section("postgres: { pool_size: 0 }", "    results: postgres\n"),
        ),
        (
            "unknown key under postgres",
            with_section("postgres: { schema: shop, size: 4 }", "    outbox: true\n"),
        ),
        (
            "postgres schema not a plain identifier",
            with_section("postgres: { schema: shop.queues }", "    outbox: true\n"),
        ),
        (
            "postgres_secret not a Secret name",
            with_section(
                "kubernetes: { postgres_secret: Shop_Postgres }",
                "    results: postgres\n",
            ),
        ),
        (
            "psql_image with a space",
            with_section(
                "kubernetes: { postgres_secret: shop-pg, psql_image: \"postgres 16\" }",
                "    outbox: true\n",
            ),
        ),
        (
            "unknown key under kubernetes",
            with_section(
                "kubernetes: { postgres_secret: shop-pg, database_secret: shop-pg }",
                "    outbox: true\n",
            ),
        ),
        (
            "one lane",
            format!("{BASE}    lanes: [{{ name: normal }}]\n"),
        ),
        ("no lanes", format!("{BASE}    lanes: []\n")),
        (
            "seventeen lanes",
            format!(
                "{BASE}    lanes: [{}]\n",
                (0..17)
                    .map(|i| format!("{{ name: l{i} }}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (
            "lane weight 0",
            format!("{BASE}    lanes: [{{ name: high, weight: 0 }}, {{ name: low }}]\n"),
        ),
        (
            "lane without a name",
            format!("{BASE}    lanes: [{{ weight: 2 }}, {{ name: low }}]\n"),
        ),
        (
            "unknown key in a lane",
            format!("{BASE}    lanes: [{{ name: high, priority: 1 }}, {{ name: low }}]\n"),
        ),
        (
            "tenant_rate limit 0",
            format!("{BASE}    handler: {{ tenant_rate: {{ limit: 0, per: 1s }} }}\n"),
        ),
        (
            "tenant_rate classes above 4096",
            format!(
                "{BASE}    handler: {{ tenant_rate: {{ limit: 10, per: 1s, classes: 4097 }} }}\n"
            ),
        ),
        (
            "unknown key under tenant_rate",
            format!("{BASE}    handler: {{ tenant_rate: {{ limit: 10, per: 1s, burst: 20 }} }}\n"),
        ),
        (
            "pipeline without stages",
            format!("{BASE}pipelines:\n  shop: {{ keep: 1d }}\n"),
        ),
        (
            "pipeline stage max_children 0",
            format!("{BASE}pipelines:\n  shop: {{ stages: {{ orders: {{ max_children: 0 }} }} }}\n"),
        ),
        (
            "unknown dead-letter policy of a join",
            format!("{BASE}pipelines:\n  shop: {{ stages: {{ orders: {{ join: [orders], on_dead_letter: retry }} }} }}\n"),
        ),
        (
            "unknown key in a stage",
            format!("{BASE}pipelines:\n  shop: {{ stages: {{ orders: {{ next: [orders] }} }} }}\n"),
        ),
        (
            "unquoted min_version",
            BASE.replace(
                "service: shop",
                "service: shop\nredis: { min_version: 7.0 }",
            ),
        ),
    ];
    for (name, source) in cases {
        assert!(
            !validator.is_valid(&as_json(&source)),
            "schema accepted: {name}\n{source}"
        );
        assert!(
            check_str(&source, "q.yaml").has_errors(),
            "checker accepted: {name}\n{source}"
        );
    }
}

#[test]
fn schema_and_checker_agree_on_names() {
    let validator = validator();
    let queue_names = [
        "ocr", "ocr-2", "ocr_v2", "Ocr", "2ocr", "ocr:x", "ocr x", "o{c}r",
    ];
    let envelope_names = [
        "OrderPlaced",
        "Order2",
        "orderPlaced",
        "Order_Placed",
        "ORDER",
    ];
    let field_names = [
        "order_ref",
        "v2",
        "orderRef",
        "order__ref",
        "order_",
        "_order",
    ];
    let mut sources = Vec::new();
    for name in queue_names {
        sources.push(BASE.replace("  orders:", &format!("  \"{name}\":")));
    }
    for name in envelope_names {
        sources.push(BASE.replace("OrderPlaced", name));
    }
    for name in field_names {
        sources.push(BASE.replace("order_ref", name));
    }
    let long = "q".repeat(64);
    let schema_names = [
        "docs_pipeline",
        "_queues",
        "queues2",
        "Docs",
        "2queues",
        "docs-pipeline",
        "docs pipeline",
        &long[1..],
        &long,
    ];
    for name in schema_names {
        sources.push(format!("{BASE}    results: postgres\n").replace(
            "service: shop",
            &format!("service: shop\npostgres: {{ schema: \"{name}\" }}"),
        ));
    }
    for name in [
        "shop-postgres",
        "pg1",
        "Shop",
        "shop_pg",
        "-shop",
        "shop-",
        "shop.pg",
    ] {
        sources.push(format!("{BASE}    results: postgres\n").replace(
            "service: shop",
            &format!("service: shop\nkubernetes: {{ postgres_secret: \"{name}\" }}"),
        ));
    }
    for name in [
        "high",
        "p2-bulk",
        "High",
        "2high",
        "-high",
        "high_low",
        "high low",
        "",
        &long[..32],
        &long[..33],
    ] {
        sources.push(format!(
            "{BASE}    lanes: [{{ name: \"{name}\" }}, {{ name: other }}]\n"
        ));
    }
    for source in sources {
        let checker_ok = !check_str(&source, "q.yaml").has_errors();
        let schema_ok = validator.is_valid(&as_json(&source));
        assert_eq!(
            checker_ok, schema_ok,
            "checker and schema disagree on\n{source}"
        );
    }
}

#[test]
fn docs_name_every_key() {
    let docs = std::fs::read_to_string(workspace().join("docs/spec.md")).expect("docs/spec.md");
    for obj in all_objects() {
        for prop in obj.props {
            let plain = format!("`{}`", prop.key);
            let nested = format!(".{}`", prop.key);
            assert!(
                docs.contains(&plain) || docs.contains(&nested),
                "docs/spec.md does not document `{}` of {}",
                prop.key,
                obj.name
            );
        }
    }
}
