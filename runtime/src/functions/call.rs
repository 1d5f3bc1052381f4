//! Building one `FCALL` from a typed call, and reading its refusals as the runtime's errors.

use super::{Function, Moved, TransitionCode};
use crate::error::TransitionError;
use crate::error::{Error, NotOwner, Result};

/// One call of a library function: the values of its KEYS and ARGV, each a
/// named, typed field of the implementing type, written in the order the
/// contract (docs/functions.md) gives them.
pub trait FunctionCall {
    /// The function it calls.
    fn function(&self) -> Function;
    /// How many of the values [`FunctionCall::write_args`] appends are KEYS.
    fn key_count(&self) -> usize;
    /// Appends the KEYS, then the ARGV.
    fn write_args(&self, cmd: &mut redis::Cmd);
}

/// `FCALL <name> <numkeys> <keys...> <args...>` of `call` (`FCALL_RO` for a
/// read-only function), where `name` is the function's full name in the
/// service's library ([`Function::in_library`], built once by callers that
/// call it often). The only place the runtime builds a Function call.
pub fn command<F: FunctionCall>(name: &str, call: &F) -> redis::Cmd {
    let function = call.function();
    debug_assert!(
        name.ends_with(function.name()),
        "{name} is not the library's {function}"
    );
    let mut cmd = redis::cmd(if function.read_only() {
        "FCALL_RO"
    } else {
        "FCALL"
    });
    cmd.arg(name).arg(call.key_count());
    call.write_args(&mut cmd);
    cmd
}

/// Appends [`command`] of `call` to `pipe`.
pub(crate) fn pipe_command<F: FunctionCall>(pipe: &mut redis::Pipeline, name: &str, call: &F) {
    pipe.add_command(command(name, call));
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
    pub(crate) fn moved(
        &self,
        reply: redis::RedisResult<Vec<String>>,
        fresh: &str,
    ) -> Result<Moved> {
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
        let (code, detail) = match refusal_of(&err) {
            Some(refusal) => refusal,
            None => {
                return Error::redis(
                    format!(
                        "FCALL {} on {} (partition {}, job {})",
                        self.function, self.key, self.partition, self.job
                    ),
                    err,
                )
            }
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
