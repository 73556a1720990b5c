//! The local source of work: a crawl in one process, its frontier on disk, resumable from
//! its checkpoints.
//!
//! Being the only writer of the frontier and the seen-set (through
//! [`Acceptance`](super::admission::Acceptance)), on the driver's one task, is what makes
//! the crawl's promises exact: no URL queued twice, never more than `max_urls` accepted, and
//! a checkpoint that is one consistent state taken between two completions. A page's new
//! links reach the queue log (and the OS) before its record is sent, so a crash never
//! leaves a page done and its links forgotten.
//!
//! The crawl is over when the frontier has nothing queued and nothing in flight; its end
//! (or stop) takes a final checkpoint, what a resume starts from.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};
use url::Url;

use super::admission::Acceptance;
use super::checkpoints::{Checkpoints, PendingPhase};
use super::driver::{Archived, Opened};
use super::fetch_task::FetchShared;
use super::messages::Candidates;
use super::progress::ProgressMode;
use super::source::{Cx, JournalPlan, WorkSource};
use super::{seen_plan_for, sitemaps, CrawlError, CrawlSummary};
use crate::checkpoint;
use crate::config::Config;
use crate::counters::CrawlCounters;
use crate::frontier::{Dispatch, Frontier, FrontierOptions, FrontierPolicy, QueuedUrl};
use crate::output::{BackgroundSync, OutputPosition, PageRecord};
use crate::seen::{SeenBackend, SeenSet};

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
    /// Set up by [`WorkSource::begin`].
    checkpoints: Option<(Checkpoints, Interval)>,
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
    /// everything else is checked and reopened.
    pub(crate) fn open(
        config: &Config,
        seeds: &[Url],
        progress: ProgressMode,
        resume: Option<checkpoint::Loaded>,
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
        let policy = FrontierPolicy::from_config(&config.politeness);
        let frontier_options =
            FrontierOptions::from_config(&config.frontier, out_dir, &config.crawl.user_agent);
        let pages = crate::output::journal_path(out_dir);
        let warc_prefix = config.output.warc_prefix.clone();
        let (seen, counters, start, frontier, replayed, seq, resumed_from) = match resume {
            None => {
                checkpoint::remove(out_dir)?;
                checkpoint::save_seeds(out_dir, seeds)?;
                crate::warc::remove_archive(out_dir).map_err(crate::output::OutputError::from)?;
                tracing::info!("{}", plan.summary());
                (
                    Arc::new(SeenSet::new(plan)?),
                    Arc::new(CrawlCounters::default()),
                    OutputPosition::default(),
                    Frontier::create(policy, frontier_options)?,
                    None,
                    0,
                    None,
                )
            }
            Some(loaded) => {
                loaded.manifest.check_compatible(out_dir, &expectation)?;
                for damage in &loaded.damage {
                    tracing::warn!("resume: {damage}");
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
                )
            }
        };
        let seen_backend: Arc<dyn SeenBackend> = seen.clone();
        let source = LocalSource {
            config: config.clone(),
            seen: seen.clone(),
            counters: counters.clone(),
            expectation: Some(expectation),
            seq,
            resumed_from,
            replayed,
            acceptance: Acceptance::new(config, seen_backend, counters.clone()),
            checkpoints: None,
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
                resumed: resumed_from.is_some(),
            },
            progress,
        })
    }

    fn checkpoints(&mut self) -> Result<&mut Checkpoints, CrawlError> {
        self.checkpoints
            .as_mut()
            .map(|(c, _)| c)
            .ok_or(CrawlError::Output(crate::output::OutputError::Stopped))
    }

    /// Accepts `candidates` found by `parent` (`None` for seeds). Returns how many were
    /// queued.
    fn accept(
        &mut self,
        frontier: &mut Frontier,
        candidates: Candidates,
        parent: Option<String>,
    ) -> Result<u64, CrawlError> {
        let log = self.checkpoints.as_mut().and_then(|(c, _)| c.queue_log());
        self.acceptance.accept(frontier, log, candidates, parent)
    }

    /// Starts a checkpoint of the current state.
    async fn checkpoint(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        finished: bool,
    ) -> Result<(), CrawlError> {
        let sender = cx.out.sender();
        self.checkpoints()?
            .start(cx.frontier, sender, finished)
            .await
    }
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
            self.seen.clone(),
            self.counters.clone(),
        )?;
        let interval = checkpoints.interval;
        let mut due = tokio::time::interval_at(Instant::now() + interval, interval);
        due.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.checkpoints = Some((checkpoints, due));
        let fresh = self.replayed.is_none();
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
                let sitemaps = (c.crawl.sitemaps && !c.politeness.respect_robots)
                    .then(|| sitemaps::for_seeds(&fetch.admission, &seeds));
                let seeds = Candidates {
                    urls: seeds,
                    depth: 0,
                    redirect_hops: 0,
                };
                self.accept(cx.frontier, seeds, None)?;
                if let Some(sitemaps) = sitemaps {
                    self.accept(cx.frontier, sitemaps, None)?;
                }
            }
        }
        // A checkpoint right away: from here on, a crawl killed at any instant can resume.
        // A fresh crawl waits for it to be published before its first request, or a kill in
        // its first moments would leave records and no checkpoint (a directory that neither
        // `--resume` nor a plain run accepts); a resumed one already has its checkpoint.
        self.checkpoint(cx, false).await?;
        if fresh {
            self.checkpoints()?.wait(cx.frontier).await?;
        }
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
        let new = self.accept(cx.frontier, candidates, Some(parent))?;
        if new > 0 {
            // The new links reach the OS before the page's record does, so a crash can
            // never leave the page done and its links forgotten.
            if let Some(log) = self.checkpoints()?.queue_log() {
                log.flush()?;
            }
        }
        record.new_links = new;
        cx.frontier.complete(dispatch);
        cx.out.finished(record, archive).await?;
        Ok(())
    }

    fn discovered(
        &mut self,
        cx: &mut Cx<'_, Frontier>,
        candidates: Candidates,
        parent: String,
    ) -> Result<(), CrawlError> {
        self.accept(cx.frontier, candidates, Some(parent))?;
        Ok(())
    }

    fn recorded(&mut self, _url: &str, _number: u64) {}

    async fn drained(&mut self, _cx: &mut Cx<'_, Frontier>) -> Result<(), CrawlError> {
        Ok(())
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
