//! One stream entry (ID and field/value pairs) decoded from an owned reply value without copying its bytes: what an `XREADGROUP` read and the library's `claim` return.
//!
//! Below both the worker's read and the Function client's `claim` reply, so
//! that neither reaches into the other for it.

use redis::{ParsingError, Value};

/// One stream entry: its ID and its field/value pairs in stream order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: String,
    /// Empty for an entry deleted while pending (Redis returns no fields).
    pub fields: Vec<(String, Vec<u8>)>,
}

impl Entry {
    /// The text of field `name` (lossy: for logs and classes, never for
    /// decoding), in either shape; `None` when the entry has no such field
    /// or is packed and does not unpack (the worker's decode says why).
    pub fn field_text(&self, name: &str) -> Option<String> {
        crate::packed::entry_field(&self.fields, name)
            .map(|value| String::from_utf8_lossy(value).into_owned())
    }
}

/// A list of `[id, fields]` entries: a read's per-stream list, or the
/// entries of the library's `claim` reply.
pub(crate) fn entries_of(value: Value) -> Result<Vec<Entry>, ParsingError> {
    match value {
        Value::Nil => Ok(Vec::new()),
        Value::Array(entries) => entries.into_iter().map(entry).collect(),
        other => Err(unexpected("a list of entries", &other)),
    }
}

/// `[id, [field, value, ...]]`; the fields are nil for a deleted entry.
fn entry(value: Value) -> Result<Entry, ParsingError> {
    let Value::Array(parts) = value else {
        return Err(unexpected("an [id, fields] entry", &value));
    };
    let mut parts = parts.into_iter();
    let id = text(
        parts
            .next()
            .ok_or_else(|| ParsingError::from("an entry without an ID"))?,
        "an entry ID",
    )?;
    let fields = match parts.next() {
        None | Some(Value::Nil) => Vec::new(),
        Some(Value::Array(flat)) => pairs(flat)?,
        Some(Value::Map(map)) => map
            .into_iter()
            .map(|(name, value)| Ok((text(name, "a field name")?, bytes(value)?)))
            .collect::<Result<_, ParsingError>>()?,
        Some(other) => return Err(unexpected("an entry's fields", &other)),
    };
    Ok(Entry { id, fields })
}

fn pairs(flat: Vec<Value>) -> Result<Vec<(String, Vec<u8>)>, ParsingError> {
    if flat.len() % 2 != 0 {
        return Err(ParsingError::from(
            "an odd number of field names and values",
        ));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut flat = flat.into_iter();
    while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
        out.push((text(name, "a field name")?, bytes(value)?));
    }
    Ok(out)
}

fn bytes(value: Value) -> Result<Vec<u8>, ParsingError> {
    match value {
        Value::BulkString(bytes) => Ok(bytes),
        Value::SimpleString(text) => Ok(text.into_bytes()),
        Value::Int(n) => Ok(n.to_string().into_bytes()),
        other => Err(unexpected("a field value", &other)),
    }
}

pub(crate) fn text(value: Value, what: &str) -> Result<String, ParsingError> {
    let bytes = bytes(value)?;
    String::from_utf8(bytes).map_err(|_| ParsingError::from(format!("{what} is not UTF-8")))
}

pub(crate) fn unexpected(expected: &str, found: &Value) -> ParsingError {
    ParsingError::from(format!("expected {expected}, found {found:?}"))
}
