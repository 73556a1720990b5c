//! The raw-socket responder: a second listener on 127.0.0.1 that answers the
//! `NAME.raw.test` hosts of the hostile corner with bytes written by hand, because hyper
//! (rightly) refuses to produce them. It also runs the canary listener.
//!
//! # Behaviour
//! One request per connection: it reads the request head (at most 16 KiB, 10 s), routes by
//! the `Host` header, logs the request in the server's log, writes its answer and closes
//! the connection (`Connection: close` where there are headers at all). Per host:
//! - `slowloris`: `HTTP/1.1 200 OK`, then a header `X-Trickle: ` whose value arrives one
//!   byte per second, for an hour or until the client goes away (logged as 200 then).
//! - `garbage-status`: status line `HTTP/1.1 999 ???`, an HTML body linking `/child`.
//! - `no-reason`: status line `HTTP/1.1 200` (no reason phrase); body links `/child`.
//! - `bad-header-bytes`: `Content-Type: text/html; charset=\xff\xfe` and
//!   `X-Junk: \xc3\x28\x80\xff` (invalid UTF-8, allowed as obs-text); body links `/child`.
//! - `no-colon`: a header line `this header line has no colon` among valid ones.
//! - `not-http`: an SSH banner, then close; logged with status 0.
//!
//! `/child` on any of these hosts is a tiny well-formed page, `/robots.txt` a well-formed
//! 404 (so robots.txt handling does not mask the case), anything else a well-formed 404.
//! A request head that is not HTTP, too long or too slow is dropped without an answer.
//!
//! # The canary
//! Accepts connections, counts them, and closes them without reading or writing: any
//! connection is a request the crawler must not have made (see `hostile.rs`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::hostile::Hostile;
use super::server::Shared;

const MAX_HEAD: usize = 16 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const TRICKLE_SECS: u32 = 3600;

pub(crate) async fn serve_raw(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let connection = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(answer(stream, Arc::clone(&shared), connection));
            }
            Err(e) => {
                tracing::warn!("testweb raw: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

pub(crate) async fn serve_canary(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((_stream, peer)) => {
                if let Some(h) = &shared.hostile {
                    h.canary_hits.fetch_add(1, Ordering::Relaxed);
                }
                tracing::warn!("testweb canary: connection from {peer}");
                // Dropping the stream closes it.
            }
            Err(e) => {
                tracing::warn!("testweb canary: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Reads the request head; `None` when it is not one.
async fn read_head(stream: &mut TcpStream) -> Option<(String, String, Option<String>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                return Some(());
            }
            if buf.len() > MAX_HEAD {
                return None;
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read).await.ok()??;
    let head = String::from_utf8_lossy(&buf);
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let mut host = String::new();
    let mut user_agent = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("host") {
            host = super::server::strip_port(value.trim()).to_ascii_lowercase();
        } else if name.eq_ignore_ascii_case("user-agent") {
            user_agent = Some(value.trim().to_string());
        }
    }
    Some((host, path, user_agent))
}

fn page(status_line: &str, extra_headers: &[u8], body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(status_line.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(extra_headers);
    out.extend_from_slice(
        format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    out
}

const CHILD_LINK: &str = "<html><body><a href=\"/child\">child</a></body></html>";
const HTML: &[u8] = b"Content-Type: text/html; charset=utf-8\r\n";

async fn answer(mut stream: TcpStream, shared: Arc<Shared>, connection: u64) {
    let Some((host, path, user_agent)) = read_head(&mut stream).await else {
        return;
    };
    let which = Hostile::from_raw_host(&host);
    let mut completion = shared.log_start(
        host,
        path.clone(),
        user_agent,
        connection,
        super::server::HttpVersion::Http11,
    );
    let (status, bytes) = match (which, path.as_str()) {
        (Some(Hostile::Slowloris), "/") => {
            completion.status = 200;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Trickle: ")
                .await;
            for _ in 0..TRICKLE_SECS {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if stream.write_all(b"a").await.is_err() {
                    return;
                }
            }
            return;
        }
        (Some(Hostile::NotHttp), "/") => (0, b"SSH-2.0-OpenSSH_9.9\r\n".to_vec()),
        (None, _) | (_, "/robots.txt") => {
            (404, page("HTTP/1.1 404 Not Found", HTML, "no such page\n"))
        }
        (Some(_), "/child") => (
            200,
            page(
                "HTTP/1.1 200 OK",
                HTML,
                "<html><body><p>child</p></body></html>",
            ),
        ),
        (Some(Hostile::GarbageStatus), "/") => (999, page("HTTP/1.1 999 ???", HTML, CHILD_LINK)),
        (Some(Hostile::NoReason), "/") => (200, page("HTTP/1.1 200", HTML, CHILD_LINK)),
        (Some(Hostile::BadHeaderBytes), "/") => (
            200,
            page(
                "HTTP/1.1 200 OK",
                b"Content-Type: text/html; charset=\xff\xfe\r\nX-Junk: \xc3\x28\x80\xff\r\n",
                CHILD_LINK,
            ),
        ),
        (Some(Hostile::NoColon), "/") => (
            200,
            page(
                "HTTP/1.1 200 OK",
                b"Content-Type: text/html\r\nthis header line has no colon\r\n",
                CHILD_LINK,
            ),
        ),
        (Some(_), _) => (404, page("HTTP/1.1 404 Not Found", HTML, "no such page\n")),
    };
    completion.status = status;
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
    drop(completion);
}

/// Where the canary and the raw responder listen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostileAddrs {
    pub raw: SocketAddr,
    pub canary: SocketAddr,
}
