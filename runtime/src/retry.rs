//! Retry policy: whether a failed attempt may run again, and the jittered backoff before it does.

use std::time::Duration;

use rand::Rng;

use crate::config::{Jitter, QueueConfig};

/// Whether `attempt` (1-based) was the last one `retry.max_attempts` allows.
pub(crate) fn attempts_exhausted(config: &QueueConfig, attempt: u32) -> bool {
    attempt >= config.retry.max_attempts
}

/// The un-jittered backoff after attempt `attempt` (1-based) failed:
/// `initial * factor^(attempt-1)`, capped at `max`.
pub fn backoff(config: &QueueConfig, attempt: u32) -> Duration {
    let max = config.retry.backoff.max.as_secs_f64();
    let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
    let delay =
        config.retry.backoff.initial.as_secs_f64() * config.retry.backoff.factor.powi(exponent);
    // NaN (a zero initial times an infinite power) and overflow both end at the cap.
    if delay.is_finite() && delay < max {
        Duration::from_secs_f64(delay.max(0.0))
    } else {
        config.retry.backoff.max
    }
}

/// The delay actually waited after attempt `attempt` failed: the backoff,
/// or with full jitter a uniform draw in `[0, backoff]`.
pub(crate) fn delay(config: &QueueConfig, attempt: u32, rng: &mut impl Rng) -> Duration {
    let cap = backoff(config, attempt);
    match config.retry.backoff.jitter {
        Jitter::None => cap,
        Jitter::Full => {
            let cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
            Duration::from_millis(rng.random_range(0..=cap_ms))
        }
    }
}

/// A handler's own `Outcome::Retry { after }`, held to `retry.backoff.max` so
/// that a job's retries stay inside the retention the spec was checked against.
pub(crate) fn requested_delay(config: &QueueConfig, after: Duration) -> Duration {
    after.min(config.retry.backoff.max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::OCR;
    use crate::config::Backoff;

    fn config(jitter: Jitter) -> QueueConfig {
        let mut config = OCR;
        config.retry.max_attempts = 4;
        config.retry.backoff = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            factor: 2.0,
            jitter,
        };
        config
    }

    #[test]
    fn backoff_grows_by_the_factor_up_to_the_cap() {
        let config = config(Jitter::None);
        let ms = |attempt| backoff(&config, attempt).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(5)],
            [100, 200, 400, 800, 1000]
        );
        assert_eq!(backoff(&config, u32::MAX), Duration::from_secs(1));
        let mut rng = rand::rng();
        assert_eq!(delay(&config, 3, &mut rng), Duration::from_millis(400));
    }

    #[test]
    fn full_jitter_stays_within_the_backoff_and_varies() {
        let config = config(Jitter::Full);
        let mut rng = rand::rng();
        let draws: Vec<Duration> = (0..200).map(|_| delay(&config, 3, &mut rng)).collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_millis(400)));
        let distinct: std::collections::HashSet<_> = draws.iter().collect();
        assert!(distinct.len() > 20, "{} distinct draws", distinct.len());
    }

    #[test]
    fn the_last_attempt_is_exhausted() {
        let config = config(Jitter::None);
        assert!(!attempts_exhausted(&config, 3));
        assert!(attempts_exhausted(&config, 4));
        assert!(attempts_exhausted(&config, 9));
    }

    #[test]
    fn a_requested_delay_is_held_to_the_cap() {
        let config = config(Jitter::None);
        let requested = requested_delay(&config, Duration::from_secs(30));
        assert_eq!(requested, Duration::from_secs(1));
    }
}
