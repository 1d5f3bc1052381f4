//! Stream IDs as numbers (`<ms>-<seq>`), so they compare, order and age correctly.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A stream entry ID. IDs order by `(ms, seq)`; comparing their text does not
/// (`"9-0" > "10-0"`), so boundaries are always compared as `StreamId`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Unix milliseconds at which the entry was added (auto-generated IDs).
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The smallest ID added at or after Unix ms `ms`.
    pub const fn at_ms(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    /// How long ago the entry was added, by the ID's time and `now_ms`; zero
    /// for an ID from the future (clock skew between producer hosts).
    pub(crate) fn age(&self, now_ms: u64) -> Duration {
        Duration::from_millis(now_ms.saturating_sub(self.ms))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The text was not `<ms>` or `<ms>-<seq>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadStreamId(pub String);

impl fmt::Display for BadStreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a stream ID (<ms>-<seq>)", self.0)
    }
}

impl std::error::Error for BadStreamId {}

impl FromStr for StreamId {
    type Err = BadStreamId;

    fn from_str(text: &str) -> Result<StreamId, BadStreamId> {
        let bad = || BadStreamId(text.to_owned());
        let (ms, seq) = match text.split_once('-') {
            Some((ms, seq)) => (ms, seq),
            None => (text, "0"),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(ms) || !digits(seq) {
            return Err(bad());
        }
        Ok(StreamId {
            ms: ms.parse().map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

impl StreamId {
    /// `<ms>-<seq>` with both parts, as Redis prints every ID it stores: what
    /// a person copies to name one entry. A bare `<ms>` is refused, because
    /// Redis reads it as a range of every entry of that millisecond.
    pub fn parse_whole(text: &str) -> Result<StreamId, BadStreamId> {
        match text.split_once('-') {
            Some((_, seq)) if !seq.is_empty() => text.parse(),
            _ => Err(BadStreamId(text.to_owned())),
        }
    }
}

/// Serialized as its text (`"1700000000000-3"`), as Redis prints it (for
/// the operator's JSON views).
#[cfg(feature = "operator")]
impl serde::Serialize for StreamId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_order_numerically_and_print_back() {
        let nine: StreamId = "9-0".parse().unwrap();
        let ten: StreamId = "10-0".parse().unwrap();
        assert!(nine < ten);
        assert_eq!("5".parse::<StreamId>().unwrap(), StreamId::new(5, 0));
        assert_eq!(
            StreamId::new(1_700_000_000_000, 3).to_string(),
            "1700000000000-3"
        );
        for bad in ["", "-1", "1-", "a-1", "1-2-3", "99999999999999999999-0"] {
            assert!(bad.parse::<StreamId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn age_counts_from_the_id_time_and_never_goes_negative() {
        let id = StreamId::at_ms(1_000);
        assert_eq!(id.age(3_500), Duration::from_millis(2_500));
        assert_eq!(id.age(500), Duration::ZERO);
    }
}
