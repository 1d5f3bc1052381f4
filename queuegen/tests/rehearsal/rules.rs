//! The generated alert rules against what the running processes export: every metric a rule's expression names must be in a scrape of the monitor or a worker (or be one the rule says another exporter provides), and, evaluated by Prometheus, every rule healthy and only the alerts the queues' state calls for active.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use queuegen::gen::deploy::prometheus::AlertKind;
use queuegen::spec::model::Spec;
use queuegen_runtime::Partition;
use queuegen_tests::exposition::Exposition;
use serde_yaml_ng::Value;

use super::prometheus::RuleState;

/// One alerting rule of `prometheus/rules.yml`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub alert: String,
    pub expr: String,
    pub description: String,
}

/// Every rule of every group.
pub fn read(path: &Path) -> Vec<Rule> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value =
        serde_yaml_ng::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let field = |rule: &Value, key: &str| rule[key].as_str().unwrap_or_default().to_owned();
    doc["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_sequence().cloned().unwrap_or_default())
        .map(|rule| Rule {
            alert: field(&rule, "alert"),
            expr: field(&rule, "expr"),
            description: field(&rule["annotations"], "description"),
        })
        .collect()
}

/// The sample names an exposition's families export (`x_total` of a
/// counter `x`, `x_bucket`, `x_sum` and `x_count` of a histogram), whether
/// or not a sample was written yet: a counter appears at its first event.
pub fn exported(scrapes: &[Exposition]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for scrape in scrapes {
        for family in &scrape.families {
            let suffixes: &[&str] = match family.kind.as_str() {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "summary" => &["", "_sum", "_count"],
                _ => &[""],
            };
            // The text format names a counter's family with its `_total`.
            names.insert(family.name.clone());
            for suffix in suffixes {
                names.insert(format!("{}{suffix}", family.name));
            }
        }
        names.extend(scrape.samples.iter().map(|sample| sample.name.clone()));
    }
    names
}

/// `alert: metric` for each metric a rule names that nothing exports.
pub fn unexported(rules: &[Rule], exported: &BTreeSet<String>) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in rules {
        for metric in metric_names(&rule.expr) {
            if !exported.contains(&metric) && !from_another_exporter(rule, &metric) {
                missing.push(format!("{}: {metric} (in {})", rule.alert, rule.expr));
            }
        }
    }
    missing
}

/// Whether the rule says which other exporter provides `metric`: the
/// generator writes "This rule reads kube-state-metrics (NAME)".
fn from_another_exporter(rule: &Rule, metric: &str) -> bool {
    rule.description
        .contains(&format!("reads kube-state-metrics ({metric})"))
}

/// `alertname{queue="…", partition="…"}`: an alert told apart from the
/// other alerts of its rule and from the same-named rules of other queues.
pub fn alert_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    let label = |key: &str| labels.get(key).map(String::as_str).unwrap_or("");
    format!(
        "{name}{{queue=\"{}\", partition=\"{}\"}}",
        label("queue"),
        label("partition")
    )
}

/// The alerts the queues' dead letters call for: the dead-letter alert of
/// each partition holding at least its queue's `alerts.dead_letters`
/// (a queue without the setting has no such rule).
pub fn expected_alerts(
    spec: &Spec,
    dead: &BTreeMap<String, Vec<(String, Partition)>>,
) -> BTreeSet<String> {
    let mut expected = BTreeSet::new();
    for queue in &spec.queues {
        let Some(threshold) = queue.alerts.dead_letters else {
            continue;
        };
        let mut held: BTreeMap<Partition, u64> = BTreeMap::new();
        for (_, partition) in dead.get(&queue.name).map(Vec::as_slice).unwrap_or_default() {
            *held.entry(*partition).or_default() += 1;
        }
        for (partition, count) in held {
            if count >= threshold {
                let labels = BTreeMap::from([
                    ("queue".to_owned(), queue.name.clone()),
                    ("partition".to_owned(), partition.to_string()),
                ]);
                expected.insert(alert_key(AlertKind::DeadLetters.alert_name(), &labels));
            }
        }
    }
    expected
}

/// `group / alert: health: error (query)` for each rule Prometheus could
/// not evaluate: a runtime error (e.g. many-to-many matching) or none yet.
pub fn unhealthy(rules: &[RuleState]) -> Vec<String> {
    rules
        .iter()
        .filter(|rule| rule.health != "ok" || !rule.last_error.is_empty())
        .map(|rule| {
            format!(
                "{} / {}: {}: {} ({})",
                rule.group, rule.name, rule.health, rule.last_error, rule.query
            )
        })
        .collect()
}

/// The pending or firing alerts, keyed as `alert_key`, with their state and
/// every label (for a failure's message).
///
/// No rule needs an exception here: a rule reading kube-state-metrics
/// (`kube_cronjob_status_last_successful_time`, which no rehearsal process
/// exports) has no series, so its expression is empty and it stays
/// inactive; `increase()` of a counter with one sample is 0; the `for:`
/// clauses of the rest outlast the rehearsal only if their condition holds,
/// which on a healthy system it does not.
pub fn active_alerts(rules: &[RuleState]) -> BTreeMap<String, String> {
    let mut active = BTreeMap::new();
    for rule in rules {
        for (labels, state) in &rule.alerts {
            if state == "pending" || state == "firing" {
                active.insert(alert_key(&rule.name, labels), format!("{state} {labels:?}"));
            }
        }
    }
    active
}

/// Words of PromQL that are not metrics: binary operators, modifiers, and
/// the aggregations, which may be followed by `by (...)` before their `(`.
const KEYWORDS: [&str; 22] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names of a PromQL expression: identifiers that are not a
/// function, an aggregation, a keyword, a label or inside a matcher,
/// range, string or label list.
pub fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_to(&chars, i, '}'),
            '[' => i = skip_to(&chars, i, ']'),
            c if c.is_ascii_digit() || c == '.' => {
                // A number or a duration (`1.5`, `5m`, `1m40s`).
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i]))
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
                if LABEL_LISTS.contains(&word.as_str()) {
                    if next == Some('(') {
                        let open = i + chars[i..].iter().position(|&c| c == '(').unwrap();
                        i = skip_to(&chars, open, ')');
                    }
                } else if next != Some('(') && !KEYWORDS.contains(&word.as_str()) {
                    names.push(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The index after the string opened at `start`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        i += if chars[i] == '\\' && quote != '`' {
            2
        } else {
            1
        };
    }
    i + 1
}

/// The index after the `close` that ends what opens at `start` (strings inside skipped).
fn skip_to(chars: &[char], start: usize, close: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() && chars[i] != close {
        i = if "\"'`".contains(chars[i]) {
            skip_string(chars, i)
        } else {
            i + 1
        };
    }
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn rule(expr: &str) -> Rule {
        Rule {
            alert: "Doctored".into(),
            expr: expr.into(),
            description: String::new(),
        }
    }

    #[test]
    fn metric_names_skip_functions_labels_matchers_and_durations() {
        let expr = r#"(sum by (queue, partition, stream) (increase(queuegen_trim_passes_total{queue="ocr", outcome="aborted"}[15m])) > 0) unless on (queue, partition, stream) (sum by (queue) (increase(queuegen_trim_passes_total{outcome=~"trimmed|x{y}"}[15m])) > 0)"#;
        assert_eq!(
            metric_names(expr),
            ["queuegen_trim_passes_total", "queuegen_trim_passes_total"]
        );
        assert_eq!(
            metric_names(
                "max by (library) (queuegen_function_library_loaded{library=\"qg_v7\"}) == 0"
            ),
            ["queuegen_function_library_loaded"]
        );
        assert_eq!(
            metric_names("max by (namespace, cronjob) (time() - kube_cronjob_status_last_successful_time{namespace=\"docs\"}) > 2700"),
            ["kube_cronjob_status_last_successful_time"]
        );
    }

    /// The check can fail: a doctored expression naming a metric no process
    /// exports is reported, with its alert.
    #[test]
    fn a_rule_naming_a_metric_nobody_exports_is_reported() {
        let scraped = exported(&["queuegen_queue_dead_letters", "queuegen_loops_leader"]);
        assert!(unexported(
            &[rule(
                "max by (queue) (queuegen_queue_dead_letters{queue=\"ocr\"}) >= 1"
            )],
            &scraped
        )
        .is_empty());
        let doctored = rule("max by (queue) (queuegen_queue_dead_letter{queue=\"ocr\"}) >= 1");
        let missing = unexported(&[doctored], &scraped);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(
            missing[0].starts_with("Doctored: queuegen_queue_dead_letter "),
            "{missing:?}"
        );
        // Another exporter's metric passes only where the rule says whose it is.
        let kube = rule("time() - kube_cronjob_status_last_successful_time > 60");
        assert_eq!(unexported(std::slice::from_ref(&kube), &scraped).len(), 1);
        let declared = Rule {
            description:
                "This rule reads kube-state-metrics (kube_cronjob_status_last_successful_time)."
                    .into(),
            ..kube
        };
        assert!(unexported(&[declared], &scraped).is_empty());
    }

    /// Prometheus's view of the rules: an erring rule is reported with its
    /// error, and only pending or firing alerts count as active, keyed by
    /// name, queue and partition.
    #[test]
    fn unhealthy_rules_and_active_alerts_are_reported() {
        let labels = |queue: &str, partition: &str| {
            BTreeMap::from([
                ("queue".to_owned(), queue.to_owned()),
                ("partition".to_owned(), partition.to_owned()),
                ("severity".to_owned(), "warning".to_owned()),
            ])
        };
        let state = |name: &str, health: &str, error: &str, alerts| RuleState {
            group: "queuegen-svc-export".into(),
            name: name.into(),
            query: "x".into(),
            health: health.into(),
            last_error: error.into(),
            alerts,
        };
        let rules = [
            state(
                "QueuegenDeadLetters",
                "ok",
                "",
                vec![(labels("export", "1"), "firing".to_owned())],
            ),
            state(
                "QueuegenNoRecoveryLeader",
                "err",
                "found duplicate series for the match group",
                vec![(labels("export", "0"), "inactive".to_owned())],
            ),
        ];
        let unhealthy = unhealthy(&rules);
        assert_eq!(unhealthy.len(), 1, "{unhealthy:?}");
        assert!(
            unhealthy[0].starts_with(
                "queuegen-svc-export / QueuegenNoRecoveryLeader: err: found duplicate"
            ),
            "{unhealthy:?}"
        );
        let active = active_alerts(&rules);
        assert_eq!(
            active.keys().collect::<Vec<_>>(),
            ["QueuegenDeadLetters{queue=\"export\", partition=\"1\"}"]
        );
    }
}
