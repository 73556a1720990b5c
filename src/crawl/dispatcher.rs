//! The dispatcher: the one task that owns the frontier, hands work to fetch tasks, takes
//! their completions back, and decides when the crawl is over.
//!
//! Being the only writer of the frontier and the seen-set (through
//! [`Acceptance`](super::admission::Acceptance)) is what makes the crawl's promises exact:
//! no URL queued twice, never more than `max_urls` accepted, and a checkpoint that is one
//! consistent state taken between two completions.
//!
//! Counting: a URL's counts come with its record ([`PageCounts`]) and are added to the
//! crawl's counters in the step that sends the record to the output, so that a checkpoint,
//! taken by this task between two such steps, holds exactly the counts of the records it
//! covers (see `super::counters`).
//!
//! Termination is explicit: the crawl is over when the frontier has nothing queued and
//! nothing in flight. Shutdown stops dispatching, gives fetches in flight
//! `shutdown_grace_secs` to finish and records them; fetches still running then are
//! abandoned unrecorded, so a resumed crawl fetches them again.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::admission::Acceptance;
use super::checkpoints::Checkpoints;
use super::counters::{CrawlCounters, PageCounts};
use super::fetch_task::{base_record, fetch_task, robots_task, FetchShared};
use super::messages::{Completion, Outcome};
use super::progress::{Progress, ProgressFigures};
use super::shutdown::ShutdownHandle;
use super::CrawlError;
use super::CrawlFrontier;
use crate::descriptors::{Descriptors, RECOUNT_AFTER};
use crate::frontier::{QueuedUrl, Work};
use crate::output::{rfc3339, OutputSender, PageRecord};
use crate::robots::RobotsOutcome;
use crate::warc::record::ArchivedFetch;

pub(crate) struct Dispatcher {
    pub(crate) acceptance: Acceptance,
    pub(crate) checkpoints: Checkpoints,
    pub(crate) counters: Arc<CrawlCounters>,
    /// The descriptor budget: no new work while it is exhausted.
    pub(crate) descriptors: Descriptors,
    /// After a resume: pages whose new links reached the queue log before a crash lost
    /// their record, with how many (see `crate::checkpoint::Loaded::orphans`). Fetched
    /// again, such a page finds those links already seen; they are not counted as seen, so
    /// the figures match an uninterrupted crawl's. Checkpointed until each is fetched.
    pub(crate) orphans: std::collections::BTreeMap<String, u64>,
}

/// What the dispatch loop works with besides its own state.
pub(crate) struct Wiring<'a> {
    pub(crate) fetch: Arc<FetchShared>,
    pub(crate) completions: mpsc::UnboundedReceiver<Completion>,
    pub(crate) output: &'a OutputSender,
    pub(crate) shutdown: &'a ShutdownHandle,
    pub(crate) display: &'a mut Progress,
}

impl Dispatcher {
    /// Runs the crawl to its end or its stop, then takes the final checkpoint (what a
    /// resume starts from). Returns whether the crawl was stopped before its end.
    pub(crate) async fn run<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        wiring: Wiring<'_>,
    ) -> Result<bool, CrawlError> {
        let output = wiring.output;
        let stopped = self.dispatch_loop(frontier, wiring).await;
        CrawlCounters::add(&self.counters.descriptor_pauses, self.descriptors.pauses);
        let stopped = stopped?;
        self.checkpoints.wait(frontier).await?;
        self.checkpoint(frontier, output, !stopped).await?;
        self.checkpoints.wait(frontier).await?;
        Ok(stopped)
    }

    /// Starts a checkpoint of the current state.
    pub(crate) async fn checkpoint<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        output: &OutputSender,
        finished: bool,
    ) -> Result<(), CrawlError> {
        self.checkpoints
            .start(frontier, output, finished, &self.orphans)
            .await
    }

    /// Accepts `candidates` found by `parent` (`None` for seeds), counting in `counts`.
    /// Returns how many were queued.
    pub(crate) fn accept<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        candidates: super::messages::Candidates,
        parent: Option<String>,
        counts: &mut PageCounts,
    ) -> Result<u64, CrawlError> {
        self.acceptance.accept(
            frontier,
            self.checkpoints.queue_log(),
            (candidates, parent),
            counts,
        )
    }

    /// Accepts what no record carries (seeds, a robots.txt's sitemaps), counted at once.
    pub(crate) fn accept_unrecorded<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        candidates: super::messages::Candidates,
        parent: Option<String>,
        mut counts: PageCounts,
    ) -> Result<(), CrawlError> {
        self.accept(frontier, candidates, parent, &mut counts)?;
        self.counters.add_page(&counts);
        Ok(())
    }

    async fn dispatch_loop<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        wiring: Wiring<'_>,
    ) -> Result<bool, CrawlError> {
        let Wiring {
            fetch,
            mut completions,
            output,
            shutdown,
            display,
        } = wiring;
        let interval = self.checkpoints.interval;
        let mut checkpoint_tick = tokio::time::interval_at(Instant::now() + interval, interval);
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let concurrency = fetch.config.crawl.concurrency as u64;
        let grace = Duration::from_secs_f64(fetch.config.crawl.shutdown_grace_secs);
        let mut stop_rx = shutdown.subscribe();
        let mut stopping = shutdown.is_stopping();
        let mut grace_deadline: Option<Instant> = None;
        let mut tasks = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(display.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Address lookups for the per-address budget, answered by tasks of their own: the
        // frontier's task never waits on DNS (see `frontier/address.rs`).
        let (answers_tx, mut answers) = mpsc::unbounded_channel();
        loop {
            let pauses = self.descriptors.pauses;
            if !stopping {
                let now = Instant::now();
                while frontier.in_flight() < concurrency {
                    if self.descriptors.exhausted(now, frontier.in_flight()) {
                        break;
                    }
                    match frontier.pop_ready(now)? {
                        None => break,
                        Some(Work::Fetch(dispatch)) => {
                            self.descriptors.dispatched();
                            tasks.spawn(fetch_task(fetch.clone(), dispatch));
                        }
                        Some(Work::Robots(robots)) => {
                            CrawlCounters::add(&self.counters.robots_fetches, 1);
                            self.descriptors.dispatched();
                            tasks.spawn(robots_task(fetch.clone(), robots));
                        }
                        Some(Work::Disallowed(item)) => {
                            let mut record = unfetched(&item, "disallowed by robots.txt");
                            record.counts.disallowed += 1;
                            self.record(record, None, output).await?;
                        }
                        Some(Work::Deferred { item, crawl_delay }) => {
                            let reason = format!(
                                "deferred: robots.txt asks for a Crawl-delay of {} s, over politeness.max_crawl_delay_secs = {} s",
                                crawl_delay.as_secs_f64(),
                                fetch.config.politeness.max_crawl_delay_secs
                            );
                            let mut record = unfetched(&item, &reason);
                            record.counts.deferred += 1;
                            self.record(record, None, output).await?;
                        }
                    }
                }
                for lookup in frontier.take_lookups() {
                    let resolver = fetch.resolver.clone();
                    let answers = answers_tx.clone();
                    tokio::spawn(async move {
                        let answer = resolver.budget_address(&lookup.name).await;
                        // The dispatcher is gone only when the crawl is over.
                        let _ = answers.send((lookup, answer));
                    });
                }
            }
            if frontier.is_finished() {
                return Ok(false);
            }
            if stopping && frontier.in_flight() == 0 {
                return Ok(true);
            }
            if stopping && grace_deadline.is_none() {
                grace_deadline = Some(Instant::now() + grace);
            }
            let short_of_descriptors = !stopping
                && self
                    .descriptors
                    .exhausted(Instant::now(), frontier.in_flight());
            if self.descriptors.pauses > pauses {
                // Idle keep-alive connections are most of what is open: close them now
                // rather than wait for their idle timeout.
                fetch.fetcher.shed_idle_connections();
            }
            let wake = if short_of_descriptors {
                // Look again soon: idle connections close, fetches in flight end.
                Some(Instant::now() + RECOUNT_AFTER)
            } else if stopping || frontier.in_flight() >= concurrency {
                None
            } else {
                frontier.next_ready_at()
            };
            let has_pending = self.checkpoints.has_pending();
            tokio::select! {
                Some(completion) = completions.recv() => {
                    self.handle(frontier, completion, output).await?;
                    // Drain what else has arrived before dispatching again.
                    while let Ok(completion) = completions.try_recv() {
                        self.handle(frontier, completion, output).await?;
                    }
                }
                Some((lookup, answer)) = answers.recv() => {
                    frontier.address_resolved(lookup, answer);
                }
                _ = sleep_until_opt(wake) => {}
                _ = sleep_until_opt(grace_deadline) => {
                    // In-flight fetches did not finish in time: abandon them. Their URLs
                    // are not recorded, so a resumed crawl fetches them again.
                    tasks.abort_all();
                    return Ok(true);
                }
                changed = stop_rx.changed(), if !stopping => {
                    if changed.is_err() || *stop_rx.borrow() {
                        stopping = true;
                        tracing::info!("stopping: waiting for {} fetches in flight", frontier.in_flight());
                    }
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                phase = self.checkpoints.next_phase(), if has_pending => {
                    self.checkpoints.advance(frontier, phase)?;
                }
                _ = checkpoint_tick.tick(), if !stopping => {
                    if self.checkpoints.is_busy() {
                        tracing::warn!("checkpoint: the previous one is still being written; skipped");
                    } else {
                        self.checkpoints.wait(frontier).await?;
                        self.checkpoint(frontier, output, false).await?;
                    }
                }
                _ = tick.tick() => {
                    display.update(&self.figures(frontier, true));
                }
            }
        }
    }

    /// What the progress display shows now; `busiest` scans the hosts (costly at many
    /// hosts, so only once per progress line).
    pub(crate) fn figures<F: CrawlFrontier>(
        &self,
        frontier: &mut F,
        busiest: bool,
    ) -> ProgressFigures {
        let accepted = CrawlCounters::get(&self.counters.accepted);
        ProgressFigures {
            finished: CrawlCounters::get(&self.counters.finished),
            failures: self.counters.failures(),
            queued: frontier.queued(),
            in_flight: frontier.in_flight(),
            // The seen-set holds exactly the accepted URLs, and is sized for `max_urls`.
            seen_full: accepted as f64 / self.acceptance.max_urls().max(1) as f64,
            busiest: if busiest {
                frontier.busiest_host()
            } else {
                None
            },
        }
    }

    /// Sends an accepted URL's record to the output, its counts to the counters: one step,
    /// between two checkpoints.
    async fn record(
        &mut self,
        mut record: Box<PageRecord>,
        archive: Option<Box<ArchivedFetch>>,
        output: &OutputSender,
    ) -> Result<(), CrawlError> {
        if let Some(logged) = self.orphans.remove(&record.url) {
            // Its lost record counted them as new (`accepted` has them, from the queue
            // log): not seen again here. `new_links` stays what this fetch added, which
            // the queue logs since the resume hold.
            record.counts.links_seen = record.counts.links_seen.saturating_sub(logged);
        }
        self.counters.add_page(&record.counts);
        CrawlCounters::add(&self.counters.finished, 1);
        output.send_archived(record, archive).await?;
        Ok(())
    }

    async fn handle<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        completion: Completion,
        output: &OutputSender,
    ) -> Result<(), CrawlError> {
        let (dispatch, outcome) = match completion {
            Completion::Page { dispatch, outcome } => (dispatch, outcome),
            Completion::Robots {
                fetch,
                outcome,
                archived,
            } => {
                if let Some((record, archive)) = archived {
                    output.send_archived(record, Some(archive)).await?;
                }
                if let RobotsOutcome::Unavailable { reason, .. } = &outcome {
                    tracing::debug!("{}: {reason}", fetch.url);
                }
                let reason = outcome.give_up_reason();
                for item in frontier.robots_done(fetch, outcome)? {
                    let mut record = unfetched(&item, &reason);
                    record.counts.robots_unavailable += 1;
                    self.record(record, None, output).await?;
                }
                return Ok(());
            }
            Completion::Discovered {
                candidates,
                parent,
                counts,
            } => {
                self.accept_unrecorded(frontier, candidates, Some(parent), *counts)?;
                return Ok(());
            }
        };
        match outcome {
            Outcome::Retry { delay } => {
                // Counted with the URL's record (its attempts), when it ends.
                frontier.retry(dispatch, delay);
            }
            Outcome::Done {
                mut record,
                candidates,
                archive,
            } => {
                let parent = dispatch.item.url.clone();
                let new = self.accept(frontier, candidates, Some(parent), &mut record.counts)?;
                if new > 0 {
                    // The new links reach the OS before the page's record does, so a
                    // crash can never leave the page done and its links forgotten.
                    if let Some(log) = self.checkpoints.queue_log() {
                        log.flush()?;
                    }
                    crate::checkpoint::fault::crash_at("links-logged");
                }
                record.new_links = new;
                frontier.complete(dispatch);
                self.record(record, archive, output).await?;
            }
        }
        Ok(())
    }
}

/// The record of an accepted URL that ends without a fetch, for `reason`.
fn unfetched(item: &QueuedUrl, reason: &str) -> Box<PageRecord> {
    let mut record = base_record(item);
    record.attempts = 0;
    record.error = Some(reason.to_string());
    record.fetched_at = rfc3339(SystemTime::now());
    record
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
