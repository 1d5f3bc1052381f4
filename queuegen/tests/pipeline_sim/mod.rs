//! A pipeline run simulated over random shapes (each accepted by `check`), fan-outs, dead letters, delivery orders and crashes between any two steps of a job, against any keeper of the joins' state: the plan's model ([`Model`], `queuegen/tests/pipeline_runs.rs`) or the library's `run_settle` on a real server (`tests/tests/run_settle.rs`, which includes this file). After the run every join must have ended published once or failed, never early, and a published join's summary must name exactly the jobs it waited for.

#![allow(dead_code)] // Each including test uses its part.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use queuegen::spec::check_str;
use queuegen::spec::model::{OnDeadLetter, Pipeline, Spec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The run's ID: the first stage's job.
pub const RUN: &str = "r";

/// A random pipeline `sim` of 2 to 7 stages, `s0` first; each later stage
/// is handed jobs by an earlier one or joins earlier ones. Every queue
/// deduplicates, as stages handed jobs must.
pub fn random_spec(rng: &mut StdRng) -> String {
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
            "  s{stage}:\n    envelope: Job\n    partitions: 2\n    dead_letter: {{ owner: sim-oncall }}\n    dedup: {{ window: 1d }}\n"
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
pub fn join_job(join: &str) -> String {
    format!("{RUN}/{join}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Open,
    Published,
    Failed,
}

/// What one settle call is told.
#[derive(Debug)]
pub struct Settle<'a> {
    pub job: &'a str,
    pub first: bool,
    pub children: Vec<String>,
    /// The join waits for this job's stage: it goes in the summary.
    pub counted: bool,
    pub dead: bool,
    /// Dead, and the join's policy is `fail`.
    pub fails_run: bool,
}

/// A join's state at the end, as the keeper shows it.
#[derive(Debug, PartialEq)]
pub struct JoinView {
    pub opened: bool,
    pub status: Status,
    /// How many times its job was published.
    pub published: u32,
    /// The jobs it waited for that settled: `true` for dead.
    pub summary: BTreeMap<String, bool>,
}

/// Who keeps the joins' state: one `settle` call is atomic.
pub trait Joins {
    /// Settles at `join`; the status after it, and whether this call
    /// published the join's job.
    fn settle(&mut self, join: &str, call: Settle<'_>) -> (Status, bool);
    fn view(&mut self, join: &str) -> JoinView;
}

/// The plan's `run_settle`, in memory.
#[derive(Debug, Default)]
pub struct Model {
    joins: BTreeMap<String, ModelJoin>,
}

#[derive(Debug)]
struct ModelJoin {
    opened: bool,
    outstanding: BTreeSet<String>,
    /// Every job settled here; `Some(dead)` for one the join waits for.
    settled: BTreeMap<String, Option<bool>>,
    status: Status,
    published: u32,
}

impl Joins for Model {
    fn settle(&mut self, join: &str, call: Settle<'_>) -> (Status, bool) {
        let state = self.joins.entry(join.to_owned()).or_insert(ModelJoin {
            opened: false,
            outstanding: BTreeSet::new(),
            settled: BTreeMap::new(),
            status: Status::Open,
            published: 0,
        });
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

    fn view(&mut self, join: &str) -> JoinView {
        let state = &self.joins[join];
        JoinView {
            opened: state.opened,
            status: state.status,
            published: state.published,
            summary: state
                .settled
                .iter()
                .filter_map(|(id, dead)| dead.map(|dead| (id.clone(), dead)))
                .collect(),
        }
    }
}

/// A job of the run, as its handler would end every time it runs.
struct Job {
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
    Job { dead, children }
}

/// The run: jobs published (deduplicated by ID, as the stages' `dedup`
/// does), deliveries waiting, and the keeper of the joins' state.
struct Run<'p, J> {
    seed: u64,
    pipeline: &'p Pipeline,
    /// Every job ever published, by ID, with its stage.
    published: BTreeMap<String, String>,
    deliveries: Vec<String>,
    joins: J,
    /// Joins seen failed, so that their job counts as dead where awaited.
    failed: BTreeSet<String>,
}

impl<J: Joins> Run<'_, J> {
    fn publish(&mut self, id: &str, stage: &str) {
        if self
            .published
            .insert(id.to_owned(), stage.to_owned())
            .is_none()
        {
            self.deliveries.push(id.to_owned());
        }
    }

    /// Settles at `join`, then does what the answer asks: a join just
    /// published gets its job delivered; a failed join's own job is
    /// settled, dead, wherever it is counted on (again on every answer
    /// that says failed, as a redelivered job would).
    fn settle_at(&mut self, join: &str, call: Settle<'_>) {
        let (status, published_now) = self.joins.settle(join, call);
        if published_now {
            self.publish(&join_job(join), join);
        }
        if status == Status::Failed {
            self.failed.insert(join.to_owned());
            let placeholder = join_job(join);
            for next in self.joins_after(join) {
                let call = self.call(&placeholder, join, &next, false, true, Vec::new());
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
        let waits = self.pipeline.stage(join).unwrap().join.as_ref().unwrap();
        Settle {
            job,
            first,
            children,
            counted: waits.after.iter().any(|a| a == stage),
            dead,
            fails_run: dead && waits.on_dead_letter == OnDeadLetter::Fail,
        }
    }

    /// One delivery of `id`: hand on, settle at each join, ack.
    /// `crash_after` stops it after that many steps (the delivery stays
    /// pending); whether it was acknowledged.
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
        for join in self.joins_after(&stage) {
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
            let call = self.call(id, &stage, &join, first, job.dead, children);
            self.settle_at(&join, call);
        }
        !step(&mut steps)
    }
}

/// The spec of `seed`'s pipeline.
pub fn spec_of(seed: u64) -> (Spec, String) {
    let mut rng = StdRng::seed_from_u64(seed);
    let source = random_spec(&mut rng);
    let checked = check_str(&source, "sim.yaml");
    let errors: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    assert!(errors.is_empty(), "seed {seed}: {errors:#?}\n{source}");
    (checked.spec.expect("valid"), source)
}

/// Runs `seed`'s run to its end against `joins`, then checks every join.
pub fn simulate<J: Joins>(seed: u64, joins: J) {
    let (spec, source) = spec_of(seed);
    let pipeline = &spec.pipelines[0];
    // Its own stream of choices, apart from the shape's.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut run = Run {
        seed,
        pipeline,
        published: BTreeMap::new(),
        deliveries: Vec::new(),
        joins,
        failed: BTreeSet::new(),
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
        let view = run.joins.view(join);
        let context = format!("seed {seed}, join {join}: {view:#?}\n{source}");
        // A join can fail before the first stage opens the run there (a
        // join it waits for failed first); it publishes only once opened.
        assert!(view.opened || view.status == Status::Failed, "{context}");
        // How each job really ended; a failed join's job never ran and
        // counts as dead.
        let dead = |id: &str, stage: &str| -> bool {
            if run.failed.contains(stage) && id == join_job(stage) {
                return true;
            }
            job_of(seed, pipeline, id, stage).dead
        };
        let mut expected: BTreeMap<String, bool> = BTreeMap::new();
        for (id, stage) in &run.published {
            if waits.after.contains(stage) {
                expected.insert(id.clone(), dead(id, stage));
            }
        }
        for failed in waits.after.iter().filter(|a| run.failed.contains(*a)) {
            expected.insert(join_job(failed), true);
        }
        // Under `fail`, the run fails when a job that leads to the join
        // died (the first stage's included), or a join it waits for failed.
        let leads_here =
            |stage: &str| stage == pipeline.first || pipeline.leads_to_join(stage, join);
        let a_job_died = run
            .published
            .iter()
            .any(|(id, stage)| leads_here(stage) && dead(id, stage));
        let a_join_failed = waits.after.iter().any(|a| run.failed.contains(a));
        let any_dead_that_fails = a_job_died || a_join_failed;
        match view.status {
            Status::Published => {
                assert_eq!(view.published, 1, "{context}");
                assert_eq!(view.summary, expected, "{context}");
                assert!(
                    waits.on_dead_letter == OnDeadLetter::Continue || !any_dead_that_fails,
                    "published though a job it counts on died under `fail`: {context}"
                );
            }
            Status::Failed => {
                assert_eq!(view.published, 0, "{context}");
                assert_eq!(waits.on_dead_letter, OnDeadLetter::Fail, "{context}");
                assert!(any_dead_that_fails, "failed with nothing dead: {context}");
            }
            Status::Open => panic!("the run ended with the join still open: {context}"),
        }
    }
}
