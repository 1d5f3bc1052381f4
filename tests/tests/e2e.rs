//! End to end: 1,000 jobs over 4 partitions, three workers in one process, every job handled exactly once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Worker, WorkerReport,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    init_tracing, pending_count, run_until_told, unique_prefix, wait_until,
};
use queuegen_tests::{library, RedisServer};

const JOBS: u32 = 1_000;
const PARTITIONS: u16 = 4;

/// Records `(job_id, consumer, body)` of every delivery.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<(String, String, TestJob)>>>,
}

impl Handler<TestJob> for Recorder {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        tokio::task::yield_now().await;
        self.seen
            .lock()
            .unwrap()
            .push((ctx.job_id().to_owned(), ctx.consumer().to_owned(), job));
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_drain_a_thousand_jobs_exactly_once() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("e2e"), PARTITIONS);
    let admin = Redis::connect(server.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();

    let producer = Producer::<TestJob>::new(&admin, config.clone());
    let jobs = (0..JOBS).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            format!("tenant-{}", n % 7),
            TestJob::new(format!("doc-{n}"), Some(n)),
        )
    });
    let published = producer.publish_many(jobs).await.unwrap();
    assert_eq!(published.len(), JOBS as usize);
    let mut per_partition = [0usize; PARTITIONS as usize];
    for job in &published {
        per_partition[usize::from(job.partition.index())] += 1;
    }
    assert!(
        per_partition.iter().all(|&n| n > 0),
        "every partition gets jobs: {per_partition:?}"
    );

    let recorder = Recorder::default();
    let mut stops = Vec::new();
    let mut workers = Vec::new();
    let mut consumers = HashSet::new();
    for _ in 0..3 {
        // Each worker has connections of its own, like separate processes.
        let redis = Redis::connect(server.url()).await.unwrap();
        let worker = Worker::new(&redis, config.clone(), recorder.clone());
        assert!(
            consumers.insert(worker.consumer().to_owned()),
            "consumer names are unique"
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        workers.push(tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        })));
    }

    let seen = recorder.seen.clone();
    wait_until(Duration::from_secs(30), "all jobs are handled", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().len() >= JOBS as usize }
    })
    .await;
    for stop in stops {
        stop.send(()).unwrap();
    }
    let mut total = WorkerReport::default();
    for worker in workers {
        let report = worker.await.unwrap().unwrap();
        total.handled += report.handled;
        total.done += report.done;
        total.failed += report.failed;
        total.decode_errors += report.decode_errors;
        total.in_flight_left_pending += report.in_flight_left_pending;
    }

    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), JOBS as usize, "no job handled twice");
    let ids: HashSet<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    let expected: HashSet<String> = (0..JOBS).map(|n| format!("job-{n}")).collect();
    assert_eq!(ids.len(), JOBS as usize, "no duplicates");
    assert!(ids.iter().all(|id| expected.contains(*id)));
    for (id, consumer, body) in &seen {
        assert!(consumers.contains(consumer), "{id} handled by {consumer}");
        let n: u32 = id.trim_start_matches("job-").parse().unwrap();
        assert_eq!(
            *body,
            TestJob::new(format!("doc-{n}"), Some(n)),
            "body of {id}"
        );
    }
    assert_eq!(
        total,
        WorkerReport {
            handled: u64::from(JOBS),
            done: u64::from(JOBS),
            ..WorkerReport::default()
        }
    );

    let mut conn = server.async_connection().await;
    for (partition, key) in config.ready_keys().iter().enumerate() {
        assert_eq!(
            pending_count(&mut conn, key, &config.group).await,
            0,
            "pending on {key}"
        );
        let len: usize = redis::cmd("XLEN")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(len, per_partition[partition], "entries on {key}");
    }
}

/// Tracks how many handlers run at once.
#[derive(Clone, Default)]
struct Gauge {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
}

impl Handler<TestJob> for Gauge {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
        Ok(Outcome::Done)
    }
}

// With every partition full, a read over several streams could return COUNT
// entries per stream; the worker must still never run more jobs than permits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_never_runs_more_jobs_than_its_concurrency() {
    init_tracing();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("e2e-permits"), 8);
        config.handler.concurrency = 3;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs = (0..240).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            format!("tenant-{n}"),
            TestJob::new("doc", None),
        )
    });
    producer.publish_many(jobs).await.unwrap();

    let gauge = Gauge::default();
    let worker = Worker::new(&redis, config.clone(), gauge.clone());
    let (stop, running) = run_until_told(worker);
    let done = gauge.done.clone();
    wait_until(Duration::from_secs(30), "all jobs are done", || {
        let done = done.clone();
        async move { done.load(Ordering::SeqCst) == 240 }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, 240, "{report:?}");
    let most = gauge.most.load(Ordering::SeqCst);
    assert!(most <= 3, "at most 3 jobs at once, saw {most}");
    assert!(most >= 2, "jobs do run concurrently, saw {most}");
}
