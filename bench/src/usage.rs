//! Where the time goes: CPU of this process and of the Redis server, and the
//! commands the server ran, sampled at the edges of each phase.
//!
//! The bench process and redis-server share the machine, so a rate alone
//! cannot say which side a variant spends its time on. Client CPU is this
//! process's `getrusage` (every variant runs in it, one at a time); server
//! CPU and commands come from `INFO cpu` and `INFO stats`. The samples'
//! own `INFO` calls are counted too, the same few in every variant.

use anyhow::{Context, Result};
use redis::aio::ConnectionLike;

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    client_cpu_secs: f64,
    server_cpu_secs: f64,
    commands: u64,
}

/// What one phase used: the difference of the samples at its two edges.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub client_cpu_secs: f64,
    pub server_cpu_secs: f64,
    pub commands: u64,
}

impl Usage {
    pub fn between(start: &Sample, end: &Sample) -> Usage {
        Usage {
            client_cpu_secs: end.client_cpu_secs - start.client_cpu_secs,
            server_cpu_secs: end.server_cpu_secs - start.server_cpu_secs,
            commands: end.commands.saturating_sub(start.commands),
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
/// for every primary, and the server side is their sum.
pub async fn sample<C: ConnectionLike>(conn: &mut C) -> Result<Sample> {
    let client_cpu_secs = client_cpu_secs();
    let reply: redis::Value = redis::cmd("INFO")
        .arg("cpu")
        .arg("stats")
        .query_async(conn)
        .await
        .context("INFO cpu stats")?;
    let mut sample = Sample {
        client_cpu_secs,
        server_cpu_secs: 0.0,
        commands: 0,
    };
    for info in queuegen_runtime::connect::info_replies(&reply) {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
                .with_context(|| format!("INFO has no {name}"))
        };
        sample.server_cpu_secs +=
            field("used_cpu_user")?.parse::<f64>()? + field("used_cpu_sys")?.parse::<f64>()?;
        sample.commands += field("total_commands_processed")?.parse::<u64>()?;
    }
    Ok(sample)
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
