//! A private 6-node Redis Cluster (3 primaries, 3 replicas) on free loopback ports, built by `redis-cli --cluster create`, with failover, kill -9 and live slot migration for failure tests.
//!
//! Every method that changes the topology returns only once every running
//! node agrees on it: `cluster_state:ok`, all 16384 slots owned and
//! reachable, the same slot owners and roles in every node's view, replicas
//! linked to their primaries. Nodes run with `cluster-node-timeout` 2000 ms
//! so that failure detection and failover take seconds, not the default
//! 15 s. The CLI is `$REDIS_CLI`, else the one [`crate::server_kind`] selects.
//!
//! Like [`RedisServer`], it is synchronous. A `#[tokio::test]` whose own tasks
//! (workers, producers) must keep running during a failover or a migration
//! calls it through `tokio::task::spawn_blocking` (it is `Send + Sync`; share
//! it in an `Arc`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::acl::AclUser;
use crate::redis_server::{free_cluster_port, RedisServer};
use crate::server_kind;

/// Slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// Nodes in the harness's cluster: three primaries with one replica each.
const NODES: usize = 6;
/// `cluster-node-timeout` in ms: small, so failures are detected quickly.
pub const NODE_TIMEOUT_MS: u64 = 2000;
/// How long the cluster may take to agree on a topology.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times `--cluster create` is tried on fresh nodes.
const CREATE_ATTEMPTS: usize = 3;
/// Keys moved per `MIGRATE` while resharding a slot.
const MIGRATE_BATCH: usize = 100;

/// One node as the cluster describes it (`CLUSTER NODES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    /// The node ID of the primary this replica follows; `None` for a primary.
    pub primary_id: Option<String>,
    /// Slot ranges (inclusive) this primary owns.
    pub slots: Vec<(u16, u16)>,
    /// Flagged `fail` or `fail?` by the node whose view this is.
    pub failing: bool,
}

impl ClusterNode {
    pub fn is_primary(&self) -> bool {
        self.primary_id.is_none()
    }

    /// Whether this node owns `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots
            .iter()
            .any(|&(first, last)| (first..=last).contains(&slot))
    }

    /// `127.0.0.1:{port}`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:{port}/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// A running 6-node cluster; dropping it kills every node.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts six nodes, joins them with `--cluster create ...
    /// --cluster-replicas 1`, and waits until every node agrees the
    /// cluster is whole. Panics with the CLI's output and the node logs if
    /// it cannot.
    pub fn start() -> RedisCluster {
        Self::start_with::<&str>(&[])
    }

    /// As [`RedisCluster::start`], with `extra` arguments for every node
    /// (e.g. [`AclUser::server_args`], `["--maxmemory-policy", "allkeys-lru"]`).
    pub fn start_with<S: AsRef<str>>(extra: &[S]) -> RedisCluster {
        Self::start_with_per_node(extra, Vec::new)
    }

    /// As [`RedisCluster::start_with`], each node also getting the
    /// arguments `per_node` makes for it (called again on every start attempt,
    /// so a port it picks is picked afresh): e.g. a TLS port ([`crate::tls::TlsCluster`]).
    pub fn start_with_per_node<S: AsRef<str>>(
        extra: &[S],
        per_node: impl Fn() -> Vec<String> + Sync,
    ) -> RedisCluster {
        let mut failures = Vec::new();
        for _ in 0..CREATE_ATTEMPTS {
            let cluster = RedisCluster {
                nodes: start_nodes(extra, &per_node),
            };
            match cluster.create() {
                Ok(()) => {
                    cluster.wait_converged();
                    return cluster;
                }
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "the cluster was not created after {CREATE_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    fn create(&self) -> Result<(), String> {
        let cli = server_kind::cli_binary();
        let output = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(self.nodes.iter().map(RedisServer::addr))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|err| format!("running {cli:?}: {err}"))?;
        if output.status.success() {
            return Ok(());
        }
        Err(format!(
            "{cli:?} --cluster create exited {}:\n{}{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.logs()
        ))
    }

    /// Every node's server, in start order (to kill, pause or inspect one).
    pub fn servers(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The server listening on `port`; panics if no node does.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// As [`RedisCluster::server`], mutable: to kill -9, restart or pause it directly.
    pub fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// `127.0.0.1:{port}` of every node.
    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::addr).collect()
    }

    /// Seed URLs for a cluster client: every node that answers.
    pub fn urls(&self) -> Vec<String> {
        self.answering().map(RedisServer::url).collect()
    }

    /// [`RedisCluster::urls`], logging in as `user`.
    pub fn urls_as(&self, user: &AclUser) -> Vec<String> {
        self.answering().map(|node| node.url_as(user)).collect()
    }

    /// One seed URL (a node that answers): enough for a cluster client,
    /// which discovers the rest.
    pub fn url(&self) -> String {
        self.any_answering().url()
    }

    /// A cluster client seeded with [`RedisCluster::urls`].
    pub fn client(&self) -> redis::cluster::ClusterClient {
        redis::cluster::ClusterClient::new(self.urls()).expect("loopback seed URLs are valid")
    }

    /// Adds `user` to every node that answers (ACLs do not propagate in a
    /// cluster). Lasts until a node restarts; to survive restarts, start
    /// with [`AclUser::server_args`] among the extra arguments.
    pub fn add_user(&self, user: &AclUser) {
        for node in self.answering() {
            node.add_user(user);
        }
    }

    /// Every node of the cluster as an answering node currently sees it.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let node = self.any_answering();
        let (_, view) = parse_cluster_nodes(&cluster_nodes(node));
        view
    }

    /// The primaries that own slots, by their first slot.
    pub fn primaries(&self) -> Vec<ClusterNode> {
        let mut primaries: Vec<ClusterNode> = self
            .nodes()
            .into_iter()
            .filter(|node| node.is_primary() && !node.slots.is_empty())
            .collect();
        primaries.sort_by_key(|node| node.slots[0].0);
        primaries
    }

    /// The replicas not flagged failing, by port.
    pub fn replicas(&self) -> Vec<ClusterNode> {
        let mut replicas: Vec<ClusterNode> = self
            .nodes()
            .into_iter()
            .filter(|node| !node.is_primary() && !node.failing)
            .collect();
        replicas.sort_by_key(|node| node.port);
        replicas
    }

    /// The replica following the primary on `primary_port`.
    pub fn replica_of(&self, primary_port: u16) -> ClusterNode {
        let nodes = self.nodes();
        let primary = node_on(&nodes, primary_port);
        nodes
            .iter()
            .find(|node| node.primary_id.as_deref() == Some(primary.id.as_str()) && !node.failing)
            .cloned()
            .unwrap_or_else(|| {
                panic!("the primary on port {primary_port} has no working replica: {nodes:#?}")
            })
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, so hash tags count as the server counts them).
    pub fn slot_of(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any_answering().connection())
            .unwrap_or_else(|err| panic!("CLUSTER KEYSLOT {key}: {err}"))
    }

    /// The primary that owns `slot`.
    pub fn node_for_slot(&self, slot: u16) -> ClusterNode {
        assert!(slot < SLOTS, "slot {slot} is not below {SLOTS}");
        let nodes = self.nodes();
        nodes
            .iter()
            .find(|node| node.is_primary() && node.owns(slot))
            .cloned()
            .unwrap_or_else(|| panic!("no primary owns slot {slot}: {nodes:#?}"))
    }

    /// The primary that owns `key`'s slot.
    pub fn node_for_key(&self, key: &str) -> ClusterNode {
        self.node_for_slot(self.slot_of(key))
    }

    /// Fails the primary on `primary_port` over to its replica and returns
    /// the promoted node once every running node agrees. A primary that
    /// answers hands over cleanly (`CLUSTER FAILOVER`: no acknowledged
    /// write is lost, and it becomes the replica); a killed or paused one
    /// is taken over (`CLUSTER FAILOVER TAKEOVER`: no agreement needed,
    /// writes it acknowledged but did not replicate are lost).
    pub fn failover(&self, primary_port: u16) -> ClusterNode {
        let nodes = self.nodes();
        let primary = node_on(&nodes, primary_port).clone();
        assert!(
            primary.is_primary() && !primary.slots.is_empty(),
            "port {primary_port} is not a primary owning slots: {primary:?}"
        );
        let replica = self.replica_of(primary_port);
        let answering = self.server(primary_port).is_answering();
        let mut failover = redis::cmd("CLUSTER");
        failover.arg("FAILOVER");
        if !answering {
            failover.arg("TAKEOVER");
        }
        let () = failover
            .query(&mut self.server(replica.port).connection())
            .unwrap_or_else(|err| panic!("CLUSTER FAILOVER on {}: {err}", replica.addr()));
        self.wait_until(
            &format!("{} owns the slots of {}", replica.addr(), primary.addr()),
            |views| {
                views.values().all(|(_, nodes)| {
                    let promoted = node_on(nodes, replica.port);
                    promoted.is_primary() && promoted.slots == primary.slots
                })
            },
        );
        node_on(&self.nodes(), replica.port).clone()
    }

    /// Kills the primary on `primary_port` with SIGKILL; the cluster notices
    /// after `cluster-node-timeout`, and its replica takes over on its own
    /// a little later, or at once with [`RedisCluster::failover`].
    pub fn kill9_primary(&mut self, primary_port: u16) {
        let node = node_on(&self.nodes(), primary_port).clone();
        assert!(
            node.is_primary(),
            "port {primary_port} is not a primary: {node:?}"
        );
        self.server_mut(primary_port).kill9();
    }

    /// Restarts the node on `port` (killed or not) with its `nodes.conf`,
    /// and waits until the cluster agrees again. A former primary whose
    /// slots moved rejoins as a replica of its successor.
    pub fn restart(&mut self, port: u16) {
        self.server_mut(port).restart();
        self.wait_converged();
    }

    /// Live resharding of `slot` with its keys to the primary on `to_port`:
    /// `SETSLOT IMPORTING` on the target, `MIGRATING` on the source, every
    /// key moved with `MIGRATE ... KEYS` (streams keep their groups and
    /// pending lists), then `SETSLOT NODE` on the target, the source and
    /// every other primary. Clients keep working throughout (ASK, then
    /// MOVED). Returns once every running node agrees on the new owner.
    pub fn migrate_slot(&self, slot: u16, to_port: u16) {
        let nodes = self.nodes();
        let source = self.node_for_slot(slot);
        let target = node_on(&nodes, to_port).clone();
        assert!(
            target.is_primary(),
            "port {to_port} is not a primary: {target:?}"
        );
        if source.port == target.port {
            return;
        }
        let setslot = |port: u16, state: &str, node_id: &str| {
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(node_id)
                .query(&mut self.server(port).connection())
                .unwrap_or_else(|err| {
                    panic!("CLUSTER SETSLOT {slot} {state} {node_id} on port {port}: {err}")
                });
        };
        setslot(target.port, "IMPORTING", &source.id);
        setslot(source.port, "MIGRATING", &target.id);
        let mut conn = self.server(source.port).connection();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(MIGRATE_BATCH)
                .query(&mut conn)
                .unwrap_or_else(|err| panic!("CLUSTER GETKEYSINSLOT {slot}: {err}"));
            if keys.is_empty() {
                break;
            }
            let moved: String = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(target.port)
                .arg("")
                .arg(0)
                .arg(10_000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut conn)
                .unwrap_or_else(|err| panic!("MIGRATE of {keys:?} to {}: {err}", target.addr()));
            assert!(
                moved == "OK" || moved == "NOKEY",
                "MIGRATE answered {moved}"
            );
        }
        // The target first, so the slot is never left without an owner
        // that accepts it; then the source, then everyone else.
        setslot(target.port, "NODE", &target.id);
        setslot(source.port, "NODE", &target.id);
        for other in self.primaries() {
            let told = other.port == target.port || other.port == source.port;
            if !told && self.server(other.port).is_answering() {
                setslot(other.port, "NODE", &target.id);
            }
        }
        self.wait_until(
            &format!("slot {slot} belongs to {}", target.addr()),
            |views| {
                views
                    .values()
                    .all(|(_, nodes)| node_on(nodes, target.port).owns(slot))
            },
        );
    }

    /// Migrates the slot of every one of `keys` (each slot once) to the
    /// primary on `to_port`: e.g. the hash tags of several partitions.
    pub fn migrate_slots_of_keys(&self, keys: &[&str], to_port: u16) {
        let slots: BTreeSet<u16> = keys.iter().map(|key| self.slot_of(key)).collect();
        for slot in slots {
            self.migrate_slot(slot, to_port);
        }
    }

    /// Waits until every running node agrees on a whole cluster (see the
    /// module docs); panics with every view and the node logs after a timeout.
    pub fn wait_converged(&self) {
        self.wait_until("the cluster is whole", |_| true);
    }

    /// Waits until the cluster is whole and `condition` holds over every
    /// answering node's parsed view (port → (its own ID, the nodes it sees)).
    fn wait_until(&self, what: &str, condition: impl Fn(&Views) -> bool) {
        let deadline = Instant::now() + CONVERGE_TIMEOUT;
        loop {
            let (views, problem) = self.check_whole();
            let problem =
                problem.or_else(|| (!condition(&views)).then(|| format!("not yet: {what}")));
            let Some(problem) = problem else { return };
            if Instant::now() > deadline {
                panic!(
                    "waiting until {what}: {problem} (after {CONVERGE_TIMEOUT:?})\n{}\n{}",
                    self.raw_views(),
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every answering node's view, and the first reason the cluster is not
    /// yet whole (`None`: it is).
    fn check_whole(&self) -> (Views, Option<String>) {
        let mut views = Views::new();
        let mut problem = None;
        let mut note = |found: String| {
            if problem.is_none() {
                problem = Some(found);
            }
        };
        for node in self.answering() {
            let info: String = match redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut node.connection())
            {
                Ok(info) => info,
                Err(err) => {
                    note(format!("CLUSTER INFO on {}: {err}", node.addr()));
                    continue;
                }
            };
            for expected in [
                "cluster_state:ok",
                "cluster_slots_assigned:16384",
                "cluster_slots_ok:16384",
            ] {
                if !info.lines().any(|line| line.trim() == expected) {
                    note(format!("{} does not report {expected}", node.addr()));
                }
            }
            let (myself, seen) = parse_cluster_nodes(&cluster_nodes(node));
            if seen.len() != NODES {
                note(format!(
                    "{} knows {} nodes, not {NODES}",
                    node.addr(),
                    seen.len()
                ));
            }
            if let Some(me) = seen.iter().find(|seen| seen.id == myself) {
                let replication = node.info("replication");
                if !me.is_primary()
                    && !replication
                        .lines()
                        .any(|l| l.trim() == "master_link_status:up")
                {
                    note(format!(
                        "the replica {} has no link to its primary",
                        node.addr()
                    ));
                }
                // The primary's side too: a replica that finished loading is
                // not yet streamed to until the primary counts it online.
                let followers = seen
                    .iter()
                    .filter(|other| other.primary_id.as_deref() == Some(myself.as_str()))
                    .filter(|other| {
                        self.nodes
                            .iter()
                            .any(|n| n.port() == other.port && n.is_answering())
                    })
                    .count();
                let online = replication
                    .lines()
                    .filter(|line| line.starts_with("slave") && line.contains("state=online"))
                    .count();
                if online < followers {
                    note(format!(
                        "{} has {online} of {followers} replicas online",
                        node.addr()
                    ));
                }
            }
            views.insert(node.port(), (myself, seen));
        }
        if let Some((&first_port, (_, first))) = views.iter().next() {
            let owners = slot_owners(first);
            let covered: u32 = owners.keys().map(|&(a, b)| u32::from(b - a) + 1).sum();
            if covered != u32::from(SLOTS) {
                note(format!(
                    "127.0.0.1:{first_port} sees {covered} of {SLOTS} slots owned"
                ));
            }
            for (&port, (myself, seen)) in &views {
                if slot_owners(seen) != owners {
                    note(format!(
                        "127.0.0.1:{port} and 127.0.0.1:{first_port} disagree on slot owners"
                    ));
                }
                if roles(seen) != roles(first) {
                    note(format!(
                        "127.0.0.1:{port} and 127.0.0.1:{first_port} disagree on roles"
                    ));
                }
                for other in seen {
                    let other_answers = self
                        .nodes
                        .iter()
                        .any(|n| n.port() == other.port && n.is_answering());
                    if other.id != *myself && other_answers && other.failing {
                        note(format!(
                            "127.0.0.1:{port} still flags {} failing",
                            other.addr()
                        ));
                    }
                }
            }
        } else {
            note("no node answers".to_owned());
        }
        (views, problem)
    }

    fn answering(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.is_answering())
    }

    fn any_answering(&self) -> &RedisServer {
        self.answering()
            .next()
            .expect("every cluster node is killed or paused")
    }

    /// Every answering node's `CLUSTER NODES`, for failure messages.
    fn raw_views(&self) -> String {
        self.answering()
            .map(|node| {
                let view = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query::<String>(&mut node.connection())
                    .unwrap_or_else(|err| err.to_string());
                format!("--- CLUSTER NODES on {}\n{view}", node.addr())
            })
            .collect()
    }

    /// The tail of every node's log, for failure messages.
    fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|node| {
                let log = node.log();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- log of {}\n{}", node.addr(), tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // Signal every node first, then reap them: the kills run in parallel.
        for node in &mut self.nodes {
            node.send_kill();
        }
    }
}

/// Tests share a cluster or pair with `spawn_blocking` tasks (see the module docs).
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<RedisCluster>();
    shareable::<crate::RedisPair>();
};

/// Per answering node's port: its own node ID and the nodes it sees.
type Views = BTreeMap<u16, (String, Vec<ClusterNode>)>;

/// Starts the six nodes in parallel, on ports whose bus ports are free.
fn start_nodes<S: AsRef<str>>(
    extra: &[S],
    per_node: &(impl Fn() -> Vec<String> + Sync),
) -> Vec<RedisServer> {
    let timeout = NODE_TIMEOUT_MS.to_string();
    let mut args: Vec<&str> = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &timeout,
    ];
    args.extend(extra.iter().map(AsRef::as_ref));
    std::thread::scope(|scope| {
        let starts: Vec<_> = (0..NODES)
            .map(|_| {
                scope.spawn(|| {
                    RedisServer::start_with_fresh_args(free_cluster_port, || {
                        let mut node_args: Vec<String> =
                            args.iter().map(|arg| (*arg).to_owned()).collect();
                        node_args.extend(per_node());
                        node_args
                    })
                })
            })
            .collect();
        // Join all before propagating a panic, so every started node is dropped (killed).
        let results: Vec<_> = starts.into_iter().map(|start| start.join()).collect();
        let mut nodes = Vec::with_capacity(NODES);
        let mut failure = None;
        for result in results {
            match result {
                Ok(node) => nodes.push(node),
                Err(panic) => failure = Some(panic),
            }
        }
        if let Some(panic) = failure {
            drop(nodes);
            std::panic::resume_unwind(panic);
        }
        nodes
    })
}

fn cluster_nodes(node: &RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut node.connection())
        .unwrap_or_else(|err| panic!("CLUSTER NODES on {}: {err}", node.addr()))
}

/// Parses `CLUSTER NODES` into the viewer's own ID and every node it lists.
///
/// A line: `<id> <ip:port@cport[,hostname]> <flags> <primary|-> <ping> <pong>
/// <epoch> <link> <slot|first-last|[slot->-id]|[slot-<-id]>...`; slots in
/// brackets are mid-migration and not owned yet.
fn parse_cluster_nodes(text: &str) -> (String, Vec<ClusterNode>) {
    let mut myself = String::new();
    let mut nodes = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert!(fields.len() >= 8, "unexpected CLUSTER NODES line {line:?}");
        let port = fields[1]
            .split(['@', ','])
            .next()
            .and_then(|addr| addr.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in CLUSTER NODES line {line:?}"));
        let flags: Vec<&str> = fields[2].split(',').collect();
        if flags.contains(&"myself") {
            myself = fields[0].to_owned();
        }
        let slots = fields[8..]
            .iter()
            .filter(|slot| !slot.starts_with('['))
            .map(|slot| {
                let (first, last) = slot.split_once('-').unwrap_or((slot, slot));
                let parse = |n: &str| -> u16 {
                    n.parse()
                        .unwrap_or_else(|_| panic!("bad slot {slot:?} in {line:?}"))
                };
                (parse(first), parse(last))
            })
            .collect();
        nodes.push(ClusterNode {
            id: fields[0].to_owned(),
            port,
            primary_id: (!flags.contains(&"master")).then(|| fields[3].to_owned()),
            slots,
            failing: flags.contains(&"fail") || flags.contains(&"fail?"),
        });
    }
    (myself, nodes)
}

/// Slot range → owner port, as one view sees it.
fn slot_owners(nodes: &[ClusterNode]) -> BTreeMap<(u16, u16), u16> {
    nodes
        .iter()
        .flat_map(|node| node.slots.iter().map(move |&range| (range, node.port)))
        .collect()
}

/// Port → the port of its primary (itself for a primary), as one view sees it.
fn roles(nodes: &[ClusterNode]) -> BTreeMap<u16, u16> {
    nodes
        .iter()
        .map(|node| {
            let primary = match &node.primary_id {
                None => node.port,
                Some(id) => nodes
                    .iter()
                    .find(|other| other.id == *id)
                    .map_or(0, |other| other.port),
            };
            (node.port, primary)
        })
        .collect()
}

fn node_on(nodes: &[ClusterNode], port: u16) -> &ClusterNode {
    nodes
        .iter()
        .find(|node| node.port == port)
        .unwrap_or_else(|| panic!("no node on port {port} in {nodes:#?}"))
}

#[cfg(test)]
mod tests {
    use super::{parse_cluster_nodes, ClusterNode};

    #[test]
    fn cluster_nodes_lines_parse_with_migrating_slots_left_out() {
        let text = "\
a1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [5461->-b2]
b2 127.0.0.1:30002@40002,host master - 0 1 2 connected 5461-10922 16000
c3 127.0.0.1:30003@40003 slave,fail? a1 0 1 1 connected
";
        let (myself, nodes) = parse_cluster_nodes(text);
        assert_eq!(myself, "a1");
        assert_eq!(
            nodes,
            vec![
                ClusterNode {
                    id: "a1".into(),
                    port: 30001,
                    primary_id: None,
                    slots: vec![(0, 5460)],
                    failing: false
                },
                ClusterNode {
                    id: "b2".into(),
                    port: 30002,
                    primary_id: None,
                    slots: vec![(5461, 10922), (16000, 16000)],
                    failing: false
                },
                ClusterNode {
                    id: "c3".into(),
                    port: 30003,
                    primary_id: Some("a1".into()),
                    slots: vec![],
                    failing: true
                },
            ]
        );
        assert!(nodes[1].owns(16000) && !nodes[1].owns(15999));
    }
}
