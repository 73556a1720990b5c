//! The hostile corner over real sockets: each host sends what its documentation says, the
//! raw responder answers what hyper would not, the canary counts connections, and a plain
//! server does not serve any of it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use testweb::{Hostile, ServerOptions, TestWebServer, Web, WebSpec, HUGE_DELAY_SECS};

fn server() -> TestWebServer {
    let web = Arc::new(Web::new(WebSpec::small(5)));
    TestWebServer::start_hostile(web, ServerOptions::default()).unwrap()
}

/// Sends one GET and reads at most `limit` bytes of the answer (or up to EOF).
fn fetch(addr: SocketAddr, host: &str, path: &str, limit: usize) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while out.len() < limit {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{host}{path}: {e} after {} bytes", out.len()),
        }
    }
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn raw_hosts_send_what_hyper_would_not() {
    let server = server();
    let raw = server.raw_addr().unwrap();
    let head = |h: Hostile| text(&fetch(raw, &h.host(), "/", 1 << 20));
    assert!(head(Hostile::GarbageStatus).starts_with("HTTP/1.1 999 ???\r\n"));
    assert!(head(Hostile::NoReason).starts_with("HTTP/1.1 200\r\n"));
    assert!(head(Hostile::NoColon).contains("\r\nthis header line has no colon\r\n"));
    assert!(head(Hostile::NotHttp).starts_with("SSH-2.0-"));
    let bad = fetch(raw, &Hostile::BadHeaderBytes.host(), "/", 1 << 20);
    assert!(bad.windows(4).any(|w| w == b"\xc3\x28\x80\xff"));
    assert!(
        text(&fetch(raw, &Hostile::NoReason.host(), "/child", 1 << 20))
            .starts_with("HTTP/1.1 200 OK")
    );
    assert!(text(&fetch(
        raw,
        &Hostile::NoReason.host(),
        "/robots.txt",
        1 << 20
    ))
    .starts_with("HTTP/1.1 404 "));
    // The status line, then the trickle: a second passes between header bytes.
    let started = std::time::Instant::now();
    // 53 bytes of head, then two trickled bytes.
    let first = fetch(raw, &Hostile::Slowloris.host(), "/", 55);
    assert!(
        text(&first).starts_with("HTTP/1.1 200 OK\r\n"),
        "{}",
        text(&first)
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
    let log = server.log();
    let statuses: Vec<(String, u16)> = log
        .iter()
        .filter(|r| r.path == "/")
        .map(|r| (r.host.clone(), r.status))
        .collect();
    assert!(
        statuses.contains(&(Hostile::GarbageStatus.host(), 999)),
        "{statuses:?}"
    );
}

#[test]
fn hyper_hosts_misbehave_as_documented() {
    let server = server();
    let addr = server.addr();
    let canary = server.canary_addr().unwrap();
    let redirect = text(&fetch(
        addr,
        &Hostile::PrivateRedirect.host(),
        "/to-canary",
        1 << 20,
    ));
    assert!(
        redirect.contains(&format!(
            "location: http://127.0.0.1:{}/redirected",
            canary.port()
        )),
        "{redirect}"
    );
    let robots = text(&fetch(
        addr,
        &Hostile::PrivateRobots.host(),
        "/robots.txt",
        1 << 20,
    ));
    assert!(robots.starts_with("HTTP/1.1 302"), "{robots}");
    let delay = text(&fetch(
        addr,
        &Hostile::CrawlDelay.host(),
        "/robots.txt",
        1 << 20,
    ));
    assert!(
        delay.contains(&format!("Crawl-delay: {HUGE_DELAY_SECS}")),
        "{delay}"
    );
    let retry = text(&fetch(addr, &Hostile::RetryAfter.host(), "/", 1 << 20));
    assert!(retry.starts_with("HTTP/1.1 503") && retry.contains("retry-after: 86400"));
    let chain = text(&fetch(
        addr,
        &Hostile::EndlessRedirect.host(),
        "/r/41",
        1 << 20,
    ));
    assert!(chain.contains("location: /r/42"), "{chain}");
    // Endless: 4 MiB read and still going.
    let endless = fetch(addr, &Hostile::EndlessBody.host(), "/", 4 << 20);
    assert!(endless.len() >= 4 << 20);
    let base = text(&fetch(addr, &Hostile::HugeBase.host(), "/", 4096));
    assert!(
        // Chunk framing comes between the two.
        base.contains("<base href=\"http://huge-base.hostile.test/") && base.contains("aaaa"),
        "{base}"
    );
    let bomb = text(&fetch(addr, &Hostile::BrotliBomb.host(), "/", 1 << 20));
    assert!(bomb.contains("content-encoding: br"), "{bomb}");
    let tiny = text(&fetch(addr, "h49999.many.hostile.test", "/", 1 << 20));
    assert!(
        tiny.starts_with("HTTP/1.1 200") && tiny.contains("tiny"),
        "{tiny}"
    );
    let unknown = text(&fetch(addr, "h50000.many.hostile.test", "/", 1 << 20));
    assert!(unknown.starts_with("HTTP/1.1 404"), "{unknown}");
    assert_eq!(server.canary_connections(), 0);
}

#[test]
fn the_canary_counts_connections_and_is_not_resolved() {
    let server = server();
    let canary = server.canary_addr().unwrap();
    assert_eq!(server.canary_connections(), 0);
    drop(TcpStream::connect(canary).unwrap());
    drop(TcpStream::connect(canary).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.canary_connections() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.canary_connections(), 2);
    let entries = server.resolve_entries();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.iter().all(|(_, a)| a != &canary.to_string()));
}

#[test]
fn a_plain_server_serves_no_hostile_host() {
    let web = Arc::new(Web::new(WebSpec::small(5)));
    let server = TestWebServer::start(web).unwrap();
    let answer = text(&fetch(
        server.addr(),
        &Hostile::EndlessBody.host(),
        "/",
        1 << 20,
    ));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert_eq!(server.resolve_entries().len(), 1);
    assert!(server.canary_addr().is_none() && server.raw_addr().is_none());
}
