//! The operator dashboard: the `status` model, an hour of history sampled in
//! process, per-partition drill-down, each pipeline's runs, and the
//! operator's actions (replay, pause, resume), as server-rendered pages an
//! axum app can mount.
//!
//! Pages read with the same calls as `queuegen status`, `pending`, `dlq`
//! and `runs` (`queuegen_runtime::ops`), so the page and the CLI never
//! disagree. The actions need the operator token
//! ([`DashboardOptions::operator_token`]); without one the dashboard is
//! read-only.

mod actions;
mod assets;
mod auth;
mod error;
mod headers;
mod history;
mod ids;
mod pages;
mod pipelines;
mod render;
mod view;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use queuegen_runtime::envelope::header_fields;
use queuegen_runtime::error::PipelineError;
use queuegen_runtime::ops::runs::RunsReport;
use queuegen_runtime::ops::status::{AlertThresholds, StatusReport, WatchedQueue};
use queuegen_runtime::{QueueConfig, Redis};
use serde::Serialize;

use queuegen_spec::model::{Pipeline, Queue, Spec};

pub use actions::ActionRecord;
pub use error::{Error, Result};

/// The environment variable `queuegen dashboard` reads the operator token from.
pub const TOKEN_ENV: &str = "QUEUEGEN_DASHBOARD_TOKEN";

/// How a dashboard behaves; [`DashboardOptions::default`] is read-only.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// The operator token: with it, a signed-in operator (or a request with
    /// `Authorization: Bearer <token>`) may replay, pause and resume.
    /// `None`: read-only, no action is offered or accepted.
    pub operator_token: Option<String>,
    /// How often the history is sampled.
    pub sample_every: Duration,
    /// How much history is kept (and charted).
    pub history: Duration,
    /// The path the router is nested at in the host app (`/ops/queues`),
    /// so its links and cookies point there; empty at the root.
    pub mounted_at: String,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            operator_token: None,
            sample_every: Duration::from_secs(10),
            history: Duration::from_secs(3_600),
            mounted_at: String::new(),
        }
    }
}

/// One queue as the dashboard shows it.
#[derive(Debug, Clone)]
pub struct DashboardQueue {
    pub watched: WatchedQueue,
    /// Envelope schema versions a replay may put back (the spec's `accepts`).
    pub accepted_schemas: Vec<u32>,
    /// The envelope fields a page may show: the header and every field the
    /// spec declares in any accepted version. Any other field of a stored
    /// entry is withheld, since the spec cannot say what it holds.
    pub shown_fields: BTreeSet<String>,
}

impl DashboardQueue {
    /// `config`'s queue as `spec` describes it: its alerts, the schema
    /// versions a replay may put back, and the fields a page may show.
    /// `config` is the generated `CONFIG` of the queue's module (or
    /// `queuegen::runtime_config::queue_config`); `None` when the spec has
    /// no queue of its name.
    pub fn new(spec: &Spec, config: QueueConfig) -> Option<DashboardQueue> {
        let queue = spec
            .queues
            .iter()
            .find(|queue| queue.name == config.queue)?;
        let envelope = spec.envelope(&queue.envelope)?;
        let header = header_fields::ALL.iter().chain([&header_fields::REPLAY_OF]);
        let mut shown_fields: BTreeSet<String> = header.map(|name| (*name).to_owned()).collect();
        shown_fields.extend(envelope.fields.iter().map(|field| field.name.clone()));
        for change in &envelope.changes {
            shown_fields.extend(change.removed.iter().map(|field| field.name.clone()));
            shown_fields.extend(change.renamed.iter().map(|rename| rename.from.clone()));
        }
        Some(DashboardQueue {
            watched: watched_queue(queue, config),
            accepted_schemas: envelope.accepts.clone(),
            shown_fields,
        })
    }

    fn config(&self) -> &QueueConfig {
        &self.watched.config
    }
}

/// `queue` as `queuegen status` and the dashboard watch it: `config` with
/// the alert thresholds its spec sets (the one mapping of the spec's
/// `alerts` onto the views' thresholds).
pub fn watched_queue(queue: &Queue, config: QueueConfig) -> WatchedQueue {
    WatchedQueue {
        config,
        alerts: AlertThresholds {
            oldest_pending_age: queue.alerts.oldest_pending_age,
            oldest_ready_age: queue.alerts.oldest_ready_age,
            dead_letters: queue.alerts.dead_letters,
        },
    }
}

/// One pipeline as the dashboard shows it (`/pipelines`): its graph, and
/// the configuration of its stages' queues, where each join keeps its runs.
#[derive(Debug, Clone)]
pub struct DashboardPipeline {
    graph: Pipeline,
    configs: Vec<QueueConfig>,
}

impl DashboardPipeline {
    /// `graph` (the spec's pipeline, or a generated `PipelineRuntime`'s
    /// `graph()`) with its stages' queue configurations among `configs`
    /// (the generated `CONFIG`s; others are ignored). Refused, naming the
    /// stage, when a join has none: its runs could not be read.
    pub fn new(
        graph: Pipeline,
        configs: impl IntoIterator<Item = QueueConfig>,
    ) -> Result<DashboardPipeline, queuegen_runtime::Error> {
        let configs: Vec<QueueConfig> = configs
            .into_iter()
            .filter(|config| graph.stage(&config.queue).is_some())
            .collect();
        if let Some((missing, _)) = graph
            .joins()
            .find(|(stage, _)| !configs.iter().any(|c| *c.queue == stage.queue))
        {
            return Err(PipelineError::NoSuchStage {
                pipeline: graph.name.clone(),
                stage: missing.queue.clone(),
                known: configs
                    .iter()
                    .map(|c| &*c.queue)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into());
        }
        Ok(DashboardPipeline { graph, configs })
    }

    /// Every pipeline of `spec` with a stage among `queues` (all of them
    /// when `queues` is empty), each with its stages' configurations from
    /// `config_of` (`queuegen::runtime_config::queue_config`): what
    /// `queuegen status` and `queuegen dashboard` show.
    pub fn of_spec(
        spec: &Spec,
        queues: &[&str],
        config_of: impl Fn(&Queue) -> QueueConfig,
    ) -> Vec<DashboardPipeline> {
        spec.pipelines
            .iter()
            .filter(|pipeline| {
                queues.is_empty() || queues.iter().any(|queue| pipeline.stage(queue).is_some())
            })
            .map(|pipeline| DashboardPipeline {
                graph: pipeline.clone(),
                configs: spec
                    .queues
                    .iter()
                    .filter(|queue| pipeline.stage(&queue.name).is_some())
                    .map(&config_of)
                    .collect(),
            })
            .collect()
    }

    /// The pipeline's graph.
    pub fn graph(&self) -> &Pipeline {
        &self.graph
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.graph.name
    }

    /// The configurations of its stages' queues.
    pub fn configs(&self) -> &[QueueConfig] {
        &self.configs
    }
}

/// Each pipeline's joins with how many runs are in flight there and the
/// oldest wait (`ops::runs` with limit 1: two round trips per pipeline,
/// read-only), in the order given: the `pipelines` of `queuegen status
/// --json` and `/api/status`.
pub async fn pipeline_status(
    redis: &Redis,
    pipelines: &[DashboardPipeline],
) -> Result<Vec<RunsReport>> {
    let mut reports = Vec::with_capacity(pipelines.len());
    for pipeline in pipelines {
        let mut conn = redis.shared();
        let report =
            queuegen_runtime::ops::runs::runs(&mut conn, &pipeline.graph, &pipeline.configs, 1)
                .await?;
        reports.push(report);
    }
    Ok(reports)
}

/// What `queuegen status --json` prints and `/api/status` answers: the
/// status model's fields, and `pipelines` ([`pipeline_status`]).
#[derive(Debug, Clone, Serialize)]
pub struct StatusDocument {
    #[serde(flatten)]
    pub status: StatusReport,
    pub pipelines: Vec<RunsReport>,
}

/// A dashboard over one Redis (standalone or Cluster) and a spec's queues.
/// Cheap to clone; clones share the history, sessions and action log.
#[derive(Clone)]
pub struct Dashboard {
    inner: Arc<Inner>,
}

struct Inner {
    redis: Redis,
    queues: Vec<DashboardQueue>,
    pipelines: Vec<DashboardPipeline>,
    options: DashboardOptions,
    history: history::History,
    sessions: auth::Sessions,
    actions: actions::ActionLog,
    pages: render::Pages,
}

impl Dashboard {
    /// A dashboard of `queues` (a [`DashboardQueue`] per queue to show),
    /// without pipelines.
    pub fn new(queues: Vec<DashboardQueue>, redis: Redis, options: DashboardOptions) -> Dashboard {
        Dashboard::with_pipelines(queues, Vec::new(), redis, options)
    }

    /// A dashboard of `queues` and `pipelines` (each pipeline's joins with
    /// their runs in flight, and each run at every join: `/pipelines`).
    pub fn with_pipelines(
        queues: Vec<DashboardQueue>,
        pipelines: Vec<DashboardPipeline>,
        redis: Redis,
        mut options: DashboardOptions,
    ) -> Dashboard {
        // `/ops/queues/` and `ops/queues` mean `/ops/queues`; `/` means the root.
        let trimmed = options.mounted_at.trim_matches('/');
        options.mounted_at = if trimmed.is_empty() {
            String::new()
        } else {
            format!("/{trimmed}")
        };
        let keep = (options.history.as_millis() / options.sample_every.as_millis().max(1)) as usize;
        Dashboard {
            inner: Arc::new(Inner {
                history: history::History::new(keep.max(2) + 1),
                sessions: auth::Sessions::default(),
                actions: actions::ActionLog::default(),
                pages: render::Pages::new(),
                redis,
                queues,
                pipelines,
                options,
            }),
        }
    }

    /// The pages and endpoints; nest them at [`DashboardOptions::mounted_at`].
    /// Every answer under it, 404s and error pages included, carries a
    /// same-origin Content-Security-Policy, `X-Frame-Options: DENY`,
    /// `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(pages::overview))
            .route("/fragment/overview", get(pages::overview_fragment))
            .route("/queues/{queue}", get(pages::queue))
            .route(
                "/queues/{queue}/partitions/{partition}",
                get(pages::partition),
            )
            .route(
                "/queues/{queue}/replay",
                get(actions::confirm_replay).post(actions::replay),
            )
            .route(
                "/queues/{queue}/pause",
                get(actions::confirm_pause).post(actions::pause),
            )
            .route(
                "/queues/{queue}/resume",
                get(actions::confirm_resume).post(actions::resume),
            )
            .route("/pipelines", get(pipelines::all))
            .route("/pipelines/{pipeline}", get(pipelines::one))
            .route("/pipelines/{pipeline}/runs", get(pipelines::lookup))
            .route("/pipelines/{pipeline}/runs/{*run_id}", get(pipelines::run))
            .route("/actions", get(actions::log_page))
            .route("/login", get(auth::login_page).post(auth::login))
            .route("/logout", post(auth::logout))
            .route("/api/status", get(pages::status_json))
            .route("/api/series", get(pages::series_json))
            .route("/assets/{name}", get(assets::asset))
            .fallback(pages::not_found)
            // After every route and the fallback, so that each answer gets
            // the headers, error pages, refusals and 404s included.
            .layer(axum::middleware::map_response(headers::secure))
            .with_state(self.clone())
    }

    /// Samples every queue each `sample_every` until the returned task is
    /// aborted (or the runtime stops). A failed sample is logged and skipped.
    pub fn spawn_sampler(&self) -> tokio::task::JoinHandle<()> {
        let dashboard = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(dashboard.inner.options.sample_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(err) = dashboard.sample().await {
                    tracing::warn!(error = %err, "dashboard: sampling the queues failed; the charts skip this sample");
                }
            }
        })
    }

    /// Takes one history sample now (the sampler's step; tests call it).
    pub async fn sample(&self) -> Result<()> {
        let report = self.status().await?;
        self.inner.history.record(&report);
        Ok(())
    }

    /// Every action taken through this dashboard, newest first.
    pub fn actions(&self) -> Vec<ActionRecord> {
        self.inner.actions.newest_first()
    }

    async fn status(&self) -> Result<queuegen_runtime::ops::StatusReport> {
        let queues = &self.inner.queues;
        let watched: Vec<WatchedQueue> = queues.iter().map(|queue| queue.watched.clone()).collect();
        Ok(queuegen_runtime::ops::status::status_of(&self.inner.redis, &watched).await?)
    }

    /// The status model and each pipeline's joins: `/api/status`.
    async fn status_document(&self) -> Result<StatusDocument> {
        let status = self.status().await?;
        let pipelines = pipeline_status(&self.inner.redis, &self.inner.pipelines).await?;
        Ok(StatusDocument { status, pipelines })
    }

    fn pipeline(&self, name: &str) -> Result<&DashboardPipeline> {
        let pipelines = &self.inner.pipelines;
        let found = pipelines.iter().find(|pipeline| pipeline.name() == name);
        found.ok_or_else(|| {
            let names: Vec<&str> = pipelines.iter().map(DashboardPipeline::name).collect();
            let names = match names.as_slice() {
                [] => "this dashboard shows none".to_owned(),
                names => format!("pipelines: {}", names.join(", ")),
            };
            Error::NotFound(format!("the dashboard has no pipeline {name:?} ({names})"))
        })
    }

    fn queue(&self, name: &str) -> Result<&DashboardQueue> {
        let queues = &self.inner.queues;
        let found = queues.iter().find(|queue| queue.config().queue == name);
        found.ok_or_else(|| {
            let names: Vec<&str> = queues.iter().map(|queue| &*queue.config().queue).collect();
            let names = names.join(", ");
            Error::NotFound(format!("the spec has no queue {name:?} (queues: {names})"))
        })
    }
}
