//! The document tree: scalars, sequences, and mappings kept in source order.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use super::locate::Pos;
use super::unclosed;

/// One YAML node. Mappings are a list of entries in source order, so a
/// duplicate key is kept and can be reported instead of silently replacing
/// the first one.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// What the node is, for messages: "expected a duration, found a list".
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "an empty value",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a decimal number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// The text a key is matched by. Both the reader and the locator use it,
    /// so occurrence counts of duplicate keys agree between them.
    pub fn key_text(&self) -> String {
        match self {
            Node::Null => "~".to_owned(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => f.to_string(),
            Node::Str(s) => s.clone(),
            Node::Seq(_) => "[...]".to_owned(),
            Node::Map(_) => "{...}".to_owned(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A document that is not well-formed YAML (or uses a feature the spec forbids).
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    /// Where the mistake is: the bracket or quote that is never closed, else
    /// where the parser stopped; `None` for errors about the whole stream.
    pub pos: Option<Pos>,
    /// How to fix it, when the error says more than "fix the YAML".
    pub help: Option<&'static str>,
}

impl SyntaxError {
    /// The document is well-formed but uses a YAML tag, which the spec forbids.
    pub fn is_tag(&self) -> bool {
        self.message == TAG_MESSAGE
    }
}

/// Parses one YAML document into a tree. An empty document is `Node::Null`.
pub fn parse(source: &str) -> Result<Node, SyntaxError> {
    serde_yaml_ng::from_str::<Node>(source).map_err(|err| {
        let pos = err.location().map(|l| Pos {
            line: l.line(),
            column: l.column(),
        });
        let text = err.to_string();
        // Our own errors come back as "PATH: MESSAGE at line L column C".
        let message = if text.contains(TAG_MESSAGE) {
            TAG_MESSAGE.to_owned()
        } else {
            strip_first_position(&text)
        };
        // An unclosed `[`, `{` or quote is reported where the parser gave up,
        // often lines below: point at the opener instead.
        match pos.and_then(|gave_up| unclosed::explain(source, &message, gave_up)) {
            Some(explained) => SyntaxError {
                message: explained.message,
                pos: Some(explained.pos),
                help: Some(explained.help),
            },
            None => SyntaxError {
                message,
                pos,
                help: None,
            },
        }
    })
}

/// serde_yaml_ng appends " at line L column C" to its messages; the
/// diagnostic shows the position itself, so the first one is dropped.
fn strip_first_position(message: &str) -> String {
    let Some(start) = message.find(" at line ") else {
        return message.to_owned();
    };
    let rest = &message[start + " at line ".len()..];
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let line_len = digits(rest);
    let Some(after_line) = rest[line_len..].strip_prefix(" column ") else {
        return message.to_owned();
    };
    let col_len = digits(after_line);
    if line_len == 0 || col_len == 0 {
        return message.to_owned();
    }
    format!("{}{}", &message[..start], &after_line[col_len..])
}

pub(super) const TAG_MESSAGE: &str = "YAML tags (`!name`) are not supported in a queuegen spec";

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

/// Builds a [`Node`]; errors raised here get the mark of the current node.
pub(super) struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        i128::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }

    // serde_yaml_ng hands a tagged node (`!Foo bar`) to visit_enum.
    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<Node, A::Error> {
        Err(de::Error::custom(TAG_MESSAGE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keep_source_order_and_duplicates() {
        let node = parse("b: 1\na: x\nb: true\n").unwrap();
        let Node::Map(entries) = node else {
            panic!("not a map")
        };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.key_text()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert_eq!(entries[2].1, Node::Bool(true));
    }

    #[test]
    fn scalars_keep_their_yaml_type() {
        let node = parse("[1, -2, 2.5, \"3\", 0-0, $, ~, false, 10m]").unwrap();
        assert_eq!(
            node,
            Node::Seq(vec![
                Node::Int(1),
                Node::Int(-2),
                Node::Float(2.5),
                Node::Str("3".into()),
                Node::Str("0-0".into()),
                Node::Str("$".into()),
                Node::Null,
                Node::Bool(false),
                Node::Str("10m".into()),
            ])
        );
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("# only a comment\n").unwrap(), Node::Null);
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("a: 1\n  b: 2\n").unwrap_err();
        assert_eq!(err.pos, Some(Pos { line: 2, column: 4 }));
        assert_eq!(
            err.message,
            "mapping values are not allowed in this context"
        );
        assert_eq!(err.help, None);
    }

    #[test]
    fn an_unclosed_sequence_is_reported_at_its_bracket() {
        let err = parse("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        // The parser stopped at line 3; the mistake is the `[` of line 2.
        assert_eq!(err.pos, Some(Pos { line: 2, column: 4 }));
        assert_eq!(
            err.message,
            "this flow sequence `[` is never closed (the parser gave up at line 3 column 2: did not find expected ',' or ']')"
        );
        assert_eq!(
            err.help,
            Some("close the sequence with `]` after its last item")
        );
    }

    #[test]
    fn tags_are_rejected_at_the_tagged_node() {
        let err = parse("a: 1\nb: !secret x\n").unwrap_err();
        assert_eq!(err.message, TAG_MESSAGE);
        assert_eq!(err.pos, Some(Pos { line: 2, column: 4 }));
    }

    #[test]
    fn strips_only_the_first_position() {
        assert_eq!(
            strip_first_position("did not find expected key at line 3 column 5, while parsing a block mapping at line 1 column 1"),
            "did not find expected key, while parsing a block mapping at line 1 column 1"
        );
        assert_eq!(strip_first_position("plain"), "plain");
    }
}
