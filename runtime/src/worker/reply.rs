//! An `XREADGROUP` reply decoded straight from the owned value, moving each field's bytes (the entries themselves: `crate::entry`).
//!
//! The redis crate's `StreamReadReply` deep-clones the whole reply before it
//! parses it, and then builds a `HashMap<String, Value>` per entry: a copy of
//! every byte and several allocations per field, on the hottest path of a
//! worker. Here the reply value is taken apart in place: the field names and
//! values of an entry become one `Vec` of pairs without copying their bytes.

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, ParsingError, RedisResult, Value};

pub(crate) use crate::entry::Entry;
use crate::entry::{entries_of, text, unexpected};

/// The entries an `XREADGROUP` returned, per stream key.
#[derive(Debug, Default)]
pub(crate) struct ReadReply {
    pub streams: Vec<(String, Vec<Entry>)>,
}

impl FromRedisValue for ReadReply {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let streams = match value {
            Value::Nil => Vec::new(),
            // RESP2: [[key, entries], ...]
            Value::Array(rows) => rows
                .into_iter()
                .map(|row| match row {
                    Value::Array(pair) => key_and_entries(pair),
                    other => Err(unexpected("a [key, entries] pair", &other)),
                })
                .collect::<Result<_, _>>()?,
            // RESP3: {key: entries, ...}
            Value::Map(rows) => rows
                .into_iter()
                .map(|(key, entries)| Ok((text(key, "a stream key")?, entries_of(entries)?)))
                .collect::<Result<_, ParsingError>>()?,
            other => return Err(unexpected("an XREADGROUP reply", &other)),
        };
        Ok(ReadReply { streams })
    }
}

/// Sends an `XREADGROUP` and decodes its reply.
///
/// `Cmd::query_async` first walks the whole reply looking for nested error
/// values (rebuilding every array on the way), then converts it. An
/// `XREADGROUP` reply can only be an error as a whole, and the decoder
/// rejects anything it does not expect, so one pass is enough.
pub(crate) async fn xreadgroup(
    conn: &mut impl ConnectionLike,
    cmd: &Cmd,
) -> RedisResult<ReadReply> {
    match conn.req_packed_command(cmd).await? {
        Value::ServerError(err) => Err(err.into()),
        reply => Ok(ReadReply::from_redis_value(reply)?),
    }
}

fn key_and_entries(pair: Vec<Value>) -> Result<(String, Vec<Entry>), ParsingError> {
    let mut pair = pair.into_iter();
    match (pair.next(), pair.next(), pair.next()) {
        (Some(key), Some(entries), None) => Ok((text(key, "a stream key")?, entries_of(entries)?)),
        _ => Err(ParsingError::from("expected a [key, entries] pair")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn a_resp2_reply_keeps_streams_entries_and_field_order() {
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("q:{jobs-00}:ready"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("1-0"),
                    Value::Array(vec![bulk("job_id"), bulk("a"), bulk("pages"), bulk("3")]),
                ]),
                // Deleted while pending: no fields.
                Value::Array(vec![bulk("2-0"), Value::Nil]),
            ]),
        ])]);
        let reply = ReadReply::from_redis_value(reply).unwrap();
        assert_eq!(reply.streams.len(), 1);
        let (key, entries) = &reply.streams[0];
        assert_eq!(key, "q:{jobs-00}:ready");
        assert_eq!(
            entries[0],
            Entry {
                id: "1-0".into(),
                fields: vec![
                    ("job_id".into(), b"a".to_vec()),
                    ("pages".into(), b"3".to_vec())
                ],
            }
        );
        assert_eq!(entries[1].fields, []);
    }

    #[test]
    fn nil_is_no_entries_and_garbage_is_an_error() {
        assert!(ReadReply::from_redis_value(Value::Nil)
            .unwrap()
            .streams
            .is_empty());
        assert!(ReadReply::from_redis_value(Value::Int(3)).is_err());
        let odd = Value::Array(vec![Value::Array(vec![
            bulk("k"),
            Value::Array(vec![Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("job_id")]),
            ])]),
        ])]);
        assert!(ReadReply::from_redis_value(odd).is_err());
    }

    #[test]
    fn a_resp3_map_reply_reads_the_same() {
        let reply = Value::Map(vec![(
            bulk("k"),
            Value::Array(vec![Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("a"), bulk("b")]),
            ])]),
        )]);
        let reply = ReadReply::from_redis_value(reply).unwrap();
        assert_eq!(reply.streams[0].1[0].fields, [("a".into(), b"b".to_vec())]);
    }
}
