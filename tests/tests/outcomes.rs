//! Outcomes other than a retry: permanent failures and `Outcome::DeadLetter` dead-letter at once; ambiguous ones stay pending and reach `reconcile`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::{JobContext, JobError, NewJob, Outcome, Redis};
use queuegen_tests::queues::jobs::{self, TestJob};
use queuegen_tests::support::{
    all_pending, dead_letters, init_tracing, run_until_told, scheduled_retries, wait_until,
};
use queuegen_tests::{library, RedisServer};

/// Implements the generated `jobs::Handler`, so the generated adapter's
/// forwarding of `reconcile` is what is under test. Acts on `subject_ref`.
#[derive(Clone, Default)]
struct Outcomes {
    handled: Arc<Mutex<Vec<String>>>,
    reconciled: Arc<Mutex<Vec<(String, String, u32)>>>,
}

impl jobs::Handler for Outcomes {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        self.handled.lock().unwrap().push(ctx.job_id().to_owned());
        match job.subject_ref.as_str() {
            "unreadable" => Err(JobError::permanent("page 3 is not an image")),
            "refused" => Ok(Outcome::dead_letter("the tenant is suspended")),
            "ambiguous" => Err(JobError::ambiguous(
                "the payment gateway timed out after the request was sent",
            )),
            "unsure" => Ok(Outcome::reconcile("the ledger shows a pending transfer")),
            _ => Ok(Outcome::Done),
        }
    }

    async fn reconcile(&self, ctx: &JobContext, reason: &str) {
        self.reconciled.lock().unwrap().push((
            ctx.job_id().to_owned(),
            reason.to_owned(),
            ctx.attempt(),
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_at_once_or_reconciliation_by_outcome() {
    init_tracing();
    let server = RedisServer::start();
    // The generated `jobs` queue as is: claim min_idle 60s, so nothing is
    // redelivered while the test looks.
    let config = jobs::CONFIG;
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let subjects = ["unreadable", "refused", "ambiguous", "unsure", "fine"];
    jobs::producer(&redis)
        .publish_many(
            subjects
                .iter()
                .map(|s| NewJob::new(format!("job-{s}"), "acme", TestJob::new(*s, None))),
        )
        .await
        .unwrap();

    let handler = Outcomes::default();
    let worker = jobs::worker(&redis, handler.clone());
    let consumer = worker.consumer().to_owned();
    let (stop, running) = run_until_told(worker);
    let mut conn = server.async_connection().await;
    let reconciled = handler.reconciled.clone();
    wait_until(
        Duration::from_secs(10),
        "two dead letters and two reconciliations",
        || {
            let mut conn = conn.clone();
            let reconciled = reconciled.lock().unwrap().len();
            async move { reconciled == 2 && dead_letters(&mut conn, &jobs::CONFIG).await.len() == 2 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (
            report.handled,
            report.done,
            report.dead_lettered,
            report.reconciling,
            report.retried,
            report.failed
        ),
        (5, 1, 2, 2, 0, 0),
        "{report:?}"
    );

    let mut handled = handler.handled.lock().unwrap().clone();
    handled.sort();
    assert_eq!(handled.len(), 5, "each ran once: {handled:?}");

    let dead = dead_letters(&mut conn, &config).await;
    let letter = |job: &str| {
        dead.iter()
            .find(|(_, _, fields)| fields["job_id"] == job)
            .unwrap_or_else(|| panic!("no dead letter for {job}: {dead:?}"))
            .2
            .clone()
    };
    let permanent = letter("job-unreadable");
    assert_eq!(permanent["reason"], "permanent");
    assert_eq!(
        permanent["attempt"], "1",
        "dead-lettered on the first attempt"
    );
    assert_eq!(permanent["deliveries"], "1");
    assert!(
        permanent["detail"].contains("page 3 is not an image"),
        "{permanent:?}"
    );
    let refused = letter("job-refused");
    assert_eq!(refused["reason"], "handler");
    assert_eq!(refused["detail"], "the tenant is suspended");

    let mut reconciled = handler.reconciled.lock().unwrap().clone();
    reconciled.sort();
    assert_eq!(
        reconciled,
        [
            (
                "job-ambiguous".to_owned(),
                "ambiguous error: the payment gateway timed out after the request was sent"
                    .to_owned(),
                1
            ),
            (
                "job-unsure".to_owned(),
                "the ledger shows a pending transfer".to_owned(),
                1
            ),
        ]
    );
    // Neither retried nor dead-lettered: pending with this worker, for
    // redelivery after claim.min_idle.
    let pending = all_pending(&mut conn, &config).await;
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(pending.iter().all(|entry| entry.consumer == consumer));
    assert!(scheduled_retries(&mut conn, &config).await.is_empty());
}
