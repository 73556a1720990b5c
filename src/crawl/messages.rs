//! What the crawl's tasks send each other: a fetch task's or a parse thread's completion,
//! reported to the driver, and the job a fetch task hands to the parse pool.
//!
//! Everything that ends a dispatched URL travels as one [`Completion`] to the one
//! driver's task, which is the only place the frontier and the seen-set are written.

use std::time::Duration;

use url::Url;

use crate::fetch::Fetched;
use crate::frontier::{Dispatch, RobotsFetch};
use crate::normalize::Link;
use crate::output::PageRecord;
use crate::robots::RobotsOutcome;
use crate::warc::record::ArchivedFetch;

/// A finished fetch, reported to the driver.
pub(crate) enum Completion {
    Page {
        dispatch: Dispatch,
        outcome: Outcome,
    },
    Robots {
        fetch: RobotsFetch,
        outcome: RobotsOutcome,
        /// With the archive on, the fetch's line and records (none if no response came).
        archived: Option<(Box<PageRecord>, Box<ArchivedFetch>)>,
    },
    /// URLs found outside a page's fetch (a robots.txt's sitemaps), to queue with `parent`,
    /// and what screening them counted (there is no record to carry it). Sent before the
    /// completion of the request that found them.
    Discovered {
        candidates: Candidates,
        parent: String,
        counts: Box<crate::crawl::PageCounts>,
    },
    /// Completions made one after another by one parse thread, handed over in one message
    /// (see `parse_pool.rs`): one wake-up of the driver for a burst, not one per page.
    Batch(Vec<Completion>),
}

pub(crate) enum Outcome {
    /// The URL reached its end: write `record` (and the archive's records of its fetch),
    /// queue the new ones among `candidates`.
    Done {
        record: Box<PageRecord>,
        candidates: Candidates,
        archive: Option<Box<ArchivedFetch>>,
    },
    /// Try again after `delay`.
    Retry { delay: Duration },
}

/// URLs found by one fetch that passed screening (see [`super::admission`]), all at the same
/// depth, in page order: in canonical form, as [`Link`]s (a page's links are carried as the
/// extractor built them, text and offsets, and never parsed into a `Url` on the way).
#[derive(Default)]
pub(crate) struct Candidates {
    pub(crate) urls: Vec<Link>,
    pub(crate) depth: u32,
    pub(crate) redirect_hops: u32,
}

/// A page to parse, from a fetch task to the parse pool.
pub(crate) struct ParseJob {
    pub(crate) dispatch: Dispatch,
    pub(crate) url: Url,
    pub(crate) fetched: Fetched,
    pub(crate) record: Box<PageRecord>,
}
