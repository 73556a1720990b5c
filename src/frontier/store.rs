//! The disk-backed storage of the frontier's per-host FIFO queues: [`QueueStore`].
//!
//! # What it must serve
//!
//! A crawl of 1e8 URLs over 1e6 or more hosts, in a process whose whole peak RSS stays under
//! 1 GiB with a ~190 MiB seen-set. The frontier gets a few hundred MiB at most, so queued URLs
//! (~230 bytes each in memory as [`QueuedUrl`], ~100 on disk) must live on disk, and what is
//! kept per host must be a few dozen bytes, not a list that grows with the host's queue.
//!
//! # Design
//!
//! One global append-only log, cut into segment files, holds *blocks*; a block holds 1 to
//! `block_items` consecutive URLs of one host. Each host's blocks form a singly linked list on
//! disk, oldest first: every block header has a `next` field pointing at the host's next block.
//! In memory a host costs one fixed-size [`HashMap`] entry (head block, items already popped from
//! it, tail block, unread count on disk, and an optional boxed window): 48 bytes of entry, ~56–110
//! bytes with the map's slack, whatever the length of its queue. So a pop is one positioned read
//! (of a block, cached as the host's window until used up), and a push is an append.
//!
//! Pushes first go to the host's in-memory *tail* (so that a busy host writes blocks of
//! `block_items` URLs, not one block per URL); a tail is written as a block when it is full,
//! when all tails together exceed a sixteenth of the memory budget (all are written), when the
//! budget is exceeded (tails written, then read windows dropped, oldest first), and at a sync.
//! Writing a block links it from the host's previous tail block: the 8-byte `next` field of a
//! block written earlier is set, the one place the log is not append-only. That field is
//! 8-aligned (it never straddles a sector, so it is never torn) and sits outside the block's
//! checksum; it is trusted only when the block it points to has a valid checksum and names the
//! same host, and only followed while the host's unread count says another block exists, so a
//! stale pointer (after a cut tail) is never followed. A link into the write buffer is a store
//! in memory; a link into a block already handed to the OS is *deferred*: kept in a map (block →
//! next, ~32 bytes each, at most an eighth of the budget, else written at once) that reads
//! consult, and written in location order by the next sync's [`PendingSync::write`], off the
//! owner's thread. Measured before this change, those 8-byte `pwrite`s were the largest single
//! cost of a sync's pause (ext4 `write_begin` on random pages).
//!
//! Alternatives considered, and why not:
//! - *A per-host list of block locations in memory* (no patching): with 1e6 hosts receiving URLs
//!   in turn, a memory budget of tens of MiB forces blocks of one or two URLs, so the lists cost
//!   ~8 bytes per queued URL: 800 MB at 1e8. Too much.
//! - *Backward links* (append-only, each block points at its predecessor): reading a host in FIFO
//!   order then means walking its whole chain back from the newest block, and keeping the forward
//!   list in memory for every host that is being crawled, which is the previous case again.
//! - *One file per host or per bucket of hosts*: 1e6 files, or scanning other hosts' records on
//!   every read.
//! - *An embedded B-tree (redb) keyed by (host, sequence)*: it would also write pages in place,
//!   plus a tree of 1e8 keys; not measured here for lack of time (no dependency added).
//!
//! # Durability and recovery
//!
//! A sync has two halves. [`QueueStore::begin_sync`] (the pause: the store is busy) writes every
//! tail as a block, hands the write buffer to the OS and encodes the *table* in memory: the state
//! of every non-empty host (~40 bytes each), its pushed-to-front items included, and the
//! per-segment unread counts. [`PendingSync::write`] (any thread, while pushes and pops go on)
//! sorts and writes the deferred links, fsyncs every segment written or patched before the sync
//! began, checksums the table and writes it atomically (temporary file, fsync, rename, fsync of
//! the directory), then hands its buffer back to the store for the next sync's table (a fresh
//! buffer cost a page fault every 4 KiB of the pause: ~10 ms at 1e6 hosts).
//! [`QueueStore::finish_sync`] then deletes what is no longer needed. [`QueueStore::sync`] does
//! all three. The [`StorePosition`] (generation, end of the log, checksum of the table) is what
//! the caller's checkpoint records.
//!
//! [`QueueStore::reopen_at`] loads that table and then *replays* the log after the position's end:
//! every intact block appended after the sync is linked back onto its host's queue, in log order.
//! The first record that is not intact (short, bad length, bad checksum, sequence not increasing)
//! is taken for a torn write: the log is cut there (the file truncated, any later segment
//! deleted: a sealed segment is not fsynced before the next begins, so after a power cut its end
//! may be missing while the next one's start is there) and the cut is reported, with file and
//! offset, in [`QueueStore::recovery`]. Everything after a position is thus best-effort, never
//! half-loaded. In the synced part of the log (before the position), a block that fails its
//! checksum is found when it is popped: [`QueueStore::pop`] returns [`StoreError::Corrupt`] with
//! the file and the block's offset, and never a half-decoded URL; a segment shorter than the
//! position, a missing segment or table, or a table whose checksum fails make `reopen_at` fail
//! with the file named.
//!
//! [`QueueStore::reopen_discarding_after`] loads the same table but drops the log after the
//! position's end instead of replaying it (later segments deleted, the directory fsynced, the
//! position's segment truncated and fsynced), for a caller that logs its pushes since its
//! checkpoint and pushes them again. Blocks before the position may hold `next` links to
//! dropped blocks (patched by a later sync), and new blocks are then appended where the dropped
//! ones were; such a link is never followed, by the unread-count rule above: a host's count
//! (from the table) ends with its tail block as of the position, and the next block pushed to
//! that host is linked from that tail block (a deferred patch that reads consult, written by
//! the next sync) before the count lets a pop go past it. Until that sync is written, the
//! position's table still describes the disk: the next reopen at it sees the same stale link,
//! and ignores it the same way.
//!
//! Pops are not logged: after a crash and `reopen_at(position)`, every item popped after the sync
//! is queued again (in flight belongs to the frontier), and no item popped before it comes back,
//! because the table records each host's head block and the items popped from it. Items pushed
//! after the sync come back if their block was written (a full tail, or memory pressure) before
//! the crash; items still in a tail are lost, so the caller must log what it pushes since its
//! last checkpoint if a `kill -9` must lose nothing (and then resume with
//! `reopen_discarding_after`, so that what it pushes again is not queued twice).
//!
//! Disk is reclaimed at each sync: the store keeps the tables of the last two syncs (so the
//! caller can still reopen at the previous position if its own checkpoint did not get written)
//! and deletes every segment older than the oldest segment either of them needs (its first
//! segment with unread items, and its log end). A segment is thus kept while any host still has
//! an unread block in it: a host that stops being crawled pins its segments (relocating such
//! blocks is left for later; see the report of issue 4).
//!
//! # On-disk format (all integers little-endian)
//!
//! Directory: `seg-NNNNNNNN.log` (segment number, 8 decimal digits, from 1) and
//! `table-GGGGGGGGGGGGGGGG.bin` (generation, 16 decimal digits, from 1), plus `*.tmp` while a
//! table is written.
//!
//! Segment: a 16-byte header, then blocks back to back, each padded to a multiple of 8 bytes.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQSG` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | segment number |
//!
//! Block, at an 8-aligned offset `o` of a segment; its *location* is `segment << 32 | o`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` in bytes (1 ..= 64 MiB) |
//! | 4 | 4 | item count (≥ 1) |
//! | 8 | 8 | host id |
//! | 16 | 8 | block sequence number, strictly increasing along the log |
//! | 24 | 8 | XXH3-64 of bytes 0..24 followed by the body |
//! | 32 | 8 | `next`: location of the host's next block, 0 if none yet (patched later; not checksummed) |
//! | 40 | `L` | body: the items, one after another |
//! | 40+`L` | 0–7 | zero padding to a multiple of 8 |
//!
//! Item (a [`QueuedUrl`]): `u32` URL length, URL bytes (UTF-8), `u32` depth, `u32` parent length
//! or `0xFFFF_FFFF` for no parent, parent bytes, `u32` redirect hops, `u32` attempts.
//!
//! Table:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQTB` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | zero |
//! | 16 | 8 | generation |
//! | 24 | 8 | log end: location just past the last block written before the sync |
//! | 32 | 8 | next block sequence number |
//! | 40 | 8 | oldest segment this table needs |
//! | 48 | 8 | host count `H` |
//! | 56 | 8 | segment count `S` |
//! | 64 | | `H` host records: host id `u64`, head location `u64` (0 if nothing on disk), items popped from the head block `u32`, front item count `u32`, unread items on disk `u64`, tail location `u64`, then the front items (item format) |
//! | | | `S` segment records: segment number `u64`, unread items in it `u64` |
//! | end−8 | 8 | XXH3-64 of every byte before it |
//!
//! # Measured
//!
//! `STORE_BENCH_KINDS=store,memory cargo bench --bench frontier_store` (2 cores shared with
//! other builds, load average ~4, so wall-clock rates are pessimistic and noisy). N URLs
//! (~80 bytes, plus a ~45-byte parent) are pushed to uniformly random hosts (the worst case
//! for block sizes: one item per block at 1e6 hosts), synced, reopened, then popped host
//! after host with one new push per four pops and a sync every N/10 pops. Default options
//! (64 MiB budget, blocks of ≤ 64, 64 MiB segments).
//!
//! | N, hosts | push/s | pop+push/s | peak RSS | `memory_bytes` max | disk max | sync pause max | sync write max | reopen |
//! |---|---|---|---|---|---|---|---|---|
//! | 1e6, 1e5 | 317 k | 230 k | 47 MiB | 26 MiB | 215 MiB | 54 ms | 126 ms | 24 ms |
//! | 1e6, 1e6 | 385 k | 171 k | 134 MiB | 59 MiB | 236 MiB | 52 ms | 255 ms | 284 ms |
//! | 1e7, 1e5 | 257 k | 217 k | 51 MiB | 29 MiB | 1828 MiB | 121 ms | 1146 ms | 34 ms |
//! | 1e7, 1e6 | 315 k | 233 k | 245 MiB | 110 MiB | 2178 MiB | 137 ms | 1184 ms | 381 ms |
//! | in memory (`VecDeque`s), 1e7, 1e5 | 832 k | 701 k | 2320 MiB | | | | | |
//! | in memory (`VecDeque`s), 1e7, 1e6 | 672 k | 404 k | 2519 MiB | | | | | |
//!
//! From 1e6 to 1e7 URLs the store's memory does not follow N: it is the budget plus ~50–100
//! bytes per non-empty host (the map), plus the table's buffer (~40 bytes per host; during a
//! sync only when these figures were taken, kept between syncs since, see below); peak RSS
//! exceeds `memory_bytes` by the map's growth (old and new arrays at once), the table and
//! allocator slack. At 1e8 URLs over 1e6 hosts expect the same ~250 MiB; the in-memory queues would need ~23 GiB. Rates stay flat (per-operation costs do
//! not depend on N: one positioned read per block popped, from the page cache here). Disk
//! grows linearly, ~215 bytes per queued URL in one-item blocks (40-byte header, padding,
//! parent), so ~21 GB if 1e8 URLs were queued at once; consumed segments are reclaimed (the
//! "at end" disk was 0–10 MiB: the active segment). Sync pause grows with the hosts (table
//! encoding) and the tails (a sixteenth of the budget); sync write with what was written
//! since the previous sync; reopen with the hosts (table load), not the URLs.
//!
//! The pause of a sync with 1e6 non-empty hosts, `cargo bench --bench frontier_store -- pause
//! 1000000` (4e6 URLs queued, then 11 rounds of 1e5 pops and pushes, 1000 items in flight;
//! medians, CPU time of the thread, since wall time on the loaded machine was 1.2–2× that):
//! the table was ~95–115 ms of CPU (a `HashMap` lookup of the in-flight items and a read of
//! the box per host, page faults of a fresh 40 MB buffer, the checksum and the sort of ~1e5
//! deferred links), writing the tails ~15 ms. Now the table is ~40–50 ms: one fixed 40-byte
//! record per host with a front count in the entry, in-flight hosts found through a bit
//! filter, the buffer reused, the checksum and the sort moved to [`PendingSync::write`]. What
//! is left is mostly waiting for memory: the map's array (~96 MB at 1e6 hosts, 48-byte
//! buckets at half load after its last doubling) is read once per sync.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

use super::QueuedUrl;

const SEGMENT_MAGIC: [u8; 8] = *b"CRWLFQSG";
const TABLE_MAGIC: [u8; 8] = *b"CRWLFQTB";
const VERSION: u32 = 1;
const SEGMENT_HEADER: u64 = 16;
const BLOCK_HEADER: usize = 40;
const NEXT_FIELD: u64 = 32;
const MAX_BODY: u32 = 64 << 20;
const NO_PARENT: u32 = u32::MAX;
/// Memory of one deferred patch in its map, slack and control byte included.
const PATCH_BYTES: u64 = 32;
/// Tails hold at most 1/TAIL_SHARE of the memory budget: all are written when a sync begins,
/// so this bounds its pause (a quarter was measured at 100–390 ms of pause on a loaded machine).
const TAIL_SHARE: u64 = 16;

/// Sizes and budgets of a [`QueueStore`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Budget for URLs held in memory (tails, read windows, pushed-to-front items), the write
    /// buffer and the deferred links. Tails take at most a sixteenth of it (they are all written
    /// at a sync, so this bounds the sync's pause), deferred links an eighth. Per-host
    /// bookkeeping is counted by [`QueueStore::memory_bytes`] but not here.
    pub memory: u64,
    /// Most items in one block; a host's tail is written when it holds this many.
    pub block_items: usize,
    /// A new segment is started when the current one reaches this size.
    pub segment_bytes: u64,
    /// The log's write buffer.
    pub write_buffer: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            memory: 64 << 20,
            block_items: 64,
            segment_bytes: 64 << 20,
            write_buffer: 1 << 20,
        }
    }
}

/// What a checkpoint records to reopen the store as of a [`QueueStore::sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorePosition {
    /// The table file's generation.
    pub generation: u64,
    /// Location just past the last block written before the sync.
    pub log_end: u64,
    /// XXH3-64 of the table file (its trailer).
    pub table_checksum: u64,
}

/// What opening the store found after the position it opened at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Blocks appended after the position and linked back.
    pub blocks_replayed: u64,
    /// Items in them.
    pub items_replayed: u64,
    /// Where the log was cut, and why (a torn write after a crash).
    pub cut: Option<(PathBuf, u64, String)>,
    /// Tables newer than the position, deleted.
    pub tables_discarded: u64,
    /// Bytes of log after the position dropped by [`QueueStore::reopen_discarding_after`]
    /// (intact blocks and anything torn alike; the whole later segments included).
    pub discarded_bytes: u64,
    /// Segments after the position's deleted by [`QueueStore::reopen_discarding_after`].
    pub discarded_segments: u64,
}

/// Why the store could not be opened, read or written. File errors name the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is corrupt at byte {offset}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{} is missing: {what}", path.display())]
    Missing { path: PathBuf, what: String },
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn corrupt(path: &Path, offset: u64, what: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        offset,
        what: what.into(),
    }
}

fn loc(segment: u32, offset: u64) -> u64 {
    (segment as u64) << 32 | offset
}
fn loc_segment(l: u64) -> u32 {
    (l >> 32) as u32
}
fn loc_offset(l: u64) -> u64 {
    l & 0xFFFF_FFFF
}

fn segment_path(dir: &Path, segment: u32) -> PathBuf {
    dir.join(format!("seg-{segment:08}.log"))
}
fn table_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("table-{generation:016}.bin"))
}

/// Memory an item costs while held: the struct and its strings.
fn item_bytes(item: &QueuedUrl) -> u64 {
    (std::mem::size_of::<QueuedUrl>()
        + item.url.capacity()
        + item.parent.as_ref().map_or(0, |p| p.capacity())) as u64
}

fn encode_item(out: &mut Vec<u8>, item: &QueuedUrl) {
    // Destructured so that a new field fails to compile here instead of being dropped.
    let QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops,
        attempts,
    } = item;
    out.extend_from_slice(&(url.len() as u32).to_le_bytes());
    out.extend_from_slice(url.as_bytes());
    out.extend_from_slice(&depth.to_le_bytes());
    match parent {
        Some(p) => {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            out.extend_from_slice(p.as_bytes());
        }
        None => out.extend_from_slice(&NO_PARENT.to_le_bytes()),
    }
    out.extend_from_slice(&redirect_hops.to_le_bytes());
    out.extend_from_slice(&attempts.to_le_bytes());
}

/// A cursor over bytes being decoded; errors say what was expected.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() - self.at < n {
            return Err(format!(
                "{n} bytes expected at +{}, {} left",
                self.at,
                self.bytes.len() - self.at
            ));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn string(&mut self, len: u32) -> Result<String, String> {
        let b = self.take(len as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| "a string is not UTF-8".to_string())
    }
    fn item(&mut self) -> Result<QueuedUrl, String> {
        let len = self.u32()?;
        let url = self.string(len)?;
        let depth = self.u32()?;
        let plen = self.u32()?;
        let parent = if plen == NO_PARENT {
            None
        } else {
            Some(self.string(plen)?)
        };
        Ok(QueuedUrl {
            url,
            depth,
            parent,
            redirect_hops: self.u32()?,
            attempts: self.u32()?,
        })
    }
}

/// A decoded block header.
struct BlockHeader {
    body_len: u32,
    count: u32,
    host: u64,
    seq: u64,
    checksum: u64,
    next: u64,
}

impl BlockHeader {
    fn parse(h: &[u8]) -> BlockHeader {
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        BlockHeader {
            body_len: u32_at(0),
            count: u32_at(4),
            host: u64_at(8),
            seq: u64_at(16),
            checksum: u64_at(24),
            next: u64_at(32),
        }
    }
    /// Bytes the block takes in its segment, padding included.
    fn span(&self) -> u64 {
        (BLOCK_HEADER as u64 + self.body_len as u64).next_multiple_of(8)
    }
}

fn block_checksum(header: &[u8], body: &[u8]) -> u64 {
    let mut h = Xxh3Default::new();
    h.update(&header[..24]);
    h.update(body);
    h.digest()
}

/// The decoded items of a host's head block, from the first one not popped yet.
#[derive(Debug)]
struct Window {
    items: VecDeque<QueuedUrl>,
    next: u64,
}

/// What a host holds in memory, boxed so that a host without any costs 8 bytes.
#[derive(Debug, Default)]
struct HostMem {
    /// Items pushed to the front (retries): popped before anything else.
    front: VecDeque<QueuedUrl>,
    /// The head block's remaining items, if read.
    window: Option<Window>,
    /// Items pushed but not written to disk yet: popped after everything on disk.
    tail: Vec<QueuedUrl>,
}

impl HostMem {
    fn is_empty(&self) -> bool {
        self.front.is_empty() && self.window.is_none() && self.tail.is_empty()
    }
}

/// A non-empty host's queue: what is on disk, and what is in memory.
#[derive(Debug, Default)]
struct HostEntry {
    /// Location of the oldest block with unread items (0 if `disk_unread` is 0).
    head: u64,
    /// Items of the head block already popped.
    head_skip: u32,
    /// Items in `mem.front` (kept here, in what was padding, so that encoding the table
    /// does not read every host's box).
    front: u32,
    /// Location of the newest block (valid while `disk_unread` > 0).
    tail: u64,
    /// Items on disk not popped yet.
    disk_unread: u64,
    mem: Option<Box<HostMem>>,
}

impl HostEntry {
    fn len(&self) -> u64 {
        self.disk_unread
            + self
                .mem
                .as_ref()
                .map_or(0, |m| (m.front.len() + m.tail.len()) as u64)
    }
}

/// Per-host FIFO queues of [`QueuedUrl`] whose bulk lives in a directory; see the module doc.
pub struct QueueStore {
    dir: PathBuf,
    options: StoreOptions,
    hosts: HashMap<u64, HostEntry>,
    total: u64,
    /// Bytes of items held in memory (tails, windows, fronts), see [`item_bytes`].
    item_mem: u64,
    /// The part of `item_mem` in tails.
    tail_mem: u64,
    /// Hosts that hold a box, oldest first (may hold stale entries).
    boxed: VecDeque<u64>,
    boxes: u64,
    /// Hosts with a non-empty tail (may hold stale entries or duplicates).
    tails: Vec<u64>,
    /// Open segment files.
    files: BTreeMap<u32, File>,
    /// Bytes of each segment on disk (the active one: up to `wbuf_start`).
    seg_len: BTreeMap<u32, u64>,
    /// Unread items in each segment.
    live: BTreeMap<u32, u64>,
    active: u32,
    /// Offset in the active segment where `wbuf` starts.
    wbuf_start: u64,
    wbuf: Vec<u8>,
    next_seq: u64,
    /// Segments appended to or patched since the last sync.
    dirty: std::collections::BTreeSet<u32>,
    generation: u64,
    /// (generation, oldest segment needed) of the tables kept, oldest first.
    retained: VecDeque<(u64, u32)>,
    table_bytes: u64,
    /// (generation, oldest segment needed, table bytes, patch epoch) of a sync begun, not
    /// finished.
    pending: Option<(u64, u32, u64, u64)>,
    /// Links to write into blocks already handed to the OS: block → (next, epoch).
    patches: HashMap<u64, (u64, u64)>,
    /// Incremented at each sync: the patches a sync writes are those of earlier epochs.
    patch_epoch: u64,
    /// Set while `begin_sync` writes the tails.
    in_begin_sync: bool,
    recovery: RecoveryReport,
    scratch: Vec<u8>,
    /// The buffer of the last table written, handed back by [`PendingSync::write`] for the
    /// next sync to encode into: a fresh one costs a page fault every 4 KiB in the pause.
    table_buf: Arc<Mutex<Vec<u8>>>,
}

/// The slow half of a sync, detached from the store so that it can run on another thread:
/// see [`QueueStore::begin_sync`].
pub struct PendingSync {
    dir: PathBuf,
    /// Deferred `next` links: (block, next), in no particular order.
    patches: Vec<(u64, u64)>,
    /// Segments that may hold a block to link from, or were written since the last sync:
    /// (number, path, file), by number.
    files: Vec<(u32, PathBuf, File)>,
    /// Segments written since the last sync.
    written: Vec<u32>,
    /// The table, without its checksum trailer.
    table: Vec<u8>,
    generation: u64,
    log_end: u64,
    /// XXH3-64 of `table`, computed off the pause.
    checksum: OnceLock<u64>,
    /// Where `table` goes once written, for the store's next sync.
    table_buf: Arc<Mutex<Vec<u8>>>,
}

impl PendingSync {
    /// The position this sync will have made durable. The first call computes the table's
    /// checksum (a pass over the table, ~40 bytes per host), which [`PendingSync::write`]
    /// does anyway.
    pub fn position(&self) -> StorePosition {
        StorePosition {
            generation: self.generation,
            log_end: self.log_end,
            table_checksum: *self.checksum.get_or_init(|| xxh3_64(&self.table)),
        }
    }

    /// Writes the deferred links between blocks (8 bytes each, in location order), fsyncs the
    /// segments written or patched before the sync began, then writes the table
    /// atomically (temporary file, fsync, rename, fsync of the directory).
    pub fn write(mut self) -> Result<StorePosition, StoreError> {
        let position = self.position();
        self.patches.sort_unstable();
        let mut fsync: Vec<bool> = self
            .files
            .iter()
            .map(|(s, _, _)| self.written.contains(s))
            .collect();
        let mut i = 0;
        for &(block, next) in &self.patches {
            let s = loc_segment(block);
            while i < self.files.len() && self.files[i].0 < s {
                i += 1;
            }
            let Some((_, path, f)) = self.files.get(i).filter(|(n, _, _)| *n == s) else {
                return Err(StoreError::Missing {
                    path: segment_path(&self.dir, s),
                    what: "a block to link from is in it".into(),
                });
            };
            f.write_all_at(&next.to_le_bytes(), loc_offset(block) + NEXT_FIELD)
                .map_err(io("write", path))?;
            fsync[i] = true;
        }
        for ((_, path, f), _) in self.files.iter().zip(&fsync).filter(|(_, &y)| y) {
            f.sync_data().map_err(io("fsync", path))?;
        }
        let path = table_path(&self.dir, position.generation);
        let tmp = path.with_extension("tmp");
        let mut file = File::create(&tmp).map_err(io("create", &tmp))?;
        file.write_all(&self.table).map_err(io("write", &tmp))?;
        file.write_all(&position.table_checksum.to_le_bytes())
            .map_err(io("write", &tmp))?;
        file.sync_all().map_err(io("fsync", &tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io("rename", &tmp))?;
        sync_dir(&self.dir)?;
        let mut table = self.table;
        table.clear();
        if let Ok(mut slot) = self.table_buf.lock() {
            *slot = table;
        }
        Ok(position)
    }
}

impl QueueStore {
    /// Opens the store in `dir`, creating it if it holds none, or recovering the state of the
    /// newest table plus the intact blocks appended after it.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<QueueStore, StoreError> {
        fs::create_dir_all(dir).map_err(io("create", dir))?;
        let (_, tables) = list_dir(dir)?;
        match tables.last() {
            None => Self::create(dir, options),
            Some(&generation) => {
                let checksum = read_table_checksum(&table_path(dir, generation))?;
                let log_end = read_table_header(&table_path(dir, generation))?.log_end;
                Self::reopen_at(
                    dir,
                    options,
                    StorePosition {
                        generation,
                        log_end,
                        table_checksum: checksum,
                    },
                )
            }
        }
    }

    fn empty(dir: &Path, options: StoreOptions) -> QueueStore {
        QueueStore {
            dir: dir.to_path_buf(),
            wbuf: Vec::with_capacity(options.write_buffer),
            options,
            hosts: HashMap::new(),
            total: 0,
            item_mem: 0,
            tail_mem: 0,
            boxed: VecDeque::new(),
            boxes: 0,
            tails: Vec::new(),
            files: BTreeMap::new(),
            seg_len: BTreeMap::new(),
            live: BTreeMap::new(),
            active: 0,
            wbuf_start: 0,
            next_seq: 1,
            dirty: Default::default(),
            generation: 0,
            retained: VecDeque::new(),
            table_bytes: 0,
            pending: None,
            patches: HashMap::new(),
            patch_epoch: 0,
            in_begin_sync: false,
            recovery: RecoveryReport::default(),
            scratch: Vec::new(),
            table_buf: Arc::default(),
        }
    }

    fn create(dir: &Path, options: StoreOptions) -> Result<QueueStore, StoreError> {
        let (segments, _) = list_dir(dir)?;
        for s in segments {
            let p = segment_path(dir, s);
            fs::remove_file(&p).map_err(io("remove", &p))?;
        }
        let mut store = Self::empty(dir, options);
        store.start_segment(1)?;
        // An empty table from the start, so that blocks written before the first sync are
        // replayed like any others.
        store.sync()?;
        Ok(store)
    }

    /// Reopens the store as of `position` (returned by [`QueueStore::sync`]), plus every intact
    /// block appended after it; items popped after it are queued again. Tables newer than the
    /// position are deleted.
    pub fn reopen_at(
        dir: &Path,
        options: StoreOptions,
        position: StorePosition,
    ) -> Result<QueueStore, StoreError> {
        Self::reopen(dir, options, position, false)
    }

    /// Checks, without opening the store, that the table of `position` is in `dir` and whole
    /// (its checksum is the position's): what a checkpoint loader verifies before it uses
    /// anything of a checkpoint.
    pub fn check_position(dir: &Path, position: StorePosition) -> Result<(), StoreError> {
        let path = table_path(dir, position.generation);
        let bytes = fs::read(&path).map_err(io("read", &path))?;
        if bytes.len() < 72 {
            let what = format!("{} bytes, shorter than a table", bytes.len());
            return Err(corrupt(&path, 0, what));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 8);
        let stored = u64::from_le_bytes(trailer.try_into().unwrap_or_default());
        if xxh3_64(body) != stored || stored != position.table_checksum {
            let what = "checksum mismatch; the table was damaged or is not this position's";
            return Err(corrupt(&path, 0, what));
        }
        Ok(())
    }

    /// Reopens the store exactly as of `position`: like [`QueueStore::reopen_at`], but every
    /// block appended after the position is dropped instead of replayed, for a caller that
    /// logs its own pushes since its checkpoint and pushes them again (they would otherwise be
    /// queued twice). The log is cut at the position's log end: later segments are deleted
    /// (newest first) and the directory fsynced, then the position's segment is truncated and
    /// fsynced, before anything new is written there. What was dropped is reported in
    /// [`RecoveryReport::discarded_bytes`] and [`RecoveryReport::discarded_segments`], not as
    /// a `cut` (it is not damage). Items popped after the position are queued again, and the
    /// items in flight given to [`QueueStore::begin_sync_with`] come first, as with `reopen_at`.
    ///
    /// The links (`next` fields) that blocks before the position got to dropped blocks are
    /// never followed: a host's unread count, from the table, ends with its tail block as of
    /// the position, and a block pushed to that host afterwards overwrites its tail's link
    /// before the count allows following it (see "Durability and recovery" in the module doc).
    pub fn reopen_discarding_after(
        dir: &Path,
        options: StoreOptions,
        position: StorePosition,
    ) -> Result<QueueStore, StoreError> {
        Self::reopen(dir, options, position, true)
    }

    fn reopen(
        dir: &Path,
        options: StoreOptions,
        position: StorePosition,
        discard: bool,
    ) -> Result<QueueStore, StoreError> {
        let tpath = table_path(dir, position.generation);
        if !tpath.exists() {
            return Err(StoreError::Missing {
                path: tpath,
                what: "the table of this position was removed (a newer sync's GC, or lost)".into(),
            });
        }
        let mut store = Self::empty(dir, options);
        let header = store.load_table(&tpath, position)?;
        let (segments, tables) = list_dir(dir)?;
        for &g in tables.iter().filter(|&&g| g > position.generation) {
            let p = table_path(dir, g);
            fs::remove_file(&p).map_err(io("remove", &p))?;
            store.recovery.tables_discarded += 1;
        }
        for &g in tables.iter().filter(|&&g| g <= position.generation) {
            let h = if g == position.generation {
                header.clone()
            } else {
                match read_table_header(&table_path(dir, g)) {
                    Ok(h) => h,
                    Err(_) => continue,
                }
            };
            store.retained.push_back((g, h.oldest_needed));
            store.table_bytes += fs::metadata(table_path(dir, g)).map_or(0, |m| m.len());
        }
        while store.retained.len() > 2 {
            store.retained.pop_front();
        }
        store.generation = tables.last().copied().unwrap_or(0).max(position.generation);
        // Every segment the table needs must be there.
        let end_seg = loc_segment(header.log_end);
        for (&s, &n) in &store.live {
            if n > 0 && !segments.contains(&s) {
                let p = segment_path(dir, s);
                return Err(StoreError::Missing {
                    path: p,
                    what: format!("the table says {n} unread items are in it"),
                });
            }
        }
        if !segments.contains(&end_seg) {
            return Err(StoreError::Missing {
                path: segment_path(dir, end_seg),
                what: "the table's log end is in it".into(),
            });
        }
        let mut segments = segments;
        if discard {
            // Newest first, so that a crash in the middle leaves a prefix of the log (the replay
            // of a later reopen_at stops at the first missing segment, not only at a bad record).
            while let Some(&s) = segments.last().filter(|&&s| s > end_seg) {
                let p = segment_path(dir, s);
                let len = fs::metadata(&p).map_err(io("stat", &p))?.len();
                fs::remove_file(&p).map_err(io("remove", &p))?;
                store.recovery.discarded_bytes += len;
                store.recovery.discarded_segments += 1;
                segments.pop();
            }
            if store.recovery.discarded_segments > 0 {
                // Durable before the truncation below: else a power cut could bring the later
                // segments back after a shortened one, a gap that a replay would skip over.
                sync_dir(dir)?;
            }
        }
        let last = segments.last().copied().unwrap_or(end_seg);
        for &s in &segments.clone() {
            if s < header.oldest_needed.min(end_seg) {
                // Kept for an older table only: counted, deleted by a later sync's GC.
                let p = segment_path(dir, s);
                let len = fs::metadata(&p).map_err(io("stat", &p))?.len();
                store.seg_len.insert(s, len);
                continue;
            }
            match store.open_segment(s) {
                Ok(()) => {}
                // A segment started just before a crash whose header did not reach the disk:
                // a torn write like any other, cut.
                Err(StoreError::Corrupt { path, offset, what }) if s == last && s > end_seg => {
                    fs::remove_file(&path).map_err(io("remove", &path))?;
                    store.recovery.cut = Some((path, offset, what));
                    segments.pop();
                }
                Err(e) => return Err(e),
            }
        }
        if discard {
            store.discard_after(header.log_end)?;
        } else {
            store.replay(header.log_end, &segments)?;
        }
        Ok(store)
    }

    /// Truncates the log at `log_end` (its segment is the last one left) and makes that
    /// segment the active one.
    fn discard_after(&mut self, log_end: u64) -> Result<(), StoreError> {
        let (s, end) = (loc_segment(log_end), loc_offset(log_end));
        let path = segment_path(&self.dir, s);
        let len = self.seg_len[&s];
        if end > len {
            return Err(corrupt(
                &path,
                len,
                format!("the table's log end is at byte {end}, the file ends at {len}"),
            ));
        }
        if end < len {
            let file = self.files.get(&s).expect("opened");
            file.set_len(end).map_err(io("truncate", &path))?;
            // Before anything is appended where the dropped blocks were: else a power cut could
            // keep the new blocks' first pages and the dropped ones after them, which a replay
            // would link back (their sequence numbers still increase).
            file.sync_data().map_err(io("fsync", &path))?;
            self.recovery.discarded_bytes += len - end;
        }
        self.seg_len.insert(s, end);
        self.active = s;
        self.wbuf_start = end;
        Ok(())
    }

    /// The store's state at the time it was opened: what was replayed or cut.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Queues `item` at the back of `host`'s queue.
    pub fn push(&mut self, host: u64, item: &QueuedUrl) -> Result<(), StoreError> {
        let item = item.clone();
        let bytes = item_bytes(&item);
        self.item_mem += bytes;
        self.tail_mem += bytes;
        self.total += 1;
        if self.tails.len() > 2 * self.boxes as usize + 1024 {
            self.compact_lists();
        }
        let block_items = self.options.block_items;
        let mem = self.boxed_mem(host);
        let was_empty = mem.tail.is_empty();
        mem.tail.push(item);
        let full = mem.tail.len() >= block_items;
        if was_empty {
            self.tails.push(host);
        }
        if full {
            self.write_tail(host)?;
        }
        if self.tail_mem > self.options.memory / TAIL_SHARE {
            // Tails are bounded to a share of the budget: a sync writes them all, so this
            // bounds its pause.
            self.write_all_tails()?;
        }
        if self.item_mem + self.wbuf.capacity() as u64 > self.options.memory {
            self.relieve()?;
        }
        Ok(())
    }

    /// Puts `item` at the front of `host`'s queue (a retry goes first). It stays in memory
    /// until popped, and is written into the table at each sync.
    pub fn push_front(&mut self, host: u64, item: QueuedUrl) {
        self.item_mem += item_bytes(&item);
        self.total += 1;
        self.boxed_mem(host).front.push_front(item);
        self.hosts.get_mut(&host).expect("just boxed").front += 1;
    }

    /// Takes the oldest item of `host`'s queue (pushed-to-front items first).
    pub fn pop(&mut self, host: u64) -> Result<Option<QueuedUrl>, StoreError> {
        let Some(entry) = self.hosts.get_mut(&host) else {
            return Ok(None);
        };
        if let Some(item) = entry.mem.as_mut().and_then(|m| m.front.pop_front()) {
            entry.front -= 1;
            return Ok(Some(self.popped_from_memory(host, item)));
        }
        if entry.disk_unread > 0 {
            self.ensure_window(host)?;
            let entry = self.hosts.get_mut(&host).expect("host present");
            let mem = entry.mem.as_mut().expect("window just read");
            let window = mem.window.as_mut().expect("window just read");
            let item = window.items.pop_front().expect("window not empty");
            self.item_mem -= item_bytes(&item);
            self.total -= 1;
            entry.disk_unread -= 1;
            *self.live.entry(loc_segment(entry.head)).or_default() -= 1;
            if window.items.is_empty() {
                let next = window.next;
                mem.window = None;
                if entry.disk_unread > 0 {
                    entry.head = next;
                } else {
                    entry.head = 0;
                    entry.tail = 0;
                }
                entry.head_skip = 0;
            } else {
                entry.head_skip += 1;
            }
            self.forget_if_empty(host);
            return Ok(Some(item));
        }
        let Some(mem) = entry.mem.as_mut() else {
            return Ok(None);
        };
        if mem.tail.is_empty() {
            return Ok(None);
        }
        let item = mem.tail.remove(0);
        self.tail_mem -= item_bytes(&item);
        Ok(Some(self.popped_from_memory(host, item)))
    }

    /// The item [`QueueStore::pop`] would return next, without taking it (it may read the
    /// host's head block from disk).
    pub fn peek(&mut self, host: u64) -> Result<Option<&QueuedUrl>, StoreError> {
        let Some(entry) = self.hosts.get(&host) else {
            return Ok(None);
        };
        let in_front = entry.mem.as_ref().is_some_and(|m| !m.front.is_empty());
        if !in_front && entry.disk_unread > 0 {
            self.ensure_window(host)?;
        }
        let Some(mem) = self.hosts.get(&host).and_then(|e| e.mem.as_ref()) else {
            return Ok(None);
        };
        Ok(mem
            .front
            .front()
            .or_else(|| mem.window.as_ref().and_then(|w| w.items.front()))
            .or_else(|| mem.tail.first()))
    }

    /// Reads `host`'s head block into its window unless it is there (the host has unread
    /// items on disk).
    fn ensure_window(&mut self, host: u64) -> Result<(), StoreError> {
        let entry = self.hosts.get(&host).expect("host present");
        let has_window = entry
            .mem
            .as_ref()
            .is_some_and(|m| m.window.as_ref().is_some_and(|w| !w.items.is_empty()));
        if !has_window {
            let (head, skip) = (entry.head, entry.head_skip);
            let window = self.read_window(host, head, skip)?;
            self.item_mem += window.items.iter().map(item_bytes).sum::<u64>();
            self.boxed_mem(host).window = Some(window);
        }
        Ok(())
    }

    fn popped_from_memory(&mut self, host: u64, item: QueuedUrl) -> QueuedUrl {
        self.item_mem -= item_bytes(&item);
        self.total -= 1;
        self.forget_if_empty(host);
        item
    }

    /// Drops an empty box, and a host with nothing queued.
    fn forget_if_empty(&mut self, host: u64) {
        let Some(entry) = self.hosts.get_mut(&host) else {
            return;
        };
        if entry.mem.as_ref().is_some_and(|m| m.is_empty()) {
            entry.mem = None;
            self.boxes -= 1;
        }
        if entry.disk_unread == 0 && entry.mem.is_none() {
            self.hosts.remove(&host);
        }
    }

    /// Items queued for `host`.
    pub fn len(&self, host: u64) -> u64 {
        self.hosts.get(&host).map_or(0, |e| e.len())
    }

    /// Items queued for all hosts.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Hosts with something queued.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Bytes held in memory now: the host map (capacity × entry, control bytes included), the
    /// boxes, the items in memory (structs and strings), the write buffer and the buffer of the
    /// last table (kept for the next sync's; not counted while a sync holds it). Vector slack
    /// beyond the items' length is not counted.
    pub fn memory_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<(u64, HostEntry)>() as u64 + 1;
        self.hosts.capacity() as u64 * entry
            + self.boxes * std::mem::size_of::<HostMem>() as u64
            + self.item_mem
            + self.wbuf.capacity() as u64
            + (self.boxed.capacity() + self.tails.capacity()) as u64 * 8
            + self.patches.capacity() as u64 * PATCH_BYTES
            + self.table_buf.lock().map_or(0, |b| b.capacity()) as u64
    }

    /// Bytes of the store's files on disk.
    pub fn disk_bytes(&self) -> u64 {
        let segs: u64 = self.seg_len.values().sum();
        segs + self.wbuf.len() as u64 + self.table_bytes
    }

    /// Writes every tail as a block and hands the log to the operating system (no fsync):
    /// everything pushed so far then survives a `kill -9` of the process (not a power cut) and
    /// is replayed by `reopen_at` a position older than it. Call it every second or so: each
    /// call cuts every host's tail into a block, so more often means smaller blocks.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.write_all_tails()?;
        self.flush_wbuf()
    }

    /// Every host with something queued, and how many items.
    pub fn hosts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hosts.iter().map(|(&h, e)| (h, e.len()))
    }

    /// Makes everything pushed so far durable and returns the position a checkpoint records:
    /// [`QueueStore::begin_sync`], [`PendingSync::write`] and [`QueueStore::finish_sync`] in a row.
    pub fn sync(&mut self) -> Result<StorePosition, StoreError> {
        let pending = self.begin_sync()?;
        let position = pending.write()?;
        self.finish_sync(position)?;
        Ok(position)
    }

    /// The fast half of a sync, which must run where the store is owned: writes every tail as
    /// a block, hands the log to the operating system, and encodes the table in memory (about
    /// 40 bytes per host with something queued). The returned [`PendingSync`] does the slow
    /// half (fsyncs, table file) and can be sent to another thread while pushes and pops go
    /// on; then call [`QueueStore::finish_sync`] with its position. One at a time: finish a
    /// sync before beginning the next. If the write fails, the store's durability is unknown:
    /// stop, and reopen at the last position that was written.
    pub fn begin_sync(&mut self) -> Result<PendingSync, StoreError> {
        self.begin_sync_with(&[])
    }

    /// [`QueueStore::begin_sync`], recording `in_flight` (items popped and not done with, by
    /// host) in the table at the front of their hosts' queues, so that reopening at this
    /// position queues them again first; the store itself is unchanged. This is how "in flight
    /// belongs to the frontier" is kept for items popped before the sync.
    pub fn begin_sync_with(
        &mut self,
        in_flight: &[(u64, QueuedUrl)],
    ) -> Result<PendingSync, StoreError> {
        self.in_begin_sync = true;
        let written = self.write_all_tails();
        self.in_begin_sync = false;
        written?;
        self.flush_wbuf()?;
        // The deferred links, unsorted: `PendingSync::write` sorts them, off the pause.
        let mut patches = Vec::with_capacity(self.patches.len());
        let (mut lo, mut hi) = (u32::MAX, 0);
        for (&block, &(next, _)) in &self.patches {
            patches.push((block, next));
            lo = lo.min(loc_segment(block));
            hi = hi.max(loc_segment(block));
        }
        let written = std::mem::take(&mut self.dirty);
        let mut files = Vec::new();
        for (&s, f) in &self.files {
            if (lo..=hi).contains(&s) || written.contains(&s) {
                let path = segment_path(&self.dir, s);
                let f = f.try_clone().map_err(io("open", &path))?;
                files.push((s, path, f));
            }
        }
        if let Some(&s) = written.iter().find(|s| !self.files.contains_key(s)) {
            return Err(StoreError::Missing {
                path: segment_path(&self.dir, s),
                what: "it was written since the last sync".into(),
            });
        }
        let epoch = self.patch_epoch;
        self.patch_epoch += 1;
        self.generation += 1;
        let generation = self.generation;
        let log_end = loc(self.active, self.wbuf_start);
        let oldest_needed = self
            .live
            .iter()
            .find(|(_, &n)| n > 0)
            .map_or(self.active, |(&s, _)| s)
            .min(self.active);
        let table = self.encode_table(generation, log_end, oldest_needed, in_flight);
        self.pending = Some((generation, oldest_needed, table.len() as u64 + 8, epoch));
        Ok(PendingSync {
            dir: self.dir.clone(),
            patches,
            files,
            written: written.into_iter().collect(),
            table,
            generation,
            log_end,
            checksum: OnceLock::new(),
            table_buf: self.table_buf.clone(),
        })
    }

    /// Records that the table of `position` is on disk (its [`PendingSync::write`] returned it),
    /// then deletes the tables and segments no longer needed: the store keeps the last two
    /// tables and the segments they need (see the module doc).
    pub fn finish_sync(&mut self, position: StorePosition) -> Result<(), StoreError> {
        let Some((generation, oldest_needed, len, epoch)) = self.pending.take() else {
            return Ok(());
        };
        if generation != position.generation {
            self.pending = Some((generation, oldest_needed, len, epoch));
            return Ok(());
        }
        // The patches that write applied are on disk now.
        self.patches.retain(|_, &mut (_, e)| e > epoch);
        self.table_bytes += len;
        self.retained.push_back((generation, oldest_needed));
        while self.retained.len() > 2 {
            let (g, _) = self.retained.pop_front().expect("non-empty");
            let p = table_path(&self.dir, g);
            let len = fs::metadata(&p).map_or(0, |m| m.len());
            fs::remove_file(&p).map_err(io("remove", &p))?;
            self.table_bytes -= len;
        }
        // An active segment with nothing unread in it is sealed, so that it can be reclaimed
        // once the tables kept no longer end in it.
        if self.live.get(&self.active).copied().unwrap_or(0) == 0
            && self.wbuf_start + self.wbuf.len() as u64 > self.options.segment_bytes / 4
        {
            self.roll_segment()?;
        }
        self.gc()
    }

    /// Deletes the segments older than what every retained table needs.
    fn gc(&mut self) -> Result<(), StoreError> {
        let keep_from = self
            .retained
            .iter()
            .map(|&(_, s)| s)
            .min()
            .unwrap_or(self.active);
        let doomed: Vec<u32> = self
            .seg_len
            .keys()
            .copied()
            .filter(|&s| s < keep_from && s != self.active)
            .collect();
        for s in doomed {
            debug_assert_eq!(self.live.get(&s).copied().unwrap_or(0), 0);
            let p = segment_path(&self.dir, s);
            self.files.remove(&s);
            self.seg_len.remove(&s);
            self.live.remove(&s);
            fs::remove_file(&p).map_err(io("remove", &p))?;
        }
        Ok(())
    }

    /// Writes tails, then drops read windows oldest first, until memory is under half the
    /// budget or no window is left.
    fn relieve(&mut self) -> Result<(), StoreError> {
        self.write_all_tails()?;
        let target = self.options.memory / 2;
        let mut left = self.boxed.len();
        while left > 0 && self.item_mem + self.wbuf.capacity() as u64 > target {
            left -= 1;
            let Some(host) = self.boxed.pop_front() else {
                break;
            };
            let Some(entry) = self.hosts.get_mut(&host) else {
                continue;
            };
            let Some(mem) = entry.mem.as_mut() else {
                continue;
            };
            if let Some(w) = mem.window.take() {
                self.item_mem -= w.items.iter().map(item_bytes).sum::<u64>();
            }
            if mem.is_empty() {
                entry.mem = None;
                self.boxes -= 1;
            } else {
                // Only pushed-to-front items left: they stay, at the back of the line.
                self.boxed.push_back(host);
            }
        }
        self.compact_lists();
        Ok(())
    }

    /// Gives `host` a box if it has none.
    fn boxed_mem(&mut self, host: u64) -> &mut HostMem {
        if self.boxed.len() > 2 * self.boxes as usize + 1024 {
            self.compact_lists();
        }
        let entry = self.hosts.entry(host).or_default();
        if entry.mem.is_none() {
            self.boxes += 1;
            self.boxed.push_back(host);
            entry.mem = Some(Box::default());
        }
        entry.mem.as_mut().expect("just boxed")
    }

    /// Drops the stale entries of the lists of hosts, so that they stay within twice the
    /// number of boxes.
    fn compact_lists(&mut self) {
        let hosts = &self.hosts;
        self.boxed
            .retain(|h| hosts.get(h).is_some_and(|e| e.mem.is_some()));
        self.tails.retain(|h| {
            hosts
                .get(h)
                .and_then(|e| e.mem.as_ref())
                .is_some_and(|m| !m.tail.is_empty())
        });
        self.tails.sort_unstable();
        self.tails.dedup();
        self.boxed.shrink_to(self.boxes as usize * 2 + 1024);
        self.tails.shrink_to(self.boxes as usize * 2 + 1024);
    }

    fn write_all_tails(&mut self) -> Result<(), StoreError> {
        let tails = std::mem::take(&mut self.tails);
        for host in &tails {
            self.write_tail(*host)?;
        }
        self.tails = tails;
        self.tails.clear();
        if self.tails.capacity() > 1024 {
            self.tails.shrink_to(1024);
        }
        Ok(())
    }

    /// Writes `host`'s tail as one block at the end of the log and links it.
    fn write_tail(&mut self, host: u64) -> Result<(), StoreError> {
        let Some(entry) = self.hosts.get_mut(&host) else {
            return Ok(());
        };
        let Some(mem) = entry.mem.as_mut() else {
            return Ok(());
        };
        if mem.tail.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut mem.tail);
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        for item in &items {
            encode_item(&mut body, item);
            self.item_mem -= item_bytes(item);
            self.tail_mem -= item_bytes(item);
        }
        let count = items.len() as u32;
        drop(items);
        let mut header = [0u8; BLOCK_HEADER];
        header[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        header[4..8].copy_from_slice(&count.to_le_bytes());
        header[8..16].copy_from_slice(&host.to_le_bytes());
        header[16..24].copy_from_slice(&self.next_seq.to_le_bytes());
        let checksum = block_checksum(&header, &body);
        header[24..32].copy_from_slice(&checksum.to_le_bytes());
        self.next_seq += 1;
        let span = (BLOCK_HEADER + body.len()).next_multiple_of(8);
        if self.wbuf_start + self.wbuf.len() as u64 + span as u64 > self.options.segment_bytes
            && self.wbuf_start + self.wbuf.len() as u64 > SEGMENT_HEADER
        {
            self.roll_segment()?;
        }
        let at = loc(self.active, self.wbuf_start + self.wbuf.len() as u64);
        if self.wbuf.len() + span > self.options.write_buffer && !self.wbuf.is_empty() {
            self.flush_wbuf()?;
        }
        self.wbuf.extend_from_slice(&header);
        self.wbuf.extend_from_slice(&body);
        self.wbuf
            .resize(self.wbuf.len() + span - BLOCK_HEADER - body.len(), 0);
        self.scratch = body;
        *self.live.entry(self.active).or_default() += count as u64;
        self.dirty.insert(self.active);
        self.link(host, at, count)?;
        let entry = self.hosts.get_mut(&host).expect("host present");
        if entry.mem.as_ref().is_some_and(|m| m.is_empty()) {
            entry.mem = None;
            self.boxes -= 1;
        }
        Ok(())
    }

    /// Appends the block at `at` (of `count` items) to `host`'s chain on disk.
    fn link(&mut self, host: u64, at: u64, count: u32) -> Result<(), StoreError> {
        let entry = self.hosts.entry(host).or_default();
        if entry.disk_unread > 0 {
            let prev = entry.tail;
            entry.tail = at;
            entry.disk_unread += count as u64;
            // The head's window, if read, must learn its successor.
            if prev == entry.head {
                if let Some(w) = entry.mem.as_mut().and_then(|m| m.window.as_mut()) {
                    w.next = at;
                }
            }
            self.patch_next(prev, at)
        } else {
            entry.head = at;
            entry.head_skip = 0;
            entry.tail = at;
            entry.disk_unread = count as u64;
            Ok(())
        }
    }

    fn patch_next(&mut self, block: u64, next: u64) -> Result<(), StoreError> {
        let (s, off) = (loc_segment(block), loc_offset(block) + NEXT_FIELD);
        if s == self.active && off >= self.wbuf_start {
            let i = (off - self.wbuf_start) as usize;
            self.wbuf[i..i + 8].copy_from_slice(&next.to_le_bytes());
            return Ok(());
        }
        // Deferred: applied by the next sync's write, in location order, off the owner's
        // thread. Until then reads look here.
        self.patches.insert(block, (next, self.patch_epoch));
        // Not while a sync begins: its write takes them all anyway, and writing them here
        // would be the pause's largest part.
        if !self.in_begin_sync && self.patches.len() > self.max_patches() {
            self.apply_patches_now()?;
        }
        Ok(())
    }

    /// Most deferred patches held: an eighth of the memory budget.
    fn max_patches(&self) -> usize {
        (self.options.memory / 8 / PATCH_BYTES) as usize
    }

    /// Writes every deferred patch now, in location order.
    fn apply_patches_now(&mut self) -> Result<(), StoreError> {
        let mut list: Vec<(u64, u64)> = self.patches.iter().map(|(&b, &(n, _))| (b, n)).collect();
        list.sort_unstable();
        for (block, next) in list {
            let s = loc_segment(block);
            let path = segment_path(&self.dir, s);
            let file = self.files.get(&s).ok_or_else(|| StoreError::Missing {
                path: path.clone(),
                what: "a block to link from is in it".into(),
            })?;
            file.write_all_at(&next.to_le_bytes(), loc_offset(block) + NEXT_FIELD)
                .map_err(io("write", &path))?;
            self.dirty.insert(s);
        }
        self.patches.clear();
        self.patches.shrink_to(1024);
        Ok(())
    }

    /// Reads the block at `at`, checks that it is whole and `host`'s, and returns its items
    /// after the first `skip`.
    fn read_window(&mut self, host: u64, at: u64, skip: u32) -> Result<Window, StoreError> {
        let (s, off) = (loc_segment(at), loc_offset(at));
        let path = segment_path(&self.dir, s);
        let mut header = [0u8; BLOCK_HEADER];
        let mut body = std::mem::take(&mut self.scratch);
        if s == self.active && off >= self.wbuf_start {
            let i = (off - self.wbuf_start) as usize;
            header.copy_from_slice(&self.wbuf[i..i + BLOCK_HEADER]);
            let h = BlockHeader::parse(&header);
            let start = i + BLOCK_HEADER;
            body.clear();
            body.extend_from_slice(&self.wbuf[start..start + h.body_len as usize]);
        } else {
            let file = self.files.get(&s).ok_or_else(|| StoreError::Missing {
                path: path.clone(),
                what: format!("host {host:#x}'s next block is in it"),
            })?;
            file.read_exact_at(&mut header, off)
                .map_err(|e| corrupt(&path, off, format!("cannot read a block header: {e}")))?;
            let h = BlockHeader::parse(&header);
            if h.body_len > MAX_BODY {
                return Err(corrupt(&path, off, format!("block length {}", h.body_len)));
            }
            body.resize(h.body_len as usize, 0);
            file.read_exact_at(&mut body, off + BLOCK_HEADER as u64)
                .map_err(|e| corrupt(&path, off, format!("cannot read a block body: {e}")))?;
        }
        let h = BlockHeader::parse(&header);
        let computed = block_checksum(&header, &body);
        if computed != h.checksum {
            return Err(corrupt(
                &path,
                off,
                format!(
                    "block checksum {:#018x}, contents hash to {computed:#018x}",
                    h.checksum
                ),
            ));
        }
        if h.host != host {
            return Err(corrupt(
                &path,
                off,
                format!(
                    "block of host {:#x} where host {host:#x}'s was expected",
                    h.host
                ),
            ));
        }
        if skip >= h.count {
            return Err(corrupt(
                &path,
                off,
                format!("block holds {} items, {skip} said popped", h.count),
            ));
        }
        let mut r = Reader {
            bytes: &body,
            at: 0,
        };
        let mut items = VecDeque::with_capacity((h.count - skip) as usize);
        for i in 0..h.count {
            let item = r
                .item()
                .map_err(|e| corrupt(&path, off, format!("item {i}: {e}")))?;
            if i >= skip {
                items.push_back(item);
            }
        }
        self.scratch = body;
        Ok(Window {
            items,
            next: self.patches.get(&at).map_or(h.next, |&(n, _)| n),
        })
    }

    fn flush_wbuf(&mut self) -> Result<(), StoreError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let path = segment_path(&self.dir, self.active);
        let file = self.files.get(&self.active).expect("active segment open");
        file.write_all_at(&self.wbuf, self.wbuf_start)
            .map_err(io("write", &path))?;
        self.wbuf_start += self.wbuf.len() as u64;
        self.seg_len.insert(self.active, self.wbuf_start);
        self.wbuf.clear();
        Ok(())
    }

    /// Seals the active segment and starts the next.
    fn roll_segment(&mut self) -> Result<(), StoreError> {
        // No fsync here (it would stall a push or a sync's pause): the sealed segment stays
        // dirty until the next sync's write, and replay cuts at the first bad record whatever
        // the segment.
        self.flush_wbuf()?;
        self.start_segment(self.active + 1)
    }

    fn start_segment(&mut self, s: u32) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, s);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io("create", &path))?;
        let mut header = [0u8; SEGMENT_HEADER as usize];
        header[0..8].copy_from_slice(&SEGMENT_MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&s.to_le_bytes());
        file.write_all_at(&header, 0).map_err(io("write", &path))?;
        self.files.insert(s, file);
        self.seg_len.insert(s, SEGMENT_HEADER);
        self.active = s;
        self.wbuf_start = SEGMENT_HEADER;
        self.dirty.insert(s);
        Ok(())
    }

    fn open_segment(&mut self, s: u32) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, s);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io("open", &path))?;
        let len = file.metadata().map_err(io("stat", &path))?.len();
        let mut header = [0u8; SEGMENT_HEADER as usize];
        if len < SEGMENT_HEADER {
            return Err(corrupt(
                &path,
                0,
                format!("{len} bytes, shorter than a header"),
            ));
        }
        file.read_exact_at(&mut header, 0)
            .map_err(io("read", &path))?;
        if header[0..8] != SEGMENT_MAGIC {
            return Err(corrupt(&path, 0, "not a frontier segment (bad magic)"));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(corrupt(&path, 8, format!("format version {version}")));
        }
        let number = u32::from_le_bytes(header[12..16].try_into().unwrap());
        if number != s {
            return Err(corrupt(&path, 12, format!("says it is segment {number}")));
        }
        self.files.insert(s, file);
        self.seg_len.insert(s, len);
        Ok(())
    }

    /// Links back every intact block after `log_end`, cuts the log at the first that is not,
    /// and makes the last segment the active one.
    fn replay(&mut self, log_end: u64, segments: &[u32]) -> Result<(), StoreError> {
        let first = loc_segment(log_end);
        let later: Vec<u32> = segments.iter().copied().filter(|&s| s >= first).collect();
        let mut last = *later.last().expect("the log end's segment exists");
        for &s in &later {
            let path = segment_path(&self.dir, s);
            let len = self.seg_len[&s];
            let off = if s == first {
                loc_offset(log_end)
            } else {
                SEGMENT_HEADER
            };
            if off > len {
                return Err(corrupt(
                    &path,
                    len,
                    format!("the table's log end is at byte {off}, the file ends at {len}"),
                ));
            }
            let file = self.files.get(&s).expect("opened").try_clone();
            let file = file.map_err(io("open", &path))?;
            // Reading the rest of the segment in one go: it is at most `segment_bytes`.
            let mut bytes = vec![0u8; (len - off) as usize];
            file.read_exact_at(&mut bytes, off)
                .map_err(io("read", &path))?;
            let mut at = 0usize;
            let mut cut = None;
            while at < bytes.len() {
                match self.check_block(&bytes[at..]) {
                    Ok(h) => {
                        let span = h.span() as usize;
                        self.next_seq = h.seq + 1;
                        *self.live.entry(s).or_default() += h.count as u64;
                        self.recovery.blocks_replayed += 1;
                        self.recovery.items_replayed += h.count as u64;
                        self.total += h.count as u64;
                        let block = loc(s, off + at as u64);
                        self.link(h.host, block, h.count)?;
                        at += span;
                    }
                    Err(why) => {
                        cut = Some(why);
                        break;
                    }
                }
            }
            if let Some(why) = cut {
                // Everything after the first bad record is dropped, later segments included:
                // it was written after the position, so it is lost like an unsynced tail.
                // Later segments first (newest first, the directory fsynced): truncating first
                // could, after a power cut, leave them behind a segment that now ends cleanly,
                // and the next replay would link them back past the gap.
                let cut_at = off + at as u64;
                for &t in later.iter().rev().filter(|&&t| t > s) {
                    let p = segment_path(&self.dir, t);
                    self.files.remove(&t);
                    self.seg_len.remove(&t);
                    fs::remove_file(&p).map_err(io("remove", &p))?;
                }
                sync_dir(&self.dir)?;
                file.set_len(cut_at).map_err(io("truncate", &path))?;
                file.sync_data().map_err(io("fsync", &path))?;
                self.recovery.cut = Some((path, cut_at, why));
                self.seg_len.insert(s, cut_at);
                last = s;
                break;
            }
        }
        self.active = last;
        self.wbuf_start = self.seg_len[&last];
        Ok(())
    }

    /// Whether `bytes` start with a whole, valid block following the last one seen.
    fn check_block(&self, bytes: &[u8]) -> Result<BlockHeader, String> {
        if bytes.len() < BLOCK_HEADER {
            return Err(format!(
                "{} bytes, shorter than a block header",
                bytes.len()
            ));
        }
        let h = BlockHeader::parse(&bytes[..BLOCK_HEADER]);
        if h.body_len == 0 || h.body_len > MAX_BODY || h.count == 0 {
            return Err(format!(
                "impossible block length {} or count {}",
                h.body_len, h.count
            ));
        }
        let span = h.span() as usize;
        if bytes.len() < span {
            return Err(format!("block of {span} bytes, {} left", bytes.len()));
        }
        let body = &bytes[BLOCK_HEADER..BLOCK_HEADER + h.body_len as usize];
        let computed = block_checksum(&bytes[..BLOCK_HEADER], body);
        if computed != h.checksum {
            return Err(format!(
                "block checksum {:#018x}, contents hash to {computed:#018x}",
                h.checksum
            ));
        }
        if h.seq < self.next_seq {
            return Err(format!(
                "block sequence {} where {} or more was expected",
                h.seq, self.next_seq
            ));
        }
        Ok(h)
    }

    /// The table (format in the module doc) without its checksum trailer, which
    /// [`PendingSync`] computes off the pause. This is most of a sync's pause with many hosts
    /// (~40 bytes per host), hence one fixed record per host, copied in one go, and no lookup
    /// or box read for the hosts that have nothing to add to it (see `maybe_flying`).
    fn encode_table(
        &self,
        generation: u64,
        log_end: u64,
        oldest_needed: u32,
        in_flight: &[(u64, QueuedUrl)],
    ) -> Vec<u8> {
        let mut extra: HashMap<u64, Vec<&QueuedUrl>> = HashMap::new();
        let mut extra_bytes = 0;
        // A one-sided filter of the hosts with items in flight (a bit per hash of the host
        // id): a host whose bit is clear has none, without a lookup in `extra`.
        let mut maybe_flying = [0u64; 1024];
        let bit = |h: u64| (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize;
        for (host, item) in in_flight {
            extra.entry(*host).or_default().push(item);
            extra_bytes += 24 + item.url.len() + item.parent.as_ref().map_or(0, |p| p.len());
            maybe_flying[bit(*host) / 64] |= 1 << (bit(*host) % 64);
        }
        let extra_hosts = extra.keys().filter(|h| !self.hosts.contains_key(h)).count();
        let hosts = self.hosts.len() + extra_hosts;
        let size = 64 + hosts * 40 + extra_bytes + self.live.len() * 16 + 8;
        let mut t = self
            .table_buf
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default();
        if t.capacity() > 2 * size + (1 << 20) {
            // Far more hosts at a previous sync: not kept for ever.
            t = Vec::new();
        }
        t.clear();
        t.reserve(size);
        t.extend_from_slice(&TABLE_MAGIC);
        t.extend_from_slice(&VERSION.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&generation.to_le_bytes());
        t.extend_from_slice(&log_end.to_le_bytes());
        t.extend_from_slice(&self.next_seq.to_le_bytes());
        t.extend_from_slice(&(oldest_needed as u64).to_le_bytes());
        t.extend_from_slice(&(hosts as u64).to_le_bytes());
        t.extend_from_slice(&(self.live.len() as u64).to_le_bytes());
        let record = |host: u64, head: u64, skip: u32, front: usize, unread: u64, tail: u64| {
            let mut r = [0u8; 40];
            r[0..8].copy_from_slice(&host.to_le_bytes());
            r[8..16].copy_from_slice(&head.to_le_bytes());
            r[16..20].copy_from_slice(&skip.to_le_bytes());
            r[20..24].copy_from_slice(&(front as u32).to_le_bytes());
            r[24..32].copy_from_slice(&unread.to_le_bytes());
            r[32..40].copy_from_slice(&tail.to_le_bytes());
            r
        };
        for (&host, e) in &self.hosts {
            let b = bit(host);
            let flying = if maybe_flying[b / 64] & (1 << (b % 64)) != 0 {
                extra.get(&host).map_or(&[][..], |v| &v[..])
            } else {
                &[]
            };
            let front = flying.len() + e.front as usize;
            t.extend_from_slice(&record(
                host,
                e.head,
                e.head_skip,
                front,
                e.disk_unread,
                e.tail,
            ));
            if front == 0 {
                continue;
            }
            for item in flying {
                encode_item(&mut t, item);
            }
            if e.front > 0 {
                let m = e.mem.as_ref().expect("front items are in the box");
                debug_assert_eq!(m.front.len(), e.front as usize);
                for item in &m.front {
                    encode_item(&mut t, item);
                }
            }
        }
        for (&host, items) in extra.iter().filter(|(h, _)| !self.hosts.contains_key(h)) {
            t.extend_from_slice(&record(host, 0, 0, items.len(), 0, 0));
            for item in items {
                encode_item(&mut t, item);
            }
        }
        for (&s, &n) in &self.live {
            t.extend_from_slice(&(s as u64).to_le_bytes());
            t.extend_from_slice(&n.to_le_bytes());
        }
        t
    }

    fn load_table(
        &mut self,
        path: &Path,
        position: StorePosition,
    ) -> Result<TableHeader, StoreError> {
        let bytes = fs::read(path).map_err(io("read", path))?;
        let header = parse_table_header(path, &bytes)?;
        let body_end = bytes.len() - 8;
        let stored = u64::from_le_bytes(bytes[body_end..].try_into().unwrap());
        let computed = xxh3_64(&bytes[..body_end]);
        if stored != computed {
            return Err(corrupt(
                path,
                body_end as u64,
                format!("table checksum {stored:#018x}, contents hash to {computed:#018x}"),
            ));
        }
        if stored != position.table_checksum
            || header.generation != position.generation
            || header.log_end != position.log_end
        {
            return Err(corrupt(
                path,
                0,
                "this table is not the one the position recorded (checksum, generation or log end differ)",
            ));
        }
        let mut r = Reader {
            bytes: &bytes[..body_end],
            at: 64,
        };
        let bad = |r: &Reader, e: String| corrupt(path, r.at as u64, e);
        for _ in 0..header.hosts {
            let host = r.u64().map_err(|e| bad(&r, e))?;
            let head = r.u64().map_err(|e| bad(&r, e))?;
            let head_skip = r.u32().map_err(|e| bad(&r, e))?;
            let front = r.u32().map_err(|e| bad(&r, e))?;
            let disk_unread = r.u64().map_err(|e| bad(&r, e))?;
            let tail = r.u64().map_err(|e| bad(&r, e))?;
            let mut entry = HostEntry {
                head,
                head_skip,
                front,
                tail,
                disk_unread,
                mem: None,
            };
            if front > 0 {
                let mut mem = Box::<HostMem>::default();
                for _ in 0..front {
                    let item = r.item().map_err(|e| bad(&r, e))?;
                    self.item_mem += item_bytes(&item);
                    mem.front.push_back(item);
                }
                entry.mem = Some(mem);
                self.boxes += 1;
                self.boxed.push_back(host);
            }
            self.total += entry.len();
            self.hosts.insert(host, entry);
        }
        for _ in 0..header.segments {
            let s = r.u64().map_err(|e| bad(&r, e))?;
            let n = r.u64().map_err(|e| bad(&r, e))?;
            self.live.insert(s as u32, n);
        }
        if r.at != r.bytes.len() {
            return Err(corrupt(
                path,
                r.at as u64,
                "bytes left after the last record",
            ));
        }
        self.next_seq = header.next_seq;
        Ok(header)
    }
}

#[derive(Debug, Clone)]
struct TableHeader {
    generation: u64,
    log_end: u64,
    next_seq: u64,
    oldest_needed: u32,
    hosts: u64,
    segments: u64,
}

fn parse_table_header(path: &Path, bytes: &[u8]) -> Result<TableHeader, StoreError> {
    if bytes.len() < 72 {
        return Err(corrupt(
            path,
            0,
            format!("{} bytes, shorter than a table", bytes.len()),
        ));
    }
    if bytes[0..8] != TABLE_MAGIC {
        return Err(corrupt(path, 0, "not a frontier table (bad magic)"));
    }
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(corrupt(path, 8, format!("format version {version}")));
    }
    Ok(TableHeader {
        generation: u64_at(16),
        log_end: u64_at(24),
        next_seq: u64_at(32),
        oldest_needed: u64_at(40) as u32,
        hosts: u64_at(48),
        segments: u64_at(56),
    })
}

fn read_table_header(path: &Path) -> Result<TableHeader, StoreError> {
    let file = File::open(path).map_err(io("open", path))?;
    let mut bytes = [0u8; 72];
    let n = file.read_at(&mut bytes, 0).map_err(io("read", path))?;
    parse_table_header(path, &bytes[..n])
}

fn read_table_checksum(path: &Path) -> Result<u64, StoreError> {
    let file = File::open(path).map_err(io("open", path))?;
    let len = file.metadata().map_err(io("stat", path))?.len();
    if len < 72 {
        return Err(corrupt(
            path,
            0,
            format!("{len} bytes, shorter than a table"),
        ));
    }
    let mut b = [0u8; 8];
    file.read_exact_at(&mut b, len - 8)
        .map_err(io("read", path))?;
    Ok(u64::from_le_bytes(b))
}

/// Segment numbers and table generations in `dir`, ascending; `*.tmp` files are removed.
fn list_dir(dir: &Path) -> Result<(Vec<u32>, Vec<u64>), StoreError> {
    let mut segments = Vec::new();
    let mut tables = Vec::new();
    for entry in fs::read_dir(dir).map_err(io("list", dir))? {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix("seg-")
            .and_then(|n| n.strip_suffix(".log"))
        {
            if let Ok(n) = n.parse() {
                segments.push(n);
            }
        } else if let Some(n) = name
            .strip_prefix("table-")
            .and_then(|n| n.strip_suffix(".bin"))
        {
            if let Ok(n) = n.parse() {
                tables.push(n);
            }
        } else if name.starts_with("table-") && name.ends_with(".tmp") {
            let p = entry.path();
            fs::remove_file(&p).map_err(io("remove", &p))?;
        }
    }
    segments.sort_unstable();
    tables.sort_unstable();
    Ok((segments, tables))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}
