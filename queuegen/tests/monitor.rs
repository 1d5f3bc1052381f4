//! `queuegen monitor` against a private redis-server: the scrape, parsed as
//! exposition text, holds exactly the gauges of the state the test built,
//! with only bounded labels; `promtool check metrics` accepts it; /healthz and
//! /readyz answer; a failed refresh withdraws the gauges, counts the failure
//! and makes /readyz answer 503.

mod ops_state;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ops_state::*;
use queuegen_tests::RedisServer;

/// One sample of the exposition text.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A scrape parsed: its samples and each family's `# TYPE`.
#[derive(Debug)]
struct Scrape {
    text: String,
    samples: Vec<Sample>,
    types: BTreeMap<String, String>,
}

impl Scrape {
    /// Parses the text format: `# HELP`/`# TYPE` lines and samples
    /// `name{label="value",...} number`, label values with `\\`, `\"`, `\n` escapes.
    fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        let mut types = BTreeMap::new();
        for line in text.lines().filter(|line| !line.is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                types.insert(name.to_owned(), kind.to_owned());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line));
        }
        Scrape {
            text: text.to_owned(),
            samples,
            types,
        }
    }

    /// The samples of `name`, by their labels (values only, in label order).
    fn family(&self, name: &str) -> BTreeMap<Vec<String>, f64> {
        self.samples
            .iter()
            .filter(|sample| sample.name == name)
            .map(|sample| (sample.labels.values().cloned().collect(), sample.value))
            .collect()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|sample| sample.name == name && sample.labels == wanted)
            .map(|sample| sample.value)
    }
}

fn parse_sample(line: &str) -> Sample {
    let mut chars = line.chars().peekable();
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        if c == '{' || c == ' ' {
            break;
        }
        name.push(c);
        chars.next();
    }
    let mut labels = BTreeMap::new();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            match chars.peek() {
                Some('}') => {
                    chars.next();
                    break;
                }
                Some(',') => {
                    chars.next();
                    continue;
                }
                None => panic!("unterminated labels in {line:?}"),
                _ => {}
            }
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "label {key} of {line:?}");
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(escaped) => value.push(escaped),
                        None => panic!("dangling escape in {line:?}"),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => panic!("unterminated label value in {line:?}"),
                }
            }
            labels.insert(key, value);
        }
    }
    let rest: String = chars.collect();
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .unwrap_or_else(|| panic!("no value in {line:?}"))
        .parse()
        .unwrap_or_else(|err| panic!("{err}: {line:?}"));
    assert!(
        fields.next().is_none(),
        "a timestamp or exemplar in {line:?}"
    );
    Sample {
        name,
        labels,
        value,
    }
}

fn scrape(monitor: &Monitor) -> Scrape {
    let (code, body) = monitor.get("/metrics", None);
    assert_eq!(code, 200, "{body}");
    Scrape::parse(&body)
}

const QUEUE_GAUGES: [&str; 7] = [
    "queuegen_queue_oldest_ready_age_seconds",
    "queuegen_queue_oldest_pending_age_seconds",
    "queuegen_queue_pending",
    "queuegen_queue_lag",
    "queuegen_queue_history",
    "queuegen_queue_dead_letters",
    "queuegen_queue_retries_scheduled",
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
    for sample in &scrape.samples {
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
        assert_eq!(
            scrape.types.get(family).map(String::as_str),
            Some("gauge"),
            "{family}"
        );
    }
    assert_eq!(
        scrape.types["queuegen_monitor_refresh_failures_total"],
        "counter"
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
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is installed");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr),
        scrape.text
    );

    // Prometheus itself asks for OpenMetrics, and gets the same samples.
    let (code, openmetrics) = monitor.get(
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"),
    );
    assert_eq!(code, 200);
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    let parsed = Scrape::parse(&openmetrics);
    assert_eq!(parsed.samples, scrape.samples);

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
