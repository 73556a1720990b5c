//! Opening the store: at the newest table ([`QueueStore::open`]), at a position with the log
//! after it replayed ([`QueueStore::reopen_at`]) or dropped
//! ([`QueueStore::reopen_discarding_after`]), and checking a position without opening
//! ([`QueueStore::check_position`]). See "Durability and recovery" in the module doc.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::codec;
use super::format::{
    block_checksum, decode_item, entry_loc, group_checksum, loc_offset, loc_segment,
    parse_table_header, segment_path, table_path, BlockHeader, GroupHeader, TableHeader,
    BLOCK_HEADER, FLAG_LZ4, GROUP_HEADER, MAX_BODY, SEGMENT_HEADER, TABLE_HEADER, TABLE_MIN,
};
use super::item_bytes;
use super::{HostEntry, HostMem, QueueStore, StoreError, StoreOptions, StorePosition};
use crate::durable::{self, At, Cursor, FileError};

impl QueueStore {
    /// Opens the store in `dir`, creating it if it holds none, or recovering the state of the
    /// newest table plus the intact blocks appended after it.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<QueueStore, StoreError> {
        fs::create_dir_all(dir).at("create", dir)?;
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

    pub(super) fn create(dir: &Path, options: StoreOptions) -> Result<QueueStore, StoreError> {
        let (segments, _) = list_dir(dir)?;
        for s in segments {
            let p = segment_path(dir, s);
            fs::remove_file(&p).at("remove", &p)?;
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
    pub(crate) fn check_position(dir: &Path, position: StorePosition) -> Result<(), StoreError> {
        let path = table_path(dir, position.generation);
        let bytes = fs::read(&path).at("read", &path)?;
        let trailer = durable::split_trailer(&bytes).filter(|_| bytes.len() >= TABLE_MIN);
        let Some(trailer) = trailer else {
            let what = format!("{} bytes, shorter than a table", bytes.len());
            return Err(FileError::corrupt(&path, 0, what));
        };
        if !trailer.matches() || trailer.stored != position.table_checksum {
            let what = "checksum mismatch; the table was damaged or is not this position's";
            return Err(FileError::corrupt(&path, 0, what));
        }
        // A whole table of another format version is named as such, not used.
        parse_table_header(&path, &bytes)?;
        Ok(())
    }

    /// Reopens the store exactly as of `position`: like [`QueueStore::reopen_at`], but every
    /// block appended after the position is dropped instead of replayed, for a caller that
    /// logs its own pushes since its checkpoint and pushes them again (they would otherwise be
    /// queued twice). The log is cut at the position's log end: later segments are deleted
    /// (newest first) and the directory fsynced, then the position's segment is truncated and
    /// fsynced, before anything new is written there. What was dropped is reported in
    /// [`RecoveryReport::discarded_bytes`](super::RecoveryReport::discarded_bytes) and
    /// [`RecoveryReport::discarded_segments`](super::RecoveryReport::discarded_segments), not
    /// as a `cut` (it is not damage). Items popped after the position are queued again, and the
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

    pub(super) fn reopen(
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
            fs::remove_file(&p).at("remove", &p)?;
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
                let len = fs::metadata(&p).at("stat", &p)?.len();
                fs::remove_file(&p).at("remove", &p)?;
                store.recovery.discarded_bytes += len;
                store.recovery.discarded_segments += 1;
                segments.pop();
            }
            if store.recovery.discarded_segments > 0 {
                // Durable before the truncation below: else a power cut could bring the later
                // segments back after a shortened one, a gap that a replay would skip over.
                durable::sync_dir(dir)?;
            }
        }
        let last = segments.last().copied().unwrap_or(end_seg);
        for &s in &segments.clone() {
            if s < header.oldest_needed.min(end_seg) {
                // Kept for an older table only: counted, deleted by a later sync's GC.
                let p = segment_path(dir, s);
                let len = fs::metadata(&p).at("stat", &p)?.len();
                store.seg_len.insert(s, len);
                continue;
            }
            match store.open_segment(s) {
                Ok(()) => {}
                // A segment started just before a crash whose header did not reach the disk:
                // a torn write like any other, cut.
                Err(StoreError::Corrupt { path, offset, what }) if s == last && s > end_seg => {
                    fs::remove_file(&path).at("remove", &path)?;
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
    pub(super) fn discard_after(&mut self, log_end: u64) -> Result<(), StoreError> {
        let (s, end) = (loc_segment(log_end), loc_offset(log_end));
        let path = segment_path(&self.dir, s);
        let len = self.seg_len[&s];
        if end > len {
            return Err(FileError::corrupt(
                &path,
                len,
                format!("the table's log end is at byte {end}, the file ends at {len}"),
            ));
        }
        if end < len {
            let file = self.files.get(&s).expect("opened");
            file.set_len(end).at("truncate", &path)?;
            // Before anything is appended where the dropped blocks were: else a power cut could
            // keep the new blocks' first pages and the dropped ones after them, which a replay
            // would link back (their sequence numbers still increase).
            file.sync_data().at("fsync", &path)?;
            self.recovery.discarded_bytes += len - end;
        }
        self.seg_len.insert(s, end);
        self.active = s;
        self.wbuf_start = end;
        self.leave_legacy_segment()
    }

    /// Links back every intact block after `log_end`, cuts the log at the first that is not,
    /// and makes the last segment the active one.
    pub(super) fn replay(&mut self, log_end: u64, segments: &[u32]) -> Result<(), StoreError> {
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
                return Err(FileError::corrupt(
                    &path,
                    len,
                    format!("the table's log end is at byte {off}, the file ends at {len}"),
                ));
            }
            let file = self.files.get(&s).expect("opened").try_clone();
            let file = file.at("open", &path)?;
            // Reading the rest of the segment in one go: it is at most `segment_bytes`.
            let mut bytes = vec![0u8; (len - off) as usize];
            file.read_exact_at(&mut bytes, off).at("read", &path)?;
            let mut at = 0usize;
            let mut cut = None;
            let legacy = self.legacy.contains(&s);
            while at < bytes.len() {
                let record = if legacy {
                    self.check_block(&bytes[at..])
                        .map(|h| (h.span(), vec![(h.host, h.count)]))
                } else {
                    self.check_group(&bytes[at..])
                };
                match record {
                    Ok((span, entries)) => {
                        self.next_seq += 1;
                        self.recovery.blocks_replayed += entries.len() as u64;
                        for (i, (host, count)) in entries.into_iter().enumerate() {
                            *self.live.entry(s).or_default() += count as u64;
                            self.recovery.items_replayed += count as u64;
                            self.total += count as u64;
                            self.link(host, entry_loc(s, off + at as u64, i), count)?;
                        }
                        at += span as usize;
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
                    fs::remove_file(&p).at("remove", &p)?;
                }
                durable::sync_dir(&self.dir)?;
                file.set_len(cut_at).at("truncate", &path)?;
                file.sync_data().at("fsync", &path)?;
                self.recovery.cut = Some((path, cut_at, why));
                self.seg_len.insert(s, cut_at);
                last = s;
                break;
            }
        }
        self.active = last;
        self.wbuf_start = self.seg_len[&last];
        self.leave_legacy_segment()
    }

    /// New records go to a segment of this version: if the active segment is of version 2
    /// (a store written before groups), the next one is started.
    fn leave_legacy_segment(&mut self) -> Result<(), StoreError> {
        if self.legacy.contains(&self.active) {
            self.start_segment(self.active + 1)?;
        }
        Ok(())
    }

    /// Whether `bytes` start with a whole, valid group following the last record seen; its
    /// span and (host, item count) of each entry.
    pub(super) fn check_group(&mut self, bytes: &[u8]) -> Result<(u64, Vec<(u64, u32)>), String> {
        let Some(header) = bytes.first_chunk::<GROUP_HEADER>() else {
            return Err(format!(
                "{} bytes, shorter than a group header",
                bytes.len()
            ));
        };
        let h = GroupHeader::parse(header);
        h.check()?;
        let span = h.span();
        if (bytes.len() as u64) < span {
            return Err(format!("group of {span} bytes, {} left", bytes.len()));
        }
        let hosts = &bytes[h.hosts_at()..h.body_at()];
        let body = &bytes[h.body_at()..h.body_at() + h.body_len as usize];
        let computed = group_checksum(header, hosts, body);
        if computed != h.checksum {
            return Err(format!(
                "group checksum {:#010x}, contents hash to {computed:#010x}",
                h.checksum
            ));
        }
        if h.seq != self.next_seq as u32 {
            return Err(format!(
                "group sequence {} where {} was expected",
                h.seq, self.next_seq as u32
            ));
        }
        let raw = codec::raw_body(body, h.compressed(), &mut self.raw_scratch)?;
        codec::group_entries(raw, h.entries, &mut self.entry_scratch)?;
        let entries = (0..h.entries)
            .map(|i| {
                let host = u64::from_le_bytes(hosts[8 * i..8 * i + 8].try_into().expect("8"));
                (host, self.entry_scratch[i].0)
            })
            .collect();
        Ok((span, entries))
    }

    /// Whether `bytes` start with a whole, valid block following the last one seen.
    pub(super) fn check_block(&self, bytes: &[u8]) -> Result<BlockHeader, String> {
        let Some(header) = bytes.first_chunk::<BLOCK_HEADER>() else {
            return Err(format!(
                "{} bytes, shorter than a block header",
                bytes.len()
            ));
        };
        let h = BlockHeader::parse(header);
        if h.body_len == 0 || h.body_len > MAX_BODY || h.count == 0 {
            return Err(format!(
                "impossible block length {} or count {}",
                h.body_len, h.count
            ));
        }
        if h.flags & !FLAG_LZ4 != 0 || h.reserved != 0 {
            return Err(format!(
                "unknown block flags {:#04x} {:#04x}",
                h.flags, h.reserved
            ));
        }
        let span = h.span() as usize;
        if bytes.len() < span {
            return Err(format!("block of {span} bytes, {} left", bytes.len()));
        }
        let body = &bytes[BLOCK_HEADER..BLOCK_HEADER + h.body_len as usize];
        let computed = block_checksum(header, body);
        if computed != h.checksum {
            return Err(format!(
                "block checksum {:#010x}, contents hash to {computed:#010x}",
                h.checksum
            ));
        }
        if h.seq != self.next_seq as u32 {
            return Err(format!(
                "block sequence {} where {} was expected",
                h.seq, self.next_seq as u32
            ));
        }
        Ok(h)
    }

    pub(super) fn load_table(
        &mut self,
        path: &Path,
        position: StorePosition,
    ) -> Result<TableHeader, StoreError> {
        let bytes = fs::read(path).at("read", path)?;
        let header = parse_table_header(path, &bytes)?;
        let Some(trailer) = durable::split_trailer(&bytes) else {
            return Err(FileError::corrupt(path, 0, "shorter than its checksum"));
        };
        let (stored, computed) = (trailer.stored, trailer.computed);
        if !trailer.matches() {
            return Err(FileError::corrupt(
                path,
                trailer.body.len() as u64,
                format!("table checksum {stored:#018x}, contents hash to {computed:#018x}"),
            ));
        }
        if stored != position.table_checksum
            || header.generation != position.generation
            || header.log_end != position.log_end
        {
            return Err(FileError::corrupt(
                path,
                0,
                "this table is not the one the position recorded (checksum, generation or log end differ)",
            ));
        }
        let mut r = Cursor::new(trailer.body, TABLE_HEADER);
        let bad = |r: &Cursor, e: String| FileError::corrupt(path, r.position() as u64, e);
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
                tail_len: 0,
                tail_slot: super::tails::NO_TAIL,
                tally: Default::default(),
            };
            if front > 0 {
                let mut mem = Box::<HostMem>::default();
                for _ in 0..front {
                    let item = decode_item(&mut r).map_err(|e| bad(&r, e))?;
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
        if !r.at_end() {
            return Err(FileError::corrupt(
                path,
                r.position() as u64,
                "bytes left after the last record",
            ));
        }
        self.next_seq = header.next_seq;
        Ok(header)
    }
}

pub(super) fn read_table_header(path: &Path) -> Result<TableHeader, StoreError> {
    let file = File::open(path).at("open", path)?;
    let mut bytes = [0u8; TABLE_MIN];
    let n = file.read_at(&mut bytes, 0).at("read", path)?;
    parse_table_header(path, &bytes[..n])
}

pub(super) fn read_table_checksum(path: &Path) -> Result<u64, StoreError> {
    let file = File::open(path).at("open", path)?;
    let len = file.metadata().at("stat", path)?.len();
    if len < TABLE_MIN as u64 {
        return Err(FileError::corrupt(
            path,
            0,
            format!("{len} bytes, shorter than a table"),
        ));
    }
    let mut b = [0u8; durable::TRAILER_LEN];
    file.read_exact_at(&mut b, len - durable::TRAILER_LEN as u64)
        .at("read", path)?;
    Ok(u64::from_le_bytes(b))
}

/// Segment numbers and table generations in `dir`, ascending; `*.tmp` files are removed.
pub(super) fn list_dir(dir: &Path) -> Result<(Vec<u32>, Vec<u64>), StoreError> {
    let mut segments = Vec::new();
    let mut tables = Vec::new();
    for entry in fs::read_dir(dir).at("list", dir)? {
        let entry = entry.at("list", dir)?;
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
            fs::remove_file(&p).at("remove", &p)?;
        }
    }
    segments.sort_unstable();
    tables.sort_unstable();
    Ok((segments, tables))
}
