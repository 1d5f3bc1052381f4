//! Setup errors: a worker configured so that it cannot run, or a server not prepared for the queue.

/// A worker or server not set up to run the queue: says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A partition's stream has no consumer group of that name (or does not exist).
    #[error("stream {key} has no consumer group {group:?}: run `queuegen apply` to create it")]
    NoGroup { key: String, group: String },

    /// A partition's ready stream does not exist: the queue was never applied on this server.
    #[error("stream {key} does not exist: run `queuegen apply` to create it")]
    MissingStream { key: String },

    /// A worker was set up in a way that cannot run (bad partition list,
    /// zero concurrency, an unusable environment variable or schedule).
    /// `problem` stays free text: each setting has its own rule to explain.
    #[error("queue {queue}: invalid worker setup: {problem}")]
    InvalidWorker { queue: String, problem: String },

    /// The Function library this code was generated with is not loaded on a server.
    #[error(
        "redis {server} does not have the Function library {library} ({problem}): run `queuegen apply` to load it"
    )]
    LibraryMissing {
        /// The servers without it, comma-separated.
        server: String,
        library: String,
        /// What the first such server answered.
        problem: LibraryProblem,
    },

    /// Code handed to `load_library` has no `#!lua name=<library>` first line.
    #[error("not a Function library: the code does not start with `#!lua name=<library>` (first line: {first_line:?})")]
    NoLibraryName {
        /// The code's first line, at most 80 characters.
        first_line: String,
    },

    /// A server loaded the library under another name than its first line gives.
    #[error("not a Function library: {server} loaded it as {loaded:?}, not {library:?}")]
    LibraryLoadedAs {
        server: String,
        loaded: String,
        library: String,
    },

    /// The server may evict keys, and with them queue data.
    #[error(
        "redis {server} has maxmemory-policy {policy}: it may evict stream entries and lose jobs; set maxmemory-policy noeviction (or call Worker::allow_eviction_policy to accept the risk)"
    )]
    EvictionPolicy { server: String, policy: String },

    /// The metrics endpoint could not be served.
    #[error("serving metrics on {addr}: {source}")]
    Http {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// How a server shows it lacks the library: its version function.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LibraryProblem {
    /// The version function is not there.
    #[error("no function {function}")]
    NoFunction { function: String },
    /// The version function answered another library's name.
    #[error("{function} answered {name:?}")]
    OtherName { function: String, name: String },
}
