//! The typed client of the service's Redis Function library: the one list of its functions, one type per function (keys, arguments, reply), and the one place that builds `FCALL`.
//!
//! The library itself is generated (`queuegen/templates/functions.lua.jinja`,
//! contract in docs/functions.md); its `redis.register_function` block is
//! rendered from [`Function::ALL`], so the names the runtime calls and the
//! names the library registers cannot drift apart. Every call in the runtime,
//! the CLI and the dashboard is a value of one of the call types below, turned
//! into a command by [`command`] (or appended to a pipeline by
//! `pipe_command`); what a transition *means* is in `transitions`.
//!
//! Function names are global in Redis, so each carries its library's name
//! and version: `{library}_{name}` ([`Function::in_library`]).

mod call;
mod leases;
mod library;
mod publish;
mod runs;
mod settle;
mod upkeep;

use call::fcall;
pub use call::{command, FunctionCall, Moved};
pub(crate) use call::{pipe_command, refusal_of, CallContext};
pub use leases::{LeaseAcquire, LeaseRelease};
pub use library::verify_library;
pub use publish::{DelaySchedule, PublishBatch, PublishOnce};
pub use runs::{RunOutcome, RunSettle, RunSettleBatch, RunSettled};
pub(crate) use settle::ClaimReply;
pub use settle::{
    Ack, AckStream, Claim, DeadLetterCall, Promote, Renew, Replay, Reschedule, ScheduleTick,
};
pub use upkeep::{ConsumersPrune, RateTake, Trim, TrimGroup, Version};

/// One function of the library, by the name after the library prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    RetrySchedule,
    Defer,
    RetryPromote,
    DelayedPromote,
    PublishOnce,
    PublishBatch,
    DelaySchedule,
    DeadLetter,
    Replay,
    ScheduleTick,
    Trim,
    LeaseAcquire,
    LeaseRelease,
    Claim,
    Ack,
    AckDelete,
    Renew,
    RateTake,
    RunSettle,
    ConsumersPrune,
    Version,
}

/// How Redis may run a function: its `register_function` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runs {
    /// No flags: it writes, so Redis refuses it on a replica and, past
    /// maxmemory, before its first command (never half way).
    Writes,
    /// `allow-oom`: it writes, but may run past maxmemory (it frees memory or
    /// adds only a few bytes; a full server must still let jobs be settled).
    PastMaxmemory,
    /// `no-writes`: it only reads, so `FCALL_RO` and replicas may run it.
    ReadOnly,
}

impl Runs {
    /// The flags `redis.register_function` is given.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Runs::Writes => &[],
            Runs::PastMaxmemory => &["allow-oom"],
            Runs::ReadOnly => &["no-writes"],
        }
    }
}

/// Each function, its name and how Redis may run it ([`Function::name`],
/// [`Function::runs`]), in the order the library registers them and
/// `Function` declares them.
const LIBRARY: [(Function, &str, Runs); 21] = [
    (Function::RetrySchedule, "retry_schedule", Runs::Writes),
    (Function::Defer, "defer", Runs::Writes),
    (Function::RetryPromote, "retry_promote", Runs::Writes),
    (Function::DelayedPromote, "delayed_promote", Runs::Writes),
    (Function::PublishOnce, "publish_once", Runs::Writes),
    (Function::PublishBatch, "publish_batch", Runs::Writes),
    (Function::DelaySchedule, "delay_schedule", Runs::Writes),
    (Function::DeadLetter, "dead_letter", Runs::Writes),
    (Function::Replay, "replay", Runs::Writes),
    (Function::ScheduleTick, "schedule_tick", Runs::Writes),
    (Function::Trim, "trim", Runs::PastMaxmemory),
    (Function::LeaseAcquire, "lease_acquire", Runs::PastMaxmemory),
    (Function::LeaseRelease, "lease_release", Runs::PastMaxmemory),
    (Function::Claim, "claim", Runs::PastMaxmemory),
    (Function::Ack, "ack", Runs::PastMaxmemory),
    (Function::AckDelete, "ack_delete", Runs::PastMaxmemory),
    (Function::Renew, "renew", Runs::PastMaxmemory),
    (Function::RateTake, "rate_take", Runs::PastMaxmemory),
    (Function::RunSettle, "run_settle", Runs::Writes),
    (
        Function::ConsumersPrune,
        "consumers_prune",
        Runs::PastMaxmemory,
    ),
    (Function::Version, "version", Runs::ReadOnly),
];

impl Function {
    /// Every function of the library, in the order the library registers them.
    pub const ALL: [Function; 21] = {
        let mut all = [Function::Version; 21];
        let mut i = 0;
        while i < all.len() {
            // `name` and `runs` find a function's row by its discriminant.
            assert!(LIBRARY[i].0 as usize == i, "out of order");
            all[i] = LIBRARY[i].0;
            i += 1;
        }
        all
    };

    /// The name after the library prefix, also the Lua callback's name.
    pub const fn name(self) -> &'static str {
        LIBRARY[self as usize].1
    }

    /// How Redis may run it. The transitions and the publish functions write
    /// and are refused past maxmemory; the trim, the lease functions,
    /// `claim`, `ack`, `ack_delete`, `renew` and `rate_take` run there, as
    /// the plain commands they stand for could (they add no memory beyond a
    /// few bytes, and a full server is when trimming and acking matter
    /// most); `version` only reads.
    pub const fn runs(self) -> Runs {
        LIBRARY[self as usize].2
    }

    /// Whether it only reads (`no-writes`): callable with `FCALL_RO`.
    pub(crate) const fn read_only(self) -> bool {
        matches!(self.runs(), Runs::ReadOnly)
    }

    /// Its full name in `library` (e.g. `qg_docs_pipeline_v14`):
    /// `qg_docs_pipeline_v14_ack`.
    pub fn in_library(self, library: &str) -> String {
        format!("{library}_{}", self.name())
    }
}

impl crate::config::QueueConfig {
    /// The full name of one function of the queue's library:
    /// `{functions}_{name}`. (Defined here, with the list, so that the
    /// configuration does not depend on the library's client.)
    pub fn function(&self, function: Function) -> String {
        function.in_library(&self.functions)
    }
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether Redis said the called function does not exist (`ERR Function
/// not found`): the library (of this version) is not loaded there.
pub(crate) fn is_function_not_found(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|detail| detail.starts_with("Function not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_only_version_reads_only() {
        let mut names: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Function::ALL.len());
        let read_only: Vec<Function> = Function::ALL
            .into_iter()
            .filter(|f| f.read_only())
            .collect();
        assert_eq!(read_only, [Function::Version]);
        assert_eq!(
            Function::Ack.in_library("qg_x_v3"),
            "qg_x_v3_ack".to_owned()
        );
    }

    #[test]
    fn a_queues_functions_are_named_in_its_library() {
        assert_eq!(
            crate::config::tests::OCR.function(Function::Version),
            "qg_docs_pipeline_v1_version"
        );
    }
}
