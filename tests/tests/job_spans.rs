//! Tracing: each job runs in a `job` span carrying its job_id, trace_id, queue, partition and attempt, with a debug event at each decision.

use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Worker};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{capture_logs_at, dead_letters, unique_prefix, wait_until};
use queuegen_tests::{library, RedisServer};

struct Scripted;

impl Handler<TestJob> for Scripted {
    async fn handle(&self, job: TestJob, _ctx: &JobContext) -> Result<Outcome, JobError> {
        match job.subject_ref.as_str() {
            "refused" => Ok(Outcome::dead_letter("the tenant is suspended")),
            _ => Ok(Outcome::Done),
        }
    }
}

const TRACE_OK: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACE_REFUSED: &str = "00f067aa0ba902b7a3ce929d0e0e4736";

// Current-thread runtime (the default): every task logs on this thread, into the capture.
#[tokio::test]
async fn every_decision_is_an_event_in_the_jobs_span() {
    let (logs, _guard) = capture_logs_at("queuegen_runtime=debug");
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("spans"), 1);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    producer
        .publish(NewJob::new("job-ok", "acme", TestJob::new("ok", None)).with_trace_id(TRACE_OK))
        .await
        .unwrap();
    producer
        .publish(
            NewJob::new("job-refused", "acme", TestJob::new("refused", None))
                .with_trace_id(TRACE_REFUSED),
        )
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        Worker::new(&redis, config.clone(), Scripted).run_until(async {
            let _ = stopped.await;
        }),
    );
    let conn = server.async_connection().await;
    let watched = logs.clone();
    wait_until(Duration::from_secs(10), "both jobs are settled", || {
        let mut conn = conn.clone();
        let config = config.clone();
        let acked = !watched.lines_with(&["acknowledged"]).is_empty();
        async move { acked && dead_letters(&mut conn, &config).await.len() == 1 }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    // The span: `job{queue=.. partition=.. stream_id=.. claimed=.. job_id=.. trace_id=.. attempt=..}`.
    let span_of =
        |job: &str, trace: &str| format!("job_id=\"{job}\" trace_id=\"{trace}\" attempt=1}}");
    let ok_span = span_of("job-ok", TRACE_OK);
    let refused_span = span_of("job-refused", TRACE_REFUSED);
    let one = |needles: &[&str]| {
        let lines = logs.lines_with(needles);
        assert_eq!(
            lines.len(),
            1,
            "one line with {needles:?} in\n{}",
            logs.text()
        );
        lines[0].clone()
    };
    for span in [&ok_span, &refused_span] {
        let line = one(&[span, "delivered"]);
        assert!(line.contains("DEBUG"), "{line}");
        assert!(
            line.contains("job{queue=\"jobs\" partition=0 stream_id="),
            "{line}"
        );
        assert!(line.contains("claimed=false"), "{line}");
    }
    assert!(one(&[&ok_span, "handler ended"]).contains("outcome=\"done\""));
    one(&[&ok_span, "ack queued"]);
    assert!(one(&[&refused_span, "handler ended"]).contains("outcome=\"dead_letter\""));
    let dead = one(&[&refused_span, "job dead-lettered"]);
    assert!(
        dead.contains("WARN") && dead.contains("reason=handler"),
        "{dead}"
    );
    // The acker's flush carries no job: one event per partition it acked.
    let acked = one(&["acknowledged"]);
    assert!(
        acked.contains("partition=0 done=1") && !acked.contains("job_id"),
        "{acked}"
    );
}
