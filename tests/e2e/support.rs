//! What the end-to-end crawl tests share: a crawler configuration pointed at a synthetic
//! web, the ground-truth rules that mirror it, running a crawl, and reading its records.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use crawler::config::Config;
use crawler::crawl::ProgressMode;
use crawler::output::PageRecord;
use crawler::{run_crawl, CrawlRequest, CrawlSummary, ShutdownHandle};
use testweb::{CrawlRules, TestWebServer};
use url::Url;

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
    }
}

/// Runs a crawl of `seeds` on a 2-worker runtime and returns its summary.
pub fn crawl(config: &Config, seeds: &[String], shutdown: ShutdownHandle) -> CrawlSummary {
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
            resume: None,
        }))
        .expect("crawl runs")
}

/// The records of `out/pages.jsonl`.
pub fn records(out: &Path) -> Vec<PageRecord> {
    std::fs::read_to_string(out.join("pages.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
