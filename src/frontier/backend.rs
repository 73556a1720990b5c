//! What a frontier must do for the crawl, as a trait: the promises of a local scheduler of
//! accepted URLs (order per host, politeness, in-flight kept until given back).
//!
//! The trait holds only the operations the crawl calls; constructors and on-disk details
//! (`create`, `resume`, the store) stay with each backend. The checkpoint's types are
//! associated types because they are the backend's own: the disk frontier's snapshot is a
//! store position and `hosts.bin`, which means nothing to a backend kept elsewhere.
//!
//! Where this sits: every run schedules its work on a local frontier, whatever the source of
//! that work; a source (the local crawl's checkpoints and acceptance, or a distributed
//! process's leases from Redis, see `crate::crawl`'s `source.rs`) decides what is pushed
//! into it and where finished work is acknowledged. The local source's acceptance,
//! checkpoints and summary are written against this trait (as `CrawlFrontier`, which pins
//! the checkpoint types to the disk frontier's, the only ones a local checkpoint can
//! store); another store of queues is a backend here, another origin of work a source
//! there.
//!
//! Guarantees: the promises every backend makes are listed on [`FrontierBackend`]; the disk
//! frontier's unit tests check them for [`Frontier`] (order, hand-out and in-flight through
//! the trait; politeness and checkpoints through its own API).
//!
//! Why a trait and not an enum of backends: the backends share no state, each is used on its
//! own for a whole crawl, and a trait states the promises once, for every backend, where an
//! enum would only list the ones that exist.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    AddressAnswer, AddressLookup, Dispatch, Frontier, FrontierError, FrontierSnapshot,
    FrontierStats, HostId, QueuedUrl, RobotsFetch, SavedFrontier, Work,
};
use crate::robots::RobotsOutcome;

/// A frontier as the crawl's driver uses it: queues of accepted URLs per host, handed out
/// politely, with what is handed out kept until it is given back.
///
/// # What a backend promises
///
/// - **Order per host.** A host's URLs are handed out in the order they were pushed, except a
///   URL given back with [`retry`](Self::retry), which goes before the rest of its host's
///   queue. Hosts are served in turn by the instant each may next be fetched: one host's
///   backlog never starves another.
/// - **Exactly-once hand-out.** Each push is handed out once: as [`Work::Fetch`], as
///   [`Work::Disallowed`], or among the URLs [`robots_done`](Self::robots_done) gives up;
///   after a [`retry`](Self::retry) it is handed out once more, and after a resume what was
///   in flight at the checkpoint is handed out again. A [`Dispatch`] is given back at most
///   once, by [`complete`](Self::complete) or [`retry`](Self::retry) (they take it by value);
///   one never given back stays in flight.
/// - **In-flight ownership.** Between [`pop_ready`](Self::pop_ready) and its give-back, the
///   URL belongs to the backend: [`in_flight`](Self::in_flight) counts it,
///   [`is_finished`](Self::is_finished) is false, and a checkpoint records it at the front of
///   its host's queue, so that a crawl resumed from that checkpoint fetches it again first. A
///   fetch abandoned without a give-back (a stop that cannot wait) is therefore not lost.
/// - **Politeness.** No page of a host is handed out beyond `per_host_concurrency` in flight,
///   before the host's rate limit, retry backoff or crawl-delay allows, or (when robots.txt is
///   respected) before its robots.txt is known; a robots.txt fetch ([`Work::Robots`]) counts
///   as in flight until [`robots_done`](Self::robots_done) but holds no URL.
/// - **What survives a crash.** The state of the last checkpoint whose snapshot was written:
///   its queued and in-flight URLs and per-host tallies. URLs pushed after it are the caller's
///   to push again (the crawl's queue log); URLs recorded after it are the caller's to name on
///   resume so that they are dropped, not fetched twice. Nothing newer than that checkpoint is
///   the backend's to keep.
/// - **One caller.** Each instance is driven by one task through `&mut self`; a checkpoint's
///   [`begin_checkpoint`](Self::begin_checkpoint) is one consistent state of it.
///
/// Errors are [`FrontierError`]: the crawl stops on one and resumes from its last checkpoint.
pub trait FrontierBackend {
    /// What [`begin_checkpoint`](Self::begin_checkpoint) takes in the pause, to be written on
    /// another thread.
    type Snapshot: Send + 'static;
    /// What the checkpoint's manifest records once the snapshot is written.
    type Saved;

    /// Queues an accepted URL at the back of its host's queue (`host_key` as
    /// [`crate::normalize::host_key`] gives it).
    fn push(&mut self, host_key: &str, item: QueuedUrl) -> Result<(), FrontierError>;
    /// [`push`](Self::push) of a URL whose host key is the first `key_len` bytes of its text
    /// (see [`super::plain_host_key_len`]), so that the caller need not copy the key out.
    fn push_keyed_by_prefix(
        &mut self,
        key_len: usize,
        item: QueuedUrl,
    ) -> Result<(), FrontierError> {
        let key = item.url.get(..key_len).unwrap_or(&item.url).to_string();
        self.push(&key, item)
    }
    /// A hint that `links` are about to be pushed (see [`Frontier::prefetch_hosts`]); it
    /// changes nothing but timing, and by default does nothing.
    fn prefetch_hosts(&self, links: &[crate::normalize::Link]) {
        let _ = links;
    }
    /// Counts a URL for its host's `max_pages_per_host` without queuing it (a resume's URLs
    /// queued after the checkpoint and recorded since).
    fn count_queued(&mut self, host_key: &str);
    /// How long from `now` until host `host_key` may be served by another process's fresh
    /// limiter (a distributed process ending its lease).
    fn handoff_wait(&self, host_key: &str, now: Instant) -> Duration;
    /// The next piece of work whose host may be served at `now`, if any.
    fn pop_ready(&mut self, now: Instant) -> Result<Option<Work>, FrontierError>;
    /// When the earliest host with work may be served, if any host has work.
    fn next_ready_at(&self) -> Option<Instant>;
    /// A handed-out URL is done (fetched, failed or refused).
    fn complete(&mut self, dispatch: Dispatch);
    /// A handed-out URL goes back to the front of its host's queue; the host waits `delay`.
    fn retry(&mut self, dispatch: Dispatch, delay: Duration);
    /// The outcome of a [`Work::Robots`]; returns the URLs given up on (to be recorded).
    fn robots_done(
        &mut self,
        fetch: RobotsFetch,
        outcome: RobotsOutcome,
    ) -> Result<Vec<QueuedUrl>, FrontierError>;
    /// The checkpoint's pause: one consistent state, in-flight URLs included.
    fn begin_checkpoint(&mut self) -> Result<Self::Snapshot, FrontierError>;
    /// The checkpoint holding `saved` is published: what only older ones needed may go.
    fn finish_checkpoint(&mut self, saved: &Self::Saved) -> Result<(), FrontierError>;
    /// URLs queued, not in flight.
    fn queued(&self) -> u64;
    /// Pages and robots.txt fetches handed out and not yet given back.
    fn in_flight(&self) -> u64;
    /// Nothing queued and nothing in flight.
    fn is_finished(&self) -> bool;
    /// URLs ever queued for the host with this key (`max_pages_per_host`).
    fn host_total_queued(&self, host_key: &str) -> u64;
    /// The key of a host with something in flight (for messages).
    fn host_key(&self, host: HostId) -> Option<&str>;
    /// Hosts ever seen.
    fn host_count(&self) -> usize;
    /// Hosts with the most URLs ever queued, largest first: (key, ever queued, queued now).
    fn top_hosts(&self, count: usize) -> Vec<(String, u64, usize)>;
    /// The host with the most URLs queued now: (key, queued now, ever queued).
    fn busiest_host(&mut self) -> Option<(String, usize, u64)>;
    /// Figures for progress lines and the summary.
    fn stats(&self) -> FrontierStats;
    /// Host names whose address the per-address budget needs (their hosts are parked until
    /// the answer): the caller resolves each off its own task and gives the answer back with
    /// [`address_resolved`](Self::address_resolved). Always empty with per-address limits off.
    fn take_lookups(&mut self) -> Vec<AddressLookup>;
    /// The answer to a lookup from [`take_lookups`](Self::take_lookups).
    fn address_resolved(&mut self, lookup: AddressLookup, answer: AddressAnswer);
    /// The monitor's reports of the `count` busiest hosts and of `also` (see
    /// `frontier/report.rs`). By default from [`top_hosts`](Self::top_hosts) alone, without
    /// robots.txt state or next allowed time.
    fn host_reports(&self, count: usize, also: &[String]) -> Vec<super::HostReport> {
        let _ = also;
        self.top_hosts(count)
            .into_iter()
            .map(|(host, queued_ever, queued)| super::HostReport {
                host,
                queued: queued as u64,
                queued_ever,
                in_flight: 0,
                robots: "unknown",
                next_allowed_in: None,
            })
            .collect()
    }

    /// The hosts adaptive politeness slowed the most, largest slow-down first (bounded);
    /// empty for a backend that does not adapt.
    fn slowed_hosts(&self) -> Vec<super::SlowedHost> {
        Vec::new()
    }
}

impl FrontierBackend for Frontier {
    type Snapshot = FrontierSnapshot;
    type Saved = SavedFrontier;

    fn push(&mut self, host_key: &str, item: QueuedUrl) -> Result<(), FrontierError> {
        Frontier::push(self, host_key, item)
    }
    fn push_keyed_by_prefix(
        &mut self,
        key_len: usize,
        item: QueuedUrl,
    ) -> Result<(), FrontierError> {
        Frontier::push_keyed_by_prefix(self, key_len, item)
    }
    fn prefetch_hosts(&self, links: &[crate::normalize::Link]) {
        Frontier::prefetch_hosts(self, links)
    }
    fn count_queued(&mut self, host_key: &str) {
        Frontier::count_queued(self, host_key)
    }
    fn handoff_wait(&self, host_key: &str, now: Instant) -> Duration {
        Frontier::handoff_wait(self, host_key, now)
    }
    fn take_lookups(&mut self) -> Vec<AddressLookup> {
        Frontier::take_lookups(self)
    }
    fn address_resolved(&mut self, lookup: AddressLookup, answer: AddressAnswer) {
        Frontier::address_resolved(self, lookup, answer)
    }
    fn pop_ready(&mut self, now: Instant) -> Result<Option<Work>, FrontierError> {
        Frontier::pop_ready(self, now)
    }
    fn next_ready_at(&self) -> Option<Instant> {
        Frontier::next_ready_at(self)
    }
    fn complete(&mut self, dispatch: Dispatch) {
        Frontier::complete(self, dispatch)
    }
    fn retry(&mut self, dispatch: Dispatch, delay: Duration) {
        Frontier::retry(self, dispatch, delay)
    }
    fn robots_done(
        &mut self,
        fetch: RobotsFetch,
        outcome: RobotsOutcome,
    ) -> Result<Vec<QueuedUrl>, FrontierError> {
        Frontier::robots_done(self, fetch, outcome)
    }
    fn begin_checkpoint(&mut self) -> Result<FrontierSnapshot, FrontierError> {
        Frontier::begin_checkpoint(self)
    }
    fn finish_checkpoint(&mut self, saved: &SavedFrontier) -> Result<(), FrontierError> {
        Frontier::finish_checkpoint(self, saved)
    }
    fn queued(&self) -> u64 {
        Frontier::queued(self)
    }
    fn in_flight(&self) -> u64 {
        Frontier::in_flight(self)
    }
    fn is_finished(&self) -> bool {
        Frontier::is_finished(self)
    }
    fn host_total_queued(&self, host_key: &str) -> u64 {
        Frontier::host_total_queued(self, host_key)
    }
    fn host_key(&self, host: HostId) -> Option<&str> {
        Frontier::host_key(self, host)
    }
    fn host_count(&self) -> usize {
        Frontier::host_count(self)
    }
    fn top_hosts(&self, count: usize) -> Vec<(String, u64, usize)> {
        Frontier::top_hosts(self, count)
    }
    fn busiest_host(&mut self) -> Option<(String, usize, u64)> {
        Frontier::busiest_host(self)
    }
    fn slowed_hosts(&self) -> Vec<super::SlowedHost> {
        Frontier::slowed_hosts(self)
    }
    fn stats(&self) -> FrontierStats {
        Frontier::stats(self)
    }
    fn host_reports(&self, count: usize, also: &[String]) -> Vec<super::HostReport> {
        Frontier::host_reports(self, count, also)
    }
}
