//! Appending to the log: a host's tail written as a block, the `next` link from its previous
//! block (in the write buffer, or deferred), a block read back into a host's window, and the
//! segment files (started, sealed, opened).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::codec;
use super::format::{
    self, block_checksum, entry_loc, group_checksum, loc, loc_entry, loc_offset, loc_segment,
    next_field_offset, segment_path, version_error, version_readable, BlockHeader, GroupHeader,
    BLOCK_HEADER, FLAG_LZ4, GROUP_HEADER, MAX_BODY, MAX_SEGMENT, SEGMENT_HEADER, SEGMENT_MAGIC,
    VERSION, VERSION_2,
};
use super::{QueueStore, StoreError, Window, PATCH_BYTES};
use crate::durable::{self, At, FileError, Header};

/// Raw (uncompressed) bytes of items at which a group being gathered is written: big enough
/// for LZ4 to find what the URLs of many hosts share, small enough that a pop, which reads and
/// decompresses a whole group to take one entry, stays a few microseconds.
pub(super) const GROUP_BYTES: usize = 8 << 10;

/// How many entries ahead of the one being linked a group's hosts' records are prefetched.
const LINK_PREFETCH: usize = 8;

/// Deferred links this close in the log (bytes between their `next` fields) are written as one
/// run by `apply_patches_now`: rewriting up to a page between two links costs less than a
/// second `pwrite`.
const PATCH_GAP: u64 = 4 << 10;
/// Most bytes of one run.
const PATCH_RUN: u64 = 256 << 10;

/// The entries of a group being gathered: hosts' tails, encoded, not yet in the log.
#[derive(Debug, Default)]
pub(super) struct GroupBuilder {
    hosts: Vec<u64>,
    /// (item count, encoded bytes) of each entry.
    entries: Vec<(u32, usize)>,
    /// The entries' encoded items, back to back.
    items: Vec<u8>,
    /// The hosts' ids as the group stores them, kept from group to group: a fresh one (up to
    /// 2 KiB) per group was an allocation glibc serves by consolidating its fast bins first.
    host_bytes: Vec<u8>,
}

impl QueueStore {
    /// Writes every tail, many hosts' to a group (see `format.rs`).
    pub(super) fn write_all_tails(&mut self) -> Result<(), StoreError> {
        for slot in 0..self.tails.slots() as u32 {
            self.gather_tail(slot);
            if self.group.items.len() >= GROUP_BYTES
                || self.group.hosts.len() >= format::MAX_GROUP_ENTRIES
            {
                self.write_group()?;
            }
        }
        let written = self.write_group();
        self.tails.tidy();
        written
    }

    /// Writes the tail whose chain is in `slot` as a group of its own (a full tail).
    pub(super) fn write_tail(&mut self, slot: u32) -> Result<(), StoreError> {
        self.gather_tail(slot);
        let written = self.write_group();
        self.tails.tidy();
        written
    }

    /// Moves the tail whose chain is in `slot`, encoded, into the group being gathered (its
    /// host may appear in a group once: its whole tail is taken). The host's entry learns it
    /// when the group is linked (see `link`), so this reads no entry.
    fn gather_tail(&mut self, slot: u32) {
        let before = self.group.items.len();
        codec::encode_items(self.tails.chain(slot), &mut self.group.items);
        let (count, bytes) = self.tails.drop_chain(slot);
        if count == 0 {
            return;
        }
        self.item_mem -= bytes;
        self.tail_mem -= bytes;
        self.group.hosts.push(self.tails.host(slot));
        self.group
            .entries
            .push((count, self.group.items.len() - before));
    }

    /// Writes the group gathered (if any) at the end of the log and links each entry to its
    /// host's chain.
    fn write_group(&mut self) -> Result<(), StoreError> {
        let n = self.group.hosts.len();
        if n == 0 {
            return Ok(());
        }
        // The first entries' records, fetched while the group is compressed (see `link`'s
        // loop below).
        for &host in self.group.hosts.iter().take(LINK_PREFETCH) {
            self.hosts.prefetch(host);
        }
        let mut body = std::mem::take(&mut self.scratch);
        let compressed = codec::encode_group_body(
            &self.group.entries,
            &self.group.items,
            &mut self.raw_scratch,
            &mut body,
            &mut self.lz4_table,
        );
        let flags = if compressed { FLAG_LZ4 } else { 0 };
        let mut header = GroupHeader::encode(body.len(), n, flags, self.next_seq);
        let mut hosts = std::mem::take(&mut self.group.host_bytes);
        hosts.clear();
        for h in &self.group.hosts {
            hosts.extend_from_slice(&h.to_le_bytes());
        }
        let checksum = group_checksum(&header, &hosts, &body);
        header[12..16].copy_from_slice(&checksum.to_le_bytes());
        self.next_seq += 1;
        let span = (GROUP_HEADER + 16 * n + body.len()).next_multiple_of(8);
        if self.wbuf_start + self.wbuf.len() as u64 + span as u64 > self.options.segment_bytes
            && self.wbuf_start + self.wbuf.len() as u64 > SEGMENT_HEADER
        {
            self.roll_segment()?;
        }
        if self.wbuf.len() + span > self.options.write_buffer && !self.wbuf.is_empty() {
            self.flush_wbuf()?;
        }
        let offset = self.wbuf_start + self.wbuf.len() as u64;
        let start = self.wbuf.len();
        self.wbuf.extend_from_slice(&header);
        self.wbuf.resize(start + GROUP_HEADER + 8 * n, 0);
        self.wbuf.extend_from_slice(&hosts);
        self.wbuf.extend_from_slice(&body);
        self.wbuf.resize(start + span, 0);
        self.scratch = body;
        self.group.host_bytes = hosts;
        let items: u64 = self.group.entries.iter().map(|&(c, _)| c as u64).sum();
        *self.live.entry(self.active).or_default() += items;
        let w = &mut self.written;
        w.groups += 1;
        w.entries += n as u64;
        w.items += items;
        w.entry_bytes += 16 * n as u64;
        w.body_bytes += self.scratch.len() as u64;
        w.header_bytes += (span - 16 * n - self.scratch.len()) as u64;
        w.raw_bytes += self.raw_scratch.len() as u64;
        self.dirty.insert(self.active);
        let mut group = std::mem::take(&mut self.group);
        let linked = (0..n).try_for_each(|i| {
            // The entries' hosts were pushed to long ago: their records are rarely in the
            // cache, so those a few entries ahead are fetched while this one is linked.
            if let Some(&ahead) = group.hosts.get(i + LINK_PREFETCH) {
                self.hosts.prefetch(ahead);
            }
            let at = entry_loc(self.active, offset, i);
            self.link(group.hosts[i], at, group.entries[i].0)
        });
        group.hosts.clear();
        group.entries.clear();
        group.items.clear();
        if group.items.capacity() > 4 * GROUP_BYTES {
            group.items = Vec::new();
        }
        self.group = group;
        linked
    }

    /// Appends the block at `at` (of `count` items) to `host`'s chain on disk.
    pub(super) fn link(&mut self, host: u64, at: u64, count: u32) -> Result<(), StoreError> {
        let entry = super::entry_to_fill(&mut self.hosts, &mut self.empty_kept, host);
        // Linked from a written tail (or replayed, when there is none): the whole tail is in
        // the block now.
        entry.tail_len = 0;
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

    pub(super) fn patch_next(&mut self, block: u64, next: u64) -> Result<(), StoreError> {
        let s = loc_segment(block);
        let off = next_field_offset(block, self.segment_version(s));
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

    /// The format version of segment `s` (version 2 for segments of an older store).
    pub(super) fn segment_version(&self, s: u32) -> u32 {
        if self.legacy.contains(&s) {
            VERSION_2
        } else {
            VERSION
        }
    }

    /// Where a patch of the `next` field at `block` goes: `segment << 32 | file offset`, so
    /// that sorting these sorts by segment, then offset.
    pub(super) fn patch_target(&self, block: u64) -> u64 {
        let s = loc_segment(block);
        loc(s, next_field_offset(block, self.segment_version(s)))
    }

    /// Most deferred patches held: an eighth of the memory budget.
    pub(super) fn max_patches(&self) -> usize {
        (self.options.memory / 8 / PATCH_BYTES) as usize
    }

    /// Writes every deferred patch now, in location order.
    ///
    /// Patches close together go to the file as one run: the bytes from the first `next`
    /// field to the last are read, patched in memory and written back ([`PATCH_GAP`],
    /// [`PATCH_RUN`]). Why: this runs on the owner's thread whenever the map holds an eighth of
    /// the budget (every ~260 k links at 64 MiB, every few seconds at 1e6 hosts), and one
    /// 8-byte `pwrite` per link was ~7 % of the admitting thread's samples in the scale bench
    /// at 3e6 URLs; the links of the last seconds' blocks are dense in the log's last
    /// megabytes. Rewriting the bytes between them is exact: they are the file's own bytes,
    /// read here; nothing else writes them meanwhile except a sync's write of patches that
    /// are also in this map, with the same values (a block is linked once), or were written
    /// before (and are then what is read); and every byte of the run is before the write
    /// buffer, so already in the file once the writer has been waited for.
    pub(super) fn apply_patches_now(&mut self) -> Result<(), StoreError> {
        // A buffer still being written holds older `next` fields of the blocks patched here.
        self.writer.wait()?;
        let mut list: Vec<(u64, u64)> = self
            .patches
            .iter()
            .map(|(&b, &(n, _))| (self.patch_target(b), n))
            .collect();
        list.sort_unstable();
        let mut run = std::mem::take(&mut self.patch_run);
        let written = self.write_patch_runs(&list, &mut run);
        run.clear();
        if run.capacity() > PATCH_RUN as usize {
            run = Vec::new();
        }
        self.patch_run = run;
        written?;
        self.patches.clear();
        self.patches.shrink_to(1024);
        // The links left the map for the file: cached `next` fields may be stale.
        self.group_cache.clear();
        Ok(())
    }

    /// Writes `list` ((target, next) sorted by target, see [`QueueStore::patch_target`]), runs
    /// of close targets as one read and one write through `run` (see `apply_patches_now`).
    fn write_patch_runs(
        &mut self,
        list: &[(u64, u64)],
        run: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        let mut i = 0;
        while i < list.len() {
            let s = loc_segment(list[i].0);
            let first = loc_offset(list[i].0);
            let mut j = i + 1;
            while j < list.len()
                && loc_segment(list[j].0) == s
                && loc_offset(list[j].0) - loc_offset(list[j - 1].0) <= PATCH_GAP
                && loc_offset(list[j].0) + 8 - first <= PATCH_RUN
            {
                j += 1;
            }
            let path = segment_path(&self.dir, s);
            let file = self.files.get(&s).ok_or_else(|| StoreError::Missing {
                path: path.clone(),
                what: "a block to link from is in it".into(),
            })?;
            if j == i + 1 {
                file.write_all_at(&list[i].1.to_le_bytes(), first)
                    .at("write", &path)?;
            } else {
                let end = loc_offset(list[j - 1].0) + 8;
                run.clear();
                run.resize((end - first) as usize, 0);
                file.read_exact_at(run, first).at("read", &path)?;
                for &(target, next) in &list[i..j] {
                    let at = (loc_offset(target) - first) as usize;
                    run[at..at + 8].copy_from_slice(&next.to_le_bytes());
                }
                file.write_all_at(run, first).at("write", &path)?;
            }
            self.written.patches += (j - i) as u64;
            self.written.patch_writes += 1;
            self.dirty.insert(s);
            i = j;
        }
        Ok(())
    }

    /// Reads the entry at `at` (of a group, or a version-2 block), checks that it is whole and
    /// `host`'s, and returns its items after the first `skip`. A group is decoded once and
    /// kept for the next pops that want another of its entries (see `group_cache.rs`).
    pub(super) fn read_window(
        &mut self,
        host: u64,
        at: u64,
        skip: u32,
    ) -> Result<Window, StoreError> {
        let (s, off) = (loc_segment(at), loc_offset(at));
        if self.legacy.contains(&s) {
            return self.read_block_v2(host, at, skip);
        }
        // The file's path is made only for an error: formatting it for every read was ~1 % of
        // the scale bench's samples.
        let corrupt =
            |dir: &Path, what: String| FileError::corrupt(&segment_path(dir, s), off, what);
        let group_at = loc(s, off);
        let slot = match self.group_cache.find(group_at) {
            Some(slot) => slot,
            None => {
                let slot = self.group_cache.refill();
                self.decode_group(host, s, off, slot)?;
                self.group_cache.filled(slot, group_at);
                slot
            }
        };
        let in_wbuf = s == self.active && off >= self.wbuf_start;
        let g = self.group_cache.slot(slot);
        let i = loc_entry(at);
        let owner = g.hosts.get(i).copied();
        if owner != Some(host) {
            return Err(corrupt(
                &self.dir,
                format!("entry {i} of the group is {owner:x?}, host {host:#x}'s was expected"),
            ));
        }
        // A link into a group still in the write buffer is written there (see `patch_next`);
        // one into a group on disk waits in the map until a sync writes it (the cache is
        // emptied then).
        let next = if in_wbuf {
            let field = (off - self.wbuf_start) as usize + GROUP_HEADER + 8 * i;
            u64::from_le_bytes(self.wbuf[field..field + 8].try_into().expect("8 bytes"))
        } else {
            g.nexts[i]
        };
        let (count, range) = g.entries[i].clone();
        if skip >= count {
            return Err(corrupt(
                &self.dir,
                format!("entry {i} holds {count} items, {skip} said popped"),
            ));
        }
        let items = codec::decode_items(&g.raw[range], count, skip)
            .map_err(|e| corrupt(&self.dir, format!("entry {i}: {e}")))?;
        Ok(Window {
            items,
            next: self.patches.get(&at).map_or(next, |&(n, _)| n),
        })
    }

    /// Reads the group at `off` of segment `s` (from the write buffer or the file), checks it
    /// and decodes it into the group cache's slot `slot`.
    fn decode_group(&mut self, host: u64, s: u32, off: u64, slot: usize) -> Result<(), StoreError> {
        let corrupt =
            |dir: &Path, what: String| FileError::corrupt(&segment_path(dir, s), off, what);
        let mut bytes = std::mem::take(&mut self.scratch);
        let mut header = [0u8; GROUP_HEADER];
        let in_memory = if s == self.active && off >= self.wbuf_start {
            Some(&self.wbuf[(off - self.wbuf_start) as usize..])
        } else {
            // A buffer still being written (see `log_writer.rs`).
            self.writer.bytes_at(s, off)
        };
        if let Some(held) = in_memory {
            header.copy_from_slice(&held[..GROUP_HEADER]);
            let h = GroupHeader::parse(&header);
            bytes.clear();
            bytes.extend_from_slice(&held[..h.body_at() + h.body_len as usize]);
        } else {
            let file = self.files.get(&s).ok_or_else(|| StoreError::Missing {
                path: segment_path(&self.dir, s),
                what: format!("host {host:#x}'s next block is in it"),
            })?;
            file.read_exact_at(&mut header, off)
                .map_err(|e| corrupt(&self.dir, format!("cannot read a group header: {e}")))?;
            let h = GroupHeader::parse(&header);
            h.check().map_err(|e| corrupt(&self.dir, e))?;
            bytes.clear();
            bytes.resize(h.body_at() + h.body_len as usize, 0);
            file.read_exact_at(&mut bytes[GROUP_HEADER..], off + GROUP_HEADER as u64)
                .map_err(|e| corrupt(&self.dir, format!("cannot read a group: {e}")))?;
        }
        let h = GroupHeader::parse(&header);
        h.check().map_err(|e| corrupt(&self.dir, e))?;
        let (hosts, body) = (
            &bytes[h.hosts_at()..h.body_at()],
            &bytes[h.body_at()..h.body_at() + h.body_len as usize],
        );
        let computed = group_checksum(&header, hosts, body);
        if computed != h.checksum {
            self.scratch = bytes;
            return Err(corrupt(
                &self.dir,
                format!(
                    "group checksum {:#010x}, contents hash to {computed:#010x}",
                    h.checksum
                ),
            ));
        }
        let g = self.group_cache.slot_mut(slot);
        let decoded = if h.compressed() {
            codec::raw_body(body, true, &mut g.raw).map(|_| ())
        } else {
            g.raw.extend_from_slice(body);
            Ok(())
        }
        .and_then(|()| codec::group_entries(&g.raw, h.entries, &mut g.entries));
        if let Err(e) = decoded {
            self.scratch = bytes;
            return Err(corrupt(&self.dir, e));
        }
        for e in 0..h.entries {
            let host_at = h.hosts_at() + 8 * e;
            let next_at = GROUP_HEADER + 8 * e;
            g.hosts.push(u64::from_le_bytes(
                bytes[host_at..host_at + 8].try_into().expect("8 bytes"),
            ));
            g.nexts.push(u64::from_le_bytes(
                bytes[next_at..next_at + 8].try_into().expect("8 bytes"),
            ));
        }
        self.scratch = bytes;
        Ok(())
    }

    /// [`QueueStore::read_window`] of a version-2 block.
    fn read_block_v2(&mut self, host: u64, at: u64, skip: u32) -> Result<Window, StoreError> {
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
            file.read_exact_at(&mut header, off).map_err(|e| {
                FileError::corrupt(&path, off, format!("cannot read a block header: {e}"))
            })?;
            let h = BlockHeader::parse(&header);
            if h.body_len > MAX_BODY {
                return Err(FileError::corrupt(
                    &path,
                    off,
                    format!("block length {}", h.body_len),
                ));
            }
            body.resize(h.body_len as usize, 0);
            file.read_exact_at(&mut body, off + BLOCK_HEADER as u64)
                .map_err(|e| {
                    FileError::corrupt(&path, off, format!("cannot read a block body: {e}"))
                })?;
        }
        let h = BlockHeader::parse(&header);
        let computed = block_checksum(&header, &body);
        if computed != h.checksum {
            return Err(FileError::corrupt(
                &path,
                off,
                format!(
                    "block checksum {:#010x}, contents hash to {computed:#010x}",
                    h.checksum
                ),
            ));
        }
        if h.host != host {
            return Err(FileError::corrupt(
                &path,
                off,
                format!(
                    "block of host {:#x} where host {host:#x}'s was expected",
                    h.host
                ),
            ));
        }
        if skip >= h.count {
            return Err(FileError::corrupt(
                &path,
                off,
                format!("block holds {} items, {skip} said popped", h.count),
            ));
        }
        if h.flags & !FLAG_LZ4 != 0 || h.reserved != 0 {
            return Err(FileError::corrupt(
                &path,
                off,
                format!("unknown block flags {:#04x} {:#04x}", h.flags, h.reserved),
            ));
        }
        let items = codec::decode_body(&body, h.compressed(), h.count, skip, &mut self.raw_scratch)
            .map_err(|e| FileError::corrupt(&path, off, e))?;
        self.scratch = body;
        Ok(Window {
            items,
            next: self.patches.get(&at).map_or(h.next, |&(n, _)| n),
        })
    }

    pub(super) fn flush_wbuf(&mut self) -> Result<(), StoreError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let path = segment_path(&self.dir, self.active);
        let file = self.files.get(&self.active).expect("active segment open");
        let file = file.try_clone().at("open", &path)?;
        let len = self.wbuf.len() as u64;
        let full = std::mem::take(&mut self.wbuf);
        let mut empty = self
            .writer
            .hand_over(self.active, file, path, self.wbuf_start, full)?;
        empty.reserve(self.options.write_buffer);
        self.wbuf = empty;
        // Their `next` fields were patched in the buffer; from now on they are patched
        // through the map, which a cached copy would not see for links made before.
        self.group_cache.forget_from(self.active, self.wbuf_start);
        self.wbuf_start += len;
        self.seg_len.insert(self.active, self.wbuf_start);
        Ok(())
    }

    /// Seals the active segment and starts the next.
    pub(super) fn roll_segment(&mut self) -> Result<(), StoreError> {
        // No fsync here (it would stall a push or a sync's pause): the sealed segment stays
        // dirty until the next sync's write, and replay cuts at the first bad record whatever
        // the segment.
        self.flush_wbuf()?;
        self.start_segment(self.active + 1)
    }

    pub(super) fn start_segment(&mut self, s: u32) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, s);
        if s > MAX_SEGMENT {
            return Err(durable::IoAt {
                action: "create",
                path,
                source: std::io::Error::other(format!(
                    "segment numbers end at {MAX_SEGMENT} (a location has 24 bits for them); \
                     start the crawl again with --fresh"
                )),
            }
            .into());
        }
        let mut header = [0u8; SEGMENT_HEADER as usize];
        header[0..8].copy_from_slice(&SEGMENT_MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&s.to_le_bytes());
        let file = durable::create_with_header(&path, &header)?;
        self.files.insert(s, file);
        self.seg_len.insert(s, SEGMENT_HEADER);
        self.active = s;
        self.wbuf_start = SEGMENT_HEADER;
        self.dirty.insert(s);
        Ok(())
    }

    pub(super) fn open_segment(&mut self, s: u32) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, s);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .at("open", &path)?;
        let len = file.metadata().at("stat", &path)?.len();
        let mut header = [0u8; SEGMENT_HEADER as usize];
        if len < SEGMENT_HEADER {
            return Err(FileError::corrupt(
                &path,
                0,
                format!("{len} bytes, shorter than a header"),
            ));
        }
        file.read_exact_at(&mut header, 0).at("read", &path)?;
        let header = Header::new(&header);
        if header.array(0) != SEGMENT_MAGIC {
            return Err(FileError::corrupt(
                &path,
                0,
                "not a frontier segment (bad magic)",
            ));
        }
        let version = header.u32(8);
        if !version_readable(version) {
            return Err(FileError::corrupt(&path, 8, version_error(version)));
        }
        if version == VERSION_2 {
            self.legacy.insert(s);
        }
        let number = header.u32(12);
        if number != s {
            return Err(FileError::corrupt(
                &path,
                12,
                format!("says it is segment {number}"),
            ));
        }
        self.files.insert(s, file);
        self.seg_len.insert(s, len);
        Ok(())
    }
}
