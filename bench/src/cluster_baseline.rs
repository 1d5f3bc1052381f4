//! The hand-written baseline on a Redis Cluster: what a careful redis-rs user
//! writes over the same partitioned streams queuegen uses.
//!
//! A single stream would put the whole baseline on one primary, so on a
//! Cluster the baseline gets `--partitions` streams with the hash tags of
//! queuegen's ready streams (`{jobs-NN}`: the same slots, so the same
//! primaries) and the producer's partition function, so both sides spread
//! their jobs the same way. Publish: per batch, one pipeline of `XADD`s per
//! partition (a Cluster pipeline must stay in one slot), sent concurrently
//! on a `ClusterConnection`. Process: `max(8, partitions)` consumers, each
//! with a Cluster connection of its own, consumer `c` looping
//! `XREADGROUP … COUNT 100 BLOCK 100` on partition `c mod partitions` and
//! acking each read with one `XACK`, until every job has started.
//!
//! The probe's sampling and wait for the last ack go through queuegen's
//! Cluster-aware connection: they are the observer, the same in every
//! variant, not part of the baseline's work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use queuegen_runtime::{partition_of, QueueConfig, Redis};
use queuegen_tests::queues::jobs;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use crate::baseline::{consume, entry};
use crate::probe::{self, Probe, RoundResult, Timeline};
use crate::usage;
use crate::Args;

const MIN_CONSUMERS: usize = 8;
/// Above the consumers' `BLOCK` (100 ms): the Cluster client's response
/// timeout bounds blocking reads too.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const GROUP: &str = "g";

pub async fn run(args: &Args, url: &str, observer: &Redis, prefix: &str) -> Result<RoundResult> {
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
    let keys: Vec<String> = (0..args.partitions)
        .map(|p| format!("{prefix}:{{{}}}:baseline", config.partition_tag(p)))
        .collect();
    for key in &keys {
        redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(key)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async::<()>(&mut conn)
            .await
            .with_context(|| format!("XGROUP CREATE {key}"))?;
    }
    let probe = Arc::new(Probe::new(args.jobs));
    let mut observe = observer.shared();

    let before_publish = usage::sample(&mut observe).await?;
    let publish_start = Instant::now();
    tokio::time::timeout(args.timeout(), publish(&conn, &config, &keys, args))
        .await
        .context("timed out publishing (raise --timeout)")??;
    let publish_end = Instant::now();
    let after_publish = usage::sample(&mut observe).await?;

    let consumers = MIN_CONSUMERS.max(keys.len());
    let mut running = Vec::with_capacity(consumers);
    for c in 0..consumers {
        let conn = client
            .get_async_connection()
            .await
            .context("connecting a baseline consumer")?;
        let key = keys[c % keys.len()].clone();
        running.push(tokio::spawn(consume(
            conn,
            key,
            format!("c{c}"),
            probe.clone(),
        )));
    }
    let last_ack = probe::wait_last_ack(&mut observe, &probe, &keys, GROUP, args.timeout()).await;
    let after_last_ack = usage::sample(&mut observe).await?;
    for consumer in running {
        tokio::time::timeout(args.timeout(), consumer)
            .await
            .context("timed out waiting for a baseline consumer to stop")?
            .context("a baseline consumer panicked")?
            .context("a baseline consumer failed")?;
    }
    let timeline = Timeline {
        publish_start,
        publish_end,
        last_ack: last_ack?,
        samples: [before_publish, after_publish, after_last_ack],
    };
    RoundResult::new(args.jobs, &probe, timeline, None)
}

/// Batches of `--batch` jobs, each split into one pipeline per partition,
/// the pipelines of a batch in flight together.
async fn publish(
    conn: &ClusterConnection,
    config: &QueueConfig,
    keys: &[String],
    args: &Args,
) -> Result<()> {
    let mut i = 0;
    while i < args.jobs {
        let end = (i + args.batch as u64).min(args.jobs);
        let mut pipes = vec![redis::pipe(); keys.len()];
        for n in i..end {
            let pairs = entry(n)?;
            let partition = usize::from(partition_of(config, &pairs));
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
        i = end;
    }
    Ok(())
}
