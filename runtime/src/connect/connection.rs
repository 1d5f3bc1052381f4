//! The shared connection: one type over a standalone server or a Cluster, so every caller sends commands the same way.
//!
//! On a Cluster, the crate's connection routes each command by its key's
//! slot, follows MOVED/ASK and refreshes the topology, but refuses a pipeline
//! whose commands live in different slots. The runtime's pipelines often span
//! partitions (one XPENDING page per partition, one XADD per job), so here a
//! pipeline is split into one sub-pipeline per slot, the sub-pipelines run
//! concurrently, and their replies are put back in the pipeline's order. A
//! keyless command (`WAIT` after an `XADD`) goes with the keyed command
//! before it, so it reaches the node that took that write.

use futures_util::future::{try_join_all, FutureExt};
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// A connection that reconnects by itself: to one server, or to a Cluster
/// (routing by slot). Cheap to clone; clones share the sockets.
#[derive(Clone)]
pub enum Connection {
    /// The standalone server, through a connection that reconnects by itself.
    Standalone(ConnectionManager),
    /// The standalone server, through a connection that reconnects with
    /// its password and certificate files read again.
    Reloading(super::Reloading),
    /// One standalone connection that does not reconnect: a reader's, which
    /// its owner replaces after an error (it may still be blocked server-side).
    Direct(MultiplexedConnection),
    /// A Cluster: every node, routed by slot.
    Cluster(ClusterConnection),
    /// A Cluster, through a connection remade when its certificate files
    /// change or after a connection-level error.
    Rebuilding(super::Rebuilding),
}

impl Connection {
    /// `true` on a Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_) | Connection::Rebuilding(_))
    }

    /// `WAIT replicas timeout` on the node that holds `key` (on a Cluster,
    /// routed by the key's slot, so it counts the replicas of the primary
    /// that took the writes to `key`): how many replicas acknowledged every
    /// write this connection sent to that node before it.
    pub(crate) async fn wait_for_replicas(
        &mut self,
        key: &str,
        replicas: u32,
        timeout: std::time::Duration,
    ) -> RedisResult<u32> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis().max(1) as u64);
        let reply = match self {
            Connection::Cluster(conn) => conn.route_command(wait, primary_of(key)).await?,
            Connection::Rebuilding(rebuilding) => {
                let route = primary_of(key);
                rebuilding
                    .send(|mut conn| async move { conn.route_command(wait, route).await })
                    .await?
            }
            other => other.req_packed_command(&wait).await?,
        };
        Ok(redis::from_redis_value(reply)?)
    }
}

/// Routing to the primary that owns `key`'s slot.
fn primary_of(key: &str) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
        key,
        SlotAddr::Master,
    )))
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_command(cmd),
            Connection::Reloading(conn) => conn.req_packed_command(cmd),
            Connection::Direct(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
            Connection::Rebuilding(rebuilding) => {
                Box::pin(rebuilding.send(move |conn| async move {
                    Connection::Cluster(conn).req_packed_command(cmd).await
                }))
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Reloading(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Direct(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(conn) => {
                // A transaction must stay one unit: the server refuses it with
                // CROSSSLOT if it spans slots, which is the honest answer.
                if pipeline.is_transaction() {
                    return conn.req_packed_commands(pipeline, offset, count);
                }
                let groups = group_by_slot(pipeline);
                if groups.len() <= 1 {
                    return conn.req_packed_commands(pipeline, offset, count);
                }
                split_pipeline(conn.clone(), pipeline, groups).boxed()
            }
            Connection::Rebuilding(rebuilding) => {
                Box::pin(rebuilding.send(move |conn| async move {
                    let mut conn = Connection::Cluster(conn);
                    conn.req_packed_commands(pipeline, offset, count).await
                }))
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(conn) => conn.get_db(),
            Connection::Reloading(conn) => conn.get_db(),
            Connection::Direct(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
            Connection::Rebuilding(rebuilding) => rebuilding.db(),
        }
    }
}

/// The pipeline's command indexes, grouped by the slot each one goes to, in
/// order of first appearance. Keyless commands join the group of the keyed
/// command before them (or the first group when none precedes them).
fn group_by_slot(pipeline: &Pipeline) -> Vec<Vec<usize>> {
    // A pipeline spans a few slots: a list beats a hash map here. Group
    // `i` is the group of `slots[i]`.
    let mut slots: Vec<Slot> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut keyless_before_any: Vec<usize> = Vec::new();
    let mut current: Option<usize> = None;
    for (index, cmd) in pipeline.cmd_iter().enumerate() {
        match slot_of(cmd) {
            Some(slot) => {
                let group = slots.iter().position(|seen| *seen == slot);
                let group = group.unwrap_or_else(|| {
                    slots.push(slot);
                    // The first group takes the keyless commands before it.
                    groups.push(std::mem::take(&mut keyless_before_any));
                    groups.len() - 1
                });
                groups[group].push(index);
                current = Some(group);
            }
            None => match current {
                Some(group) => groups[group].push(index),
                None => keyless_before_any.push(index),
            },
        }
    }
    if !keyless_before_any.is_empty() {
        groups.push(keyless_before_any);
    }
    groups
}

/// The slot a command goes to by its (first) key, if it has one.
fn slot_of(cmd: &Cmd) -> Option<Slot> {
    key_of(cmd).map(Slot::for_key)
}

/// The first key of a command the runtime pipelines. The crate's own
/// routing table is private, so this knows the few shapes it needs: the key
/// after `STREAMS` for stream reads, after the key count for `FCALL` and
/// `EVAL`, none for server commands, else the first argument.
fn key_of(cmd: &Cmd) -> Option<&[u8]> {
    // Walks the arguments lazily: a pipelined XADD carries every field of
    // its envelope, and this runs once per command of every publish.
    let mut args = cmd.args_iter().map(|arg| match arg {
        redis::Arg::Simple(bytes) => bytes,
        _ => &b""[..],
    });
    let name = args.next()?;
    // Each list names the commands of one shape, space-separated.
    let is_one_of = |names: &str| {
        names
            .split(' ')
            .any(|known| name.eq_ignore_ascii_case(known.as_bytes()))
    };
    if is_one_of("WAIT TIME INFO PING CLUSTER FUNCTION SCRIPT CLIENT CONFIG ACL HELLO SELECT") {
        return None;
    }
    if is_one_of("XREAD XREADGROUP") {
        args.find(|arg| arg.eq_ignore_ascii_case(b"STREAMS"))?;
        return args.next();
    }
    if is_one_of("FCALL FCALL_RO EVAL EVALSHA EVAL_RO EVALSHA_RO") {
        let keys: usize = std::str::from_utf8(args.nth(1)?).ok()?.parse().ok()?;
        return (keys > 0).then(|| args.next()).flatten();
    }
    // Container commands: the key follows the subcommand.
    if is_one_of("XINFO XGROUP OBJECT MEMORY") {
        return args.nth(1);
    }
    args.next()
}

/// Sends each slot's commands as a pipeline of their own, concurrently, and
/// returns every reply at its command's position in `pipeline`.
async fn split_pipeline(
    conn: ClusterConnection,
    pipeline: &Pipeline,
    groups: Vec<Vec<usize>>,
) -> RedisResult<Vec<Value>> {
    let commands: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let sends = groups.iter().map(|indexes| {
        let mut sub = redis::pipe();
        for &index in indexes {
            sub.add_command(commands[index].clone());
        }
        let mut conn = conn.clone();
        async move { conn.req_packed_commands(&sub, 0, indexes.len()).await }
    });
    let replies = try_join_all(sends).await?;
    let mut ordered: Vec<Option<Value>> = vec![None; commands.len()];
    for (indexes, values) in groups.iter().zip(replies) {
        for (&index, value) in indexes.iter().zip(values) {
            ordered[index] = Some(value);
        }
    }
    let missing = "a sub-pipeline answered fewer replies than it sent commands";
    let missing = || redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, missing));
    ordered
        .into_iter()
        .map(|value| value.ok_or_else(missing))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(key: &str) -> Slot {
        Slot::for_key(key.as_bytes())
    }

    #[test]
    fn commands_of_one_partition_share_a_group() {
        let mut pipe = redis::pipe();
        pipe.cmd("XADD")
            .arg("p:{jobs-00}:ready")
            .arg("*")
            .arg("f")
            .arg("v");
        pipe.cmd("XADD")
            .arg("p:{jobs-01}:ready")
            .arg("*")
            .arg("f")
            .arg("v");
        pipe.cmd("XADD")
            .arg("p:{jobs-00}:ready")
            .arg("*")
            .arg("f")
            .arg("v");
        assert_ne!(slot("p:{jobs-00}:ready"), slot("p:{jobs-01}:ready"));
        assert_eq!(group_by_slot(&pipe), vec![vec![0, 2], vec![1]]);
    }

    #[test]
    fn a_keyless_command_follows_the_keyed_one_before_it() {
        let mut pipe = redis::pipe();
        pipe.cmd("WAIT").arg(1).arg(100);
        pipe.cmd("XADD")
            .arg("p:{jobs-00}:ready")
            .arg("*")
            .arg("f")
            .arg("v");
        pipe.cmd("XADD")
            .arg("p:{jobs-01}:ready")
            .arg("*")
            .arg("f")
            .arg("v");
        pipe.cmd("WAIT").arg(1).arg(100);
        assert_eq!(group_by_slot(&pipe), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn keys_are_found_where_each_command_keeps_them() {
        let key = |cmd: &Cmd| key_of(cmd).map(|key| String::from_utf8_lossy(key).into_owned());
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg("g").arg("c").arg("COUNT").arg(5);
        read.arg("STREAMS").arg("p:{jobs-03}:ready").arg(">");
        assert_eq!(key(&read).as_deref(), Some("p:{jobs-03}:ready"));
        let renew = crate::functions::Renew {
            ready_key: "p:{jobs-01}:ready",
            group: "g",
            consumer: "c",
            id: "1-1",
        };
        let fcall = crate::functions::command("qg_x_v3_renew", &renew);
        assert_eq!(key(&fcall).as_deref(), Some("p:{jobs-01}:ready"));
        let keyless = crate::functions::command("qg_x_v3_version", &crate::functions::Version);
        assert_eq!(key(&keyless), None);
        assert_eq!(key(redis::cmd("WAIT").arg(1).arg(100)), None);
        assert_eq!(
            key(redis::cmd("XACK").arg("k").arg("g").arg("1-1")).as_deref(),
            Some("k")
        );
    }
}
