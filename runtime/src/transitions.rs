//! What each move of a job through the Function library means (docs/functions.md): retry, promote, dead letter, replay, ack, renew.
//!
//! The calls themselves are built by the library's typed client
//! ([`crate::functions`]); this module chooses the keys, reads the replies
//! and says what they mean.
//!
//! Each multi-key transition runs in one function that checks everything
//! before its first write, writes its destination and marker before it removes
//! the source, and on a re-run finds the marker and only finishes cleanup. So
//! every call here is safe to repeat after a timeout or a crash: the second
//! call answers `already` with the same destination ID. The caller computes
//! every key; all keys of one call share the partition's hash tag.
//!
//! Whatever settles or renews a pending entry (`retry_schedule`,
//! `dead_letter`, `ack`, `renew`) names the caller's consumer, and the
//! function acts only on an entry still pending for it: a worker that
//! stalled past `claim.min_idle`, whose entry another worker claimed since,
//! is refused ([`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner), or a refused entry of [`Acked`]) and
//! changes nothing.
//!
//! A refusal (`QG_*` error reply; nothing was written) becomes
//! [`TransitionError::Refused`](crate::error::TransitionError::Refused) naming the function, key, partition and job, or
//! [`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner) naming the entry's current owner. The `version` check
//! at worker start is `functions::verify_library`.

use std::borrow::Cow;
use std::fmt;

use redis::aio::ConnectionLike;

use crate::config::{MarkerKind, QueueConfig};
use crate::error::{Error, Result};
use crate::functions::{self, CallContext as Call, Function};
use crate::packed::EntryArgs;
use crate::stream_slot::{Partition, StreamSlot};

pub use crate::error::TransitionCode;
pub(crate) use crate::functions::Moved;

/// Why a job was dead-lettered: the `reason` code of its dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadReason {
    /// The last attempt `retry.max_attempts` allows failed transiently.
    RetriesExhausted,
    /// The handler failed with a permanent error.
    Permanent,
    /// Delivered `poison.max_deliveries` times without an outcome (a crash loop).
    Poison,
    /// The entry does not decode as the queue's envelope.
    DecodeError,
    /// The entry's schema version is not one this worker accepts.
    UnsupportedSchema,
    /// The handler returned `Outcome::DeadLetter`.
    Handler,
}

impl DeadReason {
    /// Every reason, in the order of `DeadReason::index`.
    pub const ALL: [DeadReason; 6] = [
        DeadReason::RetriesExhausted,
        DeadReason::Permanent,
        DeadReason::Poison,
        DeadReason::DecodeError,
        DeadReason::UnsupportedSchema,
        DeadReason::Handler,
    ];

    /// Position in [`DeadReason::ALL`] (a metric's slot for this reason).
    #[cfg(feature = "metrics")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The reason as a dead letter records it; the Function library's list
    /// of reasons is rendered from these.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeadReason::RetriesExhausted => "retries_exhausted",
            DeadReason::Permanent => "permanent",
            DeadReason::Poison => "poison",
            DeadReason::DecodeError => "decode_error",
            DeadReason::UnsupportedSchema => "unsupported_schema",
            DeadReason::Handler => "handler",
        }
    }
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one `retry_promote` call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Promoted {
    /// Retries moved to the ready stream by this call.
    pub promoted: u64,
    /// Retries an earlier run had promoted; this call removed what was left of them.
    pub already: u64,
    /// Members no longer scheduled (another scheduler took them) or not yet due.
    pub skipped: u64,
    /// Due members that could never be promoted (an envelope missing, not
    /// decodable, or over the library's field limit), moved to the
    /// dead-letter stream (reason `decode_error`) so they do not stall the set.
    pub dead_lettered: u64,
}

/// `retry_schedule`: move a pending ready entry to the retry set as its next attempt.
#[derive(Debug, Clone)]
pub(crate) struct ScheduleRetry<'a> {
    pub stream: StreamSlot,
    /// The consumer the entry must still be pending for: the caller's.
    pub consumer: &'a str,
    /// Stream ID of the attempt that failed (pending in the group).
    pub source_id: &'a str,
    /// The job's `job_id`, for errors.
    pub job_id: &'a str,
    /// When the next attempt is due, Unix ms.
    pub due_ms: u64,
    /// Written to the next attempt's `reason` header.
    pub reason: &'a str,
    /// Schema versions the envelope may have (`Envelope::ACCEPTS`).
    pub accepted_schemas: &'a [u32],
}

/// `dead_letter`: move a pending ready entry to the dead-letter stream.
#[derive(Debug, Clone)]
pub struct DeadLetter<'a> {
    pub stream: StreamSlot,
    /// The consumer the entry must still be pending for: the caller's.
    pub consumer: &'a str,
    /// Stream ID of the entry (pending in the group).
    pub source_id: &'a str,
    /// The job's `job_id` when it decoded, for errors.
    pub job_id: Option<&'a str>,
    pub reason: DeadReason,
    /// A short, safe diagnostic (an error's text, a field name; never the payload).
    pub detail: &'a str,
    /// Times the entry was delivered (the pending list's count), when known; else 0.
    pub deliveries: u64,
}

/// Calls `retry_schedule`; the source is acknowledged when this returns `Ok`.
/// [`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner) when the entry is no longer pending for `retry.consumer`.
pub(crate) async fn retry_schedule<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    retry: &ScheduleRetry<'_>,
) -> Result<Moved> {
    schedule_again(conn, config, retry, MarkerKind::Retry).await
}

/// Calls `defer`: as [`retry_schedule`], with the attempt kept, for a job set
/// aside before it ran (its tenant's rate was spent); it waits in the retry
/// set until `due_ms`. [`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner) as for a retry.
pub(crate) async fn defer<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    deferral: &ScheduleRetry<'_>,
) -> Result<Moved> {
    schedule_again(conn, config, deferral, MarkerKind::Defer).await
}

/// `retry_schedule` (marker kind `Retry`) or `defer` (`Defer`).
async fn schedule_again<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    retry: &ScheduleRetry<'_>,
    kind: MarkerKind,
) -> Result<Moved> {
    let p = retry.stream;
    let defer = kind == MarkerKind::Defer;
    let function = config.function(if defer {
        Function::Defer
    } else {
        Function::RetrySchedule
    });
    let ready_key = config.ready_key(p);
    let cmd = functions::command(
        &function,
        &functions::Reschedule {
            defer,
            ready_key: &ready_key,
            retry_key: &config.retry_key(p),
            retry_jobs_key: &config.retry_jobs_key(p),
            marker_key: &config.marker_key(p, kind, retry.source_id),
            group: &config.group,
            consumer: retry.consumer,
            source_id: retry.source_id,
            due_ms: retry.due_ms,
            reason: retry.reason,
            marker_ttl_ms: marker_ttl_ms(config),
            accepted_schemas: &schema_list(retry.accepted_schemas),
        },
    );
    let call = Call {
        function: &function,
        key: ready_key,
        partition: config.partition_of_stream(p),
        job: retry.job_id,
        entry: Some((retry.source_id, retry.consumer)),
    };
    call.moved(cmd.query_async(conn).await, "scheduled")
}

/// Calls `dead_letter`; the source is acknowledged when this returns `Ok`.
/// [`TransitionError::NotOwner`](crate::error::TransitionError::NotOwner) when the entry is no longer pending for `dead.consumer`.
pub(crate) async fn dead_letter<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    dead: &DeadLetter<'_>,
) -> Result<Moved> {
    let p = dead.stream;
    let function = config.function(Function::DeadLetter);
    let ready_key = config.ready_key(p);
    let cmd = functions::command(
        &function,
        &functions::DeadLetterCall {
            ready_key: &ready_key,
            dead_key: &config.dead_key(p),
            marker_key: &config.marker_key(p, MarkerKind::Dead, dead.source_id),
            group: &config.group,
            consumer: dead.consumer,
            source_id: dead.source_id,
            reason: dead.reason.as_str(),
            detail: dead.detail,
            deliveries: dead.deliveries,
            marker_ttl_ms: marker_ttl_ms(config),
            dead_letter_max_len: config.dead_letter.max_len,
        },
    );
    let call = Call {
        function: &function,
        key: ready_key,
        partition: config.partition_of_stream(p),
        job: dead.job_id.unwrap_or(dead.source_id),
        entry: Some((dead.source_id, dead.consumer)),
    };
    call.moved(cmd.query_async(conn).await, "dead_lettered")
}

/// A set the scheduler promotes from when its members fall due: the retry
/// set (members are entry IDs) or the delayed set (members are job_ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DueSet {
    Retries,
    Delayed,
}

impl DueSet {
    /// The stream's zset of members by due time.
    pub fn key(self, config: &QueueConfig, stream: StreamSlot) -> String {
        match self {
            DueSet::Retries => config.retry_key(stream),
            DueSet::Delayed => config.delayed_key(stream),
        }
    }

    /// The stream's hash of each member's envelope.
    pub fn jobs_key(self, config: &QueueConfig, stream: StreamSlot) -> String {
        match self {
            DueSet::Retries => config.retry_jobs_key(stream),
            DueSet::Delayed => config.delayed_jobs_key(stream),
        }
    }

    /// The library function that promotes its due members.
    pub fn function(self) -> Function {
        match self {
            DueSet::Retries => Function::RetryPromote,
            DueSet::Delayed => Function::DelayedPromote,
        }
    }

    fn marker(self) -> MarkerKind {
        match self {
            DueSet::Retries => MarkerKind::Promote,
            DueSet::Delayed => MarkerKind::Delayed,
        }
    }

    /// How its members are named in errors.
    fn what(self) -> (&'static str, &'static str) {
        match self {
            DueSet::Retries => ("retry", "retries"),
            DueSet::Delayed => ("delayed job", "delayed jobs"),
        }
    }
}

/// The members due at `now_ms` of each (set, stream) in `sets`, oldest
/// first, at most `limit` each, in one pipeline, in the same order.
pub(crate) async fn due_members_of<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    sets: &[(DueSet, StreamSlot)],
    now_ms: u64,
    limit: usize,
) -> Result<Vec<Vec<String>>> {
    let mut pipe = redis::pipe();
    for &(set, stream) in sets {
        pipe.cmd("ZRANGEBYSCORE")
            .arg(set.key(config, stream))
            .arg("-inf")
            .arg(now_ms)
            .arg("LIMIT")
            .arg(0)
            .arg(limit);
    }
    // Each answer on its own, so that an error names its key.
    let answers: Vec<redis::RedisResult<Vec<String>>> = pipe
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| {
            let what = format!("ZRANGEBYSCORE of {} scheduled sets", sets.len());
            Error::redis(what, err)
        })?;
    sets.iter()
        .zip(answers)
        .map(|(&(set, stream), answer)| {
            answer.map_err(|err| {
                Error::redis(format!("ZRANGEBYSCORE {}", set.key(config, stream)), err)
            })
        })
        .collect()
}

/// Calls the promote function of `set` (`retry_promote` or
/// `delayed_promote`) for `members`, at most `config.retry_promote_batch`.
pub(crate) async fn promote<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    set: DueSet,
    stream: StreamSlot,
    now_ms: u64,
    members: &[String],
) -> Result<Promoted> {
    let p = stream;
    let function = config.function(set.function());
    let set_key = set.key(config, p);
    let marker_keys: Vec<String> = members
        .iter()
        .map(|member| config.marker_key(p, set.marker(), member))
        .collect();
    let cmd = functions::command(
        &function,
        &functions::Promote {
            delayed: set == DueSet::Delayed,
            set_key: &set_key,
            jobs_key: &set.jobs_key(config, p),
            ready_key: &config.ready_key(p),
            dead_key: &config.dead_key(p),
            marker_keys: &marker_keys,
            now_ms,
            batch: config.retry.promote_batch,
            marker_ttl_ms: marker_ttl_ms(config),
            dead_letter_max_len: config.dead_letter.max_len,
            members,
        },
    );
    let (one, many) = set.what();
    let job = match members {
        [] => format!("no {many}"),
        [only] => format!("{one} {only}"),
        [first, ..] => format!("{many} {first} and {} more", members.len() - 1),
    };
    let call = Call {
        function: &function,
        key: set_key,
        partition: config.partition_of_stream(p),
        job: &job,
        entry: None,
    };
    let counts: Vec<u64> = cmd.query_async(conn).await.map_err(|err| call.error(err))?;
    match counts[..] {
        [promoted, already, skipped, dead_lettered] => Ok(Promoted {
            promoted,
            already,
            skipped,
            dead_lettered,
        }),
        _ => Err(call.unexpected(format!("{counts:?}"))),
    }
}

/// `FCALL publish_once`: append `pairs` (an encoded envelope with `job_id`,
/// in the queue's shape)
/// to the partition's ready stream unless a publish of `job_id` did within
/// `window`. Answers [`Appended`]. The caller sends it (alone, or in a
/// pipeline with others). The function refuses an envelope over the queue's
/// `payload.max_bytes`, which it is told here.
pub(crate) fn publish_once_command(
    config: &QueueConfig,
    stream: StreamSlot,
    job_id: &str,
    window: std::time::Duration,
    pairs: &impl redis::ToRedisArgs,
) -> redis::Cmd {
    functions::command(
        &config.function(Function::PublishOnce),
        &functions::PublishOnce {
            ready_key: &config.ready_key(stream),
            marker_key: &config.marker_key(stream, MarkerKind::Publish, job_id),
            window_ms: window_ms(window),
            payload_max_bytes: config.payload.max_bytes,
            pairs,
        },
    )
}

/// A dedup window in whole milliseconds, at least 1: `SET … PX 0` fails
/// (the spec never gives a zero window).
pub(crate) fn window_ms(window: std::time::Duration) -> u64 {
    u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// `FCALL delay_schedule`: keep `pairs` in the partition's delayed set until
/// `due_ms`. Answers [`DelayedReply`]. The function refuses an envelope over
/// the queue's `payload.max_bytes`, which it is told here.
pub(crate) fn delay_schedule_command(
    config: &QueueConfig,
    stream: StreamSlot,
    due_ms: u64,
    pairs: &[(&str, String)],
) -> redis::Cmd {
    let job_id = pairs
        .iter()
        .find(|(name, _)| *name == crate::envelope::header_fields::JOB_ID)
        .map_or("", |(_, value)| value.as_str());
    functions::command(
        &config.function(Function::DelaySchedule),
        &functions::DelaySchedule {
            delayed_key: &config.delayed_key(stream),
            delayed_jobs_key: &config.delayed_jobs_key(stream),
            marker_key: &config.marker_key(stream, MarkerKind::Delayed, job_id),
            due_ms,
            payload_max_bytes: config.payload.max_bytes,
            pairs: &EntryArgs::of_pairs(config.payload.shape, pairs),
        },
    )
}

/// What appending one job answered: a plain `XADD`'s ID, or `publish_once`'s
/// `[published|duplicate, id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Appended {
    /// The new entry's ID, or for a duplicate the first publish's.
    pub stream_id: String,
    /// `publish_once` found a publish of the job_id within the window and wrote nothing.
    pub duplicate: bool,
}

impl redis::FromRedisValue for Appended {
    fn from_redis_value(value: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        if let redis::Value::Array(parts) = value {
            let [status, id] = <[redis::Value; 2]>::try_from(parts).map_err(|parts| {
                redis::ParsingError::from(format!("expected [status, id], found {parts:?}"))
            })?;
            let status = String::from_redis_value(status)?;
            let stream_id = String::from_redis_value(id)?;
            return match status.as_str() {
                "published" | "duplicate" => Ok(Appended {
                    duplicate: status == "duplicate",
                    stream_id,
                }),
                other => Err(redis::ParsingError::from(format!(
                    "expected published or duplicate, found {other}"
                ))),
            };
        }
        Ok(Appended {
            stream_id: String::from_redis_value(value)?,
            duplicate: false,
        })
    }
}

/// What `delay_schedule` answered: the due time the job waits for, and
/// whether that is an earlier publish's (the job_id was already waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DelayedReply {
    pub due_ms: u64,
    pub duplicate: bool,
}

impl redis::FromRedisValue for DelayedReply {
    fn from_redis_value(value: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        let [status, due] = <[String; 2]>::from_redis_value(value)?;
        let due_ms = due
            .parse()
            .map_err(|_| redis::ParsingError::from(format!("expected a due time, found {due}")))?;
        match status.as_str() {
            "scheduled" | "duplicate" => Ok(DelayedReply {
                due_ms,
                duplicate: status == "duplicate",
            }),
            other => Err(redis::ParsingError::from(format!(
                "expected scheduled or duplicate, found {other}"
            ))),
        }
    }
}

/// The error of a publish function's reply, naming the function, key, partition and job.
pub(crate) fn publish_error(
    config: &QueueConfig,
    function: Function,
    key: String,
    stream: StreamSlot,
    job_id: &str,
    err: redis::RedisError,
) -> Error {
    let function = config.function(function);
    Call {
        function: &function,
        key,
        partition: config.partition_of_stream(stream),
        job: job_id,
        entry: None,
    }
    .error(err)
}

/// Calls `replay`: appends the dead letter's envelope to the ready stream as
/// attempt 1 (with `new_job_id`, or its own), leaving the dead letter in place.
pub async fn replay<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    dead_id: &str,
    new_job_id: Option<&str>,
    accepted_schemas: &[u32],
) -> Result<Moved> {
    let p = stream;
    let function = config.function(Function::Replay);
    let dead_key = config.dead_key(p);
    let cmd = functions::command(
        &function,
        &functions::Replay {
            dead_key: &dead_key,
            ready_key: &config.ready_key(p),
            marker_key: &config.marker_key(p, MarkerKind::Replay, dead_id),
            dead_id,
            new_job_id: new_job_id.unwrap_or(""),
            marker_ttl_ms: marker_ttl_ms(config),
            accepted_schemas: &schema_list(accepted_schemas),
        },
    );
    let call = Call {
        function: &function,
        key: dead_key,
        partition: config.partition_of_stream(p),
        job: new_job_id.unwrap_or(dead_id),
        entry: None,
    };
    call.moved(cmd.query_async(conn).await, "replayed")
}

/// Calls `schedule_tick`: appends a schedule's job for one tick to its
/// partition's ready stream and sets the tick's marker in the same call,
/// unless the marker says the tick was published already (`Moved::already`,
/// with the ID it was published under). `fields` are the job's header and
/// body pairs; its partition is the caller's `partition_of` them.
pub async fn schedule_tick<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    schedule: &str,
    tick_ms: u64,
    fields: &[(&str, String)],
) -> Result<Moved> {
    let p = stream;
    let function = config.function(Function::ScheduleTick);
    let marker_id = queuegen_core::cadence::marker_id(schedule, tick_ms);
    let ready_key = config.ready_key(p);
    let cmd = functions::command(
        &function,
        &functions::ScheduleTick {
            ready_key: &ready_key,
            marker_key: &config.marker_key(p, MarkerKind::Tick, &marker_id),
            schedule,
            tick_ms,
            marker_ttl_ms: marker_ttl_ms(config),
            fields: &EntryArgs::of_pairs(config.payload.shape, fields),
        },
    );
    let job_id = queuegen_core::cadence::job_id(schedule, tick_ms);
    let call = Call {
        function: &function,
        key: ready_key,
        partition: config.partition_of_stream(p),
        job: &job_id,
        entry: None,
    };
    call.moved(cmd.query_async(conn).await, "published")
}

/// An entry an `ack` call did not acknowledge: it is no longer pending for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The entry's stream ID.
    pub id: String,
    /// The consumer it is pending for now (it claimed the entry), or `None`
    /// when it is no longer pending (settled by someone else, or by an
    /// earlier attempt of this very call whose reply was lost).
    pub owner: Option<String>,
}

/// How the worker acknowledges its `Done` jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AckPath {
    /// `XACK` (the library's `ack`): entries stay until the trimmer removes
    /// them after `retention.min_age`.
    #[default]
    Xack,
    /// `XACKDEL … ACKED` (the library's `ack_delete`), for a queue with
    /// `retention.on_ack: delete` on servers that have it (Redis 8.2+):
    /// an entry every group has read and none holds pending is deleted with
    /// its ack; the others are kept for the trimmer.
    XackDel,
}

impl AckPath {
    /// The command that acknowledges, as the start log names it.
    pub fn command(self) -> &'static str {
        match self {
            AckPath::Xack => "XACK",
            AckPath::XackDel => "XACKDEL ACKED",
        }
    }
}

/// What one `ack` call did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acked {
    /// Entries acknowledged: they were pending for the caller (deleted or
    /// kept alike: an ack is never reported failed because it was kept).
    pub acked: u64,
    /// Of `acked`, the entries deleted with their ack ([`AckPath::XackDel`]
    /// only); the others were kept because another group has not read them
    /// yet or holds them pending.
    pub deleted: u64,
    /// On [`AckPath::XackDel`]: the server refused `XACKDEL` (a failover to
    /// a server without it, a users file without `+xackdel`) and the
    /// entries were acknowledged with `XACK` instead.
    pub xackdel_refused: bool,
    /// The others the checked path found, untouched, with their owner.
    pub refused: Vec<Refused>,
    /// Entries the fast path (claim epoch unchanged) found no longer
    /// pending, without naming them: settled or removed by someone else
    /// outside the claim path, or by a lost earlier attempt of this call.
    pub unaccounted: u64,
    /// The partition's claim epoch when the call ran.
    pub epoch: u64,
}

/// The raw answer to one `ack` call: `[acked, [id, owner, ...], unaccounted,
/// epoch]` (`ack_delete` appends `deleted`), or its error.
pub(crate) type AckAnswer = redis::RedisResult<Vec<redis::Value>>;

/// The `ack` function of one queue, named once: the worker's acker calls it
/// for every partition of every flush, in one pipeline.
#[derive(Debug, Clone)]
pub struct AckFunction {
    function: String,
    path: AckPath,
    group: Cow<'static, str>,
    /// The queue's partition count: errors name the partition of a stream.
    partitions: u16,
}

impl AckFunction {
    /// The `ack` function ([`AckPath::Xack`]).
    pub fn new(config: &QueueConfig) -> Self {
        Self::on(config, AckPath::Xack)
    }

    /// How this function acknowledges.
    pub(crate) fn path(&self) -> AckPath {
        self.path
    }

    /// `ack` for [`AckPath::Xack`], `ack_delete` for [`AckPath::XackDel`].
    pub fn on(config: &QueueConfig, path: AckPath) -> Self {
        let name = match path {
            AckPath::Xack => Function::Ack,
            AckPath::XackDel => Function::AckDelete,
        };
        AckFunction {
            function: config.function(name),
            path,
            group: config.group.clone(),
            partitions: config.partitions.max(1),
        }
    }

    /// One `FCALL ack` acknowledging, on each of `streams`, those of its IDs
    /// still pending for `consumer` (see `ack` in docs/functions.md). Each
    /// stream's `claim_epoch` is a claim epoch of its partition read before
    /// the read that delivered the oldest of its IDs: while it has not moved,
    /// the function acknowledges without listing the pending entries; `None`
    /// always checks each one. The reply tells each stream's current epoch.
    /// Checked IDs in ascending order cost the server least (one `XPENDING`
    /// lists them all). On a Cluster, `streams` must share one slot.
    pub fn command(&self, consumer: &str, streams: &[functions::AckStream<'_>]) -> redis::Cmd {
        functions::command(
            &self.function,
            &functions::Ack {
                delete: self.path == AckPath::XackDel,
                group: &self.group,
                consumer,
                streams,
            },
        )
    }

    /// Reads the answer to a [`AckFunction::command`] on one stream,
    /// `stream`'s `ready_key`.
    pub fn reply(&self, ready_key: &str, stream: StreamSlot, answer: AckAnswer) -> Result<Acked> {
        let call = self.call(ready_key, stream);
        let values = answer.map_err(|err| call.error(err))?;
        self.acked(&call, values)
    }

    /// Reads the answer to a [`AckFunction::command`] on `streams` (each
    /// ready key and its stream, in the command's order): one outcome per
    /// stream. The call's own error is every stream's; a stream the function
    /// could not settle has its own error and was left untouched.
    pub fn replies(
        &self,
        streams: &[(&str, StreamSlot)],
        answer: redis::RedisResult<redis::Value>,
    ) -> Vec<Result<Acked>> {
        if let [(ready_key, stream)] = streams {
            let answer = answer.and_then(|value| Ok(redis::from_redis_value(value)?));
            return vec![self.reply(ready_key, *stream, answer)];
        }
        let calls = streams
            .iter()
            .map(|(ready_key, stream)| self.call(ready_key, *stream));
        let items = match answer {
            Ok(redis::Value::Array(items)) if items.len() == streams.len() => items,
            Ok(other) => {
                let shown = format!("{other:?}");
                return calls
                    .map(|call| Err(call.unexpected(shown.clone())))
                    .collect();
            }
            Err(err) => return calls.map(|call| Err(call.error(err.clone()))).collect(),
        };
        calls
            .zip(items)
            .map(|(call, item)| match item {
                redis::Value::ServerError(err) => Err(call.error(err.into())),
                redis::Value::Array(values) => self.acked(&call, values),
                other => Err(call.unexpected(format!("{other:?}"))),
            })
            .collect()
    }

    /// How errors of a call on `stream` name it.
    fn call<'a>(&'a self, ready_key: &str, stream: StreamSlot) -> Call<'a> {
        Call {
            function: &self.function,
            key: ready_key.to_owned(),
            partition: Partition::new(stream.index() % self.partitions),
            job: "a batch of done jobs",
            entry: None,
        }
    }

    /// One stream's reply: `[acked, refused, unaccounted, epoch]`, with
    /// `deleted` after them on [`AckPath::XackDel`].
    fn acked(&self, call: &Call<'_>, values: Vec<redis::Value>) -> Result<Acked> {
        let shown = format!("{values:?}");
        let expected = match self.path {
            AckPath::Xack => 4,
            AckPath::XackDel => 5,
        };
        if values.len() != expected {
            return Err(call.unexpected(shown));
        }
        let mut values = values.into_iter();
        let mut next = || values.next().unwrap_or(redis::Value::Nil);
        let acked: u64 =
            redis::from_redis_value(next()).map_err(|_| call.unexpected(shown.clone()))?;
        let flat: Vec<String> =
            redis::from_redis_value(next()).map_err(|_| call.unexpected(shown.clone()))?;
        let unaccounted: u64 =
            redis::from_redis_value(next()).map_err(|_| call.unexpected(shown.clone()))?;
        let epoch: u64 =
            redis::from_redis_value(next()).map_err(|_| call.unexpected(shown.clone()))?;
        let (deleted, xackdel_refused) = match self.path {
            AckPath::Xack => (0, false),
            AckPath::XackDel => {
                let deleted: i64 =
                    redis::from_redis_value(next()).map_err(|_| call.unexpected(shown.clone()))?;
                match u64::try_from(deleted) {
                    Ok(deleted) if deleted <= acked => (deleted, false),
                    Ok(_) => return Err(call.unexpected(shown)),
                    Err(_) => (0, true),
                }
            }
        };
        if flat.len() % 2 != 0 {
            return Err(call.unexpected(shown));
        }
        let mut refused = Vec::with_capacity(flat.len() / 2);
        let mut pairs = flat.into_iter();
        while let (Some(id), Some(owner)) = (pairs.next(), pairs.next()) {
            let owner = Some(owner).filter(|owner| !owner.is_empty());
            refused.push(Refused { id, owner });
        }
        Ok(Acked {
            acked,
            deleted,
            xackdel_refused,
            refused,
            unaccounted,
            epoch,
        })
    }
}

/// What a `renew` call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The entry was pending for the caller: its idle time is 0 again (and
    /// its delivery count unchanged).
    Renewed,
    /// The entry is pending for another consumer (`Some`), or no longer
    /// pending (`None`): nothing changed, and it was not taken back.
    NotOwner { owner: Option<String> },
}

/// Calls `renew`: resets the idle time of `stream`'s entry `id` if it is
/// still pending for `consumer`, so that no recovery claims it for another
/// `claim.min_idle`.
pub(crate) async fn renew<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    consumer: &str,
    id: &str,
) -> Result<Renewal> {
    let function = config.function(Function::Renew);
    let key = config.ready_key(stream);
    let cmd = functions::command(
        &function,
        &functions::Renew {
            ready_key: &key,
            group: &config.group,
            consumer,
            id,
        },
    );
    let call = Call {
        function: &function,
        key,
        partition: config.partition_of_stream(stream),
        job: id,
        entry: Some((id, consumer)),
    };
    let (renewed, owner): (u8, String) =
        cmd.query_async(conn).await.map_err(|err| call.error(err))?;
    match renewed {
        1 => Ok(Renewal::Renewed),
        0 => Ok(Renewal::NotOwner {
            owner: Some(owner).filter(|owner| !owner.is_empty()),
        }),
        _ => Err(call.unexpected(format!("[{renewed}, {owner:?}]"))),
    }
}

/// The consumer `stream`'s entry `id` is pending for (`XPENDING key group
/// id id 1`), or `None` when it is not pending: the read behind
/// `JobContext::still_owner`.
pub(crate) async fn pending_owner<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    id: &str,
) -> Result<Option<String>> {
    let key = config.ready_key(stream);
    let reply: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(&key)
        .arg(&*config.group)
        .arg(id)
        .arg(id)
        .arg(1)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("XPENDING {key} {} {id}", config.group), err))?;
    Ok(reply.ids.into_iter().next().map(|entry| entry.consumer))
}

fn marker_ttl_ms(config: &QueueConfig) -> u64 {
    // A zero TTL would make SET ... PX fail; markers live at least a second.
    u64::try_from(config.retention.marker_ttl.as_millis())
        .unwrap_or(u64::MAX)
        .max(1000)
}

/// `1,2`: the `accepted_schemas` argument.
fn schema_list(versions: &[u32]) -> String {
    versions
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "metrics")]
    fn dead_reasons_are_listed_in_index_order() {
        for (i, reason) in DeadReason::ALL.into_iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason}");
        }
    }

    #[test]
    fn schema_lists_are_comma_separated() {
        assert_eq!(schema_list(&[1, 2]), "1,2");
        assert_eq!(schema_list(&[3]), "3");
    }
}
