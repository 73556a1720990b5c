//! Live insertion and bit counts, cheap to update from many threads and cheap to read.
//!
//! Each thread adds to its own shard (chosen once per thread), so the counter's cache line
//! stays in that thread's core: a shard chosen by block instead was the other thread's last
//! time about half the time on two threads, one cross-core transfer per insert. Reading sums
//! the shards, O(shards), never the bit array.
//!
//! While the filter has fewer than 2^32 probe-able bits (up to a 512 MiB array), a shard
//! packs insertions in its high 32 bits and bits in its low 32, so a new key costs one atomic
//! add. Neither half can overflow into the other: every counted key set at least one bit, so
//! over all shards together both halves are at most the probe-able bits. Larger filters
//! (where a miss costs far more than a second add) keep two plain counters.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SHARDS: usize = 64;
const HIGH: u64 = 1 << 32;
const LOW_MASK: u64 = HIGH - 1;

/// One shard on its own pair of cache lines (the adjacent-line prefetcher pulls pairs).
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    /// Packed (insertions, bits), or insertions alone in wide mode.
    first: AtomicU64,
    /// Bits, in wide mode only.
    second: AtomicU64,
}

pub struct LiveCounters {
    shards: Box<[Shard]>,
    packed: bool,
    /// Counts that came with a loaded file.
    base_insertions: u64,
    base_bits: u64,
}

impl LiveCounters {
    pub fn new(probe_bits: u64, base_insertions: u64, base_bits: u64) -> LiveCounters {
        LiveCounters {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            packed: probe_bits < HIGH,
            base_insertions,
            base_bits,
        }
    }

    /// Adds new keys and the bits they set. Release: whoever reads the counts with Acquire
    /// also sees the bits they count.
    #[inline]
    pub fn add(&self, insertions: u64, bits: u64) {
        let shard = &self.shards[this_thread_shard()];
        if self.packed {
            shard
                .first
                .fetch_add(insertions * HIGH + bits, Ordering::Release);
        } else {
            shard.second.fetch_add(bits, Ordering::Release);
            shard.first.fetch_add(insertions, Ordering::Release);
        }
    }

    /// (insertions, bits set) so far.
    pub fn read(&self, order: Ordering) -> (u64, u64) {
        let (mut insertions, mut bits) = (self.base_insertions, self.base_bits);
        for shard in self.shards.iter() {
            let first = shard.first.load(order);
            if self.packed {
                insertions += first >> 32;
                bits += first & LOW_MASK;
            } else {
                insertions += first;
                bits += shard.second.load(order);
            }
        }
        (insertions, bits)
    }
}

/// This thread's shard: threads are numbered in the order they first insert.
#[inline]
fn this_thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD.with(|shard| {
        let mut index = shard.get();
        if index == usize::MAX {
            index = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            shard.set(index);
        }
        index
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_and_wide_count_the_same() {
        for probe_bits in [1_000, HIGH] {
            let counters = std::sync::Arc::new(LiveCounters::new(probe_bits, 7, 70));
            std::thread::scope(|s| {
                for _ in 0..4 {
                    let counters = &counters;
                    s.spawn(move || {
                        for i in 0..1000 {
                            counters.add(1, i % 11 + 1);
                        }
                    });
                }
            });
            let bits: u64 = (0..1000).map(|i| i % 11 + 1).sum::<u64>() * 4;
            assert_eq!(counters.read(Ordering::Acquire), (4007, bits + 70));
        }
    }

    #[test]
    fn packed_halves_hold_up_to_their_bound() {
        // All the bits of a just-below-2^32-bit filter counted by one thread, one key each.
        let counters = LiveCounters::new(HIGH - 1, 0, 0);
        counters.add(HIGH - 1, HIGH - 1);
        assert_eq!(counters.read(Ordering::Relaxed), (HIGH - 1, HIGH - 1));
    }
}
