//! The hand-written baseline: what a careful redis-rs user writes without queuegen.
//!
//! One stream, one group `g`. Publish: the same envelope fields the runtime
//! writes (`queuegen_runtime::envelope::encode` of a `TestJob`), encoded and
//! sent as pipelined `XADD`s of `--batch` entries on one multiplexed
//! connection. Process: 8 consumers, each on its own connection, looping
//! `XREADGROUP GROUP g cN COUNT 100 BLOCK 100 STREAMS key >`, calling the
//! probe for each entry (its "handler start") and then one `XACK` of every ID
//! of that read, until every job has started.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use queuegen_runtime::envelope::{self, Envelope, Header};
use queuegen_runtime::Timestamp;
use queuegen_tests::queues::envelopes::TestJob;
use redis::aio::ConnectionLike;
use redis::streams::StreamReadReply;

use crate::probe::{self, Probe, RoundResult, Timeline};
use crate::usage;
use crate::Args;

const CONSUMERS: usize = 8;
const READ_COUNT: usize = 100;
const BLOCK_MS: u64 = 100;
const GROUP: &str = "g";

pub async fn run(args: &Args, url: &str, prefix: &str) -> Result<RoundResult> {
    let client = redis::Client::open(url).context("parsing the Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connecting the baseline publisher")?;
    let key = format!("{prefix}:baseline");
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&key)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async::<()>(&mut conn)
        .await
        .context("XGROUP CREATE")?;
    let probe = Arc::new(Probe::new(args.jobs));

    let before_publish = usage::sample(&mut conn).await?;
    let publish_start = Instant::now();
    tokio::time::timeout(args.timeout(), publish(&mut conn, &key, args))
        .await
        .context("timed out publishing (raise --timeout)")??;
    let publish_end = Instant::now();
    let after_publish = usage::sample(&mut conn).await?;

    let mut consumers = Vec::with_capacity(CONSUMERS);
    for n in 0..CONSUMERS {
        // Default response timeout (500 ms) exceeds BLOCK_MS.
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .context("connecting a baseline consumer")?;
        let consumer = consume(conn, key.clone(), format!("c{n}"), probe.clone());
        consumers.push(tokio::spawn(consumer));
    }
    let last_ack = probe::wait_last_ack(
        &mut conn,
        &probe,
        std::slice::from_ref(&key),
        GROUP,
        args.timeout(),
    )
    .await;
    let after_last_ack = usage::sample(&mut conn).await?;
    for consumer in consumers {
        // A consumer still blocked in its read returns within BLOCK_MS.
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

/// The envelope pairs of job `i`, exactly as the generated producer writes them.
pub fn job(i: u64) -> TestJob {
    TestJob {
        subject_ref: format!("doc-{i}"),
        pages: Some((i % 100) as u32),
    }
}

pub fn tenant(i: u64) -> String {
    format!("tenant-{}", i % 16)
}

async fn publish(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    args: &Args,
) -> Result<()> {
    let mut i = 0;
    while i < args.jobs {
        let end = (i + args.batch as u64).min(args.jobs);
        let mut pipe = redis::pipe();
        for n in i..end {
            pipe.cmd("XADD").arg(key).arg("*").arg(&entry(n)?[..]);
        }
        pipe.query_async::<()>(conn)
            .await
            .context("pipelined XADD")?;
        i = end;
    }
    Ok(())
}

/// The stream entry of job `n`: its header and body pairs, exactly as the
/// generated producer writes them.
pub fn entry(n: u64) -> Result<Vec<(&'static str, String)>> {
    let header = Header {
        job_id: format!("job-{n}"),
        envelope_type: TestJob::TYPE.to_owned(),
        tenant: tenant(n),
        schema: TestJob::SCHEMA,
        created_at: Timestamp::now(),
        trace_id: trace_id(n),
        attempt: 1,
        prev_id: None,
        reason: None,
    };
    envelope::encode(&header, &job(n)).context("encoding a job")
}

/// A 128-bit hex trace ID, as cheap to make as the runtime's random one.
fn trace_id(n: u64) -> String {
    let mixed = (u128::from(n) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    format!("{mixed:032x}")
}

/// One consumer's loop, on a server or (on its partition) a Cluster: read up
/// to `READ_COUNT` with `BLOCK_MS`, call the probe for each entry (its
/// "handler start"), ack the read with one `XACK`, until every job started.
pub async fn consume<C: ConnectionLike + Send>(
    mut conn: C,
    key: String,
    name: String,
    probe: Arc<Probe>,
) -> Result<()> {
    while !probe.all_started() {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&name)
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS")
            .arg(&key)
            .arg(">")
            .query_async(&mut conn)
            .await
            .with_context(|| format!("XREADGROUP {key}"))?;
        let Some(reply) = reply else { continue };
        let ids: Vec<String> = reply
            .keys
            .into_iter()
            .flat_map(|stream| stream.ids)
            .map(|entry| {
                // The no-op "handler": the same probe queuegen's handler calls.
                probe.handler_started(&entry.id);
                entry.id
            })
            .collect();
        if ids.is_empty() {
            continue;
        }
        redis::cmd("XACK")
            .arg(&key)
            .arg(GROUP)
            .arg(&ids)
            .query_async::<()>(&mut conn)
            .await
            .with_context(|| format!("XACK {key}"))?;
    }
    Ok(())
}
