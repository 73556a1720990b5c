//! The seen-set file: header, bit array, checksum (byte layout in the module doc of
//! [`crate::seen`]). Writing is an atomic replace ([`crate::durable::Staged`]: temporary
//! file, fsync, rename, fsync of the directory); reading refuses anything that is not exactly
//! what a writer produced.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::durable::{At, Checksum, Header, Staged};

use super::blocks::{BlockArray, WordBuffer, LOCK_BIT, LOCK_WORD};
use super::error::SeenError;
use super::plan::{Layout, Plan, BLOCK_BITS, BLOCK_BYTES, MAX_K};

pub(crate) const MAGIC: [u8; 8] = *b"CRWLSEEN";
pub(crate) const VERSION: u32 = 1;
/// MurmurHash3 x64_128, g_i = h1 + i·h2, block = ⌊h1·blocks/2^64⌋, bit = ⌊mix(g_i)·511/2^64⌋.
pub(crate) const HASH_SCHEME: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 64;
pub(crate) const CHECKSUM_LEN: u64 = 8;

/// A copy of a seen-set's array and counters, taken while inserts go on (they never wait),
/// to be written to disk by a background checkpoint writer.
///
/// It holds every key whose `insert_new` returned before the copy (`snapshot()` or
/// `snapshot_into()`) was started. A key inserted during the copy may be in it, absent, or
/// with only some of its bits (then it reads as absent after loading, like a key inserted
/// after the checkpoint); no other key is affected, because bits are only ever added. Its
/// insertion count was read before the copy, so it counts no key whose bits it lacks.
///
/// It is also the buffer to copy into: [`SeenSnapshot::for_plan`] makes one with its memory
/// already backed, and [`SeenSet::snapshot_into`](super::SeenSet::snapshot_into) overwrites
/// it, so a crawl that keeps one for checkpoint after checkpoint pauses only for the copy,
/// not for the page faults of a fresh 187.5 MiB allocation (figures in [`crate::seen`]).
pub struct SeenSnapshot {
    pub(crate) plan: Plan,
    pub(crate) insertions: u64,
    /// The array as little-endian words, lock bits cleared: the file's bytes on any host.
    pub(crate) words: WordBuffer,
}

impl SeenSnapshot {
    /// A snapshot buffer for filters of this plan, every page of it backed now (50–180 ms
    /// for 187.5 MiB, once; see the module doc of [`crate::seen`]), to be filled by
    /// [`SeenSet::snapshot_into`](super::SeenSet::snapshot_into). Until then it holds an empty
    /// filter: all bits clear, no insertions.
    pub fn for_plan(plan: &Plan) -> Result<SeenSnapshot, SeenError> {
        let mut snapshot = SeenSnapshot::unbacked(plan)?;
        snapshot.words.fault_in();
        Ok(snapshot)
    }

    /// A zeroed snapshot buffer whose pages the kernel backs only as they are written.
    pub(crate) fn unbacked(plan: &Plan) -> Result<SeenSnapshot, SeenError> {
        let words = usize::try_from(plan.blocks)
            .ok()
            .and_then(|blocks| blocks.checked_mul(8))
            .and_then(WordBuffer::zeroed)
            .ok_or(SeenError::OutOfMemory { bytes: plan.bytes })?;
        Ok(SeenSnapshot {
            plan: plan.clone(),
            insertions: 0,
            words,
        })
    }

    /// Keys counted as new when the copy started (the tests compare copies).
    #[cfg(test)]
    pub(crate) fn insertions(&self) -> u64 {
        self.insertions
    }

    /// The plan of the filter this is a copy of.
    #[cfg(test)]
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Writes the snapshot to `path` atomically: a crash leaves either the old file or the
    /// new one under that name, never a half-written one.
    pub fn write(&self, path: &Path) -> Result<(), SeenError> {
        write_atomically(
            path,
            &header(&self.plan, self.insertions),
            self.words.len(),
            |start, chunk| {
                chunk.copy_from_slice(&self.words[start..start + chunk.len()]);
            },
        )
    }
}

/// Words copied, hashed and written per step: big enough for few system calls, small enough
/// to stay in L2 between the copy, the hash and the write.
const CHUNK_WORDS: usize = 1 << 17;

/// The 64-byte header for a filter of this plan holding `insertions` keys.
pub(crate) fn header(plan: &Plan, insertions: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&plan.layout.code().to_le_bytes());
    h[16..20].copy_from_slice(&HASH_SCHEME.to_le_bytes());
    h[20..24].copy_from_slice(&plan.seed.to_le_bytes());
    h[24..32].copy_from_slice(&plan.m_bits.to_le_bytes());
    h[32..36].copy_from_slice(&plan.k.to_le_bytes());
    // 36..40 reserved, zero.
    h[40..48].copy_from_slice(&plan.n.to_le_bytes());
    h[48..56].copy_from_slice(&plan.target_fpp.to_bits().to_le_bytes());
    h[56..64].copy_from_slice(&insertions.to_le_bytes());
    h
}

/// Writes `header`, then `words` words that `fill(start, chunk)` puts into each chunk (as
/// little-endian values, lock bits clear), then the checksum of all of it, to a temporary
/// file beside `path`; fsyncs it, renames it over `path`, fsyncs the directory. Each word is
/// produced exactly once, so the checksum covers exactly the bytes written even when they
/// come from a filter that is changing underneath.
pub(crate) fn write_atomically(
    path: &Path,
    header: &[u8; HEADER_LEN as usize],
    words: usize,
    mut fill: impl FnMut(usize, &mut [u64]),
) -> Result<(), SeenError> {
    let Some(file_name) = path.file_name() else {
        return Err(SeenError::Io {
            action: "save to",
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        });
    };
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let mut file = Staged::create(path, path.with_file_name(tmp_name))?;
    let mut hasher = Checksum::new();
    hasher.update(header);
    file.write_all(header)?;
    let mut buffer = vec![0u64; CHUNK_WORDS.min(words)];
    let mut start = 0;
    while start < words {
        let chunk = &mut buffer[..CHUNK_WORDS.min(words - start)];
        fill(start, chunk);
        let bytes = words_as_bytes(chunk);
        hasher.update(bytes);
        file.write_all(bytes)?;
        start += chunk.len();
    }
    file.write_all(&hasher.trailer())?;
    Ok(file.sync()?.install()?)
}

/// What a file holds once checked: the plan, the filled array, the counters.
pub(super) struct Loaded {
    pub(crate) plan: Plan,
    pub(crate) array: BlockArray,
    pub(crate) insertions: u64,
    pub(crate) bits_set: u64,
}

/// Reads and checks a seen-set file; any deviation is its own error.
pub(crate) fn read(path: &Path) -> Result<Loaded, SeenError> {
    let mut file = File::open(path).at("open", path)?;
    let size = file.metadata().at("read metadata of", path)?.len();
    let minimum = HEADER_LEN + CHECKSUM_LEN;
    if size < minimum {
        return Err(SeenError::Truncated {
            path: path.to_path_buf(),
            expected: minimum,
            found: size,
        });
    }
    let mut header = [0u8; HEADER_LEN as usize];
    file.read_exact(&mut header).at("read", path)?;
    let fields = parse_header(path, &header)?;
    let expected = fields
        .m_bits
        .checked_div(8)
        .and_then(|b| b.checked_add(HEADER_LEN + CHECKSUM_LEN))
        .ok_or_else(|| bad(path, "m_bits", fields.m_bits, "a size that fits in a file"))?;
    if size < expected {
        return Err(SeenError::Truncated {
            path: path.to_path_buf(),
            expected,
            found: size,
        });
    }
    if size > expected {
        return Err(SeenError::WrongSize {
            path: path.to_path_buf(),
            expected,
            found: size,
        });
    }
    let blocks = fields.m_bits / BLOCK_BITS;
    let mut plan = Plan::build(fields.n, fields.target_fpp, blocks, fields.k)?;
    plan.seed = fields.seed;
    let mut array = BlockArray::zeroed(usize::try_from(blocks).unwrap_or(usize::MAX)).ok_or(
        SeenError::OutOfMemory {
            bytes: blocks * BLOCK_BYTES,
        },
    )?;
    // One pass, chunk by chunk while it is in cache: read, hash, check lock bits, count bits.
    // The checksum is judged before the lock bits, so random damage reads as damage.
    let mut hasher = Checksum::new();
    hasher.update(&header);
    let mut first_locked_block = None;
    let mut bits_set = 0u64;
    for (index, chunk) in array.words_mut().chunks_mut(CHUNK_WORDS).enumerate() {
        file.read_exact(words_as_bytes_mut(chunk))
            .at("read", path)?;
        hasher.update(words_as_bytes(chunk));
        if cfg!(target_endian = "big") {
            for w in chunk.iter_mut() {
                *w = u64::from_le(*w);
            }
        }
        if first_locked_block.is_none() {
            first_locked_block = chunk
                .chunks_exact(8)
                .position(|block| block[LOCK_WORD] & LOCK_BIT != 0)
                .map(|b| (index * CHUNK_WORDS / 8 + b) as u64);
        }
        bits_set += count_ones(chunk);
    }
    let mut stored = [0u8; CHECKSUM_LEN as usize];
    file.read_exact(&mut stored).at("read", path)?;
    let stored = u64::from_le_bytes(stored);
    let computed = hasher.digest();
    if stored != computed {
        return Err(SeenError::ChecksumMismatch {
            path: path.to_path_buf(),
            stored,
            computed,
        });
    }
    if let Some(block) = first_locked_block {
        return Err(SeenError::LockBitSet {
            path: path.to_path_buf(),
            block,
        });
    }
    Ok(Loaded {
        plan,
        array,
        insertions: fields.insertions,
        bits_set,
    })
}

struct HeaderFields {
    seed: u32,
    m_bits: u64,
    k: u32,
    n: u64,
    target_fpp: f64,
    insertions: u64,
}

fn bad(
    path: &Path,
    field: &'static str,
    found: impl ToString,
    expected: &'static str,
) -> SeenError {
    SeenError::BadParameters {
        path: path.to_path_buf(),
        field,
        found: found.to_string(),
        expected,
    }
}

fn parse_header(path: &Path, h: &[u8; HEADER_LEN as usize]) -> Result<HeaderFields, SeenError> {
    let h = Header::new(h);
    let magic = h.array(0);
    if magic != MAGIC {
        return Err(SeenError::BadMagic {
            path: path.to_path_buf(),
            found: magic,
        });
    }
    let version = h.u32(8);
    if version != VERSION {
        return Err(SeenError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: VERSION,
        });
    }
    let layout = h.u32(12);
    if Layout::from_code(layout).is_none() {
        return Err(bad(path, "layout", layout, "1, blocked 512-bit"));
    }
    let scheme = h.u32(16);
    if scheme != HASH_SCHEME {
        return Err(bad(
            path,
            "hash scheme",
            scheme,
            "1, MurmurHash3 x64_128 double hashing",
        ));
    }
    let m_bits = h.u64(24);
    if m_bits == 0 || m_bits % BLOCK_BITS != 0 {
        return Err(bad(path, "m_bits", m_bits, "a positive multiple of 512"));
    }
    let k = h.u32(32);
    if k == 0 || k > MAX_K {
        return Err(bad(path, "k", k, "1 to 48"));
    }
    let reserved = h.u32(36);
    if reserved != 0 {
        return Err(bad(path, "reserved field", reserved, "0"));
    }
    let n = h.u64(40);
    if n == 0 {
        return Err(bad(path, "n", n, "at least 1"));
    }
    let target_fpp = f64::from_bits(h.u64(48));
    if !(target_fpp > 0.0 && target_fpp < 1.0) {
        return Err(bad(
            path,
            "target fpp",
            target_fpp,
            "a probability in (0, 1)",
        ));
    }
    Ok(HeaderFields {
        seed: h.u32(20),
        m_bits,
        k,
        n,
        target_fpp,
        insertions: h.u64(56),
    })
}

/// Set bits in `words`, with the POPCNT instruction where the processor has it: the default
/// x86-64 target may not assume it, and the portable fallback is several times slower over a
/// 171 MiB array.
pub(crate) fn count_ones(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the processor has POPCNT, checked just above.
        return unsafe { count_ones_popcnt(words) };
    }
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn count_ones_popcnt(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

fn words_as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as for words_as_bytes; any byte pattern is a valid u64.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, std::mem::size_of_val(words))
    }
}

fn words_as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and u8 no alignment requirement; the length covers exactly
    // the words' bytes and the borrow keeps them alive.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, std::mem::size_of_val(words)) }
}
