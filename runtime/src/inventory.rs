//! Who still needs which entry of a stream: every group's position, lowest
//! pending entry and first undelivered entry, read in two pipelines for any
//! number of streams.
//!
//! The trimmer's cutoff, the status view and producer admission all start
//! here. Cost: two round trips, and per stream `XINFO GROUPS`, `XLEN`,
//! `XRANGE - + COUNT 1`, then per group `XPENDING - + 1` and
//! `XRANGE (last-delivered + COUNT 1`: bounded by the number of groups,
//! never by the stream's length.

use redis::aio::ConnectionLike;
use redis::streams::StreamInfoGroupsReply;
use redis::Value;

use crate::error::{Error, InventoryProblem, OperationError, Result};
use crate::stream_id::StreamId;

/// One stream and every consumer group reading it, at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamInventory {
    pub key: String,
    /// `XLEN`: every entry still stored, acknowledged or not (history, not depth).
    pub length: u64,
    /// The oldest entry still stored.
    pub first_entry: Option<StreamId>,
    pub groups: Vec<GroupInventory>,
}

/// One consumer group's boundaries on a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupInventory {
    pub name: String,
    pub consumers: u64,
    /// Entries delivered to the group and not yet acknowledged.
    pub pending: u64,
    /// The last entry delivered to the group; every later entry is undelivered.
    pub last_delivered: StreamId,
    pub entries_read: Option<u64>,
    /// Entries not yet delivered, as Redis counts them. `None` when Redis
    /// cannot tell (an entry was deleted after the group's position, or the
    /// group was moved with `SETID`): use `first_undelivered`'s age instead.
    pub lag: Option<u64>,
    /// The lowest pending entry (its payload must survive every trim).
    pub lowest_pending: Option<PendingHead>,
    /// The first entry after `last_delivered`, if any (it must survive too).
    pub first_undelivered: Option<StreamId>,
}

/// The lowest entry of a group's pending list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingHead {
    pub id: StreamId,
    pub consumer: String,
    pub idle_ms: u64,
    pub deliveries: u64,
}

impl StreamInventory {
    /// The group whose first undelivered entry is the oldest, and that entry:
    /// what admission and the oldest-ready-age alert look at.
    pub(crate) fn oldest_undelivered(&self) -> Option<(&GroupInventory, StreamId)> {
        self.groups
            .iter()
            .filter_map(|group| group.first_undelivered.map(|id| (group, id)))
            .min_by_key(|(_, id)| *id)
    }
}

/// Inventories every stream of `keys`, in order; `None` for a key that does
/// not exist. A key of another type, or a refused command, is an error
/// naming the key and the command.
pub(crate) async fn inventory<C: ConnectionLike>(
    conn: &mut C,
    keys: &[String],
) -> Result<Vec<Option<StreamInventory>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut first = redis::pipe();
    for key in keys {
        queue_stream_reads(&mut first, key);
    }
    let answers: Vec<redis::RedisResult<Value>> = first
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("XINFO GROUPS {}", keys.join(" ")), err))?;
    let mut answers = answers.into_iter();
    let mut streams: Vec<Option<StreamInventory>> = Vec::with_capacity(keys.len());
    for key in keys {
        streams.push(read_stream(key, &mut answers)?);
    }
    let mut second = redis::pipe();
    if queue_boundary_reads(&mut second, &streams) == 0 {
        return Ok(streams);
    }
    let answers: Vec<redis::RedisResult<Value>> = second
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis("XPENDING/XRANGE of the groups' boundaries", err))?;
    read_boundaries(&mut streams, &mut answers.into_iter())?;
    Ok(streams)
}

/// Adds the first pipeline's reads of one stream to `pipe`: `XINFO GROUPS`,
/// `XLEN`, `XRANGE - + COUNT 1`. [`read_stream`] takes their answers back,
/// so a caller (the status view) can send them with reads of its own.
pub(crate) fn queue_stream_reads(pipe: &mut redis::Pipeline, key: &str) {
    pipe.cmd("XINFO").arg("GROUPS").arg(key);
    pipe.cmd("XLEN").arg(key);
    pipe.cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1);
}

/// Reads the answers of [`queue_stream_reads`] for `key` (from a pipeline
/// sent with `ignore_errors`); `None` when the stream does not exist. The
/// groups' boundaries are left empty for [`read_boundaries`].
pub(crate) fn read_stream(
    key: &str,
    answers: &mut impl Iterator<Item = redis::RedisResult<Value>>,
) -> Result<Option<StreamInventory>> {
    let (Some(groups), Some(length), Some(head)) = (answers.next(), answers.next(), answers.next())
    else {
        return Err(short_reply(key));
    };
    let groups = match groups {
        Err(err) if is_no_such_key(&err) => return Ok(None),
        other => other.map_err(|err| Error::redis(format!("XINFO GROUPS {key}"), err))?,
    };
    let groups: StreamInfoGroupsReply = redis::from_redis_value(groups)
        .map_err(|err| Error::redis(format!("reading XINFO GROUPS {key}"), err.into()))?;
    let length: u64 = length
        .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
        .map_err(|err| Error::redis(format!("XLEN {key}"), err))?;
    let head = head
        .map_err(|err| Error::redis(format!("XRANGE {key} - + COUNT 1"), err))
        .and_then(|v| first_id(key, v))?;
    let groups = groups
        .groups
        .into_iter()
        .map(|group| {
            Ok(GroupInventory {
                last_delivered: parse_id(key, &group.last_delivered_id)?,
                name: group.name,
                consumers: group.consumers as u64,
                pending: group.pending as u64,
                entries_read: group.entries_read.map(|n| n as u64),
                lag: group.lag.map(|n| n as u64),
                lowest_pending: None,
                first_undelivered: None,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(StreamInventory {
        key: key.to_owned(),
        length,
        first_entry: head,
        groups,
    }))
}

/// Adds the second pipeline's reads to `pipe`: per group of every stream,
/// its lowest pending entry and its first undelivered entry. Returns how
/// many commands it added (none when no stream has a group).
pub(crate) fn queue_boundary_reads(
    pipe: &mut redis::Pipeline,
    streams: &[Option<StreamInventory>],
) -> usize {
    let mut asked = 0;
    for stream in streams.iter().flatten() {
        for group in &stream.groups {
            pipe.cmd("XPENDING")
                .arg(&stream.key)
                .arg(&group.name)
                .arg("-")
                .arg("+")
                .arg(1);
            pipe.cmd("XRANGE")
                .arg(&stream.key)
                .arg(format!("({}", group.last_delivered))
                .arg("+")
                .arg("COUNT")
                .arg(1);
            asked += 2;
        }
    }
    asked
}

/// Reads the answers of [`queue_boundary_reads`] into the groups of `streams`.
pub(crate) fn read_boundaries(
    streams: &mut [Option<StreamInventory>],
    answers: &mut impl Iterator<Item = redis::RedisResult<Value>>,
) -> Result<()> {
    for stream in streams.iter_mut().flatten() {
        let key = stream.key.clone();
        for group in &mut stream.groups {
            let (Some(pending), Some(next)) = (answers.next(), answers.next()) else {
                return Err(short_reply(&key));
            };
            let pending = pending
                .map_err(|err| Error::redis(format!("XPENDING {key} {} - + 1", group.name), err))?;
            group.lowest_pending = pending_head(&key, pending)?;
            let next = next.map_err(|err| {
                Error::redis(
                    format!("XRANGE {key} ({} + COUNT 1", group.last_delivered),
                    err,
                )
            })?;
            group.first_undelivered = first_id(&key, next)?;
        }
    }
    Ok(())
}

/// The ID of the first entry of an `XRANGE` reply, if any.
pub(crate) fn first_id(key: &str, reply: Value) -> Result<Option<StreamId>> {
    let Value::Array(entries) = reply else {
        return Err(unexpected(key, "XRANGE", &reply));
    };
    let Some(entry) = entries.into_iter().next() else {
        return Ok(None);
    };
    match entry {
        Value::Array(mut parts) if !parts.is_empty() => {
            let id = text(parts.swap_remove(0)).ok_or_else(|| malformed(key, "XRANGE"))?;
            parse_id(key, &id).map(Some)
        }
        other => Err(unexpected(key, "XRANGE", &other)),
    }
}

/// The first row of an extended `XPENDING … - + 1` reply.
fn pending_head(key: &str, reply: Value) -> Result<Option<PendingHead>> {
    Ok(pending_rows(key, reply)?.into_iter().next())
}

/// Every row of an extended `XPENDING … - + n` reply, each
/// `[id, consumer, idle, deliveries]`, in the server's (ID) order.
pub(crate) fn pending_rows(key: &str, reply: Value) -> Result<Vec<PendingHead>> {
    let Value::Array(rows) = reply else {
        return Err(unexpected(key, "XPENDING", &reply));
    };
    rows.into_iter().map(|row| pending_row(key, row)).collect()
}

fn pending_row(key: &str, row: Value) -> Result<PendingHead> {
    let Value::Array(row) = row else {
        return Err(unexpected(key, "XPENDING", &row));
    };
    let mut row = row.into_iter();
    let (Some(id), Some(consumer), Some(idle), Some(deliveries)) =
        (row.next(), row.next(), row.next(), row.next())
    else {
        return Err(malformed(key, "XPENDING"));
    };
    let id = text(id).ok_or_else(|| malformed(key, "XPENDING"))?;
    Ok(PendingHead {
        id: parse_id(key, &id)?,
        consumer: text(consumer).ok_or_else(|| malformed(key, "XPENDING"))?,
        idle_ms: integer(idle).ok_or_else(|| malformed(key, "XPENDING"))?,
        deliveries: integer(deliveries).ok_or_else(|| malformed(key, "XPENDING"))?,
    })
}

/// A non-negative integer reply, sent as an integer or as text.
pub(crate) fn integer(value: Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(n).ok(),
        other => text(other).and_then(|t| t.parse().ok()),
    }
}

pub(crate) fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text),
        _ => None,
    }
}

pub(crate) fn parse_id(key: &str, id: &str) -> Result<StreamId> {
    id.parse().map_err(|err| {
        Error::Operation(OperationError::Inventory {
            key: key.to_owned(),
            problem: InventoryProblem::BadId(err),
        })
    })
}

/// `XINFO GROUPS` on a missing key answers `ERR no such key`.
pub(crate) fn is_no_such_key(err: &redis::RedisError) -> bool {
    err.detail()
        .is_some_and(|detail| detail.to_ascii_lowercase().contains("no such key"))
}

pub(crate) fn short_reply(key: &str) -> Error {
    Error::Operation(OperationError::Inventory {
        key: key.to_owned(),
        problem: InventoryProblem::ShortReply,
    })
}

pub(crate) fn malformed(key: &str, command: &str) -> Error {
    Error::Operation(OperationError::Inventory {
        key: key.to_owned(),
        problem: InventoryProblem::Malformed {
            command: command.to_owned(),
        },
    })
}

pub(crate) fn unexpected(key: &str, command: &str, found: &Value) -> Error {
    Error::Operation(OperationError::Inventory {
        key: key.to_owned(),
        problem: InventoryProblem::Unexpected {
            command: command.to_owned(),
            found: format!("{found:?}"),
        },
    })
}
