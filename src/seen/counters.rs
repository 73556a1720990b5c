//! Live insertion and bit counts, cheap to update from many threads and cheap to read.
//!
//! Each thread owns one of 64 shards while it lives (a process-wide slot, claimed on first use
//! and given back when the thread exits), so the shard's cache line stays in that thread's
//! core and, having a single writer, is updated with a plain load and store instead of a
//! locked read-modify-write. A shard chosen by block instead was the other thread's last time
//! about half the time on two threads: one cross-core transfer per insert. Threads beyond 64
//! at once share one more shard with atomic adds. Reading sums the shards, never the array.
//!
//! While the filter has fewer than 2^32 probe-able bits (up to a 512 MiB array), a shard
//! packs insertions in its high 32 bits and bits in its low 32, so a new key is one add.
//! Neither half can overflow into the other: every counted key set at least one bit, so over
//! all shards together both halves are at most the probe-able bits. Larger filters (where a
//! miss costs far more than a second add) keep two counters.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 64;
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

impl Shard {
    /// Adds when this thread is the shard's only writer: no locked instruction needed.
    #[inline]
    fn add_owned(counter: &AtomicU64, delta: u64) {
        let value = counter.load(Ordering::Relaxed);
        // Release: whoever reads the count with Acquire also sees the bits it counts.
        counter.store(value.wrapping_add(delta), Ordering::Release);
    }
}

pub(crate) struct LiveCounters {
    /// One per slot, then the shared overflow shard.
    shards: Box<[Shard]>,
    packed: bool,
    /// Counts that came with a loaded file.
    base_insertions: u64,
    base_bits: u64,
}

impl LiveCounters {
    pub(crate) fn new(probe_bits: u64, base_insertions: u64, base_bits: u64) -> LiveCounters {
        LiveCounters {
            shards: (0..=SLOTS).map(|_| Shard::default()).collect(),
            packed: probe_bits < HIGH,
            base_insertions,
            base_bits,
        }
    }

    /// Adds new keys and the bits they set.
    #[inline]
    pub(crate) fn add(&self, insertions: u64, bits: u64) {
        match slot::current() {
            Some(slot) => {
                let shard = &self.shards[slot];
                if self.packed {
                    Shard::add_owned(&shard.first, insertions * HIGH + bits);
                } else {
                    Shard::add_owned(&shard.second, bits);
                    Shard::add_owned(&shard.first, insertions);
                }
            }
            None => {
                let shard = &self.shards[SLOTS];
                if self.packed {
                    shard
                        .first
                        .fetch_add(insertions * HIGH + bits, Ordering::Release);
                } else {
                    shard.second.fetch_add(bits, Ordering::Release);
                    shard.first.fetch_add(insertions, Ordering::Release);
                }
            }
        }
    }

    /// (insertions, bits set) so far.
    pub(crate) fn read(&self, order: Ordering) -> (u64, u64) {
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

/// Process-wide writer slots: at most one live thread holds each.
mod slot {
    use super::SLOTS;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Bit s set: slot s is held by a live thread.
    static TAKEN: AtomicU64 = AtomicU64::new(0);

    /// Holds a slot for the life of its thread.
    struct Held(Option<usize>);

    impl Drop for Held {
        fn drop(&mut self) {
            if let Some(slot) = self.0 {
                // Release: the next holder sees this thread's last plain stores.
                TAKEN.fetch_and(!(1 << slot), Ordering::Release);
            }
        }
    }

    fn claim() -> Held {
        let mut taken = TAKEN.load(Ordering::Relaxed);
        loop {
            if taken == u64::MAX {
                return Held(None);
            }
            let slot = (!taken).trailing_zeros() as usize;
            match TAKEN.compare_exchange_weak(
                taken,
                taken | (1 << slot),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Held(Some(slot)),
                Err(now) => taken = now,
            }
        }
    }

    thread_local! {
        static HELD: Held = claim();
    }

    /// This thread's slot; None when 64 other threads hold them all, or while this thread
    /// is being torn down.
    #[inline]
    pub(crate) fn current() -> Option<usize> {
        const _: () = assert!(SLOTS == 64, "TAKEN is a 64-bit map");
        HELD.try_with(|held| held.0).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_and_wide_count_the_same_across_threads_coming_and_going() {
        for probe_bits in [1_000, HIGH] {
            let counters = LiveCounters::new(probe_bits, 7, 70);
            // 100 short-lived threads, up to 10 at once: slots are handed back and reused,
            // and no count is lost on the way.
            for _ in 0..10 {
                std::thread::scope(|s| {
                    for _ in 0..10 {
                        s.spawn(|| {
                            for i in 0..1000 {
                                counters.add(1, i % 11 + 1);
                            }
                        });
                    }
                });
            }
            let bits: u64 = (0..1000).map(|i| i % 11 + 1).sum::<u64>() * 100;
            assert_eq!(counters.read(Ordering::Acquire), (100_007, bits + 70));
        }
    }

    #[test]
    fn more_threads_than_slots_share_the_overflow_shard() {
        let counters = LiveCounters::new(1_000_000, 0, 0);
        let barrier = std::sync::Barrier::new(100);
        std::thread::scope(|s| {
            for _ in 0..100 {
                s.spawn(|| {
                    // All alive at once, so at least 36 of them find no slot.
                    barrier.wait();
                    for _ in 0..100 {
                        counters.add(1, 2);
                    }
                    barrier.wait();
                });
            }
        });
        assert_eq!(counters.read(Ordering::Acquire), (10_000, 20_000));
    }

    #[test]
    fn packed_halves_hold_up_to_their_bound() {
        // All the bits of a just-below-2^32-bit filter counted by one thread, one key each.
        let counters = LiveCounters::new(HIGH - 1, 0, 0);
        counters.add(HIGH - 1, HIGH - 1);
        assert_eq!(counters.read(Ordering::Relaxed), (HIGH - 1, HIGH - 1));
    }
}
