//! Counts of what crosses threads on the crawl's hot path, for the crawl bench's
//! `--cores N` report (issue 20: "at most 2 cross-thread hand-offs per page").
//!
//! A hand-off is one message that leaves the thread it was made on for another: a task
//! spawned by the driver onto the runtime's workers, a page handed to a parse thread, a
//! completion (or a batch of them) handed to the driver, a batch of records handed to the
//! output thread, a finished task's join noticed by the driver. Each one may wake a
//! sleeping thread (the wake-ups themselves show in the bench's context switches, which the
//! kernel counts). Lock acquisitions on crawl-wide shared state are counted beside them.
//!
//! Counting costs one relaxed atomic add per event, so it is compiled in only with the
//! `bench-counters` feature (`cargo bench --bench crawl --features bench-counters`); without
//! it [`count`] is an empty inline function and [`snapshot`] says `None`.

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// A message from the driver to the runtime's workers: a spawned fetch task, or a
    /// batch of them handed to a launcher in one message.
    Spawn,
    /// A fetched page handed to the parse pool.
    ParseJob,
    /// A message to the driver: one completion, or a batch of them.
    Completion,
    /// A message to the output thread: one record, or a batch of them.
    Output,
    /// A finished task noticed by the driver through its join handle.
    Join,
    /// A lock taken on crawl-wide shared state (not a hand-off, counted beside them).
    Lock,
}

/// The counts so far, in the order of [`Handoff`]'s variants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandoffCounts {
    pub spawns: u64,
    pub parse_jobs: u64,
    pub completions: u64,
    pub outputs: u64,
    pub joins: u64,
    pub locks: u64,
}

impl HandoffCounts {
    /// The cross-thread messages among them (locks excluded).
    pub fn messages(&self) -> u64 {
        self.spawns + self.parse_jobs + self.completions + self.outputs + self.joins
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &HandoffCounts) -> HandoffCounts {
        HandoffCounts {
            spawns: self.spawns - earlier.spawns,
            parse_jobs: self.parse_jobs - earlier.parse_jobs,
            completions: self.completions - earlier.completions,
            outputs: self.outputs - earlier.outputs,
            joins: self.joins - earlier.joins,
            locks: self.locks - earlier.locks,
        }
    }
}

#[cfg(feature = "bench-counters")]
mod counting {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{Handoff, HandoffCounts};

    /// One counter per [`Handoff`], each on its own cache line so that threads counting
    /// different events do not bounce one line between them.
    #[repr(align(64))]
    struct Padded(AtomicU64);

    static COUNTS: [Padded; 6] = [const { Padded(AtomicU64::new(0)) }; 6];

    pub(super) fn count(kind: Handoff, n: u64) {
        COUNTS[kind as usize].0.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot() -> HandoffCounts {
        let get = |kind: Handoff| COUNTS[kind as usize].0.load(Ordering::Relaxed);
        HandoffCounts {
            spawns: get(Handoff::Spawn),
            parse_jobs: get(Handoff::ParseJob),
            completions: get(Handoff::Completion),
            outputs: get(Handoff::Output),
            joins: get(Handoff::Join),
            locks: get(Handoff::Lock),
        }
    }
}

/// Counts `n` events of `kind` (nothing without the `bench-counters` feature).
#[inline(always)]
pub fn count(kind: Handoff, n: u64) {
    #[cfg(feature = "bench-counters")]
    counting::count(kind, n);
    #[cfg(not(feature = "bench-counters"))]
    let _ = (kind, n);
}

/// The counts since the process started, or `None` when they are not compiled in.
pub fn snapshot() -> Option<HandoffCounts> {
    #[cfg(feature = "bench-counters")]
    return Some(counting::snapshot());
    #[cfg(not(feature = "bench-counters"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_subtracts_each_count_and_messages_leaves_out_locks() {
        let earlier = HandoffCounts {
            spawns: 1,
            parse_jobs: 2,
            completions: 3,
            outputs: 4,
            joins: 5,
            locks: 6,
        };
        let later = HandoffCounts {
            spawns: 11,
            parse_jobs: 22,
            completions: 33,
            outputs: 44,
            joins: 55,
            locks: 66,
        };
        let diff = later.since(&earlier);
        assert_eq!(diff.spawns, 10);
        assert_eq!(diff.locks, 60);
        assert_eq!(diff.messages(), 10 + 20 + 30 + 40 + 50);
    }

    #[cfg(feature = "bench-counters")]
    #[test]
    fn counts_what_is_counted() {
        let before = snapshot().unwrap();
        count(Handoff::ParseJob, 3);
        let after = snapshot().unwrap();
        // Other tests may count concurrently: at least ours.
        assert!(after.since(&before).parse_jobs >= 3);
    }
}
