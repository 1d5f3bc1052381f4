//! The last hour of each queue's numbers, sampled by the dashboard process
//! itself (no Prometheus needed), and the chart series derived from them.
//!
//! Throughput comes from what Redis counts: a group's `entries-read` grows by
//! one per first delivery, so deliveries per second are its rise; entries
//! acknowledged (completed, retried or dead-lettered: each ends in XACK) are
//! deliveries minus the rise of the pending count; dead-lettered is the rise
//! of the dead-letter streams' length.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use queuegen_runtime::ops::status::{QueueStatus, StatusReport};
use serde::Serialize;

/// One queue's numbers at one moment (sums over its partitions and lanes;
/// ages are the oldest of any partition).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSample {
    pub undelivered: u64,
    pub pending: u64,
    pub retries: u64,
    pub delayed: u64,
    pub dead_letters: u64,
    pub oldest_ready_ms: u64,
    pub oldest_pending_ms: u64,
    /// The queue group's `entries-read`, summed (first deliveries so far).
    pub entries_read: u64,
}

impl QueueSample {
    pub fn of(queue: &QueueStatus) -> QueueSample {
        let mut sample = QueueSample::default();
        for partition in &queue.partitions {
            if let Some(group) = partition.queue_group() {
                sample.undelivered += group.undelivered.unwrap_or(0);
                sample.pending += group.pending;
                sample.entries_read += group.entries_read.unwrap_or(0);
                if let Some(oldest) = group.oldest_undelivered {
                    sample.oldest_ready_ms = sample.oldest_ready_ms.max(oldest.age_ms);
                }
                if let Some(oldest) = &group.oldest_pending {
                    sample.oldest_pending_ms = sample.oldest_pending_ms.max(oldest.age_ms);
                }
            }
            sample.retries += partition.retries.scheduled;
            sample.delayed += partition.delayed.scheduled;
            sample.dead_letters += partition.dead_letters.count;
        }
        sample
    }

    fn add(&mut self, other: &QueueSample) {
        self.undelivered += other.undelivered;
        self.pending += other.pending;
        self.retries += other.retries;
        self.delayed += other.delayed;
        self.dead_letters += other.dead_letters;
        self.entries_read += other.entries_read;
        self.oldest_ready_ms = self.oldest_ready_ms.max(other.oldest_ready_ms);
        self.oldest_pending_ms = self.oldest_pending_ms.max(other.oldest_pending_ms);
    }
}

/// Every queue's numbers at one server time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// The server's clock (Unix ms), as ages are measured against it.
    pub at_ms: u64,
    /// By queue, in spec order.
    pub queues: Vec<(String, QueueSample)>,
}

/// A bounded ring of samples.
pub(super) struct History {
    samples: Mutex<VecDeque<Sample>>,
    keep: usize,
}

impl History {
    pub(super) fn new(keep: usize) -> History {
        History {
            samples: Mutex::new(VecDeque::with_capacity(keep)),
            keep,
        }
    }

    pub(super) fn record(&self, report: &StatusReport) {
        let sample = Sample {
            at_ms: report.server_time_ms,
            queues: report
                .queues
                .iter()
                .map(|queue| (queue.queue.clone(), QueueSample::of(queue)))
                .collect(),
        };
        let mut samples = self.lock();
        if samples.len() == self.keep {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The chart series of one queue, or of all queues summed (`None`).
    pub(super) fn series(&self, queue: Option<&str>) -> Series {
        let points: Vec<(u64, QueueSample)> = self
            .lock()
            .iter()
            .map(|sample| {
                let mut total = QueueSample::default();
                for (name, numbers) in &sample.queues {
                    if queue.map_or(true, |wanted| wanted == name) {
                        total.add(numbers);
                    }
                }
                (sample.at_ms, total)
            })
            .collect();
        Series::from_points(&points)
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Sample>> {
        self.samples
            .lock()
            .expect("the history lock is never poisoned")
    }
}

/// Columns for the charts: one value per sample, `t` in Unix seconds. Rates
/// are per second over the interval ending at that sample (the first sample
/// has none: `null`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Series {
    pub t: Vec<f64>,
    pub delivered: Vec<Option<f64>>,
    pub acknowledged: Vec<Option<f64>>,
    pub dead_lettered: Vec<Option<f64>>,
    pub undelivered: Vec<u64>,
    pub pending: Vec<u64>,
    pub retries: Vec<u64>,
    pub dead_letters: Vec<u64>,
    pub oldest_ready_s: Vec<f64>,
    pub oldest_pending_s: Vec<f64>,
}

impl Series {
    fn from_points(points: &[(u64, QueueSample)]) -> Series {
        let mut series = Series::default();
        let mut previous: Option<&(u64, QueueSample)> = None;
        let seconds = |ms: u64| ms as f64 / 1_000.0;
        for point in points {
            let (at_ms, now) = point;
            series.t.push(seconds(*at_ms));
            let rates = previous.and_then(|(then_ms, then)| {
                let seconds = seconds(at_ms.checked_sub(*then_ms).filter(|ms| *ms > 0)?);
                let rise = |now: u64, then: u64| now.saturating_sub(then) as f64;
                let delivered = rise(now.entries_read, then.entries_read);
                // Pending falls by what was acknowledged and rises by what was delivered.
                let acknowledged = (delivered + then.pending as f64 - now.pending as f64).max(0.0);
                Some((
                    delivered / seconds,
                    acknowledged / seconds,
                    rise(now.dead_letters, then.dead_letters) / seconds,
                ))
            });
            series.delivered.push(rates.map(|r| r.0));
            series.acknowledged.push(rates.map(|r| r.1));
            series.dead_lettered.push(rates.map(|r| r.2));
            series.undelivered.push(now.undelivered);
            series.pending.push(now.pending);
            series.retries.push(now.retries);
            series.dead_letters.push(now.dead_letters);
            series.oldest_ready_s.push(seconds(now.oldest_ready_ms));
            series.oldest_pending_s.push(seconds(now.oldest_pending_ms));
            previous = Some(point);
        }
        series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, entries_read: u64, pending: u64, dead_letters: u64) -> (u64, QueueSample) {
        (
            ms,
            QueueSample {
                entries_read,
                pending,
                dead_letters,
                ..QueueSample::default()
            },
        )
    }

    #[test]
    fn rates_are_the_rise_per_second_between_samples() {
        // 10 s apart: 100 delivered, pending 0 → 20 (so 80 acknowledged), 5 dead letters.
        let series = Series::from_points(&[at(1_000, 50, 0, 2), at(11_000, 150, 20, 7)]);
        assert_eq!(series.t, vec![1.0, 11.0]);
        assert_eq!(series.delivered, vec![None, Some(10.0)]);
        assert_eq!(series.acknowledged, vec![None, Some(8.0)]);
        assert_eq!(series.dead_lettered, vec![None, Some(0.5)]);
        assert_eq!(series.pending, vec![0, 20]);
    }

    #[test]
    fn a_counter_that_falls_gives_no_negative_rate() {
        // A replay leaves the dead letter; a trim of the dead-letter stream shrinks it.
        let series = Series::from_points(&[at(0, 10, 5, 9), at(1_000, 10, 0, 3)]);
        assert_eq!(series.delivered, vec![None, Some(0.0)]);
        assert_eq!(series.acknowledged, vec![None, Some(5.0)]);
        assert_eq!(series.dead_lettered, vec![None, Some(0.0)]);
    }
}
