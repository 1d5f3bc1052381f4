//! Worker metrics: a run with known outcomes is counted exactly, with bounded labels only, in a scrape promtool accepts; `/readyz` follows the intake.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::metrics::{
    prometheus_client, FailedTransition, JobOutcome, Registry, Settlement, StreamRole, TrimOutcome,
    WorkerMetrics,
};
use queuegen_runtime::transitions::DeadReason;
use queuegen_runtime::Partition;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, Redis, Timestamp, Worker,
};
use queuegen_tests::exposition::{http_get, parse, promtool_check, Exposition};
use queuegen_tests::fixtures::{retrying_config, test_config, TestJob};
use queuegen_tests::redis_server::free_port;
use queuegen_tests::support::{
    all_pending, dead_letters, deliver_to, init_tracing, run_until_told, scheduled_retries,
    unique_prefix, url_of_user_without, wait_until,
};
use queuegen_tests::{library, RedisServer};

/// What the handler does, by `subject_ref`:
/// - `ok`: done;
/// - `retry-once`: asks for a retry on attempt 1, then done;
/// - `slow`: outlives the 200 ms handler timeout on attempt 1, then done;
/// - `refused`: `Outcome::DeadLetter`;
/// - `broken`: a permanent error;
/// - `down`: a transient error on every attempt, until the budget (4) is spent;
/// - `crash`: panics on every delivery, until poison quarantine (3 deliveries).
#[derive(Clone, Default)]
struct Scripted;

impl Handler<TestJob> for Scripted {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        let first = ctx.attempt() == 1;
        match job.subject_ref.as_str() {
            "retry-once" if first => Ok(Outcome::retry_after(Duration::from_millis(50), "not yet")),
            "slow" if first => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok(Outcome::Done)
            }
            "refused" => Ok(Outcome::dead_letter("the tenant is suspended")),
            "broken" => Err(JobError::permanent("page 3 is not an image")),
            "down" => Err(JobError::transient("the OCR service is down")),
            "crash" => panic!("handler bug on {}", ctx.job_id()),
            _ => Ok(Outcome::Done),
        }
    }
}

/// Expected counter values by (sample name, partition, extra label value).
#[derive(Default)]
struct Expected(BTreeMap<(&'static str, Partition, &'static str), f64>);

impl Expected {
    fn add(&mut self, name: &'static str, partition: Partition, label: &'static str, n: u32) {
        *self.0.entry((name, partition, label)).or_default() += f64::from(n);
    }

    fn total(&self, name: &str) -> f64 {
        self.0
            .iter()
            .filter(|((n, _, _), _)| *n == name)
            .map(|(_, value)| value)
            .sum()
    }
}

/// The worker's counter families, each with its extra label (or none).
const COUNTERS: [(&str, Option<&str>); 14] = [
    ("queuegen_jobs_total", Some("outcome")),
    ("queuegen_claims_total", None),
    ("queuegen_claim_throttled_seconds_total", None),
    ("queuegen_poison_quarantined_total", None),
    ("queuegen_consumers_pruned_total", None),
    ("queuegen_pending_deleted_total", None),
    ("queuegen_retries_scheduled_total", None),
    ("queuegen_retries_promoted_total", None),
    ("queuegen_delayed_promoted_total", None),
    ("queuegen_dead_letters_total", Some("reason")),
    ("queuegen_transition_failures_total", Some("outcome")),
    ("queuegen_ack_failures_total", None),
    ("queuegen_ownership_lost_total", Some("settlement")),
    ("queuegen_jobs_left_pending_total", None),
];

/// 1 while the worker leads a partition's recovery and scheduler.
const LEADER_GAUGE: &str = "queuegen_loops_leader";
/// 1 while a partition's intake is paused (never, here).
const PAUSED_GAUGE: &str = "queuegen_intake_paused";

const HISTOGRAMS: [&str; 2] = [
    "queuegen_handler_duration_seconds",
    "queuegen_publish_to_start_seconds",
];

async fn scrape(addr: SocketAddr, accept: Option<&str>) -> (String, Exposition) {
    let response = http_get(addr, "/metrics", accept)
        .await
        .unwrap_or_else(|err| panic!("GET http://{addr}/metrics: {err}"));
    assert_eq!(response.status, 200, "{}", response.body);
    let exposition = parse(&response.body)
        .unwrap_or_else(|err| panic!("the scrape does not parse: {err}\n{}", response.body));
    (response.content_type, exposition)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_known_outcomes_is_counted_exactly_with_bounded_labels() {
    init_tracing();
    let server = RedisServer::start();
    let config = retrying_config(&unique_prefix("metrics"));
    assert_eq!(
        (
            config.retry.max_attempts,
            config.poison.max_deliveries,
            config.partitions
        ),
        (4, 3, 2),
        "tests/queues.yaml: the retrying queue"
    );
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());

    let plan: [(&str, u32); 7] = [
        ("ok", 6),
        ("retry-once", 2),
        ("slow", 1),
        ("refused", 2),
        ("broken", 1),
        ("down", 1),
        ("crash", 1),
    ];
    let jobs = "queuegen_jobs_total";
    let dead = "queuegen_dead_letters_total";
    let scheduled = "queuegen_retries_scheduled_total";
    let promoted = "queuegen_retries_promoted_total";
    let mut expected = Expected::default();
    for (subject, count) in plan {
        for n in 0..count {
            // Different tenants spread the jobs over both partitions.
            let tenant = format!("tenant-{n}");
            let published = producer
                .publish(NewJob::new(
                    format!("job-{subject}-{n}"),
                    tenant,
                    TestJob::new(subject, None),
                ))
                .await
                .unwrap();
            let p = published.partition;
            match subject {
                "ok" => expected.add(jobs, p, "done", 1),
                "retry-once" => {
                    expected.add(jobs, p, "retry", 1);
                    expected.add(jobs, p, "done", 1);
                    expected.add(scheduled, p, "", 1);
                    expected.add(promoted, p, "", 1);
                }
                "slow" => {
                    expected.add(jobs, p, "timeout", 1);
                    expected.add(jobs, p, "done", 1);
                    expected.add(scheduled, p, "", 1);
                    expected.add(promoted, p, "", 1);
                }
                "refused" => {
                    expected.add(jobs, p, "dead_letter", 1);
                    expected.add(dead, p, "handler", 1);
                }
                "broken" => {
                    expected.add(jobs, p, "permanent_error", 1);
                    expected.add(dead, p, "permanent", 1);
                }
                "down" => {
                    expected.add(jobs, p, "transient_error", 4);
                    expected.add(scheduled, p, "", 3);
                    expected.add(promoted, p, "", 3);
                    expected.add(dead, p, "retries_exhausted", 1);
                }
                "crash" => {
                    expected.add(jobs, p, "panic", 3);
                    expected.add("queuegen_claims_total", p, "", 2);
                    expected.add("queuegen_poison_quarantined_total", p, "", 1);
                    expected.add(dead, p, "poison", 1);
                }
                _ => unreachable!(),
            }
        }
    }
    // An entry without `subject_ref`, added by hand to partition 1.
    let mut conn = server.async_connection().await;
    let _: String = redis::cmd("XADD")
        .arg(config.ready_key(StreamSlot::new(1)))
        .arg("*")
        .arg(&[
            ("job_id", "job-malformed"),
            ("type", "TestJob"),
            ("tenant", "acme"),
            ("schema", "2"),
            ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
            ("attempt", "1"),
        ])
        .arg("created_at")
        .arg(Timestamp::now().to_string())
        .query_async(&mut conn)
        .await
        .unwrap();
    expected.add(jobs, Partition::new(1), "malformed", 1);
    expected.add(dead, Partition::new(1), "decode_error", 1);

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let worker = Worker::new(&redis, config.clone(), Scripted).metrics_addr(addr);
    let (stop, running) = run_until_told(worker);

    // Settled in Redis: every dead letter written, nothing pending or scheduled.
    let watched = config.clone();
    let dead_total = expected.total(dead) as usize;
    wait_until(
        Duration::from_secs(30),
        "every job is settled in Redis",
        || {
            let mut conn = conn.clone();
            let config = watched.clone();
            async move {
                dead_letters(&mut conn, &config).await.len() == dead_total
                    && all_pending(&mut conn, &config).await.is_empty()
                    && scheduled_retries(&mut conn, &config).await.is_empty()
            }
        },
    )
    .await;
    // ...and counted: a counter moves just after the Redis call it counts.
    let wanted: Vec<(&str, f64)> = [jobs, dead, scheduled, promoted]
        .into_iter()
        .map(|name| (name, expected.total(name)))
        .collect();
    wait_until(Duration::from_secs(30), "the counters caught up", || {
        let wanted = wanted.clone();
        async move {
            let Ok(response) = http_get(addr, "/metrics", None).await else {
                return false;
            };
            let Ok(exposition) = parse(&response.body) else {
                return false;
            };
            wanted
                .iter()
                .all(|(name, total)| exposition.sum(name, &[]) >= *total)
        }
    })
    .await;

    let expected_done: f64 = expected
        .0
        .iter()
        .filter(|((name, _, outcome), _)| *name == jobs && *outcome == "done")
        .map(|(_, value)| value)
        .sum();
    let (content_type, scraped) = scrape(addr, None).await;
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let queue: &str = &config.queue;
    let group: &str = &config.group;

    // Exactly the counts the plan produces, series by series; every series
    // of both partitions exists (at 0 when nothing happened).
    for (name, extra) in COUNTERS {
        let values: Vec<&str> = match (name, extra) {
            (_, None) => vec![""],
            ("queuegen_jobs_total", _) => JobOutcome::ALL.iter().map(|o| o.as_str()).collect(),
            ("queuegen_dead_letters_total", _) => {
                DeadReason::ALL.iter().map(|r| r.as_str()).collect()
            }
            ("queuegen_ownership_lost_total", _) => {
                Settlement::ALL.iter().map(|s| s.as_str()).collect()
            }
            _ => FailedTransition::ALL.iter().map(|t| t.as_str()).collect(),
        };
        for partition in Partition::all(config.partitions) {
            let partition_text = partition.to_string();
            for value in &values {
                let mut labels = vec![
                    ("queue", queue),
                    ("partition", partition_text.as_str()),
                    ("group", group),
                ];
                if let Some(extra) = extra {
                    labels.push((extra, value));
                }
                let want = expected
                    .0
                    .get(&(name, partition, value))
                    .copied()
                    .unwrap_or(0.0);
                assert_eq!(
                    scraped.value(name, &labels),
                    Some(want),
                    "{name} {labels:?}"
                );
            }
        }
        let per_series = values.len() * usize::from(config.partitions);
        assert_eq!(
            scraped.samples_named(name).count(),
            per_series,
            "{name}: one series per partition and label value"
        );
    }

    // Histograms: one series per queue and group; a handler ran for every
    // delivery but the malformed one.
    let handler_runs = expected.total(jobs) - 1.0;
    let queue_labels = [("queue", queue), ("group", group)];
    for histogram in HISTOGRAMS {
        let count = scraped.value(&format!("{histogram}_count"), &queue_labels);
        assert_eq!(count, Some(handler_runs), "{histogram}");
        let buckets: Vec<(f64, f64)> = scraped
            .samples_named(&format!("{histogram}_bucket"))
            .map(|sample| {
                let le = &sample.labels["le"];
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (bound, sample.value)
            })
            .collect();
        assert!(buckets.len() > 10, "{histogram}: {buckets:?}");
        assert!(
            buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{histogram}: cumulative buckets in order: {buckets:?}"
        );
        assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, handler_runs));
        assert_eq!(
            scraped.family(histogram).map(|f| f.kind.as_str()),
            Some("histogram")
        );
    }
    // The only worker leads every partition's recovery and scheduler.
    for partition in 0..config.partitions {
        let partition_text = partition.to_string();
        let labels = [
            ("queue", queue),
            ("partition", partition_text.as_str()),
            ("group", group),
        ];
        assert_eq!(
            scraped.value(LEADER_GAUGE, &labels),
            Some(1.0),
            "{LEADER_GAUGE} {labels:?}"
        );
        assert_eq!(
            scraped.value(PAUSED_GAUGE, &labels),
            Some(0.0),
            "{PAUSED_GAUGE} {labels:?}"
        );
    }
    assert_eq!(
        scraped.family(LEADER_GAUGE).map(|f| f.kind.as_str()),
        Some("gauge")
    );
    // Nothing else: the workers trim this queue, so its trim pass series
    // exist (at 0) from the start, for the trim alert; removed entries
    // appear at the first trim.
    let mut names: Vec<&str> = COUNTERS.iter().map(|(name, _)| *name).collect();
    names.extend(HISTOGRAMS);
    names.push(LEADER_GAUGE);
    names.push("queuegen_trim_passes_total");
    // No rate limit on this queue: no rate_limited series.
    names.push(PAUSED_GAUGE);
    let families: Vec<&str> = scraped.families.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(families.len(), names.len(), "{families:?}");
    assert!(families.iter().all(|f| names.contains(f)), "{families:?}");
    // The timed-out attempt ran its full 200 ms; the crashing job's second
    // and third deliveries waited out claim.min_idle (1.2 s) once and twice
    // since the entry was added.
    let handler_sum = scraped
        .value("queuegen_handler_duration_seconds_sum", &queue_labels)
        .unwrap();
    assert!(handler_sum >= 0.2, "{handler_sum}");
    let latency_sum = scraped
        .value("queuegen_publish_to_start_seconds_sum", &queue_labels)
        .unwrap();
    assert!(latency_sum >= 3.6, "{latency_sum}");

    // Only bounded labels, only values from the bounded sets.
    let allowed_names: HashSet<&str> = [
        "queue",
        "partition",
        "group",
        "outcome",
        "reason",
        "settlement",
        "stream",
        "le",
    ]
    .into_iter()
    .collect();
    let mut allowed_values: HashSet<String> = JobOutcome::ALL
        .iter()
        .map(|o| o.as_str().to_owned())
        .chain(FailedTransition::ALL.iter().map(|t| t.as_str().to_owned()))
        .chain(DeadReason::ALL.iter().map(|r| r.as_str().to_owned()))
        .chain(Settlement::ALL.iter().map(|s| s.as_str().to_owned()))
        .chain(TrimOutcome::ALL.iter().map(|o| o.as_str().to_owned()))
        .chain(StreamRole::BOTH.iter().map(|r| r.as_str().to_owned()))
        .collect();
    allowed_values.extend(["0".to_owned(), "1".to_owned()]);
    allowed_values.extend([queue.to_owned(), group.to_owned()]);
    for sample in &scraped.samples {
        assert!(
            sample.name.starts_with("queuegen_"),
            "{}: not a queuegen metric",
            sample.name
        );
        for (label, value) in &sample.labels {
            assert!(
                allowed_names.contains(label.as_str()),
                "{}: label {label} is outside the bounded set",
                sample.name
            );
            if label == "le" {
                assert!(
                    value == "+Inf" || value.parse::<f64>().is_ok(),
                    "le={value}"
                );
            } else {
                assert!(
                    allowed_values.contains(value),
                    "{}: {label}={value:?} is outside the bounded set",
                    sample.name
                );
            }
        }
    }
    for family in &scraped.families {
        assert!(
            family.help.as_deref().is_some_and(|help| !help.is_empty()),
            "{}: no HELP",
            family.name
        );
    }

    // promtool reads the default (Prometheus text) scrape without a word.
    let text = http_get(addr, "/metrics", None).await.unwrap().body;
    if let Err(said) = promtool_check(&text) {
        panic!("{said}\n{text}");
    }
    // Asked for OpenMetrics (as Prometheus asks), the same numbers, ending in # EOF.
    let (content_type, openmetrics) = scrape(
        addr,
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .await;
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(openmetrics.eof);
    assert_eq!(
        openmetrics
            .family("queuegen_handler_duration_seconds")
            .and_then(|f| f.unit.as_deref()),
        Some("seconds")
    );
    // (`le` bounds compare as numbers: OpenMetrics writes `1.0`, Prometheus `1`.)
    let by_sample = |exposition: &Exposition| {
        let mut samples: Vec<String> = exposition
            .samples
            .iter()
            .map(|s| {
                let mut labels = s.labels.clone();
                if let Some(le) = labels.get_mut("le") {
                    *le = le
                        .parse::<f64>()
                        .map_or(le.clone(), |bound| bound.to_string());
                }
                format!("{} {labels:?} {}", s.name, s.value)
            })
            .collect();
        samples.sort();
        samples
    };
    assert_eq!(by_sample(&openmetrics), by_sample(&scraped));

    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!(
        (
            report.done,
            report.retried,
            report.dead_lettered,
            report.quarantined,
            report.promoted,
            report.claimed,
            report.decode_errors,
        ),
        (
            expected_done as u64,
            expected.total(scheduled) as u64,
            expected.total(dead) as u64,
            1,
            expected.total(promoted) as u64,
            2,
            1,
        ),
        "{report:?}"
    );
    // The endpoint lives as long as the worker.
    assert!(
        http_get(addr, "/healthz", None).await.is_err(),
        "the metrics port is closed after shutdown"
    );
}

/// The registry's families in the Prometheus text format, parsed.
fn encode(registry: &Registry) -> Exposition {
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, registry).unwrap();
    parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"))
}

/// `Worker::metrics` registers into the application's own registry; one
/// `WorkerMetrics` shared by two workers exports one set of names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_registry_gets_the_worker_metrics() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("app-registry"), 1);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let producer = Producer::<TestJob>::new(&redis, config.clone());
    let publish = |from: u32, to: u32| {
        producer.publish_many(
            (from..to).map(|n| NewJob::new(format!("job-{n}"), "acme", TestJob::new("ok", None))),
        )
    };
    let done = [
        ("queue", &*config.queue),
        ("partition", "0"),
        ("group", &*config.group),
        ("outcome", "done"),
    ];

    publish(0, 3).await.unwrap();
    let mut registry = Registry::default();
    let worker = Worker::new(&redis, config.clone(), Scripted).metrics(&mut registry);
    let (stop, running) = run_until_told(worker);
    wait_until(Duration::from_secs(10), "three jobs counted done", || {
        let counted = encode(&registry).value("queuegen_jobs_total", &done);
        async move { counted == Some(3.0) }
    })
    .await;
    stop.send(()).unwrap();
    assert_eq!(running.await.unwrap().unwrap().done, 3);

    let shared = WorkerMetrics::new();
    let mut registry = Registry::default();
    shared.register(&mut registry);
    assert!(
        encode(&registry).families.is_empty(),
        "no series before a worker starts"
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = Vec::new();
    for _ in 0..2 {
        let worker = Worker::new(&redis, config.clone(), Scripted).with_metrics(shared.clone());
        let mut stopped = stopped.clone();
        running.push(tokio::spawn(worker.run_until(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })));
    }
    publish(3, 13).await.unwrap();
    wait_until(
        Duration::from_secs(10),
        "ten more jobs counted done",
        || {
            let counted = encode(&registry).value("queuegen_jobs_total", &done);
            async move { counted == Some(10.0) }
        },
    )
    .await;
    stop.send(true).unwrap();
    let mut reported = 0;
    for worker in running {
        reported += worker.await.unwrap().unwrap().done;
    }
    assert_eq!(reported, 10);
    let exposition = encode(&registry);
    assert_eq!(
        exposition.value("queuegen_jobs_total", &done),
        Some(10.0),
        "both workers count into the same series"
    );
}

/// `/readyz` is 503 until the intake's first read returns, 200 while it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_intake() {
    init_tracing();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("readyz"), 2);
        config.handler.concurrency = 2;
        config
    };
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let mut conn = server.async_connection().await;
    // XREADGROUP is a write command: with writes paused, no read returns.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(8_000)
        .arg("WRITE")
        .query_async(&mut conn)
        .await
        .unwrap();

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let worker = Worker::new(&redis, config.clone(), Scripted).metrics_addr(addr);
    let (stop, running) = run_until_told(worker);
    wait_until(Duration::from_secs(5), "/healthz answers", || async move {
        http_get(addr, "/healthz", None)
            .await
            .is_ok_and(|response| response.status == 200)
    })
    .await;
    let before = http_get(addr, "/readyz", None).await.unwrap();
    assert_eq!(
        (before.status, before.body.as_str()),
        (503, "not ready\n"),
        "no read has returned yet"
    );

    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async(&mut conn)
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(5),
        "/readyz says ready",
        || async move {
            http_get(addr, "/readyz", None)
                .await
                .is_ok_and(|response| response.status == 200 && response.body == "ready\n")
        },
    )
    .await;
    // Still ready while idle: blocking reads that return empty are reads too.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(http_get(addr, "/readyz", None).await.unwrap().status, 200);

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(http_get(addr, "/readyz", None).await.is_err());
}

/// Pending entries deleted from the stream (the jobs lost to a premature
/// trim or an XDEL) are counted as recovery finds them, beside the claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pending_entries_and_claims_are_counted() {
    init_tracing();
    let server = RedisServer::start();
    let config = {
        let mut config = test_config(&unique_prefix("deleted-metrics"), 1);
        config.claim.min_idle = Duration::from_millis(300);
        config.claim.every = Duration::from_millis(100);
        config
    };
    let key = config.ready_key(StreamSlot::new(0));
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let published = Producer::<TestJob>::new(&redis, config.clone())
        .publish_many(
            (0..3).map(|n| NewJob::new(format!("job-{n}"), "acme", TestJob::new("ok", None))),
        )
        .await
        .unwrap();
    // A consumer that read everything and vanished; then one entry is deleted.
    let mut conn = server.async_connection().await;
    deliver_to(&mut conn, &key, &config.group, "vanished").await;
    let _: usize = redis::cmd("XDEL")
        .arg(&key)
        .arg(&published[1].stream_id)
        .query_async(&mut conn)
        .await
        .unwrap();

    let mut registry = Registry::default();
    let worker = Worker::new(&redis, config.clone(), Scripted).metrics(&mut registry);
    let (stop, running) = run_until_told(worker);
    let partition = [
        ("queue", &*config.queue),
        ("partition", "0"),
        ("group", &*config.group),
    ];
    let done = [
        ("queue", &*config.queue),
        ("partition", "0"),
        ("group", &*config.group),
        ("outcome", "done"),
    ];
    wait_until(Duration::from_secs(10), "the live entries are done", || {
        let counted = encode(&registry).value("queuegen_jobs_total", &done);
        async move { counted == Some(2.0) }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.claimed, report.done), (2, 2), "{report:?}");

    let exposition = encode(&registry);
    assert_eq!(
        exposition.value("queuegen_pending_deleted_total", &partition),
        Some(1.0)
    );
    assert_eq!(
        exposition.value("queuegen_claims_total", &partition),
        Some(2.0)
    );
    assert_eq!(
        exposition.value("queuegen_ack_failures_total", &partition),
        Some(0.0)
    );
    assert_eq!(exposition.sum("queuegen_jobs_total", &[]), 2.0);
}

/// Done jobs whose XACK the server refuses (an ACL user without it) count
/// as done by the handler and as failed acks, by partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_acks_are_counted_by_partition() {
    init_tracing();
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("xack-metrics"), 2);
    let admin = Redis::connect(server.url()).await.unwrap();
    library::load(&admin).await;
    ensure_groups(&admin, &config).await.unwrap();
    let published = Producer::<TestJob>::new(&admin, config.clone())
        .publish_many((0..6).map(|n| {
            NewJob::new(
                format!("job-{n}"),
                format!("t-{n}"),
                TestJob::new("ok", None),
            )
        }))
        .await
        .unwrap();
    let mut per_partition = [0.0; 2];
    for job in &published {
        per_partition[usize::from(job.partition.index())] += 1.0;
    }

    let url = url_of_user_without(&server, "xack").await;
    let redis = Redis::connect(url).await.unwrap();
    let mut registry = Registry::default();
    let worker = Worker::new(&redis, config.clone(), Scripted).metrics(&mut registry);
    let (stop, running) = run_until_told(worker);
    wait_until(Duration::from_secs(10), "every XACK failed", || {
        let failed = encode(&registry).sum("queuegen_ack_failures_total", &[]);
        async move { failed == 6.0 }
    })
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.done, report.failed), (0, 6), "{report:?}");

    let exposition = encode(&registry);
    for (partition, expected) in per_partition.iter().enumerate() {
        let partition = partition.to_string();
        let labels = [
            ("queue", &*config.queue),
            ("partition", partition.as_str()),
            ("group", &*config.group),
        ];
        assert_eq!(
            exposition.value("queuegen_ack_failures_total", &labels),
            Some(*expected),
            "partition {partition}"
        );
        let mut done = labels.to_vec();
        done.push(("outcome", "done"));
        assert_eq!(
            exposition.value("queuegen_jobs_total", &done),
            Some(*expected),
            "the handler's outcome, whatever became of the ack: partition {partition}"
        );
    }
}

/// An address the worker cannot bind is an error naming it, before anything is read.
#[tokio::test]
async fn an_address_in_use_is_refused_by_name() {
    let server = RedisServer::start();
    let config = test_config(&unique_prefix("addr-in-use"), 1);
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    ensure_groups(&redis, &config).await.unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = Worker::new(&redis, config, Scripted)
        .metrics_addr(addr)
        .run_until(std::future::pending())
        .await
        .expect_err("the port is taken");
    assert!(
        matches!(&err, queuegen_runtime::Error::Setup(queuegen_runtime::error::SetupError::Http { addr: named, .. }) if *named == addr.to_string()),
        "{err:?}"
    );
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}
