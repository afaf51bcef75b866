//! The in-process cache: recent entries by key, bounded by the bytes of code they hold, least
//! recently used dropped first.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::entry::Entry;
use super::key::Key;

/// The default bound of the in-process cache: 64 MiB of code.
pub(crate) const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;

#[derive(Debug)]
pub(crate) struct MemoryCache {
    entries: BTreeMap<Key, (Arc<Entry>, u64)>,
    bytes: u64,
    max_bytes: u64,
    clock: u64,
}

impl MemoryCache {
    pub(crate) fn new(max_bytes: u64) -> Self {
        MemoryCache {
            entries: BTreeMap::new(),
            bytes: 0,
            max_bytes,
            clock: 0,
        }
    }

    pub(crate) fn get(&mut self, key: &Key) -> Option<Arc<Entry>> {
        self.clock += 1;
        let (entry, used) = self.entries.get_mut(key)?;
        *used = self.clock;
        Some(Arc::clone(entry))
    }

    pub(crate) fn insert(&mut self, entry: Arc<Entry>) {
        let size = entry.code.len() as u64;
        if size > self.max_bytes {
            return;
        }
        self.clock += 1;
        if let Some((old, _)) = self.entries.insert(entry.key, (entry, self.clock)) {
            self.bytes -= old.code.len() as u64;
        }
        self.bytes += size;
        while self.bytes > self.max_bytes {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| *key)
            else {
                break;
            };
            if let Some((dropped, _)) = self.entries.remove(&oldest) {
                self.bytes -= dropped.code.len() as u64;
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &Key) {
        if let Some((dropped, _)) = self.entries.remove(key) {
            self.bytes -= dropped.code.len() as u64;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::entry::tests::sample;

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut memory = MemoryCache::new(250);
        for id in 1..=2u8 {
            memory.insert(Arc::new(sample(Key([id; 32]), 100)));
        }
        assert!(memory.get(&Key([1; 32])).is_some());
        memory.insert(Arc::new(sample(Key([3; 32]), 100)));
        assert!(memory.get(&Key([2; 32])).is_none());
        assert!(memory.get(&Key([1; 32])).is_some());
        assert!(memory.get(&Key([3; 32])).is_some());
        assert_eq!(memory.bytes, 200);
    }
}
