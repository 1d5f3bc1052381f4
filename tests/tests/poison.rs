//! Poison quarantine: an entry whose handler crashes on every delivery is dead-lettered after `poison.max_deliveries` deliveries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Worker};
use queuegen_tests::fixtures::{retrying_config, TestJob};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, run_until_told, scheduled_retries, unique_prefix,
    wait_for_dead_letters,
};
use queuegen_tests::{library, RedisServer};

/// Counts runs per job; panics on `crash` (a handler bug that takes down
/// whatever runs it), succeeds otherwise.
#[derive(Clone, Default)]
struct Crashes {
    runs: Arc<Mutex<HashMap<String, u32>>>,
}

impl Handler<TestJob> for Crashes {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        *self
            .runs
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default() += 1;
        if job.subject_ref == "crash" {
            panic!("segfault-like bug on {}", ctx.job_id());
        }
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_on_every_delivery_is_quarantined() {
    init_tracing();
    let server = RedisServer::start();
    let config = retrying_config(&unique_prefix("poison"));
    let max = config.poison.max_deliveries;
    assert_eq!(max, 3, "tests/queues.yaml: retrying.poison.max_deliveries");
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let crashing = producer
        .publish(NewJob::new(
            "job-crash",
            "acme",
            TestJob::new("crash", None),
        ))
        .await
        .unwrap();
    producer
        .publish(NewJob::new("job-fine", "acme", TestJob::new("fine", None)))
        .await
        .unwrap();

    let handler = Crashes::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let (stop, running) = run_until_told(worker);
    let mut conn = server.async_connection().await;
    // Each redelivery waits out claim.min_idle (1.2 s): about 4 s in all.
    wait_for_dead_letters(&conn, &config, 1, Duration::from_secs(15)).await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    let runs = handler.runs.lock().unwrap().clone();
    assert_eq!(
        runs["job-crash"], max,
        "the handler ran once per delivery, {max} in all"
    );
    assert_eq!(runs["job-fine"], 1, "the worker kept working meanwhile");
    assert_eq!(report.quarantined, 1, "{report:?}");
    assert_eq!(
        report.failed,
        u64::from(max),
        "every crash left it pending: {report:?}"
    );
    assert_eq!(report.retried, 0, "a crash is not a retry: {report:?}");
    assert_eq!(report.done, 1, "{report:?}");
    assert_eq!(report.claimed, u64::from(max - 1), "{report:?}");

    let (partition, _, fields) = dead_letters(&mut conn, &config).await.remove(0);
    assert_eq!(config.partition_of_stream(partition), crashing.partition);
    assert_eq!(fields["reason"], "poison");
    assert_eq!(fields["job_id"], "job-crash");
    assert_eq!(fields["source_id"], crashing.stream_id);
    assert_eq!(fields["deliveries"], max.to_string());
    assert_eq!(
        fields["attempt"], "1",
        "the application attempt never moved"
    );
    assert!(
        fields["detail"].contains(&format!("delivered {max} times")),
        "{fields:?}"
    );
    assert!(all_pending(&mut conn, &config).await.is_empty());
    assert!(scheduled_retries(&mut conn, &config).await.is_empty());
}
