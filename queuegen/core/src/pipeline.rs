//! A pipeline's graph: its stages, what each hands on, what each join waits
//! for, and which jobs settle at which join. The spec check builds it, the
//! generator writes it into the generated code, and the runtime's stage
//! workers walk it, so all three agree on where a job settles.

use std::time::Duration;

/// A pipeline: queues of the spec as stages, connected by hand-offs
/// (`then`) and joins. Each job the first stage receives starts a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Lowercase name; part of the keys of its runs.
    pub name: String,
    /// Stages in file order; the queues they name exist, and each belongs to
    /// this pipeline alone.
    pub stages: Vec<Stage>,
    /// The stage no other stage leads to: each of its jobs starts a run.
    pub first: String,
    /// How long a run's record (its joins' state and summaries) is kept
    /// after the run ends. Default 7 days.
    pub keep: Duration,
}

impl Pipeline {
    pub fn stage(&self, queue: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.queue == queue)
    }

    /// The join stages, in file order.
    pub fn joins(&self) -> impl Iterator<Item = (&Stage, &Join)> {
        self.stages
            .iter()
            .filter_map(|s| s.join.as_ref().map(|join| (s, join)))
    }

    /// The stages a job of `stage` leads to directly: its `then`, and each
    /// join that waits for it.
    pub fn next_of<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let then = self.stage(stage).into_iter().flat_map(|s| &s.then);
        let joins = self
            .joins()
            .filter(move |(_, join)| join.after.iter().any(|a| a == stage))
            .map(|(s, _)| &s.queue);
        then.chain(joins).map(String::as_str)
    }

    /// Whether jobs of `stage` matter to `join`: the join waits for them,
    /// or they can lead (through `then` or other joins) to a stage it
    /// waits for. Such jobs settle at the join, and so do the first
    /// stage's, which open the run there.
    pub fn leads_to_join(&self, stage: &str, join: &str) -> bool {
        let Some(after) = self.stage(join).and_then(|j| j.join.as_ref()) else {
            return false;
        };
        // The graph is acyclic (checked), so a walk ends.
        let mut todo = vec![stage];
        let mut seen: Vec<&str> = Vec::new();
        while let Some(at) = todo.pop() {
            if after.after.iter().any(|a| a == at) {
                return true;
            }
            if !seen.contains(&at) {
                seen.push(at);
                todo.extend(self.next_of(at));
            }
        }
        false
    }

    /// The joins where a job of `stage` settles: every join for the first
    /// stage, otherwise those it leads to.
    pub fn settles_at<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let first = stage == self.first;
        self.joins()
            .map(|(s, _)| s.queue.as_str())
            .filter(move |join| first || self.leads_to_join(stage, join))
    }
}

/// One stage of a pipeline: a queue, and what its jobs hand on.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The queue (also the stage's name).
    pub queue: String,
    /// The stages a job of this one hands jobs to (its handler returns their
    /// envelopes), in the order written. Empty: the run ends here.
    pub then: Vec<String>,
    /// Most jobs one job of this stage may hand on, over all of `then`.
    /// Default 100.
    pub max_children: u32,
    /// Set on a join stage: it runs once per run, after the jobs of the
    /// stages it waits for.
    pub join: Option<Join>,
}

/// What a join stage waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    /// The stages whose jobs (every one of the run) must have ended.
    pub after: Vec<String>,
    /// What a dead-lettered job of those stages does to the run. Default fail.
    pub on_dead_letter: OnDeadLetter,
}

/// `on_dead_letter:` of a join stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDeadLetter {
    /// The run fails; the join does not run.
    Fail,
    /// The join runs once the rest have ended; its summary names the
    /// dead-lettered jobs.
    Continue,
}

impl OnDeadLetter {
    pub fn as_str(self) -> &'static str {
        match self {
            OnDeadLetter::Fail => "fail",
            OnDeadLetter::Continue => "continue",
        }
    }
}
