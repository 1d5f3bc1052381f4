//! The closed sets of label values the metrics use: how a job ended, which transition failed, which settlement lost ownership, which stream a trim touched and how it went.

/// How the worker ended one delivery: the `outcome` label of
/// `queuegen_jobs_total`. It names what the handler decided (or what
/// happened to it), not where the job went: a `retry` on the last attempt
/// is dead-lettered (`queuegen_dead_letters_total{reason="retries_exhausted"}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobOutcome {
    /// `Ok(Outcome::Done)`.
    Done,
    /// `Ok(Outcome::Retry { .. })`.
    Retry,
    /// `Ok(Outcome::DeadLetter { .. })`.
    DeadLetter,
    /// `Ok(Outcome::Reconcile { .. })`.
    Reconcile,
    /// `Err(JobError)` of kind transient: retried.
    TransientError,
    /// `Err(JobError)` of kind permanent: dead-lettered.
    PermanentError,
    /// `Err(JobError)` of kind ambiguous: left pending, `reconcile` runs.
    AmbiguousError,
    /// The handler ran past `handler.timeout`: retried.
    Timeout,
    /// The handler panicked: left pending.
    Panic,
    /// The entry did not decode as the queue's envelope; no handler ran.
    Malformed,
}

impl JobOutcome {
    /// Every outcome, in the order of `JobOutcome::index`.
    pub const ALL: [JobOutcome; 10] = [
        JobOutcome::Done,
        JobOutcome::Retry,
        JobOutcome::DeadLetter,
        JobOutcome::Reconcile,
        JobOutcome::TransientError,
        JobOutcome::PermanentError,
        JobOutcome::AmbiguousError,
        JobOutcome::Timeout,
        JobOutcome::Panic,
        JobOutcome::Malformed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Retry => "retry",
            JobOutcome::DeadLetter => "dead_letter",
            JobOutcome::Reconcile => "reconcile",
            JobOutcome::TransientError => "transient_error",
            JobOutcome::PermanentError => "permanent_error",
            JobOutcome::AmbiguousError => "ambiguous_error",
            JobOutcome::Timeout => "timeout",
            JobOutcome::Panic => "panic",
            JobOutcome::Malformed => "malformed",
        }
    }

    /// Position in [`JobOutcome::ALL`].
    #[cfg(feature = "metrics")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A transition call that failed and left the entry where it was: the
/// `outcome` label of `queuegen_transition_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailedTransition {
    /// `retry_schedule`: the job stays pending.
    Retry,
    /// `dead_letter` (a dead letter or a poison quarantine): the entry stays pending.
    DeadLetter,
    /// `retry_promote`: the due retries wait for the next promotion.
    Promote,
}

impl FailedTransition {
    /// Every transition, in the order of `FailedTransition::index`.
    pub const ALL: [FailedTransition; 3] = [
        FailedTransition::Retry,
        FailedTransition::DeadLetter,
        FailedTransition::Promote,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailedTransition::Retry => "retry",
            FailedTransition::DeadLetter => "dead_letter",
            FailedTransition::Promote => "promote",
        }
    }

    /// Position in [`FailedTransition::ALL`].
    #[cfg(feature = "metrics")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// How a worker tried to settle a job whose pending entry it no longer
/// owned: the `settlement` label of `queuegen_ownership_lost_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settlement {
    /// The ack of a `Done` job.
    Ack,
    /// `retry_schedule`.
    Retry,
    /// `dead_letter` (a dead letter, or a poison quarantine).
    DeadLetter,
}

impl Settlement {
    /// Every settlement, in the order of `Settlement::index`.
    pub const ALL: [Settlement; 3] = [Settlement::Ack, Settlement::Retry, Settlement::DeadLetter];

    pub fn as_str(self) -> &'static str {
        match self {
            Settlement::Ack => "ack",
            Settlement::Retry => "retry",
            Settlement::DeadLetter => "dead_letter",
        }
    }

    /// Position in [`Settlement::ALL`].
    #[cfg(feature = "metrics")]
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Which stream of a partition a trim worked on: the `stream` label of the trim metrics.
pub use crate::trim::StreamRole;

/// How one trim pass over one stream ended: the `outcome` label of `queuegen_trim_passes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrimOutcome {
    /// `XTRIM` removed at least one entry.
    Trimmed,
    /// Nothing was old enough, or every old entry is still needed by a group.
    NothingToTrim,
    /// The second inventory disagreed with the first (a group added,
    /// removed or moved back): nothing was removed.
    Aborted,
    /// Another trimmer (or `queuegen apply`) held the partition's lease.
    LeaseHeld,
    /// Redis answered with an error, or the connection failed.
    Failed,
}

impl TrimOutcome {
    pub const ALL: [TrimOutcome; 5] = [
        TrimOutcome::Trimmed,
        TrimOutcome::NothingToTrim,
        TrimOutcome::Aborted,
        TrimOutcome::LeaseHeld,
        TrimOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TrimOutcome::Trimmed => "trimmed",
            TrimOutcome::NothingToTrim => "nothing_to_trim",
            TrimOutcome::Aborted => "aborted",
            TrimOutcome::LeaseHeld => "lease_held",
            TrimOutcome::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "metrics")]
    fn indexes_follow_the_all_lists() {
        for (i, outcome) in JobOutcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome.index(), i, "{outcome:?}");
        }
        for (i, transition) in FailedTransition::ALL.into_iter().enumerate() {
            assert_eq!(transition.index(), i, "{transition:?}");
        }
        for (i, settlement) in Settlement::ALL.into_iter().enumerate() {
            assert_eq!(settlement.index(), i, "{settlement:?}");
        }
    }

    #[test]
    fn label_values_are_distinct_snake_case() {
        let mut values: Vec<&str> = JobOutcome::ALL.iter().map(|o| o.as_str()).collect();
        values.extend(TrimOutcome::ALL.iter().map(|o| o.as_str()));
        values.extend(StreamRole::BOTH.iter().map(|s| s.as_str()));
        values.extend(Settlement::ALL.iter().map(|s| s.as_str()));
        for value in &values {
            assert!(
                value.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{value}"
            );
        }
        let outcomes: std::collections::HashSet<&str> =
            JobOutcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(outcomes.len(), JobOutcome::ALL.len());
    }
}
