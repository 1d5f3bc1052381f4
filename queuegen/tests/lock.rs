//! `queuegen lock` and the lock checks of `check` and `generate`, run as the
//! real binary in a scratch directory holding `queues.yaml` (copied from
//! tests/fixtures/evolution/) and its `queues.lock`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use queuegen_tests::cli::{run_in, stderr, stdout};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/evolution")
        .join(name)
}

/// A scratch project whose `queues.yaml` is the fixture `spec`.
fn scratch(spec: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    use_spec(dir.path(), spec);
    dir
}

/// Replaces the project's `queues.yaml` with the fixture `spec`: an edit.
fn use_spec(dir: &Path, spec: &str) {
    fs::copy(fixture(spec), dir.join("queues.yaml")).unwrap();
}

fn queuegen(args: &[&str], cwd: &Path) -> Output {
    run_in(env!("CARGO_BIN_EXE_queuegen"), args, cwd)
}

fn lock_text(dir: &Path) -> String {
    fs::read_to_string(dir.join("queues.lock")).unwrap()
}

/// Locks the project's current spec, which must succeed.
fn lock(dir: &Path) {
    let out = queuegen(&["lock", "queues.yaml"], dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// The spec with numbered lines, then what the command printed, so
/// positions can be checked by eye.
fn render(dir: &Path, output: &Output) -> String {
    let mut out = String::new();
    let source = fs::read_to_string(dir.join("queues.yaml")).unwrap();
    for (i, line) in source.lines().enumerate() {
        writeln!(out, "{:>3} | {line}", i + 1).unwrap();
    }
    writeln!(out, "\n$ exit {}", output.status.code().unwrap()).unwrap();
    out.push_str(&stdout(output));
    out.push_str(&stderr(output));
    out
}

#[test]
fn lock_writes_every_version_of_every_envelope() {
    let dir = scratch("books_v2.yaml");
    let out = queuegen(&["lock", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "recorded   BookScanned schema 1\nrecorded   BookScanned schema 2\nqueues.lock: written (2 recorded)\n"
    );
    insta::assert_snapshot!("lock_file_of_books_v2", lock_text(dir.path()));
}

#[test]
fn a_second_run_is_unchanged_and_writes_nothing() {
    let dir = scratch("books_v2.yaml");
    lock(dir.path());
    let path = dir.path().join("queues.lock");
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    let before = lock_text(dir.path());

    let out = queuegen(&["lock", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "unchanged  BookScanned schema 1\nunchanged  BookScanned schema 2\nqueues.lock: unchanged (2 unchanged)\n"
    );
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), long_ago);
    assert_eq!(lock_text(dir.path()), before);
}

#[test]
fn lock_check_passes_then_fails_after_a_spec_edit() {
    let dir = scratch("books_v1.yaml");
    let missing = queuegen(&["lock", "queues.yaml", "--check"], dir.path());
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stdout(&missing),
        "would record   BookScanned schema 1\nqueues.lock: missing: run `queuegen lock queues.yaml`\n"
    );
    assert!(!dir.path().join("queues.lock").exists());

    lock(dir.path());
    let clean = queuegen(&["lock", "queues.yaml", "--check"], dir.path());
    assert_eq!(clean.status.code(), Some(0));
    assert_eq!(stdout(&clean), "queues.lock: up to date\n");

    use_spec(dir.path(), "books_v2.yaml");
    let before = lock_text(dir.path());
    let stale = queuegen(&["lock", "queues.yaml", "--check"], dir.path());
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        stdout(&stale),
        "would record   BookScanned schema 2\nqueues.lock: out of date: run `queuegen lock queues.yaml`\n"
    );
    assert_eq!(lock_text(dir.path()), before, "--check writes nothing");

    let json = queuegen(&["lock", "queues.yaml", "--check", "--json"], dir.path());
    assert_eq!(json.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "lock": "queues.lock",
            "up_to_date": false,
            "versions": [{ "envelope": "BookScanned", "schema": 2, "status": "recorded" }]
        })
    );
}

#[test]
fn check_catches_a_silent_change_of_the_published_version() {
    let dir = scratch("books_v1.yaml");
    lock(dir.path());
    use_spec(dir.path(), "books_v1_edited.yaml");
    let out = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        "published_version_changed_in_place",
        render(dir.path(), &out)
    );
}

#[test]
fn lock_refuses_to_rewrite_a_published_version_without_force() {
    let dir = scratch("books_v1.yaml");
    lock(dir.path());
    let before = lock_text(dir.path());
    use_spec(dir.path(), "books_v1_edited.yaml");

    let refused = queuegen(&["lock", "queues.yaml"], dir.path());
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(stdout(&refused), "");
    let errors = stderr(&refused);
    assert!(
        errors.starts_with("queues.yaml:9:7: error: envelopes.BookScanned.fields.pages: differs from schema 1 as published in queues.lock: type u64 → u32\n"),
        "{errors}"
    );
    assert!(
        errors.ends_with("queues.lock: not written: fix the errors above first\n"),
        "{errors}"
    );
    assert_eq!(lock_text(dir.path()), before);

    let forced = queuegen(&["lock", "queues.yaml", "--force"], dir.path());
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert_eq!(
        stdout(&forced),
        "rewritten  BookScanned schema 1\nqueues.lock: written (1 rewritten)\n"
    );
    assert!(lock_text(dir.path()).contains("- { name: pages, type: u32 }"));
    let check = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
}

#[test]
fn generate_refuses_a_spec_that_changes_a_published_version() {
    let dir = scratch("books_v1.yaml");
    lock(dir.path());
    use_spec(dir.path(), "books_v1_edited.yaml");
    let out = queuegen(
        &["generate", "queues.yaml", "--out", "src/queues"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("differs from schema 1 as published in queues.lock"));
    assert!(!dir.path().join("src/queues").exists());
}

#[test]
fn a_type_change_of_an_accepted_older_version_is_caught() {
    // Schema 1 was published with `pages: u64`; schema 2 narrows it to u32
    // while still accepting 1, so its reconstruction of schema 1 reads u32.
    let dir = scratch("books_v1.yaml");
    lock(dir.path());
    use_spec(dir.path(), "books_v2_narrowed.yaml");
    let out = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("accepted_version_narrowed", render(dir.path(), &out));
}

#[test]
fn widening_an_accepted_older_version_passes() {
    let dir = scratch("counts_v1.yaml");
    lock(dir.path());
    use_spec(dir.path(), "counts_v2_widened.yaml");
    let out = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "queues.yaml:6:13: warning: envelopes.PageCounted.schema: schema 2 is not recorded in queues.lock yet\n  help: run `queuegen lock` when schema 2 is published\nqueues.yaml: 0 errors, 1 warning\n"
    );
    lock(dir.path());
    let clean = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(stdout(&clean), "queues.yaml: ok, 1 queue and 1 envelope\n");
}

#[test]
fn a_schema_older_than_a_published_one_is_refused() {
    let dir = scratch("books_v2.yaml");
    lock(dir.path());
    use_spec(dir.path(), "books_v1.yaml");
    let out = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("queues.yaml:6:13: error: envelopes.BookScanned.schema: schema 1 is older than schema 2, already published (queues.lock)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_envelope_gone_from_the_spec_is_a_warning_and_stays_locked() {
    let dir = scratch("counts_v1.yaml");
    lock(dir.path());
    use_spec(dir.path(), "books_v1.yaml");
    let check = queuegen(&["check", "queues.yaml", "--format", "json"], dir.path());
    assert_eq!(check.status.code(), Some(0));
    let diagnostics: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(diagnostics[0]["severity"], "warning");
    assert_eq!(diagnostics[0]["path"], "envelopes.PageCounted");
    assert!(diagnostics[0]["message"]
        .as_str()
        .unwrap()
        .contains("entries may remain in streams and dead-letter streams"));

    let out = queuegen(&["lock", "queues.yaml", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "lock": "queues.lock",
            "written": true,
            "versions": [
                { "envelope": "BookScanned", "schema": 1, "status": "recorded" },
                { "envelope": "PageCounted", "schema": 1, "status": "kept" }
            ]
        })
    );
    assert!(lock_text(dir.path()).contains("  PageCounted:\n"));
}

#[test]
fn a_malformed_lock_is_an_error_naming_the_lock_file() {
    let dir = scratch("books_v1.yaml");
    fs::write(
        dir.path().join("queues.lock"),
        "format: 1\nenvelopes:\n  BookScanned:\n    1:\n      - { name: pages, typ: u64 }\n",
    )
    .unwrap();
    let expected = "queues.lock:5:24: error: malformed lock file: envelopes.BookScanned.1[0]: unknown field `typ`, expected one of `name`, `type`, `values`, `optional`, `default`, `max_bytes`\n  help: restore it from version control, or rewrite it from the spec with `queuegen lock --force`\n";

    let check = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(check.status.code(), Some(1));
    assert_eq!(
        stdout(&check),
        format!("{expected}queues.yaml: 1 error, 0 warnings\n")
    );

    let generate = queuegen(&["generate", "queues.yaml", "--out", "src"], dir.path());
    assert_eq!(generate.status.code(), Some(1));
    assert!(
        stderr(&generate).starts_with(expected),
        "{}",
        stderr(&generate)
    );

    let lock = queuegen(&["lock", "queues.yaml"], dir.path());
    assert_eq!(lock.status.code(), Some(1));
    assert_eq!(
        stderr(&lock),
        format!("{expected}queues.lock: not written: the lock file is malformed\n")
    );

    let forced = queuegen(&["lock", "queues.yaml", "--force"], dir.path());
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert!(lock_text(dir.path()).contains("- { name: pages, type: u64 }"));
}

#[test]
fn lock_path_can_point_elsewhere() {
    let dir = scratch("books_v1.yaml");
    let out = queuegen(
        &["lock", "queues.yaml", "--lock", "deploy/published.lock"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("deploy/published.lock").exists());
    assert!(!dir.path().join("queues.lock").exists());

    use_spec(dir.path(), "books_v1_edited.yaml");
    // Without --lock, check finds no lock beside the spec.
    let unlocked = queuegen(&["check", "queues.yaml"], dir.path());
    assert_eq!(unlocked.status.code(), Some(0));
    let locked = queuegen(
        &["check", "queues.yaml", "--lock", "deploy/published.lock"],
        dir.path(),
    );
    assert_eq!(locked.status.code(), Some(1));
    assert!(stdout(&locked).contains("as published in deploy/published.lock"));

    let missing = queuegen(&["check", "queues.yaml", "--lock", "nope.lock"], dir.path());
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read nope.lock"));
}

#[test]
fn lock_help_shows_examples() {
    let out = queuegen(&["lock", "--help"], Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("queuegen lock queues.yaml --check"), "{text}");
    assert!(text.contains("--force"), "{text}");
}
