//! One pass over a partition: take its lease, plan both streams, apply what removes anything, release.

use std::time::Duration;

use redis::aio::ConnectionLike;

use super::{apply, plan_streams, StreamRole, TrimPlan, Trimmed, LEASE_TTL};
use crate::config::QueueConfig;
use crate::error::Result;
use crate::lease::{self, Lease};
use crate::stream_slot::StreamSlot;

/// How [`trim_partition`] trims.
#[derive(Debug, Clone)]
pub struct TrimOptions {
    /// Stored in the lease: who is trimming (see [`lease::unique_holder`]).
    pub holder: String,
    /// Add `ACKED` to `XTRIM` (only where [`xtrim_acked_supported`]).
    pub xtrim_acked: bool,
    /// How long to wait for a lease someone else holds before giving up
    /// with [`OperationError::LeaseHeld`](crate::error::OperationError::LeaseHeld); zero: do not wait.
    pub lease_wait: Duration,
}

/// One stream of a [`trim_partition`] pass.
#[derive(Debug)]
pub struct StreamTrim {
    pub plan: TrimPlan,
    /// `Ok(None)`: nothing was below the MINID, so nothing was called.
    pub result: Result<Option<Trimmed>>,
}

/// Trims the ready and dead-letter streams of `stream` (one lane of a
/// partition) under its lease: plans them, applies
/// each plan with something to remove, releases the lease. A stream that
/// does not exist is left out (a dead-letter stream before its first dead
/// letter). Fails as a whole only when the lease cannot be had
/// ([`OperationError::LeaseHeld`](crate::error::OperationError::LeaseHeld)) or the plan cannot be read; one stream's failed
/// apply is in its [`StreamTrim::result`].
pub async fn trim_partition<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    options: &TrimOptions,
) -> Result<Vec<StreamTrim>> {
    let key = config.trim_lease_key(stream);
    let lease = if options.lease_wait.is_zero() {
        lease::acquire(conn, &config.functions, &key, &options.holder, LEASE_TTL).await?
    } else {
        lease::acquire_waiting(
            conn,
            &config.functions,
            &key,
            &options.holder,
            LEASE_TTL,
            options.lease_wait,
        )
        .await?
    };
    let trimmed = trim_leased(conn, config, stream, &lease, options.xtrim_acked).await;
    // Released whatever happened; if that fails, the lease expires by itself.
    if let Err(err) = lease::release(conn, &config.functions, &lease).await {
        tracing::warn!(lease = lease.key(), error = %err, "releasing the trim lease failed; it expires by itself");
    }
    trimmed
}

async fn trim_leased<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    lease: &Lease,
    xtrim_acked: bool,
) -> Result<Vec<StreamTrim>> {
    let targets = StreamRole::BOTH.map(|role| (stream, role));
    let plans = plan_streams(conn, config, &targets, 0).await?;
    let mut streams = Vec::with_capacity(plans.len());
    for plan in plans.into_iter().flatten() {
        let result = if plan.removes_anything() {
            apply(conn, config, &plan, lease, xtrim_acked)
                .await
                .map(Some)
        } else {
            Ok(None)
        };
        streams.push(StreamTrim { plan, result });
    }
    Ok(streams)
}

/// Whether every primary accepts `XTRIM … ACKED` (Redis 8.2 and later): its
/// `COMMAND DOCS XTRIM` lists the `ACKED` token. Asked of each primary,
/// never inferred from a version (Valkey answers `redis_version:7.2.4`
/// whatever it has).
pub async fn xtrim_acked_supported(redis: &crate::connect::Redis) -> Result<bool> {
    crate::connect::every_primary_has_argument(redis, "xtrim", "ACKED").await
}
