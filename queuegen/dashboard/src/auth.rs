//! Who may act: the operator token, sessions of signed-in operators, and the
//! CSRF token every form of a session carries.
//!
//! A browser signs in once with the token (`/login`) and gets a session
//! cookie (`HttpOnly`, `SameSite=Strict`); its forms then carry the
//! session's CSRF token, checked on every POST. A script sends
//! `Authorization: Bearer <token>` instead: a header a browser never adds on
//! its own, so it needs no CSRF token.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use rand::Rng;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::Dashboard;

const COOKIE_NAME: &str = "queuegen_dashboard";
/// The sign-in form's CSRF token, before there is a session to hold it
/// (double submit: the cookie and the form field must match).
const LOGIN_COOKIE: &str = "queuegen_login";
/// A session ends after this long; the operator signs in again.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3_600);

/// A signed-in operator's session.
#[derive(Debug, Clone)]
struct Session {
    who: String,
    csrf: String,
    expires: Instant,
    /// A message for the next page shown (what an action did).
    flash: Option<String>,
}

#[derive(Default)]
pub(super) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// Whoever made a request may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Operator {
    /// The name given at sign-in, or `bearer token` for a script.
    pub who: String,
    /// The session's id and CSRF token; `None` for a bearer request.
    session: Option<(String, String)>,
}

impl Operator {
    /// The CSRF token its forms must carry (empty for a bearer request, which needs none).
    pub fn csrf(&self) -> &str {
        self.session.as_ref().map_or("", |(_, csrf)| csrf)
    }

    pub fn is_browser(&self) -> bool {
        self.session.is_some()
    }
}

/// Why a request may not act.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The dashboard has no operator token: nobody may act.
    ReadOnly,
    /// No valid session or bearer token.
    Unauthenticated,
    /// A session without the right CSRF token in its form.
    BadCsrf,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            Refusal::ReadOnly => (
                StatusCode::FORBIDDEN,
                "this dashboard is read-only: it was started without an operator token (QUEUEGEN_DASHBOARD_TOKEN); nothing was changed\n",
            ),
            Refusal::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "sign in with the operator token (/login), or send Authorization: Bearer <token>; nothing was changed\n",
            ),
            Refusal::BadCsrf => (
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or not this session's (a form from another site, or from an expired session); nothing was changed\n",
            ),
        };
        let mut response = (status, text).into_response();
        if status == StatusCode::UNAUTHORIZED {
            let challenge = HeaderValue::from_static("Bearer realm=\"queuegen dashboard\"");
            response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

impl Dashboard {
    /// The operator behind a request, if any (for showing the actions).
    pub(super) fn operator(&self, headers: &HeaderMap) -> Option<Operator> {
        let token = self.inner.options.operator_token.as_deref()?;
        if let Some(given) = bearer(headers) {
            return same_secret(given, token).then(|| Operator {
                who: "bearer token".to_owned(),
                session: None,
            });
        }
        let id = cookie(headers, COOKIE_NAME)?;
        let session = self.inner.sessions.get(id)?;
        Some(Operator {
            who: session.who,
            session: Some((id.to_owned(), session.csrf)),
        })
    }

    /// The operator who may make this change; a browser's form must carry
    /// its session's CSRF token as `csrf`.
    pub(super) fn authorize(
        &self,
        headers: &HeaderMap,
        form_csrf: Option<&str>,
    ) -> Result<Operator, Refusal> {
        if self.inner.options.operator_token.is_none() {
            return Err(Refusal::ReadOnly);
        }
        let operator = self.operator(headers).ok_or(Refusal::Unauthenticated)?;
        if operator.is_browser()
            && !form_csrf.is_some_and(|csrf| same_secret(csrf, operator.csrf()))
        {
            return Err(Refusal::BadCsrf);
        }
        Ok(operator)
    }

    /// Leaves a message for the operator's next page.
    pub(super) fn flash(&self, operator: &Operator, message: String) {
        if let Some((id, _)) = &operator.session {
            self.inner.sessions.set_flash(id, message);
        }
    }

    /// Takes the message left for this request's session, if any.
    pub(super) fn take_flash(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, COOKIE_NAME)?;
        self.inner.sessions.take_flash(id)
    }

    /// The overview's path ([`home_of`] the mount point).
    pub(super) fn home(&self) -> String {
        home_of(&self.inner.options.mounted_at)
    }
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.by_id
            .lock()
            .expect("the sessions lock is never poisoned")
    }

    fn get(&self, id: &str) -> Option<Session> {
        let sessions = self.lock();
        let session = sessions.get(id)?;
        (session.expires > Instant::now()).then(|| session.clone())
    }

    fn start(&self, who: String) -> String {
        let id = random_token();
        let session = Session {
            who,
            csrf: random_token(),
            expires: Instant::now() + SESSION_LIFETIME,
            flash: None,
        };
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, session| session.expires > now);
        sessions.insert(id.clone(), session);
        id
    }

    fn end(&self, id: &str) {
        self.lock().remove(id);
    }

    fn set_flash(&self, id: &str, message: String) {
        if let Some(session) = self.lock().get_mut(id) {
            session.flash = Some(message);
        }
    }

    fn take_flash(&self, id: &str) -> Option<String> {
        self.lock().get_mut(id)?.flash.take()
    }
}

/// `; Secure` behind a TLS proxy (`X-Forwarded-Proto: https`), so the
/// browser never sends the cookie over plain HTTP; nothing on plain HTTP,
/// where a Secure cookie would not be stored at all.
fn secure(headers: &HeaderMap) -> &'static str {
    let behind_tls = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"));
    if behind_tls {
        "; Secure"
    } else {
        ""
    }
}

/// 32 random bytes, hex: a session id or CSRF token nobody can guess.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two secrets in time independent of where they differ (their
/// digests have the same length whatever was sent).
fn same_secret(given: &str, expected: &str) -> bool {
    let given = Sha256::digest(given.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    given
        .iter()
        .zip(expected.iter())
        .fold(0u8, |differ, (a, b)| differ | (a ^ b))
        == 0
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LoginForm {
    csrf: String,
    who: String,
    token: String,
    next: String,
}

/// `GET /login`: the sign-in form (or, read-only, why there is none).
pub(super) async fn login_page(State(dashboard): State<Dashboard>, headers: HeaderMap) -> Response {
    login_form(&dashboard, &headers, "", "")
}

/// The sign-in form with a fresh CSRF token, in the form and in a cookie.
fn login_form(dashboard: &Dashboard, headers: &HeaderMap, problem: &str, who: &str) -> Response {
    let token = random_token();
    let page = dashboard.render_page(
        headers,
        "login.html",
        minijinja::context! { problem => problem, who => who, login_csrf => token },
    );
    let cookie = format!(
        "{LOGIN_COOKIE}={token}; Path={}; HttpOnly; SameSite=Strict; Max-Age=600{}",
        dashboard.home(),
        secure(headers)
    );
    set_cookie(page, &cookie)
}

/// `response`, setting `cookie`.
fn set_cookie(mut response: Response, cookie: &str) -> Response {
    let cookie =
        HeaderValue::from_str(cookie).expect("a cookie of hex and ASCII is a valid header");
    response.headers_mut().append(SET_COOKIE, cookie);
    response
}

/// `POST /login`: checks the token and starts a session.
pub(super) async fn login(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(token) = dashboard.inner.options.operator_token.clone() else {
        return Refusal::ReadOnly.into_response();
    };
    let form: LoginForm = match serde_urlencoded::from_bytes(&body) {
        Ok(form) => form,
        Err(err) => {
            let problem = format!("the sign-in form: {err}\n");
            return (StatusCode::BAD_REQUEST, problem).into_response();
        }
    };
    let same_form =
        cookie(&headers, LOGIN_COOKIE).is_some_and(|expected| same_secret(&form.csrf, expected));
    if !same_form {
        return Refusal::BadCsrf.into_response();
    }
    let who = form.who.trim().to_owned();
    let problem = if who.is_empty() || who.len() > 64 || who.chars().any(char::is_control) {
        Some("give your name (up to 64 characters): the action log records who did what")
    } else if !same_secret(&form.token, &token) {
        Some("that is not the operator token")
    } else {
        None
    };
    if let Some(problem) = problem {
        let mut page = login_form(&dashboard, &headers, problem, &who);
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        return page;
    }
    tracing::info!(target: "queuegen::dashboard::actions", who = %who, "signed in");
    let id = dashboard.inner.sessions.start(who);
    let cookie = format!(
        "{COOKIE_NAME}={id}; Path={}; HttpOnly; SameSite=Strict; Max-Age={}{}",
        dashboard.home(),
        SESSION_LIFETIME.as_secs(),
        secure(&headers)
    );
    let next = local_path(&dashboard.inner.options.mounted_at, &form.next);
    set_cookie(Redirect::to(&next).into_response(), &cookie)
}

#[derive(Debug, Default, Deserialize)]
struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /logout`: ends the session.
pub(super) async fn logout(
    State(dashboard): State<Dashboard>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form: LogoutForm = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let operator = match dashboard.authorize(&headers, Some(&form.csrf)) {
        Ok(operator) => operator,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some((id, _)) = &operator.session {
        dashboard.inner.sessions.end(id);
    }
    let home = dashboard.home();
    let cookie = format!("{COOKIE_NAME}=; Path={home}; HttpOnly; SameSite=Strict; Max-Age=0");
    set_cookie(Redirect::to(&home).into_response(), &cookie)
}

/// `next` if it is a path of this dashboard, else the overview: a sign-in
/// link must not send the operator to another site.
pub(super) fn local_path(base: &str, next: &str) -> String {
    let inside = (next == base || next.starts_with(&format!("{base}/")))
        && !next.is_empty()
        && !next.starts_with("//")
        && !next.contains("://")
        && !next.contains('\\');
    if inside {
        next.to_owned()
    } else {
        home_of(base)
    }
}

/// The overview's path: `/` at the root, else the mount point itself (a
/// router nested at `/ops` answers `/ops`, not `/ops/`).
pub(super) fn home_of(base: &str) -> String {
    if base.is_empty() { "/" } else { base }.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_by_value() {
        assert!(same_secret("s3cret", "s3cret"));
        assert!(!same_secret("s3cret", "s3cre"));
        assert!(!same_secret("", "s3cret"));
    }

    #[test]
    fn sign_in_only_returns_to_the_dashboard() {
        assert_eq!(local_path("", "/queues/ocr"), "/queues/ocr");
        assert_eq!(local_path("", "//evil.example/x"), "/");
        assert_eq!(local_path("", "https://evil.example/"), "/");
        assert_eq!(local_path("/ops", "/queues/ocr"), "/ops");
        assert_eq!(local_path("/ops", "/ops"), "/ops");
        assert_eq!(local_path("/ops", "/ops/queues/ocr"), "/ops/queues/ocr");
    }

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=1; queuegen_dashboard=abc; b=2"),
        );
        assert_eq!(cookie(&headers, COOKIE_NAME), Some("abc"));
    }
}
