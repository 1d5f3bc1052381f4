//! Durable results by job id: how a handler makes its effect idempotent across redeliveries.
//!
//! Delivery is at least once: a job whose worker crashed after its effect
//! but before its acknowledgement runs again. A handler that commits its
//! result under the job id, and looks for one first, does the effect once.
//! [`RedisResults`] keeps results in Redis with `SET … NX GET`: one round
//! trip that stores the result unless one exists and returns the one that
//! does, so two deliveries racing each other agree on one result.
//!
//! With replicas, a result is durable only once a replica has it: a
//! promotion that does not wait for the replica to catch up forgets the
//! primary's last writes, and a job whose result was forgotten while its ack
//! reached the new primary would be done without its effect.
//! [`RedisResults::with_durability`] sends a `WAIT` in the same pipeline as
//! the `SET` and fails the commit ([`ResultError::NotReplicated`]) when too few
//! replicas acknowledge it, so the job is retried rather than acknowledged.
//!
//! On one server, commits made at the same time (the jobs of one read) go
//! in one pipeline (`batch`); on a Cluster each goes on its own.

mod batch;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::connect::Connection;

use crate::connect::Redis;
use crate::error::{Error, Result, ResultError};
use crate::producer::Durability;

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
/// On one server the first commit starts the store's batching task on the
/// current tokio runtime; clones share it, and it ends with the last clone.
/// Use a store (and its clones) within the runtime that first committed.
///
/// The ttl must outlast every redelivery of the job: at least the queue's
/// retention (`retention.min_age`, `QueueConfig::marker_ttl`), which also
/// bounds how long a dead letter can be replayed.
#[derive(Clone)]
pub struct RedisResults {
    connection: Connection,
    key_prefix: String,
    ttl: Duration,
    durability: Durability,
    /// Started at the first commit (it needs the runtime), shared by clones;
    /// `None` inside on a Cluster, where commits go one by one.
    batcher: Arc<OnceLock<Option<batch::Batcher>>>,
}

impl RedisResults {
    pub fn new(redis: &Redis, key_prefix: impl Into<String>, ttl: Duration) -> Self {
        RedisResults {
            connection: redis.shared(),
            key_prefix: key_prefix.into(),
            ttl,
            durability: Durability::PRIMARY_ONLY,
            batcher: Arc::default(),
        }
    }

    /// This store, each commit followed (in the same pipeline, so on the
    /// same connection and node) by `WAIT replicas timeout`; a commit that
    /// fewer replicas acknowledged fails with [`ResultError::NotReplicated`].
    /// Like a producer's [`Durability`], it says how many replicas hold the
    /// result, not that a failover cannot lose it. `WAIT` counts this
    /// connection's writes: a result found stored by another worker a
    /// moment ago may not be on a replica yet.
    pub fn with_durability(self, durability: Durability) -> Self {
        RedisResults {
            durability,
            // The batcher sends with the store's durability: a new one.
            batcher: Arc::default(),
            ..self
        }
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl.as_millis().max(1) as u64
    }

    /// The batcher, started on first use; `None` on a Cluster.
    fn batcher(&self) -> Option<&batch::Batcher> {
        self.batcher
            .get_or_init(|| {
                (!self.connection.is_cluster()).then(|| {
                    batch::Batcher::start(batch::Settings {
                        connection: self.connection.clone(),
                        ttl_ms: self.ttl_ms(),
                        durability: self.durability,
                    })
                })
            })
            .as_ref()
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
        if let Some(batcher) = self.batcher() {
            return batcher.commit(key, result).await;
        }
        let mut connection = self.connection.clone();
        // NX with GET (Redis 7.0+): nil when this call stored it, else the stored value.
        let mut set = redis::cmd("SET");
        set.arg(&key)
            .arg(result)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(self.ttl_ms());
        let context = || format!("committing the result {key}");
        let Durability { replicas, timeout } = self.durability;
        if replicas == 0 {
            let previous: Option<Vec<u8>> = set
                .query_async(&mut connection)
                .await
                .map_err(|err| Error::redis(context(), err))?;
            return Ok(committed(previous));
        }
        let (previous, acknowledged): (Option<Vec<u8>>, u32) = redis::pipe()
            .add_command(set)
            .cmd("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis().max(1) as u64)
            .query_async(&mut connection)
            .await
            .map_err(|err| Error::redis(context(), err))?;
        if acknowledged < replicas {
            return Err(Error::Results(ResultError::NotReplicated {
                key,
                replicas,
                acknowledged,
                timeout,
            }));
        }
        Ok(committed(previous))
    }
}

/// What a `SET … NX GET` reply says the commit found.
fn committed(previous: Option<Vec<u8>>) -> Committed {
    match previous {
        None => Committed::Stored,
        Some(existing) => Committed::Existing(existing),
    }
}
