//! Queue-level Prometheus gauges built from the status model, exported by one
//! process per deployment (`queuegen monitor`, or a team's own) so that N
//! workers do not export N copies of the same queue's numbers.
//!
//! Labels are `queue`, `partition` and `group` (and `library`): bounded by
//! the spec. Every refresh replaces every series, so a group that went away,
//! or a lag Redis can no longer count, leaves no stale number behind; a
//! failed refresh withdraws the queue gauges altogether (no numbers are
//! better than old ones presented as current), counts the failure and makes
//! `/readyz` answer 503 until a refresh succeeds.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{Atomic, Gauge};
use prometheus_client::registry::{Registry, Unit};

use super::status::{status_of, StatusReport, WatchedQueue};
use crate::connect::Redis;
use crate::error::Result;
use crate::metrics::Readiness;

/// A series about one consumer group of one partition.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GroupLabels {
    pub queue: String,
    pub partition: String,
    pub group: String,
}

/// A series about one partition.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PartitionLabels {
    pub queue: String,
    pub partition: String,
}

/// A series about one Function library version.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LibraryLabels {
    pub library: String,
}

type Seconds = Gauge<f64, AtomicU64>;

/// The queue gauges, registered once in a registry and set from each
/// [`StatusReport`] with `QueueGauges::update`.
#[derive(Clone)]
pub struct QueueGauges {
    oldest_ready_age: Series<GroupLabels, Seconds>,
    oldest_pending_age: Series<GroupLabels, Seconds>,
    pending: Series<GroupLabels, Gauge>,
    lag: Series<GroupLabels, Gauge>,
    history: Series<PartitionLabels, Gauge>,
    dead_letters: Series<PartitionLabels, Gauge>,
    retries_scheduled: Series<PartitionLabels, Gauge>,
    delayed: Series<PartitionLabels, Gauge>,
    paused: Series<PartitionLabels, Gauge>,
    library_loaded: Series<LibraryLabels, Gauge>,
    refresh_failures: Counter,
    last_success: Seconds,
}

impl QueueGauges {
    /// Registers every queue gauge (names `queuegen_queue_*`) and the refresh
    /// metrics (`queuegen_monitor_*`) in `registry`.
    pub fn register(registry: &mut Registry) -> QueueGauges {
        let gauges = QueueGauges {
            oldest_ready_age: Series::default(),
            oldest_pending_age: Series::default(),
            pending: Series::default(),
            lag: Series::default(),
            history: Series::default(),
            dead_letters: Series::default(),
            retries_scheduled: Series::default(),
            delayed: Series::default(),
            paused: Series::default(),
            library_loaded: Series::default(),
            refresh_failures: Counter::default(),
            last_success: Seconds::default(),
        };
        registry.register_with_unit(
            "queuegen_queue_oldest_ready_age",
            "Age of the group's oldest undelivered entry (0 when none)",
            Unit::Seconds,
            gauges.oldest_ready_age.family.clone(),
        );
        registry.register_with_unit(
            "queuegen_queue_oldest_pending_age",
            "Age of the group's oldest pending entry, since it was added (0 when none)",
            Unit::Seconds,
            gauges.oldest_pending_age.family.clone(),
        );
        registry.register(
            "queuegen_queue_pending",
            "Entries delivered to the group and not yet acknowledged",
            gauges.pending.family.clone(),
        );
        registry.register(
            "queuegen_queue_lag",
            "Entries not yet delivered to the group; absent while Redis cannot count them (see the oldest ready age)",
            gauges.lag.family.clone(),
        );
        registry.register(
            "queuegen_queue_history",
            "Entries stored in the ready stream (XLEN), acknowledged ones included: history, not depth",
            gauges.history.family.clone(),
        );
        registry.register(
            "queuegen_queue_dead_letters",
            "Entries in the partition's dead-letter stream",
            gauges.dead_letters.family.clone(),
        );
        registry.register(
            "queuegen_queue_retries_scheduled",
            "Retries waiting in the partition's retry schedule",
            gauges.retries_scheduled.family.clone(),
        );
        registry.register(
            "queuegen_queue_delayed",
            "Jobs waiting in the partition's delayed set (publish_at, publish_after)",
            gauges.delayed.family.clone(),
        );
        registry.register(
            "queuegen_queue_paused",
            "1 while the partition's intake is paused (queuegen pause), else 0",
            gauges.paused.family.clone(),
        );
        registry.register(
            "queuegen_function_library_loaded",
            "1 when the Function library version answers on the server, 0 when it is missing",
            gauges.library_loaded.family.clone(),
        );
        registry.register(
            "queuegen_monitor_refresh_failures",
            "Refreshes of the queue gauges that failed (the gauges are withdrawn until one succeeds)",
            gauges.refresh_failures.clone(),
        );
        registry.register_with_unit(
            "queuegen_monitor_last_success_timestamp",
            "Unix time of the last successful refresh",
            Unit::Seconds,
            gauges.last_success.clone(),
        );
        gauges
    }

    /// Sets every gauge from `report`, and removes the series it no longer has.
    pub(crate) fn update(&self, report: &StatusReport) {
        let seconds = |ms: u64| ms as f64 / 1_000.0;
        let mut ready = Vec::new();
        let mut pending_age = Vec::new();
        let mut pending = Vec::new();
        let mut lag = Vec::new();
        let mut history = Vec::new();
        let mut dead = Vec::new();
        let mut retries = Vec::new();
        let mut delayed = Vec::new();
        let mut paused = Vec::new();
        for queue in &report.queues {
            for partition in &queue.partitions {
                let number = partition.partition.to_string();
                let labels = PartitionLabels {
                    queue: queue.queue.clone(),
                    partition: number.clone(),
                };
                history.push((labels.clone(), to_i64(partition.history)));
                dead.push((labels.clone(), to_i64(partition.dead_letters.count)));
                retries.push((labels.clone(), to_i64(partition.retries.scheduled)));
                delayed.push((labels.clone(), to_i64(partition.delayed.scheduled)));
                paused.push((labels, i64::from(partition.paused.is_some())));
                for group in &partition.groups {
                    let labels = GroupLabels {
                        queue: queue.queue.clone(),
                        partition: number.clone(),
                        group: group.name.clone(),
                    };
                    ready.push((
                        labels.clone(),
                        group.oldest_undelivered.map_or(0.0, |e| seconds(e.age_ms)),
                    ));
                    pending_age.push((
                        labels.clone(),
                        group
                            .oldest_pending
                            .as_ref()
                            .map_or(0.0, |p| seconds(p.age_ms)),
                    ));
                    pending.push((labels.clone(), to_i64(group.pending)));
                    if let Some(known) = group.lag {
                        lag.push((labels, to_i64(known)));
                    }
                }
            }
        }
        // A queue with lanes has a status row per lane; the gauges stay per
        // partition (labels bounded, alerts unchanged): counts add up, ages
        // and the pause flag take the largest lane's.
        let sum = |a: i64, b: i64| a.saturating_add(b);
        self.oldest_ready_age
            .replace(per_partition(ready, f64::max));
        self.oldest_pending_age
            .replace(per_partition(pending_age, f64::max));
        self.pending.replace(per_partition(pending, sum));
        self.lag.replace(per_partition(lag, sum));
        self.history.replace(per_partition(history, sum));
        self.dead_letters.replace(per_partition(dead, sum));
        self.retries_scheduled.replace(per_partition(retries, sum));
        self.delayed.replace(per_partition(delayed, sum));
        self.paused.replace(per_partition(paused, i64::max));
        // On a Cluster a library is listed per primary: loaded means on every one.
        let mut loaded: Vec<(LibraryLabels, i64)> = Vec::new();
        for library in &report.libraries {
            let Some(here) = library.loaded else { continue };
            match loaded
                .iter_mut()
                .find(|(labels, _)| labels.library == library.name)
            {
                Some((_, value)) => *value = (*value).min(i64::from(here)),
                None => loaded.push((
                    LibraryLabels {
                        library: library.name.clone(),
                    },
                    i64::from(here),
                )),
            }
        }
        self.library_loaded.replace(loaded);
        self.last_success.set(seconds(report.server_time_ms));
    }

    /// Counts a failed refresh and withdraws the queue gauges.
    pub(crate) fn refresh_failed(&self) {
        self.refresh_failures.inc();
        self.oldest_ready_age.replace(Vec::new());
        self.oldest_pending_age.replace(Vec::new());
        self.pending.replace(Vec::new());
        self.lag.replace(Vec::new());
        self.history.replace(Vec::new());
        self.dead_letters.replace(Vec::new());
        self.retries_scheduled.replace(Vec::new());
        self.delayed.replace(Vec::new());
        self.paused.replace(Vec::new());
        self.library_loaded.replace(Vec::new());
    }
}

/// Folds rows with the same labels (the lanes of one partition) into one with `fold`.
fn per_partition<L: Hash + Eq + Clone, V: Copy>(
    rows: Vec<(L, V)>,
    fold: impl Fn(V, V) -> V,
) -> Vec<(L, V)> {
    let mut folded: Vec<(L, V)> = Vec::with_capacity(rows.len());
    let mut index: HashMap<L, usize> = HashMap::new();
    for (labels, value) in rows {
        match index.get(&labels) {
            Some(&at) => folded[at].1 = fold(folded[at].1, value),
            None => {
                index.insert(labels.clone(), folded.len());
                folded.push((labels, value));
            }
        }
    }
    folded
}

fn to_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// One gauge family and the label sets it currently holds, so that a refresh
/// can remove the series that are gone.
struct Series<L, M> {
    family: Family<L, M>,
    present: Arc<Mutex<HashSet<L>>>,
}

impl<L: Clone + Hash + Eq, M: Default> Default for Series<L, M> {
    fn default() -> Self {
        Series {
            family: Family::default(),
            present: Arc::default(),
        }
    }
}

impl<L, M> Clone for Series<L, M> {
    fn clone(&self) -> Self {
        Series {
            family: self.family.clone(),
            present: self.present.clone(),
        }
    }
}

impl<L, N, A> Series<L, Gauge<N, A>>
where
    L: Clone + Hash + Eq,
    A: Atomic<N> + Default,
{
    /// Makes `values` the family's whole content.
    fn replace(&self, values: Vec<(L, N)>) {
        let mut present = self.present.lock().unwrap_or_else(PoisonError::into_inner);
        let now: HashSet<L> = values.iter().map(|(labels, _)| labels.clone()).collect();
        for gone in present.difference(&now) {
            self.family.remove(gone);
        }
        for (labels, value) in values {
            self.family.get_or_create(&labels).set(value);
        }
        *present = now;
    }
}

/// Refreshes the status of some queues periodically into [`QueueGauges`]:
/// what `queuegen monitor` runs, and what a team can run in a process of its
/// own next to its registry (serve it with [`crate::metrics::router`] and
/// [`QueueMonitor::readiness`]).
#[derive(Clone)]
pub struct QueueMonitor {
    redis: Redis,
    queues: Arc<[WatchedQueue]>,
    gauges: QueueGauges,
    ready: Arc<AtomicBool>,
}

impl QueueMonitor {
    /// Registers the gauges in `registry`; nothing is read until [`Self::refresh`].
    pub fn new(redis: Redis, queues: Vec<WatchedQueue>, registry: &mut Registry) -> QueueMonitor {
        QueueMonitor {
            redis,
            queues: queues.into(),
            gauges: QueueGauges::register(registry),
            ready: Arc::default(),
        }
    }

    /// Reads the status once and sets the gauges from it; on an error counts
    /// the failure, withdraws the gauges and is not ready until the next
    /// success.
    pub async fn refresh(&self) -> Result<StatusReport> {
        match status_of(&self.redis, &self.queues).await {
            Ok(report) => {
                self.gauges.update(&report);
                self.ready.store(true, Ordering::Relaxed);
                Ok(report)
            }
            Err(err) => {
                self.gauges.refresh_failed();
                self.ready.store(false, Ordering::Relaxed);
                Err(err)
            }
        }
    }

    /// `/readyz`: whether the last refresh succeeded.
    pub fn readiness(&self) -> Readiness {
        let ready = self.ready.clone();
        Arc::new(move || ready.load(Ordering::Relaxed))
    }

    /// Refreshes every `every` until `shutdown` completes, logging failures.
    pub async fn run(&self, every: Duration, shutdown: impl Future<Output = ()>) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = ticks.tick() => {
                    if let Err(err) = self.refresh().await {
                        tracing::warn!(error = %err, "queue status refresh failed");
                    }
                }
            }
        }
    }
}
