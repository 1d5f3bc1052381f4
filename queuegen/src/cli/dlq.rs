//! `queuegen dlq list|show|replay`: inspect a queue's dead letters and replay them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use queuegen::runtime_config::queue_config;
use queuegen_runtime::{transitions, QueueConfig, Redis};
use redis::streams::{StreamId, StreamRangeReply};

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Inspect and replay a queue's dead letters",
    after_help = "Examples:
  queuegen dlq list queues.yaml --queue ocr --redis redis://127.0.0.1:6379
  queuegen dlq show queues.yaml --queue ocr --id 1733140301123-0
  queuegen dlq replay queues.yaml --queue ocr --id 1733140301123-0 --partition 3
  queuegen dlq replay queues.yaml --queue ocr --all --dry-run
  queuegen dlq replay queues.yaml --queue ocr --all --limit 500 --json"
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

/// One dead letter as read from a partition's dead-letter stream.
#[derive(Debug, serde::Serialize)]
struct DeadLetter {
    partition: u16,
    /// The lane, for a queue with lanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<&'static str>,
    /// Its stream number (lane and partition), for the keys.
    #[serde(skip)]
    stream: u16,
    id: String,
    fields: BTreeMap<String, String>,
    /// The original envelope, decoded from the `envelope` field.
    envelope: Vec<(String, String)>,
}

impl DeadLetter {
    fn from_entry(config: &QueueConfig, stream: u16, entry: StreamId) -> Self {
        let mut fields = BTreeMap::new();
        for (name, value) in entry.map {
            let text = match value {
                redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                redis::Value::SimpleString(text) => text,
                other => format!("{other:?}"),
            };
            fields.insert(name, text);
        }
        let envelope = fields
            .get("envelope")
            .map(|json| decode_envelope(json))
            .unwrap_or_default();
        DeadLetter {
            partition: config.partition_of_stream(stream),
            lane: config.lane_of_stream(stream).map(|lane| lane.name),
            stream,
            id: entry.id,
            fields,
            envelope,
        }
    }

    /// `3`, or `high/3` for a queue with lanes.
    fn place(&self) -> String {
        match self.lane {
            Some(lane) => format!("{lane}/{}", self.partition),
            None => self.partition.to_string(),
        }
    }

    fn field(&self, name: &str) -> &str {
        self.fields.get(name).map(String::as_str).unwrap_or("")
    }
}

/// The `envelope` field is a JSON array `[field, value, field, value, ...]`.
fn decode_envelope(json: &str) -> Vec<(String, String)> {
    let values: Vec<String> = serde_json::from_str(json).unwrap_or_default();
    values
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
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
    if let Some(partition) = selection.partition {
        if partition >= queue.partitions {
            bail!(
                "queue {} has partitions 0..{}; there is no partition {partition}",
                queue.name,
                queue.partitions - 1
            );
        }
    }
    if let Some(lane) = &selection.lane {
        if !queue.lanes.iter().any(|l| &l.name == lane) {
            bail!(
                "queue {} has {}; there is no lane {lane:?}",
                queue.name,
                match queue.lanes.as_slice() {
                    [] => "no lanes".to_owned(),
                    lanes => format!(
                        "lanes {}",
                        lanes
                            .iter()
                            .map(|l| l.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            );
        }
    }
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
    let config = &target.config;
    let partitions: Vec<u16> = match selection.partition {
        Some(p) => vec![p],
        None => (0..config.partitions).collect(),
    };
    let streams: Vec<u16> = match &selection.lane {
        None => config.streams_of(&partitions),
        Some(lane) => partitions
            .iter()
            .filter_map(|&p| config.stream_named(Some(lane), p))
            .collect(),
    };
    let mut conn = target.redis.shared();
    let mut found = Vec::new();
    for stream in streams {
        let key = config.dead_key(stream);
        // One ID, or the newest `limit` of the partition.
        let mut command = redis::cmd(match selection.id {
            Some(_) => "XRANGE",
            None => "XREVRANGE",
        });
        command.arg(&key);
        match &selection.id {
            Some(id) => command.arg(id).arg(id),
            None => command.arg("+").arg("-").arg("COUNT").arg(selection.limit),
        };
        let reply: StreamRangeReply = command
            .query_async(&mut conn)
            .await
            .with_context(|| format!("reading {key}"))?;
        found.extend(
            reply
                .ids
                .into_iter()
                .map(|entry| DeadLetter::from_entry(config, stream, entry)),
        );
    }
    if let Some(id) = &selection.id {
        if found.is_empty() {
            bail!(
                "queue {}: no dead letter with ID {id}{}",
                target.config.queue,
                selection
                    .partition
                    .map(|p| format!(" in partition {p}"))
                    .unwrap_or_default()
            );
        }
    }
    // Newest first across partitions: stream IDs start with their Unix ms.
    found.sort_by_key(|dead| std::cmp::Reverse(id_order(&dead.id)));
    found.truncate(selection.limit);
    Ok(found)
}

fn id_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
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
    partition: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<&'static str>,
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
                lane: letter.lane,
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
            lane: letter.lane,
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
