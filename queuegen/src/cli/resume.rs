//! `queuegen resume`: let the workers read a paused queue's partitions again (undoes `queuegen pause`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use queuegen_runtime::ops::pause;

use super::pause::{describe, partition_list, target, Report};

#[derive(Debug, clap::Args)]
#[command(
    about = "Resume a paused queue's intake: workers read new entries of its partitions again",
    after_help = "Deletes each partition's pause flag ({prefix}:{QUEUE-NN}:paused) and says who had \
paused it, then publishes on the queue's pause channel ({prefix}:{QUEUE}:paused). Workers \
re-read the flags when the message arrives and read the backlog that built up meanwhile. Resuming a partition that is not paused changes nothing.

Needs the operator role (GETDEL, PUBLISH).

Examples:
  queuegen resume queues.yaml --queue ocr --redis redis://127.0.0.1:6379
  queuegen resume queues.yaml --queue ocr --partition 3 --json"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// The queue to resume.
    #[arg(long)]
    pub queue: String,

    /// Only this partition (repeatable); default all of the queue's partitions.
    #[arg(long = "partition", value_name = "N")]
    pub partitions: Vec<u16>,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some((config, partitions)) = target(&args.spec, &args.queue, &args.partitions, "resuming")?
    else {
        return Ok(ExitCode::from(1));
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let changes = runtime.block_on(async {
        let redis = args.redis.connect().await?;
        let server = redis.addr();
        pause::resume(&mut redis.shared(), &config, &partitions)
            .await
            .with_context(|| format!("resuming queue {} on {server}", config.queue))
    })?;
    let report = Report {
        queue: config.queue.to_string(),
        action: "resume",
        note: None,
        partitions: changes,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for change in &report.partitions {
            match &change.before {
                Some(note) => println!(
                    "queue {} partition {}: resumed (had been paused {})",
                    report.queue,
                    change.partition,
                    describe(note)
                ),
                None => println!(
                    "queue {} partition {}: was not paused; nothing changed",
                    report.queue, change.partition
                ),
            }
        }
        if report.partitions.iter().any(|c| c.before.is_some()) {
            println!(
                "workers read new entries of {} again within about one read",
                partition_list(&report.partitions)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
