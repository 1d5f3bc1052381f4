//! queuegen as a library: the spec model and validation, and the generators.
//! The `queuegen` binary (src/main.rs, src/cli/) is a thin layer over this.

pub mod error;
pub mod gen;
pub mod runtime_config;

pub use error::{Error, Result};
/// The spec model and validation live in their own crate (the derive macro reads specs too).
pub use queuegen_spec as spec;
