//! The URL-seen set: a concurrent, cache-line-blocked Bloom filter that answers "was this
//! URL new?" exactly once, sized from a false-positive rate or a memory budget, and saved
//! to disk atomically.
//!
//! (Full design notes, figures and file format: see the end of this doc once measured.)

mod blocks;
mod error;
mod file;
mod plan;
mod probe;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use blocks::{Block, BlockArray, LOCK_BIT, LOCK_WORD};
pub use error::SeenError;
pub use file::SeenSnapshot;
pub use plan::{
    blocked_fpp, blocked_fpp_at_load, classic_fpp, classic_m_k, machine_memory_bytes, Layout, Plan,
    PlanError, BLOCK_BITS, DEFAULT_SEED, FPP_HEADROOM, MAX_K, PROBE_BITS,
};
use probe::{murmur3_halves, probe, Probe};

/// Fewest counter shards: an insert updates the shard of its block, so two threads share a
/// counter cache line only when their blocks agree in the low 6 bits.
const MIN_SHARDS: usize = 64;
/// Keys hashed and prefetched ahead of the inserts in `insert_new_batch`: enough to cover a
/// memory latency with hashing work, few enough that the lines are still in L1 when used.
const BATCH_WINDOW: usize = 64;

/// One shard of the live counters: insertions in the high 32 bits, bits set in the low 32, so
/// a new key costs one atomic add. Neither half can overflow into the other: every counted key
/// set at least one bit, so both halves are at most the probe-able bits of the shard's blocks,
/// and there are enough shards to keep that below 2^32. Each shard has its own pair of cache
/// lines (the adjacent-line prefetcher pulls lines in pairs).
#[repr(align(128))]
#[derive(Default)]
struct Shard(AtomicU64);

const INSERTION_UNIT: u64 = 1 << 32;
const BITS_MASK: u64 = INSERTION_UNIT - 1;

/// Counts kept outside the shards: those of a loaded file and of whole batches (one add per
/// batch), which would break the shards' bound.
#[derive(Default)]
struct Totals {
    insertions: AtomicU64,
    bits_set: AtomicU64,
}

/// The set of URLs already seen; share it through an `Arc`.
pub struct SeenSet {
    plan: Plan,
    array: BlockArray,
    shards: Box<[Shard]>,
    totals: Totals,
}

/// Live figures, summed from the counter shards without touching the bit array.
#[derive(Debug, Clone, Copy)]
pub struct SeenStats {
    /// Keys reported new by `insert_new` (and counted in loaded files).
    pub insertions: u64,
    /// Bits set in the array.
    pub bits_set: u64,
    /// Bits in the array, lock bits included.
    pub m_bits: u64,
    /// Probes per key.
    pub k: u32,
    /// bits_set over the probe-able bits (511 of every 512).
    pub fill: f64,
    /// fpp estimated from the fill with the blocked model (see the module doc).
    pub estimated_fpp: f64,
}

impl SeenSet {
    /// An empty filter as planned.
    pub fn new(plan: Plan) -> Result<SeenSet, SeenError> {
        let len = usize::try_from(plan.blocks)
            .map_err(|_| SeenError::OutOfMemory { bytes: plan.bytes })?;
        let array = BlockArray::zeroed(len).ok_or(SeenError::OutOfMemory { bytes: plan.bytes })?;
        Ok(SeenSet::from_parts(plan, array, 0, 0))
    }

    fn from_parts(plan: Plan, array: BlockArray, insertions: u64, bits_set: u64) -> SeenSet {
        // Blocks per shard × 511 must stay below 2^32 (see Shard).
        let max_blocks_per_shard = (BITS_MASK / PROBE_BITS) as usize;
        let shards = array
            .blocks()
            .len()
            .div_ceil(max_blocks_per_shard)
            .next_power_of_two()
            .max(MIN_SHARDS);
        SeenSet {
            plan,
            array,
            shards: (0..shards).map(|_| Shard::default()).collect(),
            totals: Totals {
                insertions: AtomicU64::new(insertions),
                bits_set: AtomicU64::new(bits_set),
            },
        }
    }

    /// The plan this filter was built from (or read back from its file).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    #[inline]
    fn probe_of(&self, key: &[u8]) -> Probe {
        let (h1, h2) = murmur3_halves(key, self.plan.seed);
        probe(h1, h2, self.plan.blocks, self.plan.k)
    }

    #[inline]
    fn block(&self, probe: &Probe) -> &Block {
        // probe() scales into 0..blocks, so this index is always in range.
        &self.array.blocks()[probe.block]
    }

    /// Sets the key's bits; true for exactly one caller per new key, however many threads
    /// insert it at once.
    #[inline]
    pub fn insert_new(&self, key: &[u8]) -> bool {
        let probe = self.probe_of(key);
        let changed = self.set_bits(&probe);
        if changed == 0 {
            return false;
        }
        let shard = &self.shards[probe.block & (self.shards.len() - 1)];
        // Release: a snapshot that reads this count sees the bits counted.
        shard
            .0
            .fetch_add(INSERTION_UNIT | u64::from(changed), Ordering::Release);
        true
    }

    /// True if the key may have been inserted (false positives at the planned rate), false if
    /// it certainly was not.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        let probe = self.probe_of(key);
        all_set(self.block(&probe), &probe.masks)
    }

    /// `insert_new` for each key in order, answers pushed onto `out` (cleared first). A key
    /// repeated inside the batch is new only at its first occurrence. All keys are hashed and
    /// their blocks prefetched before the first insert, so the cache misses overlap. The live
    /// counters take the batch's figures in one step at its end.
    pub fn insert_new_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        out.reserve(keys.len());
        let mut probes = [Probe::default(); BATCH_WINDOW];
        let (mut insertions, mut bits_set) = (0u64, 0u64);
        for chunk in keys.chunks(BATCH_WINDOW) {
            for (slot, key) in probes.iter_mut().zip(chunk) {
                *slot = self.probe_of(key);
                prefetch(self.block(slot));
            }
            for probe in &probes[..chunk.len()] {
                let changed = self.set_bits(probe);
                out.push(changed != 0);
                insertions += u64::from(changed != 0);
                bits_set += u64::from(changed);
            }
        }
        if insertions != 0 {
            self.totals.bits_set.fetch_add(bits_set, Ordering::Relaxed);
            self.totals
                .insertions
                .fetch_add(insertions, Ordering::Release);
        }
    }

    /// The insert itself. Lock-free when every bit is already set (the common duplicate);
    /// otherwise the block's lock bit, in the same cache line as the bits, makes the
    /// check-and-set one atomic step: whoever finds a bit clear under the lock is first.
    /// Returns how many bits it set; 0 means "not new".
    #[inline]
    fn set_bits(&self, probe: &Probe) -> u32 {
        let block = self.block(probe);
        if all_set(block, &probe.masks) {
            return 0;
        }
        let lock_word = lock(block);
        // Holding the lock: no other writer can touch this block, plain loads and stores
        // suffice; they are atomic only so that lock-free readers see whole words.
        let mut changed = 0u32;
        for (word, &mask) in block.0[..LOCK_WORD].iter().zip(&probe.masks[..LOCK_WORD]) {
            let old = word.load(Ordering::Relaxed);
            if old & mask != mask {
                word.store(old | mask, Ordering::Relaxed);
                changed += (!old & mask).count_ones();
            }
        }
        let last = probe.masks[LOCK_WORD];
        changed += (!lock_word & last).count_ones();
        // Release publishes the other words to the next lock holder.
        block.0[LOCK_WORD].store((lock_word | last) & !LOCK_BIT, Ordering::Release);
        // 0 when another key, or this one a moment earlier, set them all first.
        changed
    }

    /// (insertions, bits set) summed over the shards and totals.
    fn counts(&self, order: Ordering) -> (u64, u64) {
        let mut insertions = self.totals.insertions.load(order);
        let mut bits_set = self.totals.bits_set.load(Ordering::Relaxed);
        for shard in self.shards.iter() {
            let packed = shard.0.load(order);
            insertions += packed >> 32;
            bits_set += packed & BITS_MASK;
        }
        (insertions, bits_set)
    }

    /// Live figures from the counter shards; O(shards), never scans the array.
    pub fn stats(&self) -> SeenStats {
        let (insertions, bits_set) = self.counts(Ordering::Relaxed);
        let probe_bits = self.plan.blocks * PROBE_BITS;
        let fill = if probe_bits == 0 {
            0.0
        } else {
            bits_set as f64 / probe_bits as f64
        };
        SeenStats {
            insertions,
            bits_set,
            m_bits: self.plan.m_bits,
            k: self.plan.k,
            fill,
            estimated_fpp: fpp_from_fill(fill, self.plan.k),
        }
    }

    /// Copies the array and counters; inserts carry on during the copy (see [`SeenSnapshot`]).
    pub fn snapshot(&self) -> SeenSnapshot {
        let (insertions, _) = self.counts(Ordering::Acquire);
        let mut words = Vec::with_capacity(self.array.blocks().len() * 8);
        for block in self.array.blocks() {
            for (i, word) in block.0.iter().enumerate() {
                let value = word.load(Ordering::Relaxed);
                let value = if i == LOCK_WORD {
                    value & !LOCK_BIT
                } else {
                    value
                };
                words.push(value.to_le());
            }
        }
        SeenSnapshot {
            plan: self.plan.clone(),
            insertions,
            words,
        }
    }

    /// Saves atomically to `path`: snapshot, then write to a temporary file, fsync, rename,
    /// fsync the directory.
    pub fn save(&self, path: &Path) -> Result<(), SeenError> {
        self.snapshot().write(path)
    }

    /// Loads a file written by `save`, refusing any that is damaged.
    pub fn load(path: &Path) -> Result<SeenSet, SeenError> {
        let loaded = file::read(path)?;
        Ok(SeenSet::from_parts(
            loaded.plan,
            loaded.array,
            loaded.insertions,
            loaded.bits_set,
        ))
    }
}

#[inline]
fn all_set(block: &Block, masks: &[u64; 8]) -> bool {
    let mut missing = 0u64;
    for (word, &mask) in block.0.iter().zip(masks) {
        missing |= mask & !word.load(Ordering::Relaxed);
    }
    missing == 0
}

/// Takes the block's lock and returns its lock word as it was (lock bit clear).
#[inline]
fn lock(block: &Block) -> u64 {
    let word = &block.0[LOCK_WORD];
    let mut spins = 0u32;
    // Testing only the lock bit of the old value lets this be one `lock bts` rather than a
    // compare-exchange loop; the rest of the word is read once the lock is held.
    while word.fetch_or(LOCK_BIT, Ordering::Acquire) & LOCK_BIT != 0 {
        // Held for a few nanoseconds unless its holder was preempted; then let it run.
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    word.load(Ordering::Relaxed) & !LOCK_BIT
}

#[inline]
fn prefetch(block: &Block) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            block as *const Block as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = block;
}

/// fpp estimated from the fill of the probe-able bits, through the blocked model.
///
/// With Poisson block loads of mean λ and c = (1 − 1/511)^k the chance that one key leaves a
/// given bit clear, the expected fill is 1 − e^(−λ(1−c)); inverting gives the λ that explains
/// the observed fill, and the model gives its fpp. fill^k, the classic estimate, would be too
/// optimistic here: a key's block is often fuller than the average block (at 14.4 bits/URL,
/// k = 10: fill^k = 0.0010 while the blocked fpp is 0.0016).
pub fn fpp_from_fill(fill: f64, k: u32) -> f64 {
    if fill <= 0.0 {
        return 0.0;
    }
    if fill >= 1.0 {
        return 1.0;
    }
    let clear_per_key = (1.0 - 1.0 / PROBE_BITS as f64).powi(k as i32);
    let lambda = -(1.0 - fill).ln() / (1.0 - clear_per_key);
    blocked_fpp_at_load(lambda, k)
}

#[cfg(test)]
mod tests;
