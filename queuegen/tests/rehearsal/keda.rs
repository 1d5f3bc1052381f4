//! KEDA's `redis-streams` lag triggers run as KEDA runs them: the connection parameters resolved from the scale target's container (`*FromEnv`), go-redis's connect handshake, then the scaler's queries (XINFO GROUPS for lag, XPENDING, XLEN) as that user.

use super::cluster::Cluster;
use super::manifests::{self, Manifests};

/// Runs every lag trigger's queries; returns how many triggers ran, and
/// the lag each one read (stream, lag).
pub fn run_lag_triggers(manifests: &Manifests, cluster: &Cluster) -> Vec<(String, i64)> {
    let mut read = Vec::new();
    for scaled in manifests.of_kind("ScaledObject") {
        let target = manifests::text(&scaled["spec"]["scaleTargetRef"]["name"], "scaleTargetRef");
        let container = manifests::container(manifests.named("Deployment", &target));
        // What KEDA resolves a `*FromEnv` to: the target container's variable.
        let from_env = |meta: &serde_yaml_ng::Value, key: &str| {
            let variable = manifests::text(&meta[key], key);
            cluster.resolve(container.var(&variable), &target)
        };
        for trigger in scaled["spec"]["triggers"].as_sequence().unwrap() {
            if trigger["type"] != "redis-streams" {
                continue;
            }
            let meta = &trigger["metadata"];
            let address = from_env(meta, "addressFromEnv");
            let user = from_env(meta, "usernameFromEnv");
            let password = from_env(meta, "passwordFromEnv");
            let stream = manifests::text(&meta["stream"], "stream");
            let group = manifests::text(&meta["consumerGroup"], "consumerGroup");
            let url = format!("redis://{user}:{password}@{address}/");
            let mut conn = redis::Client::open(url)
                .unwrap()
                .get_connection()
                .unwrap_or_else(|err| panic!("{target}: KEDA's login as {user} fails: {err}"));
            read.push((stream.clone(), lag(&mut conn, &stream, &group, &target)));
        }
    }
    read
}

/// The scaler's queries for one trigger; the group's lag.
fn lag(conn: &mut redis::Connection, stream: &str, group: &str, target: &str) -> i64 {
    let query = |cmd: &mut redis::Cmd, conn: &mut redis::Connection| -> redis::Value {
        cmd.query(conn)
            .unwrap_or_else(|err| panic!("{target}: KEDA's {cmd:?} on {stream}: {err}"))
    };
    // go-redis's handshake; the server's answer is not the scaler's business.
    let _: redis::RedisResult<redis::Value> = redis::cmd("CLIENT")
        .arg(&["SETINFO", "LIB-NAME", "go-redis(keda)"])
        .query(conn);
    let _: redis::RedisResult<redis::Value> = redis::cmd("CLIENT")
        .arg(&["SETINFO", "LIB-VER", "9.7.0"])
        .query(conn);
    query(&mut redis::cmd("PING"), conn);
    query(redis::cmd("XPENDING").arg(stream).arg(group), conn);
    query(redis::cmd("XLEN").arg(stream), conn);
    let groups = query(redis::cmd("XINFO").arg("GROUPS").arg(stream), conn);
    let groups: Vec<std::collections::HashMap<String, redis::Value>> =
        redis::from_redis_value(groups).unwrap();
    let ours = groups
        .iter()
        .find(|g| g.get("name") == Some(&redis::Value::BulkString(group.as_bytes().to_vec())))
        .unwrap_or_else(|| panic!("{target}: {stream} has no group {group}"));
    match ours.get("lag") {
        Some(redis::Value::Int(lag)) => *lag,
        other => panic!("{target}: {stream} group {group}: lag {other:?}"),
    }
}
