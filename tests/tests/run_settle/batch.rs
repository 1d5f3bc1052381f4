//! The library's `run_settle` (docs/functions.md) with several jobs on a real server: a batch settles its jobs exactly as calls of one job each would, one after the other, and a refused batch names the job at fault and writes nothing.

use std::collections::BTreeMap;

use queuegen::gen::runtime_config::queue_config;
use queuegen::spec::limits::library::{MAX_CHILDREN, MAX_SETTLE_BATCH};
use queuegen_runtime::config::RunKeys;
use queuegen_runtime::functions::{
    command, Function, RunOutcome, RunSettle, RunSettleBatch, RunSettled,
};
use queuegen_runtime::partition::run_partition;
use queuegen_runtime::{Partition, QueueConfig};
use queuegen_tests::support::{keyspace, unique_prefix};
use queuegen_tests::RedisServer;

use super::pipeline_sim::spec_of;
use super::{refusal, server, KEEP_MS, PIPELINE};

/// One join queue (two partitions) with the library loaded, and runs whose
/// keys are all in its first partition.
struct Join {
    conn: redis::Connection,
    config: QueueConfig,
    function: String,
    _server: RedisServer,
}

impl Join {
    fn start() -> Join {
        let (server, conn, library) = server();
        let (spec, _) = spec_of(0);
        let mut config = queue_config(&spec, &spec.queues[0]);
        config.key_prefix = unique_prefix("batch").into();
        Join {
            conn,
            config,
            function: Function::RunSettle.in_library(&library),
            _server: server,
        }
    }

    /// `count` run IDs whose keys are in `partition`.
    fn runs_in(&self, partition: Partition, count: usize) -> Vec<String> {
        (0..)
            .map(|n| format!("run-{n}"))
            .filter(|run| run_partition(&self.config, run) == partition)
            .take(count)
            .collect()
    }

    fn keys(&self, run: &str) -> RunKeys {
        let partition = run_partition(&self.config, run);
        self.config.run_keys(partition, PIPELINE, run)
    }

    fn single(&mut self, call: &RunSettle<'_, Vec<String>>) -> redis::RedisResult<RunSettled> {
        let replies: Vec<RunSettled> = command(&self.function, call).query(&mut self.conn)?;
        assert_eq!(replies.len(), 1, "one reply for one job: {replies:?}");
        Ok(replies.into_iter().next().unwrap())
    }

    fn batch(
        &mut self,
        calls: &[RunSettle<'_, Vec<String>>],
    ) -> redis::RedisResult<Vec<RunSettled>> {
        command(&self.function, &RunSettleBatch { jobs: calls }).query(&mut self.conn)
    }

    /// What a run's keys say, without times and entry IDs: status, opened,
    /// outstanding jobs, settled records, the join's entries appended.
    fn state(&mut self, run: &str) -> String {
        let keys = self.keys(run);
        let (status, opened): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(&keys.run)
            .arg("status")
            .arg("opened")
            .query(&mut self.conn)
            .unwrap();
        let mut out: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&keys.out)
            .query(&mut self.conn)
            .unwrap();
        out.sort();
        let settled: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys.settled)
            .query(&mut self.conn)
            .unwrap();
        let joins: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&keys.ready)
            .arg("-")
            .arg("+")
            .query(&mut self.conn)
            .unwrap();
        let appended: Vec<&String> = joins
            .iter()
            .flat_map(|(_, fields)| fields.iter().filter(|(f, _)| f == "job_id").map(|(_, v)| v))
            .filter(|job| job.starts_with(&format!("{run}/")))
            .collect();
        format!("{status:?} {opened:?} out={out:?} settled={settled:?} appended={appended:?}")
    }
}

/// One job's settle as the batch test gives it.
struct Step {
    run: String,
    job: String,
    first: bool,
    dead: bool,
    fails_run: bool,
    children: Vec<String>,
}

fn step(run: &str, job: &str, children: &[&str]) -> Step {
    Step {
        run: run.to_owned(),
        job: job.to_owned(),
        first: false,
        dead: false,
        fails_run: false,
        children: children.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn opening(run: &str, children: &[&str]) -> Step {
    Step {
        first: true,
        ..step(run, run, children)
    }
}

fn dead(run: &str, job: &str, fails_run: bool) -> Step {
    Step {
        dead: true,
        fails_run,
        ..step(run, job, &[])
    }
}

struct Owned {
    keys: RunKeys,
    envelope: Vec<String>,
}

fn owned(join: &Join, step: &Step) -> Owned {
    Owned {
        keys: join.keys(&step.run),
        envelope: vec![
            "job_id".into(),
            format!("{}/j", step.run),
            "type".into(),
            "Job".into(),
        ],
    }
}

fn call<'a>(step: &'a Step, owned: &'a Owned) -> RunSettle<'a, Vec<String>> {
    RunSettle {
        run_key: &owned.keys.run,
        out_key: &owned.keys.out,
        settled_key: &owned.keys.settled,
        ready_key: &owned.keys.ready,
        runs_key: &owned.keys.runs,
        pipeline: PIPELINE,
        run_id: &step.run,
        job_id: &step.job,
        outcome: if step.dead {
            RunOutcome::Dead
        } else {
            RunOutcome::Done
        },
        counted: !step.first,
        fails_run: step.fails_run,
        result_ref: if step.dead { "" } else { &step.job },
        keep_ms: KEEP_MS,
        children: &[],
        join_envelope: step.first.then_some(&owned.envelope),
    }
}

/// A reply without the entry ID, to compare a batch's with singles'.
fn shape(reply: &RunSettled) -> String {
    match reply {
        RunSettled::Published { .. } => "published".into(),
        other => format!("{other:?}"),
    }
}

#[test]
fn a_batch_settles_its_jobs_as_run_settle_would_one_after_the_other() {
    let mut join = Join::start();
    let runs = join.runs_in(Partition::new(0), 4);
    let (a, b, c, d) = (&runs[0], &runs[1], &runs[2], &runs[3]);
    let child = |run: &str, n: u32| format!("{run}/c{n}");
    let (a1, a2, b1, b2, c1, d1) = (
        child(a, 1),
        child(a, 2),
        child(b, 1),
        child(b, 2),
        child(c, 1),
        child(d, 1),
    );
    // Batches as a worker's flushes might send them: a run opened and
    // published in one batch; a child settled before its parent opened the
    // run; a repeat within a batch and across batches; a dead child failing
    // its run; and a job of a run that has ended.
    let batches: Vec<Vec<Step>> = vec![
        vec![
            opening(a, &[&a1, &a2]),
            step(a, &a1, &[]),
            step(b, &b1, &[]),
            step(a, &a2, &[]),
            step(a, &a2, &[]),
        ],
        vec![
            opening(b, &[&b1, &b2]),
            opening(c, &[&c1]),
            step(b, &b2, &[]),
            dead(c, &c1, true),
            step(a, &a1, &[]),
        ],
        vec![
            step(c, &c1, &[]),
            opening(d, &[&d1]),
            step(d, &d1, &["d-grandchild"]),
        ],
        vec![step(d, "d-grandchild", &[]), step(b, &b1, &[])],
    ];
    // The same steps, once one by one and once batched, on keys of their own.
    let singles_prefix = unique_prefix("single");
    let batched_prefix = std::mem::replace(&mut join.config.key_prefix, singles_prefix.into());
    let mut expected = Vec::new();
    for steps in &batches {
        for step in steps {
            let owned = owned(&join, step);
            let children: Vec<&str> = step.children.iter().map(String::as_str).collect();
            let mut settle = call(step, &owned);
            settle.children = &children;
            let reply = join.single(&settle).expect("run_settle");
            expected.push(shape(&reply));
        }
    }
    let expected_states: Vec<String> = runs.iter().map(|run| join.state(run)).collect();
    join.config.key_prefix = batched_prefix;
    let mut replies = Vec::new();
    for steps in &batches {
        let owned: Vec<Owned> = steps.iter().map(|step| owned(&join, step)).collect();
        let children: Vec<Vec<&str>> = steps
            .iter()
            .map(|step| step.children.iter().map(String::as_str).collect())
            .collect();
        let calls: Vec<RunSettle<'_, Vec<String>>> = steps
            .iter()
            .zip(&owned)
            .zip(&children)
            .map(|((step, owned), children)| RunSettle {
                children,
                ..call(step, owned)
            })
            .collect();
        let settled = join.batch(&calls).expect("run_settle of several jobs");
        assert_eq!(settled.len(), steps.len());
        replies.extend(settled.iter().map(shape));
    }
    assert_eq!(replies, expected);
    let states: Vec<String> = runs.iter().map(|run| join.state(run)).collect();
    assert_eq!(states, expected_states);
    // The runs ended as planned: a, b and d published once, c failed.
    for (run, state) in runs.iter().zip(&states) {
        let published = run != c;
        assert!(
            state.starts_with(if published {
                "Some(\"published\")"
            } else {
                "Some(\"failed\")"
            }),
            "{run}: {state}"
        );
        assert_eq!(
            state.contains(&format!("appended=[\"{run}/j\"]")),
            published,
            "{state}"
        );
    }
}

#[test]
fn a_refused_batch_names_the_job_at_fault_and_writes_nothing() {
    let mut join = Join::start();
    let runs = join.runs_in(Partition::new(0), 3);
    let elsewhere = join.runs_in(Partition::new(1), 1);
    let steps = [
        opening(&runs[0], &["x1", "x2"]),
        step(&runs[1], "y1", &[]),
        step(&runs[2], "z1", &[]),
    ];
    let owned: Vec<Owned> = steps.iter().map(|step| owned(&join, step)).collect();
    let mut good: Vec<RunSettle<'_, Vec<String>>> = steps
        .iter()
        .zip(&owned)
        .map(|(step, owned)| call(step, owned))
        .collect();
    good[0].children = &["x1", "x2"];
    // Something on the server before, so that "nothing written" means something.
    join.single(&good[1]).unwrap();
    let before = keyspace(&mut join.conn);

    let other = join.keys(&elsewhere[0]);
    let no_job_id = vec!["type".to_owned(), "Job".to_owned()];
    let many: Vec<String> = (0..MAX_CHILDREN / 2 + 1).map(|n| format!("k{n}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let cases: Vec<(&str, Vec<RunSettle<'_, Vec<String>>>)> = vec![
        ("QG_BADARG job 2: job_id must be a non-empty job_id", {
            let mut calls = good.clone();
            calls[1].job_id = "";
            calls
        }),
        ("QG_BADARG job 3: KEYS[9] must be", {
            // Job 3's keys in the other partition (the right names there).
            let mut calls = good.clone();
            calls[2].run_key = &other.run;
            calls[2].out_key = &other.out;
            calls[2].settled_key = &other.settled;
            calls[2].ready_key = &other.ready;
            calls[2].runs_key = &other.runs;
            calls[2].run_id = &elsewhere[0];
            calls
        }),
        ("QG_BADENVELOPE job 1: the join's envelope has no job_id", {
            let mut calls = good.clone();
            calls[0].join_envelope = Some(&no_job_id);
            calls
        }),
        (
            "QG_BADARG the jobs have more than MAX_CHILDREN",
            vec![
                RunSettle {
                    children: &many,
                    ..good[1]
                },
                RunSettle {
                    children: &many,
                    ..good[2]
                },
            ],
        ),
        (
            "QG_BADARG job_count 101 is more than MAX_SETTLE_BATCH 100",
            vec![good[1].clone(); MAX_SETTLE_BATCH as usize + 1],
        ),
    ];
    for (expected, calls) in &cases {
        let err = join.batch(calls).expect_err(expected);
        let text = refusal(&err);
        assert!(text.starts_with(expected), "{expected}: {text}");
        assert_eq!(
            keyspace(&mut join.conn),
            before,
            "{expected}: the keyspace changed"
        );
    }

    // A key of another type in the last job: found before the first write.
    let _: () = redis::cmd("SET")
        .arg(&owned[2].keys.settled)
        .arg("squatter")
        .query(&mut join.conn)
        .unwrap();
    let squatted = keyspace(&mut join.conn);
    let err = join
        .batch(&good)
        .expect_err("a settled key that is a string");
    assert_eq!(err.code(), Some("QG_WRONGTYPE"), "{err}");
    assert!(err.to_string().contains(&owned[2].keys.settled), "{err}");
    assert_eq!(keyspace(&mut join.conn), squatted);
    let _: () = redis::cmd("DEL")
        .arg(&owned[2].keys.settled)
        .query(&mut join.conn)
        .unwrap();

    // A run the batch may publish whose stored envelope does not decode.
    join.single(&good[0]).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&owned[0].keys.run)
        .arg("envelope")
        .arg("not an envelope")
        .query(&mut join.conn)
        .unwrap();
    let corrupt = keyspace(&mut join.conn);
    let (x1, x2) = (step(&runs[0], "x1", &[]), step(&runs[0], "x2", &[]));
    let last_two = [
        call(&steps[2], &owned[2]),
        call(&x1, &owned[0]),
        call(&x2, &owned[0]),
    ];
    let err = join
        .batch(&last_two)
        .expect_err("a stored envelope that does not decode");
    assert_eq!(err.code(), Some("QG_BADENVELOPE"), "{err}");
    assert_eq!(keyspace(&mut join.conn), corrupt);
    // Alone, the job of the other run is settled: the refusal was the run's.
    let settled = join.batch(&last_two[..1]).unwrap();
    assert_eq!(settled, [RunSettled::Settled { outstanding: 0 }]);
}
