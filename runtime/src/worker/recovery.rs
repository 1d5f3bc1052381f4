//! The recovery loop: every `claim_every`, take over entries idle longer than `claim_min_idle` with `XAUTOCLAIM`.
//!
//! Idle time is a redelivery threshold, not a lease: an entry claimed here may
//! belong to a crashed worker, a stalled one, or this worker's own abandoned
//! handler. Claimed entries run exactly like newly read ones, each in its own
//! task with its own permit, and only `Done` acks them. `XAUTOCLAIM` scans at
//! most COUNT*10 pending entries per call, so each partition is walked with
//! the returned cursor until it comes back as `0-0`.

use std::sync::Arc;

use redis::streams::StreamAutoClaimReply;

use super::{classify, Counters, Delivery, Failure, Shared};
use crate::envelope::Envelope;
use crate::error::Result;
use crate::handler::Handler;

/// Claims until the stop flag is raised. Returns an error only for a failure
/// that retrying cannot fix (a missing group, a key of the wrong type).
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Shared<E, H>>,
    partitions: Vec<u16>,
) -> Result<()> {
    let every = shared
        .config
        .claim_every
        .max(std::time::Duration::from_millis(1));
    let mut ticker = tokio::time::interval(every);
    // After a slow pass, wait a full period again rather than catch up in a burst.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if shared.stop.unless_raised(ticker.tick()).await.is_none() {
            return Ok(());
        }
        for &partition in &partitions {
            match claim_partition(&shared, partition).await {
                Ok(true) => {}
                Ok(false) | Err(Failure::Cancelled) => return Ok(()),
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Retry { error, .. }) => {
                    // The shared connection reconnects by itself; try again next period.
                    tracing::warn!(partition, error = %error, "XAUTOCLAIM failed; retrying next period");
                    break;
                }
            }
        }
    }
}

/// Walks one partition's pending list; `Ok(false)` if stop was raised meanwhile.
async fn claim_partition<E: Envelope, H: Handler<E>>(
    shared: &Arc<Shared<E, H>>,
    partition: u16,
) -> Result<bool, Failure> {
    let config = &shared.config;
    let key = config.ready_key(partition);
    let min_idle_ms = config.claim_min_idle.as_millis() as u64;
    let mut cursor = String::from("0-0");
    loop {
        // Claim only as many entries as there are permits to run them.
        let Some(mut permits) = shared.reserve(config.claim_batch).await else {
            return Ok(false);
        };
        let mut cmd = redis::cmd("XAUTOCLAIM");
        cmd.arg(&key)
            .arg(config.group)
            .arg(&shared.consumer)
            .arg(min_idle_ms)
            .arg(&cursor)
            .arg("COUNT")
            .arg(permits.len());
        let reply = shared
            .cancel
            .unless_raised(cmd.query_async::<StreamAutoClaimReply>(&mut shared.acks.clone()))
            .await
            .ok_or(Failure::Cancelled)?
            .map_err(|err| classify(err, "XAUTOCLAIM", &[key.as_str()], config.group))?;

        if !reply.deleted_ids.is_empty() {
            // Deleted (trimmed or XDEL'd) while pending: Redis drops them from
            // the pending list, and the jobs they carried are gone.
            tracing::error!(
                key = %key,
                group = config.group,
                deleted_ids = ?reply.deleted_ids,
                "pending entries were deleted from the stream before being acknowledged; their jobs are lost",
            );
        }
        if !reply.claimed.is_empty() {
            tracing::info!(key = %key, claimed = reply.claimed.len(), "claimed idle pending entries");
        }
        for entry in reply.claimed {
            let permit = permits
                .pop()
                .expect("XAUTOCLAIM's COUNT bounds the entries to the permits held");
            let delivery = Delivery {
                partition,
                key: key.clone(),
                entry,
                claimed: true,
            };
            if shared.spawn_job(delivery, permit) {
                Counters::add(&shared.counters.claimed, 1);
            }
        }
        drop(permits);

        if reply.next_stream_id == "0-0" {
            return Ok(true);
        }
        if shared.stop.is_raised() {
            return Ok(false);
        }
        cursor = reply.next_stream_id;
    }
}
