//! `RUNBOOK.md`: per queue and per alert of `prometheus/rules.yml`, what it means, how to confirm it with `queuegen`, and what to do.
//!
//! Its sections come from the same [`prometheus::alert_groups`] list as the
//! rules, so each rule's `runbook_url` anchor is one of its headings.

use minijinja::context;
use serde::Serialize;

use queuegen_runtime::roles::Role;

use super::prometheus::{self, Alert};
use super::{acl, sql};
use crate::error::Result;
use crate::gen::templates::render;
use crate::gen::{functions, header_in, CommentSyntax, GeneratedFile};
use crate::spec::model::{Deployment, Queue, ResultStore, Spec, TrimMode};
use crate::spec::units::format_duration;

/// The file the runbook is written to, relative to the deploy directory.
pub const FILE_NAME: &str = "RUNBOOK.md";
/// Whom the runbook's command lines log in as (its `export REDIS_URL`):
/// every command but `apply` is the operator's.
pub const RUNBOOK_ROLE: Role = Role::Operator;
/// Who runs `queuegen apply`: loading the library is the deployer's alone.
pub const APPLY_ROLE: Role = Role::Deployer;

/// `RUNBOOK.md` for `spec`. `spec_file` is the spec's path relative to the
/// deploy directory, which the command lines use: they run from there.
pub fn generate(spec: &Spec, spec_file: &str) -> Result<GeneratedFile> {
    let mut groups = prometheus::alert_groups(spec);
    let service_alerts = groups
        .iter()
        .position(|g| g.queue.is_none())
        .map(|i| groups.remove(i).alerts)
        .unwrap_or_default();
    let queues: Vec<QueueContext> = spec
        .queues
        .iter()
        .zip(groups)
        .map(|(queue, group)| QueueContext::new(spec, queue, group.alerts))
        .collect();
    let schedules: Vec<ScheduleContext> = spec
        .schedules
        .iter()
        .map(|schedule| ScheduleContext {
            name: schedule.name.clone(),
            queue: schedule.queue.clone(),
            cadence: schedule.cadence.describe(),
            missed: schedule.missed.as_str(),
            grace: format_duration(schedule.grace),
        })
        .collect();
    let service = &spec.service;
    // The Redis users (redis/users.acl) the command lines log in as.
    let users = context! {
        operator => acl::user_name(service, RUNBOOK_ROLE),
        monitor => acl::user_name(service, Role::Monitor),
        deployer => acl::user_name(service, APPLY_ROLE),
    };
    let contents = render(
        "RUNBOOK.md",
        context! {
            header => header_in(CommentSyntax::Html, spec_file),
            service,
            spec => spec_file,
            rules => prometheus::FILE_NAME,
            library => functions::library_name(service),
            users,
            queues,
            service_alerts,
            // Set when a queue uses PostgreSQL: the runbook then says how to
            // apply the migrations and look at the outbox and results.
            postgres => PostgresContext::new(spec),
            // The runbook then says how to check a tick.
            schedules,
        },
    )?;
    Ok(GeneratedFile::new(FILE_NAME, contents))
}

/// One schedule, as the runbook's Schedules section names it.
#[derive(Serialize)]
struct ScheduleContext {
    name: String,
    queue: String,
    /// `cron "0 2 * * *" in Europe/Berlin`, `every 1s`.
    cadence: String,
    missed: &'static str,
    grace: String,
}

/// What the PostgreSQL section of the runbook names.
#[derive(Serialize)]
struct PostgresContext {
    schema: String,
    /// `sql/0001_....sql`, relative to the deploy directory, in order.
    migrations: Vec<String>,
    /// The queues with `results: postgres` (their handler name is theirs).
    results: Vec<String>,
    /// The queues with `outbox: true`.
    outbox: Vec<String>,
    /// The migration Job and the outbox publisher's Deployment, when the
    /// Kubernetes manifests have them (`kubernetes.postgres_secret`).
    kubernetes: Option<PostgresKubernetes>,
}

#[derive(Serialize)]
struct PostgresKubernetes {
    namespace: String,
    job: String,
    /// Set when a queue has `outbox: true`.
    publisher: Option<String>,
}

impl PostgresContext {
    fn new(spec: &Spec) -> Option<Self> {
        let postgres = spec.postgres.as_ref()?;
        let names = |keep: fn(&Queue) -> bool| {
            spec.queues
                .iter()
                .filter(|q| keep(q))
                .map(|q| q.name.clone())
                .collect()
        };
        Some(PostgresContext {
            schema: postgres.schema.clone(),
            migrations: sql::migrations(spec)
                .into_iter()
                .map(|m| format!("{}/{}", sql::DIR, m.file_name))
                .collect(),
            results: names(|q| q.results == Some(ResultStore::Postgres)),
            outbox: names(|q| q.outbox),
            kubernetes: spec
                .kubernetes
                .postgres_secret
                .is_some()
                .then(|| PostgresKubernetes {
                    namespace: spec.kubernetes.namespace.clone(),
                    job: super::k8s::migrate_job_name(spec),
                    publisher: spec
                        .uses_outbox()
                        .then(|| super::k8s::outbox_publisher_name(spec)),
                }),
        })
    }
}

/// The settings of one queue that the runbook's advice quotes.
#[derive(Serialize)]
struct QueueContext {
    name: String,
    group: String,
    partitions: u16,
    last_partition: u16,
    /// `high (weight 6), normal (weight 3, default)`; empty without lanes.
    lanes: String,
    handler_timeout: String,
    concurrency: u32,
    claim_min_idle: String,
    claim_every: String,
    takeover: String,
    max_attempts: u32,
    max_deliveries: u32,
    dead_letter_retention: String,
    dead_letter_owner: Option<String>,
    admission: Option<String>,
    retention_min_age: String,
    trim_every: String,
    /// Whether `k8s/trim-cronjob.yaml` trims this queue, not its workers.
    trim_by_cronjob: bool,
    autoscale: Option<AutoscaleContext>,
    alerts: Vec<Alert>,
}

/// What `k8s/keda.yaml` scales the queue's workers on, for the runbook to explain.
#[derive(Serialize)]
struct AutoscaleContext {
    min: u32,
    max: u32,
    oldest_ready_age: Option<String>,
    lag: Option<u64>,
    /// `redis-streams`, or `redis-cluster-streams` on a Cluster.
    lag_trigger: &'static str,
    /// The ScaledObject's name and namespace, for `kubectl`.
    scaled_object: String,
    namespace: String,
}

impl QueueContext {
    fn new(spec: &Spec, queue: &Queue, alerts: Vec<Alert>) -> Self {
        QueueContext {
            name: queue.name.clone(),
            group: queue.group.name.clone(),
            partitions: queue.partitions,
            last_partition: queue.partitions.saturating_sub(1),
            lanes: queue
                .lanes
                .iter()
                .map(|lane| {
                    format!(
                        "`{}` (weight {}{})",
                        lane.name,
                        lane.weight,
                        if lane.default { ", default" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            handler_timeout: format_duration(queue.handler.timeout),
            concurrency: queue.handler.concurrency,
            claim_min_idle: format_duration(queue.claim.min_idle),
            claim_every: format_duration(queue.claim.every),
            takeover: format_duration(queue.claim.every * 4),
            max_attempts: queue.retry.max_attempts,
            max_deliveries: queue.poison.max_deliveries,
            dead_letter_retention: format_duration(queue.dead_letter.retention),
            dead_letter_owner: queue.dead_letter.owner.clone(),
            admission: queue.admission.max_oldest_ready_age.map(format_duration),
            retention_min_age: format_duration(queue.retention.min_age),
            trim_every: format_duration(queue.retention.trim_every),
            trim_by_cronjob: queue.retention.trim != TrimMode::InProcess,
            autoscale: queue.autoscale.as_ref().map(|autoscale| AutoscaleContext {
                min: autoscale.min,
                max: autoscale.max,
                oldest_ready_age: autoscale.oldest_ready_age.map(format_duration),
                lag: autoscale.lag,
                lag_trigger: match spec.redis.deployment {
                    Deployment::Standalone => "redis-streams",
                    Deployment::Cluster => "redis-cluster-streams",
                },
                scaled_object: super::k8s::deployment_name(spec, queue),
                namespace: spec.kubernetes.namespace.clone(),
            }),
            alerts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;

    const SPEC: &str = "\
version: 1
service: billing
envelopes:
  Charge:
    schema: 1
    fields:
      account_ref: { type: string, max_bytes: 64 }
queues:
  charges:
    envelope: Charge
    partitions: 4
    partition_by: [job_id]
    admission: { max_oldest_ready_age: 2m }
    alerts: { oldest_pending_age: 90s, dead_letters: 3 }
  refunds:
    envelope: Charge
    partition_by: [job_id]
";

    fn runbook() -> String {
        let checked = spec::check_str(SPEC, "queues.yaml");
        let spec = checked.spec.expect("the test spec is valid");
        generate(&spec, "../queues.yaml").unwrap().contents
    }

    #[test]
    fn opens_with_the_header_as_html_comments() {
        let text = runbook();
        assert!(
            text.starts_with("<!-- Code generated by queuegen"),
            "{text}"
        );
    }

    #[test]
    fn every_alert_has_its_heading_once() {
        let text = runbook();
        let checked = spec::check_str(SPEC, "queues.yaml");
        for group in prometheus::alert_groups(&checked.spec.unwrap()) {
            for alert in group.alerts {
                let heading = format!("\n### {}\n", alert.heading);
                assert_eq!(text.matches(&heading).count(), 1, "{heading}");
            }
        }
    }

    #[test]
    fn command_lines_name_the_spec_queue_and_partitions() {
        let text = runbook();
        assert!(text.contains("queuegen status ../queues.yaml --queue charges\n"));
        assert!(text
            .contains("queuegen pending ../queues.yaml --queue charges --partition <partition>"));
        assert!(text
            .contains("queuegen dlq list ../queues.yaml --queue charges --partition <partition>"));
        assert!(text.contains("`<partition>` is the alert's `partition` label, 0 to 3"));
    }
}
