//! `queuegen runs`: a pipeline's runs in flight at each join (oldest first,
//! with what each still waits for), or one run's state at every join.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen::spec::{model, suggest};
use queuegen_runtime::error::OperationError;
use queuegen_runtime::ops::runs::{
    self as view, JoinRun, RunReport, RunState, RunsReport, SettledOutcome,
};
use queuegen_runtime::{Error, QueueConfig};
use serde::Serialize;

use super::common;
use super::table::{short_duration, Colours, Paint, Table};

#[derive(Debug, clap::Args)]
#[command(
    about = "List a pipeline's runs in flight at each join, oldest first, or show one run at every join",
    after_help = "Each join of a pipeline keeps the runs open there in an index by start time \
(runs:<pipeline> in each partition of the join's queue). Without --run, per join: how many runs \
are in flight, the oldest wait, and the oldest --limit runs with the jobs each still waits for \
(WAITING). A run that ends (published or failed) leaves the index and its state is kept for the \
pipeline's keep: such runs are not listed (there is no index of ended runs to read without \
scanning the keyspace); look one up by its ID with --run.

With --run ID (the run ID is the job_id of its first stage's job): the run at every join: open, \
published (with the join's entry) or failed, when it started and ended, and its jobs: those still \
outstanding and those settled with their outcome (done with its result reference, dead, or not \
waited for). At most --limit of each per join (a sample when there are more).

Reads only: TIME, ZCARD, ZRANGE, SCARD (two round trips); with --run: TIME, HMGET, PTTL, SCARD, \
SRANDMEMBER, HLEN, HRANDFIELD (one). A monitor user may run it.

Examples:
  queuegen runs queues.yaml --redis redis://127.0.0.1:6379
  queuegen runs queues.yaml --pipeline documents --limit 10
  queuegen runs queues.yaml --pipeline documents --run doc-42
  queuegen runs queues.yaml --json | jq '.pipelines[].joins[] | {join, in_flight, oldest}'

--redis URL may be left out when REDIS_URL is set."
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Only this pipeline; default all of the spec's.
    #[arg(long, value_name = "PIPELINE")]
    pub pipeline: Option<String>,

    /// Show this run (the job_id of its first stage's job) at every join.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,

    /// At most this many runs per join; with --run, jobs of each kind per join.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,

    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// What `--json` prints without `--run`.
#[derive(Serialize)]
struct Listing<'a> {
    pipelines: &'a [RunsReport],
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "reading runs")? else {
        return Ok(ExitCode::from(1));
    };
    let pipelines = selected_pipelines(&spec, &args.spec, args.pipeline.as_deref())?;
    let configs: Vec<QueueConfig> = spec
        .queues
        .iter()
        .filter(|queue| {
            pipelines
                .iter()
                .any(|pipeline| pipeline.stage(&queue.name).is_some())
        })
        .map(|queue| queue_config(&spec, queue))
        .collect();
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let colours = Colours::for_stdout();

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    match &args.run {
        None => {
            let reports = runtime.block_on(async {
                let redis = args.redis.connect().await?;
                let server = redis.addr();
                let mut reports = Vec::with_capacity(pipelines.len());
                for pipeline in &pipelines {
                    let report = view::runs(&mut redis.shared(), pipeline, &configs, limit)
                        .await
                        .with_context(|| {
                            format!("reading the runs of pipeline {} on {server}", pipeline.name)
                        })?;
                    reports.push(report);
                }
                anyhow::Ok(reports)
            })?;
            if args.json {
                let listing = Listing {
                    pipelines: &reports,
                };
                println!("{}", serde_json::to_string_pretty(&listing)?);
            } else {
                print_listing(&reports, &args, colours);
            }
        }
        Some(run_id) => {
            let report = runtime.block_on(find_run(&args, &pipelines, &configs, run_id, limit))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_run(&report, colours);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pipeline named `--pipeline`, or every pipeline of the spec; an
/// unknown name is an error with the closest name and the spec's pipelines.
fn selected_pipelines<'a>(
    spec: &'a model::Spec,
    path: &Path,
    name: Option<&str>,
) -> anyhow::Result<Vec<&'a model::Pipeline>> {
    let known: Vec<&str> = spec.pipelines.iter().map(|p| p.name.as_str()).collect();
    if known.is_empty() {
        anyhow::bail!(
            "{}: the spec has no pipelines, so there are no runs to show (`pipelines:` in docs/spec.md)",
            path.display()
        );
    }
    let Some(name) = name else {
        return Ok(spec.pipelines.iter().collect());
    };
    match spec.pipelines.iter().find(|p| p.name == name) {
        Some(pipeline) => Ok(vec![pipeline]),
        None => {
            let hint = match suggest::did_you_mean(name, known.iter().copied()) {
                Some(best) => format!("did you mean {best:?}? "),
                None => String::new(),
            };
            anyhow::bail!(
                "{}: no pipeline named {name:?}: {hint}(pipelines: {})",
                path.display(),
                known.join(", ")
            )
        }
    }
}

/// Run `run_id` in `--pipeline`, or, without it, in whichever pipeline of
/// the spec keeps it (an error when none or several do).
async fn find_run(
    args: &Args,
    pipelines: &[&model::Pipeline],
    configs: &[QueueConfig],
    run_id: &str,
    limit: usize,
) -> anyhow::Result<RunReport> {
    let redis = args.redis.connect().await?;
    let server = redis.addr();
    let context =
        |pipeline: &str| format!("reading run {run_id:?} of pipeline {pipeline} on {server}");
    if let [pipeline] = pipelines {
        return view::run(&mut redis.shared(), pipeline, configs, run_id, limit)
            .await
            .with_context(|| context(&pipeline.name));
    }
    // A pipeline without joins keeps no run state: nothing to find there.
    let mut found = Vec::new();
    let mut searched = Vec::new();
    for pipeline in pipelines.iter().filter(|p| p.joins().next().is_some()) {
        searched.push(pipeline.name.as_str());
        match view::run(&mut redis.shared(), pipeline, configs, run_id, limit).await {
            Ok(report) => found.push(report),
            Err(Error::Operation(OperationError::NoSuchRun { .. })) => {}
            Err(err) => return Err(anyhow::Error::new(err).context(context(&pipeline.name))),
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => anyhow::bail!(
            "{}: no run {run_id:?} at any join of pipeline(s) {} on {server}: its first job has \
             not finished yet, it ended more than its pipeline's keep ago, or it never started",
            args.spec.display(),
            searched.join(", ")
        ),
        _ => anyhow::bail!(
            "{}: run {run_id:?} exists in pipelines {}: name one with --pipeline",
            args.spec.display(),
            found
                .iter()
                .map(|r| r.pipeline.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn print_listing(reports: &[RunsReport], args: &Args, colours: Colours) {
    for (n, report) in reports.iter().enumerate() {
        if n > 0 {
            println!();
        }
        let keep = short_duration(report.keep_ms);
        println!(
            "{}",
            colours.paint(
                &format!(
                    "pipeline {}: runs start at {}; an ended run's state is kept {keep}",
                    report.pipeline, report.first
                ),
                Paint::Bold
            )
        );
        if report.joins.is_empty() {
            println!("no join: its runs keep no state, so none can be listed");
            continue;
        }
        for join in &report.joins {
            let head = format!(
                "join {} (after {}; on_dead_letter: {})",
                join.join,
                join.after.join(", "),
                join.on_dead_letter
            );
            let Some(oldest) = &join.oldest else {
                println!("{head}: no runs in flight");
                continue;
            };
            println!(
                "{head}: {} run{} in flight, oldest waiting {} (run {}, partition {})",
                join.in_flight,
                if join.in_flight == 1 { "" } else { "s" },
                colours.paint(&short_duration(oldest.age_ms), Paint::Yellow),
                oldest.run_id,
                oldest.partition,
            );
            let mut table = Table::new(&["RUN", "PART", "STARTED", "AGE", "WAITING"]);
            for run in &join.runs {
                table.plain_row(vec![
                    run.run_id.clone(),
                    run.partition.to_string(),
                    time_text(run.started_ms),
                    short_duration(run.age_ms),
                    run.waiting.to_string(),
                ]);
            }
            print!("{}", table.render(colours));
            if join.truncated {
                println!(
                    "{}",
                    colours.paint(
                        &format!(
                            "showing the {} oldest of {} runs in flight (--limit)",
                            join.runs.len(),
                            join.in_flight
                        ),
                        Paint::Yellow
                    )
                );
            }
        }
        println!(
            "failed and published runs leave the index when they end and are not listed; \
             look one up with `queuegen runs {} --pipeline {} --run ID`",
            args.spec.display(),
            report.pipeline
        );
    }
}

fn print_run(report: &RunReport, colours: Colours) {
    println!(
        "{}",
        colours.paint(
            &format!("pipeline {} run {}", report.pipeline, report.run_id),
            Paint::Bold
        )
    );
    if report.joins.is_empty() {
        println!("no join: the pipeline's runs keep no state, so there is nothing to show");
        return;
    }
    for join in &report.joins {
        println!();
        println!("{}", join_line(join, report.server_time_ms, colours));
        let mut table = Table::new(&["STAGE", "JOB_ID", "STATE", "RESULT"]);
        for job in &join.outstanding_jobs {
            table.row(vec![
                (job.stage.clone().unwrap_or_default(), Paint::Plain),
                (job.job_id.clone(), Paint::Plain),
                ("waiting".to_owned(), Paint::Yellow),
                (String::new(), Paint::Plain),
            ]);
        }
        for job in &join.settled_jobs {
            let (state, paint, result) = match job.outcome {
                SettledOutcome::Done => (
                    "done",
                    Paint::Green,
                    job.result_ref.clone().unwrap_or_default(),
                ),
                SettledOutcome::Dead => ("dead", Paint::Red, String::new()),
                SettledOutcome::NotWaitedFor => {
                    ("ended", Paint::Plain, "(not waited for)".to_owned())
                }
            };
            table.row(vec![
                (job.stage.clone().unwrap_or_default(), Paint::Plain),
                (job.job_id.clone(), Paint::Plain),
                (state.to_owned(), paint),
                (result, Paint::Plain),
            ]);
        }
        if !table.is_empty() {
            print!("{}", table.render(colours));
        }
        for (shown, total, what) in [
            (join.outstanding_jobs.len(), join.outstanding, "outstanding"),
            (join.settled_jobs.len(), join.settled, "settled"),
        ] {
            if (shown as u64) < total {
                println!(
                    "{}",
                    colours.paint(
                        &format!("showing {shown} of {total} {what} jobs, a sample (--limit)"),
                        Paint::Yellow
                    )
                );
            }
        }
    }
}

/// `join notify partition 2: open 5m12s, waiting for 3 jobs; 2 settled`.
fn join_line(join: &JoinRun, now_ms: u64, colours: Colours) -> String {
    let place = format!("join {} partition {}", join.join, join.partition);
    let counts = format!("{} outstanding, {} settled", join.outstanding, join.settled);
    let waited = join.waited_ms.map(short_duration).unwrap_or_default();
    let expires = join
        .expires_ms
        .map(|at| {
            format!(
                "; its state expires in {}",
                short_duration(at.saturating_sub(now_ms))
            )
        })
        .unwrap_or_default();
    let state = match join.state {
        RunState::Absent => colours.paint(
            "nothing kept here (the run has not reached this join, or ended more than keep ago)",
            Paint::Yellow,
        ),
        RunState::NotOpened => format!(
            "{} (the first stage's job has not settled here yet); {counts}",
            colours.paint("not opened", Paint::Yellow)
        ),
        RunState::Open => format!(
            "{} for {waited} (since {}); {counts}",
            colours.paint("open", Paint::Yellow),
            join.started_ms.map(time_text).unwrap_or_default()
        ),
        RunState::Published => format!(
            "{} at {} after {waited}, as entry {} of the join's stream; {counts}{expires}",
            colours.paint("published", Paint::Green),
            join.ended_ms.map(time_text).unwrap_or_default(),
            join.join_entry.as_deref().unwrap_or("(unknown)")
        ),
        RunState::Failed => format!(
            "{} at {}{}: a job it waited for was dead-lettered, the join will not run; {counts}{expires}",
            colours.paint("failed", Paint::Red),
            join.ended_ms.map(time_text).unwrap_or_default(),
            if waited.is_empty() {
                String::new()
            } else {
                format!(" after {waited}")
            }
        ),
    };
    format!("{place}: {state}")
}

/// A server time in Unix ms as RFC 3339, to the second.
fn time_text(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}
