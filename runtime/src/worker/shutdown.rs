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

use super::{Core, WorkerReport};
use crate::error::Result;

/// Waits until one of the loops ends; its index and how it ended.
async fn first_to_end<const N: usize>(
    loops: &mut [(JoinHandle<Result<()>>, Option<JoinResult>); N],
) -> (usize, JoinResult) {
    std::future::poll_fn(|cx| {
        for (index, (handle, ended)) in loops.iter_mut().enumerate() {
            if ended.is_some() {
                continue;
            }
            if let std::task::Poll::Ready(ended) = std::pin::Pin::new(handle).poll(cx) {
                return std::task::Poll::Ready((index, ended));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

type JoinResult = std::result::Result<Result<()>, tokio::task::JoinError>;

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

fn all_permits(core: &Core) -> u32 {
    u32::try_from(core.config.handler.concurrency).unwrap_or(u32::MAX)
}

/// Supervises a running worker until `shutdown` completes (or a loop fails),
/// then shuts it down within the budget and reports. `loops` are the intake,
/// recovery, scheduler, trimmer and leadership loops; each ends on the stop flag.
pub(super) async fn run<const N: usize>(
    core: Arc<Core>,
    loops: [JoinHandle<Result<()>>; N],
    shutdown: impl Future<Output = ()> + Send,
) -> Result<WorkerReport> {
    let mut loops = loops.map(|handle| (handle, None));
    // The loops only end early on an error that retrying cannot fix.
    tokio::select! {
        () = shutdown => tracing::info!("shutdown requested"),
        (index, ended) = first_to_end(&mut loops) => loops[index].1 = Some(ended),
    }
    let budget = core.config.handler.shutdown_budget;
    let deadline = Instant::now() + budget;
    core.stop.raise();

    // Phase 1, within the budget: the loops stop taking permits and finish the
    // read (or claim, or promotion) in progress, whose entries become jobs like
    // any others; then every permit coming back means every job task has ended.
    let drained = tokio::time::timeout_at(deadline, async {
        for (handle, ended) in &mut loops {
            if ended.is_none() {
                *ended = Some(handle.await);
            }
        }
        // Only fails if the semaphore were closed, which nothing does.
        let _ = core.jobs.permits.acquire_many(all_permits(&core)).await;
    })
    .await
    .is_ok();

    // Phase 2, budget spent: abandon handlers and reads still running. Job
    // tasks return promptly (one in the middle of an ack or a transition
    // finishes it), and so does the acker's flush in progress: every permit
    // comes back.
    if !drained {
        core.cancel.raise();
        for (handle, ended) in &mut loops {
            if ended.is_none() {
                *ended = Some(handle.await);
            }
        }
        let _ = core.jobs.permits.acquire_many(all_permits(&core)).await;
    }

    let report = core.events.report();
    if report.in_flight_left_pending > 0 {
        tracing::warn!(
            left_pending = report.in_flight_left_pending,
            ?budget,
            "shutdown budget spent: jobs still running were left pending for redelivery",
        );
    }
    tracing::info!(?report, "worker stopped");

    for ended in loops.into_iter().filter_map(|(_, ended)| ended) {
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
