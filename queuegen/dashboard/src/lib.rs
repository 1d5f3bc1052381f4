//! The operator dashboard: the `status` model, an hour of history sampled in
//! process, per-partition drill-down and the operator's actions (replay,
//! pause, resume), as server-rendered pages an axum app can mount.
//!
//! Pages read with the same calls as `queuegen status`, `pending` and `dlq`
//! (`queuegen_runtime::ops`), so the page and the CLI never disagree. The
//! actions need the operator token ([`DashboardOptions::operator_token`]);
//! without one the dashboard is read-only.

mod actions;
mod assets;
mod auth;
mod error;
mod headers;
mod history;
mod ids;
mod pages;
mod render;
mod view;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use queuegen_runtime::envelope::header_fields;
use queuegen_runtime::ops::status::{AlertThresholds, WatchedQueue};
use queuegen_runtime::{QueueConfig, Redis};

use queuegen_spec::model::{Queue, Spec};

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

/// A dashboard over one Redis (standalone or Cluster) and a spec's queues.
/// Cheap to clone; clones share the history, sessions and action log.
#[derive(Clone)]
pub struct Dashboard {
    inner: Arc<Inner>,
}

struct Inner {
    redis: Redis,
    queues: Vec<DashboardQueue>,
    options: DashboardOptions,
    history: history::History,
    sessions: auth::Sessions,
    actions: actions::ActionLog,
    pages: render::Pages,
}

impl Dashboard {
    /// A dashboard of `queues` (a [`DashboardQueue`] per queue to show).
    pub fn new(
        queues: Vec<DashboardQueue>,
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
