//! What a join's handler learns of its run: every job it waited for, how each ended, and its result reference.

use redis::AsyncCommands;

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::partition::run_partition;

use super::pipeline::PipelineRuntime;

/// The jobs of a run that a join waited for (those of the stages in its
/// `join`, and the job of a join it waits for), as the join recorded them.
/// Under `on_dead_letter: continue` it names the dead-lettered ones; under
/// `fail` the join runs only when none was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Sorted by job ID.
    pub jobs: Vec<SettledJob>,
}

/// One job the join waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledJob {
    pub job_id: String,
    /// `false`: it was dead-lettered (or, for a join's job, its run failed there).
    pub done: bool,
    /// What its result is known by, when its handler named one.
    pub result_ref: Option<String>,
}

impl RunSummary {
    /// The jobs that finished, with their result references.
    pub fn finished(&self) -> impl Iterator<Item = &SettledJob> {
        self.jobs.iter().filter(|job| job.done)
    }

    /// The jobs that were dead-lettered.
    pub fn dead_lettered(&self) -> impl Iterator<Item = &SettledJob> {
        self.jobs.iter().filter(|job| !job.done)
    }

    /// Parses the join's `…:settled` hash: `done:<result_ref>`, `dead`, or
    /// `-` for a job settled there that the join does not wait for.
    pub(crate) fn from_records(records: Vec<(String, String)>) -> Self {
        let mut jobs: Vec<SettledJob> = records
            .into_iter()
            .filter_map(|(job_id, record)| {
                if record == "dead" {
                    return Some(SettledJob {
                        job_id,
                        done: false,
                        result_ref: None,
                    });
                }
                let result = record.strip_prefix("done:")?;
                Some(SettledJob {
                    job_id,
                    done: true,
                    result_ref: (!result.is_empty()).then(|| result.to_owned()),
                })
            })
            .collect();
        jobs.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        RunSummary { jobs }
    }
}

/// Reads run `run_id`'s summary at `join` (`config` is its queue).
pub(crate) async fn read(
    pipeline: &PipelineRuntime,
    config: &QueueConfig,
    run_id: &str,
) -> Result<RunSummary> {
    let partition = run_partition(config, run_id);
    let keys = config.run_keys(partition, pipeline.name(), run_id);
    let records: Vec<(String, String)> = pipeline
        .redis()
        .shared()
        .hgetall(&keys.settled)
        .await
        .map_err(|err| {
            Error::redis(
                format!(
                    "HGETALL {} (queue {}, partition {partition}, run {run_id})",
                    keys.settled, config.queue
                ),
                err,
            )
        })?;
    Ok(RunSummary::from_records(records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_as_finished_dead_or_not_waited_for() {
        let summary = RunSummary::from_records(vec![
            ("r/b".into(), "dead".into()),
            ("r/a".into(), "done:s3://a".into()),
            ("r".into(), "-".into()),
            ("r/c".into(), "done:".into()),
        ]);
        let ids: Vec<_> = summary.jobs.iter().map(|j| j.job_id.as_str()).collect();
        assert_eq!(ids, ["r/a", "r/b", "r/c"]);
        assert_eq!(summary.jobs[0].result_ref.as_deref(), Some("s3://a"));
        assert_eq!(summary.jobs[2].result_ref, None);
        assert_eq!(summary.dead_lettered().count(), 1);
        assert_eq!(summary.finished().count(), 2);
    }
}
