//! kill -9 at each transition failpoint: after recovery by another worker, every job is in exactly one place, recorded once.
//!
//! A worker process (`transition-worker`, built with the `failpoints`
//! feature) works a mix of jobs, `flaky` (transient on attempt 1, then done),
//! `broken` (permanent) and `ok`, and dies with SIGKILL the first time it
//! reaches the failpoint under test. A worker in this process then recovers
//! whatever it left (claims its pending entries, promotes its retries) until
//! every job is settled. Then each job must be in exactly one place: done
//! (its durable record, written once with HSETNX), or a dead letter; never
//! also still pending, scheduled, or dead-lettered twice; and a rescheduled
//! attempt must exist once.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use queuegen_runtime::{ensure_groups, NewJob, Producer, QueueConfig, Redis, Worker};
use queuegen_tests::fixtures::{retrying_config, TestJob};
use queuegen_tests::scripted::{handled_key, Script, Scripted};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, scheduled_retries, stream_entries, unique_prefix,
    wait_until,
};
use queuegen_tests::{library, RedisServer};

const FLAKY: usize = 3;
const BROKEN: usize = 3;
const OK: usize = 2;

fn jobs() -> Vec<(String, Script)> {
    let kinds = [
        ("flaky", Script::Flaky, FLAKY),
        ("broken", Script::Broken, BROKEN),
        ("ok", Script::Ok, OK),
    ];
    kinds
        .iter()
        .flat_map(|(name, script, count)| {
            (0..*count).map(move |n| (format!("{name}-{n}"), *script))
        })
        .collect()
}

/// Where each job is now, by job_id.
#[derive(Debug, Default)]
struct Places {
    done: HashMap<String, usize>,
    dead: HashMap<String, usize>,
    scheduled: HashMap<String, usize>,
    pending: HashMap<String, usize>,
    /// Ready entries written for attempt 2 (by a promotion).
    second_attempts: HashMap<String, usize>,
}

impl Places {
    async fn read(conn: &mut redis::aio::MultiplexedConnection, config: &QueueConfig) -> Places {
        let mut places = Places::default();
        let done: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(handled_key(config))
            .query_async(conn)
            .await
            .unwrap();
        for job_id in done.into_keys() {
            *places.done.entry(job_id).or_default() += 1;
        }
        for (_, _, fields) in dead_letters(conn, config).await {
            *places.dead.entry(fields["job_id"].clone()).or_default() += 1;
        }
        for (_, _, _, fields) in scheduled_retries(conn, config).await {
            *places
                .scheduled
                .entry(fields["job_id"].clone())
                .or_default() += 1;
        }
        let pending: Vec<String> = all_pending(conn, config)
            .await
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        for key in config.ready_keys() {
            for (id, fields) in stream_entries(conn, &key).await {
                let job_id = fields["job_id"].clone();
                if pending.contains(&id) {
                    *places.pending.entry(job_id.clone()).or_default() += 1;
                }
                if fields["attempt"] == "2" {
                    *places.second_attempts.entry(job_id).or_default() += 1;
                }
            }
        }
        places
    }

    /// Every job settled where its script sends it.
    fn settled(&self) -> bool {
        jobs().iter().all(|(job_id, script)| match script {
            Script::Broken => self.dead.contains_key(job_id),
            Script::Ok | Script::Flaky => self.done.contains_key(job_id),
        }) && self.scheduled.is_empty()
            && self.pending.is_empty()
    }

    fn count(&self, job_id: &str) -> usize {
        [&self.done, &self.dead, &self.scheduled, &self.pending]
            .iter()
            .map(|place| place.get(job_id).copied().unwrap_or(0))
            .sum()
    }
}

async fn crash_at(failpoint: &str) {
    init_tracing();
    let server = RedisServer::start();
    let prefix = unique_prefix(failpoint);
    let config = retrying_config(&prefix);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer
        .publish_many(jobs().into_iter().map(|(job_id, _)| {
            let subject = job_id.clone();
            NewJob::new(job_id, "acme", TestJob::new(subject, None))
        }))
        .await
        .unwrap();

    let victim = tokio::process::Command::new(env!("CARGO_BIN_EXE_transition-worker"))
        .env("QG_REDIS_URL", server.url())
        .env("QG_CONSUMER", format!("victim-{failpoint}"))
        .env("QG_KEY_PREFIX", &prefix)
        .env(queuegen_runtime::failpoint::ENV, failpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), victim.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the worker never reached failpoint {failpoint}"))
        .unwrap();
    let log = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(
        ended.status.signal(),
        Some(9),
        "killed by SIGKILL at {failpoint}: {}\n{log}",
        ended.status
    );
    assert!(log.contains("failpoint reached"), "{log}");

    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let survivor = Scripted::connect(&server.url(), &config).await.unwrap();
    let worker = Worker::new(&redis, config.clone(), survivor);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let watched = config.clone();
    wait_until(Duration::from_secs(20), "every job is settled", || {
        let mut conn = conn.clone();
        let config = watched.clone();
        async move { Places::read(&mut conn, &config).await.settled() }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.failed, 0, "{failpoint}: {report:?}");

    let places = Places::read(&mut conn, &config).await;
    for (job_id, script) in jobs() {
        assert_eq!(
            places.count(&job_id),
            1,
            "{failpoint}: {job_id} is in exactly one place: {places:?}"
        );
        let second = places.second_attempts.get(&job_id).copied().unwrap_or(0);
        let expected = usize::from(script == Script::Flaky);
        assert_eq!(
            second, expected,
            "{failpoint}: {job_id} has {expected} rescheduled attempt(s): {places:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_retry_schedule() {
    crash_at("before_retry_schedule").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_retry_schedule() {
    crash_at("after_retry_schedule").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_dead_letter() {
    crash_at("before_dead_letter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_dead_letter() {
    crash_at("after_dead_letter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_retry_promote() {
    crash_at("after_retry_promote").await;
}
