//! A pipeline's runs as an operator sees them: per join, the runs in flight
//! (oldest first, each with how many jobs it still waits for), and one run's
//! state at every join. What `queuegen runs` prints.
//!
//! Where it reads (the library's `run_settle`, docs/functions.md#run_settle):
//! each join keeps a run's state in the partition of its queue that the run
//! ID picks ([`run_partition`]), under [`QueueConfig::run_keys`]: the run's
//! hash (`opened`, `started`, `status`, `ended`, `join_id`), its `out` set
//! (jobs still outstanding there) and its `settled` hash (job ID →
//! `done:<result_ref>`, `dead`, or `-` for a job the join does not wait
//! for); and each partition's zset `runs:<pipeline>` of the runs open there,
//! by start time. A run that ends (published or failed) leaves the zset, and
//! its three keys expire `keep` later.
//!
//! **Failed runs are not listed.** The library keeps no index of ended
//! runs: `run_settle` removes an ended run from `runs:<pipeline>`, and only
//! the run's own keys remember it until `keep`. Finding them without an
//! index would mean `SCAN` over the keyspace, which a production server
//! must not pay for. A run is looked up by its ID instead ([`run`]), which
//! shows `failed` (or `published`) while its keys are kept.
//!
//! Read-only and bounded by `limit`:
//! - [`runs`]: two round trips. `TIME`, then per partition of each join
//!   `ZCARD` and `ZRANGE runs:<pipeline> 0 limit-1 WITHSCORES` (the oldest
//!   `limit` by start time); then `SCARD` of the `out` set of the oldest
//!   `limit` runs of each join.
//! - [`run`]: one round trip. `TIME`, then per join, in the run's partition:
//!   `HMGET` and `PTTL` of the run's hash, `SCARD` and `SRANDMEMBER out
//!   limit`, `HLEN` and `HRANDFIELD settled limit WITHVALUES` (every job when
//!   there are at most `limit`, else `limit` of them).
//!
//! A least-privilege monitor user needs `+time +zcard +zrange +scard +hmget
//! +pttl +srandmember +hlen +hrandfield` on the service's keys.
//!
//! On a Cluster the partitions of a join are in different slots: pass
//! [`Redis::shared`](crate::Redis::shared)'s connection, which sends each
//! slot's part of a pipeline to its node, concurrently.

use queuegen_core::pipeline::{Join, Pipeline, Stage};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;

use super::status::server_time;
use crate::config::QueueConfig;
use crate::error::{Error, OperationError, PipelineError, Result};
use crate::inventory::{self, integer, text};
use crate::partition::run_partition;
use crate::stream_slot::Partition;

/// Every join of a pipeline, with its runs in flight, read at one moment of
/// the server's clock.
#[derive(Debug, Clone, Serialize)]
pub struct RunsReport {
    pub pipeline: String,
    /// The stage whose jobs start runs.
    pub first: String,
    /// The server's `TIME` in Unix ms; every age is measured against it.
    pub server_time_ms: u64,
    /// How long an ended run's state is kept (`keep`), in ms.
    pub keep_ms: u64,
    /// The pipeline's joins, in the spec's order (none: its runs keep no
    /// state, so there is nothing to show).
    pub joins: Vec<JoinRuns>,
}

/// The runs open at one join.
#[derive(Debug, Clone, Serialize)]
pub struct JoinRuns {
    /// The join stage (its queue).
    pub join: String,
    /// The stages it waits for.
    pub after: Vec<String>,
    /// `fail` or `continue`.
    pub on_dead_letter: &'static str,
    /// Runs open here, over every partition (`ZCARD`).
    pub in_flight: u64,
    /// The run open longest: the join's oldest wait.
    pub oldest: Option<RunInFlight>,
    /// Oldest first, at most `limit`.
    pub runs: Vec<RunInFlight>,
    /// More runs are open than `runs` shows.
    pub truncated: bool,
    /// Each partition of the join's queue, with the runs open there.
    pub partitions: Vec<PartitionRuns>,
}

/// One partition's index of open runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRuns {
    pub partition: Partition,
    /// `{prefix}:{queue-NN}:runs:<pipeline>`.
    pub key: String,
    pub in_flight: u64,
}

/// A run open at a join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunInFlight {
    pub run_id: String,
    /// The join queue's partition that keeps the run.
    pub partition: Partition,
    /// When the first stage's job opened it here, Unix ms (server clock).
    pub started_ms: u64,
    /// Since it started.
    pub age_ms: u64,
    /// Jobs still outstanding here (`SCARD` of its `out` set): jobs the
    /// join waits for, or that can still lead to one.
    pub waiting: u64,
}

/// One run at every join of its pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub pipeline: String,
    pub run_id: String,
    /// The server's `TIME` in Unix ms.
    pub server_time_ms: u64,
    /// How long an ended run's state is kept (`keep`), in ms.
    pub keep_ms: u64,
    /// In the spec's order.
    pub joins: Vec<JoinRun>,
}

/// Where a run is at one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Nothing of the run is kept here: its first job has not settled yet
    /// (a run reaches every join when its first stage's handler has
    /// handed on), or it ended more than `keep` ago.
    Absent,
    /// Jobs of the run settled here before the first stage's job opened
    /// it (a child can settle before its parent does).
    NotOpened,
    /// Open: waiting for its outstanding jobs.
    Open,
    /// Ended: the join's job was appended to the join's stream.
    Published,
    /// Ended: a job it waited for was dead-lettered under
    /// `on_dead_letter: fail` (or the first stage's job was); the join
    /// never runs.
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Absent => "absent",
            RunState::NotOpened => "not opened",
            RunState::Open => "open",
            RunState::Published => "published",
            RunState::Failed => "failed",
        }
    }
}

/// A run's state at one join.
#[derive(Debug, Clone, Serialize)]
pub struct JoinRun {
    pub join: String,
    /// The join queue's partition that keeps the run.
    pub partition: Partition,
    /// The run's hash there, `{prefix}:{queue-NN}:run:<pipeline>:<run_id>`.
    pub key: String,
    pub state: RunState,
    /// The first stage's job settled here (it stored the join's envelope).
    pub opened: bool,
    /// When it opened here, Unix ms.
    pub started_ms: Option<u64>,
    /// When it was published or failed here, Unix ms.
    pub ended_ms: Option<u64>,
    /// How long it has waited here: until now while open, until it ended
    /// once ended.
    pub waited_ms: Option<u64>,
    /// The join's job in the join's ready stream, once published.
    pub join_entry: Option<String>,
    /// When an ended run's keys expire here, Unix ms (server time plus the
    /// run hash's `PTTL`: `run_settle` expires them `keep` after the end).
    pub expires_ms: Option<u64>,
    /// Jobs outstanding here (`SCARD`).
    pub outstanding: u64,
    /// Of them, at most `limit`, by job ID (all of them when there are no
    /// more than `limit`; otherwise a sample).
    pub outstanding_jobs: Vec<RunJob>,
    /// Jobs settled here (`HLEN`).
    pub settled: u64,
    /// Of them, at most `limit`, by job ID, with their records.
    pub settled_jobs: Vec<SettledRecord>,
}

/// A job of a run named by its ID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunJob {
    pub job_id: String,
    /// Its stage, read from the derived ID (`<run>/<stage>/<hash>`, or
    /// `<run>/<join>` for a join's job; the run ID itself for the first
    /// stage's); `None` when the ID does not say.
    pub stage: Option<String>,
}

/// A job settled at a join, as the join recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettledRecord {
    pub job_id: String,
    pub stage: Option<String>,
    pub outcome: SettledOutcome,
    /// What its result is known by, when its handler named one.
    pub result_ref: Option<String>,
}

/// How a settled job ended, for the join's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledOutcome {
    /// It finished (`done:<result_ref>`).
    Done,
    /// It was dead-lettered (or, for a join's job, its run failed there).
    Dead,
    /// It ended, and the join does not wait for its stage (`-`): the first
    /// stage's job, or a job on the way to one the join waits for.
    NotWaitedFor,
}

impl SettledOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SettledOutcome::Done => "done",
            SettledOutcome::Dead => "dead",
            SettledOutcome::NotWaitedFor => "not waited for",
        }
    }
}

/// A join of the pipeline with its queue's configuration.
struct JoinQueue<'a> {
    stage: &'a Stage,
    rule: &'a Join,
    config: &'a QueueConfig,
}

/// The joins of `pipeline`, in the spec's order, each with its queue's
/// configuration among `configs` (others are ignored); a join without one
/// is [`PipelineError::NoSuchStage`].
fn join_queues<'a>(
    pipeline: &'a Pipeline,
    configs: &'a [QueueConfig],
) -> Result<Vec<JoinQueue<'a>>> {
    pipeline
        .joins()
        .map(|(stage, rule)| {
            let config = configs
                .iter()
                .find(|config| *config.queue == *stage.queue)
                .ok_or_else(|| PipelineError::NoSuchStage {
                    pipeline: pipeline.name.clone(),
                    stage: stage.queue.clone(),
                    known: configs
                        .iter()
                        .map(|c| &*c.queue)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            Ok(JoinQueue {
                stage,
                rule,
                config,
            })
        })
        .collect()
}

fn keep_ms(pipeline: &Pipeline) -> u64 {
    u64::try_from(pipeline.keep.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The runs open at each join of `pipeline`: per join, how many, the
/// oldest, and the oldest `limit` with what each still waits for.
/// `configs` holds (at least) the join queues' configurations.
///
/// Errors name the key, join and partition: a key of the wrong type
/// (`WRONGTYPE`), a join without a configuration
/// ([`PipelineError::NoSuchStage`]).
pub async fn runs<C: ConnectionLike>(
    conn: &mut C,
    pipeline: &Pipeline,
    configs: &[QueueConfig],
    limit: usize,
) -> Result<RunsReport> {
    let joins = join_queues(pipeline, configs)?;
    // At least the oldest run of each join is read, for its oldest wait.
    let read = limit.max(1);

    let mut first = redis::pipe();
    first.cmd("TIME");
    for join in &joins {
        for partition in Partition::all(join.config.partitions) {
            let key = runs_key(join.config, partition, &pipeline.name);
            first.cmd("ZCARD").arg(&key);
            first
                .cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(read - 1)
                .arg("WITHSCORES");
        }
    }
    let answers: Vec<RedisResult<Value>> =
        first
            .ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!("reading the runs in flight of pipeline {}", pipeline.name),
                    err,
                )
            })?;
    let mut answers = answers.into_iter();
    let server_time_ms = server_time(answers.next())?;

    let mut report = RunsReport {
        pipeline: pipeline.name.clone(),
        first: pipeline.first.clone(),
        server_time_ms,
        keep_ms: keep_ms(pipeline),
        joins: Vec::with_capacity(joins.len()),
    };
    for join in &joins {
        let mut partitions = Vec::new();
        let mut oldest: Vec<RunInFlight> = Vec::new();
        for partition in Partition::all(join.config.partitions) {
            let key = runs_key(join.config, partition, &pipeline.name);
            let at = || format!("{key} (join {}, partition {partition})", join.stage.queue);
            let (Some(count), Some(members)) = (answers.next(), answers.next()) else {
                return Err(inventory::short_reply(&key));
            };
            let in_flight = count
                .map_err(|err| Error::redis(format!("ZCARD {}", at()), err))
                .and_then(|value| {
                    integer(value).ok_or_else(|| inventory::malformed(&key, "ZCARD"))
                })?;
            let members = members
                .map_err(|err| Error::redis(format!("ZRANGE {} WITHSCORES", at()), err))
                .and_then(|value| scored_members(&key, value))?;
            oldest.extend(members.into_iter().map(|(run_id, started_ms)| RunInFlight {
                run_id,
                partition,
                started_ms,
                age_ms: server_time_ms.saturating_sub(started_ms),
                waiting: 0,
            }));
            partitions.push(PartitionRuns {
                partition,
                key,
                in_flight,
            });
        }
        oldest.sort_by(|a, b| {
            (a.started_ms, &a.run_id, a.partition).cmp(&(b.started_ms, &b.run_id, b.partition))
        });
        oldest.truncate(read);
        let in_flight = partitions.iter().map(|p| p.in_flight).sum();
        report.joins.push(JoinRuns {
            join: join.stage.queue.clone(),
            after: join.rule.after.clone(),
            on_dead_letter: join.rule.on_dead_letter.as_str(),
            in_flight,
            oldest: None,
            runs: oldest,
            truncated: false,
            partitions,
        });
    }

    // What each run shown still waits for.
    let shown: Vec<(usize, usize)> = report
        .joins
        .iter()
        .enumerate()
        .flat_map(|(j, join)| (0..join.runs.len()).map(move |r| (j, r)))
        .collect();
    if !shown.is_empty() {
        let mut second = redis::pipe();
        for &(j, r) in &shown {
            let run = &report.joins[j].runs[r];
            let keys = joins[j]
                .config
                .run_keys(run.partition, &pipeline.name, &run.run_id);
            second.cmd("SCARD").arg(keys.out);
        }
        let answers: Vec<RedisResult<Value>> = second
            .ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!(
                        "reading what the runs of pipeline {} wait for",
                        pipeline.name
                    ),
                    err,
                )
            })?;
        let mut answers = answers.into_iter();
        for &(j, r) in &shown {
            let join = &joins[j];
            let run = &mut report.joins[j].runs[r];
            let key = join
                .config
                .run_keys(run.partition, &pipeline.name, &run.run_id)
                .out;
            let answer = answers.next().ok_or_else(|| inventory::short_reply(&key))?;
            run.waiting = answer
                .map_err(|err| {
                    Error::redis(
                        format!(
                            "SCARD {key} (join {}, partition {}, run {})",
                            join.stage.queue, run.partition, run.run_id
                        ),
                        err,
                    )
                })
                .and_then(|value| {
                    integer(value).ok_or_else(|| inventory::malformed(&key, "SCARD"))
                })?;
        }
    }
    for join in &mut report.joins {
        join.oldest = join.runs.first().cloned();
        join.runs.truncate(limit);
        join.truncated = join.in_flight > join.runs.len() as u64;
    }
    Ok(report)
}

/// Run `run_id` of `pipeline` at every join: its state, outstanding jobs
/// and settled jobs (at most `limit` of each per join). `configs` holds (at
/// least) the join queues' configurations.
///
/// A run kept at no join is [`OperationError::NoSuchRun`] (a pipeline
/// without joins keeps no run state: its report lists no join). Errors
/// name the key, join and partition.
pub async fn run<C: ConnectionLike>(
    conn: &mut C,
    pipeline: &Pipeline,
    configs: &[QueueConfig],
    run_id: &str,
    limit: usize,
) -> Result<RunReport> {
    let joins = join_queues(pipeline, configs)?;
    let mut pipe = redis::pipe();
    pipe.cmd("TIME");
    for join in &joins {
        let partition = run_partition(join.config, run_id);
        let keys = join.config.run_keys(partition, &pipeline.name, run_id);
        pipe.cmd("HMGET")
            .arg(&keys.run)
            .arg("opened")
            .arg("started")
            .arg("status")
            .arg("ended")
            .arg("join_id");
        pipe.cmd("PTTL").arg(&keys.run);
        pipe.cmd("SCARD").arg(&keys.out);
        pipe.cmd("SRANDMEMBER").arg(&keys.out).arg(limit);
        pipe.cmd("HLEN").arg(&keys.settled);
        pipe.cmd("HRANDFIELD")
            .arg(&keys.settled)
            .arg(limit)
            .arg("WITHVALUES");
    }
    let answers: Vec<RedisResult<Value>> =
        pipe.ignore_errors()
            .query_async(conn)
            .await
            .map_err(|err| {
                Error::redis(
                    format!("reading run {run_id:?} of pipeline {}", pipeline.name),
                    err,
                )
            })?;
    let mut answers = answers.into_iter();
    let server_time_ms = server_time(answers.next())?;
    let keep_ms = keep_ms(pipeline);

    let mut report = RunReport {
        pipeline: pipeline.name.clone(),
        run_id: run_id.to_owned(),
        server_time_ms,
        keep_ms,
        joins: Vec::with_capacity(joins.len()),
    };
    for join in &joins {
        let partition = run_partition(join.config, run_id);
        let keys = join.config.run_keys(partition, &pipeline.name, run_id);
        let at = |key: &str| {
            format!(
                "{key} (join {}, partition {partition}, run {run_id})",
                join.stage.queue
            )
        };
        let mut next = |key: &str, command: &str| -> Result<Value> {
            answers
                .next()
                .ok_or_else(|| inventory::short_reply(key))?
                .map_err(|err| Error::redis(format!("{command} {}", at(key)), err))
        };
        let fields = next(&keys.run, "HMGET")?;
        let ttl = next(&keys.run, "PTTL")?;
        let outstanding = next(&keys.out, "SCARD")?;
        let out_members = next(&keys.out, "SRANDMEMBER")?;
        let settled = next(&keys.settled, "HLEN")?;
        let records = next(&keys.settled, "HRANDFIELD")?;

        let Value::Array(fields) = fields else {
            return Err(inventory::unexpected(&keys.run, "HMGET", &fields));
        };
        let mut fields = fields.into_iter().map(text);
        let mut field = || fields.next().flatten();
        let (opened, started, status, ended, join_id) =
            (field(), field(), field(), field(), field());
        let number = |value: Option<String>| value.and_then(|v| v.parse::<u64>().ok());
        let opened = opened.as_deref() == Some("1");
        let started_ms = number(started);
        let ended_ms = number(ended);
        let outstanding =
            integer(outstanding).ok_or_else(|| inventory::malformed(&keys.out, "SCARD"))?;
        let settled =
            integer(settled).ok_or_else(|| inventory::malformed(&keys.settled, "HLEN"))?;

        let state = match status.as_deref() {
            Some("published") => RunState::Published,
            Some("failed") => RunState::Failed,
            _ if opened => RunState::Open,
            _ if outstanding > 0 || settled > 0 => RunState::NotOpened,
            _ => RunState::Absent,
        };
        let ended = matches!(state, RunState::Published | RunState::Failed);
        let waited_ms = started_ms.map(|start| {
            let until = if ended {
                ended_ms.unwrap_or(server_time_ms)
            } else {
                server_time_ms
            };
            until.saturating_sub(start)
        });

        let mut outstanding_jobs: Vec<RunJob> = members(&keys.out, out_members)?
            .into_iter()
            .map(|job_id| RunJob {
                stage: stage_of(pipeline, run_id, &job_id),
                job_id,
            })
            .collect();
        outstanding_jobs.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        let mut settled_jobs: Vec<SettledRecord> = field_values(&keys.settled, records)?
            .into_iter()
            .map(|(job_id, record)| {
                let (outcome, result_ref) = parse_record(&record);
                SettledRecord {
                    stage: stage_of(pipeline, run_id, &job_id),
                    job_id,
                    outcome,
                    result_ref,
                }
            })
            .collect();
        settled_jobs.sort_by(|a, b| a.job_id.cmp(&b.job_id));

        report.joins.push(JoinRun {
            join: join.stage.queue.clone(),
            partition,
            key: keys.run,
            state,
            opened,
            started_ms,
            ended_ms,
            waited_ms,
            join_entry: join_id.filter(|id| !id.is_empty()),
            // -1: no expiry (an open run), -2: no key.
            expires_ms: match ttl {
                Value::Int(ttl) if ttl >= 0 => Some(server_time_ms.saturating_add(ttl as u64)),
                _ => None,
            },
            outstanding,
            outstanding_jobs,
            settled,
            settled_jobs,
        });
    }
    if !report.joins.is_empty()
        && report
            .joins
            .iter()
            .all(|join| join.state == RunState::Absent)
    {
        return Err(OperationError::NoSuchRun {
            pipeline: pipeline.name.clone(),
            run_id: run_id.to_owned(),
            places: report
                .joins
                .iter()
                .map(|join| format!("{} partition {}", join.join, join.partition))
                .collect::<Vec<_>>()
                .join(", "),
            keep: humantime::format_duration(pipeline.keep).to_string(),
        }
        .into());
    }
    Ok(report)
}

/// `{prefix}:{queue-NN}:runs:<pipeline>` of `partition`.
fn runs_key(config: &QueueConfig, partition: Partition, pipeline: &str) -> String {
    // The zset's key does not depend on the run.
    config.run_keys(partition, pipeline, "-").runs
}

/// A settled record: `done:<result_ref>`, `dead`, or `-` (anything else
/// reads as not waited for).
fn parse_record(record: &str) -> (SettledOutcome, Option<String>) {
    if record == "dead" {
        return (SettledOutcome::Dead, None);
    }
    match record.strip_prefix("done:") {
        Some(result) => (
            SettledOutcome::Done,
            (!result.is_empty()).then(|| result.to_owned()),
        ),
        None => (SettledOutcome::NotWaitedFor, None),
    }
}

/// The stage of job `job_id` of run `run_id`, from how its ID was derived
/// (`runs::child_job_id`, `runs::join_job_id`): the run ID itself is the
/// first stage's job; `…/<stage>/<32 hex digits>` a job handed to `stage`;
/// `…/<join>` a join's job.
fn stage_of(pipeline: &Pipeline, run_id: &str, job_id: &str) -> Option<String> {
    if job_id == run_id {
        return Some(pipeline.first.clone());
    }
    let mut parts = job_id.rsplitn(3, '/');
    let last = parts.next()?;
    let before = parts.next();
    let is_digest = last.len() == 32 && last.bytes().all(|b| b.is_ascii_hexdigit());
    if let (true, Some(stage)) = (is_digest, before) {
        if pipeline.stage(stage).is_some() {
            return Some(stage.to_owned());
        }
    }
    pipeline
        .stage(last)
        .filter(|stage| stage.join.is_some() && before.is_some())
        .map(|stage| stage.queue.clone())
}

/// `ZRANGE … WITHSCORES`: `[member, score, …]` (RESP2) or
/// `[[member, score], …]` (RESP3); scores are start times in Unix ms.
fn scored_members(key: &str, value: Value) -> Result<Vec<(String, u64)>> {
    pairs(key, "ZRANGE", value)?
        .into_iter()
        .map(|(member, score)| {
            let member = text(member).ok_or_else(|| inventory::malformed(key, "ZRANGE"))?;
            let score = match score {
                Value::Double(score) => Some(score),
                other => text(other).and_then(|t| t.parse::<f64>().ok()),
            }
            .filter(|score| score.is_finite() && *score >= 0.0)
            .ok_or_else(|| inventory::malformed(key, "ZRANGE"))?;
            Ok((member, score as u64))
        })
        .collect()
}

/// `HRANDFIELD … WITHVALUES`: `[field, value, …]` (RESP2) or
/// `[[field, value], …]` (RESP3).
fn field_values(key: &str, value: Value) -> Result<Vec<(String, String)>> {
    pairs(key, "HRANDFIELD", value)?
        .into_iter()
        .map(|(field, value)| {
            let field = text(field).ok_or_else(|| inventory::malformed(key, "HRANDFIELD"))?;
            let value = text(value).ok_or_else(|| inventory::malformed(key, "HRANDFIELD"))?;
            Ok((field, value))
        })
        .collect()
}

/// A reply of pairs, flat or nested.
fn pairs(key: &str, command: &str, value: Value) -> Result<Vec<(Value, Value)>> {
    let items = match value {
        Value::Array(items) => items,
        Value::Map(pairs) => return Ok(pairs),
        Value::Nil => return Ok(Vec::new()),
        other => return Err(inventory::unexpected(key, command, &other)),
    };
    if items.iter().all(|item| matches!(item, Value::Array(_))) {
        items
            .into_iter()
            .map(|item| match item {
                Value::Array(pair) if pair.len() == 2 => {
                    let mut pair = pair.into_iter();
                    Ok((
                        pair.next().unwrap_or(Value::Nil),
                        pair.next().unwrap_or(Value::Nil),
                    ))
                }
                _ => Err(inventory::malformed(key, command)),
            })
            .collect()
    } else if items.len() % 2 == 0 {
        let mut items = items.into_iter();
        Ok(std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect())
    } else {
        Err(inventory::malformed(key, command))
    }
}

/// `SRANDMEMBER key count`: the members, as text.
fn members(key: &str, value: Value) -> Result<Vec<String>> {
    match value {
        Value::Array(items) | Value::Set(items) => items
            .into_iter()
            .map(|item| text(item).ok_or_else(|| inventory::malformed(key, "SRANDMEMBER")))
            .collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(inventory::unexpected(key, "SRANDMEMBER", &other)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use queuegen_core::pipeline::OnDeadLetter;

    use super::*;

    fn pipeline() -> Pipeline {
        let stage = |queue: &str, then: &[&str], join: Option<&[&str]>| Stage {
            queue: queue.to_owned(),
            then: then.iter().map(|s| s.to_string()).collect(),
            max_children: 100,
            join: join.map(|after| Join {
                after: after.iter().map(|s| s.to_string()).collect(),
                on_dead_letter: OnDeadLetter::Fail,
            }),
        };
        Pipeline {
            name: "documents".into(),
            stages: vec![
                stage("ocr", &["index"], None),
                stage("index", &[], None),
                stage("notify", &[], Some(&["index"])),
            ],
            first: "ocr".into(),
            keep: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_job_s_stage_is_read_from_its_derived_id() {
        let graph = pipeline();
        let child = crate::runs::child_job_id("doc/1", "doc/1", "index", 0);
        assert_eq!(stage_of(&graph, "doc/1", &child).as_deref(), Some("index"));
        assert_eq!(stage_of(&graph, "doc/1", "doc/1").as_deref(), Some("ocr"));
        let join = crate::runs::join_job_id("doc/1", "notify");
        assert_eq!(stage_of(&graph, "doc/1", &join).as_deref(), Some("notify"));
        assert_eq!(stage_of(&graph, "doc/1", "doc/1/index"), None);
        assert_eq!(stage_of(&graph, "doc/1", "elsewhere"), None);
    }

    #[test]
    fn records_read_as_done_dead_or_not_waited_for() {
        assert_eq!(
            parse_record("done:s3://a"),
            (SettledOutcome::Done, Some("s3://a".into()))
        );
        assert_eq!(parse_record("done:"), (SettledOutcome::Done, None));
        assert_eq!(parse_record("dead"), (SettledOutcome::Dead, None));
        assert_eq!(parse_record("-"), (SettledOutcome::NotWaitedFor, None));
    }

    #[test]
    fn pairs_read_flat_and_nested() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let flat = Value::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")]);
        let nested = Value::Array(vec![
            Value::Array(vec![bulk("a"), Value::Double(1.0)]),
            Value::Array(vec![bulk("b"), Value::Double(2.0)]),
        ]);
        let expected = vec![("a".to_owned(), 1), ("b".to_owned(), 2)];
        assert_eq!(scored_members("k", flat).unwrap(), expected);
        assert_eq!(scored_members("k", nested).unwrap(), expected);
        assert!(scored_members("k", Value::Array(vec![]))
            .unwrap()
            .is_empty());
        assert!(scored_members("k", Value::Array(vec![bulk("a")])).is_err());
    }
}
