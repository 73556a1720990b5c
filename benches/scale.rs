//! The scale benchmark of issue 4: a crawl's bookkeeping at 1e7–1e8 URLs, without the network.
//!
//! Synthetic pages are "fetched" (popped from the frontier, held in flight a while, completed)
//! and each yields `SCALE_FANOUT` links written the sloppy way pages write them (upper-case
//! host, default port, dot segments, fragments, tracking parameters). Every link goes through
//! the crawl's own stages, split between threads as the crawl splits them: *screening* (a
//! crawl's parse threads) resolves each link against its page's URL and canonicalizes it on
//! the crawl's path ([`PreparedBase::join_link`], [`Normalizer::canonicalize_link`]: no `Url`
//! unless a rule rewrites the link) and drops what the seen-set's lock-free read says is
//! certainly seen; *acceptance* (the crawl's dispatcher, the one thread that owns the
//! frontier) takes each page's links through [`SeenSet::insert_new_batch`] → [`Frontier::push`],
//! and pages come out of [`Frontier::pop_ready`] with politeness off (the frontier's cost, not
//! a rate limit, is measured). Screening runs on a thread of its own, fed 32 pages at a time;
//! `SCALE_SCREEN=inline` runs it on the admitting thread instead (everything on one thread,
//! as this bench ran until session 11, when it also built a `Url` per link with
//! `Normalizer::normalize_str`, which the crawl no longer does). 70 % of links stay on their page's host, 30 % go to a host drawn
//! uniformly from `SCALE_HOSTS` (default 1e6): the worst case for the disk queues, since a
//! host's URLs arrive spread over the whole run. Checkpoints are taken every
//! `SCALE_CHECKPOINT_SECS` as the crawl takes them (the frontier's checkpoint
//! in the pause; the seen-set streamed by [`checkpoint::write`] on another thread), and at the end the
//! state is dropped and resumed from the last checkpoint, timed up to the first URL handed out.
//!
//! What "accepted URLs/s" includes: everything above, the bench's own writing of the links
//! (on the screening thread, or inline) and the checkpoints' pauses; not the crawl's queue
//! log (one JSON line per accepted URL), which this bench never had.
//!
//! Run: `SCALE_URLS=1e8 cargo bench --bench scale` (default 1e7; `SCALE_DIR` for where the
//! files go, default `target/scale-bench`, removed before and after the run).
//!
//! Prints: accepted URLs per second, pops per second, peak RSS (VmHWM), the frontier's own
//! estimate of its memory, disk used (largest seen at a checkpoint), checkpoint pause and write
//! time (median and max), resume time split into checkpoint load, frontier reopen and the
//! first pop, the CPU time per accepted URL of the admitting thread, of the screening thread
//! and of all threads (the process: the checkpoint writer and the queue store's log writer
//! too), how many of the store's entry reads found their group already decoded, and how many
//! links into blocks already in their file the store wrote at once (memory pressure on its
//! deferred links) and in how many writes.
//!
//! What makes the peak: the largest mappings printed at the end say where, not what. For what,
//! run the bench binary under heaptrack at `SCALE_URLS=1e7` (the same hosts as 1e8, so the same
//! shape without the seen-set's growth, ~3 min): `heaptrack -o /tmp/scale <bench binary> --bench`,
//! then `heaptrack_print -f /tmp/scale.zst --print-peaks 1 --peak-limit 3 --sub-peak-limit 30`
//! lists what was live at the heap's peak by call site.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crawler::checkpoint::{self, Manifest};
use crawler::frontier::{Dispatch, Frontier, FrontierOptions, FrontierPolicy, QueuedUrl, Work};
use crawler::normalize::{Link, NormalizeOptions, Normalizer, PreparedBase};
use crawler::quantity::parse_count;
use crawler::seen::{Plan, SeenSet};

/// Pages held in flight, like a crawl's fetch concurrency.
const IN_FLIGHT: usize = 256;

struct Settings {
    urls: u64,
    hosts: u64,
    fanout: usize,
    checkpoint_every: Duration,
    dir: PathBuf,
    fpp: f64,
}

fn env_count(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => parse_count(&text).unwrap_or_else(|e| panic!("{name}={text}: {e}")),
        Err(_) => default,
    }
}

impl Settings {
    fn from_env() -> Settings {
        Settings {
            urls: env_count("SCALE_URLS", 10_000_000),
            hosts: env_count("SCALE_HOSTS", 1_000_000),
            fanout: env_count("SCALE_FANOUT", 10) as usize,
            checkpoint_every: Duration::from_secs(env_count("SCALE_CHECKPOINT_SECS", 20)),
            dir: std::env::var_os("SCALE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("target/scale-bench")),
            fpp: 0.001,
        }
    }
}

/// A small, fast, deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }
}

/// A link as a page might write it; `page` numbers a URL within its host.
fn sloppy_link(out: &mut String, host: u64, page: u64, style: u64) {
    use std::fmt::Write;
    out.clear();
    let name = match style % 4 {
        0 => format!("http://www.site{host}.example.com"),
        1 => format!("HTTP://WWW.Site{host}.Example.COM:80"),
        2 => format!("http://www.site{host}.example.com/./"),
        _ => format!("http://www.site{host}.example.com/x/.."),
    };
    let _ = write!(
        out,
        "{}/section-{}/article-{page}.html",
        name.trim_end_matches('/'),
        page % 17
    );
    match style % 3 {
        0 => out.push_str("#comments"),
        1 => {
            let _ = write!(out, "?utm_source=feed&id={}", page % 5);
        }
        _ => {}
    }
}

fn host_of(url: &str) -> Option<u64> {
    let rest = url.strip_prefix("http://www.site")?;
    let end = rest.find('.')?;
    rest[..end].parse().ok()
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The resident sizes (MiB) of the process's largest mappings, largest first, from
/// `/proc/self/smaps`: which of the big arrays (the seen-set, the maps' arrays, the heap's
/// arenas) make the peak.
fn largest_mappings(count: usize) -> Vec<(f64, String)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut found = Vec::new();
    let mut name = String::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Rss:") {
            let kb: f64 = kb
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0.0);
            found.push((kb / 1024.0, name.clone()));
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|f| f.contains('-'))
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            name = fields.get(5).map_or("anonymous", |n| n).to_string();
        }
    }
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    found.truncate(count);
    found
}

fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| disk_bytes(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.len()
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (every thread: the checkpoint writer's and the queue
/// store's log writer's too).
fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives on this stack.
    unsafe { libc::clock_gettime(clock, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

const MIB: f64 = 1024.0 * 1024.0;

struct Checkpointing {
    out: PathBuf,
    seq: u64,
    pending: Option<std::thread::JoinHandle<(Manifest, Duration)>>,
    pauses_ms: Vec<f64>,
    /// The store's part (tails, table) and the host tallies' copy.
    store_ms: Vec<f64>,
    tallies_ms: Vec<f64>,
    writes_ms: Vec<f64>,
    max_disk: u64,
    plan: Plan,
    max_urls: u64,
}

impl Checkpointing {
    fn wait(&mut self, frontier: &mut Frontier) {
        if let Some(handle) = self.pending.take() {
            let (manifest, took) = handle.join().expect("checkpoint thread");
            self.writes_ms.push(took.as_secs_f64() * 1e3);
            frontier
                .finish_checkpoint(manifest.frontier.as_ref().expect("frontier position"))
                .expect("finish checkpoint");
            self.max_disk = self.max_disk.max(disk_bytes(&self.out));
        }
    }

    fn take(&mut self, seen: &Arc<SeenSet>, frontier: &mut Frontier, accepted: u64, finished: u64) {
        self.wait(frontier);
        let paused = Instant::now();
        // The seen-set is streamed from the live set by the writer, as the crawl does.
        let seen_live = seen.clone();
        let snapshot = frontier.begin_checkpoint().expect("begin checkpoint");
        self.store_ms.push(snapshot.store_pause.as_secs_f64() * 1e3);
        self.tallies_ms
            .push(snapshot.tallies_pause.as_secs_f64() * 1e3);
        self.pauses_ms.push(paused.elapsed().as_secs_f64() * 1e3);
        self.seq += 1;
        let manifest = Manifest {
            format_version: checkpoint::FORMAT_VERSION,
            seq: self.seq,
            created_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            finished: false,
            pages_bytes: 0,
            pages_records: 0,
            frontier: None,
            max_urls: self.max_urls,
            seen_m_bits: self.plan.m_bits,
            seen_k: self.plan.k,
            // Both set from the file when the checkpoint is written.
            seen_seed: 0,
            seen_xxh3: 0,
            seeds_xxh3: 0,
            seeds: 0,
            counters: [
                ("accepted".to_string(), accepted),
                ("finished".to_string(), finished),
            ]
            .into_iter()
            .collect(),
            runs: 1,
            crawl_secs: 0.0,
            orphans: Default::default(),
        };
        let out = self.out.clone();
        self.pending = Some(std::thread::spawn(move || {
            let started = Instant::now();
            let manifest = checkpoint::write(
                &out,
                checkpoint::Snapshot {
                    seen: seen_live,
                    frontier: snapshot,
                    manifest,
                },
            )
            .expect("checkpoint write");
            (manifest, started.elapsed())
        }));
    }
}

fn frontier_options(out: &Path) -> FrontierOptions {
    FrontierOptions {
        dir: out.join("frontier"),
        queue_memory: 64 << 20,
        host_memory: 64 << 20,
        robots_agent: "crawler".into(),
    }
}

fn policy() -> FrontierPolicy {
    FrontierPolicy::from_config(&crawler::config::PolitenessSection {
        enabled: false,
        respect_robots: false,
        ..Default::default()
    })
}

/// Pages whose links are screened together: one message each way between the admitting
/// thread and the screening thread (per page, the channel's wake-ups would cost more than
/// the screening).
const SCREEN_BATCH: usize = 32;
/// Batches sent for screening and not back yet: enough that the admitting thread always has
/// a batch to admit while the next is screened.
const SCREEN_AHEAD: usize = 2;

/// The links of pages, as the crawl's screening hands them to its dispatcher.
struct Screened {
    /// Each page's URL (the links' parent) and its links that are not certainly seen.
    pages: Vec<(String, Vec<Link>)>,
    /// Links written on the pages (before normalization and the seen-set's read).
    links: u64,
}

/// What a crawl's parse threads do with a page's links before the dispatcher sees them, and
/// the bench's own part (writing the links): per page `fanout` sloppy links (70 % to the
/// page's host), each resolved against the page's URL and canonicalized on the crawl's path
/// ([`PreparedBase::join_link`], [`Normalizer::canonicalize_link`]), then the seen-set's
/// lock-free read drops those certainly seen ([`SeenSet::contains_batch`], as the crawl's
/// screening does).
struct Screener {
    rng: Rng,
    normalizer: Normalizer,
    seen: Arc<SeenSet>,
    hosts: u64,
    pages_per_host: u64,
    fanout: usize,
    raw: String,
    known: Vec<bool>,
}

impl Screener {
    fn screen(&mut self, parents: Vec<String>) -> Screened {
        let mut pages = Vec::with_capacity(parents.len());
        let mut links = 0;
        for parent in parents {
            let mut found = Vec::with_capacity(self.fanout);
            let base = url::Url::parse(&parent).expect("a queued URL parses");
            let base = PreparedBase::new(&base);
            let parent_host = host_of(&parent).unwrap_or(0);
            for _ in 0..self.fanout {
                let host = if self.rng.below(10) < 7 {
                    parent_host
                } else {
                    self.rng.below(self.hosts)
                };
                let page = self.rng.below(self.pages_per_host);
                let style = self.rng.next();
                sloppy_link(&mut self.raw, host, page, style);
                links += 1;
                if let Ok(mut link) = base.join_link(&self.raw) {
                    if self.normalizer.canonicalize_link(&mut link).is_ok() {
                        found.push(link);
                    }
                }
            }
            let keys: Vec<&[u8]> = found.iter().map(|l| l.as_str().as_bytes()).collect();
            self.seen.contains_batch(&keys, &mut self.known);
            drop(keys);
            let mut known = self.known.iter();
            found.retain(|_| !known.next().copied().unwrap_or(false));
            pages.push((parent, found));
        }
        Screened { pages, links }
    }
}

/// Where the links are screened: on a thread of their own, as a crawl's parse threads do
/// (the default), or inline on the admitting thread (`SCALE_SCREEN=inline`: everything on
/// one thread, as this bench ran before, for comparison).
enum Screening {
    Thread {
        to: std::sync::mpsc::Sender<Vec<String>>,
        from: std::sync::mpsc::Receiver<Screened>,
        worker: std::thread::JoinHandle<Duration>,
    },
    Inline(Box<Screener>, VecDeque<Screened>),
}

impl Screening {
    fn start(screener: Screener, inline: bool) -> Screening {
        if inline {
            return Screening::Inline(Box::new(screener), VecDeque::new());
        }
        let (to, pages) = std::sync::mpsc::channel::<Vec<String>>();
        let (done, from) = std::sync::mpsc::channel();
        let mut screener = screener;
        let worker = std::thread::spawn(move || {
            for parents in pages {
                if done.send(screener.screen(parents)).is_err() {
                    break;
                }
            }
            thread_cpu()
        });
        Screening::Thread { to, from, worker }
    }

    fn send(&mut self, parents: Vec<String>) {
        match self {
            Screening::Thread { to, .. } => to.send(parents).expect("screening thread"),
            Screening::Inline(screener, ready) => ready.push_back(screener.screen(parents)),
        }
    }

    /// A screened batch: waits for one when `wait`.
    fn receive(&mut self, wait: bool) -> Option<Screened> {
        match self {
            Screening::Thread { from, .. } if wait => Some(from.recv().expect("screening thread")),
            Screening::Thread { from, .. } => from.try_recv().ok(),
            Screening::Inline(_, ready) => ready.pop_front(),
        }
    }

    /// Ends the screening thread; its CPU time (`None` inline).
    fn stop(self) -> Option<Duration> {
        match self {
            Screening::Thread { to, from, worker } => {
                drop(to);
                drop(from);
                Some(worker.join().expect("screening thread"))
            }
            Screening::Inline(..) => None,
        }
    }
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    crawler::allocator::limit_malloc_arenas();
    let s = Settings::from_env();
    let inline = std::env::var("SCALE_SCREEN").is_ok_and(|v| v == "inline");
    let _ = std::fs::remove_dir_all(&s.dir);
    std::fs::create_dir_all(&s.dir).expect("bench dir");
    let plan = Plan::for_fpp(s.urls, s.fpp).expect("plan");
    println!(
        "scale: {} URLs over {} hosts, fan-out {}, checkpoint every {:?}, seen-set {:.1} MiB, screening {}, dir {}",
        s.urls,
        s.hosts,
        s.fanout,
        s.checkpoint_every,
        plan.bytes as f64 / MIB,
        if inline { "inline" } else { "on a thread" },
        s.dir.display()
    );
    let seen = Arc::new(SeenSet::new(plan.clone()).expect("seen-set"));
    let normalizer = Normalizer::new(&NormalizeOptions::default()).expect("normalizer");
    let mut frontier = Frontier::create(policy(), frontier_options(&s.dir)).expect("frontier");
    let mut ckpt = Checkpointing {
        out: s.dir.clone(),
        seq: 0,
        pending: None,
        pauses_ms: Vec::new(),
        store_ms: Vec::new(),
        tallies_ms: Vec::new(),
        writes_ms: Vec::new(),
        max_disk: 0,
        plan: plan.clone(),
        max_urls: s.urls,
    };
    let pages_per_host = (2 * s.urls / s.hosts).max(8);
    let mut screening = Screening::start(
        Screener {
            rng: Rng(0x9E37_79B9_7F4A_7C15),
            normalizer: Normalizer::new(&NormalizeOptions::default()).expect("normalizer"),
            seen: seen.clone(),
            hosts: s.hosts,
            pages_per_host,
            fanout: s.fanout,
            raw: String::new(),
            known: Vec::new(),
        },
        inline,
    );
    let started = Instant::now();
    let cpu_started = thread_cpu();
    let process_cpu_started = process_cpu();
    let mut accepted = 0u64;
    let mut finished = 0u64;
    let mut links = 0u64;
    let mut in_flight: VecDeque<Dispatch> = VecDeque::with_capacity(IN_FLIGHT);
    let mut fresh: Vec<bool> = Vec::new();
    let mut next_checkpoint = started + s.checkpoint_every;
    let mut next_report = started + Duration::from_secs(10);
    let mut next_look = 4096u64;
    let mut ahead = 0usize;

    // Seeds: the front page of the first thousand hosts.
    let mut raw = String::new();
    let mut seeds = Vec::new();
    for host in 0..s.hosts.min(1000) {
        sloppy_link(&mut raw, host, 0, 0);
        let url = normalizer.normalize_str(&raw).expect("seed");
        seeds.push(Link::from(url));
    }
    let mut admit = vec![(String::new(), seeds)];
    loop {
        // Admit the screened links, page by page: the dispatcher's path.
        for (parent, urls) in admit.drain(..) {
            // One shared text for the page's links, as the crawl's acceptance makes it.
            let parent: Option<Arc<str>> = (!parent.is_empty()).then(|| Arc::from(parent));
            let keys: Vec<&[u8]> = urls.iter().map(|u| u.as_str().as_bytes()).collect();
            seen.insert_new_batch(&keys, &mut fresh);
            drop(keys);
            // As the crawl's acceptance does: the links' hosts' records fetched together.
            frontier.prefetch_hosts(&urls);
            for (url, &is_new) in urls.into_iter().zip(&fresh) {
                if is_new && accepted < s.urls {
                    accepted += 1;
                    // As the crawl's acceptance does (`crawl/admission.rs`).
                    let key_len = crawler::frontier::plain_host_key_len(&url);
                    let key = if key_len.is_none() {
                        url.host_key()
                    } else {
                        String::new()
                    };
                    let item = QueuedUrl {
                        url: url.into_string(),
                        depth: 1,
                        parent: parent.clone(),
                        redirect_hops: 0,
                        attempts: 0,
                    };
                    match key_len {
                        Some(len) => frontier.push_keyed_by_prefix(len, item),
                        None => frontier.push(&key, item),
                    }
                    .expect("push");
                }
            }
        }
        if accepted >= s.urls {
            break;
        }
        // "Fetch": hand out pages until IN_FLIGHT are flying, complete the oldest and send
        // their URLs for their links.
        let now = tokio::time::Instant::now();
        while in_flight.len() < IN_FLIGHT {
            match frontier.pop_ready(now).expect("pop") {
                Some(Work::Fetch(d)) => in_flight.push_back(d),
                Some(other) => panic!("unexpected work {other:?}"),
                None => break,
            }
        }
        if ahead < SCREEN_AHEAD && !in_flight.is_empty() {
            let take = in_flight.len().min(SCREEN_BATCH);
            let mut parents = Vec::with_capacity(take);
            for done in in_flight.drain(..take) {
                finished += 1;
                parents.push(done.item.url.clone());
                frontier.complete(done);
            }
            screening.send(parents);
            ahead += 1;
        }
        if ahead == 0 {
            panic!("the frontier ran dry at {accepted} URLs: raise SCALE_FANOUT");
        }
        // Wait for the screening only when there is nothing else to do.
        if let Some(batch) = screening.receive(ahead == SCREEN_AHEAD || in_flight.is_empty()) {
            ahead -= 1;
            links += batch.links;
            admit = batch.pages;
        }
        if finished >= next_look {
            next_look = finished + 4096;
            let at = Instant::now();
            if at >= next_checkpoint {
                ckpt.take(&seen, &mut frontier, accepted, finished);
                next_checkpoint = Instant::now() + s.checkpoint_every;
            }
            if at >= next_report {
                let st = frontier.stats();
                println!(
                    "  {:>6.0}s {accepted:>11} accepted, {finished:>10} popped, {:>11} queued, {:>8} hosts queued, rss {:.0} MiB (frontier est. {:.0} MiB)",
                    started.elapsed().as_secs_f64(),
                    st.queued,
                    st.hosts_queued,
                    peak_rss_mib(),
                    st.memory_bytes as f64 / MIB
                );
                next_report = at + Duration::from_secs(30);
            }
        }
    }
    let crawl_secs = started.elapsed().as_secs_f64();
    let admit_cpu = thread_cpu() - cpu_started;
    let all_cpu = process_cpu() - process_cpu_started;
    let screen_cpu = screening.stop();
    // The last checkpoint, as a clean stop takes it.
    ckpt.take(&seen, &mut frontier, accepted, finished);
    ckpt.wait(&mut frontier);
    let stats = frontier.stats();
    let written = frontier.store_write_stats();
    let (group_hits, group_decodes) = frontier.store_group_reads();
    let queued_at_end = stats.queued + in_flight.len() as u64;
    let peak = peak_rss_mib();
    let mappings = largest_mappings(12);
    drop(frontier);
    drop(seen);
    drop(in_flight);

    // Resume: load and check the checkpoint, reopen the frontier, first URL out.
    let t0 = Instant::now();
    let loaded = checkpoint::load(&s.dir).expect("load checkpoint");
    let t_load = t0.elapsed();
    let mut resumed = Frontier::resume(
        policy(),
        frontier_options(&s.dir),
        &loaded.frontier,
        loaded.hosts,
        loaded.recorded_after,
    )
    .expect("resume frontier");
    let t_reopen = t0.elapsed() - t_load;
    let first = resumed
        .pop_ready(tokio::time::Instant::now())
        .expect("first pop");
    let t_first = t0.elapsed();
    assert!(matches!(first, Some(Work::Fetch(_))), "{first:?}");
    assert_eq!(resumed.queued() + 1, queued_at_end, "resumed queue length");

    let mut pauses = ckpt.pauses_ms.clone();
    let mut writes = ckpt.writes_ms.clone();
    let mut store_parts = ckpt.store_ms.clone();
    let mut tallies_parts = ckpt.tallies_ms.clone();
    let pause_max = pauses.iter().copied().fold(0.0, f64::max);
    let over_100 = pauses.iter().filter(|&&p| p > 100.0).count();
    let first_pause = pauses.first().copied().unwrap_or(0.0);
    let write_max = writes.iter().copied().fold(0.0, f64::max);
    println!("result: {} URLs, {} hosts", s.urls, s.hosts);
    println!(
        "  accepted {accepted} in {crawl_secs:.1} s = {:.0} URLs/s; popped {finished} = {:.0} pops/s; links normalized {links} = {:.0}/s",
        accepted as f64 / crawl_secs,
        finished as f64 / crawl_secs,
        links as f64 / crawl_secs
    );
    println!(
        "  CPU per accepted URL: admitting thread {:.2} µs{}; all threads {:.2} µs",
        admit_cpu.as_secs_f64() * 1e6 / accepted.max(1) as f64,
        screen_cpu.map_or(" (screening inline)".to_string(), |cpu| format!(
            ", screening thread {:.2} µs",
            cpu.as_secs_f64() * 1e6 / accepted.max(1) as f64
        )),
        all_cpu.as_secs_f64() * 1e6 / accepted.max(1) as f64
    );
    println!(
        "  peak RSS {peak:.0} MiB (seen-set {:.0} MiB); frontier estimate at end {:.0} MiB; {} hosts, {} with URLs queued, {queued_at_end} URLs queued at end",
        plan.bytes as f64 / MIB,
        stats.memory_bytes as f64 / MIB,
        stats.hosts,
        stats.hosts_queued
    );
    println!(
        "  resident at end, largest mappings (MiB): {}",
        mappings
            .iter()
            .map(|(mib, name)| format!("{mib:.0} {name}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  disk: max {:.0} MiB at a checkpoint, {:.0} MiB at end ({:.0} bytes per queued URL)",
        ckpt.max_disk as f64 / MIB,
        disk_bytes(&s.dir) as f64 / MIB,
        disk_bytes(&s.dir.join("frontier")) as f64 / queued_at_end.max(1) as f64
    );
    let frontier_dir = s.dir.join("frontier").join("queues");
    let (mut segment_bytes, mut table_bytes) = (0u64, 0u64);
    for entry in std::fs::read_dir(&frontier_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let len = entry.metadata().map_or(0, |m| m.len());
        if entry.file_name().to_string_lossy().starts_with("table-") {
            table_bytes += len;
        } else {
            segment_bytes += len;
        }
    }
    let per_queued = |b: u64| b as f64 / queued_at_end.max(1) as f64;
    let per_written = |b: u64| b as f64 / written.items.max(1) as f64;
    let written_per_url =
        per_written(written.header_bytes + written.entry_bytes + written.body_bytes);
    println!(
        "  disk per queued URL by file: segments {:.1} B (of which ~{:.1} B popped URLs' space not reclaimed yet, at {written_per_url:.1} B per URL written), tables {:.1} B",
        per_queued(segment_bytes),
        (per_queued(segment_bytes) - written_per_url).max(0.0),
        per_queued(table_bytes),
    );
    println!(
        "  log written: {} URLs in {} entries ({:.2} URLs each) in {} groups; per URL {:.1} B = group headers and padding {:.1} + host ids and links {:.1} + bodies {:.1} (raw {:.1}, LZ4 x{:.2})",
        written.items,
        written.entries,
        written.items as f64 / written.entries.max(1) as f64,
        written.groups,
        per_written(written.header_bytes + written.entry_bytes + written.body_bytes),
        per_written(written.header_bytes),
        per_written(written.entry_bytes),
        per_written(written.body_bytes),
        per_written(written.raw_bytes),
        written.raw_bytes as f64 / written.body_bytes.max(1) as f64,
    );
    println!(
        "  links written into blocks already in their file under memory pressure: {} in {} writes ({:.1} per write, {:.3} writes per accepted URL)",
        written.patches,
        written.patch_writes,
        written.patches as f64 / written.patch_writes.max(1) as f64,
        written.patch_writes as f64 / accepted.max(1) as f64,
    );
    println!(
        "  entry reads: {} from a group kept decoded, {group_decodes} decoded a group ({:.0} % kept)",
        group_hits,
        100.0 * group_hits as f64 / (group_hits + group_decodes).max(1) as f64
    );
    println!(
        "  checkpoints: {}; pause median {:.1} ms, max {:.1} ms (medians: queue store {:.1} ms, host tallies {:.1} ms); background write median {:.0} ms, max {:.0} ms",
        pauses.len(),
        median(&mut pauses),
        pause_max,
        median(&mut store_parts),
        median(&mut tallies_parts),
        median(&mut writes),
        write_max
    );
    let p90 = {
        let mut sorted = pauses.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        sorted
            .get((sorted.len() * 9 / 10).min(sorted.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "  pauses: first {first_pause:.1} ms, 90th percentile {p90:.1} ms, {over_100} of {} over 100 ms",
        pauses.len()
    );
    println!(
        "  resume: checkpoint load {:.0} ms + frontier reopen {:.0} ms + first pop = {:.0} ms to the first URL",
        t_load.as_secs_f64() * 1e3,
        t_reopen.as_secs_f64() * 1e3,
        t_first.as_secs_f64() * 1e3
    );
    drop(resumed);
    let _ = std::fs::remove_dir_all(&s.dir);
}
