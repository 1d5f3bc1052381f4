//! The one place a worker reports what happened: each event adds to the counters its [`WorkerReport`] is read from and records the event's metrics.
//!
//! The loops, the job tasks and the acker report through [`Events`] only;
//! none of them touches a counter or a metric itself, so an event cannot be
//! counted in the report and forgotten in the metrics, or the other way
//! round. The counters are the report's own fields, as atomics
//! (`WorkerReport<AtomicU64>`): an event costs a `Relaxed` add per field it
//! counts in, plus what `meter` costs (one branch without metrics).

mod meter;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::WorkerReport;
use crate::metrics::{FailedTransition, JobOutcome, Settlement, StreamRole, TrimOutcome};
use crate::transitions::{DeadReason, DueSet};
use meter::Meter;

/// Where a running worker reports its events; shared by its loops, its job tasks and its acker.
#[derive(Default)]
pub(super) struct Events {
    counts: WorkerReport<AtomicU64>,
    meter: Meter,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Events {
    /// Events counted for the report and recorded into `metrics`, whose
    /// series of `partitions` (stream numbers) exist from now on.
    #[cfg(feature = "metrics")]
    pub(super) fn metered(
        metrics: &crate::metrics::WorkerMetrics,
        config: &crate::config::QueueConfig,
        partitions: &[u16],
    ) -> Events {
        Events {
            counts: WorkerReport::default(),
            meter: Meter::new(metrics, config, partitions),
        }
    }

    /// What the worker did so far.
    pub(super) fn report(&self) -> WorkerReport {
        self.counts.load()
    }

    // The job's events, in the order a job meets them.

    /// A handler is about to start on the entry `stream_id`: returns the
    /// start time for [`Events::handled`] (`None` without metrics: no clock read).
    #[inline]
    pub(super) fn handler_started(&self, stream_id: &str) -> Option<Instant> {
        self.meter.start(stream_id)
    }

    /// A handler of `partition` ended with `outcome`; `started` is what
    /// [`Events::handler_started`] returned. A panic leaves its job pending:
    /// it counts as failed too.
    #[inline]
    pub(super) fn handled(&self, partition: u16, outcome: JobOutcome, started: Option<Instant>) {
        add(&self.counts.handled, 1);
        if outcome == JobOutcome::Panic {
            add(&self.counts.failed, 1);
        }
        self.meter.handled(partition, outcome, started);
    }

    /// An entry of `partition` did not decode as the envelope; no handler ran.
    pub(super) fn malformed(&self, partition: u16) {
        add(&self.counts.decode_errors, 1);
        self.meter.handled(partition, JobOutcome::Malformed, None);
    }

    /// `done` jobs acknowledged after `Outcome::Done`.
    #[inline]
    pub(super) fn acked(&self, done: u64) {
        add(&self.counts.done, done);
    }

    /// Acks under `retention.on_ack: delete` on the `XACKDEL` path:
    /// `deleted` entries went with their ack, `kept` stayed for another group.
    pub(super) fn acked_on_delete(&self, partition: u16, deleted: u64, kept: u64) {
        add(&self.counts.deleted_on_ack, deleted);
        add(&self.counts.kept_on_ack, kept);
        self.meter.acked_on_delete(partition, deleted, kept);
    }

    /// `entries` done jobs of `partition` whose ack failed: they stay pending.
    pub(super) fn ack_failed(&self, partition: u16, entries: u64) {
        add(&self.counts.failed, entries);
        self.meter.ack_failed(partition, entries);
    }

    /// A job of `partition` was moved to the retry set.
    pub(super) fn retry_scheduled(&self, partition: u16) {
        add(&self.counts.retried, 1);
        self.meter.retry_scheduled(partition);
    }

    /// An entry of `partition` was moved to the dead-letter stream for `reason`.
    pub(super) fn dead_lettered(&self, partition: u16, reason: DeadReason) {
        add(&self.counts.dead_lettered, 1);
        self.meter.dead_lettered(partition, reason);
    }

    /// A job's ambiguous outcome left it pending; its `reconcile` hook runs.
    pub(super) fn reconciling(&self) {
        add(&self.counts.reconciling, 1);
    }

    /// A job's own `transition` (its retry or dead letter) failed: it stays pending.
    pub(super) fn settlement_failed(&self, partition: u16, transition: FailedTransition) {
        add(&self.counts.failed, 1);
        self.meter.transition_failed(partition, transition);
    }

    /// A loop's `transition` (a promotion, a poison quarantine) failed; the
    /// loop tries again next pass, and no job counts as failed.
    pub(super) fn loop_transition_failed(&self, partition: u16, transition: FailedTransition) {
        self.meter.transition_failed(partition, transition);
    }

    /// `entries` of `partition` whose `settlement` was refused: no longer this worker's.
    pub(super) fn ownership_lost(&self, partition: u16, settlement: Settlement, entries: u64) {
        add(&self.counts.ownership_lost, entries);
        self.meter.ownership_lost(partition, settlement, entries);
    }

    /// `entries` of `partition` left pending when the shutdown budget ran out.
    pub(super) fn left_pending(&self, partition: u16, entries: u64) {
        add(&self.counts.in_flight_left_pending, entries);
        self.meter.left_pending(partition, entries);
    }

    // The intake's events.

    /// A job read over its tenant's rate was set aside into the retry set.
    pub(super) fn deferred(&self) {
        add(&self.counts.deferred, 1);
    }

    /// The intake read `entries` new entries from the lane in `slot`.
    pub(super) fn lane_delivered(&self, slot: usize, entries: u64) {
        self.meter.lane_delivered(slot, entries);
    }

    /// The intake waited `waited`, holding no permit, for the rate limit.
    pub(super) fn rate_limited(&self, waited: Duration) {
        self.meter.rate_limited(waited);
    }

    /// Whether `partition` is paused now, as this worker last read it.
    pub(super) fn intake_paused(&self, partition: u16, paused: bool) {
        self.meter.intake_paused(partition, paused);
    }

    // Recovery's events.

    /// An idle entry of `partition` was claimed and its job started here.
    pub(super) fn claimed(&self, partition: u16) {
        add(&self.counts.claimed, 1);
        self.meter.claimed(partition, 1);
    }

    /// Recovery of `partition` waited `waited` for the claim rate.
    pub(super) fn claim_throttled(&self, partition: u16, waited: Duration) {
        self.meter.claim_throttled(partition, waited);
    }

    /// A poison entry of `partition` was quarantined (and reported
    /// [`Events::dead_lettered`] with reason `poison` by the dead letter itself).
    pub(super) fn quarantined(&self, partition: u16) {
        add(&self.counts.quarantined, 1);
        self.meter.quarantined(partition);
    }

    /// `entries` pending entries of `partition` were found deleted from the stream.
    pub(super) fn pending_deleted(&self, partition: u16, entries: u64) {
        self.meter.pending_deleted(partition, entries);
    }

    // The scheduler's events.

    /// `jobs` due members of `set` moved to `partition`'s ready stream.
    pub(super) fn promoted(&self, partition: u16, set: DueSet, jobs: u64) {
        match set {
            DueSet::Retries => add(&self.counts.promoted, jobs),
            DueSet::Delayed => add(&self.counts.delayed_promoted, jobs),
        }
        self.meter.promoted(partition, set, jobs);
    }

    /// `members` due members of `partition` that could never be promoted
    /// were dead-lettered by the promote function: recorded as `decode_error`
    /// dead letters in the metrics, not counted in the report (as before the
    /// sink existed; their jobs never ran here).
    pub(super) fn unpromotable(&self, partition: u16, members: u64) {
        for _ in 0..members {
            self.meter.dead_lettered(partition, DeadReason::DecodeError);
        }
    }

    // The leadership loop's events.

    /// This worker took a partition's loops lease (renewals not counted).
    pub(super) fn loops_lease_taken(&self) {
        add(&self.counts.loops_leases_taken, 1);
    }

    /// This worker took (`true`) or left `partition`'s recovery and scheduler.
    pub(super) fn loops_leader(&self, partition: u16, leading: bool) {
        self.meter.loops_leader(partition, leading);
    }

    // The trimmer's events.

    /// One trim pass over `stream` of `partition` ended with `outcome`.
    pub(super) fn trim_pass(&self, partition: u16, stream: StreamRole, outcome: TrimOutcome) {
        self.meter.trim_pass(partition, stream, outcome);
    }

    /// `entries` removed from `stream` of `partition`.
    pub(super) fn trimmed(&self, partition: u16, stream: StreamRole, entries: u64) {
        add(&self.counts.trimmed, entries);
        self.meter.trim_removed(partition, stream, entries);
    }

    /// A trim stopped before removing anything; it is retried next period.
    pub(super) fn trim_aborted(&self) {
        add(&self.counts.trim_aborts, 1);
    }
}
