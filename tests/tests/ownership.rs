//! Ownership-checked completion: a worker whose handler stalled past `claim.min_idle`, while another consumer claimed its job, settles nothing (ack, retry, dead letter all refused), learns it lost the job, cannot renew it back; a long job that renews stays with its worker.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::functions::{self, Function};
use queuegen_runtime::metrics::{prometheus_client, Registry};
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
    WorkerReport,
};
use queuegen_tests::exposition::parse;
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{capture_logs, pending_entries, unique_prefix, wait_until};
use queuegen_tests::{library, RedisServer};
use redis::aio::MultiplexedConnection;

/// The consumer that claims the stalled worker's jobs, as another worker's recovery would.
const OTHER: &str = "consumer-b";
const STALLED: &str = "consumer-a";

/// What a stalled handler saw about its job once it woke up.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Woke {
    job_id: String,
    owner_before: bool,
    owner_after: bool,
    renewed_after: bool,
}

/// Holds every job until the test opens the gate, checking its ownership
/// before and after; then ends as the job's `subject_ref` says: `done`,
/// `retry` or `dead`.
#[derive(Clone)]
struct Stalling {
    gate: tokio::sync::watch::Receiver<bool>,
    started: Arc<Mutex<Vec<String>>>,
    woke: Arc<Mutex<Vec<Woke>>>,
}

impl Handler<TestJob> for Stalling {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let owner_before = ctx.still_owner().await?;
        self.started.lock().unwrap().push(ctx.job_id().to_owned());
        let mut gate = self.gate.clone();
        gate.wait_for(|open| *open).await?;
        let owner_after = ctx.still_owner().await?;
        let renewed_after = ctx.renew().await?;
        self.woke.lock().unwrap().push(Woke {
            job_id: ctx.job_id().to_owned(),
            owner_before,
            owner_after,
            renewed_after,
        });
        Ok(match job.subject_ref.as_str() {
            "retry" => Outcome::retry("the stalled attempt wants another"),
            "dead" => Outcome::dead_letter("the stalled attempt gives up"),
            _ => Outcome::Done,
        })
    }
}

/// Everything a test needs: a server with the library, the queue, a connection.
struct Setup {
    server: RedisServer,
    redis: Redis,
    config: QueueConfig,
    conn: MultiplexedConnection,
}

async fn setup(name: &str, config: impl FnOnce(QueueConfig) -> QueueConfig) -> Setup {
    let server = RedisServer::start();
    let config = config(test_config(&unique_prefix(name), 1));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    Setup {
        server,
        redis,
        config,
        conn,
    }
}

/// Publishes one job per `subject_ref`, `job-<subject_ref>`; their stream IDs.
async fn publish(setup: &Setup, subjects: &[&str]) -> Vec<String> {
    let producer = Producer::<TestJob>::new(&setup.redis, setup.config.clone());
    let mut ids = Vec::new();
    for subject in subjects {
        let job = NewJob::new(
            format!("job-{subject}"),
            "acme",
            TestJob::new(*subject, None),
        );
        ids.push(producer.publish(job).await.unwrap().stream_id);
    }
    ids
}

/// The queue of the stalled-worker tests: a short claim threshold, a long
/// handler timeout (the stall is not a timeout), and the worker's own
/// recovery out of the way (its first pass runs at start, the next in a minute).
fn stalling_config(config: QueueConfig) -> QueueConfig {
    {
        let mut config = config;
        config.claim.min_idle = Duration::from_millis(300);
        config.claim.every = Duration::from_secs(60);
        config.handler.timeout = Duration::from_secs(60);
        config
    }
}

/// Runs a worker as consumer [`STALLED`] with a [`Stalling`] handler until
/// every job of `ids` has started, claims them all for [`OTHER`] once idle
/// past `claim.min_idle` (`XAUTOCLAIM`, as another worker's recovery does),
/// then opens the gate and stops the worker once it settled (or failed to
/// settle) every job. Returns its report, what the handler saw, and the metrics.
async fn stall_past_a_claim(
    setup: &mut Setup,
    ids: &[String],
) -> (WorkerReport, Vec<Woke>, String) {
    let (open, gate) = tokio::sync::watch::channel(false);
    let handler = Stalling {
        gate,
        started: Arc::default(),
        woke: Arc::default(),
    };
    let mut registry = Registry::default();
    let worker = Worker::new(&setup.redis, setup.config.clone(), handler.clone())
        .consumer_name(STALLED)
        .metrics(&mut registry);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));

    let started = handler.started.clone();
    wait_until(Duration::from_secs(10), "every job started", || {
        let all = started.lock().unwrap().len() == ids.len();
        async move { all }
    })
    .await;
    let keys = [
        setup.config.ready_key(StreamSlot::new(0)),
        setup.config.claims_key(StreamSlot::new(0)),
    ];
    let claim = setup.config.function(Function::Claim);
    let min_idle = setup.config.claim.min_idle.as_millis() as u64;
    let group = setup.config.group.clone();
    let claimed = Arc::new(Mutex::new(Vec::<String>::new()));
    let conn = setup.conn.clone();
    // As another worker's recovery claims: through the library's `claim`,
    // which raises the partition's claim epoch.
    wait_until(
        Duration::from_secs(10),
        "another consumer claimed every job",
        || {
            let (claimed, mut conn) = (claimed.clone(), conn.clone());
            let (keys, claim, group) = (keys.clone(), claim.clone(), group.clone());
            async move {
                type ClaimReply = (String, Vec<(String, Vec<Vec<u8>>)>, Vec<String>, u64);
                let call = functions::Claim {
                    ready_key: &keys[0],
                    claims_key: &keys[1],
                    group: &group,
                    consumer: OTHER,
                    min_idle_ms: min_idle,
                    cursor: "0-0",
                    count: 100,
                };
                let (_, entries, _, _): ClaimReply = functions::command(&claim, &call)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let mut claimed = claimed.lock().unwrap();
                claimed.extend(entries.into_iter().map(|(id, _)| id));
                claimed.len() == ids.len()
            }
        },
    )
    .await;

    open.send(true).unwrap();
    let woke = handler.woke.clone();
    wait_until(
        Duration::from_secs(10),
        "every handler woke and ended",
        || {
            let all = woke.lock().unwrap().len() == ids.len();
            async move { all }
        },
    )
    .await;
    // Each refused settlement is counted once the worker got its answer.
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    wait_until(Duration::from_secs(10), "every outcome was refused", || {
        let lost = parse(&scrape())
            .unwrap()
            .sum("queuegen_ownership_lost_total", &[]);
        async move { lost as usize == ids.len() }
    })
    .await;
    let metrics_text = scrape();
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    let woke = handler.woke.lock().unwrap().clone();
    (report, woke, metrics_text)
}

/// Every key of the queue's prefix, sorted.
async fn keys_of(conn: &mut MultiplexedConnection, config: &QueueConfig) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", config.key_prefix))
        .query_async(conn)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// (stream id, owner, delivery count) of every pending entry.
async fn owners(
    conn: &mut MultiplexedConnection,
    config: &QueueConfig,
) -> Vec<(String, String, usize)> {
    pending_entries(conn, &config.ready_key(StreamSlot::new(0)), &config.group)
        .await
        .into_iter()
        .map(|entry| (entry.id, entry.consumer, entry.times_delivered))
        .collect()
}

// Current-thread runtime (the default): every task logs on this thread, into `capture_logs`.
#[tokio::test]
async fn a_done_job_claimed_away_while_its_handler_stalled_is_not_acked_here() {
    let (logs, _guard) = capture_logs();
    let mut setup = setup("own-ack", stalling_config).await;
    let ids = publish(&setup, &["done"]).await;

    let (report, woke, metrics) = stall_past_a_claim(&mut setup, &ids).await;

    // The handler learned it, and could not take the job back.
    assert_eq!(
        woke,
        [Woke {
            job_id: "job-done".into(),
            owner_before: true,
            owner_after: false,
            renewed_after: false,
        }]
    );
    // Nothing acked: the entry is the other consumer's, its delivery count
    // that of the claim (a refused renew counts none).
    assert_eq!(
        owners(&mut setup.conn, &setup.config).await,
        [(ids[0].clone(), OTHER.to_owned(), 2)]
    );
    assert_eq!(
        (
            report.handled,
            report.done,
            report.failed,
            report.ownership_lost
        ),
        (1, 0, 0, 1),
        "{report:?}"
    );
    let scrape = parse(&metrics).unwrap();
    let lost = |settlement: &str| {
        scrape.value(
            "queuegen_ownership_lost_total",
            &[
                ("queue", "jobs"),
                ("partition", "0"),
                ("group", &setup.config.group),
                ("settlement", settlement),
            ],
        )
    };
    assert_eq!(
        (lost("ack"), lost("retry"), lost("dead_letter")),
        (Some(1.0), Some(0.0), Some(0.0))
    );
    let refused = logs.lines_with(&["WARN", "ack refused", "job_id=job-done", OTHER]);
    assert_eq!(refused.len(), 1, "{}", logs.text());
    for field in [
        format!("stream_id={}", ids[0]),
        "jobs".into(),
        "partition=0".into(),
    ] {
        assert!(refused[0].contains(&field), "{field}: {}", refused[0]);
    }
    drop(setup.server);
}

#[tokio::test]
async fn a_retry_and_a_dead_letter_of_jobs_claimed_away_are_refused_and_write_nothing() {
    let (logs, _guard) = capture_logs();
    let mut setup = setup("own-moves", stalling_config).await;
    let ids = publish(&setup, &["retry", "dead"]).await;
    let keys_before = keys_of(&mut setup.conn, &setup.config).await;
    assert_eq!(keys_before, [setup.config.ready_key(StreamSlot::new(0))]);

    let (report, woke, _metrics) = stall_past_a_claim(&mut setup, &ids).await;

    assert!(
        woke.iter()
            .all(|w| w.owner_before && !w.owner_after && !w.renewed_after),
        "{woke:?}"
    );
    // No retry set, no envelope store, no dead letter, no marker: besides
    // the claim epoch the other consumer's claim raised, the ready stream
    // is still the only key, both entries pending for their new owner.
    assert_eq!(
        keys_of(&mut setup.conn, &setup.config).await,
        [
            setup.config.claims_key(StreamSlot::new(0)),
            setup.config.ready_key(StreamSlot::new(0))
        ]
    );
    assert_eq!(
        owners(&mut setup.conn, &setup.config).await,
        [
            (ids[0].clone(), OTHER.to_owned(), 2),
            (ids[1].clone(), OTHER.to_owned(), 2)
        ]
    );
    assert_eq!(
        (
            report.handled,
            report.retried,
            report.dead_lettered,
            report.failed,
            report.ownership_lost
        ),
        (2, 0, 0, 0, 2),
        "{report:?}"
    );
    for (job, what) in [
        ("job-retry", "scheduling the retry refused"),
        ("job-dead", "dead-lettering refused"),
    ] {
        let lines = logs.lines_with(&["WARN", what, &format!("job_id={job}"), OTHER]);
        assert_eq!(lines.len(), 1, "{job}: {}", logs.text());
    }
    drop(setup.server);
}

/// One run of a job: the consumer that ran it, and what each renew answered.
type Run = (String, Vec<bool>);

/// Runs each job for `3 × claim.min_idle`, renewing every fifth of it;
/// records its runs.
#[derive(Clone, Default)]
struct Renewing {
    runs: Arc<Mutex<Vec<Run>>>,
}

impl Handler<TestJob> for Renewing {
    async fn handle(&self, _job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let mut renewed = Vec::new();
        for _ in 0..15 {
            tokio::time::sleep(RENEW_EVERY).await;
            renewed.push(ctx.renew().await?);
        }
        self.runs
            .lock()
            .unwrap()
            .push((ctx.consumer().to_owned(), renewed));
        Ok(Outcome::Done)
    }
}

const MIN_IDLE: Duration = Duration::from_secs(1);
const RENEW_EVERY: Duration = Duration::from_millis(200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_job_that_renews_stays_with_its_worker_past_min_idle() {
    let mut setup = setup("own-renew", |config| {
        let mut config = config;
        config.claim.min_idle = MIN_IDLE;
        config.claim.every = Duration::from_millis(100);
        config.handler.timeout = Duration::from_secs(30);
        config
    })
    .await;
    let handler = Renewing::default();
    let start = |name: &'static str| {
        let worker =
            Worker::new(&setup.redis, setup.config.clone(), handler.clone()).consumer_name(name);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        }));
        (stop, running)
    };
    let (stop_a, running_a) = start(STALLED);
    publish(&setup, &["long"]).await;
    let conn = setup.conn.clone();
    let config = setup.config.clone();
    wait_until(
        Duration::from_secs(10),
        "the first worker holds the job",
        || {
            let (mut conn, config) = (conn.clone(), config.clone());
            async move { owners(&mut conn, &config).await.len() == 1 }
        },
    )
    .await;
    // A second worker whose recovery looks every 100 ms for entries idle 1 s.
    let (stop_b, running_b) = start(OTHER);

    let runs = handler.runs.clone();
    wait_until(Duration::from_secs(20), "the job ran to its end", || {
        let done = !runs.lock().unwrap().is_empty();
        async move { done }
    })
    .await;
    stop_a.send(()).unwrap();
    stop_b.send(()).unwrap();
    let report_a = running_a.await.unwrap().unwrap();
    let report_b = running_b.await.unwrap().unwrap();

    let runs = handler.runs.lock().unwrap().clone();
    assert_eq!(
        runs,
        [(STALLED.to_owned(), vec![true; 15])],
        "one run, never claimed"
    );
    assert_eq!(
        (report_a.done, report_a.ownership_lost),
        (1, 0),
        "{report_a:?}"
    );
    assert_eq!((report_b.claimed, report_b.handled), (0, 0), "{report_b:?}");
    assert_eq!(owners(&mut setup.conn, &setup.config).await, []);
}
