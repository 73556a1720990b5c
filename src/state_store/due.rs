//! The store's states in the order of a key per state (a recrawl's: the time a URL fell
//! due), read in batches, in memory bounded whatever the store's size: an external merge
//! sort of `(key, fingerprint)` pairs, then the states looked up by fingerprint.
//!
//! Why this and not a second index kept sorted by due time: a URL's due time changes with
//! every fetch, so an index by it needs a delete for each update, which the runs (see
//! `table.rs`) do not have; and the order is needed once per generation (a recrawl's start)
//! or when a continuous recrawl starts. One pass over the store, chunks of
//! [`CHUNK_PAIRS`] pairs (16 MiB) sorted in memory and written to a scratch directory, then
//! a k-way merge read through 64 KiB buffers: 16 bytes of disk per selected URL for the time
//! of the generation's start, and about 16 MiB + 64 KiB per chunk of RAM (10^8 URLs: 100
//! chunks, ~23 MiB). A store that fits one chunk never touches the disk.
//!
//! Guarantees: every state the key selects comes out exactly once, in ascending `(key,
//! fingerprint)` order (ties broken by fingerprint: deterministic for a given store); the
//! states are read back from the store when their batch is taken, so a state written after
//! the pass is seen with its new value (its place in the order is its old key's).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{StateStore, StateStoreError, UrlFingerprint, UrlState};
use crate::durable::{At, IoAt};

/// Pairs sorted in memory before a chunk is written: 16 MiB.
pub(crate) const CHUNK_PAIRS: usize = 1 << 20;

/// Sorts `pairs` and writes them as the next chunk file in `scratch`, emptying `pairs`.
fn spill(
    scratch: &Path,
    paths: &mut Vec<PathBuf>,
    pairs: &mut Vec<(u64, u64)>,
) -> Result<(), StateStoreError> {
    std::fs::create_dir_all(scratch).at("create", scratch)?;
    let path = scratch.join(format!("chunk-{:06}", paths.len()));
    pairs.sort_unstable();
    let file = File::create(&path).at("create", &path)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    for (k, fp) in pairs.drain(..) {
        out.write_all(&k.to_le_bytes()).at("write", &path)?;
        out.write_all(&fp.to_le_bytes()).at("write", &path)?;
    }
    out.flush().at("write", &path)?;
    paths.push(path);
    Ok(())
}

/// One chunk on disk being merged: its reader and its next pair.
struct ChunkReader {
    reader: BufReader<File>,
    path: PathBuf,
}

impl ChunkReader {
    fn next(&mut self) -> Result<Option<(u64, u64)>, StateStoreError> {
        let mut pair = [0u8; 16];
        match self.reader.read_exact(&mut pair) {
            Ok(()) => {
                let (key, fp) = pair.split_at(8);
                let word = |b: &[u8]| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(b);
                    u64::from_le_bytes(w)
                };
                Ok(Some((word(key), word(fp))))
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(source) => Err(IoAt {
                action: "read",
                path: self.path.clone(),
                source,
            }
            .into()),
        }
    }
}

/// The selected states of a store in key order: see the module doc.
pub struct DueOrder {
    store: Arc<StateStore>,
    /// Pairs not yet taken when everything fitted one chunk (descending: taken from the end).
    in_memory: Vec<(u64, u64)>,
    chunks: Vec<ChunkReader>,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    scratch: Option<PathBuf>,
    len: u64,
}

impl DueOrder {
    /// One pass over `store`: `key` gives each state its place, `None` leaves it out (it may
    /// also look at the states it leaves out: the pass is the caller's only one). Chunks
    /// that do not fit in memory go to `scratch` (created, and removed when this is dropped).
    pub fn build(
        store: Arc<StateStore>,
        scratch: &Path,
        key: impl FnMut(&UrlState) -> Option<u64>,
    ) -> Result<DueOrder, StateStoreError> {
        Self::build_in_chunks(store, scratch, CHUNK_PAIRS, key)
    }

    pub(crate) fn build_in_chunks(
        store: Arc<StateStore>,
        scratch: &Path,
        chunk_pairs: usize,
        mut key: impl FnMut(&UrlState) -> Option<u64>,
    ) -> Result<DueOrder, StateStoreError> {
        let _ = std::fs::remove_dir_all(scratch);
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut failed = None;
        let mut len = 0u64;
        store.for_each_state(|fp, state| {
            if let Some(k) = key(&state) {
                pairs.push((k, fp.0));
                len += 1;
                if pairs.len() >= chunk_pairs {
                    if let Err(e) = spill(scratch, &mut paths, &mut pairs) {
                        failed = Some(e);
                        return false;
                    }
                }
            }
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        let mut order = DueOrder {
            store,
            in_memory: Vec::new(),
            chunks: Vec::new(),
            heap: BinaryHeap::new(),
            scratch: None,
            len,
        };
        if paths.is_empty() {
            pairs.sort_unstable_by(|a, b| b.cmp(a));
            order.in_memory = pairs;
            return Ok(order);
        }
        if !pairs.is_empty() {
            spill(scratch, &mut paths, &mut pairs)?;
        }
        drop(pairs);
        order.scratch = Some(scratch.to_path_buf());
        for path in paths {
            let file = File::open(&path).at("open", &path)?;
            let mut chunk = ChunkReader {
                reader: BufReader::with_capacity(1 << 16, file),
                path,
            };
            if let Some((k, fp)) = chunk.next()? {
                order.heap.push(Reverse((k, fp, order.chunks.len())));
            }
            order.chunks.push(chunk);
        }
        Ok(order)
    }

    /// How many states the pass selected.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next (up to) `n` pairs in order: key and fingerprint.
    fn next_pairs(&mut self, n: usize) -> Result<Vec<(u64, u64)>, StateStoreError> {
        let mut out = Vec::with_capacity(n.min(1 << 16));
        if self.chunks.is_empty() {
            for _ in 0..n {
                match self.in_memory.pop() {
                    Some(pair) => out.push(pair),
                    None => break,
                }
            }
            return Ok(out);
        }
        while out.len() < n {
            let Some(Reverse((k, fp, chunk))) = self.heap.pop() else {
                break;
            };
            out.push((k, fp));
            if let Some((k, fp)) = self.chunks[chunk].next()? {
                self.heap.push(Reverse((k, fp, chunk)));
            }
        }
        Ok(out)
    }

    /// The next (up to) `n` states in order, each with its key; empty when all are taken.
    /// A state no longer in the store (it cannot be: states are never removed) is skipped.
    pub fn next_batch(&mut self, n: usize) -> Result<Vec<(u64, UrlState)>, StateStoreError> {
        let pairs = self.next_pairs(n)?;
        let fps: Vec<UrlFingerprint> = pairs.iter().map(|(_, fp)| UrlFingerprint(*fp)).collect();
        let states = self.store.get_batch(&fps)?;
        Ok(pairs
            .into_iter()
            .zip(states)
            .filter_map(|((k, _), state)| Some((k, state?)))
            .collect())
    }
}

impl Drop for DueOrder {
    fn drop(&mut self) {
        self.chunks.clear();
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_of(n: u64) -> (tempfile::TempDir, Arc<StateStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(&dir.path().join("urls")).unwrap();
        let entries: Vec<(UrlFingerprint, UrlState)> = (0..n)
            .map(|i| {
                let state = UrlState {
                    url: format!("http://a.test/{i}"),
                    status: 200,
                    // Many ties, out of order.
                    fetched_at: (i * 7919) % 97,
                    ..UrlState::default()
                };
                (UrlFingerprint::of(&state.url), state)
            })
            .collect();
        store.put_batch(&entries).unwrap();
        (dir, Arc::new(store))
    }

    fn drain(order: &mut DueOrder, batch: usize) -> Vec<(u64, String)> {
        let mut all = Vec::new();
        loop {
            let got = order.next_batch(batch).unwrap();
            if got.is_empty() {
                return all;
            }
            all.extend(got.into_iter().map(|(k, s)| (k, s.url)));
        }
    }

    #[test]
    fn states_come_out_once_each_in_key_order_in_memory_and_through_chunks() {
        let (dir, store) = store_of(5000);
        let scratch = dir.path().join("scratch");
        let select = |s: &UrlState| (s.fetched_at % 5 != 0).then_some(s.fetched_at);
        let mut whole = DueOrder::build(store.clone(), &scratch, select).unwrap();
        assert!(!scratch.exists(), "one chunk stays in memory");
        let mut chunked = DueOrder::build_in_chunks(store, &scratch, 333, select).unwrap();
        assert!(scratch.join("chunk-000000").exists());
        let (a, b) = (drain(&mut whole, 1000), drain(&mut chunked, 77));
        assert_eq!(a, b);
        assert_eq!(a.len() as u64, whole.len());
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(a.iter().all(|(k, _)| k % 5 != 0));
        let distinct: std::collections::HashSet<&String> = a.iter().map(|(_, u)| u).collect();
        assert_eq!(distinct.len(), a.len());
        let expected = (0..5000u64).filter(|i| ((i * 7919) % 97) % 5 != 0).count();
        assert_eq!(a.len(), expected);
        drop(chunked);
        assert!(!scratch.exists(), "scratch removed");
    }
}
