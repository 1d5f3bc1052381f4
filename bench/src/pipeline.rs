//! Pipeline mode (`--pipeline --runs N`): runs per second end to end of a
//! three-stage pipeline with a fan-out and a join, queuegen's stage workers
//! against a hand-written redis-rs chain, in the same run.
//!
//! The pipeline: `first` → `middle` (each first job hands on `--fan-out`
//! jobs, 10 by default) → `join` (waits for every `middle` job of its run).
//! Each stage has `--partitions` partitions on both sides, and
//! `--stage-workers` workers (queuegen) or consumers (baseline), each with
//! its own connection, as separate processes would have. Handlers do no
//! work. A round publishes N first-stage jobs (in batches of `--batch`)
//! with no worker running, then starts the workers and ends when the N
//! join jobs have been handled and nothing is pending in any stage.
//!
//! queuegen (`qgP`): the runtime's pipeline API ([`PipelineRuntime`],
//! [`StageWorker`]) over queues of the tests' library (the `jobs` queue's
//! settings, `partition_by: job_id`, the `middle` queue with `dedup`,
//! which the spec check requires of a stage handed jobs), and the envelopes
//! of the tests spec's `docs` pipeline (`SplitJob`, `PartJob`, `MergeJob`).
//! `first` hands on its jobs ([`Handoff::publish`], one `publish_batch` per
//! partition handed to) and the join's envelope, and settles at the join (`run_settle`);
//! each `middle` job settles there (`run_settle`), the last one publishing
//! the join's job inside the Function; the join reads its summary
//! (`HGETALL`) and is done.
//!
//! Baseline (`baseP`): what a careful redis-rs user writes for the same
//! chain, no dedup, no Functions. Each consumer loops `XREADGROUP GROUP g
//! cN COUNT ⌈C/P⌉ BLOCK 100 STREAMS <every partition of its stage> > …`
//! (C = `--concurrency`, P = `--partitions`: a read holds at most as many
//! jobs as a queuegen worker runs at once);
//! for a read of `first`, one pipeline of the `XADD`s of every entry's
//! children (the same envelope fields queuegen writes, run fields included,
//! one stream field each, as the other baselines write them), then one
//! pipeline of one `XACK` per stream read; of `middle`, one pipeline of an
//! `INCR` of each entry's run counter, then the `XADD` of the join's job of
//! every run whose counter reached the fan-out, then the `XACK`s; of
//! `join`, the probe and the `XACK`s.
//!
//! Server CPU and commands per run come from `INFO` (as for the other
//! modes) over the whole round, publish included; the per-command table
//! from `INFO commandstats`, which counts the commands a Function runs
//! inside an `FCALL` as well as the `FCALL` (whose time includes theirs).
//! With `--slowlog`, one more round of each side (not in the medians) runs
//! with the server's slowlog recording every command, which names the
//! Function of each `FCALL`: calls and server time per run of each.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use queuegen_runtime::config::DedupConfig;
use queuegen_runtime::envelope::{self, header_fields, run_fields, Envelope, Header, RunLink};
use queuegen_runtime::runs::{
    HandOn, Handoff, Join, OnDeadLetter, Pipeline, PipelineRuntime, RunSummary, Stage,
    StageHandler, StageWorker, Step,
};
use queuegen_runtime::{
    JobContext, JobError, NewJob, QueueConfig, Redis, Timestamp, Worker, WorkerReport,
};
use queuegen_tests::queues::envelopes::{MergeJob, PartJob, SplitJob};
use queuegen_tests::queues::jobs;
use redis::streams::StreamReadReply;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::baseline::tenant;
use crate::probe::{self, join_all_within, Probe, Timeline};
use crate::slowlog::{self, read_slowlog, SlowUsage};
use crate::usage::{CommandUsage, Usage};
use crate::{report, stats, Args};

/// The stages, in order.
pub const FIRST: &str = "first";
pub const MIDDLE: &str = "middle";
pub const JOIN: &str = "join";
const STAGES: [&str; 3] = [FIRST, MIDDLE, JOIN];

/// The pipeline's name, part of its run keys.
const PIPELINE: &str = "bench";
/// The baseline's consumer group on every stage.
const GROUP: &str = "g";
const BLOCK_MS: u64 = 100;
/// Runs of the `--slowlog` round at most: the slowlog keeps every
/// command's arguments until it is read back in one reply.
const SLOWLOG_RUNS: u64 = 500;

/// One side's figures of one round.
#[derive(Debug, Clone)]
pub struct PipelineRound {
    pub runs: u64,
    /// First publish → the last ack of the last stage.
    pub end_to_end_secs: f64,
    /// Publishing the first stage's jobs alone.
    pub publish_secs: f64,
    /// The whole round, publish included.
    pub usage: Usage,
}

impl PipelineRound {
    pub fn runs_per_sec(&self) -> f64 {
        self.runs as f64 / self.end_to_end_secs
    }

    fn per_run(&self, value: f64) -> f64 {
        value / self.runs as f64
    }

    pub fn server_us_per_run(&self) -> f64 {
        self.per_run(self.usage.server_cpu_secs * 1e6)
    }

    pub fn client_us_per_run(&self) -> f64 {
        self.per_run(self.usage.client_cpu_secs * 1e6)
    }

    pub fn commands_per_run(&self) -> f64 {
        self.per_run(self.usage.commands as f64)
    }
}

/// The two sides, as named in the tables and the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Queuegen,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Baseline, Side::Queuegen];

    pub fn slug(self) -> &'static str {
        match self {
            Side::Baseline => "baseP",
            Side::Queuegen => "qgP",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline (redis-rs: XADD children, INCR join counter, XACK)",
            Side::Queuegen => "queuegen (StageWorker: publish_batch, run_settle, ack)",
        }
    }
}

/// Calls and server time of each command (an `FCALL` by its Function) in
/// the `--slowlog` round, and its runs.
#[derive(Debug, Clone, Default)]
pub struct Slowlog {
    pub runs: u64,
    pub by_command: BTreeMap<String, SlowUsage>,
}

/// Everything the mode measured.
pub struct PipelineResults {
    /// Per round, each side's figures.
    pub rounds: Vec<Vec<(Side, PipelineRound)>>,
    pub slowlog: Vec<(Side, Slowlog)>,
}

/// Runs `--rounds` rounds of both sides (baseline first), each on fresh
/// keys under `prefix`, deleted after; then the `--slowlog` rounds.
pub async fn run(args: &Args, url: &str, redis: &Redis) -> Result<PipelineResults> {
    let mut rounds = Vec::new();
    for round in 0..args.rounds {
        let mut results = Vec::new();
        for side in Side::BOTH {
            let prefix = format!("qgbench{}r{round}{}", std::process::id(), side.slug());
            let result = one_round(args, url, redis, &prefix, side, args.runs, false).await;
            let (result, _) = result.with_context(|| format!("round {round}, {}", side.name()))?;
            eprintln!(
                "round {round}: {:<60} {:>7.0} runs/s  server {:>6.1} µs/run  client {:>6.1} µs/run  {:>6.1} cmd/run",
                side.name(),
                result.runs_per_sec(),
                result.server_us_per_run(),
                result.client_us_per_run(),
                result.commands_per_run()
            );
            results.push((side, result));
        }
        rounds.push(results);
    }
    let mut slowlog = Vec::new();
    if args.slowlog {
        let runs = args.runs.min(SLOWLOG_RUNS);
        for side in Side::BOTH {
            let prefix = format!("qgbench{}slowlog{}", std::process::id(), side.slug());
            let (_, log) = one_round(args, url, redis, &prefix, side, runs, true)
                .await
                .with_context(|| format!("the slowlog round of {}", side.name()))?;
            let by_command = log.expect("the slowlog was read");
            slowlog.push((side, Slowlog { runs, by_command }));
        }
    }
    Ok(PipelineResults { rounds, slowlog })
}

/// One side's round on keys under `prefix`, deleted afterwards even when
/// it failed; with `slowlog`, run with the slowlog recording every command,
/// read back (by command) before the keys are deleted.
async fn one_round(
    args: &Args,
    url: &str,
    redis: &Redis,
    prefix: &str,
    side: Side,
    runs: u64,
    slowlog: bool,
) -> Result<(PipelineRound, Option<BTreeMap<String, SlowUsage>>)> {
    let args = Args {
        jobs: runs,
        rate: None,
        seconds: None,
        ..args.clone()
    };
    let mut conn = redis.shared();
    let previous = if slowlog {
        Some(slowlog::record_everything(&mut conn).await?)
    } else {
        None
    };
    let outcome = match side {
        Side::Baseline => baseline(&args, url, prefix).await,
        Side::Queuegen => queuegen(&args, url, prefix).await,
    };
    let log = match &previous {
        Some(previous) => {
            let log = read_slowlog(&mut conn).await;
            slowlog::restore(&mut conn, previous).await?;
            Some(log)
        }
        None => None,
    };
    let cleaned = report::delete_prefix(redis, prefix).await;
    let result = outcome?;
    let log = log.transpose()?;
    cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
    Ok((result, log))
}

fn round_of(runs: u64, timeline: Timeline) -> PipelineRound {
    PipelineRound {
        runs,
        end_to_end_secs: (timeline.last_ack - timeline.publish_start).as_secs_f64(),
        publish_secs: (timeline.publish_end - timeline.publish_start).as_secs_f64(),
        usage: Usage::between(&timeline.samples[0], &timeline.samples[2]),
    }
}

// ---------------------------------------------------------------- queuegen

/// The queue of `stage`: the `jobs` queue's settings (a slow claim, so
/// recovery never steps in), under `prefix`, partitioned by `job_id`
/// (the stages' envelopes have no other key), `middle` with `dedup`.
fn stage_config(args: &Args, prefix: &str, stage: &'static str) -> QueueConfig {
    let mut config = QueueConfig {
        key_prefix: Cow::Owned(prefix.to_owned()),
        queue: Cow::Borrowed(stage),
        partitions: args.partitions,
        partition_by: Cow::Borrowed(&[Cow::Borrowed(header_fields::JOB_ID)]),
        dedup: (stage == MIDDLE).then_some(DedupConfig {
            window: crate::queuegen::DEDUP_WINDOW,
        }),
        ..jobs::CONFIG
    };
    config.handler.concurrency = args.concurrency;
    config
}

/// `first` → `middle` (fan-out) → `join` (after `middle`), as the spec
/// check would build it from
/// `stages: { first: { then: [middle], max_children: F }, middle: {}, join: { join: [middle] } }`.
fn graph(fan_out: u32) -> Pipeline {
    let stage = |queue: &str, then: &[&str], max_children, join| Stage {
        queue: queue.to_owned(),
        then: then.iter().map(|s| (*s).to_owned()).collect(),
        max_children,
        join,
    };
    Pipeline {
        name: PIPELINE.to_owned(),
        stages: vec![
            stage(FIRST, &[MIDDLE], fan_out, None),
            stage(MIDDLE, &[], 100, None),
            stage(
                JOIN,
                &[],
                100,
                Some(Join {
                    after: vec![MIDDLE.to_owned()],
                    on_dead_letter: OnDeadLetter::Fail,
                }),
            ),
        ],
        first: FIRST.to_owned(),
        keep: Duration::from_secs(3600),
    }
}

/// What a `first` job hands on, as the generated code would type it.
struct FirstNext {
    middle: Vec<PartJob>,
    join: MergeJob,
}

impl HandOn for FirstNext {
    fn count(&self) -> usize {
        self.middle.len()
    }

    fn hand_on(self, to: &mut Handoff<'_>) -> queuegen_runtime::Result<()> {
        to.publish(MIDDLE, self.middle)?;
        to.join(JOIN, self.join)
    }
}

struct First;

impl StageHandler<SplitJob> for First {
    type Next = FirstNext;

    async fn handle(
        &self,
        job: SplitJob,
        _summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<FirstNext>, JobError> {
        Ok(Step::hand_on(FirstNext {
            middle: (0..job.pages).map(|page| PartJob { page }).collect(),
            join: MergeJob {
                doc: ctx.job_id().to_owned(),
            },
        }))
    }
}

struct Middle;

impl StageHandler<PartJob> for Middle {
    type Next = ();

    async fn handle(
        &self,
        _job: PartJob,
        _summary: Option<RunSummary>,
        _ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        Ok(Step::done())
    }
}

/// The join: calls the probe, and counts summaries that do not name every
/// `middle` job of the run as finished (there must be none).
struct JoinStage {
    probe: Arc<Probe>,
    fan_out: usize,
    short: Arc<AtomicU64>,
}

impl StageHandler<MergeJob> for JoinStage {
    type Next = ();

    async fn handle(
        &self,
        _job: MergeJob,
        summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        self.probe.handler_started(ctx.stream_id(), None);
        if summary.map_or(0, |summary| summary.finished().count()) != self.fan_out {
            self.short.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Step::done())
    }
}

async fn queuegen(args: &Args, url: &str, prefix: &str) -> Result<PipelineRound> {
    let configs: Vec<QueueConfig> = STAGES
        .iter()
        .map(|stage| stage_config(args, prefix, stage))
        .collect();
    let redis = crate::queuegen::producer_redis(url, &configs).await?;
    let producer = queuegen_runtime::Producer::<SplitJob>::new(&redis, configs[0].clone());
    let probe = Arc::new(Probe::new(args.jobs, false));
    let short = Arc::new(AtomicU64::new(0));
    // Each worker its own `Redis`, its stage's hand-offs going over it, as
    // the generated `worker(redis, handler)` builds it in its own process.
    let mut worker_redis = Vec::new();
    for _ in 0..STAGES.len() * args.stage_workers {
        worker_redis.push(Redis::connect(url).await.context("connecting a worker")?);
    }
    let (stop, stopped) = watch::channel(false);
    let start = || {
        let mut running = Vec::new();
        for (n, redis) in worker_redis.iter().enumerate() {
            let stage = n % STAGES.len();
            let config = configs[stage].clone();
            let pipeline = PipelineRuntime::new(redis, graph(args.fan_out), configs.clone())
                .expect("every stage has its queue");
            let name = format!("{prefix}-{}-w{}", STAGES[stage], n / STAGES.len());
            let mut stopped = stopped.clone();
            let shutdown = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            let task = match STAGES[stage] {
                FIRST => {
                    let handler = StageWorker::new(pipeline, FIRST, First).expect("a stage");
                    let worker = Worker::new(redis, config, handler).consumer_name(name);
                    tokio::spawn(async move {
                        let report = worker.run_until(shutdown).await?;
                        Ok::<_, queuegen_runtime::Error>((FIRST, report))
                    })
                }
                MIDDLE => {
                    let handler = StageWorker::new(pipeline, MIDDLE, Middle).expect("a stage");
                    let worker = Worker::new(redis, config, handler).consumer_name(name);
                    tokio::spawn(async move {
                        let report = worker.run_until(shutdown).await?;
                        Ok::<_, queuegen_runtime::Error>((MIDDLE, report))
                    })
                }
                _ => {
                    let join = JoinStage {
                        probe: probe.clone(),
                        fan_out: args.fan_out as usize,
                        short: short.clone(),
                    };
                    let handler = StageWorker::new(pipeline, JOIN, join).expect("a stage");
                    let worker = Worker::new(redis, config, handler).consumer_name(name);
                    tokio::spawn(async move {
                        let report = worker.run_until(shutdown).await?;
                        Ok::<_, queuegen_runtime::Error>((JOIN, report))
                    })
                }
            };
            running.push(task);
        }
        running
    };
    let keys: Vec<String> = configs.iter().flat_map(QueueConfig::ready_keys).collect();
    let mut conn = redis.shared();
    let (timeline, running) = probe::run_phases(
        args,
        &mut conn,
        &probe,
        &keys,
        &jobs::CONFIG.group,
        start,
        |range, _| {
            let fan_out = args.fan_out;
            let batch =
                range.map(move |n| NewJob::new(run_id(n), tenant(n), SplitJob { pages: fan_out }));
            let producer = &producer;
            async move {
                producer.publish_many(batch).await.context("publish_many")?;
                Ok(())
            }
        },
    )
    .await?;
    let _ = stop.send(true);
    let budget = jobs::CONFIG.handler.shutdown_budget + args.timeout();
    let reports: Vec<(&str, WorkerReport)> =
        join_all_within(running, budget, "a stage worker", "shut down").await?;
    let timeline = timeline?;
    let done = |stage: &str| -> u64 {
        reports
            .iter()
            .filter(|(s, _)| *s == stage)
            .map(|(_, report)| report.done)
            .sum()
    };
    let expected = [
        (FIRST, args.jobs),
        (MIDDLE, args.jobs * u64::from(args.fan_out)),
        (JOIN, args.jobs),
    ];
    for (stage, jobs) in expected {
        if done(stage) != jobs {
            bail!(
                "the {stage} workers reported {} jobs done, not {jobs}",
                done(stage)
            );
        }
    }
    let short = short.load(Ordering::Relaxed);
    if short > 0 {
        bail!("{short} join summaries did not name every middle job as finished");
    }
    Ok(round_of(args.jobs, timeline))
}

/// The `job_id` of run `n`'s first job: the run ID.
fn run_id(n: u64) -> String {
    format!("run-{n}")
}

// ---------------------------------------------------------------- baseline

/// The baseline's stream of `stage`'s partition `p`.
fn stream(prefix: &str, stage: &str, p: u64) -> String {
    format!("{prefix}:base:{stage}:{p}")
}

/// The baseline's partition of `key`: FNV-1a, as cheap as a hand-written
/// one gets.
fn partition_of(key: &str, partitions: u64) -> u64 {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    hash % partitions
}

/// The envelope fields of a job, as the producer writes them (one stream
/// field each), with the run fields of a handed-on job.
fn fields<E: Envelope>(
    job_id: String,
    tenant: String,
    trace_id: String,
    run: Option<&RunLink>,
    body: &E,
) -> Result<Vec<(&'static str, String)>> {
    let header = Header {
        job_id,
        envelope_type: E::TYPE.to_owned(),
        tenant,
        schema: E::SCHEMA,
        created_at: Timestamp::now(),
        trace_id,
        attempt: 1,
        prev_id: None,
        reason: None,
    };
    envelope::encode_in_run(&header, run, body).context("encoding a job")
}

/// What every baseline consumer shares.
struct Chain {
    prefix: String,
    partitions: u64,
    fan_out: u32,
    /// `COUNT` of a read, per stream: `--concurrency` over the partitions,
    /// so that a read holds at most as many jobs as a worker runs at once.
    read_count: usize,
    probe: Arc<Probe>,
}

async fn baseline(args: &Args, url: &str, prefix: &str) -> Result<PipelineRound> {
    let client = redis::Client::open(url).context("parsing the Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connecting the baseline publisher")?;
    let partitions = u64::from(args.partitions);
    let mut keys = Vec::new();
    for stage in STAGES {
        for p in 0..partitions {
            let key = stream(prefix, stage, p);
            redis::cmd("XGROUP")
                .arg(&["CREATE", &key, GROUP, "0", "MKSTREAM"])
                .query_async::<()>(&mut conn)
                .await
                .context("XGROUP CREATE")?;
            keys.push(key);
        }
    }
    let chain = Arc::new(Chain {
        prefix: prefix.to_owned(),
        partitions,
        fan_out: args.fan_out,
        read_count: args.concurrency.div_ceil(args.partitions as usize),
        probe: Arc::new(Probe::new(args.jobs, false)),
    });
    let mut idle = Vec::new();
    for n in 0..args.stage_workers {
        for stage in STAGES {
            // Default response timeout (500 ms) exceeds BLOCK_MS.
            let conn = client
                .get_multiplexed_async_connection()
                .await
                .context("connecting a baseline consumer")?;
            idle.push(consume(conn, stage, format!("{stage}{n}"), chain.clone()));
        }
    }
    let start = || idle.into_iter().map(tokio::spawn).collect();
    let (timeline, consumers) = probe::run_phases(
        args,
        &mut conn.clone(),
        &chain.probe,
        &keys,
        GROUP,
        start,
        |range, _| {
            let mut conn = conn.clone();
            let chain = chain.clone();
            async move {
                let mut pipe = redis::pipe();
                for n in range {
                    let run = run_id(n);
                    let key = stream(&chain.prefix, FIRST, partition_of(&run, chain.partitions));
                    let body = SplitJob {
                        pages: chain.fan_out,
                    };
                    let entry = fields(run, tenant(n), trace_id(n), None, &body)?;
                    pipe.cmd("XADD").arg(key).arg("*").arg(&entry[..]);
                }
                pipe.query_async::<()>(&mut conn)
                    .await
                    .context("pipelined XADD")
            }
        },
    )
    .await?;
    probe::join_all_within(consumers, args.timeout(), "a baseline consumer", "stop").await?;
    Ok(round_of(args.jobs, timeline?))
}

/// A 128-bit hex trace ID, as cheap to make as the runtime's random one.
fn trace_id(n: u64) -> String {
    let mixed = (u128::from(n) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    format!("{mixed:032x}")
}

/// A string field of an entry read (empty when missing).
fn text(entry: &redis::streams::StreamId, field: &str) -> String {
    entry.get(field).unwrap_or_default()
}

/// One consumer of `stage` until every join has started: one blocking read
/// over all of the stage's partitions, the stage's work for the whole read
/// (its appends in one pipeline), then the read's `XACK`s in one pipeline.
async fn consume(
    mut conn: redis::aio::MultiplexedConnection,
    stage: &'static str,
    name: String,
    chain: Arc<Chain>,
) -> Result<()> {
    let keys: Vec<String> = (0..chain.partitions)
        .map(|p| stream(&chain.prefix, stage, p))
        .collect();
    let mut read = redis::cmd("XREADGROUP");
    read.arg(&["GROUP", GROUP, &name, "COUNT"])
        .arg(chain.read_count)
        .arg("BLOCK")
        .arg(BLOCK_MS)
        .arg("STREAMS")
        .arg(&keys);
    for _ in &keys {
        read.arg(">");
    }
    while !chain.probe.all_started() {
        let reply: Option<StreamReadReply> = read
            .query_async(&mut conn)
            .await
            .with_context(|| format!("XREADGROUP of {stage}"))?;
        let Some(reply) = reply else { continue };
        match stage {
            FIRST => {
                let mut pipe = redis::pipe();
                for entry in reply.keys.iter().flat_map(|key| &key.ids) {
                    let run = text(entry, header_fields::JOB_ID);
                    let (tenant, trace) = (
                        text(entry, header_fields::TENANT),
                        text(entry, header_fields::TRACE_ID),
                    );
                    let link = RunLink {
                        run_id: run.clone(),
                        parent: run.clone(),
                    };
                    for page in 0..chain.fan_out {
                        let id = format!("{run}/{MIDDLE}/{page}");
                        let key =
                            stream(&chain.prefix, MIDDLE, partition_of(&id, chain.partitions));
                        let entry = fields(
                            id,
                            tenant.clone(),
                            trace.clone(),
                            Some(&link),
                            &PartJob { page },
                        )?;
                        pipe.cmd("XADD").arg(key).arg("*").arg(&entry[..]);
                    }
                }
                pipe.query_async::<()>(&mut conn)
                    .await
                    .context("pipelined XADD of the middle jobs")?;
            }
            MIDDLE => {
                let entries: Vec<&redis::streams::StreamId> =
                    reply.keys.iter().flat_map(|key| &key.ids).collect();
                let mut counts = redis::pipe();
                for entry in &entries {
                    let run = text(entry, run_fields::RUN_ID);
                    counts
                        .cmd("INCR")
                        .arg(format!("{}:base:count:{run}", chain.prefix));
                }
                let counted: Vec<u64> = counts
                    .query_async(&mut conn)
                    .await
                    .context("pipelined INCR of the join counters")?;
                let mut joins = redis::pipe();
                for (entry, count) in entries.iter().zip(counted) {
                    if count != u64::from(chain.fan_out) {
                        continue;
                    }
                    let run = text(entry, run_fields::RUN_ID);
                    let link = RunLink {
                        run_id: run.clone(),
                        parent: text(entry, header_fields::JOB_ID),
                    };
                    let key = stream(&chain.prefix, JOIN, partition_of(&run, chain.partitions));
                    let job = fields(
                        format!("{run}/{JOIN}"),
                        text(entry, header_fields::TENANT),
                        text(entry, header_fields::TRACE_ID),
                        Some(&link),
                        &MergeJob { doc: run },
                    )?;
                    joins.cmd("XADD").arg(key).arg("*").arg(&job[..]);
                }
                if !joins.is_empty() {
                    joins
                        .query_async::<()>(&mut conn)
                        .await
                        .context("pipelined XADD of the join jobs")?;
                }
            }
            _ => {
                for entry in reply.keys.iter().flat_map(|key| &key.ids) {
                    chain.probe.handler_started(&entry.id, None);
                }
            }
        }
        let mut acks = redis::pipe();
        for key in &reply.keys {
            let ids: Vec<&str> = key.ids.iter().map(|entry| entry.id.as_str()).collect();
            acks.cmd("XACK").arg(&key.key).arg(GROUP).arg(&ids);
        }
        acks.query_async::<()>(&mut conn)
            .await
            .with_context(|| format!("XACK of {stage}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------- report

type Figure = (&'static str, &'static str, fn(&PipelineRound) -> f64);

const FIGURES: [Figure; 4] = [
    ("runs_per_sec", "runs/s", PipelineRound::runs_per_sec),
    (
        "server_cpu_us_per_run",
        "µs/run",
        PipelineRound::server_us_per_run,
    ),
    (
        "client_cpu_us_per_run",
        "µs/run",
        PipelineRound::client_us_per_run,
    ),
    (
        "commands_per_run",
        "cmd/run",
        PipelineRound::commands_per_run,
    ),
];

fn values(results: &PipelineResults, side: Side, figure: fn(&PipelineRound) -> f64) -> Vec<f64> {
    results
        .rounds
        .iter()
        .flatten()
        .filter(|(s, _)| *s == side)
        .map(|(_, round)| figure(round))
        .collect()
}

fn median(results: &PipelineResults, side: Side, figure: fn(&PipelineRound) -> f64) -> f64 {
    stats::median(&values(results, side, figure)).unwrap_or(f64::NAN)
}

/// Calls and µs per run of each command over every round of `side`.
fn commands_per_run(results: &PipelineResults, side: Side) -> BTreeMap<String, (f64, f64)> {
    let mut sum: BTreeMap<String, CommandUsage> = BTreeMap::new();
    let mut runs = 0;
    for (_, round) in results.rounds.iter().flatten().filter(|(s, _)| *s == side) {
        runs += round.runs;
        for (name, used) in &round.usage.by_command {
            let total = sum.entry(name.clone()).or_default();
            total.calls += used.calls;
            total.usec += used.usec;
        }
    }
    per_run(&sum, runs)
}

fn per_run(sum: &BTreeMap<String, CommandUsage>, runs: u64) -> BTreeMap<String, (f64, f64)> {
    sum.iter()
        .map(|(name, used)| {
            let runs = runs.max(1) as f64;
            (
                name.clone(),
                (used.calls as f64 / runs, used.usec as f64 / runs),
            )
        })
        .collect()
}

/// Both sides' per-run figures of `by_side`, one row per command, the
/// busiest (by server time on either side) first.
fn command_rows(out: &mut String, by_side: &[BTreeMap<String, (f64, f64)>; 2]) {
    let mut names: Vec<&String> = by_side.iter().flat_map(|side| side.keys()).collect();
    names.sort();
    names.dedup();
    let busiest = |name: &String| {
        by_side
            .iter()
            .map(|side| side.get(name).map_or(0.0, |(_, usec)| *usec))
            .fold(0.0, f64::max)
    };
    names.sort_by(|a, b| busiest(b).total_cmp(&busiest(a)).then(a.cmp(b)));
    for name in names {
        let cells: Vec<String> = by_side
            .iter()
            .map(|side| match side.get(name) {
                Some((calls, usec)) => format!(
                    "{calls:.2} | {usec:.1} µs | {:.2} µs",
                    if *calls > 0.0 { usec / calls } else { 0.0 }
                ),
                None => "— | — | —".to_owned(),
            })
            .collect();
        out.push_str(&format!("| `{name}` | {} |\n", cells.join(" | ")));
    }
}

/// The tables: runs/s and costs per run with the ratio, the commands per
/// run by name, and the slowlog round's by Function.
pub fn markdown(args: &Args, results: &PipelineResults) -> String {
    let mut out = format!(
        "Pipeline: first → middle (fan-out {}) → join (after middle), {} partitions per stage, \
         {} worker(s) / consumer(s) per stage, worker concurrency {} (the baseline reads COUNT {} \
         per stream), {} runs per round, {} round(s); end to end = first publish → last ack of the last stage; median (min–max); ratio = queuegen \
         ÷ baseline; CPU and commands per run over the whole round (publish included), from INFO \
         (server) and getrusage (this process).\n\n",
        args.fan_out,
        args.partitions,
        args.stage_workers,
        args.concurrency,
        args.concurrency.div_ceil(args.partitions as usize),
        args.runs,
        args.rounds
    );
    out.push_str(
        "| side | runs/s end to end | server CPU per run | client CPU per run | commands per run |\n",
    );
    out.push_str("|---|---|---|---|---|\n");
    for side in Side::BOTH {
        let runs = values(results, side, PipelineRound::runs_per_sec);
        let ratio = |figure: fn(&PipelineRound) -> f64| match side {
            Side::Baseline => String::new(),
            Side::Queuegen => format!(
                " **{:.2}×**",
                median(results, side, figure) / median(results, Side::Baseline, figure)
            ),
        };
        out.push_str(&format!(
            "| {} | {:.0} ({:.0}–{:.0}){} | {:.1} µs{} | {:.1} µs{} | {:.1}{} |\n",
            side.name(),
            stats::median(&runs).unwrap_or(f64::NAN),
            stats::min(&runs).unwrap_or(f64::NAN),
            stats::max(&runs).unwrap_or(f64::NAN),
            ratio(PipelineRound::runs_per_sec),
            median(results, side, PipelineRound::server_us_per_run),
            ratio(PipelineRound::server_us_per_run),
            median(results, side, PipelineRound::client_us_per_run),
            ratio(PipelineRound::client_us_per_run),
            median(results, side, PipelineRound::commands_per_run),
            ratio(PipelineRound::commands_per_run),
        ));
    }
    out.push_str(
        "\nCommands per run by name (`INFO commandstats` over every round ÷ runs; it counts the \
         commands a Function runs inside an `FCALL` as well as the `FCALL`, whose time includes \
         theirs; the bench's own `INFO` and `XPENDING` polls are in it):\n\n",
    );
    out.push_str(
        "| command | baseline calls/run | baseline server time/run | baseline per call \
         | queuegen calls/run | queuegen server time/run | queuegen per call |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|\n");
    command_rows(
        &mut out,
        &[
            commands_per_run(results, Side::Baseline),
            commands_per_run(results, Side::Queuegen),
        ],
    );
    if let [(_, base), (_, qg)] = results.slowlog.as_slice() {
        out.push_str(&format!(
            "\nThe `--slowlog` round ({} runs per side, not in the medians above): every command, \
             from the server's slowlog (`slowlog-log-slower-than 0`), each `FCALL` by its \
             Function, the commands a Function ran as `in fcall:` (Redis logs them too, with \
             client `?:0`, just before their `FCALL`) and again under it. Server time per run \
             and per call; logging every command inside a Function lengthens its `FCALL`, so \
             the `FCALL` times here run above those of the rounds:\n\n",
            base.runs
        ));
        out.push_str(
            "| command | baseline calls/run | baseline server time/run | baseline per call \
             | queuegen calls/run | queuegen server time/run | queuegen per call \
             | commands inside per call | their time per call |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|---|\n");
        let mut names: Vec<&String> = base.by_command.keys().chain(qg.by_command.keys()).collect();
        names.sort();
        names.dedup();
        let usec = |log: &Slowlog, name: &String| log.by_command.get(name).map_or(0, |u| u.usec);
        names.sort_by_key(|name| std::cmp::Reverse(usec(base, name).max(usec(qg, name))));
        for name in names {
            let side = |log: &Slowlog| match log.by_command.get(name) {
                Some(used) => format!(
                    "{:.2} | {:.1} µs | {:.2} µs",
                    used.calls as f64 / log.runs as f64,
                    used.usec as f64 / log.runs as f64,
                    used.usec as f64 / used.calls.max(1) as f64
                ),
                None => "— | — | —".to_owned(),
            };
            let inside = match qg.by_command.get(name) {
                Some(used) if used.inner_calls > 0 => format!(
                    "{:.1} | {:.1} µs",
                    used.inner_calls as f64 / used.calls as f64,
                    used.inner_usec as f64 / used.calls as f64
                ),
                _ => "| ".to_owned(),
            };
            out.push_str(&format!(
                "| `{name}` | {} | {} | {inside} |\n",
                side(base),
                side(qg)
            ));
        }
    }
    out
}

/// The pipeline mode's `latest.json` (before `report::finish` adds the run's facts).
pub fn json(args: &Args, results: &PipelineResults) -> Value {
    let summary: Vec<Value> = Side::BOTH
        .iter()
        .map(|&side| {
            let mut figures = serde_json::Map::new();
            for (name, unit, figure) in FIGURES {
                let values = values(results, side, figure);
                let mut value = json!({
                    "median": stats::median(&values),
                    "min": stats::min(&values),
                    "max": stats::max(&values),
                    "unit": unit,
                });
                if side == Side::Queuegen {
                    value["ratio_to_baseline"] = json!(
                        median(results, side, figure) / median(results, Side::Baseline, figure)
                    );
                }
                figures.insert(name.to_owned(), value);
            }
            let commands: serde_json::Map<String, Value> = commands_per_run(results, side)
                .into_iter()
                .map(|(name, (calls, usec))| {
                    (
                        name,
                        json!({ "calls_per_run": calls, "usec_per_run": usec }),
                    )
                })
                .collect();
            json!({
                "side": side.name(),
                "slug": side.slug(),
                "figures": figures,
                "commands_per_run": commands,
            })
        })
        .collect();
    let rounds: Vec<Value> = results
        .rounds
        .iter()
        .enumerate()
        .map(|(round, sides)| {
            json!({
                "round": round,
                "sides": sides.iter().map(|(side, r)| json!({
                    "slug": side.slug(),
                    "runs": r.runs,
                    "end_to_end_secs": r.end_to_end_secs,
                    "publish_secs": r.publish_secs,
                    "runs_per_sec": r.runs_per_sec(),
                    "client_cpu_secs": r.usage.client_cpu_secs,
                    "server_cpu_secs": r.usage.server_cpu_secs,
                    "server_commands": r.usage.commands,
                    "commands": r.usage.by_command.iter().map(|(name, used)| {
                        (name.clone(), json!({ "calls": used.calls, "usec": used.usec }))
                    }).collect::<serde_json::Map<_, _>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let slowlog: serde_json::Map<String, Value> = results
        .slowlog
        .iter()
        .map(|(side, log)| {
            let commands: serde_json::Map<String, Value> = log
                .by_command
                .iter()
                .map(|(name, used)| {
                    (
                        name.clone(),
                        json!({
                            "calls": used.calls,
                            "usec": used.usec,
                            "inner_calls": used.inner_calls,
                            "inner_usec": used.inner_usec,
                        }),
                    )
                })
                .collect();
            (
                side.slug().to_owned(),
                json!({ "runs": log.runs, "commands": commands }),
            )
        })
        .collect();
    json!({
        "redis": match &args.redis {
            Some(url) => url.as_str(),
            None => "private redis-server (queuegen_tests::RedisServer)",
        },
        "pipeline": {
            "stages": "first -> middle (fan-out) -> join (after middle)",
            "fan_out": args.fan_out,
            "runs": args.runs,
            "rounds": args.rounds,
            "partitions_per_stage": args.partitions,
            "workers_per_stage": args.stage_workers,
            "concurrency": args.concurrency,
            "batch": args.batch,
            "baseP": "per stage, consumers XREADGROUP COUNT ceil(concurrency/partitions) BLOCK 100 over every partition; first: pipelined XADD of its children, then XACK; middle: pipelined INCR of the run's counter, XADD of the join's job when it reaches the fan-out, then XACK; join: XACK",
            "qgP": "per stage, Worker + StageWorker (PipelineRuntime): first hands on fan-out PartJobs (one publish_batch per partition) and the join's MergeJob, settles at the join (run_settle); middle: Step::done() (run_settle); join: summary (HGETALL), Step::done()",
        },
        "summary": summary,
        "slowlog": slowlog,
        "rounds": rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_settles_first_and_middle_at_the_join_only() {
        let graph = graph(10);
        assert_eq!(graph.settles_at(FIRST).collect::<Vec<_>>(), [JOIN]);
        assert_eq!(graph.settles_at(MIDDLE).collect::<Vec<_>>(), [JOIN]);
        assert_eq!(graph.settles_at(JOIN).count(), 0);
    }

    #[test]
    fn baseline_partitions_stay_in_range() {
        for n in 0..100 {
            assert!(partition_of(&format!("run-{n}/middle/3"), 4) < 4);
        }
    }
}
