//! Older schema versions: golden envelopes of every accepted version decode, older structs
//! round-trip into the current one, and a worker meets versions N-1, N and N+1 in one stream.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docs_pipeline::queues::envelopes::{
    DocumentReady, ExportRequested, IndexRequested, NotificationRequested, OcrRequested,
    OcrRequestedEngine, OcrRequestedPriority, OcrRequestedV1, ReconciliationRequested,
    ThumbnailRequested,
};
use docs_pipeline::queues::ocr;
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::envelope::{self, Header};
use queuegen_runtime::runs::Step;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{Envelope, FieldMap, JobContext, JobError, Outcome, Redis, Timestamp};
use queuegen_tests::support::{dead_letters, init_tracing, pending_count, wait_until};
use queuegen_tests::{library, RedisServer};

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/docs-pipeline")
}

/// `(envelope, version, path)` of every committed golden envelope.
fn golden_files() -> Vec<(String, u32, PathBuf)> {
    let dir = example_dir().join("fixtures/envelopes");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures/envelopes") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|ext| ext.to_str()) != Some("json") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (name, version) = stem
            .split_once(".v")
            .unwrap_or_else(|| panic!("{stem}: golden files are named <Envelope>.v<N>.json"));
        files.push((name.to_owned(), version.parse().unwrap(), path));
    }
    files.sort();
    files
}

/// A golden envelope: field/value pairs as Redis holds them.
fn read_golden(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    map.into_iter()
        .map(|(field, value)| {
            let value = value
                .as_str()
                .unwrap_or_else(|| panic!("{}: `{field}` must be a string", path.display()));
            (field, value.to_owned())
        })
        .collect()
}

fn decode_as<E: Envelope + std::fmt::Debug>(pairs: &[(String, String)]) -> String {
    let fields = FieldMap::from_pairs(E::TYPE, pairs).unwrap();
    match envelope::decode::<E>(&fields) {
        Ok((header, body)) => format!("{header:#?}\n{body:#?}"),
        Err(err) => panic!("{} does not decode: {err}", E::TYPE),
    }
}

/// As [`decode_as`], for the envelope of a pipeline stage handed jobs: its
/// run (`run_id`, `parent`) too.
fn decode_stage_as<E: Envelope + std::fmt::Debug>(pairs: &[(String, String)]) -> String {
    let fields = FieldMap::from_pairs(E::TYPE, pairs).unwrap();
    let run = envelope::decode_run_link(&fields)
        .unwrap_or_else(|err| panic!("{}'s run does not decode: {err}", E::TYPE))
        .unwrap_or_else(|| panic!("{} is handed on, so it carries its run", E::TYPE));
    format!("{}\n{run:#?}", decode_as::<E>(pairs))
}

#[test]
fn every_accepted_version_has_a_golden_envelope_and_nothing_else_does() {
    let spec = queuegen::spec::check_file(&example_dir().join("queues.yaml"))
        .unwrap()
        .spec
        .expect("the example spec is valid");
    let found: Vec<(String, u32)> = golden_files()
        .into_iter()
        .map(|(name, version, _)| (name, version))
        .collect();
    let mut expected = Vec::new();
    for envelope in &spec.envelopes {
        for version in &envelope.accepts {
            expected.push((envelope.name.clone(), *version));
        }
    }
    expected.sort();
    assert_eq!(
        found, expected,
        "fixtures/envelopes must hold exactly one golden entry per accepted version"
    );
}

#[test]
fn golden_envelopes_of_every_accepted_version_decode() {
    for (name, version, path) in golden_files() {
        let pairs = read_golden(&path);
        let decoded = match name.as_str() {
            "OcrRequested" => decode_as::<OcrRequested>(&pairs),
            "NotificationRequested" => decode_as::<NotificationRequested>(&pairs),
            "ExportRequested" => decode_as::<ExportRequested>(&pairs),
            "ReconciliationRequested" => decode_as::<ReconciliationRequested>(&pairs),
            "IndexRequested" => decode_stage_as::<IndexRequested>(&pairs),
            "ThumbnailRequested" => decode_stage_as::<ThumbnailRequested>(&pairs),
            "DocumentReady" => decode_stage_as::<DocumentReady>(&pairs),
            other => panic!("golden envelope of unknown envelope {other}"),
        };
        insta::assert_snapshot!(format!("golden_{name}_v{version}"), decoded);
    }
}

fn header(schema: u32) -> Header {
    Header {
        job_id: "job-1".into(),
        envelope_type: "OcrRequested".into(),
        tenant: "acme".into(),
        schema,
        created_at: Timestamp::from_unix_millis(1_780_000_000_000),
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        attempt: 1,
        prev_id: None,
        reason: None,
    }
}

fn round_trip<W: Envelope>(body: &W) -> OcrRequested {
    let pairs = envelope::encode(&header(W::SCHEMA), body).unwrap();
    let fields = FieldMap::from_pairs(W::TYPE, &pairs).unwrap();
    let (header, decoded) = envelope::decode::<OcrRequested>(&fields).unwrap();
    assert_eq!(
        header.schema,
        W::SCHEMA,
        "the entry keeps the version it was written with"
    );
    decoded
}

#[test]
fn an_older_version_decodes_into_the_current_struct_through_its_conversion() {
    let v1 = OcrRequestedV1 {
        subject_ref: "s3://scans/1.pdf".into(),
        pages: Some(3),
        priority: OcrRequestedPriority::Low,
    };
    let expected = OcrRequested {
        subject_ref: "s3://scans/1.pdf".into(),
        pages: Some(3),
        priority: OcrRequestedPriority::Low,
        engine: OcrRequestedEngine::Tesseract,
    };
    assert_eq!(OcrRequested::from(v1.clone()), expected);
    assert_eq!(round_trip(&v1), expected);

    let current = OcrRequested {
        engine: OcrRequestedEngine::CloudVision,
        ..expected
    };
    assert_eq!(round_trip(&current), current);
}

#[test]
fn producers_write_the_current_version() {
    let body = OcrRequested {
        subject_ref: "s3://scans/2.pdf".into(),
        pages: None,
        priority: OcrRequestedPriority::Normal,
        engine: OcrRequestedEngine::Tesseract,
    };
    let pairs = envelope::encode(&header(1), &body).unwrap();
    let schema = pairs.iter().find(|(name, _)| *name == "schema").unwrap();
    assert_eq!(
        schema.1, "2",
        "the header's schema is the struct's, whatever was asked"
    );
}

/// Records each job it handles with the body it decoded.
#[derive(Clone, Default)]
struct Recorder {
    handled: Arc<Mutex<BTreeMap<String, OcrRequested>>>,
}

impl ocr::Handler for Recorder {
    async fn handle(
        &self,
        job: OcrRequested,
        ctx: &JobContext,
    ) -> Result<Step<ocr::Next>, JobError> {
        self.handled
            .lock()
            .unwrap()
            .insert(ctx.job_id().to_owned(), job);
        // Hands nothing on: the run ends at the first stage.
        Ok(Outcome::Done.into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_2_worker_handles_versions_1_and_2_and_dead_letters_3() {
    init_tracing();
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load_example(&redis).await;
    let config = ocr::CONFIG;
    ensure_groups(&redis, &config).await.unwrap();
    let mut conn = server.async_connection().await;

    // One partition's stream holds entries of schema 1 (an older producer,
    // or a replay), 2 (current) and 3 (a producer deployed before this worker).
    let golden = |version: u32| {
        read_golden(&example_dir().join(format!("fixtures/envelopes/OcrRequested.v{version}.json")))
    };
    let mut newer = golden(2);
    for (field, value) in &mut newer {
        match field.as_str() {
            "job_id" => *value = "ocr-from-the-future".into(),
            "schema" => *value = "3".into(),
            _ => {}
        }
    }
    newer.push(("source_language".into(), "de".into()));
    let key = config.ready_key(StreamSlot::new(0));
    let mut ids = Vec::new();
    for entry in [golden(1), golden(2), newer] {
        let id: String = redis::cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg(&entry)
            .query_async(&mut conn)
            .await
            .unwrap();
        ids.push(id);
    }

    let recorder = Recorder::default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(ocr::worker(&redis, recorder.clone()).run_until(async {
        let _ = stopped.await;
    }));
    let handled = recorder.handled.clone();
    let dead_conn = conn.clone();
    wait_until(
        Duration::from_secs(15),
        "versions 1 and 2 handled, version 3 dead-lettered",
        || {
            let handled = handled.lock().unwrap().len();
            let mut conn = dead_conn.clone();
            async move { handled == 2 && dead_letters(&mut conn, &ocr::CONFIG).await.len() == 1 }
        },
    )
    .await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();

    let handled = recorder.handled.lock().unwrap().clone();
    assert_eq!(
        handled["ocr-golden-1"],
        OcrRequested {
            subject_ref: "s3://scans/golden-1.pdf".into(),
            pages: Some(4),
            priority: OcrRequestedPriority::High,
            engine: OcrRequestedEngine::Tesseract,
        },
        "schema 1 is converted: the engine it predates takes its default"
    );
    assert_eq!(
        handled["ocr-golden-2"],
        OcrRequested {
            subject_ref: "s3://scans/golden-2.pdf".into(),
            pages: None,
            priority: OcrRequestedPriority::Normal,
            engine: OcrRequestedEngine::CloudVision,
        }
    );

    let dead = dead_letters(&mut conn, &config).await;
    let (partition, _, letter) = &dead[0];
    assert_eq!(*partition, StreamSlot::new(0));
    assert_eq!(letter["reason"], "unsupported_schema", "{letter:?}");
    assert!(
        letter["detail"].contains("schema version 3"),
        "the dead letter names the version seen: {letter:?}"
    );
    assert_eq!(letter["source_id"], ids[2]);
    assert_eq!(letter["job_id"], "ocr-from-the-future");
    assert_eq!(letter["schema"], "3", "{letter:?}");
    assert!(
        letter["envelope"].contains("\"source_language\",\"de\""),
        "the original fields are kept for replay: {letter:?}"
    );
    assert_eq!(
        pending_count(&mut conn, &key, &config.group).await,
        0,
        "every entry reached a durable state"
    );
    assert_eq!(
        (report.done, report.decode_errors, report.dead_lettered),
        (2, 1, 1),
        "{report:?}"
    );
}

#[test]
fn schema_1_climbs_a_generated_step_and_a_hand_written_one() {
    use queuegen_tests::queues::envelopes::{EvolvedJob, EvolvedJobMode};

    let entry = [
        ("job_id", "evolved-1"),
        ("type", "EvolvedJob"),
        ("tenant", "acme"),
        ("schema", "1"),
        ("created_at", "2026-01-01T00:00:00.000Z"),
        ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
        ("attempt", "1"),
        ("subject_ref", "doc-1"),
        ("pages", "0"),
        ("legacy_mode", "careful"),
    ];
    let fields = FieldMap::from_pairs("EvolvedJob", &entry).unwrap();
    let (_, job) = envelope::decode::<EvolvedJob>(&fields).unwrap();
    assert_eq!(
        job,
        EvolvedJob {
            subject_ref: "doc-1".into(),
            page_count: 1,
            mode: EvolvedJobMode::Fast,
        },
        "1 -> 2 added the default mode; the hand-written 2 -> 3 renamed pages and counts 0 as 1"
    );

    // Schema 2 was never accepted: its entries are refused, not guessed at.
    let mut v2 = entry.to_vec();
    v2[3] = ("schema", "2");
    let error = envelope::decode::<EvolvedJob>(&FieldMap::from_pairs("EvolvedJob", &v2).unwrap())
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("schema version 2 is not accepted"),
        "{error}"
    );
}

#[test]
fn absent_fields_take_the_specs_default_even_when_it_is_not_the_zero_value() {
    use queuegen_tests::queues::envelopes::DefaultsJob;

    let entry = [
        ("job_id", "defaults-1"),
        ("type", "DefaultsJob"),
        ("tenant", "acme"),
        ("schema", "1"),
        ("created_at", "2026-01-01T00:00:00.000Z"),
        ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
        ("attempt", "1"),
        ("subject_ref", "doc-1"),
    ];
    let (_, job) =
        envelope::decode::<DefaultsJob>(&FieldMap::from_pairs("DefaultsJob", &entry).unwrap())
            .unwrap();
    assert_eq!(
        job,
        DefaultsJob {
            subject_ref: "doc-1".into(),
            searchable: true,
            max_retries: 3,
            language: "en".into(),
            not_before: Timestamp::from_unix_millis(1_767_225_600_000),
        }
    );
}
