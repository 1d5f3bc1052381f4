//! `queuegen status`: each queue's health per partition and group, the
//! Function library, the spec's alerts that would fire now, and each
//! pipeline join's runs in flight with the oldest wait.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen::spec::model;
use queuegen_dashboard::{pipeline_status, watched_queue, DashboardPipeline, StatusDocument};
use queuegen_runtime::ops::runs::RunsReport;
use queuegen_runtime::ops::status::{
    status_of, AlertKind, AlertThresholds, GroupStatus, LibraryStatus, PartitionStatus,
    QueueStatus, StatusReport, WatchedQueue,
};

use super::common;
use super::table::{short_duration, Colours, Paint, Table};

#[derive(Debug, clap::Args)]
#[command(
    about = "Show each queue's backlog, pending entries, retries, dead letters and firing alerts, and each pipeline join's runs in flight",
    after_help = "Reads only (two round trips per refresh, whatever the partition count, and two \
per pipeline), with commands a monitor user may run: TIME, XINFO, XLEN, XRANGE, XREVRANGE, \
XPENDING, ZCARD, ZRANGE, SCARD and FCALL_RO of the library's version function.

After the queues, one line per join of each pipeline (with --queue, of the pipelines those queues \
are stages of): the runs in flight there and the oldest wait, with the run that has waited longest \
(`queuegen runs` lists them; --json: the `pipelines` key, as `queuegen runs --json` with one run per \
join).

HISTORY is XLEN: every entry still stored, acknowledged ones included, so it is not the backlog; \
UNDELIVERED and PENDING are. LAG is n/a when Redis cannot count (an entry after the group's \
position was deleted, or the group was moved with SETID); the footnote says which, and \
OLDEST-READY still holds. docs/operations/views.md explains every column.

Examples:
  queuegen status queues.yaml --redis redis://127.0.0.1:6379
  queuegen status queues.yaml --queue ocr --watch 5
  queuegen status queues.yaml --json | jq '.queues[].alerts'"
)]
pub struct Args {
    #[command(flatten)]
    pub target: common::SpecQueuesOnRedis,

    /// Print JSON instead of tables (with --watch: one document per line).
    #[arg(long)]
    pub json: bool,

    /// Redraw every SECS seconds until Ctrl-C.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub watch: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.target.spec, "reading the status")? else {
        return Ok(ExitCode::from(1));
    };
    let watched = watched_queues(&spec, &args.target.spec, &args.target.queues)?;
    let names: Vec<&str> = watched.iter().map(|queue| &*queue.config.queue).collect();
    let pipelines = DashboardPipeline::of_spec(&spec, &names, |queue| queue_config(&spec, queue));

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let redis = args.target.redis.connect().await?;
        let server = redis.addr();
        let colours = Colours::for_stdout();
        let read = || async {
            let status = status_of(&redis, &watched).await?;
            let pipelines = pipeline_status(&redis, &pipelines).await?;
            Ok::<_, queuegen_dashboard::Error>(StatusDocument { status, pipelines })
        };
        let Some(every) = args.watch else {
            let report = read()
                .await
                .with_context(|| format!("reading the status on {server}"))?;
            print_report(&report, &watched, &server, args.json, colours)?;
            return Ok(ExitCode::SUCCESS);
        };

        // The first refresh must work (a wrong URL or a missing stream is an
        // error); later ones are shown and retried, since a watch outlives blips.
        let mut first = true;
        let stop = queuegen_runtime::shutdown_signal();
        tokio::pin!(stop);
        loop {
            match read().await {
                Ok(report) => {
                    if !args.json && std::io::stdout().is_terminal() {
                        // Home the cursor and clear the screen: a redraw, not a scroll.
                        print!("\x1b[H\x1b[2J");
                    }
                    print_report(&report, &watched, &server, args.json, colours)?;
                }
                Err(err) if first => {
                    return Err(
                        anyhow::Error::new(err).context(format!("reading the status on {server}"))
                    );
                }
                Err(err) => eprintln!("{}: reading the status on {server}: {err}", now_text()),
            }
            first = false;
            tokio::select! {
                () = &mut stop => return Ok(ExitCode::SUCCESS),
                () = tokio::time::sleep(Duration::from_secs(every)) => {}
            }
        }
    })
}

/// The spec's queues named in `names` (all when empty), with their alerts.
pub fn watched_queues(
    spec: &model::Spec,
    path: &Path,
    names: &[String],
) -> anyhow::Result<Vec<WatchedQueue>> {
    Ok(common::selected_queues(spec, path, names)?
        .into_iter()
        .map(|queue| watched_queue(queue, queue_config(spec, queue)))
        .collect())
}

fn now_text() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn print_report(
    document: &StatusDocument,
    watched: &[WatchedQueue],
    server: &str,
    json: bool,
    colours: Colours,
) -> anyhow::Result<()> {
    if json {
        // One line per document, so that `--watch --json` is a stream of them.
        println!("{}", serde_json::to_string(document)?);
        return Ok(());
    }
    let report: &StatusReport = &document.status;
    let time = UNIX_EPOCH + Duration::from_millis(report.server_time_ms);
    println!(
        "redis {server} at {} (server clock; ages are measured against it)",
        humantime::format_rfc3339_seconds(time)
    );
    for library in &report.libraries {
        println!("{}", library_line(library, colours));
    }
    for (queue, watched) in report.queues.iter().zip(watched) {
        println!();
        print_queue(queue, &watched.alerts, colours);
    }
    if !document.pipelines.is_empty() {
        println!();
        for pipeline in &document.pipelines {
            for line in pipeline_lines(pipeline, colours) {
                println!("{line}");
            }
        }
    }
    println!();
    println!(
        "HISTORY counts stored entries, acknowledged ones included (XLEN): not the backlog; UNDELIVERED and PENDING are."
    );
    Ok(())
}

/// One line per join of `pipeline`: `pipeline documents join notify (after
/// index, thumbnail): 2 runs in flight, oldest waiting 5m12s (run doc-a,
/// partition 0)`.
fn pipeline_lines(pipeline: &RunsReport, colours: Colours) -> Vec<String> {
    if pipeline.joins.is_empty() {
        return vec![format!(
            "pipeline {}: no join (its runs keep no state)",
            pipeline.pipeline
        )];
    }
    pipeline
        .joins
        .iter()
        .map(|join| {
            let head = format!(
                "pipeline {} join {} (after {})",
                pipeline.pipeline,
                join.join,
                join.after.join(", ")
            );
            match &join.oldest {
                None => format!(
                    "{head}: {}",
                    colours.paint("no runs in flight", Paint::Green)
                ),
                Some(oldest) => format!(
                    "{head}: {} run{} in flight, oldest waiting {} (run {}, partition {})",
                    join.in_flight,
                    if join.in_flight == 1 { "" } else { "s" },
                    colours.paint(&short_duration(oldest.age_ms), Paint::Yellow),
                    oldest.run_id,
                    oldest.partition
                ),
            }
        })
        .collect()
}

fn library_line(library: &LibraryStatus, colours: Colours) -> String {
    let (state, paint) = match library.loaded {
        Some(true) => ("loaded".to_owned(), Paint::Green),
        Some(false) => (
            format!("MISSING: {}", library.problem.as_deref().unwrap_or("")),
            Paint::Red,
        ),
        None => (
            format!("unknown: {}", library.problem.as_deref().unwrap_or("")),
            Paint::Yellow,
        ),
    };
    let on = library
        .server
        .as_ref()
        .map_or_else(String::new, |server| format!(" on {server}"));
    format!(
        "function library {}{on}: {}",
        library.name,
        colours.paint(&state, paint)
    )
}

/// The PART column: `3`, or `high/3` for a queue with lanes.
fn part(partition: &PartitionStatus) -> String {
    match &partition.lane {
        Some(lane) => format!("{lane}/{}", partition.partition),
        None => partition.partition.to_string(),
    }
}

/// `4 partition(s)`, or `4 partition(s) × 3 lanes`.
fn stream_count(queue: &QueueStatus) -> String {
    let lanes: std::collections::BTreeSet<&str> = queue
        .partitions
        .iter()
        .filter_map(|p| p.lane.as_deref())
        .collect();
    if lanes.is_empty() {
        format!("{} partition(s)", queue.partitions.len())
    } else {
        format!(
            "{} partition(s) × {} lanes",
            queue.partitions.len() / lanes.len(),
            lanes.len()
        )
    }
}

fn print_queue(queue: &QueueStatus, thresholds: &AlertThresholds, colours: Colours) {
    println!(
        "{}",
        colours.paint(
            &format!(
                "queue {} (group {}, {})",
                queue.queue,
                queue.group,
                stream_count(queue)
            ),
            Paint::Bold
        )
    );
    // One flag per partition, shared by its lanes: said once.
    let mut said = std::collections::BTreeSet::new();
    for partition in &queue.partitions {
        if !said.insert(partition.partition) {
            continue;
        }
        if let Some(note) = &partition.paused {
            println!(
                "{}",
                colours.paint(
                    &format!(
                        "PAUSED partition {} {} (workers read no new entries; recovery and producers carry on; `queuegen resume` undoes it)",
                        partition.partition,
                        super::pause::describe(note)
                    ),
                    Paint::Yellow
                )
            );
        }
    }
    let fires = |partition: &PartitionStatus, group: Option<&str>, kind: AlertKind| {
        queue.alerts.iter().any(|alert| {
            alert.alert == kind
                && alert.partition == partition.partition
                && alert.lane == partition.lane
                && alert.group.as_deref() == group
        })
    };
    let dash = || ("-".to_owned(), Paint::Plain);

    let mut groups = Table::new(&[
        "PART",
        "GROUP",
        "UNDELIVERED",
        "LAG",
        "OLDEST-READY",
        "PENDING",
        "OLDEST-PENDING",
        "OWNER",
        "IDLE",
        "DELIVERIES",
    ]);
    let mut notes = Vec::new();
    for partition in &queue.partitions {
        for group in &partition.groups {
            let lag = match group.lag {
                Some(lag) => (lag.to_string(), Paint::Plain),
                None => {
                    notes.push(format!(
                        "[{}] {} group {}: lag n/a: {}",
                        notes.len() + 1,
                        partition.place(),
                        group.name,
                        group.lag_unavailable.as_deref().unwrap_or("")
                    ));
                    (format!("n/a [{}]", notes.len()), Paint::Yellow)
                }
            };
            let alert_paint = |kind| {
                if fires(partition, Some(&group.name), kind) {
                    Paint::Red
                } else {
                    Paint::Plain
                }
            };
            let ready = group.oldest_undelivered.map_or_else(dash, |entry| {
                (
                    short_duration(entry.age_ms),
                    alert_paint(AlertKind::OldestReadyAge),
                )
            });
            let (pending_age, owner, idle, deliveries) = match &group.oldest_pending {
                Some(head) => (
                    (
                        short_duration(head.age_ms),
                        alert_paint(AlertKind::OldestPendingAge),
                    ),
                    (head.owner.clone(), Paint::Plain),
                    (short_duration(head.idle_ms), Paint::Plain),
                    (head.deliveries.to_string(), Paint::Plain),
                ),
                None => (dash(), dash(), dash(), dash()),
            };
            groups.row(vec![
                (part(partition), Paint::Plain),
                (group_name(group), Paint::Plain),
                (
                    group
                        .undelivered
                        .map_or_else(|| "≥1".to_owned(), |n| n.to_string()),
                    Paint::Plain,
                ),
                lag,
                ready,
                (group.pending.to_string(), Paint::Plain),
                pending_age,
                owner,
                idle,
                deliveries,
            ]);
        }
    }
    print!("{}", groups.render(colours));

    let mut partitions = Table::new(&[
        "PART",
        "HISTORY",
        "RETRIES",
        "NEXT-RETRY",
        "DELAYED",
        "NEXT-DELAYED",
        "DEAD",
        "NEWEST-DEAD",
    ]);
    let mut consumers = Table::new(&["PART", "CONSUMER", "PENDING", "IDLE"]);
    for partition in &queue.partitions {
        let next_due = |next_due_in_ms: Option<i64>| match next_due_in_ms {
            None => dash(),
            Some(ms) if ms >= 0 => (format!("in {}", short_duration(ms as u64)), Paint::Plain),
            Some(ms) => (
                format!("overdue {}", short_duration(ms.unsigned_abs())),
                Paint::Yellow,
            ),
        };
        let dead_paint = if fires(partition, None, AlertKind::DeadLetters) {
            Paint::Red
        } else {
            Paint::Plain
        };
        partitions.row(vec![
            (part(partition), Paint::Plain),
            (partition.history.to_string(), Paint::Plain),
            (partition.retries.scheduled.to_string(), Paint::Plain),
            next_due(partition.retries.next_due_in_ms),
            (partition.delayed.scheduled.to_string(), Paint::Plain),
            next_due(partition.delayed.next_due_in_ms),
            (partition.dead_letters.count.to_string(), dead_paint),
            partition.dead_letters.newest.map_or_else(dash, |entry| {
                (
                    format!("{} ago", short_duration(entry.age_ms)),
                    Paint::Plain,
                )
            }),
        ]);
        for consumer in &partition.consumers {
            consumers.plain_row(vec![
                part(partition),
                consumer.name.clone(),
                consumer.pending.to_string(),
                short_duration(consumer.idle_ms),
            ]);
        }
    }
    println!();
    print!("{}", partitions.render(colours));
    println!();
    if consumers.is_empty() {
        println!("no consumers in group {}", queue.group);
    } else {
        print!("{}", consumers.render(colours));
    }
    let pruned: u64 = queue.partitions.iter().map(|p| p.consumers_pruned).sum();
    if pruned > 0 {
        println!(
            "{pruned} idle consumer(s) with nothing pending removed from group {} so far (group.prune_consumers_after)",
            queue.group
        );
    }
    for note in &notes {
        println!("{}", colours.paint(note, Paint::Yellow));
    }

    println!();
    let configured = configured_alerts(thresholds);
    if configured.is_empty() {
        println!("alerts: none set in the spec");
    } else if queue.alerts.is_empty() {
        println!(
            "alerts ({}): {}",
            configured.join(", "),
            colours.paint("none firing", Paint::Green)
        );
    } else {
        println!(
            "alerts ({}): {}",
            configured.join(", "),
            colours.paint(&format!("{} firing", queue.alerts.len()), Paint::Red)
        );
        for alert in &queue.alerts {
            println!(
                "  {} {}",
                colours.paint(&format!("FIRING {}", alert.alert.as_str()), Paint::Red),
                alert.message
            );
        }
    }
}

/// The group's name, marked when it is not the queue's own group.
fn group_name(group: &GroupStatus) -> String {
    if group.queue_group {
        group.name.clone()
    } else {
        format!("{} (other)", group.name)
    }
}

fn configured_alerts(thresholds: &AlertThresholds) -> Vec<String> {
    let age = |d: Duration| humantime::format_duration(d).to_string();
    let mut set = Vec::new();
    if let Some(limit) = thresholds.oldest_pending_age {
        set.push(format!("oldest_pending_age > {}", age(limit)));
    }
    if let Some(limit) = thresholds.oldest_ready_age {
        set.push(format!("oldest_ready_age > {}", age(limit)));
    }
    if let Some(limit) = thresholds.dead_letters {
        set.push(format!("dead_letters ≥ {limit}"));
    }
    set
}
