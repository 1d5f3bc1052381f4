//! The keys of format v1 as data: which keys each mapping allows, their
//! value kinds, defaults and descriptions. The checker takes its allowed keys
//! (and did-you-mean candidates) from here, and the JSON Schema is built from
//! it, so the two cannot drift apart.

use queuegen_core::wire::library::MAX_CHILDREN;
use queuegen_core::wire::EntryShape;

/// A mapping with fixed keys.
#[derive(Debug)]
pub struct Obj {
    /// Name of the schema definition (`#/$defs/Queue`).
    pub name: &'static str,
    pub doc: &'static str,
    pub props: &'static [Prop],
}

impl Obj {
    pub fn prop(&self, key: &str) -> Option<&'static Prop> {
        self.props.iter().find(|p| p.key == key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &'static str> + Clone {
        self.props.iter().map(|p| p.key)
    }
}

/// One key of a mapping.
#[derive(Debug)]
pub struct Prop {
    pub key: &'static str,
    pub ty: Ty,
    pub required: bool,
    /// The default as documented (not parsed), when the key may be omitted.
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

/// The kind of value a key takes.
#[derive(Debug)]
pub enum Ty {
    /// The format version: the integer 1.
    Version,
    Bool,
    Str(StrKind),
    /// One of a fixed set of strings.
    Choice(&'static [&'static str]),
    /// A whole number in `min..=max`.
    Int {
        min: u64,
        max: u64,
    },
    /// A number (integer or decimal) of at least 1.
    Factor,
    Duration,
    Size,
    /// `$`, `0-0` or a stream ID.
    GroupStart,
    /// A scalar of the field's own type (field defaults).
    Scalar,
    List(&'static Ty),
    Object(&'static Obj),
    /// Named entries: keys of the given kind, each value an object.
    Map {
        names: StrKind,
        value: &'static Obj,
    },
    /// A mapping of snake_case names to snake_case names (old name: new name).
    Renames,
    /// A mapping of snake_case field names to scalars (a schedule's body).
    Constants,
}

/// The rules a string follows; each has a pattern for the JSON Schema that
/// matches what the checker accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrKind {
    /// Service and queue names: lowercase letters, digits, `_`, `-`.
    LowerName,
    /// Envelope names: UpperCamelCase.
    UpperCamel,
    /// Field names and enum values: snake_case.
    Snake,
    /// Group names and key prefixes: anything but `{`, `}`, `:` and whitespace.
    KeySafe,
    /// Any non-empty text.
    Text,
    /// A Redis version such as "7.0" or "7.2.4".
    RedisVersion,
    /// A schema version from 2, as the key of `changes`.
    SchemaVersion,
    /// A Kubernetes object name: an RFC 1123 DNS label (namespaces, Secrets).
    DnsLabel,
    /// Text without whitespace: container image references, URLs.
    Token,
    /// A Kubernetes CPU quantity: whole or decimal cores (`"0.5"`, `"2"`) or millicores (`250m`).
    Cpu,
    /// A Kubernetes memory quantity in bytes, optionally with a binary suffix (`256Mi`).
    Memory,
    /// A plain lowercase SQL identifier that needs no quoting (PostgreSQL schemas).
    SqlIdentifier,
    /// A lane name: lowercase letters, digits and `-`, starting with a letter, at most 32 characters.
    LaneName,
}

impl StrKind {
    /// The JSON Schema pattern (ECMA-262) of this kind.
    pub fn pattern(self) -> Option<&'static str> {
        match self {
            StrKind::LowerName => Some("^[a-z][a-z0-9_-]*$"),
            StrKind::UpperCamel => Some("^[A-Z][A-Za-z0-9]*$"),
            StrKind::Snake => Some("^[a-z][a-z0-9]*(_[a-z0-9]+)*$"),
            StrKind::KeySafe => Some("^[^{}:\\s]+$"),
            StrKind::Text => None,
            StrKind::RedisVersion => Some("^[0-9]+\\.[0-9]+(\\.[0-9]+)?$"),
            StrKind::SchemaVersion => Some("^[1-9][0-9]*$"),
            StrKind::DnsLabel => Some("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
            StrKind::Token => Some("^\\S+$"),
            StrKind::Cpu => Some("^([1-9][0-9]*m|[0-9]+(\\.[0-9]{1,3})?)$"),
            StrKind::Memory => Some("^[1-9][0-9]*(Ki|Mi|Gi|Ti)?$"),
            StrKind::SqlIdentifier => Some("^[a-z_][a-z0-9_]{0,62}$"),
            StrKind::LaneName => Some("^[a-z][a-z0-9-]{0,31}$"),
        }
    }
}

/// The field types of an envelope body.
pub const FIELD_TYPES: &[&str] = &[
    "string",
    "bool",
    "u32",
    "u64",
    "i32",
    "i64",
    "timestamp",
    "enum",
];

pub const DEPLOYMENTS: &[&str] = &["standalone", "cluster"];
pub const PERSISTENCE: &[&str] = &["everysec", "always"];
pub const UPCASTS: &[&str] = &["generated", "manual"];
pub const JITTERS: &[&str] = &["full", "none"];
pub const TRIM_MODES: &[&str] = &["in_process", "cronjob"];

/// `retention.on_ack`.
pub const ON_ACK: &[&str] = &["keep", "delete"];
pub const RESULT_STORES: &[&str] = &["postgres"];
pub const MISSED: &[&str] = &["skip", "run_once"];
pub const ON_DEAD_LETTER: &[&str] = &["fail", "continue"];

const U32_MAX: u64 = u32::MAX as u64;
/// A whole number of at least 1 that fits a u32.
const COUNT: Ty = Ty::Int {
    min: 1,
    max: U32_MAX,
};
/// A whole number of at least 1 that fits a u64.
const LARGE_COUNT: Ty = Ty::Int {
    min: 1,
    max: u64::MAX,
};

macro_rules! prop {
    ($key:literal, $ty:expr, required, $doc:literal) => {
        Prop {
            key: $key,
            ty: $ty,
            required: true,
            default: None,
            doc: $doc,
        }
    };
    ($key:literal, $ty:expr, default = $default:expr, $doc:literal) => {
        Prop {
            key: $key,
            ty: $ty,
            required: false,
            default: $default,
            doc: $doc,
        }
    };
}

pub static SPEC: Obj = Obj {
    name: "Spec",
    doc: "A queuegen spec, format version 1: the Redis Streams work queues of one service.",
    props: &[
        prop!("version", Ty::Version, required,
            "Format version of this file; queuegen reads it first. Only 1 exists."),
        prop!("service", Ty::Str(StrKind::LowerName), required,
            "The service owning these queues; names the Redis Function library, ACL users and metrics. Lowercase letters, digits, `_` and `-`, starting with a letter."),
        prop!("redis", Ty::Object(&REDIS), default = Some("all defaults"),
            "The Redis deployment the queues live on."),
        prop!("envelopes", Ty::Map { names: StrKind::UpperCamel, value: &ENVELOPE }, required,
            "Job types, keyed by UpperCamelCase name (also the generated struct's name)."),
        prop!("queues", Ty::Map { names: StrKind::LowerName, value: &QUEUE }, required,
            "Work queues, keyed by name (lowercase letters, digits, `_` and `-`)."),
        prop!("kubernetes", Ty::Object(&KUBERNETES), default = Some("all defaults"),
            "Where and with what the generated Kubernetes manifests (`--deploy-out DIR/k8s/`) run the workers, the monitor and the trim CronJob."),
        prop!("postgres", Ty::Object(&POSTGRES), default = Some("all defaults when a queue uses PostgreSQL"),
            "Where queuegen's PostgreSQL tables live and how many connections the generated `connect_postgres` pool opens. Only allowed when a queue has `results: postgres` or `outbox: true`."),
        prop!("schedules", Ty::Map { names: StrKind::LowerName, value: &SCHEDULE }, default = Some("none"),
            "Periodic jobs, keyed by schedule name (lowercase letters, digits, `_` and `-`): each tick publishes one job with constant body fields to a queue, exactly once however many workers run the schedule."),
        prop!("pipelines", Ty::Map { names: StrKind::LowerName, value: &PIPELINE }, default = Some("none"),
            "Pipelines, keyed by name (lowercase letters, digits, `_` and `-`): queues of this spec as stages, each job of the first stage starting a run whose jobs hand on to the next stages (`then`) and meet at joins. A queue is a stage of at most one pipeline."),
    ],
};

pub static PIPELINE: Obj = Obj {
    name: "Pipeline",
    doc: "A pipeline: stages (queues of this spec) keyed by queue name. The stage no other stage leads to is the first; each of its jobs starts a run, and every job the run hands on carries the run's ID. A handler hands on jobs by returning the next stages' envelopes, which are published, deduplicated by IDs derived from the run, before its job is acknowledged.",
    props: &[
        prop!("stages", Ty::Map { names: StrKind::LowerName, value: &STAGE }, required,
            "The stages, keyed by the queue each one is."),
        prop!("keep", Ty::Duration, default = Some("7d"),
            "How long a run's record (each join's state and summary) is kept after the run ends, for `queuegen runs` and the dashboard."),
    ],
};

pub static STAGE: Obj = Obj {
    name: "Stage",
    doc: "One stage of a pipeline: what its jobs hand on, or what it joins.",
    props: &[
        prop!("then", Ty::List(&Ty::Str(StrKind::LowerName)), default = Some("none: the run ends here"),
            "The stages this one hands jobs to: its handler returns zero, one or many envelopes of each (a chain, or a fan-out). Their queues need `dedup`, whose window absorbs what a redelivered job hands on again. A join stage is never in a `then`: its job is published when what it waits for has ended."),
        prop!("max_children", Ty::Int { min: 1, max: MAX_CHILDREN }, default = Some("100"),
            "Most jobs one job of this stage may hand on, over all of `then`; a handler that returns more hands on nothing and its job is dead-lettered (`too_many_children`). Only with `then`."),
        prop!("join", Ty::List(&Ty::Str(StrKind::LowerName)), default = Some("none: not a join"),
            "Makes this stage a join: it runs once per run, after every job of the run in these stages (and every job that could still lead to one) has ended. Its envelope is handed on by the first stage's handler when the run starts; its handler also receives the run's summary."),
        prop!("on_dead_letter", Ty::Choice(ON_DEAD_LETTER), default = Some("fail"),
            "What a dead-lettered job of the stages in `join`, or of a stage leading to them, does to the run: `fail` ends the run as failed and the join never runs; `continue` runs the join once the rest have ended, its summary naming the dead-lettered jobs it waited for. Only with `join`."),
    ],
};

pub static SCHEDULE: Obj = Obj {
    name: "Schedule",
    doc: "A periodic job: on each tick of `cron` (in `timezone`) or `every`, one job with the constant `body` is published to `queue`, with the job_id `<schedule>@<tick in RFC 3339 UTC>`. Any number of workers run the schedule; a marker written in the same Function as the XADD makes each tick publish once.",
    props: &[
        prop!("queue", Ty::Str(StrKind::LowerName), required,
            "The queue the jobs are published to."),
        prop!("cron", Ty::Str(StrKind::Text), default = Some("none; exactly one of `cron` and `every`"),
            "A standard 5-field cron expression (minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\"), evaluated in `timezone`. Exactly one of `cron` and `every`."),
        prop!("every", Ty::Duration, default = Some("none; exactly one of `cron` and `every`"),
            "A fixed period (e.g. `30s`, `1h`); ticks are whole multiples of it since the Unix epoch. Exactly one of `cron` and `every`."),
        prop!("timezone", Ty::Str(StrKind::Token), default = Some("\"UTC\""),
            "The IANA time zone `cron` is evaluated in (e.g. \"Europe/Berlin\"); daylight-saving gaps and overlaps run a tick once. Only with `cron`."),
        prop!("tenant", Ty::Str(StrKind::Text), default = Some("the service name"),
            "The `tenant` header of the jobs."),
        prop!("body", Ty::Constants, default = Some("no body fields"),
            "The jobs' body fields as constants of their types, keyed by field name; every required field of the queue's envelope without a default must be given."),
        prop!("missed", Ty::Choice(MISSED), default = Some("skip"),
            "What happens to ticks no worker published within `grace` of their time (all workers down): `skip` publishes none of them; `run_once` publishes one job, for the most recent missed tick."),
        prop!("grace", Ty::Duration, default = Some("the smaller of `every` and 1m; 1m with `cron`"),
            "How late a tick may still be published as on time; a tick older than this when a worker gets to it counts as missed."),
    ],
};

pub static POSTGRES: Obj = Obj {
    name: "Postgres",
    doc: "queuegen's tables in PostgreSQL (results, fences and the outbox, created by the migrations `generate --deploy-out DIR` writes to `DIR/sql/`) and the generated connection pool.",
    props: &[
        prop!("schema", Ty::Str(StrKind::SqlIdentifier), default = Some("\"queuegen\""),
            "The schema of queuegen's tables, usually in the application's own database so that a handler's change and its job's marker commit together: a plain lowercase SQL identifier (letters, digits and `_`, not starting with a digit, at most 63 bytes), never quoted in the SQL."),
        prop!("pool_size", Ty::Int { min: 1, max: 10000 }, default = Some("16"),
            "Most connections the generated `connect_postgres` pool opens per process. Each job of a `results: postgres` queue holds one for its whole transaction, so it should be at least the `handler.concurrency` of the queues one process works."),
    ],
};

pub static KUBERNETES: Obj = Obj {
    name: "Kubernetes",
    doc: "Where and with what the generated Kubernetes manifests run the workers, the monitor, the trim CronJob and, when a queue uses PostgreSQL, the outbox publisher and the migration Job.",
    props: &[
        prop!("namespace", Ty::Str(StrKind::DnsLabel), default = Some("the service name"),
            "Namespace of every generated object: an RFC 1123 label (lowercase letters, digits and `-`)."),
        prop!("image", Ty::Str(StrKind::Token), default = Some("\"SERVICE-worker:latest\""),
            "The worker image: the team's binary that runs the generated workers. It must honour the environment the Deployment sets (docs/deploy.md): QUEUEGEN_QUEUE, QUEUEGEN_CONSUMER, QUEUEGEN_METRICS_ADDR and REDIS_URL."),
        prop!("monitor_image", Ty::Str(StrKind::Token), default = Some("\"queuegen:VERSION\", this queuegen's version"),
            "An image with the queuegen CLI, for the monitor Deployment and the trim CronJob."),
        prop!("redis_secret", Ty::Str(StrKind::DnsLabel), default = Some("\"SERVICE-redis\""),
            "The Secret holding the Redis connection: key `url` (REDIS_URL, credentials included), and for autoscaling on lag `address` (host:port; for a Cluster a comma-separated list of host:port) and `password`. Never written into a manifest."),
        prop!("postgres_secret", Ty::Str(StrKind::DnsLabel), default = Some("none"),
            "The Secret holding the PostgreSQL connection: key `database-url` (DATABASE_URL, a `postgres://user:password@host:5432/database` URL, credentials included), for the workers of `results: postgres` queues, the outbox publisher and the migration Job. Required when the spec has a `kubernetes` section and a queue has `results: postgres` or `outbox: true`; refused when no queue does. Never written into a manifest."),
        prop!("psql_image", Ty::Str(StrKind::Token), default = Some("\"postgres:16-alpine\""),
            "An image with `psql` and `sh`, for the Job that applies the PostgreSQL migrations (`k8s/postgres-migrations.yaml`). Only allowed when a queue uses PostgreSQL."),
        prop!("metrics_port", Ty::Int { min: 1, max: 65535 }, default = Some("9464"),
            "Port workers and the monitor serve /metrics, /healthz and /readyz on."),
        prop!("prometheus_url", Ty::Str(StrKind::Token), default = Some("\"http://prometheus.monitoring.svc:9090\""),
            "The Prometheus server KEDA queries for the oldest-ready-age trigger (`autoscale.oldest_ready_age`)."),
    ],
};

pub static REDIS: Obj = Obj {
    name: "Redis",
    doc: "The Redis deployment the queues live on.",
    props: &[
        prop!("key_prefix", Ty::Str(StrKind::KeySafe), default = Some("the service name"),
            "First segment of every key, as in `PREFIX:{queue-NN}:ready`. No `{`, `}`, `:` or whitespace."),
        prop!("deployment", Ty::Choice(DEPLOYMENTS), default = Some("standalone"),
            "`standalone` (one primary, maybe with replicas) or `cluster` (Redis Cluster: Functions are loaded on every primary)."),
        prop!("min_version", Ty::Str(StrKind::RedisVersion), default = Some("\"7.0\""),
            "Lowest Redis version the deployment runs, quoted, e.g. \"7.0\". Redis Functions need 7.0 or later."),
        prop!("wait_replicas", Ty::Int { min: 0, max: 65535 }, default = Some("0"),
            "Replicas each publish waits for (`WAIT n timeout` after the `XADD`, on the node that took it); the count that acknowledged is reported in `Published::replicas`. Not consensus: a failover can still lose a job that fewer replicas hold. 0: do not wait."),
        prop!("wait_timeout", Ty::Duration, default = Some("1s"),
            "The longest a publish waits for `wait_replicas`; it then returns with the count reached so far."),
        prop!("persistence", Ty::Choice(PERSISTENCE), default = Some("everysec"),
            "How the generated redis/queue.conf makes the append-only file durable (`appendfsync`). `everysec`: fsync once a second; a crash of the machine (not only of redis-server) loses up to the last second of acknowledged publishes, acks and transitions. `always`: fsync before every reply; nothing acknowledged is lost, at the cost of a disk flush per write."),
    ],
};

pub static ENVELOPE: Obj = Obj {
    name: "Envelope",
    doc: "One job type: a versioned, flat record of typed fields. The header fields (job_id, type, tenant, schema, created_at, trace_id, attempt, prev_id, reason) are implicit.",
    props: &[
        prop!("schema", COUNT, required,
            "Schema version producers write."),
        prop!("accepts", Ty::List(&COUNT), default = Some("[schema]"),
            "Schema versions workers decode; must include `schema`."),
        prop!("fields", Ty::Map { names: StrKind::Snake, value: &FIELD }, default = Some("no body fields"),
            "Body fields keyed by snake_case name, encoded in this order."),
        prop!("changes", Ty::Map { names: StrKind::SchemaVersion, value: &CHANGE }, default = Some("none"),
            "What each schema version changed from the one before, keyed by version (2 describes the step from 1). Workers decode every accepted older version through these steps."),
    ],
};

pub static CHANGE: Obj = Obj {
    name: "Change",
    doc: "How one schema version differs from the version before it. Fields not named here are carried over unchanged; a field's type never changes.",
    props: &[
        prop!("added", Ty::List(&Ty::Str(StrKind::Snake)), default = Some("none"),
            "Fields this version added. If an older version is still accepted, each must be optional or have a default."),
        prop!("removed", Ty::Map { names: StrKind::Snake, value: &FIELD }, default = Some("none"),
            "Fields of the previous version that this version dropped, with their definition in that version."),
        prop!("renamed", Ty::Renames, default = Some("none"),
            "Fields this version renamed, as `old_name: new_name`; the type stays the same."),
        prop!("upcast", Ty::Choice(UPCASTS), default = Some("generated"),
            "`generated`: the generated code converts the previous version's struct into this one. `manual`: you write that `From` conversion yourself."),
    ],
};

pub static FIELD: Obj = Obj {
    name: "Field",
    doc: "One body field of an envelope.",
    props: &[
        prop!("type", Ty::Choice(FIELD_TYPES), required,
            "The value type: string, bool, u32, u64, i32, i64, timestamp (RFC 3339 UTC with milliseconds) or enum (one of `values`)."),
        prop!("optional", Ty::Bool, default = Some("false"),
            "Whether an entry may leave the field out."),
        prop!("default", Ty::Scalar, default = Some("none"),
            "Value used when the field is absent, of the field's type (e.g. false, 3, normal); not together with `optional: true`."),
        prop!("max_bytes", Ty::Size, default = Some("unbounded"),
            "Upper bound of the encoded value; string fields only. Without it the payload bound cannot be checked statically."),
        prop!("values", Ty::List(&Ty::Str(StrKind::Snake)), default = Some("none"),
            "The snake_case values of an `enum` field; required for enums, not allowed for other types."),
    ],
};

pub static QUEUE: Obj = Obj {
    name: "Queue",
    doc: "One work queue: partitioned streams, a consumer group, and every policy that governs a job in it.",
    props: &[
        prop!("envelope", Ty::Str(StrKind::UpperCamel), required,
            "Name of the envelope (job type) this queue carries."),
        prop!("partitions", Ty::Int { min: 1, max: 16384 }, default = Some("1"),
            "Number of partitions, each its own stream and hash tag; 1 to 16384."),
        prop!("partition_by", Ty::List(&Ty::Str(StrKind::Snake)), default = Some("[job_id]"),
            "Fields whose values pick the partition (and so the ordering scope): header fields `tenant` and `job_id`, or required body fields."),
        prop!("group", Ty::Object(&GROUP), default = Some("all defaults"),
            "The consumer group workers read with."),
        prop!("handler", Ty::Object(&HANDLER), default = Some("all defaults"),
            "How the worker runs the handler."),
        prop!("claim", Ty::Object(&CLAIM), default = Some("all defaults"),
            "Recovery of jobs left pending by a dead or stuck worker."),
        prop!("retry", Ty::Object(&RETRY), default = Some("all defaults"),
            "Application retries (the attempt counter in the envelope)."),
        prop!("poison", Ty::Object(&POISON), default = Some("all defaults"),
            "Quarantine of entries that crash workers (the delivery counter of the pending list)."),
        prop!("dead_letter", Ty::Object(&DEAD_LETTER), default = Some("all defaults"),
            "The dead-letter stream of each partition."),
        prop!("retention", Ty::Object(&RETENTION), default = Some("all defaults"),
            "Trimming of the ready streams."),
        prop!("payload", Ty::Object(&PAYLOAD), default = Some("all defaults"),
            "Limits on one encoded entry."),
        prop!("admission", Ty::Object(&ADMISSION), default = Some("no backpressure"),
            "Producer backpressure."),
        prop!("alerts", Ty::Object(&ALERTS), default = Some("no alerts"),
            "Thresholds of the generated Prometheus alerts."),
        prop!("pods", Ty::Object(&PODS), default = Some("all defaults"),
            "The queue's worker pods in the generated Kubernetes Deployment."),
        prop!("autoscale", Ty::Object(&AUTOSCALE), default = Some("no autoscaling"),
            "Scale the worker Deployment with KEDA on the oldest ready age and/or the group's lag (`k8s/keda.yaml`), never on stream length."),
        prop!("results", Ty::Choice(RESULT_STORES), default = Some("none (the handler keeps its results itself)"),
            "`postgres`: the handler commits its business change and the job's marker in one PostgreSQL transaction (the generated `results` function), so a redelivered job finds the marker instead of repeating the change."),
        prop!("dedup", Ty::Object(&DEDUP), default = Some("none (every publish appends)"),
            "Deduplication at publish: a second publish of a job_id within `window` writes nothing and answers the first entry's stream ID (`Published::duplicate`)."),
        prop!("lanes", Ty::List(&Ty::Object(&LANE)), default = Some("none (one unnamed lane)"),
            "Priority lanes, 2 to 16, each its own stream per partition (with the partition's hash tag). Workers read the lanes by weight: under a backlog in every lane the handled mix follows the weights and no lane starves; an empty lane's share goes to the others. Producers pick a job's lane; a job published without one goes to the default lane, which keeps the queue's unlaned keys. Retries, replays and delayed jobs keep their lane."),
        prop!("outbox", Ty::Bool, default = Some("false"),
            "Producers may enqueue this queue's jobs through the PostgreSQL transactional outbox (the generated `outbox` function): a job enqueued in the transaction of the change it announces is published, by the generated `outbox_publisher`, only once that transaction commits."),
    ],
};

pub static PODS: Obj = Obj {
    name: "Pods",
    doc: "The queue's worker pods in the generated Kubernetes Deployment.",
    props: &[
        prop!("replicas", Ty::Int { min: 1, max: 1000 }, default = Some("2"),
            "Worker pods; with `autoscale`, KEDA sets the count instead and this is left out of the Deployment."),
        prop!("cpu", Ty::Str(StrKind::Cpu), default = Some("\"100m\""),
            "CPU request of a worker container: millicores (`250m`) or cores, quoted (`\"0.5\"`)."),
        prop!("memory", Ty::Str(StrKind::Memory), default = Some("\"128Mi\""),
            "Memory request of a worker container, e.g. 256Mi."),
        prop!("cpu_limit", Ty::Str(StrKind::Cpu), default = Some("none (no CPU throttling)"),
            "CPU limit; at least `cpu`. Without one the worker is never throttled, which would stretch handler runs towards handler.timeout."),
        prop!("memory_limit", Ty::Str(StrKind::Memory), default = Some("`memory`"),
            "Memory limit; at least `memory`. Each worker holds up to handler.concurrency jobs in memory."),
    ],
};

pub static AUTOSCALE: Obj = Obj {
    name: "Autoscale",
    doc: "KEDA autoscaling of the worker Deployment on how late the queue is (oldest ready age) and how much it has not read (lag), never on stream length, which counts acknowledged history.",
    props: &[
        prop!("min", Ty::Int { min: 0, max: 1000 }, default = Some("1"),
            "Fewest worker pods. 0 (scale to zero) needs `lag`: only the lag trigger, read by KEDA from Redis itself, is sure to wake a queue with no worker."),
        prop!("max", Ty::Int { min: 1, max: 1000 }, required,
            "Most worker pods; at least `min`."),
        prop!("oldest_ready_age", Ty::Duration, default = Some("none"),
            "Target age of the oldest undelivered entry per replica: a `prometheus` trigger on the monitor's queuegen_queue_oldest_ready_age_seconds (needs the monitor and Prometheus)."),
        prop!("lag", COUNT, default = Some("none"),
            "Target entries not yet delivered to the group, per replica and partition stream: a `redis-streams` (`redis-cluster-streams` on a Cluster) trigger on `lagCount` per partition (XINFO GROUPS lag, Redis 7)."),
    ],
};

pub static GROUP: Obj = Obj {
    name: "Group",
    doc: "The consumer group workers read with.",
    props: &[
        prop!("name", Ty::Str(StrKind::KeySafe), default = Some("QUEUE-workers"),
            "Consumer group name; no `{`, `}`, `:` or whitespace."),
        prop!("start", Ty::GroupStart, default = Some("\"$\""),
            "Where a newly created group starts: \"$\" (entries added afterwards), \"0-0\" (everything in the stream) or a stream ID (`<ms>` or `<ms>-<seq>`)."),
        prop!("prune_consumers_after", Ty::Duration, default = Some("1d"),
            "A consumer idle this long (no read, claim or ack) that holds no pending entry is removed from the group by the partition's leader, checked and removed in one Function call; at least 1m. Workers are consumers named after their pod, so without this every deploy would add consumers that stay forever. A removed worker that reads again comes back as a new consumer."),
    ],
};

pub static HANDLER: Obj = Obj {
    name: "Handler",
    doc: "How the worker runs the handler.",
    props: &[
        prop!("timeout", Ty::Duration, default = Some("30s"),
            "A handler running longer is abandoned and the job is rescheduled like a transient failure."),
        prop!("concurrency", COUNT, default = Some("8"),
            "Jobs one worker process runs at once; also the most it reads ahead."),
        prop!("shutdown_budget", Ty::Duration, default = Some("10s"),
            "How long shutdown waits for jobs in flight before leaving them pending."),
        prop!("rate", Ty::Object(&RATE), default = Some("none (no limit)"),
            "Most jobs all workers of the queue start together: `limit` jobs per `per`, a token bucket in Redis shared by every worker (one call per intake round). Jobs over the limit wait, undelivered; they never fail."),
        prop!("tenant_rate", Ty::Object(&TENANT_RATE), default = Some("none (no per-tenant limit)"),
            "Most jobs each tenant starts: `limit` jobs per `per`, a token bucket in Redis per tenant class shared by every worker, tenants hashed into `classes` classes. A job over its tenant's limit is set aside (moved to the delayed set, keeping its attempt, due when its class has a token), not failed. Independent of `rate`."),
    ],
};

pub static RATE: Obj = Obj {
    name: "Rate",
    doc: "A rate limit shared by all workers of a queue (a token bucket in Redis holding at most `limit` tokens, refilled at `limit` per `per`).",
    props: &[
        prop!("limit", COUNT, required,
            "Jobs started per `per`, by all workers together; also the largest burst after an idle period."),
        prop!("per", Ty::Duration, required,
            "The period `limit` applies to, e.g. 1s or 1m."),
    ],
};

pub static TENANT_RATE: Obj = Obj {
    name: "TenantRate",
    doc: "A rate limit per tenant, shared by all workers of a queue: tenants are hashed into `classes` classes, each a token bucket in Redis holding at most `limit` tokens, refilled at `limit` per `per`. Tenants sharing a class share its bucket.",
    props: &[
        prop!("limit", COUNT, required,
            "Jobs one tenant (one class) starts per `per`, by all workers together; also its largest burst after an idle period."),
        prop!("per", Ty::Duration, required,
            "The period `limit` applies to, e.g. 1s or 1m."),
        prop!("classes", Ty::Int { min: 1, max: 4096 }, default = Some("64"),
            "How many buckets tenants are hashed into (1 to 4096): it bounds the Redis keys and metric series whatever the number of tenants. Two tenants in one class share its bucket; more classes, fewer collisions."),
    ],
};

pub static CLAIM: Obj = Obj {
    name: "Claim",
    doc: "Recovery of jobs left pending by a dead or stuck worker (XAUTOCLAIM).",
    props: &[
        prop!("min_idle", Ty::Duration, default = Some("max(2 × handler.timeout, handler.timeout + margin), margin = max(1s, handler.timeout / 4)"),
            "A pending entry idle this long is claimed by another worker. Must be at least handler.timeout + margin, so a running job is not taken over."),
        prop!("every", Ty::Duration, default = Some("10s"),
            "How often each partition's recovery loop looks for idle entries."),
        prop!("batch", Ty::Int { min: 1, max: crate::limits::library::MAX_CLAIM_COUNT }, default = Some("50"),
            "Most entries claimed by one XAUTOCLAIM call; the maximum is the Function library's `claim` limit."),
        prop!("rate", COUNT, default = Some("1000"),
            "Most entries claimed per second per partition, so that a claim storm after an outage does not flood the handlers; a burst is at most one batch."),
    ],
};

pub static RETRY: Obj = Obj {
    name: "Retry",
    doc: "Application retries, driven by the attempt counter in the envelope.",
    props: &[
        prop!(
            "max_attempts",
            COUNT,
            default = Some("5"),
            "Total application attempts, the first included; then the job is dead-lettered."
        ),
        prop!(
            "backoff",
            Ty::Object(&BACKOFF),
            default = Some("all defaults"),
            "Delay before each retry."
        ),
        prop!("promote_every", Ty::Duration, default = Some("1s"),
            "How often each partition's scheduler moves due retries back to the ready stream; a retry runs up to this much after its due time."),
        prop!("promote_batch", COUNT, default = Some("100"),
            "Most due retries moved by one call of the retry_promote function; the scheduler calls again while batches come back full."),
    ],
};

pub static BACKOFF: Obj = Obj {
    name: "Backoff",
    doc: "Exponential backoff: the delay before attempt n+1 is min(initial × factor^(n-1), max), jittered.",
    props: &[
        prop!("initial", Ty::Duration, default = Some("1s"),
            "Delay before the second attempt."),
        prop!("max", Ty::Duration, default = Some("5m"),
            "Upper bound of any one delay; at least `initial`."),
        prop!("factor", Ty::Factor, default = Some("2"),
            "Growth per attempt; at least 1."),
        prop!("jitter", Ty::Choice(JITTERS), default = Some("full"),
            "`full`: uniform in [0, delay]; `none`: exactly the delay."),
    ],
};

pub static POISON: Obj = Obj {
    name: "Poison",
    doc: "Quarantine of entries that keep crashing workers, by delivery count (separate from retry attempts).",
    props: &[
        prop!("max_deliveries", COUNT, default = Some("5"),
            "Deliveries (pending-list count) after which an entry is moved to the dead-letter stream."),
    ],
};

pub static DEAD_LETTER: Obj = Obj {
    name: "DeadLetter",
    doc: "The dead-letter stream of each partition.",
    props: &[
        prop!(
            "retention",
            Ty::Duration,
            default = Some("14d"),
            "How long dead letters are kept."
        ),
        prop!(
            "max_len",
            LARGE_COUNT,
            default = Some("100000"),
            "Most dead letters kept per partition."
        ),
        prop!(
            "owner",
            Ty::Str(StrKind::Text),
            default = Some("none (warned)"),
            "Team or person paged for dead letters."
        ),
    ],
};

pub static RETENTION: Obj = Obj {
    name: "Retention",
    doc: "Trimming of the ready streams.",
    props: &[
        prop!("min_age", Ty::Duration, default = Some("3d"),
            "Entries younger than this are never trimmed. Must cover the retry horizon plus claim.min_idle × poison.max_deliveries."),
        prop!("trim_every", Ty::Duration, default = Some("1m"),
            "How often a worker trims the ready and dead-letter streams of its partitions (under a per-partition lease, so one worker trims each partition at a time). A pass costs a bounded number of commands, whatever the stream length. With `trim: cronjob`, the CronJob's schedule: whole minutes below an hour, or whole hours dividing a day."),
        prop!("trim", Ty::Choice(TRIM_MODES), default = Some("in_process"),
            "Who trims: `in_process` (every worker runs a trim loop) or `cronjob` (workers never trim; the generated k8s/trim-cronjob.yaml runs `queuegen trim` every `trim_every`)."),
        prop!("on_ack", Ty::Choice(ON_ACK), default = Some("keep"),
            "What a done job's ack does to its entry: `keep` (it stays for `min_age`, for investigation and replays, then the trimmer removes it) or `delete` (on servers with XACKDEL, Redis 8.2+, the ack deletes it once every group has read it and none holds it pending; elsewhere workers keep it and say so at start). `delete` gives done jobs no investigation window; not with `dedup`."),
    ],
};

pub static PAYLOAD: Obj = Obj {
    name: "Payload",
    doc: "Limits on one encoded entry.",
    props: &[
        prop!("max_bytes", Ty::Size, default = Some("65536"),
            "Largest encoded envelope, header fields included (names and values). Must hold the largest entry the fields allow."),
        prop!("shape", Ty::Choice(EntryShape::NAMES), default = Some("packed"),
            "How producers lay an envelope out in its stream entry: `packed` (one field, `packed`, holding the header and body fields as one MessagePack array of names and values; about twice the throughput of `fields`, 1.5× the memory of a backlog) or `fields` (every header and body field a stream field of its own, readable in `redis-cli XRANGE` and by tools that read the streams themselves). Workers, Functions and the CLI read both, so a queue can change shape with jobs in flight."),
    ],
};

pub static DEDUP: Obj = Obj {
    name: "Dedup",
    doc: "Deduplication at publish, by job_id, in one Function with the XADD (marker check, append, marker set).",
    props: &[
        prop!(
            "window",
            Ty::Duration,
            required,
            "How long after a publish a second publish of its job_id is a duplicate; at most `retention.min_age`, so the first entry it names is still in the stream."
        ),
    ],
};

pub static LANE: Obj = Obj {
    name: "Lane",
    doc: "One priority lane of a queue: its own stream per partition, read by weight.",
    props: &[
        prop!("name", Ty::Str(StrKind::LaneName), required,
            "The lane's name: lowercase letters, digits and `-`, starting with a letter, at most 32 characters; unique within the queue. Part of the lane's keys (`PREFIX:lane-NAME:{QUEUE-NN}:ready`), except for the default lane, which keeps the queue's unlaned keys."),
        prop!("weight", Ty::Int { min: 1, max: 1000 }, default = Some("1"),
            "The lane's share of intake while every lane has a backlog, relative to the other lanes' weights (6, 3 and 1: 60%, 30% and 10%); 1 to 1000."),
        prop!("default", Ty::Bool, default = Some("false (the first lane is the default when none is marked)"),
            "Jobs published without a lane go to this lane; at most one lane is marked."),
    ],
};

pub static ADMISSION: Obj = Obj {
    name: "Admission",
    doc: "Producer backpressure.",
    props: &[
        prop!(
            "max_oldest_ready_age",
            Ty::Duration,
            default = Some("none"),
            "Producers get a backpressure error for a partition while its oldest undelivered entry (for the slowest group) is older than this."
        ),
        prop!(
            "refresh",
            Ty::Duration,
            default = Some("1s"),
            "How often a producer re-reads a partition's oldest undelivered age; between refreshes publishing costs no extra round trip."
        ),
    ],
};

pub static ALERTS: Obj = Obj {
    name: "Alerts",
    doc: "Thresholds of the generated Prometheus alerts; an omitted key means no such alert.",
    props: &[
        prop!(
            "oldest_pending_age",
            Ty::Duration,
            default = Some("none"),
            "Alert when a delivered entry has been pending longer than this."
        ),
        prop!(
            "oldest_ready_age",
            Ty::Duration,
            default = Some("none"),
            "Alert when an undelivered entry is older than this."
        ),
        prop!(
            "dead_letters",
            LARGE_COUNT,
            default = Some("none"),
            "Alert when a partition holds at least this many dead letters."
        ),
    ],
};

/// Every mapping of the format, root first.
pub fn all_objects() -> Vec<&'static Obj> {
    vec![
        &SPEC,
        &REDIS,
        &KUBERNETES,
        &POSTGRES,
        &ENVELOPE,
        &CHANGE,
        &FIELD,
        &QUEUE,
        &GROUP,
        &HANDLER,
        &RATE,
        &TENANT_RATE,
        &CLAIM,
        &RETRY,
        &BACKOFF,
        &POISON,
        &DEAD_LETTER,
        &RETENTION,
        &PAYLOAD,
        &ADMISSION,
        &DEDUP,
        &LANE,
        &ALERTS,
        &PODS,
        &AUTOSCALE,
        &SCHEDULE,
        &PIPELINE,
        &STAGE,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_documented_and_optional_keys_have_defaults() {
        for obj in all_objects() {
            assert!(!obj.doc.is_empty(), "{}", obj.name);
            for prop in obj.props {
                assert!(!prop.doc.is_empty(), "{}.{}", obj.name, prop.key);
                assert_eq!(
                    prop.required,
                    prop.default.is_none(),
                    "{}.{}: a key is either required or has a documented default",
                    obj.name,
                    prop.key
                );
            }
        }
    }

    #[test]
    fn keys_are_unique_per_object() {
        for obj in all_objects() {
            let mut keys: Vec<_> = obj.keys().collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), obj.props.len(), "{}", obj.name);
        }
    }
}
