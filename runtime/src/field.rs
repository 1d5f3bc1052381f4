//! How one envelope field value is written to, and read back from, a stream entry field.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::FieldProblem;

/// A type that can be one field of an envelope.
///
/// Field values are UTF-8 text, in either entry shape, so that a reader
/// needs no schema to show them (`redis-cli XRANGE`, `queuegen dlq`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an envelope field",
    label = "not a supported envelope field type",
    note = "envelope fields can be String, bool, u8..u64, i8..i64, Timestamp, Option<T> of those, or an enum deriving FieldEnum"
)]
pub trait FieldValue: Sized {
    /// Encodes the value; `None` leaves the field out of the entry (only `Option` does).
    fn encode_field(&self) -> Option<String>;

    /// Decodes the value; `raw` is `None` when the entry has no such field.
    fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem>;
}

fn require(raw: Option<&str>) -> Result<&str, FieldProblem> {
    raw.ok_or(FieldProblem::Missing)
}

fn malformed(expected: &'static str, found: &str) -> FieldProblem {
    // Cap what we echo back: the value may be large or sensitive.
    let found: String = found.chars().take(64).collect();
    FieldProblem::Malformed { expected, found }
}

impl FieldValue for String {
    fn encode_field(&self) -> Option<String> {
        Some(self.clone())
    }
    fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem> {
        require(raw).map(str::to_owned)
    }
}

impl FieldValue for bool {
    fn encode_field(&self) -> Option<String> {
        Some(if *self { "true" } else { "false" }.to_owned())
    }
    fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem> {
        match require(raw)? {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(malformed("bool (true or false)", other)),
        }
    }
}

macro_rules! integer_field {
    ($($ty:ty),*) => {$(
        impl FieldValue for $ty {
            fn encode_field(&self) -> Option<String> {
                Some(self.to_string())
            }
            fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem> {
                let raw = require(raw)?;
                raw.parse().map_err(|_| malformed(stringify!($ty), raw))
            }
        }
    )*};
}
integer_field!(u8, u16, u32, u64, i8, i16, i32, i64);

impl<T: FieldValue> FieldValue for Option<T> {
    fn encode_field(&self) -> Option<String> {
        self.as_ref().and_then(T::encode_field)
    }
    fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem> {
        raw.map(|raw| T::decode_field(Some(raw))).transpose()
    }
}

/// A point in time with millisecond precision, written as RFC 3339 UTC
/// (`2026-12-02T11:51:41.123Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_millis: u64,
}

impl Timestamp {
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    pub fn from_unix_millis(unix_millis: u64) -> Self {
        Timestamp { unix_millis }
    }

    pub fn from_system_time(time: SystemTime) -> Self {
        let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp {
            unix_millis: since_epoch.as_millis() as u64,
        }
    }

    pub fn unix_millis(self) -> u64 {
        self.unix_millis
    }

    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.unix_millis)
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        humantime::format_rfc3339_millis(self.to_system_time()).fmt(f)
    }
}

impl FieldValue for Timestamp {
    fn encode_field(&self) -> Option<String> {
        Some(self.to_string())
    }
    fn decode_field(raw: Option<&str>) -> Result<Self, FieldProblem> {
        let raw = require(raw)?;
        humantime::parse_rfc3339(raw)
            .map(Timestamp::from_system_time)
            .map_err(|_| malformed("RFC 3339 UTC timestamp", raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: FieldValue + PartialEq + std::fmt::Debug>(value: T) {
        let encoded = value.encode_field();
        assert_eq!(T::decode_field(encoded.as_deref()).unwrap(), value);
    }

    #[test]
    fn values_round_trip() {
        round_trip(String::from("a b"));
        round_trip(true);
        round_trip(u32::MAX);
        round_trip(i64::MIN);
        round_trip(Some(7u16));
        round_trip(None::<u16>);
        round_trip(Timestamp::from_unix_millis(1_796_212_301_123));
    }

    #[test]
    fn problems_name_what_was_expected() {
        assert_eq!(u32::decode_field(None), Err(FieldProblem::Missing));
        assert_eq!(
            u32::decode_field(Some("-1")),
            Err(FieldProblem::Malformed {
                expected: "u32",
                found: "-1".into()
            })
        );
        assert!(matches!(
            bool::decode_field(Some("yes")),
            Err(FieldProblem::Malformed { .. })
        ));
        assert!(Timestamp::decode_field(Some("yesterday")).is_err());
    }

    #[test]
    fn timestamp_is_rfc3339_utc_millis() {
        let ts = Timestamp::from_unix_millis(1_796_212_301_123);
        assert_eq!(ts.to_string(), "2026-12-02T11:51:41.123Z");
    }
}
