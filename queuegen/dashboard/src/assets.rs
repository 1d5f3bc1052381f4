//! The dashboard's static files, compiled in: no CDN, no network (see
//! assets/README.md for where each comes from and its license).

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/dashboard.js"),
    ),
    (
        "dashboard.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/dashboard.css"),
    ),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/uPlot.min.css"),
    ),
    (
        "uPlot.LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("assets/uPlot.LICENSE"),
    ),
];

/// `GET /assets/{name}`.
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, bytes)) => (
            [
                (CONTENT_TYPE, *content_type),
                (CACHE_CONTROL, "public, max-age=3600"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, format!("no asset {name:?}\n")).into_response(),
    }
}
