//! `queuegen monitor`: serve the queue-level gauges (oldest ready and pending
//! age, pending, lag, dead letters, retries) from the same status model as
//! `queuegen status`, once per deployment instead of once per worker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use queuegen_runtime::metrics::{router, serve, Registry};
use queuegen_runtime::ops::gauges::{QueueMonitor, WatchedPipeline};
use queuegen_runtime::ops::status::WatchedQueue;

use super::common;
use super::status::watched_queues;

#[derive(Debug, clap::Args)]
#[command(
    about = "Serve the queues' gauges (backlog ages, pending, lag, dead letters, retries) for Prometheus",
    after_help = "Endpoints: /metrics (OpenMetrics when asked for, else the Prometheus text \
format), /healthz (200 while the process runs) and /readyz (200 when the last refresh \
succeeded, 503 otherwise).

Every --every seconds it reads the status model of `queuegen status` (two round trips, \
read-only commands) and replaces every gauge. Labels are queue, partition and group only. A \
refresh that fails withdraws the queue gauges, counts queuegen_monitor_refresh_failures_total \
and makes /readyz answer 503 until one succeeds. The first refresh must succeed: a wrong URL, a \
missing stream or a key of the wrong type stops it before it listens.

Run one per deployment: workers export their own counters, not these gauges. \
docs/operations/views.md lists every gauge.

Examples:
  queuegen monitor queues.yaml --redis redis://127.0.0.1:6379 --listen 0.0.0.0:9464
  queuegen monitor queues.yaml --listen 127.0.0.1:9464 --every 30 --queue ocr"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Address to serve /metrics, /healthz and /readyz on (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Seconds between refreshes.
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    pub every: u64,

    /// Only these queues (repeatable); default all.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec(&args.spec, "monitoring")? else {
        return Ok(ExitCode::from(1));
    };
    let watched = watched_queues(&spec, &args.spec, &args.queues)?;
    let names: Vec<String> = watched.iter().map(|q| q.config.queue.to_string()).collect();

    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let redis = args.redis.connect().await?;
        let server = redis.addr();
        let mut registry = Registry::default();
        let pipelines = watched_pipelines(&spec, &watched);
        let monitor = QueueMonitor::new(redis, watched, &mut registry).with_pipelines(pipelines);
        monitor
            .refresh()
            .await
            .with_context(|| format!("reading the status on {server}"))?;

        let (listener, local) = common::listen(args.listen).await?;
        println!(
            "serving the gauges of queue(s) {} from {server} on http://{local}/metrics, refreshed every {}s",
            names.join(", "),
            args.every
        );

        let (stop_serving, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = router(Arc::new(registry), monitor.readiness());
        let mut serving = tokio::spawn(serve(listener, app, async move {
            let _ = stopped.await;
        }));

        let every = Duration::from_secs(args.every);
        let stop = queuegen_runtime::shutdown_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                // The server only ends early on an error: stop with it.
                ended = &mut serving => {
                    ended
                        .context("the metrics server task")?
                        .with_context(|| format!("serving on {local}"))?;
                    return Ok(ExitCode::SUCCESS);
                }
                () = tokio::time::sleep(every) => {
                    if let Err(err) = monitor.refresh().await {
                        eprintln!(
                            "{}: refresh failed, gauges withdrawn until one succeeds: {err}",
                            humantime::format_rfc3339_seconds(SystemTime::now())
                        );
                    }
                }
            }
        }
        let _ = stop_serving.send(());
        serving
            .await
            .context("the metrics server task")?
            .with_context(|| format!("serving on {local}"))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The pipelines whose every join is a watched queue: their joins' waits
/// are gauged (`queuegen_pipeline_join_oldest_wait_seconds`).
fn watched_pipelines(
    spec: &queuegen::spec::model::Spec,
    watched: &[WatchedQueue],
) -> Vec<WatchedPipeline> {
    spec.pipelines
        .iter()
        .filter_map(|pipeline| {
            let configs: Vec<_> = pipeline
                .joins()
                .map(|(stage, _)| {
                    watched
                        .iter()
                        .find(|queue| *queue.config.queue == stage.queue)
                        .map(|queue| queue.config.clone())
                })
                .collect::<Option<_>>()?;
            Some(WatchedPipeline {
                graph: pipeline.clone(),
                configs,
            })
        })
        .collect()
}
