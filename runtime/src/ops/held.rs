//! The jobs a partition holds for later: scheduled retries (and jobs set
//! aside by a tenant limit) and delayed publishes, soonest first, each with
//! the job it carries. What the dashboard's partition page lists.
//!
//! Read-only, two round trips: `TIME`, `ZCARD` and `ZRANGE … WITHSCORES` of
//! the set, then `HMGET` of the envelopes of the members shown.

use redis::aio::ConnectionLike;
use serde::Serialize;

use super::dead_letters::decode_envelope;
use super::status::server_time;
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::stream_slot::StreamSlot;

/// Which of a partition's sets to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldFor {
    /// The retry set: failed jobs waiting for their backoff, and jobs a
    /// tenant limit set aside (members are the source entry's ID).
    Retry,
    /// Jobs published with a delay (members are job_ids).
    Delay,
}

/// One job waiting in a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldJob {
    /// The set's member: a retry's source entry ID, or a delayed job's job_id.
    pub member: String,
    /// When it is due, in Unix ms.
    pub due_ms: u64,
    /// Due in this long (negative: overdue, waiting for the next promotion).
    pub due_in_ms: i64,
    /// From the stored envelope; `None` when the envelope is missing.
    pub job_id: Option<String>,
    pub attempt: Option<String>,
    /// Why it was scheduled (`reason` header: the handler's error class, `defer`…).
    pub reason: Option<String>,
}

/// The soonest `limit` jobs of a stream's set, and how many it holds in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldJobs {
    pub key: String,
    pub total: u64,
    pub jobs: Vec<HeldJob>,
}

/// Reads stream `stream`'s retry or delay set (soonest first, at most `limit`).
pub async fn held_jobs<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    set: HeldFor,
    limit: usize,
) -> Result<HeldJobs> {
    let (key, jobs_key) = match set {
        HeldFor::Retry => (config.retry_key(stream), config.retry_jobs_key(stream)),
        HeldFor::Delay => (config.delayed_key(stream), config.delayed_jobs_key(stream)),
    };
    let mut first = redis::pipe();
    first.cmd("TIME");
    first.cmd("ZCARD").arg(&key);
    first
        .cmd("ZRANGE")
        .arg(&key)
        .arg(0)
        .arg(limit.saturating_sub(1))
        .arg("WITHSCORES");
    let (time, total, members): (redis::Value, u64, Vec<(String, f64)>) = first
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("TIME, ZCARD and ZRANGE of {key}"), err))?;
    let now_ms = server_time(Some(Ok(time)))?;
    if limit == 0 || members.is_empty() {
        return Ok(HeldJobs {
            key,
            total,
            jobs: Vec::new(),
        });
    }
    let mut hmget = redis::cmd("HMGET");
    hmget.arg(&jobs_key);
    for (member, _) in &members {
        hmget.arg(member);
    }
    let envelopes: Vec<Option<Vec<u8>>> = hmget
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("HMGET of {jobs_key}"), err))?;
    let jobs = members
        .into_iter()
        .zip(envelopes)
        .map(|((member, score), envelope)| {
            let fields = envelope.as_deref().map(decode_envelope).unwrap_or_default();
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(field, _)| field == name)
                    .map(|(_, value)| value.clone())
            };
            let due_ms = score as u64;
            HeldJob {
                job_id: field("job_id"),
                attempt: field("attempt"),
                reason: field("reason"),
                due_in_ms: due_ms as i64 - now_ms as i64,
                due_ms,
                member,
            }
        })
        .collect();
    Ok(HeldJobs { key, total, jobs })
}
