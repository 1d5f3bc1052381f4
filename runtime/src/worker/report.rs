//! What a worker did between start and shutdown: [`WorkerReport`], whose fields are also the counters the worker adds to while it runs.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a worker did between start and shutdown.
///
/// `N` is `u64` in the report a worker returns; while it runs, the worker
/// counts into a `WorkerReport<AtomicU64>`, so the counters and the report
/// are one list of fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport<N = u64> {
    /// Jobs whose handler ran to an end: an outcome, an error, a panic or a timeout.
    pub handled: N,
    /// Jobs acknowledged after the handler returned `Outcome::Done`.
    pub done: N,
    /// Jobs moved to the retry set for another attempt.
    pub retried: N,
    /// Entries moved to the dead-letter stream, for any reason (decode
    /// errors and poison included).
    pub dead_lettered: N,
    /// Jobs left pending after an ambiguous outcome; their `reconcile` hook ran.
    pub reconciling: N,
    /// Jobs whose handler panicked, or whose ack or transition failed; they stay pending.
    pub failed: N,
    /// Entries that did not decode as the envelope (dead-lettered when the transition succeeded).
    pub decode_errors: N,
    /// Pending entries delivered `poison.max_deliveries` times, dead-lettered as poison.
    pub quarantined: N,
    /// Idle consumers without pending entries this worker removed from its
    /// group as the partitions' leader (`group.prune_consumers_after`).
    pub consumers_pruned: N,
    /// Retries this worker's scheduler moved back to the ready streams.
    pub promoted: N,
    /// Delayed jobs this worker's scheduler appended to the ready streams when due.
    pub delayed_promoted: N,
    /// Entries taken over by `XAUTOCLAIM` from idle consumers (a crashed worker,
    /// or this one's abandoned jobs) and run here.
    pub claimed: N,
    /// Jobs still running when the shutdown budget ran out; they stay pending
    /// with this consumer as owner, for the recovery of another worker.
    pub in_flight_left_pending: N,
    /// Stream entries (ready and dead-letter) this worker's trimmer removed.
    pub trimmed: N,
    /// Trims that stopped before removing anything because the groups changed
    /// since their plan (or the lease was lost); retried next period.
    pub trim_aborts: N,
    /// Jobs whose settlement (ack, retry or dead letter) was refused because
    /// their entry was no longer pending for this worker: it stalled past
    /// `claim.min_idle` and another worker claimed the job (which settles it),
    /// or the job was settled elsewhere. Nothing was written for them.
    pub ownership_lost: N,
    /// Times this worker took a partition's loops lease, and with it the
    /// partition's recovery and retry scheduler (renewals not counted).
    pub loops_leases_taken: N,
    /// Jobs read over their tenant's rate (`handler.tenant_rate`) and set
    /// aside into the retry set with their attempt kept, to be read again.
    pub deferred: N,
    /// With `retention.on_ack: delete` on a server with `XACKDEL`: done
    /// jobs whose entry was deleted with its ack (every group had read it
    /// and none held it pending). Counted in `done` too.
    pub deleted_on_ack: N,
    /// With `retention.on_ack: delete` on a server with `XACKDEL`: done
    /// jobs acknowledged but kept, because another group had not read the
    /// entry yet or held it pending (the trimmer removes it later). Counted
    /// in `done` too; 0 on the `XACK` path, where every entry is kept.
    pub kept_on_ack: N,
}

impl WorkerReport<AtomicU64> {
    /// The counts so far.
    pub(super) fn load(&self) -> WorkerReport {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WorkerReport {
            handled: get(&self.handled),
            done: get(&self.done),
            retried: get(&self.retried),
            dead_lettered: get(&self.dead_lettered),
            reconciling: get(&self.reconciling),
            failed: get(&self.failed),
            decode_errors: get(&self.decode_errors),
            quarantined: get(&self.quarantined),
            consumers_pruned: get(&self.consumers_pruned),
            promoted: get(&self.promoted),
            delayed_promoted: get(&self.delayed_promoted),
            claimed: get(&self.claimed),
            in_flight_left_pending: get(&self.in_flight_left_pending),
            trimmed: get(&self.trimmed),
            trim_aborts: get(&self.trim_aborts),
            ownership_lost: get(&self.ownership_lost),
            loops_leases_taken: get(&self.loops_leases_taken),
            deferred: get(&self.deferred),
            deleted_on_ack: get(&self.deleted_on_ack),
            kept_on_ack: get(&self.kept_on_ack),
        }
    }
}
