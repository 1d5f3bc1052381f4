//! What a valid spec becomes: the normalized model with every default filled.

use std::path::Path;
use std::time::Duration;

use queuegen::spec::model::{
    Deployment, FieldType, GroupStart, Jitter, PostgresSettings, ResultStore,
};
use queuegen::spec::{check_file, check_str};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn the_example_becomes_the_model() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/docs-pipeline/queues.yaml");
    let checked = check_file(&path).expect("readable");
    assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
    let spec = checked.spec.expect("a model");
    assert_eq!(spec.service, "docs-pipeline");
    assert_eq!(spec.redis.key_prefix, "work");
    let names: Vec<_> = spec.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ocr",
            "index",
            "thumbnail",
            "document-ready",
            "notification",
            "export",
            "reconciliation"
        ]
    );
    let ocr = spec.queue("ocr").expect("ocr");
    assert_eq!(ocr.partition_by, ["tenant", "subject_ref"]);
    assert_eq!(ocr.claim.min_idle, secs(120));
    assert_eq!(ocr.retry.backoff.max, secs(600));
    assert_eq!(ocr.dead_letter.owner.as_deref(), Some("docs-oncall"));
    assert_eq!(
        spec.queue("export").unwrap().group.start,
        GroupStart::Beginning
    );
    let urgent = spec
        .envelope("NotificationRequested")
        .and_then(|e| e.field("urgent"))
        .expect("urgent");
    // Written as the string "false" in the example; normalized.
    assert_eq!(urgent.default.as_deref(), Some("false"));
    let postgres = spec
        .postgres
        .as_ref()
        .expect("export and reconciliation use it");
    assert_eq!(
        (postgres.schema.as_str(), postgres.pool_size),
        ("docs_pipeline", 16)
    );
    let in_postgres: Vec<_> = spec
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.results.is_some(), q.outbox))
        .collect();
    assert_eq!(
        in_postgres,
        [
            ("ocr", false, false),
            ("index", false, false),
            ("thumbnail", false, false),
            ("document-ready", false, false),
            ("notification", false, false),
            ("export", true, true),
            ("reconciliation", true, false),
        ]
    );
}

#[test]
fn defaults_are_filled() {
    let source = "\
version: 1
service: mailer
envelopes:
  MailRequested:
    schema: 2
    fields:
      message_ref: { type: string, max_bytes: 128 }
queues:
  mail:
    envelope: MailRequested
    dead_letter: { owner: mail-oncall }
    handler: { timeout: 2s }
";
    let spec = check_str(source, "q.yaml").spec.expect("valid");
    assert_eq!(spec.version, 1);
    assert_eq!(spec.redis.key_prefix, "mailer");
    assert_eq!(spec.redis.deployment, Deployment::Standalone);
    assert_eq!(spec.redis.min_version, "7.0");
    assert_eq!(spec.envelopes[0].accepts, [2]);
    let q = &spec.queues[0];
    assert_eq!(q.partitions, 1);
    assert_eq!(q.partition_by, ["job_id"]);
    assert_eq!(q.group.name, "mail-workers");
    assert_eq!(q.group.start, GroupStart::NewEntries);
    assert_eq!(q.handler.concurrency, 8);
    assert_eq!(q.handler.shutdown_budget, secs(10));
    // max(2 × 2s, 2s + max(1s, 0.5s)) = 4s.
    assert_eq!(q.claim.min_idle, secs(4));
    assert_eq!(q.claim.every, secs(10));
    assert_eq!(q.claim.batch, 50);
    assert_eq!(q.retry.max_attempts, 5);
    assert_eq!(q.retry.backoff.initial, secs(1));
    assert_eq!(q.retry.backoff.max, secs(300));
    assert_eq!(q.retry.backoff.factor, 2.0);
    assert_eq!(q.retry.backoff.jitter, Jitter::Full);
    assert_eq!(q.poison.max_deliveries, 5);
    assert_eq!(q.dead_letter.retention, secs(14 * 86_400));
    assert_eq!(q.dead_letter.max_len, 100_000);
    assert_eq!(q.retention.min_age, secs(3 * 86_400));
    assert_eq!(q.retention.trim_every, secs(60));
    assert_eq!(q.admission.refresh, secs(1));
    assert_eq!(q.payload.max_bytes, 65_536);
    assert_eq!(q.admission.max_oldest_ready_age, None);
    assert_eq!(q.alerts.dead_letters, None);
    // The default claim threshold for a 1s timeout sits exactly on the margin.
    let tight = source.replace("timeout: 2s", "timeout: 1s");
    let tight = check_str(&tight, "q.yaml")
        .spec
        .expect("the default passes its own check");
    assert_eq!(tight.queues[0].claim.min_idle, secs(2));
}

#[test]
fn every_key_is_read_and_normalized() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid/every_key.yaml");
    let checked = check_file(&path).expect("readable");
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    let spec = checked.spec.expect("valid");
    assert_eq!(spec.service, "media_pipeline");
    assert_eq!(spec.redis.key_prefix, "media");
    assert_eq!(spec.redis.deployment, Deployment::Cluster);
    assert_eq!(spec.redis.min_version, "7.2.4");
    assert_eq!(spec.redis.wait_replicas, 1);
    assert_eq!(spec.redis.wait_timeout, Duration::from_millis(250));
    let envelope = &spec.envelopes[0];
    assert_eq!(
        (envelope.schema, envelope.accepts.as_slice()),
        (3, &[2, 3][..])
    );
    let defaults: Vec<_> = envelope
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.default.as_deref()))
        .collect();
    assert_eq!(
        defaults,
        [
            ("source_ref", None),
            ("profile", Some("hd")),
            ("keep_audio", Some("true")),
            ("width", None),
            ("bitrate", Some("4000000")),
            ("offset_ms", Some("-250")),
            ("drift", None),
            ("not_before", Some("2024-01-31T09:30:00.000Z")),
            ("label", Some("")),
        ]
    );
    assert_eq!(
        envelope.field("profile").unwrap().ty,
        FieldType::Enum {
            values: vec!["sd".into(), "hd".into(), "uhd".into()]
        }
    );
    assert_eq!(envelope.field("label").unwrap().max_bytes, Some(1024));
    assert!(envelope.field("width").unwrap().optional);
    let q = &spec.queues[0];
    assert_eq!(q.partitions, 64);
    assert_eq!(q.group.name, "transcode-workers-v3");
    assert_eq!(q.group.start, GroupStart::Id("1700000000000-0".into()));
    assert_eq!(q.group.start.as_redis_arg(), "1700000000000-0");
    assert_eq!(q.handler.timeout, secs(600));
    assert_eq!(q.handler.concurrency, 4);
    assert_eq!(q.handler.shutdown_budget, secs(45));
    assert_eq!(q.claim.min_idle, secs(1500));
    assert_eq!(q.claim.every, secs(30));
    assert_eq!(q.claim.batch, 20);
    assert_eq!(q.retry.max_attempts, 4);
    assert_eq!(q.retry.backoff.initial, Duration::from_millis(250));
    assert_eq!(q.retry.backoff.max, secs(7200));
    assert_eq!(q.retry.backoff.factor, 1.5);
    assert_eq!(q.retry.backoff.jitter, Jitter::None);
    assert_eq!(q.poison.max_deliveries, 2);
    assert_eq!(q.dead_letter.retention, secs(30 * 86_400));
    assert_eq!(q.dead_letter.max_len, 5000);
    assert_eq!(q.retention.min_age, secs(10 * 86_400));
    assert_eq!(q.retention.trim_every, secs(300));
    assert_eq!(q.admission.refresh, secs(2));
    assert_eq!(q.payload.max_bytes, 1 << 20);
    assert_eq!(q.admission.max_oldest_ready_age, Some(secs(1800)));
    assert_eq!(q.alerts.oldest_pending_age, Some(secs(3600)));
    assert_eq!(q.alerts.oldest_ready_age, Some(secs(2700)));
    assert_eq!(q.alerts.dead_letters, Some(3));
    assert_eq!(q.results, Some(ResultStore::Postgres));
    assert!(q.outbox && q.uses_postgres());
    assert_eq!(
        spec.postgres,
        Some(PostgresSettings {
            schema: "media_queues".into(),
            pool_size: 8,
        })
    );
}

#[test]
fn postgres_defaults_only_when_a_queue_uses_it() {
    let source = |queue_keys: &str| {
        format!(
            "version: 1\nservice: mailer\nenvelopes:\n  MailRequested:\n    schema: 1\nqueues:\n  mail:\n    envelope: MailRequested\n    dead_letter: {{ owner: mail-oncall }}\n{queue_keys}"
        )
    };
    let plain = check_str(&source(""), "q.yaml").spec.expect("valid");
    let mail = &plain.queues[0];
    assert_eq!((mail.results, mail.outbox), (None, false));
    assert_eq!(plain.postgres, None);
    for keys in [
        "    results: postgres\n",
        "    outbox: true\n",
        "    results: postgres\n    outbox: false\n",
    ] {
        let spec = check_str(&source(keys), "q.yaml").spec.expect("valid");
        assert_eq!(
            spec.postgres,
            Some(PostgresSettings {
                schema: "queuegen".into(),
                pool_size: 16,
            }),
            "{keys}"
        );
    }
    // `outbox: false` alone uses nothing.
    let spec = check_str(&source("    outbox: false\n"), "q.yaml")
        .spec
        .expect("valid");
    assert_eq!(spec.postgres, None);
}

#[test]
fn a_spec_with_errors_has_no_model() {
    let checked = check_str("version: 1\nservice: x\n", "q.yaml");
    assert!(checked.has_errors());
    assert!(checked.spec.is_none());
    assert_eq!(checked.error_count(), 2, "{:#?}", checked.diagnostics);
}

#[test]
fn warnings_keep_the_model() {
    let source = "\
version: 1
service: mailer
envelopes:
  MailRequested:
    schema: 1
    fields:
      body: { type: string }
queues:
  mail:
    envelope: MailRequested
";
    let checked = check_str(source, "q.yaml");
    assert!(!checked.has_errors());
    assert_eq!(checked.warning_count(), 2, "{:#?}", checked.diagnostics);
    assert!(checked.spec.is_some());
}

#[test]
fn kubernetes_postgres_keys_are_read_with_their_defaults() {
    let source = |kubernetes: &str, queue_keys: &str| {
        format!(
            "version: 1\nservice: mailer\n{kubernetes}envelopes:\n  MailRequested:\n    schema: 1\nqueues:\n  mail:\n    envelope: MailRequested\n    dead_letter: {{ owner: mail-oncall }}\n{queue_keys}"
        )
    };
    let spec = |kubernetes: &str, queue_keys: &str| {
        let checked = check_str(&source(kubernetes, queue_keys), "q.yaml");
        assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
        checked.spec.expect("valid")
    };
    // Given: both read as written.
    let given = spec(
        "kubernetes: { postgres_secret: mailer-pg, psql_image: \"reg.example/psql:17\" }\n",
        "    results: postgres\n",
    );
    assert_eq!(
        given.kubernetes.postgres_secret.as_deref(),
        Some("mailer-pg")
    );
    assert_eq!(given.kubernetes.psql_image, "reg.example/psql:17");
    // Defaults: no Secret (the manifests then carry nothing of PostgreSQL),
    // the official image.
    let plain = spec("", "");
    assert_eq!(plain.kubernetes.postgres_secret, None);
    assert_eq!(plain.kubernetes.psql_image, "postgres:16-alpine");
    // A spec without a `kubernetes` section needs no Secret.
    let no_section = spec("", "    outbox: true\n");
    assert_eq!(no_section.kubernetes.postgres_secret, None);
}
