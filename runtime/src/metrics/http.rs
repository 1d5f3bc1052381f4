//! `/metrics`, `/healthz` and `/readyz` as an axum `Router`, so an app can serve them itself or mount them in its own server.

use std::future::Future;
use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

use crate::error::{Error, Result, SetupError};

/// The OpenMetrics text format, for scrapers that ask for it (Prometheus does).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Answers `/readyz`: whether the process is doing its work right now (a
/// worker that is reading, a monitor whose last refresh succeeded).
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// The three endpoints over `registry`:
/// - `GET /metrics`: the registry in OpenMetrics text when the `Accept`
///   header asks for `application/openmetrics-text` (as Prometheus does),
///   otherwise in the Prometheus text format 0.0.4 (what `curl` and
///   `promtool check metrics` get: its parser reads a counter's `_total`
///   samples as a family of their own under OpenMetrics' `# TYPE` names);
/// - `GET /healthz`: `200 ok` while the process runs (liveness);
/// - `GET /readyz`: `200 ready` or `503 not ready`, from `ready`.
pub fn router(registry: Arc<Registry>, ready: Readiness) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move |headers: HeaderMap| {
                let registry = registry.clone();
                async move { scrape(&registry, wants_openmetrics(&headers)) }
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
        .map_err(|source| Error::Setup(SetupError::Http { addr, source }))
}

fn scrape(registry: &Registry, openmetrics: bool) -> axum::response::Response {
    let mut text = String::new();
    let (encoded, content_type) = if openmetrics {
        (
            prometheus_client::encoding::text::encode(&mut text, registry),
            OPENMETRICS,
        )
    } else {
        (
            prometheus_client::encoding::prometheus_text::encode(&mut text, registry),
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )
    };
    match encoded {
        Ok(()) => ([(header::CONTENT_TYPE, content_type)], text).into_response(),
        // Only a failing `fmt::Write` into a String could get here.
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// Whether an `Accept` header lists `application/openmetrics-text` with a
/// non-zero quality.
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            let quality = parts
                .filter_map(|param| param.strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            media.eq_ignore_ascii_case("application/openmetrics-text") && quality > 0.0
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        get_with(addr, path, "").await
    }

    async fn get_with(addr: std::net::SocketAddr, path: &str, headers: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n");
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
        assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
        assert!(
            metrics.contains("# TYPE demo_jobs_total counter"),
            "{metrics}"
        );
        assert!(metrics.contains("demo_jobs_total 3"), "{metrics}");
        assert!(!metrics.contains("# EOF"), "{metrics}");
        let accept = "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n";
        let metrics = get_with(addr, "/metrics", accept).await;
        assert!(
            metrics.contains("application/openmetrics-text"),
            "{metrics}"
        );
        assert!(metrics.contains("# TYPE demo_jobs counter"), "{metrics}");
        assert!(metrics.contains("demo_jobs_total 3"), "{metrics}");
        assert!(metrics.trim_end().ends_with("# EOF"), "{metrics}");
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.store(true, Ordering::Relaxed);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[test]
    fn openmetrics_is_chosen_only_when_asked_for() {
        let accept = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, value.parse().unwrap());
            wants_openmetrics(&headers)
        };
        assert!(!wants_openmetrics(&HeaderMap::new()));
        assert!(!accept("*/*"));
        assert!(!accept("text/plain; version=0.0.4"));
        assert!(accept(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!accept("application/openmetrics-text;q=0, text/plain"));
    }
}
