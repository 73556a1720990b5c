//! The `crawler` binary killed and resumed: `kill -9` at random moments (the moments drawn
//! from a seed printed at the start; set `KILL_SEED` to replay a failure), and crashes at
//! chosen instants through the test-only fault points ([`crawler::checkpoint::fault`]).
//! After each, the resumed crawl must fetch exactly what the ground truth says: every page,
//! nothing unexpected, no page requested fewer times than expected, and pages requested
//! again only for the fetches a kill could interrupt.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawler::checkpoint;
use rand::{Rng, SeedableRng};
use testweb::{requests_per_url, CrawlRules, TestWebServer, Web, WebSpec};

const CONCURRENCY: usize = 8;

/// A crawl of a synthetic web by the `crawler` binary, in a directory of its own.
struct CliCrawl {
    web: Arc<Web>,
    server: TestWebServer,
    dir: PathBuf,
    args: Vec<String>,
    /// Removed at the end unless `KILL_KEEP` is set (for a post-mortem).
    _temp: Option<tempfile::TempDir>,
}

impl CliCrawl {
    /// `settings` are `--set` overrides on top of the common ones.
    fn new(spec: WebSpec, seeds: Option<Vec<String>>, settings: &[&str]) -> CliCrawl {
        let web = Arc::new(Web::new(spec));
        let server = TestWebServer::start(web.clone()).unwrap();
        let (pattern, addr) = server.resolve_entry();
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().to_path_buf();
        let temp = if std::env::var_os("KILL_KEEP").is_some() {
            eprintln!("keeping {}", temp.keep().display());
            None
        } else {
            Some(temp)
        };
        let seeds = seeds.unwrap_or_else(|| web.seeds());
        std::fs::write(dir.join("seeds.txt"), seeds.join("\n")).unwrap();
        let mut args: Vec<String> = [
            "--seeds",
            "seeds.txt",
            "--max-urls",
            "1e6",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--concurrency",
            &CONCURRENCY.to_string(),
            "--set",
            &format!("network.resolve.\"{pattern}\"={addr}"),
            "--set",
            "crawl.retries=1",
            // The ground truth's (CrawlRules::default) depth: keeps the endless calendar
            // short.
            "--set",
            "crawl.max_depth=16",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for setting in settings {
            args.push("--set".into());
            args.push(setting.to_string());
        }
        CliCrawl {
            web,
            server,
            dir,
            args,
            _temp: temp,
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    /// The command of a run; `run` numbers its log file when the directory is kept.
    fn command(&self, resume: bool, fault: Option<&str>, run: usize) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
        command
            .args(&self.args)
            .current_dir(&self.dir)
            .env("RUST_LOG", "warn")
            .env_remove(checkpoint::fault::VARIABLE)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if self._temp.is_none() {
            let log = std::fs::File::create(self.dir.join(format!("run-{run}.log"))).unwrap();
            command.env("RUST_LOG", "crawler=debug").stderr(log);
        }
        if resume {
            command.arg("--resume");
        }
        if let Some(fault) = fault {
            command.env(checkpoint::fault::VARIABLE, fault);
        }
        command
    }

    /// Runs to the end (or to the fault).
    fn run(&self, resume: bool, fault: Option<&str>, run: usize) -> Output {
        self.command(resume, fault, run).output().unwrap()
    }

    /// Resumes to the end, which must be a normal one.
    fn finish(&self, run: usize) {
        let o = self.run(true, None, run);
        assert!(
            matches!(o.status.code(), Some(0) | Some(1)),
            "final run: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn truth(&self) -> testweb::GroundTruth {
        self.web.ground_truth(
            &self.web.seeds(),
            &CrawlRules {
                retries: 1,
                full_normalization: true,
                ..CrawlRules::default()
            },
        )
    }

    /// Checks the crawl against the ground truth, exactly: every page recorded once, every
    /// expected request made at least as often as expected, nothing else requested. Returns
    /// the requests made beyond the expected ones (pages fetched again after a kill).
    fn check(&self, what: &str) -> u32 {
        let truth = self.truth();
        let log = self.server.log();
        let diff = truth.diff_log(&log);
        assert!(diff.missing.is_empty(), "{what}: {diff}");
        assert!(diff.unexpected.is_empty(), "{what}: {diff}");
        let expected = truth.expected_requests();
        let actual: BTreeMap<String, u32> = requests_per_url(&log);
        let mut extra = 0;
        for (url, &want) in &expected {
            let got = actual.get(url).copied().unwrap_or(0);
            assert!(
                got >= want,
                "{what}: {url} requested {got}×, expected {want}× (a retry or a page lost)"
            );
            extra += got - want;
        }
        let pages = std::fs::read_to_string(self.out().join("pages.jsonl")).unwrap();
        let mut urls = BTreeSet::new();
        for line in pages.lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: bad record {line:?}: {e}"));
            let url = v["url"].as_str().unwrap().to_string();
            assert!(urls.insert(url.clone()), "{what}: recorded twice: {url}");
        }
        assert_eq!(urls, truth.discovered(), "{what}");
        extra
    }
}

fn killed(o: &Output) -> bool {
    o.status.signal() == Some(9)
}

/// Kills and resumes up to `max_kills` times, each run killed after a random number of
/// milliseconds in `run_ms`, then lets the crawl finish; returns the kills made and the pages
/// fetched again. `rps` is the per-host rate (the crawl must last long enough).
fn kill_and_resume(
    seed: u64,
    max_kills: usize,
    rps: u32,
    run_ms: std::ops::Range<u64>,
) -> (usize, u32) {
    let rate = format!("politeness.per_host_rps={rps}");
    let crawl = CliCrawl::new(
        WebSpec::small(61),
        None,
        &[rate.as_str(), "checkpoint.interval_secs=0.5"],
    );
    let kills = kill_until_done(&crawl, seed, max_kills, run_ms);
    let extra = crawl.check(&format!("seed {seed}, {kills} kills"));
    // Pages fetched again: those in flight at a kill (CONCURRENCY at most), and those whose
    // record had not reached the OS yet (see the module doc of `crawler::checkpoint`).
    assert!(
        extra as usize <= kills * CONCURRENCY,
        "seed {seed}: {extra} extra requests after {kills} kills (at most {CONCURRENCY} in flight each)"
    );
    (kills, extra)
}

/// Runs `crawl`, killing it (`kill -9`) and resuming it up to `max_kills` times, each run
/// killed after a random number of milliseconds in `run_ms` (drawn from `seed`), then lets
/// it finish. Returns the kills made (at least one, or the test fails).
fn kill_until_done(
    crawl: &CliCrawl,
    seed: u64,
    max_kills: usize,
    run_ms: std::ops::Range<u64>,
) -> usize {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut kills = 0;
    loop {
        let mut child = crawl.command(kills > 0, None, kills).spawn().unwrap();
        if kills == max_kills {
            let o = child.wait_with_output().unwrap();
            assert!(
                matches!(o.status.code(), Some(0) | Some(1)),
                "seed {seed}, final run: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(run_ms.clone())));
        // A kill before the first checkpoint (published before the first request) leaves
        // nothing to resume (the crawler then says so and exits 2, rightly): on a loaded
        // machine start-up alone can outlast the drawn moment, so the first kill waits for
        // the first checkpoint.
        let manifest = crawl.out().join("checkpoint/manifest.json");
        let waited = Instant::now();
        while kills == 0
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
                "seed {seed}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Killed after its last checkpoint said "finished" and before it exited: the crawl
        // was done, there is nothing to resume (the crawler refuses `--resume` then, rightly).
        if crate::support::manifest_says_finished(&manifest) {
            break;
        }
        kills += 1;
    }
    assert!(kills >= 1, "the crawl was never killed (seed {seed})");
    kills
}

fn kill_seed(test: &str) -> u64 {
    let seed = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{test}: KILL_SEED={seed}");
    seed
}

#[test]
fn kill_9_and_resume_loses_nothing() {
    let _load = crate::support::ordinary();
    let seed = kill_seed("kill_9_and_resume_loses_nothing");
    let (kills, extra) = kill_and_resume(seed, 4, 40, 300..1500);
    eprintln!("{kills} kills, {extra} pages fetched twice");
}

/// `seen.exact` behind a Bloom filter of one 64-byte block (every link is "maybe seen", so
/// every decision is the exact set's), with the state store on, killed and resumed: the
/// crawl still records exactly the ground truth, each page once (a page skipped or recorded
/// twice fails `check`), and the state store equals one rebuilt from `pages.jsonl` (a record
/// lost would leave a state missing or stale; one applied twice would count a 404 twice in
/// `gone_generations`).
#[test]
fn kill_9_and_resume_with_exact_seen_stays_exact() {
    let _load = crate::support::ordinary();
    let seed = kill_seed("kill_9_and_resume_with_exact_seen_stays_exact");
    let crawl = CliCrawl::new(
        WebSpec::small(61),
        None,
        &[
            "politeness.per_host_rps=40",
            "checkpoint.interval_secs=0.5",
            "seen.exact=true",
            "seen.memory=64",
            "state.enabled=true",
        ],
    );
    let kills = kill_until_done(&crawl, seed, 3, 300..1500);
    let extra = crawl.check(&format!("seed {seed}, {kills} kills, seen.exact"));
    assert!(
        extra as usize <= kills * CONCURRENCY,
        "seed {seed}: {extra} extra requests after {kills} kills"
    );
    use crawler::state_store::{StateStore, UrlFingerprint};
    let out = crawl.out();
    let pages = out.join("pages.jsonl");
    let urls: Vec<String> = std::fs::read_to_string(&pages)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<crawler::output::PageRecord>(l).unwrap())
        .filter(|r| r.kind.is_page())
        .map(|r| r.url)
        .collect();
    let fps: Vec<UrlFingerprint> = urls.iter().map(|u| UrlFingerprint::of(u)).collect();
    let store = StateStore::open(&StateStore::dir_of(&out)).unwrap();
    let states = store.get_batch(&fps).unwrap();
    assert!(
        states.iter().all(Option::is_some),
        "seed {seed}: a state missing"
    );
    let rebuilt_dir = tempfile::tempdir().unwrap();
    let rebuilt = StateStore::rebuild_from_journal(rebuilt_dir.path(), &pages).unwrap();
    assert_eq!(rebuilt.get_batch(&fps).unwrap(), states, "seed {seed}");
    eprintln!("seed {seed}: {kills} kills, {extra} pages fetched again, exact and the state store consistent");
}

/// 20 kills, for a release build: `cargo test --release --test e2e twenty_kills --
/// --ignored --nocapture` (`KILL_SEED` to replay). Prints the kills, pages lost (0, or the
/// test fails) and pages fetched again.
#[test]
#[ignore = "slow: 20 kills; run in a release build"]
fn twenty_kills_lose_nothing() {
    let _load = crate::support::ordinary();
    let seed = kill_seed("twenty_kills_lose_nothing");
    // Slower, and killed sooner, so that 20 kills happen before the crawl ends.
    let (kills, extra) = kill_and_resume(seed, 20, 8, 200..900);
    eprintln!(
        "KILL_SEED={seed}: {kills} kills, 0 pages lost, {extra} pages fetched again (bound {})",
        kills * CONCURRENCY
    );
}

/// Counters that measure the runs rather than the web, which a crawl killed and resumed need
/// not share with an uninterrupted one (see `crawler::crawl::CrawlSummary`'s module doc):
/// CPU time (a killed run's is lost), descriptor pauses (the machine's limits), robots.txt
/// fetches (each resumed run reads robots.txt again), the false-positive estimate (from the
/// seen-set's fill at each insert: the order of inserts changes it), and retries (a page
/// whose retry a kill interrupted is fetched again from a server that remembers its first
/// request: the synthetic web's 503-then-ok pages then answer 200 at once).
const RUN_FIGURES: [&str; 5] = [
    "parse_cpu_ns",
    "descriptor_pauses",
    "robots_fetches",
    "false_positive_micros",
    "retries",
];

/// The counters of `summary.json`, by name (`out_of_scope.<reason>` for the scope's), but
/// the run figures.
fn web_figures(summary: &serde_json::Value) -> BTreeMap<String, u64> {
    let names = serde_json::to_value(crawler::crawl::CounterValues::default()).unwrap();
    let mut figures = BTreeMap::new();
    for (name, zero) in names.as_object().unwrap() {
        if RUN_FIGURES.contains(&name.as_str()) {
            continue;
        }
        match zero.as_object() {
            // By reason (the scope's): every reason the summary names.
            Some(_) => {
                let reasons = summary[name]
                    .as_object()
                    .unwrap_or_else(|| panic!("{name}"));
                assert!(!reasons.is_empty(), "{name}");
                for (reason, value) in reasons {
                    figures.insert(format!("{name}.{reason}"), value.as_u64().expect(reason));
                }
            }
            None => {
                let value = summary[name].as_u64();
                figures.insert(name.clone(), value.unwrap_or_else(|| panic!("{name}")));
            }
        }
    }
    figures
}

fn summary_of(crawl: &CliCrawl) -> serde_json::Value {
    let text = std::fs::read_to_string(crawl.out().join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The figures of a crawl killed (`kill -9`) at random moments and resumed to its end are
/// those of the same crawl run uninterrupted: every counter but the run figures
/// ([`RUN_FIGURES`]), response classes, links found and their fates, pages parsed. And its
/// time is given per run and for the whole crawl.
#[test]
fn kill_9_and_resume_gives_the_uninterrupted_figures() {
    let _load = crate::support::ordinary();
    let seed = kill_seed("kill_9_and_resume_gives_the_uninterrupted_figures");
    let settings = ["politeness.per_host_rps=40", "checkpoint.interval_secs=0.5"];
    let whole = CliCrawl::new(WebSpec::small(66), None, &settings);
    let o = whole.run(false, None, 0);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "uninterrupted: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let crawl = CliCrawl::new(WebSpec::small(66), None, &settings);
    let kills = kill_until_done(&crawl, seed, 4, 300..1500);
    crawl.check(&format!("seed {seed}, {kills} kills"));
    let (expected, summary) = (summary_of(&whole), summary_of(&crawl));
    let (want, got) = (web_figures(&expected), web_figures(&summary));
    let differing: Vec<String> = want
        .iter()
        .filter(|(name, n)| got.get(*name) != Some(n))
        .map(|(name, n)| {
            format!(
                "{name}: {} after {kills} kills, {n} uninterrupted",
                got[name]
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "KILL_SEED={seed}: {}",
        differing.join("; ")
    );
    assert!(want["links_found"] > 0 && want["parsed"] > 0);
    eprintln!(
        "KILL_SEED={seed}: {kills} kills, {} runs, {} figures equal",
        summary["runs"],
        want.len()
    );
    // Each record's counts add up to the counters (the seeds' acceptance aside).
    let mut summed: BTreeMap<String, u64> = BTreeMap::new();
    for record in crate::support::records(&crawl.out()) {
        for (name, n) in record.counts.nonzero() {
            *summed.entry(name).or_default() += n;
        }
    }
    for (name, n) in &summed {
        assert!(
            got.get(name).is_none_or(|g| g == n),
            "{name}: records sum to {n}, summary says {:?}",
            got.get(name)
        );
    }
    // Time: this run's and the whole crawl's, apart.
    let runs = summary["runs"].as_u64().unwrap();
    assert!(
        (2..=kills as u64 + 1).contains(&runs),
        "{runs} runs after {kills} kills"
    );
    assert!(summary["run_pages"].as_u64() < summary["finished"].as_u64());
    assert!(summary["crawl_elapsed_secs"].as_f64() > summary["run_elapsed_secs"].as_f64());
    assert_eq!(expected["runs"], 1);
    assert_eq!(expected["run_pages"], expected["finished"]);
}

/// Killed with a page's new links in the queue log and its record not written: the resume
/// queues the links, fetches the page again, finds them seen, and counts them once (as new,
/// by the queue log), not a second time as seen; every figure comes out as uninterrupted.
#[test]
fn killed_between_a_pages_links_and_its_record_counts_them_once() {
    let _load = crate::support::ordinary();
    let whole = slow_crawl(67);
    let o = whole.run(false, None, 0);
    assert!(matches!(o.status.code(), Some(0) | Some(1)));
    let crawl = slow_crawl(67);
    let o = crawl.run(false, Some("links-logged:40"), 0);
    assert!(
        killed(&o),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let loaded = checkpoint::load(&crawl.out()).unwrap();
    assert!(
        loaded.replayed_urls > 0,
        "the killed page's links are in the queue log"
    );
    crawl.finish(1);
    crawl.check("killed between a page's links and its record");
    let (want, got) = (
        web_figures(&summary_of(&whole)),
        web_figures(&summary_of(&crawl)),
    );
    assert_eq!(got, want);
}

/// Progress in lines mode and the closing lines, word for word where they are words: the
/// work known (done, queued, in flight) rather than `max_urls`, plain words for the
/// seen-set, and after a resume this run's time apart from the whole crawl's.
#[test]
fn progress_and_closing_lines_say_which_figures_are_which() {
    let _load = crate::support::ordinary();
    let mut crawl = slow_crawl(68);
    let at = crawl.args.iter().position(|a| a == "quiet").unwrap();
    crawl.args[at] = "lines".into();
    crawl.args.push("--set".into());
    crawl.args.push("output.progress_interval_secs=0.2".into());
    let o = crawl.run(false, Some("links-logged:60"), 0);
    assert!(killed(&o), "{:?}", o.status);
    let pages = std::fs::read_to_string(crawl.out().join("pages.jsonl")).unwrap();
    let recorded_before = pages.matches('\n').count() as u64;
    let o = crawl.run(true, None, 1);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{stderr}");
    let summary = summary_of(&crawl);
    let finished = summary["finished"].as_u64().unwrap();
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("progress: "))
        .unwrap_or_else(|| panic!("no progress line: {stderr}"));
    let done = format!(
        "progress: {} done, 0 queued, 0 in flight · ",
        grouped(finished)
    );
    assert!(last.starts_with(&done), "{last}");
    assert!(
        last.contains(" pages/s · ") && last.contains("% full · "),
        "{last}"
    );
    assert!(
        !stderr.contains("fpp≈") && !stderr.contains("seen fill"),
        "{stderr}"
    );
    // This run's pages: those not recorded by the killed one.
    let run_pages = summary["run_pages"].as_u64().unwrap();
    assert_eq!(run_pages, finished - recorded_before);
    assert_eq!(summary["runs"], 2);
    let time = stderr
        .lines()
        .find(|l| l.starts_with("time: "))
        .unwrap_or_else(|| panic!("no time line: {stderr}"));
    assert!(
        time.starts_with("time: this run ")
            && time.contains(&format!(" s, {run_pages} pages, "))
            && time.contains(" pages/s; whole crawl (2 runs): ")
            && time.ends_with(" pages/s"),
        "{time}"
    );
}

/// A checkpoint of format 3 (an older crawler: no runs or time in its manifest, records
/// without `counts`) still resumes, to an exact crawl, and the crawler says which figures
/// it cannot know.
#[test]
fn a_format_3_checkpoint_resumes_and_says_what_it_cannot_count() {
    let _load = crate::support::ordinary();
    let crawl = slow_crawl(69);
    let o = crawl.run(false, Some("links-logged:40"), 0);
    assert!(killed(&o), "{:?}", o.status);
    // Made into what the previous crawler left: its manifest, its records past it.
    let manifest_path = checkpoint::checkpoint_dir(&crawl.out()).join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let object = manifest.as_object_mut().unwrap();
    object.insert("format_version".into(), 3.into());
    for field in ["runs", "crawl_secs", "orphans"] {
        object.remove(field);
    }
    let from = object["pages_bytes"].as_u64().unwrap() as usize;
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let pages_path = crawl.out().join("pages.jsonl");
    let pages = std::fs::read(&pages_path).unwrap();
    let mut rewritten = pages[..from].to_vec();
    let mut stripped = 0;
    for line in pages[from..].split_inclusive(|&b| b == b'\n') {
        let Ok(mut record) = serde_json::from_slice::<serde_json::Value>(line) else {
            rewritten.extend_from_slice(line); // a torn last line stays torn
            continue;
        };
        record.as_object_mut().unwrap().remove("counts");
        stripped += 1;
        rewritten.extend_from_slice(&serde_json::to_vec(&record).unwrap());
        rewritten.push(b'\n');
    }
    std::fs::write(&pages_path, rewritten).unwrap();
    assert!(stripped > 0, "records past the checkpoint");
    let o = crawl.run(true, None, 1);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{stderr}");
    assert!(
        stderr.contains("the checkpoint is of format 3 (an older crawler): the summary's counters count the pages recorded after it only by their status and bytes, and the earlier runs' time is not known"),
        "{stderr}"
    );
    crawl.check("resumed from a format-3 checkpoint");
    let summary = summary_of(&crawl);
    assert_eq!(summary["runs"], 1, "the earlier run is not known");
    let time = stderr
        .lines()
        .find(|l| l.starts_with("time: "))
        .unwrap_or_default();
    assert!(
        time.starts_with("time: this run ")
            && time.ends_with("; the earlier runs' time is not known"),
        "{time}"
    );
}

/// `n` with a comma every three digits, as the progress line writes counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A crawl slow enough to take several checkpoints before it ends.
fn slow_crawl(seed: u64) -> CliCrawl {
    CliCrawl::new(
        WebSpec::small(seed),
        None,
        &["politeness.per_host_rps=20", "checkpoint.interval_secs=0.2"],
    )
}

/// Killed with a checkpoint's files written and not published: the resume starts from the
/// previous checkpoint (replaying both queue logs) and the crawl comes out exact.
#[test]
fn killed_between_prepare_and_publish_resumes_exactly() {
    let _load = crate::support::ordinary();
    let crawl = slow_crawl(62);
    let o = crawl.run(false, Some("prepared:3"), 0);
    assert!(
        killed(&o),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let root = checkpoint::checkpoint_dir(&crawl.out());
    assert!(root.join("ckpt-3").exists(), "checkpoint 3 was prepared");
    let m = checkpoint::current_manifest(&crawl.out()).unwrap().unwrap();
    assert_eq!(m.seq, 2, "checkpoint 3 was not published");
    let loaded = checkpoint::load(&crawl.out()).unwrap();
    assert!(loaded.fell_back.is_none());
    crawl.finish(1);
    let extra = crawl.check("killed between prepare and publish");
    assert!(extra as usize <= CONCURRENCY, "{extra} fetched again");
}

/// After a resume that fell back to the previous checkpoint, a crash in the next publication
/// must leave a usable checkpoint: the publication never moves the damaged manifest over the
/// good one, nor deletes the only usable checkpoint.
#[test]
fn a_crash_after_falling_back_keeps_a_usable_checkpoint() {
    let _load = crate::support::ordinary();
    let crawl = slow_crawl(63);
    let o = crawl.run(false, Some("prepared:3"), 0);
    assert!(
        killed(&o),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    // Damage the current checkpoint (2): the resume falls back to checkpoint 1.
    let current = checkpoint::checkpoint_dir(&crawl.out()).join("ckpt-2");
    let hosts = current.join("hosts.bin");
    let mut bytes = std::fs::read(&hosts).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&hosts, bytes).unwrap();
    assert_eq!(checkpoint::load(&crawl.out()).unwrap().manifest.seq, 1);
    // Killed in its first publication, just before the new manifest is put in place.
    let o = crawl.run(true, Some("manifest-moved"), 1);
    assert!(
        killed(&o),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let loaded = checkpoint::load(&crawl.out())
        .unwrap_or_else(|e| panic!("no usable checkpoint after the second crash: {e}"));
    assert_eq!(loaded.manifest.seq, 1, "still the good one");
    // And from there to the end, exactly.
    let o = crawl.run(true, None, 2);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    crawl.check("crash after a fallback");
}

/// Killed right after it starts (its first request hangs on the server): the first
/// checkpoint is durable before any request, so `--resume` works.
#[test]
fn killed_at_the_first_request_resumes() {
    let _load = crate::support::ordinary();
    let mut spec = WebSpec::small(64);
    spec.features.too_slow = true;
    let web = Web::new(spec.clone());
    let hang = web.special_url("/slow/too-slow").expect("too_slow feature");
    let mut crawl = CliCrawl::new(
        spec,
        Some(vec![hang.clone()]),
        &[
            "politeness.respect_robots=false",
            "crawl.timeout_secs=1",
            "crawl.retries=0",
        ],
    );
    // A large seen-set (36 MiB) makes the first checkpoint take a while to write.
    let at = crawl.args.iter().position(|a| a == "--max-urls").unwrap();
    crawl.args[at + 1] = "2e7".into();
    let mut child = crawl.command(false, None, 0).spawn().unwrap();
    let started = Instant::now();
    while crawl.server.request_count() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no request within 30 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL, the first request still hanging
    child.wait().unwrap();
    let loaded = checkpoint::load(&crawl.out())
        .unwrap_or_else(|e| panic!("killed at the first request: {e}"));
    assert!(!loaded.manifest.finished);
    // The resumed crawl fetches the page again (it times out) and records it once.
    let o = crawl.run(true, None, 1);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let pages = std::fs::read_to_string(crawl.out().join("pages.jsonl")).unwrap();
    assert_eq!(pages.lines().count(), 1, "{pages}");
    assert!(pages.contains(&hang), "{pages}");
}

/// A queue-log append that fails on a full disk stops the crawl with one line that ends with
/// what to do (free space, `--resume`) and a best-effort `summary.json`, the last checkpoint
/// intact; the resumed crawl comes out exact.
#[test]
fn a_failed_queue_log_append_stops_the_crawl_resumably() {
    let _load = crate::support::ordinary();
    let crawl = slow_crawl(65);
    let o = crawl.run(false, Some("queue-log:40"), 0);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    // One line: the file, what happened, the OS's reason, and what to do, last.
    let last = stderr.trim_end().lines().last().unwrap();
    let (start, end) = (
        "crawler: checkpoint: out/checkpoint/queued-",
        ".jsonl: cannot append to the queue log; the crawl stopped, its last checkpoint intact: No space left on device (os error 28); free space, then run the same command with --resume",
    );
    assert!(last.starts_with(start) && last.ends_with(end), "{stderr}");
    // And summary.json, with the figures up to the stop and the error.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(crawl.out().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["stopped"], true, "{summary}");
    assert!(summary["finished"].as_u64().unwrap() > 0, "{summary}");
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .ends_with("No space left on device (os error 28)"),
        "{summary}"
    );
    let loaded = checkpoint::load(&crawl.out()).unwrap();
    assert!(!loaded.manifest.finished);
    crawl.finish(1);
    crawl.check("after a failed queue-log append");
}

/// A record that cannot be written to `pages.jsonl` (a full disk) stops the output writer;
/// the crawl stops with the writer's own reason (the file, the OS's error) and what to do,
/// writes `summary.json`, and the resumed crawl comes out exact.
#[test]
fn a_full_disk_under_pages_jsonl_stops_the_crawl_resumably() {
    let _load = crate::support::ordinary();
    let crawl = slow_crawl(66);
    let o = crawl.run(false, Some("pages:40"), 0);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end().lines().last().unwrap(),
        "crawler: output: cannot write out/pages.jsonl: No space left on device (os error 28); free space, then run the same command with --resume",
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(crawl.out().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["stopped"], true, "{summary}");
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .ends_with("No space left on device (os error 28)"),
        "{summary}"
    );
    crawl.finish(1);
    crawl.check("after a full disk under pages.jsonl");
}
