//! The deployment rehearsal (issue 26, the seam test): every generated artefact of a spec deployed together, each component run exactly as its manifest wires it, on a server set up by `queue.conf` and the rendered users file, through a publish → work → dead-letter → replay → trim cycle, with `ACL LOG` empty at the end.
//!
//! Each artefact passes its own consumer's test elsewhere; this test is
//! about where they meet: the Secret keys the manifests name and the users
//! the ACL defines, the metrics the rules read and the processes that export
//! them, the runbook's commands and the role its URL logs in as. Runs for
//! the example (`examples/docs-pipeline`) and the tests spec (`tests/`).
//!
//! Deliberate differences from a cluster, each for the machine it runs on:
//! one replica per Deployment; a container's `0.0.0.0:PORT` is a free
//! loopback port; a ConfigMap mount is a directory; the migration Job's
//! `psql` lines are applied by the harness; the Secrets hold loopback URLs.

mod binaries;
mod cluster;
mod keda;
mod manifests;
mod prometheus;
mod rules;
mod runbook;
mod server;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use queuegen::gen::deploy::k8s;
use queuegen::spec::model::Spec;
use queuegen_runtime::roles::Role;
use queuegen_runtime::Partition;
use queuegen_runtime::QueueConfig;
use queuegen_tests::PostgresServer;

use cluster::{Cluster, Pod};
use manifests::Manifests;
use prometheus::Prometheus;
use runbook::Runbook;
use server::QueueRedis;

/// How long the queues may take to settle after a publish or a replay.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Prometheus's alerts may take to match the queues' state: the
/// monitor refreshes its gauges every 15s (`queuegen monitor`'s default,
/// which the manifest keeps), then a scrape and an evaluation (1s each).
const ALERTS_TIMEOUT: Duration = Duration::from_secs(45);

/// A spec's artefacts generated into a directory laid out as a team's
/// repository (`queues.yaml` beside `deploy/`), its server and its cluster.
struct Stage {
    /// Started by `check_rules`, scraping `pods`; first, so it is killed
    /// (dropped) before `root`, which holds its data, is deleted.
    prometheus: Option<Prometheus>,
    /// Kept (not deleted) when the test fails, for its logs and scrapes.
    root: Option<tempfile::TempDir>,
    deploy: PathBuf,
    spec: Spec,
    manifests: Manifests,
    redis: QueueRedis,
    cluster: Cluster,
    runbook: Runbook,
    pods: Vec<Pod>,
}

impl Stage {
    /// Generates `spec_dir/queues.yaml`'s artefacts with `queuegen
    /// generate`, starts the server they configure, and a cluster whose
    /// worker image runs `worker`.
    fn new(spec_dir: &Path, worker: PathBuf) -> Stage {
        let root = tempfile::Builder::new()
            .prefix("queuegen-rehearsal-")
            .tempdir()
            .unwrap();
        for file in ["queues.yaml", "queues.lock"] {
            if spec_dir.join(file).exists() {
                std::fs::copy(spec_dir.join(file), root.path().join(file)).unwrap();
            }
        }
        let out = Command::new(binaries::queuegen())
            .args(["generate", "queues.yaml", "--deploy-out", "deploy"])
            .current_dir(root.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "queuegen generate: {}", stderr(&out));
        let deploy = root.path().join("deploy");
        let spec = queuegen::spec::check_file(&root.path().join("queues.yaml"))
            .unwrap()
            .spec
            .expect("the spec is valid");
        let redis = QueueRedis::start(root.path(), &deploy, &spec.service);
        let manifests = Manifests::read(&deploy.join("k8s"));
        let mut cluster = Cluster::new(
            root.path(),
            &manifests,
            // The programs the generated containers name: queuegen's own
            // image, and the PostgreSQL image's shell and psql (migrations).
            &[
                ("queuegen", binaries::queuegen()),
                ("sh", PathBuf::from("/bin/sh")),
                ("psql", which("psql")),
            ],
            BTreeMap::from([(spec.kubernetes.image.clone(), worker)]),
        );
        cluster.secret(&spec.kubernetes.redis_secret, redis_secret(&redis));
        let runbook = Runbook::read(&deploy.join("RUNBOOK.md"));
        println!(
            "rehearsing {} on {} in {}",
            spec.service,
            redis.describe(),
            root.path().display()
        );
        Stage {
            root: Some(root),
            deploy,
            spec,
            manifests,
            redis,
            cluster,
            runbook,
            pods: Vec::new(),
            prometheus: None,
        }
    }

    fn root(&self) -> &Path {
        self.root.as_ref().expect("dropped only at the end").path()
    }

    /// The queue settings the generated code and the CLI use.
    fn configs(&self) -> Vec<QueueConfig> {
        self.spec
            .queues
            .iter()
            .map(|queue| queuegen::runtime_config::queue_config(&self.spec, queue))
            .collect()
    }

    /// Runs a runbook line as the user the runbook names for it (its own
    /// `REDIS_URL=` prefix, else the exported one), from the deploy
    /// directory, with `values` for its placeholders; fails on a non-zero exit.
    fn run_line(&self, line: &runbook::Line, values: &BTreeMap<&str, String>) -> Option<Output> {
        let words = match line.filled(values) {
            Ok(words) => words,
            Err(why) => {
                println!("runbook: skipped `{}`: {why}", line.text);
                return None;
            }
        };
        let user = match &line.user {
            Some(user) => user.clone(),
            None => self
                .runbook
                .exported_user()
                .unwrap_or_else(|why| panic!("{why}")),
        };
        let role = self.redis.role_named(&user).unwrap_or_else(|| {
            panic!(
                "runbook line `{}` logs in as {user}, a user redis/users.acl does not define",
                line.text
            )
        });
        let out = Command::new(binaries::queuegen())
            .args(&words[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("REDIS_URL", self.redis.url(role))
            .current_dir(&self.deploy)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "runbook line `{}` as {user} ({}) failed:\n{}{}\nACL LOG:\n{}",
            line.text,
            role.name(),
            stderr(&out),
            String::from_utf8_lossy(&out.stdout),
            self.redis.acl_log().join("\n")
        );
        println!("runbook: ran `{}` as {user}", words.join(" "));
        Some(out)
    }

    /// `queuegen apply` as the runbook says to run it (the deployer's, from CI).
    fn apply(&self) {
        let lines = self.runbook.queuegen_lines();
        let apply = lines
            .iter()
            .find(|line| line.words.get(1).map(String::as_str) == Some("apply"))
            .expect("the runbook says how to run `queuegen apply` (in a sh block)");
        self.run_line(apply, &BTreeMap::new());
    }

    /// Starts one pod of every Deployment in `k8s/` and waits for each to be ready.
    async fn start_deployments(&mut self) {
        let deployments: Vec<serde_yaml_ng::Value> =
            self.manifests.of_kind("Deployment").cloned().collect();
        for deployment in &deployments {
            let pod = format!("{}-0", manifests::name(deployment));
            self.pods.push(self.cluster.start(deployment, &pod));
        }
        for pod in &mut self.pods {
            pod.ready().await;
        }
    }

    /// Waits until every group has read and settled every entry (no lag,
    /// nothing pending); returns the dead letters of each queue (stream ID and partition).
    async fn settle(&self, what: &str) -> BTreeMap<String, Vec<(String, Partition)>> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let mut admin = self.redis.admin();
        loop {
            let unsettled = unsettled(&mut admin, &self.configs());
            if unsettled.is_empty() {
                return dead_letters(&mut admin, &self.configs());
            }
            assert!(
                Instant::now() < deadline,
                "{what}: still unsettled after {SETTLE_TIMEOUT:?}: {unsettled:?}\n{}",
                self.pod_logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Scrapes every pod's metrics port, writes each scrape to
    /// `scrapes/POD.prom`, and checks the rules against them: the metrics
    /// they name exported, then, evaluated by a Prometheus scraping the
    /// pods (started here, kept for `check_alerts`), `check_alerts`.
    async fn check_rules(&mut self, dead: &BTreeMap<String, Vec<(String, Partition)>>) {
        let dir = self.root().join("scrapes");
        std::fs::create_dir_all(&dir).unwrap();
        let mut scrapes = Vec::new();
        for pod in &self.pods {
            for (port, _) in &pod.container.ports {
                let text = pod.get(port, "/metrics").await;
                std::fs::write(dir.join(format!("{}.prom", pod.name)), &text).unwrap();
                scrapes.push(
                    queuegen_tests::exposition::parse(&text)
                        .unwrap_or_else(|err| panic!("{}'s /metrics: {err}", pod.name)),
                );
            }
        }
        let rules = rules::read(&self.deploy.join("prometheus/rules.yml"));
        assert!(!rules.is_empty(), "rules.yml has rules");
        let missing = rules::unexported(&rules, &rules::exported(&scrapes));
        assert!(
            missing.is_empty(),
            "rules name metrics that no running process exports (scrapes in {}):\n{}",
            dir.display(),
            missing.join("\n")
        );
        let started = Instant::now();
        let targets = prometheus::discover(&self.manifests, &self.pods);
        for pod in &self.pods {
            for (port, _) in &pod.container.ports {
                assert!(
                    targets.iter().any(|target| target.addr == pod.addr(port)),
                    "Prometheus's service discovery finds no target for port {port} of {}: no prometheus.io/scrape annotation on its pod template or on a Service selecting it",
                    pod.name
                );
            }
        }
        let rules_file = self.deploy.join("prometheus/rules.yml");
        self.prometheus =
            Some(Prometheus::start(&self.root().join("prometheus"), &rules_file, &targets).await);
        self.check_alerts(dead, "with the dead letters").await;
        println!("prometheus: started and checked in {:?}", started.elapsed());
    }

    /// Prometheus (from `check_rules`) has scraped every target and then
    /// evaluated every rule: each is healthy, and the active alerts become
    /// exactly those `dead`'s dead letters call for (`rules::expected_alerts`).
    async fn check_alerts(&self, dead: &BTreeMap<String, Vec<(String, Partition)>>, when: &str) {
        let started = Instant::now();
        let prometheus = self
            .prometheus
            .as_ref()
            .expect("check_rules started Prometheus");
        prometheus
            .wait_evaluated(std::time::SystemTime::now())
            .await;
        let unhealthy = rules::unhealthy(&prometheus.rules().await);
        assert!(
            unhealthy.is_empty(),
            "{when}: Prometheus could not evaluate these rules (log {}):\n{}",
            prometheus.log.display(),
            unhealthy.join("\n")
        );
        let expected = rules::expected_alerts(&self.spec, dead);
        let deadline = Instant::now() + ALERTS_TIMEOUT;
        loop {
            let rules = prometheus.rules().await;
            let active = rules::active_alerts(&rules);
            if active.keys().eq(expected.iter()) {
                println!(
                    "prometheus {when}: active alerts {active:?} ({:?})",
                    started.elapsed()
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{when}: after {ALERTS_TIMEOUT:?} Prometheus's active alerts are not those the dead letters call for\nexpected: {expected:?}\nactive: {active:#?}\nunhealthy: {:?}",
                rules::unhealthy(&rules)
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Every runbook `queuegen` line, the queue's placeholders filled from
    /// its dead letters (`<partition>` the dead letter's, else 0); then every
    /// `psql` line against `database` (the URL its `DATABASE_URL` names).
    /// A line of a program the rehearsal cannot run as a role fails it.
    fn run_runbook(
        &self,
        dead: &BTreeMap<String, Vec<(String, Partition)>>,
        database: Option<&str>,
    ) {
        let unrunnable = self.runbook.unrunnable();
        assert!(
            unrunnable.is_empty(),
            "the runbook has commands the rehearsal cannot run as a generated role (only queuegen, psql and kubectl lines are known):\n{}",
            unrunnable.join("\n")
        );
        for line in self.runbook.lines_of(&runbook::Kind::Kubectl) {
            println!("runbook: not run (no Kubernetes API here) `{line}`");
        }
        self.run_psql_lines(dead, database);
        for line in self.runbook.queuegen_lines() {
            let mut values = BTreeMap::from([("why", "rehearsal".to_owned())]);
            let queue = line.option("--queue").map(str::to_owned);
            let letters = queue
                .as_ref()
                .and_then(|queue| dead.get(queue))
                .cloned()
                .unwrap_or_default();
            values.insert(
                "partition",
                letters.first().map_or(0, |(_, p)| p.index()).to_string(),
            );
            if let Some((id, _)) = letters.first() {
                values.insert("dead-letter-id", id.clone());
            }
            self.run_line(&line, &values);
        }
    }

    /// The runbook's `psql` lines, verbatim through `sh` (they quote
    /// `"$DATABASE_URL"`), from the deploy directory, `<queue>` and
    /// `<job_id>` filled with a dead letter's queue and any job ID.
    fn run_psql_lines(
        &self,
        dead: &BTreeMap<String, Vec<(String, Partition)>>,
        database: Option<&str>,
    ) {
        let lines = self.runbook.lines_of(&runbook::Kind::Psql);
        if lines.is_empty() {
            return;
        }
        let database = database.unwrap_or_else(|| {
            panic!(
                "the runbook has psql lines but the spec has no database:\n{}",
                lines.join("\n")
            )
        });
        let queue = dead.keys().next().cloned().unwrap_or_default();
        let values = BTreeMap::from([("queue", queue), ("job_id", "rehearsal".to_owned())]);
        for line in lines {
            let filled =
                runbook::fill(&line, &values).unwrap_or_else(|why| panic!("{line}: {why}"));
            let out = Command::new("sh")
                .args(["-c", &filled])
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap())
                .env("DATABASE_URL", database)
                .current_dir(&self.deploy)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "runbook line `{line}` failed:\n{}{}",
                stderr(&out),
                String::from_utf8_lossy(&out.stdout)
            );
            println!("runbook: ran `{filled}`");
        }
    }

    /// Runs every Job's pod to its end; each must succeed.
    fn run_jobs(&self) -> usize {
        self.run_to_end("Job")
    }

    /// Runs every CronJob's pod once, as its schedule would; each must succeed.
    fn run_cronjobs(&self) -> usize {
        self.run_to_end("CronJob")
    }

    /// Runs one pod of every workload of `kind` to its end; how many ran.
    fn run_to_end(&self, kind: &str) -> usize {
        let mut ran = 0;
        for workload in self.manifests.of_kind(kind) {
            let pod = format!("{}-run", manifests::name(workload));
            let out = self.cluster.run(workload, &pod);
            assert!(
                out.status.success(),
                "{kind} pod {pod}: {}{}",
                stderr(&out),
                String::from_utf8_lossy(&out.stdout)
            );
            println!(
                "{kind} {pod}: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            );
            ran += 1;
        }
        ran
    }

    /// Stops every pod (SIGTERM); each must end by itself with status 0.
    fn stop_pods(&mut self) {
        for pod in &mut self.pods {
            let (clean, log) = pod.stop();
            assert!(clean, "pod {} did not stop cleanly:\n{log}", pod.name);
        }
    }

    /// `ACL LOG` must be empty: every component did its work with its role's permissions.
    fn assert_acl_log_empty(&self) {
        let denials = self.redis.acl_log();
        assert!(
            denials.is_empty(),
            "ACL LOG of the rehearsal's server:\n{}",
            denials.join("\n")
        );
    }

    fn pod_logs(&self) -> String {
        self.pods
            .iter()
            .map(|pod| {
                let log = pod.log();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {} ---\n{}", pod.name, tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(root) = self.root.take() {
                println!("kept for a look: {}", root.keep().display());
            }
        }
    }
}

/// The Redis Secret as docs/deploy.md tells a team to create it: one URL
/// per component role, and the address and monitor password for KEDA.
fn redis_secret(redis: &QueueRedis) -> BTreeMap<String, String> {
    let roles = [
        k8s::WORKER_ROLE,
        k8s::OUTBOX_PUBLISHER_ROLE,
        k8s::MONITOR_ROLE,
        k8s::TRIM_ROLE,
    ];
    roles
        .into_iter()
        .map(|role| (k8s::redis_url_key(role), redis.url(role)))
        .chain([
            (k8s::REDIS_ADDRESS_KEY.to_owned(), redis.address()),
            (
                k8s::redis_password_key(k8s::KEDA_ROLE),
                server::password(k8s::KEDA_ROLE),
            ),
        ])
        .collect()
}

/// `stream: problem` for each group that has lag or pending entries.
fn unsettled(admin: &mut redis::Connection, configs: &[QueueConfig]) -> Vec<String> {
    let mut problems = Vec::new();
    for config in configs {
        for key in config.ready_keys() {
            let groups: Vec<BTreeMap<String, redis::Value>> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&key)
                .query(admin)
                .unwrap_or_else(|err| panic!("XINFO GROUPS {key}: {err}"));
            for group in groups {
                let number = |field: &str| match group.get(field) {
                    Some(redis::Value::Int(n)) => Some(*n),
                    _ => None,
                };
                let (pending, lag) = (number("pending"), number("lag"));
                if pending != Some(0) || lag != Some(0) {
                    problems.push(format!("{key}: pending {pending:?}, lag {lag:?}"));
                }
            }
        }
    }
    problems
}

/// Each queue's dead letters: stream ID and partition.
fn dead_letters(
    admin: &mut redis::Connection,
    configs: &[QueueConfig],
) -> BTreeMap<String, Vec<(String, Partition)>> {
    let mut dead = BTreeMap::new();
    for config in configs {
        for partition in Partition::all(config.partitions) {
            let key = config.dead_key(partition.default_stream());
            let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(&key)
                .arg("-")
                .arg("+")
                .query(admin)
                .unwrap();
            for entry in entries.ids {
                dead.entry(config.queue.to_string())
                    .or_insert_with(Vec::new)
                    .push((entry.id, partition));
            }
        }
    }
    dead
}

/// `program` on PATH: a program the generated containers name that the
/// machine provides (scripts/test installs it).
fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn workspace(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The example: four queues, PostgreSQL results and outbox, a trim CronJob,
/// KEDA. An export whose row another writer already holds dead-letters
/// (primary key); the row is removed, the runbook's replay puts the job
/// back, and it is done; the CronJob trims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_deploys_as_generated() {
    let example = workspace("examples/docs-pipeline");
    let worker = binaries::built("docs-pipeline", "worker");
    let producer = binaries::built("docs-pipeline", "producer");
    let mut stage = Stage::new(&example, worker);
    let database = PostgresServer::start();
    let postgres_secret = stage
        .spec
        .kubernetes
        .postgres_secret
        .clone()
        .expect("the example names its PostgreSQL Secret");
    stage.cluster.secret(
        &postgres_secret,
        BTreeMap::from([(k8s::DATABASE_URL_KEY.to_owned(), database.url())]),
    );
    // queuegen's tables: the generated migration Job, run as its pod (its
    // ConfigMap mounted, psql from the Secret's URL), twice: a deploy runs it
    // every time, so a second run must change nothing and succeed.
    assert_eq!(
        stage.run_jobs(),
        1,
        "the example has one Job, the migrations"
    );
    assert_eq!(stage.run_jobs(), 1);
    // The team's own tables, beside queuegen's.
    let mut files: Vec<_> = std::fs::read_dir(example.join("migrations"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        database
            .psql_file(&file)
            .unwrap_or_else(|err| panic!("{}: {err}", file.display()));
    }
    // Another writer already holds the first export's row: its job fails
    // on the primary key, permanently, and is dead-lettered.
    const HELD: &str = "rehearsal-export-0";
    database.psql(&format!(
        "INSERT INTO exports (export_ref, file, job_id) VALUES ('{HELD}', 'elsewhere', 'held')"
    ));

    stage.apply();
    stage.start_deployments().await;
    // The example's producer, as the producer user: ocr, notification and
    // reconciliation to Redis, export through the outbox.
    let out = Command::new(&producer)
        .args(["--count", "3", "--job-prefix", "rehearsal"])
        .env_clear()
        .env("REDIS_URL", stage.redis.url(Role::Producer))
        .env("DATABASE_URL", database.url())
        .output()
        .unwrap();
    assert!(out.status.success(), "producer: {}", stderr(&out));

    // The export is in the outbox until the publisher dispatches it: Redis
    // looks settled before that.
    let schema = &stage
        .spec
        .postgres
        .as_ref()
        .expect("the example uses PostgreSQL")
        .schema;
    let undispatched = format!("SELECT count(*) FROM {schema}.outbox WHERE dispatched_at IS NULL");
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while database.psql(&undispatched).trim() != "0" {
        assert!(
            Instant::now() < deadline,
            "the outbox publisher dispatched nothing in {SETTLE_TIMEOUT:?}\n{}",
            stage.pod_logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dead = stage.settle("after publishing").await;
    assert_eq!(
        dead.keys().collect::<Vec<_>>(),
        ["export"],
        "only the held export is dead-lettered: {dead:?}"
    );
    let lags = keda::run_lag_triggers(&stage.manifests, &stage.cluster);
    assert!(!lags.is_empty(), "the example has lag triggers");
    assert!(lags.iter().all(|(_, lag)| *lag == 0), "{lags:?}");
    stage.check_rules(&dead).await;

    // The cause is fixed; the runbook's commands replay the dead letter.
    database.psql("DELETE FROM exports WHERE job_id = 'held'");
    stage.run_runbook(&dead, Some(&database.url()));
    let after = stage.settle("after the replay").await;
    // A replay leaves the dead letter in its stream (transitions::replay)
    // and the gauge counts the stream's entries (XLEN), so the dead-letter
    // alert stays firing until the letter is trimmed: `after` still holds it.
    stage.check_alerts(&after, "after the replay").await;
    let written = database.psql(&format!(
        "SELECT job_id FROM exports WHERE export_ref = '{HELD}'"
    ));
    assert!(written.contains(&format!("export-{HELD}")), "{written}");
    assert_eq!(
        stage.run_cronjobs(),
        1,
        "the example trims export by CronJob"
    );

    stage.stop_pods();
    stage.assert_acl_log_empty();
}

/// The tests spec: six queues, no Kubernetes section of its own (the
/// generator's defaults), no PostgreSQL. A job of `jobs` whose subject
/// starts with `dead` is dead-lettered until replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tests_spec_deploys_as_generated() {
    use queuegen_runtime::{NewJob, Redis, Timestamp};
    use queuegen_tests::queues::envelopes::{DefaultsJob, EvolvedJob, EvolvedJobMode, TestJob};
    use queuegen_tests::queues::{crashy, defaults, evolving, jobs, laned, retrying};

    let worker = binaries::built("queuegen-tests", "queuegen-tests-worker");
    let mut stage = Stage::new(&workspace("tests"), worker);
    stage.apply();
    stage.start_deployments().await;

    let redis = Redis::connect(stage.redis.url(Role::Producer))
        .await
        .unwrap();
    let job = |id: &str, subject: &str| {
        NewJob::new(
            id,
            "acme",
            TestJob {
                subject_ref: subject.into(),
                pages: None,
            },
        )
    };
    jobs::producer(&redis)
        .publish(job("rehearsal-dead", "dead-1"))
        .await
        .unwrap();
    jobs::producer(&redis)
        .publish(job("rehearsal-jobs", "ok"))
        .await
        .unwrap();
    crashy::producer(&redis)
        .publish(job("rehearsal-crashy", "ok"))
        .await
        .unwrap();
    retrying::producer(&redis)
        .publish(job("rehearsal-retrying", "ok"))
        .await
        .unwrap();
    laned::producer(&redis)
        .publish(job("rehearsal-laned", "ok"))
        .await
        .unwrap();
    let evolved = EvolvedJob {
        subject_ref: "ok".into(),
        page_count: 1,
        mode: EvolvedJobMode::Fast,
    };
    evolving::producer(&redis)
        .publish(NewJob::new("rehearsal-evolving", "acme", evolved))
        .await
        .unwrap();
    let defaulted = DefaultsJob {
        subject_ref: "ok".into(),
        searchable: true,
        max_retries: 3,
        language: "en".into(),
        not_before: Timestamp::now(),
    };
    defaults::producer(&redis)
        .publish(NewJob::new("rehearsal-defaults", "acme", defaulted))
        .await
        .unwrap();

    let dead = stage.settle("after publishing").await;
    assert_eq!(dead.keys().collect::<Vec<_>>(), ["jobs"], "{dead:?}");
    // `defaults` deletes on ack (retention.on_ack: delete): its done job's
    // entry went with the ack where the server has XACKDEL (which the
    // rendered users file then grants the worker), and stays elsewhere.
    let mut admin = stage.redis.admin();
    let defaults_entries: usize = defaults::CONFIG
        .ready_keys()
        .iter()
        .map(|key| {
            redis::cmd("XLEN")
                .arg(key)
                .query::<usize>(&mut admin)
                .unwrap()
        })
        .sum();
    let xackdel = queuegen_tests::acl::server_commands().xackdel;
    assert_eq!(
        defaults_entries,
        usize::from(!xackdel),
        "defaults' done entry after its ack (server has XACKDEL: {xackdel})"
    );
    assert!(keda::run_lag_triggers(&stage.manifests, &stage.cluster).is_empty());
    stage.check_rules(&dead).await;
    stage.run_runbook(&dead, None);
    // Replayed, the job is done: no dead letter but the one replayed.
    let after = stage.settle("after the replay").await;
    stage.check_alerts(&after, "after the replay").await;
    let before: BTreeSet<_> = dead.values().flatten().collect();
    assert!(
        after
            .values()
            .flatten()
            .all(|letter| before.contains(letter)),
        "the replayed job was dead-lettered again: {after:?}"
    );
    stage.run_cronjobs();

    stage.stop_pods();
    stage.assert_acl_log_empty();
}
