//! A response record's two SHA-1 digests in one pass over the payload: the block digest
//! (HTTP head and payload) and the payload digest (payload alone).
//!
//! Both run over the same bytes, so they are computed together: on a CPU with the SHA
//! extensions (SHA-NI: every x86-64 server since AMD Zen and Intel Ice Lake), two SHA-1
//! streams are interleaved round by round in one loop, so the SHA unit works on one stream
//! while the other waits for its result. One SHA-1 stream on its own is bound by the
//! latency of `sha1rnds4`, not by its throughput, so the second stream comes almost free.
//! Measured on this machine's EPYC (thread CPU, 16 KiB pages): the `sha1` crate (which uses
//! SHA-NI itself) 8.7 µs per digest, 17.4 µs for the two; the pair here 9.8 µs for both.
//!
//! Where several records wait for their digests (the output thread writing records no idle
//! thread got to, a deflate thread with a queue), two records could be digested at once: their
//! four streams interleaved ([`blocks_and_payloads_of_two`]): `cargo bench --bench warc`
//! (thin LTO, 2 cores under others' builds, medians of 3 trials) 7.1 µs a 16 KiB page
//! against 10.8 one record at a time, 114 against 171 µs on real-size pages (−34%):
//! `sha1rnds4` still has latency to hide at two streams.
//!
//! That was an EPYC. On the Xeon this crate is measured on now, `sha1rnds4`'s throughput is
//! the bound: two streams are as fast as SHA-NI goes, four spill registers and are slower
//! (16 KiB pages, both digests: the `sha1` crate 19.0 µs a page, two streams 15.0, four
//! 17.2), and in the crawl bench the output thread's SHA-1 was ~64% of its CPU (`perf record
//! -a` of `-- --warc-only`). So where the output thread has several records to digest it
//! takes up to [`MANY`] at once and, where the CPU has AVX-512, runs their streams side by
//! side, one per 32-bit lane of a 512-bit register, in plain vector arithmetic (rotates and
//! ternary logic are one instruction each): 7.1 µs a page ([`blocks_and_payloads_of_many`]).
//! The deflate threads take their records the same way, up to [`MANY`] at once (with SHA-NI
//! they spent 2.4× the CPU per page, and each µs they save makes more records on idle CPU).
//! No crate offers multi-buffer SHA-1 either (ISA-L's is C and assembly); the lanes' loop is
//! FIPS 180-4 as written and the tests compare it with the `sha1` crate like the rest.
//!
//! Why hand-written: no maintained crate hashes two SHA-1 streams at once (multi-buffer
//! SHA-1 exists in Intel's ISA-L and in OpenSSL's TLS code, neither reachable from Rust
//! without a C build). What is written here is the loop of the `sha1` crate's SHA-NI
//! backend with a second state beside the first; the blocks before and after the paired
//! part, and the padding, go through the `sha1` crate's own `compress`, and the unit tests
//! compare every result with the `sha1` crate over head and payload lengths around each
//! block boundary. Without SHA-NI (or off x86-64) the two digests are the `sha1` crate's,
//! one after the other.

use sha1::digest::consts::U64;
use sha1::digest::generic_array::GenericArray;
use sha1::{Digest, Sha1};

use super::record::Sha1Digest;

/// SHA-1's initial state (FIPS 180-4 §5.3.1).
const INITIAL: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

type Block = GenericArray<u8, U64>;

/// `(SHA-1(head ++ payload), SHA-1(payload))`: a response record's block and payload digests.
pub(crate) fn block_and_payload(head: &[u8], payload: &[u8]) -> (Sha1Digest, Sha1Digest) {
    #[cfg(target_arch = "x86_64")]
    if sha_ni::available() {
        return paired(head, payload);
    }
    one_by_one(head, payload)
}

/// The two digests by the `sha1` crate, one after the other.
pub(crate) fn one_by_one(head: &[u8], payload: &[u8]) -> (Sha1Digest, Sha1Digest) {
    let mut block = Sha1::new();
    block.update(head);
    block.update(payload);
    (block.finalize().into(), Sha1::digest(payload).into())
}

/// The whole 64-byte blocks at the start of `bytes`, as the `sha1` crate's `compress` takes
/// them (a `GenericArray<u8, U64>` is 64 bytes with the alignment of a byte).
fn blocks(bytes: &[u8]) -> &[Block] {
    let whole = bytes.len() / 64;
    // SAFETY: `Block` is a `[u8; 64]` in a transparent wrapper, align 1; the slice covers
    // `whole * 64 <= bytes.len()` bytes of `bytes`, borrowed for as long as `bytes` is.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<Block>(), whole) }
}

/// Ends a stream: `tail` (under 64 bytes: what is left after the whole blocks) and the
/// padding, for a message of `total` bytes.
fn finish(state: &mut [u32; 5], tail: &[u8], total: u64) -> Sha1Digest {
    let mut last = [0u8; 128];
    last[..tail.len()].copy_from_slice(tail);
    last[tail.len()] = 0x80;
    let end = if tail.len() < 56 { 64 } else { 128 };
    last[end - 8..end].copy_from_slice(&(total.wrapping_mul(8)).to_be_bytes());
    sha1::compress(state, blocks(&last[..end]));
    let mut digest = [0u8; 20];
    for (out, word) in digest.chunks_exact_mut(4).zip(state.iter()) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// Both digests with the two streams interleaved over the payload.
#[cfg(target_arch = "x86_64")]
fn paired(head: &[u8], payload: &[u8]) -> (Sha1Digest, Sha1Digest) {
    match Streams::start(head, payload) {
        Err(done) => done,
        Ok(mut streams) => streams.finish(0),
    }
}

/// A response's two SHA-1 streams once the head is hashed: the block stream runs over the
/// payload from `skew` (its first block mixed the head's last bytes with the payload's
/// first), the payload stream over the whole payload.
#[cfg(target_arch = "x86_64")]
struct Streams<'a> {
    block: [u32; 5],
    alone: [u32; 5],
    block_part: &'a [u8],
    payload: &'a [u8],
    total: u64,
}

#[cfg(target_arch = "x86_64")]
impl<'a> Streams<'a> {
    /// Hashes the head (and the block mixing it with the payload) into the block stream;
    /// `Err` with both digests when the payload ends inside that block.
    fn start(head: &[u8], payload: &'a [u8]) -> Result<Self, (Sha1Digest, Sha1Digest)> {
        let total = (head.len() + payload.len()) as u64;
        let mut block = INITIAL;
        let mut alone = INITIAL;
        let head_whole = head.len() / 64 * 64;
        sha1::compress(&mut block, blocks(head));
        let head_rest = &head[head_whole..];
        let skew = if head_rest.is_empty() {
            0
        } else {
            let need = 64 - head_rest.len();
            if payload.len() < need {
                let mut tail = [0u8; 64];
                tail[..head_rest.len()].copy_from_slice(head_rest);
                tail[head_rest.len()..head_rest.len() + payload.len()].copy_from_slice(payload);
                let block_digest =
                    finish(&mut block, &tail[..head_rest.len() + payload.len()], total);
                let payload_digest = finish(&mut alone, payload, payload.len() as u64);
                return Err((block_digest, payload_digest));
            }
            let mut first = [0u8; 64];
            first[..head_rest.len()].copy_from_slice(head_rest);
            first[head_rest.len()..].copy_from_slice(&payload[..need]);
            sha1::compress(&mut block, blocks(&first));
            need
        };
        Ok(Streams {
            block,
            alone,
            block_part: &payload[skew..],
            payload,
            total,
        })
    }

    /// Whole blocks both streams have left past `done` bytes of theirs.
    fn blocks_left(&self, done: usize) -> usize {
        (self.block_part.len() - done) / 64
    }

    /// Both streams to their ends, from `done` bytes of each (already hashed, four streams at
    /// a time: see [`blocks_and_payloads_of_two`]), the two interleaved.
    fn finish(&mut self, done: usize) -> (Sha1Digest, Sha1Digest) {
        let both = self.blocks_left(done);
        let (block_part, payload) = (&self.block_part[done..], &self.payload[done..]);
        sha_ni::two_streams(
            (&mut self.block, &block_part[..both * 64]),
            (&mut self.alone, &payload[..both * 64]),
        );
        let block_rest = &block_part[both * 64..];
        let alone_rest = &payload[both * 64..];
        sha1::compress(&mut self.block, blocks(block_rest));
        sha1::compress(&mut self.alone, blocks(alone_rest));
        (
            finish(
                &mut self.block,
                &block_rest[block_rest.len() / 64 * 64..],
                self.total,
            ),
            finish(
                &mut self.alone,
                &alone_rest[alone_rest.len() / 64 * 64..],
                self.payload.len() as u64,
            ),
        )
    }
}

/// The block and payload digests of two responses (`(head, payload)` each) at once: their
/// four SHA-1 streams interleaved over the blocks all four have, the rest of each response
/// two at a time. `sha1rnds4` has latency to spare past two streams (see the module doc
/// for the figures). Used where several records wait for their digests (the output
/// thread, the deflate threads).
pub(crate) fn blocks_and_payloads_of_two(
    a: (&[u8], &[u8]),
    b: (&[u8], &[u8]),
) -> [(Sha1Digest, Sha1Digest); 2] {
    #[cfg(target_arch = "x86_64")]
    if sha_ni::available() {
        return match (Streams::start(a.0, a.1), Streams::start(b.0, b.1)) {
            (Ok(mut x), Ok(mut y)) => {
                let common = x.blocks_left(0).min(y.blocks_left(0));
                let bytes = common * 64;
                sha_ni::four_streams([
                    (&mut x.block, &x.block_part[..bytes]),
                    (&mut x.alone, &x.payload[..bytes]),
                    (&mut y.block, &y.block_part[..bytes]),
                    (&mut y.alone, &y.payload[..bytes]),
                ]);
                [x.finish(bytes), y.finish(bytes)]
            }
            (Err(x), Ok(mut y)) => [x, y.finish(0)],
            (Ok(mut x), Err(y)) => [x.finish(0), y],
            (Err(x), Err(y)) => [x, y],
        };
    }
    [one_by_one(a.0, a.1), one_by_one(b.0, b.1)]
}

/// Responses whose streams [`blocks_and_payloads_of_many`] runs at once: two streams each,
/// one per lane of a 512-bit register.
pub(crate) const MANY: usize = 8;

/// Responses from which the sixteen lanes pay: they cost the same however many are used
/// (~56 µs for sixteen 16 KiB streams), against ~15 µs a response two streams at a time.
const LANES_FROM: usize = 4;

/// The block and payload digests of up to [`MANY`] responses at once: with AVX-512 (where
/// it beats SHA-NI: timed once, see `lanes::faster`), their streams side by side, one per 32-bit lane (SHA-1 in plain vector arithmetic, sixteen
/// streams per instruction) over the blocks the streams have in common, then each
/// response's rest two streams at a time; without, two responses at a time.
///
/// Why: on this machine's Xeon the SHA unit is the bound. `sha1rnds4`'s throughput, not its
/// latency, limits SHA-NI, so two streams are as fast as it goes (four spill registers and
/// are slower). Measured (thread CPU, 16 KiB pages, both digests, medians of 15, a harness
/// with this file's code, 2-core Xeon under others' builds): the `sha1` crate one digest
/// after the other 19.0 µs a page, two streams 15.0, four 17.2, sixteen lanes 7.1.
pub(crate) fn blocks_and_payloads_of_many(
    responses: &[(&[u8], &[u8])],
) -> Vec<(Sha1Digest, Sha1Digest)> {
    if (LANES_FROM..=MANY).contains(&responses.len()) && lanes::faster() {
        if let Some(digests) = in_lanes(responses) {
            return digests;
        }
    }
    two_by_two(responses)
}

/// Settles now, on the calling thread, whether [`blocks_and_payloads_of_many`] takes the
/// lanes: the choice is a race timed by the clock (`lanes::faster`), which a thread of idle
/// priority, preempted in the middle of it, would time wrong. The deflate pool calls this
/// before its threads start (at normal priority), so that none of them runs the race.
pub(crate) fn settle_lanes() {
    let _ = lanes::faster();
}

/// The lanes' digests where this build has them and the CPU can run them.
#[rustversion::since(1.89)]
#[cfg(target_arch = "x86_64")]
fn in_lanes(responses: &[(&[u8], &[u8])]) -> Option<Vec<(Sha1Digest, Sha1Digest)>> {
    lanes::available().then(|| side_by_side(responses))
}

#[rustversion::not(since(1.89))]
fn in_lanes(_: &[(&[u8], &[u8])]) -> Option<Vec<(Sha1Digest, Sha1Digest)>> {
    None
}

#[cfg(not(target_arch = "x86_64"))]
#[rustversion::since(1.89)]
fn in_lanes(_: &[(&[u8], &[u8])]) -> Option<Vec<(Sha1Digest, Sha1Digest)>> {
    None
}

/// [`blocks_and_payloads_of_many`] without the lanes: two responses at a time.
fn two_by_two(responses: &[(&[u8], &[u8])]) -> Vec<(Sha1Digest, Sha1Digest)> {
    responses
        .chunks(2)
        .flat_map(|pair| match pair {
            [a, b] => blocks_and_payloads_of_two(*a, *b).to_vec(),
            _ => pair.iter().map(|(h, p)| block_and_payload(h, p)).collect(),
        })
        .collect()
}

/// [`blocks_and_payloads_of_many`] with AVX-512: each response's two streams in two lanes,
/// over the blocks the median response has (a lane whose stream ends first stops there;
/// the rest of a longer one goes two streams at a time).
#[rustversion::since(1.89)]
#[cfg(target_arch = "x86_64")]
fn side_by_side(responses: &[(&[u8], &[u8])]) -> Vec<(Sha1Digest, Sha1Digest)> {
    let mut started: Vec<Result<Streams<'_>, (Sha1Digest, Sha1Digest)>> = responses
        .iter()
        .map(|(head, payload)| Streams::start(head, payload))
        .collect();
    let mut lengths: Vec<usize> = started
        .iter()
        .map(|s| s.as_ref().map_or(0, |s| s.blocks_left(0)))
        .collect();
    lengths.sort_unstable();
    let stop = lengths.get(lengths.len() / 2).copied().unwrap_or(0);
    let mut states = [INITIAL; 2 * MANY];
    let mut pointers = [std::ptr::null::<u8>(); 2 * MANY];
    let mut blocks = [0u32; 2 * MANY];
    for (k, streams) in started.iter().enumerate() {
        if let Ok(s) = streams {
            let run = s.blocks_left(0).min(stop);
            (states[2 * k], states[2 * k + 1]) = (s.block, s.alone);
            (pointers[2 * k], pointers[2 * k + 1]) = (s.block_part.as_ptr(), s.payload.as_ptr());
            (blocks[2 * k], blocks[2 * k + 1]) = (run as u32, run as u32);
        }
    }
    // SAFETY: `available()` checked the CPU; lane `i` reads `blocks[i] * 64` bytes from
    // `pointers[i]`, within its stream (a lane without a stream runs no block).
    unsafe { lanes::sixteen(&mut states, &pointers, &blocks) };
    started
        .iter_mut()
        .enumerate()
        .map(|(k, streams)| match streams {
            Err(done) => *done,
            Ok(s) => {
                (s.block, s.alone) = (states[2 * k], states[2 * k + 1]);
                s.finish(blocks[2 * k] as usize * 64)
            }
        })
        .collect()
}

/// Without AVX-512 (another CPU, or a Rust older than 1.89, where its intrinsics were not
/// stable yet), no lanes: two responses at a time.
#[rustversion::not(since(1.89))]
mod lanes {
    pub(super) fn faster() -> bool {
        false
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[rustversion::since(1.89)]
mod lanes {
    pub(super) fn faster() -> bool {
        false
    }
}

#[rustversion::since(1.89)]
#[cfg(target_arch = "x86_64")]
mod lanes {
    use std::arch::x86_64::*;

    /// Whether this CPU has AVX-512 F and BW (detected once by the standard library).
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
    }

    /// Whether the lanes are available and beat SHA-NI two records at a time on this CPU,
    /// timed once (~0.1 ms): where SHA-NI is fast and 512-bit arithmetic slow (an EPYC
    /// whose SHA unit takes four streams, AVX-512 split in two halves), the lanes can lose.
    pub(super) fn faster() -> bool {
        static FASTER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FASTER.get_or_init(|| available() && race())
    }

    /// Eight 4 KiB responses digested both ways, alternately, five times: the lanes win if
    /// their best time is the better.
    fn race() -> bool {
        let payloads: Vec<Vec<u8>> = (0..super::MANY)
            .map(|i| (0..4096).map(|b: usize| (b * 31 + i) as u8).collect())
            .collect();
        let head = [b'h'; 100];
        let responses: Vec<(&[u8], &[u8])> =
            payloads.iter().map(|p| (&head[..], p.as_slice())).collect();
        let time = |f: &dyn Fn() -> Vec<(super::Sha1Digest, super::Sha1Digest)>| {
            let start = std::time::Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        };
        let (mut lanes, mut pairs) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            lanes = lanes.min(time(&|| super::side_by_side(&responses)));
            pairs = pairs.min(time(&|| super::two_by_two(&responses)));
        }
        lanes < pairs
    }

    /// Sixteen SHA-1 streams, stream `i` in lane `i` of each register, running `blocks[i]`
    /// whole blocks from `pointers[i]`: FIPS 180-4 §6.1.2 as written, in vector arithmetic
    /// (a lane's message words are gathered from its stream and byte-swapped; a lane whose
    /// blocks are done loads nothing more and keeps its state).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW; `pointers[i]` must point to `blocks[i] * 64`
    /// readable bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn sixteen(
        states: &mut [[u32; 5]; 16],
        pointers: &[*const u8; 16],
        blocks: &[u32; 16],
    ) {
        let mut words = [[0u32; 16]; 5];
        for (i, state) in states.iter().enumerate() {
            for (word, value) in words.iter_mut().zip(state) {
                word[i] = *value;
            }
        }
        // SAFETY (of the loads and stores of `words`): 16 u32s, 64 bytes each row.
        let load = |row: &[u32; 16]| unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
        let (mut a, mut b, mut c, mut d, mut e) = (
            load(&words[0]),
            load(&words[1]),
            load(&words[2]),
            load(&words[3]),
            load(&words[4]),
        );
        let address = |half: usize| {
            let p = |i: usize| pointers[8 * half + i] as i64;
            _mm512_set_epi64(p(7), p(6), p(5), p(4), p(3), p(2), p(1), p(0))
        };
        let (low, high) = (address(0), address(1));
        // SAFETY: 16 u32s.
        let counts = unsafe { _mm512_loadu_si512(blocks.as_ptr().cast()) };
        let most = blocks.iter().copied().max().unwrap_or(0);
        // Each 32-bit word big-endian: the bytes of each lane reversed.
        let swap = _mm512_set4_epi32(0x0c0d_0e0f, 0x0809_0a0b, 0x0405_0607, 0x0001_0203);
        let mut w = [_mm512_setzero_si512(); 16];
        for n in 0..most {
            let active = _mm512_cmpgt_epu32_mask(counts, _mm512_set1_epi32(n as i32));
            let at = _mm512_set1_epi64(i64::from(n) * 64);
            let (low_at, high_at) = (_mm512_add_epi64(low, at), _mm512_add_epi64(high, at));
            for (j, word) in w.iter_mut().enumerate() {
                let offset = _mm512_set1_epi64(4 * j as i64);
                // SAFETY: only the lanes with block `n` in their stream load (the mask), 4
                // bytes at offset 4 * j < 64 of that block.
                let (lo, hi) = unsafe {
                    (
                        _mm512_mask_i64gather_epi32::<1>(
                            _mm256_setzero_si256(),
                            active as __mmask8,
                            _mm512_add_epi64(low_at, offset),
                            std::ptr::null(),
                        ),
                        _mm512_mask_i64gather_epi32::<1>(
                            _mm256_setzero_si256(),
                            (active >> 8) as __mmask8,
                            _mm512_add_epi64(high_at, offset),
                            std::ptr::null(),
                        ),
                    )
                };
                let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
                *word = _mm512_shuffle_epi8(both, swap);
            }
            let start = (a, b, c, d, e);
            macro_rules! rounds {
                ($from:literal, $to:literal, $f:literal, $k:expr) => {
                    for t in $from..$to {
                        let wt = if t < 16 {
                            w[t]
                        } else {
                            let x = _mm512_ternarylogic_epi32::<0x96>(
                                w[(t - 3) & 15],
                                w[(t - 8) & 15],
                                w[(t - 14) & 15],
                            );
                            let x = _mm512_rol_epi32::<1>(_mm512_xor_si512(x, w[t & 15]));
                            w[t & 15] = x;
                            x
                        };
                        let f = _mm512_ternarylogic_epi32::<$f>(b, c, d);
                        let sum = _mm512_add_epi32(
                            _mm512_add_epi32(_mm512_rol_epi32::<5>(a), f),
                            _mm512_add_epi32(_mm512_add_epi32(e, _mm512_set1_epi32($k as i32)), wt),
                        );
                        (e, d, c, b, a) = (d, c, _mm512_rol_epi32::<30>(b), a, sum);
                    }
                };
            }
            // Ch, parity, Maj, parity: ternary-logic tables 0xCA (b ? c : d), 0x96
            // (b ^ c ^ d), 0xE8 (majority).
            rounds!(0, 20, 0xCA, 0x5A82_7999u32);
            rounds!(20, 40, 0x96, 0x6ED9_EBA1u32);
            rounds!(40, 60, 0xE8, 0x8F1B_BCDCu32);
            rounds!(60, 80, 0x96, 0xCA62_C1D6u32);
            // Lanes past their blocks keep the state they had.
            a = _mm512_mask_add_epi32(start.0, active, a, start.0);
            b = _mm512_mask_add_epi32(start.1, active, b, start.1);
            c = _mm512_mask_add_epi32(start.2, active, c, start.2);
            d = _mm512_mask_add_epi32(start.3, active, d, start.3);
            e = _mm512_mask_add_epi32(start.4, active, e, start.4);
        }
        for (row, v) in words.iter_mut().zip([a, b, c, d, e]) {
            // SAFETY: 16 u32s.
            unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), v) };
        }
        for (i, state) in states.iter_mut().enumerate() {
            for (value, word) in state.iter_mut().zip(&words) {
                *value = word[i];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod sha_ni {
    use std::arch::x86_64::*;

    /// Whether this CPU has the SHA extensions and the SSE levels the loop uses (detected
    /// once by the standard library, then a load).
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("sha")
            && is_x86_feature_detected!("sse2")
            && is_x86_feature_detected!("ssse3")
            && is_x86_feature_detected!("sse4.1")
    }

    /// Runs two SHA-1 streams over the same number of whole blocks each.
    pub(super) fn two_streams(a: (&mut [u32; 5], &[u8]), b: (&mut [u32; 5], &[u8])) {
        let blocks = a.1.len().min(b.1.len()) / 64;
        if !available() {
            // Not reached (the caller checks), but correct all the same.
            sha1::compress(a.0, super::blocks(&a.1[..blocks * 64]));
            sha1::compress(b.0, super::blocks(&b.1[..blocks * 64]));
            return;
        }
        let pointers = [a.1.as_ptr(), b.1.as_ptr()];
        let mut states = [*a.0, *b.0];
        // SAFETY: the CPU has the features `rounds_of` enables (checked just above); each
        // pointer reads `blocks * 64` bytes of its slice, which holds at least that many.
        unsafe { rounds_of::<2>(&mut states, pointers, blocks) };
        (*a.0, *b.0) = (states[0], states[1]);
    }

    /// Runs four SHA-1 streams over the same number of whole blocks each.
    pub(super) fn four_streams(streams: [(&mut [u32; 5], &[u8]); 4]) {
        let blocks = streams.iter().map(|(_, b)| b.len()).min().unwrap_or(0) / 64;
        if !available() {
            // Not reached (the caller checks), but correct all the same.
            for (state, bytes) in streams {
                sha1::compress(state, super::blocks(&bytes[..blocks * 64]));
            }
            return;
        }
        let pointers = [
            streams[0].1.as_ptr(),
            streams[1].1.as_ptr(),
            streams[2].1.as_ptr(),
            streams[3].1.as_ptr(),
        ];
        let [(a, _), (b, _), (c, _), (d, _)] = streams;
        let mut states = [*a, *b, *c, *d];
        // SAFETY: the CPU has the features `rounds_of` enables (checked just above); each
        // pointer reads `blocks * 64` bytes of its slice, which holds at least that many.
        unsafe { rounds_of::<4>(&mut states, pointers, blocks) };
        (*a, *b, *c, *d) = (states[0], states[1], states[2], states[3]);
    }

    /// The `sha1` crate's SHA-NI loop (`compress/x86.rs`) for `N` streams, each step made for
    /// every stream in turn: what the
    /// compiler keeps in registers for `N` = 4 (16 XMM registers hold the four states'
    /// working values; the message words of all four spill to the stack, loads that run
    /// beside the rounds).
    ///
    /// # Safety
    /// The CPU must have SHA-NI, SSE2, SSSE3 and SSE4.1, and each pointer must point to
    /// `blocks * 64` readable bytes.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn rounds_of<const N: usize>(
        states: &mut [[u32; 5]; N],
        pointers: [*const u8; N],
        blocks: usize,
    ) {
        let mask = _mm_set_epi64x(0x0001_0203_0405_0607, 0x0809_0A0B_0C0D_0E0F);
        let mut abcd = [_mm_setzero_si128(); N];
        let mut e = [_mm_setzero_si128(); N];
        for k in 0..N {
            let s = &states[k];
            abcd[k] = _mm_set_epi32(s[0] as i32, s[1] as i32, s[2] as i32, s[3] as i32);
            e[k] = _mm_set_epi32(s[4] as i32, 0, 0, 0);
        }
        macro_rules! rounds4 {
            ($h0:expr, $h1:expr, $w:expr, $i:literal) => {
                _mm_sha1rnds4_epu32($h0, _mm_sha1nexte_epu32($h1, $w), $i)
            };
        }
        macro_rules! schedule {
            ($v0:expr, $v1:expr, $v2:expr, $v3:expr) => {
                _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32($v0, $v1), $v2), $v3)
            };
        }
        macro_rules! step {
            ($h0:ident, $h1:ident, $w0:ident, $w1:ident, $w2:ident, $w3:ident, $w4:ident, $i:literal) => {
                for k in 0..N {
                    $w4[k] = schedule!($w0[k], $w1[k], $w2[k], $w3[k]);
                }
                for k in 0..N {
                    $h1[k] = rounds4!($h0[k], $h1[k], $w4[k], $i);
                }
            };
        }
        for i in 0..blocks {
            let mut w0 = [_mm_setzero_si128(); N];
            let (mut w1, mut w2, mut w3, mut w4) = (w0, w0, w0, w0);
            for k in 0..N {
                // SAFETY (of the pointer arithmetic and the unaligned loads): block `i` lies
                // within the `blocks * 64` bytes the caller vouches for.
                let p = unsafe { pointers[k].add(i * 64) }.cast::<__m128i>();
                let word = |j: usize| {
                    // SAFETY: as above: 16 bytes at offset 16 * j < 64 of a block in bounds.
                    _mm_shuffle_epi8(unsafe { _mm_loadu_si128(p.add(j)) }, mask)
                };
                (w0[k], w1[k], w2[k], w3[k]) = (word(0), word(1), word(2), word(3));
            }
            let mut h0 = abcd;
            let mut h1 = [_mm_setzero_si128(); N];
            for k in 0..N {
                h1[k] = _mm_sha1rnds4_epu32(h0[k], _mm_add_epi32(e[k], w0[k]), 0);
            }
            for k in 0..N {
                h0[k] = rounds4!(h1[k], h0[k], w1[k], 0);
            }
            for k in 0..N {
                h1[k] = rounds4!(h0[k], h1[k], w2[k], 0);
            }
            for k in 0..N {
                h0[k] = rounds4!(h1[k], h0[k], w3[k], 0);
            }
            step!(h0, h1, w0, w1, w2, w3, w4, 0);
            step!(h1, h0, w1, w2, w3, w4, w0, 1);
            step!(h0, h1, w2, w3, w4, w0, w1, 1);
            step!(h1, h0, w3, w4, w0, w1, w2, 1);
            step!(h0, h1, w4, w0, w1, w2, w3, 1);
            step!(h1, h0, w0, w1, w2, w3, w4, 1);
            step!(h0, h1, w1, w2, w3, w4, w0, 2);
            step!(h1, h0, w2, w3, w4, w0, w1, 2);
            step!(h0, h1, w3, w4, w0, w1, w2, 2);
            step!(h1, h0, w4, w0, w1, w2, w3, 2);
            step!(h0, h1, w0, w1, w2, w3, w4, 2);
            step!(h1, h0, w1, w2, w3, w4, w0, 3);
            step!(h0, h1, w2, w3, w4, w0, w1, 3);
            step!(h1, h0, w3, w4, w0, w1, w2, 3);
            step!(h0, h1, w4, w0, w1, w2, w3, 3);
            step!(h1, h0, w0, w1, w2, w3, w4, 3);
            for k in 0..N {
                abcd[k] = _mm_add_epi32(abcd[k], h0[k]);
                e[k] = _mm_sha1nexte_epu32(h1[k], e[k]);
            }
        }
        for k in 0..N {
            let s = &mut states[k];
            s[0] = _mm_extract_epi32(abcd[k], 3) as u32;
            s[1] = _mm_extract_epi32(abcd[k], 2) as u32;
            s[2] = _mm_extract_epi32(abcd[k], 1) as u32;
            s[3] = _mm_extract_epi32(abcd[k], 0) as u32;
            s[4] = _mm_extract_epi32(e[k], 3) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
            .collect()
    }

    #[test]
    fn both_digests_match_the_sha1_crate_around_every_block_boundary() {
        let lengths = [
            0, 1, 2, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 191, 192, 200, 1000, 16_384,
            16_447,
        ];
        for head_len in [0, 1, 37, 55, 56, 63, 64, 65, 100, 127, 128, 129, 300] {
            let head = bytes(head_len, 1);
            for payload_len in lengths {
                let payload = bytes(payload_len, 2);
                assert_eq!(
                    block_and_payload(&head, &payload),
                    one_by_one(&head, &payload),
                    "head {head_len}, payload {payload_len}"
                );
            }
        }
    }

    #[test]
    fn two_responses_at_once_match_the_sha1_crate_whatever_their_lengths() {
        // Four streams as long as the shorter response lasts, then each response's own two:
        // responses of equal and unequal lengths, short ones ending inside the head's block.
        let sizes = [
            (0, 0),
            (37, 3),
            (37, 16_384),
            (64, 16_447),
            (200, 16_384),
            (300, 129),
            (55, 70_001),
        ];
        for (i, &(head_a, payload_a)) in sizes.iter().enumerate() {
            for &(head_b, payload_b) in &sizes[i..] {
                let (ha, pa) = (bytes(head_a, 3), bytes(payload_a, 4));
                let (hb, pb) = (bytes(head_b, 5), bytes(payload_b, 6));
                assert_eq!(
                    blocks_and_payloads_of_two((&ha, &pa), (&hb, &pb)),
                    [one_by_one(&ha, &pa), one_by_one(&hb, &pb)],
                    "({head_a}, {payload_a}) and ({head_b}, {payload_b})"
                );
            }
        }
    }

    #[test]
    fn many_responses_at_once_match_the_sha1_crate_whatever_their_lengths() {
        // Lanes that end before the median response, at it and past it (the rest two streams
        // at a time), short responses ending inside the head's block, and every count of
        // responses (below `LANES_FROM` they go two at a time).
        let sizes = [
            (37, 16_384),
            (0, 0),
            (200, 16_447),
            (64, 3),
            (55, 70_001),
            (300, 129),
            (63, 16_384),
            (1, 1_000),
        ];
        let owned: Vec<(Vec<u8>, Vec<u8>)> = sizes
            .iter()
            .enumerate()
            .map(|(i, &(h, p))| (bytes(h, 2 * i as u32), bytes(p, 2 * i as u32 + 1)))
            .collect();
        for n in 1..=MANY {
            for first in 0..sizes.len() {
                let responses: Vec<(&[u8], &[u8])> = (0..n)
                    .map(|i| &owned[(first + i) % owned.len()])
                    .map(|(h, p)| (h.as_slice(), p.as_slice()))
                    .collect();
                let expected: Vec<_> = responses.iter().map(|(h, p)| one_by_one(h, p)).collect();
                assert_eq!(
                    blocks_and_payloads_of_many(&responses),
                    expected,
                    "{n} responses from {first}"
                );
                assert_eq!(two_by_two(&responses), expected, "{n} from {first}, pairs");
                if let Some(digests) = in_lanes(&responses) {
                    assert_eq!(digests, expected, "{n} from {first}, lanes");
                }
            }
        }
    }

    #[test]
    fn known_answers() {
        // FIPS 180-2 appendix A: SHA-1("abc").
        let (block, payload) = block_and_payload(b"", b"abc");
        assert_eq!(block, payload);
        assert_eq!(
            data_encoding::HEXLOWER.encode(&payload),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        let (block, _) = block_and_payload(b"ab", b"c");
        assert_eq!(block, payload);
    }

    proptest::proptest! {
        #[test]
        fn both_digests_match_the_sha1_crate(
            head in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
        ) {
            proptest::prop_assert_eq!(block_and_payload(&head, &payload), one_by_one(&head, &payload));
        }

        #[test]
        fn many_responses_digested_together_match_the_sha1_crate(
            responses in proptest::collection::vec(
                (
                    proptest::collection::vec(proptest::num::u8::ANY, 0..300),
                    proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
                ),
                1..=MANY,
            ),
        ) {
            let lent: Vec<(&[u8], &[u8])> =
                responses.iter().map(|(h, p)| (h.as_slice(), p.as_slice())).collect();
            let expected: Vec<_> = lent.iter().map(|(h, p)| one_by_one(h, p)).collect();
            if let Some(digests) = in_lanes(&lent) {
                proptest::prop_assert_eq!(digests, expected.clone());
            }
            proptest::prop_assert_eq!(blocks_and_payloads_of_many(&lent), expected);
        }

        #[test]
        fn two_responses_digested_together_match_the_sha1_crate(
            head_a in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            payload_a in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
            head_b in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            payload_b in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
        ) {
            proptest::prop_assert_eq!(
                blocks_and_payloads_of_two((&head_a, &payload_a), (&head_b, &payload_b)),
                [one_by_one(&head_a, &payload_a), one_by_one(&head_b, &payload_b)]
            );
        }
    }
}
