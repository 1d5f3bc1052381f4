//! The one place a worker reports what happened: each event adds to the counters its [`WorkerReport`] is read from and records the event's metrics.
//!
//! The loops, the job tasks and the acker report through [`Events`] only;
//! none of them touches a counter or a metric itself, so an event cannot be
//! counted in the report and forgotten in the metrics, or the other way
//! round. The counters are the report's own fields, as atomics
//! (`WorkerReport<AtomicU64>`): an event costs a `Relaxed` add per field it
//! counts in.
//!
//! Metrics are recorded when installed ([`Events::metered`]); without them
//! (or without the `metrics` feature, where that part compiles away) an
//! event costs one branch more. With them, a counter is one atomic add on a
//! handle taken when the worker started: no label lookup per event. Only
//! the two histograms take a lock, and only when installed.

#[cfg(feature = "metrics")]
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::WorkerReport;
use crate::metrics::{FailedTransition, JobOutcome, Settlement, StreamRole, TrimOutcome};
use crate::stream_slot::StreamSlot;
use crate::transitions::{DeadReason, DueSet};

#[cfg(feature = "metrics")]
use crate::metrics::{PartitionMeters, TrimMetrics, WorkerMetrics};
#[cfg(feature = "metrics")]
use crate::stream_slot::Partition;

/// Where a running worker reports its events; shared by its loops, its job tasks and its acker.
#[derive(Default)]
pub(super) struct Events {
    counts: WorkerReport<AtomicU64>,
    /// The metric handles, when metrics are installed.
    #[cfg(feature = "metrics")]
    installed: Option<Installed>,
}

#[cfg(feature = "metrics")]
struct Installed {
    queue: Cow<'static, str>,
    /// Pipeline runs' events, recorded by a stage's handler (`runs`).
    pipeline_runs: prometheus_client::metrics::family::Family<
        crate::metrics::RunLabels,
        prometheus_client::metrics::counter::Counter,
    >,
    /// By partition number; `None` for the partitions this worker does not work.
    partitions: Vec<Option<PartitionMeters>>,
    handler_duration: prometheus_client::metrics::histogram::Histogram,
    publish_to_start: prometheus_client::metrics::histogram::Histogram,
    /// Only for a queue with `handler.rate`.
    rate_limited: Option<crate::metrics::SecondsCounter>,
    /// By lane slot (stream number / partitions); empty without lanes.
    lane_deliveries: Vec<prometheus_client::metrics::counter::Counter>,
    trim: TrimMetrics,
    /// By stream number: the partition its trim series are labelled with
    /// (all lanes of a partition together, as every other series).
    trim_partitions: Vec<Partition>,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

#[cfg(feature = "metrics")]
impl Events {
    /// Events counted for the report and recorded into `metrics`, creating
    /// now every series of `streams`.
    pub(super) fn metered(
        metrics: &WorkerMetrics,
        config: &crate::config::QueueConfig,
        streams: &[StreamSlot],
    ) -> Events {
        // By stream number; a partition's lanes share its series.
        let mut table: Vec<Option<PartitionMeters>> = (0..config.streams()).map(|_| None).collect();
        for &stream in streams {
            if let Some(slot) = table.get_mut(usize::from(stream.index())) {
                let partition = config.partition_of_stream(stream);
                let mut meters = metrics.partition(&config.queue, &config.group, partition);
                if config.retention.delete_on_ack {
                    meters.on_ack = Some(metrics.on_ack(&config.queue, &config.group, partition));
                }
                *slot = Some(meters);
            }
        }
        // Where the workers trim, the trim alert reads the pass series from
        // the start (the CronJob's runs are seen through kube-state-metrics).
        if config.retention.trim_in_process {
            for &stream in streams {
                metrics
                    .trim()
                    .partition(&config.queue, config.partition_of_stream(stream));
            }
        }
        let (handler_duration, publish_to_start) = metrics.histograms(&config.queue, &config.group);
        Events {
            counts: WorkerReport::default(),
            installed: Some(Installed {
                queue: config.queue.clone(),
                pipeline_runs: metrics.pipeline_runs(),
                partitions: table,
                handler_duration,
                publish_to_start,
                rate_limited: config
                    .handler
                    .rate
                    .map(|_| metrics.rate_limited(&config.queue, &config.group)),
                lane_deliveries: (0..config.lanes.len() as u16)
                    .filter_map(|slot| {
                        config.lane_of_stream(StreamSlot::new(slot * config.partitions))
                    })
                    .map(|lane| metrics.lane_deliveries(&config.queue, &config.group, &lane.name))
                    .collect(),
                trim: metrics.trim().clone(),
                trim_partitions: StreamSlot::all(config.streams())
                    .map(|stream| config.partition_of_stream(stream))
                    .collect(),
            }),
        }
    }

    /// The metric handles of `stream`, when installed and worked here.
    #[inline]
    fn meters(&self, stream: StreamSlot) -> Option<&PartitionMeters> {
        self.installed
            .as_ref()?
            .partitions
            .get(usize::from(stream.index()))?
            .as_ref()
    }
}

// Without the feature the metric half of every method is gone and some arguments unused.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
impl Events {
    /// What the worker did so far.
    pub(super) fn report(&self) -> WorkerReport {
        self.counts.load()
    }

    // The job's events, in the order a job meets them.

    /// A handler is about to start on the entry `stream_id`: records the
    /// publish→start latency and returns the start time, for
    /// [`Events::handled`] (`None` without metrics: no clock read).
    #[inline]
    pub(super) fn handler_started(&self, stream_id: &str) -> Option<Instant> {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            if let Some(latency) = since_stream_id(stream_id) {
                installed.publish_to_start.observe(latency);
            }
            return Some(Instant::now());
        }
        None
    }

    /// A handler of `stream` ended with `outcome`; `started` is what
    /// [`Events::handler_started`] returned. A panic leaves its job
    /// pending: it counts as failed too.
    #[inline]
    pub(super) fn handled(
        &self,
        stream: StreamSlot,
        outcome: JobOutcome,
        started: Option<Instant>,
    ) {
        add(&self.counts.handled, 1);
        if outcome == JobOutcome::Panic {
            add(&self.counts.failed, 1);
        }
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            if let Some(started) = started {
                installed
                    .handler_duration
                    .observe(started.elapsed().as_secs_f64());
            }
            self.job_outcome(stream, outcome);
        }
    }

    /// An entry of `stream` did not decode as the envelope; no handler ran.
    pub(super) fn malformed(&self, stream: StreamSlot) {
        add(&self.counts.decode_errors, 1);
        #[cfg(feature = "metrics")]
        self.job_outcome(stream, JobOutcome::Malformed);
    }

    /// `done` jobs acknowledged after `Outcome::Done`.
    #[inline]
    pub(super) fn acked(&self, done: u64) {
        add(&self.counts.done, done);
    }

    /// Acks under `retention.on_ack: delete` on the `XACKDEL` path:
    /// `deleted` entries went with their ack, `kept` stayed for another group.
    pub(super) fn acked_on_delete(&self, stream: StreamSlot, deleted: u64, kept: u64) {
        add(&self.counts.deleted_on_ack, deleted);
        add(&self.counts.kept_on_ack, kept);
        #[cfg(feature = "metrics")]
        if let Some(on_ack) = self.meters(stream).and_then(|m| m.on_ack.as_ref()) {
            on_ack.deleted.inc_by(deleted);
            on_ack.kept.inc_by(kept);
        }
    }

    /// `entries` done jobs of `stream` whose ack failed: they stay pending.
    pub(super) fn ack_failed(&self, stream: StreamSlot, entries: u64) {
        add(&self.counts.failed, entries);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.ack_failures.inc_by(entries);
        }
    }

    /// A job of `stream` was moved to the retry set.
    pub(super) fn retry_scheduled(&self, stream: StreamSlot) {
        add(&self.counts.retried, 1);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.retries_scheduled.inc();
        }
    }

    /// An entry of `stream` was moved to the dead-letter stream for `reason`.
    pub(super) fn dead_lettered(&self, stream: StreamSlot, reason: DeadReason) {
        add(&self.counts.dead_lettered, 1);
        #[cfg(feature = "metrics")]
        self.dead_letter_metric(stream, reason, 1);
    }

    /// A job's ambiguous outcome left it pending; its `reconcile` hook runs.
    pub(super) fn reconciling(&self) {
        add(&self.counts.reconciling, 1);
    }

    /// A job's own `transition` (its retry or dead letter) failed: it stays pending.
    pub(super) fn settlement_failed(&self, stream: StreamSlot, transition: FailedTransition) {
        add(&self.counts.failed, 1);
        self.loop_transition_failed(stream, transition);
    }

    /// A loop's `transition` (a promotion, a poison quarantine) failed; the
    /// loop tries again next pass, and no job counts as failed.
    pub(super) fn loop_transition_failed(&self, stream: StreamSlot, transition: FailedTransition) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.transition_failures[transition.index()].inc();
        }
    }

    /// `entries` of `stream` whose `settlement` was refused: no longer this worker's.
    pub(super) fn ownership_lost(&self, stream: StreamSlot, settlement: Settlement, entries: u64) {
        add(&self.counts.ownership_lost, entries);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.ownership_lost[settlement.index()].inc_by(entries);
        }
    }

    /// `entries` of `stream` left pending when the shutdown budget ran out.
    pub(super) fn left_pending(&self, stream: StreamSlot, entries: u64) {
        add(&self.counts.in_flight_left_pending, entries);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.left_pending.inc_by(entries);
        }
    }

    // The intake's events.

    /// A job read over its tenant's rate was set aside into the retry set.
    pub(super) fn deferred(&self) {
        add(&self.counts.deferred, 1);
    }

    /// The intake read `entries` new entries from the lane in `slot`.
    pub(super) fn lane_delivered(&self, slot: usize, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(counter) = self
            .installed
            .as_ref()
            .and_then(|installed| installed.lane_deliveries.get(slot))
        {
            counter.inc_by(entries);
        }
    }

    /// The intake waited `waited`, holding no permit, for the rate limit.
    pub(super) fn rate_limited(&self, waited: Duration) {
        #[cfg(feature = "metrics")]
        if let Some(counter) = self
            .installed
            .as_ref()
            .and_then(|installed| installed.rate_limited.as_ref())
        {
            counter.inc_by(waited.as_secs_f64());
        }
    }

    /// Whether `stream` is paused now, as this worker last read it.
    pub(super) fn intake_paused(&self, stream: StreamSlot, paused: bool) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.intake_paused.set(i64::from(paused));
        }
    }

    // Recovery's events.

    /// An idle entry of `stream` was claimed and its job started here.
    pub(super) fn claimed(&self, stream: StreamSlot) {
        add(&self.counts.claimed, 1);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.claims.inc();
        }
    }

    /// Recovery of `stream` waited `waited` for the claim rate.
    pub(super) fn claim_throttled(&self, stream: StreamSlot, waited: Duration) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.claim_throttled.inc_by(waited.as_secs_f64());
        }
    }

    /// A poison entry of `stream` was quarantined (and reported
    /// [`Events::dead_lettered`], reason `poison`, by its dead letter).
    pub(super) fn quarantined(&self, stream: StreamSlot) {
        add(&self.counts.quarantined, 1);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.poison_quarantined.inc();
        }
    }

    /// The partition's leader removed `consumers` idle consumers from the group of `stream`.
    pub(super) fn consumers_pruned(&self, stream: StreamSlot, consumers: u64) {
        add(&self.counts.consumers_pruned, consumers);
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.consumers_pruned.inc_by(consumers);
        }
    }

    /// `entries` pending entries of `stream` were found deleted from the stream.
    pub(super) fn pending_deleted(&self, stream: StreamSlot, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            meters.pending_deleted.inc_by(entries);
        }
    }

    // The scheduler's events.

    /// `jobs` due members of `set` moved to `stream`'s ready stream.
    pub(super) fn promoted(&self, stream: StreamSlot, set: DueSet, jobs: u64) {
        match set {
            DueSet::Retries => add(&self.counts.promoted, jobs),
            DueSet::Delayed => add(&self.counts.delayed_promoted, jobs),
        }
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            match set {
                DueSet::Retries => meters.retries_promoted.inc_by(jobs),
                DueSet::Delayed => meters.delayed_promoted.inc_by(jobs),
            };
        }
    }

    /// `members` due members of `stream` that could never be promoted
    /// were dead-lettered by the promote function: counted with the dead
    /// letters, in the report as in the metrics (as `decode_error`), though
    /// no handler ran.
    pub(super) fn unpromotable(&self, stream: StreamSlot, members: u64) {
        add(&self.counts.dead_lettered, members);
        #[cfg(feature = "metrics")]
        self.dead_letter_metric(stream, DeadReason::DecodeError, members);
    }

    // The leadership loop's events.

    /// This worker took a partition's loops lease (renewals not counted).
    pub(super) fn loops_lease_taken(&self) {
        add(&self.counts.loops_leases_taken, 1);
    }

    /// This worker took (`true`) or left `stream`'s recovery and
    /// scheduler. Up or down by one, not set: workers of one process that
    /// share the metrics share the series.
    pub(super) fn loops_leader(&self, stream: StreamSlot, leading: bool) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.meters(stream) {
            if leading {
                meters.loops_leader.inc();
            } else {
                meters.loops_leader.dec();
            }
        }
    }

    // The trimmer's events.

    /// One trim pass over the `role` stream of `stream` ended with `outcome`.
    pub(super) fn trim_pass(&self, stream: StreamSlot, role: StreamRole, outcome: TrimOutcome) {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            installed.trim.pass(
                &installed.queue,
                installed.trim_partition(stream),
                role,
                outcome,
            );
        }
    }

    /// `entries` removed from the `role` stream of `stream`.
    pub(super) fn trimmed(&self, stream: StreamSlot, role: StreamRole, entries: u64) {
        add(&self.counts.trimmed, entries);
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            installed.trim.removed(
                &installed.queue,
                installed.trim_partition(stream),
                role,
                entries,
            );
        }
    }

    /// A trim stopped before removing anything; it is retried next period.
    pub(super) fn trim_aborted(&self) {
        add(&self.counts.trim_aborts, 1);
    }
}

#[cfg(feature = "metrics")]
impl Installed {
    /// The partition of `stream`'s trim series. It once was the stream's
    /// number, which for a lane other than the default one is no partition.
    fn trim_partition(&self, stream: StreamSlot) -> Partition {
        self.trim_partitions[usize::from(stream.index())]
    }
}

#[cfg(feature = "metrics")]
impl Events {
    /// Counts a delivery's `outcome` in `stream`'s jobs series.
    #[inline]
    fn job_outcome(&self, stream: StreamSlot, outcome: JobOutcome) {
        if let Some(meters) = self.meters(stream) {
            meters.jobs[outcome.index()].inc();
        }
    }

    /// Counts `entries` dead letters of `stream` under `reason`.
    fn dead_letter_metric(&self, stream: StreamSlot, reason: DeadReason, entries: u64) {
        if let Some(meters) = self.meters(stream) {
            meters.dead_letters[reason.index()].inc_by(entries);
        }
    }
}

/// Seconds from the time in a stream ID (`<ms>-<seq>`, the server's clock
/// at `XADD`) to now on this host's clock; 0 when the clocks disagree the
/// other way, `None` for an ID without a time.
#[cfg(feature = "metrics")]
fn since_stream_id(stream_id: &str) -> Option<f64> {
    let ms: u64 = stream_id
        .split_once('-')
        .map_or(stream_id, |(ms, _)| ms)
        .parse()
        .ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let added = std::time::Duration::from_millis(ms);
    Some(now.saturating_sub(added).as_secs_f64())
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    #[test]
    fn latency_comes_from_the_stream_id_time() {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let latency = since_stream_id(&format!("{}-7", now_ms - 2_000)).unwrap();
        assert!((2.0..3.0).contains(&latency), "{latency}");
        // A server clock ahead of ours: never negative.
        assert_eq!(
            since_stream_id(&format!("{}-0", now_ms + 60_000)),
            Some(0.0)
        );
        assert_eq!(since_stream_id("garbage"), None);
    }

    #[test]
    fn records_only_the_partitions_it_works_and_counts_for_the_report() {
        let metrics = WorkerMetrics::new();
        let config = crate::config::QueueConfig {
            partitions: 4,
            ..crate::config::tests::OCR
        };
        let events = Events::metered(&metrics, &config, &[1, 3].map(StreamSlot::new));
        events.handled(StreamSlot::new(1), JobOutcome::Done, None);
        events.handled(StreamSlot::new(2), JobOutcome::Panic, None);
        events.dead_lettered(StreamSlot::new(3), DeadReason::Poison);
        assert_eq!(
            events.meters(StreamSlot::new(1)).unwrap().jobs[JobOutcome::Done.index()].get(),
            1
        );
        assert!(events.meters(StreamSlot::new(2)).is_none());
        assert!(events.meters(StreamSlot::new(9)).is_none());
        assert_eq!(
            events.meters(StreamSlot::new(3)).unwrap().dead_letters[DeadReason::Poison.index()]
                .get(),
            1
        );
        let report = events.report();
        assert_eq!(
            (report.handled, report.failed, report.dead_lettered),
            (2, 1, 1)
        );
        assert!(Events::default().handler_started("1-0").is_none());
    }

    #[test]
    fn trim_series_of_every_lane_are_labelled_with_the_partition() {
        let metrics = WorkerMetrics::new();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let config = crate::config::QueueConfig {
            partitions: 4,
            lanes: std::borrow::Cow::Borrowed(crate::config::tests::LANES),
            default_lane: 1,
            ..crate::config::tests::OCR
        };
        let streams: Vec<StreamSlot> = StreamSlot::all(config.streams()).collect();
        let events = Events::metered(&metrics, &config, &streams);
        // Partition 1 in lane `low`, the third slot: stream 9.
        let low_of_1 = config.stream(2, Partition::new(1));
        assert_eq!(low_of_1, StreamSlot::new(9));
        events.trim_pass(low_of_1, StreamRole::Ready, TrimOutcome::Trimmed);
        events.trimmed(low_of_1, StreamRole::Ready, 7);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"queuegen_trim_passes_total{queue="ocr",partition="1",stream="ready",outcome="trimmed"} 1"#,
            r#"queuegen_trim_removed_entries_total{queue="ocr",partition="1",stream="ready"} 7"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains(r#"partition="9""#), "{text}");
    }
}

impl Events {
    /// Where a stage's handler records its runs' events (nothing without metrics).
    pub(super) fn run_events(&self) -> crate::runs::RunEvents {
        #[cfg(feature = "metrics")]
        {
            crate::runs::RunEvents::new(
                self.installed
                    .as_ref()
                    .map(|installed| installed.pipeline_runs.clone()),
            )
        }
        #[cfg(not(feature = "metrics"))]
        {
            crate::runs::RunEvents::default()
        }
    }
}
