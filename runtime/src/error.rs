//! The runtime's one error type: every failure names the key, partition, job or field it is about.

/// What is wrong with one envelope field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("is missing")]
    Missing,
    #[error("is not a valid {expected}: {found:?}")]
    Malformed {
        expected: &'static str,
        found: String,
    },
    #[error("is {len} bytes, above its limit of {max} bytes")]
    Oversized { len: usize, max: usize },
}

/// A settlement refused with `QG_NOT_OWNER`: which entry, who asked, who owns it now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{function} on {key} (partition {partition}, job {job}) refused: QG_NOT_OWNER: entry {stream_id} {}",
    match owner {
        Some(owner) => format!("is pending for consumer {owner}, not {consumer}"),
        None => format!("is no longer pending (consumer {consumer} lost it)"),
    }
)]
pub struct NotOwner {
    pub function: String,
    /// The entry's ready stream.
    pub key: String,
    pub partition: u16,
    /// The job's `job_id`, or the entry's stream ID when the job is not known.
    pub job: String,
    pub stream_id: String,
    /// The consumer that asked: the one that no longer owns the entry.
    pub consumer: String,
    /// The consumer the entry is pending for now, or `None` when it is no longer pending.
    pub owner: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An envelope field could not be encoded or decoded.
    #[error("envelope {envelope}: field `{field}` {problem}")]
    Field {
        envelope: &'static str,
        field: &'static str,
        problem: FieldProblem,
    },

    /// The entry names a schema version this build does not decode.
    #[error("envelope {envelope}: schema version {seen} is not accepted (accepted: {accepted:?})")]
    UnsupportedSchema {
        envelope: &'static str,
        seen: u32,
        accepted: &'static [u32],
    },

    /// The entry's `type` header names another envelope.
    #[error("entry has type {found:?}, expected {expected}")]
    WrongType {
        expected: &'static str,
        found: String,
    },

    /// The encoded envelope exceeds the queue's `payload.max_bytes`.
    #[error(
        "queue {queue}: job {job_id:?} encodes to {len} bytes, above payload.max_bytes = {max}"
    )]
    PayloadTooLarge {
        queue: String,
        job_id: String,
        len: usize,
        max: usize,
    },

    /// A job handed to a producer has an empty `job_id`; `position` is its index in the batch.
    #[error("queue {queue}: job at position {position} has an empty job_id")]
    EmptyJobId { queue: String, position: usize },

    /// A job names a lane its queue does not have; nothing of its batch was sent.
    #[error("queue {queue}: job {job_id:?} names lane {lane:?}, which is not one of the queue's lanes ({known})")]
    UnknownLane {
        queue: String,
        job_id: String,
        lane: String,
        /// The queue's lanes, comma-separated, or `none` when it has no lanes.
        known: String,
    },

    /// A job could not be encoded; nothing of its batch was sent.
    #[error("queue {queue}: job {job_id:?} is invalid: {source}")]
    InvalidJob {
        queue: String,
        job_id: String,
        #[source]
        source: Box<Error>,
    },

    /// A partition's stream has no consumer group of that name (or does not exist).
    #[error("stream {key} has no consumer group {group:?}: run `queuegen apply` to create it")]
    NoGroup { key: String, group: String },

    /// A worker was set up in a way that cannot run (bad partition list, zero concurrency).
    #[error("queue {queue}: invalid worker setup: {problem}")]
    InvalidWorker { queue: String, problem: String },

    /// A Function library call refused a transition (a `QG_*` error reply); it wrote nothing.
    #[error("{function} on {key} (partition {partition}, job {job}) refused: {code} {detail}")]
    Transition {
        function: String,
        /// The transition's source key: ready stream, retry set or dead-letter stream.
        key: String,
        partition: u16,
        /// The job's `job_id`, or the source entry ID when the job is not known.
        job: String,
        code: crate::transitions::TransitionCode,
        detail: String,
    },

    /// A Function library call refused to settle (or renew) a pending entry
    /// that is no longer this consumer's (`QG_NOT_OWNER`); it wrote nothing.
    /// Another consumer claimed the entry after `claim.min_idle` (it settles
    /// the job now), or someone settled it already.
    #[error("{0}")]
    NotOwner(Box<NotOwner>),

    /// The Function library this code was generated with is not loaded on a server.
    #[error(
        "redis {server} does not have the Function library {library} ({problem}): run `queuegen apply` to load it"
    )]
    LibraryMissing {
        server: String,
        library: String,
        problem: String,
    },

    /// Code handed to `load_library` is not a generated Function library
    /// (no `#!lua name=<library>` first line), or loaded under another name.
    #[error("not a Function library: {problem}")]
    InvalidLibrary { problem: String },

    /// A partition's ready stream does not exist: the queue was never applied on this server.
    #[error("stream {key} does not exist: run `queuegen apply` to create it")]
    MissingStream { key: String },

    /// An operator asked about a partition the queue does not have.
    #[error("queue {queue} has no partition {partition}: its partitions are 0 to {}", partitions.saturating_sub(1))]
    NoSuchPartition {
        queue: String,
        partition: u16,
        partitions: u16,
    },

    /// An operator named a lane the queue does not have.
    #[error("queue {queue} has {known}; there is no lane {lane:?}")]
    NoSuchLane {
        queue: String,
        lane: String,
        /// `lanes high, normal` or `no lanes`.
        known: String,
    },

    /// An operator named a dead letter that is not (or no longer) stored.
    #[error("queue {queue}: no dead letter with ID {id} in {place}")]
    NoSuchDeadLetter {
        queue: String,
        id: String,
        /// `partition 3`, `lane high, partition 3` or `any partition`.
        place: String,
    },

    /// An operator gave a dead letter ID that is not a whole stream ID.
    #[error(
        "queue {queue}: dead letter ID {id:?} is not a stream ID: a stream ID is \
         <unix ms>-<sequence>, two whole numbers such as 1733486400000-0 \
         (copy it from `queuegen dlq list` or the partition's page)"
    )]
    BadDeadLetterId { queue: String, id: String },

    /// A stream's groups or boundaries could not be read as expected.
    #[error("inventory of stream {key}: {problem}")]
    Inventory { key: String, problem: String },

    /// The producer refused to publish: the partition's oldest undelivered
    /// entry (for its slowest group) is older than `admission.max_oldest_ready_age`.
    #[error(
        "queue {queue} partition {partition}{}: backpressure: the oldest undelivered entry is {}, above admission.max_oldest_ready_age = {}",
        lane.as_ref().map(|lane| format!(" lane {lane}")).unwrap_or_default(),
        humantime::format_duration(*oldest_ready_age),
        humantime::format_duration(*limit)
    )]
    Backpressure {
        queue: String,
        partition: u16,
        /// The lane, for a queue with lanes: each lane's stream is admitted on its own.
        lane: Option<String>,
        oldest_ready_age: std::time::Duration,
        limit: std::time::Duration,
    },

    /// A trim stopped before removing anything: what it had inventoried no
    /// longer holds (a group added, removed or moved back with `SETID`).
    #[error("trim of {key} aborted, nothing removed: group {group:?} {change}")]
    TrimAborted {
        key: String,
        group: String,
        change: String,
    },

    /// Another process holds the partition's lease (a trimmer, or `apply`).
    #[error("lease {key} is held by {holder:?}: another trimmer or `queuegen apply` is working on this partition")]
    LeaseHeld { key: String, holder: String },

    /// A trim ran, but afterwards an entry it had to keep is gone: a pending
    /// entry without its payload, or a group's next undelivered entry.
    #[error("trim of {key} to MINID {minid}: verification failed: group {group:?} {problem}")]
    TrimUnverified {
        key: String,
        minid: String,
        group: String,
        problem: String,
    },

    /// The server may evict keys, and with them queue data.
    #[error(
        "redis {server} has maxmemory-policy {policy}: it may evict stream entries and lose jobs; set maxmemory-policy noeviction (or call Worker::allow_eviction_policy to accept the risk)"
    )]
    EvictionPolicy { server: String, policy: String },

    /// A result was stored, but fewer replicas than asked acknowledged it
    /// within the timeout: a failover now could forget it, so the job must
    /// not be acknowledged as done yet.
    #[error("result {key}: {acknowledged} of the {replicas} replica(s) asked for acknowledged it within {timeout:?}; a failover could still forget it")]
    NotReplicated {
        key: String,
        replicas: u32,
        acknowledged: u32,
        timeout: std::time::Duration,
    },

    /// The Cluster's topology could not be read, or does not fit the spec.
    #[error("redis cluster: {problem}")]
    Cluster { problem: String },

    /// The metrics endpoint could not be served.
    #[error("serving metrics on {addr}: {source}")]
    Http {
        addr: String,
        #[source]
        source: std::io::Error,
    },

    /// A file a connection needs (password, TLS CA, client certificate or
    /// key) could not be read.
    #[error("reading the {what} {}: {source}", path.display())]
    ConnectionFile {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file a connection needs was read but cannot be used.
    #[error("the {what} {} cannot be used: {problem}", path.display())]
    InvalidConnectionFile {
        what: &'static str,
        path: std::path::PathBuf,
        problem: String,
    },

    /// The Redis URL and the connection options do not fit together, or
    /// the URL is not a Redis URL.
    #[error("connecting to {url}: {problem}")]
    ConnectOptions { url: String, problem: String },

    /// The server refused the user and password.
    #[error("redis {server} refused user {user:?} with the password {password_from}: {source}")]
    Authentication {
        server: String,
        user: String,
        /// Where the password came from: the URL, a file (named), none.
        password_from: String,
        #[source]
        source: redis::RedisError,
    },

    /// PostgreSQL answered with an error, or the connection failed.
    /// `detail` is the server's message with its SQLSTATE (the driver's
    /// own message says only "db error").
    #[cfg(feature = "postgres")]
    #[error("postgres {target}: {context}: {detail}")]
    Postgres {
        /// `user@host:port/database`, never the password.
        target: String,
        context: String,
        detail: String,
        #[source]
        source: tokio_postgres::Error,
    },

    /// The database is not ready for what was asked: a URL that does not
    /// parse, migrations not applied, a handler name another queue uses.
    /// Says what to do.
    #[error("postgres {target}: {problem}")]
    PostgresSetup { target: String, problem: String },

    /// Redis answered with an error, or the connection failed.
    #[error("redis: {context}: {source}")]
    Redis {
        context: String,
        #[source]
        source: redis::RedisError,
    },
}

impl Error {
    /// Wraps a Redis error with what was being done (key, partition, command).
    pub fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        Error::Redis {
            context: context.into(),
            source,
        }
    }
}

#[cfg(feature = "postgres")]
impl Error {
    /// Wraps a PostgreSQL driver error with the database and what was being done.
    pub fn postgres(
        target: impl Into<String>,
        context: impl Into<String>,
        source: tokio_postgres::Error,
    ) -> Self {
        Error::Postgres {
            target: target.into(),
            context: context.into(),
            detail: crate::postgres::describe(&source),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
