//! Throughput where the web is slow: many hosts, each answering after a round trip, each
//! allowed one request per second. The crawl is then bound by politeness and latency, as on
//! the real web, not by CPU; the question is how close it gets to the limit
//! `min(hosts × per_host_rps, concurrency / latency)` and what the scheduler costs as the
//! number of hosts grows.
//!
//! Two webs, each crawled `--runs` times (default 3) by a fresh crawl:
//! - 2,000 hosts × 15 pages, 250 ms latency, 1 rps per host, concurrency 1,000: the limit is
//!   min(2,000, 4,000) = 2,000 pages/s;
//! - 20,000 hosts × 3 pages, same latency and rate: min(20,000, 4,000) = 4,000 pages/s.
//!
//! Pages/s is measured over the crawl's whole run (start-up and the tail included, where
//! fewer hosts have work left: a fair, slightly pessimistic figure) and, separately, over the
//! steady middle (the time between 10% and 90% of pages finished, from the progress
//! counters). The server is a separate process (`support/testweb_process.rs`) with 2 KiB
//! pages and its own latency. Printed: per-run figures, medians, CPU s per 1,000 pages, peak
//! RSS.
//!
//! Run: `cargo bench --bench slow_web` (`-- --runs N`, `-- --only 2000` or `-- --only 20000`).

#[path = "support/testweb_process.rs"]
mod testweb_process;

use std::time::{Duration, Instant};

use crawler::config::Count;
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::WebSpec;
use testweb_process::{cpu_secs, median, rusage, ServerProcess, Serving};

const LATENCY_MS: u64 = 250;
const CONCURRENCY: usize = 1000;
const RPS: f64 = 1.0;

struct Run {
    pages: u64,
    secs: f64,
    steady_pages_per_sec: f64,
    cpu: f64,
    descriptor_pauses: u64,
}

fn crawl_once(spec: &WebSpec, port: u16) -> Run {
    let out = tempfile::tempdir().expect("tempdir");
    let mut config = testweb_process::bench_config(port, out.path());
    config.politeness.enabled = true;
    config.politeness.per_host_rps = RPS;
    config.crawl.concurrency = CONCURRENCY;
    config.crawl.max_urls = Count(10_000_000);
    let seeds = testweb_process::seeds(spec);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let cpu_before = cpu_secs(&rusage(libc::RUSAGE_SELF));
    let started = Instant::now();
    // The steady rate: sampled from the pages written to pages.jsonl (one line per page).
    let pages_file = out.path().join("pages.jsonl");
    let expected = spec.pages as u64;
    let sampler = std::thread::spawn(move || {
        let mut samples: Vec<(f64, u64)> = Vec::new();
        let t0 = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let lines = std::fs::read(&pages_file)
                .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
                .unwrap_or(0);
            samples.push((t0.elapsed().as_secs_f64(), lines));
            if lines >= expected || t0.elapsed() > Duration::from_secs(600) {
                return samples;
            }
        }
    });
    let summary = runtime
        .block_on(run_crawl(CrawlRequest {
            config,
            seeds,
            progress: ProgressMode::Quiet,
            shutdown: ShutdownHandle::new(),
            resume: None,
        }))
        .expect("crawl");
    let secs = started.elapsed().as_secs_f64();
    drop(runtime);
    let cpu = cpu_secs(&rusage(libc::RUSAGE_SELF)) - cpu_before;
    let samples = sampler.join().unwrap_or_default();
    let pages = summary.counts.finished;
    let at = |fraction: f64| {
        samples
            .iter()
            .find(|(_, n)| *n as f64 >= fraction * pages as f64)
            .copied()
    };
    let steady_pages_per_sec = match (at(0.1), at(0.9)) {
        (Some((t1, n1)), Some((t2, n2))) if t2 > t1 => (n2 - n1) as f64 / (t2 - t1),
        _ => pages as f64 / secs,
    };
    assert_eq!(summary.failures, 0, "{}", summary.human());
    Run {
        pages,
        secs,
        steady_pages_per_sec,
        cpu,
        descriptor_pauses: summary.counts.descriptor_pauses,
    }
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    testweb_process::serve_if_asked();
    crawler::allocator::limit_malloc_arenas();
    let value = testweb_process::arg_value;
    let runs: usize = value("--runs").and_then(|v| v.parse().ok()).unwrap_or(3);
    let only: Option<usize> = value("--only").and_then(|v| v.parse().ok());
    for (hosts, per_host) in [(2_000usize, 15usize), (20_000, 3)] {
        if only.is_some_and(|o| o != hosts) {
            continue;
        }
        let spec = WebSpec {
            hosts,
            pages: hosts * per_host,
            seed: 5,
            links_per_page: 20,
            page_bytes: 2048,
            features: testweb::Features::none(),
        };
        let limit = (hosts as f64 * RPS).min(CONCURRENCY as f64 / (LATENCY_MS as f64 / 1000.0));
        println!(
            "slow web: {hosts} hosts, {} pages, {LATENCY_MS} ms latency, {RPS} rps per host, concurrency {CONCURRENCY}: limit {limit:.0} pages/s",
            spec.pages
        );
        let server = ServerProcess::start(
            &spec,
            "none",
            Serving {
                encodings: false,
                latency_ms: LATENCY_MS,
                ..Serving::default()
            },
        );
        let mut table = Vec::new();
        for i in 0..runs {
            let run = crawl_once(&spec, server.port);
            println!(
                "run {i}: {} pages in {:.1} s = {:.0} pages/s overall ({:.0}% of the limit), {:.0} pages/s steady ({:.0}%), {:.3} CPU s/1000 pages, {} descriptor pauses",
                run.pages,
                run.secs,
                run.pages as f64 / run.secs,
                run.pages as f64 / run.secs / limit * 100.0,
                run.steady_pages_per_sec,
                run.steady_pages_per_sec / limit * 100.0,
                run.cpu / run.pages as f64 * 1000.0,
                run.descriptor_pauses
            );
            table.push(run);
        }
        server.stop();
        let overall = median(table.iter().map(|r| r.pages as f64 / r.secs).collect());
        let steady = median(table.iter().map(|r| r.steady_pages_per_sec).collect());
        println!("--- {hosts} hosts, medians over {runs} runs ---");
        println!(
            "pages/s overall: {overall:.0} ({:.0}% of {limit:.0}); steady: {steady:.0} ({:.0}%)",
            overall / limit * 100.0,
            steady / limit * 100.0
        );
        println!(
            "crawler CPU s per 1000 pages: {:.3}",
            median(
                table
                    .iter()
                    .map(|r| r.cpu / r.pages as f64 * 1000.0)
                    .collect()
            )
        );
        println!(
            "crawler peak RSS so far: {:.1} MB",
            testweb_process::peak_rss_mb()
        );
    }
}
