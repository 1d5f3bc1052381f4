//! The two numbers that address a queue's streams: a [`Partition`] and a [`StreamSlot`] (a lane × partition).
//!
//! A partition is where a job's ordering key hashes to (`0..partitions`). A
//! queue with lanes has one stream per lane per partition; the worker, the
//! keys and the ops views address each by its slot
//! ([`QueueConfig::streams`](crate::QueueConfig::streams)). Both are a `u16`
//! underneath; their own types keep the compiler saying which is meant.
//! Conversions between the two go through [`QueueConfig`](crate::QueueConfig),
//! which knows the lanes, except a partition's default-lane stream, whose
//! slot is the partition's number.

use std::fmt;

/// A partition of a queue: `0..config.partitions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "operator", derive(serde::Serialize), serde(transparent))]
pub struct Partition(u16);

impl Partition {
    /// The partition numbered `number`, unchecked: for numbers that come
    /// from counting `0..partitions` or from a reply. A number a person
    /// typed goes through [`QueueConfig::check_partition`](crate::QueueConfig::check_partition).
    pub const fn new(number: u16) -> Self {
        Partition(number)
    }

    /// The partition's number.
    pub const fn index(self) -> u16 {
        self.0
    }

    /// The partition's stream in the default lane, whose keys are the
    /// queue's unlaned ones: its slot is the partition's number.
    pub const fn default_stream(self) -> StreamSlot {
        StreamSlot(self.0)
    }

    /// Every partition of a queue of `partitions`, in order.
    pub fn all(partitions: u16) -> impl DoubleEndedIterator<Item = Partition> + ExactSizeIterator {
        (0..partitions).map(Partition)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// One ready stream of a queue: a lane × partition, numbered
/// `slot * partitions + partition` ([`QueueConfig::streams`](crate::QueueConfig::streams)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "operator", derive(serde::Serialize), serde(transparent))]
pub struct StreamSlot(u16);

impl StreamSlot {
    /// The stream numbered `number`, unchecked: for numbers that come from
    /// counting `0..streams` or from a reply.
    pub const fn new(number: u16) -> Self {
        StreamSlot(number)
    }

    /// The stream's number.
    pub const fn index(self) -> u16 {
        self.0
    }

    /// Every stream of a queue of `streams`, in order.
    pub fn all(streams: u16) -> impl DoubleEndedIterator<Item = StreamSlot> + ExactSizeIterator {
        (0..streams).map(StreamSlot)
    }
}

impl From<Partition> for StreamSlot {
    fn from(partition: Partition) -> Self {
        partition.default_stream()
    }
}

impl fmt::Display for StreamSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Metric labels print the bare number, as they did when it was a `u16`.
#[cfg(feature = "metrics")]
impl prometheus_client::encoding::EncodeLabelValue for Partition {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), fmt::Error> {
        self.0.encode(encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_print_the_bare_number() {
        assert_eq!(Partition::new(7).to_string(), "7");
        assert_eq!(format!("{:02}", Partition::new(7)), "07");
        assert_eq!(StreamSlot::new(12).to_string(), "12");
        assert_eq!(StreamSlot::from(Partition::new(3)), StreamSlot::new(3));
    }
}
