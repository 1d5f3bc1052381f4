//! Per-tenant rate limits (`handler.tenant_rate`) on a real server: a tenant flooding the queue starts at most its bucket's worth of jobs, another tenant's jobs flow past it, and every job set aside runs later once, with its attempt kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegen_runtime::partition::tenant_class;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, TenantRateLimit, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    applied, dead_letters, init_tracing, spawn_worker, unique_prefix, wait_until,
};
use queuegen_tests::RedisServer;

const LIMIT: u32 = 40;
const CLASSES: u16 = 64;
const FLOOD: usize = 200;
const CALM: usize = 30;

/// One start: tenant, job_id, when (since the test began), attempt.
type Start = (String, String, Duration, u32);

/// Every job's start.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<Vec<Start>>>);

impl Handler<TestJob> for Starts {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let at = EPOCH.with(|epoch| epoch.elapsed());
        self.0.lock().unwrap().push((
            ctx.tenant().to_owned(),
            ctx.job_id().to_owned(),
            at,
            ctx.attempt(),
        ));
        Ok(Outcome::Done)
    }
}

thread_local! {
    static EPOCH: Instant = Instant::now();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_is_held_to_its_rate_while_another_flows_and_nothing_fails() {
    init_tracing();
    assert_ne!(
        tenant_class("flood", CLASSES),
        tenant_class("calm", CLASSES),
        "the test's two tenants are in classes of their own"
    );
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("tenant-rate"), 4);
        config.handler.tenant_rate = Some(TenantRateLimit {
            limit: LIMIT,
            per: Duration::from_secs(1),
            classes: CLASSES,
        });
        config.handler.concurrency = 16;
        config
    };
    let (redis, mut conn) = applied(&server, &config).await;
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let flood = (0..FLOOD).map(|n| {
        NewJob::new(
            format!("flood-{n}"),
            "flood",
            TestJob::new(format!("f{n}"), None),
        )
    });
    producer.publish_many(flood).await.unwrap();
    let calm = (0..CALM).map(|n| {
        NewJob::new(
            format!("calm-{n}"),
            "calm",
            TestJob::new(format!("c{n}"), None),
        )
    });
    producer.publish_many(calm).await.unwrap();

    let starts = Starts::default();
    let began = Instant::now();
    let mut workers = Vec::new();
    for n in 0..2 {
        let redis = queuegen_runtime::Redis::connect(server.url())
            .await
            .unwrap();
        workers.push(spawn_worker(
            Worker::new(&redis, config.clone(), starts.clone())
                .consumer_name(format!("tenant-{n}"))
                .read_block(Duration::from_millis(100)),
        ));
    }
    let window = Duration::from_secs(3);
    tokio::time::sleep(window.saturating_sub(began.elapsed())).await;
    let within: Vec<Start> = starts.0.lock().unwrap().clone();
    let count = |tenant: &str| within.iter().filter(|(t, ..)| t == tenant).count();
    // The bucket's bound over the window: a burst of LIMIT plus LIMIT per second.
    let bound = LIMIT as usize + (LIMIT as f64 * began.elapsed().as_secs_f64()).ceil() as usize;
    println!(
        "in {:?}: flood started {} (bound {bound}), calm {}",
        began.elapsed(),
        count("flood"),
        count("calm")
    );
    assert!(
        count("flood") <= bound,
        "flood started {} > {bound}",
        count("flood")
    );
    assert!(
        count("flood") >= LIMIT as usize * 2,
        "flood started only {}: the limit, not the workers, should pace it",
        count("flood")
    );
    assert_eq!(
        count("calm"),
        CALM,
        "the calm tenant's jobs flowed past the flood"
    );

    wait_until(Duration::from_secs(20), "every job is handled", || async {
        starts.0.lock().unwrap().len() >= FLOOD + CALM
    })
    .await;
    let mut deferred = 0;
    for worker in workers {
        deferred += worker.stop().await.deferred;
    }
    let all = starts.0.lock().unwrap().clone();
    let mut runs: HashMap<&str, usize> = HashMap::new();
    for (_, job_id, _, attempt) in &all {
        *runs.entry(job_id.as_str()).or_default() += 1;
        assert_eq!(*attempt, 1, "{job_id}: a deferral spends no attempt");
    }
    assert_eq!(runs.len(), FLOOD + CALM, "every job ran");
    assert!(runs.values().all(|&n| n == 1), "each once: {runs:?}");
    assert!(deferred > 0, "the flood was set aside");
    assert!(dead_letters(&mut conn, &config).await.is_empty());
}
