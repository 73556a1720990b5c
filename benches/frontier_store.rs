//! Frontier store benchmark: the figures of issue 4's disk-backed frontier.
//!
//! `cargo bench --bench frontier_store` runs every scenario, each in a child process of its
//! own so that its peak RSS (getrusage ru_maxrss) is its own; `-- 10000000 1000000` runs one
//! (URLs, hosts). A scenario pushes N synthetic URLs (~80 bytes, with a ~40-byte parent) to
//! uniformly random hosts, syncs, drops and reopens the store (the resume cost), then pops
//! host after host, round-robin as a polite scheduler would, pushing one new URL for every
//! four pops (N/4 in all), with a sync every N/10 pops, until every queue is empty.
//!
//! `-- pause 1000000` measures the pause of a sync (`begin_sync_with`) with 1e6 non-empty hosts
//! instead, and what it is made of (see `pause`).
//!
//! The same workload is run against the in-memory queues (a `HashMap` of `VecDeque`s, what
//! `HostQueue` is today) for comparison.

use std::collections::{HashMap, VecDeque};
use std::process::Command;
use std::time::{Duration, Instant};

use crawler::cpu_time::thread_cpu_ns;
use crawler::frontier::store::{QueueStore, StoreOptions};
use crawler::frontier::QueuedUrl;

const SCENARIOS: [(u64, u64); 4] = [
    (1_000_000, 100_000),
    (1_000_000, 1_000_000),
    (10_000_000, 100_000),
    (10_000_000, 1_000_000),
];

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// ~80-byte URL and ~40-byte parent, e.g.
/// `https://www.host48213.example.com/news/2024/article-9876543?id=117&ref=rss`.
fn url(host: u64, i: u64) -> QueuedUrl {
    QueuedUrl {
        url: format!(
            "https://www.host{host}.example.com/news/{}/article-{i}?id={}&ref=rss",
            2000 + i % 25,
            i % 1000
        ),
        depth: (i % 9) as u32,
        parent: Some(format!("https://www.host{host}.example.com/section/{}", i % 97).into()),
        redirect_hops: 0,
        attempts: 0,
    }
}

fn peak_rss_mib() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    usage.ru_maxrss as f64 / 1024.0
}

const MIB: f64 = 1024.0 * 1024.0;

trait Queues {
    fn push(&mut self, host: u64, item: &QueuedUrl);
    fn pop(&mut self, host: u64) -> Option<QueuedUrl>;
    fn total(&self) -> u64;
    fn memory(&self) -> u64;
    fn disk(&self) -> u64;
    /// A sync: (pause, the part that may run in the background).
    fn sync(&mut self) -> (Duration, Duration);
    /// Drops and reopens at the synced state; how long the reopen took.
    fn reopen(&mut self) -> Duration;
}

struct Disk {
    store: Option<QueueStore>,
    dir: tempfile::TempDir,
    options: StoreOptions,
}

impl Disk {
    fn s(&mut self) -> &mut QueueStore {
        self.store.as_mut().unwrap()
    }
}

impl Queues for Disk {
    fn push(&mut self, host: u64, item: &QueuedUrl) {
        self.s().push(host, item).unwrap();
    }
    fn pop(&mut self, host: u64) -> Option<QueuedUrl> {
        self.s().pop(host).unwrap()
    }
    fn total(&self) -> u64 {
        self.store.as_ref().unwrap().total()
    }
    fn memory(&self) -> u64 {
        self.store.as_ref().unwrap().memory_bytes()
    }
    fn disk(&self) -> u64 {
        self.store.as_ref().unwrap().disk_bytes()
    }
    fn sync(&mut self) -> (Duration, Duration) {
        let t = Instant::now();
        let pending = self.s().begin_sync().unwrap();
        let pause = t.elapsed();
        let t = Instant::now();
        let position = pending.write().unwrap();
        let write = t.elapsed();
        self.s().finish_sync(position).unwrap();
        (pause, write)
    }
    fn reopen(&mut self) -> Duration {
        let total = self.total();
        drop(self.store.take());
        let t = Instant::now();
        self.store = Some(QueueStore::open(self.dir.path(), self.options.clone()).unwrap());
        let took = t.elapsed();
        assert_eq!(self.total(), total);
        took
    }
}

#[derive(Default)]
struct Memory {
    queues: HashMap<u64, VecDeque<QueuedUrl>>,
    total: u64,
}

impl Queues for Memory {
    fn push(&mut self, host: u64, item: &QueuedUrl) {
        self.queues.entry(host).or_default().push_back(item.clone());
        self.total += 1;
    }
    fn pop(&mut self, host: u64) -> Option<QueuedUrl> {
        let q = self.queues.get_mut(&host)?;
        let item = q.pop_front();
        if q.is_empty() {
            self.queues.remove(&host);
        }
        self.total -= item.is_some() as u64;
        item
    }
    fn total(&self) -> u64 {
        self.total
    }
    fn memory(&self) -> u64 {
        0
    }
    fn disk(&self) -> u64 {
        0
    }
    fn sync(&mut self) -> (Duration, Duration) {
        (Duration::ZERO, Duration::ZERO)
    }
    fn reopen(&mut self) -> Duration {
        Duration::ZERO
    }
}

fn run(kind: &str, n: u64, hosts: u64) {
    crawler::allocator::limit_malloc_arenas();
    let options = StoreOptions::default();
    let mut q: Box<dyn Queues> = match kind {
        "store" => {
            let dir = tempfile::tempdir_in(
                std::env::var("STORE_BENCH_DIR").map_or_else(|_| std::env::temp_dir(), Into::into),
            )
            .expect("tempdir");
            Box::new(Disk {
                store: Some(QueueStore::open(dir.path(), options.clone()).unwrap()),
                dir,
                options: options.clone(),
            })
        }
        _ => Box::<Memory>::default(),
    };
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut max_mem = 0u64;
    let mut max_disk = 0u64;
    let t = Instant::now();
    for i in 0..n {
        let host = xorshift(&mut rng) % hosts;
        q.push(host, &url(host, i));
        if i % 65_536 == 0 {
            max_mem = max_mem.max(q.memory());
        }
    }
    let push_secs = t.elapsed().as_secs_f64();
    max_mem = max_mem.max(q.memory());
    let first_sync = q.sync();
    max_disk = max_disk.max(q.disk());
    let rss_after_push = peak_rss_mib();

    // Resume: drop and reopen at the synced state.
    let reopen = q.reopen();

    let t = Instant::now();
    let mut pops = 0u64;
    let mut pushed = 0u64;
    let mut syncs = Vec::new();
    let sync_every = (n / 10).max(1);
    'outer: loop {
        for host in 0..hosts {
            if q.pop(host).is_none() {
                continue;
            }
            pops += 1;
            if pops % 4 == 0 && pushed < n / 4 {
                let h = xorshift(&mut rng) % hosts;
                q.push(h, &url(h, n + pushed));
                pushed += 1;
            }
            if pops % sync_every == 0 {
                max_disk = max_disk.max(q.disk());
                syncs.push(q.sync());
            }
            if pops % 65_536 == 0 {
                max_mem = max_mem.max(q.memory());
            }
        }
        if q.total() == 0 {
            break 'outer;
        }
    }
    let pop_secs = t.elapsed().as_secs_f64();
    let final_sync = q.sync();
    // Two more syncs: the consumed active segment is sealed at the first, and the tables kept
    // no longer need it after the next two.
    q.sync();
    q.sync();
    let disk_end = q.disk();
    assert_eq!(pops, n + n / 4);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let max_pause = syncs.iter().map(|d| ms(d.0)).fold(0.0, f64::max);
    let max_write = syncs.iter().map(|d| ms(d.1)).fold(0.0, f64::max);
    println!(
        "{kind:6} N={n:>9} hosts={hosts:>8} | push {:>7.0} k/s | pop+push {:>7.0} k/s ({:.1} s) | \
         peak RSS {:>6.0} MiB (after pushes {:>6.0}) | memory_bytes max {:>5.0} MiB | \
         disk max {:>6.0} MiB, at end {:>5.1} MiB | sync after pushes: pause {:>5.0} ms + write {:>5.0} ms; during pops max pause {:>4.0} ms, max write {:>5.0} ms | reopen {:>6.0} ms",
        n as f64 / push_secs / 1e3,
        pops as f64 / pop_secs / 1e3,
        pop_secs,
        peak_rss_mib(),
        rss_after_push,
        max_mem as f64 / MIB,
        max_disk as f64 / MIB,
        disk_end as f64 / MIB,
        ms(first_sync.0),
        ms(first_sync.1),
        max_pause,
        max_write,
        ms(reopen),
    );
    let _ = final_sync;
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `-- pause HOSTS [ROUNDS]`: the pause of a sync (`begin_sync_with`) with every one of HOSTS
/// hosts non-empty, as in a crawl's steady state, and what it is made of. Four URLs are pushed
/// per host, then each round pops and pushes PER_ROUND URLs (random hosts) with 1000 items in
/// flight, and measures, median over the rounds:
/// - `pause`: `begin_sync_with` as the crawler calls it (tails written, then the table);
/// - `tails`: `flush` alone (writing the tails as blocks and the write buffer), then
///   `rest`: `begin_sync_with` right after it (deferred-link list and table);
/// - `table`: `begin_sync_with` right after a finished sync (nothing to write: the table).
///
/// The tails written are what was pushed since the last time they were all written (at most
/// a sixteenth of the memory budget).
fn pause(hosts: u64, rounds: usize) {
    const PER_ROUND: u64 = 100_000;
    crawler::allocator::limit_malloc_arenas();
    let options = StoreOptions::default();
    let dir = tempfile::tempdir_in(
        std::env::var("STORE_BENCH_DIR").map_or_else(|_| std::env::temp_dir(), Into::into),
    )
    .expect("tempdir");
    let mut s = QueueStore::open(dir.path(), options).unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut i = 0u64;
    for _ in 0..4 {
        for host in 0..hosts {
            s.push(host, &url(host, i)).unwrap();
            i += 1;
        }
    }
    s.sync().unwrap();
    let in_flight: Vec<(u64, QueuedUrl)> = (0..1000).map(|h| (h, url(h, h))).collect();
    // (wall, CPU of this thread) in ms: the machine may be shared, so CPU time is the figure
    // that does not depend on its load (page faults included, waiting for a core not).
    let timed = |f: &mut dyn FnMut()| {
        let (t, c) = (Instant::now(), thread_cpu_ns());
        f();
        (
            t.elapsed().as_secs_f64() * 1e3,
            (thread_cpu_ns() - c) as f64 / 1e6,
        )
    };
    let (mut full, mut tails, mut rest, mut table) = (vec![], vec![], vec![], vec![]);
    let mut next_pop = 0u64;
    for round in 0..rounds * 2 {
        for _ in 0..PER_ROUND {
            // Pop from the next non-empty host, push to a random one.
            loop {
                let h = next_pop % hosts;
                next_pop += 1;
                if s.pop(h).unwrap().is_some() {
                    break;
                }
            }
            let h = xorshift(&mut rng) % hosts;
            s.push(h, &url(h, i)).unwrap();
            i += 1;
        }
        let mut pending = None;
        if round % 2 == 0 {
            full.push(timed(&mut || {
                pending = Some(s.begin_sync_with(&in_flight).unwrap())
            }));
        } else {
            tails.push(timed(&mut || s.flush().unwrap()));
            rest.push(timed(&mut || {
                pending = Some(s.begin_sync_with(&in_flight).unwrap())
            }));
        }
        let pos = pending.take().unwrap().write().unwrap();
        s.finish_sync(pos).unwrap();
        table.push(timed(&mut || {
            pending = Some(s.begin_sync_with(&in_flight).unwrap())
        }));
        let pos = pending.take().unwrap().write().unwrap();
        s.finish_sync(pos).unwrap();
    }
    let show = |v: &[(f64, f64)]| {
        let mut wall: Vec<f64> = v.iter().map(|x| x.0).collect();
        let mut cpu: Vec<f64> = v.iter().map(|x| x.1).collect();
        let max = wall.iter().copied().fold(0.0, f64::max);
        format!(
            "{:.1} ms (CPU {:.1}, wall max {max:.1})",
            median(&mut wall),
            median(&mut cpu)
        )
    };
    println!(
        "pause hosts={hosts} non-empty={} rounds={rounds}, medians | begin_sync_with {} | \
         split: flush (tails) {} + begin_sync_with after it {} | table only {} | peak RSS {:.0} MiB",
        s.host_count(),
        show(&full),
        show(&tails),
        show(&rest),
        show(&table),
        peak_rss_mib(),
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("pause") {
        let hosts = args.get(1).map_or(1_000_000, |a| a.parse().unwrap());
        let rounds = args.get(2).map_or(11, |a| a.parse().unwrap());
        pause(hosts, rounds);
        return;
    }
    if args.first().map(String::as_str) == Some("--child") {
        let n = args[2].parse().unwrap();
        let h = args[3].parse().unwrap();
        run(&args[1], n, h);
        return;
    }
    let chosen: Vec<(u64, u64)> = match (args.first(), args.get(1)) {
        (Some(n), Some(h)) => vec![(n.parse().unwrap(), h.parse().unwrap())],
        _ => SCENARIOS.to_vec(),
    };
    let kinds: Vec<String> = std::env::var("STORE_BENCH_KINDS")
        .unwrap_or("store,memory".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let exe = std::env::current_exe().unwrap();
    for (n, h) in chosen {
        for kind in &kinds {
            let status = Command::new(&exe)
                .args(["--child", kind, &n.to_string(), &h.to_string()])
                .status()
                .expect("run the scenario");
            assert!(status.success(), "{kind} {n} {h} failed");
        }
    }
}
