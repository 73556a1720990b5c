//! A tiny DNS server for tests: answers every A query with one configured address and TTL,
//! and logs each query (name, type, when), so a test can see when a crawler resolves a name
//! again: after the answer's TTL, and not before.
//!
//! It speaks plain DNS over UDP on 127.0.0.1 (a free port), one thread, one datagram at a
//! time: enough for a crawler's resolver with a cache. AAAA and other queries get an empty
//! NOERROR answer (the name exists, with no such record). Messages are decoded and encoded with
//! hickory-proto, the same project's wire format the crawler's resolver uses, so nothing of
//! the protocol is hand-written here.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};

/// One query the server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsQuery {
    /// Lower-case, without the trailing dot.
    pub name: String,
    /// `A`, `AAAA`, ...
    pub kind: String,
    /// Since the server started.
    pub at: Duration,
}

/// The running server; stopped when dropped.
pub struct DnsResponder {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<DnsQuery>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DnsResponder {
    /// Serves `address` for every name, with a TTL of `ttl_secs`.
    pub fn start(address: Ipv4Addr, ttl_secs: u32) -> std::io::Result<DnsResponder> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = socket.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_log, thread_stop) = (log.clone(), stop.clone());
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !thread_stop.load(Ordering::Relaxed) {
                let Ok((len, from)) = socket.recv_from(&mut buf) else {
                    continue; // the read timeout: look at `stop` again
                };
                let Ok(query) = Message::from_vec(&buf[..len]) else {
                    continue;
                };
                let answer = respond(&query, address, ttl_secs);
                if let Some(q) = query.queries().first() {
                    let name = q.name().to_ascii();
                    let entry = DnsQuery {
                        name: name.trim_end_matches('.').to_ascii_lowercase(),
                        kind: q.query_type().to_string(),
                        at: started.elapsed(),
                    };
                    lock(&thread_log).push(entry);
                }
                if let Ok(bytes) = answer.to_vec() {
                    let _ = socket.send_to(&bytes, from);
                }
            }
        });
        Ok(DnsResponder {
            addr,
            log,
            stop,
            thread: Some(thread),
        })
    }

    /// Where to send queries (`network.dns_servers = ["127.0.0.1:PORT"]`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every query so far, in arrival order.
    pub fn queries(&self) -> Vec<DnsQuery> {
        lock(&self.log).clone()
    }
}

impl Drop for DnsResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The answer to `query`: `address` for an A query, nothing for any other type.
fn respond(query: &Message, address: Ipv4Addr, ttl_secs: u32) -> Message {
    let mut answer = Message::new();
    answer
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_authoritative(true)
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(ResponseCode::NoError);
    for q in query.queries() {
        answer.add_query(q.clone());
        if q.query_type() == RecordType::A {
            answer.add_answer(Record::from_rdata(
                q.name().clone(),
                ttl_secs,
                RData::A(A(address)),
            ));
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    #[test]
    fn answers_a_queries_with_the_address_and_ttl_and_logs_them() {
        let server = DnsResponder::start(Ipv4Addr::new(127, 0, 0, 1), 7).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut query = Message::new();
        query.set_id(42).add_query(Query::query(
            Name::from_ascii("H1.test.").unwrap(),
            RecordType::A,
        ));
        client
            .send_to(&query.to_vec().unwrap(), server.addr())
            .unwrap();
        let mut buf = [0u8; 1500];
        let len = client.recv(&mut buf).unwrap();
        let answer = Message::from_vec(&buf[..len]).unwrap();
        assert_eq!(answer.id(), 42);
        let record = &answer.answers()[0];
        assert_eq!(record.ttl(), 7);
        assert_eq!(record.data(), &RData::A(A(Ipv4Addr::new(127, 0, 0, 1))));
        let log = server.queries();
        assert_eq!(log.len(), 1);
        assert_eq!(
            (log[0].name.as_str(), log[0].kind.as_str()),
            ("h1.test", "A")
        );
    }
}
