//! Pausing a partition's intake: the flag `queuegen pause` sets and `queuegen resume` clears.
//!
//! The flag is one string key per partition, `{prefix}:{queue-NN}:paused`
//! ([`QueueConfig::paused_key`]), in the partition's hash tag so that it
//! lives on the partition's Cluster node. While it exists, the workers of
//! every group of the queue read no new entries of the partition;
//! recovery, acks, retries and producers carry on. Its value says who paused
//! the partition, when (the server's clock) and why:
//! `at_ms=<unix ms>;by=<who>;reason=<text>`. Any other value (a flag set by
//! hand with `SET … 1`) pauses all the same; `PauseNote::decode` then
//! keeps it as the reason.
//!
//! After changing flags, [`pause`] and [`resume`] `PUBLISH` to the queue's
//! pause channel ([`QueueConfig::pause_channel`]); workers subscribe to it
//! and re-read their flags on each message, so they notice within one read
//! block and poll nothing (`worker::pause`). A flag changed by hand without
//! that `PUBLISH` is noticed only when a worker next subscribes.
//!
//! Only the operator role writes the flag (`SET`, `GETDEL`) and publishes;
//! workers read it and subscribe, the monitor only reads it.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::stream_slot::Partition;

/// Who paused a partition, when and why: the value of its pause flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseNote {
    /// Who paused it (`queuegen pause` writes `<user>@<host>`, or `--by`).
    pub by: String,
    /// When, by the server's clock (Unix ms); 0 when the value does not say.
    pub at_ms: u64,
    /// Why (`--reason`); may be empty.
    pub reason: String,
}

impl PauseNote {
    /// The flag's value: `at_ms=<ms>;by=<who>;reason=<text>`. `;` and line
    /// breaks in `by` become spaces, so the value always parses back.
    pub(crate) fn encode(&self) -> String {
        let by: String = self
            .by
            .chars()
            .map(|c| if c == ';' || c.is_control() { ' ' } else { c })
            .collect();
        let reason: String = self
            .reason
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        format!("at_ms={};by={by};reason={reason}", self.at_ms)
    }

    /// The note in a flag's value; a value in another form (set by hand)
    /// is kept whole as the reason, with `by` `(unknown)`.
    pub(crate) fn decode(value: &str) -> PauseNote {
        let parsed = (|| {
            let rest = value.strip_prefix("at_ms=")?;
            let (at_ms, rest) = rest.split_once(";by=")?;
            let (by, reason) = rest.split_once(";reason=")?;
            Some(PauseNote {
                by: by.to_owned(),
                at_ms: at_ms.parse().ok()?,
                reason: reason.to_owned(),
            })
        })();
        parsed.unwrap_or_else(|| PauseNote {
            by: "(unknown)".to_owned(),
            at_ms: 0,
            reason: value.to_owned(),
        })
    }
}

/// What [`pause`] or [`resume`] did to one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseChange {
    pub partition: Partition,
    /// The flag key.
    pub key: String,
    /// The flag's note before the change: `None` when the partition was not
    /// paused (so `resume` changed nothing, or `pause` paused it now).
    pub before: Option<PauseNote>,
}

/// Pauses `partitions` of `config`'s queue: sets each flag to a note of
/// `by` and `reason` stamped with the server's `TIME` (`SET … GET`, so a
/// partition paused already says by whom; its note is replaced). Two
/// round trips: `TIME`, then one pipeline of the flags.
pub async fn pause<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partitions: &[Partition],
    by: &str,
    reason: &str,
) -> Result<(PauseNote, Vec<PauseChange>)> {
    let time: RedisResult<(u64, u64)> = redis::cmd("TIME").query_async(conn).await;
    let (seconds, micros) = time.map_err(|err| Error::redis("TIME", err))?;
    let note = PauseNote {
        by: by.to_owned(),
        at_ms: seconds * 1_000 + micros / 1_000,
        reason: reason.to_owned(),
    };
    let value = note.encode();
    let mut pipe = redis::pipe();
    for &partition in partitions {
        pipe.cmd("SET")
            .arg(config.paused_key(partition))
            .arg(&value)
            .arg("GET");
    }
    let changes = changes(conn, config, partitions, pipe, "SET … GET").await?;
    notify(conn, config, partitions).await?;
    Ok((note, changes))
}

/// Resumes `partitions`: deletes each flag (`GETDEL`, one pipeline), saying
/// which were paused, and by whom.
pub async fn resume<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partitions: &[Partition],
) -> Result<Vec<PauseChange>> {
    let mut pipe = redis::pipe();
    for &partition in partitions {
        pipe.cmd("GETDEL").arg(config.paused_key(partition));
    }
    let changes = changes(conn, config, partitions, pipe, "GETDEL").await?;
    notify(conn, config, partitions).await?;
    Ok(changes)
}

/// Tells the queue's workers to re-read their flags: `PUBLISH` to
/// [`QueueConfig::pause_channel`] the partitions changed (workers re-read
/// every flag whatever the message says). Sent after the flags changed, on
/// its own: on a Cluster it goes to any node, which forwards it to every
/// node's subscribers. A failure leaves the flags changed, and says so.
async fn notify<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partitions: &[Partition],
) -> Result<()> {
    let channel = config.pause_channel();
    let message = partitions
        .iter()
        .map(|partition| partition.index().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let published: RedisResult<u64> = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg(&message)
        .query_async(conn)
        .await;
    published.map(drop).map_err(|err| {
        let doing = format!(
            "PUBLISH {channel} after changing the pause flags of queue {} (the flags are changed; \
             workers notice at their next resubscribe, or now after `PUBLISH {channel} x`)",
            config.queue
        );
        Error::redis(doing, err)
    })
}

async fn changes<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partitions: &[Partition],
    pipe: redis::Pipeline,
    command: &str,
) -> Result<Vec<PauseChange>> {
    let describe = || {
        format!(
            "{command} of the pause flags of queue {} ({})",
            config.queue,
            config.paused_key(partitions.first().copied().unwrap_or(Partition::new(0)))
        )
    };
    let before: Vec<Option<String>> = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(describe(), err))?;
    Ok(partitions
        .iter()
        .zip(before)
        .map(|(&partition, before)| PauseChange {
            partition,
            key: config.paused_key(partition),
            before: before.as_deref().map(PauseNote::decode),
        })
        .collect())
}

/// The note of one `GET` of a pause flag in a pipeline answered with
/// `ignore_errors` (`None`: not paused). A flag of another type is an error
/// naming its key.
pub(crate) fn note_of(key: &str, answer: Option<RedisResult<Value>>) -> Result<Option<PauseNote>> {
    let answer = answer.ok_or_else(|| crate::inventory::short_reply("GET"))?;
    match answer {
        Ok(Value::Nil) => Ok(None),
        Ok(Value::BulkString(bytes)) => {
            Ok(Some(PauseNote::decode(&String::from_utf8_lossy(&bytes))))
        }
        Ok(Value::SimpleString(text)) => Ok(Some(PauseNote::decode(&text))),
        Ok(other) => Err(crate::inventory::unexpected(key, "GET", &other)),
        Err(err) => Err(Error::redis(format!("GET {key}"), err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_round_trips_and_a_hand_set_value_still_reads() {
        let note = PauseNote {
            by: "ana@ops-1;x".into(),
            at_ms: 1_733_140_301_004,
            reason: "db migration; back at 10:00".into(),
        };
        let decoded = PauseNote::decode(&note.encode());
        assert_eq!(decoded.by, "ana@ops-1 x");
        assert_eq!(decoded.at_ms, note.at_ms);
        assert_eq!(decoded.reason, note.reason);
        assert_eq!(
            PauseNote::decode("1"),
            PauseNote {
                by: "(unknown)".into(),
                at_ms: 0,
                reason: "1".into()
            }
        );
    }
}
