//! Publishing jobs: validate and encode an envelope, pick its partition, `XADD` it.

pub(crate) mod admission;

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::connect::Connection;

use self::admission::Admission;
use crate::config::QueueConfig;
use crate::connect::Redis;
use crate::envelope::{self, Envelope, Header, RunLink};
use crate::error::{Error, PublishError, Result};
use crate::field::Timestamp;
use crate::packed::EntryArgs;
use crate::partition::partition_of;
use crate::stream_slot::{Partition, StreamSlot};
use crate::transitions::{self, Appended, DelayedReply};

/// One job to publish: the header fields the application chooses, and the body.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob<E> {
    /// Stable identity of the intent; a re-publish of the same intent reuses it.
    pub job_id: String,
    pub tenant: String,
    /// Propagated trace; a random one is generated when `None`.
    pub trace_id: Option<String>,
    /// The priority lane (`lanes:`) the job goes to; `None`: the queue's
    /// default lane, or its only one.
    pub lane: Option<String>,
    /// The pipeline run it belongs to, for a job a stage hands on (the
    /// stage worker sets it); `None` otherwise.
    pub run: Option<RunLink>,
    pub body: E,
}

impl<E> NewJob<E> {
    pub fn new(job_id: impl Into<String>, tenant: impl Into<String>, body: E) -> Self {
        NewJob {
            job_id: job_id.into(),
            tenant: tenant.into(),
            trace_id: None,
            lane: None,
            run: None,
            body,
        }
    }

    /// Publishes the job to the queue's lane `lane` (one of its `lanes:`);
    /// a lane the queue does not have is refused when the job is encoded.
    pub fn in_lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = Some(lane.into());
        self
    }

    pub fn with_trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.trace_id = Some(trace_id.into());
        self
    }

    /// Marks the job as handed on in a pipeline run (written after the header).
    pub fn in_run(mut self, run: RunLink) -> Self {
        self.run = Some(run);
        self
    }
}

/// Where a published job landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The entry's stream ID (not the job's identity: that is `job_id`).
    pub stream_id: String,
    pub partition: Partition,
    /// The lane it went to; `None` for a queue without lanes.
    pub lane: Option<Cow<'static, str>>,
    /// With a [`Durability`] that asks for replicas: how many acknowledged
    /// the job within its timeout (`WAIT`'s answer, possibly fewer than
    /// asked). `None` when the publish did not wait.
    pub replicas: Option<u32>,
    /// With `dedup` on the queue: a publish of this job_id within the window
    /// came first, so nothing was written and `stream_id` is that entry's.
    pub duplicate: bool,
}

/// Where a job published with a delay waits ([`Producer::publish_at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delayed {
    pub partition: Partition,
    /// The lane it waits for; `None` for a queue without lanes.
    pub lane: Option<Cow<'static, str>>,
    /// When the scheduler appends it to the ready stream, in Unix ms.
    pub due_ms: u64,
    /// The job_id was already waiting: its first envelope and due time were
    /// kept, nothing was written, and `due_ms` is that earlier one.
    pub duplicate: bool,
    /// As [`Published::replicas`].
    pub replicas: Option<u32>,
}

/// How many replicas a publish waits for before it returns, and how long at
/// most (`WAIT replicas timeout` after the `XADD`, on the primary that took
/// it). The spec's `redis.wait_replicas` and `redis.wait_timeout` set a
/// producer's default; [`Producer::publish_with`] chooses per publish.
///
/// This narrows the window in which a failover loses an accepted job; it is
/// not consensus. A replica that acknowledged may still not be the one
/// promoted, the write is not fsynced by `WAIT`, and a job that fewer
/// replicas hold than asked is still in the stream (the count says so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    pub replicas: u32,
    pub timeout: Duration,
}

impl Durability {
    /// Return as soon as the primary has the job.
    pub const PRIMARY_ONLY: Durability = Durability {
        replicas: 0,
        timeout: Duration::ZERO,
    };

    /// The spec's choice for the queue `config` describes.
    pub fn of(config: &QueueConfig) -> Durability {
        Durability {
            replicas: config.redis.wait_replicas,
            timeout: config.redis.wait_timeout,
        }
    }

    fn waits(self) -> bool {
        self.replicas > 0
    }
}

/// Publishes envelopes of type `E` to one queue over the shared connection.
///
/// With `admission.max_oldest_ready_age` set, a publish to a partition whose
/// oldest undelivered entry (for its slowest group) is older than that is
/// refused with [`PublishError::Backpressure`]. Each partition's age is re-read at
/// most every `admission.refresh` and cached on the [`Redis`] handle, so
/// every producer of the queue made from that handle (or its clones) shares
/// one reading per partition.
pub struct Producer<E: Envelope> {
    conn: Connection,
    config: QueueConfig,
    /// The ready stream key of every stream (lane and partition), by stream
    /// number: built once, not per job.
    ready_keys: Arc<[String]>,
    /// `None` when the queue has no admission limit: publishing then takes
    /// no lock and reads no clock.
    admission: Option<Arc<Admission>>,
    /// Replicas every publish waits for, unless a publish says otherwise.
    durability: Durability,
    /// Publishes and refusals, when the app installed metrics.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::ProducerMetrics>,
    _envelope: PhantomData<fn(E)>,
}

// Manual impl: cloning a producer never needs `E: Clone`.
impl<E: Envelope> Clone for Producer<E> {
    fn clone(&self) -> Self {
        Producer {
            conn: self.conn.clone(),
            config: self.config.clone(),
            ready_keys: self.ready_keys.clone(),
            admission: self.admission.clone(),
            durability: self.durability,
            #[cfg(feature = "metrics")]
            metrics: self.metrics.clone(),
            _envelope: PhantomData,
        }
    }
}

/// A job that passed validation, ready to send.
pub(crate) struct Encoded {
    /// The stream of its lane and partition ([`QueueConfig::streams`]).
    pub(crate) stream: StreamSlot,
    pub(crate) pairs: Vec<(&'static str, String)>,
}

impl<E: Envelope> Producer<E> {
    pub fn new(redis: &Redis, config: QueueConfig) -> Self {
        let ready_keys: Arc<[String]> = config.ready_keys().into();
        // Shared through the `Redis` handle, so `ocr::producer(&redis)` per
        // request still refreshes each partition at most every `refresh`.
        let admission = config.admission.max_oldest_ready_age.map(|limit| {
            redis.shared_state(Admission::name(&config, limit), || {
                Admission::new(&config, limit, ready_keys.clone())
            })
        });
        Producer {
            conn: redis.shared(),
            ready_keys,
            admission,
            durability: Durability::of(&config),
            config,
            #[cfg(feature = "metrics")]
            metrics: None,
            _envelope: PhantomData,
        }
    }

    /// Waits for `durability` on every publish of this producer, in place of
    /// the spec's `redis.wait_replicas` / `redis.wait_timeout`.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Records jobs published and publishes refused by admission into
    /// `metrics` (register it once per registry; clones share the numbers).
    #[cfg(feature = "metrics")]
    pub fn with_metrics(mut self, metrics: crate::metrics::ProducerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Counts a refusal by admission; any other error is not the metrics' business.
    fn refused(&self, err: &Error) {
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Error::Publish(PublishError::Backpressure { partition, .. })) =
            (&self.metrics, err)
        {
            metrics.refused(&self.config.queue, *partition);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = err;
    }

    /// Counts `jobs` publishes to `partition` (all its lanes together), of
    /// which `duplicates` wrote nothing (`dedup`).
    fn appended(&self, partition: Partition, jobs: u64, duplicates: u64) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.published(&self.config.queue, partition, jobs - duplicates);
            if duplicates > 0 {
                metrics.duplicates(&self.config.queue, partition, duplicates);
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (partition, jobs, duplicates);
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Validates, encodes and appends one job to its partition's stream.
    ///
    /// Refused with [`PublishError::Backpressure`], writing nothing, while admission
    /// finds the partition's oldest undelivered entry older than
    /// `admission.max_oldest_ready_age`.
    pub async fn publish(&self, job: NewJob<E>) -> Result<Published> {
        self.publish_with(job, self.durability).await
    }

    /// As [`Producer::publish`], waiting for `durability` in place of the
    /// producer's own: `XADD` and `WAIT` go out together in one round trip,
    /// and [`Published::replicas`] says how many replicas acknowledged.
    pub async fn publish_with(&self, job: NewJob<E>, durability: Durability) -> Result<Published> {
        let job = self.encode(job, 0)?;
        self.admit(job.stream).await?;
        let append = self.append_command(&job);
        let (appended, replicas): (Appended, _) = self
            .send(append, job.stream, durability)
            .await
            .map_err(|err| self.append_error(&job, err))?;
        tracing::debug!(
            job_id = job_id_of(&job.pairs),
            queue = &*self.config.queue,
            partition = job.stream.index(),
            stream_id = %appended.stream_id,
            duplicate = appended.duplicate,
            "accepted"
        );
        self.appended(
            self.config.partition_of_stream(job.stream),
            1,
            u64::from(appended.duplicate),
        );
        Ok(Published {
            stream_id: appended.stream_id,
            partition: self.config.partition_of_stream(job.stream),
            lane: self
                .config
                .lane_of_stream(job.stream)
                .map(|lane| lane.name.clone()),
            replicas,
            duplicate: appended.duplicate,
        })
    }

    /// Validates and encodes the job now, and keeps it in its partition's
    /// delayed set until `due`, when a worker's scheduler (every
    /// `retry.promote_every`) appends it to the ready stream, in one
    /// Function call with its removal from the set. Never earlier: a job due
    /// in the past is appended at the scheduler's next tick.
    ///
    /// A job_id can wait once: publishing a job_id that is already waiting
    /// keeps the first envelope and due time and answers them with
    /// [`Delayed::duplicate`]. Admission applies as to [`Producer::publish`].
    pub async fn publish_at(&self, job: NewJob<E>, due: std::time::SystemTime) -> Result<Delayed> {
        let due_ms = due
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
        let job = self.encode(job, 0)?;
        self.admit(job.stream).await?;
        let cmd = transitions::delay_schedule_command(&self.config, job.stream, due_ms, &job.pairs);
        let (reply, replicas): (DelayedReply, _) = self
            .send(cmd, job.stream, self.durability)
            .await
            .map_err(|err| {
                transitions::publish_error(
                    &self.config,
                    crate::functions::Function::DelaySchedule,
                    self.config.delayed_key(job.stream),
                    job.stream,
                    job_id_of(&job.pairs),
                    err,
                )
            })?;
        tracing::debug!(
            job_id = job_id_of(&job.pairs),
            queue = &*self.config.queue,
            partition = job.stream.index(),
            due_ms = reply.due_ms,
            duplicate = reply.duplicate,
            "accepted, delayed"
        );
        Ok(Delayed {
            partition: self.config.partition_of_stream(job.stream),
            lane: self
                .config
                .lane_of_stream(job.stream)
                .map(|lane| lane.name.clone()),
            due_ms: reply.due_ms,
            duplicate: reply.duplicate,
            replicas,
        })
    }

    /// [`Producer::publish_at`] `delay` from now.
    pub async fn publish_after(&self, job: NewJob<E>, delay: Duration) -> Result<Delayed> {
        self.publish_at(job, std::time::SystemTime::now() + delay)
            .await
    }

    /// Refused with [`PublishError::Backpressure`] while admission finds the
    /// partition behind; nothing to do without `admission`.
    async fn admit(&self, stream: StreamSlot) -> Result<()> {
        if let Some(admission) = &self.admission {
            admission
                .admit(&self.conn, stream)
                .await
                .inspect_err(|err| self.refused(err))?;
        }
        Ok(())
    }

    /// The command that appends one encoded job: `XADD`, or with `dedup`
    /// the library's `publish_once` (marker check, `XADD` and marker in one
    /// Function call).
    fn append_command(&self, job: &Encoded) -> redis::Cmd {
        let entry = EntryArgs::of_pairs(self.config.payload.shape, &job.pairs);
        match self.config.dedup.map(|dedup| dedup.window) {
            Some(window) => transitions::publish_once_command(
                &self.config,
                job.stream,
                job_id_of(&job.pairs),
                window,
                &entry,
            ),
            None => {
                let key = &self.ready_keys[usize::from(job.stream.index())];
                // Sized up front: grown one argument at a time, the buffers
                // were reallocated several times per job.
                let mut xadd = redis::Cmd::with_capacity(
                    3 + entry.count(),
                    "XADD*".len() + key.len() + entry.bytes(),
                );
                xadd.arg("XADD").arg(key).arg("*").arg(&entry);
                xadd
            }
        }
    }

    /// The error of [`Producer::append_command`]'s reply, naming key, partition and job.
    fn append_error(&self, job: &Encoded, err: redis::RedisError) -> Error {
        let key = &self.ready_keys[usize::from(job.stream.index())];
        match self.config.dedup.map(|dedup| dedup.window) {
            Some(_) => transitions::publish_error(
                &self.config,
                crate::functions::Function::PublishOnce,
                key.clone(),
                job.stream,
                job_id_of(&job.pairs),
                err,
            ),
            None => Error::redis(format!("XADD {key}"), err),
        }
    }

    /// Sends `cmd`, followed in the same round trip by `WAIT` when
    /// `durability` asks for replicas (WAIT has no key: in one pipeline it
    /// follows the command to its node).
    async fn send<T: redis::FromRedisValue>(
        &self,
        cmd: redis::Cmd,
        stream: StreamSlot,
        durability: Durability,
    ) -> redis::RedisResult<(T, Option<u32>)> {
        if !durability.waits() {
            let reply = cmd.query_async(&mut self.conn.clone()).await?;
            return Ok((reply, None));
        }
        let mut pipe = redis::pipe();
        pipe.add_command(cmd)
            .cmd("WAIT")
            .arg(durability.replicas)
            .arg(durability.timeout.as_millis().max(1) as u64);
        let (reply, replicas): (T, u32) = pipe.query_async(&mut self.conn.clone()).await?;
        self.warn_if_short("(one job)", stream, replicas, durability);
        Ok((reply, Some(replicas)))
    }

    /// Says so when fewer replicas than asked acknowledged a publish.
    fn warn_if_short(
        &self,
        stream_id: &str,
        stream: StreamSlot,
        replicas: u32,
        durability: Durability,
    ) {
        if replicas < durability.replicas {
            tracing::warn!(
                queue = &*self.config.queue,
                partition = stream.index(),
                stream_id,
                replicas,
                wanted = durability.replicas,
                timeout = ?durability.timeout,
                "published, but fewer replicas than asked acknowledged within the timeout",
            );
        }
    }

    /// Sends the batch's pipelines (one, or one per stream, all at once)
    /// and returns what each job's command answered, in the order of
    /// `streams`, the stream of each job.
    async fn append(
        &self,
        pipes: Vec<redis::Pipeline>,
        streams: &[StreamSlot],
        per_partition: bool,
    ) -> redis::RedisResult<Vec<Appended>> {
        if !per_partition {
            return pipes[0].query_async(&mut self.conn.clone()).await;
        }
        let sends = pipes.iter().map(|pipe| {
            let mut conn = self.conn.clone();
            async move {
                if pipe.is_empty() {
                    Ok(Vec::new())
                } else {
                    pipe.query_async::<Vec<Appended>>(&mut conn).await
                }
            }
        });
        let mut answers: Vec<std::vec::IntoIter<Appended>> =
            futures_util::future::try_join_all(sends)
                .await?
                .into_iter()
                .map(Vec::into_iter)
                .collect();
        streams
            .iter()
            .map(|&stream| {
                answers[usize::from(stream.index())].next().ok_or_else(|| {
                    redis::RedisError::from((
                        redis::ErrorKind::UnexpectedReturnType,
                        "a partition's pipeline answered fewer replies than it sent commands",
                    ))
                })
            })
            .collect()
    }

    /// Validates and encodes every job first, so an invalid job (named in the
    /// error) means nothing was sent; then appends them all in one pipeline.
    ///
    /// With admission on, every partition the batch touches is checked
    /// before anything is sent (stale readings refreshed together, in one
    /// inventory round): if any one partition is refused, the whole batch is
    /// refused with [`PublishError::Backpressure`] naming the lowest refused
    /// partition, and nothing of it is written, not even the jobs bound for
    /// partitions that were fine.
    ///
    /// A Redis error part-way through the pipeline can leave some jobs
    /// appended; publishing the batch again is safe because consumers
    /// deduplicate by `job_id`.
    ///
    /// With the producer's [`Durability`] asking for replicas, one `WAIT`
    /// per partition of the batch follows the `XADD`s (on a standalone
    /// server one suffices), and each job's [`Published::replicas`] is its
    /// partition's count.
    pub async fn publish_many(
        &self,
        jobs: impl IntoIterator<Item = NewJob<E>>,
    ) -> Result<Vec<Published>> {
        // Each job is written into the pipeline as soon as it is encoded;
        // nothing is sent before the last one passed and admission, when
        // on, admitted every partition the batch touches.
        let jobs = jobs.into_iter();
        // On a Cluster, one pipeline per partition (one slot each), sent
        // together: the connection would otherwise split one pipeline per
        // slot itself, copying every command.
        let per_partition = self.conn.is_cluster();
        let mut pipes = vec![
            redis::pipe();
            if per_partition {
                usize::from(self.config.streams())
            } else {
                1
            }
        ];
        let mut streams = Vec::with_capacity(jobs.size_hint().0);
        // The job_ids for the "accepted" events, kept only when they are logged.
        let log_accepted = tracing::enabled!(tracing::Level::DEBUG);
        let mut job_ids = Vec::new();
        for (position, job) in jobs.enumerate() {
            let mut job = self.encode(job, position)?;
            let pipe = &mut pipes[if per_partition {
                usize::from(job.stream.index())
            } else {
                0
            }];
            pipe.add_command(self.append_command(&job));
            streams.push(job.stream);
            if log_accepted {
                // The pipeline holds its own copy of the bytes: move, not clone.
                job_ids.push(take_job_id(&mut job.pairs));
            }
        }
        if streams.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(admission) = &self.admission {
            let mut touched = streams.clone();
            touched.sort_unstable();
            touched.dedup();
            admission
                .admit_all(&self.conn, &touched)
                .await
                .inspect_err(|err| self.refused(err))?;
        }
        let answers = self
            .append(pipes, &streams, per_partition)
            .await
            .map_err(|err| {
                let command = match self.config.dedup.map(|dedup| dedup.window) {
                    Some(_) => "publish_once calls",
                    None => "XADDs",
                };
                Error::redis(
                    format!(
                        "pipeline of {} {command} to queue {}",
                        streams.len(),
                        self.config.queue
                    ),
                    err,
                )
            })?;
        let replicas = self.wait_after_batch(&streams).await?;
        let published: Vec<Published> = answers
            .into_iter()
            .zip(streams)
            .map(|(appended, stream)| Published {
                stream_id: appended.stream_id,
                partition: self.config.partition_of_stream(stream),
                lane: self
                    .config
                    .lane_of_stream(stream)
                    .map(|lane| lane.name.clone()),
                replicas: replicas
                    .as_ref()
                    .map(|counts| counts[usize::from(stream.index())]),
                duplicate: appended.duplicate,
            })
            .collect();
        for (published, job_id) in published.iter().zip(&job_ids) {
            tracing::debug!(
                job_id = job_id.as_str(),
                queue = &*self.config.queue,
                partition = published.partition.index(),
                stream_id = %published.stream_id,
                "accepted"
            );
        }
        #[cfg(feature = "metrics")]
        if self.metrics.is_some() {
            // Runs of one partition count once: batches are usually sorted or small.
            for run in published.chunk_by(|a, b| a.partition == b.partition) {
                let duplicates = run.iter().filter(|job| job.duplicate).count();
                self.appended(run[0].partition, run.len() as u64, duplicates as u64);
            }
        }
        Ok(published)
    }

    /// After a batch's `XADD`s, `WAIT` for the producer's durability: per
    /// partition touched on a Cluster (each on its own primary), once on a
    /// server. The count per partition, `None` when not waiting.
    async fn wait_after_batch(&self, streams: &[StreamSlot]) -> Result<Option<Vec<u32>>> {
        let durability = self.durability;
        if !durability.waits() {
            return Ok(None);
        }
        let mut touched = streams.to_vec();
        touched.sort_unstable();
        touched.dedup();
        let mut counts = vec![0; usize::from(self.config.streams())];
        let mut conn = self.conn.clone();
        let mut waits = if conn.is_cluster() {
            touched.clone()
        } else {
            touched[..1].to_vec()
        };
        let mut acknowledged = 0;
        for stream in waits.drain(..) {
            let key = &self.ready_keys[usize::from(stream.index())];
            acknowledged = conn
                .wait_for_replicas(key, durability.replicas, durability.timeout)
                .await
                .map_err(|err| Error::redis(format!("WAIT after XADDs to {key}"), err))?;
            counts[usize::from(stream.index())] = acknowledged;
            self.warn_if_short("(batch)", stream, acknowledged, durability);
        }
        if !conn.is_cluster() {
            // One server, one replication stream: its count covers every partition.
            for &stream in &touched {
                counts[usize::from(stream.index())] = acknowledged;
            }
        }
        Ok(Some(counts))
    }

    fn encode(&self, job: NewJob<E>, position: usize) -> Result<Encoded> {
        encode(&self.config, job, position)
    }
}

/// Validates and encodes one job for the queue `config` describes, and picks
/// its partition; `position` is its index in a batch, for the error.
pub(crate) fn encode<E: Envelope>(
    config: &QueueConfig,
    job: NewJob<E>,
    position: usize,
) -> Result<Encoded> {
    let queue = &config.queue;
    if job.job_id.is_empty() {
        return Err(Error::Publish(PublishError::EmptyJobId {
            queue: queue.to_string(),
            position,
        }));
    }
    let lane = match &job.lane {
        None => config.default_lane,
        Some(name) => config.lane_index(name).ok_or_else(|| {
            Error::Publish(PublishError::UnknownLane {
                queue: queue.to_string(),
                job_id: job.job_id.clone(),
                lane: name.clone(),
                known: match &*config.lanes {
                    [] => "none".to_owned(),
                    lanes => lanes
                        .iter()
                        .map(|lane| &*lane.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                },
            })
        })?,
    };
    let header = Header {
        job_id: job.job_id,
        envelope_type: E::TYPE.to_owned(),
        tenant: job.tenant,
        schema: E::SCHEMA,
        created_at: Timestamp::now(),
        trace_id: job.trace_id.unwrap_or_else(new_trace_id),
        attempt: 1,
        prev_id: None,
        reason: None,
    };
    let pairs =
        envelope::encode_in_run(&header, job.run.as_ref(), &job.body).map_err(|source| {
            Error::Publish(PublishError::InvalidJob {
                queue: queue.to_string(),
                job_id: header.job_id.clone(),
                source: Box::new(source),
            })
        })?;
    let len = encoded_len(&pairs);
    if len > config.payload.max_bytes {
        return Err(Error::Publish(PublishError::PayloadTooLarge {
            queue: queue.to_string(),
            job_id: header.job_id,
            len,
            max: config.payload.max_bytes,
        }));
    }
    let stream = config.stream(lane, partition_of(config, &pairs));
    Ok(Encoded { stream, pairs })
}

/// The size `payload.max_bytes` bounds: field names plus values, in bytes.
fn encoded_len(pairs: &[(&str, String)]) -> usize {
    pairs
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum()
}

/// The `job_id` header of encoded pairs (only read when an event is logged).
fn job_id_of<'a>(pairs: &'a [(&str, String)]) -> &'a str {
    pairs
        .iter()
        .find(|(name, _)| *name == crate::envelope::header_fields::JOB_ID)
        .map_or("", |(_, value)| value.as_str())
}

/// Moves the `job_id` header out of encoded pairs already written into a pipeline.
fn take_job_id(pairs: &mut [(&str, String)]) -> String {
    pairs
        .iter_mut()
        .find(|(name, _)| *name == crate::envelope::header_fields::JOB_ID)
        .map(|(_, value)| std::mem::take(value))
        .unwrap_or_default()
}

/// A random 128-bit trace ID in lowercase hex (the W3C trace-id format).
pub(crate) fn new_trace_id() -> String {
    lower_hex_128(rand::random::<u128>())
}

/// `format!("{id:032x}")`, by hand: the formatter measured a tenth of a
/// publish's encoding.
fn lower_hex_128(id: u128) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 32];
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = HEX[(id >> (4 * (31 - i))) as usize & 0xf];
    }
    String::from_utf8(digits.to_vec()).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_counts_names_and_values() {
        let pairs = vec![("job_id", "j-1".to_owned()), ("tenant", String::new())];
        assert_eq!(encoded_len(&pairs), 6 + 3 + 6);
    }

    #[test]
    fn trace_ids_are_32_hex_digits_and_differ() {
        let a = new_trace_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, new_trace_id());
        for id in [0, 1, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, u128::MAX] {
            assert_eq!(lower_hex_128(id), format!("{id:032x}"));
        }
    }
}
