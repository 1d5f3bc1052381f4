//! `queuegen dashboard`: serve the operator dashboard (overview, history
//! charts, drill-down, and the operator's replay/pause/resume).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use queuegen::runtime_config::queue_config;
use queuegen_dashboard::{
    pipeline_status, Dashboard, DashboardOptions, DashboardPipeline, DashboardQueue, TOKEN_ENV,
};

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Serve the operator dashboard: queues at a glance, the last hour charted, drill-down, pipeline runs and safe actions",
    after_help = "Reads with the same calls as `status`, `pending`, `dlq` and `runs`: each pipeline's \
joins with their runs in flight, and each run at every join, are at /pipelines (with --queue, the \
pipelines those queues are stages of). Actions (replay dead \
letters, pause and resume partitions) need the operator token: set QUEUEGEN_DASHBOARD_TOKEN (or \
--token-file); without it the dashboard is read-only. Operators sign in with the token in the \
browser; scripts send `Authorization: Bearer <token>`. Every action shows what it will do first \
and is logged (stderr, and the Action log page) with who did it.

It serves plain HTTP on loopback by default: to reach it from elsewhere, put it behind a TLS \
proxy rather than --listen 0.0.0.0.

Examples:
  queuegen dashboard queues.yaml --redis redis://127.0.0.1:6379
  QUEUEGEN_DASHBOARD_TOKEN=$(cat /run/secrets/ops) queuegen dashboard queues.yaml --listen 127.0.0.1:9465
  queuegen dashboard queues.yaml --queue ocr --sample-every 5"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Address to serve on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:9465")]
    pub listen: SocketAddr,

    /// Only these queues (repeatable); default all.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,

    /// A file holding the operator token (one trailing newline ignored);
    /// wins over QUEUEGEN_DASHBOARD_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,

    /// Sample the queues for the charts every SECS seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sample_every: u64,

    /// Keep (and chart) this many minutes of samples.
    #[arg(long, value_name = "MINUTES", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub history: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "serving the dashboard")? else {
        return Ok(ExitCode::from(1));
    };
    let selected = common::selected_queues(&spec, &args.spec, &args.queues)?;
    let operator_token = operator_token(args.token_file.as_deref())?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let redis = args.redis.connect().await?;
        let server = redis.addr();
        let queues = selected
            .iter()
            .map(|queue| {
                DashboardQueue::new(&spec, queue_config(&spec, queue))
                    .expect("a valid spec's queue is in the spec")
            })
            .collect();
        let names: Vec<&str> = selected.iter().map(|queue| queue.name.as_str()).collect();
        let pipelines =
            DashboardPipeline::of_spec(&spec, &names, |queue| queue_config(&spec, queue));
        // The first read must work: a wrong URL or a key of the wrong type stops it here.
        pipeline_status(&redis, &pipelines)
            .await
            .with_context(|| format!("reading the pipelines' runs on {server}"))?;
        let read_only = operator_token.is_none();
        let dashboard = Dashboard::with_pipelines(
            queues,
            pipelines,
            redis,
            DashboardOptions {
                operator_token,
                sample_every: Duration::from_secs(args.sample_every),
                history: Duration::from_secs(args.history * 60),
                mounted_at: String::new(),
            },
        );
        // The first read must work: a wrong URL or a missing stream stops it here.
        dashboard
            .sample()
            .await
            .with_context(|| format!("reading the status on {server}"))?;

        let (listener, local) = common::listen(args.listen).await?;
        if !local.ip().is_loopback() {
            eprintln!(
                "warning: serving plain HTTP on {local}, beyond this host: put a TLS proxy in front, since the operator token and session cookie travel in the clear"
            );
        }
        println!(
            "serving the dashboard of {server} on http://{local}/ ({})",
            if read_only {
                format!("read-only: set {TOKEN_ENV} to allow actions")
            } else {
                "operator actions enabled".to_owned()
            }
        );

        let sampler = dashboard.spawn_sampler();
        let served = axum::serve(listener, dashboard.router())
            .with_graceful_shutdown(queuegen_runtime::shutdown_signal())
            .await;
        sampler.abort();
        served.with_context(|| format!("serving on {local}"))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The token from `--token-file`, else the environment; an empty one is an error
/// (it would let anyone in who sends an empty token).
fn operator_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let token = match file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the operator token from {}", path.display()))?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
        ),
        None => std::env::var(TOKEN_ENV).ok(),
    };
    let source = file.map_or_else(|| TOKEN_ENV.to_owned(), |path| path.display().to_string());
    match token {
        Some(token) if token.trim().is_empty() => anyhow::bail!(
            "the operator token ({source}) is empty: set it to a long random secret, or leave it unset for a read-only dashboard"
        ),
        Some(token) if token.len() < 16 => anyhow::bail!(
            "the operator token ({source}) is {} characters: use at least 16 (e.g. `openssl rand -hex 24`)",
            token.len()
        ),
        token => Ok(token),
    }
}
