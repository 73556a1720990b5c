//! The crawler against the hostile corner of the synthetic web (`testweb::Hostile`): one
//! test per misbehaving host, and one crawling them all together.
//!
//! Each test runs the `crawler` binary (so its peak memory is its own) against a
//! `TestWebServer::start_hostile`, then checks: the crawl ended by itself within a generous
//! bound (it is killed past it, and that fails the test); exit
//! code 0 or 1 (finished, with or without failed pages); peak RSS under a generous bound;
//! every URL the crawl accepted recorded exactly once in pages.jsonl, every URL the server
//! saw requested among them, the hostile page recorded with an error (or the truncation
//! the case calls for); and the canary listener untouched. The figures (elapsed, peak RSS,
//! records, requests) are printed, never asserted tightly: a loaded 2-core machine must
//! not fail these. Each crawl is bounded (`--max-urls`, small timeouts) so the file runs
//! in well under a minute.
//!
//! Peak memory is the child's `VmHWM` (high-water RSS of its own address space) read from
//! /proc every 20 ms while it runs: `ru_maxrss` from `wait4` would also count the test
//! process's RSS at the fork (Linux carries the pre-exec high-water mark over), and the
//! test process holds servers and other tests' data. Sampling misses at most the growth of
//! the last 20 ms. A watchdog kills a crawler whose RSS passes [`RSS_KILL_MB`], so a crawler
//! that explodes (today's huge `<base>`: 20 GB within 30 s) cannot take the machine down.
//!
//! Tests that fail on today's crawler are `#[ignore]`d with the failure seen; they are
//! un-ignored as the fixes land.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawler::output::PageRecord;
use testweb::{Hostile, RequestRecord, ServerOptions, TestWebServer, Web, WebSpec};

/// How one crawler run went.
struct Run {
    /// Exit code; `None` when ended by a signal (killed past its bound, or crashed).
    code: Option<i32>,
    /// Why the test killed it, if it did.
    killed: Option<String>,
    elapsed: Duration,
    peak_rss_mb: f64,
    records: Vec<PageRecord>,
    /// `accepted` from summary.json (`None` when the crawl wrote none).
    accepted: Option<u64>,
    /// summary.json (`Null` when the crawl wrote none).
    summary: serde_json::Value,
    stderr: String,
    log: Vec<RequestRecord>,
    canary: u64,
    _dir: tempfile::TempDir,
}

impl Run {
    fn record(&self, url: &str) -> &PageRecord {
        let found: Vec<&PageRecord> = self.records.iter().filter(|r| r.url == url).collect();
        assert_eq!(found.len(), 1, "{url} recorded {} times", found.len());
        found[0]
    }

    fn requests(&self, host: &str, path: &str) -> usize {
        self.log
            .iter()
            .filter(|r| r.host == host && r.path == path)
            .count()
    }
}

/// RSS at which a crawler is killed (and its test fails): far above any bound asserted,
/// far below what would hurt a shared machine.
const RSS_KILL_MB: f64 = 2048.0;

/// `VmHWM` and `VmRSS` of `pid` in MB, from /proc (`None` once it has exited).
fn memory_mb(pid: libc::pid_t) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

fn hostile_server() -> TestWebServer {
    // A one-host synthetic web: only the hostile corner is crawled.
    let web = Arc::new(Web::new(WebSpec {
        hosts: 1,
        pages: 1,
        ..WebSpec::small(90)
    }));
    TestWebServer::start_hostile(web, ServerOptions::default()).unwrap()
}

/// Runs the crawler on `seeds` against `server` with the base settings plus `sets`,
/// killing it after `bound`.
fn run(
    name: &str,
    server: &TestWebServer,
    seeds: &[String],
    max_urls: u64,
    sets: &[&str],
    bound: Duration,
) -> Run {
    run_limited(name, server, seeds, max_urls, sets, bound, None)
}

/// [`run`] with the crawler's open-file limit (soft) set to `nofile`, as on a machine with
/// the common default of 1024.
fn run_limited(
    name: &str,
    server: &TestWebServer,
    seeds: &[String],
    max_urls: u64,
    sets: &[&str],
    bound: Duration,
    nofile: Option<u64>,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seeds.txt"), seeds.join("\n") + "\n").unwrap();
    let mut args: Vec<String> = vec![
        "--seeds".into(),
        "seeds.txt".into(),
        "--max-urls".into(),
        max_urls.to_string(),
        "--out".into(),
        "out".into(),
        "--progress".into(),
        "quiet".into(),
    ];
    let mut settings: Vec<String> = server
        .resolve_entries()
        .into_iter()
        .map(|(pattern, addr)| format!("network.resolve.\"{pattern}\"={addr}"))
        .collect();
    settings.extend(
        [
            "crawl.retries=0",
            "crawl.timeout_secs=3",
            "crawl.connect_timeout_secs=2",
            "crawl.shutdown_grace_secs=1",
            "politeness.per_host_rps=1000",
            "politeness.per_host_burst=100",
        ]
        .map(String::from),
    );
    settings.extend(sets.iter().map(|s| s.to_string()));
    for s in settings {
        args.push("--set".into());
        args.push(s);
    }
    let stderr_path = dir.path().join("stderr.txt");
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
    command
        .args(&args)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    if let Some(nofile) = nofile {
        use std::os::unix::process::CommandExt;
        // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe and
        // touches no memory of the parent.
        unsafe {
            command.pre_exec(move || {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                limit.rlim_cur = (nofile as libc::rlim_t).min(limit.rlim_max);
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    // Reaped by the waitpid loop below, not by `Child::wait`: /proc/<pid> must be read
    // before the reaping, and the kill must happen while the pid is still ours.
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().expect("run crawler");
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    let mut killed = None;
    let mut peak_rss_mb: f64 = 0.0;
    loop {
        // Before reaping: a zombie has no memory figures, a reaped pid is not ours.
        if let Some((hwm, rss)) = memory_mb(pid) {
            peak_rss_mb = peak_rss_mb.max(hwm);
            if killed.is_none() && rss > RSS_KILL_MB {
                let _ = child.kill();
                killed = Some(format!("killed by the watchdog at {rss:.0} MB RSS"));
            }
        }
        if killed.is_none() && started.elapsed() > bound {
            let _ = child.kill();
            killed = Some(format!("killed at its {bound:?} bound"));
        }
        // SAFETY: `pid` is our child, reaped only here; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(rc >= 0, "waitpid: {}", std::io::Error::last_os_error());
        if rc == pid {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let out = dir.path().join("out");
    let run = Run {
        code,
        killed,
        elapsed,
        peak_rss_mb,
        records: read_records(&out),
        accepted: read_accepted(&out),
        summary: std::fs::read(out.join("summary.json"))
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok())
            .unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        log: server.log(),
        canary: server.canary_connections(),
        _dir: dir,
    };
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for r in &run.records {
        if let Some(e) = &r.error {
            *errors.entry(error_kind(e)).or_default() += 1;
        }
    }
    eprintln!(
        "hostile {name}: exit {:?}{}, {:.1} s, peak RSS {:.0} MB, {} records, {} requests, \
         canary {}, errors {errors:?}",
        run.code,
        run.killed
            .as_deref()
            .map_or(String::new(), |k| format!(" ({k})")),
        run.elapsed.as_secs_f64(),
        run.peak_rss_mb,
        run.records.len(),
        run.log.len(),
        run.canary,
    );
    run
}

/// An error message without its URLs, shortened: what the printed figures group by.
fn error_kind(error: &str) -> String {
    let words: Vec<&str> = error
        .split_whitespace()
        .map(|w| if w.contains("://") { "URL" } else { w })
        .collect();
    words.join(" ").chars().take(120).collect()
}

fn read_records(out: &Path) -> Vec<PageRecord> {
    std::fs::read_to_string(out.join("pages.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn read_accepted(out: &Path) -> Option<u64> {
    let text = std::fs::read(out.join("summary.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v["accepted"].as_u64()
}

/// What every hostile crawl must satisfy.
fn check(run: &Run, bound_rss_mb: f64) {
    let tail: String = run
        .stderr
        .lines()
        .rev()
        .take(5)
        .collect::<Vec<_>>()
        .join(" | ");
    assert!(
        run.killed.is_none(),
        "did not end by itself: {}; stderr: {tail}",
        run.killed.as_deref().unwrap_or_default()
    );
    assert!(
        matches!(run.code, Some(0 | 1)),
        "exit {:?}; stderr: {tail}",
        run.code
    );
    assert!(
        run.peak_rss_mb < bound_rss_mb,
        "peak RSS {:.0} MB (bound {bound_rss_mb} MB)",
        run.peak_rss_mb
    );
    assert_eq!(run.canary, 0, "the canary saw {} connections", run.canary);
    let mut urls = BTreeSet::new();
    for r in &run.records {
        assert!(urls.insert(r.url.as_str()), "recorded twice: {}", r.url);
    }
    assert_eq!(
        run.accepted,
        Some(run.records.len() as u64),
        "accepted vs recorded"
    );
    for r in run.log.iter().filter(|r| r.path != "/robots.txt") {
        assert!(
            urls.contains(r.url().as_str()),
            "requested but not recorded: {}",
            r.url()
        );
    }
}

/// The record of `h`'s home page, which must carry an error.
fn failed_home(run: &Run, h: Hostile) -> &PageRecord {
    let r = run.record(&h.seed());
    assert!(r.error.is_some(), "{}: no error recorded: {r:?}", h.seed());
    r
}

fn seeds(hosts: &[Hostile]) -> Vec<String> {
    hosts.iter().map(|h| h.seed()).collect()
}

const BOUND: Duration = Duration::from_secs(30);

#[test]
fn private_redirects_never_reach_the_canary() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let hosts = [Hostile::PrivateRedirect, Hostile::PrivateRobots];
    // `any` scope: the private-address rule, not the site rule, is what must stop them.
    let run = run(
        "private",
        &server,
        &seeds(&hosts),
        100,
        &["scope.mode=any"],
        BOUND,
    );
    check(&run, 300.0);
    let host = Hostile::PrivateRedirect.host();
    for path in ["/to-canary", "/to-metadata", "/to-localhost"] {
        let r = run.record(&format!("http://{host}{path}"));
        assert!(r.error.is_some(), "{path}: {r:?}");
    }
    // Nothing private was fetched (a refused URL may be recorded, never with a response).
    for r in &run.records {
        let url = url::Url::parse(&r.url).unwrap();
        let host = url.host_str().unwrap_or_default();
        if host == "127.0.0.1" || host == "169.254.169.254" || host == "localhost" {
            assert_eq!(r.status, None, "{r:?}");
        }
    }
    assert_eq!(
        run.requests(&Hostile::PrivateRobots.host(), "/robots.txt"),
        1
    );
    run.record(&Hostile::PrivateRobots.seed());
}

#[test]

fn huge_base_href_is_refused_before_building_urls() {
    // Seen today: exit None (killed by the watchdog at 2056 MB RSS) after 4.0 s, 0 records;
    // left alone it reached 20 GB in 30 s.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "huge-base",
        &server,
        &seeds(&[Hostile::HugeBase]),
        100,
        &["crawl.max_body_bytes=16777216"],
        BOUND,
    );
    check(&run, 300.0);
    let home = run.record(&Hostile::HugeBase.seed());
    assert_eq!(home.status, Some(200));
    // Every link resolves to a 4 MiB URL: none may be requested.
    let host = Hostile::HugeBase.host();
    let pages: Vec<&RequestRecord> = run
        .log
        .iter()
        .filter(|r| r.host == host && r.path != "/robots.txt")
        .collect();
    assert_eq!(pages.len(), 1, "{pages:?}");
}

#[test]

fn million_links_page_is_bounded() {
    // Seen before the byte budget: exit Some(0) with 100 records, but 14.9 s and peak RSS
    // 433 MB. The count cap (1,000,000) no longer stops this page early: its links are
    // bounded by bytes, 16 x its 25 MB + 1 MiB of resolved URLs (about 400 MB) at most;
    // measured 346 MB peak RSS for the whole (debug) crawler.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "million-links",
        &server,
        &seeds(&[Hostile::MillionLinks]),
        100,
        // The whole page (about 25 MB) is read, so every link is seen.
        &["crawl.max_body_bytes=67108864"],
        Duration::from_secs(60),
    );
    check(&run, 600.0);
    assert_eq!(run.records.len(), 100);
    let home = run.record(&Hostile::MillionLinks.seed());
    assert_eq!(home.status, Some(200));
    assert_eq!(home.links, u64::from(testweb::MILLION_LINKS));
}

/// A summary counter of `run`.
fn counter(run: &Run, name: &str) -> u64 {
    run.summary[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name} in summary.json: {}", run.summary))
}

/// Crawls `h`'s one page of `links` links with the defaults and `--max-urls 100`, and
/// checks that every link was taken: the record counts them all, none was lost to a count
/// cap, and past the 99 taken on each was refused only by `max_urls`. Fetching them all
/// would measure nothing more (each is a tiny page) and take minutes of CI; what this tests
/// is that nothing between the page and the frontier drops a link of a real-sized page.
fn one_page_taken_whole(h: Hostile, links: u64) {
    let server = hostile_server();
    let run = run(
        h.name(),
        &server,
        &seeds(&[h]),
        100,
        &[],
        Duration::from_secs(60),
    );
    check(&run, 500.0);
    let home = run.record(&h.seed());
    assert_eq!(home.status, Some(200));
    assert!(!home.truncated);
    assert_eq!(home.links, links, "links counts every link on the page");
    assert_eq!(counter(&run, "links_over_page_cap"), 0);
    assert_eq!(counter(&run, "accepted"), 100);
    assert_eq!(counter(&run, "links_over_cap"), links - 99);
    assert_eq!(home.duplicate_of, None);
}

#[test]
fn a_page_of_80000_links_is_taken_whole_with_the_defaults() {
    // Seen at 1725010: `links` 6000, 74,000 links over max_links_per_page.
    let _load = crate::support::ordinary();
    one_page_taken_whole(Hostile::WideIndex, u64::from(testweb::WIDE_INDEX_LINKS));
}

#[test]
fn a_list_of_50000_hosts_is_taken_whole_with_the_defaults() {
    // Seen at 1725010: 44,000 of the 50,000 hosts lost to max_links_per_page = 6000.
    let _load = crate::support::ordinary();
    one_page_taken_whole(Hostile::ManyHosts, u64::from(testweb::MANY_HOSTS));
}

#[test]
fn traps_end_within_ten_pages_each_with_the_defaults() {
    // Seen at 1725010 (max_depth 100): the calendar and the session spiral ran until
    // max_urls; with max_depth 1000 and no near-duplicate rule, 2 x 1000 pages each.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "traps",
        &server,
        &seeds(Hostile::TRAPS),
        10_000,
        &[],
        Duration::from_secs(60),
    );
    check(&run, 500.0);
    for h in Hostile::TRAPS {
        let host = h.host();
        let pages: Vec<&PageRecord> = run
            .records
            .iter()
            .filter(|r| r.url.starts_with(&format!("http://{host}/")))
            .collect();
        let urls: Vec<&str> = pages.iter().map(|r| r.url.as_str()).collect();
        assert!(pages.len() <= 10, "{host}: {} pages: {urls:?}", pages.len());
        assert!(pages.len() >= 2, "{host}: {urls:?}");
        // Each trap ended on a near-duplicate: the first page of its kind is named.
        let duplicate = pages
            .iter()
            .find_map(|r| r.duplicate_of.as_deref())
            .unwrap_or_else(|| panic!("{host}: no duplicate_of in {urls:?}"));
        assert!(urls.contains(&duplicate), "{host}: {duplicate} not crawled");
    }
    let calendar = |path: &str| run.record(&format!("http://{}{path}", Hostile::Calendar.host()));
    assert_eq!(calendar("/cal/2026/11").duplicate_of, None);
    for neighbour in ["/cal/2026/10", "/cal/2026/12"] {
        assert_eq!(
            calendar(neighbour).duplicate_of.as_deref(),
            Some(format!("http://{}/cal/2026/11", Hostile::Calendar.host()).as_str()),
            "{neighbour}"
        );
    }
    assert_eq!(
        counter(&run, "near_duplicate_pages"),
        run.records
            .iter()
            .filter(|r| r.duplicate_of.is_some())
            .count() as u64
    );
    assert!(counter(&run, "links_near_duplicate") > 0);
}

#[test]
fn huge_crawl_delay_is_deferred() {
    // Seen before politeness.max_crawl_delay_secs: the crawl fetched the home page and then
    // waited the 86,400 s (still running, 3 URLs queued, after 15 s). Now a host asking for
    // more than the limit is deferred: its URLs are recorded without a request.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "crawl-delay",
        &server,
        &seeds(&[Hostile::CrawlDelay]),
        100,
        &["politeness.max_crawl_delay_secs=1"],
        BOUND,
    );
    check(&run, 300.0);
    assert_eq!(run.records.len(), 1, "the home page, never fetched");
    let home = run.record(&Hostile::CrawlDelay.seed());
    assert_eq!(home.status, None);
    assert!(
        home.error.as_deref().is_some_and(
            |e| e.starts_with("deferred: robots.txt asks for a Crawl-delay of 86400 s")
        ),
        "{:?}",
        home.error
    );
    assert_eq!(run.requests(&Hostile::CrawlDelay.host(), "/"), 0);
}

#[test]
fn huge_retry_after_is_not_waited_for() {
    // Seen before politeness.max_crawl_delay_secs: the crawl got the 503 and waited the
    // 86,400 s to retry (still running, 1 URL queued, after 15 s). Now a Retry-After over
    // the limit ends the URL: recorded as a server error, not retried.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "retry-after",
        &server,
        &seeds(&[Hostile::RetryAfter]),
        100,
        &["crawl.retries=1", "politeness.max_crawl_delay_secs=1"],
        BOUND,
    );
    check(&run, 300.0);
    let home = failed_home(&run, Hostile::RetryAfter);
    assert_eq!(home.status, Some(503));
    assert_eq!(home.attempts, 1);
    assert!(home
        .error
        .as_deref()
        .is_some_and(|e| e.contains("Retry-After 86400 s")));
    assert_eq!(run.requests(&Hostile::RetryAfter.host(), "/"), 1);
}

#[test]
fn slowloris_headers_are_cut_by_the_timeout() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "slowloris",
        &server,
        &seeds(&[Hostile::Slowloris]),
        100,
        &["crawl.timeout_secs=2"],
        BOUND,
    );
    check(&run, 300.0);
    let home = failed_home(&run, Hostile::Slowloris);
    assert_eq!(home.status, None);
}

#[test]
fn endless_body_is_cut_at_max_body_bytes() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "endless-body",
        &server,
        &seeds(&[Hostile::EndlessBody]),
        100,
        &["crawl.max_body_bytes=1048576"],
        BOUND,
    );
    check(&run, 300.0);
    let home = run.record(&Hostile::EndlessBody.seed());
    assert!(home.truncated, "{home:?}");
    assert!(home.bytes <= 1 << 20, "{home:?}");
}

#[test]
fn compression_bombs_are_cut_after_decompression() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let hosts = [Hostile::GzipBomb, Hostile::BrotliBomb];
    let run = run(
        "bombs",
        &server,
        &seeds(&hosts),
        100,
        &["crawl.max_body_bytes=1048576"],
        BOUND,
    );
    check(&run, 300.0);
    for h in hosts {
        let home = run.record(&h.seed());
        assert!(home.truncated && home.bytes <= 1 << 20, "{home:?}");
    }
}

#[test]
fn endless_redirect_chain_is_cut() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "endless-redirect",
        &server,
        &seeds(&[Hostile::EndlessRedirect]),
        100,
        &["crawl.max_redirects=5"],
        BOUND,
    );
    check(&run, 300.0);
    let host = Hostile::EndlessRedirect.host();
    let hops = run
        .log
        .iter()
        .filter(|r| r.host == host && r.path != "/robots.txt")
        .count();
    // The seed and at most max_redirects hops (one more if the limit is checked on arrival).
    assert!((2..=7).contains(&hops), "{hops} requests along the chain");
    assert!(
        run.records
            .iter()
            .any(|r| r.error.as_deref().is_some_and(|e| e.contains("redirect"))),
        "no record says the chain was cut"
    );
}

#[test]
fn garbage_responses_are_recorded_once() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let hosts = [
        Hostile::GarbageStatus,
        Hostile::NoReason,
        Hostile::BadHeaderBytes,
        Hostile::NoColon,
        Hostile::NotHttp,
    ];
    let run = run("garbage", &server, &seeds(&hosts), 100, &[], BOUND);
    check(&run, 300.0);
    for h in hosts {
        let r = run.record(&h.seed());
        eprintln!(
            "  {}: status {:?}, error {:?}, links {}",
            h.seed(),
            r.status,
            r.error,
            r.links
        );
    }
    failed_home(&run, Hostile::NoColon);
    failed_home(&run, Hostile::NotHttp);
    assert_ne!(run.record(&Hostile::GarbageStatus.seed()).status, Some(200));
}

#[test]
fn invalid_encodings_are_decoded_leniently() {
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let hosts = [Hostile::ShiftJis, Hostile::LyingBom];
    let run = run("encodings", &server, &seeds(&hosts), 100, &[], BOUND);
    check(&run, 300.0);
    for h in hosts {
        assert_eq!(run.record(&h.seed()).status, Some(200));
    }
    // Invalid Shift_JIS bytes are replaced; the ASCII links between them survive.
    let host = Hostile::ShiftJis.host();
    run.record(&format!("http://{host}/sjis/1"));
    run.record(&format!("http://{host}/sjis/2"));
}

/// Crawls `hosts` of the `h{i}.many.hostile.test` hosts with the crawler's open-file limit
/// at 1024, the common default, and checks every one was fetched.
fn many_hosts(name: &str, hosts: u64) {
    let server = hostile_server();
    let max_urls = hosts + 1;
    let run = run_limited(
        name,
        &server,
        &seeds(&[Hostile::ManyHosts]),
        max_urls,
        &[],
        Duration::from_secs(60),
        Some(1024),
    );
    check(&run, 500.0);
    assert_eq!(run.records.len() as u64, max_urls);
    let failed: Vec<&PageRecord> = run
        .records
        .iter()
        .filter(|r| r.status != Some(200))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} hosts failed, e.g. {:?}",
        failed.len(),
        hosts,
        failed.first().and_then(|r| r.error.as_deref())
    );
}

#[test]
fn many_hosts_within_the_file_limit() {
    let _load = crate::support::ordinary();
    // Fewer hosts than descriptors: must work today, whatever the crawler keeps open.
    many_hosts("many-hosts-500", 500);
}

#[test]

fn many_hosts_beyond_the_file_limit() {
    // Seen today: exit Some(1), 17.8 s, peak RSS 50 MB; 3,992 of 5,000 hosts failed once
    // ~1,000 descriptors were open: "robots.txt: error sending request for url (…): client
    // error (Connect): tcp open error: Too many open files (os error 24); gave up after
    // repeated attempts".
    let _load = crate::support::ordinary();
    // 5,000 of the 20,000 hosts (all of them take half a minute of a debug build).
    many_hosts("many-hosts-5000", 5_000);
}

#[test]

fn all_hostile_hosts_together() {
    // Seen today: exit Some(2) at once: `--set politeness.max_crawl_delay_secs` is an unknown
    // key. Without that key: killed by the watchdog at 2052 MB RSS after 22.2 s, 3,076
    // requests served, the canary untouched.
    let _load = crate::support::ordinary();
    let server = hostile_server();
    let run = run(
        "all",
        &server,
        &seeds(Hostile::ALL),
        3_000,
        // Default max_body_bytes (10 MiB): the huge <base> and the million links are read
        // far enough to hurt.
        &["scope.mode=any", "politeness.max_crawl_delay_secs=1"],
        Duration::from_secs(60),
    );
    check(&run, 500.0);
    for h in Hostile::ALL {
        run.record(&h.seed());
    }
}
