//! `cargo bench --bench crawl -- --cores N`: what limits the crawl's scaling with cores.
//!
//! The crawler (this process) is pinned to cores `0..N` with `sched_setaffinity`, and the
//! synthetic web's server process to the cores after them when the machine has more (on a
//! 2-core machine both share the two). The runtime gets N workers and the parse pool N
//! threads (its default, one per core it may run on). Printed per run and as medians:
//!
//! - pages/s, the crawler's CPU per page split into user and system time (getrusage);
//! - voluntary and involuntary context switches per page (getrusage): each voluntary one
//!   is a thread that went to sleep and had to be woken, the cost of a hand-off;
//! - CPU per page of each kind of thread, read from `/proc/self/task/*/` (`schedstat`'s
//!   nanoseconds on the CPU, or `stat`'s ticks where schedstat is missing) by a sampler
//!   thread every 10 ms, each thread's last reading kept: the driver (the thread that runs
//!   the crawl's `block_on`, which is the dispatcher: 1 / its CPU per page is the
//!   ceiling of pages/s whatever the cores), the tokio workers, the parse threads, the
//!   output thread, and the rest;
//! - of the driver's CPU, its system time and its sleeps per page (`getrusage(RUSAGE_THREAD)`
//!   on the thread running `block_on`): how much of the serial part is the kernel putting
//!   it to sleep, waking it, and waking the workers it hands rounds to;
//! - with `--features bench-counters`, the cross-thread hand-offs per page
//!   (`crawler::crawl::handoffs`): spawns, parse jobs, completions, output messages, joins,
//!   and locks on shared state.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawler::cpu_time::thread_cpu_ns;
use crawler::crawl::handoffs::{self, HandoffCounts};
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::WebSpec;

use crate::testweb_process::{median, rusage, ServerProcess, Serving};

/// The cores this machine has (those this process may run on at start).
fn machine_cores() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins `pid` (0: the calling thread; threads it starts later inherit it) to `cores`.
fn pin(pid: i32, cores: &[usize]) {
    // SAFETY: the set is ours; sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(rc, 0, "sched_setaffinity({pid}, {cores:?}) failed");
}

/// One thread's reading: its name, nanoseconds on the CPU, context switches.
#[derive(Clone, Default)]
struct ThreadReading {
    name: String,
    cpu_ns: u64,
    voluntary: u64,
}

fn read_thread(tid: &str) -> Option<ThreadReading> {
    let dir = format!("/proc/self/task/{tid}");
    let name = std::fs::read_to_string(format!("{dir}/comm")).ok()?;
    let cpu_ns = std::fs::read_to_string(format!("{dir}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .or_else(|| {
            let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            // SAFETY: sysconf reads a constant of the system.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            Some(ticks * 1_000_000_000 / hz)
        })?;
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(ThreadReading {
        name: name.trim().to_string(),
        cpu_ns,
        voluntary: field("voluntary_ctxt_switches:"),
    })
}

/// Every thread of this process but `skip`, by thread id.
fn read_threads(skip: Option<i64>) -> BTreeMap<i64, ThreadReading> {
    let mut threads = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(tid) = name.to_str() else { continue };
        let Ok(id) = tid.parse::<i64>() else { continue };
        if Some(id) == skip {
            continue;
        }
        if let Some(reading) = read_thread(tid) {
            threads.insert(id, reading);
        }
    }
    threads
}

/// Reads every thread every 10 ms and keeps each one's last reading, so threads that end
/// during the crawl (parse threads, the output thread) are counted up to their last 10 ms.
/// Its own CPU (a few % of the crawl's) is taken out of the process's figures.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(BTreeMap<i64, ThreadReading>, libc::rusage)>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-sampler".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let me = unsafe { libc::gettid() } as i64;
                let mut last = BTreeMap::new();
                loop {
                    for (tid, reading) in read_threads(Some(me)) {
                        last.insert(tid, reading);
                    }
                    if stopping.load(Ordering::Relaxed) {
                        // Its own CPU, which the process's figures must not count.
                        return (last, rusage(libc::RUSAGE_THREAD));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
            .expect("start the sampler");
        Sampler { stop, thread }
    }

    fn stop(self) -> (BTreeMap<i64, ThreadReading>, libc::rusage) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}

/// The kinds of thread the report splits CPU into.
const KINDS: [&str; 5] = ["driver", "tokio", "parse", "output", "other"];

fn kind_of(tid: i64, name: &str) -> usize {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as i64;
    if tid == pid {
        0
    } else if name.starts_with("tokio") {
        1
    } else if name.starts_with("parse-") {
        2
    } else if name == "output" {
        3
    } else {
        4
    }
}

struct PinnedRun {
    pages: u64,
    secs: f64,
    user: f64,
    sys: f64,
    voluntary: u64,
    involuntary: u64,
    /// CPU seconds per kind of thread ([`KINDS`]).
    by_kind: [f64; 5],
    /// Threads per kind, and their voluntary context switches (times they slept and were
    /// woken).
    threads: [usize; 5],
    sleeps: [u64; 5],
    driver_exact: f64,
    /// The driver thread's system time (s) and voluntary context switches (its sleeps):
    /// `getrusage(RUSAGE_THREAD)` around `block_on`, on the thread that runs it.
    driver_sys: f64,
    driver_sleeps: u64,
    handoffs: Option<HandoffCounts>,
}

fn crawl_pinned(spec: &WebSpec, server: &ServerProcess, cores: usize) -> PinnedRun {
    let out = tempfile::tempdir().expect("tempdir");
    // `crawl.parse_threads` is left at its default, one per core this process may run on:
    // `cores`, once pinned.
    let config = server.config(out.path());
    let seeds = server.seeds(spec);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("runtime");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let before_threads = read_threads(None);
    let before = rusage(libc::RUSAGE_SELF);
    let handoffs_before = handoffs::snapshot();
    let sampler = Sampler::start();
    let main_before = thread_cpu_ns();
    let driver_before = rusage(libc::RUSAGE_THREAD);
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
    let driver_exact = (thread_cpu_ns() - main_before) as f64 / 1e9;
    let driver_after = rusage(libc::RUSAGE_THREAD);
    let handoffs_after = handoffs::snapshot();
    let (last, sampler_cpu) = sampler.stop();
    drop(runtime);
    let after = rusage(libc::RUSAGE_SELF);
    assert_eq!(summary.failures, 0, "{}", summary.human());
    let mut by_kind = [0.0; 5];
    let mut threads = [0; 5];
    let mut sleeps = [0; 5];
    for (tid, reading) in &last {
        let base = before_threads.get(tid).cloned().unwrap_or_default();
        let kind = kind_of(*tid, &reading.name);
        by_kind[kind] += reading.cpu_ns.saturating_sub(base.cpu_ns) as f64 / 1e9;
        threads[kind] += 1;
        sleeps[kind] += reading.voluntary.saturating_sub(base.voluntary);
    }
    PinnedRun {
        pages: summary.counts.finished,
        secs,
        user: tv(after.ru_utime) - tv(before.ru_utime) - tv(sampler_cpu.ru_utime),
        sys: tv(after.ru_stime) - tv(before.ru_stime) - tv(sampler_cpu.ru_stime),
        voluntary: (after.ru_nvcsw - before.ru_nvcsw) as u64,
        involuntary: (after.ru_nivcsw - before.ru_nivcsw) as u64,
        by_kind,
        threads,
        sleeps,
        driver_exact,
        driver_sys: tv(driver_after.ru_stime) - tv(driver_before.ru_stime),
        driver_sleeps: (driver_after.ru_nvcsw - driver_before.ru_nvcsw) as u64,
        handoffs: handoffs_after
            .zip(handoffs_before)
            .map(|(after, before)| after.since(&before)),
    }
}

/// `--cores N`: see the module doc.
pub fn report(spec: &WebSpec, features: &str, cores: usize, runs: usize) {
    let all = machine_cores();
    assert!(
        cores >= 1 && cores <= all.len(),
        "--cores {cores}: this machine lets this process use {} cores",
        all.len()
    );
    let (crawler_cores, server_cores) = if all.len() > cores {
        (all[..cores].to_vec(), all[cores..].to_vec())
    } else {
        (all.clone(), all.clone())
    };
    let server = ServerProcess::start(spec, features, Serving::default());
    pin(server.pid() as i32, &server_cores);
    // Every thread the crawl starts from here on inherits this.
    pin(0, &crawler_cores);
    println!(
        "crawl scaling: {} hosts, {} pages of ~{} KiB with {} links, politeness off, concurrency 64; crawler on cores {crawler_cores:?} ({cores} workers, {cores} parse threads), server on cores {server_cores:?}; {runs} runs{}",
        spec.hosts,
        spec.pages,
        spec.page_bytes / 1024,
        spec.links_per_page,
        if handoffs::snapshot().is_some() {
            "; hand-offs counted (bench-counters)"
        } else {
            "; hand-offs not counted (build with --features bench-counters)"
        }
    );
    // Warm-up: connection set-up paths, page cache, allocator.
    let _ = crawl_pinned(spec, &server, cores);
    let mut table = Vec::new();
    for i in 0..runs {
        let run = crawl_pinned(spec, &server, cores);
        let per = |x: f64| x / run.pages as f64 * 1e6;
        println!(
            "run {i}: {} pages in {:.2} s = {:.0} pages/s; CPU {:.1} µs/page (user {:.1}, sys {:.1}); driver {:.2} µs/page; ctx switches {:.2} voluntary + {:.2} involuntary per page",
            run.pages,
            run.secs,
            run.pages as f64 / run.secs,
            per(run.user + run.sys),
            per(run.user),
            per(run.sys),
            per(run.driver_exact),
            run.voluntary as f64 / run.pages as f64,
            run.involuntary as f64 / run.pages as f64,
        );
        let threads: Vec<String> = KINDS
            .iter()
            .enumerate()
            .map(|(k, name)| {
                format!(
                    "{name} ×{} {:.1} ({:.2} sleeps)",
                    run.threads[k],
                    per(run.by_kind[k]),
                    run.sleeps[k] as f64 / run.pages as f64
                )
            })
            .collect();
        println!("       per thread kind, µs/page: {}", threads.join(", "));
        if let Some(h) = &run.handoffs {
            let p = |n: u64| n as f64 / run.pages as f64;
            println!(
                "       hand-offs per page {:.2}: spawns {:.2}, parse jobs {:.2}, completions {:.2}, output {:.2}, joins {:.2}; locks {:.2}",
                p(h.messages()),
                p(h.spawns),
                p(h.parse_jobs),
                p(h.completions),
                p(h.outputs),
                p(h.joins),
                p(h.locks)
            );
        }
        table.push(run);
    }
    server.stop();
    let med = |f: &dyn Fn(&PinnedRun) -> f64| median(table.iter().map(f).collect());
    let per = |f: &dyn Fn(&PinnedRun) -> f64| med(&|r| f(r) / r.pages as f64 * 1e6);
    println!("--- medians over {runs} runs, {cores} cores ---");
    println!("pages/s: {:.0}", med(&|r| r.pages as f64 / r.secs));
    println!(
        "crawler CPU µs/page: {:.1} (user {:.1}, sys {:.1})",
        per(&|r| r.user + r.sys),
        per(&|r| r.user),
        per(&|r| r.sys)
    );
    let driver = per(&|r| r.driver_exact);
    println!(
        "driver (dispatcher) CPU µs/page: {driver:.2} (a ceiling of {:.0} pages/s); of it sys {:.2} \
         (the kernel's: its sleeps and the wake-ups it sends), {:.3} sleeps per page",
        1e6 / driver,
        per(&|r| r.driver_sys),
        med(&|r| r.driver_sleeps as f64 / r.pages as f64)
    );
    println!(
        "context switches per page: {:.2} voluntary, {:.2} involuntary",
        med(&|r| r.voluntary as f64 / r.pages as f64),
        med(&|r| r.involuntary as f64 / r.pages as f64)
    );
    let kinds: Vec<String> = KINDS
        .iter()
        .enumerate()
        .map(|(k, name)| {
            format!(
                "{name} {:.1} ({:.2} sleeps)",
                per(&|r| r.by_kind[k]),
                med(&|r| r.sleeps[k] as f64 / r.pages as f64)
            )
        })
        .collect();
    println!(
        "CPU µs/page per thread kind (voluntary context switches per page): {}",
        kinds.join(", ")
    );
    if table.iter().all(|r| r.handoffs.is_some()) {
        let h = |f: &dyn Fn(&HandoffCounts) -> u64| {
            per(&|r| r.handoffs.as_ref().map_or(0, f) as f64) / 1e6
        };
        println!(
            "hand-offs per page: {:.2} (spawns {:.2}, parse jobs {:.2}, completions {:.2}, output {:.2}, joins {:.2}); locks {:.2}",
            h(&|c| c.messages()),
            h(&|c| c.spawns),
            h(&|c| c.parse_jobs),
            h(&|c| c.completions),
            h(&|c| c.outputs),
            h(&|c| c.joins),
            h(&|c| c.locks)
        );
    }
}
