//! Library versions at worker start: two versions load side by side and each worker uses its own.
//!
//! A worker refusing a server without its version is the failure suite's row 13 (tests/tests/failure_suite).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
    WorkerReport,
};
use queuegen_tests::fixtures::{owned, retrying_config, TestJob};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, run_until_told, scheduled_retries, unique_prefix,
    wait_until,
};
use queuegen_tests::{library, RedisServer};

const SERVICE: &str = "queuegen-tests";

/// Records `(job_id, consumer, attempt)`; `flaky` jobs fail transiently on
/// attempt 1, so they pass through `retry_schedule` and `retry_promote`.
#[derive(Clone, Default)]
struct Recorder {
    done: Arc<Mutex<Vec<(String, String, u32)>>>,
}

impl Handler<TestJob> for Recorder {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        if job.subject_ref == "flaky" && ctx.attempt() == 1 {
            return Err(JobError::transient("first attempts fail"));
        }
        self.done.lock().unwrap().push((
            ctx.job_id().to_owned(),
            ctx.consumer().to_owned(),
            ctx.attempt(),
        ));
        Ok(Outcome::Done)
    }
}

impl Recorder {
    fn has(&self, job_id: &str) -> bool {
        self.done
            .lock()
            .unwrap()
            .iter()
            .any(|(id, _, _)| id == job_id)
    }
}

type Running = tokio::task::JoinHandle<queuegen_runtime::Result<WorkerReport>>;

fn start(
    redis: &Redis,
    config: &QueueConfig,
    handler: Recorder,
) -> (tokio::sync::oneshot::Sender<()>, Running) {
    let worker = Worker::new(redis, config.clone(), handler);
    let (stop, running) = run_until_told(worker);
    (stop, running)
}

async fn publish(producer: &Producer<TestJob>, job_id: &str, subject: &str) {
    producer
        .publish(NewJob::new(job_id, "acme", TestJob::new(subject, None)))
        .await
        .unwrap();
}

async fn wait_done(recorder: &Recorder, job_id: &str) {
    let what = format!("{job_id} is done");
    wait_until(Duration::from_secs(10), &what, || {
        let done = recorder.has(job_id);
        async move { done }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_load_side_by_side_and_each_worker_calls_its_own() {
    init_tracing();
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let v1_code = library::code(&library::tests_library_path());
    library::load_code(&redis, &v1_code).await;

    // `v1` is the deployed library version, `v2` the next one.
    let current = queuegen::gen::functions::LIBRARY_VERSION;
    let v1 = retrying_config(&unique_prefix("versions"));
    assert!(
        v1.functions.ends_with(&format!("_v{current}")),
        "{}",
        v1.functions
    );
    let v2 = QueueConfig {
        functions: owned(
            &v1.functions
                .replace(&format!("_v{current}"), &format!("_v{}", current + 1)),
        ),
        ..v1.clone()
    };
    ensure_groups(&redis, &v1).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, v1.clone());

    // A worker of the deployed version works, retries included.
    let old = Recorder::default();
    let (stop_old, old_running) = start(&redis, &v1, old.clone());
    publish(&producer, "before-v2", "flaky").await;
    wait_done(&old, "before-v2").await;

    // The next version is loaded beside it, as `apply` does in a rolling deploy.
    let v2_code = library::as_version(&v1_code, SERVICE, current, current + 1);
    library::load_code(&redis, &v2_code).await;
    let mut conn = server.async_connection().await;
    let listed: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    let listed = format!("{listed:?}");
    assert!(
        listed.contains(&*v1.functions) && listed.contains(&*v2.functions),
        "both versions are loaded: {listed}"
    );

    // The old worker keeps working through its own functions, and a worker
    // of the new version starts and works too.
    publish(&producer, "during-v1", "flaky").await;
    wait_done(&old, "during-v1").await;
    let new = Recorder::default();
    let (stop_new, new_running) = start(&redis, &v2, new.clone());
    stop_old.send(()).unwrap();
    let old_report = old_running.await.unwrap().unwrap();
    assert_eq!(old_report.retried, 2, "{old_report:?}");

    // With the old workers gone, the old version can go too.
    let () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(&*v1.functions)
        .query_async(&mut conn)
        .await
        .unwrap();
    publish(&producer, "after-v1", "flaky").await;
    wait_done(&new, "after-v1").await;
    stop_new.send(()).unwrap();
    let new_report = new_running.await.unwrap().unwrap();
    assert_eq!(
        (new_report.retried, new_report.promoted, new_report.failed),
        (1, 1, 0),
        "{new_report:?}"
    );
    for (job_id, _, attempt) in old.done.lock().unwrap().iter() {
        assert_eq!(*attempt, 2, "{job_id} was retried once");
    }
    assert!(dead_letters(&mut conn, &v1).await.is_empty());
    assert!(scheduled_retries(&mut conn, &v1).await.is_empty());
    assert!(all_pending(&mut conn, &v1).await.is_empty());
}
