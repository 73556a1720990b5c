//! The plain-http client: hyper-util's legacy client (the pool and connector reqwest itself
//! wraps) driven directly, for the requests that need nothing else reqwest adds.
//!
//! Why: reqwest's layers (its redirect, retry and cookie services, a URL parsed and headers
//! cloned several times per request, boxed futures and timers) cost ~5 µs of client CPU per
//! 16 KiB keep-alive request over calling this same client (`cargo bench --bench
//! http_client`: 17.8 against 12.5 µs), a sixth of the crawl's fetch CPU. Most crawl
//! requests need none of what those layers do, so they skip them here; the others keep
//! reqwest, whose features this module does not rebuild.
//!
//! Which requests come here ([`super::Fetcher`] decides): `http://` URLs without
//! credentials in them, with no proxy (configured or from the environment), no cookie jar
//! and no `[[site]]` settings for the host. `https` (rustls roots, `network.ca_file`, ALPN h2), proxies, cookies and per-site
//! headers and credentials stay on reqwest.
//!
//! What is kept equal to the reqwest path, so a page fetched either way is the same page:
//! - names resolve through the gate's resolver (the very [`GateResolver`] reqwest is given:
//!   `[network] resolve`, the private-address rule), and the same `HttpConnector` keeps the
//!   resolved port when the URL has none;
//! - the same request headers: the user agent, `Accept`, `Accept-Encoding`,
//!   `network.headers` (the defaults, built as reqwest's builder builds them) and the
//!   conditional headers of a recrawl, which win over a default of the same name;
//! - `crawl.timeout_secs` bounds the whole exchange, the body's reading included, as
//!   reqwest's total timeout does; `crawl.connect_timeout_secs`, `TCP_NODELAY`, TCP
//!   keep-alive and the idle pool are set as reqwest sets them;
//! - the connected peer's address comes from the connection (`HttpInfo`), for the gate's
//!   connected-address check.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::{Body as _, Bytes, Incoming};
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::{HttpConnector, HttpInfo};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Sleep;
use url::Url;

use super::{FetchError, FetchErrorKind, ResponseHead};
use crate::gate::GateResolver;

/// The gate's resolver as hyper-util's connector calls a resolver (a tower service of
/// names), through the interface reqwest calls it by, so both clients resolve alike.
#[derive(Clone)]
pub(super) struct GateDns(pub(super) GateResolver);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Name> for GateDns {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolver = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let name: reqwest::dns::Name = host.parse()?;
            let addrs = reqwest::dns::Resolve::resolve(&resolver, name).await?;
            Ok(addrs.collect::<Vec<_>>().into_iter())
        })
    }
}

type HyperClient = hyper_util::client::legacy::Client<HttpConnector<GateDns>, Empty<Bytes>>;

/// Settings of the plain-http client, as `super::build_client` gives them to reqwest.
pub(super) struct PlainSettings {
    /// The headers every request sends (user agent, `Accept`, `Accept-Encoding`,
    /// `network.headers`).
    pub(super) headers: HeaderMap,
    pub(super) timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) idle_timeout: Duration,
    pub(super) idle_per_host: usize,
}

/// The client: one pool of keep-alive connections, shared by every plain-http request.
pub(super) struct PlainHttp {
    client: HyperClient,
    headers: HeaderMap,
    timeout: Duration,
}

/// reqwest's TCP keep-alive defaults (probe after 15 s idle, every 15 s, 3 probes) and its
/// user timeout (30 s), kept so that pooled connections age alike on both paths.
const TCP_KEEPALIVE: Duration = Duration::from_secs(15);
const TCP_KEEPALIVE_RETRIES: u32 = 3;
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

impl PlainHttp {
    pub(super) fn new(resolver: GateResolver, settings: PlainSettings) -> PlainHttp {
        let mut connector = HttpConnector::new_with_resolver(GateDns(resolver));
        connector.set_connect_timeout(Some(settings.connect_timeout));
        connector.set_nodelay(true);
        connector.set_keepalive(Some(TCP_KEEPALIVE));
        connector.set_keepalive_interval(Some(TCP_KEEPALIVE));
        connector.set_keepalive_retries(Some(TCP_KEEPALIVE_RETRIES));
        connector.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .timer(hyper_util::rt::TokioTimer::new())
                .pool_timer(hyper_util::rt::TokioTimer::new())
                .pool_idle_timeout(settings.idle_timeout)
                .pool_max_idle_per_host(settings.idle_per_host)
                .build(connector);
        PlainHttp {
            client,
            headers: settings.headers,
            timeout: settings.timeout,
        }
    }

    /// Sends a GET of `url` with the default headers and `extra` (which replace a default
    /// of the same name), and returns the response's head and its body to read.
    pub(super) async fn get(
        &self,
        url: &Url,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Result<(ResponseHead, PlainBody), FetchError> {
        let uri: hyper::Uri = url.as_str().parse().map_err(|e| FetchError {
            kind: FetchErrorKind::Other,
            message: format!("{url} is not a valid request URI: {e}"),
        })?;
        let mut request = hyper::Request::new(Empty::new());
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        *headers = self.headers.clone();
        for (name, value) in extra {
            headers.insert(name, value.clone());
        }
        let mut deadline = Box::pin(tokio::time::sleep(self.timeout));
        let mut sending = pin!(self.client.request(request));
        let sent = std::future::poll_fn(|cx| {
            if let Poll::Ready(result) = sending.as_mut().poll(cx) {
                return Poll::Ready(Some(result));
            }
            deadline.as_mut().poll(cx).map(|()| None)
        })
        .await;
        let response = match sent {
            Some(Ok(response)) => response,
            Some(Err(error)) => return Err(request_error(url, &error)),
            None => {
                let sending = format!("error sending request for url ({url})");
                return Err(timed_out(sending, self.timeout));
            }
        };
        let remote = response
            .extensions()
            .get::<HttpInfo>()
            .map(HttpInfo::remote_addr);
        let (parts, incoming) = response.into_parts();
        let head = ResponseHead {
            status: parts.status,
            version: parts.version,
            content_length: incoming.size_hint().exact(),
            headers: parts.headers,
            remote,
        };
        Ok((
            head,
            PlainBody {
                incoming,
                deadline,
                timeout: self.timeout,
            },
        ))
    }
}

/// A response body being read, under what is left of the exchange's timeout.
pub(super) struct PlainBody {
    incoming: Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl PlainBody {
    /// The next piece of the body, `None` at its end.
    pub(super) async fn chunk(&mut self, url: &Url) -> Result<Option<Bytes>, FetchError> {
        let PlainBody {
            incoming,
            deadline,
            timeout,
        } = self;
        loop {
            let frame = std::future::poll_fn(|cx| {
                if let Poll::Ready(frame) = Pin::new(&mut *incoming).poll_frame(cx) {
                    return Poll::Ready(Some(frame));
                }
                deadline.as_mut().poll(cx).map(|()| None)
            })
            .await;
            match frame {
                None => {
                    let reading = format!("error reading the response body of {url}");
                    return Err(timed_out(reading, *timeout));
                }
                Some(None) => return Ok(None),
                Some(Some(Err(error))) => {
                    return Err(FetchError {
                        kind: FetchErrorKind::Body,
                        message: with_causes(
                            format!("error reading the response body of {url}"),
                            &error,
                        ),
                    })
                }
                Some(Some(Ok(frame))) => {
                    // Trailers carry no body bytes: read on.
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

/// `crawl.timeout_secs` ran out while `doing` (sending, or reading the body).
fn timed_out(doing: String, timeout: Duration) -> FetchError {
    FetchError {
        kind: FetchErrorKind::Timeout,
        message: format!(
            "{doing}: operation timed out (crawl.timeout_secs = {})",
            timeout.as_secs_f64()
        ),
    }
}

/// A failed request: a connection that could not be made (the resolver's refusal
/// included) is worth another try like reqwest's connect errors; the cause chain says what
/// really happened.
fn request_error(url: &Url, error: &hyper_util::client::legacy::Error) -> FetchError {
    let kind = if error.is_connect() {
        FetchErrorKind::Connect
    } else {
        FetchErrorKind::Other
    };
    FetchError {
        kind,
        message: with_causes(format!("error sending request for url ({url})"), error),
    }
}

fn with_causes(mut message: String, error: &dyn std::error::Error) -> String {
    let mut cause = Some(error);
    while let Some(e) = cause {
        message.push_str(": ");
        message.push_str(&e.to_string());
        cause = e.source();
    }
    message
}
