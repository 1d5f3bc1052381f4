//! Where every job of a scenario is: done (in the ledger), dead-lettered, scheduled for retry, pending, and which ready entries carry it.
//!
//! The delivery contract says a published job is in one of those places
//! until it is done, never in none and never in two; scenarios read the
//! places back and count what is lost or doubled.

use std::collections::BTreeMap;

use queuegen_runtime::QueueConfig;
use redis::aio::ConnectionLike;

use super::ledger::{Ledger, Tally};
use super::script::{Destination, ScriptedJob};
use crate::support::{all_pending, dead_letters, delayed_jobs, scheduled_retries, stream_entries};

/// Where each job is, by job_id.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// The ledger: done, deliveries, duplicate effects.
    pub tally: Tally,
    /// The reason of each of the job's dead letters.
    pub dead: BTreeMap<String, Vec<String>>,
    /// How many scheduled retries carry the job.
    pub scheduled: BTreeMap<String, u64>,
    /// Whether the job waits in a delayed set (1) or not (absent).
    pub delayed: BTreeMap<String, u64>,
    /// How many of the job's ready entries are pending in the group.
    pub pending: BTreeMap<String, u64>,
    /// The attempt of each ready entry carrying the job (acknowledged ones
    /// included, until they are trimmed).
    pub ready_attempts: BTreeMap<String, Vec<u32>>,
}

impl Places {
    /// Reads every place of `config`'s partitions, and the `ledger`, for `jobs`.
    pub async fn read<C: ConnectionLike + Send>(
        conn: &mut C,
        config: &QueueConfig,
        ledger: &Ledger,
        jobs: &[ScriptedJob],
    ) -> queuegen_runtime::Result<Places> {
        let tally = ledger
            .tally(jobs.iter().map(|job| job.job_id.as_str()))
            .await?;
        let mut places = Places {
            tally,
            ..Places::default()
        };
        for (_, _, fields) in dead_letters(conn, config).await {
            places
                .dead
                .entry(fields["job_id"].clone())
                .or_default()
                .push(fields["reason"].clone());
        }
        for (_, _, _, fields) in scheduled_retries(conn, config).await {
            *places
                .scheduled
                .entry(fields["job_id"].clone())
                .or_default() += 1;
        }
        for (_, job_id, _, _) in delayed_jobs(conn, config).await {
            *places.delayed.entry(job_id).or_default() += 1;
        }
        let pending: Vec<String> = all_pending(conn, config)
            .await
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        for key in config.ready_keys() {
            for (id, fields) in stream_entries(conn, &key).await {
                let Some(job_id) = fields.get("job_id") else {
                    continue;
                };
                if pending.contains(&id) {
                    *places.pending.entry(job_id.clone()).or_default() += 1;
                }
                let attempt = fields
                    .get("attempt")
                    .and_then(|attempt| attempt.parse().ok())
                    .unwrap_or(0);
                places
                    .ready_attempts
                    .entry(job_id.clone())
                    .or_default()
                    .push(attempt);
            }
        }
        Ok(places)
    }

    fn count(map: &BTreeMap<String, u64>, job_id: &str) -> u64 {
        map.get(job_id).copied().unwrap_or(0)
    }

    fn dead_count(&self, job_id: &str) -> u64 {
        self.dead
            .get(job_id)
            .map_or(0, |reasons| reasons.len() as u64)
    }

    /// How many places hold the job: done, each dead letter, each scheduled
    /// retry, the delayed set, each pending entry. One once it settled,
    /// never zero before.
    pub fn count_of(&self, job_id: &str) -> u64 {
        u64::from(self.tally.job(job_id).done)
            + self.dead_count(job_id)
            + Self::count(&self.scheduled, job_id)
            + Self::count(&self.delayed, job_id)
            + Self::count(&self.pending, job_id)
    }

    /// Jobs in no place at all: neither done, dead, scheduled nor pending.
    /// (A job whose entry is not delivered yet is in no place either: ask
    /// once the workers had their chance.)
    pub fn lost(&self, jobs: &[ScriptedJob]) -> Vec<String> {
        jobs.iter()
            .filter(|job| self.count_of(&job.job_id) == 0)
            .map(|job| job.job_id.clone())
            .collect()
    }

    /// Whether each job is where its script sends it, and nowhere else.
    pub fn settled(&self, jobs: &[ScriptedJob]) -> bool {
        jobs.iter().all(|job| self.problem(job).is_none())
    }

    /// What is wrong with the job's places once everything settled, if anything.
    pub fn problem(&self, job: &ScriptedJob) -> Option<String> {
        let id = &job.job_id;
        let arrived = match job.script().destination() {
            Destination::Done => self.tally.job(id).done,
            Destination::Dead(reason) => self
                .dead
                .get(id)
                .is_some_and(|reasons| reasons == &[reason]),
        };
        let places = self.count_of(id);
        (!arrived || places != 1).then(|| {
            format!(
                "{id}: expected {:?} only; done={} dead={:?} scheduled={} delayed={} pending={}",
                job.script().destination(),
                self.tally.job(id).done,
                self.dead.get(id).cloned().unwrap_or_default(),
                Self::count(&self.scheduled, id),
                Self::count(&self.delayed, id),
                Self::count(&self.pending, id),
            )
        })
    }

    /// The problems of every job that is not where it should be.
    pub fn problems(&self, jobs: &[ScriptedJob]) -> Vec<String> {
        jobs.iter().filter_map(|job| self.problem(job)).collect()
    }

    /// Ready entries carrying the job at `attempt`.
    pub fn entries_at_attempt(&self, job_id: &str, attempt: u32) -> usize {
        self.ready_attempts.get(job_id).map_or(0, |attempts| {
            attempts.iter().filter(|&&a| a == attempt).count()
        })
    }
}
