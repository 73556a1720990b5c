//! The frontier: every accepted URL that is not yet fetched, organised so that fetches
//! are polite and fair, with its bulk on disk so that memory does not grow with the crawl.
//!
//! # Scheduling
//!
//! URLs wait in per-host FIFO queues (a host is scheme + host + port, see
//! [`crate::normalize::host_key`]; inside the frontier a host is known by [`host_id`], the
//! XXH3-64 of that key). Hosts, not URLs, are scheduled: a min-heap orders the hosts that
//! have work by the instant each may next be fetched, so one host with a million queued URLs
//! never starves a host with ten, and a host that must wait costs nothing until its time
//! comes. Each host has a governor GCRA rate limiter (`per_host_rps`, `per_host_burst`) and
//! an in-flight cap (`per_host_concurrency`); a host whose cap is reached leaves the heap and
//! comes back when a fetch completes. Retries and `Retry-After` push a host's next time
//! forward instead of sleeping inside a fetch task, so a retry is a request like any other:
//! rate-limited and counted.
//!
//! # Memory: what stays, what goes to disk
//!
//! - Queued URLs live in a [`store::QueueStore`] under `OUT/frontier/queues/`: append-only
//!   segment files of per-host blocks, with only `[frontier] memory` of URLs in memory (each
//!   busy host's newest URLs before they fill a block, and the block being served). The store's
//!   module doc says why this layout and not an embedded B-tree or a file per host, with figures.
//! - Per-host *state* (the rate limiter, the politeness schedule, the parsed robots.txt rules)
//!   is kept only for hosts being served, within `[frontier] host_memory`. A host that is idle
//!   (nothing in flight, its rate limiter full again, no robots.txt fetch or backoff pending) is
//!   evicted, least recently served first, when the budget is exceeded; its robots.txt body is
//!   already in a disk cache ([`robots_cache::RobotsCache`], `OUT/frontier/robots/`), written
//!   when it was fetched, so restoring the host when its turn comes costs one read and one
//!   parse, not a request. A fresh limiter is exactly an idle one (GCRA state is "full" after
//!   `burst × period` without requests), so nothing of politeness is lost by the eviction.
//! - What stays in memory for every host ever seen is 8 bytes of tally (URLs ever queued, for
//!   `max_pages_per_host` and the trap report, and whether the host is in the heap) plus a heap
//!   entry while it has work: ~20–40 bytes per host with the hash map's slack, and the store's
//!   ~50–110 bytes per host with something queued.
//!
//! A host's key is not kept for an evicted host: when it comes back, the key is taken from its
//! first queued URL. Two host keys with the same 64-bit hash would share a queue and a
//! schedule (at 1e6 hosts the chance of any such pair is about 3e-8); nothing else would go
//! wrong.
//!
//! # Checkpoints
//!
//! The frontier is owned by one task (the crawl's dispatcher) and is not shared: no lock is
//! needed, and its state at any instant is one consistent value. [`Frontier::begin_checkpoint`]
//! is the pause: the store writes its tails and encodes its table (the in-flight URLs recorded
//! at the front of their hosts' queues), and the per-host tallies are copied. The returned
//! [`FrontierSnapshot`] is written by another thread (store fsyncs and table, `hosts.bin`);
//! [`Frontier::finish_checkpoint`] then lets the store reclaim what the previous checkpoints no
//! longer need. [`Frontier::resume`] reopens the store exactly at a checkpoint's position
//! (URLs pushed after it come back from the crawl's queue log, not from the store) and drops,
//! when they reach the head of their queue, the URLs that were recorded after the checkpoint.
//!
//! # Measured
//!
//! `SCALE_URLS=N cargo bench --bench scale` (benches/scale.rs: synthetic links through the
//! normalizer, the seen-set and this frontier, 1e6 hosts, 30 % of links to a random host,
//! a checkpoint every 20 s, politeness off; one run each on the 2-core machine, otherwise idle):
//!
//! | URLs | URLs/s | peak RSS | disk | pause median / max | background write | resume to 1st URL |
//! |---|---|---|---|---|---|---|
//! | 1e7 | 134 k | 580 MiB | 1.7 GiB | 82 / 90 ms (4) | 1.1 s | 1.0 s |
//! | 3e7 | 156 k | 597 MiB | 4.8 GiB | 53 / 76 ms (10) | 1.2 s | 0.64 s |
//! | 1e8 | 125 k | 734 MiB | 15.8 GiB | 58 / 113 ms (40) | 1.9 s | 0.69 s |
//!
//! Memory follows the hosts (1e6 here) and the budgets, not the URLs: from 3e7 to 1e8 peak
//! RSS grew by 137 MiB, of which the seen-set's growth is 131 MiB. The pause is the store's
//! table (~40 bytes per host with something queued, 45–50 ms at 1e6 hosts) plus the tallies'
//! copy (8–11 ms); it grows with hosts, not URLs. Disk is ~185 bytes per queued URL.
//!
//! `hosts.bin` (little-endian): magic `CRWLHOST`, `u32` version 1, `u32` zero, `u64` host
//! count `H`, `u64` done count `D`, `H` × (`u64` host id, `u32` URLs ever queued), `D` × `u64`
//! XXH3-64 of a URL recorded but still in the store, then the XXH3-64 of every byte before it.

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use xxhash_rust::xxh3::xxh3_64;

use crate::config::{FrontierSection, PolitenessSection};
use crate::robots::{unavailable_backoff, RobotsOutcome, RobotsRules, MAX_UNAVAILABLE_ATTEMPTS};

pub mod robots_cache;
pub mod store;

use robots_cache::{CachedRobots, RobotsCache, RobotsCacheError, RobotsCacheOptions};
use store::{PendingSync, QueueStore, StoreError, StoreOptions, StorePosition};

/// One accepted URL waiting to be fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedUrl {
    /// The canonical URL.
    pub url: String,
    /// Links followed from a seed (seeds are 0; redirects keep their source's depth).
    pub depth: u32,
    /// The page the URL was found on (or that redirected to it); `None` for seeds.
    pub parent: Option<String>,
    /// Redirects followed to reach this URL.
    pub redirect_hops: u32,
    /// Fetch attempts already made (retries).
    pub attempts: u32,
}

impl QueuedUrl {
    pub fn seed(url: String) -> Self {
        QueuedUrl {
            url,
            depth: 0,
            parent: None,
            redirect_hops: 0,
            attempts: 0,
        }
    }
}

/// A host as the frontier knows it: the XXH3-64 of its key (see [`host_id`]).
pub type HostId = u64;

/// The id of the host whose key (`scheme://host[:port]`) is `key`.
pub fn host_id(key: &str) -> HostId {
    xxh3_64(key.as_bytes())
}

/// The hash by which a URL recorded after a checkpoint is recognised when it is popped.
pub fn url_hash(url: &str) -> u64 {
    xxh3_64(url.as_bytes())
}

/// A URL handed out for fetching. Give it back with [`Frontier::complete`] or
/// [`Frontier::retry`].
#[derive(Debug)]
pub struct Dispatch {
    pub host: HostId,
    pub item: QueuedUrl,
}

/// What the frontier hands out next.
#[derive(Debug)]
pub enum Work {
    /// Fetch this URL.
    Fetch(Dispatch),
    /// Fetch this host's robots.txt, then report with [`Frontier::robots_done`].
    Robots { host: HostId, key: String },
    /// This URL is disallowed by robots.txt: record it, do not fetch it. It is no
    /// longer queued and not in flight.
    Disallowed(QueuedUrl),
}

/// Why the frontier could not go on. Each names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum FrontierError {
    #[error("frontier queues: {0}")]
    Store(#[from] StoreError),
    #[error("robots.txt cache: {0}")]
    RobotsCache(#[from] RobotsCacheError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is corrupt: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FrontierError + '_ {
    move |source| FrontierError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a host stands with its robots.txt.
#[derive(Debug, Clone)]
enum RobotsState {
    /// robots.txt is not consulted (`respect_robots = false`).
    NotNeeded,
    /// Not fetched yet (or its cache entry expired).
    Unknown,
    /// A fetch is in flight; the host's pages wait.
    Fetching,
    /// Rules in force until `expires`.
    Ready {
        rules: Arc<RobotsRules>,
        expires: Instant,
    },
    /// Unreachable: nothing is fetched before `retry_at`.
    Unavailable { retry_at: Instant },
}

type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    DefaultClock,
    governor::middleware::NoOpMiddleware<<DefaultClock as Clock>::Instant>,
>;

/// The state of a host being served (resident); see the module doc for eviction.
struct HostState {
    key: String,
    in_flight: u32,
    /// Not before this instant (retry backoff, Retry-After, crawl-delay).
    not_before: Instant,
    limiter: Option<Limiter>,
    /// Period of `limiter` times its burst: idle that long, the limiter is as good as new.
    limiter_refill: Duration,
    /// When the limiter last gave a token.
    last_request: Option<Instant>,
    robots: RobotsState,
    /// Consecutive failed robots.txt fetches.
    robots_failures: u32,
    /// The LRU tick of the last time the host was served.
    touched: u64,
    /// Estimated bytes this state holds (struct, key, parsed rules).
    bytes: u64,
}

/// A copy of the tallies for a checkpoint: (host, URLs ever queued).
type TallyBuffer = Vec<(HostId, u32)>;

/// What is kept for every host ever seen.
#[derive(Debug, Clone, Copy, Default)]
struct HostTally {
    /// URLs ever queued for this host (saturating).
    queued_ever: u32,
    /// Whether the host has an entry in the ready heap.
    scheduled: bool,
}

/// The frontier's politeness settings.
#[derive(Debug, Clone)]
pub struct FrontierPolicy {
    /// `None` disables the rate limit (benchmarks, `politeness.enabled = false`).
    pub quota: Option<Quota>,
    /// The configured interval between requests to one host (zero when disabled).
    pub period: Duration,
    /// Requests a host may receive at once after being idle.
    pub burst: u32,
    pub per_host_concurrency: u32,
    /// Consult robots.txt before a host's first page.
    pub respect_robots: bool,
    /// How long robots.txt rules are kept.
    pub robots_ttl: Duration,
}

impl FrontierPolicy {
    pub fn from_config(p: &PolitenessSection) -> Self {
        let robots_ttl = Duration::from_secs_f64(p.robots_ttl_secs);
        if !p.enabled {
            return FrontierPolicy {
                quota: None,
                period: Duration::ZERO,
                burst: 1,
                per_host_concurrency: u32::MAX,
                respect_robots: p.respect_robots,
                robots_ttl,
            };
        }
        let period = Duration::from_secs_f64(1.0 / p.per_host_rps);
        let burst = NonZeroU32::new(p.per_host_burst).unwrap_or(NonZeroU32::MIN);
        FrontierPolicy {
            quota: Quota::with_period(period).map(|q| q.allow_burst(burst)),
            period,
            burst: burst.get(),
            per_host_concurrency: p.per_host_concurrency.max(1),
            respect_robots: p.respect_robots,
            robots_ttl,
        }
    }
}

/// Where the frontier keeps its files and how much memory it may use.
#[derive(Debug, Clone)]
pub struct FrontierOptions {
    /// `OUT/frontier`: `queues/` (the store) and `robots/` (the robots.txt cache).
    pub dir: PathBuf,
    /// Memory for queued URLs (the store's budget).
    pub queue_memory: u64,
    /// Memory for the state of resident hosts.
    pub host_memory: u64,
    /// The robots.txt product token, to parse cached bodies again.
    pub robots_agent: String,
}

impl FrontierOptions {
    /// The options of a crawl writing to `out`.
    pub fn from_config(section: &FrontierSection, out: &Path, user_agent: &str) -> Self {
        FrontierOptions {
            dir: out.join("frontier"),
            queue_memory: section.memory.0,
            host_memory: section.host_memory.0,
            robots_agent: crate::robots::agent_token(user_agent),
        }
    }

    fn store_options(&self) -> StoreOptions {
        StoreOptions {
            memory: self.queue_memory,
            ..StoreOptions::default()
        }
    }

    fn queues_dir(&self) -> PathBuf {
        self.dir.join("queues")
    }

    fn robots_dir(&self) -> PathBuf {
        self.dir.join("robots")
    }
}

/// Figures for progress lines, summaries and benchmarks.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FrontierStats {
    pub queued: u64,
    pub in_flight: u64,
    /// Hosts ever seen.
    pub hosts: u64,
    /// Hosts with something queued.
    pub hosts_queued: u64,
    /// Hosts whose state is in memory, and its estimated bytes.
    pub resident_hosts: u64,
    pub resident_bytes: u64,
    pub evictions: u64,
    pub restores: u64,
    /// Estimated bytes of the store (URLs in memory and its host map), the tallies and the heap.
    pub memory_bytes: u64,
    pub disk_bytes: u64,
}

/// How many hosts [`Frontier::top_hosts`] can report.
const TOP_HOSTS: usize = 20;
/// Estimated bytes of a resident host beyond its key and rules: the struct, the limiter, the
/// map entry and its LRU entries.
const HOST_STATE_BYTES: u64 = 256;
/// How often to look for idle hosts while the resident state is over budget and no host is
/// being restored (a restore looks at once).
const EVICTION_RETRY: Duration = Duration::from_millis(10);
/// Parsed robots.txt rules are estimated at this many times their body.
const RULES_PER_BODY_BYTE: u64 = 3;

/// Per-host queues on disk and the schedule of hosts.
pub struct Frontier {
    policy: FrontierPolicy,
    options: FrontierOptions,
    clock: DefaultClock,
    store: QueueStore,
    /// `None` when robots.txt is not consulted.
    robots_cache: Option<RobotsCache>,
    resident: HashMap<HostId, HostState>,
    resident_bytes: u64,
    /// Least recently served first: (tick, host); an entry whose tick is not the host's
    /// `touched` is stale and skipped.
    lru: VecDeque<(u64, HostId)>,
    tick: u64,
    tallies: HashMap<HostId, HostTally>,
    /// Hosts with the most URLs ever queued: (id, key, count), largest first.
    top: Vec<(HostId, String, u64)>,
    /// Min-heap of (ready instant, tie-break sequence, host).
    ready: BinaryHeap<std::cmp::Reverse<(Instant, u64, HostId)>>,
    sequence: u64,
    in_flight: u64,
    /// URLs recorded after the checkpoint this frontier resumed from that are still queued in
    /// the store: dropped, not fetched, when they reach the head of their queue.
    already_done: HashSet<u64>,
    evictions: u64,
    restores: u64,
    /// When to look for idle hosts again while over budget.
    next_eviction: Instant,
    /// Buffers for the tallies' copy, handed back by [`FrontierSnapshot::write`].
    tally_buffers: (
        std::sync::mpsc::Sender<TallyBuffer>,
        std::sync::mpsc::Receiver<TallyBuffer>,
    ),
}

/// The part of a checkpoint that the frontier writes, taken by [`Frontier::begin_checkpoint`].
pub struct FrontierSnapshot {
    /// How long the store's part of the pause took (tails written, table encoded), and
    /// the copy of the host tallies.
    pub store_pause: Duration,
    pub tallies_pause: Duration,
    pending: PendingSync,
    tallies: Vec<(HostId, u32)>,
    /// Where the tallies' buffer goes back once written, for the next checkpoint to fill
    /// without faulting in fresh pages (~16 bytes per host).
    recycle: std::sync::mpsc::Sender<TallyBuffer>,
    done: Vec<u64>,
    queued: u64,
}

/// What a checkpoint's manifest records of the frontier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedFrontier {
    /// The store's position (`OUT/frontier/queues/`).
    pub store: StorePosition,
    /// URLs queued or in flight at the checkpoint.
    pub queued: u64,
    /// Hosts in `hosts.bin`, its length and checksum.
    pub hosts: u64,
    pub hosts_bytes: u64,
    pub hosts_xxh3: u64,
}

/// `hosts.bin` read back and checked.
#[derive(Debug, Default)]
pub struct SavedHosts {
    tallies: Vec<(HostId, u32)>,
    done: Vec<u64>,
}

const HOSTS_MAGIC: [u8; 8] = *b"CRWLHOST";
const HOSTS_VERSION: u32 = 1;
const HOSTS_FILE: &str = "hosts.bin";

impl FrontierSnapshot {
    /// Writes the frontier's part of a checkpoint into `dir` (a checkpoint's directory):
    /// makes the store's state durable and writes `hosts.bin`, fsynced.
    pub fn write(self, dir: &Path) -> Result<SavedFrontier, FrontierError> {
        let position = self.pending.write()?;
        let mut bytes = Vec::with_capacity(40 + self.tallies.len() * 12 + self.done.len() * 8);
        bytes.extend_from_slice(&HOSTS_MAGIC);
        bytes.extend_from_slice(&HOSTS_VERSION.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&(self.tallies.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&(self.done.len() as u64).to_le_bytes());
        for &(host, count) in &self.tallies {
            bytes.extend_from_slice(&host.to_le_bytes());
            bytes.extend_from_slice(&count.to_le_bytes());
        }
        for &hash in &self.done {
            bytes.extend_from_slice(&hash.to_le_bytes());
        }
        let checksum = xxh3_64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        let hosts = self.tallies.len() as u64;
        let mut tallies = self.tallies;
        tallies.clear();
        let _ = self.recycle.send(tallies);
        let path = dir.join(HOSTS_FILE);
        {
            use std::io::Write;
            let mut file = std::fs::File::create(&path).map_err(io(&path))?;
            file.write_all(&bytes).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        Ok(SavedFrontier {
            store: position,
            queued: self.queued,
            hosts,
            hosts_bytes: bytes.len() as u64,
            hosts_xxh3: checksum,
        })
    }
}

impl SavedFrontier {
    /// Reads and checks `hosts.bin` of the checkpoint in `dir`, and checks that the store
    /// still has this position's table, whole: nothing is used unless all of it is sound.
    pub fn check(&self, dir: &Path, frontier_dir: &Path) -> Result<SavedHosts, FrontierError> {
        let path = dir.join(HOSTS_FILE);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let corrupt = |what: String| FrontierError::Corrupt {
            path: path.clone(),
            what,
        };
        if bytes.len() as u64 != self.hosts_bytes {
            return Err(corrupt(format!(
                "{} bytes, the manifest says {} (truncated or overwritten)",
                bytes.len(),
                self.hosts_bytes
            )));
        }
        let (body, trailer) = bytes.split_at(bytes.len().saturating_sub(8));
        let stored = u64::from_le_bytes(trailer.try_into().unwrap_or([0; 8]));
        if bytes.len() < 40 || xxh3_64(body) != stored || stored != self.hosts_xxh3 {
            return Err(corrupt("checksum mismatch; the file was damaged".into()));
        }
        if body[..8] != HOSTS_MAGIC {
            return Err(corrupt("not a hosts file (bad magic)".into()));
        }
        let word = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().unwrap_or([0; 8]));
        let version = u32::from_le_bytes(body[8..12].try_into().unwrap_or([0; 4]));
        if version != HOSTS_VERSION {
            return Err(corrupt(format!(
                "format version {version}, this crawler reads {HOSTS_VERSION}"
            )));
        }
        let (hosts, done) = (word(16), word(24));
        let expected = 32u64
            .checked_add(hosts.saturating_mul(12))
            .and_then(|n| n.checked_add(done.saturating_mul(8)));
        if expected != Some(body.len() as u64) || hosts != self.hosts {
            return Err(corrupt(format!(
                "{hosts} hosts and {done} done URLs do not fit its {} bytes (manifest: {} hosts)",
                body.len(),
                self.hosts
            )));
        }
        let mut saved = SavedHosts {
            tallies: Vec::with_capacity(hosts as usize),
            done: Vec::with_capacity(done as usize),
        };
        let mut at = 32;
        for _ in 0..hosts {
            let count = u32::from_le_bytes(body[at + 8..at + 12].try_into().unwrap_or([0; 4]));
            saved.tallies.push((word(at), count));
            at += 12;
        }
        for _ in 0..done {
            saved.done.push(word(at));
            at += 8;
        }
        QueueStore::check_position(&frontier_dir.join("queues"), self.store)?;
        Ok(saved)
    }
}

impl Frontier {
    /// A new, empty frontier in `options.dir` (anything there before is removed).
    pub fn create(policy: FrontierPolicy, options: FrontierOptions) -> Result<Self, FrontierError> {
        match std::fs::remove_dir_all(&options.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&options.dir)(e)),
        }
        let store = QueueStore::open(&options.queues_dir(), options.store_options())?;
        Self::with_store(policy, options, store)
    }

    /// The frontier as of a checkpoint: the store reopened exactly at its position (what was
    /// pushed after it is the caller's to push again, from its queue log), the host tallies
    /// and URLs still to drop from `hosts`, and `recorded_since`: hashes of URLs recorded
    /// after the checkpoint, dropped when they reach the head of their queue.
    pub fn resume(
        policy: FrontierPolicy,
        options: FrontierOptions,
        saved: &SavedFrontier,
        hosts: SavedHosts,
        recorded_since: impl IntoIterator<Item = u64>,
    ) -> Result<Self, FrontierError> {
        let store = QueueStore::reopen_discarding_after(
            &options.queues_dir(),
            options.store_options(),
            saved.store,
        )?;
        let mut frontier = Self::with_store(policy, options, store)?;
        frontier.tallies.reserve(hosts.tallies.len());
        for (host, count) in hosts.tallies {
            frontier.tallies.insert(
                host,
                HostTally {
                    queued_ever: count,
                    scheduled: false,
                },
            );
        }
        frontier.already_done.extend(hosts.done);
        frontier.already_done.extend(recorded_since);
        let now = Instant::now();
        let waiting: Vec<HostId> = frontier.store.hosts().map(|(host, _)| host).collect();
        for host in waiting {
            frontier.push_ready(host, now);
        }
        Ok(frontier)
    }

    fn with_store(
        policy: FrontierPolicy,
        options: FrontierOptions,
        store: QueueStore,
    ) -> Result<Self, FrontierError> {
        let robots_cache = if policy.respect_robots {
            Some(RobotsCache::open(
                &options.robots_dir(),
                RobotsCacheOptions::default(),
            )?)
        } else {
            None
        };
        Ok(Frontier {
            policy,
            options,
            clock: DefaultClock::default(),
            store,
            robots_cache,
            resident: HashMap::new(),
            resident_bytes: 0,
            lru: VecDeque::new(),
            tick: 0,
            tallies: HashMap::new(),
            top: Vec::new(),
            ready: BinaryHeap::new(),
            sequence: 0,
            in_flight: 0,
            already_done: HashSet::new(),
            evictions: 0,
            restores: 0,
            next_eviction: Instant::now(),
            tally_buffers: std::sync::mpsc::channel(),
        })
    }

    /// Queues an accepted URL at the back of its host's queue.
    pub fn push(&mut self, host_key: &str, item: QueuedUrl) -> Result<(), FrontierError> {
        let id = host_id(host_key);
        self.store.push(id, &item)?;
        let tally = self.tallies.entry(id).or_default();
        tally.queued_ever = tally.queued_ever.saturating_add(1);
        let count = tally.queued_ever as u64;
        self.note_top(id, host_key, count);
        self.schedule(id, Instant::now());
        Ok(())
    }

    /// Puts a URL that was handed out back at the front of its host's queue, to be tried
    /// again no sooner than `delay` from now. The host as a whole waits that long too:
    /// a 429 or 503 is about the host, not the URL.
    pub fn retry(&mut self, dispatch: Dispatch, delay: Duration) {
        let Dispatch { host: id, mut item } = dispatch;
        item.attempts += 1;
        let now = Instant::now();
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(host) = self.resident.get_mut(&id) {
            host.in_flight = host.in_flight.saturating_sub(1);
            host.not_before = host.not_before.max(now + delay);
        }
        self.store.push_front(id, item);
        self.schedule(id, now);
    }

    /// Marks a handed-out URL as done (fetched, failed or refused).
    pub fn complete(&mut self, host: HostId) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(state) = self.resident.get_mut(&host) {
            state.in_flight = state.in_flight.saturating_sub(1);
        }
        self.schedule(host, Instant::now());
    }

    /// Asks a host to wait until `until` before its next request (crawl-delay,
    /// Retry-After on a response that is not retried).
    pub fn defer_host(&mut self, host: HostId, until: Instant) {
        if let Some(state) = self.resident.get_mut(&host) {
            state.not_before = state.not_before.max(until);
        }
    }

    /// Hands out the next piece of work whose host may be served at `now`, if any.
    pub fn pop_ready(&mut self, now: Instant) -> Result<Option<Work>, FrontierError> {
        if self.resident_bytes > self.options.host_memory && now >= self.next_eviction {
            // Over budget with no host restored lately: hosts that were busy may be idle now.
            self.evict_idle(now, None);
            self.next_eviction = now + EVICTION_RETRY;
        }
        while let Some(std::cmp::Reverse((at, _, id))) = self.ready.peek().copied() {
            if at > now {
                return Ok(None);
            }
            self.ready.pop();
            if let Some(tally) = self.tallies.get_mut(&id) {
                tally.scheduled = false;
            }
            if !self.already_done.is_empty() {
                self.drop_already_done(id)?;
            }
            if self.store.len(id) == 0 {
                continue;
            }
            self.make_resident(id, now)?;
            let Some(host) = self.resident.get_mut(&id) else {
                continue;
            };
            if host.in_flight >= self.policy.per_host_concurrency {
                continue;
            }
            if host.not_before > now {
                let at = host.not_before;
                self.push_ready(id, at);
                continue;
            }
            let fetch_robots = match &host.robots {
                RobotsState::NotNeeded => false,
                RobotsState::Fetching => continue,
                RobotsState::Unavailable { retry_at } if *retry_at > now => {
                    let at = *retry_at;
                    self.push_ready(id, at);
                    continue;
                }
                RobotsState::Ready { rules, expires } if *expires > now => {
                    let rules = rules.clone();
                    let allowed = self
                        .store
                        .peek(id)?
                        .is_none_or(|front| rules.allows(&front.url));
                    if !allowed {
                        // Refused without a request, so without spending a rate token.
                        let Some(item) = self.store.pop(id)? else {
                            continue;
                        };
                        self.schedule(id, now);
                        return Ok(Some(Work::Disallowed(item)));
                    }
                    false
                }
                _ => true,
            };
            let Some(host) = self.resident.get_mut(&id) else {
                continue;
            };
            if let Some(limiter) = &host.limiter {
                if let Err(not_until) = limiter.check() {
                    let wait = not_until.wait_time_from(self.clock.now());
                    self.push_ready(id, now + wait);
                    continue;
                }
                host.last_request = Some(now);
            }
            if fetch_robots {
                host.robots = RobotsState::Fetching;
                host.in_flight += 1;
                self.in_flight += 1;
                let key = host.key.clone();
                return Ok(Some(Work::Robots { host: id, key }));
            }
            let Some(item) = self.store.pop(id)? else {
                continue;
            };
            host.in_flight += 1;
            self.in_flight += 1;
            self.schedule(id, now);
            return Ok(Some(Work::Fetch(Dispatch { host: id, item })));
        }
        Ok(None)
    }

    /// Drops, from the head of `id`'s queue, URLs recorded after the checkpoint resumed from.
    fn drop_already_done(&mut self, id: HostId) -> Result<(), FrontierError> {
        while let Some(front) = self.store.peek(id)? {
            if !self.already_done.remove(&url_hash(&front.url)) {
                break;
            }
            self.store.pop(id)?;
        }
        Ok(())
    }

    /// Records the result of a robots.txt fetch handed out as [`Work::Robots`]. When the
    /// host's robots.txt has been unreachable too many times, its queued URLs are given
    /// up and returned, so that the caller records them.
    pub fn robots_done(
        &mut self,
        id: HostId,
        outcome: RobotsOutcome,
    ) -> Result<Vec<QueuedUrl>, FrontierError> {
        let now = Instant::now();
        self.in_flight = self.in_flight.saturating_sub(1);
        let policy_period = self.policy.period;
        let clock = self.clock.clone();
        let Some(host) = self.resident.get_mut(&id) else {
            return Ok(Vec::new());
        };
        host.in_flight = host.in_flight.saturating_sub(1);
        let mut given_up = Vec::new();
        match outcome {
            RobotsOutcome::Rules { rules, body } => {
                host.robots_failures = 0;
                apply_crawl_delay(host, &rules, policy_period, clock);
                let body_len = body.as_ref().map_or(0, |b| b.len() as u64);
                let old = host.bytes;
                host.bytes = state_bytes(&host.key, body_len);
                let expires = now + self.policy.robots_ttl;
                host.robots = RobotsState::Ready { rules, expires };
                self.resident_bytes = self.resident_bytes - old + host.bytes;
                if let Some(cache) = self.robots_cache.as_mut() {
                    let entry = match body {
                        Some(body) => CachedRobots::Body(body),
                        None => CachedRobots::AllowAll,
                    };
                    let expires_ms = unix_ms(SystemTime::now() + self.policy.robots_ttl);
                    cache.put(id, expires_ms, &entry)?;
                }
            }
            RobotsOutcome::Unavailable { .. } => {
                host.robots_failures += 1;
                host.robots = RobotsState::Unavailable {
                    retry_at: now + unavailable_backoff(host.robots_failures),
                };
                if host.robots_failures >= MAX_UNAVAILABLE_ATTEMPTS {
                    while let Some(item) = self.store.pop(id)? {
                        given_up.push(item);
                    }
                }
            }
        }
        self.schedule(id, now);
        Ok(given_up)
    }

    /// When the earliest scheduled host becomes ready, if any host is scheduled.
    pub fn next_ready_at(&self) -> Option<Instant> {
        self.ready.peek().map(|std::cmp::Reverse((at, _, _))| *at)
    }

    /// URLs waiting (not in flight).
    pub fn queued(&self) -> u64 {
        self.store.total()
    }

    /// URLs handed out and not yet completed.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Nothing queued and nothing in flight: the crawl is over.
    pub fn is_finished(&self) -> bool {
        self.store.total() == 0 && self.in_flight == 0
    }

    /// Hosts known to the frontier.
    pub fn host_count(&self) -> usize {
        self.tallies.len()
    }

    /// URLs ever queued for a host (0 for a host not seen yet).
    pub fn host_total_queued(&self, key: &str) -> u64 {
        self.tallies
            .get(&host_id(key))
            .map_or(0, |t| t.queued_ever as u64)
    }

    /// The key of a host whose state is in memory (one in flight always is).
    pub fn host_key(&self, host: HostId) -> Option<&str> {
        self.resident.get(&host).map(|h| h.key.as_str())
    }

    /// Hosts with the most URLs ever queued, largest first (at most 20): where a trap would
    /// show. Each with the URLs ever queued and queued now.
    pub fn top_hosts(&self, count: usize) -> Vec<(String, u64, usize)> {
        self.top
            .iter()
            .take(count)
            .map(|(id, key, total)| (key.clone(), *total, self.store.len(*id) as usize))
            .collect()
    }

    /// The host with the most URLs queued right now (a growing trap shows here first),
    /// with its count and how many it has had in all. Looks at every host with something
    /// queued: call it for a progress line, not per URL.
    pub fn busiest_host(&mut self) -> Option<(String, usize, u64)> {
        let (id, len) = self.store.hosts().max_by_key(|&(_, len)| len)?;
        let key = match self.resident.get(&id) {
            Some(state) => state.key.clone(),
            None => match self.store.peek(id) {
                Ok(Some(front)) => key_of(&front.url),
                _ => return None,
            },
        };
        let total = self.tallies.get(&id).map_or(0, |t| t.queued_ever as u64);
        Some((key, len as usize, total))
    }

    /// Figures for progress and benchmarks.
    pub fn stats(&self) -> FrontierStats {
        let tally_entry = std::mem::size_of::<(HostId, HostTally)>() as u64 + 1;
        let heap_entry = std::mem::size_of::<(Instant, u64, HostId)>() as u64;
        FrontierStats {
            queued: self.store.total(),
            in_flight: self.in_flight,
            hosts: self.tallies.len() as u64,
            hosts_queued: self.store.host_count() as u64,
            resident_hosts: self.resident.len() as u64,
            resident_bytes: self.resident_bytes,
            evictions: self.evictions,
            restores: self.restores,
            memory_bytes: self.store.memory_bytes()
                + self.tallies.capacity() as u64 * tally_entry
                + self.ready.capacity() as u64 * heap_entry
                + self.resident_bytes
                + self.robots_cache.as_ref().map_or(0, |c| c.memory_bytes()),
            disk_bytes: self.store.disk_bytes()
                + self.robots_cache.as_ref().map_or(0, |c| c.disk_bytes()),
        }
    }

    /// The pause of a checkpoint: the store writes its tails and encodes its table, with
    /// `in_flight` (URLs handed out and not completed, by host) at the front of their
    /// queues; the tallies are copied. Write the result with [`FrontierSnapshot::write`]
    /// on any thread, then call [`Frontier::finish_checkpoint`].
    pub fn begin_checkpoint(
        &mut self,
        in_flight: &[(HostId, QueuedUrl)],
    ) -> Result<FrontierSnapshot, FrontierError> {
        let started = std::time::Instant::now();
        let pending = self.store.begin_sync_with(in_flight)?;
        let store_pause = started.elapsed();
        let mut tallies = self.tally_buffers.1.try_recv().unwrap_or_default();
        tallies.clear();
        tallies.extend(self.tallies.iter().map(|(&id, t)| (id, t.queued_ever)));
        let tallies_pause = started.elapsed() - store_pause;
        Ok(FrontierSnapshot {
            store_pause,
            tallies_pause,
            pending,
            tallies,
            recycle: self.tally_buffers.0.clone(),
            done: self.already_done.iter().copied().collect(),
            queued: self.store.total() + in_flight.len() as u64,
        })
    }

    /// After the checkpoint holding `saved` is published: the store may reclaim what only
    /// older checkpoints needed.
    pub fn finish_checkpoint(&mut self, saved: &SavedFrontier) -> Result<(), FrontierError> {
        self.store.finish_sync(saved.store)?;
        Ok(())
    }

    /// Brings a host's state into memory (from the robots.txt cache if it was evicted), and
    /// evicts idle hosts beyond the budget.
    fn make_resident(&mut self, id: HostId, now: Instant) -> Result<(), FrontierError> {
        self.tick += 1;
        let tick = self.tick;
        if let Some(state) = self.resident.get_mut(&id) {
            state.touched = tick;
            self.lru.push_back((tick, id));
            self.compact_lru();
            return Ok(());
        }
        let key = match self.store.peek(id)? {
            Some(front) => key_of(&front.url),
            None => return Ok(()),
        };
        let mut robots = if self.policy.respect_robots {
            RobotsState::Unknown
        } else {
            RobotsState::NotNeeded
        };
        let mut body_len = 0;
        let mut crawl_delay_rules = None;
        if let Some(cache) = self.robots_cache.as_mut() {
            let now_ms = unix_ms(SystemTime::now());
            let cached = match cache.get_with_expiry(id, now_ms) {
                Ok(cached) => cached,
                Err(e) => {
                    // Forgotten by the cache: robots.txt is simply fetched again.
                    tracing::warn!("{e}; robots.txt will be fetched again");
                    None
                }
            };
            if let Some((entry, expires_ms)) = cached {
                let rules = match &entry {
                    CachedRobots::AllowAll => RobotsRules::allow_all(),
                    CachedRobots::Body(body) => {
                        body_len = body.len() as u64;
                        RobotsRules::parse(&self.options.robots_agent, body)
                    }
                };
                let rules = Arc::new(rules);
                let left = Duration::from_millis(expires_ms.saturating_sub(now_ms));
                crawl_delay_rules = Some(rules.clone());
                robots = RobotsState::Ready {
                    rules,
                    expires: now + left,
                };
            }
        }
        let limiter = self
            .policy
            .quota
            .map(|q| RateLimiter::direct_with_clock(q, self.clock.clone()));
        let mut state = HostState {
            bytes: state_bytes(&key, body_len),
            key,
            in_flight: 0,
            not_before: now,
            limiter,
            limiter_refill: self.policy.period * self.policy.burst,
            last_request: None,
            robots,
            robots_failures: 0,
            touched: tick,
        };
        if let Some(rules) = crawl_delay_rules {
            apply_crawl_delay(&mut state, &rules, self.policy.period, self.clock.clone());
        }
        self.resident_bytes += state.bytes;
        self.resident.insert(id, state);
        self.lru.push_back((tick, id));
        self.restores += 1;
        if self.resident_bytes > self.options.host_memory {
            self.evict_idle(now, Some(id));
        }
        self.compact_lru();
        Ok(())
    }

    /// Evicts idle hosts, least recently served first, until the resident state fits its
    /// budget or no idle host is left among those looked at. `keep` is the host being served.
    fn evict_idle(&mut self, now: Instant, keep: Option<HostId>) {
        let mut budget = self.lru.len();
        while self.resident_bytes > self.options.host_memory && budget > 0 {
            budget -= 1;
            let Some((tick, id)) = self.lru.pop_front() else {
                break;
            };
            let Some(state) = self.resident.get(&id) else {
                continue;
            };
            if state.touched != tick {
                continue; // stale: the host was served again later
            }
            if Some(id) == keep || !self.is_idle(id, state, now) {
                self.lru.push_back((tick, id));
                continue;
            }
            if let Some(state) = self.resident.remove(&id) {
                self.resident_bytes -= state.bytes;
                self.evictions += 1;
            }
        }
    }

    /// Whether a host's state can be dropped now and rebuilt later without changing what
    /// happens: nothing in flight, no wait pending, its rate limiter full again, no robots.txt
    /// fetch in progress and no backoff with URLs waiting on it.
    fn is_idle(&self, id: HostId, state: &HostState, now: Instant) -> bool {
        if state.in_flight > 0 || state.not_before > now {
            return false;
        }
        if state
            .last_request
            .is_some_and(|at| now < at + state.limiter_refill)
        {
            return false;
        }
        match state.robots {
            RobotsState::Fetching => false,
            RobotsState::Unavailable { retry_at } => retry_at <= now && self.store.len(id) == 0,
            _ => true,
        }
    }

    /// Keeps the LRU list from filling with stale entries.
    fn compact_lru(&mut self) {
        if self.lru.len() <= 4 * self.resident.len() + 1024 {
            return;
        }
        let mut live: Vec<(u64, HostId)> = self
            .resident
            .iter()
            .map(|(&id, state)| (state.touched, id))
            .collect();
        live.sort_unstable();
        self.lru = live.into();
    }

    fn note_top(&mut self, id: HostId, key: &str, count: u64) {
        if let Some(entry) = self.top.iter_mut().find(|(h, _, _)| *h == id) {
            entry.2 = count;
        } else if self.top.len() < TOP_HOSTS {
            self.top.push((id, key.to_string(), count));
        } else if self.top.last().is_some_and(|last| count > last.2) {
            self.top.pop();
            self.top.push((id, key.to_string(), count));
        } else {
            return;
        }
        self.top
            .sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
    }

    /// Puts a host in the heap if it has work and room for another fetch.
    fn schedule(&mut self, id: HostId, now: Instant) {
        if self.tallies.get(&id).is_some_and(|t| t.scheduled) || self.store.len(id) == 0 {
            return;
        }
        let at = match self.resident.get(&id) {
            Some(host) => {
                if host.in_flight >= self.policy.per_host_concurrency
                    || matches!(host.robots, RobotsState::Fetching)
                {
                    return;
                }
                host.not_before.max(now)
            }
            None => now,
        };
        self.push_ready(id, at);
    }

    fn push_ready(&mut self, id: HostId, at: Instant) {
        self.sequence += 1;
        self.tallies.entry(id).or_default().scheduled = true;
        self.ready.push(std::cmp::Reverse((at, self.sequence, id)));
    }
}

/// Installs a host's crawl-delay, never faster than the configured rate.
fn apply_crawl_delay(
    host: &mut HostState,
    rules: &RobotsRules,
    policy_period: Duration,
    clock: DefaultClock,
) {
    if let Some(delay) = rules.crawl_delay {
        let period = delay.max(policy_period);
        if let Some(quota) = Quota::with_period(period) {
            host.limiter = Some(RateLimiter::direct_with_clock(quota, clock));
            host.limiter_refill = period;
        }
    }
}

fn state_bytes(key: &str, robots_body: u64) -> u64 {
    HOST_STATE_BYTES + key.len() as u64 + robots_body * RULES_PER_BODY_BYTE
}

/// The host key of a canonical URL (empty if it does not parse, which a queued URL always does).
fn key_of(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| crate::normalize::host_key(&u))
        .unwrap_or_default()
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestFrontier {
        frontier: Frontier,
        _dir: tempfile::TempDir,
    }

    impl std::ops::Deref for TestFrontier {
        type Target = Frontier;
        fn deref(&self) -> &Frontier {
            &self.frontier
        }
    }

    impl std::ops::DerefMut for TestFrontier {
        fn deref_mut(&mut self) -> &mut Frontier {
            &mut self.frontier
        }
    }

    fn options(dir: &Path, host_memory: u64) -> FrontierOptions {
        FrontierOptions {
            dir: dir.join("frontier"),
            queue_memory: 1 << 20,
            host_memory,
            robots_agent: "crawler".into(),
        }
    }

    fn frontier(policy: FrontierPolicy) -> TestFrontier {
        let dir = tempfile::tempdir().unwrap();
        let frontier = Frontier::create(policy, options(dir.path(), 64 << 20)).unwrap();
        TestFrontier {
            frontier,
            _dir: dir,
        }
    }

    fn policy(rps: f64, burst: u32, conc: u32) -> FrontierPolicy {
        FrontierPolicy::from_config(&PolitenessSection {
            per_host_rps: rps,
            per_host_burst: burst,
            per_host_concurrency: conc,
            respect_robots: false,
            ..PolitenessSection::default()
        })
    }

    fn fetch(work: Result<Option<Work>, FrontierError>) -> Dispatch {
        match work {
            Ok(Some(Work::Fetch(d))) => d,
            other => panic!("expected a fetch, got {other:?}"),
        }
    }

    fn nothing(work: Result<Option<Work>, FrontierError>) {
        match work {
            Ok(None) => {}
            other => panic!("expected nothing, got {other:?}"),
        }
    }

    fn item(url: &str) -> QueuedUrl {
        QueuedUrl::seed(url.to_string())
    }

    fn rules(text: &str) -> RobotsOutcome {
        RobotsOutcome::Rules {
            rules: Arc::new(RobotsRules::parse("crawler", text.as_bytes())),
            body: Some(text.as_bytes().to_vec()),
        }
    }

    #[test]
    fn hosts_take_turns_and_concurrency_is_capped() {
        let mut f = frontier(policy(1000.0, 1000, 1));
        for i in 0..3 {
            f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
        }
        f.push("http://b", item("http://b/0")).unwrap();
        let now = Instant::now();
        let first = fetch(f.pop_ready(now));
        let second = fetch(f.pop_ready(now));
        assert_ne!(first.host, second.host, "b must not wait behind a");
        // Both hosts are at their cap of one in flight.
        nothing(f.pop_ready(now));
        assert_eq!(f.in_flight(), 2);
        f.complete(first.host);
        let third = fetch(f.pop_ready(Instant::now()));
        assert_eq!(third.item.url, "http://a/1");
    }

    #[test]
    fn rate_limit_delays_the_host() {
        let mut f = frontier(policy(10.0, 1, 100));
        f.push("http://a", item("http://a/0")).unwrap();
        f.push("http://a", item("http://a/1")).unwrap();
        let now = Instant::now();
        fetch(f.pop_ready(now));
        nothing(f.pop_ready(now));
        let next = f.next_ready_at().unwrap();
        let wait = next - now;
        assert!(
            wait > Duration::from_millis(50) && wait <= Duration::from_millis(110),
            "{wait:?}"
        );
    }

    #[test]
    fn retry_goes_first_and_waits() {
        let mut f = frontier(policy(1000.0, 1000, 4));
        f.push("http://a", item("http://a/0")).unwrap();
        f.push("http://a", item("http://a/1")).unwrap();
        let d = fetch(f.pop_ready(Instant::now()));
        f.retry(d, Duration::from_millis(200));
        assert_eq!(f.queued(), 2);
        nothing(f.pop_ready(Instant::now()));
        let later = Instant::now() + Duration::from_millis(250);
        let again = fetch(f.pop_ready(later));
        assert_eq!(again.item.url, "http://a/0");
        assert_eq!(again.item.attempts, 1);
    }

    #[test]
    fn finished_only_when_nothing_queued_or_in_flight() {
        let mut f = frontier(policy(1000.0, 1000, 4));
        assert!(f.is_finished());
        f.push("http://a", item("http://a/0")).unwrap();
        assert!(!f.is_finished());
        let d = fetch(f.pop_ready(Instant::now()));
        assert!(!f.is_finished());
        f.complete(d.host);
        assert!(f.is_finished());
    }

    #[test]
    fn robots_comes_first_then_gates_each_url() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = frontier(p);
        f.push("http://a", item("http://a/private/x")).unwrap();
        f.push("http://a", item("http://a/open")).unwrap();
        let now = Instant::now();
        let Ok(Some(Work::Robots { host, key })) = f.pop_ready(now) else {
            panic!("robots.txt first")
        };
        assert_eq!(key, "http://a");
        // Nothing else for the host while its robots.txt is in flight.
        nothing(f.pop_ready(now));
        let given_up = f
            .robots_done(host, rules("User-agent: *\nDisallow: /private/\n"))
            .unwrap();
        assert!(given_up.is_empty());
        match f.pop_ready(Instant::now()) {
            Ok(Some(Work::Disallowed(item))) => assert_eq!(item.url, "http://a/private/x"),
            other => panic!("{other:?}"),
        }
        assert_eq!(fetch(f.pop_ready(Instant::now())).item.url, "http://a/open");
    }

    #[test]
    fn unreachable_robots_blocks_then_gives_up() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = frontier(p);
        f.push("http://a", item("http://a/1")).unwrap();
        let mut now = Instant::now();
        for attempt in 1..=MAX_UNAVAILABLE_ATTEMPTS {
            let Ok(Some(Work::Robots { host, .. })) = f.pop_ready(now) else {
                panic!("attempt {attempt}: robots.txt again")
            };
            let given_up = f
                .robots_done(
                    host,
                    RobotsOutcome::Unavailable {
                        reason: "HTTP 503".into(),
                    },
                )
                .unwrap();
            // Nothing is fetched from the host meanwhile.
            nothing(f.pop_ready(Instant::now()));
            if attempt < MAX_UNAVAILABLE_ATTEMPTS {
                assert!(given_up.is_empty());
                now = Instant::now() + unavailable_backoff(attempt) + Duration::from_millis(1);
            } else {
                assert_eq!(given_up.len(), 1);
                assert!(f.is_finished());
            }
        }
    }

    #[test]
    fn crawl_delay_slows_the_host() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = frontier(p);
        for i in 0..3 {
            f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
        }
        let Ok(Some(Work::Robots { host, .. })) = f.pop_ready(Instant::now()) else {
            panic!()
        };
        f.robots_done(host, rules("User-agent: *\nCrawl-delay: 2\n"))
            .unwrap();
        let now = Instant::now();
        fetch(f.pop_ready(now));
        nothing(f.pop_ready(now));
        let wait = f.next_ready_at().unwrap() - now;
        assert!(wait > Duration::from_millis(1500), "{wait:?}");
    }

    /// With room for a handful of hosts, serving 200 hosts in turn evicts idle ones; each
    /// comes back with its robots.txt rules (disallow and crawl-delay) from the disk cache,
    /// so robots.txt is fetched once per host, never again.
    #[test]
    fn evicted_hosts_come_back_with_their_rules() {
        let dir = tempfile::tempdir().unwrap();
        // 1e6 requests/s: a host's limiter is full again a microsecond after its request.
        let mut p = policy(1e6, 1, 4);
        p.respect_robots = true;
        let mut f = Frontier::create(p, options(dir.path(), 8 * 1024)).unwrap();
        let hosts = 200;
        for h in 0..hosts {
            for i in 0..3 {
                let key = format!("http://h{h}.test");
                f.push(&key, item(&format!("{key}/private/{i}"))).unwrap();
                f.push(&key, item(&format!("{key}/open/{i}"))).unwrap();
            }
        }
        let body = "User-agent: *\nDisallow: /private/\n";
        let (mut robots, mut fetched, mut disallowed) = (0, 0, 0);
        while !f.is_finished() {
            let now = Instant::now();
            match f.pop_ready(now).unwrap() {
                Some(Work::Robots { host, .. }) => {
                    robots += 1;
                    f.robots_done(host, rules(body)).unwrap();
                }
                Some(Work::Fetch(d)) => {
                    assert!(d.item.url.contains("/open/"), "{}", d.item.url);
                    fetched += 1;
                    f.complete(d.host);
                }
                Some(Work::Disallowed(item)) => {
                    assert!(item.url.contains("/private/"));
                    disallowed += 1;
                }
                None => std::thread::sleep(Duration::from_micros(50)),
            }
        }
        assert_eq!(robots, hosts, "robots.txt fetched once per host");
        assert_eq!((fetched, disallowed), (3 * hosts, 3 * hosts));
        let stats = f.stats();
        assert!(stats.evictions > 0, "{stats:?}");
        assert!(stats.restores > hosts as u64, "{stats:?}");
        assert!(stats.resident_bytes <= 8 * 1024 + 1024, "{stats:?}");
    }

    /// A checkpoint holds queued and in-flight URLs; resuming it drops what was recorded
    /// after it, and what was pushed after it is the caller's to push again.
    #[test]
    fn resume_restores_the_checkpointed_queues() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(1e6, 1000, 100);
        let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
        for i in 0..10 {
            f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
            f.push("http://b", item(&format!("http://b/{i}"))).unwrap();
        }
        let now = Instant::now();
        let in_flight = fetch(f.pop_ready(now));
        let done = fetch(f.pop_ready(now));
        f.complete(done.host);
        let ckpt = dir.path().join("ckpt");
        std::fs::create_dir_all(&ckpt).unwrap();
        let snapshot = f
            .begin_checkpoint(&[(in_flight.host, in_flight.item.clone())])
            .unwrap();
        let saved = snapshot.write(&ckpt).unwrap();
        f.finish_checkpoint(&saved).unwrap();
        assert_eq!(saved.queued, 19);
        // After the checkpoint: one more fetched and recorded, one pushed (then lost).
        let recorded = fetch(f.pop_ready(Instant::now()));
        f.push("http://c", item("http://c/0")).unwrap();
        drop(f);

        let hosts = saved.check(&ckpt, &dir.path().join("frontier")).unwrap();
        let mut f = Frontier::resume(
            p,
            options(dir.path(), 1 << 20),
            &saved,
            hosts,
            [url_hash(&recorded.item.url)],
        )
        .unwrap();
        assert_eq!(f.host_total_queued("http://a"), 10);
        let mut urls = Vec::new();
        while let Some(Work::Fetch(d)) = f.pop_ready(Instant::now()).unwrap() {
            urls.push(d.item.url.clone());
            f.complete(d.host);
        }
        assert!(urls.contains(&in_flight.item.url), "in flight comes back");
        assert!(!urls.contains(&done.item.url), "done before stays done");
        assert!(
            !urls.contains(&recorded.item.url),
            "recorded after is dropped"
        );
        assert!(!urls.iter().any(|u| u.starts_with("http://c")));
        assert_eq!(urls.len(), 18);
        let unique: HashSet<&String> = urls.iter().collect();
        assert_eq!(unique.len(), 18);
    }

    #[test]
    fn damaged_hosts_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Frontier::create(policy(10.0, 1, 1), options(dir.path(), 1 << 20)).unwrap();
        f.push("http://a", item("http://a/0")).unwrap();
        let ckpt = dir.path().join("ckpt");
        std::fs::create_dir_all(&ckpt).unwrap();
        let saved = f.begin_checkpoint(&[]).unwrap().write(&ckpt).unwrap();
        let path = ckpt.join(HOSTS_FILE);
        let good = std::fs::read(&path).unwrap();
        for at in [0, 9, 20, 33, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            let e = saved
                .check(&ckpt, &dir.path().join("frontier"))
                .unwrap_err();
            assert!(e.to_string().contains("hosts.bin"), "{e}");
        }
        std::fs::write(&path, &good[..good.len() - 3]).unwrap();
        let e = saved
            .check(&ckpt, &dir.path().join("frontier"))
            .unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        std::fs::write(&path, &good).unwrap();
        saved.check(&ckpt, &dir.path().join("frontier")).unwrap();
    }
}
