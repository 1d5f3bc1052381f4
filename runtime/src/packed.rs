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

/// Why a packed value does not unpack into names and values; each reads
/// after "the packed entry".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnpackError {
    #[error("is not a MessagePack array")]
    NotAnArray,
    #[error("holds {0} items, not name/value pairs")]
    OddItems(u32),
    #[error("has a non-string at item {0}")]
    NotAString(u32),
    #[error("has a field name that is not UTF-8 at item {0}")]
    NameNotUtf8(u32),
    #[error("ends inside item {0}")]
    Truncated(u32),
    #[error("has {0} bytes after its array")]
    Trailing(usize),
}

// MessagePack markers this format uses (the spec:
// https://github.com/msgpack/msgpack/blob/master/spec.md). Written by hand:
// a packed entry is one array of strings, and the general codecs measured
// several times the instructions per entry for those two headers.
const FIXARRAY: u8 = 0x90; // 1001_xxxx: up to 15 items
const ARRAY16: u8 = 0xdc;
const ARRAY32: u8 = 0xdd;
const FIXSTR: u8 = 0xa0; // 101x_xxxx: up to 31 bytes
const STR8: u8 = 0xd9;
const STR16: u8 = 0xda;
const STR32: u8 = 0xdb;
// Read, never written: another packer may write bytes as `bin`.
const BIN8: u8 = 0xc4;
const BIN16: u8 = 0xc5;
const BIN32: u8 = 0xc6;

/// The name/value pairs of a packed value, borrowed from it. Names must be
/// UTF-8; values are returned as bytes, for the reader to check as it
/// decodes each field (and name the field when one is not text).
pub fn unpack(packed: &[u8]) -> Result<Vec<(&str, &[u8])>, UnpackError> {
    let mut pairs = Vec::with_capacity(pairs_in(packed));
    for_each_pair(packed, |item, name, value| {
        let name = std::str::from_utf8(name).map_err(|_| UnpackError::NameNotUtf8(item))?;
        pairs.push((name, value));
        Ok(())
    })?;
    Ok(pairs)
}

/// A name and a value, both as bytes.
pub(crate) type RawPair<'a> = (&'a [u8], &'a [u8]);

/// [`unpack`] with the names as bytes, unchecked: for a reader that only
/// compares them with the names it wants (a name that is not UTF-8 then
/// matches nothing, like any field it does not know).
pub(crate) fn unpack_bytes(packed: &[u8]) -> Result<Vec<RawPair<'_>>, UnpackError> {
    let mut pairs = Vec::with_capacity(pairs_in(packed));
    for_each_pair(packed, |_, name, value| {
        pairs.push((name, value));
        Ok(())
    })?;
    Ok(pairs)
}

/// How many pairs a packed value says it holds, capped by what its bytes
/// can hold (two bytes a pair at least): room to reserve, never trusted.
fn pairs_in(packed: &[u8]) -> usize {
    let mut rest = packed;
    array_len(&mut rest).map_or(0, |items| (items as usize / 2).min(rest.len() / 2))
}

/// Calls `pair(item of the name, counting from 1, name, value)` for each
/// pair of a packed value, in order; then checks that nothing follows it.
fn for_each_pair<'a>(
    packed: &'a [u8],
    mut pair: impl FnMut(u32, &'a [u8], &'a [u8]) -> Result<(), UnpackError>,
) -> Result<(), UnpackError> {
    let mut rest = packed;
    let items = array_len(&mut rest).ok_or(UnpackError::NotAnArray)?;
    if items % 2 != 0 {
        return Err(UnpackError::OddItems(items));
    }
    let mut item = 1;
    while item < items {
        let name = string(&mut rest, item)?;
        let value = string(&mut rest, item + 1)?;
        pair(item, name, value)?;
        item += 2;
    }
    if !rest.is_empty() {
        return Err(UnpackError::Trailing(rest.len()));
    }
    Ok(())
}

/// The item count of an array header, advancing `rest` past it.
fn array_len(rest: &mut &[u8]) -> Option<u32> {
    let (&marker, after) = rest.split_first()?;
    let (len, header) = match marker {
        0x90..=0x9f => (u32::from(marker & 0x0f), 0),
        ARRAY16 => (
            u32::from(u16::from_be_bytes(after.get(..2)?.try_into().ok()?)),
            2,
        ),
        ARRAY32 => (u32::from_be_bytes(after.get(..4)?.try_into().ok()?), 4),
        _ => return None,
    };
    *rest = &after[header..];
    Some(len)
}

/// One string item (`str`, or `bin`), advancing `rest` past it; `item`
/// counts from 1, for the error.
fn string<'a>(rest: &mut &'a [u8], item: u32) -> Result<&'a [u8], UnpackError> {
    let truncated = UnpackError::Truncated(item);
    let (&marker, after) = rest.split_first().ok_or(truncated.clone())?;
    let be = |bytes: usize| -> Result<usize, UnpackError> {
        let header = after.get(..bytes).ok_or(truncated.clone())?;
        Ok(header
            .iter()
            .fold(0, |len, &byte| len << 8 | usize::from(byte)))
    };
    let (len, header) = match marker {
        0xa0..=0xbf => (usize::from(marker & 0x1f), 0),
        STR8 | BIN8 => (be(1)?, 1),
        STR16 | BIN16 => (be(2)?, 2),
        STR32 | BIN32 => (be(4)?, 4),
        _ => return Err(UnpackError::NotAString(item)),
    };
    let value = after
        .get(header..header + len)
        .ok_or(UnpackError::Truncated(item))?;
    *rest = &after[header + len..];
    Ok(value)
}

/// Packs name/value pairs into one MessagePack array of strings.
pub fn pack<'a>(pairs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let count = pairs.len();
    // Sized for the common case (short names, values under 256 bytes): two
    // bytes of header per string, five for the array.
    let mut out = Vec::with_capacity(5 + count * 24);
    let items = u32::try_from(count * 2).expect("an envelope's field count fits a u32");
    put_array_len(&mut out, items);
    for (name, value) in pairs {
        put_str(&mut out, name);
        put_str(&mut out, value);
    }
    out
}

fn put_array_len(out: &mut Vec<u8>, items: u32) {
    match items {
        0..=15 => out.push(FIXARRAY | items as u8),
        16..=0xffff => {
            out.push(ARRAY16);
            out.extend_from_slice(&(items as u16).to_be_bytes());
        }
        _ => {
            out.push(ARRAY32);
            out.extend_from_slice(&items.to_be_bytes());
        }
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    let len = text.len();
    match len {
        0..=31 => out.push(FIXSTR | len as u8),
        32..=0xff => out.extend_from_slice(&[STR8, len as u8]),
        0x100..=0xffff => {
            out.push(STR16);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(STR32);
            let len = u32::try_from(len).expect("a field value under 4 GiB");
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    out.extend_from_slice(text.as_bytes());
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

    /// Every header size, at its bounds, for the array and the strings:
    /// what another language's packer may write (and Lua's cmsgpack does).
    #[test]
    fn every_header_size_round_trips() {
        for len in [0, 31, 32, 255, 256, 65_535, 65_536] {
            let value = "v".repeat(len);
            let packed = pack([("name", value.as_str())].into_iter());
            let header = match len {
                0..=31 => 1,
                32..=255 => 2,
                256..=65_535 => 3,
                _ => 5,
            };
            assert_eq!(packed.len(), 1 + 5 + header + len, "a {len}-byte value");
            assert_eq!(unpack(&packed).unwrap(), [("name", value.as_bytes())]);
        }
        for pairs in [7, 8, 32_767, 32_768] {
            let names: Vec<String> = (0..pairs).map(|i| format!("f{i}")).collect();
            let packed = pack(names.iter().map(|name| (name.as_str(), "x")));
            let expected_marker = match pairs * 2 {
                0..=15 => 0x90 | (pairs * 2) as u8,
                16..=65_535 => 0xdc,
                _ => 0xdd,
            };
            assert_eq!(packed[0], expected_marker, "{pairs} pairs");
            let unpacked = unpack(&packed).unwrap();
            assert_eq!(unpacked.len(), pairs);
            assert_eq!(unpacked[pairs - 1], (names[pairs - 1].as_str(), &b"x"[..]));
        }
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
            Err(UnpackError::Truncated(1))
        );
        assert_eq!(unpack(&[0x92, 0xda, 0x00]), Err(UnpackError::Truncated(1)));
        assert_eq!(unpack(&[0xdc, 0x00]), Err(UnpackError::NotAnArray));
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
