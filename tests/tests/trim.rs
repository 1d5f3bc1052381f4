//! The trimmer against real redis-servers: a seeded property test of the
//! MINID procedure, aborts when the groups change between plan and apply,
//! the lease, dead-letter retention, and a worker's own trim loop.
//!
//! Entries are added with explicit IDs in the past (`XADD key <ms>-0`), so
//! "older than the policy" holds without waiting.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::{OperationError, TransitionError};
use queuegen_runtime::lease::{self, Lease};
use queuegen_runtime::stream_id::StreamId;
use queuegen_runtime::transitions::TransitionCode;
use queuegen_runtime::trim::{self, Boundary, Removable, StreamRole, TrimOptions};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Error, Handler, JobContext, JobError, Outcome, QueueConfig, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{capture_logs, init_tracing, unique_prefix, wait_until};
use queuegen_tests::{library, RedisServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;

const HOUR_MS: u64 = 3_600_000;
const MINUTE_MS: u64 = 60_000;

/// A one-partition queue keeping ready entries and dead letters for an hour.
fn hour_config(name: &str) -> QueueConfig {
    {
        let mut config = test_config(&unique_prefix(name), 1);
        config.retention.min_age = Duration::from_millis(HOUR_MS);
        config.dead_letter.retention = Duration::from_millis(HOUR_MS);
        config
    }
}

struct Setup {
    _server: RedisServer,
    redis: Redis,
    conn: MultiplexedConnection,
    /// The server's clock when the test began, Unix ms.
    now: u64,
}

async fn setup() -> Setup {
    init_tracing();
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let now = trim::server_time_ms(&mut conn).await.unwrap();
    Setup {
        _server: server,
        redis,
        conn,
        now,
    }
}

async fn xadd(conn: &mut MultiplexedConnection, key: &str, id: StreamId) {
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg(id.to_string())
        .arg("n")
        .arg(id.ms)
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XADD {key} {id}: {err}"));
}

/// Takes partition 0's trim lease for `holder` (it must be free).
async fn take_lease(conn: &mut MultiplexedConnection, config: &QueueConfig, holder: &str) -> Lease {
    lease::acquire(
        conn,
        &config.functions,
        &config.trim_lease_key(StreamSlot::new(0)),
        holder,
        trim::LEASE_TTL,
    )
    .await
    .unwrap_or_else(|err| panic!("taking the lease for {holder}: {err}"))
}

async fn xlen(conn: &mut MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("XLEN").arg(key).query_async(conn).await.unwrap()
}

async fn ids(conn: &mut MultiplexedConnection, key: &str) -> Vec<StreamId> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap();
    reply.ids.iter().map(|e| e.id.parse().unwrap()).collect()
}

async fn stored(conn: &mut MultiplexedConnection, key: &str, id: StreamId) -> bool {
    let id = id.to_string();
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg(&id)
        .arg(&id)
        .query_async(conn)
        .await
        .unwrap();
    !reply.ids.is_empty()
}

async fn group_create(conn: &mut MultiplexedConnection, key: &str, group: &str, start: &str) {
    let () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg(start)
        .arg("MKSTREAM")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XGROUP CREATE {key} {group} {start}: {err}"));
}

/// Reads up to `count` new entries of `key` as `consumer` of `group`; their IDs.
async fn read(
    conn: &mut MultiplexedConnection,
    key: &str,
    group: &str,
    consumer: &str,
    count: usize,
) -> Vec<StreamId> {
    let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XREADGROUP {key} {group}: {err}"));
    reply
        .map(|reply| {
            reply
                .keys
                .into_iter()
                .flat_map(|k| k.ids)
                .map(|e| e.id.parse().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// Every pending ID of `group` on `key`, lowest first.
async fn pending_ids(conn: &mut MultiplexedConnection, key: &str, group: &str) -> Vec<StreamId> {
    queuegen_tests::support::pending_entries(conn, key, group)
        .await
        .into_iter()
        .map(|p| p.id.parse().unwrap())
        .collect()
}

fn options(holder: &str) -> TrimOptions {
    TrimOptions {
        holder: holder.to_owned(),
        xtrim_acked: false,
        lease_wait: Duration::ZERO,
    }
}

// ---------------------------------------------------------------------------
// The property test.

/// What the test believes one group's state is.
#[derive(Debug, Clone, Default)]
struct GroupModel {
    last_delivered: StreamId,
    /// Pending ID -> owner.
    pending: BTreeMap<StreamId, String>,
}

/// The test's own model of the stream, to predict every trim exactly.
#[derive(Debug, Default)]
struct Model {
    entries: BTreeSet<StreamId>,
    groups: BTreeMap<&'static str, GroupModel>,
}

impl Model {
    fn first_undelivered(&self, group: &str) -> Option<StreamId> {
        let last = self.groups[group].last_delivered;
        self.entries
            .range((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded))
            .next()
            .copied()
    }

    /// The MINID the procedure must choose, and the kind and group of what
    /// decides it: policy first, then groups by name (XINFO's order),
    /// replaced only by a strictly earlier boundary.
    fn expected_minid(&self, policy: StreamId) -> (StreamId, &'static str, Option<&'static str>) {
        let mut best = (policy, "policy", None);
        for (&name, group) in &self.groups {
            if let Some((&head, _)) = group.pending.first_key_value() {
                if head < best.0 {
                    best = (head, "pending", Some(name));
                }
            }
            if let Some(next) = self.first_undelivered(name) {
                if next < best.0 {
                    best = (next, "undelivered", Some(name));
                }
            }
        }
        best
    }
}

/// The three groups: one keeping up, one lagging far behind, one holding an
/// entry pending for a long time (older than the policy).
const FAST: &str = "fast";
const LAGGING: &str = "lagging";
const STUCK: &str = "stuck";
const CONSUMERS: [&str; 3] = ["c1", "c2", "c3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trims_never_remove_what_a_group_needs_and_reclaim_exactly_the_rest() {
    let mut setup = setup().await;
    let base_seed: u64 = std::env::var("TRIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7121_0010);
    let rounds: u64 = if std::env::var("TRIM_SEED").is_ok() {
        1
    } else {
        16
    };
    let mut reclaimed_total = 0;
    let mut trims_total = 0;
    let mut decided: BTreeSet<&str> = BTreeSet::new();
    for round in 0..rounds {
        let seed = base_seed + round;
        let (trims, reclaimed, kinds) = property_round(&mut setup, seed).await;
        trims_total += trims;
        reclaimed_total += reclaimed;
        decided.extend(kinds);
    }
    // The rounds did exercise what they claim to: trims that removed
    // entries, decided by each kind of boundary.
    assert!(trims_total >= rounds * 5, "{trims_total} trims");
    assert!(reclaimed_total > 0, "no trim reclaimed anything");
    assert_eq!(
        decided,
        BTreeSet::from(["pending", "policy", "undelivered"]),
        "every kind of boundary decided some trim"
    );
}

/// One seeded round on a fresh stream: (trims, entries reclaimed, kinds of
/// boundary that decided a trim which removed something).
async fn property_round(setup: &mut Setup, seed: u64) -> (u64, u64, BTreeSet<&'static str>) {
    let conn = &mut setup.conn;
    let config = hour_config(&format!("prop-{seed}"));
    let key = config.ready_key(StreamSlot::new(0));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::default();
    for group in [FAST, LAGGING, STUCK] {
        group_create(conn, &key, group, "0").await;
        model.groups.insert(group, GroupModel::default());
    }
    // IDs from 100 minutes ago, 40 s apart: the first ~60 entries are older
    // than the one-hour policy, later ones younger.
    let mut next_ms = setup.now - 100 * MINUTE_MS;
    let (mut trims, mut reclaimed, mut kinds) = (0, 0, BTreeSet::new());
    for step in 0..160 {
        let ctx = format!("seed {seed} (rerun with TRIM_SEED={seed}), step {step}");
        let roll = rng.random_range(0..100);
        if roll < 30 {
            for _ in 0..rng.random_range(1..=4) {
                let id = StreamId::new(next_ms, 0);
                next_ms += 40_000;
                xadd(conn, &key, id).await;
                model.entries.insert(id);
            }
        } else if roll < 60 {
            // The fast group reads most, the stuck one sometimes, the lagging one rarely.
            let group = match rng.random_range(0..100) {
                0..60 => FAST,
                60..88 => STUCK,
                _ => LAGGING,
            };
            let consumer = CONSUMERS[rng.random_range(0..CONSUMERS.len())];
            // Now and then the lagging group catches up a long way.
            let count = if group == LAGGING && rng.random_bool(0.2) {
                40
            } else {
                rng.random_range(1..=4)
            };
            let got = read(conn, &key, group, consumer, count).await;
            let expected: Vec<StreamId> = {
                let last = model.groups[group].last_delivered;
                model
                    .entries
                    .range((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded))
                    .take(count)
                    .copied()
                    .collect()
            };
            assert_eq!(got, expected, "{ctx}: {group} read");
            let state = model.groups.get_mut(group).unwrap();
            for id in got {
                state.pending.insert(id, consumer.to_owned());
                state.last_delivered = id;
            }
        } else if roll < 82 {
            let group = [FAST, LAGGING, STUCK][rng.random_range(0..3)];
            let state = model.groups.get_mut(group).unwrap();
            let lowest = state.pending.keys().next().copied();
            let mut acked = Vec::new();
            for &id in state.pending.keys() {
                // The stuck group keeps its oldest entry pending, mostly.
                let keep = group == STUCK && Some(id) == lowest && !rng.random_bool(0.04);
                if !keep && rng.random_bool(0.8) {
                    acked.push(id);
                }
            }
            if !acked.is_empty() {
                let n: u64 = redis::cmd("XACK")
                    .arg(&key)
                    .arg(group)
                    .arg(acked.iter().map(ToString::to_string).collect::<Vec<_>>())
                    .query_async(conn)
                    .await
                    .unwrap();
                assert_eq!(n, acked.len() as u64, "{ctx}: XACK {group}");
                for id in &acked {
                    state.pending.remove(id);
                }
            }
        } else if roll < 90 {
            // A claim moves a pending entry to another consumer (a recovery).
            let group = [FAST, LAGGING, STUCK][rng.random_range(0..3)];
            let state = model.groups.get_mut(group).unwrap();
            if let Some(&id) = state
                .pending
                .keys()
                .nth(rng.random_range(0..state.pending.len().max(1)))
            {
                let to = CONSUMERS[rng.random_range(0..CONSUMERS.len())];
                let claimed: redis::streams::StreamClaimReply = redis::cmd("XCLAIM")
                    .arg(&key)
                    .arg(group)
                    .arg(to)
                    .arg(0)
                    .arg(id.to_string())
                    .query_async(conn)
                    .await
                    .unwrap();
                assert_eq!(
                    claimed.ids.len(),
                    1,
                    "{ctx}: {group} claims {id} with its payload"
                );
                state.pending.insert(id, to.to_owned());
            }
        } else {
            let (removed, kind) = trim_and_check(conn, &config, &key, &mut model, &ctx).await;
            trims += 1;
            reclaimed += removed;
            if removed > 0 {
                kinds.insert(kind);
            }
        }
    }
    // Last, every group catches up and acknowledges everything: the policy
    // alone decides, and all history older than it goes.
    for group in [FAST, LAGGING, STUCK] {
        let got = read(conn, &key, group, "c1", 10_000).await;
        let state = model.groups.get_mut(group).unwrap();
        if let Some(&last) = got.last() {
            state.last_delivered = last;
        }
        let pending: Vec<String> = state
            .pending
            .keys()
            .chain(&got)
            .map(ToString::to_string)
            .collect();
        if !pending.is_empty() {
            let _: u64 = redis::cmd("XACK")
                .arg(&key)
                .arg(group)
                .arg(&pending)
                .query_async(conn)
                .await
                .unwrap();
        }
        state.pending.clear();
    }
    let ctx = format!("seed {seed} (rerun with TRIM_SEED={seed}), final trim");
    let (removed, kind) = trim_and_check(conn, &config, &key, &mut model, &ctx).await;
    assert_eq!(kind, "policy", "{ctx}");
    let cutoff = StreamId::at_ms(setup.now - 60 * MINUTE_MS);
    assert!(
        model.entries.iter().all(|id| *id >= cutoff),
        "{ctx}: history older than the policy is left: {:?}",
        model.entries.first()
    );
    if removed > 0 {
        kinds.insert(kind);
    }
    (trims + 1, reclaimed + removed, kinds)
}

/// Plans and applies one trim under the lease and checks it against the
/// model: the exact MINID and its boundary, the exact entries removed, and
/// that every pending entry and every group's next undelivered entry stays.
async fn trim_and_check(
    conn: &mut MultiplexedConnection,
    config: &QueueConfig,
    key: &str,
    model: &mut Model,
    ctx: &str,
) -> (u64, &'static str) {
    let lease = take_lease(conn, config, "property-test").await;
    let plan = trim::plan(conn, config, StreamSlot::new(0), StreamRole::Ready, 10_000)
        .await
        .unwrap()
        .unwrap();
    let (minid, kind, group) = model.expected_minid(plan.policy_cutoff);
    assert_eq!(plan.minid, minid, "{ctx}: MINID");
    assert_eq!(plan.decided_by.kind(), kind, "{ctx}: {:?}", plan.decided_by);
    assert_eq!(plan.decided_by.group(), group, "{ctx}");
    let doomed: Vec<StreamId> = model.entries.range(..minid).copied().collect();
    assert_eq!(
        plan.removable,
        Removable::Exact(doomed.len() as u64),
        "{ctx}: entries that would go"
    );
    let next_undelivered: Vec<(&str, StreamId)> = model
        .groups
        .keys()
        .filter_map(|&name| model.first_undelivered(name).map(|id| (name, id)))
        .collect();
    let before = xlen(conn, key).await;

    let trimmed = trim::apply(conn, config, &plan, &lease, false)
        .await
        .unwrap_or_else(|err| panic!("{ctx}: apply: {err}"));
    assert!(lease::release(conn, &config.functions, &lease)
        .await
        .unwrap());
    assert_eq!(trimmed.removed, doomed.len() as u64, "{ctx}: removed");
    for id in &doomed {
        model.entries.remove(id);
    }
    let after = xlen(conn, key).await;
    assert_eq!(
        after,
        model.entries.len() as u64,
        "{ctx}: XLEN after the trim"
    );
    assert_eq!(before - after, doomed.len() as u64, "{ctx}: XLEN dropped");
    assert_eq!(
        ids(conn, key).await,
        model.entries.iter().copied().collect::<Vec<_>>(),
        "{ctx}: the entries left"
    );

    // Every pending entry of every group still has its payload…
    for (&name, state) in &model.groups {
        let pending = pending_ids(conn, key, name).await;
        assert_eq!(
            pending,
            state.pending.keys().copied().collect::<Vec<_>>(),
            "{ctx}: pending of {name}"
        );
        for id in pending {
            assert!(
                stored(conn, key, id).await,
                "{ctx}: {name}'s pending {id} lost its payload"
            );
        }
    }
    // …and every group's next undelivered entry still exists.
    for (name, id) in next_undelivered {
        assert!(
            stored(conn, key, id).await,
            "{ctx}: {name}'s next undelivered {id} is gone"
        );
    }
    (trimmed.removed, kind)
}

// ---------------------------------------------------------------------------
// Aborts between plan and apply.

/// A stream of `old` entries from two hours ago, read and acknowledged by
/// group `a`: every entry is older than the policy and needed by no one.
async fn stale_stream(conn: &mut MultiplexedConnection, key: &str, now: u64, old: u64) {
    for n in 0..old {
        xadd(conn, key, StreamId::new(now - 2 * HOUR_MS + n, 0)).await;
    }
    group_create(conn, key, "a", "$").await;
}

#[tokio::test]
async fn a_group_created_between_plan_and_apply_aborts_with_nothing_removed() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("created");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 12).await;

    let lease = take_lease(conn, &config, "me").await;
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plan.removable, Removable::Exact(12));
    assert_eq!(plan.decided_by, Boundary::Policy);
    // A new group that reads from the start needs every entry.
    group_create(conn, &key, "late", "0").await;

    let err = trim::apply(conn, &config, &plan, &lease, false)
        .await
        .unwrap_err();
    match &err {
        Error::Operation(OperationError::TrimAborted {
            key: aborted,
            group,
            change,
        }) => {
            assert_eq!(aborted, &key);
            assert_eq!(group, "late");
            assert!(change.contains("created"), "{change}");
        }
        other => panic!("expected TrimAborted, got {other:?}"),
    }
    assert!(err.to_string().contains(&key), "{err}");
    assert_eq!(xlen(conn, &key).await, 12, "nothing removed");

    // Planned again, the new group's first undelivered entry protects everything.
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plan.decided_by.kind(), "undelivered");
    assert_eq!(plan.decided_by.group(), Some("late"));
    assert_eq!(plan.removable, Removable::Exact(0));
}

#[tokio::test]
async fn a_group_removed_between_plan_and_apply_aborts_too() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("removed");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 5).await;
    let lease = take_lease(conn, &config, "me").await;
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 100)
        .await
        .unwrap()
        .unwrap();
    let _: u64 = redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg(&key)
        .arg("a")
        .query_async(conn)
        .await
        .unwrap();
    let err = trim::apply(conn, &config, &plan, &lease, false)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Operation(OperationError::TrimAborted { group, change, .. }) if group == "a" && change.contains("removed")),
        "{err:?}"
    );
    assert_eq!(xlen(conn, &key).await, 5, "nothing removed");
}

#[tokio::test]
async fn setid_backwards_between_plan_and_apply_aborts_with_nothing_removed() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("setid");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 8).await;
    let lease = take_lease(conn, &config, "me").await;
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plan.removable, Removable::Exact(8));
    // An operator rewinds the group to replay everything.
    let () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg(&key)
        .arg("a")
        .arg("0")
        .query_async(conn)
        .await
        .unwrap();

    let err = trim::apply(conn, &config, &plan, &lease, false)
        .await
        .unwrap_err();
    match &err {
        Error::Operation(OperationError::TrimAborted { group, change, .. }) => {
            assert_eq!(group, "a");
            assert!(
                change.contains("moved back") && change.contains("SETID"),
                "{change}"
            );
        }
        other => panic!("expected TrimAborted, got {other:?}"),
    }
    assert_eq!(xlen(conn, &key).await, 8, "nothing removed");
}

#[tokio::test]
async fn the_function_refuses_a_minid_younger_than_the_policy() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("policy");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 3).await;
    xadd(conn, &key, StreamId::new(setup.now - MINUTE_MS, 0)).await;
    let lease = take_lease(conn, &config, "me").await;
    let mut plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plan.removable, Removable::Exact(3));
    // A caller with a clock far ahead asks for everything up to now.
    plan.minid = StreamId::at_ms(setup.now);
    let err = trim::apply(conn, &config, &plan, &lease, false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Transition(TransitionError::Refused {
                code: TransitionCode::BadArg,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("policy cutoff"), "{err}");
    assert_eq!(xlen(conn, &key).await, 4, "nothing removed");
}

// ---------------------------------------------------------------------------
// The lease.

#[tokio::test]
async fn a_second_trimmer_gets_lease_held_and_removes_nothing() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("lease");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 10).await;

    let first = take_lease(conn, &config, "first").await;
    let err = trim::trim_partition(conn, &config, StreamSlot::new(0), &options("second"))
        .await
        .unwrap_err();
    match &err {
        Error::Operation(OperationError::LeaseHeld {
            key: lease_key,
            holder,
        }) => {
            assert_eq!(lease_key, &config.trim_lease_key(StreamSlot::new(0)));
            assert_eq!(holder, "first");
        }
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    assert_eq!(xlen(conn, &key).await, 10, "the loser removed nothing");

    // The winner trims, and only its own release frees the lease.
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 0)
        .await
        .unwrap()
        .unwrap();
    let trimmed = trim::apply(conn, &config, &plan, &first, false)
        .await
        .unwrap();
    assert_eq!(trimmed.removed, 10);
    let stolen = lease::acquire(
        conn,
        &config.functions,
        &config.trim_lease_key(StreamSlot::new(0)),
        "second",
        trim::LEASE_TTL,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(stolen, Error::Operation(OperationError::LeaseHeld { .. })),
        "{stolen:?}"
    );
    assert!(lease::release(conn, &config.functions, &first)
        .await
        .unwrap());
    assert!(
        !lease::release(conn, &config.functions, &first)
            .await
            .unwrap(),
        "a released lease is not released twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_trimmers_at_once_never_both_trim() {
    let setup = setup().await;
    let config = hour_config("race");
    let key = config.ready_key(StreamSlot::new(0));
    let mut conn = setup.conn.clone();
    stale_stream(&mut conn, &key, setup.now, 40).await;
    for round in 0..10 {
        // Fresh old entries for each round (the group has read them all).
        for n in 0..40 {
            xadd(
                &mut conn,
                &key,
                StreamId::new(setup.now - HOUR_MS - 1_000 + round * 40 + n, 0),
            )
            .await;
        }
        let _: redis::Value = redis::cmd("XGROUP")
            .arg("SETID")
            .arg(&key)
            .arg("a")
            .arg("$")
            .query_async(&mut conn)
            .await
            .unwrap();
        let (mut one, mut two) = (setup.redis.shared(), setup.redis.shared());
        let (one_options, two_options) = (options("one"), options("two"));
        let (a, b) = tokio::join!(
            trim::trim_partition(&mut one, &config, StreamSlot::new(0), &one_options),
            trim::trim_partition(&mut two, &config, StreamSlot::new(0), &two_options),
        );
        let mut removed = 0;
        let mut won = 0;
        for result in [a, b] {
            match result {
                Ok(streams) => {
                    won += 1;
                    for stream in streams {
                        removed += stream.result.unwrap().map_or(0, |t| t.removed);
                    }
                }
                Err(Error::Operation(OperationError::LeaseHeld { holder, .. })) => {
                    assert!(holder == "one" || holder == "two", "{holder}");
                }
                Err(other) => panic!("round {round}: {other:?}"),
            }
        }
        assert!(won >= 1, "round {round}: someone trimmed");
        let expected = if round == 0 { 80 } else { 40 };
        assert_eq!(removed, expected, "round {round}: removed once, not twice");
        assert_eq!(xlen(&mut conn, &key).await, 0, "round {round}");
    }
}

#[tokio::test]
async fn a_trimmer_whose_lease_expired_removes_nothing() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let config = hour_config("expired");
    let key = config.ready_key(StreamSlot::new(0));
    stale_stream(conn, &key, setup.now, 6).await;
    let slow = lease::acquire(
        conn,
        &config.functions,
        &config.trim_lease_key(StreamSlot::new(0)),
        "slow",
        Duration::from_millis(50),
    )
    .await
    .unwrap();
    let plan = trim::plan(conn, &config, StreamSlot::new(0), StreamRole::Ready, 0)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let _next = take_lease(conn, &config, "next").await;
    let err = trim::apply(conn, &config, &plan, &slow, false)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Operation(OperationError::LeaseHeld { holder, .. }) if holder == "next"),
        "{err:?}"
    );
    assert_eq!(xlen(conn, &key).await, 6, "nothing removed");
    assert!(
        !lease::release(conn, &config.functions, &slow)
            .await
            .unwrap(),
        "the slow trimmer cannot release the next holder's lease"
    );
}

#[tokio::test]
async fn ensure_groups_takes_the_lease_and_leaves_none_behind() {
    let setup = setup().await;
    let config = QueueConfig {
        partitions: 3,
        ..hour_config("apply-lease")
    };
    let mut conn = setup.conn.clone();
    // A trimmer holds partition 1 for a moment: ensure_groups waits for it.
    let _held = lease::acquire(
        &mut conn,
        &config.functions,
        &config.trim_lease_key(StreamSlot::new(1)),
        "trimmer",
        Duration::from_millis(200),
    )
    .await
    .unwrap();
    let setups = ensure_groups(&setup.redis, &config).await.unwrap();
    assert!(setups.iter().all(|s| s.created), "{setups:?}");
    let leases: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*lease*", config.key_prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(leases.is_empty(), "no lease left behind: {leases:?}");

    // Without the library loaded there is no compare-and-delete (no role may
    // send a script of its own): each lease is left to expire with its short
    // TTL. No trimmer can run without the library's `trim` meanwhile.
    let bare = RedisServer::start();
    let bare_redis = Redis::connect(bare.url()).await.unwrap();
    ensure_groups(&bare_redis, &config).await.unwrap();
    let mut bare_conn = bare
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut bare_conn)
        .await
        .unwrap();
    keys.sort();
    let (leases, streams): (Vec<String>, Vec<String>) = keys
        .into_iter()
        .partition(|key| key.ends_with(":lease:trim"));
    assert_eq!(streams.len(), 3, "the three streams: {streams:?}");
    for lease in &leases {
        let ttl_ms: i64 = redis::cmd("PTTL")
            .arg(lease)
            .query_async(&mut bare_conn)
            .await
            .unwrap();
        assert!(
            ttl_ms > 0 && ttl_ms <= 10_000,
            "{lease} expires within the group lease's 10 s: PTTL {ttl_ms}"
        );
    }
}

// ---------------------------------------------------------------------------
// Dead letters and the worker's loop.

#[tokio::test]
async fn dead_letters_older_than_their_retention_are_trimmed_younger_ones_kept() {
    let mut setup = setup().await;
    let conn = &mut setup.conn;
    let mut config = hour_config("dead");
    // Ready entries are kept far longer: only the dead letters' own
    // retention may decide.
    config.retention.min_age = Duration::from_millis(48 * HOUR_MS);
    ensure_groups(&setup.redis, &config).await.unwrap();
    let dead = config.dead_key(StreamSlot::new(0));
    let old: Vec<StreamId> = (0..3)
        .map(|n| StreamId::new(setup.now - 2 * HOUR_MS + n, 0))
        .collect();
    let young: Vec<StreamId> = (0..2)
        .map(|n| StreamId::new(setup.now - 30 * MINUTE_MS + n, 0))
        .collect();
    for &id in old.iter().chain(&young) {
        xadd(conn, &dead, id).await;
    }
    xadd(
        conn,
        &config.ready_key(StreamSlot::new(0)),
        StreamId::new(setup.now - 2 * HOUR_MS, 0),
    )
    .await;

    let streams = trim::trim_partition(conn, &config, StreamSlot::new(0), &options("dead-test"))
        .await
        .unwrap();
    let dead_trim = streams
        .iter()
        .find(|s| s.plan.role == StreamRole::Dead)
        .unwrap();
    assert_eq!(dead_trim.plan.decided_by, Boundary::Policy);
    assert_eq!(
        dead_trim.plan.retention,
        Duration::from_millis(HOUR_MS),
        "dead_letter.retention"
    );
    let removed = dead_trim.result.as_ref().unwrap().as_ref().unwrap().removed;
    assert_eq!(removed, 3);
    assert_eq!(
        ids(conn, &dead).await,
        young,
        "the younger dead letters stay"
    );
    // The ready stream's two-hour-old entry is undelivered and younger than 48h.
    let ready_trim = streams
        .iter()
        .find(|s| s.plan.role == StreamRole::Ready)
        .unwrap();
    assert!(ready_trim.result.as_ref().unwrap().is_none());
    assert_eq!(xlen(conn, &config.ready_key(StreamSlot::new(0))).await, 1);
}

/// A server past `maxmemory` (noeviction) refuses every write, a producer's
/// XADD and a plain lease SET included; the trim (lease, function, release)
/// still runs, frees the dead letters older than their retention, and the
/// server takes writes again.
#[tokio::test]
async fn a_full_server_is_trimmed_and_takes_writes_again() {
    init_tracing();
    let server = RedisServer::start_with(&["--maxmemory", "3mb"]);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let conn = &mut conn;
    let now = trim::server_time_ms(conn).await.unwrap();
    let config = hour_config("full");
    ensure_groups(&redis, &config).await.unwrap();

    // Fill the dead-letter stream with old entries until the server is full.
    let dead = config.dead_key(StreamSlot::new(0));
    let payload = "x".repeat(1024);
    let mut added: u64 = 0;
    let refusal = loop {
        let mut pipe = redis::pipe();
        for n in 0..100 {
            let id = StreamId::new(now - 2 * HOUR_MS + added + n, 0);
            pipe.cmd("XADD")
                .arg(&dead)
                .arg(id.to_string())
                .arg("payload")
                .arg(&payload);
        }
        match pipe.query_async::<Vec<String>>(conn).await {
            Ok(ids) => added += ids.len() as u64,
            Err(err) => break err,
        }
        assert!(added < 100_000, "3mb never filled");
    };
    assert!(refusal.to_string().contains("OOM"), "{refusal}");
    // The refused pipeline's own query buffer (100 KiB) may be what held
    // the server past the limit: top up with entries as small as the
    // producer's write below until one of them is refused too.
    // (After the IDs the refused pipeline may have added in part.)
    let mut topped = 0;
    loop {
        let id = StreamId::new(now - 2 * HOUR_MS + 200_000 + topped, 0);
        let one: redis::RedisResult<String> = redis::cmd("XADD")
            .arg(&dead)
            .arg(id.to_string())
            .arg("payload")
            .arg("x")
            .query_async(conn)
            .await;
        match one {
            Ok(_) => topped += 1,
            Err(err) => {
                assert_eq!(err.code(), Some("OOM"), "{err}");
                break;
            }
        }
        assert!(topped < 100_000, "3mb never filled");
    }
    let producer_write: redis::RedisResult<String> = redis::cmd("XADD")
        .arg(config.ready_key(StreamSlot::new(0)))
        .arg("*")
        .arg("job_id")
        .arg("refused")
        .query_async(conn)
        .await;
    assert_eq!(producer_write.unwrap_err().code(), Some("OOM"));
    let stored = xlen(conn, &dead).await;
    assert!(stored > 500, "{stored} entries filled 3mb");
    let set: redis::RedisResult<()> = redis::cmd("SET")
        .arg("unrelated")
        .arg("1")
        .query_async(conn)
        .await;
    assert_eq!(set.unwrap_err().code(), Some("OOM"));

    let streams = trim::trim_partition(conn, &config, StreamSlot::new(0), &options("full-test"))
        .await
        .unwrap();
    let dead_trim = streams
        .iter()
        .find(|s| s.plan.role == StreamRole::Dead)
        .unwrap();
    let removed = dead_trim.result.as_ref().unwrap().as_ref().unwrap().removed;
    assert_eq!(removed, stored, "every dead letter is older than an hour");
    assert_eq!(xlen(conn, &dead).await, 0);
    let lease_left: bool = redis::cmd("EXISTS")
        .arg(config.trim_lease_key(StreamSlot::new(0)))
        .query_async(conn)
        .await
        .unwrap();
    assert!(!lease_left, "the lease was released");

    let _: String = redis::cmd("XADD")
        .arg(config.ready_key(StreamSlot::new(0)))
        .arg("*")
        .arg("job_id")
        .arg("after-trim")
        .query_async(conn)
        .await
        .expect("the trimmed server takes writes again");
}

struct Done;

impl Handler<TestJob> for Done {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        Ok(Outcome::Done)
    }
}

/// XADDs job `old-n` (a valid `TestJob`) to `partition` with the explicit ID `ms-0`.
async fn add_old_job(
    conn: &mut MultiplexedConnection,
    config: &QueueConfig,
    partition: StreamSlot,
    ms: u64,
    n: u64,
) {
    let _: String = redis::cmd("XADD")
        .arg(config.ready_key(partition))
        .arg(StreamId::new(ms, 0).to_string())
        .arg(&[
            ("job_id", format!("old-{n}")),
            ("type", "TestJob".into()),
            ("tenant", "acme".into()),
            ("schema", "2".into()),
            ("created_at", "2026-12-02T11:51:41.123Z".into()),
            ("trace_id", "0af7651916cd43dd8448eb211c80319c".into()),
            ("attempt", "1".into()),
            ("subject_ref", format!("doc-{n}")),
        ])
        .query_async(conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_workers_own_trim_loop_trims_what_it_has_done() {
    let (logs, _guard) = capture_logs();
    let mut setup = setup().await;
    let config = {
        let mut config = hour_config("worker");
        config.partitions = 2;
        config.retention.trim_every = Duration::from_millis(100);
        config
    };
    ensure_groups(&setup.redis, &config).await.unwrap();
    let conn = &mut setup.conn;
    // Jobs published two hours ago (explicit IDs), and old and new dead letters.
    const JOBS: u64 = 9;
    for n in 0..JOBS {
        let partition = StreamSlot::new((n % 2) as u16);
        add_old_job(conn, &config, partition, setup.now - 2 * HOUR_MS + n, n).await;
    }
    xadd(
        conn,
        &config.dead_key(StreamSlot::new(1)),
        StreamId::new(setup.now - 3 * HOUR_MS, 0),
    )
    .await;
    xadd(
        conn,
        &config.dead_key(StreamSlot::new(1)),
        StreamId::new(setup.now - MINUTE_MS, 0),
    )
    .await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut registry = queuegen_runtime::metrics::Registry::default();
    let worker = Worker::new(&setup.redis, config.clone(), Done).metrics(&mut registry);
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let mut watch = conn.clone();
    let keys = [
        config.ready_key(StreamSlot::new(0)),
        config.ready_key(StreamSlot::new(1)),
        config.dead_key(StreamSlot::new(1)),
    ];
    wait_until(
        Duration::from_secs(20),
        "the worker trimmed its partitions",
        || {
            let mut watch = watch.clone();
            let keys = keys.clone();
            async move {
                let mut lengths = Vec::new();
                for key in &keys {
                    lengths.push(xlen(&mut watch, key).await);
                }
                lengths == [0, 0, 1]
            }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, JOBS, "{report:?}");
    assert_eq!(report.trimmed, JOBS + 1, "{report:?}");
    assert_eq!(report.trim_aborts, 0, "{report:?}");
    assert_eq!(
        ids(&mut watch, &config.dead_key(StreamSlot::new(1))).await,
        [StreamId::new(setup.now - MINUTE_MS, 0)]
    );
    let trimmed_lines =
        logs.lines_with(&["trimmed", &config.ready_key(StreamSlot::new(0)), "entries="]);
    assert!(!trimmed_lines.is_empty(), "{}", logs.text());

    // The trim metrics say the same, by partition and stream.
    let mut text = String::new();
    queuegen_runtime::metrics::prometheus_client::encoding::text::encode(&mut text, &registry)
        .unwrap();
    let scraped = queuegen_tests::exposition::parse(&text).unwrap();
    let removed = |partition: &str, stream: &str| {
        scraped.sum(
            "queuegen_trim_removed_entries_total",
            &[("partition", partition), ("stream", stream)],
        )
    };
    assert_eq!(removed("0", "ready"), 5.0, "{text}");
    assert_eq!(removed("1", "ready"), 4.0, "{text}");
    assert_eq!(removed("1", "dead"), 1.0, "{text}");
    assert_eq!(removed("0", "dead"), 0.0, "{text}");
    assert_eq!(
        scraped.sum(
            "queuegen_trim_passes_total",
            &[("outcome", "trimmed"), ("stream", "ready")]
        ),
        2.0,
        "one trimming pass per partition's ready stream: {text}"
    );
    assert_eq!(
        scraped.sum("queuegen_trim_passes_total", &[("outcome", "aborted")]),
        0.0
    );
}

/// Counts the jobs it finished.
struct Counting(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Handler<TestJob> for Counting {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Outcome::Done)
    }
}

/// `retention.trim: cronjob`: workers run no trim loop, so the CronJob's
/// `queuegen trim` is the only trimmer; what they leave is still trimmable.
#[tokio::test]
async fn a_worker_leaves_trimming_to_the_cronjob_when_trim_is_not_in_process() {
    let mut setup = setup().await;
    let config = {
        let mut config = hour_config("cronjob");
        config.retention.trim_every = Duration::from_millis(50);
        config.retention.trim_in_process = false;
        config
    };
    ensure_groups(&setup.redis, &config).await.unwrap();
    let conn = &mut setup.conn;
    const JOBS: u64 = 5;
    for n in 0..JOBS {
        add_old_job(
            conn,
            &config,
            StreamSlot::new(0),
            setup.now - 2 * HOUR_MS + n,
            n,
        )
        .await;
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(&setup.redis, config.clone(), Counting(done.clone()));
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    wait_until(Duration::from_secs(20), "the worker did every job", || {
        let done = done.clone();
        async move { done.load(std::sync::atomic::Ordering::SeqCst) == JOBS }
    })
    .await;
    // Twenty trim periods: an in-process trimmer would have emptied the stream.
    tokio::time::sleep(config.retention.trim_every * 20).await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, JOBS, "{report:?}");
    assert_eq!(report.trimmed, 0, "{report:?}");
    assert_eq!(
        xlen(conn, &config.ready_key(StreamSlot::new(0))).await,
        JOBS
    );

    // What the CronJob runs (`queuegen trim`) trims them.
    let streams = trim::trim_partition(conn, &config, StreamSlot::new(0), &options("cronjob"))
        .await
        .unwrap();
    let removed: u64 = streams
        .into_iter()
        .map(|s| s.result.unwrap().map_or(0, |t| t.removed))
        .sum();
    assert_eq!(removed, JOBS);
    assert_eq!(xlen(conn, &config.ready_key(StreamSlot::new(0))).await, 0);
}
