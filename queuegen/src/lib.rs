//! queuegen as a library: the spec model and validation, and the generators.
//! The `queuegen` binary (src/main.rs, src/cli/) is a thin layer over this.

pub mod spec;
