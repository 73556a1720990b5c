//! The exact set of admitted URLs (`[seen] exact`): fingerprints only, on the sorted-runs
//! engine, persisted with the crawl's checkpoints.
//!
//! Guarantees: a fingerprint inserted is found by every later lookup (memtable, frozen
//! memtable or run, see [`super::table`]); [`AdmittedSet::persist`] into a checkpoint's
//! directory makes every insert made before it durable there, and
//! [`AdmittedSet::resume`] from that directory gives exactly those back (the crawl then
//! replays the queue logs after the checkpoint into it, as into the Bloom filter: the set
//! may hold fingerprints inserted after the snapshot instant, each of which those logs
//! record, which is the same invariant as the Bloom filter's file).
//!
//! Why its own directory and manifests in the checkpoints': the runs are large and shared
//! by consecutive checkpoints (a checkpoint adds one small run), so they live once in
//! `OUT/state/admitted/` and each checkpoint's `admitted.json` names those it needs; the
//! runs named by the last three are kept, as the crawl keeps its last two checkpoints
//! plus one prepared and not published.

use std::path::{Path, PathBuf};

use super::table::{Table, TableStats};
use super::{StateStoreError, UrlFingerprint};

/// Fingerprints the memtable holds before it becomes a run: 8 MiB of keys, ~16 MiB of
/// hash table.
const ADMITTED_MEMTABLE: usize = 1 << 20;

/// The manifest's name in a checkpoint's directory.
const MANIFEST: &str = "admitted.json";

/// The set: see the module doc.
pub struct AdmittedSet {
    table: Table,
}

impl AdmittedSet {
    /// `OUT/state/admitted/`: where a crawl's admitted set keeps its runs.
    pub fn dir_of(out: &Path) -> PathBuf {
        out.join("state").join("admitted")
    }

    /// The manifest of the set in the checkpoint directory `checkpoint`.
    pub fn manifest_in(checkpoint: &Path) -> PathBuf {
        checkpoint.join(MANIFEST)
    }

    /// An empty set for a fresh crawl in `out` (what was there is discarded).
    pub fn create(out: &Path) -> Result<AdmittedSet, StateStoreError> {
        Self::with_memtable(out, ADMITTED_MEMTABLE)
    }

    /// [`Self::create`] with `memtable` fingerprints per run (tests and benches).
    pub fn with_memtable(out: &Path, memtable: usize) -> Result<AdmittedSet, StateStoreError> {
        let dir = Self::dir_of(out);
        let _ = std::fs::remove_dir_all(&dir);
        let (table, _) = Table::open(&dir, false, memtable, None, &[])?;
        Ok(AdmittedSet { table })
    }

    /// The set as the checkpoint in directory `checkpoint` of the crawl in `out` persisted
    /// it; `None` when that checkpoint has none (the crawl ran without `seen.exact` then).
    /// Runs named by the other checkpoints' manifests (`others`) are kept.
    pub fn resume(
        out: &Path,
        checkpoint: &Path,
        others: &[PathBuf],
    ) -> Result<Option<AdmittedSet>, StateStoreError> {
        let manifest = Self::manifest_in(checkpoint);
        if !manifest.exists() {
            return Ok(None);
        }
        let (table, _) = Table::open(
            &Self::dir_of(out),
            false,
            ADMITTED_MEMTABLE,
            Some(&manifest),
            others,
        )?;
        Ok(Some(AdmittedSet { table }))
    }

    /// For each fingerprint, whether it was admitted, into `out` (cleared first).
    pub fn contains_batch(&self, fingerprints: &[UrlFingerprint], out: &mut Vec<bool>) {
        // UrlFingerprint is a transparent newtype in spirit; copy rather than transmute.
        let keys: Vec<u64> = fingerprints.iter().map(|f| f.0).collect();
        self.table.contains_batch(&keys, out);
    }

    /// Whether `fingerprint` was admitted.
    pub fn contains(&self, fingerprint: UrlFingerprint) -> bool {
        let mut out = Vec::with_capacity(1);
        self.table.contains_batch(&[fingerprint.0], &mut out);
        out.first().copied().unwrap_or(false)
    }

    /// Adds fingerprints to the set.
    pub fn insert_batch(&self, fingerprints: &[UrlFingerprint]) -> Result<(), StateStoreError> {
        self.table
            .insert_batch(fingerprints.iter().map(|f| (f.0, &[][..])))
    }

    /// Makes every insert so far durable, named by a manifest in the checkpoint directory
    /// `checkpoint`; blocks until it is (call it where the checkpoint is written, off the
    /// crawl's path).
    pub fn persist(&self, checkpoint: &Path) -> Result<(), StateStoreError> {
        self.table.persist(&Self::manifest_in(checkpoint), 0)
    }

    /// Size and memory figures.
    pub fn stats(&self) -> TableStats {
        self.table.stats()
    }

    /// Waits for the background merges to be done (benches; a crawl never waits for them).
    pub fn compact(&self) -> Result<(), StateStoreError> {
        self.table.compact()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fps(range: std::ops::Range<u64>) -> Vec<UrlFingerprint> {
        range
            .map(|i| UrlFingerprint::of(&format!("http://h{}.test/p/{i}", i % 13)))
            .collect()
    }

    #[test]
    fn persisted_with_a_checkpoint_and_resumed_from_it() {
        let out = tempfile::tempdir().unwrap();
        let ckpt1 = out.path().join("checkpoint/ckpt-1");
        let ckpt2 = out.path().join("checkpoint/ckpt-2");
        let set = AdmittedSet::with_memtable(out.path(), 1000).unwrap();
        set.insert_batch(&fps(0..5000)).unwrap();
        set.persist(&ckpt1).unwrap();
        set.insert_batch(&fps(5000..9000)).unwrap();
        set.persist(&ckpt2).unwrap();
        set.insert_batch(&fps(9000..9500)).unwrap();
        let mut out_bits = Vec::new();
        set.contains_batch(&fps(0..10_000), &mut out_bits);
        assert_eq!(out_bits.iter().filter(|&&b| b).count(), 9500);
        drop(set);
        let others = [
            AdmittedSet::manifest_in(&ckpt1),
            AdmittedSet::manifest_in(&ckpt2),
        ];
        let one = AdmittedSet::resume(out.path(), &ckpt1, &others)
            .unwrap()
            .unwrap();
        one.contains_batch(&fps(0..10_000), &mut out_bits);
        assert!(out_bits[..5000].iter().all(|&b| b));
        assert!(out_bits[5000..].iter().all(|&b| !b));
        drop(one);
        let two = AdmittedSet::resume(out.path(), &ckpt2, &others)
            .unwrap()
            .unwrap();
        two.contains_batch(&fps(0..10_000), &mut out_bits);
        assert_eq!(out_bits.iter().filter(|&&b| b).count(), 9000);
        assert!(
            AdmittedSet::resume(out.path(), &out.path().join("none"), &others)
                .unwrap()
                .is_none()
        );
    }
}
