//! One job task: decode the entry, run the handler under its timeout, then settle the outcome.
//!
//! Settling means exactly one of: the `ack` function after `Done`; the
//! `retry_schedule` function (which acks) for a retry; the `dead_letter`
//! function (which acks) for a dead letter, a permanent error, an exhausted
//! retry budget or an entry that does not decode; or nothing at all, leaving
//! the entry pending with this consumer as owner, after a panic or an
//! ambiguous outcome (whose `reconcile` hook runs). The job leaves the
//! pending list only through a transition that completed: a failed call
//! leaves it pending for recovery, and a repeated call finds the function's
//! marker instead of moving it twice. Each of them settles only an entry
//! still pending for this worker's consumer: one another worker claimed
//! while this one stalled is refused (`QG_NOT_OWNER`), logged and counted,
//! and left to its new owner.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::acks::{AckRequest, InHandler};
use super::in_flight::Slot;
use super::{due_ms, is_connection_error, Core, Delivery, Runner};
use crate::envelope::{self, Envelope, FieldMap};
use crate::error::{DecodeError, Error, NotOwner, RedisError, Result, TransitionError};
use crate::failpoint::failpoint;
use crate::handler::{Handler, JobContext};
use crate::metrics::{FailedTransition, JobOutcome, Settlement};
use crate::outcome::{ErrorKind, Outcome};
use crate::retry;
use crate::stream_slot::StreamSlot;
use crate::transitions::{self, DeadReason, Moved, TransitionCode};

/// Longest `detail` recorded in a dead letter: a diagnostic, not a log.
const DETAIL_MAX_BYTES: usize = 256;
/// Longest `reason` header written to a rescheduled attempt: it travels with
/// the envelope, whose size the producer bounded without it.
const REASON_MAX_BYTES: usize = 128;

/// What a job holds until it is settled: its permit and its in-flight entry.
/// A `Done` job hands both to the acker; any other ends with the job task.
pub(super) struct Held {
    pub permit: OwnedSemaphorePermit,
    pub slot: Slot,
    /// Counts the job as in its handler until [`Held::handler_ended`], or
    /// for a `Done` job until its ack is queued.
    pub in_handler: Option<InHandler>,
}

impl Held {
    /// The handler ended (or never ran): the acker stops waiting for this job.
    fn handler_ended(&mut self) {
        self.in_handler = None;
    }
}

/// Runs one delivery to its end, in a `job` span: a child of its stream's
/// `partition` span (partition and lane), itself a child of the worker's
/// (queue, group, consumer).
///
/// The span names the job by its `job_id` and `trace_id`, and records
/// `attempt` only from the second on and `claimed` only when `XAUTOCLAIM`
/// took the entry over: the fmt layer formats every field of a span when
/// the span is created, about 1,400 instructions each whatever the value,
/// and most jobs are a first attempt, read new. The stream ID is on the
/// events that concern the entry (it staying pending, a refused settlement).
/// An entry that does not decode has no job ID: its span names the stream ID.
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Runner<E, H>>,
    delivery: Delivery,
    mut held: Held,
) {
    let claimed = delivery.claimed.then_some(true);
    // Decoded before the span exists, so that the span is created with all
    // its fields at once: recording them one by one costs a subscriber more.
    // A packed entry that does not unpack has no fields to name the job by.
    let (fields, decoded) = match FieldMap::from_pairs(E::TYPE, &delivery.entry.fields) {
        Ok(fields) => {
            let decoded = envelope::decode::<E>(&fields);
            (fields, decoded)
        }
        Err(err) => (FieldMap::default(), Err(err)),
    };
    let decoded = decoded.and_then(|(header, body)| {
        let run = if H::READS_RUN {
            envelope::decode_run_link(&fields)?
        } else {
            None
        };
        Ok((header, run, body))
    });
    let (header, run, body) = match decoded {
        Ok(decoded) => decoded,
        Err(err) => {
            held.handler_ended();
            let span = tracing::info_span!(
                parent: shared.stream_span(delivery.stream),
                "job",
                stream_id = %delivery.entry.id,
                claimed,
            );
            // Cold path, boxed: its state would otherwise enlarge every job's task.
            Box::pin(decode_failed(&shared, &delivery, &fields, err))
                .instrument(span)
                .await;
            // The permit and the in-flight slot go back only now, once the
            // entry is dead-lettered (or left pending).
            drop(held);
            return;
        }
    };
    drop(fields);
    let span = tracing::info_span!(
        parent: shared.stream_span(delivery.stream),
        "job",
        job_id = header.job_id.as_str(),
        trace_id = header.trace_id.as_str(),
        attempt = (header.attempt > 1).then_some(header.attempt),
        claimed,
    );
    let ctx = JobContext {
        header,
        run,
        // The context owns the ID from here on: no copy per job.
        stream_id: delivery.entry.id,
        stream: delivery.stream,
        claim_epoch: delivery.claim_epoch,
        owner: shared.jobs.ownership.clone(),
    };
    work(&shared, ctx, body, held).instrument(span).await;
}

/// How a handler's run ended: timed out, panicked, or returned.
type Finished = std::result::Result<
    std::result::Result<
        std::result::Result<Outcome, crate::outcome::JobError>,
        Box<dyn Any + Send>,
    >,
    tokio::time::error::Elapsed,
>;

/// What to do with a job once its handler has ended.
enum Settle {
    Ack,
    Retry {
        after: Option<Duration>,
        /// The next attempt's `reason` header.
        reason: String,
        /// What failed, for the dead letter should this be the last attempt.
        detail: String,
    },
    DeadLetter {
        reason: DeadReason,
        detail: String,
    },
    Reconcile {
        reason: String,
    },
    /// A panic: leave it pending, for redelivery and, in a loop, poison quarantine.
    StayPending,
}

/// Runs the handler on a decoded job, then settles its outcome.
async fn work<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    ctx: JobContext,
    body: E,
    mut held: Held,
) {
    tracing::debug!("delivered");
    let started = shared.events.handler_started(ctx.stream_id());
    // The handler runs inside this task: a panic is caught as a value, and a
    // timeout or the end of the shutdown budget drops (cancels) its future.
    // No extra task per job. Its future is boxed: its size is the
    // application's (the bench's handler, which may await a database, takes
    // 3.3 KB), and inline it made every job's task that much larger, copied
    // several times by each spawn (callgrind: 2,500 instructions per job).
    let handling = AssertUnwindSafe(Box::pin(shared.handler.handle(body, &ctx))).catch_unwind();
    let timeout = shared.config.handler.timeout;
    // Biased, handler first: a handler that finishes without waiting costs
    // neither a timer nor a wait on the cancel flag.
    let finished = tokio::select! {
        biased;
        finished = tokio::time::timeout(timeout, handling) => finished,
        () = shared.cancel.raised() => {
            shared.events.left_pending(ctx.stream, 1);
            tracing::warn!(stream_id = ctx.stream_id(), "shutdown budget spent while the handler ran; the job stays pending");
            return;
        }
    };
    let (outcome, settle) = decide(finished, timeout, ctx.stream_id());
    // A `Done` job counts as in its handler until its ack is queued (see
    // `ack`): the acker's linger must not end between the two, or one
    // read's acks go out in two flushes, the second of a job or two.
    if !matches!(settle, Settle::Ack) {
        held.handler_ended();
    }
    shared.events.handled(ctx.stream, outcome, started);
    tracing::debug!(outcome = outcome.as_str(), "handler ended");
    match settle {
        Settle::Ack => ack(shared, ctx, held),
        Settle::Retry {
            after,
            reason,
            detail,
        } => Box::pin(schedule_retry(shared, &ctx, after, &reason, &detail)).await,
        Settle::DeadLetter { reason, detail } => {
            if !before_dead_letter(shared, &ctx).await {
                return;
            }
            let source = (ctx.stream, ctx.stream_id());
            Box::pin(dead_letter(
                shared,
                source,
                Some(ctx.job_id()),
                reason,
                &detail,
            ))
            .await;
        }
        Settle::Reconcile { reason } => Box::pin(reconcile(shared, &ctx, reason)).await,
        // Counted as failed with its outcome (a panic).
        Settle::StayPending => {}
    }
}

/// How the handler ended, as what to do next and the `outcome` it is counted under.
fn decide(finished: Finished, timeout: Duration, stream_id: &str) -> (JobOutcome, Settle) {
    match finished {
        Err(_elapsed) => {
            tracing::warn!(
                ?timeout,
                "handler timed out; retrying as a transient failure"
            );
            let settle = Settle::Retry {
                after: None,
                reason: "timeout".to_owned(),
                detail: format!("handler timed out after {timeout:?}"),
            };
            (JobOutcome::Timeout, settle)
        }
        Ok(Err(panic)) => {
            let reason = panic_message(panic);
            tracing::error!(panic = %reason, stream_id, "handler panicked; the job stays pending");
            (JobOutcome::Panic, Settle::StayPending)
        }
        Ok(Ok(Err(job_error))) => {
            tracing::warn!(kind = %job_error.kind(), error = %job_error, "handler failed");
            match job_error.kind() {
                ErrorKind::Transient => (
                    JobOutcome::TransientError,
                    Settle::Retry {
                        after: None,
                        reason: "transient".to_owned(),
                        detail: job_error.to_string(),
                    },
                ),
                ErrorKind::Permanent => (
                    JobOutcome::PermanentError,
                    Settle::DeadLetter {
                        reason: DeadReason::Permanent,
                        detail: job_error.to_string(),
                    },
                ),
                ErrorKind::Ambiguous => (
                    JobOutcome::AmbiguousError,
                    Settle::Reconcile {
                        reason: job_error.to_string(),
                    },
                ),
            }
        }
        Ok(Ok(Ok(outcome))) => match outcome {
            Outcome::Done => (JobOutcome::Done, Settle::Ack),
            Outcome::Retry { after, reason } => (
                JobOutcome::Retry,
                Settle::Retry {
                    after,
                    detail: format!("handler asked to retry: {reason}"),
                    reason,
                },
            ),
            Outcome::DeadLetter { reason } => (
                JobOutcome::DeadLetter,
                Settle::DeadLetter {
                    reason: DeadReason::Handler,
                    detail: reason,
                },
            ),
            Outcome::Reconcile { reason } => (JobOutcome::Reconcile, Settle::Reconcile { reason }),
        },
    }
}

/// An entry that is not a valid envelope of `E` goes to the dead-letter
/// stream (`unsupported_schema` or `decode_error`) instead of crashing or
/// blocking the worker; the dead letter keeps the original fields.
async fn decode_failed<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    delivery: &Delivery,
    fields: &FieldMap<'_>,
    err: Error,
) {
    shared.events.malformed(delivery.stream);
    // The header alone may still decode and name the job.
    let header = envelope::decode_header(fields).ok();
    let job_id = header.as_ref().map(|header| header.job_id.clone());
    tracing::error!(
        queue = &*shared.config.queue,
        partition = shared.config.partition_of_stream(delivery.stream).index(),
        key = shared.ready_key(delivery.stream),
        stream_id = %delivery.entry.id,
        job_id = job_id.as_deref(),
        error = %err,
        "entry does not decode as {}; dead-lettering it",
        E::TYPE,
    );
    let reason = match err {
        Error::Decode(DecodeError::UnsupportedSchema { .. }) => DeadReason::UnsupportedSchema,
        _ => DeadReason::DecodeError,
    };
    if let Some(header) = header {
        let ctx = dead_job_context(shared, delivery.stream, &delivery.entry.id, header, fields);
        if !before_dead_letter(shared, &ctx).await {
            return;
        }
    }
    dead_letter(
        shared,
        (delivery.stream, &delivery.entry.id),
        job_id.as_deref(),
        reason,
        &err.to_string(),
    )
    .await;
}

/// Schedules the next attempt, or dead-letters the job when this attempt was the last.
async fn schedule_retry<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    ctx: &JobContext,
    after: Option<Duration>,
    reason: &str,
    detail: &str,
) {
    let config = &shared.config;
    let attempt = ctx.attempt();
    if retry::attempts_exhausted(config, attempt) {
        let detail = format!(
            "attempt {attempt} of {}: {detail}",
            config.retry.max_attempts
        );
        if !before_dead_letter(shared, ctx).await {
            return;
        }
        dead_letter(
            shared,
            (ctx.stream, ctx.stream_id()),
            Some(ctx.job_id()),
            DeadReason::RetriesExhausted,
            &detail,
        )
        .await;
        return;
    }
    let delay = match after {
        Some(after) => retry::requested_delay(config, after),
        None => retry::delay(config, attempt, &mut rand::rng()),
    };
    let due_ms = due_ms(delay);
    let reason = truncate(reason, REASON_MAX_BYTES);
    let request = transitions::ScheduleRetry {
        stream: ctx.stream,
        consumer: &shared.consumer,
        source_id: ctx.stream_id(),
        job_id: ctx.job_id(),
        due_ms,
        reason,
        accepted_schemas: E::ACCEPTS,
    };
    failpoint("before_retry_schedule");
    let scheduled = with_retries("retry_schedule", || {
        let mut conn = shared.multiplexed.clone();
        let request = &request;
        async move { transitions::retry_schedule(&mut conn, config, request).await }
    })
    .await;
    match scheduled {
        Ok(moved) => {
            failpoint("after_retry_schedule");
            shared.events.retry_scheduled(ctx.stream);
            // Info, not debug: only a failed attempt gets here, and when it
            // runs again is what an operator looks for.
            tracing::info!(
                attempt,
                next_attempt = attempt + 1,
                ?delay,
                reason,
                retry_id = %moved.id,
                rerun = moved.already,
                "retry scheduled",
            );
        }
        Err(err) => transition_failed(
            shared,
            (ctx.stream, ctx.stream_id()),
            (FailedTransition::Retry, Settlement::Retry),
            "scheduling the retry",
            err,
        ),
    }
}

/// The context of a job that is dead-lettered without running (its body
/// does not decode, or it is poison), for [`before_dead_letter`]: its
/// header, and its run when the queue is a pipeline stage's (a run link
/// that does not decode leaves the job outside any run).
pub(super) fn dead_job_context<E: Envelope, H: Handler<E>>(
    shared: &Runner<E, H>,
    stream: StreamSlot,
    stream_id: &str,
    header: envelope::Header,
    fields: &FieldMap<'_>,
) -> JobContext {
    let run = if H::READS_RUN {
        envelope::decode_run_link(fields).ok().flatten()
    } else {
        None
    };
    JobContext {
        header,
        run,
        stream_id: stream_id.to_owned(),
        stream,
        claim_epoch: None,
        owner: shared.jobs.ownership.clone(),
    }
}

/// The handler's [`Handler::dead_lettering`] hook (a pipeline stage settles
/// the job dead at its joins); `false` when it failed: the job then stays
/// pending and is dead-lettered on a later delivery (or recovery pass).
pub(super) async fn before_dead_letter<E: Envelope, H: Handler<E>>(
    shared: &Runner<E, H>,
    ctx: &JobContext,
) -> bool {
    match shared.handler.dead_lettering(ctx).await {
        Ok(()) => {
            failpoint("before_dead_letter_after_hook");
            true
        }
        Err(err) => {
            shared
                .events
                .settlement_failed(ctx.stream, FailedTransition::DeadLetter);
            tracing::error!(error = %err, stream_id = ctx.stream_id(), "settling the job dead before its dead letter failed; the entry stays pending");
            false
        }
    }
}

/// Moves the entry to the dead-letter stream through the `dead_letter` function.
/// `source` is the entry's partition and stream ID.
async fn dead_letter(
    shared: &Core,
    source: (StreamSlot, &str),
    job_id: Option<&str>,
    reason: DeadReason,
    detail: &str,
) {
    let (stream, source_id) = source;
    let deliveries = delivery_count(shared, stream, source_id).await;
    let detail = truncate(detail, DETAIL_MAX_BYTES);
    let request = transitions::DeadLetter {
        stream,
        consumer: &shared.consumer,
        source_id,
        job_id,
        reason,
        detail,
        deliveries,
    };
    let moved = dead_letter_call(shared, &request).await;
    match moved {
        Ok(moved) => tracing::warn!(
            %reason,
            detail,
            deliveries,
            dead_id = %moved.id,
            rerun = moved.already,
            "job dead-lettered",
        ),
        Err(err) => transition_failed(
            shared,
            (stream, source_id),
            (FailedTransition::DeadLetter, Settlement::DeadLetter),
            "dead-lettering",
            err,
        ),
    }
}

/// Reports a transition that did not happen. The entry stays pending (for
/// redelivery, and poison quarantine if it keeps failing), unless the
/// function found it no longer this worker's, or no longer there at all. A
/// failure counts under `transition`, a refusal (`QG_NOT_OWNER`) under `settlement`.
fn transition_failed(
    shared: &Core,
    (stream, source_id): (StreamSlot, &str),
    (transition, settlement): (FailedTransition, Settlement),
    what: &str,
    err: Error,
) {
    match err {
        Error::Transition(TransitionError::NotOwner(refused)) => {
            let NotOwner {
                job,
                stream_id,
                owner,
                ..
            } = *refused;
            // This worker stalled past claim.min_idle and another claimed the
            // job (or settled it): the new owner settles it, not this one.
            shared.events.ownership_lost(stream, settlement, 1);
            tracing::warn!(
                queue = &*shared.config.queue,
                partition = stream.index(),
                job_id = %job,
                stream_id = %stream_id,
                owner = owner.as_deref().unwrap_or("(none: no longer pending)"),
                "{what} refused: the entry is no longer pending for this worker; its new owner settles it",
            );
        }
        Error::Transition(TransitionError::Refused {
            code: TransitionCode::NoSource,
            ..
        }) => {
            // Deleted from the stream while pending (recovery reports the lost job).
            tracing::warn!(error = %err, stream_id = source_id, "{what}: the entry no longer exists");
        }
        err => {
            shared.events.settlement_failed(stream, transition);
            tracing::error!(error = %err, stream_id = source_id, "{what} failed; the entry stays pending");
        }
    }
}

/// The `dead_letter` call with its crash points and event; shared with poison quarantine.
pub(super) async fn dead_letter_call(
    shared: &Core,
    request: &transitions::DeadLetter<'_>,
) -> Result<Moved> {
    failpoint("before_dead_letter");
    let moved = with_retries("dead_letter", || {
        let mut conn = shared.multiplexed.clone();
        async move { transitions::dead_letter(&mut conn, &shared.config, request).await }
    })
    .await?;
    failpoint("after_dead_letter");
    shared.events.dead_lettered(request.stream, request.reason);
    Ok(moved)
}

/// The job stays pending; the handler's `reconcile` hook runs under the
/// handler timeout, in a task of its own so that its panic is only logged.
async fn reconcile<E: Envelope, H: Handler<E>>(
    shared: &Arc<Runner<E, H>>,
    ctx: &JobContext,
    reason: String,
) {
    shared.events.reconciling();
    tracing::warn!(
        reason = %reason,
        stream_id = ctx.stream_id(),
        "outcome is ambiguous; the job stays pending and reconciliation starts",
    );
    let hook_shared = shared.clone();
    let hook_ctx = ctx.clone();
    let mut hook = tokio::spawn(
        async move { hook_shared.handler.reconcile(&hook_ctx, &reason).await }.in_current_span(),
    );
    let timeout = shared.config.handler.timeout;
    let ended = tokio::select! {
        ended = tokio::time::timeout(timeout, &mut hook) => ended,
        () = shared.cancel.raised() => {
            hook.abort();
            return;
        }
    };
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(join_error)) => tracing::error!(error = %join_error, "the reconcile hook panicked"),
        Err(_elapsed) => {
            hook.abort();
            tracing::error!(?timeout, "the reconcile hook timed out");
        }
    }
}

/// How often this entry was delivered, for the dead letter's record (0 if unknown).
async fn delivery_count(shared: &Core, stream: StreamSlot, id: &str) -> u64 {
    let reply: redis::RedisResult<redis::streams::StreamPendingCountReply> = redis::cmd("XPENDING")
        .arg(shared.ready_key(stream))
        .arg(&*shared.config.group)
        .arg(id)
        .arg(id)
        .arg(1)
        .query_async(&mut shared.multiplexed.clone())
        .await;
    reply
        .ok()
        .and_then(|reply| reply.ids.first().map(|entry| entry.times_delivered as u64))
        .unwrap_or(0)
}

/// Attempts at one `XACK` or transition call when the shared connection drops under it.
const CALL_ATTEMPTS: u32 = 3;
/// Pause before the second attempt, doubled before the third.
const CALL_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Runs `call` again after a connection error: every transition finds its
/// marker on a re-run, so a call that was applied before its reply was lost
/// answers `already` the second time rather than moving the job twice.
pub(super) async fn with_retries<T, F, Fut>(what: &str, mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut delay = CALL_RETRY_DELAY;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(Error::Redis(RedisError { source, context }))
                if attempt < CALL_ATTEMPTS && is_connection_error(&source) =>
            {
                tracing::warn!(error = %source, context, attempt, "{what} failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// Acknowledges the entry after a `Done` outcome only, through the worker's
/// acker (one `ack` call per flush; see `acks`), which counts the
/// job done and releases what it held once Redis has the ack.
fn ack(shared: &Core, ctx: JobContext, held: Held) {
    tracing::debug!("ack queued");
    let stream = ctx.stream;
    // The context ends here: its IDs move to the acker, no copy.
    let request = AckRequest {
        stream: ctx.stream,
        id: ctx.stream_id,
        job_id: ctx.header.job_id,
        claim_epoch: ctx.claim_epoch,
        permit: held.permit,
        slot: held.slot,
    };
    let send = shared.jobs.acker.send(request);
    // Queued: the acker may flush without waiting for this job any more.
    drop(held.in_handler);
    if let Err(unsent) = send {
        // Only while the worker itself is torn down: the entry stays pending.
        shared.events.ack_failed(stream, 1);
        tracing::error!(
            key = shared.ready_key(unsent.0.stream),
            stream_id = %unsent.0.id,
            "the acker stopped before the job was acknowledged; it stays pending and will be redelivered",
        );
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "a non-string panic payload".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdef", 3), "abc");
        // 'é' is two bytes: cutting inside it backs off to before it.
        assert_eq!(truncate("aé", 2), "a");
    }
}
