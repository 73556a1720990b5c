//! robots.txt under a hostile server: a 500 KiB file of a few thousand rules with 20 wildcards
//! and a `$` each (the shape that made a regex-per-rule parser hold >100 MiB of heap and ~266
//! MiB of peak RSS), and a 500 KiB file of long literal segments (the worst case of a
//! backtracking glob, and of this matcher: every rule scans the whole path).
//!
//! Run: `cargo bench --bench robots` (release profile, fat LTO). Prints, per file: parse time
//! (median of `ROBOTS_BENCH_PARSES`, default 20), the peak heap a parse reaches and the heap it
//! keeps (a counting global allocator), and `allows` calls per second for a path that matches
//! no rule (so every rule is tried), per second of CPU time on this thread.
//!
//! Keeping each rule's line for `RobotsRules::verdict` (in an array beside the rules), with the
//! parser fixes the outside suites found, measured against the parser before them, medians of
//! 3 alternating runs on one 2-core machine: `allows` 14,509 → 14,077/s (long path), 15,043 →
//! 14,811/s (short path), 72 → 72/s (long segments), all within noise; parse 2.53 → 3.28 ms
//! and 1.87 → 2.63 ms (once per host per `robots_ttl_secs`); peak heap 0.62 → 0.65 MiB.
//!
//! The parser this replaced cannot be run here any more (it is no longer a dependency); on the
//! first file it measured, on the same machine: parse 740 ms, 113 MiB kept after parsing,
//! +67 MiB more at peak while matching, 67 `allows`/s.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crawler::robots::RobotsRules;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed straight to the system allocator; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            if new_size >= layout.size() {
                let now =
                    CURRENT.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn wildcard_file(bytes: usize) -> String {
    let mut body = String::from("User-agent: *\nDisallow: /private/\n");
    let mut i = 0u32;
    while body.len() < bytes - 200 {
        body.push_str("Disallow: /");
        for j in 0..20 {
            body.push_str(&format!("*{i:x}q{j}"));
        }
        body.push_str("$\n");
        i += 1;
    }
    body
}

fn literal_file(bytes: usize) -> String {
    let mut body = String::from("User-agent: *\nDisallow: /private/\n");
    while body.len() < bytes - 200 {
        body.push_str(&format!("Disallow: /*{}b*c\n", "a".repeat(100)));
    }
    body
}

/// CPU time of this thread: the machine is shared, and wall time would count waiting for a core.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn run(name: &str, body: &str, url: &str, parses: usize) {
    let before = CURRENT.load(Relaxed);
    PEAK.store(before, Relaxed);
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    let peak = PEAK.load(Relaxed) - before;
    let kept = CURRENT.load(Relaxed) - before;
    assert!(!rules.allows("http://a.test/private/secret"));

    let mut times: Vec<Duration> = (0..parses)
        .map(|_| {
            let start = thread_cpu();
            black_box(RobotsRules::parse("crawler", black_box(body.as_bytes())));
            thread_cpu() - start
        })
        .collect();
    times.sort();
    let parse = times[times.len() / 2];

    let start = thread_cpu();
    let wall = Instant::now();
    let mut calls = 0u64;
    let mut allowed = 0u64;
    while wall.elapsed() < Duration::from_secs(2) || calls < 10 {
        allowed += u64::from(rules.allows(black_box(url)));
        calls += 1;
    }
    let cpu = thread_cpu() - start;
    assert_eq!(allowed, calls);
    println!(
        "{name}: {} bytes, {} rules; parse {:.2} ms (median of {parses}), peak heap {:.2} MiB ({:.1}× the file), kept {:.2} MiB; allows {:.0}/s ({calls} calls, path {} bytes)",
        body.len(),
        rules.rule_count(),
        parse.as_secs_f64() * 1e3,
        mib(peak),
        peak as f64 / body.len() as f64,
        mib(kept),
        calls as f64 / cpu.as_secs_f64(),
        url.len(),
    );
}

fn main() {
    let parses = std::env::var("ROBOTS_BENCH_PARSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20usize)
        .max(1);
    let long_path = format!("http://a.test/{}", "ab".repeat(500));
    run(
        "wildcards+$",
        &wildcard_file(500 * 1024),
        &long_path,
        parses,
    );
    run(
        "wildcards+$ short path",
        &wildcard_file(500 * 1024),
        "http://a.test/docs/page.html",
        parses,
    );
    let a_path = format!("http://a.test/{}", "a".repeat(2000));
    run("long segments", &literal_file(500 * 1024), &a_path, parses);
    println!(
        "before (regex per rule, first file, long path): parse 740 ms, kept 113 MiB, +67 MiB at peak while matching, 67 allows/s"
    );
}
