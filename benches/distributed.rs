//! Distributed-mode benchmark: the synthetic web (`WebSpec::bench`: 24 hosts, 30,000 pages
//! of 16 KiB with 80 links) crawled with politeness off, concurrency 64, by
//!
//! - one process on its own (the local seen-set and frontier),
//! - one process on Redis,
//! - two processes on one Redis,
//!
//! printing pages/s, the crawler's CPU per 1,000 pages (getrusage of this executable, which
//! runs the crawls; the web is served by a separate process), Redis's CPU per 1,000 pages
//! (`INFO cpu` used_cpu_user + used_cpu_sys before and after) and Redis round trips per
//! page (the crawl's own count, summed in Redis). Medians of the runs; each run crawls the
//! whole web into a fresh crawl id on a `redis-server` started for the benchmark
//! (persistence off). The "two processes" are two crawls in this executable, each with its
//! own tokio runtime of 2 workers: the same protocol and the same Redis traffic as two
//! processes, with one CPU figure for both.
//!
//! From Redis's CPU per page the last line models how many crawler processes one Redis
//! core serves at the measured per-process rate.
//!
//! Measured on this 2-core machine while three other engineers' builds and benchmarks ran
//! (load average 7 to 10 during the runs, so the figures swing by ±30 %), each line the
//! medians of one invocation of `--runs 3`:
//!
//! | invocation | local pages/s | 1 on Redis pages/s | ratio | 2 on Redis pages/s | crawler CPU s/1000 p (local / Redis / 2 on Redis) | Redis CPU s/1000 p | round trips/page |
//! |---|---:|---:|---:|---:|---:|---:|---:|
//! | 1 | 11,628 | 8,548 | 0.74 | 7,702 | 0.126 / 0.150 / 0.158 | 0.022 | 0.054 |
//! | 2 | 7,929 | 4,942 | 0.62 | 4,412 | 0.140 / 0.166 / 0.174 | 0.020 | 0.057 |
//!
//! After claims stopped asking every shard (`src/distributed/shard_views.rs`), one
//! invocation of `--runs 3` with thin LTO (`CARGO_PROFILE_BENCH_LTO=thin
//! CARGO_PROFILE_BENCH_CODEGEN_UNITS=16`) while other engineers' builds ran: local 8,653
//! pages/s, one process on Redis 7,985 (0.92x), crawler CPU 0.125 / 0.118 s per 1,000 pages,
//! Redis CPU 0.023 s per 1,000 pages, 0.37 script calls and 0.053 round trips per page. The
//! build before the change, run right after it the same way: local 8,967, on Redis 6,246
//! (0.70x), Redis CPU 0.041 s per 1,000 pages, 0.043 round trips per page.
//! Re-measured with the real profile on an idle machine at 2049ab1: local 13,002 / 12,762
//! pages/s, one process on Redis 10,010 / 9,667 (0.77x / 0.76x, `--runs 3` / `--runs 5`),
//! Redis CPU 0.022 / 0.023 s per 1,000 pages: the gain under load (0.92x) shrinks when the
//! local crawl has both cores to itself.
//!
//! Round trips stay far under the goal of 2 per page; on two saturated cores the rate
//! follows CPU per page, and a process on Redis spends 19 % more (JSON of queued URLs, the
//! client's encoding, acknowledgements) besides Redis's own 0.02 s per 1,000 pages. Two
//! processes cannot beat one here (one already fills the cores). Model: one Redis core
//! serves about 46,000–50,000 pages/s, some 5–10 processes at the measured one-process
//! rate.
//!
//! Profiled with `perf record -F 499 -e cpu-clock -- <bench binary> --only redis1 --runs 1`
//! (and `--only local`), samples per thread: the crawl's own loop thread took 967 samples on
//! Redis against 138 for the local dispatcher, nearly all of it tokio timer re-arming and
//! task switches: it woke for a ready URL while every slot was taken, and so spun until a
//! completion came. Without that (the local dispatcher's rule), the crawler CPU per page on
//! Redis went from 1.33x to 1.19x the local one within one invocation (0.230 / 0.173 before,
//! the table's after), and two processes from 0.265 to 0.158–0.174 s per 1,000 pages. What
//! remains is the parse threads' and fetch tasks' share, as in the local run, plus the
//! round trips' encoding.
//!
//! After a sync's acknowledgements went out as one `release.lua` call on a single server
//! (a section per shard, instead of one call per shard touched), two back-to-back pairs of
//! `--runs 3` with thin LTO while other engineers' builds ran (load 4 to 11): script calls per
//! page 0.35-0.36 before, 0.17-0.18 after; Redis CPU 0.022-0.023 s per 1,000 pages before and
//! after; round trips 0.053-0.056 per page either way; ratio 0.69x / 0.77x before, 0.81x /
//! 0.70x after: within this machine's noise. Redis's `INFO commandstats` of one run before
//! the change: 61,429 BITFIELD calls (two per admitted URL) and most of the scripts' time
//! inside Lua itself, not in a fixed cost per call, which is why halving the calls did not
//! move Redis's CPU.
//!
//! After `admit.lua` went from two `BITFIELD` calls per URL (3k+2 and 4k+2 arguments) to one
//! `GETRANGE` and one `SETRANGE` of the URL's 64-byte block, with one push and one schedule
//! look-up per host and call: two invocations of `--runs 3`, thin LTO, load 2 to 10: local
//! 7,524 / 10,091 pages/s, one process on Redis 5,281 / 7,967 (0.70x / 0.79x), crawler CPU
//! 0.083 / 0.103 and 0.103 / 0.110 s per 1,000 pages, Redis CPU 0.0154 / 0.0142 s per 1,000
//! pages (main's fat-LTO build right after: 0.0221), starved 6.8% / 12.6% of the run.
//!
//! Starvation, measured first (a trace of one process's syncs and admissions): 9-16% of a
//! run had a fetch slot free and nothing queued, nearly all of it while an admission was in
//! flight. A lease asked for a top-up only when fewer than half its URLs were open, and a
//! page's URL stayed open until its links were admitted (10-30 ms for 1,000-3,000 URLs), so
//! leases looked full while the local queue was empty; a top-up that found the host's queue
//! empty waited 100 ms even when this process's own admission had just refilled it; and a
//! lease that drained went back on the schedule and had to be claimed again. Now a lease
//! is topped up by the URLs it has left to fetch (and by any room while the process is
//! short of work, politeness off), at once after its own admission queued URLs of its host,
//! and a drained one is refilled or ended by its next claim (`claim.lua`). Thin LTO, loaded
//! machine (load 8-11, four engineers' builds), three invocations of `--runs 3`, 2026-11-26 at
//! 89609c4's code but for its last commit (a lost drained lease forgotten; not on this path):
//!
//! | invocation | local pages/s | 1 on Redis | ratio | per run, side by side | crawler CPU s/1000 p (local / Redis) | Redis CPU s/1000 p | round trips/page | script calls/page | starved |
//! |---|---:|---:|---:|---|---:|---:|---:|---:|---:|
//! | 1 | 8,892 | 8,142 | 0.92 | 0.80 / 0.94 / 1.01 | 0.104 / 0.116 | 0.0169 | 0.043 | 0.14 | 5.8% |
//! | 2 | 10,302 | 8,859 | 0.86 | 0.73 / 0.86 / 1.00 | 0.094 / 0.106 | 0.0185 | 0.046 | 0.15 | 3.5% |
//! | 3 | 8,981 | 7,967 | 0.89 | 0.87 / 0.89 / 0.97 | 0.104 / 0.123 | 0.0181 | 0.040 | 0.14 | 6.5% |
//!
//! Median 0.89x (main's fat-LTO build in the same sitting, one invocation: 0.76x, starved
//! 12.2%). Claims fell from 21-28 to 6-7 per second; Redis's CPU per page rose ~20%
//! (0.0144-0.0155 before): more, smaller top-ups. Two processes on Redis: 0.84-0.97x local
//! together, each starved 44-50% of its run: hosts now stay with the process that holds
//! them for up to half a lease period (15 s), longer than this 3-4 s crawl, so one process
//! does most of it; on these two saturated cores that costs nothing.
//!
//! Run: `cargo bench --bench distributed` (`-- --runs N`, default 3; `-- --only local`,
//! `--only redis1` or `--only redis2` runs one mode, e.g. under `perf record`; `--set
//! KEY=VALUE`, repeatable, changes a config key in every mode, e.g. `--set
//! distributed.lease_urls=64`). Needs `redis-server` and `redis-cli` on the PATH. The last
//! column, `starved`, is the share of a process's run with a fetch slot free and nothing
//! queued locally (its summary's `starved_secs`): the time it waited for Redis.

#[path = "support/testweb_process.rs"]
mod testweb_process;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crawler::config::Config;
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::{Features, WebSpec};
use testweb_process::{median, ServerProcess, Serving};
use url::Url;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed at the end.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The features the benchmark crawls, as the crawl benchmark's.
const FEATURES: &str = "none,variants,nofollow";

fn spec() -> WebSpec {
    WebSpec {
        features: Features::parse(FEATURES).expect("features"),
        ..WebSpec::bench(7)
    }
}

fn cpu_secs() -> f64 {
    testweb_process::cpu_secs(&testweb_process::rusage(libc::RUSAGE_SELF))
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--raw"])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Redis's own CPU seconds so far (user + sys).
fn redis_cpu(port: u16) -> f64 {
    redis_cli(port, &["INFO", "cpu"])
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user" || *k == "used_cpu_sys")
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum()
}

/// Script calls Redis has run so far (`INFO commandstats`: `EVALSHA` calls), whose count
/// per page says how many shards the claims and acknowledgements reach.
fn redis_script_calls(port: u16) -> u64 {
    redis_cli(port, &["INFO", "commandstats"])
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[derive(Clone, Copy)]
enum Mode {
    Local,
    Redis(usize),
}

fn processes_of(mode: Mode) -> usize {
    match mode {
        Mode::Local => 1,
        Mode::Redis(n) => n,
    }
}

struct Run {
    pages: u64,
    secs: f64,
    cpu: f64,
    redis_cpu: f64,
    round_trips: u64,
    /// Lua script calls Redis ran (admissions, claims, releases, renewals, heartbeats).
    script_calls: u64,
    /// URLs admitted (queued) and leases claimed, from the crawl's `meta` in Redis.
    admitted: u64,
    claims: u64,
    /// Seconds with a fetch slot free and nothing queued (see [`starved_secs`]).
    starved: f64,
}

/// The benchmark's configuration, with the `--set KEY=VALUE` of its command line (as the
/// crawler's own `--set`, e.g. `--set distributed.lease_urls=64`) applied to both modes.
fn config(web_port: u16, out: &std::path::Path) -> Config {
    let base = testweb_process::bench_config(web_port, out);
    let args: Vec<String> = std::env::args().collect();
    let sets: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--set")
        .map(|w| w[1].clone())
        .collect();
    if sets.is_empty() {
        return base;
    }
    let mut config = Config::load(None, &sets).expect("--set KEY=VALUE");
    config.network.resolve = base.network.resolve;
    config.output.dir = base.output.dir;
    config.politeness.enabled = base.politeness.enabled;
    config.politeness.respect_robots = base.politeness.respect_robots;
    config.crawl.max_urls = base.crawl.max_urls;
    config.crawl.max_depth = base.crawl.max_depth;
    if !sets.iter().any(|s| s.starts_with("crawl.concurrency=")) {
        config.crawl.concurrency = base.crawl.concurrency;
    }
    config
}

/// Seconds the processes of a crawl in `out` spent with a fetch slot free and nothing
/// queued (waiting for Redis), summed from their `summary-<id>.json`.
fn starved_secs(out: &std::path::Path) -> f64 {
    std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("summary-") && name.ends_with(".json")
        })
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter_map(|json| json["distributed"]["starved_secs"].as_f64())
        .sum::<f64>()
        // An empty float sum is -0.0 (a local crawl has no such summary): printed "-0.0%".
        + 0.0
}

fn crawl_once(mode: Mode, web_port: u16, redis_port: u16, run: usize) -> Run {
    let out = tempfile::tempdir().expect("tempdir");
    let mut config = config(web_port, out.path());
    let crawl_id = if run == usize::MAX {
        "bench-queues".to_string()
    } else {
        format!("bench-{run}")
    };
    let processes = match mode {
        Mode::Local => 1,
        Mode::Redis(n) => {
            redis_cli(redis_port, &["FLUSHALL"]);
            config.distributed.redis = Some(format!("redis://127.0.0.1:{redis_port}/0"));
            config.distributed.crawl_id = Some(crawl_id.clone());
            n
        }
    };
    let seeds: Vec<Url> = (0..spec().hosts)
        .map(|h| Url::parse(&format!("http://h{h}.test/")).expect("seed"))
        .collect();
    let cpu_before = cpu_secs();
    let redis_before = redis_cpu(redis_port);
    let calls_before = redis_script_calls(redis_port);
    let started = Instant::now();
    let threads: Vec<_> = (0..processes)
        .map(|_| {
            let config = config.clone();
            let seeds = seeds.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime
                    .block_on(run_crawl(CrawlRequest {
                        config,
                        seeds,
                        progress: ProgressMode::Quiet,
                        shutdown: ShutdownHandle::new(),
                        resume: None,
                    }))
                    .expect("crawl")
            })
        })
        .collect();
    let mut pages = 0;
    for t in threads {
        let summary = t.join().expect("crawl thread");
        assert_eq!(summary.failures, 0, "{}", summary.human());
        pages += summary.counts.finished;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu_before;
    let redis_cpu = redis_cpu(redis_port) - redis_before;
    let script_calls = redis_script_calls(redis_port).saturating_sub(calls_before);
    let field = |key: &str, name: &str| -> u64 {
        match mode {
            Mode::Local => 0,
            Mode::Redis(_) => redis_cli(
                redis_port,
                &["HGET", &format!("crawl:{{{crawl_id}}}:{key}"), name],
            )
            .trim()
            .parse()
            .unwrap_or(0),
        }
    };
    // Admissions and claims are counted per shard (`crawl:{id:shard}:meta`): summed here.
    let shards_sum = |name: &str| -> u64 {
        match mode {
            Mode::Local => 0,
            Mode::Redis(_) => redis_cli(
                redis_port,
                &[
                    "--scan",
                    "--pattern",
                    &format!("crawl:{{{crawl_id}:*}}:meta"),
                ],
            )
            .lines()
            .filter(|key| !key.trim().is_empty())
            .map(|key| {
                redis_cli(redis_port, &["HGET", key.trim(), name])
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
            })
            .sum(),
        }
    };
    let round_trips = field("counters", "redis_round_trips");
    let starved = starved_secs(out.path());
    let admitted = shards_sum("accepted");
    let claims = shards_sum("lease_seq");
    Run {
        pages,
        secs,
        cpu,
        redis_cpu: if matches!(mode, Mode::Local) {
            0.0
        } else {
            redis_cpu
        },
        round_trips,
        script_calls,
        admitted,
        claims,
        starved,
    }
}

/// Redis memory of the crawl's host queues at their fullest: (URLs queued, bytes by
/// `MEMORY USAGE`, bytes of those URLs), sampled every 100 ms until `stop`.
fn sample_queues(
    port: u16,
    crawl_id: &str,
    stop: &std::sync::atomic::AtomicBool,
) -> (u64, u64, u64) {
    let mut redis = redis::Client::open(format!("redis://127.0.0.1:{port}/0"))
        .and_then(|c| c.get_connection())
        .expect("a connection to the benchmark's redis-server");
    let mut fullest = (0, 0, 0);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("crawl:*{crawl_id}*:q:*"))
            .query(&mut redis)
            .unwrap_or_default();
        let mut sample = (0, 0, 0);
        for key in &keys {
            let Some((_, host)) = key.split_once(":q:") else {
                continue;
            };
            let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(&mut redis)
                .unwrap_or_default();
            let memory: u64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query(&mut redis)
                .unwrap_or(0);
            sample.0 += items.len() as u64;
            sample.1 += memory;
            sample.2 += items
                .iter()
                .filter_map(|i| crawler::distributed::queue_item::decode(host, i).ok())
                .map(|u| u.url.len() as u64)
                .sum::<u64>();
        }
        if sample.0 > fullest.0 {
            fullest = sample;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    fullest
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    testweb_process::serve_if_asked();
    crawler::allocator::limit_malloc_arenas();
    let runs = testweb_process::arg_value("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3usize);
    let only = testweb_process::arg_value("--only");
    let web = ServerProcess::start(&spec(), FEATURES, Serving::default());
    let web_port = web.port;
    let redis_dir = tempfile::tempdir().expect("tempdir");
    let redis_port = free_port();
    let _redis = Killed(
        Command::new("redis-server")
            .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(redis_dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH"),
    );
    wait_for(redis_port, "redis-server");
    let s = spec();
    println!(
        "distributed benchmark: {} hosts, {} pages of ~{} KiB with {} links, politeness off, concurrency 64 per process, {runs} runs, medians",
        s.hosts,
        s.pages,
        s.page_bytes / 1024,
        s.links_per_page
    );
    println!(
        "{:<22} {:>8} {:>10} {:>22} {:>20} {:>16} {:>18} {:>14} {:>10} {:>9}",
        "mode",
        "pages",
        "pages/s",
        "crawler CPU s/1000 p",
        "Redis CPU s/1000 p",
        "round trips/page",
        "script calls/page",
        "admitted/s",
        "claims/s",
        "starved"
    );
    let modes: Vec<(&str, Mode)> = [
        ("local", Mode::Local),
        ("redis1", Mode::Redis(1)),
        ("redis2", Mode::Redis(2)),
    ]
    .into_iter()
    .filter(|(key, _)| only.as_deref().is_none_or(|o| o == *key))
    .collect();
    // The modes take turns run by run, so that each run of one mode has a run of the others
    // beside it in time: on a shared machine the load swings within an invocation, and a
    // ratio of runs made side by side (printed per run below) shows whether a slow run was
    // the machine (both slow) or the mode (one slow, and then its `starved` says whether
    // it waited for Redis).
    let mut all: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        for (results, (_, mode)) in all.iter_mut().zip(&modes) {
            results.push(crawl_once(*mode, web_port, redis_port, run));
        }
    }
    let mut local_rate = 0.0;
    let mut per_process = (0.0, 0.0);
    let mut per_run: Vec<String> = Vec::new();
    for ((key, mode), results) in modes.iter().zip(all.iter()) {
        let (key, mode) = (*key, *mode);
        let name = match mode {
            Mode::Local => "1 process, local",
            Mode::Redis(1) => "1 process on Redis",
            Mode::Redis(_) => "2 processes on Redis",
        };
        per_run.push(format!(
            "  {key:<7} per run: {}",
            results
                .iter()
                .map(|r| format!(
                    "{:.0} pages/s, starved {:.1}%",
                    r.pages as f64 / r.secs,
                    r.starved / r.secs / processes_of(mode) as f64 * 100.0
                ))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        let pages = median(results.iter().map(|r| r.pages as f64).collect());
        let rate = median(results.iter().map(|r| r.pages as f64 / r.secs).collect());
        let cpu = median(
            results
                .iter()
                .map(|r| r.cpu / r.pages as f64 * 1000.0)
                .collect(),
        );
        let redis_cpu = median(
            results
                .iter()
                .map(|r| r.redis_cpu / r.pages as f64 * 1000.0)
                .collect(),
        );
        let trips = median(
            results
                .iter()
                .map(|r| r.round_trips as f64 / r.pages as f64)
                .collect(),
        );
        let calls = median(
            results
                .iter()
                .map(|r| r.script_calls as f64 / r.pages as f64)
                .collect(),
        );
        // One Redis node: its admissions and claims per second.
        let admitted = median(results.iter().map(|r| r.admitted as f64 / r.secs).collect());
        let claims = median(results.iter().map(|r| r.claims as f64 / r.secs).collect());
        // The share of the run a process waited for Redis with a slot free.
        let starved = median(
            results
                .iter()
                .map(|r| r.starved / r.secs / processes_of(mode) as f64)
                .collect(),
        );
        println!(
            "{name:<22} {pages:>8.0} {rate:>10.0} {cpu:>22.3} {redis_cpu:>20.4} {trips:>16.3} {calls:>18.2} {admitted:>14.0} {claims:>10.0} {:>8.1}%",
            starved * 100.0
        );
        match mode {
            Mode::Local => local_rate = rate,
            Mode::Redis(1) => per_process = (rate, redis_cpu),
            Mode::Redis(_) => {}
        }
    }
    for line in &per_run {
        println!("{line}");
    }
    let (rate, redis_cpu) = per_process;
    println!(
        "1 process on Redis: {:.2}x the local rate (goal >= 0.8x)",
        rate / local_rate.max(1e-9)
    );
    let rate_of = |mode: &str| {
        modes.iter().position(|(key, _)| *key == mode).map(|i| {
            all[i]
                .iter()
                .map(|r| r.pages as f64 / r.secs)
                .collect::<Vec<_>>()
        })
    };
    if let (Some(local), Some(redis1)) = (rate_of("local"), rate_of("redis1")) {
        let ratios: Vec<String> = local
            .iter()
            .zip(&redis1)
            .map(|(l, r)| format!("{:.2}x", r / l.max(1e-9)))
            .collect();
        println!(
            "  side by side, run by run: {} (a slow run of both modes is the machine's)",
            ratios.join(" ")
        );
    }
    if redis_cpu > 0.0 {
        // One Redis core gives 1000 / redis_cpu thousand-page units per second.
        let pages_per_core = 1000.0 / redis_cpu;
        println!(
            "model: one Redis core serves {:.0} pages/s, that is about {:.0} processes at {:.0} pages/s each",
            pages_per_core,
            pages_per_core / rate.max(1e-9),
            rate
        );
    }
    if only.as_deref().is_none_or(|o| o == "queues") {
        // A run of its own (its sampling would weigh on the timed ones' Redis CPU).
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (queued, memory, url_bytes) = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| sample_queues(redis_port, "bench-queues", &stop));
            crawl_once(Mode::Redis(1), web_port, redis_port, usize::MAX);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            sampler.join().expect("sampler")
        });
        let n = queued.max(1) as f64;
        println!(
            "Redis queues at their fullest sample: {queued} URLs in {memory} bytes (MEMORY USAGE), {:.1} bytes per queued URL of {:.1} bytes (bound: URL bytes + 24)",
            memory as f64 / n,
            url_bytes as f64 / n
        );
    }
    web.stop();
}
