//! The pipeline rows: a stage worker process killed with SIGKILL at each hand-off of issue 29 (children published, parent not acked; a completion recorded, not acked; a join published, not acked), then every run finishes: no effect lost, none applied under an ID no run derives, every join published once with its whole summary.
//!
//! The tests spec's `docs` pipeline (split -> page and cover -> merge, every
//! stage a queue of its own, in its own slots on a Cluster) runs with the
//! recording handlers of `queuegen_tests::suite::pipeline`. The victim, a
//! `pipeline-worker` process working the stages the row names, dies at its
//! failpoint the first time one of its jobs gets there; the jobs it held
//! stay pending until the survivors, in this process, claim them after
//! `claim.min_idle` (2 s).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use queuegen_runtime::{NewJob, Producer};
use queuegen_tests::queues::envelopes::SplitJob;
use queuegen_tests::queues::split;
use queuegen_tests::suite::pipeline::{self, Document, Record};
use queuegen_tests::support::{all_pending, eventually};

use super::Run;
use crate::process::killed;
use crate::verdict::Verdict;

/// Kills a worker of `victim_stages` at `failpoint`; `warm_stages` run in
/// this process from the start (the stages upstream of the victim's, whose
/// jobs it needs).
pub async fn killed_at(
    run: Run,
    failpoint: &'static str,
    victim_stages: &'static [&'static str],
    warm_stages: &'static [&'static str],
) -> Verdict {
    let config = split::CONFIG;
    let deployment = run.target.deploy(&config.key_prefix).await;
    deployment.load_library().await;
    for config in pipeline::configs() {
        deployment.create_groups(&config).await;
    }
    let documents = Document::many("doc", run.size.jobs(12));
    let effects: usize = documents.iter().map(|d| d.expected_effects().len()).sum();
    // The table counts jobs: every job of every run.
    let mut verdict = Verdict::new(effects);

    // The victim first, so that it reads the first jobs of its stages.
    let mut victim = Victim::spawn(deployment.worker_url(), victim_stages, failpoint);
    let redis = deployment.worker_redis().await;
    let warm = pipeline::start(&redis, warm_stages, "warm");
    let producer = Producer::<SplitJob>::new(&redis, config);
    producer
        .publish_many(
            documents
                .iter()
                .map(|doc| NewJob::new(doc.run_id.clone(), "acme", SplitJob { pages: doc.pages })),
        )
        .await
        .expect("publishing the documents");

    let status = victim.wait(Duration::from_secs(20)).await;
    match status {
        Some(status) => verdict.check(killed(status), || {
            format!(
                "the victim ended with {status}, not at its failpoint:\n{}",
                victim.log_tail()
            )
        }),
        None => {
            verdict.problem(format!(
                "the victim never reached {failpoint}:\n{}",
                victim.log_tail()
            ));
            return verdict;
        }
    }

    // Survivors for every stage the warm workers do not run.
    let rest: Vec<&str> = pipeline::STAGES
        .iter()
        .copied()
        .filter(|stage| !warm_stages.contains(stage))
        .collect();
    let survivors = pipeline::start(&redis, &rest, "survivor");
    let admin = deployment.admin().clone();
    // Finished: every run's effects and join recorded, and nothing pending
    // in any stage, so the job the kill interrupted has been claimed and
    // worked again (the runs can finish before that: its effect and the
    // join it published were recorded before the kill).
    let finished = eventually(Duration::from_secs(40), || {
        let admin = admin.clone();
        let documents = documents.clone();
        async move {
            let judged = Record::read(&admin).await.judge(&documents);
            let mut conn = admin.shared();
            let mut pending = 0;
            for config in pipeline::configs() {
                pending += all_pending(&mut conn, &config).await.len();
            }
            judged.problems.is_empty() && pending == 0
        }
    })
    .await;
    // Anything late (a second publish of a join) has time to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for worker in warm.into_iter().chain(survivors) {
        worker.stop().await;
    }
    let record = Record::read(deployment.admin()).await;
    let judged = record.judge(&documents);
    verdict.count(judged.lost, judged.duplicates);
    verdict.problems.extend(judged.problems);
    verdict.check(finished, || {
        "the runs did not all finish, with nothing pending, within 40 s".to_owned()
    });
    verdict.check(record.redeliveries() > 0, || {
        "no job was delivered twice: the kill interrupted nothing".to_owned()
    });
    verdict.note(format!(
        "{} runs of {effects} jobs, recorded and each merge's stream entries counted; {} redeliveries after the kill",
        documents.len(),
        record.redeliveries()
    ));
    verdict
}

/// The `pipeline-worker` process that dies at its failpoint.
struct Victim {
    child: tokio::process::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Victim {
    fn spawn(url: &str, stages: &[&str], failpoint: &str) -> Victim {
        let dir = tempfile::Builder::new()
            .prefix("queuegen-pipeline-worker-")
            .tempdir()
            .expect("a temp dir for the victim's log");
        let log = dir.path().join("worker.log");
        let file = std::fs::File::create(&log).expect("the victim's log file");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pipeline-worker"))
            .env("REDIS_URL", url)
            .env("QG_STAGES", stages.join(","))
            .env("QG_CONSUMER", "victim")
            .env(queuegen_runtime::failpoint::ENV, failpoint)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().expect("log file handle")))
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning pipeline-worker");
        Victim {
            child,
            log,
            _dir: dir,
        }
    }

    async fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .map(|status| status.expect("reaping the victim"))
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}
