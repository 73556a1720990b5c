//! End-to-end crawls of the synthetic web, checked against its ground truth and, above
//! all, against the server's own request log: what the crawler really did.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{arrival_slack, config_for, crawl, records, rules_for};
use crawler::output::PageRecord;
use crawler::ShutdownHandle;
use testweb::{max_concurrency, Features, RequestRecord, TestWebServer, Web, WebSpec};

fn assert_each_url_recorded_once(records: &[PageRecord]) {
    let mut seen = BTreeSet::new();
    for r in records {
        assert!(seen.insert(r.url.clone()), "recorded twice: {}", r.url);
    }
}

#[test]
fn every_reachable_page_is_fetched_exactly_once() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(11)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = config_for(&server, out.path(), false);
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    let log = server.log();
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&log);
    assert!(diff.is_empty(), "server log vs ground truth: {diff}");

    let records = records(out.path());
    assert_each_url_recorded_once(&records);
    let recorded: BTreeSet<String> = records.iter().map(|r| r.url.clone()).collect();
    assert_eq!(recorded, truth.urls(), "pages.jsonl vs ground truth");
    for r in &records {
        let expected = truth.get(&r.url).unwrap();
        assert_eq!(r.depth, expected.depth, "depth of {}", r.url);
        assert_eq!(r.status, expected.status, "status of {}", r.url);
    }
    let big = records
        .iter()
        .find(|r| r.url.ends_with("/big/page"))
        .expect("big page recorded");
    assert!(big.truncated, "the 11 MiB page is cut at max_body_bytes");
    assert_eq!(big.bytes, config.crawl.max_body_bytes.0);
    let not_html: Vec<&PageRecord> = records
        .iter()
        .filter(|r| {
            let t = r.content_type.as_deref().unwrap_or_default();
            t != "text/html" && t != "application/xhtml+xml"
        })
        .filter(|r| r.links > 0 && r.status.is_some_and(|s| s < 300))
        .collect();
    assert!(not_html.is_empty(), "non-HTML parsed: {not_html:?}");
    assert!(!summary.stopped);
    assert_eq!(summary.counts.accepted, truth.len() as u64);
    assert_eq!(summary.counts.finished, truth.len() as u64);
    // The permanent 500 page is the one failure.
    assert_eq!(summary.counts.server_errors, 1, "{}", summary.human());
    assert!(
        summary.counts.redirects_over_limit >= 1,
        "the 12-hop chain is cut"
    );
    let summary_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary_file["accepted"], truth.len() as u64);
}

#[test]
fn max_depth_is_honoured_exactly() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(12)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.crawl.max_depth = 2;
    crawl(&config, &web.seeds(), ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "{diff}");
    let records = records(out.path());
    assert!(records.iter().all(|r| r.depth <= 2));
    assert!(records.iter().any(|r| r.depth == 2));
    // The endless calendar is cut at depth 2: months Nov 2026 ± 1 at most.
    let months = records
        .iter()
        .filter(|r| r.url.contains("/calendar/"))
        .count();
    assert!((1..=3).contains(&months), "{months} calendar pages");
}

#[test]
fn max_urls_is_honoured_exactly() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(13)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.crawl.max_urls = crawler::config::Count(57);
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    assert_eq!(summary.counts.accepted, 57);
    let records = records(out.path());
    assert_eq!(records.len(), 57);
    assert_each_url_recorded_once(&records);
    let requested: BTreeSet<String> = server
        .log()
        .iter()
        .filter(|r| r.path != "/robots.txt")
        .map(RequestRecord::url)
        .collect();
    assert_eq!(requested.len(), 57);
    assert!(summary.counts.links_over_cap > 0);
}

#[test]
fn trap_does_not_run_away_and_redirect_loops_end() {
    let _load = crate::support::ordinary();
    let spec = WebSpec {
        features: Features {
            trap: true,
            redirects: true,
            ..Features::none()
        },
        ..WebSpec::small(14)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.crawl.max_depth = 6;
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "{diff}");
    let log = server.log();
    let per_url: BTreeMap<String, usize> = log.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.url()).or_default() += 1;
        m
    });
    for url in ["/redirect/loop/a", "/redirect/loop/b", "/redirect/self"] {
        let n = per_url
            .iter()
            .filter(|(u, _)| u.ends_with(url))
            .map(|(_, n)| *n)
            .sum::<usize>();
        assert_eq!(n, 1, "{url} requested {n} times");
    }
    let months = log
        .iter()
        .filter(|r| r.path.starts_with("/calendar/"))
        .count();
    assert!(months <= 2 * 6, "{months} calendar months for max_depth 6");
    assert!(!summary.stopped);
}

#[test]
fn per_host_rate_and_concurrency_are_never_exceeded() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        hosts: 3,
        pages: 90,
        features: Features {
            slow: true,
            ..Features::none()
        },
        ..WebSpec::small(15)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    server.track_stalls();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    let (rps, burst, per_host) = (25.0, 2u32, 2u32);
    config.politeness.per_host_rps = rps;
    config.politeness.per_host_burst = burst;
    config.politeness.per_host_concurrency = per_host;
    crawl(&config, &web.seeds(), ShutdownHandle::new());
    let log = server.log();
    let slack = arrival_slack(&server);
    let hosts: BTreeSet<String> = log.iter().map(|r| r.host.clone()).collect();
    assert_eq!(hosts.len(), 3);
    for host in &hosts {
        let mut starts: Vec<Duration> = log
            .iter()
            .filter(|r| &r.host == host)
            .map(|r| r.started)
            .collect();
        starts.sort();
        assert!(starts.len() >= 20, "{host}: {} requests", starts.len());
        // GCRA: in any window of length T at most burst + T·rps requests start. The
        // server stamps arrival, which lags the crawler's send by the connection set-up
        // (a new connection's first request) and by scheduling (support::arrival_slack:
        // 30 ms plus any stall of the server thread measured during the crawl; this test
        // runs alone in its binary). On a quiet machine the slack hides less than one
        // request at 25/s, while a broken limiter shows as tens.
        for i in 0..starts.len() {
            for j in i + 1..starts.len() {
                let window = (starts[j] - starts[i] + slack).as_secs_f64();
                let allowed = burst as f64 + window * rps;
                assert!(
                    (j - i + 1) as f64 <= allowed + 1e-9,
                    "{host}: {} requests in {:.3} s (rate {rps}/s, burst {burst})",
                    j - i + 1,
                    window
                );
            }
        }
        let concurrent = max_concurrency(&log, |r| &r.host == host);
        assert!(
            concurrent <= per_host as usize,
            "{host}: {concurrent} requests at once"
        );
    }
}

#[test]
fn stop_finishes_in_flight_work_and_reports_stopped() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(16)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.politeness.per_host_rps = 20.0;
    config.politeness.per_host_burst = 1;
    let shutdown = ShutdownHandle::new();
    let stopper = shutdown.clone();
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        stopper.stop();
    });
    let started = std::time::Instant::now();
    let summary = crawl(&config, &web.seeds(), shutdown);
    timer.join().unwrap();
    assert!(summary.stopped);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "stop took {:?}",
        started.elapsed()
    );
    let records = records(out.path());
    assert_each_url_recorded_once(&records);
    assert!(!records.is_empty());
    assert!(summary.queued_left > 0);
    // Every page the server answered is in the output, except answers that asked for a
    // retry (the URL is still in the frontier) and the slow page, which may still have
    // been in flight when the grace period ended.
    let recorded: BTreeSet<String> = records.iter().map(|r| r.url.clone()).collect();
    for r in server.log().iter().filter(|r| r.path != "/robots.txt") {
        let url = r.url();
        let pending_retry = r.status >= 500 || r.status == 429;
        let slow = url.contains("/slow/");
        assert!(
            recorded.contains(&url) || pending_retry || slow,
            "served but not recorded: {url}"
        );
    }
}

#[test]
fn timeouts_are_retried_then_recorded_as_failures() {
    let _load = crate::support::timing_sensitive();
    let spec = WebSpec {
        features: Features {
            slow: true,
            too_slow: true,
            ..Features::none()
        },
        ..WebSpec::small(17)
    };
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.crawl.timeout_secs = 1.0;
    config.crawl.retries = 1;
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "{diff}");
    let records = records(out.path());
    let too_slow = records
        .iter()
        .find(|r| r.url.ends_with("/slow/too-slow"))
        .expect("too-slow page recorded");
    assert_eq!(too_slow.status, None);
    assert_eq!(too_slow.attempts, 2);
    let error = too_slow.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("timed out") || error.contains("timeout"),
        "{error}"
    );
    assert_eq!(summary.counts.network_errors, 1);
    assert_eq!(summary.counts.retries, 1);
    // The 300 ms page is slower than most but well inside the timeout.
    let slow = records
        .iter()
        .find(|r| r.url.ends_with("/slow/page"))
        .unwrap();
    assert_eq!(slow.status, Some(200));
}
