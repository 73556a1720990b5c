//! The recrawl source: the next generation of a local crawl (`crawler recrawl --out DIR`),
//! and with `--continuous` a crawl that fetches each URL again whenever it falls due.
//!
//! It is the local source ([`LocalSource`]) with three differences, so everything a local
//! crawl guarantees (checkpoints, queue log, `kill -9` and resume, the archive cut back on
//! resume) holds as it is:
//! - **It takes on the due URLs** of the collection, found in one pass over the state store
//!   (`crate::state_store::DueOrder`, sorted on disk by last fetch): one per site as the
//!   generation's seeds, and for a site with nothing due yet one of its URLs not due (the
//!   seeds make the scope, which must be the collection's sites, as it was with all of them
//!   as seeds, for URLs that fall due later in a continuous run; a seed not due is in the
//!   seen-set already, so it is not fetched), the others in batches before the first checkpoint ([`LocalSource`]'s
//!   `take_more_seeds`), so a generation of 10^8 URLs is never a list in memory; its journal
//!   and archive go on after the earlier generations' instead of replacing them; the URLs
//!   known but not due are put in the generation's seen-set first (through a scratch file),
//!   so links to them are not new.
//! - **Its fetch tasks ask with validators**: [`WorkSource::known_urls`] hands them the
//!   state store (each fetch looks its URL up), so a page is requested with
//!   `If-None-Match` / `If-Modified-Since` and a `304` is archived as a revisit
//!   (`crate::warc`); the driver writes the same store from the records (its sink).
//! - **Its records carry the generation** (`"generation"` in `pages.jsonl`).
//!
//! With `--continuous` the crawl does not end: each fetched URL gets its next due time from
//! the adaptive schedule ([`crate::recrawl::schedule`]) and waits in a heap of due times
//! here (its due time and fingerprint: 16 bytes a URL); [`WorkSource::poll`] hands the
//! frontier each URL as it falls due, its URL read back from the store, so the frontier
//! keeps deciding when its host may be fetched (politeness is unchanged) and this file only
//! decides when a URL is wanted again. On resume the heap is rebuilt from the store, which
//! holds every fetch's outcome; a URL that was in the checkpoint's queues and falls due
//! again may then be fetched twice, the price of not logging the heap.
//!
//! Why wrap the local source rather than give the driver a second loop: the driver is
//! written once for every source (`source.rs`), and what differs here is which URLs enter,
//! how they are asked for and what their records say.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::io::{BufRead as _, BufReader, BufWriter, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;
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
use crate::durable::At;
use crate::frontier::{Dispatch, Frontier, QueuedUrl};
use crate::output::{BackgroundSync, OutputPosition, PageRecord};
use crate::recrawl::schedule::Bounds;
use crate::recrawl::{epoch_secs, KnownUrls, RecrawlError};
use crate::state_store::{
    state_after, DueOrder, StateStore, StateStoreError, UrlFingerprint, UrlState,
};
use crate::warc::record::{digest_label, record_id};

/// Due URLs handed to the frontier per batch at a generation's start.
const DUE_BATCH: usize = 4096;

/// The recrawl source: a local source whose URLs are a generation's.
pub(crate) struct RecrawlSource {
    local: LocalSource,
    known: Arc<KnownUrls>,
    generation: u32,
    /// With `--continuous`: URLs waiting for their due time, as (epoch milliseconds,
    /// fingerprint): 16 bytes a URL, its state read from the store when it falls due.
    due: Option<BinaryHeap<Reverse<(u64, u64)>>>,
}

fn millis(epoch_secs: f64) -> u64 {
    (epoch_secs.max(0.0) * 1000.0) as u64
}

/// The host part of a canonical URL (`scheme://host[:port]`), without parsing it.
fn site_of(url: &str) -> &str {
    let rest = url.find("://").map_or(0, |at| at + 3);
    let end = url[rest..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |at| rest + at);
    &url[..end]
}

/// Where the journal's whole records end, and how many there are: from the last
/// checkpoint when it is a finished crawl's that the journal still matches, else by
/// counting lines (a read of the journal, no parsing; a torn last line is not counted).
fn journal_end(out_dir: &Path, pages: &Path) -> Result<(u64, u64), CrawlError> {
    let len = std::fs::metadata(pages).map_or(0, |m| m.len());
    if let Some(Ok(manifest)) = checkpoint::current_manifest(out_dir) {
        if manifest.finished && manifest.pages_bytes == len {
            return Ok((manifest.pages_bytes, manifest.pages_records));
        }
    }
    let file = match std::fs::File::open(pages) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => {
            return Err(RecrawlError::Read {
                path: pages.to_path_buf(),
                source: e,
            }
            .into())
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let (mut bytes, mut records, mut at) = (0u64, 0u64, 0u64);
    loop {
        let buffer = reader.fill_buf().map_err(|source| RecrawlError::Read {
            path: pages.to_path_buf(),
            source,
        })?;
        if buffer.is_empty() {
            return Ok((bytes, records));
        }
        let n = buffer.len();
        for newline in memchr::memchr_iter(b'\n', buffer) {
            records += 1;
            bytes = at + newline as u64 + 1;
        }
        at += n as u64;
        reader.consume(n);
    }
}

/// The generation of the journal's last page record before `end` (1 when it has none):
/// the highest, since each generation's records follow the last one's. Read back from the
/// end in growing windows, never the whole journal.
fn last_generation(pages: &Path, end: u64) -> Result<u32, CrawlError> {
    #[derive(serde::Deserialize)]
    struct GenerationOnly {
        generation: Option<u32>,
        #[serde(default)]
        kind: crate::output::RecordKind,
    }
    let read_error = |source| RecrawlError::Read {
        path: pages.to_path_buf(),
        source,
    };
    if end == 0 {
        return Ok(1);
    }
    let mut file = std::fs::File::open(pages).map_err(read_error)?;
    let mut window = 1u64 << 16;
    loop {
        let from = end.saturating_sub(window);
        file.seek(SeekFrom::Start(from)).map_err(read_error)?;
        let mut tail = Vec::with_capacity((end - from) as usize);
        (&mut file)
            .take(end - from)
            .read_to_end(&mut tail)
            .map_err(read_error)?;
        // Whole lines only: the first one of a window that starts mid-journal may be cut.
        let whole = match (from, memchr::memchr(b'\n', &tail)) {
            (0, _) => &tail[..],
            (_, Some(at)) => &tail[at + 1..],
            (_, None) => &[][..],
        };
        let last_page = whole
            .split(|&b| b == b'\n')
            .rev()
            .filter_map(|line| serde_json::from_slice::<GenerationOnly>(line).ok())
            .find(|r| r.kind.is_page());
        if let Some(record) = last_page {
            return Ok(record.generation.unwrap_or(1));
        }
        if from == 0 {
            return Ok(1);
        }
        window = window.saturating_mul(4);
    }
}

/// The state store of `out_dir` brought up to the journal's first `journal_len` bytes
/// (rebuilt from it if missing), shared by the fetch tasks, the source and the store's
/// sink.
fn open_store(
    out_dir: &Path,
    pages: &Path,
    journal_len: u64,
    bounds: Bounds,
) -> Result<Arc<StateStore>, CrawlError> {
    let dir = StateStore::dir_of(out_dir);
    let (store, note) = StateStore::open_for_journal(&dir, (pages, journal_len), bounds)
        .map_err(RecrawlError::from)?;
    tracing::info!("recrawl: {note}");
    Ok(Arc::new(store))
}

/// What one pass over the store found at a generation's start.
#[derive(Default)]
struct Census {
    known: u64,
    retired: u64,
    /// Per site of the collection (one with a URL not retired), its first due URL, or a
    /// URL not due when none is: the generation's seeds. Every site is there, due or not,
    /// because the seeds make the scope: a site whose URLs fall due later in a continuous
    /// run must still be in it. A seed not due is in the seen-set already, so it is not
    /// fetched.
    sites: BTreeMap<String, (bool, String)>,
    /// The URL not retired fetched longest ago, and when.
    first_due: Option<(u64, String)>,
    /// With `--continuous`: the URLs not due now, as (due, fingerprint).
    waiting: Vec<Reverse<(u64, u64)>>,
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
        let continuous = config.recrawl.continuous;
        let (opened, seeds, generation, due, store) = match resume {
            Some(loaded) => {
                let generation = crate::recrawl::started_generation(out_dir).ok_or_else(|| {
                    RecrawlError::NotARecrawl {
                        dir: out_dir.clone(),
                    }
                })?;
                let opened = LocalSource::open(config, &seeds, progress, Some(loaded), None)?;
                // Opened after the resume cut the journal: the records it keeps.
                let store = open_store(out_dir, &pages, opened.journal.start.bytes, bounds)?;
                // Every URL not retired waits for its due time; one still queued from before
                // the stop may then be fetched twice (see the module doc).
                let due = continuous
                    .then(|| -> Result<_, CrawlError> {
                        let mut waiting = Vec::new();
                        store
                            .for_each_state(|fp, state| {
                                if !state.retired() {
                                    waiting.push(Reverse((state.next_due * 1000, fp.0)));
                                }
                                true
                            })
                            .map_err(RecrawlError::from)?;
                        Ok(BinaryHeap::from(waiting))
                    })
                    .transpose()?;
                (opened, seeds, generation, due, store)
            }
            None => {
                let (bytes, records) = journal_end(out_dir, &pages)?;
                let recorded = last_generation(&pages, bytes)?;
                // A generation started (its number written) but stopped before its first
                // checkpoint left nothing to resume: it starts again under its number.
                let generation = match crate::recrawl::started_generation(out_dir) {
                    Some(started) if started > recorded => started,
                    _ => recorded + 1,
                };
                let store = open_store(out_dir, &pages, bytes, bounds)?;
                let scratch = out_dir.join("state").join("recrawl-scratch");
                let now = epoch_secs(SystemTime::now()) as u64;
                let min_secs = min.as_secs();
                let mut census = Census::default();
                let not_due_path = scratch.join("not-due.txt");
                let mut not_due = None;
                let mut failed = None;
                let order = DueOrder::build(store.clone(), &scratch.join("sort"), |state| {
                    census.known += 1;
                    let retired = state.retired();
                    census.retired += u64::from(retired);
                    if !retired
                        && census
                            .first_due
                            .as_ref()
                            .is_none_or(|(at, _)| state.fetched_at < *at)
                    {
                        census.first_due = Some((state.fetched_at, state.url.clone()));
                    }
                    let due = !retired
                        && (min_secs == 0 || now.saturating_sub(state.fetched_at) >= min_secs);
                    if !retired {
                        let site = site_of(&state.url);
                        match census.sites.get_mut(site) {
                            None => {
                                census
                                    .sites
                                    .insert(site.to_string(), (due, state.url.clone()));
                            }
                            Some(seed) if due && !seed.0 => *seed = (true, state.url.clone()),
                            Some(_) => {}
                        }
                    }
                    if due {
                        return Some(state.fetched_at);
                    }
                    // Known but not due, or retired: seen in this generation, not fetched
                    // (its URL put in the seen-set once the set exists, from a file: not
                    // held here), so a link to it is not new.
                    if let Err(e) = write_line(&mut not_due, &not_due_path, &state.url) {
                        let e = CrawlError::from(e);
                        failed.get_or_insert(e);
                    }
                    if continuous && !retired {
                        census.waiting.push(Reverse((
                            state.next_due * 1000,
                            UrlFingerprint::of(&state.url).0,
                        )));
                    }
                    None
                })
                .map_err(RecrawlError::from)?;
                if let Some(e) = failed {
                    return Err(e);
                }
                if let Some(mut file) = not_due.take() {
                    file.flush()
                        .at("write", &not_due_path)
                        .map_err(StateStoreError::from)?;
                }
                if census.known == 0 {
                    return Err(RecrawlError::Empty { path: pages }.into());
                }
                let any_due = census.sites.values().any(|(due, _)| *due);
                let mut seeds: Vec<Url> = census
                    .sites
                    .values()
                    .filter_map(|(_, u)| Url::parse(u).ok())
                    .collect();
                let mut started_early = None;
                if order.is_empty() && continuous {
                    // Nothing due yet: the URL due first starts the run (a little early),
                    // the others wait for their time in the heap.
                    if let Some((_, url)) = &census.first_due {
                        let fp = UrlFingerprint::of(url).0;
                        census.waiting.retain(|Reverse((_, f))| *f != fp);
                        seeds.extend(Url::parse(url).ok());
                        started_early = Some(url.clone());
                    }
                }
                if !any_due && started_early.is_none() {
                    let next = census
                        .first_due
                        .as_ref()
                        .map(|(at, _)| (at + min_secs).saturating_sub(now));
                    return Err(RecrawlError::NothingDue {
                        dir: out_dir.clone(),
                        known: census.known as usize,
                        retired: census.retired as usize,
                        next_in: match next {
                            Some(secs) => {
                                humantime::format_duration(Duration::from_secs(secs)).to_string()
                            }
                            None => "never (every URL is retired)".into(),
                        },
                        min_interval: config.recrawl.min_interval.clone(),
                    }
                    .into());
                }
                // The journal ends with a whole record (a finished crawl's does; a torn
                // line, never a record, is cut) and the generation starts there.
                checkpoint::truncate_output(out_dir, bytes)?;
                crate::recrawl::start_generation(out_dir, generation)?;
                tracing::info!(
                    "recrawl: generation {generation}: {} of {} known URLs due ({} retired), {} sites",
                    order.len() + u64::from(started_early.is_some()),
                    census.known,
                    census.retired,
                    seeds.len()
                );
                let start = OutputPosition { bytes, records };
                let mut opened = LocalSource::open(config, &seeds, progress, None, Some(start))?;
                if not_due_path.exists() {
                    let file = std::fs::File::open(&not_due_path)
                        .at("open", &not_due_path)
                        .map_err(StateStoreError::from)?;
                    for line in BufReader::with_capacity(1 << 16, file).lines() {
                        let url = line
                            .at("read", &not_due_path)
                            .map_err(StateStoreError::from)?;
                        if started_early.as_deref() != Some(url.as_str()) {
                            opened.seen.insert_new(url.as_bytes());
                        }
                    }
                    let _ = std::fs::remove_file(&not_due_path);
                }
                // The due URLs after the seeds, in batches, the one fetched longest ago
                // first (the seeds are due URLs themselves: not taken twice).
                let seeded: HashSet<String> = seeds.iter().map(|u| u.to_string()).collect();
                let mut order = Some(order);
                opened.source.take_more_seeds(Box::new(move || loop {
                    let Some(sorted) = order.as_mut() else {
                        return Ok(Vec::new());
                    };
                    let batch = sorted.next_batch(DUE_BATCH).map_err(RecrawlError::from)?;
                    if batch.is_empty() {
                        // The sort's files go with it; then its (empty) scratch directory.
                        order = None;
                        let _ = std::fs::remove_dir(&scratch);
                        return Ok(Vec::new());
                    }
                    let urls: Vec<Url> = batch
                        .into_iter()
                        .filter(|(_, s)| !seeded.contains(&s.url))
                        .filter_map(|(_, s)| Url::parse(&s.url).ok())
                        .collect();
                    if !urls.is_empty() {
                        return Ok(urls);
                    }
                }));
                let due = continuous.then(|| BinaryHeap::from(std::mem::take(&mut census.waiting)));
                (opened, seeds, generation, due, store)
            }
        };
        let known = Arc::new(KnownUrls::new(store));
        let opened = opened.wrap_source(|local| RecrawlSource {
            local,
            known,
            generation,
            due,
        });
        Ok((opened, seeds))
    }

    /// With `--continuous`: the page's outcome sets when its URL is wanted again, by the
    /// fold its record will go through in the store (`state_after`), applied here to the
    /// state before it.
    fn reschedule(&mut self, record: &PageRecord, archive: &Archived) {
        let Some(due) = self.due.as_mut() else {
            return;
        };
        // The archive's line is filled in on the output thread; what it will say is known
        // here already: the payload's digest and the response record's id and date.
        let mut outcome = record.clone();
        if let (Some(archived), false) = (archive, record.status == Some(304)) {
            outcome.payload_digest = Some(digest_label(&archived.payload_digest()));
            outcome.warc = Some(crate::warc::WarcLocation {
                file: String::new(),
                offset: 0,
                length: 0,
                record: "response".into(),
                id: record_id(archived.response_id),
                date: archived.date.clone(),
            });
        }
        let store = self.known.store();
        let before = match store.get(&record.url) {
            Ok(before) => before,
            Err(e) => {
                tracing::warn!("recrawl: {}: not rescheduled: {e}", record.url);
                return;
            }
        };
        if let Some(state) = state_after(before.as_ref(), &outcome, &store.schedule()) {
            if !state.retired() {
                due.push(Reverse((
                    state.next_due * 1000,
                    UrlFingerprint::of(&record.url).0,
                )));
            }
        }
    }
}

/// Appends `url` and a newline to the file at `path`, created on first use.
fn write_line(
    file: &mut Option<BufWriter<std::fs::File>>,
    path: &Path,
    url: &str,
) -> Result<(), StateStoreError> {
    if file.is_none() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).at("create", dir)?;
        }
        let created = std::fs::File::create(path).at("create", path)?;
        *file = Some(BufWriter::with_capacity(1 << 16, created));
    }
    if let Some(file) = file.as_mut() {
        file.write_all(url.as_bytes()).at("write", path)?;
        file.write_all(b"\n").at("write", path)?;
    }
    Ok(())
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
        let mut fell_due = Vec::new();
        while let Some(Reverse((at, _))) = due.peek() {
            if *at > now_ms {
                break;
            }
            if let Some(Reverse((_, fp))) = due.pop() {
                fell_due.push(UrlFingerprint(fp));
            }
        }
        if !fell_due.is_empty() {
            let states = self
                .known
                .store()
                .get_batch(&fell_due)
                .map_err(RecrawlError::from)?;
            for state in states.into_iter().flatten().filter(|s| !s.retired()) {
                // Due again: to the back of its host's queue, where politeness decides when.
                let UrlState { url, .. } = state;
                let item = QueuedUrl::new(url, 0, None, 0);
                cx.frontier
                    .push(&crate::frontier::key_of(&item.url), item)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_says_where_its_records_end_and_their_last_generation() {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages.jsonl");
        let mut text = String::from("{\"url\":\"http://a.test/\"}\n");
        text.push_str("{\"url\":\"http://a.test/x\",\"generation\":3}\n");
        // A robots.txt record after it, longer than the first window read back.
        let long = "x".repeat(300_000);
        text.push_str(&format!(
            "{{\"url\":\"http://a.test/robots.txt\",\"kind\":\"robots\",\"error\":\"{long}\"}}\n"
        ));
        let whole = text.len() as u64;
        text.push_str("{\"url\":\"http://a.test/torn\",\"gener");
        std::fs::write(&pages, &text).unwrap();
        assert_eq!(journal_end(dir.path(), &pages).unwrap(), (whole, 3));
        assert_eq!(last_generation(&pages, whole).unwrap(), 3);
        assert_eq!(last_generation(&pages, 25).unwrap(), 1);
        assert_eq!(last_generation(&pages, 0).unwrap(), 1);
        let missing = dir.path().join("none.jsonl");
        assert_eq!(journal_end(dir.path(), &missing).unwrap(), (0, 0));
    }

    #[test]
    fn a_site_is_the_url_up_to_its_path() {
        assert_eq!(site_of("http://a.test/x/y?z"), "http://a.test");
        assert_eq!(site_of("https://a.test:8443?q"), "https://a.test:8443");
        assert_eq!(site_of("http://a.test"), "http://a.test");
    }
}
