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

use super::runs::RunsReport;
use super::status::{status_of, LibraryStatus, QueueStatus, StatusReport, WatchedQueue};
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

/// A series about one join of a pipeline.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JoinLabels {
    pub pipeline: String,
    pub join: String,
}

/// A series about one Function library version.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LibraryLabels {
    pub library: String,
}

type Seconds = Gauge<f64, AtomicU64>;

/// The queue gauges, registered once in a registry and set from each
/// [`StatusReport`] with `QueueGauges::update`.
#[derive(Clone, Default)]
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
    join_oldest_wait: Series<JoinLabels, Seconds>,
    runs_in_flight: Series<JoinLabels, Gauge>,
    refresh_failures: Counter,
    last_success: Seconds,
}

impl QueueGauges {
    /// Registers every queue gauge (names `queuegen_queue_*`) and the refresh
    /// metrics (`queuegen_monitor_*`) in `registry`.
    pub fn register(registry: &mut Registry) -> QueueGauges {
        let gauges = QueueGauges::default();
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
        registry.register_with_unit(
            "queuegen_pipeline_join_oldest_wait",
            "How long the oldest run in flight at a pipeline's join has waited since its first stage opened it (0 when none): a join waiting too long has a job that never ended (lost to a poison quarantine, or stuck)",
            Unit::Seconds,
            gauges.join_oldest_wait.family.clone(),
        );
        registry.register(
            "queuegen_pipeline_runs_in_flight",
            "Runs of a pipeline open at a join: opened by their first stage, neither published nor failed yet",
            gauges.runs_in_flight.family.clone(),
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
        self.set_queue_gauges(&report.queues, &report.libraries);
        self.last_success.set(seconds(report.server_time_ms));
    }

    /// Counts a failed refresh and withdraws the queue gauges.
    pub(crate) fn refresh_failed(&self) {
        self.refresh_failures.inc();
        self.set_queue_gauges(&[], &[]);
        self.set_join_gauges(&[]);
    }

    /// Makes the queue gauges say `queues` and `libraries`, and nothing else.
    fn set_queue_gauges(&self, queues: &[QueueStatus], libraries: &[LibraryStatus]) {
        let partitions = || {
            queues.iter().flat_map(|queue| {
                queue.partitions.iter().map(|partition| {
                    let labels = PartitionLabels {
                        queue: queue.queue.clone(),
                        partition: partition.partition.to_string(),
                    };
                    (labels, partition)
                })
            })
        };
        let groups = || {
            partitions().flat_map(|(labels, partition)| {
                partition.groups.iter().map(move |group| {
                    let labels = GroupLabels {
                        queue: labels.queue.clone(),
                        partition: labels.partition.clone(),
                        group: group.name.clone(),
                    };
                    (labels, group)
                })
            })
        };
        // A queue with lanes has a status row per lane; the gauges stay per
        // partition (labels bounded, alerts unchanged): counts add up, ages
        // and the pause flag take the largest lane's.
        let sum = |a: i64, b: i64| a.saturating_add(b);
        self.oldest_ready_age.set(
            groups().map(|(l, g)| (l, g.oldest_undelivered.map_or(0.0, |e| seconds(e.age_ms)))),
            f64::max,
        );
        self.oldest_pending_age.set(
            groups().map(|(l, g)| {
                (
                    l,
                    g.oldest_pending.as_ref().map_or(0.0, |p| seconds(p.age_ms)),
                )
            }),
            f64::max,
        );
        self.pending
            .set(groups().map(|(l, g)| (l, to_i64(g.pending))), sum);
        self.lag
            .set(groups().filter_map(|(l, g)| Some((l, to_i64(g.lag?)))), sum);
        self.history
            .set(partitions().map(|(l, p)| (l, to_i64(p.history))), sum);
        self.dead_letters.set(
            partitions().map(|(l, p)| (l, to_i64(p.dead_letters.count))),
            sum,
        );
        self.retries_scheduled.set(
            partitions().map(|(l, p)| (l, to_i64(p.retries.scheduled))),
            sum,
        );
        self.delayed.set(
            partitions().map(|(l, p)| (l, to_i64(p.delayed.scheduled))),
            sum,
        );
        self.paused.set(
            partitions().map(|(l, p)| (l, i64::from(p.paused.is_some()))),
            i64::max,
        );
        // On a Cluster a library is listed per primary: loaded means on every one.
        let libraries = libraries.iter().filter_map(|library| {
            let labels = LibraryLabels {
                library: library.name.clone(),
            };
            Some((labels, i64::from(library.loaded?)))
        });
        self.library_loaded.set(libraries, i64::min);
    }
}

impl QueueGauges {
    /// Sets each join's oldest wait and runs in flight from `reports`.
    fn set_join_gauges(&self, reports: &[RunsReport]) {
        let joins = || {
            reports.iter().flat_map(|report| {
                report.joins.iter().map(|join| {
                    let labels = JoinLabels {
                        pipeline: report.pipeline.clone(),
                        join: join.join.clone(),
                    };
                    (labels, join)
                })
            })
        };
        self.join_oldest_wait.set(
            joins().map(|(l, join)| (l, seconds(join.oldest.as_ref().map_or(0, |run| run.age_ms)))),
            f64::max,
        );
        self.runs_in_flight.set(
            joins().map(|(l, join)| (l, to_i64(join.in_flight))),
            i64::max,
        );
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1_000.0
}

fn to_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// One gauge family and the label sets it currently holds, so that a refresh
/// can remove the series that are gone.
#[derive(Clone)]
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

impl<L, N, A> Series<L, Gauge<N, A>>
where
    L: Clone + Hash + Eq,
    N: Copy,
    A: Atomic<N> + Default,
{
    /// Makes `rows` the family's whole content, folding the rows with the
    /// same labels (the lanes of one partition, a library on each primary)
    /// into one with `fold`.
    fn set(&self, rows: impl IntoIterator<Item = (L, N)>, fold: impl Fn(N, N) -> N) {
        let mut values: HashMap<L, N> = HashMap::new();
        for (labels, value) in rows {
            values
                .entry(labels)
                .and_modify(|folded| *folded = fold(*folded, value))
                .or_insert(value);
        }
        let mut present = self.present.lock().unwrap_or_else(PoisonError::into_inner);
        for gone in present.iter().filter(|labels| !values.contains_key(labels)) {
            self.family.remove(gone);
        }
        *present = values.keys().cloned().collect();
        for (labels, value) in values {
            self.family.get_or_create(&labels).set(value);
        }
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
    /// The pipelines whose joins' waits are gauged.
    pipelines: Arc<[WatchedPipeline]>,
    gauges: QueueGauges,
    ready: Arc<AtomicBool>,
}

impl QueueMonitor {
    /// Registers the gauges in `registry`; nothing is read until [`Self::refresh`].
    pub fn new(redis: Redis, queues: Vec<WatchedQueue>, registry: &mut Registry) -> QueueMonitor {
        QueueMonitor {
            redis,
            queues: queues.into(),
            pipelines: Arc::new([]),
            gauges: QueueGauges::register(registry),
            ready: Arc::default(),
        }
    }

    /// Also gauges the joins of `pipelines`: how long each one's oldest
    /// run in flight has waited, and how many are in flight.
    pub fn with_pipelines(mut self, pipelines: Vec<WatchedPipeline>) -> QueueMonitor {
        self.pipelines = pipelines.into();
        self
    }

    /// Reads the status once and sets the gauges from it; on an error counts
    /// the failure, withdraws the gauges and is not ready until the next
    /// success.
    pub async fn refresh(&self) -> Result<StatusReport> {
        let read = async {
            let status = status_of(&self.redis, &self.queues).await?;
            let mut runs = Vec::with_capacity(self.pipelines.len());
            for pipeline in self.pipelines.iter() {
                // The oldest run of each join is all a gauge needs.
                let report = super::runs::runs(
                    &mut self.redis.shared(),
                    &pipeline.graph,
                    &pipeline.configs,
                    1,
                )
                .await?;
                runs.push(report);
            }
            Ok::<_, crate::Error>((status, runs))
        };
        match read.await {
            Ok((report, runs)) => {
                self.gauges.update(&report);
                self.gauges.set_join_gauges(&runs);
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

/// A pipeline whose joins [`QueueMonitor`] gauges: its graph and the
/// configurations of its join queues (others are ignored).
#[derive(Debug, Clone)]
pub struct WatchedPipeline {
    pub graph: queuegen_core::pipeline::Pipeline,
    pub configs: Vec<crate::config::QueueConfig>,
}
