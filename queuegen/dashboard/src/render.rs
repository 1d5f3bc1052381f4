//! The page templates (minijinja, HTML auto-escaped, strict undefined, as
//! the generator's own templates) and the filters they format numbers with.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use minijinja::{context, Environment, UndefinedBehavior, Value};
use queuegen_spec::units::short_duration;

use super::Dashboard;

const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("overview.html", include_str!("templates/overview.html")),
    (
        "overview_body.html",
        include_str!("templates/overview_body.html"),
    ),
    ("queue.html", include_str!("templates/queue.html")),
    ("partition.html", include_str!("templates/partition.html")),
    ("pipelines.html", include_str!("templates/pipelines.html")),
    ("run.html", include_str!("templates/run.html")),
    ("confirm.html", include_str!("templates/confirm.html")),
    ("actions.html", include_str!("templates/actions.html")),
    ("login.html", include_str!("templates/login.html")),
    ("error.html", include_str!("templates/error.html")),
];

pub(super) struct Pages {
    env: Environment<'static>,
}

impl Pages {
    pub(super) fn new() -> Pages {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|err| panic!("dashboard template {name} does not parse: {err:#}"));
        }
        env.add_filter("age", age);
        env.add_filter("due", due);
        env.add_filter("clock", clock);
        env.add_filter("segment", |text: &str| super::ids::path_segment(text));
        Pages { env }
    }

    pub(super) fn render(&self, name: &str, context: Value) -> Result<String, minijinja::Error> {
        self.env.get_template(name)?.render(context)
    }
}

impl Dashboard {
    /// Renders a page with what every page needs: where the dashboard is
    /// mounted, who is signed in, the CSRF token of their forms, a message
    /// left by their last action, and whether actions exist at all.
    pub(super) fn render_page(&self, headers: &HeaderMap, name: &str, page: Value) -> Response {
        let operator = self.operator(headers);
        let common = context! {
            base => path_value(&self.inner.options.mounted_at),
            home => path_value(&self.home()),
            operator => operator.as_ref().map(|operator| operator.who.clone()),
            csrf => operator.as_ref().map_or("", |operator| operator.csrf()),
            read_only => self.inner.options.operator_token.is_none(),
            has_pipelines => !self.inner.pipelines.is_empty(),
            flash => self.take_flash(headers),
        };
        match self.inner.pages.render(name, context! { ..page, ..common }) {
            Ok(html) => Html(html).into_response(),
            Err(err) => {
                // A template bug: say so plainly rather than render half a page.
                tracing::error!(template = name, error = %format!("{err:#}"), "dashboard: a page failed to render");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "dashboard page {name} failed to render (a bug in queuegen): {err:#}\n"
                    ),
                )
                    .into_response()
            }
        }
    }

    /// An error page: what failed, naming the queue and key.
    pub(super) fn error_page(&self, headers: &HeaderMap, error: &crate::Error) -> Response {
        let status = error.status();
        let mut page = self.render_page(
            headers,
            "error.html",
            context! {
                status => status.as_u16(),
                problem => format!("{error:#}"),
                server => self.inner.redis.addr(),
            },
        );
        *page.status_mut() = status;
        page
    }
}

/// A path of the app's own configuration, unescaped when it is plainly a
/// path (the HTML escaper would write `/` as `&#x2f;`, correct but unreadable).
fn path_value(path: &str) -> Value {
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
    if plain {
        Value::from_safe_string(path.to_owned())
    } else {
        Value::from(path)
    }
}

fn age(ms: Value) -> String {
    match u64::try_from(ms) {
        Ok(ms) => short_duration(ms),
        Err(_) => "-".to_owned(),
    }
}

/// Signed milliseconds until due: `in 4s`, or `4s overdue`.
fn due(ms: Value) -> String {
    match i64::try_from(ms) {
        Ok(ms) if ms >= 0 => format!("in {}", short_duration(ms as u64)),
        Ok(ms) => format!("{} overdue", short_duration(ms.unsigned_abs())),
        Err(_) => "-".to_owned(),
    }
}

/// Unix ms as UTC `2026-12-05 17:03:04`.
fn clock(ms: Value) -> String {
    match u64::try_from(ms) {
        Ok(ms) => {
            let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            humantime::format_rfc3339_seconds(time)
                .to_string()
                .replace('T', " ")
                .trim_end_matches('Z')
                .to_owned()
                + " UTC"
        }
        Err(_) => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        Pages::new();
    }
}
