//! What the HTTP client layer costs per request: the crawler's reqwest client, configured as
//! `src/fetch.rs` builds it, against hyper-util's legacy client (the pool and connector
//! reqwest itself wraps) driven directly, on keep-alive loopback connections.
//!
//! Issue 20 asks whether calling hyper directly would pay for what it would take to rebuild
//! (proxies, TLS roots, ALPN, the resolver hook, cookies, timeouts, pool limits). This bench
//! answers with a figure: the client thread's CPU time per request (a 16 KiB `text/html`
//! body read chunk by chunk into a buffer, as the crawl reads it), with the server on a
//! thread of its own so that only the client's CPU is counted. The variants run interleaved
//! in each round, on one runtime, against one server, so their ratio is measured side by
//! side:
//! - `reqwest (crawl config)`: default headers, no redirect policy, total and connect
//!   timeouts, per-host idle pool, `tcp_nodelay`, exactly the builder calls of `fetch.rs`
//!   that apply on plain http;
//! - `reqwest (bare)`: the same client without default headers and timeouts, the headers
//!   sent per request instead: what those options add;
//! - `hyper-util legacy`: the same request (same headers) through
//!   `hyper_util::client::legacy::Client` with its `HttpConnector`, the whole request
//!   under `tokio::time::timeout` as reqwest's total timeout does.
//!
//! Run: `cargo bench --bench http_client` (`-- --rounds N`, `-- --requests N` per variant
//! and round, `-- --in-flight N` concurrent requests). Prints per variant the median over
//! rounds of µs of client CPU per request, and each variant against the crawl's client.

#[path = "support/testweb_process.rs"]
mod testweb_process;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use crawler::cpu_time::thread_cpu_ns;
use futures_util::stream::{FuturesUnordered, StreamExt};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use testweb_process::{arg_value, median};

/// The body every request gets: the crawl bench's page size.
const BODY_BYTES: usize = 16 << 10;
const USER_AGENT: &str = "crawler-bench/0.1";
const ACCEPT_ENCODING: &str = "gzip, deflate";

/// Serves [`BODY_BYTES`] of HTML to every request, keep-alive, on a thread of its own.
fn start_server() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("its address");
    let body = Bytes::from(
        "<html><body>"
            .bytes()
            .chain(std::iter::repeat(b'x'))
            .take(BODY_BYTES)
            .collect::<Vec<u8>>(),
    );
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let body = body.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_request| {
                        let body = body.clone();
                        async move {
                            Ok::<_, Infallible>(
                                hyper::Response::builder()
                                    .header("content-type", "text/html; charset=utf-8")
                                    .body(Full::new(body))
                                    .expect("a response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    addr
}

fn crawl_reqwest() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        reqwest::header::HeaderValue::from_static("*/*"),
    );
    headers.insert(
        reqwest::header::ACCEPT_ENCODING,
        reqwest::header::HeaderValue::from_static(ACCEPT_ENCODING),
    );
    reqwest::Client::builder()
        .no_proxy()
        .user_agent(USER_AGENT)
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
        .expect("a client")
}

fn bare_reqwest() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(64)
        .tcp_nodelay(true)
        .build()
        .expect("a client")
}

type Hyper = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Empty<Bytes>,
>;

fn hyper_client() -> Hyper {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(Duration::from_secs(10))
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector)
}

async fn get_reqwest(client: &reqwest::Client, url: &url::Url, headers: bool) -> usize {
    let mut request = client.get(url.clone());
    if headers {
        request = request
            .header(reqwest::header::USER_AGENT, USER_AGENT)
            .header(reqwest::header::ACCEPT, "*/*")
            .header(reqwest::header::ACCEPT_ENCODING, ACCEPT_ENCODING);
    }
    let mut response = request.send().await.expect("a response");
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("a chunk") {
        body.extend_from_slice(&chunk);
    }
    body.len()
}

async fn get_hyper(client: &Hyper, url: &url::Url) -> usize {
    let uri: hyper::Uri = url.as_str().parse().expect("a URI");
    let request = hyper::Request::get(uri)
        .header(hyper::header::USER_AGENT, USER_AGENT)
        .header(hyper::header::ACCEPT, "*/*")
        .header(hyper::header::ACCEPT_ENCODING, ACCEPT_ENCODING)
        .body(Empty::new())
        .expect("a request");
    let exchange = async {
        let mut response = client.request(request).await.expect("a response");
        let mut body = Vec::new();
        while let Some(frame) = response.body_mut().frame().await {
            if let Ok(data) = frame.expect("a frame").into_data() {
                body.extend_from_slice(&data);
            }
        }
        body.len()
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .expect("in time")
}

#[derive(Clone, Copy)]
enum Variant {
    CrawlReqwest,
    BareReqwest,
    Hyper,
}

const VARIANTS: [(Variant, &str); 3] = [
    (Variant::CrawlReqwest, "reqwest (crawl config)"),
    (Variant::BareReqwest, "reqwest (bare)"),
    (Variant::Hyper, "hyper-util legacy"),
];

struct Clients {
    crawl: reqwest::Client,
    bare: reqwest::Client,
    hyper: Hyper,
}

/// Client CPU ns per request for `requests` requests of `variant`, `in_flight` at a time.
async fn measure(
    clients: &Clients,
    variant: Variant,
    url: &url::Url,
    requests: usize,
    in_flight: usize,
) -> f64 {
    let one = move |_: usize| async move {
        match variant {
            Variant::CrawlReqwest => get_reqwest(&clients.crawl, url, false).await,
            Variant::BareReqwest => get_reqwest(&clients.bare, url, true).await,
            Variant::Hyper => get_hyper(&clients.hyper, url).await,
        }
    };
    let started = thread_cpu_ns();
    let mut pending = FuturesUnordered::new();
    let mut sent = 0;
    let mut bytes = 0;
    while sent < requests.min(in_flight) {
        pending.push(one(sent));
        sent += 1;
    }
    while let Some(got) = pending.next().await {
        bytes += got;
        if sent < requests {
            pending.push(one(sent));
            sent += 1;
        }
    }
    assert_eq!(bytes, requests * BODY_BYTES, "every body read whole");
    (thread_cpu_ns() - started) as f64 / requests as f64
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() {
    let rounds: usize = arg_value("--rounds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let requests: usize = arg_value("--requests")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let in_flight: usize = arg_value("--in-flight")
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    crawler::allocator::limit_malloc_arenas();
    let addr = start_server();
    let url = url::Url::parse(&format!("http://{addr}/page")).expect("a URL");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async {
        let clients = Clients {
            crawl: crawl_reqwest(),
            bare: bare_reqwest(),
            hyper: hyper_client(),
        };
        // Warm-up: connections opened and pooled, allocator caches filled.
        for (variant, _) in VARIANTS {
            measure(&clients, variant, &url, 2_000, in_flight).await;
        }
        let mut figures: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
        for round in 0..rounds {
            let mut line = format!("round {}:", round + 1);
            for (i, (variant, name)) in VARIANTS.iter().enumerate() {
                let ns = measure(&clients, *variant, &url, requests, in_flight).await;
                line.push_str(&format!("  {name} {:.2} µs", ns / 1e3));
                figures[i].push(ns);
            }
            println!("{line}");
        }
        println!(
            "\nclient CPU per request, {BODY_BYTES}-byte bodies, {in_flight} in flight, median of {rounds} rounds of {requests}:"
        );
        let base = median(figures[0].clone());
        for (i, (_, name)) in VARIANTS.iter().enumerate() {
            let m = median(figures[i].clone());
            println!(
                "  {name:<24} {:>7.2} µs   {:>5.2}x   ({:+.2} µs)",
                m / 1e3,
                m / base,
                (m - base) / 1e3
            );
        }
    });
}
