//! The lease source: one process of a crawl shared through Redis ([`crate::distributed`]).
//! Work comes as leases of hosts' URLs; a page's links go to the shared seen-set and queues;
//! a URL is acknowledged once its record is handed to the OS. The process writes
//! `pages-<process id>.jsonl` (and its own WARC files), seals dead processes' output at its
//! start and at the crawl's end, and then writes the crawl-wide `summary.json`.
//!
//! Redis is behind [`Session`] (the calls) and [`Leases`] (the bookkeeping): this file only
//! decides when. Round trips run beside the driver's loop (at most one admission and one
//! sync in flight), so dispatching never waits for Redis: a batch of finished pages costs
//! one pipeline of admission scripts (only for links the local cache does not know), and
//! one sync carries acknowledgements, finished leases, counters, heartbeat, top-ups and the
//! next claim.
//!
//! Guarantees (with those of [`crate::distributed`]): a URL is acknowledged only after its
//! page's links were admitted and its record handed to the OS; a lease ends only when all
//! its URLs are acknowledged (then the next claim tops it up, or ends it if its host's
//! queue is empty: a host whose queue refills from this process's own pages stays with it
//! without a round trip through the schedule; see [`crate::distributed`]'s `leases.rs`), or
//! at a stop, giving the others back to the head of their queues; an error of Redis stops the process without ending anything unfinished (the
//! leases expire and others take their unacknowledged URLs over). What this mode does not
//! do is refused at start by [`crate::config::Config::distributed_lacks`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};
use url::Url;

use super::admission::{count_shared, unknown_to};
use super::checkpoints::CrawlTime;
use super::driver::{Archived, Opened};
use super::fetch_task::FetchShared;
use super::messages::Candidates;
use super::progress::ProgressMode;
use super::source::{Cx, JournalPlan, WorkSource};
use super::{seen_plan, CrawlError, CrawlSummary};
use crate::config::Config;
use crate::cookie_jar::CookieJar;
use crate::counters::{CrawlCounters, PageCounts};
use crate::distributed::leases::{Appetite, Leases};
use crate::distributed::payloads;
use crate::distributed::seal::OutputLock;
use crate::distributed::session::{Admitted, Beside, CounterSums, Session, SyncReply, SyncRequest};
use crate::distributed::{process_id, DistributedError, Settings};
use crate::frontier::{key_of, Dispatch, Frontier, FrontierOptions, FrontierPolicy, QueuedUrl};
use crate::output::{BackgroundSync, Handed, OutputError, OutputPosition, PageRecord};
use crate::seen::SeenSet;

/// How often an idle process asks Redis for work (and whether the crawl is over).
const IDLE_POLL: Duration = Duration::from_millis(50);

/// A finished call's answer and what it carried.
type CallResult<T, C> = (Result<T, DistributedError>, C);

/// A finished page, from its fetch's end until its record is sent to the output (after its
/// links' admission).
struct FinishedPage {
    url: String,
    /// Its lease's host key.
    host: String,
    record: Box<PageRecord>,
    archive: Archived,
}

/// An admission's answers: per page, per URL; and per payload looked up, its original's
/// entry if another process published one, with the number of payloads published so far
/// (see [`payloads`]). The URLs sent for each page come back with them: the call owns them
/// while it runs rather than a copy.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    sent: Vec<Vec<(String, QueuedUrl)>>,
    answers: Vec<Vec<Admitted>>,
    originals: Vec<Option<Vec<u8>>>,
    payloads: u64,
}

/// The pages of an admission in flight and which pages' payloads were looked up (see
/// [`crate::distributed::payloads`]).
pub(crate) struct Admitting {
    pages: Vec<FinishedPage>,
    looked_up: Vec<bool>,
}

/// What a sync in flight carries, to read its answer.
pub(crate) struct Syncing {
    /// Hosts whose leases were asked to be topped up.
    topped: Vec<String>,
    sent_at: Instant,
}

/// What the process's round trips say to the loop.
pub(crate) enum LeaseEvent {
    Admitted(Option<CallResult<Admission, Admitting>>),
    Synced(Option<CallResult<SyncReply, Syncing>>),
    /// The output thread handed more records to the OS.
    Handed,
    /// Time for a progress line.
    Log,
}

/// One process's part of a distributed crawl.
pub(crate) struct LeaseSource {
    config: Config,
    session: Arc<Session>,
    leases: Leases,
    sums: CounterSums,
    /// The local cache in front of the shared seen-set: the same filter, for this process's
    /// links only.
    cache: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    /// The pages file, locked for this process's lifetime (how others tell it is alive).
    lock: Option<OutputLock>,
    /// The local frontier's directory: a cache of the leased hosts' URLs.
    work_dir: PathBuf,
    /// Kept from `begin` until the output is closed.
    sync: Option<BackgroundSync>,
    /// The output thread's count of records handed to the OS.
    handed: Option<Arc<Handed>>,
    /// Finished pages, with their links, waiting for the admission in flight.
    waiting: Vec<(FinishedPage, Candidates)>,
    admitting: Option<Beside<Admission, Admitting>>,
    /// `distributed.shared_payloads`: the cap of the crawl's shared payload index (0: off).
    shared_payloads: u64,
    /// Payloads in the shared index, as last read.
    payloads_known: u64,
    /// Payloads this process archived, to publish once their records are handed to the OS:
    /// (record number, field, entry), in record order.
    to_publish: VecDeque<(u64, Vec<u8>, Vec<u8>)>,
    syncing: Option<Beside<SyncReply, Syncing>>,
    next_claim: Instant,
    next_beat: Instant,
    crawl_over: bool,
    /// Time with a fetch slot free and no URL queued here before the crawl was over: what
    /// waiting for Redis cost this process (in its summary, `starved_secs`), and whether the
    /// last poll found it so.
    starved: Duration,
    last_poll: Option<(Instant, bool)>,
    /// A line per progress interval (no bar: a bar of this process alone would mislead);
    /// `crawler status` shows the whole crawl.
    log_tick: Option<Interval>,
}

impl LeaseSource {
    /// Joins the crawl `settings` name: checks the plan, locks this process's pages file,
    /// seals the output of dead processes, and opens a local frontier for leased URLs.
    pub(crate) async fn open(
        config: &Config,
        settings: Settings,
        (progress, started): (ProgressMode, Instant),
    ) -> Result<Opened<LeaseSource>, CrawlError> {
        let out_dir = &config.output.dir;
        let plan = seen_plan(config)?;
        let process = process_id();
        let session = Session::join(
            settings.clone(),
            process.clone(),
            plan.clone(),
            config.crawl.max_urls.0,
            config.scope.max_pages_per_host,
        )
        .await?;
        tracing::info!(
            "distributed: process {process} joins crawl {:?} on {}",
            settings.crawl_id,
            settings.url
        );
        // The pages file, locked before any other file of this process exists; then the
        // output of dead processes is sealed.
        let pages = crate::output::process_journal_path(out_dir, &process);
        let lock = OutputLock::acquire(&pages).map_err(OutputError::from)?;
        session
            .seal_dead(out_dir, &config.output.warc_prefix, false)
            .await?;
        let work_dir = crate::output::process_work_dir(out_dir, &process);
        let _ = std::fs::remove_dir_all(&work_dir);
        let sites = crate::site::Sites::new(&config.site).unwrap_or_default();
        let frontier = Frontier::create(
            FrontierPolicy::from_config(&config.politeness).with_sites(Arc::new(sites)),
            FrontierOptions::from_config(&config.frontier, &work_dir, &config.crawl.user_agent),
        )?;
        let cache = Arc::new(SeenSet::new(plan)?);
        let counters = Arc::new(CrawlCounters::default());
        let log_tick = (progress != ProgressMode::Quiet).then(|| {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(
                config.output.progress_interval_secs,
            ));
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            tick
        });
        let now = Instant::now();
        let source = LeaseSource {
            config: config.clone(),
            leases: Leases::new(settings.lease, settings.lease_urls),
            session,
            sums: CounterSums::default(),
            cache: cache.clone(),
            counters: counters.clone(),
            lock: Some(lock),
            work_dir,
            sync: None,
            handed: None,
            waiting: Vec::new(),
            admitting: None,
            shared_payloads: if config.output.warc {
                config.distributed.shared_payloads
            } else {
                0
            },
            payloads_known: 0,
            to_publish: VecDeque::new(),
            syncing: None,
            next_claim: now,
            next_beat: now,
            crawl_over: false,
            starved: Duration::ZERO,
            last_poll: None,
            log_tick,
        };
        Ok(Opened {
            source,
            frontier,
            seen: cache,
            counters,
            journal: JournalPlan {
                pages,
                start: OutputPosition::default(),
                // This process's archive files are `PREFIX-<process id>-TIMESTAMP-SERIAL`,
                // beside the other processes'. A process never resumes (its id is new), so
                // its archive starts empty, and its dedup index knows only its own payloads.
                warc_prefix: format!("{}-{process}", config.output.warc_prefix),
                resumed: false,
            },
            progress: ProgressMode::Quiet,
            // A process never resumes (its id is new): its run is its whole share.
            time: CrawlTime::first_run(started),
            finished_before: 0,
            // Each process keeps its own jar, not saved: a host's cookies would have to be
            // shared through Redis to follow its URLs from process to process.
            cookies: config
                .network
                .cookies
                .then(|| Arc::new(CookieJar::new(config.network.max_cookies))),
        })
    }

    fn handed(&self) -> u64 {
        self.handed.as_ref().map_or(0, |h| h.records())
    }

    fn increments(&mut self) -> Vec<(String, u64)> {
        let stale = self.leases.stale();
        self.sums.gained(&self.counters, &self.session, stale)
    }

    /// The candidates the local cache does not know (see [`unknown_to`]).
    fn unknown(
        &self,
        candidates: Candidates,
        parent: Option<String>,
        counts: &mut PageCounts,
    ) -> Vec<(String, QueuedUrl)> {
        unknown_to(&self.cache, candidates, parent, counts)
    }

    /// Counts the shared admission's answers (see [`count_shared`]); returns how many were
    /// queued (added to `accepted` at once).
    fn count_admitted(
        &self,
        items: &[(String, QueuedUrl)],
        answers: &[Admitted],
        counts: &mut PageCounts,
    ) -> u64 {
        let queued = count_shared(&self.cache, items, answers, counts);
        CrawlCounters::add(&self.counters.accepted, queued);
        queued
    }

    /// Held leases whose hosts this admission queued URLs for may top up at once.
    fn note_queued(&mut self, items: &[(String, QueuedUrl)], answers: &[Admitted]) {
        let now = Instant::now();
        let mut last: Option<&str> = None;
        for ((host, _), answer) in items.iter().zip(answers) {
            if *answer == Admitted::Queued && last != Some(host.as_str()) {
                self.leases.queued_for(host, now);
                last = Some(host);
            }
        }
    }

    /// Sends the waiting pages' links to Redis (one pipeline, one script per page with
    /// links the local cache does not know); pages with none are recorded at once.
    async fn start_admit(&mut self, cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        if self.waiting.is_empty() || self.admitting.is_some() {
            return Ok(());
        }
        let mut pages = Vec::new();
        let mut sent = Vec::new();
        let mut looked_up = Vec::new();
        let mut lookups = Vec::new();
        for (mut page, candidates) in std::mem::take(&mut self.waiting) {
            let parent = Some(page.url.clone());
            sent.push(self.unknown(candidates, parent, &mut page.record.counts));
            let lookup = page.archive.as_ref().filter(|_| self.shared_payloads > 0);
            if let Some(fetch) = lookup {
                lookups.push(payloads::field(&fetch.payload_digest()));
            }
            looked_up.push(lookup.is_some());
            pages.push(page);
        }
        let admitting = Admitting { pages, looked_up };
        if sent.iter().all(Vec::is_empty) && lookups.is_empty() {
            let answers = Admission {
                answers: vec![Vec::new(); sent.len()],
                sent,
                ..Admission::default()
            };
            return self.apply_admit(cx, admitting, answers).await;
        }
        let session = self.session.clone();
        // Both round trips at once, on the one connection.
        let call = async move {
            let (answers, originals) =
                tokio::join!(session.admit(&sent), session.payload_originals(&lookups));
            let (originals, payloads) = originals?;
            Ok(Admission {
                sent,
                answers: answers?,
                originals,
                payloads,
            })
        };
        self.admitting = Some(Beside::spawn(call, admitting));
        Ok(())
    }

    /// The admission's answers: counts, the cache, payloads another process archived, then
    /// the pages' records (and the payloads to publish once they are handed to the OS).
    async fn apply_admit(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        admitting: Admitting,
        admission: Admission,
    ) -> Result<(), CrawlError> {
        let Admitting { pages, looked_up } = admitting;
        self.payloads_known = self.payloads_known.max(admission.payloads);
        let mut originals = admission.originals.into_iter();
        for (((page, items), answers), looked_up) in pages
            .into_iter()
            .zip(admission.sent)
            .zip(admission.answers)
            .zip(looked_up)
        {
            let FinishedPage {
                url,
                host,
                mut record,
                mut archive,
            } = page;
            record.new_links = self.count_admitted(&items, &answers, &mut record.counts);
            self.note_queued(&items, &answers);
            let mut publish = None;
            if let (true, Some(fetch)) = (looked_up, archive.as_mut()) {
                match originals.next().flatten() {
                    Some(entry) => fetch.shared_original = payloads::original(&entry),
                    None => {
                        publish = payloads::entry(fetch)
                            .map(|entry| (payloads::field(&fetch.payload_digest()), entry));
                    }
                }
            }
            let number = cx.out.finished(record, archive);
            if let Some((field, entry)) = publish {
                self.to_publish.push_back((number, field, entry));
            }
            self.leases.recorded(&host, &url, number);
        }
        Ok(())
    }

    /// The payloads to publish whose records are among the first `handed`, while the shared
    /// index is under its cap.
    fn publishable(&mut self, handed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while self.to_publish.front().is_some_and(|(n, ..)| *n <= handed) {
            let Some((_, field, entry)) = self.to_publish.pop_front() else {
                break;
            };
            if self.payloads_known < self.shared_payloads {
                self.payloads_known += 1;
                out.push((field, entry));
            }
        }
        out
    }

    /// Starts one sync beside the loop: acknowledgements of the URLs whose records the
    /// output thread has handed to the OS and the finished leases all of whose records it
    /// has, the counters' increments, renewal of held leases (`beat`), and, when `claim`, a
    /// claim of up to `want` hosts with top-ups of held leases running low. It never waits
    /// for the output thread: a round trip to that thread in every sync (a wake-up of
    /// another thread on loaded cores) delays every claim. `short`: the process wants work
    /// (held leases with room are topped up: see `Leases::claim`).
    fn start_sync(
        &mut self,
        frontier: &Frontier,
        beat: bool,
        (want, short): (u64, bool),
        claim: bool,
    ) {
        let now = Instant::now();
        let handed = self.handed();
        let releases = self
            .leases
            .releases(now, handed, |host| frontier.handoff_wait(host, now));
        let increments = if !releases.is_empty() || beat {
            self.increments()
        } else {
            Vec::new()
        };
        let (claim, topped) = if claim {
            let (request, topped) = self
                .leases
                .claim(want, short, now, |host| frontier.handoff_wait(host, now));
            (Some(request), topped)
        } else {
            (None, Vec::new())
        };
        let request = SyncRequest {
            releases,
            increments,
            renew: beat.then(|| self.leases.tokens()),
            claim,
            publish: self.publishable(handed),
        };
        let session = self.session.clone();
        let call = async move { session.sync(request).await };
        let syncing = Syncing {
            topped,
            sent_at: now,
        };
        self.syncing = Some(Beside::spawn(call, syncing));
    }

    /// Applies a sync's answer: leases lost, claimed URLs queued, and when to claim again.
    fn finish_sync(
        &mut self,
        frontier: &mut Frontier,
        reply: Option<CallResult<SyncReply, Syncing>>,
    ) -> Result<(), CrawlError> {
        let Some((reply, syncing)) = reply else {
            return Ok(());
        };
        let reply = reply?;
        self.leases.note_stale(reply.stale);
        self.leases.lost(&reply.lost);
        let Some(claimed) = reply.claimed else {
            return Ok(());
        };
        let over = claimed.over;
        let claimed_looks_over = claimed.looks_over;
        let due_in = claimed.due_in;
        let (got, queue) = self
            .leases
            .claimed(claimed, syncing.sent_at, syncing.topped);
        for (host, item) in queue {
            // Leased URLs are in the shared set: links to them need no round trip.
            self.cache.insert_new(item.url.as_bytes());
            frontier.push(&host, item)?;
        }
        // Once over, always over (an empty crawl stays empty); a claim that asked only
        // some shards says nothing about it.
        self.crawl_over |= over;
        self.next_claim = if got > 0 || claimed_looks_over {
            Instant::now()
        } else {
            Instant::now()
                + due_in.map_or(IDLE_POLL, |d| d.clamp(Duration::from_millis(1), IDLE_POLL))
        };
        Ok(())
    }

    /// Waits for the calls in flight and applies them (before a stop or the end).
    async fn finish_calls(&mut self, cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        loop {
            if self.admitting.is_some() {
                let reply = Beside::join(&mut self.admitting).await;
                self.finish_admit(cx, reply).await?;
            } else if !self.waiting.is_empty() {
                self.start_admit(cx).await?;
            } else if self.syncing.is_some() {
                let reply = Beside::join(&mut self.syncing).await;
                self.finish_sync(cx.frontier, reply)?;
            } else {
                return Ok(());
            }
        }
    }

    async fn finish_admit(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        reply: Option<CallResult<Admission, Admitting>>,
    ) -> Result<(), CrawlError> {
        let Some((answers, admitting)) = reply else {
            return Ok(());
        };
        self.apply_admit(cx, admitting, answers?).await
    }
}

impl WorkSource for LeaseSource {
    type Frontier = Frontier;
    type Event = LeaseEvent;

    /// The seeds, admitted (and counted as a local crawl counts them) before the loop.
    async fn begin(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        _fetch: &FetchShared,
        seeds: Vec<Url>,
        sync: BackgroundSync,
    ) -> Result<(), CrawlError> {
        self.sync = Some(sync);
        self.handed = Some(cx.out.progress());
        let seeds = Candidates {
            urls: seeds.into_iter().map(Into::into).collect(),
            depth: 0,
            redirect_hops: 0,
        };
        let mut counts = PageCounts::default();
        let items = self.unknown(seeds, None, &mut counts);
        if !items.is_empty() {
            let batches = [items];
            let answers = self.session.admit(&batches).await?;
            let [items] = batches;
            if let Some(answers) = answers.first() {
                self.count_admitted(&items, answers, &mut counts);
            }
        }
        self.counters.add_page(&counts);
        Ok(())
    }

    async fn page_done(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        dispatch: Dispatch,
        record: Box<PageRecord>,
        candidates: Candidates,
        archive: Archived,
    ) -> Result<(), CrawlError> {
        // The dispatch goes back to the frontier now (its slot is free); the record is
        // written, and the URL closed in its lease, once its links are admitted.
        // The host key from the frontier (in memory while its URL is in flight) rather than
        // parsed again from the URL.
        let url = dispatch.item.url.clone();
        let host = match cx.frontier.host_key(dispatch.host) {
            Some(key) => key.to_string(),
            None => key_of(&url),
        };
        cx.frontier.complete(dispatch);
        self.leases.fetched(&host, &url);
        let page = FinishedPage {
            url,
            host,
            record,
            archive,
        };
        self.waiting.push((page, candidates));
        Ok(())
    }

    fn discovered(
        &mut self,
        _cx: &mut Cx<'_, Frontier>,
        candidates: Candidates,
        _parent: String,
        _counts: PageCounts,
    ) -> Result<(), CrawlError> {
        // Only sitemaps send these, and `crawl.sitemaps` is refused with [distributed]
        // (see `Config::distributed_lacks`): nothing to admit here.
        tracing::debug!(
            "{} discovered URLs dropped: sitemaps are not read in distributed mode",
            candidates.urls.len()
        );
        Ok(())
    }

    fn recorded(&mut self, url: &str, number: u64) {
        self.leases.recorded(&key_of(url), url, number);
    }

    async fn drained(&mut self, cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        self.start_admit(cx).await
    }

    fn poll(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        now: Instant,
        stopping: bool,
    ) -> Result<Option<Instant>, CrawlError> {
        let (in_flight, queued) = (cx.frontier.in_flight(), cx.frontier.queued());
        let short =
            !self.crawl_over && queued == 0 && in_flight < self.config.crawl.concurrency as u64;
        if let Some((at, true)) = self.last_poll {
            self.starved += now.saturating_duration_since(at);
        }
        self.last_poll = Some((now, short));
        if self.syncing.is_some() {
            return Ok(None);
        }
        let c = &self.config;
        let appetite = Appetite {
            concurrency: c.crawl.concurrency as u64,
            polite: c.politeness.enabled,
            per_host: u64::from(c.politeness.per_host_concurrency.max(1)),
            lease_urls: u64::from(self.session.settings().lease_urls),
        };
        let wants = self.leases.wants(&appetite, in_flight, queued, stopping);
        // Held leases with room are topped up while the process is short of work only
        // with politeness off: with it on, a host's URLs wait for its rate, not for more
        // of them here.
        let short = wants.is_some() && !c.politeness.enabled;
        let at = self.leases.sync_at(
            now,
            self.handed(),
            self.next_beat,
            wants.map(|_| self.next_claim),
            short,
            stopping,
        );
        if at > now {
            return Ok((!stopping).then_some(at));
        }
        let want = wants.filter(|_| self.next_claim <= now).unwrap_or(0);
        let beat = self.next_beat <= now;
        if beat {
            self.next_beat = now + self.session.settings().lease / 3;
        }
        self.start_sync(cx.frontier, beat, (want, short), !stopping);
        Ok(None)
    }

    async fn next_event(&mut self, _stopping: bool) -> LeaseEvent {
        let waits = self
            .handed
            .as_ref()
            .is_some_and(|h| self.leases.waits_for_output(h.records()));
        let handed = self.handed.clone();
        let grew = async move {
            match handed {
                Some(h) if waits => h.grew.notified().await,
                _ => std::future::pending().await,
            }
        };
        let log_tick = self.log_tick.as_mut();
        let log = async move {
            match log_tick {
                Some(tick) => {
                    tick.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            reply = Beside::join(&mut self.admitting) => LeaseEvent::Admitted(reply),
            reply = Beside::join(&mut self.syncing) => LeaseEvent::Synced(reply),
            () = grew => LeaseEvent::Handed,
            () = log => LeaseEvent::Log,
        }
    }

    async fn on_event(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        event: LeaseEvent,
    ) -> Result<(), CrawlError> {
        match event {
            LeaseEvent::Admitted(reply) => {
                self.finish_admit(cx, reply).await?;
                self.start_admit(cx).await?;
            }
            LeaseEvent::Synced(reply) => self.finish_sync(cx.frontier, reply)?,
            LeaseEvent::Handed => {}
            LeaseEvent::Log => tracing::info!(
                "{} pages done here, {} queued and {} in flight here, {} leases held, {} Redis round trips",
                CrawlCounters::get(&self.counters.finished),
                cx.frontier.queued(),
                cx.frontier.in_flight(),
                self.leases.held(),
                self.session.round_trips()
            ),
        }
        Ok(())
    }

    fn is_over(&self, frontier: &Frontier) -> bool {
        self.crawl_over
            && self.admitting.is_none()
            && self.syncing.is_none()
            && self.waiting.is_empty()
            && self.leases.is_empty()
            && frontier.is_finished()
    }

    /// At the crawl's end, a last sync (the crawl's figures); at a stop, records handed to
    /// the OS, then finished leases released and the unfinished URLs of the others given
    /// back to the head of their hosts' queues.
    async fn end(&mut self, cx: &mut Cx<'_, Frontier>, stopped: bool) -> Result<(), CrawlError> {
        if !stopped {
            self.start_sync(cx.frontier, false, (0, false), true);
            return self.finish_calls(cx).await;
        }
        self.finish_calls(cx).await?;
        cx.out.flushed_sender().await?.handed().await?;
        let now = Instant::now();
        let frontier = &*cx.frontier;
        let releases = self
            .leases
            .give_back(|host| frontier.handoff_wait(host, now));
        let increments = self.increments();
        self.session.give_back(&releases, &increments).await?;
        Ok(())
    }

    /// The output is closed (every record written and the files fsynced) before the process
    /// says it ended; at the crawl's end the dead processes' output is sealed (their leases
    /// have all expired by now), and the crawl-wide summary written from Redis's figures.
    fn redis_round_trips(&self) -> Option<u64> {
        Some(self.session.round_trips())
    }

    async fn close(mut self, summary: &CrawlSummary) -> Result<(), CrawlError> {
        drop(self.sync.take());
        let increments = self.increments();
        let out_dir = self.config.output.dir.clone();
        let process = self.session.process().to_string();
        let warc_prefix = &self.config.output.warc_prefix;
        let finished = self
            .session
            .finish(&out_dir, warc_prefix, &increments, summary.stopped);
        if let Some(json) = finished.await? {
            // Through a temporary file of this process's own: processes sharing the
            // directory may end at once.
            let tmp = crate::output::process_summary_tmp(&out_dir, &process);
            crate::durable::replace(&crate::output::summary_path(&out_dir), tmp, &json)
                .map_err(OutputError::from)?;
        }
        drop(self.lock.take());
        let round_trips = self.session.round_trips();
        let finished = CrawlCounters::get(&self.counters.finished);
        tracing::info!(
            "distributed: {finished} pages, {round_trips} Redis round trips ({:.2} per page)",
            round_trips as f64 / finished.max(1) as f64
        );
        let _ = std::fs::remove_dir_all(&self.work_dir);
        // The process's own summary, with what it cost in Redis beside it (the whole
        // crawl's figures are in Redis: `crawler status`, and `summary.json` once the crawl
        // is over).
        let mut json = serde_json::to_value(summary).unwrap_or_default();
        if let Some(object) = json.as_object_mut() {
            let figures = self
                .session
                .process_figures(finished, self.leases.stale(), self.starved);
            object.insert("distributed".into(), figures);
        }
        let json = serde_json::to_vec_pretty(&json).unwrap_or_default();
        crate::output::write_atomically(
            &crate::output::process_summary_path(&out_dir, &process),
            &json,
        )?;
        Ok(())
    }
}
