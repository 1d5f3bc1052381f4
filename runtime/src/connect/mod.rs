//! Connections to a Redis deployment, standalone or Cluster: the shared connection, blocking readers, and each primary.
//!
//! [`Redis::connect`] finds out which kind of deployment the URL points at
//! (`INFO cluster`) and the rest of the runtime asks this module for "the
//! shared connection" ([`Connection`], routing by slot on a Cluster), "a
//! connection of its own for blocking reads" and "every primary" (Function
//! loading and the start checks run on each).
//!
//! The URL may carry the user and password (`redis://user:pass@host`); the
//! [`ConnectOptions`] of [`Redis::connect_with`] add what should not sit in
//! a URL: a password file, the TLS CA and client certificate files. Those
//! files are read again at every connection the runtime makes (reader
//! connections, each primary's, and the shared one when any file is
//! involved), so rotating them needs no restart. On a Cluster, the
//! password file is also followed by live node connections (re-AUTH), and
//! the shared connection is remade when a certificate file changes
//! (`cluster.rs`).
//!
//! The redis crate's standalone async connections default to a 500 ms
//! response timeout, which silently breaks every `BLOCK` read longer than
//! that, so every connection made here sets its own timeout. A blocking read
//! holds its connection until it returns, so it never runs on the shared
//! connection that acks and publishes use.

mod cluster;
mod connection;
mod connector;
mod node;
mod options;
mod reloading;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, ConnectionInfo, Value};

pub use cluster::Rebuilding;
pub use connection::Connection;
pub use node::Node;
pub use options::{ConnectOptions, PasswordSource};
pub use reloading::Reloading;

use cluster::FilePassword;
use connector::Connector;

use crate::error::{ConnectionError, Error, Result};

/// Response timeout of the shared connection: generous, because a timed-out
/// command may still be applied later and is then retried by its caller.
const SHARED_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long establishing one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much longer than its `BLOCK` time a blocking read may take to answer.
const BLOCKING_READ_MARGIN: Duration = Duration::from_secs(5);

/// A handle on one Redis deployment: cheap to clone, shared by producers and workers.
#[derive(Clone)]
pub struct Redis {
    deployment: Arc<Deployment>,
    shared: Connection,
    /// What the layers above keep per deployment, shared by this handle's
    /// clones (the producers' admission readings per queue).
    state: Arc<Mutex<HashMap<StateKey, Arc<dyn Any + Send + Sync>>>>,
}

/// A piece of [`Redis::shared_state`]: its type and the name its owner gave it.
type StateKey = (TypeId, String);

/// What the URL pointed at, and how to reach it.
struct Deployment {
    /// Makes each new connection's client, with the files read anew.
    connector: Connector,
    /// `true` when the URL names a Cluster node (the seed: the template
    /// for a direct connection to any node).
    cluster: bool,
    /// On a Cluster whose password comes from a file: the file, followed
    /// by every Cluster client of this handle.
    password: Option<FilePassword>,
}

impl Redis {
    /// Connects to `url` (`redis://[user:password@]host:port[/db]`, `rediss://`
    /// for TLS) and opens the shared connection. When the server is a Cluster
    /// node (`cluster_enabled:1`), the URL is the seed: the other nodes are
    /// found from it, commands are routed by slot, and MOVED/ASK and failovers
    /// are followed.
    pub async fn connect(url: impl AsRef<str>) -> Result<Redis> {
        Redis::connect_with(url, ConnectOptions::default()).await
    }

    /// Like [`Redis::connect`], with the user, password source and TLS
    /// files of `options` (each wins over the same part of the URL). A
    /// wrong file or refused password fails here, naming the file or user.
    pub async fn connect_with(url: impl AsRef<str>, options: ConnectOptions) -> Result<Redis> {
        let connector = Connector::new(url.as_ref(), options)?;
        let client = connector.client()?;
        let addr = connector.addr();
        // One plain attempt first: the connection manager retries with
        // backoff for about ten seconds, which only hides a wrong URL or a
        // server that is down. It also tells a Cluster node from a server.
        let shared_config = direct_config(SHARED_RESPONSE_TIMEOUT);
        let mut probe = client
            .get_multiplexed_async_connection_with_config(&shared_config)
            .await
            .map_err(|err| connector.connect_error("connecting to", err))?;
        let cluster_info: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut probe)
            .await;
        let is_cluster = match cluster_info {
            Ok(info) => cluster_enabled(&info),
            // A least-privilege user (say the monitor's) may lack +info: a
            // Cluster would then answer MOVED, which names the problem.
            Err(err) if err.code() == Some("NOPERM") => {
                tracing::warn!(
                    server = %addr,
                    "this user may not run INFO, so it cannot tell a Cluster from a server; assuming a server (grant +info to use a Cluster)"
                );
                false
            }
            Err(err) => {
                let doing = format!("INFO cluster on {addr}, to tell a Cluster from a server");
                return Err(Error::redis(doing, err));
            }
        };
        // On a Cluster the client reconnects to nodes by itself, with the
        // certificates read here and the password file followed; a shared
        // connection with certificate files is remade when they change.
        // Reader connections and direct ones to each primary read the files again.
        let password = match is_cluster {
            true => FilePassword::watch(&connector)?,
            false => None,
        };
        let shared = if is_cluster {
            drop(probe);
            let first = cluster_client(&connector, password.as_ref(), SHARED_RESPONSE_TIMEOUT)?
                .get_async_connection()
                .await
                .map_err(|err| connector.connect_error("connecting to the Cluster through", err))?;
            match connector.has_tls_files() {
                true => Connection::Rebuilding(Rebuilding::new(
                    connector.clone(),
                    password.clone(),
                    SHARED_RESPONSE_TIMEOUT,
                    first,
                )),
                false => Connection::Cluster(first),
            }
        } else if connector.reads_files() {
            // The manager would reconnect with the files as read now.
            Connection::Reloading(Reloading::new(connector.clone(), shared_config, probe))
        } else {
            drop(probe);
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(SHARED_RESPONSE_TIMEOUT))
                .set_connection_timeout(Some(CONNECT_TIMEOUT));
            Connection::Standalone(
                client
                    .get_connection_manager_with_config(config)
                    .await
                    .map_err(|err| connector.connect_error("connecting to", err))?,
            )
        };
        let deployment = Deployment {
            connector,
            cluster: is_cluster,
            password,
        };
        Ok(Redis {
            deployment: Arc::new(deployment),
            shared,
            state: Arc::default(),
        })
    }

    /// The shared connection for acks, publishes and admin commands. It
    /// reconnects by itself after a connection error and, on a Cluster,
    /// routes each command (and each slot's part of a pipeline) by its key.
    /// Never block on it.
    pub fn shared(&self) -> Connection {
        self.shared.clone()
    }

    /// `true` when the URL pointed at a Cluster node.
    pub fn is_cluster(&self) -> bool {
        self.deployment.cluster
    }

    /// `host:port` of the server, or of the Cluster's seed node, without
    /// credentials, for messages.
    pub fn addr(&self) -> String {
        self.deployment.connector.addr()
    }

    /// Opens a new connection of its own for blocking reads of up to `block`;
    /// its response timeout exceeds `block`, so a read that waits the full
    /// block time is not mistaken for a dead server. On a Cluster it routes
    /// by key like the shared one (a blocking read names keys of one slot).
    pub(crate) async fn blocking_connection(&self, block: Duration) -> Result<Connection> {
        let timeout = block + BLOCKING_READ_MARGIN;
        let connector = &self.deployment.connector;
        if self.deployment.cluster {
            let client = cluster_client(connector, self.deployment.password.as_ref(), timeout)?;
            let doing = "opening a reader connection to the Cluster through";
            return client
                .get_async_connection()
                .await
                .map(Connection::Cluster)
                .map_err(|err| connector.connect_error(doing, err));
        }
        connector
            .client()?
            .get_multiplexed_async_connection_with_config(&direct_config(timeout))
            .await
            .map(Connection::Direct)
            .map_err(|err| connector.connect_error("opening a reader connection to", err))
    }

    /// Opens a connection of its own for blocking reads of up to `block` on
    /// `key` alone. On a standalone server, as [`Redis::blocking_connection`].
    /// On a Cluster, a direct connection to the primary that owns `key`'s
    /// slot, found with `CLUSTER SLOTS`: one socket, where a routed Cluster
    /// connection opens one to every node, and a worker holds one of these
    /// per partition. It does not follow a slot that moves: the read then
    /// fails (`MOVED`, or the connection drops with its node), and the owner
    /// opens a new one.
    pub(crate) async fn key_reader_connection(
        &self,
        key: &str,
        block: Duration,
    ) -> Result<Connection> {
        if !self.deployment.cluster {
            return self.blocking_connection(block).await;
        }
        let connector = &self.deployment.connector;
        let slot = slot_number(key);
        let doing = || {
            format!(
                "CLUSTER SLOTS through {}, to find the primary of {key}",
                connector.addr()
            )
        };
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut self.shared())
            .await
            .map_err(|err| Error::redis(doing(), err))?;
        let Some(node) = node::primary_of_slot(&slots, &connector.connection_info()?, slot)? else {
            return Err(Error::from(ConnectionError::ClusterSlots {
                what: format!("no primary serves the slot of {key}"),
                reply: format!("{slots:?}"),
            }));
        };
        let mut config = direct_config(block + BLOCKING_READ_MARGIN);
        if let Some(password) = &self.deployment.password {
            // Like the routed connections: logs in with the file's current
            // password, and again on the live connection when it changes.
            config = config.set_credentials_provider(password.clone());
        }
        node.client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map(Connection::Direct)
            .map_err(|err| {
                Error::redis(
                    format!("opening a reader connection to {} for {key}", node.addr()),
                    err,
                )
            })
    }

    /// Opens a Pub/Sub connection of its own (RESP2 subscriber mode), with
    /// the credentials and TLS of every other connection and TCP keepalive
    /// ([`SUBSCRIBER_KEEPALIVE`]), so that a dead peer ends its message
    /// stream without a command being sent. On a Cluster it connects to
    /// the first primary that answers (a plain `PUBLISH` reaches the
    /// subscribers of every node), the seed when none is known.
    pub(crate) async fn subscriber(&self) -> Result<redis::aio::PubSub> {
        let connector = &self.deployment.connector;
        let mut clients = Vec::new();
        if self.deployment.cluster {
            match self.primaries().await {
                Ok(nodes) => clients.extend(nodes.into_iter().map(|node| node.client().clone())),
                Err(err) => {
                    tracing::debug!(error = %err, "listing the primaries for a subscriber; trying the seed")
                }
            }
        }
        clients.push(connector.client()?);
        let mut failure = None;
        for client in clients {
            let info = client.get_connection_info().clone();
            let tcp = info
                .tcp_settings()
                .clone()
                .set_keepalive(subscriber_keepalive());
            let addr = info.addr().to_string();
            let client = redis::Client::open(info.set_tcp_settings(tcp))
                .map_err(|err| Error::redis(format!("configuring a subscriber of {addr}"), err))?;
            match tokio::time::timeout(CONNECT_TIMEOUT, client.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => return Ok(pubsub),
                Ok(Err(err)) => failure = Some(connector.connect_error("subscribing on", err)),
                Err(_) => {
                    failure = Some(Error::redis(
                        format!("subscribing on {addr}"),
                        redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut)),
                    ))
                }
            }
        }
        Err(failure.expect("at least the seed was tried"))
    }

    /// Every primary: the one server, or each primary that owns slots in the
    /// Cluster's current topology (`CLUSTER SLOTS`), each with a direct
    /// connection of its own for the commands that must reach every primary
    /// (Function loading, the start checks, `INFO`).
    pub async fn primaries(&self) -> Result<Vec<Node>> {
        let connector = &self.deployment.connector;
        if !self.deployment.cluster {
            return Ok(vec![Node::new(connector.client()?)]);
        }
        let addr = connector.addr();
        let doing = || format!("CLUSTER SLOTS through {addr}, to find the primaries");
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut self.shared())
            .await
            .map_err(|err| Error::redis(doing(), err))?;
        node::primaries_of(&slots, &connector.connection_info()?)
    }

    /// The `T` named `name` that every clone of this handle shares, made by
    /// `make` the first time anyone asks: state a layer above keeps per
    /// deployment (a producer's admission readings, so that
    /// `ocr::producer(&redis)` per request still shares one reading).
    pub(crate) fn shared_state<T: Any + Send + Sync>(
        &self,
        name: String,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = state
            .entry((TypeId::of::<T>(), name))
            .or_insert_with(|| Arc::new(make()));
        Arc::clone(entry)
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("shared state is keyed by its type"))
    }
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("addr", &self.addr())
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

/// The text of each node's answer to `INFO`: one on a server; on a Cluster
/// connection, which sends `INFO` to every primary, one per primary.
#[cfg(test)]
pub(crate) fn info_replies(reply: &redis::Value) -> Vec<String> {
    info_by_node(reply)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// The text of each node's answer to `INFO`, each with the `host:port` of the node that
/// answered (`None` on a server, whose reply does not say).
pub fn info_by_node(reply: &Value) -> Vec<(Option<String>, String)> {
    match reply {
        Value::Map(nodes) => nodes
            .iter()
            .filter_map(|(node, info)| Some((text_of(node), text_of(info)?)))
            .collect(),
        other => text_of(other)
            .into_iter()
            .map(|info| (None, info))
            .collect(),
    }
}

/// A reply that is text (bulk, simple or verbatim), as a string.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// TCP keepalive of a subscriber connection, which sends no command while
/// idle: first probe after this long without traffic, then every
/// [`SUBSCRIBER_KEEPALIVE_INTERVAL`], [`SUBSCRIBER_KEEPALIVE_PROBES`] unanswered
/// probes ending the connection (a dead peer is noticed within about 1 min).
const SUBSCRIBER_KEEPALIVE: Duration = Duration::from_secs(30);
const SUBSCRIBER_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const SUBSCRIBER_KEEPALIVE_PROBES: u32 = 3;

fn subscriber_keepalive() -> redis::io::tcp::socket2::TcpKeepalive {
    let keepalive = redis::io::tcp::socket2::TcpKeepalive::new()
        .with_time(SUBSCRIBER_KEEPALIVE)
        .with_interval(SUBSCRIBER_KEEPALIVE_INTERVAL);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let keepalive = keepalive.with_retries(SUBSCRIBER_KEEPALIVE_PROBES);
    keepalive
}

/// The number of `key`'s Cluster slot. The crate computes a key's slot but
/// keeps its number private; its `Slot`s compare equal, so this finds it
/// among the 16,384 (once per reader connection opened).
fn slot_number(key: &str) -> u16 {
    use redis::cluster_routing::Slot;
    let slot = Slot::for_key(key);
    (0..16_384)
        .find(|&number| Slot::new(number) == Some(slot))
        .expect("a key's slot is one of the 16,384")
}

/// The settings of every direct (non-reconnecting) connection made here.
fn direct_config(response_timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(response_timeout))
}

/// A Cluster client seeded by the URL's node, with the credentials and
/// certificates as the files hold them now (used on every node), the
/// password file followed when there is one (`password`), and an explicit
/// response timeout: the crate sets none by default.
fn cluster_client(
    connector: &Connector,
    password: Option<&FilePassword>,
    response_timeout: Duration,
) -> Result<ClusterClient> {
    let seed: ConnectionInfo = connector.connection_info()?;
    let mut builder = ClusterClient::builder([seed])
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(response_timeout);
    if let Some(password) = password {
        // Each node connection logs in with the file's current password and
        // re-authenticates when it changes.
        builder = builder.set_credentials_provider(password.clone());
    }
    // The builder takes TLS files apart from the seed's settings.
    if let Some(certificates) = connector.certificates()? {
        builder = builder.certs(certificates);
    }
    builder.build().map_err(|err| {
        Error::redis(
            format!("configuring the Cluster client for {}", connector.addr()),
            err,
        )
    })
}

/// `cluster_enabled:1` in an `INFO cluster` reply.
fn cluster_enabled(info: &str) -> bool {
    info.lines()
        .any(|line| line.trim_end() == "cluster_enabled:1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_s_slot_number_is_the_one_the_server_names() {
        // `CLUSTER KEYSLOT` answers, as in the Cluster specification.
        assert_eq!(slot_number("somekey"), 11058);
        assert_eq!(slot_number("foo"), 12182);
        assert_eq!(
            slot_number("{user1000}.following"),
            slot_number("{user1000}.followers")
        );
    }

    #[test]
    fn info_replies_are_one_per_node() {
        use redis::Value;
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        assert_eq!(
            info_replies(&bulk("redis_version:7.0.15")),
            ["redis_version:7.0.15"]
        );
        let cluster = Value::Map(vec![
            (bulk("127.0.0.1:7001"), bulk("redis_version:7.0.15")),
            (bulk("127.0.0.1:7002"), bulk("redis_version:8.2.0")),
        ]);
        assert_eq!(info_replies(&cluster).len(), 2);
        assert_eq!(
            info_by_node(&cluster)[1],
            (
                Some("127.0.0.1:7002".to_owned()),
                "redis_version:8.2.0".to_owned()
            )
        );
    }

    #[test]
    fn a_cluster_node_says_so_in_info_cluster() {
        assert!(cluster_enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!cluster_enabled("# Cluster\r\ncluster_enabled:0\r\n"));
    }
}

/// Whether the server knows `command` (`xackdel`, or `client|setinfo` for a
/// subcommand), from `COMMAND INFO`: asked, never inferred from a version.
/// `COMMAND INFO` answers nil for a command it does not know.
pub async fn server_has_command<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    command: &str,
) -> Result<bool> {
    let reply: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(command)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("COMMAND INFO {command}"), err))?;
    Ok(matches!(reply.first(), Some(value) if *value != redis::Value::Nil))
}

/// Whether every primary knows `command` ([`server_has_command`] on each of
/// [`Redis::primaries`]): a Cluster routes `COMMAND` to one node, and a
/// command every node of a deployment runs must be on all of them.
pub async fn every_primary_has_command(redis: &Redis, command: &str) -> Result<bool> {
    for node in redis.primaries().await? {
        if !server_has_command(&mut node.connection().await?, command).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the server's `COMMAND DOCS command` lists `token` among its
/// arguments (e.g. `ACKED` of `XTRIM`, Redis 8.2+): asked, never inferred
/// from a version. A command the server does not know has no docs.
pub async fn server_has_argument<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    command: &str,
    token: &str,
) -> Result<bool> {
    let reply: redis::Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(command)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(format!("COMMAND DOCS {command}"), err))?;
    Ok(lists_token(&reply, token))
}

/// [`server_has_argument`] on every primary.
pub async fn every_primary_has_argument(redis: &Redis, command: &str, token: &str) -> Result<bool> {
    for node in redis.primaries().await? {
        if !server_has_argument(&mut node.connection().await?, command, token).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether a `COMMAND DOCS` reply (nested maps and arrays, RESP2 or RESP3)
/// has an argument whose `token` is `token`.
fn lists_token(reply: &redis::Value, token: &str) -> bool {
    use redis::Value;
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    };
    let is_token_pair = |name: &Value, value: &Value| {
        text(name).as_deref() == Some("token")
            && text(value).is_some_and(|value| value.eq_ignore_ascii_case(token))
    };
    match reply {
        Value::Array(items) | Value::Set(items) => {
            items
                .windows(2)
                .any(|pair| is_token_pair(&pair[0], &pair[1]))
                || items.iter().any(|item| lists_token(item, token))
        }
        Value::Map(pairs) => pairs.iter().any(|(name, value)| {
            is_token_pair(name, value) || lists_token(name, token) || lists_token(value, token)
        }),
        _ => false,
    }
}

#[cfg(test)]
mod token_tests {
    use super::lists_token;
    use redis::Value;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn a_token_is_found_among_nested_arguments_only_as_a_token() {
        let docs = Value::Array(vec![
            bulk("xtrim"),
            Value::Array(vec![
                bulk("arguments"),
                Value::Array(vec![Value::Array(vec![
                    bulk("name"),
                    bulk("acked"),
                    bulk("token"),
                    bulk("ACKED"),
                ])]),
            ]),
        ]);
        assert!(lists_token(&docs, "ACKED"));
        assert!(!lists_token(&docs, "KEEPREF"));
        // A name alone is not a token.
        let named = Value::Array(vec![bulk("name"), bulk("ACKED")]);
        assert!(!lists_token(&named, "ACKED"));
        let map = Value::Map(vec![(bulk("token"), bulk("acked"))]);
        assert!(lists_token(&map, "ACKED"));
        assert!(!lists_token(&Value::Nil, "ACKED"));
    }
}
