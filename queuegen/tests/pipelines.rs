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

/// `(line, column, message, help)` of every error.
fn errors(source: &str) -> Vec<(usize, usize, String, String)> {
    let checked = check_str(source, "queues.yaml");
    checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| {
            (
                d.line,
                d.column,
                d.message.clone(),
                d.help.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn only_error(pipelines: &str) -> (usize, usize, String, String) {
    let source = spec(pipelines);
    let found = errors(&source);
    assert_eq!(found.len(), 1, "{found:#?}");
    let checked = check_str(&source, "queues.yaml");
    assert!(checked.spec.is_none(), "an error leaves no model");
    found.into_iter().next().unwrap()
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
    assert_eq!(
        warnings,
        [(
            PIPELINES_LINE,
            "pipelines are checked, but this queuegen generates nothing for them yet"
        )]
    );
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

#[test]
fn an_unknown_queue_is_named_with_the_closest() {
    let (line, column, message, help) =
        only_error("  documents:\n    stages:\n      ocr: { then: [index] }\n      indx: {}\n      index: {}\n");
    assert_eq!((line, column), (PIPELINES_LINE + 4, 7));
    assert_eq!(message, "no queue named `indx`");
    assert!(help.starts_with("did you mean `index`?"), "{help}");
}

#[test]
fn then_naming_a_queue_outside_the_pipeline_says_how_to_add_it() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index, thumbnail] }\n      index: {}\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 3, 28));
    assert_eq!(
        message,
        "`then` names `thumbnail`, which is not a stage of this pipeline"
    );
    assert!(
        help.contains("add `thumbnail: {}` to its `stages`"),
        "{help}"
    );
}

#[test]
fn a_misspelt_stage_in_a_join_gets_did_you_mean() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [indx] }\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 5, 24));
    assert_eq!(
        message,
        "`join` names `indx`, which is not a stage of this pipeline"
    );
    assert!(help.starts_with("did you mean `index`?"), "{help}");
}

#[test]
fn a_cycle_is_named_where_it_closes() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [thumbnail] }\n      thumbnail: { then: [index] }\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 5, 27));
    assert_eq!(message, "`then` closes a cycle: index → thumbnail → index");
    assert!(
        help.contains("remove `index` from `thumbnail`'s `then`"),
        "{help}"
    );
}

#[test]
fn a_stage_handing_to_itself() {
    let (line, column, message, _) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { then: [index] }\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 4, 23));
    assert_eq!(message, "`index` hands jobs to itself");
}

#[test]
fn a_join_waiting_for_itself() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index, notify] }\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 5, 31));
    assert_eq!(message, "join `notify` waits for itself");
    assert_eq!(help, "remove `notify` from its own `join`");
}

#[test]
fn a_join_downstream_of_what_it_waits_for_in_reverse() {
    // notify is a join over thumbnail, and thumbnail is handed jobs by notify.
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      notify: { join: [index, thumbnail], then: [thumbnail] }\n      thumbnail: {}\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 5, 31));
    assert_eq!(
        message,
        "join `notify` waits for `thumbnail`, which runs only after `notify`: notify → thumbnail → notify"
    );
    assert!(
        help.contains("remove `thumbnail` from `notify`'s `join`"),
        "{help}"
    );
}

#[test]
fn then_may_not_hand_jobs_to_a_join() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index, notify] }\n      index: {}\n      notify: { join: [index] }\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 3, 28));
    assert_eq!(message, "`then` hands jobs to `notify`, which is a join");
    assert!(help.contains("add `ocr` to its `join`"), "{help}");
}

#[test]
fn a_stage_handed_jobs_must_deduplicate() {
    let (line, column, message, help) =
        only_error("  documents:\n    stages:\n      ocr: { then: [audit] }\n      audit: {}\n");
    assert_eq!((line, column), (PIPELINES_LINE + 3, 21));
    assert_eq!(
        message,
        "`ocr` hands jobs to `audit`, and queue `audit` has no `dedup`"
    );
    assert!(
        help.starts_with("add `dedup: { window: 1d }` to queue `audit`"),
        "{help}"
    );
}

#[test]
fn two_first_stages() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n      audit: {}\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 5, 7));
    assert_eq!(
        message,
        "`audit` starts the pipeline too: no stage hands it jobs, and `ocr` already starts it"
    );
    assert!(help.contains("move it to a pipeline of its own"), "{help}");
}

#[test]
fn a_queue_in_two_pipelines() {
    let (line, column, message, help) = only_error(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: {}\n  reindex:\n    stages:\n      index: {}\n",
    );
    assert_eq!((line, column), (PIPELINES_LINE + 7, 7));
    assert_eq!(
        message,
        format!(
            "queue `index` is already a stage of pipeline `documents` (line {})",
            PIPELINES_LINE + 4
        )
    );
    assert!(help.contains("declare a second queue"), "{help}");
}

#[test]
fn keys_that_need_another_key() {
    let source = spec(
        "  documents:\n    stages:\n      ocr: { then: [index] }\n      index: { max_children: 5, on_dead_letter: continue }\n",
    );
    let found = errors(&source);
    let messages: Vec<(usize, usize, &str)> = found
        .iter()
        .map(|(l, c, m, _)| (*l, *c, m.as_str()))
        .collect();
    assert_eq!(
        messages,
        [
            (PIPELINES_LINE + 4, 30, "max_children without `then`"),
            (PIPELINES_LINE + 4, 49, "on_dead_letter without `join`"),
        ]
    );
}

#[test]
fn bad_values_are_each_reported() {
    let source = spec(
        "  Documents:\n    keep: 10s\n    stages:\n      ocr: { then: [index, index], max_children: 0 }\n      index: {}\n      notify: { join: [], on_dead_letter: retry }\n",
    );
    let found = errors(&source);
    let messages: Vec<(usize, usize, &str)> = found
        .iter()
        .map(|(l, c, m, _)| (*l, *c, m.as_str()))
        .collect();
    assert_eq!(
        messages,
        [
            (
                PIPELINES_LINE + 1,
                3,
                "pipeline name `Documents` is not lowercase letters, digits, `_` and `-`"
            ),
            (PIPELINES_LINE + 2, 11, "keep 10s is shorter than 1m"),
            (PIPELINES_LINE + 4, 28, "`index` is named twice in `then`"),
            (PIPELINES_LINE + 4, 50, "must be at least 1, found 0"),
            (PIPELINES_LINE + 6, 23, "join names no stage"),
            (PIPELINES_LINE + 6, 43, "unknown dead-letter policy `retry`"),
        ],
        "{found:#?}"
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
        found[0].2,
        "`then` names `indx`, which is not a stage of this pipeline"
    );
    assert_eq!(found[1].2, "declares no stage");
}
