//! The HTTP server of the synthetic web: one listener on 127.0.0.1, every virtual host
//! behind it (routed by the `Host` header), hyper http1 with keep-alive on a current-thread
//! tokio runtime of its own OS thread.
//!
//! Its own thread and runtime let tests be sync or async, keep the server's work off the
//! crawler's runtime, and make the server's CPU time measurable on its own
//! ([`TestWebServer::cpu_time`]). Pages are rendered per request straight into one buffer;
//! the request log is a `Vec` behind a mutex, appended at arrival and completed when the
//! response is handed to hyper, so it stays in arrival order.
//!
//! With [`ServerOptions::tls`] the listener speaks TLS (`tls.rs`): a made-up CA whose PEM
//! is [`TestWebServer::ca_pem`], ALPN `h2` and `http/1.1` (or `http/1.1` alone), and
//! hyper-util's auto connection builder, which serves whichever protocol the client chose;
//! pages then link with `https`. Each log record says which HTTP version carried it and on
//! which connection, so a test can see HTTP/2 and count connections.
//!
//! Started with [`TestWebServer::start_hostile`] it also serves the hostile corner
//! (`hostile.rs`): the `*.hostile.test` hosts on this listener, and two more listeners on
//! the same runtime, the raw-socket responder (`*.raw.test`) and the canary (`raw.rs`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST, LOCATION, USER_AGENT};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use super::graph::{BodyKind, Graph, Node, Page, Special};
use super::raw::HostileAddrs;
use super::render;
use super::tls::{TlsIdentity, TlsMode};
use super::Web;

/// One request the server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Virtual host as requested, lower-cased, port removed (`h3.test`).
    pub host: String,
    /// Path and query exactly as requested.
    pub path: String,
    /// Status sent; 0 when the client went away (or the server stopped) before the answer.
    pub status: u16,
    /// Arrival, since the server started.
    pub started: Duration,
    /// When the response was handed to the connection (for streamed bodies, before the
    /// body is written), since the server started. The interval lies inside the client's.
    pub finished: Duration,
    pub user_agent: Option<String>,
    /// Which TCP connection carried it (numbered from 0 in accept order): keep-alive and
    /// HTTP/2's streams show as many records sharing one connection.
    pub connection: u64,
    /// The HTTP version of the request.
    pub version: HttpVersion,
    /// FNV-1a of the body bytes sent (content-coded, as on the wire), for whole-buffer
    /// answers; `None` for streamed ones (the big page, the hostile corner).
    pub body_hash: Option<u64>,
    /// The request's `Accept-Encoding` header, as sent.
    pub accept_encoding: Option<String>,
    /// The content coding the answer was sent in (`gzip`, `br`); `None` for identity.
    pub content_coding: Option<&'static str>,
    /// The request's `Authorization` header, as sent (per-site basic auth).
    pub authorization: Option<String>,
    /// The request's `X-…` headers, names lower-cased, in the order sent (extra headers).
    pub x_headers: Vec<(String, String)>,
    /// Every request header as received (names lowercase, in order): what a client sent
    /// besides the fields above (extra headers, cookies).
    pub headers: Vec<(String, String)>,
}

impl RequestRecord {
    /// The value of the request header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The HTTP version a request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpVersion {
    Http10,
    Http11,
    Http2,
    Other,
}

impl HttpVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Http10 => "HTTP/1.0",
            HttpVersion::Http11 => "HTTP/1.1",
            HttpVersion::Http2 => "HTTP/2",
            HttpVersion::Other => "other",
        }
    }

    fn of(version: hyper::Version) -> HttpVersion {
        match version {
            hyper::Version::HTTP_10 => HttpVersion::Http10,
            hyper::Version::HTTP_11 => HttpVersion::Http11,
            hyper::Version::HTTP_2 => HttpVersion::Http2,
            _ => HttpVersion::Other,
        }
    }
}

impl RequestRecord {
    /// `http://{host}{path}`: the canonical URL when the crawler requested a canonical URL
    /// (the ground truth's spelling; over TLS the crawler asked for the `https` one).
    pub fn url(&self) -> String {
        format!("http://{}{}", self.host, self.path)
    }
}

/// How to run a [`TestWebServer`].
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Keep the request log. A benchmark that only needs counts can turn it off so the
    /// server adds nothing to the process's memory (the count is kept either way).
    pub log_requests: bool,
    /// Send bodies gzip- or brotli-coded and some chunked, when the client offers the
    /// codings (see `encoding.rs`); the pages are the same.
    pub encodings: bool,
    /// Added before every answer, as a distant server's round trip would: a crawl then waits
    /// on the network as on the real web rather than on loopback's microseconds.
    pub latency: Duration,
    /// Serve TLS (see the module doc): off by default.
    pub tls: TlsMode,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            log_requests: true,
            encodings: false,
            latency: Duration::ZERO,
            tls: TlsMode::Off,
        }
    }
}

pub(crate) struct Shared {
    web: Arc<Web>,
    started: Instant,
    log_requests: bool,
    encodings: bool,
    latency: Duration,
    /// Served over TLS: links and `Location`s are turned to `https`.
    tls: bool,
    /// TLS handshakes that failed (a client that does not trust the CA, say).
    tls_failures: AtomicU64,
    requests: AtomicU64,
    log: Mutex<Vec<RequestRecord>>,
    /// Requests seen so far per stateful page (flaky pages, robots.txt).
    attempts: Mutex<HashMap<Node, u32>>,
    pub(crate) next_connection: AtomicU64,
    /// Longest lateness of the stall probe's ticks, in µs (see [`TestWebServer::track_stalls`]).
    max_stall_us: AtomicU64,
    /// Set when the hostile corner is served.
    pub(crate) hostile: Option<HostileState>,
    /// The pressure corner's windows of arrivals.
    pressure: super::pressure::PressureState,
    /// Answers set a cookie (see [`TestWebServer::set_cookies`]).
    set_cookies: AtomicBool,
}

/// The hostile corner's shared state: where the canary listens and what it saw.
pub(crate) struct HostileState {
    pub(crate) canary_port: u16,
    pub(crate) canary_hits: AtomicU64,
}

impl Shared {
    /// Counts a request and appends it to the log; the returned guard completes the record
    /// (status, end time) when dropped, also when the request is abandoned.
    pub(crate) fn log_start(
        &self,
        host: String,
        path: String,
        user_agent: Option<String>,
        connection: u64,
        version: HttpVersion,
    ) -> Completion<'_> {
        let started = self.started.elapsed();
        self.requests.fetch_add(1, Ordering::Relaxed);
        let index = if self.log_requests {
            let mut log = lock(&self.log);
            log.push(RequestRecord {
                host,
                path,
                status: 0,
                started,
                finished: started,
                user_agent,
                connection,
                version,
                body_hash: None,
                accept_encoding: None,
                content_coding: None,
                authorization: None,
                x_headers: Vec::new(),
                headers: Vec::new(),
            });
            log.len() - 1
        } else {
            usize::MAX
        };
        Completion {
            shared: self,
            index,
            status: 0,
            body_hash: None,
            accept_encoding: None,
            content_coding: None,
            headers: Vec::new(),
        }
    }
}

/// Locks even if a panicking thread poisoned the mutex: the data (a log, counters) stays
/// meaningful, and a test must see the log after a failure.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running synthetic-web server; stopped by [`TestWebServer::shutdown`] or on drop.
pub struct TestWebServer {
    addr: SocketAddr,
    hostile: Option<HostileAddrs>,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    cpu_clock: Option<libc::clockid_t>,
    /// Spawns tasks on the server's runtime from outside it (the stall probe).
    runtime: tokio::runtime::Handle,
    /// The CA certificate a client must trust, when serving TLS.
    ca_pem: Option<String>,
}

impl TestWebServer {
    /// Binds 127.0.0.1 on an ephemeral port and serves `web` on a new thread.
    pub fn start(web: Arc<Web>) -> std::io::Result<TestWebServer> {
        Self::start_on(web, 0)
    }

    /// Like [`TestWebServer::start`] on a chosen port (0 = ephemeral).
    pub fn start_on(web: Arc<Web>, port: u16) -> std::io::Result<TestWebServer> {
        Self::start_with(
            web,
            ServerOptions {
                port,
                ..ServerOptions::default()
            },
        )
    }

    /// Starts with explicit [`ServerOptions`].
    pub fn start_with(web: Arc<Web>, options: ServerOptions) -> std::io::Result<TestWebServer> {
        Self::start_inner(web, options, false)
    }

    /// Like [`TestWebServer::start_with`], also serving the hostile corner (see the
    /// `hostile` module doc of this crate, [`crate::Hostile`]): the `*.hostile.test` hosts
    /// on this listener, plus the raw-socket responder for `*.raw.test` and the canary, each
    /// on an ephemeral port of 127.0.0.1.
    pub fn start_hostile(web: Arc<Web>, options: ServerOptions) -> std::io::Result<TestWebServer> {
        Self::start_inner(web, options, true)
    }

    fn start_inner(
        web: Arc<Web>,
        options: ServerOptions,
        hostile: bool,
    ) -> std::io::Result<TestWebServer> {
        let listener = StdListener::bind(("127.0.0.1", options.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let extra = if hostile {
            let raw = StdListener::bind(("127.0.0.1", 0))?;
            raw.set_nonblocking(true)?;
            let canary = StdListener::bind(("127.0.0.1", 0))?;
            canary.set_nonblocking(true)?;
            Some((raw, canary))
        } else {
            None
        };
        let hostile_addrs = match &extra {
            Some((raw, canary)) => Some(HostileAddrs {
                raw: raw.local_addr()?,
                canary: canary.local_addr()?,
            }),
            None => None,
        };
        let tls = match options.tls {
            TlsMode::Off => None,
            mode => Some(TlsIdentity::new(mode).map_err(std::io::Error::other)?),
        };
        let ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
        let acceptor = tls.map(|t| Listening {
            acceptor: TlsAcceptor::from(t.config),
            http1_only: options.tls == TlsMode::Http1Only,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            web,
            started: Instant::now(),
            log_requests: options.log_requests,
            encodings: options.encodings,
            latency: options.latency,
            tls: acceptor.is_some(),
            tls_failures: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::with_capacity(if options.log_requests {
                4096
            } else {
                0
            })),
            attempts: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(0),
            max_stall_us: AtomicU64::new(0),
            hostile: hostile_addrs.map(|a| HostileState {
                canary_port: a.canary.port(),
                canary_hits: AtomicU64::new(0),
            }),
            pressure: Default::default(),
            set_cookies: AtomicBool::new(false),
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let handle = runtime.handle().clone();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("testweb-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Some((raw, canary)) = extra {
                        // Tasks of this runtime: they end when it is dropped with `serve`.
                        match (
                            tokio::net::TcpListener::from_std(raw),
                            tokio::net::TcpListener::from_std(canary),
                        ) {
                            (Ok(raw), Ok(canary)) => {
                                tokio::spawn(super::raw::serve_raw(raw, Arc::clone(&serving)));
                                tokio::spawn(super::raw::serve_canary(
                                    canary,
                                    Arc::clone(&serving),
                                ));
                            }
                            _ => tracing::error!("testweb: cannot register the hostile listeners"),
                        }
                    }
                    serve(listener, serving, acceptor, stop_rx).await
                })
            })?;
        let cpu_clock = thread_cpu_clock(&thread);
        Ok(TestWebServer {
            addr,
            hostile: hostile_addrs,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
            cpu_clock,
            runtime: handle,
            ca_pem,
        })
    }

    /// The PEM of the CA certificate the server's TLS certificates chain to (`None` without
    /// TLS): what a client trusts to crawl this server over `https`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// `url` (a URL of this web, such as a seed) with this server's scheme.
    pub fn url_for(&self, url: &str) -> String {
        match (self.scheme(), url.strip_prefix("http://")) {
            ("https", Some(rest)) => format!("https://{rest}"),
            _ => url.to_string(),
        }
    }

    /// TLS handshakes that failed so far (a client that does not trust [`Self::ca_pem`]).
    pub fn tls_handshake_failures(&self) -> u64 {
        self.shared.tls_failures.load(Ordering::Relaxed)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The crawler's `[network] resolve` entry: `("*.test", "127.0.0.1:PORT")`.
    pub fn resolve_entry(&self) -> (String, String) {
        ("*.test".to_string(), self.addr.to_string())
    }

    /// The crawler's `[network] resolve` entries: [`TestWebServer::resolve_entry`], and with
    /// the hostile corner `("*.raw.test", RAW_ADDR)` for the raw-socket responder (a longer
    /// wildcard, so it wins over `*.test`). The canary is deliberately not in it.
    pub fn resolve_entries(&self) -> Vec<(String, String)> {
        let mut entries = vec![self.resolve_entry()];
        if let Some(h) = &self.hostile {
            entries.push((
                format!("*.{}", super::hostile::RAW_DOMAIN),
                h.raw.to_string(),
            ));
        }
        entries
    }

    /// The canary's address (hostile corner only): nothing may ever connect to it.
    pub fn canary_addr(&self) -> Option<SocketAddr> {
        self.hostile.map(|h| h.canary)
    }

    /// Connections the canary accepted so far (0 without the hostile corner).
    pub fn canary_connections(&self) -> u64 {
        self.shared
            .hostile
            .as_ref()
            .map_or(0, |h| h.canary_hits.load(Ordering::Relaxed))
    }

    /// The raw-socket responder's address (hostile corner only).
    pub fn raw_addr(&self) -> Option<SocketAddr> {
        self.hostile.map(|h| h.raw)
    }

    /// Starts the stall probe: a task on the server's thread that wakes every millisecond
    /// and records how late it woke ([`TestWebServer::max_stall`]). A request's arrival
    /// stamp is taken on the same thread, so the probe's lateness bounds how much later
    /// than its real arrival a request can have been stamped: when the machine is so loaded
    /// that the server thread does not run for 80 ms, requests sent apart in that time are
    /// stamped together. Timing tests widen their tolerance by this measured figure instead
    /// of a guessed one. Opt-in: it costs a wake-up per millisecond, which a benchmark
    /// measuring the server's CPU time should not pay.
    pub fn track_stalls(&self) {
        let shared = Arc::clone(&self.shared);
        self.runtime.spawn(async move {
            let tick = Duration::from_millis(1);
            loop {
                let due = Instant::now() + tick;
                tokio::time::sleep_until(due.into()).await;
                // The timer wheel rounds to the next millisecond: up to 1 ms late is normal.
                let late = Instant::now().saturating_duration_since(due);
                shared
                    .max_stall_us
                    .fetch_max(late.as_micros() as u64, Ordering::Relaxed);
            }
        });
    }

    /// The longest the server thread was late to run since [`TestWebServer::track_stalls`]
    /// (zero without it).
    pub fn max_stall(&self) -> Duration {
        Duration::from_micros(self.shared.max_stall_us.load(Ordering::Relaxed))
    }

    /// From now on, every answer to a request that does not carry this server's cookie sets
    /// it: `Set-Cookie: testweb=<host>; Path=/` (host-only, a session cookie). A client with
    /// a cookie jar sends it back on every later request to that host; one without never
    /// does, so the log shows which.
    pub fn set_cookies(&self) {
        self.shared.set_cookies.store(true, Ordering::Relaxed);
    }

    /// Every request received so far, in arrival order (empty when the log is off).
    pub fn log(&self) -> Vec<RequestRecord> {
        lock(&self.shared.log).clone()
    }

    /// Number of requests received so far (counted even when the log is off).
    pub fn request_count(&self) -> usize {
        self.shared.requests.load(Ordering::Relaxed) as usize
    }

    /// Time since the server started, on the clock of `RequestRecord::started`.
    pub fn elapsed(&self) -> Duration {
        self.shared.started.elapsed()
    }

    /// CPU time consumed so far by the server thread (all of the server's work happens on
    /// it). `Duration::ZERO` where the thread clock is unavailable.
    pub fn cpu_time(&self) -> Duration {
        let Some(clock) = self.cpu_clock else {
            return Duration::ZERO;
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; `clock` belongs to a thread we have not joined
        // yet (`self` still owns the handle), so the clock id is still valid.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        if rc != 0 {
            return Duration::ZERO;
        }
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// Stops accepting, drops every open connection, joins the server thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The receiver is gone only if the server thread already ended.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("testweb server thread panicked");
            }
        }
        self.cpu_clock = None;
    }
}

impl Drop for TestWebServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn thread_cpu_clock(thread: &JoinHandle<()>) -> Option<libc::clockid_t> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the pthread_t comes from a live JoinHandle and `clock` is a valid out-pointer.
    let rc = unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) };
    (rc == 0).then_some(clock)
}

/// The TLS side of the listener: the handshake, and whether HTTP/2 may follow it.
struct Listening {
    acceptor: TlsAcceptor,
    http1_only: bool,
}

async fn serve(
    listener: StdListener,
    shared: Arc<Shared>,
    tls: Option<Listening>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("testweb: cannot register listener: {e}");
            return;
        }
    };
    let tls = tls.map(Arc::new);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small responses must not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    let connection = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                    let shared = Arc::clone(&shared);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let serving = Arc::clone(&shared);
                        let service = service_fn(move |req| handle(Arc::clone(&serving), connection, req));
                        // Connection errors (client resets, half-sent requests, failed
                        // handshakes) end only that connection.
                        let Some(tls) = tls else {
                            let _ = http1::Builder::new()
                                .keep_alive(true)
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                            return;
                        };
                        let stream = match tls.acceptor.accept(stream).await {
                            Ok(stream) => stream,
                            Err(e) => {
                                shared.tls_failures.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!("testweb: TLS handshake failed: {e}");
                                return;
                            }
                        };
                        // The auto builder reads the connection's preface: HTTP/2 when the
                        // client chose `h2` by ALPN, else HTTP/1.1.
                        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                        if tls.http1_only {
                            builder = builder.http1_only();
                        }
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("testweb: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    // Returning drops the runtime, which drops every connection task.
}

/// Fills in the log record when the request ends, also when the client goes away first
/// (the handler future is then dropped with `status` still 0).
pub(crate) struct Completion<'a> {
    shared: &'a Shared,
    index: usize,
    pub(crate) status: u16,
    pub(crate) body_hash: Option<u64>,
    pub(crate) accept_encoding: Option<String>,
    pub(crate) content_coding: Option<&'static str>,
    pub(crate) headers: Vec<(String, String)>,
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        let finished = self.shared.started.elapsed();
        if let Some(record) = lock(&self.shared.log).get_mut(self.index) {
            record.status = self.status;
            record.body_hash = self.body_hash;
            record.accept_encoding = self.accept_encoding.take();
            record.content_coding = self.content_coding;
            record.headers = std::mem::take(&mut self.headers);
            record.finished = finished;
        }
    }
}

async fn handle(
    shared: Arc<Shared>,
    connection: u64,
    req: Request<Incoming>,
) -> Result<Response<WebBody>, Infallible> {
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    if !shared.log_requests {
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let response = over_tls(&shared, answer(&shared, &req).await);
        return Ok(shape(&shared, &req, response).0);
    }
    let host = strip_port(host_header(&req)).to_ascii_lowercase();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let user_agent = req
        .headers()
        .get(USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let version = HttpVersion::of(req.version());
    let mut completion = shared.log_start(host, path, user_agent, connection, version);
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let x_headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-"))
        .map(|(name, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (name.as_str().to_string(), value)
        })
        .collect();
    if authorization.is_some() || !x_headers.is_empty() {
        if let Some(record) = lock(&shared.log).get_mut(completion.index) {
            record.authorization = authorization;
            record.x_headers = x_headers;
        }
    }
    completion.accept_encoding = req
        .headers()
        .get(hyper::header::ACCEPT_ENCODING)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    completion.headers = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let response = over_tls(&shared, answer(&shared, &req).await);
    let (mut response, body_hash) = shape(&shared, &req, response);
    if shared.set_cookies.load(Ordering::Relaxed) {
        let has_ours = req
            .headers()
            .get_all(hyper::header::COOKIE)
            .iter()
            .any(|v| String::from_utf8_lossy(v.as_bytes()).contains("testweb="));
        if !has_ours {
            if let Ok(value) = HeaderValue::from_str(&format!(
                "testweb={}; Path=/",
                strip_port(host_header(&req)).to_ascii_lowercase()
            )) {
                response
                    .headers_mut()
                    .insert(hyper::header::SET_COOKIE, value);
            }
        }
    }
    completion.status = response.status().as_u16();
    completion.body_hash = body_hash;
    completion.content_coding = response
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|v| match v.as_bytes() {
            b"gzip" => Some("gzip"),
            b"br" => Some("br"),
            _ => None,
        });
    drop(completion);
    Ok(response)
}

/// Served over TLS, the answer's `http` links and `Location` turned to `https`
/// ([`super::tls::https_links`]): in HTML and XML bodies whole or streamed (the big page's
/// ends); other bodies are left as they are (their link-like text is not links).
fn over_tls(shared: &Shared, response: Response<WebBody>) -> Response<WebBody> {
    if !shared.tls {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    if let Some(rewritten) = parts
        .headers
        .get(LOCATION)
        .and_then(|l| super::tls::https_links(l.as_bytes()))
        .and_then(|l| HeaderValue::from_bytes(&l).ok())
    {
        parts.headers.insert(LOCATION, rewritten);
    }
    let markup = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.contains("html") || t.contains("xml"));
    let https = |bytes: Bytes| match super::tls::https_links(&bytes) {
        Some(rewritten) => Bytes::from(rewritten),
        None => bytes,
    };
    let body = match body {
        WebBody::Full(Some(bytes)) if markup => WebBody::full(https(bytes)),
        WebBody::Big {
            prefix,
            filler_left,
            tail,
        } => WebBody::Big {
            prefix: prefix.map(https),
            filler_left,
            tail: tail.map(https),
        },
        other => other,
    };
    Response::from_parts(parts, body)
}

/// Gives a whole-buffer answer the transfer shape `encoding.rs` picks (when the server was
/// started with `encodings`), and returns the hash of the body bytes as sent.
fn shape(
    shared: &Shared,
    req: &Request<Incoming>,
    response: Response<WebBody>,
) -> (Response<WebBody>, Option<u64>) {
    let (mut parts, body) = response.into_parts();
    let WebBody::Full(Some(bytes)) = body else {
        return (Response::from_parts(parts, body), None);
    };
    if !shared.encodings {
        let hash = super::encoding::fnv1a(&bytes);
        return (
            Response::from_parts(parts, WebBody::full(bytes)),
            Some(hash),
        );
    }
    let offered = req
        .headers()
        .get(hyper::header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let shape = super::encoding::shape_of(&bytes, offered);
    let sent = match shape.coding {
        Some(coding) => {
            parts.headers.insert(
                hyper::header::CONTENT_ENCODING,
                HeaderValue::from_static(coding),
            );
            super::encoding::encode(&bytes, coding)
        }
        None => bytes,
    };
    let hash = super::encoding::fnv1a(&sent);
    let body = if shape.chunked {
        WebBody::Stream(Box::new(super::encoding::in_chunks(sent).into_iter()))
    } else {
        WebBody::full(sent)
    };
    (Response::from_parts(parts, body), Some(hash))
}

/// The `Host` header, or the authority of an absolute-form request target.
fn host_header(req: &Request<Incoming>) -> &str {
    req.headers()
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// Routes a request and answers it.
async fn answer(shared: &Shared, req: &Request<Incoming>) -> Response<WebBody> {
    let graph = &shared.web.graph;
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if let Some(hostile) = &shared.hostile {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        if let Some(response) = super::hostile::answer(hostile.canary_port, &host, path) {
            return response;
        }
    }
    if graph.spec.features.charsets {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        if let Some(response) = super::charsets::answer(&host, path) {
            return response;
        }
    }
    if graph.spec.features.sitemaps {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        if let Some(response) = super::sitemaps::answer(&host, path) {
            return response;
        }
    }
    if graph.spec.features.pressure {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        let now = shared.started.elapsed();
        if let Some(response) = super::pressure::answer(&shared.pressure, &host, path, now).await {
            return response;
        }
    }
    if graph.spec.features.docsite {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        if let Some(response) = super::docsite::answer(&host, path) {
            return response;
        }
    }
    if graph.spec.features.canonical {
        let host = strip_port(host_header(req)).to_ascii_lowercase();
        if let Some(response) = super::canonical::answer(&host, path) {
            return response;
        }
    }
    let node = graph
        .host_index(host_header(req))
        .and_then(|h| graph.route(h, path));
    match (req.method(), node) {
        (&Method::GET | &Method::HEAD, Some(node)) => {
            let response = respond(shared, node).await;
            revised(shared, node, req, response)
        }
        (&Method::GET | &Method::HEAD, None) => {
            plain(StatusCode::NOT_FOUND, "no such page in the synthetic web\n")
        }
        _ => plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n"),
    }
}

pub(crate) fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<WebBody> {
    let mut response = Response::new(WebBody::full(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn respond(shared: &Shared, node: Node) -> Response<WebBody> {
    let graph = &shared.web.graph;
    let attempt = if graph.is_stateful(node) {
        let mut attempts = lock(&shared.attempts);
        let seen = attempts.entry(node).or_insert(0);
        *seen += 1;
        *seen - 1
    } else {
        0
    };
    let head = graph.head(node, attempt);
    if let Some(delay) = head.delay {
        tokio::time::sleep(delay).await;
    }
    let body = match head.body {
        BodyKind::Html => {
            let mut links = Vec::with_capacity(graph.spec.links_per_page + 8);
            graph.links(node, &mut links);
            let mut buf = Vec::with_capacity(graph.spec.page_bytes + links.len() * 80 + 1024);
            render::html(graph, node, &links, &mut buf);
            WebBody::full(Bytes::from(buf))
        }
        BodyKind::Big => {
            let parts = render::big_parts(node.host, super::graph::BIG_PAGE_BYTES);
            WebBody::Big {
                prefix: Some(parts.prefix),
                filler_left: parts.filler_len,
                tail: Some(parts.tail),
            }
        }
        BodyKind::Fixed(bytes) => WebBody::full(Bytes::from_static(bytes)),
        BodyKind::Message(text) => WebBody::full(Bytes::from_static(text.as_bytes())),
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(head.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(head.content_type));
    if let Some(tag) = head.x_robots_tag {
        response
            .headers_mut()
            .insert("x-robots-tag", HeaderValue::from_static(tag));
    }
    if let Some(target) = head.redirect {
        if let Ok(value) = HeaderValue::from_str(&location(graph, node, target)) {
            response.headers_mut().insert(LOCATION, value);
        }
    }
    response
}

/// A tree page's answer as of its current revision (see `freshness.rs`): its bytes end
/// with the revision when it has changed; with the `conditional` feature it carries its
/// host's validators, and a request whose validators match gets `304` without a body.
fn revised(
    shared: &Shared,
    node: Node,
    req: &Request<Incoming>,
    response: Response<WebBody>,
) -> Response<WebBody> {
    let web = &shared.web;
    let seed = web.graph.spec.seed;
    let Some(revision) = web.freshness.revision(seed, node) else {
        return response;
    };
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    if revision.number > 0 {
        if let WebBody::Full(Some(bytes)) = &body {
            let mut changed = bytes.to_vec();
            changed.extend_from_slice(
                format!("\n<!-- testweb revision {} -->\n", revision.number).as_bytes(),
            );
            body = WebBody::full(Bytes::from(changed));
        }
    }
    if !web.graph.spec.features.conditional {
        return Response::from_parts(parts, body);
    }
    let sends = super::freshness::Validators::of_host(node.host, web.graph.shapes.len());
    let etag = sends
        .etag
        .then(|| super::freshness::etag(seed, node, revision));
    let modified = sends.last_modified.then_some(revision.modified);
    if let Some(value) = etag.as_deref().and_then(|t| HeaderValue::from_str(t).ok()) {
        parts.headers.insert(hyper::header::ETAG, value);
    }
    if let Some(value) = modified
        .map(super::freshness::http_date)
        .and_then(|d| HeaderValue::from_str(&d).ok())
    {
        parts.headers.insert(hyper::header::LAST_MODIFIED, value);
    }
    let header = |name| {
        req.headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if super::freshness::not_modified(
        header(hyper::header::IF_NONE_MATCH),
        header(hyper::header::IF_MODIFIED_SINCE),
        etag.as_deref(),
        modified,
    ) {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(CONTENT_TYPE);
        return Response::from_parts(parts, WebBody::Full(None));
    }
    Response::from_parts(parts, body)
}

/// The `Location` a redirect sends. With variants some are relative or oddly spelled; they
/// all resolve (against the request URL) to the target's canonical URL.
pub(crate) fn location(graph: &Graph, source: Node, target: Node) -> String {
    if graph.spec.features.variants && target.host == source.host {
        match source.page {
            Page::Special(Special::ChainStep2) => return "3".to_string(),
            Page::Special(Special::ChainStep3) => {
                let mut s = format!("HTTP://H{}.TEST:80", target.host);
                graph.push_path(&mut s, target.page);
                return s;
            }
            Page::Special(Special::LoopB) => return graph.path(target.page),
            _ => {}
        }
    }
    graph.url(target)
}

/// Response bodies: a whole buffer, or the big page streamed in 64 KiB blocks so that an
/// 11 MiB answer costs no 11 MiB allocation, or blocks generated as the client reads (the
/// hostile corner's endless and huge bodies; sent chunked, length unknown).
pub enum WebBody {
    Full(Option<Bytes>),
    Big {
        prefix: Option<Bytes>,
        filler_left: u64,
        tail: Option<Bytes>,
    },
    Stream(Box<dyn Iterator<Item = Bytes> + Send>),
}

impl WebBody {
    fn full(bytes: Bytes) -> WebBody {
        WebBody::Full(Some(bytes))
    }

    fn remaining(&self) -> u64 {
        match self {
            WebBody::Full(b) => b.as_ref().map_or(0, |b| b.len() as u64),
            WebBody::Big {
                prefix,
                filler_left,
                tail,
            } => {
                prefix.as_ref().map_or(0, |b| b.len() as u64)
                    + filler_left
                    + tail.as_ref().map_or(0, |b| b.len() as u64)
            }
            // Unknown; only used for the exact size hint, which a stream does not give.
            WebBody::Stream(_) => u64::MAX,
        }
    }
}

impl Body for WebBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let chunk = match this {
            WebBody::Full(bytes) => bytes.take(),
            WebBody::Big {
                prefix,
                filler_left,
                tail,
            } => {
                if let Some(p) = prefix.take() {
                    Some(p)
                } else if *filler_left > 0 {
                    let block = render::filler_block();
                    let take = (*filler_left).min(block.len() as u64) as usize;
                    *filler_left -= take as u64;
                    Some(block.slice(..take))
                } else {
                    tail.take()
                }
            }
            WebBody::Stream(blocks) => blocks.next(),
        };
        Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            WebBody::Stream(_) => false,
            _ => self.remaining() == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            WebBody::Stream(_) => SizeHint::default(),
            _ => SizeHint::with_exact(self.remaining()),
        }
    }
}
