//! What the pages show, computed from the `status` model: a row per queue
//! for the overview (sums over partitions, oldest ages) and a row per
//! partition (or lane of one) for a queue's page.

use std::borrow::Cow;
use std::collections::BTreeSet;

use queuegen_runtime::ops::status::{LibraryStatus, PartitionStatus, QueueStatus};
use queuegen_runtime::Partition;
use serde::Serialize;

/// A Function library on one server.
#[derive(Debug, Serialize)]
pub(super) struct LibraryRow {
    pub name: String,
    /// `standalone` or the Cluster primary asked.
    pub server: String,
    /// `loaded`, `missing` or `unknown`.
    pub state: &'static str,
    pub problem: String,
}

impl LibraryRow {
    pub(super) fn of(library: &LibraryStatus) -> LibraryRow {
        LibraryRow {
            name: library.name.clone(),
            server: library
                .server
                .clone()
                .unwrap_or_else(|| "standalone".to_owned()),
            state: match library.loaded {
                Some(true) => "loaded",
                Some(false) => "missing",
                None => "unknown",
            },
            problem: library.problem.clone().unwrap_or_default(),
        }
    }
}

/// An alert of the spec that would fire now.
#[derive(Debug, Serialize)]
pub(super) struct AlertRow {
    pub queue: String,
    pub partition: Partition,
    pub alert: &'static str,
    pub place: String,
    pub message: String,
}

/// One queue at a glance: its queue group's numbers summed over partitions
/// and lanes, ages the oldest of any.
#[derive(Debug, Serialize)]
pub(super) struct QueueRow {
    pub name: String,
    pub group: String,
    pub partitions: usize,
    pub lanes: Vec<Cow<'static, str>>,
    pub undelivered: u64,
    /// False when Redis could not count some partition's backlog (then
    /// `undelivered` is a lower bound and the page says so).
    pub undelivered_exact: bool,
    pub lag: Option<u64>,
    pub pending: u64,
    pub oldest_ready_ms: Option<u64>,
    pub oldest_pending_ms: Option<u64>,
    pub retries: u64,
    pub delayed: u64,
    pub dead_letters: u64,
    /// Distinct consumers of the queue group over every partition.
    pub consumers: usize,
    pub paused: Vec<Partition>,
    pub alerts: usize,
}

impl QueueRow {
    pub(super) fn of(queue: &QueueStatus) -> QueueRow {
        let mut row = QueueRow {
            name: queue.queue.clone(),
            group: queue.group.clone(),
            partitions: 0,
            lanes: Vec::new(),
            undelivered: 0,
            undelivered_exact: true,
            lag: Some(0),
            pending: 0,
            oldest_ready_ms: None,
            oldest_pending_ms: None,
            retries: 0,
            delayed: 0,
            dead_letters: 0,
            consumers: 0,
            paused: queue.paused_partitions.clone(),
            alerts: queue.alerts.len(),
        };
        let mut partitions = BTreeSet::new();
        let mut consumers = BTreeSet::new();
        for partition in &queue.partitions {
            partitions.insert(partition.partition);
            if let Some(lane) = &partition.lane {
                if !row.lanes.contains(lane) {
                    row.lanes.push(lane.clone());
                }
            }
            if let Some(group) = partition.queue_group() {
                match group.undelivered {
                    Some(n) => row.undelivered += n,
                    None => row.undelivered_exact = false,
                }
                row.lag = row.lag.zip(group.lag).map(|(sum, lag)| sum + lag);
                row.pending += group.pending;
                if let Some(oldest) = group.oldest_undelivered {
                    row.oldest_ready_ms = row.oldest_ready_ms.max(Some(oldest.age_ms));
                }
                if let Some(oldest) = &group.oldest_pending {
                    row.oldest_pending_ms = row.oldest_pending_ms.max(Some(oldest.age_ms));
                }
            }
            row.retries += partition.retries.scheduled;
            row.delayed += partition.delayed.scheduled;
            row.dead_letters += partition.dead_letters.count;
            consumers.extend(partition.consumers.iter().map(|c| c.name.as_str()));
        }
        row.partitions = partitions.len();
        row.consumers = consumers.len();
        row
    }
}

/// One stream of a queue: a partition, or a lane of one.
#[derive(Debug, Serialize)]
pub(super) struct PartitionRow {
    pub partition: Partition,
    pub lane: Option<Cow<'static, str>>,
    /// `3`, or `high/3`.
    pub place: String,
    pub ready_key: String,
    pub history: u64,
    pub undelivered: Option<u64>,
    pub lag: Option<u64>,
    pub lag_unavailable: Option<String>,
    pub oldest_ready_ms: Option<u64>,
    pub pending: u64,
    pub oldest_pending_ms: Option<u64>,
    pub oldest_pending_owner: Option<String>,
    pub retries: u64,
    pub next_retry_in_ms: Option<i64>,
    pub delayed: u64,
    pub dead_letters: u64,
    pub consumers: usize,
    /// `by alice at …: reason`, while paused.
    pub paused: Option<String>,
    /// The alerts this stream fires, as messages.
    pub alerts: Vec<String>,
    /// Other groups reading the stream (they hold back trimming too).
    pub other_groups: Vec<String>,
}

impl PartitionRow {
    pub(super) fn of(queue: &QueueStatus, partition: &PartitionStatus) -> PartitionRow {
        let group = partition.queue_group();
        PartitionRow {
            partition: partition.partition,
            lane: partition.lane.clone(),
            place: match &partition.lane {
                Some(lane) => format!("{lane}/{}", partition.partition),
                None => partition.partition.to_string(),
            },
            ready_key: partition.ready_key.clone(),
            history: partition.history,
            undelivered: group.and_then(|g| g.undelivered),
            lag: group.and_then(|g| g.lag),
            lag_unavailable: group.and_then(|g| g.lag_unavailable.clone()),
            oldest_ready_ms: group.and_then(|g| g.oldest_undelivered).map(|e| e.age_ms),
            pending: group.map_or(0, |g| g.pending),
            oldest_pending_ms: group
                .and_then(|g| g.oldest_pending.as_ref())
                .map(|p| p.age_ms),
            oldest_pending_owner: group
                .and_then(|g| g.oldest_pending.as_ref())
                .map(|p| p.owner.clone()),
            retries: partition.retries.scheduled,
            next_retry_in_ms: partition.retries.next_due_in_ms,
            delayed: partition.delayed.scheduled,
            dead_letters: partition.dead_letters.count,
            consumers: partition.consumers.len(),
            paused: partition.paused.as_ref().map(|note| {
                let why = if note.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", note.reason)
                };
                format!("by {}{why}", note.by)
            }),
            alerts: queue
                .alerts
                .iter()
                .filter(|alert| {
                    alert.partition == partition.partition && alert.lane == partition.lane
                })
                .map(|alert| alert.message.clone())
                .collect(),
            other_groups: partition
                .groups
                .iter()
                .filter(|g| !g.queue_group)
                .map(|g| g.name.clone())
                .collect(),
        }
    }
}

/// Every firing alert of a report, for the overview's list.
pub(super) fn alert_rows(queues: &[QueueStatus]) -> Vec<AlertRow> {
    queues
        .iter()
        .flat_map(|queue| {
            queue.alerts.iter().map(|alert| AlertRow {
                queue: queue.queue.clone(),
                partition: alert.partition,
                alert: alert.alert.as_str(),
                place: match &alert.lane {
                    Some(lane) => format!("{lane}/{}", alert.partition),
                    None => alert.partition.to_string(),
                },
                message: alert.message.clone(),
            })
        })
        .collect()
}
