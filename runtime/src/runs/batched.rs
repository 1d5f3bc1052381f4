//! How a pipeline's settles and hand-offs that wait together are sent: merged into one `run_settle` per join partition and one `publish_batch` per stream, a refused call retried job by job.
//!
//! Merging changes no outcome: `run_settle` settles several jobs in order
//! as it would settle each alone, and `publish_batch` publishes a
//! job_id given twice once. A merged call refused (a key of another type,
//! an argument the library rejects) fails no one yet: each request is sent
//! again alone, so only the request at fault gets the refusal, naming its
//! key, partition and job.

use futures_util::future::join_all;
use redis::ToRedisArgs;

use crate::connect::Redis;
use crate::error::{Error, Result};
use crate::functions::{
    self, CallContext, PublishBatch, RunOutcome, RunSettle, RunSettleBatch, RunSettled,
};
use crate::transitions::Appended;
use crate::Partition;

use queuegen_core::wire::library::{MAX_CHILDREN, MAX_PUBLISH_BATCH, MAX_SETTLE_BATCH};

/// One job to settle at one join: everything its `run_settle` sends.
pub(crate) struct SettleRequest {
    /// `run_settle` in the join's library.
    pub function: String,
    pub partition: Partition,
    pub keys: crate::config::RunKeys,
    pub pipeline: String,
    pub run_id: String,
    pub job_id: String,
    pub outcome: RunOutcome,
    pub counted: bool,
    pub fails_run: bool,
    pub result_ref: String,
    pub keep_ms: u64,
    pub children: Vec<String>,
    /// The join's envelope, as its ARGV items (the first stage's job only).
    pub envelope: Option<Vec<Vec<u8>>>,
}

impl SettleRequest {
    fn call<'a>(&'a self, children: &'a [&'a str]) -> RunSettle<'a, Vec<Vec<u8>>> {
        RunSettle {
            run_key: &self.keys.run,
            out_key: &self.keys.out,
            settled_key: &self.keys.settled,
            ready_key: &self.keys.ready,
            runs_key: &self.keys.runs,
            pipeline: &self.pipeline,
            run_id: &self.run_id,
            job_id: &self.job_id,
            outcome: self.outcome,
            counted: self.counted,
            fails_run: self.fails_run,
            result_ref: &self.result_ref,
            keep_ms: self.keep_ms,
            children,
            join_envelope: self.envelope.as_ref(),
        }
    }

    fn context(&self) -> CallContext<'_> {
        CallContext {
            function: &self.function,
            key: self.keys.run.clone(),
            partition: self.partition,
            job: &self.job_id,
            entry: None,
        }
    }

    /// Sends it alone: `run_settle` of one job.
    async fn send_alone(&self, redis: &Redis) -> Result<RunSettled> {
        let children: Vec<&str> = self.children.iter().map(String::as_str).collect();
        let settled: Vec<RunSettled> = functions::command(&self.function, &self.call(&children))
            .query_async(&mut redis.shared())
            .await
            .map_err(|err| self.context().error(err))?;
        let count = settled.len();
        settled
            .into_iter()
            .next()
            .filter(|_| count == 1)
            .ok_or_else(|| {
                self.context()
                    .unexpected(format!("{count} replies for one job"))
            })
    }
}

/// Sends `requests`: per join partition and pipeline (its `runs` key, which
/// names both: a call's jobs share them), in order, one `run_settle` per
/// `MAX_SETTLE_BATCH` jobs (children together at most `MAX_CHILDREN`); all
/// at once.
pub(crate) async fn send_settles(
    redis: &Redis,
    requests: Vec<SettleRequest>,
) -> Vec<Result<RunSettled>> {
    let chunks = chunks(
        requests
            .iter()
            .map(|r| (r.keys.runs.as_str(), r.children.len())),
        MAX_SETTLE_BATCH as usize,
        MAX_CHILDREN as usize,
    );
    let sent = join_all(
        chunks
            .iter()
            .map(|chunk| settle_chunk(redis, &requests, chunk)),
    )
    .await;
    answer_in_order(requests.len(), chunks, sent)
}

async fn settle_chunk(
    redis: &Redis,
    requests: &[SettleRequest],
    chunk: &[usize],
) -> Vec<Result<RunSettled>> {
    if let [only] = chunk {
        return vec![requests[*only].send_alone(redis).await];
    }
    let children: Vec<Vec<&str>> = chunk
        .iter()
        .map(|&i| requests[i].children.iter().map(String::as_str).collect())
        .collect();
    let calls: Vec<RunSettle<'_, Vec<Vec<u8>>>> = chunk
        .iter()
        .zip(&children)
        .map(|(&i, children)| requests[i].call(children))
        .collect();
    let first = &requests[chunk[0]];
    let batch: redis::RedisResult<Vec<RunSettled>> =
        functions::command(&first.function, &RunSettleBatch { jobs: &calls })
            .query_async(&mut redis.shared())
            .await;
    match batch {
        Ok(settled) if settled.len() == chunk.len() => settled.into_iter().map(Ok).collect(),
        // Refused, or cut off: each alone, so only the one at fault fails
        // (a settle already made answers `already`).
        _ => join_all(chunk.iter().map(|&i| requests[i].send_alone(redis))).await,
    }
}

/// Jobs one hand-off publishes to one partition stream of one stage.
pub(crate) struct PublishRequest {
    /// `publish_batch` in the stage's library.
    pub function: String,
    pub partition: Partition,
    pub ready_key: String,
    pub window_ms: u64,
    pub payload_max_bytes: usize,
    /// Each job's marker key and its envelope's ARGV items, in order.
    pub jobs: Vec<(String, Vec<Vec<u8>>)>,
    /// The job a refused call's error names: the first one.
    pub first_child: String,
}

impl PublishRequest {
    fn context(&self) -> CallContext<'_> {
        CallContext {
            function: &self.function,
            key: self.ready_key.clone(),
            partition: self.partition,
            job: &self.first_child,
            entry: None,
        }
    }

    /// Sends it alone: one `publish_batch`.
    async fn send_alone(&self, redis: &Redis) -> Result<()> {
        let refs = [self];
        send_publish(redis, &refs)
            .await
            .map_err(|err| self.context().error(err))
    }
}

/// One `publish_batch` of every job of `requests` (one stream).
async fn send_publish(redis: &Redis, requests: &[&PublishRequest]) -> redis::RedisResult<()> {
    let first = requests[0];
    let (marker_keys, envelopes): (Vec<String>, Vec<&Vec<Vec<u8>>>) = requests
        .iter()
        .flat_map(|request| {
            request
                .jobs
                .iter()
                .map(|(marker, envelope)| (marker.clone(), envelope))
        })
        .unzip();
    let call = PublishBatch {
        ready_key: &first.ready_key,
        marker_keys: &marker_keys,
        window_ms: first.window_ms,
        payload_max_bytes: first.payload_max_bytes,
        envelopes: &envelopes,
    };
    let appended: Vec<Appended> = functions::command(&first.function, &call)
        .query_async(&mut redis.shared())
        .await?;
    if appended.len() != marker_keys.len() {
        return Err(redis::RedisError::from(std::io::Error::other(format!(
            "publish_batch answered {} of {} envelopes",
            appended.len(),
            marker_keys.len()
        ))));
    }
    Ok(())
}

/// Sends `requests`: per stream (its `ready` key), in order, one
/// `publish_batch` per `MAX_PUBLISH_BATCH` envelopes; all at once.
pub(crate) async fn send_publishes(
    redis: &Redis,
    requests: Vec<PublishRequest>,
) -> Vec<Result<()>> {
    let chunks = chunks(
        requests
            .iter()
            .map(|r| (r.ready_key.as_str(), r.jobs.len())),
        usize::MAX,
        MAX_PUBLISH_BATCH as usize,
    );
    let sent = join_all(chunks.iter().map(|chunk| async {
        let refs: Vec<&PublishRequest> = chunk.iter().map(|&i| &requests[i]).collect();
        if refs.len() > 1 && send_publish(redis, &refs).await.is_ok() {
            return chunk.iter().map(|_| Ok(())).collect();
        }
        join_all(refs.iter().map(|request| request.send_alone(redis))).await
    }))
    .await;
    answer_in_order(requests.len(), chunks, sent)
}

/// The requests, given by the key the requests of one call share and their
/// size, grouped per key in the order first seen, each group split where it
/// would exceed `max_count` requests or `max_size` in all (a request larger
/// than that goes alone).
fn chunks<'a>(
    requests: impl Iterator<Item = (&'a str, usize)>,
    max_count: usize,
    max_size: usize,
) -> Vec<Vec<usize>> {
    let mut chunks: Vec<(&str, usize, Vec<usize>)> = Vec::new();
    for (i, (key, size)) in requests.enumerate() {
        let open = chunks.iter_mut().rev().find(|(k, total, members)| {
            *k == key && members.len() < max_count && total.saturating_add(size) <= max_size
        });
        match open {
            Some((_, total, members)) => {
                *total += size;
                members.push(i);
            }
            None => chunks.push((key, size, vec![i])),
        }
    }
    chunks.into_iter().map(|(_, _, members)| members).collect()
}

/// Each request's answer, from the answers of the chunks it was sent in.
fn answer_in_order<A>(
    count: usize,
    chunks: Vec<Vec<usize>>,
    sent: Vec<Vec<Result<A>>>,
) -> Vec<Result<A>> {
    let mut answers: Vec<Option<Result<A>>> = (0..count).map(|_| None).collect();
    for (chunk, replies) in chunks.into_iter().zip(sent) {
        for (i, reply) in chunk.into_iter().zip(replies) {
            answers[i] = Some(reply);
        }
    }
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| {
                Err(Error::redis(
                    "a merged pipeline call",
                    std::io::Error::other("no answer for the request").into(),
                ))
            })
        })
        .collect()
}

/// Encodes `value` as the ARGV items it sends.
pub(crate) fn items(value: &impl ToRedisArgs) -> Vec<Vec<u8>> {
    value.to_redis_args()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_chunked_per_key_in_order_within_both_limits() {
        let given = [("a", 1), ("b", 1), ("a", 2), ("a", 1), ("a", 5), ("b", 1)];
        assert_eq!(
            chunks(given.into_iter(), 2, 4),
            [vec![0, 2], vec![1, 5], vec![3], vec![4]]
        );
        // Only the count limit: three per chunk.
        let many = chunks(std::iter::repeat_n(("a", 1), 7), 3, usize::MAX);
        assert_eq!(many, [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    }
}
