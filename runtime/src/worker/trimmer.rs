//! The trimmer loop: every `retention.trim_every`, trim the ready and dead-letter streams of each of the worker's partitions.
//!
//! Every worker runs it; the partition's trim lease lets one trimmer at a
//! time work a partition, and a worker finding the lease held skips that
//! partition until its next pass (another worker, `queuegen trim` or
//! `queuegen apply` is on it). The procedure and why it is safe are in
//! `trim`. The first pass runs one period after start, so a starting
//! fleet begins by working jobs. With `retention.trim: cronjob` the loop
//! only waits for shutdown: a CronJob running `queuegen trim` trims.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::events::Events;
use super::{classify_error, Core, Failure};
use crate::error::{Error, OperationError, RedisError, Result};
use crate::metrics::TrimOutcome;
use crate::stream_slot::StreamSlot;
use crate::trim::{self, StreamRole, StreamTrim, TrimOptions};

/// Trims until the stop flag is raised. Returns an error only for a failure
/// that retrying cannot fix (a key of the wrong type).
pub(super) async fn run(core: Arc<Core>, streams: Vec<StreamSlot>) -> Result<()> {
    if !core.config.retention.trim_in_process {
        tracing::debug!("retention.trim is cronjob: this worker does not trim");
        // Returning early would read as the loop ending; idle until shutdown.
        core.stop.raised().await;
        return Ok(());
    }
    let period = core
        .config
        .retention
        .trim_every
        .max(Duration::from_millis(1));
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let holder = format!("worker:{}", core.consumer);
    // Asked of every primary before the first pass, and again after a pass
    // that failed: after a failover the server may be another one.
    let mut probed: Option<bool> = None;
    loop {
        if core.stop.unless_raised(ticker.tick()).await.is_none() {
            return Ok(());
        }
        let mut conn = core.multiplexed.clone();
        let xtrim_acked = match probed {
            Some(supported) => supported,
            None => match trim::xtrim_acked_supported(&core.redis).await {
                Ok(supported) => *probed.insert(supported),
                Err(err) => {
                    tracing::warn!(error = %err, "asking the primaries whether XTRIM takes ACKED failed; trimming next period");
                    continue;
                }
            },
        };
        let options = TrimOptions {
            holder: holder.clone(),
            xtrim_acked,
            lease_wait: Duration::ZERO,
        };
        for &stream in &streams {
            if core.stop.is_raised() {
                return Ok(());
            }
            match trim::trim_partition(&mut conn, &core.config, stream, &options).await {
                Ok(trims) => {
                    for trim in trims {
                        if matches!(trim.result, Err(Error::Redis(RedisError { .. }))) {
                            probed = None;
                        }
                        record(&core.events, stream, trim)?;
                    }
                }
                Err(Error::Operation(OperationError::LeaseHeld { key, holder })) => {
                    for role in StreamRole::BOTH {
                        core.events.trim_pass(stream, role, TrimOutcome::LeaseHeld);
                    }
                    tracing::debug!(partition = stream.index(), lease = %key, %holder, "trim lease held elsewhere; skipping the partition this pass");
                }
                Err(err) => match classify_error(err) {
                    Failure::Fatal(err) => return Err(err),
                    Failure::Cancelled => return Ok(()),
                    Failure::Retry { error, .. } => {
                        probed = None;
                        tracing::warn!(partition = stream.index(), error = %error, "trimming failed; retrying next period");
                    }
                },
            }
        }
    }
}

/// Counts and logs what happened to one stream; an error only when it is fatal.
fn record(events: &Events, stream: StreamSlot, trim: StreamTrim) -> Result<()> {
    let plan = &trim.plan;
    let role = plan.role;
    let outcome = match &trim.result {
        Ok(Some(trimmed)) if trimmed.removed > 0 => TrimOutcome::Trimmed,
        Ok(_) => TrimOutcome::NothingToTrim,
        Err(Error::Operation(OperationError::TrimAborted { .. })) => TrimOutcome::Aborted,
        Err(Error::Operation(OperationError::LeaseHeld { .. })) => TrimOutcome::LeaseHeld,
        Err(_) => TrimOutcome::Failed,
    };
    events.trim_pass(stream, role, outcome);
    match trim.result {
        Ok(Some(trimmed)) => {
            events.trimmed(stream, role, trimmed.removed);
            if trimmed.removed > 0 {
                tracing::info!(
                    partition = stream.index(),
                    key = %trimmed.key,
                    entries = trimmed.removed,
                    minid = %trimmed.minid,
                    decided_by = %plan.decided_by,
                    bytes_freed = trimmed.bytes_freed,
                    "trimmed",
                );
            }
        }
        Ok(None) => {
            tracing::debug!(partition = stream.index(), key = %plan.key, minid = %plan.minid, decided_by = %plan.decided_by, "nothing to trim");
        }
        Err(
            err @ (Error::Operation(OperationError::TrimAborted { .. })
            | Error::Operation(OperationError::LeaseHeld { .. })),
        ) => {
            events.trim_aborted();
            tracing::warn!(partition = stream.index(), key = %plan.key, minid = %plan.minid, error = %err, "trim aborted, nothing removed; trying again next period");
        }
        Err(err @ Error::Operation(OperationError::TrimUnverified { .. })) => {
            tracing::error!(partition = stream.index(), key = %plan.key, error = %err, "trim verification failed");
        }
        Err(err) => match classify_error(err) {
            Failure::Fatal(err) => return Err(err),
            Failure::Cancelled => {}
            Failure::Retry { error, .. } => {
                tracing::warn!(partition = stream.index(), key = %plan.key, error = %error, "trimming failed; retrying next period");
            }
        },
    }
    Ok(())
}
