//! The Rust module tree for a spec: envelope structs, and per queue its
//! settings, producer, handler trait and worker constructor.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::naming::{field_name, module_name, upper_camel, variant_rename};
use super::templates::render;
use super::upcast;
use super::{header, GeneratedFile};
use crate::error::{Error, Result};
use crate::spec::cadence::Cadence;
use crate::spec::model::{
    Envelope, Field, FieldType, Jitter, Missed, OnAck, Queue, ResultStore, Schedule, Spec, TrimMode,
};

const ENVELOPES_MODULE: &str = "envelopes";

/// Generates every file of the module tree. `spec_file` is how the header
/// names the spec (a path relative to the output directory).
pub fn generate(spec: &Spec, spec_file: &str) -> Result<Vec<GeneratedFile>> {
    let header = header(spec_file);
    let mut files = Vec::with_capacity(spec.queues.len() + 2);

    let queues: Vec<QueueContext> = spec.queues.iter().map(|q| queue_context(spec, q)).collect();
    if let Some(clash) = queues.iter().find(|q| q.module == ENVELOPES_MODULE) {
        return Err(Error::Unsupported(format!(
            "queue `{}` would generate a module named like the envelopes module; rename the queue",
            clash.name
        )));
    }
    // Each schedule is a const of its queue's module, named after it.
    for schedule in &spec.schedules {
        let const_name = schedule.name.replace('-', "_").to_uppercase();
        if ["CONFIG", "SCHEDULES"].contains(&const_name.as_str()) {
            return Err(Error::Unsupported(format!(
                "schedule `{}` would generate a const named like the queue module's `{const_name}`; rename the schedule",
                schedule.name
            )));
        }
        if let Some(twin) = spec.schedules_of(&schedule.queue).find(|other| {
            other.name != schedule.name
                && other.name.replace('-', "_") == schedule.name.replace('-', "_")
        }) {
            return Err(Error::Unsupported(format!(
                "schedules `{}` and `{}` would generate the same const `{const_name}`; rename one",
                schedule.name, twin.name
            )));
        }
    }
    // rustfmt orders `mod` items alphabetically; so must we to stay rustfmt-clean.
    let mut modules: Vec<&str> = queues.iter().map(|q| q.module.as_str()).collect();
    modules.push(ENVELOPES_MODULE);
    modules.sort_unstable();
    files.push(GeneratedFile {
        path: PathBuf::from("mod.rs"),
        contents: render(
            "mod.rs",
            ModContext {
                header: &header,
                service: &spec.service,
                modules: &modules,
                postgres: postgres_context(spec, &queues),
            },
        )?,
    });

    let envelopes = spec
        .envelopes
        .iter()
        .map(envelope_context)
        .collect::<Result<Vec<_>>>()?;
    files.push(GeneratedFile {
        path: PathBuf::from("envelopes.rs"),
        contents: render(
            "envelopes.rs",
            EnvelopesContext {
                header: &header,
                service: &spec.service,
                imports: envelope_imports(&spec.envelopes),
                envelopes,
            },
        )?,
    });

    for queue in &queues {
        files.push(GeneratedFile {
            path: PathBuf::from(format!("{}.rs", queue.module.trim_start_matches("r#"))),
            contents: render(
                "queue.rs",
                QueueFileContext {
                    header: &header,
                    queue,
                },
            )?,
        });
    }
    Ok(files)
}

#[derive(Serialize)]
struct ModContext<'a> {
    header: &'a str,
    service: &'a str,
    modules: &'a [&'a str],
    /// Set when a queue uses PostgreSQL; nothing about it is generated otherwise.
    postgres: Option<PostgresContext>,
}

/// The PostgreSQL items of mod.rs.
#[derive(Serialize)]
struct PostgresContext {
    schema: String,
    pool_size: u32,
    /// `{OutboxPublisher, Postgres}` or `Postgres`.
    imports: String,
    /// Whether a queue has `results: postgres`.
    results: bool,
    /// `OUTBOX_QUEUES`' length and value (an array expression, laid out as
    /// rustfmt would); no outbox items when 0.
    outbox_count: usize,
    outbox_queues: String,
}

/// Longest array expression rustfmt keeps on one line (`array_width`, 60%
/// of `max_width`).
const RUSTFMT_ARRAY_WIDTH: usize = 60;

fn postgres_context(spec: &Spec, queues: &[QueueContext]) -> Option<PostgresContext> {
    let settings = spec.postgres.as_ref()?;
    let outbox: Vec<String> = queues
        .iter()
        .filter(|q| q.outbox)
        .map(|q| format!("{}::CONFIG", q.module))
        .collect();
    let one_line = format!("[{}]", outbox.join(", "));
    let declaration = format!(
        "pub const OUTBOX_QUEUES: [QueueConfig; {}] = {one_line};",
        outbox.len()
    );
    let outbox_queues = if one_line.len() <= RUSTFMT_ARRAY_WIDTH && declaration.len() <= 100 {
        one_line
    } else {
        let items: String = outbox.iter().map(|item| format!("    {item},\n")).collect();
        format!("[\n{items}]")
    };
    Some(PostgresContext {
        schema: settings.schema.clone(),
        pool_size: settings.pool_size,
        imports: if outbox.is_empty() {
            "Postgres".to_owned()
        } else {
            "{OutboxPublisher, Postgres}".to_owned()
        },
        results: spec
            .queues
            .iter()
            .any(|q| q.results == Some(ResultStore::Postgres)),
        outbox_count: outbox.len(),
        outbox_queues,
    })
}

#[derive(Serialize)]
struct EnvelopesContext<'a> {
    header: &'a str,
    service: &'a str,
    imports: Vec<String>,
    envelopes: Vec<EnvelopeContext>,
}

#[derive(Serialize)]
struct EnvelopeContext {
    name: String,
    schema: u32,
    /// `1, 2, 3`
    accepts: String,
    /// `version 1` / `versions 1, 2`: accepted versions other than `schema`; empty if none.
    also_accepts: String,
    fields: Vec<FieldContext>,
    enums: Vec<EnumContext>,
    /// Structs of older versions, their conversions and the `Upcast` impl.
    older: Option<upcast::OlderVersions>,
}

#[derive(Serialize)]
pub(super) struct FieldContext {
    ident: String,
    rust_type: String,
    /// Contents of `#[envelope(...)]`, empty for none.
    attrs: String,
    doc: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct EnumContext {
    name: String,
    field: String,
    /// The spec's values as a Rust array literal, for the compile-time check
    /// that the derive writes exactly these.
    wire_values: String,
    has_default: bool,
    variants: Vec<VariantContext>,
}

#[derive(Serialize)]
struct VariantContext {
    ident: String,
    /// Set when the derive's snake_case of `ident` is not the spec's value.
    rename: Option<String>,
    is_default: bool,
}

#[derive(Serialize)]
struct QueueFileContext<'a> {
    header: &'a str,
    queue: &'a QueueContext,
}

/// One queue as the templates see it: every value already a Rust expression.
#[derive(Serialize)]
pub(crate) struct QueueContext {
    pub name: String,
    pub module: String,
    pub envelope: String,
    /// Type name of the handler a `--stubs` skeleton declares, e.g. `OcrHandler`.
    pub handler_type: String,
    service: String,
    key_prefix: String,
    partitions: u16,
    /// `"tenant", "subject_ref"`
    partition_by: String,
    group: String,
    group_start: String,
    handler_timeout: String,
    concurrency: u32,
    shutdown_budget: String,
    claim_min_idle: String,
    claim_every: String,
    claim_batch: u32,
    claim_rate: u32,
    payload_max_bytes: u64,
    functions: String,
    retry_max_attempts: u32,
    retry_initial: String,
    retry_max: String,
    /// An `f64` literal, e.g. `2.0`.
    retry_factor: String,
    /// `Jitter::None` / `Jitter::Full`
    retry_jitter: String,
    retry_promote_every: String,
    retry_promote_batch: u32,
    poison_max_deliveries: u32,
    dead_letter_max_len: u64,
    marker_ttl: String,
    retention_min_age: String,
    trim_every: String,
    /// `true` or `false`, as Rust (minijinja would print `True`).
    trim_in_process: &'static str,
    /// `true` or `false`, as Rust.
    delete_on_ack: &'static str,
    dead_letter_retention: String,
    /// `Some(Duration::…)` or `None`.
    admission_max_oldest_ready_age: String,
    rate: String,
    /// `None` or `Some(queuegen_runtime::TenantRateLimit { … })`.
    tenant_rate: String,
    admission_refresh: String,
    wait_replicas: u32,
    wait_timeout: String,
    /// `Some(Duration::…)` or `None`.
    dedup_window: String,
    /// `&[]`, or the lanes as a Rust slice of `Lane { … }`.
    lanes: String,
    default_lane: usize,
    /// The lane names as consts (`pub const HIGH: &str = "high";`), one per line.
    pub lane_consts: Vec<(String, String)>,
    default_lane_name: String,
    /// The `use queuegen_runtime::{…};` item, laid out as rustfmt would.
    runtime_imports: String,
    /// `results: postgres`: the module has `results`, the stub works in a transaction.
    pub results_postgres: bool,
    /// `outbox: true`: the module has `outbox`.
    pub outbox: bool,
    /// What the module imports from `queuegen_runtime::postgres`, e.g.
    /// `{PgResults, Postgres}`; empty when it uses none of it.
    postgres_imports: String,
    /// The schedules publishing to this queue: how many, one const each
    /// (laid out as rustfmt would), and `SCHEDULES`' value; none when 0.
    schedule_count: usize,
    /// Whether one of them is a `cron` (its strings need `Cow`).
    schedule_cron: bool,
    schedule_items: String,
    schedules: String,
}

pub(crate) fn queue_context(spec: &Spec, queue: &Queue) -> QueueContext {
    let results_postgres = queue.results == Some(ResultStore::Postgres);
    let mut postgres_imports = Vec::new();
    if queue.outbox {
        postgres_imports.push("PgOutbox");
    }
    if results_postgres {
        postgres_imports.push("PgResults");
    }
    if !postgres_imports.is_empty() {
        postgres_imports.push("Postgres");
    }
    let (schedule_items, schedule_names): (Vec<String>, Vec<String>) = spec
        .schedules_of(&queue.name)
        .map(|s| schedule_item(spec, queue, s))
        .unzip();
    QueueContext {
        schedule_count: schedule_names.len(),
        schedule_cron: spec
            .schedules_of(&queue.name)
            .any(|s| matches!(s.cadence, Cadence::Cron { .. })),
        schedule_items: schedule_items.join("\n"),
        schedules: schedules_array(&schedule_names),
        name: queue.name.clone(),
        module: module_name(&queue.name),
        envelope: queue.envelope.clone(),
        handler_type: format!("{}Handler", upper_camel(&queue.name)),
        service: spec.service.clone(),
        key_prefix: spec.redis.key_prefix.clone(),
        partitions: queue.partitions,
        partition_by: queue
            .partition_by
            .iter()
            .map(|f| format!("{f:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        group: queue.group.name.clone(),
        group_start: queue.group.start.as_redis_arg().to_owned(),
        handler_timeout: duration_expr(queue.handler.timeout),
        concurrency: queue.handler.concurrency,
        shutdown_budget: duration_expr(queue.handler.shutdown_budget),
        claim_min_idle: duration_expr(queue.claim.min_idle),
        claim_every: duration_expr(queue.claim.every),
        claim_batch: queue.claim.batch,
        claim_rate: queue.claim.rate,
        payload_max_bytes: queue.payload.max_bytes,
        functions: super::functions::library_name(&spec.service),
        retry_max_attempts: queue.retry.max_attempts,
        retry_initial: duration_expr(queue.retry.backoff.initial),
        retry_max: duration_expr(queue.retry.backoff.max),
        // `{:?}` always prints a valid f64 literal (`2.0`, `1.5`, `1e300`).
        retry_factor: format!("{:?}", queue.retry.backoff.factor),
        retry_jitter: match queue.retry.backoff.jitter {
            Jitter::None => "Jitter::None",
            Jitter::Full => "Jitter::Full",
        }
        .to_owned(),
        retry_promote_every: duration_expr(queue.retry.promote_every),
        retry_promote_batch: queue.retry.promote_batch,
        poison_max_deliveries: queue.poison.max_deliveries,
        dead_letter_max_len: queue.dead_letter.max_len,
        // Markers must outlive any source a re-run could still find: retention.
        marker_ttl: duration_expr(queue.retention.min_age),
        retention_min_age: duration_expr(queue.retention.min_age),
        trim_every: duration_expr(queue.retention.trim_every),
        trim_in_process: if queue.retention.trim == TrimMode::InProcess {
            "true"
        } else {
            "false"
        },
        delete_on_ack: if queue.retention.on_ack == OnAck::Delete {
            "true"
        } else {
            "false"
        },
        dead_letter_retention: duration_expr(queue.dead_letter.retention),
        tenant_rate: queue.handler.tenant_rate.map_or_else(
            || "None".to_owned(),
            |rate| {
                format!(
                    "Some(queuegen_runtime::TenantRateLimit {{\n        limit: {},\n        per: {},\n        classes: {},\n    }})",
                    rate.limit,
                    duration_expr(rate.per),
                    rate.classes
                )
            },
        ),
        rate: queue.handler.rate.map_or_else(
            || "None".to_owned(),
            |rate| {
                // Laid out as rustfmt would: generated code is rustfmt-clean.
                format!(
                    "Some(queuegen_runtime::RateLimit {{\n        limit: {},\n        per: {},\n    }})",
                    rate.limit,
                    duration_expr(rate.per)
                )
            },
        ),
        admission_max_oldest_ready_age: queue.admission.max_oldest_ready_age.map_or_else(
            || "None".to_owned(),
            |d| format!("Some({})", duration_expr(d)),
        ),
        admission_refresh: duration_expr(queue.admission.refresh),
        wait_replicas: spec.redis.wait_replicas,
        wait_timeout: duration_expr(spec.redis.wait_timeout),
        dedup_window: queue.dedup.as_ref().map_or_else(
            || "None".to_owned(),
            |dedup| format!("Some({})", duration_expr(dedup.window)),
        ),
        lanes: lanes_expr(queue),
        default_lane: queue.lanes.iter().position(|lane| lane.default).unwrap_or(0),
        lane_consts: queue
            .lanes
            .iter()
            .map(|lane| (lane.name.replace('-', "_").to_uppercase(), lane.name.clone()))
            .collect(),
        default_lane_name: queue
            .default_lane()
            .map_or_else(String::new, |lane| lane.name.clone()),
        runtime_imports: runtime_imports(queue, !schedule_names.is_empty()),
        results_postgres,
        outbox: queue.outbox,
        postgres_imports: match postgres_imports.as_slice() {
            [] => String::new(),
            [one] => (*one).to_owned(),
            many => format!("{{{}}}", many.join(", ")),
        },
    }
}

/// What the queue's module uses of `queuegen_runtime`, as rustfmt lays out
/// a `use` list: on one line when it fits in 100 columns, else as many
/// items per indented line as fit.
fn runtime_imports(queue: &Queue, schedules: bool) -> String {
    let mut names = vec![
        "Jitter",
        "JobContext",
        "JobError",
        "Outcome",
        "Producer",
        "QueueConfig",
        "Redis",
        "Worker",
    ];
    if schedules {
        names.extend(["Cadence", "Missed", "Schedule", "Scheduler"]);
    }
    if !queue.lanes.is_empty() {
        names.push("Lane");
    }
    names.sort_unstable();
    let one_line = format!("use queuegen_runtime::{{{}}};", names.join(", "));
    if one_line.len() < 100 {
        return one_line;
    }
    let mut lines = vec![String::from("use queuegen_runtime::{")];
    let mut line = String::from("   ");
    for name in names {
        if line.len() + 1 + name.len() + 1 > 100 {
            lines.push(std::mem::replace(&mut line, String::from("   ")));
        }
        line.push(' ');
        line.push_str(name);
        line.push(',');
    }
    lines.push(line);
    lines.push("};".to_owned());
    lines.join("\n")
}

/// `QueueConfig::lanes` as Rust: `&[]`, or one `Lane` per line as rustfmt lays them out.
fn lanes_expr(queue: &Queue) -> String {
    if queue.lanes.is_empty() {
        return "&[]".to_owned();
    }
    let lanes: String = queue
        .lanes
        .iter()
        .map(|lane| {
            format!(
                "        Lane {{\n            name: {:?},\n            weight: {},\n        }},\n",
                lane.name, lane.weight
            )
        })
        .collect();
    format!("&[\n{lanes}    ]")
}

/// The const of one schedule (`pub const NIGHTLY_EXPORT: Schedule = ...;`),
/// laid out as rustfmt would, and its name.
fn schedule_item(spec: &Spec, queue: &Queue, schedule: &Schedule) -> (String, String) {
    let envelope = spec
        .envelope(&queue.envelope)
        .expect("the checked spec's queue names a declared envelope");
    let const_name = schedule.name.replace('-', "_").to_uppercase();
    let cadence = match &schedule.cadence {
        Cadence::Cron {
            expression,
            timezone,
        } => format!(
            "Cadence::Cron {{\n        expression: Cow::Borrowed({expression:?}),\n        timezone: Cow::Borrowed({timezone:?}),\n    }}"
        ),
        Cadence::Every(period) => format!("Cadence::Every({})", duration_expr(*period)),
    };
    let pairs: Vec<String> = schedule
        .body
        .iter()
        .map(|(name, value)| format!("({name:?}, {value:?})"))
        .collect();
    let one_line = format!("&[{}]", pairs.join(", "));
    let body = if one_line.len() - 1 <= RUSTFMT_ARRAY_WIDTH && one_line.len() + 11 <= 100 {
        one_line
    } else {
        let items: String = pairs.iter().map(|p| format!("        {p},\n")).collect();
        format!("&[\n{items}    ]")
    };
    let missed = match schedule.missed {
        Missed::Skip => "Missed::Skip",
        Missed::RunOnce => "Missed::RunOnce",
    };
    let item = format!(
        "/// Schedule `{name}`: {describe}, missed ticks {missed_doc}.\npub const {const_name}: Schedule = Schedule {{\n    name: {name:?},\n    queue: CONFIG,\n    envelope_type: {envelope_type:?},\n    schema: {schema},\n    cadence: {cadence},\n    tenant: {tenant:?},\n    body: {body},\n    missed: {missed},\n    grace: {grace},\n}};\n",
        name = schedule.name,
        describe = schedule.cadence.describe().replace('"', "`"),
        missed_doc = match schedule.missed {
            Missed::Skip => "skipped",
            Missed::RunOnce => "run once",
        },
        envelope_type = envelope.name,
        schema = envelope.schema,
        tenant = schedule.tenant,
        grace = duration_expr(schedule.grace),
    );
    (item, const_name)
}

/// `[A, B]` on one line, or one item a line, as rustfmt lays out
/// `pub const SCHEDULES: [Schedule; N] = ...;`.
fn schedules_array(names: &[String]) -> String {
    let one_line = format!("[{}]", names.join(", "));
    let declaration = format!(
        "pub const SCHEDULES: [Schedule; {}] = {one_line};",
        names.len()
    );
    if one_line.len() <= RUSTFMT_ARRAY_WIDTH && declaration.len() <= 100 {
        one_line
    } else {
        let items: String = names.iter().map(|n| format!("    {n},\n")).collect();
        format!("[\n{items}]")
    }
}

/// `["a", "b"]` laid out as rustfmt lays out an argument at indent 4: on
/// one line when it fits, several short items a line, or one item a line.
fn wire_values_array(values: &[String]) -> String {
    const SHORT_ITEM: usize = 10;
    let items: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    let one_line = format!("[{}]", items.join(", "));
    if one_line.len() <= RUSTFMT_ARRAY_WIDTH && 4 + 1 + one_line.len() < 100 {
        return one_line;
    }
    if items.iter().all(|item| item.len() <= SHORT_ITEM) {
        let mut lines: Vec<String> = Vec::new();
        for item in &items {
            match lines.last_mut() {
                Some(line) if line.len() + 1 + item.len() < 100 => {
                    line.push(' ');
                    line.push_str(item);
                    line.push(',');
                }
                _ => lines.push(format!("        {item},")),
            }
        }
        return format!("[\n{}\n    ]", lines.join("\n"));
    }
    let lines: String = items.iter().map(|i| format!("        {i},\n")).collect();
    format!("[\n{lines}    ]")
}

/// The shortest exact `Duration` constructor for `d`.
fn duration_expr(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("Duration::from_secs({})", d.as_secs())
    } else {
        format!("Duration::from_millis({})", d.as_millis())
    }
}

fn envelope_imports(envelopes: &[Envelope]) -> Vec<String> {
    // Older versions' structs may carry removed fields of other types.
    let fields = || {
        envelopes.iter().flat_map(|e| {
            e.fields
                .iter()
                .chain(e.changes.iter().flat_map(|c| &c.removed))
        })
    };
    let upcasts = envelopes.iter().any(upcast::has_older);
    let mut names = vec!["Envelope"];
    if upcasts {
        names.push("Error");
    }
    if fields().any(|f| matches!(f.ty, FieldType::Enum { .. })) {
        names.push("FieldEnum");
    }
    if upcasts {
        names.push("FieldMap");
    }
    if fields().any(|f| f.ty == FieldType::Timestamp) {
        names.push("Timestamp");
    }
    if upcasts {
        names.push("Upcast");
    }
    let list = if names.len() == 1 {
        names[0].to_owned()
    } else {
        format!("{{{}}}", names.join(", "))
    };
    vec![format!("use queuegen_runtime::{list};")]
}

fn envelope_context(envelope: &Envelope) -> Result<EnvelopeContext> {
    let join = |versions: &mut dyn Iterator<Item = &u32>| {
        versions.map(u32::to_string).collect::<Vec<_>>().join(", ")
    };
    let mut fields = Vec::with_capacity(envelope.fields.len());
    let mut enums = Vec::new();
    for field in &envelope.fields {
        let (context, enum_context) = field_context(field, &enum_type(envelope, field))?;
        fields.push(context);
        enums.extend(enum_context);
    }
    let older = upcast::older_versions(envelope)?;
    Ok(EnvelopeContext {
        name: envelope.name.clone(),
        schema: envelope.schema,
        accepts: join(&mut envelope.accepts.iter()),
        also_accepts: {
            let older: Vec<&u32> = envelope
                .accepts
                .iter()
                .filter(|v| **v != envelope.schema)
                .collect();
            match older.len() {
                0 => String::new(),
                1 => format!("version {}", older[0]),
                _ => format!("versions {}", join(&mut older.into_iter())),
            }
        },
        fields,
        enums,
        older,
    })
}

/// The enum type of a current field: `{Envelope}{Field}`.
pub(super) fn enum_type(envelope: &Envelope, field: &Field) -> String {
    format!("{}{}", envelope.name, upper_camel(&field.name))
}

/// A field of the envelope's struct, and its enum type when it is an enum
/// (named `enum_name`).
pub(super) fn field_context(
    field: &Field,
    enum_name: &str,
) -> Result<(FieldContext, Option<EnumContext>)> {
    let mut enum_context = None;
    let base_type = match &field.ty {
        FieldType::String => "String".to_owned(),
        FieldType::Bool => "bool".to_owned(),
        FieldType::U32 => "u32".to_owned(),
        FieldType::U64 => "u64".to_owned(),
        FieldType::I32 => "i32".to_owned(),
        FieldType::I64 => "i64".to_owned(),
        FieldType::Timestamp => "Timestamp".to_owned(),
        FieldType::Enum { values } => {
            let name = enum_name.to_owned();
            enum_context = Some(EnumContext {
                name: name.clone(),
                field: field.name.clone(),
                wire_values: wire_values_array(values),
                has_default: field.default.is_some(),
                variants: values
                    .iter()
                    .map(|value| {
                        let ident = upper_camel(value);
                        VariantContext {
                            rename: variant_rename(value).map(str::to_owned),
                            is_default: field.default.as_deref() == Some(value.as_str()),
                            ident,
                        }
                    })
                    .collect(),
            });
            name
        }
    };

    let mut attrs = Vec::new();
    let mut doc = Vec::new();
    if let Some(max) = field.max_bytes {
        attrs.push(format!("max_bytes = {max}"));
        doc.push(format!("At most {max} bytes."));
    }
    if let Some(default) = &field.default {
        // `Default::default()` reads best where it is the spec's default
        // (enums mark theirs with `#[default]`); any other default is
        // decoded from its text, as if the entry carried it.
        if is_type_default(&field.ty, default) {
            attrs.push("default".to_owned());
        } else {
            attrs.push(format!("default = {default:?}"));
        }
        doc.push(format!("Decodes as `{default}` when absent."));
    }
    let rust_type = if field.optional {
        format!("Option<{base_type}>")
    } else {
        base_type
    };
    Ok((
        FieldContext {
            ident: field_name(&field.name),
            rust_type,
            attrs: attrs.join(", "),
            doc,
        },
        enum_context,
    ))
}

/// Whether `default` is what `Default::default()` gives for the generated type
/// (enum defaults are marked with `#[default]` on their variant).
fn is_type_default(ty: &FieldType, default: &str) -> bool {
    match ty {
        FieldType::Enum { .. } => true,
        FieldType::String => default.is_empty(),
        FieldType::Bool => default == "false",
        FieldType::U32 | FieldType::U64 | FieldType::I32 | FieldType::I64 => default == "0",
        FieldType::Timestamp => false,
    }
}
