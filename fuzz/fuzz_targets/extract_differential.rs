//! Differential fuzzing of the link extractor: for any bytes, the streaming extractor
//! (`crawler::extract`, its scanner) must find what the scraper reference finds, whole and
//! streamed in chunks, or differ only in a documented way (`Outcome::KnownDifference`), and
//! must never panic.
//!
//! The first input byte picks the options (bit 7: follow_nofollow; bit 6: drop_fragments, as
//! the crawl extracts; bits 0-1: the charset label), the rest is the document.

#![no_main]

#[path = "../../tests/extract_support/mod.rs"]
mod extract_support;

use crawler::extract::ExtractOptions;
use libfuzzer_sys::fuzz_target;
use url::Url;

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let Some((&options, html)) = data.split_first() else {
        return;
    };
    let encoding = match options & 3 {
        0 => None,
        1 => Some("windows-1252"),
        2 => Some("Shift_JIS"),
        _ => Some("utf-16le"),
    };
    let opts = ExtractOptions {
        follow_nofollow: options & 0x80 != 0,
        drop_fragments: options & 0x40 != 0,
        ..ExtractOptions::default()
    };
    let Ok(page) = Url::parse("http://example.test/dir/page.html?q=1#top") else {
        return;
    };
    if let Err(mismatch) = extract_support::differential(html, &page, encoding, &opts) {
        panic!(
            "extractors disagree (encoding {encoding:?}, {opts:?}) on {:?}:\n{mismatch}",
            String::from_utf8_lossy(html)
        );
    }
}
