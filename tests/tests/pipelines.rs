//! Pipeline runs on a real server: stage workers hand jobs on, joins run once with their run's summary, and dead letters end runs as each join's policy says.
//!
//! The `documents` pipeline of `common/docs_pipeline.rs`, its
//! hand-offs written by hand as the generated code writes them.

use std::collections::BTreeSet;
use std::time::Duration;

use queuegen_runtime::metrics::{prometheus_client, Registry, WorkerMetrics};
use queuegen_runtime::ops::dead_letters::{dead_letters, DeadLetter, DeadLetterQuery};
use queuegen_runtime::ops::gauges::{QueueMonitor, WatchedPipeline};
use queuegen_runtime::ops::status::{AlertThresholds, WatchedQueue};
use queuegen_runtime::runs::child_job_id;
use queuegen_runtime::transitions::replay;
#[path = "common/docs_pipeline.rs"]
mod docs_pipeline;

use docs_pipeline::{stop, Docs, Document, Effects, STAGES};
use queuegen_runtime::{packed, QueueConfig};
use queuegen_tests::support::wait_until;
use queuegen_tests::RedisServer;

/// The docs service on a server of its own; the server lives as long as the fixture.
async fn docs(policy: &str) -> (RedisServer, Docs) {
    let server = RedisServer::start();
    let docs = Docs::start(&server.url(), "pipelines", policy).await;
    (server, docs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_joins_once_with_the_jobs_it_waited_for() {
    let (_server, docs) = docs("fail").await;
    let effects = Effects::default();
    let metrics = WorkerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let workers = docs.workers(&STAGES, &effects, &metrics);
    // 0 to 3 pages: a fan-out of none still has its thumbnail to wait for.
    let documents: Vec<(String, Document)> = (0..24)
        .map(|n| (format!("doc-{n}"), Document::new(n % 4, "")))
        .collect();
    docs.publish(&documents).await;
    wait_until(Duration::from_secs(30), "every run is notified", || {
        let effects = effects.clone();
        async move { effects.of("notify").len() >= 24 }
    })
    .await;
    // Nothing more arrives late.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop(workers).await;

    for stage in ["ocr", "index", "thumbnail", "notify"] {
        let done = effects.of(stage);
        let unique: BTreeSet<_> = done.iter().collect();
        assert_eq!(unique.len(), done.len(), "no duplicate effect in {stage}");
    }
    let pages: u32 = documents.iter().map(|(_, d)| d.pages).sum();
    assert_eq!(
        effects.of("index").len(),
        pages as usize,
        "every page indexed"
    );
    assert_eq!(effects.of("thumbnail").len(), 24);
    let summaries = effects.summaries.lock().unwrap().clone();
    for (id, doc) in &documents {
        let runs = &summaries[id];
        assert_eq!(runs.len(), 1, "{id} joined once");
        let summary = &runs[0];
        assert_eq!(summary.dead_lettered().count(), 0);
        let mut results: Vec<_> = summary
            .finished()
            .map(|job| job.result_ref.clone().unwrap())
            .collect();
        results.sort();
        let mut expected: Vec<String> = (0..doc.pages).map(|p| format!("index:{p}")).collect();
        expected.push("thumbnail:0".to_owned());
        expected.sort();
        assert_eq!(
            results, expected,
            "{id}'s summary names every job it waited for"
        );
        assert_eq!(docs.status(id).await.as_deref(), Some("published"));
    }
    // Each event once per run, however often a job was delivered.
    let mut exposition = String::new();
    prometheus_client::encoding::text::encode(&mut exposition, &registry).unwrap();
    for event in ["started", "published"] {
        let series = format!(
            "queuegen_pipeline_runs_total{{pipeline=\"documents\",join=\"notify\",event=\"{event}\"}} 24"
        );
        assert!(exposition.contains(&series), "{series} in:\n{exposition}");
    }
    assert!(!exposition.contains("event=\"failed\""), "{exposition}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_page_fails_the_run_or_is_named_in_the_summary() {
    for policy in ["fail", "continue"] {
        let (_server, docs) = docs(policy).await;
        let effects = Effects::default();
        let workers = docs.workers(&STAGES, &effects, &WorkerMetrics::new());
        let documents = vec![
            ("ok".to_owned(), Document::new(2, "")),
            ("blank".to_owned(), Document::new(2, "index")),
            ("unreadable".to_owned(), Document::new(2, "ocr")),
        ];
        docs.publish(&documents).await;
        let expected_notices = if policy == "fail" { 1 } else { 2 };
        wait_until(Duration::from_secs(30), "the runs end", || {
            let docs = &docs;
            let effects = effects.clone();
            async move {
                effects.of("notify").len() >= expected_notices
                    && docs.status("blank").await.is_some()
                    && docs.status("unreadable").await.is_some()
            }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop(workers).await;
        let summaries = effects.summaries.lock().unwrap().clone();
        assert_eq!(summaries["ok"].len(), 1, "{policy}: ok joined once");
        assert_eq!(
            docs.status("unreadable").await.as_deref(),
            Some("failed"),
            "{policy}: a dead first stage fails the run under either policy"
        );
        assert!(!summaries.contains_key("unreadable"));
        match policy {
            "fail" => {
                assert_eq!(docs.status("blank").await.as_deref(), Some("failed"));
                assert!(!summaries.contains_key("blank"), "a failed run never joins");
            }
            _ => {
                assert_eq!(docs.status("blank").await.as_deref(), Some("published"));
                let summary = &summaries["blank"][0];
                assert_eq!(summary.dead_lettered().count(), 2, "both pages named dead");
                assert_eq!(summary.finished().count(), 1, "the thumbnail finished");
            }
        }
    }
}

/// A dead page replayed after its run ended runs its handler again, and
/// its settle records nothing: under `fail` the run stays failed and the
/// join never runs; under `continue` the join ran once, naming it dead, and
/// does not run again (docs/spec.md#pipelines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_page_runs_again_and_changes_no_ended_run() {
    for policy in ["fail", "continue"] {
        let (_server, docs) = docs(policy).await;
        let effects = Effects::default();
        let workers = docs.workers(&STAGES, &effects, &WorkerMetrics::new());
        docs.publish(&[("blank".to_owned(), Document::new(1, "index"))])
            .await;
        wait_until(Duration::from_secs(30), "the run ends", || async {
            docs.status("blank").await.is_some()
        })
        .await;
        let ended = docs.status("blank").await;
        let page = child_job_id("blank", "blank", "index", 0);
        assert_eq!(
            docs.record_at_join("blank", &page).await.as_deref(),
            Some("dead")
        );
        let notices = effects.of("notify").len();

        let index = docs.config("index");
        let letters = index_dead_letters(&docs).await;
        assert_eq!(
            letters.len(),
            1,
            "{policy}: the page is the one dead letter"
        );
        let letter = &letters[0];
        replay(
            &mut docs.redis.shared(),
            &index,
            letter.stream,
            &letter.id,
            None,
            &[1],
        )
        .await
        .unwrap();
        wait_until(Duration::from_secs(30), "the replayed page runs", || {
            let effects = effects.clone();
            let page = page.clone();
            async move { effects.of("index").contains(&page) }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop(workers).await;
        assert_eq!(
            docs.status("blank").await,
            ended,
            "{policy}: the run's end stands"
        );
        assert_eq!(
            docs.record_at_join("blank", &page).await.as_deref(),
            Some("dead"),
            "{policy}: the summary keeps the dead letter"
        );
        assert_eq!(
            effects.of("notify").len(),
            notices,
            "{policy}: no second join"
        );
        match policy {
            "fail" => assert_eq!(ended.as_deref(), Some("failed")),
            _ => assert_eq!(ended.as_deref(), Some("published")),
        }
    }
}

/// A page whose handler crashes on every delivery is quarantined by the
/// recovery loop, and a page whose schema this worker does not read is
/// dead-lettered unread: each settles dead at the join first, as a page its
/// handler dead-letters does, so its run ends as the policy says instead
/// of its join waiting for it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_page_or_one_that_does_not_decode_settles_dead_at_the_join() {
    for policy in ["fail", "continue"] {
        let (_server, mut docs) = docs(policy).await;
        docs.max_deliveries = Some(2);
        let effects = Effects::default();
        let metrics = WorkerMetrics::new();
        // OCR alone first, so that a page can be rewritten before it is read.
        let ocr = docs.workers(&["ocr"], &effects, &metrics);
        docs.publish(&[
            ("crashing", Document::new(2, "crash")),
            ("garbled", Document::new(2, "")),
        ])
        .await;
        let index = docs.config("index");
        wait_until(Duration::from_secs(30), "both runs hand on", || {
            let docs = &docs;
            let index = &index;
            async move { stream_lengths(docs, index).await >= 4 }
        })
        .await;
        stop(ocr).await;
        let garbled = child_job_id("garbled", "garbled", "index", 0);
        rewrite_schema(&docs, &index, &garbled, "99").await;

        let workers = docs.workers(&STAGES[1..], &effects, &metrics);
        wait_until(Duration::from_secs(30), "both runs end", || async {
            docs.status("crashing").await.is_some() && docs.status("garbled").await.is_some()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop(workers).await;

        let mut reasons: Vec<String> = index_dead_letters(&docs)
            .await
            .into_iter()
            .map(|letter| format!("{} {}", letter.fields["reason"], letter.fields["job_id"]))
            .collect();
        reasons.sort();
        let crashing = |page| child_job_id("crashing", "crashing", "index", page);
        let mut expected = vec![
            format!("poison {}", crashing(0)),
            format!("poison {}", crashing(1)),
            format!("unsupported_schema {garbled}"),
        ];
        expected.sort();
        assert_eq!(
            reasons, expected,
            "{policy}: the dead letters name their jobs"
        );
        // The first dead page ends a run under `fail`; a settle after the
        // end records nothing, so only under `continue` are both recorded.
        let mut recorded = 0;
        for (run, page) in [
            ("crashing", crashing(0)),
            ("crashing", crashing(1)),
            ("garbled", garbled.clone()),
        ] {
            let record = docs.record_at_join(run, &page).await;
            assert!(
                matches!(record.as_deref(), None | Some("dead")),
                "{policy}: {page} recorded {record:?}"
            );
            recorded += usize::from(record.is_some());
        }
        let expected = if policy == "fail" { 2 } else { 3 };
        assert_eq!(
            recorded, expected,
            "{policy}: dead pages recorded at the join"
        );
        let summaries = effects.summaries.lock().unwrap().clone();
        match policy {
            "fail" => {
                for run in ["crashing", "garbled"] {
                    assert_eq!(docs.status(run).await.as_deref(), Some("failed"), "{run}");
                    assert!(!summaries.contains_key(run), "a failed run never joins");
                }
            }
            _ => {
                for (run, dead, finished) in [("crashing", 2, 1), ("garbled", 1, 2)] {
                    assert_eq!(
                        docs.status(run).await.as_deref(),
                        Some("published"),
                        "{run}"
                    );
                    assert_eq!(summaries[run].len(), 1, "{run} joined once");
                    let summary = &summaries[run][0];
                    assert_eq!(summary.dead_lettered().count(), dead, "{run}");
                    assert_eq!(summary.finished().count(), finished, "{run}");
                }
            }
        }
    }
}

/// The first ten dead letters of the `index` queue.
async fn index_dead_letters(docs: &Docs) -> Vec<DeadLetter> {
    dead_letters(
        &mut docs.redis.shared(),
        &docs.config("index"),
        &DeadLetterQuery {
            limit: 10,
            ..DeadLetterQuery::default()
        },
    )
    .await
    .unwrap()
}

/// How many entries the streams of `config`'s queue hold.
async fn stream_lengths(docs: &Docs, config: &QueueConfig) -> u64 {
    let mut total = 0;
    for key in config.ready_keys() {
        let len: u64 = redis::cmd("XLEN")
            .arg(&key)
            .query_async(&mut docs.redis.shared())
            .await
            .unwrap();
        total += len;
    }
    total
}

/// A stream entry's field/value pairs, in stream order.
type Fields = Vec<(String, Vec<u8>)>;

/// Replaces the unread entry of `job_id` with a copy whose `schema` is
/// `schema`, as a producer of a newer spec would write it.
async fn rewrite_schema(docs: &Docs, config: &QueueConfig, job_id: &str, schema: &str) {
    let mut conn = docs.redis.shared();
    for key in config.ready_keys() {
        // Pairs in stream order, as the producer wrote them.
        let entries: Vec<(String, Fields)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        for (id, fields) in entries {
            // Either shape: one `packed` field, or a field per pair.
            let pairs: Vec<(String, String)> = match packed::packed_value(&fields) {
                Some(value) => packed::unpack(value)
                    .unwrap()
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), String::from_utf8_lossy(value).into()))
                    .collect(),
                None => fields
                    .iter()
                    .map(|(name, value)| (name.clone(), String::from_utf8_lossy(value).into()))
                    .collect(),
            };
            if !pairs
                .iter()
                .any(|(name, value)| name == "job_id" && value == job_id)
            {
                continue;
            }
            let pairs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str(),
                        if name == "schema" {
                            schema
                        } else {
                            value.as_str()
                        },
                    )
                })
                .collect();
            let mut add = redis::cmd("XADD");
            add.arg(&key).arg("*");
            if packed::packed_value(&fields).is_some() {
                add.arg(packed::PACKED_FIELD)
                    .arg(packed::pack(pairs.into_iter()));
            } else {
                for (name, value) in pairs {
                    add.arg(name).arg(value);
                }
            }
            let _: String = add.query_async(&mut conn).await.unwrap();
            let _: u64 = redis::cmd("XDEL")
                .arg(&key)
                .arg(&id)
                .query_async(&mut conn)
                .await
                .unwrap();
            return;
        }
    }
    panic!("no entry of {job_id} in {:?}", config.ready_keys());
}

/// A handler handing on more than `max_children` hands on nothing: its job
/// is dead-lettered (`too_many_children`), which fails the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handing_on_more_than_max_children_publishes_nothing_and_dead_letters() {
    let (_server, docs) = docs("continue").await;
    let effects = Effects::default();
    let workers = docs.workers(&STAGES, &effects, &WorkerMetrics::new());
    // 8 pages and a thumbnail: 9 jobs, one more than ocr's max_children.
    docs.publish(&[("thick".to_owned(), Document::new(8, ""))])
        .await;
    wait_until(Duration::from_secs(30), "the run ends", || async {
        docs.status("thick").await.is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop(workers).await;
    assert_eq!(docs.status("thick").await.as_deref(), Some("failed"));
    let mut conn = docs.redis.shared();
    for stage in ["index", "thumbnail"] {
        for key in docs.config(stage).ready_keys() {
            let len: u64 = redis::cmd("XLEN")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(len, 0, "nothing handed to {stage} ({key})");
        }
    }
    let letters = dead_letters(
        &mut conn,
        &docs.config("ocr"),
        &DeadLetterQuery {
            limit: 10,
            ..DeadLetterQuery::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(letters.len(), 1);
    let detail = &letters[0].fields["detail"];
    assert!(
        detail
            .contains("too_many_children: handed on 9 jobs, more than max_children 8 of stage ocr"),
        "{detail}"
    );
}

/// `queuegen monitor`'s join gauges: a run whose first stage ran but whose
/// pages nobody works is in flight at the join, and its wait grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_gauges_each_join_s_oldest_wait_and_runs_in_flight() {
    let (_server, docs) = docs("fail").await;
    let effects = Effects::default();
    let ocr = docs.workers(&["ocr"], &effects, &WorkerMetrics::new());
    docs.publish(&[("waiting".to_owned(), Document::new(2, ""))])
        .await;
    wait_until(Duration::from_secs(15), "the run is opened", || {
        let effects = effects.clone();
        async move { !effects.of("ocr").is_empty() }
    })
    .await;
    stop(ocr).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let mut registry = Registry::default();
    let watched = ["ocr", "index", "thumbnail", "notify"]
        .map(|queue| WatchedQueue {
            config: docs.config(queue),
            alerts: AlertThresholds::default(),
        })
        .to_vec();
    let monitor =
        QueueMonitor::new(docs.redis.clone(), watched, &mut registry).with_pipelines(vec![
            WatchedPipeline {
                graph: docs.spec.pipelines[0].clone(),
                configs: vec![docs.config("notify")],
            },
        ]);
    monitor.refresh().await.unwrap();
    let mut exposition = String::new();
    prometheus_client::encoding::text::encode(&mut exposition, &registry).unwrap();
    assert!(
        exposition.contains(
            "queuegen_pipeline_runs_in_flight{pipeline=\"documents\",join=\"notify\"} 1\n"
        ),
        "{exposition}"
    );
    let wait: f64 = exposition
        .lines()
        .find_map(|line| {
            line.strip_prefix(
                "queuegen_pipeline_join_oldest_wait_seconds{pipeline=\"documents\",join=\"notify\"} ",
            )
        })
        .unwrap_or_else(|| panic!("no join wait gauge in:\n{exposition}"))
        .parse()
        .unwrap();
    assert!(wait >= 1.0, "the run has waited over a second: {wait}");
}
