//! `queuegen pause`: stop the workers' intake of a queue's partitions (recovery and producers carry on); `queuegen resume` (resume.rs) undoes it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen_runtime::ops::pause::{self, PauseChange, PauseNote};
use queuegen_runtime::{Partition, QueueConfig};
use serde::Serialize;

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Pause a queue's intake: workers read no new entries of its partitions until `queuegen resume`",
    after_help = "Sets each partition's pause flag ({prefix}:{QUEUE-NN}:paused), which records who \
paused it, when (the server's clock) and why, then publishes on the queue's pause channel \
({prefix}:{QUEUE}:paused). Workers of every group re-read the flags when the message arrives \
and read no new entries of a paused partition: new deliveries stop within about one read \
block (1 s with the default block). Everything else carries on: \
recovery still claims entries left idle by a dead worker, jobs in flight finish and are \
acknowledged, retries are scheduled and promoted, and producers still publish (the backlog \
grows; admission control, if set, may refuse producers once the oldest entry is old enough). \
`queuegen status` lists the paused partitions. Pausing a paused partition replaces its note.

Needs the operator role (TIME, SET, PUBLISH).

Examples:
  queuegen pause queues.yaml --queue ocr --redis redis://127.0.0.1:6379 --reason \"OCR vendor outage\"
  queuegen pause queues.yaml --queue ocr --partition 3 --partition 7
  queuegen pause queues.yaml --queue ocr --json"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// The queue to pause.
    #[arg(long)]
    pub queue: String,

    /// Only this partition (repeatable); default all of the queue's partitions.
    #[arg(long = "partition", value_name = "N")]
    pub partitions: Vec<u16>,

    /// Why, recorded in the flag and shown by `queuegen status`.
    #[arg(long, default_value = "")]
    pub reason: String,

    /// Who, recorded in the flag; default $USER@<host>.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `pause` and `resume` print with `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub queue: String,
    /// `pause` or `resume`.
    pub action: &'static str,
    /// The note written (`pause` only).
    pub note: Option<PauseNote>,
    pub partitions: Vec<PauseChange>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some((config, partitions)) = target(&args.spec, &args.queue, &args.partitions, "pausing")?
    else {
        return Ok(ExitCode::from(1));
    };
    let by = args.by.clone().unwrap_or_else(default_by);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let (note, changes) = runtime.block_on(async {
        let redis = args.redis.connect().await?;
        let server = redis.addr();
        pause::pause(&mut redis.shared(), &config, &partitions, &by, &args.reason)
            .await
            .with_context(|| format!("pausing queue {} on {server}", config.queue))
    })?;
    let report = Report {
        queue: config.queue.to_string(),
        action: "pause",
        note: Some(note),
        partitions: changes,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for change in &report.partitions {
            let before = match &change.before {
                None => "was running".to_owned(),
                Some(old) => format!("was already paused ({}); note replaced", describe(old)),
            };
            println!(
                "queue {} partition {}: paused ({before})",
                report.queue, change.partition
            );
        }
        println!(
            "workers stop reading new entries of {} within about one read block; recovery, acks and producers carry on. `queuegen resume {} --queue {}` undoes it",
            partition_list(&report.partitions),
            args.spec.display(),
            report.queue,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The queue's settings and the partitions named (all when none), checked
/// against the partition count; `None` when the spec has errors (reported).
pub fn target(
    spec_path: &Path,
    queue: &str,
    partitions: &[u16],
    doing: &str,
) -> anyhow::Result<Option<(QueueConfig, Vec<Partition>)>> {
    let Some(spec) = common::valid_spec(spec_path, doing)? else {
        return Ok(None);
    };
    let queue = common::queue(&spec, spec_path, queue)?;
    let config = queue_config(&spec, queue);
    let chosen = config.chosen_partitions(partitions)?;
    Ok(Some((config, chosen)))
}

/// `by ana@ops-1 at 2026-12-05T08:00:00Z: reason`.
pub fn describe(note: &PauseNote) -> String {
    let at = if note.at_ms == 0 {
        "at an unknown time".to_owned()
    } else {
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(note.at_ms);
        format!("at {}", humantime::format_rfc3339_seconds(when))
    };
    let reason = if note.reason.is_empty() {
        String::new()
    } else {
        format!(": {}", note.reason)
    };
    format!("by {} {at}{reason}", note.by)
}

/// `partition 3` or `partitions 0, 1, 2`.
pub fn partition_list(changes: &[PauseChange]) -> String {
    let numbers: Vec<String> = changes.iter().map(|c| c.partition.to_string()).collect();
    match numbers.as_slice() {
        [one] => format!("partition {one}"),
        _ => format!("partitions {}", numbers.join(", ")),
    }
}

/// `$USER@<host>`, or what of it is known.
fn default_by() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("{user}@{}", queuegen_runtime::host::hostname())
}
