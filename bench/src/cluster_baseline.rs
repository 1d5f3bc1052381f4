//! The hand-written baseline on a Redis Cluster: what a careful redis-rs user
//! writes over the same partitioned streams queuegen uses.
//!
//! A single stream would put the whole baseline on one primary, so on a
//! Cluster the baseline gets `--partitions` streams with the hash tags of
//! queuegen's ready streams (`{jobs-NN}`: the same slots, so the same
//! primaries) and the producer's partition function, so both sides spread
//! their jobs the same way. Publish: per batch, one pipeline of `XADD`s per
//! partition (a Cluster pipeline must stay in one slot), sent concurrently
//! on a `ClusterConnection`. Process: `max(8, partitions)` consumers
//! (`base`, `baseR`, `baseP`), each with a Cluster connection of its own,
//! consumer `c` looping `XREADGROUP … COUNT 100 BLOCK 100` on partition
//! `c mod partitions` (`baseR`, `baseP`: committing each job's result or
//! transaction) and acking
//! each read with one `XACK`, until every job has started. `base1` is one
//! consumer on one connection taking the partitions in turn: a
//! non-blocking read of each, blocking (10 ms) only after a sweep that
//! found nothing (see `baseline::consume`).
//!
//! The probe's sampling and wait for the last ack go through queuegen's
//! Cluster-aware connection: they are the observer, the same in every
//! variant, not part of the baseline's work.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use queuegen_runtime::partition::partition_of;
use queuegen_runtime::{Partition, QueueConfig, Redis};
use queuegen_tests::queues::jobs;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use crate::baseline::{consume, end_round, entry, Commit, GROUP};
use crate::probe::{self, Probe, RoundResult};
use crate::steady::Schedule;
use crate::{Args, Sink};

const MIN_CONSUMERS: usize = 8;
/// Above the consumers' `BLOCK` (100 ms): the Cluster client's response
/// timeout bounds blocking reads too.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn run(
    args: &Args,
    url: &str,
    observer: &Redis,
    prefix: &str,
    single: bool,
    sink: Sink<'_>,
) -> Result<RoundResult> {
    let client = ClusterClient::builder([url])
        .response_timeout(RESPONSE_TIMEOUT)
        .build()
        .context("building the Cluster client")?;
    let mut conn = client
        .get_async_connection()
        .await
        .context("connecting the baseline publisher")?;
    // The queue's partitioning (`partition_by`, partition count) with the
    // baseline's own key names.
    let config = QueueConfig {
        partitions: args.partitions,
        ..jobs::CONFIG
    };
    let keys: Vec<String> = Partition::all(args.partitions)
        .map(|p| format!("{prefix}:{{{}}}:baseline", config.partition_tag(p)))
        .collect();
    for key in &keys {
        redis::cmd("XGROUP")
            .arg(&["CREATE", key, GROUP, "0", "MKSTREAM"])
            .query_async::<()>(&mut conn)
            .await
            .with_context(|| format!("XGROUP CREATE {key}"))?;
    }
    let probe = Arc::new(Probe::new(args.jobs, args.rate.is_some()));
    // One consumer over every partition, or one per partition (at least 8).
    let reads: Vec<Vec<String>> = if single {
        vec![keys.clone()]
    } else {
        (0..MIN_CONSUMERS.max(keys.len()))
            .map(|c| vec![keys[c % keys.len()].clone()])
            .collect()
    };
    let mut idle = Vec::with_capacity(reads.len());
    for (c, keys) in reads.into_iter().enumerate() {
        let conn = client
            .get_async_connection()
            .await
            .context("connecting a baseline consumer")?;
        let commit = Commit::of(sink, prefix, args).await?;
        idle.push(consume(
            conn,
            keys,
            format!("c{c}"),
            probe.clone(),
            commit,
            None,
        ));
    }
    let start = || idle.into_iter().map(tokio::spawn).collect();
    let phases = probe::run_phases(
        args,
        &mut observer.shared(),
        &probe,
        &keys,
        GROUP,
        start,
        |range, schedule| publish(&conn, &config, &keys, range, schedule),
    )
    .await?;
    end_round(args, &probe, phases).await
}

/// Jobs `range` split into one pipeline per partition, the pipelines in
/// flight together.
async fn publish(
    conn: &ClusterConnection,
    config: &QueueConfig,
    keys: &[String],
    range: Range<u64>,
    schedule: Option<Schedule>,
) -> Result<()> {
    let mut pipes = vec![redis::pipe(); keys.len()];
    for n in range {
        let pairs = entry(n, schedule.as_ref())?;
        let partition = usize::from(partition_of(config, &pairs).index());
        pipes[partition]
            .cmd("XADD")
            .arg(&keys[partition])
            .arg("*")
            .arg(&pairs[..]);
    }
    let sends = pipes
        .into_iter()
        .filter(|pipe| !pipe.is_empty())
        .map(|pipe| {
            let mut conn = conn.clone();
            async move { pipe.query_async::<()>(&mut conn).await }
        });
    try_join_all(sends).await.context("pipelined XADD")?;
    Ok(())
}
