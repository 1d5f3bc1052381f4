//! Pipelines: stages (queues of the spec) joined by `then` and joins, each stage read on its own, then the graph checked whole: one first stage, no cycle, no hand-off to a join, deduplicated hand-offs, and the queues of the stages that are handed jobs made fit to carry the run fields.

use std::time::Duration;

use crate::limits::{self, RUN_FIELDS};
use crate::model::{Envelope, Join, OnDeadLetter, Pipeline, Queue, Stage};
use crate::suggest;
use crate::units::{format_duration, format_size};
use crate::yaml::Node;

use super::format::{PIPELINE, STAGE};
use super::names;
use super::read::{entries, object, optional_entries, At, Ctx, Item, Object, Read};
use super::values;

/// Longest pipeline name: it is part of the keys of every run.
const MAX_NAME_BYTES: usize = 64;
/// A run's record is kept at least this long, so that `queuegen runs` can
/// show a run that just ended.
const MIN_KEEP: Duration = Duration::from_secs(60);
const DEFAULT_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
const DEFAULT_MAX_CHILDREN: u64 = 100;

/// What the pipelines can be checked against.
pub(crate) struct Known<'m> {
    /// Every queue name in `queues`, valid or not; `None` when `queues` is malformed.
    pub queue_names: Option<Vec<String>>,
    /// The queues that are valid.
    pub queues: Vec<&'m Queue>,
    /// The envelopes that are valid.
    pub envelopes: Vec<&'m Envelope>,
}

/// Reads `pipelines` (optional): the models when all are valid.
pub(crate) fn pipelines(
    ctx: &mut Ctx<'_>,
    spec: &Object<'_>,
    known: &Known<'_>,
) -> Option<Vec<Pipeline>> {
    let found = optional_entries(
        ctx,
        spec,
        "pipelines",
        "a mapping of pipeline names to pipelines",
        "write `pipelines:` as a mapping keyed by name, e.g. `documents: { stages: { ocr: { then: [index] }, index: {} } }`",
    )?;
    // Which pipeline claimed each queue first, and where.
    let mut claimed: Vec<(String, String, At)> = Vec::new();
    let mut collisions = Collisions::default();
    let written = Written {
        queues: spec.get("queues"),
        envelopes: spec.get("envelopes"),
        schedules: spec.get("schedules"),
    };
    let all: Vec<Option<Pipeline>> = found
        .iter()
        .map(|(name, it)| {
            let read = pipeline(ctx, name, it, known, &mut claimed);
            handed_on(ctx, name, &read.defs, &written, known, &mut collisions);
            read.model
        })
        .collect();
    all.into_iter().collect()
}

/// A stage as written: its key and the names its lists give, with where.
struct StageDef {
    queue: String,
    at: At,
    then: Vec<(String, At)>,
    join: Vec<(String, At)>,
    max_children: Read<u64>,
    on_dead_letter: Read<OnDeadLetter>,
}

/// A pipeline as read: its model when valid, and the stages that could be
/// read on their own, as written.
struct PipelineRead {
    model: Option<Pipeline>,
    defs: Vec<StageDef>,
}

fn pipeline(
    ctx: &mut Ctx<'_>,
    name: &str,
    item: &Item<'_>,
    known: &Known<'_>,
    claimed: &mut Vec<(String, String, At)>,
) -> PipelineRead {
    let mut name_ok = names::check_lower_name(ctx, &item.key(), name, "pipeline");
    if name_ok && name.len() > MAX_NAME_BYTES {
        ctx.error(
            &item.key(),
            format!(
                "pipeline name is {} bytes, more than {MAX_NAME_BYTES}",
                name.len()
            ),
            "shorten it: it is part of the keys of every run",
        );
        name_ok = false;
    }
    let p = object(ctx, item, &PIPELINE);
    let keep = p.read(ctx, "keep", values::duration);
    if let Read::Ok(keep) = keep {
        if keep < MIN_KEEP {
            ctx.error(
                &p.at("keep"),
                format!(
                    "keep {} is shorter than {}",
                    format_duration(keep),
                    format_duration(MIN_KEEP)
                ),
                "keep a run's record at least a minute after it ends, so `queuegen runs` can show it; days are usual, e.g. `keep: 7d`",
            );
        }
    }
    let stages = p.get("stages").and_then(|it| {
        entries(
            ctx,
            it,
            "a mapping of queue names to stages",
            "write `stages:` as a mapping keyed by queue name, e.g. `ocr: { then: [index] }`",
        )
    });
    let mut defs = Vec::new();
    let mut stages_ok = stages.is_some();
    for (queue, it) in stages.iter().flatten() {
        match stage(ctx, name, queue, it, known, claimed) {
            Some(def) => defs.push(def),
            None => stages_ok = false,
        }
    }
    if stages.as_ref().is_some_and(Vec::is_empty) {
        ctx.error(
            &p.at("stages"),
            "declares no stage",
            "name the queues of the pipeline, e.g. `stages: { ocr: { then: [index] }, index: {} }`",
        );
        stages_ok = false;
    }
    let graph_ok = stages_ok && references(ctx, &defs, known) && {
        let graph = Graph::new(&defs);
        graph.acyclic(ctx, &defs)
    };
    let first = if graph_ok {
        first_stage(ctx, &defs)
    } else {
        None
    };
    let stages: Option<Vec<Stage>> = defs.iter().map(model).collect();
    let model = match (name_ok, stages, first, keep.or(DEFAULT_KEEP)) {
        (true, Some(stages), Some(first), Some(keep)) => Some(Pipeline {
            name: name.to_owned(),
            stages,
            first,
            keep,
        }),
        _ => None,
    };
    PipelineRead { model, defs }
}

/// One stage on its own: its queue exists and is no other pipeline's, and
/// its keys make sense together.
fn stage(
    ctx: &mut Ctx<'_>,
    pipeline: &str,
    queue: &str,
    item: &Item<'_>,
    known: &Known<'_>,
    claimed: &mut Vec<(String, String, At)>,
) -> Option<StageDef> {
    let mut ok = true;
    if let Some(declared) = &known.queue_names {
        if !declared.iter().any(|q| q == queue) {
            let help = suggest::help(
                queue,
                declared.iter().map(String::as_str),
                "declared queues are",
            );
            ctx.error(
                &item.key(),
                format!("no queue named `{queue}`"),
                format!("{help}; a stage is a queue of this spec, declared under `queues`"),
            );
            ok = false;
        }
    }
    match claimed.iter().find(|(q, _, _)| q == queue) {
        Some((_, other, first)) => {
            let first = ctx.position(first);
            ctx.error(
                &item.key(),
                format!(
                    "queue `{queue}` is already a stage of pipeline `{other}` (line {})",
                    first.line
                ),
                "a queue is a stage of one pipeline: its handler's return type names the stages it hands on to; declare a second queue for the other pipeline",
            );
            ok = false;
        }
        None => claimed.push((queue.to_owned(), pipeline.to_owned(), item.key())),
    }
    let s = object(ctx, item, &STAGE);
    let then = names_list(ctx, &s, "then", "`then: [index, thumbnail]`");
    let join = names_list(ctx, &s, "join", "`join: [index, thumbnail]`");
    if matches!(&join, Read::Ok(names) if names.is_empty()) {
        ctx.error(
            &s.at("join"),
            "join names no stage",
            "name the stages whose jobs this one waits for, e.g. `join: [index, thumbnail]`, or remove `join`",
        );
        ok = false;
    }
    let max_children = s.count(
        ctx,
        "max_children",
        "max_children bounds how many jobs one job hands on",
    );
    let on_dead_letter = s.choice(
        ctx,
        "on_dead_letter",
        "dead-letter policy",
        &[OnDeadLetter::Fail, OnDeadLetter::Continue],
    );
    // A `then` that is present but invalid was reported already.
    let hands_on = match &then {
        Read::Ok(names) => !names.is_empty(),
        Read::Bad => true,
        Read::Absent => false,
    };
    if max_children.is_present() && !hands_on {
        ctx.error(
            &s.at("max_children"),
            "max_children without `then`",
            "max_children bounds what a job hands on to the stages in `then`; add `then`, or remove max_children",
        );
        ok = false;
    }
    if on_dead_letter.is_present() && !join.is_present() {
        ctx.error(
            &s.at("on_dead_letter"),
            "on_dead_letter without `join`",
            "on_dead_letter says what a dead-lettered job of a join's stages does to the run; add `join`, or remove on_dead_letter",
        );
        ok = false;
    }
    let (Some(then), Some(join)) = (then.or(Vec::new()), join.or(Vec::new())) else {
        return None;
    };
    ok.then_some(StageDef {
        queue: queue.to_owned(),
        at: item.key(),
        then,
        join,
        max_children,
        on_dead_letter,
    })
}

/// A list of stage names at `key`, each a valid name given once.
fn names_list(
    ctx: &mut Ctx<'_>,
    s: &Object<'_>,
    key: &str,
    example: &str,
) -> Read<Vec<(String, At)>> {
    s.read(ctx, key, |ctx, it| {
        let items = values::list(ctx, it, example)?;
        let mut names: Vec<(String, At)> = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in &items {
            let Some(name) = values::string(ctx, item) else {
                ok = false;
                continue;
            };
            if names.iter().any(|(n, _)| n == name) {
                ctx.error(
                    &item.value(),
                    format!("`{name}` is named twice in `{key}`"),
                    "name each stage once",
                );
                ok = false;
                continue;
            }
            names.push((name.to_owned(), item.value()));
        }
        ok.then_some(names)
    })
}

/// Every name in a `then` or `join` is a stage of this pipeline; no `then`
/// leads to a join stage; every stage a `then` leads to deduplicates.
fn references(ctx: &mut Ctx<'_>, defs: &[StageDef], known: &Known<'_>) -> bool {
    let stage_names: Vec<&str> = defs.iter().map(|d| d.queue.as_str()).collect();
    let is_join = |name: &str| defs.iter().any(|d| d.queue == name && !d.join.is_empty());
    let mut ok = true;
    for def in defs {
        for (key, list) in [("then", &def.then), ("join", &def.join)] {
            for (name, at) in list {
                if !stage_names.contains(&name.as_str()) {
                    let also = match &known.queue_names {
                        Some(declared) if declared.contains(name) => format!(
                            "; queue `{name}` is not a stage of this pipeline: add `{name}: {{}}` to its `stages`"
                        ),
                        _ => String::new(),
                    };
                    let help = suggest::help(name, stage_names.iter().copied(), "its stages are");
                    ctx.error(
                        at,
                        format!("`{key}` names `{name}`, which is not a stage of this pipeline"),
                        format!("{help}{also}"),
                    );
                    ok = false;
                    continue;
                }
                if key == "then" && is_join(name) {
                    ctx.error(
                        at,
                        format!("`then` hands jobs to `{name}`, which is a join"),
                        format!(
                            "a join's job is published once, when what it waits for has ended; remove `{name}` from `then`, and add `{}` to its `join` if it should wait for this stage",
                            def.queue
                        ),
                    );
                    ok = false;
                    continue;
                }
                if key == "then" {
                    ok &= deduplicates(ctx, &def.queue, name, at, known);
                }
            }
        }
    }
    ok
}

/// A stage that jobs are handed to must deduplicate: a redelivered parent
/// hands on the same jobs (the same derived IDs) again.
fn deduplicates(ctx: &mut Ctx<'_>, parent: &str, child: &str, at: &At, known: &Known<'_>) -> bool {
    // A queue that is declared but invalid was reported where it is.
    let Some(queue) = known.queues.iter().find(|q| q.name == child) else {
        return true;
    };
    if queue.dedup.is_some() {
        return true;
    }
    ctx.error(
        at,
        format!("`{parent}` hands jobs to `{child}`, and queue `{child}` has no `dedup`"),
        format!(
            "add `dedup: {{ window: 1d }}` to queue `{child}`: a `{parent}` job delivered again hands on the same jobs again, and the window must absorb them for as long as that can happen"
        ),
    );
    false
}

/// The spec as written, where the checks of the stages' queues and
/// envelopes point.
struct Written<'w, 'a> {
    queues: Option<&'w Item<'a>>,
    envelopes: Option<&'w Item<'a>>,
    schedules: Option<&'w Item<'a>>,
}

/// The body fields already reported as colliding with a run field, by
/// envelope: an envelope carried by several stages is reported once.
#[derive(Default)]
struct Collisions(Vec<(String, String)>);

/// The queue of every stage handed jobs by another (a `then` target, and
/// every join) receives entries with the run fields after the header: its
/// envelope must not use their names, its `payload.max_bytes` must count
/// them, and a join's queue is not partitioned by `partition_by`.
fn handed_on(
    ctx: &mut Ctx<'_>,
    pipeline: &str,
    defs: &[StageDef],
    written: &Written<'_, '_>,
    known: &Known<'_>,
    collisions: &mut Collisions,
) {
    let handed = |def: &StageDef| {
        !def.join.is_empty()
            || defs
                .iter()
                .any(|d| d.then.iter().any(|(name, _)| *name == def.queue))
    };
    for def in defs.iter().filter(|d| handed(d)) {
        let queue = &def.queue;
        // A stage that is no declared queue was reported where it is.
        let Some(queue_item) = written.queues.and_then(|q| find(q, &[queue])) else {
            continue;
        };
        if !def.join.is_empty() {
            if let Some(partition_by) = find(&queue_item, &["partition_by"]) {
                ctx.error(
                    &partition_by.value(),
                    format!(
                        "partition_by is never used: queue `{queue}` is a join of pipeline `{pipeline}`"
                    ),
                    "remove partition_by: a join's job goes to the partition its run ID hashes to",
                );
            }
        }
        scheduled_into(ctx, pipeline, queue, written);
        let envelope = find(&queue_item, &["envelope"]).and_then(|it| it.node.as_str());
        if let Some(envelope) = envelope {
            run_field_collisions(ctx, pipeline, queue, envelope, written, collisions);
        }
        let model = known.queues.iter().find(|q| q.name == *queue);
        let envelope = model.and_then(|q| known.envelopes.iter().find(|e| e.name == q.envelope));
        if let (Some(model), Some(envelope)) = (model, envelope) {
            payload_counts_run_fields(ctx, pipeline, model, envelope, &queue_item);
        }
    }
}

/// A schedule's jobs carry no run: published into a stage handed jobs, its
/// worker would dead-letter every one (`PipelineError::NoRun`).
fn scheduled_into(ctx: &mut Ctx<'_>, pipeline: &str, queue: &str, written: &Written<'_, '_>) {
    let Some(Node::Map(schedules)) = written.schedules.map(|s| &s.node) else {
        return;
    };
    let schedules_item = written.schedules.expect("matched above");
    for (key, _) in schedules.iter() {
        let name = key.key_text();
        let Some(target) = find(schedules_item, &[&name, "queue"]) else {
            continue;
        };
        if target.node.as_str() == Some(queue) {
            ctx.error(
                &target.value(),
                format!(
                    "schedule `{name}` publishes to queue `{queue}`, a stage of pipeline `{pipeline}` that is handed jobs: its jobs would carry no run, and the stage's worker dead-letters a job without one"
                ),
                "schedule the pipeline's first stage (each of its jobs starts a run), or a queue outside the pipeline",
            );
        }
    }
}

/// A body field named as a run field would be read as the job's run.
fn run_field_collisions(
    ctx: &mut Ctx<'_>,
    pipeline: &str,
    queue: &str,
    envelope: &str,
    written: &Written<'_, '_>,
    collisions: &mut Collisions,
) {
    let Some(fields) = written
        .envelopes
        .and_then(|e| find(e, &[envelope, "fields"]))
    else {
        return;
    };
    let names = run_field_names();
    for run_field in RUN_FIELDS {
        let Some(field) = find(&fields, &[run_field.name]) else {
            continue;
        };
        let reported = (envelope.to_owned(), run_field.name.to_owned());
        if collisions.0.contains(&reported) {
            continue;
        }
        collisions.0.push(reported);
        ctx.error(
            &field.key(),
            format!(
                "field `{}` collides with the run field of the same name: queue `{queue}` carries `{envelope}`, and is handed jobs in pipeline `{pipeline}`",
                run_field.name
            ),
            format!(
                "rename the field: a job a pipeline stage hands on carries {names} after its header"
            ),
        );
    }
}

/// The payload bound of a stage that is handed jobs: the queue's own check
/// counted the header and the body; its entries also carry the run fields.
fn payload_counts_run_fields(
    ctx: &mut Ctx<'_>,
    pipeline: &str,
    queue: &Queue,
    envelope: &Envelope,
    queue_item: &Item<'_>,
) {
    let header = limits::header_max_bytes(&envelope.name);
    let run = limits::run_fields_max_bytes();
    let (body, unbounded) = limits::body_max_bytes(envelope);
    let needed = header + run + body;
    let max_bytes = queue.payload.max_bytes;
    if needed <= max_bytes {
        return;
    }
    let path = format!("{}.payload.max_bytes", queue_item.path);
    let (at, given) = match find(queue_item, &["payload", "max_bytes"]) {
        Some(it) => (it.value(), true),
        None => {
            let near = find(queue_item, &["payload"]).unwrap_or_else(|| queue_item.clone());
            (near.key().about(path), false)
        }
    };
    let not_counted = if unbounded.is_empty() {
        String::new()
    } else {
        format!(
            ", not counting {} (no max_bytes)",
            unbounded
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let names = run_field_names();
    ctx.error(
        &at,
        format!(
            "{}{} is less than the {needed} bytes one {} entry can need: {header} for the header fields + {run} for the run fields + {body} for the body fields{not_counted}; the run fields ({names}) are counted because queue `{}` is a stage of pipeline `{pipeline}` that is handed jobs",
            format_size(max_bytes),
            if given { "" } else { " (the default)" },
            envelope.name,
            queue.name,
        ),
        format!(
            "raise payload.max_bytes to at least {needed}, or lower the fields' max_bytes (the allowance of each header and run field is listed in docs/spec.md)"
        ),
    );
}

/// `` `run_id` and `parent` ``, from [`RUN_FIELDS`].
fn run_field_names() -> String {
    RUN_FIELDS
        .iter()
        .map(|f| format!("`{}`", f.name))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The entry at `keys` under `from`, following each key's first
/// occurrence; `None` when one is missing or not a mapping.
fn find<'a>(from: &Item<'a>, keys: &[&str]) -> Option<Item<'a>> {
    let mut item = from.clone();
    for key in keys {
        let Node::Map(pairs) = item.node else {
            return None;
        };
        let (_, node) = pairs.iter().find(|(k, _)| k.key_text() == *key)?;
        item = item.entry(key, 0, node);
    }
    Some(item)
}

/// The stages as nodes, and "runs after" edges: a stage to each in its
/// `then`, and each stage a join waits for to the join.
struct Graph {
    /// `(from, to, written at)`: the place is the name in the list that
    /// makes the edge.
    edges: Vec<(usize, usize, At)>,
    nodes: usize,
}

impl Graph {
    fn new(defs: &[StageDef]) -> Graph {
        let index = |name: &str| defs.iter().position(|d| d.queue == name);
        let mut edges = Vec::new();
        for (i, def) in defs.iter().enumerate() {
            for (name, at) in &def.then {
                if let Some(to) = index(name) {
                    edges.push((i, to, at.clone()));
                }
            }
            for (name, at) in &def.join {
                if let Some(from) = index(name) {
                    edges.push((from, i, at.clone()));
                }
            }
        }
        Graph {
            edges,
            nodes: defs.len(),
        }
    }

    fn after(&self, node: usize) -> impl Iterator<Item = (usize, &At)> {
        self.edges
            .iter()
            .filter(move |(from, _, _)| *from == node)
            .map(|(_, to, at)| (*to, at))
    }

    /// Reports each cycle once, at the name that closes it, with its path.
    fn acyclic(&self, ctx: &mut Ctx<'_>, defs: &[StageDef]) -> bool {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnPath,
            Done,
        }
        let mut marks = vec![Mark::New; self.nodes];
        let mut ok = true;
        for start in 0..self.nodes {
            if marks[start] != Mark::New {
                continue;
            }
            // Depth first, with an explicit stack of (node, next edge to try).
            let mut path: Vec<usize> = vec![start];
            let mut next: Vec<usize> = vec![0];
            marks[start] = Mark::OnPath;
            while let Some(&node) = path.last() {
                let tried = next.last_mut().expect("one cursor per node on the path");
                let Some((to, at)) = self.after(node).nth(*tried) else {
                    marks[node] = Mark::Done;
                    path.pop();
                    next.pop();
                    continue;
                };
                *tried += 1;
                match marks[to] {
                    Mark::New => {
                        marks[to] = Mark::OnPath;
                        path.push(to);
                        next.push(0);
                    }
                    Mark::OnPath => {
                        let from = path.iter().position(|&n| n == to).unwrap_or(0);
                        let cycle: Vec<&str> = path[from..]
                            .iter()
                            .chain(std::iter::once(&to))
                            .map(|&n| defs[n].queue.as_str())
                            .collect();
                        report_cycle(ctx, at, defs, node, to, &cycle.join(" → "));
                        ok = false;
                    }
                    Mark::Done => {}
                }
            }
        }
        ok
    }
}

fn report_cycle(
    ctx: &mut Ctx<'_>,
    at: &At,
    defs: &[StageDef],
    from: usize,
    to: usize,
    cycle: &str,
) {
    // `then` never leads to a join (checked before), so an edge into a join
    // is written in the join's own list.
    let into_join = !defs[to].join.is_empty();
    let (from, to) = (&defs[from].queue, &defs[to].queue);
    if into_join && from == to {
        ctx.error(
            at,
            format!("join `{to}` waits for itself"),
            format!("remove `{to}` from its own `join`"),
        );
    } else if into_join {
        ctx.error(
            at,
            format!("join `{to}` waits for `{from}`, which runs only after `{to}`: {cycle}"),
            format!(
                "a join waits for stages that lead to it; remove `{from}` from `{to}`'s `join`, or the `then` that leads from `{to}` to `{from}`"
            ),
        );
    } else if from == to {
        ctx.error(
            at,
            format!("`{from}` hands jobs to itself"),
            "a pipeline's stages run forward; to repeat work, hand on to a stage of its own, or let the handler retry",
        );
    } else {
        ctx.error(
            at,
            format!("`then` closes a cycle: {cycle}"),
            format!(
                "a pipeline's stages run forward; remove `{to}` from `{from}`'s `then`, or start a new run from the handler"
            ),
        );
    }
}

/// The one stage nothing leads to (the graph is acyclic and not empty).
fn first_stage(ctx: &mut Ctx<'_>, defs: &[StageDef]) -> Option<String> {
    let led_to = |name: &str| {
        defs.iter().any(|d| {
            d.then.iter().any(|(n, _)| n == name) || (d.queue == name && !d.join.is_empty())
        })
    };
    let firsts: Vec<&StageDef> = defs.iter().filter(|d| !led_to(&d.queue)).collect();
    let (first, others) = firsts.split_first()?;
    for other in others {
        ctx.error(
            &other.at,
            format!(
                "`{}` starts the pipeline too: no stage hands it jobs, and `{}` already starts it",
                other.queue, first.queue
            ),
            format!(
                "a pipeline starts at one stage; name `{}` in a stage's `then` (or give it a `join`), or move it to a pipeline of its own",
                other.queue
            ),
        );
    }
    others.is_empty().then(|| first.queue.clone())
}

fn model(def: &StageDef) -> Option<Stage> {
    let names = |list: &[(String, At)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let join = if def.join.is_empty() {
        None
    } else {
        Some(Join {
            after: names(&def.join),
            on_dead_letter: def.on_dead_letter.clone().or(OnDeadLetter::Fail)?,
        })
    };
    Some(Stage {
        queue: def.queue.clone(),
        then: names(&def.then),
        // Within u32: the format bounds it at library::MAX_CHILDREN.
        max_children: def.max_children.clone().or(DEFAULT_MAX_CHILDREN)? as u32,
        join,
    })
}
