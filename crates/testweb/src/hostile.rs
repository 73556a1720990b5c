//! The hostile corner of the synthetic web: virtual hosts that misbehave on purpose, each
//! on a host name of its own so that one cannot disturb another (politeness, robots.txt and
//! connection pools are per host in any crawler).
//!
//! # Where they live
//! Served only by a server started with [`crate::TestWebServer::start_hostile`] (or
//! `testweb --hostile`); a plain server answers 404 for these names, as before.
//! - `NAME.hostile.test`: answered by hyper on the synthetic web's own listener (the same
//!   `*.test` resolve entry as `h0.test`).
//! - `NAME.raw.test`: answered by the raw-socket responder (`raw.rs`), a second listener,
//!   because hyper refuses to produce what these hosts send (garbage status lines, headers
//!   trickling in). The crawler maps them with a second entry, `*.raw.test`
//!   ([`crate::TestWebServer::resolve_entries`]); the longer wildcard wins.
//! - The **canary**: a third listener on 127.0.0.1 that answers nothing and counts every
//!   connection ([`crate::TestWebServer::canary_connections`]). Pages redirect to it by IP
//!   literal; a crawl must never map it with `[network] resolve` nor seed it, so to the
//!   crawler it is a private address, and any connection to it is a request the crawler
//!   should not have made. `169.254.169.254` (the cloud metadata address) appears only as a
//!   link and a `Location`; nothing ever listens there, so a crawler that tries it just
//!   waits for its connect timeout, but a test must assert it was never attempted.
//!
//! Every host's `/robots.txt` is a plain 404 unless its row says otherwise. Every request to
//! either listener is in the server's request log (the raw responder logs the status it
//! sent, 999 included). The table of hosts is [`Hostile::ALL`]; each has
//! [`Hostile::behaviour`] and [`Hostile::crawler_must`].
//!
//! # Guarantees
//! - **Cheap.** Nothing big is held in memory: the huge `<base>`, the million links and the
//!   endless body are generated block by block as the client reads; the compression bombs
//!   are a few precomputed compressed blocks (computed once, on first request) repeated.
//!   The `h{i}.many.hostile.test` pages are a few dozen bytes each.
//! - **Honest bombs.** The gzip and brotli bombs are valid streams: read to the end they
//!   decompress to [`BOMB_MIB`] MiB of `<html><body>` and spaces, with a correct gzip CRC.
//! - **Deterministic.** No randomness; every answer depends only on host and path.

use std::sync::OnceLock;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use hyper::{Response, StatusCode};

use super::server::WebBody;

/// Parent domain of the hosts answered by hyper on the synthetic web's listener.
pub const HOSTILE_DOMAIN: &str = "hostile.test";
/// Parent domain of the hosts answered by the raw-socket responder.
pub const RAW_DOMAIN: &str = "raw.test";
/// Hosts `h0.many.hostile.test` … linked from `many.hostile.test/`: a host list as long
/// as real ones (a directory, a link farm, a "who links here"), far past any count cap
/// that loses real pages.
pub const MANY_HOSTS: u32 = 50_000;
/// Links on `wide-index.hostile.test/`: an API index or source listing (real ones have up
/// to 75,000).
pub const WIDE_INDEX_LINKS: u32 = 80_000;
/// Links on `million-links.hostile.test/`.
pub const MILLION_LINKS: u32 = 1_000_000;
/// Length of the `<base href>` of `huge-base.hostile.test/`.
pub const HUGE_BASE_BYTES: usize = 4 << 20;
/// Relative links after that `<base>`: each would resolve to a URL of 4 MiB.
pub const HUGE_BASE_LINKS: u32 = 10_000;
/// Decompressed size of each compression bomb, in MiB (about 3.9 GiB).
pub const BOMB_MIB: u64 = 4034;
/// `Crawl-delay` and `Retry-After` of the hosts that ask for huge delays: one day.
pub const HUGE_DELAY_SECS: u64 = 86_400;

/// One misbehaving virtual host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hostile {
    PrivateRedirect,
    PrivateRobots,
    HugeBase,
    MillionLinks,
    CrawlDelay,
    RetryAfter,
    Slowloris,
    EndlessBody,
    GzipBomb,
    BrotliBomb,
    EndlessRedirect,
    GarbageStatus,
    NoReason,
    BadHeaderBytes,
    NoColon,
    NotHttp,
    ShiftJis,
    LyingBom,
    ManyHosts,
    WideIndex,
    Calendar,
    SessionSpiral,
    RepeatingPath,
}

impl Hostile {
    pub const ALL: &'static [Hostile] = &[
        Hostile::PrivateRedirect,
        Hostile::PrivateRobots,
        Hostile::HugeBase,
        Hostile::MillionLinks,
        Hostile::CrawlDelay,
        Hostile::RetryAfter,
        Hostile::Slowloris,
        Hostile::EndlessBody,
        Hostile::GzipBomb,
        Hostile::BrotliBomb,
        Hostile::EndlessRedirect,
        Hostile::GarbageStatus,
        Hostile::NoReason,
        Hostile::BadHeaderBytes,
        Hostile::NoColon,
        Hostile::NotHttp,
        Hostile::ShiftJis,
        Hostile::LyingBom,
        Hostile::ManyHosts,
        Hostile::WideIndex,
        Hostile::Calendar,
        Hostile::SessionSpiral,
        Hostile::RepeatingPath,
    ];

    /// The traps: hosts that make up pages forever, each of whose pages looks like a
    /// page worth crawling.
    pub const TRAPS: &'static [Hostile] = &[
        Hostile::Calendar,
        Hostile::SessionSpiral,
        Hostile::RepeatingPath,
    ];

    /// The first label of the host name.
    pub fn name(self) -> &'static str {
        match self {
            Hostile::PrivateRedirect => "private-redirect",
            Hostile::PrivateRobots => "private-robots",
            Hostile::HugeBase => "huge-base",
            Hostile::MillionLinks => "million-links",
            Hostile::CrawlDelay => "crawl-delay",
            Hostile::RetryAfter => "retry-after",
            Hostile::Slowloris => "slowloris",
            Hostile::EndlessBody => "endless-body",
            Hostile::GzipBomb => "gzip-bomb",
            Hostile::BrotliBomb => "brotli-bomb",
            Hostile::EndlessRedirect => "endless-redirect",
            Hostile::GarbageStatus => "garbage-status",
            Hostile::NoReason => "no-reason",
            Hostile::BadHeaderBytes => "bad-header-bytes",
            Hostile::NoColon => "no-colon",
            Hostile::NotHttp => "not-http",
            Hostile::ShiftJis => "shift-jis",
            Hostile::LyingBom => "lying-bom",
            Hostile::ManyHosts => "many",
            Hostile::WideIndex => "wide-index",
            Hostile::Calendar => "calendar",
            Hostile::SessionSpiral => "session-spiral",
            Hostile::RepeatingPath => "repeating-path",
        }
    }

    /// Served by the raw-socket responder (`NAME.raw.test`) rather than hyper.
    pub fn is_raw(self) -> bool {
        matches!(
            self,
            Hostile::Slowloris
                | Hostile::GarbageStatus
                | Hostile::NoReason
                | Hostile::BadHeaderBytes
                | Hostile::NoColon
                | Hostile::NotHttp
        )
    }

    /// `NAME.hostile.test` or `NAME.raw.test`.
    pub fn host(self) -> String {
        let domain = if self.is_raw() {
            RAW_DOMAIN
        } else {
            HOSTILE_DOMAIN
        };
        format!("{}.{domain}", self.name())
    }

    /// The home page, the URL to seed.
    pub fn seed(self) -> String {
        format!("http://{}/", self.host())
    }

    /// What the host does.
    pub fn behaviour(self) -> &'static str {
        match self {
            Hostile::PrivateRedirect => "/ links /to-canary, /to-metadata, /to-localhost (302 to http://127.0.0.1:CANARY/…, http://169.254.169.254/latest/meta-data/, http://localhost:CANARY/…) and the same private URLs literally",
            Hostile::PrivateRobots => "/robots.txt 302 to http://127.0.0.1:CANARY/robots.txt; / links /after",
            Hostile::HugeBase => "/ declares a 4 MiB <base href> followed by 10,000 relative links",
            Hostile::MillionLinks => "/ streams 1,000,000 links /l/{i} (about 25 MB); each /l/{i} is a tiny page",
            Hostile::CrawlDelay => "robots.txt says Crawl-delay: 86400; / links /a, /b, /c",
            Hostile::RetryAfter => "/ answers 503 with Retry-After: 86400, always",
            Hostile::Slowloris => "status line, then one header byte per second, for an hour",
            Hostile::EndlessBody => "200 text/html, chunked, a body that never ends",
            Hostile::GzipBomb => "Content-Encoding: gzip, ~4 MB on the wire, ~3.9 GiB decompressed",
            Hostile::BrotliBomb => "Content-Encoding: br, a few KB on the wire, ~3.9 GiB decompressed",
            Hostile::EndlessRedirect => "/ 302 /r/1, /r/{n} 302 /r/{n+1}, forever",
            Hostile::GarbageStatus => "status line HTTP/1.1 999 ??? with an HTML body linking /child",
            Hostile::NoReason => "status line HTTP/1.1 200 (no reason phrase); / links /child",
            Hostile::BadHeaderBytes => "header values with invalid UTF-8 (charset=\\xff\\xfe, X-Junk); / links /child",
            Hostile::NoColon => "a header line with no colon in an otherwise valid answer",
            Hostile::NotHttp => "answers an SSH banner instead of HTTP and closes",
            Hostile::ShiftJis => "text/html; charset=Shift_JIS with invalid byte sequences around links /sjis/1, /sjis/2",
            Hostile::LyingBom => "declared UTF-8, body starts with a UTF-16LE BOM, then UTF-8 HTML linking /bom/1",
            Hostile::ManyHosts => "/ links http://h{i}.many.hostile.test/ for 50,000 hosts, each a tiny page",
            Hostile::WideIndex => "/ links /item/{i} for 80,000 items (about 3 MB), each a tiny page",
            Hostile::Calendar => "/ links /cal/2026/11; /cal/{y}/{m} is a month (a 6 x 7 grid of day numbers) linking the previous and next month, forever",
            Hostile::SessionSpiral => "/ links /s/1000/; /s/{id}/ greets session {id} and links /s/{id+1}/ and /s/{id+1}/help, /s/{id}/help links /s/{id+1}/: a new session id in every link, forever",
            Hostile::RepeatingPath => "/ links more/ relatively, and so does /more/…/more/ at any depth (the same page, 200)",
        }
    }

    /// What a crawler must do with it.
    pub fn crawler_must(self) -> &'static str {
        match self {
            Hostile::PrivateRedirect | Hostile::PrivateRobots => {
                "never connect to the canary or 169.254.169.254; record the redirects with an error"
            }
            Hostile::HugeBase => {
                "refuse the over-long URLs before building them; memory stays small"
            }
            Hostile::MillionLinks => "bound the links taken from one page; memory stays small",
            Hostile::CrawlDelay => "cap Crawl-delay (politeness.max_crawl_delay_secs) and finish",
            Hostile::RetryAfter => "cap Retry-After, retry as configured, record the 503",
            Hostile::Slowloris => "give up at crawl.timeout_secs and record a timeout",
            Hostile::EndlessBody => "stop at crawl.max_body_bytes and record the page as truncated",
            Hostile::GzipBomb | Hostile::BrotliBomb => {
                "stop at crawl.max_body_bytes counted after decompression"
            }
            Hostile::EndlessRedirect => "stop after crawl.max_redirects hops",
            Hostile::GarbageStatus
            | Hostile::NoReason
            | Hostile::BadHeaderBytes
            | Hostile::NoColon
            | Hostile::NotHttp => "record the page (or the error) once and go on",
            Hostile::ShiftJis | Hostile::LyingBom => "decode leniently, record the page once",
            Hostile::ManyHosts => {
                "serve thousands of hosts without running out of file descriptors or memory; take every link of the list"
            }
            Hostile::WideIndex => "take every link of the page (no count cap below real pages)",
            Hostile::Calendar | Hostile::SessionSpiral | Hostile::RepeatingPath => {
                "stop within 10 pages whatever max_depth is (near-duplicate pages, URL-shape limits)"
            }
        }
    }

    /// The hostile host (hyper-served) that `host` names, with the `i` of `h{i}.many…`.
    fn from_host(host: &str) -> Option<(Hostile, Option<u32>)> {
        let label = host.strip_suffix(HOSTILE_DOMAIN)?.strip_suffix('.')?;
        if let Some(i) = label
            .strip_suffix(".many")
            .and_then(|h| h.strip_prefix('h'))
        {
            // Canonical decimal only: `h007` is not a host of the set.
            let n: u32 = i.parse().ok()?;
            return (n < MANY_HOSTS && n.to_string() == i).then_some((Hostile::ManyHosts, Some(n)));
        }
        Hostile::ALL
            .iter()
            .find(|h| !h.is_raw() && h.name() == label)
            .map(|&h| (h, None))
    }

    /// The raw-responder host that `host` names.
    pub(crate) fn from_raw_host(host: &str) -> Option<Hostile> {
        let label = host.strip_suffix(RAW_DOMAIN)?.strip_suffix('.')?;
        Hostile::ALL
            .iter()
            .find(|h| h.is_raw() && h.name() == label)
            .copied()
    }
}

/// Answers a request to a `*.hostile.test` host; `None` for any other host (the caller
/// routes it to the synthetic web). `host` is lower-case without port.
pub(crate) fn answer(canary_port: u16, host: &str, path: &str) -> Option<Response<WebBody>> {
    if !host
        .strip_suffix(HOSTILE_DOMAIN)
        .is_some_and(|label| label.ends_with('.'))
    {
        return None;
    }
    let Some((which, many)) = Hostile::from_host(host) else {
        return Some(text(StatusCode::NOT_FOUND, "no such hostile host\n"));
    };
    Some(route(which, many, canary_port, path))
}

fn route(which: Hostile, many: Option<u32>, canary: u16, path: &str) -> Response<WebBody> {
    use Hostile as H;
    match (which, path) {
        (H::PrivateRobots, "/robots.txt") => {
            redirect(&format!("http://127.0.0.1:{canary}/robots.txt"))
        }
        (H::CrawlDelay, "/robots.txt") => {
            let body = format!("User-agent: *\nCrawl-delay: {HUGE_DELAY_SECS}\nAllow: /\n");
            let mut r = full(StatusCode::OK, "text/plain", body.into_bytes());
            set(&mut r, CONTENT_TYPE, "text/plain");
            r
        }
        (_, "/robots.txt") => text(StatusCode::NOT_FOUND, "no robots.txt\n"),
        (H::PrivateRedirect, "/") => html(format!(
            "<html><body><a href=\"/to-canary\">a</a> <a href=\"/to-metadata\">b</a> \
             <a href=\"/to-localhost\">c</a> <a href=\"http://127.0.0.1:{canary}/literal\">d</a> \
             <a href=\"http://169.254.169.254/latest/meta-data/\">e</a></body></html>"
        )),
        (H::PrivateRedirect, "/to-canary") => {
            redirect(&format!("http://127.0.0.1:{canary}/redirected"))
        }
        (H::PrivateRedirect, "/to-metadata") => {
            redirect("http://169.254.169.254/latest/meta-data/")
        }
        (H::PrivateRedirect, "/to-localhost") => {
            redirect(&format!("http://localhost:{canary}/by-name"))
        }
        (H::PrivateRobots, "/") => html("<html><body><a href=\"/after\">after</a></body></html>".into()),
        (H::HugeBase, "/") => stream_html(huge_base()),
        (H::MillionLinks, "/") => stream_html(million_links()),
        (H::MillionLinks, p) if p.starts_with("/l/") => tiny(),
        (H::CrawlDelay, "/") => html(
            "<html><body><a href=\"/a\">a</a> <a href=\"/b\">b</a> <a href=\"/c\">c</a></body></html>"
                .into(),
        ),
        (H::CrawlDelay, "/a" | "/b" | "/c") => tiny(),
        (H::RetryAfter, "/") => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "come back tomorrow\n");
            if let Ok(v) = HeaderValue::from_str(&HUGE_DELAY_SECS.to_string()) {
                r.headers_mut().insert(RETRY_AFTER, v);
            }
            r
        }
        (H::EndlessBody, "/") => stream_html(endless()),
        (H::GzipBomb, "/") => bomb_response(Codec::Gzip),
        (H::BrotliBomb, "/") => bomb_response(Codec::Brotli),
        (H::EndlessRedirect, "/") => redirect("/r/1"),
        (H::EndlessRedirect, p) => match p.strip_prefix("/r/").and_then(|n| n.parse::<u64>().ok()) {
            Some(n) => redirect(&format!("/r/{}", n.saturating_add(1))),
            None => text(StatusCode::NOT_FOUND, "not here\n"),
        },
        (H::ShiftJis, "/") => {
            // 0x82 0xA0 is a valid Shift_JIS pair; 0x81 followed by a space, a lone 0xFF and
            // a lead byte at the end of an attribute are not.
            let mut body = b"<html><head><meta charset=\"Shift_JIS\"></head><body>\x82\xa0 \x81 \xff <a href=\"/sjis/1\">\x81</a> \x85\x7f <a href=\"/sjis/2\" title=\"\x9f\">x</a>\xef</body></html>".to_vec();
            body.push(0x81);
            full(StatusCode::OK, "text/html; charset=Shift_JIS", body)
        }
        (H::ShiftJis, "/sjis/1" | "/sjis/2") => tiny(),
        (H::LyingBom, "/") => {
            let mut body = vec![0xff, 0xfe];
            body.extend_from_slice(b"<html><body><a href=\"/bom/1\">one</a></body></html>");
            full(StatusCode::OK, "text/html; charset=utf-8", body)
        }
        (H::LyingBom, "/bom/1") => tiny(),
        (H::ManyHosts, "/") if many.is_none() => stream_html(many_hosts()),
        (H::ManyHosts, "/") => tiny(),
        (H::WideIndex, "/") => stream_html(wide_index()),
        (H::WideIndex, p) if p.starts_with("/item/") => tiny(),
        (H::Calendar, "/") => html("<html><body><a href=\"/cal/2026/11\">Calendar</a></body></html>".into()),
        (H::Calendar, p) => match calendar_month(p) {
            Some((year, month)) => html(calendar_page(year, month)),
            None => text(StatusCode::NOT_FOUND, "not here\n"),
        },
        (H::SessionSpiral, "/") => html("<html><body><a href=\"/s/1000/\">Log in</a></body></html>".into()),
        (H::SessionSpiral, p) => match session_page(p) {
            Some(body) => html(body),
            None => text(StatusCode::NOT_FOUND, "not here\n"),
        },
        (H::RepeatingPath, p) if p.split_terminator('/').skip(1).all(|s| s == "more") && p.ends_with('/') => {
            html("<html><body><h1>Archive</h1><a href=\"more/\">More</a></body></html>".into())
        }
        _ => text(StatusCode::NOT_FOUND, "not here\n"),
    }
}

fn set(r: &mut Response<WebBody>, name: hyper::header::HeaderName, value: &'static str) {
    r.headers_mut()
        .insert(name, HeaderValue::from_static(value));
}

fn full(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<WebBody> {
    let mut r = Response::new(WebBody::Full(Some(Bytes::from(body))));
    *r.status_mut() = status;
    set(&mut r, CONTENT_TYPE, content_type);
    r
}

fn text(status: StatusCode, body: &'static str) -> Response<WebBody> {
    full(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

fn html(body: String) -> Response<WebBody> {
    full(
        StatusCode::OK,
        "text/html; charset=utf-8",
        body.into_bytes(),
    )
}

fn tiny() -> Response<WebBody> {
    html("<html><body><p>tiny</p></body></html>".into())
}

fn redirect(location: &str) -> Response<WebBody> {
    let mut r = text(StatusCode::FOUND, "moved\n");
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

fn stream_html(blocks: impl Iterator<Item = Bytes> + Send + 'static) -> Response<WebBody> {
    let mut r = Response::new(WebBody::Stream(Box::new(blocks)));
    set(&mut r, CONTENT_TYPE, "text/html; charset=utf-8");
    r
}

/// Bytes per generated block: large enough that hyper's per-frame cost is nothing, small
/// enough that a block costs no memory worth counting.
const BLOCK: usize = 64 * 1024;

fn repeated(byte: u8, len: usize) -> Bytes {
    Bytes::from(vec![byte; len])
}

/// `<base href="http://huge-base.hostile.test/aaaa…/">` (4 MiB) then relative links.
fn huge_base() -> impl Iterator<Item = Bytes> + Send {
    let filler = repeated(b'a', BLOCK);
    let rest = filler.slice(..HUGE_BASE_BYTES % BLOCK);
    std::iter::once(Bytes::from_static(
        b"<html><head><base href=\"http://huge-base.hostile.test/",
    ))
    .chain(std::iter::repeat_n(filler, HUGE_BASE_BYTES / BLOCK))
    .chain(std::iter::once(rest))
    .chain(link_blocks(
        b"/\"></head><body>\n",
        HUGE_BASE_LINKS,
        |i, s| s.push_str(&format!("<a href=\"p{i}\">{i}</a>\n")),
    ))
}

/// A million `<a href="/l/{i}">` in blocks of 2,000 links.
fn million_links() -> impl Iterator<Item = Bytes> + Send {
    link_blocks(b"<html><body>\n", MILLION_LINKS, |i, s| {
        s.push_str(&format!("<a href=\"/l/{i}\">{i}</a>\n"))
    })
}

/// `<a href="http://h{i}.many.hostile.test/">` for every host of the set.
fn many_hosts() -> impl Iterator<Item = Bytes> + Send {
    link_blocks(b"<html><body>\n", MANY_HOSTS, |i, s| {
        s.push_str(&format!(
            "<a href=\"http://h{i}.many.hostile.test/\">h{i}</a>\n"
        ))
    })
}

/// `<a href="/item/{i}">` for the wide index's items.
fn wide_index() -> impl Iterator<Item = Bytes> + Send {
    link_blocks(b"<html><body>\n", WIDE_INDEX_LINKS, |i, s| {
        s.push_str(&format!("<a href=\"/item/{i}\">item {i}</a>\n"))
    })
}

/// `(year, month)` of a calendar path `/cal/{year}/{month}` (any year, month 1 to 12).
fn calendar_month(path: &str) -> Option<(u32, u32)> {
    let (year, month) = path.strip_prefix("/cal/")?.split_once('/')?;
    let (year, month) = (year.parse().ok()?, month.parse().ok()?);
    (1..=12).contains(&month).then_some((year, month))
}

/// A month as calendars render it: its number, a 6 x 7 grid of day numbers (the days of
/// the neighbouring months fill the grid), and the previous and next month. Months differ
/// only in their digits.
fn calendar_page(year: u32, month: u32) -> String {
    let (prev_year, prev_month) = if month == 1 {
        (year.saturating_sub(1), 12)
    } else {
        (year, month - 1)
    };
    let (next_year, next_month) = if month == 12 {
        (year.saturating_add(1), 1)
    } else {
        (year, month + 1)
    };
    let mut s = format!(
        "<html><head><title>Events {year}-{month}</title></head><body><h1>{year}-{month}</h1>\
         <a href=\"/cal/{prev_year}/{prev_month}\">previous</a> <a href=\"/cal/{next_year}/{next_month}\">next</a>\
         <table>"
    );
    let first = (year.wrapping_mul(12).wrapping_add(month)) % 7;
    for week in 0..6u32 {
        s.push_str("<tr>");
        for day in 0..7u32 {
            let n = (week * 7 + day + 31 - first) % 31 + 1;
            s.push_str(&format!("<td>{n}</td>"));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table><a href=\"/\">home</a></body></html>");
    s
}

/// `/s/{id}/` and `/s/{id}/help` of the session spiral.
fn session_page(path: &str) -> Option<String> {
    let (id, page) = path.strip_prefix("/s/")?.split_once('/')?;
    let id: u64 = id.parse().ok()?;
    let next = id.saturating_add(1);
    match page {
        "" => Some(format!(
            "<html><body><p>Welcome back, session {id}. You have 0 new messages.</p>\
             <a href=\"/s/{next}/\">Inbox</a> <a href=\"/s/{next}/help\">Help</a></body></html>"
        )),
        "help" => Some(format!(
            "<html><body><p>Help for session {id}.</p><a href=\"/s/{next}/\">Back</a></body></html>"
        )),
        _ => None,
    }
}

/// `head`, then `count` links written by `link` in blocks of 2,000, then the closing tags.
fn link_blocks(
    head: &'static [u8],
    count: u32,
    link: impl Fn(u32, &mut String) + Send + 'static,
) -> impl Iterator<Item = Bytes> + Send {
    let mut next = 0u32;
    let mut stage = 0u8;
    std::iter::from_fn(move || match stage {
        0 => {
            stage = 1;
            Some(Bytes::from_static(head))
        }
        1 if next < count => {
            let end = next.saturating_add(2000).min(count);
            let mut s = String::with_capacity(60 * 2000);
            for i in next..end {
                link(i, &mut s);
            }
            next = end;
            Some(Bytes::from(s))
        }
        1 => {
            stage = 2;
            Some(Bytes::from_static(b"</body></html>\n"))
        }
        _ => None,
    })
}

/// `<html><body>` then `<p>endless</p>` forever.
fn endless() -> impl Iterator<Item = Bytes> + Send {
    let block = Bytes::from("<p>endless</p>\n".repeat(BLOCK / 15));
    std::iter::once(Bytes::from_static(b"<html><body>\n")).chain(std::iter::repeat(block))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codec {
    Gzip,
    Brotli,
}

fn bomb_response(codec: Codec) -> Response<WebBody> {
    let mut r = stream_html(bomb::stream(codec));
    set(
        &mut r,
        CONTENT_ENCODING,
        match codec {
            Codec::Gzip => "gzip",
            Codec::Brotli => "br",
        },
    );
    r
}

/// The compression bombs: a compressor is fed `<html><body>` and spaces one MiB at a time,
/// flushed after each MiB, until two MiB in a row compress to the same bytes (the
/// compressor's state no longer changes: same window contents, same output). From then on
/// that block stands for any number of MiB, so the stream is: the blocks up to there, the
/// steady block repeated, and the compressor's finishing bytes (for gzip our own trailer
/// with the CRC of the whole, computed without the data by CRC combination).
pub(crate) mod bomb {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The precomputed pieces of one bomb.
    pub(crate) struct Pieces {
        pub head: Bytes,
        /// [`UNITS_PER_BLOCK`] steady MiB, concatenated.
        pub block: Bytes,
        pub blocks: u64,
        pub tail: Bytes,
        /// Decompressed size in bytes (checked by the tests).
        #[cfg_attr(not(test), allow(dead_code))]
        pub size: u64,
    }

    const MIB: usize = 1 << 20;
    const UNITS_PER_BLOCK: u64 = 64;
    const PREFIX: &[u8] = b"<html><body>\n";

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Sink {
        fn take(&self) -> Vec<u8> {
            std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    enum Encoder {
        Deflate(flate2::write::DeflateEncoder<Sink>),
        Brotli(Box<brotli::CompressorWriter<Sink>>),
    }

    impl Encoder {
        fn feed(&mut self, data: &[u8]) -> std::io::Result<()> {
            match self {
                Encoder::Deflate(e) => {
                    e.write_all(data)?;
                    e.flush()
                }
                Encoder::Brotli(e) => {
                    e.write_all(data)?;
                    e.flush()
                }
            }
        }
        fn finish(self) -> std::io::Result<()> {
            match self {
                Encoder::Deflate(e) => e.finish().map(drop),
                Encoder::Brotli(e) => {
                    drop(e.into_inner());
                    Ok(())
                }
            }
        }
    }

    /// The pieces of a bomb of about `mib` MiB (at least the MiB it takes to reach the
    /// steady state). Panics only if the in-memory compressor fails, which it cannot.
    pub(crate) fn pieces(codec: Codec, mib: u64) -> Pieces {
        let sink = Sink::default();
        let mut encoder = match codec {
            Codec::Gzip => Encoder::Deflate(flate2::write::DeflateEncoder::new(
                sink.clone(),
                flate2::Compression::best(),
            )),
            Codec::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                sink.clone(),
                4096,
                5,
                22,
            ))),
        };
        let mut first = vec![b' '; MIB];
        first[..PREFIX.len()].copy_from_slice(PREFIX);
        let spaces = vec![b' '; MIB];
        let mut crc = flate2::Crc::new();
        crc.update(&first);
        let space_crc = {
            let mut c = flate2::Crc::new();
            c.update(&spaces);
            c.sum()
        };
        encoder.feed(&first).expect("in-memory compression");
        let mut head = sink.take();
        let mut fed: u64 = 1;
        let mut previous = Vec::new();
        let (steady, head_mib) = loop {
            encoder.feed(&spaces).expect("in-memory compression");
            fed += 1;
            let out = sink.take();
            if out == previous {
                // `head` holds the MiB before the first `previous`; `previous` == `out` is
                // the first steady MiB, `out` the second: `fed - 2` MiB are in `head`.
                break (out, fed - 2);
            }
            if fed >= 32 {
                // Never steady (a compressor that changes): no repetition, a smaller bomb.
                head.extend_from_slice(&previous);
                head.extend_from_slice(&out);
                break (Vec::new(), fed);
            }
            head.extend_from_slice(&previous);
            previous = out;
        };
        encoder.finish().expect("in-memory compression");
        let finish = sink.take();
        // The finishing bytes belong to the state after `fed` MiB, which the repetition
        // reaches after at least two steady MiB.
        let steady_mib = if steady.is_empty() {
            0
        } else {
            mib.saturating_sub(head_mib).max(2)
        };
        let blocks = steady_mib / UNITS_PER_BLOCK;
        let rest = steady_mib % UNITS_PER_BLOCK;
        let block: Vec<u8> = steady.repeat(UNITS_PER_BLOCK as usize);
        let mut tail = steady.repeat(rest as usize);
        let size = (head_mib + steady_mib) * MIB as u64;
        // The whole is `first` then spaces: its CRC is the first MiB's combined with that
        // of `size - MIB` spaces, built by doubling.
        let crc_all = super::crc::combine(
            crc.sum(),
            super::crc::of_repeated(space_crc, MIB as u64, size / MIB as u64 - 1),
            size - MIB as u64,
        );
        match codec {
            Codec::Gzip => {
                tail.extend_from_slice(&finish);
                tail.extend_from_slice(&crc_all.to_le_bytes());
                tail.extend_from_slice(&(size as u32).to_le_bytes());
                // Minimal gzip header: magic, deflate, no flags, no mtime, OS unknown.
                let mut h = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
                h.extend_from_slice(&head);
                head = h;
            }
            Codec::Brotli => tail.extend_from_slice(&finish),
        }
        Pieces {
            head: Bytes::from(head),
            block: Bytes::from(block),
            blocks,
            tail: Bytes::from(tail),
            size,
        }
    }

    /// The bomb of [`BOMB_MIB`] MiB, pieces computed once per codec on first use.
    pub(crate) fn stream(codec: Codec) -> impl Iterator<Item = Bytes> + Send {
        static GZIP: OnceLock<Pieces> = OnceLock::new();
        static BROTLI: OnceLock<Pieces> = OnceLock::new();
        let cell = match codec {
            Codec::Gzip => &GZIP,
            Codec::Brotli => &BROTLI,
        };
        let p = cell.get_or_init(|| pieces(codec, BOMB_MIB));
        std::iter::once(p.head.clone())
            .chain(std::iter::repeat_n(p.block.clone(), p.blocks as usize))
            .chain(std::iter::once(p.tail.clone()))
    }
}

/// CRC-32 (the gzip one) of concatenations, from the CRCs of the parts (zlib's
/// `crc32_combine`: appending `n` bytes is a linear map on the CRC, applied by squaring).
mod crc {
    fn times(mat: &[u32; 32], mut vec: u32) -> u32 {
        let mut sum = 0;
        let mut i = 0;
        while vec != 0 {
            if vec & 1 != 0 {
                sum ^= mat[i];
            }
            vec >>= 1;
            i += 1;
        }
        sum
    }

    fn square(mat: &[u32; 32]) -> [u32; 32] {
        let mut out = [0u32; 32];
        for (n, o) in out.iter_mut().enumerate() {
            *o = times(mat, mat[n]);
        }
        out
    }

    /// CRC of A‖B from crc(A), crc(B) and len(B).
    pub fn combine(mut crc1: u32, crc2: u32, mut len2: u64) -> u32 {
        if len2 == 0 {
            return crc1;
        }
        // The operator for one zero bit, then squared to two and four.
        let mut odd = [0u32; 32];
        odd[0] = 0xedb8_8320;
        let mut row = 1u32;
        for o in odd.iter_mut().skip(1) {
            *o = row;
            row <<= 1;
        }
        let mut even = square(&odd);
        odd = square(&even);
        loop {
            even = square(&odd);
            if len2 & 1 != 0 {
                crc1 = times(&even, crc1);
            }
            len2 >>= 1;
            if len2 == 0 {
                break;
            }
            odd = square(&even);
            if len2 & 1 != 0 {
                crc1 = times(&odd, crc1);
            }
            len2 >>= 1;
            if len2 == 0 {
                break;
            }
        }
        crc1 ^ crc2
    }

    /// CRC of `count` copies of a part of `len` bytes whose CRC is `crc`.
    pub fn of_repeated(crc: u32, len: u64, mut count: u64) -> u32 {
        // CRC of the empty string is 0.
        let (mut acc, mut acc_len) = (0u32, 0u64);
        let (mut pow, mut pow_len) = (crc, len);
        while count > 0 {
            if count & 1 != 0 {
                acc = combine(acc, pow, pow_len);
                acc_len += pow_len;
            }
            count >>= 1;
            if count > 0 {
                pow = combine(pow, pow, pow_len);
                pow_len *= 2;
            }
        }
        let _ = acc_len;
        acc
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn decompress_all(codec: Codec, p: &bomb::Pieces) -> (u64, bool) {
        let mut wire = p.head.to_vec();
        for _ in 0..p.blocks {
            wire.extend_from_slice(&p.block);
        }
        wire.extend_from_slice(&p.tail);
        let reader: Box<dyn Read> = match codec {
            Codec::Gzip => Box::new(flate2::read::GzDecoder::new(&wire[..])),
            Codec::Brotli => Box::new(brotli::Decompressor::new(&wire[..], 4096)),
        };
        let mut reader = reader;
        let mut buf = vec![0u8; 1 << 16];
        let (mut total, mut only_spaces) = (0u64, true);
        loop {
            let n = reader.read(&mut buf).expect("valid stream");
            if n == 0 {
                break;
            }
            let start = if total == 0 { 13 } else { 0 };
            only_spaces &= buf[start.min(n)..n].iter().all(|&b| b == b' ');
            total += n as u64;
        }
        (total, only_spaces)
    }

    #[test]
    fn bombs_are_valid_streams_of_the_stated_size() {
        for codec in [Codec::Gzip, Codec::Brotli] {
            let p = bomb::pieces(codec, 140);
            let (total, spaces) = decompress_all(codec, &p);
            assert_eq!(total, p.size, "{codec:?}");
            assert!(spaces, "{codec:?}");
            // 64 MiB decompressed per block: deflate cannot beat ~1032:1, brotli can.
            assert!(p.block.len() < 128 * 1024, "{codec:?}: {}", p.block.len());
            eprintln!("{codec:?}: {} MiB per {} wire bytes", 64, p.block.len());
        }
    }

    #[test]
    fn crc_combination_matches_direct() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let whole = {
            let mut c = flate2::Crc::new();
            c.update(&data);
            c.update(&data);
            c.update(&data);
            c.sum()
        };
        let part = {
            let mut c = flate2::Crc::new();
            c.update(&data);
            c.sum()
        };
        assert_eq!(crc::of_repeated(part, data.len() as u64, 3), whole);
    }

    #[test]
    fn hosts_route_by_name() {
        for &h in Hostile::ALL {
            if h.is_raw() {
                assert_eq!(Hostile::from_raw_host(&h.host()), Some(h));
            } else {
                assert_eq!(Hostile::from_host(&h.host()), Some((h, None)));
            }
        }
        assert_eq!(
            Hostile::from_host("h49999.many.hostile.test"),
            Some((Hostile::ManyHosts, Some(49_999)))
        );
        assert_eq!(Hostile::from_host("h50000.many.hostile.test"), None);
        assert_eq!(Hostile::from_host("h07.many.hostile.test"), None);
    }

    fn digitless(body: &str) -> String {
        body.replace(|c: char| c.is_ascii_digit(), "")
    }

    #[test]
    fn trap_pages_differ_only_in_their_digits() {
        let months: Vec<String> = [(2026, 11), (2026, 12), (2027, 1), (1999, 2)]
            .iter()
            .map(|&(y, m)| digitless(&calendar_page(y, m)))
            .collect();
        assert!(months.iter().all(|m| *m == months[0]), "{months:?}");
        assert_eq!(calendar_month("/cal/2026/12"), Some((2026, 12)));
        assert_eq!(calendar_month("/cal/2026/13"), None);
        let inbox = |p: &str| digitless(&session_page(p).unwrap());
        assert_eq!(inbox("/s/1000/"), inbox("/s/123456/"));
        assert_eq!(inbox("/s/1000/help"), inbox("/s/99/help"));
        assert_ne!(inbox("/s/1000/"), inbox("/s/1000/help"));
    }
}
