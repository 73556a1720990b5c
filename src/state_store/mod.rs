//! The per-URL state store on disk, and the exact set of admitted URLs behind the Bloom
//! filter (`[seen] exact`).
//!
//! Two stores on one engine (`table`: a memtable, immutable sorted runs merged in the
//! background, manifests naming durable states), both keyed by a [`UrlFingerprint`]:
//! - [`StateStore`]: what a recrawl needs to know of each URL it fetched ([`UrlState`]: last
//!   fetch, status, validators, payload digest and the archive record a revisit refers to,
//!   how often it changed, when it is due). It is written from the crawl's records as the
//!   output thread writes them (`StateSink`), so it follows `pages.jsonl`, the crawl's
//!   journal; its manifest says how far into that journal it goes, and opening it re-applies
//!   the records after that point ([`StateStore::open_for_journal`]), or rebuilds the whole
//!   store from the journal when it is missing or ahead of it.
//! - [`AdmittedSet`]: the fingerprints of every URL the crawl admitted, keys only (8 bytes
//!   per URL on disk). The Bloom filter stays in front: a link it has never seen is new
//!   without a lookup; a "maybe seen" is confirmed here, in batches per page on the parse
//!   threads, so no new URL is skipped as a false positive. It is persisted with each crawl
//!   checkpoint (its manifest in the checkpoint's directory) and the queue log after the
//!   checkpoint is replayed into it on resume, exactly as into the Bloom filter.
//!
//! # The fingerprint: 64 bits of XXH3
//!
//! [`UrlFingerprint`] is XXH3-64 (seeded) of the canonical URL. A collision makes the exact
//! set answer "seen" for a URL that is not, so its rate is what "exact" means: for n URLs
//! the expected number of colliding pairs is n²/2^65: 2.7·10^-4 at 10^8 URLs, 0.027 at 10^9
//! (so a 2.7 % chance that one URL of a 10^9 crawl is skipped), against the Bloom filter's
//! 10^6 skips at 10^9 and p = 10^-3. 128 bits would make it 10^-20 at twice the disk and
//! memory (16 bytes per URL); a crawl of 10^10 URLs would want it (expected 2.7 collisions).
//! XXH3 rather than the Bloom filter's MurmurHash3: a hash independent of the filter's keeps
//! a filter false positive and a fingerprint collision independent events, and XXH3 is the
//! faster of the two on short keys.
//!
//! # Why sorted runs (see `table` for the engine's guarantees)
//!
//! The crawl's access pattern is DRUM's: one writer in bursts (a page's new links, a burst of
//! records), many batched readers, durability only at the crawl's checkpoints, and its own
//! journal already on disk. An embedded LSM (fjall) would add its own write-ahead log (a
//! second journal of the same records), per-entry overhead and a dozen crates; sorted runs
//! give the information-theoretic 8 bytes per URL for the admitted set and a lookup that
//! touches one 4 KiB page. Figures: `cargo bench --bench state_store` (module doc of
//! `benches/state_store.rs`).

mod admitted;
mod codec;
mod due;
mod journal;
mod run;
mod table;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use admitted::AdmittedSet;
pub use due::DueOrder;
pub(crate) use journal::StateSink;
pub use journal::{journal_urls, state_after, unix_secs};

use crate::recrawl::schedule::Bounds;
pub use table::TableStats;

use table::Table;

/// The seed of [`UrlFingerprint`]'s XXH3: fixed, part of the on-disk format.
pub(crate) const FINGERPRINT_SEED: u64 = 0x5eed_0f0c_4a71_e5c4;

/// Entries a memtable of the state store holds before it is written as a run.
const STATE_MEMTABLE: usize = 200_000;

/// 64-bit fingerprint of a canonical URL (see the module doc for why 64 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UrlFingerprint(pub u64);

impl UrlFingerprint {
    /// The fingerprint of `url` (its canonical form, as the crawl queues it).
    pub fn of(url: &str) -> UrlFingerprint {
        UrlFingerprint(xxhash_rust::xxh3::xxh3_64_with_seed(
            url.as_bytes(),
            FINGERPRINT_SEED,
        ))
    }
}

/// What the store keeps of one URL. Fields are appended only (see `codec.rs`): a new field
/// is one more line in `encode`/`decode`, with a default for states written before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlState {
    /// The canonical URL (the key is its fingerprint; a recrawl needs the URL back).
    pub url: String,
    /// The generation of its last record (1 for the first crawl).
    pub generation: u32,
    /// Unix seconds of the last response (or final error).
    pub fetched_at: u64,
    /// HTTP status of the last fetch, 0 when no response arrived.
    pub status: u16,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// `sha1:BASE32` of the payload as the archive writes it.
    pub payload_digest: Option<String>,
    /// `WARC-Record-ID` and `WARC-Date` of the response record a revisit would refer to.
    pub warc_record_id: Option<String>,
    pub warc_date: Option<String>,
    /// Fetches that found the payload changed, and fetches that compared at all.
    pub changes: u32,
    pub checks: u32,
    /// The recrawl schedule's interval and the unix second the URL is next due.
    pub interval_secs: u64,
    pub next_due: u64,
    /// Consecutive generations that answered 404/410.
    pub gone_generations: u8,
    /// The digest of its last page without digits (`crate::near_duplicate`): how a crawl
    /// without the archive (no payload digest) tells a changed page from an unchanged one.
    pub near_digest: Option<String>,
}

impl UrlState {
    /// Whether a 404/410 in two generations in a row has retired it.
    pub fn retired(&self) -> bool {
        self.gone_generations >= 2
    }
}

/// What can go wrong with a store; each names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum StateStoreError {
    #[error(transparent)]
    Io(#[from] crate::durable::IoAt),
    #[error("{}: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("state store in {}: its writer failed: {reason}", dir.display())]
    WriterFailed { dir: PathBuf, reason: String },
    #[error("{}:{line}: {what}", path.display())]
    Journal {
        path: PathBuf,
        line: u64,
        what: String,
    },
}

/// The per-URL state store: see the module doc.
pub struct StateStore {
    dir: PathBuf,
    table: Table,
    /// How far into the journal the writes so far go (bytes).
    applied: AtomicU64,
    /// The recrawl schedule's bounds the fold of records uses ([`state_after`]).
    schedule: Bounds,
}

impl StateStore {
    /// `OUT/state/urls/`: where a crawl keeps its state store (`OUT/state/` holds the
    /// admitted set too).
    pub fn dir_of(out: &Path) -> PathBuf {
        out.join("state").join("urls")
    }

    fn manifest(dir: &Path) -> PathBuf {
        dir.join("manifest.json")
    }

    /// Opens the store in `dir` as its manifest left it (empty if it has none).
    pub fn open(dir: &Path) -> Result<StateStore, StateStoreError> {
        let manifest = Self::manifest(dir);
        let (table, covers) = Table::open(
            &dir.join("runs"),
            true,
            STATE_MEMTABLE,
            Some(&manifest),
            &[],
        )?;
        Ok(StateStore {
            dir: dir.to_path_buf(),
            table,
            applied: AtomicU64::new(covers),
            schedule: Bounds::default(),
        })
    }

    /// The recrawl schedule's bounds records are folded with (`[recrawl]`'s defaults unless
    /// the store was opened with others).
    pub fn schedule(&self) -> Bounds {
        self.schedule
    }

    /// Opens the store in `dir` and brings it up to the first `journal_len` bytes of the
    /// journal `pages`: the records after its durable point are applied again; a store
    /// that is missing, damaged or ahead of the journal (it covers records the journal no
    /// longer has) is rebuilt from the whole journal. Returns the store and what was done,
    /// for the log.
    pub fn open_for_journal(
        dir: &Path,
        (pages, journal_len): (&Path, u64),
        schedule: Bounds,
    ) -> Result<(StateStore, String), StateStoreError> {
        let opened = if Self::manifest(dir).exists() {
            match StateStore::open(dir) {
                Ok(store) if store.covers() <= journal_len => Some(store),
                Ok(store) => {
                    let why = format!(
                        "it covers {} bytes of {}, which has {journal_len}",
                        store.covers(),
                        pages.display()
                    );
                    drop(store);
                    tracing::warn!("state store: rebuilt from the journal: {why}");
                    None
                }
                Err(e) => {
                    tracing::warn!("state store: rebuilt from the journal: {e}");
                    None
                }
            }
        } else {
            None
        };
        let (mut store, from) = match opened {
            Some(store) => {
                let from = store.covers();
                (store, from)
            }
            None => {
                let _ = std::fs::remove_dir_all(dir);
                (StateStore::open(dir)?, 0)
            }
        };
        store.schedule = schedule;
        let applied = journal::apply_journal(&store, pages, from, journal_len)?;
        let note = format!(
            "state store: {} records of {} applied from byte {from}{}",
            applied,
            pages.display(),
            if from == 0 { " (rebuilt)" } else { "" }
        );
        Ok((store, note))
    }

    /// Rebuilds the store in `dir` from the whole journal `pages` (what is in `dir` is
    /// discarded), with the schedule's default bounds.
    pub fn rebuild_from_journal(dir: &Path, pages: &Path) -> Result<StateStore, StateStoreError> {
        let _ = std::fs::remove_dir_all(dir);
        let store = StateStore::open(dir)?;
        let len = std::fs::metadata(pages).map(|m| m.len()).unwrap_or(0);
        journal::apply_journal(&store, pages, 0, len)?;
        store.flush()?;
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes of the journal the store's writes so far account for.
    pub fn covers(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Records that the writes so far account for the journal up to `bytes`.
    pub fn set_covers(&self, bytes: u64) {
        self.applied.store(bytes, Ordering::Relaxed);
    }

    /// Replaces the states of these URLs.
    pub fn put_batch(&self, entries: &[(UrlFingerprint, UrlState)]) -> Result<(), StateStoreError> {
        let encoded: Vec<(u64, Vec<u8>)> = entries
            .iter()
            .map(|(fp, state)| {
                let mut bytes = Vec::with_capacity(160);
                codec::encode(state, &mut bytes);
                (fp.0, bytes)
            })
            .collect();
        self.table
            .insert_batch(encoded.iter().map(|(k, v)| (*k, v.as_slice())))
    }

    fn decoded(&self, key: u64, bytes: &[u8]) -> Result<UrlState, StateStoreError> {
        codec::decode(bytes).map_err(|what| StateStoreError::Corrupt {
            path: self.dir.clone(),
            what: format!("the state of fingerprint {key:016x}: {what}"),
        })
    }

    /// The state of each URL, `None` for those never recorded.
    pub fn get_batch(
        &self,
        fingerprints: &[UrlFingerprint],
    ) -> Result<Vec<Option<UrlState>>, StateStoreError> {
        let keys: Vec<u64> = fingerprints.iter().map(|f| f.0).collect();
        self.table
            .get_batch(&keys)
            .into_iter()
            .zip(&keys)
            .map(|(bytes, &key)| bytes.map(|b| self.decoded(key, &b)).transpose())
            .collect()
    }

    /// The state of `url`, if it was ever recorded.
    pub fn get(&self, url: &str) -> Result<Option<UrlState>, StateStoreError> {
        Ok(self.get_batch(&[UrlFingerprint::of(url)])?.pop().flatten())
    }

    /// Calls `f` with every state, in no particular order, until it returns false: one pass
    /// over the store in the runs' key order, memory bounded by the memtable (copied first).
    pub fn for_each_state(
        &self,
        mut f: impl FnMut(UrlFingerprint, UrlState) -> bool,
    ) -> Result<(), StateStoreError> {
        let mut error = None;
        self.table
            .for_each(|key, bytes| match self.decoded(key, bytes) {
                Ok(state) => f(UrlFingerprint(key), state),
                Err(e) => {
                    error = Some(e);
                    false
                }
            });
        error.map_or(Ok(()), Err)
    }

    /// For each URL, whether the store has a state for it, into `out` (cleared first).
    pub fn contains_batch(&self, fingerprints: &[UrlFingerprint], out: &mut Vec<bool>) {
        let keys: Vec<u64> = fingerprints.iter().map(|f| f.0).collect();
        self.table.contains_batch(&keys, out);
    }

    /// Calls `f` with every state due at or before `at` (unix seconds; `next_due` at or
    /// before it), in no particular order, until `f` returns false. A pass over the whole
    /// store: what a recrawl's frontier is filled from.
    pub fn for_each_due(
        &self,
        at: u64,
        mut f: impl FnMut(UrlFingerprint, UrlState) -> bool,
    ) -> Result<(), StateStoreError> {
        self.for_each_state(|fp, state| state.next_due > at || f(fp, state))
    }

    /// The states due at or before `at`: [`Self::for_each_due`] collected.
    pub fn due(&self, at: u64) -> Result<Vec<(UrlFingerprint, UrlState)>, StateStoreError> {
        let mut due = Vec::new();
        self.for_each_due(at, |fp, state| {
            due.push((fp, state));
            true
        })?;
        Ok(due)
    }

    /// Makes every write so far durable, with [`Self::covers`] as its point in the
    /// journal; blocks until the run and the manifest are fsynced.
    pub fn flush(&self) -> Result<(), StateStoreError> {
        self.table
            .persist(&Self::manifest(&self.dir), self.covers())
    }

    /// Applies one journal record (see [`state_after`]); `line_end` is where its line ends in
    /// the journal.
    pub fn apply_record(
        &self,
        record: &crate::output::PageRecord,
        line_end: u64,
    ) -> Result<(), StateStoreError> {
        journal::apply_records(self, std::slice::from_ref(record))?;
        self.set_covers(line_end);
        Ok(())
    }

    /// Size and memory figures.
    pub fn stats(&self) -> TableStats {
        self.table.stats()
    }

    /// Waits for the background merges to be done (benches; a crawl never waits for them).
    pub fn compact(&self) -> Result<(), StateStoreError> {
        self.table.compact()
    }

    /// Waits for the background writer, then stops it (also done on drop).
    pub fn close(&self) -> Result<(), StateStoreError> {
        self.table.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(i: u64) -> UrlState {
        UrlState {
            url: format!("http://a.test/{i}"),
            fetched_at: 1000 + i,
            status: 200,
            next_due: i,
            ..UrlState::default()
        }
    }

    #[test]
    fn put_get_due_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let entries: Vec<(UrlFingerprint, UrlState)> = (0..1000)
            .map(|i| (UrlFingerprint::of(&state(i).url), state(i)))
            .collect();
        store.put_batch(&entries).unwrap();
        let fps: Vec<UrlFingerprint> = entries.iter().map(|(f, _)| *f).collect();
        let got = store.get_batch(&fps).unwrap();
        assert!(got
            .iter()
            .zip(&entries)
            .all(|(g, (_, s))| g.as_ref() == Some(s)));
        assert_eq!(store.due(99).unwrap().len(), 100);
        store.set_covers(777);
        store.flush().unwrap();
        // A write after the durable point is not in the reopened store.
        store
            .put_batch(&[(UrlFingerprint::of("http://b.test/"), state(5000))])
            .unwrap();
        store.close().unwrap();
        drop(store);
        let store = StateStore::open(dir.path()).unwrap();
        assert_eq!(store.covers(), 777);
        assert_eq!(store.get_batch(&fps).unwrap(), got);
        let mut out = Vec::new();
        store.contains_batch(&[fps[0], UrlFingerprint::of("http://b.test/")], &mut out);
        assert_eq!(out, vec![true, false]);
    }

    #[test]
    fn fingerprints_are_stable() {
        // Part of the on-disk format: a change would make every store answer for other URLs.
        assert_eq!(
            UrlFingerprint::of("http://a.test/"),
            UrlFingerprint::of("http://a.test/")
        );
        assert_ne!(
            UrlFingerprint::of("http://a.test/"),
            UrlFingerprint::of("http://a.test/x")
        );
        assert_eq!(
            UrlFingerprint::of("").0,
            xxhash_rust::xxh3::xxh3_64_with_seed(b"", FINGERPRINT_SEED)
        );
    }
}
