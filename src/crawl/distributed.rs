//! One process of a distributed crawl (`[distributed] redis`, see [`crate::distributed`]):
//! the run loop that takes leases of hosts' URLs from Redis, crawls them with the same fetch
//! tasks, parse pool and local [`Frontier`] as a single-process crawl, admits new links
//! through Redis, writes `pages-<process id>.jsonl` (and, with `output.warc`, its own WARC
//! files) through the same output thread as a single-process crawl ([`OutputWriter`]: a
//! fetch's records reach the OS before its line), and acknowledges each URL once its record
//! is handed to the OS. At its start and at the crawl's end it seals the output of dead
//! processes ([`crate::distributed::seal`]); at the end it writes the crawl-wide
//! `summary.json` from Redis's figures ([`crate::distributed::status`]).
//!
//! Why a loop of its own beside [`super::dispatcher`]: the single-process dispatcher's job
//! is mostly checkpoints and its queue log, which Redis replaces here, and its acceptance
//! writes the local seen-set and frontier, which here are Redis's. What is shared (fetching,
//! parsing, screening, politeness inside a host) is called, not copied. The local frontier
//! holds only leased URLs, so its politeness within a lease is the crawl's.
//!
//! Round trips run beside the loop (spawned tasks, at most one admission and one sync in
//! flight), so dispatching never waits for Redis: a batch of finished pages costs one
//! pipeline of admission scripts (only for pages with links the local cache does not know),
//! and one "sync" pipeline carries the acknowledgements, the finished leases, the counters'
//! increments, the heartbeat, top-ups of held leases running low and the next claim.
//! Acknowledgements wait up to [`ACK_DELAY`] or [`ACK_BATCH`] of them to share a round trip.
//!
//! Guarantees (with those of [`crate::distributed`]): a URL is acknowledged only after its
//! page's links were admitted and its record (and archive records) written and handed to
//! the OS (a sync's round trip first waits for the output thread to say so); a lease ends when all its URLs are acknowledged (or at a stop, giving the others back
//! to the head of their queues); an error of Redis stops the process without ending
//! anything unfinished (the leases expire and other processes, or this one restarted, take
//! their unacknowledged URLs over).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::admission::Refusal;
use super::counters::{CrawlCounters, PageCounts};
use super::fetch_task::{base_record, fetch_task, robots_task, FetchShared};
use super::messages::{Candidates, Completion, Outcome};
use super::summary::Ending;
use super::{seen_plan, CrawlError, CrawlRequest, CrawlSummary};
use crate::config::Config;
use crate::distributed::seal::{seal_dead, OutputLock, SealScope};
use crate::distributed::{
    self, bloom_bits, parse_claim, prefix, status, DistributedError, Redis, Settings,
};
use crate::frontier::{key_of, Frontier, FrontierOptions, FrontierPolicy, QueuedUrl, Work};
use crate::normalize::host_key;
use crate::output::{
    rfc3339, BackgroundSync, OutputError, OutputPosition, OutputSender, OutputWriter, PageRecord,
};
use crate::seen::{Plan, SeenBackend, SeenSet};
use crate::warc::record::ArchivedFetch;
use crate::warc::{ArchiveOptions, ArchiveWriter, Archiver, CurrentFile};

/// How often an idle process asks Redis for work (and whether the crawl is over).
const IDLE_POLL: Duration = Duration::from_millis(50);
/// Acknowledgements wait at most this long, or until [`ACK_BATCH`] are pending, so that one
/// round trip carries many.
const ACK_DELAY: Duration = Duration::from_millis(50);
const ACK_BATCH: usize = 64;
/// A lease whose top-up found its host's queue empty asks again no sooner than this.
const TOPUP_RETRY: Duration = Duration::from_millis(100);

/// A lease this process holds.
struct Held {
    token: String,
    /// URLs not yet recorded, with the JSON they are stored as in the lease.
    open: HashMap<String, String>,
    /// Recorded URLs not yet acknowledged, in the order recorded.
    acks: Vec<Ack>,
    /// No top-up before this instant (the host's queue was empty).
    dry_until: Instant,
    /// No top-up after this instant (half a lease period after the claim): then the lease
    /// ends when its URLs are done and the host goes back to the schedule, so that hosts
    /// move between processes (processes joining later get their share) and no process
    /// keeps a busy host for the whole crawl.
    topup_until: Instant,
}

/// The process's handle on the shared crawl.
struct Shared {
    redis: Arc<Redis>,
    prefix: String,
    meta: String,
    process: String,
    plan: Plan,
    max_urls: u64,
    host_cap: u64,
    settings: Settings,
}

impl Shared {
    /// Records the plan and `max_urls` on first use; refuses a process whose differ.
    async fn check_plan(&self) -> Result<(), DistributedError> {
        let ours = format!(
            "max_urls {}, seen-set of {} bits, k {}, seed {}",
            self.max_urls, self.plan.m_bits, self.plan.k, self.plan.seed
        );
        let mut pipe = redis::pipe();
        pipe.cmd("HSETNX").arg(&self.meta).arg("plan").arg(&ours);
        pipe.cmd("HSETNX")
            .arg(&self.meta)
            .arg("max_urls")
            .arg(self.max_urls);
        pipe.cmd("HGET").arg(&self.meta).arg("plan");
        let replies = self.redis.run(&pipe).await?;
        let theirs = match replies.get(2) {
            Some(v) => distributed::text(v, "plan")?,
            None => return Err(distributed::bad("plan", &redis::Value::Nil)),
        };
        if theirs != ours {
            return Err(DistributedError::Mismatch {
                crawl_id: self.settings.crawl_id.clone(),
                theirs,
                ours,
            });
        }
        // Registered (a first heartbeat) before any file of this process exists: see
        // `crate::distributed::seal`. The crawl's start is stamped by the first process.
        let mut pipe = redis::pipe();
        self.renew_call(&mut pipe, std::iter::empty());
        status::stamp(&mut pipe, &self.meta, "started_ms", true);
        self.redis.run(&pipe).await?;
        Ok(())
    }

    /// Adds a heartbeat renewing the leases of `tokens` to `pipe`.
    fn renew_call<'a>(&self, pipe: &mut redis::Pipeline, tokens: impl Iterator<Item = &'a str>) {
        let mut args = vec![
            self.prefix.clone().into_bytes(),
            self.process.clone().into_bytes(),
            (self.settings.lease.as_millis() as u64)
                .to_string()
                .into_bytes(),
        ];
        args.extend(tokens.map(|t| t.as_bytes().to_vec()));
        self.redis.scripts.renew.call(pipe, &self.meta, &args);
    }

    /// Seals the output of the crawl's dead processes found in `out` (see
    /// [`crate::distributed::seal`]). With `wait` (at the crawl's end), processes that died
    /// too recently to be taken for dead yet are waited for (at most `lease_secs`): a process
    /// that dies holding no lease does not hold the crawl up, so the crawl can end before it
    /// is silent for that long.
    async fn seal_dead(&self, config: &Config, wait: bool) -> Result<(), CrawlError> {
        let scope = SealScope {
            redis: &self.redis,
            prefix: &self.prefix,
            process: &self.process,
            out: &config.output.dir,
            warc_prefix: &config.output.warc_prefix,
            silence: self.settings.lease,
        };
        let mut sealing = seal_dead(&scope).await?;
        if let (true, Some(soon)) = (wait, sealing.silent_soon) {
            tracing::info!(
                "waiting {:.1} s to seal the output of a process that stopped its heartbeats",
                soon.as_secs_f64()
            );
            tokio::time::sleep(soon + Duration::from_millis(50)).await;
            sealing.sealed.extend(seal_dead(&scope).await?.sealed);
        }
        if !sealing.sealed.is_empty() {
            tracing::info!(
                "sealed the output of {} dead processes",
                sealing.sealed.len()
            );
        }
        Ok(())
    }

    /// Adds one admission script for `items` (with their host keys) to `pipe`.
    fn admit_call(&self, pipe: &mut redis::Pipeline, items: &[(String, QueuedUrl)]) {
        let mut args: Vec<Vec<u8>> = Vec::with_capacity(4 + items.len() * (3 + 16));
        args.push(self.prefix.clone().into_bytes());
        args.push(self.max_urls.to_string().into_bytes());
        args.push(self.host_cap.to_string().into_bytes());
        args.push(self.plan.k.to_string().into_bytes());
        let mut offsets = Vec::new();
        for (host, item) in items {
            let shard = bloom_bits(&self.plan, item.url.as_bytes(), &mut offsets);
            // k probes may land on the same bit; the script reads exactly k offsets.
            while offsets.len() < self.plan.k as usize {
                offsets.push(offsets.last().copied().unwrap_or(0));
            }
            args.push(host.clone().into_bytes());
            args.push(shard.to_string().into_bytes());
            args.push(serde_json::to_vec(item).unwrap_or_default());
            for o in &offsets {
                args.push(o.to_string().into_bytes());
            }
        }
        self.redis.scripts.admit.call(pipe, &self.meta, &args);
    }
}

/// Runs this process's part of a distributed crawl until the crawl is over (or it is
/// stopped), and returns its summary.
pub(crate) async fn run(
    request: CrawlRequest,
    settings: Settings,
) -> Result<CrawlSummary, CrawlError> {
    let CrawlRequest {
        config,
        seeds,
        progress,
        shutdown,
        resume: _,
    } = request;
    // A line per progress interval (no bar: a bar of this process alone would mislead);
    // `crawler status` shows the whole crawl.
    let progress_lines = progress != super::ProgressMode::Quiet;
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
    let process = distributed::process_id();
    let redis = Redis::connect(&settings.url, settings.timeout).await?;
    let p = prefix(&settings.crawl_id);
    let shared = Shared {
        redis: Arc::new(redis),
        meta: format!("{p}meta"),
        prefix: p,
        process: process.clone(),
        plan: plan.clone(),
        max_urls: config.crawl.max_urls.0,
        host_cap: config.scope.max_pages_per_host,
        settings: settings.clone(),
    };
    shared.check_plan().await?;
    tracing::info!(
        "distributed: process {process} joins crawl {:?} on {}",
        settings.crawl_id,
        settings.url
    );

    // The pages file, locked for this process's lifetime (how others tell it is alive),
    // before any other file of it exists; then the output of dead processes is sealed.
    let pages_path = out_dir.join(format!("pages-{process}.jsonl"));
    let output_lock = OutputLock::acquire(&pages_path).map_err(OutputError::from)?;
    shared.seal_dead(&config, false).await?;

    // The local frontier: a cache of the leased hosts' URLs, in a directory of its own.
    let work_dir = out_dir.join(format!("work-{process}"));
    let _ = std::fs::remove_dir_all(&work_dir);
    let mut frontier = Frontier::create(
        FrontierPolicy::from_config(&config.politeness),
        FrontierOptions::from_config(&config.frontier, &work_dir, &config.crawl.user_agent),
    )?;

    // The local cache in front of the shared seen-set: the same filter, for this
    // process's links only.
    let cache = Arc::new(SeenSet::new(plan.clone())?);
    let cache_backend: Arc<dyn SeenBackend> = cache.clone();
    let counters = Arc::new(CrawlCounters::default());
    // The same output thread as a local crawl's, on this process's pages file and archive.
    let archive = start_archive(&config, &process, &pages_path)?;
    let archive_file = archive.as_ref().map(ArchiveWriter::current);
    let archiver = archive_file.as_ref().map(|current| Archiver {
        current: current.clone(),
        gzip_level: config.output.warc_gzip_level,
    });
    let (output_writer, output) = OutputWriter::start_at(
        pages_path.clone(),
        4096,
        OutputPosition::default(),
        archive.map(|writer| (writer, counters.clone())),
    )?;
    let background_sync = BackgroundSync::start(
        Duration::from_secs_f64(config.checkpoint.sync_interval_secs),
        pages_path.clone(),
        archive_file,
    )?;
    let (completions_tx, completions_rx) = mpsc::unbounded_channel();
    let (parse_pool, fetch) = super::start_workers(
        &config,
        &seeds,
        cache_backend,
        &counters,
        completions_tx,
        archiver,
        // Each process keeps its own jar, not saved: a host's cookies would have to be
        // shared through Redis to follow its URLs from process to process.
        config.network.cookies.then(|| {
            Arc::new(crate::cookie_jar::CookieJar::new(
                config.network.max_cookies,
            ))
        }),
    )?;

    let mut process_loop = Process {
        shared,
        config: config.clone(),
        counters: counters.clone(),
        cache: cache.clone(),
        output: Some(output),
        held: HashMap::new(),
        done: Vec::new(),
        pending_acks: 0,
        acks_since: None,
        records_sent: 0,
        oldest_unacked: None,
        sent: BTreeMap::new(),
        stale: 0,
        waiting: Vec::new(),
        admitting: None,
        syncing: None,
        progress_lines,
    };
    let seeds = Candidates {
        urls: seeds,
        depth: 0,
        redirect_hops: 0,
    };
    process_loop.admit_seeds(seeds).await?;
    let result = process_loop
        .run(&mut frontier, fetch, completions_rx, &shutdown)
        .await;
    parse_pool.join().await;
    let stopped = result?;
    // Every record written and the files closed (fsynced) before the process says it ended.
    drop(process_loop.output.take());
    tokio::task::spawn_blocking(move || output_writer.finish())
        .await
        .map_err(|_| OutputError::Stopped)??;
    drop(background_sync);
    process_loop.end(stopped).await?;
    if !stopped {
        // The crawl is over: the dead processes' output is sealed now (their leases have
        // all expired by now), and the crawl-wide summary written from Redis's figures.
        process_loop.shared.seal_dead(&config, true).await?;
        write_crawl_summary(&process_loop.shared, &out_dir).await?;
    }
    drop(output_lock);
    let round_trips = process_loop.shared.redis.round_trips();
    let finished = CrawlCounters::get(&counters.finished);
    tracing::info!(
        "distributed: {finished} pages, {round_trips} Redis round trips ({:.2} per page)",
        round_trips as f64 / finished.max(1) as f64
    );
    let _ = std::fs::remove_dir_all(&work_dir);
    let summary = CrawlSummary::new(Ending {
        config: &config,
        frontier: &frontier,
        counters: &counters,
        seen: cache.stats(),
        plan: cache.plan(),
        // A process never resumes (its id is new): its run is its whole share.
        time: super::checkpoints::CrawlTime::first_run(started),
        finished_before: 0,
        stopped,
    });
    // The process's own summary, with what it cost in Redis beside it (the whole crawl's
    // figures are in Redis: `crawler status`, and `summary.json` once the crawl is over).
    let mut json = serde_json::to_value(&summary).unwrap_or_default();
    if let Some(object) = json.as_object_mut() {
        object.insert(
            "distributed".into(),
            serde_json::json!({
                "process": process,
                "crawl_id": settings.crawl_id,
                "redis_round_trips": round_trips,
                "round_trips_per_page": round_trips as f64 / finished.max(1) as f64,
                "leases_lost": process_loop.stale,
            }),
        );
    }
    let json = serde_json::to_vec_pretty(&json).unwrap_or_default();
    crate::output::write_atomically(&out_dir.join(format!("summary-{process}.json")), &json)?;
    Ok(summary)
}

/// This process's archive writer when `[output] warc` is on: its files are
/// `OUT/warc/PREFIX-<process id>-TIMESTAMP-SERIAL.warc.gz`, beside the other processes'. A
/// process never resumes (its id is new), so its archive starts empty, and its dedup index
/// knows only its own payloads: a payload fetched by two processes is archived in full by
/// each (a revisit refers to a record of the same process's files).
fn start_archive(
    config: &Config,
    process: &str,
    pages: &Path,
) -> Result<Option<ArchiveWriter>, CrawlError> {
    let o = &config.output;
    if !o.warc {
        return Ok(None);
    }
    let writer = ArchiveWriter::start(
        ArchiveOptions {
            dir: o.dir.join("warc"),
            prefix: format!("{}-{process}", o.warc_prefix),
            max_bytes: o.warc_max_bytes.0,
            gzip_level: o.warc_gzip_level,
            info: crate::warc::info_fields(config),
        },
        0,
        crate::warc::digest_index::PayloadIndex::with_memory(o.warc_dedup_memory.0),
        pages.to_path_buf(),
        Arc::new(CurrentFile::default()),
    )
    .map_err(OutputError::from)?;
    Ok(Some(writer))
}

/// Writes `OUT/summary.json`: the whole crawl as Redis counts it (see
/// [`crate::distributed::status`]), through a temporary file of this process's own, since
/// processes sharing the directory may end at once.
async fn write_crawl_summary(shared: &Shared, out: &Path) -> Result<(), CrawlError> {
    let Some(summary) = status::read(&shared.redis, &shared.settings.crawl_id).await? else {
        return Ok(());
    };
    let json = serde_json::to_vec_pretty(&summary).unwrap_or_default();
    let path = out.join("summary.json");
    crate::durable::replace(
        &path,
        out.join(format!("summary.json.{}.tmp", shared.process)),
        &json,
    )
    .map_err(OutputError::from)?;
    Ok(())
}

/// The run loop's state.
struct Process {
    shared: Shared,
    config: Config,
    counters: Arc<CrawlCounters>,
    cache: Arc<SeenSet>,
    /// The output thread's sender (taken at the end, to close the files).
    output: Option<OutputSender>,
    /// Leases held, by host key.
    held: HashMap<String, Held>,
    /// Leases whose URLs are all recorded: (token, host, unacknowledged), to end once their
    /// records are handed to the OS.
    done: Vec<(String, String, Vec<Ack>)>,
    /// Acknowledgements waiting, and since when the oldest waits.
    pending_acks: usize,
    acks_since: Option<Instant>,
    /// Records sent to the output thread, and the number of the oldest whose URL waits for
    /// its acknowledgement: a URL is acknowledged once the writer's count of records handed
    /// to the OS reaches its record's number.
    records_sent: u64,
    oldest_unacked: Option<u64>,
    /// Counter values already added to Redis's sums.
    sent: BTreeMap<String, u64>,
    /// Leases found taken over by another process (expired under us).
    stale: u64,
    /// Finished pages (URL, record, links, archive records) whose links wait for the
    /// admission in flight.
    waiting: Vec<(String, Box<PageRecord>, Candidates, Archived)>,
    /// The admission in flight (at most one): its round trip and its pages.
    admitting: Option<(Call, Admitting)>,
    /// The sync in flight (at most one).
    syncing: Option<(Call, Syncing)>,
    /// Whether to log a progress line per `progress_interval_secs`.
    progress_lines: bool,
}

/// A round trip running beside the loop (a sync first waits for the output thread).
type Call = tokio::task::JoinHandle<Result<Vec<redis::Value>, CrawlError>>;

/// A fetch's archive records, with the archive on.
type Archived = Option<Box<ArchivedFetch>>;

/// A recorded URL to acknowledge: its record's number in the output (see
/// [`Process::records_sent`]) and its JSON in the lease.
type Ack = (u64, String);

/// The pages of an admission in flight and the URLs sent for each.
struct Admitting {
    pages: Vec<(String, Box<PageRecord>, Archived)>,
    sent: Vec<Vec<(String, QueuedUrl)>>,
}

/// What a sync in flight carries, to read its replies.
struct Syncing {
    releasing: bool,
    beat: bool,
    /// Hosts whose leases were asked to be topped up.
    topped: Vec<String>,
    sent_at: Instant,
}

/// What a sync's claim answered: new leases, whether the whole crawl is over, when the next
/// host is due.
type ClaimAnswer = (usize, bool, Option<Duration>);

impl Process {
    async fn run(
        &mut self,
        frontier: &mut Frontier,
        fetch: Arc<FetchShared>,
        mut completions: mpsc::UnboundedReceiver<Completion>,
        shutdown: &super::ShutdownHandle,
    ) -> Result<bool, CrawlError> {
        let concurrency = self.config.crawl.concurrency as u64;
        let lease_urls = u64::from(self.shared.settings.lease_urls);
        // What one host can keep in flight with politeness on.
        let per_host = u64::from(self.config.politeness.per_host_concurrency.max(1));
        // Hosts are claimed a few at a time, only while the process could use more (so it
        // leaves the rest to the others), never more than one per slot. With politeness on,
        // a queued URL may wait for its host's rate: more hosts are wanted while slots stay
        // empty with nothing ready. With it off, every queued URL is ready: the process keeps
        // about two rounds of its concurrency queued or in flight, so that a claim's round
        // trip never leaves slots empty.
        let polite = self.config.politeness.enabled;
        let max_held = (concurrency as usize).clamp(4, 1024);
        let heartbeat = self.shared.settings.lease / 3;
        let grace = Duration::from_secs_f64(self.config.crawl.shutdown_grace_secs);
        let mut stop_rx = shutdown.subscribe();
        let mut stopping = shutdown.is_stopping();
        let mut grace_deadline: Option<Instant> = None;
        let mut tasks = tokio::task::JoinSet::new();
        let mut next_claim = Instant::now();
        let mut next_beat = Instant::now();
        let mut crawl_over = false;
        let progress = self.sender()?.progress();
        let mut log_tick = tokio::time::interval(Duration::from_secs_f64(
            self.config.output.progress_interval_secs,
        ));
        log_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = Instant::now();
            if !stopping {
                while frontier.in_flight() < concurrency {
                    match frontier.pop_ready(now)? {
                        None => break,
                        Some(Work::Fetch(dispatch)) => {
                            tasks.spawn(fetch_task(fetch.clone(), dispatch));
                        }
                        Some(Work::Robots(robots)) => {
                            CrawlCounters::add(&self.counters.robots_fetches, 1);
                            tasks.spawn(robots_task(fetch.clone(), robots));
                        }
                        Some(Work::Disallowed(item)) => {
                            self.record_unfetched(&item, "disallowed by robots.txt", |c| {
                                c.disallowed += 1
                            })
                            .await?;
                        }
                        Some(Work::Deferred { item, crawl_delay }) => {
                            let reason = format!(
                                "deferred: robots.txt asks for a Crawl-delay of {} s, over politeness.max_crawl_delay_secs = {} s",
                                crawl_delay.as_secs_f64(),
                                self.config.politeness.max_crawl_delay_secs
                            );
                            self.record_unfetched(&item, &reason, |c| c.deferred += 1)
                                .await?;
                        }
                    }
                }
            }
            let calls_idle =
                self.admitting.is_none() && self.syncing.is_none() && self.waiting.is_empty();
            let idle = calls_idle
                && self.held.is_empty()
                && self.done.is_empty()
                && frontier.is_finished();
            if idle && crawl_over {
                self.start_sync(frontier, false, 0, true)?;
                self.finish_calls(frontier).await?;
                return Ok(false);
            }
            if stopping && frontier.in_flight() == 0 {
                self.finish_calls(frontier).await?;
                self.give_back(frontier).await?;
                return Ok(true);
            }
            if stopping && grace_deadline.is_none() {
                grace_deadline = Some(now + grace);
            }
            let in_flight = frontier.in_flight();
            let busy = in_flight + frontier.queued();
            let deficit = if polite {
                concurrency.saturating_sub(in_flight)
            } else {
                (2 * concurrency).saturating_sub(busy)
            };
            let wants_work = !stopping && deficit > 0 && self.held.len() < max_held;
            let sync_at = if self.syncing.is_some() {
                None
            } else {
                let half = (lease_urls as usize).div_ceil(2);
                let mut at = next_beat;
                // Acknowledgements go once their records are handed to the OS (see
                // `start_sync`); until then the loop waits for the writer's wake-up.
                let handed = progress.records();
                let can_ack = self.oldest_unacked.is_some_and(|n| n <= handed);
                let done_ready = self
                    .done
                    .iter()
                    .any(|(_, _, acks)| acks.last().is_none_or(|(n, _)| *n <= handed));
                if done_ready || (can_ack && self.pending_acks >= ACK_BATCH) {
                    at = now;
                }
                if let (true, Some(since)) = (can_ack, self.acks_since) {
                    at = at.min(since + ACK_DELAY);
                }
                if wants_work {
                    at = at.min(next_claim);
                }
                if !stopping {
                    for held in self
                        .held
                        .values()
                        .filter(|h| h.open.len() < half && now < h.topup_until)
                    {
                        at = at.min(held.dry_until);
                    }
                }
                Some(at)
            };
            if sync_at.is_some_and(|at| at <= now) {
                let want = if wants_work && next_claim <= now {
                    let hosts = deficit.div_ceil(if polite { per_host } else { lease_urls });
                    hosts.clamp(1, (max_held - self.held.len()) as u64)
                } else {
                    0
                };
                let beat = next_beat <= now;
                if beat {
                    next_beat = now + heartbeat;
                }
                self.start_sync(frontier, beat, want, !stopping)?;
                continue;
            }
            // With every slot taken a ready URL waits for a completion, which wakes the loop
            // anyway: waking for it then would spin (perf showed the loop's thread spending
            // more CPU re-arming timers than the whole local dispatcher).
            let ready_at = if frontier.in_flight() >= concurrency {
                None
            } else {
                frontier.next_ready_at()
            };
            let wake = [sync_at, ready_at].into_iter().flatten().min();
            tokio::select! {
                Some(completion) = completions.recv() => {
                    self.take(frontier, completion).await?;
                    while let Ok(completion) = completions.try_recv() {
                        self.take(frontier, completion).await?;
                    }
                    if self.admitting.is_none() {
                        self.start_admit().await?;
                    }
                }
                reply = join_call(&mut self.admitting) => {
                    self.finish_admit(reply).await?;
                    self.start_admit().await?;
                }
                reply = join_call(&mut self.syncing) => {
                    if let Some((got, over, due_in)) = self.finish_sync(frontier, reply)? {
                        crawl_over = over;
                        next_claim = if got > 0 {
                            Instant::now()
                        } else {
                            Instant::now()
                                + due_in.map_or(IDLE_POLL, |d| d.clamp(Duration::from_millis(1), IDLE_POLL))
                        };
                    }
                }
                _ = sleep_until_opt(if stopping { None } else { wake }) => {}
                _ = progress.grew.notified(), if self.oldest_unacked.is_some_and(|n| n > progress.records()) => {}
                _ = sleep_until_opt(grace_deadline) => {
                    tasks.abort_all();
                    self.finish_calls(frontier).await?;
                    self.give_back(frontier).await?;
                    return Ok(true);
                }
                changed = stop_rx.changed(), if !stopping => {
                    if changed.is_err() || *stop_rx.borrow() {
                        stopping = true;
                        tracing::info!("stopping: waiting for {} fetches in flight", frontier.in_flight());
                    }
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                _ = log_tick.tick(), if self.progress_lines => {
                    tracing::info!(
                        "{} pages done here, {} queued and {} in flight here, {} leases held, {} Redis round trips",
                        CrawlCounters::get(&self.counters.finished),
                        frontier.queued(),
                        frontier.in_flight(),
                        self.held.len(),
                        self.shared.redis.round_trips()
                    );
                }
            }
        }
    }

    /// Takes one completion: a finished page waits for its links' admission; the rest is
    /// the local frontier's.
    async fn take(
        &mut self,
        frontier: &mut Frontier,
        completion: Completion,
    ) -> Result<(), CrawlError> {
        match completion {
            Completion::Robots {
                fetch,
                outcome,
                archived,
            } => {
                // With the archive on, the robots.txt fetch has its line and records (no
                // lease to acknowledge: it is not a queued URL).
                if let Some((record, archive)) = archived {
                    self.sender()?.send_archived(record, Some(archive)).await?;
                    self.records_sent += 1;
                }
                let reason = outcome.give_up_reason();
                for item in frontier.robots_done(fetch, outcome)? {
                    self.record_unfetched(&item, &reason, |c| c.robots_unavailable += 1)
                        .await?;
                }
            }
            Completion::Discovered { candidates, .. } => {
                // Only sitemaps send these, and `crawl.sitemaps` is refused with
                // [distributed] (see the config's validation): nothing to admit here.
                tracing::debug!(
                    "{} discovered URLs dropped: sitemaps are not read in distributed mode",
                    candidates.urls.len()
                );
            }
            Completion::Page {
                dispatch,
                outcome: Outcome::Retry { delay },
            } => {
                // Counted with the URL's record (its attempts), when it ends.
                frontier.retry(dispatch, delay);
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
                // The dispatch goes back to the frontier now (its slot is free); the record
                // is written, and the URL closed in its lease, once its links are admitted.
                let url = dispatch.item.url.clone();
                frontier.complete(dispatch);
                self.waiting.push((url, record, candidates, archive));
            }
        }
        Ok(())
    }

    /// Waits for the calls in flight and applies them (before a stop or the end).
    async fn finish_calls(&mut self, frontier: &mut Frontier) -> Result<(), CrawlError> {
        loop {
            if self.admitting.is_some() {
                let reply = join_call(&mut self.admitting).await;
                self.finish_admit(reply).await?;
            } else if !self.waiting.is_empty() {
                self.start_admit().await?;
            } else if self.syncing.is_some() {
                let reply = join_call(&mut self.syncing).await;
                self.finish_sync(frontier, reply)?;
            } else {
                return Ok(());
            }
        }
    }

    /// Sends the waiting pages' links to Redis (one pipeline, one script per page with links
    /// the local cache does not know); pages with none are recorded at once.
    async fn start_admit(&mut self) -> Result<(), CrawlError> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        let mut pages = Vec::new();
        let mut sent: Vec<Vec<(String, QueuedUrl)>> = Vec::new();
        for (url, mut record, candidates, archive) in std::mem::take(&mut self.waiting) {
            let items = self.unknown(candidates, Some(url.clone()), &mut record.counts);
            if !items.is_empty() {
                self.shared.admit_call(&mut pipe, &items);
            }
            pages.push((url, record, archive));
            sent.push(items);
        }
        let admitting = Admitting { pages, sent };
        if admitting.sent.iter().all(Vec::is_empty) {
            return self.apply_admit(admitting, Vec::new()).await;
        }
        let redis = self.shared.redis.clone();
        let call = tokio::spawn(async move { Ok(redis.run(&pipe).await?) });
        self.admitting = Some((call, admitting));
        Ok(())
    }

    /// The candidates the local cache does not know, as items to queue; those it knows are
    /// counted as seen in `counts` (the finding page's).
    fn unknown(
        &self,
        candidates: Candidates,
        parent: Option<String>,
        counts: &mut PageCounts,
    ) -> Vec<(String, QueuedUrl)> {
        let mut items = Vec::new();
        let mut known = 0;
        for url in candidates.urls {
            if self.cache.contains(url.as_str().as_bytes()) {
                known += 1;
                continue;
            }
            items.push((
                host_key(&url),
                QueuedUrl {
                    url: String::from(url),
                    depth: candidates.depth,
                    parent: parent.clone(),
                    redirect_hops: candidates.redirect_hops,
                    attempts: 0,
                },
            ));
        }
        Refusal::Seen.count(counts, known);
        items
    }

    async fn finish_admit(
        &mut self,
        reply: Option<CallResult<Admitting>>,
    ) -> Result<(), CrawlError> {
        let Some((replies, admitting)) = reply else {
            return Ok(());
        };
        self.apply_admit(admitting, replies?).await
    }

    /// The admission's answers: counts, the cache, then the pages' records.
    async fn apply_admit(
        &mut self,
        admitting: Admitting,
        replies: Vec<redis::Value>,
    ) -> Result<(), CrawlError> {
        let mut replies = replies.into_iter();
        let Admitting { pages, sent } = admitting;
        for ((url, mut record, archive), items) in pages.into_iter().zip(sent) {
            let mut queued = 0;
            if !items.is_empty() {
                let reply = replies
                    .next()
                    .ok_or_else(|| distributed::bad("admit", &redis::Value::Nil))?;
                let codes = distributed::array(&reply, "admit")?;
                if codes.len() != items.len() {
                    return Err(distributed::bad("admit", &reply).into());
                }
                for ((_, item), code) in items.iter().zip(codes) {
                    match distributed::int(code, "admit")? {
                        1 => {
                            // In the shared set now: the cache may say so.
                            self.cache.insert_new(item.url.as_bytes());
                            queued += 1;
                        }
                        0 => {
                            self.cache.insert_new(item.url.as_bytes());
                            Refusal::Seen.count(&mut record.counts, 1);
                        }
                        2 => Refusal::OverMaxUrls.count(&mut record.counts, 1),
                        _ => Refusal::HostCap.count(&mut record.counts, 1),
                    }
                }
                CrawlCounters::add(&self.counters.accepted, queued);
            }
            record.new_links = queued;
            self.record(record, archive, &url).await?;
        }
        Ok(())
    }

    /// The seeds, admitted before the loop starts.
    async fn admit_seeds(&mut self, seeds: Candidates) -> Result<(), CrawlError> {
        let mut counts = PageCounts::default();
        let items = self.unknown(seeds, None, &mut counts);
        self.counters.add_page(&counts);
        if items.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        self.shared.admit_call(&mut pipe, &items);
        let replies = self.shared.redis.run(&pipe).await?;
        let reply = replies
            .first()
            .ok_or_else(|| distributed::bad("admit", &redis::Value::Nil))?;
        let codes = distributed::array(reply, "admit")?;
        for ((_, item), code) in items.iter().zip(codes) {
            let code = distributed::int(code, "admit")?;
            if code == 0 || code == 1 {
                self.cache.insert_new(item.url.as_bytes());
            }
            if code == 1 {
                CrawlCounters::add(&self.counters.accepted, 1);
            }
        }
        Ok(())
    }

    async fn record_unfetched(
        &mut self,
        item: &QueuedUrl,
        reason: &str,
        counted: impl FnOnce(&mut PageCounts),
    ) -> Result<(), CrawlError> {
        let mut record = base_record(item);
        counted(&mut record.counts);
        record.attempts = 0;
        record.error = Some(reason.to_string());
        record.fetched_at = rfc3339(SystemTime::now());
        self.record(record, None, &item.url).await
    }

    fn sender(&self) -> Result<&OutputSender, OutputError> {
        self.output.as_ref().ok_or(OutputError::Stopped)
    }

    /// Sends a URL's record (and its fetch's archive records) to the output thread and
    /// closes it in its lease; it is acknowledged by a later sync, once handed to the OS.
    async fn record(
        &mut self,
        record: Box<PageRecord>,
        archive: Archived,
        url: &str,
    ) -> Result<(), CrawlError> {
        self.counters.add_page(&record.counts);
        self.sender()?.send_archived(record, archive).await?;
        self.records_sent += 1;
        let number = self.records_sent;
        CrawlCounters::add(&self.counters.finished, 1);
        let host = key_of(url);
        if let Some(held) = self.held.get_mut(&host) {
            if let Some(json) = held.open.remove(url) {
                held.acks.push((number, json));
                self.pending_acks += 1;
                self.acks_since.get_or_insert_with(Instant::now);
                self.oldest_unacked.get_or_insert(number);
            }
            if held.open.is_empty() {
                if let Some(held) = self.held.remove(&host) {
                    self.done.push((held.token, host, held.acks));
                }
            }
        }
        Ok(())
    }

    /// Starts one round trip beside the loop: acknowledgements of the URLs whose records the
    /// output thread has handed to the OS, and the finished leases all of whose records it
    /// has (the others wait for a later sync), the counters' increments, renewal of held
    /// leases (`beat`), and, when `claim`, a claim of up to `want` hosts with top-ups of held
    /// leases running low. It never waits for the output thread: a round trip to that thread
    /// in every sync (a wake-up of another thread on loaded cores) delays every claim.
    fn start_sync(
        &mut self,
        frontier: &Frontier,
        beat: bool,
        want: u64,
        claim: bool,
    ) -> Result<(), CrawlError> {
        let now = Instant::now();
        let mut pipe = redis::pipe();
        let handed = self.sender()?.progress().records();
        let s = &self.shared;
        let mut args = vec![
            s.prefix.clone().into_bytes(),
            s.process.clone().into_bytes(),
        ];
        let mut releases = 0;
        // What stays unacknowledged: how many, and the oldest's record number.
        let mut remaining = 0;
        let mut oldest: Option<u64> = None;
        let mut keep = |later: &[Ack]| {
            if let Some((first, _)) = later.first() {
                remaining += later.len();
                oldest = Some(oldest.map_or(*first, |o| o.min(*first)));
            }
        };
        for (token, host, mut acks) in std::mem::take(&mut self.done) {
            let later = not_handed(&mut acks, handed);
            if later.is_empty() {
                let wait = frontier.handoff_wait(&host, now);
                push_release(&mut args, &token, wait, true, &acks);
                releases += 1;
            } else {
                if !acks.is_empty() {
                    push_release(&mut args, &token, Duration::ZERO, false, &acks);
                    releases += 1;
                }
                keep(&later);
                self.done.push((token, host, later));
            }
        }
        for held in self.held.values_mut().filter(|h| !h.acks.is_empty()) {
            let later = not_handed(&mut held.acks, handed);
            let acks = std::mem::replace(&mut held.acks, later);
            if !acks.is_empty() {
                push_release(&mut args, &held.token, Duration::ZERO, false, &acks);
                releases += 1;
            }
            keep(&held.acks);
        }
        let releasing = releases > 0;
        if releasing {
            s.redis.scripts.release.call(&mut pipe, &s.meta, &args);
        }
        self.pending_acks = remaining;
        self.oldest_unacked = oldest;
        if remaining == 0 {
            self.acks_since = None;
        }
        if releasing || beat {
            self.counter_increments(&mut pipe);
        }
        let s = &self.shared;
        if beat {
            s.renew_call(&mut pipe, self.held.values().map(|h| h.token.as_str()));
        }
        let lease_urls = s.settings.lease_urls as usize;
        let mut topped = Vec::new();
        if claim {
            let mut tops = Vec::new();
            for (host, held) in &self.held {
                if held.open.len() < lease_urls.div_ceil(2)
                    && held.dry_until <= now
                    && now < held.topup_until
                {
                    tops.push(held.token.clone().into_bytes());
                    tops.push((lease_urls - held.open.len()).to_string().into_bytes());
                    topped.push(host.clone());
                }
            }
            let mut args = vec![
                s.prefix.clone().into_bytes(),
                s.process.clone().into_bytes(),
                (s.settings.lease.as_millis() as u64)
                    .to_string()
                    .into_bytes(),
                want.to_string().into_bytes(),
                s.settings.lease_urls.to_string().into_bytes(),
                topped.len().to_string().into_bytes(),
            ];
            args.extend(tops);
            s.redis.scripts.claim.call(&mut pipe, &s.meta, &args);
        }
        let syncing = Syncing {
            releasing,
            beat,
            topped,
            sent_at: now,
        };
        let redis = s.redis.clone();
        let call = tokio::spawn(async move { Ok(redis.run(&pipe).await?) });
        self.syncing = Some((call, syncing));
        Ok(())
    }

    /// Applies a sync's replies; returns the claim's answer when it had one.
    fn finish_sync(
        &mut self,
        frontier: &mut Frontier,
        reply: Option<CallResult<Syncing>>,
    ) -> Result<Option<ClaimAnswer>, CrawlError> {
        let Some((replies, syncing)) = reply else {
            return Ok(None);
        };
        let replies = replies?;
        let mut replies = replies.iter();
        let mut next = |what| {
            replies
                .next()
                .ok_or_else(|| CrawlError::from(distributed::bad(what, &redis::Value::Nil)))
        };
        if syncing.releasing {
            let stale = distributed::int(next("release")?, "release")?.max(0) as u64;
            self.note_stale(stale);
        }
        if syncing.beat {
            let lost = distributed::array(next("renew")?, "renew")?;
            let mut tokens = Vec::with_capacity(lost.len());
            for token in lost {
                tokens.push(distributed::text(token, "renew")?);
            }
            self.note_stale(tokens.len() as u64);
            // A lease taken over is no longer this process's: its URLs are not acknowledged
            // (the new holder fetches them too), and it is not renewed or reported again.
            self.held.retain(|_, held| !tokens.contains(&held.token));
        }
        let Ok(claim) = next("claim") else {
            return Ok(None);
        };
        let claimed = parse_claim(claim)?;
        let now = syncing.sent_at;
        // Top-ups that brought nothing wait a little before asking again.
        for host in syncing.topped {
            if let Some(held) = self.held.get_mut(&host) {
                held.dry_until = now + TOPUP_RETRY;
            }
        }
        let mut got = 0;
        for lease in claimed.leases {
            match self.held.get(&lease.host) {
                Some(held) if held.token == lease.token => {}
                Some(_) => {
                    // Never happens (a host is leased once at a time); were it to, the URLs
                    // stay in that lease in Redis and come back when it ends or expires.
                    tracing::warn!("a lease of {} this process does not know", lease.host);
                    continue;
                }
                None => {
                    // A top-up of a lease that finished while the sync was on its way is
                    // still that lease: it is held again instead of ended.
                    let acks = match self.done.iter().position(|(t, _, _)| *t == lease.token) {
                        Some(i) => self.done.swap_remove(i).2,
                        None => {
                            got += 1;
                            Vec::new()
                        }
                    };
                    self.held.insert(
                        lease.host.clone(),
                        Held {
                            token: lease.token.clone(),
                            open: HashMap::new(),
                            acks,
                            dry_until: now,
                            topup_until: now + self.shared.settings.lease / 2,
                        },
                    );
                }
            }
            let Some(held) = self.held.get_mut(&lease.host) else {
                continue;
            };
            held.dry_until = now;
            for (item, json) in lease.items {
                // Leased URLs are in the shared set: links to them need no round trip.
                self.cache.insert_new(item.url.as_bytes());
                held.open.insert(item.url.clone(), json);
                frontier.push(&lease.host, item)?;
            }
        }
        let over = claimed.scheduled == 0 && claimed.outstanding == 0;
        Ok(Some((got, over, claimed.due_in)))
    }

    fn note_stale(&mut self, n: u64) {
        if n > 0 {
            self.stale += n;
            tracing::warn!(
                "{n} leases of this process expired and were taken over by another (their URLs may be fetched twice); raise distributed.lease_secs?"
            );
        }
    }

    /// Adds to Redis's sums what the counters gained since the last time.
    fn counter_increments(&mut self, pipe: &mut redis::Pipeline) {
        let mut map = self.counters.to_map();
        map.insert(
            "redis_round_trips".into(),
            self.shared.redis.round_trips() + 1,
        );
        map.insert("leases_lost".into(), self.stale);
        let key = format!("{}counters", self.shared.prefix);
        for (name, value) in map {
            let before = self.sent.get(&name).copied().unwrap_or(0);
            if value > before {
                pipe.cmd("HINCRBY")
                    .arg(&key)
                    .arg(&name)
                    .arg(value - before)
                    .ignore();
            }
            self.sent.insert(name, value);
        }
    }

    /// At a stop: records flushed, finished leases released, the unfinished URLs of the
    /// others given back to the head of their hosts' queues.
    async fn give_back(&mut self, frontier: &mut Frontier) -> Result<(), CrawlError> {
        self.sender()?.handed().await?;
        let now = Instant::now();
        let s = &self.shared;
        let mut args = vec![
            s.prefix.clone().into_bytes(),
            s.process.clone().into_bytes(),
        ];
        let mut leases = 0;
        for (token, host, acks) in &self.done {
            push_release(
                &mut args,
                token,
                frontier.handoff_wait(host, now),
                true,
                acks,
            );
            leases += 1;
        }
        // Ending a lease gives back what it holds unacknowledged: the unfinished URLs.
        for (host, held) in &self.held {
            push_release(
                &mut args,
                &held.token,
                frontier.handoff_wait(host, now),
                true,
                &held.acks,
            );
            leases += 1;
        }
        let mut pipe = redis::pipe();
        if leases > 0 {
            s.redis.scripts.release.call(&mut pipe, &s.meta, &args);
        }
        self.counter_increments(&mut pipe);
        self.shared.redis.run(&pipe).await?;
        self.done.clear();
        self.held.clear();
        Ok(())
    }

    /// After the output is closed: the last counters' increments (the archive's included),
    /// and this process marked ended, `finished` (the crawl is over: its end is stamped) or
    /// `stopped`, so that nobody takes it for dead and seals its files.
    async fn end(&mut self, stopped: bool) -> Result<(), CrawlError> {
        let mut pipe = redis::pipe();
        self.counter_increments(&mut pipe);
        let s = &self.shared;
        pipe.cmd("HSET")
            .arg(format!("{}ended", s.prefix))
            .arg(&s.process)
            .arg(if stopped { "stopped" } else { "finished" })
            .ignore();
        if !stopped {
            status::stamp(&mut pipe, &s.meta, "finished_ms", false);
        }
        s.redis.run(&pipe).await?;
        Ok(())
    }
}

/// One lease's part of a `release.lua` call.
fn push_release(args: &mut Vec<Vec<u8>>, token: &str, wait: Duration, end: bool, acks: &[Ack]) {
    args.push(token.as_bytes().to_vec());
    args.push((wait.as_millis() as u64 + 1).to_string().into_bytes());
    args.push(if end { b"1".to_vec() } else { b"0".to_vec() });
    args.push(acks.len().to_string().into_bytes());
    for (_, json) in acks {
        args.push(json.as_bytes().to_vec());
    }
}

/// Leaves in `acks` those whose records are among the first `handed` handed to the OS, and
/// returns the others (`acks` is in record order).
fn not_handed(acks: &mut Vec<Ack>, handed: u64) -> Vec<Ack> {
    let at = acks.partition_point(|(number, _)| *number <= handed);
    acks.split_off(at)
}

/// A finished call's replies and what it carried.
type CallResult<T> = (Result<Vec<redis::Value>, CrawlError>, T);

/// Waits for the call in `slot`, if any (forever otherwise), and empties the slot.
async fn join_call<T>(slot: &mut Option<(Call, T)>) -> Option<CallResult<T>> {
    let result = match slot {
        Some((call, _)) => call.await,
        None => std::future::pending().await,
    };
    let (_, carried) = slot.take()?;
    let replies = result.unwrap_or_else(|e| {
        Err(DistributedError::Reply {
            what: "a Redis call",
            detail: format!("its task ended: {e}"),
        }
        .into())
    });
    Some((replies, carried))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acknowledgements_of_handed_records_go() {
        let mut acks: Vec<Ack> = (1..=5).map(|n| (n * 10, format!("u{n}"))).collect();
        let later = not_handed(&mut acks, 30);
        assert_eq!(
            acks.iter().map(|a| a.0).collect::<Vec<_>>(),
            vec![10, 20, 30]
        );
        assert_eq!(later.iter().map(|a| a.0).collect::<Vec<_>>(), vec![40, 50]);
        let mut none: Vec<Ack> = vec![(7, "x".into())];
        assert_eq!(not_handed(&mut none, 6).len(), 1);
        assert!(none.is_empty());
    }
}
