//! `queuegen monitor` against a private redis-server: the scrape, parsed as
//! exposition text, holds exactly the gauges of the state the test built,
//! with only bounded labels; `promtool check metrics` accepts it; /healthz and
//! /readyz answer; a failed refresh withdraws the gauges, counts the failure
//! and makes /readyz answer 503.

mod ops_state;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ops_state::*;
use queuegen_tests::exposition::{self, Exposition, Sample};
use queuegen_tests::RedisServer;

/// A scrape, parsed strictly by the test support's exposition parser.
#[derive(Debug)]
struct Scrape {
    text: String,
    parsed: Exposition,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let parsed = exposition::parse(text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        Scrape {
            text: text.to_owned(),
            parsed,
        }
    }

    fn samples(&self) -> &[Sample] {
        &self.parsed.samples
    }

    /// The `# TYPE` of the family named `name`.
    fn kind(&self, name: &str) -> Option<&str> {
        self.parsed.family(name).map(|family| family.kind.as_str())
    }

    /// The samples of `name`, by their labels (values only, in label order).
    fn family(&self, name: &str) -> BTreeMap<Vec<String>, f64> {
        self.parsed
            .samples_named(name)
            .map(|sample| (sample.labels.values().cloned().collect(), sample.value))
            .collect()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.parsed.value(name, labels)
    }

    /// Every sample as (name, labels, value), whatever family name the format gave it.
    fn points(&self) -> Vec<(String, BTreeMap<String, String>, f64)> {
        self.samples()
            .iter()
            .map(|sample| (sample.name.clone(), sample.labels.clone(), sample.value))
            .collect()
    }
}

fn scrape(monitor: &Monitor) -> Scrape {
    let (code, body) = monitor.get("/metrics", None);
    assert_eq!(code, 200, "{body}");
    Scrape::parse(&body)
}

const QUEUE_GAUGES: [&str; 9] = [
    "queuegen_queue_oldest_ready_age_seconds",
    "queuegen_queue_oldest_pending_age_seconds",
    "queuegen_queue_pending",
    "queuegen_queue_lag",
    "queuegen_queue_history",
    "queuegen_queue_dead_letters",
    "queuegen_queue_retries_scheduled",
    "queuegen_queue_delayed",
    "queuegen_queue_paused",
];

/// Partition 0: two entries 20 and 19 minutes old delivered to alice, one
/// new one undelivered; partition 1: one entry delivered (pending), a later one
/// deleted (nil lag) and one undelivered 7 minutes old; partition 2: three
/// retries; partition 3: two dead letters. Returns (p0 ids, p1 ids).
fn build(server: &RedisServer) -> (Vec<String>, Vec<String>) {
    apply(server);
    let mut conn = server.client().get_connection().unwrap();
    let now = server_now_ms(&mut conn);
    let p0 = vec![
        add(
            &mut conn,
            &ready(0),
            &format!("{}-0", now - 20 * MINUTE),
            "a",
        ),
        add(
            &mut conn,
            &ready(0),
            &format!("{}-0", now - 19 * MINUTE),
            "b",
        ),
        add(
            &mut conn,
            &ready(0),
            &format!("{}-0", now - 2 * MINUTE),
            "c",
        ),
    ];
    read(&mut conn, &ready(0), "alice", 2);
    let p1 = vec![
        add(
            &mut conn,
            &ready(1),
            &format!("{}-0", now - 8 * MINUTE),
            "d",
        ),
        add(
            &mut conn,
            &ready(1),
            &format!("{}-0", now - 7 * MINUTE),
            "e",
        ),
        add(&mut conn, &ready(1), "*", "f"),
    ];
    read(&mut conn, &ready(1), "alice", 1);
    let _: u64 = redis::cmd("XDEL")
        .arg(ready(1))
        .arg(&p1[2])
        .query(&mut conn)
        .unwrap();
    for (n, due) in [now + MINUTE, now + 2 * MINUTE, now - 1_000]
        .iter()
        .enumerate()
    {
        let _: u64 = redis::cmd("ZADD")
            .arg(retry(2))
            .arg(*due)
            .arg(format!("retry-{n}"))
            .query(&mut conn)
            .unwrap();
    }
    add(&mut conn, &dead(3), "*", "dead-1");
    add(&mut conn, &dead(3), "*", "dead-2");
    (p0, p1)
}

#[test]
fn the_scrape_holds_exactly_the_gauges_of_the_state_built() {
    let server = RedisServer::start();
    let (p0, p1) = build(&server);
    let mut conn = server.client().get_connection().unwrap();
    let before = keyspace(&mut conn);
    // One refresh only (the first, before it listens): the numbers below
    // all come from it, measured against its server time.
    let monitor = Monitor::start(&server.url(), "3600");

    assert_eq!(monitor.get("/healthz", None).0, 200);
    assert_eq!(monitor.get("/readyz", None), (200, "ready\n".into()));
    let scrape = scrape(&monitor);

    // Only bounded labels, only known values.
    for sample in scrape.samples() {
        for (label, value) in &sample.labels {
            match label.as_str() {
                "queue" => assert_eq!(value, "ocr", "{sample:?}"),
                "partition" => assert!(value.parse::<u16>().is_ok_and(|p| p < 8), "{sample:?}"),
                "group" => assert_eq!(value, GROUP, "{sample:?}"),
                "library" => assert_eq!(value, LIBRARY, "{sample:?}"),
                other => panic!("unexpected label {other} in {sample:?}"),
            }
        }
    }
    for family in QUEUE_GAUGES {
        assert_eq!(scrape.kind(family), Some("gauge"), "{family}");
    }
    assert_eq!(
        scrape.kind("queuegen_monitor_refresh_failures_total"),
        Some("counter")
    );

    // `family` keys samples by their label values in label-name order:
    // (group, partition, queue) and (partition, queue).
    let by_group = |p: u16| vec![GROUP.to_owned(), p.to_string(), "ocr".to_owned()];
    let by_partition = |p: u16| vec![p.to_string(), "ocr".to_owned()];
    let per_group = |values: &[(u16, f64)], skip: &[u16]| -> BTreeMap<Vec<String>, f64> {
        (0..8)
            .filter(|p| !skip.contains(p))
            .map(|p| {
                let value = values.iter().find(|(q, _)| *q == p).map_or(0.0, |v| v.1);
                (by_group(p), value)
            })
            .collect()
    };
    let per_partition = |values: &[(u16, f64)]| -> BTreeMap<Vec<String>, f64> {
        (0..8)
            .map(|p| {
                let value = values.iter().find(|(q, _)| *q == p).map_or(0.0, |v| v.1);
                (by_partition(p), value)
            })
            .collect()
    };

    assert_eq!(
        scrape.family("queuegen_queue_pending"),
        per_group(&[(0, 2.0), (1, 1.0)], &[])
    );
    // Lag: 1 on partition 0; no series on partition 1, where Redis answers nil.
    assert_eq!(
        scrape.family("queuegen_queue_lag"),
        per_group(&[(0, 1.0)], &[1])
    );
    assert_eq!(
        scrape.family("queuegen_queue_history"),
        per_partition(&[(0, 3.0), (1, 2.0)])
    );
    assert_eq!(
        scrape.family("queuegen_queue_retries_scheduled"),
        per_partition(&[(2, 3.0)])
    );
    assert_eq!(
        scrape.family("queuegen_queue_dead_letters"),
        per_partition(&[(3, 2.0)])
    );

    // Ages, in seconds, against the refresh's server time.
    let refreshed = scrape
        .value("queuegen_monitor_last_success_timestamp_seconds", &[])
        .expect("the last refresh's time");
    let age = |id: &str| refreshed - ms_of(id) as f64 / 1_000.0;
    let close = |a: f64, b: f64| (a - b).abs() < 0.002;
    let ready_age = scrape.family("queuegen_queue_oldest_ready_age_seconds");
    let pending_age = scrape.family("queuegen_queue_oldest_pending_age_seconds");
    assert_eq!(ready_age.len(), 8);
    assert_eq!(pending_age.len(), 8);
    assert!(close(ready_age[&by_group(0)], age(&p0[2])), "{ready_age:?}");
    assert!(close(ready_age[&by_group(1)], age(&p1[1])), "{ready_age:?}");
    assert!(
        close(pending_age[&by_group(0)], age(&p0[0])),
        "{pending_age:?}"
    );
    for p in 2..8 {
        assert_eq!(ready_age[&by_group(p)], 0.0, "nothing undelivered");
    }
    assert!(
        close(pending_age[&by_group(1)], age(&p1[0])),
        "{pending_age:?}"
    );
    for p in 2..8 {
        assert_eq!(pending_age[&by_group(p)], 0.0, "nothing pending");
    }

    assert_eq!(
        scrape.value("queuegen_function_library_loaded", &[("library", LIBRARY)]),
        Some(1.0)
    );
    assert_eq!(
        scrape.value("queuegen_monitor_refresh_failures_total", &[]),
        Some(0.0)
    );

    // promtool accepts the scrape (the Prometheus text format curl gets).
    if let Err(said) = exposition::promtool_check(&scrape.text) {
        panic!("promtool check metrics: {said}\n{}", scrape.text);
    }

    // Prometheus itself asks for OpenMetrics, and gets the same samples.
    let (code, openmetrics) = monitor.get(
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"),
    );
    assert_eq!(code, 200);
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    let parsed = Scrape::parse(&openmetrics);
    assert_eq!(parsed.points(), scrape.points());

    assert_eq!(keyspace(&mut conn), before, "monitor wrote nothing");
}

#[test]
fn a_failed_refresh_withdraws_the_gauges_and_is_not_ready() {
    let server = RedisServer::start();
    apply(&server);
    let monitor = Monitor::start(&server.url(), "1");
    assert_eq!(monitor.get("/readyz", None).0, 200);
    assert_eq!(scrape(&monitor).family("queuegen_queue_pending").len(), 8);

    // The server goes away: the next refreshes fail.
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(60);
    while monitor.get("/readyz", None).0 != 503 {
        assert!(Instant::now() < deadline, "/readyz never answered 503");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(monitor.get("/healthz", None).0, 200, "still live");
    let scrape = scrape(&monitor);
    let failures = scrape
        .value("queuegen_monitor_refresh_failures_total", &[])
        .unwrap();
    assert!(failures >= 1.0, "{failures}");
    for family in QUEUE_GAUGES {
        assert!(
            scrape.family(family).is_empty(),
            "{family} withdrawn:\n{}",
            scrape.text
        );
    }
    assert!(scrape.family("queuegen_function_library_loaded").is_empty());
}
