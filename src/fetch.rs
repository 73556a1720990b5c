//! Fetching one URL once: the shared reqwest client, name-resolution overrides, body
//! limits, and the facts the crawl needs from a response.
//!
//! One [`Fetcher`] (one reqwest client, one connection pool) serves every fetch task, so
//! connections to a host are reused across pages. The crawler offers the codings of
//! `network.accept_encoding` (`gzip, deflate` by default; `br` only when asked, since
//! common WARC readers fail on archived `br` bodies) and undoes the coding itself
//! ([`crate::content_coding`]) rather than letting reqwest do it, because the archive keeps
//! the bytes as sent ([`crate::warc`]): reqwest's automatic decompression would delete
//! `Content-Encoding` and `Content-Length`. The body is read chunk by chunk and never past
//! `max_body_bytes`, counted both as received and after decoding, so a small compressed
//! bomb cannot blow up memory; only bodies the crawl will parse (or archive) are kept.
//! Redirects are *not* followed here: the crawl treats a redirect target like a link
//! (normalized, scoped, checked against the seen-set), so loops end by themselves. Retries
//! are not done here either: the frontier schedules them so that a retry obeys the host's
//! rate limit like any request.
//!
//! Every request is first put to the [`RequestGate`] (scope, private addresses, see
//! [`crate::gate`]), and the client resolves names through the gate's resolver, so nothing
//! reaches the network that the gate did not allow. `[network] resolve` is part of that
//! resolver: a matching host name resolves to the configured address, and hyper keeps that
//! address's port when the URL has none, which is how many `http://*.test/` hosts reach one
//! loopback listener.
//!
//! Over https the client offers HTTP/2 by ALPN (reqwest's `http2` feature) and uses it where
//! the server picks it, one connection per origin carrying its requests as streams; it
//! trusts the system's roots plus `network.ca_file`. A certificate it does not accept fails
//! that URL at once with "certificate rejected: …" (not retried: the same certificate
//! would come back), never the crawl.
//!
//! Fetch controls: `network.headers` go with every request (and into the archived request);
//! with `network.cookies` the client keeps a jar ([`crate::cookie_jar`]); a proxy comes
//! from `network.proxy` or, with `network.proxy_from_env`, the standard variables. Through a
//! proxy the crawler no longer connects to the target, so neither the resolver nor the
//! connected address would see it: the gate then resolves the target itself and applies the
//! private-address rule before the request is handed to the proxy
//! ([`RequestGate::check_resolved`]), and the connected-address check is skipped (the peer
//! is the proxy the operator chose). A proxy that resolves the name again may get another
//! answer (DNS rebinding): the gate can only judge the answers it is given.
//!
//! Why reqwest and not hyper directly: `cargo bench --bench http_client` measured reqwest,
//! configured as here, at 17.8 µs of client CPU per 16 KiB keep-alive request against 12.5
//! for hyper-util's legacy client (the pool and connector reqwest wraps) sending the same
//! request: reqwest's layers cost ~5.3 µs per page (0.70×; 19.1 vs 13.8 at 64 in
//! flight), of which its default headers and timeouts are ~1 µs. Taking that would mean
//! rebuilding here what reqwest gives this module (http/https/socks proxies, the cookie
//! store, rustls roots with `network.ca_file` and ALPN h2, the resolver hook, the total
//! timeout over the body, error kinds for `classify`), each under its tests; not done yet.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, ETAG,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LINK, LOCATION, RETRY_AFTER,
    TRANSFER_ENCODING,
};
use url::Url;

use crate::config::Config;
use crate::content_coding::{BodyDecoder, Coding};
use crate::cookie_jar::CookieJar;
use crate::gate::{RequestGate, RequestKind};

/// The longest an idle keep-alive connection is kept. Idle sockets number about the rate
/// at which hosts fall idle times this: short enough that a page linking tens of thousands
/// of hosts does not hold a socket for each (see [`crate::descriptors`]).
pub(crate) const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an idle connection is kept in this crawl: long enough that a host crawled at
/// `per_host_rps` keeps its connection between requests (three intervals), no longer,
/// within 2 s to [`IDLE_CONNECTION_TIMEOUT`]. Measured on a 20,000-host crawl at 1 rps per
/// host on a machine whose descriptor limit is 20,000: a fixed 10 s kept ~13,000 idle
/// sockets and paused dispatching for descriptors 8 times.
pub(crate) fn idle_connection_timeout(config: &Config) -> Duration {
    let p = &config.politeness;
    if !(p.enabled && p.per_host_rps.is_finite() && p.per_host_rps > 0.0) {
        return IDLE_CONNECTION_TIMEOUT;
    }
    Duration::from_secs_f64(3.0 / p.per_host_rps)
        .clamp(Duration::from_secs(2), IDLE_CONNECTION_TIMEOUT)
}

/// Idle keep-alive connections kept per host: as many as the host may have requests in
/// flight (`per_host_concurrency`, or the whole `concurrency` when politeness is off and
/// nothing caps a host), at most 64. Fewer, and each burst of requests above the pool's size
/// closes connections only to open new ones: with politeness off, a cap of 2 made one
/// request in eight pay a TCP connect (crawl bench, 24 hosts at concurrency 64).
fn idle_connections_per_host(config: &Config) -> usize {
    let in_flight = if config.politeness.enabled {
        config.politeness.per_host_concurrency as usize
    } else {
        config.crawl.concurrency
    };
    in_flight.clamp(1, 64)
}

/// The client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FetchSetupError {
    #[error("HTTP client")]
    Client(#[from] reqwest::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("network.accept_encoding: {0:?} is not a valid header value")]
    AcceptEncoding(String),
    #[error("network.proxy: {url:?} is not usable as a proxy")]
    Proxy {
        /// Shown redacted: a proxy password never reaches a message.
        url: String,
    },
}

/// Why a fetch produced no usable response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FetchErrorKind {
    Timeout,
    Connect,
    /// The server's TLS certificate was not accepted (unknown issuer, wrong name,
    /// expired): trying again would meet the same certificate.
    Certificate,
    Body,
    /// The request gate refused it: nothing was sent (or the answer came from an address
    /// the gate refuses, and was dropped).
    Refused,
    Other,
}

/// A failed fetch: what kind and a one-line message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct FetchError {
    pub(crate) kind: FetchErrorKind,
    pub(crate) message: String,
}

impl FetchError {
    /// Timeouts and connection failures are worth another try; other errors are not.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self.kind, FetchErrorKind::Timeout | FetchErrorKind::Connect)
    }
}

/// What a fetch brought back.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) status: u16,
    /// The media type, lowercased, without parameters (`text/html`).
    pub(crate) content_type: Option<String>,
    /// The `charset` parameter of Content-Type, if any.
    pub(crate) charset: Option<String>,
    /// Body bytes, up to the cap: decoded for a body that is parsed, as received otherwise.
    pub(crate) bytes: u64,
    /// The decoded body, kept only when the content type is one the crawl parses.
    pub(crate) body: Option<Vec<u8>>,
    /// Why the body could not be decoded (to its end): an unsupported or damaged content
    /// coding. What was decoded before the damage is in `body`.
    pub(crate) decode_error: Option<String>,
    /// The body was longer than `max_body_bytes` (as received or decoded) and was cut there.
    pub(crate) truncated: bool,
    /// `Location`, for redirects.
    pub(crate) location: Option<String>,
    /// `Retry-After`, as a delay from now.
    pub(crate) retry_after: Option<Duration>,
    /// `X-Robots-Tag` contains `nofollow` (or `none`).
    pub(crate) header_nofollow: bool,
    /// The request and response as on the wire, when the crawl archives (`[output] warc`).
    pub(crate) exchange: Option<Box<Exchange>>,
    /// The target of `Link: <…>; rel="canonical"`, unresolved (see `crate::canonical`).
    pub(crate) link_canonical: Option<String>,
    /// The response's validators, as sent: what the next generation of a recrawl asks
    /// with (see `crate::recrawl`).
    pub(crate) validators: Validators,
}

/// A response's validators (`ETag`, `Last-Modified`), kept verbatim: a recrawl sends them
/// back as `If-None-Match` / `If-Modified-Since` (RFC 9110 §13.1), which is only exact when
/// the server gets its own bytes again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Validators {
    pub(crate) etag: Option<String>,
    pub(crate) last_modified: Option<String>,
}

impl Validators {
    pub(crate) fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    /// The conditional request headers these validators make, as (name, value).
    fn conditions(&self) -> Vec<(reqwest::header::HeaderName, HeaderValue)> {
        let mut out = Vec::new();
        if let Some(v) = self
            .etag
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            out.push((IF_NONE_MATCH, v));
        }
        if let Some(v) = self
            .last_modified
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            out.push((IF_MODIFIED_SINCE, v));
        }
        out
    }
}

/// One request and its response as they crossed the wire, for the archive ([`crate::warc`]).
#[derive(Debug)]
pub(crate) struct Exchange {
    /// Request line and headers, ending with the empty line, in HTTP/1.1 form: the headers
    /// the client sends (its order of them aside).
    pub(crate) request_head: Vec<u8>,
    /// Status line and headers as received, ending with the empty line. `Transfer-Encoding`
    /// is renamed `X-Crawler-Transfer-Encoding`, since the body kept is de-chunked and a
    /// replay tool must not try to de-chunk it again.
    pub(crate) response_head: Vec<u8>,
    /// The entity body as sent (still content-coded), up to the cap; `None` when it is byte
    /// for byte the parsed body ([`Fetched::body`]), which then is not held twice.
    pub(crate) raw_body: Option<Vec<u8>>,
    /// The body was cut at the cap (`WARC-Truncated: length`).
    pub(crate) truncated: bool,
    /// The body was sent content-coded (`Content-Encoding` other than identity): compressed
    /// already, so the archive stores it rather than deflating it again.
    pub(crate) content_coded: bool,
    /// The response came over HTTP/2 (its head is written in HTTP/1.1 form).
    pub(crate) http2: bool,
    /// The address the response came from.
    pub(crate) peer: Option<IpAddr>,
    /// When the response's head arrived.
    pub(crate) date: SystemTime,
}

impl Exchange {
    /// The entity body as sent, given the parsed body of the same fetch.
    pub(crate) fn payload<'a>(&'a self, parsed: Option<&'a [u8]>) -> &'a [u8] {
        match &self.raw_body {
            Some(raw) => raw,
            None => parsed.unwrap_or_default(),
        }
    }
}

impl Fetched {
    pub(crate) fn is_redirect(&self) -> bool {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
    }
}

/// The shared HTTP client.
pub(crate) struct Fetcher {
    /// The client new requests use. Replaced by [`Fetcher::shed_idle_connections`]; a
    /// request holds its own handle, so one in flight finishes on the client it began on.
    client: std::sync::RwLock<reqwest::Client>,
    config: Config,
    gate: Arc<RequestGate>,
    /// `network.ca_file`'s certificates, read once: a rebuilt client trusts what the first
    /// one did, even if the file has changed or gone since.
    extra_roots: Vec<reqwest::Certificate>,
    max_body_bytes: u64,
    content_types: Vec<String>,
    /// The `Accept-Encoding` every request sends, as the archive writes it down.
    accept_encoding: String,
    /// `[[site]]` settings: a matching host's requests get its user agent, headers and
    /// credentials.
    sites: crate::site::Sites,
    /// `network.headers`, as every request sends them.
    extra_headers: HeaderMap,
    /// The cookie jar, with `network.cookies`.
    cookies: Option<Arc<CookieJar>>,
    /// Requests may go through a proxy: the gate resolves targets itself (module doc).
    proxied: bool,
}

impl Fetcher {
    /// Builds the client; every request it sends passes `gate`.
    pub(crate) fn new(
        config: &Config,
        gate: Arc<RequestGate>,
        cookies: Option<Arc<CookieJar>>,
    ) -> Result<Fetcher, FetchSetupError> {
        let c = &config.crawl;
        let extra_roots = config.extra_root_certificates()?;
        Ok(Fetcher {
            client: std::sync::RwLock::new(build_client(
                config,
                &gate,
                &extra_roots,
                cookies.as_ref(),
            )?),
            extra_headers: config.extra_headers()?,
            proxied: uses_proxy(config),
            cookies,
            config: config.clone(),
            gate,
            extra_roots,
            max_body_bytes: c.max_body_bytes.0,
            accept_encoding: config.accept_encoding_header(),
            // Validated with the configuration: a section refused there never gets here.
            sites: crate::site::Sites::new(&config.site).unwrap_or_default(),
            content_types: c
                .content_types
                .iter()
                .map(|t| t.to_ascii_lowercase())
                .collect(),
        })
    }

    /// Closes every idle keep-alive connection, to give their descriptors back when the
    /// process runs short (see [`crate::descriptors`]): new requests get a new client (the
    /// same configuration, `network.ca_file` included) with an empty pool; the old pool closes its idle connections as soon as the requests in
    /// flight on it are done. Connection reuse starts over, which is the price.
    pub(crate) fn shed_idle_connections(&self) {
        match build_client(
            &self.config,
            &self.gate,
            &self.extra_roots,
            self.cookies.as_ref(),
        ) {
            Ok(client) => {
                let mut current = self.client.write().unwrap_or_else(|e| e.into_inner());
                *current = client;
            }
            Err(e) => {
                tracing::warn!("cannot rebuild the HTTP client to close idle connections: {e}")
            }
        }
    }

    fn client(&self) -> reqwest::Client {
        self.client
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether a media type is one whose body is parsed for links.
    pub(crate) fn parses(&self, content_type: Option<&str>) -> bool {
        content_type.is_some_and(|t| self.content_types.iter().any(|c| c == t))
    }

    /// One GET of the page `url`, body capped at `max_body_bytes` and kept when it will
    /// be parsed.
    pub(crate) async fn fetch(&self, url: &Url) -> Result<Fetched, FetchError> {
        self.fetch_capped(url, RequestKind::Page, self.max_body_bytes)
            .await
    }

    /// [`Fetcher::fetch`] asking with `validators` (a recrawl's): the server may answer
    /// `304 Not Modified`, with no body.
    pub(crate) async fn fetch_conditional(
        &self,
        url: &Url,
        validators: &Validators,
    ) -> Result<Fetched, FetchError> {
        self.fetch_inner(url, RequestKind::Page, self.max_body_bytes, validators)
            .await
    }

    /// One GET of `url` for `kind` with body cap `cap`; a 2xx body is kept whatever its
    /// type for robots.txt and sitemaps, else only when its type is parsed. The gate is asked first.
    pub(crate) async fn fetch_capped(
        &self,
        url: &Url,
        kind: RequestKind,
        cap: u64,
    ) -> Result<Fetched, FetchError> {
        self.fetch_inner(url, kind, cap, &Validators::default())
            .await
    }

    async fn fetch_inner(
        &self,
        url: &Url,
        kind: RequestKind,
        cap: u64,
        validators: &Validators,
    ) -> Result<Fetched, FetchError> {
        let refused = |e: crate::gate::Refused| FetchError {
            kind: FetchErrorKind::Refused,
            message: e.to_string(),
        };
        self.gate.check(url, kind).map_err(refused)?;
        if self.proxied {
            self.gate.check_resolved(url).await.map_err(refused)?;
        }
        let site = self.sites.for_url(url);
        let cookie = self
            .cookies
            .as_ref()
            .filter(|_| self.config.output.warc)
            .and_then(|jar| reqwest::cookie::CookieStore::cookies(jar.as_ref(), url));
        let mut request = self.client().get(url.clone());
        if let Some(site) = site {
            request = site.apply(request);
        }
        let conditions = validators.conditions();
        for (name, value) in &conditions {
            request = request.header(name, value);
        }
        let mut response = request.send().await.map_err(classify)?;
        if !self.proxied {
            self.gate
                .check_connected(url, response.remote_addr())
                .map_err(refused)?;
        }
        let keep_any_body = matches!(kind, RequestKind::Robots | RequestKind::Sitemap);
        let date = SystemTime::now();
        let status = response.status().as_u16();
        let headers = response.headers();
        let (content_type, charset) = media_type(headers);
        let location = header_str(headers, LOCATION).map(str::to_string);
        let retry_after = header_str(headers, RETRY_AFTER).and_then(parse_retry_after);
        let header_nofollow = headers
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(robots_directives_nofollow);
        let link_canonical = crate::canonical::from_link_header(
            headers.get_all(LINK).iter().filter_map(|v| v.to_str().ok()),
        );
        let response_validators = Validators {
            etag: header_str(headers, ETAG).map(str::to_string),
            last_modified: header_str(headers, LAST_MODIFIED).map(str::to_string),
        };
        let parse =
            (200..300).contains(&status) && (keep_any_body || self.parses(content_type.as_deref()));
        let coding = Coding::from_header(
            headers
                .get_all(CONTENT_ENCODING)
                .iter()
                .map(HeaderValue::as_bytes),
        );
        let mut decode_error = None;
        let mut decoder = match (&coding, parse) {
            (Ok(coding), true) => Some(BodyDecoder::new(*coding, cap)),
            (Err(unsupported), true) => {
                decode_error = Some(format!("{unsupported}; the body is not parsed"));
                None
            }
            (_, false) => None,
        };
        if let (Some(decoder), Some(length)) = (decoder.as_mut(), response.content_length()) {
            decoder.expect(length);
        }
        // An identity-coded body that is parsed is its own raw form: not held twice.
        let same_as_parsed = decoder.is_some() && coding == Ok(Coding::Identity);
        // Each request and response is kept as sent when the crawl archives.
        let mut exchange = self.config.output.warc.then(|| {
            Box::new(Exchange {
                request_head: request_head(
                    url,
                    site.and_then(|s| s.user_agent())
                        .unwrap_or(&self.config.crawl.user_agent),
                    &self.accept_encoding,
                    &self.extra_headers,
                    cookie.as_ref(),
                    &(site.map(|s| s.archived_lines()).unwrap_or_default()
                        + &condition_lines(&conditions)),
                ),
                response_head: response_head(&response),
                raw_body: (!same_as_parsed)
                    .then(|| raw_body_buffer(response.content_length(), cap)),
                truncated: false,
                content_coded: coding != Ok(Coding::Identity),
                http2: response.version() == reqwest::Version::HTTP_2,
                peer: response.remote_addr().map(|a| a.ip()),
                date,
            })
        });
        let mut received: u64 = 0;
        let mut cut = false;
        while let Some(chunk) = response.chunk().await.map_err(classify)? {
            let room = cap - received;
            let take = (chunk.len() as u64).min(room) as usize;
            let piece = &chunk[..take];
            if let Some(raw) = exchange.as_mut().and_then(|e| e.raw_body.as_mut()) {
                raw.extend_from_slice(piece);
            }
            if let Some(decoder) = decoder.as_mut() {
                decoder.write(piece);
            }
            received += take as u64;
            if take < chunk.len() || received >= cap {
                // Stop reading: the rest is never downloaded. Dropping the response closes
                // the connection, which is the price of not reading an oversized body.
                cut = take < chunk.len() || response.content_length().is_none_or(|l| l > received);
                break;
            }
            if decoder.as_ref().is_some_and(BodyDecoder::is_full) {
                // The decoded body reached the cap (a compression bomb, say): what follows
                // would only be decoded to be thrown away.
                cut = true;
                break;
            }
        }
        let (body, bytes) = match decoder {
            Some(decoder) => {
                let decoded = decoder.finish(!cut);
                cut |= decoded.capped;
                if decode_error.is_none() {
                    decode_error = decoded.error;
                }
                let length = decoded.bytes.len() as u64;
                (Some(decoded.bytes), length)
            }
            None => (None, received),
        };
        if let Some(exchange) = exchange.as_mut() {
            exchange.truncated = cut;
        }
        Ok(Fetched {
            status,
            content_type,
            charset,
            bytes,
            body,
            decode_error,
            truncated: cut,
            location,
            retry_after,
            header_nofollow,
            exchange,
            link_canonical,
            validators: response_validators,
        })
    }
}

/// The conditional headers as the archived request writes them (`name: value` lines).
fn condition_lines(conditions: &[(reqwest::header::HeaderName, HeaderValue)]) -> String {
    let mut lines = String::new();
    for (name, value) in conditions {
        lines.push_str(name.as_str());
        lines.push_str(": ");
        lines.push_str(&String::from_utf8_lossy(value.as_bytes()));
        lines.push_str("\r\n");
    }
    lines
}

/// The most [`raw_body_buffer`] reserves ahead of the bytes.
const RAW_RESERVE_MAX: u64 = 1 << 20;

/// The buffer an archived body as sent is received into: room for its `Content-Length`
/// (within the cap and [`RAW_RESERVE_MAX`]: the header is the server's word), so a coded
/// page is held in one allocation of its size rather than grown by doubling (a copy per
/// doubling, and up to twice its size held).
fn raw_body_buffer(content_length: Option<u64>, cap: u64) -> Vec<u8> {
    let room = content_length.unwrap_or(0).min(cap).min(RAW_RESERVE_MAX);
    Vec::with_capacity(usize::try_from(room).unwrap_or(0))
}

/// The client's fixed `Accept` header: what [`request_head`] writes down as sent, with the
/// configured `Accept-Encoding`.
const ACCEPT_VALUE: &str = "*/*";

/// The request as the archive records it (HTTP/1.1 form; hyper sends the same fields): the
/// crawl's extra headers, the cookie sent, and a `[[site]]`'s header lines (`site_lines`,
/// credentials redacted: see [`crate::site`]).
fn request_head(
    url: &Url,
    user_agent: &str,
    accept_encoding: &str,
    extra: &HeaderMap,
    cookie: Option<&HeaderValue>,
    site_lines: &str,
) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => String::new(),
    };
    let mut head = format!(
        "GET {target} HTTP/1.1\r\nhost: {host}\r\nuser-agent: {user_agent}\r\naccept: {ACCEPT_VALUE}\r\naccept-encoding: {accept_encoding}\r\n"
    )
    .into_bytes();
    let cookie = cookie.map(|value| (&reqwest::header::COOKIE, value));
    for (name, value) in extra.iter().chain(cookie) {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(site_lines.as_bytes());
    head.extend_from_slice(b"\r\n");
    head
}

/// The proxy variables `network.proxy_from_env` reads (reqwest reads them the same way).
const PROXY_VARIABLES: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// Whether requests may go through a proxy in this crawl.
fn uses_proxy(config: &Config) -> bool {
    config.network.proxy.is_some()
        || (config.network.proxy_from_env
            && PROXY_VARIABLES
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|value| !value.is_empty())))
}

/// The response's status line and headers as received, `Transfer-Encoding` renamed (see
/// [`Exchange::response_head`]).
fn response_head(response: &reqwest::Response) -> Vec<u8> {
    let status = response.status();
    let version = if response.version() == reqwest::Version::HTTP_10 {
        "HTTP/1.0"
    } else {
        "HTTP/1.1"
    };
    let mut head = Vec::with_capacity(512);
    head.extend_from_slice(version.as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in response.headers() {
        let name = if name == TRANSFER_ENCODING {
            "x-crawler-transfer-encoding"
        } else {
            name.as_str()
        };
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// The HTTP client as the crawl configures it: no redirects followed (the crawl admits
/// targets like links), timeouts, a small keep-alive pool, the codings we decode offered
/// (and not decoded by reqwest), names resolved through the gate, the roots of
/// `network.ca_file` trusted besides the system's. HTTP/2 is offered by ALPN on TLS and
/// used where the server picks it: one connection per origin then carries all of its
/// requests as streams (the pool shares it), so a host costs one handshake, not one per
/// concurrent request; plain `http` stays HTTP/1.1 (no prior-knowledge h2c).
fn build_client(
    config: &Config,
    gate: &RequestGate,
    extra_roots: &[reqwest::Certificate],
    cookies: Option<&Arc<CookieJar>>,
) -> Result<reqwest::Client, FetchSetupError> {
    let c = &config.crawl;
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(ACCEPT_VALUE));
    let accept_encoding = config.accept_encoding_header();
    headers.insert(
        ACCEPT_ENCODING,
        HeaderValue::from_str(&accept_encoding)
            .map_err(|_| FetchSetupError::AcceptEncoding(accept_encoding))?,
    );
    headers.extend(config.extra_headers()?);
    let mut builder = reqwest::Client::builder();
    builder = match (&config.network.proxy, config.network.proxy_from_env) {
        (Some(url), _) => {
            let proxy = reqwest::Proxy::all(url.as_str()).map_err(|_| FetchSetupError::Proxy {
                url: crate::distributed::redacted_url(url),
            })?;
            builder.proxy(proxy)
        }
        // reqwest reads http_proxy, https_proxy, all_proxy and no_proxy itself.
        (None, true) => builder,
        (None, false) => builder.no_proxy(),
    };
    if let Some(jar) = cookies {
        builder = builder.cookie_provider(jar.clone());
    }
    builder
        .user_agent(c.user_agent.clone())
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs_f64(c.timeout_secs))
        .connect_timeout(Duration::from_secs_f64(c.connect_timeout_secs))
        .pool_max_idle_per_host(idle_connections_per_host(config))
        .pool_idle_timeout(idle_connection_timeout(config))
        .tcp_nodelay(true)
        .dns_resolver(gate.resolver())
        .tls_certs_merge(extra_roots.to_vec())
        .build()
        .map_err(FetchSetupError::Client)
}

fn header_str(headers: &HeaderMap, name: reqwest::header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn media_type(headers: &HeaderMap) -> (Option<String>, Option<String>) {
    let Some(raw) = header_str(headers, CONTENT_TYPE) else {
        return (None, None);
    };
    let mut parts = raw.split(';');
    let media = parts
        .next()
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty());
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"').to_string())
    });
    (media, charset)
}

/// `Retry-After` is either delta-seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Whether an `X-Robots-Tag` or meta-robots value forbids following links.
pub(crate) fn robots_directives_nofollow(value: &str) -> bool {
    value
        .split([',', ' '])
        .map(str::trim)
        .any(|d| d.eq_ignore_ascii_case("nofollow") || d.eq_ignore_ascii_case("none"))
}

fn classify(error: reqwest::Error) -> FetchError {
    if let Some(rejected) = certificate_error(&error) {
        return FetchError {
            kind: FetchErrorKind::Certificate,
            message: format!(
                "certificate rejected: {rejected} (a private CA is trusted with network.ca_file)"
            ),
        };
    }
    let kind = if error.is_timeout() {
        FetchErrorKind::Timeout
    } else if error.is_connect() {
        FetchErrorKind::Connect
    } else if error.is_body() || error.is_decode() {
        FetchErrorKind::Body
    } else {
        FetchErrorKind::Other
    };
    // reqwest's Display hides the cause; the chain says what really happened.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    FetchError { kind, message }
}

/// The TLS certificate error under a failed request, if that is why it failed. rustls's
/// error travels inside `io::Error`s (tokio-rustls's, wrapped again by the connector), whose
/// `source()` skips what they wrap, so each `io::Error` of the chain is opened.
fn certificate_error(error: &reqwest::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let mut inner = cause;
        while let Some(wrapped) = inner
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            inner = wrapped;
        }
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            if matches!(
                tls,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            ) {
                return Some(tls);
            }
        }
        source = cause.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn an_archived_body_is_received_into_room_for_its_announced_length_within_bounds() {
        assert!(raw_body_buffer(Some(50_000), 10 << 20).capacity() >= 50_000);
        assert!(raw_body_buffer(Some(50_000), 1_000).capacity() < 50_000);
        assert!(raw_body_buffer(Some(u64::MAX), u64::MAX).capacity() <= 2 << 20);
        assert_eq!(raw_body_buffer(None, 10 << 20).capacity(), 0);
    }

    #[test]
    fn nofollow_directives() {
        assert!(robots_directives_nofollow("noindex, nofollow"));
        assert!(robots_directives_nofollow("NONE"));
        assert!(!robots_directives_nofollow("noindex"));
    }
}
