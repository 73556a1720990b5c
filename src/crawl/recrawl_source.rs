//! The recrawl source: the next generation of a local crawl (`crawler recrawl --out DIR`),
//! and with `--continuous` a crawl that fetches each URL again whenever it falls due.
//!
//! It is the local source ([`LocalSource`]) with three differences, so everything a local
//! crawl guarantees (checkpoints, queue log, `kill -9` and resume, the archive cut back on
//! resume) holds as it is:
//! - **Its seeds are the due URLs** of the collection ([`crate::recrawl::History::due`]), and
//!   its journal and archive go on after the earlier generations' instead of replacing them;
//!   the URLs known but not due are put in the generation's seen-set first, so links to them
//!   are not new.
//! - **Its fetch tasks ask with validators**: [`WorkSource::known_urls`] hands them each
//!   URL's state, so a page is requested with `If-None-Match` / `If-Modified-Since` and a
//!   `304` is archived as a revisit (`crate::warc`).
//! - **Its records carry the generation** (`"generation"` in `pages.jsonl`).
//!
//! With `--continuous` the crawl does not end: each fetched URL gets its next due time from
//! the adaptive schedule ([`crate::recrawl::schedule`]) and waits in a heap of due times
//! here; [`WorkSource::poll`] hands the frontier each URL as it falls due, so the frontier
//! keeps deciding when its host may be fetched (politeness is unchanged) and this file only
//! decides when a URL is wanted again. On resume the heap is rebuilt from the journal,
//! which holds every fetch's outcome; a URL that was in the checkpoint's queues and falls
//! due again may then be fetched twice, the price of not logging the heap.
//!
//! Why wrap the local source rather than give the driver a second loop: the driver is
//! written once for every source (`source.rs`), and what differs here is which URLs enter,
//! how they are asked for and what their records say.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use url::Url;

use super::driver::{Archived, Opened};
use super::fetch_task::FetchShared;
use super::local_source::{LocalEvent, LocalSource};
use super::messages::Candidates;
use super::progress::ProgressMode;
use super::source::{Cx, WorkSource};
use super::{CrawlError, CrawlSummary};
use crate::checkpoint;
use crate::config::Config;
use crate::counters::PageCounts;
use crate::frontier::{Dispatch, Frontier, QueuedUrl};
use crate::output::{BackgroundSync, OutputPosition, PageRecord};
use crate::recrawl::schedule::Bounds;
use crate::recrawl::{epoch_secs, History, KnownUrls, RecrawlError};
use crate::warc::record::{digest_label, record_id};

/// The recrawl source: a local source whose URLs are a generation's.
pub(crate) struct RecrawlSource {
    local: LocalSource,
    known: Arc<KnownUrls>,
    generation: u32,
    bounds: Bounds,
    /// With `--continuous`: URLs waiting for their due time (epoch milliseconds).
    due: Option<BinaryHeap<Reverse<(u64, String)>>>,
}

fn millis(epoch_secs: f64) -> u64 {
    (epoch_secs.max(0.0) * 1000.0) as u64
}

impl RecrawlSource {
    /// The next generation of the crawl in `config.output.dir`, or (with `resume`) the
    /// generation a crash or a stop interrupted, with `seeds` its checkpoint's. Returns the
    /// source and the generation's seeds.
    pub(crate) fn open(
        config: &Config,
        seeds: Vec<Url>,
        progress: (ProgressMode, Instant),
        resume: Option<checkpoint::Loaded>,
    ) -> Result<(Opened<RecrawlSource>, Vec<Url>), CrawlError> {
        let out_dir = &config.output.dir;
        let pages = crate::output::journal_path(out_dir);
        let (min, max) = config.recrawl_intervals()?;
        let bounds = Bounds::new(min, max);
        let (opened, seeds, history, generation) = match resume {
            Some(loaded) => {
                let generation = crate::recrawl::started_generation(out_dir).ok_or_else(|| {
                    RecrawlError::NotARecrawl {
                        dir: out_dir.clone(),
                    }
                })?;
                let opened = LocalSource::open(config, &seeds, progress, Some(loaded), None)?;
                // Read after the resume cut the journal: every record it keeps.
                let history = History::read(&pages, &bounds)?;
                (opened, seeds, history, generation)
            }
            None => {
                let history = History::read(&pages, &bounds)?;
                // A generation started (its number written) but stopped before its first
                // checkpoint left nothing to resume: it starts again under its number.
                let generation = match crate::recrawl::started_generation(out_dir) {
                    Some(started) if started > history.generation => started,
                    _ => history.generation + 1,
                };
                let mut due: Vec<Url> = history
                    .due(SystemTime::now(), min)
                    .into_iter()
                    .filter_map(|u| Url::parse(u).ok())
                    .collect();
                if due.is_empty() && config.recrawl.continuous {
                    // Nothing due yet: the URL due first starts the run (a little early),
                    // the others wait for their time in the heap.
                    due.extend(history.first_due().and_then(|u| Url::parse(u).ok()));
                }
                if due.is_empty() {
                    return Err(history
                        .nothing_due(out_dir, min, &config.recrawl.min_interval)
                        .into());
                }
                // The journal ends with a whole record (a finished crawl's does; a torn
                // line, never a record, is cut) and the generation starts there.
                checkpoint::truncate_output(out_dir, history.bytes)?;
                crate::recrawl::start_generation(out_dir, generation)?;
                tracing::info!(
                    "recrawl: generation {generation}: {} of {} known URLs due ({} retired)",
                    due.len(),
                    history.urls.len(),
                    history.urls.values().filter(|s| s.retired()).count()
                );
                let start = OutputPosition {
                    bytes: history.bytes,
                    records: history.records,
                };
                let opened = LocalSource::open(config, &due, progress, None, Some(start))?;
                // Known but not due: seen in this generation, not fetched.
                let due_set: HashSet<&str> = due.iter().map(Url::as_str).collect();
                for url in history
                    .urls
                    .keys()
                    .filter(|u| !due_set.contains(u.as_str()))
                {
                    opened.seen.insert_new(url.as_bytes());
                }
                (opened, due, history, generation)
            }
        };
        let due = config.recrawl.continuous.then(|| {
            // The URLs not being fetched now wait for their due time (those seeded get
            // theirs when their page is done).
            let now_seeded: HashSet<&str> = seeds.iter().map(Url::as_str).collect();
            history
                .urls
                .iter()
                .filter(|(url, s)| !s.retired() && !now_seeded.contains(url.as_str()))
                .map(|(url, s)| Reverse((millis(s.next_due), url.clone())))
                .collect()
        });
        let known = Arc::new(KnownUrls::new(history.urls));
        let opened = opened.wrap_source(|local| RecrawlSource {
            local,
            known,
            generation,
            bounds,
            due,
        });
        Ok((opened, seeds))
    }

    /// With `--continuous`: the page's outcome sets when its URL is wanted again.
    fn reschedule(&mut self, record: &PageRecord, archive: &Archived) {
        let Some(due) = self.due.as_mut() else {
            return;
        };
        // The archive's line is filled in on the output thread; what it will say is known
        // here already: the payload's digest and the response record's id and date.
        let mut outcome = record.clone();
        if let (Some(archived), false) = (archive, record.status == Some(304)) {
            outcome.payload_digest = Some(digest_label(&archived.payload_digest));
            outcome.warc = Some(crate::warc::WarcLocation {
                file: String::new(),
                offset: 0,
                length: 0,
                record: "response".into(),
                id: record_id(archived.response_id),
                date: archived.date.clone(),
            });
        }
        if let Some(next) = self
            .known
            .observe(&outcome, self.generation, &self.bounds, u64::MAX)
        {
            due.push(Reverse((millis(next), record.url.clone())));
        }
    }
}

impl WorkSource for RecrawlSource {
    type Frontier = Frontier;
    type Event = LocalEvent;

    async fn begin(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        fetch: &FetchShared,
        seeds: Vec<Url>,
        sync: BackgroundSync,
    ) -> Result<(), CrawlError> {
        self.local.begin(cx, fetch, seeds, sync).await
    }

    async fn page_done(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        dispatch: Dispatch,
        mut record: Box<PageRecord>,
        candidates: Candidates,
        archive: Archived,
    ) -> Result<(), CrawlError> {
        record.generation = Some(self.generation);
        self.reschedule(&record, &archive);
        self.local
            .page_done(cx, dispatch, record, candidates, archive)
            .await
    }

    fn discovered(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        candidates: Candidates,
        parent: String,
        counts: PageCounts,
    ) -> Result<(), CrawlError> {
        self.local.discovered(cx, candidates, parent, counts)
    }

    fn recording(&mut self, record: &mut PageRecord) {
        record.generation = Some(self.generation);
        self.local.recording(record);
    }

    fn recorded(&mut self, url: &str, number: u64) {
        self.local.recorded(url, number);
    }

    async fn drained(&mut self, cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        self.local.drained(cx).await
    }

    fn poll(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        now: Instant,
        stopping: bool,
    ) -> Result<Option<Instant>, CrawlError> {
        let local = self.local.poll(cx, now, stopping)?;
        let Some(due) = self.due.as_mut() else {
            return Ok(local);
        };
        if stopping {
            return Ok(local);
        }
        let now_ms = millis(epoch_secs(SystemTime::now()));
        while let Some(Reverse((at, _))) = due.peek() {
            if *at > now_ms {
                break;
            }
            let Some(Reverse((_, url))) = due.pop() else {
                break;
            };
            // Due again: to the back of its host's queue, where politeness decides when.
            let item = QueuedUrl::new(url, 0, None, 0);
            cx.frontier
                .push(&crate::frontier::key_of(&item.url), item)?;
        }
        let next = due
            .peek()
            .map(|Reverse((at, _))| now + Duration::from_millis(at.saturating_sub(now_ms)));
        Ok([local, next].into_iter().flatten().min())
    }

    async fn next_event(&mut self, stopping: bool) -> LocalEvent {
        self.local.next_event(stopping).await
    }

    async fn on_event(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        event: LocalEvent,
    ) -> Result<(), CrawlError> {
        self.local.on_event(cx, event).await
    }

    fn is_over(&self, frontier: &Frontier) -> bool {
        // A continuous recrawl runs until stopped.
        self.due.is_none() && self.local.is_over(frontier)
    }

    async fn end(&mut self, cx: &mut Cx<'_, Frontier>, stopped: bool) -> Result<(), CrawlError> {
        self.local.end(cx, stopped).await
    }

    fn known_urls(&self) -> Option<Arc<KnownUrls>> {
        Some(self.known.clone())
    }

    fn failed(&self, summary: &CrawlSummary, error: &CrawlError) {
        self.local.failed(summary, error);
    }

    async fn close(self, summary: &CrawlSummary) -> Result<(), CrawlError> {
        self.local.close(summary).await
    }
}
