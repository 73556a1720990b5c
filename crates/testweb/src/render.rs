//! Response bodies: generated HTML written straight into one pre-sized buffer (no per-link
//! `format!`), the streamed big page, and the fixed non-HTML bodies.
//!
//! With `features.variants` every link is spelled one of many ways that the WHATWG parser
//! resolves to the same canonical URL (upper-case scheme and host, `:80`, dot segments,
//! relative paths against the page or its `<base href>`, protocol-relative, fragments,
//! character references, surrounding and embedded whitespace), carried by `<a>`, `<A HREF>`,
//! `<area>` or `<iframe>` with double, single or no quotes. Without it every link is the
//! canonical absolute URL in `<a href="…">`, the cheapest page to parse.

use bytes::Bytes;

use super::graph::{hash4, mix, write_u32, Graph, Link, Node, Page, Rel, Special, Tag};

/// Text used to pad pages to their target size; no `<` or `&`, so it can never look like markup.
const FILLER: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in \
reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint \
occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit anim id est laborum. \
Sed ut perspiciatis unde omnis iste natus error sit voluptatem accusantium doloremque laudantium, \
totam rem aperiam, eaque ipsa quae ab illo inventore veritatis et quasi architecto beatae vitae \
dicta sunt explicabo. Nemo enim ipsam voluptatem quia voluptas sit aspernatur aut odit aut fugit, \
sed quia consequuntur magni dolores eos qui ratione voluptatem sequi nesciunt. ";

/// The base every variant page may declare; relative links on such a page are spelled
/// against it. A second, later `<base>` must be ignored (only the first one counts).
const BASE_PATH: &str = "/b/c/";

const TAG_SPELL: u64 = 3;
const TAG_FILL: u64 = 4;
const TAG_SIZE: u64 = 5;

/// A PNG signature and a chunk of bytes that contain href-looking text: not a link.
pub const PNG_BODY: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89<a href=\"/files/hidden\">not a link</a>\0\0\0\0IEND\xaeB`\x82";
pub const PDF_BODY: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n% <a href=\"/files/hidden\">not a link</a> http://h0.test/files/hidden\ntrailer << /Root 1 0 R >>\n%%EOF\n";
pub const TEXT_BODY: &[u8] = b"Plain text is not parsed for links, even when it says\n<a href=\"/files/hidden\">this</a> or <a href=\"http://h0.test/files/hidden\">that</a>.\n";

pub(crate) fn page_code(page: Page) -> u64 {
    match page {
        Page::Tree(k) | Page::TreeVariant(k, _) => u64::from(k),
        // Every month the same: a calendar's months differ only in their numbers (the
        // same words and markup around other dates), as on real sites. That is what makes
        // it a trap a crawler can recognise (pages that differ only in their digits).
        Page::Calendar(_) => 1 << 40,
        Page::Special(s) => (2 << 40) ^ special_code(s),
        Page::Robots => 3 << 40,
    }
}

fn special_code(s: Special) -> u64 {
    // Stable per special page without relying on enum discriminants.
    let path = match s {
        Special::Long(n) => return 0x1000 + u64::from(n),
        other => super::graph::special_path(other),
    };
    path.bytes().fold(0u64, |h, b| mix(h ^ u64::from(b)))
}

/// Appends decimal digits.
fn push_u32(buf: &mut Vec<u8>, n: u32) {
    let mut digits = [0u8; 10];
    let len = write_u32(&mut digits, n);
    buf.extend_from_slice(&digits[..len]);
}

fn push_filler(buf: &mut Vec<u8>, mut len: usize, offset: usize) {
    let text = FILLER.as_bytes();
    let mut at = offset % text.len();
    while len > 0 {
        let take = len.min(text.len() - at);
        buf.extend_from_slice(&text[at..at + take]);
        len -= take;
        at = 0;
    }
}

/// The size of `node`'s page on a long-tailed web (`Features::long_tail`): from a hash of
/// the page, 0.05% of pages 5–8 MB, 1% 500 KB–2 MB, the rest 3–48 KB log-uniformly around a
/// median of 12 KB.
pub fn long_tail_bytes(seed: u64, node: Node) -> usize {
    let h = hash4(seed, TAG_SIZE, u64::from(node.host), page_code(node.page));
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    let within = |from: f64, to: f64, v: f64| (from + (to - from) * v) as usize;
    if u < 0.0005 {
        within(5e6, 8e6, u / 0.0005)
    } else if u < 0.01 {
        within(5e5, 2e6, (u - 0.0005) / 0.0095)
    } else {
        let v = (u - 0.01) / 0.99;
        (12_000.0 * 16f64.powf(v - 0.5)) as usize
    }
}

/// Whether `node`'s page declares `<base href="/b/c/">`.
pub fn has_base(graph: &Graph, node: Node) -> bool {
    graph.spec.features.variants
        && matches!(node.page, Page::Tree(_))
        && hash4(
            graph.spec.seed,
            TAG_SPELL,
            u64::from(node.host),
            page_code(node.page),
        ) % 5
            == 0
}

/// Renders the HTML page of `node` with its `links` into `buf`.
pub fn html(graph: &Graph, node: Node, links: &[Link], buf: &mut Vec<u8>) {
    // A variant URL serves its page's very bytes.
    let node = graph.content_node(node);
    if super::realsize::applies(graph, node) {
        super::realsize::html(graph, node, links, buf);
        return;
    }
    let spec = &graph.spec;
    let variants = spec.features.variants;
    let target = if spec.features.long_tail {
        long_tail_bytes(spec.seed, node)
    } else {
        spec.page_bytes
    };
    buf.reserve(target + links.len() * 80 + 512);
    let mut path = String::with_capacity(32);
    graph.push_path(&mut path, node.page);
    // Scratch for each target's path, reused across links.
    let mut scratch = String::with_capacity(32);

    if node.page == Page::Special(Special::Frameset) {
        buf.extend_from_slice(b"<!DOCTYPE html>\n<html><head><title>frames</title></head>\n<frameset cols=\"50%,50%\">\n");
        let mut spelled = Vec::with_capacity(64);
        for (i, link) in links.iter().enumerate() {
            spelled.clear();
            spell(graph, node, 1, link, i as u64, &mut scratch, &mut spelled);
            buf.extend_from_slice(b"<frame src=\"");
            buf.extend_from_slice(&spelled);
            buf.extend_from_slice(b"\">\n");
        }
        buf.extend_from_slice(b"</frameset></html>\n");
        return;
    }

    let base = has_base(graph, node);
    buf.extend_from_slice(
        b"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
    );
    push_host(buf, node.host, false);
    buf.extend_from_slice(path.as_bytes());
    buf.extend_from_slice(b"</title>");
    if node.page == Page::Special(Special::MetaNofollow) {
        buf.extend_from_slice(b"<meta name=\"robots\" content=\"noindex, NOFOLLOW\">");
    }
    if base {
        push_base(buf);
    }
    buf.extend_from_slice(b"</head>\n<body>\n<h1>Page ");
    buf.extend_from_slice(path.as_bytes());
    buf.extend_from_slice(b"</h1>\n");

    if variants && node == Node::home(0) {
        decoys(buf);
    }

    // Spread the filler between the links so that links are not all bunched at the top.
    let expected_link_bytes = links.len() * 60;
    let room = target.saturating_sub(buf.len() + expected_link_bytes + 32);
    let per_link = if links.is_empty() {
        0
    } else {
        room / links.len()
    };
    let fill_seed = hash4(
        spec.seed,
        TAG_FILL,
        u64::from(node.host),
        page_code(node.page),
    ) as usize;
    let dir_depth = if base {
        depth_of_dir(BASE_PATH)
    } else {
        depth_of_dir(&path)
    };
    let mut spelled = Vec::with_capacity(96);
    for (i, link) in links.iter().enumerate() {
        if per_link > 8 {
            buf.extend_from_slice(b"<p>");
            push_filler(buf, per_link - 8, fill_seed.wrapping_add(i * 131));
            buf.extend_from_slice(b"</p>\n");
        }
        spelled.clear();
        spell(
            graph,
            node,
            dir_depth,
            link,
            i as u64,
            &mut scratch,
            &mut spelled,
        );
        write_tag(buf, link, &spelled, variants, i as u64, spec.seed);
    }
    let end = b"\n</body></html>\n";
    if buf.len() + end.len() + 8 < target {
        buf.extend_from_slice(b"<p>");
        let pad = target - buf.len() - end.len() - 4;
        push_filler(buf, pad, fill_seed);
        buf.extend_from_slice(b"</p>");
    }
    buf.extend_from_slice(end);
}

/// The `<base href>` a page of [`has_base`] declares, then a second one that must be ignored.
pub(crate) fn push_base(buf: &mut Vec<u8>) {
    buf.extend_from_slice(b"<base href=\"");
    buf.extend_from_slice(BASE_PATH.as_bytes());
    buf.extend_from_slice(b"\"><base href=\"/wrong/\">");
}

/// Writes a page's links one by one as [`html`] does (spelling and tag), for page layouts
/// of their own (`realsize.rs`).
pub(crate) struct LinkWriter<'a> {
    graph: &'a Graph,
    node: Node,
    dir_depth: usize,
    scratch: String,
    spelled: Vec<u8>,
}

impl<'a> LinkWriter<'a> {
    /// For the page `node` at `path`, declaring `<base>` or not.
    pub(crate) fn new(graph: &'a Graph, node: Node, base: bool, path: &str) -> LinkWriter<'a> {
        LinkWriter {
            graph,
            node,
            dir_depth: depth_of_dir(if base { BASE_PATH } else { path }),
            scratch: String::with_capacity(32),
            spelled: Vec::with_capacity(96),
        }
    }

    /// Appends the tag of the page's `index`-th link.
    pub(crate) fn write(&mut self, buf: &mut Vec<u8>, link: &Link, index: usize) {
        self.spelled.clear();
        let index = index as u64;
        spell(
            self.graph,
            self.node,
            self.dir_depth,
            link,
            index,
            &mut self.scratch,
            &mut self.spelled,
        );
        let spec = &self.graph.spec;
        write_tag(
            buf,
            link,
            &self.spelled,
            spec.features.variants,
            index,
            spec.seed,
        );
    }
}

/// Things that look like links to a careless extractor but are not links by the HTML rules.
/// Their targets exist (200), so a crawler that follows them shows it in the request log.
pub(crate) fn decoys(buf: &mut Vec<u8>) {
    buf.extend_from_slice(
        b"<!-- <a href=\"/decoy/comment\">commented out</a> -->\n\
<script>var s = '<a href=\"/decoy/script\">in a script</a>';</script>\n\
<style>/* <a href=\"/decoy/style\">in a style</a> */</style>\n\
<textarea><a href=\"/decoy/textarea\">in a textarea</a></textarea>\n\
<a href=\"mailto:webmaster@h0.test\">mail</a> <a href=\"javascript:void(0)\">script</a> \
<a href=\"tel:+15550100\">phone</a> <a name=\"no-href\">anchor</a>\n",
    );
}

pub(crate) fn push_host(buf: &mut Vec<u8>, host: u32, upper: bool) {
    buf.extend_from_slice(if upper { b"H" } else { b"h" });
    push_u32(buf, host);
    buf.extend_from_slice(if upper { b".TEST" } else { b".test" });
}

/// Number of directory levels of a path's directory (`/` → 0, `/p/12` → 1, `/b/c/` → 2).
fn depth_of_dir(path: &str) -> usize {
    path.bytes()
        .filter(|&b| b == b'/')
        .count()
        .saturating_sub(1)
}

/// Writes the spelling of `link` as it appears on `source`. `dir_depth` is the depth of the
/// directory relative links are resolved against (the page's or its `<base>`'s).
fn spell(
    graph: &Graph,
    source: Node,
    dir_depth: usize,
    link: &Link,
    index: u64,
    path: &mut String,
    out: &mut Vec<u8>,
) {
    let target = link.target;
    path.clear();
    graph.push_path(path, target.page);
    let path = &*path;
    let absolute = |out: &mut Vec<u8>| {
        out.extend_from_slice(b"http://");
        push_host(out, target.host, false);
        push_escaped(out, path.as_bytes());
    };
    if !graph.spec.features.variants {
        absolute(out);
        return;
    }
    let same_host = target.host == source.host;
    let choice = hash4(
        graph.spec.seed ^ page_code(source.page),
        TAG_SPELL,
        u64::from(source.host),
        index,
    );
    let choices = if same_host { 11 } else { 6 };
    match choice % choices {
        0 => absolute(out),
        1 => {
            out.extend_from_slice(b"HTTP://");
            push_host(out, target.host, true);
            out.extend_from_slice(b":80");
            push_escaped(out, path.as_bytes());
        }
        2 => {
            out.extend_from_slice(b"//");
            push_host(out, target.host, false);
            push_escaped(out, path.as_bytes());
        }
        3 => {
            absolute(out);
            out.extend_from_slice(b"#section-");
            push_u32(out, index as u32);
        }
        4 => {
            // `&#104;` is `h`: attribute values are entity-decoded before resolution.
            out.extend_from_slice(b"&#104;ttp:&#x2F;/");
            push_host(out, target.host, false);
            push_escaped(out, path.as_bytes());
        }
        5 => {
            // The WHATWG parser strips leading/trailing spaces and removes tabs and newlines
            // anywhere in the URL.
            out.extend_from_slice(b"  http://");
            push_host(out, target.host, false);
            let (first, rest) = path.split_at(1);
            push_escaped(out, first.as_bytes());
            out.push(b'\t');
            push_escaped(out, rest.as_bytes());
            out.extend_from_slice(b"\n ");
        }
        6 | 7 => {
            // Relative to the page's (or its base's) directory.
            for _ in 0..dir_depth {
                out.extend_from_slice(b"../");
            }
            push_escaped(out, &path.as_bytes()[1..]);
            if out.is_empty() {
                out.extend_from_slice(b"./");
            }
        }
        8 => {
            out.extend_from_slice(b"/x/..");
            push_escaped(out, path.as_bytes());
        }
        9 => {
            out.extend_from_slice(b"/.");
            push_escaped(out, path.as_bytes());
        }
        _ => {
            // Root-relative, the most common spelling on the real web.
            push_escaped(out, path.as_bytes());
        }
    }
}

/// Appends a URL piece for an attribute value: `&` (in queries) becomes `&amp;`, which the
/// extractor must decode.
fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for part in bytes.split_inclusive(|&b| b == b'&') {
        match part.split_last() {
            Some((b'&', head)) => {
                out.extend_from_slice(head);
                out.extend_from_slice(b"&amp;");
            }
            _ => out.extend_from_slice(part),
        }
    }
}

fn write_tag(
    buf: &mut Vec<u8>,
    link: &Link,
    spelled: &[u8],
    variants: bool,
    index: u64,
    seed: u64,
) {
    let style = if variants {
        mix(seed ^ index.wrapping_mul(0x2545_f491_4f6c_dd1d))
    } else {
        0
    };
    let upper = style % 16 == 1;
    let quote: &[u8] = match (style >> 8) % 8 {
        0 => b"'",
        1 if spelled.iter().all(|b| !b" \t\n\"'=<>`".contains(b)) => b"",
        _ => b"\"",
    };
    let rel: &[u8] = match link.rel {
        Rel::None => b"",
        Rel::Nofollow => match (style >> 16) % 3 {
            0 => b" rel=\"nofollow\"",
            1 => b" rel=\"external NoFollow\"",
            _ => b" rel='NOFOLLOW noopener'",
        },
        Rel::Lookalike => b" rel=\"nofollowme noopener\"",
    };
    let (open, attr, close): (&[u8], &[u8], &[u8]) = match link.tag {
        Tag::A if upper => (b"<A", b" HREF=", b">link</A>\n"),
        Tag::A => (b"<a", b" href=", b">link</a>\n"),
        Tag::Area => (b"<area alt=\"map\"", b" href=", b">\n"),
        Tag::Iframe => (b"<iframe", b" src=", b"></iframe>\n"),
        Tag::Frame => (b"<frame", b" src=", b">\n"),
    };
    buf.extend_from_slice(open);
    buf.extend_from_slice(rel);
    buf.extend_from_slice(attr);
    buf.extend_from_slice(quote);
    buf.extend_from_slice(spelled);
    buf.extend_from_slice(quote);
    buf.extend_from_slice(close);
}

/// The three parts of the streamed big page: a prefix linking home, filler, and a tail whose
/// link (to `/big/beyond-cap`) lies past any body cap below the page's size.
pub struct BigParts {
    pub prefix: Bytes,
    pub filler_len: u64,
    pub tail: Bytes,
}

pub fn big_parts(host: u32, total: u64) -> BigParts {
    let mut prefix = Vec::with_capacity(256);
    prefix.extend_from_slice(
        b"<!DOCTYPE html>\n<html><head><title>big</title></head><body>\n<a href=\"http://",
    );
    push_host(&mut prefix, host, false);
    prefix.extend_from_slice(b"/\">home</a>\n<p>");
    let mut tail = Vec::with_capacity(128);
    tail.extend_from_slice(b"</p>\n<a href=\"http://");
    push_host(&mut tail, host, false);
    tail.extend_from_slice(b"/big/beyond-cap\">past the cap</a>\n</body></html>\n");
    let filler_len = total.saturating_sub((prefix.len() + tail.len()) as u64);
    BigParts {
        prefix: Bytes::from(prefix),
        filler_len,
        tail: Bytes::from(tail),
    }
}

/// Byte offset just past the `/big/beyond-cap` link in the big page: a crawler that reads at
/// least this many bytes can see it.
pub fn big_tail_link_end(host: u32, total: u64) -> u64 {
    let parts = big_parts(host, total);
    let tail = &parts.tail[..];
    let anchor_end = tail
        .windows(4)
        .position(|w| w == b"</a>")
        .map(|p| p + 4)
        .unwrap_or(tail.len());
    total - tail.len() as u64 + anchor_end as u64
}

/// A 64 KiB block of filler shared by every big-page response.
pub fn filler_block() -> Bytes {
    static BLOCK: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    BLOCK
        .get_or_init(|| {
            let mut v = Vec::with_capacity(64 * 1024);
            push_filler(&mut v, 64 * 1024, 0);
            Bytes::from(v)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WebSpec;

    #[test]
    fn pages_come_close_to_the_target_size() {
        let g = Graph::new(WebSpec::bench(3));
        let mut links = Vec::new();
        let mut buf = Vec::new();
        for k in [0u32, 1, 7, 100, 1000] {
            let node = Node {
                host: 2,
                page: Page::Tree(k),
            };
            links.clear();
            buf.clear();
            g.links(node, &mut links);
            html(&g, node, &links, &mut buf);
            let target = g.spec.page_bytes;
            assert!(
                buf.len() >= target * 9 / 10 && buf.len() <= target * 11 / 10,
                "{k}: {}",
                buf.len()
            );
        }
    }

    #[test]
    fn long_tail_sizes_have_the_promised_shape() {
        let mut sizes: Vec<usize> = (0..20_000u32)
            .map(|k| {
                long_tail_bytes(
                    9,
                    Node {
                        host: k % 7,
                        page: Page::Tree(k),
                    },
                )
            })
            .collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((10_000..14_000).contains(&median), "median {median}");
        let over = |n: usize| sizes.iter().filter(|&&s| s > n).count();
        assert!(
            (150..250).contains(&over(500_000)),
            "{} over 500 KB",
            over(500_000)
        );
        assert!(
            (3..25).contains(&over(5_000_000)),
            "{} over 5 MB",
            over(5_000_000)
        );
        // And a page renders to its size.
        let mut spec = WebSpec::bench(3);
        spec.features.long_tail = true;
        let g = Graph::new(spec);
        let node = Node {
            host: 1,
            page: Page::Tree(5),
        };
        let (mut links, mut buf) = (Vec::new(), Vec::new());
        g.links(node, &mut links);
        html(&g, node, &links, &mut buf);
        let want = long_tail_bytes(3, node);
        assert!(buf.len() >= want * 9 / 10 && buf.len() <= want * 11 / 10 + 1024);
    }

    #[test]
    fn big_page_parts_add_up() {
        let parts = big_parts(4, 1_000_000);
        assert_eq!(
            parts.prefix.len() as u64 + parts.filler_len + parts.tail.len() as u64,
            1_000_000
        );
        let end = big_tail_link_end(4, 1_000_000);
        assert!(end < 1_000_000 && end > 999_900);
        assert!(!filler_block().contains(&b'<'));
    }

    #[test]
    fn relative_depth() {
        assert_eq!(depth_of_dir("/"), 0);
        assert_eq!(depth_of_dir("/p/12"), 1);
        assert_eq!(depth_of_dir(BASE_PATH), 2);
    }
}
