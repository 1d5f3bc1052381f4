//! The Rust module tree for a spec: envelope structs, and per queue its
//! settings, producer, handler trait and worker constructor.

use minijinja::{context, Value};
use serde::Serialize;

use super::naming::{field_name, module_name, upper_camel, variant_rename};
use super::runtime_config;
use super::templates::render;
use super::{header, layout, rust_value, upcast, GeneratedFile};
use crate::error::{Error, Result};
use crate::spec::cadence::Cadence;
use crate::spec::model::{
    Envelope, Field, FieldType, Missed, OnDeadLetter, Pipeline, Queue, ResultStore, Schedule, Spec,
};

const ENVELOPES_MODULE: &str = "envelopes";
const PIPELINES_MODULE: &str = "pipelines";

/// Generates every file of the module tree. `spec_file` is how the header
/// names the spec (a path relative to the output directory).
pub fn generate(spec: &Spec, spec_file: &str) -> Result<Vec<GeneratedFile>> {
    let header = header(spec_file);
    let mut files = Vec::with_capacity(spec.queues.len() + 2);

    let queues: Vec<QueueContext> = spec.queues.iter().map(|q| queue_context(spec, q)).collect();
    for module in [ENVELOPES_MODULE, PIPELINES_MODULE] {
        if let Some(clash) = queues.iter().find(|q| q.module == module) {
            return Err(Error::Unsupported(format!(
                "queue `{}` would generate a module named like the {module} module; rename the queue",
                clash.name
            )));
        }
    }
    // Each schedule is a const of its queue's module, named after it.
    for schedule in &spec.schedules {
        let const_name = const_ident(&schedule.name);
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
    // Sorted as rustfmt orders `mod` items.
    let mut modules: Vec<&str> = queues.iter().map(|q| q.module.as_str()).collect();
    modules.push(ENVELOPES_MODULE);
    if !spec.pipelines.is_empty() {
        modules.push(PIPELINES_MODULE);
    }
    modules.sort_unstable();
    let postgres = postgres_context(spec, &queues);
    let service = &spec.service;
    let context = context! { service, modules, postgres };
    files.push(rust_file(&header, "mod.rs", "mod.rs", context)?);

    let envelopes = spec
        .envelopes
        .iter()
        .map(envelope_context)
        .collect::<Result<Vec<_>>>()?;
    let imports = envelope_imports(&spec.envelopes);
    let context = context! { service, imports, envelopes };
    files.push(rust_file(&header, "envelopes.rs", "envelopes.rs", context)?);

    for queue in &queues {
        let path = format!("{}.rs", queue.module.trim_start_matches("r#"));
        files.push(rust_file(&header, &path, "queue.rs", context! { queue })?);
    }
    if !spec.pipelines.is_empty() {
        let pipelines: Vec<PipelineContext> = spec.pipelines.iter().map(pipeline_context).collect();
        let context = context! { service, pipelines };
        files.push(rust_file(&header, "pipelines.rs", "pipelines.rs", context)?);
    }
    Ok(files)
}

/// One file of the tree: `template` rendered with `context`, laid out, under `header`.
fn rust_file(
    header: &str,
    path: &str,
    template: &'static str,
    context: Value,
) -> Result<GeneratedFile> {
    let source = render(template, context)?;
    let contents = format!("{header}\n{}", layout::format(path, &source)?);
    Ok(GeneratedFile::new(path, contents))
}

/// The PostgreSQL items of mod.rs.
#[derive(Serialize)]
struct PostgresContext {
    schema: String,
    pool_size: u32,
    /// What mod.rs imports from `queuegen_runtime::postgres`.
    imports: Vec<&'static str>,
    /// Whether a queue has `results: postgres`.
    results: bool,
    /// The modules of the queues with `outbox: true`, in spec order; no
    /// outbox items when none.
    outbox: Vec<String>,
}

fn postgres_context(spec: &Spec, queues: &[QueueContext]) -> Option<PostgresContext> {
    let settings = spec.postgres.as_ref()?;
    let outbox: Vec<String> = queues
        .iter()
        .filter(|q| q.outbox)
        .map(|q| q.module.clone())
        .collect();
    Some(PostgresContext {
        schema: settings.schema.clone(),
        pool_size: settings.pool_size,
        imports: if outbox.is_empty() {
            vec!["Postgres"]
        } else {
            vec!["OutboxPublisher", "Postgres"]
        },
        results: spec
            .queues
            .iter()
            .any(|q| q.results == Some(ResultStore::Postgres)),
        outbox,
    })
}

#[derive(Serialize)]
struct EnvelopeContext {
    name: String,
    schema: u32,
    accepts: Vec<u32>,
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
    /// The spec's values, for the compile-time check that the derive
    /// writes exactly these.
    wire_values: Vec<String>,
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

/// One queue as the templates see it: names, flags and lists; `CONFIG`'s
/// value is the `QueueConfig` the CLI builds, rendered as Rust.
#[derive(Serialize)]
pub(crate) struct QueueContext {
    pub name: String,
    pub module: String,
    pub envelope: String,
    /// Type name of the handler a `--stubs` skeleton declares, e.g. `OcrHandler`.
    pub handler_type: String,
    partitions: u16,
    group: String,
    retry_max_attempts: u32,
    /// `CONFIG`'s value: [`runtime_config::queue_config`] as a Rust expression.
    config: String,
    /// What the module imports from `queuegen_runtime`, sorted.
    runtime_imports: Vec<&'static str>,
    /// The `QueueConfig` sections it imports from `queuegen_runtime::config`, sorted.
    config_imports: Vec<&'static str>,
    /// What it imports from `queuegen_runtime::postgres`; empty when none.
    postgres_imports: Vec<&'static str>,
    /// The priority lanes, one const each in `mod lanes`.
    lanes: Vec<LaneContext>,
    default_lane_name: String,
    /// `results: postgres`: the module has `results`, the stub works in a transaction.
    pub results_postgres: bool,
    /// `outbox: true`: the module has `outbox`.
    pub outbox: bool,
    /// The schedules publishing to this queue, one const each.
    schedules: Vec<ScheduleContext>,
    /// Whether one of them is a `cron` (its strings need `Cow`).
    schedule_cron: bool,
    /// Set when the queue is a stage of a pipeline: its handler returns
    /// what it hands on.
    pub stage: Option<StageContext>,
}

/// A queue as a pipeline stage: what its handler hands on, typed.
#[derive(Serialize)]
pub(crate) struct StageContext {
    pipeline: String,
    /// The function of the `pipelines` module that builds the pipeline.
    pipeline_fn: String,
    first: bool,
    /// A join: its handler also receives the run's summary.
    pub join: bool,
    /// The stages of its `then`: one `Vec` field each of the module's `Next`.
    then: Vec<NextContext>,
    /// The first stage's: the joins, one envelope field each of `Next`.
    joins: Vec<NextContext>,
    max_children: u32,
    /// Envelopes `Next` names besides the queue's own, sorted, for the `use`.
    other_envelopes: Vec<String>,
}

/// One field of a stage's `Next`: a stage handed to.
#[derive(Serialize)]
struct NextContext {
    stage: String,
    field: String,
    envelope: String,
}

/// One pipeline's graph, for `pipelines.rs`.
#[derive(Serialize)]
struct PipelineContext {
    name: String,
    function: String,
    first: String,
    /// `keep` as a Rust `Duration` expression.
    keep: String,
    stages: Vec<PipelineStageContext>,
    /// The stages' queue modules, in stage order.
    modules: Vec<String>,
    /// The graph in words, for the function's doc.
    describe: String,
}

#[derive(Serialize)]
struct PipelineStageContext {
    queue: String,
    then: Vec<String>,
    max_children: u32,
    /// `(after, the OnDeadLetter variant)` for a join.
    join: Option<(Vec<String>, &'static str)>,
}

fn pipeline_context(pipeline: &Pipeline) -> PipelineContext {
    let describe = pipeline
        .stages
        .iter()
        .filter_map(|stage| {
            if let Some(join) = &stage.join {
                Some(format!("{} joins {}", stage.queue, join.after.join(", ")))
            } else if !stage.then.is_empty() {
                Some(format!(
                    "{} hands on to {}",
                    stage.queue,
                    stage.then.join(", ")
                ))
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    PipelineContext {
        name: pipeline.name.clone(),
        function: module_name(&pipeline.name),
        first: pipeline.first.clone(),
        keep: rust_value::source(&pipeline.keep),
        stages: pipeline
            .stages
            .iter()
            .map(|stage| PipelineStageContext {
                queue: stage.queue.clone(),
                then: stage.then.clone(),
                max_children: stage.max_children,
                join: stage.join.as_ref().map(|join| {
                    let policy = match join.on_dead_letter {
                        OnDeadLetter::Fail => "Fail",
                        OnDeadLetter::Continue => "Continue",
                    };
                    (join.after.clone(), policy)
                }),
            })
            .collect(),
        modules: pipeline
            .stages
            .iter()
            .map(|stage| module_name(&stage.queue))
            .collect(),
        describe,
    }
}

fn stage_context(spec: &Spec, queue: &Queue) -> Option<StageContext> {
    let pipeline = spec.pipeline_of(&queue.name)?;
    let stage = pipeline.stage(&queue.name)?;
    let next = |stage: &str| NextContext {
        stage: stage.to_owned(),
        field: module_name(stage),
        envelope: spec
            .queue(stage)
            .map(|q| q.envelope.clone())
            .expect("check: a stage is a queue"),
    };
    let first = pipeline.first == queue.name;
    let then: Vec<NextContext> = stage.then.iter().map(|s| next(s)).collect();
    let joins: Vec<NextContext> = if first {
        pipeline.joins().map(|(s, _)| next(&s.queue)).collect()
    } else {
        Vec::new()
    };
    let mut other_envelopes: Vec<String> = then
        .iter()
        .chain(&joins)
        .map(|n| n.envelope.clone())
        .filter(|e| *e != queue.envelope)
        .collect();
    other_envelopes.sort_unstable();
    other_envelopes.dedup();
    Some(StageContext {
        pipeline: pipeline.name.clone(),
        pipeline_fn: module_name(&pipeline.name),
        first,
        join: stage.join.is_some(),
        then,
        joins,
        max_children: stage.max_children,
        other_envelopes,
    })
}

#[derive(Serialize)]
struct LaneContext {
    /// The const's name, e.g. `HIGH`.
    ident: String,
    name: String,
}

/// One `Schedule` const.
#[derive(Serialize)]
struct ScheduleContext {
    name: String,
    ident: String,
    /// The cadence in words, for the const's doc.
    describe: String,
    envelope_type: String,
    schema: u32,
    /// `Some` for a cron schedule, else `every` is set.
    cron: Option<CronContext>,
    /// The period of an `every` schedule, as a Rust `Duration` expression.
    every: Option<String>,
    tenant: String,
    body: Vec<(String, String)>,
    /// The `Missed` variant.
    missed: &'static str,
    /// What happens to a missed tick, for the const's doc.
    missed_doc: &'static str,
    /// A Rust `Duration` expression.
    grace: String,
}

#[derive(Serialize)]
struct CronContext {
    expression: String,
    timezone: String,
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
    let schedules: Vec<ScheduleContext> = spec
        .schedules_of(&queue.name)
        .map(|s| schedule_context(spec, queue, s))
        .collect();
    let stage = stage_context(spec, queue);
    QueueContext {
        schedule_cron: schedules.iter().any(|s| s.cron.is_some()),
        runtime_imports: runtime_imports(queue, !schedules.is_empty(), stage.is_some()),
        stage,
        config_imports: config_imports(queue),
        schedules,
        name: queue.name.clone(),
        module: module_name(&queue.name),
        envelope: queue.envelope.clone(),
        handler_type: format!("{}Handler", upper_camel(&queue.name)),
        partitions: queue.partitions,
        group: queue.group.name.clone(),
        retry_max_attempts: queue.retry.max_attempts,
        config: rust_value::source(&runtime_config::queue_config(spec, queue)),
        lanes: queue
            .lanes
            .iter()
            .map(|lane| LaneContext {
                ident: const_ident(&lane.name),
                name: lane.name.clone(),
            })
            .collect(),
        default_lane_name: queue
            .default_lane()
            .map_or_else(String::new, |lane| lane.name.clone()),
        results_postgres,
        outbox: queue.outbox,
        postgres_imports,
    }
}

/// The name of the const for a lane or schedule: `nightly-export` -> `NIGHTLY_EXPORT`.
fn const_ident(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// What the queue's module uses of `queuegen_runtime`, sorted.
fn runtime_imports(queue: &Queue, schedules: bool, stage: bool) -> Vec<&'static str> {
    let mut names = vec![
        "Jitter",
        "JobContext",
        "JobError",
        "Producer",
        "QueueConfig",
        "Redis",
        "Worker",
    ];
    // A stage's handler answers a `Step`; `Outcome` is only named in its docs.
    if !stage {
        names.push("Outcome");
    }
    if schedules {
        names.extend(["Cadence", "Missed", "Schedule", "Scheduler"]);
    }
    if !queue.lanes.is_empty() {
        names.push("Lane");
    }
    names.sort_unstable();
    names
}

/// The sections of `QueueConfig` that `CONFIG` spells, sorted.
fn config_imports(queue: &Queue) -> Vec<&'static str> {
    let mut names = vec![
        "AdmissionConfig",
        "Backoff",
        "ClaimConfig",
        "DeadLetterConfig",
        "DurabilityConfig",
        "EntryShape",
        "HandlerConfig",
        "PayloadConfig",
        "PoisonConfig",
        "RetentionConfig",
        "RetryConfig",
    ];
    if queue.dedup.is_some() {
        names.push("DedupConfig");
    }
    names.sort_unstable();
    names
}

fn schedule_context(spec: &Spec, queue: &Queue, schedule: &Schedule) -> ScheduleContext {
    let envelope = spec
        .envelope(&queue.envelope)
        .expect("the checked spec's queue names a declared envelope");
    let (cron, every) = match &schedule.cadence {
        Cadence::Cron {
            expression,
            timezone,
        } => (
            Some(CronContext {
                expression: expression.to_string(),
                timezone: timezone.to_string(),
            }),
            None,
        ),
        Cadence::Every(period) => (None, Some(rust_value::source(period))),
    };
    let (missed, missed_doc) = match schedule.missed {
        Missed::Skip => ("Skip", "skipped"),
        Missed::RunOnce => ("RunOnce", "run once"),
    };
    ScheduleContext {
        name: schedule.name.clone(),
        ident: const_ident(&schedule.name),
        describe: schedule.cadence.describe().replace('"', "`"),
        envelope_type: envelope.name.clone(),
        schema: envelope.schema,
        cron,
        every,
        tenant: schedule.tenant.clone(),
        body: schedule.body.clone(),
        missed,
        missed_doc,
        grace: rust_value::source(&schedule.grace),
    }
}

fn envelope_imports(envelopes: &[Envelope]) -> Vec<&'static str> {
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
        names.push("error::DecodeError");
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
    names
}

fn envelope_context(envelope: &Envelope) -> Result<EnvelopeContext> {
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
        accepts: envelope.accepts.clone(),
        also_accepts: {
            let older: Vec<String> = envelope
                .accepts
                .iter()
                .filter(|v| **v != envelope.schema)
                .map(u32::to_string)
                .collect();
            match older.len() {
                0 => String::new(),
                1 => format!("version {}", older[0]),
                _ => format!("versions {}", older.join(", ")),
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
                wire_values: values.clone(),
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
