//! The Redis durable-result store: one result per job, whoever commits first, and the effect done once across redeliveries.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::error::ResultError;
use queuegen_runtime::{
    Committed, Durability, Error, Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis,
    RedisResults, Results, Worker,
};
use queuegen_tests::fixtures::{test_config, TestJob};
use queuegen_tests::support::{pending_count, unique_prefix, wait_until};
use queuegen_tests::{library, RedisPair, RedisServer};

const TTL: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn the_first_commit_wins_and_later_ones_get_it_back() {
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let results = RedisResults::new(&redis, unique_prefix("results"), TTL);

    assert_eq!(results.find("ocr", "job-1").await.unwrap(), None);
    assert_eq!(
        results.commit("ocr", "job-1", b"first").await.unwrap(),
        Committed::Stored
    );
    let again = results.commit("ocr", "job-1", b"second").await.unwrap();
    assert_eq!(again, Committed::Existing(b"first".to_vec()));
    assert!(again.was_redelivery());
    assert_eq!(
        results.find("ocr", "job-1").await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    // Another queue's job of the same id is another result.
    assert_eq!(results.find("export", "job-1").await.unwrap(), None);

    let mut conn = server.async_connection().await;
    let ttl_ms: i64 = redis::cmd("PTTL")
        .arg(results.key("ocr", "job-1"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        ttl_ms > 0 && ttl_ms <= TTL.as_millis() as i64,
        "the result expires after the ttl: {ttl_ms} ms"
    );
}

/// With a durability, a commit waits for the replica in the same pipeline:
/// it succeeds once the replica holds the result, and fails (so the job is
/// retried, not acknowledged) when the replica does not answer in time.
#[tokio::test]
async fn a_durable_commit_waits_for_the_replica_and_fails_without_one() {
    let pair = RedisPair::start();
    let redis = Redis::connect(pair.url()).await.unwrap();
    let prefix = unique_prefix("durable");
    let results = RedisResults::new(&redis, &prefix, TTL).with_durability(Durability {
        replicas: 1,
        timeout: Duration::from_secs(5),
    });

    assert_eq!(
        results.commit("ocr", "job-1", b"first").await.unwrap(),
        Committed::Stored
    );
    let mut replica = pair
        .replica()
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let on_replica: Option<Vec<u8>> = redis::cmd("GET")
        .arg(results.key("ocr", "job-1"))
        .query_async(&mut replica)
        .await
        .unwrap();
    assert_eq!(
        on_replica.as_deref(),
        Some(&b"first"[..]),
        "WAIT said the replica has it"
    );

    // A stopped replica acknowledges nothing: the commit is stored on the
    // primary but reported as not durable, naming the key.
    pair.replica().pause();
    let impatient = RedisResults::new(&redis, &prefix, TTL).with_durability(Durability {
        replicas: 1,
        timeout: Duration::from_millis(300),
    });
    let err = impatient
        .commit("ocr", "job-2", b"second")
        .await
        .expect_err("no replica acknowledged");
    pair.replica().resume();
    match &err {
        Error::Results(ResultError::NotReplicated {
            key,
            replicas: 1,
            acknowledged: 0,
            ..
        }) => assert_eq!(key, &results.key("ocr", "job-2")),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(err.to_string().contains("0 of the 1 replica(s)"), "{err}");
    // The retry that follows finds the stored result, and now it is durable.
    assert_eq!(
        results.commit("ocr", "job-2", b"again").await.unwrap(),
        Committed::Existing(b"second".to_vec())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_commits_agree_on_one_result() {
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let results = RedisResults::new(&redis, unique_prefix("results-race"), TTL);
    let commits = (0..32).map(|n| {
        let results = results.clone();
        tokio::spawn(async move {
            let value = format!("attempt-{n}");
            let committed = results
                .commit("ocr", "job-1", value.as_bytes())
                .await
                .unwrap();
            (value, committed)
        })
    });
    let mut stored = Vec::new();
    let mut existing = Vec::new();
    for commit in commits {
        match commit.await.unwrap() {
            (value, Committed::Stored) => stored.push(value),
            (_, Committed::Existing(value)) => existing.push(String::from_utf8(value).unwrap()),
        }
    }
    assert_eq!(stored.len(), 1, "exactly one commit stores: {stored:?}");
    assert_eq!(existing.len(), 31);
    assert!(
        existing.iter().all(|value| *value == stored[0]),
        "{existing:?}"
    );
}

/// Commits a result per job; counts the effects it performed.
#[derive(Clone)]
struct Committing {
    results: RedisResults,
    effects: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<bool>>>,
}

impl Handler<TestJob> for Committing {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let committed = self
            .results
            .commit(ctx.queue(), ctx.job_id(), job.subject_ref.as_bytes())
            .await
            .map_err(JobError::transient)?;
        if !committed.was_redelivery() {
            self.effects.fetch_add(1, Ordering::SeqCst);
        }
        self.seen.lock().unwrap().push(committed.was_redelivery());
        Ok(Outcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_delivered_twice_has_its_effect_once() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("results-worker"), 2);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    // The same intent published twice (a producer retry): two entries, one job id.
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    for _ in 0..2 {
        producer
            .publish(NewJob::new("job-1", "acme", TestJob::new("doc-1", None)))
            .await
            .unwrap();
    }
    let handler = Committing {
        results: RedisResults::new(&redis, &*config.key_prefix, config.retention.marker_ttl),
        effects: Arc::new(AtomicUsize::new(0)),
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        Worker::new(&redis, config.clone(), handler.clone()).run_until(async {
            let _ = stopped.await;
        }),
    );
    let seen = handler.seen.clone();
    wait_until(
        Duration::from_secs(10),
        "both deliveries are handled",
        || {
            let handled = seen.lock().unwrap().len();
            async move { handled == 2 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    assert_eq!(
        handler.effects.load(Ordering::SeqCst),
        1,
        "the effect ran once"
    );
    let mut seen = handler.seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [false, true],
        "the second delivery found the first's result"
    );
    assert_eq!(report.done, 2, "{report:?}");
    let mut conn = server.async_connection().await;
    for key in config.ready_keys() {
        assert_eq!(pending_count(&mut conn, &key, &config.group).await, 0);
    }
}

/// Commits made together go in one pipeline: a key of the wrong type fails
/// its own commit, naming the key, and none of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_commit_in_a_batch_fails_alone() {
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let results = RedisResults::new(&redis, unique_prefix("results-batch"), TTL);
    let mut conn = server.async_connection().await;
    let wrong = results.key("ocr", "job-13");
    let _: () = redis::cmd("HSET")
        .arg(&wrong)
        .arg("not")
        .arg("a string")
        .query_async(&mut conn)
        .await
        .unwrap();

    let commits: Vec<_> = (0..64)
        .map(|n| {
            let results = results.clone();
            tokio::spawn(async move {
                let job_id = format!("job-{n}");
                results.commit("ocr", &job_id, job_id.as_bytes()).await
            })
        })
        .collect();
    for (n, commit) in commits.into_iter().enumerate() {
        let outcome = commit.await.unwrap();
        if n == 13 {
            let err = outcome.expect_err("a hash is no result");
            assert!(err.to_string().contains(&wrong), "{err}");
            assert!(err.to_string().contains("WRONGTYPE"), "{err}");
        } else {
            assert_eq!(outcome.unwrap(), Committed::Stored, "job-{n}");
            let stored = results.find("ocr", &format!("job-{n}")).await.unwrap();
            assert_eq!(stored, Some(format!("job-{n}").into_bytes()));
        }
    }
}
