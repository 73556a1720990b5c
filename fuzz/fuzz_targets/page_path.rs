//! The whole page path on hostile bytes: a body through the extractor (with the crawl's
//! limits), each link through the normalizer and the scope rules, as a parse thread does.
//! Nothing may panic, the page limits must hold (no more than `max_links` links, none
//! longer than `max_url_length` plus what one href can add), and a normalized URL must be
//! normalized again to itself. A link reads as its `Url`, and canonicalizing it as a `Link`
//! gives what canonicalizing the `Url` gives.
//!
//! The first input byte picks the options (bits 0-1: the charset label; bits 2-3: the page
//! URL, one of them over-long; bit 4: links resolved with their fragments, where the crawl
//! drops them), the rest is the body.

#![no_main]

use crawler::extract::{extract_links, ExtractOptions};
use crawler::normalize::{reads_as, Normalizer};
use crawler::scope::{Scope, ScopeOptions};
use libfuzzer_sys::fuzz_target;
use url::Url;

const MAX_LINKS: usize = 64;
const MAX_URL_LENGTH: usize = 512;

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let Some((&options, body)) = data.split_first() else {
        return;
    };
    let encoding = match options & 3 {
        0 => None,
        1 => Some("windows-1252"),
        2 => Some("Shift_JIS"),
        _ => Some("utf-16le"),
    };
    let long = format!("http://example.test/{}/p", "d".repeat(600));
    let page = match (options >> 2) & 3 {
        0 => "http://example.test/dir/page.html?q=1#top",
        1 => "https://a.example.test:8443/",
        2 => "http://127.0.0.1/x/",
        _ => long.as_str(),
    };
    let Ok(page) = Url::parse(page) else {
        return;
    };
    let opts = ExtractOptions {
        max_links: MAX_LINKS,
        max_url_length: MAX_URL_LENGTH,
        drop_fragments: options & 0x10 == 0,
        ..ExtractOptions::default()
    };
    let extracted = extract_links(body, &page, encoding, &opts);
    assert!(extracted.links.len() <= MAX_LINKS, "{} links", extracted.links.len());
    let normalizer = Normalizer::default();
    let scope = match Scope::new(&ScopeOptions::default(), std::slice::from_ref(&page)) {
        Ok(scope) => scope,
        Err(e) => panic!("default scope refused: {e}"),
    };
    for mut found in extracted.links {
        let Ok(mut link) = found.to_url() else {
            panic!("a link that is not a URL: {found}");
        };
        assert!(reads_as(&found, &link), "a link reads unlike its URL: {found}");
        // A resolved link is at most the base (one page URL or one <base>, both bounded by
        // the body) plus one href of at most MAX_URL_LENGTH, percent-encoded (x3).
        assert!(
            link.as_str().len() <= page.as_str().len().max(body.len()) + 3 * MAX_URL_LENGTH + 16,
            "{} bytes",
            link.as_str().len()
        );
        let as_link = normalizer.canonicalize_link(&mut found);
        let as_url = normalizer.canonicalize(&mut link);
        assert_eq!(as_link, as_url, "canonicalize_link answers otherwise: {link}");
        if as_url.is_err() {
            continue;
        }
        assert_eq!(found.as_str(), link.as_str(), "canonicalize_link differs");
        let _ = scope.check(&link);
        let once = link.as_str().to_string();
        let mut again = link.clone();
        if normalizer.canonicalize(&mut again).is_ok() {
            assert_eq!(again.as_str(), once, "normalization is not idempotent");
        }
    }
}
