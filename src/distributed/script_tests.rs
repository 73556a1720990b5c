//! The Lua scripts' promises checked one by one against a real `redis-server` (started on a
//! free loopback port, killed at the end): exact `max_urls` inside one batch, no URL
//! queued twice, the lease token checked on acknowledgements, a host leased to one process
//! at a time, expired leases reclaimed to the head of their queue, a lost crawl refused.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis::Value;

use super::client::Group;
use super::session::AdmitCall;
use super::{parse_claim, prefix, Redis, ShardKeys};
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

/// The shard every test URL's host is in (shard 0 of one; the layout is the same with many).
fn keys() -> ShardKeys {
    ShardKeys::new(ID, 0)
}

fn item(url: &str) -> QueuedUrl {
    QueuedUrl::new(url.into(), 1, None, 0)
}

fn bytes(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Runs one script call and returns its reply.
async fn call(
    redis: &Redis,
    script: &super::client::Script,
    keys: &[String],
    args: Vec<Vec<u8>>,
) -> Result<Value, super::DistributedError> {
    let mut group = Group::default();
    script.call(&mut group, keys, &args);
    Ok(redis.run(&group).await?.remove(0))
}

/// `admit.lua` for `urls` of host `host`, with `max_urls`: inline (the budget taken from the
/// crawl's counter) or, with `granted`, a cluster's shard budget. The codes.
async fn admit(
    redis: &Redis,
    host: &str,
    urls: &[&str],
    max_urls: u64,
    granted: Option<i64>,
) -> Vec<i64> {
    let items: Vec<(String, QueuedUrl)> =
        urls.iter().map(|u| (host.to_string(), item(u))).collect();
    admit_items(redis, &items, max_urls, 0, granted).await
}

/// `admit.lua` for `items` (host, URL; a host's next to each other), with `max_urls` and
/// a host cap, laid out as the session lays a call out. The codes.
async fn admit_items(
    redis: &Redis,
    items: &[(String, QueuedUrl)],
    max_urls: u64,
    host_cap: u64,
    granted: Option<i64>,
) -> Vec<i64> {
    let plan = crate::seen::Plan::for_fpp(10_000, 0.001).unwrap();
    let k = keys();
    let crawl_meta = format!("{}meta", prefix(ID));
    let call = AdmitCall {
        plan: &plan,
        shards: 1,
        keys: &k,
        crawl_meta: granted.is_none().then_some(crawl_meta.as_str()),
        max_urls,
        host_cap,
        granted: granted.unwrap_or(0),
    };
    let items: Vec<&(String, QueuedUrl)> = items.iter().collect();
    let mut group = Group::default();
    call.add(&mut group, &redis.scripts.admit, &items);
    let reply = redis.run(&group).await.unwrap().remove(0);
    super::array(&reply, "admit")
        .unwrap()
        .iter()
        .map(|v| super::int(v, "admit").unwrap())
        .collect()
}

fn lease_keys(k: &ShardKeys) -> Vec<String> {
    k.lease_keys().to_vec()
}

/// `claim.lua` by `proc` of up to `hosts` of the `candidates`, reclaiming the `expired`
/// tokens named.
async fn claim(
    redis: &Redis,
    proc: &str,
    lease_ms: u64,
    hosts: u64,
    candidates: &[&str],
    expired: &[&str],
) -> super::ShardClaim {
    let k = keys();
    let mut keys = lease_keys(&k);
    let mut args = bytes(&[
        "0",
        proc,
        &lease_ms.to_string(),
        &hosts.to_string(),
        "10",
        "16",
        "100",
        &expired.len().to_string(),
        "0",
        &candidates.len().to_string(),
    ]);
    for token in expired {
        let (_, host) = super::token_parts(token).unwrap();
        keys.push(k.queue(host));
        keys.push(k.leased_items(host));
        args.extend(bytes(&[token, host]));
    }
    for host in candidates {
        keys.push(k.queue(host));
        keys.push(k.leased_items(host));
        args.push(host.as_bytes().to_vec());
    }
    let reply = call(redis, &redis.scripts.claim, &keys, args)
        .await
        .unwrap();
    parse_claim(&reply).unwrap()
}

/// `release.lua` of one lease by `proc`: acknowledges `acks`, ends it if `end`; the number
/// of leases refused as not this process's.
async fn release(redis: &Redis, proc: &str, token: &str, end: bool, acks: &[Vec<u8>]) -> i64 {
    release_scheduling(redis, proc, token, end, acks).await.0
}

/// [`release`], with the hosts the release put back on the schedule.
async fn release_scheduling(
    redis: &Redis,
    proc: &str,
    token: &str,
    end: bool,
    acks: &[Vec<u8>],
) -> (i64, Vec<String>) {
    let k = keys();
    let (_, host) = super::token_parts(token).unwrap();
    let mut keys = lease_keys(&k);
    keys.push(k.queue(host));
    keys.push(k.leased_items(host));
    let mut args = bytes(&[proc, "1", token, host, "0", if end { "1" } else { "0" }]);
    args.push(acks.len().to_string().into_bytes());
    args.extend(acks.iter().cloned());
    let reply = call(redis, &redis.scripts.release, &keys, args)
        .await
        .unwrap();
    let answer = super::array(&reply, "release").unwrap();
    let hosts = answer[1..]
        .iter()
        .map(|h| super::text(h, "release").unwrap())
        .collect();
    (super::int(&answer[0], "release").unwrap(), hosts)
}

/// Sets the plan on the crawl's meta hash and the shard's, as a process joining does.
async fn start_crawl(redis: &Redis) {
    let mut group = Group::default();
    group
        .cmd("HSET")
        .arg(format!("{}meta", prefix(ID)))
        .arg("plan")
        .arg("p");
    group.cmd("HSET").arg(keys().meta).arg("plan").arg("p");
    redis.run(&group).await.unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_scripts_keep_their_promises() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        // No plan recorded: every script refuses to touch a crawl that is not there.
        let mut group = Group::default();
        redis.scripts.claim.call(
            &mut group,
            &lease_keys(&keys()),
            &bytes(&["0", "a", "1000", "1", "10", "16", "100", "0", "0", "0"]),
        );
        let gone = redis.run(&group).await;
        assert!(
            matches!(gone, Err(super::DistributedError::Gone { .. })),
            "{gone:?}"
        );
        start_crawl(&redis).await;

        // max_urls exact inside one batch; a URL seen is never queued again. The first
        // URL of a host puts the host on the schedule (5), and says so.
        let h = "http://h.test";
        assert_eq!(
            admit(
                &redis,
                h,
                &["http://h.test/1", "http://h.test/2", "http://h.test/3"],
                2,
                None
            )
            .await,
            [5, 1, 2]
        );
        assert_eq!(
            admit(&redis, h, &["http://h.test/1", "http://h.test/3"], 3, None).await,
            [0, 1]
        );

        // A host is leased only once named (the first claim names it), and to one process
        // at a time.
        let hint = claim(&redis, "a", 60_000, 5, &[], &[]).await;
        assert!(hint.claimed.leases.is_empty());
        assert_eq!(hint.due_hosts, [h]);
        let a = claim(&redis, "a", 60_000, 5, &[h], &[]).await;
        assert_eq!(a.claimed.leases.len(), 1);
        let lease = &a.claimed.leases[0];
        assert_eq!(super::token_parts(&lease.token), Some((0, h)));
        assert_eq!(lease.items.len(), 3);
        assert_eq!(lease.items[0].0.url, "http://h.test/1", "queue order kept");
        assert_eq!(admit(&redis, h, &["http://h.test/4"], 10, None).await, [1]);
        let b = claim(&redis, "b", 60_000, 5, &[h], &[]).await;
        assert!(
            b.claimed.leases.is_empty(),
            "a leased host was handed out twice"
        );
        assert_eq!(b.claimed.outstanding, 1);
        assert!(b.version > hint.version, "the lease changed the shard");

        // The token is checked: another process cannot acknowledge or end the lease.
        let first = vec![lease.items[0].1.clone()];
        assert_eq!(release(&redis, "b", &lease.token, true, &first).await, 1);
        // Its holder acknowledges one URL, then ends the lease: the other two go back to
        // the head of the queue, before the URL queued meanwhile.
        assert_eq!(release(&redis, "a", &lease.token, false, &first).await, 0);
        assert_eq!(
            release_scheduling(&redis, "a", &lease.token, true, &[]).await,
            (0, vec![h.to_string()]),
            "an ended lease with URLs left puts its host back on the schedule, and says so"
        );
        let b = claim(&redis, "b", 1, 5, &[h], &[]).await;
        assert_eq!(b.claimed.leases.len(), 1);
        let urls: Vec<&str> = b.claimed.leases[0]
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

        // b's lease expires (1 ms): a claim names it as expired, the next one reclaims it,
        // and c gets the URLs.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let seen = claim(&redis, "c", 60_000, 5, &[], &[]).await;
        let token = b.claimed.leases[0].token.clone();
        assert_eq!(seen.expired, std::slice::from_ref(&token));
        let c = claim(&redis, "c", 60_000, 5, &[], &[&token]).await;
        assert!(c.claimed.leases.is_empty());
        let c = claim(&redis, "c", 60_000, 5, &[h], &[]).await;
        assert_eq!(
            c.claimed.leases.len(),
            1,
            "the expired lease was not reclaimed"
        );
        assert_eq!(c.claimed.leases[0].items.len(), 3);
        assert_eq!(
            release(&redis, "b", &token, false, &[]).await,
            1,
            "an expired lease acknowledged"
        );
        let acks: Vec<Vec<u8>> = c.claimed.leases[0]
            .items
            .iter()
            .map(|(_, j)| j.clone())
            .collect();
        assert_eq!(
            release_scheduling(&redis, "c", &c.claimed.leases[0].token, true, &acks).await,
            (0, vec![]),
            "nothing left: the host is not scheduled"
        );
        let done = claim(&redis, "c", 60_000, 5, &[h], &[]).await;
        assert!(done.claimed.leases.is_empty());
        assert_eq!(
            (done.claimed.scheduled, done.claimed.outstanding),
            (0, 0),
            "the crawl is over"
        );
        let again = claim(&redis, "c", 60_000, 5, &[], &[]).await;
        assert_eq!(again.version, done.version, "nothing changed: same version");
    });
}

/// On a cluster a shard admits only what it was granted: a new URL without budget is
/// code 4 and its bits stay clear; `grant.lua` hands out what is left of max_urls, as
/// running totals, and the shard takes the largest total it is given (a lost grant's
/// answer is made good by the next one).
#[test]
fn a_clusters_budget_is_granted_exactly_and_handed_over_by_running_totals() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        start_crawl(&redis).await;
        let h = "http://h.test";
        let urls = ["http://h.test/1", "http://h.test/2", "http://h.test/3"];
        assert_eq!(admit(&redis, h, &urls, 5, Some(0)).await, [4, 4, 4]);
        let grant = |need: &'static [(&'static str, &'static str)]| {
            let redis = &redis;
            async move {
                let mut args = bytes(&["5"]);
                for (shard, n) in need {
                    args.extend(bytes(&[shard, n]));
                }
                let meta = format!("{}meta", prefix(ID));
                let reply = call(redis, &redis.scripts.grant, &[meta], args)
                    .await
                    .unwrap();
                super::array(&reply, "grant")
                    .unwrap()
                    .iter()
                    .map(|v| super::int(v, "grant").unwrap())
                    .collect::<Vec<i64>>()
            }
        };
        // Shard 0 asks for 3 (the answer "lost"), then for 3 again: 5 in all, no more.
        assert_eq!(grant(&[("0", "3")]).await, [3]);
        assert_eq!(grant(&[("0", "3"), ("1", "4")]).await, [5, 0], "max_urls 5");
        assert_eq!(grant(&[("1", "1")]).await, [0], "nothing left");
        assert_eq!(admit(&redis, h, &urls, 5, Some(5)).await, [5, 1, 1]);
        let more = [
            "http://h.test/1",
            "http://h.test/4",
            "http://h.test/5",
            "http://h.test/6",
        ];
        // A total lower than the one it holds changes nothing.
        assert_eq!(admit(&redis, h, &more, 5, Some(3)).await, [0, 1, 1, 4]);
    });
}

/// The key check of the unit tests is not vacuous: a script touching a key it did not
/// declare fails.
#[test]
fn a_script_touching_an_undeclared_key_fails_in_the_tests() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        let mut group = Group::default();
        group
            .cmd("EVAL")
            .arg(super::client::checked(
                "redis.call('SET', KEYS[1], 1) return redis.call('GET', 'other')",
            ))
            .arg(1)
            .arg("declared");
        let refused = redis.run(&group).await;
        assert!(
            format!("{refused:?}").contains("UNDECLARED key other in GET"),
            "{refused:?}"
        );
    });
}

/// On a single server one `release.lua` call carries every shard's releases of a sync:
/// each section reads its own shard's keys and its leases' (a misaligned section would
/// acknowledge in the wrong lease set or end nothing).
#[test]
fn one_release_call_serves_several_shards() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        start_crawl(&redis).await;
        let other = ShardKeys::new(ID, 1);
        let mut group = Group::default();
        group.cmd("HSET").arg(&other.meta).arg("plan").arg("p");
        redis.run(&group).await.unwrap();
        let h = "http://h.test";
        let urls = ["http://h.test/1", "http://h.test/2"];
        assert_eq!(admit(&redis, h, &urls, 10, None).await, [5, 1]);
        claim(&redis, "a", 60_000, 5, &[], &[]).await;
        let a = claim(&redis, "a", 60_000, 5, &[h], &[]).await;
        let lease = &a.claimed.leases[0];
        // First a section of shard 1 whose lease is not this process's, then shard 0's:
        // the first lease is acknowledged, the lease ended with the other URL given back.
        let k = keys();
        let mut keys = lease_keys(&other);
        keys.extend([
            other.queue("http://x.test"),
            other.leased_items("http://x.test"),
        ]);
        keys.extend(lease_keys(&k));
        keys.extend([k.queue(h), k.leased_items(h)]);
        let mut args = bytes(&[
            "a",
            "1",
            "1/1/http://x.test",
            "http://x.test",
            "0",
            "1",
            "0",
        ]);
        args.extend(bytes(&["1", &lease.token, h, "0", "1", "1"]));
        args.push(lease.items[0].1.clone());
        let reply = call(&redis, &redis.scripts.release, &keys, args)
            .await
            .unwrap();
        let answer = super::array(&reply, "release").unwrap();
        assert_eq!(
            super::int(&answer[0], "release").unwrap(),
            1,
            "one stale lease"
        );
        assert_eq!(
            super::text(&answer[1], "release").unwrap(),
            h,
            "host rescheduled"
        );
        let b = claim(&redis, "b", 60_000, 5, &[h], &[]).await;
        let urls: Vec<&str> = b.claimed.leases[0]
            .items
            .iter()
            .map(|(u, _)| u.url.as_str())
            .collect();
        assert_eq!(
            urls,
            ["http://h.test/2"],
            "only the unacknowledged URL comes back"
        );
    });
}

/// A call decides its URLs one by one, in order, host by host: a URL repeated within the
/// call is seen, as is one admitted before; a URL's bits are the ones `BITFIELD u1` and
/// `SETBIT` address at [`super::bloom_bits`]'s offsets (the layout of the filter before
/// `admit.lua` read and wrote whole blocks, so a crawl's filter reads the same); and a URL
/// refused for `max_urls` leaves no bit behind.
#[test]
fn a_call_decides_url_by_url_and_sets_the_bits_bitfield_reads() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        start_crawl(&redis).await;
        let (h1, h2) = ("http://h1.test", "http://h2.test");
        let pair = |host: &str, path: String| (host.to_string(), item(&format!("{host}{path}")));
        assert_eq!(
            admit_items(&redis, &[pair(h1, "/0".into())], 10_000, 0, None).await,
            [5]
        );
        // 150 new URLs of h1, one of them twice, the one admitted before, 100 new of h2.
        let mut call: Vec<(String, QueuedUrl)> =
            (1..=150).map(|i| pair(h1, format!("/{i}"))).collect();
        call.insert(70, pair(h1, "/3".into()));
        call.push(pair(h1, "/0".into()));
        call.extend((0..100).map(|i| pair(h2, format!("/{i}"))));
        let codes = admit_items(&redis, &call, 10_000, 0, None).await;
        assert_eq!(codes.len(), call.len());
        assert_eq!(
            (codes[70], codes[151], codes[152]),
            (0, 0, 5),
            "repeat, seen, first of h2"
        );
        assert_eq!(codes.iter().filter(|&&c| c == 1 || c == 5).count(), 250);
        let k = keys();
        let mut group = Group::default();
        group.cmd("LLEN").arg(k.queue(h1));
        let replies = redis.run(&group).await.unwrap();
        assert_eq!(
            super::int(&replies[0], "LLEN").unwrap(),
            151,
            "h1's queue: /0 and /1..=/150, once each"
        );
        // Every admitted URL's bits read as set by BITFIELD at bloom_bits' offsets; a URL
        // never sent has one clear.
        let plan = crate::seen::Plan::for_fpp(10_000, 0.001).unwrap();
        let bits_of = |url: &str| {
            let mut offsets = Vec::new();
            let part = super::bloom_bits(&plan, 1, url.as_bytes(), &mut offsets);
            let mut group = Group::default();
            let cmd = group.cmd("BITFIELD").arg(k.seen(part));
            for o in &offsets {
                cmd.arg("GET").arg("u1").arg(*o);
            }
            let redis = &redis;
            async move {
                let replies = redis.run(&group).await.unwrap();
                super::array(&replies[0], "BITFIELD")
                    .unwrap()
                    .iter()
                    .map(|v| super::int(v, "BITFIELD").unwrap())
                    .collect::<Vec<i64>>()
            }
        };
        for (_, item) in &call {
            assert!(
                bits_of(&item.url).await.iter().all(|&b| b == 1),
                "{}",
                item.url
            );
        }
        assert!(bits_of("http://h1.test/never").await.contains(&0));

        // max_urls refuses mid-call: the refused URL's bits stay clear, so it is new once
        // there is room.
        let capped = [pair(h2, "/new".into()), pair(h2, "/over".into())];
        assert_eq!(
            admit_items(&redis, &capped, 1 + 250 + 1, 0, None).await,
            [1, 2],
            "max_urls reached on the second"
        );
        assert!(bits_of("http://h2.test/over").await.contains(&0));
        assert_eq!(
            admit_items(&redis, &capped[1..], 1 + 250 + 2, 0, None).await,
            [1],
            "a URL refused for max_urls left no bit set"
        );
    });
}

/// A host cap, read once per host and call, counts the URLs the call queues: what passes
/// it is refused (code 3, no bit set).
#[test]
fn a_host_cap_refuses_inside_a_call_and_leaves_no_bits() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        start_crawl(&redis).await;
        let (h1, h2) = ("http://h1.test", "http://h2.test");
        let pair = |host: &str, path: &str| (host.to_string(), item(&format!("{host}{path}")));
        let call = [
            pair(h1, "/1"),
            pair(h1, "/2"),
            pair(h1, "/2"),
            pair(h1, "/3"),
            pair(h2, "/a"),
        ];
        assert_eq!(
            admit_items(&redis, &call, 100, 2, None).await,
            [5, 1, 0, 3, 5]
        );
        // Room for h2's second, not for h1's third (refused again).
        assert_eq!(
            admit_items(&redis, &[pair(h2, "/b")], 100, 2, None).await,
            [1]
        );
        assert_eq!(
            admit_items(&redis, &[pair(h1, "/3")], 100, 2, None).await,
            [3]
        );
        // With a larger cap /3 is new: its refusals set no bit.
        assert_eq!(
            admit_items(&redis, &[pair(h1, "/3")], 100, 3, None).await,
            [1]
        );
    });
}

/// `claim.lua`'s top-up of `token` by `proc`: up to `urls` more, and with `end_wait` (ms)
/// the drained lease ended when its host's queue is empty.
async fn top_up(
    redis: &Redis,
    proc: &str,
    token: &str,
    urls: u64,
    end_wait: Option<u64>,
) -> super::ShardClaim {
    let k = keys();
    let (_, host) = super::token_parts(token).unwrap();
    let mut keys = lease_keys(&k);
    keys.push(k.queue(host));
    keys.push(k.leased_items(host));
    let end = end_wait.map_or(-1, |ms| ms as i64).to_string();
    let args = bytes(&[
        "0",
        proc,
        "60000",
        "0",
        "10",
        "0",
        "100",
        "0",
        "1",
        "0",
        token,
        host,
        &urls.to_string(),
        &end,
    ]);
    let reply = call(redis, &redis.scripts.claim, &keys, args)
        .await
        .unwrap();
    parse_claim(&reply).unwrap()
}

/// A drained lease (every URL acknowledged) is refilled by its top-up while its host's
/// queue has URLs, and ended by it, the host free again, once the queue is empty; only its
/// holder can, and a top-up without the end flag never ends a lease.
#[test]
fn a_drained_lease_is_refilled_while_its_queue_has_urls_and_ended_when_empty() {
    let server = Server::start();
    runtime().block_on(async {
        let redis = Redis::connect(&server.url(), Duration::from_secs(10))
            .await
            .unwrap();
        start_crawl(&redis).await;
        let h = "http://h.test";
        assert_eq!(admit(&redis, h, &["http://h.test/1"], 10, None).await, [5]);
        let a = claim(&redis, "a", 60_000, 1, &[h], &[]).await;
        let lease = &a.claimed.leases[0];
        let token = lease.token.clone();
        assert_eq!(
            release(&redis, "a", &token, false, &[lease.items[0].1.clone()]).await,
            0
        );
        // The process's own page queued one more URL of the host while it was leased.
        assert_eq!(admit(&redis, h, &["http://h.test/2"], 10, None).await, [1]);
        let refilled = top_up(&redis, "a", &token, 10, Some(0)).await;
        assert!(refilled.claimed.ended.is_empty());
        assert_eq!(refilled.claimed.leases.len(), 1);
        let items = &refilled.claimed.leases[0].items;
        assert_eq!(items[0].0.url, "http://h.test/2");
        assert_eq!(refilled.claimed.outstanding, 1);
        assert_eq!(
            release(&redis, "a", &token, false, &[items[0].1.clone()]).await,
            0
        );
        // Drained again, nothing queued: another process cannot end it, a plain top-up
        // keeps it, the holder's top-up with the flag ends it.
        let stranger = top_up(&redis, "b", &token, 10, Some(0)).await;
        assert!(stranger.claimed.ended.is_empty());
        let plain = top_up(&redis, "a", &token, 10, None).await;
        assert!(plain.claimed.ended.is_empty() && plain.claimed.leases.is_empty());
        assert_eq!(plain.claimed.outstanding, 1);
        let ended = top_up(&redis, "a", &token, 10, Some(0)).await;
        assert_eq!(ended.claimed.ended, std::slice::from_ref(&token));
        assert_eq!((ended.claimed.scheduled, ended.claimed.outstanding), (0, 0));
        assert!(ended.version > plain.version, "the end changed the shard");
        // The host is free: its next URL puts it on the schedule again.
        assert_eq!(admit(&redis, h, &["http://h.test/3"], 10, None).await, [5]);
    });
}
