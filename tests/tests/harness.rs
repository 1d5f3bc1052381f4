//! The test harness itself: private servers on distinct ports, reaped on drop; AOF restarts, pauses, the primary+replica pair, the 6-node cluster (failover, slot migration) and ACL users.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use queuegen_tests::{AclUser, Fsync, RedisCluster, RedisPair, RedisServer, ServerKind};

#[test]
fn servers_are_private_and_gone_after_drop() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    assert_ne!(first.port(), second.port());
    assert_ne!(first.pid(), second.pid());

    let mut conn = first.client().get_connection().unwrap();
    let () = redis::cmd("SET")
        .arg("only-here")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    let mut other = second.client().get_connection().unwrap();
    let seen: Option<String> = redis::cmd("GET")
        .arg("only-here")
        .query(&mut other)
        .unwrap();
    assert_eq!(seen, None, "each test gets its own server");
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut conn)
        .unwrap();
    assert_eq!(Path::new(&dir[1]), first.dir().canonicalize().unwrap());

    let (pid, dir) = (first.pid(), first.dir());
    let proc_entry = format!("/proc/{pid}");
    assert!(Path::new(&proc_entry).exists());
    drop(first);
    assert!(
        !Path::new(&proc_entry).exists(),
        "redis-server {pid} was killed and reaped"
    );
    assert!(!dir.exists(), "its directory was removed");
}

#[test]
fn extra_arguments_override_the_harness_defaults() {
    let policy = |server: &RedisServer| -> String {
        let mut conn = server.client().get_connection().unwrap();
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query(&mut conn)
            .unwrap();
        reply[1].clone()
    };
    assert_eq!(policy(&RedisServer::start()), "noeviction");
    let evicting = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    assert_eq!(policy(&evicting), "allkeys-lru");
}

/// `redis::Cmd` on a harness connection, panicking with the command on error.
fn run<T: redis::FromRedisValue>(conn: &mut impl redis::ConnectionLike, args: &[&str]) -> T {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(conn)
        .unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

#[test]
fn the_selected_implementation_is_the_one_running() {
    let server = RedisServer::start();
    let running = server.describe();
    eprintln!("harness server: {running}");
    // An explicit $REDIS_SERVER may name any build; otherwise QUEUEGEN_SERVER decides.
    if std::env::var_os("REDIS_SERVER").is_none() {
        let selected = ServerKind::from_env().name();
        assert!(
            running.starts_with(&format!("{selected} ")),
            "QUEUEGEN_SERVER selects {selected}, but the harness started {running}"
        );
    }
}

#[test]
fn an_aof_always_server_keeps_an_acknowledged_xadd_across_kill9_and_restart() {
    let mut server = RedisServer::start_with_aof(Fsync::Always);
    let (port, dir, first_pid) = (server.port(), server.dir(), server.pid());
    let id: String = run(&mut server.connection(), &["XADD", "jobs", "*", "job", "1"]);

    server.kill9();
    assert!(!server.is_running());
    assert!(
        redis::Client::open(server.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_millis(200))
            .is_err(),
        "a killed server accepts no connection"
    );
    server.restart();
    assert_eq!((server.port(), server.dir()), (port, dir));
    assert_ne!(server.pid(), first_pid, "a new process");
    let entries: Vec<(String, Vec<String>)> =
        run(&mut server.connection(), &["XRANGE", "jobs", "-", "+"]);
    assert_eq!(entries, vec![(id, vec!["job".to_owned(), "1".to_owned()])]);
}

#[test]
fn an_aof_everysec_server_reloads_its_rewritten_aof_on_restart() {
    let mut server = RedisServer::start_with_aof(Fsync::EverySec);
    let mut conn = server.connection();
    let policy: Vec<String> = run(&mut conn, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(policy[1], "everysec");
    let () = run(&mut conn, &["SET", "kept", "yes"]);
    // A finished rewrite has the key on disk whatever the fsync policy, so
    // this checks the restart's reload, not the loss window.
    let _: String = run(&mut conn, &["BGREWRITEAOF"]);
    while !server
        .info("persistence")
        .lines()
        .any(|line| line.trim() == "aof_rewrite_in_progress:0")
        || server
            .info("persistence")
            .lines()
            .any(|line| line.trim() == "aof_rewrite_scheduled:1")
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.restart();
    let kept: Option<String> = run(&mut server.connection(), &["GET", "kept"]);
    assert_eq!(kept.as_deref(), Some("yes"));
}

#[test]
fn a_paused_server_answers_nothing_until_resumed_and_is_reaped_on_drop() {
    let server = RedisServer::start();
    server.pause();
    assert!(server.is_paused());
    // A raw socket: the kernel still accepts the connection and the bytes,
    // but nobody reads them.
    let mut socket = TcpStream::connect(server.addr()).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    socket.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    let silent = socket
        .read(&mut reply)
        .expect_err("no answer within 200 ms");
    assert!(
        matches!(silent.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "a timeout, not {silent}"
    );

    server.resume();
    assert!(!server.is_paused());
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.read_exact(&mut reply).unwrap();
    assert_eq!(
        &reply, b"+PONG\r\n",
        "the waiting PING is answered after resume"
    );

    server.pause();
    let proc_entry = format!("/proc/{}", server.pid());
    drop(server);
    assert!(
        !Path::new(&proc_entry).exists(),
        "a paused server was killed and reaped"
    );
}

#[test]
fn the_pair_replicates_and_promotion_moves_its_address_to_the_replica() {
    let mut pair = RedisPair::start();
    let first_primary = pair.primary().port();
    let mut through_address = pair.client().get_connection().unwrap();
    let () = run(&mut through_address, &["SET", "before", "1"]);
    pair.wait_synced();
    let replicated: Option<String> = run(&mut pair.replica().connection(), &["GET", "before"]);
    assert_eq!(replicated.as_deref(), Some("1"));

    pair.promote_replica();
    assert_ne!(pair.primary().port(), first_primary);
    assert_eq!(
        pair.replica().port(),
        first_primary,
        "the old primary now follows"
    );
    let cut: redis::RedisResult<String> = redis::cmd("PING").query(&mut through_address);
    assert!(cut.is_err(), "connections through the address were cut");
    let mut reconnected = pair.client().get_connection().unwrap();
    let role: String = run(&mut reconnected, &["INFO", "replication"]);
    assert!(role.contains("role:master"), "{role}");
    let () = run(&mut reconnected, &["SET", "after", "2"]);
    let kept: Option<String> = run(&mut reconnected, &["GET", "before"]);
    assert_eq!(kept.as_deref(), Some("1"));
    pair.wait_synced();
    let replicated: Option<String> = run(&mut pair.replica().connection(), &["GET", "after"]);
    assert_eq!(replicated.as_deref(), Some("2"));
}

#[test]
fn a_killed_primary_is_replaced_by_its_replica_and_restarts_as_its_replica() {
    let mut pair = RedisPair::start_with(&Fsync::Always.args());
    let () = run(
        &mut pair.client().get_connection().unwrap(),
        &["SET", "k", "v"],
    );
    pair.wait_synced();
    pair.primary_mut().kill9();
    pair.promote_replica();
    let () = run(
        &mut pair.client().get_connection().unwrap(),
        &["SET", "k2", "v2"],
    );

    pair.replica_mut().restart();
    pair.wait_synced();
    let mut old_primary = pair.replica().connection();
    let info: String = run(&mut old_primary, &["INFO", "replication"]);
    assert!(info.contains("role:slave"), "{info}");
    let values: Vec<Option<String>> = run(&mut old_primary, &["MGET", "k", "k2"]);
    assert_eq!(values, vec![Some("v".to_owned()), Some("v2".to_owned())]);
}

#[test]
fn an_acl_user_given_at_start_logs_in_keeps_its_rules_and_survives_restart() {
    let reader = AclUser::with_rules("reader", "pw1", &["~*", "+@read", "+ping", "+acl|whoami"]);
    let mut server = RedisServer::start_with(&reader.server_args());
    let () = run(&mut server.connection(), &["SET", "k", "v"]);
    let check = |server: &RedisServer| {
        let mut conn = redis::Client::open(server.url_as(&reader))
            .unwrap()
            .get_connection()
            .unwrap();
        let whoami: String = run(&mut conn, &["ACL", "WHOAMI"]);
        assert_eq!(whoami, "reader");
        let refused: redis::RedisResult<()> = redis::cmd("SET").arg("k").arg("w").query(&mut conn);
        let err = refused.expect_err("a reader may not SET");
        assert_eq!(err.code(), Some("NOPERM"), "{err}");
    };
    check(&server);
    server.restart();
    check(&server);

    let late = AclUser::new("late", "pw2");
    server.add_user(&late);
    let mut conn = redis::Client::open(server.url_as(&late))
        .unwrap()
        .get_connection()
        .unwrap();
    let () = run(&mut conn, &["SET", "k", "w"]);
}

#[test]
fn a_cluster_has_three_primaries_owning_every_slot_each_with_a_replica() {
    let cluster = RedisCluster::start();
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{primaries:#?}");
    let owned: u32 = primaries
        .iter()
        .flat_map(|primary| &primary.slots)
        .map(|&(first, last)| u32::from(last - first) + 1)
        .sum();
    assert_eq!(owned, 16384);
    assert!(primaries.iter().all(|primary| !primary.slots.is_empty()));
    let replicas = cluster.replicas();
    assert_eq!(replicas.len(), 3);
    let mut followed: Vec<&str> = replicas
        .iter()
        .map(|replica| replica.primary_id.as_deref().unwrap())
        .collect();
    followed.sort_unstable();
    let mut primary_ids: Vec<&str> = primaries.iter().map(|p| p.id.as_str()).collect();
    primary_ids.sort_unstable();
    assert_eq!(followed, primary_ids, "each primary has one replica");

    let slot = cluster.slot_of("{ocr-03}:ready");
    assert_eq!(
        cluster.slot_of("work:{ocr-03}:dead"),
        slot,
        "one hash tag, one slot"
    );
    assert!(cluster.node_for_key("{ocr-03}:ready").owns(slot));
    let mut conn = cluster.client().get_connection().unwrap();
    let () = run(&mut conn, &["SET", "{ocr-03}:ready", "x"]);
    let direct: Option<String> = run(
        &mut cluster
            .server(cluster.node_for_slot(slot).port)
            .connection(),
        &["GET", "{ocr-03}:ready"],
    );
    assert_eq!(
        direct.as_deref(),
        Some("x"),
        "the key lives on its slot's owner"
    );
}

#[test]
fn a_migrated_slot_takes_its_keys_and_stream_state_to_the_new_owner() {
    let cluster = RedisCluster::start();
    let key = "{q-07}:ready";
    let source = cluster.node_for_key(key);
    let target = cluster
        .primaries()
        .into_iter()
        .find(|primary| primary.port != source.port)
        .unwrap();
    let mut conn = cluster.client().get_connection().unwrap();
    let _: String = run(&mut conn, &["XADD", key, "*", "job", "1"]);
    let () = run(&mut conn, &["XGROUP", "CREATE", key, "g", "0"]);
    let _: redis::Value = run(
        &mut conn,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"],
    );
    let () = run(&mut conn, &["SET", "{q-07}:marker", "m"]);

    cluster.migrate_slots_of_keys(&[key, "{q-07}:marker"], target.port);

    assert_eq!(cluster.node_for_key(key).port, target.port);
    let mut on_target = cluster.server(target.port).connection();
    let marker: Option<String> = run(&mut on_target, &["GET", "{q-07}:marker"]);
    assert_eq!(marker.as_deref(), Some("m"));
    let pending: redis::streams::StreamPendingReply = run(&mut on_target, &["XPENDING", key, "g"]);
    assert_eq!(
        pending.count(),
        1,
        "the group's pending entry moved with the stream"
    );
    let on_source: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg("{q-07}:marker")
        .query(&mut cluster.server(source.port).connection());
    let err = on_source.expect_err("the old owner redirects");
    assert_eq!(
        err.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::Moved),
        "{err}"
    );
    let through_client: Option<String> = run(&mut conn, &["GET", "{q-07}:marker"]);
    assert_eq!(through_client.as_deref(), Some("m"));
}

#[test]
fn failover_of_a_live_primary_promotes_its_replica_and_demotes_it() {
    let cluster = RedisCluster::start();
    let key = "{failover}:k";
    let mut conn = cluster.client().get_connection().unwrap();
    let () = run(&mut conn, &["SET", key, "before"]);
    let primary = cluster.node_for_key(key);
    let replica = cluster.replica_of(primary.port);

    let promoted = cluster.failover(primary.port);

    assert_eq!(promoted.port, replica.port);
    assert!(promoted.is_primary());
    assert_eq!(cluster.node_for_key(key).port, replica.port);
    assert_eq!(
        cluster.replica_of(replica.port).port,
        primary.port,
        "the old primary follows its successor"
    );
    let kept: Option<String> = run(
        &mut cluster.server(replica.port).connection(),
        &["GET", key],
    );
    assert_eq!(kept.as_deref(), Some("before"));
}

#[test]
fn failover_of_a_killed_primary_takes_over_and_the_restarted_node_rejoins_as_replica() {
    let mut cluster = RedisCluster::start();
    let key = "{takeover}:k";
    let primary = cluster.node_for_key(key);
    let replica = cluster.replica_of(primary.port);
    let mut on_primary = cluster.server(primary.port).connection();
    let () = run(&mut on_primary, &["SET", key, "before"]);
    // WAIT on the connection that wrote: the replica holds the key before its primary dies.
    let acked: i64 = run(&mut on_primary, &["WAIT", "1", "5000"]);
    assert_eq!(acked, 1);

    cluster.kill9_primary(primary.port);
    let promoted = cluster.failover(primary.port);

    assert_eq!(promoted.port, replica.port);
    assert_eq!(cluster.node_for_key(key).port, replica.port);
    let kept: Option<String> = run(
        &mut cluster.server(replica.port).connection(),
        &["GET", key],
    );
    assert_eq!(kept.as_deref(), Some("before"));

    cluster.restart(primary.port);
    assert_eq!(cluster.replica_of(replica.port).port, primary.port);
}

#[test]
fn a_cluster_started_with_an_acl_user_serves_it_on_every_node() {
    let worker = AclUser::new("worker", "pw3");
    let cluster = RedisCluster::start_with(&worker.server_args());
    let urls = cluster.urls_as(&worker);
    assert_eq!(urls.len(), 6);
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut conn = client.get_connection().unwrap();
    for tag in ["a", "b", "c", "d", "e", "f"] {
        let key = format!("{{{tag}}}:k");
        let () = run(&mut conn, &["SET", &key, tag]);
        let mut direct = redis::Client::open(worker.url_for(cluster.node_for_key(&key).port))
            .unwrap()
            .get_connection()
            .unwrap();
        let whoami: String = run(&mut direct, &["ACL", "WHOAMI"]);
        assert_eq!(whoami, "worker");
    }
}
