//! One server of a deployment, addressed directly: the standalone server or one Cluster primary.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::{ConnectionError, Error, Result};

/// How long a command sent to one node may take to answer.
const NODE_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// One server, reached directly (not through Cluster routing): for the
/// commands every primary must see, like `FUNCTION LOAD` and `INFO`.
#[derive(Clone)]
pub struct Node {
    client: redis::Client,
}

impl Node {
    pub(super) fn new(client: redis::Client) -> Node {
        Node { client }
    }

    /// `host:port`, without credentials, for messages.
    pub(crate) fn addr(&self) -> String {
        self.client.get_connection_info().addr().to_string()
    }

    /// The node's client (its address, credentials and TLS settings).
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    /// A new direct connection to this node.
    pub async fn connection(&self) -> Result<MultiplexedConnection> {
        let config = super::direct_config(NODE_RESPONSE_TIMEOUT);
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|err| Error::redis(format!("connecting to {}", self.addr()), err))
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Node").field(&self.addr()).finish()
    }
}

/// The distinct primaries of a `CLUSTER SLOTS` reply, in the order of the
/// slots they own, each reached with `seed`'s credentials and TLS settings.
pub(super) fn primaries_of(slots: &Value, seed: &ConnectionInfo) -> Result<Vec<Node>> {
    let mut seen: Vec<(String, u16)> = Vec::new();
    for range in ranges_of(slots, seed)? {
        if !seen.contains(&range.primary) {
            seen.push(range.primary);
        }
    }
    seen.into_iter()
        .map(|(host, port)| node_at(seed, host, port))
        .collect()
}

/// The primary that owns `slot` in a `CLUSTER SLOTS` reply, reached with
/// `seed`'s credentials and TLS settings; `None` when no range holds it
/// (the slot is not served, as during a failover).
pub(super) fn primary_of_slot(
    slots: &Value,
    seed: &ConnectionInfo,
    slot: u16,
) -> Result<Option<Node>> {
    ranges_of(slots, seed)?
        .into_iter()
        .find(|range| range.first <= slot && slot <= range.last)
        .map(|range| node_at(seed, range.primary.0, range.primary.1))
        .transpose()
}

/// One slot range of a `CLUSTER SLOTS` reply and its primary (host, port).
struct SlotRange {
    first: u16,
    last: u16,
    primary: (String, u16),
}

fn ranges_of(slots: &Value, seed: &ConnectionInfo) -> Result<Vec<SlotRange>> {
    let malformed = |what: &str| {
        Error::from(ConnectionError::ClusterSlots {
            what: what.to_owned(),
            reply: format!("{slots:?}"),
        })
    };
    let Value::Array(ranges) = slots else {
        return Err(malformed("not an array"));
    };
    let number = |value: Option<&Value>, what: &str| match value {
        Some(Value::Int(n)) => {
            u16::try_from(*n).map_err(|_| malformed(&format!("{what} is out of range")))
        }
        _ => Err(malformed(&format!("{what} is missing"))),
    };
    let mut parsed = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(parts) = range else {
            return Err(malformed("a slot range is not an array"));
        };
        let Some(Value::Array(primary)) = parts.get(2) else {
            return Err(malformed("a slot range has no primary"));
        };
        let Some(host) = primary.first().and_then(super::text_of) else {
            return Err(malformed("a primary has no host"));
        };
        let port = match primary.get(1) {
            Some(Value::Int(port)) => {
                u16::try_from(*port).map_err(|_| malformed("a port is out of range"))?
            }
            _ => return Err(malformed("a primary has no port")),
        };
        // An empty or `?` host means "the address you reached me on".
        let host = if host.is_empty() || host == "?" {
            seed_host(seed)
        } else {
            host
        };
        parsed.push(SlotRange {
            first: number(parts.first(), "a range's first slot")?,
            last: number(parts.get(1), "a range's last slot")?,
            primary: (host, port),
        });
    }
    Ok(parsed)
}

/// A node at `host:port` with `seed`'s credentials and TLS settings.
fn node_at(seed: &ConnectionInfo, host: String, port: u16) -> Result<Node> {
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    redis::Client::open(seed.clone().set_addr(addr))
        .map(Node::new)
        .map_err(|err| Error::redis("making a client for a Cluster primary", err))
}

fn seed_host(seed: &ConnectionInfo) -> String {
    match seed.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn each_primary_is_listed_once_with_the_seed_credentials() {
        let node = |port: i64| Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")]);
        let slots = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5000),
                node(7001),
                node(7004),
            ]),
            Value::Array(vec![
                Value::Int(5001),
                Value::Int(10000),
                node(7002),
                node(7005),
            ]),
            Value::Array(vec![
                Value::Int(10001),
                Value::Int(10100),
                node(7001),
                node(7004),
            ]),
        ]);
        let seed = "redis://worker:secret@127.0.0.1:7002"
            .into_connection_info()
            .unwrap();
        let primaries = primaries_of(&slots, &seed).unwrap();
        let addrs: Vec<String> = primaries.iter().map(Node::addr).collect();
        assert_eq!(addrs, ["127.0.0.1:7001", "127.0.0.1:7002"]);
        assert_eq!(
            primaries[0]
                .client
                .get_connection_info()
                .redis_settings()
                .username(),
            Some("worker")
        );
    }

    #[test]
    fn the_primary_of_a_slot_is_the_one_whose_range_holds_it() {
        let node = |port: i64| Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")]);
        let range = |first: i64, last: i64, port: i64| {
            Value::Array(vec![Value::Int(first), Value::Int(last), node(port)])
        };
        let slots = Value::Array(vec![range(0, 5000, 7001), range(5001, 16383, 7002)]);
        let seed = "redis://127.0.0.1:7002".into_connection_info().unwrap();
        let addr = |slot| {
            primary_of_slot(&slots, &seed, slot)
                .unwrap()
                .map(|node| node.addr())
        };
        assert_eq!(addr(0).as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(addr(5000).as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(addr(5001).as_deref(), Some("127.0.0.1:7002"));
        assert_eq!(addr(16383).as_deref(), Some("127.0.0.1:7002"));
        let partial = Value::Array(vec![range(0, 5000, 7001)]);
        assert!(primary_of_slot(&partial, &seed, 9000).unwrap().is_none());
    }

    #[test]
    fn a_reply_without_a_primary_is_an_error_not_a_panic() {
        let slots = Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1)])]);
        let seed = "redis://127.0.0.1:7000".into_connection_info().unwrap();
        let err = primaries_of(&slots, &seed).unwrap_err();
        assert!(err.to_string().contains("has no primary"), "{err}");
    }
}
