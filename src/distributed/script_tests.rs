//! The Lua scripts' promises checked one by one against a real `redis-server` (started on a
//! free loopback port, killed at the end): exact `max_urls` inside one batch, no URL
//! queued twice, the lease token checked on acknowledgements, a host leased to one process
//! at a time, expired leases reclaimed to the head of their queue, a lost crawl refused.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis::Value;

use super::{parse_claim, prefix, Redis};
use crate::frontier::QueuedUrl;

/// The server, its port, and its directory (removed when dropped).
pub(super) struct Server(Child, u16, #[allow(dead_code)] tempfile::TempDir);

impl Server {
    pub(super) fn url(&self) -> super::RedisUrl {
        super::RedisUrl::new(&format!("redis://127.0.0.1:{}/0", self.1), None)
    }

    pub(super) fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (.ci/run installs it)");
        Server(child, port, dir)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const ID: &str = "unit";

fn item(url: &str) -> QueuedUrl {
    QueuedUrl::new(url.into(), 1, None, 0)
}

fn bytes(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Runs one script call and returns its reply.
async fn call(redis: &Redis, script: &super::client::Script, args: Vec<Vec<u8>>) -> Value {
    let mut pipe = redis::pipe();
    script.call(&mut pipe, &format!("{}meta", prefix(ID)), &args);
    redis.run(&pipe).await.unwrap().remove(0)
}

/// `admit.lua` for `urls` of host `host`, with `max_urls`; the codes.
async fn admit(redis: &Redis, host: &str, urls: &[&str], max_urls: u64) -> Vec<i64> {
    let plan = crate::seen::Plan::for_fpp(10_000, 0.001).unwrap();
    let mut args = bytes(&[&prefix(ID), &max_urls.to_string(), "0", &plan.k.to_string()]);
    let mut offsets = Vec::new();
    for url in urls {
        let shard = super::bloom_bits(&plan, url.as_bytes(), &mut offsets);
        while offsets.len() < plan.k as usize {
            offsets.push(offsets[0]);
        }
        args.push(host.as_bytes().to_vec());
        args.push(shard.to_string().into_bytes());
        args.push(super::queue_item::encode(host, &item(url)));
        args.extend(offsets.iter().map(|o| o.to_string().into_bytes()));
    }
    let reply = call(redis, &redis.scripts.admit, args).await;
    super::array(&reply, "admit")
        .unwrap()
        .iter()
        .map(|v| super::int(v, "admit").unwrap())
        .collect()
}

async fn claim(redis: &Redis, proc: &str, lease_ms: u64, hosts: u64) -> super::Claimed {
    let args = bytes(&[
        &prefix(ID),
        proc,
        &lease_ms.to_string(),
        &hosts.to_string(),
        "10",
        "0",
    ]);
    parse_claim(&call(redis, &redis.scripts.claim, args).await).unwrap()
}

/// `release.lua` of one lease by `proc`: acknowledges `acks`, ends it if `end`; the number
/// of leases refused as not this process's.
async fn release(redis: &Redis, proc: &str, token: &str, end: bool, acks: &[Vec<u8>]) -> i64 {
    let mut args = bytes(&[&prefix(ID), proc, token, "0", if end { "1" } else { "0" }]);
    args.push(acks.len().to_string().into_bytes());
    args.extend(acks.iter().cloned());
    super::int(&call(redis, &redis.scripts.release, args).await, "release").unwrap()
}

#[test]
fn the_scripts_keep_their_promises() {
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        // No plan recorded: every script refuses to touch a crawl that is not there.
        let mut pipe = redis::pipe();
        redis.scripts.claim.call(
            &mut pipe,
            &format!("{}meta", prefix(ID)),
            &bytes(&[&prefix(ID), "a", "1000", "1", "10", "0"]),
        );
        let gone = redis.run(&pipe).await;
        assert!(
            matches!(gone, Err(super::DistributedError::Gone { .. })),
            "{gone:?}"
        );
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(format!("{}meta", prefix(ID)))
            .arg("plan")
            .arg("p");
        redis.run(&pipe).await.unwrap();

        // max_urls exact inside one batch; a URL seen is never queued again.
        let h = "http://h.test";
        assert_eq!(
            admit(
                &redis,
                h,
                &["http://h.test/1", "http://h.test/2", "http://h.test/3"],
                2
            )
            .await,
            [1, 1, 2]
        );
        assert_eq!(
            admit(&redis, h, &["http://h.test/1", "http://h.test/3"], 3).await,
            [0, 1]
        );

        // A host is leased to one process at a time.
        let a = claim(&redis, "a", 60_000, 5).await;
        assert_eq!(a.leases.len(), 1);
        let lease = &a.leases[0];
        assert_eq!(lease.items.len(), 3);
        assert_eq!(lease.items[0].0.url, "http://h.test/1", "queue order kept");
        assert_eq!(admit(&redis, h, &["http://h.test/4"], 10).await, [1]);
        let b = claim(&redis, "b", 60_000, 5).await;
        assert!(b.leases.is_empty(), "a leased host was handed out twice");
        assert_eq!(b.outstanding, 1);

        // The token is checked: another process cannot acknowledge or end the lease.
        let first = vec![lease.items[0].1.clone()];
        assert_eq!(release(&redis, "b", &lease.token, true, &first).await, 1);
        // Its holder acknowledges one URL, then ends the lease: the other two go back to
        // the head of the queue, before the URL queued meanwhile.
        assert_eq!(release(&redis, "a", &lease.token, false, &first).await, 0);
        assert_eq!(release(&redis, "a", &lease.token, true, &[]).await, 0);
        let b = claim(&redis, "b", 1, 5).await;
        assert_eq!(b.leases.len(), 1);
        let urls: Vec<&str> = b.leases[0]
            .items
            .iter()
            .map(|(u, _)| u.url.as_str())
            .collect();
        assert_eq!(urls.len(), 3, "{urls:?}");
        assert!(
            !urls.contains(&"http://h.test/1"),
            "an acknowledged URL came back"
        );
        assert_eq!(
            urls[2], "http://h.test/4",
            "given-back URLs go first: {urls:?}"
        );

        // b's lease expires (1 ms): the next claim reclaims it, and c gets the URLs.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c = claim(&redis, "c", 60_000, 5).await;
        assert_eq!(c.leases.len(), 1, "the expired lease was not reclaimed");
        assert_eq!(c.leases[0].items.len(), 3);
        assert_eq!(
            release(&redis, "b", &b.leases[0].token, false, &[]).await,
            1,
            "an expired lease acknowledged"
        );
        let acks: Vec<Vec<u8>> = c.leases[0].items.iter().map(|(_, j)| j.clone()).collect();
        assert_eq!(
            release(&redis, "c", &c.leases[0].token, true, &acks).await,
            0
        );
        let done = claim(&redis, "c", 60_000, 5).await;
        assert!(done.leases.is_empty());
        assert_eq!(
            (done.scheduled, done.outstanding),
            (0, 0),
            "the crawl is over"
        );
    });
}
