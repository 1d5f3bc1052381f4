//! The runtime on a 6-node Redis Cluster: partitions spread over the primaries, start checks on every primary, resharding and failover while workers run.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::SetupError;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Durability, Error, Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig,
    Redis, Worker, WorkerReport,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    command_calls, init_tracing, run_until_told, unique_prefix, wait_until,
};
use queuegen_tests::{library, RedisCluster};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const PARTITIONS: u16 = 6;

/// Counts how often each job was handled.
#[derive(Clone, Default)]
struct Tally {
    handled: Arc<Mutex<HashMap<String, u32>>>,
}

impl Tally {
    /// Waits up to `timeout` until `jobs` distinct jobs were handled.
    async fn wait_for(&self, jobs: usize, timeout: Duration, what: &str) {
        wait_until(timeout, what, || {
            let seen = self.clone();
            async move { seen.distinct() >= jobs }
        })
        .await;
    }

    fn distinct(&self) -> usize {
        self.handled.lock().unwrap().len()
    }

    fn twice(&self) -> Vec<String> {
        let handled = self.handled.lock().unwrap();
        let mut twice: Vec<String> = handled
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(id, _)| id.clone())
            .collect();
        twice.sort();
        twice
    }

    fn missing(&self, published: &BTreeSet<String>) -> Vec<String> {
        let handled = self.handled.lock().unwrap();
        published
            .iter()
            .filter(|id| !handled.contains_key(*id))
            .cloned()
            .collect()
    }
}

impl Handler<TestJob> for Tally {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        *self
            .handled
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default() += 1;
        Ok(Outcome::Done)
    }
}

/// A running worker and the way to stop it.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<queuegen_runtime::Result<WorkerReport>>,
}

impl Running {
    async fn start(url: &str, config: &QueueConfig, tally: &Tally) -> Running {
        let redis = Redis::connect(url).await.unwrap();
        assert!(redis.is_cluster(), "{url} is a Cluster node");
        let worker = Worker::new(&redis, config.clone(), tally.clone())
            .read_block(Duration::from_millis(500));
        let (stop, task) = run_until_told(worker);
        Running { stop, task }
    }

    async fn stop(self) -> WorkerReport {
        let _ = self.stop.send(());
        self.task.await.unwrap().expect("the worker ran to its end")
    }
}

async fn applied(cluster: &RedisCluster, name: &str) -> (Redis, QueueConfig) {
    let redis = Redis::connect(cluster.url()).await.unwrap();
    let config = test_config(&unique_prefix(name), PARTITIONS);
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    (redis, config)
}

fn jobs(from: u32, to: u32) -> impl Iterator<Item = NewJob<TestJob>> {
    (from..to).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            format!("tenant-{}", n % 5),
            TestJob::new(format!("doc-{n}"), Some(n)),
        )
    })
}

async fn pending_total(redis: &Redis, config: &QueueConfig) -> u64 {
    let mut conn = redis.shared();
    let mut total = 0;
    for partition in StreamSlot::all(config.partitions) {
        let summary: redis::Value = redis::cmd("XPENDING")
            .arg(config.ready_key(partition))
            .arg(&*config.group)
            .query_async(&mut conn)
            .await
            .unwrap();
        if let redis::Value::Array(parts) = summary {
            if let Some(redis::Value::Int(n)) = parts.first() {
                total += *n as u64;
            }
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_over_the_primaries_and_every_job_is_handled_once() {
    init_tracing();
    let cluster = RedisCluster::start();
    let (redis, config) = applied(&cluster, "spread").await;
    let owners: BTreeSet<u16> = StreamSlot::all(PARTITIONS)
        .map(|p| cluster.node_for_key(&config.ready_key(p)).port)
        .collect();
    assert!(
        owners.len() >= 2,
        "{PARTITIONS} partitions live on more than one primary: {owners:?}"
    );

    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let published = producer.publish_many(jobs(0, 600)).await.unwrap();
    assert_eq!(published.len(), 600);

    let tally = Tally::default();
    let first = Running::start(&cluster.url(), &config, &tally).await;
    let second = Running::start(&cluster.url(), &config, &tally).await;
    tally
        .wait_for(600, Duration::from_secs(30), "the backlog is handled")
        .await;

    // Idle now: the partitions' watchers must wake the intake for new jobs.
    // Meanwhile an idle worker sends only its watchers' blocking `XREAD`s:
    // no sweep of the partitions and no `XINFO` per block period (500 ms).
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut nodes = Vec::new();
    for server in cluster.servers() {
        let mut conn = server.async_connection().await;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut conn)
            .await
            .unwrap();
        nodes.push(conn);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut sweeps, mut group_lookups, mut watches) = (0, 0, 0);
    for conn in &mut nodes {
        sweeps += command_calls(conn, "xreadgroup").await;
        group_lookups += command_calls(conn, "xinfo|groups").await;
        watches += command_calls(conn, "xread").await;
    }
    let periods = 2_000 / 500;
    assert!(
        watches >= 2 * u64::from(PARTITIONS) * (periods - 1),
        "the watchers block in XREAD every period: {watches}"
    );
    // At most one arming's lookups and one sweep per worker in the window.
    assert!(
        sweeps + group_lookups <= 2 * 2 * u64::from(PARTITIONS),
        "{sweeps} XREADGROUPs and {group_lookups} XINFO GROUPS in {periods} idle periods of 2 workers"
    );
    for n in 600..610 {
        producer
            .publish(jobs(n, n + 1).next().unwrap())
            .await
            .unwrap();
    }
    tally
        .wait_for(
            610,
            Duration::from_secs(10),
            "jobs published to idle workers are handled",
        )
        .await;

    let reports = [first.stop().await, second.stop().await];
    assert_eq!(reports.iter().map(|r| r.done).sum::<u64>(), 610);
    assert_eq!(tally.twice(), Vec::<String>::new(), "no job handled twice");
    assert_eq!(
        pending_total(&redis, &config).await,
        0,
        "every job acknowledged"
    );
}

#[tokio::test]
async fn a_worker_refuses_a_cluster_where_one_primary_lacks_the_library() {
    init_tracing();
    let cluster = RedisCluster::start();
    let (_redis, config) = applied(&cluster, "nolib").await;
    let primaries = cluster.primaries();
    let victim = &primaries[1];
    let mut conn = redis::Client::open(victim.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(&*config.functions)
        .query_async(&mut conn)
        .await
        .unwrap();

    let redis = Redis::connect(cluster.url()).await.unwrap();
    let err = Worker::new(&redis, config.clone(), Tally::default())
        .run_until(std::future::pending::<()>())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, Error::Setup(SetupError::LibraryMissing { .. })),
        "{err:?}"
    );
    assert!(
        message.contains(&victim.addr()),
        "names the primary: {message}"
    );
    for other in primaries.iter().filter(|p| p.port != victim.port) {
        assert!(
            !message.contains(&other.addr()),
            "only the primary without it: {message}"
        );
    }
    assert!(message.contains(&*config.functions), "{message}");
}

#[tokio::test]
async fn a_worker_refuses_a_cluster_where_one_primary_may_evict() {
    init_tracing();
    let cluster = RedisCluster::start();
    let (_redis, config) = applied(&cluster, "evict").await;
    let victim = cluster.primaries()[2].clone();
    let mut conn = redis::Client::open(victim.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query_async(&mut conn)
        .await
        .unwrap();

    let redis = Redis::connect(cluster.url()).await.unwrap();
    let err = Worker::new(&redis, config, Tally::default())
        .run_until(std::future::pending::<()>())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Setup(SetupError::EvictionPolicy { server, policy }) if *server == victim.addr() && policy == "allkeys-lru"),
        "{err:?}"
    );
}

/// Publishes `count` jobs from `from` in batches while workers run; returns the job IDs accepted.
fn publish_steadily(
    producer: Producer<TestJob>,
    from: u32,
    count: u32,
) -> JoinHandle<BTreeSet<String>> {
    tokio::spawn(async move {
        let mut accepted = BTreeSet::new();
        let mut n = from;
        while n < from + count {
            let batch_end = (n + 20).min(from + count);
            match producer.publish_many(jobs(n, batch_end)).await {
                // Appended, but no replica confirmed it within the timeout
                // (the failover: the primary it went to was being demoted).
                // Not yet durable, so not accepted: the batch goes again,
                // as a caller asking for durability does.
                Ok(published) if published.iter().any(|p| p.replicas == Some(0)) => {
                    tracing::info!("a publish no replica confirmed; publishing the batch again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(_) => {
                    accepted.extend((n..batch_end).map(|i| format!("job-{i}")));
                    n = batch_end;
                }
                // During a failover a batch may fail; publishing it again is
                // safe (job IDs are stable) and is what a caller does.
                Err(err) => {
                    tracing::info!(error = %err, "publish failed; publishing the batch again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        accepted
    })
}

/// The end of a disruption test: waits (up to `timeout`) until every
/// accepted job is handled, stops the workers, and checks that no accepted
/// job was lost; jobs handled twice (at least once) are only logged.
async fn none_lost(
    tally: &Tally,
    accepted: &BTreeSet<String>,
    timeout: Duration,
    workers: [Running; 2],
    across: &str,
) {
    tally
        .wait_for(accepted.len(), timeout, "every accepted job is handled")
        .await;
    for worker in workers {
        worker.stop().await;
    }
    assert_eq!(
        tally.missing(accepted),
        Vec::<String>::new(),
        "no accepted job lost across {across}"
    );
    tracing::info!(
        twice = tally.twice().len(),
        "jobs handled twice across {across}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_resharding_of_partition_slots_while_workers_run_loses_nothing() {
    init_tracing();
    let cluster = RedisCluster::start();
    let (redis, config) = applied(&cluster, "reshard").await;
    let tally = Tally::default();
    let first = Running::start(&cluster.url(), &config, &tally).await;
    let second = Running::start(&cluster.url(), &config, &tally).await;
    let publisher = publish_steadily(Producer::new(&redis, config.clone()), 0, 1_000);

    // Move two partitions' slots (streams, groups, pending lists and retry
    // sets alike) to a primary that did not own them, mid-stream.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let keys = [
        config.ready_key(StreamSlot::new(0)),
        config.ready_key(StreamSlot::new(1)),
    ];
    let source = cluster.node_for_key(&keys[0]).port;
    let target = cluster
        .primaries()
        .into_iter()
        .find(|p| p.port != source)
        .unwrap()
        .port;
    let cluster = Arc::new(cluster);
    let mover = cluster.clone();
    let moved_keys: Vec<String> = keys.to_vec();
    tokio::task::spawn_blocking(move || {
        let keys: Vec<&str> = moved_keys.iter().map(String::as_str).collect();
        mover.migrate_slots_of_keys(&keys, target);
    })
    .await
    .unwrap();
    assert_eq!(cluster.node_for_key(&keys[0]).port, target);

    let accepted = publisher.await.unwrap();
    assert_eq!(accepted.len(), 1_000);
    // A batch's pipeline that meets ASK/MOVED mid-migration is sent again by
    // the cluster client, so a job may be appended twice (at-least-once
    // publish) and handled twice; idempotent handlers absorb that.
    none_lost(
        &tally,
        &accepted,
        Duration::from_secs(30),
        [first, second],
        "the resharding",
    )
    .await;
    assert_eq!(pending_total(&redis, &config).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_failover_while_publishing_and_acking_loses_no_accepted_job() {
    init_tracing();
    let cluster = RedisCluster::start();
    let (redis, config) = applied(&cluster, "failover").await;
    let tally = Tally::default();
    let first = Running::start(&cluster.url(), &config, &tally).await;
    let second = Running::start(&cluster.url(), &config, &tally).await;
    // Every accepted job is held by a replica before the publish returns.
    let durable = Durability {
        replicas: 1,
        timeout: Duration::from_secs(2),
    };
    let producer = Producer::new(&redis, config.clone()).with_durability(durable);
    let publisher = publish_steadily(producer, 0, 1_000);

    tokio::time::sleep(Duration::from_millis(300)).await;
    let primary = cluster
        .node_for_key(&config.ready_key(StreamSlot::new(0)))
        .port;
    let cluster = Arc::new(cluster);
    let failing = cluster.clone();
    let promoted = tokio::task::spawn_blocking(move || failing.failover(primary))
        .await
        .unwrap();
    assert_ne!(promoted.port, primary);
    assert_eq!(
        cluster
            .node_for_key(&config.ready_key(StreamSlot::new(0)))
            .port,
        promoted.port
    );

    let accepted = publisher.await.unwrap();
    // At least once: a redelivery after the failover is allowed, and
    // absorbed by handlers that are idempotent by job_id.
    none_lost(
        &tally,
        &accepted,
        Duration::from_secs(60),
        [first, second],
        "the failover",
    )
    .await;
}
