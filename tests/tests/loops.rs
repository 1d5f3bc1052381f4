//! The recovery and scheduler loops: a recovery pass costs what is old, not what is busy; a retry set of the wrong type stops the worker naming its key.

use std::sync::Arc;
use std::time::Duration;

use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Worker,
};
use queuegen_tests::fixtures::{test_config, test_job_pairs, TestJob};
use queuegen_tests::support::{
    applied, command_calls, deliver_to, pending_count, unique_prefix, wait_until,
};
use queuegen_tests::RedisServer;
use tokio::sync::Semaphore;

/// `ok` jobs finish at once; `hold` jobs wait until the test lets them go.
#[derive(Clone)]
struct Holding {
    release: Arc<Semaphore>,
    done: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Handler<TestJob> for Holding {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        if job.subject_ref == "hold" {
            let _ = self.release.acquire().await;
        }
        self.done.lock().unwrap().push(ctx.job_id().to_owned());
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_claims_old_idle_entries_and_skips_a_busy_pending_list() {
    const HELD: usize = 64;
    let server = RedisServer::start();
    let config = QueueConfig {
        // Far longer than the test: the held entries never look abandoned.
        claim_min_idle: Duration::from_secs(60),
        claim_every: Duration::from_millis(20),
        concurrency: HELD + 1,
        ..test_config(&unique_prefix("recovery-cost"), 1)
    };
    let key = config.ready_key(0);
    let (redis, mut conn) = applied(&server, &config).await;

    // An entry added long ago (its ID's time is 1970), delivered to a
    // consumer that vanished ten minutes ago.
    let pairs = test_job_pairs("old-job");
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg("1000-0")
        .arg(&pairs[..])
        .query_async(&mut conn)
        .await
        .unwrap();
    deliver_to(&mut conn, &key, config.group, "vanished").await;
    let _: redis::Value = redis::cmd("XCLAIM")
        .arg(&key)
        .arg(config.group)
        .arg("vanished")
        .arg(0)
        .arg("1000-0")
        .arg("IDLE")
        .arg(600_000)
        .arg("JUSTID")
        .query_async(&mut conn)
        .await
        .unwrap();

    // Fresh entries that stay pending while their handlers hold them.
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs =
        (0..HELD).map(|n| NewJob::new(format!("held-{n}"), "acme", TestJob::new("hold", None)));
    producer.publish_many(jobs).await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();

    let handler = Holding {
        release: Arc::new(Semaphore::new(0)),
        done: Arc::default(),
    };
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));

    let done = handler.done.clone();
    wait_until(
        Duration::from_secs(10),
        "the old entry is claimed and done",
        || {
            let claimed = done.lock().unwrap().iter().any(|job| job == "old-job");
            async move { claimed }
        },
    )
    .await;
    // Twenty more passes with 64 fresh entries pending.
    tokio::time::sleep(config.claim_every * 20).await;
    assert_eq!(
        pending_count(&mut conn, &key, config.group).await,
        HELD,
        "every held entry is pending"
    );
    // Less the one XPENDING of the check above.
    let passes = command_calls(&mut conn, "xpending").await - 1;
    let claims = command_calls(&mut conn, "xautoclaim").await;
    assert!(passes >= 15, "{passes} recovery passes ran");
    // One walk claimed the old entry and stopped at the first fresh one; every
    // later pass found nothing idle and did not walk at all.
    assert_eq!(claims, 1, "XAUTOCLAIM calls over {passes} passes");

    handler.release.add_permits(HELD);
    wait_until(Duration::from_secs(10), "the held jobs finish", || {
        let finished = done.lock().unwrap().len() == HELD + 1;
        async move { finished }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (report.claimed, report.done),
        (1, HELD as u64 + 1),
        "{report:?}"
    );
    assert_eq!(pending_count(&mut conn, &key, config.group).await, 0);
}

#[tokio::test]
async fn a_retry_set_of_the_wrong_type_stops_the_worker_naming_it() {
    let server = RedisServer::start();
    let config = QueueConfig {
        retry_promote_every: Duration::from_millis(20),
        ..test_config(&unique_prefix("wrong-retry-set"), 4)
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let broken = config.retry_key(2);
    let _: () = redis::cmd("SET")
        .arg(&broken)
        .arg("not a sorted set")
        .query_async(&mut conn)
        .await
        .unwrap();

    let handler = Holding {
        release: Arc::new(Semaphore::new(0)),
        done: Arc::default(),
    };
    let worker = Worker::new(&redis, config.clone(), handler);
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        worker.run_until(std::future::pending()),
    )
    .await
    .expect("the worker stops by itself");
    let message = outcome.expect_err("a wrong-type key is fatal").to_string();
    assert!(
        message.contains(&broken) && message.contains("WRONGTYPE"),
        "{message}"
    );
}

/// An idle worker sends one blocking read per block period, not one read per
/// partition as well: after a blocking read found nothing, the next round
/// blocks again without sweeping the partitions. A job published then is
/// still handled at once.
#[tokio::test]
async fn an_idle_worker_blocks_without_sweeping_every_partition() {
    const BLOCK: Duration = Duration::from_millis(100);
    let server = RedisServer::start();
    let config = QueueConfig {
        partitions: 8,
        ..test_config(&unique_prefix("idle-intake"), 8)
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let handler = Holding {
        release: Arc::new(Semaphore::new(0)),
        done: Arc::default(),
    };
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    let idle = Duration::from_secs(2);
    tokio::time::sleep(idle).await;
    let reads = command_calls(&mut conn, "xreadgroup").await;
    let periods = (idle.as_millis() / BLOCK.as_millis()) as u64;
    // One blocking read per period (plus the one in flight at each edge);
    // sweeping would add 8 per period.
    assert!(
        reads <= periods + 2,
        "{reads} XREADGROUPs in {periods} block periods of an idle worker over 8 partitions"
    );

    Producer::<TestJob>::new(&redis, config.clone())
        .publish(NewJob::new("late-job", "acme", TestJob::new("ok", None)))
        .await
        .unwrap();
    let done = handler.done.clone();
    wait_until(
        Duration::from_secs(5),
        "the job published while idle is done",
        || {
            let handled = done.lock().unwrap().iter().any(|job| job == "late-job");
            async move { handled }
        },
    )
    .await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}
