//! The store's per-host entries: [`HostMap`], an open-addressing hash table of its own (linear
//! probing, a slot per entry: the id and the value side by side), split into [`SHARDS`] tables
//! by the host id's top bits, so that growing it never holds two whole arrays at once.
//!
//! Why its own table and not a `HashMap`: the map is looked up on every push, for a host drawn
//! from ~1e6 (the scale bench's 30 % of links to a random host), so most lookups of it miss
//! the caches, and it was the admitting thread's largest wait for memory. A hashbrown table
//! keeps its control bytes and its buckets in two places, two cache misses per lookup; here a
//! lookup that finds its host in its home slot reads one slot: the id and the 56-byte value are
//! 64 bytes, one cache line when the slot is aligned to one (the array is), and the next slots
//! are the next lines, which the hardware prefetcher streams. At most 3/4 full (a lookup then
//! reads ~1.5 slots on average, one that does not find its host ~4.5), so at 1e6 hosts the
//! arrays hold 1.3–2.7 M slots of 64 bytes; hashbrown's, at 7/8 and 65 bytes a bucket, 1.1–2.3
//! M. Deletion shifts the entries after the hole back (no tombstones), so a table that lives as
//! long as the crawl never fills with them. Each array asks for 2 MiB pages
//! ([`crate::allocator::advise_huge_pages`]): in ~130 MB of 4 KiB pages a lookup at random
//! would miss the TLB as well as the cache. [`HostMap::prefetch`] lets a caller that knows its
//! next hosts (a group's entries being linked, a page's links about to be pushed) start their
//! misses early.
//!
//! Why split: a table doubles its array when it fills, and for a moment holds the old array
//! and the new one; at 1e6 hosts, one doubling of a single table is ~64 MB old plus ~128 MB new
//! (in the scale bench at 1e8 URLs peak RSS once jumped by ~94 MiB when the hosts queued passed
//! 917 k). Split in 16, each part doubles on its own, at a sixteenth of the cost; lookups pay
//! one shift to pick the part. The ids are XXH3 hashes already, so their top bits spread hosts
//! evenly; within a part the slot is picked by a multiplication's top bits (Fibonacci hashing),
//! so that ids that are not hashes (tests, small numbers) spread too.

/// How many tables the entries are split into.
pub(super) const SHARDS: usize = 16;
/// The id marking an empty slot; host id 0 itself is kept aside ([`HostMap`]'s `zero`).
const EMPTY: u64 = 0;
/// Slots of a table's first array.
const FIRST_SLOTS: usize = 16;

/// One slot, aligned to a cache line so that a slot of 64 bytes is one line.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Slot<V> {
    host: u64,
    value: V,
}

/// One part of the map: slots in a power-of-two array, linear probing.
#[derive(Debug)]
struct Table<V> {
    slots: Vec<Slot<V>>,
    len: usize,
    /// 64 − log2(slots): the shift that turns a multiplied id into a slot.
    shift: u32,
    /// Mixed into every id before it is placed: drawn for each table, so that two tables
    /// place ids in unrelated orders. Why: entries inserted in the slot order of another
    /// table of the same placement (a reopened store loading the table file, which a sync
    /// writes in slot order, or `hosts.bin`) arrive sorted by their home slot, and in a
    /// table still smaller than that one they pile up into one cluster that every insert
    /// walks: quadratic (a resume at 1e6 hosts took 7.8 s to reopen instead of 1.3).
    seed: u64,
    /// The most slots an insert walked (tests check placement with it).
    #[cfg(test)]
    longest_probe: usize,
}

impl<V: Default> Table<V> {
    fn new() -> Self {
        Table {
            slots: Vec::new(),
            len: 0,
            shift: 64,
            seed: {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one(0u64)
            },
            #[cfg(test)]
            longest_probe: 0,
        }
    }

    fn home(&self, host: u64) -> usize {
        let mut x = (host ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 32;
        (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> self.shift) as usize
    }

    /// The slot holding `host`.
    fn find(&self, host: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(host);
        loop {
            match self.slots[i].host {
                h if h == host => return Some(i),
                EMPTY => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The slot holding `host`, taken (with a default value) if it had none.
    fn find_or_take(&mut self, host: u64) -> usize {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let home = self.home(host);
        let mut i = home;
        loop {
            match self.slots[i].host {
                h if h == host => return i,
                EMPTY => {
                    self.slots[i].host = host;
                    self.len += 1;
                    #[cfg(test)]
                    {
                        self.longest_probe = self.longest_probe.max(i.wrapping_sub(home) & mask);
                    }
                    return i;
                }
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Doubles the array, entries moved to their slots in it.
    fn grow(&mut self) {
        let count = (self.slots.len() * 2).max(FIRST_SLOTS);
        let mut slots = Vec::with_capacity(count);
        // Lookups land at random in the array: 2 MiB pages spare each one a TLB miss.
        crate::allocator::advise_huge_pages(slots.spare_capacity_mut());
        slots.resize_with(count, Slot::default);
        let old = std::mem::replace(&mut self.slots, slots);
        self.shift = 64 - count.trailing_zeros();
        let mask = count - 1;
        for slot in old.into_iter().filter(|s| s.host != EMPTY) {
            let mut i = self.home(slot.host);
            while self.slots[i].host != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    fn remove(&mut self, host: u64) -> Option<V> {
        let mut hole = self.find(host)?;
        let value = std::mem::take(&mut self.slots[hole].value);
        self.slots[hole].host = EMPTY;
        self.len -= 1;
        // Back-shift: an entry after the hole moves into it when the hole lies between its
        // home and its slot, so that every entry stays reachable from its home without a gap.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let h = self.slots[j].host;
            if h == EMPTY {
                break;
            }
            let home = self.home(h);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots.swap(hole, j);
                hole = j;
            }
        }
        Some(value)
    }
}

/// Host id → `V`, in [`SHARDS`] tables (see the module doc).
#[derive(Debug)]
pub(super) struct HostMap<V> {
    tables: Vec<Table<V>>,
    /// The value of host id 0 (the id that marks an empty slot).
    zero: Option<V>,
}

impl<V: Default> Default for HostMap<V> {
    fn default() -> Self {
        HostMap {
            tables: (0..SHARDS).map(|_| Table::new()).collect(),
            zero: None,
        }
    }
}

fn shard(host: u64) -> usize {
    (host >> 60) as usize % SHARDS
}

impl<V: Default> HostMap<V> {
    pub(super) fn get(&self, host: &u64) -> Option<&V> {
        if *host == EMPTY {
            return self.zero.as_ref();
        }
        let table = &self.tables[shard(*host)];
        table.find(*host).map(|i| &table.slots[i].value)
    }

    pub(super) fn get_mut(&mut self, host: &u64) -> Option<&mut V> {
        if *host == EMPTY {
            return self.zero.as_mut();
        }
        let table = &mut self.tables[shard(*host)];
        let i = table.find(*host)?;
        Some(&mut table.slots[i].value)
    }

    pub(super) fn contains_key(&self, host: &u64) -> bool {
        self.get(host).is_some()
    }

    pub(super) fn insert(&mut self, host: u64, value: V) -> Option<V> {
        if host == EMPTY {
            return self.zero.replace(value);
        }
        let table = &mut self.tables[shard(host)];
        let before = table.len;
        let i = table.find_or_take(host);
        let old = std::mem::replace(&mut table.slots[i].value, value);
        (table.len == before).then_some(old)
    }

    pub(super) fn remove(&mut self, host: &u64) -> Option<V> {
        if *host == EMPTY {
            return self.zero.take();
        }
        self.tables[shard(*host)].remove(*host)
    }

    /// `host`'s value, a default one inserted if it has none.
    pub(super) fn get_or_default(&mut self, host: u64) -> &mut V {
        if host == EMPTY {
            return self.zero.get_or_insert_with(V::default);
        }
        let table = &mut self.tables[shard(host)];
        let i = table.find_or_take(host);
        &mut table.slots[i].value
    }

    /// Asks the processor to fetch `host`'s home slot into the cache, without waiting for it:
    /// a caller that knows which hosts it will look up next (a group's entries being linked,
    /// a page's links being pushed) lets their cache misses overlap with its work.
    pub(super) fn prefetch(&self, host: u64) {
        let table = &self.tables[shard(host)];
        if table.slots.is_empty() {
            return;
        }
        let slot = &table.slots[table.home(host)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and changes no architectural state; the address is
        // a slot of a live array.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch((slot as *const Slot<V>).cast::<i8>(), _MM_HINT_T0);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    pub(super) fn len(&self) -> usize {
        self.tables.iter().map(|t| t.len).sum::<usize>() + usize::from(self.zero.is_some())
    }

    /// Bytes of the tables' arrays.
    pub(super) fn memory_bytes(&self) -> u64 {
        let slots: usize = self.tables.iter().map(|t| t.slots.len()).sum();
        (slots * std::mem::size_of::<Slot<V>>()) as u64
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &V)> + '_ {
        self.tables
            .iter()
            .flat_map(|t| t.slots.iter())
            .filter(|s| s.host != EMPTY)
            .map(|s| (&s.host, &s.value))
            .chain(self.zero.as_ref().map(|v| (&EMPTY, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_as_one_map() {
        let mut m: HostMap<u32> = HostMap::default();
        let ids: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        for (n, &id) in ids.iter().enumerate() {
            *m.get_or_default(id) += n as u32;
        }
        assert_eq!(m.len(), 1000);
        assert!(m.memory_bytes() >= 1000 * 4 / 3 * 64);
        assert_eq!(m.get(&ids[7]), Some(&7));
        assert!(m.contains_key(&ids[999]));
        assert_eq!(m.remove(&ids[7]), Some(7));
        assert_eq!(m.get(&ids[7]), None);
        assert_eq!(m.insert(ids[7], 70), None);
        *m.get_mut(&ids[7]).expect("there") += 1;
        let mut seen: Vec<u64> = m.iter().map(|(&h, _)| h).collect();
        seen.sort_unstable();
        let mut want = ids.clone();
        want.sort_unstable();
        assert_eq!(seen, want);
        assert_eq!(m.get(&ids[7]), Some(&71));
    }

    /// Ids inserted in the slot order of another table (a store reopened from its table file)
    /// are placed as well as any: no insert walks far, where the same placement in both
    /// tables sends every id of a growing table to its first slots and each insert across
    /// one cluster (quadratic: the longest walk here 2,188 slots with one seed for every
    /// table). The bound sits above what a random placement walks at 3/4 load, whose longest
    /// walk over 16 tables of ~12,500 ids runs to ~320 slots (a bound of 200 failed 3 runs
    /// in 60).
    #[test]
    fn ids_in_another_tables_order_are_placed_without_long_walks() {
        let mut first: HostMap<u32> = HostMap::default();
        for i in 0..200_000u64 {
            first.insert(i.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1, 0);
        }
        let mut second: HostMap<u32> = HostMap::default();
        for (&host, _) in first.iter() {
            second.insert(host, 0);
        }
        assert_eq!(second.len(), 200_000);
        for m in [&first, &second] {
            let longest = m.tables.iter().map(|t| t.longest_probe).max();
            assert!(longest < Some(1_000), "{longest:?}");
        }
    }

    proptest! {
        /// Inserts, updates and removals (many of them, so that tables grow and entries
        /// shift back into holes), over ids that collide on purpose (few distinct homes, id 0
        /// among them), answer as a `HashMap` does, and iteration lists exactly its entries.
        #[test]
        fn answers_as_a_hash_map(
            ops in proptest::collection::vec((0u8..4, 0u64..300, any::<u32>()), 1..2000),
            spread in prop_oneof![Just(1u64), Just(1u64 << 40), Just(0x9E37_79B9_7F4A_7C15)],
        ) {
            let mut m: HostMap<u32> = HostMap::default();
            let mut model: HashMap<u64, u32> = HashMap::new();
            for (op, key, value) in ops {
                let host = key.wrapping_mul(spread);
                match op {
                    0 => prop_assert_eq!(m.insert(host, value), model.insert(host, value)),
                    1 => prop_assert_eq!(m.remove(&host), model.remove(&host)),
                    2 => {
                        *m.get_or_default(host) += 1;
                        *model.entry(host).or_default() += 1;
                    }
                    _ => {
                        if let Some(v) = m.get_mut(&host) {
                            *v ^= value;
                        }
                        if let Some(v) = model.get_mut(&host) {
                            *v ^= value;
                        }
                    }
                }
                prop_assert_eq!(m.get(&host), model.get(&host));
                prop_assert_eq!(m.len(), model.len());
            }
            for (host, value) in &model {
                prop_assert_eq!(m.get(host), Some(value));
            }
            let mut listed: Vec<(u64, u32)> = m.iter().map(|(&h, &v)| (h, v)).collect();
            listed.sort_unstable();
            let mut want: Vec<(u64, u32)> = model.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(listed, want);
        }
    }
}
