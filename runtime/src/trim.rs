//! Safe retention trimming of a partition's ready and dead-letter streams:
//! plan the exact MINID from the policy and every group's boundaries, trim
//! through the library's `trim` function, which re-checks the plan
//! atomically, then verify that nothing a group needs is gone.
//!
//! The MINID is the earliest of:
//! - the policy cutoff: server time minus `retention.min_age` (ready) or
//!   `dead_letter.retention` (dead): nothing younger goes;
//! - every group's lowest pending entry: a delivered, unacknowledged job
//!   keeps its payload (and so does everything after it);
//! - every group's first undelivered entry (the first after its
//!   last-delivered ID). A group with nothing undelivered has read every
//!   entry there is: the entries after its position do not exist yet, so
//!   it sets no bound; the function re-checks at trim time that nothing
//!   has appeared below the MINID since.
//!
//! `XTRIM key MINID <minid>` (exact) removes only entries below it. The
//! two steps are public so that dry runs and tests see the plan: [`plan`]
//! (read-only), then [`apply`] under the partition's lease. The function
//! refuses, removing nothing, when the lease is no longer the caller's,
//! a group was created or removed, a group's last-delivered ID moved back
//! (`XGROUP SETID`), or any group's lowest pending or first undelivered
//! entry is now below the MINID. `XTRIM … ACKED` is added only on a server
//! that has it (Redis 8.2+, from `INFO server`).
//!
//! Cost per partition and pass: bounded by the number of groups, never by
//! the stream's length: `SET NX` (lease), `TIME`, the inventory of both
//! streams (two pipelines), and only for a stream with something to remove,
//! one `FCALL` and the verification (the inventory again and one pipeline
//! of `XRANGE id id`), then the lease release.

use std::fmt;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;

use crate::config::QueueConfig;
use crate::error::{Error, InventoryProblem, OperationError, Result};
use crate::functions::{self, CallContext, Function, TrimGroup};
use crate::inventory::{first_id, inventory, StreamInventory};
use crate::lease::{self, Lease};
use crate::stream_id::StreamId;

/// How long a trimmer's lease lasts. A pass over one partition takes a few
/// round trips; a trimmer that dies holding it blocks the partition's
/// trimming for at most this long, and one that outlives it is refused by
/// the trim function.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// A dry run counts the entries that would go up to this many (one `XRANGE
/// … COUNT`); past it, it says "at least" this many.
pub const DEFAULT_COUNT_CAP: u64 = 1_000;

/// Which stream of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamRole {
    /// `{prefix}:{queue-NN}:ready`, kept for `retention.min_age`.
    Ready,
    /// `{prefix}:{queue-NN}:dead`, kept for `dead_letter.retention`.
    Dead,
}

impl StreamRole {
    pub const BOTH: [StreamRole; 2] = [StreamRole::Ready, StreamRole::Dead];

    pub fn as_str(self) -> &'static str {
        match self {
            StreamRole::Ready => "ready",
            StreamRole::Dead => "dead",
        }
    }

    /// The stream's key in `partition`.
    pub fn key(self, config: &QueueConfig, partition: u16) -> String {
        match self {
            StreamRole::Ready => config.ready_key(partition),
            StreamRole::Dead => config.dead_key(partition),
        }
    }

    /// How long the stream keeps entries at least.
    pub fn retention(self, config: &QueueConfig) -> Duration {
        match self {
            StreamRole::Ready => config.retention.min_age,
            StreamRole::Dead => config.dead_letter.retention,
        }
    }

    /// The spec key of [`StreamRole::retention`].
    pub fn retention_setting(self) -> &'static str {
        match self {
            StreamRole::Ready => "retention.min_age",
            StreamRole::Dead => "dead_letter.retention",
        }
    }
}

impl fmt::Display for StreamRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What decided a plan's MINID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Boundary {
    /// The retention policy: every group's boundaries are later.
    Policy,
    /// A group's lowest pending entry.
    Pending { group: String, id: StreamId },
    /// A group's first undelivered entry.
    Undelivered { group: String, id: StreamId },
}

impl Boundary {
    /// `policy`, `pending` or `undelivered`.
    pub fn kind(&self) -> &'static str {
        match self {
            Boundary::Policy => "policy",
            Boundary::Pending { .. } => "pending",
            Boundary::Undelivered { .. } => "undelivered",
        }
    }

    /// The group whose boundary it is, unless it is the policy.
    pub fn group(&self) -> Option<&str> {
        match self {
            Boundary::Policy => None,
            Boundary::Pending { group, .. } | Boundary::Undelivered { group, .. } => Some(group),
        }
    }
}

impl fmt::Display for Boundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Boundary::Policy => f.write_str("policy"),
            Boundary::Pending { group, id } => write!(f, "group {group} pending {id}"),
            Boundary::Undelivered { group, id } => write!(f, "group {group} undelivered {id}"),
        }
    }
}

/// One group's boundaries as the plan saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupBoundaries {
    pub name: String,
    pub last_delivered: StreamId,
    pub lowest_pending: Option<StreamId>,
    pub first_undelivered: Option<StreamId>,
}

/// How many entries a plan would remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removable {
    Exact(u64),
    /// More than the count cap: at least this many.
    AtLeast(u64),
    /// Not counted (a plan made without a count cap).
    Unknown,
}

impl fmt::Display for Removable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Removable::Exact(n) => write!(f, "{n}"),
            Removable::AtLeast(n) => write!(f, ">={n}"),
            Removable::Unknown => f.write_str("unknown"),
        }
    }
}

/// What trimming one stream would do, as read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimPlan {
    pub partition: u16,
    pub role: StreamRole,
    pub key: String,
    /// The server's clock when the plan was made (Unix ms).
    pub server_time_ms: u64,
    /// The stream's retention (`retention.min_age` or `dead_letter.retention`).
    pub retention: Duration,
    /// `server_time_ms - retention` as a stream ID: nothing at or after it goes.
    pub policy_cutoff: StreamId,
    /// Entries below this ID go: the earliest of the policy cutoff and every group's boundaries.
    pub minid: StreamId,
    pub decided_by: Boundary,
    /// `XLEN` when planned.
    pub length: u64,
    pub first_entry: Option<StreamId>,
    pub groups: Vec<GroupBoundaries>,
    /// Entries below the MINID.
    pub removable: Removable,
    /// Bytes those entries take, estimated from `MEMORY USAGE` in
    /// proportion to their count (`None`: not counted, or MEMORY refused).
    pub bytes_estimate: Option<u64>,
}

impl TrimPlan {
    /// Whether any entry is below the MINID (the stream's first entry is).
    pub fn removes_anything(&self) -> bool {
        self.first_entry.is_some_and(|first| first < self.minid)
    }

    fn from_inventory(
        partition: u16,
        role: StreamRole,
        stream: StreamInventory,
        server_time_ms: u64,
        retention: Duration,
    ) -> TrimPlan {
        let retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        let policy_cutoff = StreamId::at_ms(server_time_ms.saturating_sub(retention_ms));
        let groups: Vec<GroupBoundaries> = stream
            .groups
            .iter()
            .map(|group| GroupBoundaries {
                name: group.name.clone(),
                last_delivered: group.last_delivered,
                lowest_pending: group.lowest_pending.as_ref().map(|head| head.id),
                first_undelivered: group.first_undelivered,
            })
            .collect();
        let (minid, decided_by) = decide(policy_cutoff, &groups);
        let mut plan = TrimPlan {
            partition,
            role,
            key: stream.key,
            server_time_ms,
            retention,
            policy_cutoff,
            minid,
            decided_by,
            length: stream.length,
            first_entry: stream.first_entry,
            groups,
            removable: Removable::Unknown,
            bytes_estimate: None,
        };
        if !plan.removes_anything() {
            plan.removable = Removable::Exact(0);
            plan.bytes_estimate = Some(0);
        }
        plan
    }
}

/// The MINID and what decided it: the earliest of `policy_cutoff` and every
/// group's lowest pending and first undelivered entry. On a tie the policy,
/// then the group listed first, is named.
pub fn decide(policy_cutoff: StreamId, groups: &[GroupBoundaries]) -> (StreamId, Boundary) {
    let mut minid = policy_cutoff;
    let mut decided_by = Boundary::Policy;
    for group in groups {
        if let Some(id) = group.lowest_pending.filter(|id| *id < minid) {
            minid = id;
            decided_by = Boundary::Pending {
                group: group.name.clone(),
                id,
            };
        }
        if let Some(id) = group.first_undelivered.filter(|id| *id < minid) {
            minid = id;
            decided_by = Boundary::Undelivered {
                group: group.name.clone(),
                id,
            };
        }
    }
    (minid, decided_by)
}

/// The server's clock (`TIME`) in Unix ms: stream IDs carry the server's
/// time, so the policy is measured by it, not by this host's clock.
pub async fn server_time_ms<C: ConnectionLike>(conn: &mut C) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .map_err(|err| Error::redis("TIME", err))?;
    Ok(secs * 1000 + micros / 1000)
}

/// Plans the trim of one stream; `None` when it does not exist. With
/// `count_cap` > 0 the entries that would go are counted up to that many
/// (and their bytes estimated); with 0 they are counted only when there
/// are none.
pub async fn plan<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partition: u16,
    role: StreamRole,
    count_cap: u64,
) -> Result<Option<TrimPlan>> {
    let mut plans = plan_streams(conn, config, &[(partition, role)], count_cap).await?;
    Ok(plans.pop().flatten())
}

/// Plans the trim of several streams at once (one `TIME`, one inventory):
/// a plan per target, in order, `None` for a stream that does not exist.
pub async fn plan_streams<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    targets: &[(u16, StreamRole)],
    count_cap: u64,
) -> Result<Vec<Option<TrimPlan>>> {
    let now = server_time_ms(conn).await?;
    let keys: Vec<String> = targets
        .iter()
        .map(|&(partition, role)| role.key(config, partition))
        .collect();
    let streams = inventory(conn, &keys).await?;
    let mut plans: Vec<Option<TrimPlan>> = targets
        .iter()
        .zip(streams)
        .map(|(&(partition, role), stream)| {
            stream.map(|stream| {
                TrimPlan::from_inventory(partition, role, stream, now, role.retention(config))
            })
        })
        .collect();
    if count_cap > 0 {
        count_removable(conn, &mut plans, count_cap).await?;
    }
    Ok(plans)
}

/// Counts, per plan with something to remove, the entries below its MINID
/// up to `cap` (exactly all of them when the whole stream is below it),
/// and estimates their bytes: one pipeline of `XREVRANGE + - COUNT 1`,
/// `XRANGE - (minid COUNT cap` and `MEMORY USAGE` per such stream.
async fn count_removable<C: ConnectionLike>(
    conn: &mut C,
    plans: &mut [Option<TrimPlan>],
    cap: u64,
) -> Result<()> {
    let mut pipe = redis::pipe();
    let mut counted = Vec::new();
    for (index, plan) in plans.iter().enumerate() {
        let Some(plan) = plan.as_ref().filter(|plan| plan.removes_anything()) else {
            continue;
        };
        pipe.cmd("XREVRANGE")
            .arg(&plan.key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1);
        pipe.cmd("XRANGE")
            .arg(&plan.key)
            .arg("-")
            .arg(format!("({}", plan.minid))
            .arg("COUNT")
            .arg(cap);
        pipe.cmd("MEMORY").arg("USAGE").arg(&plan.key);
        counted.push(index);
    }
    if counted.is_empty() {
        return Ok(());
    }
    let answers: Vec<redis::RedisResult<Value>> = pipe
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis("counting the entries below the MINID", err))?;
    let mut answers = answers.into_iter();
    for index in counted {
        let plan = plans[index].as_mut().expect("counted plans exist");
        let key = plan.key.clone();
        let (Some(last), Some(below), Some(memory)) =
            (answers.next(), answers.next(), answers.next())
        else {
            return Err(Error::Operation(OperationError::Inventory {
                key,
                problem: InventoryProblem::ShortReply,
            }));
        };
        let last = last
            .map_err(|err| Error::redis(format!("XREVRANGE {key} + - COUNT 1"), err))
            .and_then(|reply| first_id(&key, reply))?;
        let below = below.map_err(|err| {
            Error::redis(format!("XRANGE {key} - ({} COUNT {cap}", plan.minid), err)
        })?;
        let Value::Array(below) = below else {
            return Err(Error::Operation(OperationError::Inventory {
                key,
                problem: InventoryProblem::Unexpected {
                    command: "XRANGE".to_owned(),
                    found: format!("{below:?}"),
                },
            }));
        };
        let below = below.len() as u64;
        plan.removable = match last {
            Some(last) if last < plan.minid => Removable::Exact(plan.length),
            _ if below < cap => Removable::Exact(below),
            _ => Removable::AtLeast(below),
        };
        // MEMORY may be missing or refused (ACL): then the bytes are unknown.
        plan.bytes_estimate = match (memory, plan.removable) {
            (Ok(Value::Int(bytes)), Removable::Exact(n) | Removable::AtLeast(n))
                if plan.length > 0 =>
            {
                let bytes = u128::from(u64::try_from(bytes).unwrap_or(0));
                u64::try_from(bytes * u128::from(n) / u128::from(plan.length)).ok()
            }
            _ => None,
        };
    }
    Ok(())
}

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
/// only: see [`xtrim_acked_supported`]).
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
        partition: plan.partition,
        job: &job,
        entry: None,
    };
    let (code, detail) = match functions::refusal_of(&err) {
        Some(refusal) => refusal,
        None => {
            return Error::redis(
                format!(
                    "FCALL {function} {} (partition {})",
                    plan.key, plan.partition
                ),
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

/// How [`trim_partition`] trims.
#[derive(Debug, Clone)]
pub struct TrimOptions {
    /// Stored in the lease: who is trimming (see [`lease::unique_holder`]).
    pub holder: String,
    /// Add `ACKED` to `XTRIM` (only where [`xtrim_acked_supported`]).
    pub xtrim_acked: bool,
    /// How long to wait for a lease someone else holds before giving up
    /// with [`OperationError::LeaseHeld`]; zero: do not wait.
    pub lease_wait: Duration,
}

/// One stream of a [`trim_partition`] pass.
#[derive(Debug)]
pub struct StreamTrim {
    pub plan: TrimPlan,
    /// `Ok(None)`: nothing was below the MINID, so nothing was called.
    pub result: Result<Option<Trimmed>>,
}

/// Trims both streams of `partition` under its lease: plans them, applies
/// each plan with something to remove, releases the lease. A stream that
/// does not exist is left out (a dead-letter stream before its first dead
/// letter). Fails as a whole only when the lease cannot be had
/// ([`OperationError::LeaseHeld`]) or the plan cannot be read; one stream's failed
/// apply is in its [`StreamTrim::result`].
pub async fn trim_partition<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partition: u16,
    options: &TrimOptions,
) -> Result<Vec<StreamTrim>> {
    let key = config.trim_lease_key(partition);
    let lease = if options.lease_wait.is_zero() {
        lease::acquire(conn, &config.functions, &key, &options.holder, LEASE_TTL).await?
    } else {
        lease::acquire_waiting(
            conn,
            &config.functions,
            &key,
            &options.holder,
            LEASE_TTL,
            options.lease_wait,
        )
        .await?
    };
    let trimmed = trim_leased(conn, config, partition, &lease, options.xtrim_acked).await;
    // Released whatever happened; if that fails, the lease expires by itself.
    if let Err(err) = lease::release(conn, &config.functions, &lease).await {
        tracing::warn!(lease = lease.key(), error = %err, "releasing the trim lease failed; it expires by itself");
    }
    trimmed
}

async fn trim_leased<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    partition: u16,
    lease: &Lease,
    xtrim_acked: bool,
) -> Result<Vec<StreamTrim>> {
    let targets = StreamRole::BOTH.map(|role| (partition, role));
    let plans = plan_streams(conn, config, &targets, 0).await?;
    let mut streams = Vec::with_capacity(plans.len());
    for plan in plans.into_iter().flatten() {
        let result = if plan.removes_anything() {
            apply(conn, config, &plan, lease, xtrim_acked)
                .await
                .map(Some)
        } else {
            Ok(None)
        };
        streams.push(StreamTrim { plan, result });
    }
    Ok(streams)
}

/// Whether every primary accepts `XTRIM … ACKED` (Redis 8.2 and later): its
/// `COMMAND DOCS XTRIM` lists the `ACKED` token. Asked of each primary,
/// never inferred from a version (Valkey answers `redis_version:7.2.4`
/// whatever it has).
pub async fn xtrim_acked_supported(redis: &crate::connect::Redis) -> Result<bool> {
    crate::connect::every_primary_has_argument(redis, "xtrim", "ACKED").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    fn group(
        name: &str,
        last: u64,
        pending: Option<u64>,
        undelivered: Option<u64>,
    ) -> GroupBoundaries {
        GroupBoundaries {
            name: name.to_owned(),
            last_delivered: id(last),
            lowest_pending: pending.map(id),
            first_undelivered: undelivered.map(id),
        }
    }

    #[test]
    fn the_policy_decides_when_every_group_is_later() {
        let groups = [
            group("a", 90, Some(60), Some(91)),
            group("b", 95, None, None),
        ];
        assert_eq!(decide(id(50), &groups), (id(50), Boundary::Policy));
        assert_eq!(decide(id(50), &[]), (id(50), Boundary::Policy));
    }

    #[test]
    fn the_earliest_group_boundary_decides_and_is_named() {
        let groups = [
            group("fast", 90, None, Some(91)),
            group("stuck", 90, Some(20), Some(91)),
            group("lagging", 30, Some(25), Some(31)),
        ];
        assert_eq!(
            decide(id(50), &groups),
            (
                id(20),
                Boundary::Pending {
                    group: "stuck".into(),
                    id: id(20)
                }
            )
        );
        let groups = [
            group("lagging", 30, None, Some(31)),
            group("b", 60, None, None),
        ];
        let (minid, boundary) = decide(id(50), &groups);
        assert_eq!(minid, id(31));
        assert_eq!(boundary.to_string(), "group lagging undelivered 31-0");
        assert_eq!(boundary.group(), Some("lagging"));
    }

    #[test]
    fn a_group_that_has_read_everything_sets_no_bound() {
        // Nothing after its last-delivered ID exists: only the policy limits.
        let groups = [group("caught-up", 10, None, None)];
        assert_eq!(decide(id(50), &groups), (id(50), Boundary::Policy));
    }

    #[test]
    fn ties_name_the_policy_first() {
        let groups = [group("a", 49, Some(50), Some(50))];
        assert_eq!(decide(id(50), &groups), (id(50), Boundary::Policy));
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
