//! Calls that move or settle a job of one partition: `retry_schedule`, `defer`, `dead_letter`, the promote functions, `replay`, `schedule_tick`, `claim`, `ack`, `ack_delete` and `renew`.
//!
//! All keys of one call share the partition's hash tag; what each move
//! means, and how its reply reads, is `transitions`.

use redis::{Cmd, FromRedisValue, ParsingError, ToRedisArgs, Value};

use crate::entry::{entries_of, Entry};

use super::{fcall, Function, FunctionCall};

/// `retry_schedule` (or, with `defer`, `defer`): move a pending ready entry
/// to the retry set as its next attempt (`defer` keeps the attempt).
/// Answers `[scheduled|already, retry_id]`.
#[derive(Debug, Clone, Copy)]
pub struct Reschedule<'a> {
    /// `defer` instead of `retry_schedule`.
    pub defer: bool,
    pub ready_key: &'a str,
    pub retry_key: &'a str,
    pub retry_jobs_key: &'a str,
    pub marker_key: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub source_id: &'a str,
    pub due_ms: u64,
    pub reason: &'a str,
    pub marker_ttl_ms: u64,
    /// Accepted schema versions, comma-separated (`1,2`).
    pub accepted_schemas: &'a str,
}

impl FunctionCall for Reschedule<'_> {
    fn command(&self, name: &str) -> Cmd {
        let function = if self.defer {
            Function::Defer
        } else {
            Function::RetrySchedule
        };
        let keys = [
            self.ready_key,
            self.retry_key,
            self.retry_jobs_key,
            self.marker_key,
        ];
        let mut cmd = fcall(name, function, &keys);
        cmd.arg(self.group)
            .arg(self.consumer)
            .arg(self.source_id)
            .arg(self.due_ms)
            .arg(self.reason)
            .arg(self.marker_ttl_ms)
            .arg(self.accepted_schemas);
        cmd
    }
}

/// `dead_letter`: move a pending ready entry to the dead-letter stream.
/// Answers `[dead_lettered|already, dead_id]`.
#[derive(Debug, Clone, Copy)]
pub struct DeadLetterCall<'a> {
    pub ready_key: &'a str,
    pub dead_key: &'a str,
    pub marker_key: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub source_id: &'a str,
    /// One of the dead-letter reasons (`DeadReason::as_str`).
    pub reason: &'a str,
    pub detail: &'a str,
    pub deliveries: u64,
    pub marker_ttl_ms: u64,
    pub dead_letter_max_len: u64,
}

impl FunctionCall for DeadLetterCall<'_> {
    fn command(&self, name: &str) -> Cmd {
        let keys = [self.ready_key, self.dead_key, self.marker_key];
        let mut cmd = fcall(name, Function::DeadLetter, &keys);
        cmd.arg(self.group)
            .arg(self.consumer)
            .arg(self.source_id)
            .arg(self.reason)
            .arg(self.detail)
            .arg(self.deliveries)
            .arg(self.marker_ttl_ms)
            .arg(self.dead_letter_max_len);
        cmd
    }
}

/// `retry_promote` (or, with `delayed`, `delayed_promote`): move the due
/// `members` of a scheduled set to the ready stream. Answers `[promoted,
/// already, skipped, dead_lettered]`.
#[derive(Debug, Clone, Copy)]
pub struct Promote<'a> {
    /// `delayed_promote` instead of `retry_promote`.
    pub delayed: bool,
    pub set_key: &'a str,
    pub jobs_key: &'a str,
    pub ready_key: &'a str,
    /// Where a member that can never be promoted goes.
    pub dead_key: &'a str,
    /// One promotion marker per member, in the order of `members`.
    pub marker_keys: &'a [String],
    pub now_ms: u64,
    pub batch: usize,
    pub marker_ttl_ms: u64,
    pub dead_letter_max_len: u64,
    pub members: &'a [String],
}

impl FunctionCall for Promote<'_> {
    fn command(&self, name: &str) -> Cmd {
        let function = if self.delayed {
            Function::DelayedPromote
        } else {
            Function::RetryPromote
        };
        let keys: Vec<&str> = [self.set_key, self.jobs_key, self.ready_key, self.dead_key]
            .into_iter()
            .chain(self.marker_keys.iter().map(String::as_str))
            .collect();
        let mut cmd = fcall(name, function, &keys);
        cmd.arg(self.now_ms)
            .arg(self.batch)
            .arg(self.marker_ttl_ms)
            .arg(self.dead_letter_max_len)
            .arg(self.members);
        cmd
    }
}

/// `replay`: append a dead letter's envelope to the ready stream as attempt
/// 1 (as `new_job_id` when not empty). Answers `[replayed|already, id]`.
#[derive(Debug, Clone, Copy)]
pub struct Replay<'a> {
    pub dead_key: &'a str,
    pub ready_key: &'a str,
    pub marker_key: &'a str,
    pub dead_id: &'a str,
    /// Empty: keep the dead letter's own `job_id`.
    pub new_job_id: &'a str,
    pub marker_ttl_ms: u64,
    /// Accepted schema versions, comma-separated (`1,2`).
    pub accepted_schemas: &'a str,
}

impl FunctionCall for Replay<'_> {
    fn command(&self, name: &str) -> Cmd {
        let keys = [self.dead_key, self.ready_key, self.marker_key];
        let mut cmd = fcall(name, Function::Replay, &keys);
        cmd.arg(self.dead_id)
            .arg(self.new_job_id)
            .arg(self.marker_ttl_ms)
            .arg(self.accepted_schemas);
        cmd
    }
}

/// `schedule_tick`: append a schedule's job for one tick unless its marker
/// says it was published. Answers `[published|already, id]`.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleTick<'a, F> {
    pub ready_key: &'a str,
    pub marker_key: &'a str,
    pub schedule: &'a str,
    pub tick_ms: u64,
    pub marker_ttl_ms: u64,
    /// The job's header and body pairs.
    pub fields: &'a F,
}

impl<F: ToRedisArgs> FunctionCall for ScheduleTick<'_, F> {
    fn command(&self, name: &str) -> Cmd {
        let keys = [self.ready_key, self.marker_key];
        let mut cmd = fcall(name, Function::ScheduleTick, &keys);
        cmd.arg(self.schedule)
            .arg(self.tick_ms)
            .arg(self.marker_ttl_ms)
            .arg(self.fields);
        cmd
    }
}

/// `claim`: `XAUTOCLAIM` of the entries idle for `min_idle_ms` from
/// `cursor`, at most `count`, raising the partition's claim epoch when it
/// took any. Answers `[next_cursor, entries, deleted_ids, epoch]`.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub ready_key: &'a str,
    pub claims_key: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub min_idle_ms: u64,
    pub cursor: &'a str,
    pub count: usize,
}

impl FunctionCall for Claim<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::Claim, &[self.ready_key, self.claims_key]);
        cmd.arg(self.group)
            .arg(self.consumer)
            .arg(self.min_idle_ms)
            .arg(self.cursor)
            .arg(self.count);
        cmd
    }
}

/// The reply of [`Claim`]: `[next_cursor, entries, deleted_ids, epoch]`.
pub(crate) struct ClaimReply {
    pub(crate) next_cursor: String,
    pub(crate) claimed: Vec<Entry>,
    pub(crate) deleted_ids: Vec<String>,
    /// The partition's claim epoch after the call; the claimed entries carry it.
    pub(crate) epoch: u64,
}

impl FromRedisValue for ClaimReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let Value::Array(parts) = value else {
            return Err(ParsingError::from(format!(
                "expected [next_cursor, entries, deleted_ids, epoch], found {value:?}"
            )));
        };
        let mut parts = parts.into_iter();
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(next), Some(entries), Some(deleted), Some(epoch)) => Ok(ClaimReply {
                next_cursor: String::from_redis_value(next)?,
                claimed: entries_of(entries)?,
                deleted_ids: Vec::from_redis_value(deleted)?,
                epoch: u64::from_redis_value(epoch)?,
            }),
            _ => Err(ParsingError::from(
                "expected [next_cursor, entries, deleted_ids, epoch]",
            )),
        }
    }
}

/// `ack` (or, with `delete`, `ack_delete`): acknowledge those of each
/// stream's `ids` still pending for `consumer`, on one or more streams in one
/// call. Answers, for one stream, `[acked, [id, owner, ...], unaccounted,
/// epoch]` (`ack_delete` appends `deleted`), for several an array of those
/// (or of a stream's error); `transitions::AckFunction` reads it.
#[derive(Debug, Clone, Copy)]
pub struct Ack<'a> {
    /// `ack_delete` (`XACKDEL … ACKED`) instead of `ack`.
    pub delete: bool,
    pub group: &'a str,
    pub consumer: &'a str,
    /// At least one; on a Cluster, all in one slot.
    pub streams: &'a [AckStream<'a>],
}

/// One stream's part of an [`Ack`] call.
#[derive(Debug, Clone, Copy)]
pub struct AckStream<'a> {
    pub ready_key: &'a str,
    pub claims_key: &'a str,
    /// A claim epoch read before the read that delivered the oldest of
    /// `ids`: while it has not moved, nothing is listed; `None` (`-`)
    /// checks each entry.
    pub claim_epoch: Option<u64>,
    /// At least one.
    pub ids: &'a [&'a str],
}

impl FunctionCall for Ack<'_> {
    /// `KEYS = [ready_1, claims_1, ...]`, `ARGV = [group, consumer, epoch_1,
    /// ..., epoch_n, count_1, ..., count_(n-1), ids...]`: the last stream
    /// takes the IDs the counts leave, so one stream's call carries no count.
    fn command(&self, name: &str) -> Cmd {
        let function = if self.delete {
            Function::AckDelete
        } else {
            Function::Ack
        };
        let keys: Vec<&str> = self
            .streams
            .iter()
            .flat_map(|stream| [stream.ready_key, stream.claims_key])
            .collect();
        let mut cmd = fcall(name, function, &keys);
        cmd.arg(self.group).arg(self.consumer);
        for stream in self.streams {
            match stream.claim_epoch {
                Some(epoch) => cmd.arg(epoch),
                None => cmd.arg("-"),
            };
        }
        if let Some((_, leading)) = self.streams.split_last() {
            for stream in leading {
                cmd.arg(stream.ids.len());
            }
        }
        for stream in self.streams {
            cmd.arg(stream.ids);
        }
        cmd
    }
}

/// `renew`: reset the idle time of entry `id` if it is still pending for
/// `consumer`. Answers `[1, consumer]` or `[0, owner or ""]`.
#[derive(Debug, Clone, Copy)]
pub struct Renew<'a> {
    pub ready_key: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub id: &'a str,
}

impl FunctionCall for Renew<'_> {
    fn command(&self, name: &str) -> Cmd {
        let mut cmd = fcall(name, Function::Renew, &[self.ready_key]);
        cmd.arg(self.group).arg(self.consumer).arg(self.id);
        cmd
    }
}
