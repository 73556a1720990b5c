//! What the end-to-end crawl tests share: a crawler configuration pointed at a synthetic
//! web, the ground-truth rules that mirror it, running a crawl, reading its records, and the
//! lock that keeps timing-sensitive tests apart from heavy ones.
//!
//! # Timing-sensitive tests run alone
//! The tests of this binary run in parallel threads. Some assert on time (Crawl-delay and
//! GCRA spacing read from the server's stamps, hosts evicted once their limiter refills, a
//! 300 ms page inside a 1 s timeout); others spawn crawler processes or run whole crawls.
//! On a loaded 2-core machine the heavy ones starve the timing ones of CPU and stretch the
//! server's stamps. So every test takes [`LOAD`]: timing-sensitive ones exclusively
//! ([`timing_sensitive`]), all others shared ([`ordinary`]). Ordinary tests still run in
//! parallel with each other; a timing test runs with nothing of this binary beside it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use crawler::config::Config;
use crawler::crawl::ProgressMode;
use crawler::output::PageRecord;
use crawler::{run_crawl, CrawlRequest, CrawlSummary, ShutdownHandle};
use testweb::{CrawlRules, TestWebServer};
use url::Url;

/// Held by every test: shared by ordinary ones, exclusively by timing-sensitive ones.
static LOAD: RwLock<()> = RwLock::new(());

/// For a test that asserts on time: nothing else of this binary runs while it is held.
/// A failed (panicked) test poisons the lock; the others still run (their own asserts
/// say what went wrong, the poison carries no data).
pub fn timing_sensitive() -> RwLockWriteGuard<'static, ()> {
    LOAD.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// For every other test: runs beside other ordinary tests, never beside a timing one.
pub fn ordinary() -> RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How much later than the crawler's dispatch the server may stamp a request's arrival on
/// an otherwise idle machine: a new connection's set-up before its first request, and the
/// server thread's ordinary scheduling (measured up to ~20 ms). The crawler controls
/// dispatch times (its limiter); this lag is the server's. Spacing assertions on server
/// stamps allow it once per pair of requests, however far apart they are, so a limiter
/// that is wrong by more than one request still shows.
pub const ARRIVAL_LAG: Duration = Duration::from_millis(30);

/// [`ARRIVAL_LAG`] plus the longest the server's thread was kept from running during the
/// crawl ([`TestWebServer::max_stall`], the server started with `track_stalls`): on a
/// machine loaded from outside this test binary (other builds), a server thread that does
/// not run for 80 ms stamps requests sent in that time together. The tolerance grows only
/// by what was measured, and the test prints it.
pub fn arrival_slack(server: &TestWebServer) -> Duration {
    let stall = server.max_stall();
    eprintln!("arrival slack: {ARRIVAL_LAG:?} + measured server stall {stall:?}");
    ARRIVAL_LAG + stall
}

/// A configuration for crawling `server` into `out`: generous per-host limits so tests
/// are fast, one retry, robots.txt as asked.
pub fn config_for(server: &TestWebServer, out: &Path, respect_robots: bool) -> Config {
    let mut config = Config::default();
    let (pattern, addr) = server.resolve_entry();
    config.network.resolve.insert(pattern, addr);
    config.output.dir = out.to_path_buf();
    config.politeness.respect_robots = respect_robots;
    config.politeness.per_host_rps = 1000.0;
    config.politeness.per_host_burst = 100;
    config.politeness.per_host_concurrency = 4;
    config.crawl.concurrency = 16;
    config.crawl.retries = 1;
    // The synthetic web's tree is 4 layers deep; only its endless calendar goes deeper, and
    // at the default depth (100) it alone would be ~200 pages of every crawl. The default
    // is crawled by `discovery::defaults_finish_a_documentation_site_and_still_stop_the_traps`.
    config.crawl.max_depth = 16;
    config
}

/// The ground-truth rules that match `config`.
pub fn rules_for(config: &Config) -> CrawlRules {
    CrawlRules {
        max_depth: config.crawl.max_depth,
        respect_robots: config.politeness.respect_robots,
        follow_nofollow: config.crawl.follow_nofollow,
        max_redirects: config.crawl.max_redirects,
        retries: config.crawl.retries,
        max_body_bytes: config.crawl.max_body_bytes.0,
        timeout: Duration::from_secs_f64(config.crawl.timeout_secs),
        // The crawler's normalizer strips tracking/session parameters and decodes
        // unreserved escapes by default.
        full_normalization: true,
        near_duplicates: config.crawl.near_duplicates,
    }
}

/// Runs a crawl of `seeds` on a 2-worker runtime and returns its summary.
pub fn crawl(config: &Config, seeds: &[String], shutdown: ShutdownHandle) -> CrawlSummary {
    crawl_resuming(config, seeds, shutdown, None)
}

/// [`crawl`], going on from `resume` when given (a loaded checkpoint).
pub fn crawl_resuming(
    config: &Config,
    seeds: &[String],
    shutdown: ShutdownHandle,
    resume: Option<crawler::checkpoint::Loaded>,
) -> CrawlSummary {
    let seeds: Vec<Url> = seeds.iter().map(|s| Url::parse(s).unwrap()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(run_crawl(CrawlRequest {
            config: config.clone(),
            seeds,
            progress: ProgressMode::Quiet,
            shutdown,
            resume,
        }))
        .expect("crawl runs")
}

/// Whether the checkpoint manifest at `manifest` says the crawl finished: a crawl killed
/// after that and before it exited has nothing left to resume, so kill loops stop there.
pub fn manifest_says_finished(manifest: &Path) -> bool {
    std::fs::read_to_string(manifest)
        .ok()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok())
        .is_some_and(|m| m["finished"] == serde_json::Value::Bool(true))
}

/// The records of `out/pages.jsonl`.
pub fn records(out: &Path) -> Vec<PageRecord> {
    std::fs::read_to_string(out.join("pages.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
