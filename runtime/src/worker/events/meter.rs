//! What a worker records per event: into its `WorkerMetrics` when one is installed, nothing otherwise.
//!
//! Each method checks once whether metrics are installed; without them (or
//! without the `metrics` feature, where the methods are empty) an event
//! costs that one branch. With them, a counter is one atomic add on a
//! handle taken when the worker started: no label lookup per event. Only
//! the two histograms take a lock, and only when installed.

use std::time::Instant;

use crate::metrics::{FailedTransition, JobOutcome, Settlement, StreamRole, TrimOutcome};
use crate::transitions::{DeadReason, DueSet};

#[cfg(feature = "metrics")]
use crate::metrics::{PartitionMeters, TrimMetrics, WorkerMetrics};

/// A worker's recorder, shared by its loops, its job tasks and its acker.
#[derive(Default)]
pub(super) struct Meter {
    #[cfg(feature = "metrics")]
    installed: Option<Installed>,
}

#[cfg(feature = "metrics")]
struct Installed {
    queue: &'static str,
    /// By partition number; `None` for the partitions this worker does not work.
    partitions: Vec<Option<PartitionMeters>>,
    handler_duration: prometheus_client::metrics::histogram::Histogram,
    publish_to_start: prometheus_client::metrics::histogram::Histogram,
    /// Only for a queue with `handler.rate`.
    rate_limited: Option<crate::metrics::SecondsCounter>,
    /// By lane slot (stream number / partitions); empty without lanes.
    lane_deliveries: Vec<prometheus_client::metrics::counter::Counter>,
    trim: TrimMetrics,
}

#[cfg(feature = "metrics")]
impl Meter {
    /// Records into `metrics`, creating now every series of `partitions`.
    pub(super) fn new(
        metrics: &WorkerMetrics,
        config: &crate::config::QueueConfig,
        partitions: &[u16],
    ) -> Meter {
        // By stream number; a partition's lanes share its series.
        let mut table: Vec<Option<PartitionMeters>> = (0..config.streams()).map(|_| None).collect();
        for &stream in partitions {
            if let Some(slot) = table.get_mut(usize::from(stream)) {
                let partition = config.partition_of_stream(stream);
                let mut meters = metrics.partition(config.queue, config.group, partition);
                if config.delete_on_ack {
                    meters.on_ack = Some(metrics.on_ack(config.queue, config.group, partition));
                }
                *slot = Some(meters);
            }
        }
        // Where the workers trim, the trim alert reads the pass series from
        // the start (the CronJob's runs are seen through kube-state-metrics).
        if config.trim_in_process {
            for &stream in partitions {
                metrics
                    .trim()
                    .partition(config.queue, config.partition_of_stream(stream));
            }
        }
        let (handler_duration, publish_to_start) = metrics.histograms(config.queue, config.group);
        Meter {
            installed: Some(Installed {
                queue: config.queue,
                partitions: table,
                handler_duration,
                publish_to_start,
                rate_limited: config
                    .rate
                    .map(|_| metrics.rate_limited(config.queue, config.group)),
                lane_deliveries: (0..config.lanes.len() as u16)
                    .filter_map(|slot| config.lane_of_stream(slot * config.partitions))
                    .map(|lane| metrics.lane_deliveries(config.queue, config.group, lane.name))
                    .collect(),
                trim: metrics.trim().clone(),
            }),
        }
    }

    #[inline]
    fn partition(&self, partition: u16) -> Option<&PartitionMeters> {
        self.installed
            .as_ref()?
            .partitions
            .get(usize::from(partition))?
            .as_ref()
    }
}

// Without the feature every method below is empty and its arguments unused.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
impl Meter {
    /// A handler is about to start on the entry `stream_id`: records the
    /// publish→start latency and returns the start time, for
    /// [`Meter::handled`] (`None` when nothing is recorded: no clock read).
    #[inline]
    pub(super) fn start(&self, stream_id: &str) -> Option<Instant> {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            if let Some(latency) = since_stream_id(stream_id) {
                installed.publish_to_start.observe(latency);
            }
            return Some(Instant::now());
        }
        None
    }

    /// A delivery of `partition` ended with `outcome`; `started` is what
    /// [`Meter::start`] returned (`None` when no handler ran).
    #[inline]
    pub(super) fn handled(&self, partition: u16, outcome: JobOutcome, started: Option<Instant>) {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            if let Some(started) = started {
                installed
                    .handler_duration
                    .observe(started.elapsed().as_secs_f64());
            }
            if let Some(meters) = self.partition(partition) {
                meters.jobs[outcome.index()].inc();
            }
        }
    }

    pub(super) fn claimed(&self, partition: u16, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.claims.inc_by(entries);
        }
    }

    /// Recovery of `partition` waited `waited` for the claim rate.
    pub(super) fn claim_throttled(&self, partition: u16, waited: std::time::Duration) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.claim_throttled.inc_by(waited.as_secs_f64());
        }
    }

    pub(super) fn quarantined(&self, partition: u16) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.poison_quarantined.inc();
        }
    }

    pub(super) fn pending_deleted(&self, partition: u16, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.pending_deleted.inc_by(entries);
        }
    }

    pub(super) fn retry_scheduled(&self, partition: u16) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.retries_scheduled.inc();
        }
    }

    pub(super) fn promoted(&self, partition: u16, set: DueSet, jobs: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            match set {
                DueSet::Retries => meters.retries_promoted.inc_by(jobs),
                DueSet::Delayed => meters.delayed_promoted.inc_by(jobs),
            };
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (partition, set, jobs);
    }

    pub(super) fn dead_lettered(&self, partition: u16, reason: DeadReason) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.dead_letters[reason.index()].inc();
        }
    }

    pub(super) fn transition_failed(&self, partition: u16, transition: FailedTransition) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.transition_failures[transition.index()].inc();
        }
    }

    /// Acks under `retention.on_ack: delete`: `deleted` of the entries went
    /// with their ack, `kept` stayed for another group.
    pub(super) fn acked_on_delete(&self, partition: u16, deleted: u64, kept: u64) {
        #[cfg(feature = "metrics")]
        if let Some(on_ack) = self.partition(partition).and_then(|m| m.on_ack.as_ref()) {
            on_ack.deleted.inc_by(deleted);
            on_ack.kept.inc_by(kept);
        }
    }

    pub(super) fn ack_failed(&self, partition: u16, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.ack_failures.inc_by(entries);
        }
    }

    /// `entries` of `partition` whose `settlement` was refused: no longer this worker's.
    pub(super) fn ownership_lost(&self, partition: u16, settlement: Settlement, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.ownership_lost[settlement.index()].inc_by(entries);
        }
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
    pub(super) fn rate_limited(&self, waited: std::time::Duration) {
        #[cfg(feature = "metrics")]
        if let Some(counter) = self
            .installed
            .as_ref()
            .and_then(|installed| installed.rate_limited.as_ref())
        {
            counter.inc_by(waited.as_secs_f64());
        }
    }

    /// Whether `partition` is paused now, as this worker last read it.
    pub(super) fn intake_paused(&self, partition: u16, paused: bool) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.intake_paused.set(i64::from(paused));
        }
    }

    /// This worker took (`true`) or left `partition`'s recovery and
    /// scheduler. Up or down by one, not set: workers of one process that
    /// share the metrics share the series.
    pub(super) fn loops_leader(&self, partition: u16, leading: bool) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            if leading {
                meters.loops_leader.inc();
            } else {
                meters.loops_leader.dec();
            }
        }
    }

    pub(super) fn left_pending(&self, partition: u16, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.partition(partition) {
            meters.left_pending.inc_by(entries);
        }
    }

    /// `entries` removed from `stream` of `partition` by the worker's trimmer.
    pub(super) fn trim_removed(&self, partition: u16, stream: StreamRole, entries: u64) {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            installed
                .trim
                .removed(installed.queue, partition, stream, entries);
        }
    }

    /// One trim pass of the worker's trimmer over `stream` of `partition` ended with `outcome`.
    pub(super) fn trim_pass(&self, partition: u16, stream: StreamRole, outcome: TrimOutcome) {
        #[cfg(feature = "metrics")]
        if let Some(installed) = &self.installed {
            installed
                .trim
                .pass(installed.queue, partition, stream, outcome);
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
    fn records_only_the_partitions_it_works() {
        let metrics = WorkerMetrics::new();
        let config = crate::config::QueueConfig {
            partitions: 4,
            ..crate::config::tests::OCR
        };
        let meter = Meter::new(&metrics, &config, &[1, 3]);
        meter.handled(1, JobOutcome::Done, None);
        meter.handled(2, JobOutcome::Done, None);
        meter.dead_lettered(3, DeadReason::Poison);
        assert_eq!(
            meter.partition(1).unwrap().jobs[JobOutcome::Done.index()].get(),
            1
        );
        assert!(meter.partition(2).is_none());
        assert!(meter.partition(9).is_none());
        assert_eq!(
            meter.partition(3).unwrap().dead_letters[DeadReason::Poison.index()].get(),
            1
        );
        assert!(Meter::default().start("1-0").is_none());
    }
}
