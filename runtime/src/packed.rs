//! Packed entries (`payload.shape: packed`): an envelope's field/value pairs as one MessagePack array in the entry's one field, and the arguments that write an envelope in either shape.
//!
//! The array is the flat list a fields entry holds, `[name, value, name,
//! value, ...]`, every item a MessagePack string and every value in its
//! field text. So the Function library turns one into the other with one
//! `cmsgpack.unpack` and keeps its logic, a reader needs no spec to show
//! one, and the derive's field encodings, limits and upcasting stay as they
//! are. Readers tell the shapes apart by the entry: one whose only field is
//! [`PACKED_FIELD`] is packed.

use queuegen_core::wire::EntryShape;
pub use queuegen_core::wire::PACKED_FIELD;
use redis::{RedisWrite, ToRedisArgs};

/// Why a packed value does not unpack into names and values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnpackError {
    #[error("is not a MessagePack array")]
    NotAnArray,
    #[error("holds {0} items, not name/value pairs")]
    OddItems(u32),
    #[error("item {0} is not a MessagePack string")]
    NotAString(u32),
    #[error("field name at item {0} is not UTF-8")]
    NameNotUtf8(u32),
    #[error("ends inside item {0}")]
    Truncated(u32),
    #[error("has {0} bytes after its array")]
    Trailing(usize),
}

/// The name/value pairs of a packed value, borrowed from it. Names must be
/// UTF-8; values are returned as bytes, for the reader to check as it
/// decodes each field (and name the field when one is not text).
pub fn unpack(packed: &[u8]) -> Result<Vec<(&str, &[u8])>, UnpackError> {
    let mut rest = packed;
    let items = rmp::decode::read_array_len(&mut rest).map_err(|_| UnpackError::NotAnArray)?;
    if items % 2 != 0 {
        return Err(UnpackError::OddItems(items));
    }
    // The count comes from the value: cap the reservation by what its bytes can hold.
    let mut pairs = Vec::with_capacity((items as usize / 2).min(rest.len() / 2));
    let mut item = 0;
    while item < items {
        let name = string(&mut rest, item + 1)?;
        let name = std::str::from_utf8(name).map_err(|_| UnpackError::NameNotUtf8(item + 1))?;
        let value = string(&mut rest, item + 2)?;
        pairs.push((name, value));
        item += 2;
    }
    if !rest.is_empty() {
        return Err(UnpackError::Trailing(rest.len()));
    }
    Ok(pairs)
}

/// One string item (MessagePack `str`, or `bin`, which other packers may
/// write for bytes), advancing `rest` past it; `item` counts from 1.
fn string<'a>(rest: &mut &'a [u8], item: u32) -> Result<&'a [u8], UnpackError> {
    let is_bin = matches!(rest.first(), Some(0xc4..=0xc6));
    let len = if is_bin {
        rmp::decode::read_bin_len(rest).map_err(|_| UnpackError::NotAString(item))?
    } else {
        rmp::decode::read_str_len(rest).map_err(|_| UnpackError::NotAString(item))?
    } as usize;
    if rest.len() < len {
        return Err(UnpackError::Truncated(item));
    }
    let (value, after) = rest.split_at(len);
    *rest = after;
    Ok(value)
}

/// Packs name/value pairs into one MessagePack array of strings.
pub fn pack<'a>(pairs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let count = pairs.len();
    // Sized for the common case (short names, values under 256 bytes): two
    // bytes of header per string, five for the array.
    let mut out = Vec::with_capacity(5 + count * 24);
    let items = u32::try_from(count * 2).expect("an envelope's field count fits a u32");
    // Writing to a Vec cannot fail.
    rmp::encode::write_array_len(&mut out, items).expect("writing to a Vec");
    for (name, value) in pairs {
        rmp::encode::write_str(&mut out, name).expect("writing to a Vec");
        rmp::encode::write_str(&mut out, value).expect("writing to a Vec");
    }
    out
}

/// The packed value of an entry, when its only field is [`PACKED_FIELD`].
pub fn packed_value<N: AsRef<str>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Option<&[u8]> {
    match fields {
        [(name, value)] if name.as_ref() == PACKED_FIELD => Some(value.as_ref()),
        _ => None,
    }
}

/// Field `name` of an entry in either shape; `None` when it has no such
/// field, or is packed and does not unpack (a decode says why).
pub fn entry_field<'a, N: AsRef<str>, V: AsRef<[u8]>>(
    fields: &'a [(N, V)],
    name: &str,
) -> Option<&'a [u8]> {
    match packed_value(fields) {
        Some(packed) => unpack(packed)
            .ok()?
            .into_iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| value),
        None => fields
            .iter()
            .find(|(field, _)| field.as_ref() == name)
            .map(|(_, value)| value.as_ref()),
    }
}

/// An encoded envelope as the field/value arguments of an `XADD` (or of a
/// Function that appends it), in its queue's shape.
#[derive(Debug, Clone)]
pub enum EntryArgs<'a> {
    /// Every pair its own field and value.
    Pairs(&'a [(&'a str, String)]),
    /// Every pair its own field and value, as one flat list (an outbox row).
    Flat(&'a [&'a str]),
    /// The pairs packed: `packed <MessagePack>`.
    Packed(Vec<u8>),
}

impl<'a> EntryArgs<'a> {
    /// `pairs` in `shape`.
    pub fn of_pairs(shape: EntryShape, pairs: &'a [(&'a str, String)]) -> Self {
        match shape {
            EntryShape::Fields => EntryArgs::Pairs(pairs),
            EntryShape::Packed => EntryArgs::Packed(pack(
                pairs.iter().map(|(name, value)| (*name, value.as_str())),
            )),
        }
    }

    /// A flat `[name, value, ...]` list in `shape`.
    pub fn of_flat(shape: EntryShape, flat: &'a [&'a str]) -> Self {
        match shape {
            EntryShape::Fields => EntryArgs::Flat(flat),
            EntryShape::Packed => {
                EntryArgs::Packed(pack(flat.chunks_exact(2).map(|pair| (pair[0], pair[1]))))
            }
        }
    }

    /// How many arguments these are.
    pub fn count(&self) -> usize {
        match self {
            EntryArgs::Pairs(pairs) => 2 * pairs.len(),
            EntryArgs::Flat(flat) => flat.len(),
            EntryArgs::Packed(_) => 2,
        }
    }

    /// Their bytes, for sizing a command up front.
    pub fn bytes(&self) -> usize {
        match self {
            EntryArgs::Pairs(pairs) => pairs.iter().map(|(n, v)| n.len() + v.len()).sum(),
            EntryArgs::Flat(flat) => flat.iter().map(|item| item.len()).sum(),
            EntryArgs::Packed(packed) => PACKED_FIELD.len() + packed.len(),
        }
    }
}

impl ToRedisArgs for EntryArgs<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            EntryArgs::Pairs(pairs) => {
                for (name, value) in pairs.iter() {
                    out.write_arg(name.as_bytes());
                    out.write_arg(value.as_bytes());
                }
            }
            EntryArgs::Flat(flat) => {
                for item in flat.iter() {
                    out.write_arg(item.as_bytes());
                }
            }
            EntryArgs::Packed(packed) => {
                out.write_arg(PACKED_FIELD.as_bytes());
                out.write_arg(packed);
            }
        }
    }

    fn num_of_args(&self) -> usize {
        self.count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes other producers must write for a small envelope: a
    /// fixarray of 4 strings (0x94), each a fixstr (0xa0 | length).
    #[test]
    fn packs_a_flat_array_of_strings() {
        let packed = pack([("job_id", "j-1"), ("attempt", "1")].into_iter());
        let mut expected = vec![0x94, 0xa6];
        expected.extend(b"job_id");
        expected.push(0xa3);
        expected.extend(b"j-1");
        expected.push(0xa7);
        expected.extend(b"attempt");
        expected.push(0xa1);
        expected.extend(b"1");
        assert_eq!(packed, expected);
        assert_eq!(
            unpack(&packed).unwrap(),
            [("job_id", &b"j-1"[..]), ("attempt", &b"1"[..])]
        );
    }

    #[test]
    fn long_values_and_bin_items_unpack() {
        let long = "x".repeat(70_000);
        let packed = pack([("body", long.as_str())].into_iter());
        assert_eq!(unpack(&packed).unwrap(), [("body", long.as_bytes())]);

        // [str "a", bin8 "b"]: what a packer that writes bytes as bin sends.
        let bin = [0x92, 0xa1, b'a', 0xc4, 1, b'b'];
        assert_eq!(unpack(&bin).unwrap(), [("a", &b"b"[..])]);
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        assert_eq!(unpack(b"{\"a\":1}"), Err(UnpackError::NotAnArray));
        assert_eq!(
            unpack(&[0x93, 0xa1, b'a', 0xa1, b'b', 0xa1, b'c']),
            Err(UnpackError::OddItems(3))
        );
        assert_eq!(
            unpack(&[0x92, 0xa1, b'a', 0x01]),
            Err(UnpackError::NotAString(2))
        );
        assert_eq!(
            unpack(&[0x92, 0xa1, b'a', 0xa5, b'b']),
            Err(UnpackError::Truncated(2))
        );
        assert_eq!(
            unpack(&[0x92, 0xa1, 0xff, 0xa1, b'b']),
            Err(UnpackError::NameNotUtf8(1))
        );
        assert_eq!(unpack(&[0x90, 0x00]), Err(UnpackError::Trailing(1)));
        // A count far beyond the bytes: refused, without reserving for it.
        assert_eq!(
            unpack(&[0xdd, 0xff, 0xff, 0xff, 0xfe]),
            Err(UnpackError::NotAString(1))
        );
    }

    #[test]
    fn only_an_entry_of_one_packed_field_is_packed() {
        let packed: [(&str, &[u8]); 1] = [(PACKED_FIELD, b"\x90")];
        assert_eq!(packed_value(&packed), Some(&b"\x90"[..]));
        let two: [(&str, &[u8]); 2] = [(PACKED_FIELD, b"\x90"), ("job_id", b"j")];
        assert_eq!(packed_value(&two), None);
        let fields: [(&str, &[u8]); 1] = [("job_id", b"j")];
        assert_eq!(packed_value(&fields), None);
    }

    #[test]
    fn entry_args_write_either_shape() {
        let pairs = [("job_id", "j-1".to_owned()), ("tenant", "t".to_owned())];
        let fields = EntryArgs::of_pairs(EntryShape::Fields, &pairs);
        assert_eq!(fields.count(), 4);
        assert_eq!(fields.to_redis_args().len(), 4);
        let packed = EntryArgs::of_pairs(EntryShape::Packed, &pairs);
        let args = packed.to_redis_args();
        assert_eq!(args.len(), 2);
        assert_eq!(args[0], PACKED_FIELD.as_bytes());
        assert_eq!(
            unpack(&args[1]).unwrap(),
            [("job_id", &b"j-1"[..]), ("tenant", &b"t"[..])]
        );
        let flat = ["job_id", "j-1", "tenant", "t"];
        assert_eq!(
            EntryArgs::of_flat(EntryShape::Packed, &flat).to_redis_args(),
            args
        );
    }
}
