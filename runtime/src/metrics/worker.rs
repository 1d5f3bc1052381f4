//! The worker's metric families, and the per-partition handles a running worker records into without a lookup per event.
//!
//! Counters are per queue, partition and group (plus outcome or reason);
//! the two histograms only per queue and group, since each carries a series
//! per bucket. A worker creates every series of the partitions it works
//! when it starts, at 0, so that `rate()` and `increase()` see the first
//! event and the set of series does not change while it runs.

// Labels take `&Cow` and clone it: free for a generated config's borrowed
// names, where `&str` would allocate a `String` per series.
#![allow(clippy::ptr_arg)]

use prometheus_client::encoding::EncodeLabelSet;
use std::borrow::Cow;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{FailedTransition, JobOutcome, Settlement};
use super::trim::TrimMetrics;
use crate::stream_slot::Partition;
use crate::transitions::DeadReason;

/// Upper bounds (seconds) of the handler duration buckets: 1 ms to 5 min.
const HANDLER_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
/// Upper bounds (seconds) of the publish→start buckets: 1 ms to 1 h, since
/// a backlog or a redelivery after `claim.min_idle` is minutes, not ms.
const LATENCY_BUCKETS: [f64; 17] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    group: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    group: Cow<'static, str>,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    group: Cow<'static, str>,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SettlementLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    group: Cow<'static, str>,
    settlement: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: Cow<'static, str>,
    group: Cow<'static, str>,
}

/// A pipeline run's event at one join: `started`, `published`, `failed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RunLabels {
    pub(crate) pipeline: String,
    pub(crate) join: String,
    pub(crate) event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaneLabels {
    queue: Cow<'static, str>,
    group: Cow<'static, str>,
    lane: Cow<'static, str>,
}

type Histograms = Family<QueueLabels, Histogram, fn() -> Histogram>;

/// A counter of seconds, which are not whole.
pub(crate) type SecondsCounter = Counter<f64, AtomicU64>;

/// What workers record: jobs by outcome, handler duration, publish→start
/// latency, claims and the time recovery waited on the claim rate, poison quarantines, deleted pending entries, retries,
/// dead letters by reason, failed transitions and acks, settlements refused
/// because the worker no longer owned the entry, which partitions it leads
/// (its recovery and retry scheduler), and (recorded by the
/// worker's trimmer) trims.
///
/// Cloning shares the numbers. Register it once per registry
/// ([`WorkerMetrics::register`]) and hand the same value to every worker of
/// the process ([`crate::Worker::with_metrics`]): its labels tell the
/// queues, partitions and groups apart, and registering a second
/// `WorkerMetrics` in the same registry would export every name twice.
#[derive(Clone, Debug)]
pub struct WorkerMetrics {
    jobs: Family<OutcomeLabels, Counter>,
    handler_duration: Histograms,
    publish_to_start: Histograms,
    claims: Family<PartitionLabels, Counter>,
    claim_throttled: Family<PartitionLabels, SecondsCounter>,
    poison_quarantined: Family<PartitionLabels, Counter>,
    consumers_pruned: Family<PartitionLabels, Counter>,
    pending_deleted: Family<PartitionLabels, Counter>,
    retries_scheduled: Family<PartitionLabels, Counter>,
    retries_promoted: Family<PartitionLabels, Counter>,
    delayed_promoted: Family<PartitionLabels, Counter>,
    dead_letters: Family<ReasonLabels, Counter>,
    transition_failures: Family<OutcomeLabels, Counter>,
    ack_failures: Family<PartitionLabels, Counter>,
    deleted_on_ack: Family<PartitionLabels, Counter>,
    kept_on_ack: Family<PartitionLabels, Counter>,
    ownership_lost: Family<SettlementLabels, Counter>,
    left_pending: Family<PartitionLabels, Counter>,
    loops_leader: Family<PartitionLabels, Gauge>,
    intake_paused: Family<PartitionLabels, Gauge>,
    rate_limited: Family<QueueLabels, SecondsCounter>,
    lane_deliveries: Family<LaneLabels, Counter>,
    pipeline_runs: Family<RunLabels, Counter>,
    trim: TrimMetrics,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics {
            jobs: Family::default(),
            handler_duration: Family::new_with_constructor(|| Histogram::new(HANDLER_BUCKETS)),
            publish_to_start: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS)),
            claims: Family::default(),
            claim_throttled: Family::default(),
            poison_quarantined: Family::default(),
            consumers_pruned: Family::default(),
            pending_deleted: Family::default(),
            retries_scheduled: Family::default(),
            retries_promoted: Family::default(),
            delayed_promoted: Family::default(),
            dead_letters: Family::default(),
            transition_failures: Family::default(),
            ack_failures: Family::default(),
            deleted_on_ack: Family::default(),
            kept_on_ack: Family::default(),
            ownership_lost: Family::default(),
            left_pending: Family::default(),
            loops_leader: Family::default(),
            intake_paused: Family::default(),
            rate_limited: Family::default(),
            lane_deliveries: Family::default(),
            pipeline_runs: Family::default(),
            trim: TrimMetrics::default(),
        }
    }
}

impl WorkerMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every family to `registry` (the trim families included). Call
    /// it once per registry; the values are shared with every clone.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "queuegen_jobs",
            "Deliveries a worker ended, by outcome: the handler's outcome (done, retry, dead_letter, reconcile), its error kind (transient_error, permanent_error, ambiguous_error), timeout, panic, or malformed (did not decode; no handler ran)",
            self.jobs.clone(),
        );
        registry.register_with_unit(
            "queuegen_handler_duration",
            "Time the handler ran, from its start to its outcome, error, panic or timeout",
            Unit::Seconds,
            self.handler_duration.clone(),
        );
        registry.register_with_unit(
            "queuegen_publish_to_start",
            "Time from the entry's stream ID (when XADD accepted it, on the server's clock) to its handler's start on the worker's clock, for every delivery: retries count from their promotion, claimed entries include their time with the previous owner",
            Unit::Seconds,
            self.publish_to_start.clone(),
        );
        registry.register(
            "queuegen_intake_paused",
            "1 while this worker reads no new entries of the partition because it is paused (queuegen pause), else 0",
            self.intake_paused.clone(),
        );
        registry.register_with_unit(
            "queuegen_rate_limited",
            "Time the intake waited, holding no permit, because the queue's handler.rate bucket was empty: jobs being held back by the rate limit (only for queues with a rate)",
            Unit::Seconds,
            self.rate_limited.clone(),
        );
        registry.register(
            "queuegen_pipeline_runs",
            "Pipeline runs by what the stage workers' settles did at a join (labels pipeline and join, the spec's names): started (a first stage's job opened the run there), published (the join's job was published: once per run), failed (a dead letter failed the run there; its join never runs)",
            self.pipeline_runs.clone(),
        );
        registry.register(
            "queuegen_lane_deliveries",
            "New entries the intake read, by priority lane (only for queues with lanes): under a backlog in every lane their shares follow the lanes' weights",
            self.lane_deliveries.clone(),
        );
        registry.register(
            "queuegen_claims",
            "Idle pending entries taken over with XAUTOCLAIM and started here",
            self.claims.clone(),
        );
        registry.register_with_unit(
            "queuegen_claim_throttled",
            "Time recovery waited before claiming because the partition reached claim.rate (claims per second): a claim storm being paced",
            Unit::Seconds,
            self.claim_throttled.clone(),
        );
        registry.register(
            "queuegen_poison_quarantined",
            "Pending entries delivered poison.max_deliveries times without an outcome, moved to the dead-letter stream (reason poison)",
            self.poison_quarantined.clone(),
        );
        registry.register(
            "queuegen_consumers_pruned",
            "Consumers idle longer than group.prune_consumers_after with no pending entry, removed from the group by the partition's leader",
            self.consumers_pruned.clone(),
        );
        registry.register(
            "queuegen_pending_deleted",
            "Pending entries XAUTOCLAIM reported deleted from the stream before they were acknowledged: their jobs are lost (trimmed or XDEL'd too early)",
            self.pending_deleted.clone(),
        );
        registry.register(
            "queuegen_retries_scheduled",
            "Jobs moved to the retry set for another attempt",
            self.retries_scheduled.clone(),
        );
        registry.register(
            "queuegen_retries_promoted",
            "Due retries this worker's scheduler moved back to the ready stream",
            self.retries_promoted.clone(),
        );
        registry.register(
            "queuegen_delayed_promoted",
            "Delayed jobs (publish_at, publish_after) this worker's scheduler appended to the ready stream when due",
            self.delayed_promoted.clone(),
        );
        registry.register(
            "queuegen_dead_letters",
            "Entries moved to the dead-letter stream, by reason (retries_exhausted, permanent, poison, decode_error, unsupported_schema, handler)",
            self.dead_letters.clone(),
        );
        registry.register(
            "queuegen_transition_failures",
            "Transition calls (retry, dead_letter, promote) that failed; the entry stays where it was and is tried again",
            self.transition_failures.clone(),
        );
        registry.register(
            "queuegen_ack_failures",
            "Done jobs whose ack call failed; they stay pending and are redelivered",
            self.ack_failures.clone(),
        );
        registry.register(
            "queuegen_deleted_on_ack",
            "Done entries deleted from the ready stream with their ack (retention.on_ack: delete, XACKDEL ACKED): every group had read and acknowledged them",
            self.deleted_on_ack.clone(),
        );
        registry.register(
            "queuegen_kept_on_ack",
            "Done entries acknowledged but kept under retention.on_ack: delete, because another group had not acknowledged them yet (or the server has no XACKDEL): the trimmer removes them",
            self.kept_on_ack.clone(),
        );
        registry.register(
            "queuegen_ownership_lost",
            "Settlements (ack, retry, dead_letter) the Function library refused because the entry was no longer pending for this worker (QG_NOT_OWNER): it stalled past claim.min_idle and another worker claimed the job, which settles it; nothing was written",
            self.ownership_lost.clone(),
        );
        registry.register(
            "queuegen_jobs_left_pending",
            "Jobs still running or waiting for a permit when the shutdown budget ran out; they stay pending for another worker",
            self.left_pending.clone(),
        );
        registry.register(
            "queuegen_loops_leader",
            "Workers of this process holding the partition's loops lease of their group, and so running the partition's recovery and retry scheduler: 1 in the leader's process, 0 in the others'",
            self.loops_leader.clone(),
        );
        self.trim.register(registry);
    }

    /// The trim families, which the worker's trimmer records into.
    pub(crate) fn trim(&self) -> &TrimMetrics {
        &self.trim
    }

    /// Every counter of one partition, created now (at 0) if new.
    pub(crate) fn partition(
        &self,
        queue: &Cow<'static, str>,
        group: &Cow<'static, str>,
        partition: Partition,
    ) -> PartitionMeters {
        let labels = PartitionLabels {
            queue: queue.clone(),
            partition,
            group: group.clone(),
        };
        let counter =
            |family: &Family<PartitionLabels, Counter>| family.get_or_create_owned(&labels);
        let outcome = |family: &Family<OutcomeLabels, Counter>, outcome: &'static str| {
            family.get_or_create_owned(&OutcomeLabels {
                queue: queue.clone(),
                partition,
                group: group.clone(),
                outcome,
            })
        };
        PartitionMeters {
            on_ack: None,
            jobs: JobOutcome::ALL.map(|o| outcome(&self.jobs, o.as_str())),
            claims: counter(&self.claims),
            claim_throttled: self.claim_throttled.get_or_create_owned(&labels),
            poison_quarantined: counter(&self.poison_quarantined),
            consumers_pruned: counter(&self.consumers_pruned),
            pending_deleted: counter(&self.pending_deleted),
            retries_scheduled: counter(&self.retries_scheduled),
            retries_promoted: counter(&self.retries_promoted),
            delayed_promoted: counter(&self.delayed_promoted),
            dead_letters: DeadReason::ALL.map(|reason| {
                self.dead_letters.get_or_create_owned(&ReasonLabels {
                    queue: queue.clone(),
                    partition,
                    group: group.clone(),
                    reason: reason.as_str(),
                })
            }),
            transition_failures: FailedTransition::ALL
                .map(|t| outcome(&self.transition_failures, t.as_str())),
            ack_failures: counter(&self.ack_failures),
            ownership_lost: Settlement::ALL.map(|settlement| {
                self.ownership_lost.get_or_create_owned(&SettlementLabels {
                    queue: queue.clone(),
                    partition,
                    group: group.clone(),
                    settlement: settlement.as_str(),
                })
            }),
            left_pending: counter(&self.left_pending),
            loops_leader: self.loops_leader.get_or_create_owned(&labels),
            intake_paused: self.intake_paused.get_or_create_owned(&labels),
        }
    }

    /// The counters of a partition's acks that deleted their entry and that
    /// kept it: only for a queue with `retention.on_ack: delete`.
    pub(crate) fn on_ack(
        &self,
        queue: &Cow<'static, str>,
        group: &Cow<'static, str>,
        partition: Partition,
    ) -> OnAckCounters {
        let labels = PartitionLabels {
            queue: queue.clone(),
            partition,
            group: group.clone(),
        };
        OnAckCounters {
            deleted: self.deleted_on_ack.get_or_create_owned(&labels),
            kept: self.kept_on_ack.get_or_create_owned(&labels),
        }
    }

    /// The seconds counter of the intake's waits on the queue's rate limit.
    pub(crate) fn rate_limited(
        &self,
        queue: &Cow<'static, str>,
        group: &Cow<'static, str>,
    ) -> SecondsCounter {
        self.rate_limited.get_or_create_owned(&QueueLabels {
            queue: queue.clone(),
            group: group.clone(),
        })
    }

    /// The counters of pipeline runs' events, shared by the stage workers.
    pub(crate) fn pipeline_runs(&self) -> Family<RunLabels, Counter> {
        self.pipeline_runs.clone()
    }

    /// The counter of entries the intake read from `lane`.
    pub(crate) fn lane_deliveries(
        &self,
        queue: &Cow<'static, str>,
        group: &Cow<'static, str>,
        lane: &Cow<'static, str>,
    ) -> Counter {
        self.lane_deliveries.get_or_create_owned(&LaneLabels {
            queue: queue.clone(),
            group: group.clone(),
            lane: lane.clone(),
        })
    }

    /// The handler duration and publish→start histograms of one queue and group.
    pub(crate) fn histograms(
        &self,
        queue: &Cow<'static, str>,
        group: &Cow<'static, str>,
    ) -> (Histogram, Histogram) {
        let labels = QueueLabels {
            queue: queue.clone(),
            group: group.clone(),
        };
        (
            self.handler_duration.get_or_create_owned(&labels),
            self.publish_to_start.get_or_create_owned(&labels),
        )
    }
}

/// A partition's acks under `retention.on_ack: delete`: entries deleted with
/// their ack, and entries kept because another group still needed them.
#[derive(Debug, Clone)]
pub(crate) struct OnAckCounters {
    pub deleted: Counter,
    pub kept: Counter,
}

/// The counters of one partition, taken once when a worker starts: recording
/// is then one atomic add, with no label lookup.
#[derive(Debug)]
pub(crate) struct PartitionMeters {
    /// Only for a queue with `retention.on_ack: delete` ([`WorkerMetrics::on_ack`]).
    pub on_ack: Option<OnAckCounters>,
    /// By [`JobOutcome::index`].
    pub jobs: [Counter; JobOutcome::ALL.len()],
    pub claims: Counter,
    /// Seconds recovery waited on `claim.rate`.
    pub claim_throttled: SecondsCounter,
    /// 1 while the partition is paused.
    pub intake_paused: Gauge,
    pub poison_quarantined: Counter,
    pub consumers_pruned: Counter,
    pub pending_deleted: Counter,
    pub retries_scheduled: Counter,
    pub retries_promoted: Counter,
    pub delayed_promoted: Counter,
    /// By [`DeadReason::index`].
    pub dead_letters: [Counter; DeadReason::ALL.len()],
    /// By [`FailedTransition::index`].
    pub transition_failures: [Counter; FailedTransition::ALL.len()],
    pub ack_failures: Counter,
    /// By [`Settlement::index`].
    pub ownership_lost: [Counter; Settlement::ALL.len()],
    pub left_pending: Counter,
    /// Workers of this process leading the partition's recovery and scheduler (0 or 1).
    pub loops_leader: Gauge,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openmetrics(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn a_partition_exports_every_series_at_zero_then_counts() {
        let metrics = WorkerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let meters = metrics.partition(&"ocr".into(), &"workers".into(), Partition::new(3));
        let text = openmetrics(&registry);
        assert!(
            text.contains(r#"queuegen_jobs_total{queue="ocr",partition="3",group="workers",outcome="malformed"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"queuegen_dead_letters_total{queue="ocr",partition="3",group="workers",reason="retries_exhausted"} 0"#),
            "{text}"
        );

        meters.jobs[JobOutcome::Done.index()].inc_by(2);
        meters.dead_letters[DeadReason::Poison.index()].inc();
        meters.claim_throttled.inc_by(0.25);
        // A second worker of the same partition shares the series.
        metrics
            .partition(&"ocr".into(), &"workers".into(), Partition::new(3))
            .jobs[JobOutcome::Done.index()]
        .inc();
        let (duration, _latency) = metrics.histograms(&"ocr".into(), &"workers".into());
        duration.observe(0.003);
        let text = openmetrics(&registry);
        assert!(
            text.contains(
                r#"queuegen_jobs_total{queue="ocr",partition="3",group="workers",outcome="done"} 3"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"queuegen_dead_letters_total{queue="ocr",partition="3",group="workers",reason="poison"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"queuegen_handler_duration_seconds_count{queue="ocr",group="workers"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"queuegen_handler_duration_seconds_bucket{le="0.005",queue="ocr",group="workers"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("# UNIT queuegen_handler_duration_seconds seconds"),
            "{text}"
        );
        assert!(
            text.contains(r#"queuegen_claim_throttled_seconds_total{queue="ocr",partition="3",group="workers"} 0.25"#),
            "{text}"
        );
    }

    #[test]
    fn every_name_is_prefixed_and_exported_once() {
        let metrics = WorkerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        // A family without series exports nothing, not even its TYPE line.
        assert_eq!(openmetrics(&registry), "# EOF\n");
        let _meters = metrics.partition(&"ocr".into(), &"workers".into(), Partition::new(0));
        let _histograms = metrics.histograms(&"ocr".into(), &"workers".into());
        let _rate_limited = metrics.rate_limited(&"ocr".into(), &"workers".into());
        let _lane = metrics.lane_deliveries(&"ocr".into(), &"workers".into(), &"high".into());
        metrics.trim().removed(
            &"ocr".into(),
            Partition::new(0),
            super::super::StreamRole::Dead,
            1,
        );
        metrics.trim().pass(
            &"ocr".into(),
            Partition::new(0),
            super::super::StreamRole::Dead,
            super::super::TrimOutcome::Trimmed,
        );
        let text = openmetrics(&registry);
        let names: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .map(|rest| rest.split(' ').next().unwrap())
            .collect();
        assert!(
            names.iter().all(|name| name.starts_with("queuegen_")),
            "{names:?}"
        );
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names.len(), 22, "{names:?}");
    }
}
