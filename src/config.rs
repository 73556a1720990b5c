//! The crawl's configuration: `config.toml`, then `--set section.key=value` overrides,
//! then the dedicated CLI flags, validated once at start.
//!
//! Guarantees: every key has a documented default (the repo's `config.toml` lists them
//! all); an unknown key, a value of the wrong type or an impossible value is refused
//! before any work starts, with the file (or `--set`) and the key named. Overrides are
//! applied to the TOML document *before* it is deserialized, so `--set` accepts exactly
//! what the file accepts and is checked by the same rules.
//!
//! The seen-set's size comes from the planner in [`crate::seen`]: `[seen] fpp` or
//! `[seen] memory` (one of them) together with `crawl.max_urls`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use crate::normalize::{NormalizeOptions, Normalizer};
use crate::quantity::{parse_byte_size, parse_count};
use crate::scope::ScopeOptions;

/// Why the configuration was refused. Every variant names where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read config", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("--set {assignment:?}: expected section.key=value, e.g. --set crawl.max_depth=5")]
    SetSyntax { assignment: String },
    #[error("--set {key}: unknown section {section:?}; sections are: {known}")]
    UnknownSection {
        key: String,
        section: String,
        known: String,
    },
    #[error("--set {key}: unknown key {name:?} in [{section}]; its keys are: {known}")]
    UnknownKey {
        key: String,
        section: String,
        name: String,
        known: String,
    },
    #[error("{origin}: {key}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

/// A command-line option that sets one config key, for [`Config::load_with_flags`].
#[derive(Debug, Clone)]
pub struct Flag {
    /// How the user wrote it, for messages: `--max-urls 0`.
    pub name: String,
    /// The key it sets, as a `--set` assignment: `crawl.max_urls=0`.
    pub assignment: String,
}

/// A URL count that accepts the same forms as `--max-urls` (`1e8`, `100M`, an integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        match Raw::deserialize(de)? {
            Raw::Int(v) if v >= 0 => Ok(Count(v as u64)),
            Raw::Int(v) => Err(serde::de::Error::custom(format!(
                "{v} is negative; a count must be ≥ 0"
            ))),
            Raw::Float(v) => parse_count(&format!("{v:e}"))
                .map(Count)
                .map_err(serde::de::Error::custom),
            Raw::Text(s) => parse_count(&s).map(Count).map_err(serde::de::Error::custom),
        }
    }
}

/// A byte size that accepts an integer or a string such as `"10MiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(de)? {
            Raw::Int(v) if v >= 0 => Ok(ByteSize(v as u64)),
            Raw::Int(v) => Err(serde::de::Error::custom(format!(
                "{v} is negative; a size must be ≥ 0"
            ))),
            Raw::Text(s) => parse_byte_size(&s)
                .map(ByteSize)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// `[crawl]`: what is crawled and how each fetch behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrawlSection {
    pub max_urls: Count,
    pub max_depth: u32,
    pub concurrency: usize,
    pub(crate) user_agent: String,
    pub max_body_bytes: ByteSize,
    pub timeout_secs: f64,
    pub(crate) connect_timeout_secs: f64,
    pub max_redirects: u32,
    pub retries: u32,
    pub(crate) content_types: Vec<String>,
    pub follow_nofollow: bool,
    /// Admit a page's canonical URL (`Link` header or `<link rel=canonical>`) as a link.
    pub follow_canonical: bool,
    /// Read sitemaps: robots.txt `Sitemap:` lines and each host's `/sitemap.xml`.
    pub sitemaps: bool,
    pub(crate) max_links_per_page: usize,
    /// Do not follow the links of a page its host already produced but for its digits
    /// (`crate::near_duplicate`).
    pub near_duplicates: bool,
    pub(crate) parse_threads: usize,
    pub shutdown_grace_secs: f64,
    /// How long one run may crawl ("2h", "90m"; humantime's forms) before it stops as on
    /// Ctrl-C; counted per run, so a `--resume` gets the whole limit again. Unset: no limit.
    pub max_duration: Option<String>,
}

impl Default for CrawlSection {
    fn default() -> Self {
        CrawlSection {
            max_urls: Count(1_000_000),
            max_depth: 1000,
            concurrency: 64,
            user_agent: concat!("crawler/", env!("CARGO_PKG_VERSION")).to_string(),
            max_body_bytes: ByteSize(10 << 20),
            timeout_secs: 30.0,
            connect_timeout_secs: 10.0,
            max_redirects: 5,
            retries: 2,
            content_types: vec!["text/html".into(), "application/xhtml+xml".into()],
            follow_nofollow: false,
            follow_canonical: true,
            sitemaps: false,
            max_links_per_page: 1_000_000,
            near_duplicates: true,
            parse_threads: 0,
            shutdown_grace_secs: 5.0,
            max_duration: None,
        }
    }
}

/// `[politeness]`: how hard one host may be hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolitenessSection {
    pub per_host_rps: f64,
    pub per_host_burst: u32,
    pub per_host_concurrency: u32,
    pub respect_robots: bool,
    pub robots_ttl_secs: f64,
    pub max_crawl_delay_secs: f64,
    pub enabled: bool,
    /// Requests per second to one server address, across all its names; 0 = no limit.
    pub per_ip_rps: f64,
    /// Requests in flight to one server address at once; 0 = no limit.
    pub per_ip_concurrency: u32,
    /// Slow a host down when it throttles (429/503 without Retry-After) or answers slowly
    /// (see `frontier/adapt.rs`).
    pub adaptive: bool,
    /// The longest interval between requests throttling may reach.
    pub adaptive_max_interval_secs: f64,
    /// The share of the configured interval one successful answer takes off a throttled one.
    pub adaptive_recovery: f64,
    /// The interval is at least this many times the last fetch's duration.
    pub adaptive_latency_factor: f64,
    /// … but never more than this.
    pub adaptive_max_latency_delay_secs: f64,
}

impl Default for PolitenessSection {
    fn default() -> Self {
        PolitenessSection {
            per_host_rps: 1.0,
            per_host_burst: 1,
            per_host_concurrency: 2,
            respect_robots: true,
            robots_ttl_secs: 86_400.0,
            max_crawl_delay_secs: 30.0,
            enabled: true,
            per_ip_rps: 0.0,
            per_ip_concurrency: 0,
            adaptive: true,
            adaptive_max_interval_secs: 60.0,
            adaptive_recovery: 0.1,
            adaptive_latency_factor: 5.0,
            adaptive_max_latency_delay_secs: 30.0,
        }
    }
}

/// `[seen]`: the URL-seen Bloom filter's sizing. One of `fpp` or `memory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct SeenSection {
    pub(crate) fpp: Option<f64>,
    pub(crate) memory: Option<ByteSize>,
    /// The Bloom filter fronts an exact set of admitted URLs on disk: a "maybe seen" is
    /// confirmed there, so no new URL is skipped as a false positive
    /// ([`crate::state_store::AdmittedSet`]).
    pub(crate) exact: bool,
}

/// `[state]`: the per-URL state store on disk ([`crate::state_store::StateStore`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct StateSection {
    /// Keep each URL's state in `OUT/state/`, written from the records.
    pub enabled: bool,
}

/// `[checkpoint]`: how often the crawl state is made durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointSection {
    pub interval_secs: f64,
    /// Seconds between background fsyncs of the queue log and `pages.jsonl` (what a power
    /// loss can cost between checkpoints).
    pub(crate) sync_interval_secs: f64,
}

impl Default for CheckpointSection {
    fn default() -> Self {
        CheckpointSection {
            interval_secs: 300.0,
            sync_interval_secs: 1.0,
        }
    }
}

/// `[recrawl]`: the schedule of `crawler recrawl` (see [`crate::recrawl`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecrawlSection {
    /// Shortest time between two fetches of one URL (`"0s"`: a recrawl right after a crawl
    /// takes every URL).
    pub min_interval: String,
    /// Longest time a URL waits between two fetches under `--continuous`, however rarely
    /// it changes.
    pub max_interval: String,
    /// Set by `crawler recrawl`, not a key: what [`Config::distributed_lacks`] refuses.
    #[serde(skip)]
    pub active: bool,
    /// Set by `crawler recrawl --continuous`, not a key.
    #[serde(skip)]
    pub continuous: bool,
}

impl Default for RecrawlSection {
    fn default() -> Self {
        RecrawlSection {
            min_interval: "1h".into(),
            max_interval: "30d".into(),
            active: false,
            continuous: false,
        }
    }
}

/// `[frontier]`: how much of the frontier is kept in memory; the rest lives on disk under
/// `OUT/frontier/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrontierSection {
    /// Queued URLs held in memory: each busy host's newest URLs (written out in blocks) and
    /// the next few to fetch, plus the write buffer.
    pub(crate) memory: ByteSize,
    /// Per-host state held in memory (politeness schedule, parsed robots.txt, the name's
    /// budget, with the maps' slack: ~1 KB a host plus its key and rules); idle hosts beyond
    /// it are evicted and restored from disk when their turn comes.
    pub host_memory: ByteSize,
}

impl Default for FrontierSection {
    fn default() -> Self {
        FrontierSection {
            memory: ByteSize(64 << 20),
            host_memory: ByteSize(64 << 20),
        }
    }
}

/// `[output]`: where records go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputSection {
    pub dir: PathBuf,
    pub(crate) format: String,
    pub(crate) progress_interval_secs: f64,
    /// Archive every fetch as WARC/1.1 under `OUT/warc/` (see [`crate::warc`]).
    pub warc: bool,
    /// A WARC file is closed and the next one begun once it reaches this size.
    pub warc_max_bytes: ByteSize,
    /// The start of each WARC file's name: `PREFIX-TIMESTAMP-SERIAL.warc.gz`.
    pub warc_prefix: String,
    /// Memory for the index of payload digests already archived (content-level dedup): the
    /// most it takes; it starts at 1 MiB and grows to this as it fills.
    pub warc_dedup_memory: ByteSize,
    /// gzip level of the WARC records: 0 stores them (still one gzip member each), 1
    /// (fastest) to 9 (smallest).
    pub warc_gzip_level: u32,
    /// Records whose payload is compressed already (sent content-coded, or an image, video,
    /// archive…) are stored in their gzip member rather than deflated again.
    pub warc_store_compressed: bool,
    /// Where records are deflated: on threads of idle priority, stored when they fall
    /// behind (`spare-cpu`), or where each fetch ends, on the crawl's CPU (`always`); see
    /// [`crate::warc`].
    pub warc_deflate: crate::warc::WarcDeflate,
    /// With `warc_deflate = "spare-cpu"`: how much memory of records may wait for the
    /// deflate threads before the oldest is stored.
    pub warc_deflate_window: ByteSize,
}

impl Default for OutputSection {
    fn default() -> Self {
        OutputSection {
            dir: PathBuf::from("crawl-out"),
            format: "jsonl".into(),
            progress_interval_secs: 5.0,
            warc: false,
            warc_max_bytes: ByteSize(1_000_000_000),
            warc_prefix: "crawler".into(),
            warc_dedup_memory: ByteSize(32 << 20),
            warc_gzip_level: 1,
            warc_store_compressed: true,
            warc_deflate: crate::warc::WarcDeflate::SpareCpu,
            warc_deflate_window: ByteSize(16 << 20),
        }
    }
}

/// The codings `network.accept_encoding` may offer: those [`crate::content_coding`] decodes.
const ACCEPTABLE_CODINGS: [&str; 3] = ["gzip", "deflate", "br"];

/// `[network]`: name resolution (overrides like curl's `--resolve`, the DNS client that
/// the `dns` module builds from it) and extra trusted certificate authorities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkSection {
    /// A PEM file of root certificates trusted besides the system's (a private CA, the
    /// synthetic web's made-up one).
    pub ca_file: Option<PathBuf>,
    pub resolve: BTreeMap<String, String>,
    /// DNS servers to ask ("IP" or "IP:port"); empty: the system's.
    pub dns_servers: Vec<String>,
    /// Bounds on how long a DNS answer is kept, whatever its TTL says.
    pub dns_min_ttl_secs: f64,
    pub dns_max_ttl_secs: f64,
    /// The content codings offered in `Accept-Encoding`, in order: some of `gzip`,
    /// `deflate` and `br` (the ones `crate::content_coding` decodes). `br` is left out by
    /// default, as Heritrix does: archived `br` records break common WARC readers (warcio
    /// 1.8.1 with brotli 1.2 fails on every one, and pywb with it).
    pub accept_encoding: Vec<String>,
    /// Headers sent with every request besides the client's own (see
    /// `Config::extra_headers` for those that may not be set this way).
    pub headers: BTreeMap<String, String>,
    /// Keep the cookies hosts set and send them back (RFC 6265), kept across `--resume`.
    pub cookies: bool,
    /// The most cookies the jar holds; new ones beyond it are not kept.
    pub max_cookies: usize,
    /// Every request goes through this proxy: `http://`, `https://` or `socks5://` (with
    /// `user:password@` if it needs them; never shown).
    pub proxy: Option<String>,
    /// Take the proxy from `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy` (as curl
    /// does) when `proxy` is not set.
    pub proxy_from_env: bool,
}

impl Default for NetworkSection {
    fn default() -> Self {
        NetworkSection {
            ca_file: None,
            resolve: BTreeMap::new(),
            dns_servers: Vec::new(),
            dns_min_ttl_secs: 5.0,
            dns_max_ttl_secs: 3600.0,
            accept_encoding: vec!["gzip".into(), "deflate".into()],
            headers: BTreeMap::new(),
            cookies: false,
            max_cookies: 10_000,
            proxy: None,
            proxy_from_env: false,
        }
    }
}

/// A `network.dns_servers` entry: `"IP"` (port 53) or `"IP:port"` / `"[v6]:port"`. Parsed
/// here, where the key is checked, so that the configuration never calls the DNS module.
pub(crate) fn parse_dns_server(value: &str) -> Option<std::net::SocketAddr> {
    if let Ok(ip) = value.parse::<std::net::IpAddr>() {
        return Some(std::net::SocketAddr::new(ip, 53));
    }
    value.parse::<std::net::SocketAddr>().ok()
}

/// `[distributed]`: one crawl shared by several processes through Redis (see
/// `crate::distributed`). Without `redis` the crawl is a single process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DistributedSection {
    /// `redis://host:6379/0`: the Redis holding the shared crawl.
    pub redis: Option<String>,
    /// The crawl every process started with this id joins.
    pub crawl_id: Option<String>,
    /// How long a process holds a host's URLs without a heartbeat before another reclaims them.
    pub lease_secs: f64,
    /// URLs taken from a host's queue per lease.
    pub lease_urls: u32,
    /// How long Redis may stay unreachable before the process stops (resumably).
    pub redis_timeout_secs: f64,
    /// Host shards (Redis hash tags) the crawl's queues and seen-set are spread over.
    pub shards: u32,
    /// Replicas every write waits for (`WAIT`) before its answer is used: 1 on a Redis
    /// Cluster with a replica per primary, so that a failover loses nothing acknowledged.
    pub replicas: u32,
    /// With `output.warc`: payloads archived in full kept in Redis for the other processes
    /// to write revisits of (about URL bytes + 110 each); 0 turns sharing off.
    pub shared_payloads: u64,
}

impl Default for DistributedSection {
    fn default() -> Self {
        DistributedSection {
            redis: None,
            crawl_id: None,
            lease_secs: 30.0,
            lease_urls: 32,
            redis_timeout_secs: 60.0,
            shards: crate::distributed::DEFAULT_SHARDS,
            replicas: 0,
            shared_payloads: 4_000_000,
        }
    }
}

/// `[monitor]`: the live metrics and status page (see `crate::monitor`). Off unless
/// `listen` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorSection {
    /// `IP:port` to serve `/metrics`, `/status.json` and `/` on (`--listen`).
    pub listen: Option<String>,
    /// How long the final figures stay served after the crawl ends.
    pub linger_secs: f64,
    /// Hosts with series of their own in `/metrics` and rows in `/status.json`.
    pub top_hosts: usize,
}

impl Default for MonitorSection {
    fn default() -> Self {
        MonitorSection {
            listen: None,
            linger_secs: 0.0,
            top_hosts: 10,
        }
    }
}

/// The whole configuration, after validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub crawl: CrawlSection,
    pub politeness: PolitenessSection,
    pub(crate) seen: SeenSection,
    pub checkpoint: CheckpointSection,
    pub frontier: FrontierSection,
    pub output: OutputSection,
    pub network: NetworkSection,
    pub normalize: NormalizeOptions,
    pub scope: ScopeOptions,
    pub distributed: DistributedSection,
    pub monitor: MonitorSection,
    pub recrawl: RecrawlSection,
    pub state: StateSection,
    /// `[[site]]` sections: per-site settings, first match wins (see [`crate::site`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub site: Vec<crate::site::SiteSection>,
}

/// The keys of each section, for `--set` errors. A unit test keeps this in step with
/// the structs above.
pub(crate) const SECTIONS: &[(&str, &[&str])] = &[
    (
        "crawl",
        &[
            "max_urls",
            "max_depth",
            "concurrency",
            "user_agent",
            "max_body_bytes",
            "timeout_secs",
            "connect_timeout_secs",
            "max_redirects",
            "retries",
            "content_types",
            "follow_nofollow",
            "follow_canonical",
            "sitemaps",
            "max_links_per_page",
            "near_duplicates",
            "parse_threads",
            "shutdown_grace_secs",
            "max_duration",
        ],
    ),
    (
        "politeness",
        &[
            "per_host_rps",
            "per_host_burst",
            "per_host_concurrency",
            "respect_robots",
            "robots_ttl_secs",
            "max_crawl_delay_secs",
            "enabled",
            "per_ip_rps",
            "per_ip_concurrency",
            "adaptive",
            "adaptive_max_interval_secs",
            "adaptive_recovery",
            "adaptive_latency_factor",
            "adaptive_max_latency_delay_secs",
        ],
    ),
    ("seen", &["fpp", "memory", "exact"]),
    ("state", &["enabled"]),
    ("checkpoint", &["interval_secs", "sync_interval_secs"]),
    ("recrawl", &["min_interval", "max_interval"]),
    ("frontier", &["memory", "host_memory"]),
    (
        "output",
        &[
            "dir",
            "format",
            "progress_interval_secs",
            "warc",
            "warc_max_bytes",
            "warc_prefix",
            "warc_dedup_memory",
            "warc_gzip_level",
            "warc_store_compressed",
            "warc_deflate",
            "warc_deflate_window",
        ],
    ),
    (
        "network",
        &[
            "ca_file",
            "resolve",
            "dns_servers",
            "dns_min_ttl_secs",
            "dns_max_ttl_secs",
            "accept_encoding",
            "headers",
            "cookies",
            "max_cookies",
            "proxy",
            "proxy_from_env",
        ],
    ),
    (
        "distributed",
        &[
            "redis",
            "crawl_id",
            "lease_secs",
            "lease_urls",
            "redis_timeout_secs",
            "shards",
            "replicas",
            "shared_payloads",
        ],
    ),
    ("monitor", &["listen", "linger_secs", "top_hosts"]),
    ("scope", ScopeOptions::KEYS),
    (
        "normalize",
        &[
            "sort_query",
            "strip_params",
            "strip_default_documents",
            "fold_www",
            "collapse_slashes",
        ],
    ),
];

/// A resolve rule: a host pattern (`example.test` or `*.test`) and the address to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolveRule {
    pub(crate) pattern: String,
    pub(crate) addr: std::net::SocketAddr,
}

impl ResolveRule {
    /// Whether `host` (already lowercase) matches: `*.test` matches `a.test` and
    /// `b.a.test` but not `test` itself.
    pub(crate) fn matches(&self, host: &str) -> bool {
        host_matches(&self.pattern, host)
    }
}

/// Whether `host` (lowercase) matches host pattern `pattern` (lowercase): a name matches
/// itself, `*.test` matches `a.test` and `b.a.test` but not `test` itself. Shared by
/// `[network] resolve` and `[[site]]`.
pub(crate) fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
        }
        None => host == pattern,
    }
}

/// `path:line` of the byte offset where a TOML error starts (`path` alone without one).
fn at_line(path: &Path, text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let line = 1 + text
                .as_bytes()
                .iter()
                .take(span.start)
                .filter(|&&b| b == b'\n')
                .count();
            format!("{}:{line}", path.display())
        }
        None => path.display().to_string(),
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" said as the `--set` errors say it,
/// with the section the key is in (the nearest `[section]` header above it).
fn file_error_message(
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: &str,
) -> Option<String> {
    let (name, known) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once("`, expected one of "))?;
    let span = span?;
    let section = text
        .get(..span.start)
        .unwrap_or_default()
        .lines()
        .rev()
        .map(str::trim)
        .find_map(|line| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')));
    let known = known.replace('`', "");
    Some(match section {
        Some(section) => format!(
            "unknown key {name:?} in [{}]; its keys are: {known}",
            section.trim()
        ),
        None => format!("unknown section {name:?}; sections are: {known}"),
    })
}

/// Why a distributed crawl takes neither `--resume` nor `--fresh` (see
/// [`Config::distributed_lacks`]).
pub const DISTRIBUTED_RESUME: &str = "--resume and --fresh are for a single-process crawl: a distributed crawl resumes when its processes start again with the same --crawl-id";

impl Config {
    /// What distributed mode (`[distributed] redis`) does not do, as (setting, reason), for
    /// the settings of this configuration that ask for it: the one place that says so. The
    /// rest is at parity with a local crawl (the driver is the same: descriptor budget and
    /// raised open-file limit, seeds counted alike); `--resume` and `--fresh` are refused
    /// by the CLI with [`DISTRIBUTED_RESUME`].
    pub fn distributed_lacks(&self) -> Vec<(&'static str, &'static str)> {
        let mut lacks = Vec::new();
        if self.recrawl.active {
            lacks.push((
                "recrawl",
                "a recrawl asks each URL with what the earlier generations recorded for it, \
                 which a local crawl reads from its own pages.jsonl; a distributed crawl's \
                 records are spread over its processes' files and its per-URL state is not \
                 kept in Redis, so no process knows what to ask with; recrawl a local crawl",
            ));
        }
        if self.crawl.sitemaps {
            lacks.push((
                "crawl.sitemaps",
                "a sitemap is queued as a marked URL, and Redis's queues keep no mark yet, so \
                 the URLs it lists would have no shared admission; turn one of them off",
            ));
        }
        if self.seen.exact {
            lacks.push((
                "seen.exact",
                "the exact set of admitted URLs is kept on one machine's disk, and the \
                 processes of a distributed crawl admit through the seen-set in Redis; set it \
                 to false",
            ));
        }
        if self.state.enabled {
            lacks.push((
                "state.enabled",
                "the per-URL state store follows one journal (pages.jsonl) on one disk, and \
                 each process of a distributed crawl writes its own; set it to false",
            ));
        }
        let p = &self.politeness;
        if p.per_ip_rps > 0.0 {
            lacks.push((
                "politeness.per_ip_rps",
                "per-address budgets would need one budget per address shared by every \
                 process in Redis; each process would keep its own, so N processes would allow \
                 N times the limit; set it to 0",
            ));
        }
        if p.per_ip_concurrency > 0 {
            lacks.push((
                "politeness.per_ip_concurrency",
                "per-address budgets would need one budget per address shared by every \
                 process in Redis; each process would keep its own, so N processes would allow \
                 N times the limit; set it to 0",
            ));
        }
        lacks
    }

    /// Sets `[seen] exact` (for benches; `--set seen.exact=true` otherwise).
    pub fn set_seen_exact(&mut self, exact: bool) {
        self.seen.exact = exact;
    }

    /// Loads `path` (or the defaults when `None`) and applies `--set` overrides.
    pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<Config, ConfigError> {
        Config::load_with_flags(path, overrides, &[])
    }

    /// [`Config::load`], then the command-line options that set one key each (`--max-urls
    /// N` sets `crawl.max_urls`), applied last. A value refused for a key an option set is
    /// blamed on that option (`--max-urls 0: crawl.max_urls: …`), not on `--set` overrides
    /// that may not exist.
    pub fn load_with_flags(
        path: Option<&Path>,
        overrides: &[String],
        flags: &[Flag],
    ) -> Result<Config, ConfigError> {
        let (origin, mut table) = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                    origin: at_line(path, &text, e.span()),
                    message: one_line(e.message()),
                })?;
                // The file alone, typed: its errors carry the line they are on; the typed
                // table's carry the key's full name. Say both.
                if let Err(e) = toml::from_str::<Config>(&text) {
                    let keyed = Config::deserialize(toml::Value::Table(table.clone()))
                        .err()
                        .map(|e| one_line(&e.to_string()));
                    return Err(ConfigError::Parse {
                        origin: at_line(path, &text, e.span()),
                        message: file_error_message(&text, e.span(), e.message())
                            .or(keyed)
                            .unwrap_or_else(|| one_line(e.message())),
                    });
                }
                (path.display().to_string(), table)
            }
            None => ("defaults".to_string(), toml::Table::new()),
        };
        for assignment in overrides {
            apply_override(&mut table, assignment)?;
        }
        for flag in flags {
            apply_override(&mut table, &flag.assignment)?;
        }
        let origin = if overrides.is_empty() {
            origin
        } else {
            format!("{origin} with --set overrides")
        };
        let config: Config =
            Config::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Parse {
                origin: origin.clone(),
                message: one_line(&e.to_string()),
            })?;
        config.validate(&origin).map_err(|e| match e {
            ConfigError::Invalid {
                origin,
                key,
                message,
            } => {
                let set_by = flags
                    .iter()
                    .rev()
                    .find(|f| f.assignment.split('=').next().map(str::trim) == Some(key.as_str()));
                ConfigError::Invalid {
                    origin: set_by.map_or(origin, |f| f.name.clone()),
                    key,
                    message,
                }
            }
            other => other,
        })?;
        Ok(config)
    }

    /// Parses a TOML document (used by tests and by [`Config::load`]).
    #[cfg(test)]
    pub(crate) fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: one_line(&e.to_string()),
        })?;
        config.validate(origin)?;
        Ok(config)
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            key: key.to_string(),
            message,
        };
        self.recrawl_intervals().map_err(|e| match e {
            ConfigError::Invalid { key, message, .. } => ConfigError::Invalid {
                origin: origin.to_string(),
                key,
                message,
            },
            other => other,
        })?;
        let m = &self.monitor;
        if let Some(listen) = &m.listen {
            if listen.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "monitor.listen",
                    format!("{listen:?} is not an IP:port address such as \"127.0.0.1:9187\""),
                ));
            }
        }
        if !(m.linger_secs.is_finite() && (0.0..=86_400.0).contains(&m.linger_secs)) {
            return Err(invalid(
                "monitor.linger_secs",
                format!("{} is not in [0, 86400] seconds", m.linger_secs),
            ));
        }
        if !(1..=crate::monitor::MAX_TOP_HOSTS).contains(&m.top_hosts) {
            return Err(invalid(
                "monitor.top_hosts",
                format!(
                    "{} is out of range 1..={}",
                    m.top_hosts,
                    crate::monitor::MAX_TOP_HOSTS
                ),
            ));
        }
        let c = &self.crawl;
        if c.max_urls.0 == 0 {
            return Err(invalid(
                "crawl.max_urls",
                "must be at least 1 (the seeds count)".into(),
            ));
        }
        if c.concurrency == 0 || c.concurrency > 100_000 {
            return Err(invalid(
                "crawl.concurrency",
                format!("{} is out of range 1..=100000", c.concurrency),
            ));
        }
        if c.user_agent.trim().is_empty() || c.user_agent.contains(['\r', '\n']) {
            return Err(invalid(
                "crawl.user_agent",
                "must be one non-empty line".into(),
            ));
        }
        if c.max_body_bytes.0 == 0 {
            return Err(invalid(
                "crawl.max_body_bytes",
                "must be greater than 0".into(),
            ));
        }
        for (key, value) in [
            ("crawl.timeout_secs", c.timeout_secs),
            ("crawl.connect_timeout_secs", c.connect_timeout_secs),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
                return Err(invalid(
                    key,
                    format!("{value} is not in (0, 86400] seconds"),
                ));
            }
        }
        if !(c.shutdown_grace_secs.is_finite() && c.shutdown_grace_secs >= 0.0) {
            return Err(invalid(
                "crawl.shutdown_grace_secs",
                "must be ≥ 0 seconds".into(),
            ));
        }
        if c.max_redirects > 100 {
            return Err(invalid(
                "crawl.max_redirects",
                format!("{} is more than 100", c.max_redirects),
            ));
        }
        if c.retries > 100 {
            return Err(invalid(
                "crawl.retries",
                format!("{} is more than 100", c.retries),
            ));
        }
        if c.content_types.is_empty() || c.content_types.iter().any(|t| !t.contains('/')) {
            return Err(invalid(
                "crawl.content_types",
                "must list MIME types such as \"text/html\"".into(),
            ));
        }
        let p = &self.politeness;
        if !(p.per_host_rps.is_finite() && p.per_host_rps > 0.0) {
            return Err(invalid(
                "politeness.per_host_rps",
                format!(
                    "{} must be a positive number of requests per second",
                    p.per_host_rps
                ),
            ));
        }
        if !(p.max_crawl_delay_secs.is_finite() && p.max_crawl_delay_secs > 0.0) {
            return Err(invalid(
                "politeness.max_crawl_delay_secs",
                format!(
                    "{} is not a positive number of seconds",
                    p.max_crawl_delay_secs
                ),
            ));
        }
        if !(p.robots_ttl_secs.is_finite() && p.robots_ttl_secs > 0.0) {
            return Err(invalid(
                "politeness.robots_ttl_secs",
                "must be a positive number of seconds".into(),
            ));
        }
        if p.per_host_burst == 0 {
            return Err(invalid(
                "politeness.per_host_burst",
                "must be at least 1".into(),
            ));
        }
        if p.per_host_concurrency == 0 {
            return Err(invalid(
                "politeness.per_host_concurrency",
                "must be at least 1".into(),
            ));
        }
        for (key, secs) in [
            (
                "politeness.adaptive_max_interval_secs",
                p.adaptive_max_interval_secs,
            ),
            (
                "politeness.adaptive_max_latency_delay_secs",
                p.adaptive_max_latency_delay_secs,
            ),
        ] {
            if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
                return Err(invalid(
                    key,
                    format!("{secs} is not a number of seconds in (0, 86400]"),
                ));
            }
        }
        if !(p.adaptive_recovery.is_finite()
            && p.adaptive_recovery > 0.0
            && p.adaptive_recovery <= 1.0)
        {
            return Err(invalid(
                "politeness.adaptive_recovery",
                format!(
                    "{} is not a share of the interval in (0, 1]",
                    p.adaptive_recovery
                ),
            ));
        }
        if !(p.adaptive_latency_factor.is_finite()
            && (0.0..=1000.0).contains(&p.adaptive_latency_factor))
        {
            return Err(invalid(
                "politeness.adaptive_latency_factor",
                format!(
                    "{} is not a factor in [0, 1000] (0 turns the latency delay off)",
                    p.adaptive_latency_factor
                ),
            ));
        }
        if !(p.per_ip_rps.is_finite() && p.per_ip_rps >= 0.0) {
            return Err(invalid(
                "politeness.per_ip_rps",
                format!(
                    "{} must be a number of requests per second, or 0 for no limit",
                    p.per_ip_rps
                ),
            ));
        }
        let n = &self.network;
        if let Some(bad) = n.dns_servers.iter().find(|s| parse_dns_server(s).is_none()) {
            return Err(invalid(
                "network.dns_servers",
                format!("{bad:?} is not an address (\"9.9.9.9\" or \"127.0.0.1:5353\")"),
            ));
        }
        for (key, secs) in [
            ("network.dns_min_ttl_secs", n.dns_min_ttl_secs),
            ("network.dns_max_ttl_secs", n.dns_max_ttl_secs),
        ] {
            if !(secs.is_finite() && secs >= 0.0) {
                return Err(invalid(
                    key,
                    "must be a number of seconds, 0 or more".into(),
                ));
            }
        }
        if n.dns_min_ttl_secs > n.dns_max_ttl_secs {
            return Err(invalid(
                "network.dns_min_ttl_secs",
                format!(
                    "{} is over network.dns_max_ttl_secs = {}",
                    n.dns_min_ttl_secs, n.dns_max_ttl_secs
                ),
            ));
        }
        match (self.seen.fpp, self.seen.memory) {
            (Some(_), Some(_)) => {
                return Err(invalid("seen", "set either fpp or memory, not both".into()))
            }
            (Some(fpp), None) if !(fpp > 0.0 && fpp < 1.0) => {
                return Err(invalid(
                    "seen.fpp",
                    format!("{fpp} is outside (0, 1); 0.001 is a common choice"),
                ))
            }
            _ => {}
        }
        if !(self.checkpoint.interval_secs.is_finite() && self.checkpoint.interval_secs > 0.0) {
            return Err(invalid(
                "checkpoint.interval_secs",
                "must be a positive number of seconds".into(),
            ));
        }
        let sync = self.checkpoint.sync_interval_secs;
        if !(sync.is_finite() && sync > 0.0) {
            return Err(invalid(
                "checkpoint.sync_interval_secs",
                "must be a positive number of seconds; 1 is the default".into(),
            ));
        }
        let d = &self.distributed;
        if let Some(id) = &d.crawl_id {
            let ok = !id.is_empty()
                && id.len() <= 64
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(invalid(
                    "distributed.crawl_id",
                    "must be 1 to 64 letters, digits, '-', '_' or '.'".into(),
                ));
            }
        }
        if d.redis.is_some() && d.crawl_id.is_none() {
            return Err(invalid(
                "distributed.crawl_id",
                "must be set with distributed.redis (every process of a crawl gives the same)"
                    .into(),
            ));
        }
        if d.redis.is_some() {
            if let Some((key, reason)) = self.distributed_lacks().first() {
                return Err(invalid(
                    key,
                    format!("is not supported with distributed.redis: {reason}"),
                ));
            }
        }
        for (key, secs) in [
            ("distributed.lease_secs", d.lease_secs),
            ("distributed.redis_timeout_secs", d.redis_timeout_secs),
        ] {
            if !(secs.is_finite() && secs > 0.0) {
                return Err(invalid(key, "must be a positive number of seconds".into()));
            }
        }
        if !(1..=16384).contains(&d.shards) {
            return Err(invalid(
                "distributed.shards",
                format!(
                    "{} is out of range 1..=16384 (Redis Cluster's hash slots)",
                    d.shards
                ),
            ));
        }
        if d.replicas > 16 {
            return Err(invalid(
                "distributed.replicas",
                format!("{} is out of range 0..=16", d.replicas),
            ));
        }
        if !(1..=1000).contains(&d.lease_urls) {
            return Err(invalid(
                "distributed.lease_urls",
                format!("{} is out of range 1..=1000", d.lease_urls),
            ));
        }
        if self.frontier.memory.0 < 1 << 20 {
            return Err(invalid(
                "frontier.memory",
                "must be at least 1 MiB; 64MiB is the default".into(),
            ));
        }
        if self.frontier.host_memory.0 < 1 << 20 {
            return Err(invalid(
                "frontier.host_memory",
                "must be at least 1 MiB; 64MiB is the default".into(),
            ));
        }
        if self.output.format != "jsonl" {
            return Err(invalid(
                "output.format",
                format!("{:?} is not supported; use \"jsonl\"", self.output.format),
            ));
        }
        if self.output.warc_max_bytes.0 < 64 << 10 {
            return Err(invalid(
                "output.warc_max_bytes",
                "must be at least 64 KiB; 1GB is the default".into(),
            ));
        }
        let prefix = &self.output.warc_prefix;
        if prefix.is_empty()
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(invalid(
                "output.warc_prefix",
                format!(
                    "{prefix:?} must be letters, digits, '-', '_' or '.' (it starts file names)"
                ),
            ));
        }
        if self.output.warc_dedup_memory.0 < 1 << 16 {
            return Err(invalid(
                "output.warc_dedup_memory",
                "must be at least 64 KiB; 32MiB is the default".into(),
            ));
        }
        if !(0..=9).contains(&self.output.warc_gzip_level) {
            return Err(invalid(
                "output.warc_gzip_level",
                format!(
                    "{} is not a gzip level; use 0 (stored, no compression), 1 (fastest) to 9 (smallest)",
                    self.output.warc_gzip_level
                ),
            ));
        }
        if !(self.output.progress_interval_secs.is_finite()
            && self.output.progress_interval_secs > 0.0)
        {
            return Err(invalid(
                "output.progress_interval_secs",
                "must be a positive number of seconds".into(),
            ));
        }
        let mut offered: Vec<&str> = Vec::new();
        for coding in &self.network.accept_encoding {
            if !ACCEPTABLE_CODINGS.contains(&coding.as_str()) {
                return Err(invalid(
                    "network.accept_encoding",
                    format!(
                        "{coding:?} is not a coding the crawler decodes; use some of \"gzip\", \"deflate\", \"br\""
                    ),
                ));
            }
            if offered.contains(&coding.as_str()) {
                return Err(invalid(
                    "network.accept_encoding",
                    format!("{coding:?} is listed twice"),
                ));
            }
            offered.push(coding);
        }
        crate::site::Sites::new(&self.site).map_err(|e| ConfigError::Invalid {
            origin: origin.to_string(),
            key: format!("site[{}].{}", e.index, e.key),
            message: e.message,
        })?;
        self.resolve_rules_with_origin(origin)?;
        self.extra_root_certificates_with_origin(origin)?;
        self.fetch_controls_with_origin(origin)?;
        Normalizer::new(&self.normalize).map_err(|e| ConfigError::Invalid {
            origin: origin.to_string(),
            key: "normalize.strip_params".into(),
            message: e.to_string(),
        })?;
        self.scope.validate().map_err(|e| ConfigError::Invalid {
            origin: origin.to_string(),
            key: "scope".into(),
            message: e.to_string(),
        })?;
        Ok(())
    }

    /// The URL normalizer `[normalize]` describes (validated by [`Config::load`]).
    pub fn normalizer(&self) -> Result<Normalizer, ConfigError> {
        Normalizer::new(&self.normalize).map_err(|e| ConfigError::Invalid {
            origin: "config".into(),
            key: "normalize.strip_params".into(),
            message: e.to_string(),
        })
    }

    /// The `Accept-Encoding` header `network.accept_encoding` asks for: the codings in their
    /// order, or `identity` when the list is empty (a server may then still code a body;
    /// the fetch decodes it as ever).
    pub fn accept_encoding_header(&self) -> String {
        if self.network.accept_encoding.is_empty() {
            "identity".into()
        } else {
            self.network.accept_encoding.join(", ")
        }
    }

    /// The certificates of `network.ca_file` (none without it), read and parsed.
    pub(crate) fn extra_root_certificates(&self) -> Result<Vec<reqwest::Certificate>, ConfigError> {
        self.extra_root_certificates_with_origin("config")
    }

    fn extra_root_certificates_with_origin(
        &self,
        origin: &str,
    ) -> Result<Vec<reqwest::Certificate>, ConfigError> {
        let Some(path) = &self.network.ca_file else {
            return Ok(Vec::new());
        };
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            key: "network.ca_file".into(),
            message: format!("{}: {message}", path.display()),
        };
        let pem = std::fs::read(path).map_err(|e| invalid(format!("cannot read: {e}")))?;
        // reqwest skips what is not a certificate block; a file with none is a mistake.
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| invalid(format!("not a PEM certificate file: {e}")))?;
        if certificates.is_empty() {
            return Err(invalid(
                "contains no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        Ok(certificates)
    }

    /// The `[network] resolve` map as checked rules.
    pub(crate) fn resolve_rules(&self) -> Result<Vec<ResolveRule>, ConfigError> {
        self.resolve_rules_with_origin("config")
    }

    fn resolve_rules_with_origin(&self, origin: &str) -> Result<Vec<ResolveRule>, ConfigError> {
        let mut rules = Vec::new();
        for (pattern, addr) in &self.network.resolve {
            let key = format!("network.resolve.{pattern:?}");
            let pattern_lc = pattern.to_ascii_lowercase();
            let body = pattern_lc.strip_prefix("*.").unwrap_or(&pattern_lc);
            if body.is_empty()
                || body.contains('*')
                || !body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(ConfigError::Invalid {
                    origin: origin.to_string(),
                    key,
                    message: "a host pattern is a host name or *.suffix".into(),
                });
            }
            let addr = addr.parse().map_err(|_| ConfigError::Invalid {
                origin: origin.to_string(),
                key: key.clone(),
                message: format!("{addr:?} is not an IP:port address such as \"127.0.0.1:8080\""),
            })?;
            rules.push(ResolveRule {
                pattern: pattern_lc,
                addr,
            });
        }
        // Exact names before wildcards, longer wildcards before shorter ones.
        rules.sort_by_key(|r| {
            (
                r.pattern.starts_with("*."),
                std::cmp::Reverse(r.pattern.len()),
            )
        });
        Ok(rules)
    }

    /// The configuration as TOML, for `crawler config`; a Redis or proxy password is shown
    /// as `***`.
    pub fn to_toml(&self) -> String {
        // What `crawler config` prints: a Redis or proxy password never is.
        let mut shown = self.clone();
        shown.distributed.redis = shown
            .distributed
            .redis
            .map(|url| crate::distributed::redacted_url(&url));
        shown.network.proxy = shown
            .network
            .proxy
            .map(|url| crate::distributed::redacted_url(&url));
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# cannot render config: {e}\n"))
    }
}

/// Request headers the client owns: hop-by-hop ones (RFC 9110 §7.6.1), those that describe
/// the message hyper frames, and those the crawler sets itself (`Accept-Encoding` must match
/// what it decodes and archives; the user agent is `crawl.user_agent`; cookies come from the
/// jar, `network.cookies`).
const RESERVED_HEADERS: [&str; 14] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    "user-agent",
    "cookie",
    "expect",
];

/// The proxy schemes `network.proxy` accepts (reqwest's `socks` feature gives `socks5`).
const PROXY_SCHEMES: [&str; 4] = ["http", "https", "socks5", "socks5h"];

impl Config {
    /// `network.headers` as a header map, checked (see [`RESERVED_HEADERS`]).
    pub(crate) fn extra_headers(&self) -> Result<reqwest::header::HeaderMap, ConfigError> {
        self.extra_headers_with_origin("config")
    }

    fn extra_headers_with_origin(
        &self,
        origin: &str,
    ) -> Result<reqwest::header::HeaderMap, ConfigError> {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in &self.network.headers {
            let invalid = |message: String| ConfigError::Invalid {
                origin: origin.to_string(),
                key: format!("network.headers.{name:?}"),
                message,
            };
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid("is not a valid header name".into()))?;
            if RESERVED_HEADERS.contains(&header.as_str()) {
                return Err(invalid(
                    "is set by the crawler itself and may not be overridden here".into(),
                ));
            }
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| invalid(format!("{value:?} is not a valid header value")))?;
            map.insert(header, value);
        }
        Ok(map)
    }

    /// `[recrawl] min_interval` and `max_interval` as durations.
    pub fn recrawl_intervals(
        &self,
    ) -> Result<(std::time::Duration, std::time::Duration), ConfigError> {
        let parse = |key: &str, text: &str| {
            humantime::parse_duration(text).map_err(|e| ConfigError::Invalid {
                origin: "config".into(),
                key: format!("recrawl.{key}"),
                message: format!("{text:?} is not a duration like \"0s\", \"1h\" or \"30d\" ({e})"),
            })
        };
        let min = parse("min_interval", &self.recrawl.min_interval)?;
        let max = parse("max_interval", &self.recrawl.max_interval)?;
        if max < min {
            return Err(ConfigError::Invalid {
                origin: "config".into(),
                key: "recrawl.max_interval".into(),
                message: format!(
                    "{:?} is shorter than recrawl.min_interval = {:?}",
                    self.recrawl.max_interval, self.recrawl.min_interval
                ),
            });
        }
        Ok((min, max))
    }

    /// `crawl.max_duration` as a duration (`None`: no limit).
    pub fn max_duration(&self) -> Result<Option<std::time::Duration>, ConfigError> {
        self.max_duration_with_origin("config")
    }

    fn max_duration_with_origin(
        &self,
        origin: &str,
    ) -> Result<Option<std::time::Duration>, ConfigError> {
        let Some(text) = &self.crawl.max_duration else {
            return Ok(None);
        };
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            key: "crawl.max_duration".into(),
            message,
        };
        let limit = humantime::parse_duration(text).map_err(|e| {
            invalid(format!(
                "{text:?} is not a duration like \"2h\" or \"90m\" ({e})"
            ))
        })?;
        if limit.is_zero() {
            return Err(invalid("must be longer than 0".into()));
        }
        Ok(Some(limit))
    }

    fn fetch_controls_with_origin(&self, origin: &str) -> Result<(), ConfigError> {
        self.extra_headers_with_origin(origin)?;
        self.max_duration_with_origin(origin)?;
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            key: key.to_string(),
            message,
        };
        if self.network.cookies && self.network.max_cookies == 0 {
            return Err(invalid(
                "network.max_cookies",
                "must be at least 1 with network.cookies on".into(),
            ));
        }
        if let Some(proxy) = &self.network.proxy {
            let shown = crate::distributed::redacted_url(proxy);
            let parsed = url::Url::parse(proxy).map_err(|_| {
                invalid(
                    "network.proxy",
                    format!("{shown:?} is not a URL like \"http://proxy.example:3128\""),
                )
            })?;
            if !PROXY_SCHEMES.contains(&parsed.scheme()) || parsed.host_str().is_none() {
                return Err(invalid(
                    "network.proxy",
                    format!("{shown:?}: use an http://, https:// or socks5:// URL with a host"),
                ));
            }
        }
        Ok(())
    }
}

fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), ConfigError> {
    let syntax = || ConfigError::SetSyntax {
        assignment: assignment.to_string(),
    };
    let (key, value) = assignment.split_once('=').ok_or_else(syntax)?;
    let key = key.trim();
    let (section, rest) = key.split_once('.').ok_or_else(syntax)?;
    let known_sections = || {
        SECTIONS
            .iter()
            .map(|(s, _)| *s)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((_, keys)) = SECTIONS.iter().find(|(s, _)| *s == section) else {
        return Err(ConfigError::UnknownSection {
            key: key.to_string(),
            section: section.to_string(),
            known: known_sections(),
        });
    };
    // `network.resolve."*.test"=…` addresses a map entry; everything else is a plain key.
    let (name, map_key) = match rest.split_once('.') {
        Some((name, map_key)) => (name, Some(map_key.trim_matches('"'))),
        None => (rest, None),
    };
    if !keys.contains(&name) || (map_key.is_some() && name != "resolve") {
        return Err(ConfigError::UnknownKey {
            key: key.to_string(),
            section: section.to_string(),
            name: rest.to_string(),
            known: keys.join(", "),
        });
    }
    let value = parse_override_value(value.trim());
    let section_table = table
        .entry(section.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(section_table) = section_table else {
        return Err(ConfigError::Invalid {
            origin: "config".into(),
            key: section.into(),
            message: "is not a table".into(),
        });
    };
    match map_key {
        Some(map_key) => {
            let map = section_table
                .entry(name.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(map) = map else {
                return Err(ConfigError::Invalid {
                    origin: "config".into(),
                    key: format!("{section}.{name}"),
                    message: "is not a table".into(),
                });
            };
            map.insert(map_key.to_string(), value);
        }
        None => {
            section_table.insert(name.to_string(), value);
        }
    }
    Ok(())
}

/// A `--set` value is read as TOML when it is valid TOML (`5`, `true`, `["a"]`,
/// `{ "*.test" = "127.0.0.1:1" }`) and as a plain string otherwise, so that
/// `--set crawl.user_agent=mybot/1.0` needs no quoting.
fn parse_override_value(text: &str) -> toml::Value {
    let doc = format!("v = {text}");
    match toml::from_str::<toml::Table>(&doc) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or(toml::Value::String(text.to_string())),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '|' || c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ")
}

impl fmt::Display for ResolveRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.pattern, self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_servers_are_addresses_with_an_optional_port() {
        let parse = parse_dns_server;
        assert_eq!(parse("9.9.9.9"), Some("9.9.9.9:53".parse().unwrap()));
        assert_eq!(
            parse("127.0.0.1:5353"),
            Some("127.0.0.1:5353".parse().unwrap())
        );
        assert_eq!(parse("[::1]:53"), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse("::1"), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse("dns.example"), None);
    }

    #[test]
    fn defaults_validate() {
        let c = Config::load(None, &[]).unwrap();
        assert_eq!(c.crawl.max_urls, Count(1_000_000));
        assert_eq!(c.crawl.concurrency, 64);
    }

    #[test]
    fn a_warc_gzip_level_of_0_stores_and_one_past_9_is_refused() {
        let load = |level: &str| Config::load(None, &[format!("output.warc_gzip_level={level}")]);
        assert_eq!(load("0").unwrap().output.warc_gzip_level, 0);
        assert_eq!(load("9").unwrap().output.warc_gzip_level, 9);
        let refused = load("10").unwrap_err().to_string();
        assert!(
            refused.contains("output.warc_gzip_level: 10 is not a gzip level"),
            "{refused}"
        );
    }

    #[test]
    fn warc_deflate_is_spare_cpu_or_always_and_anything_else_names_the_key() {
        use crate::warc::WarcDeflate;
        let load = |mode: &str| Config::load(None, &[format!("output.warc_deflate={mode}")]);
        assert_eq!(Config::default().output.warc_deflate, WarcDeflate::SpareCpu);
        assert_eq!(
            load("always").unwrap().output.warc_deflate,
            WarcDeflate::Always
        );
        let refused = load("fast").unwrap_err().to_string();
        assert!(
            refused.contains("output.warc_deflate") && refused.contains("spare-cpu"),
            "{refused}"
        );
    }

    #[test]
    fn repository_config_documents_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
        let file = Config::load(Some(&path), &[]).unwrap();
        let mut expected = Config::default();
        expected.seen.fpp = Some(0.001);
        assert_eq!(file, expected);
    }

    #[test]
    fn monitor_settings_are_checked_with_their_key_named() {
        let error = |set: &str| {
            Config::load(None, &[set.to_string()])
                .unwrap_err()
                .to_string()
        };
        assert!(
            error("monitor.listen=localhost")
                .contains("monitor.listen: \"localhost\" is not an IP:port"),
            "{}",
            error("monitor.listen=localhost")
        );
        assert!(error("monitor.top_hosts=0").contains("monitor.top_hosts"));
        assert!(error("monitor.linger_secs=-1").contains("monitor.linger_secs"));
        let c = Config::load(None, &["monitor.listen=\"[::1]:0\"".to_string()]).unwrap();
        assert_eq!(c.monitor.listen.as_deref(), Some("[::1]:0"));
    }

    #[test]
    fn section_key_list_matches_structs() {
        let value = toml::Value::try_from(Config {
            seen: SeenSection {
                fpp: Some(0.01),
                memory: Some(ByteSize(1)),
                exact: true,
            },
            distributed: DistributedSection {
                redis: Some("redis://127.0.0.1/".into()),
                crawl_id: Some("c".into()),
                ..DistributedSection::default()
            },
            network: NetworkSection {
                ca_file: Some(PathBuf::from("ca.pem")),
                proxy: Some("http://proxy.example:3128".into()),
                ..NetworkSection::default()
            },
            monitor: MonitorSection {
                listen: Some("127.0.0.1:9187".into()),
                ..MonitorSection::default()
            },
            crawl: CrawlSection {
                max_duration: Some("1h".into()),
                ..CrawlSection::default()
            },
            ..Config::default()
        })
        .unwrap();
        let toml::Value::Table(top) = value else {
            panic!()
        };
        assert_eq!(top.len(), SECTIONS.len());
        for (section, keys) in SECTIONS {
            let toml::Value::Table(t) = &top[*section] else {
                panic!("{section}")
            };
            let mut found: Vec<&str> = t.keys().map(String::as_str).collect();
            let mut expected: Vec<&str> = keys.to_vec();
            found.sort();
            expected.sort();
            assert_eq!(found, expected, "[{section}]");
        }
    }

    #[test]
    fn a_value_refused_is_blamed_on_the_option_that_set_it() {
        let max_urls = Flag {
            name: "--max-urls 0".into(),
            assignment: "crawl.max_urls=0".into(),
        };
        let refused = |set: &[&str], flags: &[Flag]| {
            let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
            Config::load_with_flags(None, &set, flags)
                .unwrap_err()
                .to_string()
        };
        let blamed = "--max-urls 0: crawl.max_urls: must be at least 1 (the seeds count)";
        assert_eq!(refused(&[], std::slice::from_ref(&max_urls)), blamed);
        assert_eq!(
            refused(&["crawl.retries=1"], std::slice::from_ref(&max_urls)),
            blamed
        );
        assert_eq!(
            refused(&["crawl.max_urls=0"], &[]),
            "defaults with --set overrides: crawl.max_urls: must be at least 1 (the seeds count)"
        );
    }

    #[test]
    fn overrides_apply_with_types() {
        let c = Config::load(
            None,
            &[
                "crawl.max_depth=3".into(),
                "crawl.user_agent=mybot/1.0".into(),
                "crawl.max_urls=1e6".into(),
                "crawl.max_body_bytes=64KiB".into(),
                "politeness.respect_robots=false".into(),
                "network.resolve.\"*.test\"=127.0.0.1:9".into(),
                "seen.memory=1MiB".into(),
            ],
        )
        .unwrap();
        assert_eq!(c.crawl.max_depth, 3);
        assert_eq!(c.crawl.user_agent, "mybot/1.0");
        assert_eq!(c.crawl.max_urls, Count(1_000_000));
        assert_eq!(c.crawl.max_body_bytes, ByteSize(65536));
        assert!(!c.politeness.respect_robots);
        assert_eq!(c.seen.memory, Some(ByteSize(1 << 20)));
        let rules = c.resolve_rules().unwrap();
        assert!(rules[0].matches("h1.test"));
        assert!(!rules[0].matches("test"));
        assert!(!rules[0].matches("h1.testx"));
    }

    #[test]
    fn the_background_fsync_interval_is_a_positive_number_of_seconds() {
        let c = Config::load(None, &[]).unwrap();
        assert_eq!(c.checkpoint.sync_interval_secs, 1.0);
        let c = Config::load(None, &["checkpoint.sync_interval_secs=0.25".into()]).unwrap();
        assert_eq!(c.checkpoint.sync_interval_secs, 0.25);
        let e = Config::load(None, &["checkpoint.sync_interval_secs=0".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("checkpoint.sync_interval_secs"), "{e}");
        assert!(e.contains("positive"), "{e}");
    }

    #[test]
    fn unknown_keys_are_named_with_their_section() {
        let e = Config::load(None, &["crawl.max_dept=3".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_dept") && e.contains("max_depth") && e.contains("[crawl]"),
            "{e}"
        );
        let e = Config::load(None, &["crawling.x=3".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("crawling") && e.contains("politeness"), "{e}");
        let e = Config::load(None, &["nonsense".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("section.key=value"), "{e}");
    }

    #[test]
    fn file_errors_name_the_key() {
        let e = Config::from_toml_str("[crawl]\nmax_depht = 3\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.toml") && e.contains("max_depht"), "{e}");
        let e = Config::from_toml_str("[crawl]\nconcurrency = \"many\"\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("concurrency") || e.contains("line 2"), "{e}");
        let e = Config::from_toml_str("[seen]\nfpp = 1.5\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("seen.fpp") && e.contains("outside (0, 1)"),
            "{e}"
        );
        let e = Config::from_toml_str("[seen]\nfpp = 0.01\nmemory = \"1MiB\"\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
        let e = Config::from_toml_str("[network.resolve]\n\"*.test\" = \"nowhere\"\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("network.resolve") && e.contains("nowhere"),
            "{e}"
        );
        let e = Config::from_toml_str("[politeness]\nper_host_rps = 0\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("per_host_rps"), "{e}");
    }

    #[test]
    fn per_ip_and_dns_keys_are_checked() {
        for (toml, key, says) in [
            ("[politeness]\nper_ip_rps = -1\n", "politeness.per_ip_rps", "or 0"),
            (
                "[network]\ndns_servers = [\"dns.example\"]\n",
                "network.dns_servers",
                "dns.example",
            ),
            (
                "[network]\ndns_min_ttl_secs = 60\ndns_max_ttl_secs = 10\n",
                "network.dns_min_ttl_secs",
                "over",
            ),
            (
                "[politeness]\nper_ip_concurrency = 4\n[distributed]\nredis = \"redis://127.0.0.1/\"\ncrawl_id = \"a\"\n",
                "politeness.per_ip_concurrency",
                "not supported with distributed.redis",
            ),
        ] {
            let e = Config::from_toml_str(toml, "c.toml").unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
        }
        let c = Config::from_toml_str(
            "[politeness]\nper_ip_rps = 5\nper_ip_concurrency = 4\n[network]\ndns_servers = [\"127.0.0.1:5353\"]\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.politeness.per_ip_concurrency, 4);
    }

    #[test]
    fn ca_file_errors_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let load = |path: &std::path::Path| {
            Config::from_toml_str(
                &format!("[network]\nca_file = {:?}\n", path.display().to_string()),
                "c.toml",
            )
            .unwrap_err()
            .to_string()
        };
        let missing = dir.path().join("missing.pem");
        let e = load(&missing);
        assert!(
            e.contains("network.ca_file") && e.contains("missing.pem") && e.contains("cannot read"),
            "{e}"
        );
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a certificate\n").unwrap();
        let e = load(&text);
        assert!(
            e.contains("network.ca_file")
                && e.contains("notes.txt")
                && e.contains("no PEM certificate"),
            "{e}"
        );
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = load(&broken);
        assert!(
            e.contains("network.ca_file") && e.contains("broken.pem"),
            "{e}"
        );
    }

    #[test]
    fn accept_encoding_offers_gzip_and_deflate_unless_br_is_asked_for() {
        assert_eq!(Config::default().accept_encoding_header(), "gzip, deflate");
        let load = |list: &str| {
            Config::from_toml_str(&format!("[network]\naccept_encoding = {list}\n"), "c.toml")
        };
        let with_br = load(r#"["br", "gzip"]"#).unwrap();
        assert_eq!(with_br.accept_encoding_header(), "br, gzip");
        assert_eq!(load("[]").unwrap().accept_encoding_header(), "identity");
        let e = load(r#"["gzip", "zstd"]"#).unwrap_err().to_string();
        assert!(
            e.contains("c.toml")
                && e.contains("network.accept_encoding")
                && e.contains("\"zstd\" is not a coding the crawler decodes"),
            "{e}"
        );
        let e = load(r#"["gzip", "gzip"]"#).unwrap_err().to_string();
        assert!(
            e.contains("network.accept_encoding") && e.contains("listed twice"),
            "{e}"
        );
    }

    #[test]
    fn fetch_controls_are_checked_and_a_proxy_password_never_shown() {
        let load = |toml: &str| Config::from_toml_str(toml, "c.toml");
        for name in [
            "Host",
            "connection",
            "Accept-Encoding",
            "Content-Length",
            "Cookie",
        ] {
            let e = load(&format!("[network.headers]\n{name:?} = \"x\"\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("c.toml") && e.contains(&format!("network.headers.{name:?}")),
                "{e}"
            );
        }
        let ok = load("[network.headers]\n\"X-Team\" = \"archive\"\n").unwrap();
        assert_eq!(ok.extra_headers().unwrap()["x-team"], "archive");
        let e = load("[crawl]\nmax_duration = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("crawl.max_duration") && e.contains("soon"),
            "{e}"
        );
        let limited = load("[crawl]\nmax_duration = \"1h 30m\"\n").unwrap();
        assert_eq!(
            limited.max_duration().unwrap(),
            Some(std::time::Duration::from_secs(5400))
        );
        let e = load("[network]\nproxy = \"ftp://u:hunter2@p.example\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("network.proxy") && !e.contains("hunter2"), "{e}");
        let proxied = load("[network]\nproxy = \"socks5://u:hunter2@p.example:1080\"\n").unwrap();
        let shown = proxied.to_toml();
        assert!(
            shown.contains("socks5://u:***@p.example:1080") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
