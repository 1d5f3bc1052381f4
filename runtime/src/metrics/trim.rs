//! Trim metrics: entries removed and passes by outcome, per queue, partition and stream kind (`ready` or `dead`).
//!
//! Recorded by the trimmer that runs inside workers. A worker that trims
//! creates its partitions' pass series at 0 when it starts
//! ([`TrimMetrics::partition`]): the trim alert reads them from the first
//! scrape, and its `increase()` counts the first pass (a series born at 1
//! hides it). Removed entries appear at the first trim.

// Labels take `&Cow` and clone it: free for a generated config's borrowed
// names, where `&str` would allocate a `String` per series.
#![allow(clippy::ptr_arg)]

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::borrow::Cow;

use crate::stream_slot::Partition;

use super::labels::{StreamRole, TrimOutcome};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    stream: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PassLabels {
    queue: Cow<'static, str>,
    partition: Partition,
    stream: &'static str,
    outcome: &'static str,
}

/// Entries trimmed and trim passes by outcome. Part of [`super::WorkerMetrics`]
/// (its `trim()`); usable on its own too. Cloning shares the numbers.
#[derive(Clone, Debug, Default)]
pub struct TrimMetrics {
    removed: Family<StreamLabels, Counter>,
    passes: Family<PassLabels, Counter>,
}

impl TrimMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds both families to `registry`; once per registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "queuegen_trim_removed_entries",
            "Stream entries removed by trimming (XTRIM MINID), by stream kind: ready (after retention.min_age and every group's boundaries) or dead (after dead_letter.retention)",
            self.removed.clone(),
        );
        registry.register(
            "queuegen_trim_passes",
            "Trim passes over one stream, by outcome: trimmed, nothing_to_trim, aborted (the groups changed between the two inventories; nothing removed), lease_held (another trimmer or apply had the partition), failed",
            self.passes.clone(),
        );
    }

    /// `entries` removed from `stream` of `queue`'s `partition` by one `XTRIM`.
    pub(crate) fn removed(
        &self,
        queue: &Cow<'static, str>,
        partition: Partition,
        stream: StreamRole,
        entries: u64,
    ) {
        self.removed
            .get_or_create(&StreamLabels {
                queue: queue.clone(),
                partition,
                stream: stream.as_str(),
            })
            .inc_by(entries);
    }

    /// Creates at 0 the pass series of `queue`'s `partition`: both
    /// streams, every outcome. For a worker that trims the partition.
    pub(crate) fn partition(&self, queue: &Cow<'static, str>, partition: Partition) {
        for stream in StreamRole::BOTH {
            for outcome in TrimOutcome::ALL {
                let _created = self.passes.get_or_create(&PassLabels {
                    queue: queue.clone(),
                    partition,
                    stream: stream.as_str(),
                    outcome: outcome.as_str(),
                });
            }
        }
    }

    /// One pass over `stream` of `queue`'s `partition` ended with `outcome`.
    pub(crate) fn pass(
        &self,
        queue: &Cow<'static, str>,
        partition: Partition,
        stream: StreamRole,
        outcome: TrimOutcome,
    ) {
        self.passes
            .get_or_create(&PassLabels {
                queue: queue.clone(),
                partition,
                stream: stream.as_str(),
                outcome: outcome.as_str(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_entries_and_passes_by_stream_and_outcome() {
        let trim = TrimMetrics::new();
        let mut registry = Registry::default();
        trim.register(&mut registry);
        trim.removed(&"ocr".into(), Partition::new(1), StreamRole::Ready, 40);
        trim.removed(&"ocr".into(), Partition::new(1), StreamRole::Ready, 2);
        trim.removed(&"ocr".into(), Partition::new(1), StreamRole::Dead, 5);
        trim.pass(
            &"ocr".into(),
            Partition::new(1),
            StreamRole::Ready,
            TrimOutcome::Trimmed,
        );
        trim.pass(
            &"ocr".into(),
            Partition::new(1),
            StreamRole::Ready,
            TrimOutcome::Aborted,
        );
        trim.pass(
            &"ocr".into(),
            Partition::new(1),
            StreamRole::Ready,
            TrimOutcome::Aborted,
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"queuegen_trim_removed_entries_total{queue="ocr",partition="1",stream="ready"} 42"#,
            r#"queuegen_trim_removed_entries_total{queue="ocr",partition="1",stream="dead"} 5"#,
            r#"queuegen_trim_passes_total{queue="ocr",partition="1",stream="ready",outcome="trimmed"} 1"#,
            r#"queuegen_trim_passes_total{queue="ocr",partition="1",stream="ready",outcome="aborted"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
