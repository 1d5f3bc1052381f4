//! The operator's view of pipeline runs (`ops::runs`, what `queuegen runs` prints) over real runs: stage workers hand jobs on and settle them at the join, on a server and on a 6-node Cluster whose join partitions are in different slots.
//!
//! The stages are those of tests/tests/pipelines.rs: OCR a document, index
//! each page and make one thumbnail, then notify once after both.

#[path = "common/docs_pipeline.rs"]
mod docs_pipeline;

use std::collections::BTreeSet;
use std::time::Duration;

use docs_pipeline::{stop, Docs, Document, Effects, STAGES};
use queuegen_runtime::error::OperationError;
use queuegen_runtime::metrics::WorkerMetrics;
use queuegen_runtime::ops::runs::{
    run, runs, JoinRun, RunReport, RunState, RunsReport, SettledOutcome,
};
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::Error;
use queuegen_tests::support::RunningWorker;
use queuegen_tests::{RedisCluster, RedisServer};

/// The operator's view of the fixture's runs.
trait RunsView {
    async fn runs(&self, limit: usize) -> RunsReport;
    async fn run(&self, run_id: &str) -> queuegen_runtime::Result<RunReport>;
    async fn wait_for(&self, run_id: &str, state: RunState) -> RunReport;
    async fn wait_in_flight(&self, count: u64) -> RunsReport;
}

impl RunsView for Docs {
    async fn runs(&self, limit: usize) -> RunsReport {
        runs(
            &mut self.redis.shared(),
            &self.graph(),
            &self.configs(),
            limit,
        )
        .await
        .unwrap_or_else(|err| panic!("the runs view: {err}"))
    }

    async fn run(&self, run_id: &str) -> queuegen_runtime::Result<RunReport> {
        run(
            &mut self.redis.shared(),
            &self.graph(),
            &self.configs(),
            run_id,
            50,
        )
        .await
    }

    /// Polls `run_id` until it is in `state` at the join (30 s at most).
    async fn wait_for(&self, run_id: &str, state: RunState) -> RunReport {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let seen = self.run(run_id).await;
            if let Ok(report) = &seen {
                if report.joins[0].state == state {
                    return report.clone();
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {run_id} is not {state:?} at the join: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls until `count` runs are in flight at the join (30 s at most).
    async fn wait_in_flight(&self, count: u64) -> RunsReport {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let report = self.runs(50).await;
            if report.joins[0].in_flight == count {
                return report;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not {count} runs in flight: {report:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The stage workers of `stages`, with the fixture's handlers.
fn workers(docs: &Docs, stages: &[&'static str]) -> Vec<RunningWorker> {
    docs.workers(stages, &Effects::default(), &WorkerMetrics::new())
}

/// The stages of the jobs listed, sorted (a job's stage is read from its ID).
fn stages<'a>(jobs: impl Iterator<Item = &'a Option<String>>) -> Vec<String> {
    let mut stages: Vec<String> = jobs
        .map(|stage| stage.clone().unwrap_or_default())
        .collect();
    stages.sort();
    stages
}

fn notify(report: &RunReport) -> &JoinRun {
    assert_eq!(report.joins.len(), 1, "one join: {report:#?}");
    assert_eq!(report.joins[0].join, "notify");
    &report.joins[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_shows_what_it_waits_for_then_is_found_published() {
    let server = RedisServer::start();
    let docs = Docs::start(&server.url(), "runs-view", "fail").await;
    // Only the first stage runs: the runs open at the join and wait there.
    let ocr = workers(&docs, &["ocr"]);
    docs.publish(&[("doc-a", Document::new(2, ""))]).await;
    docs.wait_in_flight(1).await;
    docs.publish(&[("doc-b", Document::new(0, ""))]).await;
    let report = docs.wait_in_flight(2).await;
    stop(ocr).await;

    assert_eq!(
        (report.pipeline.as_str(), report.first.as_str()),
        ("documents", "ocr")
    );
    assert_eq!(report.keep_ms, docs.graph().keep.as_millis() as u64);
    let join = &report.joins[0];
    assert_eq!(join.join, "notify");
    assert_eq!(join.after, ["index", "thumbnail"]);
    assert_eq!(join.on_dead_letter, "fail");
    let listed: Vec<(&str, u64)> = join
        .runs
        .iter()
        .map(|run| (run.run_id.as_str(), run.waiting))
        .collect();
    // Oldest first: doc-a waits for its two pages and its thumbnail.
    assert_eq!(listed, [("doc-a", 3), ("doc-b", 1)], "{report:#?}");
    assert!(!join.truncated);
    let oldest = join.oldest.as_ref().unwrap();
    assert_eq!(oldest.run_id, "doc-a");
    assert!(oldest.started_ms <= join.runs[1].started_ms);
    assert_eq!(oldest.age_ms, report.server_time_ms - oldest.started_ms);
    let config = docs.config("notify");
    assert_eq!(oldest.partition, run_partition(&config, "doc-a"));
    assert_eq!(join.partitions.len(), 4);
    assert_eq!(join.partitions.iter().map(|p| p.in_flight).sum::<u64>(), 2);

    // A limit bounds the list, never the count or the oldest wait.
    let limited = docs.runs(1).await;
    let join = &limited.joins[0];
    assert_eq!(
        (join.in_flight, join.runs.len(), join.truncated),
        (2, 1, true)
    );
    assert_eq!(join.oldest.as_ref().unwrap().run_id, "doc-a");
    assert_eq!(join.oldest.as_ref().unwrap().waiting, 3);

    // The run by ID: open, with its outstanding jobs by stage.
    let open = docs.run("doc-a").await.unwrap();
    let at = notify(&open);
    assert_eq!((at.state, at.opened), (RunState::Open, true));
    assert_eq!(at.partition, run_partition(&config, "doc-a"));
    assert_eq!(at.outstanding, 3);
    assert_eq!(
        stages(at.outstanding_jobs.iter().map(|job| &job.stage)),
        ["index", "index", "thumbnail"]
    );
    assert!(at
        .outstanding_jobs
        .iter()
        .all(|job| job.job_id.starts_with("doc-a/")));
    assert_eq!(at.settled, 1, "the first stage's job settled: {at:#?}");
    assert_eq!(at.settled_jobs[0].job_id, "doc-a");
    assert_eq!(at.settled_jobs[0].stage.as_deref(), Some("ocr"));
    assert_eq!(at.settled_jobs[0].outcome, SettledOutcome::NotWaitedFor);
    assert!(at.ended_ms.is_none() && at.join_entry.is_none() && at.expires_ms.is_none());
    assert_eq!(at.started_ms, Some(oldest.started_ms));

    // What --json prints parses back, with its names.
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&open).unwrap()).unwrap();
    assert_eq!(json["joins"][0]["state"], "open");
    assert_eq!(json["joins"][0]["outstanding"], 3);
    assert_eq!(
        json["joins"][0]["settled_jobs"][0]["outcome"],
        "not_waited_for"
    );
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    assert_eq!(json["joins"][0]["runs"][0]["run_id"], "doc-a");
    assert_eq!(json["joins"][0]["runs"][0]["waiting"], 3);
    assert_eq!(json["joins"][0]["oldest"]["run_id"], "doc-a");

    // The other stages finish both runs: they leave the in-flight index,
    // and each is found by its ID, published with its summary.
    let rest = workers(&docs, &["index", "thumbnail", "notify"]);
    let published = docs.wait_for("doc-a", RunState::Published).await;
    docs.wait_for("doc-b", RunState::Published).await;
    stop(rest).await;
    let after = docs.runs(50).await;
    assert_eq!(after.joins[0].in_flight, 0, "{after:#?}");
    assert!(after.joins[0].runs.is_empty() && after.joins[0].oldest.is_none());

    let at = notify(&published);
    assert_eq!(at.outstanding, 0);
    assert!(at.outstanding_jobs.is_empty());
    let entry = at.join_entry.as_deref().expect("the join's entry");
    let ended = at.ended_ms.unwrap();
    assert!(ended >= at.started_ms.unwrap());
    assert_eq!(at.waited_ms, Some(ended - at.started_ms.unwrap()));
    // The keys expire `keep` after the end (read with PTTL).
    let expires = at.expires_ms.expect("an ended run expires");
    assert!(
        expires.abs_diff(ended + published.keep_ms) <= 50,
        "expires at {expires}, ended {ended} + keep {}",
        published.keep_ms
    );
    let mut summary: Vec<(Option<&str>, &str, Option<&str>)> = at
        .settled_jobs
        .iter()
        .map(|job| {
            (
                job.stage.as_deref(),
                job.outcome.as_str(),
                job.result_ref.as_deref(),
            )
        })
        .collect();
    summary.sort();
    assert_eq!(
        summary,
        [
            (Some("index"), "done", Some("index:0")),
            (Some("index"), "done", Some("index:1")),
            (Some("ocr"), "not waited for", None),
            (Some("thumbnail"), "done", Some("thumbnail:0")),
        ]
    );
    // The entry is the join's job, in the run's partition of notify.
    let keys = config.run_keys(at.partition, "documents", "doc-a");
    let found: Vec<redis::Value> = redis::cmd("XRANGE")
        .arg(&keys.ready)
        .arg(entry)
        .arg(entry)
        .query_async(&mut docs.redis.shared())
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{entry} is in {}", keys.ready);
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&published).unwrap()).unwrap();
    assert_eq!(json["joins"][0]["state"], "published");
    assert_eq!(json["joins"][0]["join_entry"], entry);

    // A run no join keeps is an error naming the pipeline and the run.
    let missing = docs.run("doc-none").await.unwrap_err();
    assert!(
        matches!(&missing, Error::Operation(OperationError::NoSuchRun { pipeline, run_id, .. })
            if pipeline == "documents" && run_id == "doc-none"),
        "{missing:?}"
    );
    let text = missing.to_string();
    assert!(
        text.contains("pipeline documents: no run \"doc-none\" at any join (notify partition"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_shows_as_failed_and_leaves_the_runs_in_flight() {
    let server = RedisServer::start();
    let docs = Docs::start(&server.url(), "runs-failed", "fail").await;
    let workers = workers(&docs, &STAGES);
    // A page that dead-letters fails the run at the join (`fail`); a first
    // stage's job that does fails it before it opened there.
    docs.publish(&[
        ("blank", Document::new(2, "index")),
        ("unreadable", Document::new(1, "ocr")),
    ])
    .await;
    let blank = docs.wait_for("blank", RunState::Failed).await;
    let unreadable = docs.wait_for("unreadable", RunState::Failed).await;
    // Let the last pages of `blank` settle (a failed run records nothing more).
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop(workers).await;

    let report = docs.runs(50).await;
    assert_eq!(report.joins[0].in_flight, 0, "{report:#?}");

    // (Opened or not: a dead page may settle before its parent opens the run.)
    let at = notify(&blank);
    assert!(at.join_entry.is_none(), "a failed run never joins");
    assert!(at.ended_ms.is_some() && at.expires_ms.is_some());
    assert!(
        at.settled_jobs
            .iter()
            .any(|job| job.stage.as_deref() == Some("index") && job.outcome == SettledOutcome::Dead),
        "the dead page is named: {at:#?}"
    );

    let at = notify(&unreadable);
    assert!(
        !at.opened,
        "the first job died before it opened the run here"
    );
    assert_eq!(at.started_ms, None);
    assert_eq!(at.settled_jobs.len(), 1);
    assert_eq!(at.settled_jobs[0].job_id, "unreadable");
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&unreadable).unwrap()).unwrap();
    assert_eq!(json["joins"][0]["state"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_view_reads_runs_from_partitions_in_different_slots() {
    let cluster = RedisCluster::start();
    let docs = Docs::start(&cluster.url(), "runs-cluster", "fail").await;
    assert!(docs.redis.is_cluster());
    let config = docs.config("notify");
    // One run in each partition of the join's queue.
    let mut ids: Vec<String> = Vec::new();
    let mut covered = BTreeSet::new();
    for n in 0.. {
        let id = format!("doc-{n}");
        if covered.insert(run_partition(&config, &id)) {
            ids.push(id);
        }
        if covered.len() == usize::from(config.partitions) {
            break;
        }
    }
    let ocr = workers(&docs, &["ocr"]);
    let documents: Vec<(&str, Document)> = ids
        .iter()
        .map(|id| (id.as_str(), Document::new(1, "")))
        .collect();
    docs.publish(&documents).await;
    let report = docs.wait_in_flight(ids.len() as u64).await;
    stop(ocr).await;

    let join = &report.joins[0];
    let listed: BTreeSet<&str> = join.runs.iter().map(|run| run.run_id.as_str()).collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect());
    assert!(
        join.runs.iter().all(|run| run.waiting == 2),
        "each waits for its page and its thumbnail: {join:#?}"
    );
    assert!(
        join.partitions.iter().all(|p| p.in_flight == 1),
        "{join:#?}"
    );
    let slots: BTreeSet<u16> = join
        .partitions
        .iter()
        .map(|p| cluster.slot_of(&p.key))
        .collect();
    assert!(slots.len() > 1, "the partitions' slots: {slots:?}");
    let nodes: BTreeSet<u16> = slots
        .iter()
        .map(|&slot| cluster.node_for_slot(slot).port)
        .collect();
    println!(
        "runs read from {} slots on {} primaries",
        slots.len(),
        nodes.len()
    );

    // One run at the join, read in its partition's slot.
    let open = docs.run(&ids[1]).await.unwrap();
    let at = notify(&open);
    assert_eq!(at.state, RunState::Open);
    assert_eq!(at.outstanding, 2);
    assert_eq!(
        stages(at.outstanding_jobs.iter().map(|job| &job.stage)),
        ["index", "thumbnail"]
    );
}
