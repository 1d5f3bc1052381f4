//! The state the dashboard tests build on a private redis-server, with
//! exact numbers to find on the pages: the example spec applied, then on
//! queue `ocr` partition 3 five jobs published, three delivered to
//! `worker-a`, one of those dead-lettered and one scheduled for retry; and
//! two jobs published on queue `notification` partition 1.
//!
//! So `ocr` shows undelivered 2, pending 1, retries 1, dead letters 1,
//! consumers 1; `notification` undelivered 2 and nothing else.

use std::process::Command;

use queuegen_runtime::functions::{self, Function};
use queuegen_tests::RedisServer;

pub const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/docs-pipeline/queues.yaml"
);
pub const OCR_READY: &str = "work:{ocr-03}:ready";
pub const OCR_DEAD: &str = "work:{ocr-03}:dead";
const OCR_RETRY: &str = "work:{ocr-03}:retry";
const OCR_RETRY_JOBS: &str = "work:{ocr-03}:retry-jobs";
const NOTIFICATION_READY: &str = "work:{notification-01}:ready";

/// What the state holds, for the assertions.
pub struct Built {
    /// The dead letter of `job-0`.
    pub dead_id: String,
}

pub fn apply(server: &RedisServer) {
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["apply", EXAMPLE, "--redis", &server.url()])
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs");
    assert!(out.status.success(), "{out:?}");
}

fn library() -> String {
    queuegen::gen::functions::library_name("docs-pipeline")
}

fn publish(
    conn: &mut redis::Connection,
    ready: &str,
    job_id: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("job_id", job_id.to_owned()),
        ("type", "OcrRequested".to_owned()),
        ("tenant", "acme".to_owned()),
        ("schema", "1".to_owned()),
        ("created_at", "2026-12-02T11:51:41.123Z".to_owned()),
        ("trace_id", "0123456789abcdef0123456789abcdef".to_owned()),
        ("attempt", "1".to_owned()),
        ("subject_ref", format!("scan-{job_id}.pdf")),
        ("priority", "high".to_owned()),
    ];
    fields.extend(
        extra
            .iter()
            .map(|(name, value)| (*name, (*value).to_owned())),
    );
    redis::cmd("XADD")
        .arg(ready)
        .arg("*")
        .arg(&fields)
        .query(conn)
        .expect("XADD")
}

/// Applies the example spec and builds the state described above.
pub fn build(server: &RedisServer) -> Built {
    apply(server);
    let mut conn = server.connection();
    let mut ids = Vec::new();
    for n in 0..5 {
        // job-0 carries a field the spec does not declare: pages must withhold it.
        let extra: &[(&str, &str)] = if n == 0 {
            &[("api_token", "hunter2-secret")]
        } else {
            &[]
        };
        ids.push(publish(&mut conn, OCR_READY, &format!("job-{n}"), extra));
    }
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP",
            "ocr-workers",
            "worker-a",
            "COUNT",
            "3",
            "STREAMS",
            OCR_READY,
            ">",
        ])
        .query(&mut conn)
        .expect("XREADGROUP");
    let marker = format!("work:{{ocr-03}}:marker:dead:{}", ids[0]);
    let call = functions::DeadLetterCall {
        ready_key: OCR_READY,
        dead_key: OCR_DEAD,
        marker_key: &marker,
        group: "ocr-workers",
        consumer: "worker-a",
        source_id: &ids[0],
        reason: "permanent",
        detail: "scan is not a PDF",
        deliveries: 1,
        marker_ttl_ms: 600_000,
        dead_letter_max_len: 1000,
    };
    let (_, dead_id): (String, String) =
        functions::command(&Function::DeadLetter.in_library(&library()), &call)
            .query(&mut conn)
            .expect("FCALL dead_letter");
    let (seconds, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    let due_ms = (seconds + 3_600) * 1_000;
    let marker = format!("work:{{ocr-03}}:marker:retry:{}", ids[1]);
    let call = functions::Reschedule {
        defer: false,
        ready_key: OCR_READY,
        retry_key: OCR_RETRY,
        retry_jobs_key: OCR_RETRY_JOBS,
        marker_key: &marker,
        group: "ocr-workers",
        consumer: "worker-a",
        source_id: &ids[1],
        due_ms,
        reason: "transient",
        marker_ttl_ms: 600_000,
        accepted_schemas: "1",
    };
    let _: (String, String) =
        functions::command(&Function::RetrySchedule.in_library(&library()), &call)
            .query(&mut conn)
            .expect("FCALL retry_schedule");
    for n in 0..2 {
        publish(&mut conn, NOTIFICATION_READY, &format!("note-{n}"), &[]);
    }
    Built { dead_id }
}

/// XLEN of a stream.
pub fn xlen(server: &RedisServer, key: &str) -> u64 {
    redis::cmd("XLEN")
        .arg(key)
        .query(&mut server.connection())
        .expect("XLEN")
}

/// Every key with its contents, to prove a refused request wrote nothing.
pub fn keyspace(server: &RedisServer) -> Vec<(String, Vec<u8>)> {
    let mut conn = server.connection();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).expect("DUMP");
            (key, dump)
        })
        .collect()
}

/// Publishes one more job on `notification` partition 1.
#[allow(dead_code)] // used by the browser test only
pub fn publish_notification(server: &RedisServer, job_id: &str) {
    publish(&mut server.connection(), NOTIFICATION_READY, job_id, &[]);
}

/// A dashboard of every queue and pipeline of `spec`, as `queuegen dashboard` builds it.
#[allow(dead_code)] // used by the handler tests only
pub fn dashboard_of(
    spec: &queuegen::spec::model::Spec,
    redis: queuegen_runtime::Redis,
    options: queuegen_dashboard::DashboardOptions,
) -> queuegen_dashboard::Dashboard {
    let queues = spec
        .queues
        .iter()
        .map(|queue| {
            let config = queuegen::runtime_config::queue_config(spec, queue);
            queuegen_dashboard::DashboardQueue::new(spec, config).expect("the queue is in the spec")
        })
        .collect();
    let pipelines = queuegen_dashboard::DashboardPipeline::of_spec(spec, &[], |queue| {
        queuegen::runtime_config::queue_config(spec, queue)
    });
    queuegen_dashboard::Dashboard::with_pipelines(queues, pipelines, redis, options)
}

/// Opens run `run_id` of the example's pipeline `documents` at its join
/// `document-ready`, as the stage workers would with the library's
/// `run_settle`: the OCR job hands on one page to index and one thumbnail,
/// and the page is done (result `s3://pages/<run_id>/0`); the thumbnail is
/// still outstanding. Apply the example spec first.
#[allow(dead_code)] // used by the browser test and the monitor user's handler test
pub fn open_run(server: &RedisServer, run_id: &str) {
    use queuegen_runtime::functions::{command, RunOutcome, RunSettle, RunSettled};
    use queuegen_runtime::runs::{child_job_id, join_job_id};

    let spec = queuegen::spec::check_file(std::path::Path::new(EXAMPLE))
        .expect("the example reads")
        .spec
        .expect("the example spec is valid");
    let config =
        queuegen::runtime_config::queue_config(&spec, spec.queue("document-ready").unwrap());
    let partition = queuegen_runtime::partition::run_partition(&config, run_id);
    let keys = config.run_keys(partition, "documents", run_id);
    let join_id = join_job_id(run_id, "document-ready");
    let envelope = vec![
        "job_id",
        join_id.as_str(),
        "type",
        "DocumentReady",
        "tenant",
        "acme",
        "schema",
        "1",
        "subject_ref",
        run_id,
    ];
    let page = child_job_id(run_id, run_id, "index", 0);
    let thumbnail = child_job_id(run_id, run_id, "thumbnail", 0);
    let result = format!("s3://pages/{run_id}/0");
    let mut conn = server.connection();
    let mut settle = |job_id: &str, children: &[&str], result_ref: &str| -> RunSettled {
        let call = RunSettle {
            run_key: &keys.run,
            out_key: &keys.out,
            settled_key: &keys.settled,
            ready_key: &keys.ready,
            runs_key: &keys.runs,
            pipeline: "documents",
            run_id,
            job_id,
            outcome: RunOutcome::Done,
            counted: job_id != run_id,
            fails_run: false,
            result_ref,
            keep_ms: 3_600_000,
            children,
            join_envelope: (job_id == run_id).then_some(&envelope),
        };
        let replies: Vec<RunSettled> = command(&config.function(Function::RunSettle), &call)
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("run_settle {run_id} {job_id}: {err}"));
        let [reply] = <[RunSettled; 1]>::try_from(replies).expect("one reply for one job");
        reply
    };
    let opened = settle(run_id, &[page.as_str(), thumbnail.as_str()], "");
    assert_eq!(opened, RunSettled::Settled { outstanding: 2 });
    let done = settle(&page, &[], &result);
    assert_eq!(done, RunSettled::Settled { outstanding: 1 });
}
