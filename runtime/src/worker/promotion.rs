//! The promotion loop: every `retry.promote_every`, move due retries and due delayed jobs of each partition to its ready stream.
//!
//! Each tick reads `ZRANGEBYSCORE <set> -inf now LIMIT 0 batch` of the
//! retry set and the delayed set of every partition in one pipeline; a set
//! with something due then gets one `retry_promote` (or `delayed_promote`)
//! call with those members, again while full batches come back. Each tick covers only the partitions whose loops lease this worker
//! holds (see `leadership`), to save the other workers' commands; safety
//! does not rest on it. Were two workers to promote one partition at once,
//! that is safe because the function
//! re-checks each member atomically (a member another worker promoted
//! first is skipped, or only cleaned up after a crash), so a retry is
//! appended to the ready stream once. Due times are Unix ms of the workers'
//! clocks: skew between hosts shifts a retry by that much, never loses it.

use std::sync::Arc;

use super::{classify_error, every, now_ms, Core, Failure};
use crate::error::{Error, Result, TransitionError};
use crate::failpoint::failpoint;
use crate::metrics::FailedTransition;
use crate::stream_slot::StreamSlot;
use crate::transitions::{self, DeadReason, DueSet};

/// Promotes until the stop flag is raised. Returns an error only for a
/// failure that retrying cannot fix (a key of the wrong type).
pub(super) async fn run(core: Arc<Core>, streams: Vec<StreamSlot>) -> Result<()> {
    let mut ticker = every(core.config.retry.promote_every);
    loop {
        if core.stop.unless_raised(ticker.tick()).await.is_none() {
            return Ok(());
        }
        // Only the partitions this worker leads: another worker promotes the rest.
        let led = core.leadership.led(&streams);
        if led.is_empty() {
            continue;
        }
        // One round trip finds what is due in both sets of every led
        // partition; in a quiet queue that is the whole tick.
        let now = now_ms();
        let batch = core.config.retry.promote_batch;
        let sets: Vec<(DueSet, StreamSlot)> = led
            .iter()
            .flat_map(|&stream| [(DueSet::Retries, stream), (DueSet::Delayed, stream)])
            .collect();
        let mut conn = core.multiplexed.clone();
        let first_due = match transitions::due_members_of(
            &mut conn,
            &core.config,
            &sets,
            now,
            batch,
        )
        .await
        .map_err(classify_error)
        {
            Ok(due) => due,
            Err(Failure::Fatal(err)) => return Err(err),
            Err(Failure::Cancelled) => return Ok(()),
            Err(Failure::Retry { error, .. }) => {
                tracing::warn!(error = %error, "reading due retries and delayed jobs failed; retrying next period");
                continue;
            }
        };
        for (&(set, stream), due) in sets.iter().zip(first_due) {
            if due.is_empty() {
                continue;
            }
            match promote_partition(&core, set, stream, now, due).await {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Cancelled) => return Ok(()),
                // The due members wait for the next period; nothing is lost.
                Err(Failure::Retry { error, .. }) => match error {
                    // The library refused the batch (a damaged entry of the
                    // set): it will again until someone looks.
                    Error::Transition(TransitionError::Refused { .. }) => {
                        tracing::error!(partition = stream.index(), ?set, error = %error, "the library refused to promote due members; retrying next period");
                    }
                    // The core connection reconnects by itself.
                    _ => {
                        tracing::warn!(partition = stream.index(), ?set, error = %error, "promoting failed; retrying next period");
                    }
                },
            }
        }
    }
}

/// Reports members of `set` that the promote function dead-lettered because
/// they could never be promoted (an envelope missing, not decodable, or over
/// the library's field limit): counted as `decode_error` dead letters, and
/// logged as a warning, since a producer or a hand edit wrote them.
fn unpromotable(core: &Core, set: DueSet, stream: StreamSlot, count: u64) {
    core.events.unpromotable(stream, count);
    tracing::warn!(
        partition = core.config.partition_of_stream(stream).index(),
        lane = core.config.lane_of_stream(stream).map(|lane| &*lane.name),
        ?set,
        dead_lettered = count,
        reason = %DeadReason::DecodeError,
        "due members that could never be promoted were dead-lettered (see the dead letters' detail)",
    );
}

/// Promotes every due member of `set` in one partition, a batch per call,
/// starting with `due` (read at `now`); `Ok(false)` if stop was raised
/// meanwhile.
async fn promote_partition(
    core: &Core,
    set: DueSet,
    stream: StreamSlot,
    mut now: u64,
    mut due: Vec<String>,
) -> Result<bool, Failure> {
    let config = &core.config;
    let batch = config.retry.promote_batch;
    let mut conn = core.multiplexed.clone();
    loop {
        let promoted = transitions::promote(&mut conn, config, set, stream, now, &due)
            .await
            .map_err(|err| {
                core.events
                    .loop_transition_failed(stream, FailedTransition::Promote);
                classify_error(err)
            })?;
        match set {
            DueSet::Retries => {
                failpoint("after_retry_promote");
            }
            DueSet::Delayed => {
                failpoint("after_delayed_promote");
            }
        }
        core.events.promoted(stream, set, promoted.promoted);
        if promoted.dead_lettered > 0 {
            unpromotable(core, set, stream, promoted.dead_lettered);
        }
        tracing::debug!(
            partition = config.partition_of_stream(stream).index(),
            lane = config.lane_of_stream(stream).map(|lane| &*lane.name),
            ?set,
            due = due.len(),
            promoted = promoted.promoted,
            already = promoted.already,
            skipped = promoted.skipped,
            dead_lettered = promoted.dead_lettered,
            "promoted due members",
        );
        // A short batch was everything due. A full one where nothing moved
        // (every member skipped) would only read the same members again.
        let moved = promoted.promoted + promoted.already + promoted.dead_lettered;
        if due.len() < batch || moved == 0 {
            return Ok(true);
        }
        if core.stop.is_raised() {
            return Ok(false);
        }
        now = now_ms();
        due = transitions::due_members_of(&mut conn, config, &[(set, stream)], now, batch)
            .await
            .map_err(classify_error)?
            .pop()
            .unwrap_or_default();
        if due.is_empty() {
            return Ok(true);
        }
    }
}
