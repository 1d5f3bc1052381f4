//! The dashboard's pipeline pages, driven with `tower::ServiceExt::oneshot`
//! over real runs: stage workers on a private redis-server hand jobs on and
//! settle them at the join, as tests/tests/runs_view.rs does for `ops::runs`.
//! A run in flight (listed, with what it waits for, by stage), then
//! published with its summary; a failed run; and every bad request named in
//! a 404 or 400 (the malformed ones before Redis is asked).
//!
//! The stages: OCR a document, index each page and make one thumbnail, then
//! notify once after both (`on_dead_letter: fail`).

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use queuegen::runtime_config::queue_config;
use queuegen::spec::model::Spec;
use queuegen_dashboard::{Dashboard, DashboardOptions, DashboardPipeline, DashboardQueue};
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::ops::runs::{run, runs, RunReport, RunState, RunsReport};
use queuegen_runtime::runs::{
    HandOn, Handoff, PipelineRuntime, RunSummary, StageHandler, StageWorker, Step,
};
use queuegen_runtime::{
    Envelope, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_tests::support::{init_tracing, spawn_worker, RunningWorker};
use queuegen_tests::{library, RedisServer};
use tower::ServiceExt;

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
      notify: { join: [index, thumbnail], on_dead_letter: fail }
"#;

const STAGES: [&str; 4] = ["ocr", "index", "thumbnail", "notify"];

#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Document", schema = 1)]
struct Document {
    pages: u32,
    /// `index`: the page jobs dead-letter.
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

struct Ocr;

impl StageHandler<Document> for Ocr {
    type Next = OcrNext;

    async fn handle(
        &self,
        job: Document,
        _summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<OcrNext>, JobError> {
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

struct PageStage(&'static str);

impl StageHandler<Page> for PageStage {
    type Next = ();

    async fn handle(
        &self,
        job: Page,
        _summary: Option<RunSummary>,
        _ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        if job.fail == self.0 {
            return Ok(Outcome::dead_letter("page is blank").into());
        }
        Ok(Step::hand_on(()).with_result(format!("s3://{}/{}", self.0, job.page)))
    }
}

struct Notify;

impl StageHandler<Notice> for Notify {
    type Next = ();

    async fn handle(
        &self,
        _job: Notice,
        _summary: Option<RunSummary>,
        _ctx: &JobContext,
    ) -> Result<Step<()>, JobError> {
        Ok(Outcome::Done.into())
    }
}

/// The docs service on a private server: library loaded, groups made.
struct Docs {
    redis: Redis,
    spec: Spec,
}

impl Docs {
    async fn start(server: &RedisServer) -> Docs {
        init_tracing();
        let checked = queuegen::spec::check_str(SPEC, "docs.yaml");
        let spec = checked
            .spec
            .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics));
        let redis = Redis::connect(server.url()).await.unwrap();
        let code = queuegen::gen::functions::render_library(
            &spec,
            "docs.yaml",
            queuegen::gen::functions::LIBRARY_VERSION,
        )
        .unwrap();
        library::load_code(&redis, &code).await;
        let docs = Docs { redis, spec };
        for queue in STAGES {
            ensure_groups(&docs.redis, &docs.config(queue))
                .await
                .unwrap();
        }
        docs
    }

    /// The spec's configuration, with a quick claim for the workers.
    fn config(&self, queue: &str) -> QueueConfig {
        let mut config = queue_config(&self.spec, self.spec.queue(queue).unwrap());
        config.claim.min_idle = Duration::from_secs(2);
        config.claim.every = Duration::from_millis(200);
        config
    }

    fn configs(&self) -> Vec<QueueConfig> {
        STAGES.iter().map(|queue| self.config(queue)).collect()
    }

    /// The dashboard of every queue and the pipeline, as `queuegen
    /// dashboard` builds it from the spec.
    fn dashboard(&self, redis: Redis) -> Router {
        let queues = self
            .spec
            .queues
            .iter()
            .map(|queue| DashboardQueue::new(&self.spec, queue_config(&self.spec, queue)).unwrap())
            .collect();
        let pipelines =
            DashboardPipeline::of_spec(&self.spec, &[], |queue| queue_config(&self.spec, queue));
        assert_eq!(pipelines.len(), 1);
        Dashboard::with_pipelines(queues, pipelines, redis, DashboardOptions::default()).router()
    }

    /// Workers of the stages named, each on its own queue.
    fn workers(&self, stages: &[&'static str]) -> Vec<RunningWorker> {
        let pipeline =
            PipelineRuntime::new(&self.redis, self.spec.pipelines[0].clone(), self.configs())
                .unwrap();
        let block = Duration::from_millis(200);
        stages
            .iter()
            .map(|&stage| {
                let config = self.config(stage);
                let p = pipeline.clone();
                match stage {
                    "ocr" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, Ocr).unwrap(),
                        )
                        .read_block(block),
                    ),
                    "index" | "thumbnail" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, PageStage(stage)).unwrap(),
                        )
                        .read_block(block),
                    ),
                    "notify" => spawn_worker(
                        Worker::new(
                            &self.redis,
                            config,
                            StageWorker::new(p, stage, Notify).unwrap(),
                        )
                        .read_block(block),
                    ),
                    other => panic!("no stage {other}"),
                }
            })
            .collect()
    }

    async fn publish(&self, documents: &[(&str, u32, &str)]) {
        Producer::<Document>::new(&self.redis, self.config("ocr"))
            .publish_many(documents.iter().map(|(id, pages, fail)| {
                NewJob::new(
                    *id,
                    "acme",
                    Document {
                        pages: *pages,
                        fail: fail.to_string(),
                    },
                )
            }))
            .await
            .unwrap();
    }

    async fn runs(&self) -> RunsReport {
        runs(
            &mut self.redis.shared(),
            &self.spec.pipelines[0],
            &self.configs(),
            50,
        )
        .await
        .unwrap()
    }

    /// Polls until `count` runs are in flight at the join (30 s at most).
    async fn wait_in_flight(&self, count: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let report = self.runs().await;
            if report.joins[0].in_flight == count {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not {count} runs in flight: {report:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls run `run_id` until it is in `state` at the join (30 s at most).
    async fn wait_for(&self, run_id: &str, state: RunState) -> RunReport {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let seen = run(
                &mut self.redis.shared(),
                &self.spec.pipelines[0],
                &self.configs(),
                run_id,
                50,
            )
            .await;
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
}

async fn stop(workers: Vec<RunningWorker>) {
    for worker in workers {
        worker.stop().await;
    }
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn get(router: &Router, uri: &str) -> Answer {
    let response = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A page that must answer 200.
async fn page(router: &Router, uri: &str) -> String {
    let answer = get(router, uri).await;
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
    answer.body
}

/// The HTML of the element that opens with `opening` (up to `</close>`).
fn element<'a>(html: &'a str, opening: &str, close: &str) -> &'a str {
    let start = html
        .find(opening)
        .unwrap_or_else(|| panic!("no {opening} in {html}"));
    let end = html[start..]
        .find(&format!("</{close}>"))
        .unwrap_or_else(|| panic!("{opening} does not end"));
    &html[start..start + end]
}

/// The text of the first `data-field="FIELD"` inside `html` (its tags removed).
fn field(html: &str, field: &str) -> String {
    let marker = format!("data-field=\"{field}\">");
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {field} in {html}"))
        + marker.len();
    let content = &html[at..at + closing_of(&html[at..])];
    unescape(strip_tags(content).trim())
}

/// HTML text as written: minijinja's escaper writes `/` as `&#x2f;`.
fn unescape(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Where the element whose content starts at the beginning of `rest` ends.
fn closing_of(rest: &str) -> usize {
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(open) = rest[at..].find('<') {
        let tag = &rest[at + open..];
        let end = tag.find('>').expect("a tag ends");
        if tag.starts_with("</") {
            if depth == 0 {
                return at + open;
            }
            depth -= 1;
        } else if !tag[..end].ends_with('/') {
            depth += 1;
        }
        at += open + end + 1;
    }
    rest.len()
}

fn strip_tags(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// The row `<tr data-job="JOB">` of the stage group `data-stage="STAGE"`:
/// its state and result.
fn job(html: &str, stage: &str, job_id: &str) -> (String, String) {
    let group = element(html, &format!("data-stage=\"{stage}\""), "tbody");
    let escaped = job_id.replace('/', "&#x2f;");
    let row = element(group, &format!("data-job=\"{escaped}\""), "tr");
    (field(row, "state"), field(row, "result"))
}

/// The job IDs of the stage group `STAGE` on a run's page, in order.
fn jobs_of(html: &str, stage: &str) -> Vec<String> {
    let group = element(html, &format!("data-stage=\"{stage}\""), "tbody");
    group
        .match_indices("data-job=\"")
        .map(|(at, marker)| {
            let rest = &group[at + marker.len()..];
            unescape(&rest[..rest.find('"').unwrap()])
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_are_listed_and_a_run_s_page_shows_its_jobs_by_stage_until_published() {
    let server = RedisServer::start();
    let docs = Docs::start(&server).await;
    // Only the first stage runs: the runs open at the join and wait there.
    let ocr = docs.workers(&["ocr"]);
    docs.publish(&[("doc-a", 2, "")]).await;
    docs.wait_in_flight(1).await;
    // A run ID with a slash, which its links encode.
    docs.publish(&[("doc/b", 0, "")]).await;
    docs.wait_in_flight(2).await;
    stop(ocr).await;
    let router = docs.dashboard(Redis::connect(server.url()).await.unwrap());

    // The pipelines' page: the join's runs in flight, oldest first.
    let html = page(&router, "/pipelines").await;
    assert!(
        html.contains("runs start at ocr; ocr → index, thumbnail; notify joins index, thumbnail"),
        "{html}"
    );
    let totals = element(&html, "id=\"join-documents-notify\"", "p");
    assert_eq!(field(totals, "in-flight"), "2");
    assert!(
        totals.contains("(run <a href=\"/pipelines/documents/runs/doc-a\">doc-a</a>, partition"),
        "the oldest wait is doc-a's: {totals}"
    );
    let table = element(&html, "id=\"runs-documents-notify\"", "table");
    let rows: Vec<&str> = table
        .match_indices("<tr data-run=")
        .map(|(at, _)| &table[at..])
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows[0].starts_with("<tr data-run=\"doc-a\""),
        "oldest first: {table}"
    );
    assert_eq!(field(rows[0], "waiting"), "3", "two pages and a thumbnail");
    assert!(
        rows[1].starts_with("<tr data-run=\"doc&#x2f;b\"")
            && rows[1].contains("href=\"/pipelines/documents/runs/doc%2Fb\""),
        "{table}"
    );
    assert_eq!(field(rows[1], "waiting"), "1", "its thumbnail");
    assert!(
        html.contains("action=\"/pipelines/documents/runs\""),
        "a lookup form for ended runs: {html}"
    );
    assert!(
        html.contains("href=\"/pipelines\">Pipelines</a>"),
        "in the nav"
    );
    assert!(page(&router, "/pipelines/documents")
        .await
        .contains("data-run=\"doc-a\""));

    // The overview has a row per join, and /api/status the `pipelines` key.
    let overview = page(&router, "/").await;
    let row = element(&overview, "<tr id=\"join-documents-notify\"", "tr");
    assert_eq!(field(row, "in-flight"), "2");
    assert_eq!(field(row, "oldest-run"), "doc-a");
    let status: serde_json::Value =
        serde_json::from_str(&page(&router, "/api/status").await).unwrap();
    assert_eq!(status["pipelines"][0]["pipeline"], "documents");
    assert_eq!(status["pipelines"][0]["joins"][0]["in_flight"], 2);
    assert_eq!(
        status["pipelines"][0]["joins"][0]["oldest"]["run_id"],
        "doc-a"
    );
    assert!(
        status["queues"].as_array().unwrap().len() == 4,
        "and the queues: {status}"
    );

    // The run's page: open, its jobs by stage in the pipeline's order.
    let html = page(&router, "/pipelines/documents/runs/doc-a").await;
    let join = element(&html, "id=\"join-notify\"", "section");
    assert_eq!(field(join, "state"), "open");
    assert_eq!(field(join, "outstanding"), "3");
    assert_eq!(field(join, "settled"), "1");
    assert!(field(join, "summary").starts_with("Open for"), "{join}");
    let order: Vec<&str> = join
        .match_indices("data-stage=\"")
        .map(|(at, marker)| {
            let rest = &join[at + marker.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert_eq!(order, ["ocr", "index", "thumbnail"]);
    assert_eq!(
        job(join, "ocr", "doc-a"),
        ("ended".into(), "not waited for".into())
    );
    let pages = jobs_of(join, "index");
    assert_eq!(pages.len(), 2);
    for id in &pages {
        assert!(id.starts_with("doc-a/index/"), "{id}");
        assert_eq!(job(join, "index", id).0, "waiting");
    }
    assert_eq!(jobs_of(join, "thumbnail").len(), 1);

    // The ID with a slash: encoded or not, the same run.
    for uri in [
        "/pipelines/documents/runs/doc%2Fb",
        "/pipelines/documents/runs/doc/b",
    ] {
        let html = page(&router, uri).await;
        assert!(
            html.contains("<span id=\"run-id\">doc&#x2f;b</span>"),
            "{uri}: {html}"
        );
        let join = element(&html, "id=\"join-notify\"", "section");
        assert_eq!(field(join, "state"), "open", "{uri}");
        assert!(jobs_of(join, "thumbnail")[0].starts_with("doc/b/thumbnail/"));
    }
    // The lookup form redirects to the run's page.
    let found = get(&router, "/pipelines/documents/runs?id=doc%2Fb").await;
    assert_eq!(found.status, StatusCode::SEE_OTHER, "{}", found.body);
    assert_eq!(
        found.headers[header::LOCATION],
        "/pipelines/documents/runs/doc%2Fb"
    );

    // The other stages finish both runs: they leave the lists, and the
    // run's page shows it published with its summary.
    let rest = docs.workers(&["index", "thumbnail", "notify"]);
    let published = docs.wait_for("doc-a", RunState::Published).await;
    docs.wait_for("doc/b", RunState::Published).await;
    stop(rest).await;
    let html = page(&router, "/pipelines").await;
    let totals = element(&html, "id=\"join-documents-notify\"", "p");
    assert_eq!(field(totals, "in-flight"), "0");
    assert_eq!(field(totals, "oldest-wait"), "-");
    assert!(html.contains("No runs in flight."), "{html}");

    let html = page(&router, "/pipelines/documents/runs/doc-a").await;
    let join = element(&html, "id=\"join-notify\"", "section");
    assert_eq!(field(join, "state"), "published");
    assert_eq!(field(join, "outstanding"), "0");
    assert_eq!(field(join, "settled"), "4");
    let entry = field(join, "join-entry");
    assert!(entry.contains('-'), "the join's stream entry: {join}");
    assert!(
        field(join, "summary").contains("Its state here expires at"),
        "{join}"
    );
    let mut results: Vec<(String, String)> = jobs_of(join, "index")
        .iter()
        .map(|id| job(join, "index", id))
        .collect();
    results.sort();
    assert_eq!(
        results,
        [
            ("done".to_owned(), "s3://index/0".to_owned()),
            ("done".to_owned(), "s3://index/1".to_owned()),
        ]
    );
    let thumbnail = &jobs_of(join, "thumbnail")[0];
    assert_eq!(
        job(join, "thumbnail", thumbnail),
        ("done".into(), "s3://thumbnail/0".into())
    );
    // The join's entry links to its partition's page.
    let partition = published.joins[0].partition;
    assert!(
        join.contains(&format!(
            "partition <a href=\"/queues/notify/partitions/{partition}\">{partition}</a>"
        )),
        "{join}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_s_page_shows_it_failed_and_names_the_dead_job() {
    let server = RedisServer::start();
    let docs = Docs::start(&server).await;
    let workers = docs.workers(&STAGES);
    // Its pages dead-letter: the run fails at the join (`on_dead_letter: fail`).
    docs.publish(&[("blank", 2, "index")]).await;
    docs.wait_for("blank", RunState::Failed).await;
    // Let the last pages settle (a failed run records nothing more).
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop(workers).await;
    let router = docs.dashboard(Redis::connect(server.url()).await.unwrap());

    let html = page(&router, "/pipelines").await;
    assert_eq!(
        field(
            element(&html, "id=\"join-documents-notify\"", "p"),
            "in-flight"
        ),
        "0",
        "a failed run leaves the runs in flight"
    );
    let html = page(&router, "/pipelines/documents/runs/blank").await;
    let join = element(&html, "id=\"join-notify\"", "section");
    assert_eq!(field(join, "state"), "failed");
    let summary = field(join, "summary");
    assert!(
        summary.starts_with("Failed at")
            && summary.contains("a job it waited for was dead-lettered under on_dead_letter: fail")
            && summary.contains("the join will not run")
            && summary.contains("Its state here expires at"),
        "{summary}"
    );
    assert!(
        !join.contains("data-field=\"join-entry\""),
        "a failed run never joins: {join}"
    );
    let dead: Vec<String> = jobs_of(join, "index")
        .into_iter()
        .filter(|id| job(join, "index", id).0 == "dead")
        .collect();
    assert!(!dead.is_empty(), "the dead page is named: {join}");
    assert_eq!(job(join, "index", &dead[0]).1, "dead-lettered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pipelines_and_runs_are_404s_and_malformed_run_ids_400s_before_redis_is_asked() {
    let mut server = RedisServer::start();
    let docs = Docs::start(&server).await;
    let router = docs.dashboard(Redis::connect(server.url()).await.unwrap());

    for uri in [
        "/pipelines/nope",
        "/pipelines/nope/runs/doc-a",
        "/pipelines/nope/runs?id=doc-a",
    ] {
        let answer = get(&router, uri).await;
        assert_eq!(
            answer.status,
            StatusCode::NOT_FOUND,
            "{uri}: {}",
            answer.body
        );
        assert!(
            answer
                .body
                .contains("the dashboard has no pipeline &quot;nope&quot; (pipelines: documents)"),
            "{uri}: {}",
            answer.body
        );
        assert!(answer.headers.contains_key("content-security-policy"));
    }
    let answer = get(&router, "/pipelines/documents/runs/doc-none").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert!(
        answer.body.contains(
            "pipeline documents: no run &quot;doc-none&quot; at any join (notify partition"
        ) && answer.body.contains("ended more than keep"),
        "{}",
        answer.body
    );

    // With Redis gone anything sent to it answers 502: a 400 shows the ID
    // was refused first.
    server.kill9();
    for (uri, named) in [
        (
            "/pipelines/documents/runs/%20doc-a",
            "run ID &quot; doc-a&quot; of pipeline documents has spaces at its start or end",
        ),
        (
            "/pipelines/documents/runs/doc%09a",
            "run ID &quot;doc\\ta&quot; of pipeline documents holds a control character",
        ),
        (
            "/pipelines/documents/runs?id=",
            "run ID &quot;&quot; of pipeline documents is empty",
        ),
        (
            "/pipelines/documents/runs",
            "run ID &quot;&quot; of pipeline documents is empty",
        ),
        ("/pipelines/documents/runs/doc%FFa", "UTF-8"),
    ] {
        let answer = get(&router, uri).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{uri}: {}",
            answer.body
        );
        assert!(answer.body.contains(named), "{uri}: {}", answer.body);
        assert!(
            answer.body.contains("<h1>400</h1>"),
            "the dashboard's page: {}",
            answer.body
        );
    }
    let gone = get(&router, "/pipelines/documents/runs/doc-a").await;
    assert_eq!(gone.status, StatusCode::BAD_GATEWAY, "{}", gone.body);
}
