//! Kubernetes manifests (`k8s/`): per queue a worker Deployment and its
//! PodDisruptionBudget, the ConfigMap carrying the spec and its hash, the
//! `queuegen monitor` Deployment and Service, the `queuegen trim` CronJobs
//! when trimming is not in process, and KEDA ScaledObjects for autoscaled queues.
//! With `kubernetes.postgres_secret` (a queue uses PostgreSQL): DATABASE_URL
//! in the workers of `results: postgres` queues, the outbox publisher's
//! Deployment when a queue has `outbox: true`, and the migrations of `sql/`
//! in a ConfigMap with the Job that applies them.
//!
//! Every string that comes from the spec is written as a JSON string (valid
//! YAML), so no name or URL can change the structure of a manifest.

use std::path::PathBuf;

use minijinja::{context, Value};
use serde::Serialize;

use super::super::templates::render;
use super::super::{header_in, prose_list, CommentSyntax, GeneratedFile};
use super::{quoted, sha256_hex, sql};
use crate::error::{Error, Result};
use crate::spec::limits::{cron_schedule, shutdown_grace_margin, termination_grace_seconds};
use crate::spec::model::{Deployment, Queue, ResultStore, Spec, TrimMode};
use crate::spec::units::format_duration;

/// Where the ConfigMap's spec is mounted in the monitor and trim pods.
pub const SPEC_MOUNT: &str = "/etc/queuegen";
/// The pod-template annotation holding the spec's SHA-256: a changed spec
/// changes every pod template, so the Deployments roll.
pub const SPEC_HASH_ANNOTATION: &str = "queuegen.dev/spec-sha256";
use queuegen_runtime::roles::Role;
/// Environment the worker Deployment sets (docs/deploy.md): the runtime's
/// names, so the manifests and `Worker::with_env` cannot disagree.
use queuegen_runtime::{CONSUMER_ENV, METRICS_ADDR_ENV, QUEUE_ENV};
/// The PostgreSQL URL in the pods that need it, and its key in the Secret
/// `kubernetes.postgres_secret`.
pub const DATABASE_URL_ENV: &str = "DATABASE_URL";
pub const DATABASE_URL_KEY: &str = "database-url";
/// The keys of the Secret `kubernetes.redis_secret`: one URL per role, so
/// each component logs in as the ACL user of its role (`redis/users.acl`),
/// and the address and the monitor's password for KEDA's lag trigger.
pub fn redis_url_key(role: Role) -> String {
    format!("{}-url", role.name())
}
pub const REDIS_ADDRESS_KEY: &str = "address";
/// KEDA's lag trigger reads as the read-only monitor user: it runs
/// `XINFO GROUPS`, `XPENDING` and `XLEN`, all of them the monitor's.
pub const KEDA_ROLE: Role = Role::Monitor;
pub fn redis_password_key(role: Role) -> String {
    format!("{}-password", role.name())
}
/// The variables of the worker container that KEDA's lag trigger resolves
/// (`*FromEnv` reads the scale target's container): never read by the worker.
pub const KEDA_USERNAME_ENV: &str = "KEDA_REDIS_USERNAME";
pub const KEDA_PASSWORD_ENV: &str = "KEDA_REDIS_PASSWORD";
/// The role each generated component connects as.
pub const WORKER_ROLE: Role = Role::Worker;
pub const MONITOR_ROLE: Role = Role::Monitor;
/// `queuegen trim` is an operator's command (`Role::Operator`).
pub const TRIM_ROLE: Role = Role::Operator;
/// The outbox publisher runs in the worker image with the worker's user,
/// whose functions include the producer's (`Role::functions`).
pub const OUTBOX_PUBLISHER_ROLE: Role = Role::Worker;

/// What the outbox publisher's pods set: the worker binary then runs the
/// publisher (`true`) and no queue worker (`QUEUEGEN_QUEUE=none`).
pub const OUTBOX_PUBLISHER_ENV: &str = "QUEUEGEN_OUTBOX_PUBLISHER";
/// Publishers the Deployment runs: more than one, so that publishing goes
/// on while one pod restarts or is evicted; each partition is still
/// published by one at a time (its advisory lock).
pub const OUTBOX_PUBLISHER_REPLICAS: u32 = 2;
/// Where the migration Job mounts the ConfigMap with the files of `sql/`.
pub const MIGRATIONS_MOUNT: &str = "/etc/queuegen/sql";
/// How long a finished migration Job is kept (for its log) before
/// Kubernetes deletes it.
const MIGRATE_TTL: u64 = 3600;
/// The longest the migration Job runs, all retries included.
const MIGRATE_DEADLINE: u64 = 600;
/// Pods the migration Job starts again after a failure.
const MIGRATE_BACKOFF_LIMIT: u32 = 5;

/// The `k8s/` files of `spec`, whose YAML text is `source` (the ConfigMap
/// carries it verbatim, so `monitor` and `trim` read exactly the reviewed file).
pub fn generate(spec: &Spec, spec_file: &str, source: &str) -> Result<Vec<GeneratedFile>> {
    check_names(spec)?;
    let header = header_in(CommentSyntax::Hash, spec_file);
    let common = Common::new(spec, source);
    // Every manifest's template reads the header, `common` and values of its own.
    let manifest = |name: &str, template: &'static str, own: Value| -> Result<GeneratedFile> {
        let contents = render(template, context! { header, common, ..own })?;
        Ok(GeneratedFile::new(
            PathBuf::from("k8s").join(name),
            contents,
        ))
    };
    let configmap = context! { source => block_scalar(source) };
    let mut files = vec![manifest("configmap.yaml", "k8s/configmap.yaml", configmap)?];
    for queue in &spec.queues {
        let name = format!("worker-{}.yaml", object_name(&queue.name));
        let queue = QueueContext::new(spec, queue);
        files.push(manifest(&name, "k8s/worker.yaml", context! { queue })?);
    }
    files.push(manifest("monitor.yaml", "k8s/monitor.yaml", context! {})?);
    let trimmed: Vec<TrimContext> = spec
        .queues
        .iter()
        .filter(|q| q.retention.trim == TrimMode::CronJob)
        .map(|q| TrimContext::new(spec, q))
        .collect::<Result<_>>()?;
    if !trimmed.is_empty() {
        files.push(manifest(
            "trim-cronjob.yaml",
            "k8s/trim-cronjob.yaml",
            context! { queues => trimmed },
        )?);
    }
    let scaled: Vec<ScaledContext> = spec
        .queues
        .iter()
        .filter_map(|q| ScaledContext::new(spec, q))
        .collect();
    if !scaled.is_empty() {
        files.push(manifest(
            "keda.yaml",
            "k8s/keda.yaml",
            context! { queues => scaled },
        )?);
    }
    if common.postgres_secret.is_some() {
        if spec.uses_outbox() {
            let publisher = PublisherContext::new(spec);
            files.push(manifest(
                "outbox-publisher.yaml",
                "k8s/outbox-publisher.yaml",
                context! { publisher },
            )?);
        }
        let migrations = MigrationsContext::new(spec, spec_file)?;
        files.push(manifest(
            "postgres-migrations.yaml",
            "k8s/postgres-migrations.yaml",
            context! { migrations },
        )?);
    }
    Ok(files)
}

/// The Secret with the PostgreSQL URL, when the manifests need it: a queue
/// uses PostgreSQL and `kubernetes.postgres_secret` names it (`check`
/// requires it then, unless the spec has no `kubernetes` section).
fn postgres_secret(spec: &Spec) -> Option<&str> {
    spec.postgres
        .as_ref()
        .and(spec.kubernetes.postgres_secret.as_deref())
}

/// The SHA-256 of the spec text, hex: the ConfigMap's `sha256` and every
/// pod template's [`SPEC_HASH_ANNOTATION`].
pub fn spec_hash(source: &str) -> String {
    sha256_hex(source)
}

/// A queue name as a Kubernetes object name: `_` is not allowed there.
fn object_name(queue: &str) -> String {
    queue.replace('_', "-")
}

/// Kubernetes' length limits on what the manifests name: label values and
/// Service names (DNS-1035 labels) at most 63 characters, CronJob names at
/// most 52 (its Jobs append 11). `kubectl apply` would refuse longer ones.
const LABEL_MAX: usize = 63;
const CRONJOB_NAME_MAX: usize = 52;

/// Names the manifests cannot carry, and two queues whose names differ only
/// by `_` and `-` (they would write the same objects).
fn check_names(spec: &Spec) -> Result<()> {
    // (what, name, limit), checked in this order.
    let what = "the service name (a label value)".to_owned();
    let mut names = vec![(what, spec.service.clone(), LABEL_MAX)];
    let what = "the monitor's Service name".to_owned();
    names.push((what, service_object(spec, "monitor"), LABEL_MAX));
    // A Job's name is a label value of its pods (`job-name`).
    if postgres_secret(spec).is_some() {
        let what = "the PostgreSQL migration Job's name".to_owned();
        names.push((what, migrate_job_name(spec), LABEL_MAX));
    }
    for queue in &spec.queues {
        let what = format!("queue `{}`: its name (a label value)", queue.name);
        names.push((what, queue.name.clone(), LABEL_MAX));
        if queue.retention.trim == TrimMode::CronJob {
            let what = format!("queue `{}`: its trim CronJob name", queue.name);
            names.push((what, trim_cronjob_name(spec, queue), CRONJOB_NAME_MAX));
        }
    }
    if let Some((what, name, max)) = names.into_iter().find(|(_, name, max)| name.len() > *max) {
        return Err(Error::Unsupported(format!(
            "{what} `{name}` is {} characters; Kubernetes allows at most {max}: shorten the service or queue name",
            name.len()
        )));
    }
    for (i, a) in spec.queues.iter().enumerate() {
        if let Some(b) = spec.queues[..i]
            .iter()
            .find(|b| object_name(&b.name) == object_name(&a.name))
        {
            return Err(Error::Unsupported(format!(
                "queues `{}` and `{}` would share the Kubernetes name `{}`: rename one",
                b.name,
                a.name,
                object_name(&a.name)
            )));
        }
    }
    Ok(())
}

/// The spec as a literal block under `queues.yaml:` (indented four spaces),
/// with the chomping indicator that keeps its trailing newlines exactly; a
/// quoted string when a block cannot hold it verbatim.
fn block_scalar(source: &str) -> String {
    let first = source.lines().next().unwrap_or("");
    let representable = !source.is_empty()
        && !first.starts_with([' ', '\t'])
        && !source.contains(['\r', '\t'])
        && source.lines().all(|l| !l.ends_with(' '));
    if !representable {
        return quoted(source);
    }
    let body = source.trim_end_matches('\n');
    let trailing_newlines = source.len() - body.len();
    let chomp = match trailing_newlines {
        0 => "|-",
        1 => "|",
        _ => "|+",
    };
    let mut out = String::from(chomp);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str("    ");
            out.push_str(line);
        }
    }
    out + &"\n".repeat(trailing_newlines.saturating_sub(1))
}

/// What every manifest shares.
#[derive(Serialize)]
struct Common {
    service: String,
    namespace: String,
    image: String,
    monitor_image: String,
    redis_secret: String,
    /// The Secret's key of each component's `REDIS_URL`.
    worker_url_key: String,
    monitor_url_key: String,
    trim_url_key: String,
    publisher_url_key: String,
    address_key: &'static str,
    /// Set when the manifests carry PostgreSQL (see [`postgres_secret`]).
    postgres_secret: Option<String>,
    psql_image: String,
    database_env: &'static str,
    database_key: &'static str,
    metrics_port: u16,
    metrics_addr: String,
    spec_hash: String,
    hash_annotation: &'static str,
    configmap: String,
    spec_path: String,
    spec_mount: &'static str,
    monitor_name: String,
    /// The `app.kubernetes.io/name` label value (not quoted: a DNS label).
    app: String,
}

impl Common {
    fn new(spec: &Spec, source: &str) -> Self {
        let k = &spec.kubernetes;
        Common {
            service: quoted(&spec.service),
            namespace: quoted(&k.namespace),
            image: quoted(&k.image),
            monitor_image: quoted(&k.monitor_image),
            redis_secret: quoted(&k.redis_secret),
            worker_url_key: redis_url_key(WORKER_ROLE),
            monitor_url_key: redis_url_key(MONITOR_ROLE),
            trim_url_key: redis_url_key(TRIM_ROLE),
            publisher_url_key: redis_url_key(OUTBOX_PUBLISHER_ROLE),
            address_key: REDIS_ADDRESS_KEY,
            postgres_secret: postgres_secret(spec).map(quoted),
            psql_image: quoted(&k.psql_image),
            database_env: DATABASE_URL_ENV,
            database_key: DATABASE_URL_KEY,
            metrics_port: k.metrics_port,
            metrics_addr: quoted(&format!("0.0.0.0:{}", k.metrics_port)),
            spec_hash: quoted(&spec_hash(source)),
            hash_annotation: SPEC_HASH_ANNOTATION,
            configmap: quoted(&service_object(spec, "spec")),
            spec_path: quoted(&format!("{SPEC_MOUNT}/queues.yaml")),
            spec_mount: SPEC_MOUNT,
            monitor_name: quoted(&service_object(spec, "monitor")),
            app: quoted(&spec.service),
        }
    }
}

#[derive(Serialize)]
struct QueueContext {
    name: String,
    label: String,
    deployment: String,
    queue_env: &'static str,
    consumer_env: &'static str,
    metrics_env: &'static str,
    /// None when KEDA owns the replica count.
    replicas: Option<u32>,
    grace_seconds: u64,
    grace_why: String,
    cpu: String,
    memory: String,
    cpu_limit: Option<String>,
    memory_limit: String,
    /// The worker container carries the address and KEDA's user and
    /// password for KEDA's lag trigger.
    lag_env: bool,
    keda_username_env: &'static str,
    keda_username: String,
    keda_password_env: &'static str,
    keda_password_key: String,
    /// The worker needs DATABASE_URL: `results: postgres`.
    database: bool,
    address_env: &'static str,
}

impl QueueContext {
    fn new(spec: &Spec, queue: &Queue) -> Self {
        let budget = queue.handler.shutdown_budget;
        let margin = shutdown_grace_margin(budget);
        let grace_seconds = termination_grace_seconds(budget);
        QueueContext {
            name: quoted(&queue.name),
            label: quoted(&queue.name),
            deployment: quoted(&deployment_name(spec, queue)),
            queue_env: QUEUE_ENV,
            consumer_env: CONSUMER_ENV,
            metrics_env: METRICS_ADDR_ENV,
            replicas: queue.autoscale.is_none().then_some(queue.pods.replicas),
            grace_seconds,
            grace_why: format!(
                "handler.shutdown_budget {} + margin {} (max(10s, budget / 4)) = {grace_seconds}s",
                format_duration(budget),
                format_duration(margin)
            ),
            cpu: quoted(&queue.pods.cpu),
            memory: quoted(&queue.pods.memory),
            cpu_limit: queue.pods.cpu_limit.as_deref().map(quoted),
            memory_limit: quoted(&queue.pods.memory_limit),
            lag_env: queue.autoscale.as_ref().is_some_and(|a| a.lag.is_some()),
            keda_username_env: KEDA_USERNAME_ENV,
            keda_username: quoted(&super::acl::user_name(&spec.service, KEDA_ROLE)),
            keda_password_env: KEDA_PASSWORD_ENV,
            keda_password_key: redis_password_key(KEDA_ROLE),
            database: postgres_secret(spec).is_some()
                && queue.results == Some(ResultStore::Postgres),
            address_env: address_env(spec),
        }
    }
}

/// `<service>-<what>`: every object the manifests name starts with the service.
fn service_object(spec: &Spec, what: &str) -> String {
    format!("{}-{what}", object_name(&spec.service))
}

/// The name of `queue`'s worker Deployment, PodDisruptionBudget and ScaledObject.
pub fn deployment_name(spec: &Spec, queue: &Queue) -> String {
    service_object(spec, &object_name(&queue.name))
}

/// The CronJob that trims `queue` when its workers do not; the alert rules
/// watch its last success.
pub fn trim_cronjob_name(spec: &Spec, queue: &Queue) -> String {
    service_object(spec, &format!("trim-{}", object_name(&queue.name)))
}

/// The outbox publisher's Deployment and PodDisruptionBudget.
pub fn outbox_publisher_name(spec: &Spec) -> String {
    service_object(spec, "outbox-publisher")
}

/// The Job that applies the PostgreSQL migrations.
pub fn migrate_job_name(spec: &Spec) -> String {
    service_object(spec, "postgres-migrate")
}

/// The ConfigMap holding the files of `sql/` for the migration Job.
fn migrations_configmap_name(spec: &Spec) -> String {
    service_object(spec, "postgres-migrations")
}

/// The variable KEDA's lag trigger reads the Redis address(es) from.
fn address_env(spec: &Spec) -> &'static str {
    match spec.redis.deployment {
        Deployment::Standalone => "REDIS_ADDRESS",
        Deployment::Cluster => "REDIS_ADDRESSES",
    }
}

#[derive(Serialize)]
struct PublisherContext {
    deployment: String,
    replicas: u32,
    /// The `outbox: true` queues, for the comment: `a`, `b` and `c`.
    queues: String,
    queue_env: &'static str,
    publisher_env: &'static str,
}

impl PublisherContext {
    fn new(spec: &Spec) -> Self {
        let names: Vec<String> = spec
            .queues
            .iter()
            .filter(|q| q.outbox)
            .map(|q| format!("`{}`", q.name))
            .collect();
        PublisherContext {
            deployment: quoted(&outbox_publisher_name(spec)),
            replicas: OUTBOX_PUBLISHER_REPLICAS,
            queues: prose_list(&names),
            queue_env: QUEUE_ENV,
            publisher_env: OUTBOX_PUBLISHER_ENV,
        }
    }
}

#[derive(Serialize)]
struct MigrationsContext {
    configmap: String,
    job: String,
    mount: &'static str,
    /// The files of `sql/`, in file-name (application) order.
    files: Vec<MigrationFile>,
    backoff_limit: u32,
    deadline_seconds: u64,
    ttl_seconds: u64,
    ttl_why: String,
}

#[derive(Serialize)]
struct MigrationFile {
    /// The file name, as it is in `sql/` and the mounted directory.
    name: String,
    /// The ConfigMap key (the file name, quoted).
    key: String,
    /// The file's text, exactly as in `sql/`, as a YAML scalar.
    text: String,
}

impl MigrationsContext {
    fn new(spec: &Spec, spec_file: &str) -> Result<Self> {
        let mut files: Vec<MigrationFile> = Vec::new();
        for generated in sql::generate(spec, spec_file) {
            let name = generated
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            // A ConfigMap key, and a word the Job's shell script can name unquoted.
            let plain = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !plain {
                return Err(Error::Unsupported(format!(
                    "migration file `{}` cannot be a ConfigMap key",
                    generated.path.display()
                )));
            }
            files.push(MigrationFile {
                key: quoted(&name),
                text: block_scalar(&generated.contents),
                name,
            });
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(MigrationsContext {
            configmap: quoted(&migrations_configmap_name(spec)),
            job: quoted(&migrate_job_name(spec)),
            mount: MIGRATIONS_MOUNT,
            files,
            backoff_limit: MIGRATE_BACKOFF_LIMIT,
            deadline_seconds: MIGRATE_DEADLINE,
            ttl_seconds: MIGRATE_TTL,
            ttl_why: format_duration(std::time::Duration::from_secs(MIGRATE_TTL)),
        })
    }
}

#[derive(Serialize)]
struct TrimContext {
    name: String,
    label: String,
    cronjob: String,
    schedule: String,
    every: String,
    deadline_seconds: u64,
}

impl TrimContext {
    fn new(spec: &Spec, queue: &Queue) -> Result<Self> {
        let every = queue.retention.trim_every;
        let schedule = cron_schedule(every).ok_or_else(|| {
            Error::Unsupported(format!(
                "queue `{}`: retention.trim_every {} is not a cron schedule",
                queue.name,
                format_duration(every)
            ))
        })?;
        Ok(TrimContext {
            name: quoted(&queue.name),
            label: quoted(&queue.name),
            cronjob: quoted(&trim_cronjob_name(spec, queue)),
            schedule: quoted(&schedule),
            every: format_duration(every),
            // A trim still running at the next schedule is stopped, so
            // runs never pile up behind a stuck one.
            deadline_seconds: every.as_secs(),
        })
    }
}

#[derive(Serialize)]
struct ScaledContext {
    name: String,
    label: String,
    deployment: String,
    min: u32,
    max: u32,
    /// (query, threshold seconds) of the prometheus trigger.
    age: Option<(String, String, String)>,
    lag: Option<String>,
    lag_type: &'static str,
    address_key: &'static str,
    address_env: &'static str,
    username_env: &'static str,
    password_env: &'static str,
    streams: Vec<String>,
    group: String,
}

impl ScaledContext {
    fn new(spec: &Spec, queue: &Queue) -> Option<Self> {
        let autoscale = queue.autoscale.as_ref()?;
        let age = autoscale.oldest_ready_age.map(|age| {
            let query = format!(
                "max(queuegen_queue_oldest_ready_age_seconds{{queue=\"{}\",group=\"{}\"}})",
                queue.name, queue.group.name
            );
            let seconds = age.as_secs_f64();
            (
                quoted(&spec.kubernetes.prometheus_url),
                quoted(&query),
                quoted(&trim_float(seconds)),
            )
        });
        let (lag_type, address_key) = match spec.redis.deployment {
            Deployment::Standalone => ("redis-streams", "addressFromEnv"),
            Deployment::Cluster => ("redis-cluster-streams", "addressesFromEnv"),
        };
        let config = crate::gen::runtime_config::queue_config(spec, queue);
        Some(ScaledContext {
            name: quoted(&queue.name),
            label: quoted(&queue.name),
            deployment: quoted(&deployment_name(spec, queue)),
            min: autoscale.min,
            max: autoscale.max,
            age,
            lag: autoscale.lag.map(|lag| quoted(&lag.to_string())),
            lag_type,
            address_key,
            address_env: address_env(spec),
            username_env: KEDA_USERNAME_ENV,
            password_env: KEDA_PASSWORD_ENV,
            streams: config.ready_keys().iter().map(|k| quoted(k)).collect(),
            group: quoted(&queue.group.name),
        })
    }
}

/// `30` for 30.0, `1.5` for 1.5.
fn trim_float(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;

    /// A spec of service `service` with one queue `queue`, trimmed by CronJob.
    fn spec_named(service: &str, queue: &str) -> Spec {
        let source = format!(
            "version: 1
service: {service}
envelopes:
  Charge:
    schema: 1
    fields:
      account_ref: {{ type: string, max_bytes: 64 }}
queues:
  {queue}:
    envelope: Charge
    partition_by: [job_id]
    retention: {{ trim: cronjob, trim_every: 5m }}
"
        );
        let checked = spec::check_str(&source, "queues.yaml");
        checked.spec.expect("the test spec is valid")
    }

    #[test]
    fn names_kubernetes_would_refuse_are_an_error_naming_the_object_and_the_limit() {
        let fits = spec_named("billing", "charges");
        assert!(generate(&fits, "../queues.yaml", "").is_ok());

        // billing-trim- is 13 characters: a 40-character queue makes 53.
        let queue = "q".repeat(40);
        let err = generate(&spec_named("billing", &queue), "../queues.yaml", "")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("billing-trim-{queue}"))
                && err.contains("53 characters")
                && err.contains("at most 52"),
            "{err}"
        );

        let service = "s".repeat(60);
        let err = generate(&spec_named(&service, "charges"), "../queues.yaml", "")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("monitor's Service name") && err.contains("at most 63"),
            "{err}"
        );
    }

    #[test]
    fn the_migration_job_name_must_be_a_label_value() {
        let with_postgres = |service: &str| {
            let source = format!(
                "version: 1
service: {service}
kubernetes: {{ postgres_secret: pg }}
envelopes:
  Charge:
    schema: 1
queues:
  charges:
    envelope: Charge
    results: postgres
"
            );
            let checked = spec::check_str(&source, "queues.yaml");
            checked.spec.expect("the test spec is valid")
        };
        // -postgres-migrate is 17 characters: 46 + 17 = 63 fits, 47 does not.
        assert!(generate(&with_postgres(&"s".repeat(46)), "../queues.yaml", "").is_ok());
        let err = generate(&with_postgres(&"s".repeat(47)), "../queues.yaml", "")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("migration Job's name") && err.contains("64 characters"),
            "{err}"
        );
        // Without the Secret there is no Job, and no limit of its own.
        let mut spec = with_postgres(&"s".repeat(47));
        spec.kubernetes.postgres_secret = None;
        assert!(generate(&spec, "../queues.yaml", "").is_ok());
    }

    #[test]
    fn block_scalars_keep_the_text_exactly() {
        for (source, chomp) in [("a: 1\n", "|"), ("a: 1", "|-"), ("a: 1\n\n", "|+")] {
            let block = block_scalar(source);
            assert!(block.starts_with(chomp), "{block}");
            let yaml = format!("k: {block}\n");
            let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
            assert_eq!(parsed["k"].as_str(), Some(source), "{yaml:?}");
        }
        let spaced = "a: 1   \n";
        assert_eq!(block_scalar(spaced), quoted(spaced));
    }

    #[test]
    fn the_hash_is_the_sha256_of_the_text() {
        assert_eq!(
            spec_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
