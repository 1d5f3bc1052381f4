//! `queuegen pending`: a queue's pending entries (delivered, not yet
//! acknowledged), worst first, with the job each carries and who holds it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen_runtime::ops::pending::{pending, PendingQuery, PendingReport};

use super::common;
use super::table::{short_duration, Colours, Paint, Table};

#[derive(Debug, clap::Args)]
#[command(
    about = "List a queue's pending entries, worst first, with job_id, owner, idle time and deliveries",
    after_help = "Worst first: most deliveries first (an entry delivered again and again is \
crash-looping, nearest to poison quarantine), then longest idle (its owner has been silent \
longest), then oldest ID. The ordering is over the oldest 1000 pending entries of each partition \
(or --limit, if larger): XPENDING pages by ID; the output says when a partition holds more.

A JOB_ID of (deleted) is an entry deleted or trimmed while still pending: its payload is gone, \
only the pending-list record remains. Once it is idle past claim.min_idle, the workers' claim pass (XAUTOCLAIM) drops it from the pending list and logs the job as lost.

Reads only: TIME, TYPE, XPENDING, XRANGE, in two round trips.

Examples:
  queuegen pending queues.yaml --queue ocr --redis redis://127.0.0.1:6379
  queuegen pending queues.yaml --queue ocr --partition 3 --min-idle 10m
  queuegen pending queues.yaml --queue ocr --consumer ocr-7f9c-1 --limit 500 --json

--redis URL may be left out when REDIS_URL is set."
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// The queue whose pending entries to list.
    #[arg(long)]
    pub queue: String,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Only this partition; default all.
    #[arg(long)]
    pub partition: Option<u16>,

    /// Only entries idle at least this long (e.g. 90s, 10m, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub min_idle: Option<Duration>,

    /// Only entries held by this consumer.
    #[arg(long, value_name = "CONSUMER")]
    pub consumer: Option<String>,

    /// At most this many entries.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|err| format!("{text:?} is not a duration ({err}); e.g. 90s, 10m, 1h30m"))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "reading pending entries")? else {
        return Ok(ExitCode::from(1));
    };
    let queue = common::queue(&spec, &args.spec, &args.queue)?;
    let config = queue_config(&spec, queue);
    let query = PendingQuery {
        partition: args.partition,
        min_idle: args.min_idle,
        consumer: args.consumer.clone(),
        limit: usize::try_from(args.limit).unwrap_or(usize::MAX),
    };

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let report = runtime.block_on(async {
        let redis = args.redis.connect().await?;
        let server = redis.addr();
        pending(&mut redis.shared(), &config, &query)
            .await
            .with_context(|| format!("reading the pending entries on {server}"))
    })?;

    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &args, Colours::for_stdout());
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &PendingReport, args: &Args, colours: Colours) {
    let mut table = Table::new(&["PART", "ID", "JOB_ID", "OWNER", "IDLE", "DELIVERIES", "AGE"]);
    for row in &report.rows {
        let job_id = match (&row.job_id, row.deleted) {
            (_, true) => ("(deleted)".to_owned(), Paint::Red),
            (Some(job_id), false) => (job_id.clone(), Paint::Plain),
            (None, false) => ("(no job_id)".to_owned(), Paint::Yellow),
        };
        table.row(vec![
            (
                match &row.lane {
                    Some(lane) => format!("{lane}/{}", row.partition),
                    None => row.partition.to_string(),
                },
                Paint::Plain,
            ),
            (row.id.to_string(), Paint::Plain),
            job_id,
            (row.owner.clone(), Paint::Plain),
            (short_duration(row.idle_ms), Paint::Plain),
            (row.deliveries.to_string(), Paint::Plain),
            (short_duration(row.age_ms), Paint::Plain),
        ]);
    }
    if !table.is_empty() {
        print!("{}", table.render(colours));
    }
    let total: u64 = report.partitions.iter().map(|p| p.pending).sum();
    let mut filters = Vec::new();
    if let Some(idle) = args.min_idle {
        filters.push(format!(
            "idle at least {}",
            humantime::format_duration(idle)
        ));
    }
    if let Some(consumer) = &args.consumer {
        filters.push(format!("held by {consumer}"));
    }
    let filters = if filters.is_empty() {
        String::new()
    } else {
        format!(" {}", filters.join(", "))
    };
    println!(
        "queue {} group {}: {} pending entr{}{filters} shown, worst first (most deliveries, then longest idle); {total} pending in all",
        report.queue,
        report.group,
        report.rows.len(),
        if report.rows.len() == 1 { "y" } else { "ies" },
    );
    for partition in report.partitions.iter().filter(|p| p.truncated) {
        println!(
            "{}",
            colours.paint(
                &format!(
                    "partition {}{}: only the {} oldest of its {} pending entries were examined",
                    partition.partition,
                    partition
                        .lane
                        .as_ref()
                        .map(|lane| format!(" lane {lane}"))
                        .unwrap_or_default(),
                    partition.examined,
                    partition.pending
                ),
                Paint::Yellow
            )
        );
    }
}
