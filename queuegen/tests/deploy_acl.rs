//! The generated `redis/users.acl`, rendered and loaded by a real redis-server: each role does all its work with an empty `ACL LOG`, and is refused everything else.
//!
//! The `ACL LOG` check is what makes a missing command fail this test even
//! where the runtime tolerates a refusal (a probe, a metric): Redis logs
//! every denial, whether the caller reported it or not.

mod ops_state;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuegen::gen::deploy::acl;
use queuegen_runtime::config::DedupConfig;
use queuegen_runtime::roles::Role;
use queuegen_runtime::{
    Handler, JobContext, JobError, NewJob, Outcome, Producer, QueueConfig, Redis, Worker,
};
use queuegen_runtime::{Partition, StreamSlot};
use queuegen_runtime::{RedisResults, Results};
use queuegen_tests::fixtures::{retrying_config, TestJob};
use queuegen_tests::support::{self, eventually};
use queuegen_tests::RedisServer;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/queues.yaml");
const SERVICE: &str = "queuegen-tests";
const PREFIX: &str = "qgtest";
/// The test's own administrator: the default user, on, in place of the
/// generated `default off` line (the last step loads that line too).
const TEST_DEFAULT: &str = "user default on nopass ~* &* +@all";

fn spec() -> queuegen::spec::model::Spec {
    queuegen::spec::check_file(Path::new(SPEC))
        .unwrap()
        .spec
        .expect("tests/queues.yaml is valid")
}

fn password(role: Role) -> String {
    format!("{}Secret42", role.name())
}

/// The generated users file rendered with each role's test password.
fn rendered(extra: &[String]) -> String {
    let generated = acl::generate(&spec(), "queues.yaml").unwrap().contents;
    acl::render(&generated, extra, features(), |variable| {
        Role::ALL
            .into_iter()
            .find(|&role| acl::password_variable(SERVICE, role) == variable)
            .map(password)
    })
    .unwrap()
}

/// What the test's server binary has (asked of it, as `queuegen acl
/// render --server` asks a deployment's server).
fn features() -> acl::ServerCommands {
    queuegen_tests::acl::server_commands()
}

fn url(server: &RedisServer, role: Role) -> String {
    format!(
        "redis://{}:{}@127.0.0.1:{}/",
        acl::user_name(SERVICE, role),
        password(role),
        server.port()
    )
}

/// A server whose users are the generated ones (and the test's default user).
fn server_with_generated_users(dir: &Path) -> RedisServer {
    let users = rendered(&[]).replace(
        "user default off resetpass resetkeys resetchannels -@all",
        TEST_DEFAULT,
    );
    let path = dir.join("users.acl");
    std::fs::write(&path, users).unwrap();
    // DEBUG on, so that what refuses it below is the ACL, not the server.
    RedisServer::start_with(&[
        "--aclfile",
        path.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ])
}

fn queuegen(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(args)
        .args(["--redis", url])
        .env_remove("REDIS_URL")
        .output()
        .expect("queuegen runs")
}

fn succeeds(url: &str, args: &[&str]) -> String {
    let out = queuegen(url, args);
    assert!(
        out.status.success(),
        "queuegen {args:?} as {url}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

use queuegen_tests::acl::acl_log;

/// The retrying queue under the spec's own prefix, trimming every 200 ms so
/// a worker's in-process trim runs too, with admission on so producers read
/// the groups.
fn config() -> QueueConfig {
    let mut config = retrying_config(PREFIX);
    config.retention.trim_every = Duration::from_millis(200);
    config.admission.max_oldest_ready_age = Some(Duration::from_secs(3600));
    config
}

/// `ok-*` commit a result and are done, `retry` asks for one retry,
/// `dead` fails permanently.
#[derive(Clone)]
struct RoleHandler {
    results: RedisResults,
    done: Arc<Mutex<BTreeSet<String>>>,
}

impl Handler<TestJob> for RoleHandler {
    async fn handle(&self, job: TestJob, ctx: &JobContext) -> Result<Outcome, JobError> {
        match job.subject_ref.as_str() {
            "dead" => return Err(JobError::permanent("unreadable")),
            "retry" if ctx.attempt() == 1 => return Ok(Outcome::retry("once more")),
            _ => {}
        }
        self.results
            .commit("retrying", ctx.job_id(), b"ok")
            .await
            .map_err(JobError::transient)?;
        self.done.lock().unwrap().insert(ctx.job_id().to_owned());
        Ok(Outcome::Done)
    }
}

/// Each role runs all its operations through the runtime and the CLI, and
/// Redis logs no denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_does_its_work_with_only_its_generated_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_generated_users(dir.path());
    let mut admin = server.connection();
    let config = config();

    // Deployer: apply (library and groups).
    succeeds(
        &url(&server, Role::Deployer),
        &["apply", SPEC, "--queue", "retrying"],
    );
    let operator = url(&server, Role::Operator);

    // Producer: publish, one by one and a batch, through admission.
    let producer_redis = Redis::connect(url(&server, Role::Producer)).await.unwrap();
    let producer = Producer::<TestJob>::new(&producer_redis, config.clone());
    let job = |id: &str, subject: &str| NewJob::new(id, "acme", TestJob::new(subject, None));
    producer.publish(job("stalled", "ok")).await.unwrap();
    // A consumer that died holding `stalled`: the worker's recovery claims it.
    let stalled_partition = producer_redis_partition(&producer_redis, &config, "stalled").await;
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&["GROUP", &config.group, "ghost", "COUNT", "10", "STREAMS"])
        .arg(config.ready_key(stalled_partition))
        .arg(">")
        .query(&mut admin)
        .unwrap();
    producer
        .publish_many([job("ok-1", "ok"), job("ok-2", "ok"), job("retry", "retry")])
        .await
        .unwrap();
    producer.publish(job("dead", "dead")).await.unwrap();
    // With dedup: the library's publish_once, alone and in a batch.
    let deduplicating = Producer::<TestJob>::new(
        &producer_redis,
        QueueConfig {
            dedup: Some(DedupConfig {
                window: Duration::from_secs(60),
            }),
            ..config.clone()
        },
    );
    assert!(
        !deduplicating
            .publish(job("ok-3", "ok"))
            .await
            .unwrap()
            .duplicate
    );
    let again = deduplicating
        .publish_many([job("ok-3", "ok")])
        .await
        .unwrap();
    assert!(again[0].duplicate);
    // Delayed: the library's delay_schedule; the worker's scheduler promotes it.
    producer
        .publish_after(job("ok-4", "ok"), Duration::from_millis(300))
        .await
        .unwrap();

    // Worker: read, commit results, ack, retry and promote (retries and
    // the delayed job), dead-letter,
    // claim, trim in process, shut down.
    let worker_redis = Redis::connect(url(&server, Role::Worker)).await.unwrap();
    let handler = RoleHandler {
        results: RedisResults::new(&worker_redis, PREFIX, Duration::from_secs(600)),
        done: Arc::default(),
    };
    let done = handler.done.clone();
    let worker = Worker::new(&worker_redis, config.clone(), handler);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let expected: BTreeSet<String> = ["stalled", "ok-1", "ok-2", "retry", "ok-3", "ok-4"]
        .map(str::to_owned)
        .into();
    let finished = eventually(Duration::from_secs(20), || {
        let all = *done.lock().unwrap() == expected;
        async move { all }
    })
    .await;
    assert!(
        finished,
        "done only {:?}; denials:\n{}",
        done.lock().unwrap(),
        acl_log(&mut admin).join("\n")
    );
    // One more trim period so an in-process trim pass certainly ran.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert_eq!((report.dead_lettered, report.retried), (1, 1), "{report:?}");

    // Worker: the schedule loop (hint GET/SET, `schedule_tick`), with a
    // hint from an earlier run so that a missed tick is caught up too.
    let schedule = queuegen_runtime::Schedule {
        queue: config.clone(),
        cadence: queuegen_runtime::Cadence::Every(Duration::from_millis(500)),
        missed: queuegen_runtime::Missed::RunOnce,
        grace: Duration::from_millis(500),
        ..queuegen_tests::queues::jobs::TICK
    };
    let _: () = redis::cmd("SET")
        .arg(schedule.hint_key())
        .arg(1_000_000_000_000u64)
        .query(&mut admin)
        .unwrap();
    let scheduled = queuegen_runtime::Scheduler::new(&worker_redis, [schedule])
        .run_until(tokio::time::sleep(Duration::from_millis(1600)))
        .await
        .unwrap();
    assert!(
        scheduled.published >= 2 && scheduled.caught_up == 1,
        "{scheduled:?}; denials:\n{}",
        acl_log(&mut admin).join("\n")
    );

    // Worker: `run_settle` at a pipeline's join, as the first stage's job
    // and then its one child would: the second call publishes the join's
    // job and expires the run's keys.
    {
        use queuegen_runtime::functions::{command, Function, RunOutcome, RunSettle, RunSettled};
        let keys = config.run_keys(Partition::new(0), "pipe", "run-1");
        let envelope = vec!["job_id", "run-1/join", "type", "Join"];
        let first = RunSettle {
            run_key: &keys.run,
            out_key: &keys.out,
            settled_key: &keys.settled,
            ready_key: &keys.ready,
            runs_key: &keys.runs,
            pipeline: "pipe",
            run_id: "run-1",
            job_id: "run-1",
            outcome: RunOutcome::Done,
            counted: false,
            fails_run: false,
            result_ref: "",
            keep_ms: 60_000,
            children: &["child-1"],
            join_envelope: Some(&envelope),
        };
        let child = RunSettle {
            job_id: "child-1",
            counted: true,
            children: &[],
            join_envelope: None,
            ..first
        };
        let function = config.function(Function::RunSettle);
        let mut conn = worker_redis.shared();
        // A call of one job answers one reply.
        let opened: Vec<RunSettled> = command(&function, &first)
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|err| panic!("{err}; denials:\n{}", acl_log(&mut admin).join("\n")));
        assert_eq!(opened, [RunSettled::Settled { outstanding: 1 }]);
        let last: Vec<RunSettled> = command(&function, &child)
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|err| panic!("{err}; denials:\n{}", acl_log(&mut admin).join("\n")));
        assert!(
            matches!(last.as_slice(), [RunSettled::Published { .. }]),
            "{last:?}"
        );
    }

    // Worker: `consumers_prune` as a partition's leader calls it, removing
    // a consumer an old pod left (XINFO CONSUMERS, XGROUP DELCONSUMER and
    // INCRBY inside it); `status` below reads its count as either reader.
    {
        use queuegen_runtime::functions::{command, ConsumersPrune, Function};
        let stream = StreamSlot::new(0);
        let (ready_key, pruned_key) = (config.ready_key(stream), config.pruned_key(stream));
        let created: u64 = redis::cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg(&ready_key)
            .arg(&*config.group)
            .arg("old-pod")
            .query(&mut admin)
            .unwrap();
        assert_eq!(created, 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let prune = ConsumersPrune {
            ready_key: &ready_key,
            pruned_key: &pruned_key,
            group: &config.group,
            keep: "me",
            min_idle_ms: 10,
        };
        let removed: Vec<String> = command(&config.function(Function::ConsumersPrune), &prune)
            .query_async(&mut worker_redis.shared())
            .await
            .unwrap_or_else(|err| panic!("{err}; denials:\n{}", acl_log(&mut admin).join("\n")));
        assert!(removed.contains(&"old-pod".to_owned()), "{removed:?}");
    }

    // Operator and monitor: the read-only commands; the operator's changes.
    let monitor = url(&server, Role::Monitor);
    // The operator pauses a partition; both read it in `status`.
    succeeds(
        &operator,
        &["pause", SPEC, "--queue", "retrying", "--partition", "0"],
    );
    for who in [&operator, &monitor] {
        let status = succeeds(who, &["status", SPEC, "--queue", "retrying", "--json"]);
        assert!(status.contains("\"paused_partitions\":[0]"), "{status}");
        succeeds(who, &["pending", SPEC, "--queue", "retrying", "--json"]);
        let listed = succeeds(who, &["dlq", "list", SPEC, "--queue", "retrying", "--json"]);
        assert!(listed.contains("\"dead\""), "{listed}");
        // `runs`: the join's index of runs in flight; one run's keys (it
        // sends every read of a lookup, then finds no such run).
        let runs = succeeds(who, &["runs", SPEC, "--json"]);
        assert!(runs.contains("\"in_flight\""), "{runs}");
        let lookup = queuegen(who, &["runs", SPEC, "--run", "run-none"]);
        let stderr = String::from_utf8_lossy(&lookup.stderr);
        assert!(
            stderr.contains("no run \"run-none\" at any join"),
            "{stderr}"
        );
    }
    let exporter = ops_state::Monitor::start_for(SPEC, "retrying", &monitor, "3600");
    assert_eq!(exporter.get("/readyz", None).0, 200);
    drop(exporter);
    succeeds(
        &operator,
        &["dlq", "replay", SPEC, "--queue", "retrying", "--all"],
    );
    succeeds(&operator, &["trim", SPEC, "--queue", "retrying"]);
    succeeds(&operator, &["resume", SPEC, "--queue", "retrying"]);

    let denials = acl_log(&mut admin);
    assert!(
        denials.is_empty(),
        "a code path sent a command (or touched a key) its role lacks; add it to \
         runtime/src/roles.rs:\n{}",
        denials.join("\n")
    );
}

/// The partition a job of this config lands in (read back from the stream).
async fn producer_redis_partition(redis: &Redis, config: &QueueConfig, job_id: &str) -> StreamSlot {
    let mut conn = redis.shared();
    for partition in Partition::all(config.partitions) {
        let stream = partition.default_stream();
        let entries = support::stream_entries(&mut conn, &config.ready_key(stream)).await;
        let found = entries
            .iter()
            .any(|(_, fields)| fields.get("job_id").map(String::as_str) == Some(job_id));
        if found {
            return stream;
        }
    }
    panic!("{job_id} is in no partition of {}", config.queue);
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_owned()).collect()
}

/// What no role may do: administration, other services' keys, functions
/// outside the role, scripts, loading code, replacing or removing a stream.
#[test]
fn every_role_is_refused_what_it_is_not_for() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_generated_users(dir.path());
    let library = acl::libraries(SERVICE)[0].clone();
    let mut admin = server.connection();
    let _: () = redis::cmd("SET")
        .arg("other-service:key")
        .arg("x")
        .query(&mut admin)
        .unwrap();

    for role in Role::ALL {
        let client = redis::Client::open(url(&server, role)).unwrap();
        let mut conn = client.get_connection().unwrap();
        let foreign_function = match role {
            Role::Worker => "replay",
            _ => "ack",
        };
        let attempts: Vec<Vec<String>> = [
            vec!["FLUSHALL"],
            vec!["FLUSHDB"],
            vec!["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
            vec!["KEYS", "*"],
            vec!["DEBUG", "SLEEP", "0"],
            vec!["FUNCTION", "DELETE", &library],
            vec!["SHUTDOWN", "NOSAVE"],
            vec!["ACL", "SETUSER", "mallory", "on", "+@all"],
            vec!["GET", "other-service:key"],
            vec!["SET", "other-service:key", "y"],
            vec!["XADD", "other-service:{q-00}:ready", "*", "k", "v"],
            vec![
                "FCALL",
                &format!("{library}_{foreign_function}"),
                "1",
                &format!("{PREFIX}:{{retrying-00}}:ready"),
            ],
        ]
        .into_iter()
        .map(|words| words.into_iter().map(str::to_owned).collect())
        .collect();
        // Nobody runs a script of its own, and nobody but the deployer
        // loads code every worker then runs.
        let mut attempts = attempts;
        attempts.push(strings(&["EVAL", "return 1", "0"]));
        if role != Role::Deployer {
            attempts.push(strings(&[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                "#!lua name=mallory\nredis.register_function('x', function() return 1 end)",
            ]));
        }
        // Only the operator announces a pause, on its own service's channel;
        // the worker may only listen (`SUBSCRIBE` is tried in the worker's run).
        let own_channel = format!("{PREFIX}:{{retrying}}:paused");
        attempts.push(strings(&["PUBLISH", "other-service:{q}:paused", "x"]));
        if role != Role::Operator {
            attempts.push(strings(&["PUBLISH", &own_channel, "x"]));
        }
        // No role may replace or remove a stream or a retry set: SET, DEL,
        // GETDEL and PEXPIRE reach only markers, leases, results and flags.
        let ready = format!("{PREFIX}:{{retrying-00}}:ready");
        let retry = format!("{PREFIX}:{{retrying-00}}:retry");
        for key in [&ready, &retry] {
            attempts.push(strings(&["SET", key, "x"]));
            attempts.push(strings(&["DEL", key]));
            attempts.push(strings(&["GETDEL", key]));
            attempts.push(strings(&["PEXPIRE", key, "1"]));
        }
        for words in attempts {
            let reply: redis::RedisResult<redis::Value> =
                redis::cmd(&words[0]).arg(&words[1..]).query(&mut conn);
            let refused = reply
                .as_ref()
                .err()
                .is_some_and(|err| err.to_string().to_lowercase().contains("noperm"));
            assert!(refused, "{} ran {words:?}: {reply:?}", role.name());
        }
    }
    // The monitor writes nothing of its own service either.
    let client = redis::Client::open(url(&server, Role::Monitor)).unwrap();
    let mut monitor = client.get_connection().unwrap();
    let reply: redis::RedisResult<()> = redis::cmd("SET")
        .arg(format!("{PREFIX}:{{retrying-00}}:ready"))
        .arg("x")
        .query(&mut monitor);
    assert!(reply
        .unwrap_err()
        .to_string()
        .to_lowercase()
        .contains("noperm"));
    let untouched: String = redis::cmd("GET")
        .arg("other-service:key")
        .query(&mut admin)
        .unwrap();
    assert_eq!(untouched, "x");
}

/// The file exactly as rendered (default user off), plus an administrator
/// given with `--extra`, loads: the roles log in, nobody connects unnamed.
#[test]
fn the_rendered_file_loads_and_switches_the_default_user_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_generated_users(dir.path());
    let extra_path: PathBuf = dir.path().join("admins.acl");
    std::fs::write(
        &extra_path,
        "# ours\nuser admin on >adminSecret ~* &* +@all\n",
    )
    .unwrap();

    // Through the CLI, as a deploy would: passwords from the environment.
    let generated = dir.path().join("generated.acl");
    std::fs::write(
        &generated,
        acl::generate(&spec(), "queues.yaml").unwrap().contents,
    )
    .unwrap();
    let mut render = Command::new(env!("CARGO_BIN_EXE_queuegen"));
    render
        .args(["acl", "render"])
        .arg(&generated)
        .arg("--extra")
        .arg(&extra_path);
    render.arg("--out").arg(dir.path().join("users.acl"));
    // Asked of the server, as a deploy does.
    render.arg("--server").arg(server.url());
    for role in Role::ALL {
        render.env(acl::password_variable(SERVICE, role), password(role));
    }
    let out = render.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(dir.path().join("users.acl"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );

    let mut conn = server.connection();
    let _: () = redis::cmd("ACL").arg("LOAD").query(&mut conn).unwrap();
    let unnamed = redis::Client::open(server.url()).unwrap().get_connection();
    let refused = match unnamed {
        Err(err) => err.to_string(),
        Ok(mut conn) => redis::cmd("PING")
            .query::<String>(&mut conn)
            .unwrap_err()
            .to_string(),
    };
    assert!(
        refused.contains("NOAUTH") || refused.contains("WRONGPASS"),
        "{refused}"
    );
    for role in Role::ALL {
        let mut conn = redis::Client::open(url(&server, role))
            .unwrap()
            .get_connection()
            .unwrap();
        let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
        assert_eq!(pong, "PONG", "{}", role.name());
    }
    let admin = format!("redis://admin:adminSecret@127.0.0.1:{}/", server.port());
    let mut conn = redis::Client::open(admin)
        .unwrap()
        .get_connection()
        .unwrap();
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut conn).unwrap();
    assert_eq!(users.len(), Role::ALL.len() + 2, "{users:?}");

    // Without the passwords, rendering fails naming the variable.
    let out = Command::new(env!("CARGO_BIN_EXE_queuegen"))
        .args(["acl", "render", "--server-has", "none"])
        .arg(&generated)
        .env_remove(acl::password_variable(SERVICE, Role::Producer))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("QUEUEGEN_TESTS_PRODUCER_PASSWORD"),
        "{stderr}"
    );
}
