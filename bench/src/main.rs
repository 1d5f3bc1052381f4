//! `queuegen-bench`: the hand-written redis-rs baseline and queuegen's generated
//! producer and workers, measured side by side on fresh keys each round.
//!
//! This file holds the arguments and the run: start (or connect to) Redis,
//! load the Function library, run every variant once per round, then print
//! the markdown table and write the JSON report.

mod baseline;
mod cluster_baseline;
mod fleet;
mod probe;
mod queuegen;
mod report;
mod stats;
mod steady;
mod telemetry;
mod trim;
mod usage;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::probe::RoundResult;

/// Measures queuegen against a hand-written redis-rs work-queue loop.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "queuegen-bench",
    after_help = "Examples:\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --rounds 3\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --partitions 1\n  \
        cargo run --release -p queuegen-bench -- --jobs 50000 --partitions 64\n  \
        cargo run --release -p queuegen-bench -- --variant base --variant qg8 --rounds 5\n  \
        cargo run --release -p queuegen-bench -- --variant base1 --variant qg1 --variant baseR --variant qg8r\n  \
        cargo run --release -p queuegen-bench -- --rate 2000 --seconds 20 --rounds 1\n  \
        cargo run --release -p queuegen-bench -- --rate 20000 --seconds 20 --variant base --variant qg8\n  \
        cargo run --release -p queuegen-bench -- --fleet 10 --fleet 200 --idle 30 --jobs 100000\n  \
        cargo run --release -p queuegen-bench -- --variant trim\n  \
        cargo run --release -p queuegen-bench -- --variant trim --trim-entries 10000 --trim-entries 5000000\n  \
        cargo run --release -p queuegen-bench -- --cluster --variant base --variant qg8\n  \
        cargo run --release -p queuegen-bench -- --redis redis://127.0.0.1:7000/ --jobs 500000\n\n\
        Without --redis a private redis-server (from $REDIS_SERVER or PATH) is started on a\n\
        free loopback port and stopped at the end; with --cluster, a private 6-node Redis\n\
        Cluster (3 primaries, 3 replicas). A --redis URL may name a Cluster node: the bench\n\
        tells. With --redis nothing is flushed: every variant of every round uses its own\n\
        key prefix and deletes its keys afterwards."
)]
pub struct Args {
    /// Use this Redis (a server or a Cluster node) instead of starting a private redis-server.
    #[arg(long, value_name = "URL", conflicts_with = "cluster")]
    pub redis: Option<String>,
    /// Start a private 6-node Redis Cluster instead of one redis-server. The
    /// baseline then uses the same partitioned streams as queuegen, and the
    /// report shows each primary's share of the server CPU.
    #[arg(long)]
    pub cluster: bool,
    /// Jobs per variant and round.
    #[arg(long, default_value_t = 50_000, value_name = "N")]
    pub jobs: u64,
    /// Partitions of the queuegen queue (on one server the baseline uses one
    /// stream; on a Cluster, this many, with the same hash tags).
    #[arg(long, default_value_t = 4, value_name = "P")]
    pub partitions: u16,
    /// Rounds; each figure is reported as the median over rounds with min–max.
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub rounds: u32,
    /// Where the JSON report goes (`latest.json` in it).
    #[arg(long, default_value = "target/bench", value_name = "DIR")]
    pub out: PathBuf,
    /// Jobs per `publish_many` call and per baseline XADD pipeline.
    #[arg(long, default_value_t = 1_000, value_name = "B")]
    pub batch: usize,
    /// Handler concurrency of each queuegen worker (its read COUNT), in place
    /// of the spec's 8; the baseline reads COUNT 100.
    #[arg(long, default_value_t = 100, value_name = "C")]
    pub concurrency: usize,
    /// Longest wait, in seconds, for any one phase (publish, processing, shutdown).
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub timeout: u64,
    /// Run only these variants (repeatable): base, qg8, qg8m, qg8mt, base1,
    /// qg1, baseR, qg8r, trim. Default: all but trim (with --rate: base, qg8,
    /// base1, qg1). Each queuegen ratio is against its own baseline: qg1's
    /// against base1 (one consumer), qg8r's against baseR (8 consumers + one
    /// result SET per job), the others' against base; without it, no ratio.
    /// `trim` measures the commands of one trim pass per --trim-entries length.
    #[arg(long = "variant", value_name = "SLUG", value_parser = Variant::parse_slug)]
    pub variants: Vec<Variant>,
    /// Ready-stream lengths the trim variant measures a pass at (repeatable).
    #[arg(long = "trim-entries", value_name = "N", default_values_t = [10_000u64, 1_000_000])]
    pub trim_entries: Vec<u64>,
    /// Steady-state latency instead of draining a backlog: an open-loop
    /// publisher sends R jobs/s on a fixed schedule (for --seconds; --jobs
    /// is then R × S) while the consumers run, and latency is handler start
    /// minus each job's intended send time (p50/p99/p99.9 from an HDR
    /// histogram over every round).
    #[arg(long, value_name = "R", requires = "seconds")]
    pub rate: Option<f64>,
    /// Length of the steady-state run, in seconds (with --rate).
    #[arg(long, value_name = "S", requires = "rate")]
    pub seconds: Option<f64>,
    /// Fleet mode instead of the variants: W queuegen workers, each with its
    /// own connection, over 4 queues of 8, 16, 24 and 32 partitions; idle
    /// for --idle seconds (server commands/s and CPU), then a burst of
    /// --jobs jobs (its end-to-end time). One round. Repeatable: each size
    /// runs in turn, one row each, compared with the first.
    #[arg(long, value_name = "W", conflicts_with_all = ["rate", "variants"])]
    pub fleet: Vec<usize>,
    /// Idle window of the fleet mode, in seconds.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub idle: f64,
}

impl Args {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// The variants of one round, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The hand-written redis-rs loop: 8 consumers (on a Cluster, one per
    /// partition, at least 8) or one (`single`), with or without one result
    /// `SET … NX GET PX` per job (`results`).
    Baseline { single: bool, results: bool },
    /// `results`: each job commits a result to the Redis result store
    /// (`RedisResults`) before it reports `Done`. `telemetry`: each worker
    /// records its metrics into a registry of its own (as one process
    /// would). `tracing`: a tracing subscriber (fmt, to a sink) is on at
    /// `info`, so the per-job span is built.
    Queuegen {
        workers: usize,
        results: bool,
        telemetry: bool,
        tracing: bool,
    },
    /// One trim pass over a partition (`--variant trim` only; not part of the rounds).
    Trim,
}

impl Variant {
    pub const BASE: Variant = Variant::Baseline {
        single: false,
        results: false,
    };
    pub const BASE1: Variant = Variant::Baseline {
        single: true,
        results: false,
    };
    pub const BASE_RESULTS: Variant = Variant::Baseline {
        single: false,
        results: true,
    };
    pub const QG1: Variant = Variant::Queuegen {
        workers: 1,
        results: false,
        telemetry: false,
        tracing: false,
    };
    pub const QG8: Variant = Variant::Queuegen {
        workers: 8,
        results: false,
        telemetry: false,
        tracing: false,
    };

    /// Every round variant, in the order they run: each queuegen variant
    /// after the baseline its ratio uses.
    pub const ALL: [Variant; 8] = [
        Variant::BASE,
        Variant::QG8,
        Variant::Queuegen {
            workers: 8,
            results: false,
            telemetry: true,
            tracing: false,
        },
        Variant::Queuegen {
            workers: 8,
            results: false,
            telemetry: true,
            tracing: true,
        },
        Variant::BASE1,
        Variant::QG1,
        Variant::BASE_RESULTS,
        Variant::Queuegen {
            workers: 8,
            results: true,
            telemetry: false,
            tracing: false,
        },
    ];

    /// The variants a steady-state run does by default.
    pub const STEADY: [Variant; 4] = [Variant::BASE, Variant::QG8, Variant::BASE1, Variant::QG1];

    /// The baseline this variant's ratios are against (none for a baseline).
    pub fn reference(self) -> Option<Variant> {
        match self {
            Variant::Baseline { .. } | Variant::Trim => None,
            Variant::Queuegen { results: true, .. } => Some(Variant::BASE_RESULTS),
            Variant::Queuegen { workers: 1, .. } => Some(Variant::BASE1),
            Variant::Queuegen { .. } => Some(Variant::BASE),
        }
    }

    pub fn is_baseline(self) -> bool {
        matches!(self, Variant::Baseline { .. })
    }

    pub fn name(self) -> String {
        match self {
            Variant::Trim => "trim pass".to_owned(),
            Variant::Baseline { single, results } => format!(
                "baseline (redis-rs, {}{})",
                if single { "1 consumer" } else { "8 consumers" },
                if results { " + result SET" } else { "" }
            ),
            Variant::Queuegen {
                workers,
                results,
                telemetry,
                tracing,
            } => {
                let workers = match workers {
                    1 => "1 worker".to_owned(),
                    n => format!("{n} workers"),
                };
                let store = if results { " + result store" } else { "" };
                let telemetry = match (telemetry, tracing) {
                    (true, true) => " + metrics + tracing at info",
                    (true, false) => " + metrics",
                    (false, true) => " + tracing at info",
                    (false, false) => "",
                };
                format!("queuegen, {workers}{store}{telemetry}")
            }
        }
    }

    /// The variant a `--variant` value names.
    fn parse_slug(slug: &str) -> Result<Variant, String> {
        Variant::ALL
            .into_iter()
            .chain([Variant::Trim])
            .find(|variant| variant.slug() == slug)
            .ok_or_else(|| {
                let known: Vec<String> = Variant::ALL
                    .iter()
                    .chain(&[Variant::Trim])
                    .map(|v| v.slug())
                    .collect();
                format!("unknown variant {slug:?}; known: {}", known.join(", "))
            })
    }

    pub fn slug(self) -> String {
        match self {
            Variant::Trim => "trim".to_owned(),
            Variant::Baseline { single, results } => format!(
                "base{}{}",
                if single { "1" } else { "" },
                if results { "R" } else { "" }
            ),
            Variant::Queuegen {
                workers,
                results,
                telemetry,
                tracing,
            } => format!(
                "qg{workers}{}{}{}",
                if results { "r" } else { "" },
                if telemetry { "m" } else { "" },
                if tracing { "t" } else { "" }
            ),
        }
    }
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if let (Some(rate), Some(seconds)) = (args.rate, args.seconds) {
        if !(rate > 0.0 && seconds > 0.0) {
            bail!("--rate and --seconds must be above 0");
        }
        args.jobs = (rate * seconds).round().max(1.0) as u64;
        if args.variants.contains(&Variant::Trim) {
            bail!("the trim variant does not run in steady-state mode (--rate)");
        }
    }
    if args.jobs == 0 || args.rounds == 0 || args.partitions == 0 {
        bail!("--jobs, --rounds and --partitions must be at least 1");
    }
    if args.fleet.contains(&0) || !args.idle.is_finite() || args.idle <= 0.0 {
        bail!("--fleet and --idle must be above 0");
    }
    if args.batch == 0 || args.concurrency == 0 {
        bail!("--batch and --concurrency must be at least 1");
    }
    // Dropped at the end of main (or on an error): kills and reaps the servers.
    let private = match (&args.redis, args.cluster) {
        (Some(_), _) => None,
        (None, false) => Some(Private::Server(
            std::panic::catch_unwind(queuegen_tests::RedisServer::start)
                .map_err(|_| anyhow::anyhow!("could not start a private redis-server"))?,
        )),
        (None, true) => Some(Private::Cluster(
            std::panic::catch_unwind(queuegen_tests::RedisCluster::start)
                .map_err(|_| anyhow::anyhow!("could not start a private Redis Cluster"))?,
        )),
    };
    let url = match (&args.redis, &private) {
        (Some(url), _) => url.clone(),
        (None, Some(Private::Server(server))) => server.url(),
        (None, Some(Private::Cluster(cluster))) => cluster.url(),
        (None, None) => unreachable!("a server is started when no URL is given"),
    };
    telemetry::install();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let result = runtime.block_on(run(&args, &url));
    // Stop background tasks before the server goes away.
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(private);
    result
}

/// The servers this run started (none with `--redis`).
enum Private {
    Server(queuegen_tests::RedisServer),
    Cluster(queuegen_tests::RedisCluster),
}

async fn run(args: &Args, url: &str) -> Result<()> {
    let redis = queuegen_runtime::Redis::connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let code = std::fs::read_to_string(queuegen_tests::library::tests_library_path())
        .context("reading the tests' Function library (tests/deploy/functions.lua)")?;
    queuegen_runtime::load_library(&redis, &code)
        .await
        .context("loading the Function library")?;
    let redis_version = report::redis_version(&redis).await?;
    let primaries = redis.primaries().await?.len();
    let deployment = if redis.is_cluster() {
        format!("a Cluster of {primaries} primaries seeded")
    } else {
        "a server".to_owned()
    };
    let load = match (args.fleet.as_slice(), args.rate, args.seconds) {
        ([_, ..], _, _) => format!(
            "fleets of {:?} workers over 4 queues, idle {} s, then a burst of {} jobs",
            args.fleet, args.idle, args.jobs
        ),
        ([], Some(rate), Some(seconds)) => format!(
            "steady state, {rate} jobs/s for {seconds} s, {} jobs, {} partitions, {} rounds",
            args.jobs, args.partitions, args.rounds
        ),
        _ => format!(
            "backlog, {} jobs, {} partitions, {} rounds",
            args.jobs, args.partitions, args.rounds
        ),
    };
    eprintln!("queuegen-bench: redis {redis_version}, {deployment} at {url}; {load}");

    if !args.fleet.is_empty() {
        let mut results = Vec::with_capacity(args.fleet.len());
        for &workers in &args.fleet {
            let prefix = format!("qgbench{}fleet{workers}", std::process::id());
            let outcome = fleet::run(
                args,
                url,
                &prefix,
                workers,
                Duration::from_secs_f64(args.idle),
            )
            .await;
            let cleaned = report::delete_prefix(&redis, &prefix).await;
            let result = outcome.with_context(|| format!("the fleet run of {workers} workers"))?;
            cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
            eprintln!(
                "queuegen-bench: {workers} workers: {:.0} idle commands/s, {:.0} of them blocking reads",
                result.idle_commands_per_sec(),
                result.idle_blocking_reads_per_sec()
            );
            results.push(result);
        }
        println!("{}", fleet::markdown(&results, redis.is_cluster()));
        println!("{}", report::machine_line(&redis_version));
        let path = report::write_fleet_json(args, redis.is_cluster(), &redis_version, &results)?;
        eprintln!("queuegen-bench: wrote {}", path.display());
        return Ok(());
    }

    if args.variants.contains(&Variant::Trim) {
        let prefix = format!("qgbench{}trim", std::process::id());
        let costs = trim::run(&redis, &prefix, &args.trim_entries).await?;
        println!("{}", trim::markdown(&costs));
        if args
            .variants
            .iter()
            .all(|variant| *variant == Variant::Trim)
        {
            println!("{}", report::machine_line(&redis_version));
            return Ok(());
        }
    }

    let mut rounds: Vec<Vec<(Variant, RoundResult)>> = Vec::new();
    for round in 0..args.rounds {
        let mut results = Vec::new();
        for variant in Variant::ALL {
            let chosen = match (args.variants.is_empty(), args.rate) {
                (false, _) => args.variants.contains(&variant),
                (true, Some(_)) => Variant::STEADY.contains(&variant),
                (true, None) => true,
            };
            if !chosen {
                continue;
            }
            let prefix = format!("qgbench{}r{round}{}", std::process::id(), variant.slug());
            let outcome = match variant {
                Variant::Baseline { single, results } if redis.is_cluster() => {
                    cluster_baseline::run(args, url, &redis, &prefix, single, results).await
                }
                Variant::Baseline { single, results } => {
                    baseline::run(args, url, &prefix, single, results).await
                }
                Variant::Queuegen {
                    workers,
                    results,
                    telemetry,
                    tracing,
                } => {
                    let _tracing = tracing.then(telemetry::TracingOn::start);
                    queuegen::run(args, url, &prefix, workers, results, telemetry).await
                }
                Variant::Trim => unreachable!("the trim variant is not one of the rounds"),
            };
            // Clean up even after a failed variant, then report the failure.
            let cleaned = report::delete_prefix(&redis, &prefix).await;
            let result = outcome.with_context(|| format!("round {round}, {}", variant.name()))?;
            cleaned.with_context(|| format!("deleting the keys of {prefix}"))?;
            match &result.steady {
                Some(histogram) => eprintln!(
                    "round {round}: {:<44} sent {:>9.0}/s  p50 {:>8.2} ms  p99 {:>8.2} ms  p99.9 {:>8.2} ms",
                    variant.name(),
                    result.enqueue_rate(),
                    histogram.value_at_quantile(0.5) as f64 / 1000.0,
                    histogram.value_at_quantile(0.99) as f64 / 1000.0,
                    histogram.value_at_quantile(0.999) as f64 / 1000.0,
                ),
                None => eprintln!(
                    "round {round}: {:<44} enqueue {:>9.0}/s  process {:>9.0}/s  end-to-end {:>9.0}/s",
                    variant.name(),
                    result.enqueue_rate(),
                    result.process_rate(),
                    result.end_to_end_rate()
                ),
            }
            results.push((variant, result));
        }
        rounds.push(results);
    }

    let table = match args.rate {
        Some(_) => report::steady_markdown(args, redis.is_cluster(), &rounds),
        None => report::markdown(args, redis.is_cluster(), &rounds),
    };
    println!("{table}");
    println!("{}", report::machine_line(&redis_version));
    let path = report::write_json(args, redis.is_cluster(), &redis_version, &rounds).await?;
    eprintln!("queuegen-bench: wrote {}", path.display());
    Ok(())
}
