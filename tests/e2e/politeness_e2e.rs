//! Politeness end to end on the synthetic web: robots.txt obeyed exactly (from the
//! server's log), an unreachable robots.txt blocking its host until it recovers,
//! Crawl-delay honoured (from the server's timestamps), URL variants of one page
//! fetched once, one server's rate and concurrency held across its 50 names, and a name's
//! address looked up again after its DNS TTL and not before.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crawler::config::Config;

use crate::support::{arrival_slack, config_for, crawl, records, rules_for};
use crawler::ShutdownHandle;
use testweb::{DnsResponder, Features, RequestRecord, ServerOptions, TestWebServer, Web, WebSpec};

#[test]
fn robots_rules_nofollow_and_url_variants_are_obeyed_exactly() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        features: Features {
            meta_robots: true,
            advanced_variants: true,
            ..Features::all()
        },
        ..WebSpec::small(21)
    };
    let web = Arc::new(Web::new(spec));
    // Twice: with room for every host's state, and with room for about two of its five, so that idle
    // hosts are evicted and come back with their rules from the robots.txt cache (still one
    // robots.txt request per host).
    for host_memory in [64 << 20, 1024] {
        robots_obeyed_exactly(&web, host_memory);
    }
}

fn robots_obeyed_exactly(web: &Arc<Web>, host_memory: u64) {
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.frontier.host_memory = crawler::config::ByteSize(host_memory);
    if host_memory < 4096 {
        // A host is idle (evictable) once its limiter is full again: 1 ms after a request
        // with a burst of 1, instead of 100 ms with the default burst of 100.
        config.politeness.per_host_burst = 1;
    }
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    if host_memory < 4096 {
        // Evictions are certain with room for two hosts' state; whether an evicted host is
        // restored again depends on how the crawl's timing falls (a loaded machine can finish
        // a host before its state is needed again), so only the eviction is required.
        assert!(
            summary.frontier.evictions > 0,
            "no host was evicted: {:?}",
            summary.frontier
        );
        eprintln!(
            "host_memory {host_memory}: {} evictions, {} restores for {} hosts",
            summary.frontier.evictions, summary.frontier.restores, summary.hosts
        );
    }
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let log = server.log();
    let diff = truth.diff_log(&log);
    assert!(diff.is_empty(), "server log vs ground truth: {diff}");

    // Disallowed URLs are not fetched but listed, with the reason.
    let records = records(out.path());
    let disallowed: BTreeSet<String> = records
        .iter()
        .filter(|r| r.error.as_deref() == Some("disallowed by robots.txt"))
        .map(|r| r.url.clone())
        .collect();
    assert!(!disallowed.is_empty());
    assert_eq!(disallowed, truth.disallowed());
    assert_eq!(summary.counts.disallowed, disallowed.len() as u64);
    let mut urls = BTreeSet::new();
    for r in &records {
        assert!(urls.insert(r.url.clone()), "recorded twice: {}", r.url);
    }

    // Each host's robots.txt is requested before any of its pages, and once per crawl
    // (twice for the host that answers 503 first).
    let hosts: BTreeSet<String> = log.iter().map(|r| r.host.clone()).collect();
    for host in &hosts {
        let robots: Vec<_> = log
            .iter()
            .filter(|r| &r.host == host && r.path == "/robots.txt")
            .collect();
        assert!(
            (1..=2).contains(&robots.len()),
            "{host}: {} robots.txt requests",
            robots.len()
        );
        let answered = robots.last().unwrap();
        assert!(answered.status < 500, "{host}: robots.txt never recovered");
        for page in log
            .iter()
            .filter(|r| &r.host == host && r.path != "/robots.txt")
        {
            assert!(
                page.started >= answered.finished,
                "{host}{} fetched before robots.txt was read",
                page.path
            );
        }
        if robots.len() == 2 {
            // The 503 blocked the host until the retry succeeded.
            assert!(robots[0].status >= 500);
            assert!(robots[1].started - robots[0].finished >= Duration::from_millis(900));
        }
    }
    assert!(
        hosts.iter().any(|h| log
            .iter()
            .filter(|r| &r.host == h && r.path == "/robots.txt")
            .count()
            == 2),
        "the 503-then-ok robots.txt host is in the web"
    );
}

#[test]
fn crawl_delay_is_honoured() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        hosts: 5,
        pages: 20,
        features: Features {
            robots: true,
            crawl_delay: true,
            ..Features::none()
        },
        ..WebSpec::small(22)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    server.track_stalls();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.politeness.per_host_rps = 50.0;
    config.politeness.per_host_burst = 5;
    crawl(&config, &web.seeds(), ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let log = server.log();
    let slack = arrival_slack(&server);
    let diff = truth.diff_log(&log);
    assert!(diff.is_empty(), "{diff}");
    // Host index 3 (mod 5) serves `Crawl-delay: 1` under this feature (see testweb's
    // robots.rs); the configured rate alone would allow 50 requests per second.
    let host = "h3.test";
    let mut starts: Vec<Duration> = log
        .iter()
        .filter(|r| r.host == host && r.path != "/robots.txt")
        .map(|r| r.started)
        .collect();
    starts.sort();
    assert!(starts.len() >= 3, "{host}: {} pages", starts.len());
    // The crawler dispatches request k at least k seconds after request 0; the server's
    // stamps add up to `slack` to any one of them (a new connection's first request,
    // scheduling: support::arrival_slack). So any two requests k apart are stamped at
    // least k s − slack apart: checked over every pair, a delay short by more than the
    // slack once shows, and a delay ignored (the configured 50/s) shows as gaps of 20 ms.
    for i in 0..starts.len() {
        for j in i + 1..starts.len() {
            let gap = starts[j] - starts[i];
            let due = Duration::from_secs((j - i) as u64);
            assert!(
                gap + slack >= due,
                "{host}: requests {i} and {j} {gap:?} apart despite Crawl-delay: 1 \
                 (due {due:?}, less {slack:?} of arrival slack)"
            );
        }
    }
    // The other hosts are not slowed down.
    let h0: Vec<Duration> = log
        .iter()
        .filter(|r| r.host == "h0.test" && r.path != "/robots.txt")
        .map(|r| r.started)
        .collect();
    let span = *h0.iter().max().unwrap() - *h0.iter().min().unwrap();
    assert!(
        h0.len() >= 3 && span < Duration::from_millis(900),
        "h0.test: {span:?}"
    );
}

#[test]
fn scope_and_trap_limits_bound_the_crawl() {
    let _load = crate::support::ordinary();
    let spec = WebSpec {
        features: Features {
            trap: true,
            redirects: true,
            ..Features::none()
        },
        ..WebSpec::small(23)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.politeness.respect_robots = false;
    // Only h1.test (the trap's host) is seeded: under the default seed-domains scope the
    // other hosts are off site, and the endless calendar is cut by max_pages_per_host.
    config.scope.max_pages_per_host = 40;
    let seeds = vec!["http://h1.test/".to_string()];
    let summary = crawl(&config, &seeds, ShutdownHandle::new());
    let log = server.log();
    let hosts: BTreeSet<&str> = log.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts, BTreeSet::from(["h1.test"]), "left the seed's site");
    let pages: Vec<String> = log
        .iter()
        .filter(|r| r.path != "/robots.txt")
        .map(|r| r.url())
        .collect();
    assert_eq!(pages.len(), 40, "max_pages_per_host: {pages:#?}");
    assert_eq!(summary.counts.accepted, 40);
    assert!(summary.counts.links_host_cap > 0);
    assert!(
        summary.counts.out_of_scope["off_site"] > 0,
        "{:?}",
        summary.counts.out_of_scope
    );
    // The offsite redirect was seen and not followed.
    let records = records(out.path());
    let offsite = records
        .iter()
        .find(|r| r.url.ends_with("/redirect/offsite"));
    if let Some(r) = offsite {
        assert!(r
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("off the seeds' site"));
    }
    let mut urls = BTreeSet::new();
    for r in &records {
        assert!(urls.insert(r.url.clone()), "recorded twice: {}", r.url);
    }
}

/// A one-page site on loopback whose page links to private addresses: a public page must
/// not steer the crawler into the local network.
fn serve_page_linking_to_private_addresses() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut host = String::new();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header.trim().is_empty() {
                            break;
                        }
                        if let Some(h) = header.to_ascii_lowercase().strip_prefix("host:") {
                            host = h.trim().to_string();
                        }
                    }
                    let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
                    seen.lock().unwrap().push(format!("{host}{path}"));
                    let body = format!(
                        "<a href=\"http://127.0.0.1:{port}/via-ip\">a</a>\
                         <a href=\"http://localhost:{port}/via-localhost\">b</a>\
                         <a href=\"http://[::1]:{port}/via-v6\">c</a>"
                    );
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, requests)
}

#[test]
fn private_addresses_are_refused_unless_allowed() {
    let _load = crate::support::ordinary();
    for allow_private in [false, true] {
        let (port, requests) = serve_page_linking_to_private_addresses();
        let out = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config
            .network
            .resolve
            .insert("site.test".into(), format!("127.0.0.1:{port}"));
        config.output.dir = out.path().to_path_buf();
        config.politeness.respect_robots = false;
        config.politeness.per_host_rps = 1000.0;
        config.scope.mode = crawler::scope::ScopeMode::Any;
        config.scope.allow_private = allow_private;
        let summary = crawl(
            &config,
            &["http://site.test/".to_string()],
            ShutdownHandle::new(),
        );
        let requested = requests.lock().unwrap().clone();
        let private: Vec<&String> = requested.iter().filter(|r| r.contains("/via-")).collect();
        if allow_private {
            assert_eq!(private.len(), 2, "{requested:?}"); // [::1] is not listening
        } else {
            assert!(private.is_empty(), "fetched {private:?}");
            assert_eq!(
                summary.counts.out_of_scope["private_address"], 3,
                "{:?}",
                summary.counts.out_of_scope
            );
        }
        assert!(requested.iter().any(|r| r.starts_with("site.test")));
    }
}

/// Most requests the server was answering at once. A request arrived at least `latency`
/// before its stamp (the server sleeps that long before it logs the arrival), so each
/// interval counted lies inside the server's, itself inside the client's: this never
/// exceeds what the crawler had in flight.
fn max_overlap(log: &[RequestRecord], latency: Duration) -> usize {
    let mut events: Vec<(Duration, i32)> = log
        .iter()
        .flat_map(|r| [(r.started.saturating_sub(latency), 1), (r.finished, -1)])
        .collect();
    // An answer that ends when another arrives is over first.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn fifty_names_on_one_address_share_its_rate_and_concurrency() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        hosts: 50,
        pages: 250,
        features: Features {
            robots: true,
            ..Features::none()
        },
        ..WebSpec::small(24)
    };
    let web = Arc::new(Web::new(spec));
    // Twice: on a fast server the address's rate binds; on one answering in 40 ms, its
    // concurrency does (100 requests/s would need 4 in flight).
    for (rps, concurrency, latency_ms) in [(100.0, 3, 0), (1000.0, 3, 40)] {
        let server = TestWebServer::start_with(
            web.clone(),
            ServerOptions {
                latency: Duration::from_millis(latency_ms),
                ..ServerOptions::default()
            },
        )
        .unwrap();
        server.track_stalls();
        let out = tempfile::tempdir().unwrap();
        // Every name resolves to the server's one address (`[network] resolve`); each name
        // alone may have 1000 requests/s and 4 in flight.
        let mut config = config_for(&server, out.path(), true);
        config.politeness.per_ip_rps = rps;
        config.politeness.per_ip_concurrency = concurrency;
        // Not slowed for the server's latency (adaptive politeness would wait 5 x 40 ms
        // after each answer, on the address's budget too: 5 requests/s, 80 s for this
        // crawl): here the configured caps are under test.
        config.politeness.adaptive_latency_factor = 0.0;
        config.crawl.concurrency = 64;
        crawl(&config, &web.seeds(), ShutdownHandle::new());
        let log = server.log();
        // The crawl is complete: every page a correct crawler fetches, each once.
        let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
        let diff = truth.diff_log(&log);
        assert!(diff.is_empty(), "server log vs ground truth: {diff}");
        let names: BTreeSet<&str> = log.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(names.len(), 50);

        let most = max_overlap(&log, Duration::from_millis(latency_ms));
        assert!(
            most <= concurrency as usize,
            "{most} requests at once on one address, per_ip_concurrency = {concurrency}"
        );
        if latency_ms > 0 {
            assert_eq!(
                most, concurrency as usize,
                "the address's cap was the limit"
            );
        }

        // Request k is dispatched at least k periods after request 0; the server's stamps
        // add up to `slack` to any one of them (see the Crawl-delay test). Checked over every
        // pair, a rate wrong by more than the slack's worth of requests shows.
        let slack = arrival_slack(&server);
        let period = Duration::from_secs_f64(1.0 / rps);
        let mut starts: Vec<Duration> = log.iter().map(|r| r.started).collect();
        starts.sort();
        for i in 0..starts.len() {
            for j in i + 1..starts.len() {
                let due = period * (j - i) as u32;
                assert!(
                    starts[j] - starts[i] + slack >= due,
                    "requests {i} and {j} {:?} apart on one address at per_ip_rps = {rps} \
                     (due {due:?}, less {slack:?} of arrival slack)",
                    starts[j] - starts[i]
                );
            }
        }
        let span = *starts.last().unwrap() - starts[0];
        eprintln!(
            "per_ip_rps {rps}, per_ip_concurrency {concurrency}, latency {latency_ms} ms: \
             {} requests to 50 names in {span:?} ({:.0}/s), at most {most} at once",
            starts.len(),
            starts.len() as f64 / span.as_secs_f64()
        );
    }
}

#[test]
fn a_name_is_resolved_again_after_its_ttl_and_not_before() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        hosts: 1,
        pages: 60,
        features: Features::none(),
        ..WebSpec::small(25)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    const TTL_SECS: u32 = 1;
    let dns = DnsResponder::start(std::net::Ipv4Addr::LOCALHOST, TTL_SECS).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    // Names go to the DNS server, not to `[network] resolve`; the answer's TTL is kept as is.
    config.network.resolve.clear();
    config.network.dns_servers = vec![dns.addr().to_string()];
    config.network.dns_min_ttl_secs = 0.0;
    config.politeness.per_ip_concurrency = 4;
    // One connection, reused: the client itself resolves only once, and 15 requests/s
    // make the crawl last about 4 TTLs.
    config.politeness.per_host_rps = 15.0;
    config.politeness.per_host_burst = 1;
    config.politeness.per_host_concurrency = 1;
    // DNS gives the address, not the port: every page is a seed on the server's port (the
    // pages' own links name port 80), and no link is followed.
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let port = server.port();
    let seeds: Vec<String> = truth
        .urls()
        .iter()
        .map(|u| u.replacen("h0.test/", &format!("h0.test:{port}/"), 1))
        .collect();
    assert!(seeds.len() >= 50, "{} pages", seeds.len());
    config.crawl.max_depth = 0;
    crawl(&config, &seeds, ShutdownHandle::new());
    let log = server.log();
    assert_eq!(log.len(), seeds.len(), "every seed fetched once");

    let lookups: Vec<Duration> = dns
        .queries()
        .into_iter()
        .filter(|q| q.name == "h0.test" && q.kind == "A")
        .map(|q| q.at)
        .collect();
    let span = log.iter().map(|r| r.started).max().unwrap() - log[0].started;
    eprintln!(
        "{} lookups of h0.test over a {span:?} crawl: {lookups:?}",
        lookups.len()
    );
    // Looked up again after each TTL while the crawl went on ...
    assert!(
        lookups.len() as f64 >= span.as_secs_f64() / TTL_SECS as f64 - 1.0,
        "{} lookups in {span:?} with a TTL of {TTL_SECS} s",
        lookups.len()
    );
    assert!(lookups.len() >= 2);
    // ... and never before the previous answer expired (less the answer's own trip).
    let ttl = Duration::from_secs(TTL_SECS as u64);
    for pair in lookups.windows(2) {
        assert!(
            pair[1] - pair[0] + Duration::from_millis(20) >= ttl,
            "looked up again {:?} after the previous answer, TTL {ttl:?}",
            pair[1] - pair[0]
        );
    }
}
