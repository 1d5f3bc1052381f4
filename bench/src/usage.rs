//! Where the time goes: CPU of this process and of the Redis server, and the
//! commands the server ran, sampled at the edges of each phase.
//!
//! The bench process and redis-server share the machine, so a rate alone
//! cannot say which side a variant spends its time on. Client CPU is this
//! process's `getrusage` (every variant runs in it, one at a time); server
//! CPU and commands come from `INFO cpu` and `INFO stats`. The samples'
//! own `INFO` calls are counted too, the same few in every variant. On a
//! Cluster, `INFO` answers per primary and each primary's share is kept, so
//! the report can show whether the partitions spread the load. With a
//! private PostgreSQL (`watch_postgres`), its CPU is sampled too: the
//! postmaster's own and reaped children's time plus each live backend's,
//! from `/proc`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use redis::aio::ConnectionLike;

/// Cumulative counters at one instant.
#[derive(Debug, Clone)]
pub struct Sample {
    client_cpu_secs: f64,
    postgres_cpu_secs: Option<f64>,
    servers: Vec<ServerUsage>,
    /// Calls and server microseconds of each command, summed over the primaries.
    by_command: BTreeMap<String, CommandUsage>,
}

/// One command's calls and the server time it took (`INFO commandstats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommandUsage {
    pub calls: u64,
    pub usec: u64,
}

/// One server's CPU seconds and commands (cumulative in a [`Sample`], a
/// difference in a [`Usage`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerUsage {
    /// `host:port` of a Cluster primary; `server` for a lone server.
    pub node: String,
    pub cpu_secs: f64,
    pub commands: u64,
}

/// What one phase used: the difference of the samples at its two edges.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub client_cpu_secs: f64,
    /// The private PostgreSQL's CPU (all its processes), when one runs.
    pub postgres_cpu_secs: Option<f64>,
    pub server_cpu_secs: f64,
    pub commands: u64,
    /// Each server's part of `server_cpu_secs` and `commands`, by node name.
    pub servers: Vec<ServerUsage>,
    /// Which commands those were, and the server time each took: where a
    /// variant's server CPU goes.
    pub by_command: BTreeMap<String, CommandUsage>,
}

impl Usage {
    pub fn between(start: &Sample, end: &Sample) -> Usage {
        // A node missing from `start` (it cannot be, short of a failover
        // mid-phase) counts from zero rather than hiding its work.
        let servers: Vec<ServerUsage> = end
            .servers
            .iter()
            .map(|after| {
                let before = start.servers.iter().find(|s| s.node == after.node);
                ServerUsage {
                    node: after.node.clone(),
                    cpu_secs: after.cpu_secs - before.map_or(0.0, |s| s.cpu_secs),
                    commands: after
                        .commands
                        .saturating_sub(before.map_or(0, |s| s.commands)),
                }
            })
            .collect();
        Usage {
            client_cpu_secs: end.client_cpu_secs - start.client_cpu_secs,
            postgres_cpu_secs: start
                .postgres_cpu_secs
                .zip(end.postgres_cpu_secs)
                .map(|(start, end)| end - start),
            server_cpu_secs: servers.iter().map(|s| s.cpu_secs).sum(),
            commands: servers.iter().map(|s| s.commands).sum(),
            servers,
            by_command: end
                .by_command
                .iter()
                .map(|(name, after)| {
                    let before = start.by_command.get(name).copied().unwrap_or_default();
                    let used = CommandUsage {
                        calls: after.calls.saturating_sub(before.calls),
                        usec: after.usec.saturating_sub(before.usec),
                    };
                    (name.clone(), used)
                })
                .filter(|(_, used)| used.calls > 0)
                .collect(),
        }
    }

    /// Microseconds of client CPU per job.
    pub fn client_us_per_job(&self, jobs: u64) -> f64 {
        self.client_cpu_secs * 1e6 / jobs as f64
    }

    /// Microseconds of server CPU per job.
    pub fn server_us_per_job(&self, jobs: u64) -> f64 {
        self.server_cpu_secs * 1e6 / jobs as f64
    }

    pub fn commands_per_job(&self, jobs: u64) -> f64 {
        self.commands as f64 / jobs as f64
    }
}

/// Reads both sides' counters now. On a Cluster connection `INFO` answers
/// for every primary, each kept by its address.
pub async fn sample<C: ConnectionLike>(conn: &mut C) -> Result<Sample> {
    let client_cpu_secs = client_cpu_secs();
    let postgres_cpu_secs = postgres_cpu_secs();
    let reply: redis::Value = redis::cmd("INFO")
        .arg(&["cpu", "stats", "commandstats"])
        .query_async(conn)
        .await
        .context("INFO cpu stats commandstats")?;
    let mut servers = Vec::new();
    let mut by_command: BTreeMap<String, CommandUsage> = BTreeMap::new();
    for (node, info) in queuegen_runtime::connect::info_by_node(&reply) {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
                .with_context(|| format!("INFO has no {name}"))
        };
        servers.push(ServerUsage {
            node: node.unwrap_or_else(|| "server".to_owned()),
            cpu_secs: field("used_cpu_user")?.parse::<f64>()?
                + field("used_cpu_sys")?.parse::<f64>()?,
            commands: field("total_commands_processed")?.parse::<u64>()?,
        });
        for (name, used) in info.lines().filter_map(parse_command_usage) {
            let sum = by_command.entry(name).or_default();
            sum.calls += used.calls;
            sum.usec += used.usec;
        }
    }
    servers.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(Sample {
        client_cpu_secs,
        postgres_cpu_secs,
        servers,
        by_command,
    })
}

/// Calls of each command so far, by lower-case name (`INFO commandstats`),
/// summed over every primary.
pub async fn command_calls<C: ConnectionLike>(conn: &mut C) -> Result<BTreeMap<String, u64>> {
    let reply: redis::Value = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .context("INFO commandstats")?;
    let mut calls = BTreeMap::new();
    for (_, info) in queuegen_runtime::connect::info_by_node(&reply) {
        for (name, count) in info.lines().filter_map(parse_command_calls) {
            *calls.entry(name).or_default() += count;
        }
    }
    Ok(calls)
}

/// `cmdstat_xack:calls=12,usec=...` → `("xack", 12)`.
pub fn parse_command_calls(line: &str) -> Option<(String, u64)> {
    parse_command_usage(line).map(|(name, used)| (name, used.calls))
}

/// `cmdstat_xack:calls=12,usec=340,...` → `("xack", {12, 340})`.
fn parse_command_usage(line: &str) -> Option<(String, CommandUsage)> {
    let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let stat = |label: &str| -> Option<u64> {
        stats
            .split(',')
            .find_map(|field| field.strip_prefix(label)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    let used = CommandUsage {
        calls: stat("calls")?,
        usec: stat("usec")?,
    };
    Some((name.to_owned(), used))
}

/// Calls per command between two [`command_calls`] samples, without the
/// commands that were not called.
pub fn calls_between(
    start: &BTreeMap<String, u64>,
    end: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    end.iter()
        .map(|(name, &after)| {
            let before = start.get(name).copied().unwrap_or(0);
            (name.clone(), after.saturating_sub(before))
        })
        .filter(|&(_, calls)| calls > 0)
        .collect()
}

/// The private PostgreSQL's postmaster, whose CPU samples include.
static POSTGRES: OnceLock<u32> = OnceLock::new();

/// Includes the PostgreSQL server of `postmaster` (and its backends) in every sample from now on.
pub fn watch_postgres(postmaster: u32) {
    let _ = POSTGRES.set(postmaster);
}

/// User plus system CPU of the watched PostgreSQL so far, in seconds: the
/// postmaster's own and its reaped children's (backends that exited),
/// plus every live child's. `None` without one (or without `/proc`).
fn postgres_cpu_secs() -> Option<f64> {
    let postmaster = *POSTGRES.get()?;
    // SAFETY: sysconf takes a constant and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    if ticks <= 0.0 {
        return None;
    }
    // Fields after `pid (comm)`: state ppid … utime(14) stime(15) cutime(16) cstime(17).
    let stat = |pid: &str| -> Option<(u32, [f64; 4])> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| rest.get(n - 3)?.parse::<f64>().ok();
        Some((
            field(4)? as u32,
            [field(14)?, field(15)?, field(16)?, field(17)?],
        ))
    };
    let children: f64 = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| stat(&pid))
        .filter(|(ppid, _)| *ppid == postmaster)
        .map(|(_, [utime, stime, _, _])| utime + stime)
        .sum();
    let (_, own) = stat(&postmaster.to_string())?;
    Some((children + own.iter().sum::<f64>()) / ticks)
}

/// User plus system CPU of this whole process so far, in seconds.
fn client_cpu_secs() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commandstats_lines_give_each_command_its_calls() {
        assert_eq!(
            parse_command_calls("cmdstat_xreadgroup:calls=2000,usec=5100,usec_per_call=2.55,rejected_calls=0,failed_calls=0"),
            Some(("xreadgroup".to_owned(), 2000))
        );
        assert_eq!(
            parse_command_calls("cmdstat_cluster|slots:calls=3,usec=9"),
            Some(("cluster|slots".to_owned(), 3))
        );
        assert_eq!(parse_command_calls("# Commandstats"), None);
        assert_eq!(parse_command_calls("used_cpu_sys:1.5"), None);
    }

    #[test]
    fn calls_between_keeps_only_the_commands_called_in_between() {
        let start = BTreeMap::from([("get".to_owned(), 5), ("xack".to_owned(), 7)]);
        let end = BTreeMap::from([
            ("get".to_owned(), 5),
            ("xack".to_owned(), 9),
            ("mget".to_owned(), 4),
        ]);
        let between = calls_between(&start, &end);
        assert_eq!(
            between,
            BTreeMap::from([("mget".to_owned(), 4), ("xack".to_owned(), 2)])
        );
    }
}
