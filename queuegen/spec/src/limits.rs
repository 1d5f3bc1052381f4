//! Limits derived from a queue's settings, shared by validation, the
//! generators and the docs: the claim margin, the default claim threshold,
//! the retention floor, and the size allowance of the implicit header fields.

use std::time::Duration;

use super::model::{Envelope, Queue};

/// How much longer than `handler.timeout` an entry must stay idle before it
/// is claimed: max(1s, timeout / 4), rounded up to whole milliseconds.
pub fn claim_margin(timeout: Duration) -> Duration {
    let quarter = timeout / 4;
    let millis = quarter.as_millis() + u128::from(quarter.as_nanos() % 1_000_000 > 0);
    let quarter = Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX));
    quarter.max(Duration::from_secs(1))
}

/// The smallest `claim.min_idle` that is accepted: timeout + margin.
pub fn min_claim_idle(timeout: Duration) -> Duration {
    timeout.saturating_add(claim_margin(timeout))
}

/// Default of `claim.min_idle`: max(2 × timeout, timeout + margin).
pub fn default_claim_min_idle(timeout: Duration) -> Duration {
    timeout.saturating_mul(2).max(min_claim_idle(timeout))
}

/// What the Kubernetes termination grace period adds to
/// `handler.shutdown_budget`: max(10s, budget / 4). After the budget the
/// worker still abandons the jobs left running, sends the acks it holds and
/// closes its metrics endpoint, and the SIGTERM reaches it a moment after
/// the kubelet starts counting; a SIGKILL inside that would drop acks of
/// jobs that finished, so they run twice.
pub fn shutdown_grace_margin(shutdown_budget: Duration) -> Duration {
    (shutdown_budget / 4).max(Duration::from_secs(10))
}

/// `terminationGracePeriodSeconds` of a worker pod: the shutdown budget
/// plus [`shutdown_grace_margin`], in whole seconds rounded up.
pub fn termination_grace_seconds(shutdown_budget: Duration) -> u64 {
    let total = shutdown_budget.saturating_add(shutdown_grace_margin(shutdown_budget));
    total.as_secs() + u64::from(total.subsec_nanos() > 0)
}

/// The cron schedule of a trim every `every`: whole minutes below an hour
/// (`*/5 * * * *`), or whole hours dividing a day (`0 */6 * * *`). `None`
/// when cron cannot express it evenly.
pub fn cron_schedule(every: Duration) -> Option<String> {
    if every.subsec_nanos() != 0 || every.as_secs() % 60 != 0 || every.is_zero() {
        return None;
    }
    let minutes = every.as_secs() / 60;
    match minutes {
        1 => Some("* * * * *".to_owned()),
        2..=59 => Some(format!("*/{minutes} * * * *")),
        _ if minutes % 60 == 0 => match minutes / 60 {
            24 => Some("0 0 * * *".to_owned()),
            1 => Some("0 * * * *".to_owned()),
            hours if 24 % hours == 0 => Some(format!("0 */{hours} * * *")),
            _ => None,
        },
        _ => None,
    }
}

/// How long a job can stay in flight before it is settled, which
/// `retention.min_age` must cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionFloor {
    /// Sum of the un-jittered retry delays (`Backoff::horizon`).
    pub retry_horizon: Duration,
    /// claim.min_idle × poison.max_deliveries.
    pub claim_window: Duration,
}

impl RetentionFloor {
    pub fn of(queue: &Queue) -> Self {
        RetentionFloor {
            retry_horizon: queue.retry.backoff.horizon(queue.retry.max_attempts),
            claim_window: queue
                .claim
                .min_idle
                .saturating_mul(queue.poison.max_deliveries),
        }
    }

    pub fn total(&self) -> Duration {
        self.retry_horizon.saturating_add(self.claim_window)
    }
}

pub use queuegen_core::wire::{
    header_fields, library, run_fields, HeaderField, HEADER_FIELDS, PACKED_FIELD,
    PARTITION_HEADER_FIELDS, RUN_FIELDS,
};

/// Largest encoded size of the header of an envelope named `envelope`.
pub fn header_max_bytes(envelope: &str) -> u64 {
    allowance(HEADER_FIELDS, envelope)
}

/// Largest encoded size of the run fields ([`RUN_FIELDS`]) that a job
/// handed on by a pipeline stage carries after its header.
pub fn run_fields_max_bytes() -> u64 {
    // Neither is `type`, so no envelope name is counted.
    allowance(RUN_FIELDS, "")
}

/// Each field's name plus its allowance (`type`'s is the envelope name).
fn allowance(fields: &[HeaderField], envelope: &str) -> u64 {
    fields
        .iter()
        .map(|h| h.name.len() as u64 + h.max_value_bytes.unwrap_or(envelope.len() as u64))
        .sum()
}

/// The body's largest encoded size: the sum over bounded fields of name plus
/// largest value, and the names of the fields with no bound (strings
/// without `max_bytes`).
pub fn body_max_bytes(envelope: &Envelope) -> (u64, Vec<&str>) {
    let mut bounded = 0;
    let mut unbounded = Vec::new();
    for field in &envelope.fields {
        match field.max_bytes.or_else(|| field.ty.max_encoded_bytes()) {
            Some(max) => bounded += field.name.len() as u64 + max,
            None => unbounded.push(field.name.as_str()),
        }
    }
    (bounded, unbounded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_exceeds_the_budget_by_the_margin() {
        assert_eq!(termination_grace_seconds(Duration::from_secs(20)), 30);
        assert_eq!(termination_grace_seconds(Duration::from_secs(60)), 75);
        assert_eq!(termination_grace_seconds(Duration::from_millis(1500)), 12);
    }

    #[test]
    fn cron_schedules() {
        let m = |n: u64| Duration::from_secs(n * 60);
        assert_eq!(cron_schedule(m(1)).as_deref(), Some("* * * * *"));
        assert_eq!(cron_schedule(m(5)).as_deref(), Some("*/5 * * * *"));
        assert_eq!(cron_schedule(m(60)).as_deref(), Some("0 * * * *"));
        assert_eq!(cron_schedule(m(360)).as_deref(), Some("0 */6 * * *"));
        assert_eq!(cron_schedule(m(1440)).as_deref(), Some("0 0 * * *"));
        for bad in [
            Duration::from_secs(30),
            Duration::from_secs(90),
            m(90),
            m(300),
            m(2880),
        ] {
            assert_eq!(cron_schedule(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn margin_is_a_quarter_of_the_timeout_but_at_least_a_second() {
        assert_eq!(
            claim_margin(Duration::from_secs(60)),
            Duration::from_secs(15)
        );
        assert_eq!(claim_margin(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(
            claim_margin(Duration::from_millis(4001)),
            Duration::from_millis(1001)
        );
    }

    #[test]
    fn default_min_idle_always_passes_the_check() {
        for millis in [1, 250, 1000, 2000, 3999, 4000, 60_000, 900_000] {
            let timeout = Duration::from_millis(millis);
            assert!(
                default_claim_min_idle(timeout) >= min_claim_idle(timeout),
                "{millis}"
            );
        }
        assert_eq!(
            default_claim_min_idle(Duration::from_secs(60)),
            Duration::from_secs(120)
        );
        assert_eq!(
            default_claim_min_idle(Duration::from_millis(500)),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn retention_floor_of_a_queue() {
        let source = "\
version: 1
service: s
envelopes:
  Job: { schema: 1 }
queues:
  q:
    envelope: Job
    claim: { min_idle: 15m }
    retry: { max_attempts: 10, backoff: { initial: 30s, max: 1h } }
    poison: { max_deliveries: 3 }
    dead_letter: { owner: me }
";
        let spec = crate::check_str(source, "q.yaml").spec.expect("valid");
        let floor = RetentionFloor::of(&spec.queues[0]);
        // 30s + 1m + 2m + 4m + 8m + 16m + 32m + 1h + 1h (capped).
        assert_eq!(floor.retry_horizon, Duration::from_secs(11_010));
        assert_eq!(floor.claim_window, Duration::from_secs(45 * 60));
        assert_eq!(floor.total(), Duration::from_secs(11_010 + 2_700));
    }

    #[test]
    fn header_allowance() {
        // 60 bytes of names, 565 of values, plus the envelope name.
        assert_eq!(header_max_bytes(""), 625);
        assert_eq!(header_max_bytes("OcrRequested"), 637);
    }

    #[test]
    fn run_fields_allowance() {
        // `run_id` and `parent`, 12 bytes of names, and a job ID's 128 each.
        assert_eq!(run_fields_max_bytes(), 268);
    }
}
