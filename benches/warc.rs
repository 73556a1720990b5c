//! What one fetch's archive records cost, per option, on the crawl bench's 16 KiB pages and
//! on pages of real size (testweb's `real_size`: mean ~240 KB, inline styles, scripts, JSON):
//! thread CPU per page, MB/s of payload, and bytes written per byte of payload.
//!
//! Each line is one way of building a fetch's records as the crawl does (`crawler::warc`):
//! the two SHA-1 digests alone (one pass, the `sha1` crate twice as before, and two pages'
//! digests at once, four streams, as the output and deflate threads compute them when
//! several records wait); what
//! `output.warc_deflate = "spare-cpu"` (the default) costs where the fetch ends in a local
//! crawl (header fields and request record: the digests are left to the idle threads), and
//! for a record no spare CPU got to (that, then the digests and the response written stored
//! by the output thread: the crawl's whole cost of a record);
//! and the whole request and response records made where the fetch ends (`"always"`) at
//! each `output.warc_gzip_level` worth comparing (0 stores, 1 is the default, 6 is gzip's). The options are interleaved within each of three
//! trials; printed are the medians. The crawl-level figure (pages/s with and without the
//! archive) is `cargo bench --bench crawl`'s.
//!
//! Run: `cargo bench --bench warc` (`WARC_BENCH_ROUNDS=N`: rounds of the 16 KiB set per
//! trial, default 20; the real-size set gets a tenth as many).

use crawler::cpu_time::thread_cpu_ns;
use crawler::warc::cost;
use testweb::{Web, WebSpec};

/// A request head as the crawler sends it (its size matters, not its words).
const REQUEST_HEAD: &[u8] = b"GET /p/12345 HTTP/1.1\r\nhost: h3.test\r\nuser-agent: crawler/0.1 (+https://example.org/bot)\r\naccept: text/html,application/xhtml+xml,*/*;q=0.8\r\naccept-encoding: gzip, deflate, br\r\n\r\n";

type Way = (&'static str, fn(&[u8], &[u8]) -> usize);

/// The ways measured: name, and what it does with a response head and a payload (returning
/// the bytes it would write). The digest lines do not write: they print no ratio.
const WAYS: [Way; 8] = [
    ("digests, sha1 crate twice  ", |h, p| {
        std::hint::black_box(cost::digests_one_by_one(h, p));
        40
    }),
    ("digests, one pass (SHA-NI) ", |h, p| {
        std::hint::black_box(cost::digests(h, p));
        40
    }),
    // Each page with itself as the other of the pair (one page's figure: half a call's).
    ("digests, 2 pages at once /2", |h, p| {
        std::hint::black_box(cost::digests_of_two((h, p), (h, p)));
        40
    }),
    ("records, spare-cpu, fetch  ", |h, p| {
        cost::records_where_fetched(REQUEST_HEAD, h, p)
    }),
    ("records, spare-cpu, stored ", |h, p| {
        thread_local! {
            static FILE_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        FILE_BUFFER.with_borrow_mut(|out| cost::records_stored(REQUEST_HEAD, h, p, out))
    }),
    ("records, level 0 (stored)  ", |h, p| {
        cost::records(REQUEST_HEAD, h, p, 0)
    }),
    ("records, level 1 (default) ", |h, p| {
        cost::records(REQUEST_HEAD, h, p, 1)
    }),
    ("records, level 6           ", |h, p| {
        cost::records(REQUEST_HEAD, h, p, 6)
    }),
];

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    crawler::allocator::limit_malloc_arenas();
    let rounds: usize = std::env::var("WARC_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let sets = [
        (
            "16 KiB pages (crawl bench)",
            pages(WebSpec::bench(7), 400),
            rounds,
        ),
        (
            "real-size pages",
            pages(WebSpec::real_size(7), 60),
            (rounds / 10).max(1),
        ),
    ];
    for (name, pages, rounds) in &sets {
        let bytes: usize = pages.iter().map(|(h, p)| h.len() + p.len()).sum();
        println!(
            "== {name}: {} pages, mean {} bytes; {rounds} rounds a trial, 3 trials",
            pages.len(),
            bytes / pages.len()
        );
        let mut cpu = vec![Vec::new(); WAYS.len()];
        let mut written = vec![0usize; WAYS.len()];
        for _ in 0..3 {
            for (i, (_, way)) in WAYS.iter().enumerate() {
                let start = thread_cpu_ns();
                let mut out = 0;
                for _ in 0..*rounds {
                    out = pages.iter().map(|(h, p)| way(h, p)).sum();
                }
                cpu[i].push((thread_cpu_ns() - start) as f64 / 1e3);
                written[i] = std::hint::black_box(out);
            }
        }
        for (i, (label, _)) in WAYS.iter().enumerate() {
            let micros = median(&mut cpu[i]);
            let pairs = if label.contains("2 pages at once") {
                2
            } else {
                1
            };
            let per_page = micros / (*rounds * pages.len() * pairs) as f64;
            let mb_per_s = (bytes * rounds * pairs) as f64 / micros;
            if i < 3 {
                println!("{label} {per_page:8.2} µs/page {mb_per_s:7.0} MB/s");
            } else {
                println!(
                    "{label} {per_page:8.2} µs/page {mb_per_s:7.0} MB/s  written/payload {:.3}",
                    written[i] as f64 / bytes as f64
                );
            }
        }
    }
}

/// The first `n` tree pages of `spec`'s web, with the response head a server would send.
fn pages(spec: WebSpec, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let web = Web::new(spec);
    web.tree_urls()
        .iter()
        .filter_map(|url| web.render(url, 0))
        .filter(|page| page.content_type.starts_with("text/html"))
        .take(n)
        .map(|page| {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncontent-length: {}\r\ndate: Thu, 26 Nov 2026 12:00:00 GMT\r\n\r\n",
                page.content_type,
                page.body.len()
            );
            (head.into_bytes(), page.body)
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
