//! Durable results by job id: how a handler makes its effect idempotent across redeliveries.
//!
//! Delivery is at least once: a job whose worker crashed after its effect
//! but before its acknowledgement runs again. A handler that commits its
//! result under the job id, and looks for one first, does the effect once.
//! [`RedisResults`] keeps results in Redis with `SET … NX GET`: one round
//! trip that stores the result unless one exists and returns the one that
//! does, so two deliveries racing each other agree on one result.

use std::future::Future;
use std::time::Duration;

use crate::connect::Connection;

use crate::connect::Redis;
use crate::error::{Error, Result};

/// What a commit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// This call stored the result.
    Stored,
    /// An earlier delivery had stored this result; the new one was dropped.
    Existing(Vec<u8>),
}

impl Committed {
    /// Whether an earlier delivery had already committed.
    pub fn was_redelivery(&self) -> bool {
        matches!(self, Committed::Existing(_))
    }
}

/// A durable result store keyed by queue and job id.
pub trait Results: Send + Sync + 'static {
    /// The result committed for `job_id` of `queue`, if any (a handler
    /// passes `ctx.queue()` and `ctx.job_id()`; a status page may ask too).
    fn find(
        &self,
        queue: &str,
        job_id: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>>> + Send;

    /// Stores `result` as the job's result unless one is stored already.
    fn commit(
        &self,
        queue: &str,
        job_id: &str,
        result: &[u8],
    ) -> impl Future<Output = Result<Committed>> + Send;
}

/// Results in Redis: `{key_prefix}:results:{queue}:{job_id}`, kept for `ttl`.
///
/// The ttl must outlast every redelivery of the job: at least the queue's
/// retention (`retention.min_age`, `QueueConfig::marker_ttl`), which also
/// bounds how long a dead letter can be replayed.
#[derive(Clone)]
pub struct RedisResults {
    connection: Connection,
    key_prefix: String,
    ttl: Duration,
}

impl RedisResults {
    pub fn new(redis: &Redis, key_prefix: impl Into<String>, ttl: Duration) -> Self {
        RedisResults {
            connection: redis.shared(),
            key_prefix: key_prefix.into(),
            ttl,
        }
    }

    /// The key of a job's result. A job id may contain anything but is
    /// never parsed back out, so no escaping is needed.
    pub fn key(&self, queue: &str, job_id: &str) -> String {
        format!("{}:results:{queue}:{job_id}", self.key_prefix)
    }
}

impl Results for RedisResults {
    async fn find(&self, queue: &str, job_id: &str) -> Result<Option<Vec<u8>>> {
        let key = self.key(queue, job_id);
        let mut connection = self.connection.clone();
        redis::cmd("GET")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .map_err(|err| Error::redis(format!("reading the result {key}"), err))
    }

    async fn commit(&self, queue: &str, job_id: &str, result: &[u8]) -> Result<Committed> {
        let key = self.key(queue, job_id);
        let mut connection = self.connection.clone();
        // NX with GET (Redis 7.0+): nil when this call stored it, else the stored value.
        let previous: Option<Vec<u8>> = redis::cmd("SET")
            .arg(&key)
            .arg(result)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(self.ttl.as_millis().max(1) as u64)
            .query_async(&mut connection)
            .await
            .map_err(|err| Error::redis(format!("committing the result {key}"), err))?;
        Ok(match previous {
            None => Committed::Stored,
            Some(existing) => Committed::Existing(existing),
        })
    }
}
