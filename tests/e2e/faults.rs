//! A panic in a fetch task or a parse thread costs one URL, never the crawl: the URL is
//! recorded with the panic's message and counted, every other accepted URL is still
//! recorded, and the crawl finishes (exit code 1: it had a failure). Faults are injected on
//! a chosen URL with the debug build's `CRAWLER_FAULT` switch.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawler::output::PageRecord;
use testweb::{CrawlRules, PageKind, TestWebServer, Web, WebSpec};

fn crawl_with_fault(fault: &str, pick: impl Fn(&testweb::ExpectedPage) -> bool) {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(71)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let (pattern, addr) = server.resolve_entry();
    let rules = CrawlRules {
        respect_robots: false,
        ..CrawlRules::default()
    };
    let truth = web.ground_truth(&web.seeds(), &rules);
    // The deepest page of the kind wanted: few pages depend on it being parsed.
    let victim = truth
        .pages()
        .filter(|p| pick(p))
        .max_by_key(|p| (p.depth, p.url.clone()))
        .expect("a page to break")
        .url
        .clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seeds.txt"), web.seeds().join("\n")).unwrap();
    let resolve = format!("network.resolve.\"{pattern}\"={addr}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_crawler"))
        .args(["--seeds", "seeds.txt", "--max-urls", "1e5", "--out", "out"])
        .args(["--progress", "quiet", "--set", &resolve])
        .args(["--set", "politeness.respect_robots=false"])
        .args([
            "--set",
            "politeness.per_host_rps=1000",
            "--set",
            "politeness.per_host_burst=100",
        ])
        .args(["--set", "crawl.retries=1"])
        // The ground truth's (CrawlRules::default) depth: keeps the endless calendar short.
        .args(["--set", "crawl.max_depth=16"])
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .env("CRAWLER_FAULT", format!("{fault}:{victim}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A crawl that a panic stalls never ends: give it far more than it needs, then fail.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{fault}: the crawl did not end within 120 s (a URL stuck in flight?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failure, not a hang or a crash: {stderr}"
    );
    let text = std::fs::read_to_string(dir.path().join("out/pages.jsonl")).unwrap();
    let records: Vec<PageRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let urls: BTreeSet<&str> = records.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(urls.len(), records.len(), "no URL recorded twice");
    let broken: Vec<&PageRecord> = records
        .iter()
        .filter(|r| r.error.as_deref().is_some_and(|e| e.contains("panicked")))
        .collect();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].url, victim);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["panics"], 1);
    assert_eq!(summary["stopped"], false);
    assert_eq!(
        summary["accepted"],
        records.len() as u64,
        "every accepted URL recorded"
    );
    // The rest of the web was crawled: everything recorded is in the ground truth, and
    // almost all of it is there (only pages reachable solely through the victim's links
    // can be missing).
    for url in &urls {
        assert!(truth.get(url).is_some(), "{url} is not in the web");
    }
    assert!(
        records.len() * 10 >= truth.len() * 9,
        "{} of {} pages recorded",
        records.len(),
        truth.len()
    );
    eprintln!(
        "{fault}: {} of {} pages recorded, victim {victim}",
        records.len(),
        truth.len()
    );
}

#[test]
fn a_panic_while_fetching_costs_one_url() {
    crawl_with_fault("panic-fetch", |p| p.kind == PageKind::Tree && p.depth > 0);
}

#[test]
fn a_panic_while_parsing_costs_one_url() {
    crawl_with_fault("panic-parse", |p| {
        p.kind == PageKind::Tree && p.depth > 0 && p.status == Some(200)
    });
}
