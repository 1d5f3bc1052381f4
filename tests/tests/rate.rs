//! The queue's rate limit (`handler.rate`) on a real server: five workers sharing a 200/s limit over 5 s start at most 1,000 jobs plus one bucket (200), and not far fewer; jobs over the limit wait undelivered, never fail or retry.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegen_runtime::metrics::{prometheus_client, Registry, WorkerMetrics};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, RateLimit, Redis, Worker,
};
use queuegen_tests::exposition::parse;
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    applied, dead_letters, run_until_told, scheduled_retries, unique_prefix,
};
use queuegen_tests::RedisServer;

const LIMIT: u32 = 200;
const WORKERS: usize = 5;
const RUN: Duration = Duration::from_secs(5);
const JOBS: usize = 3_000;

/// Records when each job started and with which attempt.
#[derive(Clone, Default)]
struct Timing {
    started: Arc<Mutex<Vec<(Instant, u32)>>>,
}

impl Handler<TestJob> for Timing {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.started
            .lock()
            .unwrap()
            .push((Instant::now(), ctx.attempt()));
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_workers_share_one_limit_and_jobs_over_it_wait_without_failing() {
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("rate"), 4);
        config.handler.rate = Some(RateLimit {
            limit: LIMIT,
            per: Duration::from_secs(1),
        });
        config.handler.concurrency = 16;
        config
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(500) {
        let jobs = chunk.iter().map(|n| {
            NewJob::new(
                format!("job-{n}"),
                "acme",
                TestJob::new(format!("s-{n}"), None),
            )
        });
        producer.publish_many(jobs).await.unwrap();
    }

    let handler = Timing::default();
    let mut registry = Registry::default();
    let metrics = WorkerMetrics::new();
    metrics.register(&mut registry);
    let mut running = Vec::new();
    let start = Instant::now();
    for n in 0..WORKERS {
        // Each worker its own connections, as separate processes would have.
        let redis = Redis::connect(server.url()).await.unwrap();
        let worker = Worker::new(&redis, config.clone(), handler.clone())
            .consumer_name(format!("rate-worker-{n}"))
            .with_metrics(metrics.clone())
            .read_block(Duration::from_millis(100));
        running.push(run_until_told(worker));
    }
    tokio::time::sleep(RUN).await;
    let within: Vec<(Instant, u32)> = handler
        .started
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|(at, _)| at.duration_since(start) <= RUN)
        .collect();
    let mut reports = Vec::new();
    for (stop, task) in running {
        stop.send(()).unwrap();
        reports.push(task.await.unwrap().unwrap());
    }

    // 200/s for 5 s, plus the full bucket the first call finds.
    let bound = (LIMIT as usize) * RUN.as_secs() as usize + LIMIT as usize;
    let started = within.len();
    let per_worker: Vec<u64> = reports.iter().map(|r| r.handled).collect();
    eprintln!("{started} jobs started in {RUN:?} (bound {bound}); per worker {per_worker:?}");
    assert!(
        started <= bound,
        "{started} jobs started in {RUN:?}, above {bound}"
    );
    // And not far below: a limiter that blocked (or stalled) would fail here.
    assert!(
        started >= bound * 2 / 3,
        "only {started} jobs started in {RUN:?} (limit {LIMIT}/s)"
    );
    // Every worker took part (one bucket shared, not one worker hogging it).
    assert!(per_worker.iter().all(|&n| n > 0), "{per_worker:?}");
    // Jobs over the limit waited: no retries, no dead letters, first attempts only.
    let all = handler.started.lock().unwrap().clone();
    assert!(all.iter().all(|(_, attempt)| *attempt == 1));
    for report in &reports {
        assert_eq!(
            (report.retried, report.dead_lettered, report.failed),
            (0, 0, 0),
            "{report:?}"
        );
    }
    assert!(dead_letters(&mut conn, &config).await.is_empty());
    assert!(scheduled_retries(&mut conn, &config).await.is_empty());
    // The waits on the bucket are counted.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let waited = parse(&text)
        .unwrap()
        .sum("queuegen_rate_limited_seconds_total", &[]);
    assert!(waited > 1.0, "waited {waited} s on the rate limit");
    let handled: u64 = reports.iter().map(|r| r.handled).sum();
    assert_eq!(handled as usize, all.len());
    assert!(
        all.len() < JOBS,
        "the backlog was not all read: {}",
        all.len()
    );
}

/// The same limit across five worker processes (`suite-worker`, each its
/// own connections and clock): the group's deliveries 5 s after the first
/// process started, read from the server, stay within 1,000 + one bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_worker_processes_share_one_limit() {
    use queuegen_tests::suite::worker::{QueueKind, Tuning};
    use queuegen_tests::suite::{Hold, WorkerSpec};

    let server = RedisServer::start();
    let spec = WorkerSpec {
        url: server.url(),
        queue: QueueKind::Jobs,
        key_prefix: unique_prefix("rate-processes"),
        tuning: Tuning {
            concurrency: Some(16),
            shutdown_budget_ms: Some(2_000),
            rate: Some((LIMIT, 1_000)),
            ..Tuning::default()
        },
        consumer: "rate-0".into(),
        hold: Hold::Never,
        effect_replicas: 0,
    };
    let config = spec.config();
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let ids: Vec<String> = (0..JOBS).map(|n| format!("job-{n}")).collect();
    for chunk in ids.chunks(500) {
        let jobs = chunk
            .iter()
            .map(|id| NewJob::new(id.clone(), "acme", TestJob::new(id.clone(), None)));
        producer.publish_many(jobs).await.unwrap();
    }

    let start = Instant::now();
    let mut children = Vec::new();
    for n in 0..WORKERS {
        let named = spec.named(format!("rate-{n}"));
        children.push(named.spawn_quiet(env!("CARGO_BIN_EXE_suite-worker")));
    }
    tokio::time::sleep_until((start + RUN).into()).await;
    // Entries delivered to the group so far, by the server's count.
    let mut delivered = 0u64;
    for partition in StreamSlot::all(config.partitions) {
        let reply: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(config.ready_key(partition))
            .query_async(&mut conn)
            .await
            .unwrap();
        let group = reply
            .groups
            .iter()
            .find(|g| g.name == config.group)
            .unwrap();
        delivered += group.entries_read.unwrap() as u64;
    }
    for child in &children {
        let pid = child.id().expect("still running");
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .is_ok_and(|status| status.success());
        assert!(sent, "kill -TERM {pid}");
    }
    for mut child in children {
        let status = child.wait().await.unwrap();
        assert!(status.success(), "{status:?}");
    }

    let bound = u64::from(LIMIT) * RUN.as_secs() + u64::from(LIMIT);
    eprintln!("{delivered} entries delivered to 5 processes in {RUN:?} (bound {bound})");
    assert!(delivered <= bound, "{delivered} delivered in {RUN:?}");
    assert!(delivered >= bound * 2 / 3, "only {delivered} delivered");
    // Every job handled was handled once, on its first attempt.
    let tally = spec
        .ledger(&redis)
        .tally(ids.iter().map(String::as_str))
        .await
        .unwrap();
    assert_eq!(tally.deliveries(), tally.done(), "redelivered jobs");
    assert!(tally.done() >= delivered * 9 / 10, "{} done", tally.done());
    assert!(dead_letters(&mut conn, &config).await.is_empty());
    assert!(scheduled_retries(&mut conn, &config).await.is_empty());
}
