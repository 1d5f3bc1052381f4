//! A worker process killed with SIGKILL mid-job: another worker claims its pending jobs and completes them.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::{ensure_groups, JobContext, JobError, NewJob, Outcome, QueueConfig, Redis};
use queuegen_tests::queues::crashy::{self, TestJob};
use queuegen_tests::support::{init_tracing, pending_count, pending_entries, wait_until};
use queuegen_tests::{library, RedisServer};

const JOBS: usize = 6;
const VICTIM: &str = "crash-victim";

/// What Redis reported about a job's entry while it was handled, before the ack.
#[derive(Debug, Clone)]
struct Seen {
    owner: String,
    times_delivered: usize,
    handled_by: String,
}

/// Records each job with its pending-entry state as the handler sees it.
#[derive(Clone)]
struct Survivor {
    conn: queuegen_runtime::Connection,
    config: QueueConfig,
    seen: Arc<Mutex<Vec<(String, Seen)>>>,
}

impl crashy::Handler for Survivor {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let pending: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(self.config.ready_key(ctx.partition()))
            .arg(self.config.group)
            .arg(ctx.stream_id())
            .arg(ctx.stream_id())
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await?;
        let entry = pending
            .ids
            .first()
            .ok_or("the entry is pending while handled")?;
        let seen = Seen {
            owner: entry.consumer.clone(),
            times_delivered: entry.times_delivered,
            handled_by: ctx.consumer().to_owned(),
        };
        self.seen
            .lock()
            .unwrap()
            .push((ctx.job_id().to_owned(), seen));
        Ok(Outcome::Done)
    }
}

async fn pending_of(
    conn: &mut redis::aio::MultiplexedConnection,
    config: &QueueConfig,
    consumer: &str,
) -> usize {
    let mut count = 0;
    for key in config.ready_keys() {
        count += pending_entries(conn, &key, config.group)
            .await
            .iter()
            .filter(|entry| entry.consumer == consumer)
            .count();
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_killed_worker_are_claimed_and_completed() {
    init_tracing();
    let server = RedisServer::start();
    // The generated `crashy` queue as is: handler timeout 1s, claim min_idle 2s.
    let config = crashy::CONFIG;
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = crashy::producer(&redis);
    let jobs = (0..JOBS).map(|n| {
        NewJob::new(
            format!("job-{n}"),
            "acme",
            TestJob::new(format!("doc-{n}"), None),
        )
    });
    let published = producer.publish_many(jobs).await.unwrap();
    assert!(
        (0..config.partitions).all(|p| published.iter().any(|job| job.partition == p)),
        "jobs on every partition: {published:?}"
    );

    // A worker in its own process takes every job and never finishes one.
    let mut victim = tokio::process::Command::new(env!("CARGO_BIN_EXE_crash-worker"))
        .env("QG_REDIS_URL", server.url())
        .env("QG_CONSUMER", VICTIM)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(15),
        "the victim holds every job",
        || {
            let mut conn = conn.clone();
            let config = config.clone();
            async move { pending_of(&mut conn, &config, VICTIM).await == JOBS }
        },
    )
    .await;
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the victim is still running"
    );

    victim.start_kill().unwrap();
    let status = victim.wait().await.unwrap();
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
    assert_eq!(
        pending_of(&mut conn, &config, VICTIM).await,
        JOBS,
        "its jobs stay pending"
    );

    let survivor = Survivor {
        conn: redis.shared(),
        config: config.clone(),
        seen: Arc::default(),
    };
    let seen = survivor.seen.clone();
    let worker = crashy::worker(&redis, survivor);
    let consumer = worker.consumer().to_owned();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    wait_until(Duration::from_secs(20), "every job is completed", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().len() >= JOBS }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    assert_eq!(report.claimed, JOBS as u64, "{report:?}");
    assert_eq!(report.done, JOBS as u64, "{report:?}");
    assert_eq!(
        report.failed + report.decode_errors + report.in_flight_left_pending,
        0
    );
    let seen: HashMap<String, Seen> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(seen.len(), JOBS, "each job handled once: {seen:?}");
    for n in 0..JOBS {
        let job = &seen[&format!("job-{n}")];
        assert_eq!(job.handled_by, consumer, "job-{n}");
        assert_eq!(job.owner, consumer, "job-{n} was claimed by the new worker");
        assert!(job.times_delivered >= 2, "job-{n} was redelivered: {job:?}");
    }
    for key in config.ready_keys() {
        assert_eq!(
            pending_count(&mut conn, &key, config.group).await,
            0,
            "pending on {key}"
        );
    }
    assert_eq!(pending_of(&mut conn, &config, &consumer).await, 0);
}
