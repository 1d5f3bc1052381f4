//! The hand-written baseline: what a careful redis-rs user writes without queuegen.
//!
//! One stream, one group `g`. Publish: the same envelope fields the runtime
//! writes (`queuegen_runtime::envelope::encode` of a `TestJob`), encoded and
//! sent as pipelined `XADD`s of `--batch` entries on one multiplexed
//! connection. Process: 8 consumers (`base`, `baseR`, `baseP`) or one
//! (`base1`), each on its own connection, looping
//! `XREADGROUP GROUP g cN COUNT 100 BLOCK 100 STREAMS key >`, calling the
//! probe for each entry (its "handler start"), for `baseR` committing each
//! job's result (`SET … NX GET PX`, as `RedisResults` does), for `baseP`
//! committing each job's `documents` row and marker in one tokio-postgres
//! transaction on a pool of `--pg-pool` connections of its own (the read's
//! jobs in flight together, as many at once as the pool has connections;
//! see `pg::BaselineStore`), and then one `XACK` of every ID of that read,
//! until every job has started. The entry-shape variants (`baseF`, `baseB`,
//! `baseM`, `baseK`, `baseJ`; see `shape`) write each job in their shape
//! and decode every entry read into its `TestJob` envelope before the probe.

use std::ops::Range;
use std::sync::Arc;

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use queuegen_runtime::envelope::{self, header_fields, Envelope, Header};
use queuegen_runtime::Timestamp;
use queuegen_tests::queues::envelopes::TestJob;
use queuegen_tests::queues::jobs;
use redis::aio::ConnectionLike;
use redis::streams::{StreamId, StreamReadReply};
use tokio::task::JoinHandle;

use crate::pg::{self, Document};
use crate::probe::{self, Probe, RoundResult, Timeline};
use crate::shape::Shape;
use crate::steady::{self, Schedule};
use crate::{Args, Baseline, Sink};

const CONSUMERS: usize = 8;
const READ_COUNT: usize = 100;
const BLOCK_MS: u64 = 100;
/// The block of a consumer over several partitions once a sweep found
/// nothing: short, since entries may arrive on a partition it is not
/// blocked on (10 ms, the runtime's shortest read block).
const SWEEP_BLOCK_MS: u64 = 10;
pub const GROUP: &str = "g";

pub async fn run(
    args: &Args,
    url: &str,
    prefix: &str,
    Baseline {
        single,
        dedup,
        shape,
        ..
    }: Baseline,
    sink: Sink<'_>,
) -> Result<RoundResult> {
    let client = redis::Client::open(url).context("parsing the Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connecting the baseline publisher")?;
    let key = format!("{prefix}:baseline");
    redis::cmd("XGROUP")
        .arg(&["CREATE", &key, GROUP, "0", "MKSTREAM"])
        .query_async::<()>(&mut conn)
        .await
        .context("XGROUP CREATE")?;
    if dedup {
        // Loaded before the clock starts: the pipeline sends EVALSHA only.
        redis::Script::new(PUBLISH_ONCE)
            .prepare_invoke()
            .load_async(&mut conn)
            .await
            .context("SCRIPT LOAD of the dedup script")?;
    }
    let probe = Arc::new(Probe::new(args.jobs, args.rate.is_some()));
    let mut idle = Vec::new();
    for n in 0..if single { 1 } else { CONSUMERS } {
        // Default response timeout (500 ms) exceeds BLOCK_MS.
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .context("connecting a baseline consumer")?;
        let commit = Commit::of(sink, prefix, args).await?;
        idle.push(consume(
            conn,
            vec![key.clone()],
            format!("c{n}"),
            probe.clone(),
            commit,
            shape,
        ));
    }
    let start = || idle.into_iter().map(tokio::spawn).collect();
    let phases = probe::run_phases(
        args,
        &mut conn.clone(),
        &probe,
        std::slice::from_ref(&key),
        GROUP,
        start,
        |range, schedule| publish(conn.clone(), key.clone(), range, schedule, dedup, shape),
    )
    .await?;
    end_round(args, &probe, phases).await
}

/// The end of a baseline round (standalone or Cluster): waits for the
/// consumers to stop (one still blocked in its read returns within
/// BLOCK_MS), then the round's figures from its timeline.
pub async fn end_round(
    args: &Args,
    probe: &Probe,
    (timeline, consumers): (Result<Timeline>, Vec<JoinHandle<Result<()>>>),
) -> Result<RoundResult> {
    probe::join_all_within(consumers, args.timeout(), "a baseline consumer", "stop").await?;
    RoundResult::new(probe, timeline?, None)
}

/// What a baseline consumer commits per job: a Redis result (`baseR`: per
/// job one `SET {prefix}:results:jobs:{job_id} value NX GET PX ttl`, the
/// key, command and ttl `RedisResults` uses for `qg8r`) or a PostgreSQL
/// transaction (`baseP`, each consumer its own pool).
#[derive(Clone)]
pub enum Commit {
    Redis { key_prefix: String },
    Postgres(pg::BaselineStore),
}

impl Commit {
    /// One consumer's commit for `sink` (none for a no-op consumer).
    pub async fn of(sink: Sink<'_>, prefix: &str, args: &Args) -> Result<Option<Commit>> {
        Ok(match sink {
            Sink::Nothing => None,
            Sink::Redis => Some(Commit::Redis {
                key_prefix: prefix.to_owned(),
            }),
            Sink::Postgres(round) => Some(Commit::Postgres(
                round
                    .baseline_store(args.pg_pool)
                    .await
                    .context("opening a baseline consumer's PostgreSQL pool")?,
            )),
        })
    }
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

/// baseD's check-and-append: the shortest atomic dedup at publish by hand.
const PUBLISH_ONCE: &str = "local first = redis.call('GET', KEYS[2]) \
    if first then return first end \
    local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2)) \
    redis.call('SET', KEYS[2], id, 'PX', ARGV[1]) \
    return id";

/// Jobs `range` as one pipeline of `XADD`s, or with `dedup` (baseD) of
/// `EVALSHA`s of [`PUBLISH_ONCE`], each with its job's marker key (an
/// hour's window); with a `shape`, `XADD`s of entries in that shape.
async fn publish(
    mut conn: redis::aio::MultiplexedConnection,
    key: String,
    range: Range<u64>,
    schedule: Option<Schedule>,
    dedup: bool,
    shape: Option<Shape>,
) -> Result<()> {
    let script = dedup.then(|| redis::Script::new(PUBLISH_ONCE));
    let mut pipe = redis::pipe();
    if let Some(shape) = shape {
        for n in range {
            let entry = shape.encode(&header(n, schedule.as_ref()), &job(n))?;
            pipe.cmd("XADD").arg(&key).arg("*").arg(&entry[..]);
        }
        return pipe
            .query_async::<()>(&mut conn)
            .await
            .context("pipelined XADD");
    }
    for n in range {
        let entry = entry(n, schedule.as_ref())?;
        let Some(script) = &script else {
            pipe.cmd("XADD").arg(&key).arg("*").arg(&entry[..]);
            continue;
        };
        let job_id = entry
            .iter()
            .find(|(name, _)| *name == header_fields::JOB_ID)
            .map_or("", |(_, value)| value.as_str());
        pipe.invoke_script(
            script
                .key(&key)
                .key(format!("{key}:marker:{job_id}"))
                .arg(3_600_000)
                .arg(&entry[..]),
        );
    }
    let what = if dedup {
        "pipelined dedup script"
    } else {
        "pipelined XADD"
    };
    pipe.query_async::<()>(&mut conn).await.context(what)
}

/// The stream entry of job `n`: its header and body pairs, exactly as the
/// generated producer writes them.
pub fn entry(n: u64, schedule: Option<&Schedule>) -> Result<Vec<(&'static str, String)>> {
    envelope::encode(&header(n, schedule), &job(n)).context("encoding a job")
}

/// The header of job `n`'s first attempt, as the generated producer makes it.
pub fn header(n: u64, schedule: Option<&Schedule>) -> Header {
    Header {
        job_id: steady::job_id(n, schedule),
        envelope_type: TestJob::TYPE.to_owned(),
        tenant: tenant(n),
        schema: TestJob::SCHEMA,
        created_at: Timestamp::now(),
        trace_id: trace_id(n),
        attempt: 1,
        prev_id: None,
        reason: None,
    }
}

/// A 128-bit hex trace ID, as cheap to make as the runtime's random one.
fn trace_id(n: u64) -> String {
    let mixed = (u128::from(n) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    format!("{mixed:032x}")
}

/// One consumer's loop, on a server or a Cluster, until every job started:
/// read up to `READ_COUNT` from one of `keys`, call the probe for each entry
/// (its "handler start"), with a result store commit each job's result
/// (the SETs of a read sent together), with PostgreSQL each job's
/// transaction (a read's in flight together, bounded by the pool), and ack
/// the read with one `XACK`. With a `shape`, each entry is first decoded
/// into its header and `TestJob`, as a worker would before its handler.
/// With one key every read blocks for up to `BLOCK_MS`. With several (one
/// consumer over a Cluster's partitions) it reads them in turn without
/// blocking, and blocks (for `SWEEP_BLOCK_MS` only) once a whole sweep
/// found nothing, so an idle partition holds up a busy one for 10 ms at most.
pub async fn consume<C: ConnectionLike + Clone + Send>(
    mut conn: C,
    keys: Vec<String>,
    name: String,
    probe: Arc<Probe>,
    store: Option<Commit>,
    shape: Option<Shape>,
) -> Result<()> {
    let mut turn = 0;
    let mut empty_reads = 0;
    while !probe.all_started() {
        let key = &keys[turn % keys.len()];
        turn += 1;
        let mut read = redis::cmd("XREADGROUP");
        read.arg(&["GROUP", GROUP, &name, "COUNT"]).arg(READ_COUNT);
        if keys.len() == 1 {
            read.arg("BLOCK").arg(BLOCK_MS);
        } else if empty_reads >= keys.len() {
            read.arg("BLOCK").arg(SWEEP_BLOCK_MS);
        }
        let reply: Option<StreamReadReply> = read
            .arg(&["STREAMS", key, ">"])
            .query_async(&mut conn)
            .await
            .with_context(|| format!("XREADGROUP {key}"))?;
        let entries: Vec<StreamId> = reply
            .into_iter()
            .flat_map(|reply| reply.keys)
            .flat_map(|stream| stream.ids)
            .collect();
        if entries.is_empty() {
            empty_reads += 1;
            continue;
        }
        empty_reads = 0;
        let wants_job_id = store.is_some() || probe.wants_job_id();
        let mut sets = Vec::new();
        let mut documents = Vec::new();
        for entry in &entries {
            let job_id: Option<String> = if let Some(shape) = shape {
                let (header, job) = shape
                    .decode(&entry.map)
                    .with_context(|| format!("decoding entry {} of {key}", entry.id))?;
                // The envelope a handler would get: kept from being optimised away.
                std::hint::black_box(job);
                wants_job_id.then_some(header.job_id)
            } else if wants_job_id {
                entry.get(header_fields::JOB_ID)
            } else {
                None
            };
            // The no-op "handler": the same probe queuegen's handler calls.
            probe.handler_started(&entry.id, job_id.as_deref());
            match (&store, job_id) {
                (Some(Commit::Redis { key_prefix }), Some(job_id)) => {
                    let (queue, ttl) = (&jobs::CONFIG.queue, jobs::CONFIG.retention.marker_ttl);
                    let mut set = redis::cmd("SET");
                    set.arg(format!("{key_prefix}:results:{queue}:{job_id}"))
                        .arg(entry.get::<Vec<u8>>("subject_ref").unwrap_or_default())
                        .arg(&["NX", "GET", "PX"])
                        .arg(ttl.as_millis() as u64);
                    sets.push(set);
                }
                (Some(Commit::Postgres(_)), Some(job_id)) => documents.push(Document {
                    job_id,
                    subject_ref: entry.get("subject_ref").unwrap_or_default(),
                    pages: entry
                        .get::<String>("pages")
                        .and_then(|pages| pages.parse().ok()),
                    stream_id: entry.id.clone(),
                }),
                _ => {}
            }
        }
        try_join_all(sets.iter().map(|set| {
            let mut conn = conn.clone();
            async move { set.query_async::<Option<Vec<u8>>>(&mut conn).await }
        }))
        .await
        .context("committing results (SET NX GET PX)")?;
        if let Some(Commit::Postgres(pg)) = &store {
            try_join_all(documents.iter().map(|document| pg.commit(document)))
                .await
                .context("committing documents rows and markers")?;
        }
        let ids: Vec<&str> = entries.iter().map(|entry| entry.id.as_str()).collect();
        redis::cmd("XACK")
            .arg(&[key, GROUP])
            .arg(&ids)
            .query_async::<()>(&mut conn)
            .await
            .with_context(|| format!("XACK {key}"))?;
    }
    Ok(())
}
