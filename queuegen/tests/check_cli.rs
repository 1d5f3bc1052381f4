//! `queuegen check` and `queuegen schema` as a user runs them: exit codes,
//! exact positions, the summary line and the JSON format.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in a workspace")
        .to_path_buf()
}

/// Runs the built binary from the workspace root, so paths print as given.
fn queuegen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("queuegen runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

const FIVE: &str = "queuegen/tests/fixtures/five_mistakes.yaml";

#[test]
fn the_example_checks_with_exit_0() {
    let output = queuegen(&["check", "examples/docs-pipeline/queues.yaml"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(!text.contains(": error:"), "{text}");
    // export starts its group at 0-0 on purpose; that is worth a warning.
    assert_eq!(
        text.lines().last(),
        Some("examples/docs-pipeline/queues.yaml: 0 errors, 1 warning")
    );
}

#[test]
fn a_clean_spec_says_what_it_checked() {
    let output = queuegen(&["check", "queuegen/tests/fixtures/valid/minimal.yaml"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "queuegen/tests/fixtures/valid/minimal.yaml: ok, 1 queue and 1 envelope\n"
    );
}

#[test]
fn five_mistakes_give_exactly_five_positioned_diagnostics() {
    let output = queuegen(&["check", FIVE, "--format", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let diagnostics: Vec<Value> = serde_json::from_slice(&output.stdout).expect("a JSON array");
    let got: Vec<(u64, u64, &str, &str)> = diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d["severity"], "error");
            assert_eq!(d["file"], FIVE);
            (
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
                d["path"].as_str().unwrap(),
                d["message"].as_str().unwrap(),
            )
        })
        .collect();
    let expected = [
        (
            13,
            7,
            "envelopes.InvoiceRequested.fields.card_password",
            "looks like a credential",
        ),
        (
            18,
            28,
            "queues.invoice.partition_by[1]",
            "has no field `invoce_ref`",
        ),
        (
            21,
            24,
            "queues.invoice.claim.min_idle",
            "claim margin of 15s",
        ),
        (24, 43, "queues.invoice.dead_letter.retenion", "unknown key"),
        (
            26,
            5,
            "queues.invoice.payload",
            "duplicate key `payload` (first on line 25)",
        ),
    ];
    assert_eq!(got.len(), expected.len(), "{diagnostics:#?}");
    for (got, want) in got.iter().zip(expected) {
        assert_eq!((got.0, got.1, got.2), (want.0, want.1, want.2));
        assert!(
            got.3.contains(want.3),
            "{:?} does not mention {:?}",
            got.3,
            want.3
        );
    }
    assert_eq!(diagnostics[1]["help"], "did you mean `invoice_ref`?");
    assert_eq!(diagnostics[3]["help"], "did you mean `retention`?");
}

#[test]
fn human_output_prints_every_diagnostic_and_a_summary() {
    let output = queuegen(&["check", FIVE]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    // Five diagnostics of two lines each, then the summary.
    assert_eq!(lines.len(), 11, "{text}");
    assert_eq!(
        lines[0],
        format!("{FIVE}:13:7: error: envelopes.InvoiceRequested.fields.card_password: field name looks like a credential (contains `password`); stream entries are replicated, persisted and readable with XRANGE")
    );
    assert_eq!(
        lines[1],
        "  help: carry a reference (e.g. secret_ref) instead of the value"
    );
    assert_eq!(
        lines[6],
        format!("{FIVE}:24:43: error: queues.invoice.dead_letter.retenion: unknown key")
    );
    assert_eq!(lines[10], format!("{FIVE}: 5 errors, 0 warnings"));
}

#[test]
fn json_output_of_a_clean_spec_is_an_empty_array() {
    let output = queuegen(&[
        "check",
        "queuegen/tests/fixtures/valid/minimal.yaml",
        "--format",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        serde_json::from_slice::<Value>(&output.stdout).unwrap(),
        Value::Array(vec![])
    );
}

#[test]
fn json_output_of_the_example_carries_the_warning() {
    let output = queuegen(&[
        "check",
        "examples/docs-pipeline/queues.yaml",
        "--format",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let diagnostics: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(diagnostics.as_array().map(Vec::len), Some(1));
    assert_eq!(diagnostics[0]["severity"], "warning");
    assert_eq!(diagnostics[0]["path"], "queues.export.group.start");
}

#[test]
fn an_unreadable_spec_exits_2() {
    let output = queuegen(&["check", "no/such/queues.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read no/such/queues.yaml"),
        "{stderr}"
    );
}

#[test]
fn help_shows_an_example() {
    let output = queuegen(&["check", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.contains("queuegen check queues.yaml"), "{text}");
    assert!(text.contains("--format"), "{text}");
}

#[test]
fn schema_prints_the_committed_file() {
    let output = queuegen(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    let committed = std::fs::read_to_string(workspace().join("schemas/queuegen.v1.json")).unwrap();
    assert!(
        stdout(&output) == committed,
        "schemas/queuegen.v1.json is stale: run `cargo run -p queuegen -- schema > schemas/queuegen.v1.json`"
    );
}

/// `init` offers both deployments, and a Cluster spec checks clean.
#[test]
fn init_offers_cluster_and_check_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_queuegen"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("queuegen runs")
    };
    assert!(run(&["init", "--service", "billing"]).status.success());
    let starter = std::fs::read_to_string(dir.path().join("queues.yaml")).unwrap();
    let deployments: Vec<&str> = starter
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with("deployment:"))
        .collect();
    assert_eq!(
        deployments,
        ["deployment: standalone             # or cluster (Redis Cluster: `apply` loads Functions on every primary)"]
    );

    let cluster = starter.replace("deployment: standalone ", "deployment: cluster    ");
    std::fs::write(dir.path().join("cluster.yaml"), cluster).unwrap();
    let output = run(&["check", "cluster.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout(&output),
        "cluster.yaml: ok, 1 queue and 1 envelope\n"
    );
}

/// Runs `queuegen check FILE` in `dir`, where `FILE` holds `bytes`.
fn check_bytes_in(dir: &Path, file: &str, bytes: &[u8]) -> Output {
    std::fs::write(dir.join(file), bytes).unwrap();
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["check", file])
        .current_dir(dir)
        .output()
        .expect("queuegen runs")
}

#[test]
fn a_spec_that_is_not_utf8_names_the_first_bad_byte_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(workspace().join("examples/docs-pipeline/queues.yaml"))
        .expect("the example reads");
    // A comment with `é` written as Latin-1, as an editor set to it saves it.
    let mut bytes = b"# caf".to_vec();
    bytes.push(0xE9);
    bytes.extend_from_slice(b" menu\n");
    bytes.extend_from_slice(example.as_bytes());
    let output = check_bytes_in(dir.path(), "latin1.yaml", &bytes);
    let text = stdout(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a spec error, not an unreadable file: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("latin1.yaml:1:6: error: ") && first.contains("0xE9"),
        "{text}"
    );
    assert!(text.contains("help: save the file as UTF-8"), "{text}");
    assert!(text.contains("latin1.yaml: 1 error"), "{text}");
}

#[test]
fn an_unclosed_flow_sequence_points_at_its_bracket() {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(workspace().join("examples/docs-pipeline/queues.yaml"))
        .expect("the example reads");
    let (line, text) = example
        .lines()
        .enumerate()
        .find(|(_, line)| line.trim_start().starts_with("partition_by: ["))
        .expect("the example partitions a queue by a flow sequence");
    let column = text.find('[').unwrap() + 1;
    let open = text.replace(']', "");
    let broken = example.replacen(text, &open, 1);
    let output = check_bytes_in(dir.path(), "queues.yaml", broken.as_bytes());
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let at = format!("queues.yaml:{}:{column}: error: ", line + 1);
    assert!(out.starts_with(&at), "expected {at}…, got:\n{out}");
    assert!(out.contains("the parser gave up at line"), "{out}");
    assert!(out.contains("help: close the sequence with `]`"), "{out}");
}
