//! Priority lanes (`lanes:`) on a real server: under a backlog in every lane the handled mix follows the weights, a job stays in its lane through retries, dead letters, replays and delays, and a lane the queue lacks is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::error::PublishError;
use queuegen_runtime::metrics::{prometheus_client, Registry, WorkerMetrics};
use queuegen_runtime::ops::status::{status, AlertThresholds, WatchedQueue};
use queuegen_runtime::Partition;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    transitions, Error, Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig,
    Redis, Worker,
};
use queuegen_tests::exposition::parse;
use queuegen_tests::fixtures::{owned, TestJob};
use queuegen_tests::queues::laned;
use queuegen_tests::support::{
    applied, dead_letters, delayed_jobs, init_tracing, spawn_worker, stream_entries, unique_prefix,
    wait_until, RunningWorker,
};
use queuegen_tests::RedisServer;

fn laned_config(name: &str) -> QueueConfig {
    QueueConfig {
        key_prefix: owned(&unique_prefix(name)),
        ..laned::CONFIG
    }
}

fn job(n: usize, lane: Option<&str>) -> NewJob<TestJob> {
    let job = NewJob::new(
        format!("job-{n}"),
        "acme",
        TestJob::new(format!("s-{n}"), None),
    );
    match lane {
        Some(lane) => job.in_lane(lane),
        None => job,
    }
}

/// One handled job: its job_id, lane and attempt.
type Handled = (String, Option<String>, u32);

/// Records the lane of every job it handles, in order; `fail_first` makes
/// each job's first attempt fail transiently, `dead` dead-letters subjects
/// starting with "dead" until `replayed` is set.
#[derive(Clone, Default)]
struct Lanes {
    handled: Arc<Mutex<Vec<Handled>>>,
    work: Duration,
    fail_first: bool,
}

impl Handler<TestJob> for Lanes {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        if !self.work.is_zero() {
            tokio::time::sleep(self.work).await;
        }
        if job.subject_ref.starts_with("dead")
            && ctx.attempt() == 1
            && !ctx.job_id().ends_with("-again")
        {
            return Ok(Outcome::dead_letter("refused by the test"));
        }
        if self.fail_first && ctx.attempt() == 1 {
            return Err(JobError::transient(std::io::Error::other(
                "first attempt fails",
            )));
        }
        self.handled.lock().unwrap().push((
            ctx.job_id().to_owned(),
            ctx.lane().map(str::to_owned),
            ctx.attempt(),
        ));
        Ok(Outcome::Done)
    }
}

impl Lanes {
    fn count(&self) -> usize {
        self.handled.lock().unwrap().len()
    }
}

fn start_worker(redis: &Redis, config: &QueueConfig, handler: Lanes, name: &str) -> RunningWorker {
    spawn_worker(
        Worker::new(redis, config.clone(), handler)
            .consumer_name(name)
            .read_block(Duration::from_millis(100)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_in_every_lane_is_handled_in_the_mix_of_the_weights() {
    init_tracing();
    let server = RedisServer::start();
    let config = laned_config("lanes-mix");
    let (redis, _conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    // 2,500 jobs per lane, published lane after lane: the low lane's backlog
    // is the newest, so a first-come order would handle it last.
    const PER_LANE: usize = 2_500;
    const HANDLED: usize = 3_000;
    for (l, lane) in ["high", "normal", "low"].into_iter().enumerate() {
        let jobs = (0..PER_LANE).map(|n| job(l * PER_LANE + n, Some(lane)));
        let published = producer.publish_many(jobs).await.unwrap();
        assert!(published.iter().all(|p| p.lane.as_deref() == Some(lane)));
    }

    // Two workers, each job a little work, until 3,000 are handled: no lane
    // runs dry before (high, the fastest, needs 60% = 1,800 of its 2,500).
    let handler = Lanes {
        work: Duration::from_millis(2),
        ..Lanes::default()
    };
    let metrics = WorkerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut running = Vec::new();
    for n in 0..2 {
        let redis = Redis::connect(server.url()).await.unwrap();
        running.push(spawn_worker(
            Worker::new(&redis, config.clone(), handler.clone())
                .consumer_name(format!("lanes-{n}"))
                .read_block(Duration::from_millis(100))
                .with_metrics(metrics.clone()),
        ));
    }
    wait_until(
        Duration::from_secs(60),
        "3,000 jobs are handled",
        || async { handler.count() >= HANDLED },
    )
    .await;
    let counted: Vec<Option<String>> = handler.handled.lock().unwrap()[..HANDLED]
        .iter()
        .map(|(_, lane, _)| lane.clone())
        .collect();
    for worker in running {
        worker.stop().await;
    }

    let mut mix: HashMap<String, usize> = HashMap::new();
    for lane in counted {
        *mix.entry(lane.expect("a laned queue's job knows its lane"))
            .or_default() += 1;
    }
    let total = HANDLED as f64;
    let mut report = Vec::new();
    for (lane, weight) in [("high", 6.0), ("normal", 3.0), ("low", 1.0)] {
        let share = mix.get(lane).copied().unwrap_or(0) as f64 / total;
        let want = weight / 10.0;
        report.push(format!(
            "{lane} {:.1}% (weight {:.0}%)",
            share * 100.0,
            want * 100.0
        ));
        assert!(
            (share - want).abs() <= want * 0.10,
            "lane {lane}: {:.1}% of the first 3,000 handled, not within 10% of its weight's {:.0}%: {mix:?}",
            share * 100.0,
            want * 100.0
        );
    }
    println!("handled mix of the first 3,000: {}", report.join(", "));

    // The workers' per-lane counter shows the same mix of what they read.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let exposition = parse(&text).unwrap();
    let read = |lane: &str| {
        exposition.sum(
            "queuegen_lane_deliveries_total",
            &[("queue", "laned"), ("lane", lane)],
        )
    };
    let all = read("high") + read("normal") + read("low");
    assert!(all >= HANDLED as f64, "read {all}");
    for (lane, weight) in [("high", 0.6), ("normal", 0.3), ("low", 0.1)] {
        let share = read(lane) / all;
        assert!(
            (share - weight).abs() <= weight * 0.10,
            "lane {lane}: {share:.3} of the {all} entries read"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_stays_in_its_lane_through_retries_dead_letters_replays_and_delays() {
    init_tracing();
    let server = RedisServer::start();
    let config = laned_config("lanes-keep");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    // Published to `low`: its entry is on low's stream, not the default's.
    let retried = producer.publish(job(1, Some("low"))).await.unwrap();
    let stream = config.stream(config.lane_index("low").unwrap(), retried.partition);
    let low_key = config.ready_key(stream);
    assert!(low_key.contains(":lane-low:"), "{low_key}");
    assert_eq!(stream_entries(&mut conn, &low_key).await.len(), 1);
    // A dead letter in `high`, and a delayed job in `high`.
    let dead = producer
        .publish(NewJob::new("dead-1", "acme", TestJob::new("dead-1", None)).in_lane("high"))
        .await
        .unwrap();
    let delayed = producer
        .publish_after(job(3, Some("high")), Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(delayed.lane.as_deref(), Some("high"));
    assert_eq!(delayed_jobs(&mut conn, &config).await.len(), 1);

    let handler = Lanes {
        fail_first: true,
        ..Lanes::default()
    };
    let worker = start_worker(&redis, &config, handler.clone(), "lanes-keep");
    wait_until(
        Duration::from_secs(10),
        "the retried and the delayed job are done",
        || async { handler.count() >= 2 },
    )
    .await;
    let letters = dead_letters(&mut conn, &config).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let (dead_stream, dead_id, _) = &letters[0];
    assert_eq!(
        config.lane_of_stream(*dead_stream).map(|l| &*l.name),
        Some("high")
    );
    assert_eq!(config.partition_of_stream(*dead_stream), dead.partition);
    assert!(config.dead_key(*dead_stream).contains(":lane-high:"));

    // Replayed under a new job_id (so the test handler takes it): back on high's stream.
    transitions::replay(
        &mut conn,
        &config,
        *dead_stream,
        dead_id,
        Some("dead-1-again"),
        &[1, 2],
    )
    .await
    .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the replayed job is done",
        || async { handler.count() >= 3 },
    )
    .await;
    worker.stop().await;

    let handled = handler.handled.lock().unwrap().clone();
    let lane_of = |job_id: &str| {
        handled
            .iter()
            .find(|(id, _, _)| id == job_id)
            .unwrap_or_else(|| panic!("{job_id} was handled: {handled:?}"))
            .clone()
    };
    // The retry came back to `low` (its second attempt), the delayed job and
    // the replay ran in `high`.
    assert_eq!(
        lane_of("job-1"),
        ("job-1".to_owned(), Some("low".to_owned()), 2)
    );
    assert_eq!(lane_of("job-3").1.as_deref(), Some("high"));
    assert_eq!(lane_of("dead-1-again").1.as_deref(), Some("high"));
    // Nothing ever touched the default lane's stream of those partitions.
    for partition in Partition::all(config.partitions) {
        assert!(
            stream_entries(&mut conn, &config.ready_key(partition.default_stream()))
                .await
                .is_empty(),
            "the default lane's partition {partition} stayed empty"
        );
    }
}

#[tokio::test]
async fn a_job_without_a_lane_goes_to_the_default_lane_and_an_unknown_lane_is_refused() {
    let server = RedisServer::start();
    let config = laned_config("lanes-default");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let published = producer.publish(job(1, None)).await.unwrap();
    assert_eq!(published.lane.as_deref(), Some("normal"));
    // The default lane's keys are the queue's unlaned ones.
    let key = config.ready_key(published.partition.default_stream());
    assert_eq!(
        key,
        format!(
            "{}:{{laned-{:02}}}:ready",
            config.key_prefix, published.partition
        )
    );
    assert_eq!(stream_entries(&mut conn, &key).await.len(), 1);

    let refused = producer
        .publish_many([job(2, Some("high")), job(3, Some("urgent"))])
        .await;
    match refused {
        Err(Error::Publish(PublishError::UnknownLane {
            queue,
            job_id,
            lane,
            known,
        })) => {
            assert_eq!(
                (queue.as_str(), job_id.as_str(), lane.as_str()),
                ("laned", "job-3", "urgent")
            );
            assert_eq!(known, "high, normal, low");
        }
        other => panic!("expected UnknownLane, got {other:?}"),
    }
    let stored: usize = {
        let mut n = 0;
        for key in config.ready_keys() {
            n += stream_entries(&mut conn, &key).await.len();
        }
        n
    };
    assert_eq!(stored, 1, "a batch with an unknown lane writes nothing");
}

#[tokio::test]
async fn status_has_a_row_per_lane_and_pausing_a_partition_pauses_its_lanes() {
    let server = RedisServer::start();
    let config = laned_config("lanes-status");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    for n in 0..30 {
        let lane = ["high", "normal", "low"][n % 3];
        producer.publish(job(n, Some(lane))).await.unwrap();
    }
    queuegen_runtime::ops::pause::pause(&mut conn, &config, &[Partition::new(1)], "test", "lanes")
        .await
        .unwrap();

    let watched = [WatchedQueue {
        config: config.clone(),
        alerts: AlertThresholds::default(),
    }];
    let report = status(&mut redis.shared(), &watched).await.unwrap();
    let queue = &report.queues[0];
    assert_eq!(queue.partitions.len(), 6, "2 partitions x 3 lanes");
    for lane in ["high", "normal", "low"] {
        let undelivered: u64 = queue
            .partitions
            .iter()
            .filter(|p| p.lane.as_deref() == Some(lane))
            .map(|p| p.queue_group().and_then(|g| g.undelivered).unwrap_or(0))
            .sum();
        assert_eq!(undelivered, 10, "lane {lane}");
    }
    assert_eq!(queue.paused_partitions, vec![Partition::new(1)]);
    for row in &queue.partitions {
        assert_eq!(
            row.paused.is_some(),
            row.partition == Partition::new(1),
            "{}",
            row.place()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_work_on_a_cluster_each_in_its_partition_s_slot() {
    init_tracing();
    let cluster = queuegen_tests::RedisCluster::start();
    let config = laned_config("lanes-cluster");
    let redis = Redis::connect(cluster.url()).await.unwrap();
    queuegen_tests::library::load(&redis).await;
    queuegen_runtime::admin::ensure_groups(&redis, &config)
        .await
        .unwrap();
    for stream in StreamSlot::all(config.streams()) {
        let partition = config.partition_of_stream(stream);
        assert_eq!(
            redis::cluster_routing::Slot::for_key(config.ready_key(stream)),
            redis::cluster_routing::Slot::for_key(config.ready_key(partition.default_stream())),
            "{}: one slot for every lane of a partition",
            config.place(stream)
        );
    }
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs = (0..60).map(|n| job(n, Some(["high", "normal", "low"][n % 3])));
    producer.publish_many(jobs).await.unwrap();

    let handler = Lanes::default();
    let worker = start_worker(&redis, &config, handler.clone(), "lanes-cluster");
    wait_until(Duration::from_secs(20), "60 jobs are handled", || async {
        handler.count() >= 60
    })
    .await;
    worker.stop().await;
    let handled = handler.handled.lock().unwrap().clone();
    assert_eq!(handled.len(), 60, "each once: {handled:?}");
    for (job_id, lane, _) in handled {
        let n: usize = job_id.trim_start_matches("job-").parse().unwrap();
        assert_eq!(
            lane.as_deref(),
            Some(["high", "normal", "low"][n % 3]),
            "{job_id}"
        );
    }
}
