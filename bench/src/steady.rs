//! Steady-state mode (`--rate R --seconds S`): an open-loop publisher sends
//! job `n` at its intended time `start + n / R` while the consumers already
//! run, and latency is handler start minus that intended time.
//!
//! Open loop avoids coordinated omission: the schedule does not wait for the
//! publisher, so a publisher held up (by a slow server, or by the workers
//! sharing its CPU) sends the overdue jobs at once, and their wait counts.
//! The intended time travels in the job ID (`job-N@MICROS`), which both the
//! baseline (the entry's `job_id` field) and queuegen (`JobContext::job_id`)
//! read without decoding the body. Both clocks are this host's wall clock.

use std::future::Future;
use std::ops::Range;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use hdrhistogram::Histogram;

/// When each job of a steady-state run is meant to be sent.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    start_unix_us: u64,
    rate: f64,
}

impl Schedule {
    /// A schedule starting now at `rate` jobs per second.
    pub fn start(rate: f64) -> Schedule {
        Schedule {
            start: Instant::now(),
            start_unix_us: now_us(),
            rate,
        }
    }

    fn offset(&self, n: u64) -> Duration {
        Duration::from_secs_f64(n as f64 / self.rate)
    }

    /// Job `n`'s intended send time, µs since the Unix epoch.
    pub fn intended_us(&self, n: u64) -> u64 {
        self.start_unix_us + self.offset(n).as_micros() as u64
    }

    fn intended(&self, n: u64) -> Instant {
        self.start + self.offset(n)
    }
}

/// Job `n`'s ID: `job-N`, or in steady-state mode `job-N@MICROS`.
pub fn job_id(n: u64, schedule: Option<&Schedule>) -> String {
    match schedule {
        None => format!("job-{n}"),
        Some(schedule) => format!("job-{n}@{}", schedule.intended_us(n)),
    }
}

/// The intended send time a steady-state job ID carries.
pub fn intended_us(job_id: &str) -> Option<u64> {
    job_id.rsplit_once('@')?.1.parse().ok()
}

/// The wall clock, µs since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// 1 µs to 10 minutes at 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// Sends jobs `0..jobs` on `schedule`: whenever jobs are due, the due ones
/// (up to `max_batch` at a time) go in one `send`; otherwise it sleeps until
/// the next is due. Returns how late the publisher ran at worst (the oldest
/// due job's wait when a batch went out).
pub async fn publish<F, Fut>(
    schedule: &Schedule,
    jobs: u64,
    max_batch: usize,
    mut send: F,
) -> Result<Duration>
where
    F: FnMut(Range<u64>) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut next = 0;
    let mut worst = Duration::ZERO;
    while next < jobs {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(schedule.start).as_secs_f64();
        // Job n is due once n / rate ≤ elapsed.
        let due = ((elapsed * schedule.rate).floor() as u64 + 1).min(jobs);
        if due > next {
            worst = worst.max(now.saturating_duration_since(schedule.intended(next)));
            let end = due.min(next + max_batch as u64);
            send(next..end).await?;
            next = end;
        } else {
            tokio::time::sleep_until(schedule.intended(next).into()).await;
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_carry_the_intended_time() {
        let schedule = Schedule::start(1000.0);
        assert_eq!(job_id(7, None), "job-7");
        assert_eq!(intended_us("job-7"), None);
        let id = job_id(7, Some(&schedule));
        assert_eq!(intended_us(&id), Some(schedule.intended_us(0) + 7_000));
    }

    #[tokio::test]
    async fn publishes_every_job_once_in_order() {
        let schedule = Schedule::start(50_000.0);
        let mut sent = Vec::new();
        publish(&schedule, 1_000, 64, |range| {
            assert!(range.end - range.start <= 64);
            sent.extend(range);
            async { Ok(()) }
        })
        .await
        .unwrap();
        assert_eq!(sent, (0..1_000).collect::<Vec<_>>());
        // 1000 jobs at 50k/s take about 20 ms, not less.
        assert!(schedule.start.elapsed() >= Duration::from_millis(19));
    }
}
