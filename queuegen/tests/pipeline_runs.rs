//! The fan-in plan of docs/architecture.md#pipelines, simulated before it is built: random pipeline shapes (each accepted by `check`), fan-outs, dead letters, delivery orders and crashes between any two steps of a job. Every join of every run ends published once or failed, never early, and a published join's summary names exactly the jobs it waited for.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use queuegen::spec::check_str;
use queuegen::spec::model::{OnDeadLetter, Pipeline};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The run's ID: the first stage's job.
const RUN: &str = "r";

/// A random pipeline of 2 to 7 stages, `s0` first; each later stage is
/// handed jobs by an earlier one or joins earlier ones. Every queue
/// deduplicates, as stages handed jobs must.
fn random_spec(rng: &mut StdRng) -> String {
    let n = rng.random_range(2..=7);
    let mut then: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut joins: Vec<Option<(Vec<usize>, &str)>> = vec![None; n];
    for (stage, joined) in joins.iter_mut().enumerate().skip(1) {
        if stage >= 2 && rng.random_bool(0.35) {
            let mut after: Vec<usize> = (0..stage).filter(|_| rng.random_bool(0.5)).collect();
            if after.is_empty() {
                after.push(rng.random_range(0..stage));
            }
            let policy = if rng.random_bool(0.5) {
                "fail"
            } else {
                "continue"
            };
            *joined = Some((after, policy));
        } else {
            // One parent, and sometimes a second.
            for _ in 0..rng.random_range(1..=2) {
                let parent = rng.random_range(0..stage);
                if !then[parent].contains(&stage) {
                    then[parent].push(stage);
                }
            }
        }
    }
    let mut yaml = String::from(
        "version: 1\nservice: sim\nenvelopes:\n  Job:\n    schema: 1\n    fields:\n      doc_ref: { type: string, max_bytes: 64 }\nqueues:\n",
    );
    for stage in 0..n {
        yaml += &format!(
            "  s{stage}:\n    envelope: Job\n    dead_letter: {{ owner: sim-oncall }}\n    dedup: {{ window: 1d }}\n"
        );
    }
    yaml += "pipelines:\n  sim:\n    stages:\n";
    let names = |list: &[usize]| {
        list.iter()
            .map(|s| format!("s{s}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for stage in 0..n {
        let mut keys = Vec::new();
        if !then[stage].is_empty() {
            keys.push(format!("then: [{}]", names(&then[stage])));
        }
        if let Some((after, policy)) = &joins[stage] {
            keys.push(format!(
                "join: [{}], on_dead_letter: {policy}",
                names(after)
            ));
        }
        yaml += &format!("      s{stage}: {{ {} }}\n", keys.join(", "));
    }
    yaml
}

/// A number fixed by the seed and the job, so that a job delivered again
/// hands on the same children and ends the same way.
fn fixed(seed: u64, job: &str, salt: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (seed, job, salt).hash(&mut hasher);
    hasher.finish()
}

/// The job a join publishes (and that the first stage counts on, for a
/// join after a join).
fn join_job(join: &str) -> String {
    format!("{RUN}/{join}")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Status {
    Open,
    Published,
    Failed,
}

/// One join's state for the run, as `run_settle` would keep it in the
/// join's slot.
#[derive(Debug)]
struct JoinState {
    opened: bool,
    outstanding: BTreeSet<String>,
    /// Every job settled here; `Some(dead)` for one the join waits for.
    settled: BTreeMap<String, Option<bool>>,
    status: Status,
    published: u32,
}

impl JoinState {
    fn new() -> Self {
        JoinState {
            opened: false,
            outstanding: BTreeSet::new(),
            settled: BTreeMap::new(),
            status: Status::Open,
            published: 0,
        }
    }
}

/// What one settle call is told.
struct Settle<'a> {
    job: &'a str,
    first: bool,
    children: Vec<String>,
    /// The join waits for this job's stage: it goes in the summary.
    counted: bool,
    dead: bool,
    /// Dead, and the join's policy is `fail`.
    fails_run: bool,
}

/// The plan's `run_settle`, one call, atomic. Returns the state after it
/// and whether this call published the join.
fn settle(state: &mut JoinState, call: Settle<'_>) -> (Status, bool) {
    if state.status != Status::Open || state.settled.contains_key(call.job) {
        return (state.status, false);
    }
    for child in call.children {
        if !state.settled.contains_key(&child) {
            state.outstanding.insert(child);
        }
    }
    state.outstanding.remove(call.job);
    state
        .settled
        .insert(call.job.to_owned(), call.counted.then_some(call.dead));
    state.opened |= call.first;
    if call.fails_run {
        state.status = Status::Failed;
        return (state.status, false);
    }
    if state.opened && state.outstanding.is_empty() {
        state.status = Status::Published;
        state.published += 1;
        return (state.status, true);
    }
    (state.status, false)
}

/// A job of the run, as its handler would end every time it runs.
struct Job {
    stage: String,
    dead: bool,
    /// `(stage, job)`, in the order handed on.
    children: Vec<(String, String)>,
}

fn job_of(seed: u64, pipeline: &Pipeline, id: &str, stage: &str) -> Job {
    let dead = fixed(seed, id, "dead") % 6 == 0;
    let mut children = Vec::new();
    if !dead {
        for next in &pipeline.stage(stage).expect("a stage").then {
            for k in 0..fixed(seed, id, next) % 4 {
                children.push((next.clone(), format!("{id}/{next}/{k}")));
            }
        }
    }
    Job {
        stage: stage.to_owned(),
        dead,
        children,
    }
}

/// The run, as Redis would hold it: jobs published (deduplicated by ID),
/// deliveries waiting, each join's state.
struct Run<'p> {
    seed: u64,
    pipeline: &'p Pipeline,
    /// Every job ever published, by ID, with its stage.
    published: BTreeMap<String, String>,
    deliveries: Vec<String>,
    joins: BTreeMap<String, JoinState>,
}

impl<'p> Run<'p> {
    fn publish(&mut self, id: &str, stage: &str) {
        // Dedup at the destination: a repeat is absorbed.
        if self
            .published
            .insert(id.to_owned(), stage.to_owned())
            .is_none()
        {
            self.deliveries.push(id.to_owned());
        }
    }

    /// Settles `job` at `join`, then does what the answer asks: a join
    /// just published gets its job; a failed join's own job is settled,
    /// dead, wherever it was counted on.
    fn settle_at(&mut self, join: &str, call: Settle<'_>) {
        let state = self
            .joins
            .entry(join.to_owned())
            .or_insert_with(JoinState::new);
        let (status, published_now) = settle(state, call);
        if published_now {
            self.publish(&join_job(join), join);
        }
        if status == Status::Failed {
            let placeholder = join_job(join);
            for next in self.joins_after(join) {
                let call = self.call(&placeholder, join, next.as_str(), false, true, Vec::new());
                self.settle_at(&next, call);
            }
        }
    }

    fn joins_after(&self, stage: &str) -> Vec<String> {
        self.pipeline.settles_at(stage).map(str::to_owned).collect()
    }

    fn call<'a>(
        &self,
        job: &'a str,
        stage: &str,
        join: &str,
        first: bool,
        dead: bool,
        children: Vec<String>,
    ) -> Settle<'a> {
        let waits = &self.pipeline.stage(join).unwrap().join.as_ref().unwrap();
        Settle {
            job,
            first,
            children,
            counted: waits.after.iter().any(|a| a == stage),
            dead,
            fails_run: dead && waits.on_dead_letter == OnDeadLetter::Fail,
        }
    }

    /// One delivery of `id`: hand on, settle at each join, ack. `crash_after`
    /// stops it after that many steps (the delivery stays pending).
    fn deliver(&mut self, id: &str, crash_after: Option<usize>) -> bool {
        let stage = self.published[id].clone();
        let job = job_of(self.seed, self.pipeline, id, &stage);
        let mut steps = 0;
        let step = |steps: &mut usize| {
            *steps += 1;
            crash_after.is_some_and(|n| *steps > n)
        };
        if step(&mut steps) {
            return false;
        }
        for (child_stage, child) in &job.children {
            self.publish(child, child_stage);
        }
        let first = stage == self.pipeline.first;
        for join in self.joins_after(&job.stage) {
            if step(&mut steps) {
                return false;
            }
            let mut children: Vec<String> = job
                .children
                .iter()
                .filter(|(s, _)| self.pipeline.leads_to_join(s, &join))
                .map(|(_, c)| c.clone())
                .collect();
            if first {
                // A join after a join: the earlier join's job is counted on
                // from the start, its ID derived from the run.
                children.extend(
                    self.pipeline
                        .joins()
                        .map(|(s, _)| s.queue.as_str())
                        .filter(|other| self.pipeline.leads_to_join(other, &join))
                        .map(join_job),
                );
            }
            let call = self.call(id, &job.stage, &join, first, job.dead, children);
            self.settle_at(&join, call);
        }
        if step(&mut steps) {
            return false;
        }
        true
    }
}

fn simulate(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let source = random_spec(&mut rng);
    let checked = check_str(&source, "sim.yaml");
    let errors: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    assert!(errors.is_empty(), "seed {seed}: {errors:#?}\n{source}");
    let spec = checked.spec.expect("valid");
    let pipeline = &spec.pipelines[0];
    let mut run = Run {
        seed,
        pipeline,
        published: BTreeMap::new(),
        deliveries: Vec::new(),
        joins: BTreeMap::new(),
    };
    run.publish(RUN, &pipeline.first);
    let mut rounds = 0;
    while !run.deliveries.is_empty() {
        rounds += 1;
        assert!(
            rounds < 100_000,
            "seed {seed}: the run does not end\n{source}"
        );
        let i = rng.random_range(0..run.deliveries.len());
        let id = run.deliveries[i].clone();
        let crash = rng.random_bool(0.25).then(|| rng.random_range(0..4));
        if run.deliver(&id, crash) {
            run.deliveries.swap_remove(i);
        }
    }
    for (join, waits) in pipeline.joins() {
        let join = join.queue.as_str();
        let state = &run.joins[join];
        let context = format!("seed {seed}, join {join}: {state:#?}\n{source}");
        // A join can fail before the first stage opens the run there (a
        // join it waits for failed first); it publishes only once opened.
        assert!(state.opened || state.status == Status::Failed, "{context}");
        // Which jobs the join waits for, as they really ended; a failed
        // join's job never ran and counts as dead.
        let ended = |id: &str, stage: &str| -> bool {
            if pipeline.stage(stage).is_some_and(|s| s.join.is_some())
                && run.joins.get(stage).map(|s| s.status) == Some(Status::Failed)
            {
                return true;
            }
            job_of(seed, pipeline, id, stage).dead
        };
        let mut expected: BTreeMap<String, Option<bool>> = BTreeMap::new();
        for (id, stage) in &run.published {
            if waits.after.contains(stage) {
                expected.insert(id.clone(), Some(ended(id, stage)));
            }
        }
        for failed in waits
            .after
            .iter()
            .filter(|a| run.joins.get(a.as_str()).map(|s| s.status) == Some(Status::Failed))
        {
            expected.insert(join_job(failed), Some(true));
        }
        // Under `fail`, the run fails when a job that leads to the join
        // died (the first stage's included), or a join it waits for failed.
        let leads_here =
            |stage: &str| stage == pipeline.first || pipeline.leads_to_join(stage, join);
        let a_job_died = run
            .published
            .iter()
            .any(|(id, stage)| leads_here(stage) && ended(id, stage));
        let a_join_failed = waits
            .after
            .iter()
            .any(|a| run.joins.get(a.as_str()).map(|s| s.status) == Some(Status::Failed));
        let any_dead_that_fails = a_job_died || a_join_failed;
        match state.status {
            Status::Published => {
                assert_eq!(state.published, 1, "{context}");
                let summary: BTreeMap<String, Option<bool>> = state
                    .settled
                    .iter()
                    .filter(|(_, counted)| counted.is_some())
                    .map(|(id, counted)| (id.clone(), *counted))
                    .collect();
                assert_eq!(summary, expected, "{context}");
                assert!(
                    waits.on_dead_letter == OnDeadLetter::Continue || !any_dead_that_fails,
                    "published though a job it counts on died under `fail`: {context}"
                );
            }
            Status::Failed => {
                assert_eq!(state.published, 0, "{context}");
                assert_eq!(waits.on_dead_letter, OnDeadLetter::Fail, "{context}");
                assert!(any_dead_that_fails, "failed with nothing dead: {context}");
            }
            Status::Open => panic!("the run ended with the join still open: {context}"),
        }
    }
}

#[test]
fn every_join_of_every_run_ends_once_with_the_right_summary() {
    for seed in 0..2_000 {
        simulate(seed);
    }
}
