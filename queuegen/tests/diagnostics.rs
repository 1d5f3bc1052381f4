//! Golden tests of every diagnostic kind: each case is a small spec, and its
//! snapshot (tests/snapshots/) shows the numbered source and the rendered
//! diagnostics, so positions can be checked by eye.

use std::fmt::Write as _;

use queuegen::spec::{check_str, Checked};

/// A valid spec with room for extra body fields and queue keys.
fn spec(fields: &str, queue: &str) -> String {
    format!(
        "\
version: 1
service: shop
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: {{ type: string, max_bytes: 64 }}
{fields}queues:
  orders:
    envelope: OrderPlaced
    dead_letter: {{ owner: shop-oncall }}
{queue}"
    )
}

fn render(source: &str, checked: &Checked) -> String {
    let mut out = String::new();
    for (i, line) in source.lines().enumerate() {
        writeln!(out, "{:>3} | {line}", i + 1).unwrap();
    }
    out.push('\n');
    for diagnostic in &checked.diagnostics {
        writeln!(out, "{diagnostic}").unwrap();
    }
    out
}

#[derive(Debug, PartialEq)]
enum Expect {
    Errors,
    WarningsOnly,
}

fn case(name: &str, source: &str, expect: Expect) {
    let checked = check_str(source, "queues.yaml");
    let got = if checked.has_errors() {
        Expect::Errors
    } else {
        Expect::WarningsOnly
    };
    assert_eq!(got, expect, "{name}:\n{}", render(source, &checked));
    assert!(!checked.diagnostics.is_empty(), "{name}: no diagnostics");
    assert_eq!(checked.spec.is_some(), expect == Expect::WarningsOnly);
    insta::assert_snapshot!(name, render(source, &checked));
}

#[test]
fn the_base_spec_is_clean() {
    let checked = check_str(&spec("", ""), "queues.yaml");
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    assert!(checked.spec.is_some());
}

#[test]
fn claim_margin() {
    let queue = "    handler: { timeout: 60s }\n    claim: { min_idle: 70s }\n";
    case("claim_margin", &spec("", queue), Expect::Errors);
}

/// A worker between two reads must not be pruned from its group.
#[test]
fn prune_consumers_after_floor() {
    let queue = "    group: { prune_consumers_after: 30s }\n";
    case(
        "prune_consumers_after_floor",
        &spec("", queue),
        Expect::Errors,
    );
}

#[test]
fn retention_floor() {
    let queue = "    retry: { max_attempts: 10, backoff: { initial: 30s, max: 1h } }
    claim: { min_idle: 15m }
    poison: { max_deliveries: 3 }
    retention: { min_age: 2h }
";
    case("retention_floor", &spec("", queue), Expect::Errors);
}

#[test]
fn dedup_window_longer_than_retention() {
    let queue = "    retention: { min_age: 2h }\n    dedup: { window: 3h }\n";
    case("dedup_window", &spec("", queue), Expect::Errors);
}

/// A duplicate answers the first entry's ID, which delete-on-ack removes
/// as soon as the job is done; an unknown `on_ack` gets the choices.
#[test]
fn dedup_with_delete_on_ack() {
    let queue = "    retention: { on_ack: delete }\n    dedup: { window: 1h }\n";
    case("dedup_delete_on_ack", &spec("", queue), Expect::Errors);
    let queue = "    retention: { on_ack: forget }\n";
    case("on_ack_unknown", &spec("", queue), Expect::Errors);
    // On its own (with the default min_age) it is clean, and the model has it.
    let checked = check_str(
        &spec("", "    retention: { on_ack: delete }\n"),
        "queues.yaml",
    );
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let spec = checked.spec.expect("a clean spec");
    assert_eq!(
        spec.queues[0].retention.on_ack,
        queuegen::spec::model::OnAck::Delete
    );
}

#[test]
fn dedup_without_a_window() {
    let queue = "    dedup: { windw: 1h }\n";
    case("dedup_no_window", &spec("", queue), Expect::Errors);
}

#[test]
fn lanes_duplicate_names() {
    // A repeated name, a weight of 0 and a second default: all at once.
    let queue = "    lanes:
      - { name: high, weight: 6, default: true }
      - { name: normal, weight: 0 }
      - { name: high, weight: 1 }
      - { name: low, default: true }
";
    case("lanes_duplicate_names", &spec("", queue), Expect::Errors);
}

#[test]
fn lanes_single() {
    let queue = "    lanes:\n      - { name: normal, weight: 3 }\n";
    case("lanes_single", &spec("", queue), Expect::Errors);
}

#[test]
fn lanes_names_and_bounds() {
    let queue = "    lanes:
      - { weight: 2 }
      - { name: \"\" }
      - { name: High_Priority, weight: 1001 }
      - { name: a-very-long-lane-name-for-bulk-jobs }
      - { name: low, priority: 1 }
";
    case("lanes_names", &spec("", queue), Expect::Errors);
}

#[test]
fn lanes_times_partitions_is_a_warning() {
    let queue = "    partitions: 300\n    lanes: [{ name: high, weight: 6 }, { name: normal, weight: 3 }, { name: low }, { name: bulk }]\n";
    case("lanes_many_streams", &spec("", queue), Expect::WarningsOnly);
}

#[test]
fn retention_floor_with_the_default_min_age() {
    // Default min_idle 4h × 20 deliveries = 80h, more than the default 3d.
    let queue = "    handler: { timeout: 2h }\n    poison: { max_deliveries: 20 }\n";
    case("retention_floor_default", &spec("", queue), Expect::Errors);
}

#[test]
fn partition_by_missing_field() {
    let queue = "    partition_by: [tenant, order_rf]\n";
    case(
        "partition_by_missing_field",
        &spec("", queue),
        Expect::Errors,
    );
}

#[test]
fn partition_by_optional_field() {
    let fields = "      coupon: { type: string, max_bytes: 16, optional: true }\n";
    let queue = "    partition_by: [coupon]\n";
    case(
        "partition_by_optional_field",
        &spec(fields, queue),
        Expect::Errors,
    );
}

#[test]
fn partition_by_header_field() {
    let queue = "    partition_by: [job_id, created_at, tenant, tenant]\n";
    case(
        "partition_by_header_field",
        &spec("", queue),
        Expect::Errors,
    );
}

#[test]
fn names_that_break_the_hash_tag() {
    let source = "\
version: 1
service: shop:eu
redis: { key_prefix: \"shop {eu}\" }
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: { type: string, max_bytes: 64 }
queues:
  \"orders:eu\":
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
  refunds:
    envelope: OrderPlaced
    group: { name: \"refund workers\" }
    dead_letter: { owner: shop-oncall }
  returns:
    envelope: OrderPlaced
    group: { name: \"\" }
    dead_letter: { owner: shop-oncall }
";
    case("names_break_hash_tag", source, Expect::Errors);
}

#[test]
fn unknown_keys_with_did_you_mean() {
    let fields = "      note: { type: string, maxbytes: 100 }\n";
    let queue =
        "    claim: { min_idel: 90s }\n    retries: { max_attempts: 3 }\n    colour: blue\n";
    case("unknown_keys", &spec(fields, queue), Expect::Errors);
}

#[test]
fn duplicate_keys() {
    let fields = "      order_ref: { type: string, max_bytes: 32 }\n";
    let queue = "    partitions: 2\n    claim: { every: 5s, every: 10s }\n    partitions: 4\n";
    case("duplicate_keys", &spec(fields, queue), Expect::Errors);
}

#[test]
fn credential_field_names() {
    let fields = "      db_password: { type: string, max_bytes: 64 }
      API_KEY_VALUE: { type: string, max_bytes: 64 }
      client_secret: { type: string, max_bytes: 64 }
      secret_ref: { type: string, max_bytes: 64 }
      max_tokens: { type: u32 }
";
    case("credential_fields", &spec(fields, ""), Expect::Errors);
}

#[test]
fn header_field_collisions() {
    let fields = "      tenant: { type: string, max_bytes: 64 }\n      attempt: { type: u32 }\n";
    case("header_collisions", &spec(fields, ""), Expect::Errors);
}

#[test]
fn naming_conventions() {
    let source = "\
version: 1
service: Shop
envelopes:
  order_placed:
    schema: 1
    fields:
      orderRef: { type: string, max_bytes: 64 }
      priority: { type: enum, values: [low, HighPriority] }
queues:
  Orders:
    envelope: order_placed
    dead_letter: { owner: shop-oncall }
";
    case("naming_conventions", source, Expect::Errors);
}

#[test]
fn payload_smaller_than_the_fields() {
    let fields = "      note: { type: string, max_bytes: 1KiB }\n      count: { type: u32 }\n";
    let queue = "    payload: { max_bytes: 512 }\n";
    case("payload_too_small", &spec(fields, queue), Expect::Errors);
}

#[test]
fn payload_check_counts_bounded_fields_only() {
    let fields =
        "      note: { type: string }\n      blob_ref: { type: string, max_bytes: 4KiB }\n";
    let queue = "    payload: { max_bytes: 2KiB }\n";
    case(
        "payload_unbounded_string",
        &spec(fields, queue),
        Expect::Errors,
    );
}

#[test]
fn string_without_max_bytes_is_a_warning() {
    let fields = "      note: { type: string }\n";
    case(
        "string_without_max_bytes",
        &spec(fields, ""),
        Expect::WarningsOnly,
    );
}

#[test]
fn group_start() {
    let queue = "    group: { name: orders-v2, start: latest }\n";
    case("group_start", &spec("", queue), Expect::Errors);
}

#[test]
fn counts_and_bounds() {
    let queue = "    partitions: 0
    handler: { concurrency: 0 }
    claim: { batch: 0, rate: 0 }
    retry: { max_attempts: 0, backoff: { initial: 10m, max: 5m, factor: 0.5 } }
    poison: { max_deliveries: 0 }
    dead_letter: { owner: shop-oncall, max_len: 0 }
    alerts: { dead_letters: 0 }
  big:
    envelope: OrderPlaced
    partitions: 16385
    dead_letter: { owner: shop-oncall }
";
    let source = spec("", queue).replace(
        "    dead_letter: { owner: shop-oncall }\n    partitions: 0",
        "    partitions: 0",
    );
    case("counts_and_bounds", &source, Expect::Errors);
}

#[test]
fn rate_of_zero() {
    let queue = "    handler: { rate: { limit: 0, per: 1s } }
  per_zero:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    handler: { rate: { limit: 10, per: 0s } }
  half:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    handler: { rate: { limit: 10 } }
";
    case("rate_of_zero", &spec("", queue), Expect::Errors);
}

#[test]
fn tenant_rate_zero() {
    let queue = "    handler:
      tenant_rate: { limit: 0, per: 1s, classes: 5000, burst: 20 }
  per_zero:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    handler: { tenant_rate: { limit: 10, per: 0s, classes: 0 } }
";
    case("tenant_rate_zero", &spec("", queue), Expect::Errors);
}

#[test]
fn tenant_rate_above_queue_rate() {
    let queue = "    handler:
      rate: { limit: 5, per: 1s }
      tenant_rate: { limit: 10, per: 1s }
  per_minute:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    handler:
      rate: { limit: 1, per: 1m }
      tenant_rate: { limit: 1, per: 1m, classes: 8 }
  binds_in_bursts:
    envelope: OrderPlaced
    dead_letter: { owner: shop-oncall }
    handler:
      rate: { limit: 6000, per: 1m }
      tenant_rate: { limit: 150, per: 1s }
";
    case(
        "tenant_rate_above_queue_rate",
        &spec("", queue),
        Expect::WarningsOnly,
    );
}

#[test]
fn missing_and_unused_envelopes() {
    let source = spec("", "").replace("envelope: OrderPlaced", "envelope: OrderPlace");
    case("envelopes_missing_and_unused", &source, Expect::Errors);
}

#[test]
fn accepts_without_the_current_schema() {
    let second = "  OrderShipped: { schema: 1, accepts: [1, 1] }\nqueues:";
    let source = spec("", "")
        .replace("    schema: 1\n", "    schema: 3\n    accepts: [1, 2]\n")
        .replace("queues:", second);
    case("accepts_without_schema", &source, Expect::Errors);
}

#[test]
fn yaml_syntax_error() {
    let source = "version: 1\nservice: shop\nenvelopes:\n  OrderPlaced: { schema: 1\nqueues: {}\n";
    case("yaml_syntax_error", source, Expect::Errors);
}

#[test]
fn yaml_tags_are_refused() {
    let source = spec("", "").replace("service: shop", "service: !env SERVICE");
    case("yaml_tag", &source, Expect::Errors);
}

#[test]
fn version_missing() {
    let source = spec("", "").replace("version: 1\n", "");
    case("version_missing", &source, Expect::Errors);
}

#[test]
fn version_unknown_stops_at_the_version() {
    // The unknown key below is not reported: the rest may be another format.
    let source = spec("", "    colour: blue\n").replace("version: 1", "version: 2");
    case("version_unknown", &source, Expect::Errors);
}

#[test]
fn risky_choices_are_warnings() {
    let queue = "    group: { start: \"0-0\" }
    partitions: 2000
    handler: { concurrency: 2000 }
  audit:
    envelope: OrderPlaced
";
    case("warnings", &spec("", queue), Expect::WarningsOnly);
}

#[test]
fn malformed_values() {
    let source = "\
version: 1
service: shop
redis: { deployment: clustr, min_version: \"6.2\" }
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: { type: string, max_bytes: 2KB }
queues:
  orders:
    envelope: OrderPlaced
    partitions: \"8\"
    handler: { timeout: 60, shutdown_budget: 1.5s }
    claim: { every: 0s }
    retry: { backoff: { jitter: ful } }
    retention: { min_age: 2w }
    dead_letter: { owner: shop-oncall }
";
    case("malformed_values", source, Expect::Errors);
}

#[test]
fn field_definitions() {
    let fields = "      count: { type: u32, values: [a, b] }
      flag: { type: bool, max_bytes: 8, default: \"yes\" }
      mode: { type: enum }
      priority: { type: enum, values: [low, high], default: urgent }
      coupon: { type: string, max_bytes: 4, optional: true, default: abc }
      label: { type: string, max_bytes: 4, default: toolong }
      size: { type: uint32 }
      at: { type: timestamp, default: \"2024-02-30T00:00:00.000Z\" }
";
    case("field_definitions", &spec(fields, ""), Expect::Errors);
}

#[test]
fn missing_required_keys() {
    let source = "\
version: 1
envelopes:
  OrderPlaced:
    fields:
      order_ref: { type: string, max_bytes: 64 }
queues:
  orders:
    dead_letter: { owner: shop-oncall }
";
    case("missing_required_keys", source, Expect::Errors);
}

#[test]
fn wrong_shapes() {
    let source = "\
version: 1
service: shop
envelopes: [OrderPlaced]
queues:
  orders:
    envelope: OrderPlaced
    partition_by: tenant
    handler: 60s
";
    case("wrong_shapes", source, Expect::Errors);
}

// Schema evolution: `accepts` and `changes` against the current fields.

/// `OrderPlaced` at schema 3, with room for its accepts, fields and changes.
fn evolving(accepts: &str, fields: &str, changes: &str, partition_by: &str) -> String {
    format!(
        "\
version: 1
service: shop
envelopes:
  OrderPlaced:
    schema: 3
    accepts: {accepts}
    fields:
      order_ref: {{ type: string, max_bytes: 64 }}
{fields}    changes:
{changes}queues:
  orders:
    envelope: OrderPlaced
    partition_by: {partition_by}
    dead_letter: {{ owner: shop-oncall }}
"
    )
}

#[test]
fn a_declared_evolution_is_clean() {
    let source = evolving(
        "[1, 2, 3]",
        "      \
      currency: { type: enum, values: [eur, usd], default: eur }
      note: { type: string, max_bytes: 100, optional: true }
",
        "      \
      2:
        added: [currency]
        renamed: { order_id: order_ref }
      3:
        added: [note]
        removed: { legacy_flag: { type: bool } }
",
        "[tenant, order_ref]",
    );
    let checked = check_str(&source, "queues.yaml");
    assert!(
        checked.diagnostics.is_empty(),
        "{}",
        render(&source, &checked)
    );
    let spec = checked.spec.expect("valid");
    assert_eq!(spec.envelopes[0].changes.len(), 2);
}

#[test]
fn added_field_without_default_while_an_older_version_is_accepted() {
    let source = evolving(
        "[1, 2, 3]",
        "      \
      currency: { type: enum, values: [eur, usd] }
      note: { type: string, max_bytes: 100 }
",
        "      \
      2:
        added: [currency]
      3:
        added: [note]
",
        "[order_ref]",
    );
    case("added_field_without_default", &source, Expect::Errors);
}

#[test]
fn removed_field_still_in_partition_by() {
    let source = evolving(
        "[2, 3]",
        "",
        "      \
      3:
        removed: { customer_ref: { type: string, max_bytes: 64 } }
",
        "[tenant, customer_ref]",
    );
    case("removed_field_in_partition_by", &source, Expect::Errors);
}

#[test]
fn accepts_a_version_newer_than_the_schema() {
    let source = evolving("[3, 4]", "", "      2: {}\n", "[order_ref]");
    case("accepts_newer_than_schema", &source, Expect::Errors);
}

#[test]
fn changes_that_do_not_fit_their_versions() {
    let source = evolving(
        "[3]",
        "      currency: { type: enum, values: [eur, usd], default: eur }\n",
        "      \
      1: { added: [order_ref] }
      5: { added: [order_ref] }
      two: {}
      3:
        added: [currency, colour]
        renamed: { order_id: order_number }
        removed: { order_ref: { type: string } }
        upcast: by-hand
",
        "[order_ref]",
    );
    case("changes_do_not_fit", &source, Expect::Errors);
}

#[test]
fn autoscale_min_zero_without_lag() {
    let queue = "    autoscale: { min: 0, max: 4, oldest_ready_age: 30s }\n";
    case(
        "autoscale_min_zero_without_lag",
        &spec("", queue),
        Expect::Errors,
    );
}

#[test]
fn autoscale_without_a_target_and_max_below_min() {
    let queue = "    autoscale: { min: 2, max: 4 }\n";
    case(
        "autoscale_without_a_target",
        &spec("", queue),
        Expect::Errors,
    );
    let queue = "    autoscale: { min: 5, max: 4, lag: 100 }\n";
    case("autoscale_max_below_min", &spec("", queue), Expect::Errors);
}

#[test]
fn autoscale_ignores_replicas() {
    let queue = "    pods: { replicas: 3 }\n    autoscale: { max: 6, lag: 100 }\n";
    case(
        "autoscale_ignores_replicas",
        &spec("", queue),
        Expect::WarningsOnly,
    );
}

#[test]
fn kubernetes_quantities_and_names() {
    let queue = "    pods: { cpu: 1.5, memory: 512MB, cpu_limit: 100m, memory_limit: 64Mi }\n";
    case("pods_quantities", &spec("", queue), Expect::Errors);
    let queue = "    pods: { cpu: 500m, cpu_limit: 250m, memory: 1Gi, memory_limit: 512Mi }\n";
    case(
        "pods_limits_below_requests",
        &spec("", queue),
        Expect::Errors,
    );
    let source = spec("", "").replacen(
        "service: shop\n",
        "service: shop\nkubernetes: { namespace: Shop_Prod, image: \"my image\", prometheus_url: prometheus:9090 }\n",
        1,
    );
    case("kubernetes_settings", &source, Expect::Errors);
}

#[test]
fn trim_cronjob_needs_a_cron_period() {
    let queue = "    retention: { trim: cronjob, trim_every: 90s }\n";
    case("trim_cronjob_period", &spec("", queue), Expect::Errors);
    let queue = "    retention: { trim: cron }\n";
    case("trim_mode_unknown", &spec("", queue), Expect::Errors);
}

/// The base spec with a top-level `postgres` section (`section`, one line or
/// none) and extra queue keys.
fn with_postgres(section: &str, queue: &str) -> String {
    spec("", queue).replacen("service: shop\n", &format!("service: shop\n{section}"), 1)
}

#[test]
fn postgres_settings_are_all_reported_at_once() {
    let source = with_postgres(
        "postgres: { schema: Docs-Pipeline, pool_size: 0, pool: 4 }\n",
        "    results: postgres\n",
    );
    case("postgres_settings", &source, Expect::Errors);
}

#[test]
fn postgres_schema_reserved_or_system() {
    let source = with_postgres("postgres: { schema: user }\n", "    outbox: true\n");
    case("postgres_schema_reserved", &source, Expect::Errors);
    let source = with_postgres("postgres: { schema: pg_shop }\n", "    outbox: true\n");
    case("postgres_schema_pg_prefix", &source, Expect::Errors);
}

#[test]
fn postgres_section_without_a_queue_using_it() {
    let source = with_postgres("postgres: { schema: shop }\n", "    outbox: false\n");
    case("postgres_unused", &source, Expect::Errors);
}

#[test]
fn results_and_outbox_values() {
    let queue = "    results: redis\n    outbox: \"true\"\n";
    case("results_unknown_store", &spec("", queue), Expect::Errors);
    let queue = "    results: postgress\n";
    case("results_misspelt", &spec("", queue), Expect::Errors);
}

#[test]
fn postgres_pool_smaller_than_the_handlers_concurrency() {
    let queue = "    handler: { concurrency: 32 }\n    results: postgres\n";
    case(
        "postgres_pool_below_concurrency",
        &spec("", queue),
        Expect::WarningsOnly,
    );
    let source = with_postgres("postgres: { pool_size: 4 }\n", queue);
    case(
        "postgres_pool_size_below_concurrency",
        &source,
        Expect::WarningsOnly,
    );
}

/// The same findings as the snapshots, asserted one by one: position, the
/// key named, and the fix.
#[test]
fn postgres_errors_name_the_key_position_and_fix() {
    let source = with_postgres(
        "postgres: { schema: Docs-Pipeline, pool_size: 0, pool: 4 }\n",
        "    results: redis\n",
    );
    let checked = check_str(&source, "queues.yaml");
    let found: Vec<(usize, usize, &str, &str, &str)> = checked
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.line,
                d.column,
                d.path.as_str(),
                d.message.as_str(),
                d.help.as_deref().unwrap_or(""),
            )
        })
        .collect();
    let expect = |line: usize, column: usize, path: &str, message: &str, help: &str| {
        assert!(
            found
                .iter()
                .any(|(l, c, p, m, h)| (*l, *c, *p) == (line, column, path)
                    && m.contains(message)
                    && h.contains(help)),
            "no {line}:{column} {path}: {message} / {help} in {found:#?}"
        );
    };
    expect(
        3,
        21,
        "postgres.schema",
        "`Docs-Pipeline` is not a plain lowercase SQL identifier",
        "lowercase letters, digits and `_`",
    );
    expect(
        3,
        47,
        "postgres.pool_size",
        "must be at least 1, found 0",
        "at least 1",
    );
    expect(
        3,
        50,
        "postgres.pool",
        "unknown key",
        "did you mean `pool_size`?",
    );
    expect(
        13,
        14,
        "queues.orders.results",
        "unknown results store `redis`: the only one is `postgres`",
        "leave `results` out to keep results yourself",
    );
    assert_eq!(checked.error_count(), 4, "{found:#?}");

    let unused = check_str(
        &with_postgres("postgres: { schema: shop }\n", ""),
        "queues.yaml",
    );
    let [d] = unused.diagnostics.as_slice() else {
        panic!("{:#?}", unused.diagnostics);
    };
    assert_eq!((d.line, d.column, d.path.as_str()), (3, 1, "postgres"));
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("add `results: postgres` or `outbox: true` to a queue, or remove the `postgres` section"),
        "{d}"
    );
}

#[test]
fn kubernetes_without_the_postgres_secret() {
    // Collected with the other problems of the section and the queue.
    let source = with_postgres(
        "kubernetes: { namespace: shop, image: \"my image\" }\n",
        "    results: postgres\n    pods: { cpu: lots }\n",
    );
    case("postgres_secret_missing", &source, Expect::Errors);
}

#[test]
fn kubernetes_postgres_keys_nothing_reads() {
    let source = with_postgres(
        "kubernetes:\n  namespace: shop\n  postgres_secret: shop-postgres\n  psql_image: postgres:17\n",
        "    outbox: false\n",
    );
    case("postgres_secret_unused", &source, Expect::Errors);
}

#[test]
fn kubernetes_postgres_keys_malformed() {
    let source = with_postgres(
        "kubernetes: { postgres_secret: Shop_Postgres, psql_image: \"\" }\n",
        "    outbox: true\n",
    );
    case("postgres_secret_malformed", &source, Expect::Errors);
}

/// The same findings as the snapshots, one by one: the missing Secret is
/// reported at the `kubernetes` key, naming every queue that uses
/// PostgreSQL; without a `kubernetes` section nothing is required.
#[test]
fn the_postgres_secret_errors_name_the_key_position_and_fix() {
    let source = format!(
        "{}  refunds:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n    outbox: true\n",
        with_postgres("kubernetes:\n  namespace: shop\n", "    results: postgres\n")
    );
    let checked = check_str(&source, "queues.yaml");
    let [d] = checked.diagnostics.as_slice() else {
        panic!("{:#?}", checked.diagnostics);
    };
    assert_eq!(
        (d.line, d.column, d.path.as_str()),
        (3, 1, "kubernetes.postgres_secret"),
        "{d}"
    );
    assert!(
        d.message
            .starts_with("queues `orders` and `refunds` use PostgreSQL, but `kubernetes` names no Secret with the database URL"),
        "{d}"
    );
    assert!(
        d.help.as_deref().unwrap().contains(
            "add `postgres_secret: shop-postgres` under `kubernetes`, naming a Secret whose key `database-url` holds the URL"
        ),
        "{d}"
    );

    // No `kubernetes` section: nothing is required (and nothing of
    // PostgreSQL goes into the manifests).
    let without = check_str(&with_postgres("", "    results: postgres\n"), "queues.yaml");
    assert!(without.diagnostics.is_empty(), "{:#?}", without.diagnostics);
    // An empty section is a section.
    let empty = check_str(
        &with_postgres("kubernetes: {}\n", "    results: postgres\n"),
        "queues.yaml",
    );
    assert_eq!(empty.error_count(), 1, "{:#?}", empty.diagnostics);
    assert!(empty.diagnostics[0]
        .message
        .starts_with("queue `orders` uses PostgreSQL"));
    // Given: clean.
    let given = check_str(
        &with_postgres(
            "kubernetes: { postgres_secret: shop-postgres }\n",
            "    results: postgres\n",
        ),
        "queues.yaml",
    );
    assert!(given.diagnostics.is_empty(), "{:#?}", given.diagnostics);

    // Unused: each key at itself.
    let unused = check_str(
        &with_postgres(
            "kubernetes: { postgres_secret: shop-postgres, psql_image: postgres:17 }\n",
            "",
        ),
        "queues.yaml",
    );
    let found: Vec<(usize, usize, &str)> = unused
        .diagnostics
        .iter()
        .map(|d| (d.line, d.column, d.path.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (3, 15, "kubernetes.postgres_secret"),
            (3, 47, "kubernetes.psql_image")
        ]
    );
    assert!(unused.diagnostics[0].help.as_deref().unwrap().contains(
        "add `results: postgres` or `outbox: true` to a queue, or remove `postgres_secret`"
    ));
}

/// The only diagnostic of `checked`, as `(line, column, message, help)`.
fn only(checked: &Checked) -> (usize, usize, String, String) {
    assert_eq!(checked.diagnostics.len(), 1, "{:#?}", checked.diagnostics);
    let d = &checked.diagnostics[0];
    (
        d.line,
        d.column,
        d.message.clone(),
        d.help.clone().unwrap_or_default(),
    )
}

#[test]
fn an_unclosed_flow_sequence_is_reported_at_its_bracket() {
    // Line 12 opens `[` at column 19 and never closes it; the parser only
    // gives up at line 14's `:`.
    let source = spec(
        "",
        "    partition_by: [order_ref, tenant\n    partitions: 8\n    retention: { min_age: 1h }\n",
    );
    let checked = check_str(&source, "queues.yaml");
    let (line, column, message, help) = only(&checked);
    assert_eq!((line, column), (12, 19), "{message}");
    assert!(
        message.contains("flow sequence `[` is never closed")
            && message.contains("the parser gave up at line 13 column 15"),
        "{message}"
    );
    assert!(help.contains("close the sequence with `]`"), "{help}");
}

#[test]
fn an_unclosed_flow_mapping_and_quote_are_reported_where_they_open() {
    let source = spec(
        "",
        "    claim: { min_idle: 2m, max_idle: 5m\n    partitions: 8\n",
    );
    let (line, column, message, help) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (12, 12), "{message}");
    assert!(
        message.contains("flow mapping `{` is never closed")
            && message.contains("the parser gave up at line 13"),
        "{message}"
    );
    assert!(help.contains("close the mapping with `}`"), "{help}");

    let source = spec("", "").replace("service: shop", "service: \"shop");
    let (line, column, message, help) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (2, 10), "{message}");
    assert!(
        message.contains("double-quoted string is never closed")
            && message.contains("end of the file"),
        "{message}"
    );
    assert!(help.contains("close the string with `\"`"), "{help}");

    let source = spec("", "").replace("service: shop", "service: 'shop\n---");
    let (line, column, message, help) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (2, 10), "{message}");
    assert!(
        message.contains("single-quoted string is never closed")
            && message.contains("the parser gave up at line 3 column 1"),
        "{message}"
    );
    assert!(help.contains("close the string with `'`"), "{help}");
}

#[test]
fn a_missing_comma_in_a_closed_sequence_stays_where_the_parser_stopped() {
    // The sequence is closed: the mistake is at the second item, not the bracket.
    let source = spec("", "    partition_by: [\"order_ref\" \"tenant\"]\n");
    let (line, column, message, help) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (12, 32), "{message}");
    assert!(message.contains("at line 12 column 19"), "{message}");
    assert!(help.contains("separate the items with `,`"), "{help}");
}

#[test]
fn a_closed_inner_sequence_does_not_hide_an_unclosed_mapping() {
    // An inner sequence that is closed does not hide the outer one that is not.
    let source = spec(
        "",
        "    claim: { min_idle: 2m, lanes: [a, b]\n    partitions: 8\n",
    );
    let (line, column, message, _) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (12, 12), "{message}");
    // A sequence closed by the wrong bracket is unclosed too.
    let source = spec("", "    partition_by: [order_ref}\n");
    let (line, column, message, help) = only(&check_str(&source, "queues.yaml"));
    assert_eq!((line, column), (12, 19), "{message}");
    assert!(help.contains("close the sequence with `]`"), "{help}");
}

#[test]
fn a_spec_that_is_not_utf8_is_reported_at_the_first_invalid_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queues.yaml");
    // `é` saved as Latin-1: one byte 0xE9 on line 2, after `service: caf`.
    let mut bytes = spec("", "")
        .replace("service: shop", "service: cafX")
        .into_bytes();
    let at = bytes.iter().position(|&b| b == b'X').unwrap();
    bytes[at] = 0xE9;
    std::fs::write(&path, &bytes).unwrap();
    let checked = queuegen::spec::check_file(&path).expect("a file that exists is checked");
    let (line, column, message, help) = only(&checked);
    assert_eq!((line, column), (2, 13), "{message}");
    assert!(checked.has_errors() && checked.spec.is_none());
    assert!(
        message.contains("not UTF-8") && message.contains("byte 0xE9"),
        "{message}"
    );
    assert!(help.contains("save the file as UTF-8"), "{help}");
}

/// The Function library's limits (`queuegen_spec::limits::library`) are
/// checked where the spec could break them: a claim batch `claim` would
/// refuse, an envelope whose entries every transition would refuse.
#[test]
fn limits_of_the_function_library_are_checked_in_the_spec() {
    use queuegen::spec::limits::library::{MAX_CLAIM_COUNT, MAX_ENVELOPE_FIELDS};
    let over = MAX_CLAIM_COUNT + 1;
    let checked = check_str(
        &spec("", &format!("    claim: {{ batch: {over} }}\n")),
        "queues.yaml",
    );
    let text: Vec<String> = checked.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        text.iter()
            .any(|d| d.contains("claim.batch") && d.contains(&format!("at most {MAX_CLAIM_COUNT}"))),
        "{text:#?}"
    );
    assert!(check_str(
        &spec("", &format!("    claim: {{ batch: {MAX_CLAIM_COUNT} }}\n")),
        "queues.yaml"
    )
    .spec
    .is_some());

    let header = queuegen::spec::limits::HEADER_FIELDS.len() as u64;
    let fields = |count: u64| -> String {
        (0..count)
            .map(|i| format!("      f{i}: {{ type: u32 }}\n"))
            .collect()
    };
    // order_ref is one field already.
    let most = MAX_ENVELOPE_FIELDS - header - 1;
    assert!(check_str(&spec(&fields(most), ""), "queues.yaml")
        .spec
        .is_some());
    let checked = check_str(&spec(&fields(most + 1), ""), "queues.yaml");
    let text: Vec<String> = checked.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        checked.has_errors() && text.iter().any(|d| d.contains("MAX_ENVELOPE_FIELDS")),
        "{text:#?}"
    );
}
