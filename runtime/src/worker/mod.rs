//! The worker: reads a queue's partitions, runs each read's jobs together in one task, settles each outcome, recovers idle jobs.
//!
//! Pieces, each in its own module:
//! - `intake`: one loop that reserves permits, then reads at most that many
//!   entries with `XREADGROUP` on a connection of its own;
//! - `job`: the task that owns one entry and its permit: decode, handle,
//!   then ack, schedule a retry, dead-letter, or leave it pending;
//! - `recovery`: one loop that quarantines poison entries (by delivery count)
//!   and claims idle pending entries with `XAUTOCLAIM`, paced per partition
//!   by `claim_pace` (`claim.rate`);
//! - `promotion`: one loop that promotes due retries and delayed jobs to the ready streams;
//! - `leadership`: one loop that holds each partition's loops lease, so that
//!   recovery and promotion run a partition in one worker at a time;
//! - `rate`: the queue's rate limit (`handler.rate`), a token bucket in
//!   Redis the intake asks once per round;
//! - `pause`: one loop that re-reads which partitions are paused
//!   (`queuegen pause`) when the queue's pause channel says they changed,
//!   so that the intake skips them without a round trip;
//! - `trimmer`: one loop that trims the worker's partitions' streams every
//!   `retention.trim_every`, under each partition's trim lease;
//! - `shutdown`: stop reading, let the last read return, wait for jobs up
//!   to the budget, then leave whatever still runs pending.
//!
//! Before any of them starts, the worker checks that the server keeps its
//! data (`maxmemory-policy noeviction`) and has the Function library it was
//! generated with; it never loads one itself. Every part reports what
//! happened to one sink (`events`), which counts it for the [`WorkerReport`]
//! and records its metrics when given a registry or an address to serve them on.

mod acks;
mod claim_pace;
mod consumers;
mod core;
#[cfg(feature = "metrics")]
mod endpoint;
mod epochs;
mod events;
mod in_flight;
mod intake;
mod job;
mod lanes;
mod leadership;
mod pause;
mod promotion;
mod rate;
mod recovery;
mod reply;
mod report;
mod shutdown;
mod start_checks;
mod tenant_rate;
mod trimmer;
mod wake;

use futures_util::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::host::now_ms;
use crate::stream_slot::StreamSlot;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use self::core::{Core, Jobs};
use crate::config::QueueConfig;
use crate::connect::Redis;
use crate::envelope::Envelope;
use crate::error::{Error, RedisError, Result, SetupError, TransitionError};
use crate::handler::{Handler, Ownership};
use crate::transitions::{AckFunction, AckPath, TransitionCode};
use epochs::Epochs;
use events::Events;
use in_flight::InFlight;
use job::Held;
use reply::Entry;
use shutdown::Flag;

pub use report::WorkerReport;

/// Default longest wait of one blocking read.
const DEFAULT_READ_BLOCK: Duration = Duration::from_secs(1);
/// Shortest blocking read: `BLOCK 0` would mean "forever" to Redis.
const MIN_READ_BLOCK: Duration = Duration::from_millis(10);

/// The variable the generated Kubernetes Deployments name the pod's queue
/// in: the application's worker binary runs that queue's worker.
pub const QUEUE_ENV: &str = "QUEUEGEN_QUEUE";
/// The variable [`Worker::with_env`] takes the consumer name from.
pub const CONSUMER_ENV: &str = "QUEUEGEN_CONSUMER";
/// The variable [`Worker::with_env`] takes the metrics address from.
pub const METRICS_ADDR_ENV: &str = "QUEUEGEN_METRICS_ADDR";

/// Runs handler `H` for the envelopes `E` of one queue.
pub struct Worker<E, H> {
    redis: Redis,
    config: QueueConfig,
    handler: H,
    /// The partition numbers the author chose, checked at start
    /// ([`QueueConfig::chosen_partitions`]).
    partitions: Option<Vec<u16>>,
    read_block: Duration,
    consumer: String,
    allow_eviction_policy: bool,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::WorkerMetrics>,
    #[cfg(feature = "metrics")]
    metrics_addr: Option<std::net::SocketAddr>,
    _envelope: PhantomData<fn(E)>,
}

impl<E: Envelope, H: Handler<E>> Worker<E, H> {
    /// A worker for every partition of `config`, with a consumer name unique to this process.
    pub fn new(redis: &Redis, config: QueueConfig, handler: H) -> Self {
        Worker {
            redis: redis.clone(),
            config,
            handler,
            partitions: None,
            read_block: DEFAULT_READ_BLOCK,
            consumer: default_consumer_name(),
            allow_eviction_policy: false,
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "metrics")]
            metrics_addr: None,
            _envelope: PhantomData,
        }
    }

    /// Works only these partitions (default: all of them).
    pub fn partitions(mut self, partitions: impl IntoIterator<Item = u16>) -> Self {
        self.partitions = Some(partitions.into_iter().collect());
        self
    }

    /// Longest wait of one blocking read (default 1 s). Capped at a quarter of
    /// the shutdown budget, because shutdown waits for the read in progress.
    pub fn read_block(mut self, block: Duration) -> Self {
        self.read_block = block;
        self
    }

    /// Overrides the consumer name. It must be unique among running workers:
    /// two processes sharing a name share (and ack) one pending list.
    pub fn consumer_name(mut self, name: impl Into<String>) -> Self {
        self.consumer = name.into();
        self
    }

    /// Applies the settings a deployment gives through the environment, the
    /// contract of the generated Kubernetes manifests (docs/deploy.md):
    ///
    /// - `QUEUEGEN_CONSUMER`: the consumer name ([`Worker::consumer_name`]);
    ///   the manifests set it to the pod name, unique among running pods
    ///   and kept by a restarted container, so its pending entries stay
    ///   under one recognisable name.
    /// - `QUEUEGEN_METRICS_ADDR`: where to serve /metrics, /healthz and
    ///   /readyz ([`Worker::metrics_addr`], with the `metrics` feature),
    ///   e.g. `0.0.0.0:9464`.
    ///
    /// An unset or empty variable leaves the setting as it was. Fails with
    /// [`SetupError::InvalidWorker`] naming the variable when a value is unusable.
    pub fn with_env(self) -> Result<Self> {
        self.with_env_from(|name| std::env::var(name).ok())
    }

    /// [`Worker::with_env`] reading variables through `get`.
    fn with_env_from(mut self, get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| get(name).filter(|value| !value.trim().is_empty());
        if let Some(consumer) = get(CONSUMER_ENV) {
            self.consumer = consumer.trim().to_owned();
        }
        if let Some(addr) = get(METRICS_ADDR_ENV) {
            #[cfg(feature = "metrics")]
            {
                let parsed = addr.trim().parse().map_err(|err| {
                    Error::Setup(SetupError::InvalidWorker {
                        queue: self.config.queue.to_string(),
                        problem: format!(
                        "{METRICS_ADDR_ENV}={addr} is not an address such as 0.0.0.0:9464: {err}"
                    ),
                    })
                })?;
                self.metrics_addr = Some(parsed);
            }
            #[cfg(not(feature = "metrics"))]
            return Err(Error::Setup(SetupError::InvalidWorker {
                queue: self.config.queue.to_string(),
                problem: format!(
                    "{METRICS_ADDR_ENV}={addr} is set, but queuegen-runtime was built without its `metrics` feature"
                ),
            }));
        }
        Ok(self)
    }

    /// This worker's consumer name in the group.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Starts even when the server's `maxmemory-policy` is not `noeviction`,
    /// logging a warning instead of refusing with [`SetupError::EvictionPolicy`].
    /// Under memory pressure such a server deletes keys, stream entries of
    /// pending jobs included: accept that only for a cache-like queue whose
    /// jobs may be lost.
    pub fn allow_eviction_policy(mut self) -> Self {
        self.allow_eviction_policy = true;
        self
    }

    /// Records this worker's metrics (see docs/operations/observability.md, "Metrics")
    /// and registers them in `registry`, the application's own, to serve
    /// as it likes (e.g. with [`crate::metrics::router`]).
    ///
    /// Once per registry: for several workers in one process, register one
    /// [`crate::metrics::WorkerMetrics`] and give it to each with
    /// [`Worker::with_metrics`] instead, since a second registration would
    /// export every name twice.
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, registry: &mut crate::metrics::Registry) -> Self {
        self.metrics
            .get_or_insert_with(crate::metrics::WorkerMetrics::new)
            .register(registry);
        self
    }

    /// Records this worker's metrics into `metrics`, which the application
    /// registered once ([`crate::metrics::WorkerMetrics::register`]) and may
    /// share among all its workers: the labels tell queues and partitions apart.
    #[cfg(feature = "metrics")]
    pub fn with_metrics(mut self, metrics: crate::metrics::WorkerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Serves, on `addr` and for as long as the worker runs (its shutdown
    /// included), `GET /metrics` (this worker's metrics), `/healthz` (200
    /// while the process runs) and `/readyz` (200 while the intake is
    /// reading, 503 before its first read, while its reads fail, and once
    /// it stopped at shutdown). `run_until` fails with [`SetupError::Http`] if it
    /// cannot bind `addr`.
    #[cfg(feature = "metrics")]
    pub fn metrics_addr(mut self, addr: std::net::SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Works jobs until `shutdown` completes, then shuts down within
    /// `config.shutdown_budget` (plus the moment it takes to abandon whatever
    /// still runs then) and reports.
    ///
    /// Refuses to start, with [`SetupError::EvictionPolicy`] naming the server
    /// and the policy, when the server's `maxmemory-policy` (from `INFO
    /// memory`) is not `noeviction`, unless [`Worker::allow_eviction_policy`];
    /// and with [`SetupError::LibraryMissing`] naming the server and the library,
    /// when the server lacks the Function library `config.functions`
    /// (`queuegen apply` loads it).
    ///
    /// Returns an error, after the same orderly shutdown, when the queue
    /// cannot be worked at all: a missing consumer group (`queuegen apply`
    /// creates it), a key of the wrong type, missing permissions.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<WorkerReport> {
        // Every loop works streams: each chosen partition in every lane.
        let partitions = self.checked_streams()?;
        let reading = Arc::new(AtomicBool::new(false));
        #[cfg(feature = "metrics")]
        let (events, endpoint) = {
            let metrics = match (&self.metrics, self.metrics_addr) {
                (Some(metrics), _) => Some(metrics.clone()),
                (None, Some(_)) => Some(crate::metrics::WorkerMetrics::new()),
                (None, None) => None,
            };
            let endpoint = match (self.metrics_addr, &metrics) {
                (Some(addr), Some(metrics)) => {
                    Some(endpoint::start(addr, metrics, reading.clone()).await?)
                }
                _ => None,
            };
            let events = metrics.map_or_else(Events::default, |metrics| {
                Events::metered(&metrics, &self.config, &partitions)
            });
            (events, endpoint)
        };
        #[cfg(not(feature = "metrics"))]
        let events = Events::default();

        let ran = self.start(partitions, events, reading, shutdown).await;
        #[cfg(feature = "metrics")]
        if let Some(endpoint) = endpoint {
            endpoint.stop().await;
        }
        ran
    }

    /// The start checks, then the loops until shutdown.
    async fn start(
        self,
        streams: Vec<StreamSlot>,
        events: Events,
        reading: Arc<AtomicBool>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<WorkerReport> {
        start_checks::eviction_policy(&self.redis, self.allow_eviction_policy).await?;
        // Never loads anything itself: which code runs on the server is `apply`'s decision.
        crate::functions::verify_library(&self.redis, &self.config.functions).await?;
        let block = effective_read_block(self.read_block, self.config.handler.shutdown_budget);
        let span = tracing::info_span!(
            "worker",
            queue = &*self.config.queue,
            group = &*self.config.group,
            consumer = %self.consumer,
        );
        let stream_spans = stream_spans(&self.config, &streams, &span);
        let ready_keys: Arc<[String]> = self.config.ready_keys().into();
        let claims_keys: Arc<[String]> = StreamSlot::all(self.config.streams())
            .map(|stream| self.config.claims_key(stream))
            .collect();
        let epochs = Arc::new(Epochs::new(self.config.streams()));
        read_epochs(&self.redis, &claims_keys, &epochs).await;
        let events = Arc::new(events);
        let consumer: Arc<str> = Arc::from(self.consumer);
        let leadership = leadership::Leadership::new(self.config.streams(), &consumer);
        let handling = Arc::new(acks::Handling::default());
        // The pause flags as they are now, before the first read.
        let paused = pause::Paused::new(self.config.streams());
        if let Err(err) = pause::refresh(
            &mut self.redis.shared(),
            &self.config,
            &streams,
            &paused,
            &events,
        )
        .await
        {
            tracing::warn!(error = %err, queue = &*self.config.queue, "reading the pause flags failed; reading every partition until they are read");
        }
        let ack_path = ack_path(&self.redis, &self.config).await;
        let core = Arc::new(Core {
            redis: self.redis.clone(),
            paused,
            multiplexed: self.redis.shared(),
            jobs: Jobs {
                permits: Arc::new(Semaphore::new(self.config.handler.concurrency)),
                in_flight: Arc::new(InFlight::default()),
                handling: handling.clone(),
                acker: acks::start(acks::Acker {
                    conn: self.redis.shared(),
                    function: AckFunction::on(&self.config, ack_path),
                    keep: AckFunction::new(&self.config),
                    xackdel_refused: AtomicBool::new(false),
                    queue: self.config.queue.clone(),
                    partitions: self.config.partitions,
                    consumer: consumer.clone(),
                    keys: ready_keys.clone(),
                    claims_keys: claims_keys.clone(),
                    epochs: epochs.clone(),
                    events: events.clone(),
                    handling,
                    concurrency: self.config.handler.concurrency,
                }),
                ownership: Arc::new(Ownership {
                    consumer: consumer.clone(),
                    config: self.config.clone(),
                    conn: self.redis.shared(),
                    run_events: events.run_events(),
                }),
            },
            ready_keys,
            claims_keys,
            stream_spans,
            epochs,
            config: self.config,
            consumer,
            events,
            reading,
            leadership,
            stop: Flag::new(),
            cancel: Flag::new(),
        });
        let runner = Arc::new(Runner {
            core: core.clone(),
            handler: self.handler,
            _envelope: PhantomData,
        });
        // Logged as the numbers they always were.
        let numbers: Vec<u16> = streams.iter().map(|stream| stream.index()).collect();
        tracing::info!(parent: &span, partitions = ?numbers, ?block, ack = ack_path.command(), "worker starting");
        if core.config.retention.delete_on_ack && ack_path == AckPath::Xack {
            tracing::info!(
                parent: &span,
                "retention.on_ack is delete, but not every primary has XACKDEL (Redis 8.2+): acknowledging with XACK; done entries stay until the trimmer removes them after retention.min_age",
            );
        }
        // Lead what is free before recovery and promotion first look.
        let mut leases = leadership::Leases::new(streams.clone());
        leases.pass(&core).instrument(span.clone()).await;
        let leading = tokio::spawn(leadership::run(core.clone(), leases).instrument(span.clone()));
        let intake = tokio::spawn(
            intake::run(runner.clone(), self.redis, streams.clone(), block)
                .instrument(span.clone()),
        );
        let recovery =
            tokio::spawn(recovery::run(runner, streams.clone()).instrument(span.clone()));
        let promotion =
            tokio::spawn(promotion::run(core.clone(), streams.clone()).instrument(span.clone()));
        let pausing =
            tokio::spawn(pause::run(core.clone(), streams.clone(), block).instrument(span.clone()));
        let trimmer = tokio::spawn(trimmer::run(core.clone(), streams).instrument(span.clone()));
        shutdown::run(
            core,
            [intake, recovery, promotion, trimmer, leading, pausing],
            shutdown,
        )
        .instrument(span)
        .await
    }

    /// The stream numbers this worker works (see [`QueueConfig::streams`]):
    /// its partitions, each in every lane.
    fn checked_streams(&self) -> Result<Vec<StreamSlot>> {
        let invalid = |problem: String| {
            Error::Setup(SetupError::InvalidWorker {
                queue: self.config.queue.to_string(),
                problem,
            })
        };
        if self.config.handler.concurrency == 0 {
            return Err(invalid("handler.concurrency is 0".into()));
        }
        if self.config.claim.batch == 0 {
            return Err(invalid("claim.batch is 0".into()));
        }
        if self.config.claim.rate == 0 {
            return Err(invalid("claim.rate is 0".into()));
        }
        if self.config.retry.max_attempts == 0 {
            return Err(invalid("retry.max_attempts is 0".into()));
        }
        if self.config.retry.promote_batch == 0 {
            return Err(invalid("retry.promote_batch is 0".into()));
        }
        if self.config.poison.max_deliveries == 0 {
            return Err(invalid("poison.max_deliveries is 0".into()));
        }
        if self.config.functions.is_empty() {
            return Err(invalid("the Function library name is empty".into()));
        }
        if self.consumer.is_empty() {
            return Err(invalid("the consumer name is empty".into()));
        }
        let partitions = match &self.partitions {
            Some(chosen) if chosen.is_empty() => {
                return Err(invalid("no partitions to work".into()))
            }
            Some(chosen) => self.config.chosen_partitions(chosen),
            None => self.config.chosen_partitions(&[]),
        }
        .map_err(|err| invalid(err.to_string()))?;
        Ok(self.config.streams_of(&partitions))
    }
}

/// How a worker of `config` acknowledges its `Done` jobs on `redis`:
/// [`AckPath::XackDel`] for a queue with `retention.on_ack: delete` when
/// every primary has `XACKDEL` (asked with `COMMAND INFO`, never inferred
/// from a version), [`AckPath::Xack`] otherwise. The worker asks once at
/// start and logs the answer (`ack=` in "worker starting"); a server that
/// cannot be asked (a users file without `+command|info`) gets `XACK`, with a
/// warning.
pub async fn ack_path(redis: &Redis, config: &QueueConfig) -> AckPath {
    if !config.retention.delete_on_ack {
        return AckPath::Xack;
    }
    match crate::connect::every_primary_has_command(redis, "xackdel").await {
        Ok(true) => AckPath::XackDel,
        Ok(false) => AckPath::Xack,
        Err(err) => {
            tracing::warn!(queue = &*config.queue, error = %err, "asking the primaries for XACKDEL failed; acknowledging with XACK");
            AckPath::Xack
        }
    }
}

/// One `partition` span per stream the worker reads, under its `worker`
/// span, carrying the stream's partition and lane; `Span::none()` for the
/// queue's other streams. Why these fields are not on each job's span: see
/// `job::run`.
fn stream_spans(
    config: &QueueConfig,
    worked: &[StreamSlot],
    worker: &tracing::Span,
) -> Box<[tracing::Span]> {
    let mut spans = vec![tracing::Span::none(); usize::from(config.streams())];
    for &stream in worked {
        spans[usize::from(stream.index())] = tracing::info_span!(
            parent: worker,
            "partition",
            partition = config.partition_of_stream(stream).index(),
            lane = config.lane_of_stream(stream).map(|lane| &*lane.name),
        );
    }
    spans.into_boxed_slice()
}

/// The worker's core and its handler: what starts and runs jobs (the
/// intake, recovery and every job task), the only part generic over the
/// envelope and the handler.
struct Runner<E, H> {
    core: Arc<Core>,
    handler: H,
    _envelope: PhantomData<fn(E)>,
}

/// The job-running code reads the core's fields as its own.
impl<E, H> Deref for Runner<E, H> {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

/// One stream entry handed to a job task.
struct Delivery {
    stream: StreamSlot,
    entry: Entry,
    /// Taken over by `XAUTOCLAIM` rather than read as new.
    claimed: bool,
    /// The partition's claim epoch read before the read (or with the claim)
    /// that delivered it; its ack carries it. `None` when it could not be
    /// read: the ack then checks each entry.
    claim_epoch: Option<u64>,
}

/// A delivery about to run: its in-flight entry taken and its permit held.
struct Ready {
    delivery: Delivery,
    held: Held,
}

impl<E: Envelope, H: Handler<E>> Runner<E, H> {
    /// Starts the task that owns `delivery` and its permit; `false` if that
    /// entry already runs here. The reading loops never run handlers themselves.
    ///
    /// Job tasks are not joined: the permits say how many are unsettled, and
    /// shutdown waits for all of them to come back.
    fn spawn_job(self: &Arc<Self>, delivery: Delivery, permit: OwnedSemaphorePermit) -> bool {
        match self.prepare(delivery, permit) {
            Some(ready) => {
                self.start_jobs(vec![ready]);
                true
            }
            None => false,
        }
    }

    /// Takes `delivery`'s in-flight entry; `None` if that entry already runs here.
    fn prepare(
        self: &Arc<Self>,
        delivery: Delivery,
        permit: OwnedSemaphorePermit,
    ) -> Option<Ready> {
        let Some(slot) = self
            .jobs
            .in_flight
            .enter(delivery.stream, &delivery.entry.id)
        else {
            // Recovery claimed an entry whose task is still running here: that
            // task keeps it (and acks it); a second run would only duplicate work.
            tracing::debug!(
                partition = self.config.partition_of_stream(delivery.stream).index(),
                key = self.ready_key(delivery.stream),
                stream_id = %delivery.entry.id,
                "claimed an entry already running here"
            );
            return None;
        };
        let held = Held {
            permit,
            slot,
            in_handler: Some(self.jobs.handling.enter()),
        };
        Some(Ready { delivery, held })
    }

    /// Starts the jobs of one read: one task, in which they run
    /// concurrently (each under its own timeout, panic guard and span), or
    /// a task of its own for a job alone. A task per job cost a spawn and,
    /// often, a wake-up of another runtime thread per job (callgrind and the
    /// bench: 1.3-1.5x the baseline's client CPU for one worker, 0.92x with
    /// this). Jobs of a read share their task's thread: a handler that
    /// computes for long must hand that work to `spawn_blocking` (as on any
    /// async runtime), or it holds up the rest of its read.
    fn start_jobs(self: &Arc<Self>, ready: Vec<Ready>) {
        let run = |shared: Arc<Self>, job: Ready| job::run(shared, job.delivery, job.held);
        match ready.len() {
            0 => {}
            1 => {
                let job = ready.into_iter().next().expect("one job");
                tokio::spawn(run(self.clone(), job));
            }
            _ => {
                let shared = self.clone();
                tokio::spawn(async move {
                    let mut running: FuturesUnordered<_> = ready
                        .into_iter()
                        .map(|job| run(shared.clone(), job))
                        .collect();
                    while running.next().await.is_some() {}
                });
            }
        }
    }
}

/// Reads every partition's claim epoch once, at start (one pipeline, split
/// per slot on a Cluster). Best effort: a partition whose epoch is not read
/// here stays unknown, and its first acks check each entry until an `ack`
/// or `claim` reply tells the epoch.
async fn read_epochs(redis: &Redis, claims_keys: &[String], epochs: &Epochs) {
    let mut pipe = redis::pipe();
    for key in claims_keys {
        pipe.cmd("GET").arg(key);
    }
    let read: redis::RedisResult<Vec<Option<u64>>> = pipe.query_async(&mut redis.shared()).await;
    match read {
        Ok(values) => {
            for (stream, value) in (0u16..).map(StreamSlot::new).zip(values) {
                epochs.observe(stream, value.unwrap_or(0));
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "reading the claim epochs failed; the first acks check each entry")
        }
    }
}

/// Why a read or claim did not complete.
enum Failure {
    /// Retrying cannot help: stop the worker with this error.
    Fatal(Error),
    /// Worth retrying after a pause; `reconnect` when the connection itself is suspect.
    Retry { error: Error, reconnect: bool },
    /// The shutdown budget ran out while waiting.
    Cancelled,
}

/// Sorts an error of a function call (or its preparation) into fatal or retryable.
///
/// Only what an operator must fix stops the worker: a key of the wrong type.
/// A library refusal of one transition (a bad entry, a missing source) is
/// about that entry: it is logged and tried again later. A library missing
/// on the server (after a failover, say) is retried until `apply` loads it.
fn classify_error(err: Error) -> Failure {
    match &err {
        Error::Transition(TransitionError::Refused {
            code: TransitionCode::WrongType,
            ..
        }) => Failure::Fatal(err),
        Error::Redis(RedisError { source, .. }) if source.code() == Some("WRONGTYPE") => {
            Failure::Fatal(err)
        }
        Error::Redis(RedisError { source, .. }) => {
            let reconnect = is_connection_error(source);
            Failure::Retry {
                error: err,
                reconnect,
            }
        }
        _ => Failure::Retry {
            error: err,
            reconnect: false,
        },
    }
}

/// Whether a command failed because of the connection (and may succeed on a retry).
fn is_connection_error(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Io
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
}

/// Sorts a Redis error from `command` on `keys` into fatal or retryable.
fn classify(err: redis::RedisError, command: &str, keys: &[&str], group: &str) -> Failure {
    match err.code() {
        Some("NOGROUP") => {
            // A one-key command names its key; for several, Redis's message does.
            let key = match keys {
                [key] => (*key).to_owned(),
                _ => err
                    .detail()
                    .and_then(|detail| detail.split('\'').nth(1))
                    .map_or_else(|| keys.join(", "), str::to_owned),
            };
            return Failure::Fatal(Error::Setup(SetupError::NoGroup {
                key,
                group: group.to_owned(),
            }));
        }
        // A Cluster reader whose slot moved away: simply read again.
        Some("UNBLOCKED") | Some("LOADING") | Some("TRYAGAIN") | Some("CLUSTERDOWN")
        | Some("MASTERDOWN") => {
            return Failure::Retry {
                error: Error::redis(command, err),
                reconnect: false,
            }
        }
        _ => {}
    }
    let connection_trouble = is_connection_error(&err);
    let error = Error::redis(format!("{command} {}", keys.join(" ")), err);
    if connection_trouble {
        Failure::Retry {
            error,
            reconnect: true,
        }
    } else {
        Failure::Fatal(error)
    }
}

/// A ticker for a loop that runs every `period` (at least 1 ms); after a slow
/// pass it waits a full period again rather than catch up in a burst.
fn every(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(period.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker
}

/// The Unix ms at which `delay` from now has fully passed: rounded up, so
/// that promotion comparing with [`now_ms`] (rounded down) never runs a
/// retry before its delay.
fn due_ms(delay: Duration) -> u64 {
    std::time::SystemTime::now()
        .checked_add(delay)
        .and_then(|due| due.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(u64::MAX, |since| {
            let ms = since.as_millis() + u128::from(since.subsec_nanos() % 1_000_000 != 0);
            u64::try_from(ms).unwrap_or(u64::MAX)
        })
}

/// The block time actually used: short enough that shutdown, which waits for
/// the read in progress, stays well inside its budget; never zero, which
/// Redis reads as "block forever".
fn effective_read_block(requested: Duration, shutdown_budget: Duration) -> Duration {
    requested.min(shutdown_budget / 4).max(MIN_READ_BLOCK)
}

/// `{hostname}-{pid}-{random hex}`: unique per process, and recognisable in
/// `XINFO CONSUMERS` as the pod or host that owns a pending entry.
fn default_consumer_name() -> String {
    format!(
        "{}-{}-{:08x}",
        crate::host::hostname(),
        std::process::id(),
        rand::random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_block_stays_well_below_the_shutdown_budget() {
        let second = Duration::from_secs(1);
        assert_eq!(
            effective_read_block(second, Duration::from_secs(20)),
            second
        );
        assert_eq!(
            effective_read_block(second, Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(effective_read_block(second, Duration::ZERO), MIN_READ_BLOCK);
        assert_eq!(
            effective_read_block(Duration::ZERO, Duration::from_secs(20)),
            MIN_READ_BLOCK
        );
    }

    #[test]
    fn a_due_time_is_never_before_its_delay() {
        let delay = Duration::from_millis(300);
        let before = std::time::SystemTime::now();
        let due = due_ms(delay);
        let earliest = (before + delay)
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        assert!(u128::from(due) * 1_000_000 >= earliest.as_nanos());
        assert_eq!(due_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn default_consumer_names_are_unique_and_name_the_process() {
        let a = default_consumer_name();
        let b = default_consumer_name();
        assert_ne!(a, b);
        let pid = format!("-{}-", std::process::id());
        assert!(a.contains(&pid), "{a} should contain the pid");
        let suffix = a.rsplit('-').next().unwrap();
        assert_eq!(suffix.len(), 8);
        assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
