//! The store's per-host entries: [`HostMap`], one map split into [`SHARDS`] hash maps by the
//! host id's top bits, so that growing it never holds two whole arrays at once.
//!
//! Why: a hash map doubles its array when it fills, and for a moment holds the old array and
//! the new one. The store's map has an entry per host with something queued (~57 bytes per
//! bucket), so at 1e6 hosts one doubling is ~60 MB old plus ~120 MB new: in the scale bench at
//! 1e8 URLs, peak RSS jumped by ~94 MiB when the hosts queued passed 917 k (7/8 of 2²⁰), and
//! that jump is what put the peak above its bound. Split in 16, each part doubles on its own,
//! at a sixteenth of the cost; lookups pay one shift to pick the part. The ids are XXH3 hashes
//! already, so their top bits spread hosts evenly, and each part hashes with FxHash (one
//! multiply). The peak RSS with the split was not measured yet (the 1e8 run takes longer than
//! this change had left): expected ~55 MiB lower at 1e6 hosts, the old array's share.

use rustc_hash::FxHashMap;

/// How many maps the entries are split into.
pub(super) const SHARDS: usize = 16;

/// Host id → `V`, in [`SHARDS`] maps (see the module doc).
#[derive(Debug)]
pub(super) struct HostMap<V> {
    shards: Vec<FxHashMap<u64, V>>,
}

impl<V> Default for HostMap<V> {
    fn default() -> Self {
        HostMap {
            shards: (0..SHARDS).map(|_| FxHashMap::default()).collect(),
        }
    }
}

fn shard(host: u64) -> usize {
    (host >> 60) as usize % SHARDS
}

impl<V> HostMap<V> {
    pub(super) fn get(&self, host: &u64) -> Option<&V> {
        self.shards[shard(*host)].get(host)
    }

    pub(super) fn get_mut(&mut self, host: &u64) -> Option<&mut V> {
        self.shards[shard(*host)].get_mut(host)
    }

    pub(super) fn contains_key(&self, host: &u64) -> bool {
        self.shards[shard(*host)].contains_key(host)
    }

    pub(super) fn insert(&mut self, host: u64, value: V) -> Option<V> {
        self.shards[shard(host)].insert(host, value)
    }

    pub(super) fn remove(&mut self, host: &u64) -> Option<V> {
        self.shards[shard(*host)].remove(host)
    }

    /// `host`'s value, a default one inserted if it has none.
    pub(super) fn get_or_default(&mut self, host: u64) -> &mut V
    where
        V: Default,
    {
        self.shards[shard(host)].entry(host).or_default()
    }

    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    /// Entries the maps can hold without growing (what their arrays cost).
    pub(super) fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.capacity()).sum()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &V)> + '_ {
        self.shards.iter().flat_map(|s| s.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(m.capacity() >= 1000);
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
}
