//! The library's `run_settle` (docs/functions.md) on a real server: the pipeline simulation of `queuegen/tests/pipeline_sim` run against it, and its refusals, repeats and ends one by one.

#[path = "../../queuegen/tests/pipeline_sim/mod.rs"]
mod pipeline_sim;

/// Calls of several jobs, checked against calls of one.
#[path = "run_settle/batch.rs"]
mod batch;

use std::collections::BTreeMap;

use pipeline_sim::{join_job, simulate, spec_of, JoinView, Joins, Settle, Status, RUN};
use queuegen::gen::functions::{render_library, LIBRARY_VERSION};
use queuegen::gen::runtime_config::queue_config;
use queuegen::spec::model::Spec;
use queuegen_runtime::config::RunKeys;
use queuegen_runtime::functions::{command, Function, RunOutcome, RunSettle, RunSettled};
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::{Partition, QueueConfig};
use queuegen_tests::support::{keyspace, unique_prefix};
use queuegen_tests::RedisServer;

/// The simulation's pipeline name (`pipeline_sim::random_spec`).
const PIPELINE: &str = "sim";
/// Seeds run against the server; the in-memory model runs 2,000.
const SEEDS: u64 = 300;
const KEEP_MS: u64 = 60_000;

/// A server with the library of the simulation's service loaded.
fn server() -> (RedisServer, redis::Connection, String) {
    let server = RedisServer::start();
    let mut conn = server.client().get_connection().expect("a connection");
    let (spec, _) = spec_of(0);
    let code = render_library(&spec, "sim.yaml", LIBRARY_VERSION).expect("the library renders");
    let library: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&code)
        .query(&mut conn)
        .expect("the library loads");
    (server, conn, library)
}

/// The joins of one run, kept by `run_settle`.
struct OnServer<'a> {
    conn: &'a mut redis::Connection,
    spec: Spec,
    prefix: String,
    function: String,
}

impl OnServer<'_> {
    fn config(&self, join: &str) -> QueueConfig {
        let mut config = queue_config(&self.spec, self.spec.queue(join).expect("a queue"));
        config.key_prefix = self.prefix.clone().into();
        config
    }

    fn keys(&self, join: &str) -> RunKeys {
        let config = self.config(join);
        config.run_keys(run_partition(&config, RUN), PIPELINE, RUN)
    }
}

impl Joins for OnServer<'_> {
    fn settle(&mut self, join: &str, call: Settle<'_>) -> (Status, bool) {
        let keys = self.keys(join);
        let children: Vec<&str> = call.children.iter().map(String::as_str).collect();
        let join_id = join_job(join);
        let envelope = vec!["job_id", join_id.as_str(), "type", "Job"];
        let settle = RunSettle {
            run_key: &keys.run,
            out_key: &keys.out,
            settled_key: &keys.settled,
            ready_key: &keys.ready,
            runs_key: &keys.runs,
            pipeline: PIPELINE,
            run_id: RUN,
            job_id: call.job,
            outcome: if call.dead {
                RunOutcome::Dead
            } else {
                RunOutcome::Done
            },
            counted: call.counted,
            fails_run: call.fails_run,
            result_ref: if call.dead { "" } else { call.job },
            keep_ms: KEEP_MS,
            children: &children,
            join_envelope: call.first.then_some(&envelope),
        };
        let replies: Vec<RunSettled> = command(&self.function, &settle)
            .query(self.conn)
            .unwrap_or_else(|err| panic!("run_settle at {join}: {err}"));
        match one_reply(replies) {
            RunSettled::Settled { .. } | RunSettled::Already => (Status::Open, false),
            RunSettled::Published { .. } => (Status::Published, true),
            RunSettled::Failed => (Status::Failed, false),
            RunSettled::Ended { failed: true } => (Status::Failed, false),
            RunSettled::Ended { failed: false } => (Status::Published, false),
        }
    }

    fn view(&mut self, join: &str) -> JoinView {
        let keys = self.keys(join);
        let (opened, status): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(&keys.run)
            .arg("opened")
            .arg("status")
            .query(self.conn)
            .unwrap();
        let published: u32 = redis::cmd("XLEN")
            .arg(&keys.ready)
            .query(self.conn)
            .unwrap();
        let settled: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys.settled)
            .query(self.conn)
            .unwrap();
        let summary = settled
            .into_iter()
            .filter(|(_, record)| record != "-")
            .map(|(id, record)| {
                // A done job's record names its result, here its own ID.
                if record != "dead" {
                    assert_eq!(record, format!("done:{id}"));
                }
                (id, record == "dead")
            })
            .collect();
        JoinView {
            opened: opened.as_deref() == Some("1"),
            status: match status.as_deref() {
                None => Status::Open,
                Some("published") => Status::Published,
                Some("failed") => Status::Failed,
                Some(other) => panic!("unknown status {other}"),
            },
            published,
            summary,
        }
    }
}

#[test]
fn every_join_of_every_simulated_run_ends_once_with_the_right_summary() {
    let (_server, mut conn, library) = server();
    let function = Function::RunSettle.in_library(&library);
    for seed in 0..SEEDS {
        let (spec, _) = spec_of(seed);
        simulate(
            seed,
            OnServer {
                conn: &mut conn,
                spec,
                prefix: unique_prefix("run"),
                function: function.clone(),
            },
        );
    }
}

/// One join `j` of a two-stage pipeline, for the calls one by one.
struct Single {
    conn: redis::Connection,
    function: String,
    keys: RunKeys,
    /// The ready stream of the queue's other partition (it has two).
    other_ready: String,
    _server: RedisServer,
}

impl Single {
    fn start() -> Single {
        let (server, conn, library) = server();
        let (spec, _) = spec_of(0);
        let queue = &spec.queues[0];
        let mut config = queue_config(&spec, queue);
        config.key_prefix = unique_prefix("one").into();
        let partition = run_partition(&config, RUN);
        let other = Partition::all(config.partitions)
            .find(|p| *p != partition)
            .expect("two partitions");
        Single {
            keys: config.run_keys(partition, PIPELINE, RUN),
            other_ready: config.ready_key(other.default_stream()),
            conn,
            function: Function::RunSettle.in_library(&library),
            _server: server,
        }
    }

    fn call(&mut self, settle: &RunSettle<'_, Vec<&str>>) -> redis::RedisResult<RunSettled> {
        command(&self.function, settle)
            .query(&mut self.conn)
            .map(one_reply)
    }

    /// `ZCARD` or `XLEN` of `key`.
    fn count(&mut self, command: &str, key: &str) -> u64 {
        redis::cmd(command).arg(key).query(&mut self.conn).unwrap()
    }
}

/// A refusal as `<code> <detail>`, for the start of its text to be compared.
fn refusal(err: &redis::RedisError) -> String {
    format!(
        "{} {}",
        err.code().unwrap_or(""),
        err.detail().unwrap_or("")
    )
}

/// The one reply of a call of one job.
fn one_reply(replies: Vec<RunSettled>) -> RunSettled {
    let [reply] = <[RunSettled; 1]>::try_from(replies)
        .unwrap_or_else(|replies| panic!("one reply for one job, got {replies:?}"));
    reply
}

/// A settle of `job` (done, counted, not first) with `children`.
fn settle<'a>(
    keys: &'a RunKeys,
    job: &'a str,
    children: &'a [&'a str],
) -> RunSettle<'a, Vec<&'a str>> {
    RunSettle {
        run_key: &keys.run,
        out_key: &keys.out,
        settled_key: &keys.settled,
        ready_key: &keys.ready,
        runs_key: &keys.runs,
        pipeline: PIPELINE,
        run_id: RUN,
        job_id: job,
        outcome: RunOutcome::Done,
        counted: true,
        fails_run: false,
        result_ref: "",
        keep_ms: KEEP_MS,
        children,
        join_envelope: None,
    }
}

fn envelope() -> Vec<&'static str> {
    vec!["job_id", "r/j", "type", "Job"]
}

/// The first stage's job opening the run with `children` and the join's
/// `envelope` (the first stage is not one the join waits for).
fn opening<'a>(
    keys: &'a RunKeys,
    children: &'a [&'a str],
    envelope: &'a Vec<&'a str>,
) -> RunSettle<'a, Vec<&'a str>> {
    RunSettle {
        counted: false,
        join_envelope: Some(envelope),
        ..settle(keys, RUN, children)
    }
}

#[test]
fn a_join_is_published_once_when_the_last_job_it_waits_for_settles() {
    let mut one = Single::start();
    let keys = one.keys.clone();
    let children = ["c1", "c2"];
    // c2 ends before its parent has settled: it must not count as outstanding.
    let early = settle(&keys, "c2", &[]);
    assert_eq!(
        one.call(&early).unwrap(),
        RunSettled::Settled { outstanding: 0 }
    );
    let join_envelope = envelope();
    let first = opening(&keys, &children, &join_envelope);
    assert_eq!(
        one.call(&first).unwrap(),
        RunSettled::Settled { outstanding: 1 }
    );
    // A repeat records nothing.
    assert_eq!(one.call(&first).unwrap(), RunSettled::Already);
    let mut last = settle(&keys, "c1", &[]);
    last.result_ref = "s3://bucket/c1";
    let RunSettled::Published { ready_id } = one.call(&last).unwrap() else {
        panic!("the last job publishes the join");
    };
    // Once, with the envelope the first stage gave.
    let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(&one.keys.ready)
        .arg("-")
        .arg("+")
        .query(&mut one.conn)
        .unwrap();
    let given: Vec<String> = envelope().into_iter().map(str::to_owned).collect();
    assert_eq!(entries, [(ready_id, given)]);
    assert_eq!(
        one.call(&last).unwrap(),
        RunSettled::Ended { failed: false }
    );
    let summary: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(&one.keys.settled)
        .query(&mut one.conn)
        .unwrap();
    let expected: BTreeMap<String, String> =
        [("c1", "done:s3://bucket/c1"), ("c2", "done:"), (RUN, "-")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(summary, expected);
    // The ended run is kept for `keep_ms`, and is no longer open.
    for key in [&one.keys.run, &one.keys.settled] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut one.conn).unwrap();
        assert!(0 < ttl && ttl <= KEEP_MS as i64, "{key}: {ttl}");
    }
    let open = one.count("ZCARD", &keys.runs);
    assert_eq!(open, 0);
}

#[test]
fn a_dead_job_under_fail_fails_the_run_and_nothing_is_published() {
    let mut one = Single::start();
    let keys = one.keys.clone();
    let join_envelope = envelope();
    one.call(&opening(&keys, &["c1", "c2"], &join_envelope))
        .unwrap();
    let open = one.count("ZCARD", &keys.runs);
    assert_eq!(open, 1, "the run is open here");
    let mut dead = settle(&keys, "c1", &[]);
    dead.outcome = RunOutcome::Dead;
    dead.fails_run = true;
    assert_eq!(one.call(&dead).unwrap(), RunSettled::Failed);
    assert!(
        one.call(&dead).unwrap().failed(),
        "a repeat says failed again"
    );
    let rest = settle(&keys, "c2", &[]);
    assert_eq!(one.call(&rest).unwrap(), RunSettled::Ended { failed: true });
    let published = one.count("XLEN", &keys.ready);
    assert_eq!(published, 0);
}

#[test]
fn refusals_name_what_is_wrong_and_change_nothing() {
    let mut one = Single::start();
    let keys = one.keys.clone();
    let join_envelope = envelope();
    one.call(&opening(&keys, &["c1"], &join_envelope)).unwrap();
    let before = keyspace(&mut one.conn);
    let other_partition = one.other_ready.clone();
    let long_ref = "x".repeat(513);
    let no_job_id = vec!["type", "Job", "tenant", "t"];
    // One over the limit, each a valid ID.
    let many: Vec<String> = (0..=10_000).map(|n| format!("c{n}")).collect();
    let too_many: Vec<&str> = many.iter().map(String::as_str).collect();
    let cases: Vec<(&str, RunSettle<'_, Vec<&str>>)> = vec![
        ("QG_BADARG fails_run is 1 for a job that is not dead", {
            let mut s = settle(&keys, "c1", &[]);
            s.fails_run = true;
            s
        }),
        ("QG_BADARG result_ref is 513 bytes", {
            let mut s = settle(&keys, "c1", &[]);
            s.result_ref = &long_ref;
            s
        }),
        (
            "QG_BADARG job_id must be a non-empty job_id",
            settle(&keys, "", &[]),
        ),
        (
            "QG_BADARG child 1 must be a non-empty job_id",
            settle(&keys, "c1", &[""]),
        ),
        (
            "QG_BADARG child_count 10001 is more than MAX_CHILDREN 10000",
            settle(&keys, "c1", &too_many),
        ),
        ("QG_BADARG KEYS[2] must be", {
            let mut s = settle(&keys, "c1", &[]);
            s.ready_key = &other_partition;
            s
        }),
        ("QG_BADENVELOPE the join's envelope has no job_id", {
            let mut s = settle(&keys, "c1", &[]);
            s.join_envelope = Some(&no_job_id);
            s.counted = false;
            s
        }),
    ];
    for (expected, call) in &cases {
        let err = one.call(call).expect_err(expected);
        let text = refusal(&err);
        assert!(text.starts_with(expected), "{expected}: {text}");
        assert_eq!(
            keyspace(&mut one.conn),
            before,
            "{expected}: the keyspace changed"
        );
    }
    // A job that is not first passing an envelope (RunSettle sends `first`
    // exactly when it passes one, so this call is made by hand), and a
    // wrong key type.
    let raw: redis::RedisResult<redis::Value> = redis::cmd("FCALL")
        .arg(&one.function)
        .arg(5)
        .arg(&[
            &one.keys.ready,
            &one.keys.runs,
            &one.keys.run,
            &one.keys.out,
            &one.keys.settled,
        ])
        .arg(&[
            PIPELINE, "60000", "1", "10", RUN, "c1", "done", "1", "0", "", "0", "0", "job_id", "x",
        ])
        .query(&mut one.conn);
    let err = raw.expect_err("an envelope from a job that is not first");
    assert_eq!(err.code(), Some("QG_BADARG"), "{err}");
    assert_eq!(keyspace(&mut one.conn), before);
    let _: () = redis::cmd("SET")
        .arg(&one.keys.runs)
        .arg("squatter")
        .query(&mut one.conn)
        .unwrap();
    let squatted = keyspace(&mut one.conn);
    let err = one
        .call(&settle(&keys, "c1", &[]))
        .expect_err("a runs key that is a string");
    assert_eq!(err.code(), Some("QG_WRONGTYPE"), "{err}");
    assert_eq!(keyspace(&mut one.conn), squatted);
}
