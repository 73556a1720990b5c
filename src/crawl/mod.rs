//! The crawl: wires seeds, frontier, fetch tasks, the parse pool, the seen-set and the
//! output together, and owns termination and shutdown.
//!
//! One job per file:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | [`run_crawl`]: setup (fresh or resumed), the run, the orderly end |
//! | `dispatcher.rs` | the one task that owns the frontier: hands out work, takes completions back |
//! | `distributed.rs` | one process of a crawl shared through Redis ([`crate::distributed`]) |
//! | `admission.rs` | the one path from a discovered URL to a queued one, and its counting |
//! | `fetch_task.rs` | one dispatched URL fetched once and turned into an outcome |
//! | `parse_pool.rs` | OS threads that extract and screen a page's links |
//! | `sitemaps.rs` | sitemaps in the crawl: found, queued (marked), read, admitted, recorded |
//! | `checkpoints.rs` | when and how the dispatcher takes a checkpoint |
//! | `counters.rs` | every counter, named once |
//! | `summary.rs` | `summary.json` and the closing lines |
//! | [`progress`] | the live display |
//! | `shutdown.rs` | stopping from outside |
//! | `messages.rs` | what the tasks send each other |
//!
//! One dispatcher task owns the frontier and is the only writer of the seen-set and of the
//! accepted-URL count. That makes the two promises of the crawl exact rather than
//! probable: no URL is queued twice (insert-and-queue is one step in one task), and no more
//! than `max_urls` URLs are ever accepted. The expensive work runs elsewhere: fetches are
//! tokio tasks sharing one client, and HTML parsing runs on the parse pool, which also
//! screens the links so that the dispatcher only inserts the few that are probably new.

mod admission;
mod checkpoints;
mod counters;
mod dispatcher;
mod distributed;
mod faults;
mod fetch_task;
mod messages;
mod parse_pool;
pub mod progress;
mod shutdown;
mod sitemaps;
mod summary;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use url::Url;

pub use counters::{CounterValues, CrawlCounters, PageCounts};
pub use parse_pool::ParseThreadError;
pub use progress::ProgressMode;
pub use shutdown::ShutdownHandle;
pub use summary::{CrawlSummary, HostCount};

use crate::checkpoint;
use crate::config::Config;
use crate::cookie_jar::CookieJar;
use crate::descriptors::Descriptors;
use crate::extract::ExtractOptions;
use crate::fetch::Fetcher;
use crate::frontier::{
    Frontier, FrontierBackend, FrontierOptions, FrontierPolicy, FrontierSnapshot, SavedFrontier,
};
use crate::gate::RequestGate;
use crate::output::{BackgroundSync, OutputPosition, OutputWriter};
use crate::scope::Scope;
use crate::seen::{Plan, SeenBackend, SeenSet};
use crate::warc::{ArchiveOptions, ArchiveWriter, Archiver, CurrentFile};
use admission::{Acceptance, Admission};
use checkpoints::{Checkpoints, CrawlTime};
use dispatcher::{Dispatcher, Wiring};
use fetch_task::FetchShared;
use messages::{Candidates, ParseJob};
use parse_pool::{ParsePool, ParseShared};
use progress::Progress;
use summary::Ending;

/// The frontier as the crawl drives it: any [`FrontierBackend`] whose checkpoint is the
/// local one (the disk frontier today). The dispatcher, admission, checkpoints and summary
/// are written against this, not against [`Frontier`], so a second backend plugs in here.
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
    Distributed(#[from] crate::distributed::DistributedError),
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
fn seen_plan_for(config: &Config, n: u64) -> Result<Plan, crate::seen::PlanError> {
    match (config.seen.fpp, config.seen.memory) {
        (_, Some(memory)) => Plan::for_memory(n, memory.0),
        (Some(fpp), None) => Plan::for_fpp(n, fpp),
        (None, None) => Plan::for_fpp(n, 0.001),
    }
}

/// Where a crawl starts from: a fresh seen-set and frontier, or a checkpoint's.
struct Start {
    seen: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    output: OutputPosition,
    frontier: Frontier,
    /// URLs queued after the checkpoint (from its queue log): to queue again, and those
    /// recorded since, to count for their host.
    replayed: Option<(Vec<crate::frontier::QueuedUrl>, Vec<String>)>,
    /// The highest checkpoint number on disk.
    seq: u64,
    /// The checkpoint resumed from.
    resumed_from: Option<u64>,
    /// Runs before this one and the seconds they crawled.
    before: (u64, f64),
    /// Pages whose records a crash lost after their links were queued (see
    /// `Dispatcher::orphans`).
    orphans: std::collections::BTreeMap<String, u64>,
}

fn start_state(
    config: &Config,
    seeds: &[Url],
    resume: Option<checkpoint::Loaded>,
    plan: Plan,
    expectation: &checkpoint::Expectation,
) -> Result<Start, CrawlError> {
    let out_dir = &config.output.dir;
    let sites = crate::site::Sites::new(&config.site).unwrap_or_default();
    let policy = FrontierPolicy::from_config(&config.politeness).with_sites(Arc::new(sites));
    let frontier_options =
        FrontierOptions::from_config(&config.frontier, out_dir, &config.crawl.user_agent);
    let Some(loaded) = resume else {
        checkpoint::remove(out_dir)?;
        checkpoint::save_seeds(out_dir, seeds)?;
        tracing::info!("{}", plan.summary());
        return Ok(Start {
            seen: Arc::new(SeenSet::new(plan)?),
            counters: Arc::new(CrawlCounters::default()),
            output: OutputPosition::default(),
            frontier: Frontier::create(policy, frontier_options)?,
            replayed: None,
            seq: 0,
            resumed_from: None,
            before: (0, 0.0),
            orphans: Default::default(),
        });
    };
    loaded.manifest.check_compatible(out_dir, expectation)?;
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
    // Only now, with everything checked and reopened: records past the last complete one
    // (a torn line) are cut.
    checkpoint::truncate_output(out_dir, loaded.output.bytes)?;
    Ok(Start {
        seen: Arc::new(loaded.seen),
        counters: Arc::new(CrawlCounters::from_map(&loaded.counters)),
        output: loaded.output,
        frontier,
        replayed: Some((loaded.queued_after, loaded.recorded_from_log)),
        seq: loaded.manifest.seq.max(checkpoint::highest_seq(out_dir)),
        resumed_from: Some(loaded.manifest.seq),
        before: (
            loaded.manifest.runs,
            loaded.manifest.crawl_secs + loaded.crawled_after_secs,
        ),
        orphans: loaded.orphans,
    })
}

/// The archive's writer when `[output] warc` is on: for a resumed crawl, the archive is first
/// cut back to what `pages.jsonl` (already cut to `output`) points to, and the digest index
/// rebuilt from it (see [`crate::warc::recovery`]).
fn start_archive(
    config: &Config,
    resumed: bool,
    output: OutputPosition,
) -> Result<Option<ArchiveWriter>, CrawlError> {
    let o = &config.output;
    if !o.warc {
        return Ok(None);
    }
    let recovered = if resumed {
        let recovered = crate::warc::recovery::recover(&o.dir, output.bytes, o.warc_dedup_memory.0)
            .map_err(crate::output::OutputError::from)?;
        for note in &recovered.notes {
            tracing::warn!("resume: {note}");
        }
        recovered
    } else {
        crate::warc::remove_archive(&o.dir).map_err(crate::output::OutputError::from)?;
        crate::warc::recovery::Recovered {
            index: crate::warc::digest_index::PayloadIndex::with_memory(o.warc_dedup_memory.0),
            next_serial: 0,
            notes: Vec::new(),
        }
    };
    let writer = ArchiveWriter::start(
        ArchiveOptions {
            dir: o.dir.join("warc"),
            prefix: o.warc_prefix.clone(),
            max_bytes: o.warc_max_bytes.0,
            gzip_level: o.warc_gzip_level,
            info: crate::warc::info_fields(config),
        },
        recovered.next_serial,
        recovered.index,
        o.dir.join("pages.jsonl"),
        Arc::new(CurrentFile::default()),
    )
    .map_err(crate::output::OutputError::from)?;
    Ok(Some(writer))
}

/// What fetches and parses, the same for a local and a distributed crawl: scope, request
/// gate and client, the admission's screening against `seen`, the parse threads, and what
/// fetch tasks share. Completions go to `completions`.
fn start_workers(
    config: &Config,
    seeds: &[Url],
    seen: Arc<dyn SeenBackend>,
    counters: &Arc<CrawlCounters>,
    completions: mpsc::UnboundedSender<messages::Completion>,
    archiver: Option<Archiver>,
    cookies: Option<Arc<CookieJar>>,
) -> Result<(ParsePool, Arc<FetchShared>), CrawlError> {
    let (parse_tx, parse_rx) = crossbeam_channel::unbounded::<ParseJob>();
    let scope = Arc::new(Scope::new(&config.scope, seeds)?);
    let gate = Arc::new(RequestGate::new(config, seeds, scope.clone())?);
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
            options: ExtractOptions {
                follow_nofollow: config.crawl.follow_nofollow,
                max_links: config.crawl.max_links_per_page,
                max_url_length: config.scope.max_url_length,
                digest: config.crawl.near_duplicates,
            },
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
    });
    Ok((parse_pool, fetch))
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
    // Counted per run, from here: a resumed crawl gets the whole limit again.
    let _time_limit = config
        .max_duration()?
        .map(|limit| shutdown.stop_after(limit));
    if let Some(settings) = crate::distributed::Settings::from_config(&config)? {
        let request = CrawlRequest {
            config,
            seeds,
            progress,
            shutdown,
            resume,
        };
        return distributed::run(request, settings).await;
    }
    if seeds.is_empty() {
        return Err(CrawlError::NoSeeds);
    }
    let started = Instant::now();
    let descriptor_limit = crate::descriptors::raise_limit();
    tracing::debug!("open files limit: {descriptor_limit:?}");
    let out_dir = config.output.dir.clone();
    std::fs::create_dir_all(&out_dir).map_err(|source| CrawlError::OutputDir {
        path: out_dir.clone(),
        source,
    })?;
    // A resumed crawl keeps its seen-set, sized for the max_urls it started with, also when
    // it is extended to a larger one: `[seen]` is checked against that size.
    let sized_for = resume.as_ref().map_or(config.crawl.max_urls.0, |loaded| {
        loaded.seen.plan().sized_for()
    });
    let plan = seen_plan_for(&config, sized_for)?;
    let expectation = checkpoint::Expectation {
        max_urls: config.crawl.max_urls.0,
        seen_m_bits: plan.m_bits,
        seen_k: plan.k,
        seen_seed: plan.seed,
        seeds_xxh3: checkpoint::seeds_hash(&seeds),
        seeds: seeds.len() as u64,
    };
    let Start {
        seen,
        counters,
        output: start,
        mut frontier,
        replayed,
        seq,
        resumed_from,
        before,
        orphans,
    } = start_state(&config, &seeds, resume, plan.clone(), &expectation)?;
    let time = CrawlTime {
        runs: before.0 + 1,
        before_secs: before.1,
        started,
    };
    let finished_before = CrawlCounters::get(&counters.finished);
    let archive = start_archive(&config, resumed_from.is_some(), start)?;
    let archive_file = archive.as_ref().map(ArchiveWriter::current);
    let archiver = archive_file.as_ref().map(|current| Archiver {
        current: current.clone(),
        gzip_level: config.output.warc_gzip_level,
    });
    let (output_writer, output) = OutputWriter::start(
        &out_dir,
        4096,
        start,
        archive.map(|writer| (writer, counters.clone())),
    )?;
    let (completions_tx, completions_rx) = mpsc::unbounded_channel();
    // A resumed crawl goes on with the cookies of its last checkpoint.
    let cookies = match (config.network.cookies, resumed_from) {
        (false, _) => None,
        (true, Some(_)) => Some(CookieJar::load(&out_dir, config.network.max_cookies)?),
        (true, None) => Some(CookieJar::new(config.network.max_cookies)),
    }
    .map(Arc::new);

    // The crawl runs on the seen-set through its backend interface; the local set itself
    // is kept for the checkpoints, which persist it.
    let seen_backend: Arc<dyn SeenBackend> = seen.clone();
    let (parse_pool, fetch) = start_workers(
        &config,
        &seeds,
        seen_backend.clone(),
        &counters,
        completions_tx,
        archiver,
        cookies.clone(),
    )?;
    if resumed_from.is_some() {
        fetch
            .admission
            .learn_near_duplicates(&out_dir.join("pages.jsonl"));
    }

    let mut dispatcher = Dispatcher {
        acceptance: Acceptance::new(&config, seen_backend.clone(), counters.clone()),
        checkpoints: Checkpoints::new(
            out_dir.clone(),
            (
                Duration::from_secs_f64(config.checkpoint.interval_secs),
                BackgroundSync::start(
                    Duration::from_secs_f64(config.checkpoint.sync_interval_secs),
                    out_dir.join("pages.jsonl"),
                    archive_file,
                )?,
            ),
            seq,
            resumed_from,
            expectation,
            (seen.clone(), counters.clone()),
            time,
        )?,
        counters: counters.clone(),
        descriptors: Descriptors::new(descriptor_limit),
        orphans,
    };
    dispatcher.checkpoints.keep_cookies(cookies);
    match replayed {
        Some((items, recorded)) => {
            // Queued after the checkpoint, already accepted and in the seen-set: straight
            // back into the queues (the checkpoint's queues came back with the frontier).
            // Those recorded since are not queued again but were queued: they count for
            // their host's `max_pages_per_host` like the others.
            for item in items {
                frontier.push(&crate::frontier::key_of(&item.url), item)?;
            }
            for url in recorded {
                frontier.count_queued(&crate::frontier::key_of(&url));
            }
        }
        None => {
            // Without robots.txt, the seeds' /sitemap.xml are the only sitemaps found.
            let mut counts = PageCounts::default();
            let sitemaps = (config.crawl.sitemaps && !config.politeness.respect_robots)
                .then(|| sitemaps::for_seeds(&fetch.admission, &seeds, &mut counts));
            let seeds = Candidates {
                urls: seeds,
                depth: 0,
                redirect_hops: 0,
            };
            if let Some(sitemaps) = sitemaps {
                dispatcher.accept(&mut frontier, seeds, None, &mut counts)?;
                dispatcher.accept_unrecorded(&mut frontier, sitemaps, None, counts)?;
            } else {
                dispatcher.accept_unrecorded(&mut frontier, seeds, None, counts)?;
            }
        }
    }

    // A checkpoint right away, published before the first request: from here on, a crawl
    // killed at any instant can resume. A fresh crawl killed in its first moments would
    // otherwise leave records and no checkpoint (a directory that neither `--resume` nor a
    // plain run accepts); a resumed one would leave its records after its predecessor's
    // checkpoint, which counts one run fewer and the time between the two runs as crawling.
    let first = Instant::now();
    dispatcher.checkpoint(&mut frontier, &output, false).await?;
    dispatcher.checkpoints.wait(&mut frontier).await?;
    tracing::debug!("first checkpoint published in {:?}", first.elapsed());

    let mut display = Progress::start(
        progress,
        Duration::from_secs_f64(config.output.progress_interval_secs),
        finished_before,
    );
    let run = dispatcher
        .run(
            &mut frontier,
            Wiring {
                fetch,
                completions: completions_rx,
                output: &output,
                shutdown: &shutdown,
                display: &mut display,
            },
        )
        .await;
    let stopped = match run {
        Ok(stopped) => stopped,
        Err(error) => {
            // A writer that stopped took its reason with it: its thread's result says it
            // (the thread has ended: the channel closed).
            let error = match error {
                CrawlError::Output(crate::output::OutputError::Stopped) => {
                    match tokio::task::spawn_blocking(move || output_writer.finish()).await {
                        Ok(Err(reason)) => CrawlError::Output(reason),
                        _ => error,
                    }
                }
                other => other,
            };
            let summary = CrawlSummary::new(Ending {
                config: &config,
                frontier: &frontier,
                counters: &counters,
                seen: seen.stats(),
                plan: seen.plan(),
                time,
                finished_before,
                stopped: true,
            });
            summary::write_after_error(&out_dir, &summary, &error);
            return Err(error);
        }
    };
    // The last fetch task is gone with `Wiring::fetch`: the parse threads' channel closes.
    parse_pool.join().await;
    drop(output);
    let written = tokio::task::spawn_blocking(move || output_writer.finish())
        .await
        .map_err(|_| crate::output::OutputError::Stopped)??;
    tracing::debug!("{written} records written");

    let summary = CrawlSummary::new(Ending {
        config: &config,
        frontier: &frontier,
        counters: &counters,
        seen: seen.stats(),
        plan: seen.plan(),
        time,
        finished_before,
        stopped,
    });
    display.finish(&dispatcher.figures(&mut frontier, false));
    let json = serde_json::to_vec_pretty(&summary).unwrap_or_default();
    crate::output::write_atomically(&out_dir.join("summary.json"), &json)?;
    Ok(summary)
}
