//! `queuegen trim`: trim a spec's ready and dead-letter streams by their
//! retention, keeping every entry a consumer group still needs; `--dry-run`
//! shows the plan and changes nothing.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use queuegen::runtime_config::queue_config;
use queuegen::spec::units::short_duration;
use queuegen_runtime::error::OperationError;
use queuegen_runtime::lease;
use queuegen_runtime::trim::{self, Removable, StreamRole, StreamTrim, TrimOptions, TrimPlan};
use queuegen_runtime::{functions, Error, Partition, QueueConfig, StreamSlot};

use super::common;

/// How long a real trim waits for a partition's lease that a worker's
/// trimmer (or `apply`) holds: their passes take milliseconds.
const LEASE_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, clap::Args)]
#[command(
    about = "Trim the ready and dead-letter streams by retention, keeping what any group still needs",
    after_help = "Per partition, each stream is trimmed with XTRIM MINID (exact) to the earliest of: the \
retention cutoff (now minus retention.min_age for the ready stream, dead_letter.retention for \
the dead-letter stream, by the server's clock), every consumer group's lowest pending entry, \
and every group's first undelivered entry. The trim runs in the Function library, which \
re-checks the groups atomically and removes nothing if one was created or removed, moved back \
with SETID, or now needs an entry below the cutoff; afterwards every entry a group needs is \
checked to still be there. One trimmer works a partition at a time (a lease that workers and \
`queuegen apply` take too). Workers trim every retention.trim_every on their own; this command \
is for operators and dry runs.

--dry-run changes nothing (it takes no lease): it prints, per stream, the cutoff, what decided \
it, how many entries would go (counted up to 1000, then \"at least\") and their bytes (estimated \
from MEMORY USAGE; \"unknown\" when MEMORY is refused).

Exit codes: 0 done; 1 the spec has errors, or a trim was aborted or failed its check (see the \
RESULT column); 2 queuegen could not run (Redis unreachable, a stream missing or of the wrong \
type, the Function library missing): nothing was changed.

Examples:
  queuegen trim queues.yaml --redis redis://127.0.0.1:6379 --dry-run
  queuegen trim queues.yaml --queue ocr --partition 3
  REDIS_URL=redis://cache:6379 queuegen trim queues.yaml --queue ocr --json"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Only these queues (repeatable); default all.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,

    /// Only this partition of each selected queue.
    #[arg(long, value_name = "N")]
    pub partition: Option<u16>,

    /// Show what would be trimmed; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "trimming")? else {
        return Ok(ExitCode::from(1));
    };
    let selected = common::selected_queues(&spec, &args.spec, &args.queues)?;
    if let Some(partition) = args.partition {
        for queue in &selected {
            if let Err(err) = queue_config(&spec, queue).check_partition(partition) {
                bail!(
                    "{}: {err}{}",
                    args.spec.display(),
                    if args.queues.is_empty() {
                        " (name the queue with --queue)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    let targets: Vec<(QueueConfig, StreamSlot)> = selected
        .iter()
        .flat_map(|queue| {
            let config = queue_config(&spec, queue);
            let partitions: Vec<Partition> = match args.partition {
                // Checked against every selected queue above.
                Some(p) => vec![Partition::new(p)],
                None => Partition::all(queue.partitions).collect(),
            };
            // Every lane's streams of those partitions.
            config
                .streams_of(&partitions)
                .into_iter()
                .map(move |stream| (config.clone(), stream))
        })
        .collect();

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let (rows, server, xtrim_acked) = runtime.block_on(trim_all(&args, &targets))?;

    let failed = rows.iter().filter(|row| row.failed()).count();
    if args.json {
        let report = Report {
            dry_run: args.dry_run,
            server,
            xtrim_acked,
            totals: Totals {
                entries: rows.iter().filter_map(|row| row.entries).sum(),
                entries_exact: rows.iter().all(|row| row.entries_exact),
                bytes: rows.iter().map(|row| row.bytes).sum(),
                failed,
            },
            streams: rows,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&rows, args.dry_run);
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Checks every target before changing anything, then plans (dry run) or
/// trims each partition in turn. Returns the rows, the server's address
/// and whether `XTRIM … ACKED` was used.
async fn trim_all(
    args: &Args,
    targets: &[(QueueConfig, StreamSlot)],
) -> anyhow::Result<(Vec<Row>, String, Option<bool>)> {
    // `Redis::connect` makes one plain attempt first, so a wrong URL fails at
    // once; on a Cluster every command below is routed by its key's slot.
    let client = redis::Client::open(args.redis.url()?)
        .with_context(|| format!("--redis {:?} is not a Redis URL", args.redis.redacted_url()))?;
    let server = client.get_connection_info().addr().to_string();
    let redis = args
        .redis
        .connect()
        .await
        .with_context(|| format!("connecting to Redis at {server} (--redis)"))?;
    let mut conn = redis.shared();

    preflight(&mut conn, targets, &server).await?;
    let xtrim_acked =
        if args.dry_run {
            None
        } else {
            let mut libraries: Vec<&str> = targets.iter().map(|(c, _)| &*c.functions).collect();
            libraries.dedup();
            for library in libraries {
                functions::verify_library(&redis, library).await?;
            }
            Some(trim::xtrim_acked_supported(&redis).await.with_context(|| {
                format!("asking the primaries of {server} for COMMAND DOCS XTRIM")
            })?)
        };
    let options = TrimOptions {
        holder: lease::unique_holder("queuegen-trim"),
        xtrim_acked: xtrim_acked.unwrap_or(false),
        lease_wait: LEASE_WAIT,
    };

    let progress = progress_bar(targets.len() as u64, args.dry_run);
    let mut rows = Vec::new();
    for (config, partition) in targets {
        progress.set_message(config.ready_key(*partition));
        let where_ = || {
            format!(
                "queue {} {} on {server}",
                config.queue,
                config.place(*partition)
            )
        };
        if args.dry_run {
            let pairs = StreamRole::BOTH.map(|role| (*partition, role));
            let plans = trim::plan_streams(&mut conn, config, &pairs, trim::DEFAULT_COUNT_CAP)
                .await
                .with_context(where_)?;
            for ((_, role), plan) in pairs.iter().zip(plans) {
                rows.push(match plan {
                    Some(plan) => Row::planned(config, &plan),
                    None => Row::missing(config, *partition, *role),
                });
            }
        } else {
            match trim::trim_partition(&mut conn, config, *partition, &options).await {
                Ok(streams) => {
                    for role in StreamRole::BOTH {
                        match streams.iter().find(|s| s.plan.role == role) {
                            Some(stream) => rows.push(Row::trimmed(config, stream)),
                            None => rows.push(Row::missing(config, *partition, role)),
                        }
                    }
                }
                Err(Error::Operation(OperationError::LeaseHeld { key, holder })) => {
                    for role in StreamRole::BOTH {
                        let mut row = Row::missing(config, *partition, role);
                        row.result = "lease_held";
                        row.detail = Some(format!(
                            "lease {key} held by {holder} for more than {LEASE_WAIT:?}; try again"
                        ));
                        rows.push(row);
                    }
                }
                Err(err) => return Err(anyhow::Error::new(err).context(where_())),
            }
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok((rows, server, xtrim_acked))
}

/// Every ready stream must exist and be a stream, every dead-letter stream
/// be a stream or absent, every lease key a string or absent: one pipeline
/// of `TYPE`, and every problem reported before anything is changed.
async fn preflight<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    targets: &[(QueueConfig, StreamSlot)],
    server: &str,
) -> anyhow::Result<()> {
    let mut pipe = redis::pipe();
    let mut keys = Vec::new();
    for (config, partition) in targets {
        for (key, allowed) in [
            (config.ready_key(*partition), &["stream"][..]),
            (config.dead_key(*partition), &["stream", "none"][..]),
            (config.trim_lease_key(*partition), &["string", "none"][..]),
        ] {
            pipe.cmd("TYPE").arg(&key);
            keys.push((&*config.queue, config.place(*partition), key, allowed));
        }
    }
    let types: Vec<String> = pipe
        .query_async(conn)
        .await
        .with_context(|| format!("reading key types on {server}"))?;
    let mut problems = Vec::new();
    for ((queue, partition, key, allowed), found) in keys.iter().zip(&types) {
        if allowed.contains(&found.as_str()) {
            continue;
        }
        problems.push(if found == "none" {
            format!(
                "queue {queue} {partition}: stream {key} does not exist on {server}: run `queuegen apply` to create it"
            )
        } else {
            format!(
                "queue {queue} {partition}: key {key} on {server} is a {found}, not a {}",
                allowed[0]
            )
        });
    }
    if !problems.is_empty() {
        bail!("nothing was trimmed:\n  {}", problems.join("\n  "));
    }
    Ok(())
}

fn progress_bar(partitions: u64, dry_run: bool) -> ProgressBar {
    if partitions < 2 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let verb = if dry_run { "planning" } else { "trimming" };
    let bar = ProgressBar::with_draw_target(Some(partitions), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} partitions {{msg}}"
        ))
        .expect("a valid progress template")
        .progress_chars("=> "),
    );
    bar
}

/// The `--json` output.
#[derive(Debug, serde::Serialize)]
struct Report {
    dry_run: bool,
    /// `host:port` of the server.
    server: String,
    /// Whether `XTRIM … ACKED` was used (Redis 8.2+); `null` on a dry run.
    xtrim_acked: Option<bool>,
    streams: Vec<Row>,
    totals: Totals,
}

#[derive(Debug, serde::Serialize)]
struct Totals {
    entries: u64,
    entries_exact: bool,
    bytes: Option<u64>,
    /// Streams aborted, unverified, failed, or whose lease was held.
    failed: usize,
}

/// One stream of one partition, as printed and as JSON.
#[derive(Debug, serde::Serialize)]
struct Row {
    queue: String,
    partition: Partition,
    /// The lane, for a queue with lanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<Cow<'static, str>>,
    stream: &'static str,
    key: String,
    exists: bool,
    /// `XLEN` when planned.
    length: Option<u64>,
    /// `retention.min_age` or `dead_letter.retention`.
    retention_setting: &'static str,
    retention_ms: u64,
    /// The server's time when planned, Unix ms.
    server_time_ms: Option<u64>,
    /// Server time minus the retention, as a stream ID.
    policy_cutoff: Option<String>,
    /// Entries below this ID go (or went).
    minid: Option<String>,
    decided_by: Option<DecidedBy>,
    /// Entries removed, or that would go (a dry run).
    entries: Option<u64>,
    /// `false` when `entries` is a lower bound (a dry run counts up to 1000).
    entries_exact: bool,
    /// Bytes freed (measured around the trim), or that would be (estimated); `None`: unknown.
    bytes: Option<u64>,
    /// would_trim, nothing, trimmed, no_stream, aborted, lease_held, unverified, failed.
    result: &'static str,
    detail: Option<String>,
    groups: Vec<GroupRow>,
}

#[derive(Debug, serde::Serialize)]
struct DecidedBy {
    /// policy, pending or undelivered.
    kind: &'static str,
    group: Option<String>,
    id: String,
}

#[derive(Debug, serde::Serialize)]
struct GroupRow {
    name: String,
    last_delivered: String,
    lowest_pending: Option<String>,
    first_undelivered: Option<String>,
}

impl Row {
    /// `stream`: the lane and partition.
    fn base(config: &QueueConfig, stream: StreamSlot, role: StreamRole) -> Row {
        Row {
            queue: config.queue.to_string(),
            partition: config.partition_of_stream(stream),
            lane: config.lane_of_stream(stream).map(|lane| lane.name.clone()),
            stream: role.as_str(),
            key: role.key(config, stream),
            exists: false,
            length: None,
            retention_setting: role.retention_setting(),
            retention_ms: u64::try_from(role.retention(config).as_millis()).unwrap_or(u64::MAX),
            server_time_ms: None,
            policy_cutoff: None,
            minid: None,
            decided_by: None,
            entries: Some(0),
            entries_exact: true,
            bytes: Some(0),
            result: "no_stream",
            detail: None,
            groups: Vec::new(),
        }
    }

    fn missing(config: &QueueConfig, stream: StreamSlot, role: StreamRole) -> Row {
        Row::base(config, stream, role)
    }

    fn planned(config: &QueueConfig, plan: &TrimPlan) -> Row {
        let mut row = Row::base(config, plan.stream, plan.role);
        row.exists = true;
        row.length = Some(plan.length);
        row.server_time_ms = Some(plan.server_time_ms);
        row.policy_cutoff = Some(plan.policy_cutoff.to_string());
        row.minid = Some(plan.minid.to_string());
        row.decided_by = Some(DecidedBy {
            kind: plan.decided_by.kind(),
            group: plan.decided_by.group().map(str::to_owned),
            id: plan.minid.to_string(),
        });
        row.groups = plan
            .groups
            .iter()
            .map(|group| GroupRow {
                name: group.name.clone(),
                last_delivered: group.last_delivered.to_string(),
                lowest_pending: group.lowest_pending.map(|id| id.to_string()),
                first_undelivered: group.first_undelivered.map(|id| id.to_string()),
            })
            .collect();
        (row.entries, row.entries_exact) = match plan.removable {
            Removable::Exact(n) => (Some(n), true),
            Removable::AtLeast(n) => (Some(n), false),
            Removable::Unknown => (None, false),
        };
        row.bytes = plan.bytes_estimate;
        row.result = if plan.removes_anything() {
            "would_trim"
        } else {
            "nothing"
        };
        row
    }

    fn trimmed(config: &QueueConfig, stream: &StreamTrim) -> Row {
        let mut row = Row::planned(config, &stream.plan);
        match &stream.result {
            Ok(Some(trimmed)) => {
                row.entries = Some(trimmed.removed);
                row.entries_exact = true;
                row.bytes = trimmed.bytes_freed;
                row.result = "trimmed";
            }
            Ok(None) => {
                row.result = "nothing";
            }
            Err(err) => {
                row.entries = Some(0);
                row.entries_exact = true;
                row.bytes = Some(0);
                row.result = match err {
                    Error::Operation(OperationError::TrimAborted { .. }) => "aborted",
                    Error::Operation(OperationError::LeaseHeld { .. }) => "lease_held",
                    Error::Operation(OperationError::TrimUnverified { .. }) => "unverified",
                    _ => "failed",
                };
                row.detail = Some(err.to_string());
            }
        }
        row
    }

    fn failed(&self) -> bool {
        matches!(
            self.result,
            "aborted" | "lease_held" | "unverified" | "failed"
        )
    }

    fn cutoff_cell(&self) -> String {
        match (&self.minid, self.server_time_ms) {
            (Some(minid), Some(now)) => {
                let ms: u64 = minid
                    .split_once('-')
                    .and_then(|(ms, _)| ms.parse().ok())
                    .unwrap_or(0);
                format!("{minid} ({} ago)", short_duration(now.saturating_sub(ms)))
            }
            _ => "-".to_owned(),
        }
    }

    fn decided_cell(&self) -> String {
        match &self.decided_by {
            None => "-".to_owned(),
            Some(decided) => match (&decided.group, decided.kind) {
                // The setting as the spec writes it (`14d`, `1h30m`).
                (None, _) => format!(
                    "policy ({} {})",
                    self.retention_setting,
                    queuegen::spec::units::format_duration(Duration::from_millis(
                        self.retention_ms
                    ))
                ),
                (Some(group), kind) => format!("group {group} {kind}"),
            },
        }
    }

    fn entries_cell(&self) -> String {
        match (self.entries, self.entries_exact) {
            (None, _) => "unknown".to_owned(),
            (Some(n), true) => n.to_string(),
            (Some(n), false) => format!(">={n}"),
        }
    }

    fn bytes_cell(&self) -> String {
        match self.bytes {
            None => "unknown".to_owned(),
            Some(0) => "0".to_owned(),
            Some(n) => format!("~{}", bytes(n)),
        }
    }

    fn result_cell(&self) -> String {
        let text = match self.result {
            "would_trim" => "would trim",
            "nothing" => "nothing to trim",
            "trimmed" => "trimmed",
            "no_stream" => "no stream yet",
            "aborted" => "ABORTED",
            "lease_held" => "LEASE HELD",
            "unverified" => "UNVERIFIED",
            _ => "FAILED",
        };
        match &self.detail {
            Some(detail) if self.failed() => format!("{text}: {detail}"),
            _ => text.to_owned(),
        }
    }
}

fn print_table(rows: &[Row], dry_run: bool) {
    let entries_header = if dry_run { "WOULD GO" } else { "REMOVED" };
    let header = [
        "KEY",
        "CUTOFF (MINID)",
        "DECIDED BY",
        entries_header,
        "BYTES",
        "RESULT",
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|row| {
            [
                row.key.clone(),
                row.cutoff_cell(),
                row.decided_cell(),
                row.entries_cell(),
                row.bytes_cell(),
                row.result_cell(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            // Counts right-aligned, everything else left.
            if i == 3 || i == 4 {
                out.push_str(&format!("{cell:>width$}"));
            } else {
                out.push_str(&format!("{cell:width$}"));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in &cells {
        line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]].map(String::as_str));
    }

    let entries: u64 = rows.iter().filter_map(|row| row.entries).sum();
    let at_least = if rows.iter().all(|row| row.entries_exact) {
        ""
    } else {
        "at least "
    };
    let bytes_total: Option<u64> = rows.iter().map(|row| row.bytes).sum();
    let size = match bytes_total {
        Some(0) | None => String::new(),
        Some(n) => format!(" (~{})", bytes(n)),
    };
    let streams = rows
        .iter()
        .filter(|row| matches!(row.result, "would_trim" | "trimmed"))
        .count();
    let failed = rows.iter().filter(|row| row.failed()).count();
    if dry_run {
        println!(
            "dry run: {at_least}{entries} entries{size} would go from {streams} of {} streams; nothing was changed",
            rows.len()
        );
    } else {
        println!(
            "trimmed {entries} entries{size} from {streams} of {} streams",
            rows.len()
        );
        if failed > 0 {
            println!(
                "{failed} stream(s) not trimmed (see RESULT): nothing was removed from them; run again"
            );
        }
    }
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `310.2 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use queuegen_runtime::trim::Boundary;

    use super::*;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn the_policy_is_named_with_its_setting() {
        let mut config = example_config();
        config.dead_letter.retention = Duration::from_secs(14 * 86_400);
        let mut row = Row::base(&config, StreamSlot::new(3), StreamRole::Dead);
        row.decided_by = Some(DecidedBy {
            kind: Boundary::Policy.kind(),
            group: None,
            id: "1-0".into(),
        });
        assert_eq!(row.decided_cell(), "policy (dead_letter.retention 14d)");
        assert_eq!(row.key, "work:{ocr-03}:dead");
    }

    fn example_config() -> QueueConfig {
        let spec = queuegen::spec::check_file(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/docs-pipeline/queues.yaml"
        )))
        .unwrap()
        .spec
        .unwrap();
        let queue = spec.queue("ocr").unwrap();
        queue_config(&spec, queue)
    }
}
