//! The disk-backed storage of the frontier's per-host FIFO queues: [`QueueStore`].
//!
//! # What it must serve
//!
//! A crawl of 1e8 URLs over 1e6 or more hosts, in a process whose whole peak RSS stays under
//! 1 GiB with a ~190 MiB seen-set. The frontier gets a few hundred MiB at most, so queued URLs
//! (~230 bytes each in memory as [`QueuedUrl`], ~90 on disk) must live on disk, and what is
//! kept per host must be a few dozen bytes, not a list that grows with the host's queue.
//!
//! # Design
//!
//! One global append-only log, cut into segment files, holds *blocks*; a block holds 1 to
//! `block_items` consecutive URLs of one host. Each host's blocks form a singly linked list on
//! disk, oldest first: every block has a `next` field pointing at the host's next block.
//! Blocks are written in *groups* (format version 3): the tails written together (at a sync,
//! or when tails fill their share of memory) go to the log as groups of up to 255 hosts'
//! blocks (entries) and ~8 KiB of items, one header, one LZ4 body, and per entry its host id
//! and `next` field; a block's location names its group and its entry. Most tails hold one
//! URL when written (1e6 hosts, links spread over them), and a block of its own cost each
//! ~140 bytes (version 2); in a group it costs ~16 bytes plus what LZ4 leaves of its URL and
//! parent next to other hosts' similar ones (figures below). A pop reads and decompresses the
//! whole group (~8 KiB) to take one entry: a few microseconds more than a block's read; the
//! last 32 groups read are kept decoded (`group_cache.rs`), as the scheduler often serves
//! hosts of one group close together.
//! In memory a host costs one fixed-size hash-map entry (head block, items already popped from
//! it, tail block, unread count on disk, its tail's length and chain, and an optional boxed
//! window) and the frontier's tally of the host (`HostTally`, kept here so that one lookup
//! finds both): 64 bytes of entry and id, one cache line, ~85–170 bytes with the table's slack
//! (`host_map.rs`), whatever the length of its queue. A host with a tally keeps its entry when its queue empties; the table records
//! only hosts with something queued (or in flight), as before. So a pop is one positioned read (of a block, cached as the host's window until used
//! up), and a push is an append.
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
//! consult, and written in location order by the next sync's `PendingSync::write`, off the
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
//! per-segment unread counts. `PendingSync::write` (any thread, while pushes and pops go on)
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
//! blocks is left for later).
//!
//! # On-disk format
//!
//! Segments, blocks and tables are laid out byte by byte in the doc of the `format` module
//! (`format.rs`); a block's body (front-coded items, LZ4 when it pays) in `codec.rs`, which
//! says why that coding. Version 3 (this one, groups) stores a queued URL in ~35 bytes at 1e7
//! URLs of the scale bench, version 2 in ~89, version 1 in ~192 (measured below). A store of
//! version 2 is still read (its segments' blocks as such, new groups in new segments after
//! them: test `store::tests::a_store_of_format_version_2_is_read_and_extended`); one of
//! version 1 or another is refused, naming the file and its version, never read as this one.
//!
//! # Where things are
//!
//! - `mod.rs`: the [`QueueStore`] type, its per-host bookkeeping, and pushes and pops;
//! - `format.rs`: the byte formats and file names;
//! - `codec.rs`: a group's and a block's body (front coding, varints, LZ4);
//! - `tails.rs`: every host's tail (pushed, not written yet) in one arena, a chain per host;
//! - `log.rs`: writing tails as groups of blocks, linking them, reading a block back, segment
//!   files;
//! - `group_cache.rs`: the last groups a pop read, kept checked and decompressed, so that a
//!   pop of another entry of the same group does not read and decompress it again;
//! - `log_writer.rs`: the thread that writes the full write buffers (`pwrite`), so that the
//!   owner's thread goes on admitting meanwhile;
//! - `sync.rs`: [`QueueStore::begin_sync`], `PendingSync`, [`QueueStore::finish_sync`];
//! - `recovery.rs`: opening, reopening at a position (replaying or discarding what follows),
//!   and checking a position;
//! - the file-level guarantees (atomic replace of a table, directory fsyncs, checksum
//!   trailers, errors naming the file) come from [`crate::durable`].
//!
//! # Measured
//!
//! Groups (format version 3), `SCALE_URLS=1e7 cargo bench --bench scale` (thin LTO, load
//! average ~20, a loaded machine: rates only as a ratio, see below): **35 bytes per queued
//! URL** (version 2: 89), of which segments 25.9 and the two tables kept 8.9 (~40 bytes per
//! host with something queued: at 1e8 URLs over the same 1e6 hosts, ~1 byte per URL). The
//! log took 22.7 bytes per URL written: 4.4 M entries of 2.26 URLs on average in 69,569
//! groups; per URL 0.1 bytes of group headers and padding, 7.1 of host ids and links (16 per
//! entry), 15.5 of body (58.3 raw, LZ4 3.76×); segments kept for unread URLs hold ~3.2 bytes
//! per queued URL of URLs already popped. Peak RSS 623 MiB, 8,758,606 URLs queued at the end
//! (the same workload as the rows below). At `SCALE_URLS=2e6`, the version-2 binary and this
//! one alternated three times on the loaded machine: 115 and 49–51 bytes per queued URL; URLs/s
//! within noise of each other (37.1 k and 34.5 k medians, the first two runs of each sharing
//! the machine with a third bench).
//!
//! The compact blocks (format version 2), `SCALE_URLS=1e7 cargo bench --bench scale`, run
//! directly after building, the version-1 binary and this one back to back on a machine whose
//! load average was 20–26 (eight builds at once on 2 cores; so the rates are only a ratio):
//!
//! | format | disk per queued URL | disk at end | URLs/s | peak RSS | resume to 1st URL |
//! |---|---|---|---|---|---|
//! | version 1 (40-byte headers, strings whole) | 192 bytes | 1661 MiB | 16.1 k (under `perf`) | 593 MiB | 11.9 s |
//! | version 2 (32-byte headers, front coding, LZ4) | 89 bytes | 805 MiB | 19.9 k | 592 MiB | 8.1 s |
//!
//! Same workload in both (8,758,606 URLs queued at the end); the version-2 binary of this row
//! still allocated a box per one-URL tail. With spare boxes, `SCALE_URLS=2e6`, three runs of
//! each binary alternated (load average ~22): medians 31.7 k URLs/s (version 1) and 41.3 k
//! (version 2), 1.30×; disk 212 and 116 bytes per queued URL (at 2e6 the tables, ~40 bytes
//! per host with something queued, two kept, weigh more per URL); peak RSS 316 and 332 MiB;
//! resume to the first URL 2.8 and 2.8 s. What is left per URL: ~30 % of
//! the links go to a host drawn at random out of 1e6, and such a host's tail is written as a
//! block of one URL (header, whole URL, parent coded against it: ~140 bytes), while a host's
//! own links come in blocks of ~5–7 at ~25 bytes each; and segments stay while any host has an
//! unread block in them, so popped URLs' bytes are still counted. The older figures below are
//! of version 1.
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
//! filter, the buffer reused, the checksum and the sort moved to `PendingSync::write`. What
//! is left is mostly waiting for memory: the map's array (~96 MB at 1e6 hosts, 48-byte
//! buckets at half load after its last doubling) is read once per sync.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::QueuedUrl;
use crate::durable::FileError;
use format::loc_segment;
use host_map::HostMap;

mod codec;
mod format;
mod group_cache;
mod host_map;
mod log;
mod log_writer;
mod recovery;
mod sync;
mod tails;
#[cfg(test)]
mod tests;

pub(crate) use sync::PendingSync;

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
    pub(crate) table_checksum: u64,
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

/// What the store has written to its log since it was opened, by cause: where the bytes per
/// queued URL go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Groups written.
    pub groups: u64,
    /// Entries (one host's run of items each) in them.
    pub entries: u64,
    /// Items in them.
    pub items: u64,
    /// Group headers and padding.
    pub header_bytes: u64,
    /// Host ids and `next` fields, 16 per entry.
    pub entry_bytes: u64,
    /// Bodies (items, compressed or not).
    pub body_bytes: u64,
    /// The items' bodies before compression.
    pub raw_bytes: u64,
    /// Links written to blocks already in their file by the owner (memory pressure on the
    /// deferred links, see `apply_patches_now`), and the writes that took (runs of close links
    /// go as one).
    pub patches: u64,
    pub patch_writes: u64,
}

/// Why the store could not be opened, read or written: I/O on a named file, damage (file and
/// byte offset), or a file that should be there and is not (see [`FileError`]).
pub type StoreError = FileError;

/// Memory an item costs while held: the struct and its strings.
fn item_bytes(item: &QueuedUrl) -> u64 {
    (std::mem::size_of::<QueuedUrl>()
        + item.url.capacity()
        + item.parent.as_ref().map_or(0, |p| p.len())) as u64
}

/// Most empty boxes kept in [`QueueStore`]'s `spare`.
const SPARE_BOXES: usize = 1024;

/// Keeps an emptied box for the next host that needs one (a host's read window comes and goes
/// with each block it is served from).
#[allow(clippy::vec_box)] // The boxes themselves are what is reused: they move into entries.
fn recycle(spare: &mut Vec<Box<HostMem>>, mem: Option<Box<HostMem>>) {
    let Some(mut mem) = mem else { return };
    if spare.len() < SPARE_BOXES {
        debug_assert!(mem.is_empty());
        mem.front = VecDeque::new();
        spare.push(mem);
    }
}

/// The decoded items of a host's head block, from the first one not popped yet.
#[derive(Debug)]
struct Window {
    items: VecDeque<QueuedUrl>,
    next: u64,
}

/// What a host holds in memory besides its tail, boxed so that a host without any costs 8
/// bytes.
#[derive(Debug, Default)]
struct HostMem {
    /// Items pushed to the front (retries): popped before anything else.
    front: VecDeque<QueuedUrl>,
    /// The head block's remaining items, if read.
    window: Option<Window>,
}

impl HostMem {
    fn is_empty(&self) -> bool {
        self.front.is_empty() && self.window.is_none()
    }
}

/// The frontier's tally of a host (URLs ever queued for it, whether it is in the schedule),
/// kept in the host's entry here, not in a map of the frontier's own: a push then finds the
/// tally and the queue in one lookup, one cache miss instead of two (the store's map and the
/// tallies' map were the two largest waits for memory of the admitting thread in the scale
/// bench). A host with a tally keeps its entry when its queue empties (the tally is for
/// every host ever seen); a host without one is dropped as before.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostTally {
    /// URLs ever queued for this host (saturating).
    pub(crate) queued_ever: u32,
    /// Whether the host is in the schedule: an entry in the ready heap, or parked (on a full
    /// budget, or waiting for its address).
    pub(crate) scheduled: bool,
    /// Whether the host has a tally at all (what a key in the frontier's map was).
    kept: bool,
}

/// A host's queue (what is on disk, and what is in memory) and its tally. Without a tally it
/// is there only while something is queued; with one, always (see [`HostTally`]).
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
    /// Items pushed but not written to disk yet (popped after everything on disk), and the
    /// slot of their chain in the store's [`tails::Tails`] (meaningful only while there are).
    tail_len: u32,
    tail_slot: u32,
    tally: HostTally,
}

// An entry and its host id in one cache line (see `host_map.rs`).
const _: () = assert!(std::mem::size_of::<HostEntry>() + 8 <= 64);

impl HostEntry {
    fn len(&self) -> u64 {
        self.disk_unread
            + self.tail_len as u64
            + self.mem.as_ref().map_or(0, |m| m.front.len() as u64)
    }

    /// Nothing queued (`front` counts the box's front items; a window is only read while
    /// `disk_unread` counts its items).
    fn is_empty(&self) -> bool {
        self.disk_unread == 0 && self.tail_len == 0 && self.front == 0
    }
}

/// `host`'s entry, to queue something in: made if absent, and no longer counted among the
/// kept empty entries if it was one (see [`QueueStore::empty_kept`]).
fn entry_to_fill<'a>(
    hosts: &'a mut HostMap<HostEntry>,
    empty_kept: &mut usize,
    host: u64,
) -> &'a mut HostEntry {
    let entry = hosts.get_or_default(host);
    if entry.tally.kept && entry.is_empty() {
        *empty_kept -= 1;
    }
    entry
}

/// Per-host FIFO queues of [`QueuedUrl`] whose bulk lives in a directory; see the module doc.
pub struct QueueStore {
    dir: PathBuf,
    options: StoreOptions,
    /// By host id: ids are XXH3 hashes already, so the maps' own hash is FxHash (one
    /// multiply), not SipHash; it is looked up several times per push and pop. Split so that
    /// its growth does not hold two whole arrays at once (see `host_map.rs`).
    hosts: HostMap<HostEntry>,
    /// Entries with a tally and nothing queued (so `hosts.len() - empty_kept` hosts have
    /// something queued), and entries with a tally.
    empty_kept: usize,
    tallied: usize,
    total: u64,
    /// Bytes of items held in memory (tails, windows, fronts), see [`item_bytes`].
    item_mem: u64,
    /// The part of `item_mem` in tails.
    tail_mem: u64,
    /// Hosts that hold a box, oldest first (may hold stale entries).
    boxed: VecDeque<u64>,
    boxes: u64,
    /// Items pushed and not written yet, every host's (see `tails.rs`).
    tails: tails::Tails,
    /// Empty boxes kept for the next host that needs one (see [`recycle`]).
    #[allow(clippy::vec_box)]
    // The boxes themselves are what is reused: they move into entries.
    spare: Vec<Box<HostMem>>,
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
    patches: FxHashMap<u64, (u64, u64)>,
    /// Incremented at each sync: the patches a sync writes are those of earlier epochs.
    patch_epoch: u64,
    /// Set while `begin_sync` writes the tails.
    in_begin_sync: bool,
    recovery: RecoveryReport,
    /// A block's body as written or read (compressed or not).
    scratch: Vec<u8>,
    /// A body before compression, or after decompression.
    raw_scratch: Vec<u8>,
    /// LZ4's hash table, kept from group to group (see `codec::compress_body`).
    lz4_table: lz4_flex::block::CompressTable,
    /// The bytes of a run of deferred links being written (see `apply_patches_now`).
    patch_run: Vec<u8>,
    /// The buffer of the last table written, handed back by [`PendingSync::write`] for the
    /// next sync to encode into: a fresh one costs a page fault every 4 KiB in the pause.
    table_buf: Arc<Mutex<Vec<u8>>>,
    /// Segments of format version 2 (a store written before groups), read as such.
    legacy: std::collections::BTreeSet<u32>,
    /// The group being gathered from tails (empty between calls).
    group: log::GroupBuilder,
    /// The entries of a group being replayed.
    entry_scratch: Vec<(u32, std::ops::Range<usize>)>,
    /// The last groups read, decoded (see `group_cache.rs`).
    group_cache: group_cache::GroupCache,
    /// Writes the full write buffers on a thread of its own (see `log_writer.rs`).
    writer: log_writer::LogWriter,
    written: WriteStats,
}

impl QueueStore {
    fn empty(dir: &Path, mut options: StoreOptions) -> QueueStore {
        options.block_items = options.block_items.clamp(1, format::MAX_BLOCK_ITEMS);
        QueueStore {
            dir: dir.to_path_buf(),
            wbuf: Vec::with_capacity(options.write_buffer),
            options,
            hosts: HostMap::default(),
            empty_kept: 0,
            tallied: 0,
            total: 0,
            item_mem: 0,
            tail_mem: 0,
            boxed: VecDeque::new(),
            boxes: 0,
            tails: Default::default(),
            spare: Vec::new(),
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
            patches: FxHashMap::default(),
            patch_epoch: 0,
            in_begin_sync: false,
            recovery: RecoveryReport::default(),
            scratch: Vec::new(),
            raw_scratch: Vec::new(),
            lz4_table: Default::default(),
            patch_run: Vec::new(),
            table_buf: Arc::default(),
            legacy: Default::default(),
            group: Default::default(),
            entry_scratch: Vec::new(),
            group_cache: Default::default(),
            writer: Default::default(),
            written: WriteStats::default(),
        }
    }

    /// The store's state at the time it was opened: what was replayed or cut.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Queues a copy of `item` at the back of `host`'s queue.
    pub fn push(&mut self, host: u64, item: &QueuedUrl) -> Result<(), StoreError> {
        self.push_owned(host, item.clone())
    }

    /// Queues `item` at the back of `host`'s queue (no copy made: the admission path).
    pub fn push_owned(&mut self, host: u64, item: QueuedUrl) -> Result<(), StoreError> {
        let bytes = item_bytes(&item);
        self.item_mem += bytes;
        self.tail_mem += bytes;
        self.total += 1;
        let entry = entry_to_fill(&mut self.hosts, &mut self.empty_kept, host);
        let slot = if entry.tail_len == 0 {
            tails::NO_TAIL
        } else {
            entry.tail_slot
        };
        entry.tail_slot = self.tails.push(host, slot, item);
        entry.tail_len += 1;
        if entry.tail_len as usize >= self.options.block_items {
            let slot = entry.tail_slot;
            self.write_tail(slot)?;
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
        if entry.tail_len == 0 {
            return Ok(None);
        }
        let Some(item) = self.tails.pop(entry.tail_slot) else {
            return Ok(None);
        };
        entry.tail_len -= 1;
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
        let Some(entry) = self.hosts.get(&host) else {
            return Ok(None);
        };
        let in_memory = entry.mem.as_ref().and_then(|mem| {
            mem.front
                .front()
                .or_else(|| mem.window.as_ref().and_then(|w| w.items.front()))
        });
        Ok(in_memory.or_else(|| {
            (entry.tail_len > 0)
                .then(|| self.tails.first(entry.tail_slot))
                .flatten()
        }))
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
            recycle(&mut self.spare, entry.mem.take());
            self.boxes -= 1;
        }
        if entry.mem.is_none() && entry.is_empty() {
            if entry.tally.kept {
                // As a fresh entry, but for the tally (the table writes no record for it).
                *entry = HostEntry {
                    tally: entry.tally,
                    ..HostEntry::default()
                };
                self.empty_kept += 1;
            } else {
                self.hosts.remove(&host);
            }
        }
    }

    /// A hint: `host` is about to be pushed to; its entry is fetched into the cache meanwhile
    /// (see `HostMap::prefetch`).
    pub(crate) fn prefetch(&self, host: u64) {
        self.hosts.prefetch(host);
    }

    /// `host`'s tally, if it has one (see [`HostTally`]).
    pub(crate) fn tally(&self, host: u64) -> Option<&HostTally> {
        self.hosts.get(&host).map(|e| &e.tally).filter(|t| t.kept)
    }

    /// `host`'s tally, if it has one, to change.
    pub(crate) fn tally_if_kept(&mut self, host: u64) -> Option<&mut HostTally> {
        self.hosts
            .get_mut(&host)
            .map(|e| &mut e.tally)
            .filter(|t| t.kept)
    }

    /// `host`'s tally, a zero one made if it has none: from then on its entry stays, whether
    /// anything is queued or not.
    pub(crate) fn tally_mut(&mut self, host: u64) -> &mut HostTally {
        let entry = self.hosts.get_or_default(host);
        if !entry.tally.kept {
            entry.tally.kept = true;
            self.tallied += 1;
            if entry.is_empty() {
                self.empty_kept += 1;
            }
        }
        &mut entry.tally
    }

    /// Every host with a tally, and its tally.
    pub(crate) fn tallies(&self) -> impl Iterator<Item = (u64, &HostTally)> + '_ {
        self.hosts
            .iter()
            .filter(|(_, e)| e.tally.kept)
            .map(|(&h, e)| (h, &e.tally))
    }

    /// Hosts with a tally.
    pub(crate) fn tally_count(&self) -> usize {
        self.tallied
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
        debug_assert_eq!(
            self.hosts.len() - self.empty_kept,
            self.hosts.iter().filter(|(_, e)| !e.is_empty()).count()
        );
        self.hosts.len() - self.empty_kept
    }

    /// Bytes held in memory now: the host map (capacity × entry, control bytes included), the
    /// boxes, the items in memory (structs and strings), the write buffer and the buffer of the
    /// last table (kept for the next sync's; not counted while a sync holds it). Vector slack
    /// beyond the items' length is not counted.
    pub fn memory_bytes(&self) -> u64 {
        self.hosts.memory_bytes()
            + self.boxes * std::mem::size_of::<HostMem>() as u64
            + self.item_mem
            + self.wbuf.capacity() as u64
            + self.boxed.capacity() as u64 * 8
            + self.tails.memory_bytes()
            + self.spare.len() as u64 * std::mem::size_of::<HostMem>() as u64
            + self.patches.capacity() as u64 * PATCH_BYTES
            + self.table_buf.lock().map_or(0, |b| b.capacity()) as u64
            + self.group_cache.memory_bytes()
            + self.writer.memory_bytes()
            + self.patch_run.capacity() as u64
    }

    /// Entry reads served by a group already decoded, and reads that decoded one.
    pub fn group_reads(&self) -> (u64, u64) {
        (self.group_cache.hits, self.group_cache.misses)
    }

    /// What the store wrote to its log since it was opened, by cause.
    pub fn write_stats(&self) -> WriteStats {
        self.written
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
        self.flush_wbuf()?;
        self.writer.wait()
    }

    /// Every host with something queued, and how many items.
    pub fn hosts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hosts
            .iter()
            .filter(|(_, e)| !e.is_empty())
            .map(|(&h, e)| (h, e.len()))
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
                recycle(&mut self.spare, entry.mem.take());
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
        let entry = entry_to_fill(&mut self.hosts, &mut self.empty_kept, host);
        if entry.mem.is_none() {
            self.boxes += 1;
            self.boxed.push_back(host);
            entry.mem = Some(self.spare.pop().unwrap_or_default());
        }
        entry.mem.as_mut().expect("just boxed")
    }

    /// Drops the stale entries of the list of boxed hosts, so that it stays within twice the
    /// number of boxes.
    fn compact_lists(&mut self) {
        let hosts = &self.hosts;
        self.boxed
            .retain(|h| hosts.get(h).is_some_and(|e| e.mem.is_some()));
        self.boxed.shrink_to(self.boxes as usize * 2 + 1024);
    }
}
