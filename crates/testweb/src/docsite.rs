//! The documentation-site corner (feature `docsite`): a site shaped like a real manual, on
//! the host [`DOCS_HOST`], that a crawler with sensible defaults must crawl completely, and
//! one repeating-path trap beside it that the same defaults must stop.
//!
//! - `/` links `/book/1` and `/trap/`;
//! - `/book/{k}` (`k` = 1 ..= [`DOC_CHAIN`]) links its next and previous chapter and home:
//!   chapter `k` is `k` links from the index, the last one [`DOC_CHAIN`] (500) deep (a book
//!   read "next, next, next", as generated manuals are: a real one chains 229 pages). Each
//!   chapter has a title of its own in words ([`chapter_title`]), as real chapters do, so
//!   no two chapters are the same page but for their numbers (see the crawler's
//!   `near_duplicate` module: such pages would be taken for a trap);
//! - every fifth chapter also links a reference page whose URL is over 2,000 bytes (a long
//!   path of anchors and a query holding a search state, as API references and documentation
//!   search pages have): [`doc_long_paths`], from 2,100 to 3,350 bytes;
//! - `/trap/` links `more/` relatively, and so does every `/trap/more/…/` page: the classic
//!   repeating-path trap (a relative link that should have been absolute), endless by
//!   construction; its pages answer 200 to any depth and show their own path (a
//!   breadcrumb), so they are not near-duplicates of each other: the scope's repetition
//!   limit is what stops this one.
//!
//! [`doc_expected`] is what a crawl must request (robots.txt aside): the whole book, the
//! long pages, and the trap's first pages up to the repetition limit the crawler's scope
//! applies (`/trap/more/more/more/`: three repetitions).

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// The corner's host.
pub const DOCS_HOST: &str = "docs.test";
/// Chapters in the book: the deepest is this many links from the index.
pub const DOC_CHAIN: u32 = 500;

/// Chapter `k`'s title: `k` spelled in made-up words (one syllable per base-20 digit), so
/// that chapters differ in their words, not only in their numbers.
pub fn chapter_title(k: u32) -> String {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "we", "xa", "ye", "zo", "bi", "ce",
        "du", "fo", "gu", "ha", "ji",
    ];
    let mut n = k;
    let mut title = String::new();
    loop {
        title.insert_str(0, SYLLABLES[(n % 20) as usize]);
        n /= 20;
        if n == 0 {
            break;
        }
    }
    format!("On the {title}")
}

/// Length of the long reference URL of chapter `k` (a multiple of 5): six lengths from
/// 2,100 to 3,350 bytes, in turn.
fn long_len(k: u32) -> usize {
    2100 + 250 * ((k as usize / 5 - 1) % 6)
}

/// The long reference URLs' paths (path and query), one per fifth chapter.
pub fn doc_long_paths() -> Vec<String> {
    (1..=DOC_CHAIN)
        .filter(|k| k % 5 == 0)
        .map(|k| long_path(k, long_len(k)))
        .collect()
}

/// `/ref/{k}/…?state=…` of exactly `len` bytes.
fn long_path(k: u32, len: usize) -> String {
    let mut p = format!("/ref/{k}/");
    let anchors = "section-anchor-";
    while p.len() < 600 {
        p.push_str(anchors);
    }
    p.push_str("?state=");
    while p.len() < len {
        p.push(char::from(b'a' + (p.len() % 26) as u8));
    }
    p
}

/// Every path a complete, trap-stopping crawl of the corner requests (robots.txt aside).
pub fn doc_expected() -> Vec<String> {
    let mut all = vec!["/".to_string()];
    all.extend((1..=DOC_CHAIN).map(|k| format!("/book/{k}")));
    all.extend(doc_long_paths());
    all.extend(
        [
            "/trap/",
            "/trap/more/",
            "/trap/more/more/",
            "/trap/more/more/more/",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    all
}

/// The answer for `host` and `path` if `host` is the corner's, else `None`.
pub(crate) fn answer(host: &str, path: &str) -> Option<Response<WebBody>> {
    if host != DOCS_HOST {
        return None;
    }
    if path == "/" {
        return Some(html(
            "<a href=\"/book/1\">Start reading</a> <a href=\"/trap/\">archive</a>".into(),
        ));
    }
    if let Some(k) = path
        .strip_prefix("/book/")
        .and_then(|k| k.parse::<u32>().ok())
        .filter(|k| (1..=DOC_CHAIN).contains(k) && path == format!("/book/{k}"))
    {
        let title = chapter_title(k);
        let mut body = format!("<h1>Chapter {k}: {title}</h1><a href=\"/\">Contents</a>");
        if k > 1 {
            body.push_str(&format!(" <a href=\"/book/{}\">Previous</a>", k - 1));
        }
        if k < DOC_CHAIN {
            body.push_str(&format!(" <a href=\"/book/{}\">Next</a>", k + 1));
        }
        if k % 5 == 0 {
            let long = long_path(k, long_len(k));
            body.push_str(&format!(" <a href=\"{long}\">API reference</a>"));
        }
        return Some(html(body));
    }
    if path.starts_with("/ref/") && doc_long_paths().iter().any(|p| p == path) {
        return Some(html("<a href=\"/\">Contents</a>".into()));
    }
    if let Some(rest) = path.strip_prefix("/trap/") {
        if rest.split_terminator('/').all(|s| s == "more")
            && (rest.is_empty() || rest.ends_with('/'))
        {
            return Some(html(format!(
                "<p>You are here: {path}</p><a href=\"more/\">More</a>"
            )));
        }
    }
    let mut r = html("no such page".into());
    *r.status_mut() = StatusCode::NOT_FOUND;
    Some(r)
}

fn html(body: String) -> Response<WebBody> {
    let body = format!("<!doctype html><title>docs</title>{body}");
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docsite_long_urls_are_over_2000_bytes() {
        let paths = doc_long_paths();
        assert_eq!(paths.len(), DOC_CHAIN as usize / 5);
        for p in &paths {
            assert!(p.len() > 2000 && p.len() <= 3350, "{}", p.len());
        }
        assert_eq!(paths[5].len(), 2100 + 250 * 5);
        assert_eq!(paths[6].len(), 2100);
    }

    #[test]
    fn chapter_titles_differ_in_words() {
        let titles: std::collections::BTreeSet<String> = (1..=DOC_CHAIN)
            .map(|k| chapter_title(k).replace(|c: char| c.is_ascii_digit(), ""))
            .collect();
        assert_eq!(titles.len(), DOC_CHAIN as usize);
    }
}
