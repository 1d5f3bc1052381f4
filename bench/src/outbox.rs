//! Outbox mode (`--outbox`): how fast `OutboxPublisher`s move committed
//! outbox rows to the streams, and how long a committed row waits for its
//! `XADD`.
//!
//! The queue is the tests' `jobs` queue with `--partitions` partitions and
//! a fresh key prefix; the rows are `PgOutbox::<TestJob>::enqueue`d jobs
//! (the envelope the producer would write) in a fresh schema per phase and
//! round. Each publisher has its own `Postgres` pool and its own `Redis`,
//! as a pod would, and runs `run_until` with `--outbox-batch` and
//! `--idle-poll`.
//!
//! - Throughput: `--jobs` rows are committed first (transactions of 100
//!   rows, on 4 connections), then 1 (or 2) publishers start; the time runs
//!   from their start until every row is marked dispatched (the streams
//!   hold every row, then no row is left undispatched). Rows/s dispatched =
//!   rows ÷ that time.
//! - Lag: the publishers run first; rows are then enqueued open-loop at
//!   `--rate` rows/s for `--seconds`, one row per transaction (spawned on
//!   schedule, on a pool of 16 connections), each row's commit time taken
//!   right after `commit()` returned (wall clock, ms since the epoch). Once
//!   every row is dispatched, the `stream_id` the publisher recorded for it
//!   (the `XADD` reply: Redis's clock in its ms part) minus the commit time
//!   is its lag. Same host, so one clock; both in whole ms, so a lag is
//!   exact to ±1 ms and can read -1.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::future::try_join_all;
use queuegen_runtime::host::now_ms;
use queuegen_runtime::postgres::{OutboxPublisher, PgOutbox, PublisherReport};
use queuegen_runtime::{NewJob, QueueConfig, Redis};
use queuegen_tests::queues::envelopes::TestJob;
use queuegen_tests::queues::jobs;
use redis::AsyncCommands;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::baseline::{job, tenant};
use crate::pg::{self, PgRound, ServerInfo};
use crate::probe::join_all_within;
use crate::steady::{self, Schedule};
use crate::{report, stats, Args};

/// The publisher counts each phase runs, in order.
pub const PUBLISHERS: [usize; 2] = [1, 2];
/// Each publisher's pool: it holds one connection at a time.
const PUBLISHER_POOL: usize = 2;
/// Rows per transaction of the throughput phase's backlog.
const BACKLOG_TRANSACTION: u64 = 100;
/// Connections enqueuing the backlog.
const BACKLOG_ENQUEUERS: usize = 4;
/// Connections enqueuing the lag phase's one-row transactions.
const LAG_ENQUEUERS: usize = 16;
/// How often the waiter looks at the streams and the outbox.
const POLL: Duration = Duration::from_millis(1);

/// One throughput run: a backlog of `rows` dispatched by `publishers`.
pub struct Throughput {
    pub round: u32,
    pub publishers: usize,
    pub rows: u64,
    /// Committing the backlog (before the publishers start; not measured).
    pub enqueue_secs: f64,
    /// The publishers' start → every row marked dispatched.
    pub dispatch_secs: f64,
    pub reports: Vec<PublisherReport>,
}

impl Throughput {
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.dispatch_secs
    }
}

/// One lag run: rows enqueued at a steady rate while `publishers` run.
pub struct Lag {
    pub round: u32,
    pub publishers: usize,
    pub rows: u64,
    /// First scheduled row → last commit returned.
    pub enqueue_secs: f64,
    /// XADD ms − commit ms, per row, sorted.
    pub lags_ms: Vec<i64>,
    pub reports: Vec<PublisherReport>,
}

impl Lag {
    pub fn enqueue_rate(&self) -> f64 {
        self.rows as f64 / self.enqueue_secs
    }
}

pub struct OutboxResults {
    pub throughput: Vec<Throughput>,
    pub lag: Vec<Lag>,
}

pub async fn run(args: &Args, url: &str, redis: &Redis, pg_url: &str) -> Result<OutboxResults> {
    let mut results = OutboxResults {
        throughput: Vec::new(),
        lag: Vec::new(),
    };
    for round in 0..args.rounds {
        for publishers in PUBLISHERS {
            let name = format!("outbox{publishers}");
            let (config, pg) = fresh(args, pg_url, round, &name).await?;
            let outcome = throughput(args, url, redis, &pg, &config, round, publishers).await;
            let cleaned = clean_up(redis, &config.key_prefix, &pg).await;
            let result = outcome.with_context(|| {
                format!("round {round}, outbox throughput, {publishers} publisher(s)")
            })?;
            cleaned?;
            eprintln!(
                "round {round}: outbox throughput, {publishers} publisher(s): {:>9.0} rows/s dispatched \
                 ({} rows in {:.2} s; backlog committed in {:.2} s)",
                result.rows_per_sec(),
                result.rows,
                result.dispatch_secs,
                result.enqueue_secs
            );
            results.throughput.push(result);
        }
        for publishers in PUBLISHERS {
            let name = format!("outboxlag{publishers}");
            let (config, pg) = fresh(args, pg_url, round, &name).await?;
            let outcome = lag(args, url, redis, &pg, &config, round, publishers).await;
            let cleaned = clean_up(redis, &config.key_prefix, &pg).await;
            let result = outcome
                .with_context(|| format!("round {round}, outbox lag, {publishers} publisher(s)"))?;
            cleaned?;
            eprintln!(
                "round {round}: outbox lag, {publishers} publisher(s): p50 {} ms  p99 {} ms  max {} ms \
                 ({} rows at {:.0} rows/s)",
                percentile(&result.lags_ms, 50.0),
                percentile(&result.lags_ms, 99.0),
                percentile(&result.lags_ms, 100.0),
                result.rows,
                result.enqueue_rate()
            );
            results.lag.push(result);
        }
    }
    Ok(results)
}

/// A fresh key prefix and schema for one phase of one round: the `jobs`
/// queue's settings under that prefix, with `--partitions`, and the schema.
async fn fresh(
    args: &Args,
    pg_url: &str,
    round: u32,
    name: &str,
) -> Result<(QueueConfig, PgRound)> {
    let config = QueueConfig {
        key_prefix: format!("qgbench{}r{round}{name}", std::process::id()).into(),
        partitions: args.partitions,
        ..jobs::CONFIG
    };
    let schema = pg::schema_name(round, name);
    let pg = PgRound::create(pg_url, &schema)
        .await
        .with_context(|| format!("creating schema {schema}"))?;
    Ok((config, pg))
}

/// Deletes the phase's keys and drops its schema, whatever the phase returned.
async fn clean_up(redis: &Redis, prefix: &str, pg: &PgRound) -> Result<()> {
    let cleaned = report::delete_prefix(redis, prefix).await;
    let dropped = pg.drop_schema().await;
    cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
    dropped
}

fn new_job(name: &str, n: u64) -> NewJob<TestJob> {
    NewJob::new(format!("{name}-{n}"), tenant(n), job(n))
}

/// Starts `count` publishers, each with its own pool and Redis connection,
/// once all are connected (returned: that moment); they run until
/// [`Running::stop`].
async fn start_publishers(
    args: &Args,
    url: &str,
    pg: &PgRound,
    config: &QueueConfig,
    count: usize,
) -> Result<(Instant, Running)> {
    let mut ready = Vec::with_capacity(count);
    for _ in 0..count {
        let postgres = pg.postgres(PUBLISHER_POOL).await?;
        let redis = Redis::connect(url)
            .await
            .context("connecting a publisher")?;
        let publisher = OutboxPublisher::new(&postgres, &redis, std::slice::from_ref(config))
            .batch(args.outbox_batch)
            .idle_poll(Duration::from_millis(args.idle_poll));
        ready.push((publisher, redis, postgres));
    }
    let started = Instant::now();
    let (stop, stopped) = watch::channel(false);
    let tasks = ready
        .into_iter()
        .map(|(publisher, redis, postgres)| {
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let report = publisher
                    .run_until(async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    })
                    .await;
                // Its connections live as long as its task.
                drop((redis, postgres));
                report
            })
        })
        .collect();
    Ok((started, Running { stop, tasks }))
}

struct Running {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<queuegen_runtime::Result<PublisherReport>>>,
}

impl Running {
    async fn stop(self, timeout: Duration) -> Result<Vec<PublisherReport>> {
        let _ = self.stop.send(true);
        join_all_within(self.tasks, timeout, "a publisher", "stop").await
    }
}

/// Polls until the streams hold `rows` entries and no outbox row is left
/// undispatched; returns the moment that was first seen.
async fn wait_dispatched(
    redis: &Redis,
    pg: &PgRound,
    config: &QueueConfig,
    rows: u64,
    timeout: Duration,
) -> Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        let entries = stream_entries(redis, config).await?;
        if entries >= rows {
            break;
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?}: {entries} of {rows} rows in the streams (raise --timeout)");
        }
        tokio::time::sleep(POLL).await;
    }
    let undispatched = format!(
        "SELECT count(*) FROM {}.outbox WHERE dispatched_at IS NULL",
        pg.schema
    );
    loop {
        let left = pg.number(&undispatched).await?;
        if left == 0 {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {timeout:?}: {left} rows in the streams but not marked dispatched"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The entries of the queue's ready streams, summed.
async fn stream_entries(redis: &Redis, config: &QueueConfig) -> Result<u64> {
    let mut conn = redis.shared();
    let mut entries = 0;
    for key in config.ready_keys() {
        entries += conn.xlen::<_, u64>(&key).await.context("XLEN")?;
    }
    Ok(entries)
}

/// Every row in the streams exactly once: as many entries as rows.
async fn check_streams(redis: &Redis, config: &QueueConfig, rows: u64) -> Result<()> {
    let entries = stream_entries(redis, config).await?;
    if entries != rows {
        bail!("the streams hold {entries} entries for {rows} outbox rows");
    }
    Ok(())
}

async fn throughput(
    args: &Args,
    url: &str,
    redis: &Redis,
    pg: &PgRound,
    config: &QueueConfig,
    round: u32,
    publishers: usize,
) -> Result<Throughput> {
    let rows = args.jobs;
    // The backlog: transactions of BACKLOG_TRANSACTION rows, each
    // transaction's inserts pipelined, on BACKLOG_ENQUEUERS connections.
    let enqueuers = pg.postgres(BACKLOG_ENQUEUERS).await?;
    let outbox = PgOutbox::<TestJob>::new(&enqueuers, config.clone());
    let transactions: Vec<std::ops::Range<u64>> = (0..rows)
        .step_by(BACKLOG_TRANSACTION as usize)
        .map(|start| start..(start + BACKLOG_TRANSACTION).min(rows))
        .collect();
    let enqueue_start = Instant::now();
    try_join_all((0..BACKLOG_ENQUEUERS).map(|e| {
        let (enqueuers, outbox, transactions) = (&enqueuers, &outbox, &transactions);
        async move {
            for range in transactions.iter().skip(e).step_by(BACKLOG_ENQUEUERS) {
                let mut client = enqueuers.pool().get().await.context("an enqueuer")?;
                let tx = client.transaction().await.context("BEGIN")?;
                try_join_all(
                    range
                        .clone()
                        .map(|n| outbox.enqueue(&tx, new_job("job", n))),
                )
                .await
                .context("PgOutbox::enqueue")?;
                tx.commit().await.context("COMMIT")?;
            }
            Ok::<(), anyhow::Error>(())
        }
    }))
    .await?;
    let enqueue_secs = enqueue_start.elapsed().as_secs_f64();
    drop(enqueuers);

    let (start, running) = start_publishers(args, url, pg, config, publishers).await?;
    let dispatched = wait_dispatched(redis, pg, config, rows, args.timeout()).await;
    let reports = running.stop(args.timeout()).await?;
    let dispatched = dispatched?;
    check_reports(&reports, rows)?;
    check_streams(redis, config, rows).await?;
    Ok(Throughput {
        round,
        publishers,
        rows,
        enqueue_secs,
        dispatch_secs: (dispatched - start).as_secs_f64(),
        reports,
    })
}

/// The publishers dispatched every row once between them, and no round failed.
fn check_reports(reports: &[PublisherReport], rows: u64) -> Result<()> {
    let dispatched: u64 = reports.iter().map(|r| r.dispatched).sum();
    let failed: u64 = reports.iter().map(|r| r.failed_rounds).sum();
    if dispatched != rows || failed != 0 {
        bail!(
            "the publishers report {dispatched} rows dispatched of {rows}, {failed} failed rounds"
        );
    }
    Ok(())
}

async fn lag(
    args: &Args,
    url: &str,
    redis: &Redis,
    pg: &PgRound,
    config: &QueueConfig,
    round: u32,
    publishers: usize,
) -> Result<Lag> {
    let rate = args.rate.context("--outbox sets a --rate")?;
    let seconds = args.seconds.context("--outbox sets --seconds")?;
    let rows = (rate * seconds).round().max(1.0) as u64;
    let enqueuers = pg.postgres(LAG_ENQUEUERS).await?;
    let outbox = PgOutbox::<TestJob>::new(&enqueuers, config.clone());
    let (_, running) = start_publishers(args, url, pg, config, publishers).await?;
    // Past the publishers' first (empty) rounds: they are polling now.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let committed_ms: Arc<Vec<AtomicU64>> =
        Arc::new((0..rows).map(|_| AtomicU64::new(0)).collect());
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(rows as usize);
    // Every row due goes at once: a spawned task each.
    steady::publish(&Schedule::start(rate), rows, rows as usize, |due| {
        for n in due {
            let pool = enqueuers.pool().clone();
            let outbox = outbox.clone();
            let committed_ms = committed_ms.clone();
            tasks.push(tokio::spawn(async move {
                let mut client = pool.get().await.context("an enqueuer")?;
                let tx = client.transaction().await.context("BEGIN")?;
                outbox
                    .enqueue(&tx, new_job("lag", n))
                    .await
                    .context("PgOutbox::enqueue")?;
                tx.commit().await.context("COMMIT")?;
                committed_ms[n as usize].store(now_ms(), Ordering::Relaxed);
                Ok::<(), anyhow::Error>(())
            }));
        }
        async { Ok(()) }
    })
    .await?;
    let mut failed = None;
    for task in tasks {
        let outcome = tokio::time::timeout(args.timeout(), task)
            .await
            .context("timed out enqueuing (raise --timeout)")
            .and_then(|joined| joined.context("an enqueuer panicked")?);
        if let Err(err) = outcome {
            failed.get_or_insert(err);
        }
    }
    let enqueue_secs = start.elapsed().as_secs_f64();
    let dispatched = match failed {
        Some(err) => Err(err),
        None => wait_dispatched(redis, pg, config, rows, args.timeout()).await,
    };
    let reports = running.stop(args.timeout()).await?;
    dispatched?;
    check_reports(&reports, rows)?;
    check_streams(redis, config, rows).await?;

    let select = format!("SELECT job_id, stream_id FROM {}.outbox", pg.schema);
    let sent = pg.admin.query(&select, &[]).await;
    let sent = sent.context("reading the dispatched rows' stream IDs")?;
    let mut lags_ms = Vec::with_capacity(sent.len());
    for row in &sent {
        let (job_id, stream_id): (&str, Option<&str>) = (row.get(0), row.get(1));
        let n: usize = job_id
            .strip_prefix("lag-")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("an outbox row of job {job_id:?}"))?;
        let xadd_ms: i64 = stream_id
            .and_then(|id| id.split_once('-'))
            .and_then(|(ms, _)| ms.parse().ok())
            .with_context(|| format!("job {job_id:?} has no stream ID"))?;
        let committed = committed_ms[n].load(Ordering::Relaxed) as i64;
        lags_ms.push(xadd_ms - committed);
    }
    if lags_ms.len() as u64 != rows {
        bail!("the outbox holds {} rows of {rows}", lags_ms.len());
    }
    lags_ms.sort_unstable();
    Ok(Lag {
        round,
        publishers,
        rows,
        enqueue_secs,
        lags_ms,
        reports,
    })
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of sorted `values`.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Every lag of `publishers` over every round, sorted.
fn merged_lags(results: &OutboxResults, publishers: usize) -> Vec<i64> {
    let mut all: Vec<i64> = results
        .lag
        .iter()
        .filter(|lag| lag.publishers == publishers)
        .flat_map(|lag| lag.lags_ms.iter().copied())
        .collect();
    all.sort_unstable();
    all
}

fn throughputs(results: &OutboxResults, publishers: usize) -> Vec<f64> {
    results
        .throughput
        .iter()
        .filter(|t| t.publishers == publishers)
        .map(Throughput::rows_per_sec)
        .collect()
}

fn enqueue_rates(results: &OutboxResults, publishers: usize) -> Vec<f64> {
    results
        .lag
        .iter()
        .filter(|lag| lag.publishers == publishers)
        .map(Lag::enqueue_rate)
        .collect()
}

/// The outbox section: one row per publisher count.
pub fn markdown(args: &Args, pg: &ServerInfo, results: &OutboxResults) -> String {
    let mut out = format!(
        "Outbox: `OutboxPublisher::run_until` over the `jobs` queue ({} partitions), batch {}, \
         idle_poll {} ms; each publisher with its own `Postgres` pool ({PUBLISHER_POOL} connections) \
         and `Redis`, as two pods would have; {} round(s). {}.\n\
         - dispatched: {} rows committed first (transactions of {BACKLOG_TRANSACTION}), then rows ÷ \
         (publishers' start → every row marked dispatched), median (min–max) over rounds.\n\
         - lag: rows enqueued at {} rows/s for {} s (one row per transaction, {LAG_ENQUEUERS} \
         connections) while the publishers run; XADD time (ms part of the stream ID) − commit time \
         (wall clock right after `commit()` returned, ms), every row of every round. An idle \
         publisher asks again every idle_poll ({} ms): the bound on an idle outbox's lag.\n\n",
        args.partitions,
        args.outbox_batch,
        args.idle_poll,
        args.rounds,
        pg.line(),
        args.jobs,
        args.rate.unwrap_or_default(),
        args.seconds.unwrap_or_default(),
        args.idle_poll,
    );
    out.push_str(
        "| publishers | dispatched | vs 1 publisher | lag p50 | lag p99 | lag max | lag rows | enqueued at |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    let one = stats::median(&throughputs(results, 1)).unwrap_or(f64::NAN);
    for publishers in PUBLISHERS {
        let values = throughputs(results, publishers);
        let median = stats::median(&values).unwrap_or(f64::NAN);
        let lags = merged_lags(results, publishers);
        out.push_str(&format!(
            "| {publishers} | {} rows/s ({}–{}) | {:.2}× | {} ms | {} ms | {} ms | {} | {:.0} rows/s |\n",
            report::rate(median),
            report::rate(stats::min(&values).unwrap_or(f64::NAN)),
            report::rate(stats::max(&values).unwrap_or(f64::NAN)),
            median / one,
            percentile(&lags, 50.0),
            percentile(&lags, 99.0),
            percentile(&lags, 100.0),
            lags.len(),
            stats::median(&enqueue_rates(results, publishers)).unwrap_or(f64::NAN),
        ));
    }
    out
}

/// The outbox mode's `latest.json` (before `report::finish` adds the run's facts).
pub fn json(args: &Args, pg: &ServerInfo, results: &OutboxResults) -> Value {
    json!({
        "postgres": pg.json(),
        "rounds": args.rounds,
        "outbox": outbox_json(args, results),
    })
}

/// The outbox's figures.
fn outbox_json(args: &Args, results: &OutboxResults) -> Value {
    let summary: Vec<Value> = PUBLISHERS
        .iter()
        .map(|&publishers| {
            let values = throughputs(results, publishers);
            let lags = merged_lags(results, publishers);
            json!({
                "publishers": publishers,
                "dispatched_rows_per_sec": {
                    "median": stats::median(&values),
                    "min": stats::min(&values),
                    "max": stats::max(&values),
                },
                "lag_ms": {
                    "p50": percentile(&lags, 50.0),
                    "p99": percentile(&lags, 99.0),
                    "max": percentile(&lags, 100.0),
                    "min": lags.first(),
                    "rows": lags.len(),
                },
                "lag_enqueue_rows_per_sec_median": stats::median(&enqueue_rates(results, publishers)),
            })
        })
        .collect();
    let reports = |reports: &[PublisherReport]| -> Vec<Value> {
        reports
            .iter()
            .map(|r| json!({ "dispatched": r.dispatched, "failed_rounds": r.failed_rounds }))
            .collect()
    };
    json!({
        "settings": {
            "queue": jobs::CONFIG.queue,
            "partitions": args.partitions,
            "publisher_batch": args.outbox_batch,
            "publisher_idle_poll_ms": args.idle_poll,
            "publisher_pool": PUBLISHER_POOL,
            "throughput_rows": args.jobs,
            "throughput_rows_per_transaction": BACKLOG_TRANSACTION,
            "throughput_enqueuers": BACKLOG_ENQUEUERS,
            "lag_rate_rows_per_sec": args.rate,
            "lag_seconds": args.seconds,
            "lag_rows_per_transaction": 1,
            "lag_enqueuers": LAG_ENQUEUERS,
            "throughput": "rows ÷ (publishers' start → every row in the streams and marked dispatched)",
            "lag": "ms part of the row's stream ID (XADD, Redis's clock) − wall clock ms right after commit() returned",
        },
        "summary": summary,
        "throughput_runs": results.throughput.iter().map(|t| json!({
            "round": t.round,
            "publishers": t.publishers,
            "rows": t.rows,
            "backlog_enqueue_secs": t.enqueue_secs,
            "dispatch_secs": t.dispatch_secs,
            "dispatched_rows_per_sec": t.rows_per_sec(),
            "publisher_reports": reports(&t.reports),
        })).collect::<Vec<_>>(),
        "lag_runs": results.lag.iter().map(|l| json!({
            "round": l.round,
            "publishers": l.publishers,
            "rows": l.rows,
            "enqueue_secs": l.enqueue_secs,
            "enqueue_rows_per_sec": l.enqueue_rate(),
            "lag_p50_ms": percentile(&l.lags_ms, 50.0),
            "lag_p99_ms": percentile(&l.lags_ms, 99.0),
            "lag_max_ms": percentile(&l.lags_ms, 100.0),
            "publisher_reports": reports(&l.reports),
        })).collect::<Vec<_>>(),
    })
}
