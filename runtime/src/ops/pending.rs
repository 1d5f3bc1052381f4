//! A queue's pending entries (delivered, not yet acknowledged), worst first,
//! each with the job it carries: what `queuegen pending` prints.
//!
//! Worst first means: most deliveries first (an entry delivered again and
//! again is crash-looping and nearest to poison quarantine), then longest
//! idle (its owner has been silent longest), then lowest ID (oldest).
//!
//! Read-only (`TIME`, `TYPE`, `XPENDING`, `XRANGE`), in two round trips: one
//! pipeline reads every selected partition's pending list (at most
//! `EXAMINED_PER_PARTITION` or `limit` entries each, in ID order, which is
//! what `XPENDING` can page by), the second reads the `job_id` of the rows
//! shown (`XRANGE id id`; an entry deleted or trimmed since shows as such).

use std::borrow::Cow;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;

use super::status::server_time;
use crate::config::QueueConfig;
use crate::error::{Error, Result, SetupError};
use crate::inventory::{self, integer, pending_rows, text};
use crate::stream_id::StreamId;
use crate::stream_slot::{Partition, StreamSlot};

/// Pending entries examined per partition when `limit` is smaller: the
/// ordering is over these (the lowest IDs of each partition's list).
pub(crate) const EXAMINED_PER_PARTITION: usize = 1000;

/// Which pending entries to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingQuery {
    /// Only this partition, as the operator typed it (checked against the
    /// queue's); `None`: every partition.
    pub partition: Option<u16>,
    /// Only entries idle at least this long (`XPENDING … IDLE`).
    pub min_idle: Option<Duration>,
    /// Only entries held by this consumer.
    pub consumer: Option<String>,
    /// At most this many rows, worst first.
    pub limit: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PendingReport {
    pub queue: String,
    pub group: String,
    /// The server's `TIME` in Unix ms; ages are measured against it.
    pub server_time_ms: u64,
    /// Worst first (see the module documentation), at most `limit`.
    pub rows: Vec<PendingEntry>,
    /// What was examined in each selected partition.
    pub partitions: Vec<PartitionPending>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionPending {
    pub partition: Partition,
    /// The lane, for a queue with lanes (a row per lane of each partition).
    pub lane: Option<Cow<'static, str>>,
    /// Every entry pending in the group on this partition (no filter).
    pub pending: u64,
    /// Entries matching the filters that were read and ordered.
    pub examined: u64,
    /// True when more matching entries may exist beyond those examined.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingEntry {
    pub partition: Partition,
    /// The lane, for a queue with lanes.
    pub lane: Option<Cow<'static, str>>,
    pub id: StreamId,
    /// The entry's `job_id` field; `None` when the entry is gone.
    pub job_id: Option<String>,
    /// The entry was deleted (XDEL) or trimmed while still pending: its
    /// payload is lost, only the pending-list record remains.
    pub deleted: bool,
    /// The consumer holding it.
    pub owner: String,
    /// Since it was last delivered or claimed.
    pub idle_ms: u64,
    /// Times delivered (the pending list's count).
    pub deliveries: u64,
    /// Since it was added (its ID).
    pub age_ms: u64,
}

/// The pending entries of `config`'s group selected by `query`, worst first.
///
/// Errors name the key: a missing ready stream ([`SetupError::MissingStream`]), a
/// stream without the group ([`SetupError::NoGroup`]), a key of the wrong type
/// (`WRONGTYPE` from `XPENDING`), a partition the queue does not have.
pub async fn pending<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    query: &PendingQuery,
) -> Result<PendingReport> {
    let streams: Vec<StreamSlot> = match query.partition {
        Some(partition) => config.streams_of(&[config.check_partition(partition)?]),
        None => StreamSlot::all(config.streams()).collect(),
    };
    let examine = query.limit.max(EXAMINED_PER_PARTITION);
    let idle_ms = query
        .min_idle
        .map(|idle| u64::try_from(idle.as_millis()).unwrap_or(u64::MAX));

    let mut first = redis::pipe();
    first.cmd("TIME");
    for &stream in &streams {
        let key = config.ready_key(stream);
        first.cmd("TYPE").arg(&key);
        first.cmd("XPENDING").arg(&key).arg(&*config.group);
        let extended = first.cmd("XPENDING").arg(&key).arg(&*config.group);
        if let Some(idle_ms) = idle_ms {
            extended.arg("IDLE").arg(idle_ms);
        }
        extended.arg("-").arg("+").arg(examine);
        if let Some(consumer) = &query.consumer {
            extended.arg(consumer);
        }
    }
    let answers: Vec<RedisResult<Value>> =
        first
            .ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!("XPENDING of queue {} group {}", config.queue, config.group),
                    err,
                )
            })?;
    let mut answers = answers.into_iter();
    let server_time_ms = server_time(answers.next())?;

    let mut summaries = Vec::with_capacity(streams.len());
    let mut rows = Vec::new();
    for &stream in &streams {
        let key = config.ready_key(stream);
        let (Some(kind), Some(summary), Some(extended)) =
            (answers.next(), answers.next(), answers.next())
        else {
            return Err(inventory::short_reply(&key));
        };
        let kind = kind
            .map_err(|err| Error::redis(format!("TYPE {key}"), err))
            .map(|value| text(value).unwrap_or_default())?;
        if kind == "none" {
            return Err(Error::Setup(SetupError::MissingStream { key }));
        }
        let xpending_error = |err: redis::RedisError| {
            if err.code() == Some("NOGROUP") {
                Error::Setup(SetupError::NoGroup {
                    key: key.clone(),
                    group: config.group.to_string(),
                })
            } else {
                Error::redis(format!("XPENDING {key} {}", config.group), err)
            }
        };
        let total = match summary.map_err(xpending_error)? {
            Value::Array(parts) => parts.into_iter().next().and_then(integer).unwrap_or(0),
            other => return Err(inventory::unexpected(&key, "XPENDING", &other)),
        };
        let found = pending_rows(&key, extended.map_err(xpending_error)?)?;
        let lane = config.lane_of_stream(stream).map(|lane| lane.name.clone());
        summaries.push(PartitionPending {
            partition: config.partition_of_stream(stream),
            lane: lane.clone(),
            pending: total,
            examined: found.len() as u64,
            truncated: found.len() >= examine,
        });
        rows.extend(found.into_iter().map(|head| PendingEntry {
            partition: config.partition_of_stream(stream),
            lane: lane.clone(),
            age_ms: u64::try_from(head.id.age(server_time_ms).as_millis()).unwrap_or(u64::MAX),
            id: head.id,
            job_id: None,
            deleted: false,
            owner: head.consumer,
            idle_ms: head.idle_ms,
            deliveries: head.deliveries,
        }));
    }

    worst_first(&mut rows);
    rows.truncate(query.limit);
    fill_job_ids(conn, config, &mut rows).await?;
    Ok(PendingReport {
        queue: config.queue.to_string(),
        group: config.group.to_string(),
        server_time_ms,
        rows,
        partitions: summaries,
    })
}

impl PendingEntry {
    /// The stream of the entry's lane and partition in `config`.
    fn stream(&self, config: &QueueConfig) -> StreamSlot {
        config
            .stream_named(self.lane.as_deref(), self.partition)
            .unwrap_or(self.partition.default_stream())
    }
}

/// Most deliveries, then longest idle, then lowest ID (and partition).
pub(crate) fn worst_first(rows: &mut [PendingEntry]) {
    rows.sort_by(|a, b| {
        b.deliveries
            .cmp(&a.deliveries)
            .then(b.idle_ms.cmp(&a.idle_ms))
            .then(a.id.cmp(&b.id))
            .then(a.partition.cmp(&b.partition))
    });
}

/// The second round trip: `XRANGE id id` per row for its `job_id`.
async fn fill_job_ids<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    rows: &mut [PendingEntry],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut second = redis::pipe();
    for row in rows.iter() {
        let id = row.id.to_string();
        second
            .cmd("XRANGE")
            .arg(config.ready_key(row.stream(config)))
            .arg(&id)
            .arg(&id);
    }
    let answers: Vec<RedisResult<Value>> =
        second
            .ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!("XRANGE of the pending entries of queue {}", config.queue),
                    err,
                )
            })?;
    for (row, answer) in rows.iter_mut().zip(answers) {
        let key = config.ready_key(row.stream(config));
        let reply =
            answer.map_err(|err| Error::redis(format!("XRANGE {key} {0} {0}", row.id), err))?;
        match entry_field(&key, reply, "job_id")? {
            Some(job_id) => row.job_id = job_id,
            None => row.deleted = true,
        }
    }
    Ok(())
}

/// `Some(field value)` of the one entry of an `XRANGE id id` reply (`Some(None)`
/// when it has no such field); `None` when the entry does not exist.
fn entry_field(key: &str, reply: Value, field: &str) -> Result<Option<Option<String>>> {
    let Value::Array(entries) = reply else {
        return Err(inventory::unexpected(key, "XRANGE", &reply));
    };
    let Some(entry) = entries.into_iter().next() else {
        return Ok(None);
    };
    let Value::Array(parts) = entry else {
        return Err(inventory::unexpected(key, "XRANGE", &entry));
    };
    let fields = match parts.into_iter().nth(1) {
        Some(Value::Array(flat)) => {
            let mut flat = flat.into_iter();
            std::iter::from_fn(|| Some((flat.next()?, flat.next()?))).collect::<Vec<_>>()
        }
        Some(Value::Map(pairs)) => pairs,
        _ => return Err(inventory::malformed(key, "XRANGE")),
    };
    // As text, in either shape (a packed entry's fields are in its one field).
    let fields: Vec<(String, Vec<u8>)> = fields
        .into_iter()
        .filter_map(|(name, value)| match value {
            Value::BulkString(bytes) => Some((text(name)?, bytes)),
            Value::SimpleString(value) => Some((text(name)?, value.into_bytes())),
            _ => None,
        })
        .collect();
    Ok(Some(
        crate::packed::entry_field(&fields, field)
            .map(|value| String::from_utf8_lossy(value).into_owned()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(partition: u16, ms: u64, idle_ms: u64, deliveries: u64) -> PendingEntry {
        PendingEntry {
            lane: None,
            partition: Partition::new(partition),
            id: StreamId::new(ms, 0),
            job_id: None,
            deleted: false,
            owner: "w".into(),
            idle_ms,
            deliveries,
            age_ms: 0,
        }
    }

    #[test]
    fn worst_is_most_deliveries_then_longest_idle_then_oldest() {
        let mut rows = vec![
            row(0, 10, 5_000, 1),
            row(1, 20, 100, 4),
            row(0, 30, 9_000, 1),
            row(1, 5, 9_000, 1),
            row(0, 40, 100, 4),
        ];
        worst_first(&mut rows);
        let order: Vec<u64> = rows.iter().map(|r| r.id.ms).collect();
        assert_eq!(order, [20, 40, 5, 30, 10]);
    }
}
