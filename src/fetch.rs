//! Fetching one URL once: the shared HTTP clients, name-resolution overrides, body
//! limits, and the facts the crawl needs from a response.
//!
//! One [`Fetcher`] (one pair of clients, see below, each with its connection pool) serves
//! every fetch task, so connections to a host are reused across pages. The crawler offers
//! the codings of
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
//! Two clients, one behaviour: reqwest for whatever needs its features (https with the
//! system's roots, `network.ca_file` and ALPN h2, proxies, the cookie jar, `[[site]]`
//! headers and credentials), and for plain `http://` requests that need none of them
//! hyper-util's legacy client (the very pool and connector reqwest wraps) driven directly
//! ([`plain_http`]): `cargo bench --bench http_client` measured reqwest, configured as
//! here, at 17.8 µs of client CPU per 16 KiB keep-alive request against 12.5 for that
//! client sending the same request, reqwest's layers costing ~5.3 µs per page (0.70×; 19.1
//! vs 13.8 at 64 in flight). Both resolve through the gate, send the same headers and keep
//! the same timeouts and pool settings; the unit tests compare the requests they send. In
//! the crawl bench (`-- --no-warc --runs 3`, thin-LTO builds alternated, six invocations
//! each on a machine at load ~14) the crawler's CPU per page went from a median of 76 to
//! 70 µs (per-pair ratio median 0.92) and the fetch threads' from 35.5 to 29.5 µs.
//! Taking reqwest out of the https path too would mean rebuilding its TLS, proxy and
//! cookie handling here, each under its tests: not done.

mod plain_http;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, ETAG,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LINK, LOCATION, RETRY_AFTER,
    TRANSFER_ENCODING, USER_AGENT,
};
use reqwest::{StatusCode, Version};
use url::Url;

use crate::config::Config;
use crate::content_coding::{BodyDecoder, Coding};
use crate::cookie_jar::CookieJar;
use crate::gate::{RequestGate, RequestKind};
use plain_http::{PlainBody, PlainHttp, PlainSettings};

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

/// The two clients of one crawl: reqwest, and the plain-http path that skips its layers
/// ([`plain_http`]). Built and replaced together, so they always share one configuration.
struct Clients {
    reqwest: reqwest::Client,
    plain: PlainHttp,
}

/// A response's status line and headers, whichever client received them.
struct ResponseHead {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    /// The body's announced length (`Content-Length`), when there is one.
    content_length: Option<u64>,
    /// The address the response came from.
    remote: Option<SocketAddr>,
}

/// A response body being read, whichever client received it.
enum ResponseBody {
    Reqwest(reqwest::Response),
    Plain(PlainBody),
}

impl ResponseBody {
    /// The next piece of the body, `None` at its end.
    async fn chunk(&mut self, url: &Url) -> Result<Option<hyper::body::Bytes>, FetchError> {
        match self {
            ResponseBody::Reqwest(response) => response.chunk().await.map_err(classify),
            ResponseBody::Plain(body) => body.chunk(url).await,
        }
    }
}

/// The shared HTTP client.
pub(crate) struct Fetcher {
    /// The clients new requests use. Replaced by [`Fetcher::shed_idle_connections`]; a
    /// request holds its own handle, so one in flight finishes on the client it began on.
    clients: std::sync::RwLock<Arc<Clients>>,
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
            clients: std::sync::RwLock::new(Arc::new(build_clients(
                config,
                &gate,
                &extra_roots,
                cookies.as_ref(),
            )?)),
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
        match build_clients(
            &self.config,
            &self.gate,
            &self.extra_roots,
            self.cookies.as_ref(),
        ) {
            Ok(clients) => {
                let mut current = self.clients.write().unwrap_or_else(|e| e.into_inner());
                *current = Arc::new(clients);
            }
            Err(e) => {
                tracing::warn!("cannot rebuild the HTTP client to close idle connections: {e}")
            }
        }
    }

    fn clients(&self) -> Arc<Clients> {
        self.clients
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
        let conditions = validators.conditions();
        let clients = self.clients();
        // The plain-http client serves what needs none of reqwest's extra layers (see
        // `plain_http`'s doc); everything else goes through reqwest, credentials in the URL
        // too (reqwest sends them as basic auth).
        let plain = url.scheme() == "http"
            && !self.proxied
            && self.cookies.is_none()
            && site.is_none()
            && url.username().is_empty()
            && url.password().is_none();
        let (head, mut body) = if plain {
            let (head, body) = clients.plain.get(url, &conditions).await?;
            (head, ResponseBody::Plain(body))
        } else {
            let mut request = clients.reqwest.get(url.clone());
            if let Some(site) = site {
                request = site.apply(request);
            }
            for (name, value) in &conditions {
                request = request.header(name, value);
            }
            let mut response = request.send().await.map_err(classify)?;
            let head = ResponseHead {
                status: response.status(),
                version: response.version(),
                content_length: response.content_length(),
                headers: std::mem::take(response.headers_mut()),
                remote: response.remote_addr(),
            };
            (head, ResponseBody::Reqwest(response))
        };
        drop(clients);
        if !self.proxied {
            self.gate
                .check_connected(url, head.remote)
                .map_err(refused)?;
        }
        let keep_any_body = matches!(kind, RequestKind::Robots | RequestKind::Sitemap);
        let date = SystemTime::now();
        let status = head.status.as_u16();
        let headers = &head.headers;
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
        if let (Some(decoder), Some(length)) = (decoder.as_mut(), head.content_length) {
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
                response_head: response_head(&head),
                raw_body: (!same_as_parsed).then(|| raw_body_buffer(head.content_length, cap)),
                truncated: false,
                content_coded: coding != Ok(Coding::Identity),
                http2: head.version == Version::HTTP_2,
                peer: head.remote.map(|a| a.ip()),
                date,
            })
        });
        let mut received: u64 = 0;
        let mut cut = false;
        while let Some(chunk) = body.chunk(url).await? {
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
                cut = take < chunk.len() || head.content_length.is_none_or(|l| l > received);
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
fn response_head(response: &ResponseHead) -> Vec<u8> {
    let status = response.status;
    let version = if response.version == Version::HTTP_10 {
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
    for (name, value) in &response.headers {
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
    let headers = default_headers(config)?;
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

/// The headers every request sends besides the user agent: `Accept`, the configured
/// `Accept-Encoding` and `network.headers`.
fn default_headers(config: &Config) -> Result<HeaderMap, FetchSetupError> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(ACCEPT_VALUE));
    let accept_encoding = config.accept_encoding_header();
    headers.insert(
        ACCEPT_ENCODING,
        HeaderValue::from_str(&accept_encoding)
            .map_err(|_| FetchSetupError::AcceptEncoding(accept_encoding))?,
    );
    headers.extend(config.extra_headers()?);
    Ok(headers)
}

/// Both clients, from one configuration: the plain-http one gets reqwest's settings as
/// [`build_client`] gives them (its default headers merged as reqwest's builder merges
/// them: the user agent first, then each default replacing it by name).
fn build_clients(
    config: &Config,
    gate: &RequestGate,
    extra_roots: &[reqwest::Certificate],
    cookies: Option<&Arc<CookieJar>>,
) -> Result<Clients, FetchSetupError> {
    let reqwest = build_client(config, gate, extra_roots, cookies)?;
    let c = &config.crawl;
    let mut headers = HeaderMap::new();
    // reqwest refused an invalid user agent above, so this one is valid.
    if let Ok(agent) = HeaderValue::from_str(&c.user_agent) {
        headers.insert(USER_AGENT, agent);
    }
    for (name, value) in default_headers(config)?.iter() {
        headers.insert(name, value.clone());
    }
    let plain = PlainHttp::new(
        gate.resolver(),
        PlainSettings {
            headers,
            timeout: Duration::from_secs_f64(c.timeout_secs),
            connect_timeout: Duration::from_secs_f64(c.connect_timeout_secs),
            idle_timeout: idle_connection_timeout(config),
            idle_per_host: idle_connections_per_host(config),
        },
    );
    Ok(Clients { reqwest, plain })
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

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback server that answers each request of a keep-alive connection with the
    /// request's own head as an HTML body; with `stall`, it announces a body and never
    /// sends it.
    async fn echo_server(stall: bool) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut read = [0u8; 4096];
                    loop {
                        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match stream.read(&mut read).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&read[..n]),
                            }
                            continue;
                        };
                        let head: Vec<u8> = buffer.drain(..end + 4).collect();
                        if stall {
                            let _ = stream
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 1000\r\n\r\n<html>")
                                .await;
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\r\n",
                            head.len()
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err()
                            || stream.write_all(&head).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    /// A fetcher for a crawl of `*.test` hosts served at `addr`.
    fn fetcher(addr: SocketAddr, tune: impl FnOnce(&mut Config)) -> Fetcher {
        let mut config = Config::default();
        config.scope.allow_private = true;
        config
            .network
            .resolve
            .insert("*.test".into(), format!("127.0.0.1:{}", addr.port()));
        tune(&mut config);
        let seed = Url::parse("http://a.test/").unwrap();
        let scope = Arc::new(crate::scope::Scope::new(&config.scope, &[seed]).unwrap());
        let gate = Arc::new(RequestGate::new(&config, scope).unwrap());
        Fetcher::new(&config, gate, None).unwrap()
    }

    /// A request head's lines, lowercased and sorted: the fields sent, their order aside.
    fn fields(head: &[u8]) -> Vec<String> {
        let mut lines: Vec<String> = String::from_utf8_lossy(head)
            .split("\r\n")
            .map(str::to_ascii_lowercase)
            .filter(|l| !l.is_empty())
            .collect();
        lines.sort();
        lines
    }

    #[tokio::test]
    async fn the_plain_http_path_sends_what_reqwest_sends() {
        let addr = echo_server(false).await;
        let fetcher = fetcher(addr, |c| {
            c.network.headers.insert("X-Trace".into(), "one".into());
        });
        let url = Url::parse("http://a.test/page?q=1").unwrap();
        let validators = Validators {
            etag: Some("\"v1\"".into()),
            last_modified: Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
        };
        // An http URL with no proxy, cookie jar or [[site]] goes the plain way.
        let plain = fetcher.fetch_conditional(&url, &validators).await.unwrap();
        assert_eq!(plain.status, 200);
        assert_eq!(plain.content_type.as_deref(), Some("text/html"));
        assert_eq!(plain.charset.as_deref(), Some("utf-8"));
        let plain_head = plain.body.unwrap();
        let mut request = fetcher.clients().reqwest.get(url.clone());
        for (name, value) in validators.conditions() {
            request = request.header(name, value);
        }
        let reqwest_head = request.send().await.unwrap().bytes().await.unwrap();
        assert_eq!(fields(&plain_head), fields(&reqwest_head));
        let sent = fields(&plain_head);
        for field in [
            "get /page?q=1 http/1.1",
            "host: a.test",
            "x-trace: one",
            "if-none-match: \"v1\"",
            "accept-encoding: gzip, deflate",
        ] {
            assert!(sent.iter().any(|l| l == field), "{field:?} not in {sent:?}");
        }
    }

    #[tokio::test]
    async fn credentials_in_an_http_url_are_still_sent_as_basic_auth() {
        let addr = echo_server(false).await;
        let fetcher = fetcher(addr, |_| {});
        let url = Url::parse("http://user:secret@a.test/").unwrap();
        let sent = fields(&fetcher.fetch(&url).await.unwrap().body.unwrap());
        // base64("user:secret")
        let auth = "authorization: basic dxnlcjpzzwnyzxq=";
        assert!(sent.iter().any(|l| l == auth), "{sent:?}");
    }

    #[tokio::test]
    async fn a_stalled_body_on_the_plain_http_path_times_out() {
        let addr = echo_server(true).await;
        let fetcher = fetcher(addr, |c| c.crawl.timeout_secs = 0.3);
        let url = Url::parse("http://a.test/").unwrap();
        let error = fetcher.fetch(&url).await.unwrap_err();
        assert_eq!(error.kind, FetchErrorKind::Timeout, "{error}");
        assert!(error.message.contains("response body"), "{error}");
        assert!(error.message.contains("timed out"), "{error}");
    }

    #[tokio::test]
    async fn a_refused_connection_on_the_plain_http_path_is_worth_a_retry() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let fetcher = fetcher(addr, |_| {});
        let error = fetcher
            .fetch(&Url::parse("http://a.test/").unwrap())
            .await
            .unwrap_err();
        assert_eq!(error.kind, FetchErrorKind::Connect, "{error}");
        assert!(error.is_transient());
    }

    #[test]
    fn nofollow_directives() {
        assert!(robots_directives_nofollow("noindex, nofollow"));
        assert!(robots_directives_nofollow("NONE"));
        assert!(!robots_directives_nofollow("noindex"));
    }
}
