//! Adaptive politeness end to end, read from the synthetic web's request log: against a host
//! that answers 429 (no Retry-After) above R requests/s the crawler settles at ≤ R within 10
//! requests, with its per-host and per-IP minimum gaps still held; against a host that slows
//! with load it slows down and never has more requests in flight as latency rises; both show
//! in `summary.json`'s `slowed_hosts`.

use std::sync::Arc;
use std::time::Duration;

use crawler::ShutdownHandle;
use testweb::{
    Features, RequestRecord, TestWebServer, Web, WebSpec, PRESSURE_PAGES, SLUGGISH_HOST,
    THROTTLE_HOST, THROTTLE_RPS,
};

use crate::support::{arrival_slack, config_for, crawl};

fn pressure_web() -> Arc<Web> {
    Arc::new(Web::new(WebSpec {
        hosts: 1,
        pages: 4,
        features: Features {
            pressure: true,
            ..Features::none()
        },
        ..WebSpec::small(31)
    }))
}

/// Arrivals in the second up to and including each request (the server's own window).
fn window_counts(starts: &[Duration]) -> Vec<usize> {
    (0..starts.len())
        .map(|j| {
            starts[..=j]
                .iter()
                .filter(|&&t| starts[j] - t < Duration::from_secs(1))
                .count()
        })
        .collect()
}

/// Every pair of arrivals `k` apart is at least `k` periods apart, less one `slack`.
fn assert_min_gaps(starts: &[Duration], period: Duration, slack: Duration, what: &str) {
    for i in 0..starts.len() {
        for j in i + 1..starts.len() {
            let due = period * (j - i) as u32;
            assert!(
                starts[j] - starts[i] + slack >= due,
                "{what}: requests {i} and {j} {:?} apart (due {due:?} less {slack:?})",
                starts[j] - starts[i]
            );
        }
    }
}

#[test]
fn a_throttling_host_is_crawled_under_its_limit_within_ten_requests() {
    let _load = crate::support::timing_sensitive();
    let web = pressure_web();
    let server = TestWebServer::start(web).unwrap();
    server.track_stalls();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    // Configured at 5 × the server's limit: only adaptation can bring it under.
    config.politeness.per_host_rps = 5.0 * THROTTLE_RPS as f64;
    config.politeness.per_host_burst = 1;
    config.politeness.per_host_concurrency = 2;
    // The address's budget is the tighter one (and adapts too).
    config.politeness.per_ip_rps = 3.0 * THROTTLE_RPS as f64;
    config.politeness.per_ip_concurrency = 2;
    config.crawl.retries = 8;
    let seed = format!("http://{THROTTLE_HOST}/");
    let summary = crawl(&config, &[seed], ShutdownHandle::new());

    let log: Vec<RequestRecord> = server.log();
    let mut starts: Vec<Duration> = log.iter().map(|r| r.started).collect();
    starts.sort();
    let statuses: Vec<u16> = {
        let mut by_start: Vec<&RequestRecord> = log.iter().collect();
        by_start.sort_by_key(|r| r.started);
        by_start.iter().map(|r| r.status).collect()
    };
    let windows = window_counts(&starts);
    // Settled within 10 requests of the first 429: from then on, judged by the server.
    let first = statuses
        .iter()
        .position(|&s| s == 429)
        .expect("the crawl, configured over the limit, was throttled");
    let settled = first + 10;
    assert!(starts.len() > settled + 10, "too few requests to judge");
    let throttled_late = statuses.iter().skip(settled).filter(|&&s| s == 429).count();
    let span = *starts.last().unwrap() - starts[settled];
    let late_rate = (starts.len() - settled - 1) as f64 / span.as_secs_f64();
    eprintln!(
        "throttle: {} requests, {} answered 429 (first: request {first}, {throttled_late} \
         after request {settled}), windows {windows:?}, {late_rate:.1}/s from request {settled}",
        starts.len(),
        statuses.iter().filter(|&&s| s == 429).count()
    );
    // Every page was fetched in the end (the 429s were retried).
    let ok = log.iter().filter(|r| r.status == 200).count();
    assert_eq!(ok, PRESSURE_PAGES + 1, "home and every leaf answered 200");
    // Settled: from 10 requests after the first 429 on, the server's window of the last
    // second holds at most R requests but for a probe now and then (AIMD's additive
    // recovery finds the limit again by crossing it by one request, which is throttled and
    // halves the rate), and the rate is under R.
    let over: Vec<usize> = windows
        .iter()
        .enumerate()
        .skip(settled)
        .filter(|(_, &n)| n > THROTTLE_RPS)
        .map(|(i, _)| i)
        .collect();
    assert!(
        throttled_late * 10 <= starts.len() - settled,
        "more than one request in 10 throttled after request {settled}: {throttled_late}; \
         windows {windows:?}"
    );
    assert!(
        windows.iter().skip(settled).all(|&n| n <= THROTTLE_RPS + 1),
        "over R + 1 in a second after request {settled} at {over:?}: {windows:?}"
    );
    assert!(
        late_rate <= THROTTLE_RPS as f64,
        "{late_rate:.1} requests/s from request {settled}, limit {THROTTLE_RPS}"
    );
    // The minimum gaps still hold: the address's (the tighter) over every request.
    let slack = arrival_slack(&server);
    let ip_period = Duration::from_secs_f64(1.0 / config.politeness.per_ip_rps);
    assert_min_gaps(&starts, ip_period, slack, "per-IP");
    // The summary says who was slowed and why: the name and its address.
    let slowed: Vec<(&str, &str)> = summary
        .slowed_hosts
        .iter()
        .map(|s| (s.host.as_str(), s.budget))
        .collect();
    assert!(slowed.contains(&(THROTTLE_HOST, "name")), "{slowed:?}");
    assert!(slowed.contains(&("127.0.0.1", "address")), "{slowed:?}");
    let entry = &summary.slowed_hosts[0];
    assert!(entry.throttled_responses > 0 && entry.peak_interval_ms > entry.configured_interval_ms);
    assert!(
        entry.reasons.iter().any(|r| r.starts_with("throttled")),
        "{entry:?}"
    );
    let json = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    assert!(json.contains("\"slowed_hosts\"") && json.contains(THROTTLE_HOST));
}

/// The most requests in flight at once among `log`'s records that arrive in `[from, to)`.
fn in_flight_at_arrivals(log: &[RequestRecord], from: Duration, to: Duration) -> usize {
    log.iter()
        .filter(|r| r.started >= from && r.started < to)
        .map(|r| {
            log.iter()
                .filter(|o| o.started <= r.started && o.finished > r.started)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn a_host_that_slows_with_load_is_slowed_never_given_more_concurrency() {
    let _load = crate::support::timing_sensitive();
    let web = pressure_web();
    let server = TestWebServer::start(web).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.politeness.per_host_rps = 50.0;
    config.politeness.per_host_burst = 1;
    config.politeness.per_host_concurrency = 2;
    let seed = format!("http://{SLUGGISH_HOST}/");
    let summary = crawl(&config, &[seed], ShutdownHandle::new());

    let mut log: Vec<RequestRecord> = server.log();
    log.sort_by_key(|r| r.started);
    assert_eq!(log.len(), PRESSURE_PAGES + 1, "every page once");
    let durations: Vec<Duration> = log.iter().map(|r| r.finished - r.started).collect();
    // Latency rose: the first answer at least twice the first one's (its load then).
    let first = durations[0];
    let Some(rose) = durations.iter().position(|&d| d >= first * 2) else {
        panic!("latency never rose: {durations:?}")
    };
    // The crawler can react once that answer is in: requests sent after it are judged.
    let rose_at = log[rose].finished;
    let before = in_flight_at_arrivals(&log, Duration::ZERO, rose_at);
    let after = in_flight_at_arrivals(&log, rose_at, Duration::MAX);
    eprintln!(
        "sluggish: durations {durations:?}; at most {before} in flight before latency rose \
         (request {rose}), {after} after"
    );
    assert!(
        after <= before,
        "concurrency rose with latency: {before} before, {after} after"
    );
    assert!(after <= config.politeness.per_host_concurrency as usize);
    // And it slowed: after an answer of d completed, the next request came no sooner than
    // the configured interval would allow, and on average far later (5 × d).
    let gaps: Vec<Duration> = log
        .windows(2)
        .map(|w| w[1].started - w[0].started)
        .collect();
    let mean_gap_after = gaps[rose..].iter().sum::<Duration>() / (gaps.len() - rose) as u32;
    let mean_duration = durations[rose..].iter().sum::<Duration>() / (log.len() - rose) as u32;
    assert!(
        mean_gap_after >= mean_duration * 2,
        "requests {mean_gap_after:?} apart on average while answers took {mean_duration:?}"
    );
    let entry = summary
        .slowed_hosts
        .iter()
        .find(|s| s.host == SLUGGISH_HOST)
        .expect("the sluggish host is reported");
    assert!(
        entry.reasons.contains(&"slow responses") && entry.throttled_responses == 0,
        "{entry:?}"
    );
}
