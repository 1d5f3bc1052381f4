//! A queue's runtime settings built from the validated spec: the one place
//! the spec maps to `QueueConfig`. Commands that talk to Redis use the value;
//! the generator renders the same value as each queue module's `CONFIG`
//! ([`super::rust_value`]).

use std::borrow::Cow;

use queuegen_runtime::config as sections;
use queuegen_runtime::{self as runtime, QueueConfig};

use crate::spec::model::{Jitter, OnAck, Queue, Spec, TrimMode};

/// The runtime's view of one queue, owning its names: a value built from a
/// spec read at run time, where generated code borrows literals instead.
pub fn queue_config(spec: &Spec, queue: &Queue) -> QueueConfig {
    let owned = |s: &str| Cow::Owned(s.to_owned());
    QueueConfig {
        service: owned(&spec.service),
        key_prefix: owned(&spec.redis.key_prefix),
        queue: owned(&queue.name),
        partitions: queue.partitions,
        partition_by: queue.partition_by.iter().map(|f| owned(f)).collect(),
        group: owned(&queue.group.name),
        group_start: owned(queue.group.start.as_redis_arg()),
        prune_consumers_after: queue.group.prune_consumers_after,
        functions: Cow::Owned(super::functions::library_name(&spec.service)),
        handler: sections::HandlerConfig {
            timeout: queue.handler.timeout,
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
        },
        claim: sections::ClaimConfig {
            min_idle: queue.claim.min_idle,
            every: queue.claim.every,
            batch: queue.claim.batch as usize,
            rate: queue.claim.rate,
        },
        payload: sections::PayloadConfig {
            max_bytes: queue.payload.max_bytes as usize,
            shape: queue.payload.shape,
        },
        retry: sections::RetryConfig {
            max_attempts: queue.retry.max_attempts,
            backoff: sections::Backoff {
                initial: queue.retry.backoff.initial,
                max: queue.retry.backoff.max,
                factor: queue.retry.backoff.factor,
                jitter: match queue.retry.backoff.jitter {
                    Jitter::None => runtime::Jitter::None,
                    Jitter::Full => runtime::Jitter::Full,
                },
            },
            promote_every: queue.retry.promote_every,
            promote_batch: queue.retry.promote_batch as usize,
        },
        poison: sections::PoisonConfig {
            max_deliveries: queue.poison.max_deliveries,
        },
        dead_letter: sections::DeadLetterConfig {
            max_len: queue.dead_letter.max_len,
            retention: queue.dead_letter.retention,
        },
        retention: sections::RetentionConfig {
            min_age: queue.retention.min_age,
            marker_ttl: queue.retention.min_age,
            trim_every: queue.retention.trim_every,
            trim_in_process: queue.retention.trim == TrimMode::InProcess,
            delete_on_ack: queue.retention.on_ack == OnAck::Delete,
        },
        admission: sections::AdmissionConfig {
            max_oldest_ready_age: queue.admission.max_oldest_ready_age,
            refresh: queue.admission.refresh,
        },
        redis: sections::DurabilityConfig {
            wait_replicas: spec.redis.wait_replicas,
            wait_timeout: spec.redis.wait_timeout,
        },
        dedup: queue.dedup.as_ref().map(|dedup| sections::DedupConfig {
            window: dedup.window,
        }),
        lanes: queue
            .lanes
            .iter()
            .map(|lane| runtime::Lane {
                name: owned(&lane.name),
                weight: lane.weight,
            })
            .collect(),
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
