//! Row 14: every function of the generated library that takes several keys refuses keys of two partitions, before writing anything.
//!
//! What generation guarantees: no function builds a key from `ARGV` (a test
//! of the generator lints the library for it), the runtime computes every
//! key of a call from one partition number, and each multi-key function
//! checks, before its first write, that its `KEYS` share one prefix and hash
//! tag (`QG_BADARG ... (one partition)`). On a standalone server that check
//! is what stops a cross-partition call; on a Cluster the server refuses it
//! too (`CROSSSLOT`). Here each function is called, as the worker user (the
//! operator's `replay` as the administrator), with
//! valid arguments and one key of another partition: it must be refused and
//! the keyspace must not change; the same call with one partition's keys
//! must then succeed (so the refusal was the keys' doing).

use std::collections::BTreeMap;

use queuegen_runtime::functions::Function;
use queuegen_runtime::lease;
use queuegen_runtime::Partition;
use queuegen_runtime::StreamSlot;
use queuegen_runtime::{MarkerKind, QueueConfig};
use queuegen_tests::suite::{QueueKind, ScriptedJob, Tuning};
use queuegen_tests::support::{deliver_to, last_delivered};
use redis::aio::ConnectionLike;
use redis::Value;

use super::Run;
use crate::stage::Stage;
use crate::verdict::Verdict;

const ACCEPTED_SCHEMAS: &str = "1,2";
const HOLDER: &str = "suite-cross-partition";

/// One function call: its name, KEYS and ARGV.
struct Call {
    function: Function,
    keys: Vec<String>,
    args: Vec<String>,
}

impl Call {
    /// The same call with `KEYS[index]` taken from `other` (the same key of another partition).
    fn with_key(&self, index: usize, other: String) -> Call {
        let mut keys = self.keys.clone();
        keys[index] = other;
        Call {
            function: self.function,
            keys,
            args: self.args.clone(),
        }
    }

    async fn send(
        &self,
        conn: &mut impl ConnectionLike,
        config: &QueueConfig,
    ) -> redis::RedisResult<Value> {
        redis::cmd("FCALL")
            .arg(config.function(self.function))
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args)
            .query_async(conn)
            .await
    }
}

pub async fn two_partitions_refused(run: Run) -> Verdict {
    let tuning = Tuning {
        partitions: Some(2),
        ..Tuning::default()
    };
    let stage = Stage::new(run.target, "cross-partition", QueueKind::Jobs, tuning).await;
    let config = &stage.config;
    // No job is worked here: the row counts refusals, not jobs.
    let mut verdict = Verdict::new(0);
    verdict.count(0, 0);

    // Two entries of partition 0, pending: sources for retry_schedule and dead_letter.
    let published = stage.publish(&ScriptedJob::many("ok", 8)).await;
    let sources: Vec<String> = published
        .iter()
        .filter(|job| job.partition == Partition::new(0))
        .map(|job| job.stream_id.clone())
        .take(2)
        .collect();
    assert_eq!(
        sources.len(),
        2,
        "two of 8 jobs on partition 0: {published:?}"
    );
    let mut admin = stage.conn();
    deliver_to(
        &mut admin,
        &config.ready_key(StreamSlot::new(0)),
        &config.group,
        "holder",
    )
    .await;
    let (retried, dead) = (&sources[0], &sources[1]);
    let ttl = config.retention.marker_ttl.as_millis().to_string();
    // A retry id and a dead-letter id as they will be once the calls below run.
    let retry_id = retried.clone();

    let calls = |dead_id: &str, last_delivered: &str| {
        vec![
            (
                Call {
                    function: Function::RetrySchedule,
                    keys: vec![
                        config.ready_key(StreamSlot::new(0)),
                        config.retry_key(StreamSlot::new(0)),
                        config.retry_jobs_key(StreamSlot::new(0)),
                        config.marker_key(StreamSlot::new(0), MarkerKind::Retry, retried),
                    ],
                    args: vec![
                        config.group.to_string(),
                        "holder".to_owned(),
                        retried.clone(),
                        "1".to_owned(),
                        "transient".to_owned(),
                        ttl.clone(),
                        ACCEPTED_SCHEMAS.to_owned(),
                    ],
                },
                1,
                config.retry_key(StreamSlot::new(1)),
            ),
            (
                Call {
                    function: Function::RetryPromote,
                    keys: vec![
                        config.retry_key(StreamSlot::new(0)),
                        config.retry_jobs_key(StreamSlot::new(0)),
                        config.ready_key(StreamSlot::new(0)),
                        config.dead_key(StreamSlot::new(0)),
                        config.marker_key(StreamSlot::new(0), MarkerKind::Promote, &retry_id),
                    ],
                    args: vec![
                        now_ms().to_string(),
                        "10".to_owned(),
                        ttl.clone(),
                        config.dead_letter.max_len.to_string(),
                        retry_id.clone(),
                    ],
                },
                2,
                config.ready_key(StreamSlot::new(1)),
            ),
            (
                Call {
                    function: Function::DeadLetter,
                    keys: vec![
                        config.ready_key(StreamSlot::new(0)),
                        config.dead_key(StreamSlot::new(0)),
                        config.marker_key(StreamSlot::new(0), MarkerKind::Dead, dead),
                    ],
                    args: vec![
                        config.group.to_string(),
                        "holder".to_owned(),
                        dead.clone(),
                        "permanent".to_owned(),
                        "cross-partition scenario".to_owned(),
                        "1".to_owned(),
                        ttl.clone(),
                        "1000".to_owned(),
                    ],
                },
                1,
                config.dead_key(StreamSlot::new(1)),
            ),
            (
                Call {
                    function: Function::Replay,
                    keys: vec![
                        config.dead_key(StreamSlot::new(0)),
                        config.ready_key(StreamSlot::new(0)),
                        config.marker_key(StreamSlot::new(0), MarkerKind::Replay, dead_id),
                    ],
                    args: vec![
                        dead_id.to_owned(),
                        String::new(),
                        ttl.clone(),
                        ACCEPTED_SCHEMAS.to_owned(),
                    ],
                },
                1,
                config.ready_key(StreamSlot::new(1)),
            ),
            (
                Call {
                    function: Function::Trim,
                    keys: vec![
                        config.ready_key(StreamSlot::new(0)),
                        config.trim_lease_key(StreamSlot::new(0)),
                    ],
                    args: vec![
                        "ready".to_owned(),
                        HOLDER.to_owned(),
                        "0-1".to_owned(),
                        "0".to_owned(),
                        "0".to_owned(),
                        "1".to_owned(),
                        config.group.to_string(),
                        last_delivered.to_owned(),
                    ],
                },
                1,
                config.trim_lease_key(StreamSlot::new(1)),
            ),
        ]
    };

    // Refused, as the worker user, with nothing written; `replay` as the
    // administrator, since it is the operator's (the worker role may not
    // call it).
    let worker = stage.deployment.worker_redis().await;
    let mut conn = worker.shared();
    let before = keyspace(&mut admin, config).await;
    for (call, index, foreign) in calls("0-1", "0-1") {
        let mixed = call.with_key(index, foreign);
        let sent = if call.function == Function::Replay {
            mixed.send(&mut admin, config).await
        } else {
            mixed.send(&mut conn, config).await
        };
        match sent {
            Err(err) => {
                let text = err.to_string();
                verdict.check(
                    (text.contains("QG_BADARG") && text.contains("(one partition)"))
                        || err.code() == Some("CROSSSLOT"),
                    || format!("{}: refused for another reason: {text}", call.function),
                );
            }
            Ok(reply) => verdict.problem(format!(
                "{} ran with keys of two partitions: {reply:?}",
                call.function
            )),
        }
    }
    let after = keyspace(&mut admin, config).await;
    verdict.check(before == after, || {
        "a refused call changed the keyspace".to_owned()
    });

    // The same calls with one partition's keys go through, in an order in
    // which each finds what it needs: what the previous ones wrote.
    lease::acquire(
        &mut admin,
        &config.functions,
        &config.trim_lease_key(StreamSlot::new(0)),
        HOLDER,
        std::time::Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|err| panic!("taking the trim lease: {err}"));
    let mut dead_id = String::from("0-1");
    let mut accepted = 0;
    for position in 0..5 {
        let last_delivered = last_delivered(&mut admin, config, StreamSlot::new(0)).await;
        let (call, _, _) = calls(&dead_id, &last_delivered).remove(position);
        let sent = if call.function == Function::Replay {
            call.send(&mut admin, config).await
        } else {
            call.send(&mut conn, config).await
        };
        match sent {
            Ok(reply) => {
                accepted += 1;
                if call.function == Function::DeadLetter {
                    dead_id = second_string(&reply);
                }
            }
            Err(err) => verdict.problem(format!(
                "{} with one partition's keys was refused: {err}",
                call.function
            )),
        }
    }
    verdict.note(format!(
        "5 functions refused keys of two partitions with nothing written; {accepted} accepted one partition's"
    ));
    verdict
}

/// Every key of the scenario with its serialized value (`DUMP`), to compare.
async fn keyspace(
    conn: &mut impl ConnectionLike,
    config: &QueueConfig,
) -> BTreeMap<String, Vec<u8>> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", config.key_prefix))
        .query_async(conn)
        .await
        .unwrap();
    let mut dumps = BTreeMap::new();
    for key in keys {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        dumps.insert(key, dump);
    }
    dumps
}

/// The second element of a `[status, id]` reply.
fn second_string(reply: &Value) -> String {
    match reply {
        Value::Array(items) if items.len() >= 2 => {
            redis::from_redis_value_ref(&items[1]).unwrap_or_default()
        }
        other => panic!("expected [status, id], got {other:?}"),
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}
