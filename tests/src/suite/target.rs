//! Where a scenario runs: a target deploys fresh servers for it and says how its workers log in.
//!
//! Every scenario is a function of a [`Target`]. A target is a topology (a
//! standalone server, a primary with a replica behind a stable address, or a
//! 6-node Redis Cluster) and a login: the default user, or a worker ACL user
//! allowed only the commands a worker, a producer and the ledger send, on the
//! scenario's own keys. Adding a topology is adding a variant here and its
//! arms in [`Target::deploy_with`] and the [`Deployment`]'s methods, not
//! rewriting scenarios: they reach the servers only through the deployment
//! (its URLs, its admin connection, "every primary", "fail over the primary").
//! Which scenarios run on which target is the suite's choice (its
//! `scenarios/mod.rs`), not the target's.

use std::process::Command;

use queuegen_runtime::admin::ensure_groups;
use queuegen_runtime::roles::Role;
use queuegen_runtime::{QueueConfig, Redis};

use crate::{library, RedisCluster, RedisPair, RedisServer};

/// How the servers of a target are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One redis-server.
    Standalone,
    /// A primary and a replica ([`RedisPair`]); workers, producers and the
    /// admin connection get the pair's stable URL (a forwarder in front of
    /// the current primary), so after a promotion they reconnect to the same
    /// URL and find the new primary.
    Pair,
    /// Three primaries and three replicas; workers get the URL of one node.
    Cluster,
}

/// Whom workers and producers log in as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    /// The default user (no ACL).
    Default,
    /// [`WORKER_USER`]: a least-privilege ACL user, on the scenario's keys only.
    WorkerAcl,
}

/// The ACL user workers log in as on a [`Login::WorkerAcl`] target.
pub const WORKER_USER: &str = "qg-worker";
const WORKER_PASSWORD: &str = "worker-secret";

/// The worker role's rules as `queuegen generate` writes them to
/// `users.acl` (`queuegen_runtime::roles`), for the suite's library; plus
/// what the suite's own handler sends for its ledger (a team's handler needs
/// its own commands the same way). The worker processes publish too, which
/// the worker role's commands cover.
fn worker_rules(key_prefix: &str) -> Vec<String> {
    let libraries = [crate::queues::jobs::CONFIG.functions.to_string()];
    let mut rules = Role::Worker.acl_rules(key_prefix, &libraries, crate::acl::server_commands());
    rules.extend(["+hincrby", "+hgetall"].map(str::to_owned));
    // The ledger's result store (`{prefix}:ledger:results:*`): the handler's
    // own keys, outside the generated role's replaceable keys.
    rules.push(format!("(~{key_prefix}:ledger:* +set +get +pexpire)"));
    rules
}

/// One column of the suite: a topology and a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub topology: Topology,
    pub login: Login,
}

impl Target {
    pub const STANDALONE: Target = Target::new(Topology::Standalone, Login::Default);
    pub const STANDALONE_ACL: Target = Target::new(Topology::Standalone, Login::WorkerAcl);
    pub const PAIR: Target = Target::new(Topology::Pair, Login::Default);
    pub const CLUSTER: Target = Target::new(Topology::Cluster, Login::Default);
    pub const CLUSTER_ACL: Target = Target::new(Topology::Cluster, Login::WorkerAcl);

    pub const fn new(topology: Topology, login: Login) -> Target {
        Target { topology, login }
    }

    /// Every target the suite runs, in table order.
    pub fn all() -> Vec<Target> {
        vec![
            Target::STANDALONE,
            Target::STANDALONE_ACL,
            Target::PAIR,
            Target::CLUSTER,
            Target::CLUSTER_ACL,
        ]
    }

    /// `standalone`, `standalone+acl`, `pair`, `cluster`, `cluster+acl`.
    pub fn name(&self) -> String {
        let topology = match self.topology {
            Topology::Standalone => "standalone",
            Topology::Pair => "pair",
            Topology::Cluster => "cluster",
        };
        match self.login {
            Login::Default => topology.to_owned(),
            Login::WorkerAcl => format!("{topology}+acl"),
        }
    }

    /// Fresh servers for one scenario whose keys all start with `key_prefix`.
    pub async fn deploy(&self, key_prefix: &str) -> Deployment {
        self.deploy_with(key_prefix, &[]).await
    }

    /// As [`Target::deploy`], every server started with `server_args` too
    /// (e.g. `["--maxmemory-policy", "allkeys-lru"]`).
    pub async fn deploy_with(&self, key_prefix: &str, server_args: &[&str]) -> Deployment {
        let servers = match self.topology {
            Topology::Standalone => Servers::Standalone(RedisServer::start_with(server_args)),
            Topology::Pair => Servers::Pair(RedisPair::start_with(server_args)),
            Topology::Cluster => Servers::Cluster(RedisCluster::start_with(server_args)),
        };
        let admin_url = servers.url();
        let admin = Redis::connect(&admin_url)
            .await
            .unwrap_or_else(|err| panic!("connecting to {admin_url} as the default user: {err}"));
        let worker_url = match self.login {
            Login::Default => admin_url,
            Login::WorkerAcl => {
                for node in servers.all() {
                    create_worker_user(&node.url(), key_prefix).await;
                }
                with_login(&admin_url, WORKER_USER, WORKER_PASSWORD)
            }
        };
        Deployment {
            target: *self,
            worker_keys: (self.login == Login::WorkerAcl).then(|| key_prefix.to_owned()),
            servers,
            admin,
            worker_url,
        }
    }
}

/// `ACL SETUSER` of [`WORKER_USER`] with [`worker_rules`] under `key_prefix`,
/// on the server at `url` (ACL users are per node: neither a replica nor a
/// Cluster gets them from another node).
async fn create_worker_user(url: &str, key_prefix: &str) {
    let mut setuser = redis::cmd("ACL");
    setuser
        .arg("SETUSER")
        .arg(WORKER_USER)
        .arg("reset")
        .arg("on")
        .arg(format!(">{WORKER_PASSWORD}"))
        .arg(worker_rules(key_prefix));
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|err| panic!("connecting to {url}: {err}"));
    let () = setuser
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|err| panic!("ACL SETUSER {WORKER_USER}: {err}"));
}

/// `redis://user:password@host:port/` from `redis://host:port/`.
fn with_login(url: &str, user: &str, password: &str) -> String {
    let rest = url
        .strip_prefix("redis://")
        .unwrap_or_else(|| panic!("{url} is not a redis:// URL"));
    format!("redis://{user}:{password}@{rest}")
}

/// The server processes of one deployment.
enum Servers {
    Standalone(RedisServer),
    Pair(RedisPair),
    Cluster(RedisCluster),
}

impl Servers {
    /// Every node, primaries and replicas alike.
    fn all(&self) -> Vec<&RedisServer> {
        match self {
            Servers::Standalone(server) => vec![server],
            Servers::Pair(pair) => vec![pair.primary(), pair.replica()],
            Servers::Cluster(cluster) => cluster.servers().iter().collect(),
        }
    }

    /// The URL clients start from: the server, the pair's stable address
    /// (never a node's own: that one stops being the primary), or one
    /// Cluster node.
    fn url(&self) -> String {
        match self {
            Servers::Standalone(server) => server.url(),
            Servers::Pair(pair) => pair.url(),
            Servers::Cluster(cluster) => cluster.url(),
        }
    }
}

/// The servers of one scenario, and how to reach them.
pub struct Deployment {
    target: Target,
    servers: Servers,
    /// The key prefix of the worker ACL user, on a `+acl` target.
    worker_keys: Option<String>,
    /// The default user: what `queuegen apply` and an operator use.
    admin: Redis,
    worker_url: String,
}

impl Deployment {
    pub fn target(&self) -> Target {
        self.target
    }

    /// The URL workers and producers connect with (and as whom).
    pub fn worker_url(&self) -> &str {
        &self.worker_url
    }

    /// A new connection as workers log in.
    pub async fn worker_redis(&self) -> Redis {
        Redis::connect(&self.worker_url)
            .await
            .unwrap_or_else(|err| panic!("connecting as the worker: {err}"))
    }

    /// The default user's connection: setup and inspection. On a pair it
    /// goes through the stable address, so after a promotion it reconnects
    /// to the new primary, as workers do.
    pub fn admin(&self) -> &Redis {
        &self.admin
    }

    /// Loads the Function library and creates the queue's groups, as
    /// `queuegen apply` does, as the default user.
    pub async fn apply(&self, config: &QueueConfig) {
        self.load_library().await;
        self.create_groups(config).await;
    }

    /// Creates the queue's groups (and streams), nothing else.
    pub async fn create_groups(&self, config: &QueueConfig) {
        ensure_groups(&self.admin, config)
            .await
            .unwrap_or_else(|err| panic!("creating the groups of {}: {err}", config.queue));
    }

    /// `CONFIG SET parameter value` on every server.
    pub async fn config_set(&self, parameter: &str, value: &str) {
        for server in self.servers.all() {
            let mut conn = server
                .client()
                .get_multiplexed_async_connection()
                .await
                .unwrap_or_else(|err| panic!("connecting to {}: {err}", server.url()));
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(parameter)
                .arg(value)
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|err| panic!("CONFIG SET {parameter} {value}: {err}"));
        }
    }

    /// Kills the server with SIGKILL and starts it again on the same port
    /// and dir (so from its AOF, when it keeps one), waiting until it has
    /// loaded. `ACL SETUSER` is not in the AOF, so the worker user is made
    /// again, as a deployment's ACL file would restore it. Standalone only.
    pub async fn crash_and_restart(&mut self) {
        match &mut self.servers {
            Servers::Standalone(server) => {
                server.kill9();
                server.restart();
            }
            Servers::Pair(_) | Servers::Cluster(_) => {
                panic!("crash_and_restart is for a standalone server")
            }
        }
        if let Some(key_prefix) = &self.worker_keys {
            for node in self.servers.all() {
                create_worker_user(&node.url(), key_prefix).await;
            }
        }
    }

    /// The Cluster, on a Cluster target (to reshard it).
    pub fn cluster(&self) -> Option<&RedisCluster> {
        match &self.servers {
            Servers::Cluster(cluster) => Some(cluster),
            Servers::Standalone(_) | Servers::Pair(_) => None,
        }
    }

    /// Makes a replica the primary of `key`, with every client still
    /// connected, and says in words what happened. On a Cluster,
    /// `CLUSTER FAILOVER` of the primary holding `key`'s slot: the replica
    /// catches up first, and this returns once every node agrees. On a
    /// pair, the replica is promoted at once, without catching up (as
    /// Sentinel promotes one after its primary failed), the stable address
    /// moves to it cutting every connection through it, and the old primary
    /// resyncs as its replica: writes it acknowledged that had not reached
    /// the replica are lost, unless their client waited for a replica
    /// (`WAIT`). Blocks its thread until done. Not on a standalone server.
    pub fn fail_over(&mut self, key: &str) -> String {
        match &mut self.servers {
            Servers::Cluster(cluster) => {
                let primary = cluster.node_for_key(key).port;
                let promoted = cluster.failover(primary);
                format!("127.0.0.1:{primary} failed over to {}", promoted.addr())
            }
            Servers::Pair(pair) => {
                let primary = pair.primary().addr();
                pair.promote_replica();
                format!(
                    "replica {} promoted over {primary} (connections cut, the old primary resynced as its replica)",
                    pair.primary().addr()
                )
            }
            Servers::Standalone(_) => panic!("a standalone server has no replica to fail over to"),
        }
    }

    /// Loads the tests' Function library on every primary.
    pub async fn load_library(&self) {
        library::load(&self.admin).await;
    }

    /// `host:port` of every primary, as error messages name them.
    pub fn primaries(&self) -> Vec<String> {
        match &self.servers {
            Servers::Standalone(server) => vec![format!("127.0.0.1:{}", server.port())],
            // Workers know the pair's primary only by its stable address.
            Servers::Pair(pair) => vec![pair.client().get_connection_info().addr().to_string()],
            Servers::Cluster(cluster) => {
                cluster.primaries().iter().map(|node| node.addr()).collect()
            }
        }
    }

    /// Stops every server process with SIGSTOP (they answer nothing, their
    /// clients' commands wait in the socket) until the guard resumes them.
    pub fn pause(&self) -> Paused {
        let pids: Vec<u32> = self
            .servers
            .all()
            .into_iter()
            .map(RedisServer::pid)
            .collect();
        assert!(signal_all("STOP", &pids), "kill -STOP {pids:?} failed");
        Paused { pids }
    }
}

/// Servers stopped by [`Deployment::pause`]; resumed (SIGCONT) on drop.
pub struct Paused {
    pids: Vec<u32>,
}

impl Paused {
    /// Resumes the servers now (dropping the guard does it too).
    pub fn resume(self) {}
}

impl Drop for Paused {
    fn drop(&mut self) {
        // Also while unwinding from a failed scenario: never panic here.
        if !signal_all("CONT", &self.pids) {
            eprintln!("kill -CONT {:?} failed", self.pids);
        }
    }
}

/// Sends `kill -<signal>` to each of `pids`; whether every one was sent.
fn signal_all(signal: &str, pids: &[u32]) -> bool {
    pids.iter().all(|pid| {
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .is_ok_and(|status| status.success())
    })
}
