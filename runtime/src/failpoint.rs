//! Crash points for the failure-contract tests: compiled in only with the `failpoints` feature.
//!
//! With the feature, [`failpoint`] kills the whole process with SIGKILL when
//! the environment variable `QUEUEGEN_FAILPOINT` names that point, exactly as
//! `kill -9` or an OOM kill would: no unwinding, no destructors, no flushing.
//! Without it, the call is an empty inline function.
//!
//! Points, in the order a job meets them:
//! - `before_retry_schedule` / `after_retry_schedule`: around the
//!   `retry_schedule` call (after = it returned, before any local bookkeeping);
//! - `before_dead_letter` / `after_dead_letter`: likewise for `dead_letter`;
//! - `after_retry_promote`: the promotion loop's `retry_promote` call returned.
//! - `before_schedule_tick` / `after_schedule_tick`: around a schedule
//!   loop's `schedule_tick` call (after = it published the tick, before the
//!   schedule's hint is set).
//! - A pipeline stage's job (`runs`), before its ack: `after_handoff_published`
//!   (its children published, not yet settled), `after_join_published` (a
//!   settle published a join's job), `after_run_settled` (settled at every
//!   join); `before_dead_letter_after_hook`: a job about to be dead-lettered
//!   was settled dead, the `dead_letter` call not yet made.

/// The environment variable naming the point at which to die.
pub const ENV: &str = "QUEUEGEN_FAILPOINT";

/// Dies here with SIGKILL if `QUEUEGEN_FAILPOINT` is `name`.
#[cfg(feature = "failpoints")]
pub fn failpoint(name: &str) {
    if std::env::var_os(ENV).is_some_and(|chosen| chosen == name) {
        tracing::warn!(failpoint = name, "failpoint reached: killing this process");
        // `kill -9` of ourselves: SIGKILL cannot be caught, so nothing after
        // this point runs. (`abort` would raise SIGABRT and run a handler.)
        let sent = std::process::Command::new("kill")
            .arg("-9")
            .arg(std::process::id().to_string())
            .status()
            .is_ok_and(|status| status.success());
        if !sent {
            // No `kill` to run: die abnormally all the same, never carry on.
            std::process::abort();
        }
        // The signal is asynchronous: never return into the transition.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

/// Without the `failpoints` feature, a crash point is nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn failpoint(_name: &str) {}
