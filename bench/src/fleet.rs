//! Fleet mode (`--fleet W --idle S`): what a deployment's idle workers cost
//! the server, and how fast the same fleet drains a burst.
//!
//! The spec is docs-pipeline sized, scaled up: 4 queues of the `jobs`
//! queue's settings with 8, 16, 24 and 32 partitions (`fleetq0`..`fleetq3`,
//! a fresh key prefix). W workers, each a task with its own `Redis` (as W
//! processes would have), worker `w` on queue `w mod 4`, with their default
//! read block and recovery, scheduler and trimmer loops. Idle: nothing is
//! published for S seconds; server commands/s and CPU (and this process's
//! CPU) over that window. Burst: then `--jobs` jobs at once, spread evenly
//! over the queues in `publish_many` batches of `--batch`; its time is first
//! publish → last ack, as in the backlog mode.
//!
//! `--fleet` may be given several times: each size runs in turn on the same
//! server with its own key prefix, and the table compares each row's idle
//! commands with the first's. An idle worker sends only blocking reads (the
//! intake blocks again after an empty blocking read, without sweeping the
//! partitions), one per worker and read block, whatever the partitions; on
//! a Cluster, where one read cannot span slots, one blocking `XREAD` per
//! partition from the intake's watchers. Every `XREADGROUP` and `XREAD` of
//! the idle window (from `INFO commandstats`) is counted as a blocking read
//! and reported apart, and "other commands" are the rest, the loops' and
//! leases' share, also shown by name (a second table of the busiest), so
//! that a poll such as the pause flags' `EXISTS` cannot hide in a total.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use queuegen_runtime::{NewJob, QueueConfig, Redis, Worker};
use queuegen_tests::queues::envelopes::TestJob;
use queuegen_tests::queues::jobs;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::baseline::{job, tenant};
use crate::probe::{self, join_all_within, Probe};
use crate::queuegen::Bench;
use crate::usage::{self, Usage};
use crate::{report, Args};

/// Partitions of the fleet's four queues.
pub const PARTITIONS: [u16; 4] = [8, 16, 24, 32];

/// What one fleet run measured.
pub struct FleetResult {
    pub workers: usize,
    pub idle_secs: f64,
    pub idle: Usage,
    /// Calls per command over the idle window.
    pub idle_calls: BTreeMap<String, u64>,
    pub burst_jobs: u64,
    pub burst_secs: f64,
    pub burst: Usage,
}

impl FleetResult {
    pub fn idle_commands_per_sec(&self) -> f64 {
        self.idle.commands as f64 / self.idle_secs
    }

    /// Blocking reads per second while idle: every `XREADGROUP` of the
    /// window, and on a Cluster every `XREAD` (the intake's watchers).
    pub fn idle_blocking_reads_per_sec(&self) -> f64 {
        let calls = |name: &str| self.idle_calls.get(name).copied().unwrap_or(0);
        BLOCKING_READS.iter().map(|name| calls(name)).sum::<u64>() as f64 / self.idle_secs
    }

    /// Idle commands per second other than the blocking reads.
    pub fn idle_other_commands_per_sec(&self) -> f64 {
        self.idle_commands_per_sec() - self.idle_blocking_reads_per_sec()
    }

    /// Server CPU while idle, in percent of one core.
    pub fn idle_server_cpu_percent(&self) -> f64 {
        100.0 * self.idle.server_cpu_secs / self.idle_secs
    }

    pub fn idle_client_cpu_percent(&self) -> f64 {
        100.0 * self.idle.client_cpu_secs / self.idle_secs
    }

    pub fn burst_rate(&self) -> f64 {
        self.burst_jobs as f64 / self.burst_secs
    }
}

pub async fn run(args: &Args, url: &str, prefix: &str, workers: usize) -> Result<FleetResult> {
    let configs: Vec<QueueConfig> = PARTITIONS
        .iter()
        .enumerate()
        .map(|(q, &partitions)| {
            let mut config = QueueConfig {
                key_prefix: Cow::Owned(prefix.to_owned()),
                queue: Cow::Owned(format!("fleetq{q}")),
                partitions,
                ..jobs::CONFIG
            };
            config.handler.concurrency = args.concurrency;
            config
        })
        .collect();
    let redis = crate::queuegen::producer_redis(url, &configs).await?;
    let probe = Arc::new(Probe::new(args.jobs, false));
    let (stop, stopped) = watch::channel(false);
    let mut running = Vec::with_capacity(workers);
    for w in 0..workers {
        let worker_redis = Redis::connect(url).await.context("connecting a worker")?;
        let config = configs[w % configs.len()].clone();
        let handler = Bench {
            probe: probe.clone(),
            results: None,
            documents: None,
        };
        let worker =
            Worker::new(&worker_redis, config, handler).consumer_name(format!("{prefix}-w{w}"));
        let mut stopped = stopped.clone();
        running.push(tokio::spawn(async move {
            let report = worker
                .run_until(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await;
            // The worker's connection lives as long as its task.
            drop(worker_redis);
            report
        }));
    }

    let mut conn = redis.shared();
    // Let every worker start (group checks, first reads) before the idle window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_start = usage::sample(&mut conn).await?;
    let calls_start = usage::command_calls(&mut conn).await?;
    let idle_began = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(args.idle)).await;
    let idle_secs = idle_began.elapsed().as_secs_f64();
    let calls_end = usage::command_calls(&mut conn).await?;
    let idle_end = usage::sample(&mut conn).await?;

    let producers: Vec<_> = configs
        .iter()
        .map(|config| queuegen_runtime::Producer::<TestJob>::new(&redis, config.clone()))
        .collect();
    let keys: Vec<String> = configs.iter().flat_map(QueueConfig::ready_keys).collect();
    let (timeline, running) = probe::run_phases(
        args,
        &mut conn,
        &probe,
        &keys,
        &jobs::CONFIG.group,
        move || running,
        |range, _| {
            let producers = &producers;
            async move {
                // Batch by batch round the queues, so each gets a quarter.
                let producer =
                    &producers[(range.start / args.batch as u64) as usize % producers.len()];
                let batch = range.map(|n| NewJob::new(format!("job-{n}"), tenant(n), job(n)));
                producer.publish_many(batch).await.context("publish_many")?;
                Ok(())
            }
        },
    )
    .await?;
    let _ = stop.send(true);
    let budget = jobs::CONFIG.handler.shutdown_budget + args.timeout();
    let reports = join_all_within(running, budget, "a worker", "shut down").await?;
    let done: u64 = reports.iter().map(|report| report.done).sum();
    let timeline = timeline?;
    if done < args.jobs {
        bail!("the workers reported {done} jobs done of {}", args.jobs);
    }
    Ok(FleetResult {
        workers,
        idle_secs,
        idle: Usage::between(&idle_start, &idle_end),
        idle_calls: usage::calls_between(&calls_start, &calls_end),
        burst_jobs: args.jobs,
        burst_secs: (timeline.last_ack - timeline.publish_start).as_secs_f64(),
        burst: Usage::between(&timeline.samples[0], &timeline.samples[2]),
    })
}

/// The fleet table: one row per fleet size, in the order they ran.
pub fn markdown(results: &[FleetResult], cluster: bool) -> String {
    let deployment = if cluster {
        "a 3-primary Redis Cluster"
    } else {
        "one redis-server"
    };
    let first = &results[0];
    let mut out = format!(
        "Fleet: W workers (each its own `Redis`; worker w on queue w mod 4) over 4 queues of \
         {:?} partitions on {deployment}. Idle: {:.0} s with nothing published; then a burst of {} jobs \
         spread over the queues, first publish → last ack. Blocking reads: every `XREADGROUP` and `XREAD` \
         of the idle window (`INFO commandstats`); other commands: the rest, compared with the first row. \
         CPU in % of one core.\n\n",
        PARTITIONS, first.idle_secs, first.burst_jobs
    );
    out.push_str(
        "| workers | idle commands/s | blocking reads/s | other commands/s | other vs first \
         | idle server CPU | idle client CPU | burst end-to-end | burst rate | burst server CPU | burst commands |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for result in results {
        out.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.2}× | {:.1}% | {:.1}% | {:.2} s | {:.0} jobs/s | {:.1} µs/job | {:.3} cmd/job |\n",
            result.workers,
            result.idle_commands_per_sec(),
            result.idle_blocking_reads_per_sec(),
            result.idle_other_commands_per_sec(),
            result.idle_other_commands_per_sec() / first.idle_other_commands_per_sec(),
            result.idle_server_cpu_percent(),
            result.idle_client_cpu_percent(),
            result.burst_secs,
            result.burst_rate(),
            result.burst.server_us_per_job(result.burst_jobs),
            result.burst.commands_per_job(result.burst_jobs),
        ));
    }
    out.push_str(&other_commands_table(results));
    out
}

/// How many of the busiest non-read commands [`other_commands_table`] shows.
const TOP_OTHER_COMMANDS: usize = 10;

/// The blocking reads' names in `INFO commandstats`, left out of the
/// other commands.
const BLOCKING_READS: [&str; 2] = ["xreadgroup", "xread"];

/// The idle window's non-read commands by name, per second: the
/// [`TOP_OTHER_COMMANDS`] busiest in any row (so that no polling hides in
/// a total), one row per fleet size.
fn other_commands_table(results: &[FleetResult]) -> String {
    let mut busiest: BTreeMap<&str, f64> = BTreeMap::new();
    for result in results {
        for (name, &calls) in &result.idle_calls {
            if BLOCKING_READS.contains(&name.as_str()) {
                continue;
            }
            let rate = calls as f64 / result.idle_secs;
            let entry = busiest.entry(name.as_str()).or_default();
            *entry = entry.max(rate);
        }
    }
    let mut names: Vec<(&str, f64)> = busiest.into_iter().collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    names.truncate(TOP_OTHER_COMMANDS);
    if names.is_empty() {
        return "\nNo command but the blocking reads ran while idle.\n".to_owned();
    }
    let mut out = String::from(
        "\nOther commands while idle, by name (calls/s from `INFO commandstats`, which also \
         counts the commands a Function runs inside an `FCALL`), the busiest in any row:\n\n",
    );
    out.push_str("| workers |");
    for (name, _) in &names {
        out.push_str(&format!(" `{name}` |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(names.len()));
    out.push('\n');
    for result in results {
        out.push_str(&format!("| {} |", result.workers));
        for (name, _) in &names {
            let calls = result.idle_calls.get(*name).copied().unwrap_or(0);
            out.push_str(&format!(" {:.1} |", calls as f64 / result.idle_secs));
        }
        out.push('\n');
    }
    out
}

/// The fleet mode's `latest.json` (before `report::finish` adds the run's facts).
pub fn json(args: &Args, results: &[FleetResult]) -> Value {
    json!({
        "settings": {
            "batch": args.batch,
            "concurrency": args.concurrency,
        },
        "fleets": results.iter().map(fleet_json).collect::<Vec<_>>(),
    })
}

/// One fleet's figures.
fn fleet_json(result: &FleetResult) -> Value {
    json!({
        "workers": result.workers,
        "queue_partitions": PARTITIONS,
        "idle_secs": result.idle_secs,
        "idle_server_commands_per_sec": result.idle_commands_per_sec(),
        "idle_blocking_reads_per_sec": result.idle_blocking_reads_per_sec(),
        "idle_other_commands_per_sec": result.idle_other_commands_per_sec(),
        "idle_calls": result.idle_calls,
        "idle_server_cpu_percent": result.idle_server_cpu_percent(),
        "idle_client_cpu_percent": result.idle_client_cpu_percent(),
        "idle_servers": report::servers_json(&result.idle.servers),
        "burst_jobs": result.burst_jobs,
        "burst_end_to_end_secs": result.burst_secs,
        "burst_jobs_per_sec": result.burst_rate(),
        "burst_server_cpu_us_per_job": result.burst.server_us_per_job(result.burst_jobs),
        "burst_commands_per_job": result.burst.commands_per_job(result.burst_jobs),
    })
}
