//! Stopping and resuming: nothing discovered is forgotten, nothing is fetched twice after
//! a clean stop, damaged checkpoints are reported (and the previous one used), and an
//! incompatible resume is refused with what differs.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crawler::checkpoint::{self, CheckpointError};
use crawler::config::Config;
use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, CrawlSummary, ShutdownHandle};
use testweb::{TestWebServer, Web, WebSpec};
use url::Url;

use crate::support::{config_for, records, rules_for};

fn run(
    config: &Config,
    seeds: &[String],
    stop_after: Option<Duration>,
    resume: Option<checkpoint::Loaded>,
) -> Result<CrawlSummary, crawler::crawl::CrawlError> {
    let shutdown = ShutdownHandle::new();
    if let Some(after) = stop_after {
        let stopper = shutdown.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            stopper.stop();
        });
    }
    run_until(config, seeds, shutdown, resume)
}

/// Runs a crawl until it ends or `shutdown` is stopped.
fn run_until(
    config: &Config,
    seeds: &[String],
    shutdown: ShutdownHandle,
    resume: Option<checkpoint::Loaded>,
) -> Result<CrawlSummary, crawler::crawl::CrawlError> {
    let seeds: Vec<Url> = seeds.iter().map(|s| Url::parse(s).unwrap()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run_crawl(CrawlRequest {
        config: config.clone(),
        seeds,
        progress: ProgressMode::Quiet,
        shutdown,
        resume,
    }))
}

/// A crawl slow enough to be stopped in the middle: 20 requests per second per host.
fn slow_config(server: &TestWebServer, out: &Path) -> Config {
    let mut config = config_for(server, out, true);
    config.politeness.per_host_rps = 20.0;
    config.politeness.per_host_burst = 1;
    config.checkpoint.interval_secs = 0.2;
    config
}

#[test]
fn stop_then_resume_fetches_everything_once() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(31)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = slow_config(&server, out.path());
    let mut stops = 0;
    let mut summary = run(
        &config,
        &web.seeds(),
        Some(Duration::from_millis(700)),
        None,
    )
    .unwrap();
    while summary.stopped {
        stops += 1;
        // Each run crawls for what is left of its 700 ms after its start and its first
        // checkpoint (published before its first request: ~200 ms on a loaded machine).
        assert!(stops < 40, "never finished");
        let loaded = checkpoint::load(out.path()).unwrap();
        assert!(loaded.fell_back.is_none());
        assert!(!loaded.manifest.finished);
        summary = run(
            &config,
            &web.seeds(),
            Some(Duration::from_millis(700)),
            Some(loaded),
        )
        .unwrap();
    }
    assert!(
        stops >= 2,
        "the crawl was stopped and resumed ({stops} times)"
    );
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "after {stops} stops: {diff}");
    let records = records(out.path());
    let mut urls = BTreeSet::new();
    for r in &records {
        assert!(urls.insert(r.url.clone()), "recorded twice: {}", r.url);
    }
    assert_eq!(urls, truth.discovered());
    assert_eq!(summary.counts.accepted, truth.discovered().len() as u64);
    let manifest = checkpoint::current_manifest(out.path()).unwrap().unwrap();
    assert!(manifest.finished);
    assert_eq!(manifest.frontier.expect("frontier position").queued, 0);
}

/// A stopped crawl with at least two checkpoints on disk that both hold pages: stopped
/// 700 ms in, or later on a loaded machine, once two checkpoints were taken after the
/// server answered 30 requests (a fixed moment could come before any page was recorded).
fn stopped_crawl(seed: u64) -> (tempfile::TempDir, Config, Vec<String>) {
    let web = Arc::new(Web::new(WebSpec::small(seed)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = slow_config(&server, out.path());
    let shutdown = ShutdownHandle::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    let summary = std::thread::scope(|scope| {
        let stopper = shutdown.clone();
        let (server, out, done) = (&server, out.path(), &done);
        scope.spawn(move || {
            let started = std::time::Instant::now();
            let seq = || {
                checkpoint::current_manifest(out)
                    .and_then(|m| m.ok())
                    .map(|m| m.seq)
            };
            let mut after_pages = None;
            while started.elapsed() < Duration::from_secs(30)
                && !done.load(std::sync::atomic::Ordering::Relaxed)
            {
                if after_pages.is_none() && server.request_count() >= 30 {
                    after_pages = Some(seq().unwrap_or(0));
                }
                let enough = after_pages.is_some_and(|s| seq().is_some_and(|now| now >= s + 2));
                if enough && started.elapsed() >= Duration::from_millis(700) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            stopper.stop();
        });
        let summary = run_until(&config, &web.seeds(), shutdown, None);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        summary.unwrap()
    });
    assert!(summary.stopped);
    assert!(out.path().join("checkpoint/manifest.prev.json").exists());
    (out, config, web.seeds())
}

fn current_dir(out: &Path) -> std::path::PathBuf {
    let m = checkpoint::current_manifest(out).unwrap().unwrap();
    out.join(format!("checkpoint/ckpt-{}", m.seq))
}

/// The queue store's table of the checkpoint in `ckpt` (`OUT/checkpoint/ckpt-N`).
fn queue_table(ckpt: &Path) -> std::path::PathBuf {
    let out = ckpt.parent().unwrap().parent().unwrap();
    let m = checkpoint::current_manifest(out).unwrap().unwrap();
    let generation = m.frontier.unwrap().store.generation;
    out.join(format!("frontier/queues/table-{generation:016}.bin"))
}

fn flip_byte(path: &Path, at_fraction: f64) {
    let mut bytes = std::fs::read(path).unwrap();
    let i = ((bytes.len() as f64 * at_fraction) as usize).min(bytes.len() - 1);
    bytes[i] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn every_damaged_checkpoint_file_is_named_and_the_previous_one_used() {
    let _load = crate::support::ordinary();
    type Damage = fn(&Path);
    let cases: &[(&str, Damage, &str)] = &[
        (
            "hosts byte",
            |d| flip_byte(&d.join("hosts.bin"), 0.5),
            "hosts.bin is corrupt: checksum mismatch",
        ),
        (
            "hosts truncated",
            |d| {
                let p = d.join("hosts.bin");
                let len = std::fs::metadata(&p).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap();
            },
            "hosts.bin is corrupt",
        ),
        (
            "queue table byte",
            |d| flip_byte(&queue_table(d), 0.5),
            "table-",
        ),
        (
            "queue table missing",
            |d| std::fs::remove_file(queue_table(d)).unwrap(),
            "table-",
        ),
        (
            "seen byte",
            |d| flip_byte(&d.join("seen.bin"), 0.7),
            "seen.bin",
        ),
        (
            "seen truncated",
            |d| {
                let p = d.join("seen.bin");
                let len = std::fs::metadata(&p).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len - 100)
                    .unwrap();
            },
            "seen.bin",
        ),
        (
            "seen missing",
            |d| std::fs::remove_file(d.join("seen.bin")).unwrap(),
            "seen.bin",
        ),
    ];
    for (name, damage, needle) in cases {
        let (out, _, _) = stopped_crawl(41);
        damage(&current_dir(out.path()));
        let loaded = checkpoint::load(out.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let why = loaded
            .fell_back
            .expect("fell back to the previous checkpoint");
        assert!(why.contains(needle), "{name}: {why}");
    }
    // The manifest itself: garbage, and an unknown version.
    let (out, _, _) = stopped_crawl(42);
    let manifest = out.path().join("checkpoint/manifest.json");
    std::fs::write(&manifest, b"{ not json").unwrap();
    let why = checkpoint::load(out.path()).unwrap().fell_back.unwrap();
    assert!(
        why.contains("manifest.json: not a checkpoint manifest"),
        "{why}"
    );
    let (out, _, _) = stopped_crawl(43);
    let manifest = out.path().join("checkpoint/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            &format!("\"format_version\": {}", checkpoint::FORMAT_VERSION),
            "\"format_version\": 9",
        ),
    )
    .unwrap();
    let why = checkpoint::load(out.path()).unwrap().fell_back.unwrap();
    assert!(why.contains("version 9"), "{why}");
    // Both damaged: an error, never a half-loaded state.
    let (out, _, _) = stopped_crawl(44);
    let root = out.path().join("checkpoint");
    std::fs::write(root.join("manifest.json"), b"x").unwrap();
    std::fs::write(root.join("manifest.prev.json"), b"y").unwrap();
    let e = checkpoint::load(out.path()).err().expect("refused");
    assert!(
        e.to_string().contains("previous checkpoint is not usable"),
        "{e}"
    );
}

#[test]
fn incompatible_resume_says_what_differs() {
    let _load = crate::support::ordinary();
    let (out, config, seeds) = stopped_crawl(45);
    let mut changed = config.clone();
    changed.crawl.max_urls = crawler::config::Count(123_456);
    let loaded = checkpoint::load(out.path()).unwrap();
    let e = run(&changed, &seeds, None, Some(loaded)).expect_err("refused");
    let text = chain(&e);
    // Blamed on max_urls alone: the seen-set keeps the size it was given.
    assert!(
        text.contains(": max_urls was 1000000, now 123456: a crawl can be extended, not shrunk;"),
        "{text}"
    );
    assert!(!text.contains("seen-set"), "{text}");
    let file = out.path().join("changed.toml");
    std::fs::write(&file, config.to_toml()).unwrap();
    let changed = crawler::config::Config::load(Some(&file), &["seen.fpp=0.01".into()]).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    let e = run(&changed, &seeds, None, Some(loaded)).expect_err("refused");
    let text = chain(&e);
    assert!(text.contains("([seen] fpp/memory changed)"), "{text}");
    assert!(!text.contains("max_urls"), "{text}");
    let loaded = checkpoint::load(out.path()).unwrap();
    let e = run(&config, &seeds[..1], None, Some(loaded)).expect_err("refused");
    assert!(chain(&e).contains("seed list differs"), "{e}");
    assert!(matches!(
        checkpoint::load(&out.path().join("nowhere")),
        Err(CheckpointError::Missing { .. })
    ));
}

#[test]
fn damaged_queue_log_and_short_output_are_reported() {
    let _load = crate::support::ordinary();
    // A bad line inside the queue log (not a torn end) is damage, in a log that the previous
    // checkpoint would replay too: that line is skipped and named, the rest is used.
    let (out, _, _) = stopped_crawl(46);
    let m = checkpoint::current_manifest(out.path()).unwrap().unwrap();
    let log = checkpoint::queue_log_path(out.path(), m.seq);
    let good =
        r#"{"url":"http://h0.test/extra","depth":1,"parent":null,"redirect_hops":0,"attempts":0}"#;
    std::fs::write(&log, format!("{{not json\n{good}\n")).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    assert!(loaded.fell_back.is_none());
    assert_eq!(loaded.manifest.seq, m.seq);
    assert_eq!(loaded.replayed_urls, 1);
    assert_eq!(loaded.damage.len(), 1, "{:?}", loaded.damage);
    let named = format!("queued-{}.jsonl: line 1", m.seq);
    assert!(loaded.damage[0].contains(&named), "{:?}", loaded.damage);
    // The same in the output past the checkpoint: cut there, the records after it are
    // fetched again (their URLs are queued at the checkpoint or in its queue log).
    let pages = out.path().join("pages.jsonl");
    let before = std::fs::read(&pages).unwrap();
    let last = before[..before.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let mut damaged = before.clone();
    damaged.extend_from_slice(b"{\"url\": garbage\n");
    damaged.extend_from_slice(&before[last..]);
    std::fs::write(&pages, &damaged).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.output.bytes, before.len() as u64);
    assert!(
        loaded.damage.iter().any(|d| d.contains("pages.jsonl")),
        "{:?}",
        loaded.damage
    );
    std::fs::write(&pages, &before).unwrap();
    // A torn last line is the crash itself: cut, and the complete lines replayed.
    std::fs::write(&log, format!("{good}\n{{\"url\":\"http://h0.te")).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.replayed_urls, 1);
    assert!(loaded
        .queued_after
        .iter()
        .any(|i| i.url == "http://h0.test/extra"));
    assert!(loaded.seen.contains(b"http://h0.test/extra"));

    // pages.jsonl shorter than both checkpoints say: damaged output, refused.
    let (out, _, _) = stopped_crawl(47);
    let pages = out.path().join("pages.jsonl");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pages)
        .unwrap()
        .set_len(10)
        .unwrap();
    let e = checkpoint::load(out.path()).err().expect("refused");
    assert!(e.to_string().contains("pages.jsonl"), "{e}");
}

/// An error and its causes on one line, as the CLI prints them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// URLs ever queued for `host_key` as the current checkpoint's `hosts.bin` records them
/// (format in `crawler::frontier::snapshot`).
fn checkpointed_tally(out: &Path, host_key: &str) -> u32 {
    let bytes = std::fs::read(current_dir(out).join("hosts.bin")).unwrap();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let id = crawler::frontier::host_id(host_key);
    (0..word(16) as usize)
        .map(|i| 32 + i * 12)
        .find(|&at| word(at) == id)
        .map_or(0, |at| {
            u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap())
        })
}

/// `n` URLs of `host` queued after the current checkpoint and recorded (a crawl killed after
/// they were fetched, before the next checkpoint): in its queue log and in `pages.jsonl`.
fn queued_and_recorded_after_checkpoint(out: &Path, host: &str, n: usize) {
    use std::io::Write;
    let m = checkpoint::current_manifest(out).unwrap().unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(checkpoint::queue_log_path(out, m.seq))
        .unwrap();
    let mut pages = std::fs::OpenOptions::new()
        .append(true)
        .open(out.join("pages.jsonl"))
        .unwrap();
    for i in 0..n {
        let url = format!("{host}/after-the-checkpoint/{i}");
        let item = crawler::frontier::QueuedUrl {
            url: url.clone(),
            depth: 1,
            parent: None,
            redirect_hops: 0,
            attempts: 0,
        };
        writeln!(log, "{}", serde_json::to_string(&item).unwrap()).unwrap();
        let record = crawler::output::PageRecord {
            url,
            status: Some(404),
            depth: 1,
            fetched_at: "2026-11-23T00:00:00.000Z".into(),
            elapsed_ms: 1,
            attempts: 1,
            ..Default::default()
        };
        writeln!(pages, "{}", serde_json::to_string(&record).unwrap()).unwrap();
    }
}

/// `scope.max_pages_per_host` holds across a crash: the URLs a resume replays from the
/// queue log count for their host, the ones recorded since the checkpoint included.
#[test]
fn max_pages_per_host_holds_across_a_crash() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(48)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = slow_config(&server, out.path());
    let summary = run(
        &config,
        &web.seeds(),
        Some(Duration::from_millis(300)),
        None,
    )
    .unwrap();
    assert!(summary.stopped);
    let host = "http://h0.test";
    let tally = checkpointed_tally(out.path(), host);
    assert!(tally > 0);
    // Ten more of h0's URLs were queued and fetched after the checkpoint: the host is at
    // its cap when the crawl resumes.
    queued_and_recorded_after_checkpoint(out.path(), host, 10);
    let cap = u64::from(tally) + 10;
    config.scope.max_pages_per_host = cap;
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.replayed_records, 10);
    run(&config, &web.seeds(), None, Some(loaded)).unwrap();
    let records = records(out.path());
    let mut urls = BTreeSet::new();
    for r in &records {
        assert!(urls.insert(r.url.clone()), "recorded twice: {}", r.url);
    }
    let on_host = urls.iter().filter(|u| u.starts_with(host)).count() as u64;
    assert!(
        on_host <= cap,
        "{on_host} pages of {host} recorded, max_pages_per_host = {cap} ({tally} queued at the checkpoint)"
    );
}

/// A record past the checkpoint whose page's links are not all in the queue log (a power
/// loss can keep the one and lose the other: only checkpoints are fsynced at once) is not
/// trusted: the output is cut there and the page fetched again, so no link is lost.
#[test]
fn a_record_whose_links_were_lost_is_fetched_again() {
    let _load = crate::support::ordinary();
    use std::io::Write;
    let (out, _, _) = stopped_crawl(49);
    let m = checkpoint::current_manifest(out.path()).unwrap().unwrap();
    let pages = out.path().join("pages.jsonl");
    let length = std::fs::metadata(&pages).unwrap().len();
    assert_eq!(length, m.pages_bytes);
    let record = crawler::output::PageRecord {
        url: "http://h0.test/after-the-checkpoint".into(),
        status: Some(200),
        content_type: Some("text/html".into()),
        bytes: 100,
        depth: 1,
        links: 3,
        new_links: 2,
        fetched_at: "2026-11-23T00:00:00.000Z".into(),
        elapsed_ms: 1,
        attempts: 1,
        ..Default::default()
    };
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&pages)
        .unwrap();
    writeln!(file, "{}", serde_json::to_string(&record).unwrap()).unwrap();
    // Its two new links never reached the queue log.
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.replayed_records, 0);
    assert_eq!(loaded.output.bytes, m.pages_bytes);
    assert!(
        loaded
            .damage
            .iter()
            .any(|d| d.contains("after-the-checkpoint")),
        "{:?}",
        loaded.damage
    );
    // One of the two is there: still not enough.
    let log = checkpoint::queue_log_path(out.path(), m.seq);
    let child = r#"{"url":"http://h0.test/child","depth":2,"parent":"http://h0.test/after-the-checkpoint","redirect_hops":0,"attempts":0}"#;
    std::fs::write(&log, format!("{child}\n")).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.replayed_records, 0);
    // Both: the record stands.
    let other = child.replace("/child", "/other");
    std::fs::write(&log, format!("{child}\n{other}\n")).unwrap();
    let loaded = checkpoint::load(out.path()).unwrap();
    assert_eq!(loaded.replayed_records, 1);
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
}

/// The rate limiters are not checkpointed: after a resume, each host's first request waits
/// one rate period, so it never follows the last one before the stop too closely.
#[test]
fn the_first_request_after_a_resume_keeps_the_rate() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(50)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = slow_config(&server, out.path());
    config.politeness.per_host_rps = 1.0;
    config.crawl.shutdown_grace_secs = 5.0;
    let period = Duration::from_secs(1);
    let summary = run(
        &config,
        &web.seeds(),
        Some(Duration::from_millis(1500)),
        None,
    )
    .unwrap();
    assert!(summary.stopped);
    let before = server.log().len();
    let loaded = checkpoint::load(out.path()).unwrap();
    run(
        &config,
        &web.seeds(),
        Some(Duration::from_millis(2500)),
        Some(loaded),
    )
    .unwrap();
    let log = server.log();
    let (first_run, second_run) = log.split_at(before);
    let mut checked = 0;
    for host in (0..web.host_count()).map(|h| format!("h{h}.test")) {
        let last = first_run
            .iter()
            .filter(|r| r.host == host)
            .map(|r| r.started)
            .max();
        let next = second_run
            .iter()
            .filter(|r| r.host == host)
            .map(|r| r.started)
            .min();
        if let (Some(last), Some(next)) = (last, next) {
            checked += 1;
            // 50 ms of slack for the requests' travel and the server's clock readings.
            assert!(
                next - last >= period - Duration::from_millis(50),
                "{host}: a request {:?} after the last one before the stop (rate: one per {period:?})",
                next - last
            );
        }
    }
    assert!(checked >= 3, "{checked} hosts requested in both runs");
}

/// A seen-set file rewritten whole, with its own checksum recomputed (another hash seed, or
/// another crawl's file), is not this checkpoint's: the manifest records the file's checksum
/// and seed, and the previous checkpoint is used.
#[test]
fn a_rewritten_seen_file_is_refused_even_with_a_valid_checksum() {
    let _load = crate::support::ordinary();
    for (name, offset) in [("seed", 20), ("bits", 200)] {
        let (out, _, _) = stopped_crawl(51);
        let path = current_dir(out.path()).join("seen.bin");
        let mut bytes = std::fs::read(&path).unwrap();
        let body = bytes.len() - 8;
        bytes[offset] ^= 0x01;
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[..body]);
        bytes[body..].copy_from_slice(&checksum.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let loaded = checkpoint::load(out.path()).unwrap();
        let why = loaded
            .fell_back
            .unwrap_or_else(|| panic!("{name}: the rewritten seen.bin was used"));
        assert!(why.contains("seen.bin"), "{name}: {why}");
    }
}
