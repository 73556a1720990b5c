//! The charsets corner (feature `charsets`): pages in legacy encodings whose links have
//! non-ASCII paths and queries, on the host [`CHARSETS_HOST`].
//!
//! A crawler that decodes a page in the wrong encoding, or encodes a link's query in UTF-8
//! when the page is not UTF-8, requests URLs the server does not have. Each page here
//! declares its encoding one way (Content-Type, `<meta charset>`, `<meta http-equiv>`, a
//! byte-order mark that overrides a wrong Content-Type, a `<meta>` too late to count) and
//! links one URL; [`CHARSET_TARGETS`] holds the exact request target a correct crawler sends
//! for each, written out by hand from the WHATWG URL standard (a path is always
//! percent-encoded as UTF-8, a query in the document's encoding). Any other request to the
//! host is a 404 that shows in the server's log.
//!
//! The encoded bytes are constants (checked against Python's codecs when written): the
//! corner does not use the crawler's encoding library, so it cannot share its mistakes.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// The corner's host.
pub const CHARSETS_HOST: &str = "charsets.test";

/// The pages linked from the corner's home page `/`, each with its own encoding.
pub const CHARSET_PAGES: &[&str] = &["/sjis", "/cp1252", "/gbk", "/bom", "/late-meta"];

/// The request targets (path and query) that a correct crawler derives from the links of
/// [`CHARSET_PAGES`], in that order.
pub const CHARSET_TARGETS: &[&str] = &[
    // Shift_JIS by Content-Type: `/ja/検索?q=日本`.
    "/ja/%E6%A4%9C%E7%B4%A2?q=%93%FA%96%7B",
    // windows-1252 by `<meta http-equiv>`: `/fr/café?q=naïve€`.
    "/fr/caf%C3%A9?q=na%EFve%80",
    // GBK by `<meta charset>`: `/zh/中文?q=搜索`.
    "/zh/%E4%B8%AD%E6%96%87?q=%CB%D1%CB%F7",
    // A UTF-8 byte-order mark over `charset=gbk`: `/bom/é?q=é` in UTF-8.
    "/bom/%C3%A9?q=%C3%A9",
    // `<meta charset=gbk>` after 1,024 bytes does not count: GBK `中` read as UTF-8 is
    // invalid UTF-8: each of its two bytes becomes one U+FFFD.
    "/late/%EF%BF%BD%EF%BF%BD?q=%EF%BF%BD%EF%BF%BD",
];

/// The answer for `host` and `path` if `host` is the corner's, else `None`.
pub(crate) fn answer(host: &str, path: &str) -> Option<Response<WebBody>> {
    if host != CHARSETS_HOST {
        return None;
    }
    Some(match path {
        "/" => {
            let links: String = CHARSET_PAGES
                .iter()
                .map(|p| format!("<a href=\"{p}\">{p}</a>\n"))
                .collect();
            page(
                "text/html; charset=utf-8",
                format!("<!doctype html><title>charsets</title>{links}").into_bytes(),
            )
        }
        "/sjis" => page(
            "text/html; charset=Shift_JIS",
            html(b"", b"/ja/\x8c\x9f\x8d\xf5?q=\x93\xfa\x96\x7b"),
        ),
        "/cp1252" => page(
            "text/html",
            html(
                b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\">",
                b"/fr/caf\xe9?q=na\xefve\x80",
            ),
        ),
        "/gbk" => page(
            "text/html",
            html(
                b"<meta charset=\"GBK\">",
                b"/zh/\xd6\xd0\xce\xc4?q=\xcb\xd1\xcb\xf7",
            ),
        ),
        "/bom" => {
            let mut body = b"\xef\xbb\xbf".to_vec();
            body.extend(html(b"", "/bom/é?q=é".as_bytes()));
            page("text/html; charset=gbk", body)
        }
        "/late-meta" => {
            let padding = format!("<!-- {} -->", "x".repeat(1100));
            let mut head = padding.into_bytes();
            head.extend_from_slice(b"<meta charset=gbk>");
            page("text/html", html(&head, b"/late/\xd6\xd0?q=\xd6\xd0"))
        }
        _ if CHARSET_TARGETS.contains(&path) => page(
            "text/html; charset=utf-8",
            b"<!doctype html><p>found</p>".to_vec(),
        ),
        _ => {
            let mut r = page("text/plain", b"no such page\n".to_vec());
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    })
}

/// A page whose `<head>` holds `head` and whose body links `href` (both raw bytes).
fn html(head: &[u8], href: &[u8]) -> Vec<u8> {
    let mut out = b"<!doctype html><html><head>".to_vec();
    out.extend_from_slice(head);
    out.extend_from_slice(b"<title>t</title></head><body><a href=\"");
    out.extend_from_slice(href);
    out.extend_from_slice(b"\">link</a></body></html>");
    out
}

fn page(content_type: &'static str, body: Vec<u8>) -> Response<WebBody> {
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
