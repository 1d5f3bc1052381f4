//! The queue's rate limit (`handler.rate`): a token bucket in Redis shared by every worker of the queue, asked once per intake round.
//!
//! Before a round reads, the intake asks the library's `rate_take` for as
//! many tokens as it holds permits; it reads at most what it was granted
//! (the permits beyond go back first), and when it got none it holds no
//! permit and waits as long as the bucket says (at most one read block) before it
//! asks again. So jobs over the limit simply stay undelivered in the stream:
//! they are not failed, retried or counted as attempts, and a waiting worker
//! holds no handler permit it cannot use.
//!
//! The grant is settled with the next call, in the same round trip: tokens
//! granted and not used (the streams had fewer entries) go back to the
//! bucket, and entries a blocking read over several streams delivered beyond
//! the grant (`COUNT` applies per stream) are taken from it, so the long-run
//! rate stays the limit. One call per round, whatever the batch: under a
//! backlog a round reads up to `handler.concurrency` entries.

use std::time::Duration;

use super::Failure;
use crate::config::QueueConfig;
use crate::connect::Connection;
use crate::error::Error;

/// The limiter of one worker's intake.
pub(super) struct Limiter {
    function: String,
    key: String,
    limit: u32,
    per_ms: u64,
    /// Tokens to give back (positive) or take (negative) with the next call.
    carry: i64,
}

/// What one `rate_take` call granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Grant {
    pub(super) granted: usize,
    /// When nothing was granted: how long until enough tokens are there.
    pub(super) wait: Duration,
}

impl Limiter {
    /// The limiter of `config`'s queue; `None` without `handler.rate`.
    pub(super) fn new(config: &QueueConfig) -> Option<Limiter> {
        let rate = config.handler.rate?;
        Some(Limiter {
            function: config.function(crate::functions::Function::RateTake),
            key: config.rate_key(),
            limit: rate.limit,
            per_ms: u64::try_from(rate.per.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            carry: 0,
        })
    }

    /// Asks the bucket for up to `wanted` tokens, settling what the last grant left.
    pub(super) async fn take(
        &mut self,
        conn: &mut Connection,
        wanted: usize,
    ) -> Result<Grant, Failure> {
        let take = crate::functions::RateTake {
            bucket_key: &self.key,
            limit: self.limit,
            per_ms: self.per_ms,
            wanted,
            carry: self.carry,
        };
        let cmd = crate::functions::command(&self.function, &take);
        let reply: redis::RedisResult<(u64, u64)> = cmd.query_async(conn).await;
        match reply {
            Ok((granted, wait_ms)) => {
                self.carry = 0;
                Ok(Grant {
                    granted: usize::try_from(granted).unwrap_or(usize::MAX).min(wanted),
                    wait: Duration::from_millis(wait_ms),
                })
            }
            Err(err) => {
                // The call may or may not have run: keep a debit (never
                // exceed the limit), drop a refund (at worst a few tokens unused).
                self.carry = self.carry.min(0);
                let fatal = matches!(err.code(), Some("QG_WRONGTYPE" | "QG_BADARG"));
                let error = Error::redis(format!("FCALL {} {}", self.function, self.key), err);
                Err(if fatal {
                    Failure::Fatal(error)
                } else {
                    let reconnect = false;
                    Failure::Retry { error, reconnect }
                })
            }
        }
    }

    /// Records that a round granted `granted` tokens delivered `delivered` entries.
    pub(super) fn settle(&mut self, granted: usize, delivered: usize) {
        let granted = i64::try_from(granted).unwrap_or(i64::MAX);
        let delivered = i64::try_from(delivered).unwrap_or(i64::MAX);
        self.carry = self.carry.saturating_add(granted - delivered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RateLimit;

    #[test]
    fn a_queue_without_a_rate_has_no_limiter_and_settling_carries_both_ways() {
        let config = crate::config::tests::OCR;
        assert!(Limiter::new(&config).is_none());
        let mut limited = config;
        limited.handler.rate = Some(RateLimit {
            limit: 200,
            per: Duration::from_secs(1),
        });
        let mut limiter = Limiter::new(&limited).unwrap();
        assert_eq!(limiter.function, "qg_docs_pipeline_v1_rate_take");
        assert_eq!(limiter.key, "work:{ocr}:rate");
        assert_eq!(limiter.per_ms, 1000);
        limiter.settle(16, 3);
        assert_eq!(limiter.carry, 13);
        limiter.settle(4, 10);
        assert_eq!(limiter.carry, 7);
    }
}
