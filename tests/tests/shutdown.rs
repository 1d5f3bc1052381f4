//! Shutdown: jobs still running at the end of the budget stay pending with this consumer; finished ones are acked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    init_tracing, pending_count, pending_entries, run_until_told, unique_prefix, wait_until,
};
use queuegen_tests::{library, RedisServer};

/// Counts handlers started and finished; each sleeps `work` first.
#[derive(Clone)]
struct Sleeper {
    work: Duration,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

impl Sleeper {
    fn new(work: Duration) -> Self {
        Sleeper {
            work,
            started: Arc::default(),
            finished: Arc::default(),
        }
    }
}

impl Handler<TestJob> for Sleeper {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.work).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
        Ok(Outcome::Done)
    }
}

async fn publish(redis: &Redis, config: &QueueConfig, jobs: usize) {
    let producer = Producer::<TestJob>::new(redis, config.clone());
    let jobs = (0..jobs).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            "acme",
            TestJob::new(format!("doc-{n}"), None),
        )
    });
    producer.publish_many(jobs).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_running_past_the_budget_stay_pending_with_this_consumer() {
    init_tracing();
    let server = RedisServer::start();
    let budget = Duration::from_secs(1);
    let config = {
        let mut config = test_config(&unique_prefix("shutdown-slow"), 2);
        config.handler.shutdown_budget = budget;
        config.handler.timeout = Duration::from_secs(60);
        config.handler.concurrency = 4;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    publish(&redis, &config, 3).await;

    let handler = Sleeper::new(Duration::from_secs(30));
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let consumer = worker.consumer().to_owned();
    let (stop, running) = run_until_told(worker);
    let started = handler.started.clone();
    wait_until(Duration::from_secs(10), "all three jobs run", || {
        let started = started.clone();
        async move { started.load(Ordering::SeqCst) == 3 }
    })
    .await;

    let shutdown_at = Instant::now();
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    let took = shutdown_at.elapsed();
    // The budget is waited out in full; the worker's read block is capped at
    // budget / 4, so the whole shutdown is about budget + 250 ms.
    assert!(took >= budget, "waited for the budget: {took:?}");
    assert!(
        took < budget + Duration::from_millis(250) + Duration::from_secs(1),
        "shutdown took {took:?}"
    );

    assert_eq!(report.in_flight_left_pending, 3, "{report:?}");
    assert_eq!(
        (report.done, report.handled, report.failed),
        (0, 0, 0),
        "{report:?}"
    );
    assert_eq!(handler.finished.load(Ordering::SeqCst), 0);
    let mut conn = server.async_connection().await;
    let mut pending = Vec::new();
    for key in config.ready_keys() {
        pending.extend(pending_entries(&mut conn, &key, &config.group).await);
    }
    assert_eq!(pending.len(), 3, "none acknowledged: {pending:?}");
    assert!(
        pending
            .iter()
            .all(|entry| entry.consumer == consumer && entry.times_delivered == 1),
        "owned by {consumer}: {pending:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_finishing_within_the_budget_are_all_acked() {
    init_tracing();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("shutdown-fast"), 2);
        config.handler.shutdown_budget = Duration::from_secs(5);
        config.handler.concurrency = 4;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    publish(&redis, &config, 20).await;

    let handler = Sleeper::new(Duration::from_millis(300));
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let (stop, running) = run_until_told(worker);
    let started = handler.started.clone();
    wait_until(Duration::from_secs(10), "jobs are running", || {
        let started = started.clone();
        async move { started.load(Ordering::SeqCst) >= 1 }
    })
    .await;
    let finished_before = handler.finished.load(Ordering::SeqCst);
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    let started = handler.started.load(Ordering::SeqCst);
    let finished = handler.finished.load(Ordering::SeqCst);
    assert!(
        finished > finished_before,
        "jobs in flight at shutdown finished"
    );
    assert_eq!(finished, started, "every started job finished");
    assert_eq!(report.in_flight_left_pending, 0, "{report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.done as usize, started, "{report:?}");
    assert_eq!(report.handled as usize, started, "{report:?}");

    let mut conn = server.async_connection().await;
    for key in config.ready_keys() {
        assert_eq!(
            pending_count(&mut conn, &key, &config.group).await,
            0,
            "pending on {key}"
        );
    }
}
