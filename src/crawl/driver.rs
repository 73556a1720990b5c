//! The crawl driver: everything a run does whatever its source of work
//! ([`super::source::WorkSource`]), written once.
//!
//! Set-up: the archive (cut back to the pages file on a resume), the output thread, the
//! background fsync, the request gate, client and parse pool. The work pump: the frontier's
//! ready work handed to fetch tasks under the concurrency limit and the descriptor budget,
//! the records of URLs that end without a fetch, address look-ups for the per-address
//! budget (answered by tasks of their own: the loop never waits on DNS, see
//! `frontier/address.rs`), completions, the progress display, stop and grace. Teardown:
//! the parse pool joined, the output closed, the summary.
//!
//! Guarantees: at most `crawl.concurrency` fetches in flight; no new work while descriptors
//! run short (see [`crate::descriptors`]); after a stop, fetches in flight get
//! `shutdown_grace_secs` to finish and are then abandoned unrecorded (a resumed or another
//! process fetches them again); every record goes through one [`Recorder`], which numbers
//! them in the order the output thread receives them.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;
use url::Url;

use super::admission::Admission;
use super::checkpoints::CrawlTime;
use super::faults;
use super::fetch_task::{base_record, FetchShared};
use super::handoffs::{self, Handoff};
use super::launcher::{Launch, Launcher};
use super::messages::{Completion, Outcome, ParseJob};
use super::parse_pool::{ParsePool, ParseShared};
use super::progress::{Progress, ProgressFigures, ProgressMode};
use super::shutdown::ShutdownHandle;
use super::source::{Cx, JournalPlan, WorkSource};
use super::summary::{CrawlSummary, Ending};
use super::CrawlError;
use crate::config::Config;
use crate::cookie_jar::CookieJar;
use crate::counters::{CrawlCounters, PageCounts};
use crate::descriptors::{Descriptors, RECOUNT_AFTER};
use crate::extract::ExtractOptions;
use crate::fetch::Fetcher;
use crate::frontier::{FrontierBackend, QueuedUrl, Work};
use crate::gate::RequestGate;
use crate::monitor::Monitor;
use crate::output::{rfc3339, BackgroundSync, OutputError, OutputSender, OutputWriter, PageRecord};
use crate::robots::RobotsOutcome;
use crate::scope::Scope;
use crate::seen::{SeenBackend, SeenSet};
use crate::warc::record::ArchivedFetch;
use crate::warc::sink::ArchivePlan;
use crate::warc::Archiver;

/// A fetch's archive records, with the archive on.
pub(crate) type Archived = Option<Box<ArchivedFetch>>;

/// The one way records reach the output thread. Each record gets a number (1, 2, … in the
/// order numbered), which the output thread's count of records handed to the OS is compared
/// with: a distributed process acknowledges a URL once its number is handed.
///
/// Records are numbered at once but sent together, once per step of the driver's loop
/// ([`Recorder::send_pending`], after the source's [`WorkSource::drained`] has put the
/// step's links where a crash keeps them): one message to the output thread per burst, not
/// one per page. Whatever reads the output's position or waits for it
/// ([`Recorder::flushed_sender`]) sends the pending records first.
pub(crate) struct Recorder {
    sender: OutputSender,
    counters: Arc<CrawlCounters>,
    sent: u64,
    pending: Vec<(Box<PageRecord>, Archived)>,
}

impl Recorder {
    /// How many records the output thread has handed to the OS (it never waits).
    pub(crate) fn progress(&self) -> Arc<crate::output::Handed> {
        self.sender.progress()
    }

    /// The output's sender, once every record numbered so far is sent to it: what a
    /// checkpoint's flush or a wait for the records to be handed needs. A source with links
    /// to log first logs them before it calls this.
    pub(crate) async fn flushed_sender(&mut self) -> Result<&OutputSender, CrawlError> {
        self.send_pending().await?;
        Ok(&self.sender)
    }

    /// Sends the records numbered since the last call, in order, in one message.
    pub(crate) async fn send_pending(&mut self) -> Result<(), CrawlError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        handoffs::count(Handoff::Output, 1);
        if self.pending.len() == 1 {
            if let Some((record, archive)) = self.pending.pop() {
                self.sender.send_archived(record, archive).await?;
            }
            return Ok(());
        }
        let records = std::mem::take(&mut self.pending);
        self.sender.send_batch(records).await?;
        Ok(())
    }

    /// A record that ends no queued URL (a robots.txt fetch's, with the archive on).
    pub(crate) fn other(&mut self, record: Box<PageRecord>, archive: Archived) -> u64 {
        self.pending.push((record, archive));
        self.sent += 1;
        self.sent
    }

    /// The record of a queued URL's end, its counts added to the crawl's counters in the
    /// same step (so a checkpoint, taken between two steps, holds exactly the counts of the
    /// records it covers: see `crate::counters`): one more URL finished.
    pub(crate) fn finished(&mut self, record: Box<PageRecord>, archive: Archived) -> u64 {
        self.counters.add_page(&record.counts);
        CrawlCounters::add(&self.counters.finished, 1);
        self.other(record, archive)
    }
}

/// The record of an accepted URL that ends without a fetch, for `reason`, counted by
/// `counted`; the source sees it before it is sent and learns its number after.
async fn record_unfetched<S: WorkSource>(
    source: &mut S,
    cx: &mut Cx<'_, S::Frontier>,
    item: &QueuedUrl,
    reason: &str,
    counted: impl FnOnce(&mut PageCounts),
) -> Result<(), CrawlError> {
    let mut record = base_record(item);
    counted(&mut record.counts);
    record.attempts = 0;
    record.error = Some(reason.to_string());
    record.fetched_at = rfc3339(SystemTime::now());
    source.recording(&mut record);
    let number = cx.out.finished(record, None);
    source.recorded(&item.url, number);
    Ok(())
}

/// What a source opened: itself, the frontier it feeds, the seen-set the parse pool screens
/// links against (the crawl's, or a distributed process's cache of the shared one), the
/// counters, and where its records go.
pub(crate) struct Opened<S: WorkSource> {
    pub(crate) source: S,
    pub(crate) frontier: S::Frontier,
    pub(crate) seen: Arc<SeenSet>,
    pub(crate) counters: Arc<CrawlCounters>,
    pub(crate) journal: JournalPlan,
    /// The progress display's mode (a distributed process logs lines of its own instead).
    pub(crate) progress: ProgressMode,
    /// This run and the runs before it (a resumed crawl's), and the pages they finished.
    pub(crate) time: CrawlTime,
    pub(crate) finished_before: u64,
    /// `network.cookies`' jar (kept with the checkpoints by a local source).
    pub(crate) cookies: Option<Arc<CookieJar>>,
}

impl<S: WorkSource> Opened<S> {
    /// The same opened crawl with `wrap` around its source: a source built on another
    /// (the recrawl's on the local one) keeps everything else as opened.
    pub(crate) fn wrap_source<T: WorkSource<Frontier = S::Frontier>>(
        self,
        wrap: impl FnOnce(S) -> T,
    ) -> Opened<T> {
        Opened {
            source: wrap(self.source),
            frontier: self.frontier,
            seen: self.seen,
            counters: self.counters,
            journal: self.journal,
            progress: self.progress,
            time: self.time,
            finished_before: self.finished_before,
            cookies: self.cookies,
        }
    }
}

/// Runs an opened source to its end (or its stop) and returns the summary.
pub(crate) async fn drive<S: WorkSource>(
    config: &Config,
    seeds: Vec<Url>,
    shutdown: &ShutdownHandle,
    descriptors: Descriptors,
    opened: Opened<S>,
) -> Result<CrawlSummary, CrawlError> {
    let Opened {
        mut source,
        mut frontier,
        seen,
        counters,
        journal,
        progress,
        time,
        finished_before,
        cookies,
    } = opened;
    let archive = crate::warc::sink::open(
        config,
        ArchivePlan {
            journal: journal.pages.clone(),
            journal_bytes: journal.start.bytes,
            prefix: journal.warc_prefix.clone(),
            resumed: journal.resumed,
            digest_before_output: config.distributed.redis.is_some() || config.recrawl.continuous,
        },
        counters.clone(),
    )?;
    let (mut sinks, archive_file, archiver) = match archive {
        Some(a) => (vec![a.sink], Some(a.current), Some(a.archiver)),
        None => (Vec::new(), None, None),
    };
    // After the archive's sink: a record reaches it with its digest and WARC fields. A
    // recrawl's source has the store open already (it reads it): the sink writes that one.
    let known = source.known_urls();
    if let Some(known) = &known {
        sinks.push(Box::new(crate::state_store::StateSink::over(
            known.store().clone(),
        )));
    } else if config.state.enabled {
        let (min, max) = config.recrawl_intervals()?;
        sinks.push(Box::new(crate::state_store::StateSink::open(
            &config.output.dir,
            (&journal.pages, journal.start.bytes),
            journal.resumed,
            crate::recrawl::schedule::Bounds::new(min, max),
        )?));
    }
    let (output_writer, sender) =
        OutputWriter::start_at(journal.pages.clone(), 4096, journal.start, sinks)?;
    let sync = BackgroundSync::start(
        Duration::from_secs_f64(config.checkpoint.sync_interval_secs),
        journal.pages.clone(),
        archive_file,
    )?;
    let (completions_tx, completions) = mpsc::unbounded_channel();
    // The crawl runs on the seen-set through its backend interface; the set itself stays
    // with the source (a checkpoint persists it).
    let seen_backend: Arc<dyn SeenBackend> = seen.clone();
    let (parse_pool, fetch) = start_workers(
        config,
        &seeds,
        seen_backend.clone(),
        &counters,
        completions_tx,
        (archiver, cookies, known),
    )?;
    let mut out = Recorder {
        sender,
        counters: counters.clone(),
        sent: 0,
        pending: Vec::new(),
    };
    let mut cx = Cx {
        frontier: &mut frontier,
        out: &mut out,
    };
    let monitor = Monitor::start(
        &config.monitor,
        &config.output.dir,
        config.crawl.max_urls.0,
        counters.clone(),
    )
    .await?;
    source.begin(&mut cx, &fetch, seeds, sync).await?;
    let mut display = Progress::start(
        progress,
        Duration::from_secs_f64(config.output.progress_interval_secs),
        finished_before,
    );
    let mut pump = Pump {
        fetch,
        completions,
        shutdown,
        display: &mut display,
        descriptors,
        counters: counters.clone(),
        monitor,
        seen: seen_backend.clone(),
        seen_bytes: seen.plan().bytes,
    };
    let result = pump.run(&mut source, &mut cx).await;
    CrawlCounters::add(&counters.descriptor_pauses, pump.descriptors.pauses);
    let monitor = pump.monitor.take();
    // The last fetch task is gone with the pump: the parse threads' channel closes.
    drop(pump);
    let result = match result {
        Ok(stopped) => match source.end(&mut cx, stopped).await {
            // What the end recorded (a distributed process's last admitted pages) is sent
            // too; a local source's end has sent everything with its final checkpoint.
            Ok(()) => cx.out.send_pending().await.map(|()| stopped),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    parse_pool.join().await;
    let stopped = match result {
        Ok(stopped) => stopped,
        Err(error) => {
            // A writer that stopped took its reason with it: its thread's result says it
            // (the thread has ended: the channel closed).
            let error = match error {
                CrawlError::Output(OutputError::Stopped) => {
                    match tokio::task::spawn_blocking(move || output_writer.finish()).await {
                        Ok(Err(reason)) => CrawlError::Output(reason),
                        _ => error,
                    }
                }
                other => other,
            };
            let summary = CrawlSummary::new(Ending {
                config,
                frontier: &frontier,
                counters: &counters,
                seen: seen.stats(),
                plan: seen.plan(),
                time,
                finished_before,
                stopped: true,
            });
            source.failed(&summary, &error);
            return Err(error);
        }
    };
    drop(out);
    let written = tokio::task::spawn_blocking(move || output_writer.finish())
        .await
        .map_err(|_| OutputError::Stopped)??;
    tracing::debug!("{written} records written");

    let summary = CrawlSummary::new(Ending {
        config,
        frontier: &frontier,
        counters: &counters,
        seen: seen.stats(),
        plan: seen.plan(),
        time,
        finished_before,
        stopped,
    });
    display.finish(&figures(
        &counters,
        config.crawl.max_urls.0,
        &mut frontier,
        false,
    ));
    let redis_round_trips = source.redis_round_trips();
    source.close(&summary).await?;
    if let Some(monitor) = monitor {
        let last = monitor.snapshot_of(
            &frontier,
            seen.stats(),
            seen.plan().bytes,
            redis_round_trips,
            0,
        );
        monitor.finish(last, stopped, shutdown.subscribe()).await;
    }
    Ok(summary)
}

/// What fetches and parses: scope, request gate and client, the admission's screening
/// against `seen`, the parse threads, and what fetch tasks share. Completions go to
/// `completions`.
fn start_workers(
    config: &Config,
    seeds: &[Url],
    seen: Arc<dyn SeenBackend>,
    counters: &Arc<CrawlCounters>,
    completions: mpsc::UnboundedSender<Completion>,
    (archiver, cookies, known): (
        Option<Archiver>,
        Option<Arc<CookieJar>>,
        Option<Arc<crate::recrawl::KnownUrls>>,
    ),
) -> Result<(ParsePool, Arc<FetchShared>), CrawlError> {
    let (parse_tx, parse_rx) = crossbeam_channel::unbounded::<ParseJob>();
    let scope = Arc::new(Scope::new(&config.scope, seeds)?);
    let gate = Arc::new(RequestGate::new(config, scope.clone())?);
    let resolver = gate.resolver();
    let fetcher = Fetcher::new(config, gate, cookies)?;
    let admission = Arc::new(Admission::new(config, config.normalizer()?, scope, seen));
    let faults = faults::Faults::from_env();
    let parse_pool = ParsePool::start(
        config.crawl.parse_threads,
        parse_rx,
        Arc::new(ParseShared {
            admission: admission.clone(),
            counters: counters.clone(),
            completions: completions.clone(),
            faults: faults.clone(),
            options: ExtractOptions::for_crawl(config),
            archiver: archiver.clone(),
        }),
    )?;
    let fetch = Arc::new(FetchShared {
        config: config.clone(),
        admission,
        fetcher,
        resolver,
        counters: counters.clone(),
        completions,
        parse_jobs: parse_tx,
        faults,
        archiver,
        known,
    });
    Ok((parse_pool, fetch))
}

/// What the progress display shows now; `busiest` scans the hosts (costly at many hosts,
/// so only once per progress line).
fn figures<F: FrontierBackend>(
    counters: &CrawlCounters,
    max_urls: u64,
    frontier: &mut F,
    busiest: bool,
) -> ProgressFigures {
    let accepted = CrawlCounters::get(&counters.accepted);
    ProgressFigures {
        finished: CrawlCounters::get(&counters.finished),
        failures: counters.failures(),
        queued: frontier.queued(),
        in_flight: frontier.in_flight(),
        // The seen-set holds exactly the accepted URLs, and is sized for `max_urls`.
        seen_full: accepted as f64 / max_urls.max(1) as f64,
        busiest: if busiest {
            frontier.busiest_host()
        } else {
            None
        },
    }
}

/// The work pump's wiring.
struct Pump<'a> {
    fetch: Arc<FetchShared>,
    completions: mpsc::UnboundedReceiver<Completion>,
    shutdown: &'a ShutdownHandle,
    display: &'a mut Progress,
    /// The descriptor budget: no new work while it is exhausted.
    descriptors: Descriptors,
    counters: Arc<CrawlCounters>,
    /// The monitor, when `[monitor] listen` is set: handed a snapshot once per
    /// `monitor::REFRESH`, and told of failed fetches (only those).
    monitor: Option<Monitor>,
    /// The seen-set and its size, for the monitor's snapshot.
    seen: Arc<dyn SeenBackend>,
    seen_bytes: u64,
}

impl Pump<'_> {
    /// Runs until the source says the crawl is over (`false`) or a stop has ended the
    /// fetches in flight, or their grace ran out (`true`).
    async fn run<S: WorkSource>(
        &mut self,
        source: &mut S,
        cx: &mut Cx<'_, S::Frontier>,
    ) -> Result<bool, CrawlError> {
        let fetch = self.fetch.clone();
        let concurrency = fetch.config.crawl.concurrency as u64;
        let grace = Duration::from_secs_f64(fetch.config.crawl.shutdown_grace_secs);
        let mut stop_rx = self.shutdown.subscribe();
        let mut stopping = self.shutdown.is_stopping();
        let mut grace_deadline: Option<Instant> = None;
        // Fetch tasks are started by a launcher task on the runtime, a round of hand-outs
        // at a time (see `launcher`); dropping it (returning) aborts those in flight.
        let mut launcher = Launcher::start(fetch.clone());
        let mut round = Vec::new();
        let mut tick = tokio::time::interval(self.display.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut monitor_tick = tokio::time::interval(crate::monitor::REFRESH);
        monitor_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (answers_tx, mut answers) = mpsc::unbounded_channel();
        loop {
            let pauses = self.descriptors.pauses;
            if !stopping {
                let now = Instant::now();
                while cx.frontier.in_flight() < concurrency {
                    if self.descriptors.exhausted(now, cx.frontier.in_flight()) {
                        break;
                    }
                    match cx.frontier.pop_ready(now)? {
                        None => break,
                        Some(Work::Fetch(dispatch)) => {
                            self.descriptors.dispatched();
                            round.push(Launch::Fetch(dispatch));
                        }
                        Some(Work::Robots(robots)) => {
                            CrawlCounters::add(&self.counters.robots_fetches, 1);
                            self.descriptors.dispatched();
                            round.push(Launch::Robots(robots));
                        }
                        Some(Work::Disallowed(item)) => {
                            let reason = "disallowed by robots.txt";
                            record_unfetched(source, cx, &item, reason, |c| c.disallowed += 1)
                                .await?;
                        }
                        Some(Work::Deferred { item, crawl_delay }) => {
                            let reason = format!(
                                "deferred: robots.txt asks for a Crawl-delay of {} s, over politeness.max_crawl_delay_secs = {} s",
                                crawl_delay.as_secs_f64(),
                                fetch.config.politeness.max_crawl_delay_secs
                            );
                            record_unfetched(source, cx, &item, &reason, |c| c.deferred += 1)
                                .await?;
                        }
                    }
                }
                launcher.hand_out(&mut round);
                for lookup in cx.frontier.take_lookups() {
                    let resolver = fetch.resolver.clone();
                    let answers = answers_tx.clone();
                    tokio::spawn(async move {
                        let answer = resolver.budget_address(&lookup.name).await;
                        // The pump is gone only when the crawl is over.
                        let _ = answers.send((lookup, answer));
                    });
                }
            }
            // The step's links go where a crash keeps them (the local source's queue log),
            // then the step's records to the output thread, in one message.
            source.drained(cx).await?;
            cx.out.send_pending().await?;
            if source.is_over(cx.frontier) {
                return Ok(false);
            }
            if stopping && cx.frontier.in_flight() == 0 {
                return Ok(true);
            }
            let now = Instant::now();
            if stopping && grace_deadline.is_none() {
                grace_deadline = Some(now + grace);
            }
            let short_of_descriptors =
                !stopping && self.descriptors.exhausted(now, cx.frontier.in_flight());
            if self.descriptors.pauses > pauses {
                // Idle keep-alive connections are most of what is open: close them now
                // rather than wait for their idle timeout.
                fetch.fetcher.shed_idle_connections();
            }
            // The source first: what it hands the frontier now (a continuous recrawl's URLs
            // that fell due) must count in when the frontier is next ready, or the loop
            // would sleep past them.
            let source_at = source.poll(cx, now, stopping)?;
            let ready_at = if short_of_descriptors {
                // Look again soon: idle connections close, fetches in flight end.
                Some(now + RECOUNT_AFTER)
            } else if stopping || cx.frontier.in_flight() >= concurrency {
                // With every slot taken a ready URL waits for a completion, which wakes
                // the loop anyway: waking for it then would spin.
                None
            } else {
                cx.frontier.next_ready_at()
            };
            let wake = [ready_at, source_at].into_iter().flatten().min();
            tokio::select! {
                Some(completion) = self.completions.recv() => {
                    self.take(source, cx, completion).await?;
                    // Drain what else has arrived before dispatching again.
                    while let Ok(completion) = self.completions.try_recv() {
                        self.take(source, cx, completion).await?;
                    }
                }
                Some((lookup, answer)) = answers.recv() => {
                    cx.frontier.address_resolved(lookup, answer);
                }
                _ = sleep_until_opt(wake) => {}
                _ = sleep_until_opt(grace_deadline) => {
                    // In-flight fetches did not finish in time: abandon them (the launcher
                    // aborts them when `launches` is dropped). Their URLs are not recorded,
                    // so they are fetched again.
                    return Ok(true);
                }
                changed = stop_rx.changed(), if !stopping => {
                    if changed.is_err() || *stop_rx.borrow() {
                        stopping = true;
                        tracing::info!("stopping: waiting for {} fetches in flight", cx.frontier.in_flight());
                    }
                }
                event = source.next_event(stopping) => {
                    source.on_event(cx, event).await?;
                }
                // Only while a round may wait for the launcher (see `launcher`).
                _ = launcher.next_look(), if launcher.may_wait() => {}
                _ = tick.tick() => {
                    let max_urls = fetch.config.crawl.max_urls.0;
                    self.display.update(&figures(&self.counters, max_urls, cx.frontier, true));
                }
                _ = monitor_tick.tick(), if self.monitor.is_some() => {
                    if let Some(monitor) = &self.monitor {
                        let snapshot = monitor.snapshot_of(
                            cx.frontier,
                            self.seen.stats(),
                            self.seen_bytes,
                            source.redis_round_trips(),
                            self.descriptors.pauses,
                        );
                        monitor.publish(snapshot);
                    }
                }
            }
        }
    }

    /// One completion: a page to the source; a retry or a robots.txt answer to the
    /// frontier, with the records of the URLs it gives up.
    async fn take<S: WorkSource>(
        &mut self,
        source: &mut S,
        cx: &mut Cx<'_, S::Frontier>,
        completion: Completion,
    ) -> Result<(), CrawlError> {
        match completion {
            Completion::Robots {
                fetch,
                outcome,
                archived,
            } => {
                // With the archive on, the robots.txt fetch has its line and records.
                if let Some((record, archive)) = archived {
                    cx.out.other(record, Some(archive));
                }
                if let RobotsOutcome::Unavailable { reason, .. } = &outcome {
                    tracing::debug!("{}: {reason}", fetch.url);
                }
                let reason = outcome.give_up_reason();
                for item in cx.frontier.robots_done(fetch, outcome)? {
                    record_unfetched(source, cx, &item, &reason, |c| c.robots_unavailable += 1)
                        .await?;
                }
            }
            Completion::Batch(completions) => {
                for completion in completions {
                    // Batches are never nested; boxed only because `take` is async.
                    Box::pin(self.take(source, cx, completion)).await?;
                }
            }
            Completion::Discovered {
                candidates,
                parent,
                counts,
            } => {
                source.discovered(cx, candidates, parent, *counts)?;
            }
            Completion::Page {
                dispatch,
                outcome: Outcome::Retry { delay },
            } => {
                // Counted with the URL's record (its attempts), when it ends.
                cx.frontier.retry(dispatch, delay);
            }
            Completion::Page {
                dispatch,
                outcome:
                    Outcome::Done {
                        record,
                        candidates,
                        archive,
                    },
            } => {
                if let Some(monitor) = &mut self.monitor {
                    if record.status.map_or(record.error.is_some(), |s| s >= 400) {
                        monitor.note_failure(&dispatch.item.url);
                    }
                }
                source
                    .page_done(cx, dispatch, record, candidates, archive)
                    .await?;
            }
        }
        Ok(())
    }
}

/// Sleeps until `at`, or forever.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
