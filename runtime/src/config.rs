//! A queue's settings as generated from the spec, and the Redis key names derived from them.

use std::borrow::Cow;
use std::time::Duration;

use crate::stream_slot::{Partition, StreamSlot};

pub use queuegen_core::wire::EntryShape;

/// Everything the runtime needs to know about one queue. Generated code bakes
/// one of these in as a `const`, so a running worker's settings are exactly
/// what was reviewed in `queues.yaml`.
///
/// The sections mirror the spec's: `config.retry.backoff.initial` is
/// `retry.backoff.initial` in `queues.yaml`. Names and lists are
/// `Cow<'static, _>`: generated consts borrow literals
/// (`Cow::Borrowed`), while the CLI and dashboard, which build the value from
/// a spec read at run time, own theirs (no leaked strings).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The service that owns the spec; names the Function library and ACL users.
    pub service: Cow<'static, str>,
    /// First segment of every key (`redis.key_prefix`): `{key_prefix}:{queue-NN}:ready`.
    pub key_prefix: Cow<'static, str>,
    pub queue: Cow<'static, str>,
    /// Number of partitions, each its own stream with its own hash tag.
    pub partitions: u16,
    /// Envelope fields (header or body) whose values pick the partition.
    pub partition_by: Cow<'static, [Cow<'static, str>]>,
    /// Consumer group name (`group.name`).
    pub group: Cow<'static, str>,
    /// Where a newly created group starts (`group.start`): `$`, `0-0` or a stream ID.
    pub group_start: Cow<'static, str>,
    /// A consumer idle this long that holds no pending entry is removed
    /// from the group by the partition's leader (`group.prune_consumers_after`).
    pub prune_consumers_after: Duration,
    /// The service's Function library, e.g. `qg_docs_pipeline_v1`: the
    /// version this code was generated with. Function names are
    /// `{functions}_{name}`, so two versions run side by side.
    pub functions: Cow<'static, str>,
    pub handler: HandlerConfig,
    pub claim: ClaimConfig,
    pub payload: PayloadConfig,
    pub retry: RetryConfig,
    pub poison: PoisonConfig,
    pub dead_letter: DeadLetterConfig,
    pub retention: RetentionConfig,
    pub admission: AdmissionConfig,
    /// The spec's `redis.wait_*` durability settings.
    pub redis: DurabilityConfig,
    /// `dedup:`; `None`: publishes are not deduplicated.
    pub dedup: Option<DedupConfig>,
    /// The queue's priority lanes in spec order (`lanes:`); empty: one
    /// unnamed lane. Each lane is a stream of its own per partition, in the
    /// partition's hash tag; see [`QueueConfig::streams`].
    pub lanes: Cow<'static, [Lane]>,
    /// Index into `lanes` of the lane a job goes to when it names none.
    /// Its keys are the queue's unlaned ones, so adding lanes to a live
    /// queue keeps its backlog in this lane.
    pub default_lane: usize,
}

/// `handler:`: how one worker process runs jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HandlerConfig {
    /// A handler running longer than this is abandoned; the job is retried as a transient failure.
    pub timeout: Duration,
    /// Jobs one worker process runs at once; also the most it reads ahead.
    pub concurrency: usize,
    /// How long shutdown waits for jobs in flight before leaving them pending.
    pub shutdown_budget: Duration,
    /// The queue's rate limit (`handler.rate`), shared by all its workers
    /// through a token bucket in Redis (`QueueConfig::rate_key`); `None`: no limit.
    pub rate: Option<RateLimit>,
    /// The queue's per-tenant rate limit (`handler.tenant_rate`): one bucket
    /// per tenant class (`QueueConfig::tenant_rate_key`); `None`: no limit.
    pub tenant_rate: Option<TenantRateLimit>,
}

/// `claim:`: recovery of entries left pending by a consumer that went away.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaimConfig {
    /// Pending entries idle longer than this are claimed by another consumer.
    pub min_idle: Duration,
    /// How often the recovery loop looks for idle pending entries.
    pub every: Duration,
    /// Most entries claimed by one `XAUTOCLAIM` call; also the largest burst
    /// of claims `rate` allows.
    pub batch: usize,
    /// Most entries recovery claims per second per partition (`claim.rate`),
    /// so that a claim storm after an outage starts handlers at a bounded pace.
    pub rate: u32,
}

/// `payload:`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PayloadConfig {
    /// Largest encoded envelope (sum of field names and values) a producer accepts.
    pub max_bytes: usize,
    /// How producers lay an envelope out in its entry (`payload.shape`);
    /// readers take either.
    pub shape: EntryShape,
}

/// `retry:`: failed attempts and their promotion back to the ready stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryConfig {
    /// Total application attempts, including the first; the last failure dead-letters.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// How often retry promotion moves due retries back to the ready stream.
    pub promote_every: Duration,
    /// Most retries one `retry_promote` call moves.
    pub promote_batch: usize,
}

/// `retry.backoff:`: the wait before each attempt after the first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Backoff before the second attempt.
    pub initial: Duration,
    /// Longest backoff between two attempts.
    pub max: Duration,
    /// Growth of the backoff per attempt: `initial * factor^(attempt-1)`, capped at `max`.
    pub factor: f64,
    pub jitter: Jitter,
}

/// `poison:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoisonConfig {
    /// Deliveries (the pending list's count) after which an entry is quarantined
    /// as poison: a crash loop, independent of the application attempt.
    pub max_deliveries: u32,
}

/// `dead_letter:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterConfig {
    /// Approximate cap of each partition's dead-letter stream (`MAXLEN ~`).
    pub max_len: u64,
    /// Dead letters younger than this are never trimmed (`dead_letter.retention`).
    pub retention: Duration,
}

/// `retention:`: how long entries and markers stay, and who trims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// Ready entries younger than this are never trimmed (`retention.min_age`).
    pub min_age: Duration,
    /// Lifetime of transition markers: `retention.min_age`, so a re-run of a
    /// transition finds its marker as long as its source can still exist.
    pub marker_ttl: Duration,
    /// How often workers trim their partitions' streams (`retention.trim_every`).
    pub trim_every: Duration,
    /// Whether workers run the trim loop: false for `retention.trim: cronjob`,
    /// where a cron-scheduled `queuegen trim` trims instead.
    pub trim_in_process: bool,
    /// `retention.on_ack: delete`: a done job's ack deletes its entry
    /// (`XACKDEL … ACKED`, once every group has read it and none holds it
    /// pending) where every primary has `XACKDEL`; elsewhere workers
    /// acknowledge with `XACK` and keep it, as with `false`.
    pub delete_on_ack: bool,
}

/// `admission:`: producers refuse work a backlogged partition cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Producers refuse a partition whose oldest undelivered entry is older
    /// than this (`admission.max_oldest_ready_age`); `None`: never.
    pub max_oldest_ready_age: Option<Duration>,
    /// How often a producer re-reads a partition's oldest undelivered age (`admission.refresh`).
    pub refresh: Duration,
}

/// `redis.wait_*`: how many replicas a publish waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurabilityConfig {
    /// Replicas each publish waits for with `WAIT` (`redis.wait_replicas`); 0: none.
    pub wait_replicas: u32,
    /// The longest a publish waits for them (`redis.wait_timeout`).
    pub wait_timeout: Duration,
}

/// `dedup:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupConfig {
    /// A publish of a job_id published within this long before writes
    /// nothing and answers the first entry's ID.
    pub window: Duration,
}

/// One priority lane of a queue (`lanes:`): under a backlog in every lane,
/// intake hands each lane a share of the jobs proportional to its weight.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lane {
    pub name: Cow<'static, str>,
    pub weight: u32,
}

/// A rate limit shared by every worker of a queue: `limit` jobs per `per`,
/// with bursts of at most `limit` (`handler.rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Jobs started per `per` by all workers together; also the bucket's size.
    pub limit: u32,
    /// The period `limit` applies to.
    pub per: Duration,
}

/// A rate limit per tenant (`handler.tenant_rate`): each tenant starts at
/// most `limit` jobs per `per`. Tenants are hashed into `classes` buckets, so
/// the buckets stay bounded however many tenants there are; tenants that
/// share a class share its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TenantRateLimit {
    pub limit: u32,
    pub per: Duration,
    pub classes: u16,
}

/// How a retry's backoff is randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// Exactly the exponential backoff.
    None,
    /// Uniform in `[0, backoff]`, so that jobs failing together do not retry together.
    Full,
}

/// The transition a marker key records (`{prefix}:{queue-NN}:marker:<kind>:<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkerKind {
    /// A ready entry was rescheduled into the retry set.
    Retry,
    /// A ready entry was set aside into the retry set before it ran, its
    /// attempt kept (`handler.tenant_rate`).
    Defer,
    /// A ready entry was dead-lettered.
    Dead,
    /// A retry was promoted back to the ready stream.
    Promote,
    /// A dead letter was replayed into the ready stream.
    Replay,
    /// A job_id was published (`dedup`): the marker lives for the window.
    Publish,
    /// A delayed job was promoted to the ready stream.
    Delayed,
    /// A schedule's tick was published (id `<schedule>:<tick_ms>`).
    Tick,
}

impl MarkerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerKind::Retry => "retry",
            MarkerKind::Defer => "defer",
            MarkerKind::Dead => "dead",
            MarkerKind::Promote => "promote",
            MarkerKind::Replay => "replay",
            MarkerKind::Publish => "publish",
            MarkerKind::Delayed => "delayed",
            MarkerKind::Tick => "tick",
        }
    }
}

impl AsRef<str> for MarkerKind {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl QueueConfig {
    /// How many streams the queue has: one per lane per partition.
    ///
    /// Every per-stream key (ready, dead, retry, delayed, markers, leases,
    /// claims) and every per-stream loop is addressed by a [`StreamSlot`]:
    /// `slot * partitions + partition`, where the default lane is slot 0 and
    /// the other lanes follow in spec order. So a partition's default-lane
    /// stream ([`Partition::default_stream`]) has the partition's number, and
    /// its keys are the unlaned ones. The pause flag and the hash tag are the
    /// partition's, for all its lanes: they take a [`Partition`].
    pub fn streams(&self) -> u16 {
        self.partitions
            .saturating_mul(self.lanes.len().max(1) as u16)
    }

    /// The stream of `partition` in the lane at index `lane` of `lanes`.
    pub fn stream(&self, lane: usize, partition: Partition) -> StreamSlot {
        let slot = match lane.cmp(&self.default_lane) {
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Less => lane + 1,
            std::cmp::Ordering::Greater => lane,
        };
        StreamSlot::new(slot as u16 * self.partitions + partition.index())
    }

    /// The partition a stream belongs to.
    pub fn partition_of_stream(&self, stream: StreamSlot) -> Partition {
        Partition::new(stream.index() % self.partitions.max(1))
    }

    /// The lane a stream belongs to; `None` for a queue without lanes.
    pub fn lane_of_stream(&self, stream: StreamSlot) -> Option<&Lane> {
        let slot = usize::from(stream.index() / self.partitions.max(1));
        let lane = match slot {
            0 => self.default_lane,
            slot if slot <= self.default_lane => slot - 1,
            slot => slot,
        };
        self.lanes.get(lane)
    }

    /// The stream of `partition` in the lane named `lane` (`None`: the
    /// default lane); `None` when the queue has no lane of that name.
    #[cfg(feature = "operator")]
    pub(crate) fn stream_named(
        &self,
        lane: Option<&str>,
        partition: Partition,
    ) -> Option<StreamSlot> {
        match lane {
            None => Some(partition.default_stream()),
            Some(name) => Some(self.stream(self.lane_index(name)?, partition)),
        }
    }

    /// Index into `lanes` of the lane named `name`.
    pub fn lane_index(&self, name: &str) -> Option<usize> {
        self.lanes.iter().position(|lane| lane.name == name)
    }

    /// The streams of `partitions` in every lane: the default lane's first
    /// (numbered as the partitions themselves), then each other lane's.
    pub fn streams_of(&self, partitions: &[Partition]) -> Vec<StreamSlot> {
        (0..self.lanes.len().max(1) as u16)
            .flat_map(|slot| {
                partitions
                    .iter()
                    .map(move |p| StreamSlot::new(slot * self.partitions + p.index()))
            })
            .collect()
    }

    /// How a stream is named to people: `partition 3`, or `partition 3
    /// lane high` for a queue with lanes.
    pub fn place(&self, stream: StreamSlot) -> String {
        let partition = self.partition_of_stream(stream);
        match self.lane_of_stream(stream) {
            Some(lane) => format!("partition {partition} lane {}", lane.name),
            None => format!("partition {partition}"),
        }
    }

    /// The hash tag of a partition, e.g. `ocr-03`. Every key of the
    /// partition, in every lane, carries it, so a Function can touch them
    /// together in a Cluster.
    pub fn partition_tag(&self, partition: Partition) -> String {
        let width = partition_digits(self.partitions);
        format!("{}-{:0width$}", self.queue, partition, width = width)
    }

    /// The ready stream of a partition: `{prefix}:{queue-NN}:ready`.
    pub fn ready_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "ready")
    }

    /// The dead-letter stream of a partition: `{prefix}:{queue-NN}:dead`.
    pub fn dead_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "dead")
    }

    /// The retry schedule of a partition (zset of retry id by due time in Unix ms).
    pub fn retry_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "retry")
    }

    /// The envelopes of a partition's scheduled retries (hash by retry id).
    pub fn retry_jobs_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "retry-jobs")
    }

    /// Jobs published with a delay, by job_id, scored by due time in Unix ms
    /// (`{prefix}:{queue-NN}:delayed`). Its own set, not the retry set:
    /// members are job_ids (a second delayed publish of one job finds the
    /// first), not entry IDs, and `status` counts the two apart.
    pub(crate) fn delayed_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "delayed")
    }

    /// The envelopes of a partition's delayed jobs (hash by job_id).
    pub(crate) fn delayed_jobs_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "delayed-jobs")
    }

    /// The marker of one transition from source `id` (a ready entry, retry id or dead-letter ID).
    /// `kind` is a [`MarkerKind`] or its name (`retry`, `dead`, `promote`, `replay`).
    pub fn marker_key(&self, stream: StreamSlot, kind: impl AsRef<str>, id: &str) -> String {
        self.partition_key(stream, &format!("marker:{}:{id}", kind.as_ref()))
    }

    /// The keys of a pipeline run's state at this join queue, all in the
    /// run's partition (`partition::run_partition`), and that partition's
    /// ready stream, where the join's job goes.
    pub fn run_keys(&self, partition: Partition, pipeline: &str, run_id: &str) -> RunKeys {
        let stream = partition.default_stream();
        let run = self.partition_key(stream, &format!("run:{pipeline}:{run_id}"));
        RunKeys {
            out: format!("{run}:out"),
            settled: format!("{run}:settled"),
            run,
            ready: self.ready_key(stream),
            runs: self.partition_key(stream, &format!("runs:{pipeline}")),
        }
    }

    /// A schedule's hint of the latest tick the workers published (Unix ms):
    /// `{prefix}:schedule:<schedule>:last`, outside any partition.
    pub fn schedule_hint_key(&self, schedule: &str) -> String {
        format!("{}:schedule:{schedule}:last", self.key_prefix)
    }

    /// The partitions `chosen` names, sorted and without repeats, or every
    /// partition when it names none. A partition the queue does not have is
    /// [`OperationError::NoSuchPartition`](crate::error::OperationError::NoSuchPartition): the one check the worker, the CLI,
    /// the operator views and the dashboard make.
    pub fn chosen_partitions(&self, chosen: &[u16]) -> crate::Result<Vec<Partition>> {
        if chosen.is_empty() {
            return Ok(Partition::all(self.partitions).collect());
        }
        let mut partitions = chosen.to_vec();
        partitions.sort_unstable();
        partitions.dedup();
        match partitions.iter().find(|&&p| p >= self.partitions) {
            Some(&partition) => Err(crate::Error::Operation(
                crate::error::OperationError::NoSuchPartition {
                    queue: self.queue.to_string(),
                    partition,
                    partitions: self.partitions,
                },
            )),
            None => Ok(partitions.into_iter().map(Partition::new).collect()),
        }
    }

    /// `partition`, if the queue has it ([`QueueConfig::chosen_partitions`]).
    pub fn check_partition(&self, partition: u16) -> crate::Result<Partition> {
        self.chosen_partitions(&[partition])
            .map(|_| Partition::new(partition))
    }

    /// The partition's trim lease: `{prefix}:{queue-NN}:lease:trim`. One
    /// trimmer (or `queuegen apply` creating groups) holds it at a time.
    pub fn trim_lease_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "lease:trim")
    }

    /// The partition's loops lease of this queue's group:
    /// `{prefix}:{queue-NN}:lease:loops-{group}`. The group's worker holding
    /// it runs the partition's recovery and promotion loops; the group's
    /// other workers skip the partition in those loops. Per group, because
    /// each group has its own pending lists to recover.
    pub fn loops_lease_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, &format!("lease:loops-{}", self.group))
    }

    /// The partition's claim epoch: `{prefix}:{queue-NN}:claims`, a counter
    /// the library's `claim` raises whenever it takes entries from another
    /// consumer. A worker reads it with each read, and its acks skip the
    /// ownership listing while it has not moved.
    pub fn claims_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "claims")
    }

    /// How many consumers the group's leader removed from this stream's
    /// group (`group.prune_consumers_after`): `{prefix}:{queue-NN}:pruned`,
    /// a counter the library's `consumers_prune` raises; `status` shows it.
    pub fn pruned_key(&self, stream: StreamSlot) -> String {
        self.partition_key(stream, "pruned")
    }

    /// The partition's pause flag: `{prefix}:{queue-NN}:paused`. While it
    /// exists, workers read no new entries of the partition (recovery, acks
    /// and producers carry on); its value says who paused it, when and why
    /// (`ops::pause`). `queuegen pause` sets it, `queuegen resume` deletes it.
    /// One flag per partition for all its lanes: the key has no lane.
    pub fn paused_key(&self, partition: Partition) -> String {
        format!(
            "{}:{{{}}}:paused",
            self.key_prefix,
            self.partition_tag(partition)
        )
    }

    /// The queue's pause channel: `{prefix}:{queue}:paused`, a Pub/Sub
    /// channel (not a key). `queuegen pause` and `resume` publish to it
    /// after changing flags of [`QueueConfig::paused_key`]; each worker
    /// subscribes and re-reads its flags when a message arrives
    /// (`worker::pause`). The queue's name is in braces like the rate
    /// limit's key (`{prefix}:{queue}:rate`), though plain Pub/Sub ignores slots.
    pub fn pause_channel(&self) -> String {
        format!("{}:{{{}}}:paused", self.key_prefix, self.queue)
    }

    /// The queue's rate-limit bucket (`handler.rate`): `{prefix}:{queue}:rate`,
    /// one key for the whole queue, in a hash tag of the queue's name alone
    /// (never a partition's tag `{queue-NN}`), so on a Cluster it lives on
    /// whichever node owns that slot and every worker calls it there.
    pub(crate) fn rate_key(&self) -> String {
        format!("{}:{{{}}}:rate", self.key_prefix, self.queue)
    }

    /// The bucket of tenant class `class` (`handler.tenant_rate`):
    /// `{prefix}:tenant-NN:{queue}:rate`, in the queue's own hash tag like
    /// [`QueueConfig::rate_key`], and shaped like it for the library's
    /// `rate_take`.
    pub(crate) fn tenant_rate_key(&self, class: u16) -> String {
        let classes = self.handler.tenant_rate.map_or(1, |rate| rate.classes);
        let width = partition_digits(classes);
        format!(
            "{}:tenant-{class:0width$}:{{{}}}:rate",
            self.key_prefix, self.queue
        )
    }

    /// `{prefix}:{queue-NN}:suffix`, with `:lane-{name}` after the prefix
    /// for a lane other than the default one (whose streams are numbered as
    /// the partitions). The lane is part of the
    /// prefix, not the tag: a lane's keys share their partition's slot, and
    /// every key one Function call names still has one prefix and one tag.
    fn partition_key(&self, stream: StreamSlot, suffix: &str) -> String {
        let tag = self.partition_tag(self.partition_of_stream(stream));
        match self.lane_of_stream(stream) {
            Some(lane) if stream.index() >= self.partitions => {
                format!("{}:lane-{}:{{{tag}}}:{suffix}", self.key_prefix, lane.name)
            }
            _ => format!("{}:{{{tag}}}:{suffix}", self.key_prefix),
        }
    }

    /// Every stream's ready key, by stream number.
    pub fn ready_keys(&self) -> Vec<String> {
        StreamSlot::all(self.streams())
            .map(|s| self.ready_key(s))
            .collect()
    }
}

/// Digits used for partition numbers: at least two, enough for the largest.
fn partition_digits(partitions: u16) -> usize {
    let largest = partitions.saturating_sub(1).max(1);
    (largest.ilog10() as usize + 1).max(2)
}

/// A pipeline run's keys at one join queue ([`QueueConfig::run_keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKeys {
    /// `{prefix}:{queue-NN}:run:<pipeline>:<run_id>`, a hash: opened,
    /// started, the join's envelope, status, ended, the join's entry ID.
    pub run: String,
    /// `…:out`, a set: the jobs still outstanding here.
    pub out: String,
    /// `…:settled`, a hash: every job settled here, by job ID, with its
    /// summary record (`done:<result_ref>`, `dead`, or `-` for a job the
    /// join does not wait for).
    pub settled: String,
    /// The partition's ready stream, where the join's job is appended.
    pub ready: String,
    /// `{prefix}:{queue-NN}:runs:<pipeline>`, a zset: the runs open here, by
    /// start time (Unix ms).
    pub runs: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn slot(number: u16) -> StreamSlot {
        StreamSlot::new(number)
    }

    fn part(number: u16) -> Partition {
        Partition::new(number)
    }

    pub(crate) const OCR: QueueConfig = QueueConfig {
        service: Cow::Borrowed("docs-pipeline"),
        key_prefix: Cow::Borrowed("work"),
        queue: Cow::Borrowed("ocr"),
        partitions: 32,
        partition_by: Cow::Borrowed(&[Cow::Borrowed("tenant"), Cow::Borrowed("subject_ref")]),
        group: Cow::Borrowed("ocr-workers-v2"),
        group_start: Cow::Borrowed("$"),
        prune_consumers_after: Duration::from_secs(86_400),
        functions: Cow::Borrowed("qg_docs_pipeline_v1"),
        handler: HandlerConfig {
            timeout: Duration::from_secs(60),
            concurrency: 16,
            shutdown_budget: Duration::from_secs(20),
            rate: None,
            tenant_rate: None,
        },
        claim: ClaimConfig {
            min_idle: Duration::from_secs(120),
            every: Duration::from_secs(10),
            batch: 50,
            rate: 1000,
        },
        payload: PayloadConfig {
            max_bytes: 2048,
            shape: EntryShape::Packed,
        },
        retry: RetryConfig {
            max_attempts: 5,
            backoff: Backoff {
                initial: Duration::from_secs(2),
                max: Duration::from_secs(600),
                factor: 2.0,
                jitter: Jitter::Full,
            },
            promote_every: Duration::from_secs(1),
            promote_batch: 100,
        },
        poison: PoisonConfig { max_deliveries: 4 },
        dead_letter: DeadLetterConfig {
            max_len: 100_000,
            retention: Duration::from_secs(14 * 86_400),
        },
        retention: RetentionConfig {
            min_age: Duration::from_secs(3 * 86_400),
            marker_ttl: Duration::from_secs(3 * 86_400),
            trim_every: Duration::from_secs(60),
            trim_in_process: true,
            delete_on_ack: false,
        },
        admission: AdmissionConfig {
            max_oldest_ready_age: Some(Duration::from_secs(300)),
            refresh: Duration::from_secs(1),
        },
        redis: DurabilityConfig {
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
        },
        dedup: None,
        lanes: Cow::Borrowed(&[]),
        default_lane: 0,
    };

    pub(crate) const LANES: &[Lane] = &[
        Lane {
            name: Cow::Borrowed("high"),
            weight: 6,
        },
        Lane {
            name: Cow::Borrowed("normal"),
            weight: 3,
        },
        Lane {
            name: Cow::Borrowed("low"),
            weight: 1,
        },
    ];

    #[test]
    fn keys_share_one_hash_tag_per_partition() {
        assert_eq!(OCR.ready_key(slot(3)), "work:{ocr-03}:ready");
        assert_eq!(OCR.ready_keys().len(), 32);
        assert_eq!(OCR.dead_key(slot(3)), "work:{ocr-03}:dead");
        assert_eq!(OCR.retry_key(slot(3)), "work:{ocr-03}:retry");
        assert_eq!(OCR.retry_jobs_key(slot(3)), "work:{ocr-03}:retry-jobs");
        assert_eq!(OCR.trim_lease_key(slot(3)), "work:{ocr-03}:lease:trim");
        assert_eq!(
            OCR.loops_lease_key(slot(3)),
            format!("work:{{ocr-03}}:lease:loops-{}", OCR.group)
        );
        assert_eq!(OCR.claims_key(slot(3)), "work:{ocr-03}:claims");
        assert_eq!(OCR.paused_key(part(3)), "work:{ocr-03}:paused");
        assert_eq!(OCR.pause_channel(), "work:{ocr}:paused");
        assert_eq!(OCR.rate_key(), "work:{ocr}:rate");
        let mut per_tenant = OCR;
        per_tenant.handler.tenant_rate = Some(TenantRateLimit {
            limit: 10,
            per: Duration::from_secs(1),
            classes: 64,
        });
        assert_eq!(per_tenant.tenant_rate_key(7), "work:tenant-07:{ocr}:rate");
        assert_eq!(
            OCR.marker_key(slot(3), MarkerKind::Retry, "1700000000000-0"),
            "work:{ocr-03}:marker:retry:1700000000000-0"
        );
        assert_eq!(
            OCR.marker_key(slot(0), MarkerKind::Promote, "5-1"),
            "work:{ocr-00}:marker:promote:5-1"
        );
        assert_eq!(
            OCR.marker_key(slot(0), "replay", "5-1"),
            OCR.marker_key(slot(0), MarkerKind::Replay, "5-1")
        );
    }

    #[test]
    fn each_lane_is_a_stream_per_partition_in_the_partition_s_slot() {
        let laned = QueueConfig {
            partitions: 4,
            lanes: Cow::Borrowed(LANES),
            default_lane: 1,
            ..OCR
        };
        assert_eq!(laned.streams(), 12);
        // The default lane (normal) is slot 0; high and low follow.
        assert_eq!(laned.stream(1, part(3)), slot(3));
        assert_eq!(laned.stream(0, part(3)), slot(7));
        assert_eq!(laned.stream(2, part(1)), slot(9));
        for (index, lane) in LANES.iter().enumerate() {
            for partition in Partition::all(4) {
                let stream = laned.stream(index, partition);
                assert_eq!(laned.partition_of_stream(stream), partition);
                assert_eq!(laned.lane_of_stream(stream), Some(lane));
            }
        }
        assert_eq!(laned.place(slot(9)), "partition 1 lane low");
        // The default lane keeps the queue's unlaned keys.
        assert_eq!(laned.ready_key(slot(2)), "work:{ocr-02}:ready");
        assert_eq!(
            laned.ready_key(laned.stream(0, part(2))),
            "work:lane-high:{ocr-02}:ready"
        );
        assert_eq!(
            laned.marker_key(laned.stream(2, part(0)), MarkerKind::Retry, "5-1"),
            "work:lane-low:{ocr-00}:marker:retry:5-1"
        );
        // One pause flag and one rate bucket for every lane.
        assert_eq!(
            laned.paused_key(laned.partition_of_stream(laned.stream(0, part(2)))),
            "work:{ocr-02}:paused"
        );
        assert_eq!(
            laned.paused_key(laned.partition_of_stream(laned.stream(2, part(2)))),
            "work:{ocr-02}:paused"
        );
        assert_eq!(
            laned.streams_of(&[part(1)]),
            vec![slot(1), slot(5), slot(9)]
        );
        assert_eq!(laned.ready_keys().len(), 12);
        // Without lanes a stream number is the partition number.
        assert_eq!(OCR.streams(), 32);
        assert_eq!(OCR.place(slot(3)), "partition 3");
        assert_eq!(OCR.lane_of_stream(slot(3)), None);
    }

    #[test]
    fn partition_numbers_are_zero_padded_to_the_largest() {
        let wide = QueueConfig {
            partitions: 1000,
            ..OCR
        };
        assert_eq!(wide.partition_tag(part(7)), "ocr-007");
        let single = QueueConfig {
            partitions: 1,
            ..OCR
        };
        assert_eq!(single.partition_tag(part(0)), "ocr-00");
    }
}
