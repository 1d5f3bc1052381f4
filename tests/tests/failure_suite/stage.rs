//! A scenario's stage: fresh servers of its target, one queue applied on them, its jobs, its workers, and the ledger read back.

use std::time::Duration;

use queuegen_runtime::{NewJob, Producer, Published, QueueConfig, Redis};
use queuegen_tests::fixtures::TestJob;
use queuegen_tests::suite::{
    Deployment, Hold, Ledger, Places, QueueKind, ScriptedJob, Tally, Target, Tuning, WorkerSpec,
};
use queuegen_tests::support::{eventually, unique_prefix};

use crate::process::WorkerProcess;
use crate::verdict::Verdict;

/// One queue on a fresh deployment of a target.
pub struct Stage {
    pub deployment: Deployment,
    /// The queue's workers, as a spec: name it with [`WorkerSpec::named`].
    pub spec: WorkerSpec,
    pub config: QueueConfig,
    /// The ledger of `spec`'s group, read as the default user.
    pub ledger: Ledger,
}

impl Stage {
    /// Deploys `target` and applies `queue` (tuned) on it under a key prefix
    /// of its own.
    pub async fn new(target: Target, name: &str, queue: QueueKind, tuning: Tuning) -> Stage {
        let key_prefix = unique_prefix(name);
        let deployment = target.deploy(&key_prefix).await;
        Self::on(deployment, key_prefix, queue, tuning).await
    }

    /// As [`Stage::new`], on a deployment made already.
    pub async fn on(
        deployment: Deployment,
        key_prefix: String,
        queue: QueueKind,
        tuning: Tuning,
    ) -> Stage {
        let stage = Self::unapplied(deployment, key_prefix, queue, tuning);
        stage.deployment.apply(&stage.config).await;
        stage
    }

    /// The stage of `queue` on `deployment`, with nothing created on the
    /// servers yet (no library, no groups).
    pub fn unapplied(
        deployment: Deployment,
        key_prefix: String,
        queue: QueueKind,
        tuning: Tuning,
    ) -> Stage {
        let spec = WorkerSpec {
            url: deployment.worker_url().to_owned(),
            queue,
            key_prefix,
            tuning,
            consumer: "worker".to_owned(),
            hold: Hold::Never,
            effect_replicas: 0,
        };
        let config = spec.config();
        let ledger = spec.ledger(deployment.admin());
        Stage {
            deployment,
            spec,
            config,
            ledger,
        }
    }

    /// The default user's shared connection, for inspection.
    pub fn conn(&self) -> impl redis::aio::ConnectionLike + Send + Clone {
        self.deployment.admin().shared()
    }

    pub fn admin(&self) -> &Redis {
        self.deployment.admin()
    }

    /// Waits (up to 10 s) until the admin connection answers `PING`, as it
    /// does once it has reconnected after a restart or a promotion cut it
    /// (its first command after the cut fails); whether it did.
    pub async fn admin_answers(&self) -> bool {
        for _ in 0..100 {
            let ping: redis::RedisResult<String> =
                redis::cmd("PING").query_async(&mut self.conn()).await;
            if ping.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// A producer of the queue, logged in as workers are.
    pub async fn producer(&self) -> Producer<TestJob> {
        Producer::new(&self.deployment.worker_redis().await, self.config.clone())
    }

    /// Publishes `jobs` (tenant `acme`, `subject_ref` their script).
    pub async fn publish(&self, jobs: &[ScriptedJob]) -> Vec<Published> {
        self.producer()
            .await
            .publish_many(jobs.iter().map(new_job))
            .await
            .unwrap_or_else(|err| panic!("publishing {} jobs: {err}", jobs.len()))
    }

    /// Starts a worker process of `spec`.
    pub fn spawn(&self, spec: &WorkerSpec, failpoint: Option<&str>) -> WorkerProcess {
        WorkerProcess::spawn(spec, failpoint)
    }

    /// The ledger's record of `jobs` now.
    pub async fn tally(&self, jobs: &[ScriptedJob]) -> Tally {
        tally(&self.ledger, jobs).await
    }

    /// Waits up to `timeout` until `condition` holds of the ledger's record
    /// of `jobs`; whether it did.
    pub async fn until_tally(
        &self,
        jobs: &[ScriptedJob],
        timeout: Duration,
        condition: impl Fn(&Tally) -> bool,
    ) -> bool {
        until_tally(&self.ledger, jobs, timeout, condition).await
    }

    /// Where every one of `jobs` is now.
    pub async fn places(&self, jobs: &[ScriptedJob]) -> Places {
        Places::read(&mut self.conn(), &self.config, &self.ledger, jobs)
            .await
            .unwrap_or_else(|err| panic!("reading where the jobs are: {err}"))
    }

    /// Waits (up to `timeout`) until every job is where its script sends it.
    /// Judge the places read after the workers stopped, not these: a
    /// delivery still running may yet count something.
    pub async fn settle(&self, jobs: &[ScriptedJob], timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.places(jobs).await.settled(jobs) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Adds to `verdict` what settled `places` say: lost jobs, duplicate
    /// effects, and each job not exactly where its script sends it.
    pub fn judge(&self, verdict: &mut Verdict, jobs: &[ScriptedJob], places: &Places) {
        verdict.count(places.lost(jobs).len() as u64, places.tally.duplicates());
        verdict.problems.extend(places.problems(jobs));
        for (job_id, job) in &places.tally.jobs {
            verdict.check(job.duplicates == 0, || {
                format!(
                    "{job_id}: its effect ran again {} time(s): {job:?}",
                    job.duplicates
                )
            });
        }
    }
}

/// The job as a producer publishes it.
pub fn new_job(job: &ScriptedJob) -> NewJob<TestJob> {
    NewJob::new(
        job.job_id.clone(),
        "acme",
        TestJob::new(job.subject.clone(), None),
    )
}

/// What `ledger` holds for `jobs` now.
pub async fn tally(ledger: &Ledger, jobs: &[ScriptedJob]) -> Tally {
    ledger
        .tally(jobs.iter().map(|job| job.job_id.as_str()))
        .await
        .unwrap_or_else(|err| panic!("reading the ledger: {err}"))
}

/// Waits up to `timeout` until `condition` holds of what `ledger` holds for
/// `jobs`; whether it did.
pub async fn until_tally(
    ledger: &Ledger,
    jobs: &[ScriptedJob],
    timeout: Duration,
    condition: impl Fn(&Tally) -> bool,
) -> bool {
    let condition = &condition;
    eventually(timeout, move || async move {
        condition(&tally(ledger, jobs).await)
    })
    .await
}
