//! What a trim plan is: the streams of a partition, the boundaries every group sets, and the MINID they decide.

use std::fmt;
use std::time::Duration;

use crate::config::QueueConfig;
use crate::inventory::StreamInventory;
use crate::stream_id::StreamId;
use crate::stream_slot::StreamSlot;

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
    pub fn key(self, config: &QueueConfig, stream: StreamSlot) -> String {
        match self {
            StreamRole::Ready => config.ready_key(stream),
            StreamRole::Dead => config.dead_key(stream),
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
    /// The stream (lane and partition) whose ready or dead-letter stream this is.
    pub stream: StreamSlot,
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

    pub(super) fn from_inventory(
        slot: StreamSlot,
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
            stream: slot,
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
pub(crate) fn decide(policy_cutoff: StreamId, groups: &[GroupBoundaries]) -> (StreamId, Boundary) {
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
}
