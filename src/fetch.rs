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
//! `[network] resolve` is implemented as a reqwest DNS resolver: a matching host name
//! resolves to the configured address, and hyper keeps that address's port when the URL
//! has none, which is how many `http://*.test/` hosts reach one loopback listener.
//!
//! The same resolver keeps a public page from steering the crawler into a private
//! network: a name that resolves only to private, loopback or link-local addresses is
//! refused (such addresses are dropped from a mixed answer) unless it is a seed's host,
//! a `[network] resolve` host, or `scope.allow_private` is set. Checking at resolution
//! time, not on the URL, is what catches a public name pointing at 10.0.0.1. (IP-literal
//! URLs never reach the resolver; the scope rules refuse those.)

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use url::Url;

use crate::config::{Config, ResolveRule};
use crate::scope::is_private_ip;

/// The client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FetchSetupError {
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
}

/// Why a fetch produced no usable response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchErrorKind {
    Timeout,
    Connect,
    Body,
    Other,
}

/// A failed fetch: what kind and a one-line message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct FetchError {
    pub kind: FetchErrorKind,
    pub message: String,
}

impl FetchError {
    /// Timeouts and connection failures are worth another try; other errors are not.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, FetchErrorKind::Timeout | FetchErrorKind::Connect)
    }
}

/// What a fetch brought back.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    /// The media type, lowercased, without parameters (`text/html`).
    pub content_type: Option<String>,
    /// The `charset` parameter of Content-Type, if any.
    pub charset: Option<String>,
    /// Body bytes received (after decompression), up to the cap.
    pub bytes: u64,
    /// The body, kept only when the content type is one the crawl parses.
    pub body: Option<Vec<u8>>,
    /// The body was longer than `max_body_bytes` and was cut there.
    pub truncated: bool,
    /// `Location`, for redirects.
    pub location: Option<String>,
    /// `Retry-After`, as a delay from now.
    pub retry_after: Option<Duration>,
    /// `X-Robots-Tag` contains `nofollow` (or `none`).
    pub header_nofollow: bool,
}

impl Fetched {
    pub fn is_redirect(&self) -> bool {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
    }
}

/// The shared HTTP client.
pub struct Fetcher {
    client: reqwest::Client,
    max_body_bytes: u64,
    content_types: Vec<String>,
}

impl Fetcher {
    /// Builds the client; `seeds` are the hosts allowed on private addresses.
    pub fn new(config: &Config, seeds: &[Url]) -> Result<Fetcher, FetchSetupError> {
        let rules = config.resolve_rules()?;
        let resolver = OverrideResolver {
            rules,
            allow_private: config.scope.allow_private,
            private_ok_hosts: seeds
                .iter()
                .filter_map(|u| u.host_str().map(str::to_ascii_lowercase))
                .collect(),
        };
        let c = &config.crawl;
        let client = reqwest::Client::builder()
            .user_agent(c.user_agent.clone())
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs_f64(c.timeout_secs))
            .connect_timeout(Duration::from_secs_f64(c.connect_timeout_secs))
            .pool_max_idle_per_host((config.politeness.per_host_concurrency as usize).clamp(1, 64))
            .pool_idle_timeout(Duration::from_secs(30))
            .tcp_nodelay(true)
            .gzip(true)
            .brotli(true)
            .no_proxy()
            .dns_resolver(SharedResolver(Arc::new(resolver)))
            .build()?;
        Ok(Fetcher {
            client,
            max_body_bytes: c.max_body_bytes.0,
            content_types: c
                .content_types
                .iter()
                .map(|t| t.to_ascii_lowercase())
                .collect(),
        })
    }

    /// Whether a media type is one whose body is parsed for links.
    pub fn parses(&self, content_type: Option<&str>) -> bool {
        content_type.is_some_and(|t| self.content_types.iter().any(|c| c == t))
    }

    /// One GET of `url`, body capped at `max_body_bytes` and kept when it will be parsed.
    pub async fn fetch(&self, url: &Url) -> Result<Fetched, FetchError> {
        self.fetch_capped(url, self.max_body_bytes, false).await
    }

    /// One GET of `url` with body cap `cap`; a 2xx body is kept whatever its type when
    /// `keep_any_body` (robots.txt), else only when its type is parsed.
    pub async fn fetch_capped(
        &self,
        url: &Url,
        cap: u64,
        keep_any_body: bool,
    ) -> Result<Fetched, FetchError> {
        let mut response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(classify)?;
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
        })
    }
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
pub fn parse_retry_after(value: &str) -> Option<Duration> {
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
pub fn robots_directives_nofollow(value: &str) -> bool {
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

/// Resolves hosts that match a `[network] resolve` rule to its address, and every other
/// host through the system resolver, without private addresses unless allowed.
struct OverrideResolver {
    rules: Vec<ResolveRule>,
    allow_private: bool,
    private_ok_hosts: HashSet<String>,
}

impl OverrideResolver {
    async fn lookup(
        &self,
        host: String,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        if let Some(rule) = self.rules.iter().find(|r| r.matches(&host)) {
            return Ok(vec![rule.addr]);
        }
        let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
        if self.allow_private || self.private_ok_hosts.contains(&host) {
            return Ok(all);
        }
        let public: Vec<SocketAddr> = all
            .iter()
            .copied()
            .filter(|a| !is_private_ip(a.ip()))
            .collect();
        match (public.is_empty(), all.first()) {
            (true, Some(first)) => Err(format!(
                "{host} resolves to the private address {}; not fetched (scope.allow_private)",
                first.ip()
            )
            .into()),
            _ => Ok(public),
        }
    }
}

/// The resolver as reqwest holds it: shared, so each lookup's future can own a handle.
struct SharedResolver(Arc<OverrideResolver>);

impl reqwest::dns::Resolve for SharedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let resolver = Arc::clone(&self.0);
        Box::pin(async move {
            let addrs = resolver.lookup(host).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(allow_private: bool, seeds: &[&str]) -> OverrideResolver {
        OverrideResolver {
            rules: vec![ResolveRule {
                pattern: "*.test".into(),
                addr: "127.0.0.1:8080".parse().unwrap(),
            }],
            allow_private,
            private_ok_hosts: seeds.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[tokio::test]
    async fn private_addresses_are_refused_unless_allowed() {
        // `localhost` resolves to loopback through the system resolver, with no network.
        let e = resolver(false, &[])
            .lookup("localhost".into())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("private address"), "{e}");
        assert!(resolver(true, &[]).lookup("localhost".into()).await.is_ok());
        assert!(resolver(false, &["localhost"])
            .lookup("localhost".into())
            .await
            .is_ok());
        // Configured overrides are the operator's own choice.
        let addrs = resolver(false, &[]).lookup("h1.test".into()).await.unwrap();
        assert_eq!(addrs, vec!["127.0.0.1:8080".parse().unwrap()]);
    }

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
