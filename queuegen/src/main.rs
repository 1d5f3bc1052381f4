//! The `queuegen` command line.
fn main() {}
