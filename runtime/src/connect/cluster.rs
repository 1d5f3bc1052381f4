//! A Cluster connection that follows its password and certificate files without a restart: live node connections re-AUTH when the password file changes, and the client is rebuilt when a certificate file changes or a connection-level error surfaces.
//!
//! The redis crate's `ClusterClient` keeps the password and certificates it
//! was built with for every node connection it ever makes. Two remedies:
//!
//! - Password: [`FilePassword`] is the crate's `StreamingCredentialsProvider`
//!   for the password file. One task per [`super::Redis`] handle reads the
//!   file every [`FILE_POLL`] (1 s); each node connection takes the current
//!   password when it connects, and when the file's content changes every
//!   live node connection sends `AUTH user new-password` (the crate does
//!   this). A file that cannot be read or is empty keeps the last good
//!   password. If the server refuses the new password (the file changed
//!   before the ACL did), that connection stays logged in with the old one
//!   and takes the new one at its next reconnection.
//! - Certificates: a live `ClusterClient` cannot swap them, so the shared
//!   connection ([`Rebuilding`]) makes a new client and connection from the
//!   files when, checked at most every [`FILE_POLL`] on the next command, a
//!   CA / client certificate / key file's content changed, or after a
//!   connection-level error. The old connection stays in use until the new
//!   one is up (a rotation half-done on the server side, or a seed node that
//!   is down, leaves it working as before). Reader connections need no
//!   wrapper: each is a new client made from the files, and the intake makes
//!   a new one after an error.
//!
//! Like the other connections, a failed command is answered with its error
//! and never resent here: the caller knows whether it may be repeated.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::Stream;
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use redis::cluster_async::ClusterConnection;
use redis::RedisResult;
use tokio::sync::{watch, Mutex};

use super::connector::Connector;
use crate::error::Result;

/// How often the password file is read, and how often (at most) the shared
/// connection compares its certificate files with those it was built from.
pub(super) const FILE_POLL: Duration = Duration::from_secs(1);

/// The password file as a stream of credentials for the redis crate. Cheap
/// to clone; the reading task stops when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct FilePassword {
    watched: Arc<Watched>,
}

struct Watched {
    current: watch::Receiver<BasicAuth>,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

impl FilePassword {
    /// Starts reading the password file of `connector`, when its password
    /// comes from one (`None` otherwise: nothing to follow). Must be called
    /// inside a Tokio runtime; a first read that fails is the error.
    pub(crate) fn watch(connector: &Connector) -> Result<Option<FilePassword>> {
        let Some(first) = connector.file_credentials() else {
            return Ok(None);
        };
        let (user, password) = first?;
        let (sender, current) = watch::channel(BasicAuth::new(user, password));
        let connector = connector.clone();
        let poller = tokio::spawn(async move {
            let mut tick = tokio::time::interval(FILE_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut failing = false;
            loop {
                tick.tick().await;
                match connector.file_credentials() {
                    Some(Ok((_, password))) => {
                        failing = false;
                        let changed = sender.send_if_modified(|auth| {
                            let changed = auth.password() != password;
                            if changed {
                                auth.set_password(password);
                            }
                            changed
                        });
                        if changed {
                            tracing::info!(server = %connector.addr(), "the password file changed; the Cluster's live node connections re-authenticate with it");
                        }
                    }
                    // Mid-rotation (a file being replaced) or emptied: the
                    // last good password stays; said once per bad spell.
                    Some(Err(err)) if !failing => {
                        failing = true;
                        tracing::warn!(error = %err, "keeping the last password read");
                    }
                    Some(Err(_)) | None => {}
                }
            }
        });
        Ok(Some(FilePassword {
            watched: Arc::new(Watched { current, poller }),
        }))
    }
}

impl StreamingCredentialsProvider for FilePassword {
    /// The current credentials at once (the crate takes the first item
    /// when a node connection logs in), then each change of the file. The
    /// stream holds no reference to the task, so it ends when the task does.
    fn subscribe(&self) -> Pin<Box<dyn Stream<Item = RedisResult<BasicAuth>> + Send + 'static>> {
        let mut receiver = self.watched.current.clone();
        receiver.mark_changed();
        Box::pin(futures_util::stream::unfold(
            receiver,
            |mut receiver| async move {
                receiver.changed().await.ok()?;
                let auth = receiver.borrow_and_update().clone();
                Some((Ok(auth), receiver))
            },
        ))
    }
}

/// The shared Cluster connection when certificate files are named: remade
/// from the files after they change or after a connection-level error.
/// Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Rebuilding {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    password: Option<FilePassword>,
    response_timeout: Duration,
    state: Mutex<State>,
}

struct State {
    /// Counts rebuilds: an error only condemns the connection it came from.
    generation: u64,
    connection: ClusterConnection,
    /// The certificate files' contents the connection was made from.
    files: Vec<Option<Vec<u8>>>,
    /// A connection-level error or changed files call for a new connection.
    stale: bool,
    /// When the files were last compared, and a rebuild last tried.
    checked: Instant,
    tried: Option<Instant>,
}

impl Rebuilding {
    /// Wraps `first`, made from `connector`'s files as they are now.
    pub(super) fn new(
        connector: Connector,
        password: Option<FilePassword>,
        response_timeout: Duration,
        first: ClusterConnection,
    ) -> Rebuilding {
        let files = connector.tls_file_contents();
        Rebuilding {
            inner: Arc::new(Inner {
                connector,
                password,
                response_timeout,
                state: Mutex::new(State {
                    generation: 0,
                    connection: first,
                    files,
                    stale: false,
                    checked: Instant::now(),
                    tried: None,
                }),
            }),
        }
    }

    /// What `send` answers through the connection in use. An error that
    /// says the connection (not the command) failed marks it for a
    /// rebuild, if it is still the one in use.
    pub(super) async fn send<T, F>(
        &self,
        send: impl FnOnce(ClusterConnection) -> F,
    ) -> RedisResult<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let (generation, connection) = self.current().await;
        let reply = send(connection).await;
        let connection_failed = |err: &redis::RedisError| {
            err.is_unrecoverable_error()
                || err.is_io_error()
                || err.is_timeout()
                || err.is_connection_dropped()
                || err.is_connection_refusal()
        };
        if reply.as_ref().is_err_and(connection_failed) {
            let mut state = self.inner.state.lock().await;
            state.stale |= state.generation == generation;
        }
        reply
    }

    /// The connection to use now, and its generation. Rebuilds first when
    /// due (at most once per [`FILE_POLL`]); a failed rebuild keeps the old
    /// connection. Callers wait on the lock while one rebuilds.
    async fn current(&self) -> (u64, ClusterConnection) {
        let mut state = self.inner.state.lock().await;
        if state.checked.elapsed() >= FILE_POLL {
            state.checked = Instant::now();
            state.stale |= self.inner.connector.tls_file_contents() != state.files;
        }
        let tried_lately = state.tried.is_some_and(|tried| tried.elapsed() < FILE_POLL);
        if state.stale && !tried_lately {
            state.tried = Some(Instant::now());
            // Read before connecting: a file replaced meanwhile is seen next time.
            let files = self.inner.connector.tls_file_contents();
            match self.rebuild().await {
                Ok(connection) => {
                    tracing::info!(server = %self.inner.connector.addr(), "reconnected to the Cluster, with the certificate and key files read again");
                    state.generation += 1;
                    state.connection = connection;
                    state.files = files;
                    state.stale = false;
                }
                Err(err) => tracing::warn!(
                    server = %self.inner.connector.addr(),
                    error = %err,
                    "could not reconnect to the Cluster with the files as they are now; keeping the current connection"
                ),
            }
        }
        (state.generation, state.connection.clone())
    }

    async fn rebuild(&self) -> std::result::Result<ClusterConnection, Box<dyn std::error::Error>> {
        let inner = &self.inner;
        let password = inner.password.as_ref();
        let client = super::cluster_client(&inner.connector, password, inner.response_timeout)?;
        Ok(client.get_async_connection().await?)
    }

    pub(super) fn db(&self) -> i64 {
        self.inner.connector.db()
    }
}
