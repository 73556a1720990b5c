//! Appending to the log: a host's tail written as a block, the `next` link from its previous
//! block (in the write buffer, or deferred), a block read back into a host's window, and the
//! segment files (started, sealed, opened).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use super::codec;
use super::format::{
    block_checksum, loc, loc_offset, loc_segment, segment_path, version_error, BlockHeader,
    BLOCK_HEADER, FLAG_LZ4, MAX_BODY, NEXT_FIELD, SEGMENT_HEADER, SEGMENT_MAGIC, VERSION,
};
use super::{item_bytes, QueueStore, StoreError, Window, PATCH_BYTES};
use crate::durable::{self, At, FileError, Header};

impl QueueStore {
    pub(super) fn write_all_tails(&mut self) -> Result<(), StoreError> {
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
    pub(super) fn write_tail(&mut self, host: u64) -> Result<(), StoreError> {
        let Some(entry) = self.hosts.get_mut(&host) else {
            return Ok(());
        };
        let Some(mem) = entry.mem.as_mut() else {
            return Ok(());
        };
        if mem.tail.is_empty() {
            return Ok(());
        }
        let mut body = std::mem::take(&mut self.scratch);
        let compressed = codec::encode_body(&mem.tail, &mut body, &mut self.raw_scratch);
        for item in &mem.tail {
            self.item_mem -= item_bytes(item);
            self.tail_mem -= item_bytes(item);
        }
        let count = mem.tail.len() as u32;
        // Cleared, not dropped, when small: it goes on serving this host, or a spare box.
        mem.tail.clear();
        if mem.tail.capacity() > super::SPARE_TAIL {
            mem.tail = Vec::new();
        }
        let flags = if compressed { FLAG_LZ4 } else { 0 };
        let mut header =
            BlockHeader::encode(body.len(), count as usize, flags, host, self.next_seq);
        let checksum = block_checksum(&header, &body);
        header[20..24].copy_from_slice(&checksum.to_le_bytes());
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
            super::recycle(&mut self.spare, entry.mem.take());
            self.boxes -= 1;
        }
        Ok(())
    }

    /// Appends the block at `at` (of `count` items) to `host`'s chain on disk.
    pub(super) fn link(&mut self, host: u64, at: u64, count: u32) -> Result<(), StoreError> {
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

    pub(super) fn patch_next(&mut self, block: u64, next: u64) -> Result<(), StoreError> {
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
    pub(super) fn max_patches(&self) -> usize {
        (self.options.memory / 8 / PATCH_BYTES) as usize
    }

    /// Writes every deferred patch now, in location order.
    pub(super) fn apply_patches_now(&mut self) -> Result<(), StoreError> {
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
                .at("write", &path)?;
            self.dirty.insert(s);
        }
        self.patches.clear();
        self.patches.shrink_to(1024);
        Ok(())
    }

    /// Reads the block at `at`, checks that it is whole and `host`'s, and returns its items
    /// after the first `skip`.
    pub(super) fn read_window(
        &mut self,
        host: u64,
        at: u64,
        skip: u32,
    ) -> Result<Window, StoreError> {
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
        file.write_all_at(&self.wbuf, self.wbuf_start)
            .at("write", &path)?;
        self.wbuf_start += self.wbuf.len() as u64;
        self.seg_len.insert(self.active, self.wbuf_start);
        self.wbuf.clear();
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
        if version != VERSION {
            return Err(FileError::corrupt(&path, 8, version_error(version)));
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
