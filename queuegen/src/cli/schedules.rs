//! `queuegen schedules`: list each schedule's next ticks, with the job_id and partition each tick's job gets; with `--published`, whether its last ticks were published, from their markers in Redis.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen::spec::cadence::{self, Cadence};
use queuegen::spec::model::{Schedule, Spec};
use queuegen_runtime::envelope::header_fields;
use queuegen_runtime::partition::partition_of;
use queuegen_runtime::{MarkerKind, Partition};
use serde::Serialize;

use super::common;
use super::table::{Colours, Table};

const AFTER_HELP: &str = "\
Examples:
  queuegen schedules queues.yaml
  queuegen schedules queues.yaml --count 10 --from 2026-03-29T00:00:00Z
  queuegen schedules queues.yaml --json | jq '.[] | select(.schedule == \"nightly-export\")'
  REDIS_URL=redis://app-operator@10.0.0.5:6379 queuegen schedules queues.yaml --published --count 3

Each tick is the job_id <schedule>@<tick in RFC 3339 UTC> in the partition its fields hash to;
`cron` ticks are shown in the schedule's time zone too. Without --published it reads only the
spec: nothing is sent to Redis. With --published it lists the last ticks up to now (or --from)
instead and reads, for each, the tick's marker (the stream ID its job was appended as; markers
expire with retention.min_age) and each schedule's hint of the last tick the workers
published: one GET per tick and schedule, routed by slot on a Cluster, as any read-only user.
Exit status: 0, 1 when the spec has errors, 2 when it cannot be read or Redis cannot be.";

/// List the next ticks of the spec's schedules.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The spec whose schedules to list.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// Ticks per schedule.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,

    /// List the ticks after this instant (RFC 3339, e.g. 2026-12-05T08:00:00Z) instead of now
    /// (with --published: the ticks up to it).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// The last ticks up to now and whether each was published, read from Redis.
    #[arg(long)]
    pub published: bool,

    /// Print JSON: one object per tick (with --published: per schedule).
    #[arg(long)]
    pub json: bool,

    /// Where to read markers from (only with --published).
    #[command(flatten)]
    pub redis: super::connection::RedisArgs,
}

/// One tick of one schedule.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    pub schedule: String,
    pub queue: String,
    /// `cron "0 2 * * *" in Europe/Berlin` or `every 1s`.
    pub cadence: String,
    pub missed: &'static str,
    /// Unix ms.
    pub tick_ms: u64,
    /// RFC 3339 UTC.
    pub tick: String,
    /// In the schedule's time zone (`cron`), else UTC.
    pub local: String,
    pub job_id: String,
    pub partition: Partition,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "listing schedules")? else {
        return Ok(ExitCode::from(1));
    };
    let from = match &args.from {
        Some(text) => humantime::parse_rfc3339_weak(text).with_context(|| {
            format!("--from {text:?} is not an RFC 3339 time such as 2026-12-05T08:00:00Z")
        })?,
        None => SystemTime::now(),
    };
    let since_epoch = from.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let from_ms = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX);
    if !args.json && spec.schedules.is_empty() {
        println!("{}: no schedules", args.spec.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.published {
        let report = published(&spec, &args.redis, from_ms, args.count as usize)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", render_published(&report, Colours::for_stdout()));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let ticks = next_ticks(&spec, from_ms, args.count as usize)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&ticks)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&[
        "SCHEDULE",
        "QUEUE",
        "TICK (UTC)",
        "LOCAL",
        "JOB_ID",
        "PARTITION",
    ]);
    for tick in &ticks {
        table.plain_row(vec![
            tick.schedule.clone(),
            tick.queue.clone(),
            tick.tick.clone(),
            tick.local.clone(),
            tick.job_id.clone(),
            tick.partition.to_string(),
        ]);
    }
    for schedule in &spec.schedules {
        println!(
            "{}: {} -> {}, missed: {}, grace {}",
            schedule.name,
            schedule.cadence.describe(),
            schedule.queue,
            schedule.missed.as_str(),
            queuegen::spec::units::format_duration(schedule.grace)
        );
    }
    println!();
    print!("{}", table.render(Colours::for_stdout()));
    Ok(ExitCode::SUCCESS)
}

/// The next `count` ticks of every schedule after `from_ms`, schedule by schedule.
pub fn next_ticks(spec: &Spec, from_ms: u64, count: usize) -> anyhow::Result<Vec<Tick>> {
    ticks_of(spec, |ticks| ticks.upcoming(from_ms, count))
}

/// The last `count` ticks of every schedule at or before `at_ms`, oldest first.
pub fn last_ticks(spec: &Spec, at_ms: u64, count: usize) -> anyhow::Result<Vec<Tick>> {
    ticks_of(spec, |ticks| ticks.recent(at_ms, count))
}

/// The ticks `pick` chooses of each schedule, schedule by schedule.
fn ticks_of(spec: &Spec, pick: impl Fn(&cadence::Ticks) -> Vec<u64>) -> anyhow::Result<Vec<Tick>> {
    let mut out = Vec::new();
    for schedule in &spec.schedules {
        let ticks = schedule
            .cadence
            .ticks()
            .with_context(|| format!("schedule {}", schedule.name))?;
        out.extend(
            pick(&ticks)
                .into_iter()
                .map(|tick_ms| tick(spec, schedule, tick_ms)),
        );
    }
    Ok(out)
}

/// One schedule's last ticks as Redis has them.
#[derive(Debug, Serialize)]
pub struct PublishedSchedule {
    pub schedule: String,
    pub queue: String,
    /// `{prefix}:schedule:<name>:last`.
    pub hint_key: String,
    /// The last tick the workers published, by the hint (Unix ms); `None`
    /// when no worker ran the schedule within the markers' retention.
    pub last_published_ms: Option<u64>,
    /// RFC 3339 UTC of `last_published_ms`.
    pub last_published: Option<String>,
    pub ticks: Vec<PublishedTick>,
}

/// A tick and its marker.
#[derive(Debug, Serialize)]
pub struct PublishedTick {
    #[serde(flatten)]
    pub tick: Tick,
    /// The tick's marker key, in its partition's slot.
    pub marker_key: String,
    /// The stream ID its job was appended as; `None`: no marker (never
    /// published, or published longer ago than retention.min_age).
    pub published_as: Option<String>,
}

/// Reads the markers of the last `count` ticks up to `at_ms`, and each
/// schedule's hint.
fn published(
    spec: &Spec,
    redis: &super::connection::RedisArgs,
    at_ms: u64,
    count: usize,
) -> anyhow::Result<Vec<PublishedSchedule>> {
    let ticks = last_ticks(spec, at_ms, count)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let connection = redis.connect().await?;
        let mut conn = connection.shared();
        let mut report = Vec::new();
        for schedule in &spec.schedules {
            let config = queue_config(spec, spec.queue(&schedule.queue).expect("checked"));
            let hint_key = config.schedule_hint_key(&schedule.name);
            let hint: Option<String> = get(&mut conn, &hint_key).await?;
            let last_published_ms = match hint {
                Some(text) => Some(text.parse::<u64>().with_context(|| {
                    format!("{hint_key} holds {text:?}, not a tick in Unix ms")
                })?),
                None => None,
            };
            let mut rows = Vec::new();
            for tick in ticks.iter().filter(|tick| tick.schedule == schedule.name) {
                // A schedule publishes to the default lane.
                let marker_key = config.marker_key(
                    tick.partition.default_stream(),
                    MarkerKind::Tick,
                    &cadence::marker_id(&schedule.name, tick.tick_ms),
                );
                let published_as = get(&mut conn, &marker_key).await?;
                rows.push(PublishedTick {
                    tick: tick.clone(),
                    marker_key,
                    published_as,
                });
            }
            report.push(PublishedSchedule {
                schedule: schedule.name.clone(),
                queue: schedule.queue.clone(),
                hint_key,
                last_published: last_published_ms.map(cadence::format_tick),
                last_published_ms,
                ticks: rows,
            });
        }
        Ok(report)
    })
}

async fn get(conn: &mut queuegen_runtime::Connection, key: &str) -> anyhow::Result<Option<String>> {
    redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .with_context(|| format!("GET {key}"))
}

fn render_published(report: &[PublishedSchedule], colours: Colours) -> String {
    let mut out = String::new();
    let mut table = Table::new(&[
        "SCHEDULE",
        "QUEUE",
        "TICK (UTC)",
        "JOB_ID",
        "PARTITION",
        "PUBLISHED AS",
    ]);
    for schedule in report {
        let hint = schedule
            .last_published
            .as_deref()
            .unwrap_or("none (no worker published a tick within the markers' retention)");
        out.push_str(&format!(
            "{}: last tick the workers published ({}): {hint}\n",
            schedule.schedule, schedule.hint_key
        ));
        for row in &schedule.ticks {
            table.plain_row(vec![
                schedule.schedule.clone(),
                schedule.queue.clone(),
                row.tick.tick.clone(),
                row.tick.job_id.clone(),
                row.tick.partition.to_string(),
                row.published_as
                    .clone()
                    .unwrap_or_else(|| "no marker".to_owned()),
            ]);
        }
    }
    out.push('\n');
    out.push_str(&table.render(colours));
    out
}

fn tick(spec: &Spec, schedule: &Schedule, tick_ms: u64) -> Tick {
    let queue = spec
        .queue(&schedule.queue)
        .expect("a checked schedule names a declared queue");
    let config = queue_config(spec, queue);
    let job_id = cadence::job_id(&schedule.name, tick_ms);
    // The fields partition_by can name: tenant, job_id, body fields.
    let mut fields: Vec<(&str, String)> = vec![
        (header_fields::JOB_ID, job_id.clone()),
        (header_fields::TENANT, schedule.tenant.clone()),
    ];
    fields.extend(schedule.body.iter().map(|(n, v)| (n.as_str(), v.clone())));
    let local = match &schedule.cadence {
        Cadence::Cron { timezone, .. } => cadence::format_tick_in(tick_ms, timezone),
        Cadence::Every(_) => cadence::format_tick_in(tick_ms, "UTC"),
    };
    Tick {
        schedule: schedule.name.clone(),
        queue: schedule.queue.clone(),
        cadence: schedule.cadence.describe(),
        missed: schedule.missed.as_str(),
        tick_ms,
        tick: cadence::format_tick(tick_ms),
        local,
        job_id,
        partition: partition_of(&config, &fields),
    }
}
