//! Syncs: the fast half in the pause ([`QueueStore::begin_sync`]: tails written, table
//! encoded), the slow half anywhere ([`PendingSync::write`]: deferred links, fsyncs, the table
//! file), and the bookkeeping after ([`QueueStore::finish_sync`]: old tables and segments
//! deleted).

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use super::format::{
    encode_item, loc, loc_offset, loc_segment, segment_path, table_path, TABLE_MAGIC, VERSION,
};
use super::{QueueStore, QueuedUrl, StoreError, StorePosition};
use crate::durable::{self, At, Staged};

/// The slow half of a sync, detached from the store so that it can run on another thread:
/// see [`QueueStore::begin_sync`].
pub struct PendingSync {
    dir: PathBuf,
    /// Deferred `next` links: (`segment << 32 | offset` of the field, next), in no particular
    /// order.
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
            table_checksum: *self
                .checksum
                .get_or_init(|| durable::checksum_of(&[&self.table])),
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
        for &(target, next) in &self.patches {
            let s = loc_segment(target);
            while i < self.files.len() && self.files[i].0 < s {
                i += 1;
            }
            let Some((_, path, f)) = self.files.get(i).filter(|(n, _, _)| *n == s) else {
                return Err(StoreError::Missing {
                    path: segment_path(&self.dir, s),
                    what: "a block to link from is in it".into(),
                });
            };
            f.write_all_at(&next.to_le_bytes(), loc_offset(target))
                .at("write", path)?;
            fsync[i] = true;
        }
        for ((_, path, f), _) in self.files.iter().zip(&fsync).filter(|(_, &y)| y) {
            f.sync_data().at("fsync", path)?;
        }
        let path = table_path(&self.dir, position.generation);
        let mut file = Staged::create(&path, path.with_extension("tmp"))?;
        file.write_all(&self.table)?;
        file.write_all(&position.table_checksum.to_le_bytes())?;
        file.sync()?.install()?;
        let mut table = self.table;
        table.clear();
        if let Ok(mut slot) = self.table_buf.lock() {
            *slot = table;
        }
        Ok(position)
    }
}

impl QueueStore {
    /// Makes everything pushed so far durable and returns the position a checkpoint records:
    /// [`QueueStore::begin_sync`], `PendingSync::write` and [`QueueStore::finish_sync`] in a row.
    pub fn sync(&mut self) -> Result<StorePosition, StoreError> {
        let pending = self.begin_sync()?;
        let position = pending.write()?;
        self.finish_sync(position)?;
        Ok(position)
    }

    /// The fast half of a sync, which must run where the store is owned: writes every tail as
    /// a block, hands the log to the operating system, and encodes the table in memory (about
    /// 40 bytes per host with something queued). The returned `PendingSync` does the slow
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
        // What the sync's write fsyncs and links must be in the files first.
        self.writer.wait()?;
        // The deferred links, unsorted: `PendingSync::write` sorts them, off the pause.
        let mut patches = Vec::with_capacity(self.patches.len());
        let (mut lo, mut hi) = (u32::MAX, 0);
        for (&block, &(next, _)) in &self.patches {
            patches.push((self.patch_target(block), next));
            lo = lo.min(loc_segment(block));
            hi = hi.max(loc_segment(block));
        }
        let written = std::mem::take(&mut self.dirty);
        let mut files = Vec::new();
        for (&s, f) in &self.files {
            if (lo..=hi).contains(&s) || written.contains(&s) {
                let path = segment_path(&self.dir, s);
                let f = f.try_clone().at("open", &path)?;
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

    /// Records that the table of `position` is on disk (its `PendingSync::write` returned it),
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
        // Links that left the map: cached `next` fields may be stale (see `group_cache.rs`).
        self.group_cache.clear();
        self.table_bytes += len;
        self.retained.push_back((generation, oldest_needed));
        while self.retained.len() > 2 {
            let (g, _) = self.retained.pop_front().expect("non-empty");
            let p = table_path(&self.dir, g);
            let len = fs::metadata(&p).map_or(0, |m| m.len());
            fs::remove_file(&p).at("remove", &p)?;
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
    pub(super) fn gc(&mut self) -> Result<(), StoreError> {
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
            fs::remove_file(&p).at("remove", &p)?;
        }
        Ok(())
    }

    /// The table (format in the module doc) without its checksum trailer, which
    /// [`PendingSync`] computes off the pause. This is most of a sync's pause with many hosts
    /// (~40 bytes per host), hence one fixed record per host, copied in one go, and no lookup
    /// or box read for the hosts that have nothing to add to it (see `maybe_flying`).
    pub(super) fn encode_table(
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
            extra_bytes += encoded_len(item);
            maybe_flying[bit(*host) / 64] |= 1 << (bit(*host) % 64);
        }
        // A host with a tally keeps an empty entry (see `HostTally`): it has a record only
        // for URLs in flight, as a host without an entry.
        let extra_hosts = extra
            .keys()
            .filter(|h| self.hosts.get(h).is_none_or(|e| e.is_empty()))
            .count();
        let hosts = self.host_count() + extra_hosts;
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
        // Exactly: `reserve` would double a buffer kept from a sync with fewer hosts (a 34 MB
        // one grown to 68 MB for a 40 MB table, measured with heaptrack at 1e6 hosts), and the
        // store keeps it between syncs. The front items, not counted in `size`, are reserved
        // for the same way as they come.
        t.reserve_exact(size);
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
        for (&host, e) in self.hosts.iter() {
            let b = bit(host);
            let flying = if maybe_flying[b / 64] & (1 << (b % 64)) != 0 {
                extra.get(&host).map_or(&[][..], |v| &v[..])
            } else {
                &[]
            };
            if e.is_empty() && flying.is_empty() {
                continue;
            }
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
                t.reserve_exact(m.front.iter().map(encoded_len).sum());
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
}

/// The bytes [`encode_item`] writes for `item`, or a little more.
fn encoded_len(item: &QueuedUrl) -> usize {
    24 + item.url.len() + item.parent.as_ref().map_or(0, |p| p.len())
}
