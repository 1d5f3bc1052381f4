//! `/metrics`, `/healthz` and `/readyz` as an axum `Router`, so an app can serve them itself or mount them in its own server.

use std::future::Future;
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

use crate::error::{Error, Result};

/// The OpenMetrics text format that `prometheus_client` encodes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Answers `/readyz`: whether the process is doing its work right now (a
/// worker that is reading, a monitor whose last refresh succeeded).
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// The three endpoints over `registry`:
/// - `GET /metrics`: the registry in OpenMetrics text;
/// - `GET /healthz`: `200 ok` while the process runs (liveness);
/// - `GET /readyz`: `200 ready` or `503 not ready`, from `ready`.
pub fn router(registry: Arc<Registry>, ready: Readiness) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move { scrape(&registry) }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready();
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                    }
                }
            }),
        )
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |addr| addr.to_string());
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| Error::Http { addr, source })
}

fn scrape(registry: &Registry) -> axum::response::Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        // Only a failing `fmt::Write` into a String could get here.
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn serves_metrics_liveness_and_readiness() {
        let mut registry = Registry::default();
        let jobs = Counter::<u64>::default();
        registry.register("demo_jobs", "Jobs seen", jobs.clone());
        jobs.inc_by(3);
        let ready = Arc::new(AtomicBool::new(false));
        let flag = ready.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            router(
                Arc::new(registry),
                Arc::new(move || flag.load(Ordering::Relaxed)),
            ),
            async move {
                let _ = stopped.await;
            },
        ));

        let metrics = get(addr, "/metrics").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("demo_jobs_total 3"), "{metrics}");
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.store(true, Ordering::Relaxed);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
