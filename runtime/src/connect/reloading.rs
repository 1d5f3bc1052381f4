//! The shared standalone connection when a password or certificate comes from a file: each reconnection reads the files again.
//!
//! The redis crate's `ConnectionManager` reconnects with the credentials
//! and certificates its client was built with, so it would keep presenting
//! a rotated-out password or client certificate. This connection instead
//! drops its socket after a connection-level error (as the manager does)
//! and makes the next one from a client built anew by the [`Connector`].
//! Like the manager, it answers the failed command with the error and does
//! not resend it: the caller decides whether a command is safe to repeat.

use std::future::Future;
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

    /// What `send` answers through the socket in use. A connection-level
    /// error drops that socket, if it is still the one in use.
    async fn send<T, F>(&self, send: impl FnOnce(MultiplexedConnection) -> F) -> RedisResult<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let (generation, socket) = self.socket().await?;
        let reply = send(socket).await;
        if reply
            .as_ref()
            .is_err_and(|err| err.is_unrecoverable_error())
        {
            let mut current = self.inner.current.lock().await;
            if current.0 == generation {
                current.1 = None;
            }
        }
        reply
    }
}

impl ConnectionLike for Reloading {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.send(move |mut socket| async move { socket.req_packed_command(cmd).await }))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.send(move |mut socket| async move {
            socket.req_packed_commands(pipeline, offset, count).await
        }))
    }

    fn get_db(&self) -> i64 {
        self.inner.connector.db()
    }
}
