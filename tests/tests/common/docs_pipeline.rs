//! The `documents` pipeline the runtime's pipeline tests run (OCR a document, index each page and make one thumbnail, then notify once after both), with stage handlers that record what they did and a fixture that sets it up on a server or a Cluster.
//!
//! Written by hand as the generated code would be (one `HandOn` struct per
//! stage, typed by its `then`), so that a test can choose the join's policy
//! and run any subset of the stages. Included by the test binaries that
//! use it (`#[path]`); each uses a part, so unused items are allowed.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen::gen::functions::{render_library, LIBRARY_VERSION};
use queuegen::gen::runtime_config::queue_config;
use queuegen::spec::check_str;
use queuegen::spec::model::Spec;
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::metrics::WorkerMetrics;
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::runs::{
    HandOn, Handoff, Pipeline, PipelineRuntime, RunSummary, StageHandler, StageWorker, Step,
};
use queuegen_runtime::{
    Envelope, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};

use queuegen_tests::library;
use queuegen_tests::support::{init_tracing, spawn_worker, unique_prefix, RunningWorker};

/// The spec, its join's `on_dead_letter` written `POLICY`.
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
    partitions: 4
    dead_letter: { owner: docs }
pipelines:
  documents:
    stages:
      ocr: { then: [index, thumbnail], max_children: 8 }
      index: {}
      thumbnail: {}
      notify: { join: [index, thumbnail], on_dead_letter: POLICY }
"#;

/// The stages, in pipeline order.
pub const STAGES: [&str; 4] = ["ocr", "index", "thumbnail", "notify"];

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Document", schema = 1)]
pub struct Document {
    pub pages: u32,
    /// `index`: the page jobs dead-letter (until replayed); `crash`: their
    /// handler panics on every delivery (poison); `ocr`: this job dead-letters.
    pub fail: String,
}

impl Document {
    pub fn new(pages: u32, fail: &str) -> Document {
        Document {
            pages,
            fail: fail.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Page", schema = 1)]
pub struct Page {
    pub page: u32,
    pub fail: String,
}

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Notice", schema = 1)]
pub struct Notice {
    pub document: String,
}

/// What an `ocr` job hands on, as generated: each `then` stage's
/// envelopes, and the join's.
pub struct OcrNext {
    pub index: Vec<Page>,
    pub thumbnail: Vec<Page>,
    pub notify: Notice,
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
/// duplicate effect), and each join's summaries by run.
#[derive(Default, Clone)]
pub struct Effects {
    done: Arc<Mutex<BTreeMap<&'static str, Vec<String>>>>,
    pub summaries: Arc<Mutex<BTreeMap<String, Vec<RunSummary>>>>,
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

    /// The job IDs `stage` ran for, in order.
    pub fn of(&self, stage: &str) -> Vec<String> {
        self.done
            .lock()
            .unwrap()
            .get(stage)
            .cloned()
            .unwrap_or_default()
    }
}

pub struct Ocr(pub Effects);

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
pub struct PageStage(pub &'static str, pub Effects);

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
        if job.fail == "crash" && self.0 == "index" {
            panic!("a bug that takes the handler down on {}", ctx.job_id());
        }
        if job.fail == self.0 && !replayed {
            return Ok(Outcome::dead_letter("page is blank").into());
        }
        self.1.record(self.0, ctx.job_id());
        Ok(Step::done().with_result(format!("{}:{}", self.0, job.page)))
    }
}

pub struct Notify(pub Effects);

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

/// The docs service on a server or a Cluster under a key prefix of its
/// own: the library loaded, every queue's groups made.
pub struct Docs {
    pub redis: Redis,
    pub spec: Spec,
    pub prefix: String,
    /// `poison.max_deliveries` of every queue, when not the spec's.
    pub max_deliveries: Option<u32>,
}

impl Docs {
    /// At `url`, the join's `on_dead_letter` being `policy`.
    pub async fn start(url: &str, name: &str, policy: &str) -> Docs {
        init_tracing();
        let source = SPEC.replace("POLICY", policy);
        let checked = check_str(&source, "docs.yaml");
        let spec = checked
            .spec
            .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics));
        let redis = Redis::connect(url).await.unwrap();
        let code = render_library(&spec, "docs.yaml", LIBRARY_VERSION).unwrap();
        library::load_code(&redis, &code).await;
        let docs = Docs {
            redis,
            spec,
            prefix: unique_prefix(name),
            max_deliveries: None,
        };
        for queue in STAGES {
            ensure_groups(&docs.redis, &docs.config(queue))
                .await
                .unwrap();
        }
        docs
    }

    /// `queue`'s configuration under the fixture's prefix, claiming after 2 s.
    pub fn config(&self, queue: &str) -> QueueConfig {
        let mut config = queue_config(&self.spec, self.spec.queue(queue).unwrap());
        config.key_prefix = self.prefix.clone().into();
        config.claim.min_idle = Duration::from_secs(2);
        config.claim.every = Duration::from_millis(200);
        if let Some(max) = self.max_deliveries {
            config.poison.max_deliveries = max;
        }
        config
    }

    pub fn configs(&self) -> Vec<QueueConfig> {
        STAGES.iter().map(|queue| self.config(queue)).collect()
    }

    pub fn graph(&self) -> Pipeline {
        self.spec.pipelines[0].clone()
    }

    pub fn pipeline(&self) -> PipelineRuntime {
        PipelineRuntime::new(&self.redis, self.graph(), self.configs()).unwrap()
    }

    /// Workers of `stages` (of [`STAGES`]), recording into `effects` and `metrics`.
    pub fn workers(
        &self,
        stages: &[&'static str],
        effects: &Effects,
        metrics: &WorkerMetrics,
    ) -> Vec<RunningWorker> {
        let pipeline = self.pipeline();
        stages
            .iter()
            .map(|&stage| {
                let config = self.config(stage);
                let p = pipeline.clone();
                let block = Duration::from_millis(200);
                let effects = effects.clone();
                match stage {
                    "ocr" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, Ocr(effects)).unwrap(),
                        )
                        .read_block(block)
                        .with_metrics(metrics.clone()),
                    ),
                    "index" | "thumbnail" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, PageStage(stage, effects)).unwrap(),
                        )
                        .read_block(block)
                        .with_metrics(metrics.clone()),
                    ),
                    "notify" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, Notify(effects)).unwrap(),
                        )
                        .read_block(block)
                        .with_metrics(metrics.clone()),
                    ),
                    other => panic!("no stage {other}"),
                }
            })
            .collect()
    }

    /// Publishes `documents` (run ID, document) to `ocr`.
    pub async fn publish<S: AsRef<str>>(&self, documents: &[(S, Document)]) {
        Producer::<Document>::new(&self.redis, self.config("ocr"))
            .publish_many(
                documents
                    .iter()
                    .map(|(id, doc)| NewJob::new(id.as_ref(), "acme", doc.clone())),
            )
            .await
            .unwrap();
    }

    /// The run's status at the join: `published`, `failed`, or none.
    pub async fn status(&self, run: &str) -> Option<String> {
        let config = self.config("notify");
        let keys = config.run_keys(run_partition(&config, run), "documents", run);
        redis::cmd("HGET")
            .arg(&keys.run)
            .arg("status")
            .query_async(&mut self.redis.shared())
            .await
            .unwrap()
    }

    /// The settled record of `job_id` at the join (`done:…`, `dead`), if any.
    pub async fn record_at_join(&self, run: &str, job_id: &str) -> Option<String> {
        let config = self.config("notify");
        let keys = config.run_keys(run_partition(&config, run), "documents", run);
        redis::cmd("HGET")
            .arg(&keys.settled)
            .arg(job_id)
            .query_async(&mut self.redis.shared())
            .await
            .unwrap()
    }
}

/// Stops every worker of `workers`.
pub async fn stop(workers: Vec<RunningWorker>) {
    for worker in workers {
        worker.stop().await;
    }
}
