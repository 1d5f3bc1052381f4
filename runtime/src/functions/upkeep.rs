//! Calls that keep a queue in shape: `trim`, `rate_take`, `consumers_prune` and `version`.

use redis::Cmd;

use super::{fcall, Function, FunctionCall};

/// A group as the trim plan saw it: its name and last-delivered ID.
#[derive(Debug, Clone)]
pub struct TrimGroup<'a> {
    pub name: &'a str,
    pub last_delivered: String,
}

/// `trim`: under the lease `holder` holds, re-check the plan's groups and
/// trim the stream to `minid`. Answers `["trimmed", removed, bytes_freed,
/// groups…]` or `["aborted", group, change]` (read by `trim`); a
/// lease no longer this holder's is refused with `QG_LEASE <holder>`.
#[derive(Debug, Clone, Copy)]
pub struct Trim<'a> {
    pub stream_key: &'a str,
    pub lease_key: &'a str,
    /// `ready` or `dead`: which stream of the partition.
    pub role: &'a str,
    pub holder: &'a str,
    pub minid: &'a str,
    pub retention_ms: u64,
    /// Trim with `XTRIM … ACKED` (Redis 8.2+).
    pub xtrim_acked: bool,
    pub groups: &'a [TrimGroup<'a>],
}

impl FunctionCall for Trim<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::Trim, &[self.stream_key, self.lease_key]);
        cmd.arg(self.role)
            .arg(self.holder)
            .arg(self.minid)
            .arg(self.retention_ms)
            .arg(if self.xtrim_acked { "1" } else { "0" })
            .arg(self.groups.len());
        for group in self.groups {
            cmd.arg(group.name).arg(&group.last_delivered);
        }
        cmd
    }
}

/// `rate_take`: take up to `wanted` tokens of a token bucket holding `limit`
/// per `per_ms`, first giving back (positive `carry`) or taking (negative)
/// what an earlier grant left. Answers `[granted, wait_ms]`.
#[derive(Debug, Clone, Copy)]
pub struct RateTake<'a> {
    pub bucket_key: &'a str,
    pub limit: u32,
    pub per_ms: u64,
    pub wanted: usize,
    pub carry: i64,
}

impl FunctionCall for RateTake<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::RateTake, &[self.bucket_key]);
        cmd.arg(self.limit)
            .arg(self.per_ms)
            .arg(self.wanted)
            .arg(self.carry);
        cmd
    }
}

/// `consumers_prune`: remove from `group` every consumer of the stream
/// idle longer than `min_idle_ms` that holds no pending entry, except
/// `keep`, counting them in the partition's `pruned` counter. Answers the
/// names removed.
#[derive(Debug, Clone, Copy)]
pub struct ConsumersPrune<'a> {
    pub ready_key: &'a str,
    pub pruned_key: &'a str,
    pub group: &'a str,
    /// The caller's own consumer, never removed.
    pub keep: &'a str,
    pub min_idle_ms: u64,
}

impl FunctionCall for ConsumersPrune<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(
            name,
            Function::ConsumersPrune,
            &[self.ready_key, self.pruned_key],
        );
        cmd.arg(self.group).arg(self.keep).arg(self.min_idle_ms);
        cmd
    }
}

/// `version`: the library's name (`qg_<service>_v<N>`), keyless and
/// read-only, so sent as `FCALL_RO`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Version;

impl FunctionCall for Version {
    fn command(&self, name: &str) -> Cmd {
        fcall(name, Function::Version, &[])
    }
}
