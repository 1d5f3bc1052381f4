//! A primary and a replica (`--replicaof`) behind one stable address that follows the primary, for replication and promotion tests.
//!
//! Clients connect to [`RedisPair::url`], a [`Forwarder`] in front of the
//! current primary (what a virtual IP or a Sentinel-updated DNS name is in
//! production). [`RedisPair::promote_replica`] makes the replica the primary
//! (`REPLICAOF NO ONE`) and moves that address to it, cutting every open
//! connection: clients reconnect to the same URL and find the new primary,
//! without the test handing them a new one.

use std::time::{Duration, Instant};

use crate::acl::AclUser;
use crate::forwarder::Forwarder;
use crate::redis_server::RedisServer;

/// How long a replica may take to connect, sync or catch up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// A running primary and its replica; dropping it kills both.
pub struct RedisPair {
    primary: RedisServer,
    replica: RedisServer,
    forwarder: Forwarder,
}

impl RedisPair {
    /// Starts a primary, then a replica of it; returns once the replica's
    /// link is up and it has caught up.
    pub fn start() -> RedisPair {
        Self::start_with::<&str>(&[])
    }

    /// As [`RedisPair::start`], with `extra` arguments for both servers
    /// (e.g. [`crate::Fsync::args`], [`AclUser::server_args`]).
    pub fn start_with<S: AsRef<str>>(extra: &[S]) -> RedisPair {
        let primary = RedisServer::start_with(extra);
        let mut replica_args: Vec<String> = extra.iter().map(|a| a.as_ref().to_owned()).collect();
        replica_args.extend([
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            primary.port().to_string(),
        ]);
        let replica = RedisServer::start_with(&replica_args);
        let forwarder = Forwarder::start(primary.port());
        let pair = RedisPair {
            primary,
            replica,
            forwarder,
        };
        pair.wait_synced();
        pair
    }

    /// The current primary (the former replica after a promotion).
    pub fn primary(&self) -> &RedisServer {
        &self.primary
    }

    /// The current replica (the former primary after a promotion).
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// The primary, to kill, pause or restart it.
    pub fn primary_mut(&mut self) -> &mut RedisServer {
        &mut self.primary
    }

    /// The replica, to kill, pause or restart it.
    pub fn replica_mut(&mut self) -> &mut RedisServer {
        &mut self.replica
    }

    /// The stable URL that always leads to the current primary.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.forwarder.port())
    }

    /// [`RedisPair::url`], logging in as `user`.
    pub fn url_as(&self, user: &AclUser) -> String {
        user.url_for(self.forwarder.port())
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a loopback URL is valid")
    }

    /// Adds `user` to both servers (ACLs do not replicate).
    pub fn add_user(&self, user: &AclUser) {
        self.primary.add_user(user);
        self.replica.add_user(user);
    }

    /// Waits until the replica's link to the primary is up and it has
    /// applied everything the primary has written so far (equal offsets).
    /// Panics with both servers' replication info after a timeout.
    pub fn wait_synced(&self) {
        let deadline = Instant::now() + SYNC_TIMEOUT;
        loop {
            let primary = self.primary.info("replication");
            let replica = self.replica.info("replication");
            if synced(&primary, &replica, self.replica.port()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replica on port {} did not catch up with the primary on port {} within {SYNC_TIMEOUT:?}:\n--- primary\n{primary}\n--- replica\n{replica}\n--- replica log\n{}",
                self.replica.port(),
                self.primary.port(),
                self.replica.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Promotes the replica to primary: `REPLICAOF NO ONE` on it, then the
    /// stable address moves to it (open connections through it are cut),
    /// and the two swap roles in this pair. The old primary, if it still
    /// answers, becomes a replica of the new one, as Sentinel would make it
    /// (writes it acknowledged that had not reached the replica are lost,
    /// which is what promotion does); killed, it restarts as one; paused, it
    /// is left a primary until [`RedisPair::reattach_replica`].
    /// Does not wait for a sync first: call [`RedisPair::wait_synced`]
    /// before, for a promotion without loss.
    pub fn promote_replica(&mut self) {
        let () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query(&mut self.replica.connection())
            .unwrap_or_else(|err| panic!("REPLICAOF NO ONE on {}: {err}", self.replica.addr()));
        self.replica.restart_as_replica_of(None);
        let deadline = Instant::now() + SYNC_TIMEOUT;
        while !self
            .replica
            .info("replication")
            .lines()
            .any(|line| line.trim() == "role:master")
        {
            assert!(
                Instant::now() < deadline,
                "the replica on port {} did not become a primary",
                self.replica.port()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::mem::swap(&mut self.primary, &mut self.replica);
        self.forwarder.switch_to(self.primary.port());
        self.replica
            .restart_as_replica_of(Some(self.primary.port()));
        if self.replica.is_answering() {
            self.reattach_replica();
        }
    }

    /// Makes the current replica (say, a resumed or restarted former
    /// primary) follow the current primary, and waits until it has synced.
    pub fn reattach_replica(&mut self) {
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(self.primary.port())
            .query(&mut self.replica.connection())
            .unwrap_or_else(|err| panic!("REPLICAOF on {}: {err}", self.replica.addr()));
        self.replica
            .restart_as_replica_of(Some(self.primary.port()));
        self.wait_synced();
    }
}

/// Whether `replica_port` is an online replica of the primary whose
/// `INFO replication` is `primary`, with its link up, at the primary's
/// offset (the replica's own offset: the primary learns it only from the
/// replica's once-a-second acknowledgement).
fn synced(primary: &str, replica: &str, replica_port: u16) -> bool {
    let field = |info: &str, name: &str| -> Option<String> {
        info.lines()
            .find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_owned)
    };
    let Some(offset) = field(primary, "master_repl_offset") else {
        return false;
    };
    // `slave0:ip=127.0.0.1,port=6380,state=online,offset=1234,lag=0`
    let port = format!("port={replica_port}");
    let replica_online = primary.lines().any(|line| {
        let Some((name, value)) = line.trim_end().split_once(':') else {
            return false;
        };
        let fields: Vec<&str> = value.split(',').collect();
        name.starts_with("slave")
            && fields.contains(&port.as_str())
            && fields.contains(&"state=online")
    });
    replica_online
        && field(replica, "role").as_deref() == Some("slave")
        && field(replica, "master_link_status").as_deref() == Some("up")
        && field(replica, "slave_repl_offset").as_deref() == Some(offset.as_str())
}
