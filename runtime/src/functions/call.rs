//! Building one `FCALL` from a typed call, and reading its reply (where a move put the job) and its refusals as the runtime's errors.

use redis::RedisResult;

use super::Function;
use crate::error::{Error, NotOwner, Result, TransitionCode, TransitionError};

/// One call of a library function: the values of its KEYS and ARGV, each a
/// named, typed field of the implementing type, written in the order the
/// contract (docs/functions.md) gives them.
pub trait FunctionCall {
    /// The call of the function named `name` (see [`command`]): `fcall`
    /// with the function and its KEYS, then its ARGV.
    fn command(&self, name: &str) -> redis::Cmd;
}

/// `FCALL <name> <numkeys> <keys...> <args...>` of `call` (`FCALL_RO` for a
/// read-only function), where `name` is the function's full name in the
/// service's library ([`Function::in_library`], built once by callers that
/// call it often). The only place the runtime builds a Function call.
pub fn command<F: FunctionCall>(name: &str, call: &F) -> redis::Cmd {
    call.command(name)
}

/// `FCALL <name> <numkeys> <keys...>` (`FCALL_RO` for a read-only
/// `function`), for a [`FunctionCall`] to append its ARGV to.
pub(super) fn fcall(name: &str, function: Function, keys: &[&str]) -> redis::Cmd {
    debug_assert!(
        name.ends_with(function.name()),
        "{name} is not the library's {function}"
    );
    let mut cmd = redis::cmd(if function.read_only() {
        "FCALL_RO"
    } else {
        "FCALL"
    });
    cmd.arg(name).arg(keys.len()).arg(keys);
    cmd
}

/// Appends [`command`] of `call` to `pipe`.
pub(crate) fn pipe_command<F: FunctionCall>(pipe: &mut redis::Pipeline, name: &str, call: &F) {
    pipe.add_command(command(name, call));
}

/// Where a transition put the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The destination: retry id, dead-letter ID or new ready entry ID.
    pub id: String,
    /// `true` when an earlier run had already made this transition (its
    /// marker was found): this call only finished cleanup.
    pub already: bool,
}

/// One function call, for its errors: the function, the key it was routed
/// by, the partition and the job, as every error of a call names them.
pub(crate) struct CallContext<'a> {
    pub function: &'a str,
    pub key: String,
    pub partition: crate::Partition,
    pub job: &'a str,
    /// The pending entry the call settles and the consumer settling it, for
    /// [`TransitionError::NotOwner`].
    pub entry: Option<(&'a str, &'a str)>,
}

impl CallContext<'_> {
    /// Reads a `[status, id]` reply: `fresh` (e.g. `scheduled`) or `already`.
    pub(crate) fn moved(&self, reply: RedisResult<Vec<String>>, fresh: &str) -> Result<Moved> {
        let reply = reply.map_err(|err| self.error(err))?;
        match <[String; 2]>::try_from(reply) {
            Ok([status, id]) if status == fresh || status == "already" => Ok(Moved {
                already: status == "already",
                id,
            }),
            Ok(other) => Err(self.unexpected(format!("{other:?}"))),
            Err(other) => Err(self.unexpected(format!("{other:?}"))),
        }
    }

    /// A refusal (`QG_*`) as [`TransitionError::Refused`] or [`TransitionError::NotOwner`];
    /// any other error as a Redis error naming the call.
    pub(crate) fn error(&self, err: redis::RedisError) -> Error {
        let Some((code, detail)) = refusal_of(&err) else {
            let call = format!(
                "FCALL {} on {} (partition {}, job {})",
                self.function, self.key, self.partition, self.job
            );
            return Error::redis(call, err);
        };
        let parsed = TransitionCode::parse(code).expect("checked for the QG_ prefix");
        if let (TransitionCode::NotOwner, Some((stream_id, consumer))) = (parsed, self.entry) {
            return Error::Transition(TransitionError::NotOwner(Box::new(NotOwner {
                function: self.function.to_owned(),
                key: self.key.clone(),
                partition: self.partition,
                job: self.job.to_owned(),
                stream_id: stream_id.to_owned(),
                consumer: consumer.to_owned(),
                owner: owner_in_refusal(detail),
            })));
        }
        self.transition(code, detail)
    }

    /// The refusal `code detail` as [`TransitionError::Refused`].
    pub(crate) fn transition(&self, code: &str, detail: &str) -> Error {
        let parsed = TransitionCode::parse(code).unwrap_or(TransitionCode::Unknown);
        let detail = match parsed {
            TransitionCode::Unknown => format!("{code} {detail}"),
            _ => detail.to_owned(),
        };
        Error::Transition(TransitionError::Refused {
            function: self.function.to_owned(),
            key: self.key.clone(),
            partition: self.partition,
            job: self.job.to_owned(),
            code: parsed,
            detail,
        })
    }

    /// A reply that does not have the contract's shape.
    pub(crate) fn unexpected(&self, reply: String) -> Error {
        let err = redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "unexpected reply from the Function library",
            reply,
        ));
        self.error(err)
    }
}

/// The owner a `QG_NOT_OWNER` refusal names: `<id> is pending for consumer
/// <owner>` (the rest of the line), or `None` when the entry is no longer
/// pending.
fn owner_in_refusal(detail: &str) -> Option<String> {
    let (_id, rest) = detail.split_once(' ')?;
    rest.strip_prefix("is pending for consumer ")
        .map(str::to_owned)
}

/// The code and detail of a library refusal (`QG_<CODE> detail`), or `None`
/// for any other error. `redis.error_reply("QG_X ...")` arrives with code
/// QG_X; a library that raised with `error()` instead arrives as `ERR QG_X ...`.
pub(crate) fn refusal_of(err: &redis::RedisError) -> Option<(&str, &str)> {
    match (err.code(), err.detail()) {
        (Some(code), detail) if code.starts_with("QG_") => Some((code, detail.unwrap_or(""))),
        (Some("ERR"), Some(detail)) if detail.starts_with("QG_") => {
            Some(detail.split_once(' ').unwrap_or((detail, "")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::*;

    /// The words of `cmd`, as Redis receives them.
    fn words(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_call_sends_its_keys_counted_then_its_args_in_the_contract_s_order() {
        let reschedule = Reschedule {
            defer: true,
            ready_key: "r",
            retry_key: "t",
            retry_jobs_key: "tj",
            marker_key: "m",
            group: "g",
            consumer: "c",
            source_id: "1-0",
            due_ms: 5,
            reason: "why",
            marker_ttl_ms: 6,
            accepted_schemas: "1,2",
        };
        assert_eq!(
            words(&command("qg_v1_defer", &reschedule)),
            [
                "FCALL",
                "qg_v1_defer",
                "4",
                "r",
                "t",
                "tj",
                "m",
                "g",
                "c",
                "1-0",
                "5",
                "why",
                "6",
                "1,2"
            ]
        );
        let markers = ["m1".to_owned(), "m2".to_owned()];
        let members = ["a".to_owned(), "b".to_owned()];
        let promote = Promote {
            delayed: false,
            set_key: "s",
            jobs_key: "j",
            ready_key: "r",
            dead_key: "d",
            marker_keys: &markers,
            now_ms: 7,
            batch: 2,
            marker_ttl_ms: 8,
            dead_letter_max_len: 9,
            members: &members,
        };
        assert_eq!(
            words(&command("qg_v1_retry_promote", &promote)),
            [
                "FCALL",
                "qg_v1_retry_promote",
                "6",
                "s",
                "j",
                "r",
                "d",
                "m1",
                "m2",
                "7",
                "2",
                "8",
                "9",
                "a",
                "b"
            ]
        );
        let ack = Ack {
            delete: false,
            group: "g",
            consumer: "c",
            streams: &[AckStream {
                ready_key: "r",
                claims_key: "k",
                claim_epoch: None,
                ids: &["1-0", "2-0"],
            }],
        };
        assert_eq!(
            words(&command("qg_v1_ack", &ack)),
            [
                "FCALL",
                "qg_v1_ack",
                "2",
                "r",
                "k",
                "g",
                "c",
                "-",
                "1-0",
                "2-0"
            ]
        );
        // Several streams: every epoch, then the count of each stream but
        // the last, then the IDs in stream order.
        let ack = Ack {
            delete: false,
            group: "g",
            consumer: "c",
            streams: &[
                AckStream {
                    ready_key: "r1",
                    claims_key: "k1",
                    claim_epoch: Some(4),
                    ids: &["1-0", "2-0"],
                },
                AckStream {
                    ready_key: "r2",
                    claims_key: "k2",
                    claim_epoch: None,
                    ids: &["3-0"],
                },
                AckStream {
                    ready_key: "r3",
                    claims_key: "k3",
                    claim_epoch: Some(0),
                    ids: &["5-0", "6-0"],
                },
            ],
        };
        assert_eq!(
            words(&command("qg_v1_ack", &ack)),
            [
                "FCALL",
                "qg_v1_ack",
                "6",
                "r1",
                "k1",
                "r2",
                "k2",
                "r3",
                "k3",
                "g",
                "c",
                "4",
                "-",
                "0",
                "2",
                "1",
                "1-0",
                "2-0",
                "3-0",
                "5-0",
                "6-0"
            ]
        );
        let groups = [TrimGroup {
            name: "g",
            last_delivered: "3-0".to_owned(),
        }];
        let trim = Trim {
            stream_key: "r",
            lease_key: "l",
            role: "ready",
            holder: "h",
            minid: "2-0",
            retention_ms: 10,
            xtrim_acked: true,
            groups: &groups,
        };
        assert_eq!(
            words(&command("qg_v1_trim", &trim)),
            [
                "FCALL",
                "qg_v1_trim",
                "2",
                "r",
                "l",
                "ready",
                "h",
                "2-0",
                "10",
                "1",
                "1",
                "g",
                "3-0"
            ]
        );
        assert_eq!(
            words(&command("qg_v1_version", &Version)),
            ["FCALL_RO", "qg_v1_version", "0"]
        );
    }

    #[test]
    fn the_other_calls_send_the_same_shape() {
        let pairs = vec![("job_id", "j1"), ("body", "b")];
        let cases: Vec<(redis::Cmd, &[&str])> = vec![
            (
                command(
                    "qg_v1_lease_acquire",
                    &LeaseAcquire {
                        lease_key: "l",
                        holder: "h",
                        ttl_ms: 3,
                    },
                ),
                &["FCALL", "qg_v1_lease_acquire", "1", "l", "h", "3"],
            ),
            (
                command(
                    "qg_v1_lease_release",
                    &LeaseRelease {
                        lease_key: "l",
                        holder: "h",
                    },
                ),
                &["FCALL", "qg_v1_lease_release", "1", "l", "h"],
            ),
            (
                command(
                    "qg_v1_publish_once",
                    &PublishOnce {
                        ready_key: "r",
                        marker_key: "m",
                        window_ms: 4,
                        payload_max_bytes: 5,
                        pairs: &pairs,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_publish_once",
                    "2",
                    "r",
                    "m",
                    "4",
                    "5",
                    "job_id",
                    "j1",
                    "body",
                    "b",
                ],
            ),
            (
                command(
                    "qg_v1_delay_schedule",
                    &DelaySchedule {
                        delayed_key: "d",
                        delayed_jobs_key: "dj",
                        marker_key: "m",
                        due_ms: 6,
                        payload_max_bytes: 5,
                        pairs: &pairs,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_delay_schedule",
                    "3",
                    "d",
                    "dj",
                    "m",
                    "6",
                    "5",
                    "job_id",
                    "j1",
                    "body",
                    "b",
                ],
            ),
            (
                command(
                    "qg_v1_dead_letter",
                    &DeadLetterCall {
                        ready_key: "r",
                        dead_key: "d",
                        marker_key: "m",
                        group: "g",
                        consumer: "c",
                        source_id: "1-0",
                        reason: "poison",
                        detail: "bad",
                        deliveries: 3,
                        marker_ttl_ms: 4,
                        dead_letter_max_len: 5,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_dead_letter",
                    "3",
                    "r",
                    "d",
                    "m",
                    "g",
                    "c",
                    "1-0",
                    "poison",
                    "bad",
                    "3",
                    "4",
                    "5",
                ],
            ),
            (
                command(
                    "qg_v1_replay",
                    &Replay {
                        dead_key: "d",
                        ready_key: "r",
                        marker_key: "m",
                        dead_id: "1-0",
                        new_job_id: "",
                        marker_ttl_ms: 4,
                        accepted_schemas: "1",
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_replay",
                    "3",
                    "d",
                    "r",
                    "m",
                    "1-0",
                    "",
                    "4",
                    "1",
                ],
            ),
            (
                command(
                    "qg_v1_schedule_tick",
                    &ScheduleTick {
                        ready_key: "r",
                        marker_key: "m",
                        schedule: "s",
                        tick_ms: 7,
                        marker_ttl_ms: 4,
                        fields: &pairs,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_schedule_tick",
                    "2",
                    "r",
                    "m",
                    "s",
                    "7",
                    "4",
                    "job_id",
                    "j1",
                    "body",
                    "b",
                ],
            ),
            (
                command(
                    "qg_v1_claim",
                    &Claim {
                        ready_key: "r",
                        claims_key: "k",
                        group: "g",
                        consumer: "c",
                        min_idle_ms: 8,
                        cursor: "0-0",
                        count: 9,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_claim",
                    "2",
                    "r",
                    "k",
                    "g",
                    "c",
                    "8",
                    "0-0",
                    "9",
                ],
            ),
            (
                command(
                    "qg_v1_ack_delete",
                    &Ack {
                        delete: true,
                        group: "g",
                        consumer: "c",
                        streams: &[AckStream {
                            ready_key: "r",
                            claims_key: "k",
                            claim_epoch: Some(11),
                            ids: &["1-0"],
                        }],
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_ack_delete",
                    "2",
                    "r",
                    "k",
                    "g",
                    "c",
                    "11",
                    "1-0",
                ],
            ),
            (
                command(
                    "qg_v1_renew",
                    &Renew {
                        ready_key: "r",
                        group: "g",
                        consumer: "c",
                        id: "1-0",
                    },
                ),
                &["FCALL", "qg_v1_renew", "1", "r", "g", "c", "1-0"],
            ),
            (
                command(
                    "qg_v1_rate_take",
                    &RateTake {
                        bucket_key: "b",
                        limit: 10,
                        per_ms: 1000,
                        wanted: 3,
                        carry: -2,
                    },
                ),
                &[
                    "FCALL",
                    "qg_v1_rate_take",
                    "1",
                    "b",
                    "10",
                    "1000",
                    "3",
                    "-2",
                ],
            ),
        ];
        for (cmd, expected) in cases {
            assert_eq!(words(&cmd), expected);
        }
    }

    #[test]
    fn a_not_owner_refusal_names_the_owner_or_none() {
        assert_eq!(
            owner_in_refusal("1-2 is pending for consumer host-7-ab cd"),
            Some("host-7-ab cd".to_owned())
        );
        assert_eq!(
            owner_in_refusal("1-2 is no longer pending in group \"g\" of p:{q-0}:ready"),
            None
        );
        assert_eq!(owner_in_refusal(""), None);
    }
}
