//! Link extraction benchmark: the scanner-based extractor (`crawler::extract`) against the
//! lol_html extractor it replaced (`benches/extract_baseline/`, the old code verbatim) and
//! the scraper reference, on the extractor's ~16 KB documentation page (80 links), on
//! real-size pages (long-tailed sizes, mean ~240 KB: inline CSS, scripts full of markup-like
//! strings, JSON blobs, inline SVG, long text) and, when it is installed, on the doc corpus
//! (every 16th page of the Rust documentation under
//! `~/.rustup/toolchains/*/share/doc/rust/html`: ~3,000 real pages, mean ~12 KB; skipped with
//! a line saying so when absent).
//!
//! Run: `cargo bench --bench extract` (release profile, fat LTO). Extraction runs with the
//! options a crawl uses (`ExtractOptions::for_crawl` of the default configuration: the
//! near-duplicate digest on, the page limits set). Prints MB/s per core from *thread CPU
//! time* (the machine is shared: wall time would count time spent waiting for a core), old
//! and new interleaved page by page in one run, in three trials and their median; then the
//! cost of resolving alone (`PreparedBase::join_link`, what the extractor runs, against
//! `PreparedBase::join` and `Url::join`: ns and allocations per link) and of resolving plus
//! canonicalizing (`join_link` + `canonicalize_link` against `Url::join` + `canonicalize`,
//! what a link costs before admission's scope rules); then allocations per link (a counting
//! allocator wraps the crawler's, mimalloc, as the crawl runs it) for the whole extraction and
//! for normalizing (`Normalizer::canonicalize`). Every page of the 16 KB and real-size sets
//! is first checked against the scraper reference (`tests/extract_support`): the bench
//! refuses to time extractors that disagree. `-- --soak SECS [--seed N]` runs the
//! differential soak of `tests/api/extract_soak.rs` instead (optimized, so many more inputs
//! per second than the ignored test). `EXTRACT_BENCH_ROUNDS` sets the rounds of the 16 KB page (the real-size
//! set gets 1/40 of them, the corpus 1/400); `EXTRACT_BENCH_PROFILE=16k|corpus|real` runs
//! only the new extractor on that set, for `perf record`. The extractor is also timed
//! without the near-duplicate digest: the digest's share must stay under 3%. Each set is also
//! timed with the scanner alone, in passes of its own (nothing run between two pages, as on
//! a parse thread), printed beside the interleaved figure.

#[path = "../tests/extract_support/mod.rs"]
mod extract_support;

#[path = "extract_baseline/mod.rs"]
mod extract_baseline;

// The differential test's cases and generators, and its soak (`-- --soak SECS`).
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/extract_differential.rs"]
mod extract_differential;
#[allow(dead_code)]
#[path = "../tests/api/extract_soak.rs"]
mod extract_soak;

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crawler::extract::{extract_links, ExtractOptions, Extracted};
use std::cell::RefCell;

use crawler::normalize::{before_fragment, Link, LinkBatch, Normalizer, PreparedBase};
use url::Url;

/// Counts allocations (and reallocations, which allocate too), for allocations per link,
/// and passes them to the crawler's allocator, as the crawler binary and the other benches
/// use it (the extractor's figures are those of the parse threads that run it).
struct Counting;

/// Where [`Counting`] sends every call.
static INNER: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the crawler's allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as it is.
        unsafe { INNER.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { INNER.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { INNER.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made while `f` runs (this bench is single-threaded).
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let out = f();
    (ALLOCATIONS.load(Ordering::Relaxed) - before, out)
}

/// A documentation-like page: head with meta, style and script, a nav, paragraphs of text,
/// 80 links of several shapes (relative, absolute, entities, nofollow), ~16 KB.
fn page(links: usize, target_bytes: usize) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Module docs &mdash; example</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"stylesheet\" href=\"/static/main.css\">\
         <style>body{font-family:sans-serif} a[href^=\"http\"]{color:#06c} .nav li{display:inline}</style>\
         <script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}\
         if (a < b && c > d) { document.title = '<a href=\"/not-a-link\">'; }</script>\
         </head><body><header class=\"top\"><nav class=\"nav\"><ul>",
    );
    let mut n = 0;
    let link = |html: &mut String, n: &mut usize| {
        let i = *n;
        *n += 1;
        let tag = match i % 8 {
            0 => format!("<a href=\"/docs/section-{}/page-{i}.html\" class=\"ref\">Page {i}</a>", i % 7),
            1 => format!("<a href=\"../guide/chapter{i}.html#sec-{i}\" title=\"Chapter {i}\">chapter {i}</a>"),
            2 => format!("<a href=\"https://other{}.example.org/path/{i}?a=1&amp;b={i}\">external</a>", i % 5),
            3 => format!("<a class=\"x\" href='item_{i}.html'>item&nbsp;{i}</a>"),
            4 => format!("<a href=\"/search?q=term{i}&amp;page=2&amp;sort=asc\" rel=\"nofollow\">search</a>"),
            5 => format!("<a href=\"#anchor-{i}\">#{i}</a>"),
            6 => format!("<a href=\"/api/v1/struct.Thing{i}.html#method.new\"><code>Thing{i}::new</code></a>"),
            _ => format!("<a href=\"//cdn.example.net/assets/img{i}.png\"><img src=\"/thumb/{i}.png\" alt=\"img {i}\"></a>"),
        };
        html.push_str(&tag);
    };
    for _ in 0..8 {
        html.push_str("<li>");
        link(&mut html, &mut n);
        html.push_str("</li>");
    }
    html.push_str("</ul></nav></header><main><h1 id=\"title\">Module <code>example</code></h1>");
    let text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do. ";
    let paragraphs = 36;
    let per_paragraph = (links - 8) / paragraphs;
    for p in 0..paragraphs {
        html.push_str(&format!(
            "<section id=\"s{p}\"><h2>Section {p}</h2><p class=\"docblock\">"
        ));
        for _ in 0..per_paragraph {
            html.push_str(text);
            link(&mut html, &mut n);
            html.push(' ');
        }
        html.push_str(
            "</p><pre><code>let x = vec![1, 2, 3]; // &lt;not a tag&gt;</code></pre></section>",
        );
    }
    while n < links {
        link(&mut html, &mut n);
    }
    html.push_str("<!-- <a href=\"/commented-out\"> --></main><footer>");
    while html.len() < target_bytes.saturating_sub(40) {
        html.push_str("<span class=\"pad\">footer text</span> ");
    }
    html.push_str("</footer></body></html>\n");
    html
}

/// Deterministic pseudo-random numbers (xorshift), so that every run times the same pages.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "crawler",
    "reads",
    "pages",
    "of",
    "real",
    "size",
    "with",
    "inline",
    "scripts",
    "and",
    "styles",
    "long",
    "text",
    "paragraphs",
    "about",
    "everything",
    "a",
    "site",
    "says",
    "measured",
    "throughput",
    "per",
    "core",
    "links",
    "extraction",
    "memory",
    "speed",
];

fn words(rng: &mut Rng, out: &mut String, n: usize) {
    for _ in 0..n {
        out.push_str(WORDS[rng.below(WORDS.len())]);
        out.push(' ');
    }
}

/// A real-size page of about `target` bytes, shaped like today's web pages: a head with
/// metadata and preloads, a large inline style sheet, inline scripts (markup in strings,
/// comparisons, comments), a JSON data blob with escaped HTML and URLs, inline SVG icons,
/// navigation, an article of long text with a link every few hundred bytes, a footer.
fn real_page(seed: u64, target: usize) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut h = String::with_capacity(target + 4096);
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Real-size page &ndash; example</title>\
         <link rel=\"canonical\" href=\"https://www.example.test/news/article-title\">\
         <link rel=\"preconnect\" href=\"https://fonts.example.net\">\
         <link rel=\"stylesheet\" href=\"/assets/app.3f9a2c.css\">\
         <meta property=\"og:image\" content=\"https://cdn.example.test/og/image.jpg\">\
         <meta name=\"robots\" content=\"index, follow, max-image-preview:large\">",
    );
    // Inline style sheet: ~12%.
    h.push_str("<style>");
    while h.len() < target * 14 / 100 {
        let i = rng.below(10_000);
        h.push_str(&format!(
            ".c-{i}{{display:flex;margin:0 auto;padding:{}px;color:#{:06x}}}\
             .c-{i}>a[href^=\"http\"]::after{{content:\"\\2197\"}}\
             @media (max-width:{}px){{.c-{i} .item{{width:calc(100% - 2rem)}}}}",
            rng.below(40),
            rng.below(0xff_ffff),
            600 + rng.below(800)
        ));
    }
    h.push_str("</style>");
    // Inline scripts: ~25%, markup in strings, comparisons, comments.
    h.push_str("<script>");
    while h.len() < target * 40 / 100 {
        let i = rng.below(100_000);
        h.push_str(&format!(
            "function render{i}(items){{var out='';for(var k=0;k<items.length&&k<{};k++){{\
             if(items[k].n<{}&&items[k].m>0){{out+='<li class=\"item\"><a href=\"'+items[k].url+'\">'\
             +items[k].title+'</a></li>';}}}}/* render <div> list */ return '<ul>'+out+'</ul>';}}\n\
             // keep in sync with </div> templates\n\
             document.addEventListener('click',function(e){{if(e.target.closest('a[data-id=\"{i}\"]'))\
             {{track('click',{{id:{i},ts:Date.now()-{}}});}}}});\n",
            rng.below(50),
            rng.below(1000),
            rng.below(100_000)
        ));
    }
    h.push_str("</script>");
    // A JSON data blob: ~15%, escaped HTML and URLs.
    h.push_str("<script id=\"__DATA__\" type=\"application/json\">{\"items\":[");
    while h.len() < target * 55 / 100 {
        let i = rng.below(1_000_000);
        h.push_str(&format!(
            "{{\"id\":{i},\"url\":\"/items/{i}/detail?ref=feed\",\"title\":\"Item {i}\",\
             \"html\":\"\\u003ca href=\\\"/items/{i}\\\"\\u003eItem\\u003c/a\\u003e\",\
             \"image\":\"https://cdn.example.test/img/{i}.webp\",\"score\":{}.{}}},",
            rng.below(100),
            rng.below(100)
        ));
    }
    h.push_str("{}]}</script></head><body class=\"page\">");
    // Navigation: 40 links.
    h.push_str("<header class=\"site-header\"><nav aria-label=\"main\"><ul>");
    for i in 0..40 {
        h.push_str(&format!(
            "<li class=\"nav-item\"><a class=\"nav-link\" href=\"/section/{i}/\" \
             data-track=\"nav-{i}\">Section {i}</a></li>"
        ));
    }
    h.push_str("</ul></nav></header>");
    // Inline SVG icons: ~3%.
    while h.len() < target * 58 / 100 {
        h.push_str("<svg class=\"icon\" viewBox=\"0 0 24 24\" aria-hidden=\"true\"><path d=\"");
        for _ in 0..20 {
            h.push_str(&format!(
                "M{} {}l{} {}",
                rng.below(24),
                rng.below(24),
                rng.below(9),
                rng.below(9)
            ));
        }
        h.push_str("\"/></svg>");
    }
    // The article: long text with links, images, wrappers.
    h.push_str("<main><article class=\"article\"><h1>A long article</h1>");
    let footer_at = target * 96 / 100;
    while h.len() < footer_at {
        h.push_str("<div class=\"block\" data-block=\"text\"><p>");
        for _ in 0..3 {
            let n = 40 + rng.below(60);
            words(&mut rng, &mut h, n);
            let i = rng.below(100_000);
            match rng.below(6) {
                0 => h.push_str(&format!("<a href=\"https://other{}.example.org/story/{i}\">story</a> ", rng.below(50))),
                1 => h.push_str(&format!("<a href=\"../related/{i}.html\" title=\"Related {i}\">related</a> ")),
                2 => h.push_str(&format!("<a href=\"/tag/{i}?page=2&amp;sort=new\" rel=\"nofollow\">tag</a> ")),
                3 => h.push_str(&format!("<a href=\"/news/2025/{i}/article-title\" class=\"inline\">news</a> ")),
                4 => h.push_str(&format!("<img src=\"/img/{i}.jpg\" srcset=\"/img/{i}@2x.jpg 2x\" alt=\"image {i}\" loading=\"lazy\"> ")),
                _ => h.push_str(&format!("<a href=\"article-{i}\">more</a> ")),
            }
        }
        h.push_str("</p></div>");
    }
    h.push_str("</article></main><footer><ul>");
    for i in 0..30 {
        h.push_str(&format!(
            "<li><a href=\"/about/page-{i}\">About {i}</a></li>"
        ));
    }
    h.push_str("</ul><!-- <a href=\"/commented-out\"> --></footer></body></html>\n");
    h
}

/// The real-size set: long-tailed sizes, mean 240 KB.
fn real_pages() -> Vec<String> {
    [40, 60, 90, 120, 150, 180, 220, 260, 300, 380, 480, 600]
        .iter()
        .enumerate()
        .map(|(i, kb)| real_page(i as u64 + 1, kb * 1000))
        .collect()
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    Duration::from_nanos(crawler::cpu_time::thread_cpu_ns())
}

fn time<T>(samples: &mut Vec<Duration>, f: impl FnOnce() -> T) {
    let t = thread_cpu();
    black_box(f());
    samples.push(thread_cpu().saturating_sub(t));
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.1), at(0.9))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Extracts with the old (lol_html) extractor, converted to today's result type's fields
/// that the comparison reads.
fn old_extract(html: &[u8], url: &Url, opts: &ExtractOptions) -> Extracted {
    let old_opts = extract_baseline::ExtractOptions {
        follow_nofollow: opts.follow_nofollow,
        max_links: opts.max_links,
        max_url_length: opts.max_url_length,
        digest: opts.digest,
    };
    let old = extract_baseline::extract_links(html, url, None, &old_opts);
    // It resolves with fragments; the crawl's options want its links without.
    let drop_fragments = opts.drop_fragments;
    Extracted {
        links: old
            .links
            .into_iter()
            .map(|mut url| {
                if drop_fragments {
                    url.set_fragment(None);
                }
                Link::from(url)
            })
            .collect(),
        nofollow_skipped: old.nofollow_skipped,
        invalid: old.invalid,
        over_limit: old.over_limit,
        too_long: old.too_long,
        meta_nofollow: old.meta_nofollow,
        base: old.base,
        canonical: old.canonical,
        digest: old.digest,
    }
}

/// MB/s of old and new on `pages`, interleaved page by page: three trials of `rounds`.
fn throughput(
    name: &str,
    pages: &[(&Url, &[u8])],
    opts: &ExtractOptions,
    rounds: usize,
) -> (f64, f64) {
    let bytes: usize = pages.iter().map(|(_, html)| html.len()).sum();
    let (mut new_trials, mut old_trials) = (Vec::new(), Vec::new());
    for trial in 0..3 {
        let (mut new, mut old) = (Duration::ZERO, Duration::ZERO);
        for round in 0..rounds {
            for &(url, html) in pages {
                let html = black_box(html);
                let run_new = |total: &mut Duration| {
                    let t = thread_cpu();
                    black_box(extract_links(html, url, None, opts));
                    *total += thread_cpu().saturating_sub(t);
                };
                let run_old = |total: &mut Duration| {
                    let t = thread_cpu();
                    black_box(old_extract(html, url, opts));
                    *total += thread_cpu().saturating_sub(t);
                };
                // Alternated, so that neither always runs with the other's cache leftovers.
                if (round + trial) % 2 == 0 {
                    run_new(&mut new);
                    run_old(&mut old);
                } else {
                    run_old(&mut old);
                    run_new(&mut new);
                }
            }
        }
        let mb_s = |t: Duration| (bytes * rounds) as f64 / t.as_secs_f64().max(1e-9) / 1e6;
        println!(
            "{name}: trial {}: scanner {:7.0} MB/s, lol_html {:6.0} MB/s ({:.1}x)",
            trial + 1,
            mb_s(new),
            mb_s(old),
            mb_s(new) / mb_s(old)
        );
        new_trials.push(mb_s(new));
        old_trials.push(mb_s(old));
    }
    let (new, old) = (median(new_trials), median(old_trials));
    println!(
        "{name}: median of 3: scanner {new:.0} MB/s per core, lol_html {old:.0} MB/s ({:.1}x)",
        new / old
    );
    // The same pages with nothing run between them, as a parse thread runs the extractor:
    // lol_html between two pages takes the caches and branch predictors, which costs the
    // shorter extractor more. Printed beside the interleaved figure, not instead of it.
    let alone: Vec<f64> = (0..3)
        .map(|_| {
            let t = thread_cpu();
            for _ in 0..rounds {
                for &(url, html) in pages {
                    black_box(extract_links(black_box(html), url, None, opts));
                }
            }
            (bytes * rounds) as f64 / thread_cpu().saturating_sub(t).as_secs_f64().max(1e-9) / 1e6
        })
        .collect();
    println!(
        "{name}: scanner alone (its own passes, no lol_html between pages): median of 3 {:.0} MB/s per core",
        median(alone)
    );
    (new, old)
}

/// Allocations per link: the whole extraction (new and old), resolving alone, normalizing.
fn allocations_per_link(name: &str, pages: &[String], url: &Url, opts: &ExtractOptions) {
    let normalizer = Normalizer::default();
    let (mut links, mut new, mut old, mut join, mut canon, mut hrefs_n) = (0, 0, 0, 0, 0, 0);
    for page in pages {
        // Warm: the thread's spare buffers exist after the first page, as in a crawl.
        black_box(extract_links(page.as_bytes(), url, None, opts));
        let (n, out) = allocations(|| extract_links(page.as_bytes(), url, None, opts));
        new += n;
        links += out.links.len();
        old += allocations(|| old_extract(page.as_bytes(), url, opts)).0;
        let hrefs: Vec<String> = {
            let doc = scraper::Html::parse_document(page);
            let sel = scraper::Selector::parse("a[href]").expect("static selector");
            doc.select(&sel)
                .filter_map(|a| a.value().attr("href").map(str::to_owned))
                .collect()
        };
        hrefs_n += hrefs.len();
        join += allocations(|| {
            for h in &hrefs {
                black_box(url.join(h).ok());
            }
        })
        .0;
        let mut resolved = out.links.clone();
        canon += allocations(|| {
            for u in &mut resolved {
                black_box(normalizer.canonicalize_link(u).ok());
            }
        })
        .0;
    }
    let per = |n: u64, d: usize| n as f64 / d.max(1) as f64;
    println!(
        "{name}: allocations per link: extract_links {:.2} (lol_html extractor {:.2}); \
         Url::join alone {:.2}; canonicalize {:.2}",
        per(new, links),
        per(old, links),
        per(join, hrefs_n),
        per(canon, links),
    );
}

/// A corpus page: its URL and its bytes.
type CorpusPage = (Url, Vec<u8>);

/// The extractor corpus: every 16th HTML file (in path order) of the Rust documentation
/// rustup installs with this toolchain (~3,000 pages, mean ~12 KB, ~80 links each: real
/// documentation pages), each with its URL under `http://corpus.test/`. `None` when the
/// documentation is not installed.
fn doc_corpus() -> Option<(std::path::PathBuf, Vec<CorpusPage>)> {
    let home = std::env::var_os("HOME")?;
    let toolchains = std::path::Path::new(&home).join(".rustup/toolchains");
    let mut dirs: Vec<_> = std::fs::read_dir(toolchains)
        .ok()?
        .filter_map(Result::ok)
        .map(|d| d.path().join("share/doc/rust/html"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let dir = dirs.into_iter().next()?;
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "html") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    let root = Url::parse("http://corpus.test/").expect("static URL");
    let pages: Vec<CorpusPage> = files
        .iter()
        .step_by(16)
        .filter_map(|path| {
            let rel = path.strip_prefix(&dir).ok()?.to_string_lossy().into_owned();
            Some((root.join(&rel).ok()?, std::fs::read(path).ok()?))
        })
        .collect();
    (!pages.is_empty()).then_some((dir, pages))
}

/// The decoded `href` values of `a[href]` on a page (scraper's reading).
fn hrefs_of(html: &str) -> Vec<String> {
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse("a[href]").expect("static selector");
    doc.select(&sel)
        .filter_map(|a| a.value().attr("href").map(str::to_owned))
        .collect()
}

/// One way of resolving a page's hrefs against its base.
type Resolving<'a> = dyn Fn(&Url, &[String]) + 'a;

/// Resolving alone: ns per link with `PreparedBase::join_link` (what the extractor runs: a
/// `Link`, no `Url`), `PreparedBase::join` (a `Url` assembled from the parts, what it ran
/// before) and `Url::join`, median of 3 trials, and allocations per link of each; then
/// resolving and canonicalizing, as a link goes from the extractor through admission's
/// normalizer: `join_link` + `Normalizer::canonicalize_link` against `Url::join` +
/// `Normalizer::canonicalize`.
fn resolve_cost(name: &str, pages: &[(Url, Vec<String>)], rounds: usize) {
    let normalizer = Normalizer::default();
    let links: usize = pages.iter().map(|(_, hrefs)| hrefs.len()).sum();
    // The batch and list of links the extractor keeps from page to page.
    let batch = RefCell::new((LinkBatch::default(), Vec::new()));
    // The six ways, timed interleaved page by page.
    let ways: [&Resolving<'_>; 6] = [
        &|base, hrefs| {
            let prepared = PreparedBase::new(base);
            for href in hrefs {
                black_box(prepared.join_link(black_box(href)).ok());
            }
        },
        &|base, hrefs| {
            let prepared = PreparedBase::new(base);
            for href in hrefs {
                black_box(prepared.join(black_box(href)).ok());
            }
        },
        &|base, hrefs| {
            for href in hrefs {
                black_box(base.join(black_box(href)).ok());
            }
        },
        &|base, hrefs| {
            let prepared = PreparedBase::new(base);
            for href in hrefs {
                if let Ok(mut link) = prepared.join_link(black_box(href)) {
                    black_box(normalizer.canonicalize_link(&mut link).ok());
                    black_box(link);
                }
            }
        },
        &|base, hrefs| {
            for href in hrefs {
                if let Ok(mut url) = base.join(black_box(href)) {
                    black_box(normalizer.canonicalize(&mut url).ok());
                    black_box(url);
                }
            }
        },
        // As the extractor resolves a page (without its repeated-href table): into one
        // batch, handed out as links sharing the page's text, dropped.
        &|base, hrefs| {
            let prepared = PreparedBase::new(base);
            let (batch, links) = &mut *batch.borrow_mut();
            for href in hrefs {
                black_box(prepared.join_into(black_box(href), batch).ok());
            }
            batch.finish_into(links);
            black_box(&links);
            links.clear();
        },
    ];
    let mut trials: [Vec<f64>; 6] = Default::default();
    for _ in 0..3 {
        let mut spent = [Duration::ZERO; 6];
        for _ in 0..rounds {
            for (base, hrefs) in pages {
                for (way, total) in ways.iter().zip(&mut spent) {
                    let t = thread_cpu();
                    way(base, hrefs);
                    *total += thread_cpu().saturating_sub(t);
                }
            }
        }
        let per = |t: Duration| t.as_secs_f64() * 1e9 / (links * rounds).max(1) as f64;
        for (trial, total) in trials.iter_mut().zip(spent) {
            trial.push(per(total));
        }
    }
    let allocs: Vec<f64> = ways
        .iter()
        .map(|way| {
            let (n, _) = allocations(|| {
                for (base, hrefs) in pages {
                    way(base, hrefs);
                }
            });
            n as f64 / links.max(1) as f64
        })
        .collect();
    let ns: Vec<f64> = trials.into_iter().map(median).collect();
    let taken = pages
        .iter()
        .map(|(base, hrefs)| {
            let prepared = PreparedBase::new(base);
            hrefs
                .iter()
                .filter(|h| prepared.join_link(h).is_ok_and(|l| l.is_plain()))
                .count()
        })
        .sum::<usize>();
    println!(
        "{name}: resolving {links} links, ns per link (allocations), median of 3: \
         PreparedBase::join_link {:.0} ({:.2}), PreparedBase::join {:.0} ({:.2}), \
         Url::join {:.0} ({:.2}); fast path took {:.1}%",
        ns[0],
        allocs[0],
        ns[1],
        allocs[1],
        ns[2],
        allocs[2],
        taken as f64 * 100.0 / links.max(1) as f64
    );
    println!(
        "{name}: resolving + canonicalizing, ns per link (allocations): \
         join_link + canonicalize_link {:.0} ({:.2}), Url::join + canonicalize {:.0} ({:.2})",
        ns[3], allocs[3], ns[4], allocs[4],
    );
    // The hrefs whose `key` an earlier one of their page has.
    let repeats = |key: fn(&str) -> &str| -> usize {
        pages
            .iter()
            .map(|(_, hrefs)| {
                let mut seen = std::collections::HashSet::new();
                hrefs.iter().filter(|href| !seen.insert(key(href))).count()
            })
            .sum()
    };
    let repeated = repeats(|href| href);
    // The crawl's extractor cuts each `href` before its `#`: more of them repeat.
    let repeated_cut = repeats(|href| before_fragment(href).0);
    let fragments = pages
        .iter()
        .flat_map(|(_, hrefs)| hrefs)
        .filter(|href| href.starts_with('#'))
        .count();
    println!(
        "{name}: as the extractor resolves (join_into one LinkBatch per page, links handed \
         out and dropped): {:.0} ns per link ({:.2} allocations); {:.0}% of hrefs repeat an \
         earlier one of their page (the extractor reuses its link), {:.0}% once cut before \
         their `#` as the crawl's extractor does; {:.0}% are fragment-only",
        ns[5],
        allocs[5],
        repeated as f64 * 100.0 / links.max(1) as f64,
        repeated_cut as f64 * 100.0 / links.max(1) as f64,
        fragments as f64 * 100.0 / links.max(1) as f64,
    );
}

fn main() {
    crawler::allocator::limit_malloc_arenas();
    println!(
        "crawler's allocator: {} (CRAWLER_ALLOCATOR=system for the system's)",
        crawler::allocator::describe()
    );
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    if let Some(secs) = arg("--soak") {
        let seed = arg("--seed").unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
        let report = extract_soak::soak(Duration::from_secs(secs), seed);
        if report.mismatches > 0 {
            std::process::exit(1);
        }
        return;
    }
    let html = page(80, 16 * 1024);
    let url = Url::parse("https://docs.example.test/crate/module/index.html").expect("static URL");
    let real_url =
        Url::parse("https://www.example.test/news/2025/article-title").expect("static URL");
    // What the crawl's parse threads run: the default configuration's options, the
    // near-duplicate digest on.
    let opts = ExtractOptions::for_crawl(&crawler::config::Config::default());
    let real = real_pages();
    // Both extractors must find what the reference finds, on every page timed.
    let fast = extract_links(html.as_bytes(), &url, None, &opts);
    let reference = extract_support::reference_extract(html.as_bytes(), &url, None, &opts);
    extract_support::compare(&fast, &reference).expect("16 KB page: scanner disagrees");
    extract_support::compare(&old_extract(html.as_bytes(), &url, &opts), &reference)
        .expect("16 KB page: lol_html extractor disagrees");
    let (mut real_bytes, mut real_links) = (0, 0);
    for page in &real {
        let fast = extract_links(page.as_bytes(), &real_url, None, &opts);
        let reference = extract_support::reference_extract(page.as_bytes(), &real_url, None, &opts);
        extract_support::compare(&fast, &reference).expect("real-size page: scanner disagrees");
        extract_support::compare(&old_extract(page.as_bytes(), &real_url, &opts), &reference)
            .expect("real-size page: lol_html extractor disagrees");
        real_bytes += page.len();
        real_links += fast.found();
    }
    println!(
        "16 KB page: {} bytes, {} links + {} nofollow skipped; real-size set: {} pages, \
         mean {} bytes, {:.0} links per page (all three extractors agree on every page)",
        html.len(),
        fast.links.len(),
        fast.nofollow_skipped,
        real.len(),
        real_bytes / real.len(),
        real_links as f64 / real.len() as f64
    );

    let rounds: usize = std::env::var("EXTRACT_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let corpus = doc_corpus();
    if let Some(profile) = std::env::var_os("EXTRACT_BENCH_PROFILE") {
        // Only the new extractor, for `perf record`: `EXTRACT_BENCH_PROFILE=16k` the 16 KB
        // page, `=corpus` the doc corpus, anything else the real-size set.
        let pages: Vec<(&Url, &[u8])> = match profile.to_str() {
            Some("16k") => vec![(&url, html.as_bytes()); 40],
            Some("corpus") => corpus
                .iter()
                .flat_map(|(_, pages)| pages.iter().map(|(u, h)| (u, h.as_slice())))
                .collect(),
            _ => real.iter().map(|p| (&real_url, p.as_bytes())).collect(),
        };
        for _ in 0..rounds / 40 {
            for &(url, html) in &pages {
                black_box(extract_links(black_box(html), url, None, &opts));
            }
        }
        return;
    }
    let wall = Instant::now();
    throughput("16 KB page", &[(&url, html.as_bytes())], &opts, rounds);
    let real_set: Vec<(&Url, &[u8])> = real.iter().map(|p| (&real_url, p.as_bytes())).collect();
    throughput("real-size pages", &real_set, &opts, (rounds / 40).max(1));
    match &corpus {
        Some((dir, pages)) => {
            let bytes: usize = pages.iter().map(|(_, h)| h.len()).sum();
            let (mut links, mut differ) = (0, 0);
            for (url, html) in pages {
                let new = extract_links(html, url, None, &opts);
                let old = old_extract(html, url, &opts);
                links += new.found();
                differ += usize::from(extract_support::compare(&new, &old).is_err());
            }
            println!(
                "doc corpus: {} pages of {} (every 16th), mean {} bytes, {:.0} links per page; \
                 the two extractors differ on {differ} pages (the differential test checks \
                 them against scraper: `extract_corpus`)",
                pages.len(),
                dir.display(),
                bytes / pages.len(),
                links as f64 / pages.len() as f64
            );
            let set: Vec<(&Url, &[u8])> = pages.iter().map(|(u, h)| (u, h.as_slice())).collect();
            throughput("doc corpus", &set, &opts, (rounds / 400).max(1));
        }
        None => println!(
            "doc corpus: skipped, no Rust documentation under ~/.rustup/toolchains/*/share/doc/rust/html"
        ),
    }
    resolve_cost("16 KB page", &[(url.clone(), hrefs_of(&html))], rounds / 4);
    if let Some((_, pages)) = &corpus {
        let hrefs: Vec<(Url, Vec<String>)> = pages
            .iter()
            .take(500)
            .map(|(u, h)| (u.clone(), hrefs_of(&String::from_utf8_lossy(h))))
            .collect();
        resolve_cost("doc corpus (500 pages)", &hrefs, 3);
    }
    allocations_per_link("16 KB page", std::slice::from_ref(&html), &url, &opts);
    allocations_per_link("real-size pages", &real, &real_url, &opts);

    // The rest of the picture on the 16 KB page: the digest, resolving, scraper.
    let hrefs = hrefs_of(&html);
    let with_digest = opts.clone();
    let opts = ExtractOptions {
        digest: false,
        ..with_digest.clone()
    };
    let (mut t_fast, mut t_digest, mut t_join, mut t_empty, mut t_ref) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds / 4 {
        time(&mut t_fast, || {
            extract_links(black_box(html.as_bytes()), &url, None, &opts)
        });
        time(&mut t_digest, || {
            extract_links(black_box(html.as_bytes()), &url, None, &with_digest)
        });
        time(&mut t_empty, || {
            extract_links(black_box(b"<p>"), &url, None, &opts)
        });
        time(&mut t_join, || {
            hrefs
                .iter()
                .filter_map(|h| url.join(black_box(h)).ok())
                .collect::<Vec<_>>()
        });
        time(&mut t_ref, || {
            extract_support::reference_extract(html.as_bytes(), &url, None, &opts)
        });
    }
    let (without, _, _) = stats(t_fast.clone());
    let (with, _, _) = stats(t_digest.clone());
    println!(
        "near-duplicate digest: extractor {:.1}% slower with it",
        (with - without) / without * 100.0
    );
    for (name, samples) in [
        ("extract_links without the digest", t_fast),
        ("extract_links (as the crawl runs it)", t_digest),
        ("Url::join of the page's hrefs", t_join),
        ("extract_links on \"<p>\" (fixed cost)", t_empty),
        ("scraper reference_extract", t_ref),
    ] {
        let (median, p10, p90) = stats(samples);
        println!("{name:38} median {median:7.1} µs/page  (p10 {p10:.1}, p90 {p90:.1})");
    }
    println!("{:.1} s wall", wall.elapsed().as_secs_f64());
}
