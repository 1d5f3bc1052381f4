//! Tracing: each job runs in a `job` span carrying its job_id, trace_id, attempt, stream ID and, when claimed, `claimed`, under its partition's span and the worker's, with a debug event at each decision.

use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, StreamSlot, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{
    capture_logs_at, dead_letters, pending_count, unique_prefix, wait_until,
};
use queuegen_tests::{library, RedisServer};

struct Scripted;

impl Handler<TestJob> for Scripted {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        match job.subject_ref.as_str() {
            "refused" => Ok(Outcome::dead_letter("the tenant is suspended")),
            "again" if ctx.attempt() == 1 => Ok(Outcome::retry_after(
                Duration::from_millis(10),
                "the first attempt always retries",
            )),
            _ => Ok(Outcome::Done),
        }
    }
}

const TRACE_OK: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACE_REFUSED: &str = "00f067aa0ba902b7a3ce929d0e0e4736";
const TRACE_CLAIMED: &str = "0af7651916cd43dd8448eb211c80319c";
const TRACE_RETRIED: &str = "5b8aa5a2d2c872e8321cf37308d69df2";

// Current-thread runtime (the default): every task logs on this thread, into the capture.
#[tokio::test]
async fn every_decision_is_an_event_in_the_jobs_span() {
    let (logs, _guard) = capture_logs_at("queuegen_runtime=debug");
    let server = RedisServer::start();
    let mut config = test_config(&unique_prefix("spans"), 1);
    config.claim.min_idle = Duration::from_millis(200);
    config.claim.every = Duration::from_millis(100);
    config.retry.promote_every = Duration::from_millis(50);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let conn = server.async_connection().await;
    let publish = |job_id: &'static str, subject: &str, trace_id: &str| {
        let job = NewJob::new(job_id, "acme", TestJob::new(subject, None)).with_trace_id(trace_id);
        let producer = &producer;
        async move { producer.publish(job).await.unwrap() }
    };
    // Read first by a consumer that never settles it: the worker claims it.
    publish("job-claimed", "ok", TRACE_CLAIMED).await;
    let read: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(&*config.group)
        .arg("vanished")
        .arg("STREAMS")
        .arg(config.ready_key(StreamSlot::new(0)))
        .arg(">")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert_eq!(
        read.keys[0].ids.len(),
        1,
        "job-claimed is pending for another consumer"
    );
    publish("job-ok", "ok", TRACE_OK).await;
    publish("job-refused", "refused", TRACE_REFUSED).await;
    publish("job-retried", "again", TRACE_RETRIED).await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        Worker::new(&redis, config.clone(), Scripted).run_until(async {
            let _ = stopped.await;
        }),
    );
    let watched = logs.clone();
    wait_until(Duration::from_secs(10), "the four jobs are settled", || {
        let mut conn = conn.clone();
        let config = config.clone();
        let acked = watched.lines_with(&["acknowledged"]).len();
        let retried = watched
            .lines_with(&["job-retried", "attempt=2", "ack queued"])
            .len();
        let key = config.ready_key(StreamSlot::new(0));
        async move {
            acked >= 1
                && retried == 1
                && dead_letters(&mut conn, &config).await.len() == 1
                && pending_count(&mut conn, &key, &config.group).await == 0
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    // Each job's span: `worker{queue=.. group=.. consumer=..}:partition{partition=0}:job{job_id=..
    // trace_id=..}`, with `attempt` from the second on and `claimed=true` for a claim.
    let span_of = |job: &str, trace: &str, rest: &str| {
        format!("partition{{partition=0}}:job{{job_id=\"{job}\" trace_id=\"{trace}\"{rest}}}:")
    };
    let ok_span = span_of("job-ok", TRACE_OK, "");
    let refused_span = span_of("job-refused", TRACE_REFUSED, "");
    let claimed_span = span_of("job-claimed", TRACE_CLAIMED, " claimed=true");
    let first_span = span_of("job-retried", TRACE_RETRIED, "");
    let second_span = span_of("job-retried", TRACE_RETRIED, " attempt=2");
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
    for span in [
        &ok_span,
        &refused_span,
        &claimed_span,
        &first_span,
        &second_span,
    ] {
        let line = one(&[span, "delivered"]);
        assert!(line.contains("DEBUG"), "{line}");
        assert!(line.contains("worker{queue=\"jobs\" group="), "{line}");
    }
    one(&[&claimed_span, "ack queued"]);
    let retry = one(&[&first_span, "retry scheduled"]);
    assert!(retry.contains("next_attempt=2"), "{retry}");
    one(&[&second_span, "ack queued"]);
    assert!(one(&[&ok_span, "handler ended"]).contains("outcome=\"done\""));
    one(&[&ok_span, "ack queued"]);
    assert!(one(&[&refused_span, "handler ended"]).contains("outcome=\"dead_letter\""));
    let dead = one(&[&refused_span, "job dead-lettered"]);
    assert!(
        dead.contains("WARN") && dead.contains("reason=handler"),
        "{dead}"
    );
    // The acker's flush carries no job: one event per partition it acked.
    for acked in logs.lines_with(&["acknowledged"]) {
        assert!(
            acked.contains("partition=0 done=") && !acked.contains("job_id"),
            "{acked}"
        );
    }
}
