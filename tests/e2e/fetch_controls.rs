//! The fetch controls operators expect, each against the synthetic web: extra request
//! headers seen by the server, a cookie set and sent back (also after `--resume`), a crawl
//! through a proxy (and the proxy never handed a private target), and `crawl.max_duration`
//! stopping a crawl that `--resume` then finishes exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crawler::checkpoint;
use crawler::config::Config;
use crawler::ShutdownHandle;
use testweb::{DnsResponder, TestProxy, TestWebServer, Web, WebSpec};
use url::Url;

use crate::support::{config_for, records, rules_for};

/// The ground truth reached exactly: every expected request made, nothing else, and each
/// discovered URL recorded once.
fn assert_ground_truth(web: &Web, server: &TestWebServer, config: &Config) {
    let truth = web.ground_truth(&web.seeds(), &rules_for(config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "{diff}");
    let mut urls = BTreeSet::new();
    for r in records(&config.output.dir) {
        assert!(urls.insert(r.url.clone()), "recorded twice: {}", r.url);
    }
    assert_eq!(urls, truth.discovered());
}

#[test]
fn extra_headers_reach_the_server_on_every_request() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(41)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config
        .network
        .headers
        .insert("X-Team".into(), "archive".into());
    crate::support::crawl(&config, &web.seeds(), ShutdownHandle::new());
    let log = server.log();
    assert!(log.len() > 50, "{} requests", log.len());
    for r in &log {
        assert_eq!(r.header("x-team"), Some("archive"), "{} {}", r.host, r.path);
    }
    assert_ground_truth(&web, &server, &config);
}

/// The cookie the server sets for `host`.
fn cookie_of(host: &str) -> String {
    format!("testweb={host}")
}

#[test]
fn cookies_are_sent_back_and_still_after_resume() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(43)));
    let server = TestWebServer::start(web.clone()).unwrap();
    server.set_cookies();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.network.cookies = true;
    config.politeness.per_host_rps = 20.0;
    config.politeness.per_host_burst = 1;
    config.checkpoint.interval_secs = 0.2;
    // Stopped once the server has answered 80 requests (a fixed moment could come before
    // a host was visited twice).
    let shutdown = ShutdownHandle::new();
    let stopper = shutdown.clone();
    let watched = Arc::new(server);
    let server = watched.clone();
    std::thread::spawn(move || {
        while watched.request_count() < 80 {
            std::thread::sleep(Duration::from_millis(10));
        }
        stopper.stop();
    });
    let first = crate::support::crawl_resuming(&config, &web.seeds(), shutdown, None);
    assert!(first.stopped, "the crawl ended before it was stopped");
    let first_log = server.log();
    // A host's first answer sets the cookie; its later requests carry it back.
    let mut cookie_set: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in first_log.iter().enumerate() {
        let sent = r.header("cookie").unwrap_or_default();
        match cookie_set.get(&r.host) {
            // Requests to a host may overlap its first answer (per-host concurrency).
            Some(&at) if first_log[at].finished < r.started => {
                assert!(
                    sent.contains(&cookie_of(&r.host)),
                    "not sent back: {} {} ({sent:?})",
                    r.host,
                    r.path
                )
            }
            Some(_) => {}
            None if r.status != 0 => {
                cookie_set.insert(r.host.clone(), i);
            }
            None => {}
        }
    }
    let sent_back = first_log
        .iter()
        .filter(|r| r.header("cookie").is_some())
        .count();
    assert!(sent_back > 0, "no request carried a cookie");

    let loaded = checkpoint::load(out.path()).unwrap();
    let second =
        crate::support::crawl_resuming(&config, &web.seeds(), ShutdownHandle::new(), Some(loaded));
    assert!(!second.stopped);
    let log = server.log();
    let after: Vec<_> = log[first_log.len()..].iter().collect();
    assert!(!after.is_empty());
    let mut checked = 0;
    for r in after {
        if cookie_set.contains_key(&r.host) {
            let sent = r.header("cookie").unwrap_or_default();
            assert!(
                sent.contains(&cookie_of(&r.host)),
                "after --resume, not sent: {} {} ({sent:?})",
                r.host,
                r.path
            );
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no request after the resume to a host with a cookie"
    );
}

#[test]
fn a_crawl_through_a_proxy_reaches_the_ground_truth() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(47)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let proxy = TestProxy::start(server.addr()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.network.proxy = Some(proxy.url());
    crate::support::crawl(&config, &web.seeds(), ShutdownHandle::new());
    let via_proxy = proxy.log();
    let served = server.log();
    assert!(served.len() > 50, "{} requests", served.len());
    // Every request the server saw came through the proxy, and named its real target.
    assert_eq!(via_proxy.len(), served.len());
    let mut proxied: Vec<String> = via_proxy.iter().map(|r| r.target.clone()).collect();
    let mut direct: Vec<String> = served.iter().map(|r| r.url()).collect();
    proxied.sort();
    direct.sort();
    assert_eq!(proxied, direct);
    assert_ground_truth(&web, &server, &config);
}

#[test]
fn a_crawl_through_a_socks5_proxy_reaches_the_ground_truth() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(67)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let proxy = TestProxy::start(server.addr()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.network.proxy = Some(proxy.socks5_url());
    crate::support::crawl(&config, &web.seeds(), ShutdownHandle::new());
    let via_proxy = proxy.log();
    assert!(!via_proxy.is_empty());
    assert!(
        via_proxy.iter().all(|r| r.method == "SOCKS5"),
        "{via_proxy:?}"
    );
    assert_ground_truth(&web, &server, &config);
}

#[test]
fn a_proxy_is_never_handed_a_private_target() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(59)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let proxy = TestProxy::start(server.addr()).unwrap();
    // Every name resolves to 10.0.0.1, a private address: no `[network] resolve` rule
    // vouches for any host, so only the seed's host (the operator's choice) may be
    // requested. Its pages link to the other hosts of the web, which the proxy would reach
    // (it forwards everything to the synthetic web) if the crawler handed them over.
    let dns = DnsResponder::start(std::net::Ipv4Addr::new(10, 0, 0, 1), 300).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    config.network.resolve.clear();
    config.network.dns_servers = vec![dns.addr().to_string()];
    config.network.proxy = Some(proxy.url());
    // `any` scope: the private-address rule, not the site rule, is what must stop them.
    config.scope.mode = crawler::scope::ScopeMode::Any;
    config.scope.allow_private = false;
    let seed = web.seeds()[0].clone();
    let seed_host = Url::parse(&seed).unwrap().host_str().unwrap().to_string();
    crate::support::crawl(&config, std::slice::from_ref(&seed), ShutdownHandle::new());
    let records = records(out.path());
    let elsewhere: Vec<_> = records
        .iter()
        .filter(|r| Url::parse(&r.url).unwrap().host_str() != Some(seed_host.as_str()))
        .collect();
    assert!(
        !elsewhere.is_empty(),
        "the seed's host links to no other host: the test proves nothing"
    );
    for r in &elsewhere {
        assert_eq!(r.status, None, "{r:?}");
    }
    let via_proxy = proxy.log();
    assert!(
        via_proxy.iter().any(|r| r.host() == seed_host),
        "the crawl did not go through the proxy: {via_proxy:?}"
    );
    for r in &via_proxy {
        assert_eq!(
            r.host(),
            seed_host,
            "handed to the proxy: {} {}",
            r.method,
            r.target
        );
    }
}

#[test]
fn max_duration_stops_the_crawl_and_resume_finishes_it_exactly() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(53)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), true);
    // Slow enough that the whole web takes several seconds: 20 requests per second per host.
    config.politeness.per_host_rps = 20.0;
    config.politeness.per_host_burst = 1;
    config.checkpoint.interval_secs = 0.2;
    config.crawl.max_duration = Some("700ms".into());
    let shutdown = ShutdownHandle::new();
    let first = crate::support::crawl_resuming(&config, &web.seeds(), shutdown.clone(), None);
    assert!(first.stopped, "the time limit did not stop the crawl");
    assert!(shutdown.stopped_by_time_limit());
    let manifest = checkpoint::current_manifest(out.path()).unwrap().unwrap();
    assert!(!manifest.finished);
    // Each run gets the whole limit again: resumed under the same limit, it goes on from
    // where it stopped until the web is done.
    let mut runs = 1;
    let mut summary = first;
    while summary.stopped {
        runs += 1;
        assert!(runs < 40, "never finished");
        let loaded = checkpoint::load(out.path()).unwrap();
        summary = crate::support::crawl_resuming(
            &config,
            &web.seeds(),
            ShutdownHandle::new(),
            Some(loaded),
        );
    }
    assert!(runs >= 2);
    assert_ground_truth(&web, &server, &config);
    assert!(
        checkpoint::current_manifest(out.path())
            .unwrap()
            .unwrap()
            .finished
    );
}

/// The binary as an operator runs it: the proxy from `http_proxy` (with a password, never
/// printed), a time limit that stops the run and says so, then `--resume` finishing it.
#[test]
fn the_binary_takes_the_proxy_from_the_environment_and_names_the_time_limit() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(61)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let proxy = TestProxy::start(server.addr()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seeds.txt"), web.seeds().join("\n")).unwrap();
    let (pattern, addr) = server.resolve_entry();
    let proxy_url = format!("http://crawler:s3cret@{}", proxy.addr());
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "--seeds",
            "seeds.txt",
            "--max-urls",
            "1e5",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--set",
            "network.proxy_from_env=true",
            "--set",
            "politeness.per_host_rps=20",
            "--set",
            "politeness.per_host_burst=1",
            "--set",
            "crawl.max_depth=16",
            "--set",
            "crawl.retries=1",
            "--set",
            "crawl.max_duration=700ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push("--set".into());
        args.push(format!("network.resolve.\"{pattern}\"={addr}"));
        args.extend(extra.iter().map(|s| s.to_string()));
        std::process::Command::new(env!("CARGO_BIN_EXE_crawler"))
            .args(&args)
            .current_dir(dir.path())
            .env("RUST_LOG", "info")
            .env("http_proxy", &proxy_url)
            .env_remove("HTTP_PROXY")
            .env_remove("no_proxy")
            .env_remove("NO_PROXY")
            .env_remove("all_proxy")
            .env_remove("ALL_PROXY")
            .output()
            .unwrap()
    };
    let first = run(&[]);
    let e = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(matches!(first.status.code(), Some(0 | 1)), "{e}");
    assert!(
        e.contains("stopped by the time limit (crawl.max_duration = 700ms, counted per run)")
            && e.contains("--resume"),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
    let proxied_first = proxy.log().len();
    assert!(proxied_first > 0, "the environment's proxy was not used");
    assert_eq!(proxied_first, server.log().len());
    // Resumed without a limit, it finishes: every request of both runs went through the
    // proxy, and the web was crawled exactly.
    let second = run(&["--resume", "--set", "crawl.max_duration=1h"]);
    let e = String::from_utf8_lossy(&second.stderr).into_owned();
    assert!(matches!(second.status.code(), Some(0 | 1)), "{e}");
    assert!(!e.contains("stopped"), "{e}");
    assert_eq!(proxy.log().len(), server.log().len());
    let config = config_for(&server, &dir.path().join("out"), true);
    assert_ground_truth(&web, &server, &config);
}
