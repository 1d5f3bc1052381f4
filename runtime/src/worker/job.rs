//! One job task: decode the entry, run the handler under its timeout, and ack only `Outcome::Done`.
//!
//! Everything other than `Done` (a decode error, a handler error, a panic, a
//! timeout, shutdown) leaves the entry pending with this consumer as owner,
//! so that recovery redelivers it; nothing here acks to get rid of a job.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::{Counters, Delivery, Shared};
use crate::envelope::{self, Envelope, FieldMap};
use crate::handler::{Handler, JobContext};
use crate::outcome::Outcome;

/// Runs one delivery to its end; the permit is released when this returns.
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: &Arc<Shared<E, H>>,
    delivery: Delivery,
    permit: OwnedSemaphorePermit,
    parent: tracing::Span,
) {
    let span = tracing::info_span!(
        parent: &parent,
        "job",
        queue = shared.config.queue,
        partition = delivery.partition,
        stream_id = %delivery.entry.id,
        claimed = delivery.claimed,
        job_id = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    );
    run_in_span(shared, delivery, &span)
        .instrument(span.clone())
        .await;
    drop(permit);
}

async fn run_in_span<E: Envelope, H: Handler<E>>(
    shared: &Arc<Shared<E, H>>,
    delivery: Delivery,
    span: &tracing::Span,
) {
    let counters = &shared.counters;
    let fields = FieldMap::from_stream_map(E::TYPE, &delivery.entry.map);
    let (header, body) = match envelope::decode::<E>(&fields) {
        Ok(decoded) => decoded,
        Err(err) => {
            Counters::add(&counters.decode_errors, 1);
            // The header alone may still decode and name the job.
            let job_id = envelope::decode_header(&fields)
                .map(|header| header.job_id)
                .ok();
            tracing::error!(
                queue = shared.config.queue,
                partition = delivery.partition,
                key = %delivery.key,
                stream_id = %delivery.entry.id,
                job_id = job_id.as_deref(),
                error = %err,
                "entry does not decode as {}; it stays pending",
                E::TYPE,
            );
            return;
        }
    };
    span.record("job_id", header.job_id.as_str());
    span.record("trace_id", header.trace_id.as_str());

    let ctx = JobContext {
        header,
        stream_id: delivery.entry.id.clone(),
        partition: delivery.partition,
        queue: shared.config.queue,
        consumer: shared.consumer.clone(),
    };
    // The handler runs in a task of its own so that a panic ends only that
    // task (seen here as a JoinError) and a timeout or shutdown can abort it.
    let handler_shared = shared.clone();
    let mut handler = tokio::spawn(
        async move { handler_shared.handler.handle(body, &ctx).await }.in_current_span(),
    );
    let timeout = shared.config.handler_timeout;
    let finished = tokio::select! {
        finished = tokio::time::timeout(timeout, &mut handler) => finished,
        () = shared.cancel.raised() => {
            handler.abort();
            Counters::add(&counters.left_pending, 1);
            tracing::warn!("shutdown budget spent while the handler ran; the job stays pending");
            return;
        }
    };
    Counters::add(&counters.handled, 1);
    let outcome = match finished {
        Err(_elapsed) => {
            handler.abort();
            tracing::error!(?timeout, "handler timed out; the job stays pending");
            None
        }
        Ok(Err(join_error)) => {
            let reason = if join_error.is_panic() {
                panic_message(join_error.into_panic())
            } else {
                join_error.to_string()
            };
            tracing::error!(panic = %reason, "handler panicked; the job stays pending");
            None
        }
        Ok(Ok(Err(job_error))) => {
            tracing::warn!(kind = %job_error.kind(), error = %job_error, "handler failed; the job stays pending");
            None
        }
        Ok(Ok(Ok(outcome))) => Some(outcome),
    };
    match outcome {
        Some(Outcome::Done) => ack(shared, &delivery).await,
        None => Counters::add(&counters.failed, 1),
    }
}

/// Attempts at one `XACK` when the shared connection drops under it.
const ACK_ATTEMPTS: u32 = 3;
/// Pause before the second attempt, doubled before the third.
const ACK_RETRY_DELAY: Duration = Duration::from_millis(100);

/// `XACK key group id` on the shared connection, after a `Done` outcome only.
///
/// `XACK` is idempotent, so a connection error (after which the shared
/// connection reconnects by itself) is retried a few times: otherwise a
/// finished job would wait out `claim_min_idle` and run again.
async fn ack<E: Envelope, H: Handler<E>>(shared: &Shared<E, H>, delivery: &Delivery) {
    let counters = &shared.counters;
    let mut delay = ACK_RETRY_DELAY;
    let mut attempt = 1;
    let acked = loop {
        let acked: redis::RedisResult<u64> = redis::cmd("XACK")
            .arg(&delivery.key)
            .arg(shared.config.group)
            .arg(&delivery.entry.id)
            .query_async(&mut shared.acks.clone())
            .await;
        match acked {
            Err(err) if attempt < ACK_ATTEMPTS && is_connection_error(&err) => {
                tracing::warn!(key = %delivery.key, error = %err, attempt, "XACK failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            acked => break acked,
        }
    };
    match acked {
        Ok(1) => Counters::add(&counters.done, 1),
        Ok(_) => {
            // Another consumer claimed and finished this entry meanwhile; the
            // effect is idempotent by job_id, so both runs were harmless.
            Counters::add(&counters.done, 1);
            tracing::warn!(key = %delivery.key, "job was already acknowledged elsewhere");
        }
        Err(err) => {
            Counters::add(&counters.failed, 1);
            tracing::error!(
                key = %delivery.key,
                error = %err,
                "XACK failed after the job was done; it stays pending and will be redelivered",
            );
        }
    }
}

fn is_connection_error(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Io || err.is_timeout() || err.is_unrecoverable_error()
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
