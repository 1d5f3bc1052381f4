//! Group commit of acknowledgements: job tasks hand over `Done` entries, one
//! task sends them as one `XACK key group id...` per stream.
//!
//! A job task sends its entry only after its handler returned `Done`, and
//! waits for the answer before it counts the job done and releases its
//! permit, so batching changes when an ack is sent, never whether. While one
//! `XACK` is on the wire the next requests queue up: under load a flush
//! carries many entries, when idle an ack goes out at once (no timer).

use redis::aio::ConnectionManager;
use tokio::sync::{mpsc, oneshot};

use super::job::with_retries;
use crate::error::Error;

/// Most entries one flush takes; bounds the size of one pipeline.
const MAX_FLUSH: usize = 1024;

/// One `Done` entry waiting for its `XACK`.
pub(super) struct AckRequest {
    pub key: String,
    pub id: String,
    /// `Ok` once the `XACK` carrying it was answered; the error text otherwise.
    pub reply: oneshot::Sender<Result<(), String>>,
}

/// Where job tasks send their acks.
pub(super) type AckSender = mpsc::UnboundedSender<AckRequest>;

/// Starts the acker; it ends when every sender is gone and the queue is drained.
pub(super) fn start(conn: ConnectionManager, group: &'static str) -> AckSender {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(run(receiver, conn, group));
    sender
}

async fn run(
    mut receiver: mpsc::UnboundedReceiver<AckRequest>,
    conn: ConnectionManager,
    group: &'static str,
) {
    let mut batch = Vec::with_capacity(MAX_FLUSH);
    while receiver.recv_many(&mut batch, MAX_FLUSH).await > 0 {
        flush(&conn, group, &mut batch).await;
    }
}

/// Sends one `XACK` per stream in one pipeline and answers every request.
async fn flush(conn: &ConnectionManager, group: &'static str, batch: &mut Vec<AckRequest>) {
    let entries = batch.len();
    // One XACK per stream, streams in first-seen order; `sizes` outlives the
    // borrow of `batch` so that the requests can be answered afterwards.
    let (pipe, sizes) = {
        let mut streams: Vec<(&str, Vec<&str>)> = Vec::new();
        for request in batch.iter() {
            match streams.iter_mut().find(|(key, _)| *key == request.key) {
                Some((_, ids)) => ids.push(&request.id),
                None => streams.push((&request.key, vec![&request.id])),
            }
        }
        let mut pipe = redis::pipe();
        for (key, ids) in &streams {
            pipe.cmd("XACK").arg(key).arg(group).arg(ids);
        }
        let sizes: Vec<(String, u64)> = streams
            .iter()
            .map(|(key, ids)| ((*key).to_owned(), ids.len() as u64))
            .collect();
        (pipe, sizes)
    };
    let answer: Result<Vec<u64>, Error> = with_retries("XACK", || {
        let mut conn = conn.clone();
        let pipe = &pipe;
        async move {
            pipe.query_async(&mut conn)
                .await
                .map_err(|err| Error::redis(format!("XACK of {entries} entries"), err))
        }
    })
    .await;

    match answer {
        Ok(counts) => {
            for ((key, sent), acked) in sizes.iter().zip(counts) {
                let missing = sent - acked.min(*sent);
                if missing > 0 {
                    // Claimed and finished elsewhere meanwhile; harmless, as
                    // effects are idempotent by job_id. XACK does not say which.
                    tracing::warn!(
                        key = key.as_str(),
                        missing,
                        "entries were already acknowledged elsewhere"
                    );
                }
            }
            for request in batch.drain(..) {
                let _ = request.reply.send(Ok(()));
            }
        }
        Err(err) => {
            let message = err.to_string();
            for request in batch.drain(..) {
                let _ = request.reply.send(Err(message.clone()));
            }
        }
    }
}
