//! A queue's settings as generated from the spec, and the Redis key names derived from them.

use std::time::Duration;

/// Everything the runtime needs to know about one queue. Generated code bakes
/// one of these in as a `const`, so a running worker's settings are exactly
/// what was reviewed in `queues.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The service that owns the spec; names the Function library and ACL users.
    pub service: &'static str,
    /// First segment of every key: `{key_prefix}:{queue-NN}:ready`.
    pub key_prefix: &'static str,
    pub queue: &'static str,
    /// Number of partitions, each its own stream with its own hash tag.
    pub partitions: u16,
    /// Envelope fields (header or body) whose values pick the partition.
    pub partition_by: &'static [&'static str],
    /// Consumer group name.
    pub group: &'static str,
    /// Where a newly created group starts: `$`, `0-0` or a stream ID.
    pub group_start: &'static str,
    /// A handler running longer than this is abandoned; its job stays pending.
    pub handler_timeout: Duration,
    /// Jobs one worker process runs at once; also the most it reads ahead.
    pub concurrency: usize,
    /// How long shutdown waits for jobs in flight before leaving them pending.
    pub shutdown_budget: Duration,
    /// Pending entries idle longer than this are claimed by another consumer.
    pub claim_min_idle: Duration,
    /// How often the recovery loop looks for idle pending entries.
    pub claim_every: Duration,
    /// Most entries claimed by one `XAUTOCLAIM` call.
    pub claim_batch: usize,
    /// Largest encoded envelope (sum of field names and values) a producer accepts.
    pub payload_max_bytes: usize,
}

impl QueueConfig {
    /// The hash tag of a partition, e.g. `ocr-03`. Every key of the partition
    /// carries it, so a Function can touch them together in a Cluster.
    pub fn partition_tag(&self, partition: u16) -> String {
        let width = partition_digits(self.partitions);
        format!("{}-{:0width$}", self.queue, partition, width = width)
    }

    /// The ready stream of a partition: `{prefix}:{queue-NN}:ready`.
    pub fn ready_key(&self, partition: u16) -> String {
        format!(
            "{}:{{{}}}:ready",
            self.key_prefix,
            self.partition_tag(partition)
        )
    }

    /// Every partition's ready stream, in partition order.
    pub fn ready_keys(&self) -> Vec<String> {
        (0..self.partitions).map(|p| self.ready_key(p)).collect()
    }
}

/// Digits used for partition numbers: at least two, enough for the largest.
fn partition_digits(partitions: u16) -> usize {
    let largest = partitions.saturating_sub(1).max(1);
    (largest.ilog10() as usize + 1).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const OCR: QueueConfig = QueueConfig {
        service: "docs-pipeline",
        key_prefix: "work",
        queue: "ocr",
        partitions: 32,
        partition_by: &["tenant", "subject_ref"],
        group: "ocr-workers-v2",
        group_start: "$",
        handler_timeout: Duration::from_secs(60),
        concurrency: 16,
        shutdown_budget: Duration::from_secs(20),
        claim_min_idle: Duration::from_secs(120),
        claim_every: Duration::from_secs(10),
        claim_batch: 50,
        payload_max_bytes: 2048,
    };

    #[test]
    fn keys_share_one_hash_tag_per_partition() {
        assert_eq!(OCR.ready_key(3), "work:{ocr-03}:ready");
        assert_eq!(OCR.ready_keys().len(), 32);
    }

    #[test]
    fn partition_numbers_are_zero_padded_to_the_largest() {
        let wide = QueueConfig {
            partitions: 1000,
            ..OCR
        };
        assert_eq!(wide.partition_tag(7), "ocr-007");
        let single = QueueConfig {
            partitions: 1,
            ..OCR
        };
        assert_eq!(single.partition_tag(0), "ocr-00");
    }
}
