//! The tests spec's worker image (`tests/deploy/k8s/worker-*.yaml`, image `queuegen-tests-worker`): the generated worker of the queue `QUEUEGEN_QUEUE` names, configured by `Worker::with_env`, until SIGTERM.
//!
//! It runs the way the generated manifests wire a worker pod: the queue,
//! consumer name and metrics address from the environment the Deployment
//! sets, the Redis URL (the worker user's) from `REDIS_URL`. The queue's
//! schedules run beside it, as in the example's worker.
//!
//! Its handler does what the deployment rehearsal
//! (`queuegen/tests/rehearsal/`) drives: a job whose subject starts with
//! `dead` fails permanently (it is dead-lettered) until an operator replays
//! it (the replayed envelope's `reason` is `replay`: the cause was fixed);
//! every other job is done. The `docs` pipeline's stages (`split`, `page`,
//! `cover`, `merge`) run their generated stage workers: a split job hands
//! one page job per page and one cover job on, and the run's merge job.

use std::process::ExitCode;

use queuegen_runtime::runs::{RunSummary, Step};
use queuegen_runtime::{
    shutdown_signal, Envelope, Handler, JobContext, JobError, Outcome, Redis, Scheduler, Worker,
    QUEUE_ENV,
};
use queuegen_tests::queues::envelopes::{
    DefaultsJob, EvolvedJob, MergeJob, PartJob, SplitJob, TestJob,
};
use queuegen_tests::queues::{
    cover, crashy, defaults, evolving, jobs, laned, merge, page, retrying, split,
};

/// Subjects that dead-letter until replayed.
const DEAD_PREFIX: &str = "dead";
/// The `reason` the library's `replay` writes into the replayed envelope.
const REPLAYED: &str = "replay";

#[tokio::main]
async fn main() -> ExitCode {
    queuegen_tests::support::process_main("queuegen-tests-worker", run()).await
}

async fn run() -> Result<(), String> {
    let queue = std::env::var(QUEUE_ENV).map_err(|_| format!("{QUEUE_ENV} is not set"))?;
    let url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set".to_owned())?;
    let redis = Redis::connect(&url)
        .await
        .map_err(|err| format!("connecting to REDIS_URL: {err}"))?;
    match queue.as_str() {
        "jobs" => {
            let schedules = jobs::scheduler(&redis);
            work(jobs::worker(&redis, Rehearsed), Some(schedules)).await
        }
        "crashy" => work(crashy::worker(&redis, Rehearsed), None).await,
        "retrying" => work(retrying::worker(&redis, Rehearsed), None).await,
        "laned" => work(laned::worker(&redis, Rehearsed), None).await,
        "evolving" => work(evolving::worker(&redis, Rehearsed), None).await,
        "defaults" => work(defaults::worker(&redis, Rehearsed), None).await,
        "split" => work(split::worker(&redis, Rehearsed), None).await,
        "page" => work(page::worker(&redis, Rehearsed), None).await,
        "cover" => work(cover::worker(&redis, Rehearsed), None).await,
        "merge" => work(merge::worker(&redis, Rehearsed), None).await,
        other => Err(format!(
            "{QUEUE_ENV}={other}: no such queue in tests/queues.yaml"
        )),
    }
}

/// Runs `worker` (and `schedules`) until SIGTERM or SIGINT.
async fn work<E: Envelope, H: Handler<E>>(
    worker: Worker<E, H>,
    schedules: Option<Scheduler>,
) -> Result<(), String> {
    let worker = worker.with_env().map_err(|err| err.to_string())?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let scheduling = schedules.map(|scheduler| {
        let mut stopped = stopped.clone();
        tokio::spawn(scheduler.run_until(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }))
    });
    let report = worker
        .run_until(async move {
            shutdown_signal().await;
            let _ = stop.send(true);
        })
        .await
        .map_err(|err| err.to_string())?;
    if let Some(scheduling) = scheduling {
        scheduling
            .await
            .map_err(|err| err.to_string())?
            .map_err(|err| err.to_string())?;
    }
    println!("{report:?}");
    Ok(())
}

/// Done, or dead-lettered until replayed (see the module comment).
struct Rehearsed;

impl Rehearsed {
    fn outcome(subject: &str, ctx: &JobContext) -> Result<Outcome, JobError> {
        let replayed = ctx.header().reason.as_deref() == Some(REPLAYED);
        if subject.starts_with(DEAD_PREFIX) && !replayed {
            return Err(JobError::permanent(format!(
                "subject {subject:?} is dead until replayed"
            )));
        }
        Ok(Outcome::Done)
    }
}

/// Each generated queue's handler trait, implemented by [`Rehearsed::outcome`].
macro_rules! rehearsed {
    ($($queue:ident: $envelope:ty),* $(,)?) => {$(
        impl $queue::Handler for Rehearsed {
            async fn handle(&self, job: $envelope, ctx: &JobContext) -> Result<Outcome, JobError> {
                Self::outcome(&job.subject_ref, ctx)
            }
        }
    )*};
}

rehearsed!(
    jobs: TestJob,
    crashy: TestJob,
    retrying: TestJob,
    laned: TestJob,
    evolving: EvolvedJob,
    defaults: DefaultsJob,
);

impl split::Handler for Rehearsed {
    async fn handle(&self, job: SplitJob, ctx: &JobContext) -> Result<Step<split::Next>, JobError> {
        Ok(Step::hand_on(split::Next {
            page: (0..job.pages).map(|page| PartJob { page }).collect(),
            cover: vec![PartJob { page: 0 }],
            merge: MergeJob {
                doc: ctx.job_id().to_owned(),
            },
        }))
    }
}

impl page::Handler for Rehearsed {
    async fn handle(&self, job: PartJob, _ctx: &JobContext) -> Result<Step<page::Next>, JobError> {
        Ok(Step::done().with_result(format!("page-{}", job.page)))
    }
}

impl cover::Handler for Rehearsed {
    async fn handle(
        &self,
        _job: PartJob,
        _ctx: &JobContext,
    ) -> Result<Step<cover::Next>, JobError> {
        Ok(Step::done().with_result("cover"))
    }
}

impl merge::Handler for Rehearsed {
    async fn handle(
        &self,
        _job: MergeJob,
        _summary: RunSummary,
        _ctx: &JobContext,
    ) -> Result<Step<merge::Next>, JobError> {
        Ok(Step::done())
    }
}
