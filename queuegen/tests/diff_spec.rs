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
fn pipeline_changes_say_what_they_do_to_runs_in_flight() {
    let out = diff_spec(&["documents_v1.yaml", "documents_v2.yaml"]);
    // Nothing breaking: each change is safe once the runs in flight end.
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "rollout   pipelines.documents.stages.split.max_children: max_children 500 → 200: a job of `split` handled after the deploy that hands on more than 200 is dead-lettered (too_many_children), a job queued before it or delivered again after handing on more included (the children it handed on then keep going); make sure the handler hands on at most 200 before deploying",
            "rollout   pipelines.documents.stages.notify-owner.join: join waits for [ocr-page, index-page] → [index-page]: runs in flight keep counting what their first stage registered when it opened them; `ocr-page`, no longer waited for, still settles there (it leads to a stage that is), left out of the summary; runs started after the deploy wait for [index-page]; deploy once the runs in flight have ended, or accept this for them",
            "rollout   pipelines.documents.stages.audit-page: queue `audit-page` is handed jobs by pipeline `documents` from the deploy on, and its workers dead-letter a job that carries no run (`run_id`): every job already in its stream, retry schedule or dead letters, and any its producers still publish; stop its producers and drain it before deploying",
            "info      pipelines.documents.keep: keep 3d → 7d: applies to runs that end after the deploy; a run that ended before it keeps its record for 3d",
            "info      pipelines.documents.stages.ocr-page.max_children: max_children 1 → 2: applies to the jobs of `ocr-page` handled after the deploy",
            "info      pipelines.documents.stages.audit-page: stage `audit-page` added: jobs of `ocr-page` handled after the deploy hand jobs on to it",
            "info      pipelines.documents.stages.notify-owner.on_dead_letter: on_dead_letter continue → fail: applies to dead letters after the deploy, each of which fails its run at `notify-owner`, even a run whose earlier dead letters were counted as ended",
            "",
            "documents_v1.yaml → documents_v2.yaml: 0 breaking, 3 rollout, 4 info",
        ]
    );
}

#[test]
fn a_removed_pipeline_says_to_drain_it_first() {
    let out = diff_spec(&["documents_v1.yaml", "documents_none.yaml", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        value["findings"],
        serde_json::json!([{
            "severity": "rollout",
            "path": "pipelines.documents",
            "message": "pipeline `documents` removed: runs in flight are abandoned at `notify-owner` (the join's job is never published for them), and a run's state there expires after keep (3d) only once the run has ended there, so theirs stays in Redis; stop publishing to `split` and let the runs in flight end (drain the pipeline) before deploying",
        }])
    );
    assert_eq!(
        value["summary"],
        serde_json::json!({ "breaking": 0, "rollout": 1, "info": 0 })
    );

    // Added back: each queue handed jobs is drained first.
    let out = diff_spec(&["documents_none.yaml", "documents_v1.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let paths: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once(": ").map(|(at, _)| at))
        .collect();
    assert_eq!(
        paths,
        [
            "rollout   pipelines.documents.stages.ocr-page",
            "rollout   pipelines.documents.stages.index-page",
            "rollout   pipelines.documents.stages.notify-owner",
            "info      pipelines.documents",
            "documents_none.yaml → documents_v1.yaml",
        ]
    );
    assert!(
        text.contains("info      pipelines.documents: new pipeline `documents`: each job of `split` handled after the deploy starts a run (4 stages, join `notify-owner`)\n"),
        "{text}"
    );
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
