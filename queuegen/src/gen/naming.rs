//! Turning spec names into Rust identifiers: the rules live in
//! `queuegen_spec::naming`, shared with `#[derive(Envelope)]`, so the
//! generator and the derive cannot disagree on a wire name.

pub use crate::spec::naming::{field_name, module_name, upper_camel, variant_rename};
