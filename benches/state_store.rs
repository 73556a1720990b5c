//! The state store and the admitted set at scale: bytes on disk per URL, RAM, inserts/s and
//! batched lookups/s.
//!
//! - **Admitted set** (`seen.exact`): `STATE_STORE_URLS` fingerprints (default 10^7 for a
//!   quick run; `STATE_STORE_URLS=1e8` for the figure) inserted in batches of 64 (a
//!   page's new links), as the driver does, then made durable (`persist`, what a checkpoint
//!   does); then lookups in batches of 64 (a page's "maybe seen" links), of URLs admitted
//!   (found, the common case: links to pages already seen) and of URLs never admitted (what
//!   a Bloom false positive costs: every run searched), on 1 and 2 threads, 3 rounds each.
//! - **State store** (`[state] enabled`): `STATE_STORE_STATES` states (default 10^6; each
//!   ~120 bytes, so 10^8 would be ~12 GB of a disk shared by several people; the per-URL
//!   figures do not depend on the count) written in batches of 256, flushed, then read back
//!   in batches of 64, and one pass over every state due (what a recrawl starts from); then
//!   the RAM a recrawl's start holds per URL: the due URLs in order (`DueOrder`, now) against
//!   every state in a map by URL (the recrawl's in-memory `History` before it read the
//!   store).
//!
//! Printed: medians of the rounds, and RAM as the process's resident set split into
//! anonymous memory (what the store holds) and mapped file pages (page cache the runs'
//! lookups touched, which the kernel can drop), plus the store's own estimate. The files go
//! under `CARGO_TARGET_TMPDIR` (a disk; `/tmp` may be RAM), removed at the end.
//!
//! Run: `cargo bench --bench state_store` (`STATE_STORE_URLS=1e8 cargo bench --bench
//! state_store` for 10^8).
//!
//! Measured (2026-11-26, `STATE_STORE_URLS=1e8 STATE_STORE_STATES=1e7`, release, the shared
//! 2-core machine at load average ~25 while others built: absolute rates are low and noisy,
//! one run of the whole bench, lookups median of 3 rounds):
//! - admitted set, 10^8 URLs: insert 1.87 M URLs/s (53 s, fingerprinting included; the
//!   writer thread's runs and merges beside it, 67 s of merging left at the end); the live
//!   runs are 8.03 bytes/URL by format (8-byte keys, a 16-byte fence entry per 512), the
//!   directory held 16.0 bytes/URL right after the merges because the checkpoint's manifest
//!   still named the pre-merge runs (deleted at the next durable point); RAM: 3.0 MiB of
//!   fence indexes (0.03 bytes/URL), process anonymous memory 28 MiB, plus 768 MiB of page
//!   cache mapped by the lookups (reclaimable); batched lookups (64 per batch) 0.80 M/s for
//!   admitted URLs and 0.39 M/s for never-admitted ones (every run searched) on 1 thread;
//!   2 threads gave no more under that load (0.44 and 0.27 M/s in total).
//! - state store, 10^7 states (~140-byte values): put 0.30 M states/s (encoding included),
//!   get 0.28 M/s decoded, one pass over
//!   every state due 3.06 M states/s; the directory held 398 bytes/URL after the final
//!   merges, again runs superseded by merges but still named by the last manifest, which
//!   outlive the merge until the next durable point.
//!
//! Measured again (2026-11-26 12:25, `STATE_STORE_URLS=1e8`, thin-LTO release build of the
//! `recrawl` branch, load average ~17 from six engineers building): admitted set at 10^8:
//! insert 1.24 M URLs/s (80.5 s; 109.8 s of merges left), 15.95 bytes/URL on disk before
//! the next durable point (8.03 live), 3.0 MiB of fence indexes, anonymous RSS 28 MiB (+769
//! MiB of reclaimable page cache); batched lookups 0.25 M/s admitted and 0.12 M/s never
//! admitted, 1 or 2 threads alike. State store, 10^6 states: put 0.13 M/s, get 0.07 M/s,
//! one pass 0.66 M states/s. Recrawl start (`STATE_STORE_URLS=1000`, so that the baseline
//! is not memory freed by the admitted set's section, which the heap reuses unseen): 16.0
//! bytes of RAM per URL for the due order against 851.6 for all states in a map by URL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crawler::state_store::{AdmittedSet, DueOrder, StateStore, UrlFingerprint, UrlState};
use rand::{Rng, SeedableRng};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const PAGE: usize = 64;

fn count_from_env(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => crawler::quantity::parse_count(&text).unwrap_or_else(|e| panic!("{name}: {e}")),
        Err(_) => default,
    }
}

fn url(i: u64) -> String {
    format!(
        "https://h{}.example.com/docs/section-{}/page-{i}.html",
        i % 5000,
        i % 97
    )
}

/// (VmRSS, RssAnon, RssFile) in MiB.
fn rss_mib() -> (f64, f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Lookups/s of `threads` threads, each asking `batches` batches of 64 drawn by `draw`.
fn lookups_per_sec(
    set: &AdmittedSet,
    threads: usize,
    batches: usize,
    draw: &(dyn Fn(&mut rand::rngs::StdRng) -> UrlFingerprint + Sync),
) -> (f64, f64) {
    let started = Instant::now();
    let found: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64 + 99);
                    let mut out = Vec::with_capacity(PAGE);
                    let mut found = 0u64;
                    let mut keys = Vec::with_capacity(PAGE);
                    for _ in 0..batches {
                        keys.clear();
                        keys.extend((0..PAGE).map(|_| draw(&mut rng)));
                        set.contains_batch(&keys, &mut out);
                        found += out.iter().filter(|&&f| f).count() as u64;
                    }
                    found
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let asked = (threads * batches * PAGE) as f64;
    (
        asked / started.elapsed().as_secs_f64(),
        found as f64 / asked,
    )
}

fn admitted(n: u64, root: &std::path::Path) {
    println!("admitted set (seen.exact): {n} URLs, batches of {PAGE}");
    let set = AdmittedSet::create(root).unwrap();
    let started = Instant::now();
    let mut batch = Vec::with_capacity(PAGE);
    for i in 0..n {
        batch.push(UrlFingerprint::of(&url(i)));
        if batch.len() == PAGE {
            set.insert_batch(&batch).unwrap();
            batch.clear();
        }
    }
    set.insert_batch(&batch).unwrap();
    let inserted = started.elapsed().as_secs_f64();
    let persisted = Instant::now();
    let checkpoint = root.join("ckpt-1");
    set.persist(&checkpoint).unwrap();
    let persist_secs = persisted.elapsed().as_secs_f64();
    let compacted = Instant::now();
    set.compact().unwrap();
    let compact_secs = compacted.elapsed().as_secs_f64();
    let stats = set.stats();
    let disk = dir_bytes(&AdmittedSet::dir_of(root));
    println!(
        "  insert: {:.2} M URLs/s (fingerprint included; {:.1} s), persist the rest: {:.2} s, merges left: {:.2} s; {} runs",
        n as f64 / inserted / 1e6,
        inserted,
        persist_secs,
        compact_secs,
        stats.runs
    );
    println!(
        "  disk: {:.2} bytes/URL ({:.1} MiB); store memory {:.1} MiB ({:.3} bytes/URL: fence indexes)",
        disk as f64 / n as f64,
        disk as f64 / 1048576.0,
        stats.memory as f64 / 1048576.0,
        stats.memory as f64 / n as f64
    );
    let batches = 20_000;
    let present =
        move |rng: &mut rand::rngs::StdRng| UrlFingerprint::of(&url(rng.random_range(0..n)));
    let absent =
        move |rng: &mut rand::rngs::StdRng| UrlFingerprint::of(&url(n + rng.random_range(0..n)));
    for threads in [1, 2] {
        for (what, draw) in [
            (
                "admitted",
                &present as &(dyn Fn(&mut rand::rngs::StdRng) -> UrlFingerprint + Sync),
            ),
            ("never admitted", &absent),
        ] {
            let rounds: Vec<(f64, f64)> = (0..3)
                .map(|_| lookups_per_sec(&set, threads, batches, draw))
                .collect();
            let found = rounds[0].1;
            let rates: Vec<f64> = rounds.iter().map(|r| r.0 / 1e6).collect();
            println!(
                "  lookups, {what}, {threads} thread(s): {:.2} M/s (rounds {:.2?}; found {:.0}%)",
                median(rates.clone()),
                rates,
                found * 100.0
            );
        }
    }
    let (rss, anon, file) = rss_mib();
    println!("  process RSS {rss:.0} MiB: anonymous {anon:.0} MiB, mapped files {file:.0} MiB (page cache of the runs)");
}

fn state(i: u64) -> UrlState {
    UrlState {
        url: url(i),
        generation: 1,
        fetched_at: 1_795_680_000 + i,
        status: 200,
        etag: Some(format!("\"{i:x}-5f3a\"")),
        last_modified: Some("Wed, 25 Nov 2026 07:28:00 GMT".into()),
        payload_digest: Some("sha1:2ZNPXHMDKFVNNGHRSCLBZEB6AQCLRQJL".into()),
        warc_record_id: Some("<urn:uuid:0b3f2c1e-8a4d-4f7e-9c2a-5d6e7f809a1b>".into()),
        warc_date: Some("2026-11-26T08:00:00.123Z".into()),
        changes: 1,
        checks: 3,
        interval_secs: 86_400,
        next_due: 1_795_766_400 + (i % 1000),
        gone_generations: 0,
        near_digest: Some(format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15))),
    }
}

fn states(n: u64, root: &std::path::Path) {
    println!("state store: {n} states, batches of 256");
    let store = Arc::new(StateStore::open(&StateStore::dir_of(root)).unwrap());
    let started = Instant::now();
    let mut batch = Vec::with_capacity(256);
    for i in 0..n {
        let s = state(i);
        batch.push((UrlFingerprint::of(&s.url), s));
        if batch.len() == 256 {
            store.put_batch(&batch).unwrap();
            batch.clear();
        }
    }
    store.put_batch(&batch).unwrap();
    let inserted = started.elapsed().as_secs_f64();
    store.flush().unwrap();
    store.compact().unwrap();
    let stats = store.stats();
    let disk = dir_bytes(&StateStore::dir_of(root).join("runs"));
    println!(
        "  put: {:.2} M states/s ({:.1} s; encoding included); disk {:.1} bytes/URL ({:.1} MiB), store memory {:.1} MiB",
        n as f64 / inserted / 1e6,
        inserted,
        disk as f64 / n as f64,
        disk as f64 / 1048576.0,
        stats.memory as f64 / 1048576.0
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut rates = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let batches = 5_000;
        for _ in 0..batches {
            let keys: Vec<UrlFingerprint> = (0..PAGE)
                .map(|_| UrlFingerprint::of(&url(rng.random_range(0..n))))
                .collect();
            let got = store.get_batch(&keys).unwrap();
            assert!(got.iter().all(Option::is_some));
        }
        rates.push((batches * PAGE) as f64 / started.elapsed().as_secs_f64() / 1e6);
    }
    println!(
        "  get (decoded), 1 thread: {:.2} M/s (rounds {:.2?})",
        median(rates.clone()),
        rates
    );
    let started = Instant::now();
    let mut due = 0u64;
    store
        .for_each_due(1_795_766_400 + 499, |_, _| {
            due += 1;
            true
        })
        .unwrap();
    println!(
        "  one pass over the states due: {due} of {n} in {:.2} s ({:.2} M states/s scanned)",
        started.elapsed().as_secs_f64(),
        n as f64 / started.elapsed().as_secs_f64() / 1e6
    );
    recrawl_start_memory(&store, n, root);
}

/// What a recrawl's start holds in RAM per URL, now and before: the due URLs in order from
/// the store (`DueOrder`: one pass, sorted on disk past 2^20 URLs, taken in batches of 4096
/// as the recrawl hands them to the frontier), against every URL's state in a map by URL,
/// which is how the recrawl held the collection until it read the store (its `History`,
/// folded from pages.jsonl; the map here holds the store's `UrlState`, the same fields).
/// Anonymous resident memory, sampled; the order first, since memory freed by the map
/// would be reused unseen.
fn recrawl_start_memory(store: &Arc<StateStore>, n: u64, root: &std::path::Path) {
    let (_, base, _) = rss_mib();
    let started = Instant::now();
    let mut order = DueOrder::build(store.clone(), &root.join("due-scratch"), |s| {
        Some(s.fetched_at)
    })
    .unwrap();
    let mut peak = rss_mib().1;
    let mut taken = 0u64;
    loop {
        let batch = order.next_batch(4096).unwrap();
        if batch.is_empty() {
            break;
        }
        taken += batch.len() as u64;
        peak = peak.max(rss_mib().1);
    }
    assert_eq!(taken, n);
    let order_secs = started.elapsed().as_secs_f64();
    drop(order);
    let (_, before_map, _) = rss_mib();
    let mut map: HashMap<String, UrlState> = HashMap::new();
    store
        .for_each_state(|_, s| {
            map.insert(s.url.clone(), s);
            true
        })
        .unwrap();
    let (_, with_map, _) = rss_mib();
    assert_eq!(map.len() as u64, n);
    drop(map);
    let mib = 1048576.0 / n as f64;
    println!(
        "  recrawl start, RAM per URL: due order from the store {:.1} bytes ({:.1} MiB peak over {base:.1}; {n} URLs in order in {order_secs:.2} s); all states in a map by URL (before) {:.1} bytes ({:.1} MiB)",
        (peak - base).max(0.0) * mib,
        (peak - base).max(0.0),
        (with_map - before_map) * mib,
        with_map - before_map
    );
}

fn main() {
    let n = count_from_env("STATE_STORE_URLS", 10_000_000);
    let states_n = count_from_env("STATE_STORE_STATES", 1_000_000);
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    admitted(n, root.path());
    states(states_n, root.path());
}
