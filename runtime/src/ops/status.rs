//! A queue's health per partition, read in two round trips: the one model that
//! `queuegen status` prints, `queuegen monitor` exports as gauges, and a
//! dashboard shows.
//!
//! Read-only. A least-privilege monitor user needs only `TIME`, `XINFO`,
//! `XLEN`, `XRANGE`, `XREVRANGE`, `XPENDING`, `ZCARD`, `ZRANGE` and
//! `FCALL_RO` (the library's `version` function is its one read-only
//! function), on the queue's keys: e.g. the ACL rule
//! `+time +xinfo +xlen +xrange +xrevrange +xpending +zcard +zrange +fcall_ro ~work:*`.
//!
//! Cost per refresh, whatever the partition count: one pipeline with
//! everything that needs no earlier answer (per partition: the stream
//! inventory's reads, `XINFO CONSUMERS` of the queue's group, `ZCARD` and
//! `ZRANGE 0 0 WITHSCORES` of the retry set and of the delayed set, `XLEN` and `XREVRANGE + - COUNT 1`
//! of the dead-letter stream; once: `TIME` and `FCALL_RO <library>_version`),
//! then one with what does (per group: its lowest pending entry and its first
//! entry after its last-delivered ID).

use std::borrow::Cow;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;

use super::pause::{self, PauseNote};
use crate::config::QueueConfig;
use crate::connect::Redis;
use crate::error::{Error, Result, SetupError};
use crate::functions::{self, Function, Version};
use crate::inventory::{self, first_id, integer, text, GroupInventory, StreamInventory};
use crate::stream_id::StreamId;
use crate::stream_slot::{Partition, StreamSlot};

/// The spec's `alerts` of one queue (`QueueConfig` does not carry them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertThresholds {
    /// Fires when a group's oldest pending entry is older than this.
    pub oldest_pending_age: Option<Duration>,
    /// Fires when a group's oldest undelivered entry is older than this.
    pub oldest_ready_age: Option<Duration>,
    /// Fires when a partition holds at least this many dead letters.
    pub dead_letters: Option<u64>,
}

/// One queue to report on, with the alerts its spec sets.
#[derive(Debug, Clone)]
pub struct WatchedQueue {
    pub config: QueueConfig,
    pub alerts: AlertThresholds,
}

/// Everything [`status`] read, at one moment of the server's clock.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// The server's `TIME` in Unix ms; every age is measured against it, the
    /// clock that stamped the stream IDs.
    pub server_time_ms: u64,
    /// The Function library of each service among the queues.
    pub libraries: Vec<LibraryStatus>,
    pub queues: Vec<QueueStatus>,
}

/// Whether the Function library version a queue was generated with is loaded.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryStatus {
    /// e.g. `qg_docs_pipeline_v1` (`QueueConfig::functions`).
    pub name: String,
    /// `Some(true)`: `FCALL_RO <name>_version 0` answered the library's name;
    /// `Some(false)`: no such function (run `queuegen apply`); `None`: the
    /// server refused to say (e.g. `NOPERM` for a user without `FCALL_RO`).
    pub loaded: Option<bool>,
    /// Why it is not known to be loaded.
    pub problem: Option<String>,
    /// The primary asked, on a Cluster (each primary holds its own copy of
    /// the library); `None` on a standalone server.
    pub server: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueStatus {
    pub queue: String,
    /// The queue's consumer group (`group.name` of the spec).
    pub group: String,
    pub partitions: Vec<PartitionStatus>,
    /// The partitions whose intake is paused (`queuegen pause`), ascending.
    pub paused_partitions: Vec<Partition>,
    /// Every alert of the spec that would fire now, by partition.
    pub alerts: Vec<FiringAlert>,
}

/// One stream of a queue: a partition, or one lane of a partition for a
/// queue with lanes (then each partition has a row per lane).
#[derive(Debug, Clone, Serialize)]
pub struct PartitionStatus {
    pub partition: Partition,
    /// The lane (`lanes:`); `None` for a queue without lanes.
    pub lane: Option<Cow<'static, str>>,
    pub ready_key: String,
    /// `XLEN` of the ready stream: every entry still stored, acknowledged ones
    /// included, until the trimmer removes them. History, not depth: the
    /// backlog is `undelivered` plus `pending` of a group.
    pub history: u64,
    /// Every consumer group of the ready stream, the queue's own and any
    /// other (each holds back trimming and counts for the alerts).
    pub groups: Vec<GroupStatus>,
    /// The consumers of the queue's group (`XINFO CONSUMERS`).
    pub consumers: Vec<ConsumerStatus>,
    /// Consumers the partition's leader has removed from the queue's group
    /// so far, idle past `group.prune_consumers_after` with nothing pending.
    pub consumers_pruned: u64,
    pub retries: RetryStatus,
    /// The delayed set: jobs published with `publish_at`/`publish_after`,
    /// not yet due (or due and not yet promoted).
    pub delayed: RetryStatus,
    pub dead_letters: DeadLetterStatus,
    /// Set while the partition's intake is paused (`queuegen pause`): who
    /// paused it, when and why. Workers read no new entries of it; recovery
    /// and producers carry on.
    pub paused: Option<PauseNote>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupStatus {
    pub name: String,
    /// Whether this is the queue's group (`group.name` of the spec).
    pub queue_group: bool,
    pub consumers: u64,
    /// The last entry delivered to the group; later entries are undelivered.
    pub last_delivered: StreamId,
    /// Redis's count of entries the group has read; `None` when unknown.
    pub entries_read: Option<u64>,
    /// Entries not yet delivered to the group: the lag when Redis knows it;
    /// 0 when it does not but no entry follows the group's position; `None`
    /// when it does not and at least one does (see `oldest_undelivered`).
    pub undelivered: Option<u64>,
    /// `lag` as `XINFO GROUPS` reports it; `None` is Redis's nil.
    pub lag: Option<u64>,
    /// Why Redis reports no lag (set exactly when `lag` is `None`).
    pub lag_unavailable: Option<String>,
    /// The group's first entry after its last-delivered ID.
    pub oldest_undelivered: Option<EntryAge>,
    /// Entries delivered to the group and not yet acknowledged.
    pub pending: u64,
    /// The group's lowest pending entry, who holds it and for how long.
    pub oldest_pending: Option<PendingStatus>,
}

/// A stream entry and how old its ID is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EntryAge {
    pub id: StreamId,
    /// Server time minus the ID's time (0 for an ID from the future).
    pub age_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingStatus {
    pub id: StreamId,
    /// Since the entry was added (its ID), not since it was delivered.
    pub age_ms: u64,
    /// The consumer that holds it.
    pub owner: String,
    /// Since it was last delivered to (or claimed by) its owner.
    pub idle_ms: u64,
    /// Times it was delivered (the pending list's count).
    pub deliveries: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerStatus {
    pub name: String,
    /// Entries it holds pending.
    pub pending: u64,
    /// Since its last read or claim attempt.
    pub idle_ms: u64,
    /// Since its last successful read or claim; Redis 7.2+ only.
    pub inactive_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryStatus {
    pub key: String,
    /// Retries waiting in the schedule (`ZCARD`).
    pub scheduled: u64,
    /// When the earliest is due, Unix ms.
    pub next_due_ms: Option<u64>,
    /// `next_due_ms` minus server time: negative when overdue (the scheduler
    /// moves it at its next pass).
    pub next_due_in_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetterStatus {
    pub key: String,
    /// `XLEN` of the dead-letter stream.
    pub count: u64,
    /// The newest dead letter (its ID is when it arrived).
    pub newest: Option<EntryAge>,
}

/// An alert of the spec that would fire now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FiringAlert {
    pub alert: AlertKind,
    pub partition: Partition,
    /// The lane, for a queue with lanes.
    pub lane: Option<Cow<'static, str>>,
    /// The group it is about; `None` for `dead_letters`.
    pub group: Option<String>,
    /// What was read: milliseconds for ages, entries for `dead_letters`.
    pub observed: u64,
    /// The spec's threshold, in the same unit.
    pub threshold: u64,
    pub message: String,
}

/// The alerts of the spec (`alerts.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// `alerts.oldest_pending_age`: age > threshold.
    OldestPendingAge,
    /// `alerts.oldest_ready_age`: age > threshold.
    OldestReadyAge,
    /// `alerts.dead_letters`: count ≥ threshold.
    DeadLetters,
}

impl AlertKind {
    /// The spec key's name, e.g. `oldest_pending_age`.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::OldestPendingAge => "oldest_pending_age",
            AlertKind::OldestReadyAge => "oldest_ready_age",
            AlertKind::DeadLetters => "dead_letters",
        }
    }
}

impl PartitionStatus {
    /// `partition 3`, or `partition 3 lane high` for a queue with lanes.
    pub fn place(&self) -> String {
        match &self.lane {
            Some(lane) => format!("partition {} lane {lane}", self.partition),
            None => format!("partition {}", self.partition),
        }
    }

    /// The queue's own group on this partition.
    pub fn queue_group(&self) -> Option<&GroupStatus> {
        self.groups.iter().find(|group| group.queue_group)
    }

    pub fn group(&self, name: &str) -> Option<&GroupStatus> {
        self.groups.iter().find(|group| group.name == name)
    }
}

/// [`status`] through `redis`'s shared connection; on a Cluster the
/// libraries are then checked on every primary, one [`LibraryStatus`] each
/// (the keyless check inside `status` reaches a single node).
pub async fn status_of(redis: &Redis, queues: &[WatchedQueue]) -> Result<StatusReport> {
    let mut report = status(&mut redis.shared(), queues).await?;
    if redis.is_cluster() {
        let names: Vec<String> = report.libraries.iter().map(|l| l.name.clone()).collect();
        let mut libraries = Vec::new();
        for node in redis.primaries().await? {
            let mut conn = node.connection().await?;
            for name in &names {
                let answer: RedisResult<Value> =
                    functions::command(&Function::Version.in_library(name), &Version)
                        .query_async(&mut conn)
                        .await;
                let mut library = library_status(name, Some(answer))?;
                library.server = Some(node.addr());
                libraries.push(library);
            }
        }
        report.libraries = libraries;
    }
    Ok(report)
}

/// Reads the status of every partition of `queues` in two round trips.
///
/// Errors name the key: a ready stream that does not exist
/// ([`SetupError::MissingStream`]: run `queuegen apply`), a ready stream without
/// the queue's group ([`SetupError::NoGroup`]), a key of the wrong type (the
/// command and Redis's `WRONGTYPE`). A missing retry set or dead-letter
/// stream is simply empty: both are created on first use.
pub async fn status<C: ConnectionLike>(
    conn: &mut C,
    queues: &[WatchedQueue],
) -> Result<StatusReport> {
    let mut libraries: Vec<&str> = Vec::new();
    for queue in queues {
        if !libraries.contains(&&*queue.config.functions) {
            libraries.push(&queue.config.functions);
        }
    }

    let mut first = redis::pipe();
    first.cmd("TIME");
    for library in &libraries {
        functions::pipe_command(&mut first, &Function::Version.in_library(library), &Version);
    }
    for queue in queues {
        let config = &queue.config;
        for stream in StreamSlot::all(config.streams()) {
            let ready = config.ready_key(stream);
            let retry = config.retry_key(stream);
            let dead = config.dead_key(stream);
            inventory::queue_stream_reads(&mut first, &ready);
            first
                .cmd("XINFO")
                .arg("CONSUMERS")
                .arg(&ready)
                .arg(&*config.group);
            for set in [&retry, &config.delayed_key(stream)] {
                first.cmd("ZCARD").arg(set);
                first.cmd("ZRANGE").arg(set).arg(0).arg(0).arg("WITHSCORES");
            }
            first.cmd("XLEN").arg(&dead);
            first
                .cmd("XREVRANGE")
                .arg(&dead)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1);
            // Each lane reads its partition's one flag.
            let partition = config.partition_of_stream(stream);
            first.cmd("GET").arg(config.paused_key(partition));
            first.cmd("GET").arg(config.pruned_key(stream));
        }
    }
    let answers: Vec<RedisResult<Value>> = first
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(describe_read(queues), err))?;
    let mut answers = answers.into_iter();

    let server_time_ms = server_time(answers.next())?;
    let libraries = libraries
        .iter()
        .map(|library| library_status(library, answers.next()))
        .collect::<Result<Vec<_>>>()?;

    // What the second pipeline needs, per stream (lane and partition) in order.
    let mut streams: Vec<Option<StreamInventory>> = Vec::new();
    let mut partial: Vec<Partial> = Vec::new();
    for queue in queues {
        let config = &queue.config;
        for slot in StreamSlot::all(config.streams()) {
            let ready = config.ready_key(slot);
            let stream = inventory::read_stream(&ready, &mut answers)?
                .ok_or_else(|| Error::Setup(SetupError::MissingStream { key: ready.clone() }))?;
            let consumers = consumers(&ready, &config.group, answers.next())?;
            let retries = scheduled_set(config.retry_key(slot), server_time_ms, &mut answers)?;
            let delayed = scheduled_set(config.delayed_key(slot), server_time_ms, &mut answers)?;
            let dead_letters = dead_letters(config.dead_key(slot), server_time_ms, &mut answers)?;
            let paused_key = config.paused_key(config.partition_of_stream(slot));
            let paused = pause::note_of(&paused_key, answers.next())?;
            let consumers_pruned = counter(&config.pruned_key(slot), answers.next())?;
            streams.push(Some(stream));
            partial.push(Partial {
                stream: slot,
                consumers,
                retries,
                delayed,
                dead_letters,
                paused,
                consumers_pruned,
            });
        }
    }

    let mut second = redis::pipe();
    if inventory::queue_boundary_reads(&mut second, &streams) > 0 {
        let answers: Vec<RedisResult<Value>> = second
            .ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!("XPENDING/XRANGE of the groups of {}", describe_read(queues)),
                    err,
                )
            })?;
        inventory::read_boundaries(&mut streams, &mut answers.into_iter())?;
    }

    let mut streams = streams.into_iter().flatten();
    let mut partial = partial.into_iter();
    let mut report = StatusReport {
        server_time_ms,
        libraries,
        queues: Vec::with_capacity(queues.len()),
    };
    for queue in queues {
        let config = &queue.config;
        let mut partitions = Vec::with_capacity(usize::from(config.streams()));
        for _ in 0..config.streams() {
            let (Some(stream), Some(rest)) = (streams.next(), partial.next()) else {
                unreachable!("one inventory and one partial status per stream");
            };
            partitions.push(PartitionStatus {
                partition: config.partition_of_stream(rest.stream),
                lane: config
                    .lane_of_stream(rest.stream)
                    .map(|lane| lane.name.clone()),
                history: stream.length,
                groups: stream
                    .groups
                    .iter()
                    .map(|group| group_status(group, &config.group, server_time_ms))
                    .collect(),
                ready_key: stream.key,
                consumers: rest.consumers,
                consumers_pruned: rest.consumers_pruned,
                retries: rest.retries,
                delayed: rest.delayed,
                dead_letters: rest.dead_letters,
                paused: rest.paused,
            });
        }
        let alerts = partitions
            .iter()
            .flat_map(|partition| firing(&config.queue, partition, &queue.alerts))
            .collect();
        // One flag per partition, shared by its lanes: listed once.
        let mut paused_partitions: Vec<Partition> = partitions
            .iter()
            .filter(|p| p.paused.is_some())
            .map(|p| p.partition)
            .collect();
        paused_partitions.sort_unstable();
        paused_partitions.dedup();
        report.queues.push(QueueStatus {
            queue: config.queue.to_string(),
            group: config.group.to_string(),
            partitions,
            paused_partitions,
            alerts,
        });
    }
    Ok(report)
}

/// A stream's reads that need no second round trip.
struct Partial {
    stream: StreamSlot,
    consumers: Vec<ConsumerStatus>,
    retries: RetryStatus,
    delayed: RetryStatus,
    dead_letters: DeadLetterStatus,
    paused: Option<PauseNote>,
    consumers_pruned: u64,
}

/// A counter's value (`GET`; 0 when the key does not exist).
fn counter(key: &str, answer: Option<RedisResult<Value>>) -> Result<u64> {
    let answer = answer.ok_or_else(|| inventory::short_reply("GET"))?;
    match answer {
        Ok(Value::Nil) => Ok(0),
        Ok(value) => <u64 as redis::FromRedisValue>::from_redis_value(value.clone())
            .map_err(|_| inventory::unexpected(key, "GET", &value)),
        Err(err) => Err(Error::redis(format!("GET {key}"), err)),
    }
}

fn describe_read(queues: &[WatchedQueue]) -> String {
    let names: Vec<&str> = queues.iter().map(|q| &*q.config.queue).collect();
    format!("reading the status of queue(s) {}", names.join(", "))
}

fn group_status(group: &GroupInventory, queue_group: &str, now_ms: u64) -> GroupStatus {
    let oldest_undelivered = group.first_undelivered.map(|id| EntryAge {
        id,
        age_ms: age_ms(id, now_ms),
    });
    GroupStatus {
        name: group.name.clone(),
        queue_group: group.name == queue_group,
        consumers: group.consumers,
        last_delivered: group.last_delivered,
        entries_read: group.entries_read,
        undelivered: group
            .lag
            .or_else(|| group.first_undelivered.is_none().then_some(0)),
        lag: group.lag,
        lag_unavailable: group.lag.is_none().then(|| lag_unavailable(group)),
        oldest_undelivered,
        pending: group.pending,
        oldest_pending: group.lowest_pending.as_ref().map(|head| PendingStatus {
            id: head.id,
            age_ms: age_ms(head.id, now_ms),
            owner: head.consumer.clone(),
            idle_ms: head.idle_ms,
            deliveries: head.deliveries,
        }),
    }
}

/// Why `XINFO GROUPS` answered a nil lag. Redis 7 counts the lag from the
/// group's entries-read counter, which it stops trusting when an entry after
/// the group's position was deleted, and cannot rebuild when the counter is
/// unknown and the stream has deletions.
fn lag_unavailable(group: &GroupInventory) -> String {
    let still = "the oldest undelivered entry's age still holds";
    match group.entries_read {
        Some(_) => format!(
            "an entry after the group's position ({}) was deleted (XDEL): Redis cannot count the entries left; {still}",
            group.last_delivered
        ),
        None => format!(
            "the group's read counter is unknown (created at an explicit ID or moved with XGROUP SETID) and Redis cannot estimate it (the stream has deleted entries, or the group is past its last entry); {still}"
        ),
    }
}

/// The alerts of `thresholds` that `partition` fires now.
pub(crate) fn firing(
    queue: &str,
    partition: &PartitionStatus,
    thresholds: &AlertThresholds,
) -> Vec<FiringAlert> {
    let mut alerts = Vec::new();
    let ms = |limit: Duration| u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    // Whole seconds: an alert's message is read, not computed with.
    let human = |ms: u64| humantime::format_duration(Duration::from_secs(ms / 1_000)).to_string();
    for group in &partition.groups {
        if let (Some(limit), Some(pending)) = (thresholds.oldest_pending_age, &group.oldest_pending)
        {
            if pending.age_ms > ms(limit) {
                alerts.push(FiringAlert {
                    alert: AlertKind::OldestPendingAge,
                    partition: partition.partition,
                    lane: partition.lane.clone(),
                    group: Some(group.name.clone()),
                    observed: pending.age_ms,
                    threshold: ms(limit),
                    message: format!(
                        "queue {queue} {} group {}: entry {} held by {} is {} old, above alerts.oldest_pending_age = {}",
                        partition.place(),
                        group.name,
                        pending.id,
                        pending.owner,
                        human(pending.age_ms),
                        human(ms(limit))
                    ),
                });
            }
        }
        if let (Some(limit), Some(ready)) = (thresholds.oldest_ready_age, group.oldest_undelivered)
        {
            if ready.age_ms > ms(limit) {
                alerts.push(FiringAlert {
                    alert: AlertKind::OldestReadyAge,
                    partition: partition.partition,
                    lane: partition.lane.clone(),
                    group: Some(group.name.clone()),
                    observed: ready.age_ms,
                    threshold: ms(limit),
                    message: format!(
                        "queue {queue} {} group {}: undelivered entry {} is {} old, above alerts.oldest_ready_age = {}",
                        partition.place(),
                        group.name,
                        ready.id,
                        human(ready.age_ms),
                        human(ms(limit))
                    ),
                });
            }
        }
    }
    if let Some(limit) = thresholds.dead_letters {
        let count = partition.dead_letters.count;
        if count >= limit {
            alerts.push(FiringAlert {
                alert: AlertKind::DeadLetters,
                partition: partition.partition,
                lane: partition.lane.clone(),
                group: None,
                observed: count,
                threshold: limit,
                message: format!(
                    "queue {queue} {}: {count} dead letter(s) in {}, at or above alerts.dead_letters = {limit}",
                    partition.place(), partition.dead_letters.key
                ),
            });
        }
    }
    alerts
}

fn age_ms(id: StreamId, now_ms: u64) -> u64 {
    u64::try_from(id.age(now_ms).as_millis()).unwrap_or(u64::MAX)
}

/// `TIME` answers `[seconds, microseconds]`.
pub(crate) fn server_time(answer: Option<RedisResult<Value>>) -> Result<u64> {
    let answer = answer
        .ok_or_else(|| inventory::short_reply("TIME"))?
        .map_err(|err| Error::redis("TIME", err))?;
    let parts = match answer {
        Value::Array(parts) if parts.len() == 2 => parts,
        other => return Err(inventory::unexpected("TIME", "TIME", &other)),
    };
    let mut parts = parts.into_iter().map(integer);
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(seconds), Some(micros)) => Ok(seconds * 1_000 + micros / 1_000),
        _ => Err(inventory::malformed("TIME", "TIME")),
    }
}

fn library_status(library: &str, answer: Option<RedisResult<Value>>) -> Result<LibraryStatus> {
    let function = Function::Version.in_library(library);
    let answer = answer.ok_or_else(|| inventory::short_reply(&function))?;
    let (loaded, problem) = match answer {
        Ok(value) => match text(value) {
            Some(name) if name == library => (Some(true), None),
            other => (
                Some(false),
                Some(format!("{function} answered {other:?}, not {library:?}")),
            ),
        },
        Err(err) if functions::is_function_not_found(&err) => (
            Some(false),
            Some(format!(
                "no function {function}: run `queuegen apply` to load the library"
            )),
        ),
        Err(err) => (None, Some(format!("FCALL_RO {function} 0: {err}"))),
    };
    Ok(LibraryStatus {
        name: library.to_owned(),
        loaded,
        problem,
        server: None,
    })
}

/// `XINFO CONSUMERS key group`: per consumer a map (RESP3) or flat pairs (RESP2).
fn consumers(
    key: &str,
    group: &str,
    answer: Option<RedisResult<Value>>,
) -> Result<Vec<ConsumerStatus>> {
    let answer = answer.ok_or_else(|| inventory::short_reply(key))?;
    let reply = match answer {
        Ok(reply) => reply,
        Err(err) if err.code() == Some("NOGROUP") => {
            return Err(Error::Setup(SetupError::NoGroup {
                key: key.to_owned(),
                group: group.to_owned(),
            }))
        }
        Err(err) => return Err(Error::redis(format!("XINFO CONSUMERS {key} {group}"), err)),
    };
    let Value::Array(rows) = reply else {
        return Err(inventory::unexpected(key, "XINFO CONSUMERS", &reply));
    };
    rows.into_iter()
        .map(|row| {
            let pairs: Vec<(Value, Value)> = match row {
                Value::Map(pairs) => pairs,
                Value::Array(flat) => {
                    let mut flat = flat.into_iter();
                    std::iter::from_fn(|| Some((flat.next()?, flat.next()?))).collect()
                }
                other => return Err(inventory::unexpected(key, "XINFO CONSUMERS", &other)),
            };
            let mut consumer = ConsumerStatus {
                name: String::new(),
                pending: 0,
                idle_ms: 0,
                inactive_ms: None,
            };
            for (field, value) in pairs {
                match text(field).as_deref() {
                    Some("name") => consumer.name = text(value).unwrap_or_default(),
                    Some("pending") => consumer.pending = integer(value).unwrap_or(0),
                    Some("idle") => consumer.idle_ms = integer(value).unwrap_or(0),
                    // -1 (never active) reads as unknown.
                    Some("inactive") => consumer.inactive_ms = integer(value),
                    _ => {}
                }
            }
            Ok(consumer)
        })
        .collect()
}

/// `ZCARD` and `ZRANGE 0 0 WITHSCORES` of a partition's retry set (or delayed set).
fn scheduled_set(
    key: String,
    now_ms: u64,
    answers: &mut impl Iterator<Item = RedisResult<Value>>,
) -> Result<RetryStatus> {
    let (Some(count), Some(next)) = (answers.next(), answers.next()) else {
        return Err(inventory::short_reply(&key));
    };
    let scheduled = count
        .map_err(|err| Error::redis(format!("ZCARD {key}"), err))
        .and_then(|value| integer(value).ok_or_else(|| inventory::malformed(&key, "ZCARD")))?;
    let next = next.map_err(|err| Error::redis(format!("ZRANGE {key} 0 0 WITHSCORES"), err))?;
    let next_due_ms = match next {
        // RESP2: [member, score]; RESP3: [[member, score]].
        Value::Array(items) => match items.into_iter().last() {
            None => None,
            Some(Value::Array(pair)) => pair.into_iter().nth(1).and_then(score_ms),
            Some(score) => score_ms(score),
        },
        other => return Err(inventory::unexpected(&key, "ZRANGE", &other)),
    };
    Ok(RetryStatus {
        next_due_in_ms: next_due_ms.map(|due| {
            let due = i64::try_from(due).unwrap_or(i64::MAX);
            due.saturating_sub(i64::try_from(now_ms).unwrap_or(i64::MAX))
        }),
        next_due_ms,
        scheduled,
        key,
    })
}

/// A zset score (due time in Unix ms) sent as text or as a double.
fn score_ms(value: Value) -> Option<u64> {
    let score = match value {
        Value::Double(score) => score,
        other => text(other)?.parse::<f64>().ok()?,
    };
    (score.is_finite() && score >= 0.0).then_some(score as u64)
}

/// `XLEN` and `XREVRANGE + - COUNT 1` of a partition's dead-letter stream.
fn dead_letters(
    key: String,
    now_ms: u64,
    answers: &mut impl Iterator<Item = RedisResult<Value>>,
) -> Result<DeadLetterStatus> {
    let (Some(count), Some(newest)) = (answers.next(), answers.next()) else {
        return Err(inventory::short_reply(&key));
    };
    let count = count
        .map_err(|err| Error::redis(format!("XLEN {key}"), err))
        .and_then(|value| integer(value).ok_or_else(|| inventory::malformed(&key, "XLEN")))?;
    let newest = newest
        .map_err(|err| Error::redis(format!("XREVRANGE {key} + - COUNT 1"), err))
        .and_then(|value| first_id(&key, value))?;
    Ok(DeadLetterStatus {
        count,
        newest: newest.map(|id| EntryAge {
            id,
            age_ms: age_ms(id, now_ms),
        }),
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(
        lag: Option<u64>,
        entries_read: Option<u64>,
        next: Option<StreamId>,
    ) -> GroupInventory {
        GroupInventory {
            name: "workers".into(),
            consumers: 1,
            pending: 0,
            last_delivered: StreamId::new(5, 0),
            entries_read,
            lag,
            lowest_pending: None,
            first_undelivered: next,
        }
    }

    #[test]
    fn undelivered_is_the_lag_or_zero_when_nothing_follows_the_position() {
        let known = group_status(
            &group(Some(3), Some(2), Some(StreamId::new(6, 0))),
            "workers",
            10,
        );
        assert_eq!((known.undelivered, known.lag_unavailable), (Some(3), None));
        let nothing_after = group_status(&group(None, Some(2), None), "workers", 10);
        assert_eq!(nothing_after.undelivered, Some(0));
        assert!(nothing_after.lag_unavailable.unwrap().contains("XDEL"));
        let unknown = group_status(&group(None, None, Some(StreamId::new(6, 0))), "other", 10);
        assert_eq!(unknown.undelivered, None);
        assert!(!unknown.queue_group);
        assert!(unknown.lag_unavailable.unwrap().contains("SETID"));
        assert_eq!(unknown.oldest_undelivered.unwrap().age_ms, 4);
    }

    #[test]
    fn alerts_fire_above_the_ages_and_at_the_dead_letter_count() {
        let mut status = group_status(
            &group(Some(1), Some(1), Some(StreamId::new(1_000, 0))),
            "workers",
            3_000,
        );
        status.oldest_pending = Some(PendingStatus {
            id: StreamId::new(500, 0),
            age_ms: 2_500,
            owner: "w1".into(),
            idle_ms: 100,
            deliveries: 1,
        });
        let partition = PartitionStatus {
            partition: Partition::new(2),
            lane: None,
            ready_key: "k".into(),
            history: 3,
            groups: vec![status],
            consumers: vec![],
            consumers_pruned: 0,
            retries: RetryStatus {
                key: "r".into(),
                scheduled: 0,
                next_due_ms: None,
                next_due_in_ms: None,
            },
            delayed: RetryStatus {
                key: "s".into(),
                scheduled: 0,
                next_due_ms: None,
                next_due_in_ms: None,
            },
            dead_letters: DeadLetterStatus {
                key: "d".into(),
                count: 2,
                newest: None,
            },
            paused: None,
        };
        let at = |pending_ms, ready_ms, dead| AlertThresholds {
            oldest_pending_age: Some(Duration::from_millis(pending_ms)),
            oldest_ready_age: Some(Duration::from_millis(ready_ms)),
            dead_letters: Some(dead),
        };
        let fired = |thresholds| -> Vec<AlertKind> {
            firing("q", &partition, &thresholds)
                .into_iter()
                .map(|alert| alert.alert)
                .collect()
        };
        // Ages: pending 2500 ms, ready 2000 ms; 2 dead letters.
        assert_eq!(
            fired(at(2_499, 1_999, 2)),
            [
                AlertKind::OldestPendingAge,
                AlertKind::OldestReadyAge,
                AlertKind::DeadLetters
            ]
        );
        assert!(
            fired(at(2_500, 2_000, 3)).is_empty(),
            "ages must exceed, counts reach"
        );
        assert!(fired(AlertThresholds::default()).is_empty());
    }
}
