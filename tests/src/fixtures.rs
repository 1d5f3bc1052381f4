//! The test envelope and queue settings, taken from the generated code of tests/queues.yaml.

use queuegen_runtime::QueueConfig;
use std::borrow::Cow;

pub use crate::queues::envelopes::TestJob;

impl TestJob {
    /// Largest `subject_ref` the envelope accepts (`max_bytes` in tests/queues.yaml).
    pub const SUBJECT_REF_MAX_BYTES: usize = 200;

    pub fn new(subject_ref: impl Into<String>, pages: Option<u32>) -> Self {
        TestJob {
            subject_ref: subject_ref.into(),
            pages,
        }
    }
}

/// The generated `jobs` queue settings under `key_prefix` with `partitions`;
/// tests adjust other fields with struct update syntax.
pub fn test_config(key_prefix: &str, partitions: u16) -> QueueConfig {
    QueueConfig {
        key_prefix: owned(key_prefix),
        partitions,
        ..crate::queues::jobs::CONFIG
    }
}

/// The `jobs` queue settings under `key_prefix` with `partitions` and quick
/// recovery (claim after 2 s idle, every 200 ms; a 2 s shutdown budget), so
/// that a job whose ack met a cut connection is claimed and settled within
/// a test.
pub fn quick_recovery_config(key_prefix: &str, partitions: u16) -> QueueConfig {
    let mut config = test_config(key_prefix, partitions);
    config.claim.min_idle = std::time::Duration::from_secs(2);
    config.claim.every = std::time::Duration::from_millis(200);
    config.handler.shutdown_budget = std::time::Duration::from_secs(2);
    config
}

/// The generated `retrying` queue settings (short backoff, claim and poison
/// timings) under `key_prefix`.
pub fn retrying_config(key_prefix: &str) -> QueueConfig {
    QueueConfig {
        key_prefix: owned(key_prefix),
        ..crate::queues::retrying::CONFIG
    }
}

/// A name for a `QueueConfig` built at run time (generated code borrows literals).
pub fn owned(text: &str) -> Cow<'static, str> {
    Cow::Owned(text.to_owned())
}

/// The field/value pairs of a `TestJob` (`subject_ref` "ok") with `job_id`,
/// attempt 1, as the producer writes them: for tests that `XADD` an entry
/// themselves (with an ID of their choosing).
pub fn test_job_pairs(job_id: &str) -> Vec<(&'static str, String)> {
    use queuegen_runtime::envelope::{self, Envelope, Header};
    let header = Header {
        job_id: job_id.into(),
        envelope_type: TestJob::TYPE.into(),
        tenant: "acme".into(),
        schema: TestJob::SCHEMA,
        created_at: queuegen_runtime::Timestamp::now(),
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        attempt: 1,
        prev_id: None,
        reason: None,
    };
    envelope::encode(&header, &TestJob::new("ok", None)).expect("a TestJob encodes")
}
