//! What changing a spec from OLD to NEW does to compatibility, for code review (`queuegen diff-spec`).
//!
//! Each finding is `breaking` (entries would be lost, misread or
//! mis-ordered whatever the deploy order), `rollout` (safe only if deployed
//! in a certain order or once old entries are gone) or `info`.

use serde::Serialize;

use crate::compat::{self, and_list, backticked, definition, reads_all_of};
use crate::evolution::VersionField;
use crate::model::{
    EntryShape, Envelope, Join, Lane, OnDeadLetter, Pipeline, Queue, ResultStore, Spec, Stage,
    TrimMode,
};
use crate::units::format_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impact {
    /// Entries would be lost, misread or mis-ordered whatever the deploy order.
    Breaking,
    /// Safe only when deployed in the order the message says, or once old
    /// entries are gone.
    Rollout,
    /// Worth knowing in review; needs nothing.
    Info,
}

impl Impact {
    pub fn as_str(self) -> &'static str {
        match self {
            Impact::Breaking => "breaking",
            Impact::Rollout => "rollout",
            Impact::Info => "info",
        }
    }
}

/// One consequence of the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Impact,
    /// Dotted path in NEW (in OLD for what NEW removed), e.g. `queues.ocr.partitions`.
    pub path: String,
    pub message: String,
}

/// How many findings of each severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub breaking: usize,
    pub rollout: usize,
    pub info: usize,
}

impl Summary {
    pub fn of(findings: &[Finding]) -> Summary {
        let count = |impact| findings.iter().filter(|f| f.severity == impact).count();
        Summary {
            breaking: count(Impact::Breaking),
            rollout: count(Impact::Rollout),
            info: count(Impact::Info),
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} breaking, {} rollout, {} info",
            self.breaking, self.rollout, self.info
        )
    }
}

/// Every finding, breaking first, then rollout, then info; within a
/// severity in the order of the specs (service, envelopes, queues,
/// schedules, pipelines).
pub fn diff(old: &Spec, new: &Spec) -> Vec<Finding> {
    let mut out = Findings::default();
    settings(&mut out, old, new);
    for envelope in &new.envelopes {
        match old.envelope(&envelope.name) {
            Some(before) => envelope_changes(&mut out, before, envelope),
            None => out.info(
                format!("envelopes.{}", envelope.name),
                format!(
                    "new envelope `{}` (schema {})",
                    envelope.name, envelope.schema
                ),
            ),
        }
    }
    for envelope in &old.envelopes {
        if new.envelope(&envelope.name).is_none() {
            out.rollout(
                format!("envelopes.{}", envelope.name),
                format!(
                    "envelope `{}` removed: its entries left in streams, retry schedules and dead-letter streams can no longer be decoded or replayed; remove it once none remain",
                    envelope.name
                ),
            );
        }
    }
    for queue in &new.queues {
        match old.queue(&queue.name) {
            Some(before) => {
                let envelopes = old
                    .envelope(&before.envelope)
                    .zip(new.envelope(&queue.envelope));
                queue_changes(&mut out, before, queue, envelopes)
            }
            None => out.info(
                format!("queues.{}", queue.name),
                format!(
                    "new queue `{}` carrying `{}` ({} {})",
                    queue.name,
                    queue.envelope,
                    queue.partitions,
                    if queue.partitions == 1 {
                        "partition"
                    } else {
                        "partitions"
                    }
                ),
            ),
        }
    }
    for queue in &old.queues {
        if new.queue(&queue.name).is_none() {
            out.rollout(
                format!("queues.{}", queue.name),
                format!(
                    "queue `{}` removed: its stream, pending entries, retries and dead letters are abandoned; stop its producers and drain it before deploying",
                    queue.name
                ),
            );
        }
    }
    schedule_changes(&mut out, old, new);
    pipeline_changes(&mut out, old, new);
    let mut findings = out.0;
    findings.sort_by_key(|f| f.severity);
    findings
}

/// Schedules: during a rolling deploy old and new workers both run their
/// own version of each schedule. A tick's marker is per schedule name,
/// tick time and queue partition, so a change of queue, cadence or name
/// can publish a tick under both versions until the old workers are gone.
fn schedule_changes(out: &mut Findings, old: &Spec, new: &Spec) {
    for schedule in &new.schedules {
        let path = format!("schedules.{}", schedule.name);
        let Some(before) = old.schedules.iter().find(|s| s.name == schedule.name) else {
            out.info(
                path,
                format!(
                    "new schedule `{}`: {} -> queue `{}` (a renamed schedule publishes under both names while old workers run)",
                    schedule.name,
                    schedule.cadence.describe(),
                    schedule.queue
                ),
            );
            continue;
        };
        if before.queue != schedule.queue {
            out.rollout(
                format!("{path}.queue"),
                format!(
                    "ticks move from queue `{}` to `{}`: until every worker runs the new code, a tick can be published to both",
                    before.queue, schedule.queue
                ),
            );
        }
        if before.cadence != schedule.cadence {
            out.rollout(
                path.clone(),
                format!(
                    "cadence changes from {} to {}: until every worker runs the new code, the ticks of both are published",
                    before.cadence.describe(),
                    schedule.cadence.describe()
                ),
            );
        }
        let changed: Vec<&str> = [
            ("tenant", before.tenant != schedule.tenant),
            ("body", before.body != schedule.body),
            ("missed", before.missed != schedule.missed),
            ("grace", before.grace != schedule.grace),
        ]
        .into_iter()
        .filter_map(|(key, differs)| differs.then_some(key))
        .collect();
        if !changed.is_empty() {
            out.info(
                path,
                format!(
                    "settings changed: {} (during the rollout a tick's job has whichever version publishes it first)",
                    changed.join(", ")
                ),
            );
        }
    }
    for schedule in &old.schedules {
        if !new.schedules.iter().any(|s| s.name == schedule.name) {
            out.rollout(
                format!("schedules.{}", schedule.name),
                format!(
                    "schedule `{}` removed: workers still running the old code keep publishing its ticks until they are replaced",
                    schedule.name
                ),
            );
        }
    }
}

/// Pipelines. Workers follow the graph they were built with, so a change
/// applies to the jobs handled after the deploy; a run in flight keeps what
/// was counted for it. Each join keeps a run's state in its own partition:
/// the run's first job opens it there (before the deploy, for a run in
/// flight), each job settling there adds the jobs it hands on that lead to
/// the join, and the join's job is published once nothing it counted is
/// outstanding. The state expires `keep` after the run ended there, and
/// never before: a run that cannot end there stays in Redis.
fn pipeline_changes(out: &mut Findings, old: &Spec, new: &Spec) {
    for pipeline in &new.pipelines {
        let path = format!("pipelines.{}", pipeline.name);
        match old.pipelines.iter().find(|p| p.name == pipeline.name) {
            Some(before) => pipeline_graph_changes(out, &path, before, pipeline),
            None => {
                let joins: Vec<String> = pipeline.joins().map(|(s, _)| s.queue.clone()).collect();
                let joins = match joins.len() {
                    0 => String::new(),
                    1 => format!(", join {}", backticked(&joins)),
                    _ => format!(", joins {}", backticked(&joins)),
                };
                out.info(
                    path,
                    format!(
                        "new pipeline `{}`: each job of `{}` handled after the deploy starts a run ({} {}{joins})",
                        pipeline.name,
                        pipeline.first,
                        pipeline.stages.len(),
                        if pipeline.stages.len() == 1 { "stage" } else { "stages" },
                    ),
                );
            }
        }
        newly_handed_jobs(out, old, pipeline);
    }
    for pipeline in &old.pipelines {
        if new.pipelines.iter().any(|p| p.name == pipeline.name) {
            continue;
        }
        let path = format!("pipelines.{}", pipeline.name);
        let joins: Vec<String> = pipeline.joins().map(|(s, _)| s.queue.clone()).collect();
        if joins.is_empty() {
            out.rollout(
                path,
                format!(
                    "pipeline `{}` removed: its stages stop handing jobs on, so runs in flight stop where they are (a job handled after the deploy hands nothing on); stop publishing to `{}` and let the runs in flight end before deploying",
                    pipeline.name, pipeline.first
                ),
            );
        } else {
            out.rollout(
                path,
                format!(
                    "pipeline `{}` removed: runs in flight are abandoned at {} (the join's job is never published for them), and a run's state there expires after keep ({}) only once the run has ended there, so theirs stays in Redis; stop publishing to `{}` and let the runs in flight end (drain the pipeline) before deploying",
                    pipeline.name,
                    backticked(&joins),
                    format_duration(pipeline.keep),
                    pipeline.first
                ),
            );
        }
    }
}

/// A queue whose jobs were published by producers becomes a stage that
/// is handed jobs: its worker needs each job's run, and dead-letters one
/// that has none.
fn newly_handed_jobs(out: &mut Findings, old: &Spec, pipeline: &Pipeline) {
    let handed_in_old = |queue: &str| old.pipeline_of(queue).is_some_and(|p| p.first != queue);
    for stage in &pipeline.stages {
        let queue = &stage.queue;
        if *queue == pipeline.first || old.queue(queue).is_none() || handed_in_old(queue) {
            continue;
        }
        out.rollout(
            format!("pipelines.{}.stages.{queue}", pipeline.name),
            format!(
                "queue `{queue}` is handed jobs by pipeline `{}` from the deploy on, and its workers dead-letter a job that carries no run (`run_id`): every job already in its stream, retry schedule or dead letters, and any its producers still publish; stop its producers and drain it before deploying",
                pipeline.name
            ),
        );
    }
}

/// The changes of a pipeline that both specs have.
fn pipeline_graph_changes(out: &mut Findings, path: &str, old: &Pipeline, new: &Pipeline) {
    if old.keep != new.keep {
        out.info(
            format!("{path}.keep"),
            format!(
                "keep {} → {}: applies to runs that end after the deploy; a run that ended before it keeps its record for {}",
                format_duration(old.keep),
                format_duration(new.keep),
                format_duration(old.keep)
            ),
        );
    }
    if old.first != new.first {
        // The new first stage was handed jobs before: those already handed
        // on start runs of their own.
        if old.stage(&new.first).is_some() {
            out.rollout(
                path,
                format!(
                    "first stage `{}` → `{}`: runs start at `{}` from the deploy on; a job of `{}` already handed on by a run in flight starts a run of its own, and the joins of its old run that counted on it never end there; let the runs in flight end first",
                    old.first, new.first, new.first, new.first
                ),
            );
        } else {
            out.info(
                path,
                format!(
                    "first stage `{}` → `{}`: runs start at `{}` from the deploy on",
                    old.first, new.first, new.first
                ),
            );
        }
    }
    for stage in &new.stages {
        let at = format!("{path}.stages.{}", stage.queue);
        match old.stage(&stage.queue) {
            None => stage_added(out, &at, new, stage),
            Some(before) => stage_changed(out, &at, old, new, before, stage),
        }
    }
    for stage in &old.stages {
        if new.stage(&stage.queue).is_none() {
            let at = format!("{path}.stages.{}", stage.queue);
            stage_removed(out, &at, old, stage);
        }
    }
}

fn stage_added(out: &mut Findings, path: &str, new: &Pipeline, stage: &Stage) {
    if stage.join.is_some() {
        join_added(out, path, &format!("join `{}` added", stage.queue));
    } else if stage.queue != new.first {
        let parents: Vec<String> = new
            .stages
            .iter()
            .filter(|s| s.then.contains(&stage.queue))
            .map(|s| format!("`{}`", s.queue))
            .collect();
        out.info(
            path,
            format!(
                "stage `{}` added: jobs of {} handled after the deploy hand jobs on to it",
                stage.queue,
                and_list(parents)
            ),
        );
    }
    // A new first stage: said with the first stage's change.
}

/// A stage that is a join from the deploy on, added or made one.
fn join_added(out: &mut Findings, path: &str, what: &str) {
    out.rollout(
        path,
        format!(
            "{what}: the runs in flight were opened at their joins by their first job, before the deploy, so it never runs for them, and what their later jobs settle there never ends, so it stays in Redis; let the runs in flight end first"
        ),
    );
}

fn stage_removed(out: &mut Findings, path: &str, old: &Pipeline, stage: &Stage) {
    let name = &stage.queue;
    if stage.join.is_some() {
        join_removed(out, path, old, name, &format!("join `{name}` removed"));
        return;
    }
    if *name == old.first {
        // Said with the first stage's change.
        return;
    }
    let joins: Vec<String> = old.settles_at(name).map(str::to_owned).collect();
    if joins.is_empty() {
        let then = if stage.then.is_empty() {
            String::new()
        } else {
            format!(
                "; those already handed to it hand nothing on to {} after the deploy",
                backticked(&stage.then)
            )
        };
        out.info(
            path,
            format!("stage `{name}` removed: no join counts on its jobs{then}"),
        );
    } else {
        out.rollout(
            path,
            format!(
                "stage `{name}` removed: its jobs are no longer settled at {}, where runs in flight count on them, so those runs never end there (the join's job is not published, and their state stays in Redis); let the runs in flight end first",
                backticked(&joins)
            ),
        );
    }
}

/// A join that is no longer one, removed or made a plain stage.
fn join_removed(out: &mut Findings, path: &str, old: &Pipeline, join: &str, what: &str) {
    // The joins after this one count on its job from the run's start.
    let after: Vec<String> = old.settles_at(join).map(str::to_owned).collect();
    let also = if after.is_empty() {
        String::new()
    } else {
        format!(
            ", and {} count on its job, which is never published, so they never end for them either",
            backticked(&after)
        )
    };
    out.rollout(
        path,
        format!(
            "{what}: runs in flight are abandoned there: its job is never published for them, and their state there expires only once a run has ended, so it stays in Redis{also}; let the runs in flight end first"
        ),
    );
}

fn stage_changed(
    out: &mut Findings,
    path: &str,
    old: &Pipeline,
    new: &Pipeline,
    before: &Stage,
    stage: &Stage,
) {
    let name = &stage.queue;
    // Hand-offs to or from a stage added or removed are said with it.
    for to in stage.then.iter().filter(|to| !before.then.contains(to)) {
        if old.stage(to).is_some() {
            out.info(
                format!("{path}.then"),
                format!(
                    "`{name}` hands jobs to `{to}` from the deploy on: jobs already handed on keep going, and a job of `{name}` delivered again after the deploy hands on per the new graph"
                ),
            );
        }
    }
    for to in before.then.iter().filter(|to| !stage.then.contains(to)) {
        if new.stage(to).is_some() {
            out.info(
                format!("{path}.then"),
                format!(
                    "`{name}` no longer hands jobs to `{to}`: jobs already handed on keep going, and a job of `{name}` delivered again after the deploy hands on per the new graph, nothing to `{to}`"
                ),
            );
        }
    }
    if !before.then.is_empty() && !stage.then.is_empty() {
        let (was, now) = (before.max_children, stage.max_children);
        if now < was {
            out.rollout(
                format!("{path}.max_children"),
                format!(
                    "max_children {was} → {now}: a job of `{name}` handled after the deploy that hands on more than {now} is dead-lettered (too_many_children), a job queued before it or delivered again after handing on more included (the children it handed on then keep going); make sure the handler hands on at most {now} before deploying"
                ),
            );
        } else if now > was {
            out.info(
                format!("{path}.max_children"),
                format!(
                    "max_children {was} → {now}: applies to the jobs of `{name}` handled after the deploy"
                ),
            );
        }
    }
    match (&before.join, &stage.join) {
        (Some(was), Some(now)) => join_changed(out, path, old, new, name, was, now),
        (None, Some(_)) => join_added(
            out,
            &format!("{path}.join"),
            &format!("`{name}` becomes a join"),
        ),
        (Some(_), None) => join_removed(
            out,
            &format!("{path}.join"),
            old,
            name,
            &format!("`{name}` is no longer a join"),
        ),
        (None, None) => {}
    }
}

fn join_changed(
    out: &mut Findings,
    path: &str,
    old: &Pipeline,
    new: &Pipeline,
    join: &str,
    was: &Join,
    now: &Join,
) {
    let added: Vec<&String> = now
        .after
        .iter()
        .filter(|s| !was.after.contains(s))
        .collect();
    let removed: Vec<&String> = was
        .after
        .iter()
        .filter(|s| !now.after.contains(s))
        .collect();
    if !added.is_empty() || !removed.is_empty() {
        let mut effects = Vec::new();
        for stage in added {
            effects.push(if old.leads_to_join(stage, join) {
                format!(
                    "`{stage}`, newly waited for, already led to it, so runs already open counted its jobs, and the summary names those that settle after the deploy"
                )
            } else {
                format!(
                    "`{stage}`, newly waited for, is not counted for runs already open: their join can run before their `{stage}` jobs end, and its summary leaves those out"
                )
            });
        }
        for stage in removed {
            if new.stage(stage).is_none() {
                // Said with the stage's removal.
                continue;
            }
            effects.push(if new.leads_to_join(stage, join) {
                format!(
                    "`{stage}`, no longer waited for, still settles there (it leads to a stage that is), left out of the summary"
                )
            } else {
                format!(
                    "`{stage}`, no longer waited for, no longer settles there: a run already open that counted a job of `{stage}` never runs the join, and its state there stays in Redis"
                )
            });
        }
        let effects = if effects.is_empty() {
            String::new()
        } else {
            format!("; {}", effects.join("; "))
        };
        out.rollout(
            format!("{path}.join"),
            format!(
                "join waits for [{}] → [{}]: runs in flight keep counting what their first stage registered when it opened them{effects}; runs started after the deploy wait for [{}]; deploy once the runs in flight have ended, or accept this for them",
                was.after.join(", "),
                now.after.join(", "),
                now.after.join(", ")
            ),
        );
    }
    if was.on_dead_letter != now.on_dead_letter {
        let what = match now.on_dead_letter {
            OnDeadLetter::Continue => format!(
                "which no longer fail their run at `{join}`; runs already failed there stay failed"
            ),
            OnDeadLetter::Fail => format!(
                "each of which fails its run at `{join}`, even a run whose earlier dead letters were counted as ended"
            ),
        };
        out.info(
            format!("{path}.on_dead_letter"),
            format!(
                "on_dead_letter {} → {}: applies to dead letters after the deploy, {what}",
                was.on_dead_letter.as_str(),
                now.on_dead_letter.as_str()
            ),
        );
    }
}

#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, severity: Impact, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding {
            severity,
            path: path.into(),
            message: message.into(),
        });
    }

    fn breaking(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push(Impact::Breaking, path, message);
    }

    fn rollout(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push(Impact::Rollout, path, message);
    }

    fn info(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.push(Impact::Info, path, message);
    }
}

fn settings(out: &mut Findings, old: &Spec, new: &Spec) {
    if old.service != new.service {
        out.breaking(
            "service",
            format!(
                "service `{}` → `{}`: the Redis Function library, ACL users and metric names move; workers and producers of the two specs call different libraries",
                old.service, new.service
            ),
        );
    }
    let (a, b) = (&old.redis, &new.redis);
    if a.key_prefix != b.key_prefix {
        out.breaking(
            "redis.key_prefix",
            format!(
                "key prefix `{}` → `{}`: every stream, retry and dead-letter key moves; entries under `{}:` are stranded",
                a.key_prefix, b.key_prefix, a.key_prefix
            ),
        );
    }
    if a.deployment != b.deployment {
        out.rollout(
            "redis.deployment",
            format!(
                "deployment {:?} → {:?}: the queues' keys must be migrated to the new deployment before workers and producers switch",
                a.deployment, b.deployment
            )
            .to_lowercase(),
        );
    }
    if a.min_version != b.min_version {
        out.info(
            "redis.min_version",
            format!("min_version \"{}\" → \"{}\"", a.min_version, b.min_version),
        );
    }
    if a.persistence != b.persistence {
        out.info(
            "redis.persistence",
            format!(
                "appendfsync {} → {}: apply the regenerated redis/queue.conf (CONFIG SET appendfsync or a restart)",
                a.persistence.appendfsync(),
                b.persistence.appendfsync()
            ),
        );
    }
    if old.kubernetes != new.kubernetes {
        out.info(
            "kubernetes",
            "Kubernetes settings changed: regenerate and apply k8s/",
        );
    }
    match (&old.postgres, &new.postgres) {
        (Some(a), Some(b)) if a.schema != b.schema => out.rollout(
            "postgres.schema",
            format!(
                "queuegen's tables move from schema `{}` to `{}`: a job redelivered after the switch does not find the result committed in `{}` and repeats its change, and outbox rows not yet published there stay behind; drain the queues and the outbox first, or move the tables (`ALTER TABLE {}.results SET SCHEMA {}`, and so on for each table)",
                a.schema, b.schema, a.schema, a.schema, b.schema
            ),
        ),
        (Some(a), Some(b)) if a.pool_size != b.pool_size => out.info(
            "postgres.pool_size",
            format!("pool_size {} → {}", a.pool_size, b.pool_size),
        ),
        (None, Some(b)) => out.rollout(
            "postgres",
            format!(
                "queues now use PostgreSQL: apply the migrations of sql/ (schema `{}`) before deploying workers and producers, which refuse to start without them",
                b.schema
            ),
        ),
        _ => {}
    }
}

fn envelope_changes(out: &mut Findings, old: &Envelope, new: &Envelope) {
    let path = format!("envelopes.{}", new.name);
    let (was, now) = (old.schema, new.schema);
    if now > was {
        out.info(
            format!("{path}.schema"),
            format!("schema {was} → {now}: producers write schema {now}"),
        );
        out.rollout(
            format!("{path}.schema"),
            format!(
                "deploy workers before producers: workers on OLD (accepts: [{}]) dead-letter schema {now} entries as unsupported_schema",
                list(&old.accepts)
            ),
        );
        if !new.accepts.contains(&was) {
            out.breaking(
                format!("{path}.accepts"),
                format!(
                    "NEW no longer accepts schema {was}, which producers on OLD write until they are redeployed, while workers on OLD do not accept schema {now}: whichever deploys first, entries are dead-lettered as unsupported_schema; keep accepting {was} for one release"
                ),
            );
        }
    } else if now < was {
        out.breaking(
            format!("{path}.schema"),
            format!(
                "schema {was} → {now}: producers would write a version older than schema {was}, already published"
            ),
        );
    } else {
        changed_in_place(out, &path, old, new);
    }
    accepted_versions(out, &path, old, new);
    for version in sorted(&new.accepts) {
        if version <= was {
            old_entries_decode(out, &path, version, old, new);
        }
    }
    current_fields(out, &path, old, new);
}

/// The same schema number with other fields: both sides of a rollout
/// disagree about what the version holds.
fn changed_in_place(out: &mut Findings, path: &str, old: &Envelope, new: &Envelope) {
    let schema = new.schema;
    let mut changes = Vec::new();
    for field in &old.fields {
        match new.field(&field.name) {
            None => changes.push(format!("`{}` removed", field.name)),
            Some(now) => {
                let d = compat::differences(field, now);
                if !d.is_empty() {
                    changes.push(format!("`{}` {}", field.name, d.join(", ")));
                }
            }
        }
    }
    for field in &new.fields {
        if old.field(&field.name).is_none() {
            changes.push(format!("`{}` added", field.name));
        }
    }
    let names = |e: &Envelope| e.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    if changes.is_empty() && names(old) != names(new) {
        changes.push("fields reordered".to_owned());
    }
    if !changes.is_empty() {
        out.breaking(
            format!("{path}.fields"),
            format!(
                "published version changed in place: schema {schema} now has other fields ({}); producers and workers on either side of the rollout disagree about schema {schema}; declare the change as schema {}",
                changes.join("; "),
                schema + 1
            ),
        );
    }
}

fn accepted_versions(out: &mut Findings, path: &str, old: &Envelope, new: &Envelope) {
    for version in sorted(&old.accepts) {
        // Dropping the old current schema during a bump is reported as breaking above.
        let dropped_during_bump = version == old.schema && new.schema > old.schema;
        if !new.accepts.contains(&version) && !dropped_during_bump {
            out.rollout(
                format!("{path}.accepts"),
                format!(
                    "no longer accepts schema {version}: its entries still in the stream, the retry schedule or the dead-letter stream will be dead-lettered as unsupported_schema on delivery or replay; deploy once none remain"
                ),
            );
        }
    }
    for version in sorted(&new.accepts) {
        if !old.accepts.contains(&version) && version <= old.schema {
            out.info(
                format!("{path}.accepts"),
                format!("now also accepts schema {version}"),
            );
        }
    }
}

/// Entries of `version` written under OLD must decode with NEW's idea of
/// that version.
fn old_entries_decode(
    out: &mut Findings,
    path: &str,
    version: u32,
    old: &Envelope,
    new: &Envelope,
) {
    let written = old.fields_of(version);
    let reader = new.fields_of(version);
    for field in written.iter().map(|vf| &vf.field) {
        let Some(now) = reader.iter().find(|vf| vf.field.name == field.name) else {
            out.breaking(
                format!("{path}.changes"),
                format!(
                    "schema {version} had `{}: {}`, and NEW's changes no longer give schema {version} that field: its history was rewritten, and its entries would not decode as written",
                    field.name,
                    definition(field)
                ),
            );
            continue;
        };
        if let Err(why) = reads_all_of(field, &now.field) {
            out.breaking(
                new.keys_of(version, now).join("."),
                format!(
                    "schema {version} entries hold `{}` as {}; NEW decodes them as {}: {why}",
                    field.name,
                    definition(field),
                    definition(&now.field)
                ),
            );
        }
    }
    for now in &reader {
        let field = &now.field;
        let known = written.iter().any(|vf| vf.field.name == field.name);
        if !known && !field.optional && field.default.is_none() {
            out.breaking(
                new.keys_of(version, now).join("."),
                format!(
                    "schema {version} entries written under OLD lack `{}`, which NEW's schema {version} requires: they would not decode",
                    field.name
                ),
            );
        }
    }
}

/// Fields added, removed, renamed or retyped in the current schema.
fn current_fields(out: &mut Findings, path: &str, old: &Envelope, new: &Envelope) {
    let fields = |name: &str| format!("{path}.fields.{name}");
    // A schema changed in place already lists its changes; a lowered one
    // has no version to follow the fields through.
    if old.schema >= new.schema {
        return;
    }
    // NEW's reconstruction of OLD's current version says where each of its
    // fields went.
    let then: Vec<VersionField> = new.fields_of(old.schema);
    let mut reached: Vec<&str> = Vec::new();
    for field in &old.fields {
        let Some(vf) = then.iter().find(|vf| vf.field.name == field.name) else {
            out.info(fields(&field.name), format!("`{}` removed", field.name));
            continue;
        };
        let Some(current) = &vf.current else {
            out.info(fields(&field.name), format!("`{}` removed", field.name));
            continue;
        };
        reached.push(current);
        if *current != field.name {
            out.info(
                fields(current),
                format!("`{}` renamed to `{current}`", field.name),
            );
        }
        if let Some(now) = new.field(current) {
            let d = compat::differences(field, now);
            if !d.is_empty() {
                out.info(
                    fields(current),
                    format!("`{current}` changed: {}", d.join(", ")),
                );
            }
        }
    }
    for field in &new.fields {
        if !reached.contains(&field.name.as_str()) && old.field(&field.name).is_none() {
            out.info(
                fields(&field.name),
                format!("`{}` added: {}", field.name, definition(field)),
            );
        }
    }
}

/// Whether NEW's `partition_by` is OLD's with renamed fields renamed: the
/// partition hashes the values only, and a rename carries them over.
/// `envelopes` are OLD's and NEW's envelope of the queue, when both exist.
fn partition_by_renamed(
    old: &Queue,
    new: &Queue,
    envelopes: Option<(&Envelope, &Envelope)>,
) -> bool {
    let Some((before, after)) = envelopes else {
        return false;
    };
    if old.envelope != new.envelope || before.schema > after.schema {
        return false;
    }
    let then = after.fields_of(before.schema);
    let renamed: Vec<String> = old
        .partition_by
        .iter()
        .map(|name| {
            then.iter()
                .find(|vf| vf.field.name == *name)
                .and_then(|vf| vf.current.clone())
                .unwrap_or_else(|| name.clone())
        })
        .collect();
    renamed == new.partition_by
}

fn queue_changes(
    out: &mut Findings,
    old: &Queue,
    new: &Queue,
    envelopes: Option<(&Envelope, &Envelope)>,
) {
    let path = |key: &str| format!("queues.{}.{key}", new.name);
    if old.envelope != new.envelope {
        out.breaking(
            path("envelope"),
            format!(
                "carries `{}` instead of `{}`: entries of `{}` in its stream, retry schedule and dead letters would be decoded as `{}`",
                new.envelope, old.envelope, old.envelope, new.envelope
            ),
        );
    }
    if old.partitions != new.partitions {
        let stranded = if new.partitions < old.partitions {
            format!(
                "; partitions {}..{} are no longer read and their entries are stranded",
                new.partitions,
                old.partitions - 1
            )
        } else {
            String::new()
        };
        out.breaking(
            path("partitions"),
            format!(
                "{} → {} partitions: keys hash to other partitions, so a key's new entries can be handled before its older ones still queued on the old partition{stranded}",
                old.partitions, new.partitions
            ),
        );
    }
    let (was, now) = (old.partition_by.join(", "), new.partition_by.join(", "));
    let moved = old.partition_by != new.partition_by;
    if moved && partition_by_renamed(old, new, envelopes) {
        out.info(
            path("partition_by"),
            format!("[{was}] → [{now}] follows the renamed fields: the key's values, and so its partition, stay the same"),
        );
    } else if moved {
        out.breaking(
            path("partition_by"),
            format!("[{was}] → [{now}]: entries of the same key move to another partition, so per-key ordering breaks while the old partitions still hold entries"),
        );
    }
    if old.group.name != new.group.name {
        out.rollout(
            path("group.name"),
            format!(
                "group `{}` → `{}`: the new group starts at `{}`, and the old group's pending and unread entries are stranded; drain the old group before switching",
                old.group.name,
                new.group.name,
                new.group.start.as_redis_arg()
            ),
        );
    } else if old.group.start != new.group.start {
        out.info(
            path("group.start"),
            format!(
                "group.start `{}` → `{}`: applies only when the group is created; the existing group keeps its position",
                old.group.start.as_redis_arg(),
                new.group.start.as_redis_arg()
            ),
        );
    }
    if old.group.prune_consumers_after != new.group.prune_consumers_after {
        out.info(
            path("group.prune_consumers_after"),
            format!(
                "{} → {}: consumers idle longer than that with nothing pending are removed, from the deploy on; no job is affected",
                format_duration(old.group.prune_consumers_after),
                format_duration(new.group.prune_consumers_after)
            ),
        );
    }
    let mut changed = Vec::new();
    let mut note = |same: bool, key: &str| {
        if !same {
            changed.push(key.to_owned());
        }
    };
    note(old.handler == new.handler, "handler");
    note(old.claim == new.claim, "claim");
    note(old.retry == new.retry, "retry");
    note(old.poison == new.poison, "poison");
    note(old.dead_letter == new.dead_letter, "dead_letter");
    note(old.retention == new.retention, "retention");
    note(old.payload == new.payload, "payload");
    note(old.admission == new.admission, "admission");
    note(old.alerts == new.alerts, "alerts");
    note(old.pods == new.pods, "pods");
    note(old.autoscale == new.autoscale, "autoscale");
    note(old.outbox == new.outbox, "outbox");
    note(old.dedup == new.dedup, "dedup");
    note(same_lane_weights(&old.lanes, &new.lanes), "lane weights");
    lane_changes(out, old, new);
    match (old.results, new.results) {
        (Some(ResultStore::Postgres), None) => out.rollout(
            path("results"),
            "results are no longer kept in PostgreSQL: a job redelivered after the switch does not find the marker its first delivery committed there, and repeats its change unless the handler finds it some other way",
        ),
        (None, Some(ResultStore::Postgres)) => out.rollout(
            path("results"),
            "results are kept in PostgreSQL from now on: a job first handled by the old workers and redelivered to the new ones does not find its result in PostgreSQL; drain the queue first, or have the handler also look where the old one stored results",
        ),
        _ => {}
    }
    if old.payload.shape != new.payload.shape {
        out.rollout(
            path("payload.shape"),
            format!(
                "entries are written {} from now on: workers and the Function library read both shapes, and queued jobs keep theirs; anything else that reads the streams itself (its own consumers, scripts over XRANGE) must read the new shape first",
                match new.payload.shape {
                    EntryShape::Packed => "packed (one `packed` field holding a MessagePack array of names and values)",
                    EntryShape::Fields => "as fields (every header and body field a stream field)",
                }
            ),
        );
    }
    if old.retention.trim == TrimMode::InProcess && new.retention.trim == TrimMode::CronJob {
        out.rollout(
            path("retention.trim"),
            "workers built from this spec stop trimming: apply k8s/trim-cronjob.yaml with them, or the streams grow without bound",
        );
    }
    if !changed.is_empty() {
        out.info(
            format!("queues.{}", new.name),
            format!("settings changed: {}", changed.join(", ")),
        );
    }
}

/// Lanes: the default lane owns the queue's unlaned keys, every other lane
/// the keys with its name (`lane-NAME`). A lane whose keys nobody reads any
/// more strands its backlog; a lane whose keys change reads another lane's.
fn lane_changes(out: &mut Findings, old: &Queue, new: &Queue) {
    let path = format!("queues.{}.lanes", new.name);
    let named = |lanes: &[Lane], name: &str| lanes.iter().any(|l| l.name == name);
    match (old.default_lane(), new.default_lane()) {
        (None, Some(default)) => out.rollout(
            path.clone(),
            format!(
                "lanes {} added: producers built from this spec publish to lanes that only workers built from it read; roll the workers out before the producers (the queue's backlog stays in the default lane `{}`, which keeps the queue's keys)",
                lane_names(&new.lanes),
                default.name
            ),
        ),
        (Some(was), Some(now)) if was.name != now.name => {
            let (was, now) = (&was.name, &now.name);
            if !named(&new.lanes, was) && !named(&old.lanes, now) {
                // A renamed default lane: the same keys under another name.
                out.info(
                    path.clone(),
                    format!("default lane `{was}` renamed `{now}`: it keeps the queue's keys and the backlog in them"),
                );
            } else {
                let stranded = if named(&old.lanes, now) {
                    format!(", and those of `{now}` (under its `lane-{now}` keys) would no longer be read")
                } else {
                    String::new()
                };
                out.breaking(
                    path.clone(),
                    format!(
                        "default lane `{was}` → `{now}`: the default lane owns the queue's unlaned keys, so the lanes swap keys: the backlog, retries and dead letters waiting in `{was}` would be read as `{now}`{stranded}; drain both lanes first, or keep `{was}` the default"
                    ),
                );
            }
        }
        _ => {}
    }
    if !old.lanes.is_empty() {
        for (i, lane) in new.lanes.iter().enumerate() {
            if !named(&old.lanes, &lane.name) && !lane.default {
                out.rollout(
                    format!("{path}[{i}]"),
                    format!(
                        "lane `{}` added: producers built from this spec publish to it, and only workers built from it read it; roll the workers out before the producers",
                        lane.name
                    ),
                );
            }
        }
    }
    for (i, lane) in old.lanes.iter().enumerate() {
        // The default lane's keys are the queue's own: they stay read
        // (by the new default lane, or by the queue without lanes).
        if !named(&new.lanes, &lane.name) && !lane.default {
            out.breaking(
                format!("{path}[{i}]"),
                format!(
                    "lane `{}` removed: its streams' backlog, retries and dead letters are no longer read; stop publishing to it and drain the lane first",
                    lane.name
                ),
            );
        }
    }
}

/// Whether every lane of both has the same weight in both.
fn same_lane_weights(old: &[Lane], new: &[Lane]) -> bool {
    old.iter().all(|was| {
        new.iter()
            .filter(|now| now.name == was.name)
            .all(|now| now.weight == was.weight)
    })
}

fn lane_names(lanes: &[Lane]) -> String {
    lanes
        .iter()
        .map(|l| format!("`{}`", l.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn sorted(versions: &[u32]) -> Vec<u32> {
    let mut versions = versions.to_vec();
    versions.sort_unstable();
    versions
}

fn list(versions: &[u32]) -> String {
    sorted(versions)
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(envelope: &str, queue: &str) -> Spec {
        let source = format!(
            "version: 1\nservice: shop\nenvelopes:\n  OrderPlaced:\n{envelope}queues:\n  orders:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n{queue}"
        );
        let checked = crate::check_str(&source, "q.yaml");
        assert!(
            !checked.has_errors(),
            "{source}\n{:#?}",
            checked.diagnostics
        );
        checked.spec.unwrap()
    }

    const V1: &str = "    schema: 1\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u64 }\n";

    fn findings(old: &Spec, new: &Spec) -> Vec<(Impact, String, String)> {
        diff(old, new)
            .into_iter()
            .map(|f| (f.severity, f.path, f.message))
            .collect()
    }

    #[test]
    fn the_same_spec_has_no_findings() {
        assert!(diff(&spec(V1, ""), &spec(V1, "")).is_empty());
    }

    #[test]
    fn a_compatible_bump_needs_workers_first() {
        let v2 = "    schema: 2\n    accepts: [1, 2]\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u64 }\n      note: { type: string, max_bytes: 32, optional: true }\n    changes:\n      2: { added: [note] }\n";
        let found = findings(&spec(V1, ""), &spec(v2, ""));
        let severities: Vec<Impact> = found.iter().map(|f| f.0).collect();
        assert_eq!(
            severities,
            [Impact::Rollout, Impact::Info, Impact::Info],
            "{found:#?}"
        );
        assert!(found[0].2.starts_with("deploy workers before producers"));
        assert_eq!(found[2].1, "envelopes.OrderPlaced.fields.note");
    }

    #[test]
    fn a_narrowed_field_of_an_accepted_version_breaks() {
        let v2 = "    schema: 2\n    accepts: [1, 2]\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u32 }\n";
        let found = findings(&spec(V1, ""), &spec(v2, ""));
        assert_eq!(found[0].0, Impact::Breaking);
        assert_eq!(found[0].1, "envelopes.OrderPlaced.fields.pages");
        assert!(
            found[0]
                .2
                .contains("values above 4294967295 would not decode"),
            "{found:#?}"
        );
        assert!(found
            .iter()
            .any(|f| f.2 == "`pages` changed: type u64 → u32"));
    }

    #[test]
    fn a_version_changed_in_place_breaks() {
        let changed = "    schema: 1\n    fields:\n      order_ref: { type: string, max_bytes: 128 }\n      pages: { type: u64 }\n";
        let found = findings(&spec(V1, ""), &spec(changed, ""));
        assert_eq!(found[0].0, Impact::Breaking);
        assert!(found[0].2.starts_with("published version changed in place"));
        assert!(found[0].2.contains("`order_ref` max_bytes 64 → 128"));
    }

    #[test]
    fn dropping_the_old_schema_during_a_bump_breaks() {
        let v2 = "    schema: 2\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u64 }\n";
        let found = findings(&spec(V1, ""), &spec(v2, ""));
        assert_eq!(found[0].0, Impact::Breaking);
        assert_eq!(found[0].1, "envelopes.OrderPlaced.accepts");
    }

    #[test]
    fn dropping_an_older_accepted_version_is_a_rollout() {
        let v2 = "    schema: 2\n    accepts: [1, 2]\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u64 }\n";
        let v2_only = v2.replace("    accepts: [1, 2]\n", "");
        let found = findings(&spec(v2, ""), &spec(&v2_only, ""));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Rollout);
        assert!(found[0]
            .2
            .contains("unsupported_schema on delivery or replay"));
    }

    #[test]
    fn queue_changes() {
        let old = spec(V1, "    partitions: 4\n");
        let new = spec(
            V1,
            "    partitions: 8\n    partition_by: [order_ref]\n    group: { name: orders-v2 }\n    handler: { timeout: 10s }\n",
        );
        let found = findings(&old, &new);
        let got: Vec<(Impact, &str)> = found.iter().map(|f| (f.0, f.1.as_str())).collect();
        assert_eq!(
            got,
            [
                (Impact::Breaking, "queues.orders.partitions"),
                (Impact::Breaking, "queues.orders.partition_by"),
                (Impact::Rollout, "queues.orders.group.name"),
                (Impact::Info, "queues.orders"),
            ]
        );
        // The default claim.min_idle follows handler.timeout.
        assert_eq!(found[3].2, "settings changed: handler, claim");
    }

    #[test]
    fn pruning_consumers_sooner_is_info() {
        let old = spec(V1, "");
        let new = spec(V1, "    group: { prune_consumers_after: 2h }\n");
        let found = findings(&old, &new);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Info);
        assert_eq!(found[0].1, "queues.orders.group.prune_consumers_after");
        assert!(found[0].2.starts_with("1d → 2h: "), "{}", found[0].2);
    }

    #[test]
    fn schedule_changes_name_their_rollout() {
        let with = |schedules: &str| {
            let source = format!(
                "version: 1\nservice: shop\nenvelopes:\n  OrderPlaced:\n{V1}queues:\n  orders:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n  audit:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\nschedules:\n{schedules}"
            );
            let checked = crate::check_str(&source, "queues.yaml");
            checked
                .spec
                .unwrap_or_else(|| panic!("{:?}", checked.diagnostics))
        };
        let old = with("  nightly: { queue: orders, cron: \"0 2 * * *\", body: { order_ref: n, pages: 1 } }\n  gone: { queue: orders, every: 1h, body: { order_ref: g, pages: 1 } }\n");
        let new = with("  nightly: { queue: audit, cron: \"0 3 * * *\", body: { order_ref: m, pages: 1 } }\n  fresh: { queue: orders, every: 1h, body: { order_ref: f, pages: 1 } }\n");
        let found = findings(&old, &new);
        let got: Vec<(Impact, &str)> = found.iter().map(|f| (f.0, f.1.as_str())).collect();
        assert_eq!(
            got,
            [
                (Impact::Rollout, "schedules.nightly.queue"),
                (Impact::Rollout, "schedules.nightly"),
                (Impact::Rollout, "schedules.gone"),
                (Impact::Info, "schedules.nightly"),
                (Impact::Info, "schedules.fresh"),
            ],
            "{found:?}"
        );
        assert!(
            found[1]
                .2
                .contains("cron \"0 2 * * *\" in UTC to cron \"0 3 * * *\" in UTC"),
            "{}",
            found[1].2
        );
        assert!(findings(&old, &old).is_empty());
    }

    #[test]
    fn moving_trimming_to_a_cronjob_is_a_rollout() {
        let old = spec(V1, "");
        let new = spec(V1, "    retention: { trim: cronjob, trim_every: 5m }\n");
        let found = findings(&old, &new);
        assert_eq!(found[0].0, Impact::Rollout);
        assert_eq!(found[0].1, "queues.orders.retention.trim");
        assert!(found[0].2.contains("trim-cronjob.yaml"), "{}", found[0].2);
        // Back to in-process trimming needs no order.
        let back = findings(&new, &old);
        assert!(back.iter().all(|f| f.0 == Impact::Info), "{back:?}");
    }

    #[test]
    fn changing_the_entry_shape_is_a_rollout_either_way() {
        let packed = spec(V1, "");
        let fields = spec(V1, "    payload: { shape: fields }\n");
        for (old, new, written) in [
            (&packed, &fields, "as fields"),
            (&fields, &packed, "packed"),
        ] {
            let found = findings(old, new);
            assert_eq!(found[0].0, Impact::Rollout, "{found:?}");
            assert_eq!(found[0].1, "queues.orders.payload.shape");
            assert!(
                found[0].2.contains(&format!("written {written}")),
                "{}",
                found[0].2
            );
            assert!(found[0].2.contains("read both shapes"), "{}", found[0].2);
        }
    }

    const LANES: &str = "    lanes:\n      - { name: high, weight: 6 }\n      - { name: normal, weight: 3, default: true }\n      - { name: low, weight: 1 }\n";

    #[test]
    fn adding_lanes_rolls_the_workers_first() {
        let found = findings(&spec(V1, ""), &spec(V1, LANES));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (Impact::Rollout, "queues.orders.lanes")
        );
        assert!(
            found[0]
                .2
                .contains("roll the workers out before the producers"),
            "{}",
            found[0].2
        );
        assert!(
            found[0].2.contains("default lane `normal`"),
            "{}",
            found[0].2
        );

        // A lane added to a queue with lanes: the same order.
        let more = LANES.replace(
            "      - { name: low, weight: 1 }\n",
            "      - { name: low, weight: 1 }\n      - { name: bulk }\n",
        );
        let found = findings(&spec(V1, LANES), &spec(V1, &more));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (Impact::Rollout, "queues.orders.lanes[3]")
        );
        assert!(
            found[0].2.starts_with("lane `bulk` added"),
            "{}",
            found[0].2
        );
    }

    #[test]
    fn removing_a_lane_strands_its_backlog() {
        let fewer = LANES.replace("      - { name: low, weight: 1 }\n", "");
        let found = findings(&spec(V1, LANES), &spec(V1, &fewer));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (Impact::Breaking, "queues.orders.lanes[2]")
        );
        assert!(
            found[0]
                .2
                .starts_with("lane `low` removed: its streams' backlog, retries and dead letters are no longer read"),
            "{}",
            found[0].2
        );
        assert!(found[0].2.contains("drain the lane first"));

        // Removing every lane: the default lane's keys are the queue's own,
        // so only the other lanes are stranded.
        let found = findings(&spec(V1, LANES), &spec(V1, ""));
        let got: Vec<(Impact, &str)> = found.iter().map(|f| (f.0, f.1.as_str())).collect();
        assert_eq!(
            got,
            [
                (Impact::Breaking, "queues.orders.lanes[0]"),
                (Impact::Breaking, "queues.orders.lanes[2]"),
            ],
            "{found:#?}"
        );
    }

    #[test]
    fn changing_the_default_lane_swaps_keys() {
        let high_default = LANES
            .replace(", default: true", "")
            .replace("weight: 6 }", "weight: 6, default: true }");
        let found = findings(&spec(V1, LANES), &spec(V1, &high_default));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (Impact::Breaking, "queues.orders.lanes")
        );
        assert!(
            found[0].2.starts_with(
                "default lane `normal` → `high`: the default lane owns the queue's unlaned keys"
            ),
            "{}",
            found[0].2
        );
        assert!(
            found[0]
                .2
                .contains("those of `high` (under its `lane-high` keys) would no longer be read"),
            "{}",
            found[0].2
        );

        // Unmarking `normal` makes the first lane the default: the same change.
        let unmarked = LANES.replace(", default: true", "");
        let found = findings(&spec(V1, LANES), &spec(V1, &unmarked));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Breaking);

        // Renaming the default lane keeps its keys.
        let renamed = LANES.replace("name: normal", "name: standard");
        let found = findings(&spec(V1, LANES), &spec(V1, &renamed));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Info);
        assert!(found[0].2.contains("renamed `standard`"), "{}", found[0].2);
    }

    #[test]
    fn lane_weights_are_a_setting() {
        let reweighed = LANES.replace("weight: 6", "weight: 8");
        let found = findings(&spec(V1, LANES), &spec(V1, &reweighed));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str(), found[0].2.as_str()),
            (
                Impact::Info,
                "queues.orders",
                "settings changed: lane weights"
            )
        );
        // Reordering the lanes changes nothing.
        let reordered = "    lanes:\n      - { name: low, weight: 1 }\n      - { name: normal, weight: 3, default: true }\n      - { name: high, weight: 6 }\n";
        assert!(findings(&spec(V1, LANES), &spec(V1, reordered)).is_empty());
    }

    #[test]
    fn summaries_count_by_severity() {
        let v2 = "    schema: 2\n    fields:\n      order_ref: { type: string, max_bytes: 64 }\n      pages: { type: u64 }\n";
        let found = diff(&spec(V1, ""), &spec(v2, ""));
        assert_eq!(
            Summary::of(&found).to_string(),
            "1 breaking, 1 rollout, 1 info"
        );
    }

    /// Five queues that can each be handed jobs, and `pipelines:` as given.
    fn pipelines(pipelines: &str) -> Spec {
        let queue = |name: &str| {
            format!("  {name}: {{ envelope: Doc, dead_letter: {{ owner: docs-oncall }}, dedup: {{ window: 1d }} }}\n")
        };
        let source = format!(
            "version: 1\nservice: docs\nenvelopes:\n  Doc:\n    schema: 1\n    fields:\n      doc_ref: {{ type: string, max_bytes: 64 }}\nqueues:\n{}{}{}{}{}pipelines:\n{pipelines}",
            queue("ocr"),
            queue("index"),
            queue("thumbnail"),
            queue("notify"),
            queue("audit"),
        );
        let checked = crate::check_str(&source, "queues.yaml");
        assert!(
            !checked.has_errors(),
            "{source}\n{:#?}",
            checked.diagnostics
        );
        checked.spec.unwrap()
    }

    const DOCUMENTS: &str = "  documents:\n    stages:\n      ocr: { then: [index, thumbnail], max_children: 20 }\n      index: {}\n      thumbnail: {}\n      notify: { join: [index, thumbnail] }\n";

    /// `documents` as in [`DOCUMENTS`], with `from` replaced by `to`.
    fn documents(from: &str, to: &str) -> Spec {
        assert!(DOCUMENTS.contains(from), "{from}");
        pipelines(&DOCUMENTS.replacen(from, to, 1))
    }

    fn severities_and_paths(found: &[(Impact, String, String)]) -> Vec<(Impact, &str)> {
        found.iter().map(|f| (f.0, f.1.as_str())).collect()
    }

    #[test]
    fn a_new_pipeline_drains_the_queues_it_hands_jobs_to() {
        let found = findings(&pipelines(""), &pipelines(DOCUMENTS));
        assert_eq!(
            severities_and_paths(&found),
            [
                (Impact::Rollout, "pipelines.documents.stages.index"),
                (Impact::Rollout, "pipelines.documents.stages.thumbnail"),
                (Impact::Rollout, "pipelines.documents.stages.notify"),
                (Impact::Info, "pipelines.documents"),
            ],
            "{found:#?}"
        );
        assert_eq!(
            found[0].2,
            "queue `index` is handed jobs by pipeline `documents` from the deploy on, and its workers dead-letter a job that carries no run (`run_id`): every job already in its stream, retry schedule or dead letters, and any its producers still publish; stop its producers and drain it before deploying"
        );
        assert_eq!(
            found[3].2,
            "new pipeline `documents`: each job of `ocr` handled after the deploy starts a run (4 stages, join `notify`)"
        );
    }

    #[test]
    fn a_removed_pipeline_abandons_its_runs_in_flight() {
        let found = findings(&pipelines(DOCUMENTS), &pipelines(""));
        assert_eq!(
            found,
            [(
                Impact::Rollout,
                "pipelines.documents".to_owned(),
                "pipeline `documents` removed: runs in flight are abandoned at `notify` (the join's job is never published for them), and a run's state there expires after keep (7d) only once the run has ended there, so theirs stays in Redis; stop publishing to `ocr` and let the runs in flight end (drain the pipeline) before deploying".to_owned()
            )]
        );
        // Without a join, the runs stop where they are.
        let chain = "  chain:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n";
        let found = findings(&pipelines(chain), &pipelines(""));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Rollout);
        assert_eq!(
            found[0].2,
            "pipeline `chain` removed: its stages stop handing jobs on, so runs in flight stop where they are (a job handled after the deploy hands nothing on); stop publishing to `ocr` and let the runs in flight end before deploying"
        );
    }

    #[test]
    fn stages_added_and_removed_say_what_runs_in_flight_lose() {
        let base = pipelines(DOCUMENTS);
        let chain = pipelines("  documents:\n    stages:\n      ocr: { then: [index], max_children: 20 }\n      index: {}\n");

        // A stage and a join removed: the join's runs in flight are stuck.
        let found = findings(&base, &chain);
        assert_eq!(
            found,
            [
                (
                    Impact::Rollout,
                    "pipelines.documents.stages.thumbnail".to_owned(),
                    "stage `thumbnail` removed: its jobs are no longer settled at `notify`, where runs in flight count on them, so those runs never end there (the join's job is not published, and their state stays in Redis); let the runs in flight end first".to_owned()
                ),
                (
                    Impact::Rollout,
                    "pipelines.documents.stages.notify".to_owned(),
                    "join `notify` removed: runs in flight are abandoned there: its job is never published for them, and their state there expires only once a run has ended, so it stays in Redis; let the runs in flight end first".to_owned()
                ),
            ]
        );

        // Added back: the join never runs for runs already open, and the
        // queues handed jobs are drained first.
        let found = findings(&chain, &base);
        assert_eq!(
            severities_and_paths(&found),
            [
                (Impact::Rollout, "pipelines.documents.stages.notify"),
                (Impact::Rollout, "pipelines.documents.stages.thumbnail"),
                (Impact::Rollout, "pipelines.documents.stages.notify"),
                (Impact::Info, "pipelines.documents.stages.thumbnail"),
            ],
            "{found:#?}"
        );
        assert_eq!(
            found[0].2,
            "join `notify` added: the runs in flight were opened at their joins by their first job, before the deploy, so it never runs for them, and what their later jobs settle there never ends, so it stays in Redis; let the runs in flight end first"
        );
        assert!(found[1].2.starts_with("queue `thumbnail` is handed jobs"));
        assert_eq!(
            found[3].2,
            "stage `thumbnail` added: jobs of `ocr` handled after the deploy hand jobs on to it"
        );

        // A stage no join counts on.
        let longer = pipelines(&DOCUMENTS.replace(
            "      index: {}\n",
            "      index: { then: [audit] }\n      audit: {}\n",
        ));
        let found = findings(&longer, &base);
        assert_eq!(
            found,
            [(
                Impact::Info,
                "pipelines.documents.stages.audit".to_owned(),
                "stage `audit` removed: no join counts on its jobs".to_owned()
            )]
        );
        let through = pipelines("  chain:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [audit] }\n      audit: {}\n");
        let direct =
            pipelines("  chain:\n    stages:\n      ocr: { then: [audit] }\n      audit: {}\n");
        let messages: Vec<String> = findings(&through, &direct)
            .into_iter()
            .map(|f| f.2)
            .collect();
        assert_eq!(
            messages,
            [
                "`ocr` hands jobs to `audit` from the deploy on: jobs already handed on keep going, and a job of `ocr` delivered again after the deploy hands on per the new graph",
                "stage `index` removed: no join counts on its jobs; those already handed to it hand nothing on to `audit` after the deploy",
            ]
        );
    }

    #[test]
    fn hand_offs_and_settings_apply_after_the_deploy() {
        let base = pipelines(DOCUMENTS);
        let edited = pipelines(
            "  documents:\n    keep: 1d\n    stages:\n      ocr: { then: [index, thumbnail], max_children: 10 }\n      index: { then: [thumbnail] }\n      thumbnail: {}\n      notify: { join: [index, thumbnail], on_dead_letter: continue }\n",
        );
        let found = findings(&base, &edited);
        assert_eq!(
            found,
            [
                (
                    Impact::Rollout,
                    "pipelines.documents.stages.ocr.max_children".to_owned(),
                    "max_children 20 → 10: a job of `ocr` handled after the deploy that hands on more than 10 is dead-lettered (too_many_children), a job queued before it or delivered again after handing on more included (the children it handed on then keep going); make sure the handler hands on at most 10 before deploying".to_owned()
                ),
                (
                    Impact::Info,
                    "pipelines.documents.keep".to_owned(),
                    "keep 7d → 1d: applies to runs that end after the deploy; a run that ended before it keeps its record for 7d".to_owned()
                ),
                (
                    Impact::Info,
                    "pipelines.documents.stages.index.then".to_owned(),
                    "`index` hands jobs to `thumbnail` from the deploy on: jobs already handed on keep going, and a job of `index` delivered again after the deploy hands on per the new graph".to_owned()
                ),
                (
                    Impact::Info,
                    "pipelines.documents.stages.notify.on_dead_letter".to_owned(),
                    "on_dead_letter fail → continue: applies to dead letters after the deploy, which no longer fail their run at `notify`; runs already failed there stay failed".to_owned()
                ),
            ]
        );
        let back: Vec<(Impact, String)> = findings(&edited, &base)
            .into_iter()
            .map(|f| (f.0, f.2))
            .collect();
        assert_eq!(
            back,
            [
                (
                    Impact::Info,
                    "keep 1d → 7d: applies to runs that end after the deploy; a run that ended before it keeps its record for 1d".to_owned()
                ),
                (
                    Impact::Info,
                    "max_children 10 → 20: applies to the jobs of `ocr` handled after the deploy".to_owned()
                ),
                (
                    Impact::Info,
                    "`index` no longer hands jobs to `thumbnail`: jobs already handed on keep going, and a job of `index` delivered again after the deploy hands on per the new graph, nothing to `thumbnail`".to_owned()
                ),
                (
                    Impact::Info,
                    "on_dead_letter continue → fail: applies to dead letters after the deploy, each of which fails its run at `notify`, even a run whose earlier dead letters were counted as ended".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_changed_join_list_is_a_rollout_for_the_runs_in_flight() {
        let base = pipelines(DOCUMENTS);
        let fewer = documents("join: [index, thumbnail]", "join: [index]");
        let found = findings(&base, &fewer);
        assert_eq!(
            found,
            [(
                Impact::Rollout,
                "pipelines.documents.stages.notify.join".to_owned(),
                "join waits for [index, thumbnail] → [index]: runs in flight keep counting what their first stage registered when it opened them; `thumbnail`, no longer waited for, no longer settles there: a run already open that counted a job of `thumbnail` never runs the join, and its state there stays in Redis; runs started after the deploy wait for [index]; deploy once the runs in flight have ended, or accept this for them".to_owned()
            )]
        );
        let found = findings(&fewer, &base);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].0, Impact::Rollout);
        assert_eq!(
            found[0].2,
            "join waits for [index] → [index, thumbnail]: runs in flight keep counting what their first stage registered when it opened them; `thumbnail`, newly waited for, is not counted for runs already open: their join can run before their `thumbnail` jobs end, and its summary leaves those out; runs started after the deploy wait for [index, thumbnail]; deploy once the runs in flight have ended, or accept this for them"
        );

        // A stage that leads to one still waited for keeps settling there.
        let chained = pipelines("  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [thumbnail] }\n      thumbnail: {}\n      notify: { join: [index, thumbnail] }\n");
        let last = pipelines("  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [thumbnail] }\n      thumbnail: {}\n      notify: { join: [thumbnail] }\n");
        let found = findings(&chained, &last);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].2.contains("; `index`, no longer waited for, still settles there (it leads to a stage that is), left out of the summary;"),
            "{}",
            found[0].2
        );
        let found = findings(&last, &chained);
        assert!(
            found[0].2.contains("; `index`, newly waited for, already led to it, so runs already open counted its jobs, and the summary names those that settle after the deploy;"),
            "{}",
            found[0].2
        );
    }

    #[test]
    fn a_new_first_stage_starts_the_runs() {
        let base = pipelines(DOCUMENTS);
        let audited = documents(
            "      ocr: { then: [index, thumbnail], max_children: 20 }\n",
            "      audit: { then: [ocr] }\n      ocr: { then: [index, thumbnail], max_children: 20 }\n",
        );
        let found = findings(&base, &audited);
        assert_eq!(
            found,
            [
                (
                    Impact::Rollout,
                    "pipelines.documents.stages.ocr".to_owned(),
                    "queue `ocr` is handed jobs by pipeline `documents` from the deploy on, and its workers dead-letter a job that carries no run (`run_id`): every job already in its stream, retry schedule or dead letters, and any its producers still publish; stop its producers and drain it before deploying".to_owned()
                ),
                (
                    Impact::Info,
                    "pipelines.documents".to_owned(),
                    "first stage `ocr` → `audit`: runs start at `audit` from the deploy on".to_owned()
                ),
            ]
        );
        let found = findings(&audited, &base);
        assert_eq!(
            found,
            [(
                Impact::Rollout,
                "pipelines.documents".to_owned(),
                "first stage `audit` → `ocr`: runs start at `ocr` from the deploy on; a job of `ocr` already handed on by a run in flight starts a run of its own, and the joins of its old run that counted on it never end there; let the runs in flight end first".to_owned()
            )]
        );
    }

    #[test]
    fn postgres_changes_name_their_rollout() {
        let with_schema = |schema: &str| {
            let source = format!(
                "version: 1\nservice: shop\npostgres: {{ schema: {schema} }}\nenvelopes:\n  OrderPlaced:\n{V1}queues:\n  orders:\n    envelope: OrderPlaced\n    dead_letter: {{ owner: shop-oncall }}\n    results: postgres\n"
            );
            crate::check_str(&source, "q.yaml").spec.expect("valid")
        };
        let found = findings(&with_schema("shop"), &with_schema("shop_v2"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (Impact::Rollout, "postgres.schema")
        );
        assert!(
            found[0]
                .2
                .contains("ALTER TABLE shop.results SET SCHEMA shop_v2"),
            "{}",
            found[0].2
        );

        // Adopting PostgreSQL: the migrations first, and old results stay where they were.
        let found = findings(
            &spec(V1, ""),
            &spec(V1, "    results: postgres\n    outbox: true\n"),
        );
        let paths: Vec<_> = found.iter().map(|f| (f.0, f.1.as_str())).collect();
        assert_eq!(
            paths,
            [
                (Impact::Rollout, "postgres"),
                (Impact::Rollout, "queues.orders.results"),
                (Impact::Info, "queues.orders"),
            ]
        );
        assert!(found[0]
            .2
            .contains("apply the migrations of sql/ (schema `queuegen`)"));
        assert_eq!(found[2].2, "settings changed: outbox");
        let back = findings(&spec(V1, "    results: postgres\n"), &spec(V1, ""));
        assert_eq!(back.len(), 1, "{back:?}");
        assert!(
            back[0].2.contains("does not find the marker"),
            "{}",
            back[0].2
        );
    }
}
