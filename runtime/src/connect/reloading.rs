//! The shared standalone connection when a password or certificate comes from a file: each reconnection reads the files again.
//!
//! The redis crate's `ConnectionManager` reconnects with the credentials
//! and certificates its client was built with, so it would keep presenting
//! a rotated-out password or client certificate. This connection instead
//! drops its socket after a connection-level error (as the manager does)
//! and makes the next one from a client built anew by the [`Connector`].
//! Like the manager, it answers the failed command with the error and does
//! not resend it: the caller decides whether a command is safe to repeat.

use std::sync::Arc;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::Mutex;

use super::connector::Connector;

/// A standalone connection that reconnects from freshly read files. Cheap
/// to clone; clones share the socket.
#[derive(Clone)]
pub struct Reloading {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    config: AsyncConnectionConfig,
    /// The socket in use, if any, and how many sockets came before it: a
    /// failed command only drops the socket it ran on, not a newer one.
    current: Mutex<(u64, Option<MultiplexedConnection>)>,
}

impl Reloading {
    /// Wraps `first`, the connection just made from `connector`.
    pub(super) fn new(
        connector: Connector,
        config: AsyncConnectionConfig,
        first: MultiplexedConnection,
    ) -> Reloading {
        Reloading {
            inner: Arc::new(Inner {
                connector,
                config,
                current: Mutex::new((0, Some(first))),
            }),
        }
    }

    /// The socket in use, connecting anew (files read now) when there is none.
    /// Callers wait on the lock while one of them connects, so a dropped
    /// connection is remade once, not once per waiting command.
    async fn socket(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let mut current = self.inner.current.lock().await;
        if let Some(socket) = &current.1 {
            return Ok((current.0, socket.clone()));
        }
        let client = self.inner.connector.client().map_err(|err| {
            // An I/O kind: callers treat it like a server that cannot be
            // reached yet and retry, which suits a file mid-rotation.
            redis::RedisError::from(std::io::Error::other(err.to_string()))
        })?;
        let socket = client
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await?;
        tracing::info!(server = %self.inner.connector.addr(), "reconnected, with the credential and certificate files read again");
        current.0 += 1;
        current.1 = Some(socket.clone());
        Ok((current.0, socket))
    }

    /// Drops the socket `generation` if it is still the one in use.
    async fn forget(&self, generation: u64, err: &redis::RedisError) {
        if !err.is_unrecoverable_error() {
            return;
        }
        let mut current = self.inner.current.lock().await;
        if current.0 == generation {
            current.1 = None;
        }
    }
}

impl ConnectionLike for Reloading {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut socket) = self.socket().await?;
            let reply = socket.req_packed_command(cmd).await;
            if let Err(err) = &reply {
                self.forget(generation, err).await;
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut socket) = self.socket().await?;
            let replies = socket.req_packed_commands(pipeline, offset, count).await;
            if let Err(err) = &replies {
                self.forget(generation, err).await;
            }
            replies
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.connector.db()
    }
}
