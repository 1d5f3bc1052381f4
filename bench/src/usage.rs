//! Where the time goes: CPU of this process and of the Redis server, and the
//! commands the server ran, sampled at the edges of each phase.
//!
//! The bench process and redis-server share the machine, so a rate alone
//! cannot say which side a variant spends its time on. Client CPU is this
//! process's `getrusage` (every variant runs in it, one at a time); server
//! CPU and commands come from `INFO cpu` and `INFO stats`. The samples'
//! own `INFO` calls are counted too, the same few in every variant. On a
//! Cluster, `INFO` answers per primary and each primary's share is kept, so
//! the report can show whether the partitions spread the load.

use anyhow::{Context, Result};
use redis::aio::ConnectionLike;

/// Cumulative counters at one instant.
#[derive(Debug, Clone)]
pub struct Sample {
    client_cpu_secs: f64,
    servers: Vec<ServerUsage>,
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
    pub server_cpu_secs: f64,
    pub commands: u64,
    /// Each server's part of `server_cpu_secs` and `commands`, by node name.
    pub servers: Vec<ServerUsage>,
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
            server_cpu_secs: servers.iter().map(|s| s.cpu_secs).sum(),
            commands: servers.iter().map(|s| s.commands).sum(),
            servers,
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
    let reply: redis::Value = redis::cmd("INFO")
        .arg("cpu")
        .arg("stats")
        .query_async(conn)
        .await
        .context("INFO cpu stats")?;
    let mut servers = Vec::new();
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
    }
    servers.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(Sample {
        client_cpu_secs,
        servers,
    })
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
