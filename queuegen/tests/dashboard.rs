//! The dashboard's handlers, driven with `tower::ServiceExt::oneshot` against
//! a private redis-server holding a state the test built (dashboard_state):
//! exact numbers, the drill-down, and every way an action is refused or done.

mod dashboard_state;

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use dashboard_state::dashboard_of;
use dashboard_state::{build, keyspace, xlen, EXAMPLE, OCR_READY};
use http_body_util::BodyExt;
use queuegen_dashboard::{Dashboard, DashboardOptions};
use queuegen_runtime::functions::{self, Function};
use queuegen_runtime::Redis;
use queuegen_tests::RedisServer;
use tower::ServiceExt;

const TOKEN: &str = "operator-token-for-tests-0123456789";

async fn dashboard(server: &RedisServer, token: Option<&str>) -> Dashboard {
    let spec = queuegen::spec::check_file(std::path::Path::new(EXAMPLE))
        .expect("the example reads")
        .spec
        .expect("the example spec is valid");
    let redis = Redis::connect(server.url()).await.expect("connects");
    dashboard_of(
        &spec,
        redis,
        DashboardOptions {
            operator_token: token.map(str::to_owned),
            sample_every: Duration::from_secs(1),
            ..DashboardOptions::default()
        },
    )
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(router: &Router, request: Request<Body>) -> Answer {
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

async fn get(router: &Router, uri: &str, cookie: Option<&str>) -> Answer {
    let mut request = Request::get(uri);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    send(router, request.body(Body::empty()).unwrap()).await
}

async fn post(router: &Router, uri: &str, form: &str, auth: Auth<'_>) -> Answer {
    let mut request =
        Request::post(uri).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    request = match auth {
        Auth::None => request,
        Auth::Cookie(cookie) => request.header(header::COOKIE, cookie),
        Auth::Bearer(token) => request.header(header::AUTHORIZATION, format!("Bearer {token}")),
    };
    send(router, request.body(Body::from(form.to_owned())).unwrap()).await
}

#[derive(Clone, Copy)]
enum Auth<'a> {
    None,
    Cookie(&'a str),
    Bearer(&'a str),
}

/// The text of `<td data-field="FIELD">` in the row `<tr id="ROW">`.
fn cell(html: &str, row: &str, field: &str) -> String {
    let start = html
        .find(&format!("id=\"{row}\""))
        .unwrap_or_else(|| panic!("no row {row} in {html}"));
    let row_html = &html[start..start + html[start..].find("</tr>").expect("the row ends")];
    let marker = format!("data-field=\"{field}\">");
    let at = row_html
        .find(&marker)
        .unwrap_or_else(|| panic!("no cell {field} in row {row}: {row_html}"))
        + marker.len();
    row_html[at..at + row_html[at..].find("</td>").expect("the cell ends")].to_owned()
}

/// The sign-in form's CSRF cookie and token (`GET {base}/login`).
async fn login_form(router: &Router, base: &str) -> (String, String) {
    let page = get(router, &format!("{base}/login"), None).await;
    let cookie = page.headers[header::SET_COOKIE].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let at = page
        .body
        .find("name=\"csrf\" value=\"")
        .expect("the form carries a CSRF token")
        + 19;
    (cookie, page.body[at..at + 64].to_owned())
}

/// Posts the sign-in form as a browser would: with its CSRF cookie and field.
async fn post_login(router: &Router, base: &str, fields: &str) -> Answer {
    let (cookie, csrf) = login_form(router, base).await;
    let form = format!("csrf={csrf}&{fields}");
    post(
        router,
        &format!("{base}/login"),
        &form,
        Auth::Cookie(&cookie),
    )
    .await
}

/// Signs in; returns the session cookie and the CSRF token of its forms.
async fn sign_in(router: &Router, who: &str) -> (String, String) {
    let answer = post_login(router, "", &format!("who={who}&token={TOKEN}&next=/")).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let set_cookie = answer.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let page = get(router, "/", Some(&cookie)).await;
    let at = page
        .body
        .find("name=\"csrf\" value=\"")
        .expect("the sign-out form carries the CSRF token")
        + 19;
    let csrf = page.body[at..at + 64].to_owned();
    (cookie, csrf)
}

#[tokio::test]
async fn the_overview_shows_the_exact_numbers_of_the_status_model() {
    let server = RedisServer::start();
    build(&server);
    let router = dashboard(&server, None).await.router();

    let page = get(&router, "/", None).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.body;
    for (field, expected) in [
        ("partitions", "8"),
        ("undelivered", "2"),
        ("pending", "1"),
        ("retries", "1"),
        ("delayed", "0"),
        ("dead-letters", "1"),
        ("consumers", "1"),
        ("lag", "2"),
    ] {
        assert_eq!(cell(html, "queue-ocr", field), expected, "ocr {field}");
    }
    assert_eq!(cell(html, "queue-notification", "undelivered"), "2");
    assert_eq!(cell(html, "queue-notification", "pending"), "0");
    assert!(
        html.contains("qg_docs_pipeline_v"),
        "the library is named: {html}"
    );
    assert!(html.contains("state-loaded"), "and loaded");
    assert!(html.contains("read-only"), "no token: read-only");
    // The dead-letter alert fires and links to its partition.
    assert!(
        html.contains("<a href=\"/queues/ocr/partitions/3\">ocr 3</a>: queue ocr partition 3: 1 dead letter(s)"),
        "{html}"
    );
    assert!(
        !html.contains("Sign in to act"),
        "read-only offers no sign-in"
    );

    // The fragment the page refreshes from holds the same table.
    let fragment = get(&router, "/fragment/overview", None).await;
    assert_eq!(cell(&fragment.body, "queue-ocr", "dead-letters"), "1");
    assert!(!fragment.body.contains("<html"), "a fragment, not a page");

    // The JSON is the `status --json` model.
    let json: serde_json::Value =
        serde_json::from_str(&get(&router, "/api/status", None).await.body).unwrap();
    let ocr = json["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "ocr")
        .unwrap();
    assert_eq!(ocr["partitions"][3]["dead_letters"]["count"], 1);
}

#[tokio::test]
async fn the_partition_page_lists_pending_dead_letters_and_retries_without_undeclared_fields() {
    let server = RedisServer::start();
    let built = build(&server);
    let router = dashboard(&server, None).await.router();

    let page = get(&router, "/queues/ocr/partitions/3", None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let html = &page.body;
    // Pending: job-2, held by worker-a, delivered once.
    let pending = &html[html.find("id=\"pending\"").unwrap()..html.find("Dead letters").unwrap()];
    assert!(
        pending.contains("job-2") && pending.contains("worker-a"),
        "{pending}"
    );
    // The dead letter with its reason and detail, and the spec's fields.
    assert!(
        html.contains(&format!("id=\"dead-{}\"", built.dead_id)),
        "{html}"
    );
    assert!(html.contains("scan is not a PDF") && html.contains("permanent"));
    assert!(html.contains("scan-job-0.pdf"), "a declared field is shown");
    assert!(
        !html.contains("hunter2-secret"),
        "an undeclared field is never shown"
    );
    assert!(html.contains("1 field(s) not in the spec withheld"));
    assert!(
        html.contains(" UTC <small>"),
        "dead_at reads as a time: {html}"
    );
    // The scheduled retry: job-1, attempt 2, due in about an hour.
    let retries = &html[html.find("id=\"retries\"").unwrap()..];
    assert!(
        retries.contains("job-1") && retries.contains("transient"),
        "{retries}"
    );
    assert!(retries.contains(">2<"), "attempt 2: {retries}");
    assert!(
        retries.contains("in 59m") || retries.contains("in 1h00m"),
        "{retries}"
    );
    // Read-only: no replay link.
    assert!(!html.contains("replay…"), "no actions without the token");

    // The queue page has a row per partition; partition 3 has the numbers.
    let queue = get(&router, "/queues/ocr", None).await;
    assert_eq!(cell(&queue.body, "partition-3", "dead-letters"), "1");
    assert_eq!(cell(&queue.body, "partition-3", "undelivered"), "2");
    assert_eq!(cell(&queue.body, "partition-0", "undelivered"), "0");
}

#[tokio::test]
async fn unknown_queues_and_partitions_are_named_in_a_404() {
    let server = RedisServer::start();
    build(&server);
    let router = dashboard(&server, None).await.router();
    let page = get(&router, "/queues/nope", None).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body.contains("the spec has no queue &quot;nope&quot;") && page.body.contains("ocr"),
        "{}",
        page.body
    );
    let page = get(&router, "/queues/ocr/partitions/8", None).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body
            .contains("queue ocr has no partition 8: its partitions are 0 to 7"),
        "{}",
        page.body
    );
    let series = get(&router, "/api/series?queue=nope", None).await;
    assert_eq!(series.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn without_the_token_no_action_is_offered_or_accepted() {
    let server = RedisServer::start();
    let built = build(&server);
    let before = keyspace(&server);

    // Read-only: nothing offered, every action refused with 403.
    let read_only = dashboard(&server, None).await.router();
    let form = format!("id={}&partition=3", built.dead_id);
    let refused = post(
        &read_only,
        "/queues/ocr/replay",
        &form,
        Auth::Bearer("anything"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.body.contains("read-only"));
    assert_eq!(
        get(&read_only, "/queues/ocr/replay?all=1", None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );

    // With a token: no credentials → 401; a wrong bearer → 401; a session
    // without (or with another) CSRF token → 403. Nothing changes.
    let guarded = dashboard(&server, Some(TOKEN)).await.router();
    let page = get(&guarded, "/queues/ocr/partitions/3", None).await;
    assert!(
        !page.body.contains("replay…") && page.body.contains("Sign in to act"),
        "no button before sign-in"
    );
    for (uri, form) in [
        ("/queues/ocr/replay", form.as_str()),
        ("/queues/ocr/pause", "partition=3"),
        ("/queues/ocr/resume", ""),
    ] {
        let answer = post(&guarded, uri, form, Auth::None).await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{uri}: {}",
            answer.body
        );
        assert!(answer.headers.contains_key(header::WWW_AUTHENTICATE));
        let answer = post(&guarded, uri, form, Auth::Bearer("not-the-token")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    let (cookie, csrf) = sign_in(&guarded, "alice").await;
    let forged = post(&guarded, "/queues/ocr/replay", &form, Auth::Cookie(&cookie)).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    assert!(forged.body.contains("CSRF"));
    let wrong = format!("{form}&csrf={}", "0".repeat(64));
    assert_eq!(
        post(
            &guarded,
            "/queues/ocr/replay",
            &wrong,
            Auth::Cookie(&cookie)
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    assert_ne!(csrf, "0".repeat(64));
    // A wrong token at sign-in is refused too.
    let bad = post_login(&guarded, "", "who=mallory&token=guess&next=/").await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    let cookies: Vec<&str> = bad
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert!(
        cookies
            .iter()
            .all(|c| !c.starts_with("queuegen_dashboard=")),
        "no session: {cookies:?}"
    );
    // The sign-in form itself is CSRF-checked: a cross-site sign-in is refused.
    let forged = post(
        &guarded,
        "/login",
        &format!("who=mallory&token={TOKEN}&next=/"),
        Auth::None,
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(!forged.headers.contains_key(header::SET_COOKIE));

    assert_eq!(
        keyspace(&server),
        before,
        "every refused request changed nothing"
    );
    assert!(dashboard(&server, Some(TOKEN)).await.actions().is_empty());
}

#[tokio::test]
async fn a_replay_is_confirmed_then_done_once_and_logged_with_who() {
    let server = RedisServer::start();
    let built = build(&server);
    let dashboard = dashboard(&server, Some(TOKEN)).await;
    let router = dashboard.router();
    let (cookie, csrf) = sign_in(&router, "alice").await;

    // The partition page offers the replay; the confirmation is a dry run.
    let page = get(&router, "/queues/ocr/partitions/3", Some(&cookie)).await;
    assert!(
        page.body.contains("replay…"),
        "signed in: the replay is offered"
    );
    let before = keyspace(&server);
    let confirm = get(
        &router,
        &format!("/queues/ocr/replay?id={}&partition=3", built.dead_id),
        Some(&cookie),
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(
        confirm
            .body
            .contains("Replay 1 dead letter(s) of queue ocr?"),
        "{}",
        confirm.body
    );
    assert!(
        confirm
            .body
            .contains("append to work:{ocr-03}:ready as attempt 1"),
        "{}",
        confirm.body
    );
    assert!(
        confirm.body.contains(&format!("value=\"{csrf}\"")),
        "the form carries the CSRF token"
    );
    assert_eq!(keyspace(&server), before, "the confirmation writes nothing");

    let ready_before = xlen(&server, OCR_READY);
    let form = format!("csrf={csrf}&id={}&partition=3", built.dead_id);
    let done = post(&router, "/queues/ocr/replay", &form, Auth::Cookie(&cookie)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.headers[header::LOCATION], "/queues/ocr/partitions/3");
    assert_eq!(
        xlen(&server, OCR_READY),
        ready_before + 1,
        "the job is back on the ready stream"
    );
    let back = get(&router, "/queues/ocr/partitions/3", Some(&cookie)).await;
    assert!(
        back.body.contains("id=\"flash\""),
        "the page says what was done"
    );
    assert!(
        back.body.contains("replayed 1: job job-0 as ready entry"),
        "{}",
        back.body
    );
    assert!(
        back.body.contains("replayed as "),
        "the dead letter shows its replay"
    );
    let overview = get(&router, "/", Some(&cookie)).await;
    assert_eq!(cell(&overview.body, "queue-ocr", "undelivered"), "3");

    // Again: found replayed already, nothing appended.
    let again = post(&router, "/queues/ocr/replay", &form, Auth::Cookie(&cookie)).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(
        xlen(&server, OCR_READY),
        ready_before + 1,
        "a second replay appends nothing"
    );

    let log = dashboard.actions();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[1].who, "alice");
    assert_eq!(log[1].action, "replay");
    assert_eq!(log[1].target, format!("dead letter {}", built.dead_id));
    assert!(
        log[0].outcome.contains("1 replayed already"),
        "{:?}",
        log[0]
    );
    let page = get(&router, "/actions", None).await;
    assert!(
        page.body.contains("alice") && page.body.contains(&built.dead_id),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn a_script_pauses_and_resumes_with_the_bearer_token() {
    let server = RedisServer::start();
    build(&server);
    let dashboard = dashboard(&server, Some(TOKEN)).await;
    let router = dashboard.router();

    let paused = post(
        &router,
        "/queues/ocr/pause",
        "partition=3&reason=db+migration",
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    let changes: serde_json::Value = serde_json::from_str(&paused.body).unwrap();
    assert_eq!(changes[0]["partition"], 3);
    let flag: Option<String> = redis::cmd("GET")
        .arg("work:{ocr-03}:paused")
        .query(&mut server.connection())
        .unwrap();
    let flag = flag.expect("the pause flag is set");
    assert!(
        flag.contains("by=bearer token") && flag.contains("reason=db migration"),
        "{flag}"
    );
    let queue = get(&router, "/queues/ocr", None).await;
    assert!(cell(&queue.body, "partition-3", "state").contains("paused"));
    assert!(cell(&get(&router, "/", None).await.body, "queue-ocr", "paused").contains("1 paused"));

    let resumed = post(
        &router,
        "/queues/ocr/resume",
        "partition=3",
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.body);
    let flag: Option<String> = redis::cmd("GET")
        .arg("work:{ocr-03}:paused")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(flag, None);
    let log = dashboard.actions();
    assert_eq!((log[0].action, log[1].action), ("resume", "pause"));
    assert_eq!(log[1].outcome, "paused 1 partition(s)");

    // A partition the queue does not have: named, nothing written.
    let bad = post(
        &router,
        "/queues/ocr/pause",
        "partition=99",
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(bad.status, StatusCode::NOT_FOUND, "{}", bad.body);
    assert!(bad.body.contains("no partition 99"));
}

#[tokio::test]
async fn the_history_charts_deliveries_from_the_samples() {
    let server = RedisServer::start();
    build(&server);
    let dashboard = dashboard(&server, None).await;
    let router = dashboard.router();
    dashboard.sample().await.unwrap();
    // Two more deliveries on ocr partition 3 between the samples.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP",
            "ocr-workers",
            "worker-b",
            "COUNT",
            "2",
            "STREAMS",
            OCR_READY,
            ">",
        ])
        .query(&mut server.connection())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    dashboard.sample().await.unwrap();

    let series: serde_json::Value =
        serde_json::from_str(&get(&router, "/api/series?queue=ocr", None).await.body).unwrap();
    assert_eq!(series["t"].as_array().unwrap().len(), 2);
    assert_eq!(series["undelivered"], serde_json::json!([2, 0]));
    assert_eq!(series["pending"], serde_json::json!([1, 3]));
    assert!(
        series["delivered"][0].is_null(),
        "no rate before the second sample"
    );
    assert!(series["delivered"][1].as_f64().unwrap() > 0.0);
    assert_eq!(
        series["acknowledged"][1], 0.0,
        "delivered, none acknowledged"
    );
    let all: serde_json::Value =
        serde_json::from_str(&get(&router, "/api/series", None).await.body).unwrap();
    assert_eq!(
        all["undelivered"],
        serde_json::json!([4, 2]),
        "all queues summed"
    );
}

#[tokio::test]
async fn assets_are_served_from_the_binary() {
    let server = RedisServer::start();
    let router = dashboard(&server, None).await.router();
    let js = get(&router, "/assets/uPlot.iife.min.js", None).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(js.body.contains("uPlot"));
    assert!(get(&router, "/assets/uPlot.LICENSE", None)
        .await
        .body
        .contains("MIT License"));
    assert_eq!(
        get(&router, "/assets/../Cargo.toml", None).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_generated_monitor_user_serves_the_pages_and_the_operator_user_the_actions() {
    use queuegen_runtime::roles::Role;
    let library = queuegen::gen::functions::library_name("docs-pipeline");
    let user = |role: Role| {
        let rules = role.acl_rules(
            "work",
            std::slice::from_ref(&library),
            queuegen_tests::acl::server_commands(),
        );
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        queuegen_tests::AclUser::with_rules(role.name(), "rolepass", &rules)
    };
    let (monitor, operator) = (user(Role::Monitor), user(Role::Operator));
    let server = RedisServer::start();
    let built = build(&server);
    // A run in flight, so the pipelines' pages send every read they can.
    dashboard_state::open_run(&server, "doc-monitor");
    let mut conn = server.connection();
    monitor.create(&mut conn, &server.addr());
    operator.create(&mut conn, &server.addr());
    let spec = queuegen::spec::check_file(std::path::Path::new(EXAMPLE))
        .unwrap()
        .spec
        .unwrap();

    // Read-only as the monitor: every page and the sampler.
    let redis = Redis::connect(monitor.url_for(server.port()))
        .await
        .unwrap();
    let read_only = dashboard_of(&spec, redis, DashboardOptions::default());
    read_only.sample().await.expect("the monitor may sample");
    let router = read_only.router();
    for uri in [
        "/",
        "/queues/ocr",
        "/queues/ocr/partitions/3",
        "/api/status",
        "/pipelines",
        "/pipelines/documents",
        "/pipelines/documents/runs/doc-monitor",
    ] {
        let page = get(&router, uri, None).await;
        assert_eq!(
            page.status,
            StatusCode::OK,
            "{uri} as monitor: {}",
            page.body
        );
    }
    let pipelines = get(&router, "/pipelines", None).await.body;
    assert!(
        pipelines.contains("data-run=\"doc-monitor\""),
        "{pipelines}"
    );
    // A run no join keeps: a 404, not a refusal.
    let run = get(&router, "/pipelines/documents/runs/doc-none", None).await;
    assert_eq!(run.status, StatusCode::NOT_FOUND, "{}", run.body);
    assert!(
        run.body.contains("no run &quot;doc-none&quot;"),
        "{}",
        run.body
    );
    let partition = get(&router, "/queues/ocr/partitions/3", None).await.body;
    assert!(partition.contains("job-1") && partition.contains(&built.dead_id));

    // Acting as the operator: replay, pause, resume.
    let redis = Redis::connect(operator.url_for(server.port()))
        .await
        .unwrap();
    let acting = dashboard_of(
        &spec,
        redis,
        DashboardOptions {
            operator_token: Some(TOKEN.to_owned()),
            ..DashboardOptions::default()
        },
    );
    let router = acting.router();
    let form = format!("id={}&partition=3", built.dead_id);
    for (uri, form) in [
        ("/queues/ocr/replay", form.as_str()),
        ("/queues/ocr/pause", "partition=3"),
        ("/queues/ocr/resume", "partition=3"),
    ] {
        let answer = post(&router, uri, form, Auth::Bearer(TOKEN)).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{uri} as operator: {}",
            answer.body
        );
    }
    assert_eq!(
        get(&router, "/queues/ocr/partitions/3", None).await.status,
        StatusCode::OK
    );
}

/// A team's app with the example's dashboard nested at `/ops/queues`, over
/// `server` with the built state.
async fn nested_app(server: &RedisServer, operator_token: Option<&str>) -> Router {
    build(server);
    let spec = queuegen::spec::check_file(std::path::Path::new(EXAMPLE))
        .unwrap()
        .spec
        .unwrap();
    let redis = Redis::connect(server.url()).await.unwrap();
    let dashboard = dashboard_of(
        &spec,
        redis,
        DashboardOptions {
            operator_token: operator_token.map(str::to_owned),
            mounted_at: "/ops/queues".to_owned(),
            ..DashboardOptions::default()
        },
    );
    Router::new()
        .route("/", axum::routing::get(|| async { "the team's own app" }))
        .nest("/ops/queues", dashboard.router())
}

#[tokio::test]
async fn nested_in_a_host_app_its_links_and_cookie_stay_under_the_mount_point() {
    let server = RedisServer::start();
    let app = nested_app(&server, Some(TOKEN)).await;

    let page = get(&app, "/ops/queues", None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("href=\"/ops/queues/queues/ocr\""),
        "{}",
        page.body
    );
    assert!(page
        .body
        .contains("src=\"/ops/queues/assets/dashboard.js\""));
    assert_eq!(get(&app, "/", None).await.body, "the team's own app");

    let login = post_login(
        &app,
        "/ops/queues",
        &format!("who=bob&token={TOKEN}&next=/ops/queues/queues/ocr"),
    )
    .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(login.headers[header::LOCATION], "/ops/queues/queues/ocr");
    assert!(login.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .contains("Path=/ops/queues;"));
    // A sign-in link cannot send the operator off the dashboard.
    let away = post_login(
        &app,
        "/ops/queues",
        &format!("who=bob&token={TOKEN}&next=//evil.example/"),
    )
    .await;
    assert_eq!(away.headers[header::LOCATION], "/ops/queues");
}

/// `XADD key * job_id <id>` plus a header, through any connection.
async fn xadd(conn: &mut queuegen_runtime::Connection, key: &str, job_id: &str) -> String {
    redis::cmd("XADD")
        .arg(key)
        .arg("*")
        .arg(&[
            ("job_id", job_id),
            ("type", "TestJob"),
            ("tenant", "acme"),
            ("schema", "1"),
            ("attempt", "1"),
        ])
        .query_async(conn)
        .await
        .expect("XADD")
}

/// Delivers one entry of `ready` to `worker-a` and dead-letters it.
async fn dead_letter_one(
    conn: &mut queuegen_runtime::Connection,
    library: &str,
    group: &str,
    ready: &str,
    dead: &str,
    marker_prefix: &str,
) -> String {
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP", group, "worker-a", "COUNT", "1", "STREAMS", ready, ">",
        ])
        .query_async(conn)
        .await
        .expect("XREADGROUP");
    let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(&[ready, group, "-", "+", "1"])
        .query_async(conn)
        .await
        .expect("XPENDING");
    let source = &pending[0].0;
    let marker = format!("{marker_prefix}:marker:dead:{source}");
    let call = functions::DeadLetterCall {
        ready_key: ready,
        dead_key: dead,
        marker_key: &marker,
        group,
        consumer: "worker-a",
        source_id: source,
        reason: "permanent",
        detail: "bad input",
        deliveries: 1,
        marker_ttl_ms: 600_000,
        dead_letter_max_len: 1000,
    };
    let (_, dead_id): (String, String) =
        functions::command(&Function::DeadLetter.in_library(library), &call)
            .query_async(conn)
            .await
            .expect("FCALL dead_letter");
    dead_id
}

#[tokio::test]
async fn a_queue_with_lanes_has_a_row_per_lane_and_replays_within_its_lane() {
    const TESTS_SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/queues.yaml");
    let server = RedisServer::start();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["apply", TESTS_SPEC, "--redis", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let redis = Redis::connect(server.url()).await.unwrap();
    let mut conn = redis.shared();
    let high = "qgtest:lane-high:{laned-00}:ready";
    let normal = "qgtest:{laned-00}:ready";
    let low = "qgtest:lane-low:{laned-00}:ready";
    xadd(&mut conn, high, "h-1").await;
    xadd(&mut conn, normal, "n-1").await;
    xadd(&mut conn, normal, "n-2").await;
    xadd(&mut conn, low, "l-1").await;
    let library = queuegen::gen::functions::library_name("queuegen-tests");
    let dead_id = dead_letter_one(
        &mut conn,
        &library,
        "laned-workers",
        low,
        "qgtest:lane-low:{laned-00}:dead",
        "qgtest:lane-low:{laned-00}",
    )
    .await;

    let spec = queuegen::spec::check_file(std::path::Path::new(TESTS_SPEC))
        .unwrap()
        .spec
        .unwrap();
    let router = dashboard_of(
        &spec,
        redis.clone(),
        DashboardOptions {
            operator_token: Some(TOKEN.to_owned()),
            ..DashboardOptions::default()
        },
    )
    .router();
    let overview = get(&router, "/", None).await.body;
    assert_eq!(cell(&overview, "queue-laned", "partitions"), "2 × 3 lanes");
    assert_eq!(cell(&overview, "queue-laned", "undelivered"), "3");
    assert_eq!(cell(&overview, "queue-laned", "dead-letters"), "1");
    let queue = get(&router, "/queues/laned", None).await.body;
    assert_eq!(cell(&queue, "partition-high-0", "undelivered"), "1");
    assert_eq!(cell(&queue, "partition-normal-0", "undelivered"), "2");
    assert_eq!(cell(&queue, "partition-low-0", "dead-letters"), "1");

    // The partition page shows the lane and the replay names it; the replay stays in the lane.
    let (cookie, _) = sign_in(&router, "carol").await;
    let page = get(&router, "/queues/laned/partitions/0", Some(&cookie))
        .await
        .body;
    assert!(
        page.contains(&format!("replay?id={dead_id}&amp;partition=0&amp;lane=low")),
        "{page}"
    );
    let before = redis::cmd("XLEN")
        .arg(low)
        .query_async::<u64>(&mut conn)
        .await
        .unwrap();
    let form = format!("id={dead_id}&partition=0&lane=low");
    let done = post(&router, "/queues/laned/replay", &form, Auth::Bearer(TOKEN)).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    let outcomes: serde_json::Value = serde_json::from_str(&done.body).unwrap();
    assert_eq!(outcomes[0]["lane"], "low");
    let after = redis::cmd("XLEN")
        .arg(low)
        .query_async::<u64>(&mut conn)
        .await
        .unwrap();
    assert_eq!(after, before + 1, "replayed into the low lane");
    // A lane the queue does not have is named.
    let bad = post(
        &router,
        "/queues/laned/replay",
        "all=1&lane=urgent",
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(bad.status, StatusCode::NOT_FOUND, "{}", bad.body);
    assert!(
        bad.body.contains("there is no lane \\\"urgent\\\""),
        "{}",
        bad.body
    );
}

#[tokio::test]
async fn on_a_cluster_every_primary_is_listed_and_a_replay_works() {
    let cluster = queuegen_tests::RedisCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("queues.yaml");
    let text = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace("deployment: standalone", "deployment: cluster");
    std::fs::write(&spec_path, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args([
            "apply",
            spec_path.to_str().unwrap(),
            "--redis",
            &cluster.url(),
        ])
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let redis = Redis::connect(cluster.url()).await.unwrap();
    let mut conn = redis.shared();
    for n in 0..3 {
        xadd(&mut conn, OCR_READY, &format!("c-{n}")).await;
    }
    let library = queuegen::gen::functions::library_name("docs-pipeline");
    let dead_id = dead_letter_one(
        &mut conn,
        &library,
        "ocr-workers",
        OCR_READY,
        "work:{ocr-03}:dead",
        "work:{ocr-03}",
    )
    .await;

    let spec = queuegen::spec::check_file(&spec_path)
        .unwrap()
        .spec
        .unwrap();
    let dashboard = dashboard_of(
        &spec,
        redis.clone(),
        DashboardOptions {
            operator_token: Some(TOKEN.to_owned()),
            ..DashboardOptions::default()
        },
    );
    dashboard.sample().await.expect("samples on a cluster");
    let router = dashboard.router();
    let overview = get(&router, "/", None).await.body;
    assert_eq!(cell(&overview, "queue-ocr", "undelivered"), "2");
    assert_eq!(cell(&overview, "queue-ocr", "dead-letters"), "1");
    assert_eq!(
        overview.matches("state-loaded").count(),
        3,
        "the library on each of the 3 primaries: {overview}"
    );
    let page = get(&router, "/queues/ocr/partitions/3", None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&dead_id));

    let done = post(
        &router,
        "/queues/ocr/replay",
        &format!("id={dead_id}&partition=3"),
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    let overview = get(&router, "/", None).await.body;
    assert_eq!(cell(&overview, "queue-ocr", "undelivered"), "3");
    let paused = post(&router, "/queues/ocr/pause", "", Auth::Bearer(TOKEN)).await;
    assert_eq!(
        paused.status,
        StatusCode::OK,
        "pauses every partition, across slots: {}",
        paused.body
    );
    assert!(cell(&get(&router, "/", None).await.body, "queue-ocr", "paused").contains("8 paused"));
}

#[tokio::test]
async fn with_redis_gone_the_pages_say_so_with_a_502_and_the_history_keeps_its_samples() {
    let mut server = RedisServer::start();
    build(&server);
    let dashboard = dashboard(&server, None).await;
    dashboard.sample().await.unwrap();
    let router = dashboard.router();
    let addr = server.addr();
    server.kill9();

    let page = get(&router, "/", None).await;
    assert_eq!(page.status, StatusCode::BAD_GATEWAY, "{}", page.body);
    assert!(page.body.contains("redis"), "{}", page.body);
    assert!(
        page.body.contains(&format!("Redis {addr}")),
        "names the server: {}",
        page.body
    );
    let json = get(&router, "/api/status", None).await;
    assert_eq!(json.status, StatusCode::BAD_GATEWAY);
    let error: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("redis"),
        "{error}"
    );
    assert!(
        dashboard.sample().await.is_err(),
        "a failed sample is an error, not a zero"
    );
    let series: serde_json::Value =
        serde_json::from_str(&get(&router, "/api/series", None).await.body).unwrap();
    assert_eq!(
        series["t"].as_array().unwrap().len(),
        1,
        "the sample taken before stays; {addr} is down"
    );
}

#[tokio::test]
async fn behind_a_tls_proxy_the_cookies_are_secure() {
    let server = RedisServer::start();
    build(&server);
    let router = dashboard(&server, Some(TOKEN)).await.router();
    let page = send(
        &router,
        Request::get("/login")
            .header("x-forwarded-proto", "https")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let cookie = page.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let plain = get(&router, "/login", None).await;
    assert!(!plain.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .contains("Secure"));
}

/// The headers every answer carries, whatever the route or status.
fn assert_secured(what: &str, answer: &Answer) {
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .unwrap_or_else(|| panic!("{what} ({}): no {name} header", answer.status))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let csp = header("content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{what}: {directive} in {csp}");
    }
    assert!(!csp.contains("unsafe"), "{what}: {csp}");
    assert_eq!(header("x-frame-options"), "DENY", "{what}");
    assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header("referrer-policy"), "same-origin", "{what}");
}

#[tokio::test]
async fn every_answer_carries_the_security_headers_error_pages_and_404s_included() {
    let server = RedisServer::start();
    let built = build(&server);
    let router = dashboard(&server, Some(TOKEN)).await.router();
    let (cookie, _) = sign_in(&router, "alice").await;
    let dead = format!("/queues/ocr/replay?id={}&partition=3", built.dead_id);
    for (uri, status) in [
        ("/", StatusCode::OK),
        ("/fragment/overview", StatusCode::OK),
        ("/queues/ocr", StatusCode::OK),
        ("/queues/ocr/partitions/3", StatusCode::OK),
        (dead.as_str(), StatusCode::OK),
        ("/actions", StatusCode::OK),
        ("/login", StatusCode::OK),
        ("/api/status", StatusCode::OK),
        ("/api/series", StatusCode::OK),
        ("/assets/dashboard.js", StatusCode::OK),
        ("/assets/uPlot.min.css", StatusCode::OK),
        ("/assets/nope.js", StatusCode::NOT_FOUND),
        ("/queues/nope", StatusCode::NOT_FOUND),
        ("/queues/ocr/partitions/8", StatusCode::NOT_FOUND),
        ("/no/such/page", StatusCode::NOT_FOUND),
        ("/api/series?queue=nope", StatusCode::NOT_FOUND),
    ] {
        let answer = get(&router, uri, Some(&cookie)).await;
        assert_eq!(answer.status, status, "GET {uri}: {}", answer.body);
        assert_secured(&format!("GET {uri}"), &answer);
    }
    // Refused, malformed and wrong-method requests too.
    let refused = post(&router, "/queues/ocr/pause", "partition=1", Auth::None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert_secured("POST without a token", &refused);
    let wrong_method = post(&router, "/api/status", "", Auth::None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_secured("POST /api/status", &wrong_method);
    let confirm = get(&router, "/queues/ocr/pause", None).await;
    assert_secured("a confirmation without a session", &confirm);

    // Redis gone: the 502 error page is secured as well.
    let mut server = server;
    server.kill9();
    let gone = get(&router, "/", None).await;
    assert_eq!(gone.status, StatusCode::BAD_GATEWAY);
    assert_secured("GET / with Redis gone", &gone);
}

#[tokio::test]
async fn nested_in_a_host_app_its_answers_and_404s_carry_the_security_headers() {
    let server = RedisServer::start();
    let app = nested_app(&server, None).await;
    for (uri, status) in [
        ("/ops/queues", StatusCode::OK),
        ("/ops/queues/queues/ocr", StatusCode::OK),
        ("/ops/queues/assets/dashboard.css", StatusCode::OK),
        ("/ops/queues/queues/nope", StatusCode::NOT_FOUND),
        ("/ops/queues/no/such/page", StatusCode::NOT_FOUND),
    ] {
        let answer = get(&app, uri, None).await;
        assert_eq!(answer.status, status, "GET {uri}: {}", answer.body);
        assert_secured(&format!("GET {uri}"), &answer);
    }
    let missing = get(&app, "/ops/queues/no/such/page", None).await;
    assert!(
        missing
            .body
            .replace("&#x2f;", "/")
            .contains("no page /ops/queues/no/such/page"),
        "the 404 names the path asked for: {}",
        missing.body
    );
    // The host app's own routes are the host's business.
    let own = get(&app, "/", None).await;
    assert!(own.headers.get("content-security-policy").is_none());
}

#[tokio::test]
async fn pages_hold_no_inline_script_or_style_so_the_policy_needs_no_unsafe_inline() {
    let server = RedisServer::start();
    let built = build(&server);
    let router = dashboard(&server, Some(TOKEN)).await.router();
    let (cookie, _) = sign_in(&router, "alice").await;
    let dead = format!("/queues/ocr/replay?id={}&partition=3", built.dead_id);
    for uri in [
        "/",
        "/queues/ocr",
        "/queues/ocr/partitions/3",
        dead.as_str(),
        "/queues/ocr/pause",
        "/actions",
        "/queues/nope",
        "/pipelines",
        "/pipelines/documents/runs/doc-none",
    ] {
        let page = get(&router, uri, Some(&cookie)).await;
        let html = page.body.to_ascii_lowercase();
        for script in html.match_indices("<script").map(|(at, _)| &html[at..]) {
            let tag = &script[..script.find('>').unwrap()];
            assert!(tag.contains(" src="), "{uri}: an inline script: {tag}");
        }
        assert!(!html.contains("<style"), "{uri}: an inline <style>");
        assert!(!html.contains(" style="), "{uri}: a style attribute");
        assert!(!html.contains("javascript:"), "{uri}: a javascript: URL");
        for handler in [" onclick=", " onload=", " onchange=", " onsubmit="] {
            assert!(
                !html.contains(handler),
                "{uri}: an inline handler {handler}"
            );
        }
    }
}

#[tokio::test]
async fn a_malformed_dead_letter_id_is_a_400_naming_it_and_redis_is_never_asked() {
    let mut server = RedisServer::start();
    build(&server);
    let dashboard = dashboard(&server, Some(TOKEN)).await;
    let router = dashboard.router();
    let (cookie, csrf) = sign_in(&router, "alice").await;
    // With Redis gone, anything sent to it would answer 502: a 400 shows
    // that the ID was refused first.
    server.kill9();

    for id in [
        "not-an-id",
        "1700000000000",
        "1700000000000-x",
        "-1-0",
        "99999999999999999999-0",
    ] {
        let query = format!("id={}&partition=3", id.replace('-', "%2D"));
        let confirm = get(
            &router,
            &format!("/queues/ocr/replay?{query}"),
            Some(&cookie),
        )
        .await;
        assert_eq!(
            confirm.status,
            StatusCode::BAD_REQUEST,
            "{id}: {}",
            confirm.body
        );
        assert!(
            confirm
                .body
                .contains(&format!("dead letter ID &quot;{id}&quot;"))
                && confirm.body.contains("&lt;unix ms&gt;-&lt;sequence&gt;"),
            "{id}: {}",
            confirm.body
        );

        let form = format!("csrf={csrf}&{query}");
        let browser = post(&router, "/queues/ocr/replay", &form, Auth::Cookie(&cookie)).await;
        assert_eq!(
            browser.status,
            StatusCode::BAD_REQUEST,
            "{id}: {}",
            browser.body
        );
        assert!(
            browser.body.contains("is not a stream ID"),
            "{}",
            browser.body
        );

        let script = post(&router, "/queues/ocr/replay", &query, Auth::Bearer(TOKEN)).await;
        assert_eq!(
            script.status,
            StatusCode::BAD_REQUEST,
            "{id}: {}",
            script.body
        );
        let error: serde_json::Value = serde_json::from_str(&script.body).unwrap();
        let message = error["error"].as_str().unwrap();
        assert!(
            message.contains(&format!("dead letter ID {id:?} is not a stream ID"))
                && message.contains("<unix ms>-<sequence>"),
            "{message}"
        );
    }
    assert!(
        dashboard.actions().is_empty(),
        "a malformed request is not an action"
    );

    // Every other number the dashboard takes from a request is checked the same way.
    let page = get(&router, "/queues/ocr/partitions/x", None).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    assert!(
        page.body.contains("partition &quot;x&quot;") && page.body.contains("0..7"),
        "{}",
        page.body
    );
    let pause = post(
        &router,
        "/queues/ocr/pause",
        "partition=x",
        Auth::Bearer(TOKEN),
    )
    .await;
    assert_eq!(pause.status, StatusCode::BAD_REQUEST, "{}", pause.body);
    assert!(
        pause.body.contains("partition must be a partition number"),
        "{}",
        pause.body
    );
}
