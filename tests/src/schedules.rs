//! A test schedule on the `jobs` queue under a key prefix of the test's own, for the schedule tests and their `schedule-worker` processes.

use std::collections::BTreeMap;
use std::time::Duration;

use queuegen_runtime::{Cadence, Missed, Partition, QueueConfig, Schedule};

use crate::queues::jobs;

/// The variable a `schedule-worker` process reads its schedule from:
/// `url|prefix|name|every_ms|grace_ms|skip-or-run_once`.
pub const SCHEDULE_ENV: &str = "QG_SCHEDULE";

/// What a test schedule is made of.
#[derive(Debug, Clone)]
pub struct TestSchedule {
    pub url: String,
    pub prefix: String,
    pub name: String,
    pub every: Duration,
    pub grace: Duration,
    pub missed: Missed,
}

impl TestSchedule {
    pub fn to_env(&self) -> String {
        let missed = match self.missed {
            Missed::Skip => "skip",
            Missed::RunOnce => "run_once",
        };
        format!(
            "{}|{}|{}|{}|{}|{missed}",
            self.url,
            self.prefix,
            self.name,
            self.every.as_millis(),
            self.grace.as_millis()
        )
    }

    pub fn from_env() -> Result<TestSchedule, String> {
        let text = std::env::var(SCHEDULE_ENV).map_err(|_| format!("{SCHEDULE_ENV} is not set"))?;
        let parts: Vec<&str> = text.split('|').collect();
        let [url, prefix, name, every, grace, missed] = parts[..] else {
            return Err(format!(
                "{SCHEDULE_ENV}: expected 6 |-separated parts, got {text:?}"
            ));
        };
        let ms = |text: &str| {
            text.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|e| e.to_string())
        };
        Ok(TestSchedule {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            name: name.to_owned(),
            every: ms(every)?,
            grace: ms(grace)?,
            missed: if missed == "run_once" {
                Missed::RunOnce
            } else {
                Missed::Skip
            },
        })
    }

    /// The `jobs` queue under this prefix, partitioned by `job_id` (no
    /// `partition_by`), so that ticks spread over its 4 partitions.
    pub fn queue(&self) -> QueueConfig {
        QueueConfig {
            key_prefix: crate::fixtures::owned(&self.prefix),
            partition_by: std::borrow::Cow::Borrowed(&[]),
            ..jobs::CONFIG
        }
    }

    /// The generated `jobs::TICK` under this test's name, prefix, period,
    /// grace and missed policy.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            name: leak(&self.name),
            queue: self.queue(),
            cadence: Cadence::Every(self.every),
            missed: self.missed,
            grace: self.grace,
            ..jobs::TICK
        }
    }
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// One published job: its stream ID's time (ms) and partition.
#[derive(Debug, Clone)]
pub struct TickJob {
    pub partition: Partition,
    pub stream_ms: u64,
}

/// Every job in the queue's ready streams, by job_id (a job_id published
/// twice has two entries).
pub async fn jobs_by_id(
    conn: &mut impl redis::aio::ConnectionLike,
    config: &QueueConfig,
) -> BTreeMap<String, Vec<TickJob>> {
    let mut out: BTreeMap<String, Vec<TickJob>> = BTreeMap::new();
    for partition in Partition::all(config.partitions) {
        let key = config.ready_key(partition.default_stream());
        for (id, fields) in crate::support::stream_entries(conn, &key).await {
            let stream_ms = id.split('-').next().unwrap().parse().unwrap();
            out.entry(fields["job_id"].clone())
                .or_default()
                .push(TickJob {
                    partition,
                    stream_ms,
                });
        }
    }
    out
}
