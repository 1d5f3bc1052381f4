//! `prometheus/rules.yml` and `RUNBOOK.md` of the committed specs: `promtool` checks the rules and runs alert tests built from the specs' thresholds, and every `runbook_url` lands on a runbook heading.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use queuegen::spec::model::{Queue, Spec, TrimMode};
use serde_yaml_ng::Value;

const RULES: &str = "deploy/prometheus/rules.yml";
const RUNBOOK: &str = "deploy/RUNBOOK.md";

fn committed_specs() -> [PathBuf; 2] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        root.join("examples/docs-pipeline/queues.yaml"),
        root.join("tests/queues.yaml"),
    ]
}

fn example_spec() -> PathBuf {
    committed_specs()[0].clone()
}

/// A scratch directory with a copy of `spec` as `queues.yaml` and what
/// `queuegen generate queues.yaml --deploy-out deploy` wrote beside it.
fn generated(spec: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(spec, dir.path().join("queues.yaml")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["generate", "queues.yaml", "--deploy-out", "deploy"])
        .current_dir(dir.path())
        .output()
        .expect("queuegen runs");
    assert!(out.status.success(), "{out:?}");
    dir
}

fn model(spec: &Path) -> Spec {
    let checked = queuegen::spec::check_file(spec).unwrap();
    checked
        .spec
        .unwrap_or_else(|| panic!("{} is valid: {:?}", spec.display(), checked.diagnostics))
}

/// `promtool` from PATH: the Debian package `prometheus`, which scripts/test installs.
fn promtool(args: &[&str], cwd: &Path) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("promtool is on PATH (apt-get install prometheus; scripts/test installs it)")
}

/// Every rule of a rules file, as YAML mappings.
fn rules(dir: &Path) -> Vec<Value> {
    let text = fs::read_to_string(dir.join(RULES)).unwrap();
    let file: Value = serde_yaml_ng::from_str(&text).unwrap();
    file["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_sequence().expect("rules").clone())
        .collect()
}

fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a string: {value:?}"))
}

#[test]
fn promtool_checks_the_rules_of_both_committed_specs() {
    for spec in committed_specs() {
        let dir = generated(&spec);
        let count = rules(dir.path()).len();
        assert!(count > 0, "{}", spec.display());
        let out = promtool(&["check", "rules", RULES], dir.path());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {stdout}{}",
            spec.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("SUCCESS: {count} rules found")),
            "{stdout}"
        );
    }
}

#[test]
fn rules_aggregate_to_bounded_labels_and_name_queue_and_partition() {
    let bounded = [
        "queue",
        "partition",
        "group",
        "outcome",
        "stream",
        "library",
        "namespace",
        "cronjob",
        // A pipeline's and its joins' names, from the spec.
        "pipeline",
        "join",
    ];
    for spec in committed_specs() {
        let dir = generated(&spec);
        for rule in rules(dir.path()) {
            let alert = text(&rule["alert"]);
            let expr = text(&rule["expr"]);
            let mut groupings = expr.split("by (").skip(1).peekable();
            assert!(groupings.peek().is_some(), "{alert}: {expr}");
            for grouping in groupings {
                let labels = grouping.split(')').next().unwrap();
                for label in labels.split(',').map(str::trim) {
                    assert!(bounded.contains(&label), "{alert}: label {label} in {expr}");
                }
            }
            assert!(
                ["critical", "warning"].contains(&text(&rule["labels"]["severity"])),
                "{alert}"
            );
            assert!(!text(&rule["annotations"]["description"]).is_empty());
            let summary = text(&rule["annotations"]["summary"]);
            // The CronJob's trim rule reads kube-state-metrics, which knows
            // no queue or partition: its summary names the queue itself.
            if rule["labels"].get("queue").is_some() && expr.contains("by (queue, partition") {
                assert!(
                    summary.contains("{{ $labels.queue }}")
                        && summary.contains("{{ $labels.partition }}"),
                    "{alert}: {summary}"
                );
            }
        }
    }
}

#[test]
fn every_runbook_url_anchor_exists_in_the_runbook() {
    for spec in committed_specs() {
        let dir = generated(&spec);
        let runbook = fs::read_to_string(dir.path().join(RUNBOOK)).unwrap();
        let anchors = github_anchors(&runbook);
        let urls: Vec<String> = rules(dir.path())
            .iter()
            .map(|rule| text(&rule["annotations"]["runbook_url"]).to_owned())
            .collect();
        assert!(!urls.is_empty());
        for url in &urls {
            let anchor = url
                .strip_prefix("RUNBOOK.md#")
                .unwrap_or_else(|| panic!("{url} points into RUNBOOK.md"));
            assert!(
                anchors.contains(anchor),
                "{}: {url} has no heading; anchors: {anchors:?}",
                spec.display()
            );
        }
        let distinct: BTreeSet<&String> = urls.iter().collect();
        assert_eq!(distinct.len(), urls.len(), "one section per rule");
        // The runbook's own links between sections resolve too.
        for link in runbook.split("](#").skip(1) {
            let anchor = link.split(')').next().unwrap();
            assert!(anchors.contains(anchor), "link #{anchor} has no heading");
        }
    }
}

/// The anchors GitHub gives the headings of `markdown` (github-slugger:
/// lowercase, drop what is not a letter, digit, `_`, `-` or space, spaces
/// to `-`), fenced code skipped. GitHub would suffix a repeated one with
/// `-1`, which no rule expects: a repeat fails the test.
fn github_anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if fenced || !heading.starts_with(' ') {
            continue;
        }
        let anchor: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        assert!(
            anchors.insert(anchor.clone()),
            "two headings share #{anchor}"
        );
    }
    anchors
}

/// One alert that promtool must see firing, and with which annotations.
struct Expected {
    labels: Vec<(String, String)>,
    /// `$value` as the annotation templates print it.
    value: String,
    /// `$value | humanizeDuration`.
    value_duration: String,
}

/// The alert tests of one queue's rule: `series` is the input, each eval
/// time with the alerts that must be firing then (none: silent).
struct Case<'a> {
    alert: &'a str,
    series: Vec<(String, String)>,
    evals: Vec<(u64, Vec<Expected>)>,
}

/// The generated rule named `alert` whose `queue` label is `queue`.
fn rule<'a>(rules: &'a [Value], alert: &str, queue: &str) -> &'a Value {
    rules
        .iter()
        .find(|r| text(&r["alert"]) == alert && r["labels"]["queue"].as_str() == Some(queue))
        .unwrap_or_else(|| panic!("no rule {alert} for queue {queue}"))
}

/// The rule's annotations as Prometheus renders them for `expected`, so
/// that promtool compares its own rendering with this one.
fn rendered_annotations(rule: &Value, expected: &Expected) -> BTreeMap<String, String> {
    let labels: BTreeMap<&str, &str> = expected
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut out = BTreeMap::new();
    for (key, template) in rule["annotations"].as_mapping().unwrap() {
        let mut text =
            text(template).replace("{{ $value | humanizeDuration }}", &expected.value_duration);
        text = text.replace("{{ $value }}", &expected.value);
        while let Some(start) = text.find("{{ $labels.") {
            let end = start + text[start..].find(" }}").expect("closed template");
            let name = &text[start + "{{ $labels.".len()..end];
            let value = labels.get(name).unwrap_or_else(|| panic!("label {name}"));
            text.replace_range(start..end + 3, value);
        }
        assert!(
            !text.contains("{{"),
            "a template this test cannot render: {text}"
        );
        out.insert(text_key(key), text);
    }
    out
}

fn text_key(key: &Value) -> String {
    text(key).to_owned()
}

/// Prometheus's `humanizeDuration` for whole seconds of at least one minute.
fn humanize_duration(seconds: u64) -> String {
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    assert!(seconds >= 60, "only minutes and above are needed here");
    if days > 0 {
        format!("{days}d {hours}h {minutes}m {secs}s")
    } else if hours > 0 {
        format!("{hours}h {minutes}m {secs}s")
    } else {
        format!("{minutes}m {secs}s")
    }
}

fn series(metric: &str, labels: &[(&str, &str)], values: String) -> (String, String) {
    let mut text = format!("{metric}{{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        write!(text, "{k}=\"{v}\"").unwrap();
    }
    // As a scrape adds them: the alert must fold them away.
    text.push_str(",job=\"queuegen-monitor\",instance=\"monitor:9464\"}");
    (text, values)
}

/// Alert labels: the rule's static labels, then the series' bounded ones.
fn labels_of(rule: &Value, series: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = rule["labels"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| (text_key(k), text(v).to_owned()))
        .collect();
    for (k, v) in series {
        if !labels.iter().any(|(name, _)| name == k) {
            labels.push((k.to_string(), v.to_string()));
        }
    }
    labels
}

/// An age gauge of `queue` that reaches the threshold at minute 10 and
/// passes it at 11 (fires), one partition parked exactly at the threshold
/// and a queue of another service far above it (both never fire).
fn age_case<'a>(
    rules: &[Value],
    queue: &Queue,
    alert: &'a str,
    metric: &str,
    threshold: u64,
) -> Case<'a> {
    let rule = rule(rules, alert, &queue.name);
    let climbing = [
        ("queue", queue.name.as_str()),
        ("partition", "0"),
        ("group", queue.group.name.as_str()),
    ];
    let parked = [
        ("queue", queue.name.as_str()),
        ("partition", "1"),
        ("group", queue.group.name.as_str()),
    ];
    let foreign = [
        ("queue", "billing"),
        ("partition", "0"),
        ("group", "billing-workers"),
    ];
    assert_eq!(threshold % 10, 0, "thresholds in whole tens of seconds");
    let step = threshold / 10;
    let above = threshold + step;
    Case {
        alert,
        series: vec![
            series(metric, &climbing, format!("0+{step}x20")),
            series(metric, &parked, format!("{threshold}x20")),
            series(metric, &foreign, format!("{}x20", threshold * 10)),
        ],
        evals: vec![
            (5, vec![]),
            (10, vec![]),
            (
                11,
                vec![Expected {
                    labels: labels_of(rule, &climbing),
                    value: above.to_string(),
                    value_duration: humanize_duration(above),
                }],
            ),
        ],
    }
}

/// A dead-letter count of `queue` that reaches the threshold at minute
/// `threshold` (fires: at least that many), one partition parked one below
/// and another service's queue far above (both never fire).
fn dead_letter_case<'a>(
    rules: &[Value],
    queue: &Queue,
    alert: &'a str,
    threshold: u64,
) -> Case<'a> {
    let rule = rule(rules, alert, &queue.name);
    let metric = "queuegen_queue_dead_letters";
    let rising = [("queue", queue.name.as_str()), ("partition", "0")];
    let parked = [("queue", queue.name.as_str()), ("partition", "1")];
    let foreign = [("queue", "billing"), ("partition", "0")];
    let minutes = threshold + 5;
    Case {
        alert,
        series: vec![
            series(metric, &rising, format!("0+1x{minutes}")),
            series(metric, &parked, format!("{}x{minutes}", threshold - 1)),
            series(metric, &foreign, format!("{}x{minutes}", threshold + 100)),
        ],
        evals: vec![
            (threshold - 1, vec![]),
            (
                threshold,
                vec![Expected {
                    labels: labels_of(rule, &rising),
                    value: threshold.to_string(),
                    value_duration: String::new(),
                }],
            ),
        ],
    }
}

/// A promtool unit-test file (one test group per case) for `rules.yml`.
fn promtool_tests(rules: &[Value], cases: &[Case]) -> String {
    let mut out = String::from("rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n");
    for case in cases {
        out.push_str("  - interval: 1m\n    input_series:\n");
        for (series, values) in &case.series {
            writeln!(
                out,
                "      - series: '{series}'\n        values: '{values}'"
            )
            .unwrap();
        }
        out.push_str("    alert_rule_test:\n");
        for (minute, expected) in &case.evals {
            writeln!(
                out,
                "      - eval_time: {minute}m\n        alertname: {}",
                case.alert
            )
            .unwrap();
            if expected.is_empty() {
                out.push_str("        exp_alerts: []\n");
                continue;
            }
            out.push_str("        exp_alerts:\n");
            for alert in expected {
                let queue = &alert.labels.iter().find(|(k, _)| k == "queue").unwrap().1;
                let rule = rule(rules, case.alert, queue);
                out.push_str("          - exp_labels:\n");
                for (k, v) in &alert.labels {
                    writeln!(out, "              {k}: {}", json(v)).unwrap();
                }
                out.push_str("            exp_annotations:\n");
                for (k, v) in rendered_annotations(rule, alert) {
                    writeln!(out, "              {k}: {}", json(&v)).unwrap();
                }
            }
        }
    }
    out
}

/// A double-quoted YAML scalar.
fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn seconds(duration: std::time::Duration) -> u64 {
    assert_eq!(duration.subsec_nanos(), 0, "whole seconds");
    duration.as_secs()
}

/// Runs `cases` with `promtool test rules` next to the generated rules.
fn run_promtool_tests(dir: &Path, rules: &[Value], cases: &[Case]) {
    assert!(!cases.is_empty(), "the example spec sets these alerts");
    let tests = promtool_tests(rules, cases);
    let path = dir.join("deploy/prometheus/alert_tests.yml");
    fs::write(&path, &tests).unwrap();
    let out = promtool(
        &["test", "rules", "alert_tests.yml"],
        &dir.join("deploy/prometheus"),
    );
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{}{}\n--- alert_tests.yml\n{tests}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn age_alerts_fire_only_past_the_spec_thresholds() {
    let spec = model(&example_spec());
    let dir = generated(&example_spec());
    let rules = rules(dir.path());
    let mut cases = Vec::new();
    for queue in &spec.queues {
        if let Some(threshold) = queue.alerts.oldest_pending_age {
            cases.push(age_case(
                &rules,
                queue,
                "QueuegenOldestPendingAge",
                "queuegen_queue_oldest_pending_age_seconds",
                seconds(threshold),
            ));
        }
        if let Some(threshold) = queue.alerts.oldest_ready_age {
            cases.push(age_case(
                &rules,
                queue,
                "QueuegenOldestReadyAge",
                "queuegen_queue_oldest_ready_age_seconds",
                seconds(threshold),
            ));
        }
    }
    run_promtool_tests(dir.path(), &rules, &cases);
}

/// The example's join: its oldest run's wait climbing past the bound
/// the rule was generated with fires (once above it), one parked just
/// under it and another pipeline's far above never do.
#[test]
fn a_join_waiting_past_its_stages_settle_bound_fires() {
    let dir = generated(&example_spec());
    let rules = rules(dir.path());
    let rule = rule(&rules, "QueuegenJoinWaiting", "document-ready");
    let expr = text(&rule["expr"]);
    let threshold: u64 = expr
        .rsplit("> ")
        .next()
        .and_then(|bound| bound.trim().parse().ok())
        .unwrap_or_else(|| panic!("a whole-second bound in {expr}"));
    let metric = "queuegen_pipeline_join_oldest_wait_seconds";
    let climbing = [("pipeline", "documents"), ("join", "document-ready")];
    let other = [("pipeline", "billing"), ("join", "settle")];
    let step = threshold / 10 + 1;
    let case = Case {
        alert: "QueuegenJoinWaiting",
        series: vec![
            series(metric, &climbing, format!("0+{step}x20")),
            series(metric, &other, format!("{}x20", threshold * 10)),
        ],
        evals: vec![
            (5, vec![]),
            (
                10,
                vec![Expected {
                    labels: labels_of(rule, &climbing),
                    value: (step * 10).to_string(),
                    value_duration: humanize_duration(step * 10),
                }],
            ),
        ],
    };
    assert!(
        step * 9 <= threshold && step * 10 > threshold,
        "{step} {threshold}"
    );
    run_promtool_tests(dir.path(), &rules, &[case]);
}

#[test]
fn dead_letter_alerts_fire_only_at_the_spec_thresholds() {
    let spec = model(&example_spec());
    let dir = generated(&example_spec());
    let rules = rules(dir.path());
    let cases: Vec<Case> = spec
        .queues
        .iter()
        .filter_map(|queue| {
            let threshold = queue.alerts.dead_letters?;
            Some(dead_letter_case(
                &rules,
                queue,
                "QueuegenDeadLetters",
                threshold,
            ))
        })
        .collect();
    run_promtool_tests(dir.path(), &rules, &cases);
}

#[test]
fn a_queue_trimmed_by_cronjob_alerts_when_no_run_succeeded_for_two_windows() {
    let spec = model(&example_spec());
    let dir = generated(&example_spec());
    let rules = rules(dir.path());
    let queue = spec
        .queues
        .iter()
        .find(|queue| queue.retention.trim == TrimMode::CronJob)
        .expect("the example trims one queue by CronJob");
    let rule = rule(&rules, "QueuegenTrimAborted", &queue.name);
    let expr = text(&rule["expr"]);
    assert!(
        !expr.contains("queuegen_trim_passes_total"),
        "the CLI in the CronJob exports no trim metrics: {expr}"
    );
    // 15m runs: no success for two windows of max(15m, 5 runs) = 150m.
    let stuck_minutes = 150;
    let namespace = spec.kubernetes.namespace.as_str();
    let cronjob = format!("{}-trim-{}", spec.service, queue.name.replace('_', "-"));
    let last_success = [("namespace", namespace), ("cronjob", cronjob.as_str())];
    let other = [
        ("namespace", namespace),
        ("cronjob", "someone-elses-cronjob"),
    ];
    let minutes = stuck_minutes + 5;
    let case = Case {
        alert: "QueuegenTrimAborted",
        // The last success at time 0, never again; another CronJob as stale.
        series: vec![
            series(
                "kube_cronjob_status_last_successful_time",
                &last_success,
                format!("0x{minutes}"),
            ),
            series(
                "kube_cronjob_status_last_successful_time",
                &other,
                format!("0x{minutes}"),
            ),
        ],
        evals: vec![
            (stuck_minutes, vec![]),
            (
                stuck_minutes + 1,
                vec![Expected {
                    labels: labels_of(rule, &last_success),
                    value: ((stuck_minutes + 1) * 60).to_string(),
                    value_duration: String::new(),
                }],
            ),
        ],
    };
    run_promtool_tests(dir.path(), &rules, &[case]);
}
