//! The entries this worker is running, so that recovery never starts a second task for one.
//!
//! An entry is held from the moment its task is spawned until its outcome is
//! settled (for `Done`, until its `XACK` was answered): recovery may claim an
//! entry of ours that has been idle past the claim threshold, because a slow
//! handler looks exactly like a dead one from the server's side.
//!
//! Entries are keyed by partition and the numeric stream ID, so holding one
//! costs no allocation; a [`Slot`] releases its entry when dropped, on every
//! path out of a job, panics included.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::stream_slot::StreamSlot;

/// `(stream, milliseconds, sequence)` of a stream entry: ordered as the stream orders them.
pub(super) type Key = (StreamSlot, u64, u64);

#[derive(Default)]
pub(super) struct InFlight {
    entries: Mutex<HashSet<Key>>,
}

/// One entry held in the set; dropping it lets the entry be run again.
pub(super) struct Slot {
    set: Arc<InFlight>,
    /// `None` for an ID that is not `ms-seq` (never from Redis): untracked.
    key: Option<Key>,
}

impl InFlight {
    /// Holds the entry, or `None` when it is already running here.
    pub(super) fn enter(self: &Arc<Self>, stream: StreamSlot, id: &str) -> Option<Slot> {
        let key = key(stream, id);
        if let Some(key) = key {
            if !self.lock().insert(key) {
                return None;
            }
        }
        Some(Slot {
            set: self.clone(),
            key,
        })
    }

    /// Whether the entry is running here.
    pub(super) fn contains(&self, stream: StreamSlot, id: &str) -> bool {
        key(stream, id).is_some_and(|key| self.lock().contains(&key))
    }

    fn lock(&self) -> MutexGuard<'_, HashSet<Key>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// The held entry's key; `None` for an untracked ID.
    pub(super) fn key(&self) -> Option<Key> {
        self.key
    }

    /// Releases many slots under one lock (the acker's flush).
    pub(super) fn release_all(slots: impl IntoIterator<Item = Slot>) {
        let mut slots = slots.into_iter().peekable();
        let Some(first) = slots.peek() else { return };
        let set = first.set.clone();
        let mut entries = set.lock();
        for mut slot in slots {
            if let Some(key) = slot.key.take() {
                entries.remove(&key);
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.set.lock().remove(&key);
        }
    }
}

fn key(stream: StreamSlot, id: &str) -> Option<Key> {
    let (ms, seq) = id.split_once('-')?;
    Some((stream, ms.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_held_once_until_its_slot_is_dropped() {
        let set = Arc::new(InFlight::default());
        let slot = set
            .enter(StreamSlot::new(3), "1700000000000-7")
            .expect("first entry");
        assert!(set.contains(StreamSlot::new(3), "1700000000000-7"));
        assert!(set.enter(StreamSlot::new(3), "1700000000000-7").is_none());
        // Same ID on another partition is another entry.
        let other = set
            .enter(StreamSlot::new(4), "1700000000000-7")
            .expect("other partition");
        drop(slot);
        assert!(!set.contains(StreamSlot::new(3), "1700000000000-7"));
        assert!(set.enter(StreamSlot::new(3), "1700000000000-7").is_some());
        drop(other);
    }

    #[test]
    fn release_all_lets_every_entry_run_again() {
        let set = Arc::new(InFlight::default());
        let slots: Vec<Slot> = ["1-0", "1-1", "2-0"]
            .iter()
            .map(|id| set.enter(StreamSlot::new(0), id).unwrap())
            .collect();
        Slot::release_all(slots);
        assert!(["1-0", "1-1", "2-0"]
            .iter()
            .all(|id| !set.contains(StreamSlot::new(0), id)));
    }

    #[test]
    fn an_id_that_is_not_ms_seq_is_run_but_not_tracked() {
        let set = Arc::new(InFlight::default());
        let _slot = set.enter(StreamSlot::new(0), "not-an-id").expect("runs");
        assert!(!set.contains(StreamSlot::new(0), "not-an-id"));
        assert!(set.enter(StreamSlot::new(0), "not-an-id").is_some());
    }
}
