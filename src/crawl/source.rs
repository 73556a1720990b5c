//! Where a crawl's work comes from and where it is acknowledged: the one interface between
//! the driver ([`super::driver`]) and a source of work.
//!
//! | source | file | work comes from | a page's links go to | done means |
//! |---|---|---|---|---|
//! | local | `local_source.rs` | the disk frontier, resumed from checkpoints | the local seen-set and frontier, through the queue log | recorded in `pages.jsonl`; checkpointed |
//! | leases | `lease_source.rs` | leases of hosts' URLs from Redis | `admit.lua` (shared seen-set and queues) | acknowledged in Redis once handed to the OS |
//!
//! Both feed a local frontier ([`WorkSource::Frontier`]), which schedules what they hold (politeness,
//! robots.txt, per-address budgets); the driver pops it, runs the fetch tasks and the parse
//! pool, writes records, keeps the descriptor budget, resolves addresses and handles stop
//! and grace, once for every source. A source decides only what the table says.
//!
//! Why a trait with `async fn`s and an event type rather than a frontier backend: a source's
//! own work (a checkpoint's phases, Redis round trips beside the loop) has to wake the
//! driver's one `select!`, and the driver must never wait for it; [`WorkSource::next_event`]
//! is that wake-up, [`WorkSource::on_event`] its handling. A third source (a recrawl
//! schedule, another store) is one file implementing this trait and one arm in
//! `run_crawl`'s choice.

use std::future::Future;
use std::path::PathBuf;

use tokio::time::Instant;
use url::Url;

use super::driver::{Archived, Recorder};
use super::fetch_task::FetchShared;
use super::messages::Candidates;
use super::{CrawlError, CrawlSummary};
use crate::counters::PageCounts;
use crate::frontier::{Dispatch, FrontierBackend};
use crate::output::{BackgroundSync, OutputPosition, PageRecord};

/// What a source is handed at each step: the frontier it feeds and the output.
pub(crate) struct Cx<'a, F> {
    pub(crate) frontier: &'a mut F,
    pub(crate) out: &'a mut Recorder,
}

/// Where a source's records go: its pages file, where that file stands, and its archive's
/// file-name prefix; `resumed` when the archive must first be cut back to the pages file.
pub(crate) struct JournalPlan {
    pub(crate) pages: PathBuf,
    pub(crate) start: OutputPosition,
    pub(crate) warc_prefix: String,
    pub(crate) resumed: bool,
}

/// A source of work for [`super::driver::drive`]. Every method runs on the driver's task,
/// between two steps of its loop; none may wait for the network on the loop's behalf
/// (round trips run beside it and come back through [`WorkSource::next_event`]).
pub(crate) trait WorkSource {
    /// The frontier that schedules this source's work (the disk frontier for both sources
    /// today; another store of queues is a [`FrontierBackend`] chosen here).
    type Frontier: FrontierBackend;
    /// Something the source's own work has to say to the loop.
    type Event;

    /// Before the first dispatch: the seeds (or a resume's replay) taken on, and
    /// `sync`, the background fsync of the output, kept for as long as the source runs.
    fn begin(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        fetch: &FetchShared,
        seeds: Vec<Url>,
        sync: BackgroundSync,
    ) -> impl Future<Output = Result<(), CrawlError>>;

    /// A page was fetched: its links are taken on and its record written (now or once the
    /// links are safe), and its dispatch given back to the frontier.
    fn page_done(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        dispatch: Dispatch,
        record: Box<PageRecord>,
        candidates: Candidates,
        archive: Archived,
    ) -> impl Future<Output = Result<(), CrawlError>>;

    /// URLs found outside a page (a sitemap's), by `parent`, with what finding them counted
    /// (no record carries those counts).
    fn discovered(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        candidates: Candidates,
        parent: String,
        counts: PageCounts,
    ) -> Result<(), CrawlError>;

    /// A URL that ended without a fetch is about to be recorded (a source may correct its
    /// counts). Nothing by default.
    fn recording(&mut self, _record: &mut PageRecord) {}

    /// `url` ended without a fetch and its record was sent as record `number`.
    fn recorded(&mut self, url: &str, number: u64);

    /// A burst of completions was handled (a source may batch what they produced).
    fn drained(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
    ) -> impl Future<Output = Result<(), CrawlError>>;

    /// After each dispatch round: starts what is due and says when to look again.
    fn poll(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        now: Instant,
        stopping: bool,
    ) -> Result<Option<Instant>, CrawlError>;

    /// The next thing the source's own work has to say (pending forever if nothing).
    fn next_event(&mut self, stopping: bool) -> impl Future<Output = Self::Event>;

    fn on_event(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        event: Self::Event,
    ) -> impl Future<Output = Result<(), CrawlError>>;

    /// Whether the crawl is over (nothing left here, and nowhere else).
    fn is_over(&self, frontier: &Self::Frontier) -> bool;

    /// The loop ended (`stopped` before the crawl's end): what the source owes before the
    /// output closes (a final checkpoint, leases given back).
    fn end(
        &mut self,
        cx: &mut Cx<'_, Self::Frontier>,
        stopped: bool,
    ) -> impl Future<Output = Result<(), CrawlError>>;

    /// Round trips to Redis so far, for the monitor (`None`: the source uses no Redis).
    fn redis_round_trips(&self) -> Option<u64> {
        None
    }

    /// What earlier generations found for each URL, for the fetch tasks to ask with
    /// (a recrawl's; `None` by default: no conditional requests).
    fn known_urls(&self) -> Option<std::sync::Arc<crate::recrawl::KnownUrls>> {
        None
    }

    /// The run ended with `error` (a full disk, a failing queue log): the figures so far
    /// written where a reader of files would look, best effort. Nothing by default.
    fn failed(&self, _summary: &CrawlSummary, _error: &CrawlError) {}

    /// The output is closed: the summary written where the source keeps it.
    fn close(self, summary: &CrawlSummary) -> impl Future<Output = Result<(), CrawlError>>;
}
