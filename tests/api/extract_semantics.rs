//! The semantic decisions of `crawler::extract`, pinned with exact expected results (the
//! differential test only shows that the fast extractor and the reference agree).

use crate::extract_support;
use crawler::extract::{extract_links, ExtractOptions, Extracted, LinkExtractor};
use url::Url;

const PAGE: &str = "http://example.test/dir/page.html?q=1#top";

fn page() -> Url {
    Url::parse(PAGE).unwrap_or_else(|e| panic!("{e}"))
}

fn run(html: &str) -> Extracted {
    run_bytes(html.as_bytes(), None, false)
}

fn run_bytes(html: &[u8], encoding: Option<&str>, follow: bool) -> Extracted {
    let opts = ExtractOptions {
        follow_nofollow: follow,
        ..ExtractOptions::default()
    };
    let fast = extract_links(html, &page(), encoding, &opts);
    // Every pinned case is also a differential case.
    let reference = extract_support::reference_extract(html, &page(), encoding, &opts);
    if let Err(m) = extract_support::compare(&fast, &reference) {
        panic!("fast and reference disagree on {html:?}:\n{m}");
    }
    fast
}

fn urls(e: &Extracted) -> Vec<&str> {
    e.links.iter().map(|l| l.as_str()).collect()
}

#[test]
fn extract_tags_case_and_quoting() {
    let e =
        run(r#"<A HREF="a1">x</A><a href='a2'><a href=a3><AREA href=ar><iframe SRC=if></iframe>"#);
    assert_eq!(
        urls(&e),
        [
            "http://example.test/dir/a1",
            "http://example.test/dir/a2",
            "http://example.test/dir/a3",
            "http://example.test/dir/ar",
            "http://example.test/dir/if",
        ]
    );
    assert_eq!(
        (e.invalid, e.nofollow_skipped, e.meta_nofollow),
        (0, 0, false)
    );
    assert_eq!(e.base, None);
}

#[test]
fn extract_base_applies_to_earlier_links_and_first_wins() {
    let e = run(r#"<a href="x">x</a><base href="/b1/"><base href="/b2/"><a href="y">"#);
    assert_eq!(
        urls(&e),
        ["http://example.test/b1/x", "http://example.test/b1/y"]
    );
    assert_eq!(
        e.base.as_ref().map(Url::as_str),
        Some("http://example.test/b1/")
    );
    // A <base> without href does not count; the next one with href does.
    let e = run(r#"<base target=_top><base href="../up/"><a href="x">"#);
    assert_eq!(urls(&e), ["http://example.test/up/x"]);
}

#[test]
fn extract_unresolvable_base_falls_back_to_page() {
    let e = run(r#"<base href="http://[::1"><a href="x">"#);
    assert_eq!(e.base, None);
    assert_eq!(urls(&e), ["http://example.test/dir/x"]);
    assert_eq!(e.invalid, 0, "a bad <base> is not a link");
}

#[test]
fn extract_empty_href_is_the_page_itself() {
    let e = run(r#"<a href="">x</a><a href>y</a><a href="  ">z</a>"#);
    // Resolving "" drops the fragment, as the URL standard does.
    assert_eq!(urls(&e), [PAGE.trim_end_matches("#top"); 3]);
}

#[test]
fn extract_entities_and_whitespace() {
    let e = run(concat!(
        r#"<a href="?a=1&amp;b=2&#x2F;&#47;">1</a>"#,
        r#"<a href="?x&copy=3&copy;&notit;">2</a>"#,
        "<a href=\"\n\t /sp ace \r\n\">3</a>",
        r#"<a href="/x&#0;y">4</a>"#,
    ));
    assert_eq!(
        urls(&e),
        [
            "http://example.test/dir/page.html?a=1&b=2//",
            // In attributes a legacy reference without `;` followed by `=` or an
            // alphanumeric stays literal: `&copy=` and `&notit;` do, `&copy;` decodes.
            "http://example.test/dir/page.html?x&copy=3%C2%A9&notit;",
            "http://example.test/sp%20ace",
            "http://example.test/x%EF%BF%BDy",
        ]
    );
}

#[test]
fn extract_nofollow_skipped_and_counted_unless_followed() {
    let html = r#"<a rel="NoFollow noopener" href="n1"><area rel=nofollow href="n2"><a rel="nofollowing" href="ok"><a rel="no&#102;ollow" href="n3">"#;
    let e = run(html);
    assert_eq!(urls(&e), ["http://example.test/dir/ok"]);
    assert_eq!(e.nofollow_skipped, 3);
    let e = run_bytes(html.as_bytes(), None, true);
    assert_eq!(e.links.len(), 4);
    assert_eq!(e.nofollow_skipped, 0);
}

#[test]
fn extract_meta_robots() {
    assert!(run(r#"<meta name="robots" content="noindex, nofollow">"#).meta_nofollow);
    assert!(run(r#"<meta name="ROBOTS" content="NONE">"#).meta_nofollow);
    assert!(!run(r#"<meta name="robots" content="index,follow">"#).meta_nofollow);
    assert!(!run(r#"<meta name="googlebot" content="nofollow">"#).meta_nofollow);
    // Links are still reported: the caller decides.
    assert_eq!(
        run(r#"<meta name=robots content=nofollow><a href=x>"#)
            .links
            .len(),
        1
    );
}

#[test]
fn extract_non_http_and_invalid() {
    let e = run(concat!(
        r#"<a href="javascript:void(0)">j</a><a href="mailto:a@b.test">m</a>"#,
        r#"<a href="http://[::1">bad</a><a href="http://h:99999/">port</a>"#,
    ));
    assert_eq!(urls(&e), ["javascript:void(0)", "mailto:a@b.test"]);
    assert_eq!(e.invalid, 2);
}

#[test]
fn extract_raw_text_hides_links_template_does_not() {
    let e = run(concat!(
        r#"<script>document.write('<a href="s">')</script><style><a href="st"></style>"#,
        r#"<!-- <a href="c"> --><textarea><a href="ta"></textarea><noscript><a href="ns"></noscript>"#,
        r#"<iframe src="f"><a href="in-iframe"></iframe><template><a href="t"></template>"#,
    ));
    assert_eq!(
        urls(&e),
        ["http://example.test/dir/f", "http://example.test/dir/t"]
    );
}

#[test]
fn extract_frames_only_inside_frameset() {
    let e = run(r#"<frameset><frame src="f1"><frame src="f2"></frameset>"#);
    assert_eq!(
        urls(&e),
        ["http://example.test/dir/f1", "http://example.test/dir/f2"]
    );
    assert!(run(r#"<body><frame src="stray"></body>"#).links.is_empty());
    // An SVG element called iframe is not a frame; an SVG <a> is a link.
    let e = run(r#"<svg><iframe src="no"></iframe><a href="svg-a"></a></svg>"#);
    assert_eq!(urls(&e), ["http://example.test/dir/svg-a"]);
}

#[test]
fn extract_misnested_anchor_reported_once() {
    let html = r#"<a href="mis"><div>block</a></div><p><a href="p">one</p>two"#;
    let e = run(html);
    assert_eq!(
        urls(&e),
        ["http://example.test/dir/mis", "http://example.test/dir/p"]
    );
    // What plain scraper reports: the tree builder's clones count again.
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse("a[href]").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(doc.select(&sel).count(), 4);
}

#[test]
fn extract_encodings() {
    // windows-1252: é is one byte, and the query is encoded back to windows-1252.
    let e = run_bytes(b"<a href=\"/caf\xe9?q=\xe9\">", Some("windows-1252"), false);
    assert_eq!(urls(&e), ["http://example.test/caf%C3%A9?q=%E9"]);
    // The same bytes as UTF-8 are invalid: U+FFFD.
    let e = run_bytes(b"<a href=\"/caf\xe9\">", None, false);
    assert_eq!(urls(&e), ["http://example.test/caf%EF%BF%BD"]);
    // A UTF-8 BOM overrides the label.
    let e = run_bytes(
        b"\xef\xbb\xbf<a href=\"/caf\xc3\xa9?q=\xc3\xa9\">",
        Some("windows-1252"),
        false,
    );
    assert_eq!(urls(&e), ["http://example.test/caf%C3%A9?q=%C3%A9"]);
    // UTF-16 is transcoded.
    let utf16: Vec<u8> = "<a href=\"/u16\">"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let e = run_bytes(&utf16, Some("utf-16le"), false);
    assert_eq!(urls(&e), ["http://example.test/u16"]);
    // Unknown label: UTF-8.
    let e = run_bytes(b"<a href=\"/caf\xc3\xa9\">", Some("x-unknown"), false);
    assert_eq!(urls(&e), ["http://example.test/caf%C3%A9"]);
}

#[test]
fn extract_streaming_matches_whole() {
    let html = concat!(
        "\u{feff}<base href=\"/b/\"><a href=\"one&amp;two\">1</a><!-- <a href=\"no\"> -->",
        "<script>'<a href=\"no\">'</script><a href='three'>"
    );
    let whole = run(html);
    for chunk_len in 1..8 {
        let mut s = LinkExtractor::new(page(), None, &ExtractOptions::default());
        for chunk in html.as_bytes().chunks(chunk_len) {
            s.write(chunk).unwrap_or_else(|e| panic!("{e}"));
        }
        let streamed = s.finish();
        assert_eq!(urls(&streamed), urls(&whole), "chunks of {chunk_len}");
    }
    assert_eq!(
        urls(&whole),
        [
            "http://example.test/b/one&two",
            "http://example.test/b/three"
        ]
    );
}

#[test]
fn extract_never_panics_on_junk() {
    let junk: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    let _ = extract_links(&junk, &page(), None, &ExtractOptions::default());
    for label in ["utf-16be", "iso-2022-jp", "replacement", "gb18030", "utf-8"] {
        let _ = extract_links(&junk, &page(), Some(label), &ExtractOptions::default());
    }
    // LinkExtractor must be Send: the fetch task holds it across awaits.
    fn assert_send<T: Send>() {}
    assert_send::<LinkExtractor>();
}
