//! `/metrics`, `/healthz` and `/readyz` as an axum `Router`, so an app can serve them itself or mount them in its own server.
//!
//! `/metrics` answers OpenMetrics to a scraper that asks for it (Prometheus
//! does) and the Prometheus text format 0.0.4 otherwise (curl, and
//! `promtool check metrics`, which reads 0.0.4 and would otherwise find every
//! counter's `_total` sample without help text).

use std::future::Future;
use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

use crate::error::{Error, Result};

/// The OpenMetrics text format that `prometheus_client` encodes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format, for scrapers that do not ask for OpenMetrics.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Answers `/readyz`: whether the process is doing its work right now (a
/// worker that is reading, a monitor whose last refresh succeeded).
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// The three endpoints over `registry`:
/// - `GET /metrics`: the registry in OpenMetrics text, or in the Prometheus
///   text format when the request does not accept OpenMetrics;
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
        .map_err(|source| Error::Http { addr, source })
}

fn scrape(registry: &Registry, openmetrics: bool) -> axum::response::Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) if openmetrics => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Ok(()) => (
            [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
            to_prometheus_text(&text),
        )
            .into_response(),
        // Only a failing `fmt::Write` into a String could get here.
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// Whether the request's `Accept` names OpenMetrics (Prometheus sends it first).
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("application/openmetrics-text"))
}

/// Rewrites the OpenMetrics text that `prometheus_client` encodes into the
/// Prometheus text format 0.0.4: a counter's `# HELP`/`# TYPE` name its
/// `_total` sample, an info metric becomes a gauge named like its sample,
/// `# UNIT` and `# EOF` go (0.0.4 has neither), exemplars are dropped, and
/// help text unescapes `\"` (0.0.4 escapes only `\\` and newlines there).
fn to_prometheus_text(openmetrics: &str) -> String {
    use std::collections::HashMap;
    // The family name each `# TYPE` line declares, and what 0.0.4 calls it.
    let renamed: HashMap<&str, (String, &str)> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .filter_map(|(name, kind)| match kind {
            "counter" => Some((name, (format!("{name}_total"), "counter"))),
            "info" => Some((name, (format!("{name}_info"), "gauge"))),
            "unknown" => Some((name, (name.to_owned(), "untyped"))),
            _ => None,
        })
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = renamed.get(name).map_or(name, |(new, _)| new.as_str());
            out.push_str(&format!("# HELP {name} {}\n", help.replace("\\\"", "\"")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            match rest.split_once(' ').and_then(|(name, _)| renamed.get(name)) {
                Some((new, kind)) => out.push_str(&format!("# TYPE {new} {kind}\n")),
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        } else {
            // A sample, possibly followed by ` # {exemplar labels} value`.
            let sample = line.split_once(" # {").map_or(line, |(sample, _)| sample);
            out.push_str(sample);
            out.push('\n');
        }
    }
    out
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
        assert!(metrics.contains("demo_jobs_total 3"), "{metrics}");
        assert!(metrics.contains("version=0.0.4"), "{metrics}");
        assert!(
            metrics.contains("# TYPE demo_jobs_total counter"),
            "{metrics}"
        );
        let prometheus = "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3\r\n";
        let openmetrics = get_with(addr, "/metrics", prometheus).await;
        assert!(
            openmetrics.contains("application/openmetrics-text"),
            "{openmetrics}"
        );
        assert!(
            openmetrics.contains("# TYPE demo_jobs counter"),
            "{openmetrics}"
        );
        assert!(openmetrics.trim_end().ends_with("# EOF"), "{openmetrics}");
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.store(true, Ordering::Relaxed);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let openmetrics = "# HELP jobs Jobs \\\"seen\\\".\n# TYPE jobs counter\njobs_total{queue=\"a\"} 3 # {trace_id=\"x\"} 1.0\n\
# HELP age_seconds Age.\n# TYPE age_seconds gauge\n# UNIT age_seconds seconds\nage_seconds 1.5\n\
# HELP build Build.\n# TYPE build info\nbuild_info{version=\"1\"} 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP jobs_total Jobs \"seen\".\n# TYPE jobs_total counter\njobs_total{queue=\"a\"} 3\n\
# HELP age_seconds Age.\n# TYPE age_seconds gauge\nage_seconds 1.5\n\
# HELP build_info Build.\n# TYPE build_info gauge\nbuild_info{version=\"1\"} 1\n"
        );
    }
}
