//! The canonical corner (feature `canonical`): pages that name a canonical URL, on the host
//! [`CANONICAL_HOST`], each canonical target reachable in no other way.
//!
//! - `/dup`: `<link rel="canonical" href="/only-canonical">` (HTML);
//! - `/doc.pdf`: `application/pdf` with `Link: </pdf-canonical>; rel="canonical"`;
//! - `/both`: the header names `/from-header`, the HTML `/from-html` (the header wins: a
//!   crawler that follows the header's never requests `/from-html`);
//! - `/offsite`: names `http://elsewhere.test/x`, outside any seed-domain scope;
//! - `/self`: names itself.
//!
//! [`CANONICAL_EXPECTED`] lists, per page, the canonical URL its record must show.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE, LINK};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// The corner's host.
pub const CANONICAL_HOST: &str = "canonical.test";

/// (page, its canonical URL) for each page linked from `/`.
pub const CANONICAL_EXPECTED: &[(&str, &str)] = &[
    ("/dup", "http://canonical.test/only-canonical"),
    ("/doc.pdf", "http://canonical.test/pdf-canonical"),
    ("/both", "http://canonical.test/from-header"),
    ("/offsite", "http://elsewhere.test/x"),
    ("/self", "http://canonical.test/self"),
];

/// Pages reachable only as somebody's (followed) canonical URL.
pub const CANONICAL_ONLY: &[&str] = &["/only-canonical", "/pdf-canonical", "/from-header"];

/// The answer for `host` and `path` if `host` is the corner's, else `None`.
pub(crate) fn answer(host: &str, path: &str) -> Option<Response<WebBody>> {
    if host != CANONICAL_HOST {
        return None;
    }
    Some(match path {
        "/" => {
            let links: String = CANONICAL_EXPECTED
                .iter()
                .map(|(p, _)| format!("<a href=\"{p}\">{p}</a>\n"))
                .collect();
            html(&format!("<title>canonical</title>{links}"), None)
        }
        "/dup" => html(
            "<link rel=\"stylesheet\" href=\"/s.css\"><link rel=\"canonical\" href=\"/only-canonical\">",
            None,
        ),
        "/doc.pdf" => {
            let mut r = html("", Some("</pdf-canonical>; rel=\"canonical\""));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/pdf"));
            r
        }
        "/both" => html(
            "<link rel=canonical href=/from-html>",
            Some("<http://canonical.test/de>; rel=\"alternate\"; hreflang=de, </from-header>; rel=\"canonical\""),
        ),
        "/offsite" => html(
            "<link rel=canonical href=\"http://elsewhere.test/x\">",
            None,
        ),
        "/self" => html("<link rel=canonical href=\"/self\">", None),
        _ if CANONICAL_ONLY.contains(&path) || path == "/from-html" => html("<p>canonical</p>", None),
        _ => {
            let mut r = html("no such page", None);
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    })
}

fn html(content: &str, link: Option<&'static str>) -> Response<WebBody> {
    let body = format!("<!doctype html><html><head>{content}</head><body></body></html>");
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Some(link) = link {
        r.headers_mut().insert(LINK, HeaderValue::from_static(link));
    }
    r
}
