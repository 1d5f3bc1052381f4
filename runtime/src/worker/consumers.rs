//! The leader's consumer pruning: consumers of a led partition's group idle past `group.prune_consumers_after` that hold no pending entry are removed, so the consumers each deploy adds (one per pod name) do not pile up.
//!
//! One `consumers_prune` call per stream lists the group's consumers and
//! removes the stale ones together, so no entry can be delivered to a
//! consumer between the check and its removal. It never removes this
//! worker's own consumer. A failed call is logged and tried again next time:
//! pruning is hygiene, and never stops the worker.

use std::time::Duration;

use tokio::time::Instant;

use super::Core;
use crate::functions::{command, ConsumersPrune, Function};
use crate::stream_slot::StreamSlot;

/// The longest wait between two prunes: a bound of days still prunes within the hour.
const MAX_PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// The longest wait for a worker's first prune.
const FIRST_PRUNE_AFTER: Duration = Duration::from_secs(300);

/// When the recovery loop prunes next.
pub(super) struct Pruning {
    every: Duration,
    next: Instant,
}

impl Pruning {
    /// A tenth of `group.prune_consumers_after`, between `claim.every` and
    /// an hour: a consumer is removed at most that long after its bound.
    /// The first pass comes at most [`FIRST_PRUNE_AFTER`] after the start,
    /// so that where pods live shorter than a period, the leaders each
    /// deploy starts still prune.
    pub(super) fn new(shared: &Core) -> Pruning {
        let config = &shared.config;
        let every = (config.prune_consumers_after / 10)
            .min(MAX_PRUNE_EVERY)
            .max(config.claim.every);
        Pruning {
            every,
            next: Instant::now() + every.min(FIRST_PRUNE_AFTER),
        }
    }

    /// Whether a pass is due now; if so, the next one is a period later.
    pub(super) fn due(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + self.every;
        true
    }
}

/// Removes the stale consumers of each of `streams`' group (the partitions
/// this worker leads); `false` if shutdown cut the pass short.
pub(super) async fn prune(shared: &Core, streams: &[StreamSlot]) -> bool {
    let config = &shared.config;
    let function = config.function(Function::ConsumersPrune);
    let min_idle_ms = u64::try_from(config.prune_consumers_after.as_millis()).unwrap_or(u64::MAX);
    for &stream in streams {
        let key = config.ready_key(stream);
        let pruned_key = config.pruned_key(stream);
        let call = ConsumersPrune {
            ready_key: &key,
            pruned_key: &pruned_key,
            group: &config.group,
            keep: &shared.consumer,
            min_idle_ms,
        };
        let reply = shared
            .cancel
            .unless_raised(
                command(&function, &call)
                    .query_async::<Vec<String>>(&mut shared.multiplexed.clone()),
            )
            .await;
        match reply {
            None => return false,
            Some(Ok(removed)) if removed.is_empty() => {}
            Some(Ok(removed)) => {
                shared.events.consumers_pruned(stream, removed.len() as u64);
                tracing::info!(
                    key = %key,
                    group = &*config.group,
                    removed = ?removed,
                    idle_over = ?config.prune_consumers_after,
                    "removed idle consumers holding no pending entry",
                );
            }
            Some(Err(err)) => tracing::warn!(
                key = %key,
                group = &*config.group,
                error = %err,
                "pruning idle consumers failed; trying again next period",
            ),
        }
    }
    true
}
