//! `retention.on_ack: delete`: on a server whose primaries have `XACKDEL`
//! a done job's ack deletes its entry once every group has read it and none
//! holds it pending, and keeps it otherwise; elsewhere the worker takes the
//! `XACK` path and every entry stays. The test asks the server which path
//! the worker takes (the worker's own `ack_path`, and `COMMAND INFO
//! xackdel`) and asserts what that path does: it assumes no version.
//!
//! Each ready stream has a second group, `audit`, that needs the entries
//! too. Of the queue's entries, audit has read and acknowledged some (A),
//! read and holds pending others (B), and not read the rest (C). The
//! worker handles every job once. On the `XACKDEL` path A is deleted with
//! its ack and B and C are kept with their payloads, audit's pending list
//! untouched and C still readable by it; on the `XACK` path all stay.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::functions::AckStream;
use queuegen_runtime::transitions::{AckFunction, AckPath};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    init_tracing, pending_count, pending_entries, spawn_worker, stream_entries, unique_prefix,
    wait_until,
};
use queuegen_tests::{library, RedisCluster, RedisServer};

const PARTITIONS: u16 = 2;
const JOBS: u32 = 90;
const AUDIT: &str = "audit";

/// Counts the deliveries of each job_id.
#[derive(Clone, Default)]
struct Counting {
    seen: Arc<Mutex<HashMap<String, u32>>>,
}

impl Handler<TestJob> for Counting {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        *self
            .seen
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default() += 1;
        Ok(Outcome::Done)
    }
}

/// Whether the server (every primary: here, the one) has `XACKDEL`.
async fn server_has_xackdel(redis: &Redis) -> bool {
    queuegen_runtime::connect::every_primary_has_command(redis, "xackdel")
        .await
        .unwrap()
}

/// Reads `count` new entries of `key` as `audit`'s consumer; their IDs.
async fn audit_reads(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    count: usize,
) -> Vec<String> {
    let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(AUDIT)
        .arg("auditor")
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .query_async(conn)
        .await
        .unwrap();
    reply
        .keys
        .into_iter()
        .flat_map(|stream| stream.ids)
        .map(|entry| entry.id)
        .collect()
}

/// The second group, `AUDIT`, on `key`, from its newest entry on.
async fn add_audit_group(conn: &mut impl redis::aio::ConnectionLike, key: &str) {
    let () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(AUDIT)
        .arg("$")
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("XGROUP CREATE {key} {AUDIT}: {err}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_entries_go_with_their_ack_only_where_every_group_is_done_with_them() {
    init_tracing();
    let server = RedisServer::start();
    done_entries_go_only_where_every_group_is_done(&server.url(), PARTITIONS).await;
}

/// The same on a Cluster, its partitions spread over the three primaries:
/// the worker asks every primary for `XACKDEL` and each partition's acks go
/// to the primary that owns its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_done_entries_go_with_their_ack_only_where_every_group_is_done_with_them() {
    init_tracing();
    let cluster = RedisCluster::start();
    done_entries_go_only_where_every_group_is_done(&cluster.url(), 6).await;
}

async fn done_entries_go_only_where_every_group_is_done(url: &str, partitions: u16) {
    let config = {
        let mut config = test_config(&unique_prefix("ack-delete"), partitions);
        config.retention.delete_on_ack = true;
        config
    };
    let admin = Redis::connect(url).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();
    // Routed by slot on a Cluster.
    let mut conn = admin.shared();
    for key in config.ready_keys() {
        add_audit_group(&mut conn, &key).await;
    }

    let producer = Producer::<TestJob>::new(&admin, config.clone());
    let jobs = (0..JOBS).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            "tenant",
            TestJob::new(format!("doc-{n}"), Some(n)),
        )
    });
    let published = producer.publish_many(jobs).await.unwrap();
    assert_eq!(published.len(), JOBS as usize);

    // Per stream: audit reads and acks a third (A), reads a third and
    // keeps it pending (B), and leaves the rest unread (C).
    let (mut done_by_audit, mut pending_in_audit) = (HashSet::new(), HashSet::new());
    let mut all = HashSet::new();
    let mut audit_pending_before = HashMap::new();
    for key in config.ready_keys() {
        let len: usize = redis::cmd("XLEN")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(len >= 3, "{key} has {len} entries");
        let a = audit_reads(&mut conn, &key, len / 3).await;
        let _: u64 = redis::cmd("XACK")
            .arg(&key)
            .arg(AUDIT)
            .arg(&a)
            .query_async(&mut conn)
            .await
            .unwrap();
        let b = audit_reads(&mut conn, &key, len / 3).await;
        done_by_audit.extend(a.into_iter().map(|id| (key.clone(), id)));
        pending_in_audit.extend(b.into_iter().map(|id| (key.clone(), id)));
        let pending: Vec<(String, String, usize)> = pending_entries(&mut conn, &key, AUDIT)
            .await
            .into_iter()
            .map(|p| (p.id, p.consumer, p.times_delivered))
            .collect();
        audit_pending_before.insert(key.clone(), pending);
        all.extend(
            stream_entries(&mut conn, &key)
                .await
                .into_iter()
                .map(|(id, _)| (key.clone(), id)),
        );
    }
    assert_eq!(all.len(), JOBS as usize);
    // (key, id): stream IDs repeat between streams.
    let unread: HashSet<(String, String)> = all
        .iter()
        .filter(|id| !done_by_audit.contains(*id) && !pending_in_audit.contains(*id))
        .cloned()
        .collect();

    // Ask the server which path a worker of this queue takes.
    let redis = Redis::connect(url).await.unwrap();
    let path = queuegen_runtime::worker::ack_path(&redis, &config).await;
    let has_xackdel = server_has_xackdel(&redis).await;
    assert_eq!(
        path,
        if has_xackdel {
            AckPath::XackDel
        } else {
            AckPath::Xack
        },
        "the worker deletes on ack exactly where the server has XACKDEL"
    );
    eprintln!("ack_delete: the server has XACKDEL: {has_xackdel}; the worker's path: {path:?}");

    let handler = Counting::default();
    let mut registry = queuegen_runtime::metrics::Registry::default();
    let running =
        spawn_worker(Worker::new(&redis, config.clone(), handler.clone()).metrics(&mut registry));
    let seen = handler.seen.clone();
    wait_until(Duration::from_secs(30), "every job is handled", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().len() >= JOBS as usize }
    })
    .await;
    // Every job's ack answered before the report is read.
    let mut settled = false;
    for _ in 0..100 {
        let mut pending = 0;
        for key in config.ready_keys() {
            pending += pending_count(&mut conn, &key, &config.group).await;
        }
        if pending == 0 {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(settled, "the worker's group has nothing pending");
    let report = running.stop().await;

    // No job lost, none handled twice.
    let seen = handler.seen.lock().unwrap().clone();
    let lost = (0..JOBS)
        .filter(|n| !seen.contains_key(&format!("job-{n}")))
        .count();
    let duplicates = seen.values().filter(|&&times| times > 1).count();
    eprintln!("ack_delete: lost jobs {lost}, duplicate effects {duplicates}; report {report:?}");
    assert_eq!((lost, duplicates), (0, 0));
    assert_eq!(report.done, u64::from(JOBS));
    assert_eq!(report.failed, 0, "no ack reported failed, kept or deleted");
    assert_eq!(report.ownership_lost, 0);

    let mut stored = HashMap::new();
    for key in config.ready_keys() {
        for (id, fields) in stream_entries(&mut conn, &key).await {
            stored.insert((key.clone(), id), fields);
        }
        // audit's pending entries are untouched: same IDs, owner, deliveries.
        let pending: Vec<(String, String, usize)> = pending_entries(&mut conn, &key, AUDIT)
            .await
            .into_iter()
            .map(|p| (p.id, p.consumer, p.times_delivered))
            .collect();
        assert_eq!(
            pending, audit_pending_before[&key],
            "audit's pending list on {key}"
        );
    }
    // What audit still needs has its payload, whichever path.
    for id in pending_in_audit.iter().chain(&unread) {
        let fields = stored
            .get(id)
            .unwrap_or_else(|| panic!("{id:?}, which audit still needs, is gone"));
        assert!(fields.contains_key("job_id"), "{id:?} keeps its payload");
    }
    // The same counts reach Prometheus, one series per partition.
    let mut text = String::new();
    queuegen_runtime::metrics::prometheus_client::encoding::prometheus_text::encode(
        &mut text, &registry,
    )
    .unwrap();
    let exposition = queuegen_tests::exposition::parse(&text).unwrap();
    let exported = |name: &str| exposition.sum(name, &[("queue", &config.queue)]) as u64;
    assert_eq!(
        (
            exported("queuegen_deleted_on_ack_total"),
            exported("queuegen_kept_on_ack_total")
        ),
        (report.deleted_on_ack, report.kept_on_ack),
        "{text}"
    );
    for partition in 0..partitions {
        let labels = [
            ("queue", &*config.queue),
            ("partition", &partition.to_string()),
            ("group", &*config.group),
        ];
        assert!(
            exposition
                .value("queuegen_deleted_on_ack_total", &labels)
                .is_some(),
            "partition {partition} has its series from the start:\n{text}"
        );
    }
    match path {
        AckPath::XackDel => {
            for id in &done_by_audit {
                assert!(
                    !stored.contains_key(id),
                    "{id:?}: every group is done with it; deleted with its ack"
                );
            }
            assert_eq!(stored.len(), pending_in_audit.len() + unread.len());
            assert_eq!(report.deleted_on_ack, done_by_audit.len() as u64);
            assert_eq!(
                report.kept_on_ack,
                (pending_in_audit.len() + unread.len()) as u64
            );
        }
        AckPath::Xack => {
            assert_eq!(stored.len(), JOBS as usize, "XACK deletes nothing");
            assert_eq!((report.deleted_on_ack, report.kept_on_ack), (0, 0));
        }
    }
    eprintln!(
        "ack_delete: audit had done {}, pending {}, unread {}; entries left {}",
        done_by_audit.len(),
        pending_in_audit.len(),
        unread.len(),
        stored.len()
    );

    // audit still reads what it had not read, payloads and all.
    let mut read_later = HashSet::new();
    for key in config.ready_keys() {
        read_later.extend(
            audit_reads(&mut conn, &key, 1000)
                .await
                .into_iter()
                .map(|id| (key.clone(), id)),
        );
    }
    assert_eq!(
        read_later, unread,
        "audit reads every entry it had not read"
    );
}

/// The library's `ack_delete`, called directly: per ID it acknowledges and
/// deletes (every group done), acknowledges and keeps (another group has
/// not read it), or refuses (not the caller's); on a server without
/// XACKDEL it acknowledges with XACK and says so (`deleted` -1).
#[tokio::test]
async fn ack_delete_counts_deleted_and_kept_or_falls_back_to_xack() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("ack-delete-fn"), 1);
    let admin = Redis::connect(server.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();
    let key = config.ready_key(StreamSlot::new(0));
    let mut conn = server.async_connection().await;
    add_audit_group(&mut conn, &key).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let id: String = redis::cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg("job_id")
            .arg(format!("job-{n}"))
            .query_async(&mut conn)
            .await
            .unwrap();
        ids.push(id);
    }
    // Our group read all three; audit read (and acknowledged) the first only.
    queuegen_tests::support::deliver_to(&mut conn, &key, &config.group, "me").await;
    audit_reads(&mut conn, &key, 1).await;
    let _: u64 = redis::cmd("XACK")
        .arg(&key)
        .arg(AUDIT)
        .arg(&ids[0])
        .query_async(&mut conn)
        .await
        .unwrap();

    let function = AckFunction::on(&config, AckPath::XackDel);
    let claims = config.claims_key(StreamSlot::new(0));
    let batch: Vec<&str> = ids.iter().map(String::as_str).collect();
    // "me"'s ack of `ids` on partition 0, on the checked path (no epoch).
    let ack = |ids| {
        function.command(
            "me",
            &[AckStream {
                ready_key: &key,
                claims_key: &claims,
                claim_epoch: None,
                ids,
            }],
        )
    };
    let answer = ack(&batch[..2]).query_async(&mut conn).await;
    let acked = function.reply(&key, StreamSlot::new(0), answer).unwrap();
    let left: usize = redis::cmd("XLEN")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let redis = Redis::connect(server.url()).await.unwrap();
    if server_has_xackdel(&redis).await {
        assert_eq!(
            (acked.acked, acked.deleted, acked.xackdel_refused),
            (2, 1, false)
        );
        assert_eq!(left, 2, "the first went: both groups were done with it");
    } else {
        assert_eq!(
            (acked.acked, acked.deleted, acked.xackdel_refused),
            (2, 0, true)
        );
        assert_eq!(left, 3, "XACK keeps every entry");
    }
    // Not pending for "me" any more: refused by name on the checked path, nothing written.
    let answer = ack(&batch[..1]).query_async(&mut conn).await;
    let again = function.reply(&key, StreamSlot::new(0), answer).unwrap();
    assert_eq!((again.acked, again.deleted, again.refused.len()), (0, 0, 1));
    assert_eq!(pending_count(&mut conn, &key, &config.group).await, 1);
}
