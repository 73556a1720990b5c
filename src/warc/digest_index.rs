//! The payload digests already archived in this crawl, in a fixed amount of memory: the
//! index behind content-level dedup (a payload seen before is written as a `revisit`).
//!
//! # Design
//! A set-associative table: `memory / 16` slots of (fingerprint, location) in buckets of
//! [`WAYS`]; a digest's bucket and fingerprint are two independent 64-bit slices of its
//! SHA-1, which is already uniformly distributed, so no further hashing is needed. A full
//! bucket forgets its oldest entry. The location is the byte offset of the original's line
//! in `pages.jsonl`, which holds everything a revisit needs (URL, date, record id, the full
//! digest); the writer reads that line back and compares the full digest, so a fingerprint
//! collision can never produce a false revisit.
//!
//! # What it guarantees
//! - **Bounded memory**, fixed at creation, whatever the crawl's size.
//! - **No false duplicate**: a hit is confirmed against the full digest before use.
//! - **Misses cost space, not correctness**: a forgotten digest means a second full copy is
//!   archived, as if dedup were off for it. With the default 32 MiB (2 Mi slots) a crawl
//!   keeps every distinct payload until about a million of them, and the most recent ones
//!   after that.
//! - **Survives resume**: it is rebuilt from `pages.jsonl` (see [`super::recovery`]), the
//!   file that already is the crawl's record of what was archived.
//!
//! Why not the seen-set's Bloom filter: a Bloom filter answers "probably seen" but cannot say
//! *where* the original is, and a revisit must name it.
//!
//! # Its memory: 2 MiB pages
//! The table is one zeroed allocation the kernel backs as it is touched; digests are
//! uniform, so the first tens of thousands of payloads touch nearly every 4 KiB page of
//! it, each twice (the lookup maps the zero page, the insert takes a fault to copy it):
//! 16,384 page faults for the default 32 MiB, ~10% of the output thread's CPU in a
//! 30,000-page crawl (`perf` of `cargo bench --bench crawl -- --warc-only`). On Linux it
//! asks for 2 MiB pages (`MADV_HUGEPAGE`, as the seen-set does): 16 faults, ~3 ms of
//! zeroing in all (measured on an anonymous 32 MiB mapping: 21 ms of sys time with 4 KiB
//! pages, 3 ms with 2 MiB ones), and no TLB miss per lookup. Where the kernel gives none,
//! nothing changes.

use super::record::Sha1Digest;
use crate::allocator::advise_huge_pages;

/// Slots per bucket: a new digest evicts only when four others share its bucket.
pub(crate) const WAYS: usize = 4;

/// One entry: the digest's fingerprint (0 marks an empty slot; a digest whose fingerprint is
/// 0 is stored as 1) and its location, as two `u64`s side by side in one array, which the
/// allocator hands out zeroed and untouched: memory is only committed as slots fill.
const SLOT_WORDS: usize = 2;

/// Digest → `pages.jsonl` offset of the first record with that payload.
#[derive(Debug)]
pub(crate) struct PayloadIndex {
    slots: Vec<u64>,
    buckets: u64,
    entries: u64,
    evictions: u64,
}

fn split(digest: &Sha1Digest) -> (u64, u64) {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&digest[0..8]);
    b.copy_from_slice(&digest[8..16]);
    (u64::from_le_bytes(a), u64::from_le_bytes(b).max(1))
}

impl PayloadIndex {
    /// An index in about `memory` bytes (at least one bucket).
    pub(crate) fn with_memory(memory: u64) -> PayloadIndex {
        let slot = (SLOT_WORDS * 8) as u64;
        let buckets = (memory / (slot * WAYS as u64)).max(1);
        let mut slots = vec![0u64; (buckets as usize) * WAYS * SLOT_WORDS];
        advise_huge_pages(&mut slots);
        PayloadIndex {
            slots,
            buckets,
            entries: 0,
            evictions: 0,
        }
    }

    fn bucket(&mut self, digest: &Sha1Digest) -> (&mut [u64], u64) {
        let (position, fingerprint) = split(digest);
        let start = (position % self.buckets) as usize * WAYS * SLOT_WORDS;
        (
            &mut self.slots[start..start + WAYS * SLOT_WORDS],
            fingerprint,
        )
    }

    /// The locations recorded under `digest`'s fingerprint, newest first (almost always zero
    /// or one; confirm each against the full digest).
    pub(crate) fn candidates(&mut self, digest: &Sha1Digest) -> Vec<u64> {
        let (bucket, fingerprint) = self.bucket(digest);
        bucket
            .chunks_exact(SLOT_WORDS)
            .filter(|s| s[0] == fingerprint)
            .map(|s| s[1])
            .collect()
    }

    /// Records that `digest`'s original is at `location`, forgetting the bucket's oldest
    /// entry if it is full.
    pub(crate) fn insert(&mut self, digest: &Sha1Digest, location: u64) {
        let (bucket, fingerprint) = self.bucket(digest);
        let evicted = bucket[(WAYS - 1) * SLOT_WORDS] != 0;
        // Newest first: shift the others down one place, dropping the last.
        bucket.copy_within(0..(WAYS - 1) * SLOT_WORDS, SLOT_WORDS);
        bucket[0] = fingerprint;
        bucket[1] = location;
        if evicted {
            self.evictions += 1;
        } else {
            self.entries += 1;
        }
    }

    /// Digests held now.
    pub(crate) fn len(&self) -> u64 {
        self.entries
    }

    /// Digests forgotten to make room.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Bytes of memory held.
    #[cfg(test)]
    pub(crate) fn memory(&self) -> u64 {
        (self.slots.len() * 8) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::record::sha1_of;
    use proptest::prelude::*;

    fn digest(i: u64) -> Sha1Digest {
        sha1_of(&[&i.to_le_bytes()])
    }

    #[test]
    fn finds_what_it_holds_and_nothing_else() {
        // 512 Ki slots for 10,000 digests: no bucket of 4 overflows (these digests are fixed).
        let mut index = PayloadIndex::with_memory(8 << 20);
        for i in 0..10_000 {
            index.insert(&digest(i), i * 10);
        }
        for i in 0..10_000 {
            assert_eq!(index.candidates(&digest(i)), vec![i * 10]);
        }
        for i in 10_000..20_000 {
            assert!(index.candidates(&digest(i)).is_empty());
        }
        assert_eq!(index.len(), 10_000);
        assert_eq!(index.evictions(), 0);
        assert_eq!(index.memory(), 8 << 20);
    }

    #[test]
    fn memory_is_fixed_and_the_oldest_are_forgotten_first() {
        // 64 slots: 16 buckets of 4.
        let mut index = PayloadIndex::with_memory(1024);
        for i in 0..1000 {
            index.insert(&digest(i), i);
        }
        assert_eq!(index.memory(), 1024);
        assert_eq!(index.len(), 64);
        assert_eq!(index.evictions(), 1000 - 64);
        let kept_recent = (900..1000)
            .filter(|&i| !index.candidates(&digest(i)).is_empty())
            .count();
        let kept_old = (0..100)
            .filter(|&i| !index.candidates(&digest(i)).is_empty())
            .count();
        assert!(kept_recent > kept_old, "{kept_recent} vs {kept_old}");
        assert_eq!(kept_old, 0);
    }

    proptest! {
        /// Within capacity (one bucket's worth per bucket at most), every inserted digest
        /// is found at its location, as the model map says.
        #[test]
        fn agrees_with_a_map_while_nothing_is_evicted(keys in proptest::collection::hash_set(any::<u64>(), 0..200)) {
            let mut index = PayloadIndex::with_memory(1 << 16);
            let mut model = std::collections::HashMap::new();
            for (n, k) in keys.iter().enumerate() {
                index.insert(&digest(*k), n as u64);
                model.insert(*k, n as u64);
            }
            prop_assume!(index.evictions() == 0);
            for (k, at) in &model {
                prop_assert_eq!(index.candidates(&digest(*k)), vec![*at]);
            }
        }
    }
}
