//! `kill -9` at random moments, resume each time: no page is lost, and pages fetched twice
//! are no more than the fetches in flight at the kills. The moments are drawn from a seed
//! printed at the start (set `KILL_SEED` to replay a failure).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use testweb::{requests_per_url, CrawlRules, TestWebServer, Web, WebSpec};

const CONCURRENCY: usize = 8;

#[test]
fn kill_9_and_resume_loses_nothing() {
    let _load = crate::support::ordinary();
    let seed: u64 = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("kill_9_and_resume_loses_nothing: KILL_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let web = Arc::new(Web::new(WebSpec::small(61)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let (pattern, addr) = server.resolve_entry();
    let tempdir = tempfile::tempdir().unwrap();
    let dir = tempdir.path().to_path_buf();
    // KILL_KEEP=1 keeps the crawl's directory for a post-mortem.
    let _cleanup = if std::env::var_os("KILL_KEEP").is_some() {
        eprintln!("keeping {}", tempdir.keep().display());
        None
    } else {
        Some(tempdir)
    };
    std::fs::write(dir.as_path().join("seeds.txt"), web.seeds().join("\n")).unwrap();
    let resolve = format!("network.resolve.\"{pattern}\"={addr}");
    let concurrency = CONCURRENCY.to_string();
    let args = [
        "--seeds",
        "seeds.txt",
        "--max-urls",
        "1e6",
        "--out",
        "out",
        "--progress",
        "quiet",
        "--concurrency",
        concurrency.as_str(),
        "--set",
        resolve.as_str(),
        "--set",
        "politeness.per_host_rps=40",
        "--set",
        "crawl.retries=1",
        "--set",
        "checkpoint.interval_secs=0.5",
    ];
    let mut kills = 0;
    let mut resume = false;
    loop {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
        command
            .args(args)
            .current_dir(dir.as_path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if _cleanup.is_none() {
            // Kept for a post-mortem: each run's log beside the output.
            let log = std::fs::File::create(dir.join(format!("run-{kills}.log"))).unwrap();
            command.env("RUST_LOG", "crawler=debug").stderr(log);
        }
        if resume {
            command.arg("--resume");
        }
        let mut child = command.spawn().unwrap();
        if kills == 4 {
            let o = child.wait_with_output().unwrap();
            assert!(
                matches!(o.status.code(), Some(0) | Some(1)),
                "final run: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        // A kill before the first checkpoint leaves nothing to resume (the crawler then
        // says so and exits 2, rightly): on a loaded machine start-up alone can outlast
        // the drawn moment, so the first kill waits for the first checkpoint.
        let manifest = dir.join("out/checkpoint/manifest.json");
        let waited = std::time::Instant::now();
        while !resume
            && !manifest.exists()
            && waited.elapsed() < Duration::from_secs(30)
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_some() {
            // Finished before the kill: nothing left to resume.
            let o = child.wait_with_output().unwrap();
            assert!(
                matches!(o.status.code(), Some(0) | Some(1)),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        resume = true;
    }
    assert!(kills >= 1, "the crawl was never killed (seed {seed})");

    let truth = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            retries: 1,
            full_normalization: true,
            ..CrawlRules::default()
        },
    );
    let log = server.log();
    let diff = truth.diff_log(&log);
    assert!(
        diff.missing.is_empty(),
        "seed {seed}, {kills} kills: {diff}"
    );
    assert!(
        diff.unexpected.is_empty(),
        "seed {seed}, {kills} kills: {diff}"
    );
    // Requests beyond the expected ones: pages in flight at a kill, fetched again.
    let expected = truth.expected_requests();
    let actual: BTreeMap<String, u32> = requests_per_url(&log);
    let extra: u32 = actual
        .iter()
        .map(|(url, n)| n.saturating_sub(*expected.get(url).unwrap_or(&0)))
        .sum();
    assert!(
        extra as usize <= kills * CONCURRENCY,
        "seed {seed}: {extra} extra requests after {kills} kills (at most {} in flight each)",
        CONCURRENCY
    );
    let pages = std::fs::read_to_string(dir.as_path().join("out/pages.jsonl")).unwrap();
    let mut urls = BTreeSet::new();
    for line in pages.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("seed {seed}: bad record {line:?}: {e}"));
        let url = v["url"].as_str().unwrap().to_string();
        assert!(
            urls.insert(url.clone()),
            "seed {seed}: recorded twice: {url}"
        );
    }
    assert_eq!(urls, truth.discovered(), "seed {seed}");
    eprintln!("{kills} kills, {extra} pages fetched twice");
}
