//! Trimming a stream to its plan through the library's `trim` function, then verifying that every entry a group needs is still there.

use redis::aio::ConnectionLike;
use redis::Value;

use super::TrimPlan;
use crate::config::QueueConfig;
use crate::error::{Error, InventoryProblem, OperationError, Result};
use crate::functions::{self, CallContext, Function, TrimGroup};
use crate::inventory::{inventory, StreamInventory};
use crate::lease::Lease;
use crate::stream_id::StreamId;
use crate::stream_slot::Partition;

/// What [`apply`] removed from one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trimmed {
    pub key: String,
    pub minid: StreamId,
    /// Entries removed (`XTRIM`'s reply).
    pub removed: u64,
    /// `MEMORY USAGE` before minus after, in the same atomic call (`None`
    /// when MEMORY is refused). Redis samples large streams: an estimate.
    pub bytes_freed: Option<u64>,
    /// Entries checked after the trim: pending heads and first undelivered entries.
    pub verified: usize,
}

/// Applies `plan` under `lease` (the partition's trim lease, held by this
/// caller): the library's `trim` re-checks the plan and trims atomically;
/// then the stream is inventoried again and every entry a group needs is
/// checked (`XRANGE id id`).
///
/// Errors: [`OperationError::TrimAborted`] (nothing removed) when the groups changed
/// since the plan; [`OperationError::LeaseHeld`] (nothing removed) when the lease is
/// no longer this caller's; [`OperationError::TrimUnverified`] when an entry a group
/// needs is gone after the trim. `xtrim_acked` adds `ACKED` (Redis 8.2+
/// only: see [`xtrim_acked_supported`](super::xtrim_acked_supported)).
pub async fn apply<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    plan: &TrimPlan,
    lease: &Lease,
    xtrim_acked: bool,
) -> Result<Trimmed> {
    let function = config.function(Function::Trim);
    let groups: Vec<TrimGroup> = plan
        .groups
        .iter()
        .map(|group| TrimGroup {
            name: &group.name,
            last_delivered: group.last_delivered.to_string(),
        })
        .collect();
    let call = functions::Trim {
        stream_key: &plan.key,
        lease_key: lease.key(),
        role: plan.role.as_str(),
        holder: lease.holder(),
        minid: &plan.minid.to_string(),
        retention_ms: u64::try_from(plan.retention.as_millis()).unwrap_or(u64::MAX),
        xtrim_acked,
        groups: &groups,
    };
    let reply: Value = functions::command(&function, &call)
        .query_async(conn)
        .await
        .map_err(|err| refusal(err, &function, plan, lease))?;
    let trimmed = TrimReply::parse(&plan.key, reply)?;
    let (removed, bytes_freed, groups) = match trimmed {
        TrimReply::Aborted { group, change } => {
            return Err(Error::Operation(OperationError::TrimAborted {
                key: plan.key.clone(),
                group,
                change,
            }))
        }
        TrimReply::Trimmed {
            removed,
            bytes_freed,
            groups,
        } => (removed, bytes_freed, groups),
    };
    let verified = verify(conn, &plan.key, plan.minid, &groups).await?;
    Ok(Trimmed {
        key: plan.key.clone(),
        minid: plan.minid,
        removed,
        bytes_freed,
        verified,
    })
}

/// A `QG_*` refusal of the trim function as the runtime's error: `QG_LEASE`
/// as [`OperationError::LeaseHeld`], the others as for every function call.
fn refusal(err: redis::RedisError, function: &str, plan: &TrimPlan, lease: &Lease) -> Error {
    let job = format!("trim to MINID {}", plan.minid);
    let call = CallContext {
        function,
        key: plan.key.clone(),
        // The stream's number, as these errors have always named it (the
        // partition's own only in the default lane).
        partition: Partition::new(plan.stream.index()),
        job: &job,
        entry: None,
    };
    let (code, detail) = match functions::refusal_of(&err) {
        Some(refusal) => refusal,
        None => {
            return Error::redis(
                format!("FCALL {function} {} (partition {})", plan.key, plan.stream),
                err,
            )
        }
    };
    if code == "QG_LEASE" {
        let holder = match detail {
            "(none)" => "nobody (this trimmer's lease expired)".to_owned(),
            holder => holder.to_owned(),
        };
        return Error::Operation(OperationError::LeaseHeld {
            key: lease.key().to_owned(),
            holder,
        });
    }
    call.transition(code, detail)
}

/// One group as the trim function checked it just before trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CheckedGroup {
    name: String,
    pending_head: Option<StreamId>,
    /// Whether the pending head's entry was stored (a deleted entry may stay pending).
    pending_head_stored: bool,
    first_undelivered: Option<StreamId>,
}

/// The trim function's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TrimReply {
    Trimmed {
        removed: u64,
        bytes_freed: Option<u64>,
        groups: Vec<CheckedGroup>,
    },
    Aborted {
        group: String,
        change: String,
    },
}

impl TrimReply {
    fn parse(key: &str, reply: Value) -> Result<TrimReply> {
        let bad = || {
            Error::Operation(OperationError::Inventory {
                key: key.to_owned(),
                problem: InventoryProblem::TrimReply,
            })
        };
        let Value::Array(items) = reply else {
            return Err(bad());
        };
        let mut items = items.into_iter();
        let status = items.next().and_then(text).ok_or_else(bad)?;
        match status.as_str() {
            "aborted" => {
                let group = items.next().and_then(text).ok_or_else(bad)?;
                let change = items.next().and_then(text).ok_or_else(bad)?;
                Ok(TrimReply::Aborted { group, change })
            }
            "trimmed" => {
                let removed = match items.next() {
                    Some(Value::Int(n)) => u64::try_from(n).map_err(|_| bad())?,
                    _ => return Err(bad()),
                };
                let before = items.next().and_then(text).ok_or_else(bad)?;
                let after = items.next().and_then(text).ok_or_else(bad)?;
                let bytes_freed = match (before.parse::<u64>(), after.parse::<u64>()) {
                    (Ok(before), Ok(after)) => Some(before.saturating_sub(after)),
                    _ => None,
                };
                let Some(Value::Array(rows)) = items.next() else {
                    return Err(bad());
                };
                let groups = rows
                    .into_iter()
                    .map(|row| {
                        let Value::Array(row) = row else {
                            return Err(bad());
                        };
                        let row: Vec<String> = row.into_iter().filter_map(text).collect();
                        let [name, _last, head, stored, undelivered] =
                            <[String; 5]>::try_from(row).map_err(|_| bad())?;
                        let id = |text: &str| -> Result<Option<StreamId>> {
                            if text.is_empty() {
                                return Ok(None);
                            }
                            text.parse().map(Some).map_err(|_| bad())
                        };
                        Ok(CheckedGroup {
                            pending_head: id(&head)?,
                            pending_head_stored: stored == "1",
                            first_undelivered: id(&undelivered)?,
                            name,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(TrimReply::Trimmed {
                    removed,
                    bytes_freed,
                    groups,
                })
            }
            _ => Err(bad()),
        }
    }
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text),
        _ => None,
    }
}

/// After a trim to `minid`: inventories the stream again, then checks in one
/// pipeline of `XRANGE id id` that every entry the function kept for a
/// group is still stored, and that no group now has a pending entry below
/// the MINID without its payload. Returns how many entries were checked.
async fn verify<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    minid: StreamId,
    kept: &[CheckedGroup],
) -> Result<usize> {
    let after = inventory(conn, &[key.to_owned()]).await?;
    let checks = verification_checks(kept, after.first().and_then(Option::as_ref), minid);
    if checks.is_empty() {
        return Ok(0);
    }
    let mut pipe = redis::pipe();
    for check in &checks {
        let id = check.id.to_string();
        pipe.cmd("XRANGE").arg(key).arg(&id).arg(&id);
    }
    let answers: Vec<Value> = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("XRANGE id id of the entries kept in {key}"), err))?;
    let mut stored: Vec<bool> = answers
        .iter()
        .map(|answer| matches!(answer, Value::Array(entries) if !entries.is_empty()))
        .collect();
    if stored.contains(&false) {
        settled_since(conn, key, &checks, &mut stored).await?;
    }
    match first_missing(&checks, &stored) {
        Some(check) => Err(Error::Operation(OperationError::TrimUnverified {
            key: key.to_owned(),
            minid: minid.to_string(),
            group: check.group.clone(),
            what: check.what,
            id: check.id.to_string(),
        })),
        None => Ok(checks.len()),
    }
}

/// Marks as no longer needed (`stored` true) each missing entry of `checks`
/// that its group has acknowledged since the plan: read (at or below the
/// group's last-delivered ID now) and no longer pending. A queue with
/// `retention.on_ack: delete` deletes such an entry with its ack
/// (`XACKDEL … ACKED`, which deletes only what every group has read and none
/// holds pending), so a pending head or first undelivered entry of the plan
/// may rightly be gone by the time it is checked. What a group still needs
/// (pending, or not read yet) stays a loss; so does an entry of a group that
/// no longer exists.
async fn settled_since<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    checks: &[Check],
    stored: &mut [bool],
) -> Result<()> {
    let now = inventory(conn, &[key.to_owned()]).await?;
    let groups = now
        .first()
        .and_then(Option::as_ref)
        .map_or(&[][..], |stream| &stream.groups[..]);
    let missing: Vec<usize> = (0..checks.len()).filter(|&i| !stored[i]).collect();
    let mut pipe = redis::pipe();
    for &i in &missing {
        let id = checks[i].id.to_string();
        pipe.cmd("XPENDING")
            .arg(key)
            .arg(&checks[i].group)
            .arg(&id)
            .arg(&id)
            .arg(1);
    }
    let pending: Vec<Value> = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("XPENDING of the entries missing from {key}"), err))?;
    for (&i, pending) in missing.iter().zip(&pending) {
        let check = &checks[i];
        let read = groups
            .iter()
            .find(|group| group.name == check.group)
            .is_some_and(|group| check.id <= group.last_delivered);
        let still_pending = !matches!(pending, Value::Array(entries) if entries.is_empty());
        if read && !still_pending {
            stored[i] = true;
        }
    }
    Ok(())
}

/// One entry that must still be stored after a trim.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Check {
    group: String,
    id: StreamId,
    what: &'static str,
}

/// What [`verify`] checks: each pending head the function found stored and
/// each first undelivered entry it kept, and each group's pending head now
/// (`after`) when it is below the MINID.
fn verification_checks(
    kept: &[CheckedGroup],
    after: Option<&StreamInventory>,
    minid: StreamId,
) -> Vec<Check> {
    let mut checks = Vec::new();
    for group in kept {
        if let Some(head) = group.pending_head.filter(|_| group.pending_head_stored) {
            checks.push(Check {
                group: group.name.clone(),
                id: head,
                what: "pending entry",
            });
        }
        if let Some(next) = group.first_undelivered {
            checks.push(Check {
                group: group.name.clone(),
                id: next,
                what: "first undelivered entry",
            });
        }
    }
    for group in after.map_or(&[][..], |stream| &stream.groups[..]) {
        if let Some(head) = group.lowest_pending.as_ref().filter(|head| head.id < minid) {
            checks.push(Check {
                group: group.name.clone(),
                id: head.id,
                what: "pending entry below the MINID",
            });
        }
    }
    checks
}

/// The first check whose entry `XRANGE id id` did not find.
fn first_missing<'a>(checks: &'a [Check], stored: &[bool]) -> Option<&'a Check> {
    checks
        .iter()
        .zip(stored)
        .find(|(_, stored)| !**stored)
        .map(|(check, _)| check)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    #[test]
    fn verification_checks_what_was_kept_and_pending_below_the_minid() {
        use crate::inventory::{GroupInventory, PendingHead};
        let kept = [
            CheckedGroup {
                name: "a".into(),
                pending_head: Some(id(40)),
                pending_head_stored: true,
                first_undelivered: Some(id(51)),
            },
            // A pending head whose entry was deleted before the trim is not
            // the trim's loss: not checked.
            CheckedGroup {
                name: "b".into(),
                pending_head: Some(id(45)),
                pending_head_stored: false,
                first_undelivered: None,
            },
        ];
        let group_now = |name: &str, head: Option<u64>| GroupInventory {
            name: name.into(),
            consumers: 1,
            pending: u64::from(head.is_some()),
            last_delivered: id(50),
            entries_read: None,
            lag: None,
            lowest_pending: head.map(|ms| PendingHead {
                id: id(ms),
                consumer: "c".into(),
                idle_ms: 0,
                deliveries: 1,
            }),
            first_undelivered: None,
        };
        let after = StreamInventory {
            key: "k".into(),
            length: 10,
            first_entry: Some(id(40)),
            groups: vec![group_now("a", Some(41)), group_now("c", Some(30))],
        };
        let checks = verification_checks(&kept, Some(&after), id(40));
        let listed: Vec<(&str, StreamId, &str)> = checks
            .iter()
            .map(|c| (c.group.as_str(), c.id, c.what))
            .collect();
        assert_eq!(
            listed,
            [
                ("a", id(40), "pending entry"),
                ("a", id(51), "first undelivered entry"),
                ("c", id(30), "pending entry below the MINID"),
            ]
        );
        assert_eq!(first_missing(&checks, &[true, true, true]), None);
        assert_eq!(
            first_missing(&checks, &[true, false, true]).map(|c| c.id),
            Some(id(51))
        );
        assert_eq!(
            first_missing(&checks, &[true, true, false]).map(|c| c.group.as_str()),
            Some("c")
        );
    }

    #[test]
    fn trim_replies_parse_into_what_was_kept() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            bulk("trimmed"),
            Value::Int(7),
            bulk("5000"),
            bulk("3000"),
            Value::Array(vec![Value::Array(vec![
                bulk("g"),
                bulk("9-0"),
                bulk("4-0"),
                bulk("1"),
                bulk(""),
            ])]),
        ]);
        assert_eq!(
            TrimReply::parse("k", reply).unwrap(),
            TrimReply::Trimmed {
                removed: 7,
                bytes_freed: Some(2000),
                groups: vec![CheckedGroup {
                    name: "g".into(),
                    pending_head: Some(StreamId::new(4, 0)),
                    pending_head_stored: true,
                    first_undelivered: None,
                }],
            }
        );
        let unknown_bytes = Value::Array(vec![
            bulk("trimmed"),
            Value::Int(0),
            bulk(""),
            bulk(""),
            Value::Array(vec![]),
        ]);
        assert!(matches!(
            TrimReply::parse("k", unknown_bytes).unwrap(),
            TrimReply::Trimmed {
                bytes_freed: None,
                ..
            }
        ));
        let aborted = Value::Array(vec![
            bulk("aborted"),
            bulk("g"),
            bulk("was created since the plan"),
        ]);
        assert_eq!(
            TrimReply::parse("k", aborted).unwrap(),
            TrimReply::Aborted {
                group: "g".into(),
                change: "was created since the plan".into()
            }
        );
        assert!(TrimReply::parse("k", Value::Int(1)).is_err());
    }
}
