//! The queues.yaml spec: the normalized model, parsing of format v1, and validation.

pub mod model;
