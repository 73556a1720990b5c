//! The URL-seen set: a concurrent, cache-line-blocked Bloom filter that answers "was this
//! URL new?" exactly once, sized from a false-positive rate or a memory budget, and saved
//! to disk atomically.
//!
//! Every fetch worker asks it about every extracted link, so it is shared through an `Arc`
//! without a global lock, costs one cache miss per URL, and survives a crash as a checkpoint
//! file. It is usable on its own: [`Plan`] sizes it, [`SeenSet`] is the filter.
//!
//! With `[seen] exact` the filter is the front of an exact set of admitted URLs on disk
//! ([`crate::state_store::AdmittedSet`]): its "maybe seen" is confirmed there, so no new URL
//! is skipped as a false positive (see `exact.rs`); the filter then only spares lookups, and
//! `[seen] memory` may be as small as one block.
//!
//! # Guarantees
//!
//! - **No false negatives.** A key whose `insert_new` returned (either answer) is reported by
//!   `contains` and never again by `insert_new` as new, in this process and after save/load.
//! - **Exactly once.** However many threads call `insert_new` with the same new key at the
//!   same moment, exactly one gets `true`. (A key can get `false` although never inserted:
//!   that is a false positive, at the planned rate.)
//! - **The configured rate.** After n insertions the false-positive rate is at most the p of
//!   [`Plan::for_fpp`]; the model behind this is below, and the tests measure it over 10^6
//!   absent keys.
//! - **Safe files.** `save` never leaves a half-written file under the real name, and `load`
//!   refuses a file with the wrong magic, version, size, parameters, checksum or a set lock
//!   bit, each with its own [`SeenError`] naming the file.
//!
//! # Why a blocked filter with a lock bit in each block
//!
//! At crawl sizes (17 MiB for 10^7 URLs at p = 0.001, 171 MiB for 10^8) every probe is a
//! cache miss, so the layout is chosen by misses and atomic operations, not by hashing.
//! Measured on this kind of machine (2 vCPU, n = 10^7, p = 0.001, M operations/s per thread;
//! figures measured for the design, reproduced by `benches/seen.rs`):
//!
//! | layout                                   | insert | lookup | fpp at classic size | same key, two threads, both "new" |
//! |------------------------------------------|-------:|-------:|--------:|-----------------|
//! | fastbloom 0.17 AtomicBloomFilter         | 4.3    | 4.4    | 0.00098 | yes, sometimes  |
//! | Guava-style, whole array, fastmurmur3    | 3.9    | 7.2    | 0.00100 | yes, sometimes  |
//! | blocked 512-bit, independent positions   | 5.0    | 6.8    | 0.00163 | yes, rarely     |
//! | all k bits in one u64, one `fetch_or`    | 10.9   | 11.8   | 0.00578 | never           |
//!
//! The whole-array layouts pay k misses (and k atomic read-modify-writes) per insert. One
//! u64 gives exactly-once for free but its fpp is 5.8× the target, and meeting p would cost
//! far more than the 1.2× memory allowed. A 512-bit block costs one miss; its fpp penalty
//! (1.6× at the classic size) is bought back with 8–9 % more bits (see the maths). For the
//! exactly-once answer the last bit of each block (bit 63 of word 7) is a lock: `insert_new`
//! takes it with one `lock bts` on a line it has already fetched (with PREFETCHW, so the line
//! arrives exclusive), checks and sets the bits with plain stores, and releases it with a
//! plain store. Whoever finds a bit clear while holding the lock is first; the lock is held
//! for a few nanoseconds and contended only when two threads hit the same block at once.
//! Striped locks elsewhere would cost a second miss per insert. A key whose bits are all set
//! already (the common duplicate) is answered without the lock.
//!
//! Memory ordering: the unlocking store is `Release` and the locking `bts` is `Acquire`, so
//! the next holder sees every bit set under earlier holds. `contains` and the lock-free
//! duplicate check read with `Relaxed` loads: they may miss bits of an insert still in
//! progress, which only orders that insert after them.
//!
//! Measured side by side with fastbloom in `benches/seen.rs` (n = 10^7, p = 10^-3, 82-byte
//! URLs, M inserts/s per thread of CPU time, median of 3; a shared, loaded machine):
//! `insert_new` 5.05 against fastbloom's 2.98 on one thread (1.69×), 4.89 against 3.26 per
//! thread on two (1.50×); `insert_new_batch` 11.1 and 10.8 (3.7×, 3.3×); `contains` 9.4
//! against 4.0. At p = 10^-2 fastbloom needs only 7 probes and `insert_new` leads by
//! 1.4×, the batch by 2.9–3.1×. Saving the 187.5 MiB filter for 10^8 URLs takes 210 ms,
//! loading it 139 ms (warm page cache).
//!
//! The live counters are sharded per thread and packed (insertions high, bits low) so a new
//! key costs one uncontended atomic add (see `counters.rs`); `stats()` sums 64 shards.
//!
//! # Hashing
//!
//! MurmurHash3 x64_128 with a fixed seed ([`DEFAULT_SEED`], stored in the file), computed by
//! `fastmurmur3` (14.4 ns per URL against 34–36 ns for the `murmur3` crate); the tests prove
//! it is the same function on published vectors and on 20,000 random inputs. The halves
//! drive Kirsch–Mitzenmacher double hashing g_i = h1 + i·h2: g_0 = h1 picks the block as
//! ⌊h1·blocks / 2^64⌋, and g_1..g_k each pick one of the 511 probe-able bits as
//! ⌊mix(g_i)·511 / 2^64⌋ with mix(g) = (g ⊕ g≫32)·0x9E3779B97F4A7C15. The mix matters: within
//! one small block the raw g_i lie on one arithmetic progression and keys sharing a block
//! overlap far more than chance. Simulated at 14.38 bits/key, k = 10 (4·10^6 absent keys): raw
//! top bits of g_i 0.0089, a 40-bit window of g_i 0.0023, mixed g_i 0.00165, truly
//! independent positions 0.00164.
//!
//! # The maths
//!
//! Classic optimum for n keys at rate p (reported beside the real filter):
//! m = −n·ln p / (ln 2)², k = round(m/n · ln 2), fpp = (1 − e^(−kn/m))^k; for n = 10^8,
//! p = 10^-3: m = 1,437,758,757 bits = 171.4 MiB, k = 10. The information-theoretic minimum
//! of any structure answering with rate p is n·log2(1/p) bits (9.97 bits/URL at 10^-3).
//!
//! Blocked filter with B = 511 probe-able bits per block and λ = n / blocks keys per block
//! (Poisson): a block holding j keys has a given bit clear with probability
//! (1 − 1/B)^(kj), so
//!
//! ```text
//!   fpp = Σ_j  e^(−λ) λ^j / j!  ·  (1 − (1 − 1/B)^(k·j))^k
//! ```
//!
//! [`Plan::for_fpp`] takes, over k near the classic one, the fewest blocks with
//! fpp ≤ p / 1.08: the 8 % headroom covers the model's rounding (it uses the mean fill of a
//! block where the truth is the mean of fill^k; simulated fpp was 1–4 % above the model).
//! Measured over 10^7 absent URLs after 10^7 insertions (`fpp_met_at_scale`, release):
//! p = 10^-2: 9.35·10^-3 (model 9.26·10^-3); p = 10^-3: 9.37·10^-4 (model 9.26·10^-4);
//! p = 10^-4: 9.66·10^-5 ± 0.32·10^-5 (model 9.26·10^-5).
//!
//! The filters this builds: p = 10^-2: 10.09 bits/URL, k = 7, 1.05× the classic optimum;
//! p = 10^-3: 15.73 bits/URL, k = 9, expected fpp 9.26·10^-4, 1.09× (n = 10^8: 187.5 MiB
//! against 171.4 MiB); p = 10^-4: 22.19 bits/URL, k = 12, 1.16×. [`Plan::for_memory`] takes
//! the k with the lowest fpp for the blocks the budget holds.
//!
//! Live fpp estimate ([`SeenStats::estimated_fpp`]): the expected fill of the probe-able bits
//! is 1 − e^(−λ(1−c)) with c = (1 − 1/B)^k, so the observed fill gives the λ that explains it,
//! and the formula above its fpp. The classic fill^k would understate a blocked filter (at
//! 14.4 bits/URL, k = 10: fill^k = 0.0010, true 0.0016) because a key's block is often
//! fuller than the average one.
//!
//! # File format (version 1), all integers little-endian
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 8    | magic `CRWLSEEN` |
//! | 8      | 4    | format version, 1 |
//! | 12     | 4    | layout, 1 = 512-bit blocks, bit 511 the lock |
//! | 16     | 4    | hash scheme, 1 = MurmurHash3 x64_128 with the double hashing above |
//! | 20     | 4    | MurmurHash3 seed (u32) |
//! | 24     | 8    | m, bits in the array (a positive multiple of 512) |
//! | 32     | 4    | k, probes per key (1..=48) |
//! | 36     | 4    | reserved, 0 |
//! | 40     | 8    | n, URLs the filter was sized for (≥ 1) |
//! | 48     | 8    | target fpp, IEEE-754 f64 bits, in (0, 1) |
//! | 56     | 8    | insertions (keys reported new) |
//! | 64     | m/8  | the blocks in order; block b is 8 u64 words, bit i of the block is bit i mod 64 of word i / 64; every lock bit is 0 |
//! | 64+m/8 | 8    | XXH3-64 (seed 0) of every byte before it |
//!
//! The file is exactly 72 + m/8 bytes. Bits set are not stored: `load` counts them while
//! checking the lock bits. `load` checks, in order: size ≥ 72 (`Truncated`), magic
//! (`BadMagic`), version (`UnsupportedVersion`), each header field (`BadParameters`, naming
//! it), size against m (`Truncated` / `WrongSize`), the memory of this machine, the checksum
//! (`ChecksumMismatch`), the lock bits (`LockBitSet`).
//!
//! `save` is `snapshot()` then [`SeenSnapshot::write`]: the array is copied with relaxed
//! loads while inserts go on (inserters never wait), then written to `<name>.tmp-<pid>` in the
//! same directory, fsynced, renamed over `<name>`, and the directory fsynced. A snapshot
//! holds every key whose insert returned before `snapshot()` was called; its insertion count
//! is read before the copy, so it never counts a key whose bits are missing.
//!
//! # Snapshots
//!
//! The crawl's checkpoints do not copy the array: they stream it with `save` from the live
//! set and publish only once every URL accepted meanwhile is in the queue log (see
//! [`crate::checkpoint`]), so no copy is in the pause. For a caller that needs a frozen copy
//! repeatedly, keep one [`SeenSnapshot`], made by [`SeenSnapshot::for_plan`] (which allocates
//! it and backs every page, once), and copy into it with [`SeenSet::snapshot_into`]: the
//! cost is then the copy alone. `snapshot()` still
//! makes a fresh one each time. A buffer of another size given to `snapshot_into` is
//! replaced by one of the right size (the slow path, once), never refused, so the result is
//! always a snapshot of this filter; both give the same file bytes as `save`.
//!
//! Measured with `cargo bench --bench seen -- snapshot` (p = 0.001, median of 9 alternating
//! runs each; ranges over six runs on the shared 2-vCPU machine while others built, load
//! average 3–6). Wall time is the pause; under that load the copying thread is descheduled
//! for up to half of it, which thread CPU time leaves out:
//!
//! | n      | array     | fresh `snapshot()`            | `snapshot_into`, reused buffer | `for_plan`, once |
//! |-------:|----------:|-------------------------------|--------------------------------|--------------:|
//! | 10^7   | 18.7 MiB  | 7.3–9.0 ms CPU, 11–21 ms wall | 2.9–3.8 ms CPU, 3.0–7.7 ms wall | 3.5–17 ms wall |
//! | 10^8   | 187.5 MiB | 65–83 ms CPU, 76–166 ms wall  | 28–35 ms CPU, 31–70 ms wall     | 47–181 ms wall |
//!
//! Why. A fresh buffer's pages are backed as the copy first writes them: the kernel takes a
//! fault and zeroes each page before the copy overwrites it, which cost more than the copy.
//! `snapshot()` used to copy into a `Vec` (48,000 faults of 4 KiB pages at 10^8: 106–160 ms,
//! 110 ms in a scratch run on a quiet machine); its buffer is now mapped like the filter,
//! with `MADV_HUGEPAGE` (94 faults of 2 MiB, but the zeroing remains), which took the
//! same scratch run to 65 ms. A reused buffer pays none of it. What remains is memory
//! bandwidth: 187.5 MiB read, 187.5 MiB written. Plain stores would also read every line of
//! the destination before overwriting it; the copy uses non-temporal SSE2 stores
//! (`movntdq`, fenced with `sfence` before returning, as the Rust memory model requires),
//! 25–30 % faster than plain stores in the scratch run (35.8 against 48.7 ms, median of 25,
//! into the same backed buffer), close to a `memcpy` of the same bytes (33–36 ms there). The
//! reads stay relaxed atomic loads, one word at a time: reading the words through a
//! non-atomic (or vector) load while inserters write them would be a data race, and the
//! loads are not the bottleneck. Splitting the copy over two threads gained nothing in the
//! scratch run (memory-bound on this machine). The cost is a second array's memory held for
//! the whole crawl (187.5 MiB at 10^8) rather than only while a checkpoint is written.

mod backend;
mod blocks;
mod counters;
mod error;
mod exact;
mod file;
mod plan;
mod probe;

use std::path::Path;
use std::sync::atomic::Ordering;

pub(crate) use backend::SeenBackend;
use blocks::{Block, BlockArray, WordBuffer, LOCK_BIT, LOCK_WORD};
use counters::LiveCounters;
pub use error::SeenError;
pub(crate) use exact::{admitted_for_crawl, front_plan};
pub use file::SeenSnapshot;
pub use plan::{
    blocked_fpp, blocked_fpp_at_load, classic_fpp, classic_m_k, machine_memory_bytes, Layout, Plan,
    PlanError, BLOCK_BITS, DEFAULT_SEED, FPP_HEADROOM, MAX_K, PROBE_BITS,
};
// The shared filter in Redis (`crate::distributed`) places keys exactly as this one does.
use probe::Probe;
pub(crate) use probe::{block_of, masks_of, murmur3_halves};

/// Keys hashed and prefetched ahead of the inserts in `insert_new_batch`: enough to cover a
/// memory latency with hashing work, few enough that the lines are still in L1 when used.
const BATCH_WINDOW: usize = 64;

/// The set of URLs already seen; share it through an `Arc`.
pub struct SeenSet {
    plan: Plan,
    array: BlockArray,
    counters: LiveCounters,
    /// With `[seen] exact`, the exact set this filter fronts (see `exact.rs`).
    exact: std::sync::OnceLock<std::sync::Arc<crate::state_store::AdmittedSet>>,
}

/// Live figures, summed from the counter shards without touching the bit array.
#[derive(Debug, Clone, Copy)]
pub struct SeenStats {
    /// Keys reported new by `insert_new` (and counted in loaded files).
    pub insertions: u64,
    /// Bits set in the array.
    pub bits_set: u64,
    /// Bits in the array, lock bits included.
    pub(crate) m_bits: u64,
    /// Probes per key.
    pub(crate) k: u32,
    /// bits_set over the probe-able bits (511 of every 512).
    pub fill: f64,
    /// fpp estimated from the fill with the blocked model (see the module doc).
    pub estimated_fpp: f64,
}

impl SeenSet {
    /// An empty filter as planned.
    pub fn new(plan: Plan) -> Result<SeenSet, SeenError> {
        plan.check_consistent()?;
        let len = usize::try_from(plan.blocks)
            .map_err(|_| SeenError::OutOfMemory { bytes: plan.bytes })?;
        let array = BlockArray::zeroed(len).ok_or(SeenError::OutOfMemory { bytes: plan.bytes })?;
        Ok(SeenSet::from_parts(plan, array, 0, 0))
    }

    fn from_parts(plan: Plan, array: BlockArray, insertions: u64, bits_set: u64) -> SeenSet {
        let counters = LiveCounters::new(plan.blocks * PROBE_BITS, insertions, bits_set);
        SeenSet {
            plan,
            array,
            counters,
            exact: std::sync::OnceLock::new(),
        }
    }

    /// The plan this filter was built from (or read back from its file).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    #[inline]
    fn probe_of(&self, key: &[u8], intent: Intent) -> Probe {
        let (h1, h2) = murmur3_halves(key, self.plan.seed);
        let block = block_of(h1, self.plan.blocks);
        // The miss starts now and overlaps computing the masks (and, in a batch, hashing
        // the next keys).
        prefetch(&self.array.blocks()[block], intent);
        Probe {
            block,
            masks: masks_of(h1, h2, self.plan.k),
        }
    }

    #[inline]
    fn block(&self, probe: &Probe) -> &Block {
        // block_of() scales into 0..blocks, so this index is always in range.
        &self.array.blocks()[probe.block]
    }

    /// Sets the key's bits; true for exactly one caller per new key, however many threads
    /// insert it at once.
    #[inline]
    pub fn insert_new(&self, key: &[u8]) -> bool {
        let probe = self.probe_of(key, Intent::Write);
        let changed = self.set_bits(&probe);
        if changed == 0 {
            return false;
        }
        self.counters.add(1, u64::from(changed));
        true
    }

    /// True if the key may have been inserted (false positives at the planned rate), false if
    /// it certainly was not.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        let probe = self.probe_of(key, Intent::Read);
        all_set(self.block(&probe), &probe.masks)
    }

    /// `contains` for each key in order, answers pushed onto `out` (cleared first). Keys are
    /// hashed and their blocks prefetched `BATCH_WINDOW` at a time before any is read, so
    /// the cache misses overlap (one by one, each `contains` waits for its own miss: the
    /// parse threads' screening spent ~10% of its time there in the crawl bench's profile).
    pub fn contains_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        out.reserve(keys.len());
        let mut probes = [Probe::default(); BATCH_WINDOW];
        for chunk in keys.chunks(BATCH_WINDOW) {
            for (slot, key) in probes.iter_mut().zip(chunk) {
                *slot = self.probe_of(key, Intent::Read);
            }
            out.extend(
                probes[..chunk.len()]
                    .iter()
                    .map(|probe| all_set(self.block(probe), &probe.masks)),
            );
        }
    }

    /// `insert_new` for each key in order, answers pushed onto `out` (cleared first). A key
    /// repeated inside the batch is new only at its first occurrence. Keys are hashed and
    /// their blocks prefetched 64 at a time before any of those 64 is inserted, so the cache
    /// misses overlap each other and the hashing (a page's links arrive together: this is
    /// the fast way in, ≈ 2× `insert_new` one by one). The live counters take the batch's
    /// figures in one step at its end.
    pub fn insert_new_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        out.reserve(keys.len());
        let mut probes = [Probe::default(); BATCH_WINDOW];
        let (mut insertions, mut bits_set) = (0u64, 0u64);
        for chunk in keys.chunks(BATCH_WINDOW) {
            for (slot, key) in probes.iter_mut().zip(chunk) {
                *slot = self.probe_of(key, Intent::Write);
            }
            for probe in &probes[..chunk.len()] {
                let changed = self.set_bits(probe);
                out.push(changed != 0);
                insertions += u64::from(changed != 0);
                bits_set += u64::from(changed);
            }
        }
        if insertions != 0 {
            self.counters.add(insertions, bits_set);
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

    /// Live figures from the counters; never scans the array.
    pub fn stats(&self) -> SeenStats {
        let (insertions, bits_set) = self.counters.read(Ordering::Relaxed);
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

    /// Copies the array and counters into a fresh buffer; inserts carry on during the copy
    /// (see [`SeenSnapshot`]). The buffer's pages are backed as the copy writes them, which
    /// costs more than the copy itself: a crawl that checkpoints repeatedly should keep one
    /// buffer and use [`SeenSet::snapshot_into`]. Aborts, like a `Vec`, when the memory
    /// cannot be had.
    pub fn snapshot(&self) -> SeenSnapshot {
        let mut snapshot = SeenSnapshot::unbacked(&self.plan).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<u64>(self.array.blocks().len() * 8)
                    .unwrap_or(std::alloc::Layout::new::<u64>()),
            )
        });
        self.copy_into(&mut snapshot);
        snapshot
    }

    /// Copies the array and counters into `snapshot`, overwriting what it held, with the same
    /// guarantees as [`SeenSet::snapshot`] (inserts carry on during the copy) and the same
    /// result, but into memory that is already backed when the buffer came from
    /// [`SeenSnapshot::for_plan`] or an earlier copy: only the copy itself is paid (figures
    /// in the module doc).
    ///
    /// A buffer made for a filter of another size is not refused: its memory is given back
    /// and a fresh, unbacked buffer of the right size taken (the slow path of `snapshot()`,
    /// once), so the result is always a snapshot of this filter. A buffer of the same size
    /// from another plan (another n, p or seed with the same blocks) keeps its memory. Either
    /// way the snapshot's plan becomes this filter's. Aborts, like a `Vec`, when a
    /// replacement's memory cannot be had.
    pub fn snapshot_into(&self, snapshot: &mut SeenSnapshot) {
        if snapshot.words.len() != self.array.blocks().len() * 8 {
            // Give the old memory back first, so the two never coexist.
            snapshot.words = WordBuffer::empty();
            *snapshot = self.snapshot();
            return;
        }
        self.copy_into(snapshot);
    }

    fn copy_into(&self, snapshot: &mut SeenSnapshot) {
        let (insertions, _) = self.counters.read(Ordering::Acquire);
        snapshot.plan.clone_from(&self.plan);
        snapshot.insertions = insertions;
        copy_words_streaming(self.array.blocks(), &mut snapshot.words);
    }

    /// Saves atomically to `path`: the same as `snapshot()` then [`SeenSnapshot::write`]
    /// (same bytes, same guarantees, inserters never wait), but streamed: each 1 MiB of the
    /// array is copied, hashed and written in turn, so a 187 MiB filter needs no 187 MiB copy
    /// (and its page faults) on the way to disk.
    pub fn save(&self, path: &Path) -> Result<(), SeenError> {
        let (insertions, _) = self.counters.read(Ordering::Acquire);
        let blocks = self.array.blocks();
        file::write_atomically(
            path,
            &file::header(&self.plan, insertions),
            blocks.len() * 8,
            |start, chunk| copy_words(&blocks[start / 8..], chunk),
        )
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

/// Copies the words of `blocks` into `out` (as many as it holds, a multiple of 8) for a file:
/// relaxed loads, as the filter may be changing; lock bits cleared; little-endian.
fn copy_words(blocks: &[Block], out: &mut [u64]) {
    for (block, words) in blocks.iter().zip(out.chunks_exact_mut(8)) {
        for (word, out) in block.0.iter().zip(words.iter_mut()) {
            *out = word.load(Ordering::Relaxed).to_le();
        }
        words[LOCK_WORD] &= !LOCK_BIT.to_le();
    }
}

/// `copy_words` for a whole snapshot buffer, the same words written with non-temporal
/// stores where there are some: the buffer is far larger than the caches and not read again
/// before the copy ends, so fetching each of its lines before overwriting it (what a plain
/// store does) would only add a third of the memory traffic. Measured at 187.5 MiB: 25–30 %
/// less time than `copy_words` into the same buffer. Reads are the same relaxed atomic loads.
fn copy_words_streaming(blocks: &[Block], out: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if out.as_ptr() as usize % 16 == 0 {
        stream_words(blocks, out);
        return;
    }
    copy_words(blocks, out);
}

/// The x86-64 path of `copy_words_streaming`; `out` must be 16-byte aligned.
#[cfg(target_arch = "x86_64")]
fn stream_words(blocks: &[Block], out: &mut [u64]) {
    use core::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_sfence, _mm_stream_si128};
    assert_eq!(
        out.as_ptr() as usize % 16,
        0,
        "stream_words needs 16-byte alignment"
    );
    for (block, words) in blocks.iter().zip(out.chunks_exact_mut(8)) {
        let mut w: [u64; 8] = std::array::from_fn(|i| block.0[i].load(Ordering::Relaxed));
        w[LOCK_WORD] &= !LOCK_BIT;
        // x86-64 is little-endian: the words in memory are already the file's bytes.
        let to = words.as_mut_ptr() as *mut __m128i;
        for (i, pair) in w.chunks_exact(2).enumerate() {
            // SAFETY: SSE2 is part of x86-64. `words` is 8 exclusively borrowed u64s starting
            // 64·b bytes after a 16-byte aligned start, so `to + i` (i < 4) is an aligned
            // 16-byte slot inside it. Non-temporal stores must be fenced before anything
            // else touches the memory: the `_mm_sfence` below does so before returning.
            unsafe { _mm_stream_si128(to.add(i), _mm_set_epi64x(pair[1] as i64, pair[0] as i64)) };
        }
    }
    // SAFETY: SSE is part of x86-64. Orders every store above before whatever follows,
    // including the synchronisation that hands the snapshot to a writer thread.
    unsafe { _mm_sfence() };
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
        // Held for a few nanoseconds unless its holder was preempted; then let it run. Wait
        // with plain loads so the holder's line is not pulled away by failed attempts.
        while word.load(Ordering::Relaxed) & LOCK_BIT != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
    word.load(Ordering::Relaxed) & !LOCK_BIT
}

/// What a prefetched block is wanted for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Intent {
    Read,
    /// Fetch the line exclusive: the insert's lock would otherwise find it shared and pay a
    /// second round trip to upgrade it (measured: 17 % of an insert's time on the lock's
    /// compare-exchange with a read prefetch).
    Write,
}

#[inline]
fn prefetch(block: &Block, intent: Intent) {
    #[cfg(target_arch = "x86_64")]
    {
        let ptr = block as *const Block;
        if intent == Intent::Write {
            // PREFETCHW (0F 0D /1) is a no-op hint on x86-64 processors that lack it, and
            // `core::arch`'s version needs the `prfchw` target feature at compile time.
            // SAFETY: a prefetch never faults and touches no architectural state.
            unsafe {
                std::arch::asm!("prefetchw [{0}]", in(reg) ptr, options(nostack, preserves_flags, readonly));
            }
        } else {
            // SAFETY: as above.
            unsafe {
                core::arch::x86_64::_mm_prefetch(ptr as *const i8, core::arch::x86_64::_MM_HINT_T0);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (block, intent);
}

/// fpp estimated from the fill of the probe-able bits, through the blocked model.
///
/// With Poisson block loads of mean λ and c = (1 − 1/511)^k the chance that one key leaves a
/// given bit clear, the expected fill is 1 − e^(−λ(1−c)); inverting gives the λ that explains
/// the observed fill, and the model gives its fpp. fill^k, the classic estimate, would be too
/// optimistic here: a key's block is often fuller than the average block (at 14.4 bits/URL,
/// k = 10: fill^k = 0.0010 while the blocked fpp is 0.0016).
pub(crate) fn fpp_from_fill(fill: f64, k: u32) -> f64 {
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
