//! `queuegen dlq list|show|replay`: inspect a queue's dead letters and replay them.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use queuegen::runtime_config::queue_config;
use queuegen_runtime::ops::dead_letters::{dead_letters, DeadLetter, DeadLetterQuery};
use queuegen_runtime::{transitions, Partition, QueueConfig, Redis};

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Inspect and replay a queue's dead letters",
    after_help = "Examples:
  queuegen dlq list queues.yaml --queue ocr --redis redis://127.0.0.1:6379
  queuegen dlq show queues.yaml --queue ocr --id 1733140301123-0
  queuegen dlq replay queues.yaml --queue ocr --id 1733140301123-0 --partition 3
  queuegen dlq replay queues.yaml --queue ocr --all --dry-run
  queuegen dlq replay queues.yaml --queue ocr --all --limit 500 --json

--redis URL may be left out when REDIS_URL is set."
)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List dead letters, newest first.
    List(Selection),
    /// Show dead letters in full, with the envelope they carried.
    Show(Selection),
    /// Put dead letters back on the ready stream (same job_id unless --new-job-id).
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
pub struct Selection {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// The queue whose dead letters to read.
    #[arg(long)]
    pub queue: String,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Only this partition; default all.
    #[arg(long)]
    pub partition: Option<u16>,

    /// Only this lane, for a queue with `lanes:`; default all.
    #[arg(long)]
    pub lane: Option<String>,

    /// Only the dead letter with this ID.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,

    /// At most this many dead letters.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub selection: Selection,

    /// Replay every dead letter of the selection (required unless --id).
    #[arg(long, conflicts_with = "id")]
    pub all: bool,

    /// Give the replayed job this job_id instead of its own (with --id only).
    #[arg(long, requires = "id", value_name = "JOB_ID")]
    pub new_job_id: Option<String>,

    /// Show what would be replayed; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.action {
            Action::List(selection) => list(selection, false).await,
            Action::Show(selection) => list(selection, true).await,
            Action::Replay(replay_args) => replay(replay_args).await,
        }
    })
}

struct Target {
    config: QueueConfig,
    /// Schema versions of the queue's envelope that a replay may put back.
    accepted_schemas: Vec<u32>,
    redis: Redis,
}

async fn open(selection: &Selection) -> anyhow::Result<Target> {
    let Some(spec) = common::valid_spec(&selection.spec, "reading dead letters")? else {
        bail!("{}: the spec has errors", selection.spec.display());
    };
    let queue = common::queue(&spec, &selection.spec, &selection.queue)?;
    let envelope = spec
        .envelope(&queue.envelope)
        .expect("a valid spec's queues name existing envelopes");
    let accepted_schemas = envelope.accepts.clone();
    let config = queue_config(&spec, queue);
    let redis = selection.redis.connect().await?;
    Ok(Target {
        config,
        accepted_schemas,
        redis,
    })
}

/// Reads the selected dead letters: one ID, or the newest `limit` over the partitions.
async fn select(target: &Target, selection: &Selection) -> anyhow::Result<Vec<DeadLetter>> {
    let query = DeadLetterQuery {
        partition: selection.partition,
        lane: selection.lane.clone(),
        id: selection.id.clone(),
        limit: selection.limit,
    };
    Ok(dead_letters(&mut target.redis.shared(), &target.config, &query).await?)
}

async fn list(selection: Selection, full: bool) -> anyhow::Result<ExitCode> {
    let target = open(&selection).await?;
    let dead = select(&target, &selection).await?;
    if selection.json {
        println!("{}", serde_json::to_string_pretty(&dead)?);
        return Ok(ExitCode::SUCCESS);
    }
    if full {
        for letter in &dead {
            println!("dead letter {} (partition {})", letter.id, letter.place());
            for (name, value) in &letter.fields {
                if name != "envelope" {
                    println!("  {name:12} {value}");
                }
            }
            println!("  envelope:");
            for (name, value) in &letter.envelope {
                println!("    {name:12} {value}");
            }
        }
    } else {
        print_table(&dead);
    }
    println!(
        "queue {}: {} dead letter(s) shown",
        target.config.queue,
        dead.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn print_table(dead: &[DeadLetter]) {
    let rows: Vec<[&str; 7]> = dead
        .iter()
        .map(|d| {
            [
                d.id.as_str(),
                d.field("job_id"),
                d.field("tenant"),
                d.field("attempt"),
                d.field("deliveries"),
                d.field("reason"),
                d.field("detail"),
            ]
        })
        .collect();
    let header = [
        "ID",
        "JOB_ID",
        "TENANT",
        "ATTEMPT",
        "DELIVERIES",
        "REASON",
        "DETAIL",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 7], partition: &str| {
        let mut out = format!("{partition:>9}");
        for (cell, width) in cells.iter().zip(widths) {
            out.push_str(&format!("  {cell:width$}"));
        }
        println!("{}", out.trim_end());
    };
    line(header, "PARTITION");
    for (row, letter) in rows.into_iter().zip(dead) {
        line(row, &letter.place());
    }
}

#[derive(Debug, serde::Serialize)]
struct Replayed {
    partition: Partition,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<Cow<'static, str>>,
    /// `3` or `high/3`, for the lines printed.
    #[serde(skip)]
    place: String,
    dead_id: String,
    job_id: String,
    /// The new ready entry, or `None` on a dry run.
    ready_id: Option<String>,
    /// True when an earlier replay of this dead letter was found (its marker).
    already: bool,
}

async fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let selection = &args.selection;
    if selection.id.is_none() && !args.all {
        bail!("say which dead letters to replay: --id ID, or --all");
    }
    let target = open(selection).await?;
    let dead = select(&target, selection).await?;

    let progress = if dead.len() > 1 && !selection.json {
        let bar = ProgressBar::new(dead.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{spinner} replaying [{bar:30}] {pos}/{len} {msg}")
                .expect("a valid progress template")
                .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut conn = target.redis.shared();
    let mut done = Vec::with_capacity(dead.len());
    for letter in &dead {
        let job_id = letter.field("job_id").to_owned();
        progress.set_message(job_id.clone());
        if args.dry_run {
            done.push(Replayed {
                partition: letter.partition,
                lane: letter.lane.clone(),
                place: letter.place(),
                dead_id: letter.id.clone(),
                job_id,
                ready_id: None,
                already: false,
            });
            progress.inc(1);
            continue;
        }
        let moved = transitions::replay(
            &mut conn,
            &target.config,
            letter.stream,
            &letter.id,
            args.new_job_id.as_deref(),
            &target.accepted_schemas,
        )
        .await
        .with_context(|| format!("replaying dead letter {} (job {job_id})", letter.id))?;
        done.push(Replayed {
            partition: letter.partition,
            lane: letter.lane.clone(),
            place: letter.place(),
            dead_id: letter.id.clone(),
            job_id: args.new_job_id.clone().unwrap_or(job_id),
            ready_id: Some(moved.id),
            already: moved.already,
        });
        progress.inc(1);
    }
    progress.finish_and_clear();

    if selection.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(ExitCode::SUCCESS);
    }
    for replayed in &done {
        match (&replayed.ready_id, replayed.already) {
            (None, _) => println!(
                "would replay {} (partition {}, job {})",
                replayed.dead_id, replayed.place, replayed.job_id
            ),
            (Some(ready_id), false) => println!(
                "replayed {} (partition {}, job {}) as {ready_id}",
                replayed.dead_id, replayed.place, replayed.job_id
            ),
            (Some(ready_id), true) => println!(
                "already replayed {} (partition {}, job {}) as {ready_id}",
                replayed.dead_id, replayed.place, replayed.job_id
            ),
        }
    }
    let verb = if args.dry_run {
        "would be replayed"
    } else {
        "replayed"
    };
    println!(
        "queue {}: {} dead letter(s) {verb}",
        target.config.queue,
        done.len()
    );
    Ok(ExitCode::SUCCESS)
}
