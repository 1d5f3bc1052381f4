//! The outbox publisher: sends committed outbox rows to their streams with `XADD` and marks them dispatched; any number may run.
//!
//! One round works one partition of one queue, in one transaction:
//! 1. take the partition's advisory lock (`pg_try_advisory_xact_lock`; a
//!    partition another publisher holds is skipped) and its oldest
//!    undispatched rows, `FOR UPDATE SKIP LOCKED`, in id order;
//! 2. `XADD` them to the partition's ready stream in one pipeline;
//! 3. mark them dispatched with their stream IDs, and commit.
//!
//! The per-partition lock keeps one publisher at a time on a partition, so
//! the rows a round sees reach the stream in id order, and a row committed
//! after another committed (a causal order: one change, then the next) is
//! never sent before it. Rows of transactions that were running at the same
//! time have no such order: a row whose transaction commits later goes in a
//! later round even if its id is lower. Rows of different partitions go out
//! in parallel, one publisher each. A
//! publisher killed between 2 and 3 leaves its rows undispatched (the
//! server rolls back its transaction and frees the lock): the next round
//! sends them again. That job is then in the stream twice with one job_id,
//! which consumers absorb ([`PgResults`](super::PgResults) finds the first
//! delivery's marker): at least once, never lost.
//!
//! Polling, not `LISTEN/NOTIFY`: a notifying transaction takes a global
//! lock at commit that serializes every enqueuing transaction of the
//! database; an idle publisher instead asks for pending rows every
//! `idle_poll` (one indexed query), and while rows keep coming it never waits.

use std::borrow::Cow;
use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use rand::seq::SliceRandom;

use super::connect::Postgres;
use crate::config::QueueConfig;
use crate::connect::{Connection, Redis};
use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::packed::EntryArgs;
use crate::stream_slot::StreamSlot;

/// Rows one round sends at most (one `XADD` pipeline).
const DEFAULT_BATCH: usize = 500;
/// How long an idle publisher waits before it asks again.
const DEFAULT_IDLE_POLL: Duration = Duration::from_millis(25);
/// How long dispatched rows are kept (for audits and `stream_id` lookups).
const DEFAULT_KEEP: Duration = Duration::from_secs(24 * 3600);
/// How often dispatched rows older than `keep` are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// Rows one prune deletes at most, so it never holds locks for long.
const PRUNE_BATCH: i64 = 10_000;
/// The longest pause after a failed round (doubling from `idle_poll`).
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Publishes the outbox rows of some queues.
pub struct OutboxPublisher {
    pg: Postgres,
    redis: Connection,
    partitions: Vec<OutboxPartition>,
    batch: usize,
    idle_poll: Duration,
    keep: Duration,
    sql: Statements,
}

/// One partition of one queue: where its rows go and its lock's name.
#[derive(Debug, Clone)]
struct OutboxPartition {
    queue: Cow<'static, str>,
    /// The stream (lane and partition) whose rows these are: the table's
    /// `partition` column holds its number.
    slot: StreamSlot,
    stream: String,
    /// The queue's settings: with `dedup`, rows go out through the
    /// library's `publish_once`, so a row sent twice (a publisher killed
    /// between the send and the mark) appends once.
    config: QueueConfig,
    /// `hashtext` of this text, with the partition, keys the advisory lock.
    lock_name: String,
}

struct Statements {
    pending: String,
    take: String,
    mark: String,
    prune: String,
}

/// What a publisher did until it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublisherReport {
    /// Rows sent and marked dispatched.
    pub dispatched: u64,
    /// Rounds that failed (and were retried after a pause).
    pub failed_rounds: u64,
}

impl OutboxPublisher {
    /// A publisher of the rows of `queues` (rows of other queues are left
    /// for their own publishers), sending over `redis`'s shared connection.
    pub fn new(pg: &Postgres, redis: &Redis, queues: &[QueueConfig]) -> Self {
        let outbox = pg.table("outbox");
        let partitions = queues
            .iter()
            .flat_map(|config| {
                let lock_name = format!("{outbox} {}", config.queue);
                // Rows hold the stream number (lane and partition) their job was encoded for.
                StreamSlot::all(config.streams()).map(move |slot| OutboxPartition {
                    queue: config.queue.clone(),
                    slot,
                    stream: config.ready_key(slot),
                    config: config.clone(),
                    lock_name: lock_name.clone(),
                })
            })
            .collect();
        OutboxPublisher {
            pg: pg.clone(),
            redis: redis.shared(),
            partitions,
            batch: DEFAULT_BATCH,
            idle_poll: DEFAULT_IDLE_POLL,
            keep: DEFAULT_KEEP,
            sql: Statements {
                pending: format!(
                    "SELECT k.queue, k.partition FROM unnest($1::text[], $2::int4[]) AS k(queue, partition) \
                     WHERE EXISTS (SELECT 1 FROM {outbox} o WHERE o.queue = k.queue \
                     AND o.partition = k.partition AND o.dispatched_at IS NULL)"
                ),
                // The lock is taken once (the CTE), before any row is read:
                // a partition another publisher holds reads no rows at all.
                take: format!(
                    "WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtext($3), $2) AS held) \
                     SELECT o.id, o.fields FROM {outbox} o, lock \
                     WHERE lock.held AND o.queue = $1 AND o.partition = $2 AND o.dispatched_at IS NULL \
                     ORDER BY o.id LIMIT $4 FOR UPDATE OF o SKIP LOCKED"
                ),
                mark: format!(
                    "UPDATE {outbox} o SET dispatched_at = clock_timestamp(), stream_id = d.stream_id \
                     FROM unnest($1::int8[], $2::text[]) AS d(id, stream_id) WHERE o.id = d.id"
                ),
                prune: format!(
                    "DELETE FROM {outbox} WHERE id IN (SELECT id FROM {outbox} \
                     WHERE dispatched_at < clock_timestamp() - make_interval(secs => $1) LIMIT $2)"
                ),
            },
        }
    }

    /// Rows one round sends at most (default 500).
    pub fn batch(mut self, rows: usize) -> Self {
        self.batch = rows.max(1);
        self
    }

    /// How long an idle publisher waits before it asks again (default 25 ms):
    /// the commit-to-XADD lag of a job enqueued into an idle outbox.
    pub fn idle_poll(mut self, every: Duration) -> Self {
        self.idle_poll = every;
        self
    }

    /// How long dispatched rows stay in the table (default 24 h).
    pub fn keep(mut self, keep: Duration) -> Self {
        self.keep = keep;
        self
    }

    /// Sends every row committed so far (of every partition no other
    /// publisher holds), round by round, until none is left; returns how
    /// many rows this call dispatched.
    pub async fn publish_pending(&self) -> Result<u64> {
        let mut dispatched = 0;
        loop {
            let mut pending = self.pending_partitions().await?;
            if pending.is_empty() {
                return Ok(dispatched);
            }
            pending.shuffle(&mut rand::rng());
            let mut sent_this_sweep = 0;
            for partition in &pending {
                // Drain the partition while this publisher keeps getting it.
                loop {
                    let sent = self.dispatch(partition).await?;
                    sent_this_sweep += sent;
                    if sent < self.batch as u64 {
                        break;
                    }
                }
            }
            dispatched += sent_this_sweep;
            if sent_this_sweep == 0 {
                // Everything pending is another publisher's right now.
                return Ok(dispatched);
            }
        }
    }

    /// Publishes until `stop` completes, then returns between two rounds
    /// (a round in progress finishes: its rows are sent and marked, never
    /// left half done). A failed round (database or Redis unreachable) is
    /// logged and retried after a pause; its rows stay for the next one.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> Result<PublisherReport> {
        let mut stop = std::pin::pin!(stop);
        let mut report = PublisherReport::default();
        let mut backoff = self.idle_poll;
        let mut last_prune = Instant::now();
        loop {
            if (&mut stop).now_or_never().is_some() {
                return Ok(report);
            }
            let pause = match self.publish_pending().await {
                Ok(dispatched) => {
                    report.dispatched += dispatched;
                    backoff = self.idle_poll;
                    if dispatched > 0 {
                        continue;
                    }
                    self.idle_poll
                }
                Err(err) => {
                    report.failed_rounds += 1;
                    tracing::warn!(error = %err, retry_in = ?backoff, "outbox publisher: round failed; its rows stay for the next round");
                    let pause = backoff;
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
                    pause
                }
            };
            if last_prune.elapsed() >= PRUNE_EVERY {
                last_prune = Instant::now();
                if let Err(err) = self.prune().await {
                    tracing::warn!(error = %err, "outbox publisher: pruning dispatched rows failed");
                }
            }
            tokio::select! {
                () = &mut stop => return Ok(report),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// The partitions (of this publisher's queues) with undispatched rows.
    async fn pending_partitions(&self) -> Result<Vec<&OutboxPartition>> {
        let doing = "looking for undispatched outbox rows";
        let client = self.pg.client(doing).await?;
        let queues: Vec<&str> = self.partitions.iter().map(|p| &*p.queue).collect();
        let numbers: Vec<i32> = self
            .partitions
            .iter()
            .map(|p| i32::from(p.slot.index()))
            .collect();
        let statement = client
            .prepare_cached(&self.sql.pending)
            .await
            .map_err(|err| self.pg.error(doing, err))?;
        let rows = client
            .query(&statement, &[&queues, &numbers])
            .await
            .map_err(|err| self.pg.error(doing, err))?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let (queue, number): (&str, i32) = (row.get(0), row.get(1));
                self.partitions
                    .iter()
                    .find(|p| p.queue == queue && i32::from(p.slot.index()) == number)
            })
            .collect())
    }

    /// One round on one partition; the number of rows it sent (0 when
    /// another publisher holds the partition or nothing is pending).
    async fn dispatch(&self, partition: &OutboxPartition) -> Result<u64> {
        let doing = || {
            format!(
                "dispatching outbox rows of queue {:?} partition {}",
                partition.queue, partition.slot
            )
        };
        let mut client = self.pg.client(&doing()).await?;
        let take = client
            .prepare_cached(&self.sql.take)
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        let mark = client
            .prepare_cached(&self.sql.mark)
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        let transaction = client
            .transaction()
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        let number = i32::from(partition.slot.index());
        let rows = transaction
            .query(
                &take,
                &[
                    &partition.queue,
                    &number,
                    &partition.lock_name,
                    &(self.batch as i64),
                ],
            )
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        if rows.is_empty() {
            // Dropping the transaction rolls it back and frees the lock.
            return Ok(0);
        }
        let mut ids = Vec::with_capacity(rows.len());
        let mut pipe = redis::pipe();
        for row in &rows {
            ids.push(row.get::<_, i64>(0));
            let fields: Vec<&str> = row.get(1);
            let entry = EntryArgs::of_flat(partition.config.payload.shape, &fields);
            match partition.config.dedup.map(|dedup| dedup.window) {
                Some(window) => {
                    let job_id = fields
                        .chunks(2)
                        .find(|pair| pair[0] == crate::envelope::header_fields::JOB_ID)
                        .and_then(|pair| pair.get(1))
                        .copied()
                        .unwrap_or_default();
                    pipe.add_command(crate::transitions::publish_once_command(
                        &partition.config,
                        partition.slot,
                        job_id,
                        window,
                        &entry,
                    ));
                }
                None => {
                    pipe.cmd("XADD").arg(&partition.stream).arg("*").arg(&entry);
                }
            }
        }
        let appended: Vec<crate::transitions::Appended> = pipe
            .query_async(&mut self.redis.clone())
            .await
            .map_err(|err| {
                Error::redis(
                    format!("sending {} outbox rows to {}", rows.len(), partition.stream),
                    err,
                )
            })?;
        let stream_ids: Vec<String> = appended.into_iter().map(|sent| sent.stream_id).collect();
        failpoint("outbox_after_xadd");
        transaction
            .execute(&mark, &[&ids, &stream_ids])
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        transaction
            .commit()
            .await
            .map_err(|err| self.pg.error(doing(), err))?;
        tracing::debug!(
            queue = &*partition.queue,
            partition = partition.slot.index(),
            rows = ids.len(),
            "outbox rows dispatched"
        );
        Ok(ids.len() as u64)
    }

    /// Deletes dispatched rows older than `keep`, a bounded number at a time.
    async fn prune(&self) -> Result<u64> {
        let doing = "pruning dispatched outbox rows";
        let client = self.pg.client(doing).await?;
        client
            .execute(&self.sql.prune, &[&self.keep.as_secs_f64(), &PRUNE_BATCH])
            .await
            .map_err(|err| self.pg.error(doing, err))
    }
}
