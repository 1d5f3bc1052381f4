//! The team's own operations app with the queuegen dashboard mounted at
//! `/ops/queues`: how a service serves the dashboard beside its own routes,
//! from the generated queue configs and pipelines and the reviewed spec
//! compiled in.
//!
//! `QUEUEGEN_DASHBOARD_TOKEN` enables replay, pause and resume; without it
//! the dashboard is read-only.

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use docs_pipeline::queues::{
    document_ready, export, index, notification, ocr, pipelines, reconciliation, thumbnail,
};
use queuegen_dashboard::{
    Dashboard, DashboardOptions, DashboardPipeline, DashboardQueue, TOKEN_ENV,
};

/// The spec the queues were generated from, checked at start so the pages
/// show the alerts and fields it declares.
const SPEC: &str = include_str!("../../queues.yaml");

#[derive(Parser)]
#[command(about = "Serve the docs-pipeline ops app, with the queue dashboard at /ops/queues")]
struct Args {
    /// Redis URL.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt().init();
    let spec = queuegen_spec::check_str(SPEC, "queues.yaml")
        .spec
        .context("the compiled-in queues.yaml is not valid")?;
    let queues = [
        ocr::CONFIG,
        notification::CONFIG,
        export::CONFIG,
        reconciliation::CONFIG,
    ]
    .into_iter()
    .map(|config| {
        DashboardQueue::new(&spec, config).context("a generated queue is not in the spec")
    })
    .collect::<anyhow::Result<Vec<_>>>()?;
    let redis = queuegen_runtime::Redis::connect(&args.redis).await?;
    // The generated pipeline's graph, with its stages' queue configurations:
    // the dashboard's /pipelines pages read each join's runs where it keeps them.
    let documents = DashboardPipeline::new(
        pipelines::documents(&redis).graph().clone(),
        [
            ocr::CONFIG,
            index::CONFIG,
            thumbnail::CONFIG,
            document_ready::CONFIG,
        ],
    )?;
    let dashboard = Dashboard::with_pipelines(
        queues,
        vec![documents],
        redis,
        DashboardOptions {
            operator_token: std::env::var(TOKEN_ENV).ok(),
            sample_every: Duration::from_secs(10),
            mounted_at: "/ops/queues".to_owned(),
            ..DashboardOptions::default()
        },
    );
    let _sampler = dashboard.spawn_sampler();
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .nest("/ops/queues", dashboard.router());
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!("ops app on http://{}/ops/queues", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(queuegen_runtime::shutdown_signal())
        .await?;
    Ok(())
}
