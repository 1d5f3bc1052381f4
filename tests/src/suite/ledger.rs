//! The durable-effect ledger: each job's effect recorded once by job_id in Redis, every delivery and every repeated application counted.
//!
//! A handler built on it does what the delivery contract asks of every
//! handler: look the job's result up first ([`RedisResults::find`]) and only
//! if there is none apply the effect ([`RedisResults::commit`], `SET NX`).
//! The ledger lives in the Redis the queue runs on, so it outlives every
//! worker process a scenario kills, and a scenario reads it back
//! ([`Ledger::tally`]) to count exactly:
//! - **done**: jobs whose result is stored;
//! - **deliveries**: every run of the handler on the job;
//! - **absorbed**: redeliveries that found the result first and did nothing,
//!   which is how at-least-once delivery is meant to end;
//! - **duplicate effects**: applications that found the result already
//!   stored by the same publish of the job (the same trace): one entry run
//!   twice at once, or a timed-out write of an earlier delivery landing
//!   late. The store keeps one result, but the effect ran twice, and a
//!   handler whose effect is not a single idempotent write would have done
//!   it twice: the runtime must never cause one;
//! - **raced publishes**: applications that found the result stored by
//!   another publish of the same job_id (a producer that published again
//!   after a timeout), both entries worked at once. Nothing in the runtime
//!   deduplicates publishes; the job_id and the store's `SET NX` absorb
//!   them, as the delivery contract says they must.
//!
//! On a deployment with replicas a result is durable only once a replica
//! has it: a promotion that does not wait for the replica to catch up loses
//! the primary's last writes, and a result lost that way while the job's ack
//! reaches the new primary leaves the job acknowledged with no effect. A
//! ledger made [`Ledger::waiting_for`] replicas commits each result through
//! [`RedisResults::with_durability`], which fails the delivery (a retry,
//! which finds the result or applies it again) when fewer acknowledge: the
//! handler's own choice of durability, as a producer's `Durability` is the
//! publisher's.
//!
//! The stored result names its publish (the job's trace_id, new for every
//! publish) and its delivery (consumer and stream ID), which is how the two
//! kinds of repeated application are told apart. Counters are hashes by
//! job_id and every command touches one key, so the ledger works unchanged
//! on a Cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use queuegen_runtime::{Committed, Durability, Redis, RedisResults, Results};

/// How long results are kept: longer than any scenario runs.
const RESULT_TTL: Duration = Duration::from_secs(3600);
/// How long a commit waits for its replicas before the delivery fails.
const REPLICA_WAIT: Duration = Duration::from_secs(2);
/// How long a counter update keeps being retried while Redis does not answer
/// (a scenario pauses it): a count must not be lost to a pause.
const RECORD_PATIENCE: Duration = Duration::from_secs(60);

/// What one application of a job's effect found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// This delivery applied the effect.
    Applied,
    /// The result was already there when this delivery looked: nothing done.
    Absorbed,
    /// The same publish's result appeared between this delivery's look and
    /// its commit: the effect ran a second time (the store kept the first).
    Duplicate,
    /// Another publish of the job stored its result between this delivery's
    /// look and its commit (the store kept that one).
    Raced,
}

/// The counters a ledger keeps, one hash each, by job_id.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Deliveries,
    Applied,
    Absorbed,
    Duplicates,
    Raced,
}

impl Counter {
    const ALL: [Counter; 5] = [
        Counter::Deliveries,
        Counter::Applied,
        Counter::Absorbed,
        Counter::Duplicates,
        Counter::Raced,
    ];

    fn name(self) -> &'static str {
        match self {
            Counter::Deliveries => "deliveries",
            Counter::Applied => "applied",
            Counter::Absorbed => "absorbed",
            Counter::Duplicates => "duplicates",
            Counter::Raced => "raced",
        }
    }
}

/// The ledger of one scope (a queue and group) under a key prefix.
#[derive(Clone)]
pub struct Ledger {
    redis: Redis,
    results: RedisResults,
    scope: String,
    key_prefix: String,
}

impl Ledger {
    /// The ledger of `scope` (e.g. `jobs/workers`) with keys under `{key_prefix}:ledger:`.
    pub fn new(redis: &Redis, key_prefix: &str, scope: &str) -> Ledger {
        let key_prefix = format!("{key_prefix}:ledger");
        Ledger {
            redis: redis.clone(),
            results: RedisResults::new(redis, key_prefix.clone(), RESULT_TTL),
            scope: scope.to_owned(),
            key_prefix,
        }
    }

    /// This ledger, each result committed only once `replicas` replicas
    /// acknowledged it (`WAIT`, up to 2 s); with fewer, `apply` fails.
    pub fn waiting_for(self, replicas: u32) -> Ledger {
        let durability = Durability {
            replicas,
            timeout: REPLICA_WAIT,
        };
        Ledger {
            results: self.results.clone().with_durability(durability),
            ..self
        }
    }

    fn counter_key(&self, counter: Counter) -> String {
        format!("{}:{}:{}", self.key_prefix, self.scope, counter.name())
    }

    /// Counts one delivery (one handler run) of `job_id`; how many so far.
    pub async fn delivered(&self, job_id: &str) -> redis::RedisResult<u64> {
        self.count(Counter::Deliveries, job_id).await
    }

    /// Applies the job's effect unless its result is stored already, and
    /// counts what happened. `publish` names the publish this delivery
    /// carries (its trace_id), `delivery` the delivery itself.
    pub async fn apply(
        &self,
        job_id: &str,
        publish: &str,
        delivery: &str,
    ) -> queuegen_runtime::Result<Effect> {
        if self.results.find(&self.scope, job_id).await?.is_some() {
            self.record(Counter::Absorbed, job_id).await?;
            return Ok(Effect::Absorbed);
        }
        let record = format!("{publish} {delivery}");
        let (effect, counter) = match self
            .results
            .commit(&self.scope, job_id, record.as_bytes())
            .await?
        {
            Committed::Stored => (Effect::Applied, Counter::Applied),
            Committed::Existing(stored) if stored.starts_with(format!("{publish} ").as_bytes()) => {
                (Effect::Duplicate, Counter::Duplicates)
            }
            Committed::Existing(_) => (Effect::Raced, Counter::Raced),
        };
        self.record(counter, job_id).await?;
        Ok(effect)
    }

    async fn count(&self, counter: Counter, job_id: &str) -> redis::RedisResult<u64> {
        redis::cmd("HINCRBY")
            .arg(self.counter_key(counter))
            .arg(job_id)
            .arg(1)
            .query_async(&mut self.redis.shared())
            .await
    }

    /// Counts an application, retrying while Redis does not answer: the
    /// effect happened, so its count must not be lost. A retried `HINCRBY`
    /// whose first try was applied late counts twice, which can only make a
    /// scenario fail, never hide a duplicate.
    async fn record(&self, counter: Counter, job_id: &str) -> queuegen_runtime::Result<()> {
        let deadline = tokio::time::Instant::now() + RECORD_PATIENCE;
        loop {
            match self.count(counter, job_id).await {
                Ok(_) => return Ok(()),
                Err(err) if tokio::time::Instant::now() >= deadline => {
                    return Err(queuegen_runtime::Error::redis(
                        format!("ledger: counting {} of {job_id}", counter.name()),
                        err,
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// What the ledger holds for each of `job_ids`. Results are read before
    /// the counters: a job's delivery is counted before its result is
    /// stored, so every job read as done has its deliveries counted too.
    pub async fn tally<'a>(
        &self,
        job_ids: impl IntoIterator<Item = &'a str>,
    ) -> queuegen_runtime::Result<Tally> {
        let mut done = Vec::new();
        for job_id in job_ids {
            let result = self.results.find(&self.scope, job_id).await?;
            done.push((job_id, result.is_some()));
        }
        let mut conn = self.redis.shared();
        let mut counts: Vec<BTreeMap<String, u64>> = Vec::new();
        for counter in Counter::ALL {
            let key = self.counter_key(counter);
            let count = redis::cmd("HGETALL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(|err| queuegen_runtime::Error::redis(format!("HGETALL {key}"), err))?;
            counts.push(count);
        }
        let jobs = done
            .into_iter()
            .map(|(job_id, done)| {
                let of =
                    |counter: Counter| counts[counter as usize].get(job_id).copied().unwrap_or(0);
                let tally = JobTally {
                    done,
                    deliveries: of(Counter::Deliveries),
                    applied: of(Counter::Applied),
                    absorbed: of(Counter::Absorbed),
                    duplicates: of(Counter::Duplicates),
                    raced: of(Counter::Raced),
                };
                (job_id.to_owned(), tally)
            })
            .collect();
        Ok(Tally { jobs })
    }
}

/// The ledger's record of one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobTally {
    /// Its result is stored.
    pub done: bool,
    pub deliveries: u64,
    pub applied: u64,
    pub absorbed: u64,
    pub duplicates: u64,
    pub raced: u64,
}

/// The ledger's record of the jobs a scenario asked about, by job_id.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub jobs: BTreeMap<String, JobTally>,
}

impl Tally {
    pub fn job(&self, job_id: &str) -> JobTally {
        self.jobs.get(job_id).copied().unwrap_or_default()
    }

    /// Every duplicate application, over all jobs.
    pub fn duplicates(&self) -> u64 {
        self.jobs.values().map(|job| job.duplicates).sum()
    }

    /// Every redelivery that found its result first.
    pub fn absorbed(&self) -> u64 {
        self.jobs.values().map(|job| job.absorbed).sum()
    }

    /// Every application that raced another publish of its job.
    pub fn raced(&self) -> u64 {
        self.jobs.values().map(|job| job.raced).sum()
    }

    pub fn deliveries(&self) -> u64 {
        self.jobs.values().map(|job| job.deliveries).sum()
    }

    pub fn done(&self) -> u64 {
        self.jobs.values().filter(|job| job.done).count() as u64
    }
}
