//! The synthetic web: a deterministic web generator and HTTP server that every end-to-end test
//! and benchmark of the crawler runs against, and the ground truth of what a correct crawl of
//! it fetches.
//!
//! # Guarantees
//! - **Deterministic.** A [`WebSpec`] (seed included) fixes every page's bytes, every link and
//!   every status. Nothing is stored: a page's links are computed on demand from a hash of
//!   (seed, host, page), so a 30,000-page web costs no memory and starts instantly.
//! - **One truth.** The server ([`TestWebServer`]) and the ground truth
//!   ([`Web::ground_truth`]) call the same functions (`graph::Graph::head` for the answer,
//!   `graph::Graph::links` for the links), so they cannot disagree.
//! - **Order independence.** With the seeds of [`Web::seeds`] (all home pages), every page is
//!   first discovered at its shortest depth in *any* crawl order, so "every page within
//!   `max_depth` fetched exactly once" is exact for a concurrent crawler.
//!
//! # Use in a test
//! ```
//! use std::sync::Arc;
//! use testweb::{CrawlRules, TestWebServer, Web, WebSpec};
//!
//! let web = Arc::new(Web::new(WebSpec::small(42)));
//! let server = TestWebServer::start(Arc::clone(&web))?;
//! let (pattern, addr) = server.resolve_entry(); // [network] resolve = { "*.test" = "127.0.0.1:PORT" }
//! assert_eq!(pattern, "*.test");
//! // … crawl web.seeds() with the crawler, its config resolving *.test to `addr` …
//! let rules = CrawlRules { respect_robots: false, ..CrawlRules::default() };
//! let truth = web.ground_truth(&web.seeds(), &rules);
//! let diff = truth.diff_log(&server.log()); // after a real crawl: assert!(diff.is_empty(), "{diff}")
//! assert_eq!(diff.missing.len(), truth.urls().len()); // nothing was crawled here
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Hosts and URLs
//! Hosts are virtual: `h0.test` … `h{n-1}.test`, all served by one listener on 127.0.0.1 and
//! routed by the `Host` header (port ignored, any case). The crawler reaches them with
//! `[network] resolve = { "*.test" = "127.0.0.1:PORT" }` ([`TestWebServer::resolve_entry`]).
//! Only canonical request targets are routed (`/p/12`, never `/p/./12` or `/p/012`): a
//! crawler that requests a non-canonical spelling gets a 404 that shows in the log.
//!
//! # The graph: layered trees
//! The `pages` normal pages are split evenly over the hosts. Each host's pages form a tree
//! numbered like a heap: page 0 is the home page `/`, page `k` is `/p/{k}`, its children are
//! `k*b+1 ..= k*b+b` with the smallest branching `b` that fits the host into layers 0..=4
//! (the bench web: 1,250 pages per host, `b` = 6, 4 layers below home). A page's *layer* is
//! its tree depth. Every link on a page of layer `L` goes to:
//! - a page of layer `L+1`: its tree children, and cross-links to *open* pages (half of the
//!   non-home pages, chosen by hash) of layer `L+1` on any host;
//! - a home page, own or any other host's (all home pages are seeds, already discovered);
//! - on a *closed* page (linked forward only by its tree parent): its tree parent, further
//!   ancestors up to and including the first open one (breadcrumbs), and up to three
//!   siblings. When a closed page is parsed its parent has been parsed, so all of these are
//!   already discovered.
//!
//! Pages are padded to `links_per_page` links with duplicates of their own links (the same
//! URL many times per page), so there are cycles through ancestors, siblings and home pages
//! everywhere. Layer = shortest depth from the home pages, and no link can first discover a
//! page deeper than its layer.
//!
//! # Special pages (each behind a feature flag; `n` = number of hosts)
//! All hang off the home page of their host (layer 1; their children layer 2):
//! - `redirects`, on `h{1%n}`: `/redirect/chain/1` 301 → `/redirect/chain/2` 302 →
//!   `/redirect/chain/3` 307 → `/redirect/chain/end` (200, links `/redirect/chain/end-child`);
//!   a loop `/redirect/loop/a` 302 ⇄ `/redirect/loop/b` 308; `/redirect/self` 302 to itself;
//!   `/redirect/long/0` → … → `/redirect/long/11` → `/redirect/long/end` (12 hops, cut by any
//!   `max_redirects` < 12); `/redirect/offsite` 301 → `http://h{2%n}.test/redirect/landing`;
//!   `/redirect/to-tree` 301 → `/p/1` (already discovered). With `variants` some `Location`s
//!   are relative (`3`), root-relative or `HTTP://H1.TEST:80/…`.
//! - `errors`, on `h{2%n}`: `/error/404`, `/error/410`, `/error/500` (always),
//!   `/error/503-then-ok` and `/error/429-then-ok` (first request 503/429, then 200 with a
//!   child `…/child` reachable only through them). The counts are server state: use one server
//!   per crawl (a resumed crawl keeps its server).
//! - `slow`, on `h{3%n}`: `/slow/page` answers after 300 ms (child `/slow/child`);
//!   `too_slow` (opt-in) adds `/slow/too-slow`, answering after 60 s.
//! - `big`, on `h{4%n}`: `/big/page`, 11 MiB of `text/html` streamed; its first bytes link home,
//!   its last bytes link `/big/beyond-cap` (found only by a crawler reading past the cap).
//! - `non_html`, on `h0`: `/files/image.png`, `/files/doc.pdf`, `/files/notes.txt` (bodies
//!   holding `<a href="/files/hidden">` text that must not be followed) and
//!   `/files/page.xhtml` (`application/xhtml+xml`, whose link `/files/xhtml-child` is followed).
//! - `trap`, on `h{1%n}`: `/calendar/2026/11`, each month linking the previous and next month
//!   forever (years 1–9999); month `m` sits at layer 1 + |m − Nov 2026|. The months are
//!   rendered alike but for their numbers, so a crawler that stops near-duplicate pages takes
//!   the entry month and its two neighbours; `max_depth` bounds it otherwise.
//! - `robots`: every host serves `/robots.txt` (see `robots.rs`: `BadBot` group, 404,
//!   503-then-ok, `Allow` override, wildcards; the opt-in `crawl_delay` adds `Crawl-delay: 1`
//!   on `h3`, `h8`, …) and links `/private/page`, `/private/open`, `/private/doc.html` from its
//!   home, each linking `/after-private/…` (reachable only through them). Without the feature
//!   `/robots.txt` is 404 everywhere.
//! - `nofollow`, on `h{2%n}`: `/nofollow/a` and `/nofollow/b` linked only with `rel` holding the
//!   `nofollow` token (any case), `/nofollow/lookalike` with `rel="nofollowme"` (followed);
//!   tree pages also carry `rel=nofollow` duplicates of links that appear plainly too.
//! - `variants`: links spelled many ways that the WHATWG parser resolves to the same URL (see
//!   `render.rs`), through `<a>`, `<A HREF>`, `<area>`, `<iframe>`; a fifth of the tree pages
//!   declare `<base href="/b/c/">` (then a second, ignored `<base>`); on `h0`, `/frames/index`
//!   is a frameset (`<frame src>` → `/frames/left`, `/frames/right`) and the home page holds
//!   decoys — links inside a comment, `<script>`, `<style>` and `<textarea>` to
//!   `/decoy/{comment,script,style,textarea}`, plus `mailto:`, `javascript:` and `tel:` links
//!   and an `<a>` without href — that a correct extractor ignores.
//! - `meta_robots` (opt-in), on `h{2%n}`: `/nofollow/meta` (`<meta name="robots"
//!   content="noindex, NOFOLLOW">`) and `/nofollow/header` (`X-Robots-Tag: noarchive,
//!   nofollow`), each linking a child (`/nofollow/meta-child`, `/nofollow/header-child`)
//!   reachable only through it.
//! - `charsets` (opt-in), on the host `charsets.test` (not linked from the tree): pages in
//!   Shift_JIS, windows-1252 and GBK (by Content-Type, `<meta http-equiv>`, `<meta charset>`),
//!   a byte-order mark over a wrong Content-Type and a `<meta>` too late to count, each
//!   linking a non-ASCII path and query; [`CHARSET_TARGETS`] are the exact requests a correct
//!   crawler makes for them (`charsets.rs`).
//! - `canonical` (opt-in), on the host `canonical.test`: pages naming a canonical URL by
//!   `<link rel=canonical>`, by `Link: <…>; rel="canonical"` (on a PDF too), by both (the
//!   header wins), off-site, and themselves (`canonical.rs`).
//! - `sitemaps` (opt-in), on the host `sitemaps.test`: robots.txt with a `Sitemap:` line to
//!   a sitemap index (a gzip child, one over the 50,000-entry limit, a broken one, one
//!   disallowed by robots.txt), `/sitemap.xml`, and pages listed only there (`sitemaps.rs`).
//! - `docsite` (opt-in), on the host `docs.test`: a manual whose chapters chain 500 links
//!   deep, reference URLs of 2,100–3,350 bytes, and a repeating-path trap (`docsite.rs`).
//! - `pressure` (opt-in), on the hosts `throttle.test` (429 without `Retry-After` above
//!   [`THROTTLE_RPS`] requests per sliding second) and `sluggish.test` (answers after
//!   [`SLUGGISH_STEP`] × its requests of the last second), each a home page linking
//!   [`PRESSURE_PAGES`] leaves (`pressure.rs`): for adaptive politeness.
//! - `advanced_variants` (opt-in, for the normalizer's tests): a quarter of the duplicate
//!   forward links to `/p/{k}` are spelled `/p/{k}?utm_source=testweb&utm_medium=link`,
//!   `/p/{k}?gclid=abc123`, `/p/{k}?`, `/p/{k}?jsessionid=0123abcd` or `/%70/{k}`; each is
//!   served with `/p/{k}`'s bytes. With `CrawlRules::full_normalization` they are `/p/{k}`;
//!   without, each is a URL of its own at `/p/{k}`'s depth.
//! - `real_size` (opt-in; `testweb --page-size real`, [`WebSpec::real_size`]): tree pages of
//!   real size and shape (log-normal, median 150 KB, mean ~240 KB, to 6 MB; inline styles,
//!   scripts and a JSON blob holding link-like text that is not links, long text, nav and
//!   footer lists of links), the same links as without (`realsize.rs`). Served with
//!   `encodings` (gzip/br) and `--tls`, it is the web of today's pages.
//!
//! # The hostile corner
//! [`TestWebServer::start_hostile`] (or `testweb --hostile`) also serves hosts that misbehave
//! on purpose, each on a name of its own ([`Hostile::ALL`]; `hostile.rs` and `raw.rs` say
//! exactly what each sends):
//! - on this listener, `NAME.hostile.test`: `private-redirect` and `private-robots`
//!   (redirects to the canary and to `169.254.169.254`), `huge-base` (a 4 MiB `<base href>`
//!   and 10,000 relative links), `million-links`, `crawl-delay` (`Crawl-delay: 86400`),
//!   `retry-after` (503 with `Retry-After: 86400`), `endless-body` (chunked, never ends),
//!   `gzip-bomb` and `brotli-bomb` (~3.9 GiB decompressed), `endless-redirect`, `shift-jis`
//!   (invalid bytes), `lying-bom` (UTF-16 BOM on UTF-8), `many` (links 50,000 hosts
//!   `h{i}.many.hostile.test`, each a tiny page), `wide-index` (80,000 links), and three
//!   traps ([`Hostile::TRAPS`]): `calendar` (months differing only in their numbers),
//!   `session-spiral` (a new session id in every link and page) and `repeating-path`;
//! - on a second listener, the raw-socket responder for `NAME.raw.test`, for what hyper will
//!   not send: `slowloris` (headers at one byte per second), `garbage-status`
//!   (`HTTP/1.1 999 ???`), `no-reason`, `bad-header-bytes` (invalid UTF-8 in header values),
//!   `no-colon` and `not-http`. The crawler maps it with a second resolve entry
//!   ([`TestWebServer::resolve_entries`]);
//! - a **canary** listener that answers nothing and counts connections
//!   ([`TestWebServer::canary_connections`]): it is where the private redirects point, it is
//!   never mapped nor seeded, so a crawl that connects to it has reached a private address.
//!
//! Nothing big is held in memory: huge and endless bodies are generated as they are read,
//! the compression bombs are a few precomputed blocks repeated.
//!
//! # Ground truth
//! [`Web::ground_truth`] walks the graph from the seeds applying [`CrawlRules`] the way the
//! crawler does: seeds depth 0; a link from a page of depth `d` is taken on if `d+1 ≤
//! max_depth`; a redirect target keeps the depth and counts one hop, and is taken on only if
//! its hops ≤ `max_redirects`; links only from 2xx `text/html` or `application/xhtml+xml`
//! answers, `rel=nofollow` skipped unless `follow_nofollow`; 5xx, 429 and timeouts retried
//! `retries` times (so `/error/500` costs `retries+1` requests, `/error/503-then-ok` 2);
//! with `respect_robots`, URLs disallowed for user agent `*` are taken on but not requested
//! (a 5xx robots.txt is assumed to recover; `User-agent` groups other than `*` never apply).
//! [`GroundTruth::urls`] is what must be requested, [`GroundTruth::expected_requests`] how
//! often, [`GroundTruth::diff_log`] compares a server log with it. The flaky pages assume a
//! server that has not answered them before. [`GroundTruth::order_independent`] says whether
//! the seeds were exactly the home pages, the case in which the truth holds for any crawl
//! order (with other seeds it is the breadth-first answer).
//!
//! # Why built this way
//! A concurrent crawler cannot promise global breadth-first order, so a tree with arbitrary
//! back-edges would make the expected depth of a page depend on timing. The layered structure
//! makes the ground truth a plain breadth-first search, while still giving the crawler
//! cross-host discovery races, duplicates and cycles to get wrong.

mod canonical;
mod charsets;
mod dns;
mod docsite;
mod encoding;
mod freshness;
mod graph;
mod hostile;
mod pressure;
mod proxy;
mod raw;
mod realsize;
mod render;
mod robots;
mod server;
mod sitemaps;
mod tls;
mod truth;

use std::collections::BTreeSet;

pub use canonical::{CANONICAL_EXPECTED, CANONICAL_HOST, CANONICAL_ONLY};
pub use charsets::{CHARSETS_HOST, CHARSET_PAGES, CHARSET_TARGETS};
pub use dns::{DnsQuery, DnsResponder};
pub use docsite::{doc_expected, doc_long_paths, DOCS_HOST, DOC_CHAIN};
pub use encoding::fnv1a;
pub use freshness::{ChangeRate, Validators};
pub use graph::PageKind;
pub use graph::{BIG_PAGE_BYTES, SLOW_DELAY, TOO_SLOW_DELAY};
pub use hostile::{
    Hostile, BOMB_MIB, HOSTILE_DOMAIN, HUGE_BASE_BYTES, HUGE_BASE_LINKS, HUGE_DELAY_SECS,
    MANY_HOSTS, MILLION_LINKS, RAW_DOMAIN, WIDE_INDEX_LINKS,
};
pub use pressure::{PRESSURE_PAGES, SLUGGISH_HOST, SLUGGISH_STEP, THROTTLE_HOST, THROTTLE_RPS};
pub use proxy::{ProxyRecord, TestProxy};
pub use realsize::page_bytes as real_page_bytes;
pub use server::{HttpVersion, RequestRecord, ServerOptions, TestWebServer};
pub use sitemaps::{
    sitemap_lastmod, BIG_SITEMAP_ENTRIES, SITEMAPS_HOST, SITEMAP_FILES, SITEMAP_ONLY,
};
pub use tls::{TlsMode, TlsSetupError};
pub use truth::{
    max_concurrency, requests_per_url, CrawlRules, ExpectedPage, GroundTruth, LogDiff,
};

use graph::{Graph, Node, Page, Rel};

/// The shape and content of a synthetic web.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebSpec {
    /// Number of virtual hosts `h0.test` … (at least 1).
    pub hosts: usize,
    /// Normal (tree) pages over all hosts, home pages included; special pages come on top.
    pub pages: usize,
    pub seed: u64,
    /// Links per tree page, duplicates included (a page whose own unique links are more
    /// than this keeps them all).
    pub links_per_page: usize,
    /// Target size of a tree page's body in bytes.
    pub page_bytes: usize,
    pub features: Features,
}

impl WebSpec {
    /// 5 hosts, 300 pages, every feature except `too_slow` and `advanced_variants`: a web
    /// an end-to-end test crawls in about a second.
    pub fn small(seed: u64) -> WebSpec {
        WebSpec {
            hosts: 5,
            pages: 300,
            seed,
            links_per_page: 24,
            page_bytes: 4 * 1024,
            features: Features::all(),
        }
    }

    /// The throughput benchmark's web: 24 hosts, 30,000 pages of 16 KiB with 80 links, only
    /// the features that cost nothing per page (link spellings, nofollow duplicates).
    pub fn bench(seed: u64) -> WebSpec {
        WebSpec {
            hosts: 24,
            pages: 30_000,
            seed,
            links_per_page: 80,
            page_bytes: 16 * 1024,
            features: Features {
                variants: true,
                nofollow: true,
                ..Features::none()
            },
        }
    }
}

impl WebSpec {
    /// The real-size benchmark's web (`Features::real_size`): 8 hosts, 3,000 pages of
    /// log-normal sizes (mean ~240 KB) with 160 links each, link spellings and nofollow
    /// duplicates as in [`WebSpec::bench`].
    pub fn real_size(seed: u64) -> WebSpec {
        WebSpec {
            hosts: 8,
            pages: 3_000,
            seed,
            links_per_page: 160,
            page_bytes: 240 * 1000,
            features: Features {
                variants: true,
                nofollow: true,
                real_size: true,
                ..Features::none()
            },
        }
    }
}

/// Which special behaviours the web has (see the module doc for what each adds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub redirects: bool,
    pub errors: bool,
    pub slow: bool,
    pub big: bool,
    pub non_html: bool,
    pub trap: bool,
    pub robots: bool,
    pub variants: bool,
    pub nofollow: bool,
    /// Spellings only full normalization folds (tracking and session parameters): some duplicate
    /// links to `/p/{k}` become `/p/{k}?utm_source=…&utm_medium=…`, `?gclid=…`, a bare `?`,
    /// `?jsessionid=…` or `/%70/{k}`, served with the page's own bytes. See
    /// `CrawlRules::full_normalization`.
    pub advanced_variants: bool,
    /// Adds `/slow/too-slow` (60 s), for tests that set a short crawler timeout.
    pub too_slow: bool,
    /// Adds page-level nofollow (robots meta tag and header): `/nofollow/meta` says
    /// `<meta name="robots" content="noindex, NOFOLLOW">`, `/nofollow/header` sends
    /// `X-Robots-Tag: noarchive, nofollow`; their children are reachable only through them.
    pub meta_robots: bool,
    /// With `robots`: the robots.txt of hosts `3, 8, 13, …` also says `Crawl-delay: 1`.
    pub crawl_delay: bool,
    /// Serves the charsets corner on `charsets.test` (see `charsets.rs`): pages in
    /// Shift_JIS, windows-1252 and GBK, declared each a different way, with non-ASCII links.
    pub charsets: bool,
    /// Serves the canonical corner on `canonical.test` (see `canonical.rs`): canonical URLs
    /// named by `<link rel=canonical>` and by the `Link` header, reachable in no other way.
    pub canonical: bool,
    /// Serves the sitemaps corner on `sitemaps.test` (see `sitemaps.rs`): a site whose
    /// pages are mostly listed only in sitemaps (robots.txt `Sitemap:`, `/sitemap.xml`, an
    /// index, a gzip child, a file over the 50,000-entry limit, a broken one).
    pub sitemaps: bool,
    /// Serves the documentation-site corner on `docs.test` (see `docsite.rs`): a book 500
    /// chapters deep, reference URLs over 2,000 bytes, and a repeating-path trap.
    pub docsite: bool,
    /// Tree pages of long-tailed sizes instead of `page_bytes` each (see
    /// `render::long_tail_bytes`): median ~12 KB, 1% from 500 KB to 2 MB, 0.05% from 5 to 8
    /// MB, as a real site's pages are. For memory benchmarks.
    pub long_tail: bool,
    /// Serves the pressure corner on `throttle.test` and `sluggish.test` (see
    /// `pressure.rs`): a host that answers 429 above a rate, one that slows with load.
    pub pressure: bool,
    /// Tree pages carry their host's validators (`ETag`, `Last-Modified`, both or neither)
    /// and conditional requests are answered `304` when they match (see `freshness.rs`).
    pub conditional: bool,
    /// Tree pages of real size and shape instead of `page_bytes` of links and filler (see
    /// `realsize.rs`): log-normal sizes, median 150 KB, mean ~240 KB, a tail to 6 MB, with
    /// inline styles and scripts, a JSON blob, long text, and nav and footer lists holding
    /// the links. The links are the same. `testweb --page-size real`.
    pub real_size: bool,
}

/// An unknown name in a feature list.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown feature {0:?}; known: all, none, {list}", list = Features::NAMES.join(", "))]
pub struct UnknownFeature(pub String);

impl Features {
    pub const NAMES: &'static [&'static str] = &[
        "redirects",
        "errors",
        "slow",
        "big",
        "non_html",
        "trap",
        "robots",
        "variants",
        "nofollow",
        "advanced_variants",
        "too_slow",
        "meta_robots",
        "crawl_delay",
        "charsets",
        "canonical",
        "sitemaps",
        "docsite",
        "long_tail",
        "pressure",
        "conditional",
        "real_size",
    ];

    /// Every feature except the opt-in ones: `too_slow`, `advanced_variants` (needs the
    /// crawler's full normalization to be fetched once per page), `meta_robots` (needs the
    /// crawler to honour page-level nofollow), `crawl_delay` (slows a host to 1 page/s) and
    /// the corners on hosts of their own (`charsets`, `canonical`, `sitemaps`, `docsite`:
    /// reached only by seeding their host, so a tree crawl's ground truth never includes them).
    pub fn all() -> Features {
        Features {
            redirects: true,
            errors: true,
            slow: true,
            big: true,
            non_html: true,
            trap: true,
            robots: true,
            variants: true,
            nofollow: true,
            advanced_variants: false,
            too_slow: false,
            meta_robots: false,
            crawl_delay: false,
            charsets: false,
            canonical: false,
            sitemaps: false,
            docsite: false,
            long_tail: false,
            pressure: false,
            conditional: false,
            real_size: false,
        }
    }

    pub fn none() -> Features {
        Features::default()
    }

    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "redirects" => &mut self.redirects,
            "errors" => &mut self.errors,
            "slow" => &mut self.slow,
            "big" => &mut self.big,
            "non_html" | "non-html" => &mut self.non_html,
            "trap" => &mut self.trap,
            "robots" => &mut self.robots,
            "variants" => &mut self.variants,
            "nofollow" => &mut self.nofollow,
            "advanced_variants" | "advanced-variants" => &mut self.advanced_variants,
            "too_slow" | "too-slow" => &mut self.too_slow,
            "meta_robots" | "meta-robots" => &mut self.meta_robots,
            "crawl_delay" | "crawl-delay" => &mut self.crawl_delay,
            "charsets" => &mut self.charsets,
            "canonical" => &mut self.canonical,
            "sitemaps" => &mut self.sitemaps,
            "docsite" => &mut self.docsite,
            "long_tail" | "long-tail" => &mut self.long_tail,
            "pressure" => &mut self.pressure,
            "conditional" => &mut self.conditional,
            "real_size" | "real-size" => &mut self.real_size,
            _ => return None,
        })
    }

    /// Parses a comma-separated list: `all`, `none`, feature names, and `-name` to turn one
    /// off (`all,-big`).
    pub fn parse(list: &str) -> Result<Features, UnknownFeature> {
        let mut features = Features::none();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item {
                "all" => features = Features::all(),
                "none" => features = Features::none(),
                _ => {
                    let (on, name) = match item.strip_prefix('-') {
                        Some(name) => (false, name),
                        None => (true, item),
                    };
                    *features
                        .flag(name)
                        .ok_or_else(|| UnknownFeature(item.to_string()))? = on;
                }
            }
        }
        Ok(features)
    }
}

/// One link of a page as the extractor should report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedLink {
    /// Canonical URL of the target.
    pub url: String,
    /// `rel` holds the `nofollow` token: not followed by default.
    pub nofollow: bool,
}

/// A rendered response, for tests that look at bytes without a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPage {
    pub status: u16,
    pub content_type: String,
    pub location: Option<String>,
    pub body: Vec<u8>,
}

/// A synthetic web, generated on demand from its [`WebSpec`].
#[derive(Clone, Debug)]
pub struct Web {
    graph: Graph,
    /// The pages' changes so far (see `freshness.rs`), shared with the server.
    freshness: std::sync::Arc<freshness::Freshness>,
}

impl Web {
    pub fn new(spec: WebSpec) -> Web {
        Web {
            graph: Graph::new(spec),
            freshness: Default::default(),
        }
    }

    /// Changes `fraction` of the tree pages, chosen by hash (the same pages for the same
    /// seed and event number): their bytes (not their links) get a new revision from now
    /// on. Returns the event's number (0 for the first).
    pub fn change_pages(&self, fraction: f64) -> usize {
        self.freshness.change(fraction)
    }

    /// From now on, tree pages change at these rates: each page falls in one class by hash
    /// (in proportion to the shares) and gets a new revision every `period` of its class.
    pub fn set_change_rates(&self, rates: Vec<ChangeRate>) {
        self.freshness.set_rates(rates)
    }

    /// How many times the page at `url` has changed so far (`None`: not a tree page, which
    /// never changes): the ground truth of a recrawl.
    pub fn revision_of(&self, url: &str) -> Option<u32> {
        let node = self.node_of(url)?;
        Some(self.freshness.revision(self.graph.spec.seed, node)?.number)
    }

    /// The rate class (index into [`Web::set_change_rates`]' list) of the page at `url`.
    pub fn change_class_of(&self, url: &str) -> Option<usize> {
        let node = self.node_of(url)?;
        self.freshness.class_of(self.graph.spec.seed, node)
    }

    /// Which validators the host of `url` sends with the `conditional` feature.
    pub fn validators_of(&self, url: &str) -> Option<Validators> {
        let node = self.node_of(url)?;
        Some(Validators::of_host(node.host, self.graph.shapes.len()))
    }

    pub fn spec(&self) -> &WebSpec {
        &self.graph.spec
    }

    pub fn host_count(&self) -> usize {
        self.graph.shapes.len()
    }

    /// Every host's home page, `http://hN.test/`: the seeds for which the ground truth is
    /// order independent.
    pub fn seeds(&self) -> Vec<String> {
        (0..self.graph.hosts())
            .map(|h| self.graph.url(Node::home(h)))
            .collect()
    }

    /// The pages a correct crawler takes on from `seeds` under `rules`. Seeds are parsed
    /// with the `url` crate; seeds that are not pages of this web are ignored.
    pub fn ground_truth(&self, seeds: &[String], rules: &CrawlRules) -> GroundTruth {
        let nodes: Vec<Node> = seeds.iter().filter_map(|s| self.node_of(s)).collect();
        let homes: BTreeSet<Node> = (0..self.graph.hosts()).map(Node::home).collect();
        let given: BTreeSet<Node> = nodes.iter().copied().collect();
        truth::compute(&self.graph, &nodes, rules, given == homes)
    }

    /// The page a URL names (after `Url::parse` canonicalization, fragment ignored).
    fn node_of(&self, url: &str) -> Option<Node> {
        let url = url::Url::parse(url).ok()?;
        if url.scheme() != "http" || url.port().is_some() {
            return None;
        }
        let host = self.graph.host_index(url.host_str()?)?;
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        self.graph
            .route(host, &path)
            .filter(|n| n.page != Page::Robots)
    }

    /// Whether the URL is a page of this web (robots.txt excluded).
    pub fn contains(&self, url: &str) -> bool {
        self.node_of(url).is_some()
    }

    /// The URL of a special page by its path (`"/redirect/loop/a"`), on the host that serves
    /// it; `None` if its feature is off. Private pages (on every host) are given on `h0`.
    pub fn special_url(&self, path: &str) -> Option<String> {
        (0..self.graph.hosts())
            .filter_map(|h| self.graph.route(h, path))
            .find(|n| matches!(n.page, Page::Special(_) | Page::Calendar(_)))
            .map(|n| self.graph.url(n))
    }

    /// Every special page of this web (with its kind).
    pub fn special_pages(&self) -> Vec<(String, PageKind)> {
        let mut out = Vec::new();
        for h in 0..self.graph.hosts() {
            for s in graph::all_specials() {
                let node = Node {
                    host: h,
                    page: Page::Special(s),
                };
                if self.graph.exists(node) {
                    out.push((self.graph.url(node), self.graph.kind(node)));
                }
            }
        }
        out
    }

    /// The layer of a page (= its depth from the home pages).
    pub fn layer_of(&self, url: &str) -> Option<u32> {
        self.node_of(url).map(|n| self.graph.layer(n))
    }

    pub fn kind_of(&self, url: &str) -> Option<PageKind> {
        self.node_of(url).map(|n| self.graph.kind(n))
    }

    /// The links of a page in document order, duplicates included, as canonical URLs; empty
    /// for pages that are not HTML (whatever their body says). For differential tests of the
    /// extractor: a correct extractor run on [`Web::render`]'s body finds exactly these.
    pub fn links_of(&self, url: &str) -> Option<Vec<ExpectedLink>> {
        let node = self.node_of(url)?;
        let head = self.graph.head(node, u32::MAX);
        if head.body != graph::BodyKind::Html && head.body != graph::BodyKind::Big {
            return Some(Vec::new());
        }
        let mut links = Vec::new();
        self.graph.links(node, &mut links);
        Some(
            links
                .iter()
                .map(|l| ExpectedLink {
                    url: self.graph.url(l.target),
                    nofollow: l.rel == Rel::Nofollow,
                })
                .collect(),
        )
    }

    /// The answer to the `attempt`-th request (0-based) for `url`, body included (the big
    /// page is materialized: 11 MiB).
    pub fn render(&self, url: &str, attempt: u32) -> Option<RenderedPage> {
        let node = self.node_of(url)?;
        let head = self.graph.head(node, attempt);
        let body = match head.body {
            graph::BodyKind::Html => {
                let mut links = Vec::new();
                self.graph.links(node, &mut links);
                let mut buf = Vec::new();
                render::html(&self.graph, node, &links, &mut buf);
                buf
            }
            graph::BodyKind::Big => {
                let parts = render::big_parts(node.host, BIG_PAGE_BYTES);
                let mut buf = Vec::with_capacity(BIG_PAGE_BYTES as usize);
                buf.extend_from_slice(&parts.prefix);
                let block = render::filler_block();
                let mut left = parts.filler_len as usize;
                while left > 0 {
                    let take = left.min(block.len());
                    buf.extend_from_slice(&block[..take]);
                    left -= take;
                }
                buf.extend_from_slice(&parts.tail);
                buf
            }
            graph::BodyKind::Fixed(b) => b.to_vec(),
            graph::BodyKind::Message(m) => m.as_bytes().to_vec(),
        };
        Some(RenderedPage {
            status: head.status,
            content_type: head.content_type.to_string(),
            location: head
                .redirect
                .map(|t| server::location(&self.graph, node, t)),
            body,
        })
    }

    /// Every tree page URL of the web (home pages included), host by host.
    pub fn tree_urls(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.spec().pages);
        for (h, shape) in self.graph.shapes.iter().enumerate() {
            for k in 0..shape.pages {
                out.push(self.graph.url(Node {
                    host: h as u32,
                    page: Page::Tree(k),
                }));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::graph::{all_specials, Link, Role, CALENDAR_ENTRY};
    use super::*;

    /// Every node of a web that can be reached (tree pages, specials, calendar near its entry).
    fn all_nodes(web: &Web) -> Vec<Node> {
        let g = &web.graph;
        let mut nodes = Vec::new();
        for h in 0..g.hosts() {
            for k in 0..g.shapes[h as usize].pages {
                nodes.push(Node {
                    host: h,
                    page: Page::Tree(k),
                });
            }
            for s in all_specials() {
                let n = Node {
                    host: h,
                    page: Page::Special(s),
                };
                if g.exists(n) {
                    nodes.push(n);
                }
            }
        }
        for m in CALENDAR_ENTRY - 30..CALENDAR_ENTRY + 30 {
            let n = Node {
                host: g.trap_host(),
                page: Page::Calendar(m),
            };
            if g.exists(n) {
                nodes.push(n);
            }
        }
        nodes
    }

    fn is_ancestor(g: &Graph, ancestor: Node, mut node: Node) -> bool {
        while let Some(p) = g.tree_parent(node) {
            if p == ancestor {
                return true;
            }
            node = p;
        }
        false
    }

    /// The structural property the ground truth's exactness rests on, checked link by link.
    fn check_layered(web: &Web) {
        let g = &web.graph;
        let mut links: Vec<Link> = Vec::new();
        for node in all_nodes(web) {
            links.clear();
            g.links(node, &mut links);
            let layer = g.layer(node);
            for link in &links {
                let t = link.target;
                assert!(g.exists(t), "{node:?} links to missing {t:?}");
                let tl = g.layer(t);
                assert!(
                    tl <= layer + 1,
                    "{node:?} (layer {layer}) → {t:?} (layer {tl})"
                );
                match link.role {
                    Role::Forward => {
                        assert_eq!(tl, layer + 1, "{node:?} → {t:?}");
                        // Forward links into a closed page come only from its tree parent.
                        if let Page::Tree(k) | Page::TreeVariant(k, _) = t.page {
                            assert!(
                                g.is_open(t.host, k) || g.tree_parent(t) == Some(node),
                                "{node:?} → closed {t:?}"
                            );
                        } else {
                            assert_eq!(g.tree_parent(t), Some(node), "{node:?} → {t:?}");
                        }
                    }
                    Role::Home => assert_eq!(t.page, Page::Tree(0)),
                    Role::Ancestor => {
                        assert!(tl < layer && is_ancestor(g, t, node), "{node:?} → {t:?}");
                        // Every page strictly between the ancestor and the source is closed.
                        let mut n = node;
                        while n != t {
                            if let Page::Tree(k) = n.page {
                                assert!(
                                    !g.is_open(n.host, k),
                                    "{node:?} → {t:?} through open {n:?}"
                                );
                            }
                            n = g.tree_parent(n).unwrap_or(t);
                        }
                    }
                    Role::Sibling => {
                        assert_eq!(tl, layer);
                        assert_eq!(g.tree_parent(t), g.tree_parent(node));
                        if let Page::Tree(k) = node.page {
                            assert!(!g.is_open(node.host, k));
                        }
                    }
                }
            }
            // Redirect targets keep the layer (or are home pages, already discovered).
            if let Some(t) = g.head(node, 0).redirect {
                assert!(
                    g.layer(t) == layer || t.page == Page::Tree(0),
                    "{node:?} redirects to {t:?}"
                );
            }
        }
    }

    #[test]
    fn small_web_is_layered() {
        check_layered(&Web::new(WebSpec::small(7)));
        check_layered(&Web::new(WebSpec::small(8)));
    }

    #[test]
    fn advanced_variants_are_layered() {
        let mut spec = WebSpec::small(9);
        spec.features.advanced_variants = true;
        let web = Web::new(spec);
        check_layered(&web);
        let variant_links = web
            .tree_urls()
            .iter()
            .flat_map(|u| web.links_of(u).unwrap_or_default())
            .filter(|l| web.kind_of(&l.url) == Some(PageKind::Variant))
            .count();
        assert!(variant_links > 100, "{variant_links}");
    }

    #[test]
    fn odd_shapes_are_layered() {
        for (hosts, pages) in [(1, 1), (1, 50), (2, 3), (3, 1000), (7, 40)] {
            check_layered(&Web::new(WebSpec {
                hosts,
                pages,
                ..WebSpec::small(hosts as u64)
            }));
        }
    }

    #[test]
    fn features_parse() {
        assert_eq!(Features::parse("all").unwrap(), Features::all());
        assert_eq!(Features::parse("").unwrap(), Features::none());
        let f = Features::parse("all,-big,too-slow").unwrap();
        assert!(!f.big && f.too_slow && f.trap);
        assert_eq!(
            Features::parse("redirects,bogus"),
            Err(UnknownFeature("bogus".into()))
        );
    }

    #[test]
    fn special_urls_are_found() {
        let web = Web::new(WebSpec::small(1));
        assert_eq!(
            web.special_url("/redirect/loop/a").as_deref(),
            Some("http://h1.test/redirect/loop/a")
        );
        assert_eq!(
            web.special_url("/redirect/landing").as_deref(),
            Some("http://h2.test/redirect/landing")
        );
        assert_eq!(
            web.special_url("/calendar/2026/11").as_deref(),
            Some("http://h1.test/calendar/2026/11")
        );
        assert_eq!(
            web.special_url("/private/page").as_deref(),
            Some("http://h0.test/private/page")
        );
        assert!(web.special_url("/slow/too-slow").is_none());
        assert!(web.contains("HTTP://H3.TEST:80/p/./1#frag"));
        assert!(!web.contains("http://h3.test/p/01"));
    }
}
