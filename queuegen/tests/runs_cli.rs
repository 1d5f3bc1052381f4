//! `queuegen runs` against a private redis-server: the runs in flight at a pipeline's join with what each waits for, one run by ID (open, published with its summary, failed), `--json`, and errors that name the pipeline and the run; and `queuegen status`'s line per join (runs in flight, the oldest wait) and its `pipelines` key.
//!
//! The runs' state is written by the library's own `run_settle`, called
//! as a stage worker calls it (tests/tests/runs_view.rs runs real stage
//! workers under the same view).

use std::path::PathBuf;
use std::process::{Command, Output};

use queuegen_runtime::functions::{command, Function, RunOutcome, RunSettle, RunSettled};
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::runs::{child_job_id, join_job_id};
use queuegen_tests::cli::{stderr, stdout};
use queuegen_tests::RedisServer;
use serde_json::Value;

const SPEC: &str = r#"
version: 1
service: docs
envelopes:
  Doc:
    schema: 1
    fields:
      doc_ref: { type: string, max_bytes: 64 }
queues:
  ocr:
    envelope: Doc
    partitions: 2
    dead_letter: { owner: docs }
  index:
    envelope: Doc
    partitions: 2
    dead_letter: { owner: docs }
    dedup: { window: 1h }
  notify:
    envelope: Doc
    partitions: 3
    dead_letter: { owner: docs }
pipelines:
  documents:
    stages:
      ocr: { then: [index] }
      index: {}
      notify: { join: [index] }
"#;

struct Setup {
    server: RedisServer,
    dir: tempfile::TempDir,
    spec: PathBuf,
}

impl Setup {
    /// The spec written out and applied (library loaded, groups made).
    fn start() -> Setup {
        let server = RedisServer::start();
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("queues.yaml");
        std::fs::write(&spec, SPEC).unwrap();
        let setup = Setup { server, dir, spec };
        let out = setup.queuegen(&["apply"], &[]);
        assert!(out.status.success(), "{out:?}");
        setup
    }

    /// `queuegen <verb> SPEC <args> --redis URL`.
    fn queuegen(&self, verb: &[&str], args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_queuegen"))
            .args(verb)
            .arg(&self.spec)
            .args(args)
            .args(["--redis", self.server.url().as_str()])
            .env_remove("REDIS_URL")
            .env("NO_COLOR", "1")
            .output()
            .expect("queuegen runs")
    }

    fn runs(&self, args: &[&str]) -> Output {
        self.queuegen(&["runs"], args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.runs(&args);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{err}: {}", stdout(&out)))
    }

    /// Settles `job_id` of run `run_id` at the join, as a stage worker does.
    fn settle(&self, run_id: &str, job_id: &str, settle: Settle<'_>) -> RunSettled {
        let spec = queuegen::spec::check_str(SPEC, "queues.yaml").spec.unwrap();
        let config = queuegen::runtime_config::queue_config(&spec, spec.queue("notify").unwrap());
        let keys = config.run_keys(run_partition(&config, run_id), "documents", run_id);
        let join_id = join_job_id(run_id, "notify");
        let envelope = vec![
            "job_id",
            join_id.as_str(),
            "type",
            "Doc",
            "tenant",
            "acme",
            "schema",
            "1",
            "doc_ref",
            run_id,
        ];
        let call = RunSettle {
            run_key: &keys.run,
            out_key: &keys.out,
            settled_key: &keys.settled,
            ready_key: &keys.ready,
            runs_key: &keys.runs,
            pipeline: "documents",
            run_id,
            job_id,
            outcome: if settle.dead {
                RunOutcome::Dead
            } else {
                RunOutcome::Done
            },
            counted: job_id != run_id,
            fails_run: settle.dead,
            result_ref: settle.result_ref,
            keep_ms: 3_600_000,
            children: settle.children,
            join_envelope: (job_id == run_id).then_some(&envelope),
        };
        let mut conn = self.server.client().get_connection().unwrap();
        let replies: Vec<RunSettled> = command(&config.function(Function::RunSettle), &call)
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("run_settle {run_id} {job_id}: {err}"));
        let [reply] = <[RunSettled; 1]>::try_from(replies).expect("one reply for one job");
        reply
    }
}

#[derive(Default)]
struct Settle<'a> {
    children: &'a [&'a str],
    result_ref: &'a str,
    dead: bool,
}

fn page(run_id: &str, index: u32) -> String {
    child_job_id(run_id, run_id, "index", index)
}

/// doc-open waits for two pages; doc-done was published, its page done;
/// doc-failed failed, its page dead-lettered.
fn runs_of_every_kind(setup: &Setup) -> [String; 2] {
    let open = [page("doc-open", 0), page("doc-open", 1)];
    let open_refs: Vec<&str> = open.iter().map(String::as_str).collect();
    let opened = setup.settle(
        "doc-open",
        "doc-open",
        Settle {
            children: &open_refs,
            ..Settle::default()
        },
    );
    assert_eq!(opened, RunSettled::Settled { outstanding: 2 });
    for (run, dead) in [("doc-done", false), ("doc-failed", true)] {
        let child = page(run, 0);
        setup.settle(
            run,
            run,
            Settle {
                children: &[child.as_str()],
                ..Settle::default()
            },
        );
        let ended = setup.settle(
            run,
            &child,
            Settle {
                result_ref: if dead { "" } else { "s3://pages/0" },
                dead,
                ..Settle::default()
            },
        );
        assert_eq!(matches!(ended, RunSettled::Failed), dead, "{ended:?}");
    }
    open
}

#[test]
fn runs_in_flight_are_listed_with_what_they_wait_for() {
    let setup = Setup::start();
    runs_of_every_kind(&setup);

    let json = setup.json(&[]);
    let pipeline = &json["pipelines"][0];
    assert_eq!(pipeline["pipeline"], "documents");
    assert_eq!(pipeline["first"], "ocr");
    let join = &pipeline["joins"][0];
    assert_eq!(join["join"], "notify");
    assert_eq!(join["in_flight"], 1, "only doc-open is in flight: {json}");
    assert_eq!(join["runs"][0]["run_id"], "doc-open");
    assert_eq!(join["runs"][0]["waiting"], 2);
    assert_eq!(join["oldest"]["run_id"], "doc-open");
    assert_eq!(join["truncated"], false);

    let out = setup.runs(&["--pipeline", "documents"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("pipeline documents: runs start at ocr"),
        "{text}"
    );
    assert!(
        text.contains(
            "join notify (after index; on_dead_letter: fail): 1 run in flight, oldest waiting"
        ),
        "{text}"
    );
    assert!(text.contains("RUN"), "{text}");
    let row = text
        .lines()
        .find(|line| line.starts_with("doc-open "))
        .unwrap_or_else(|| panic!("a row for doc-open: {text}"));
    assert!(row.trim_end().ends_with(" 2"), "WAITING 2: {row}");
    assert!(
        text.contains("look one up with `queuegen runs"),
        "ended runs are said to be unlisted: {text}"
    );
}

#[test]
fn one_run_is_shown_at_its_join_open_published_or_failed() {
    let setup = Setup::start();
    let open = runs_of_every_kind(&setup);

    let json = setup.json(&["--run", "doc-open"]);
    assert_eq!(json["pipeline"], "documents");
    let join = &json["joins"][0];
    assert_eq!(join["state"], "open");
    assert_eq!(join["outstanding"], 2);
    let outstanding: Vec<&str> = join["outstanding_jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["job_id"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = open.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(outstanding, expected);
    assert_eq!(join["outstanding_jobs"][0]["stage"], "index");
    let text = stdout(&setup.runs(&["--run", "doc-open"]));
    assert!(text.contains("pipeline documents run doc-open"), "{text}");
    assert!(text.contains("join notify partition"), "{text}");
    assert!(text.contains(": open for "), "{text}");
    assert!(
        text.contains(&format!("index  {}  waiting", expected[0])),
        "{text}"
    );
    assert!(text.contains("ocr    doc-open"), "{text}");

    let json = setup.json(&["--run", "doc-done", "--pipeline", "documents"]);
    let join = &json["joins"][0];
    assert_eq!(join["state"], "published");
    assert!(join["join_entry"].is_string(), "{json}");
    let done = join["settled_jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["outcome"] == "done")
        .unwrap_or_else(|| panic!("the page is done: {json}"));
    assert_eq!(done["result_ref"], "s3://pages/0");
    let text = stdout(&setup.runs(&["--run", "doc-done"]));
    assert!(text.contains(": published at "), "{text}");
    assert!(text.contains("done   s3://pages/0"), "{text}");
    assert!(
        text.contains("its state expires in 59m"),
        "keep_ms 1h: {text}"
    );

    let json = setup.json(&["--run", "doc-failed"]);
    assert_eq!(json["joins"][0]["state"], "failed");
    let text = stdout(&setup.runs(&["--run", "doc-failed"]));
    assert!(text.contains(": failed at "), "{text}");
    assert!(text.contains("  dead"), "{text}");
}

#[test]
fn errors_name_the_pipeline_and_the_run() {
    let setup = Setup::start();
    runs_of_every_kind(&setup);

    let out = setup.runs(&["--pipeline", "documnets"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains(
            "no pipeline named \"documnets\": did you mean \"documents\"? (pipelines: documents)"
        ),
        "{err}"
    );

    let out = setup.runs(&["--run", "doc-nowhere"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("pipeline documents: no run \"doc-nowhere\" at any join (notify partition"),
        "{err}"
    );

    // The same spec without its pipelines.
    let plain = setup.dir.path().join("plain.yaml");
    std::fs::write(&plain, SPEC.split("pipelines:").next().unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .arg("runs")
        .arg(&plain)
        .args(["--redis", setup.server.url().as_str()])
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("the spec has no pipelines"),
        "{out:?}"
    );
}

#[test]
fn status_shows_each_join_s_runs_in_flight_and_the_oldest_wait() {
    let setup = Setup::start();

    // Before any run: the join is there, with nothing in flight.
    let out = setup.queuegen(&["status"], &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let join = &json["pipelines"][0]["joins"][0];
    assert_eq!(join["join"], "notify");
    assert_eq!(
        (&join["in_flight"], &join["oldest"]),
        (&0.into(), &Value::Null)
    );
    let text = stdout(&setup.queuegen(&["status"], &[]));
    assert!(
        text.contains("\npipeline documents join notify (after index): no runs in flight\n"),
        "{text}"
    );

    runs_of_every_kind(&setup);
    let out = setup.queuegen(&["status"], &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["queues"].as_array().unwrap().len(), 3, "{json}");
    let pipelines = json["pipelines"].as_array().unwrap();
    assert_eq!(pipelines.len(), 1, "{json}");
    assert_eq!(pipelines[0]["pipeline"], "documents");
    let join = &pipelines[0]["joins"][0];
    assert_eq!(join["join"], "notify");
    assert_eq!(join["after"], serde_json::json!(["index"]));
    // Only doc-open is in flight (doc-done was published, doc-failed failed).
    assert_eq!(join["in_flight"], 1, "{json}");
    assert_eq!(join["oldest"]["run_id"], "doc-open");
    assert_eq!(join["oldest"]["waiting"], 2);
    let age = join["oldest"]["age_ms"].as_u64().unwrap();
    assert!(age < 60_000, "{json}");
    assert_eq!(
        join["runs"].as_array().unwrap().len(),
        1,
        "read with limit 1"
    );
    let partition = join["oldest"]["partition"].as_u64().unwrap();

    let out = setup.queuegen(&["status"], &[]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|line| line.starts_with("pipeline documents join notify"))
        .unwrap_or_else(|| panic!("a line for the join: {text}"));
    assert!(
        line.starts_with(
            "pipeline documents join notify (after index): 1 run in flight, oldest waiting "
        ) && line.ends_with(&format!("(run doc-open, partition {partition})")),
        "{line}"
    );
    // After the queues, before the footnote.
    let at = text.find(line).unwrap();
    assert!(at > text.rfind("queue notify (group").unwrap(), "{text}");
    assert!(at < text.find("HISTORY counts").unwrap(), "{text}");

    // With --queue: the pipelines that queue is a stage of.
    let out = setup.queuegen(&["status"], &["--queue", "index", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pipelines"][0]["joins"][0]["in_flight"], 1, "{json}");

    // A spec without pipelines: an empty list, and no line.
    let plain = setup.dir.path().join("plain.yaml");
    std::fs::write(&plain, SPEC.split("pipelines:").next().unwrap()).unwrap();
    let run = |json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_queuegen"));
        command
            .arg("status")
            .arg(&plain)
            .args(["--redis", setup.server.url().as_str()])
            .env_remove("REDIS_URL")
            .env("NO_COLOR", "1");
        if json {
            command.arg("--json");
        }
        command.output().unwrap()
    };
    let json: Value = serde_json::from_slice(&run(true).stdout).unwrap();
    assert_eq!(json["pipelines"], serde_json::json!([]));
    assert!(!stdout(&run(false)).contains("pipeline "));
}
