//! Figures for `crawler::frontier::robots_cache`: put and get rates, compaction, and the
//! memory of the index per host, counted by a global allocator that tracks live heap bytes.
//!
//! Run: `cargo bench --bench robots_cache`
//! (`ROBOTS_CACHE_BENCH_HOSTS` sets the host count, 1e6 by default.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crawler::cpu_time::thread_cpu_ns;
use crawler::frontier::robots_cache::{CachedRobots, RobotsCache, RobotsCacheOptions};

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

fn grew(n: u64) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` with the same arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as u64);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as u64);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        grew(new_size as u64);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a new peak measurement from the current live bytes.
fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

/// The caller's host id: a 64-bit hash.
fn host_id(i: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes())
}

/// A robots.txt-like body of 512..1536 bytes (1 KiB on average), derived from `i` and `round`.
fn fill(body: &mut Vec<u8>, i: u64, round: u64) {
    const LINES: &[u8] = b"User-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\nAllow: /public/\nCrawl-delay: 1\nSitemap: https://example.com/sitemap.xml\n";
    let len = 512 + (host_id(i ^ round << 40) % 1025) as usize;
    body.clear();
    body.extend_from_slice(&i.to_le_bytes());
    body.extend_from_slice(&round.to_le_bytes());
    while body.len() < len {
        let take = (len - body.len()).min(LINES.len());
        body.extend_from_slice(&LINES[..take]);
    }
}

/// A permutation of 0..n (xorshift Fisher–Yates, deterministic).
fn shuffled(n: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Wall-clock and CPU time (this thread's, system time included) since a start: the machine
/// is shared, so the CPU time is the steadier figure.
struct Timer(Instant, u64);

impl Timer {
    fn start() -> Timer {
        Timer(Instant::now(), thread_cpu_ns())
    }
    /// (wall seconds, CPU seconds).
    fn secs(&self) -> (f64, f64) {
        (
            self.0.elapsed().as_secs_f64(),
            (thread_cpu_ns() - self.1) as f64 / 1e9,
        )
    }
}

/// "N k/s (M k/s a CPU-second)" for `n` operations.
fn rate(n: u64, (wall, cpu): (f64, f64)) -> String {
    format!(
        "{:.0} k/s ({:.0} k/s a CPU-second)",
        n as f64 / wall / 1e3,
        n as f64 / cpu / 1e3
    )
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() {
    let n: u64 = std::env::var("ROBOTS_CACHE_BENCH_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let options = RobotsCacheOptions::default();
    println!(
        "{n} hosts, bodies 512..1536 bytes, write buffer {} KiB, compact_min_dead {} MiB, data in {}",
        options.write_buffer >> 10,
        options.compact_min_dead >> 20,
        dir.path().display()
    );
    let base = live();
    let mut cache = RobotsCache::open(dir.path(), options).unwrap();
    let mut entry = CachedRobots::Body(Vec::with_capacity(2048));
    let expires = u64::MAX;

    // 1. One put per host, in host order.
    reset_peak();
    let t = Timer::start();
    let mut body_bytes = 0u64;
    for i in 0..n {
        let CachedRobots::Body(b) = &mut entry else {
            unreachable!()
        };
        fill(b, i, 0);
        body_bytes += b.len() as u64;
        cache.put(host_id(i), expires, &entry).unwrap();
    }
    cache.flush().unwrap();
    let s = t.secs();
    let heap = live() - base - 2048 - (cache.memory_bytes() - cache.index_bytes());
    println!(
        "put (new hosts): {}, {:.0} MiB/s of bodies; disk {:.0} MiB",
        rate(n, s),
        mib(body_bytes) / s.0,
        mib(cache.disk_bytes())
    );
    println!(
        "memory: index_bytes {:.1} B/host, heap counted less the write buffer {:.1} B/host; memory_bytes {:.1} MiB; heap peak during the puts {:.1} MiB",
        cache.index_bytes() as f64 / n as f64,
        heap as f64 / n as f64,
        mib(cache.memory_bytes()),
        mib(peak() - base)
    );

    // 2. One get per host, in random order (the file is in the page cache).
    let order = shuffled(n);
    let t = Timer::start();
    let mut got = 0u64;
    for &i in &order {
        match cache.get(host_id(i as u64), 1).unwrap() {
            Some(CachedRobots::Body(b)) => {
                assert_eq!(&b[..8], &(i as u64).to_le_bytes());
                got += b.len() as u64;
            }
            other => panic!("host {i}: {other:?}"),
        }
    }
    let s = t.secs();
    assert_eq!(got, body_bytes);
    println!("get (random order): {}", rate(n, s));

    // 3. Every host replaced, in random order: compactions run as dead bytes pass live ones.
    let before = live();
    reset_peak();
    let mut max_disk = 0;
    let mut slowest = (0f64, 0f64);
    let t = Timer::start();
    for &i in &order {
        let CachedRobots::Body(b) = &mut entry else {
            unreachable!()
        };
        fill(b, i as u64, 1);
        let one = Timer::start();
        cache.put(host_id(i as u64), expires, &entry).unwrap();
        let took = one.secs();
        if took.0 > slowest.0 {
            slowest = took;
        }
        max_disk = max_disk.max(cache.disk_bytes());
    }
    let s = t.secs();
    println!(
        "put (replacing, compactions included): {}; {} compactions, slowest put {:.2} s ({:.2} s CPU); disk max {:.0} MiB (one file; twice that during a compaction), now {:.0} MiB with {:.0} MiB live; heap peak above the steady state {:.1} MiB",
        rate(n, s),
        cache.compactions(),
        slowest.0,
        slowest.1,
        mib(max_disk),
        mib(cache.disk_bytes()),
        mib(cache.live_bytes()),
        mib(peak() - before)
    );
    let t = Timer::start();
    cache.compact().unwrap();
    let s = t.secs();
    println!(
        "compact (all live, {:.0} MiB): {:.2} s ({:.2} s CPU)",
        mib(cache.live_bytes()),
        s.0,
        s.1
    );
    let t = Timer::start();
    for &i in &order {
        match cache.get(host_id(i as u64), 1).unwrap() {
            Some(CachedRobots::Body(b)) => assert_eq!(&b[8..16], &1u64.to_le_bytes()),
            other => panic!("host {i}: {other:?}"),
        }
    }
    println!("get after compaction (random order): {}", rate(n, t.secs()));
    drop(cache);

    // 4. Memory per host against the host count (0.1 to 2 times n), and against a plain
    // HashMap of the same entries.
    println!(
        "hosts | index_bytes/host | heap/host (index only) | HashMap<u64, (u64, u32)> heap/host"
    );
    for k in [100u64, 300, 600, 1_000, 1_100, 1_500, 2_000] {
        let m = k * n / 1_000;
        let d = tempfile::tempdir().unwrap();
        let base = live();
        let mut c = RobotsCache::open(d.path(), RobotsCacheOptions::default()).unwrap();
        for i in 0..m {
            c.put(host_id(i), expires, &CachedRobots::AllowAll).unwrap();
        }
        let heap = live() - base - (c.memory_bytes() - c.index_bytes());
        let index = c.index_bytes() as f64 / m as f64;
        drop(c);
        let base = live();
        let mut map: HashMap<u64, (u64, u32)> = HashMap::new();
        for i in 0..m {
            map.insert(host_id(i), (i, i as u32));
        }
        let map_heap = live() - base;
        drop(map);
        println!(
            "{m} | {index:.1} | {:.1} | {:.1}",
            heap as f64 / m as f64,
            map_heap as f64 / m as f64
        );
    }
}
