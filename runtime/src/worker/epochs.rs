//! The claim epoch of each partition as this worker last saw it, which every read stamps on the entries it delivers.
//!
//! A claim from another consumer raises the partition's epoch (the library's
//! `claim`, atomically with the claim). An entry whose ack carries an epoch
//! read before the entry was delivered, and still current when the ack runs,
//! cannot have been claimed: the ack then skips its ownership listing.
//!
//! Any value read before a read was sent is sound for that read, however
//! old: a claim after it raises the epoch past it, and the ack checks each
//! entry. So the worker never reads the epoch on the hot path. It keeps the
//! newest value it has been told (at start, and by every `ack` and `claim`
//! reply, which read it anyway), and a read stamps its entries with the
//! value held when it was sent. A stale value only costs a checked ack.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::stream_slot::StreamSlot;

/// Per stream: 0 while unknown, else the epoch plus one.
pub(super) struct Epochs {
    seen: Box<[AtomicU64]>,
}

impl Epochs {
    pub(super) fn new(streams: u16) -> Epochs {
        Epochs {
            seen: (0..streams).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The newest epoch seen for `stream`; `None` before any.
    pub(super) fn current(&self, stream: StreamSlot) -> Option<u64> {
        match self.seen[usize::from(stream.index())].load(Ordering::Acquire) {
            0 => None,
            plus_one => Some(plus_one - 1),
        }
    }

    /// Records an epoch read from Redis. Epochs only rise, and replies can
    /// arrive out of order, so an older one never replaces a newer one.
    pub(super) fn observe(&self, stream: StreamSlot, epoch: u64) {
        self.seen[usize::from(stream.index())].fetch_max(epoch.saturating_add(1), Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::Epochs;
    use crate::stream_slot::StreamSlot;

    #[test]
    fn an_epoch_is_unknown_until_observed_and_never_goes_back() {
        let epochs = Epochs::new(2);
        assert_eq!(epochs.current(StreamSlot::new(0)), None);
        epochs.observe(StreamSlot::new(0), 0);
        assert_eq!(epochs.current(StreamSlot::new(0)), Some(0));
        epochs.observe(StreamSlot::new(0), 3);
        epochs.observe(StreamSlot::new(0), 2);
        assert_eq!(epochs.current(StreamSlot::new(0)), Some(3));
        assert_eq!(epochs.current(StreamSlot::new(1)), None);
    }
}
