//! Commits that arrive together go to the server together: one pipeline of `SET … NX GET PX`, and one `WAIT` after them when a durability is asked.
//!
//! Every job of a worker commits its result from its own task, and jobs of
//! one read end at about the same time. Sent one by one, each commit costs
//! its own request on the shared connection; here a task takes every commit
//! waiting (as the acker takes acks) and sends them as one pipeline, and
//! each caller gets its own command's reply. A `SET` that fails (a key of
//! the wrong type) fails only its own commit. With a durability, the one
//! `WAIT` covers every `SET` before it on the connection, so it answers for
//! the whole batch at the cost of one.
//!
//! Only on one server: a Cluster client splits a pipeline by node and, on a
//! redirect, sends a node's part again, and a `SET … NX GET` sent twice
//! would answer its own first write as an earlier delivery's result.

use redis::Value;
use tokio::sync::{mpsc, oneshot};

use super::committed;
use crate::connect::Connection;
use crate::error::{Error, Result, ResultError};
use crate::producer::Durability;

/// Most commits one pipeline carries.
const MAX_BATCH: usize = 1024;

/// Where commits go to be sent together; the task ends with the last sender.
pub(super) struct Batcher {
    sender: mpsc::UnboundedSender<Commit>,
}

/// One result to store, and where its reply goes.
struct Commit {
    key: String,
    value: Vec<u8>,
    reply: oneshot::Sender<Result<super::Committed>>,
}

/// How every commit of a store is sent.
pub(super) struct Settings {
    pub connection: Connection,
    pub ttl_ms: u64,
    pub durability: Durability,
}

impl Batcher {
    /// Starts the batching task on the current tokio runtime.
    pub(super) fn start(settings: Settings) -> Batcher {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(receiver, settings));
        Batcher { sender }
    }

    /// Stores `value` under `key` unless a value is there, in the next batch.
    pub(super) async fn commit(&self, key: String, value: &[u8]) -> Result<super::Committed> {
        let (reply, replied) = oneshot::channel();
        let context = format!("committing the result {key}");
        let commit = Commit {
            key,
            value: value.to_vec(),
            reply,
        };
        if self.sender.send(commit).is_err() {
            return Err(stopped(context));
        }
        replied.await.unwrap_or_else(|_| Err(stopped(context)))
    }
}

/// The batching task is gone: it can only have panicked.
fn stopped(context: String) -> Error {
    Error::redis(
        context,
        std::io::Error::other("the result store's batching task stopped").into(),
    )
}

async fn run(mut receiver: mpsc::UnboundedReceiver<Commit>, settings: Settings) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
        send(&settings, &mut batch).await;
    }
}

/// Sends one batch and answers each of its commits.
async fn send(settings: &Settings, batch: &mut Vec<Commit>) {
    let Durability { replicas, timeout } = settings.durability;
    let mut pipe = redis::pipe();
    for commit in batch.iter() {
        pipe.cmd("SET")
            .arg(&commit.key)
            .arg(&commit.value)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(settings.ttl_ms);
    }
    if replicas > 0 {
        pipe.cmd("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis().max(1) as u64);
    }
    // Each command's error comes back in its place, not as the pipeline's.
    pipe.ignore_errors();
    let mut connection = settings.connection.clone();
    let replies: redis::RedisResult<Vec<Value>> = pipe.query_async(&mut connection).await;
    let mut replies = match replies {
        Ok(replies) => replies.into_iter(),
        Err(err) => {
            for commit in batch.drain(..) {
                let context = format!("committing the result {}", commit.key);
                let _ = commit.reply.send(Err(Error::redis(context, err.clone())));
            }
            return;
        }
    };
    let set_replies: Vec<Value> = replies.by_ref().take(batch.len()).collect();
    let acknowledged = match replies.next() {
        Some(Value::Int(acknowledged)) => u32::try_from(acknowledged).unwrap_or(0),
        // No `WAIT` was sent, or it failed: only a requested one counts.
        _ => 0,
    };
    for (commit, reply) in batch.drain(..).zip(set_replies) {
        let context = || format!("committing the result {}", commit.key);
        let stored = match reply {
            Value::ServerError(err) => Err(Error::redis(context(), err.into())),
            reply => redis::from_redis_value::<Option<Vec<u8>>>(reply)
                .map_err(|err| Error::redis(context(), err.into())),
        };
        let answer = match stored {
            Ok(_) if acknowledged < replicas => Err(Error::Results(ResultError::NotReplicated {
                key: commit.key.clone(),
                replicas,
                acknowledged,
                timeout,
            })),
            other => other.map(committed),
        };
        let _ = commit.reply.send(answer);
    }
}
