//! Producer metrics: jobs published, duplicates refused by `dedup`, and publishes refused by admission (backpressure), per queue and partition.
//!
//! A series appears at its first event.

// Labels take `&Cow` and clone it: free for a generated config's borrowed
// names, where `&str` would allocate a `String` per series.
#![allow(clippy::ptr_arg)]

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::borrow::Cow;

use crate::stream_slot::Partition;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    queue: Cow<'static, str>,
    partition: Partition,
}

/// What producers record. Cloning shares the numbers: register it once per
/// registry and hand clones to every producer of the process.
#[derive(Clone, Debug, Default)]
pub struct ProducerMetrics {
    published: Family<PartitionLabels, Counter>,
    duplicates: Family<PartitionLabels, Counter>,
    refusals: Family<PartitionLabels, Counter>,
}

impl ProducerMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds both families to `registry`; once per registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "queuegen_jobs_published",
            "Jobs a producer appended to a ready stream (XADD accepted)",
            self.published.clone(),
        );
        registry.register(
            "queuegen_publish_duplicates",
            "Publishes that wrote nothing because the job_id was published within dedup.window (Published::duplicate)",
            self.duplicates.clone(),
        );
        registry.register(
            "queuegen_backpressure_refusals",
            "Publishes refused with PublishError::Backpressure: the partition's oldest undelivered entry was older than admission.max_oldest_ready_age; nothing was written",
            self.refusals.clone(),
        );
    }

    /// `jobs` were appended to `queue`'s `partition`.
    pub(crate) fn published(&self, queue: &Cow<'static, str>, partition: Partition, jobs: u64) {
        self.published
            .get_or_create(&PartitionLabels {
                queue: queue.clone(),
                partition,
            })
            .inc_by(jobs);
    }

    /// `jobs` publishes to `queue`'s `partition` were duplicates (`dedup`).
    pub(crate) fn duplicates(&self, queue: &Cow<'static, str>, partition: Partition, jobs: u64) {
        self.duplicates
            .get_or_create(&PartitionLabels {
                queue: queue.clone(),
                partition,
            })
            .inc_by(jobs);
    }

    /// One publish (or one `publish_many` call) to `queue`'s `partition` was refused.
    pub(crate) fn refused(&self, queue: &Cow<'static, str>, partition: Partition) {
        self.refusals
            .get_or_create(&PartitionLabels {
                queue: queue.clone(),
                partition,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_and_refusals_by_queue_and_partition() {
        let producer = ProducerMetrics::new();
        let mut registry = Registry::default();
        producer.register(&mut registry);
        producer.published(&"ocr".into(), Partition::new(0), 10);
        producer.published(&"ocr".into(), Partition::new(0), 5);
        producer.refused(&"ocr".into(), Partition::new(2));
        producer.duplicates(&"ocr".into(), Partition::new(0), 2);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"queuegen_jobs_published_total{queue="ocr",partition="0"} 15"#,
            r#"queuegen_backpressure_refusals_total{queue="ocr",partition="2"} 1"#,
            r#"queuegen_publish_duplicates_total{queue="ocr",partition="0"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains(r#"partition="1""#), "{text}");
    }
}
