//! The runtime's stage workers over random pipeline shapes, on a real server: every join ends published once, with exactly the jobs it waited for, or failed under `fail`.
//!
//! The shapes are `queuegen/tests/pipeline_sim`'s (each accepted by
//! `check`: chains, fan-outs, joins over several stages, joins after joins,
//! both policies). Where the simulation drives `run_settle` by its own
//! account of the hand-off, this test runs the real thing: one
//! `StageWorker` per stage, handlers that hand on 0 to 3 jobs to each stage
//! of their `then` (the first stage also every join's envelope), and
//! dead-letter one job in six by its ID (any stage but the first, whose
//! dead letter fails the run under either policy: `pipelines.rs` shows
//! that). The expectations are the simulation's, read off what the
//! handlers saw.

#[path = "../../queuegen/tests/pipeline_sim/mod.rs"]
mod pipeline_sim;

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pipeline_sim::spec_of;
use queuegen::gen::functions::{render_library, LIBRARY_VERSION};
use queuegen::gen::runtime_config::queue_config;
use queuegen::spec::model::{OnDeadLetter, Pipeline, Spec};
use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::runs::{
    join_job_id, HandOn, Handoff, PipelineRuntime, RunSummary, StageHandler, StageWorker, Step,
};
use queuegen_runtime::{
    Envelope, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_tests::support::{eventually, spawn_worker, unique_prefix};
use queuegen_tests::RedisServer;

/// Shapes run per `cargo test` (each a pipeline of 2 to 6 stages on a
/// fresh key prefix); `QUEUEGEN_PIPELINE_SHAPES=N` runs more.
const SHAPES: u64 = 100;
const RUN: &str = "run-1";

/// Every random spec's envelope (`Job`), whatever the stage.
#[derive(Debug, Clone, PartialEq, Envelope)]
#[envelope(name = "Job", schema = 1)]
struct Job {
    doc_ref: String,
}

/// What one job of a stage hands on, built at run time from the graph.
struct Handed {
    jobs: Vec<(&'static str, Vec<Job>)>,
    joins: Vec<&'static str>,
}

impl HandOn for Handed {
    fn count(&self) -> usize {
        self.jobs.iter().map(|(_, jobs)| jobs.len()).sum()
    }

    fn hand_on(self, to: &mut Handoff<'_>) -> queuegen_runtime::Result<()> {
        for (stage, jobs) in self.jobs {
            to.publish(stage, jobs)?;
        }
        for join in self.joins {
            to.join(
                join,
                Job {
                    doc_ref: join.to_owned(),
                },
            )?;
        }
        Ok(())
    }
}

/// A summary as the test compares it: job ID -> dead.
type SummaryView = BTreeMap<String, bool>;

/// What the handlers saw: every job that ran (its stage, and whether it
/// was dead-lettered), and each join's summaries.
#[derive(Default, Clone)]
struct Seen {
    ran: Arc<Mutex<BTreeMap<String, (String, bool)>>>,
    summaries: Arc<Mutex<BTreeMap<String, Vec<SummaryView>>>>,
}

fn fixed(seed: u64, job: &str, salt: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (seed, job, salt).hash(&mut hasher);
    hasher.finish()
}

struct SimStage {
    seed: u64,
    stage: &'static str,
    then: Vec<&'static str>,
    /// The joins' names, for the first stage; empty for the others.
    joins: Vec<&'static str>,
    first: bool,
    seen: Seen,
}

impl StageHandler<Job> for SimStage {
    type Next = Handed;

    async fn handle(
        &self,
        _job: Job,
        summary: Option<RunSummary>,
        ctx: &JobContext,
    ) -> Result<Step<Handed>, JobError> {
        let id = ctx.job_id();
        let dead = !self.first && fixed(self.seed, id, "dead") % 6 == 0;
        self.seen
            .ran
            .lock()
            .unwrap()
            .insert(id.to_owned(), (self.stage.to_owned(), dead));
        if let Some(summary) = summary {
            let view = summary
                .jobs
                .iter()
                .map(|job| (job.job_id.clone(), !job.done))
                .collect();
            self.seen
                .summaries
                .lock()
                .unwrap()
                .entry(self.stage.to_owned())
                .or_default()
                .push(view);
        }
        if dead {
            return Ok(Outcome::dead_letter("chosen dead").into());
        }
        let jobs = self
            .then
            .iter()
            .map(|next| {
                let count = fixed(self.seed, id, next) % 4;
                let jobs = (0..count)
                    .map(|k| Job {
                        doc_ref: format!("{next}-{k}"),
                    })
                    .collect();
                (*next, jobs)
            })
            .collect();
        Ok(Step::hand_on(Handed {
            jobs,
            joins: self.joins.clone(),
        }))
    }
}

/// A name that lives for the test: the stage workers want `'static` names.
fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

struct Shape {
    seed: u64,
    spec: Spec,
    source: String,
    configs: Vec<QueueConfig>,
}

impl Shape {
    fn new(seed: u64) -> Shape {
        let (spec, source) = spec_of(seed);
        let prefix = unique_prefix(&format!("shape{seed}"));
        let configs = spec
            .queues
            .iter()
            .map(|queue| {
                let mut config = queue_config(&spec, queue);
                config.key_prefix = prefix.clone().into();
                config
            })
            .collect();
        Shape {
            seed,
            spec,
            source,
            configs,
        }
    }

    fn pipeline(&self) -> &Pipeline {
        &self.spec.pipelines[0]
    }

    fn config(&self, queue: &str) -> &QueueConfig {
        self.configs
            .iter()
            .find(|config| *config.queue == *queue)
            .expect("a queue of the shape")
    }

    /// The run's status at `join`, its summary record there, and how many
    /// times its job was appended to the join's stream.
    async fn join_state(
        &self,
        redis: &Redis,
        join: &str,
    ) -> (Option<String>, BTreeMap<String, bool>, usize) {
        let config = self.config(join);
        let keys = config.run_keys(run_partition(config, RUN), &self.pipeline().name, RUN);
        let mut conn = redis.shared();
        let status: Option<String> = redis::cmd("HGET")
            .arg(&keys.run)
            .arg("status")
            .query_async(&mut conn)
            .await
            .unwrap();
        let settled: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys.settled)
            .query_async(&mut conn)
            .await
            .unwrap();
        let summary = settled
            .into_iter()
            .filter(|(_, record)| record != "-")
            .map(|(id, record)| (id, record == "dead"))
            .collect();
        let mut appended = 0;
        for key in config.ready_keys() {
            let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(&key)
                .arg("-")
                .arg("+")
                .query_async(&mut conn)
                .await
                .unwrap();
            appended += reply.ids.len();
        }
        (status, summary, appended)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_shapes_join_once_with_the_jobs_they_waited_for_or_fail() {
    queuegen_tests::support::init_tracing();
    let shapes: u64 = std::env::var("QUEUEGEN_PIPELINE_SHAPES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SHAPES);
    let server = RedisServer::start();
    let redis = Redis::connect(server.url()).await.unwrap();
    let (spec, _) = spec_of(0);
    let code = render_library(&spec, "sim.yaml", LIBRARY_VERSION).unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&code)
        .query_async(&mut redis.shared())
        .await
        .unwrap();
    for seed in 0..shapes {
        run_shape(&redis, Shape::new(seed)).await;
    }
}

async fn run_shape(redis: &Redis, shape: Shape) {
    let pipeline = shape.pipeline();
    for config in &shape.configs {
        ensure_groups(redis, config).await.unwrap();
    }
    let runtime =
        PipelineRuntime::new(redis, pipeline.clone(), shape.configs.iter().cloned()).unwrap();
    let seen = Seen::default();
    let joins: Vec<&'static str> = pipeline.joins().map(|(s, _)| leak(&s.queue)).collect();
    let workers: Vec<_> = pipeline
        .stages
        .iter()
        .map(|stage| {
            let first = stage.queue == pipeline.first;
            let handler = SimStage {
                seed: shape.seed,
                stage: leak(&stage.queue),
                then: stage.then.iter().map(|s| leak(s)).collect(),
                joins: if first { joins.clone() } else { Vec::new() },
                first,
                seen: seen.clone(),
            };
            let worker = StageWorker::new(runtime.clone(), leak(&stage.queue), handler).unwrap();
            spawn_worker(
                Worker::new(redis, shape.config(&stage.queue).clone(), worker)
                    .read_block(Duration::from_millis(100)),
            )
        })
        .collect();
    Producer::<Job>::new(redis, shape.config(&pipeline.first).clone())
        .publish(NewJob::new(
            RUN,
            "acme",
            Job {
                doc_ref: "start".to_owned(),
            },
        ))
        .await
        .unwrap();

    // Ended: every join has a status, and each published one's job ran.
    let ended = eventually(Duration::from_secs(30), || {
        let shape = &shape;
        let seen = seen.clone();
        let joins = joins.clone();
        async move {
            for join in joins {
                match shape.join_state(redis, join).await.0.as_deref() {
                    Some("failed") => {}
                    Some("published") => {
                        let id = join_job_id(RUN, join);
                        if !seen.ran.lock().unwrap().contains_key(&id) {
                            return false;
                        }
                    }
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
    // Whatever a join would do late (publish again) has time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for worker in workers {
        worker.stop().await;
    }
    let context = |join: &str| format!("seed {}, join {join}\n{}", shape.seed, shape.source);
    assert!(ended, "the run never ended: {}", context("-"));

    let ran = seen.ran.lock().unwrap().clone();
    let failed: BTreeSet<String> = {
        let mut failed = BTreeSet::new();
        for join in &joins {
            if shape.join_state(redis, join).await.0.as_deref() == Some("failed") {
                failed.insert((*join).to_owned());
            }
        }
        failed
    };
    for (join, waits) in pipeline.joins() {
        let join = join.queue.as_str();
        let (status, summary, appended) = shape.join_state(redis, join).await;
        let dead = |id: &str, stage: &str| -> bool {
            if failed.contains(stage) && id == join_job_id(RUN, stage) {
                return true;
            }
            ran.get(id).is_some_and(|(_, dead)| *dead)
        };
        let mut expected: BTreeMap<String, bool> = BTreeMap::new();
        for (id, (stage, _)) in &ran {
            if waits.after.contains(stage) {
                expected.insert(id.clone(), dead(id, stage));
            }
        }
        for failed_join in waits.after.iter().filter(|a| failed.contains(*a)) {
            expected.insert(join_job_id(RUN, failed_join), true);
        }
        let leads_here = |stage: &str| pipeline.leads_to_join(stage, join);
        let a_job_died = ran
            .iter()
            .any(|(id, (stage, _))| leads_here(stage) && dead(id, stage));
        let a_join_failed = waits.after.iter().any(|a| failed.contains(a));
        match status.as_deref() {
            Some("published") => {
                assert_eq!(appended, 1, "published once: {}", context(join));
                assert_eq!(summary, expected, "its summary: {}", context(join));
                let handed = seen.summaries.lock().unwrap()[join].clone();
                assert!(
                    handed.iter().all(|view| *view == expected),
                    "the handler's summary: {handed:?} {}",
                    context(join)
                );
                assert!(
                    waits.on_dead_letter == OnDeadLetter::Continue
                        || !(a_job_died || a_join_failed),
                    "published though a job it counts on died under `fail`: {}",
                    context(join)
                );
            }
            Some("failed") => {
                assert_eq!(
                    appended,
                    0,
                    "a failed join publishes nothing: {}",
                    context(join)
                );
                assert_eq!(
                    waits.on_dead_letter,
                    OnDeadLetter::Fail,
                    "{}",
                    context(join)
                );
                assert!(
                    a_job_died || a_join_failed,
                    "failed with nothing dead: {}",
                    context(join)
                );
            }
            other => panic!("ended as {other:?}: {}", context(join)),
        }
    }
}
