//! `pipelines:` in the spec: what the model holds, and what `check` refuses — each problem at its file:line:col with a fix, every one at once.

use queuegen::spec::check_str;
use queuegen::spec::model::OnDeadLetter;

/// A valid spec with five queues (`index` and `thumbnail` deduplicate, as
/// stages that are handed jobs must), then `pipelines:` as given.
fn spec(pipelines: &str) -> String {
    format!(
        "\
version: 1
service: docs
envelopes:
  Doc:
    schema: 1
    fields:
      doc_ref: {{ type: string, max_bytes: 64 }}
queues:
  ocr:
    envelope: Doc
    dead_letter: {{ owner: docs-oncall }}
  index:
    envelope: Doc
    dead_letter: {{ owner: docs-oncall }}
    dedup: {{ window: 1d }}
  thumbnail:
    envelope: Doc
    dead_letter: {{ owner: docs-oncall }}
    dedup: {{ window: 1d }}
  notify:
    envelope: Doc
    dead_letter: {{ owner: docs-oncall }}
  audit:
    envelope: Doc
    dead_letter: {{ owner: docs-oncall }}
pipelines:
{pipelines}"
    )
}

/// `line:column: message` of every error.
fn errors(source: &str) -> Vec<String> {
    let checked = check_str(source, "queues.yaml");
    checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
        .collect()
}

/// The line `pipelines:` is on in [`spec`]; the pipeline's lines follow.
const PIPELINES_LINE: usize = 26;

const DOCUMENTS: &str = concat!(
    "  documents:\n",
    "    stages:\n",
    "      ocr: { then: [index, thumbnail], max_children: 20 }\n",
    "      index: {}\n",
    "      thumbnail: {}\n",
    "      notify: { join: [index, thumbnail], on_dead_letter: continue }\n",
);

#[test]
fn a_valid_pipeline_fills_its_defaults() {
    let source = spec(DOCUMENTS);
    let checked = check_str(&source, "queues.yaml");
    let warnings: Vec<(usize, &str)> = checked
        .diagnostics
        .iter()
        .map(|d| (d.line, d.message.as_str()))
        .collect();
    assert_eq!(warnings, [], "a valid pipeline is worth no warning");
    let model = checked.spec.expect("valid");
    assert_eq!(model.pipelines.len(), 1);
    let pipeline = &model.pipelines[0];
    assert_eq!(pipeline.name, "documents");
    assert_eq!(pipeline.first, "ocr");
    assert_eq!(pipeline.keep, std::time::Duration::from_secs(7 * 24 * 3600));
    let names: Vec<&str> = pipeline.stages.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(names, ["ocr", "index", "thumbnail", "notify"]);
    let ocr = pipeline.stage("ocr").unwrap();
    assert_eq!(ocr.then, ["index", "thumbnail"]);
    assert_eq!(ocr.max_children, 20);
    assert_eq!(ocr.join, None);
    assert_eq!(pipeline.stage("index").unwrap().max_children, 100);
    let (stage, join) = pipeline.joins().next().unwrap();
    assert_eq!(stage.queue, "notify");
    assert_eq!(join.after, ["index", "thumbnail"]);
    assert_eq!(join.on_dead_letter, OnDeadLetter::Continue);
    assert_eq!(
        model.pipeline_of("thumbnail").map(|p| p.name.as_str()),
        Some("documents")
    );
    assert_eq!(model.pipeline_of("audit"), None);
    // Which jobs settle at the join: the stages it waits for, and the
    // first, which leads to them.
    for (stage, settles) in [
        ("ocr", true),
        ("index", true),
        ("thumbnail", true),
        ("notify", false),
    ] {
        assert_eq!(pipeline.leads_to_join(stage, "notify"), settles, "{stage}");
        let joins: Vec<&str> = pipeline.settles_at(stage).collect();
        assert_eq!(
            joins,
            if settles { vec!["notify"] } else { vec![] },
            "{stage}"
        );
    }
}

#[test]
fn a_join_defaults_to_failing_the_run_and_the_first_stage_may_be_written_anywhere() {
    let source = spec(
        "  documents:\n    keep: 2d\n    stages:\n      notify: { join: [index] }\n      index: {}\n      ocr: { then: [index] }\n",
    );
    let checked = check_str(&source, "queues.yaml");
    assert!(errors(&source).is_empty(), "{:#?}", checked.diagnostics);
    let model = checked.spec.unwrap();
    let pipeline = &model.pipelines[0];
    assert_eq!(pipeline.first, "ocr");
    assert_eq!(pipeline.keep, std::time::Duration::from_secs(2 * 24 * 3600));
    let (_, join) = pipeline.joins().next().unwrap();
    assert_eq!(join.on_dead_letter, OnDeadLetter::Fail);
}

#[test]
fn no_pipelines_is_none() {
    for empty in ["", "  \n"] {
        let source = spec(empty).replace("pipelines:\n", "") + empty;
        let checked = check_str(&source, "queues.yaml");
        assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
        assert!(checked.spec.unwrap().pipelines.is_empty());
    }
}

/// One refusal: the stages of pipeline `documents` (or more pipelines),
/// with `edits` made to the rest of [`spec`] (each text replaced once),
/// where the one error is, its message, and a part of its help.
struct Refusal {
    name: &'static str,
    pipelines: &'static str,
    edits: &'static [(&'static str, &'static str)],
    at: At,
    message: &'static str,
    help: &'static str,
}

/// Where a refusal's error is: (line, column) within `pipelines:` (the
/// line after it is 1), or in the spec before it, once edited.
enum At {
    Pipelines(usize, usize),
    Spec(usize, usize),
}

use At::{Pipelines, Spec};

/// The queues' and envelopes' lines that [`REFUSALS`] edit.
const INDEX_QUEUE: &str = "  index:\n    envelope: Doc\n";
const NOTIFY_QUEUE: &str = "  notify:\n    envelope: Doc\n";
const DOC_REF: &str = "      doc_ref: { type: string, max_bytes: 64 }\n";

const REFUSALS: &[Refusal] = &[
    Refusal {
        name: "an unknown queue is named with the closest",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      indx: {}\n      index: {}\n",
        edits: &[],
        at: Pipelines(4, 7),
        message: "no queue named `indx`",
        help: "did you mean `index`?",
    },
    Refusal {
        name: "then naming a queue outside the pipeline says how to add it",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index, thumbnail] }\n      index: {}\n",
        edits: &[],
        at: Pipelines(3, 28),
        message: "`then` names `thumbnail`, which is not a stage of this pipeline",
        help: "add `thumbnail: {}` to its `stages`",
    },
    Refusal {
        name: "a misspelt stage in a join gets did-you-mean",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [indx] }\n",
        edits: &[],
        at: Pipelines(5, 24),
        message: "`join` names `indx`, which is not a stage of this pipeline",
        help: "did you mean `index`?",
    },
    Refusal {
        name: "a cycle is named where it closes",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [thumbnail] }\n      thumbnail: { then: [index] }\n",
        edits: &[],
        at: Pipelines(5, 27),
        message: "`then` closes a cycle: index → thumbnail → index",
        help: "remove `index` from `thumbnail`'s `then`",
    },
    Refusal {
        name: "a stage handing jobs to itself",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [index] }\n",
        edits: &[],
        at: Pipelines(4, 23),
        message: "`index` hands jobs to itself",
        help: "hand on to a stage of its own",
    },
    Refusal {
        name: "a join waiting for itself",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index, notify] }\n",
        edits: &[],
        at: Pipelines(5, 31),
        message: "join `notify` waits for itself",
        help: "remove `notify` from its own `join`",
    },
    Refusal {
        // notify is a join over thumbnail, and thumbnail is handed jobs by notify.
        name: "a join waiting for a stage that runs after it",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index, thumbnail], then: [thumbnail] }\n      thumbnail: {}\n",
        edits: &[],
        at: Pipelines(5, 31),
        message: "join `notify` waits for `thumbnail`, which runs only after `notify`: notify → thumbnail → notify",
        help: "remove `thumbnail` from `notify`'s `join`",
    },
    Refusal {
        name: "then may not hand jobs to a join",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index, notify] }\n      index: {}\n      notify: { join: [index] }\n",
        edits: &[],
        at: Pipelines(3, 28),
        message: "`then` hands jobs to `notify`, which is a join",
        help: "add `ocr` to its `join`",
    },
    Refusal {
        name: "a stage handed jobs must deduplicate",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [audit] }\n      audit: {}\n",
        edits: &[],
        at: Pipelines(3, 21),
        message: "`ocr` hands jobs to `audit`, and queue `audit` has no `dedup`",
        help: "add `dedup: { window: 1d }` to queue `audit`",
    },
    Refusal {
        name: "two first stages",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      audit: {}\n",
        edits: &[],
        at: Pipelines(5, 7),
        message: "`audit` starts the pipeline too: no stage hands it jobs, and `ocr` already starts it",
        help: "move it to a pipeline of its own",
    },
    Refusal {
        name: "a queue in two pipelines",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n  reindex:\n    stages:\n      index: {}\n",
        edits: &[],
        at: Pipelines(7, 7),
        // The first pipeline's `index` is on line 30 of the spec.
        message: "queue `index` is already a stage of pipeline `documents` (line 30)",
        help: "declare a second queue",
    },
    Refusal {
        name: "a stage handed jobs carries an envelope with a body field named as a run field",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n",
        edits: &[(DOC_REF, "      parent: { type: string, max_bytes: 64 }\n")],
        at: Spec(7, 7),
        message: "field `parent` collides with the run field of the same name: queue `index` carries `Doc`, and is handed jobs in pipeline `documents`",
        help: "rename the field: a job a pipeline stage hands on carries `run_id` and `parent` after its header",
    },
    Refusal {
        // The same envelope on two stages handed jobs: said once.
        name: "a join's envelope with a body field named run_id",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index] }\n",
        edits: &[(DOC_REF, "      run_id: { type: string, max_bytes: 64 }\n")],
        at: Spec(7, 7),
        message: "field `run_id` collides with the run field of the same name: queue `index` carries `Doc`, and is handed jobs in pipeline `documents`",
        help: "rename the field",
    },
    Refusal {
        // 628 bytes of header + 71 of body fit 900; the run fields' 268 do not.
        name: "a stage handed jobs counts the run fields in its payload bound",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n",
        edits: &[(INDEX_QUEUE, "  index:\n    envelope: Doc\n    payload: { max_bytes: 900 }\n")],
        at: Spec(14, 27),
        message: "900 bytes is less than the 967 bytes one Doc entry can need: 628 for the header fields + 268 for the run fields + 71 for the body fields; the run fields (`run_id` and `parent`) are counted because queue `index` is a stage of pipeline `documents` that is handed jobs",
        help: "raise payload.max_bytes to at least 967",
    },
    Refusal {
        // Without payload, the default is meant, at the queue's key.
        name: "the default payload bound of a stage handed jobs counts the run fields",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n",
        edits: &[(DOC_REF, "      doc_ref: { type: string, max_bytes: 64900 }\n")],
        at: Spec(12, 3),
        message: "65536 bytes (64KiB) (the default) is less than the 65803 bytes one Doc entry can need: 628 for the header fields + 268 for the run fields + 64907 for the body fields; the run fields (`run_id` and `parent`) are counted because queue `index` is a stage of pipeline `documents` that is handed jobs",
        help: "raise payload.max_bytes to at least 65803",
    },
    Refusal {
        name: "a join's queue with partition_by",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index] }\n",
        edits: &[(NOTIFY_QUEUE, "  notify:\n    envelope: Doc\n    partition_by: [tenant]\n")],
        at: Spec(22, 19),
        message: "partition_by is never used: queue `notify` is a join of pipeline `documents`",
        help: "remove partition_by: a join's job goes to the partition its run ID hashes to",
    },
    Refusal {
        name: "a schedule publishing to a stage handed jobs",
        pipelines: "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n",
        edits: &[(
            "pipelines:\n",
            "schedules:\n  nightly:\n    queue: index\n    every: 1h\n    body: { doc_ref: nightly }\npipelines:\n",
        )],
        at: Spec(28, 12),
        message: "schedule `nightly` publishes to queue `index`, a stage of pipeline `documents` that is handed jobs: its jobs would carry no run, and the stage's worker dead-letters a job without one",
        help: "schedule the pipeline's first stage",
    },
];

#[test]
fn each_refusal_is_one_error_where_it_is_with_a_fix() {
    for case in REFUSALS {
        let mut source = spec(case.pipelines);
        let mut added_lines = 0;
        for (from, to) in case.edits {
            assert_eq!(source.matches(from).count(), 1, "{}: {from}", case.name);
            source = source.replacen(from, to, 1);
            added_lines += to.lines().count() - from.lines().count();
        }
        let checked = check_str(&source, "queues.yaml");
        let errors: Vec<_> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .collect();
        assert_eq!(errors.len(), 1, "{}: {errors:#?}", case.name);
        let error = errors[0];
        let at = match case.at {
            Pipelines(line, column) => (PIPELINES_LINE + added_lines + line, column),
            Spec(line, column) => (line, column),
        };
        assert_eq!((error.line, error.column), at, "{}", case.name);
        assert_eq!(error.message, case.message, "{}", case.name);
        let help = error.help.as_deref().unwrap_or_default();
        assert!(help.contains(case.help), "{}: {help}", case.name);
        assert!(
            checked.spec.is_none(),
            "{}: an error leaves no model",
            case.name
        );
    }
}

#[test]
fn only_the_stages_handed_jobs_carry_the_run_fields() {
    // `ocr` starts the runs and `audit` is in no pipeline: their jobs carry
    // no run fields, so a body field may bear their names, and their
    // payload bound is the header's and the body's.
    let source = spec("  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n")
        .replace(
            "queues:\n  ocr:\n    envelope: Doc\n",
            "  Run:\n    schema: 1\n    fields:\n      run_id: { type: string, max_bytes: 64 }\n      parent: { type: string, max_bytes: 64 }\nqueues:\n  ocr:\n    envelope: Run\n    payload: { max_bytes: 800 }\n",
        )
        .replace(
            "  audit:\n    envelope: Doc\n",
            "  audit:\n    envelope: Run\n    partition_by: [run_id]\n",
        );
    let checked = check_str(&source, "queues.yaml");
    assert!(errors(&source).is_empty(), "{:#?}", checked.diagnostics);
    assert!(checked.spec.is_some());
}

#[test]
fn every_stage_handed_jobs_is_checked_at_once() {
    // Both stages' queues: the join's partition_by, and each payload bound.
    let source = spec(DOCUMENTS)
        .replace(
            DOC_REF,
            "      doc_ref: { type: string, max_bytes: 64 }\n      parent: { type: string, max_bytes: 8 }\n",
        )
        .replace(
            NOTIFY_QUEUE,
            "  notify:\n    envelope: Doc\n    partition_by: [doc_ref]\n    payload: { max_bytes: 900 }\n",
        );
    assert_eq!(
        errors(&source),
        [
            "8:7: field `parent` collides with the run field of the same name: queue `index` carries `Doc`, and is handed jobs in pipeline `documents`",
            "23:19: partition_by is never used: queue `notify` is a join of pipeline `documents`",
            "24:27: 900 bytes is less than the 981 bytes one Doc entry can need: 628 for the header fields + 268 for the run fields + 85 for the body fields; the run fields (`run_id` and `parent`) are counted because queue `notify` is a stage of pipeline `documents` that is handed jobs",
        ]
    );
}

#[test]
fn keys_that_need_another_key() {
    let source = spec(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { max_children: 5, on_dead_letter: continue }\n",
    );
    assert_eq!(
        errors(&source),
        [
            "30:30: max_children without `then`",
            "30:49: on_dead_letter without `join`",
        ]
    );
}

#[test]
fn bad_values_are_each_reported() {
    let source = spec(
        "  Documents:\n    keep: 10s\n    stages:\n      ocr: { then: [index, index], max_children: 0 }\n      index: {}\n      notify: { join: [], on_dead_letter: retry }\n",
    );
    assert_eq!(
        errors(&source),
        [
            "27:3: pipeline name `Documents` is not lowercase letters, digits, `_` and `-`",
            "28:11: keep 10s is shorter than 1m",
            "30:28: `index` is named twice in `then`",
            "30:50: must be at least 1, found 0",
            "32:23: join names no stage",
            "32:43: unknown dead-letter policy `retry`",
        ]
    );
}

#[test]
fn every_problem_of_several_pipelines_at_once() {
    let source = spec(
        "  documents:\n    stages:\n      ocr: { then: [indx] }\n      index: {}\n  other:\n    stages: {}\n",
    );
    let found = errors(&source);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(
        found[0].split_once(": ").unwrap().1,
        "`then` names `indx`, which is not a stage of this pipeline"
    );
    assert!(found[1].ends_with(": declares no stage"), "{found:#?}");
}
