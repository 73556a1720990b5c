//! The crawl: wires seeds, frontier, fetch tasks, the parse pool, the seen-set and the
//! output together, and owns termination and shutdown.
//!
//! One dispatcher task owns the frontier and is the only writer of the seen-set and of the
//! accepted-URL count. That makes the two promises of the crawl exact rather than
//! probable: no URL is queued twice (insert-and-queue is one step in one task), and no
//! more than `max_urls` URLs are ever accepted (the count is checked before each insert,
//! with no race at the boundary). The expensive work runs elsewhere: fetches are tokio
//! tasks sharing one client, and HTML parsing runs on a small pool of OS threads
//! (`parse_threads`, default one per core) so that it never blocks the async reactor.
//! Parse threads also resolve, normalize and deduplicate a page's links and drop those
//! the seen-set already `contains` (a lock-free read), so the dispatcher only inserts the
//! few links that are probably new.
//!
//! Termination is explicit: the crawl is over when the frontier has nothing queued and
//! nothing in flight. Shutdown (Ctrl-C, SIGTERM, or [`ShutdownHandle::stop`]) stops
//! dispatching, gives in-flight fetches `shutdown_grace_secs` to finish, records them, and
//! returns a summary marked `stopped`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use url::Url;

use crate::checkpoint::{self, Manifest};
use crate::config::Config;
use crate::extract::{extract_links, ExtractOptions};
use crate::fetch::{FetchError, Fetched, Fetcher};
use crate::frontier::{
    Dispatch, Frontier, FrontierOptions, FrontierPolicy, HostId, QueuedUrl, Work,
};
use crate::normalize::{host_key, Normalizer};
use crate::output::{
    rfc3339, write_atomically, OutputPosition, OutputSender, OutputWriter, PageRecord,
};
use crate::progress::{Progress, ProgressMode};
use crate::robots::{agent_token, fetch_robots, RobotsOutcome};
use crate::scope::{OutOfScope, Scope, ScopeError};
use crate::seen::{Plan, SeenSet, SeenStats};

/// Why a crawl could not run.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    #[error("seen-set: {0}")]
    Plan(#[from] crate::seen::PlanError),
    #[error("seen-set: {0}")]
    Seen(#[from] crate::seen::SeenError),
    #[error("{0}")]
    Fetch(#[from] crate::fetch::FetchSetupError),
    #[error("output: {0}")]
    Output(#[from] crate::output::OutputError),
    #[error("{path}: cannot create output directory: {source}")]
    OutputDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no seed URL to crawl")]
    NoSeeds,
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Scope(#[from] ScopeError),
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error("{0}")]
    Frontier(#[from] crate::frontier::FrontierError),
}

/// Counters shared by every stage; read by the progress display and the summary.
#[derive(Debug, Default)]
pub struct CrawlCounters {
    /// URLs taken on (seeds included): never more than `max_urls`.
    pub accepted: AtomicU64,
    /// Accepted URLs that reached their end (a record was written).
    pub finished: AtomicU64,
    /// Responses with a 2xx status.
    pub ok: AtomicU64,
    /// Redirect responses.
    pub redirects: AtomicU64,
    /// 4xx responses.
    pub client_errors: AtomicU64,
    /// 5xx or 429 responses after all retries.
    pub server_errors: AtomicU64,
    /// No response after all retries (timeouts, refused connections…).
    pub network_errors: AtomicU64,
    /// Retries scheduled.
    pub retries: AtomicU64,
    /// Body bytes received.
    pub bytes: AtomicU64,
    /// Pages parsed for links.
    pub parsed: AtomicU64,
    /// Links found in parsed pages.
    pub links_found: AtomicU64,
    /// Links dropped because they are not http(s) (mailto:, javascript:, …).
    pub links_not_http: AtomicU64,
    /// Links that did not resolve to a URL.
    pub links_invalid: AtomicU64,
    /// Links not followed because of rel=nofollow.
    pub links_nofollow: AtomicU64,
    /// Links already seen (in the seen-set, or repeated on one page).
    pub links_seen: AtomicU64,
    /// Links not queued because they were deeper than `max_depth`.
    pub links_too_deep: AtomicU64,
    /// Links not queued because `max_urls` had been reached.
    pub links_over_cap: AtomicU64,
    /// Redirect chains cut at `max_redirects`.
    pub redirects_over_limit: AtomicU64,
    /// URLs not fetched because robots.txt disallows them.
    pub disallowed: AtomicU64,
    /// URLs given up because their host's robots.txt stayed unreachable.
    pub robots_unavailable: AtomicU64,
    /// robots.txt fetches made.
    pub robots_fetches: AtomicU64,
    /// Links and redirect targets refused by the scope rules, by reason
    /// (indexed like [`OutOfScope::ALL`]).
    pub out_of_scope: [AtomicU64; OutOfScope::ALL.len()],
    /// New links not queued because their host reached `scope.max_pages_per_host`.
    pub links_host_cap: AtomicU64,
    /// Expected number of new URLs wrongly reported as seen, in millionths.
    pub false_positive_micros: AtomicU64,
    /// CPU time of the parse threads, in nanoseconds.
    pub parse_cpu_ns: AtomicU64,
}

/// The scalar counters by name, for checkpoints.
macro_rules! scalar_counters {
    ($($name:ident),* $(,)?) => {
        impl CrawlCounters {
            /// Every counter by name (`out_of_scope.<reason>` for the scope reasons).
            pub fn to_map(&self) -> BTreeMap<String, u64> {
                let mut map = BTreeMap::new();
                $(map.insert(stringify!($name).to_string(), self.$name.load(Ordering::Relaxed));)*
                for (reason, n) in OutOfScope::ALL.iter().zip(&self.out_of_scope) {
                    map.insert(format!("out_of_scope.{}", reason.as_str()), n.load(Ordering::Relaxed));
                }
                map
            }

            /// Counters restored from a checkpoint (unknown names are ignored).
            pub fn from_map(map: &BTreeMap<String, u64>) -> Self {
                let counters = CrawlCounters::default();
                $(if let Some(v) = map.get(stringify!($name)) {
                    counters.$name.store(*v, Ordering::Relaxed);
                })*
                for (reason, n) in OutOfScope::ALL.iter().zip(&counters.out_of_scope) {
                    if let Some(v) = map.get(&format!("out_of_scope.{}", reason.as_str())) {
                        n.store(*v, Ordering::Relaxed);
                    }
                }
                counters
            }
        }
    };
}

scalar_counters!(
    accepted,
    finished,
    ok,
    redirects,
    client_errors,
    server_errors,
    network_errors,
    retries,
    bytes,
    parsed,
    links_found,
    links_not_http,
    links_invalid,
    links_nofollow,
    links_seen,
    links_too_deep,
    links_over_cap,
    redirects_over_limit,
    disallowed,
    robots_unavailable,
    robots_fetches,
    links_host_cap,
    false_positive_micros,
);

impl CrawlCounters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
    /// Fetch failures that make the exit code 1: no usable answer after all retries,
    /// including URLs given up because their host's robots.txt never answered.
    pub fn failures(&self) -> u64 {
        Self::get(&self.server_errors)
            + Self::get(&self.network_errors)
            + Self::get(&self.robots_unavailable)
    }
}

/// Stops a running crawl from outside (signal handlers, tests).
#[derive(Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    pub fn new() -> Self {
        ShutdownHandle {
            tx: Arc::new(watch::channel(false).0),
        }
    }
    /// Asks the crawl to stop taking new work and finish.
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }
    pub fn is_stopping(&self) -> bool {
        *self.tx.borrow()
    }
    fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

impl Default for ShutdownHandle {
    fn default() -> Self {
        Self::new()
    }
}

/// What the crawl needs besides its configuration.
pub struct CrawlRequest {
    pub config: Config,
    pub seeds: Vec<Url>,
    pub progress: ProgressMode,
    pub shutdown: ShutdownHandle,
    /// A checkpoint to continue from (`--resume`); `None` starts from the seeds.
    pub resume: Option<checkpoint::Loaded>,
}

/// `OUT/summary.json`, and what the CLI prints at the end.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlSummary {
    pub stopped: bool,
    pub elapsed_secs: f64,
    pub max_urls: u64,
    pub accepted: u64,
    pub finished: u64,
    pub queued_left: u64,
    pub ok: u64,
    pub redirects: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    pub network_errors: u64,
    pub failures: u64,
    pub retries: u64,
    pub bytes: u64,
    pub pages_per_sec: f64,
    pub parsed: u64,
    pub links_found: u64,
    pub links_not_http: u64,
    pub links_invalid: u64,
    pub links_nofollow: u64,
    pub links_seen: u64,
    pub links_too_deep: u64,
    pub links_over_cap: u64,
    pub redirects_over_limit: u64,
    pub disallowed: u64,
    pub robots_unavailable: u64,
    pub robots_fetches: u64,
    pub out_of_scope: std::collections::BTreeMap<&'static str, u64>,
    pub links_host_cap: u64,
    pub hosts: usize,
    pub top_hosts: Vec<HostCount>,
    /// The frontier's memory and disk at the end, and how often host state was evicted
    /// and restored.
    pub frontier: crate::frontier::FrontierStats,
    pub seen_m_bits: u64,
    pub seen_k: u32,
    pub seen_bytes: u64,
    pub seen_insertions: u64,
    pub seen_fill: f64,
    pub seen_estimated_fpp: f64,
    pub estimated_false_positive_skips: f64,
    pub parse_cpu_secs: f64,
    pub output_dir: PathBuf,
}

/// URLs ever queued per host, for spotting traps.
#[derive(Debug, Clone, Serialize)]
pub struct HostCount {
    pub host: String,
    pub queued_total: u64,
    pub queued_now: usize,
}

impl CrawlSummary {
    /// The human summary printed at the end of a crawl.
    pub fn human(&self) -> String {
        let mut s = String::new();
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "{}: {} of {} URLs done in {:.1} s ({:.0} pages/s), {} accepted, {} left in the frontier",
            if self.stopped { "stopped" } else { "finished" },
            self.finished,
            self.max_urls,
            self.elapsed_secs,
            self.pages_per_sec,
            self.accepted,
            self.queued_left
        );
        let _ = writeln!(
            s,
            "responses: {} ok, {} redirects, {} client errors (4xx), {} server errors (5xx/429), {} network errors, {} retries, {}",
            self.ok,
            self.redirects,
            self.client_errors,
            self.server_errors,
            self.network_errors,
            self.retries,
            crate::quantity::HumanBytes(self.bytes)
        );
        let _ = writeln!(
            s,
            "links: {} found, {} already seen, {} too deep, {} over max_urls, {} nofollow, {} not http(s), {} invalid, {} out of scope, {} over max_pages_per_host; {} URLs disallowed by robots.txt, {} given up (robots.txt unreachable)",
            self.links_found,
            self.links_seen,
            self.links_too_deep,
            self.links_over_cap,
            self.links_nofollow,
            self.links_not_http,
            self.links_invalid,
            self.out_of_scope.values().sum::<u64>(),
            self.links_host_cap,
            self.disallowed,
            self.robots_unavailable
        );
        let _ = write!(
            s,
            "seen-set: {} URLs, fill {:.4}, estimated fpp {:.2e}, ~{:.1} new URLs skipped as false positives",
            self.seen_insertions,
            self.seen_fill,
            self.seen_estimated_fpp,
            self.estimated_false_positive_skips
        );
        s
    }
}

/// A finished fetch, reported to the dispatcher.
enum Completion {
    Page {
        dispatch: Dispatch,
        outcome: Outcome,
    },
    Robots {
        host: HostId,
        outcome: RobotsOutcome,
    },
}

enum Outcome {
    /// The URL reached its end: write `record`, queue the new ones among `candidates`.
    Done {
        record: Box<PageRecord>,
        candidates: Candidates,
    },
    /// Try again after `delay`.
    Retry { delay: Duration },
}

/// URLs found by one fetch, all at the same depth.
#[derive(Default)]
struct Candidates {
    urls: Vec<Url>,
    depth: u32,
    redirect_hops: u32,
}

struct ParseJob {
    dispatch: Dispatch,
    url: Url,
    fetched: Fetched,
    record: Box<PageRecord>,
}

/// What fetch tasks share. Only fetch tasks hold the parse-job sender, so the parse
/// threads see their channel close once the last fetch task is gone.
struct Shared {
    config: Config,
    normalizer: Normalizer,
    scope: Arc<Scope>,
    fetcher: Fetcher,
    counters: Arc<CrawlCounters>,
    completions: mpsc::UnboundedSender<Completion>,
    parse_jobs: crossbeam_channel::Sender<ParseJob>,
}

/// What parse threads share.
struct ParseShared {
    config: Config,
    normalizer: Normalizer,
    scope: Arc<Scope>,
    seen: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    completions: mpsc::UnboundedSender<Completion>,
}

/// Runs a crawl to its end (or until shut down) and returns its summary.
pub async fn run_crawl(request: CrawlRequest) -> Result<CrawlSummary, CrawlError> {
    let CrawlRequest {
        config,
        seeds,
        progress,
        shutdown,
        resume,
    } = request;
    if seeds.is_empty() {
        return Err(CrawlError::NoSeeds);
    }
    let started = Instant::now();
    let out_dir = config.output.dir.clone();
    std::fs::create_dir_all(&out_dir).map_err(|source| CrawlError::OutputDir {
        path: out_dir.clone(),
        source,
    })?;
    let plan = seen_plan(&config)?;
    let expectation = checkpoint::Expectation {
        max_urls: config.crawl.max_urls.0,
        seen_m_bits: plan.m_bits,
        seen_k: plan.k,
        seeds_xxh3: checkpoint::seeds_hash(&seeds),
        seeds: seeds.len() as u64,
    };
    let policy = FrontierPolicy::from_config(&config.politeness);
    let frontier_options =
        FrontierOptions::from_config(&config.frontier, &out_dir, &config.crawl.user_agent);
    let (seen, counters, start, mut frontier, replayed, seq) = match resume {
        Some(loaded) => {
            loaded.manifest.check_compatible(&out_dir, &expectation)?;
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
            // Only now, with everything checked and reopened: records past the last complete
            // one (a torn line) are cut.
            checkpoint::truncate_output(&out_dir, loaded.output.bytes)?;
            (
                Arc::new(loaded.seen),
                Arc::new(CrawlCounters::from_map(&loaded.counters)),
                loaded.output,
                frontier,
                Some(loaded.queued_after),
                loaded.manifest.seq.max(checkpoint::highest_seq(&out_dir)),
            )
        }
        None => {
            checkpoint::remove(&out_dir)?;
            tracing::info!("seen-set: {}", plan.summary());
            (
                Arc::new(SeenSet::new(plan)?),
                Arc::new(CrawlCounters::default()),
                OutputPosition::default(),
                Frontier::create(policy, frontier_options)?,
                None,
                0,
            )
        }
    };
    let fetcher = Fetcher::new(&config, &seeds)?;
    let (output_writer, output) = OutputWriter::start(&out_dir, 4096, start)?;
    let (completions_tx, completions_rx) = mpsc::unbounded_channel();
    let (parse_tx, parse_rx) = crossbeam_channel::unbounded::<ParseJob>();

    let normalizer = config.normalizer()?;
    let scope = Arc::new(Scope::new(&config.scope, &seeds)?);
    let parse_shared = Arc::new(ParseShared {
        config: config.clone(),
        normalizer: normalizer.clone(),
        scope: scope.clone(),
        seen: seen.clone(),
        counters: counters.clone(),
        completions: completions_tx.clone(),
    });
    let shared = Arc::new(Shared {
        config: config.clone(),
        normalizer,
        scope,
        fetcher,
        counters: counters.clone(),
        completions: completions_tx,
        parse_jobs: parse_tx,
    });
    let parse_threads = match config.crawl.parse_threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    };
    let mut parse_handles = Vec::new();
    for i in 0..parse_threads {
        let rx = parse_rx.clone();
        let shared = parse_shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("parse-{i}"))
            .spawn(move || parse_loop(rx, shared))
            .map_err(|source| CrawlError::OutputDir {
                path: out_dir.clone(),
                source,
            })?;
        parse_handles.push(handle);
    }
    drop(parse_rx);
    drop(parse_shared);

    let mut dispatcher = Dispatcher {
        max_urls: config.crawl.max_urls.0,
        max_pages_per_host: config.scope.max_pages_per_host,
        seen: seen.clone(),
        counters: counters.clone(),
        batch_out: Vec::new(),
        checkpoints: Checkpoints {
            out_dir: out_dir.clone(),
            interval: Duration::from_secs_f64(config.checkpoint.interval_secs),
            seq,
            expectation,
            pending: None,
            queue_log: None,
        },
    };
    match replayed {
        Some(items) => {
            // Queued after the checkpoint, already accepted and in the seen-set: straight
            // back into the queues (the checkpoint's queues came back with the frontier).
            for item in items {
                let key = Url::parse(&item.url)
                    .map(|u| host_key(&u))
                    .unwrap_or_default();
                frontier.push(&key, item)?;
            }
        }
        None => {
            let seed_candidates = Candidates {
                urls: seeds,
                depth: 0,
                redirect_hops: 0,
            };
            dispatcher.admit(&mut frontier, seed_candidates, None)?;
        }
    }

    // A checkpoint right away: from here on, a crawl killed at any instant can resume.
    dispatcher
        .start_checkpoint(&mut frontier, &output, false)
        .await?;

    let mut display = Progress::start(
        progress,
        config.crawl.max_urls.0,
        Duration::from_secs_f64(config.output.progress_interval_secs),
    );
    let stopped = dispatcher
        .run(
            &mut frontier,
            shared.clone(),
            completions_rx,
            &output,
            &shutdown,
            &mut display,
        )
        .await?;
    drop(shared);
    for handle in parse_handles {
        let _ = tokio::task::spawn_blocking(move || handle.join()).await;
    }
    drop(output);
    let written = tokio::task::spawn_blocking(move || output_writer.finish())
        .await
        .map_err(|_| crate::output::OutputError::Stopped)??;
    tracing::debug!("{written} records written");

    let summary = summarize(
        &config,
        &frontier,
        &counters,
        seen.stats(),
        seen.plan(),
        started.elapsed(),
        stopped,
    );
    display.finish(
        &counters,
        &seen.stats(),
        frontier.queued(),
        frontier.in_flight(),
    );
    let json = serde_json::to_vec_pretty(&summary).unwrap_or_default();
    write_atomically(&out_dir.join("summary.json"), &json)?;
    Ok(summary)
}

/// The seen-set's plan from `[seen]` and `max_urls` (fpp 0.001 when neither is set).
pub fn seen_plan(config: &Config) -> Result<Plan, crate::seen::PlanError> {
    let n = config.crawl.max_urls.0;
    match (config.seen.fpp, config.seen.memory) {
        (_, Some(memory)) => Plan::for_memory(n, memory.0),
        (Some(fpp), None) => Plan::for_fpp(n, fpp),
        (None, None) => Plan::for_fpp(n, 0.001),
    }
}

struct Dispatcher {
    max_urls: u64,
    max_pages_per_host: u64,
    seen: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    batch_out: Vec<bool>,
    checkpoints: Checkpoints,
}

/// Checkpoint bookkeeping: one write in the background at a time.
struct Checkpoints {
    out_dir: PathBuf,
    interval: Duration,
    seq: u64,
    expectation: checkpoint::Expectation,
    /// The checkpoint being written: its files, then its publication.
    pending: Option<tokio::task::JoinHandle<Result<CheckpointPhase, checkpoint::CheckpointError>>>,
    /// URLs accepted since the last checkpoint was taken.
    queue_log: Option<checkpoint::QueueLog>,
}

/// Where a checkpoint being written in the background stands.
enum CheckpointPhase {
    /// Files written; to publish once the queue log is flushed (see [`checkpoint`]).
    Prepared(checkpoint::Prepared),
    /// Current: the frontier may reclaim what only older checkpoints needed.
    Published(Manifest),
}

impl Dispatcher {
    /// The dispatch loop. Returns whether the crawl was stopped before its end.
    async fn run(
        &mut self,
        frontier: &mut Frontier,
        shared: Arc<Shared>,
        completions: mpsc::UnboundedReceiver<Completion>,
        output: &OutputSender,
        shutdown: &ShutdownHandle,
        display: &mut Progress,
    ) -> Result<bool, CrawlError> {
        let stopped = self
            .dispatch_loop(frontier, shared, completions, output, shutdown, display)
            .await?;
        // The final state, whether finished or stopped: what a resume starts from.
        self.wait_for_checkpoint(frontier).await?;
        self.start_checkpoint(frontier, output, !stopped).await?;
        self.wait_for_checkpoint(frontier).await?;
        Ok(stopped)
    }

    /// Takes a consistent snapshot of the crawl state and writes it in the background. The
    /// crawl pauses only for flushing the output and the frontier's part (its store's tails
    /// and table, its tallies); the seen-set is streamed from the live set (see
    /// [`checkpoint`] for why that is safe).
    async fn start_checkpoint(
        &mut self,
        frontier: &mut Frontier,
        output: &OutputSender,
        finished: bool,
    ) -> Result<(), CrawlError> {
        let paused = Instant::now();
        let position = output.flush().await?;
        let seen = self.seen.clone();
        let frontier_snapshot = frontier.begin_checkpoint()?;
        let c = &self.checkpoints;
        let manifest = Manifest {
            format_version: checkpoint::FORMAT_VERSION,
            seq: c.seq + 1,
            created_at: rfc3339(SystemTime::now()),
            finished,
            pages_bytes: position.bytes,
            pages_records: position.records,
            frontier: None,
            max_urls: c.expectation.max_urls,
            seen_m_bits: c.expectation.seen_m_bits,
            seen_k: c.expectation.seen_k,
            seeds_xxh3: c.expectation.seeds_xxh3,
            seeds: c.expectation.seeds,
            counters: self.counters.to_map(),
        };
        let out = c.out_dir.clone();
        self.checkpoints.seq += 1;
        // From this instant on, accepted URLs go to the next checkpoint's queue log.
        if let Some(mut log) = self.checkpoints.queue_log.take() {
            log.flush()?;
        }
        self.checkpoints.queue_log =
            Some(checkpoint::QueueLog::create(&out, self.checkpoints.seq)?);
        let pause = paused.elapsed();
        tracing::debug!(
            "checkpoint {}: paused {:?} ({} queued, {} in flight)",
            manifest.seq,
            pause,
            frontier.queued(),
            frontier.in_flight()
        );
        self.checkpoints.pending = Some(tokio::task::spawn_blocking(move || {
            checkpoint::prepare(
                &out,
                checkpoint::Snapshot {
                    seen,
                    frontier: frontier_snapshot,
                    manifest,
                },
            )
            .map(CheckpointPhase::Prepared)
        }));
        Ok(())
    }

    /// Moves the checkpoint in the background to its next phase: a prepared one is
    /// published once the queue log (every URL accepted since the snapshot, whose bits the
    /// seen-set file may hold) is flushed here and fsynced there; a published one lets the
    /// frontier reclaim space.
    fn advance_checkpoint(
        &mut self,
        frontier: &mut Frontier,
        phase: Result<Result<CheckpointPhase, checkpoint::CheckpointError>, tokio::task::JoinError>,
    ) -> Result<(), CrawlError> {
        let phase = phase.map_err(|e| checkpoint::CheckpointError::Io {
            path: self.checkpoints.out_dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })??;
        match phase {
            CheckpointPhase::Prepared(prepared) => {
                let log = match self.checkpoints.queue_log.as_mut() {
                    Some(log) => Some(log.flushed_file()?),
                    None => None,
                };
                self.checkpoints.pending = Some(tokio::task::spawn_blocking(move || {
                    if let Some((path, file)) = log {
                        file.sync_data()
                            .map_err(|source| checkpoint::CheckpointError::Io { path, source })?;
                    }
                    checkpoint::publish(prepared).map(CheckpointPhase::Published)
                }));
            }
            CheckpointPhase::Published(manifest) => {
                if let Some(saved) = &manifest.frontier {
                    frontier.finish_checkpoint(saved)?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the checkpoint being written, then lets the frontier reclaim what only
    /// older checkpoints needed.
    async fn wait_for_checkpoint(&mut self, frontier: &mut Frontier) -> Result<(), CrawlError> {
        while let Some(pending) = self.checkpoints.pending.take() {
            let phase = pending.await;
            self.advance_checkpoint(frontier, phase)?;
        }
        Ok(())
    }

    async fn dispatch_loop(
        &mut self,
        frontier: &mut Frontier,
        shared: Arc<Shared>,
        mut completions: mpsc::UnboundedReceiver<Completion>,
        output: &OutputSender,
        shutdown: &ShutdownHandle,
        display: &mut Progress,
    ) -> Result<bool, CrawlError> {
        let mut checkpoint_tick = tokio::time::interval_at(
            Instant::now() + self.checkpoints.interval,
            self.checkpoints.interval,
        );
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let concurrency = shared.config.crawl.concurrency as u64;
        let grace = Duration::from_secs_f64(shared.config.crawl.shutdown_grace_secs);
        let mut stop_rx = shutdown.subscribe();
        let mut stopping = shutdown.is_stopping();
        let mut grace_deadline: Option<Instant> = None;
        let mut tasks = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(display.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if !stopping {
                let now = Instant::now();
                while frontier.in_flight() < concurrency {
                    match frontier.pop_ready(now)? {
                        None => break,
                        Some(Work::Fetch(dispatch)) => {
                            tasks.spawn(fetch_task(shared.clone(), dispatch));
                        }
                        Some(Work::Robots { host, key }) => {
                            CrawlCounters::add(&self.counters.robots_fetches, 1);
                            tasks.spawn(robots_task(shared.clone(), host, key));
                        }
                        Some(Work::Disallowed(item)) => {
                            CrawlCounters::add(&self.counters.disallowed, 1);
                            self.record_unfetched(item, "disallowed by robots.txt", output)
                                .await?;
                        }
                    }
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
            let wake = if stopping || frontier.in_flight() >= concurrency {
                None
            } else {
                frontier.next_ready_at()
            };
            tokio::select! {
                Some(completion) = completions.recv() => {
                    self.handle(frontier, completion, output).await?;
                    // Drain what else has arrived before dispatching again.
                    while let Ok(completion) = completions.try_recv() {
                        self.handle(frontier, completion, output).await?;
                    }
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
                phase = async { self.checkpoints.pending.as_mut().expect("guarded").await },
                    if self.checkpoints.pending.is_some() => {
                    self.checkpoints.pending = None;
                    self.advance_checkpoint(frontier, phase)?;
                }
                _ = checkpoint_tick.tick(), if !stopping => {
                    let busy = self.checkpoints.pending.as_ref().is_some_and(|p| !p.is_finished());
                    if busy {
                        tracing::warn!("checkpoint: the previous one is still being written; skipped");
                    } else {
                        self.wait_for_checkpoint(frontier).await?;
                        self.start_checkpoint(frontier, output, false).await?;
                    }
                }
                _ = tick.tick() => {
                    display.update(
                        &self.counters,
                        &self.seen.stats(),
                        frontier.queued(),
                        frontier.in_flight(),
                        frontier.busiest_host().as_ref().map(|(k, n, t)| (k.as_str(), *n, *t)),
                    );
                }
            }
        }
    }

    /// Writes the record of an accepted URL that ends without a fetch.
    async fn record_unfetched(
        &mut self,
        item: QueuedUrl,
        reason: &str,
        output: &OutputSender,
    ) -> Result<(), CrawlError> {
        let mut record = base_record(&item);
        record.attempts = 0;
        record.error = Some(reason.to_string());
        record.fetched_at = rfc3339(SystemTime::now());
        CrawlCounters::add(&self.counters.finished, 1);
        output.send(*record).await?;
        Ok(())
    }

    async fn handle(
        &mut self,
        frontier: &mut Frontier,
        completion: Completion,
        output: &OutputSender,
    ) -> Result<(), CrawlError> {
        let (dispatch, outcome) = match completion {
            Completion::Page { dispatch, outcome } => (dispatch, outcome),
            Completion::Robots { host, outcome } => {
                let reason = match &outcome {
                    RobotsOutcome::Unavailable { reason } => {
                        tracing::debug!("{}: {reason}", frontier.host_key(host).unwrap_or("?"));
                        format!("{reason}; gave up after repeated attempts")
                    }
                    RobotsOutcome::Rules { .. } => String::new(),
                };
                for item in frontier.robots_done(host, outcome)? {
                    CrawlCounters::add(&self.counters.robots_unavailable, 1);
                    self.record_unfetched(item, &reason, output).await?;
                }
                return Ok(());
            }
        };
        match outcome {
            Outcome::Retry { delay } => {
                CrawlCounters::add(&self.counters.retries, 1);
                frontier.retry(dispatch, delay);
            }
            Outcome::Done {
                mut record,
                candidates,
            } => {
                let parent = dispatch.item.url.clone();
                let new = self.admit(frontier, candidates, Some(parent))?;
                if new > 0 {
                    // The new links reach the OS before the page's record does, so a
                    // crash can never leave the page done and its links forgotten.
                    if let Some(log) = self.checkpoints.queue_log.as_mut() {
                        log.flush()?;
                    }
                }
                record.new_links = new;
                frontier.complete(dispatch);
                CrawlCounters::add(&self.counters.finished, 1);
                output.send(*record).await?;
            }
        }
        Ok(())
    }

    /// Inserts candidates into the seen-set and queues the new ones, never past
    /// `max_urls`. Returns how many were queued.
    fn admit(
        &mut self,
        frontier: &mut Frontier,
        candidates: Candidates,
        parent: Option<String>,
    ) -> Result<u64, CrawlError> {
        let Candidates {
            urls,
            depth,
            redirect_hops,
        } = candidates;
        if urls.is_empty() {
            return Ok(0);
        }
        let accepted = CrawlCounters::get(&self.counters.accepted);
        let room = self.max_urls.saturating_sub(accepted) as usize;
        let host_cap = self.max_pages_per_host;
        let mut queued = 0u64;
        if room < urls.len() || host_cap > 0 {
            // Where a cap can bind, links are taken one by one in page order, each cap
            // checked before the seen-set is touched: a URL refused by a cap is not
            // marked as seen, so the seen-set only ever holds URLs that were queued, and
            // exactly `max_urls` (or `max_pages_per_host`) are accepted.
            let mut considered = 0;
            for url in &urls {
                if queued as usize == room {
                    break;
                }
                considered += 1;
                if host_cap > 0 && frontier.host_total_queued(&host_key(url)) >= host_cap {
                    CrawlCounters::add(&self.counters.links_host_cap, 1);
                    continue;
                }
                if self.seen.insert_new(url.as_str().as_bytes()) {
                    queued += 1;
                    self.push(frontier, url, depth, redirect_hops, &parent)?;
                } else {
                    CrawlCounters::add(&self.counters.links_seen, 1);
                }
            }
            CrawlCounters::add(
                &self.counters.links_over_cap,
                (urls.len() - considered) as u64,
            );
        } else {
            // The common case: one batch per page, hashed first and prefetched.
            let keys: Vec<&[u8]> = urls.iter().map(|u| u.as_str().as_bytes()).collect();
            self.seen.insert_new_batch(&keys, &mut self.batch_out);
            let fresh: Vec<bool> = std::mem::take(&mut self.batch_out);
            for (url, &is_new) in urls.iter().zip(&fresh) {
                if is_new {
                    queued += 1;
                    self.push(frontier, url, depth, redirect_hops, &parent)?;
                } else {
                    CrawlCounters::add(&self.counters.links_seen, 1);
                }
            }
            self.batch_out = fresh;
        }
        if queued > 0 {
            CrawlCounters::add(&self.counters.accepted, queued);
            // Each new URL was a query that could have been a false positive.
            let fpp = self.seen.stats().estimated_fpp;
            CrawlCounters::add(
                &self.counters.false_positive_micros,
                (fpp * queued as f64 * 1e6).round() as u64,
            );
        }
        Ok(queued)
    }

    fn push(
        &mut self,
        frontier: &mut Frontier,
        url: &Url,
        depth: u32,
        redirect_hops: u32,
        parent: &Option<String>,
    ) -> Result<(), CrawlError> {
        let item = QueuedUrl {
            url: url.as_str().to_string(),
            depth,
            parent: parent.clone(),
            redirect_hops,
            attempts: 0,
        };
        if let Some(log) = self.checkpoints.queue_log.as_mut() {
            if let Err(e) = log.append(&item) {
                // The crawl goes on; only a crash before the next checkpoint could
                // forget this URL, so say so rather than stop.
                tracing::warn!("{e}; a crash before the next checkpoint may forget URLs");
            }
        }
        frontier.push(&host_key(url), item)?;
        Ok(())
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Exponential backoff for retry number `attempt` (0-based): 0.5 s, 1 s, 2 s, … capped.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << attempt.min(10))).min(MAX_RETRY_DELAY)
}

/// A server asking for more than this is retried after this anyway (or not at all
/// once retries run out).
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

fn base_record(item: &QueuedUrl) -> Box<PageRecord> {
    Box::new(PageRecord {
        url: item.url.clone(),
        final_url: None,
        status: None,
        content_type: None,
        bytes: 0,
        depth: item.depth,
        parent: item.parent.clone(),
        links: 0,
        new_links: 0,
        fetched_at: String::new(),
        elapsed_ms: 0,
        error: None,
        attempts: item.attempts + 1,
        truncated: false,
    })
}

async fn fetch_task(shared: Arc<Shared>, dispatch: Dispatch) {
    let outcome = fetch_outcome(&shared, &dispatch).await;
    match outcome {
        FetchStep::Finished(outcome) => {
            let _ = shared
                .completions
                .send(Completion::Page { dispatch, outcome });
        }
        FetchStep::Parse(job) => {
            // The parse threads own the job from here and report the completion.
            let job = job.into_job(dispatch);
            if let Err(crossbeam_channel::SendError(job)) = shared.parse_jobs.send(job) {
                let mut record = job.record;
                record.error = Some("crawl shutting down before the page was parsed".into());
                let _ = shared.completions.send(Completion::Page {
                    dispatch: job.dispatch,
                    outcome: Outcome::Done {
                        record,
                        candidates: Candidates::default(),
                    },
                });
            }
        }
    }
}

async fn robots_task(shared: Arc<Shared>, host: HostId, key: String) {
    let agent = agent_token(&shared.config.crawl.user_agent);
    let outcome = fetch_robots(&shared.fetcher, &key, &agent).await;
    let _ = shared
        .completions
        .send(Completion::Robots { host, outcome });
}

enum FetchStep {
    Finished(Outcome),
    /// Boxed partial job; its `dispatch` is filled in by the caller.
    Parse(Box<ParseJobParts>),
}

struct ParseJobParts {
    url: Url,
    fetched: Fetched,
    record: Box<PageRecord>,
}

impl ParseJobParts {
    fn into_job(self, dispatch: Dispatch) -> ParseJob {
        ParseJob {
            dispatch,
            url: self.url,
            fetched: self.fetched,
            record: self.record,
        }
    }
}

async fn fetch_outcome(shared: &Shared, dispatch: &Dispatch) -> FetchStep {
    let item = &dispatch.item;
    let config = &shared.config.crawl;
    let counters = &shared.counters;
    let mut record = base_record(item);
    let started = Instant::now();
    let done = |mut record: Box<PageRecord>, candidates: Candidates| {
        record.elapsed_ms = started.elapsed().as_millis() as u64;
        record.fetched_at = rfc3339(SystemTime::now());
        FetchStep::Finished(Outcome::Done { record, candidates })
    };
    let url = match Url::parse(&item.url) {
        Ok(url) => url,
        Err(e) => {
            record.error = Some(format!("unparsable queued URL: {e}"));
            CrawlCounters::add(&counters.network_errors, 1);
            return done(record, Candidates::default());
        }
    };
    let can_retry = item.attempts < config.retries;
    let fetched = match shared.fetcher.fetch(&url).await {
        Ok(fetched) => fetched,
        Err(error) => return fetch_failed(counters, error, can_retry, item, record, done),
    };
    CrawlCounters::add(&counters.bytes, fetched.bytes);
    record.status = Some(fetched.status);
    record.content_type = fetched.content_type.clone();
    record.bytes = fetched.bytes;
    record.truncated = fetched.truncated;
    record.final_url = Some(item.url.clone());
    let status = fetched.status;
    if status >= 500 || status == 429 {
        if can_retry {
            let delay = fetched
                .retry_after
                .unwrap_or_default()
                .max(backoff(item.attempts))
                .min(MAX_RETRY_DELAY);
            return FetchStep::Finished(Outcome::Retry { delay });
        }
        CrawlCounters::add(&counters.server_errors, 1);
        record.error = Some(format!(
            "HTTP {status} after {} attempts",
            item.attempts + 1
        ));
        return done(record, Candidates::default());
    }
    if fetched.is_redirect() {
        CrawlCounters::add(&counters.redirects, 1);
        let Some(location) = fetched.location.as_deref() else {
            record.error = Some("redirect without a Location header".into());
            return done(record, Candidates::default());
        };
        let mut target = match url.join(location.trim()) {
            Ok(target) => target,
            Err(e) => {
                record.error = Some(format!("redirect to an invalid URL {location:?}: {e}"));
                return done(record, Candidates::default());
            }
        };
        if let Err(reason) = shared.normalizer.canonicalize(&mut target) {
            record.error = Some(format!("redirect to {location:?}: {reason}"));
            return done(record, Candidates::default());
        }
        record.final_url = Some(target.as_str().to_string());
        if let Err(reason) = shared.scope.check(&target) {
            CrawlCounters::add(&counters.out_of_scope[scope_index(reason)], 1);
            record.error = Some(format!("redirect target not followed: {reason}"));
            return done(record, Candidates::default());
        }
        if item.redirect_hops >= config.max_redirects {
            CrawlCounters::add(&counters.redirects_over_limit, 1);
            record.error = Some(format!(
                "redirect chain longer than max_redirects = {}",
                config.max_redirects
            ));
            return done(record, Candidates::default());
        }
        record.links = 1;
        let candidates = Candidates {
            urls: vec![target],
            depth: item.depth,
            redirect_hops: item.redirect_hops + 1,
        };
        return done(record, candidates);
    }
    if (400..500).contains(&status) {
        CrawlCounters::add(&counters.client_errors, 1);
    } else if (200..300).contains(&status) {
        CrawlCounters::add(&counters.ok, 1);
    }
    if fetched.body.is_some() {
        record.elapsed_ms = started.elapsed().as_millis() as u64;
        record.fetched_at = rfc3339(SystemTime::now());
        return FetchStep::Parse(Box::new(ParseJobParts {
            url,
            fetched,
            record,
        }));
    }
    done(record, Candidates::default())
}

fn fetch_failed(
    counters: &CrawlCounters,
    error: FetchError,
    can_retry: bool,
    item: &QueuedUrl,
    mut record: Box<PageRecord>,
    done: impl FnOnce(Box<PageRecord>, Candidates) -> FetchStep,
) -> FetchStep {
    if error.is_transient() && can_retry {
        return FetchStep::Finished(Outcome::Retry {
            delay: backoff(item.attempts),
        });
    }
    CrawlCounters::add(&counters.network_errors, 1);
    record.error = Some(error.message);
    done(record, Candidates::default())
}

/// A parse thread: extracts, resolves and normalizes links, drops the ones already seen,
/// and reports the completion to the dispatcher.
fn parse_loop(jobs: crossbeam_channel::Receiver<ParseJob>, shared: Arc<ParseShared>) {
    let started_cpu = thread_cpu_ns();
    let options = ExtractOptions {
        follow_nofollow: shared.config.crawl.follow_nofollow,
    };
    let max_depth = shared.config.crawl.max_depth;
    let counters = &shared.counters;
    let mut on_page: HashSet<String> = HashSet::new();
    while let Ok(job) = jobs.recv() {
        let ParseJob {
            dispatch,
            url,
            fetched,
            mut record,
        } = job;
        let body = fetched.body.as_deref().unwrap_or_default();
        let extracted = extract_links(body, &url, fetched.charset.as_deref(), &options);
        CrawlCounters::add(&counters.parsed, 1);
        record.links = extracted.links.len() as u64;
        CrawlCounters::add(&counters.links_found, record.links);
        CrawlCounters::add(&counters.links_nofollow, extracted.nofollow_skipped as u64);
        CrawlCounters::add(&counters.links_invalid, extracted.invalid as u64);
        let depth = dispatch.item.depth + 1;
        let mut candidates = Candidates {
            urls: Vec::new(),
            depth,
            redirect_hops: 0,
        };
        let follow = !(fetched.header_nofollow || extracted.meta_nofollow)
            || shared.config.crawl.follow_nofollow;
        if !follow {
            CrawlCounters::add(&counters.links_nofollow, record.links);
        } else if depth > max_depth {
            CrawlCounters::add(&counters.links_too_deep, record.links);
        } else {
            on_page.clear();
            let (mut not_http, mut seen) = (0u64, 0u64);
            for mut link in extracted.links {
                if shared.normalizer.canonicalize(&mut link).is_err() {
                    not_http += 1;
                    continue;
                }
                if let Err(reason) = shared.scope.check(&link) {
                    CrawlCounters::add(&counters.out_of_scope[scope_index(reason)], 1);
                    continue;
                }
                if on_page.contains(link.as_str()) || shared.seen.contains(link.as_str().as_bytes())
                {
                    seen += 1;
                    continue;
                }
                on_page.insert(link.as_str().to_string());
                candidates.urls.push(link);
            }
            CrawlCounters::add(&counters.links_not_http, not_http);
            CrawlCounters::add(&counters.links_seen, seen);
        }
        let _ = shared.completions.send(Completion::Page {
            dispatch,
            outcome: Outcome::Done { record, candidates },
        });
    }
    CrawlCounters::add(
        &counters.parse_cpu_ns,
        thread_cpu_ns().saturating_sub(started_cpu),
    );
}

fn scope_index(reason: OutOfScope) -> usize {
    OutOfScope::ALL
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(0)
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_THREAD_CPUTIME_ID is
    // always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn summarize(
    config: &Config,
    frontier: &Frontier,
    c: &CrawlCounters,
    stats: SeenStats,
    plan: &Plan,
    elapsed: Duration,
    stopped: bool,
) -> CrawlSummary {
    let get = CrawlCounters::get;
    let finished = get(&c.finished);
    let secs = elapsed.as_secs_f64().max(1e-9);
    CrawlSummary {
        stopped,
        elapsed_secs: elapsed.as_secs_f64(),
        max_urls: config.crawl.max_urls.0,
        accepted: get(&c.accepted),
        finished,
        queued_left: frontier.queued() + frontier.in_flight(),
        ok: get(&c.ok),
        redirects: get(&c.redirects),
        client_errors: get(&c.client_errors),
        server_errors: get(&c.server_errors),
        network_errors: get(&c.network_errors),
        failures: c.failures(),
        retries: get(&c.retries),
        bytes: get(&c.bytes),
        pages_per_sec: finished as f64 / secs,
        parsed: get(&c.parsed),
        links_found: get(&c.links_found),
        links_not_http: get(&c.links_not_http),
        links_invalid: get(&c.links_invalid),
        links_nofollow: get(&c.links_nofollow),
        links_seen: get(&c.links_seen),
        links_too_deep: get(&c.links_too_deep),
        links_over_cap: get(&c.links_over_cap),
        redirects_over_limit: get(&c.redirects_over_limit),
        disallowed: get(&c.disallowed),
        robots_unavailable: get(&c.robots_unavailable),
        robots_fetches: get(&c.robots_fetches),
        out_of_scope: OutOfScope::ALL
            .iter()
            .zip(&c.out_of_scope)
            .map(|(reason, n)| (reason.as_str(), get(n)))
            .collect(),
        links_host_cap: get(&c.links_host_cap),
        hosts: frontier.host_count(),
        frontier: frontier.stats(),
        top_hosts: frontier
            .top_hosts(10)
            .into_iter()
            .map(|(host, queued_total, queued_now)| HostCount {
                host,
                queued_total,
                queued_now,
            })
            .collect(),
        seen_m_bits: stats.m_bits,
        seen_k: stats.k,
        seen_bytes: plan.bytes,
        seen_insertions: stats.insertions,
        seen_fill: stats.fill,
        seen_estimated_fpp: stats.estimated_fpp,
        estimated_false_positive_skips: get(&c.false_positive_micros) as f64 / 1e6,
        parse_cpu_secs: get(&c.parse_cpu_ns) as f64 / 1e9,
        output_dir: config.output.dir.clone(),
    }
}
