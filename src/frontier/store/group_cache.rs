//! The last groups a pop decoded, kept decoded: [`GroupCache`].
//!
//! A pop that needs a host's next entry must read its group (~8 KiB of ~70 hosts' entries),
//! check its checksum and decompress it whole, to decode the one entry it wants (most hold
//! one or two URLs). Entries of one group belong to hosts whose tails were written together,
//! and the scheduler tends to serve those hosts close together too, so the same group is often
//! wanted again a few pops later. Keeping the last [`SLOTS`] groups as checked, decompressed
//! bytes (with their entry table, owners and `next` fields) turns those pops into a lookup and
//! the decoding of one entry.
//!
//! What stays exact: bytes are cached only after their checksum passed, and a group's body and
//! host ids never change once written. Its `next` fields do (a host's later entry is linked from
//! it), so a cached `next` is only used when it cannot be stale: for a group still in the write
//! buffer the caller reads the field from the buffer (links into it are written there), for
//! one on disk the deferred links map overrides it; and the cache is emptied whenever links
//! leave that map for the file (a sync's write, or links written at once under memory
//! pressure), whenever the write buffer reaches the file (fields patched in the buffer after
//! the group was cached), and when the store is reopened.

use std::ops::Range;

/// Groups kept decoded: ~8 KiB of raw body each, so ~0.3 MiB in all (counted in
/// `QueueStore::memory_bytes`).
pub(super) const SLOTS: usize = 32;

/// One group, checked and decompressed.
#[derive(Debug, Default)]
pub(super) struct DecodedGroup {
    /// `segment << 32 | offset` of the group (its entry 0's location); 0 for an empty slot
    /// (no group starts at offset 0: the segment's header is there).
    pub(super) at: u64,
    /// The raw body (decompressed).
    pub(super) raw: Vec<u8>,
    /// (item count, range in `raw`) of each entry.
    pub(super) entries: Vec<(u32, Range<usize>)>,
    /// The host id of each entry.
    pub(super) hosts: Vec<u64>,
    /// The `next` field of each entry as read.
    pub(super) nexts: Vec<u64>,
    /// When it was last used (the cache's clock): the least recently used slot is refilled.
    used: u64,
}

/// The last [`SLOTS`] groups decoded; see the module doc.
#[derive(Debug, Default)]
pub(super) struct GroupCache {
    slots: Vec<DecodedGroup>,
    clock: u64,
    /// Reads served from the cache, and reads that decoded a group.
    pub(super) hits: u64,
    pub(super) misses: u64,
}

impl GroupCache {
    /// The slot holding the group at `at`, if cached.
    pub(super) fn find(&mut self, at: u64) -> Option<usize> {
        self.clock += 1;
        let found = self.slots.iter().position(|g| g.at == at)?;
        self.slots[found].used = self.clock;
        self.hits += 1;
        Some(found)
    }

    /// A slot to decode the group at `at` into (the least recently used one), emptied and
    /// marked as not holding any group until [`GroupCache::filled`] says it does.
    pub(super) fn refill(&mut self) -> usize {
        self.clock += 1;
        self.misses += 1;
        let i = if self.slots.len() < SLOTS {
            self.slots.push(DecodedGroup::default());
            self.slots.len() - 1
        } else {
            (0..self.slots.len())
                .min_by_key(|&i| self.slots[i].used)
                .unwrap_or(0)
        };
        let g = &mut self.slots[i];
        g.at = 0;
        g.used = self.clock;
        g.raw.clear();
        g.entries.clear();
        g.hosts.clear();
        g.nexts.clear();
        i
    }

    /// Marks slot `i` as holding the group at `at` (its contents checked and complete).
    pub(super) fn filled(&mut self, i: usize, at: u64) {
        self.slots[i].at = at;
    }

    pub(super) fn slot(&self, i: usize) -> &DecodedGroup {
        &self.slots[i]
    }

    pub(super) fn slot_mut(&mut self, i: usize) -> &mut DecodedGroup {
        &mut self.slots[i]
    }

    /// Forgets every group (their `next` fields may be stale).
    pub(super) fn clear(&mut self) {
        for g in &mut self.slots {
            g.at = 0;
        }
    }

    /// Forgets the groups of `segment` at or after `offset` (those just written from the
    /// write buffer, whose `next` fields may have been patched there since they were cached).
    pub(super) fn forget_from(&mut self, segment: u32, offset: u64) {
        let from = (segment as u64) << 32 | offset;
        let to = ((segment as u64) + 1) << 32;
        for g in &mut self.slots {
            if g.at >= from && g.at < to {
                g.at = 0;
            }
        }
    }

    /// Bytes held.
    pub(super) fn memory_bytes(&self) -> u64 {
        self.slots
            .iter()
            .map(|g| {
                g.raw.capacity()
                    + g.entries.capacity() * std::mem::size_of::<(u32, Range<usize>)>()
                    + (g.hosts.capacity() + g.nexts.capacity()) * 8
                    + std::mem::size_of::<DecodedGroup>()
            })
            .sum::<usize>() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_group_is_refilled_and_forgetting_is_by_range() {
        let mut cache = GroupCache::default();
        for n in 0..SLOTS as u64 {
            let i = cache.refill();
            cache.filled(i, (1 << 32) | (16 + 8 * n));
        }
        // Use every group but the first again: the first is then the oldest.
        for n in 1..SLOTS as u64 {
            assert!(cache.find((1 << 32) | (16 + 8 * n)).is_some());
        }
        let i = cache.refill();
        cache.filled(i, (2 << 32) | 16);
        assert!(cache.find((1 << 32) | 16).is_none());
        assert!(cache.find((1 << 32) | 24).is_some());
        assert!(cache.find((2 << 32) | 16).is_some());
        cache.forget_from(1, 32);
        assert!(cache.find((1 << 32) | 24).is_some());
        assert!(cache.find((1 << 32) | 32).is_none());
        assert!(cache.find((2 << 32) | 16).is_some());
        cache.clear();
        assert!(cache.find((2 << 32) | 16).is_none());
        assert_eq!(cache.hits, SLOTS as u64 - 1 + 4);
    }
}
