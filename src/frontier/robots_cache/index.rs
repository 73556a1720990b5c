//! The in-memory index host → (record location, coarse expiry): three sorted parallel arrays
//! and a small delta map (see "The index" in the module doc), and the coarse expiry it keeps.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::format::loc_len;

/// The location of a removed entry in the sorted arrays (never a real one: records are far
/// shorter than `LEN_MASK`).
pub(super) const TOMBSTONE: u64 = u64::MAX;
/// The delta map is merged into the sorted arrays when it holds more than
/// `max(DELTA_MIN, sorted / DELTA_SHARE)` hosts.
pub(super) const DELTA_MIN: usize = 1024;
pub(super) const DELTA_SHARE: usize = 16;
/// Tombstones are purged when more than `max(DELTA_MIN, sorted / TOMBSTONE_SHARE)`.
pub(super) const TOMBSTONE_SHARE: usize = 4;

/// Expiry in whole seconds, rounded up, so that `now_ms >= secs * 1000` proves the exact
/// expiry passed. `u32::MAX` means "at or after 2106": the exact one must be read.
pub(super) fn expiry_secs(expires_unix_ms: u64) -> u32 {
    u32::try_from(expires_unix_ms.div_ceil(1000)).unwrap_or(u32::MAX)
}

/// Whether an entry whose coarse expiry is `secs` is certainly expired at `now_ms`.
pub(super) fn surely_expired(secs: u32, now_ms: u64) -> bool {
    secs != u32::MAX && now_ms >= secs as u64 * 1000
}

/// A host's slot in the index: where its record is and when it expires (coarsely).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) loc: u64,
    pub(super) exp: u32,
}

/// Host ids are hashes already, but tests and callers may pass small integers: one
/// multiply-xorshift spreads them over the map's buckets and its 7-bit tags.
#[derive(Default)]
pub(super) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// host → [`Slot`]: three sorted parallel arrays (20 bytes a host, no slack) for the bulk,
/// and a small hash map for hosts added since the last merge.
#[derive(Default)]
pub(super) struct Index {
    pub(super) hosts: Vec<u64>,
    pub(super) locs: Vec<u64>,
    pub(super) exps: Vec<u32>,
    /// Entries of the arrays whose location is [`TOMBSTONE`].
    pub(super) tombstones: usize,
    pub(super) delta: HashMap<u64, Slot, BuildHasherDefault<MixHasher>>,
}

impl Index {
    pub(super) fn len(&self) -> usize {
        self.hosts.len() - self.tombstones + self.delta.len()
    }

    pub(super) fn find(&self, host: u64) -> Option<usize> {
        self.hosts.binary_search(&host).ok()
    }

    pub(super) fn get(&self, host: u64) -> Option<Slot> {
        match self.find(host) {
            Some(i) if self.locs[i] != TOMBSTONE => Some(Slot {
                loc: self.locs[i],
                exp: self.exps[i],
            }),
            Some(_) => None,
            None => self.delta.get(&host).copied(),
        }
    }

    /// Sets `host`'s slot; returns the one it replaces.
    pub(super) fn set(&mut self, host: u64, slot: Slot) -> Option<Slot> {
        if let Some(i) = self.find(host) {
            let old = self.locs[i];
            self.locs[i] = slot.loc;
            let old_exp = std::mem::replace(&mut self.exps[i], slot.exp);
            if old == TOMBSTONE {
                self.tombstones -= 1;
                return None;
            }
            return Some(Slot {
                loc: old,
                exp: old_exp,
            });
        }
        let old = self.delta.insert(host, slot);
        if self.delta.len() > DELTA_MIN.max(self.hosts.len() / DELTA_SHARE) {
            self.merge();
        }
        old
    }

    pub(super) fn remove(&mut self, host: u64) -> Option<Slot> {
        match self.find(host) {
            Some(i) => {
                let old = std::mem::replace(&mut self.locs[i], TOMBSTONE);
                if old == TOMBSTONE {
                    return None;
                }
                self.tombstones += 1;
                if self.tombstones > DELTA_MIN.max(self.hosts.len() / TOMBSTONE_SHARE) {
                    self.merge();
                }
                Some(Slot {
                    loc: old,
                    exp: self.exps[i],
                })
            }
            None => self.delta.remove(&host),
        }
    }

    /// Removes every entry certainly expired at `now_ms` (the coarse expiry says so) and
    /// returns the bytes their records held.
    pub(super) fn forget_expired(&mut self, now_ms: u64) -> (usize, u64) {
        let (mut count, mut bytes) = (0, 0);
        for i in 0..self.hosts.len() {
            if self.locs[i] != TOMBSTONE && surely_expired(self.exps[i], now_ms) {
                bytes += loc_len(self.locs[i]) as u64;
                count += 1;
                self.locs[i] = TOMBSTONE;
                self.tombstones += 1;
            }
        }
        self.delta.retain(|_, s| {
            let expired = surely_expired(s.exp, now_ms);
            if expired {
                bytes += loc_len(s.loc) as u64;
                count += 1;
            }
            !expired
        });
        if self.tombstones > DELTA_MIN.max(self.hosts.len() / TOMBSTONE_SHARE) {
            self.merge();
        }
        (count, bytes)
    }

    /// Purges the tombstones and moves the delta into the sorted arrays, in place: the arrays
    /// grow by exactly the delta's size (a large `realloc` is a `mremap`, not a copy).
    pub(super) fn merge(&mut self) {
        if self.tombstones > 0 {
            let mut w = 0;
            for r in 0..self.hosts.len() {
                if self.locs[r] != TOMBSTONE {
                    self.hosts[w] = self.hosts[r];
                    self.locs[w] = self.locs[r];
                    self.exps[w] = self.exps[r];
                    w += 1;
                }
            }
            self.hosts.truncate(w);
            self.locs.truncate(w);
            self.exps.truncate(w);
            self.tombstones = 0;
        }
        let mut add: Vec<(u64, Slot)> = self.delta.drain().collect();
        add.sort_unstable_by_key(|&(h, _)| h);
        let (n, m) = (self.hosts.len(), add.len());
        self.hosts.reserve_exact(m);
        self.locs.reserve_exact(m);
        self.exps.reserve_exact(m);
        self.hosts.resize(n + m, 0);
        self.locs.resize(n + m, 0);
        self.exps.resize(n + m, 0);
        // Merge from the back so that nothing is overwritten before it is moved.
        let (mut i, mut j, mut k) = (n, m, n + m);
        while j > 0 {
            k -= 1;
            if i > 0 && self.hosts[i - 1] > add[j - 1].0 {
                i -= 1;
                self.hosts[k] = self.hosts[i];
                self.locs[k] = self.locs[i];
                self.exps[k] = self.exps[i];
            } else {
                j -= 1;
                let (h, s) = add[j];
                self.hosts[k] = h;
                self.locs[k] = s.loc;
                self.exps[k] = s.exp;
            }
        }
        drop(add);
        // After many removals, give the arrays' slack back.
        let len = self.hosts.len();
        if self.hosts.capacity() > len + len / 8 + DELTA_MIN {
            self.hosts.shrink_to_fit();
            self.locs.shrink_to_fit();
            self.exps.shrink_to_fit();
        }
    }

    /// Bytes the index holds: the arrays' capacity and the delta map's buckets (entry and
    /// control byte each).
    pub(super) fn memory_bytes(&self) -> u64 {
        let arrays =
            self.hosts.capacity() * 8 + self.locs.capacity() * 8 + self.exps.capacity() * 4;
        let cap = self.delta.capacity();
        let buckets = if cap == 0 {
            0
        } else {
            (cap * 8).div_ceil(7).next_power_of_two()
        };
        let delta = buckets * (std::mem::size_of::<(u64, Slot)>() + 1);
        (arrays + delta) as u64
    }
}
