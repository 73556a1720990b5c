//! Outside robots.txt suites as tables: the REP cases of google/robotstxt (`robots_test.cc`) and
//! crawler-commons' `SimpleRobotRulesParserTest`, ported row by row into
//! `tests/data/robots/*/*.toml` (with their licences and the commit they come from; the format
//! is described in `tests/data/robots/README.md`).
//!
//! Each row is decided as `crawler robots` decides it (the user agent's product token, then
//! `RobotsRules::verdict`). A row where we differ from the upstream test on purpose carries
//! `ours` and `why`: an expected difference is data, checked like any other row, so a change
//! that brings us back to the upstream answer fails here too. Every row also checks that the
//! reported rule is on a line of the file that says `Allow` for an allow and something else for
//! a disallow, and that `verdict` agrees with `allows`.
//!
//! All failures of a table are collected and reported together, each with its test name.

use std::path::{Path, PathBuf};

use crawler::robots::{agent_token, source_line, Reason, RobotsRules};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    source: String,
    commit: String,
    #[serde(default)]
    not_ported: Vec<NotPorted>,
    #[serde(default)]
    agent_token: Vec<AgentToken>,
    #[serde(default)]
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NotPorted {
    test: String,
    why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentToken {
    input: String,
    upstream_valid: bool,
    ours: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    test: String,
    /// The body, or `robots_file` (relative to the table): one of the two.
    robots: Option<String>,
    robots_file: Option<String>,
    /// Each character of `robots` is one byte (U+0000..U+00FF): for bodies that are not UTF-8.
    #[serde(default)]
    latin1: bool,
    /// `{{c*N}}` in `robots` and in URLs stands for N times the character c.
    #[serde(default)]
    expand: bool,
    /// How the upstream test was adapted, where it was.
    #[allow(dead_code)]
    note: Option<String>,
    /// Our `skipped_lines`.
    skipped: Option<u32>,
    /// The agent of the crawl-delay and sitemap checks (and of checks without their own).
    agent: Option<String>,
    /// Crawl-delay in milliseconds, -1 for none: upstream's, and ours where it differs.
    crawl_delay_ms: Option<i64>,
    ours_crawl_delay_ms: Option<i64>,
    why_crawl_delay: Option<String>,
    /// `Sitemap:` URLs, in file order: upstream's, and ours where they differ.
    sitemaps: Option<Vec<String>>,
    ours_sitemaps: Option<Vec<String>>,
    why_sitemaps: Option<String>,
    #[serde(default)]
    checks: Vec<Check>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    agent: Option<String>,
    url: String,
    upstream: Answer,
    ours: Option<Answer>,
    why: Option<String>,
    /// The line of the deciding rule; 0: no rule decides.
    line: Option<u32>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Answer {
    Allowed,
    Disallowed,
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/robots")
}

/// Replaces each `{{c*N}}` with N times c.
fn expand(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .unwrap_or_else(|| panic!("unclosed {{{{ in {text:?}"));
        let (c, n) = after[..end]
            .split_once('*')
            .unwrap_or_else(|| panic!("{{{{c*N}}}} expected in {text:?}"));
        let n: usize = n.parse().unwrap_or_else(|e| panic!("{n:?}: {e}"));
        out.push_str(&c.repeat(n));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn body_of(case: &Case, dir: &Path) -> Vec<u8> {
    let text = match (&case.robots, &case.robots_file) {
        (Some(text), None) => text.clone(),
        (None, Some(file)) => {
            let path = dir.join(file);
            return std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        _ => panic!("{}: give one of robots and robots_file", case.test),
    };
    let text = if case.expand { expand(&text) } else { text };
    if case.latin1 {
        text.chars()
            .map(|c| {
                u8::try_from(u32::from(c))
                    .unwrap_or_else(|_| panic!("{}: {c:?} is not latin1", case.test))
            })
            .collect()
    } else {
        text.into_bytes()
    }
}

fn millis(delay: Option<std::time::Duration>) -> i64 {
    delay.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What a table holds, for the summary line.
#[derive(Default)]
struct Counts {
    cases: usize,
    checks: usize,
    differences: usize,
}

/// Runs one table; returns its failures, one line each.
fn run_table(file: &str, counts: &mut Counts) -> Vec<String> {
    let path = data_dir().join(file);
    let dir = path.parent().unwrap_or(Path::new("."));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let table: Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        !table.source.is_empty() && table.commit.len() == 40,
        "{file}: source and commit"
    );
    let mut failures = Vec::new();
    let mut fail = |test: &str, message: String| failures.push(format!("{file} {test}: {message}"));
    for skipped in &table.not_ported {
        if skipped.why.trim().is_empty() {
            fail(&skipped.test, "not ported without a reason".into());
        }
    }
    for row in &table.agent_token {
        let token = agent_token(&row.input);
        if token != row.ours {
            fail(
                "agent_token",
                format!(
                    "{:?} gives {token:?}, the table says {:?}",
                    row.input, row.ours
                ),
            );
        }
        // Google accepts exactly the agents that are their own token.
        if row.upstream_valid && token != row.input {
            fail(
                "agent_token",
                format!("{:?} is valid upstream but not its own token", row.input),
            );
        }
    }
    for case in &table.case {
        counts.cases += 1;
        let body = body_of(case, dir);
        let parse = |agent: &str| RobotsRules::parse(&agent_token(agent), &body);
        let case_agent = case.agent.as_deref();
        if let Some(upstream) = case.crawl_delay_ms {
            let agent =
                case_agent.unwrap_or_else(|| panic!("{}: crawl_delay_ms needs agent", case.test));
            let expected = expected(
                upstream,
                case.ours_crawl_delay_ms,
                &case.why_crawl_delay,
                counts,
            )
            .unwrap_or_else(|e| panic!("{} crawl delay: {e}", case.test));
            let got = millis(parse(agent).crawl_delay());
            if got != expected {
                fail(
                    &case.test,
                    format!("{agent}: crawl delay {got} ms, expected {expected}"),
                );
            }
        }
        if let Some(upstream) = &case.sitemaps {
            let rules = parse(case_agent.unwrap_or(""));
            let expected = expected(
                upstream.clone(),
                case.ours_sitemaps.clone(),
                &case.why_sitemaps,
                counts,
            )
            .unwrap_or_else(|e| panic!("{} sitemaps: {e}", case.test));
            if rules.sitemaps() != expected.as_slice() {
                fail(
                    &case.test,
                    format!("sitemaps {:?}, expected {expected:?}", rules.sitemaps()),
                );
            }
        }
        if let Some(skipped) = case.skipped {
            // Skipped lines do not depend on the agent: one parse tells.
            let rules = parse(case_agent.unwrap_or(""));
            if rules.skipped_lines != skipped {
                fail(
                    &case.test,
                    format!(
                        "{} lines skipped ({:?}), expected {skipped}",
                        rules.skipped_lines,
                        rules.notes()
                    ),
                );
            }
        }
        for check in &case.checks {
            counts.checks += 1;
            let agent = check
                .agent
                .as_deref()
                .or(case_agent)
                .unwrap_or_else(|| panic!("{}: a check without an agent", case.test));
            let url = if case.expand {
                expand(&check.url)
            } else {
                check.url.clone()
            };
            let shown = if url.len() > 80 {
                format!("{}…", &url[..80])
            } else {
                url.clone()
            };
            let expected = expected(check.upstream, check.ours, &check.why, counts)
                .unwrap_or_else(|e| panic!("{} {shown}: {e}", case.test));
            let rules = parse(agent);
            let verdict = rules.verdict(&url);
            if verdict.allowed != rules.allows(&url) {
                fail(
                    &case.test,
                    format!("{agent} {shown}: verdict and allows disagree"),
                );
            }
            let got = if verdict.allowed {
                Answer::Allowed
            } else {
                Answer::Disallowed
            };
            if got != expected {
                fail(
                    &case.test,
                    format!(
                        "{agent} {shown}: {got:?}, expected {expected:?} ({:?})",
                        verdict.reason
                    ),
                );
                continue;
            }
            let line = match &verdict.reason {
                Reason::Rule { line, allow, .. } => {
                    let text = source_line(&body, *line).map(|t| t.trim().to_ascii_lowercase());
                    match text {
                        Some(text) if text.starts_with("allow") == *allow => {}
                        other => fail(
                            &case.test,
                            format!(
                                "{agent} {shown}: line {line} ({other:?}) is not an {} rule",
                                if *allow { "Allow" } else { "Disallow" }
                            ),
                        ),
                    }
                    *line
                }
                Reason::NoMatchingRule | Reason::RobotsTxt => 0,
            };
            if check.line.is_some_and(|expected| expected != line) {
                fail(
                    &case.test,
                    format!(
                        "{agent} {shown}: decided by line {line}, expected {:?}",
                        check.line
                    ),
                );
            }
        }
    }
    failures
}

/// The value we must produce: `upstream`, or `ours` where the table says we differ (then with
/// a reason, and really different: a difference that is not one is stale data).
fn expected<T: PartialEq + std::fmt::Debug>(
    upstream: T,
    ours: Option<T>,
    why: &Option<String>,
    counts: &mut Counts,
) -> Result<T, String> {
    match (ours, why) {
        (None, None) => Ok(upstream),
        (Some(ours), Some(why)) if !why.trim().is_empty() && ours != upstream => {
            counts.differences += 1;
            Ok(ours)
        }
        (Some(ours), _) if ours == upstream => Err(format!("`ours` {ours:?} is upstream's answer")),
        _ => Err("`ours` and `why` go together".into()),
    }
}

fn run(file: &str) {
    let mut counts = Counts::default();
    let failures = run_table(file, &mut counts);
    eprintln!(
        "{file}: {} cases, {} checks, {} expected differences, {} failures",
        counts.cases,
        counts.checks,
        counts.differences,
        failures.len()
    );
    assert!(counts.checks > 0, "{file}: no checks");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn google_robotstxt_rep_cases() {
    run("google/robots_test.toml");
}

#[test]
fn crawler_commons_robots_cases() {
    run("crawler-commons/SimpleRobotRulesParserTest.toml");
}

#[test]
fn expansion_of_repeated_characters() {
    assert_eq!(expand("/x/{{a*3}}/{{b*0}}q"), "/x/aaa/q");
    assert_eq!(expand("plain"), "plain");
}
