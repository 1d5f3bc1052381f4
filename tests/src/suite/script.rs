//! What each job of a scenario does, chosen by the prefix of its `subject_ref`, and where it must end up.
//!
//! Worker processes and the scenario that checks them must agree on both,
//! so the script travels inside the job itself.

use std::time::Duration;

/// What a job does, by the prefix of its `subject_ref`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `ok-…`: applies its effect at once.
    Ok,
    /// `flaky-…`: a transient error on attempt 1, its effect on any later attempt.
    Flaky,
    /// `broken-…`: a permanent error every time (a dead letter).
    Broken,
    /// `crash-…`: takes down whatever runs it, every time (a poison entry).
    Crash,
    /// `slow<ms>-…`: on its first delivery sleeps `<ms>` before its effect;
    /// a redelivery goes straight to the effect.
    SlowOnce(Duration),
}

/// Where a job must be once everything settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// Its effect is in the ledger.
    Done,
    /// It is in the dead-letter stream with this reason.
    Dead(&'static str),
}

impl Script {
    pub fn of(subject_ref: &str) -> Script {
        let head = subject_ref.split('-').next().unwrap_or_default();
        match head {
            "flaky" => Script::Flaky,
            "broken" => Script::Broken,
            "crash" => Script::Crash,
            _ => match head.strip_prefix("slow").and_then(|ms| ms.parse().ok()) {
                Some(ms) => Script::SlowOnce(Duration::from_millis(ms)),
                None => Script::Ok,
            },
        }
    }

    pub fn destination(self) -> Destination {
        match self {
            Script::Broken => Destination::Dead("permanent"),
            Script::Crash => Destination::Dead("poison"),
            Script::Ok | Script::Flaky | Script::SlowOnce(_) => Destination::Done,
        }
    }
}

/// One job a scenario publishes: its job_id and its `subject_ref` (its script).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedJob {
    pub job_id: String,
    pub subject: String,
}

impl ScriptedJob {
    /// `count` jobs `{subject}-{n}`, each its own job_id `{subject}-{n}`.
    pub fn many(subject: &str, count: usize) -> Vec<ScriptedJob> {
        (0..count)
            .map(|n| ScriptedJob {
                job_id: format!("{subject}-{n}"),
                subject: format!("{subject}-{n}"),
            })
            .collect()
    }

    pub fn script(&self) -> Script {
        Script::of(&self.subject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_picks_the_script() {
        assert_eq!(Script::of("ok-1"), Script::Ok);
        assert_eq!(Script::of("doc"), Script::Ok);
        assert_eq!(Script::of("flaky-2"), Script::Flaky);
        assert_eq!(Script::of("broken-0"), Script::Broken);
        assert_eq!(Script::of("crash-0"), Script::Crash);
        assert_eq!(
            Script::of("slow1500-3"),
            Script::SlowOnce(Duration::from_millis(1500))
        );
        assert_eq!(Script::of("slowly-3"), Script::Ok);
        assert_eq!(Script::Crash.destination(), Destination::Dead("poison"));
    }
}
