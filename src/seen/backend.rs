//! The seen-set as the crawl uses it: the interface a second backend (a seen-set shared by
//! several processes, in Redis) fills, and what any backend must promise.
//!
//! The crawl asks only four things of its seen-set, from two kinds of caller:
//! - parse threads ask [`SeenBackend::contains`], a lock-free read, to drop links that are
//!   certainly seen before they reach the driver;
//! - the driver, the single writer, asks [`SeenBackend::insert_new`] /
//!   [`SeenBackend::insert_new_batch`] for the URLs it is about to queue, and queues exactly
//!   those answered "new". Being the one writer is what makes `max_urls` exact: the cap is
//!   checked before each insert, with no race at the boundary.
//!
//! # What a backend must promise
//! 1. **No false negatives.** Once `insert_new` has answered for a key (either answer),
//!    `contains` is true for it and `insert_new` never again answers "new", in every process
//!    sharing the set, and after a restart from the crawl's persistence.
//! 2. **Exactly once.** Of any number of concurrent `insert_new` calls with the same new key
//!    (in any process), exactly one answers "new". A key may be answered "seen" without
//!    ever being inserted (a false positive), at a rate the backend reports in
//!    [`SeenStats::estimated_fpp`].
//! 3. **`contains` may lag, never lead.** It may miss an insert in progress (that only
//!    orders the insert after it); it never reports a key that no `insert_new` was called
//!    for, beyond the false-positive rate.
//! 4. **Batches are the same as one by one.** `insert_new_batch` answers each key as
//!    `insert_new` would in order; a backend with round trips should make it one round trip.
//!
//! The local [`SeenSet`] keeps these in memory and the crawl's checkpoints persist it
//! (streamed from the live filter, see `crate::checkpoint`); a shared backend persists by
//! its own means, and the checkpoint then records no filter.

use super::{SeenSet, SeenStats};

/// A URL-seen set the crawl can run on. See the module doc for the promises.
pub(crate) trait SeenBackend: Send + Sync {
    /// Whether `key` is (probably) in the set. Never false for an inserted key.
    fn contains(&self, key: &[u8]) -> bool;
    /// `contains` for each key in order, answers into `out` (cleared first).
    fn contains_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        out.extend(keys.iter().map(|key| self.contains(key)));
    }
    /// Inserts `key`; true exactly once per key, for the first insert.
    fn insert_new(&self, key: &[u8]) -> bool;
    /// `insert_new` for each key in order, answers into `out` (cleared first).
    fn insert_new_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>);
    /// Size, fill and estimated false-positive rate now.
    fn stats(&self) -> SeenStats;
    /// For keys `contains` answered true ("maybe seen"): whether each is in the set for
    /// certain, into `out` (cleared first). A backend whose "maybe" is its answer (a Bloom
    /// filter alone) answers true for every key.
    fn confirm_seen_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.clear();
        out.resize(keys.len(), true);
    }
    /// Whether "seen" answers are exact, so that no new URL is skipped as a false positive
    /// (`[seen] exact`); the parse threads then confirm "maybe seen" in batches.
    fn is_exact(&self) -> bool {
        false
    }
}

/// The filter, and with `[seen] exact` the front of its exact set (see `exact.rs`).
impl SeenBackend for SeenSet {
    fn contains(&self, key: &[u8]) -> bool {
        SeenSet::contains(self, key)
    }
    fn contains_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        SeenSet::contains_batch(self, keys, out)
    }
    fn insert_new(&self, key: &[u8]) -> bool {
        match self.exact() {
            Some(exact) => self.insert_new_exact(exact, key),
            None => SeenSet::insert_new(self, key),
        }
    }
    fn insert_new_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        match self.exact() {
            Some(exact) => self.insert_new_batch_exact(exact, keys, out),
            None => SeenSet::insert_new_batch(self, keys, out),
        }
    }
    fn stats(&self) -> SeenStats {
        SeenSet::stats(self)
    }
    fn confirm_seen_batch(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        match self.exact() {
            Some(exact) => super::exact::confirm_batch(exact, keys, out),
            None => {
                out.clear();
                out.resize(keys.len(), true);
            }
        }
    }
    fn is_exact(&self) -> bool {
        self.exact().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seen::Plan;

    /// The promises, checked through the trait object the crawl holds.
    #[test]
    fn local_set_keeps_the_promises_through_the_trait() {
        let set: Box<dyn SeenBackend> =
            Box::new(SeenSet::new(Plan::for_fpp(10_000, 0.001).unwrap()).unwrap());
        assert!(!set.contains(b"a"));
        assert!(set.insert_new(b"a"));
        assert!(!set.insert_new(b"a"));
        assert!(set.contains(b"a"));
        let keys: Vec<&[u8]> = vec![b"b", b"a", b"b", b"c"];
        let mut out = vec![true; 9];
        set.insert_new_batch(&keys, &mut out);
        assert_eq!(out, vec![true, false, false, true]);
        assert_eq!(set.stats().insertions, 3);
    }
}
