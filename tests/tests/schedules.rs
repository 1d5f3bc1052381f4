//! Periodic jobs on real redis-servers: `schedule_tick` publishes a tick once and refuses bad keys writing nothing; three `schedule-worker` processes publish every tick of a 1 s schedule exactly once, also when one is killed with SIGKILL; `missed: skip` and `run_once` after a 5 s outage; processes killed with SIGKILL at the crash points before and after `schedule_tick`; two schedulers on a Cluster.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuegen_runtime::error::TransitionError;
use queuegen_runtime::functions::Function;
use queuegen_runtime::schedule::job_id;
use queuegen_runtime::transitions::TransitionCode;
use queuegen_runtime::{
    transitions, Error, MarkerKind, Missed, Partition, Redis, Scheduler, SchedulerReport,
    StreamSlot,
};
use queuegen_tests::library;
use queuegen_tests::schedules::{jobs_by_id, TestSchedule, TickJob, SCHEDULE_ENV};
use queuegen_tests::support::unique_prefix;
use queuegen_tests::RedisServer;

const SECOND: u64 = 1000;
/// The outage tests' grace.
const GRACE_MS: u64 = 2000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn test_schedule(
    server: &RedisServer,
    name: &str,
    grace: Duration,
    missed: Missed,
) -> TestSchedule {
    TestSchedule {
        url: server.url(),
        prefix: unique_prefix(name),
        name: name.to_owned(),
        every: Duration::from_secs(1),
        grace,
        missed,
    }
}

async fn started(server: &RedisServer) -> Redis {
    let redis = Redis::connect(server.url()).await.unwrap();
    library::load(&redis).await;
    redis
}

/// A `schedule-worker` process.
struct Process {
    child: tokio::process::Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Process {
    fn spawn(schedule: &TestSchedule) -> Process {
        Process::spawn_dying_at(schedule, None)
    }

    /// With `failpoint`, it dies with SIGKILL the first time it reaches it.
    fn spawn_dying_at(schedule: &TestSchedule, failpoint: Option<&str>) -> Process {
        let dir = tempfile::Builder::new()
            .prefix("queuegen-schedule-worker-")
            .tempdir()
            .unwrap();
        let log = dir.path().join("worker.log");
        let file = std::fs::File::create(&log).unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_schedule-worker"));
        command.env_remove(queuegen_runtime::failpoint::ENV);
        if let Some(point) = failpoint {
            command.env(queuegen_runtime::failpoint::ENV, point);
        }
        let child = command
            .env(SCHEDULE_ENV, schedule.to_env())
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning schedule-worker");
        Process {
            child,
            log,
            _dir: dir,
        }
    }

    /// Waits for it to end by itself; whether SIGKILL ended it.
    async fn died_by_sigkill(&mut self, timeout: Duration) -> bool {
        use std::os::unix::process::ExitStatusExt;
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .expect("the process ends")
            .unwrap();
        status.signal() == Some(9)
    }

    async fn kill9(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    /// SIGTERM, then its report line.
    async fn stop(mut self) -> String {
        let pid = self.child.id().unwrap();
        assert!(std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success());
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the worker stops within 10 s of SIGTERM")
            .unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "schedule-worker failed: {log}");
        log
    }
}

/// Asserts that every tick in `[first, last]` was published exactly once,
/// nothing outside it, and that the ticks spread over more than one partition.
fn assert_every_tick_once(
    jobs: &BTreeMap<String, Vec<TickJob>>,
    name: &str,
    first: u64,
    last: u64,
) {
    let doubled: Vec<_> = jobs.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(doubled.is_empty(), "ticks published twice: {doubled:?}");
    let mut missing = Vec::new();
    let mut tick = first;
    while tick <= last {
        if !jobs.contains_key(&job_id(name, tick)) {
            missing.push(job_id(name, tick));
        }
        tick += SECOND;
    }
    assert!(
        missing.is_empty(),
        "ticks lost: {missing:?} (published: {:?})",
        jobs.keys()
    );
    let partitions: std::collections::BTreeSet<Partition> =
        jobs.values().flatten().map(|j| j.partition).collect();
    assert!(
        partitions.len() > 1,
        "the ticks went to one partition: {partitions:?}"
    );
}

#[tokio::test]
async fn schedule_tick_publishes_once_and_refuses_bad_keys_writing_nothing() {
    let server = RedisServer::start();
    let redis = started(&server).await;
    let mut conn = redis.shared();
    let schedule =
        test_schedule(&server, "tick-fn", Duration::from_secs(1), Missed::Skip).schedule();
    let config = schedule.queue.clone();
    let tick = 1_800_000_000_000;

    let first = schedule.publish(&mut conn, tick).await.unwrap();
    assert!(!first.already);
    let again = schedule.publish(&mut conn, tick).await.unwrap();
    assert!(again.already, "{again:?}");
    assert_eq!(
        again.id, first.id,
        "a re-run answers the first publish's ID"
    );
    let jobs = jobs_by_id(
        &mut server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap(),
        &config,
    )
    .await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[&job_id("tick-fn", tick)].len(), 1);
    // The tick's stream: its partition's, in the default lane.
    let partition = jobs[&job_id("tick-fn", tick)][0].partition.default_stream();
    let fields = schedule.fields(tick);

    // A marker of another partition (another hash tag), a marker of another
    // tick, another kind: each refused before the first write.
    let other = StreamSlot::new((partition.index() + 1) % config.partitions);
    let marker_id = format!("tick-fn:{}", tick + SECOND);
    let bad_keys = [
        vec![
            config.ready_key(partition),
            config.marker_key(other, MarkerKind::Tick, &marker_id),
        ],
        vec![
            config.ready_key(partition),
            config.marker_key(partition, MarkerKind::Tick, "tick-fn:1"),
        ],
        vec![
            config.ready_key(partition),
            config.marker_key(partition, MarkerKind::Replay, &marker_id),
        ],
        vec![
            config.dead_key(partition),
            config.marker_key(partition, MarkerKind::Tick, &marker_id),
        ],
    ];
    let mut raw = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for keys in bad_keys {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(config.function(Function::ScheduleTick))
            .arg(2)
            .arg(&keys);
        cmd.arg("tick-fn").arg(tick + SECOND).arg(60_000);
        for (name, value) in &fields {
            cmd.arg(*name).arg(value);
        }
        let err = cmd.query_async::<redis::Value>(&mut raw).await.unwrap_err();
        assert!(err.to_string().contains("QG_BADARG"), "{keys:?}: {err}");
    }
    // A marker key of the wrong type.
    let wrong = config.marker_key(partition, MarkerKind::Tick, &marker_id);
    let _: () = redis::cmd("HSET")
        .arg(&wrong)
        .arg("a")
        .arg("b")
        .query_async(&mut raw)
        .await
        .unwrap();
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(config.function(Function::ScheduleTick))
        .arg(2)
        .arg(config.ready_key(partition))
        .arg(&wrong);
    cmd.arg("tick-fn").arg(tick + SECOND).arg(60_000);
    for (name, value) in &fields {
        cmd.arg(*name).arg(value);
    }
    let err = cmd.query_async::<redis::Value>(&mut raw).await.unwrap_err();
    assert!(err.to_string().contains("QG_WRONGTYPE"), "{err}");
    // An envelope without job_id, an odd field list, a bad tick.
    let marker = config.marker_key(
        partition,
        MarkerKind::Tick,
        &format!("tick-fn:{}", tick + 2 * SECOND),
    );
    for (argv, code) in [
        (
            vec![
                "tick-fn".to_owned(),
                (tick + 2 * SECOND).to_string(),
                "60000".into(),
                "type".into(),
                "TestJob".into(),
            ],
            "QG_BADENVELOPE",
        ),
        (
            vec![
                "tick-fn".to_owned(),
                (tick + 2 * SECOND).to_string(),
                "60000".into(),
                "job_id".into(),
            ],
            "QG_BADARG",
        ),
        (
            vec![
                "tick-fn".to_owned(),
                "soon".into(),
                "60000".into(),
                "job_id".into(),
                "x".into(),
            ],
            "QG_BADARG",
        ),
        (
            vec![
                "tick-fn".to_owned(),
                (tick + 2 * SECOND).to_string(),
                "0".into(),
                "job_id".into(),
                "x".into(),
            ],
            "QG_BADARG",
        ),
    ] {
        let err = redis::cmd("FCALL")
            .arg(config.function(Function::ScheduleTick))
            .arg(2)
            .arg(config.ready_key(partition))
            .arg(&marker)
            .arg(&argv)
            .query_async::<redis::Value>(&mut raw)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(code), "{argv:?}: {err}");
    }
    // Nothing was written by any refusal: one job, one marker.
    let after = jobs_by_id(&mut raw, &config).await;
    assert_eq!(after.len(), 1, "{after:?}");
    let markers: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*marker:tick:*", config.key_prefix))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(
        markers.len(),
        2,
        "the first tick's marker and the HSET: {markers:?}"
    );

    // Through the typed call: the refusal names the code.
    let err = transitions::schedule_tick(
        &mut conn,
        &config,
        partition,
        "tick-fn",
        tick + SECOND,
        &fields,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Transition(TransitionError::Refused {
                code: TransitionCode::WrongType,
                ..
            })
        ),
        "{err}"
    );

    // The job decodes as the queue's envelope.
    let entries =
        queuegen_tests::support::stream_entries(&mut raw, &config.ready_key(partition)).await;
    let (_, fields) = &entries[0];
    assert_eq!(fields["created_at"], "2027-01-15T08:00:00.000Z");
    assert_eq!(fields["type"], "TestJob");
    assert_eq!(fields["subject_ref"], "tick");
}

/// Runs three `schedule-worker` processes of a 1 s schedule for 10 s; with
/// `kill_one`, SIGKILLs one of them 5 s in. Every tick from the first
/// second after they started until just before they stopped is published
/// exactly once.
async fn three_processes(name: &str, kill_one: bool) {
    let server = RedisServer::start();
    let redis = started(&server).await;
    let spec = test_schedule(&server, name, Duration::from_millis(2500), Missed::Skip);
    // The run starts when all three are connected (a loaded machine may
    // take a while to start them).
    let watch = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let clients = || {
        let mut watch = watch.clone();
        async move {
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut watch)
                .await
                .unwrap();
            list.lines().count()
        }
    };
    let before = clients().await;
    let mut processes: Vec<Process> = (0..3).map(|_| Process::spawn(&spec)).collect();
    let all_up = queuegen_tests::support::eventually(Duration::from_secs(30), || async {
        clients().await >= before + 3
    })
    .await;
    assert!(all_up, "three schedule-worker processes connected");
    let started_at = now_ms();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let killed = if kill_one {
        let mut victim = processes.remove(1);
        victim.kill9().await;
        Some(victim)
    } else {
        None
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stopping_at = now_ms();
    let mut reports = Vec::new();
    for process in processes {
        reports.push(process.stop().await);
    }
    drop(killed);
    drop(redis);
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let jobs = jobs_by_id(&mut conn, &spec.queue()).await;
    // Ticks from the first whole second after all three were up to a
    // second before the stop.
    let first = (started_at / SECOND + 1) * SECOND;
    let last = (stopping_at / SECOND - 1) * SECOND;
    assert!(last - first >= 8 * SECOND, "ran {first}..{last}");
    assert_every_tick_once(&jobs, name, first, last);
    // Nothing older than the start either: no tick before it counts as missed.
    let earliest = jobs.keys().min().unwrap().clone();
    assert!(
        earliest >= job_id(name, (started_at / SECOND - 3) * SECOND),
        "{earliest}"
    );
    // The processes raced for the ticks: each handled most of them
    // (published, or found published by another: its marker), and
    // without a kill their publishes add up to the jobs in the streams.
    let counts: Vec<(u64, u64)> = reports
        .iter()
        .map(|report| (count_of(report, "published"), count_of(report, "already")))
        .collect();
    for (report, (published, already)) in reports.iter().zip(&counts) {
        assert!(published + already >= 5, "{report}");
    }
    if !kill_one {
        let total: u64 = counts.iter().map(|(published, _)| published).sum();
        assert_eq!(total, jobs.len() as u64, "{counts:?}");
    }
}

/// `published: 3` of a `SchedulerReport { .. }` line in a worker's output.
fn count_of(output: &str, name: &str) -> u64 {
    let line = output
        .lines()
        .find(|line| line.starts_with("SchedulerReport"))
        .unwrap_or_else(|| panic!("no report in {output}"));
    let at = line.find(&format!("{name}: ")).unwrap() + name.len() + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn three_processes_publish_each_tick_of_a_1s_schedule_once() {
    three_processes("three", false).await;
}

#[tokio::test]
async fn a_process_killed_mid_run_loses_and_doubles_no_tick() {
    three_processes("killed", true).await;
}

/// Runs a scheduler in this process for `secs`.
async fn run_for(redis: &Redis, spec: &TestSchedule, secs: u64) -> SchedulerReport {
    Scheduler::new(redis, [spec.schedule()])
        .run_until(tokio::time::sleep(Duration::from_secs(secs)))
        .await
        .unwrap()
}

/// A 1 s schedule with a 2 s grace runs 3 s, no scheduler runs for 5 s,
/// then one runs 4 s again. Returns the jobs, the report after the outage
/// and the ticks around the outage.
async fn outage(
    name: &str,
    missed: Missed,
) -> (
    BTreeMap<String, Vec<TickJob>>,
    SchedulerReport,
    TestSchedule,
) {
    let server = RedisServer::start();
    let redis = started(&server).await;
    let spec = test_schedule(&server, name, Duration::from_millis(GRACE_MS), missed);
    let before = run_for(&redis, &spec, 3).await;
    assert!(before.published >= 2, "{before:?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = run_for(&redis, &spec, 4).await;
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (jobs_by_id(&mut conn, &spec.queue()).await, after, spec)
}

/// The published ticks in order, with how late each was published (ms).
fn ticks_and_delays(jobs: &BTreeMap<String, Vec<TickJob>>, name: &str) -> Vec<(u64, u64)> {
    let mut ticks: Vec<(u64, u64)> = jobs
        .iter()
        .map(|(id, v)| {
            assert_eq!(v.len(), 1, "{id} published {} times", v.len());
            let at = id.strip_prefix(&format!("{name}@")).unwrap();
            let tick = chrono_free_parse(at);
            (tick, v[0].stream_ms.saturating_sub(tick))
        })
        .collect();
    ticks.sort();
    ticks
}

/// `2026-12-05T07:31:12.000Z` -> Unix ms, through the job_id's own formatter.
fn chrono_free_parse(text: &str) -> u64 {
    // Ticks are whole seconds near now: search the formatter's inverse.
    let now = now_ms() / SECOND * SECOND;
    (0..600)
        .map(|back| now - back * SECOND)
        .find(|t| queuegen_runtime::schedule::format_tick(*t) == text)
        .unwrap_or_else(|| panic!("{text} is not a tick of the last 10 minutes"))
}

/// The gaps between consecutive published ticks: (last before, first after).
fn gaps(ticks: &[(u64, u64)]) -> Vec<(u64, u64)> {
    ticks
        .windows(2)
        .filter(|w| w[1].0 - w[0].0 > SECOND)
        .map(|w| (w[0].0, w[1].0))
        .collect()
}

#[tokio::test]
async fn missed_skip_publishes_nothing_of_an_outage_older_than_the_grace() {
    let (jobs, after, _) = outage("skip", Missed::Skip).await;
    let ticks = ticks_and_delays(&jobs, "skip");
    let gaps = gaps(&ticks);
    assert_eq!(gaps.len(), 1, "one gap, the outage: {ticks:?}");
    let (before, resumed) = gaps[0];
    assert!(
        resumed - before >= 3 * SECOND,
        "at least two ticks skipped: {ticks:?}"
    );
    assert_eq!(after.skipped, 1, "{after:?}");
    assert_eq!(after.caught_up, 0, "{after:?}");
    // Nothing was published late: every job within the grace (and scheduling slack).
    let late: Vec<_> = ticks
        .iter()
        .filter(|(_, delay)| *delay > GRACE_MS + 500)
        .collect();
    assert!(late.is_empty(), "published late under skip: {late:?}");
}

#[tokio::test]
async fn missed_run_once_publishes_the_latest_missed_tick_once() {
    let (jobs, after, _) = outage("once", Missed::RunOnce).await;
    let ticks = ticks_and_delays(&jobs, "once");
    let gaps = gaps(&ticks);
    assert_eq!(gaps.len(), 1, "one gap, the outage: {ticks:?}");
    let (before, resumed) = gaps[0];
    assert!(
        resumed - before >= 2 * SECOND,
        "older missed ticks not published: {ticks:?}"
    );
    assert_eq!(after.caught_up, 1, "{after:?}");
    assert_eq!(after.skipped, 0, "{after:?}");
    // The first tick after the gap is the caught-up one: published more
    // than the grace after its time; every later one on time.
    let resumed_delay = ticks.iter().find(|(t, _)| *t == resumed).unwrap().1;
    assert!(
        resumed_delay > GRACE_MS,
        "the caught-up tick was published {resumed_delay} ms late: {ticks:?}"
    );
    let late_others: Vec<_> = ticks
        .iter()
        .filter(|(t, delay)| *t != resumed && *delay > GRACE_MS + 500)
        .collect();
    assert!(
        late_others.is_empty(),
        "only the missed tick is late: {late_others:?}"
    );
}

/// On a Cluster each partition is its own slot: two schedulers publish a
/// 1 s schedule's ticks into partitions on different primaries (the
/// function's keys routed by slot, the hint key by its own), each once.
#[tokio::test]
async fn on_a_cluster_two_schedulers_publish_each_tick_once_across_slots() {
    let cluster = queuegen_tests::RedisCluster::start();
    let redis = Redis::connect(cluster.url()).await.unwrap();
    assert!(redis.is_cluster());
    library::load(&redis).await;
    let spec = TestSchedule {
        url: cluster.url(),
        prefix: unique_prefix("cluster"),
        name: "cluster".to_owned(),
        every: Duration::from_secs(1),
        grace: Duration::from_secs(2),
        missed: Missed::Skip,
    };
    let other = Redis::connect(cluster.url()).await.unwrap();
    let started_at = now_ms();
    let (a, b) = tokio::join!(
        Scheduler::new(&redis, [spec.schedule()])
            .run_until(tokio::time::sleep(Duration::from_secs(5))),
        Scheduler::new(&other, [spec.schedule()])
            .run_until(tokio::time::sleep(Duration::from_secs(5))),
    );
    let stopped_at = now_ms();
    let (a, b) = (a.unwrap(), b.unwrap());
    let jobs = jobs_by_id(&mut redis.shared(), &spec.queue()).await;
    assert_every_tick_once(
        &jobs,
        "cluster",
        (started_at / SECOND + 1) * SECOND,
        (stopped_at / SECOND - 1) * SECOND,
    );
    assert_eq!(a.published + b.published, jobs.len() as u64, "{a:?} {b:?}");
    let hint: Option<u64> = redis::cmd("GET")
        .arg(spec.schedule().hint_key())
        .query_async(&mut redis.shared())
        .await
        .unwrap();
    assert!(
        hint.is_some_and(|h| h + 2 * SECOND >= stopped_at),
        "{hint:?}"
    );
}

/// Two of three processes die with SIGKILL at the crash points around
/// their first `schedule_tick`: one before the call, one after it published
/// (entry and marker written, the hint not yet). The third goes on; no
/// tick is lost or published twice.
#[tokio::test]
async fn processes_killed_around_schedule_tick_lose_and_double_no_tick() {
    let server = RedisServer::start();
    let redis = started(&server).await;
    let spec = test_schedule(&server, "points", Duration::from_millis(2500), Missed::Skip);
    // The survivor first, until it has published: the range checked starts
    // there, so a slow start on a loaded machine is not a lost tick.
    let survivor = Process::spawn(&spec);
    let mut watch = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let config = spec.queue();
    let up = queuegen_tests::support::eventually(Duration::from_secs(30), || {
        let mut watch = watch.clone();
        let config = config.clone();
        async move { !jobs_by_id(&mut watch, &config).await.is_empty() }
    })
    .await;
    assert!(up, "the survivor published");
    let started_at = now_ms();
    let mut before = Process::spawn_dying_at(&spec, Some("before_schedule_tick"));
    let mut after = Process::spawn_dying_at(&spec, Some("after_schedule_tick"));
    assert!(
        before.died_by_sigkill(Duration::from_secs(30)).await,
        "died at before_schedule_tick"
    );
    assert!(
        after.died_by_sigkill(Duration::from_secs(60)).await,
        "died at after_schedule_tick"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stopping_at = now_ms();
    let report = survivor.stop().await;
    drop(redis);
    let jobs = jobs_by_id(&mut watch, &spec.queue()).await;
    // From the first tick after the survivor was up, across both kills, to
    // a second before the stop.
    let first = (started_at / SECOND + 1) * SECOND;
    let last = (stopping_at / SECOND - 1) * SECOND;
    assert!(last - first >= 3 * SECOND, "ran {first}..{last}");
    assert_every_tick_once(&jobs, "points", first, last);
    assert!(count_of(&report, "published") > 0, "{report}");
}
