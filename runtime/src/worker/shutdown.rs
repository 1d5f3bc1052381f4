//! Orderly shutdown: stop reading, let the last read return, wait for jobs up to the budget, leave the rest pending.
//!
//! Nothing here acknowledges anything: a job still running when the budget
//! runs out is abandoned and stays pending with this consumer as owner, and
//! another worker's recovery redelivers it once it has been idle long enough.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{log_task_end, Shared, WorkerReport};
use crate::envelope::Envelope;
use crate::error::Result;
use crate::handler::Handler;

/// A one-way signal many tasks can wait for.
pub(super) struct Flag(watch::Sender<bool>);

impl Flag {
    pub(super) fn new() -> Self {
        Flag(watch::Sender::new(false))
    }

    pub(super) fn raise(&self) {
        self.0.send_replace(true);
    }

    pub(super) fn is_raised(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the flag is raised (at once if it already is).
    pub(super) async fn raised(&self) {
        let mut seen = self.0.subscribe();
        // Only fails when the sender is gone, and `self` owns it.
        let _ = seen.wait_for(|raised| *raised).await;
    }

    /// Runs `work` unless the flag is raised first; `None` means it was.
    pub(super) async fn unless_raised<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.raised() => None,
            done = work => Some(done),
        }
    }
}

/// Supervises a running worker until `shutdown` completes (or a loop fails),
/// then shuts it down within the budget and reports.
pub(super) async fn run<E: Envelope, H: Handler<E>>(
    shared: Arc<Shared<E, H>>,
    mut intake: JoinHandle<Result<()>>,
    mut recovery: JoinHandle<Result<()>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<WorkerReport> {
    let mut intake_done = None;
    let mut recovery_done = None;
    // The loops only end early on an error that retrying cannot fix.
    tokio::select! {
        () = shutdown => tracing::info!("shutdown requested"),
        ended = &mut intake => intake_done = Some(ended),
        ended = &mut recovery => recovery_done = Some(ended),
    }
    let budget = shared.config.shutdown_budget;
    let deadline = Instant::now() + budget;
    shared.stop.raise();

    // Phase 1, within the budget: the loops stop taking permits and finish the
    // read in progress (whose entries become jobs like any others); then every
    // permit coming back means every job task has ended.
    let drained = tokio::time::timeout_at(deadline, async {
        if intake_done.is_none() {
            intake_done = Some((&mut intake).await);
        }
        if recovery_done.is_none() {
            recovery_done = Some((&mut recovery).await);
        }
        let all = u32::try_from(shared.config.concurrency).unwrap_or(u32::MAX);
        // Only fails if the semaphore were closed, which nothing does.
        let _ = shared.permits.acquire_many(all).await;
    })
    .await
    .is_ok();

    // Phase 2, budget spent: abandon handlers and reads still running. Job
    // tasks return promptly (one in the middle of an ack finishes it).
    if !drained {
        shared.cancel.raise();
    }
    if intake_done.is_none() {
        intake_done = Some(intake.await);
    }
    if recovery_done.is_none() {
        recovery_done = Some(recovery.await);
    }
    let mut tasks = std::mem::take(
        &mut *shared
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    while let Some(ended) = tasks.join_next().await {
        log_task_end(ended);
    }

    let report = shared.counters.report();
    if report.in_flight_left_pending > 0 {
        tracing::warn!(
            left_pending = report.in_flight_left_pending,
            ?budget,
            "shutdown budget spent: jobs still running were left pending for redelivery",
        );
    }
    tracing::info!(?report, "worker stopped");

    for ended in [intake_done, recovery_done].into_iter().flatten() {
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(err),
            // A panic in a loop is a runtime bug: let it surface as one.
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic())
            }
            // Not reachable: nothing aborts the loops, they stop on their flags.
            Err(_) => {}
        }
    }
    Ok(report)
}
