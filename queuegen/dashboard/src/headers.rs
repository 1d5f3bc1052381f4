//! The security headers on every answer of the dashboard, pages, assets,
//! JSON, refusals, error pages and 404s alike.
//!
//! A small axum middleware rather than tower-http's `SetResponseHeader`:
//! tower-http is not in the workspace's lock, and four constant headers do
//! not justify a new dependency tree. It sits on the dashboard's own Router
//! (with its fallback), so an app that nests the router gets the headers on
//! the dashboard's paths and keeps its own policy for the rest.

use axum::http::header::{
    CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;

/// Everything the pages load is the dashboard's own, compiled-in files
/// (uPlot, dashboard.js, the CSS): same origin only, no inline script or
/// style (the templates have none), no plugins, no framing.
/// `connect-src` is the overview's refresh and the charts' series;
/// `form-action` keeps the sign-in and action forms (and where they
/// redirect) on the dashboard; `img-src` is only the browser's favicon request.
const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

const HEADERS: [(HeaderName, &str); 4] = [
    (CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_VALUE),
    // `frame-ancestors 'none'` for current browsers, this for older ones:
    // the action buttons must never be clickable inside someone else's frame.
    (X_FRAME_OPTIONS, "DENY"),
    // An asset or a JSON error is never run as a script or page by sniffing.
    (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    // `same-origin`, not `no-referrer`: links leaving the dashboard carry
    // nothing (URLs name queues, partitions and dead-letter IDs), while its
    // own form POSTs keep a real `Origin` header; under `no-referrer` a
    // browser sends `Origin: null`, which a proxy's or a future check's
    // same-origin test would refuse.
    (REFERRER_POLICY, "same-origin"),
];

/// Adds the headers an answer does not set itself.
pub(super) async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in HEADERS {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    }
    response
}
