//! `cargo bench --bench crawl -- --real-size`: the crawl of pages of real size and shape
//! (testweb's `real_size`: log-normal sizes, mean ~240 KB, inline styles, scripts and JSON)
//! served gzip or br (or identity, a third of them, as `encodings` picks by content) over
//! https with HTTP/2, in a server process of its own. What it prints is what the issue's
//! goal is stated in: crawler CPU per page, user and sys apart (≤ 1 ms is the goal), pages/s,
//! decoded MB/s, and the same with the archive on (`output.warc`), and with the archive
//! deflating every record (`output.warc_store_compressed = false`, the archive before it
//! stored coded payloads), interleaved within each run so that the archive's cost is a ratio
//! measured side by side; peak RSS at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::testweb_process::{median, rusage, ServerProcess, Serving};
use super::FEATURES;
use crawler::config::Config;
use crawler::cpu_time::thread_cpu_ns;
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::{TlsMode, WebSpec};

/// How a mode sets the crawl's configuration.
type Tweak = fn(&mut Config);

/// The crawls compared in each run, back to back: name and how it sets the config.
const MODES: [(&str, Tweak); 3] = [
    ("jsonl               ", |_| {}),
    ("jsonl+warc          ", |c| c.output.warc = true),
    ("jsonl+warc deflated ", |c| {
        // Every record deflated, coded payloads too: the archive before
        // `output.warc_store_compressed`.
        c.output.warc = true;
        c.output.warc_store_compressed = false;
    }),
];

/// One crawl's figures.
struct Measured {
    pages: u64,
    secs: f64,
    user: f64,
    sys: f64,
    fetch_cpu: f64,
    parse_cpu: f64,
    dispatch_cpu: f64,
    bytes: u64,
    warc_bytes: u64,
    warc_payload: u64,
}

impl Measured {
    fn cpu(&self) -> f64 {
        self.user + self.sys
    }
}

/// One crawl of the whole web (the same set-up as the crawl bench's, `tweak` applied).
fn measure(spec: &WebSpec, server: &ServerProcess, tweak: Tweak) -> Measured {
    let out = tempfile::tempdir().expect("tempdir");
    let mut config = server.config(out.path());
    config.network.accept_encoding = vec!["gzip".into(), "deflate".into(), "br".into()];
    tweak(&mut config);
    let worker_cpu = Arc::new(AtomicU64::new(0));
    let on_stop = worker_cpu.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_stop(move || {
            on_stop.fetch_add(thread_cpu_ns(), Ordering::Relaxed);
        })
        .build()
        .expect("runtime");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let before = rusage(libc::RUSAGE_SELF);
    let main_before = thread_cpu_ns();
    let started = Instant::now();
    let summary = runtime
        .block_on(run_crawl(CrawlRequest {
            config,
            seeds: server.seeds(spec),
            progress: ProgressMode::Quiet,
            shutdown: ShutdownHandle::new(),
            resume: None,
        }))
        .expect("crawl");
    let elapsed = started.elapsed().as_secs_f64();
    let dispatch_cpu = (thread_cpu_ns() - main_before) as f64 / 1e9;
    drop(runtime);
    let after = rusage(libc::RUSAGE_SELF);
    assert_eq!(summary.failures, 0, "{}", summary.human());
    Measured {
        pages: summary.counts.finished,
        secs: elapsed,
        user: secs(after.ru_utime) - secs(before.ru_utime),
        sys: secs(after.ru_stime) - secs(before.ru_stime),
        fetch_cpu: worker_cpu.load(Ordering::Relaxed) as f64 / 1e9,
        parse_cpu: summary.parse_cpu_secs,
        dispatch_cpu,
        bytes: summary.counts.bytes,
        warc_bytes: summary.counts.warc_bytes,
        warc_payload: summary.counts.warc_payload_bytes,
    }
}

pub(crate) fn real_size(runs: usize) {
    let spec = WebSpec::real_size(7);
    println!(
        "crawl benchmark, pages of real size (--real-size): {} hosts, {} pages of log-normal size (mean ~240 KB) with {} links, https h2, gzip/br, politeness off, concurrency 64, {} runs",
        spec.hosts, spec.pages, spec.links_per_page, runs
    );
    let server = ServerProcess::start(
        &spec,
        &format!("{FEATURES},real_size"),
        Serving {
            encodings: true,
            latency_ms: 0,
            tls: TlsMode::H2,
        },
    );
    // Warm-up: connection set-up paths, allocator.
    let _ = measure(&spec, &server, MODES[0].1);
    let mut tables: Vec<Vec<Measured>> = MODES.iter().map(|_| Vec::new()).collect();
    let mut server_cpu: Vec<Vec<f64>> = MODES.iter().map(|_| Vec::new()).collect();
    for i in 0..runs {
        for (m, (name, tweak)) in MODES.iter().enumerate() {
            let server_before = server.cpu_secs();
            let run = measure(&spec, &server, *tweak);
            let pages = run.pages as f64;
            server_cpu[m].push((server.cpu_secs() - server_before) / pages * 1000.0);
            println!(
                "run {i} {name}: {} pages in {:.2} s = {:.0} pages/s, crawler CPU {:.3} ms/page (user {:.3}, sys {:.3}; fetch {:.3}, parse {:.3}, dispatch {:.3}), {:.0} MB/s decoded, WARC {:.1} MB",
                run.pages,
                run.secs,
                pages / run.secs,
                run.cpu() / pages * 1000.0,
                run.user / pages * 1000.0,
                run.sys / pages * 1000.0,
                run.fetch_cpu / pages * 1000.0,
                run.parse_cpu / pages * 1000.0,
                run.dispatch_cpu / pages * 1000.0,
                run.bytes as f64 / run.secs / 1e6,
                run.warc_bytes as f64 / 1e6,
            );
            tables[m].push(run);
        }
    }
    server.stop();
    println!("--- medians over {runs} runs ---");
    let rate = |t: &[Measured]| median(t.iter().map(|r| r.pages as f64 / r.secs).collect());
    for (m, (name, _)) in MODES.iter().enumerate() {
        let table = &tables[m];
        let per_page = |f: &dyn Fn(&Measured) -> f64| {
            median(
                table
                    .iter()
                    .map(|r| f(r) / r.pages as f64 * 1000.0)
                    .collect(),
            )
        };
        println!(
            "{name}: {:.0} pages/s; crawler CPU {:.3} ms/page (user {:.3}, sys {:.3}; fetch {:.3}, parse {:.3}, dispatch {:.3}); mean page {:.0} KB decoded; server {:.3} ms/page; WARC {:.1} MB for {:.1} MB of payload as sent",
            rate(table),
            per_page(&Measured::cpu),
            per_page(&|r| r.user),
            per_page(&|r| r.sys),
            per_page(&|r| r.fetch_cpu),
            per_page(&|r| r.parse_cpu),
            per_page(&|r| r.dispatch_cpu),
            median(
                table
                    .iter()
                    .map(|r| r.bytes as f64 / r.pages as f64 / 1e3)
                    .collect()
            ),
            median(server_cpu[m].clone()),
            median(table.iter().map(|r| r.warc_bytes as f64 / 1e6).collect()),
            median(table.iter().map(|r| r.warc_payload as f64 / 1e6).collect()),
        );
    }
    // Per-run ratios (the modes of a run ran back to back), medians of those.
    for (m, (name, _)) in MODES.iter().enumerate().skip(1) {
        let ratio = |f: &dyn Fn(&Measured) -> f64| {
            median(
                tables[m]
                    .iter()
                    .zip(&tables[0])
                    .map(|(a, b)| f(a) / f(b))
                    .collect(),
            )
        };
        println!(
            "{name}/ jsonl within a run, medians: pages/s {:.2}, CPU per page {:.2}",
            ratio(&|r| r.pages as f64 / r.secs),
            ratio(&|r| r.cpu() / r.pages as f64),
        );
    }
    println!(
        "crawler peak RSS: {:.1} MB",
        super::testweb_process::peak_rss_mb()
    );
}
