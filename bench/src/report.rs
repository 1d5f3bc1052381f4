//! The results: the markdown table on stdout and the JSON file with every
//! round's raw numbers, the machine, the Redis version, the commit, the date
//! and the command line; plus the Redis housekeeping the run needs.

use std::process::Command;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use queuegen_runtime::Redis;
use serde_json::{json, Value};

use crate::pg::ServerInfo;
use crate::probe::RoundResult;
use crate::usage::{ServerUsage, Usage};
use crate::{stats, steady, Args, Variant};

/// `redis_version` from `INFO server` of the (first) primary.
pub async fn redis_version(redis: &Redis) -> Result<String> {
    let primary = redis.primaries().await?.remove(0);
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut primary.connection().await?)
        .await
        .context("INFO server")?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_owned())
}

/// Deletes every key starting with `prefix:` (SCAN + UNLINK on every primary).
pub async fn delete_prefix(redis: &Redis, prefix: &str) -> Result<()> {
    let pattern = format!("{prefix}:*");
    for primary in redis.primaries().await? {
        let mut conn = primary.connection().await?;
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg(&["MATCH", &pattern, "COUNT", "1000"])
                .query_async(&mut conn)
                .await
                .context("SCAN")?;
            // One key per UNLINK: on a Cluster node, keys of one call must share a slot.
            let mut unlink = redis::pipe();
            for key in &keys {
                unlink.cmd("UNLINK").arg(key).ignore();
            }
            if !keys.is_empty() {
                unlink
                    .query_async::<()>(&mut conn)
                    .await
                    .context("UNLINK")?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(())
}

/// One figure of one variant over all rounds.
struct Figure {
    median: f64,
    min: f64,
    max: f64,
}

impl Figure {
    fn of(values: &[f64]) -> Figure {
        Figure {
            median: stats::median(values).unwrap_or(f64::NAN),
            min: stats::min(values).unwrap_or(f64::NAN),
            max: stats::max(values).unwrap_or(f64::NAN),
        }
    }

    fn json(&self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

type Metric = (&'static str, &'static str, fn(&RoundResult) -> f64);

/// Name, unit and extractor of every reported figure.
const METRICS: [Metric; 5] = [
    ("enqueue", "jobs/s", RoundResult::enqueue_rate),
    ("process", "jobs/s", RoundResult::process_rate),
    ("end_to_end", "jobs/s", RoundResult::end_to_end_rate),
    ("latency_p50", "ms", |r| r.latency_p50_ms),
    ("latency_p99", "ms", |r| r.latency_p99_ms),
];

/// The process phase's costs per job, in both cost tables.
const PROCESS_CLIENT_CPU: Metric = ("process_client_cpu", "µs/job", |r| {
    r.process_usage.client_us_per_job(r.jobs)
});
const PROCESS_SERVER_CPU: Metric = ("process_server_cpu", "µs/job", |r| {
    r.process_usage.server_us_per_job(r.jobs)
});
const PROCESS_COMMANDS: Metric = ("process_commands", "cmd/job", |r| {
    r.process_usage.commands_per_job(r.jobs)
});

/// Where each phase's time went, per job (see `usage`).
const COSTS: [Metric; 6] = [
    ("publish_client_cpu", "µs/job", |r| {
        r.publish_usage.client_us_per_job(r.jobs)
    }),
    ("publish_server_cpu", "µs/job", |r| {
        r.publish_usage.server_us_per_job(r.jobs)
    }),
    ("publish_commands", "cmd/job", |r| {
        r.publish_usage.commands_per_job(r.jobs)
    }),
    PROCESS_CLIENT_CPU,
    PROCESS_SERVER_CPU,
    PROCESS_COMMANDS,
];

/// Where the process phase's CPU went, for the PostgreSQL variants.
const PG_COSTS: [Metric; 6] = [
    ("end_to_end", "jobs/s", RoundResult::end_to_end_rate),
    ("process_postgres_cpu", "µs/job", |r| {
        r.process_usage
            .postgres_cpu_secs
            .map_or(f64::NAN, |secs| secs * 1e6 / r.jobs as f64)
    }),
    PROCESS_CLIENT_CPU,
    PROCESS_SERVER_CPU,
    PROCESS_COMMANDS,
    ("process_cpus_busy", "CPUs", |r| {
        let usage = &r.process_usage;
        usage.postgres_cpu_secs.map_or(f64::NAN, |pg| {
            (pg + usage.client_cpu_secs + usage.server_cpu_secs) / r.process_secs
        })
    }),
];

/// Every round's results, each the variants' in the order they ran.
pub type Rounds = [Vec<(Variant, RoundResult)>];

/// `variant`'s result of every round.
fn results_of(rounds: &Rounds, variant: Variant) -> impl Iterator<Item = &RoundResult> {
    rounds
        .iter()
        .flatten()
        .filter(move |(v, _)| *v == variant)
        .map(|(_, result)| result)
}

fn values(rounds: &Rounds, variant: Variant, metric: &Metric) -> Vec<f64> {
    results_of(rounds, variant).map(metric.2).collect()
}

/// A rate for a table cell: whole numbers, thousands as `k` from 10,000.
pub fn rate(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1000.0)
    } else {
        format!("{value:.0}")
    }
}

fn cell(metric: &Metric, figure: &Figure, baseline: Option<&Figure>) -> String {
    if figure.median.is_nan() {
        return "—".to_owned();
    }
    let text = match metric.1 {
        "CPUs" => format!("{:.2}", figure.median),
        "µs/job" => format!("{:.1} µs", figure.median),
        "cmd/job" => format!("{:.3}", figure.median),
        "ms" => format!(
            "{:.0} ms ({:.0}–{:.0})",
            figure.median, figure.min, figure.max
        ),
        _ => format!(
            "{}/s ({}–{})",
            rate(figure.median),
            rate(figure.min),
            rate(figure.max)
        ),
    };
    match baseline {
        Some(baseline) if !baseline.median.is_nan() => {
            format!("{text} **{:.2}×**", figure.median / baseline.median)
        }
        _ => text,
    }
}

/// The baseline `variant`'s ratios are against, if it ran.
fn reference(rounds: &Rounds, variant: Variant) -> Option<Variant> {
    variant
        .reference()
        .filter(|reference| ran(rounds).contains(reference))
}

/// The "ratio vs" cell: the slug of the baseline the ratios use.
fn reference_cell(rounds: &Rounds, variant: Variant) -> String {
    match (variant.is_baseline(), reference(rounds, variant)) {
        // An entry-shape baseline is compared with the shape it would replace.
        (_, Some(reference)) => reference.slug(),
        (true, None) => format!("({})", variant.slug()),
        (false, None) => "— (not run)".to_owned(),
    }
}

/// The table: one row per variant, medians with min–max, ratio to the
/// baseline's median; on a Cluster, each primary's share of the server CPU.
pub fn markdown(args: &Args, cluster: bool, rounds: &Rounds) -> String {
    let streams = if cluster {
        "a 3-primary Redis Cluster; the baseline uses the same partitions"
    } else {
        "one redis-server; the baseline uses one stream"
    };
    let mut out = format!(
        "{}, {} partition(s) ({streams}), {} round(s), \
         publish batches of {}, worker concurrency {}; median (min–max), ratio = queuegen median / \
         median of the baseline named under \"ratio vs\" (base1: one consumer; baseR: 8 consumers \
         + one result SET per job; baseP: 8 consumers + one PostgreSQL transaction per job; \
         base: 8 consumers)\n\n",
        crate::jobs_text(args, &ran(rounds)),
        args.partitions,
        args.rounds,
        args.batch,
        args.concurrency
    );
    out.push_str(
        "| variant | ratio vs | enqueue | process | end-to-end | p50 publish→start | p99 publish→start |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|\n");
    push_rows(&mut out, rounds, &METRICS, &ran(rounds));
    out.push_str(
        "\nCost per job (median; client = this process's CPU, server = redis-server's CPU \
         and commands from INFO; ratio to the same baseline's):\n\n",
    );
    out.push_str(
        "| variant | ratio vs | publish client CPU | publish server CPU | publish commands \
         | process client CPU | process server CPU | process commands |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    push_rows(&mut out, rounds, &COSTS, &ran(rounds));
    if cluster {
        for (phase, usage) in PHASES {
            push_spread(&mut out, rounds, phase, usage);
        }
    }
    out
}

/// What baseP and qg8p measure, and on which PostgreSQL, with where their
/// CPU went: under the table.
pub fn postgres_note(args: &Args, pg: &ServerInfo, rounds: &Rounds) -> String {
    let mut out = format!(
        "\nPostgreSQL variants ({} jobs per round; end-to-end = first publish → last ack, as above): \
         each job commits one transaction holding a `documents` row and the job's marker row in \
         `results` before its ack. baseP: hand-written tokio-postgres per job (`transaction()`, the \
         two INSERTs as cached prepared statements, `commit()`), a read's jobs in flight together, \
         then one XACK; qg8p: 8 workers, `PgResults::begin` (BEGIN + marker INSERT) → INSERT \
         INTO documents (`prepare_cached`) → `commit(b\"\")` → `Outcome::Done`. Each consumer / \
         worker has its own pool of {} connections ({} per side), a fresh schema per variant and \
         round, and `documents` is checked to hold exactly one row per job. {}. Server CPU and \
         commands above are redis-server's only.\n",
        args.pg_jobs,
        args.pg_pool,
        8 * args.pg_pool,
        pg.line()
    );
    let variants: Vec<Variant> = ran(rounds)
        .into_iter()
        .filter(|variant| variant.is_postgres())
        .collect();
    // Steady state has no process phase to speak of: its table shows CPU.
    if variants.is_empty() || args.rate.is_some() {
        return out;
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    out.push_str(&format!(
        "\nWhere the process phase's CPU went, per job (median; PostgreSQL = every process of the \
         private server, from /proc, — with --postgres-url; bench = this process, both sides' \
         PostgreSQL and Redis clients; CPUs busy = the three together ÷ process time, of {cpus}):\n\n"
    ));
    out.push_str(
        "| variant | ratio vs | end-to-end | PostgreSQL CPU | bench CPU | redis-server CPU \
         | Redis commands | CPUs busy |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    push_rows(&mut out, rounds, &PG_COSTS, &variants);
    out
}

/// The steady-state percentiles reported, as (label, quantile).
const STEADY_QUANTILES: [(&str, f64); 4] =
    [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0)];

/// Every round's steady-state histogram of `variant`, merged.
fn steady_histogram(rounds: &Rounds, variant: Variant) -> Histogram<u64> {
    let mut merged = steady::histogram();
    for result in results_of(rounds, variant) {
        if let Some(histogram) = &result.steady {
            // Same bounds on both sides: adding cannot fail.
            let _ = merged.add(histogram);
        }
    }
    merged
}

/// Median over rounds of `variant`'s server and client CPU per job, both phases together.
fn steady_cpu(rounds: &Rounds, variant: Variant) -> (f64, f64) {
    let per_job = |cpu: fn(&Usage) -> f64| {
        let values: Vec<f64> = results_of(rounds, variant)
            .map(|r| (cpu(&r.publish_usage) + cpu(&r.process_usage)) * 1e6 / r.jobs as f64)
            .collect();
        stats::median(&values).unwrap_or(f64::NAN)
    };
    (
        per_job(|u| u.server_cpu_secs),
        per_job(|u| u.client_cpu_secs),
    )
}

/// The publisher's worst lateness against its schedule over every round of `variant`, ms.
fn publisher_late_ms(rounds: &Rounds, variant: Variant) -> f64 {
    results_of(rounds, variant)
        .filter_map(|r| r.publisher_late)
        .map(|late| late.as_secs_f64() * 1e3)
        .fold(0.0, f64::max)
}

/// The steady-state table: per variant, latency from each job's intended
/// send time to its handler start over every round, ratio to its baseline.
pub fn steady_markdown(args: &Args, cluster: bool, rounds: &Rounds) -> String {
    let streams = if cluster {
        "a 3-primary Redis Cluster; the baselines use the same partitions"
    } else {
        "one redis-server; the baselines use one stream"
    };
    let mut out = format!(
        "Steady state: an open-loop publisher at {} jobs/s for {} s ({} jobs per round), {} partition(s) \
         ({streams}), {} round(s), worker concurrency {}. Latency = handler start − the job's intended \
         send time (a late publisher counts), every job of every round in one HDR histogram; it includes \
         the publisher's timer granularity (about 1 ms). Ratio = queuegen / the baseline under \"ratio vs\". \
         CPU = server and client CPU per job over the whole run.\n\n",
        args.rate.unwrap_or_default(),
        args.seconds.unwrap_or_default(),
        args.jobs,
        args.partitions,
        args.rounds,
        args.concurrency
    );
    out.push_str(
        "| variant | ratio vs | p50 | p99 | p99.9 | max | publisher late (max) | server CPU | client CPU |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for variant in ran(rounds) {
        let histogram = steady_histogram(rounds, variant);
        let baseline = reference(rounds, variant).map(|r| steady_histogram(rounds, r));
        let cells: Vec<String> = STEADY_QUANTILES
            .iter()
            .map(|(_, q)| {
                let ms = histogram.value_at_quantile(*q) as f64 / 1e3;
                match &baseline {
                    Some(baseline) => format!(
                        "{ms:.2} ms **{:.2}×**",
                        histogram.value_at_quantile(*q) as f64
                            / baseline.value_at_quantile(*q) as f64
                    ),
                    None => format!("{ms:.2} ms"),
                }
            })
            .collect();
        let (server, client) = steady_cpu(rounds, variant);
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} ms | {server:.1} µs | {client:.1} µs |\n",
            variant.name(),
            reference_cell(rounds, variant),
            cells.join(" | "),
            publisher_late_ms(rounds, variant),
        ));
    }
    out
}

/// The steady-state figures of the JSON report (`None` outside that mode).
fn steady_json(args: &Args, rounds: &Rounds) -> Option<Value> {
    args.rate?;
    let variants: Vec<Value> = ran(rounds)
        .into_iter()
        .map(|variant| {
            let histogram = steady_histogram(rounds, variant);
            let mut latency = serde_json::Map::new();
            for (label, q) in STEADY_QUANTILES {
                latency.insert(format!("{label}_us"), json!(histogram.value_at_quantile(q)));
            }
            latency.insert("mean_us".to_owned(), json!(histogram.mean()));
            latency.insert("count".to_owned(), json!(histogram.len()));
            let ratios = reference(rounds, variant).map(|reference| {
                let baseline = steady_histogram(rounds, reference);
                let ratios: serde_json::Map<String, Value> = STEADY_QUANTILES
                    .iter()
                    .map(|(label, q)| {
                        let ratio = histogram.value_at_quantile(*q) as f64
                            / baseline.value_at_quantile(*q) as f64;
                        (label.to_string(), json!(ratio))
                    })
                    .collect();
                ratios
            });
            let (server, client) = steady_cpu(rounds, variant);
            json!({
                "variant": variant.name(),
                "slug": variant.slug(),
                "ratio_baseline": reference(rounds, variant).map(Variant::slug),
                "latency": latency,
                "ratio_to_baseline": ratios,
                "publisher_late_max_ms": publisher_late_ms(rounds, variant),
                "server_cpu_us_per_job": server,
                "client_cpu_us_per_job": client,
            })
        })
        .collect();
    Some(json!({
        "rate_jobs_per_sec": args.rate,
        "seconds": args.seconds,
        "latency": "handler-start wall clock minus the job's intended send time (in its job ID), µs, HDR histogram of every round",
        "variants": variants,
    }))
}

/// A phase's name and where a round keeps its usage.
type Phase = (&'static str, fn(&RoundResult) -> &Usage);

/// The phases whose server usage is split per primary.
const PHASES: [Phase; 2] = [
    ("publish", |r| &r.publish_usage),
    ("process", |r| &r.process_usage),
];

/// One row per variant: each primary's server CPU per job in `phase` and
/// its share of all primaries' (medians over rounds).
fn push_spread(out: &mut String, rounds: &Rounds, phase: &str, usage: fn(&RoundResult) -> &Usage) {
    let nodes: Vec<String> = rounds
        .iter()
        .flatten()
        .flat_map(|(_, result)| usage(result).servers.iter().map(|s| s.node.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    out.push_str(&format!(
        "\nServer CPU per job on each primary, {phase} phase (median µs/job, share of all primaries' CPU):\n\n"
    ));
    out.push_str(&format!("| variant | {} |\n", nodes.join(" | ")));
    out.push_str(&format!("|---|{}\n", "---|".repeat(nodes.len())));
    for variant in ran(rounds) {
        let results: Vec<&RoundResult> = results_of(rounds, variant).collect();
        let cells: Vec<String> = nodes
            .iter()
            .map(|node| {
                let per_job = |r: &RoundResult| {
                    let used = usage(r);
                    let cpu = used
                        .servers
                        .iter()
                        .find(|s| &s.node == node)
                        .map_or(0.0, |s| s.cpu_secs);
                    (cpu * 1e6 / r.jobs as f64, cpu / used.server_cpu_secs)
                };
                let us: Vec<f64> = results.iter().map(|r| per_job(r).0).collect();
                let share: Vec<f64> = results.iter().map(|r| per_job(r).1).collect();
                format!(
                    "{:.1} µs ({:.0}%)",
                    stats::median(&us).unwrap_or(f64::NAN),
                    100.0 * stats::median(&share).unwrap_or(f64::NAN)
                )
            })
            .collect();
        out.push_str(&format!("| {} | {} |\n", variant.name(), cells.join(" | ")));
    }
}

/// One row per variant of `variants`, one cell per metric.
fn push_rows(out: &mut String, rounds: &Rounds, metrics: &[Metric], variants: &[Variant]) {
    for &variant in variants {
        let cells: Vec<String> = metrics
            .iter()
            .map(|metric| {
                let figure = Figure::of(&values(rounds, variant, metric));
                let baseline = reference(rounds, variant)
                    .map(|reference| Figure::of(&values(rounds, reference, metric)));
                cell(metric, &figure, baseline.as_ref())
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            variant.name(),
            reference_cell(rounds, variant),
            cells.join(" | ")
        ));
    }
}

/// The variants that ran, in their usual order.
fn ran(rounds: &Rounds) -> Vec<Variant> {
    Variant::ALL
        .into_iter()
        .filter(|variant| rounds.iter().flatten().any(|(v, _)| v == variant))
        .collect()
}

/// The rounds' `latest.json` (before [`finish`] adds the run's facts).
pub fn json(args: &Args, cluster: bool, postgres: Option<&ServerInfo>, rounds: &Rounds) -> Value {
    let raw: Vec<Value> = rounds
        .iter()
        .enumerate()
        .map(|(round, results)| {
            json!({
                "round": round,
                "variants": results.iter().map(|(variant, r)| json!({
                    "variant": variant.name(),
                    "slug": variant.slug(),
                    "jobs": r.jobs,
                    "publish_secs": r.publish_secs,
                    "process_secs": r.process_secs,
                    "end_to_end_secs": r.end_to_end_secs,
                    "enqueue_jobs_per_sec": r.enqueue_rate(),
                    "process_jobs_per_sec": r.process_rate(),
                    "end_to_end_jobs_per_sec": r.end_to_end_rate(),
                    "latency_p50_ms": r.latency_p50_ms,
                    "latency_p99_ms": r.latency_p99_ms,
                    "latency_max_ms": r.latency_max_ms,
                    "workers_reported_done": r.reported_done,
                    "publisher_late_secs": r.publisher_late.map(|late| late.as_secs_f64()),
                    "steady_p99_us": r.steady.as_ref().map(|h| h.value_at_quantile(0.99)),
                    "publish_usage": usage_json(&r.publish_usage),
                    "process_usage": usage_json(&r.process_usage),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let summary: Vec<Value> = ran(rounds)
        .into_iter()
        .map(|variant| {
            let mut figures = serde_json::Map::new();
            // PG_COSTS repeats some of COSTS: the same figure, inserted again in its place.
            for metric in METRICS.iter().chain(&COSTS).chain(&PG_COSTS[1..]) {
                let figure = Figure::of(&values(rounds, variant, metric));
                let mut value = figure.json();
                value["unit"] = json!(metric.1);
                if let Some(reference) = reference(rounds, variant) {
                    let baseline = Figure::of(&values(rounds, reference, metric));
                    value["ratio_to_baseline"] = json!(figure.median / baseline.median);
                }
                figures.insert(metric.0.to_owned(), value);
            }
            json!({
                "variant": variant.name(),
                "slug": variant.slug(),
                "ratio_baseline": reference(rounds, variant).map(Variant::slug),
                "figures": figures,
            })
        })
        .collect();
    json!({
        "redis": match (&args.redis, args.cluster) {
            (Some(url), _) => url.as_str(),
            (None, false) => "private redis-server (queuegen_tests::RedisServer)",
            (None, true) => "private 6-node Redis Cluster (queuegen_tests::RedisCluster)",
        },
        "settings": {
            "jobs": args.jobs,
            "partitions": args.partitions,
            "rounds": args.rounds,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "baseline_streams": if cluster { args.partitions } else { 1 },
            "baseline_consumers": if cluster { 8.max(usize::from(args.partitions)) } else { 8 },
            "base1_consumers": 1,
            "baseR_result_command": "SET {prefix}:results:jobs:{job_id} value NX GET PX marker_ttl, one per job, a read's SETs in flight together",
            "baseline_read_count": 100,
            "latency": "handler-start wall clock minus the ms part of the entry's stream ID",
            "postgres": postgres.map(|server| json!({
                "server": server.json(),
                "jobs": args.pg_jobs,
                "pool_per_consumer_or_worker": args.pg_pool,
                "connections_per_side": 8 * args.pg_pool,
                "baseP": "8 consumers, COUNT 100 reads, per job on its consumer's pool: transaction(), INSERT INTO documents, INSERT INTO results (handler, job_id, stream_id), commit(), cached prepared statements, a read's jobs in flight together, one XACK per read",
                "qg8p": "8 workers, handler: PgResults::begin, INSERT INTO documents through the job's transaction (prepare_cached), commit(b\"\"), Outcome::Done",
                "schema": "fresh per variant and round (queuegen's migrations + documents(job_id, subject_ref, pages)), dropped after",
                "checked": "documents and results hold exactly jobs rows (distinct job ids) after every round",
            })),
        },
        "summary": summary,
        "steady_state": steady_json(args, rounds),
        "rounds": raw,
    })
}

/// Prints `table` with the machine line under it, and writes `report` (a
/// JSON object) to `latest.json` under `--out` with what every report opens
/// with: when and from which command and commit the run was made, against
/// which Redis (a Cluster or not), on which machine.
pub fn finish(
    args: &Args,
    cluster: bool,
    redis_version: &str,
    table: &str,
    mut report: Value,
) -> Result<()> {
    println!("{table}");
    println!("{}", machine_line(redis_version));
    let facts = json!({
        "date": command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "command_line": std::env::args().collect::<Vec<_>>(),
        "git_commit": git_commit(),
        "redis_version": redis_version,
        "cluster": cluster,
        "machine": machine(),
    });
    if let (Value::Object(report), Value::Object(facts)) = (&mut report, facts) {
        report.extend(facts);
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let path = args.out.join("latest.json");
    let text = serde_json::to_string_pretty(&report).context("serializing the report")?;
    std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    eprintln!("queuegen-bench: wrote {}", path.display());
    Ok(())
}

fn usage_json(usage: &Usage) -> Value {
    json!({
        "client_cpu_secs": usage.client_cpu_secs,
        "postgres_cpu_secs": usage.postgres_cpu_secs,
        "server_cpu_secs": usage.server_cpu_secs,
        "server_commands": usage.commands,
        "servers": servers_json(&usage.servers),
        "commands": usage.by_command.iter().map(|(name, used)| {
            (name.clone(), json!({ "calls": used.calls, "usec": used.usec }))
        }).collect::<serde_json::Map<_, _>>(),
    })
}

/// Each server's part of a [`Usage`].
pub fn servers_json(servers: &[ServerUsage]) -> Value {
    let servers = servers.iter().map(|s| {
        json!({
            "node": s.node,
            "cpu_secs": s.cpu_secs,
            "commands": s.commands,
        })
    });
    Value::Array(servers.collect())
}

/// `nproc`, CPU model and memory, from the OS.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |text: &str, name: &str| {
        text.lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_once(':'))
            .map(|(_, value)| value.trim().to_owned())
    };
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu_model": field(&cpuinfo, "model name"),
        "memory": field(&meminfo, "MemTotal"),
        "os": command_output("uname", &["-srm"]),
    })
}

/// The short commit, with `-dirty` when the work tree has changes.
fn git_commit() -> Option<String> {
    let commit = command_output("git", &["rev-parse", "--short", "HEAD"])?;
    let dirty = command_output("git", &["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// One line naming the machine, the Redis version and the commit, for under the table.
pub fn machine_line(redis_version: &str) -> String {
    let machine = machine();
    let text = |key: &str| machine[key].as_str().unwrap_or("unknown").to_owned();
    format!(
        "Machine: {} CPUs ({}), {} memory, {}; redis {redis_version}; commit {}",
        machine["nproc"],
        text("cpu_model"),
        text("memory"),
        text("os"),
        git_commit().unwrap_or_else(|| "unknown".to_owned())
    )
}
