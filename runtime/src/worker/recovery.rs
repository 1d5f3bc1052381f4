//! The recovery loop: every `claim_every`, quarantine poison entries, then take over entries idle longer than `claim_min_idle` with `XAUTOCLAIM`.
//!
//! Poison quarantine comes first in each pass: an idle entry already
//! delivered `poison.max_deliveries` times (a handler that crashes or hangs
//! on it every time) goes to the dead-letter stream with reason `poison`
//! instead of being claimed once more. This budget counts deliveries (the
//! pending list's count), not application attempts, so a crash loop is
//! caught even though it never reaches the retry policy. Each such entry is
//! first taken over with `XCLAIM ... JUSTID` at the same idle threshold: if
//! another worker claimed it in the meantime (resetting its idle time), that
//! worker keeps it and it is not dead-lettered under its feet.
//!
//! Idle time is a redelivery threshold, not a lease: an entry claimed here may
//! belong to a crashed worker, a stalled one, or this worker's own abandoned
//! handler. Claimed entries run exactly like newly read ones, each in its own
//! task with its own permit, and only `Done` acks them. `XAUTOCLAIM` scans at
//! most COUNT*10 pending entries per call, so each partition is walked with
//! the returned cursor until it comes back as `0-0`.

use std::sync::Arc;

use redis::streams::{StreamAutoClaimReply, StreamPendingCountReply};

use super::{classify, classify_error, every, job, Counters, Delivery, Failure, Shared};
use crate::envelope::Envelope;
use crate::error::Result;
use crate::handler::Handler;
use crate::transitions::{self, DeadReason};

/// Claims until the stop flag is raised. Returns an error only for a failure
/// that retrying cannot fix (a missing group, a key of the wrong type).
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Shared<E, H>>,
    partitions: Vec<u16>,
) -> Result<()> {
    let mut ticker = every(shared.config.claim_every);
    loop {
        if shared.stop.unless_raised(ticker.tick()).await.is_none() {
            return Ok(());
        }
        for &partition in &partitions {
            let pass = match quarantine_partition(&shared, partition).await {
                Ok(true) => claim_partition(&shared, partition).await,
                other => other,
            };
            match pass {
                Ok(true) => {}
                Ok(false) | Err(Failure::Cancelled) => return Ok(()),
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Retry { error, .. }) => {
                    // The shared connection reconnects by itself; try again next period.
                    tracing::warn!(partition, error = %error, "recovery failed; retrying next period");
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
            .arg(&*shared.consumer)
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
                entry: entry.into(),
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

/// Dead-letters the idle entries of one partition that reached
/// `poison.max_deliveries`; `Ok(false)` if stop was raised meanwhile.
async fn quarantine_partition<E: Envelope, H: Handler<E>>(
    shared: &Arc<Shared<E, H>>,
    partition: u16,
) -> Result<bool, Failure> {
    let config = &shared.config;
    let key = config.ready_key(partition);
    let min_idle_ms = config.claim_min_idle.as_millis() as u64;
    let max_deliveries = u64::from(config.poison_max_deliveries);
    let mut start = String::from("-");
    loop {
        // Extended XPENDING, idle entries only: their handlers have timed out.
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(&key)
            .arg(config.group)
            .arg("IDLE")
            .arg(min_idle_ms)
            .arg(&start)
            .arg("+")
            .arg(config.claim_batch);
        let reply = shared
            .cancel
            .unless_raised(cmd.query_async::<StreamPendingCountReply>(&mut shared.acks.clone()))
            .await
            .ok_or(Failure::Cancelled)?
            .map_err(|err| classify(err, "XPENDING", &[key.as_str()], config.group))?;
        let page = reply.ids.len();
        for entry in &reply.ids {
            let deliveries = entry.times_delivered as u64;
            if deliveries < max_deliveries || shared.in_flight.contains(partition, &entry.id) {
                continue;
            }
            if !take_over(shared, &key, &entry.id, min_idle_ms).await? {
                continue;
            }
            let detail = format!(
                "delivered {deliveries} times without an outcome (poison.max_deliveries = {max_deliveries}); last owner {}",
                entry.consumer
            );
            let request = transitions::DeadLetter {
                partition,
                source_id: &entry.id,
                job_id: None,
                reason: DeadReason::Poison,
                detail: &detail,
                deliveries,
            };
            match job::dead_letter_call(shared, &request).await {
                Ok(moved) => {
                    Counters::add(&shared.counters.quarantined, 1);
                    tracing::error!(
                        key = %key,
                        stream_id = %entry.id,
                        deliveries,
                        dead_id = %moved.id,
                        "poison entry quarantined in the dead-letter stream",
                    );
                }
                // It stays pending with this consumer: the next pass tries again.
                Err(err) => match classify_error(err) {
                    Failure::Retry { error, .. } => tracing::error!(
                        key = %key,
                        stream_id = %entry.id,
                        error = %error,
                        "quarantining a poison entry failed; it stays pending",
                    ),
                    other => return Err(other),
                },
            }
        }
        if page < config.claim_batch {
            return Ok(true);
        }
        if shared.stop.is_raised() {
            return Ok(false);
        }
        let last = &reply.ids[page - 1].id;
        start = format!("({last}");
    }
}

/// `XCLAIM key group me min_idle id JUSTID`: takes the entry over only if it
/// is still idle (nobody claimed it since `XPENDING`), without counting a
/// delivery. `false` if someone else has it now, or it was deleted.
async fn take_over<E: Envelope, H: Handler<E>>(
    shared: &Shared<E, H>,
    key: &str,
    id: &str,
    min_idle_ms: u64,
) -> Result<bool, Failure> {
    let config = &shared.config;
    let claimed: Vec<String> = redis::cmd("XCLAIM")
        .arg(key)
        .arg(config.group)
        .arg(&*shared.consumer)
        .arg(min_idle_ms)
        .arg(id)
        .arg("JUSTID")
        .query_async(&mut shared.acks.clone())
        .await
        .map_err(|err| classify(err, "XCLAIM", &[key], config.group))?;
    Ok(claimed.iter().any(|claimed| claimed == id))
}
