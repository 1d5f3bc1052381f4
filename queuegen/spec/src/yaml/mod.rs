//! YAML with positions on top of serde_yaml_ng: a source-ordered tree that keeps
//! duplicate keys, and a locator that finds the line and column of any node.
//!
//! serde_yaml_ng has no spanned values, so positions are recovered on demand:
//! the locator re-reads the source and fails on purpose at the wanted node,
//! and the error carries that node's mark. Only diagnostics need positions.

mod locate;
mod node;
mod unclosed;

pub use locate::{locate, Pos, Seg, Target};
pub use node::{parse, Node, SyntaxError};
