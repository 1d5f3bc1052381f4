//! The normalized spec model: every default filled in, every name checked.
//!
//! Produced by `spec::check_str` / `spec::check_file` from format v1 only
//! when validation found no errors; generators read this and never the YAML.
//! Derived limits (claim margin, header allowance) are in `spec::limits`.

use std::time::Duration;

pub use queuegen_core::pipeline::{Join, OnDeadLetter, Pipeline, Stage};
pub use queuegen_core::wire::EntryShape;

/// A whole validated spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The format version the file declared (only 1 exists).
    pub version: u32,
    /// Names the Function library, ACL users and metrics.
    pub service: String,
    pub redis: RedisSettings,
    /// Envelopes in file order.
    pub envelopes: Vec<Envelope>,
    /// Queues in file order.
    pub queues: Vec<Queue>,
    /// Where the generated Kubernetes manifests run.
    pub kubernetes: Kubernetes,
    /// queuegen's tables in PostgreSQL: `Some` exactly when a queue has
    /// `results: postgres` or `outbox: true`, with every default filled in.
    pub postgres: Option<PostgresSettings>,
    /// Periodic jobs, in file order. Default none.
    pub schedules: Vec<Schedule>,
    /// Pipelines, in file order. Default none.
    pub pipelines: Vec<Pipeline>,
}

/// A periodic job: each tick of its cadence publishes one job to `queue`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Lowercase name; part of every job_id and marker of the schedule.
    pub name: String,
    /// The queue the jobs go to (it exists).
    pub queue: String,
    /// `cron` in `timezone` (default UTC), or `every`.
    pub cadence: crate::cadence::Cadence,
    /// The `tenant` header of the jobs. Default: the service name.
    pub tenant: String,
    /// Body fields as canonical text of their types, in the envelope's field order.
    pub body: Vec<(String, String)>,
    /// What to do about ticks nobody published in time. Default skip.
    pub missed: Missed,
    /// How late a tick may be published as on time. Default min(every, 1m), 1m for cron.
    pub grace: Duration,
}

/// `missed:` of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Ticks older than the grace are not published.
    Skip,
    /// Of the ticks older than the grace, the most recent is published once.
    RunOnce,
}

impl Missed {
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::RunOnce => "run_once",
        }
    }
}

/// Where queuegen's PostgreSQL tables (results, fences, outbox) live, and
/// how many connections the generated `connect_postgres` pool opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresSettings {
    /// The schema of the tables: a plain lowercase SQL identifier, never
    /// quoted in the SQL. Default `queuegen`.
    pub schema: String,
    /// Most connections one process opens. Default 16.
    pub pool_size: u32,
}

/// Where and with what the generated Kubernetes manifests run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubernetes {
    /// Default: the service name.
    pub namespace: String,
    /// The worker image. Default `{service}-worker:latest`.
    pub image: String,
    /// The queuegen CLI image (monitor, trim). Default `queuegen:{version}`.
    pub monitor_image: String,
    /// The Secret with the Redis connection (`url`, `address`, `password`). Default `{service}-redis`.
    pub redis_secret: String,
    /// The Secret with the PostgreSQL URL (key `database-url`). Set only
    /// when a queue uses PostgreSQL; `check` requires it then if the spec
    /// has a `kubernetes` section. `None`: the manifests carry nothing of
    /// PostgreSQL.
    pub postgres_secret: Option<String>,
    /// The image of the migration Job (`psql` and `sh`). Default `postgres:16-alpine`.
    pub psql_image: String,
    /// Port of /metrics, /healthz and /readyz. Default 9464.
    pub metrics_port: u16,
    /// Prometheus that KEDA queries. Default `http://prometheus.monitoring.svc:9090`.
    pub prometheus_url: String,
}

impl Spec {
    pub fn envelope(&self, name: &str) -> Option<&Envelope> {
        self.envelopes.iter().find(|e| e.name == name)
    }

    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The schedules that publish to `queue`.
    pub fn schedules_of<'a>(&'a self, queue: &'a str) -> impl Iterator<Item = &'a Schedule> + 'a {
        self.schedules.iter().filter(move |s| s.queue == queue)
    }

    /// The pipeline `queue` is a stage of, if any.
    pub fn pipeline_of(&self, queue: &str) -> Option<&Pipeline> {
        self.pipelines.iter().find(|p| p.stage(queue).is_some())
    }

    /// Whether any queue has `outbox: true`.
    pub fn uses_outbox(&self) -> bool {
        self.queues.iter().any(|q| q.outbox)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RedisSettings {
    /// First segment of every key. Default: the service name.
    pub key_prefix: String,
    /// Default: standalone.
    pub deployment: Deployment,
    /// Lowest Redis version the deployment runs, e.g. "7.0". Default "7.0".
    pub min_version: String,
    /// Replicas a publish waits for (`WAIT`) before it returns. Default 0: none.
    pub wait_replicas: u32,
    /// The longest a publish waits for them. Default 1s.
    pub wait_timeout: std::time::Duration,
    /// How the append-only file is fsynced (redis/queue.conf). Default everysec.
    pub persistence: Persistence,
}

/// `appendfsync` of the generated redis.conf fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// fsync once a second: a machine crash loses up to a second of writes.
    EverySec,
    /// fsync before every reply: nothing acknowledged is lost.
    Always,
}

impl Persistence {
    /// The `appendfsync` value.
    pub fn appendfsync(self) -> &'static str {
        match self {
            Persistence::EverySec => "everysec",
            Persistence::Always => "always",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    Standalone,
    Cluster,
}

/// One envelope type: a versioned, flat record of typed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Type name, UpperCamelCase; also the generated struct's name.
    pub name: String,
    /// Schema version producers write.
    pub schema: u32,
    /// Versions workers decode, always including `schema`. Default: `[schema]`.
    pub accepts: Vec<u32>,
    /// Body fields in file order (header fields are implicit).
    pub fields: Vec<Field>,
    /// What each schema version changed from the one before, by ascending
    /// version (2..=schema); versions without changes are left out.
    /// `spec::evolution` reconstructs older versions from them.
    pub changes: Vec<SchemaChange>,
}

/// How schema `version` differs from `version - 1`. Fields not named here
/// are carried over unchanged: a field's type never changes between versions.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaChange {
    /// From 2 to the envelope's schema.
    pub version: u32,
    /// Fields of `version` that `version - 1` did not have.
    pub added: Vec<String>,
    /// Fields of `version - 1` that `version` dropped, as they were defined.
    pub removed: Vec<Field>,
    /// Fields of `version - 1` that `version` carries under another name.
    pub renamed: Vec<Rename>,
    /// Who writes the conversion of `version - 1` into `version`.
    pub upcast: UpcastKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// The name in the previous version.
    pub from: String,
    /// The name in this version.
    pub to: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpcastKind {
    /// The generated code converts field by field, as the change declares.
    Generated,
    /// The team writes `From<Previous> for This` by hand.
    Manual,
}

impl Envelope {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// snake_case name; also the stream field name.
    pub name: String,
    pub ty: FieldType,
    /// May be absent from an entry. Default false.
    pub optional: bool,
    /// Value used when absent, normalized to canonical text of the field's
    /// type (`false`, `3`, `normal`; `default: "false"` on a bool reads as
    /// `false`). Never set together with `optional`.
    pub default: Option<String>,
    /// Upper bound of the encoded value, for strings. Default none.
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    String,
    Bool,
    U32,
    U64,
    I32,
    I64,
    /// RFC 3339 UTC with milliseconds.
    Timestamp,
    /// One of the listed snake_case values.
    Enum {
        values: Vec<String>,
    },
}

impl FieldType {
    /// Every type but `enum`, which carries its values.
    pub const SCALARS: [FieldType; 7] = [
        FieldType::String,
        FieldType::Bool,
        FieldType::U32,
        FieldType::U64,
        FieldType::I32,
        FieldType::I64,
        FieldType::Timestamp,
    ];

    /// The type a spec names `name` (`type: u32`); `values` are an enum's.
    pub fn from_spec_name(name: &str, values: Vec<String>) -> Option<FieldType> {
        if name == "enum" {
            return Some(FieldType::Enum { values });
        }
        FieldType::SCALARS
            .into_iter()
            .find(|ty| ty.spec_name() == name)
    }

    /// Largest encoded size a value of this type can have, when bounded.
    /// Strings are bounded only by their `max_bytes`.
    pub fn max_encoded_bytes(&self) -> Option<u64> {
        match self {
            FieldType::String => None,
            FieldType::Bool => Some(5),
            FieldType::U32 => Some(10),
            FieldType::U64 => Some(20),
            FieldType::I32 => Some(11),
            FieldType::I64 => Some(20),
            FieldType::Timestamp => Some(24),
            FieldType::Enum { values } => values.iter().map(|v| v.len() as u64).max(),
        }
    }

    /// The inclusive range of an integer type.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        match self {
            FieldType::U32 => Some((0, u32::MAX.into())),
            FieldType::U64 => Some((0, u64::MAX.into())),
            FieldType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
            FieldType::I64 => Some((i64::MIN.into(), i64::MAX.into())),
            _ => None,
        }
    }

    /// The name used in the spec (`type: u32`).
    pub fn spec_name(&self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Bool => "bool",
            FieldType::U32 => "u32",
            FieldType::U64 => "u64",
            FieldType::I32 => "i32",
            FieldType::I64 => "i64",
            FieldType::Timestamp => "timestamp",
            FieldType::Enum { .. } => "enum",
        }
    }
}

/// One work queue: its partitions, group, and every policy that governs a job in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// snake_case or kebab-case; no `{`, `}`, `:` or whitespace.
    pub name: String,
    /// Name of the envelope this queue carries.
    pub envelope: String,
    /// Default 1; at most 16384.
    pub partitions: u16,
    /// Header (`tenant`, `job_id`) or required body fields. Default: `[job_id]`.
    pub partition_by: Vec<String>,
    pub group: Group,
    pub handler: HandlerSettings,
    pub claim: Claim,
    pub retry: Retry,
    pub poison: Poison,
    pub dead_letter: DeadLetter,
    pub retention: Retention,
    pub payload: Payload,
    pub admission: Admission,
    pub alerts: Alerts,
    pub pods: Pods,
    /// KEDA autoscaling. Default none.
    pub autoscale: Option<Autoscale>,
    /// Where the handler's results are kept for it. Default none: the
    /// handler keeps them itself.
    pub results: Option<ResultStore>,
    /// Whether producers may enqueue this queue's jobs through the
    /// PostgreSQL transactional outbox. Default false.
    pub outbox: bool,
    /// `dedup`: refuse a second publish of a job_id within a window.
    pub dedup: Option<Dedup>,
    /// `lanes`: priority lanes, each its own stream per partition, read by
    /// weight. Empty: the queue has one unnamed lane.
    pub lanes: Vec<Lane>,
}

impl Queue {
    /// Whether the queue needs queuegen's PostgreSQL tables.
    pub fn uses_postgres(&self) -> bool {
        self.results == Some(ResultStore::Postgres) || self.outbox
    }

    /// The lane jobs published without a lane go to, which keeps the
    /// queue's unlaned keys; `None` when the queue has no lanes.
    pub fn default_lane(&self) -> Option<&Lane> {
        self.lanes.iter().find(|l| l.default)
    }
}

/// One priority lane of a queue (`lanes:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// Lowercase letters, digits and `-`; part of the lane's key names.
    pub name: String,
    /// The lane's share of intake under a backlog in every lane, relative to the others' weights.
    pub weight: u32,
    /// Whether jobs published without a lane go here; exactly one lane of a queue has it.
    pub default: bool,
}

/// `dedup`: at most one entry per job_id within `window`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedup {
    /// How long after a publish a second one of its job_id is a duplicate;
    /// at most `retention.min_age`, so the first entry is still there.
    pub window: Duration,
}

/// A store of handler results that queuegen provides (`results:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultStore {
    /// `PgResults`: the job's marker and the handler's business change
    /// commit in one PostgreSQL transaction.
    Postgres,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Default: `{queue}-workers`.
    pub name: String,
    /// Default `$`.
    pub start: GroupStart,
    /// A consumer idle this long that holds no pending entry is removed
    /// from the group by the partition's leader. Default 1d; at least 1m.
    pub prune_consumers_after: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupStart {
    /// `$`: only entries added after the group is created.
    NewEntries,
    /// `0-0`: everything in the stream.
    Beginning,
    /// A specific stream ID, `ms-seq` or `ms`.
    Id(String),
}

impl GroupStart {
    /// The argument given to `XGROUP CREATE`.
    pub fn as_redis_arg(&self) -> &str {
        match self {
            GroupStart::NewEntries => "$",
            GroupStart::Beginning => "0-0",
            GroupStart::Id(id) => id,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HandlerSettings {
    /// Default 30s.
    pub timeout: Duration,
    /// Default 8.
    pub concurrency: u32,
    /// Default 10s.
    pub shutdown_budget: Duration,
    /// `handler.rate`: default none (no limit).
    pub rate: Option<Rate>,
    /// `handler.tenant_rate`: default none (no per-tenant limit).
    pub tenant_rate: Option<TenantRate>,
}

/// A rate limit shared by all workers of a queue: a token bucket of
/// `limit` tokens refilled at `limit` per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// At least 1.
    pub limit: u32,
    /// Above zero.
    pub per: Duration,
}

/// A rate limit per tenant, shared by all workers of a queue: one token
/// bucket per tenant class, `classes` classes, tenants hashed into them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantRate {
    /// At least 1.
    pub limit: u32,
    /// Above zero.
    pub per: Duration,
    /// 1 to 4096; default 64.
    pub classes: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Default: max(2 × handler.timeout, handler.timeout + margin), where
    /// margin = max(1s, handler.timeout / 4) rounded up to whole ms
    /// (`spec::limits::default_claim_min_idle`). Validation rejects values
    /// below handler.timeout + margin.
    pub min_idle: Duration,
    /// Default 10s.
    pub every: Duration,
    /// Default 50.
    pub batch: u32,
    /// Claims per second per partition, so that recovery after an outage
    /// starts handlers at a bounded pace. Default 1000.
    pub rate: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// Total application attempts including the first. Default 5.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// How often the scheduler promotes due retries. Default 1s.
    pub promote_every: Duration,
    /// Most retries promoted by one function call. Default 100.
    pub promote_batch: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    /// Default 1s.
    pub initial: Duration,
    /// Default 5m.
    pub max: Duration,
    /// Default 2.0.
    pub factor: f64,
    /// Default full.
    pub jitter: Jitter,
}

impl Backoff {
    /// The longest total delay of all retries of a job: the sum of the
    /// un-jittered backoffs before attempts 2..=max_attempts.
    pub fn horizon(&self, max_attempts: u32) -> Duration {
        let mut total = Duration::ZERO;
        let mut delay = self.initial.as_secs_f64();
        for _ in 1..max_attempts {
            total += Duration::from_secs_f64(delay.min(self.max.as_secs_f64()));
            delay *= self.factor;
        }
        total
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    None,
    /// Uniform in [0, delay].
    Full,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Poison {
    /// Deliveries (PEL count) after which an entry is quarantined. Default 5.
    pub max_deliveries: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// Default 14d.
    pub retention: Duration,
    /// Default 100000.
    pub max_len: u64,
    /// Team or person paged for dead letters. Default none.
    pub owner: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// Ready entries younger than this are never trimmed. Default 3d.
    pub min_age: Duration,
    /// How often workers (or the CronJob) trim the partitions' streams. Default 1m.
    pub trim_every: Duration,
    /// Who trims. Default in process.
    pub trim: TrimMode,
    /// What an ack does to a done job's entry. Default keep.
    pub on_ack: OnAck,
}

/// What acknowledging a done job does to its ready-stream entry
/// (`retention.on_ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAck {
    /// The entry stays until the trimmer removes it, after `min_age`: done
    /// jobs can be looked at (and their IDs answered) meanwhile.
    Keep,
    /// On servers with `XACKDEL` (Redis 8.2+), the ack deletes the entry
    /// once every group has read it and none holds it pending
    /// (`XACKDEL … ACKED`); elsewhere, as `Keep`. No window for done jobs.
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimMode {
    /// Every worker runs a trim loop (under each partition's trim lease).
    InProcess,
    /// Workers never trim; a Kubernetes CronJob runs `queuegen trim`.
    CronJob,
}

/// The worker pods of a queue, as Kubernetes quantities (validated, as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pods {
    /// Default 2; left out of the Deployment when autoscaled.
    pub replicas: u32,
    /// CPU request. Default `100m`.
    pub cpu: String,
    /// Memory request. Default `128Mi`.
    pub memory: String,
    /// CPU limit. Default none.
    pub cpu_limit: Option<String>,
    /// Memory limit. Default: the request.
    pub memory_limit: String,
}

/// KEDA autoscaling of a queue's workers; at least one target is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autoscale {
    /// Default 1; 0 only with `lag`.
    pub min: u32,
    pub max: u32,
    /// Target oldest ready age per replica (prometheus trigger).
    pub oldest_ready_age: Option<Duration>,
    /// Target lag per replica and partition stream (redis-streams trigger).
    pub lag: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// Largest encoded envelope, header included. Default 65536.
    pub max_bytes: u64,
    /// How producers lay an envelope out in its stream entry. Default packed.
    pub shape: EntryShape,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// Producers get backpressure when the oldest ready entry is older. Default none.
    pub max_oldest_ready_age: Option<Duration>,
    /// How often a producer re-reads a partition's oldest undelivered age. Default 1s.
    pub refresh: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Alerts {
    pub oldest_pending_age: Option<Duration>,
    pub oldest_ready_age: Option<Duration>,
    pub dead_letters: Option<u64>,
}
