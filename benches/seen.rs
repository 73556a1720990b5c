//! Seen-set benchmark: prints the figures of issue 2, side by side with fastbloom 0.17's
//! AtomicBloomFilter at the same n and p.
//!
//! `cargo bench --bench seen` (≈ 3 minutes on a quiet 2-core machine, 5 under load). Rates
//! are per thread from thread CPU time (the machine is shared, so wall time counts other
//! people's builds) and, for two threads, also the wall-clock total. Insert figures are the
//! median of INSERT_REPS runs on fresh filters, ours and fastbloom's alternating so both
//! see the same neighbours; contains, save and load the median of REPS.
//!
//! The last part times the copy a checkpoint pauses the crawl for: a fresh `snapshot()`
//! against `snapshot_into` a reused buffer, at n = 10^7 and 10^8 (p = 0.001), median of
//! SNAPSHOT_REPS alternating runs, wall time (the pause) and thread CPU time.
//! `cargo bench --bench seen -- snapshot` runs only that part (≈ 1 minute).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crawler::quantity::HumanBytes;
use crawler::seen::{classic_m_k, Plan, SeenSet, SeenSnapshot};

const REPS: usize = 3;
/// Repetitions of the insert comparisons, the noisiest figures.
const INSERT_REPS: usize = 3;
const N: usize = 10_000_000;
const ABSENT: usize = 2_000_000;
const BATCH: usize = 64;
/// Runs of each snapshot copy.
const SNAPSHOT_REPS: usize = 9;

/// URLs as one byte buffer and slices into it, so the timed loops touch no allocator.
struct Urls {
    refs: Vec<&'static [u8]>,
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Realistic URLs of 60–100 bytes, e.g.
/// `https://www.host4821.example.com/news/2024/03/market-rally-continues-98765?id=117`.
fn make_urls(count: usize, seed: u64, host_prefix: &str) -> Urls {
    const SECTIONS: [&str; 6] = [
        "news",
        "sport",
        "blog/posts",
        "docs/reference",
        "path/to/article",
        "shop/items",
    ];
    const WORDS: [&str; 12] = [
        "market",
        "rally",
        "continues",
        "weather",
        "update",
        "rust",
        "release",
        "notes",
        "city",
        "council",
        "votes",
        "budget",
    ];
    let mut rng = seed | 1;
    let mut bytes = Vec::with_capacity(count * 84);
    let mut ends = Vec::with_capacity(count);
    let mut line = String::with_capacity(128);
    for i in 0..count {
        use std::fmt::Write;
        line.clear();
        let r = xorshift(&mut rng);
        let _ = write!(
            line,
            "https://www.{host_prefix}{}.example.com/{}/{}/{:02}/{}-{}-{}?id={}",
            r % 50_000,
            SECTIONS[(r >> 20) as usize % SECTIONS.len()],
            2015 + (r >> 24) % 11,
            1 + (r >> 28) % 12,
            WORDS[(r >> 32) as usize % WORDS.len()],
            WORDS[(r >> 36) as usize % WORDS.len()],
            i,
            (r >> 40) % 100_000,
        );
        line.truncate(100);
        while line.len() < 60 {
            line.push('x');
        }
        bytes.extend_from_slice(line.as_bytes());
        ends.push(bytes.len());
    }
    // The buffer is never touched again and outlives every use: leak it for 'static slices.
    let bytes: &'static [u8] = Vec::leak(bytes);
    let mut start = 0;
    let refs = ends
        .iter()
        .map(|&end| {
            let s = &bytes[start..end];
            start = end;
            s
        })
        .collect();
    Urls { refs }
}

fn thread_cpu() -> Duration {
    Duration::from_nanos(crawler::cpu_time::thread_cpu_ns())
}

/// Runs `work(part)` on `threads` threads released together; returns wall time and each
/// thread's CPU time.
fn on_threads(threads: usize, work: &(dyn Fn(usize) + Sync)) -> (Duration, Vec<Duration>) {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let cpu = thread_cpu();
                    work(t);
                    thread_cpu() - cpu
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let cpus: Vec<Duration> = handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect();
        (start.elapsed(), cpus)
    })
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// Throughput of one measured operation over `ops` keys split across threads.
#[derive(Clone, Copy)]
struct Rate {
    per_thread: f64,
    total_wall: f64,
}

fn rate(ops: usize, threads: usize, (wall, cpus): (Duration, Vec<Duration>)) -> Rate {
    let per_thread = cpus
        .iter()
        .map(|c| (ops / threads) as f64 / c.as_secs_f64())
        .sum::<f64>()
        / threads as f64;
    Rate {
        per_thread: per_thread / 1e6,
        total_wall: ops as f64 / wall.as_secs_f64() / 1e6,
    }
}

fn median_rate(runs: Vec<Rate>) -> Rate {
    Rate {
        per_thread: median(runs.iter().map(|r| r.per_thread).collect()),
        total_wall: median(runs.iter().map(|r| r.total_wall).collect()),
    }
}

fn show(label: &str, r: Rate, threads: usize) {
    if threads == 1 {
        println!("  {label:<44} {:>6.2} M/s", r.per_thread);
    } else {
        println!(
            "  {label:<44} {:>6.2} M/s per thread, {:>6.2} M/s total (wall)",
            r.per_thread, r.total_wall
        );
    }
}

fn part(keys: &'static [&'static [u8]], threads: usize, t: usize) -> &'static [&'static [u8]] {
    let len = keys.len() / threads;
    &keys[t * len..(t + 1) * len]
}

fn insert_seen(set: &SeenSet, keys: &[&[u8]], batched: bool) {
    if batched {
        let mut out = Vec::with_capacity(BATCH);
        for chunk in keys.chunks(BATCH) {
            set.insert_new_batch(chunk, &mut out);
            black_box(&out);
        }
    } else {
        for key in keys {
            black_box(set.insert_new(key));
        }
    }
}

/// One insert measurement: which filter, how many threads, batched or one key at a time.
#[derive(Clone, Copy, PartialEq)]
enum Filter {
    Seen { batched: bool },
    FastBloom,
}

fn insert_run(
    plan: &Plan,
    p: f64,
    filter: Filter,
    threads: usize,
    inserted: &'static [&'static [u8]],
) -> Rate {
    let ops = inserted.len();
    match filter {
        Filter::Seen { batched } => {
            let set = SeenSet::new(plan.clone()).expect("allocate");
            rate(
                ops,
                threads,
                on_threads(threads, &|t| {
                    insert_seen(&set, part(inserted, threads, t), batched)
                }),
            )
        }
        Filter::FastBloom => {
            let filter = fastbloom::AtomicBloomFilter::with_false_pos(p).expected_items(ops);
            rate(
                ops,
                threads,
                on_threads(threads, &|t| {
                    for key in part(inserted, threads, t) {
                        black_box(filter.insert(*key));
                    }
                }),
            )
        }
    }
}

fn bench_p(p: f64, inserted: &'static [&'static [u8]], absent: &'static [&'static [u8]]) {
    let n = inserted.len() as u64;
    let plan = Plan::for_fpp(n, p).expect("plan");
    let (classic_m, classic_k) = classic_m_k(n, p);
    let min_bits = (1.0 / p).log2();
    println!("\n== n = {n}, p = {p} ==");
    println!("  {}", plan.summary());
    println!(
        "  memory: {} ({} bytes) = {:.2} bits/URL; classic optimum {} (k = {classic_k}), ratio {:.3}; n*log2(1/p) minimum {:.2} bits/URL (ours {:.2}x)",
        HumanBytes(plan.bytes),
        plan.bytes,
        plan.m_bits as f64 / n as f64,
        HumanBytes(classic_m.div_ceil(8)),
        plan.m_bits as f64 / classic_m as f64,
        min_bits,
        plan.m_bits as f64 / n as f64 / min_bits,
    );

    // Ours and the yardstick alternate inside every repetition, so both see the same
    // neighbours' load; each run starts from an empty filter.
    let configs = [
        ("insert_new, 1 thread", Filter::Seen { batched: false }, 1),
        ("fastbloom insert, 1 thread", Filter::FastBloom, 1),
        ("insert_new, 2 threads", Filter::Seen { batched: false }, 2),
        ("fastbloom insert, 2 threads", Filter::FastBloom, 2),
        (
            "insert_new_batch (64 keys), 1 thread",
            Filter::Seen { batched: true },
            1,
        ),
        (
            "insert_new_batch (64 keys), 2 threads",
            Filter::Seen { batched: true },
            2,
        ),
    ];
    let mut runs: Vec<Vec<Rate>> = vec![Vec::new(); configs.len()];
    for _ in 0..INSERT_REPS {
        for (i, &(_, filter, threads)) in configs.iter().enumerate() {
            runs[i].push(insert_run(&plan, p, filter, threads, inserted));
        }
    }
    let results: Vec<Rate> = runs.into_iter().map(median_rate).collect();
    for (&(label, _, threads), &r) in configs.iter().zip(&results) {
        show(label, r, threads);
    }
    let [seen1, fb1, seen2, fb2, batch1, batch2] = [0, 1, 2, 3, 4, 5].map(|i| results[i]);
    println!(
        "  ratio insert_new / fastbloom insert: 1 thread {:.2}x; 2 threads {:.2}x per thread, {:.2}x total (wall)",
        seen1.per_thread / fb1.per_thread,
        seen2.per_thread / fb2.per_thread,
        seen2.total_wall / fb2.total_wall,
    );
    println!(
        "  ratio insert_new_batch / fastbloom insert: 1 thread {:.2}x; 2 threads {:.2}x per thread, {:.2}x total (wall)",
        batch1.per_thread / fb1.per_thread,
        batch2.per_thread / fb2.per_thread,
        batch2.total_wall / fb2.total_wall,
    );

    let set = SeenSet::new(plan.clone()).expect("allocate");
    insert_seen(&set, inserted, true);
    let stats = set.stats();
    let yardstick = fastbloom::AtomicBloomFilter::with_false_pos(p).expected_items(n as usize);
    for key in inserted {
        yardstick.insert(*key);
    }
    let mut contains_runs: [Vec<Rate>; 3] = Default::default();
    for _ in 0..REPS {
        for (i, threads) in [1, 2].into_iter().enumerate() {
            contains_runs[i].push(rate(
                absent.len(),
                threads,
                on_threads(threads, &|t| {
                    for key in part(absent, threads, t) {
                        black_box(set.contains(key));
                    }
                }),
            ));
        }
        contains_runs[2].push(rate(
            absent.len(),
            1,
            on_threads(1, &|_| {
                for key in absent {
                    black_box(yardstick.contains(*key));
                }
            }),
        ));
    }
    let [c1, c2, cfb] = contains_runs.map(median_rate);
    show("contains (absent keys), 1 thread", c1, 1);
    show("contains (absent keys), 2 threads", c2, 2);
    show("fastbloom contains (absent keys), 1 thread", cfb, 1);

    let false_positives = absent.iter().filter(|k| set.contains(k)).count();
    let measured = false_positives as f64 / absent.len() as f64;
    let sigma = (p * (1.0 - p) / absent.len() as f64).sqrt();
    println!(
        "  measured fpp {measured:.6} over {} absent URLs (target {p}, model {:.6}, binomial sd {sigma:.6}); live stats: fill {:.4}, estimated fpp {:.6}, {} new of {n}",
        absent.len(),
        plan.expected_fpp,
        stats.fill,
        stats.estimated_fpp,
        stats.insertions,
    );
    let fb_fp = absent.iter().filter(|k| yardstick.contains(**k)).count();
    println!(
        "  fastbloom: {} ({:.2} bits/URL), k = {}, measured fpp {:.6}",
        HumanBytes(yardstick.num_bits() as u64 / 8),
        yardstick.num_bits() as f64 / n as f64,
        yardstick.num_hashes(),
        fb_fp as f64 / absent.len() as f64
    );
    show_save_load(save_load(&set));
}

/// Median seconds of save, load and snapshot() (the in-memory copy a background checkpoint
/// writer takes) of a filled set; each load is checked against the original.
fn save_load(set: &SeenSet) -> (f64, f64, f64) {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
    let path = dir.path().join("seen.bin");
    let (mut saves, mut loads, mut snapshots) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPS {
        let start = Instant::now();
        set.save(&path).expect("save");
        saves.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let loaded = SeenSet::load(&path).expect("load");
        loads.push(start.elapsed().as_secs_f64());
        assert_eq!(loaded.stats().bits_set, set.stats().bits_set);
        drop(loaded);
        let start = Instant::now();
        black_box(set.snapshot());
        snapshots.push(start.elapsed().as_secs_f64());
    }
    (median(saves), median(loads), median(snapshots))
}

fn show_save_load((save, load, snapshot): (f64, f64, f64)) {
    println!(
        "  save {:.1} ms, load {:.1} ms (median of {REPS}, warm page cache); snapshot() copy {:.1} ms",
        save * 1e3,
        load * 1e3,
        snapshot * 1e3
    );
}

/// A filter of `plan` holding the keys 0..n (8-byte little-endian), inserted in batches by
/// two threads.
fn filled(plan: Plan, n: u64) -> SeenSet {
    let set = SeenSet::new(plan).expect("allocate");
    on_threads(2, &|t| {
        let mut out = Vec::with_capacity(BATCH);
        let mut keys = [[0u8; 8]; BATCH];
        let half = n / 2;
        let (from, to) = (t as u64 * half, if t == 0 { half } else { n });
        for base in (from..to).step_by(BATCH) {
            let len = BATCH.min((to - base) as usize);
            for (i, key) in keys[..len].iter_mut().enumerate() {
                *key = (base + i as u64).to_le_bytes();
            }
            let refs: Vec<&[u8]> = keys[..len].iter().map(|k| &k[..]).collect();
            set.insert_new_batch(&refs, &mut out);
        }
    });
    let stats = set.stats();
    println!(
        "  filled: {} new keys, fill {:.4}, estimated fpp {:.6}",
        stats.insertions, stats.fill, stats.estimated_fpp
    );
    set
}

/// The checkpoint's pause: a fresh `snapshot()` against `snapshot_into` a reused buffer,
/// alternating, medians of SNAPSHOT_REPS.
fn bench_snapshot(set: &SeenSet) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let start = Instant::now();
    let mut buffer = SeenSnapshot::for_plan(set.plan()).expect("snapshot buffer");
    let for_plan = ms(start.elapsed());
    let start = Instant::now();
    set.snapshot_into(&mut buffer);
    let first = ms(start.elapsed());
    let (mut fresh, mut reused) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for _ in 0..SNAPSHOT_REPS {
        let (wall, cpu) = (Instant::now(), thread_cpu());
        let snapshot = set.snapshot();
        fresh.0.push(ms(wall.elapsed()));
        fresh.1.push(ms(thread_cpu() - cpu));
        // In a crawl the writer thread drops it; its munmap is not part of the pause.
        drop(black_box(snapshot));
        let (wall, cpu) = (Instant::now(), thread_cpu());
        set.snapshot_into(black_box(&mut buffer));
        reused.0.push(ms(wall.elapsed()));
        reused.1.push(ms(thread_cpu() - cpu));
    }
    let spread = |xs: &[f64]| {
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(0.0, f64::max);
        format!("min {min:.1}, max {max:.1}")
    };
    println!(
        "  SeenSnapshot::for_plan (allocate and back the buffer, once) {for_plan:.1} ms; first snapshot_into {first:.1} ms"
    );
    for (label, (wall, cpu)) in [
        ("fresh snapshot()", fresh),
        ("snapshot_into (reused buffer)", reused),
    ] {
        println!(
            "  {label:<30} {:>6.1} ms wall ({}), {:>6.1} ms CPU; median of {SNAPSHOT_REPS}",
            median(wall.clone()),
            spread(&wall),
            median(cpu),
        );
    }
}

fn transparent_huge_pages() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let started = Instant::now();
    let only_snapshot = std::env::args().skip(1).any(|a| a == "snapshot");
    if !only_snapshot {
        bench_filters();
    }

    let p = 0.001;
    println!("\n== n = 10000000, p = {p}: snapshot copy ==");
    let plan = Plan::for_fpp(10_000_000, p).expect("plan");
    println!("  {}", plan.summary());
    println!("  transparent huge pages: {}", transparent_huge_pages());
    bench_snapshot(&filled(plan, 10_000_000));

    println!("\n== n = 100000000, p = {p}: save, load and snapshot copy ==");
    let plan = Plan::for_fpp(100_000_000, p).expect("plan");
    println!("  {}", plan.summary());
    let set = filled(plan, 100_000_000);
    if !only_snapshot {
        show_save_load(save_load(&set));
    }
    bench_snapshot(&set);
    println!(
        "\ntotal bench time {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

/// The figures at n = 10^7, side by side with fastbloom.
fn bench_filters() {
    let urls = make_urls(N, 0x1234_5678_9abc_def1, "host");
    let absent = make_urls(ABSENT, 0x0fed_cba9_8765_4321, "other");
    let lens: Vec<usize> = urls.refs.iter().map(|u| u.len()).collect();
    println!(
        "seen-set bench: {N} URLs of {}..{} bytes (mean {:.1}), e.g. {}",
        lens.iter().min().unwrap_or(&0),
        lens.iter().max().unwrap_or(&0),
        lens.iter().sum::<usize>() as f64 / lens.len() as f64,
        String::from_utf8_lossy(urls.refs[0]),
    );
    let inserted: &'static [&'static [u8]] = Vec::leak(urls.refs);
    let absent: &'static [&'static [u8]] = Vec::leak(absent.refs);
    for p in [0.01, 0.001] {
        bench_p(p, inserted, absent);
    }
}
