//! queuegen as a library: the spec model and validation, and the generators.
//! The `queuegen` binary (src/main.rs, src/cli/) is a thin layer over this.

pub mod error;
pub mod gen;

pub use error::{Error, Result};
/// The spec's queues as the runtime's `QueueConfig`s (the generator renders
/// the same values; the CLI's commands use them).
pub use gen::runtime_config;
/// The spec model and validation live in their own crate (the derive macro reads specs too).
pub use queuegen_spec as spec;
