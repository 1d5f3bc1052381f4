//! A handler whose behaviour each job's `subject_ref` picks, with its effect recorded durably in Redis.
//!
//! The transition-crash test runs it in a child process that is killed at a
//! failpoint and then in the test process that recovers the jobs, so both
//! must agree on what each job does and where its effect is recorded.

use queuegen_runtime::{Handler, JobContext, JobError, Outcome, QueueConfig};

use crate::fixtures::TestJob;

/// What a job does, by the prefix of its `subject_ref`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `ok-…`: done at once.
    Ok,
    /// `flaky-…`: a transient error on attempt 1, done on any later attempt.
    Flaky,
    /// `broken-…`: a permanent error every time.
    Broken,
}

impl Script {
    pub fn of(subject_ref: &str) -> Script {
        match subject_ref.split('-').next() {
            Some("flaky") => Script::Flaky,
            Some("broken") => Script::Broken,
            _ => Script::Ok,
        }
    }
}

/// Records each done job as `job_id -> stream id` in the hash [`handled_key`],
/// once (`HSETNX`): the idempotent durable effect the contract protects.
#[derive(Clone)]
pub struct Scripted {
    conn: redis::aio::ConnectionManager,
    handled_key: String,
}

/// The hash of done jobs of a queue.
pub fn handled_key(config: &QueueConfig) -> String {
    format!("{}:handled:{}", config.key_prefix, config.queue)
}

impl Scripted {
    pub async fn connect(url: &str, config: &QueueConfig) -> redis::RedisResult<Self> {
        let conn = redis::Client::open(url)?.get_connection_manager().await?;
        Ok(Scripted {
            conn,
            handled_key: handled_key(config),
        })
    }
}

impl Handler<TestJob> for Scripted {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        match Script::of(&job.subject_ref) {
            Script::Broken => Err(JobError::permanent("the document is broken")),
            Script::Flaky if ctx.attempt() == 1 => {
                Err(JobError::transient("the dependency is briefly down"))
            }
            Script::Ok | Script::Flaky => {
                let _first: bool = redis::cmd("HSETNX")
                    .arg(&self.handled_key)
                    .arg(ctx.job_id())
                    .arg(ctx.stream_id())
                    .query_async(&mut self.conn.clone())
                    .await?;
                Ok(Outcome::Done)
            }
        }
    }
}
