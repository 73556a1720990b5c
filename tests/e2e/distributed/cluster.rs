//! A distributed crawl on a Redis Cluster of 3 primaries and 3 replicas (`redis-server
//! --cluster-enabled yes`, joined by `redis-cli --cluster create … --cluster-replicas 1`),
//! every node on a free loopback port, started here and killed at the end. Three `crawler`
//! processes are given two of the nodes as seeds. Checked: the ground truth exactly, no
//! primary holding more than half of the crawl's keys, and, after one process is killed with
//! `kill -9` and then one primary (its replica promoted, the old primary brought back as
//! its replica), the crawl completes with no more pages fetched twice than the bound the
//! README states: the URLs reclaimed from expired leases, plus `lease_urls` per round whose
//! writes a replica did not confirm.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use testweb::WebSpec;

use super::{slow_settings, RedisServer, Secured, Shared};

/// Each node's cluster settings: a failover within about 2 s of a primary's death, and a
/// replica that may always take over (its lag is what `WAIT` bounds, not this).
const NODE: [&str; 10] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "1000",
    "--cluster-replica-validity-factor",
    "0",
    "--appendfsync",
    "everysec",
];

/// URLs per lease in this test: the re-fetch bound counts `lease_urls` per unconfirmed write.
const LEASE_URLS: i64 = 8;

struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Six nodes joined as 3 primaries with a replica each, the cluster's state `ok`.
    fn start() -> Cluster {
        let mut ports = Vec::new();
        while ports.len() < 6 {
            // A node also listens on its port + 10000 (the cluster bus): both must be free.
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            if port <= 55_000
                && !ports.contains(&port)
                && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
            {
                ports.push(port);
            }
        }
        let nodes: Vec<RedisServer> = ports
            .iter()
            .map(|&port| {
                RedisServer::start_at(
                    port,
                    true,
                    Secured {
                        extra: NODE.to_vec(),
                        ..Secured::default()
                    },
                )
            })
            .collect();
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .unwrap();
        assert!(
            created.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        let cluster = Cluster { nodes };
        cluster.wait_until_ok(Duration::from_secs(20), true);
        cluster
    }

    /// Waits until every live node says the cluster is `ok` and knows 3 primaries, and
    /// (`replicated`) every primary has its replica in sync.
    fn wait_until_ok(&self, within: Duration, replicated: bool) {
        let started = Instant::now();
        loop {
            let ok = self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
                    && self.primaries_seen_by(n).len() == 3
            }) && (!replicated
                || self.primaries().iter().all(|p| {
                    p.cli(&["INFO", "replication"])
                        .contains("connected_slaves:1")
                        && p.cli(&["INFO", "replication"]).contains("state=online")
                }));
            if ok {
                return;
            }
            assert!(started.elapsed() < within, "the cluster never became ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The ports of the live primaries holding slots, as `node` sees them.
    fn primaries_seen_by(&self, node: &RedisServer) -> Vec<u16> {
        node.cli(&["CLUSTER", "NODES"])
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let flags = fields.get(2)?;
                let holds_slots = fields.len() > 8;
                if flags.contains("master") && !flags.contains("fail") && holds_slots {
                    let address = fields.get(1)?.split('@').next()?;
                    address.rsplit(':').next()?.parse().ok()
                } else {
                    None
                }
            })
            .collect()
    }

    /// The live primaries.
    fn primaries(&self) -> Vec<&RedisServer> {
        let seer = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a live node");
        let ports = self.primaries_seen_by(seer);
        self.nodes
            .iter()
            .filter(|n| n.is_running() && ports.contains(&n.port))
            .collect()
    }

    /// The seed nodes given to the crawler: two of them, as a user would.
    fn seeds(&self) -> String {
        self.nodes[..2]
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Keys per live primary (the cluster holds only this crawl).
    fn keys_per_primary(&self) -> BTreeMap<u16, i64> {
        self.primaries()
            .into_iter()
            .map(|n| (n.port, n.int(&["DBSIZE"])))
            .collect()
    }
}

/// The keys are spread: no primary holds more than half of them.
fn assert_spread(keys: &BTreeMap<u16, i64>, when: &str) {
    let total: i64 = keys.values().sum();
    eprintln!("cluster: keys per primary {when}: {keys:?}");
    assert!(total > 0, "{when}: no keys at all");
    for (port, n) in keys {
        assert!(
            2 * n <= total,
            "{when}: the primary on port {port} holds {n} of the crawl's {total} keys: {keys:?}"
        );
    }
}

#[test]
fn a_crawl_on_a_redis_cluster_survives_a_killed_process_and_a_killed_primary() {
    let _load = crate::support::ordinary();
    let mut cluster = Cluster::start();
    let seeds = cluster.seeds();
    let mut settings = slow_settings(40);
    settings.push("distributed.lease_secs=1".into());
    settings.push("distributed.replicas=1".into());
    settings.push(format!("distributed.lease_urls={LEASE_URLS}"));
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let crawl = Shared::serving(WebSpec::small(91), None, &settings);
    let mut children: Vec<Child> = (0..3)
        .map(|_| crawl.spawn_on("1e6", &seeds, &[], "warn"))
        .collect();
    let started = Instant::now();
    while crawl.recorded_so_far() < 40 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the crawl did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_spread(&cluster.keys_per_primary(), "mid-crawl");
    // One process killed: its leases expire and the others take their URLs over.
    let mut victim = children.remove(0);
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    let killed_at = crawl.recorded_so_far();
    while crawl.recorded_so_far() < killed_at + 40 {
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "the crawl stalled after a process was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Then a primary (not a seed node: the processes must learn the new one from the
    // cluster): its replica is promoted and the crawl goes on.
    let seed_ports: Vec<u16> = cluster.nodes[..2].iter().map(|n| n.port).collect();
    let primary = cluster
        .primaries()
        .into_iter()
        .map(|n| n.port)
        .find(|p| !seed_ports.contains(p))
        .or_else(|| cluster.primaries().first().map(|n| n.port))
        .expect("a primary");
    let node = cluster
        .nodes
        .iter_mut()
        .find(|n| n.port == primary)
        .unwrap();
    eprintln!(
        "killing primary {primary} ({} keys): {}",
        node.int(&["DBSIZE"]),
        node.cli(&["INFO", "replication"]).replace("\r\n", " ")
    );
    node.kill();
    // Once its replica has taken over, the old primary comes back, as an operator brings
    // it back: it rejoins as the new primary's replica, and writes are confirmed again.
    let failing_over = Instant::now();
    while cluster.primaries().len() < 3 || cluster.primaries().iter().any(|n| n.port == primary) {
        assert!(
            failing_over.elapsed() < Duration::from_secs(15),
            "no replica took over"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "cluster: a replica took over in {:.1} s",
        failing_over.elapsed().as_secs_f64()
    );
    let node = cluster
        .nodes
        .iter_mut()
        .find(|n| n.port == primary)
        .unwrap();
    node.spawn();
    for child in children {
        crawl.finish(child);
    }
    cluster.wait_until_ok(Duration::from_secs(10), false);
    assert_eq!(cluster.primaries().len(), 3);

    let (extra, twice) = crawl.check("on a cluster, a process and a primary killed");
    let (code, json, stderr) = crawl.status(&seeds, &["--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(summary["crawl_finished"], true, "{summary}");
    assert_eq!(summary["queued_left"], 0, "{summary}");
    assert_eq!(summary["leases_outstanding"], 0, "{summary}");
    assert_eq!(
        summary["accepted"],
        crawl.truth().len() as u64,
        "accepted exactly the web's URLs: {summary}"
    );
    let reclaimed = summary["reclaimed_urls"].as_i64().unwrap();
    let unreplicated: i64 = process_summaries(&crawl)
        .iter()
        .map(|s| {
            s["distributed"]["unreplicated_writes"]
                .as_i64()
                .unwrap_or(0)
        })
        .sum();
    let bound = reclaimed + LEASE_URLS * unreplicated;
    eprintln!(
        "cluster: {extra} pages fetched again, {twice} recorded twice; bound {bound} \
         ({reclaimed} URLs reclaimed, {unreplicated} writes unconfirmed by a replica)"
    );
    assert!(
        i64::from(extra) <= bound,
        "{extra} pages fetched again, over the bound {bound}"
    );
    assert!(i64::from(twice) <= bound);
    assert_spread(&cluster.keys_per_primary(), "at the end");
}

/// The summaries of the processes that ended (`summary-<id>.json`).
fn process_summaries(crawl: &Shared) -> Vec<serde_json::Value> {
    std::fs::read_dir(crawl.out())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("summary-")
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}
