//! The disk side of the frontier's robots.txt state: [`RobotsCache`], robots.txt bodies keyed
//! by a host's 64-bit id.
//!
//! # What it must serve
//!
//! The frontier keeps per-host state for millions of hosts and evicts idle ones from memory.
//! A host that comes back must get its robots.txt rules back without fetching robots.txt
//! again while its entry is fresh (24 h by default). Parsed rules are large (a
//! `texting_robots::Robot` holds its patterns); the body is what is kept, on disk, and the
//! caller parses it again. What stays in memory per host must be a few dozen bytes: at 1e6
//! hosts, 40 bytes a host is 40 MB.
//!
//! # Design
//!
//! One append-only data file of checksummed records, and an in-memory index host → (offset,
//! length, expiry). A `put` appends a record and points the index at it; the record it
//! replaces becomes *dead bytes*. A `get` looks the host up, reads the whole record with one
//! positioned read (or copies it from the write buffer: records not yet written are served
//! from memory, so a read never forces a write), and checks it before returning anything:
//! length against the index, XXH3-64 checksum, kind, and host id. A damaged record (a flipped
//! bit, a truncated file) is [`FileError::Corrupt`] naming the file and the record's
//! offset, never a panic and never a half-decoded body; the entry is then forgotten, so the
//! caller fetches robots.txt again and the next `put` replaces it.
//!
//! Expiry is exact to the millisecond: the record holds `expires_unix_ms`; the index holds it
//! in whole seconds rounded up (4 bytes instead of 8), which is enough to forget a surely
//! expired entry without reading it and is checked against the record's exact value
//! otherwise. An expired entry is forgotten by the `get` that finds it, by
//! [`RobotsCache::forget_expired`] (a pass over the index, no I/O), and by compaction (what
//! expired by the latest `now` the cache was given).
//!
//! *Compaction.* When dead bytes exceed both the live bytes and
//! [`RobotsCacheOptions::compact_min_dead`] (64 MiB by default), the next `put` first
//! rewrites the live records into a new file (`*.compact`) in their order in the old one,
//! through the write buffer, then renames it over the old file. So, as of each `put`, the
//! file holds at most the live bytes plus the larger of them and that minimum (plus one
//! record); and a compaction copies fewer bytes than it reclaims, so, since a record dies
//! once, all compactions together copy fewer bytes than all `put`s appended. Its memory is
//! bounded by the index: the hosts' positions sorted by offset (4 bytes a host), a 1 MiB read
//! window and the write buffer; the old file is read in increasing offset order, a window at
//! a time, skipping windows with no live record. A damaged record met while copying is dropped (logged, counted in
//! [`RobotsCache::damaged_records`]); an I/O error leaves the old file in use, unchanged.
//!
//! *The index* is three sorted parallel arrays (host `u64`, location `u64` packing offset
//! and length, coarse expiry `u32`: 20 bytes a host, allocated to the byte) searched by
//! binary search, plus a small `HashMap` of hosts added since the last merge. The map is
//! merged into the arrays (in place, from the back) when it exceeds a sixteenth of them, and
//! removed hosts are tombstones purged when they exceed a quarter (so at worst 20 × 4/3 ≈ 27
//! bytes a live host in the arrays, after many removals). A plain
//! `HashMap<u64, (u64, u32)>` would cost 25 bytes a bucket (24 of entry and a control byte)
//! at a load between 7/16 and 7/8, i.e. 29 to 57 bytes a host depending on where the host
//! count falls between two powers of two; the arrays cost 20, plus a map bounded by a
//! sixteenth of the hosts (~3.6 bytes a host at most), whatever the count. The price is a
//! binary search (~20 steps at 1e6 hosts) per lookup, small next to the read of the record.
//!
//! *Not durable, by design.* [`RobotsCache::open`] starts empty and removes the files of an
//! earlier run: the index is only in memory, and a resumed crawl fetches robots.txt again
//! (one request per host, and robots.txt may have changed meanwhile anyway). So nothing is
//! fsynced, and a crash loses nothing that a restart would keep.
//!
//! Alternatives considered: one file per host (1e6 files, an inode and a 4 KiB block each
//! for a ~1 KiB body); an embedded key-value store (a dependency, and durability that is not
//! needed); keeping parsed rules in memory (kilobytes a host).
//!
//! # On-disk format (integers little-endian)
//!
//! Directory: [`DATA_FILE`] (`robots-cache.log`), and [`COMPACT_FILE`] while a compaction
//! writes it. Nothing else in the directory is touched.
//!
//! File header, 16 bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLRBTC` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | zero |
//!
//! Then records back to back, no padding; a record at offset `o`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` (0 ..= 512,000, [`MAX_BODY`]) |
//! | 4 | 1 | kind: 0 = allow all (`L` = 0), 1 = body |
//! | 5 | 3 | zero |
//! | 8 | 8 | host id |
//! | 16 | 8 | expiry, Unix milliseconds |
//! | 24 | 8 | XXH3-64 of bytes 0..24 followed by the body |
//! | 32 | `L` | body: the robots.txt bytes as fetched |
//!
//! In memory, a location is `o << 24 | (32 + L)`: records end below 1 TiB
//! ([`RobotsCacheError::Full`] beyond).
//!
//! # Measured
//!
//! `cargo test --release --test robots_cache -- --ignored --nocapture` (2 cores shared with
//! other builds, load average 3–4: wall-clock figures are pessimistic and noisy, so the
//! thread's CPU time, system time included, is given too; ranges are over two runs).
//! 1e6 hosts, bodies of 512–1536 bytes (1 KiB on average, ~1 GiB in all), default options;
//! the file stays in the page cache (24 GiB machine), so reads are not disk reads. Memory is
//! the live heap counted by a global allocator in that test.
//!
//! | what | wall clock | CPU |
//! |---|---|---|
//! | put, new hosts | 253–287 k/s | 384–413 k/s a CPU-second |
//! | get, random order (one `pread` and a checksum each) | 141–142 k/s | 205–212 k/s a CPU-second |
//! | get, after the compaction | 174–201 k/s | 266–287 k/s a CPU-second |
//! | put, every host replaced in random order, the compaction included | 93–96 k/s | 156–157 k/s a CPU-second |
//! | the compaction that this run triggers (1007 MiB live copied, in one `put`) | 3.9–4.3 s | 2.2 s |
//! | `compact()` of 1007 MiB, all live | 3.9–4.0 s | 1.8–1.9 s |
//!
//! | what | figure |
//! |---|---|
//! | disk, largest | 2013 MiB (dead = live), plus the new file during a compaction |
//! | index, [`RobotsCache::index_bytes`] and counted heap alike | 20.7 bytes a host |
//! | heap during the compaction, above the steady state | 5.7 MiB (the order, 4 bytes a host; the 1 MiB read window) |
//!
//! Index bytes a host against the host count, and a `HashMap<u64, (u64, u32)>` of the same
//! hosts for comparison (counted heap):
//!
//! | hosts | this index | `HashMap` |
//! |---|---|---|
//! | 1e5 | 21.1 | 32.8 |
//! | 3e5 | 21.6 | 43.7 |
//! | 6e5 | 22.3 | 43.7 |
//! | 1e6 | 20.7 | 52.4 |
//! | 1.1e6 | 22.5 | 47.7 |
//! | 1.5e6 | 21.6 | 35.0 |
//! | 2e6 | 23.0 | 52.4 |
//!
//! So the index is 20.7–23 bytes a host at any count (20 in the arrays, the rest the delta
//! map), within the 40-byte target, where the map swings between 33 and 52. Rates were
//! measured at 1e6 hosts only. The compaction is the one long pause: it copies every live
//! byte inside one `put`, ~2 CPU-seconds per GiB live, 2.2–6.2 s of wall clock across all
//! runs on this shared machine. Its floor is the kernel copying 1 GiB into and out of the
//! page cache (`dd` here: 0.8 s to write 1 GiB, 0.4 s to read it). Reading the old file in 1 MiB
//! windows rather than one `pread` per record saved ~10% of the CPU (2.0–2.2 s before,
//! same runs interleaved). One starts when dead bytes pass live ones, and entries only
//! die by being replaced, removed or expired: with a 24 h TTL, that is on the order of once a
//! day, but the owner of the cache is stalled for the whole copy. Should that matter, the
//! copy can be spread over later `put`s (two files, the old one drained a few records per
//! `put`); not done here.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::durable::{checksum_of, At, FileError, Header, IoAt};
use crate::robots::ROBOTS_MAX_BYTES;

/// The data file, in the cache's directory.
pub const DATA_FILE: &str = "robots-cache.log";
/// The file a compaction writes before renaming it over [`DATA_FILE`].
pub const COMPACT_FILE: &str = "robots-cache.log.compact";
/// The largest body stored: the crawler reads at most this much of a robots.txt.
pub const MAX_BODY: usize = ROBOTS_MAX_BYTES as usize;

const MAGIC: [u8; 8] = *b"CRWLRBTC";
const VERSION: u32 = 1;
const FILE_HEADER: u64 = 16;
const RECORD_HEADER: usize = 32;
const KIND_ALLOW_ALL: u8 = 0;
const KIND_BODY: u8 = 1;
/// A location packs a record's offset (high 40 bits) and length (low 24 bits) in one `u64`.
const LEN_BITS: u32 = 24;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;
/// Records must end below this offset (1 TiB): the 40 bits of a location's offset.
const MAX_END: u64 = 1 << (64 - LEN_BITS);
/// The location of a removed entry in the sorted arrays (never a real one: records are far
/// shorter than `LEN_MASK`).
const TOMBSTONE: u64 = u64::MAX;
/// The delta map is merged into the sorted arrays when it holds more than
/// `max(DELTA_MIN, sorted / DELTA_SHARE)` hosts.
const DELTA_MIN: usize = 1024;
const DELTA_SHARE: usize = 16;
/// Tombstones are purged when more than `max(DELTA_MIN, sorted / TOMBSTONE_SHARE)`.
const TOMBSTONE_SHARE: usize = 4;
/// A compaction reads the old file in windows of this size (at least one record).
const READ_WINDOW: usize = 1 << 20;

/// Sizes of a [`RobotsCache`].
#[derive(Debug, Clone)]
pub struct RobotsCacheOptions {
    /// Bytes of records kept in memory before they are written to the file together. A record
    /// larger than this is written on its own.
    pub write_buffer: usize,
    /// A compaction runs when dead bytes (replaced, removed or forgotten records) exceed both
    /// the live bytes and this.
    pub compact_min_dead: u64,
}

impl Default for RobotsCacheOptions {
    fn default() -> Self {
        RobotsCacheOptions {
            write_buffer: 1 << 20,
            compact_min_dead: 64 << 20,
        }
    }
}

/// Why the cache could not be opened, read or written. Every error names the file; damage
/// ([`FileError::Corrupt`]) also names the byte offset of the damaged record.
#[derive(Debug, thiserror::Error)]
pub enum RobotsCacheError {
    /// I/O on the cache's file, or a damaged record.
    #[error(transparent)]
    File(#[from] FileError),
    #[error("robots.txt body of {len} bytes for host {host:016x} exceeds the {MAX_BODY}-byte limit; not stored in {}", path.display())]
    TooLarge {
        path: PathBuf,
        host: u64,
        len: usize,
    },
    #[error("{} is full: a record cannot end past byte {MAX_END}", path.display())]
    Full { path: PathBuf },
}

impl From<IoAt> for RobotsCacheError {
    fn from(e: IoAt) -> RobotsCacheError {
        RobotsCacheError::File(e.into())
    }
}

/// What was stored for a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CachedRobots {
    /// Everything is allowed: no robots.txt, or a 4xx.
    AllowAll,
    /// The robots.txt body to parse (at most [`MAX_BODY`] bytes).
    Body(Vec<u8>),
}

fn pack(offset: u64, len: usize) -> u64 {
    offset << LEN_BITS | len as u64
}
fn loc_offset(loc: u64) -> u64 {
    loc >> LEN_BITS
}
fn loc_len(loc: u64) -> usize {
    (loc & LEN_MASK) as usize
}

/// Expiry in whole seconds, rounded up, so that `now_ms >= secs * 1000` proves the exact
/// expiry passed. `u32::MAX` means "at or after 2106": the exact one must be read.
fn expiry_secs(expires_unix_ms: u64) -> u32 {
    u32::try_from(expires_unix_ms.div_ceil(1000)).unwrap_or(u32::MAX)
}
/// Whether an entry whose coarse expiry is `secs` is certainly expired at `now_ms`.
fn surely_expired(secs: u32, now_ms: u64) -> bool {
    secs != u32::MAX && now_ms >= secs as u64 * 1000
}

/// A host's slot in the index: where its record is and when it expires (coarsely).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    loc: u64,
    exp: u32,
}

/// Host ids are hashes already, but tests and callers may pass small integers: one
/// multiply-xorshift spreads them over the map's buckets and its 7-bit tags.
#[derive(Default)]
struct MixHasher(u64);

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
struct Index {
    hosts: Vec<u64>,
    locs: Vec<u64>,
    exps: Vec<u32>,
    /// Entries of the arrays whose location is [`TOMBSTONE`].
    tombstones: usize,
    delta: HashMap<u64, Slot, BuildHasherDefault<MixHasher>>,
}

impl Index {
    fn len(&self) -> usize {
        self.hosts.len() - self.tombstones + self.delta.len()
    }

    fn find(&self, host: u64) -> Option<usize> {
        self.hosts.binary_search(&host).ok()
    }

    fn get(&self, host: u64) -> Option<Slot> {
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
    fn set(&mut self, host: u64, slot: Slot) -> Option<Slot> {
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

    fn remove(&mut self, host: u64) -> Option<Slot> {
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
    fn forget_expired(&mut self, now_ms: u64) -> (usize, u64) {
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
    fn merge(&mut self) {
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
    fn memory_bytes(&self) -> u64 {
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

/// A record's decoded header.
struct RecordHeader {
    body_len: u32,
    kind: u8,
    pad: [u8; 3],
    host: u64,
    expires_unix_ms: u64,
    checksum: u64,
}

impl RecordHeader {
    fn parse(h: &[u8; RECORD_HEADER]) -> RecordHeader {
        let h = Header::new(h);
        RecordHeader {
            body_len: h.u32(0),
            kind: h.u8(4),
            pad: h.array(5),
            host: h.u64(8),
            expires_unix_ms: h.u64(16),
            checksum: h.u64(24),
        }
    }
}

/// The checksum of a record: bytes 0..24 of its header, then its body.
fn record_checksum(header: &[u8; RECORD_HEADER], body: &[u8]) -> u64 {
    checksum_of(&[&header[..24], body])
}

fn encode_header(host: u64, expires_unix_ms: u64, kind: u8, body: &[u8]) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    h[4] = kind;
    h[8..16].copy_from_slice(&host.to_le_bytes());
    h[16..24].copy_from_slice(&expires_unix_ms.to_le_bytes());
    let sum = record_checksum(&h, body);
    h[24..32].copy_from_slice(&sum.to_le_bytes());
    h
}

/// Checks a whole record (`rec`, read from `offset` of `path`) that the index says is
/// `host`'s: length, checksum, kind, host. Returns its header.
fn verify(rec: &[u8], host: u64, path: &Path, offset: u64) -> Result<RecordHeader, FileError> {
    let Some((header, body)) = rec.split_first_chunk::<RECORD_HEADER>() else {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("record of {} bytes is shorter than its header", rec.len()),
        ));
    };
    let h = RecordHeader::parse(header);
    if h.body_len as usize != body.len() {
        return Err(FileError::corrupt(
            path,
            offset,
            format!(
                "length field says {} bytes of body, the index {}",
                h.body_len,
                body.len()
            ),
        ));
    }
    let sum = record_checksum(header, body);
    if sum != h.checksum {
        return Err(FileError::corrupt(
            path,
            offset,
            format!(
                "checksum mismatch (stored {:016x}, computed {sum:016x})",
                h.checksum
            ),
        ));
    }
    if h.pad != [0; 3] || !(h.kind == KIND_BODY || (h.kind == KIND_ALLOW_ALL && h.body_len == 0)) {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("kind {} with {} bytes of body", h.kind, h.body_len),
        ));
    }
    if h.host != host {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("record is host {:016x}'s, not {host:016x}'s", h.host),
        ));
    }
    Ok(h)
}

/// A disk cache of robots.txt bodies keyed by host id; see the module documentation.
pub struct RobotsCache {
    path: PathBuf,
    compact_path: PathBuf,
    file: File,
    options: RobotsCacheOptions,
    /// Bytes in the file (its header included); the write buffer continues from here.
    flushed: u64,
    wbuf: Vec<u8>,
    index: Index,
    /// Bytes of the records the index points at.
    live_bytes: u64,
    /// The latest `now` seen by [`RobotsCache::get`]: compaction drops what expired by then.
    now_hint: u64,
    compactions: u64,
    damaged: u64,
}

impl std::fmt::Debug for RobotsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotsCache")
            .field("path", &self.path)
            .field("hosts", &self.len())
            .field("live_bytes", &self.live_bytes)
            .field("disk_bytes", &self.disk_bytes())
            .finish_non_exhaustive()
    }
}

impl RobotsCache {
    /// Opens the cache in `dir` (created if missing), empty.
    ///
    /// Files of an earlier run ([`DATA_FILE`], [`COMPACT_FILE`]) are removed, not loaded: the
    /// index lives only in memory, so a resumed crawl fetches every robots.txt again. Nothing
    /// else in `dir` is touched. One cache per directory: two open at once would clobber each
    /// other's file. Dropping the cache leaves its file; the next `open` removes it.
    pub fn open(dir: &Path, options: RobotsCacheOptions) -> Result<RobotsCache, RobotsCacheError> {
        fs::create_dir_all(dir).at("create directory", dir)?;
        let path = dir.join(DATA_FILE);
        let compact_path = dir.join(COMPACT_FILE);
        for p in [&path, &compact_path] {
            match fs::remove_file(p) {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                removed => removed.at("remove", p)?,
            }
        }
        let file = create_data_file(&path)?;
        Ok(RobotsCache {
            path,
            compact_path,
            file,
            wbuf: Vec::with_capacity(options.write_buffer),
            options,
            flushed: FILE_HEADER,
            index: Index::default(),
            live_bytes: 0,
            now_hint: 0,
            compactions: 0,
            damaged: 0,
        })
    }

    /// Stores the entry for `host`, replacing any older one. `expires_unix_ms`: wall-clock
    /// expiry (the entry is fresh while `now < expires_unix_ms`).
    ///
    /// A body larger than [`MAX_BODY`] is refused ([`RobotsCacheError::TooLarge`]) and the
    /// older entry, if any, is kept; so it is on any error: an `Err` means nothing was stored.
    /// First compacts the file if its dead bytes exceed both the live bytes and
    /// [`RobotsCacheOptions::compact_min_dead`]; may write the write buffer.
    pub fn put(
        &mut self,
        host: u64,
        expires_unix_ms: u64,
        entry: &CachedRobots,
    ) -> Result<(), RobotsCacheError> {
        let (kind, body): (u8, &[u8]) = match entry {
            CachedRobots::AllowAll => (KIND_ALLOW_ALL, &[]),
            CachedRobots::Body(b) => (KIND_BODY, b),
        };
        if body.len() > MAX_BODY {
            return Err(RobotsCacheError::TooLarge {
                path: self.path.clone(),
                host,
                len: body.len(),
            });
        }
        if self.dead_bytes() > self.live_bytes.max(self.options.compact_min_dead) {
            self.compact()?;
        }
        let rec_len = RECORD_HEADER + body.len();
        if !self.wbuf.is_empty() && self.wbuf.len() + rec_len > self.options.write_buffer {
            self.flush()?;
        }
        let offset = self.end();
        if offset + rec_len as u64 > MAX_END {
            return Err(RobotsCacheError::Full {
                path: self.path.clone(),
            });
        }
        let header = encode_header(host, expires_unix_ms, kind, body);
        if rec_len > self.options.write_buffer {
            // The buffer is empty (flushed above): the record goes straight to the file.
            self.file
                .write_all_at(&header, offset)
                .and_then(|()| self.file.write_all_at(body, offset + RECORD_HEADER as u64))
                .at("write", &self.path)?;
            self.flushed += rec_len as u64;
        } else {
            self.wbuf.extend_from_slice(&header);
            self.wbuf.extend_from_slice(body);
        }
        let slot = Slot {
            loc: pack(offset, rec_len),
            exp: expiry_secs(expires_unix_ms),
        };
        if let Some(old) = self.index.set(host, slot) {
            self.live_bytes -= loc_len(old.loc) as u64;
        }
        self.live_bytes += rec_len as u64;
        Ok(())
    }

    /// The entry for `host` if present and not expired at `now_unix_ms` (an expired one is
    /// forgotten).
    ///
    /// The record is read (from the write buffer or the file) and checked whole before
    /// anything is returned: a damaged one gives [`FileError::Corrupt`] with the file
    /// and the record's offset, and is forgotten (the next `get` says `None`, so the caller
    /// fetches robots.txt again).
    pub fn get(
        &mut self,
        host: u64,
        now_unix_ms: u64,
    ) -> Result<Option<CachedRobots>, RobotsCacheError> {
        Ok(self
            .get_with_expiry(host, now_unix_ms)?
            .map(|(entry, _)| entry))
    }

    /// [`RobotsCache::get`], with the entry's expiry (Unix milliseconds): the frontier
    /// restores an evicted host's rules with the time they have left.
    pub fn get_with_expiry(
        &mut self,
        host: u64,
        now_unix_ms: u64,
    ) -> Result<Option<(CachedRobots, u64)>, RobotsCacheError> {
        self.now_hint = self.now_hint.max(now_unix_ms);
        let Some(slot) = self.index.get(host) else {
            return Ok(None);
        };
        if surely_expired(slot.exp, now_unix_ms) {
            self.forget(host);
            return Ok(None);
        }
        let (h, mut rec) = match self.read_record(slot.loc, host) {
            Ok(read) => read,
            Err(e) => {
                if matches!(e, FileError::Corrupt { .. }) {
                    self.damaged += 1;
                    self.forget(host);
                }
                return Err(e.into());
            }
        };
        if now_unix_ms >= h.expires_unix_ms {
            self.forget(host);
            return Ok(None);
        }
        let entry = if h.kind == KIND_ALLOW_ALL {
            CachedRobots::AllowAll
        } else {
            rec.drain(..RECORD_HEADER);
            CachedRobots::Body(rec)
        };
        Ok(Some((entry, h.expires_unix_ms)))
    }

    /// Forgets `host`'s entry, if any. Its record becomes dead bytes (reclaimed by a later
    /// compaction, which only a `put` or [`RobotsCache::compact`] starts).
    pub fn remove(&mut self, host: u64) {
        self.forget(host);
    }

    /// Forgets every entry expired at `now_unix_ms` (to the second: one that expires less
    /// than a second before may stay until a later call); returns how many. A pass over
    /// the index, no I/O.
    pub fn forget_expired(&mut self, now_unix_ms: u64) -> usize {
        self.now_hint = self.now_hint.max(now_unix_ms);
        let (count, bytes) = self.index.forget_expired(now_unix_ms);
        self.live_bytes -= bytes;
        count
    }

    /// Hosts with an entry (some may be expired but not yet forgotten).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in memory: the index (see [`RobotsCache::index_bytes`]) plus the write
    /// buffer's capacity.
    pub fn memory_bytes(&self) -> u64 {
        self.index_bytes() + self.wbuf.capacity() as u64
    }

    /// Bytes of the in-memory index alone: its arrays' capacity, its delta map's buckets
    /// (entry and control byte each, estimated from the map's capacity). A merge briefly holds
    /// the delta's entries twice more (24 bytes each).
    pub fn index_bytes(&self) -> u64 {
        self.index.memory_bytes()
    }

    /// Bytes of the data file, the write buffer's records included (they are written there
    /// later). While a compaction runs, its new file exists too.
    pub fn disk_bytes(&self) -> u64 {
        self.end()
    }

    /// Bytes of the records the index points at.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes of records no entry points at (replaced, removed, expired), until a compaction.
    pub fn dead_bytes(&self) -> u64 {
        self.end() - FILE_HEADER - self.live_bytes
    }

    /// Compactions done so far.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// Damaged records found so far (by `get` or a compaction) and forgotten.
    pub fn damaged_records(&self) -> u64 {
        self.damaged
    }

    /// The data file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the write buffer to the file (no fsync: the cache does not outlive the process).
    pub fn flush(&mut self) -> Result<(), RobotsCacheError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        self.file
            .write_all_at(&self.wbuf, self.flushed)
            .at("write", &self.path)?;
        self.flushed += self.wbuf.len() as u64;
        self.wbuf.clear();
        Ok(())
    }

    /// Rewrites the live records into a new file, in their order in the old one, and renames
    /// it over the old one. Entries expired at the latest `now` given to `get` or
    /// `forget_expired` are dropped, and so are damaged records (counted in
    /// [`RobotsCache::damaged_records`], logged with file and offset). Memory: 4 bytes per
    /// host for the order, a 1 MiB read window and the write buffer. On an error the old file stays in
    /// use, with every entry it had (less the expired and damaged ones).
    pub fn compact(&mut self) -> Result<(), RobotsCacheError> {
        self.flush()?;
        self.forget_expired(self.now_hint);
        self.index.merge();
        let index = &self.index;
        let mut order: Vec<u32> = (0..index.hosts.len() as u32).collect();
        order.sort_unstable_by_key(|&i| loc_offset(index.locs[i as usize]));
        let new = create_data_file(&self.compact_path);
        let result = new.and_then(|new| {
            let end = self.copy_live(&order, &new)?;
            fs::rename(&self.compact_path, &self.path).at("rename", &self.compact_path)?;
            Ok((new, end))
        });
        let (new, end) = match result {
            Ok(r) => r,
            Err(e) => {
                let _ = fs::remove_file(&self.compact_path);
                self.wbuf.clear();
                return Err(e);
            }
        };
        // The new file is in place: point the index at it (same order, damaged ones skipped).
        let mut at = FILE_HEADER;
        for &i in &order {
            let loc = &mut self.index.locs[i as usize];
            if *loc != TOMBSTONE {
                let len = loc_len(*loc);
                *loc = pack(at, len);
                at += len as u64;
            }
        }
        debug_assert_eq!(at, end);
        self.file = new;
        self.flushed = end;
        self.live_bytes = end - FILE_HEADER;
        self.compactions += 1;
        Ok(())
    }

    /// Copies the records of `order` (indices into the index's arrays, in file order) to
    /// `new`, through the write buffer; damaged ones are forgotten. Returns the new end.
    fn copy_live(&mut self, order: &[u32], new: &File) -> Result<u64, RobotsCacheError> {
        let mut end = FILE_HEADER;
        // Records come in file order, so one read of a window serves many of them (~10% less
        // CPU than one `pread` per record, measured).
        let mut win: Vec<u8> = Vec::new();
        let mut win_at = 0u64;
        for &i in order {
            let i = i as usize;
            let (loc, host) = (self.index.locs[i], self.index.hosts[i]);
            let (offset, len) = (loc_offset(loc), loc_len(loc));
            let in_window = offset >= win_at && offset + len as u64 <= win_at + win.len() as u64;
            if !in_window {
                let want = len.max(READ_WINDOW.min(self.flushed.saturating_sub(offset) as usize));
                win.resize(want, 0);
                let got = read_up_to(&self.file, &mut win, offset).at("read", &self.path)?;
                win.truncate(got);
                win_at = offset;
            }
            let at = (offset - win_at) as usize;
            let checked = match win.get(at..at + len) {
                Some(rec) => verify(rec, host, &self.path, offset).map(|_| rec),
                None => Err(FileError::corrupt(
                    &self.path,
                    offset,
                    format!("the file ends before the record's {len} bytes"),
                )),
            };
            let rec = match checked {
                Ok(rec) => rec,
                Err(e) => {
                    tracing::warn!("robots.txt cache: dropping a damaged record: {e}");
                    self.damaged += 1;
                    self.index.locs[i] = TOMBSTONE;
                    self.index.tombstones += 1;
                    self.live_bytes -= len as u64;
                    continue;
                }
            };
            if !self.wbuf.is_empty() && self.wbuf.len() + len > self.options.write_buffer {
                new.write_all_at(&self.wbuf, end)
                    .at("write", &self.compact_path)?;
                end += self.wbuf.len() as u64;
                self.wbuf.clear();
            }
            self.wbuf.extend_from_slice(rec);
        }
        new.write_all_at(&self.wbuf, end)
            .at("write", &self.compact_path)?;
        end += self.wbuf.len() as u64;
        self.wbuf.clear();
        // A record larger than the buffer may have grown it.
        if self.wbuf.capacity() > self.options.write_buffer {
            self.wbuf.shrink_to(self.options.write_buffer);
        }
        Ok(end)
    }

    /// End of the data, write buffer included: where the next record goes.
    fn end(&self) -> u64 {
        self.flushed + self.wbuf.len() as u64
    }

    fn forget(&mut self, host: u64) {
        if let Some(old) = self.index.remove(host) {
            self.live_bytes -= loc_len(old.loc) as u64;
        }
    }

    /// Reads and verifies the whole record at `loc`, from the write buffer or the file.
    /// Returns its header and its bytes (the header included).
    fn read_record(&self, loc: u64, host: u64) -> Result<(RecordHeader, Vec<u8>), FileError> {
        let (offset, len) = (loc_offset(loc), loc_len(loc));
        let rec = if offset >= self.flushed {
            let at = (offset - self.flushed) as usize;
            match self.wbuf.get(at..at + len) {
                Some(r) => r.to_vec(),
                None => {
                    return Err(FileError::corrupt(
                        &self.path,
                        offset,
                        "the index points past the end of the data",
                    ))
                }
            }
        } else {
            let mut rec = vec![0; len];
            read_exact_at(&self.file, &mut rec, offset, &self.path)?;
            rec
        };
        let header = verify(&rec, host, &self.path, offset)?;
        Ok((header, rec))
    }

    /// Checks the index against the file's bookkeeping (tests).
    #[cfg(test)]
    fn check_invariants(&self) {
        let ix = &self.index;
        assert!(ix.hosts.windows(2).all(|w| w[0] < w[1]), "hosts sorted");
        assert_eq!(ix.hosts.len(), ix.locs.len());
        assert_eq!(ix.hosts.len(), ix.exps.len());
        assert_eq!(
            ix.tombstones,
            ix.locs.iter().filter(|&&l| l == TOMBSTONE).count()
        );
        for h in ix.delta.keys() {
            assert!(ix.find(*h).is_none(), "host {h} in both parts");
        }
        let live: u64 = ix
            .locs
            .iter()
            .filter(|&&l| l != TOMBSTONE)
            .chain(ix.delta.values().map(|s| &s.loc))
            .map(|&l| loc_len(l) as u64)
            .sum();
        assert_eq!(live, self.live_bytes);
        assert!(self.end() - FILE_HEADER >= self.live_bytes);
    }
}

fn create_data_file(path: &Path) -> Result<File, RobotsCacheError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .at("create", path)?;
    let mut header = [0u8; FILE_HEADER as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    file.write_all_at(&header, 0).at("write", path)?;
    Ok(file)
}

/// Reads from `offset` until `buf` is full or the file ends; returns the bytes read.
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads `buf.len()` bytes at `offset`; a file that ends first is damage at `offset`.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, path: &Path) -> Result<(), FileError> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == ErrorKind::UnexpectedEof {
            FileError::corrupt(
                path,
                offset,
                format!("the file ends before the record's {} bytes", buf.len()),
            )
        } else {
            IoAt {
                action: "read",
                path: path.to_path_buf(),
                source: e,
            }
            .into()
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    fn options(write_buffer: usize, compact_min_dead: u64) -> RobotsCacheOptions {
        RobotsCacheOptions {
            write_buffer,
            compact_min_dead,
        }
    }

    fn body(s: &str) -> CachedRobots {
        CachedRobots::Body(s.as_bytes().to_vec())
    }

    fn file_len(cache: &RobotsCache) -> u64 {
        fs::metadata(cache.path()).unwrap().len()
    }

    fn flip(path: &Path, at: u64) {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x20], at).unwrap();
    }

    #[test]
    fn put_get_replace_remove() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
        assert!(c.is_empty());
        assert_eq!(c.get(1, 0).unwrap(), None);
        c.put(1, 10_000, &CachedRobots::AllowAll).unwrap();
        c.put(2, 10_000, &body("User-agent: *\nDisallow: /x\n"))
            .unwrap();
        c.put(0, 10_000, &CachedRobots::Body(Vec::new())).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(1, 5).unwrap(), Some(CachedRobots::AllowAll));
        assert_eq!(
            c.get(2, 5).unwrap(),
            Some(body("User-agent: *\nDisallow: /x\n"))
        );
        assert_eq!(c.get(0, 5).unwrap(), Some(CachedRobots::Body(Vec::new())));
        c.put(2, 10_000, &CachedRobots::AllowAll).unwrap();
        c.put(1, 10_000, &body("Disallow: /")).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(2, 5).unwrap(), Some(CachedRobots::AllowAll));
        assert_eq!(c.get(1, 5).unwrap(), Some(body("Disallow: /")));
        c.remove(1);
        c.remove(1);
        c.remove(77);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(1, 5).unwrap(), None);
        c.check_invariants();
        // Served from the buffer so far; the same after a flush, from the file.
        assert_eq!(file_len(&c), FILE_HEADER);
        c.flush().unwrap();
        assert_eq!(file_len(&c), c.disk_bytes());
        assert_eq!(c.get(2, 5).unwrap(), Some(CachedRobots::AllowAll));
        assert_eq!(c.get(0, 5).unwrap(), Some(CachedRobots::Body(Vec::new())));
        assert_eq!(c.live_bytes(), 2 * RECORD_HEADER as u64);
    }

    #[test]
    fn expiry_is_exact_to_the_millisecond() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
        c.put(1, 1_500, &body("a")).unwrap();
        c.put(2, u64::MAX, &body("b")).unwrap();
        c.put(3, 5_000_000_000_000, &body("c")).unwrap(); // past 2106: coarse expiry saturated
        c.put(4, 0, &body("d")).unwrap(); // expired when stored
        assert_eq!(c.get(1, 1_499).unwrap(), Some(body("a")));
        assert_eq!(c.get(1, 1_500).unwrap(), None);
        assert_eq!(c.len(), 3, "the expired entry is forgotten");
        assert_eq!(c.get(1, 0).unwrap(), None, "and stays forgotten");
        assert_eq!(c.get(4, 0).unwrap(), None);
        assert_eq!(c.get(2, u64::MAX - 1).unwrap(), Some(body("b")));
        assert_eq!(c.get(2, u64::MAX).unwrap(), None);
        assert_eq!(c.get(3, 4_999_999_999_999).unwrap(), Some(body("c")));
        assert_eq!(c.get(3, 5_000_000_000_000).unwrap(), None);
        assert!(c.is_empty());
        assert_eq!(c.live_bytes(), 0);
        c.check_invariants();
    }

    #[test]
    fn forget_expired_drops_what_expired() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
        for h in 0..3000u64 {
            c.put(h, 1_000 * (h % 10 + 1), &CachedRobots::AllowAll)
                .unwrap();
        }
        assert_eq!(c.forget_expired(5_000), 1500);
        assert_eq!(c.len(), 1500);
        c.check_invariants();
        for h in 0..3000u64 {
            let want = (h % 10 + 1 > 5).then_some(CachedRobots::AllowAll);
            assert_eq!(c.get(h, 5_000).unwrap(), want, "host {h}");
        }
    }

    #[test]
    fn bodies_up_to_the_limit_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(4096, 1 << 20)).unwrap();
        let max = CachedRobots::Body(vec![b'x'; MAX_BODY]);
        c.put(9, 1 << 40, &max).unwrap();
        let e = c
            .put(9, 1 << 40, &CachedRobots::Body(vec![b'y'; MAX_BODY + 1]))
            .unwrap_err();
        assert!(
            matches!(e, RobotsCacheError::TooLarge { len, host: 9, .. } if len == MAX_BODY + 1)
        );
        assert!(e.to_string().contains(DATA_FILE), "{e}");
        assert_eq!(c.get(9, 0).unwrap(), Some(max), "the older entry stays");
        c.check_invariants();
    }

    #[test]
    fn records_larger_than_the_buffer_and_buffered_ones_mix() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(100, 1 << 30)).unwrap();
        let mut want = HashMap::new();
        for h in 0..200u64 {
            let b = CachedRobots::Body(vec![h as u8; (h as usize * 7) % 150]);
            c.put(h, u64::MAX, &b).unwrap();
            want.insert(h, b);
            // Read back the newest (often still buffered) and an older one.
            assert_eq!(c.get(h, 0).unwrap().as_ref(), want.get(&h));
            assert_eq!(c.get(h / 2, 0).unwrap().as_ref(), want.get(&(h / 2)));
        }
        c.flush().unwrap();
        assert_eq!(file_len(&c), c.disk_bytes());
        for (h, b) in &want {
            assert_eq!(c.get(*h, 0).unwrap().as_ref(), Some(b));
        }
    }

    #[test]
    fn compaction_keeps_exactly_the_live_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(512, 4096)).unwrap();
        let mut want: HashMap<u64, CachedRobots> = HashMap::new();
        for round in 0..20u64 {
            for h in 0..300u64 {
                match (h + round) % 7 {
                    0 => {
                        c.remove(h);
                        want.remove(&h);
                    }
                    1 => {
                        c.put(h, u64::MAX, &CachedRobots::AllowAll).unwrap();
                        want.insert(h, CachedRobots::AllowAll);
                    }
                    _ => {
                        let b = CachedRobots::Body(format!("{round}/{h}").repeat(3).into_bytes());
                        c.put(h, u64::MAX, &b).unwrap();
                        want.insert(h, b);
                    }
                }
            }
            c.check_invariants();
        }
        assert!(c.compactions() > 3, "{}", c.compactions());
        assert!(c.dead_bytes() <= c.live_bytes().max(4096) + 512);
        c.compact().unwrap();
        assert_eq!(c.dead_bytes(), 0);
        assert_eq!(c.disk_bytes(), FILE_HEADER + c.live_bytes());
        assert_eq!(
            file_len(&c),
            c.disk_bytes(),
            "nothing buffered after a compaction"
        );
        assert!(!dir.path().join(COMPACT_FILE).exists());
        assert_eq!(c.len(), want.len());
        for h in 0..300u64 {
            assert_eq!(c.get(h, 0).unwrap().as_ref(), want.get(&h), "host {h}");
        }
        assert_eq!(c.damaged_records(), 0);
    }

    #[test]
    fn compaction_drops_what_expired_by_the_latest_get() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(512, 0)).unwrap();
        for h in 0..100u64 {
            c.put(h, if h % 2 == 0 { 10_000 } else { 20_000 }, &body("x"))
                .unwrap();
        }
        assert_eq!(c.get(1, 15_000).unwrap(), Some(body("x")));
        c.compact().unwrap();
        assert_eq!(c.len(), 50);
        assert_eq!(c.live_bytes(), 50 * (RECORD_HEADER as u64 + 1));
        for h in 0..100u64 {
            let want = (h % 2 == 1).then(|| body("x"));
            assert_eq!(c.get(h, 15_000).unwrap(), want);
        }
    }

    #[test]
    fn reopening_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        let mut c = RobotsCache::open(&sub, RobotsCacheOptions::default()).unwrap();
        for h in 0..10u64 {
            c.put(h, u64::MAX, &body("Disallow: /")).unwrap();
        }
        c.flush().unwrap();
        assert!(file_len(&c) > FILE_HEADER);
        drop(c);
        fs::write(sub.join(COMPACT_FILE), b"left over").unwrap();
        fs::write(sub.join("other"), b"not ours").unwrap();
        let mut c = RobotsCache::open(&sub, RobotsCacheOptions::default()).unwrap();
        assert!(c.is_empty());
        assert_eq!(c.get(3, 0).unwrap(), None);
        assert_eq!(file_len(&c), FILE_HEADER);
        assert_eq!(c.disk_bytes(), FILE_HEADER);
        assert!(!sub.join(COMPACT_FILE).exists());
        assert!(sub.join("other").exists());
    }

    #[test]
    fn a_flipped_byte_anywhere_in_a_record_is_an_error_naming_file_and_offset() {
        let first = body("User-agent: *\nDisallow: /private\n");
        let second = body("Disallow: /");
        let second_at = FILE_HEADER + (RECORD_HEADER + 33) as u64;
        for (host, entry, at) in [(7u64, &first, FILE_HEADER), (8, &second, second_at)] {
            let CachedRobots::Body(b) = entry else {
                unreachable!()
            };
            for i in 0..(RECORD_HEADER + b.len()) as u64 {
                let dir = tempfile::tempdir().unwrap();
                let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
                c.put(7, u64::MAX, &first).unwrap();
                c.put(8, u64::MAX, &second).unwrap();
                c.flush().unwrap();
                flip(c.path(), at + i);
                match c.get(host, 0) {
                    Err(RobotsCacheError::File(FileError::Corrupt { path, offset, what })) => {
                        assert_eq!(path, dir.path().join(DATA_FILE));
                        assert_eq!(offset, at, "byte {i}: {what}");
                    }
                    other => panic!("byte {i} of host {host}'s record: {other:?}"),
                }
                let msg = c.get(host, 0);
                assert!(matches!(msg, Ok(None)), "forgotten after the error");
                assert_eq!(c.damaged_records(), 1);
                // The other record is intact.
                let other = if host == 7 { 8 } else { 7 };
                let want = if host == 7 { &second } else { &first };
                assert_eq!(c.get(other, 0).unwrap().as_ref(), Some(want));
                c.check_invariants();
            }
        }
    }

    #[test]
    fn error_messages_name_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
        c.put(1, u64::MAX, &body("abc")).unwrap();
        c.flush().unwrap();
        flip(c.path(), FILE_HEADER + RECORD_HEADER as u64 + 1);
        let e = c.get(1, 0).unwrap_err().to_string();
        assert!(e.contains(&c.path().display().to_string()), "{e}");
        assert!(e.contains("at byte 16"), "{e}");
        assert!(e.contains("checksum"), "{e}");
    }

    #[test]
    fn a_truncated_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
        c.put(1, u64::MAX, &body("abc")).unwrap();
        c.put(2, u64::MAX, &body("def")).unwrap();
        c.flush().unwrap();
        let f = OpenOptions::new().write(true).open(c.path()).unwrap();
        f.set_len(FILE_HEADER + 40).unwrap();
        assert_eq!(c.get(1, 0).unwrap(), Some(body("abc")));
        let e = c.get(2, 0).unwrap_err();
        assert!(
            matches!(
                e,
                RobotsCacheError::File(FileError::Corrupt { offset: 51, .. })
            ),
            "{e}"
        );
    }

    #[test]
    fn compaction_drops_damaged_records_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(64, 1 << 30)).unwrap();
        for h in 0..50u64 {
            c.put(h, u64::MAX, &body(&format!("record {h}"))).unwrap();
        }
        c.flush().unwrap();
        let len = (RECORD_HEADER + "record 10".len()) as u64;
        flip(c.path(), FILE_HEADER + 10 * len + 3);
        c.compact().unwrap();
        assert_eq!(c.damaged_records(), 1);
        assert_eq!(c.len(), 49);
        for h in 0..50u64 {
            let want = (h != 10).then(|| body(&format!("record {h}")));
            assert_eq!(c.get(h, 0).unwrap(), want);
        }
        c.check_invariants();
    }

    #[test]
    fn many_hosts_in_random_order_with_removals() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(1 << 16, 1 << 16)).unwrap();
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        let n = 20_000u64;
        for i in 0..n {
            c.put(mix(i), u64::MAX, &CachedRobots::AllowAll).unwrap();
        }
        for i in (0..n).step_by(3) {
            c.remove(mix(i));
        }
        for i in (0..n).step_by(6) {
            c.put(mix(i), u64::MAX, &body("back")).unwrap();
        }
        c.check_invariants();
        for i in 0..n {
            let want = if i % 6 == 0 {
                Some(body("back"))
            } else if i % 3 == 0 {
                None
            } else {
                Some(CachedRobots::AllowAll)
            };
            assert_eq!(c.get(mix(i), 0).unwrap(), want, "host {i}");
        }
        let live = c.len() as u64;
        assert_eq!(live, n - n.div_ceil(3) + n.div_ceil(6));
        let per_host = c.index_bytes() as f64 / live as f64;
        assert!(per_host <= 40.0, "{per_host} bytes of index per host");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u64, u64, Option<Vec<u8>>),
        Get(u64),
        Remove(u64),
        Tick(u64),
        Flush,
        Compact,
        ForgetExpired,
    }

    fn op() -> impl Strategy<Value = Op> {
        let host = 0u64..24;
        prop_oneof![
            6 => (host.clone(), 0u64..6_000, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)))
                .prop_map(|(h, e, b)| Op::Put(h, e, b)),
            4 => host.clone().prop_map(Op::Get),
            2 => host.prop_map(Op::Remove),
            2 => (0u64..700).prop_map(Op::Tick),
            1 => Just(Op::Flush),
            1 => Just(Op::Compact),
            1 => Just(Op::ForgetExpired),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Against a map, with time moving forward: every `get` agrees, and `len` lies between
        /// the entries surely alive and all the model's entries.
        #[test]
        fn matches_a_hash_map(
            ops in proptest::collection::vec(op(), 1..200),
            write_buffer in prop_oneof![Just(0usize), Just(200), Just(4096)],
            compact_min_dead in prop_oneof![Just(0u64), Just(1000), Just(1 << 20)],
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut c = RobotsCache::open(dir.path(), options(write_buffer, compact_min_dead)).unwrap();
            let mut model: HashMap<u64, (u64, CachedRobots)> = HashMap::new();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Put(h, e, b) => {
                        let entry = b.map_or(CachedRobots::AllowAll, CachedRobots::Body);
                        c.put(h, e, &entry).unwrap();
                        model.insert(h, (e, entry));
                        // A put compacts first if dead bytes exceed the bound, then may
                        // replace a record: at most two records' worth over it.
                        let bound = c.live_bytes().max(compact_min_dead) + 2 * (32 + 300);
                        prop_assert!(c.dead_bytes() <= bound, "{} dead", c.dead_bytes());
                    }
                    Op::Get(h) => {
                        let want = match model.get(&h) {
                            Some((e, entry)) if now < *e => Some(entry.clone()),
                            _ => {
                                model.remove(&h);
                                None
                            }
                        };
                        prop_assert_eq!(c.get(h, now).unwrap(), want);
                    }
                    Op::Remove(h) => {
                        c.remove(h);
                        model.remove(&h);
                    }
                    Op::Tick(d) => now += d,
                    Op::Flush => c.flush().unwrap(),
                    Op::Compact => c.compact().unwrap(),
                    Op::ForgetExpired => {
                        c.forget_expired(now);
                    }
                }
                c.check_invariants();
                let alive = model.values().filter(|(e, _)| now < *e).count();
                prop_assert!(c.len() >= alive && c.len() <= model.len(), "{} not in {alive}..={}", c.len(), model.len());
            }
            for (h, (e, entry)) in &model {
                let want = (now < *e).then(|| entry.clone());
                prop_assert_eq!(c.get(*h, now).unwrap(), want);
            }
        }

        /// Whatever the file holds, `get` and `compact` never panic, and what `get` returns is
        /// what was stored or an error.
        #[test]
        fn any_file_content_gives_the_entry_or_an_error(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 1..20),
            damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
            truncate in proptest::option::of(any::<prop::sample::Index>()),
            compact_first in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut c = RobotsCache::open(dir.path(), options(256, 1 << 30)).unwrap();
            for (h, b) in bodies.iter().enumerate() {
                c.put(h as u64, u64::MAX, &CachedRobots::Body(b.clone())).unwrap();
            }
            c.flush().unwrap();
            let len = c.disk_bytes() as usize;
            let f = OpenOptions::new().write(true).open(c.path()).unwrap();
            for (at, byte) in damage {
                f.write_all_at(&[byte], at.index(len) as u64).unwrap();
            }
            if let Some(t) = truncate {
                f.set_len(t.index(len) as u64).unwrap();
            }
            if compact_first {
                c.compact().unwrap();
                c.check_invariants();
            }
            for (h, b) in bodies.iter().enumerate() {
                match c.get(h as u64, 0) {
                    Ok(Some(got)) => prop_assert_eq!(got, CachedRobots::Body(b.clone())),
                    Ok(None) => prop_assert!(compact_first, "only a compaction forgets"),
                    Err(RobotsCacheError::File(FileError::Corrupt { path, .. })) => {
                        prop_assert!(!compact_first, "a compaction drops the damaged");
                        prop_assert_eq!(path, dir.path().join(DATA_FILE));
                    }
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
            c.check_invariants();
        }
    }
}
