//! Calls that add a new job: `publish_once`, `publish_batch` and `delay_schedule`.

use redis::{Cmd, ToRedisArgs};

use super::{fcall, Function, FunctionCall};

/// `publish_once`: append `pairs` (an encoded envelope with `job_id`) to the
/// ready stream unless a publish of its `job_id` did within `window_ms`.
/// Answers `[published|duplicate, id]` (`transitions::Appended`).
#[derive(Debug, Clone, Copy)]
pub struct PublishOnce<'a, P> {
    pub ready_key: &'a str,
    pub marker_key: &'a str,
    /// At least 1 (`SET … PX 0` fails).
    pub window_ms: u64,
    /// The queue's `payload.max_bytes`: a larger envelope is refused.
    pub payload_max_bytes: usize,
    pub pairs: &'a P,
}

impl<P: ToRedisArgs> FunctionCall for PublishOnce<'_, P> {
    fn command(&self, name: &str) -> Cmd {
        let keys = [self.ready_key, self.marker_key];
        let mut cmd = fcall(name, Function::PublishOnce, &keys);
        cmd.arg(self.window_ms)
            .arg(self.payload_max_bytes)
            .arg(self.pairs);
        cmd
    }
}

/// `publish_batch`: `publish_once` for several envelopes of one partition
/// in one call (a pipeline stage's hand-off), at most
/// `library::MAX_PUBLISH_BATCH`. Answers one `[published|duplicate, id]`
/// per envelope, in order.
#[derive(Debug, Clone, Copy)]
pub struct PublishBatch<'a, P> {
    pub ready_key: &'a str,
    /// One per envelope, in order: its `marker:publish:<job_id>` key.
    pub marker_keys: &'a [String],
    /// At least 1 (`SET … PX 0` fails).
    pub window_ms: u64,
    /// The queue's `payload.max_bytes`: a larger envelope is refused.
    pub payload_max_bytes: usize,
    /// Each an encoded envelope with `job_id`, as for [`PublishOnce`].
    pub envelopes: &'a [P],
}

impl<P: ToRedisArgs> FunctionCall for PublishBatch<'_, P> {
    fn command(&self, name: &str) -> Cmd {
        let mut keys = Vec::with_capacity(1 + self.marker_keys.len());
        keys.push(self.ready_key);
        keys.extend(self.marker_keys.iter().map(String::as_str));
        let mut cmd = fcall(name, Function::PublishBatch, &keys);
        cmd.arg(self.window_ms).arg(self.payload_max_bytes);
        // Each envelope's item count, then its items: the function finds
        // where one ends and the next begins.
        for envelope in self.envelopes {
            let items = envelope.to_redis_args();
            cmd.arg(items.len()).arg(items);
        }
        cmd
    }
}

/// `delay_schedule`: keep `pairs` in the delayed set until `due_ms`.
/// Answers `[scheduled|duplicate, due_ms]` (`transitions::DelayedReply`).
#[derive(Debug, Clone, Copy)]
pub struct DelaySchedule<'a, P> {
    pub delayed_key: &'a str,
    pub delayed_jobs_key: &'a str,
    /// Its promotion's marker: a job_id promoted lately is a duplicate.
    pub marker_key: &'a str,
    pub due_ms: u64,
    /// The queue's `payload.max_bytes`: a larger envelope is refused.
    pub payload_max_bytes: usize,
    pub pairs: &'a P,
}

impl<P: ToRedisArgs> FunctionCall for DelaySchedule<'_, P> {
    fn command(&self, name: &str) -> Cmd {
        let keys = [self.delayed_key, self.delayed_jobs_key, self.marker_key];
        let mut cmd = fcall(name, Function::DelaySchedule, &keys);
        cmd.arg(self.due_ms)
            .arg(self.payload_max_bytes)
            .arg(self.pairs);
        cmd
    }
}
