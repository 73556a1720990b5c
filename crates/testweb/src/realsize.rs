//! Pages of real size (`Features::real_size`, `testweb --page-size real`): tree pages shaped
//! like the HTML a crawler meets on the web today, not 16 KiB of links and lorem ipsum.
//!
//! A 2025 crawl of a billion pages measured a mean HTML page of ~242 KB, and most of those
//! bytes are not links: inline `<style>` sheets, inline `<script>` bundles, framework state
//! as JSON (`<script type="application/json">`), long text, and navigation and footers
//! dense with links. So a real-size page is, in document order:
//! - `<head>`: title, the page's `<base>` (variants), an inline style sheet (~10% of the
//!   page) and inline scripts (~25%) whose strings hold markup, `<a href>` included, that is
//!   not a link (raw text);
//! - a `<nav>` list holding the first third of the page's links, packed;
//! - `<main>`: paragraphs of varied words (~40%) between the next links, with an inline
//!   `<script>` now and then;
//! - a JSON blob (~20%) whose strings hold URLs and `<a href>` markup, again not links;
//! - a `<footer>` list with the rest of the links.
//!
//! # Guarantees
//! - **The same links.** A page carries exactly the links `Graph::links` gives it, in that
//!   order, spelled by `render::spell` and written by `render::write_tag` as on every other
//!   page: the ground truth, [`crate::Web::links_of`] and the request log mean what they
//!   mean on any web. The bytes around the links are what changes.
//! - **Deterministic.** Sizes and contents come from hashes of (seed, host, page).
//! - **The promised sizes.** [`page_bytes`] is log-normal: median 150 KB, mean ~240 KB
//!   (σ = 0.97), 2.5% over 1 MB, 0.4% over 2 MB, clamped to 8 KB–6 MB (below the crawler's
//!   default 10 MiB body cap, so no page is cut). A page renders to its size within a few
//!   hundred bytes plus its links.
//! - **Compressible like HTML.** Text is words drawn from a vocabulary, styles and scripts
//!   are rules and functions with varied names and numbers: gzip takes such a page to about
//!   a fifth, as it does real HTML, rather than the hundredth a repeated filler gives, so
//!   decompression and the archive cost what they would on the web.
//!
//! Why generated on each request rather than stored: a page is rendered at memory speed from
//! small tables, so a web of any size costs no memory and starts at once, like the rest of
//! the synthetic web.

use super::graph::{hash4, Graph, Link, Node, Page, Rng};
use super::render;

const TAG_REAL_SIZE: u64 = 11;
const TAG_REAL_CONTENT: u64 = 12;

/// Median and log-normal σ of [`page_bytes`]: mean = median · e^(σ²/2) ≈ 240 KB.
const MEDIAN_BYTES: f64 = 150_000.0;
const SIGMA: f64 = 0.97;
const MIN_BYTES: usize = 8_000;
const MAX_BYTES: usize = 6_000_000;

/// The size of `node`'s page on a real-size web, from a hash of the page (see the module doc).
pub fn page_bytes(seed: u64, node: Node) -> usize {
    let h = hash4(
        seed,
        TAG_REAL_SIZE,
        u64::from(node.host),
        render::page_code(node.page),
    );
    // Box–Muller from two 26-bit uniforms in (0, 1).
    let u1 = ((h >> 38) as f64 + 0.5) / (1u64 << 26) as f64;
    let u2 = (((h >> 12) & ((1 << 26) - 1)) as f64 + 0.5) / (1u64 << 26) as f64;
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    let bytes = MEDIAN_BYTES * (SIGMA * z).exp();
    (bytes as usize).clamp(MIN_BYTES, MAX_BYTES)
}

/// Whether `node`'s page is rendered at real size: tree pages (and their variant URLs, which
/// serve the same bytes); the special pages keep their own small bodies.
pub fn applies(graph: &Graph, node: Node) -> bool {
    graph.spec.features.real_size && matches!(node.page, Page::Tree(_) | Page::TreeVariant(..))
}

/// Words of the text; none holds `<`, `&` or `http`, so text can never look like markup.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "crawler",
    "archive",
    "server",
    "request",
    "response",
    "network",
    "document",
    "section",
    "chapter",
    "library",
    "function",
    "memory",
    "history",
    "river",
    "mountain",
    "village",
    "economy",
    "government",
    "language",
    "science",
    "theory",
    "system",
    "between",
    "however",
    "during",
    "through",
    "another",
    "because",
    "without",
    "although",
    "against",
    "population",
    "century",
    "development",
    "including",
    "community",
    "published",
    "university",
    "national",
    "company",
    "international",
    "different",
    "important",
    "information",
    "performance",
    "structure",
    "particular",
    "following",
    "available",
    "original",
    "published",
    "research",
    "approach",
    "material",
    "production",
    "evidence",
    "relationship",
    "experience",
    "interest",
    "question",
    "analysis",
    "education",
    "industry",
    "building",
    "election",
    "station",
    "festival",
    "musician",
    "football",
    "season",
    "album",
    "record",
    "single",
    "weather",
    "climate",
    "coastal",
    "northern",
    "southern",
    "eastern",
    "western",
    "ancient",
    "modern",
    "early",
    "later",
    "several",
    "various",
    "numerous",
    "notable",
    "famous",
    "local",
    "regional",
    "annual",
    "public",
    "private",
    "official",
    "political",
    "cultural",
    "historical",
];

const CSS_PROPERTIES: &[&str] = &[
    "margin",
    "padding",
    "border-radius",
    "font-size",
    "line-height",
    "max-width",
    "min-height",
    "gap",
    "top",
    "letter-spacing",
];

const CSS_VALUES: &[&str] = &[
    "display:flex",
    "display:grid",
    "position:relative",
    "position:absolute",
    "overflow:hidden",
    "text-align:center",
    "font-weight:600",
    "cursor:pointer",
    "white-space:nowrap",
    "box-sizing:border-box",
];

const JS_NAMES: &[&str] = &[
    "render",
    "update",
    "schedule",
    "hydrate",
    "observe",
    "dispatch",
    "resolve",
    "measure",
    "toggle",
    "fetchData",
    "mount",
    "attach",
    "debounce",
    "throttle",
    "serialize",
    "track",
];

const CLASSES: &[&str] = &[
    "card",
    "nav-item",
    "btn",
    "container",
    "row",
    "col",
    "header",
    "footer",
    "sidebar",
    "menu",
    "title",
    "subtitle",
    "badge",
    "modal",
    "tooltip",
    "grid",
];

/// Renders `node`'s real-size page with its `links` into `buf` (see the module doc for the
/// layout).
pub fn html(graph: &Graph, node: Node, links: &[Link], buf: &mut Vec<u8>) {
    let spec = &graph.spec;
    let target = page_bytes(spec.seed, node);
    buf.reserve(target + links.len() * 100 + 1024);
    let start = buf.len();
    let mut rng = Rng::new(hash4(
        spec.seed,
        TAG_REAL_CONTENT,
        u64::from(node.host),
        render::page_code(node.page),
    ));
    let mut path = String::with_capacity(32);
    graph.push_path(&mut path, node.page);
    let base = render::has_base(graph, node);
    let mut tags = render::LinkWriter::new(graph, node, base, &path);

    // The budget of everything but links (about 90 bytes each, written as they come).
    let room = target.saturating_sub(links.len() * 90 + 600);
    let style_bytes = room / 10;
    let head_script_bytes = room / 4;
    let json_bytes = room / 5;
    let text_bytes = room - style_bytes - head_script_bytes - json_bytes;

    buf.extend_from_slice(b"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    buf.extend_from_slice(
        b"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>",
    );
    render::push_host(buf, node.host, false);
    buf.extend_from_slice(path.as_bytes());
    buf.extend_from_slice(b"</title>");
    if base {
        render::push_base(buf);
    }
    buf.extend_from_slice(b"\n<style>\n");
    style(buf, &mut rng, style_bytes);
    buf.extend_from_slice(b"</style>\n");
    // Two head scripts, as a page loads its framework and its analytics.
    for part in [head_script_bytes * 3 / 4, head_script_bytes / 4] {
        buf.extend_from_slice(b"<script>\n");
        script(buf, &mut rng, part);
        buf.extend_from_slice(b"</script>\n");
    }
    buf.extend_from_slice(b"</head>\n<body>\n");
    if spec.features.variants && node == Node::home(0) {
        render::decoys(buf);
    }

    let nav_end = links.len() / 3;
    let footer_start = links.len() - links.len() / 5;
    buf.extend_from_slice(b"<header><nav class=\"site-nav\"><ul>\n");
    for (i, link) in links.iter().enumerate().take(nav_end) {
        buf.extend_from_slice(b"<li>");
        tags.write(buf, link, i);
    }
    buf.extend_from_slice(b"</ul></nav></header>\n<main>\n<h1>Page ");
    buf.extend_from_slice(path.as_bytes());
    buf.extend_from_slice(b"</h1>\n");
    let body_links = footer_start - nav_end;
    let per_link = text_bytes / (body_links + 1);
    for (i, link) in links.iter().enumerate().take(footer_start).skip(nav_end) {
        paragraph(buf, &mut rng, per_link);
        if rng.below(8) == 0 {
            // An inline script between paragraphs (a widget, an ad slot).
            buf.extend_from_slice(b"<script>");
            script(buf, &mut rng, 600);
            buf.extend_from_slice(b"</script>\n");
        }
        tags.write(buf, link, i);
    }
    paragraph(buf, &mut rng, per_link);
    buf.extend_from_slice(b"</main>\n<script type=\"application/json\" id=\"__STATE__\">");
    json(buf, &mut rng, json_bytes, node.host);
    buf.extend_from_slice(b"</script>\n<footer><ul class=\"footer-links\">\n");
    for (i, link) in links.iter().enumerate().skip(footer_start) {
        buf.extend_from_slice(b"<li>");
        tags.write(buf, link, i);
    }
    buf.extend_from_slice(b"</ul>\n");
    // Top up to the target: the estimates above are only estimates.
    let end = b"</footer>\n</body></html>\n";
    let written = buf.len() - start;
    if written + end.len() + 64 < target {
        paragraph(buf, &mut rng, target - written - end.len() - 16);
    }
    buf.extend_from_slice(end);
}

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len() as u64) as usize]
}

fn push_num(buf: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[at..]);
}

/// CSS rules up to about `bytes`: `.card-12 .title{margin:4px 9px;display:flex}`.
fn style(buf: &mut Vec<u8>, rng: &mut Rng, bytes: usize) {
    let end = buf.len() + bytes;
    while buf.len() < end {
        buf.push(b'.');
        buf.extend_from_slice(pick(rng, CLASSES).as_bytes());
        buf.push(b'-');
        push_num(buf, rng.below(400));
        buf.extend_from_slice(b" .");
        buf.extend_from_slice(pick(rng, CLASSES).as_bytes());
        buf.push(b'{');
        buf.extend_from_slice(pick(rng, CSS_PROPERTIES).as_bytes());
        buf.push(b':');
        push_num(buf, rng.below(48));
        buf.extend_from_slice(b"px ");
        push_num(buf, rng.below(48));
        buf.extend_from_slice(b"px;color:#");
        let color = rng.next_u64() & 0xff_ffff;
        for shift in [20, 16, 12, 8, 4, 0] {
            buf.push(b"0123456789abcdef"[((color >> shift) & 0xf) as usize]);
        }
        buf.push(b';');
        buf.extend_from_slice(pick(rng, CSS_VALUES).as_bytes());
        buf.extend_from_slice(b"}\n");
    }
}

/// Script up to about `bytes`: functions whose strings hold markup, links included, that
/// the HTML rules make text (raw text ends only at `</script`, which never occurs here).
fn script(buf: &mut Vec<u8>, rng: &mut Rng, bytes: usize) {
    let end = buf.len() + bytes;
    while buf.len() < end {
        let name = pick(rng, JS_NAMES);
        let n = rng.below(10_000);
        buf.extend_from_slice(b"function ");
        buf.extend_from_slice(name.as_bytes());
        buf.push(b'_');
        push_num(buf, n);
        buf.extend_from_slice(b"(e,t){var n=e*");
        push_num(buf, rng.below(997));
        buf.extend_from_slice(b"+t.length;if(n>");
        push_num(buf, rng.below(100_000));
        buf.extend_from_slice(b"){return '<div class=\"");
        buf.extend_from_slice(pick(rng, CLASSES).as_bytes());
        buf.extend_from_slice(b"\">'+n+'<\\/div>'}");
        if rng.below(4) == 0 {
            // Markup in a string: not a link, whatever it looks like.
            buf.extend_from_slice(b"t.innerHTML='<a href=\"/js/widget/");
            push_num(buf, n);
            buf.extend_from_slice(b"\">more<\\/a>';");
        }
        buf.extend_from_slice(b"return window.__state&&window.__state.");
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b"?null:n}\n");
    }
}

/// A paragraph of about `bytes` of words.
fn paragraph(buf: &mut Vec<u8>, rng: &mut Rng, bytes: usize) {
    if bytes < 16 {
        return;
    }
    buf.extend_from_slice(b"<p>");
    let end = buf.len() + bytes - 8;
    let mut sentence = 0;
    while buf.len() < end {
        let word = pick(rng, WORDS).as_bytes();
        if sentence == 0 {
            buf.push(word[0].to_ascii_uppercase());
            buf.extend_from_slice(&word[1..]);
        } else {
            buf.extend_from_slice(word);
        }
        sentence += 1;
        if sentence > 6 && rng.below(8) == 0 {
            buf.extend_from_slice(b". ");
            sentence = 0;
        } else {
            buf.push(b' ');
        }
    }
    buf.extend_from_slice(b"</p>\n");
}

/// A JSON document of about `bytes`: framework state with URLs and markup in its strings.
fn json(buf: &mut Vec<u8>, rng: &mut Rng, bytes: usize, host: u32) {
    let end = buf.len() + bytes;
    buf.extend_from_slice(b"{\"props\":{\"pageProps\":{\"items\":[");
    let mut first = true;
    while buf.len() < end {
        if !first {
            buf.push(b',');
        }
        first = false;
        let id = rng.below(1_000_000);
        buf.extend_from_slice(b"{\"id\":");
        push_num(buf, id);
        buf.extend_from_slice(b",\"url\":\"http://h");
        push_num(buf, u64::from(host));
        buf.extend_from_slice(b".test/item/");
        push_num(buf, id);
        buf.extend_from_slice(b"\",\"title\":\"");
        for _ in 0..4 {
            buf.extend_from_slice(pick(rng, WORDS).as_bytes());
            buf.push(b' ');
        }
        buf.extend_from_slice(b"\",\"html\":\"<a href=\\\"/json/");
        push_num(buf, id);
        buf.extend_from_slice(b"\\\">");
        buf.extend_from_slice(pick(rng, WORDS).as_bytes());
        buf.extend_from_slice(b"</a>\",\"score\":");
        push_num(buf, rng.below(100));
        buf.push(b'.');
        push_num(buf, rng.below(100));
        buf.push(b'}');
    }
    buf.extend_from_slice(b"]},\"buildId\":\"testweb\"}}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Web, WebSpec};

    #[test]
    fn sizes_are_long_tailed_with_the_promised_mean_and_median() {
        let mut sizes: Vec<usize> = (0..40_000u32)
            .map(|k| {
                page_bytes(
                    5,
                    Node {
                        host: k % 11,
                        page: Page::Tree(k),
                    },
                )
            })
            .collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        let mean = sizes.iter().sum::<usize>() / sizes.len();
        assert!((140_000..160_000).contains(&median), "median {median}");
        assert!((220_000..260_000).contains(&mean), "mean {mean}");
        let over = |n: usize| sizes.iter().filter(|&&s| s > n).count() as f64 / 40_000.0;
        assert!(
            (0.015..0.035).contains(&over(1_000_000)),
            "{}",
            over(1_000_000)
        );
        assert!(
            (0.002..0.007).contains(&over(2_000_000)),
            "{}",
            over(2_000_000)
        );
        assert!(sizes[sizes.len() - 1] <= MAX_BYTES && sizes[0] >= MIN_BYTES);
    }

    #[test]
    fn pages_render_to_their_size_and_compress_like_html() {
        let web = Web::new(WebSpec::real_size(3));
        for url in web.tree_urls().iter().step_by(97).take(12) {
            let page = web.render(url, 0).expect("a page");
            let node = web.graph.content_node(web.node_of(url).expect("a node"));
            let want = page_bytes(3, node);
            let got = page.body.len();
            assert!(
                got >= want * 95 / 100 && got <= want + 200 * 100,
                "{url}: {got} bytes for {want}"
            );
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut gz, &page.body).expect("compress");
            let ratio = got as f64 / gz.finish().expect("compress").len() as f64;
            assert!((2.5..12.0).contains(&ratio), "{url}: gzip ratio {ratio:.1}");
            let text = String::from_utf8_lossy(&page.body);
            for part in [
                "<style>",
                "<script>",
                "application/json",
                "<nav",
                "<footer>",
            ] {
                assert!(text.contains(part), "{url}: no {part}");
            }
        }
    }

    #[test]
    fn only_tree_pages_change_and_the_same_seed_gives_the_same_bytes() {
        let web = Web::new(WebSpec::real_size(4));
        let again = Web::new(WebSpec::real_size(4));
        let url = &web.tree_urls()[7];
        assert_eq!(web.render(url, 0), again.render(url, 0));
        let mut plain = WebSpec::real_size(4);
        plain.features.real_size = false;
        let plain = Web::new(plain);
        let special = web.special_url("/nofollow/a");
        if let Some(special) = special {
            assert_eq!(web.render(&special, 0), plain.render(&special, 0));
        }
        assert_ne!(web.render(url, 0), plain.render(url, 0));
    }
}
