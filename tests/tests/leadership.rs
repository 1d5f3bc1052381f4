//! Leader-elected loops: per partition, only the worker holding its loops lease runs recovery and the retry scheduler; a killed leader's partitions move within a lease period plus a tick, a stopped one's at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::metrics::{Registry, WorkerMetrics};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Worker,
};
use queuegen_tests::fixtures::{test_config, test_job_pairs, TestJob};
use queuegen_tests::suite::worker::{QueueKind, Tuning};
use queuegen_tests::suite::{Hold, WorkerSpec};
use queuegen_tests::support::{
    age_pending, applied, command_calls, deliver_to, pending_count, run_until_told, unique_prefix,
    wait_until,
};
use queuegen_tests::{exposition, RedisServer};
use tokio::time::Instant;

/// `retry` jobs ask for one retry, then succeed; everything else succeeds.
/// Records every (job id, attempt) it runs.
#[derive(Clone, Default)]
struct Recording {
    runs: Arc<Mutex<Vec<(String, u32)>>>,
}

impl Handler<TestJob> for Recording {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let attempt = ctx.attempt();
        self.runs
            .lock()
            .unwrap()
            .push((ctx.job_id().to_owned(), attempt));
        if job.subject_ref == "retry" && attempt == 1 {
            return Ok(Outcome::Retry {
                after: Some(Duration::from_millis(50)),
                reason: "once more".into(),
            });
        }
        Ok(Outcome::Done)
    }
}

/// `queuegen_loops_leader` of `partition` in `registry`.
fn leaders_gauge(registry: &Registry, config: &QueueConfig, partition: u16) -> f64 {
    let mut text = String::new();
    queuegen_runtime::metrics::prometheus_client::encoding::text::encode(&mut text, registry)
        .unwrap();
    let partition = partition.to_string();
    exposition::parse(&text)
        .unwrap()
        .value(
            "queuegen_loops_leader",
            &[
                ("queue", &config.queue),
                ("partition", partition.as_str()),
                ("group", &config.group),
            ],
        )
        .unwrap_or_else(|| panic!("no queuegen_loops_leader series for partition {partition}"))
}

/// Who holds each partition's loops lease now (`None`: nobody).
async fn holders(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
) -> Vec<Option<String>> {
    let mut holders = Vec::new();
    for partition in StreamSlot::all(config.partitions) {
        let holder: Option<String> = redis::cmd("GET")
            .arg(config.loops_lease_key(partition))
            .query_async(conn)
            .await
            .unwrap();
        holders.push(holder);
    }
    holders
}

/// An entry added long ago, delivered to a consumer that vanished ten
/// minutes ago: stuck until a recovery claims it.
async fn stuck_entry(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
    partition: StreamSlot,
    job_id: &str,
) {
    let key = config.ready_key(partition);
    let pairs = test_job_pairs(job_id);
    let id = format!("{}-0", 1000 + u64::from(partition.index()));
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg(&id)
        .arg(&pairs[..])
        .query_async(conn)
        .await
        .unwrap();
    deliver_to(conn, &key, &config.group, "vanished").await;
    age_pending(conn, &key, &config.group, "vanished", &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_leads_each_partition_and_every_retry_and_claim_happens_once() {
    const PARTITIONS: u16 = 4;
    const RETRIES: usize = 20;
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("leaders"), PARTITIONS);
        config.claim.every = Duration::from_millis(200);
        config.claim.min_idle = Duration::from_secs(60);
        config.retry.promote_every = Duration::from_millis(200);
        config
    };
    let (redis, mut conn) = applied(&server, &config).await;
    for partition in 0..PARTITIONS {
        stuck_entry(
            &mut conn,
            &config,
            StreamSlot::new(partition),
            &format!("stuck-{partition}"),
        )
        .await;
    }

    let handler = Recording::default();
    // One registry for both, as an application running two workers would.
    let metrics = WorkerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut running = Vec::new();
    for name in ["first", "second"] {
        let worker = Worker::new(&redis, config.clone(), handler.clone())
            .consumer_name(name)
            .with_metrics(metrics.clone());
        running.push(run_until_told(worker));
    }
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs = (0..RETRIES)
        .map(|n| NewJob::new(format!("retry-{n}"), "acme", TestJob::new("retry", None)));
    producer.publish_many(jobs).await.unwrap();

    let runs = handler.runs.clone();
    wait_until(
        Duration::from_secs(20),
        "every stuck job done once and every retry job twice",
        || {
            let count = runs.lock().unwrap().len();
            async move { count == usize::from(PARTITIONS) + 2 * RETRIES }
        },
    )
    .await;

    // Idle now: count the loops' reads over some ticks.
    let leaders = holders(&mut conn, &config).await;
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let xpending = command_calls(&mut conn, "xpending").await;
    let zrangebyscore = command_calls(&mut conn, "zrangebyscore").await;
    let elapsed = started.elapsed();
    let ticks = (elapsed.as_millis() / config.claim.every.as_millis()) as u64;
    println!(
        "over {elapsed:?} ({ticks} ticks, {PARTITIONS} partitions, 2 workers): {xpending} XPENDING, {zrangebyscore} ZRANGEBYSCORE"
    );
    // One worker per partition and tick (two would send twice as many).
    let most = u64::from(PARTITIONS) * (ticks + 2);
    assert!(
        xpending <= most,
        "{xpending} XPENDING, at most {most} expected"
    );
    // The scheduler reads two sets per partition: retries and delayed jobs.
    assert!(
        zrangebyscore <= 2 * most,
        "{zrangebyscore} ZRANGEBYSCORE, at most {} expected",
        2 * most
    );
    let fewest = u64::from(PARTITIONS) * ticks / 2;
    assert!(
        xpending >= fewest && zrangebyscore >= 2 * fewest,
        "the loops still run"
    );

    // The gauge: one leader per partition among the two.
    for partition in 0..PARTITIONS {
        assert_eq!(
            leaders_gauge(&registry, &config, partition),
            1.0,
            "partition {partition}"
        );
    }
    // Each partition led by exactly one of the two, the same throughout.
    assert_eq!(
        holders(&mut conn, &config).await,
        leaders,
        "no lease changed hands"
    );
    for (partition, holder) in leaders.into_iter().enumerate() {
        let holder = holder.unwrap_or_else(|| panic!("partition {partition} has no leader"));
        assert!(
            holder == "worker:first" || holder == "worker:second",
            "partition {partition} led by {holder}"
        );
    }

    // Both stop at once (a worker stopping first would hand its leases to the other).
    let mut tasks = Vec::new();
    for (stop, task) in running {
        stop.send(()).unwrap();
        tasks.push(task);
    }
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.unwrap().unwrap());
    }
    println!("{reports:#?}");
    let taken: u64 = reports.iter().map(|report| report.loops_leases_taken).sum();
    assert!(taken >= u64::from(PARTITIONS), "{reports:?}");
    for partition in 0..PARTITIONS {
        assert_eq!(
            leaders_gauge(&registry, &config, partition),
            0.0,
            "partition {partition}"
        );
    }
    let claimed: u64 = reports.iter().map(|report| report.claimed).sum();
    let promoted: u64 = reports.iter().map(|report| report.promoted).sum();
    assert_eq!(
        claimed,
        u64::from(PARTITIONS),
        "every stuck entry claimed once"
    );
    assert_eq!(promoted, RETRIES as u64, "every retry promoted once");

    let mut attempts: HashMap<String, Vec<u32>> = HashMap::new();
    for (job, attempt) in handler.runs.lock().unwrap().iter() {
        attempts.entry(job.clone()).or_default().push(*attempt);
    }
    for partition in 0..PARTITIONS {
        assert_eq!(attempts[&format!("stuck-{partition}")], [1]);
        assert_eq!(
            pending_count(
                &mut conn,
                &config.ready_key(StreamSlot::new(partition)),
                &config.group
            )
            .await,
            0
        );
    }
    for n in 0..RETRIES {
        let mut seen = attempts[&format!("retry-{n}")].clone();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2], "retry-{n}");
    }
    // A graceful stop released every lease.
    assert_eq!(
        holders(&mut conn, &config).await,
        vec![None; usize::from(PARTITIONS)]
    );
}

/// A `suite-worker` process, killed on drop.
struct Process {
    child: tokio::process::Child,
}

impl Process {
    fn spawn(spec: &WorkerSpec) -> Process {
        Process {
            child: spec.spawn_quiet(env!("CARGO_BIN_EXE_suite-worker")),
        }
    }

    fn terminate(&self) {
        let pid = self.child.id().expect("still running");
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .is_ok_and(|status| status.success());
        assert!(sent, "kill -TERM {pid}");
    }
}

/// Two worker processes over one queue: `first` leads every partition
/// (started alone), `second` runs beside it without leading anything.
async fn leader_and_follower(
    name: &str,
) -> (
    RedisServer,
    QueueConfig,
    redis::aio::MultiplexedConnection,
    Process,
    Process,
) {
    let server = RedisServer::start();
    let spec = WorkerSpec {
        url: server.url(),
        queue: QueueKind::Jobs,
        key_prefix: unique_prefix(name),
        tuning: Tuning {
            partitions: Some(2),
            claim_every_ms: Some(300),
            claim_min_idle_ms: Some(1_000),
            retry_promote_every_ms: Some(100),
            shutdown_budget_ms: Some(2_000),
            ..Tuning::default()
        },
        consumer: "first".into(),
        hold: Hold::Never,
        effect_replicas: 0,
    };
    let config = spec.config();
    let (_redis, mut conn) = applied(&server, &config).await;
    let first = Process::spawn(&spec);
    let led_by_first = vec![Some("worker:first".to_owned()); 2];
    let deadline = Instant::now() + Duration::from_secs(20);
    while holders(&mut conn, &config).await != led_by_first {
        assert!(Instant::now() < deadline, "the first worker never led");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Running once it read both leases: the first holds them all and only
    // renews (`MULTI`), so the `MGET` of the leases not held is the second's.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    let second = Process::spawn(&spec.named("second"));
    until_mget_calls(&conn, 1, "the second worker read the leases").await;
    // Still led by the first: the second found both leases held, and a
    // follower's tick costs one `MGET`, no lease call per partition (its
    // start sent function calls of its own before).
    let calls_at_start = command_calls(&mut conn, "fcall").await;
    until_mget_calls(&conn, 3, "the second worker read the leases every tick").await;
    assert_eq!(command_calls(&mut conn, "fcall").await, calls_at_start);
    assert_eq!(holders(&mut conn, &config).await, led_by_first);
    (server, config, conn, first, second)
}

/// Waits (up to 20 s) until the server has run `calls` `MGET`s since its stats were reset.
async fn until_mget_calls(conn: &redis::aio::MultiplexedConnection, calls: u64, what: &str) {
    wait_until(Duration::from_secs(20), what, || {
        let mut conn = conn.clone();
        async move { command_calls(&mut conn, "mget").await >= calls }
    })
    .await;
}

/// How long until `second` holds every partition's lease, polled every 5 ms.
async fn until_second_leads(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
    since: Instant,
) -> Duration {
    let led_by_second = vec![Some("worker:second".to_owned()); usize::from(config.partitions)];
    loop {
        if holders(conn, config).await == led_by_second {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "the second worker never took over"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_s_partitions_move_within_a_lease_period_and_a_tick() {
    let (_server, config, mut conn, mut first, _second) =
        leader_and_follower("leader-killed").await;
    let tick = config.claim.every;
    let period = tick * 3;

    // A job the second worker must recover once the first is gone: stuck
    // with a consumer that vanished.
    stuck_entry(&mut conn, &config, StreamSlot::new(1), "left-behind").await;
    // The first may claim it before it dies; either way it gets done.
    first.child.start_kill().unwrap();
    let killed = Instant::now();
    first.child.wait().await.unwrap();
    let took_over = until_second_leads(&mut conn, &config, killed).await;
    // A round trip and the 5 ms poll on top of the bound.
    let slack = Duration::from_millis(150);
    println!(
        "takeover after kill -9: {took_over:?} (bound: lease period {period:?} + tick {tick:?} + {slack:?} slack)"
    );
    assert!(
        took_over <= period + tick + slack,
        "took over after {took_over:?}, beyond {period:?} + {tick:?}"
    );

    // The second recovers what was left pending.
    let key = config.ready_key(StreamSlot::new(1));
    wait_until(
        Duration::from_secs(10),
        "the entry is recovered and acked",
        || {
            let mut conn = conn.clone();
            let key = key.clone();
            let group = config.group.clone();
            async move { pending_count(&mut conn, &key, &group).await == 0 }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leader_releases_its_leases_and_the_other_takes_them_at_its_next_tick() {
    let (_server, config, mut conn, mut first, _second) =
        leader_and_follower("leader-stopped").await;
    let tick = config.claim.every;
    let period = tick * 3;

    first.terminate();
    let stopped = Instant::now();
    let took_over = until_second_leads(&mut conn, &config, stopped).await;
    let status = first.child.wait().await.unwrap();
    assert!(
        status.success(),
        "the first worker stopped cleanly: {status:?}"
    );
    let slack = Duration::from_millis(150);
    println!("takeover after SIGTERM: {took_over:?} (bound: tick {tick:?} + {slack:?} slack; the lease period is {period:?})");
    assert!(
        took_over <= tick + slack,
        "took over after {took_over:?}: the lease was not released at stop"
    );
}

#[tokio::test]
async fn each_group_has_its_own_leader() {
    let server = RedisServer::start();
    let first = {
        let mut config = test_config(&unique_prefix("group-leaders"), 2);
        config.claim.every = Duration::from_millis(100);
        config
    };
    let second = QueueConfig {
        group: "other-group".into(),
        ..first.clone()
    };
    let (redis, mut conn) = applied(&server, &first).await;
    ensure_groups(&redis, &second).await.unwrap();
    let mut running = Vec::new();
    for config in [&first, &second] {
        let worker = Worker::new(&redis, config.clone(), Recording::default());
        let consumer = worker.consumer().to_owned();
        let (stop, task) = run_until_told(worker);
        running.push((config, consumer, stop, task));
    }
    for (config, consumer, _, _) in &running {
        let led = vec![Some(format!("worker:{consumer}")); 2];
        let deadline = Instant::now() + Duration::from_secs(10);
        while holders(&mut conn, config).await != led {
            assert!(
                Instant::now() < deadline,
                "group {} never led by its worker",
                config.group
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for (_, _, stop, task) in running {
        stop.send(()).unwrap();
        let report = task.await.unwrap().unwrap();
        assert_eq!(report.loops_leases_taken, 2, "{report:?}");
    }
}
