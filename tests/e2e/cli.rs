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
                max_links_per_page, near_duplicates, parse_threads, shutdown_grace_secs";
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
