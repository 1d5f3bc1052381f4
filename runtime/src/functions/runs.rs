//! The call that keeps a pipeline run's fan-in at one join: `run_settle`, for one job or several.

use redis::{Cmd, FromRedisValue, ParsingError, ToRedisArgs, Value};

use super::{fcall, Function, FunctionCall};

/// How a job of a run ended, as a join records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Done,
    /// Dead-lettered (or, for a join's job, never published: its run failed there).
    Dead,
}

impl RunOutcome {
    fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Done => "done",
            RunOutcome::Dead => "dead",
        }
    }
}

/// One job for `run_settle`: record at one join that `job_id` of run
/// `run_id` has ended, count its `children` that lead to the join as
/// outstanding, and publish the join's job (once) when the run is open
/// here and nothing is outstanding. Sent alone it is a call of one job;
/// [`RunSettleBatch`] sends several. Answers one [`RunSettled`] per job
/// (`Vec<RunSettled>`).
///
/// Every key is in the run's partition of the join's queue
/// (`QueueConfig::run_keys`).
#[derive(Debug, Clone, Copy)]
pub struct RunSettle<'a, E> {
    pub run_key: &'a str,
    pub out_key: &'a str,
    pub settled_key: &'a str,
    pub ready_key: &'a str,
    pub runs_key: &'a str,
    pub pipeline: &'a str,
    pub run_id: &'a str,
    pub job_id: &'a str,
    pub outcome: RunOutcome,
    /// The join waits for this job's stage: its summary records the job.
    pub counted: bool,
    /// Dead under `on_dead_letter: fail`: the run fails here.
    pub fails_run: bool,
    /// What the job's result is known by (empty: none); in the summary.
    pub result_ref: &'a str,
    /// How long the run's keys are kept once it has ended (at least 1).
    pub keep_ms: u64,
    /// The jobs it handed on that lead to the join (at most
    /// `library::MAX_CHILDREN`).
    pub children: &'a [&'a str],
    /// Only for the first stage's job, which opens the run here: the join's
    /// envelope, as field/value pairs or one packed pair.
    pub join_envelope: Option<&'a E>,
}

impl<E: ToRedisArgs> RunSettle<'_, E> {
    /// How many ARGV items [`RunSettle::push_job`] appends after the count.
    fn item_count(&self) -> usize {
        8 + self.children.len()
            + self
                .join_envelope
                .map_or(0, |envelope| envelope.num_of_args())
    }

    /// Appends the job's item count and items, as docs/functions.md gives them.
    fn push_job(&self, cmd: &mut Cmd) {
        let flag = |on: bool| if on { "1" } else { "0" };
        cmd.arg(self.item_count())
            .arg(self.run_id)
            .arg(self.job_id)
            .arg(self.outcome.as_str())
            .arg(flag(self.counted))
            .arg(flag(self.fails_run))
            .arg(self.result_ref)
            .arg(flag(self.join_envelope.is_some()))
            .arg(self.children.len())
            .arg(self.children);
        if let Some(envelope) = self.join_envelope {
            cmd.arg(envelope);
        }
    }
}

impl<E: ToRedisArgs> FunctionCall for RunSettle<'_, E> {
    fn command(&self, name: &str) -> Cmd {
        RunSettleBatch {
            jobs: std::slice::from_ref(self),
        }
        .command(name)
    }
}

/// `run_settle` for several jobs at one partition of one join, settled in
/// order as if one after the other (at most `library::MAX_SETTLE_BATCH`,
/// their children together at most `library::MAX_CHILDREN`): the `ready`
/// and `runs` keys, pipeline and `keep_ms` are the first job's, which every
/// job shares. Every job is checked before the first write; answers one
/// [`RunSettled`] per job (`Vec<RunSettled>`).
#[derive(Debug, Clone, Copy)]
pub struct RunSettleBatch<'a, E> {
    pub jobs: &'a [RunSettle<'a, E>],
}

impl<E: ToRedisArgs> FunctionCall for RunSettleBatch<'_, E> {
    fn command(&self, name: &str) -> Cmd {
        let Some(first) = self.jobs.first() else {
            // No job: the library refuses `job_count` 0, naming it.
            let mut cmd = fcall(name, Function::RunSettle, &[]);
            cmd.arg("").arg(0).arg(0);
            return cmd;
        };
        let mut keys = Vec::with_capacity(2 + 3 * self.jobs.len());
        keys.extend([first.ready_key, first.runs_key]);
        for job in self.jobs {
            keys.extend([job.run_key, job.out_key, job.settled_key]);
        }
        let mut cmd = fcall(name, Function::RunSettle, &keys);
        cmd.arg(first.pipeline)
            .arg(first.keep_ms)
            .arg(self.jobs.len());
        for job in self.jobs {
            job.push_job(&mut cmd);
        }
        cmd
    }
}

/// Where a run stands at one join, as `run_settle` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunSettled {
    /// Recorded; this many jobs are still outstanding here.
    Settled { outstanding: u64 },
    /// Recorded, and this call published the join's job as `ready_id`.
    Published { ready_id: String },
    /// Recorded, and this call failed the run here.
    Failed,
    /// This job was settled here before: nothing changed.
    Already,
    /// The run had ended here before (`published` or `failed`): nothing changed.
    Ended { failed: bool },
}

impl RunSettled {
    /// Whether the run has failed at this join (now or before).
    pub fn failed(&self) -> bool {
        matches!(
            self,
            RunSettled::Failed | RunSettled::Ended { failed: true }
        )
    }
}

impl FromRedisValue for RunSettled {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let parts = Vec::<Value>::from_redis_value(value)?;
        let mut parts = parts.into_iter();
        let kind = String::from_redis_value(parts.next().ok_or("an empty reply")?)?;
        let mut detail = || {
            parts
                .next()
                .ok_or(ParsingError::from("a reply without its detail"))
        };
        Ok(match kind.as_str() {
            "settled" => RunSettled::Settled {
                outstanding: u64::from_redis_value(detail()?)?,
            },
            "published" => RunSettled::Published {
                ready_id: String::from_redis_value(detail()?)?,
            },
            "failed" => RunSettled::Failed,
            "already" => RunSettled::Already,
            "ended" => RunSettled::Ended {
                failed: String::from_redis_value(detail()?)? == "failed",
            },
            other => {
                return Err(ParsingError::from(format!(
                    "unknown run_settle reply `{other}`"
                )))
            }
        })
    }
}
