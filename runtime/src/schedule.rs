//! Periodic jobs: the schedule loop any number of worker processes run; each tick is published once, by the library's `schedule_tick`.
//!
//! Every process computes the same ticks (`queuegen_core::cadence`, shared
//! with `queuegen check` and `queuegen schedules`) and tries to publish each
//! one when it comes. A tick's job has the deterministic `job_id`
//! `<schedule>@<tick in RFC 3339 UTC>` and lands in the partition
//! `partition_of` its fields give; `schedule_tick` appends it and sets the
//! tick's marker (`{prefix}:{queue-NN}:marker:tick:<schedule>:<tick_ms>`,
//! kept for `retention.min_age`) in one call, and answers `already` when the
//! marker exists. So a tick is published once however many processes run
//! the loop, and as long as one of them runs, none is lost: a process killed
//! before its call leaves the tick to the others, one killed after it left
//! the marker behind.
//!
//! **Missed ticks.** A tick is *on time* while it is at most `grace` old;
//! every process publishes on-time ticks. A tick no process got to within
//! its grace (every process was down, or could not reach Redis) is
//! *missed*: with `missed: skip` it is never published; with `run_once`
//! the most recent missed tick is published (once, by its marker), the
//! older ones are not. To know where it left off, the loop reads a hint
//! at start, `{prefix}:schedule:<name>:last` (the latest tick published,
//! set with plain `SET` after each publish, expiring with the markers):
//! ticks between the hint and the grace window are the missed ones. With no
//! hint (a new schedule), nothing counts as missed. The hint only decides
//! what to do about missed ticks; exactly-once comes from the markers.
//!
//! Ticks are instants of the processes' clocks: skew between hosts moves
//! when a tick is published (by the fastest clock), never how often.

use std::future::Future;
use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::config::QueueConfig;
use crate::connect::Redis;
use crate::envelope::header_fields;
use crate::error::{Error, Result, SetupError};
use crate::failpoint::failpoint;
use crate::host::now_ms;
use crate::partition::partition_of;
use crate::stream_slot::Partition;
use crate::transitions;

pub use queuegen_core::cadence::{format_tick, job_id, Cadence, CadenceError, Ticks};

/// What to do about ticks nobody published within their grace (`missed:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Publish none of them.
    Skip,
    /// Publish the most recent of them, once.
    RunOnce,
}

/// One schedule as reviewed in the spec; generated code bakes each as a `const`.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The schedule's name: part of its jobs' `job_id` and markers.
    pub name: &'static str,
    /// The queue its jobs go to.
    pub queue: QueueConfig,
    /// The queue's envelope type name (the `type` header).
    pub envelope_type: &'static str,
    /// The envelope's schema version (the `schema` header).
    pub schema: u32,
    pub cadence: Cadence,
    /// The `tenant` header of the jobs.
    pub tenant: &'static str,
    /// Body fields as their encoded text, in the envelope's order.
    pub body: &'static [(&'static str, &'static str)],
    pub missed: Missed,
    /// How late a tick may be published as on time.
    pub grace: Duration,
}

impl Schedule {
    /// The job of one tick: header fields (`created_at` is the tick time,
    /// `trace_id` a fresh one) and the body constants.
    pub fn fields(&self, tick_ms: u64) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            (header_fields::JOB_ID, job_id(self.name, tick_ms)),
            (header_fields::TYPE, self.envelope_type.to_owned()),
            (header_fields::TENANT, self.tenant.to_owned()),
            (header_fields::SCHEMA, self.schema.to_string()),
            (header_fields::CREATED_AT, format_tick(tick_ms)),
            (header_fields::TRACE_ID, crate::producer::new_trace_id()),
            (header_fields::ATTEMPT, "1".to_owned()),
        ];
        fields.extend(
            self.body
                .iter()
                .map(|(name, value)| (*name, (*value).to_owned())),
        );
        fields
    }

    /// The partition the job of `tick_ms` goes to.
    pub fn partition(&self, tick_ms: u64) -> Partition {
        partition_of(&self.queue, &self.fields(tick_ms))
    }

    /// The hint of the latest tick published: `{prefix}:schedule:<name>:last`.
    pub fn hint_key(&self) -> String {
        self.queue.schedule_hint_key(self.name)
    }

    /// Publishes the job of one tick (or finds it published): `schedule_tick`.
    pub async fn publish<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        tick_ms: u64,
    ) -> Result<crate::transitions::Moved> {
        let fields = self.fields(tick_ms);
        // A schedule's jobs go to the default lane.
        let stream = partition_of(&self.queue, &fields).default_stream();
        transitions::schedule_tick(conn, &self.queue, stream, self.name, tick_ms, &fields).await
    }
}

/// What the schedule loops of one process did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerReport {
    /// Ticks this process published.
    pub published: u64,
    /// Ticks it found published by another process (their marker).
    pub already: u64,
    /// Missed ticks published once under `missed: run_once` (counted in `published` too if this process published it).
    pub caught_up: u64,
    /// Times it found missed ticks and, under `missed: skip`, left them.
    pub skipped: u64,
}

/// Runs the schedule loops of some schedules in this process.
pub struct Scheduler {
    redis: Redis,
    schedules: Vec<Schedule>,
    poll: Option<Duration>,
}

/// Most ticks one round publishes (a tiny period with a long grace).
const MAX_TICKS_PER_ROUND: usize = 1000;
/// The longest wait between two looks at the clock.
const MAX_POLL: Duration = Duration::from_secs(1);

impl Scheduler {
    pub fn new(redis: &Redis, schedules: impl IntoIterator<Item = Schedule>) -> Self {
        Scheduler {
            redis: redis.clone(),
            schedules: schedules.into_iter().collect(),
            poll: None,
        }
    }

    /// How often each loop looks at the clock (default: a quarter of the
    /// grace, at most 1 s).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = Some(poll);
        self
    }

    /// Runs every schedule until `stop` completes. Fails at start, naming
    /// the schedule, when a cadence does not parse.
    pub async fn run_until(self, stop: impl Future<Output = ()> + Send) -> Result<SchedulerReport> {
        let mut parsed = Vec::new();
        for schedule in self.schedules {
            let ticks = schedule.cadence.ticks().map_err(|err| {
                Error::Setup(SetupError::InvalidWorker {
                    queue: schedule.queue.queue.to_string(),
                    problem: format!("schedule `{}`: {err}", schedule.name),
                })
            })?;
            parsed.push((schedule, ticks));
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut loops = tokio::task::JoinSet::new();
        for (schedule, ticks) in parsed {
            let poll = self
                .poll
                .unwrap_or_else(|| (schedule.grace / 4).clamp(Duration::from_millis(10), MAX_POLL));
            let conn = self.redis.shared();
            let stop = stop_rx.clone();
            loops.spawn(run_one(conn, schedule, ticks, poll, stop));
        }
        stop.await;
        let _ = stop_tx.send(true);
        let mut report = SchedulerReport::default();
        while let Some(done) = loops.join_next().await {
            let Ok(one) = done else {
                tracing::error!("a schedule loop panicked");
                continue;
            };
            report.published += one.published;
            report.already += one.already;
            report.caught_up += one.caught_up;
            report.skipped += one.skipped;
        }
        Ok(report)
    }
}

async fn run_one(
    mut conn: crate::connect::Connection,
    schedule: Schedule,
    ticks: Ticks,
    poll: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> SchedulerReport {
    let mut report = SchedulerReport::default();
    let grace_ms = u64::try_from(schedule.grace.as_millis()).unwrap_or(u64::MAX);
    let hint_key = schedule.hint_key();
    let marker_ttl = u64::try_from(schedule.queue.retention.marker_ttl.as_millis())
        .unwrap_or(u64::MAX)
        .max(1000);
    // Where this process left off: the latest tick handled (published,
    // found published, or left as missed).
    let mut cursor: Option<u64> = None;
    loop {
        if *stop.borrow() {
            return report;
        }
        if cursor.is_none() {
            let hint: redis::RedisResult<Option<u64>> = redis::cmd("GET")
                .arg(&hint_key)
                .query_async(&mut conn)
                .await;
            match hint {
                // A new schedule: nothing before the grace window counts as missed.
                Ok(hint) => {
                    cursor = Some(hint.unwrap_or_else(|| now_ms().saturating_sub(grace_ms + 1)))
                }
                Err(err) => {
                    tracing::warn!(schedule = schedule.name, error = %err, "reading the schedule's hint failed; retrying");
                }
            }
        }
        if let Some(from) = cursor {
            cursor = Some(
                round(
                    &mut conn,
                    &schedule,
                    &ticks,
                    from,
                    grace_ms,
                    &hint_key,
                    marker_ttl,
                    &mut report,
                )
                .await,
            );
        }
        // Sleep until the next tick or the next poll, whichever is first.
        let now = now_ms();
        let next = ticks
            .next_after(now)
            .map_or(poll, |t| Duration::from_millis(t - now));
        let wait = next.min(poll);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
    }
}

/// One look at the clock: publishes what is due after `cursor`; returns the new cursor.
#[allow(clippy::too_many_arguments)]
async fn round(
    conn: &mut crate::connect::Connection,
    schedule: &Schedule,
    ticks: &Ticks,
    cursor: u64,
    grace_ms: u64,
    hint_key: &str,
    marker_ttl: u64,
    report: &mut SchedulerReport,
) -> u64 {
    let now = now_ms();
    match ticks.last_at_or_before(now) {
        Some(last) if last > cursor => {}
        _ => return cursor,
    }
    // Ticks at or before `late` are more than `grace` old: missed.
    let late = now.saturating_sub(grace_ms + 1);
    let mut handled = cursor;
    if let Some(missed) = ticks.last_at_or_before(late).filter(|m| *m > cursor) {
        match schedule.missed {
            Missed::Skip => {
                report.skipped += 1;
                tracing::warn!(
                    schedule = schedule.name,
                    after = %format_tick(cursor),
                    until = %format_tick(missed),
                    "ticks were missed (this worker did not get to them within the grace, and no other may have); skipping them (missed: skip)"
                );
            }
            Missed::RunOnce => match publish_tick(conn, schedule, missed).await {
                Ok(moved) => {
                    report.caught_up += 1;
                    count(report, schedule, missed, &moved);
                    tracing::info!(schedule = schedule.name, tick = %format_tick(missed), "published the most recent missed tick once (missed: run_once)");
                }
                Err(err) => {
                    tracing::warn!(schedule = schedule.name, tick = %format_tick(missed), error = %err, "publishing a missed tick failed; retrying");
                    return cursor;
                }
            },
        }
        handled = missed;
    }
    for tick in ticks.between(handled.max(late), now, MAX_TICKS_PER_ROUND) {
        match publish_tick(conn, schedule, tick).await {
            Ok(moved) => {
                count(report, schedule, tick, &moved);
                handled = tick;
            }
            Err(err) => {
                tracing::warn!(schedule = schedule.name, tick = %format_tick(tick), error = %err, "publishing a tick failed; retrying");
                break;
            }
        }
    }
    if handled > cursor {
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(hint_key)
            .arg(handled)
            .arg("PX")
            .arg(marker_ttl)
            .query_async(conn)
            .await;
        if let Err(err) = set {
            tracing::warn!(schedule = schedule.name, error = %err, "updating the schedule's hint failed");
        }
    }
    handled
}

/// One `schedule_tick` call, between the failure tests' crash points.
async fn publish_tick(
    conn: &mut crate::connect::Connection,
    schedule: &Schedule,
    tick: u64,
) -> Result<transitions::Moved> {
    failpoint("before_schedule_tick");
    let moved = schedule.publish(conn, tick).await?;
    if !moved.already {
        failpoint("after_schedule_tick");
    }
    Ok(moved)
}

fn count(report: &mut SchedulerReport, schedule: &Schedule, tick: u64, moved: &transitions::Moved) {
    if moved.already {
        report.already += 1;
    } else {
        report.published += 1;
        tracing::debug!(schedule = schedule.name, tick = %format_tick(tick), stream_id = %moved.id, "published a tick");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NIGHTLY: Schedule = Schedule {
        name: "nightly",
        queue: crate::config::tests::OCR,
        envelope_type: "OcrRequested",
        schema: 2,
        cadence: Cadence::Every(Duration::from_secs(3600)),
        tenant: "ops",
        body: &[("subject_ref", "nightly")],
        missed: Missed::Skip,
        grace: Duration::from_secs(60),
    };

    #[test]
    fn a_ticks_job_has_the_deterministic_header_and_the_body() {
        let tick = 1_796_457_600_000; // 2026-12-05T08:00:00Z
        let fields = NIGHTLY.fields(tick);
        let names: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "job_id",
                "type",
                "tenant",
                "schema",
                "created_at",
                "trace_id",
                "attempt",
                "subject_ref"
            ]
        );
        let value = |name: &str| fields.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        assert_eq!(value("job_id"), "nightly@2026-12-05T08:00:00.000Z");
        assert_eq!(value("created_at"), "2026-12-05T08:00:00.000Z");
        assert_eq!(
            (value("tenant"), value("schema"), value("attempt")),
            ("ops".into(), "2".into(), "1".into())
        );
        // The trace differs per try; the partition does not.
        assert_ne!(
            value("trace_id"),
            NIGHTLY
                .fields(tick)
                .iter()
                .find(|(n, _)| *n == "trace_id")
                .unwrap()
                .1
        );
        assert_eq!(NIGHTLY.partition(tick), NIGHTLY.partition(tick));
        assert_eq!(
            NIGHTLY.hint_key(),
            format!("{}:schedule:nightly:last", NIGHTLY.queue.key_prefix)
        );
    }
}
