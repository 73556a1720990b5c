//! What a crawl reports at its end: `OUT/summary.json` and the lines the CLI prints.
//!
//! The counters come in whole from [`CounterValues`] (flattened, so `summary.json` keeps one
//! flat object with every counter under its own name); this module only adds what is
//! derived (rates, seen-set figures, the busiest hosts) and the human text.
//!
//! # Figures of the crawl, figures of this run
//! A crawl may take several runs (`--resume` after a stop or a crash). Every counter is
//! the whole crawl's, and the same as an uninterrupted crawl's (see `super::counters`),
//! except those that measure the runs rather than the web: `parse_cpu_ns` (CPU time, and a
//! killed run's is lost), `descriptor_pauses` (the machine's limits), `robots_fetches` (a
//! resumed run reads each host's robots.txt again), `false_positive_micros` (an estimate
//! from the seen-set's fill at each insert, which the order of the inserts changes), and
//! what depends on the web's answers to requests made again after a crash (`retries`, when
//! a server answers a repeated request otherwise). Time is given both ways, and says
//! which: `run_*` for this run, `crawl_*` for all runs (their crawling time, each run up to
//! its last record or checkpoint; the time between runs is not counted).

use std::path::PathBuf;

use serde::Serialize;

use crate::config::Config;
use crate::counters::{CounterValues, CrawlCounters};
use crate::frontier::FrontierBackend;
use crate::seen::{Plan, SeenStats};

/// `OUT/summary.json`, and what the CLI prints at the end.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlSummary {
    pub stopped: bool,
    /// Runs of this crawl so far, this one included.
    pub runs: u64,
    /// This run: its seconds, the pages it finished, and their rate.
    pub run_elapsed_secs: f64,
    pub run_pages: u64,
    pub run_pages_per_sec: f64,
    /// The whole crawl: the seconds of all its runs, and every page finished over them.
    pub crawl_elapsed_secs: f64,
    pub crawl_pages_per_sec: f64,
    pub(crate) max_urls: u64,
    /// Every counter, under its own name (see [`CrawlCounters`]).
    #[serde(flatten)]
    pub counts: CounterValues,
    pub queued_left: u64,
    pub failures: u64,
    pub hosts: usize,
    pub(crate) top_hosts: Vec<HostCount>,
    /// The hosts adaptive politeness slowed, and why: the largest slow-downs, at most 20.
    pub slowed_hosts: Vec<crate::frontier::SlowedHost>,
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

/// Writes `summary.json` for a crawl stopped by `error` (a full disk, a failing queue log),
/// with the error under `"error"`: the figures up to the stop, for whoever reads the file
/// rather than the terminal. Best effort: a disk that refused the crawl's writes may refuse
/// this one too, which is logged and nothing more (the error itself is what the user sees).
pub(crate) fn write_after_error(
    out: &std::path::Path,
    summary: &CrawlSummary,
    error: &dyn std::error::Error,
) {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    let mut json = serde_json::to_value(summary).unwrap_or_default();
    if let Some(fields) = json.as_object_mut() {
        fields.insert("error".into(), serde_json::Value::String(text));
    }
    let path = out.join("summary.json");
    let bytes = serde_json::to_vec_pretty(&json).unwrap_or_default();
    if let Err(e) = crate::output::write_atomically(&path, &bytes) {
        tracing::warn!("{}: not written: {e}", path.display());
    }
}

/// URLs ever queued per host, for spotting traps.
#[derive(Debug, Clone, Serialize)]
pub struct HostCount {
    pub(crate) host: String,
    pub(crate) queued_total: u64,
    pub(crate) queued_now: usize,
}

/// How a crawl ended, for [`CrawlSummary::new`].
pub(crate) struct Ending<'a, F: FrontierBackend> {
    pub(crate) config: &'a Config,
    pub(crate) frontier: &'a F,
    pub(crate) counters: &'a CrawlCounters,
    pub(crate) seen: SeenStats,
    pub(crate) plan: &'a Plan,
    pub(crate) time: super::checkpoints::CrawlTime,
    /// Pages finished before this run (by the checkpoint and what was replayed after it).
    pub(crate) finished_before: u64,
    pub(crate) stopped: bool,
}

impl CrawlSummary {
    pub(crate) fn new<F: FrontierBackend>(end: Ending<'_, F>) -> CrawlSummary {
        let counts = end.counters.values();
        let (run_secs, crawl_secs) = (end.time.run_secs(), end.time.crawl_secs());
        let run_pages = counts.finished.saturating_sub(end.finished_before);
        CrawlSummary {
            stopped: end.stopped,
            runs: end.time.runs,
            run_elapsed_secs: run_secs,
            run_pages,
            run_pages_per_sec: run_pages as f64 / run_secs.max(1e-9),
            crawl_elapsed_secs: crawl_secs,
            crawl_pages_per_sec: counts.finished as f64 / crawl_secs.max(1e-9),
            max_urls: end.config.crawl.max_urls.0,
            queued_left: end.frontier.queued() + end.frontier.in_flight(),
            failures: counts.failures(),
            hosts: end.frontier.host_count(),
            frontier: end.frontier.stats(),
            slowed_hosts: end.frontier.slowed_hosts(),
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

    /// How long, and how fast: this run's figures and the whole crawl's, said apart once the
    /// crawl has had more than one run.
    pub(crate) fn time_line(&self) -> String {
        if self.runs <= 1 && self.run_pages == self.counts.finished {
            return format!(
                "time: {:.1} s, {:.0} pages/s (the whole crawl, in one run)",
                self.run_elapsed_secs, self.run_pages_per_sec
            );
        }
        if self.runs <= 1 {
            // Resumed from a checkpoint that did not record its runs (format 3).
            return format!(
                "time: this run {:.1} s, {} pages, {:.0} pages/s; the earlier runs' time is not known",
                self.run_elapsed_secs, self.run_pages, self.run_pages_per_sec
            );
        }
        format!(
            "time: this run {:.1} s, {} pages, {:.0} pages/s; whole crawl ({} runs): {:.1} s of crawling, {:.0} pages/s",
            self.run_elapsed_secs,
            self.run_pages,
            self.run_pages_per_sec,
            self.runs,
            self.crawl_elapsed_secs,
            self.crawl_pages_per_sec
        )
    }

    /// The human summary printed at the end of a crawl.
    pub fn human(&self) -> String {
        let c = &self.counts;
        let mut s = String::new();
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "{}: {} of {} URLs done, {} accepted, {} left in the frontier",
            if self.stopped { "stopped" } else { "finished" },
            c.finished,
            self.max_urls,
            c.accepted,
            self.queued_left
        );
        let _ = writeln!(s, "{}", self.time_line());
        let _ = writeln!(
            s,
            "responses: {} ok, {}{} redirects, {} client errors (4xx), {} server errors (5xx/429), {} network errors, {} retries, {}{}",
            c.ok,
            if c.not_modified > 0 {
                format!("{} not modified (304), ", c.not_modified)
            } else {
                String::new()
            },
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
                "\narchive: {} WARC records, {} written for {} of payload archived in full ({ratio:.1}:1 with the headers; {} responses stored, not deflated); {} duplicate payloads written as revisits, {} not stored again",
                c.warc_records,
                crate::quantity::HumanBytes(c.warc_bytes),
                crate::quantity::HumanBytes(c.warc_payload_bytes),
                c.warc_stored,
                c.warc_revisits,
                crate::quantity::HumanBytes(c.warc_bytes_saved)
            );
        }
        s
    }
}
