//! One sorted run: an immutable file of entries in ascending fingerprint order, written
//! once (to a temporary name, fsynced, renamed) and then only read, in place, through a
//! memory map.
//!
//! Why this shape: a run is what a memtable becomes when it is flushed, and what merges
//! produce; it is never modified, so it needs no locks, no write-ahead log and no in-place
//! update, and a crash can only leave a temporary file (deleted on open) or a whole run. A
//! lookup reads a small fence index held in memory (the first key of every block of about
//! 4 KiB, 2 bytes of RAM per URL of a keys-only run, a fraction of that for values) and
//! then one block of the map: one page touched per lookup, and a batch of sorted keys walks
//! the file forward.
//!
//! # File format (version 1), integers little-endian
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `CRWLRUN1` |
//! | 8 | 4 | version, 1 |
//! | 12 | 4 | flags: bit 0 = entries carry values |
//! | 16 | 8 | n, entries |
//! | 24 | 8 | fence offset: where the fence index starts |
//! | 32 | 8 | fence entries |
//! | 40 | 8 | XXH3-64 of every byte from 64 to the end of the file |
//! | 48 | 16 | reserved, 0 |
//! | 64 | … | entries, keys strictly ascending: the key (u64), and with values its length (u32) and bytes |
//! | fence | 16 each | per block, its first key and the offset of its first entry |
//!
//! A keys-only block is exactly 512 keys (4 KiB); a block with values ends at the first
//! entry that takes it past 4 KiB. The checksum is checked when a run is opened from disk
//! (a resume): a run damaged in place is refused by name rather than answering wrongly.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use super::StateStoreError;
use crate::durable::At;

const MAGIC: &[u8; 8] = b"CRWLRUN1";
const VERSION: u32 = 1;
const HEADER: usize = 64;
const FLAG_VALUES: u32 = 1;
/// Keys per block of a keys-only run: 4 KiB.
const KEYS_PER_BLOCK: u64 = 512;
/// Bytes after which a block with values is closed.
const BLOCK_BYTES: u64 = 4096;

/// A run opened for reading.
pub(crate) struct Run {
    path: PathBuf,
    map: memmap2::Mmap,
    values: bool,
    len: u64,
    /// First key of each block, and where the block starts in the file.
    fence_keys: Vec<u64>,
    fence_offsets: Vec<u64>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Run({}, {} entries)", self.path.display(), self.len)
    }
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

impl Run {
    /// Opens the run at `path`; `verify` checks its checksum (reads the whole file).
    pub(crate) fn open(path: &Path, verify: bool) -> Result<Run, StateStoreError> {
        let corrupt = |what: String| StateStoreError::Corrupt {
            path: path.to_path_buf(),
            what,
        };
        let file = File::open(path).at("open", path)?;
        // SAFETY: a run is never written after it is renamed into place (the store only
        // creates, renames and deletes whole files), so the mapped bytes do not change under
        // the map; a file deleted while mapped stays readable until unmapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.at("map", path)?;
        if map.len() < HEADER {
            return Err(corrupt(format!(
                "{} bytes, shorter than a header",
                map.len()
            )));
        }
        if &map[..8] != MAGIC {
            return Err(corrupt("not a run file (bad magic)".into()));
        }
        let version = read_u32(&map, 8);
        if version != VERSION {
            return Err(corrupt(format!(
                "run format version {version}, this crawler reads 1"
            )));
        }
        let values = read_u32(&map, 12) & FLAG_VALUES != 0;
        let len = read_u64(&map, 16);
        let fence_at = read_u64(&map, 24);
        let fences = read_u64(&map, 32);
        let checksum = read_u64(&map, 40);
        let size = map.len() as u64;
        if fence_at < HEADER as u64
            || fences.checked_mul(16).and_then(|f| f.checked_add(fence_at)) != Some(size)
        {
            return Err(corrupt(format!(
                "fence index at {fence_at} with {fences} entries does not end the file at {size}"
            )));
        }
        if !values && fence_at - HEADER as u64 != len * 8 {
            return Err(corrupt(format!("{len} keys do not fill {fence_at} bytes")));
        }
        if verify && xxhash_rust::xxh3::xxh3_64(&map[HEADER..]) != checksum {
            return Err(corrupt("checksum mismatch (damaged in place)".into()));
        }
        let mut fence_keys = Vec::with_capacity(fences as usize);
        let mut fence_offsets = Vec::with_capacity(fences as usize);
        for i in 0..fences as usize {
            let at = fence_at as usize + 16 * i;
            let offset = read_u64(&map, at + 8);
            if offset < HEADER as u64 || offset >= fence_at {
                return Err(corrupt(format!(
                    "fence entry {i} points outside the entries"
                )));
            }
            fence_keys.push(read_u64(&map, at));
            fence_offsets.push(offset);
        }
        Ok(Run {
            path: path.to_path_buf(),
            map,
            values,
            len,
            fence_keys,
            fence_offsets,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The file's size.
    pub(crate) fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// Bytes of RAM the run holds (its fence index; the map is page cache).
    pub(crate) fn memory(&self) -> u64 {
        (self.fence_keys.capacity() + self.fence_offsets.capacity()) as u64 * 8
    }

    /// Where the entries end (the fence index starts).
    fn entries_end(&self) -> usize {
        read_u64(&self.map, 24) as usize
    }

    /// The block that may hold `key`, as a byte range of entries.
    fn block_of(&self, key: u64) -> Option<(usize, usize)> {
        let i = self.fence_keys.partition_point(|&k| k <= key);
        if i == 0 {
            return None;
        }
        let start = self.fence_offsets[i - 1] as usize;
        let end = self
            .fence_offsets
            .get(i)
            .map_or(self.entries_end(), |&o| o as usize);
        Some((start, end))
    }

    /// Whether the run holds `key`.
    pub(crate) fn contains(&self, key: u64) -> bool {
        if self.values {
            return self.get(key).is_some();
        }
        let Some((start, end)) = self.block_of(key) else {
            return false;
        };
        let (mut lo, mut hi) = (0usize, (end - start) / 8);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let k = read_u64(&self.map, start + 8 * mid);
            match k.cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    /// The value of `key` (empty for a keys-only run), if the run holds it.
    pub(crate) fn get(&self, key: u64) -> Option<&[u8]> {
        if !self.values {
            return self.contains(key).then_some(&[][..]);
        }
        let (mut at, end) = self.block_of(key)?;
        while at + 12 <= end {
            let k = read_u64(&self.map, at);
            let n = read_u32(&self.map, at + 8) as usize;
            let value = at + 12;
            if value + n > end {
                return None;
            }
            if k == key {
                return Some(&self.map[value..value + n]);
            }
            if k > key {
                return None;
            }
            at = value + n;
        }
        None
    }

    /// Every entry in key order.
    pub(crate) fn iter(&self) -> RunIter<'_> {
        RunIter {
            run: self,
            at: HEADER,
            end: self.entries_end(),
        }
    }
}

/// The entries of a run in key order.
pub(crate) struct RunIter<'a> {
    run: &'a Run,
    at: usize,
    end: usize,
}

impl<'a> Iterator for RunIter<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        let map = &self.run.map;
        if self.run.values {
            if self.at + 12 > self.end {
                return None;
            }
            let k = read_u64(map, self.at);
            let n = read_u32(map, self.at + 8) as usize;
            let value = self.at + 12;
            if value + n > self.end {
                return None;
            }
            self.at = value + n;
            Some((k, &map[value..value + n]))
        } else {
            if self.at + 8 > self.end {
                return None;
            }
            let k = read_u64(map, self.at);
            self.at += 8;
            Some((k, &[][..]))
        }
    }
}

/// Writes a run from entries given in strictly ascending key order.
pub(crate) struct RunWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: BufWriter<File>,
    values: bool,
    hash: Xxh3,
    len: u64,
    /// Bytes of entries written so far (after the header).
    written: u64,
    block_start: Option<u64>,
    fence: Vec<(u64, u64)>,
    last: Option<u64>,
}

impl RunWriter {
    /// Starts writing the run that will be `path` (through `path.tmp`).
    pub(crate) fn create(path: &Path, values: bool) -> Result<RunWriter, StateStoreError> {
        let tmp = path.with_extension("tmp");
        let file = File::create(&tmp).at("create", &tmp)?;
        let mut out = BufWriter::with_capacity(1 << 18, file);
        out.write_all(&[0u8; HEADER]).at("write", &tmp)?;
        Ok(RunWriter {
            path: path.to_path_buf(),
            tmp,
            out,
            values,
            hash: Xxh3::new(),
            len: 0,
            written: 0,
            block_start: None,
            fence: Vec::new(),
            last: None,
        })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), StateStoreError> {
        self.hash.update(bytes);
        self.written += bytes.len() as u64;
        self.out.write_all(bytes).at("write", &self.tmp)?;
        Ok(())
    }

    /// Appends an entry; `key` must be above the previous one, `value` empty without values.
    pub(crate) fn push(&mut self, key: u64, value: &[u8]) -> Result<(), StateStoreError> {
        if self.last.is_some_and(|last| key <= last) {
            return Err(StateStoreError::Corrupt {
                path: self.tmp.clone(),
                what: format!("key {key:016x} written out of order"),
            });
        }
        self.last = Some(key);
        let at = HEADER as u64 + self.written;
        let new_block = match self.block_start {
            None => true,
            Some(start) if self.values => at - start >= BLOCK_BYTES,
            Some(_) => self.len % KEYS_PER_BLOCK == 0,
        };
        if new_block {
            self.block_start = Some(at);
            self.fence.push((key, at));
        }
        self.put(&key.to_le_bytes())?;
        if self.values {
            let n = u32::try_from(value.len()).map_err(|_| StateStoreError::Corrupt {
                path: self.tmp.clone(),
                what: format!("a value of {} bytes", value.len()),
            })?;
            self.put(&n.to_le_bytes())?;
            self.put(value)?;
        }
        self.len += 1;
        Ok(())
    }

    /// Writes the fence and header, fsyncs, renames into place and opens the run.
    pub(crate) fn finish(mut self) -> Result<Run, StateStoreError> {
        let fence_at = HEADER as u64 + self.written;
        let fences = self.fence.len() as u64;
        for (key, offset) in std::mem::take(&mut self.fence) {
            self.put(&key.to_le_bytes())?;
            self.put(&offset.to_le_bytes())?;
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        let flags = if self.values { FLAG_VALUES } else { 0 };
        header[12..16].copy_from_slice(&flags.to_le_bytes());
        header[16..24].copy_from_slice(&self.len.to_le_bytes());
        header[24..32].copy_from_slice(&fence_at.to_le_bytes());
        header[32..40].copy_from_slice(&fences.to_le_bytes());
        header[40..48].copy_from_slice(&self.hash.digest().to_le_bytes());
        let tmp = self.tmp.clone();
        let mut file = self
            .out
            .into_inner()
            .map_err(|e| e.into_error())
            .at("write", &tmp)?;
        file.seek(SeekFrom::Start(0)).at("seek in", &tmp)?;
        file.write_all(&header).at("write", &tmp)?;
        file.sync_all().at("fsync", &tmp)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).at("rename into place", &self.path)?;
        if let Some(dir) = self.path.parent() {
            crate::durable::sync_dir(dir)?;
        }
        Run::open(&self.path, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_only_run_finds_exactly_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.run");
        let mut w = RunWriter::create(&path, false).unwrap();
        let keys: Vec<u64> = (0..5000u64).map(|i| i * 7 + 3).collect();
        for &k in &keys {
            w.push(k, &[]).unwrap();
        }
        let run = w.finish().unwrap();
        assert_eq!(run.len(), 5000);
        for &k in &keys {
            assert!(run.contains(k), "{k}");
            assert!(!run.contains(k + 1), "{}", k + 1);
        }
        assert!(!run.contains(0) && !run.contains(u64::MAX));
        let back: Vec<u64> = run.iter().map(|(k, _)| k).collect();
        assert_eq!(back, keys);
        let reopened = Run::open(&path, true).unwrap();
        assert!(reopened.contains(3) && reopened.contains(7 * 4999 + 3));
    }

    #[test]
    fn value_run_gives_each_value_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.run");
        let mut w = RunWriter::create(&path, true).unwrap();
        for i in 0..3000u64 {
            w.push(
                i * 2,
                format!("value {i} {}", "x".repeat((i % 300) as usize)).as_bytes(),
            )
            .unwrap();
        }
        let run = w.finish().unwrap();
        for i in 0..3000u64 {
            let v = run.get(i * 2).unwrap();
            assert!(v.starts_with(format!("value {i} ").as_bytes()));
            assert!(run.get(i * 2 + 1).is_none());
        }
        assert_eq!(run.iter().count(), 3000);
    }

    #[test]
    fn out_of_order_keys_and_damage_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.run");
        let mut w = RunWriter::create(&path, false).unwrap();
        w.push(5, &[]).unwrap();
        assert!(w.push(5, &[]).is_err());
        let mut w = RunWriter::create(&path, false).unwrap();
        for k in 0..100 {
            w.push(k, &[]).unwrap();
        }
        drop(w.finish().unwrap());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + 10] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Run::open(&path, true).unwrap_err().to_string();
        assert!(e.contains("checksum") && e.contains("r.run"), "{e}");
        std::fs::write(&path, b"short").unwrap();
        assert!(Run::open(&path, false).is_err());
    }
}
