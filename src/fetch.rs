//! Fetching one URL once: the shared reqwest client, name-resolution overrides, body
//! limits, and the facts the crawl needs from a response.
//!
//! One [`Fetcher`] (one reqwest client, one connection pool) serves every fetch task, so
//! connections to a host are reused across pages. reqwest decompresses gzip and brotli;
//! the body is read chunk by chunk and never past `max_body_bytes` (counted after
//! decompression, so a small compressed bomb cannot blow up memory), and only bodies the
//! crawl will parse are kept. Redirects are *not* followed here: the crawl treats a
//! redirect target like a link (normalized, scoped, checked against the seen-set), so
//! loops end by themselves. Retries are not done here either: the frontier schedules them
//! so that a retry obeys the host's rate limit like any request.
//!
//! Every request is first put to the [`RequestGate`] (scope, private addresses, see
//! [`crate::gate`]), and the client resolves names through the gate's resolver, so nothing
//! reaches the network that the gate did not allow. `[network] resolve` is part of that
//! resolver: a matching host name resolves to the configured address, and hyper keeps that
//! address's port when the URL has none, which is how many `http://*.test/` hosts reach one
//! loopback listener.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, CONTENT_TYPE, LINK, LOCATION, RETRY_AFTER};
use url::Url;

use crate::config::Config;
use crate::gate::{RequestGate, RequestKind};

/// How long an idle keep-alive connection is kept. Idle sockets number about the recent
/// request rate to distinct hosts times this: short enough that a page linking tens of
/// thousands of hosts does not hold a socket for each (see [`crate::descriptors`]), long
/// enough that a host crawled at one request per second keeps its connection.
pub(crate) const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FetchSetupError {
    #[error("HTTP client")]
    Client(#[from] reqwest::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

/// Why a fetch produced no usable response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FetchErrorKind {
    Timeout,
    Connect,
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
    /// Body bytes received (after decompression), up to the cap.
    pub(crate) bytes: u64,
    /// The body, kept only when the content type is one the crawl parses.
    pub(crate) body: Option<Vec<u8>>,
    /// The body was longer than `max_body_bytes` and was cut there.
    pub(crate) truncated: bool,
    /// `Location`, for redirects.
    pub(crate) location: Option<String>,
    /// `Retry-After`, as a delay from now.
    pub(crate) retry_after: Option<Duration>,
    /// `X-Robots-Tag` contains `nofollow` (or `none`).
    pub(crate) header_nofollow: bool,
    /// The target of `Link: <…>; rel="canonical"`, unresolved (see `crate::canonical`).
    pub(crate) link_canonical: Option<String>,
}

impl Fetched {
    pub(crate) fn is_redirect(&self) -> bool {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
    }
}

/// The shared HTTP client.
pub struct Fetcher {
    /// The client new requests use. Replaced by [`Fetcher::shed_idle_connections`]; a
    /// request holds its own handle, so one in flight finishes on the client it began on.
    client: std::sync::RwLock<reqwest::Client>,
    config: Config,
    gate: Arc<RequestGate>,
    max_body_bytes: u64,
    content_types: Vec<String>,
}

impl Fetcher {
    /// Builds the client; every request it sends passes `gate`.
    pub(crate) fn new(config: &Config, gate: Arc<RequestGate>) -> Result<Fetcher, FetchSetupError> {
        let c = &config.crawl;
        Ok(Fetcher {
            client: std::sync::RwLock::new(build_client(config, &gate)?),
            config: config.clone(),
            gate,
            max_body_bytes: c.max_body_bytes.0,
            content_types: c
                .content_types
                .iter()
                .map(|t| t.to_ascii_lowercase())
                .collect(),
        })
    }

    /// Closes every idle keep-alive connection, to give their descriptors back when the
    /// process runs short (see [`crate::descriptors`]): new requests get a new client with
    /// an empty pool; the old pool closes its idle connections as soon as the requests in
    /// flight on it are done. Connection reuse starts over, which is the price.
    pub(crate) fn shed_idle_connections(&self) {
        match build_client(&self.config, &self.gate) {
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

    /// One GET of `url` for `kind` with body cap `cap`; a 2xx body is kept whatever its
    /// type for robots.txt and sitemaps, else only when its type is parsed. The gate is asked first.
    pub(crate) async fn fetch_capped(
        &self,
        url: &Url,
        kind: RequestKind,
        cap: u64,
    ) -> Result<Fetched, FetchError> {
        let refused = |e: crate::gate::Refused| FetchError {
            kind: FetchErrorKind::Refused,
            message: e.to_string(),
        };
        self.gate.check(url, kind).map_err(refused)?;
        let mut response = self
            .client()
            .get(url.clone())
            .send()
            .await
            .map_err(classify)?;
        self.gate
            .check_connected(url, response.remote_addr())
            .map_err(refused)?;
        let keep_any_body = matches!(kind, RequestKind::Robots | RequestKind::Sitemap);
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
        let keep =
            (200..300).contains(&status) && (keep_any_body || self.parses(content_type.as_deref()));
        let mut body = keep.then(Vec::new);
        let mut bytes: u64 = 0;
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(classify)? {
            let room = cap - bytes;
            let take = (chunk.len() as u64).min(room) as usize;
            if let Some(body) = body.as_mut() {
                body.extend_from_slice(&chunk[..take]);
            }
            bytes += take as u64;
            if take < chunk.len() || bytes >= cap {
                // Stop reading: the rest is never downloaded. Dropping the response closes
                // the connection, which is the price of not reading an oversized body.
                truncated =
                    take < chunk.len() || response.content_length().is_none_or(|l| l > bytes);
                break;
            }
        }
        Ok(Fetched {
            status,
            content_type,
            charset,
            bytes,
            body,
            truncated,
            location,
            retry_after,
            header_nofollow,
            link_canonical,
        })
    }
}

/// The HTTP client as the crawl configures it: no redirects followed (the crawl admits
/// targets like links), timeouts, a small keep-alive pool, gzip and brotli, names resolved
/// through the gate.
fn build_client(config: &Config, gate: &RequestGate) -> Result<reqwest::Client, reqwest::Error> {
    let c = &config.crawl;
    reqwest::Client::builder()
        .user_agent(c.user_agent.clone())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs_f64(c.timeout_secs))
        .connect_timeout(Duration::from_secs_f64(c.connect_timeout_secs))
        .pool_max_idle_per_host((config.politeness.per_host_concurrency as usize).clamp(1, 64))
        .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
        .tcp_nodelay(true)
        .gzip(true)
        .brotli(true)
        .no_proxy()
        .dns_resolver(gate.resolver())
        .build()
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
    fn nofollow_directives() {
        assert!(robots_directives_nofollow("noindex, nofollow"));
        assert!(robots_directives_nofollow("NONE"));
        assert!(!robots_directives_nofollow("noindex"));
    }
}
