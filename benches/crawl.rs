//! Crawl-throughput benchmark: the synthetic web crawled end to end over loopback.
//!
//! The web (`WebSpec::bench`: 24 hosts, 30,000 pages of 16 KiB with 80 links) is served in a
//! *separate process* (see `support/testweb_process.rs`), so the crawler's CPU time and peak
//! RSS are measured alone (getrusage of this process) while both still share the machine's
//! cores.
//! Politeness is off and concurrency is 64, as the issue specifies. Each run crawls the
//! whole web; the figures printed are medians over the runs, plus the per-run table.
//!
//! CPU split: `fetch` is the tokio worker threads (reqwest/hyper, body reads), `parse` the
//! parse threads (lol_html extraction, link resolution and normalization, seen-set
//! pre-check), `dispatch` the thread that drives the crawl (frontier, seen-set inserts,
//! output hand-off), `rest` everything else (output writer, allocator, start-up).
//!
//! Each run is made twice, interleaved: once writing `pages.jsonl` only, once also archiving
//! every fetch as WARC (`[output] warc = true`), off then on in even runs and on then off in
//! odd ones, after a warm-up crawl of each side (so neither side always follows the other or
//! meets a cold archive), so the archive's cost is a ratio within one run of the benchmark: pages/s, CPU per 1,000 pages, bytes written (per page too),
//! compression ratio, and the share of responses stored rather than deflated (by default,
//! `spare-cpu`, those the idle-priority deflate threads did not get to;
//! `-- --warc-deflate always` deflates every record on the crawl's CPU,
//! `-- --warc-level N` sets `output.warc_gzip_level`, `-- --warc-window-mib N`
//! `output.warc_deflate_window`). The deflate threads' CPU is shown
//! apart: it is CPU the crawl did not want. The machine's busy CPU per page (`/proc/stat`,
//! every process and the kernel's threads) is printed too: writing the archive back to disk
//! costs kernel threads CPU no process is charged for (meaningful on an idle machine only).
//! `-- --warc-only` runs the archive side alone (to
//! profile it), `-- --out-in DIR` has the crawls write in DIR instead of the system's
//! temporary directory (a tmpfs against a disk, say).
//!
//! With `-- --tls` the runs compare transports instead: the same crawl over plain http,
//! https with HTTP/2 (ALPN `h2`) and https with HTTP/1.1 only, each against a server process
//! of its own (testweb with a CA made up at start, trusted through `network.ca_file`),
//! interleaved within each run; printed per transport are pages/s, crawler CPU per 1,000
//! pages and the server process's, and against plain http the ratios and the CPU TLS adds
//! per page.
//!
//! Run: `cargo bench --bench crawl` (`-- --runs N` to change the number of runs,
//! `-- --encodings` to have the server send gzip/br-coded and chunked answers,
//! `-- --long-tail` for pages of long-tailed sizes, median ~12 KB, 1% over 500 KB, a few over
//! 5 MB, crawled without the archive so that the peak RSS is the crawl's alone; `-- --no-warc`
//! for the plain crawl alone; `-- --polite` for politeness on with limits that do not bind
//! (10^6 requests/s and 64 in flight per host name), and `-- --per-ip` for that plus the same
//! per server address, so each figure is the cost of the budgets and address lookups, not a
//! slower crawl).
//!
//! The crawler runs on its own allocator (`crawler::allocator`: mimalloc, tuned), the server
//! process on the system's; `CRAWLER_ALLOCATOR=system cargo bench --bench crawl` runs the
//! crawler on glibc's too, for a comparison. The first line printed says which.
//!
//! `-- --arenas N` (with `CRAWLER_ALLOCATOR=system`) caps glibc malloc at N arenas instead of the crawler's 2
//! (`crate::allocator`; 0 for glibc's default of 8 per core): run back to back with and
//! without to see what the cap costs in CPU and saves in peak RSS. The CPU figures are
//! printed as user and sys too.
//!
//! `-- --cores N` runs the crawler pinned to N cores and reports what limits its scaling:
//! per-thread CPU, context switches and (with `--features bench-counters`) cross-thread
//! hand-offs per page; see `support/scaling.rs`.
//!
//! `-- --real-size` crawls pages of real size and shape (mean ~240 KB, inline scripts,
//! styles and JSON) over https with gzip/br, with and without the archive: crawler CPU per
//! page (user, sys), pages/s, peak RSS (`support/real_size.rs`).
//!
//! `-- --exact` measures what `[seen] exact` costs: runs interleaved with it off and on (the
//! Bloom filter alone, then the filter in front of the exact admitted set on disk, see
//! `crawler::state_store`): pages/s and CPU per page side by side. Measured 2026-11-26
//! (`-- --exact --runs 3`, thin-LTO release build of the `recrawl` branch, load average ~17
//! from others' builds): off 7,176 pages/s and 0.132 CPU s/1000 pages, on 7,906 and 0.127;
//! on/off medians of per-run ratios 1.017 (pages/s) and 0.961 (CPU): no cost measurable
//! through that noise (the runs ranged 5,769-8,824 pages/s).
//!
//! `-- --monitor` measures what the monitor (`[monitor] listen`) costs: runs interleaved with
//! the monitor off and on, a scraper thread GETting `/metrics`, `/status.json` and `/` once
//! a second while the crawl runs (three requests where Prometheus makes one: an upper bound);
//! the scraper's own CPU (its thread's) is taken out of the crawler's.

#[path = "support/real_size.rs"]
mod real_size;
#[path = "support/testweb_process.rs"]
mod testweb_process;

#[path = "support/scaling.rs"]
mod scaling;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crawler::cpu_time::thread_cpu_ns;
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::{TlsMode, WebSpec};
use testweb_process::{cpu_secs, median, rusage, ServerProcess, Serving};

/// The features the benchmark crawls: URL variants and nofollow, no errors, traps or slow
/// pages.
const FEATURES: &str = "none,variants,nofollow";

struct Run {
    pages: u64,
    secs: f64,
    cpu: f64,
    /// Of `cpu`, the time in the kernel (the rest is user time).
    sys_cpu: f64,
    fetch_cpu: f64,
    parse_cpu: f64,
    dispatch_cpu: f64,
    bytes: u64,
    warc_bytes: u64,
    warc_payload: u64,
    revisits: u64,
    /// WARC records written, and responses archived in full but stored, not deflated.
    warc_records: u64,
    warc_stored: u64,
    /// Of `cpu`, the archive's deflate threads (idle priority: CPU nobody else wanted).
    deflate_cpu: f64,
    /// Busy CPU of the whole machine during the run ([`machine_busy_secs`]).
    machine_cpu: f64,
}

impl Run {
    /// Of the responses archived in full, the share stored rather than deflated.
    fn stored_share(&self) -> f64 {
        let in_full = (self.warc_records / 2).saturating_sub(self.revisits);
        self.warc_stored as f64 / in_full.max(1) as f64
    }
}

/// The kernel's share of a process's CPU time, in seconds.
fn sys_secs(u: &libc::rusage) -> f64 {
    u.ru_stime.tv_sec as f64 + u.ru_stime.tv_usec as f64 / 1e6
}

/// Busy CPU seconds of the whole machine so far (`/proc/stat`: user, nice, system, irq and
/// softirq of every core), 0 where there is no such file. What the crawler's own CPU does not
/// show: the kernel's threads writing the archive's pages back to disk and converting its
/// extents, the interrupts. Meaningful on an otherwise idle machine only.
fn machine_busy_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: u64 = [0, 1, 2, 5, 6].iter().filter_map(|&i| ticks.get(i)).sum();
    // SAFETY: a query with no pointers.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    busy as f64 / per_sec as f64
}

fn crawl_once(spec: &WebSpec, server: &ServerProcess, warc: bool) -> Run {
    crawl_with(spec, server, warc, false)
}

/// A crawl; with `scraped`, the monitor on and scraped every second (see the module doc).
fn crawl_with(spec: &WebSpec, server: &ServerProcess, warc: bool, scraped: bool) -> Run {
    let out = match testweb_process::arg_value("--out-in") {
        Some(dir) => tempfile::tempdir_in(dir).expect("--out-in DIR: a directory to write in"),
        None => tempfile::tempdir().expect("tempdir"),
    };
    let mut config = server.config(out.path());
    config.output.warc = warc;
    if let Some(mib) = testweb_process::arg_value("--warc-window-mib") {
        let mib: u64 = mib.parse().expect("--warc-window-mib N: MiB");
        config.output.warc_deflate_window = crawler::config::ByteSize(mib << 20);
    }
    if let Some(level) = testweb_process::arg_value("--warc-level") {
        config.output.warc_gzip_level = level.parse().expect("--warc-level N: a gzip level");
    }
    if let Some(mode) = testweb_process::arg_value("--warc-deflate") {
        config.output.warc_deflate = match mode.as_str() {
            "always" => crawler::warc::WarcDeflate::Always,
            "spare-cpu" => crawler::warc::WarcDeflate::SpareCpu,
            other => panic!("--warc-deflate {other}: use spare-cpu or always"),
        };
    }
    // With `--encodings`, every coding the crawler decodes is measured: `br` too, which a
    // real crawl offers only when `network.accept_encoding` lists it.
    config.network.accept_encoding = vec!["gzip".into(), "deflate".into(), "br".into()];
    let scraper = scraped.then(|| {
        // A free port, chosen here so the scraper knows it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        config.monitor.listen = Some(addr.clone());
        Scraper::start(addr)
    });
    generous_politeness(&mut config);
    config.set_seen_exact(EXACT_SEEN.load(Ordering::Relaxed));
    let seeds = server.seeds(spec);
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
    let cpu_before = cpu_secs(&rusage(libc::RUSAGE_SELF));
    let sys_before = sys_secs(&rusage(libc::RUSAGE_SELF));
    let main_before = thread_cpu_ns();
    let deflate_before = crawler::warc::cost::deflate_threads_cpu_ns();
    let machine_before = machine_busy_secs();
    let started = Instant::now();
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
    let machine_cpu = machine_busy_secs() - machine_before;
    let dispatch_cpu = (thread_cpu_ns() - main_before) as f64 / 1e9;
    drop(runtime);
    let scraper_cpu = scraper.map_or(0.0, Scraper::stop);
    let cpu = cpu_secs(&rusage(libc::RUSAGE_SELF)) - cpu_before - scraper_cpu;
    let sys_cpu = sys_secs(&rusage(libc::RUSAGE_SELF)) - sys_before;
    assert_eq!(summary.failures, 0, "{}", summary.human());
    Run {
        pages: summary.counts.finished,
        secs,
        cpu,
        sys_cpu,
        fetch_cpu: worker_cpu.load(Ordering::Relaxed) as f64 / 1e9,
        parse_cpu: summary.parse_cpu_secs,
        dispatch_cpu,
        bytes: summary.counts.bytes,
        warc_bytes: summary.counts.warc_bytes,
        warc_payload: summary.counts.warc_payload_bytes,
        revisits: summary.counts.warc_revisits,
        warc_records: summary.counts.warc_records,
        warc_stored: summary.counts.warc_stored,
        deflate_cpu: (crawler::warc::cost::deflate_threads_cpu_ns() - deflate_before) as f64 / 1e9,
        machine_cpu,
    }
}

/// A thread that GETs the monitor's three pages once a second until stopped.
struct Scraper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(f64, u64)>,
}

impl Scraper {
    fn start(addr: String) -> Scraper {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut scrapes = 0;
            while !stopping.load(Ordering::Relaxed) {
                for path in ["/metrics", "/status.json", "/"] {
                    if get(&addr, path) {
                        scrapes += 1;
                    }
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            (thread_cpu_ns() as f64 / 1e9, scrapes)
        });
        Scraper { stop, thread }
    }

    /// Stops it; its CPU seconds.
    fn stop(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        let (cpu, scrapes) = self.thread.join().expect("scraper");
        assert!(scrapes > 0, "the monitor was never scraped");
        cpu
    }
}

/// One GET with the whole answer read; whether it was a 200.
fn get(addr: &str, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_end(&mut answer).is_ok()
        && answer.starts_with(b"HTTP/1.1 200")
}

/// The crawl with one thing off and on, interleaved run by run on one server (after a
/// warm-up crawl), each run's line printed as it ends: what `--monitor` and `--exact` share.
/// `crawl` gets whether the thing is on; `detail` adds to a run's line.
fn off_and_on(
    spec: &WebSpec,
    runs: usize,
    what: &str,
    crawl: impl Fn(&ServerProcess, bool) -> Run,
    detail: impl Fn(&Run) -> String,
) -> [Vec<Run>; 2] {
    let server = ServerProcess::start(spec, FEATURES, Serving::default());
    let _ = crawl_once(spec, &server, false);
    let mut tables: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    for i in 0..runs {
        for (on, table) in tables.iter_mut().enumerate() {
            let run = crawl(&server, on == 1);
            println!(
                "run {i} {what} {}: {} pages in {:.2} s = {:.0} pages/s, {:.4} CPU s/1000 pages{}",
                if on == 1 { "on " } else { "off" },
                run.pages,
                run.secs,
                run.pages as f64 / run.secs,
                run.cpu / run.pages as f64 * 1000.0,
                detail(&run),
            );
            table.push(run);
        }
    }
    server.stop();
    tables
}

/// The median over runs of `f(on) / f(off)`, each run's two crawls having run back to back.
fn on_over_off(tables: &[Vec<Run>; 2], f: &dyn Fn(&Run) -> f64) -> f64 {
    median(
        tables[1]
            .iter()
            .zip(&tables[0])
            .map(|(on, off)| f(on) / f(off))
            .collect(),
    )
}

/// `--monitor`: the crawl with the monitor off and on (scraped every second), interleaved.
fn monitor_cost(spec: &WebSpec, runs: usize) {
    println!(
        "crawl benchmark, monitor off vs on and scraped every second: {} hosts, {} pages, politeness off, concurrency 64, {} runs",
        spec.hosts, spec.pages, runs
    );
    let tables = off_and_on(
        spec,
        runs,
        "monitor",
        |server, on| crawl_with(spec, server, false, on),
        |_| String::new(),
    );
    let cpu = |t: &[Run]| median(t.iter().map(|r| r.cpu / r.pages as f64 * 1000.0).collect());
    let rate = |t: &[Run]| median(t.iter().map(|r| r.pages as f64 / r.secs).collect());
    println!("--- medians over {runs} runs ---");
    println!(
        "monitor off: {:.0} pages/s, {:.4} CPU s/1000 pages",
        rate(&tables[0]),
        cpu(&tables[0])
    );
    println!(
        "monitor on, scraped every second: {:.0} pages/s, {:.4} CPU s/1000 pages",
        rate(&tables[1]),
        cpu(&tables[1])
    );
    let ratios = on_over_off(&tables, &|r| r.cpu / r.pages as f64);
    println!(
        "monitor on / off, CPU per page: {:.4} (median of per-run ratios; {:+.2}%)",
        ratios,
        (ratios - 1.0) * 100.0
    );
}

/// `--polite` / `--per-ip`: the politeness machinery on, its limits far above what the crawl
/// reaches (see the module doc).
fn generous_politeness(config: &mut crawler::config::Config) {
    let per_ip = std::env::args().any(|a| a == "--per-ip");
    if !per_ip && !std::env::args().any(|a| a == "--polite") {
        return;
    }
    let p = &mut config.politeness;
    p.enabled = true;
    p.per_host_rps = 1e6;
    p.per_host_burst = 1000;
    p.per_host_concurrency = 64;
    if per_ip {
        p.per_ip_rps = 1e6;
        p.per_ip_concurrency = 64;
    }
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    testweb_process::serve_if_asked();
    let args: Vec<String> = std::env::args().collect();
    crawler::allocator::limit_malloc_arenas();
    println!(
        "crawler's allocator: {} (CRAWLER_ALLOCATOR=system for the system's)",
        crawler::allocator::describe()
    );
    if let Some(arenas) = testweb_process::arg_value("--arenas") {
        let arenas: i32 = arenas
            .parse()
            .expect("--arenas N: a number of malloc arenas");
        // glibc refuses 0; its own default is 8 arenas per core.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
        let arenas = if arenas == 0 { 8 * cores } else { arenas };
        println!("glibc malloc capped at {arenas} arenas instead of the crawler's 2 (--arenas; 0: glibc's default)");
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: as in `crawler::allocator`: a parameter change, before other threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    let runs = testweb_process::arg_value("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5usize);
    let spec = WebSpec::bench(7);
    if args.iter().any(|a| a == "--tls") {
        transports(&spec, runs);
        return;
    }
    if let Some(cores) = testweb_process::arg_value("--cores") {
        let cores = cores.parse().expect("--cores N: a number of cores");
        scaling::report(&spec, FEATURES, cores, runs);
        return;
    }
    if args.iter().any(|a| a == "--real-size") {
        real_size::real_size(runs);
        return;
    }
    if args.iter().any(|a| a == "--monitor") {
        monitor_cost(&spec, runs);
        return;
    }
    if args.iter().any(|a| a == "--exact") {
        exact_cost(&spec, runs);
        return;
    }
    println!(
        "crawl benchmark: {} hosts, {} pages of ~{} KiB with {} links, politeness {}, concurrency 64, {} runs",
        spec.hosts,
        spec.pages,
        spec.page_bytes / 1024,
        spec.links_per_page,
        if args.iter().any(|a| a == "--polite" || a == "--per-ip") {
            "on (limits that do not bind)"
        } else {
            "off"
        },
        runs
    );
    if args.iter().any(|a| a == "--per-ip") {
        println!("per-IP limits on too (--per-ip): one address lookup per host, address budgets");
    }
    let encodings = args.iter().any(|a| a == "--encodings");
    if encodings {
        println!("the server sends gzip/br-coded and chunked answers (--encodings)");
    }
    let long_tail = args.iter().any(|a| a == "--long-tail");
    let no_warc = args.iter().any(|a| a == "--no-warc");
    let features = if long_tail {
        println!("pages of long-tailed sizes (--long-tail); WARC runs skipped");
        format!("{FEATURES},long_tail")
    } else {
        FEATURES.to_string()
    };
    let server = ServerProcess::start(
        &spec,
        &features,
        Serving {
            encodings,
            latency_ms: 0,
            tls: TlsMode::Off,
        },
    );
    let warc_only = args.iter().any(|a| a == "--warc-only");
    let sides: &[usize] = match (long_tail || no_warc, warc_only) {
        (true, _) => &[0],
        (false, true) => &[1],
        (false, false) => &[0, 1],
    };
    // Warm-up of each side: connection set-up paths, page cache, allocator, and for the
    // archive its first file and threads.
    for &warc in sides {
        let _ = crawl_once(&spec, &server, warc == 1);
    }
    let mut tables: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    for i in 0..runs {
        // Off then on, then on then off (ABBA): neither side always runs after the other,
        // in the page cache and writeback the other left, or first after a pause.
        let order: Vec<usize> = if i % 2 == 0 {
            sides.to_vec()
        } else {
            sides.iter().rev().copied().collect()
        };
        for warc in order {
            let table = &mut tables[warc];
            let run = crawl_once(&spec, &server, warc == 1);
            println!(
                "run {i} {}: {} pages in {:.2} s = {:.0} pages/s, {:.3} CPU s/1000 pages (sys {:.3}; fetch {:.3}, parse {:.3}, dispatch {:.3}, deflate threads {:.3}, rest {:.3}; machine {:.3}), {:.0} MB/s{}",
                if warc == 1 { "jsonl+warc" } else { "jsonl     " },
                run.pages,
                run.secs,
                run.pages as f64 / run.secs,
                run.cpu / run.pages as f64 * 1000.0,
                run.sys_cpu / run.pages as f64 * 1000.0,
                run.fetch_cpu / run.pages as f64 * 1000.0,
                run.parse_cpu / run.pages as f64 * 1000.0,
                run.dispatch_cpu / run.pages as f64 * 1000.0,
                run.deflate_cpu / run.pages as f64 * 1000.0,
                (run.cpu - run.fetch_cpu - run.parse_cpu - run.dispatch_cpu - run.deflate_cpu)
                    / run.pages as f64
                    * 1000.0,
                run.machine_cpu / run.pages as f64 * 1000.0,
                run.bytes as f64 / run.secs / 1e6,
                if warc == 1 {
                    format!(
                        ", WARC {:.1} MB for {:.1} MB of payload ({:.2}:1, {:.0} bytes/page), {} revisits, {:.1}% of responses stored",
                        run.warc_bytes as f64 / 1e6,
                        run.warc_payload as f64 / 1e6,
                        run.warc_payload as f64 / run.warc_bytes.max(1) as f64,
                        run.warc_bytes as f64 / run.pages as f64,
                        run.revisits,
                        run.stored_share() * 100.0
                    )
                } else {
                    String::new()
                }
            );
            table.push(run);
        }
    }
    server.stop();
    let server_cpu = cpu_secs(&rusage(libc::RUSAGE_CHILDREN));
    let all_pages: u64 = tables.iter().flatten().map(|r| r.pages).sum();
    // The runs and one warm-up per side.
    let total_pages = all_pages + all_pages / runs as u64;
    let peak_rss_mb = testweb_process::peak_rss_mb();
    let mut pages_per_sec = [0.0; 2];
    for (warc, table) in tables.iter().enumerate() {
        if table.is_empty() {
            continue;
        }
        let per_k = |f: &dyn Fn(&Run) -> f64| {
            median(
                table
                    .iter()
                    .map(|r| f(r) / r.pages as f64 * 1000.0)
                    .collect(),
            )
        };
        pages_per_sec[warc] = median(table.iter().map(|r| r.pages as f64 / r.secs).collect());
        println!(
            "--- medians over {runs} runs, {} ---",
            if warc == 1 {
                "pages.jsonl and WARC"
            } else {
                "pages.jsonl only"
            }
        );
        println!("pages/s: {:.0}", pages_per_sec[warc]);
        println!(
            "crawler CPU s per 1000 pages: {:.3} (user {:.3}, sys {:.3})",
            per_k(&|r| r.cpu),
            per_k(&|r| r.cpu - r.sys_cpu),
            per_k(&|r| r.sys_cpu)
        );
        println!(
            "  fetch {:.3}, parse {:.3}, dispatch {:.3}, deflate threads {:.3}, rest {:.3}; without the deflate threads {:.3}",
            per_k(&|r| r.fetch_cpu),
            per_k(&|r| r.parse_cpu),
            per_k(&|r| r.dispatch_cpu),
            per_k(&|r| r.deflate_cpu),
            per_k(&|r| r.cpu - r.fetch_cpu - r.parse_cpu - r.dispatch_cpu - r.deflate_cpu),
            per_k(&|r| r.cpu - r.deflate_cpu)
        );
        println!(
            "machine CPU s per 1000 pages (crawler, server, kernel threads; idle machine only): {:.3}",
            per_k(&|r| r.machine_cpu)
        );
        if warc == 1 {
            println!(
                "WARC bytes written per run: {:.1} MB; payload archived in full {:.1} MB; compression {:.2}:1; revisits {}",
                median(table.iter().map(|r| r.warc_bytes as f64 / 1e6).collect()),
                median(table.iter().map(|r| r.warc_payload as f64 / 1e6).collect()),
                median(
                    table
                        .iter()
                        .map(|r| r.warc_payload as f64 / r.warc_bytes.max(1) as f64)
                        .collect()
                ),
                median(table.iter().map(|r| r.revisits as f64).collect())
            );
            let stored = median(table.iter().map(Run::stored_share).collect());
            println!(
                "WARC bytes written per page: {:.0}; responses archived in full deflated {:.1}%, stored {:.1}% (output.warc_deflate = {})",
                median(
                    table
                        .iter()
                        .map(|r| r.warc_bytes as f64 / r.pages as f64)
                        .collect()
                ),
                (1.0 - stored) * 100.0,
                stored * 100.0,
                testweb_process::arg_value("--warc-deflate").unwrap_or_else(|| "spare-cpu".into())
            );
        }
    }
    if sides.len() == 2 {
        println!(
            "WARC on / off, pages/s: {:.2} (of the medians), {:.3} (median of per-run ratios); CPU per page {:.3}, without the deflate threads {:.3}",
            pages_per_sec[1] / pages_per_sec[0],
            on_over_off(&tables, &|r| r.pages as f64 / r.secs),
            on_over_off(&tables, &|r| r.cpu / r.pages as f64),
            on_over_off(&tables, &|r| (r.cpu - r.deflate_cpu) / r.pages as f64)
        );
        println!(
            "WARC on / off, machine CPU per page (median of per-run ratios): {:.3}",
            on_over_off(&tables, &|r| r.machine_cpu / r.pages as f64)
        );
        // Where the machine is busy, pages/s follow its CPU per page: the deflate threads
        // only fill what would be idle, so their CPU comes off the archive side. A measured
        // ratio near this one says the archive's cost is CPU (cut work to raise it); one
        // well below it says something waits (find what).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let busy = |t: &[Run], f: &dyn Fn(&Run) -> f64| {
            median(t.iter().map(|r| f(r) / (r.secs * cores)).collect()) * 100.0
        };
        println!(
            "WARC on / off, pages/s if CPU-bound (machine CPU per page off / on without the deflate threads): {:.3}; machine busy off {:.0}%, on {:.0}% ({:.0}% without the deflate threads)",
            on_over_off(&tables, &|r| 1.0 / ((r.machine_cpu - r.deflate_cpu) / r.pages as f64)),
            busy(&tables[0], &|r| r.machine_cpu),
            busy(&tables[1], &|r| r.machine_cpu),
            busy(&tables[1], &|r| r.machine_cpu - r.deflate_cpu),
        );
    }
    println!("crawler peak RSS: {peak_rss_mb:.1} MB");
    println!(
        "server (separate process) CPU s per 1000 pages: {:.3}",
        server_cpu / total_pages as f64 * 1000.0
    );
}

/// `--tls`: the crawl over plain http, https+h2 and https+http/1.1, interleaved per run.
fn transports(spec: &WebSpec, runs: usize) {
    const MODES: [(&str, TlsMode); 3] = [
        ("http      ", TlsMode::Off),
        ("https h2  ", TlsMode::H2),
        ("https h1.1", TlsMode::Http1Only),
    ];
    println!(
        "crawl benchmark over TLS: {} hosts, {} pages of ~{} KiB with {} links, politeness off, concurrency 64, {} runs; http vs https+h2 vs https+http/1.1",
        spec.hosts,
        spec.pages,
        spec.page_bytes / 1024,
        spec.links_per_page,
        runs
    );
    let servers: Vec<ServerProcess> = MODES
        .iter()
        .map(|(_, tls)| {
            ServerProcess::start(
                spec,
                FEATURES,
                Serving {
                    tls: *tls,
                    ..Serving::default()
                },
            )
        })
        .collect();
    // Warm-up of each: connection set-up paths, page cache, allocator.
    for server in &servers {
        let _ = crawl_once(spec, server, false);
    }
    let mut tables: Vec<Vec<Run>> = MODES.iter().map(|_| Vec::new()).collect();
    // The server process's CPU per 1,000 pages, per run (what TLS costs the other end).
    let mut server_tables: Vec<Vec<f64>> = MODES.iter().map(|_| Vec::new()).collect();
    for i in 0..runs {
        for (m, (name, _)) in MODES.iter().enumerate() {
            let server = &servers[m];
            let server_before = server.cpu_secs();
            let run = crawl_once(spec, server, false);
            let server_cpu = (server.cpu_secs() - server_before) / run.pages as f64 * 1000.0;
            println!(
                "run {i} {name}: {} pages in {:.2} s = {:.0} pages/s, {:.3} CPU s/1000 pages (fetch {:.3}, parse {:.3}, dispatch {:.3}); server {:.3} CPU s/1000 pages",
                run.pages,
                run.secs,
                run.pages as f64 / run.secs,
                run.cpu / run.pages as f64 * 1000.0,
                run.fetch_cpu / run.pages as f64 * 1000.0,
                run.parse_cpu / run.pages as f64 * 1000.0,
                run.dispatch_cpu / run.pages as f64 * 1000.0,
                server_cpu,
            );
            tables[m].push(run);
            server_tables[m].push(server_cpu);
        }
    }
    for server in servers {
        server.stop();
    }
    let per_k = |table: &[Run], f: &dyn Fn(&Run) -> f64| {
        median(
            table
                .iter()
                .map(|r| f(r) / r.pages as f64 * 1000.0)
                .collect(),
        )
    };
    let rate = |table: &[Run]| median(table.iter().map(|r| r.pages as f64 / r.secs).collect());
    println!("--- medians over {runs} runs ---");
    let plain_rate = rate(&tables[0]);
    let plain_cpu = per_k(&tables[0], &|r| r.cpu);
    let plain_server = median(server_tables[0].clone());
    for ((name, _), (table, server)) in MODES.iter().zip(tables.iter().zip(&server_tables)) {
        let cpu = per_k(table, &|r| r.cpu);
        let server = median(server.clone());
        println!(
            "{name}: {:.0} pages/s ({:.2} of http), crawler CPU {:.3} s/1000 pages ({:.2} of http; fetch {:.3}), TLS adds {:+.3} CPU ms per page; server CPU {:.3} s/1000 pages ({:+.3} ms per page)",
            rate(table),
            rate(table) / plain_rate,
            cpu,
            cpu / plain_cpu,
            per_k(table, &|r| r.fetch_cpu),
            cpu - plain_cpu,
            server,
            server - plain_server,
        );
    }
    // Per-run ratios (each run's transports ran back to back), medians of those.
    for (m, (name, _)) in MODES.iter().enumerate().skip(1) {
        let ratio = |f: &dyn Fn(&Run) -> f64| {
            median(
                tables[m]
                    .iter()
                    .zip(&tables[0])
                    .map(|(t, p)| f(t) / f(p))
                    .collect(),
            )
        };
        println!(
            "{name} / http within a run, medians: pages/s {:.2}, CPU per page {:.2}",
            ratio(&|r| r.pages as f64 / r.secs),
            ratio(&|r| r.cpu / r.pages as f64),
        );
    }
}

/// Whether `crawl_with` turns `[seen] exact` on (`--exact` alternates it).
static EXACT_SEEN: AtomicBool = AtomicBool::new(false);

/// `--exact`: the crawl with `[seen] exact` off and on, interleaved.
fn exact_cost(spec: &WebSpec, runs: usize) {
    println!(
        "crawl benchmark, seen.exact off vs on: {} hosts, {} pages, politeness off, concurrency 64, {} runs",
        spec.hosts, spec.pages, runs
    );
    let tables = off_and_on(
        spec,
        runs,
        "seen.exact",
        |server, on| {
            EXACT_SEEN.store(on, Ordering::Relaxed);
            crawl_once(spec, server, false)
        },
        |run| {
            format!(
                " (parse {:.3} s, dispatch {:.3} s)",
                run.parse_cpu, run.dispatch_cpu
            )
        },
    );
    EXACT_SEEN.store(false, Ordering::Relaxed);
    let cpu = |t: &[Run]| median(t.iter().map(|r| r.cpu / r.pages as f64 * 1000.0).collect());
    let rate = |t: &[Run]| median(t.iter().map(|r| r.pages as f64 / r.secs).collect());
    println!("--- medians over {runs} runs ---");
    for (name, table) in [("off", &tables[0]), ("on ", &tables[1])] {
        println!(
            "seen.exact {name}: {:.0} pages/s, {:.4} CPU s/1000 pages",
            rate(table),
            cpu(table)
        );
    }
    println!(
        "seen.exact on / off: pages/s {:.3}, CPU per page {:.3} (medians of per-run ratios)",
        on_over_off(&tables, &|r| r.pages as f64 / r.secs),
        on_over_off(&tables, &|r| r.cpu / r.pages as f64)
    );
}
