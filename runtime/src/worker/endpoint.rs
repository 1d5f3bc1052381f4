//! The worker's own metrics endpoint (`Worker::metrics_addr`): bound before the start checks, stopped after shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::{Error, Result, SetupError};
use crate::metrics::{self, Registry, WorkerMetrics};

/// How long stopping waits for open scrapes to finish before dropping them.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A running `/metrics`, `/healthz`, `/readyz` server.
pub(super) struct Endpoint {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<()>>,
}

/// Binds `addr` (an error names it) and serves `metrics` there, with
/// `/readyz` answering from `reading`.
pub(super) async fn start(
    addr: SocketAddr,
    metrics: &WorkerMetrics,
    reading: Arc<AtomicBool>,
) -> Result<Endpoint> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| {
            Error::Setup(SetupError::Http {
                addr: addr.to_string(),
                source,
            })
        })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let router = metrics::router(
        Arc::new(registry),
        Arc::new(move || reading.load(Ordering::Relaxed)),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(metrics::serve(listener, router, async move {
        let _ = stopped.await;
    }));
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    Ok(Endpoint { addr, stop, server })
}

impl Endpoint {
    /// Stops serving: open scrapes get a moment to finish, then the port closes.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(());
        let mut server = self.server;
        match tokio::time::timeout(STOP_GRACE, &mut server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => {
                tracing::warn!(addr = %self.addr, error = %err, "the metrics endpoint failed")
            }
            Ok(Err(join_error)) => {
                tracing::warn!(addr = %self.addr, error = %join_error, "the metrics endpoint panicked")
            }
            Err(_elapsed) => {
                // A scraper holding its connection open: close it.
                server.abort();
                let _ = server.await;
            }
        }
    }
}
