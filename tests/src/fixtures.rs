//! A hand-written envelope and queue settings for tests (the derive macro is tested elsewhere).

use std::time::Duration;

use queuegen_runtime::envelope::{Envelope, FieldMap, FieldWriter};
use queuegen_runtime::{Error, QueueConfig};

/// What `#[derive(Envelope)]` would generate for a two-field body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestJob {
    pub subject_ref: String,
    pub pages: Option<u32>,
}

impl TestJob {
    /// Largest `subject_ref` the envelope accepts.
    pub const SUBJECT_REF_MAX_BYTES: usize = 200;

    pub fn new(subject_ref: impl Into<String>, pages: Option<u32>) -> Self {
        TestJob {
            subject_ref: subject_ref.into(),
            pages,
        }
    }
}

impl Envelope for TestJob {
    const TYPE: &'static str = "TestJob";
    const SCHEMA: u32 = 2;
    const ACCEPTS: &'static [u32] = &[1, 2];

    fn encode_body(&self, out: &mut FieldWriter) -> Result<(), Error> {
        out.field(
            "subject_ref",
            &self.subject_ref,
            Some(Self::SUBJECT_REF_MAX_BYTES),
        )?;
        out.field("pages", &self.pages, None)
    }

    fn decode_body(fields: &FieldMap<'_>, _schema: u32) -> Result<Self, Error> {
        Ok(TestJob {
            subject_ref: fields.field("subject_ref", Some(Self::SUBJECT_REF_MAX_BYTES))?,
            pages: fields.field("pages", None)?,
        })
    }
}

/// Settings for a test queue `jobs` under `key_prefix`; tests adjust fields
/// with struct update syntax. Claiming is slow by default so that only tests
/// about recovery see it.
pub fn test_config(key_prefix: &str, partitions: u16) -> QueueConfig {
    QueueConfig {
        service: "queuegen-tests",
        // QueueConfig holds `&'static str` (generated code bakes in literals).
        key_prefix: Box::leak(key_prefix.to_owned().into_boxed_str()),
        queue: "jobs",
        partitions,
        partition_by: &["tenant", "subject_ref"],
        group: "workers",
        group_start: "0-0",
        handler_timeout: Duration::from_secs(10),
        concurrency: 8,
        shutdown_budget: Duration::from_secs(5),
        claim_min_idle: Duration::from_secs(60),
        claim_every: Duration::from_secs(30),
        claim_batch: 16,
        payload_max_bytes: 1024,
    }
}
