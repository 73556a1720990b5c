//! The sitemaps corner (feature `sitemaps`): a site on the host [`SITEMAPS_HOST`] most of
//! whose pages are listed only in its sitemaps.
//!
//! - `/robots.txt`: `Disallow: /private/` and `Sitemap: http://sitemaps.test/sitemap_index.xml`;
//! - `/`: links only `/linked`;
//! - `/sitemap.xml` (found only by a crawler that tries it): lists `/from-root-sitemap`;
//! - `/sitemap_index.xml`, a `<sitemapindex>` of:
//!   - `/sitemaps/pages.xml.gz`: gzip, served as `application/x-gzip`; lists
//!     [`SITEMAP_ONLY`] `/only-in-sitemap/1..=3` (with `<lastmod>`), `/linked` (also linked)
//!     and `http://elsewhere.test/x` (off-site: must be refused by scope);
//!   - `/sitemaps/big.xml`: [`BIG_SITEMAP_ENTRIES`] entries, 50,001: fifty thousand times
//!     `/from-big`, then `/beyond-limit`, which a crawler honouring the protocol's 50,000
//!     never requests;
//!   - `/sitemaps/broken.xml`: lists `/from-broken`, then breaks off mid-element;
//!   - `/private/sitemap.xml`: disallowed by robots.txt, never to be requested (it would
//!     list `/from-private`).
//!
//! Every listed page (and `/linked`) is a small HTML page that links home. Anything else
//! is a 404 that shows in the log.

use std::io::Write;
use std::sync::OnceLock;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// The corner's host.
pub const SITEMAPS_HOST: &str = "sitemaps.test";
/// Entries in `/sitemaps/big.xml`: one over the protocol's limit.
pub const BIG_SITEMAP_ENTRIES: usize = 50_001;
/// Pages listed in a sitemap and linked from nowhere.
pub const SITEMAP_ONLY: &[&str] = &[
    "/only-in-sitemap/1",
    "/only-in-sitemap/2",
    "/only-in-sitemap/3",
    "/from-root-sitemap",
    "/from-big",
    "/from-broken",
];
/// The sitemaps a correct crawler with sitemaps on fetches.
pub const SITEMAP_FILES: &[&str] = &[
    "/sitemap.xml",
    "/sitemap_index.xml",
    "/sitemaps/pages.xml.gz",
    "/sitemaps/big.xml",
    "/sitemaps/broken.xml",
];
/// `<lastmod>` of `/only-in-sitemap/{i}` in `/sitemaps/pages.xml.gz`.
pub fn sitemap_lastmod(i: usize) -> String {
    format!("2026-11-{:02}", i + 10)
}

const HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"";

/// The answer for `host` and `path` if `host` is the corner's, else `None`.
pub(crate) fn answer(host: &str, path: &str) -> Option<Response<WebBody>> {
    if host != SITEMAPS_HOST {
        return None;
    }
    let url = |p: &str| format!("http://{SITEMAPS_HOST}{p}");
    Some(match path {
        "/robots.txt" => full(
            "text/plain",
            format!(
                "User-agent: *\nDisallow: /private/\n\nSitemap: {}\n",
                url("/sitemap_index.xml")
            )
            .into_bytes(),
        ),
        "/" => html("<a href=\"/linked\">linked</a>"),
        "/sitemap.xml" => xml(urlset(&[(url("/from-root-sitemap"), None)])),
        "/sitemap_index.xml" => {
            let mut s = format!("{HEAD}<sitemapindex {NS}>\n");
            for p in [
                "/sitemaps/pages.xml.gz",
                "/sitemaps/big.xml",
                "/sitemaps/broken.xml",
                "/private/sitemap.xml",
            ] {
                s.push_str(&format!(
                    "<sitemap><loc>{}</loc><lastmod>2026-11-01</lastmod></sitemap>\n",
                    url(p)
                ));
            }
            s.push_str("</sitemapindex>\n");
            xml(s)
        }
        "/sitemaps/pages.xml.gz" => {
            let mut entries: Vec<(String, Option<String>)> = (1..=3)
                .map(|i| {
                    (
                        url(&format!("/only-in-sitemap/{i}")),
                        Some(sitemap_lastmod(i)),
                    )
                })
                .collect();
            entries.push((url("/linked"), None));
            entries.push(("http://elsewhere.test/x".to_string(), None));
            full("application/x-gzip", gzip(urlset(&entries).as_bytes()))
        }
        "/sitemaps/big.xml" => {
            static BIG: OnceLock<Bytes> = OnceLock::new();
            let body = BIG.get_or_init(|| {
                let entry = format!("<url><loc>{}</loc></url>\n", url("/from-big"));
                let mut s = format!("{HEAD}<urlset {NS}>\n");
                s.reserve(entry.len() * BIG_SITEMAP_ENTRIES);
                for _ in 1..BIG_SITEMAP_ENTRIES {
                    s.push_str(&entry);
                }
                s.push_str(&format!("<url><loc>{}</loc></url>\n", url("/beyond-limit")));
                s.push_str("</urlset>\n");
                Bytes::from(s)
            });
            let mut r = Response::new(WebBody::Full(Some(body.clone())));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
            r
        }
        "/sitemaps/broken.xml" => xml(format!(
            "{HEAD}<urlset {NS}>\n<url><loc>{}</loc></url>\n<url><loc>{}</lo",
            url("/from-broken"),
            url("/after-break")
        )),
        "/private/sitemap.xml" => xml(urlset(&[(url("/from-private"), None)])),
        "/linked" => html("<a href=\"/\">home</a>"),
        _ if SITEMAP_ONLY.contains(&path) || path == "/beyond-limit" || path == "/from-private" => {
            html("<a href=\"/\">home</a>")
        }
        _ => {
            let mut r = full("text/plain", b"no such page\n".to_vec());
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    })
}

fn urlset(entries: &[(String, Option<String>)]) -> String {
    let mut s = format!("{HEAD}<urlset {NS}>\n");
    for (loc, lastmod) in entries {
        s.push_str("<url><loc>");
        s.push_str(loc);
        s.push_str("</loc>");
        if let Some(lastmod) = lastmod {
            s.push_str(&format!("<lastmod>{lastmod}</lastmod>"));
        }
        s.push_str("</url>\n");
    }
    s.push_str("</urlset>\n");
    s
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

fn xml(body: String) -> Response<WebBody> {
    full("application/xml", body.into_bytes())
}

fn html(body: &str) -> Response<WebBody> {
    full(
        "text/html; charset=utf-8",
        format!("<!doctype html><title>t</title>{body}").into_bytes(),
    )
}

fn full(content_type: &'static str, body: Vec<u8>) -> Response<WebBody> {
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
