//! What a connection needs beyond its URL: the user, where the password comes from, and the TLS files.

use std::path::PathBuf;

/// How to authenticate and which certificates to use, on top of the URL.
/// Every file named here is read again each time a connection is made or
/// remade, so a rotated password or certificate (a Kubernetes Secret
/// mounted as files, say) takes effect at the next reconnection without
/// restarting the process.
///
/// An option given here wins over the same part of the URL (`--user` over
/// `redis://user@…`, a password file over `redis://:password@…`).
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    pub(super) username: Option<String>,
    pub(super) password: Option<PasswordSource>,
    pub(super) tls_ca: Option<PathBuf>,
    pub(super) tls_cert: Option<PathBuf>,
    pub(super) tls_key: Option<PathBuf>,
}

/// Where the password comes from.
#[derive(Clone)]
pub enum PasswordSource {
    /// This password, fixed for the life of the handle.
    Literal(String),
    /// The file's content (one trailing newline ignored), read at every
    /// (re)connection.
    File(PathBuf),
}

impl std::fmt::Debug for PasswordSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PasswordSource::Literal(_) => f.write_str("Literal(<redacted>)"),
            PasswordSource::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl ConnectOptions {
    /// No options: everything comes from the URL.
    pub fn new() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// The ACL user to authenticate as.
    pub fn username(mut self, username: impl Into<String>) -> ConnectOptions {
        self.username = Some(username.into());
        self
    }

    /// A fixed password.
    pub fn password(mut self, password: impl Into<String>) -> ConnectOptions {
        self.password = Some(PasswordSource::Literal(password.into()));
        self
    }

    /// A password read from `path` at every (re)connection.
    pub fn password_file(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.password = Some(PasswordSource::File(path.into()));
        self
    }

    /// The PEM file of the certificate authorities that sign the server's
    /// certificate (`rediss://` only); without it, the system's roots.
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.tls_ca = Some(path.into());
        self
    }

    /// The client certificate (PEM chain) and its private key (PEM), for
    /// servers that ask clients for one (`tls-auth-clients yes`).
    pub fn tls_client_cert(
        self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> ConnectOptions {
        self.tls_client_cert_file(cert).tls_client_key_file(key)
    }

    /// Only the client certificate; [`ConnectOptions::tls_client_key_file`]
    /// must name its key (for callers that get the two separately, like the CLI).
    pub fn tls_client_cert_file(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.tls_cert = Some(path.into());
        self
    }

    /// Only the client certificate's private key.
    pub fn tls_client_key_file(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.tls_key = Some(path.into());
        self
    }

    /// `true` when some part of the connection is read from a file, which
    /// each reconnection must read again.
    pub(crate) fn reads_files(&self) -> bool {
        matches!(self.password, Some(PasswordSource::File(_))) || self.has_tls_files()
    }

    /// `true` when TLS files are named (which needs a `rediss://` URL).
    pub(super) fn has_tls_files(&self) -> bool {
        self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some()
    }
}
