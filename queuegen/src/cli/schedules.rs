//! `queuegen schedules`: list each schedule's next ticks, with the job_id and partition each tick's job gets.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen::spec::cadence::{self, Cadence};
use queuegen::spec::model::{Schedule, Spec};
use queuegen_runtime::envelope::header_fields;
use queuegen_runtime::partition_of;
use serde::Serialize;

use super::common;
use super::table::{Colours, Table};

const AFTER_HELP: &str = "\
Examples:
  queuegen schedules queues.yaml
  queuegen schedules queues.yaml --count 10 --from 2026-03-29T00:00:00Z
  queuegen schedules queues.yaml --json | jq '.[] | select(.schedule == \"nightly-export\")'

Each tick is the job_id <schedule>@<tick in RFC 3339 UTC> in the partition its fields hash to;
`cron` ticks are shown in the schedule's time zone too. Reads only the spec: nothing is sent
to Redis. Exit status: 0, 1 when the spec has errors, 2 when it cannot be read.";

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

    /// List the ticks after this instant (RFC 3339, e.g. 2026-12-05T08:00:00Z) instead of now.
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// Print JSON: one object per tick.
    #[arg(long)]
    pub json: bool,
}

/// One tick of one schedule.
#[derive(Debug, Serialize)]
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
    pub partition: u16,
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
    let from_ms = u64::try_from(
        from.duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis(),
    )
    .unwrap_or(u64::MAX);
    let ticks = next_ticks(&spec, from_ms, args.count as usize)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&ticks)?);
        return Ok(ExitCode::SUCCESS);
    }
    if spec.schedules.is_empty() {
        println!("{}: no schedules", args.spec.display());
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
    let mut out = Vec::new();
    for schedule in &spec.schedules {
        let ticks = schedule
            .cadence
            .ticks()
            .with_context(|| format!("schedule {}", schedule.name))?;
        for tick_ms in ticks.upcoming(from_ms, count) {
            out.push(tick(spec, schedule, tick_ms));
        }
    }
    Ok(out)
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
