//! The monitor's HTTP server: hyper 1 over HTTP/1.1, three read-only routes.
//!
//! Each request computes its answer from one [`Status`](super::Status) taken at that
//! moment; nothing is cached, and a request never waits for the crawl. Connections that
//! send no complete request head within [`HEADER_TIMEOUT`] are closed, so an idle client
//! holds no descriptor for long.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::Shared;

const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until `stop` turns true.
pub(super) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    connections.spawn(async move {
                        let service = service_fn(move |request| {
                            let response = respond(&shared, &request);
                            async move { Ok::<_, Infallible>(response) }
                        });
                        let served = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(e) = served {
                            tracing::debug!("monitor: connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors, most likely: the crawl matters more; try later.
                    tracing::debug!("monitor: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

fn respond(shared: &Shared, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "the monitor is read-only: GET or HEAD\n".into(),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/" => plain(
            StatusCode::OK,
            "text/html; charset=utf-8",
            super::page::render(&shared.status()),
        ),
        "/metrics" => plain(
            StatusCode::OK,
            super::metrics::CONTENT_TYPE,
            super::metrics::render(shared.status()),
        ),
        "/status.json" => {
            let json = serde_json::to_string_pretty(&shared.status()).unwrap_or_default();
            plain(StatusCode::OK, "application/json", json + "\n")
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: the monitor serves /, /metrics and /status.json\n".into(),
        ),
    }
}

fn plain(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
