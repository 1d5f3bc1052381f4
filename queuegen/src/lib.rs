//! queuegen as a library: the spec model and validation, and the generators.
//! The `queuegen` binary (src/main.rs, src/cli/) is a thin layer over this.

pub mod error;
pub mod gen;
pub mod runtime_config;
pub mod spec;

pub use error::{Error, Result};
