//! Paces recovery's claims of one partition: a token bucket refilled at `claim.rate` tokens a second, holding at most `claim.batch`.
//!
//! After an outage every entry of a partition may be idle at once; without a
//! pace recovery would claim them as fast as permits free up, and start that
//! many handlers against whatever the handlers call. Each claimed entry
//! spends one token and nothing refunds it, so by any time `t` into a walk a
//! partition has claimed at most `claim.batch + claim.rate × t` entries: the
//! bucket starts full, and a full bucket is one batch, the largest burst.
//!
//! The recovery loop keeps one bucket per partition across its passes, so a
//! new pass starts with what the pause between passes refilled, never more
//! than one batch. Partitions are walked one after another, so while one is
//! paced the next waits its turn: the rate is a ceiling per partition, not a
//! pace each partition is promised.
//!
//! Only claims are paced. The poison quarantine walk is not: it dead-letters
//! entries, it starts no handler.

use std::time::Duration;

use tokio::time::Instant;

/// One partition's bucket.
#[derive(Debug)]
pub(super) struct ClaimPace {
    /// Tokens added per second.
    rate: f64,
    /// Most tokens held: the largest burst.
    capacity: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date.
    refilled: Instant,
}

/// Rounding slack, so that a wait computed to end when a token is whole ends with it whole.
const EPSILON: f64 = 1e-9;

impl ClaimPace {
    /// A full bucket of `burst` tokens (at least one) refilled at `rate` a second (at least one).
    pub(super) fn new(rate: u32, burst: usize) -> Self {
        let capacity = burst.max(1) as f64;
        ClaimPace {
            rate: f64::from(rate.max(1)),
            capacity,
            tokens: capacity,
            refilled: Instant::now(),
        }
    }

    /// Whole tokens available now: the most entries a claim may take.
    pub(super) fn available(&mut self) -> usize {
        self.refill();
        (self.tokens + EPSILON).floor() as usize
    }

    /// Spends one token per claimed entry. A claim never asks for more than
    /// [`ClaimPace::available`], so this cannot go below zero; it stops there anyway.
    pub(super) fn spend(&mut self, claimed: usize) {
        self.refill();
        self.tokens = (self.tokens - claimed as f64).max(0.0);
    }

    /// How long until `wanted` whole tokens (at most one batch) are
    /// available; zero if they are now.
    pub(super) fn wait_for(&mut self, wanted: usize) -> Duration {
        self.refill();
        let wanted = (wanted as f64).clamp(1.0, self.capacity);
        let missing = wanted - self.tokens;
        if missing <= EPSILON {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(missing / self.rate)
    }

    /// Adds the tokens earned since the last refill, up to the capacity.
    fn refill(&mut self) {
        let now = Instant::now();
        let earned = now.saturating_duration_since(self.refilled).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + earned).min(self.capacity);
        self.refilled = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn starts_with_one_batch_then_refills_at_the_rate() {
        let mut pace = ClaimPace::new(100, 10);
        assert_eq!(pace.available(), 10);
        pace.spend(10);
        assert_eq!(pace.available(), 0);
        // 100 a second: one token every 10 ms.
        assert_eq!(pace.wait_for(1), Duration::from_millis(10));
        assert_eq!(pace.wait_for(10), Duration::from_millis(100));
        tokio::time::sleep(Duration::from_millis(35)).await;
        assert_eq!(pace.available(), 3);
        pace.spend(3);
        assert_eq!(pace.available(), 0);
        assert_eq!(pace.wait_for(1), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn never_holds_more_than_one_batch() {
        let mut pace = ClaimPace::new(100, 10);
        pace.spend(4);
        // An hour idle between passes still allows only one batch at once.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(pace.available(), 10);
        assert_eq!(pace.wait_for(50), Duration::ZERO, "clamped to one batch");
    }

    #[tokio::test(start_paused = true)]
    async fn claims_over_time_stay_under_the_rate_plus_one_batch() {
        let (rate, batch) = (100u32, 10usize);
        let mut pace = ClaimPace::new(rate, batch);
        let start = Instant::now();
        let mut claimed = 0usize;
        while claimed < 1_000 {
            let count = pace.available();
            if count == 0 {
                tokio::time::sleep(pace.wait_for(batch)).await;
                continue;
            }
            pace.spend(count);
            claimed += count;
            let elapsed = start.elapsed().as_secs_f64();
            assert!(
                claimed as f64 <= f64::from(rate) * elapsed + batch as f64 + EPSILON,
                "{claimed} claimed by {elapsed}s"
            );
        }
        // Nor much slower: 990 after the first batch at 100 a second is 9.9 s
        // (the timer rounds each wait up to whole ms).
        let elapsed = start.elapsed();
        assert!(
            (Duration::from_millis(9_900)..=Duration::from_millis(10_000)).contains(&elapsed),
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waits_in_proportion_to_the_tokens_wanted() {
        let mut pace = ClaimPace::new(2, 50);
        pace.spend(50);
        assert_eq!(pace.wait_for(1), Duration::from_millis(500));
        assert_eq!(pace.wait_for(2), Duration::from_secs(1));
    }
}
