//! A suite worker's whole description (queue, settings, login, hold), the same in a worker process and in the scenario that starts it.
//!
//! Scenarios start workers in two ways: in their own process (a
//! [`RunningWorker`], stopped politely) and as `suite-worker` processes
//! (killed with SIGKILL, stopped with SIGTERM). A process gets its
//! [`WorkerSpec`] as JSON in [`SPEC_ENV`], so both kinds build the very same
//! queue settings and handler from one value.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use queuegen_runtime::{Jitter, QueueConfig, Redis, Worker, WorkerReport};

use super::handler::{Hold, LedgerHandler};
use super::ledger::Ledger;
use crate::fixtures::{owned, retrying_config, test_config};

/// The environment variable carrying a worker process's spec as JSON.
pub const SPEC_ENV: &str = "QG_WORKER_SPEC";

/// Which generated queue of tests/queues.yaml a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueKind {
    /// `jobs`: slow claims, for scenarios that do not recover.
    Jobs,
    /// `crashy`: handler timeout 1s, claim after 2s.
    Crashy,
    /// `retrying`: short retry, poison and claim timings.
    Retrying,
}

/// Settings a scenario changes from the generated queue's, each `None` to keep it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    pub partitions: Option<u16>,
    pub group: Option<String>,
    pub concurrency: Option<usize>,
    pub handler_timeout_ms: Option<u64>,
    pub shutdown_budget_ms: Option<u64>,
    pub claim_min_idle_ms: Option<u64>,
    pub claim_every_ms: Option<u64>,
    pub claim_batch: Option<usize>,
    pub claim_rate: Option<u32>,
    pub retry_initial_ms: Option<u64>,
    /// Backoff without jitter: every retry of a batch comes due together.
    pub retry_without_jitter: bool,
    pub retry_promote_every_ms: Option<u64>,
    pub retry_promote_batch: Option<usize>,
    pub poison_max_deliveries: Option<u32>,
    pub retention_min_age_ms: Option<u64>,
    pub trim_every_ms: Option<u64>,
    /// `handler.rate`: `limit` jobs per `per_ms`, shared by every worker.
    #[serde(default)]
    pub rate: Option<(u32, u64)>,
}

/// Everything a worker of a scenario is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// How it connects (and as whom).
    pub url: String,
    pub queue: QueueKind,
    pub key_prefix: String,
    pub tuning: Tuning,
    /// Its consumer name in the group.
    pub consumer: String,
    pub hold: Hold,
    /// Replicas each job's result must reach before the handler calls it
    /// durable ([`Ledger::waiting_for`]); 0: the primary's word is enough.
    #[serde(default)]
    pub effect_replicas: u32,
}

impl WorkerSpec {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_suite-worker")`, which only an
    /// integration test can name) as a worker process for this spec that
    /// logs warnings only, writes nothing on stdout, has no failpoint and is
    /// killed when dropped: for tests that only need workers running.
    pub fn spawn_quiet(&self, binary: &str) -> tokio::process::Child {
        tokio::process::Command::new(binary)
            .env(SPEC_ENV, self.to_json())
            .env_remove(queuegen_runtime::failpoint::ENV)
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawning suite-worker")
    }

    /// The queue settings: the generated queue's, under `key_prefix`, tuned.
    pub fn config(&self) -> QueueConfig {
        let base = match self.queue {
            QueueKind::Jobs => {
                test_config(&self.key_prefix, crate::queues::jobs::CONFIG.partitions)
            }
            QueueKind::Crashy => QueueConfig {
                key_prefix: owned(&self.key_prefix),
                ..crate::queues::crashy::CONFIG
            },
            QueueKind::Retrying => retrying_config(&self.key_prefix),
        };
        let t = &self.tuning;
        let ms = Duration::from_millis;
        let mut config = base;
        config.partitions = t.partitions.unwrap_or(config.partitions);
        if let Some(group) = &t.group {
            config.group = owned(group);
        }
        let handler = &mut config.handler;
        handler.concurrency = t.concurrency.unwrap_or(handler.concurrency);
        handler.timeout = t.handler_timeout_ms.map_or(handler.timeout, ms);
        handler.shutdown_budget = t.shutdown_budget_ms.map_or(handler.shutdown_budget, ms);
        if let Some((limit, per_ms)) = t.rate {
            handler.rate = Some(queuegen_runtime::RateLimit {
                limit,
                per: ms(per_ms),
            });
        }
        let claim = &mut config.claim;
        claim.min_idle = t.claim_min_idle_ms.map_or(claim.min_idle, ms);
        claim.every = t.claim_every_ms.map_or(claim.every, ms);
        claim.batch = t.claim_batch.unwrap_or(claim.batch);
        claim.rate = t.claim_rate.unwrap_or(claim.rate);
        let retry = &mut config.retry;
        retry.backoff.initial = t.retry_initial_ms.map_or(retry.backoff.initial, ms);
        if t.retry_without_jitter {
            retry.backoff.jitter = Jitter::None;
        }
        retry.promote_every = t.retry_promote_every_ms.map_or(retry.promote_every, ms);
        retry.promote_batch = t.retry_promote_batch.unwrap_or(retry.promote_batch);
        config.poison.max_deliveries = t
            .poison_max_deliveries
            .unwrap_or(config.poison.max_deliveries);
        let retention = &mut config.retention;
        retention.min_age = t.retention_min_age_ms.map_or(retention.min_age, ms);
        retention.trim_every = t.trim_every_ms.map_or(retention.trim_every, ms);
        config
    }

    /// The ledger scope of this worker's jobs: one per queue and group, so
    /// that each group of a stream records its own effects.
    pub fn ledger_scope(&self) -> String {
        let config = self.config();
        format!("{}/{}", config.queue, config.group)
    }

    /// The ledger this worker records into, over `redis`.
    pub fn ledger(&self, redis: &Redis) -> Ledger {
        Ledger::new(redis, &self.key_prefix, &self.ledger_scope()).waiting_for(self.effect_replicas)
    }

    /// The same worker under another consumer name, holding nothing.
    pub fn named(&self, consumer: impl Into<String>) -> WorkerSpec {
        WorkerSpec {
            consumer: consumer.into(),
            hold: Hold::Never,
            ..self.clone()
        }
    }

    /// This worker, built on `redis` (which must log in as `url` does).
    pub fn worker(&self, redis: &Redis) -> Worker<crate::fixtures::TestJob, LedgerHandler> {
        let handler = LedgerHandler::new(self.ledger(redis), self.hold);
        Worker::new(redis, self.config(), handler).consumer_name(&self.consumer)
    }

    /// Starts this worker in the current process, on its own connections.
    pub async fn start(&self) -> queuegen_runtime::Result<RunningWorker> {
        let redis = Redis::connect(&self.url).await?;
        Ok(RunningWorker::spawn(self.worker(&redis)))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a worker spec serializes")
    }

    /// The spec in [`SPEC_ENV`].
    pub fn from_env() -> Result<WorkerSpec, String> {
        let json = std::env::var(SPEC_ENV).map_err(|_| format!("{SPEC_ENV} is not set"))?;
        serde_json::from_str(&json).map_err(|err| format!("{SPEC_ENV}: {err}"))
    }
}

/// A worker running in this process until [`RunningWorker::stop`].
pub struct RunningWorker {
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<queuegen_runtime::Result<WorkerReport>>,
}

impl RunningWorker {
    /// Runs `worker` on a task of its own until [`RunningWorker::stop`].
    pub fn spawn(worker: Worker<crate::fixtures::TestJob, LedgerHandler>) -> RunningWorker {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        }));
        RunningWorker { stop, running }
    }

    /// Whether it stopped by itself (an error, or a panic).
    pub fn has_ended(&self) -> bool {
        self.running.is_finished()
    }

    /// Shuts it down (within its budget) and returns its report.
    pub async fn stop(self) -> queuegen_runtime::Result<WorkerReport> {
        let _ = self.stop.send(());
        match self.running.await {
            Ok(ended) => ended,
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic())
            }
            Err(join_error) => panic!("the worker task was cancelled: {join_error}"),
        }
    }
}
