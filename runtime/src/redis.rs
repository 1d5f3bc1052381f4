//! Connections to Redis: one shared multiplexed connection for short commands, dedicated ones for blocking reads.
//!
//! Standalone Redis only for now. The redis crate's async connections default
//! to a 500 ms response timeout, which silently breaks every `BLOCK` read
//! longer than that, so every connection made here sets its own timeout.
//! A blocking `XREADGROUP` holds its connection until it returns, so it never
//! runs on the shared connection that acks and publishes use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::AsyncConnectionConfig;

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::producer::admission::Admission;

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
    client: redis::Client,
    shared: ConnectionManager,
    /// Producer admission readings per queue, shared by every producer made
    /// from this handle (and its clones).
    admissions: Arc<Mutex<HashMap<AdmissionKey, Arc<Admission>>>>,
}

/// One queue's admission settings: the first ready key names prefix and queue.
type AdmissionKey = (String, u16, Duration, Duration);

impl Redis {
    /// Connects to `url` (`redis://[user:password@]host:port[/db]`) and opens the shared connection.
    pub async fn connect(url: impl AsRef<str>) -> Result<Redis> {
        let client = redis::Client::open(url.as_ref())
            .map_err(|err| Error::redis("parsing the Redis URL", err))?;
        // One plain attempt first: the connection manager retries with
        // backoff for about ten seconds, which only hides a wrong URL or a
        // server that is down.
        let probe = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(SHARED_RESPONSE_TIMEOUT));
        drop(
            client
                .get_multiplexed_async_connection_with_config(&probe)
                .await
                .map_err(|err| {
                    Error::redis(format!("connecting to {}", Self::addr(&client)), err)
                })?,
        );
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(SHARED_RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT));
        let shared = client
            .get_connection_manager_with_config(config)
            .await
            .map_err(|err| Error::redis(format!("connecting to {}", Self::addr(&client)), err))?;
        Ok(Redis {
            client,
            shared,
            admissions: Arc::default(),
        })
    }

    /// The shared multiplexed connection for acks, publishes and admin commands.
    /// It reconnects by itself after a connection error; never block on it.
    pub fn shared(&self) -> ConnectionManager {
        self.shared.clone()
    }

    /// The underlying client, e.g. to open further connections.
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Opens a new connection of its own for blocking reads of up to `block`;
    /// its response timeout exceeds `block`, so a read that waits the full
    /// block time is not mistaken for a dead server.
    pub async fn blocking_connection(&self, block: Duration) -> Result<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(block + BLOCKING_READ_MARGIN));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|err| {
                Error::redis(
                    format!(
                        "opening a reader connection to {}",
                        Self::addr(&self.client)
                    ),
                    err,
                )
            })
    }

    /// The admission state of the queue `config` describes, made by `make`
    /// the first time a producer of it asks.
    pub(crate) fn admission(
        &self,
        config: &QueueConfig,
        limit: Duration,
        make: impl FnOnce() -> Admission,
    ) -> Arc<Admission> {
        let key = (
            config.ready_key(0),
            config.partitions,
            limit,
            config.admission_refresh,
        );
        let mut admissions = self
            .admissions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        admissions
            .entry(key)
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }

    /// `host:port` of the server, without credentials, for error messages.
    fn addr(client: &redis::Client) -> String {
        client.get_connection_info().addr().to_string()
    }
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("addr", &Self::addr(&self.client))
            .finish_non_exhaustive()
    }
}
