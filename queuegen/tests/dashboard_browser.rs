//! The dashboard in a real browser: `queuegen dashboard` as a process, Debian's
//! headless Chromium through chromedriver, a private redis-server holding a
//! state the test built (dashboard_state). Screenshots and the render timing
//! are written to target/test-artefacts/.

mod dashboard_state;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dashboard_state::{apply, build, keyspace, open_run, xlen, EXAMPLE, OCR_READY};
use queuegen_tests::browser::{artefact_dir, Browser, Client, Locator};
use queuegen_tests::RedisServer;

const TOKEN: &str = "operator-token-for-browser-tests-42";

/// `queuegen dashboard` on a free loopback port; killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(spec: &str, server: &RedisServer, token: Option<&str>) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_queuegen"));
        command
            .args([
                "dashboard",
                spec,
                "--redis",
                &server.url(),
                "--listen",
                "127.0.0.1:0",
                "--sample-every",
                "1",
            ])
            .env_remove("REDIS_URL")
            .env_remove("QUEUEGEN_DASHBOARD_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(token) = token {
            command.env("QUEUEGEN_DASHBOARD_TOKEN", token);
        }
        let mut child = command.spawn().expect("queuegen dashboard starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the dashboard says where it serves");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches('/')
            .to_owned();
        Served { child, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the element `css`, waiting for it: a click that navigates
/// returns before the next page is there, and the overview's refresh can
/// replace the element between finding it and reading it (stale), so that
/// one error finds it again.
async fn text(client: &Client, css: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let element = client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|err| panic!("no element {css}: {err}"));
        match element.text().await {
            Ok(text) => return text,
            Err(err) if err.is_stale_element_reference() && Instant::now() < deadline => continue,
            Err(err) => panic!("the text of {css}: {err}"),
        }
    }
}

/// The overview's cell of `queue` and `field`.
async fn overview_cell(client: &Client, queue: &str, field: &str) -> String {
    text(
        client,
        &format!("#queue-{queue} td[data-field=\"{field}\"]"),
    )
    .await
}

/// Milliseconds from navigation start to the load event of the current page.
async fn load_ms(client: &Client) -> f64 {
    let value = client
        .execute(
            "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;",
            vec![],
        )
        .await
        .expect("navigation timing");
    value.as_f64().expect("a number")
}

/// POSTs a form from inside the page (as a forged form on another tab
/// would, minus the CSRF token), returning the status.
async fn forged_post(client: &Client, path: &str, body: &str) -> u64 {
    client
        .execute_async(
            "const [path, body, done] = arguments;
             fetch(path, { method: 'POST', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } })
               .then((r) => done(r.status), (e) => done(String(e)));",
            vec![path.into(), body.into()],
        )
        .await
        .expect("the fetch ran")
        .as_u64()
        .expect("a status")
}

async fn eventually_text(client: &Client, css: &str, expected: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let seen = text(client, css).await;
        if seen == expected || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_the_numbers_and_replays_a_dead_letter_in_chromium() {
    let server = RedisServer::start();
    let built = build(&server);
    let served = Served::start(EXAMPLE, &server, Some(TOKEN));
    let browser = Browser::start().await;
    let client = &browser.client;

    // The overview shows the exact numbers the state holds.
    client.goto(&format!("{}/", served.url)).await.unwrap();
    for (field, expected) in [
        ("undelivered", "2"),
        ("pending", "1"),
        ("retries", "1"),
        ("dead-letters", "1"),
        ("consumers", "1"),
    ] {
        assert_eq!(
            overview_cell(client, "ocr", field).await,
            expected,
            "ocr {field}"
        );
    }
    assert_eq!(
        overview_cell(client, "notification", "undelivered").await,
        "2"
    );
    let libraries = text(client, "#libraries").await;
    assert!(
        libraries.contains("qg_docs_pipeline_v") && libraries.contains("loaded"),
        "{libraries}"
    );
    // The charts are drawn (uPlot makes a canvas per chart once the history answers).
    let deadline = Instant::now() + Duration::from_secs(10);
    while client
        .find_all(Locator::Css("#charts canvas"))
        .await
        .unwrap()
        .len()
        < 3
    {
        assert!(Instant::now() < deadline, "the three charts were not drawn");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let shot = browser.screenshot("dashboard-overview").await;
    println!("screenshot of the overview: {}", shot.display());

    // The Content-Security-Policy is on and enforced (the charts above drew
    // under it): an inline script injected now is refused, and nothing the
    // page does itself (refreshes, redraws) is, as the violations show.
    let inline_ran = client
        .execute(
            "window.__violations = [];
             document.addEventListener('securitypolicyviolation',
               (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
             window.__inlineRan = false;
             const probe = document.createElement('script');
             probe.textContent = 'window.__inlineRan = true;';
             document.head.appendChild(probe);
             return window.__inlineRan;",
            vec![],
        )
        .await
        .expect("the probe ran");
    assert_eq!(
        inline_ran,
        serde_json::Value::Bool(false),
        "an injected inline script ran: the page has no Content-Security-Policy"
    );

    // The overview refreshes itself: a job published now shows within a refresh.
    dashboard_state::publish_notification(&server, "note-live");
    let seen = eventually_text(
        client,
        "#queue-notification td[data-field=\"undelivered\"]",
        "3",
        Duration::from_secs(12),
    )
    .await;
    assert_eq!(seen, "3", "the overview refreshed");
    let violations = client
        .execute("return window.__violations;", vec![])
        .await
        .expect("the violations");
    let violations: Vec<String> = serde_json::from_value(violations).expect("a list");
    assert!(
        violations.len() == 1 && violations[0].ends_with(" inline"),
        "only the probe is refused, not the page's own scripts, styles or fetches: {violations:?}"
    );

    // Not signed in: no replay button, and a forged POST is refused, changing nothing.
    client
        .goto(&format!("{}/queues/ocr/partitions/3", served.url))
        .await
        .unwrap();
    assert!(
        client
            .find_all(Locator::Css("a.replay"))
            .await
            .unwrap()
            .is_empty(),
        "no replay button without the token"
    );
    let before = keyspace(&server);
    let form = format!("id={}&partition=3", built.dead_id);
    assert_eq!(forged_post(client, "/queues/ocr/replay", &form).await, 401);

    // Signed in: a POST without the session's CSRF token is still refused.
    client.goto(&format!("{}/login", served.url)).await.unwrap();
    client
        .find(Locator::Id("who"))
        .await
        .unwrap()
        .send_keys("alice")
        .await
        .unwrap();
    client
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    client
        .find(Locator::Id("sign-in-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(client, "#operator").await, "alice");
    assert_eq!(forged_post(client, "/queues/ocr/replay", &form).await, 403);
    assert_eq!(
        keyspace(&server),
        before,
        "the refused POSTs changed nothing"
    );

    // Replay through the page: the button, the dry run, the confirmation.
    let ready_before = xlen(&server, OCR_READY);
    client
        .goto(&format!("{}/queues/ocr/partitions/3", served.url))
        .await
        .unwrap();
    // Opened, each dead letter shows its fields: the screenshot shows them.
    client
        .execute(
            "document.querySelectorAll('details.dead-letter').forEach((d) => { d.open = true; });",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot("dashboard-partition").await;
    client
        .find(Locator::Css("a.replay"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let summary = text(client, "#summary").await;
    browser.screenshot("dashboard-confirm").await;
    assert!(summary.contains("1 job(s) will be appended"), "{summary}");
    assert!(text(client, "#plan").await.contains("job-0"));
    assert_eq!(
        xlen(&server, OCR_READY),
        ready_before,
        "the confirmation page wrote nothing"
    );
    client
        .find(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let flash = text(client, "#flash").await;
    assert!(
        flash.contains("replayed 1: job job-0 as ready entry"),
        "{flash}"
    );
    assert!(text(client, &format!("#dead-{} .replayed", built.dead_id))
        .await
        .starts_with("replayed as "));
    assert_eq!(
        xlen(&server, OCR_READY),
        ready_before + 1,
        "the job is back on the ready stream"
    );
    let appended: Vec<redis::Value> = redis::cmd("XREVRANGE")
        .arg(OCR_READY)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut server.connection())
        .unwrap();
    assert!(
        format!("{appended:?}").contains("job-0"),
        "the appended entry is job-0: {appended:?}"
    );

    // The overview shows it, and the action log says who did it.
    client.goto(&format!("{}/", served.url)).await.unwrap();
    assert_eq!(overview_cell(client, "ocr", "undelivered").await, "3");
    client
        .goto(&format!("{}/actions", served.url))
        .await
        .unwrap();
    let log = text(client, "#action-log").await;
    assert!(
        log.contains("alice") && log.contains("replay") && log.contains(&built.dead_id),
        "{log}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_follows_a_run_in_flight_from_the_overview_to_its_jobs_in_chromium() {
    let server = RedisServer::start();
    apply(&server);
    // Run doc-browser waits at document-ready for its thumbnail; its page is done.
    open_run(&server, "doc-browser");
    let served = Served::start(EXAMPLE, &server, None);
    let browser = Browser::start().await;
    let client = &browser.client;

    // The overview's row of the join, then the pipelines' page from the nav.
    client.goto(&format!("{}/", served.url)).await.unwrap();
    assert_eq!(
        text(
            client,
            "#join-documents-document-ready td[data-field=\"in-flight\"]"
        )
        .await,
        "1"
    );
    client
        .find(Locator::Css("header nav a[href$=\"/pipelines\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        text(
            client,
            "#join-documents-document-ready strong[data-field=\"in-flight\"]"
        )
        .await,
        "1"
    );
    assert_eq!(
        text(
            client,
            "#runs-documents-document-ready tr[data-run=\"doc-browser\"] td[data-field=\"waiting\"]"
        )
        .await,
        "1"
    );
    browser.screenshot("dashboard-pipelines").await;

    // The run's link: open at the join, its jobs by stage.
    client
        .find(Locator::Css("#runs-documents-document-ready a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(client, "#run-id").await, "doc-browser");
    assert_eq!(
        text(client, "#join-document-ready [data-field=\"state\"]").await,
        "open"
    );
    assert_eq!(
        text(
            client,
            "tbody[data-stage=\"index\"] td[data-field=\"result\"]"
        )
        .await,
        "s3://pages/doc-browser/0"
    );
    assert_eq!(
        text(
            client,
            "tbody[data-stage=\"thumbnail\"] td[data-field=\"state\"]"
        )
        .await,
        "waiting"
    );
    assert_eq!(
        text(client, "tbody[data-stage=\"ocr\"] td[data-field=\"state\"]").await,
        "ended"
    );
    browser.screenshot("dashboard-run").await;

    // The lookup form finds a run by its ID (how an ended one is reached).
    client
        .goto(&format!("{}/pipelines/documents", served.url))
        .await
        .unwrap();
    client
        .find(Locator::Css("form.lookup input[name=\"id\"]"))
        .await
        .unwrap()
        .send_keys("doc-browser")
        .await
        .unwrap();
    client
        .find(Locator::Css("form.lookup button[type=\"submit\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(client, "#run-id").await, "doc-browser");
    let url = client.current_url().await.unwrap();
    assert!(
        url.path()
            .ends_with("/pipelines/documents/runs/doc-browser"),
        "{url}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_partitions_by_four_queues_render_correctly_and_are_timed() {
    // The example's four queues, each with 64 partitions.
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(EXAMPLE).unwrap();
    let wide: String = spec
        .lines()
        .map(
            |line| match line.trim_start().strip_prefix("partitions: ") {
                Some(_) => format!(
                    "{}partitions: 64",
                    &line[..line.len() - line.trim_start().len()]
                ),
                None => line.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.path().join("queues.yaml");
    std::fs::write(&path, wide).unwrap();
    let path = path.to_str().unwrap();

    let server = RedisServer::start();
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["apply", path, "--redis", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // One job on each of ocr's 64 partitions, so every row has a number to check.
    let mut conn = server.connection();
    for p in 0..64 {
        let _: String = redis::cmd("XADD")
            .arg(format!("work:{{ocr-{p:02}}}:ready"))
            .arg("*")
            .arg(&[("job_id", format!("wide-{p}"))])
            .query(&mut conn)
            .unwrap();
    }
    let served = Served::start(path, &server, None);
    let browser = Browser::start().await;
    let client = &browser.client;

    // Twice: the first load warms the browser's cache of the assets.
    client.goto(&format!("{}/", served.url)).await.unwrap();
    client.goto(&format!("{}/", served.url)).await.unwrap();
    let overview_ms = load_ms(client).await;
    assert_eq!(overview_cell(client, "ocr", "partitions").await, "64");
    assert_eq!(overview_cell(client, "ocr", "undelivered").await, "64");
    for queue in ["notification", "export", "reconciliation"] {
        assert_eq!(
            overview_cell(client, queue, "partitions").await,
            "64",
            "{queue}"
        );
        assert_eq!(
            overview_cell(client, queue, "undelivered").await,
            "0",
            "{queue}"
        );
    }
    browser.screenshot("dashboard-overview-64x4").await;

    client
        .goto(&format!("{}/queues/ocr", served.url))
        .await
        .unwrap();
    let queue_ms = load_ms(client).await;
    let rows = client
        .find_all(Locator::Css("#partitions tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 64);
    for p in [0, 31, 63] {
        assert_eq!(
            text(
                client,
                &format!("#partition-{p} td[data-field=\"undelivered\"]")
            )
            .await,
            "1"
        );
    }

    let report = format!(
        "64 partitions x 4 queues: overview loaded in {overview_ms:.0} ms, queue page (64 rows) in {queue_ms:.0} ms (navigation start to load event, headless Chromium, debug build)\n"
    );
    print!("{report}");
    std::fs::create_dir_all(artefact_dir()).unwrap();
    std::fs::write(artefact_dir().join("dashboard-render-64x4.txt"), report).unwrap();
    browser.close().await;
}
