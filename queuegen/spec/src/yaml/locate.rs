//! Finds the line and column of a node by re-reading the source and failing
//! on purpose at that node: serde_yaml_ng stamps the error with the mark of the
//! node being deserialized when the error was raised.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Serialize;

use super::node::Node;

/// One step of a path from the document root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    /// The `occurrence`-th entry (from 0) whose key reads `name` (see
    /// [`Node::key_text`]); occurrences above 0 are duplicates.
    Key { name: String, occurrence: usize },
    /// An item of a sequence, from 0.
    Index(usize),
}

impl Seg {
    pub fn key(name: impl Into<String>) -> Seg {
        Seg::Key {
            name: name.into(),
            occurrence: 0,
        }
    }
}

/// Whether a diagnostic points at an entry's key or at its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Key,
    Value,
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

const MARKER: &str = "queuegen locator: found the target node";

/// The position of the key or value at `path`, or `None` if there is no
/// such node. For the root (an empty path) the target is always the value.
pub fn locate(source: &str, path: &[Seg], target: Target) -> Option<Pos> {
    let deserializer = serde_yaml_ng::Deserializer::from_str(source);
    match (Walk { path, target }).deserialize(deserializer) {
        Ok(()) => None,
        // The message reads "PATH: MARKER at line L column C".
        Err(err) if err.to_string().contains(MARKER) => err.location().map(|l| Pos {
            line: l.line(),
            column: l.column(),
        }),
        // Anything else means the path left the document's shape.
        Err(_) => None,
    }
}

/// Walks down `path`; at its end, fails at the wanted node.
struct Walk<'p> {
    path: &'p [Seg],
    target: Target,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.path.is_empty() {
            deserializer.deserialize_any(Fail)
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping or sequence on the path")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key { name, occurrence }, rest)) = self.path.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut seen = 0;
        let fail_on_key = rest.is_empty() && self.target == Target::Key;
        loop {
            let seed = KeySeed {
                name,
                occurrence: *occurrence,
                seen: &mut seen,
                fail: fail_on_key,
            };
            match map.next_key_seed(seed)? {
                None => return Ok(()),
                Some(true) => map.next_value_seed(Walk {
                    path: rest,
                    target: self.target,
                })?,
                Some(false) => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(index), rest)) = self.path.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        for _ in 0..*index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Walk {
            path: rest,
            target: self.target,
        })?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

/// Reads one key; says whether it is the wanted occurrence, or fails there
/// when the key itself is the target.
struct KeySeed<'a> {
    name: &'a str,
    occurrence: usize,
    seen: &'a mut usize,
    fail: bool,
}

impl KeySeed<'_> {
    fn check<E: de::Error>(self, key: Node) -> Result<bool, E> {
        if key.key_text() != self.name {
            return Ok(false);
        }
        if *self.seen != self.occurrence {
            *self.seen += 1;
            return Ok(false);
        }
        if self.fail {
            Err(E::custom(MARKER))
        } else {
            Ok(true)
        }
    }
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.check(Node::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.check(Node::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.check(Node::Int(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<bool, E> {
        self.check(Node::Int(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        self.check(Node::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        self.check(Node::Str(v.to_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.check(Node::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        self.check(Node::Null)
    }

    // Complex keys (`? [a, b]`) are never on a path the reader builds.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Fails at whatever node it is given; the error gets that node's mark.
/// Every visit is left to serde's default, which refuses the node with an
/// error that quotes `expecting`: the marker.
struct Fail;

impl Visitor<'_> for Fail {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
version: 1
queues:
  ocr:
    claim: { min_idle: 1s }
    claim: { min_idle: 2s }
    partition_by: [tenant, x]
    group:
      name: \"a\"
      start: '$'
";

    fn key(name: &str) -> Seg {
        Seg::key(name)
    }

    fn pos(line: usize, column: usize) -> Option<Pos> {
        Some(Pos { line, column })
    }

    #[test]
    fn root_is_the_first_node() {
        assert_eq!(locate(DOC, &[], Target::Value), pos(1, 1));
        assert_eq!(locate(DOC, &[], Target::Key), pos(1, 1));
    }

    #[test]
    fn block_keys_and_values() {
        assert_eq!(locate(DOC, &[key("version")], Target::Key), pos(1, 1));
        assert_eq!(locate(DOC, &[key("version")], Target::Value), pos(1, 10));
        let ocr = [key("queues"), key("ocr")];
        assert_eq!(locate(DOC, &ocr, Target::Key), pos(3, 3));
        // A block mapping starts at its first key.
        assert_eq!(locate(DOC, &ocr, Target::Value), pos(4, 5));
    }

    #[test]
    fn flow_mapping_keys_and_values() {
        let path = [key("queues"), key("ocr"), key("claim"), key("min_idle")];
        assert_eq!(locate(DOC, &path, Target::Key), pos(4, 14));
        assert_eq!(locate(DOC, &path, Target::Value), pos(4, 24));
        // The flow mapping itself starts at its brace.
        assert_eq!(locate(DOC, &path[..3], Target::Value), pos(4, 12));
    }

    #[test]
    fn duplicate_keys_by_occurrence() {
        let second = Seg::Key {
            name: "claim".into(),
            occurrence: 1,
        };
        let path = [key("queues"), key("ocr"), second.clone()];
        assert_eq!(locate(DOC, &path, Target::Key), pos(5, 5));
        let inner = [key("queues"), key("ocr"), second, key("min_idle")];
        assert_eq!(locate(DOC, &inner, Target::Value), pos(5, 24));
        let third = Seg::Key {
            name: "claim".into(),
            occurrence: 2,
        };
        assert_eq!(
            locate(DOC, &[key("queues"), key("ocr"), third], Target::Key),
            None
        );
    }

    #[test]
    fn sequence_items() {
        let path = [
            key("queues"),
            key("ocr"),
            key("partition_by"),
            Seg::Index(1),
        ];
        assert_eq!(locate(DOC, &path, Target::Value), pos(6, 28));
        let missing = [
            key("queues"),
            key("ocr"),
            key("partition_by"),
            Seg::Index(2),
        ];
        assert_eq!(locate(DOC, &missing, Target::Value), None);
    }

    #[test]
    fn quoted_scalars_start_at_their_quote() {
        let group = [key("queues"), key("ocr"), key("group")];
        let name = [&group[..], &[key("name")]].concat();
        assert_eq!(locate(DOC, &name, Target::Value), pos(8, 13));
        let start = [&group[..], &[key("start")]].concat();
        assert_eq!(locate(DOC, &start, Target::Value), pos(9, 14));
    }

    #[test]
    fn missing_paths_are_none() {
        assert_eq!(locate(DOC, &[key("nope")], Target::Key), None);
        // Walking into a scalar.
        let path = [key("version"), key("x")];
        assert_eq!(locate(DOC, &path, Target::Value), None);
        assert_eq!(locate(DOC, &[Seg::Index(0)], Target::Value), None);
    }

    #[test]
    fn keys_that_are_not_strings_match_by_text() {
        let doc = "a:\n  1: x\n  true: y\n";
        assert_eq!(
            locate(doc, &[key("a"), key("true")], Target::Key),
            pos(3, 3)
        );
        assert_eq!(locate(doc, &[key("a"), key("1")], Target::Value), pos(2, 6));
    }

    #[test]
    fn aliases_point_at_the_anchor() {
        let doc = "base: &b { x: 1 }\nq: *b\n";
        assert_eq!(
            locate(doc, &[key("q"), key("x")], Target::Value),
            pos(1, 15)
        );
    }
}
