//! The payload digests already archived in this crawl, in a fixed amount of memory: the
//! index behind content-level dedup (a payload seen before is written as a `revisit`).
//!
//! # Design
//! A set-associative table: up to `memory / 16` slots of (fingerprint, location) in buckets
//! of [`WAYS`]; a digest's fingerprint is a 64-bit slice of its SHA-1, which is already
//! uniformly distributed, so no further hashing is needed, and its bucket is the
//! fingerprint modulo the buckets. A full bucket forgets its oldest entry. The location is the byte offset of the original's line
//! in `pages.jsonl`, which holds everything a revisit needs (URL, date, record id, the full
//! digest); the writer reads that line back and compares the full digest, so a fingerprint
//! collision can never produce a false revisit.
//!
//! # What it guarantees
//! - **Bounded memory**, set at creation, whatever the crawl's size; the table starts at
//!   1 MiB and doubles, up to that, rather than forget a digest (see below).
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
//!
//! # Grown as it fills
//! On a virtual machine whose host takes back the memory a guest frees (free page
//! reporting: the crawl bench's machine), zeroing fresh memory is slower still: the output
//! thread spent ~44 ms a crawl zeroing the 32 MiB (`clear_page_erms`, 175 of its 2,047
//! samples in `perf record` of `cargo bench --bench crawl -- --warc-only --runs 1`: ~1.5 µs
//! a page of a 30,000-page crawl), for a table that 30,000 digests fill to 1.4%. So the
//! table starts at [`FIRST_MEMORY`] and doubles, up to the memory it was given, whenever a
//! digest would otherwise be forgotten (its bucket full): a crawl touches memory in
//! proportion to the payloads it archives (~4–8 MiB for 30,000), and forgets nothing before
//! the table has all its memory, as when it had it from the start. Doubling keeps
//! everything: the bucket is the fingerprint modulo the buckets, so bucket `b`'s entries go
//! to `b` or `b + buckets` of the table twice as big, in their order; once at full size
//! the table holds what a table of that size from the start would. The memory given is
//! reached by doubling exactly (the first size is the memory halved while it stays even and
//! above [`FIRST_MEMORY`]); a doubling costs a pass over the table, once per size.

use super::record::Sha1Digest;
use crate::allocator::advise_huge_pages;

/// Slots per bucket: a new digest evicts only when four others share its bucket.
pub(crate) const WAYS: usize = 4;

/// One entry: the digest's fingerprint (0 marks an empty slot; a digest whose fingerprint is
/// 0 is stored as 1) and its location, as two `u64`s side by side in one array, which the
/// allocator hands out zeroed and untouched: memory is only committed as slots fill.
const SLOT_WORDS: usize = 2;

/// The table's first size, when the memory given allows halving down to it (see the module
/// doc): what a crawl of ~30,000 payloads fills to half.
const FIRST_MEMORY: u64 = 1 << 20;

/// Bytes of one bucket.
const BUCKET_BYTES: u64 = (WAYS * SLOT_WORDS * 8) as u64;

/// Digest → `pages.jsonl` offset of the first record with that payload.
#[derive(Debug)]
pub(crate) struct PayloadIndex {
    slots: Vec<u64>,
    buckets: u64,
    /// The buckets of the memory given: the table doubles up to this many.
    most_buckets: u64,
    entries: u64,
    evictions: u64,
}

/// A digest's fingerprint (never 0: that marks an empty slot).
fn fingerprint(digest: &Sha1Digest) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[8..16]);
    u64::from_le_bytes(bytes).max(1)
}

impl PayloadIndex {
    /// An index in at most about `memory` bytes (at least one bucket).
    pub(crate) fn with_memory(memory: u64) -> PayloadIndex {
        let most_buckets = (memory / BUCKET_BYTES).max(1);
        let mut buckets = most_buckets;
        while buckets % 2 == 0 && buckets * BUCKET_BYTES > FIRST_MEMORY {
            buckets /= 2;
        }
        PayloadIndex {
            slots: Self::table(buckets),
            buckets,
            most_buckets,
            entries: 0,
            evictions: 0,
        }
    }

    /// A table of `buckets` empty buckets.
    fn table(buckets: u64) -> Vec<u64> {
        let mut slots = vec![0u64; (buckets as usize) * WAYS * SLOT_WORDS];
        advise_huge_pages(&mut slots);
        slots
    }

    fn bucket(&mut self, digest: &Sha1Digest) -> (&mut [u64], u64) {
        let fingerprint = fingerprint(digest);
        let start = (fingerprint % self.buckets) as usize * WAYS * SLOT_WORDS;
        (
            &mut self.slots[start..start + WAYS * SLOT_WORDS],
            fingerprint,
        )
    }

    /// Doubles the table, each bucket's entries going, in their order, to the bucket of the
    /// same number or the one `buckets` past it (fingerprint modulo twice the buckets).
    fn double(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let buckets = self.buckets * 2;
        let mut slots = Self::table(buckets);
        let bucket_words = WAYS * SLOT_WORDS;
        for (b, bucket) in old.chunks_exact(bucket_words).enumerate() {
            let mut filled = [0usize; 2];
            for slot in bucket.chunks_exact(SLOT_WORDS).filter(|s| s[0] != 0) {
                let half = usize::from(slot[0] % buckets != b as u64);
                let to =
                    (b + half * self.buckets as usize) * bucket_words + filled[half] * SLOT_WORDS;
                slots[to..to + SLOT_WORDS].copy_from_slice(slot);
                filled[half] += 1;
            }
        }
        self.slots = slots;
        self.buckets = buckets;
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
        // Grown rather than forgetting, while it may (`most_buckets` is `buckets` times a
        // power of two, see `with_memory`).
        while self.buckets < self.most_buckets
            && self.bucket(digest).0[(WAYS - 1) * SLOT_WORDS] != 0
        {
            self.double();
        }
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
        // Grown from 1 MiB as buckets filled, not to its whole memory.
        assert!(index.memory() >= FIRST_MEMORY && index.memory() < 8 << 20);
    }

    #[test]
    fn it_doubles_rather_than_forget_up_to_its_memory_and_loses_nothing_doing_so() {
        let mut index = PayloadIndex::with_memory(8 << 20);
        let mut sizes = vec![index.memory()];
        let n = 400_000;
        for i in 0..n {
            index.insert(&digest(i), i * 10);
            if index.memory() != *sizes.last().unwrap() {
                sizes.push(index.memory());
            }
            if index.memory() < 8 << 20 {
                assert_eq!(index.evictions(), 0, "forgot at {i}, before its full size");
            }
        }
        // From 1 MiB, doubled (a full bucket can take two doublings at once), to 8 MiB.
        assert_eq!(sizes.first(), Some(&(1 << 20)));
        assert_eq!(sizes.last(), Some(&(8 << 20)));
        assert!(sizes
            .windows(2)
            .all(|w| w[1] > w[0] && (w[1] / w[0]).is_power_of_two()));
        // Every digest held is found where it was put; those not held were forgotten by a
        // full bucket once the table had all its memory.
        let found = (0..n)
            .filter(|&i| match index.candidates(&digest(i)).as_slice() {
                [] => false,
                [at] => {
                    assert_eq!(*at, i * 10);
                    true
                }
                more => panic!("{i}: {more:?}"),
            })
            .count() as u64;
        assert_eq!(found, index.len());
        assert_eq!(index.len() + index.evictions(), n);
        assert!(index.evictions() > 0);
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
