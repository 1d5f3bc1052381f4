//! `schedules:` in the spec: what `check` refuses (each at file:line:col with a fix, a bad cron field at its own column), what the model holds, and `queuegen schedules` listing the next ticks.

use std::process::Command;

use queuegen::spec::cadence::Cadence;
use queuegen::spec::check_str;
use queuegen::spec::model::Missed;

/// A valid spec with two queues, then `schedules:` as given.
fn spec(schedules: &str) -> String {
    format!(
        "\
version: 1
service: shop
envelopes:
  OrderPlaced:
    schema: 1
    fields:
      order_ref: {{ type: string, max_bytes: 64 }}
      pages: {{ type: u32 }}
      mode: {{ type: enum, values: [fast, thorough], default: fast }}
      note: {{ type: string, max_bytes: 8, optional: true }}
queues:
  orders:
    envelope: OrderPlaced
    dead_letter: {{ owner: shop-oncall }}
schedules:
{schedules}"
    )
}

/// `(line, column, path, message, help)` of every error.
fn errors(source: &str) -> Vec<(usize, usize, String, String, String)> {
    let checked = check_str(source, "queues.yaml");
    checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| {
            (
                d.line,
                d.column,
                d.path.clone(),
                d.message.clone(),
                d.help.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn only_error(schedules: &str) -> (usize, usize, String, String, String) {
    let found = errors(&spec(schedules));
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

#[test]
fn a_valid_schedule_fills_its_defaults() {
    let checked = check_str(
        &spec("  nightly:\n    queue: orders\n    cron: \"0 2 * * 1-5\"\n    timezone: Europe/Berlin\n    body: { pages: 3, order_ref: nightly }\n  often:\n    queue: orders\n    every: 30s\n    tenant: ops\n    missed: run_once\n    body: { order_ref: o, pages: 0, mode: thorough }\n"),
        "queues.yaml",
    );
    let spec = checked
        .spec
        .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics));
    let nightly = &spec.schedules[0];
    assert_eq!(
        nightly.cadence,
        Cadence::Cron {
            expression: "0 2 * * 1-5".into(),
            timezone: "Europe/Berlin".into()
        }
    );
    assert_eq!(nightly.tenant, "shop", "the service name by default");
    assert_eq!(nightly.missed, Missed::Skip);
    assert_eq!(nightly.grace, std::time::Duration::from_secs(60));
    // In the envelope's field order, whatever order the spec wrote.
    assert_eq!(
        nightly.body,
        [
            ("order_ref".to_owned(), "nightly".to_owned()),
            ("pages".to_owned(), "3".to_owned())
        ]
    );
    let often = &spec.schedules[1];
    assert_eq!(
        often.cadence,
        Cadence::Every(std::time::Duration::from_secs(30))
    );
    assert_eq!(
        often.grace,
        std::time::Duration::from_secs(30),
        "min(every, 1m)"
    );
    assert_eq!(
        (often.tenant.as_str(), often.missed),
        ("ops", Missed::RunOnce)
    );
}

#[test]
fn an_invalid_cron_field_is_reported_at_its_column() {
    // Line 18: `    cron: "0 25 * * *"`: the hour field `25` is at column 14.
    let (line, column, path, message, help) =
        only_error("  nightly:\n    queue: orders\n    cron: \"0 25 * * *\"\n    body: { order_ref: n, pages: 1 }\n");
    assert_eq!((line, column), (18, 14), "{message}");
    assert_eq!(path, "schedules.nightly.cron");
    assert!(
        message.starts_with("the hour field `25` is not valid"),
        "{message}"
    );
    assert!(help.contains("hour (0-23)"), "{help}");
    // Unquoted, the day-of-week field of a flow mapping.
    let (line, column, _, message, _) = only_error(
        "  nightly: { queue: orders, cron: 0 2 * * funday, body: { order_ref: n, pages: 1 } }\n",
    );
    assert_eq!((line, column), (16, 43), "{message}");
    assert!(message.contains("day of week field `funday`"), "{message}");
    // A wrong number of fields is reported at the value.
    let (line, column, _, message, help) =
        only_error("  nightly:\n    queue: orders\n    cron: '*/5 * * *'\n    body: { order_ref: n, pages: 1 }\n");
    assert_eq!((line, column), (18, 12), "{message}");
    assert!(
        message.contains("5 fields") && message.contains("found 4"),
        "{message}"
    );
    assert!(
        help.contains("minute hour day-of-month month day-of-week"),
        "{help}"
    );
}

#[test]
fn a_missing_queue_is_refused_with_a_suggestion() {
    let (line, column, path, message, help) = only_error(
        "  nightly:\n    queue: order\n    every: 1h\n    body: { order_ref: n, pages: 1 }\n",
    );
    assert_eq!(
        (line, column, path.as_str()),
        (17, 12, "schedules.nightly.queue")
    );
    assert_eq!(message, "no queue named `order`");
    assert!(help.starts_with("did you mean `orders`?"), "{help}");
}

#[test]
fn body_fields_are_checked_against_the_envelope() {
    let found = errors(&spec(
        "  nightly:\n    queue: orders\n    every: 1h\n    body: { order_rf: n, mode: slow, note: far-too-long, job_id: x }\n",
    ));
    let got: Vec<(usize, usize, &str, &str)> = found
        .iter()
        .map(|(l, c, p, m, _)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                19,
                11,
                "schedules.nightly.body",
                "the body lacks `order_ref`, a required field of envelope OrderPlaced (string)"
            ),
            (
                19,
                11,
                "schedules.nightly.body",
                "the body lacks `pages`, a required field of envelope OrderPlaced (u32)"
            ),
            (
                19,
                13,
                "schedules.nightly.body.order_rf",
                "envelope OrderPlaced has no field `order_rf`"
            ),
            (
                19,
                32,
                "schedules.nightly.body.mode",
                "value `slow` is not one of the enum's values"
            ),
            (
                19,
                44,
                "schedules.nightly.body.note",
                "value is 12 bytes, more than the field's max_bytes of 8"
            ),
            (
                19,
                58,
                "schedules.nightly.body.job_id",
                "`job_id` is a header field, which the schedule sets"
            ),
        ],
        "{found:#?}"
    );
    assert_eq!(found[2].4, "did you mean `order_ref`?");
    assert_eq!(found[1].4, "add `pages: 0` to `body`");
    // A value of the wrong type.
    let (line, column, _, message, help) = only_error(
        "  nightly:\n    queue: orders\n    every: 1h\n    body: { order_ref: n, pages: many }\n",
    );
    assert_eq!((line, column), (19, 34));
    assert_eq!(message, "value `many` is not a u32 (0 to 4294967295)");
    assert!(
        help.starts_with("give a value of the field's type"),
        "{help}"
    );
}

#[test]
fn a_body_too_large_for_the_payload_bound_is_refused() {
    let long = "x".repeat(2000);
    let source = spec(
        "  nightly:\n    queue: orders\n    every: 1h\n    body: { order_ref: n, pages: 1, note: a }\n  big:\n    queue: orders\n    every: 1h\n    body: { order_ref: n, pages: 1 }\n",
    )
    .replace("      note: { type: string, max_bytes: 8, optional: true }", "      note: { type: string, optional: true }")
    .replace("    dead_letter: { owner: shop-oncall }", "    dead_letter: { owner: shop-oncall }\n    payload: { max_bytes: 1024 }")
    .replace("note: a }", &format!("note: {long} }}"));
    let found = errors(&source);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (_, _, path, message, _) = &found[0];
    assert_eq!(path, "schedules.nightly.body");
    assert!(
        message.contains("more than queue `orders`'s payload.max_bytes of 1024"),
        "{message}"
    );
}

#[test]
fn cron_and_every_and_timezone_rules() {
    let body = "    body: { order_ref: n, pages: 1 }\n";
    let (line, column, _, message, _) = only_error(&format!(
        "  nightly:\n    queue: orders\n    cron: \"0 2 * * *\"\n    every: 1h\n{body}"
    ));
    assert_eq!((line, column), (19, 12));
    assert_eq!(message, "a schedule has either `cron` or `every`, not both");
    let (line, column, _, message, help) =
        only_error(&format!("  nightly:\n    queue: orders\n{body}"));
    assert_eq!((line, column), (16, 3));
    assert_eq!(
        message,
        "missing `cron` or `every`: a schedule needs one of them"
    );
    assert!(help.contains("every: 10m"), "{help}");
    let (line, column, _, message, _) = only_error(&format!(
        "  nightly:\n    queue: orders\n    every: 1h\n    timezone: UTC\n{body}"
    ));
    assert_eq!((line, column), (19, 15));
    assert_eq!(message, "`timezone` only applies to `cron`");
    let (line, column, _, message, help) = only_error(&format!(
        "  nightly:\n    queue: orders\n    cron: \"0 2 * * *\"\n    timezone: Europe/Berln\n{body}"
    ));
    assert_eq!((line, column), (19, 15));
    assert_eq!(message, "`Europe/Berln` is not an IANA time zone name");
    assert_eq!(help, "did you mean `Europe/Berlin`?");
    let (_, _, path, message, _) = only_error(&format!(
        "  nightly:\n    queue: orders\n    every: 1h\n    missed: once\n{body}"
    ));
    assert_eq!(path, "schedules.nightly.missed");
    assert!(
        message.contains("unknown missed policy `once`"),
        "{message}"
    );
    let (_, _, _, message, help) = only_error(&format!(
        "  nightly:\n    queue: orders\n    every: 1h\n    evry: 1h\n{body}"
    ));
    assert_eq!(message, "unknown key");
    assert_eq!(help, "did you mean `every`?");
}

#[test]
fn queuegen_schedules_lists_the_next_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queues.yaml");
    std::fs::write(
        &path,
        spec("  nightly:\n    queue: orders\n    cron: \"30 2 * * *\"\n    timezone: Europe/Berlin\n    body: { order_ref: n, pages: 1 }\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["schedules"])
        .arg(&path)
        .args(["--json", "--count", "3", "--from", "2026-03-28T00:00:00Z"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ticks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: Vec<(&str, &str, &str)> = ticks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tick"].as_str().unwrap(),
                t["local"].as_str().unwrap(),
                t["job_id"].as_str().unwrap(),
            )
        })
        .collect();
    // The spring-forward night: 02:30 does not exist on 2026-03-29 and the
    // tick runs at 03:00 CEST, once.
    assert_eq!(
        got,
        [
            (
                "2026-03-28T01:30:00.000Z",
                "2026-03-28 02:30:00 CET",
                "nightly@2026-03-28T01:30:00.000Z"
            ),
            (
                "2026-03-29T01:00:00.000Z",
                "2026-03-29 03:00:00 CEST",
                "nightly@2026-03-29T01:00:00.000Z"
            ),
            (
                "2026-03-30T00:30:00.000Z",
                "2026-03-30 02:30:00 CEST",
                "nightly@2026-03-30T00:30:00.000Z"
            ),
        ]
    );
    assert_eq!(ticks[0]["partition"], 0, "one partition");
    let human = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["schedules"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains(
            "nightly: cron \"30 2 * * *\" in Europe/Berlin -> orders, missed: skip, grace 1m"
        ),
        "{text}"
    );
    assert!(text.contains("JOB_ID"), "{text}");
}

/// `queuegen schedules --published` against a real server: the last ticks
/// up to `--from`, each with the stream ID its marker holds (the one tick
/// published here) or none, and the schedule's hint; as the monitor user,
/// which may only read.
#[test]
fn queuegen_schedules_published_reads_each_ticks_marker_and_the_hint() {
    use queuegen_runtime::Redis;
    use queuegen_tests::queues::jobs;
    use queuegen_tests::redis_server::RedisServer;

    let tests_spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/queues.yaml");
    let server = RedisServer::start();
    let apply = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["apply", tests_spec, "--redis", &server.url()])
        .output()
        .unwrap();
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stderr)
    );

    // One tick published (as the worker's scheduler does: the tick, then the
    // hint), two seconds before the instant asked about.
    let tick_ms = 1_780_000_000_000;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let published = runtime.block_on(async {
        let redis = Redis::connect(server.url()).await.unwrap();
        let moved = jobs::TICK
            .publish(&mut redis.shared(), tick_ms)
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(jobs::TICK.hint_key())
            .arg(tick_ms)
            .query_async(&mut redis.shared())
            .await
            .unwrap();
        moved.id
    });
    let entries = {
        let ready = jobs::TICK
            .queue
            .ready_key(jobs::TICK.partition(tick_ms).default_stream());
        runtime.block_on(async {
            let redis = Redis::connect(server.url()).await.unwrap();
            queuegen_tests::support::stream_entries(&mut redis.shared(), &ready).await
        })
    };
    let job_id = queuegen_runtime::schedule::job_id("tick", tick_ms);
    let in_stream = entries
        .iter()
        .find(|(_, fields)| fields.get("job_id") == Some(&job_id))
        .map(|(id, _)| id.clone())
        .expect("the tick's job is in its ready stream");
    assert_eq!(in_stream, published);

    let rules = queuegen_runtime::roles::Role::Monitor.acl_rules(
        "qgtest",
        &[queuegen::gen::functions::library_name("queuegen-tests")],
        queuegen_tests::acl::server_commands(),
    );
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let monitor = queuegen_tests::AclUser::with_rules("watcher", "watchpass", &rules);
    server.add_user(&monitor);
    let from = queuegen_runtime::schedule::format_tick(tick_ms + 2_000);
    let run = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_queuegen"));
        command
            .args([
                "schedules",
                tests_spec,
                "--published",
                "--count",
                "4",
                "--from",
                &from,
            ])
            .args(extra)
            .env("REDIS_URL", server.url_as(&monitor))
            .env("NO_COLOR", "1");
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let report: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    let schedule = &report[0];
    assert_eq!(schedule["schedule"], "tick");
    assert_eq!(schedule["last_published_ms"], tick_ms);
    let ticks: Vec<(u64, Option<&str>)> = schedule["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tick_ms"].as_u64().unwrap(), t["published_as"].as_str()))
        .collect();
    assert_eq!(
        ticks,
        [
            (tick_ms - 1_000, None),
            (tick_ms, Some(published.as_str())),
            (tick_ms + 1_000, None),
            (tick_ms + 2_000, None),
        ],
        "the last four ticks up to --from, oldest first"
    );
    let human = run(&[]);
    assert!(human.contains(&published), "{human}");
    assert!(human.contains("no marker"), "{human}");
    assert!(
        human.contains(&format!(
            "last tick the workers published (qgtest:schedule:tick:last): {}",
            queuegen_runtime::schedule::format_tick(tick_ms)
        )),
        "{human}"
    );
}
