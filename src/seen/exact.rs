//! `[seen] exact`: the Bloom filter as the front of an exact set of admitted URLs on disk
//! ([`AdmittedSet`]), as HBase's and Cassandra's Bloom filters front their tables.
//!
//! The filter keeps answering first, in RAM: a key it has never seen is new without a
//! lookup (no false negatives), so the exact set is consulted only for its "maybe seen":
//! - on the parse threads, a page's links that the filter calls maybe seen are confirmed in
//!   one batch ([`SeenBackend::confirm_seen_batch`](super::SeenBackend::confirm_seen_batch));
//!   those the exact set does not hold go on to the driver as candidates;
//! - on the driver, the single writer, an insert the filter answers "seen" is checked
//!   against the exact set before it is refused: between the parse thread's confirmation
//!   and the insert another page may have admitted the URL (then it is in the exact set's
//!   memtable: a hash lookup), or the filter's answer is a false positive (then every layer
//!   is searched and the URL admitted). Every URL the driver admits is inserted.
//!
//! So "seen" is exact up to 64-bit fingerprint collisions (see [`crate::state_store`]), and
//! the driver never reads the disk for a URL it admits except for the filter's false
//! positives. Guarantee kept from the filter's: `insert_new_batch` answers each key as
//! one-by-one inserts would, a key repeated in a batch being new at most once.
//!
//! Persistence: the set is persisted with each checkpoint, in the checkpoint's directory,
//! right after the filter's file ([`crate::checkpoint`]), and resumed from it with the
//! queue logs replayed ([`admitted_for_crawl`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::{blocked_fpp, Plan, PlanError, SeenSet, BLOCK_BITS};
use crate::state_store::{AdmittedSet, StateStoreError, UrlFingerprint};

fn fingerprint(key: &[u8]) -> UrlFingerprint {
    UrlFingerprint(xxhash_rust::xxh3::xxh3_64_with_seed(
        key,
        crate::state_store::FINGERPRINT_SEED,
    ))
}

fn record_failure(result: Result<(), StateStoreError>) {
    // The insert is in memory already; a writer that failed fails the next checkpoint,
    // which stops the crawl with its last checkpoint intact.
    if let Err(e) = result {
        tracing::warn!("seen.exact: {e}");
    }
}

impl SeenSet {
    /// Makes this filter the front of `exact` (once; false if one was attached already).
    pub fn attach_exact(&self, exact: Arc<AdmittedSet>) -> bool {
        self.exact.set(exact).is_ok()
    }

    /// The exact set this filter fronts, with `[seen] exact`.
    pub fn exact(&self) -> Option<&Arc<AdmittedSet>> {
        self.exact.get()
    }

    /// `insert_new` with the exact set behind the filter.
    pub(super) fn insert_new_exact(&self, exact: &AdmittedSet, key: &[u8]) -> bool {
        let fp = fingerprint(key);
        let new = SeenSet::insert_new(self, key) || !exact.contains(fp);
        if new {
            record_failure(exact.insert_batch(&[fp]));
        }
        new
    }

    /// `insert_new_batch` with the exact set behind the filter.
    pub(super) fn insert_new_batch_exact(
        &self,
        exact: &AdmittedSet,
        keys: &[&[u8]],
        out: &mut Vec<bool>,
    ) {
        SeenSet::insert_new_batch(self, keys, out);
        let fps: Vec<UrlFingerprint> = keys.iter().map(|k| fingerprint(k)).collect();
        let new: Vec<UrlFingerprint> = fps
            .iter()
            .zip(out.iter())
            .filter(|(_, &new)| new)
            .map(|(fp, _)| *fp)
            .collect();
        record_failure(exact.insert_batch(&new));
        let maybe: Vec<usize> = (0..keys.len()).filter(|&i| !out[i]).collect();
        if maybe.is_empty() {
            return;
        }
        let asked: Vec<UrlFingerprint> = maybe.iter().map(|&i| fps[i]).collect();
        let mut held = Vec::with_capacity(asked.len());
        exact.contains_batch(&asked, &mut held);
        // The filter's false positives: new after all, once each.
        let mut admitted = HashSet::new();
        for (&i, held) in maybe.iter().zip(held) {
            if !held && admitted.insert(fps[i]) {
                out[i] = true;
            }
        }
        if !admitted.is_empty() {
            let fresh: Vec<UrlFingerprint> = admitted.into_iter().collect();
            record_failure(exact.insert_batch(&fresh));
        }
    }
}

/// The filter of a crawl with `[seen] exact` and `[seen] memory`: whatever budget is
/// given, at least one block, however high the false-positive rate it gives. The exact set
/// answers what the filter cannot; a small filter only costs more lookups (a budget under
/// `Plan::for_memory`'s fpp = 0.5 floor is refused without `exact`).
pub(crate) fn front_plan(n: u64, bytes: u64) -> Result<Plan, PlanError> {
    match Plan::for_memory(n, bytes) {
        Err(PlanError::BudgetTooSmall { .. }) => {
            let blocks = (bytes / (BLOCK_BITS / 8)).max(1);
            let (k, fpp) = (1..=4u32).map(|k| (k, blocked_fpp(n, blocks, k))).fold(
                (1, f64::INFINITY),
                |best, cur| if cur.1 < best.1 { cur } else { best },
            );
            // The file format keeps the target in (0, 1).
            Plan::build(n, fpp.min(0.999), blocks, k)
        }
        other => other,
    }
}

/// Confirms "maybe seen" answers: for each key, whether the exact set holds it.
pub(super) fn confirm_batch(exact: &AdmittedSet, keys: &[&[u8]], out: &mut Vec<bool>) {
    let fps: Vec<UrlFingerprint> = keys.iter().map(|k| fingerprint(k)).collect();
    exact.contains_batch(&fps, out);
}

/// The admitted set of a local crawl in `out` with `[seen] exact`: empty for a fresh crawl;
/// for a resumed one, as its checkpoint (`checkpoint`, the directory, and the URLs its queue
/// logs replay, `replayed`) left it. A checkpoint without one (the crawl ran without
/// `seen.exact` until now) gets one rebuilt from the journal's records (`pages`, up to
/// `journal_len`) and the replayed URLs: the URLs that were queued at that checkpoint are
/// then known to the Bloom filter alone (a false positive among them could be fetched
/// twice, never skipped), which is said in the log.
pub(crate) fn admitted_for_crawl(
    out: &Path,
    resumed: Option<(&Path, &[std::path::PathBuf])>,
    replayed: &[&str],
    (pages, journal_len): (&Path, u64),
) -> Result<Arc<AdmittedSet>, StateStoreError> {
    let set = match resumed {
        None => AdmittedSet::create(out)?,
        Some((checkpoint, others)) => match AdmittedSet::resume(out, checkpoint, others)? {
            Some(set) => set,
            None => {
                tracing::warn!(
                    "seen.exact: the checkpoint in {} has no admitted set (the crawl ran without seen.exact); rebuilt from {}: URLs queued at that checkpoint are known to the Bloom filter only",
                    checkpoint.display(),
                    pages.display()
                );
                let set = AdmittedSet::create(out)?;
                let urls = crate::state_store::journal_urls(pages, journal_len)?;
                let fps: Vec<UrlFingerprint> = urls.iter().map(|u| UrlFingerprint::of(u)).collect();
                set.insert_batch(&fps)?;
                set
            }
        },
    };
    let fps: Vec<UrlFingerprint> = replayed.iter().map(|u| UrlFingerprint::of(u)).collect();
    set.insert_batch(&fps)?;
    Ok(Arc::new(set))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seen::{Plan, SeenBackend};

    /// A filter so small that it answers "seen" for most keys: with the exact set behind
    /// it, every key is new exactly once.
    #[test]
    fn a_saturated_filter_skips_nothing_with_the_exact_set() {
        let out = tempfile::tempdir().unwrap();
        let plan = Plan::for_fpp(5000, 0.5).unwrap();
        let bloom_alone = SeenSet::new(plan.clone()).unwrap();
        let fronted = SeenSet::new(plan).unwrap();
        assert!(fronted.attach_exact(Arc::new(
            AdmittedSet::with_memtable(out.path(), 500).unwrap()
        )));
        let keys: Vec<String> = (0..5000).map(|i| format!("http://a.test/{i}")).collect();
        let mut skipped = 0;
        let mut answers = Vec::new();
        for chunk in keys.chunks(50) {
            let refs: Vec<&[u8]> = chunk.iter().map(|k| k.as_bytes()).collect();
            bloom_alone.insert_new_batch(&refs, &mut answers);
            skipped += answers.iter().filter(|&&new| !new).count();
            // The chunk twice over: each key new once, then seen.
            let twice: Vec<&[u8]> = refs.iter().chain(refs.iter()).copied().collect();
            SeenBackend::insert_new_batch(&fronted, &twice, &mut answers);
            assert!(answers[..refs.len()].iter().all(|&new| new));
            assert!(answers[refs.len()..].iter().all(|&new| !new));
        }
        assert!(skipped > 100, "the filter alone skips: {skipped}");
        assert!(!SeenBackend::insert_new(&fronted, keys[7].as_bytes()));
        assert!(SeenBackend::insert_new(&fronted, b"http://a.test/new"));
        let refs: Vec<&[u8]> = vec![keys[0].as_bytes(), b"http://b.test/"];
        let mut confirmed = Vec::new();
        fronted.confirm_seen_batch(&refs, &mut confirmed);
        assert_eq!(confirmed, vec![true, false]);
        assert!(fronted.is_exact() && !bloom_alone.is_exact());
    }

    #[test]
    fn a_front_filter_takes_any_budget() {
        assert!(Plan::for_memory(1_000_000, 64).is_err());
        let plan = front_plan(1_000_000, 64).unwrap();
        assert_eq!(plan.blocks, 1);
        assert!(plan.target_fpp < 1.0);
        SeenSet::new(plan).unwrap();
        // A budget that suffices is planned as without `exact`.
        assert_eq!(
            front_plan(1_000_000, 4 << 20).unwrap(),
            Plan::for_memory(1_000_000, 4 << 20).unwrap()
        );
    }
}
