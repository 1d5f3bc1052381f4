//! Connection errors: a Redis URL, its options or the files they name that cannot be used, and refused credentials.

/// Connecting to Redis cannot work as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// A file a connection needs (password, TLS CA, client certificate or
    /// key) could not be read.
    #[error("reading the {what} {}: {source}", path.display())]
    ConnectionFile {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file a connection needs was read but cannot be used.
    #[error("the {what} {} cannot be used: {problem}", path.display())]
    InvalidConnectionFile {
        what: &'static str,
        path: std::path::PathBuf,
        problem: FileProblem,
    },

    /// The Redis URL and the connection options do not fit together, or
    /// the URL is not a Redis URL.
    #[error("connecting to {url}: {problem}")]
    ConnectOptions {
        /// The URL without its credentials.
        url: String,
        problem: OptionsProblem,
    },

    /// The server refused the user and password.
    #[error("redis {server} refused user {user:?} with the password {password_from}: {source}")]
    Authentication {
        server: String,
        user: String,
        /// Where the password came from: the URL, a file (named), none.
        password_from: String,
        #[source]
        source: redis::RedisError,
    },

    /// A Cluster's `CLUSTER SLOTS` reply is not what the topology is read from.
    #[error("redis cluster: CLUSTER SLOTS answered something unexpected ({what}): {reply}")]
    ClusterSlots {
        /// Which part of the reply is wrong.
        what: String,
        /// The whole reply, as debug text.
        reply: String,
    },
}

/// Why a connection file that was read cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// A password file with nothing in it (but a trailing newline).
    #[error("it is empty")]
    Empty,
    /// Not PEM; the text is the PEM parser's.
    #[error("not a PEM certificate file: {0}")]
    NotPemCertificates(String),
    /// PEM, but no certificate in it.
    #[error("it holds no PEM certificate")]
    NoCertificate,
    /// No private key in it; the text is the PEM parser's.
    #[error("it holds no PEM private key: {0}")]
    NoPrivateKey(String),
}

/// Why the URL and the connection options do not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsProblem {
    #[error("TLS files (CA, client certificate or key) are given, but the URL is not rediss://; use rediss:// for TLS")]
    TlsFilesWithoutTls,
    #[error(
        "a TLS client certificate needs its private key, and a key its certificate: give both"
    )]
    HalfAClientCertificate,
    /// The redis client refused the settings; the text is its own, so it stays free text.
    #[error("{0}")]
    Client(String),
}
