//! Pause and resume of a queue's intake on a real server: a paused partition gets no new deliveries (its published jobs stay undelivered) while recovery still claims an idle entry of a dead consumer; resume restores the intake within about one read block; producers still publish; the status model lists the paused partitions; idle workers learn of pauses from the queue's channel and poll nothing, and read the flags again after their subscription is cut.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegen_runtime::metrics::{prometheus_client, Registry};
use queuegen_runtime::ops::pause;
use queuegen_runtime::ops::status::{status, AlertThresholds, WatchedQueue};
use queuegen_runtime::Partition;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Worker,
};
use queuegen_tests::exposition::parse;
use queuegen_tests::fixtures::{test_config, test_job_pairs, TestJob};
use queuegen_tests::support::{
    age_pending, applied, deliver_to, pending_count, run_until_told, unique_prefix, wait_until,
};
use queuegen_tests::RedisServer;

const BLOCK: Duration = Duration::from_millis(200);

/// Records every job it runs.
#[derive(Clone, Default)]
struct Recording {
    done: Arc<Mutex<Vec<String>>>,
}

impl Recording {
    fn done(&self) -> HashSet<String> {
        self.done.lock().unwrap().iter().cloned().collect()
    }
}

impl Handler<TestJob> for Recording {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.done.lock().unwrap().push(ctx.job_id().to_owned());
        Ok(Outcome::Done)
    }
}

/// `queuegen_intake_paused` of each partition, as scraped.
fn paused_gauge(registry: &Registry, config: &QueueConfig) -> Vec<f64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let scraped = parse(&text).unwrap();
    (0..config.partitions)
        .map(|p| {
            let partition = p.to_string();
            scraped
                .value(
                    "queuegen_intake_paused",
                    &[
                        ("queue", &config.queue),
                        ("partition", partition.as_str()),
                        ("group", &config.group),
                    ],
                )
                .unwrap()
        })
        .collect()
}

async fn add(conn: &mut redis::aio::MultiplexedConnection, key: &str, job_id: &str) {
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg("*")
        .arg(&test_job_pairs(job_id)[..])
        .query_async(conn)
        .await
        .unwrap();
}

/// Entries of `key` not yet delivered to `group` (`XINFO GROUPS` lag).
async fn undelivered(conn: &mut redis::aio::MultiplexedConnection, key: &str, group: &str) -> u64 {
    let reply: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    let info = reply.groups.iter().find(|g| g.name == group).unwrap();
    info.lag.map_or(u64::MAX, |lag| lag as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_partition_gets_no_new_deliveries_while_recovery_still_claims() {
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("pause-claims"), 2);
        config.claim.min_idle = Duration::from_millis(300);
        config.claim.every = Duration::from_millis(50);
        config
    };
    let (paused_key, open_key) = (
        config.ready_key(StreamSlot::new(0)),
        config.ready_key(StreamSlot::new(1)),
    );
    let (redis, mut conn) = applied(&server, &config).await;

    // Partition 0: an entry of a consumer that died long ago (idle 10 min),
    // then paused before any worker runs.
    add(&mut conn, &paused_key, "abandoned").await;
    deliver_to(&mut conn, &paused_key, &config.group, "dead-worker").await;
    let pending: Vec<redis::streams::StreamPendingId> =
        queuegen_tests::support::pending_entries(&mut conn, &paused_key, &config.group).await;
    age_pending(
        &mut conn,
        &paused_key,
        &config.group,
        "dead-worker",
        &pending[0].id,
    )
    .await;
    let (_, changes) = pause::pause(
        &mut conn,
        &config,
        &[Partition::new(0)],
        "test",
        "maintenance",
    )
    .await
    .unwrap();
    assert_eq!(changes[0].before, None);
    for n in 0..5 {
        add(&mut conn, &paused_key, &format!("held-{n}")).await;
        add(&mut conn, &open_key, &format!("open-{n}")).await;
    }

    let handler = Recording::default();
    let mut registry = Registry::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone())
        .read_block(BLOCK)
        .metrics(&mut registry);
    let (stop, running) = run_until_told(worker);

    // The open partition flows; recovery claims the paused one's abandoned entry.
    let seen = handler.clone();
    wait_until(
        Duration::from_secs(10),
        "the open partition's jobs and the abandoned entry are done",
        || {
            let done = seen.done();
            async move {
                done.contains("abandoned") && (0..5).all(|n| done.contains(&format!("open-{n}")))
            }
        },
    )
    .await;
    // Several read blocks later, nothing new of partition 0 was delivered.
    for n in 5..8 {
        add(&mut conn, &paused_key, &format!("held-{n}")).await;
    }
    tokio::time::sleep(BLOCK * 5).await;
    assert!(
        !handler.done().iter().any(|job| job.starts_with("held-")),
        "{:?}",
        handler.done()
    );
    assert_eq!(undelivered(&mut conn, &paused_key, &config.group).await, 8);
    assert_eq!(
        pending_count(&mut conn, &paused_key, &config.group).await,
        0
    );

    // The worker says so in its metrics.
    assert_eq!(paused_gauge(&registry, &config), [1.0, 0.0]);

    // The status model lists it.
    let report = status(
        &mut conn,
        &[WatchedQueue {
            config: config.clone(),
            alerts: AlertThresholds::default(),
        }],
    )
    .await
    .unwrap();
    assert_eq!(report.queues[0].paused_partitions, vec![Partition::new(0)]);
    let note = report.queues[0].partitions[0].paused.clone().unwrap();
    assert_eq!(
        (note.by.as_str(), note.reason.as_str()),
        ("test", "maintenance")
    );
    assert!(report.queues[0].partitions[1].paused.is_none());

    // Resume: the backlog is read within about one read block.
    let resumed = Instant::now();
    let changes = pause::resume(&mut conn, &config, &[Partition::new(0)])
        .await
        .unwrap();
    assert!(changes[0].before.is_some());
    let seen = handler.clone();
    wait_until(Duration::from_secs(10), "the held jobs are done", || {
        let done = seen.done();
        async move { (0..8).all(|n| done.contains(&format!("held-{n}"))) }
    })
    .await;
    let took = resumed.elapsed();
    assert_eq!(paused_gauge(&registry, &config), [0.0, 0.0]);
    // The message arrives at once, then one read; slack for a loaded machine.
    assert!(took < BLOCK * 3, "resumed intake after {took:?}");

    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.claimed, 1, "{report:?}");
    assert_eq!(report.done, 14, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_running_queue_stops_intake_within_a_read_block_and_producers_still_publish() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("pause-running"), 2);
    let (redis, mut conn) = applied(&server, &config).await;
    let handler = Recording::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, running) = run_until_told(worker);
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let job = |name: String| NewJob::new(name.clone(), "acme", TestJob::new(name, None));

    producer
        .publish_many((0..10).map(|n| job(format!("before-{n}"))))
        .await
        .unwrap();
    let seen = handler.clone();
    wait_until(Duration::from_secs(10), "the first jobs are done", || {
        let done = seen.done().len();
        async move { done == 10 }
    })
    .await;

    pause::pause(
        &mut conn,
        &config,
        &[Partition::new(0), Partition::new(1)],
        "test",
        "",
    )
    .await
    .unwrap();
    // The worker notices when the message arrives; the read it may have sent
    // just before returns within one block.
    tokio::time::sleep(BLOCK * 5 / 4 + Duration::from_millis(100)).await;
    // Producers still accept.
    let published = producer
        .publish_many((0..20).map(|n| job(format!("during-{n}"))))
        .await
        .unwrap();
    assert_eq!(published.len(), 20);
    tokio::time::sleep(BLOCK * 5).await;
    assert_eq!(handler.done().len(), 10, "{:?}", handler.done());
    let waiting = undelivered(
        &mut conn,
        &config.ready_key(StreamSlot::new(0)),
        &config.group,
    )
    .await
        + undelivered(
            &mut conn,
            &config.ready_key(StreamSlot::new(1)),
            &config.group,
        )
        .await;
    assert_eq!(waiting, 20);

    pause::resume(&mut conn, &config, &[Partition::new(0), Partition::new(1)])
        .await
        .unwrap();
    let seen = handler.clone();
    wait_until(
        Duration::from_secs(10),
        "the jobs published while paused are done",
        || {
            let done = seen.done().len();
            async move { done == 30 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.done, report.failed), (30, 0), "{report:?}");
}

/// On a Cluster each partition is its own slot and the intake waits on
/// per-partition watchers instead of one blocking read: a paused partition's
/// backlog must neither be read nor keep waking the intake, and the rate
/// bucket (a key of its own slot) is asked through the cluster connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_paused_partition_waits_while_the_others_flow_under_a_rate() {
    let cluster = queuegen_tests::RedisCluster::start();
    let redis = queuegen_runtime::Redis::connect(cluster.url())
        .await
        .unwrap();
    let config = {
        let mut config = test_config(&unique_prefix("pause-cluster"), 3);
        config.handler.rate = Some(queuegen_runtime::RateLimit {
            limit: 1_000,
            per: Duration::from_secs(1),
        });
        config
    };
    queuegen_tests::library::load(&redis).await;
    queuegen_runtime::admin::ensure_groups(&redis, &config)
        .await
        .unwrap();
    let mut conn = redis.shared();
    pause::pause(&mut conn, &config, &[Partition::new(1)], "test", "")
        .await
        .unwrap();

    let handler = Recording::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, running) = run_until_told(worker);
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs: Vec<NewJob<TestJob>> = (0..60)
        .map(|n| {
            NewJob::new(
                format!("job-{n}"),
                "acme",
                TestJob::new(format!("s-{n}"), None),
            )
        })
        .collect();
    let published = producer.publish_many(jobs).await.unwrap();
    let on_paused: HashSet<String> = published
        .iter()
        .zip(0..)
        .filter(|(p, _)| p.partition == Partition::new(1))
        .map(|(_, n)| format!("job-{n}"))
        .collect();
    assert!(!on_paused.is_empty() && on_paused.len() < 60);
    let others = 60 - on_paused.len();
    let seen = handler.clone();
    wait_until(
        Duration::from_secs(20),
        "the open partitions' jobs are done",
        || {
            let done = seen.done().len();
            async move { done >= others }
        },
    )
    .await;
    tokio::time::sleep(BLOCK * 5).await;
    let done = handler.done();
    assert_eq!(done.len(), others, "{done:?}");
    assert!(done.is_disjoint(&on_paused));

    pause::resume(&mut conn, &config, &[Partition::new(1)])
        .await
        .unwrap();
    let seen = handler.clone();
    wait_until(
        Duration::from_secs(20),
        "the paused partition's jobs are done",
        || {
            let done = seen.done().len();
            async move { done == 60 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.done, report.failed), (60, 0), "{report:?}");
}

/// Subscribers of `channel` on the server (`PUBSUB NUMSUB`).
async fn subscribers(conn: &mut redis::aio::MultiplexedConnection, channel: &str) -> u64 {
    let (_, count): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .unwrap();
    count
}

/// An idle worker learns of pauses from the queue's channel instead of
/// asking for every flag: over two seconds `workers` idle workers of a queue
/// of 8 partitions send no `EXISTS` at all, and a pause is still noticed
/// within the documented bound (one read block after the `PUBLISH`).
async fn idle_workers_send_no_exists_and_notice_a_pause(workers: usize) {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix(&format!("pause-idle-{workers}")), 8);
    let (redis, mut conn) = applied(&server, &config).await;
    let handler = Recording::default();
    let running: Vec<_> = (0..workers)
        .map(|w| {
            let worker = Worker::new(&redis, config.clone(), handler.clone())
                .read_block(BLOCK)
                .consumer_name(format!("idle-{w}"));
            run_until_told(worker)
        })
        .collect();
    let channel = config.pause_channel();
    wait_until(Duration::from_secs(10), "every worker subscribed", || {
        let mut conn = conn.clone();
        let channel = channel.clone();
        async move { subscribers(&mut conn, &channel).await == workers as u64 }
    })
    .await;

    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let exists = queuegen_tests::support::command_calls(&mut conn, "exists").await;
    let reads = queuegen_tests::support::command_calls(&mut conn, "xreadgroup").await;
    assert_eq!(exists, 0, "{workers} idle workers sent EXISTS");
    assert!(reads > 0, "the workers were not reading");

    // A pause still stops new deliveries of the partition within a block.
    let paused = Partition::new(3);
    pause::pause(&mut conn, &config, &[paused], "test", "idle")
        .await
        .unwrap();
    tokio::time::sleep(BLOCK + Duration::from_millis(300)).await;
    let paused_key = config.ready_key(StreamSlot::new(3));
    let open_key = config.ready_key(StreamSlot::new(4));
    for n in 0..3 {
        add(&mut conn, &paused_key, &format!("held-{n}")).await;
        add(&mut conn, &open_key, &format!("open-{n}")).await;
    }
    let seen = handler.clone();
    wait_until(Duration::from_secs(10), "the open partition's jobs", || {
        let done = seen.done();
        async move { (0..3).all(|n| done.contains(&format!("open-{n}"))) }
    })
    .await;
    tokio::time::sleep(BLOCK * 3).await;
    assert_eq!(undelivered(&mut conn, &paused_key, &config.group).await, 3);
    // The pause cost each worker one read of its flags, whatever it read before.
    let exists = queuegen_tests::support::command_calls(&mut conn, "exists").await;
    assert_eq!(exists, 8 * workers as u64, "one EXISTS per flag and worker");

    for (stop, task) in running {
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idle_worker_sends_no_exists_and_notices_a_pause() {
    idle_workers_send_no_exists_and_notice_a_pause(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_idle_workers_send_no_exists_and_notice_a_pause() {
    idle_workers_send_no_exists_and_notice_a_pause(8).await;
}

/// A flag set by hand (no `PUBLISH`) is not noticed while the subscription
/// lasts; when the subscriber's connection is killed the worker subscribes
/// again and reads every flag, so a pause it missed is seen then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_its_subscription_is_cut_a_worker_reads_the_flags_again() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("pause-resubscribe"), 2);
    let (redis, mut conn) = applied(&server, &config).await;
    let handler = Recording::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, running) = run_until_told(worker);
    let channel = config.pause_channel();
    wait_until(Duration::from_secs(10), "the worker subscribed", || {
        let mut conn = conn.clone();
        let channel = channel.clone();
        async move { subscribers(&mut conn, &channel).await == 1 }
    })
    .await;

    // Paused by hand, without a message: the worker keeps reading it.
    let paused_key = config.paused_key(Partition::new(0));
    let ready = config.ready_key(StreamSlot::new(0));
    let () = redis::cmd("SET")
        .arg(&paused_key)
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    add(&mut conn, &ready, "before").await;
    let seen = handler.clone();
    wait_until(Duration::from_secs(10), "the job before the cut", || {
        let done = seen.done();
        async move { done.contains("before") }
    })
    .await;

    // The subscriber's connection is cut: it comes back and reads the flag.
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    wait_until(
        Duration::from_secs(10),
        "the worker subscribed again",
        || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { subscribers(&mut conn, &channel).await == 1 }
        },
    )
    .await;
    tokio::time::sleep(BLOCK + Duration::from_millis(300)).await;
    for n in 0..3 {
        add(&mut conn, &ready, &format!("held-{n}")).await;
    }
    tokio::time::sleep(BLOCK * 5).await;
    assert_eq!(undelivered(&mut conn, &ready, &config.group).await, 3);
    assert!(!handler.done().iter().any(|job| job.starts_with("held-")));

    // Resumed (with its message): the held jobs are read.
    pause::resume(&mut conn, &config, &[Partition::new(0)])
        .await
        .unwrap();
    let seen = handler.clone();
    wait_until(Duration::from_secs(10), "the held jobs are done", || {
        let done = seen.done();
        async move { (0..3).all(|n| done.contains(&format!("held-{n}"))) }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, 4, "{report:?}");
}

/// A users file from before the pause channel refuses the worker's
/// `SUBSCRIBE`: the worker says what to fix and polls the flags meanwhile,
/// so a pause is still noticed within 1.25 read blocks.
#[tokio::test]
async fn a_worker_refused_the_channel_says_so_and_polls_the_flags() {
    let (logs, _guard) = queuegen_tests::support::capture_logs();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("pause-refused"), 2);
    let (_, mut conn) = applied(&server, &config).await;
    let url = queuegen_tests::support::url_of_user_without(&server, "subscribe").await;
    let redis = queuegen_runtime::Redis::connect(url).await.unwrap();
    let handler = Recording::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, running) = run_until_told(worker);
    wait_until(Duration::from_secs(10), "the refusal is logged", || {
        let said = !logs
            .lines_with(&[
                "refuses this worker's user the pause channel",
                "&<prefix>:*:paused",
            ])
            .is_empty();
        async move { said }
    })
    .await;

    pause::pause(&mut conn, &config, &[Partition::new(0)], "test", "")
        .await
        .unwrap();
    tokio::time::sleep(BLOCK * 5 / 4 + Duration::from_millis(300)).await;
    let ready = config.ready_key(StreamSlot::new(0));
    for n in 0..3 {
        add(&mut conn, &ready, &format!("held-{n}")).await;
    }
    tokio::time::sleep(BLOCK * 5).await;
    assert_eq!(undelivered(&mut conn, &ready, &config.group).await, 3);
    assert!(handler.done().is_empty(), "{:?}", handler.done());
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
