//! What every variant shares: the per-job probe its handler calls, a round's
//! phases up to the last ack, the join of its tasks, and its raw figures.
//!
//! The probe costs one `SystemTime::now`, a stream-ID parse and two relaxed
//! atomic adds per job, the same in the baseline and in queuegen's handler.
//! Latency is publish→handler-start measured as the handler's wall clock
//! minus the millisecond part of the entry's stream ID (the server's clock
//! at `XADD`; same host), kept in a 1 ms histogram.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use redis::aio::ConnectionLike;
use tokio::task::JoinHandle;

use crate::stats;
use crate::steady::{self, Schedule};
use crate::usage::{self, Usage};
use crate::Args;

/// Histogram buckets: 0..LATENCY_BUCKETS-1 ms, the last one "or more".
const LATENCY_BUCKETS: usize = 120_001;
/// How often the waiter looks at the counter and the pending lists.
const POLL: Duration = Duration::from_millis(1);

/// Shared by every consumer / handler of one variant in one round.
pub struct Probe {
    base: Instant,
    jobs: u64,
    started: AtomicU64,
    /// Nanoseconds after `base` of the first handler start (+1; 0 = none yet).
    first_start: AtomicU64,
    latency_ms: Box<[AtomicU64]>,
    /// Steady-state mode only: µs from each job's intended send time to its handler start.
    steady: Option<Mutex<Histogram<u64>>>,
}

impl Probe {
    /// With `steady`, it also records latency from each job's intended send time.
    pub fn new(jobs: u64, steady: bool) -> Probe {
        Probe {
            base: Instant::now(),
            jobs,
            started: AtomicU64::new(0),
            first_start: AtomicU64::new(0),
            latency_ms: (0..LATENCY_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            steady: steady.then(|| Mutex::new(steady::histogram())),
        }
    }

    /// Whether `handler_started` needs the job ID (steady-state mode).
    pub fn wants_job_id(&self) -> bool {
        self.steady.is_some()
    }

    /// Called at the start of every job's handler with the entry's stream
    /// ID and (in steady-state mode) the job's ID.
    pub fn handler_started(&self, stream_id: &str, job_id: Option<&str>) {
        if let (Some(steady), Some(intended)) = (&self.steady, job_id.and_then(steady::intended_us))
        {
            let late = steady::now_us().saturating_sub(intended);
            if let Ok(mut histogram) = steady.lock() {
                histogram.saturating_record(late.max(1));
            }
        }
        let before = self.started.fetch_add(1, Ordering::Relaxed);
        if before == 0 {
            let at = self.base.elapsed().as_nanos() as u64 + 1;
            self.first_start.store(at, Ordering::Relaxed);
        }
        let now_ms = queuegen_runtime::host::now_ms();
        let id_ms = stream_id
            .split_once('-')
            .and_then(|(ms, _)| ms.parse::<u64>().ok())
            .unwrap_or(now_ms);
        let bucket = (now_ms.saturating_sub(id_ms) as usize).min(LATENCY_BUCKETS - 1);
        self.latency_ms[bucket].fetch_add(1, Ordering::Relaxed);
    }

    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    pub fn all_started(&self) -> bool {
        self.started() >= self.jobs
    }
}

/// One round of a variant, up to its last ack: a usage sample before
/// publishing, `send` publishing jobs `0..--jobs` (one call per batch,
/// within `--timeout`: without `--rate` all at once in batches of
/// `--batch`, with it on its schedule, see `steady::publish`), a sample
/// after it, the wait for the last ack of `keys`
/// in `group`, and a sample after that. The consumers `start` spawns run
/// from the end of publishing (a backlog) or, with `--rate`, before it (they
/// wait for jobs as they arrive); they are returned still running.
pub async fn run_phases<C, T, F, Fut>(
    args: &Args,
    conn: &mut C,
    probe: &Probe,
    keys: &[String],
    group: &str,
    start: impl FnOnce() -> Vec<T>,
    mut send: F,
) -> Result<(Result<Timeline>, Vec<T>)>
where
    C: ConnectionLike,
    F: FnMut(Range<u64>, Option<Schedule>) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let before_publish = usage::sample(conn).await?;
    let schedule = args.rate.map(Schedule::start);
    let mut start = Some(start);
    // Steady state: the consumers wait for jobs as they arrive.
    let mut running =
        (start.take_if(|_| schedule.is_some())).map_or_else(Vec::new, |start| start());
    let publish_start = Instant::now();
    let publish_all = async {
        if let Some(schedule) = &schedule {
            let send = |range| send(range, Some(*schedule));
            return Ok(Some(
                steady::publish(schedule, args.jobs, args.batch, send).await?,
            ));
        }
        for start in (0..args.jobs).step_by(args.batch) {
            send(start..(start + args.batch as u64).min(args.jobs), None).await?;
        }
        anyhow::Ok(None)
    };
    let publisher_late = tokio::time::timeout(args.timeout(), publish_all)
        .await
        .context("timed out publishing (raise --timeout)")??;
    let publish_end = Instant::now();
    let after_publish = usage::sample(conn).await?;
    if let Some(start) = start {
        running = start();
    }
    let last_ack = wait_last_ack(conn, probe, keys, group, args.timeout()).await;
    let after_last_ack = usage::sample(conn).await;
    let timeline = last_ack.and_then(|last_ack| {
        Ok(Timeline {
            publish_start,
            publish_end,
            last_ack,
            samples: [before_publish, after_publish, after_last_ack?],
            publisher_late,
        })
    });
    Ok((timeline, running))
}

/// Polls until every job's handler has started and no entry of `keys` is
/// pending in `group`; returns the moment that was first seen (the last ack,
/// to within one poll plus a round trip).
pub async fn wait_last_ack<C: ConnectionLike>(
    conn: &mut C,
    probe: &Probe,
    keys: &[String],
    group: &str,
    timeout: Duration,
) -> Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if probe.all_started() {
            let mut pipe = redis::pipe();
            for key in keys {
                pipe.cmd("XPENDING").arg(key).arg(group);
            }
            // Each summary reply is `[count, min, max, consumers]`.
            let replies: Vec<(i64, redis::Value, redis::Value, redis::Value)> =
                pipe.query_async(conn).await.context("polling XPENDING")?;
            let pending: i64 = replies.iter().map(|summary| summary.0).sum();
            if pending == 0 {
                return Ok(Instant::now());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {timeout:?}: {} of {} handlers started, entries still pending \
                 (raise --timeout for larger --jobs)",
                probe.started(),
                probe.jobs
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits for each of `tasks` (already told to stop, or about to end) within
/// `timeout`, naming `what` and how it ends (`to stop`) in the errors; their
/// outputs, in order.
pub async fn join_all_within<T, E>(
    tasks: Vec<JoinHandle<Result<T, E>>>,
    timeout: Duration,
    what: &str,
    end: &str,
) -> Result<Vec<T>>
where
    anyhow::Error: From<E>,
{
    let mut outputs = Vec::with_capacity(tasks.len());
    for task in tasks {
        let output = tokio::time::timeout(timeout, task)
            .await
            .with_context(|| format!("timed out waiting for {what} to {end}"))?
            .with_context(|| format!("{what} panicked"))?;
        outputs.push(
            output
                .map_err(anyhow::Error::from)
                .context(format!("{what} failed"))?,
        );
    }
    Ok(outputs)
}

/// The instants a variant's run went through, before they become rates.
pub struct Timeline {
    pub publish_start: Instant,
    pub publish_end: Instant,
    pub last_ack: Instant,
    /// Samples taken just before `publish_start`, just after `publish_end` and just after `last_ack`.
    pub samples: [usage::Sample; 3],
    /// Steady-state mode: the publisher's worst lateness against its schedule.
    pub publisher_late: Option<Duration>,
}

/// One variant's raw figures in one round.
#[derive(Debug, Clone)]
pub struct RoundResult {
    pub jobs: u64,
    pub publish_secs: f64,
    /// First handler start → last ack.
    pub process_secs: f64,
    /// First publish → last ack.
    pub end_to_end_secs: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
    /// Jobs the workers reported done (queuegen only; the baseline acks all it reads).
    pub reported_done: Option<u64>,
    pub publish_usage: Usage,
    pub process_usage: Usage,
    /// Steady-state mode: µs from intended send to handler start, every job.
    pub steady: Option<Histogram<u64>>,
    /// Steady-state mode: the publisher's worst lateness against its schedule.
    pub publisher_late: Option<Duration>,
}

impl RoundResult {
    pub fn new(probe: &Probe, timeline: Timeline, reported_done: Option<u64>) -> Result<Self> {
        let first_start = match probe.first_start.load(Ordering::Relaxed) {
            0 => bail!("no handler ever started"),
            ns => probe.base + Duration::from_nanos(ns - 1),
        };
        let histogram: Vec<u64> = probe
            .latency_ms
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let percentile = |p: f64| stats::histogram_percentile(&histogram, p).unwrap_or(0) as f64;
        Ok(RoundResult {
            jobs: probe.jobs,
            publish_secs: (timeline.publish_end - timeline.publish_start).as_secs_f64(),
            process_secs: timeline
                .last_ack
                .saturating_duration_since(first_start)
                .as_secs_f64(),
            end_to_end_secs: (timeline.last_ack - timeline.publish_start).as_secs_f64(),
            latency_p50_ms: percentile(50.0),
            latency_p99_ms: percentile(99.0),
            latency_max_ms: percentile(100.0),
            reported_done,
            publish_usage: Usage::between(&timeline.samples[0], &timeline.samples[1]),
            process_usage: Usage::between(&timeline.samples[1], &timeline.samples[2]),
            steady: (probe.steady.as_ref()).and_then(|steady| Some(steady.lock().ok()?.clone())),
            publisher_late: timeline.publisher_late,
        })
    }

    pub fn enqueue_rate(&self) -> f64 {
        rate(self.jobs, self.publish_secs)
    }

    pub fn process_rate(&self) -> f64 {
        rate(self.jobs, self.process_secs)
    }

    pub fn end_to_end_rate(&self) -> f64 {
        rate(self.jobs, self.end_to_end_secs)
    }
}

fn rate(jobs: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        jobs as f64 / secs
    } else {
        f64::INFINITY
    }
}
