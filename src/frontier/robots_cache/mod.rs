//! The disk side of the frontier's robots.txt state: [`RobotsCache`], robots.txt bodies keyed
//! by a host's 64-bit id.
//!
//! # What it must serve
//!
//! The frontier keeps per-host state for millions of hosts and evicts idle ones from memory.
//! A host that comes back must get its robots.txt rules back without fetching robots.txt
//! again while its entry is fresh (24 h by default). Parsed rules are large (a
//! `RobotsRules` holds its patterns); the body is what is kept, on disk, and the
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
//! `RobotsCache::forget_expired` (a pass over the index, no I/O), and by compaction (what
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
//! `RobotsCache::damaged_records`); an I/O error leaves the old file in use, unchanged.
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
//! # On-disk format
//!
//! The data file's header and records are laid out byte by byte in the doc of the `format`
//! module (`format.rs`).
//!
//! # Where things are
//!
//! - `mod.rs`: the [`RobotsCache`] type: put, get, forget, flush;
//! - `format.rs`: the data file's format, records encoded, checked and read back;
//! - `index.rs`: the in-memory index and the coarse expiry it keeps;
//! - `compact.rs`: [`RobotsCache::compact`];
//! - `tests.rs`: the unit tests; the figures below come from `tests/robots_cache.rs`.
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

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::durable::{At, FileError, IoAt};
use crate::robots::ROBOTS_MAX_BYTES;

mod compact;
mod format;
mod index;

use format::{
    create_data_file, encode_header, loc_len, loc_offset, pack, read_exact_at, verify,
    RecordHeader, FILE_HEADER, KIND_ALLOW_ALL, KIND_BODY, MAX_END, RECORD_HEADER,
};
use index::{expiry_secs, surely_expired, Index, Slot};

/// The data file, in the cache's directory.
pub(crate) const DATA_FILE: &str = "robots-cache.log";
/// The file a compaction writes before renaming it over [`DATA_FILE`].
pub(crate) const COMPACT_FILE: &str = "robots-cache.log.compact";
/// The largest body stored: the crawler reads at most this much of a robots.txt.
pub(crate) const MAX_BODY: usize = ROBOTS_MAX_BYTES as usize;

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
    /// The robots.txt body to parse (at most `MAX_BODY` bytes).
    Body(Vec<u8>),
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
    /// Files of an earlier run (`DATA_FILE`, `COMPACT_FILE`) are removed, not loaded: the
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
    /// A body larger than `MAX_BODY` is refused ([`RobotsCacheError::TooLarge`]) and the
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
    pub(crate) fn get_with_expiry(
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
    pub(crate) fn forget_expired(&mut self, now_unix_ms: u64) -> usize {
        self.now_hint = self.now_hint.max(now_unix_ms);
        let (count, bytes) = self.index.forget_expired(now_unix_ms);
        self.live_bytes -= bytes;
        count
    }

    /// Hosts with an entry (some may be expired but not yet forgotten).
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
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
    pub(crate) fn dead_bytes(&self) -> u64 {
        self.end() - FILE_HEADER - self.live_bytes
    }

    /// Compactions done so far.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// Damaged records found so far (by `get` or a compaction) and forgotten.
    #[cfg(test)]
    pub(crate) fn damaged_records(&self) -> u64 {
        self.damaged
    }

    /// The data file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
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
        use index::TOMBSTONE;
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

#[cfg(test)]
mod tests;
