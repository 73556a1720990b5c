//! The monitor (`crate::monitor`) seen from outside, as an operator and a scraper see it:
//! the `crawler` binary crawls the synthetic web with `--listen`, and the tests read
//! `/metrics` (checked by Prometheus's own `promtool check metrics`), `/status.json` and
//! the status page rendered by headless Chromium.
//!
//! `promtool` (Debian's `prometheus` package) and `chromium` are installed by
//! `scripts/test`; under CI (`CI=true`) a missing one fails the test, elsewhere the test
//! says loudly that it skipped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use testweb::{TestWebServer, Web, WebSpec};

/// Whether `program --version` runs; if not, fails under CI and says why elsewhere.
fn tool_available(program: &str, package: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        let message =
            format!("{program} not found: install Debian's {package} package (scripts/test does)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("\n!!!!!!!! SKIPPED: {message} !!!!!!!!\n");
    }
    found
}

/// A crawl of `server`'s web by the `crawler` binary with the monitor on a port of its
/// choosing, and that address (read from its log line).
struct MonitoredCrawl {
    child: Child,
    addr: SocketAddr,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl MonitoredCrawl {
    fn start(server: &TestWebServer, web: &Web, settings: &[&str]) -> MonitoredCrawl {
        Self::start_with(server, web, settings, &[])
    }

    /// As [`MonitoredCrawl::start`], with `extra` arguments.
    fn start_with(
        server: &TestWebServer,
        web: &Web,
        settings: &[&str],
        extra: &[&str],
    ) -> MonitoredCrawl {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("seeds.txt"), web.seeds().join("\n")).unwrap();
        let (pattern, addr) = server.resolve_entry();
        let resolve = format!("network.resolve.\"{pattern}\"={addr}");
        let mut args = vec![
            "--seeds",
            "seeds.txt",
            "--max-urls",
            "1e6",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--listen",
            "127.0.0.1:0",
            "--set",
            resolve.as_str(),
            "--set",
            "crawl.retries=1",
        ];
        for s in settings {
            args.extend(["--set", s]);
        }
        args.extend(extra);
        let mut child = Command::new(env!("CARGO_BIN_EXE_crawler"))
            .args(&args)
            .current_dir(dir.path())
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Reads the log to its end, so the crawler never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("monitor: http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the crawler logs the monitor's address")
            .parse()
            .unwrap();
        MonitoredCrawl {
            child,
            addr,
            out: dir.path().join("out"),
            _dir: dir,
        }
    }

    fn get(&self, path: &str) -> String {
        let (status, body) = http_get(self.addr, path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/status.json")).unwrap()
    }

    /// Polls `/status.json` until `done` says yes (the crawl's own pace decides when).
    fn wait_for(&self, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let started = Instant::now();
        loop {
            let status = self.status();
            if done(&status) {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "never: {what}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for MonitoredCrawl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET over a fresh connection: (status code, body).
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_request(addr, "GET", path)
}

fn http_request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

/// `promtool check metrics` on `text`: the exposition parses and passes its lint.
fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The samples of an exposition that promtool accepted: `name{labels}` → value, and the
/// names of the counter families.
fn samples(text: &str) -> (BTreeMap<String, f64>, Vec<String>) {
    let mut values = BTreeMap::new();
    let mut counters = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            if kind == "counter" {
                counters.push(name.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, value) = line.rsplit_once(' ').unwrap();
            values.insert(series.to_string(), value.parse().unwrap());
        }
    }
    (values, counters)
}

/// Every counter series and where `summary.json` holds the same figure (a top-level
/// field, or `out_of_scope.<reason>`). Written out here, independently of the monitor's own
/// table, so that a wrong mapping there shows as a mismatch.
const SUMMARY_OF: &[(&str, &str)] = &[
    ("crawler_pages_total{class=\"2xx\"}", "ok"),
    ("crawler_pages_total{class=\"3xx\"}", "redirects"),
    ("crawler_pages_total{class=\"4xx\"}", "client_errors"),
    ("crawler_pages_total{class=\"5xx\"}", "server_errors"),
    (
        "crawler_pages_total{class=\"no_response\"}",
        "network_errors",
    ),
    (
        "crawler_pages_total{class=\"not_modified\"}",
        "not_modified",
    ),
    ("crawler_urls_finished_total", "finished"),
    ("crawler_urls_accepted_total", "accepted"),
    ("crawler_retries_total", "retries"),
    ("crawler_response_body_bytes_total", "bytes"),
    ("crawler_pages_parsed_total", "parsed"),
    ("crawler_links_found_total", "links_found"),
    ("crawler_links_refused_total{reason=\"seen\"}", "links_seen"),
    (
        "crawler_links_refused_total{reason=\"too_deep\"}",
        "links_too_deep",
    ),
    (
        "crawler_links_refused_total{reason=\"over_max_urls\"}",
        "links_over_cap",
    ),
    (
        "crawler_links_refused_total{reason=\"nofollow\"}",
        "links_nofollow",
    ),
    (
        "crawler_links_refused_total{reason=\"not_http\"}",
        "links_not_http",
    ),
    (
        "crawler_links_refused_total{reason=\"invalid\"}",
        "links_invalid",
    ),
    (
        "crawler_links_refused_total{reason=\"over_max_pages_per_host\"}",
        "links_host_cap",
    ),
    (
        "crawler_links_refused_total{reason=\"over_max_links_per_page\"}",
        "links_over_page_cap",
    ),
    (
        "crawler_links_refused_total{reason=\"on_near_duplicate_page\"}",
        "links_near_duplicate",
    ),
    ("crawler_pages_near_duplicate_total", "near_duplicate_pages"),
    ("crawler_redirect_chains_cut_total", "redirects_over_limit"),
    ("crawler_sitemaps_read_total", "sitemaps_read"),
    ("crawler_sitemap_entries_total", "sitemap_entries"),
    ("crawler_sitemap_entries_cut_total", "sitemap_entries_cut"),
    ("crawler_sitemap_errors_total", "sitemap_errors"),
    (
        "crawler_urls_unfetched_total{reason=\"robots_disallowed\"}",
        "disallowed",
    ),
    (
        "crawler_urls_unfetched_total{reason=\"crawl_delay_too_long\"}",
        "deferred",
    ),
    (
        "crawler_urls_unfetched_total{reason=\"robots_unavailable\"}",
        "robots_unavailable",
    ),
    ("crawler_robots_fetches_total", "robots_fetches"),
    (
        "crawler_seen_false_positive_skips_estimated_total",
        "estimated_false_positive_skips",
    ),
    ("crawler_parse_cpu_seconds_total", "parse_cpu_secs"),
    ("crawler_descriptor_pauses_total", "descriptor_pauses"),
    ("crawler_panics_total", "panics"),
    ("crawler_archive_records_total", "warc_records"),
    ("crawler_archive_bytes_total", "warc_bytes"),
    ("crawler_archive_payload_bytes_total", "warc_payload_bytes"),
    ("crawler_archive_revisits_total", "warc_revisits"),
    ("crawler_archive_bytes_saved_total", "warc_bytes_saved"),
    ("crawler_archive_stored_total", "warc_stored"),
];

fn summary_value(summary: &serde_json::Value, series: &str) -> f64 {
    if let Some(reason) = series
        .strip_prefix("crawler_links_out_of_scope_total{reason=\"")
        .and_then(|r| r.strip_suffix("\"}"))
    {
        return summary["out_of_scope"][reason].as_f64().unwrap();
    }
    let (_, field) = SUMMARY_OF
        .iter()
        .find(|(s, _)| *s == series)
        .unwrap_or_else(|| panic!("counter {series} has no summary.json figure in SUMMARY_OF"));
    summary[*field]
        .as_f64()
        .unwrap_or_else(|| panic!("summary.json has no number {field}"))
}

/// Scraped during a crawl and once after its end (kept served by `monitor.linger_secs`):
/// both pass `promtool check metrics`, the counters only grow, and every counter of the
/// final scrape is what `summary.json` says, the same for every series of every counter
/// family.
#[test]
fn metrics_during_and_after_a_crawl_match_the_summary() {
    let _load = crate::support::ordinary();
    if !tool_available("promtool", "prometheus") {
        return;
    }
    let web = Arc::new(Web::new(WebSpec::small(22)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let crawl = MonitoredCrawl::start(
        &server,
        &web,
        &[
            "politeness.per_host_rps=40",
            "monitor.linger_secs=30",
            "output.warc=true",
        ],
    );
    crawl.wait_for("some pages done", |s| {
        s["counters"]["finished"].as_u64().unwrap_or(0) > 20
    });
    let during = crawl.get("/metrics");
    promtool_check(&during);
    // Read-only, and nothing but its three pages.
    for method in ["POST", "PUT", "DELETE"] {
        assert_eq!(
            http_request(crawl.addr, method, "/metrics").0,
            405,
            "{method}"
        );
    }
    assert_eq!(http_get(crawl.addr, "/checkpoint").0, 404);
    let (during, _) = samples(&during);

    let status = crawl.wait_for("the crawl's end", |s| s["state"] != "running");
    assert_eq!(status["state"], "finished");
    let last = crawl.get("/metrics");
    promtool_check(&last);
    let (last, counter_families) = samples(&last);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(crawl.out.join("summary.json")).unwrap())
            .unwrap();

    assert_eq!(last["crawler_running"], 0.0);
    assert_eq!(during["crawler_running"], 1.0);
    assert_counters_match(&last, &counter_families, &summary, &during);
    // The crawl did something worth comparing: pages, errors and archive records.
    for series in [
        "crawler_pages_total{class=\"2xx\"}",
        "crawler_pages_total{class=\"5xx\"}",
        "crawler_archive_records_total",
    ] {
        assert!(last[series] > 0.0, "{series} is 0");
    }
    assert_eq!(last["crawler_urls_queued"], 0.0);
    assert!(last
        .keys()
        .any(|k| k.starts_with("crawler_host_urls_queued{host=")));
    assert!(last.contains_key("crawler_checkpoint_age_seconds"));
    assert!(!last.contains_key("crawler_redis_round_trips_total"));
}

/// Every counter series of `last` equals its `summary.json` figure, and none is below its
/// value in the earlier scrape `during`.
fn assert_counters_match(
    last: &BTreeMap<String, f64>,
    counter_families: &[String],
    summary: &serde_json::Value,
    during: &BTreeMap<String, f64>,
) {
    let mut compared = 0;
    for (series, value) in last {
        let family = series.split('{').next().unwrap();
        if !counter_families.iter().any(|f| f == family) {
            continue;
        }
        let expected = summary_value(summary, series);
        assert!(
            (value - expected).abs() <= 1e-9 * expected.abs().max(1.0),
            "{series} = {value}, summary.json says {expected}"
        );
        if let Some(before) = during.get(series) {
            assert!(before <= value, "{series} went down: {before} then {value}");
        }
        compared += 1;
    }
    assert!(
        compared >= SUMMARY_OF.len(),
        "only {compared} counters compared"
    );
}

/// A process of a distributed crawl: its monitor counts Redis round trips, has no local
/// checkpoint to show, and its final counters are its `summary-<process id>.json`.
#[test]
fn a_distributed_process_shows_its_redis_round_trips() {
    let _load = crate::support::ordinary();
    if !tool_available("promtool", "prometheus") {
        return;
    }
    let redis = crate::distributed::RedisServer::start(false);
    let web = Arc::new(Web::new(WebSpec::small(24)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let url = redis.url();
    let crawl = MonitoredCrawl::start_with(
        &server,
        &web,
        &["politeness.per_host_rps=40", "monitor.linger_secs=30"],
        &["--redis", &url, "--crawl-id", "monitored"],
    );
    crawl.wait_for("some pages done", |s| {
        s["counters"]["finished"].as_u64().unwrap_or(0) > 20
    });
    let (during, _) = samples(&crawl.get("/metrics"));
    crawl.wait_for("the crawl's end", |s| s["state"] != "running");
    let text = crawl.get("/metrics");
    promtool_check(&text);
    let (mut last, counter_families) = samples(&text);
    let status = crawl.status();
    assert!(status["checkpoint"].is_null(), "{status}");
    let trips = last
        .remove("crawler_redis_round_trips_total")
        .expect("a Redis round-trip counter");
    assert!(trips > 0.0 && during["crawler_redis_round_trips_total"] <= trips);
    assert_eq!(status["redis_round_trips"].as_f64(), Some(trips));
    let summary = std::fs::read_dir(&crawl.out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("summary-")
        })
        .expect("summary-<process id>.json");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    assert_counters_match(&last, &counter_families, &summary, &during);
    assert!(last["crawler_pages_total{class=\"2xx\"}"] > 0.0);
}

/// The status page as a browser renders it, during a crawl: headless Chromium's DOM shows
/// the same pages/s and top host as `/status.json` of the same sample, and its screenshot
/// is kept in `target/tmp/monitor-status-page.png`.
#[test]
fn status_page_in_headless_chromium_shows_what_status_json_says() {
    let _load = crate::support::ordinary();
    if !tool_available("chromium", "chromium") {
        return;
    }
    let web = Arc::new(Web::new(WebSpec::small(23)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let crawl = MonitoredCrawl::start(&server, &web, &["politeness.per_host_rps=4"]);
    crawl.wait_for("a rate and a top host", |s| {
        s["pages_per_sec"].as_f64().unwrap_or(0.0) > 0.0
            && s["top_hosts"][0]["busiest"] == true
            && s["history"].as_array().is_some_and(|h| h.len() >= 3)
    });
    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://{}/", crawl.addr);
    let mut matched = None;
    for _ in 0..10 {
        let before = crawl.status();
        let dom = chromium(profile.path(), &["--dump-dom", &url]);
        let after = crawl.status();
        let page = RenderedPage::read(&dom);
        let Some(status) = [before, after]
            .into_iter()
            .find(|s| s["sample"].as_u64() == Some(page.sample))
        else {
            // The page was drawn from a sample taken between the two readings: again.
            continue;
        };
        matched = Some((page, status));
        break;
    }
    let (page, status) = matched.expect("a rendered page of the same sample as /status.json");
    assert_eq!(
        page.pages_per_sec,
        status["pages_per_sec"].as_f64().unwrap()
    );
    assert!(page.pages_per_sec > 0.0);
    assert_eq!(
        page.top_host,
        status["top_hosts"][0]["host"].as_str().unwrap()
    );
    assert_eq!(page.state, "running");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("monitor-status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        profile.path(),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
            &url,
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        shot.display()
    );
    eprintln!("status page screenshot: {}", shot.display());
}

/// Runs headless Chromium with the flags of a clean, offline, throwaway browser.
fn chromium(profile: &Path, args: &[&str]) -> String {
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the page marks for reading back (see `monitor/page.rs`).
struct RenderedPage {
    sample: u64,
    state: String,
    pages_per_sec: f64,
    top_host: String,
}

impl RenderedPage {
    fn read(dom: &str) -> RenderedPage {
        let html = scraper::Html::parse_document(dom);
        let attr = |selector: &str, name: &str| -> String {
            let selector = scraper::Selector::parse(selector).unwrap();
            let element = html
                .select(&selector)
                .next()
                .unwrap_or_else(|| panic!("no {selector:?} in the rendered page:\n{dom}"));
            element.value().attr(name).unwrap().to_string()
        };
        RenderedPage {
            sample: attr("body", "data-sample").parse().unwrap(),
            state: attr("body", "data-state"),
            pages_per_sec: attr("#pages-per-sec", "data-value").parse().unwrap(),
            top_host: attr("#top-host", "data-host"),
        }
    }
}
