//! What a crawl reports at its end: `OUT/summary.json` and the lines the CLI prints.
//!
//! The counters come in whole from [`CounterValues`] (flattened, so `summary.json` keeps one
//! flat object with every counter under its own name); this module only adds what is
//! derived (rates, seen-set figures, the busiest hosts) and the human text.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::counters::{CounterValues, CrawlCounters};
use super::CrawlFrontier;
use crate::config::Config;
use crate::seen::{Plan, SeenStats};

/// `OUT/summary.json`, and what the CLI prints at the end.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlSummary {
    pub stopped: bool,
    pub(crate) elapsed_secs: f64,
    pub(crate) max_urls: u64,
    /// Every counter, under its own name (see [`CrawlCounters`](super::CrawlCounters)).
    #[serde(flatten)]
    pub counts: CounterValues,
    pub queued_left: u64,
    pub failures: u64,
    pub(crate) pages_per_sec: f64,
    pub hosts: usize,
    pub(crate) top_hosts: Vec<HostCount>,
    /// The frontier's memory and disk at the end, and how often host state was evicted
    /// and restored.
    pub frontier: crate::frontier::FrontierStats,
    pub(crate) seen_m_bits: u64,
    pub(crate) seen_k: u32,
    pub(crate) seen_bytes: u64,
    pub(crate) seen_insertions: u64,
    pub(crate) seen_fill: f64,
    pub(crate) seen_estimated_fpp: f64,
    pub(crate) estimated_false_positive_skips: f64,
    pub parse_cpu_secs: f64,
    pub(crate) output_dir: PathBuf,
}

/// URLs ever queued per host, for spotting traps.
#[derive(Debug, Clone, Serialize)]
pub struct HostCount {
    pub(crate) host: String,
    pub(crate) queued_total: u64,
    pub(crate) queued_now: usize,
}

/// How a crawl ended, for [`CrawlSummary::new`].
pub(crate) struct Ending<'a, F: CrawlFrontier> {
    pub(crate) config: &'a Config,
    pub(crate) frontier: &'a F,
    pub(crate) counters: &'a CrawlCounters,
    pub(crate) seen: SeenStats,
    pub(crate) plan: &'a Plan,
    pub(crate) elapsed: Duration,
    pub(crate) stopped: bool,
}

impl CrawlSummary {
    pub(crate) fn new<F: CrawlFrontier>(end: Ending<'_, F>) -> CrawlSummary {
        let counts = end.counters.values();
        let secs = end.elapsed.as_secs_f64().max(1e-9);
        CrawlSummary {
            stopped: end.stopped,
            elapsed_secs: end.elapsed.as_secs_f64(),
            max_urls: end.config.crawl.max_urls.0,
            queued_left: end.frontier.queued() + end.frontier.in_flight(),
            failures: counts.failures(),
            pages_per_sec: counts.finished as f64 / secs,
            hosts: end.frontier.host_count(),
            frontier: end.frontier.stats(),
            top_hosts: end
                .frontier
                .top_hosts(10)
                .into_iter()
                .map(|(host, queued_total, queued_now)| HostCount {
                    host,
                    queued_total,
                    queued_now,
                })
                .collect(),
            seen_m_bits: end.seen.m_bits,
            seen_k: end.seen.k,
            seen_bytes: end.plan.bytes,
            seen_insertions: end.seen.insertions,
            seen_fill: end.seen.fill,
            seen_estimated_fpp: end.seen.estimated_fpp,
            estimated_false_positive_skips: counts.false_positive_micros as f64 / 1e6,
            parse_cpu_secs: counts.parse_cpu_ns as f64 / 1e9,
            output_dir: end.config.output.dir.clone(),
            counts,
        }
    }

    /// The human summary printed at the end of a crawl.
    pub fn human(&self) -> String {
        let c = &self.counts;
        let mut s = String::new();
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "{}: {} of {} URLs done in {:.1} s ({:.0} pages/s), {} accepted, {} left in the frontier",
            if self.stopped { "stopped" } else { "finished" },
            c.finished,
            self.max_urls,
            self.elapsed_secs,
            self.pages_per_sec,
            c.accepted,
            self.queued_left
        );
        let _ = writeln!(
            s,
            "responses: {} ok, {} redirects, {} client errors (4xx), {} server errors (5xx/429), {} network errors, {} retries, {}{}",
            c.ok,
            c.redirects,
            c.client_errors,
            c.server_errors,
            c.network_errors,
            c.retries,
            crate::quantity::HumanBytes(c.bytes),
            if c.panics > 0 {
                format!("; {} URLs lost to a crawler bug (a panic, see their records)", c.panics)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "links: {} found, {} already seen, {} too deep, {} over max_urls, {} nofollow, {} not http(s), {} invalid, {} out of scope, {} over max_pages_per_host, {} over max_links_per_page, {} on {} near-duplicate pages; {} URLs disallowed by robots.txt, {} deferred (Crawl-delay over politeness.max_crawl_delay_secs), {} given up (robots.txt unreachable)",
            c.links_found,
            c.links_seen,
            c.links_too_deep,
            c.links_over_cap,
            c.links_nofollow,
            c.links_not_http,
            c.links_invalid,
            c.out_of_scope.values().sum::<u64>(),
            c.links_host_cap,
            c.links_over_page_cap,
            c.links_near_duplicate,
            c.near_duplicate_pages,
            c.disallowed,
            c.deferred,
            c.robots_unavailable
        );
        let _ = write!(
            s,
            "seen-set: {} URLs, fill {:.4}, estimated fpp {:.2e}, ~{:.1} new URLs skipped as false positives",
            self.seen_insertions,
            self.seen_fill,
            self.seen_estimated_fpp,
            self.estimated_false_positive_skips
        );
        if c.warc_records > 0 {
            let ratio = if c.warc_bytes > 0 {
                c.warc_payload_bytes as f64 / c.warc_bytes as f64
            } else {
                0.0
            };
            let _ = write!(
                s,
                "\narchive: {} WARC records, {} written for {} of payload archived in full ({ratio:.1}:1 with the headers); {} duplicate payloads written as revisits, {} not stored again",
                c.warc_records,
                crate::quantity::HumanBytes(c.warc_bytes),
                crate::quantity::HumanBytes(c.warc_payload_bytes),
                c.warc_revisits,
                crate::quantity::HumanBytes(c.warc_bytes_saved)
            );
        }
        s
    }
}
