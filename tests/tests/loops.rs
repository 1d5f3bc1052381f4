//! The worker's loops: a recovery pass costs what is old, not what is busy; a claim storm is paced at claim.rate; a retry set of the wrong type stops the worker naming its key; an idle or lightly loaded intake only blocks; the acker never waits on a handler still running.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegen_runtime::metrics::{prometheus_client, Registry, WorkerMetrics};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Worker,
};
use queuegen_tests::exposition::parse;
use queuegen_tests::fixtures::{test_config, test_job_pairs, TestJob};
use queuegen_tests::support::{
    age_pending, applied, command_calls, deliver_to, pending_count, run_until_told, unique_prefix,
    wait_until,
};
use queuegen_tests::RedisServer;
use tokio::sync::Semaphore;

/// `ok` jobs finish at once; `hold` jobs wait until the test lets them go.
#[derive(Clone)]
struct Holding {
    release: Arc<Semaphore>,
    done: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Holding {
    fn new() -> Self {
        Holding {
            release: Arc::new(Semaphore::new(0)),
            done: Arc::default(),
        }
    }
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
    let config = {
        let mut config = test_config(&unique_prefix("recovery-cost"), 1);
        // Far longer than the test = the held entries never look abandoned.
        config.claim.min_idle = Duration::from_secs(60);
        config.claim.every = Duration::from_millis(20);
        config.handler.concurrency = HELD + 1;
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
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
    deliver_to(&mut conn, &key, &config.group, "vanished").await;
    age_pending(&mut conn, &key, &config.group, "vanished", "1000-0").await;

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

    let handler = Holding::new();
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let (stop, running) = run_until_told(worker);

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
    tokio::time::sleep(config.claim.every * 20).await;
    assert_eq!(
        pending_count(&mut conn, &key, &config.group).await,
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
    assert_eq!(pending_count(&mut conn, &key, &config.group).await, 0);
}

/// Counts each job's runs.
#[derive(Clone, Default)]
struct Counting {
    runs: Arc<Mutex<HashMap<String, u32>>>,
}

impl Handler<TestJob> for Counting {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        *self
            .runs
            .lock()
            .unwrap()
            .entry(ctx.job_id().to_owned())
            .or_default() += 1;
        Ok(Outcome::Done)
    }
}

/// The sum of `name` over every series in `registry`.
fn scraped(registry: &Registry, name: &str) -> f64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    parse(&text)
        .unwrap_or_else(|err| panic!("{err}\n{text}"))
        .sum(name, &[])
}

/// 300 entries left pending by a consumer that vanished all come idle at
/// once; recovery claims them no faster than `claim.rate` (100 a second) plus
/// one `claim.batch` (10) of burst, waits out the rest (counted), and every
/// job still runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_storm_is_paced_at_the_claim_rate() {
    const JOBS: usize = 300;
    const RATE: u32 = 100;
    const BATCH: usize = 10;
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("claim-rate"), 1);
        config.claim.min_idle = Duration::from_millis(200);
        config.claim.every = Duration::from_millis(50);
        config.claim.batch = BATCH;
        config.claim.rate = RATE;
        // Permits are not what limits the claims here.
        config.handler.concurrency = 64;
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let jobs =
        (0..JOBS).map(|n| NewJob::new(format!("storm-{n}"), "acme", TestJob::new("ok", None)));
    producer.publish_many(jobs).await.unwrap();
    deliver_to(&mut conn, &key, &config.group, "vanished").await;
    assert_eq!(pending_count(&mut conn, &key, &config.group).await, JOBS);
    // Every entry idle past claim.min_idle before the worker starts: the storm.
    tokio::time::sleep(config.claim.min_idle * 2).await;

    let metrics = WorkerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let handler = Counting::default();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).with_metrics(metrics);
    let start = Instant::now();
    let (stop, running) = run_until_told(worker);

    // A token bucket bounds the claims of any interval by rate × its length
    // plus its capacity (one batch). The interval starts at the last sample
    // that still read 0 (taken just before that read, so it is loose, never
    // tight); the slack of one more batch covers a claim call whose entries
    // were taken before that read and counted after it.
    let claims = "queuegen_claims_total";
    let slack = BATCH as f64;
    let mut origin = start;
    let mut samples = 0;
    let all_claimed_after = loop {
        let before = Instant::now();
        let claimed = scraped(&registry, claims);
        if claimed == 0.0 {
            origin = before;
        }
        // Read after the counter: this elapsed time is at least the counter's.
        let elapsed = origin.elapsed();
        let bound = f64::from(RATE) * elapsed.as_secs_f64() + BATCH as f64 + slack;
        assert!(
            claimed <= bound,
            "{claimed} claimed {elapsed:?} after the last sample of none: more than rate × t + batch (+ {slack}) = {bound}"
        );
        samples += 1;
        if claimed as usize >= JOBS {
            break elapsed;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "only {claimed} of {JOBS} claimed in {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Paced, not merely bounded: the 280 beyond the bound's two batches take
    // 2.8 s at 100 a second.
    assert!(
        all_claimed_after >= Duration::from_millis(2_500),
        "all {JOBS} claimed within {all_claimed_after:?} ({samples} samples)"
    );
    // The waits are counted. Less than the 2.8 s of pacing: the bucket
    // refills while a claim call runs, and on a loaded machine (a CI run of
    // Valkey 9.1 saw 1.9 s) the calls themselves take a share of it; that
    // the claims are paced at all is the bound above.
    let throttled = scraped(&registry, "queuegen_claim_throttled_seconds_total");
    assert!(
        (1.0..=start.elapsed().as_secs_f64()).contains(&throttled),
        "recovery waited {throttled} s on the rate; all claimed {all_claimed_after:?} after the first claim"
    );

    let runs = handler.runs.clone();
    wait_until(Duration::from_secs(10), "every job ran", || {
        let ran = runs.lock().unwrap().len() == JOBS;
        async move { ran }
    })
    .await;
    wait_until(Duration::from_secs(10), "nothing is pending", || {
        let mut conn = conn.clone();
        let (key, group) = (key.clone(), config.group.clone());
        async move { pending_count(&mut conn, &key, &group).await == 0 }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (report.claimed, report.done),
        (JOBS as u64, JOBS as u64),
        "{report:?}"
    );
    let runs = handler.runs.lock().unwrap();
    let twice: Vec<_> = runs.iter().filter(|(_, &n)| n != 1).collect();
    assert!(twice.is_empty(), "jobs not run exactly once: {twice:?}");
    assert_eq!(runs.len(), JOBS);
}

#[tokio::test]
async fn a_retry_set_of_the_wrong_type_stops_the_worker_naming_it() {
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("wrong-retry-set"), 4);
        config.retry.promote_every = Duration::from_millis(20);
        config
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let broken = config.retry_key(StreamSlot::new(2));
    let _: () = redis::cmd("SET")
        .arg(&broken)
        .arg("not a sorted set")
        .query_async(&mut conn)
        .await
        .unwrap();

    let handler = Holding::new();
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
    let handler = Holding::new();
    let worker = Worker::new(&redis, config.clone(), handler.clone()).read_block(BLOCK);
    let (stop, running) = run_until_told(worker);
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

    // A light load, one job at a time: each read finds the streams drained,
    // so the next is the blocking read again, not a sweep of 8 partitions.
    const TRICKLE: u64 = 10;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    let began = std::time::Instant::now();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    for n in 0..TRICKLE {
        producer
            .publish(NewJob::new(
                format!("trickle-{n}"),
                "acme",
                TestJob::new("ok", None),
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    wait_until(Duration::from_secs(5), "the trickle is done", || {
        let handled = done.lock().unwrap().len() as u64;
        async move { handled == TRICKLE + 1 }
    })
    .await;
    let reads = command_calls(&mut conn, "xreadgroup").await;
    let periods = (began.elapsed().as_millis() / BLOCK.as_millis()) as u64;
    assert!(
        reads <= 2 * TRICKLE + periods + 2,
        "{reads} XREADGROUPs for {TRICKLE} jobs one at a time over 8 partitions"
    );
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_still_in_its_handler_does_not_hold_back_the_acks_of_the_others() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("ack-linger"), 1);
    let key = config.ready_key(StreamSlot::new(0));
    let (redis, conn) = applied(&server, &config).await;
    // Published before the worker starts: one read delivers all eight, and
    // the acker sees the held job in its handler while the others end.
    let jobs = (0..8).map(|n| {
        let subject = if n == 0 { "hold" } else { "ok" };
        NewJob::new(format!("job-{n}"), "acme", TestJob::new(subject, None))
    });
    Producer::<TestJob>::new(&redis, config.clone())
        .publish_many(jobs)
        .await
        .unwrap();
    let handler = Holding::new();
    let worker = Worker::new(&redis, config.clone(), handler.clone());
    let (stop, running) = run_until_told(worker);

    // The acker lingers for a handler still running for a millisecond, not
    // for as long as it runs: the seven are acknowledged, the held one not.
    wait_until(
        Duration::from_secs(5),
        "the seven finished jobs are acknowledged while the eighth runs",
        || {
            let done = handler.done.lock().unwrap().len();
            let mut conn = conn.clone();
            let (key, group) = (key.clone(), config.group.clone());
            async move { done == 7 && pending_count(&mut conn, &key, &group).await == 1 }
        },
    )
    .await;
    handler.release.add_permits(1);
    wait_until(
        Duration::from_secs(5),
        "the held job is acknowledged",
        || {
            let mut conn = conn.clone();
            let (key, group) = (key.clone(), config.group.clone());
            async move { pending_count(&mut conn, &key, &group).await == 0 }
        },
    )
    .await;
    let _ = stop.send(());
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.done, 8);
}
