//! The command line's contract: accepted forms, documented errors and exit codes.
//! These run the real binary; none of them touches the network.

use std::path::Path;
use std::process::{Command, Output};

fn crawler(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawler"))
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run crawler")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_explains_every_flag() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let o = crawler(&["--help"], dir.path());
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--seeds",
        "--max-urls",
        "--config",
        "--out",
        "--resume",
        "--fresh",
        "--concurrency",
        "--set",
        "plan",
        "normalize",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
}

#[test]
fn max_urls_rejects_bad_forms_and_shows_the_accepted_ones() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://a.test/\n").unwrap();
    let o = crawler(&["--seeds", "s.txt", "--max-urls", "lots"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("1e8") && e.contains("100M") && e.contains("100_000_000"),
        "{e}"
    );
}

#[test]
fn bad_seed_lines_are_reported_and_no_valid_seed_is_fatal() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("seeds.txt"),
        "# c\n\nftp://files.test/x\nnot a url\n",
    )
    .unwrap();
    let o = crawler(&["--seeds", "seeds.txt", "--max-urls", "10"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("seeds.txt:3: not an http(s) URL: \"ftp://files.test/x\""),
        "{e}"
    );
    assert!(e.contains("seeds.txt:4: not a URL"), "{e}");
    assert!(e.contains("no valid seed"), "{e}");
}

#[test]
fn missing_seed_file_is_named() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let o = crawler(&["--seeds", "nope.txt", "--max-urls", "10"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.txt"), "{}", stderr(&o));
}

#[test]
fn bad_config_is_refused_with_file_and_key() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://a.test/\n").unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("[crawl]\nmax_depht = 3\n", &["bad.toml", "max_depht"]),
        (
            "[crawl]\nconcurrency = \"many\"\n",
            &["bad.toml", "concurrency"],
        ),
        ("[seen]\nfpp = 2.0\n", &["bad.toml", "seen.fpp"]),
        ("[crawl\n", &["bad.toml"]),
        (
            "[politeness]\nper_host_concurrency = 0\n",
            &["per_host_concurrency"],
        ),
    ];
    for (text, needles) in cases {
        std::fs::write(dir.path().join("bad.toml"), text).unwrap();
        let o = crawler(
            &[
                "--seeds",
                "s.txt",
                "--max-urls",
                "10",
                "--config",
                "bad.toml",
            ],
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{text}");
        let e = stderr(&o);
        for needle in *needles {
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    }
}

/// A refused `--max-urls` or `--concurrency` is blamed on the option, not on "--set
/// overrides" nobody gave.
#[test]
fn a_refused_option_is_named_as_given() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://a.test/\n").unwrap();
    for (args, line) in [
        (
            &["--max-urls", "0"][..],
            "crawler: --max-urls 0: crawl.max_urls: must be at least 1 (the seeds count)",
        ),
        (
            &["--max-urls", "10", "--concurrency", "0"],
            "crawler: --concurrency 0: crawl.concurrency: 0 is out of range 1..=100000",
        ),
    ] {
        let o = crawler(
            &[&["--seeds", "s.txt", "--out", "out"], args].concat(),
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o).trim_end(), line, "{args:?}");
    }
}

#[test]
fn unknown_set_key_names_it_and_lists_the_section() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://a.test/\n").unwrap();
    let o = crawler(
        &[
            "--seeds",
            "s.txt",
            "--max-urls",
            "10",
            "--set",
            "politeness.rps=3",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("\"rps\"") && e.contains("per_host_rps"), "{e}");
    let o = crawler(
        &["--seeds", "s.txt", "--max-urls", "10", "--set", "oops"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("section.key=value"), "{}", stderr(&o));
}

#[test]
fn config_subcommand_prints_effective_values() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let o = crawler(&["config", "--set", "crawl.max_depth=7"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("max_depth = 7"), "{text}");
}

#[test]
fn normalize_subcommand() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let o = crawler(
        &["normalize", "HTTP://Example.COM:80/a/./b#x", "mailto:x@y.z"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text,
        "http://example.com/a/b\nrejected: not an http(s) URL: \"mailto:x@y.z\"\n"
    );
}

#[test]
fn earlier_output_is_not_overwritten_without_fresh() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://a.test/\n").unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::fs::write(dir.path().join("out/pages.jsonl"), "{}\n").unwrap();
    let o = crawler(
        &["--seeds", "s.txt", "--max-urls", "10", "--out", "out"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--fresh"), "{e}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/pages.jsonl")).unwrap(),
        "{}\n"
    );
}

#[test]
fn unreachable_seed_finishes_with_exit_code_1() {
    let _load = crate::support::ordinary();
    // Port 9 on loopback: nothing listens, the connection is refused at once.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://down.test/\n").unwrap();
    let o = crawler(
        &[
            "--seeds",
            "s.txt",
            "--max-urls",
            "10",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--set",
            "network.resolve.\"*.test\"=127.0.0.1:9",
            "--set",
            "crawl.retries=0",
            "--set",
            "politeness.respect_robots=false",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let pages = std::fs::read_to_string(dir.path().join("out/pages.jsonl")).unwrap();
    assert_eq!(pages.lines().count(), 1);
    assert!(
        pages.contains("\"error\":\"") && pages.contains("refused"),
        "{pages}"
    );
    let summary = std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap();
    assert!(summary.contains("\"network_errors\": 1"), "{summary}");
    assert_eq!(
        stderr(&o).trim_end().lines().last().unwrap(),
        "exit 1: 1 URL failed (0 server errors (5xx/429), 1 network error, 0 given up: robots.txt unreachable); each one's record says why"
    );
}

/// A host whose robots.txt never answers: its URLs are given up after the robots.txt
/// retries (about 15 s), and the exit code's line names that, not "0 network errors".
#[test]
fn an_unreachable_robots_txt_is_named_as_the_reason_for_exit_1() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.txt"),
        "http://down.test/\nhttp://down.test/b\n",
    )
    .unwrap();
    let o = crawler(
        &[
            "--seeds",
            "s.txt",
            "--max-urls",
            "10",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--set",
            "network.resolve.\"*.test\"=127.0.0.1:9",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim_end().lines().last().unwrap(),
        "exit 1: 2 URLs failed (0 server errors (5xx/429), 0 network errors, 2 given up: robots.txt unreachable); each one's record says why"
    );
}

/// Log lines written to a pipe carry no colour codes, and the seen-set's start-up line
/// names it once: exactly its plan's summary.
#[test]
fn log_lines_to_a_pipe_are_plain_and_say_seen_set_once() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), "http://down.test/\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_crawler"))
        .args([
            "--seeds",
            "s.txt",
            "--max-urls",
            "10",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--set",
            "network.resolve.\"*.test\"=127.0.0.1:9",
            "--set",
            "crawl.retries=0",
            "--set",
            "politeness.respect_robots=false",
        ])
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(!e.contains('\u{1b}'), "colour codes in a pipe: {e:?}");
    let plan = crawler::seen::Plan::for_fpp(10, 0.001).unwrap().summary();
    let lines: Vec<&str> = e.lines().filter(|l| l.contains("seen-set: m =")).collect();
    assert_eq!(lines.len(), 1, "{e}");
    assert!(lines[0].ends_with(&format!(" INFO {plan}")), "{}", lines[0]);
}

#[test]
fn plan_shows_the_classic_optimum_beside_the_filter_really_built() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let o = crawler(&["plan", "--max-urls", "1e8", "--fpp", "0.001"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // Classic optimum: m = -n ln p / (ln 2)^2 = 1,437,758,757 bits = 171.4 MiB, k = 10.
    assert!(
        text.contains("171.4 MiB") && text.contains("k = 10"),
        "{text}"
    );
    let built: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("x the classic optimum"))
        .collect();
    assert_eq!(built.len(), 1, "{text}");
    let ratio: f64 = built[0].trim().split('x').next().unwrap().parse().unwrap();
    assert!(
        (1.0..=1.2).contains(&ratio),
        "built filter is {ratio}x the optimum"
    );
    for needle in ["log2(1/p)", "HashSet<u64>", "80 B/URL", "bits/URL"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn plan_refuses_nonsense_with_reasons() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            &["plan", "--max-urls", "1e8", "--fpp", "1.5"][..],
            "outside (0, 1)",
        ),
        (&["plan", "--max-urls", "0", "--fpp", "0.01"][..], "0"),
        (
            &["plan", "--max-urls", "1e8", "--memory", "1KiB"][..],
            "above 0.5",
        ),
        (
            &["plan", "--max-urls", "1e13", "--fpp", "0.0001"][..],
            "memory",
        ),
        (
            &["plan", "--max-urls", "1e8", "--memory", "lots"][..],
            "256MiB",
        ),
    ] {
        let o = crawler(args, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn unfinished_crawl_needs_resume_or_fresh_and_resume_goes_on() {
    let _load = crate::support::ordinary();
    use testweb::{TestWebServer, Web, WebSpec};
    let web = std::sync::Arc::new(Web::new(WebSpec::small(51)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let (pattern, addr) = server.resolve_entry();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.txt"), web.seeds().join("\n")).unwrap();
    let resolve = format!("network.resolve.\"{pattern}\"={addr}");
    let base = [
        "--seeds",
        "s.txt",
        "--max-urls",
        "1e6",
        "--out",
        "out",
        "--progress",
        "quiet",
        "--set",
        resolve.as_str(),
        "--set",
        "politeness.per_host_rps=20",
        "--set",
        "crawl.retries=1",
    ];
    // Start a crawl and stop it with SIGTERM, as an operator would.
    let child = Command::new(env!("CARGO_BIN_EXE_crawler"))
        .args(base)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));

    let o = crawler(&base, dir.path());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unfinished crawl") && e.contains("--resume") && e.contains("--fresh"),
        "{e}"
    );
    let mut resume = base.to_vec();
    resume.push("--resume");
    let o = crawler(&resume, dir.path());
    assert!(
        o.status.code() == Some(1) || o.status.code() == Some(0),
        "{}",
        stderr(&o)
    );
    let pages = std::fs::read_to_string(dir.path().join("out/pages.jsonl")).unwrap();
    let mut urls = std::collections::BTreeSet::new();
    for line in pages.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            urls.insert(v["url"].as_str().unwrap().to_string()),
            "twice: {line}"
        );
    }
    let o = crawler(&resume, dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("finished"), "{}", stderr(&o));
}

/// The five errors users meet most, word for word: each names its subject and place once,
/// prints its cause once, and says what to do where there is something to do.
#[test]
fn the_commonest_errors_read_exactly_so() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.txt"), "http://a.test/\n").unwrap();
    std::fs::write(d.join("c.toml"), "[crawl]\nmax_urlz = 5\n").unwrap();
    std::fs::write(d.join("file"), "").unwrap();
    let keys = "max_urls, max_depth, concurrency, user_agent, max_body_bytes, timeout_secs, \
                connect_timeout_secs, max_redirects, retries, content_types, follow_nofollow, \
                follow_canonical, sitemaps, \
                max_links_per_page, near_duplicates, parse_threads, shutdown_grace_secs, max_duration";
    let last_line = |args: &[&str]| {
        let o = crawler(args, d);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        stderr(&o)
            .trim()
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    let base = ["--max-urls", "10"];
    assert_eq!(
        last_line(&[&base[..], &["--seeds", "nope.txt", "--out", "o1"]].concat()),
        "crawler: nope.txt: cannot read seeds: No such file or directory (os error 2)"
    );
    assert_eq!(
        last_line(
            &[
                &base[..],
                &["--seeds", "s.txt", "--config", "c.toml", "--out", "o2"]
            ]
            .concat()
        ),
        format!("crawler: c.toml:2: unknown key \"max_urlz\" in [crawl]; its keys are: {keys}")
    );
    assert_eq!(
        last_line(
            &[
                &base[..],
                &["--seeds", "s.txt", "--set", "crawl.bogus=1", "--out", "o3"]
            ]
            .concat()
        ),
        format!(
            "crawler: --set crawl.bogus: unknown key \"bogus\" in [crawl]; its keys are: {keys}"
        )
    );
    assert_eq!(
        last_line(&[&base[..], &["--seeds", "s.txt", "--out", "file/x"]].concat()),
        "crawler: file/x: cannot create output directory: Not a directory (os error 20)"
    );
    // A checkpoint whose two manifests are both damaged: nothing to resume from.
    let unreachable = "network.resolve.\"*.test\"=\"127.0.0.1:9\"";
    let o = crawler(
        &[
            &base[..],
            &[
                "--seeds",
                "s.txt",
                "--out",
                "o4",
                "--set",
                unreachable,
                "--set",
                "crawl.retries=0",
                "--set",
                "politeness.respect_robots=false",
            ],
        ]
        .concat(),
        d,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::fs::write(d.join("o4/checkpoint/manifest.json"), "garbage\n").unwrap();
    std::fs::write(d.join("o4/checkpoint/manifest.prev.json"), "garbage\n").unwrap();
    assert_eq!(
        last_line(&[&base[..], &["--seeds", "s.txt", "--out", "o4", "--resume"]].concat()),
        "crawler: o4/checkpoint: the latest checkpoint is damaged (o4/checkpoint/manifest.json: \
         not a checkpoint manifest: expected value at line 1 column 1), and the previous \
         checkpoint is not usable either (o4/checkpoint/manifest.prev.json: not a checkpoint \
         manifest: expected value at line 1 column 1); the crawl cannot resume: start it again \
         with --fresh"
    );
}

/// A crawl of a small synthetic web by the binary, in a temporary directory, slow enough
/// (`politeness.per_host_rps`) to be caught running.
struct LiveCrawl {
    web: std::sync::Arc<testweb::Web>,
    _server: testweb::TestWebServer,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl LiveCrawl {
    fn new(seed: u64, rps: &str, extra: &[&str]) -> LiveCrawl {
        use testweb::{TestWebServer, Web, WebSpec};
        let web = std::sync::Arc::new(Web::new(WebSpec::small(seed)));
        let server = TestWebServer::start(web.clone()).unwrap();
        let (pattern, addr) = server.resolve_entry();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.txt"), web.seeds().join("\n")).unwrap();
        let mut args: Vec<String> = [
            "--seeds",
            "s.txt",
            "--max-urls",
            "1e6",
            "--out",
            "out",
            "--progress",
            "quiet",
            "--set",
            &format!("network.resolve.\"{pattern}\"={addr}"),
            "--set",
            &format!("politeness.per_host_rps={rps}"),
            "--set",
            "crawl.retries=1",
            "--set",
            "crawl.max_depth=16",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        LiveCrawl {
            web,
            _server: server,
            dir,
            args,
        }
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
        command
            .args(&self.args)
            .args(extra)
            .current_dir(self.dir.path())
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        command
    }

    fn out(&self) -> std::path::PathBuf {
        self.dir.path().join("out")
    }

    /// Starts the crawl and returns once its first checkpoint is published (before its
    /// first request), so that it is running from there on.
    fn start(&self) -> std::process::Child {
        let mut child = self.command(&[]).spawn().unwrap();
        let manifest = self.out().join("checkpoint/manifest.json");
        let started = std::time::Instant::now();
        while !manifest.exists() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the crawl ended before its first checkpoint"
            );
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no checkpoint within 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child
    }

    /// The URLs of `out/pages.jsonl`, each asserted to be there once.
    fn recorded(&self) -> std::collections::BTreeSet<String> {
        let pages = std::fs::read_to_string(self.out().join("pages.jsonl")).unwrap();
        let mut urls = std::collections::BTreeSet::new();
        for line in pages.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let url = v["url"].as_str().unwrap().to_string();
            assert!(urls.insert(url), "recorded twice: {line}");
        }
        urls
    }

    /// Resumes (faster) to the end and checks the crawl against the ground truth: every page
    /// the web has, each recorded once.
    fn finish_and_check(&self) {
        let o = self
            .command(&["--resume", "--set", "politeness.per_host_rps=1000"])
            .output()
            .unwrap();
        assert!(
            matches!(o.status.code(), Some(0) | Some(1)),
            "{:?} {}",
            o.status,
            stderr(&o)
        );
        // Resumed at the size it had: nothing grows.
        assert!(!stderr(&o).contains("grows from"), "{}", stderr(&o));
        let truth = self.web.ground_truth(
            &self.web.seeds(),
            &testweb::CrawlRules {
                retries: 1,
                full_normalization: true,
                ..testweb::CrawlRules::default()
            },
        );
        assert_eq!(self.recorded(), truth.discovered());
    }
}

/// A second start on the output directory of a live crawl (plain, `--resume` or `--fresh`)
/// exits 2 with one line naming the directory and the live crawl's pid, and touches nothing:
/// the live crawl stops cleanly with every record once, and resumes to the exact crawl.
#[test]
fn a_live_crawl_keeps_its_output_directory_to_itself() {
    let _load = crate::support::ordinary();
    let crawl = LiveCrawl::new(52, "4", &[]);
    let child = crawl.start();
    let expected = format!(
        "crawler: out: another crawler (pid {}) is using this output directory; two crawls on one directory destroy each other: wait for it to end (or stop it), or use another --out",
        child.id()
    );
    for extra in [&[][..], &["--resume"], &["--fresh"]] {
        let o = crawl.command(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end(), expected, "{extra:?}");
    }
    // Nor can a process of a distributed crawl (refused before it looks for its Redis), or
    // the demo.
    let o = crawl
        .command(&["--redis", "redis://127.0.0.1:9/0", "--crawl-id", "t"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim_end(), expected);
    let o = crawler(
        &["demo", "--out", "out", "--hosts", "2", "--pages", "20"],
        crawl.dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim_end(), expected);
    // The live crawl is still running (at 4 pages/s per host it cannot have finished):
    // stopped as an operator would, it ends cleanly.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    let manifest = crawler::checkpoint::current_manifest(&crawl.out())
        .unwrap()
        .unwrap();
    assert_eq!(crawl.recorded().len() as u64, manifest.pages_records);
    crawl.finish_and_check();
}

/// `--resume` takes the crawl's seeds and max_urls from its checkpoint: no `--seeds` or
/// `--max-urls` needed, and the seed file may be gone. Without `--resume`, `--seeds` is
/// required, and says so.
#[test]
fn resume_needs_no_seeds() {
    let _load = crate::support::ordinary();
    let mut crawl = LiveCrawl::new(55, "4", &[]);
    let at = crawl.args.iter().position(|a| a == "--max-urls").unwrap();
    crawl.args[at + 1] = "5000".into();
    let child = crawl.start();
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for flag in ["--seeds", "--max-urls"] {
        let at = crawl.args.iter().position(|a| a == flag).unwrap();
        crawl.args.drain(at..at + 2);
    }
    std::fs::remove_file(crawl.dir.path().join("s.txt")).unwrap();
    let o = crawl.command(&[]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        "crawler: --seeds FILE is required to crawl (see crawler --help); --resume uses the seeds of the crawl it resumes"
    );
    crawl.finish_and_check();
}

/// `kill -9` leaves the lock file with the dead crawl's pid, and no lock: `--resume` goes on.
#[test]
fn a_lock_left_by_a_killed_crawl_does_not_block_resume() {
    let _load = crate::support::ordinary();
    let crawl = LiveCrawl::new(53, "4", &[]);
    let mut child = crawl.start();
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let lock = std::fs::read_to_string(crawl.out().join("lock")).unwrap();
    assert_eq!(
        lock.split_whitespace().next(),
        Some(pid.to_string().as_str()),
        "{lock:?}"
    );
    crawl.finish_and_check();
}

/// An unfinished crawl resumed with a larger `--max-urls` goes on past its first cap, its
/// seen-set kept (one line says its false-positive rate at the new size); a smaller one is
/// refused with one line and nothing touched.
#[test]
fn a_resumed_crawl_can_be_extended_to_a_larger_max_urls_not_shrunk() {
    let _load = crate::support::ordinary();
    let mut crawl = LiveCrawl::new(54, "4", &["--set", "seen.memory=64KiB"]);
    let at = crawl.args.iter().position(|a| a == "--max-urls").unwrap();
    crawl.args.remove(at + 1);
    crawl.args.remove(at);
    let mut first = crawl.command(&["--max-urls", "100"]);
    first.stderr(std::process::Stdio::piped());
    let child = first.spawn().unwrap();
    let manifest = crawl.out().join("checkpoint/manifest.json");
    while !manifest.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped before the end"),
        "{}",
        stderr(&o)
    );
    let before = std::fs::read(crawl.out().join("pages.jsonl")).unwrap();
    let accepted = crawler::checkpoint::current_manifest(&crawl.out())
        .unwrap()
        .unwrap()
        .counters["accepted"];

    let o = crawl
        .command(&["--resume", "--max-urls", "50"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        format!("crawler: max_urls 50: the crawl in out was started with max_urls 100 and has taken on {accepted} URLs; a crawl can be extended, not shrunk: resume with --max-urls 100 or more, or start again with --fresh")
    );
    assert_eq!(
        std::fs::read(crawl.out().join("pages.jsonl")).unwrap(),
        before
    );

    let o = crawl
        .command(&[
            "--resume",
            "--max-urls",
            "1000",
            "--set",
            "politeness.per_host_rps=1000",
        ])
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        stderr(&o)
    );
    let plan = crawler::seen::Plan::for_memory(100, 64 * 1024).unwrap();
    let line = format!(
        "max_urls 1000: the crawl grows from 100 to 1000 URLs; its seen-set keeps its size (64.0 KiB for 100 URLs), so its expected false-positive rate at 1000 URLs is {:.2e} (it was {:.2e})",
        plan.expected_fpp_at(1000),
        plan.expected_fpp
    );
    assert!(
        stderr(&o).lines().any(|l| l == line),
        "{line}\n{}",
        stderr(&o)
    );
    // Past the first cap, every record once, and only pages the web has.
    let recorded = crawl.recorded();
    assert!(recorded.len() > 100, "{} records", recorded.len());
    let truth = crawl.web.ground_truth(
        &crawl.web.seeds(),
        &testweb::CrawlRules {
            retries: 1,
            full_normalization: true,
            ..testweb::CrawlRules::default()
        },
    );
    assert!(recorded.is_subset(&truth.discovered()));
}
