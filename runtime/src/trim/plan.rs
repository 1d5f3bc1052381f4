//! Reading a stream's trim plan: the server's clock, the inventory of its groups, and a bounded count of what would go.

use redis::aio::ConnectionLike;
use redis::Value;

use super::{Removable, StreamRole, TrimPlan};
use crate::config::QueueConfig;
use crate::error::{Error, InventoryProblem, OperationError, Result};
use crate::inventory::{first_id, inventory};
use crate::stream_slot::StreamSlot;

/// The server's clock (`TIME`) in Unix ms: stream IDs carry the server's
/// time, so the policy is measured by it, not by this host's clock.
pub async fn server_time_ms<C: ConnectionLike>(conn: &mut C) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .map_err(|err| Error::redis("TIME", err))?;
    Ok(secs * 1000 + micros / 1000)
}

/// Plans the trim of one stream; `None` when it does not exist. With
/// `count_cap` > 0 the entries that would go are counted up to that many
/// (and their bytes estimated); with 0 they are counted only when there
/// are none.
pub async fn plan<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    stream: StreamSlot,
    role: StreamRole,
    count_cap: u64,
) -> Result<Option<TrimPlan>> {
    let mut plans = plan_streams(conn, config, &[(stream, role)], count_cap).await?;
    Ok(plans.pop().flatten())
}

/// Plans the trim of several streams at once (one `TIME`, one inventory):
/// a plan per target, in order, `None` for a stream that does not exist.
pub async fn plan_streams<C: ConnectionLike>(
    conn: &mut C,
    config: &QueueConfig,
    targets: &[(StreamSlot, StreamRole)],
    count_cap: u64,
) -> Result<Vec<Option<TrimPlan>>> {
    let now = server_time_ms(conn).await?;
    let keys: Vec<String> = targets
        .iter()
        .map(|&(stream, role)| role.key(config, stream))
        .collect();
    let streams = inventory(conn, &keys).await?;
    let mut plans: Vec<Option<TrimPlan>> = targets
        .iter()
        .zip(streams)
        .map(|(&(slot, role), stream)| {
            stream.map(|stream| {
                TrimPlan::from_inventory(slot, role, stream, now, role.retention(config))
            })
        })
        .collect();
    if count_cap > 0 {
        count_removable(conn, &mut plans, count_cap).await?;
    }
    Ok(plans)
}

/// Counts, per plan with something to remove, the entries below its MINID
/// up to `cap` (exactly all of them when the whole stream is below it),
/// and estimates their bytes: one pipeline of `XREVRANGE + - COUNT 1`,
/// `XRANGE - (minid COUNT cap` and `MEMORY USAGE` per such stream.
async fn count_removable<C: ConnectionLike>(
    conn: &mut C,
    plans: &mut [Option<TrimPlan>],
    cap: u64,
) -> Result<()> {
    let mut pipe = redis::pipe();
    let mut counted = Vec::new();
    for (index, plan) in plans.iter().enumerate() {
        let Some(plan) = plan.as_ref().filter(|plan| plan.removes_anything()) else {
            continue;
        };
        pipe.cmd("XREVRANGE")
            .arg(&plan.key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1);
        pipe.cmd("XRANGE")
            .arg(&plan.key)
            .arg("-")
            .arg(format!("({}", plan.minid))
            .arg("COUNT")
            .arg(cap);
        pipe.cmd("MEMORY").arg("USAGE").arg(&plan.key);
        counted.push(index);
    }
    if counted.is_empty() {
        return Ok(());
    }
    let answers: Vec<redis::RedisResult<Value>> = pipe
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(|err| Error::redis("counting the entries below the MINID", err))?;
    let mut answers = answers.into_iter();
    for index in counted {
        let plan = plans[index].as_mut().expect("counted plans exist");
        let key = plan.key.clone();
        let (Some(last), Some(below), Some(memory)) =
            (answers.next(), answers.next(), answers.next())
        else {
            return Err(Error::Operation(OperationError::Inventory {
                key,
                problem: InventoryProblem::ShortReply,
            }));
        };
        let last = last
            .map_err(|err| Error::redis(format!("XREVRANGE {key} + - COUNT 1"), err))
            .and_then(|reply| first_id(&key, reply))?;
        let below = below.map_err(|err| {
            Error::redis(format!("XRANGE {key} - ({} COUNT {cap}", plan.minid), err)
        })?;
        let Value::Array(below) = below else {
            return Err(Error::Operation(OperationError::Inventory {
                key,
                problem: InventoryProblem::Unexpected {
                    command: "XRANGE".to_owned(),
                    found: format!("{below:?}"),
                },
            }));
        };
        let below = below.len() as u64;
        plan.removable = match last {
            Some(last) if last < plan.minid => Removable::Exact(plan.length),
            _ if below < cap => Removable::Exact(below),
            _ => Removable::AtLeast(below),
        };
        // MEMORY may be missing or refused (ACL): then the bytes are unknown.
        plan.bytes_estimate = match (memory, plan.removable) {
            (Ok(Value::Int(bytes)), Removable::Exact(n) | Removable::AtLeast(n))
                if plan.length > 0 =>
            {
                let bytes = u128::from(u64::try_from(bytes).unwrap_or(0));
                u64::try_from(bytes * u128::from(n) / u128::from(plan.length)).ok()
            }
            _ => None,
        };
    }
    Ok(())
}
