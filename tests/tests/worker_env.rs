//! `Worker::with_env`: the generated Kubernetes manifests' contract — the pod name as consumer name, the metrics address — read from the environment.
//!
//! One test in its own binary: it sets process-wide variables, which other
//! tests running in parallel threads of the same binary would see.

use std::net::SocketAddr;
use std::time::Duration;

use queuegen_runtime::error::SetupError;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Error, Handler, JobContext, JobError, NewJob, Outcome, Producer, Worker, CONSUMER_ENV,
    METRICS_ADDR_ENV,
};
use queuegen_tests::exposition::http_get;
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::redis_server::free_port;
use queuegen_tests::support::{applied, run_until_told, unique_prefix, wait_until};
use queuegen_tests::RedisServer;

struct Done;

impl Handler<TestJob> for Done {
    async fn handle(&self, _job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_name_and_metrics_address_come_from_the_environment() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("worker-env"), 1);
    let (redis, mut conn) = applied(&server, &config).await;

    // An unusable address is refused, naming the variable and the value.
    std::env::set_var(METRICS_ADDR_ENV, "metrics-port");
    let refused = Worker::new(&redis, config.clone(), Done).with_env();
    match refused {
        Err(Error::Setup(SetupError::InvalidWorker { problem, .. })) => {
            assert!(
                problem.contains("QUEUEGEN_METRICS_ADDR=metrics-port"),
                "{problem}"
            );
        }
        Err(other) => panic!("expected InvalidWorker, got {other}"),
        Ok(_) => panic!("an unusable QUEUEGEN_METRICS_ADDR was accepted"),
    }

    // An empty variable leaves the default.
    std::env::set_var(CONSUMER_ENV, "  ");
    std::env::remove_var(METRICS_ADDR_ENV);
    let default = Worker::new(&redis, config.clone(), Done)
        .with_env()
        .unwrap();
    assert!(!default.consumer().trim().is_empty());

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    std::env::set_var(CONSUMER_ENV, "docs-pipeline-ocr-7d9f8-x2k4q");
    std::env::set_var(METRICS_ADDR_ENV, addr.to_string());
    let worker = Worker::new(&redis, config.clone(), Done)
        .with_env()
        .unwrap();
    assert_eq!(worker.consumer(), "docs-pipeline-ocr-7d9f8-x2k4q");

    let (stop, running) = run_until_told(worker);
    wait_until(
        Duration::from_secs(10),
        "/readyz at the address given",
        || async move {
            http_get(addr, "/readyz", None)
                .await
                .is_ok_and(|response| response.status == 200)
        },
    )
    .await;

    // A job is delivered to the consumer named by the pod.
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer
        .publish(NewJob::new("env-job", "acme", TestJob::new("doc-1", None)))
        .await
        .unwrap();
    let key = config.ready_key(StreamSlot::new(0));
    wait_until(Duration::from_secs(10), "the job is acked", || {
        let mut conn = conn.clone();
        let key = key.clone();
        async move {
            let info: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            info.groups
                .iter()
                .any(|g| g.entries_read == Some(1) && g.pending == 0)
        }
    })
    .await;
    let consumers: redis::streams::StreamInfoConsumersReply = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(&key)
        .arg(&*config.group)
        .query_async(&mut conn)
        .await
        .unwrap();
    let names: Vec<&str> = consumers
        .consumers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["docs-pipeline-ocr-7d9f8-x2k4q"]);

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
