//! Distributed mode: several crawler processes (on one machine or many) run one crawl by
//! sharing its seen-set, frontier and counters in Redis.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the crawl's keys, the shared Bloom filter's layout, the calls the crawl makes |
//! | `client.rs` | the connection (one server or a cluster): TLS, credentials kept out of sight, retries with backoff, rounds sent to every shard at once, `WAIT` for replicas, script loading, round-trip count |
//! | `admit.lua` | one shard's candidates: test-and-set bits, `max_urls` budget, host cap, enqueue |
//! | `grant.lua` | a cluster's `max_urls` budget handed to shards, as running totals |
//! | `claim.lua` | one shard: reclaim expired leases, top up held ones (a drained one ended if its queue is empty), lease ready hosts' URLs, name the hosts due next |
//! | `release.lua` | acknowledge leases (token-checked), write the host's next-allowed time |
//! | `end_lease.lua` | ending a lease, prepended to `claim.lua` and `release.lua` when loaded: both end leases |
//! | `renew.lua` | the expiry of held leases, one shard's |
//! | `beat.lua` | heartbeat: the process registry |
//! | `session.rs` | every call a crawling process makes: script arguments built, replies parsed |
//! | `shard_views.rs` | what a process knows of each shard's schedule: which shards a claim asks |
//! | `queue_item.rs` | a queued URL's packed bytes in Redis: the parent as the tail it does not share with the URL |
//! | `payloads.rs` | archive dedup across processes: the payloads archived in full, capped, in `payloads` |
//! | `leases.rs` | the leases held and which URLs may be acknowledged (no Redis: unit-tested) |
//! | `seal.rs` | dead processes' output sealed: torn pages line and excess WARC records cut |
//! | `status.rs` | `crawler status` and the crawl-wide `summary.json`: the whole crawl's figures |
//! | `script_tests.rs` | the scripts' promises, one by one, on a real `redis-server` |
//!
//! A process is driven by the crawl's one driver with the lease source
//! (`crate::crawl`'s `lease_source.rs`): the same fetch tasks, parse pool and local
//! [`crate::frontier::Frontier`] as a single-process crawl, the local frontier holding only
//! the URLs of the hosts this process has leased. This folder holds all of the Redis side.
//!
//! # What is in Redis: the crawl's own keys, and its hosts' keys in shards
//!
//! A host belongs to one of `distributed.shards` shards (MurmurHash3 of its key, [`shard_of`]);
//! every key of a shard carries the hash tag `{crawl_id:shard}` (so a Redis Cluster puts
//! each shard in one slot and spreads the shards over its primaries), the crawl's own keys
//! the tag `{crawl_id}`. Every script declares each key it touches in `KEYS` (Redis
//! Cluster's rule; servers such as Dragonfly refuse undeclared keys), and touches the keys
//! of one tag only: a script runs atomically on the one node holding its slot.
//!
//! Per shard (`crawl:{id:shard}:`):
//! - `seen:<part>`: the shard's part of the Bloom filter, laid out and hashed as the local
//!   one ([`crate::seen`]: MurmurHash3 x64_128, the same [`Plan`], 512-bit blocks) with the
//!   plan's blocks split evenly over the shards (`shard_blocks`), in strings of at most
//!   [`BLOCKS_PER_SHARD`] blocks (a Redis string holds at most 2^32 bits). A URL's k bits
//!   are in one 64-byte block of its host's shard: `admit.lua` reads the block
//!   (`GETRANGE`), tests the bits in Lua and writes the block back with them set
//!   (`SETRANGE`) once the URL is admitted.
//! - `q:<host>`: each host's queue (a list of [`queue_item`]s: a [`QueuedUrl`] packed,
//!   about its URL's bytes); `sched`: a sorted set of the
//!   hosts that have URLs queued and are not leased, scored by the instant (ms, Redis clock)
//!   they may next be served; `next`: each host's next-allowed instant; `hostn`: URLs per
//!   host (the host cap).
//! - `leases` (token → expiry), `lease` (token → process), `li:<host>` (a set of the
//!   lease's unacknowledged URLs), `leased` (host → token): a host is leased to one process
//!   at a time, which tops its lease up while the host has URLs queued (and for half a
//!   lease period at most: then the host goes back to the schedule, so hosts change hands). A token is
//!   `<shard>/<sequence>/<host>` (`token_parts`): the keys of a lease held follow from it.
//! - `meta`: the plan (every script checks it is there), accepted, queued, lease
//!   numbers, `budget` (a cluster's: what `grant.lua` gave the shard), `ver` (grows with
//!   every change of the shard's queues or leases: see Termination).
//!
//! The crawl's own (`crawl:{id}:`): `meta` (the plan, `max_urls`, `shards`, `granted`: the
//! budget handed out, start and end stamps); `counters`: the crawl's counters summed over
//! processes; `payloads`: the payloads some process archived in full (96 bits of SHA-1 →
//! the original's date, record id and URL), at most `distributed.shared_payloads` of them;
//! `procs`: heartbeats (a process registers before it writes any file); `ended`:
//! processes that finished, stopped or were sealed after their death; `seal:<id>`: the lock
//! of whoever seals a dead one.
//!
//! # Guarantees
//!
//! - **Exactly-once admission across processes.** `admit.lua` tests a URL's bits, checks
//!   the budget and the host cap, sets the bits and pushes the URL in one atomic script on
//!   the URL's host's shard, where all of its URL's bits and queue are: no URL is queued
//!   twice. A page's links go to their shards' scripts in one round (a pipeline per shard,
//!   all sent at once). Within a call URLs are decided one by one in order, each read,
//!   checked and only then set (a URL repeated in a call finds its own bits set; a refused
//!   URL leaves no bit); only the pushes and the schedule are done once per host.
//! - **`max_urls` exact over all processes: one counter.** On a single server `admit.lua`
//!   also declares the crawl's `meta` and takes each URL from its `granted` counter in the
//!   same atomic step (one round per page, as before shards). On a cluster one script
//!   cannot reach both, so a shard admits only up to the budget `grant.lua` gave it: a new
//!   URL beyond it is answered "needs budget" with its bits left clear, the process asks
//!   `grant.lua` (the crawl's `meta`, atomic) for exactly what its shards lacked, and sends
//!   those URLs again with each shard's running total granted. Why one counter rather than
//!   `max_urls` split across shards up front: hosts are not spread evenly, so a fixed split
//!   refuses URLs of a busy shard while others never use their share, and the crawl ends
//!   short of `max_urls` with URLs left to take. Granting exactly what is needed strands no
//!   budget, so `accepted` reaches `max_urls` exactly when the web has that many URLs; the
//!   only budget that can sit unused in a shard is that of a URL another process queued
//!   between the two rounds, and it serves that shard's next new URL. Running totals (the
//!   shard keeps the largest it is given) make a grant whose answer was lost good at the
//!   next grant for that shard. The cost: two more rounds (one to the node holding the
//!   crawl's `meta`) for pages with new links, on a cluster only. A URL over its host's cap
//!   is refused as such before the budget is looked at (it never asks for budget), and
//!   within a round the shards' scripts run in shard order, not link order: which new URLs
//!   take the last of `max_urls` follows that order.
//! - **Nothing acknowledged is lost; nothing leased is lost.** A host's URLs leave its queue
//!   only into a lease; a URL leaves its lease only by an acknowledgement carrying the
//!   lease's token (sent after its record is handed to the OS); a lease ends by its holder
//!   (its unacknowledged URLs back to the head of the queue) or by expiry `lease_secs`
//!   after the last heartbeat (the same, by whichever process claims next). A process
//!   killed with `kill -9` therefore costs at most its unacknowledged leased URLs fetched
//!   twice.
//! - **Politeness for the crawl as a whole.** A host is leased to one process at a time, and
//!   is offered to the next one only from the instant the releasing process's limiter would
//!   be as good as new (`last request + period × burst`, Retry-After and Crawl-delay
//!   included). Within a lease the local frontier's limits hold as in a single process.
//!   robots.txt is fetched by the lease holder and its rules cached per process (each
//!   process fetches a host's robots.txt at most once per `robots_ttl_secs`, under the
//!   lease, so still politely): storing parsed rules in Redis would save a request per host
//!   and process but would put a second copy of the robots cache's format in Redis.
//! - **Termination.** The crawl is over when no host is scheduled and no lease is
//!   outstanding (expired leases are reclaimed first); a process with nothing to do waits
//!   while others hold leases, since their pages may add URLs. Most claims ask only some
//!   shards (`shard_views`); only a sweep (a claim of every shard) can conclude. The
//!   shards are read one by one, not at one instant, so a sweep that finds them all empty
//!   concludes only if the previous sweep did too with every shard's `ver` unchanged (a
//!   claim between them that changed a shard changed its `ver`): then each shard was empty
//!   and untouched from its first reading to its second, so all were empty at one instant
//!   between the two rounds (after every first reading, before every second), and an empty
//!   crawl stays empty (only a lease adds URLs).
//! - **A primary's failure (a cluster with a replica per primary).** With
//!   `distributed.replicas = 1` every round that writes is followed by `WAIT 1 100` on
//!   every primary (the connections that carried the writes), and `WAIT 1 1000` if that
//!   found no replica: the process uses an answer (records a page, acknowledges its URL,
//!   crawls a lease) only once a replica holds what produced it, so a primary killed and
//!   replaced by its replica loses nothing acknowledged. A round no replica confirmed is
//!   sent again before its answers are used (its writes may have died with their primary;
//!   the second round lands on the promoted replica). What it may lose is a round in flight
//!   at the kill, which the process sends again (every call is idempotent in effect, see
//!   `client.rs`): an
//!   admission finds its bits set or not and queues nothing twice, a claim whose effect
//!   survived but whose answer did not leaves a lease that expires and is reclaimed
//!   (counted, `reclaimed_urls`). Re-fetches are therefore at most the URLs reclaimed from
//!   expired leases, plus `lease_urls` for each write a replica did not confirm within
//!   1.1 s (counted per process, `unreplicated_writes`: a primary left without its replica
//!   after a failover, where AOF `everysec` is what remains). Redis away longer than
//!   `redis_timeout_secs` stops the processes as on a single server, resumably.
//!
//! # Why this design
//!
//! The crawl's driver, fetch tasks and frontier stay as they are: a process leases a few
//! hosts' URLs and crawls them with the same machinery as a single-process crawl; only where
//! URLs come from (leases) and where new ones go (`admit.lua`) change. Leasing a whole host
//! rather than single URLs makes per-host rate, concurrency and Crawl-delay global without
//! a distributed rate limiter, and costs one round trip for many URLs. The local seen-set (the
//! same Bloom filter) stays in front of Redis as a cache: a link this process already sent or
//! leased is dropped without a round trip (at the cost of a second filter's false positives).
//!
//! Durability is Redis's: with AOF (`appendonly yes`, `appendfsync everysec`) a Redis
//! restart loses at most the last second of writes. Losing admitted URLs there can only
//! drop a link that a re-fetch of its page would find again, since a page's lease is
//! released only after its links were admitted. With persistence off, a Redis restart
//! forgets the crawl: every script first checks that the crawl's plan is still in `meta`
//! and answers `CRAWLGONE` otherwise, and the processes stop with
//! [`DistributedError::Gone`] instead of starting the crawl again, from the links of their
//! last pages, into an empty seen-set.
//!
//! # Redis Cluster
//!
//! `--redis redis://10.0.0.5:7000,redis://10.0.0.6:7000` (seed nodes; one seed node of a
//! cluster also does, found by its `INFO cluster`) connects through the redis crate's
//! cluster client (`cluster-async`), which follows the slots' owners and `MOVED` answers
//! after a failover. The same calls as on a single server: a round is a group of commands
//! per hash tag, sent as one pipeline to a single server and as one pipeline per shard,
//! all at once, to a cluster (a cluster pipeline must stay in one slot).
//!
//! Why 64 shards by default: shards ≫ primaries spreads the keys evenly (3 primaries get
//! 21 ± 4 shards each; by hash-slot arithmetic a primary's share of keys is its share of
//! shards when hosts are many), while every shard holds a few fixed keys and a sweep (a
//! claim of every shard, when a process knows of no due host: see `shard_views`) costs
//! `shards` small scripts. For 8 or more primaries take 256. The seen-set is split the same way, so its false-positive rate holds per
//! shard when a shard's hosts bring about their share of URLs; a shard whose hosts bring k
//! times their share has the fpp of a filter k times too full (a crawl of few, huge hosts
//! should size the filter with that in mind, or use fewer shards).

mod client;
pub(crate) mod leases;
pub(crate) mod payloads;
pub mod queue_item;
#[cfg(test)]
mod script_tests;
pub(crate) mod seal;
pub(crate) mod session;
pub(crate) mod shard_views;
pub mod status;

use std::time::Duration;

pub(crate) use client::Redis;
pub use client::{redacted_url, RedisUrl};

use crate::config::Config;
use crate::frontier::QueuedUrl;
use crate::seen::Plan;

/// 512-bit blocks per shard key: 2^22 blocks = 2^31 bits = 256 MiB per string, half of
/// Redis's 512 MiB limit.
pub const BLOCKS_PER_SHARD: u64 = 1 << 22;

/// What can go wrong with the shared state.
#[derive(Debug, thiserror::Error)]
pub enum DistributedError {
    #[error("redis: invalid URL {url}")]
    Url {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("redis {url}: unreachable for {secs} s; the crawl's state in Redis is intact: start the processes again with the same --crawl-id to go on")]
    Unreachable {
        url: String,
        secs: f64,
        #[source]
        source: redis::RedisError,
    },
    /// Redis refused the credentials (or asked for some): a `String` detail rather than the
    /// source, whose text for a pipeline repeats the code once per command.
    #[error("redis {url}: {detail}; give them as redis://USER:PASSWORD@HOST:PORT/DB (an ACL user) or redis://:PASSWORD@HOST:PORT/DB (requirepass) in distributed.redis or --redis")]
    Auth { url: String, detail: &'static str },
    /// Redis's words for the first refused command (a pipeline's repeat it per command).
    #[error("redis {url}: the ACL user may not run a command or touch a key the crawl needs (see the README's ACL rule): {detail}")]
    Permission { url: String, detail: String },
    #[error("redis {url}: TLS: the server's certificate was refused ({detail}); a private CA is trusted with network.ca_file")]
    Certificate { url: String, detail: String },
    #[error("network.ca_file {}: cannot read it for the Redis connection", path.display())]
    CaFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("crawl {crawl_id:?} is not in Redis at {url} (no such crawl id there)")]
    UnknownCrawl { url: String, crawl_id: String },
    #[error("redis {url}")]
    Command {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("redis: unexpected answer to {what}: {detail}")]
    Reply { what: &'static str, detail: String },
    #[error("crawl {crawl_id:?} in Redis was started with {theirs}; this process has {ours}")]
    Mismatch {
        crawl_id: String,
        theirs: String,
        ours: String,
    },
    #[error("[distributed] redis is set but crawl_id is not")]
    NoCrawlId,
    #[error("sealing the output of dead process {process}")]
    Seal {
        process: String,
        #[source]
        source: crate::durable::IoAt,
    },
    #[error("redis {url}: the crawl is no longer there (Redis restarted without persistence, or its keys were deleted); its records so far are in the pages files, and starting it again would fetch them again")]
    Gone { url: String },
}

/// The key prefix of a crawl's own keys (its meta hash, counters, processes): `crawl:{<id>}:`;
/// the braces are the Cluster hash tag.
pub fn prefix(crawl_id: &str) -> String {
    format!("crawl:{{{crawl_id}}}:")
}

/// The key prefix of one shard of a crawl: `crawl:{<id>:<shard>}:`, a hash tag of its own,
/// so that a Redis Cluster spreads the shards over its primaries.
pub fn shard_prefix(crawl_id: &str, shard: u32) -> String {
    format!("crawl:{{{crawl_id}:{shard}}}:")
}

/// The shard of a host (its key: scheme, name and port), one of `shards`: the host's queue,
/// lease and seen-set part live there. MurmurHash3 of the key, as the seen-set's.
pub fn shard_of(host: &str, shards: u32) -> u32 {
    let (h1, _) = crate::seen::murmur3_halves(host.as_bytes(), 0x5348_4152);
    (h1 % u64::from(shards.max(1))) as u32
}

/// The keys of one shard, named once; every script is given the ones it touches.
#[derive(Debug, Clone)]
pub(crate) struct ShardKeys {
    prefix: String,
    pub(crate) meta: String,
    pub(crate) sched: String,
    pub(crate) next: String,
    pub(crate) leased: String,
    pub(crate) hostn: String,
    pub(crate) leases: String,
    pub(crate) lease: String,
}

impl ShardKeys {
    pub(crate) fn new(crawl_id: &str, shard: u32) -> ShardKeys {
        let prefix = shard_prefix(crawl_id, shard);
        let key = |name: &str| format!("{prefix}{name}");
        ShardKeys {
            meta: key("meta"),
            sched: key("sched"),
            next: key("next"),
            leased: key("leased"),
            hostn: key("hostn"),
            leases: key("leases"),
            lease: key("lease"),
            prefix,
        }
    }

    /// The six keys `claim.lua` and `release.lua` start with, in their order: meta, sched,
    /// next, leased, leases, lease.
    pub(crate) fn lease_keys(&self) -> [String; 6] {
        [
            self.meta.clone(),
            self.sched.clone(),
            self.next.clone(),
            self.leased.clone(),
            self.leases.clone(),
            self.lease.clone(),
        ]
    }

    /// A host's queue.
    pub(crate) fn queue(&self, host: &str) -> String {
        format!("{}q:{host}", self.prefix)
    }

    /// The URLs of the lease on a host (one lease per host at a time).
    pub(crate) fn leased_items(&self, host: &str) -> String {
        format!("{}li:{host}", self.prefix)
    }

    /// A part of the shard's seen-set.
    pub(crate) fn seen(&self, part: u64) -> String {
        format!("{}seen:{part}", self.prefix)
    }
}

/// A lease's token: `<shard>/<sequence>/<host>`, so that the shard and host of a lease held
/// are known from its token alone.
pub(crate) fn token_parts(token: &str) -> Option<(u32, &str)> {
    let (shard, rest) = token.split_once('/')?;
    let (_, host) = rest.split_once('/')?;
    Some((shard.parse().ok()?, host))
}

/// A stable id for this process: host name, pid and start time (nanoseconds within the
/// second, so that a restarted process with a recycled pid, or a container's pid 1 on a
/// host of the same name, is still a new one), and a sequence number for several crawls run
/// by one process (benchmarks, tests).
pub fn process_id() -> String {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let host = if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end])
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
            .collect()
    } else {
        String::from("host")
    };
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let id = format!("{host}-{}-{started}", std::process::id());
    if n == 0 {
        id
    } else {
        format!("{id}-{n}")
    }
}

/// 512-bit blocks of one shard's part of the filter: the plan's blocks split evenly.
pub(crate) fn shard_blocks(plan: &Plan, shards: u32) -> u64 {
    plan.blocks.div_ceil(u64::from(shards.max(1))).max(1)
}

/// A key's place in its shard's part of the shared filter: the part (string key) and the
/// bit offsets of its k bits in it.
pub(crate) fn bloom_bits(plan: &Plan, shards: u32, key: &[u8], offsets: &mut Vec<u64>) -> u64 {
    let (h1, h2) = crate::seen::murmur3_halves(key, plan.seed);
    let block = crate::seen::block_of(h1, shard_blocks(plan, shards)) as u64;
    let masks = crate::seen::masks_of(h1, h2, plan.k);
    let base = (block % BLOCKS_PER_SHARD) * 512;
    offsets.clear();
    for (w, mask) in masks.iter().enumerate() {
        let mut m = *mask;
        while m != 0 {
            let bit = m.trailing_zeros() as u64;
            offsets.push(base + w as u64 * 64 + bit);
            m &= m - 1;
        }
    }
    block / BLOCKS_PER_SHARD
}

/// A key's place in its shard's part of the shared filter as `admit.lua` reads it: the part,
/// the byte offset of the key's 64-byte block in it, and in `probe` one (byte in the block,
/// mask) pair per byte holding some of its k bits, bit `o` of the part being byte `o / 8`,
/// mask `0x80 >> o % 8` (the bits `BITFIELD u1` and `SETBIT` address, so a filter written
/// either way reads the same).
pub(crate) fn bloom_probe(
    plan: &Plan,
    shards: u32,
    key: &[u8],
    offsets: &mut Vec<u64>,
    probe: &mut Vec<u8>,
) -> (u64, u64) {
    let part = bloom_bits(plan, shards, key, offsets);
    let block = offsets.first().map_or(0, |o| o / 512);
    probe.clear();
    for &o in offsets.iter() {
        let (b, mask) = (((o % 512) / 8) as u8, 0x80u8 >> (o % 8));
        match probe.chunks_exact_mut(2).find(|pair| pair[0] == b) {
            Some(pair) => pair[1] |= mask,
            None => probe.extend_from_slice(&[b, mask]),
        }
    }
    (part, block * 64)
}

/// Host shards of a crawl unless `distributed.shards` says otherwise (see the module doc).
pub const DEFAULT_SHARDS: u32 = 64;

/// How the seen-set of `plan` is laid out in Redis, for `crawler plan`.
pub fn redis_layout(plan: &Plan) -> String {
    let parts = shard_blocks(plan, DEFAULT_SHARDS).div_ceil(BLOCKS_PER_SHARD);
    format!(
        "in Redis (distributed mode): the same {:.1} MiB split over the crawl's {DEFAULT_SHARDS} host shards (distributed.shards), {parts} string key(s) of at most {} MiB each (seen:<part>), a URL's 64-byte block read (GETRANGE) and, if it is admitted, written (SETRANGE)",
        plan.bytes as f64 / (1 << 20) as f64,
        (BLOCKS_PER_SHARD * 64) >> 20
    )
}

/// The settings a process runs with.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) url: RedisUrl,
    pub(crate) crawl_id: String,
    pub(crate) lease: Duration,
    pub(crate) lease_urls: u32,
    pub(crate) timeout: Duration,
    /// Host shards (hash tags) the crawl's keys are spread over.
    pub(crate) shards: u32,
    /// Replicas each round's writes wait for (`WAIT`) before their answers are used.
    pub(crate) replicas: u32,
}

impl Settings {
    /// From `[distributed]`, and `network.ca_file` for a `rediss://` URL.
    pub(crate) fn from_config(config: &Config) -> Result<Option<Settings>, DistributedError> {
        let d = &config.distributed;
        let Some(url) = &d.redis else {
            return Ok(None);
        };
        let crawl_id = d.crawl_id.clone().ok_or(DistributedError::NoCrawlId)?;
        Ok(Some(Settings {
            url: RedisUrl::new(url, config.network.ca_file.as_deref()),
            crawl_id,
            lease: Duration::from_secs_f64(d.lease_secs),
            lease_urls: d.lease_urls,
            timeout: Duration::from_secs_f64(d.redis_timeout_secs),
            shards: d.shards,
            replicas: d.replicas,
        }))
    }
}

/// A lease as claimed: its token, host and URLs.
#[derive(Debug)]
pub(crate) struct Lease {
    pub(crate) token: String,
    pub(crate) host: String,
    /// Each URL with the item it is stored as ([`queue_item`]; acknowledged by it).
    pub(crate) items: Vec<(QueuedUrl, Vec<u8>)>,
}

/// The answer to a claim (summed over the shards asked).
#[derive(Debug, Default)]
pub(crate) struct Claimed {
    pub(crate) leases: Vec<Lease>,
    /// Drained leases the claim ended (their hosts' queues were empty): see `claim.lua`.
    pub(crate) ended: Vec<String>,
    pub(crate) scheduled: u64,
    pub(crate) outstanding: u64,
    /// When the next scheduled host this process knows of is due, if one is.
    pub(crate) due_in: Option<Duration>,
    /// The crawl is over: every shard empty, and unchanged since the previous sweep that
    /// found them all empty (see [`shard_views`]).
    pub(crate) over: bool,
    /// A sweep found every shard empty (nothing scheduled, no lease), not yet twice: the
    /// crawl looks over, and the sweep that can tell goes at once rather than at the next
    /// idle poll (a crawl's end is seen a poll sooner; this happens once per crawl, or in
    /// a race with a process's admission).
    pub(crate) looks_over: bool,
}

/// One shard's answer to `claim.lua`: the claim, the shard's version, the hosts due soon
/// and the expired leases' tokens (named in the next claim: see the script).
#[derive(Debug, Default)]
pub(crate) struct ShardClaim {
    pub(crate) claimed: Claimed,
    pub(crate) version: i64,
    pub(crate) due_hosts: Vec<String>,
    pub(crate) expired: Vec<String>,
}

/// Reads an integer reply.
pub(crate) fn int(v: &redis::Value, what: &'static str) -> Result<i64, DistributedError> {
    match v {
        redis::Value::Int(n) => Ok(*n),
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(what, v)),
        redis::Value::Nil => Ok(0),
        _ => Err(bad(what, v)),
    }
}

/// Reads a string reply.
pub(crate) fn text(v: &redis::Value, what: &'static str) -> Result<String, DistributedError> {
    match v {
        redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Ok(s.clone()),
        redis::Value::Int(n) => Ok(n.to_string()),
        _ => Err(bad(what, v)),
    }
}

/// Reads a binary string reply.
pub(crate) fn blob(v: &redis::Value, what: &'static str) -> Result<Vec<u8>, DistributedError> {
    match v {
        redis::Value::BulkString(b) => Ok(b.clone()),
        _ => Err(bad(what, v)),
    }
}

/// Reads an array reply.
pub(crate) fn array<'a>(
    v: &'a redis::Value,
    what: &'static str,
) -> Result<&'a [redis::Value], DistributedError> {
    match v {
        redis::Value::Array(items) => Ok(items),
        _ => Err(bad(what, v)),
    }
}

pub(crate) fn bad(what: &'static str, v: &redis::Value) -> DistributedError {
    let mut detail = format!("{v:?}");
    detail.truncate(200);
    DistributedError::Reply { what, detail }
}

/// Parses one shard's `claim.lua` answer.
pub(crate) fn parse_claim(v: &redis::Value) -> Result<ShardClaim, DistributedError> {
    let parts = array(v, "claim")?;
    let [leases, scheduled, outstanding, ended, due, version, due_hosts, expired] = parts else {
        return Err(bad("claim", v));
    };
    let strings = |v: &redis::Value| -> Result<Vec<String>, DistributedError> {
        array(v, "claim")?
            .iter()
            .map(|h| text(h, "claim"))
            .collect()
    };
    let mut claimed = Claimed {
        leases: Vec::new(),
        ended: strings(ended)?,
        scheduled: int(scheduled, "claim")?.max(0) as u64,
        outstanding: int(outstanding, "claim")?.max(0) as u64,
        due_in: u64::try_from(int(due, "claim")?)
            .ok()
            .map(Duration::from_millis),
        over: false,
        looks_over: false,
    };
    for lease in array(leases, "claim")? {
        let fields = array(lease, "claim")?;
        let [token, host, items @ ..] = fields else {
            return Err(bad("claim", lease));
        };
        let host = text(host, "claim")?;
        let mut parsed = Vec::with_capacity(items.len());
        for item in items {
            let bytes = blob(item, "claim")?;
            let url = queue_item::decode(&host, &bytes).map_err(|e| DistributedError::Reply {
                what: "claim",
                detail: e.to_string(),
            })?;
            parsed.push((url, bytes));
        }
        claimed.leases.push(Lease {
            token: text(token, "claim")?,
            host,
            items: parsed,
        });
    }
    Ok(ShardClaim {
        claimed,
        version: int(version, "claim")?,
        due_hosts: strings(due_hosts)?,
        expired: strings(expired)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key's bits are inside its shard, never a block's lock bit, at most k of them,
    /// and the shards cover the plan's blocks: a filter of more than one shard spreads keys
    /// over all of them.
    #[test]
    fn bloom_bits_stay_inside_the_plans_shards() {
        let small = Plan::for_fpp(100_000, 0.001).unwrap();
        // About 2.3 GiB of filter: several shards.
        let large = Plan::for_fpp(1_000_000_000, 0.0001).unwrap();
        for plan in [small, large] {
            let shards = (plan.m_bits / 512).div_ceil(BLOCKS_PER_SHARD);
            let mut seen_shards = std::collections::BTreeSet::new();
            let mut offsets = Vec::new();
            for i in 0..20_000 {
                let key = format!("http://h{}.test/page/{i}", i % 7);
                let shard = bloom_bits(&plan, 1, key.as_bytes(), &mut offsets);
                assert!(shard < shards, "shard {shard} of {shards}");
                seen_shards.insert(shard);
                assert!(!offsets.is_empty() && offsets.len() <= plan.k as usize);
                let last_block = plan.m_bits / 512 - shard * BLOCKS_PER_SHARD;
                for &o in &offsets {
                    assert!(o / 512 < last_block.min(BLOCKS_PER_SHARD), "{o}");
                    assert_ne!(o % 512, 511, "the lock bit");
                }
                // One block per key.
                assert!(offsets.iter().all(|o| o / 512 == offsets[0] / 512));
            }
            assert_eq!(seen_shards.len() as u64, shards, "keys reach every shard");
        }
    }

    #[test]
    fn crawl_keys_share_one_cluster_hash_tag() {
        assert_eq!(prefix("news-2026"), "crawl:{news-2026}:");
        assert_eq!(shard_prefix("news-2026", 7), "crawl:{news-2026:7}:");
        assert!(redis_layout(&Plan::for_fpp(100_000_000, 0.001).unwrap()).contains("1 string key"));
    }

    /// Hosts spread over the shards, each always to the same one, and a token names its
    /// lease's shard and host.
    #[test]
    fn hosts_spread_over_shards_and_tokens_name_theirs() {
        let mut per_shard = vec![0u32; 64];
        for i in 0..6400 {
            let host = format!("https://h{i}.example");
            let shard = shard_of(&host, 64);
            assert_eq!(shard, shard_of(&host, 64));
            per_shard[shard as usize] += 1;
        }
        assert!(
            per_shard.iter().all(|&n| (50..=150).contains(&n)),
            "{per_shard:?}"
        );
        assert_eq!(
            token_parts("12/345/http://h.test:8080"),
            Some((12, "http://h.test:8080"))
        );
        assert_eq!(token_parts("nonsense"), None);
    }
}
