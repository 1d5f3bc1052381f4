//! The recovery loop: every `claim_every`, quarantine poison entries, then take over entries idle longer than `claim_min_idle` with `XAUTOCLAIM`; now and then, prune idle consumers (`consumers`).
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
//! A pending entry deleted from the stream (an outsider's `XDEL` or `XTRIM`)
//! lost its job: both walks report it, as an error log naming its ID and the
//! `pending_deleted` metric, never skip it in silence.
//!
//! Idle time is a redelivery threshold, not a lease: an entry claimed here may
//! belong to a crashed worker, a stalled one, or this worker's own abandoned
//! handler. Claimed entries run exactly like newly read ones, each in its own
//! task with its own permit, and only `Done` acks them. `XAUTOCLAIM` scans at
//! most COUNT*10 pending entries per call, so each partition is walked with
//! the returned cursor. It runs inside the library's `claim`, which raises
//! the partition's claim epoch whenever it takes something, so that the
//! previous owner's acks check ownership entry by entry from then on.
//!
//! Claims are paced per partition at `claim.rate` a second, in bursts of at
//! most one `claim.batch` (see `claim_pace`), so that a claim storm after an
//! outage starts handlers at a bounded pace; the wait is logged once per walk
//! and counted in `queuegen_claim_throttled_seconds_total`. The quarantine
//! walk is not paced: it starts no handler.
//!
//! Each pass covers only the partitions whose loops lease this worker holds
//! (see `leadership`): one worker at a time recovers a partition, which
//! saves the others' commands; safety does not rest on it.
//!
//! A pass costs what is old, not what is busy: an entry whose ID (its `XADD`
//! time) is younger than `claim_min_idle` cannot have been idle that long,
//! so both walks end at that ID instead of the end of the pending list,
//! which under load keeps growing at its tail as fast as a walk could chase
//! it. When the `XPENDING IDLE` walk finds nothing idle the claim walk is
//! skipped altogether: in a healthy queue a pass is one `XPENDING` per
//! partition. The bound uses this worker's clock; skew against the server's
//! delays a claim by that much, never loses one.

use std::collections::HashMap;
use std::sync::Arc;

use redis::streams::StreamPendingCountReply;

use super::claim_pace::ClaimPace;
use super::consumers::{self, Pruning};
use super::{classify, classify_error, every, job, now_ms, Core, Delivery, Failure, Runner};
use crate::entry::{entries_of, Entry};
use crate::envelope::{self, Envelope, FieldMap, Header};
use crate::error::{Error, Result, TransitionError};
use crate::handler::{Handler, JobContext};
use crate::metrics::{FailedTransition, Settlement};
use crate::stream_slot::StreamSlot;
use crate::transitions::{self, DeadReason};

/// Claims until the stop flag is raised. Returns an error only for a failure
/// that retrying cannot fix (a missing group, a key of the wrong type).
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Runner<E, H>>,
    streams: Vec<StreamSlot>,
) -> Result<()> {
    let mut ticker = every(shared.config.claim.every);
    let mut pruning = Pruning::new(&shared);
    // Kept across passes: a pass starts with what the pause refilled, at most one batch.
    let mut paces: HashMap<StreamSlot, ClaimPace> = streams
        .iter()
        .map(|&stream| {
            let pace = ClaimPace::new(shared.config.claim.rate, shared.config.claim.batch);
            (stream, pace)
        })
        .collect();
    loop {
        if shared.stop.unless_raised(ticker.tick()).await.is_none() {
            return Ok(());
        }
        // Only the partitions this worker leads: another worker recovers the rest.
        let led = shared.leadership.led(&streams);
        if led.is_empty() {
            continue;
        }
        if pruning.due() && !consumers::prune(&shared, &led).await {
            return Ok(());
        }
        let newest = newest_claimable(&shared);
        let first_pages = match first_idle_pages(&shared, &led, newest).await {
            Ok(pages) => pages,
            Err(Failure::Cancelled) => return Ok(()),
            Err(Failure::Fatal(err)) => return Err(err),
            Err(Failure::Retry { error, .. }) => {
                tracing::warn!(error = %error, "recovery failed; retrying next period");
                continue;
            }
        };
        for (&stream, first_page) in led.iter().zip(first_pages) {
            if first_page.ids.is_empty() {
                // Nothing idle: nothing to quarantine or claim either.
                continue;
            }
            let pace = paces
                .get_mut(&stream)
                .expect("a bucket for every partition this worker works");
            let pass = match quarantine_partition(&shared, stream, newest, first_page).await {
                Ok(true) => claim_partition(&shared, stream, newest, pace).await,
                other => other,
            };
            match pass {
                Ok(true) => {}
                Ok(false) | Err(Failure::Cancelled) => return Ok(()),
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Retry { error, .. }) => {
                    // The shared connection reconnects by itself; try again next period.
                    tracing::warn!(partition = stream.index(), error = %error, "recovery failed; retrying next period");
                    break;
                }
            }
        }
    }
}

/// Milliseconds part of the newest stream ID that can be idle for
/// `claim_min_idle`: anything added later was delivered more recently.
fn newest_claimable(shared: &Core) -> u64 {
    let min_idle_ms = u64::try_from(shared.config.claim.min_idle.as_millis()).unwrap_or(u64::MAX);
    now_ms().saturating_sub(min_idle_ms)
}

/// The milliseconds part of a stream ID (`None` for anything else).
fn id_ms(id: &str) -> Option<u64> {
    id.split_once('-').map_or(id, |(ms, _)| ms).parse().ok()
}

/// Reports pending entries found deleted (trimmed or XDEL'd before their
/// ack): Redis drops them from the pending list, and the jobs they carried
/// are gone, so this must never pass in silence.
fn report_deleted(shared: &Core, stream: StreamSlot, key: &str, ids: &[String]) {
    shared.events.pending_deleted(stream, ids.len() as u64);
    tracing::error!(
        key = %key,
        group = &*shared.config.group,
        deleted_ids = ?ids,
        "pending entries were deleted from the stream before being acknowledged; their jobs are lost",
    );
}

/// Walks one partition's pending list up to entries added at `newest` ms, at
/// the pace `pace` allows; `Ok(false)` if stop was raised meanwhile.
async fn claim_partition<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    stream: StreamSlot,
    newest: u64,
    pace: &mut ClaimPace,
) -> Result<bool, Failure> {
    let config = &shared.config;
    let key = config.ready_key(stream);
    let min_idle_ms = config.claim.min_idle.as_millis() as u64;
    let claim_function = config.function(crate::functions::Function::Claim);
    let mut cursor = String::from("0-0");
    let mut throttled = false;
    loop {
        // Claim only as many entries as there are permits to run them...
        let Some(mut permits) = shared.reserve(config.claim.batch).await else {
            return Ok(false);
        };
        // ...and as the claim rate allows now.
        let allowed = pace.available();
        if allowed == 0 {
            // Free the permits for the intake while waiting for the rate.
            drop(permits);
            if !throttled {
                throttled = true;
                tracing::info!(key = %key, rate = config.claim.rate, "claim rate limit reached; pacing claims");
            }
            let wanted = config.claim.batch.min(config.claim.rate as usize);
            let wait = pace.wait_for(wanted);
            let started = tokio::time::Instant::now();
            let waited = shared.stop.unless_raised(tokio::time::sleep(wait)).await;
            shared.events.claim_throttled(stream, started.elapsed());
            if waited.is_none() {
                return Ok(false);
            }
            continue;
        }
        // The permits beyond the rate go back to the intake at once.
        permits.truncate(allowed);
        // The library's `claim`: XAUTOCLAIM, and the claim epoch raised in
        // the same call when it took anything (see `acks`).
        let claims_key = shared.claims_key(stream);
        let claim = crate::functions::Claim {
            ready_key: &key,
            claims_key,
            group: &config.group,
            consumer: &shared.consumer,
            min_idle_ms,
            cursor: &cursor,
            count: permits.len(),
        };
        let cmd = crate::functions::command(&claim_function, &claim);
        let reply = shared
            .cancel
            .unless_raised(
                cmd.query_async::<crate::functions::ClaimReply>(&mut shared.multiplexed.clone()),
            )
            .await
            .ok_or(Failure::Cancelled)?
            .map_err(|err| classify(err, "XAUTOCLAIM", &[key.as_str()], &config.group))?;

        shared.epochs.observe(stream, reply.epoch);
        // Each claimed entry spends its token for good, settled or not.
        pace.spend(reply.claimed.len());
        if !reply.deleted_ids.is_empty() {
            report_deleted(shared, stream, &key, &reply.deleted_ids);
        }
        if !reply.claimed.is_empty() {
            tracing::info!(key = %key, claimed = reply.claimed.len(), epoch = reply.epoch, "claimed idle pending entries");
        }
        for entry in reply.claimed {
            let permit = permits
                .pop()
                .expect("XAUTOCLAIM's COUNT bounds the entries to the permits held");
            let delivery = Delivery {
                stream,
                entry,
                claimed: true,
                claim_epoch: Some(reply.epoch),
            };
            if shared.spawn_job(delivery, permit) {
                shared.events.claimed(stream);
            }
        }
        drop(permits);

        let past_newest = id_ms(&reply.next_cursor).map_or(true, |ms| ms > newest);
        if reply.next_cursor == "0-0" || past_newest {
            return Ok(true);
        }
        if shared.stop.is_raised() {
            return Ok(false);
        }
        cursor = reply.next_cursor;
    }
}

/// `XPENDING key group IDLE min_idle start end COUNT claim_batch`: one page
/// of the partition's pending entries idle for `claim_min_idle`, from `start`
/// to entries added at `newest` ms (an end ID without a sequence number
/// includes every entry of that ms).
fn idle_page(shared: &Core, stream: StreamSlot, start: &str, newest: u64) -> redis::Cmd {
    let config = &shared.config;
    let mut cmd = redis::cmd("XPENDING");
    cmd.arg(shared.ready_key(stream))
        .arg(&*config.group)
        .arg("IDLE")
        .arg(config.claim.min_idle.as_millis() as u64)
        .arg(start)
        .arg(newest)
        .arg(config.claim.batch);
    cmd
}

/// The first idle page of every partition, in one round trip however many there are.
async fn first_idle_pages(
    shared: &Core,
    streams: &[StreamSlot],
    newest: u64,
) -> Result<Vec<StreamPendingCountReply>, Failure> {
    let mut pipe = redis::pipe();
    for &stream in streams {
        pipe.add_command(idle_page(shared, stream, "-", newest));
    }
    // Each answer on its own, so that an error names its key.
    let answers: Vec<redis::RedisResult<StreamPendingCountReply>> = shared
        .cancel
        .unless_raised(
            pipe.ignore_errors()
                .query_async(&mut shared.multiplexed.clone()),
        )
        .await
        .ok_or(Failure::Cancelled)?
        .map_err(|err| classify(err, "XPENDING", &[], &shared.config.group))?;
    streams
        .iter()
        .zip(answers)
        .map(|(&stream, answer)| {
            answer.map_err(|err| {
                let key = shared.ready_key(stream);
                classify(err, "XPENDING", &[key], &shared.config.group)
            })
        })
        .collect()
}

/// Dead-letters the idle entries of one partition, up to entries added at
/// `newest` ms, that reached `poison.max_deliveries`, starting with
/// `first_page`; `Ok(false)` if stop was raised meanwhile.
///
/// Each goes through the handler's `dead_lettering` hook first, as a job
/// its handler dead-letters does: a pipeline stage's poison job settles
/// dead at its joins, or its join would wait for it forever. When the hook
/// fails the entry stays pending with this worker, and the next pass tries
/// again.
async fn quarantine_partition<E: Envelope, H: Handler<E>>(
    shared: &Runner<E, H>,
    stream: StreamSlot,
    newest: u64,
    first_page: StreamPendingCountReply,
) -> Result<bool, Failure> {
    let config = &shared.config;
    let key = config.ready_key(stream);
    let min_idle_ms = config.claim.min_idle.as_millis() as u64;
    let max_deliveries = u64::from(config.poison.max_deliveries);
    let mut reply = first_page;
    loop {
        let page = reply.ids.len();
        for entry in &reply.ids {
            let deliveries = entry.times_delivered as u64;
            if deliveries < max_deliveries || shared.jobs.in_flight.contains(stream, &entry.id) {
                continue;
            }
            let stored = match take_over(shared, stream, &entry.id, min_idle_ms).await? {
                TakeOver::Taken(stored) => stored,
                TakeOver::Elsewhere => continue,
                TakeOver::Deleted => {
                    report_deleted(shared, stream, &key, std::slice::from_ref(&entry.id));
                    continue;
                }
            };
            let header = poison_header(shared, stream, &stored);
            if let Some((header, ctx)) = &header {
                tracing::debug!(
                    job_id = header.job_id.as_str(),
                    "settling a poison job before its quarantine"
                );
                if !job::before_dead_letter(shared, ctx).await {
                    continue;
                }
            }
            let detail = format!(
                "delivered {deliveries} times without an outcome (poison.max_deliveries = {max_deliveries}); last owner {}",
                entry.consumer
            );
            let request = transitions::DeadLetter {
                stream,
                consumer: &shared.consumer,
                source_id: &entry.id,
                job_id: header.as_ref().map(|(header, _)| header.job_id.as_str()),
                reason: DeadReason::Poison,
                detail: &detail,
                deliveries,
            };
            match job::dead_letter_call(shared, &request).await {
                Ok(moved) => {
                    shared.events.quarantined(stream);
                    tracing::error!(
                        key = %key,
                        stream_id = %entry.id,
                        deliveries,
                        dead_id = %moved.id,
                        "poison entry quarantined in the dead-letter stream",
                    );
                }
                // Claimed by another worker since this one took it over: theirs now.
                Err(Error::Transition(TransitionError::NotOwner(refused))) => {
                    shared
                        .events
                        .ownership_lost(stream, Settlement::DeadLetter, 1);
                    tracing::warn!(
                        key = %key,
                        stream_id = %entry.id,
                        owner = refused.owner.as_deref().unwrap_or("(none: no longer pending)"),
                        "quarantining a poison entry refused: it is no longer pending for this worker",
                    );
                }
                // It stays pending with this consumer: the next pass tries again.
                Err(err) => {
                    shared
                        .events
                        .loop_transition_failed(stream, FailedTransition::DeadLetter);
                    match classify_error(err) {
                        Failure::Retry { error, .. } => tracing::error!(
                            key = %key,
                            stream_id = %entry.id,
                            error = %error,
                            "quarantining a poison entry failed; it stays pending",
                        ),
                        other => return Err(other),
                    }
                }
            }
        }
        if page < config.claim.batch {
            return Ok(true);
        }
        if shared.stop.is_raised() {
            return Ok(false);
        }
        let start = format!("({}", reply.ids[page - 1].id);
        reply = shared
            .cancel
            .unless_raised(
                idle_page(shared, stream, &start, newest)
                    .query_async::<StreamPendingCountReply>(&mut shared.multiplexed.clone()),
            )
            .await
            .ok_or(Failure::Cancelled)?
            .map_err(|err| classify(err, "XPENDING", &[key.as_str()], &config.group))?;
    }
}

/// A poison entry's header and the context its `dead_lettering` hook
/// runs in; `None` when its header does not decode (then nothing names its
/// job or run, and it is quarantined as it is).
fn poison_header<E: Envelope, H: Handler<E>>(
    shared: &Runner<E, H>,
    stream: StreamSlot,
    stored: &Entry,
) -> Option<(Header, JobContext)> {
    let fields = FieldMap::from_pairs(E::TYPE, &stored.fields).ok()?;
    let header = envelope::decode_header(&fields).ok()?;
    let ctx = job::dead_job_context(shared, stream, &stored.id, header.clone(), &fields);
    Some((header, ctx))
}

/// What [`take_over`] found.
enum TakeOver {
    /// This worker owns the entry now; the entry as stored.
    Taken(Entry),
    /// Someone else claimed it since `XPENDING`: they keep it.
    Elsewhere,
    /// Its stream entry was deleted; `XCLAIM` dropped it from the pending list.
    Deleted,
}

/// `XCLAIM key group me min_idle id JUSTID`: takes the entry over only if it
/// is still idle (nobody claimed it since `XPENDING`), without counting a
/// delivery. `XCLAIM` drops a deleted entry from the pending list without a
/// word (Redis 7), so an `XRANGE` of the entry runs with it in one
/// `MULTI`/`EXEC` (one partition: one slot on a Cluster) to tell that case
/// apart (and to name the entry's job and run), and so does an `INCR` of
/// the claim epoch: a claim from another
/// consumer must raise it atomically, or that consumer's acks could skip
/// their ownership check (see `acks`).
async fn take_over(
    shared: &Core,
    stream: StreamSlot,
    id: &str,
    min_idle_ms: u64,
) -> Result<TakeOver, Failure> {
    let key = shared.ready_key(stream);
    let claims_key = shared.claims_key(stream);
    let config = &shared.config;
    let (stored, claimed, _epoch): (redis::Value, Vec<String>, u64) = redis::pipe()
        .atomic()
        .cmd("XRANGE")
        .arg(key)
        .arg(id)
        .arg(id)
        .cmd("XCLAIM")
        .arg(key)
        .arg(&*config.group)
        .arg(&*shared.consumer)
        .arg(min_idle_ms)
        .arg(id)
        .arg("JUSTID")
        .cmd("INCR")
        .arg(claims_key)
        .query_async(&mut shared.multiplexed.clone())
        .await
        .map_err(|err| classify(err, "XCLAIM", &[key], &config.group))?;
    let stored = entries_of(stored)
        .map_err(|err| classify(err.into(), "XRANGE", &[key], &config.group))?
        .pop();
    Ok(match stored {
        None => TakeOver::Deleted,
        Some(stored) if claimed.iter().any(|claimed| claimed == id) => TakeOver::Taken(stored),
        Some(_) => TakeOver::Elsewhere,
    })
}

#[cfg(test)]
mod tests {
    use super::id_ms;

    #[test]
    fn the_ms_part_of_a_stream_id() {
        assert_eq!(id_ms("1700000000123-4"), Some(1_700_000_000_123));
        assert_eq!(id_ms("1700000000123"), Some(1_700_000_000_123));
        assert_eq!(id_ms("0-0"), Some(0));
        assert_eq!(id_ms("garbage"), None);
    }
}
