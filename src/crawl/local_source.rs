//! The local source of work: a crawl in one process, its frontier on disk, resumable from
//! its checkpoints.
//!
//! Being the only writer of the frontier and the seen-set (through [`Acceptance`]), on the
//! driver's one task, is what makes the crawl's promises exact: no URL queued twice, never
//! more than `max_urls` accepted, and a checkpoint that is one consistent state taken
//! between two steps of the driver's loop. A page's new links reach the queue log (and the
//! OS, once per step) before its record is sent, so a crash never leaves a page done and
//! its links forgotten.
//!
//! The crawl is over when the frontier has nothing queued and nothing in flight; its end
//! (or stop) takes a final checkpoint, what a resume starts from.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};
use url::Url;

use super::admission::Acceptance;
use super::checkpoints::{Checkpoints, CrawlTime, PendingPhase};
use super::driver::{Archived, Opened};
use super::fetch_task::FetchShared;
use super::messages::Candidates;
use super::progress::ProgressMode;
use super::source::{Cx, JournalPlan, WorkSource};
use super::{seen_plan_for, sitemaps, CrawlError, CrawlSummary};
use crate::checkpoint;
use crate::config::Config;
use crate::cookie_jar::CookieJar;
use crate::counters::{CrawlCounters, PageCounts};
use crate::frontier::{Dispatch, Frontier, FrontierOptions, FrontierPolicy, QueuedUrl};
use crate::output::{BackgroundSync, OutputPosition, PageRecord};
use crate::seen::{SeenBackend, SeenSet};

/// Batches of URLs a fresh crawl takes on after its seeds ([`LocalSource::take_more_seeds`]).
pub(crate) type MoreSeeds = Box<dyn FnMut() -> Result<Vec<Url>, CrawlError> + Send>;

/// The local source: checkpoints, acceptance into the local frontier and seen-set.
pub(crate) struct LocalSource {
    config: Config,
    seen: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    /// What a resume of this crawl must match (handed to the checkpoints at `begin`).
    expectation: Option<checkpoint::Expectation>,
    /// The highest checkpoint number on disk, and the checkpoint resumed from.
    seq: u64,
    resumed_from: Option<u64>,
    /// URLs queued after the checkpoint (from its queue log): to queue again, and those
    /// recorded since, to count for their host.
    replayed: Option<(Vec<QueuedUrl>, Vec<String>)>,
    acceptance: Acceptance,
    /// This run and the runs before it, for the checkpoints.
    time: CrawlTime,
    /// After a resume: pages whose new links reached the queue log before a crash lost
    /// their record, with how many (see `crate::checkpoint::Loaded::orphans`). Fetched
    /// again, such a page finds those links already seen; they are not counted as seen, so
    /// the figures match an uninterrupted crawl's. Checkpointed until each is fetched.
    orphans: BTreeMap<String, u64>,
    /// `network.cookies`' jar, saved with each checkpoint.
    cookies: Option<Arc<CookieJar>>,
    /// More URLs to take on at the start like seeds, batch by batch until an empty one (a
    /// recrawl's due URLs, read from the state store: a generation of 10^8 URLs is not held
    /// in a list); taken at `begin`, before the first checkpoint, which then covers them.
    more_seeds: Option<MoreSeeds>,
    /// Set up by [`WorkSource::begin`].
    checkpoints: Option<(Checkpoints, Interval)>,
    /// Links were appended to the queue log since it was last handed to the OS.
    links_unflushed: bool,
}

/// What the local source's own work says to the loop.
pub(crate) enum LocalEvent {
    /// A background checkpoint moved on.
    Phase(Box<PendingPhase>),
    /// Time for the next checkpoint.
    Due,
}

impl LocalSource {
    /// A fresh crawl from the seeds, or (with `resume`) the checkpoint's state, checked
    /// against this run's settings; the pages file is cut back to the checkpoint only once
    /// everything else is checked and reopened. `next_generation`: a fresh crawl that keeps
    /// the earlier generations' records and archive and writes after them (a recrawl's,
    /// from where the journal ends).
    pub(crate) fn open(
        config: &Config,
        seeds: &[Url],
        (progress, started): (ProgressMode, Instant),
        resume: Option<checkpoint::Loaded>,
        next_generation: Option<OutputPosition>,
    ) -> Result<Opened<LocalSource>, CrawlError> {
        let out_dir = &config.output.dir;
        // A resumed crawl keeps its seen-set, sized for the max_urls it started with, also
        // when it is extended to a larger one: `[seen]` is checked against that size.
        let sized_for = resume.as_ref().map_or(config.crawl.max_urls.0, |loaded| {
            loaded.seen.plan().sized_for()
        });
        let plan = seen_plan_for(config, sized_for)?;
        let expectation = checkpoint::Expectation {
            max_urls: config.crawl.max_urls.0,
            seen_m_bits: plan.m_bits,
            seen_k: plan.k,
            seen_seed: plan.seed,
            seeds_xxh3: checkpoint::seeds_hash(seeds),
            seeds: seeds.len() as u64,
        };
        let sites = crate::site::Sites::new(&config.site).unwrap_or_default();
        let policy = FrontierPolicy::from_config(&config.politeness).with_sites(Arc::new(sites));
        let frontier_options =
            FrontierOptions::from_config(&config.frontier, out_dir, &config.crawl.user_agent);
        let pages = crate::output::journal_path(out_dir);
        let warc_prefix = config.output.warc_prefix.clone();
        let (seen, counters, start, frontier, replayed, seq, resumed_from, before, orphans) =
            match resume {
                None => {
                    checkpoint::remove(out_dir)?;
                    checkpoint::save_seeds(out_dir, seeds)?;
                    if next_generation.is_none() {
                        crate::warc::remove_archive(out_dir)
                            .map_err(crate::output::OutputError::from)?;
                    }
                    tracing::info!("{}", plan.summary());
                    (
                        Arc::new(SeenSet::new(plan)?),
                        Arc::new(CrawlCounters::default()),
                        next_generation.unwrap_or_default(),
                        Frontier::create(policy, frontier_options)?,
                        None,
                        0,
                        None,
                        (0, 0.0),
                        BTreeMap::new(),
                    )
                }
                Some(loaded) => {
                    loaded.manifest.check_compatible(out_dir, &expectation)?;
                    for damage in &loaded.damage {
                        tracing::warn!("resume: {damage}");
                    }
                    if loaded.manifest.format_version < checkpoint::FORMAT_VERSION {
                        tracing::warn!(
                        "resume: the checkpoint is of format {} (an older crawler): the summary's counters count the pages recorded after it only by their status and bytes, and the earlier runs' time is not known",
                        loaded.manifest.format_version
                    );
                    }
                    tracing::info!(
                    "resuming checkpoint {} of {}: {} URLs done, {} queued at the checkpoint ({} queued and {} recorded after it, replayed)",
                    loaded.manifest.seq,
                    loaded.manifest.created_at,
                    loaded.output.records,
                    loaded.frontier.queued,
                    loaded.replayed_urls,
                    loaded.replayed_records
                );
                    let frontier = Frontier::resume(
                        policy,
                        frontier_options,
                        &loaded.frontier,
                        loaded.hosts,
                        loaded.recorded_after,
                    )?;
                    // Only now, with everything checked and reopened: records past the last
                    // complete one (a torn line) are cut.
                    checkpoint::truncate_output(out_dir, loaded.output.bytes)?;
                    (
                        Arc::new(loaded.seen),
                        Arc::new(CrawlCounters::from_map(&loaded.counters)),
                        loaded.output,
                        frontier,
                        Some((loaded.queued_after, loaded.recorded_from_log)),
                        loaded.manifest.seq.max(checkpoint::highest_seq(out_dir)),
                        Some(loaded.manifest.seq),
                        (
                            loaded.manifest.runs,
                            loaded.manifest.crawl_secs + loaded.crawled_after_secs,
                        ),
                        loaded.orphans,
                    )
                }
            };
        if config.seen.exact {
            attach_admitted(out_dir, &seen, resumed_from, replayed.as_ref(), start.bytes)?;
        }
        let seen_backend: Arc<dyn SeenBackend> = seen.clone();
        let time = CrawlTime {
            runs: before.0 + 1,
            before_secs: before.1,
            started,
        };
        let finished_before = CrawlCounters::get(&counters.finished);
        // A resumed crawl goes on with the cookies of its last checkpoint.
        let cookies = match (config.network.cookies, resumed_from) {
            (false, _) => None,
            (true, Some(_)) => Some(CookieJar::load(out_dir, config.network.max_cookies)?),
            (true, None) => Some(CookieJar::new(config.network.max_cookies)),
        }
        .map(Arc::new);
        let source = LocalSource {
            config: config.clone(),
            seen: seen.clone(),
            counters: counters.clone(),
            expectation: Some(expectation),
            seq,
            resumed_from,
            replayed,
            acceptance: Acceptance::new(config, seen_backend, counters.clone()),
            time,
            orphans,
            cookies: cookies.clone(),
            more_seeds: None,
            checkpoints: None,
            links_unflushed: false,
        };
        Ok(Opened {
            source,
            frontier,
            seen,
            counters,
            journal: JournalPlan {
                pages,
                start,
                warc_prefix,
                // A next generation's archive goes on from the earlier ones' (their digest
                // index rebuilt from the journal), as a resumed one does.
                resumed: resumed_from.is_some() || next_generation.is_some(),
            },
            progress,
            time,
            finished_before,
            cookies,
        })
    }

    /// A fresh crawl takes on the batches `more` gives after its seeds, counted and
    /// accepted as they are (see [`LocalSource::more_seeds`]).
    pub(crate) fn take_more_seeds(&mut self, more: MoreSeeds) {
        self.more_seeds = Some(more);
    }

    fn checkpoints(&mut self) -> Result<&mut Checkpoints, CrawlError> {
        self.checkpoints
            .as_mut()
            .map(|(c, _)| c)
            .ok_or(CrawlError::Output(crate::output::OutputError::Stopped))
    }

    /// Accepts `candidates` found by `parent` (`None` for seeds), counting in `counts`.
    /// Returns how many were queued (and logged, to be flushed by [`Self::flush_links`]).
    fn accept(
        &mut self,
        frontier: &mut Frontier,
        (candidates, parent): (Candidates, Option<String>),
        counts: &mut PageCounts,
    ) -> Result<u64, CrawlError> {
        let log = self.checkpoints.as_mut().and_then(|(c, _)| c.queue_log());
        let queued = self
            .acceptance
            .accept(frontier, log, (candidates, parent), counts)?;
        self.links_unflushed |= queued > 0;
        Ok(queued)
    }

    /// Accepts what no record carries (seeds, a robots.txt's sitemaps), counted at once.
    fn accept_unrecorded(
        &mut self,
        frontier: &mut Frontier,
        found: (Candidates, Option<String>),
        mut counts: PageCounts,
    ) -> Result<(), CrawlError> {
        self.accept(frontier, found, &mut counts)?;
        self.counters.add_page(&counts);
        Ok(())
    }

    /// Its lost record counted an orphan's links as new (`accepted` has them, from the
    /// queue log): not seen again here. `new_links` stays what this fetch added, which the
    /// queue logs since the resume hold.
    fn correct_orphan(&mut self, record: &mut PageRecord) {
        if let Some(logged) = self.orphans.remove(&record.url) {
            record.counts.links_seen = record.counts.links_seen.saturating_sub(logged);
        }
    }

    /// Hands the links logged since the last call to the OS: the driver sends the records
    /// of the pages that found them only after this (see [`WorkSource::drained`]), so a
    /// crash can never leave a page done and its links forgotten. One write per step of the
    /// driver's loop, not one per page.
    fn flush_links(&mut self) -> Result<(), CrawlError> {
        if !std::mem::take(&mut self.links_unflushed) {
            return Ok(());
        }
        if let Some(log) = self.checkpoints()?.queue_log() {
            log.flush()?;
        }
        crate::checkpoint::fault::crash_at("links-logged");
        Ok(())
    }

    /// Starts a checkpoint of the current state.
    async fn checkpoint(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        finished: bool,
    ) -> Result<(), CrawlError> {
        // The links logged so far reach the OS before the records that found them do.
        self.flush_links()?;
        let sender = cx.out.flushed_sender().await?;
        let Some((checkpoints, _)) = self.checkpoints.as_mut() else {
            return Err(CrawlError::Output(crate::output::OutputError::Stopped));
        };
        checkpoints
            .start(cx.frontier, sender, finished, &self.orphans)
            .await
    }
}

/// `[seen] exact`: the admitted set behind the filter, fresh or as the checkpoint
/// `resumed_from` left it with the queue logs' URLs (`replayed`) added, as the filter has
/// them (see `crate::seen`'s `exact.rs`).
fn attach_admitted(
    out: &std::path::Path,
    seen: &SeenSet,
    resumed_from: Option<u64>,
    replayed: Option<&(Vec<QueuedUrl>, Vec<String>)>,
    journal_len: u64,
) -> Result<(), CrawlError> {
    let root = checkpoint::checkpoint_dir(out);
    let others: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| crate::state_store::AdmittedSet::manifest_in(&entry.path()))
        .collect();
    let dir = resumed_from.map(|seq| root.join(format!("ckpt-{seq}")));
    let urls: Vec<&str> = replayed
        .map(|(queued, recorded)| {
            let queued = queued.iter().map(|q| q.url.as_str());
            queued.chain(recorded.iter().map(String::as_str)).collect()
        })
        .unwrap_or_default();
    let pages = crate::output::journal_path(out);
    let admitted = crate::seen::admitted_for_crawl(
        out,
        dir.as_deref().map(|d| (d, others.as_slice())),
        &urls,
        (&pages, journal_len),
    )?;
    seen.attach_exact(admitted);
    Ok(())
}

impl WorkSource for LocalSource {
    type Frontier = Frontier;
    type Event = LocalEvent;

    async fn begin(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        fetch: &FetchShared,
        seeds: Vec<Url>,
        sync: BackgroundSync,
    ) -> Result<(), CrawlError> {
        let out_dir = self.config.output.dir.clone();
        let every = Duration::from_secs_f64(self.config.checkpoint.interval_secs);
        let checkpoints = Checkpoints::new(
            out_dir,
            (every, sync),
            self.seq,
            self.resumed_from,
            self.expectation
                .take()
                .ok_or(CrawlError::Output(crate::output::OutputError::Stopped))?,
            (self.seen.clone(), self.counters.clone()),
            self.time,
        )?;
        let mut checkpoints = checkpoints;
        checkpoints.keep_cookies(self.cookies.take());
        let interval = checkpoints.interval;
        let mut due = tokio::time::interval_at(Instant::now() + interval, interval);
        due.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.checkpoints = Some((checkpoints, due));
        if self.resumed_from.is_some() {
            fetch
                .admission
                .learn_near_duplicates(&crate::output::journal_path(&self.config.output.dir));
        }
        match self.replayed.take() {
            Some((items, recorded)) => {
                // Queued after the checkpoint, already accepted and in the seen-set:
                // straight back into the queues (the checkpoint's queues came back with the
                // frontier). Those recorded since are not queued again but were queued: they
                // count for their host's `max_pages_per_host` like the others.
                for item in items {
                    cx.frontier
                        .push(&crate::frontier::key_of(&item.url), item)?;
                }
                for url in recorded {
                    cx.frontier.count_queued(&crate::frontier::key_of(&url));
                }
            }
            None => {
                // Without robots.txt, the seeds' /sitemap.xml are the only sitemaps found.
                let c = &self.config;
                let mut counts = PageCounts::default();
                let sitemaps = (c.crawl.sitemaps && !c.politeness.respect_robots)
                    .then(|| sitemaps::for_seeds(&fetch.admission, &seeds, &mut counts));
                let seeds = Candidates {
                    urls: seeds.into_iter().map(Into::into).collect(),
                    depth: 0,
                    redirect_hops: 0,
                };
                if let Some(sitemaps) = sitemaps {
                    self.accept(cx.frontier, (seeds, None), &mut counts)?;
                    self.accept_unrecorded(cx.frontier, (sitemaps, None), counts)?;
                } else {
                    self.accept_unrecorded(cx.frontier, (seeds, None), counts)?;
                }
                if let Some(mut more) = self.more_seeds.take() {
                    loop {
                        let urls = more()?;
                        if urls.is_empty() {
                            break;
                        }
                        let batch = Candidates {
                            urls: urls.into_iter().map(Into::into).collect(),
                            depth: 0,
                            redirect_hops: 0,
                        };
                        self.accept_unrecorded(cx.frontier, (batch, None), PageCounts::default())?;
                    }
                }
            }
        }
        // A checkpoint right away, published before the first request: from here on, a
        // crawl killed at any instant can resume. A fresh crawl killed in its first moments
        // would otherwise leave records and no checkpoint (a directory that neither
        // `--resume` nor a plain run accepts); a resumed one would leave its records after
        // its predecessor's checkpoint, which counts one run fewer and the time between the
        // two runs as crawling.
        let first = Instant::now();
        self.checkpoint(cx, false).await?;
        self.checkpoints()?.wait(cx.frontier).await?;
        tracing::debug!("first checkpoint published in {:?}", first.elapsed());
        Ok(())
    }

    async fn page_done(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        dispatch: Dispatch,
        mut record: Box<PageRecord>,
        candidates: Candidates,
        archive: Archived,
    ) -> Result<(), CrawlError> {
        let parent = dispatch.item.url.clone();
        let new = self.accept(cx.frontier, (candidates, Some(parent)), &mut record.counts)?;
        // The new links reach the OS (`drained`, at the end of the step) before the page's
        // record is sent.
        record.new_links = new;
        cx.frontier.complete(dispatch);
        self.correct_orphan(&mut record);
        cx.out.finished(record, archive);
        Ok(())
    }

    fn discovered(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        candidates: Candidates,
        parent: String,
        counts: PageCounts,
    ) -> Result<(), CrawlError> {
        self.accept_unrecorded(cx.frontier, (candidates, Some(parent)), counts)
    }

    fn recording(&mut self, record: &mut PageRecord) {
        self.correct_orphan(record);
    }

    fn recorded(&mut self, _url: &str, _number: u64) {}

    async fn drained(&mut self, _cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        self.flush_links()
    }

    fn poll(
        &mut self,
        _cx: &mut Cx<'_, Frontier>,
        _now: Instant,
        _stopping: bool,
    ) -> Result<Option<Instant>, CrawlError> {
        Ok(None)
    }

    async fn next_event(&mut self, stopping: bool) -> LocalEvent {
        let Some((checkpoints, due)) = self.checkpoints.as_mut() else {
            return std::future::pending().await;
        };
        let has_pending = checkpoints.has_pending();
        tokio::select! {
            phase = checkpoints.next_phase(), if has_pending => LocalEvent::Phase(Box::new(phase)),
            _ = due.tick(), if !stopping => LocalEvent::Due,
            else => std::future::pending().await,
        }
    }

    async fn on_event(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        event: LocalEvent,
    ) -> Result<(), CrawlError> {
        match event {
            LocalEvent::Phase(phase) => self.checkpoints()?.advance(cx.frontier, *phase)?,
            LocalEvent::Due => {
                if self.checkpoints()?.is_busy() {
                    tracing::warn!("checkpoint: the previous one is still being written; skipped");
                } else {
                    self.checkpoints()?.wait(cx.frontier).await?;
                    self.checkpoint(cx, false).await?;
                }
            }
        }
        Ok(())
    }

    fn is_over(&self, frontier: &Frontier) -> bool {
        frontier.is_finished()
    }

    async fn end(&mut self, cx: &mut Cx<'_, Frontier>, stopped: bool) -> Result<(), CrawlError> {
        self.checkpoints()?.wait(cx.frontier).await?;
        self.checkpoint(cx, !stopped).await?;
        self.checkpoints()?.wait(cx.frontier).await?;
        Ok(())
    }

    fn failed(&self, summary: &CrawlSummary, error: &CrawlError) {
        super::summary::write_after_error(&self.config.output.dir, summary, error);
    }

    async fn close(self, summary: &CrawlSummary) -> Result<(), CrawlError> {
        let json = serde_json::to_vec_pretty(summary).unwrap_or_default();
        crate::output::write_atomically(
            &crate::output::summary_path(&self.config.output.dir),
            &json,
        )?;
        Ok(())
    }
}
