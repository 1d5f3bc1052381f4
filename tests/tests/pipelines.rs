//! Pipeline runs on a real server: stage workers hand jobs on, joins run once with their run's summary, and dead letters end runs as each join's policy says.
//!
//! The stages' hand-offs are written here by hand, as the generated code
//! writes them (one struct per stage, typed by its `then`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen::gen::functions::{render_library, LIBRARY_VERSION};
use queuegen::gen::runtime_config::queue_config;
use queuegen::spec::check_str;
use queuegen::spec::model::Spec;
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::metrics::{prometheus_client, Registry, WorkerMetrics};
use queuegen_runtime::ops::dead_letters::{dead_letters, DeadLetterQuery};
use queuegen_runtime::ops::gauges::{QueueMonitor, WatchedPipeline};
use queuegen_runtime::ops::status::{AlertThresholds, WatchedQueue};
use queuegen_runtime::runs::child_job_id;
use queuegen_runtime::runs::{
    HandOn, Handoff, PipelineRuntime, RunSummary, StageHandler, StageWorker, Step,
};
use queuegen_runtime::transitions::replay;
use queuegen_runtime::{
    Envelope, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_tests::support::{
    init_tracing, spawn_worker, unique_prefix, wait_until, RunningWorker,
};
use queuegen_tests::RedisServer;

/// OCR a document, then index each of its pages and make one thumbnail,
/// then notify the owner once, after both.
const SPEC: &str = r#"
version: 1
service: docs
envelopes:
  Document:
    schema: 1
    fields:
      pages: { type: u32 }
      fail: { type: string, max_bytes: 16 }
  Page:
    schema: 1
    fields:
      page: { type: u32 }
      fail: { type: string, max_bytes: 16 }
  Notice:
    schema: 1
    fields:
      document: { type: string, max_bytes: 128 }
queues:
  ocr:
    envelope: Document
    partitions: 2
    dead_letter: { owner: docs }
  index:
    envelope: Page
    partitions: 3
    dead_letter: { owner: docs }
    dedup: { window: 1h }
  thumbnail:
    envelope: Page
    partitions: 2
    dead_letter: { owner: docs }
    dedup: { window: 1h }
  notify:
    envelope: Notice
    partitions: 3
    dead_letter: { owner: docs }
pipelines:
  documents:
    stages:
      ocr: { then: [index, thumbnail], max_children: 8 }
      index: {}
      thumbnail: {}
      notify: { join: [index, thumbnail], on_dead_letter: POLICY }
"#;

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Document", schema = 1)]
struct Document {
    pages: u32,
    /// `index`: the page jobs dead-letter; `ocr`: this job does.
    fail: String,
}

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Page", schema = 1)]
struct Page {
    page: u32,
    fail: String,
}

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Notice", schema = 1)]
struct Notice {
    document: String,
}

/// What an `ocr` job hands on, as generated: each `then` stage's
/// envelopes, and the join's.
struct OcrNext {
    index: Vec<Page>,
    thumbnail: Vec<Page>,
    notify: Notice,
}

impl HandOn for OcrNext {
    fn count(&self) -> usize {
        self.index.len() + self.thumbnail.len()
    }

    fn hand_on(self, to: &mut Handoff<'_>) -> queuegen_runtime::Result<()> {
        to.publish("index", self.index)?;
        to.publish("thumbnail", self.thumbnail)?;
        to.join("notify", self.notify)
    }
}

/// Every durable effect, by stage: the job IDs it ran for (a repeat is a
/// duplicate effect), and each join's summary.
#[derive(Default, Clone)]
struct Effects {
    done: Arc<Mutex<BTreeMap<&'static str, Vec<String>>>>,
    summaries: Arc<Mutex<BTreeMap<String, Vec<RunSummary>>>>,
}

impl Effects {
    fn record(&self, stage: &'static str, job_id: &str) {
        self.done
            .lock()
            .unwrap()
            .entry(stage)
            .or_default()
            .push(job_id.to_owned());
    }

    fn of(&self, stage: &str) -> Vec<String> {
        self.done
            .lock()
            .unwrap()
            .get(stage)
            .cloned()
            .unwrap_or_default()
    }
}

struct Ocr(Effects);

impl StageHandler<Document> for Ocr {
    type Next = OcrNext;

    async fn handle(
        &self,
        job: Document,
        _summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<OcrNext>, JobError> {
        if job.fail == "ocr" {
            return Ok(Outcome::dead_letter("unreadable").into());
        }
        self.0.record("ocr", ctx.job_id());
        let page = |page| Page {
            page,
            fail: job.fail.clone(),
        };
        Ok(Step::hand_on(OcrNext {
            index: (0..job.pages).map(page).collect(),
            thumbnail: vec![Page {
                page: 0,
                fail: String::new(),
            }],
            notify: Notice {
                document: ctx.job_id().to_owned(),
            },
        }))
    }
}

/// `index` and `thumbnail`: a page job that ends the run there.
struct PageStage(&'static str, Effects);

impl StageHandler<Page> for PageStage {
    type Next = ();

    async fn handle(
        &self,
        job: Page,
        _summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        assert!(ctx.run().is_some(), "a handed-on job knows its run");
        // Dead until an operator replays it (the cause was fixed).
        let replayed = ctx.header().reason.as_deref() == Some("replay");
        if job.fail == self.0 && !replayed {
            return Ok(Outcome::dead_letter("page is blank").into());
        }
        self.1.record(self.0, ctx.job_id());
        Ok(Step::hand_on(()).with_result(format!("{}:{}", self.0, job.page)))
    }
}

struct Notify(Effects);

impl StageHandler<Notice> for Notify {
    type Next = ();

    async fn handle(
        &self,
        job: Notice,
        summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        assert_eq!(ctx.run_id(), job.document, "the join's job is its run's");
        self.0.record("notify", ctx.job_id());
        self.0
            .summaries
            .lock()
            .unwrap()
            .entry(ctx.run_id().to_owned())
            .or_default()
            .push(summary.expect("a join receives its run's summary"));
        Ok(Outcome::Done.into())
    }
}

/// A server with the docs library loaded and every queue's groups made.
struct Docs {
    _server: RedisServer,
    redis: Redis,
    spec: Spec,
    prefix: String,
}

impl Docs {
    async fn start(policy: &str) -> Docs {
        init_tracing();
        let server = RedisServer::start();
        let source = SPEC.replace("POLICY", policy);
        let checked = check_str(&source, "docs.yaml");
        let spec = checked
            .spec
            .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics));
        let redis = Redis::connect(server.url()).await.unwrap();
        let code = render_library(&spec, "docs.yaml", LIBRARY_VERSION).unwrap();
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&code)
            .query_async(&mut redis.shared())
            .await
            .unwrap();
        let docs = Docs {
            _server: server,
            redis,
            spec,
            prefix: unique_prefix("pipelines"),
        };
        for queue in ["ocr", "index", "thumbnail", "notify"] {
            ensure_groups(&docs.redis, &docs.config(queue))
                .await
                .unwrap();
        }
        docs
    }

    fn config(&self, queue: &str) -> QueueConfig {
        let mut config = queue_config(&self.spec, self.spec.queue(queue).unwrap());
        config.key_prefix = self.prefix.clone().into();
        config.claim.min_idle = Duration::from_secs(2);
        config.claim.every = Duration::from_millis(200);
        config
    }

    fn pipeline(&self) -> PipelineRuntime {
        let configs = ["ocr", "index", "thumbnail", "notify"].map(|q| self.config(q));
        PipelineRuntime::new(&self.redis, self.spec.pipelines[0].clone(), configs).unwrap()
    }

    fn workers(&self, effects: &Effects) -> Vec<RunningWorker> {
        self.metered_workers(effects, &WorkerMetrics::new())
    }

    /// The four stage workers, recording into `metrics`.
    fn metered_workers(&self, effects: &Effects, metrics: &WorkerMetrics) -> Vec<RunningWorker> {
        let pipeline = self.pipeline();
        let stage = |name| self.config(name);
        vec![
            spawn_worker(
                Worker::new(
                    &self.redis,
                    stage("ocr"),
                    StageWorker::new(pipeline.clone(), "ocr", Ocr(effects.clone())).unwrap(),
                )
                .with_metrics(metrics.clone()),
            ),
            spawn_worker(
                Worker::new(
                    &self.redis,
                    stage("index"),
                    StageWorker::new(
                        pipeline.clone(),
                        "index",
                        PageStage("index", effects.clone()),
                    )
                    .unwrap(),
                )
                .with_metrics(metrics.clone()),
            ),
            spawn_worker(
                Worker::new(
                    &self.redis,
                    stage("thumbnail"),
                    StageWorker::new(
                        pipeline.clone(),
                        "thumbnail",
                        PageStage("thumbnail", effects.clone()),
                    )
                    .unwrap(),
                )
                .with_metrics(metrics.clone()),
            ),
            spawn_worker(
                Worker::new(
                    &self.redis,
                    stage("notify"),
                    StageWorker::new(pipeline, "notify", Notify(effects.clone())).unwrap(),
                )
                .with_metrics(metrics.clone()),
            ),
        ]
    }

    async fn publish(&self, documents: &[(String, Document)]) {
        let producer = Producer::<Document>::new(&self.redis, self.config("ocr"));
        producer
            .publish_many(
                documents
                    .iter()
                    .map(|(id, doc)| NewJob::new(id.clone(), "acme", doc.clone())),
            )
            .await
            .unwrap();
    }

    /// The run's status at the join: `published`, `failed`, or none.
    async fn status(&self, run: &str) -> Option<String> {
        let config = self.config("notify");
        let keys = config.run_keys(
            queuegen_runtime::partition::run_partition(&config, run),
            "documents",
            run,
        );
        redis::cmd("HGET")
            .arg(&keys.run)
            .arg("status")
            .query_async(&mut self.redis.shared())
            .await
            .unwrap()
    }
}

fn document(pages: u32, fail: &str) -> Document {
    Document {
        pages,
        fail: fail.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_joins_once_with_the_jobs_it_waited_for() {
    let docs = Docs::start("fail").await;
    let effects = Effects::default();
    let metrics = WorkerMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let workers = docs.metered_workers(&effects, &metrics);
    // 0 to 3 pages: a fan-out of none still has its thumbnail to wait for.
    let documents: Vec<(String, Document)> = (0..24)
        .map(|n| (format!("doc-{n}"), document(n % 4, "")))
        .collect();
    docs.publish(&documents).await;
    wait_until(Duration::from_secs(30), "every run is notified", || {
        let effects = effects.clone();
        async move { effects.of("notify").len() >= 24 }
    })
    .await;
    // Nothing more arrives late.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for worker in workers {
        worker.stop().await;
    }

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
        let docs = Docs::start(policy).await;
        let effects = Effects::default();
        let workers = docs.workers(&effects);
        let documents = vec![
            ("ok".to_owned(), document(2, "")),
            ("blank".to_owned(), document(2, "index")),
            ("unreadable".to_owned(), document(2, "ocr")),
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
        for worker in workers {
            worker.stop().await;
        }
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

/// The settled record of `job_id` at the join (`done:…`, `dead`), if any.
async fn record_at_join(docs: &Docs, run: &str, job_id: &str) -> Option<String> {
    let config = docs.config("notify");
    let keys = config.run_keys(
        queuegen_runtime::partition::run_partition(&config, run),
        "documents",
        run,
    );
    redis::cmd("HGET")
        .arg(&keys.settled)
        .arg(job_id)
        .query_async(&mut docs.redis.shared())
        .await
        .unwrap()
}

/// A dead page replayed after its run ended runs its handler again, and
/// its settle records nothing: under `fail` the run stays failed and the
/// join never runs; under `continue` the join ran once, naming it dead, and
/// does not run again (docs/spec.md#pipelines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_page_runs_again_and_changes_no_ended_run() {
    for policy in ["fail", "continue"] {
        let docs = Docs::start(policy).await;
        let effects = Effects::default();
        let workers = docs.workers(&effects);
        docs.publish(&[("blank".to_owned(), document(1, "index"))])
            .await;
        wait_until(Duration::from_secs(30), "the run ends", || async {
            docs.status("blank").await.is_some()
        })
        .await;
        let ended = docs.status("blank").await;
        let page = child_job_id("blank", "blank", "index", 0);
        assert_eq!(
            record_at_join(&docs, "blank", &page).await.as_deref(),
            Some("dead")
        );
        let notices = effects.of("notify").len();

        let index = docs.config("index");
        let letters = dead_letters(
            &mut docs.redis.shared(),
            &index,
            &DeadLetterQuery {
                limit: 10,
                ..DeadLetterQuery::default()
            },
        )
        .await
        .unwrap();
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
        for worker in workers {
            worker.stop().await;
        }
        assert_eq!(
            docs.status("blank").await,
            ended,
            "{policy}: the run's end stands"
        );
        assert_eq!(
            record_at_join(&docs, "blank", &page).await.as_deref(),
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

/// A handler handing on more than `max_children` hands on nothing: its job
/// is dead-lettered (`too_many_children`), which fails the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handing_on_more_than_max_children_publishes_nothing_and_dead_letters() {
    let docs = Docs::start("continue").await;
    let effects = Effects::default();
    let workers = docs.workers(&effects);
    // 8 pages and a thumbnail: 9 jobs, one more than ocr's max_children.
    docs.publish(&[("thick".to_owned(), document(8, ""))]).await;
    wait_until(Duration::from_secs(30), "the run ends", || async {
        docs.status("thick").await.is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for worker in workers {
        worker.stop().await;
    }
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
    let docs = Docs::start("fail").await;
    let effects = Effects::default();
    let ocr = spawn_worker(Worker::new(
        &docs.redis,
        docs.config("ocr"),
        StageWorker::new(docs.pipeline(), "ocr", Ocr(effects.clone())).unwrap(),
    ));
    docs.publish(&[("waiting".to_owned(), document(2, ""))])
        .await;
    wait_until(Duration::from_secs(15), "the run is opened", || {
        let effects = effects.clone();
        async move { !effects.of("ocr").is_empty() }
    })
    .await;
    ocr.stop().await;
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
