//! A queue's runtime settings built from the validated spec: the one place
//! the spec maps to `QueueConfig`. Commands that talk to Redis use the value;
//! the generator renders the same value as each queue module's `CONFIG`
//! ([`super::rust_value`]).

use queuegen_runtime::{self as runtime, QueueConfig};

use crate::spec::model::{Jitter, OnAck, Queue, Spec, TrimMode};

/// The runtime's view of one queue. `QueueConfig` holds `'static` names (the
/// generated consts are literals), so the strings are leaked: call this in a
/// short-lived process, once per queue (the CLI and the generator do).
pub fn queue_config(spec: &Spec, queue: &Queue) -> QueueConfig {
    fn leak(s: &str) -> &'static str {
        Box::leak(s.to_owned().into_boxed_str())
    }
    let partition_by: Vec<&'static str> = queue.partition_by.iter().map(|f| leak(f)).collect();
    let lanes: Vec<runtime::Lane> = queue
        .lanes
        .iter()
        .map(|lane| runtime::Lane {
            name: leak(&lane.name),
            weight: lane.weight,
        })
        .collect();
    QueueConfig {
        service: leak(&spec.service),
        key_prefix: leak(&spec.redis.key_prefix),
        queue: leak(&queue.name),
        partitions: queue.partitions,
        partition_by: Box::leak(partition_by.into_boxed_slice()),
        group: leak(&queue.group.name),
        group_start: leak(queue.group.start.as_redis_arg()),
        handler_timeout: queue.handler.timeout,
        concurrency: queue.handler.concurrency as usize,
        shutdown_budget: queue.handler.shutdown_budget,
        rate: queue.handler.rate.map(|rate| runtime::RateLimit {
            limit: rate.limit,
            per: rate.per,
        }),
        tenant_rate: queue
            .handler
            .tenant_rate
            .map(|rate| runtime::TenantRateLimit {
                limit: rate.limit,
                per: rate.per,
                classes: rate.classes,
            }),
        claim_min_idle: queue.claim.min_idle,
        claim_every: queue.claim.every,
        claim_batch: queue.claim.batch as usize,
        claim_rate: queue.claim.rate,
        payload_max_bytes: queue.payload.max_bytes as usize,
        functions: leak(&super::functions::library_name(&spec.service)),
        retry_max_attempts: queue.retry.max_attempts,
        retry_initial: queue.retry.backoff.initial,
        retry_max: queue.retry.backoff.max,
        retry_factor: queue.retry.backoff.factor,
        retry_jitter: match queue.retry.backoff.jitter {
            Jitter::None => runtime::Jitter::None,
            Jitter::Full => runtime::Jitter::Full,
        },
        retry_promote_every: queue.retry.promote_every,
        retry_promote_batch: queue.retry.promote_batch as usize,
        poison_max_deliveries: queue.poison.max_deliveries,
        dead_letter_max_len: queue.dead_letter.max_len,
        marker_ttl: queue.retention.min_age,
        retention_min_age: queue.retention.min_age,
        trim_every: queue.retention.trim_every,
        trim_in_process: queue.retention.trim == TrimMode::InProcess,
        delete_on_ack: queue.retention.on_ack == OnAck::Delete,
        dead_letter_retention: queue.dead_letter.retention,
        admission_max_oldest_ready_age: queue.admission.max_oldest_ready_age,
        admission_refresh: queue.admission.refresh,
        wait_replicas: spec.redis.wait_replicas,
        wait_timeout: spec.redis.wait_timeout,
        dedup_window: queue.dedup.as_ref().map(|dedup| dedup.window),
        lanes: Box::leak(lanes.into_boxed_slice()),
        default_lane: queue
            .lanes
            .iter()
            .position(|lane| lane.default)
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::limits::HEADER_FIELDS;

    #[test]
    fn header_fields_are_the_runtimes() {
        // The spec's payload bound must count exactly the header the runtime writes.
        let names: Vec<&str> = HEADER_FIELDS.iter().map(|h| h.name).collect();
        assert_eq!(names, queuegen_runtime::envelope::header_fields::ALL);
    }
}
