//! Retries: transient failures come back with growing, jittered delays until the budget is spent, then dead-letter; replays run again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::retry::backoff;
use queuegen_runtime::{
    transitions, Envelope, Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig,
    Redis, Worker, WorkerReport,
};
use queuegen_tests::fixtures::{retrying_config, TestJob};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, run_until_told, scheduled_retries, stream_entries,
    unique_prefix, wait_for_dead_letters, wait_until,
};
use queuegen_tests::{library, RedisServer};

/// One delivery as the handler saw it.
#[derive(Debug, Clone)]
struct Attempt {
    at: Instant,
    attempt: u32,
    stream_id: String,
    prev_id: Option<String>,
    reason: Option<String>,
}

/// Records every delivery; fails as the job's `subject_ref` says:
/// `down` always transiently, `limited` asks for a retry in 300 ms on attempt 1.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<HashMap<String, Vec<Attempt>>>>,
}

impl Handler<TestJob> for Recorder {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let attempt = Attempt {
            at: Instant::now(),
            attempt: ctx.attempt(),
            stream_id: ctx.stream_id().to_owned(),
            prev_id: ctx.header().prev_id.clone(),
            reason: ctx.header().reason.clone(),
        };
        self.seen
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default()
            .push(attempt);
        match job.subject_ref.as_str() {
            "down" => Err(JobError::transient("the OCR service is down")),
            "limited" if ctx.attempt() == 1 => Ok(Outcome::retry_after(
                Duration::from_millis(300),
                "rate limited",
            )),
            _ => Ok(Outcome::Done),
        }
    }
}

type Running = tokio::task::JoinHandle<queuegen_runtime::Result<WorkerReport>>;

fn start(redis: &Redis, config: &QueueConfig, handler: Recorder) -> (impl FnOnce(), Running) {
    let worker = Worker::new(redis, config.clone(), handler);
    let (stop, running) = run_until_told(worker);
    (
        move || {
            let _ = stop.send(());
        },
        running,
    )
}

async fn setup(
    name: &str,
) -> (
    RedisServer,
    Redis,
    QueueConfig,
    redis::aio::MultiplexedConnection,
) {
    init_tracing();
    let server = RedisServer::start();
    let config = retrying_config(&unique_prefix(name));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let conn = server.async_connection().await;
    (server, redis, config, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_retry_with_growing_jittered_delays_then_dead_letter() {
    const JOBS: usize = 4;
    let (_server, redis, config, mut conn) = setup("retries").await;
    let max = config.retry.max_attempts;
    assert_eq!(max, 4, "tests/queues.yaml: retrying.retry.max_attempts");
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer
        .publish_many((0..JOBS).map(|n| {
            NewJob::new(
                format!("job-{n}"),
                format!("tenant-{n}"),
                TestJob::new("down", None),
            )
        }))
        .await
        .unwrap();

    let recorder = Recorder::default();
    let (stop, running) = start(&redis, &config, recorder.clone());
    wait_for_dead_letters(&conn, &config, JOBS, Duration::from_secs(15)).await;
    stop();
    let report = running.await.unwrap().unwrap();

    let total = JOBS as u64;
    assert_eq!(report.handled, total * u64::from(max), "{report:?}");
    assert_eq!(report.retried, total * u64::from(max - 1), "{report:?}");
    assert_eq!(report.dead_lettered, total, "{report:?}");
    assert_eq!(report.failed, 0, "{report:?}");

    let seen = recorder.seen.lock().unwrap().clone();
    let dead = dead_letters(&mut conn, &config).await;
    let mut gaps = Vec::new();
    for n in 0..JOBS {
        let job_id = format!("job-{n}");
        let attempts = &seen[&job_id];
        let numbers: Vec<u32> = attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(numbers, (1..=max).collect::<Vec<_>>(), "{job_id}");
        assert_eq!(attempts[0].prev_id, None, "{job_id}: a first attempt");
        assert_eq!(attempts[0].reason, None, "{job_id}: a first attempt");
        for pair in attempts.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            assert_eq!(after.prev_id.as_deref(), Some(before.stream_id.as_str()));
            assert_eq!(after.reason.as_deref(), Some("transient"));
            assert_ne!(after.stream_id, before.stream_id, "a new entry per attempt");
            let gap = after
                .at
                .checked_duration_since(before.at)
                .expect("attempts run in order");
            // The backoff after this attempt, plus promotion every 50 ms and
            // the time it takes to handle, schedule, promote and read again.
            let cap = backoff(&config, before.attempt);
            let tolerance = config.retry.promote_every + Duration::from_millis(400);
            assert!(
                gap <= cap + tolerance,
                "{job_id}: attempt {} came {gap:?} after attempt {}, above {cap:?} + {tolerance:?}",
                after.attempt,
                before.attempt
            );
            gaps.push(gap.as_millis());
        }

        let letters: Vec<_> = dead
            .iter()
            .filter(|(_, _, fields)| fields["job_id"] == job_id)
            .collect();
        assert_eq!(letters.len(), 1, "{job_id}: one dead letter: {dead:?}");
        let fields = &letters[0].2;
        assert_eq!(fields["reason"], "retries_exhausted", "{fields:?}");
        assert_eq!(fields["attempt"], max.to_string(), "{fields:?}");
        assert_eq!(fields["source_id"], attempts[3].stream_id, "{fields:?}");
        assert!(
            fields["detail"].contains("attempt 4 of 4")
                && fields["detail"].contains("the OCR service is down"),
            "{fields:?}"
        );
        assert_eq!(fields["type"], TestJob::TYPE);
    }
    gaps.sort_unstable();
    assert!(
        gaps.first() != gaps.last(),
        "full jitter: the delays are not all the same: {gaps:?}"
    );
    assert!(scheduled_retries(&mut conn, &config).await.is_empty());
    assert!(all_pending(&mut conn, &config).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_can_ask_for_its_own_delay_and_reason() {
    let (_server, redis, config, mut conn) = setup("retry-after").await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer
        .publish(NewJob::new(
            "job-limited",
            "acme",
            TestJob::new("limited", None),
        ))
        .await
        .unwrap();

    let recorder = Recorder::default();
    let (stop, running) = start(&redis, &config, recorder.clone());
    let seen = recorder.seen.clone();
    wait_until(Duration::from_secs(10), "the second attempt ran", || {
        let attempts = seen.lock().unwrap().get("job-limited").map_or(0, Vec::len);
        async move { attempts == 2 }
    })
    .await;
    stop();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.retried, report.done), (1, 1), "{report:?}");

    let attempts = recorder.seen.lock().unwrap()["job-limited"].clone();
    assert_eq!(attempts[1].attempt, 2);
    assert_eq!(attempts[1].reason.as_deref(), Some("rate limited"));
    let gap = attempts[1].at - attempts[0].at;
    // The due time is 300 ms after the handler returned: never earlier.
    assert!(gap >= Duration::from_millis(300), "came back after {gap:?}");
    assert!(dead_letters(&mut conn, &config).await.is_empty());
    assert!(all_pending(&mut conn, &config).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_letter_is_handled_again_with_the_same_job_id() {
    let (_server, redis, config, mut conn) = setup("replay").await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let published = producer
        .publish(NewJob::new(
            "job-replayed",
            "acme",
            TestJob::new("down", Some(3)),
        ))
        .await
        .unwrap();

    // Every attempt fails until the retries are spent.
    let recorder = Recorder::default();
    let (stop, running) = start(&redis, &config, recorder.clone());
    wait_for_dead_letters(&conn, &config, 1, Duration::from_secs(15)).await;
    stop();
    running.await.unwrap().unwrap();
    let (partition, dead_id, fields) = dead_letters(&mut conn, &config).await.remove(0);
    assert_eq!(config.partition_of_stream(partition), published.partition);
    assert_eq!(fields["job_id"], "job-replayed");

    // The cause is fixed (this handler does whatever `subject_ref` says, so
    // the replay goes to a worker whose handler succeeds), then replayed twice:
    // the second call finds the first one's marker.
    let mut shared = redis.shared();
    let first = transitions::replay(
        &mut shared,
        &config,
        partition,
        &dead_id,
        None,
        TestJob::ACCEPTS,
    )
    .await
    .unwrap();
    let again = transitions::replay(
        &mut shared,
        &config,
        partition,
        &dead_id,
        None,
        TestJob::ACCEPTS,
    )
    .await
    .unwrap();
    assert!(!first.already, "{first:?}");
    assert!(again.already, "{again:?}");
    assert_eq!(
        first.id, again.id,
        "one replay, however often it is asked for"
    );

    let fixed = Fixed::default();
    let worker = Worker::new(&redis, config.clone(), fixed.clone());
    let (stop, running) = run_until_told(worker);
    let done = fixed.done.clone();
    wait_until(Duration::from_secs(10), "the replayed job is done", || {
        let finished = !done.lock().unwrap().is_empty();
        async move { finished }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, 1, "{report:?}");

    let done = fixed.done.lock().unwrap().clone();
    assert_eq!(done.len(), 1, "handled once: {done:?}");
    let replayed_job = &done[0];
    assert_eq!(replayed_job.job_id, "job-replayed", "the same job_id");
    assert_eq!(replayed_job.stream_id, first.id, "the replayed entry");
    assert_eq!(
        replayed_job.attempt, 1,
        "a replay starts a fresh retry budget"
    );
    assert_eq!(replayed_job.reason.as_deref(), Some("replay"));
    let entries = stream_entries(&mut conn, &config.ready_key(partition)).await;
    let replayed = &entries.iter().find(|(id, _)| *id == first.id).unwrap().1;
    assert_eq!(replayed["replay_of"], dead_id);
    assert_eq!(replayed["pages"], "3", "the body survives the round trip");
    assert_eq!(
        dead_letters(&mut conn, &config).await.len(),
        1,
        "the dead letter stays as the record"
    );
    assert!(all_pending(&mut conn, &config).await.is_empty());
}

/// One job done by [`Fixed`].
#[derive(Debug, Clone)]
struct Done {
    job_id: String,
    stream_id: String,
    attempt: u32,
    reason: Option<String>,
}

/// Succeeds on every job, recording each.
#[derive(Clone, Default)]
struct Fixed {
    done: Arc<Mutex<Vec<Done>>>,
}

impl Handler<TestJob> for Fixed {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.done.lock().unwrap().push(Done {
            job_id: ctx.job_id().to_owned(),
            stream_id: ctx.stream_id().to_owned(),
            attempt: ctx.attempt(),
            reason: ctx.header().reason.clone(),
        });
        Ok(Outcome::Done)
    }
}
