//! What changing a spec from OLD to NEW does to compatibility, for code review (`queuegen diff-spec`).
//!
//! Each finding is `breaking` (entries would be lost, misread or
//! mis-ordered whatever the deploy order), `rollout` (safe only if deployed
//! in a certain order or once old entries are gone) or `info`.

use serde::Serialize;

use crate::compat::{self, definition, reads_all_of};
use crate::evolution::VersionField;
use crate::model::{EntryShape, Envelope, Lane, Queue, ResultStore, Spec, TrimMode};

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
/// severity in the order of the specs (service, envelopes, queues).
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
