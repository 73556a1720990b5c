//! The crawl: wires seeds, frontier, fetch tasks, the parse pool, the seen-set and the
//! output together, and owns termination and shutdown.
//!
//! One job per file:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | [`run_crawl`]: which source of work, then the driver |
//! | `driver.rs` | set-up, the work pump (hand-out, records, descriptors, look-ups, stop and grace), teardown: once for every source |
//! | `source.rs` | the interface between the driver and a source of work |
//! | `local_source.rs` | a single-process crawl: the disk frontier with checkpoints and resume |
//! | `lease_source.rs` | one process of a crawl shared through Redis: leases ([`crate::distributed`]) |
//! | `recrawl_source.rs` | the next generation of a local crawl, or a continuous recrawl ([`crate::recrawl`]) |
//! | `admission.rs` | the one path from a discovered URL to a queued one, and its counting |
//! | `fetch_task.rs` | one dispatched URL fetched once and turned into an outcome |
//! | `parse_pool.rs` | OS threads that extract and screen a page's links |
//! | `sitemaps.rs` | sitemaps in the crawl: found, queued (marked), read, admitted, recorded |
//! | `checkpoints.rs` | when and how the local source takes a checkpoint |
//! | `summary.rs` | `summary.json` and the closing lines |
//! | [`progress`] | the live display |
//! | `shutdown.rs` | stopping from outside |
//! | `messages.rs` | what the tasks send each other |
//! | [`handoffs`] | counts of what crosses threads per page (the crawl bench's, behind a feature) |
//!
//! # What is serial per page, what is sharded, and why it stays exact
//!
//! The driver's one task owns the frontier, and the local source, on that task, is the only
//! writer of the seen-set's inserts and of the accepted-URL count. That makes the two
//! promises of the crawl exact rather than probable: no URL is queued twice (insert-and-queue
//! is one step in one task), and no more than `max_urls` URLs are ever accepted (in
//! distributed mode, `admit.lua` keeps both promises across processes); a checkpoint is one
//! consistent state because it is taken between two steps of that one task.
//!
//! What runs there, per page, is only the bookkeeping those promises need: the frontier's
//! hand-out and give-back (a heap of hosts, a per-host queue), the seen-set's exactly-once
//! insert of the few links that screening found probably new (about one per page once a
//! crawl is under way), the queue log's line for each, and the record's numbering. Everything
//! per byte or per link runs elsewhere, sharded by page across threads: fetching (tokio
//! tasks sharing one client), decoding, extraction, normalization, scope and the lock-free
//! "certainly seen" check (the parse pool, `admission`'s screening half), archive records
//! (the parse pool), writing (the output thread), checkpoints' writes (background threads).
//!
//! What crosses threads per page, and how often (`cargo bench --bench crawl --features
//! bench-counters -- --cores N` counts it, see [`handoffs`]):
//!
//! 1. the fetched page, from its fetch task to a parse thread (one message per page);
//! 2. its completion, from the parse thread to the driver: one message per burst of pages
//!    that thread parsed back to back or within 300 µs of the burst's first (up to 16), so
//!    one wake-up of the driver per burst;
//!
//! and, per step of the driver's loop rather than per page: the step's round of hand-outs
//! put in the launcher's list (its fetch tasks are spawned on a worker, into that worker's
//! own queue, not through the runtime's shared injection queue from the driver's thread; the
//! launcher is woken by the next task that ends, on its worker, and by the driver only when
//! few tasks run or none ended for a while: see `launcher.rs`), one write of the step's new
//! links to the queue log, then one message to the output thread with the step's records
//! (links before records, so `kill -9` never leaves a page recorded and its links
//! forgotten).
//!
//! Why this scales to many cores: the serial part is the driver's CPU per page, d (the crawl
//! bench prints it); whatever the cores, a crawl cannot exceed 1/d pages/s, and with n cores
//! doing the rest (c µs per page) it reaches about n/c pages/s until it meets that ceiling.
//! Keeping d a few µs puts the ceiling far above 16 cores' worth of fetching and parsing, and
//! batching the hand-offs keeps the per-page cost of waking threads (system time, cache
//! lines moving between cores) from growing with the number of cores that bounce them.
//!
//! Measured (`cargo bench --bench crawl --features bench-counters -- --cores N --runs 3`,
//! medians of 3, 16 KB synthetic web, 2-core machine shared with a load average of ~20, so
//! the CPU figures are inflated by the machine's contention and are not comparable with
//! figures taken on a quiet machine): hand-offs 1.16 per page (parse jobs 1.00, completions
//! 0.07, launcher rounds 0.05, output 0.05; before, by construction of the code, 5 per page:
//! a spawn, a parse job, a completion, a record, a join), voluntary context switches 0.38 per
//! page, driver 5.9 µs/page on 2 cores (8.1 on 1), parse threads 95 µs/page, tokio workers
//! 38 µs/page, the whole crawler 152 µs/page.
//!
//! On a quiet machine the parse threads drain their queue faster than fetches refill it, so
//! bursts shrank to ~6 pages and the driver slept and was woken 0.17 times a page, all by the
//! parse threads (`perf record -e sched:sched_wakeup`): 30–50% of its CPU was the kernel's
//! (the bench now prints the driver's system time and sleeps). A parse thread now holds its
//! completions up to 300 µs from the first (`parse_pool::HOLD`). Measured 2026-11-27
//! (`-- --cores 2 --runs 3`, three invocations of each build alternated): the driver
//! 4.36 / 4.83 / 4.79 µs a page at 0.057–0.062 sleeps a page, against 5.37 / 5.63 / 6.07 at
//! 0.142–0.179; pages/s 18,103 / 16,488 / 17,232 against 15,161 / 15,178 / 14,541. The plain
//! bench (`--runs 3`, three each): 17,088 / 17,318 / 16,380 pages/s at 68 / 66 / 70 µs of
//! crawler CPU a page, against 15,353 / 15,076 / 15,164 at 71 / 74 / 72; with the archive on,
//! pages/s unchanged (13,205 / 13,291 / 13,159 against 13,495 / 12,946 / 13,084), so its
//! on/off ratio fell to 0.77–0.81 from 0.83–0.89: the archive's cost, not a loss.
//!
//! What the driver's CPU is now (`perf record --call-graph dwarf` of `-- --cores 2 --runs 1`,
//! its thread's 1,073 samples, 2026-11-28): admitting a parsed page's links 25% (the
//! seen-set, the frontier's queues, the queue log's records), handing out the next URLs 18%,
//! completions 11%, waking a parked tokio worker when a round of launches is sent 6% (a
//! `futex` wake, ~18 µs each on this VM, 0.028 a page), writing the queue log 4%, its own
//! sleeps 4%, malloc and free 8%. The seen-set's first writes used to fault each 4 KiB page
//! of the default filter twice, with a TLB shootdown each (4.5% of the driver's samples):
//! see `crate::seen`'s `blocks.rs`. Medians of 3 that day: 4.95 / 5.21 / 4.56 µs a page
//! before that change and 5.03 / 5.05 / 4.41 after, alternated (4.26 / 4.49 against
//! 4.25 / 4.24 an hour earlier): the ceiling sat at ~5 µs, ~200,000 pages/s.
//!
//! The driver no longer wakes the launcher for each round (2026-11-28, `launcher`): a
//! round waits in a shared list for the next task to end, whose worker wakes the launcher
//! without a system call. Counted with `perf record -e syscalls:sys_enter_futex` on the
//! driver's thread, one `--runs 1` each (perf slows the run): worker wake-ups from the
//! driver 2,239 + 335 (a `futex`, or a write to a worker's event fd) → 504 a run of 30,004
//! pages, plus 249 re-arms of the periodic look's timer. (A deadline per round, tried first,
//! made the runtime's time driver re-arm 1,130 times a run: hence the periodic look.)
//! Driver µs a page, `-- --cores 2
//! --runs 3`, alternated with the build before: 4.44 / 4.32 before, 4.15 / 3.77 after on an
//! idle machine (3.89 against 3.69 / 3.86 under another engineer's build); system time
//! 1.07–1.20 → 0.64–0.92. A slower sitting later that day, five invocations each,
//! alternated: 4.87 / 5.37 / 4.61 / 4.74 / 4.61 before, 5.09 / 4.30 / 4.04 / 4.25 / 5.01
//! after (medians 4.74 → 4.30): below 5 µs as a rule, not yet in every invocation. The seen-set's fpp estimate (a series of powers, 1.9% of the
//! driver's samples when read for every page) is now read every 1/4,096 of `max_urls`.
//! What is left, by the same profile (841 samples): admitting links 23% (of it the queue's
//! disk tail 5%), handing out 15%, completions 9%, malloc 8%, waking the output thread for
//! each step's records 6% (a `futex` wake: it sleeps between steps), writing the queue log
//! 4.5%.

mod admission;
mod checkpoints;
mod driver;
mod faults;
mod fetch_task;
pub mod handoffs;
mod launcher;
mod lease_source;
mod local_source;
mod messages;
mod parse_pool;
pub mod progress;
mod recrawl_source;
mod shutdown;
mod sitemaps;
mod source;
mod summary;

use std::path::PathBuf;

use tokio::time::Instant;
use url::Url;

pub use crate::counters::{CounterValues, CrawlCounters, PageCounts};
pub use parse_pool::ParseThreadError;
pub use progress::ProgressMode;
pub use shutdown::ShutdownHandle;
pub use summary::{CrawlSummary, HostCount};

use crate::checkpoint;
use crate::config::Config;
use crate::descriptors::Descriptors;
use crate::frontier::{FrontierBackend, FrontierSnapshot, SavedFrontier};
use crate::seen::Plan;
use driver::drive;
use lease_source::LeaseSource;
use local_source::LocalSource;
use recrawl_source::RecrawlSource;

/// The frontier as the local source checkpoints it: any [`FrontierBackend`] whose checkpoint
/// is the local one (the disk frontier today). Admission, checkpoints and the summary are
/// written against this, not against `Frontier`, so a second store of queues plugs in here.
pub(crate) trait CrawlFrontier:
    FrontierBackend<Snapshot = FrontierSnapshot, Saved = SavedFrontier>
{
}

impl<F: FrontierBackend<Snapshot = FrontierSnapshot, Saved = SavedFrontier>> CrawlFrontier for F {}

/// Why a crawl could not run. Each variant's message names its subject; the cause follows
/// in the error's source chain, printed once by the CLI.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    #[error("seen-set")]
    Plan(#[from] crate::seen::PlanError),
    #[error("seen-set")]
    Seen(#[from] crate::seen::SeenError),
    #[error(transparent)]
    Fetch(#[from] crate::fetch::FetchSetupError),
    #[error("output")]
    Output(#[from] crate::output::OutputError),
    #[error("{}: cannot create output directory", path.display())]
    OutputDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no seed URL to crawl")]
    NoSeeds,
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Cookies(#[from] crate::cookie_jar::CookieJarError),
    #[error(transparent)]
    Scope(#[from] crate::scope::ScopeError),
    #[error("checkpoint")]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error(transparent)]
    Frontier(#[from] crate::frontier::FrontierError),
    #[error(transparent)]
    ParseThread(#[from] ParseThreadError),
    #[error(transparent)]
    Monitor(#[from] crate::monitor::MonitorError),
    #[error(transparent)]
    Distributed(#[from] crate::distributed::DistributedError),
    #[error("recrawl")]
    Recrawl(#[from] crate::recrawl::RecrawlError),
    #[error(transparent)]
    StateStore(#[from] crate::state_store::StateStoreError),
    #[error("{}: cannot write", path.display())]
    Pages {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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

/// The seen-set's plan from `[seen]` and `max_urls` (fpp 0.001 when neither is set).
pub(crate) fn seen_plan(config: &Config) -> Result<Plan, crate::seen::PlanError> {
    seen_plan_for(config, config.crawl.max_urls.0)
}

/// The seen-set's plan from `[seen]` for `n` URLs.
pub(crate) fn seen_plan_for(config: &Config, n: u64) -> Result<Plan, crate::seen::PlanError> {
    match (config.seen.fpp, config.seen.memory) {
        // The filter only spares the exact set lookups: any budget goes.
        (_, Some(memory)) if config.seen.exact => crate::seen::front_plan(n, memory.0),
        (_, Some(memory)) => Plan::for_memory(n, memory.0),
        (Some(fpp), None) => Plan::for_fpp(n, fpp),
        (None, None) => Plan::for_fpp(n, 0.001),
    }
}

/// Runs a crawl to its end (or until shut down) and returns its summary: a local crawl, or
/// this process's part of a distributed one (`[distributed] redis`).
pub async fn run_crawl(request: CrawlRequest) -> Result<CrawlSummary, CrawlError> {
    let CrawlRequest {
        config,
        seeds,
        progress,
        shutdown,
        resume,
    } = request;
    // A recrawl's seeds are the collection's due URLs, found when it opens.
    if seeds.is_empty() && !config.recrawl.active {
        return Err(CrawlError::NoSeeds);
    }
    // Counted per run, from here: a resumed crawl gets the whole limit again.
    let _time_limit = config
        .max_duration()?
        .map(|limit| shutdown.stop_after(limit));
    let started = Instant::now();
    // Raised for either source: a distributed process opens as many sockets as a local crawl.
    let descriptor_limit = crate::descriptors::raise_limit();
    tracing::debug!("open files limit: {descriptor_limit:?}");
    let descriptors = Descriptors::new(descriptor_limit);
    let out_dir = config.output.dir.clone();
    std::fs::create_dir_all(&out_dir).map_err(|source| CrawlError::OutputDir {
        path: out_dir.clone(),
        source,
    })?;
    match crate::distributed::Settings::from_config(&config)? {
        None if config.recrawl.active => {
            let (opened, seeds) = RecrawlSource::open(&config, seeds, (progress, started), resume)?;
            drive(&config, seeds, &shutdown, descriptors, opened).await
        }
        None => {
            let opened = LocalSource::open(&config, &seeds, (progress, started), resume, None)?;
            drive(&config, seeds, &shutdown, descriptors, opened).await
        }
        Some(settings) => {
            let opened = LeaseSource::open(&config, settings, (progress, started)).await?;
            drive(&config, seeds, &shutdown, descriptors, opened).await
        }
    }
}
