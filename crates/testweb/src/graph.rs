//! The generated link graph: which pages exist, where they live, what they link to and how
//! the server answers for each of them.
//!
//! Nothing here stores the graph. A page is a [`Node`] (host index + [`Page`]); its links and
//! its reply are pure functions of the [`WebSpec`] and the node, so the server and the ground
//! truth are guaranteed to see the same web, and a 30,000-page web costs no memory.

use std::time::Duration;

use super::robots;
use super::{Features, WebSpec};

/// Delay of the slow page: well under any sane crawler timeout, long enough to be seen in the
/// request log.
pub const SLOW_DELAY: Duration = Duration::from_millis(300);
/// Delay of the opt-in "too slow" page: longer than any timeout a test would configure.
pub const TOO_SLOW_DELAY: Duration = Duration::from_secs(60);
/// Size of the big page: above the crawler's default 10 MiB body cap.
pub const BIG_PAGE_BYTES: u64 = 11 * 1024 * 1024;
/// Number of hops in the long redirect chain (`/redirect/long/0` … `/redirect/long/11`, then
/// `/redirect/long/end`): more than any default `max_redirects`.
pub const LONG_CHAIN_HOPS: u8 = 12;
/// The calendar trap starts at November 2026 (month index counted from January of year 1).
pub const CALENDAR_ENTRY: u32 = (2026 - 1) * 12 + 10;
/// Months beyond year 9999 do not exist, which keeps the trap finite for a BFS with an
/// enormous `max_depth` while staying "endless" for any real crawl.
pub const CALENDAR_MONTHS: u32 = 9999 * 12;

/// One page of the web: a host index and a page on it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Node {
    pub host: u32,
    pub page: Page,
}

impl Node {
    pub fn home(host: u32) -> Node {
        Node {
            host,
            page: Page::Tree(0),
        }
    }
}

/// A page on one host.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Page {
    /// Page `k` of the host's tree, numbered like a heap: 0 is the home page `/`, the others
    /// are `/p/{k}`.
    Tree(u32),
    /// A month of the calendar trap, as a month index (`/calendar/{year}/{month:02}`).
    Calendar(u32),
    Special(Special),
    /// Another spelling of tree page `k` that only full normalization folds into
    /// `/p/{k}`: see [`ADVANCED_VARIANTS`]. Same answer and body as `/p/{k}`.
    TreeVariant(u32, u8),
    /// `/robots.txt`: served, never linked, not part of the ground truth's pages.
    Robots,
}

/// Query strings (or the percent-encoded path) of the advanced variants of `/p/{k}`, as the
/// `url` crate spells them (it keeps all of these): tracking parameters, a click id, an empty
/// query, a session id, and `%70` for `p`.
pub const ADVANCED_VARIANTS: &[&str] = &[
    "?utm_source=testweb&utm_medium=link",
    "?gclid=abc123",
    "?",
    "?jsessionid=0123abcd",
    "%70",
];

/// The special pages hung on known hosts at known layers (see the module doc of `testweb`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Special {
    ChainStart,
    ChainStep2,
    ChainStep3,
    ChainEnd,
    ChainEndChild,
    LoopA,
    LoopB,
    SelfLoop,
    Long(u8),
    LongEnd,
    Offsite,
    Landing,
    ToTree,
    NotFound,
    Gone,
    ServerError,
    Flaky503,
    Flaky503Child,
    Flaky429,
    Flaky429Child,
    Slow,
    SlowChild,
    TooSlow,
    Big,
    BeyondCap,
    Png,
    Pdf,
    Text,
    Xhtml,
    XhtmlChild,
    HiddenInFiles,
    NofollowA,
    NofollowB,
    Lookalike,
    MetaNofollow,
    MetaNofollowChild,
    HeaderNofollow,
    HeaderNofollowChild,
    PrivatePage,
    PrivateOpen,
    PrivateDoc,
    AfterPrivatePage,
    AfterPrivateOpen,
    AfterPrivateDoc,
    DecoyComment,
    DecoyScript,
    DecoyStyle,
    DecoyTextarea,
    Frameset,
    FrameLeft,
    FrameRight,
}

/// Every special page with a fixed path (the `Long(n)` steps are handled apart).
const SPECIAL_PATHS: &[(Special, &str)] = &[
    (Special::ChainStart, "/redirect/chain/1"),
    (Special::ChainStep2, "/redirect/chain/2"),
    (Special::ChainStep3, "/redirect/chain/3"),
    (Special::ChainEnd, "/redirect/chain/end"),
    (Special::ChainEndChild, "/redirect/chain/end-child"),
    (Special::LoopA, "/redirect/loop/a"),
    (Special::LoopB, "/redirect/loop/b"),
    (Special::SelfLoop, "/redirect/self"),
    (Special::LongEnd, "/redirect/long/end"),
    (Special::Offsite, "/redirect/offsite"),
    (Special::Landing, "/redirect/landing"),
    (Special::ToTree, "/redirect/to-tree"),
    (Special::NotFound, "/error/404"),
    (Special::Gone, "/error/410"),
    (Special::ServerError, "/error/500"),
    (Special::Flaky503, "/error/503-then-ok"),
    (Special::Flaky503Child, "/error/503-then-ok/child"),
    (Special::Flaky429, "/error/429-then-ok"),
    (Special::Flaky429Child, "/error/429-then-ok/child"),
    (Special::Slow, "/slow/page"),
    (Special::SlowChild, "/slow/child"),
    (Special::TooSlow, "/slow/too-slow"),
    (Special::Big, "/big/page"),
    (Special::BeyondCap, "/big/beyond-cap"),
    (Special::Png, "/files/image.png"),
    (Special::Pdf, "/files/doc.pdf"),
    (Special::Text, "/files/notes.txt"),
    (Special::Xhtml, "/files/page.xhtml"),
    (Special::XhtmlChild, "/files/xhtml-child"),
    (Special::HiddenInFiles, "/files/hidden"),
    (Special::NofollowA, "/nofollow/a"),
    (Special::NofollowB, "/nofollow/b"),
    (Special::Lookalike, "/nofollow/lookalike"),
    (Special::MetaNofollow, "/nofollow/meta"),
    (Special::MetaNofollowChild, "/nofollow/meta-child"),
    (Special::HeaderNofollow, "/nofollow/header"),
    (Special::HeaderNofollowChild, "/nofollow/header-child"),
    (Special::PrivatePage, "/private/page"),
    (Special::PrivateOpen, "/private/open"),
    (Special::PrivateDoc, "/private/doc.html"),
    (Special::AfterPrivatePage, "/after-private/page"),
    (Special::AfterPrivateOpen, "/after-private/open"),
    (Special::AfterPrivateDoc, "/after-private/doc"),
    (Special::DecoyComment, "/decoy/comment"),
    (Special::DecoyScript, "/decoy/script"),
    (Special::DecoyStyle, "/decoy/style"),
    (Special::DecoyTextarea, "/decoy/textarea"),
    (Special::Frameset, "/frames/index"),
    (Special::FrameLeft, "/frames/left"),
    (Special::FrameRight, "/frames/right"),
];

/// Every special page, for enumeration in tests and in `Web::special_pages`.
pub fn all_specials() -> impl Iterator<Item = Special> {
    SPECIAL_PATHS
        .iter()
        .map(|(s, _)| *s)
        .chain((0..LONG_CHAIN_HOPS).map(Special::Long))
}

/// Which kind of page a URL is; coarse, for tests that count or filter.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum PageKind {
    Home,
    Tree,
    /// Answers 3xx.
    Redirect,
    /// Answers 404, 410 or a permanent 500.
    Error,
    /// Answers 503 or 429 to its first request, 200 afterwards.
    Flaky,
    Slow,
    TooSlow,
    Big,
    NonHtml,
    Trap,
    /// An advanced-variant spelling of a tree page (a distinct URL unless fully normalized).
    Variant,
    /// Every other special HTML page (redirect ends, children of special pages, nofollow
    /// targets, robots-private pages, decoys, frames).
    Special,
}

/// How the tag carrying a link says `rel`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rel {
    None,
    /// `rel` contains the token `nofollow` (spelled in various cases).
    Nofollow,
    /// `rel` contains a token that merely starts with "nofollow" (`nofollowme`): followed.
    Lookalike,
}

/// Why a link exists; lets the layered-property test check every link.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Target is on the next layer.
    Forward,
    /// Target is a tree ancestor reached through closed pages only.
    Ancestor,
    /// Target shares the source's tree parent; the source is closed.
    Sibling,
    /// Target is a home page (a seed).
    Home,
}

/// The HTML element carrying a link.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tag {
    A,
    Area,
    Iframe,
    Frame,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Link {
    pub target: Node,
    pub rel: Rel,
    pub role: Role,
    pub tag: Tag,
}

impl Link {
    fn new(target: Node, role: Role) -> Link {
        Link {
            target,
            rel: Rel::None,
            role,
            tag: Tag::A,
        }
    }
}

/// What the server does for one request; `attempt` counts earlier requests for the same URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub content_type: &'static str,
    /// For 3xx: the node the `Location` header points to.
    pub redirect: Option<Node>,
    pub delay: Option<Duration>,
    /// An `X-Robots-Tag` header to send.
    pub x_robots_tag: Option<&'static str>,
    pub body: BodyKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// Generated HTML with this node's links.
    Html,
    /// The streamed big page.
    Big,
    /// A fixed body.
    Fixed(&'static [u8]),
    /// A short plain-text message (errors, redirects).
    Message(&'static str),
}

pub const HTML: &str = "text/html; charset=utf-8";
const PLAIN: &str = "text/plain; charset=utf-8";

/// Shape of one host's tree.
#[derive(Clone, Debug)]
pub struct HostShape {
    pub pages: u32,
    pub branching: u32,
    /// `layer_start[l]` is the first page index of layer `l`; the last entry is ≥ `pages`.
    pub layer_start: Vec<u32>,
}

impl HostShape {
    fn new(pages: u32) -> HostShape {
        let pages = pages.max(1);
        // The smallest branching that fits the host into layers 0..=4 keeps the depth of
        // every web modest (4 for the bench, 3 or 4 for the small web) while leaving
        // enough pages per layer for cross-links.
        let mut branching = 2u64;
        while (0..=4).map(|l| branching.pow(l)).sum::<u64>() < u64::from(pages) {
            branching += 1;
        }
        let branching = branching as u32;
        let mut layer_start = vec![0u32];
        let mut width = 1u64;
        let mut next = 0u64;
        while next < u64::from(pages) {
            next += width;
            layer_start.push(next.min(u64::from(u32::MAX)) as u32);
            width *= u64::from(branching);
        }
        HostShape {
            pages,
            branching,
            layer_start,
        }
    }

    pub fn layer(&self, k: u32) -> u32 {
        // layer_start is sorted; the layer is the last start ≤ k.
        (self.layer_start.partition_point(|&s| s <= k) - 1) as u32
    }

    pub fn parent(&self, k: u32) -> Option<u32> {
        (k > 0).then(|| (k - 1) / self.branching)
    }

    pub fn children(&self, k: u32) -> std::ops::Range<u32> {
        let first = u64::from(k) * u64::from(self.branching) + 1;
        let end = (first + u64::from(self.branching)).min(u64::from(self.pages));
        let first = first.min(end);
        first as u32..end as u32
    }

    /// Page indexes of layer `l` (empty when the host is not that deep).
    pub fn layer_range(&self, l: u32) -> std::ops::Range<u32> {
        let l = l as usize;
        if l + 1 >= self.layer_start.len() {
            return 0..0;
        }
        self.layer_start[l]..self.layer_start[l + 1].min(self.pages)
    }

    #[cfg(test)]
    pub fn depth(&self) -> u32 {
        self.layer(self.pages - 1)
    }
}

/// splitmix64's finalizer: a good, dependency-free, forever-stable mix, so that a seed means
/// the same web in every version of every dependency.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn hash4(seed: u64, tag: u64, a: u64, b: u64) -> u64 {
    mix(seed ^ mix(tag ^ mix(a ^ mix(b.wrapping_add(0x9e37_79b9_7f4a_7c15)))))
}

/// A tiny deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(state: u64) -> Rng {
        Rng(state)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in `0..n`; `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

const TAG_OPEN: u64 = 1;
const TAG_LINKS: u64 = 2;

/// The part of `Web` the graph functions need; `Web` in `mod.rs` wraps it.
#[derive(Clone, Debug)]
pub struct Graph {
    pub spec: WebSpec,
    pub shapes: Vec<HostShape>,
}

impl Graph {
    pub fn new(spec: WebSpec) -> Graph {
        let hosts = spec.hosts.max(1);
        let per_host = spec.pages / hosts;
        let extra = spec.pages % hosts;
        let shapes = (0..hosts)
            .map(|h| {
                let n = per_host + usize::from(h < extra);
                HostShape::new(u32::try_from(n).unwrap_or(u32::MAX))
            })
            .collect();
        Graph { spec, shapes }
    }

    pub fn hosts(&self) -> u32 {
        self.shapes.len() as u32
    }

    fn features(&self) -> &Features {
        &self.spec.features
    }

    fn host_mod(&self, i: u32) -> u32 {
        i % self.hosts()
    }

    /// A tree page other than home is *open* when it may receive cross-links from any page of
    /// the previous layer; a *closed* page is linked forward only by its tree parent, so its
    /// parent (and its siblings) are certainly discovered before it is parsed, which is what
    /// makes its back-links safe.
    pub fn is_open(&self, host: u32, k: u32) -> bool {
        k != 0 && hash4(self.spec.seed, TAG_OPEN, u64::from(host), u64::from(k)) & 1 == 0
    }

    /// Whether the node exists (is routable) in this web.
    pub fn exists(&self, node: Node) -> bool {
        let Some(shape) = self.shapes.get(node.host as usize) else {
            return false;
        };
        match node.page {
            Page::Tree(k) => k < shape.pages,
            Page::TreeVariant(k, v) => {
                self.features().advanced_variants
                    && k > 0
                    && k < shape.pages
                    && usize::from(v) < ADVANCED_VARIANTS.len()
            }
            Page::Calendar(m) => {
                self.features().trap && node.host == self.trap_host() && m < CALENDAR_MONTHS
            }
            Page::Special(s) => self.special_on_host(s, node.host),
            Page::Robots => true,
        }
    }

    pub fn trap_host(&self) -> u32 {
        self.host_mod(1)
    }

    /// The host a special page lives on when its feature is on (`None` when off). Private
    /// pages live on every host, so they are answered by `special_on_host`.
    pub fn special_host(&self, s: Special) -> Option<u32> {
        use Special::*;
        let f = self.features();
        let (on, host) = match s {
            ChainStart | ChainStep2 | ChainStep3 | ChainEnd | ChainEndChild | LoopA | LoopB
            | SelfLoop | Long(_) | LongEnd | Offsite | ToTree => (f.redirects, 1),
            Landing => (f.redirects, 2),
            NotFound | Gone | ServerError | Flaky503 | Flaky503Child | Flaky429 | Flaky429Child => {
                (f.errors, 2)
            }
            Slow | SlowChild => (f.slow, 3),
            TooSlow => (f.slow && f.too_slow, 3),
            Big | BeyondCap => (f.big, 4),
            Png | Pdf | Text | Xhtml | XhtmlChild | HiddenInFiles => (f.non_html, 0),
            NofollowA | NofollowB | Lookalike => (f.nofollow, 2),
            MetaNofollow | MetaNofollowChild | HeaderNofollow | HeaderNofollowChild => {
                (f.meta_robots, 2)
            }
            PrivatePage | PrivateOpen | PrivateDoc | AfterPrivatePage | AfterPrivateOpen
            | AfterPrivateDoc => (f.robots, 0),
            DecoyComment | DecoyScript | DecoyStyle | DecoyTextarea | Frameset | FrameLeft
            | FrameRight => (f.variants, 0),
        };
        on.then(|| self.host_mod(host))
    }

    pub fn special_on_host(&self, s: Special, host: u32) -> bool {
        if is_private(s) {
            return self.features().robots && host < self.hosts();
        }
        self.special_host(s) == Some(host)
    }

    /// The layer of a node: its depth from its host's home page along generated links, which
    /// is its crawl depth when all home pages are seeds.
    pub fn layer(&self, node: Node) -> u32 {
        match node.page {
            Page::Tree(k) | Page::TreeVariant(k, _) => self.shapes[node.host as usize].layer(k),
            Page::Calendar(m) => 1 + m.abs_diff(CALENDAR_ENTRY),
            Page::Special(s) => special_layer(s),
            Page::Robots => 0,
        }
    }

    /// The node whose links discover this one (for redirect targets: the redirecting page).
    #[cfg(test)]
    pub fn tree_parent(&self, node: Node) -> Option<Node> {
        use Special::*;
        let at = |page| {
            Some(Node {
                host: node.host,
                page,
            })
        };
        match node.page {
            Page::Tree(k) | Page::TreeVariant(k, _) => {
                self.shapes[node.host as usize].parent(k).map(|p| Node {
                    host: node.host,
                    page: Page::Tree(p),
                })
            }
            Page::Calendar(m) => {
                if m == CALENDAR_ENTRY {
                    Some(Node::home(node.host))
                } else if m > CALENDAR_ENTRY {
                    at(Page::Calendar(m - 1))
                } else {
                    at(Page::Calendar(m + 1))
                }
            }
            Page::Special(s) => match s {
                ChainStep2 => at(Page::Special(ChainStart)),
                ChainStep3 => at(Page::Special(ChainStep2)),
                ChainEnd => at(Page::Special(ChainStep3)),
                ChainEndChild => at(Page::Special(ChainEnd)),
                LoopB => at(Page::Special(LoopA)),
                Long(0) => Some(Node::home(node.host)),
                Long(n) => at(Page::Special(Long(n - 1))),
                LongEnd => at(Page::Special(Long(LONG_CHAIN_HOPS - 1))),
                Landing => Some(Node {
                    host: self.special_host(Offsite).unwrap_or(0),
                    page: Page::Special(Offsite),
                }),
                Flaky503Child => at(Page::Special(Flaky503)),
                Flaky429Child => at(Page::Special(Flaky429)),
                SlowChild => at(Page::Special(Slow)),
                BeyondCap => at(Page::Special(Big)),
                XhtmlChild => at(Page::Special(Xhtml)),
                HiddenInFiles => at(Page::Special(Text)),
                AfterPrivatePage => at(Page::Special(PrivatePage)),
                AfterPrivateOpen => at(Page::Special(PrivateOpen)),
                AfterPrivateDoc => at(Page::Special(PrivateDoc)),
                FrameLeft | FrameRight => at(Page::Special(Frameset)),
                MetaNofollowChild => at(Page::Special(MetaNofollow)),
                HeaderNofollowChild => at(Page::Special(HeaderNofollow)),
                _ => Some(Node::home(node.host)),
            },
            Page::Robots => None,
        }
    }

    pub fn kind(&self, node: Node) -> PageKind {
        use Special::*;
        match node.page {
            Page::Tree(0) => PageKind::Home,
            Page::Tree(_) => PageKind::Tree,
            Page::TreeVariant(..) => PageKind::Variant,
            Page::Calendar(_) => PageKind::Trap,
            Page::Robots => PageKind::Special,
            Page::Special(s) => match s {
                ChainStart | ChainStep2 | ChainStep3 | LoopA | LoopB | SelfLoop | Long(_)
                | Offsite | ToTree => PageKind::Redirect,
                NotFound | Gone | ServerError => PageKind::Error,
                Flaky503 | Flaky429 => PageKind::Flaky,
                Slow => PageKind::Slow,
                TooSlow => PageKind::TooSlow,
                Big => PageKind::Big,
                Png | Pdf | Text => PageKind::NonHtml,
                _ => PageKind::Special,
            },
        }
    }

    // ---------------------------------------------------------------- URLs and routing

    pub fn host_name(host: u32) -> String {
        format!("h{host}.test")
    }

    /// The canonical URL, exactly as `Url::parse(..).to_string()` spells it.
    pub fn url(&self, node: Node) -> String {
        let mut s = String::with_capacity(40);
        s.push_str("http://h");
        push_u32_str(&mut s, node.host);
        s.push_str(".test");
        self.push_path(&mut s, node.page);
        s
    }

    pub fn push_path(&self, s: &mut String, page: Page) {
        match page {
            Page::Tree(0) => s.push('/'),
            Page::Tree(k) => {
                s.push_str("/p/");
                push_u32_str(s, k);
            }
            Page::Calendar(m) => {
                s.push_str("/calendar/");
                push_u32_str(s, m / 12 + 1);
                s.push('/');
                let month = m % 12 + 1;
                if month < 10 {
                    s.push('0');
                }
                push_u32_str(s, month);
            }
            Page::Special(Special::Long(n)) => {
                s.push_str("/redirect/long/");
                push_u32_str(s, u32::from(n));
            }
            Page::Special(sp) => s.push_str(special_path(sp)),
            Page::TreeVariant(k, v) => {
                let variant = ADVANCED_VARIANTS
                    .get(usize::from(v))
                    .copied()
                    .unwrap_or("?");
                if variant.starts_with('?') {
                    s.push_str("/p/");
                    push_u32_str(s, k);
                    s.push_str(variant);
                } else {
                    s.push('/');
                    s.push_str(variant);
                    s.push('/');
                    push_u32_str(s, k);
                }
            }
            Page::Robots => s.push_str("/robots.txt"),
        }
    }

    pub fn path(&self, page: Page) -> String {
        let mut s = String::with_capacity(24);
        self.push_path(&mut s, page);
        s
    }

    /// Maps a request's `Host` header value (any case, port ignored) to a host index.
    pub fn host_index(&self, host_header: &str) -> Option<u32> {
        let name = match host_header.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host_header,
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        let bytes = name.as_bytes();
        if bytes.len() < 7 || !bytes[0].eq_ignore_ascii_case(&b'h') {
            return None;
        }
        // Compare bytes first: only once the ends are known ASCII is slicing the str safe
        // (the header comes from outside and need not be ASCII).
        if !bytes[bytes.len() - 5..].eq_ignore_ascii_case(b".test") {
            return None;
        }
        let host = parse_decimal(name.get(1..name.len() - 5)?)?;
        (host < self.hosts()).then_some(host)
    }

    /// Maps a request target (path and query, exactly as requested) to a node. Only exact
    /// canonical spellings are routed: a crawler that requests `/p/./12` or `/p/012` has a
    /// normalization bug, and the 404 it gets shows up in the request log.
    pub fn route(&self, host: u32, path_and_query: &str) -> Option<Node> {
        if let Some(node) = self.route_variant(host, path_and_query) {
            return Some(node);
        }
        let page = if path_and_query == "/" {
            Page::Tree(0)
        } else if path_and_query == "/robots.txt" {
            Page::Robots
        } else if let Some(k) = path_and_query.strip_prefix("/p/") {
            Page::Tree(parse_decimal(k).filter(|&k| k > 0)?)
        } else if let Some(rest) = path_and_query.strip_prefix("/calendar/") {
            let (year, month) = rest.split_once('/')?;
            let year = parse_decimal(year).filter(|y| (1..=9999).contains(y))?;
            if month.len() != 2 {
                return None;
            }
            let month = month
                .parse::<u32>()
                .ok()
                .filter(|m| (1..=12).contains(m) && month.bytes().all(|b| b.is_ascii_digit()))?;
            Page::Calendar((year - 1) * 12 + month - 1)
        } else if let Some(n) = path_and_query.strip_prefix("/redirect/long/") {
            if n == "end" {
                Page::Special(Special::LongEnd)
            } else {
                let n = parse_decimal(n).filter(|&n| n < u32::from(LONG_CHAIN_HOPS))?;
                Page::Special(Special::Long(n as u8))
            }
        } else {
            let s = SPECIAL_PATHS
                .iter()
                .find(|(_, p)| *p == path_and_query)
                .map(|(s, _)| *s)?;
            Page::Special(s)
        };
        let node = Node { host, page };
        self.exists(node).then_some(node)
    }

    fn route_variant(&self, host: u32, path_and_query: &str) -> Option<Node> {
        if !self.features().advanced_variants {
            return None;
        }
        let (k, v) = if let Some(rest) = path_and_query.strip_prefix("/p/") {
            let at = rest.find('?')?;
            let v = ADVANCED_VARIANTS.iter().position(|q| *q == &rest[at..])?;
            (parse_decimal(&rest[..at])?, v)
        } else {
            let rest = path_and_query.strip_prefix('/')?;
            let (enc, k) = rest.split_once('/')?;
            let v = ADVANCED_VARIANTS.iter().position(|q| *q == enc)?;
            (parse_decimal(k)?, v)
        };
        let node = Node {
            host,
            page: Page::TreeVariant(k, v as u8),
        };
        self.exists(node).then_some(node)
    }

    /// The node whose page content a node serves (a variant serves its tree page's).
    pub fn content_node(&self, node: Node) -> Node {
        match node.page {
            Page::TreeVariant(k, _) => Node {
                host: node.host,
                page: Page::Tree(k),
            },
            _ => node,
        }
    }

    // ---------------------------------------------------------------- links

    /// The links of an HTML page, in document order, duplicates included; empty for pages
    /// that are not HTML. The server renders exactly these; the ground truth follows them.
    pub fn links(&self, node: Node, out: &mut Vec<Link>) {
        use Special::*;
        let host = node.host;
        let at = |page| Node { host, page };
        let home = Link::new(Node::home(host), Role::Home);
        match node.page {
            Page::Tree(k) | Page::TreeVariant(k, _) => self.tree_links(host, k, out),
            Page::Calendar(m) => {
                out.push(home);
                for next in [m.checked_sub(1), m.checked_add(1)].into_iter().flatten() {
                    if next < CALENDAR_MONTHS {
                        let role = if next.abs_diff(CALENDAR_ENTRY) > m.abs_diff(CALENDAR_ENTRY) {
                            Role::Forward
                        } else {
                            Role::Ancestor
                        };
                        out.push(Link::new(at(Page::Calendar(next)), role));
                    }
                }
                // The same months again: a trap page is full of duplicate navigation.
                let again: Vec<Link> = out[1..].to_vec();
                out.extend(again);
            }
            Page::Special(s) => {
                let start = out.len();
                out.push(home);
                let child = match s {
                    ChainEnd => Some(ChainEndChild),
                    Flaky503 => Some(Flaky503Child),
                    Flaky429 => Some(Flaky429Child),
                    Slow => Some(SlowChild),
                    Xhtml => Some(XhtmlChild),
                    PrivatePage => Some(AfterPrivatePage),
                    PrivateOpen => Some(AfterPrivateOpen),
                    PrivateDoc => Some(AfterPrivateDoc),
                    MetaNofollow => Some(MetaNofollowChild),
                    HeaderNofollow => Some(HeaderNofollowChild),
                    // The big page: home in its first bytes, this one in its last bytes.
                    Big => Some(BeyondCap),
                    _ => None,
                };
                if let Some(child) = child {
                    out.push(Link::new(at(Page::Special(child)), Role::Forward));
                }
                if s == Frameset {
                    // A frameset document has no body: only the frames are links.
                    out.truncate(start);
                    for f in [FrameLeft, FrameRight] {
                        out.push(Link {
                            tag: Tag::Frame,
                            ..Link::new(at(Page::Special(f)), Role::Forward)
                        });
                    }
                }
            }
            Page::Robots => {}
        }
    }

    fn tree_links(&self, host: u32, k: u32, out: &mut Vec<Link>) {
        let shape = &self.shapes[host as usize];
        let hosts = u64::from(self.hosts());
        let target_total = self.spec.links_per_page.max(1);
        let start = out.len();
        let mut rng = Rng::new(hash4(
            self.spec.seed,
            TAG_LINKS,
            u64::from(host),
            u64::from(k),
        ));
        let tree = |k| Node {
            host,
            page: Page::Tree(k),
        };

        // Navigation first, like a real site header.
        out.push(Link::new(Node::home(host), Role::Home));
        for c in shape.children(k) {
            out.push(Link::new(tree(c), Role::Forward));
        }
        if k != 0 && !self.is_open(host, k) {
            // Breadcrumbs: ancestors up to the first open one (inclusive), since an open
            // page's own ancestors may still be undiscovered when it is parsed.
            let mut a = k;
            while let Some(p) = shape.parent(a) {
                if p != 0 {
                    out.push(Link::new(tree(p), Role::Ancestor));
                }
                if p == 0 || self.is_open(host, p) {
                    break;
                }
                a = p;
            }
            if let Some(p) = shape.parent(k) {
                let siblings = shape.children(p);
                let count = siblings.len() as u64;
                for _ in 0..3.min(count.saturating_sub(1)) {
                    let s = siblings.start + rng.below(count) as u32;
                    if s != k {
                        out.push(Link::new(tree(s), Role::Sibling));
                    }
                }
            }
        }
        // Other hosts' home pages: cycles across hosts.
        if hosts > 1 {
            for _ in 0..(target_total / 10).max(1) {
                let h = rng.below(hosts) as u32;
                out.push(Link::new(Node::home(h), Role::Home));
            }
        }
        // Cross-links to open pages of the next layer, on any host.
        let next_layer = shape.layer(k) + 1;
        for _ in 0..target_total / 4 {
            let h = rng.below(hosts) as u32;
            let range = self.shapes[h as usize].layer_range(next_layer);
            if range.is_empty() {
                continue;
            }
            let width = u64::from(range.end - range.start);
            for _ in 0..4 {
                let c = range.start + rng.below(width) as u32;
                if self.is_open(h, c) {
                    out.push(Link::new(
                        Node {
                            host: h,
                            page: Page::Tree(c),
                        },
                        Role::Forward,
                    ));
                    break;
                }
            }
        }
        let unique_end = out.len();
        if k == 0 {
            self.home_special_links(host, out);
        }
        // Fill up with duplicates of the ordinary links; with the nofollow feature some
        // duplicates say rel=nofollow, which must change nothing since the same target is
        // also linked plainly.
        let ordinary = (unique_end - start) as u64;
        while out.len() - start < target_total {
            let mut link = out[start + rng.below(ordinary) as usize];
            if self.features().nofollow && rng.below(8) == 0 {
                link.rel = Rel::Nofollow;
            }
            // Advanced variants only replace duplicates of forward links, so a variant URL is
            // linked only by pages of its page's previous layer, like the page itself: its
            // first discovery is at the page's depth in any crawl order.
            if let (true, Role::Forward, Page::Tree(c)) = (
                self.features().advanced_variants,
                link.role,
                link.target.page,
            ) {
                if c > 0 && rng.below(4) == 0 {
                    let v = rng.below(ADVANCED_VARIANTS.len() as u64) as u8;
                    link.target.page = Page::TreeVariant(c, v);
                }
            }
            out.push(link);
        }
        if self.features().variants {
            // Some links through other tags than <a>.
            for link in out[start..].iter_mut().filter(|l| l.rel == Rel::None) {
                link.tag = match rng.below(32) {
                    0 | 1 => Tag::Area,
                    2 => Tag::Iframe,
                    _ => Tag::A,
                };
            }
        }
    }

    fn home_special_links(&self, host: u32, out: &mut Vec<Link>) {
        use Special::*;
        let entries = [
            ChainStart,
            LoopA,
            SelfLoop,
            Long(0),
            Offsite,
            ToTree,
            NotFound,
            Gone,
            ServerError,
            Flaky503,
            Flaky429,
            Slow,
            TooSlow,
            Big,
            Png,
            Pdf,
            Text,
            Xhtml,
            NofollowA,
            NofollowB,
            Lookalike,
            MetaNofollow,
            HeaderNofollow,
            PrivatePage,
            PrivateOpen,
            PrivateDoc,
            Frameset,
        ];
        for s in entries {
            if self.special_on_host(s, host) {
                let rel = match s {
                    NofollowA | NofollowB => Rel::Nofollow,
                    Lookalike => Rel::Lookalike,
                    _ => Rel::None,
                };
                out.push(Link {
                    rel,
                    ..Link::new(
                        Node {
                            host,
                            page: Page::Special(s),
                        },
                        Role::Forward,
                    )
                });
            }
        }
        if self.features().trap && host == self.trap_host() {
            out.push(Link::new(
                Node {
                    host,
                    page: Page::Calendar(CALENDAR_ENTRY),
                },
                Role::Forward,
            ));
        }
    }

    // ---------------------------------------------------------------- replies

    /// The server's answer to the `attempt`-th request (0-based) for `node`. Only the flaky
    /// pages and the flaky robots.txt depend on `attempt`.
    pub fn head(&self, node: Node, attempt: u32) -> Head {
        use Special::*;
        let html = Head {
            status: 200,
            content_type: HTML,
            redirect: None,
            delay: None,
            x_robots_tag: None,
            body: BodyKind::Html,
        };
        let message = |status, text| Head {
            status,
            content_type: PLAIN,
            redirect: None,
            delay: None,
            x_robots_tag: None,
            body: BodyKind::Message(text),
        };
        let redirect = |status, page| Head {
            status,
            content_type: PLAIN,
            redirect: Some(Node {
                host: node.host,
                page,
            }),
            delay: None,
            x_robots_tag: None,
            body: BodyKind::Message("moved\n"),
        };
        let fixed = |content_type, body| Head {
            status: 200,
            content_type,
            redirect: None,
            delay: None,
            x_robots_tag: None,
            body: BodyKind::Fixed(body),
        };
        match node.page {
            Page::Tree(_) | Page::TreeVariant(..) | Page::Calendar(_) => html,
            Page::Robots => robots::head(self, node.host, attempt),
            Page::Special(s) => match s {
                ChainStart => redirect(301, Page::Special(ChainStep2)),
                ChainStep2 => redirect(302, Page::Special(ChainStep3)),
                ChainStep3 => redirect(307, Page::Special(ChainEnd)),
                LoopA => redirect(302, Page::Special(LoopB)),
                LoopB => redirect(308, Page::Special(LoopA)),
                SelfLoop => redirect(302, Page::Special(SelfLoop)),
                Long(n) if n + 1 < LONG_CHAIN_HOPS => redirect(301, Page::Special(Long(n + 1))),
                Long(_) => redirect(301, Page::Special(LongEnd)),
                Offsite => Head {
                    redirect: Some(Node {
                        host: self.special_host(Landing).unwrap_or(0),
                        page: Page::Special(Landing),
                    }),
                    ..redirect(301, Page::Special(Landing))
                },
                ToTree => {
                    let target = if self.shapes[node.host as usize].pages > 1 {
                        1
                    } else {
                        0
                    };
                    redirect(301, Page::Tree(target))
                }
                NotFound => message(404, "not found\n"),
                Gone => message(410, "gone\n"),
                ServerError => message(500, "internal server error\n"),
                Flaky503 if attempt == 0 => message(503, "service unavailable, try again\n"),
                Flaky429 if attempt == 0 => message(429, "too many requests, try again\n"),
                Slow => Head {
                    delay: Some(SLOW_DELAY),
                    ..html
                },
                TooSlow => Head {
                    delay: Some(TOO_SLOW_DELAY),
                    ..html
                },
                Big => Head {
                    body: BodyKind::Big,
                    ..html
                },
                Png => fixed("image/png", super::render::PNG_BODY),
                Pdf => fixed("application/pdf", super::render::PDF_BODY),
                Text => fixed(PLAIN, super::render::TEXT_BODY),
                Xhtml => Head {
                    content_type: "application/xhtml+xml",
                    ..html
                },
                HeaderNofollow => Head {
                    x_robots_tag: Some("noarchive, nofollow"),
                    ..html
                },
                _ => html,
            },
        }
    }

    /// Whether the page as a whole says nofollow (`<meta name="robots">` in its body or an
    /// `X-Robots-Tag` header): none of its links is followed unless nofollow is ignored.
    pub fn page_nofollow(&self, node: Node) -> bool {
        matches!(
            node.page,
            Page::Special(Special::MetaNofollow | Special::HeaderNofollow)
        )
    }

    /// Whether a crawler that stops near-duplicate pages follows none of this page's links:
    /// the page is the same as the page that linked it (its host's), but for its digits.
    /// Only the calendar's months are (rendered alike, see `render::page_code`): every month
    /// but the entry is linked only from months, whatever order a crawl fetches them in.
    pub fn near_duplicate(&self, node: Node) -> bool {
        matches!(node.page, Page::Calendar(m) if m != CALENDAR_ENTRY)
    }

    /// Whether the server must count requests to this node (its answer depends on it).
    pub fn is_stateful(&self, node: Node) -> bool {
        matches!(
            node.page,
            Page::Special(Special::Flaky503 | Special::Flaky429) | Page::Robots
        )
    }
}

fn is_private(s: Special) -> bool {
    use Special::*;
    matches!(
        s,
        PrivatePage
            | PrivateOpen
            | PrivateDoc
            | AfterPrivatePage
            | AfterPrivateOpen
            | AfterPrivateDoc
    )
}

pub fn special_path(s: Special) -> &'static str {
    SPECIAL_PATHS
        .iter()
        .find(|(sp, _)| *sp == s)
        .map(|(_, p)| *p)
        .unwrap_or("/redirect/long/")
}

fn special_layer(s: Special) -> u32 {
    use Special::*;
    match s {
        ChainEndChild | Flaky503Child | Flaky429Child | SlowChild | BeyondCap | XhtmlChild
        | HiddenInFiles | MetaNofollowChild | HeaderNofollowChild | AfterPrivatePage
        | AfterPrivateOpen | AfterPrivateDoc | FrameLeft | FrameRight => 2,
        _ => 1,
    }
}

/// Strict decimal: digits only, no leading zero (so `/p/012` is not `/p/12`), fits in u32.
fn parse_decimal(s: &str) -> Option<u32> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

pub fn push_u32_str(s: &mut String, n: u32) {
    let mut digits = [0u8; 10];
    let len = write_u32(&mut digits, n);
    // Digits are ASCII, so this cannot fail.
    s.push_str(std::str::from_utf8(&digits[..len]).unwrap_or("0"));
}

/// Writes `n` in decimal at the start of `buf`, returns the length.
pub fn write_u32(buf: &mut [u8; 10], mut n: u32) -> usize {
    let mut tmp = [0u8; 10];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = tmp.len() - i;
    buf[..len].copy_from_slice(&tmp[i..]);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(hosts: usize, pages: usize) -> Graph {
        Graph::new(WebSpec {
            hosts,
            pages,
            ..WebSpec::small(1)
        })
    }

    #[test]
    fn host_shape_fits_in_five_layers() {
        let s = HostShape::new(60);
        assert_eq!(s.branching, 3);
        assert_eq!(s.layer(0), 0);
        assert_eq!(s.layer(1), 1);
        assert_eq!(s.layer(3), 1);
        assert_eq!(s.layer(4), 2);
        assert_eq!(s.layer(59), 4);
        assert_eq!(s.children(0), 1..4);
        assert_eq!(s.children(19), 58..60);
        assert_eq!(s.children(20), 60..60);
        assert_eq!(s.parent(58), Some(19));
        assert_eq!(s.layer_range(4), 40..60);
        assert!(s.layer_range(5).is_empty());
        let one = HostShape::new(1);
        assert_eq!(one.depth(), 0);
        assert!(one.children(0).is_empty());
        let bench = HostShape::new(1250);
        assert_eq!(bench.branching, 6);
        assert_eq!(bench.depth(), 4);
    }

    #[test]
    fn routing_accepts_only_canonical_paths() {
        let g = graph(5, 300);
        assert_eq!(g.host_index("h3.test"), Some(3));
        assert_eq!(g.host_index("H3.TEST:8080"), Some(3));
        assert_eq!(g.host_index("h3.test."), Some(3));
        assert_eq!(g.host_index("h5.test"), None);
        assert_eq!(g.host_index("h03.test"), None);
        assert_eq!(g.host_index("example.com"), None);
        assert_eq!(g.host_index(""), None);
        assert_eq!(g.host_index("hé.test"), None);
        assert_eq!(g.host_index("h1.tesé"), None);
        assert_eq!(g.host_index("h.test"), None);
        assert_eq!(g.host_index("h99999999999.test"), None);
        assert_eq!(g.route(0, "/"), Some(Node::home(0)));
        assert_eq!(g.route(0, "/p/12").map(|n| n.page), Some(Page::Tree(12)));
        assert_eq!(g.route(0, "/p/012"), None);
        assert_eq!(g.route(0, "/p/0"), None);
        assert_eq!(g.route(0, "/p/60"), None);
        assert_eq!(g.route(0, "/p/./12"), None);
        assert_eq!(g.route(0, "/p/12?x=1"), None);
        assert_eq!(
            g.route(1, "/calendar/2026/11").map(|n| n.page),
            Some(Page::Calendar(CALENDAR_ENTRY))
        );
        assert_eq!(g.route(1, "/calendar/2026/1"), None);
        assert_eq!(g.route(1, "/calendar/2026/13"), None);
        assert_eq!(
            g.route(0, "/calendar/2026/11"),
            None,
            "calendar lives on the trap host"
        );
        assert_eq!(
            g.route(1, "/redirect/long/11").map(|n| n.page),
            Some(Page::Special(Special::Long(11)))
        );
        assert_eq!(g.route(1, "/redirect/long/12"), None);
        assert_eq!(
            g.route(1, "/redirect/chain/1").map(|n| n.page),
            Some(Page::Special(Special::ChainStart))
        );
        assert_eq!(g.route(0, "/redirect/chain/1"), None);
        for h in 0..5 {
            assert!(g.route(h, "/private/page").is_some());
        }
    }

    #[test]
    fn every_node_path_routes_back_to_it() {
        let g = graph(5, 300);
        for host in 0..5 {
            for k in 0..g.shapes[host as usize].pages {
                let n = Node {
                    host,
                    page: Page::Tree(k),
                };
                assert_eq!(g.route(host, &g.path(n.page)), Some(n));
            }
            for s in all_specials() {
                let n = Node {
                    host,
                    page: Page::Special(s),
                };
                if g.exists(n) {
                    assert_eq!(g.route(host, &g.path(n.page)), Some(n), "{s:?}");
                }
            }
        }
        for m in [0, 1, CALENDAR_ENTRY, CALENDAR_MONTHS - 1] {
            let n = Node {
                host: 1,
                page: Page::Calendar(m),
            };
            assert_eq!(g.route(1, &g.path(n.page)), Some(n));
        }
        assert_eq!(g.url(Node::home(3)), "http://h3.test/");
        assert_eq!(g.path(Page::Calendar(CALENDAR_ENTRY)), "/calendar/2026/11");
        assert_eq!(
            g.path(Page::Calendar(CALENDAR_ENTRY + 2)),
            "/calendar/2027/01"
        );
    }

    proptest::proptest! {
        /// Request bytes come from outside: routing must never panic, whatever they are.
        #[test]
        fn routing_never_panics(host in "\\PC{0,20}", path in "\\PC{0,40}") {
            let mut spec = WebSpec::small(1);
            spec.features.advanced_variants = true;
            let g = Graph::new(spec);
            let _ = g.host_index(&host);
            for h in 0..5 {
                let _ = g.route(h, &path);
                let _ = g.route(h, &format!("/p/{path}"));
                let _ = g.route(h, &format!("/calendar/{path}"));
            }
        }
    }

    #[test]
    fn tree_pages_have_the_requested_number_of_links() {
        let g = graph(5, 300);
        let mut out = Vec::new();
        g.links(
            Node {
                host: 2,
                page: Page::Tree(7),
            },
            &mut out,
        );
        assert_eq!(out.len(), g.spec.links_per_page);
    }
}
