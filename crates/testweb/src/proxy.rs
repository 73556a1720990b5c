//! A tiny proxy for tests: HTTP forward (`GET http://host/path`) and tunnel (`CONNECT
//! host:port`) requests, and SOCKS5 `CONNECT`s (RFC 1928, no authentication; the first byte
//! of a connection, 5, tells them apart), every one logged with its target, all sent to one
//! upstream (the synthetic web's listener) whatever host they name.
//!
//! Why one upstream: the proxy itself must never become the way a test reaches anything
//! but the synthetic web. A request for a private address that gets this far is a request
//! the crawler should not have handed to a proxy: it shows in [`TestProxy::log`] (and
//! goes to the synthetic web, not to the private address), which is what a test asserts on.
//!
//! Built on blocking std sockets, a thread per connection: test traffic is small, and a
//! proxy this simple is easier to trust without an async runtime. A forwarded request is
//! sent upstream with `Connection: close`, so each proxy connection carries exactly one
//! request and every request is logged.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request the proxy received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRecord {
    /// `CONNECT` for a tunnel, `SOCKS5` for a SOCKS5 connect, else the forwarded method.
    pub method: String,
    /// The request target: an absolute URL when forwarded, `host:port` for a tunnel.
    pub target: String,
}

impl ProxyRecord {
    /// The host the request was for (lowercase, without port or brackets).
    pub fn host(&self) -> String {
        let authority = match self.target.split_once("://") {
            Some((_, rest)) => rest.split('/').next().unwrap_or_default(),
            None => self.target.as_str(),
        };
        let authority = authority.rsplit('@').next().unwrap_or_default();
        let host = if let Some(v6) = authority.strip_prefix('[') {
            v6.split(']').next().unwrap_or_default()
        } else {
            authority.split(':').next().unwrap_or_default()
        };
        host.to_ascii_lowercase()
    }
}

struct State {
    upstream: SocketAddr,
    log: Mutex<Vec<ProxyRecord>>,
    stop: AtomicBool,
}

/// A running proxy on an ephemeral port of 127.0.0.1; stopped on drop.
pub struct TestProxy {
    addr: SocketAddr,
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

impl TestProxy {
    /// Starts a proxy that sends every request to `upstream`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<TestProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let serving = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("testweb-proxy".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if serving.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = Arc::clone(&serving);
                    std::thread::spawn(move || {
                        // A client that goes away ends its connection only.
                        let _ = relay(stream, &state);
                    });
                }
            })?;
        Ok(TestProxy {
            addr,
            state,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, the proxy URL a client is given.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `socks5://127.0.0.1:PORT`: the same proxy spoken to as SOCKS5.
    pub fn socks5_url(&self) -> String {
        format!("socks5://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn log(&self) -> Vec<ProxyRecord> {
        self.state
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves one client connection: reads the request head, logs it, and relays it upstream.
fn relay(client: TcpStream, state: &State) -> std::io::Result<()> {
    let mut first = [0u8; 1];
    if client.peek(&mut first)? == 1 && first[0] == 5 {
        return relay_socks5(client, state);
    }
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        headers.push(line);
    }
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ok(());
    };
    state
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(ProxyRecord {
            method: method.to_string(),
            target: target.to_string(),
        });
    let mut upstream = TcpStream::connect(state.upstream)?;
    let mut client_out = client.try_clone()?;
    if method.eq_ignore_ascii_case("CONNECT") {
        client_out.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        // Origin form upstream: `GET /path HTTP/1.1`, one request per connection.
        let path = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        let mut head = format!("{method} {path} {version}\r\n");
        for line in &headers {
            let name = line.split(':').next().unwrap_or_default().trim();
            if name.eq_ignore_ascii_case("connection")
                || name.eq_ignore_ascii_case("proxy-connection")
                || name.eq_ignore_ascii_case("proxy-authorization")
            {
                continue;
            }
            head.push_str(line);
        }
        head.push_str("Connection: close\r\n\r\n");
        upstream.write_all(head.as_bytes())?;
    }
    // Whatever the client already sent past the head (a TLS hello) goes first.
    let buffered = reader.buffer().to_vec();
    upstream.write_all(&buffered)?;
    let mut upstream_in = upstream.try_clone()?;
    let mut client_in = reader.into_inner();
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut upstream);
        let _ = upstream.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut upstream_in, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

/// One SOCKS5 connection: greeting (no authentication), a CONNECT logged as
/// `SOCKS5 host:port`, then bytes both ways with the upstream.
fn relay_socks5(mut client: TcpStream, state: &State) -> std::io::Result<()> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting)?;
    let mut methods = vec![0u8; greeting[1] as usize];
    client.read_exact(&mut methods)?;
    client.write_all(&[5, 0])?;
    let mut request = [0u8; 4];
    client.read_exact(&mut request)?;
    let host = match request[3] {
        1 => {
            let mut v4 = [0u8; 4];
            client.read_exact(&mut v4)?;
            std::net::Ipv4Addr::from(v4).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len)?;
            let mut name = vec![0u8; len[0] as usize];
            client.read_exact(&mut name)?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut v6 = [0u8; 16];
            client.read_exact(&mut v6)?;
            format!("[{}]", std::net::Ipv6Addr::from(v6))
        }
        _ => return Ok(()),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port)?;
    state
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(ProxyRecord {
            method: "SOCKS5".into(),
            target: format!("{host}:{}", u16::from_be_bytes(port)),
        });
    let mut upstream = TcpStream::connect(state.upstream)?;
    client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0])?;
    let mut upstream_in = upstream.try_clone()?;
    let mut client_in = client.try_clone()?;
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut upstream);
        let _ = upstream.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut upstream_in, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_targets() {
        let record = |t: &str| ProxyRecord {
            method: "GET".into(),
            target: t.into(),
        };
        assert_eq!(record("http://h0.test/a").host(), "h0.test");
        assert_eq!(record("http://Localhost:80/x").host(), "localhost");
        assert_eq!(record("h1.test:443").host(), "h1.test");
        assert_eq!(record("http://[::1]:80/").host(), "::1");
    }
}
