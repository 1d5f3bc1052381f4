//! The test harness itself: private servers on distinct ports, reaped on drop.

use std::path::Path;

use queuegen_tests::RedisServer;

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
