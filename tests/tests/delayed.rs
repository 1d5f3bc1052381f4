//! Delayed publish (`publish_at`, `publish_after`): a job starts no earlier than due, and soon after; it waits once; `status` counts it.
//!
//! The kill -9 of the scheduler mid-batch is the failure suite's
//! `delayed-kill` row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuegen_runtime::ops::status::{status, WatchedQueue};
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    applied, delayed_jobs, init_tracing, run_until_told, spawn_worker, unique_prefix, wait_until,
};
use queuegen_tests::RedisServer;

const PROMOTE_EVERY: Duration = Duration::from_millis(100);

fn config(name: &str) -> QueueConfig {
    {
        let mut config = test_config(&unique_prefix(name), 4);
        config.retry.promote_every = PROMOTE_EVERY;
        config.handler.concurrency = 64;
        config
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// When each job's handler started, in Unix ms, and how often it ran.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<HashMap<String, Vec<u64>>>>);

impl Handler<TestJob> for Starts {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let at = now_ms();
        self.0
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default()
            .push(at);
        Ok(Outcome::Done)
    }
}

fn job(job_id: &str) -> NewJob<TestJob> {
    NewJob::new(job_id, "acme", TestJob::new(job_id, None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_random_delays_start_never_early_and_promptly() {
    init_tracing();
    let server = RedisServer::start();
    let config = config("delayed-timing");
    let (redis, _) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let starts = Starts::default();
    let worker = Worker::new(&redis, config.clone(), starts.clone());
    let (stop, running) = run_until_told(worker);

    // Delays of 0 to 3 s, from a fixed-seed generator: reproducible.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut due = HashMap::new();
    let mut publishes = tokio::task::JoinSet::new();
    for i in 0..1_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(seed % 3_000);
        let id = format!("d-{i}");
        let producer = producer.clone();
        publishes.spawn(async move {
            let delayed = producer.publish_after(job(&id), delay).await.unwrap();
            (id, delayed)
        });
    }
    while let Some(published) = publishes.join_next().await {
        let (id, delayed) = published.unwrap();
        assert!(!delayed.duplicate, "{id}");
        due.insert(id, delayed.due_ms);
    }

    let all = starts.clone();
    wait_until(Duration::from_secs(15), "every delayed job started", || {
        let started = all.0.lock().unwrap().len();
        async move { started == 1_000 }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.delayed_promoted, 1_000, "{report:?}");

    let starts = starts.0.lock().unwrap();
    let mut late: Vec<i64> = Vec::with_capacity(1_000);
    for (id, due_ms) in &due {
        let runs = &starts[id];
        assert_eq!(runs.len(), 1, "{id} ran {} times", runs.len());
        late.push(runs[0] as i64 - *due_ms as i64);
    }
    late.sort_unstable();
    let early: Vec<&i64> = late.iter().filter(|&&ms| ms < 0).collect();
    assert!(early.is_empty(), "started before due by {early:?} ms");
    let p50 = late[late.len() / 2];
    let p99 = late[late.len() * 99 / 100];
    eprintln!(
        "lateness of 1000 delayed jobs (promote_every {PROMOTE_EVERY:?}): p50 {p50} ms, p99 {p99} ms, max {} ms",
        late[late.len() - 1]
    );
    let bound = PROMOTE_EVERY.as_millis() as i64 + 100;
    assert!(p99 <= bound, "p99 lateness {p99} ms > {bound} ms");
}

#[tokio::test]
async fn a_job_id_waits_once_and_status_counts_the_waiting() {
    init_tracing();
    let server = RedisServer::start();
    let config = config("delayed-once");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let in_a_minute = SystemTime::now() + Duration::from_secs(60);
    let first = producer.publish_at(job("once"), in_a_minute).await.unwrap();
    let second = producer
        .publish_after(job("once"), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(second.duplicate, "{second:?}");
    assert_eq!(second.due_ms, first.due_ms, "the first due time stands");
    producer
        .publish_after(job("other"), Duration::from_secs(30))
        .await
        .unwrap();
    let waiting = delayed_jobs(&mut conn, &config).await;
    assert_eq!(waiting.len(), 2, "{waiting:?}");

    let report = status(
        &mut conn,
        &[WatchedQueue {
            config: config.clone(),
            alerts: Default::default(),
        }],
    )
    .await
    .unwrap();
    let partitions = &report.queues[0].partitions;
    let total: u64 = partitions.iter().map(|p| p.delayed.scheduled).sum();
    assert_eq!(total, 2);
    let next_due = partitions
        .iter()
        .filter_map(|p| p.delayed.next_due_in_ms)
        .min()
        .unwrap();
    assert!(
        (25_000..=30_000).contains(&next_due),
        "the next delayed job is due in about 30 s: {next_due} ms"
    );
    for partition in partitions {
        assert_eq!(partition.retries.scheduled, 0, "retries are counted apart");
    }
}

/// A job_id delayed again after its promotion is a duplicate answered with
/// when it was appended: accepted, its promotion would find the first
/// promotion's marker and append nothing (library v5 lost it that way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_id_delayed_again_after_its_promotion_is_a_duplicate_not_a_lost_job() {
    init_tracing();
    let server = RedisServer::start();
    let config = config("delayed-again");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let first = producer
        .publish_after(job("again"), Duration::from_millis(50))
        .await
        .unwrap();
    let starts = Starts::default();
    let worker = spawn_worker(Worker::new(&redis, config.clone(), starts.clone()));
    wait_until(Duration::from_secs(10), "the first is handled", || async {
        starts.0.lock().unwrap().contains_key("again")
    })
    .await;
    let second = producer
        .publish_after(job("again"), Duration::from_millis(50))
        .await
        .unwrap();
    worker.stop().await;
    assert!(!first.duplicate);
    assert!(second.duplicate, "{second:?}");
    assert!(
        second.due_ms >= first.due_ms && second.due_ms <= now_ms(),
        "answered with when it was appended: {second:?} after {first:?}"
    );
    assert!(
        delayed_jobs(&mut conn, &config).await.is_empty(),
        "nothing waits"
    );
}

#[tokio::test]
async fn a_due_time_in_the_past_runs_at_the_next_tick_and_bad_input_writes_nothing() {
    init_tracing();
    let server = RedisServer::start();
    let config = config("delayed-past");
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let starts = Starts::default();

    // An empty job_id is refused before anything is sent.
    let err = producer
        .publish_after(
            NewJob::new("", "acme", TestJob::new("x", None)),
            Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("job_id"), "{err}");
    assert!(delayed_jobs(&mut conn, &config).await.is_empty());

    producer
        .publish_at(job("late"), UNIX_EPOCH + Duration::from_secs(1))
        .await
        .unwrap();
    let worker = Worker::new(&redis, config.clone(), starts.clone());
    let (stop, running) = run_until_told(worker);
    let seen = starts.clone();
    wait_until(Duration::from_secs(5), "the overdue job ran", || {
        let ran = seen.0.lock().unwrap().contains_key("late");
        async move { ran }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(delayed_jobs(&mut conn, &config).await.is_empty());
}
