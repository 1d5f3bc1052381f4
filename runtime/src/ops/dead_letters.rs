//! A queue's dead letters as stored, with the envelope each carried and
//! whether it was replayed already: what `queuegen dlq` and the dashboard show.
//!
//! Read-only (`XRANGE`/`XREVRANGE` of the dead-letter streams, `GET` of the
//! replay markers). Replaying is `transitions::replay`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use redis::aio::ConnectionLike;
use redis::streams::{StreamId as Entry, StreamRangeReply};
use redis::Value;
use serde::Serialize;

use crate::config::MarkerKind;
use crate::config::QueueConfig;
use crate::error::{Error, OperationError, Result};
use crate::stream_id::StreamId;
use crate::stream_slot::{Partition, StreamSlot};

/// Which dead letters to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLetterQuery {
    /// Only this partition, as the operator typed it (checked against the
    /// queue's); `None`: every partition.
    pub partition: Option<u16>,
    /// Only this lane, for a queue with lanes; `None`: every lane.
    pub lane: Option<String>,
    /// Only the dead letter with this ID (an error when it is not stored).
    pub id: Option<String>,
    /// At most this many, newest first over the selected streams.
    pub limit: usize,
}

/// One dead letter as read from a partition's dead-letter stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    pub partition: Partition,
    /// The lane, for a queue with lanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<Cow<'static, str>>,
    /// Its stream (lane and partition), for the keys.
    #[serde(skip)]
    pub stream: StreamSlot,
    pub id: String,
    /// Every field of the dead-letter entry (`reason`, `detail`, `job_id`,
    /// `envelope`…), as text.
    pub fields: BTreeMap<String, String>,
    /// The original envelope, decoded from the `envelope` field, in its order.
    pub envelope: Vec<(String, String)>,
}

impl DeadLetter {
    fn from_entry(config: &QueueConfig, stream: StreamSlot, entry: Entry) -> Self {
        let mut fields = BTreeMap::new();
        let mut envelope = Vec::new();
        for (name, value) in entry.map {
            if name == ENVELOPE_FIELD {
                envelope = value_bytes(&value).map(decode_envelope).unwrap_or_default();
                // Shown as the JSON array whatever the stored form, so
                // that `--json` and the dashboard stay readable; as stored
                // when it does not decode.
                let shown = if envelope.is_empty() {
                    value_text(value)
                } else {
                    envelope_json(&envelope)
                };
                fields.insert(name, shown);
            } else {
                fields.insert(name, value_text(value));
            }
        }
        DeadLetter {
            partition: config.partition_of_stream(stream),
            lane: config.lane_of_stream(stream).map(|lane| lane.name.clone()),
            stream,
            id: entry.id,
            fields,
            envelope,
        }
    }

    /// `3`, or `high/3` for a queue with lanes.
    pub fn place(&self) -> String {
        match &self.lane {
            Some(lane) => format!("{lane}/{}", self.partition),
            None => self.partition.to_string(),
        }
    }

    /// A field of the dead-letter entry, or `""`.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map(String::as_str).unwrap_or("")
    }
}

fn value_text(value: Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::SimpleString(text) => text,
        other => format!("{other:?}"),
    }
}

/// The dead letter's field holding the original envelope.
const ENVELOPE_FIELD: &str = "envelope";

fn value_bytes(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(text) => Some(text.as_bytes()),
        _ => None,
    }
}

/// An envelope as the library stores it (a dead letter's `envelope`, a
/// retry's or delayed job's hash value): the JSON array `[field, value,
/// ...]` of an entry written with fields, or the MessagePack array of a
/// packed one ([`crate::packed`]). Empty when it is neither.
pub(crate) fn decode_envelope(stored: &[u8]) -> Vec<(String, String)> {
    if stored.first() == Some(&b'[') {
        let values: Vec<String> = serde_json::from_slice(stored).unwrap_or_default();
        return values
            .chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect();
    }
    crate::packed::unpack(stored)
        .map(|pairs| {
            pairs
                .into_iter()
                .map(|(name, value)| (name.to_owned(), String::from_utf8_lossy(value).into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Decoded pairs as the JSON array the library stores for fields entries.
fn envelope_json(pairs: &[(String, String)]) -> String {
    let flat: Vec<&str> = pairs
        .iter()
        .flat_map(|(name, value)| [name.as_str(), value.as_str()])
        .collect();
    serde_json::to_string(&flat).expect("strings serialize")
}

/// The streams a query selects, checking its partition and lane.
pub(crate) fn selected_streams(
    config: &QueueConfig,
    query: &DeadLetterQuery,
) -> Result<Vec<StreamSlot>> {
    let partitions: Vec<Partition> = match query.partition {
        Some(partition) => vec![config.check_partition(partition)?],
        None => Partition::all(config.partitions).collect(),
    };
    match &query.lane {
        None => Ok(config.streams_of(&partitions)),
        Some(lane) if config.lane_index(lane).is_none() => {
            Err(Error::Operation(OperationError::NoSuchLane {
                queue: config.queue.to_string(),
                lane: lane.clone(),
                known: match &*config.lanes {
                    [] => "no lanes".to_owned(),
                    lanes => format!(
                        "lanes {}",
                        lanes
                            .iter()
                            .map(|l| &*l.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
            }))
        }
        Some(lane) => Ok(partitions
            .iter()
            .filter_map(|&p| config.stream_named(Some(lane), p))
            .collect()),
    }
}

/// The dead letters `query` selects, newest first: one ID, or the newest
/// `limit` over the selected partitions (one pipeline, one round trip).
pub async fn dead_letters<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    query: &DeadLetterQuery,
) -> Result<Vec<DeadLetter>> {
    let streams = selected_streams(config, query)?;
    if let Some(id) = &query.id {
        StreamId::parse_whole(id).map_err(|_| {
            Error::Operation(OperationError::BadDeadLetterId {
                queue: config.queue.to_string(),
                id: id.clone(),
            })
        })?;
    }
    let mut pipe = redis::pipe();
    for &stream in &streams {
        let key = config.dead_key(stream);
        match &query.id {
            Some(id) => pipe.cmd("XRANGE").arg(&key).arg(id).arg(id),
            None => pipe
                .cmd("XREVRANGE")
                .arg(&key)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(query.limit),
        };
    }
    let replies: Vec<StreamRangeReply> = pipe.query_async(conn).await.map_err(|err| {
        Error::redis(
            format!(
                "reading the dead letters of queue {} ({}…)",
                config.queue,
                config.dead_key(streams.first().copied().unwrap_or(StreamSlot::new(0)))
            ),
            err,
        )
    })?;
    let mut found: Vec<DeadLetter> = streams
        .iter()
        .zip(replies)
        .flat_map(|(&stream, reply)| {
            reply
                .ids
                .into_iter()
                .map(move |entry| DeadLetter::from_entry(config, stream, entry))
        })
        .collect();
    if let (Some(id), true) = (&query.id, found.is_empty()) {
        return Err(Error::Operation(OperationError::NoSuchDeadLetter {
            queue: config.queue.to_string(),
            id: id.clone(),
            place: match (&query.lane, query.partition) {
                (Some(lane), Some(p)) => format!("lane {lane}, partition {p}"),
                (Some(lane), None) => format!("lane {lane}"),
                (None, Some(p)) => format!("partition {p}"),
                (None, None) => "any partition".to_owned(),
            },
        }));
    }
    // Newest first across partitions: stream IDs start with their Unix ms.
    found.sort_by_key(|dead| std::cmp::Reverse(id_order(&dead.id)));
    found.truncate(query.limit);
    Ok(found)
}

fn id_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// For each dead letter, the ready entry an earlier replay appended (its
/// replay marker, kept for `retention.min_age`), or `None`.
pub async fn replayed_as<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    letters: &[DeadLetter],
) -> Result<Vec<Option<String>>> {
    if letters.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for letter in letters {
        pipe.cmd("GET")
            .arg(config.marker_key(letter.stream, MarkerKind::Replay, &letter.id));
    }
    pipe.query_async(conn).await.map_err(|err| {
        Error::redis(
            format!("reading the replay markers of queue {}", config.queue),
            err,
        )
    })
}
