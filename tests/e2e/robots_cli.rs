//! `crawler robots FILE USER_AGENT URL...` run as a user (or Google's spec-test runner) runs
//! it: the exact lines it prints, and its exit codes (0 all allowed, 1 any disallowed, 2 bad
//! input with one line naming it). The rules themselves are tested by the outside suites in
//! `tests/api/robots_suites.rs`.

use std::path::Path;
use std::process::{Command, Output};

fn robots(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawler"))
        .arg("robots")
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run crawler")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const FILE: &str = "# example\r\nUser-agent: *\r\nDisallow: /private/\r\nHost: a.test\r\nAllow: /private/open\r\n\r\nUser-agent: FooBot\r\nDisallow: /\r\n";

#[test]
fn each_url_gets_its_verdict_and_the_line_that_decides() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("robots.txt"), FILE).unwrap();
    let o = robots(
        dir.path(),
        &[
            "robots.txt",
            "crawler/0.1 (+https://example.org/bot)",
            "https://a.test/private/x",
            "https://a.test/private/open/y",
            "https://a.test/",
            "https://a.test/robots.txt",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "https://a.test/private/x: DISALLOWED by line 3: Disallow: /private/\n\
         https://a.test/private/open/y: ALLOWED by line 5: Allow: /private/open\n\
         https://a.test/: ALLOWED (no rule matches)\n\
         https://a.test/robots.txt: ALLOWED (/robots.txt is always allowed)\n"
    );
    assert_eq!(
        text(&o.stderr),
        "robots.txt:4: unknown directive `Host`; line skipped\n"
    );

    // All allowed: exit 0. The agent's own group applies, as in a crawl.
    let o = robots(
        dir.path(),
        &[
            "robots.txt",
            "crawler",
            "https://a.test/public",
            "https://a.test/private/open",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let o = robots(
        dir.path(),
        &["robots.txt", "foobot/2.1", "https://a.test/public"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stdout),
        "https://a.test/public: DISALLOWED by line 8: Disallow: /\n"
    );
}

#[test]
fn an_empty_file_allows_everything() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("robots.txt"), "").unwrap();
    let o = robots(dir.path(), &["robots.txt", "FooBot", "http://foo.bar/x"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text(&o.stdout),
        "http://foo.bar/x: ALLOWED (no rule matches)\n"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let _load = crate::support::ordinary();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("robots.txt"), FILE).unwrap();
    let o = robots(dir.path(), &["missing.txt", "FooBot", "http://foo.bar/"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        "crawler: robots: cannot read missing.txt: No such file or directory (os error 2)\n"
    );
    assert!(o.stdout.is_empty());
    // A URL that does not parse is refused before anything is printed.
    let o = robots(
        dir.path(),
        &["robots.txt", "FooBot", "http://foo.bar/", "foo.bar/x"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        "crawler: robots: URL \"foo.bar/x\" does not parse: relative URL without a base\n"
    );
    assert!(o.stdout.is_empty());
    let o = robots(dir.path(), &["robots.txt", "FooBot", "mailto:a@b.c"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        "crawler: robots: URL \"mailto:a@b.c\" has no path to match\n"
    );
    // No URL at all is a usage error.
    let o = robots(dir.path(), &["robots.txt", "FooBot"]);
    assert_eq!(o.status.code(), Some(2));
}
