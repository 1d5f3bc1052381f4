//! `--variant trim`: what one trim pass over a partition costs, for ready
//! streams of different lengths (default 10k and 1M entries).
//!
//! Per length: a one-partition queue whose ready stream holds that many
//! entries, all older than the policy, read by two groups (`behind` at a
//! quarter of the stream, `ahead` at half with ten entries pending), and a
//! dead-letter stream of a hundredth as many old dead letters. Then one
//! `trim_partition` pass (which trims both streams) and a second pass (with
//! nothing left to trim). Reported per pass: round trips and commands the
//! client sent (counted by a wrapper around its connection), commands the
//! server ran (`total_commands_processed`, which counts the commands inside
//! the trim function too) and their breakdown from `INFO commandstats`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use queuegen_runtime::stream_id::StreamId;
use queuegen_runtime::trim::{self, StreamRole, TrimOptions};
use queuegen_runtime::{QueueConfig, Redis, StreamSlot};
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::usage;

/// Entries per `XADD` pipeline while building a stream.
const BUILD_BATCH: usize = 10_000;
const HOUR_MS: u64 = 3_600_000;

/// One pass's cost.
#[derive(Debug, Clone)]
pub struct PassCost {
    pub entries: u64,
    /// Entries removed from the ready and the dead-letter stream.
    pub removed: (u64, u64),
    pub round_trips: u64,
    pub client_commands: u64,
    pub server_commands: u64,
    /// Commands the server ran, by name (including those inside FCALL).
    pub by_command: BTreeMap<String, u64>,
    pub elapsed: Duration,
}

/// Builds the streams for each length in `sizes` under `prefix`, runs two
/// passes on each, and returns their costs (deleting the keys after).
pub async fn run(redis: &Redis, prefix: &str, sizes: &[u64]) -> Result<Vec<(PassCost, PassCost)>> {
    let mut costs = Vec::new();
    for &size in sizes {
        let key_prefix = format!("{prefix}n{size}");
        let mut config = QueueConfig {
            key_prefix: key_prefix.clone().into(),
            partitions: 1,
            ..queuegen_tests::queues::jobs::CONFIG
        };
        config.retention.min_age = Duration::from_millis(HOUR_MS);
        config.dead_letter.retention = Duration::from_millis(HOUR_MS);
        let outcome = measure(redis, &config, size).await;
        let cleaned = crate::report::delete_prefix(redis, &key_prefix).await;
        let pair = outcome.with_context(|| format!("trim pass over {size} entries"))?;
        cleaned.with_context(|| format!("deleting the keys of {key_prefix}"))?;
        costs.push(pair);
    }
    Ok(costs)
}

async fn measure(redis: &Redis, config: &QueueConfig, size: u64) -> Result<(PassCost, PassCost)> {
    let mut conn = redis.shared();
    build(&mut conn, config, size).await?;
    let options = TrimOptions {
        holder: "queuegen-bench".to_owned(),
        xtrim_acked: trim::xtrim_acked_supported(redis).await?,
        lease_wait: Duration::ZERO,
    };
    let first = pass(redis, config, &options, size).await?;
    // Everything below the lagging group's position went; the rest stays.
    let expected_ready = size / 4 + 1;
    let expected_dead = (size / 100).max(1);
    if first.removed != (expected_ready, expected_dead) {
        bail!(
            "the pass removed {:?}, expected ({expected_ready}, {expected_dead})",
            first.removed
        );
    }
    let second = pass(redis, config, &options, size).await?;
    Ok((first, second))
}

/// `size` ready entries an hour and more old, 1 ms apart; the groups
/// `behind` (at entry size/4) and `ahead` (at size/2, ten pending); and
/// size/100 old dead letters.
async fn build<C: ConnectionLike>(conn: &mut C, config: &QueueConfig, size: u64) -> Result<()> {
    if size < 100 {
        bail!("--trim-entries must be at least 100");
    }
    let now = trim::server_time_ms(conn).await?;
    let start = now - 2 * HOUR_MS - size;
    let id = |n: u64| StreamId::new(start + n, 0).to_string();
    let ready = config.ready_key(StreamSlot::new(0));
    for batch in (0..size).step_by(BUILD_BATCH) {
        let mut pipe = redis::pipe();
        for i in batch..(batch + BUILD_BATCH as u64).min(size) {
            // A job's fields, name and value in turn (no value holds a space).
            let fields = format!(
                "job_id job-{i} type TestJob tenant acme schema 2 attempt 1 subject_ref doc-{i}"
            );
            let fields: Vec<&str> = fields.split(' ').collect();
            pipe.cmd("XADD").arg(&ready).arg(id(i)).arg(fields).ignore();
        }
        pipe.query_async::<()>(conn).await.context("XADD")?;
    }
    let dead = config.dead_key(StreamSlot::new(0));
    let mut pipe = redis::pipe();
    for i in 0..(size / 100).max(1) {
        let fields = format!("job_id job-{i} reason permanent");
        let fields: Vec<&str> = fields.split(' ').collect();
        pipe.cmd("XADD").arg(&dead).arg(id(i)).arg(fields).ignore();
    }
    for (group, at) in [("behind", size / 4), ("ahead", size / 2)] {
        let create = ["CREATE", &ready, group, &id(at)];
        pipe.cmd("XGROUP").arg(&create).ignore();
    }
    let read = [
        "GROUP", "ahead", "bench", "COUNT", "10", "STREAMS", &ready, ">",
    ];
    pipe.cmd("XREADGROUP").arg(&read).ignore();
    pipe.query_async::<()>(conn)
        .await
        .context("building the groups")?;
    Ok(())
}

/// One `trim_partition` pass, with its costs.
async fn pass(
    redis: &Redis,
    config: &QueueConfig,
    options: &TrimOptions,
    size: u64,
) -> Result<PassCost> {
    let mut probe = redis.primaries().await?[0].connection().await?;
    let before = server_counts(&mut probe).await?;
    let mut conn = Counting {
        inner: redis.shared(),
        round_trips: 0,
        commands: 0,
    };
    let started = Instant::now();
    let streams = trim::trim_partition(&mut conn, config, StreamSlot::new(0), options).await?;
    let elapsed = started.elapsed();
    let after = server_counts(&mut probe).await?;
    let mut removed = (0, 0);
    for stream in streams {
        let count = stream.result?.map_or(0, |trimmed| trimmed.removed);
        match stream.plan.role {
            StreamRole::Ready => removed.0 = count,
            StreamRole::Dead => removed.1 = count,
        }
    }
    let mut by_command = usage::calls_between(&before.1, &after.1);
    // Less the probe's own INFO between the two samples.
    by_command
        .entry("info".to_owned())
        .and_modify(|calls| *calls -= 1);
    by_command.retain(|_, calls| *calls > 0);
    Ok(PassCost {
        entries: size,
        removed,
        round_trips: conn.round_trips,
        client_commands: conn.commands,
        // The first sample's INFO is counted in the second.
        server_commands: after.0 - before.0 - 1,
        by_command,
        elapsed,
    })
}

/// `total_commands_processed` and the calls of every command, from one `INFO`.
async fn server_counts<C: ConnectionLike>(conn: &mut C) -> Result<(u64, BTreeMap<String, u64>)> {
    let info: String = redis::cmd("INFO")
        .arg(&["stats", "commandstats"])
        .query_async(conn)
        .await
        .context("INFO stats commandstats")?;
    let total = info
        .lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|value| value.trim().parse().ok())
        .context("INFO has no total_commands_processed")?;
    let calls = info
        .lines()
        .filter_map(usage::parse_command_calls)
        .collect();
    Ok((total, calls))
}

/// A connection that counts what goes through it: one round trip per
/// command or pipeline, and every command of a pipeline.
struct Counting<C> {
    inner: C,
    round_trips: u64,
    commands: u64,
}

impl<C: ConnectionLike + Send> ConnectionLike for Counting<C> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.round_trips += 1;
        self.commands += 1;
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.round_trips += 1;
        self.commands += pipeline.len() as u64;
        self.inner.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// The markdown table of [`run`]'s costs.
pub fn markdown(costs: &[(PassCost, PassCost)]) -> String {
    let mut out = String::from(
        "| ready entries | pass | removed (ready + dead) | round trips | commands sent | commands run by the server | time |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (first, second) in costs {
        for (label, cost) in [("trims", first), ("nothing left", second)] {
            out.push_str(&format!(
                "| {} | {label} | {} + {} | {} | {} | {} | {:.1} ms |\n",
                cost.entries,
                cost.removed.0,
                cost.removed.1,
                cost.round_trips,
                cost.client_commands,
                cost.server_commands,
                cost.elapsed.as_secs_f64() * 1e3,
            ));
        }
    }
    for (first, _) in costs {
        let breakdown: Vec<String> = first
            .by_command
            .iter()
            .map(|(name, calls)| format!("{name} {calls}"))
            .collect();
        out.push_str(&format!(
            "\nserver commands of the trimming pass over {} entries: {}",
            first.entries,
            breakdown.join(", ")
        ));
    }
    out.push('\n');
    out
}
