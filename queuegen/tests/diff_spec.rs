//! `queuegen diff-spec OLD NEW` on the specs of tests/fixtures/evolution/:
//! goldens of the findings, the JSON shape and the exit codes.

use std::path::Path;
use std::process::{Command, Output};

use queuegen_tests::cli::stdout;

/// Runs the binary in the fixtures directory, so paths print short.
fn diff_spec(args: &[&str]) -> Output {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/evolution");
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .arg("diff-spec")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("queuegen runs")
}

/// The exit status and what was printed, for a golden.
fn transcript(output: &Output) -> String {
    format!(
        "$ exit {}\n{}{}",
        output.status.code().unwrap(),
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_compatible_bump_only_asks_for_workers_first() {
    let out = diff_spec(&["books_v1.yaml", "books_v2.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("compatible_bump", transcript(&out));
}

#[test]
fn a_bump_that_drops_an_accepted_version_needs_a_rollout() {
    let out = diff_spec(&["books_v2.yaml", "books_v3.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("rollout_bump", transcript(&out));
}

#[test]
fn narrowing_a_field_of_an_accepted_version_is_breaking() {
    let out = diff_spec(&["books_v1.yaml", "books_v2_narrowed.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("breaking_narrowing", transcript(&out));
}

#[test]
fn a_published_version_changed_in_place_is_breaking() {
    let out = diff_spec(&["books_v1.yaml", "books_v1_edited.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("changed_in_place", transcript(&out));
}

#[test]
fn a_partition_change_is_breaking() {
    let out = diff_spec(&["books_v1.yaml", "books_v1_repartitioned.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("partition_change", transcript(&out));
}

#[test]
fn the_same_spec_has_nothing_to_report() {
    let out = diff_spec(&["books_v2.yaml", "books_v2.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "books_v2.yaml → books_v2.yaml: 0 breaking, 0 rollout, 0 info\n"
    );
}

#[test]
fn json_lists_the_findings_and_a_summary() {
    let out = diff_spec(&["books_v1.yaml", "books_v2_narrowed.yaml", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value["old"], "books_v1.yaml");
    assert_eq!(value["new"], "books_v2_narrowed.yaml");
    assert_eq!(
        value["summary"],
        serde_json::json!({ "breaking": 1, "rollout": 1, "info": 3 })
    );
    for finding in value["findings"].as_array().unwrap() {
        let keys: Vec<&String> = finding.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["message", "path", "severity"]);
    }
    insta::assert_json_snapshot!("breaking_narrowing_json", value);
}

#[test]
fn specs_with_errors_are_reported_and_not_compared() {
    let out = diff_spec(&["books_v1.yaml", "../five_mistakes.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        errors.starts_with("../five_mistakes.yaml:13:7: error:"),
        "{errors}"
    );
    assert!(
        errors.ends_with("not compared: fix the errors above first\n"),
        "{errors}"
    );

    let json = diff_spec(&["../five_mistakes.yaml", "books_v1.yaml", "--json"]);
    assert_eq!(json.status.code(), Some(2));
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["diagnostics"].as_array().map(Vec::len), Some(5));
}

#[test]
fn an_unreadable_spec_exits_2() {
    let out = diff_spec(&["books_v1.yaml", "no_such.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read no_such.yaml"));
}

#[test]
fn help_shows_examples() {
    let out = diff_spec(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("queuegen diff-spec /tmp/queues.old.yaml queues.yaml"),
        "{text}"
    );
    assert!(text.contains("breaking"), "{text}");
}
