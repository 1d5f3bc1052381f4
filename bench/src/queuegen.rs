//! queuegen's side: the generated `jobs` queue of tests/queues.yaml, its
//! `TestJob` envelope and the runtime's `Producer` and `Worker`, as an
//! application would run them.
//!
//! Settings are the generated `jobs::CONFIG` with `key_prefix` (a fresh one
//! per round), `partitions` and `concurrency` overridden. Publish:
//! `publish_many` in batches of `--batch` on one `Redis`. Process: `workers`
//! workers, each with its own `Redis` (as separate processes would have) and
//! its default recovery and scheduler loops, running a handler that calls
//! the probe and returns `Outcome::Done` — with the result store on, after
//! committing the job's result with `RedisResults` (`SET … NX GET PX`);
//! with PostgreSQL (`qg8p`), after `PgResults::begin` (the marker),
//! `INSERT INTO documents` through the job's transaction (a cached
//! prepared statement) and `commit`, each worker with its own `Postgres`
//! pool of `--pg-pool` connections, as a process would have.
//! With telemetry, each worker records its metrics into a registry of its
//! own (`Worker::metrics`), and the run checks that they counted every job.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use queuegen_runtime::config::{DedupConfig, EntryShape};
use queuegen_runtime::metrics::{prometheus_client, Registry};
use queuegen_runtime::postgres::{Begun, PgResults};
use queuegen_runtime::{
    JobContext, JobError, Lane, NewJob, Outcome, QueueConfig, RateLimit, Redis, RedisResults,
    Results, Worker,
};
use queuegen_tests::queues::envelopes::TestJob;
use queuegen_tests::queues::jobs;
use tokio::sync::watch;

use crate::baseline::{job, tenant};
use crate::probe::{self, join_all_within, Probe, RoundResult};
use crate::steady;
use crate::{Args, Feature, Queuegen, Sink};

/// The handler: no work, or (with the result store) one committed result
/// per job, as an idempotent handler would store its effect, or (with
/// PostgreSQL) one `documents` row committed with the job's marker. `jobs::Adapter`
/// cannot be built outside the generated module (`jobs::worker` takes no
/// config), so this implements the runtime's handler trait directly, which
/// is all the adapter forwards to.
pub struct Bench {
    pub probe: Arc<Probe>,
    pub results: Option<RedisResults>,
    pub documents: Option<Documents>,
}

/// qg8p's business change: the marker's transaction, and the insert.
pub struct Documents {
    results: PgResults,
    insert: String,
}

impl queuegen_runtime::Handler<TestJob> for Bench {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.probe
            .handler_started(ctx.stream_id(), Some(ctx.job_id()));
        if let Some(results) = &self.results {
            results
                .commit(ctx.queue(), ctx.job_id(), job.subject_ref.as_bytes())
                .await
                .map_err(JobError::transient)?;
        }
        if let Some(documents) = &self.documents {
            match documents.results.begin(ctx).await? {
                Begun::New(tx) => {
                    let insert = tx.prepare_cached(&documents.insert).await?;
                    let pages = job.pages.and_then(|pages| i32::try_from(pages).ok());
                    tx.execute(&insert, &[&ctx.job_id(), &job.subject_ref, &pages])
                        .await?;
                    tx.commit(b"").await?;
                }
                // A redelivery of a job already committed: nothing to repeat.
                Begun::Finished(_) => {}
            }
        }
        Ok(Outcome::Done)
    }
}

/// qg8l's rate limit: far above what 8 workers reach on any machine, so it
/// never holds a job back and the variant measures only what asking the
/// token bucket once per read round costs.
pub const LIMITER_RATE: RateLimit = RateLimit {
    limit: 10_000_000,
    per: Duration::from_secs(1),
};

/// qg8d's dedup window: every job_id of a round is new, so nothing is a
/// duplicate and the variant measures what the marker check costs.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(3600);

/// qg8n's lanes.
pub const TWO_LANES: &[Lane] = &[
    Lane {
        name: Cow::Borrowed("first"),
        weight: 1,
    },
    Lane {
        name: Cow::Borrowed("second"),
        weight: 1,
    },
];

/// The producer's connection to `url`, with the consumer groups of every
/// queue of `configs` created (the workers' start checks want them).
pub async fn producer_redis(url: &str, configs: &[QueueConfig]) -> Result<Redis> {
    let redis = Redis::connect(url)
        .await
        .context("connecting the producer")?;
    for config in configs {
        queuegen_runtime::admin::ensure_groups(&redis, config)
            .await
            .with_context(|| format!("creating the consumer groups of {}", config.queue))?;
    }
    Ok(redis)
}

pub async fn run(
    args: &Args,
    url: &str,
    prefix: &str,
    qg: Queuegen,
    sink: Sink<'_>,
) -> Result<RoundResult> {
    // Jobs are published to the lanes in turn.
    let lanes = if qg.feature == Feature::TwoLanes {
        TWO_LANES
    } else {
        &[]
    };
    let mut config = QueueConfig {
        key_prefix: Cow::Owned(prefix.to_owned()),
        partitions: args.partitions,
        dedup: (qg.feature == Feature::Dedup).then_some(DedupConfig {
            window: DEDUP_WINDOW,
        }),
        lanes: Cow::Borrowed(lanes),
        ..jobs::CONFIG
    };
    config.handler.concurrency = args.concurrency;
    config.handler.rate = (qg.feature == Feature::RateLimit).then_some(LIMITER_RATE);
    config.retention.delete_on_ack = qg.feature == Feature::DeleteOnAck;
    if qg.feature == Feature::Fields {
        config.payload.shape = EntryShape::Fields;
    }
    let redis = producer_redis(url, std::slice::from_ref(&config)).await?;
    let producer = queuegen_runtime::Producer::<TestJob>::new(&redis, config.clone());
    let probe = Arc::new(Probe::new(args.jobs, args.rate.is_some()));
    let mut worker_redis = Vec::with_capacity(qg.workers);
    let mut worker_pg = Vec::with_capacity(qg.workers);
    for _ in 0..qg.workers {
        worker_redis.push(Redis::connect(url).await.context("connecting a worker")?);
        if let Sink::Postgres(round) = sink {
            let pg = round
                .postgres(args.pg_pool)
                .await
                .context("opening a worker's PostgreSQL pool")?;
            let results = PgResults::start(&pg, &config).await;
            worker_pg.push(results.context("PgResults::start")?);
        }
    }

    let (stop, stopped) = watch::channel(false);
    let mut registries = Vec::new();
    let start = || {
        let mut running = Vec::with_capacity(qg.workers);
        for (n, redis) in worker_redis.iter().enumerate() {
            let handler = Bench {
                probe: probe.clone(),
                results: matches!(sink, Sink::Redis)
                    .then(|| RedisResults::new(redis, prefix, config.retention.marker_ttl)),
                documents: match sink {
                    Sink::Postgres(round) => Some(Documents {
                        results: worker_pg[n].clone(),
                        insert: round.documents_insert(),
                    }),
                    _ => None,
                },
            };
            let mut worker =
                Worker::new(redis, config.clone(), handler).consumer_name(format!("{prefix}-w{n}"));
            if qg.telemetry {
                let mut registry = Registry::default();
                worker = worker.metrics(&mut registry);
                registries.push(registry);
            }
            let mut stopped = stopped.clone();
            running.push(tokio::spawn(worker.run_until(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })));
        }
        running
    };

    let mut conn = redis.shared();
    let keys = config.ready_keys();
    let (timeline, running) = probe::run_phases(
        args,
        &mut conn,
        &probe,
        &keys,
        &config.group,
        start,
        |range, schedule| {
            let batch = range.map(move |n| {
                let job = NewJob::new(steady::job_id(n, schedule.as_ref()), tenant(n), job(n));
                match lanes {
                    [] => job,
                    lanes => job.in_lane(lanes[n as usize % lanes.len()].name.clone()),
                }
            });
            let producer = &producer;
            async move {
                producer.publish_many(batch).await.context("publish_many")?;
                Ok(())
            }
        },
    )
    .await?;
    let _ = stop.send(true);
    let budget = config.handler.shutdown_budget + args.timeout();
    let reports = join_all_within(running, budget, "a worker", "shut down").await?;
    let done = reports.iter().map(|report| report.done).sum();
    let timeline = timeline?;
    if done < args.jobs {
        bail!("the workers reported {done} jobs done of {}", args.jobs);
    }
    if qg.telemetry {
        let counted = counted_done(&registries)?;
        if counted != done as f64 {
            bail!("the workers' metrics counted {counted} jobs done, their reports {done}");
        }
    }
    if qg.feature == Feature::DeleteOnAck {
        // Which path the workers took, and what it left: the server decides.
        let path = queuegen_runtime::worker::ack_path(&redis, &config).await;
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("XLEN").arg(key);
        }
        let lengths: Vec<u64> = pipe.query_async(&mut conn).await.context("XLEN")?;
        eprintln!(
            "queuegen-bench: delete on ack: workers acknowledged with {}; {} of {} entries left in the ready streams",
            path.command(),
            lengths.iter().sum::<u64>(),
            args.jobs
        );
    }
    RoundResult::new(&probe, timeline, Some(done))
}

/// `queuegen_jobs_total{outcome="done"}` summed over every worker's registry.
fn counted_done(registries: &[Registry]) -> Result<f64> {
    let mut total = 0.0;
    for registry in registries {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
            .context("encoding a worker's metrics")?;
        let exposition = queuegen_tests::exposition::parse(&text)
            .map_err(|err| anyhow::anyhow!("a worker's metrics do not parse: {err}"))?;
        total += exposition.sum("queuegen_jobs_total", &[("outcome", "done")]);
    }
    Ok(total)
}
