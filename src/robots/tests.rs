use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn allowed(body: &str, agent: &str, url: &str) -> bool {
    RobotsRules::parse(agent, body.as_bytes()).allows(url)
}

/// A few thousand rules of 20 wildcards and a `$` each, `bytes` long in all: the file that
/// made a regex-per-rule parser hold hundreds of MiB.
fn adversarial_body(bytes: usize) -> String {
    let mut body = String::from("User-agent: *\nDisallow: /private/\n");
    let mut i = 0u32;
    while body.len() < bytes - 200 {
        body.push_str("Disallow: /");
        for j in 0..20 {
            body.push_str(&format!("*{i:x}q{j}"));
        }
        body.push_str("$\n");
        i += 1;
    }
    body
}

#[test]
fn agent_tokens() {
    assert_eq!(agent_token("crawler/0.1.0"), "crawler");
    assert_eq!(agent_token("MyBot (+http://x)"), "MyBot");
    assert_eq!(agent_token("plain"), "plain");
}

#[test]
fn longest_match_and_wildcards() {
    let rules = RobotsRules::parse(
        "crawler",
        b"User-agent: BadBot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nAllow: /private/open\nDisallow: /*.pdf$\nCrawl-delay: 2\n",
    );
    assert!(rules.allows("http://a.test/"));
    assert!(!rules.allows("http://a.test/private/page"));
    assert!(rules.allows("http://a.test/private/open"));
    assert!(!rules.allows("http://a.test/doc.pdf"));
    assert!(rules.allows("http://a.test/doc.pdf?x=1"));
    assert_eq!(rules.crawl_delay, Some(Duration::from_secs(2)));
    let bad = RobotsRules::parse("BadBot", b"User-agent: BadBot\nDisallow: /\n");
    assert!(!bad.allows("http://a.test/anything"));
}

#[test]
fn garbage_is_survivable() {
    let rules = RobotsRules::parse("crawler", &[0xff, 0xfe, 0, 1, 2, b'\n', b':']);
    assert!(rules.allows("http://a.test/x"));
    assert!(rules.skipped_lines >= 1);
}

#[test]
fn backoff_grows() {
    assert_eq!(unavailable_backoff(1), Duration::from_secs(1));
    assert_eq!(unavailable_backoff(3), Duration::from_secs(4));
}

// The cases below follow the reference parser's test suite where it states RFC 9309
// behaviour (its own extensions, such as `index.html` meaning its directory, are not
// followed; where it differs from RFC 9309 on percent-encoding the RFC is).

#[test]
fn reference_user_agent_and_group_syntax() {
    let url = "http://foo.bar/x/y";
    assert!(!allowed("user-agent: FooBot\ndisallow: /\n", "FooBot", url));
    assert!(allowed("foo: FooBot\nbar: /\n", "FooBot", url));
    // The reference parser accepts a missing colon.
    assert!(!allowed("user-agent FooBot\ndisallow /\n", "FooBot", url));
    // Several user-agent lines share one group, blank lines and comments included.
    let shared = "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n";
    assert!(allowed(shared, "FooBot", "http://foo.bar/x/b"));
    assert!(allowed(shared, "FooBot", "http://foo.bar/z/d"));
    assert!(!allowed(shared, "FooBot", "http://foo.bar/y/c"));
    assert!(allowed(shared, "BarBot", "http://foo.bar/y/c"));
    assert!(allowed(shared, "BarBot", "http://foo.bar/w/a"));
    assert!(!allowed(shared, "BarBot", "http://foo.bar/z/d"));
    assert!(allowed(shared, "BazBot", "http://foo.bar/z/d"));
    // Rules outside any group are ignored.
    for agent in ["FooBot", "BarBot", "BazBot"] {
        assert!(
            !allowed(shared, agent, "http://foo.bar/foo/bar/"),
            "{agent}"
        );
    }
    let comments =
        "User-agent: FooBot # a comment\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n";
    assert!(allowed(comments, "FooBot", "http://foo.bar/foo/bar"));
    assert!(!allowed(comments, "FooBot", "http://foo.bar/foo/quz"));
}

#[test]
fn reference_groups_are_merged_and_star_is_the_fallback() {
    let merged = "user-agent: FooBot\ndisallow: /a\nuser-agent: BarBot\ndisallow: /b\nuser-agent: foobot\ndisallow: /c\n";
    assert!(!allowed(merged, "FooBot", "http://foo.bar/a"));
    assert!(allowed(merged, "FooBot", "http://foo.bar/b"));
    assert!(!allowed(merged, "FooBot", "http://foo.bar/c"));
    let url = "http://foo.bar/x/y";
    assert!(allowed("", "FooBot", url));
    let global = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n";
    assert!(!allowed(global, "FooBot", url));
    assert!(allowed(global, "BarBot", url));
    let only_specific = "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n";
    assert!(allowed(only_specific, "QuxBot", url));
    // A group naming us, even with no rules, means the `*` group is not ours.
    assert!(allowed(
        "user-agent: *\ndisallow: /\nuser-agent: FooBot\n",
        "FooBot",
        url
    ));
    // Agent values are case-insensitive and compared as product tokens.
    for ua in [
        "FOOBOT",
        "foobot",
        "FoObOt",
        "FooBot/2.1",
        "FooBot (+http://x)",
    ] {
        let body = format!("User-agent: {ua}\nDisallow: /\n");
        assert!(!allowed(&body, "FooBot", url), "{ua}");
    }
    assert!(allowed(
        "User-agent: FooBotty\nDisallow: /\n",
        "FooBot",
        url
    ));
    let longest = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n";
    assert!(allowed(longest, "FooBot", "http://foo.bar/x/page"));
    assert!(!allowed(longest, "FooBot", "http://foo.bar/y/page"));
}

#[test]
fn reference_directives_are_case_insensitive() {
    for body in [
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    ] {
        assert!(allowed(body, "FooBot", "http://foo.bar/x/y"), "{body}");
        assert!(!allowed(body, "FooBot", "http://foo.bar/a/b"), "{body}");
    }
    // Paths are case-sensitive.
    let body = "user-agent: FooBot\ndisallow: /X/\n";
    assert!(allowed(body, "FooBot", "http://foo.bar/x/y"));
    assert!(!allowed(body, "FooBot", "http://foo.bar/X/y"));
}

#[test]
fn reference_longest_match() {
    let url = "http://foo.bar/x/page.html";
    for body in [
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/page.html\n",
    ] {
        assert!(allowed(body, "FooBot", url));
    }
    let body = "user-agent: FooBot\ndisallow: /x/\nallow: /x/page.html\n";
    assert!(allowed(body, "FooBot", url));
    let body = "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n";
    assert!(allowed(body, "FooBot", url));
    assert!(!allowed(body, "FooBot", "http://foo.bar/x/"));
    let body = "user-agent: FooBot\ndisallow: \nallow: \n";
    assert!(allowed(body, "FooBot", url));
    let body = "user-agent: FooBot\ndisallow: /\nallow: /\n";
    assert!(allowed(body, "FooBot", url));
    let body = "user-agent: FooBot\ndisallow: /x\nallow: /x/\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/x"));
    assert!(allowed(body, "FooBot", "http://foo.bar/x/"));
    let body = "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/page.html"));
    assert!(allowed(body, "FooBot", "http://foo.bar/page"));
    let body = "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n";
    assert!(allowed(body, "FooBot", "http://foo.bar/x/page.html"));
    assert!(!allowed(body, "FooBot", "http://foo.bar/x/y.html"));
    let body = "user-agent: FooBot\nallow: /$\ndisallow: /\n";
    assert!(allowed(body, "FooBot", "http://foo.bar/"));
    assert!(!allowed(body, "FooBot", "http://foo.bar/page.html"));
}

#[test]
fn reference_special_characters() {
    let body = "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/foo/bar/quz"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo/quz"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo//quz"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo/bax/quz"));
    let body = "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/foo/bar"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo/bar/qux"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo/bar/"));
    assert!(allowed(body, "FooBot", "http://foo.bar/foo/bar/baz"));
    // The query is matched; the fragment is not.
    let body =
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n";
    assert!(allowed(
        body,
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par"
    ));
    let body = "User-agent: *\nDisallow: /*?\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/a?b"));
    assert!(allowed(body, "FooBot", "http://foo.bar/a#b?"));
}

#[test]
fn reference_percent_encoding() {
    let disallow_all_but =
        |allow: &str| format!("User-agent: FooBot\nDisallow: /\nAllow: {allow}\n");
    // A 3-byte character in the pattern is its UTF-8 octets, percent-encoded.
    let body = disallow_all_but("/foo/bar/ツ");
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/%E3%83%84"));
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/%e3%83%84"));
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/ツ"));
    let body = disallow_all_but("/foo/bar/%E3%83%84");
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/%E3%83%84"));
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/ツ"));
    // RFC 9309 §2.2.2: encoded unreserved characters are the characters (the reference parser
    // matches these literally only).
    let body = disallow_all_but("/foo/bar/%62%61%7A");
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/baz"));
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/%62%61%7A"));
    let body = disallow_all_but("/foo/bar/baz");
    assert!(allowed(&body, "FooBot", "http://foo.bar/foo/bar/%62%61%7a"));
    // An encoded `/` is not a `/`.
    let body = "User-agent: *\nDisallow: /a/b\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/a/b"));
    assert!(allowed(body, "FooBot", "http://foo.bar/a%2Fb"));
    let body = "User-agent: *\nDisallow: /a%2fb\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/a%2Fb"));
    assert!(allowed(body, "FooBot", "http://foo.bar/a/b"));
    let body = "User-agent: *\nDisallow: /a b\n";
    assert!(!allowed(body, "FooBot", "http://foo.bar/a%20b"));
}

#[test]
fn robots_txt_itself_is_always_allowed() {
    let body = "User-agent: *\nDisallow: /\n";
    assert!(allowed(body, "FooBot", "http://foo.bar/robots.txt"));
    assert!(!allowed(body, "FooBot", "http://foo.bar/robots.txt?x"));
}

#[test]
fn line_ends_bom_and_long_lines() {
    for body in [
        "User-agent: *\nDisallow: /a\n",
        "User-agent: *\r\nDisallow: /a\r\n",
        "User-agent: *\rDisallow: /a\r",
        "\u{feff}User-agent: *\nDisallow: /a",
        "  User-agent:*  \n\t Disallow:/a \t\n",
    ] {
        let rules = RobotsRules::parse("FooBot", body.as_bytes());
        assert!(!rules.allows("http://foo.bar/a"), "{body:?}");
        assert!(rules.allows("http://foo.bar/b"), "{body:?}");
        assert_eq!(rules.skipped_lines, 0, "{body:?}");
    }
    let long = format!(
        "User-agent: *\nDisallow: /{}\nDisallow: /a\n",
        "x".repeat(MAX_LINE_BYTES)
    );
    let rules = RobotsRules::parse("FooBot", long.as_bytes());
    assert_eq!(rules.skipped_lines, 1);
    assert!(rules.notes[0].starts_with("line 2: longer than"));
    assert!(!rules.allows("http://foo.bar/a"));
}

#[test]
fn unreadable_lines_are_skipped_not_fatal() {
    let body = b"User-agent: *\nDisallow: /private/\nthis is not a rule\nHost: example\nCrawl-delay: soon\nCrawl-delay: -3\n\xff\xfe: \xfd\nDisallow: /*\xc3\x28$\nDisallow: /also-private\n";
    let rules = RobotsRules::parse("crawler", body);
    assert!(!rules.allows("http://a.test/private/secret"));
    assert!(!rules.allows("http://a.test/also-private"));
    assert!(rules.allows("http://a.test/public"));
    assert_eq!(rules.crawl_delay, None);
    assert_eq!(rules.skipped_lines, 5, "{:?}", rules.notes);
    assert_eq!(rules.notes.len(), 5);
    assert!(
        rules.notes[1].contains("unknown directive `Host`"),
        "{:?}",
        rules.notes
    );
}

#[test]
fn eighty_wildcards_do_not_switch_the_rules_off() {
    let body = format!(
        "User-agent: *\nDisallow: /private/\nDisallow: /{}$\n",
        "*a".repeat(80)
    );
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    assert_eq!(rules.rule_count(), 2);
    assert_eq!(rules.skipped_lines, 0);
    assert!(!rules.allows("http://a.test/private/secret"));
    assert!(rules.allows("http://a.test/public"));
    assert!(!rules.allows(&format!("http://a.test/{}", "a".repeat(80))));
    assert!(rules.allows(&format!("http://a.test/{}", "a".repeat(79))));
}

#[test]
fn crawl_delay_and_sitemaps() {
    let body = "Crawl-delay: 7\nSitemap: http://a.test/s1.xml\nUser-agent: other\nCrawl-delay: 1\nUser-agent: *\nDisallow: /x\nsitemap: http://a.test/s2.xml\n";
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    // Our group has none: the one above every group applies.
    assert_eq!(rules.crawl_delay, Some(Duration::from_secs(7)));
    assert_eq!(
        rules.sitemaps,
        ["http://a.test/s1.xml", "http://a.test/s2.xml"]
    );
    let rules = RobotsRules::parse(
        "crawler",
        b"User-agent: *\nCrawl-delay: 0.5\nCrawl-delay: 9\n",
    );
    assert_eq!(rules.crawl_delay, Some(Duration::from_millis(500)));
    let rules = RobotsRules::parse("crawler", b"User-agent: *\nCrawl-delay: 0\n");
    assert_eq!(rules.crawl_delay, None);
    let rules = RobotsRules::parse("crawler", b"User-agent: *\nCrawl-delay: 1e300\n");
    assert_eq!(rules.crawl_delay, Some(Duration::from_secs(86_400)));
    for bad in ["inf", "NaN", "-1", ""] {
        let body = format!("User-agent: *\nCrawl-delay: {bad}\n");
        let rules = RobotsRules::parse("crawler", body.as_bytes());
        assert_eq!(rules.crawl_delay, None, "{bad}");
        assert_eq!(rules.skipped_lines, 1, "{bad}");
    }
    let many: String = (0..MAX_SITEMAPS + 5)
        .map(|i| format!("Sitemap: http://a.test/{i}.xml\n"))
        .collect();
    let rules = RobotsRules::parse("crawler", many.as_bytes());
    assert_eq!(rules.sitemaps.len(), MAX_SITEMAPS);
    assert_eq!(rules.skipped_lines, 5);
}

#[test]
fn rules_without_any_user_agent_apply_to_everyone() {
    let rules = RobotsRules::parse("crawler", b"Disallow: /private/\n");
    assert!(!rules.allows("http://a.test/private/x"));
    assert!(rules.allows("http://a.test/x"));
    // With groups in the file, rules above them belong to none.
    let rules = RobotsRules::parse(
        "crawler",
        b"Disallow: /private/\nUser-agent: *\nDisallow: /other/\n",
    );
    assert!(rules.allows("http://a.test/private/x"));
    assert!(!rules.allows("http://a.test/other/x"));
    assert_eq!(rules.skipped_lines, 1);
}

#[test]
fn patterns_without_a_leading_slash_and_relative_urls() {
    let rules = RobotsRules::parse("crawler", b"User-agent: *\nDisallow: private/\n");
    assert!(!rules.allows("http://a.test/private/x"));
    assert!(!rules.allows("/private/x"));
    assert!(rules.allows("/public"));
    assert!(rules.allows(""));
}

#[test]
fn rule_cap_is_recorded() {
    let body: String = std::iter::once("User-agent: *\n".to_string())
        .chain((0..MAX_RULES + 3).map(|i| format!("Disallow: /{i}x\n")))
        .collect();
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    assert_eq!(rules.rule_count(), MAX_RULES);
    assert_eq!(rules.skipped_lines, 3);
    assert!(rules.notes[0].contains("more than"), "{:?}", rules.notes);
    assert!(!rules.allows("http://a.test/0x"));
}

#[test]
fn a_hostile_file_costs_memory_and_time_linear_in_its_size() {
    let body = adversarial_body(500 * 1024);
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    assert!(rules.rule_count() > 3000, "{}", rules.rule_count());
    assert_eq!(rules.skipped_lines, 0);
    assert!(
        rules.heap_bytes() <= body.len() * 2,
        "{} bytes held for a {}-byte file",
        rules.heap_bytes(),
        body.len()
    );
    assert!(!rules.allows("http://a.test/private/secret"));

    let pattern_bytes = rules.patterns.len() as u64;
    let count = rules.rule_count() as u64;
    // Paths that match many segments of many rules before failing, and a long plain one.
    let mut near_miss = String::from("/");
    for i in 0..40u32 {
        for j in 0..19 {
            near_miss.push_str(&format!("{i:x}q{j}"));
        }
    }
    for path in [near_miss, format!("/{}", "a".repeat(2000))] {
        let mut work = 0;
        assert!(rules.allows_counting(&format!("http://a.test{path}"), &mut work));
        let bound = 2 * pattern_bytes + count * (path.len() as u64 + 1);
        assert!(work <= bound, "{work} > {bound}");
    }

    // Long literal segments against a path of their first letter: a backtracking glob spends
    // path × segment on each rule.
    let mut body = String::from("User-agent: *\n");
    while body.len() < 500 * 1024 - 200 {
        body.push_str(&format!("Disallow: /*{}b*c\n", "a".repeat(100)));
    }
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    let path = format!("/{}", "a".repeat(2000));
    let mut work = 0;
    assert!(rules.allows_counting(&format!("http://a.test{path}"), &mut work));
    let bound =
        2 * rules.patterns.len() as u64 + rules.rule_count() as u64 * (path.len() as u64 + 1);
    assert!(work <= bound, "{work} > {bound}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_body_and_path_is_answered(
        body in proptest::collection::vec(
            prop_oneof![
                4 => any::<u8>(),
                1 => Just(b'\n'),
                1 => Just(b'*'),
                1 => Just(b'$'),
                1 => Just(b'%'),
            ],
            0..600,
        ),
        prefix in prop_oneof![
            Just(String::from("User-agent: *\nDisallow: ")),
            Just(String::from("user-agent: crawler\nallow: /a*\ndisallow: ")),
            Just(String::new()),
        ],
        path in "[a*$%/?#\u{e9} ]{0,40}",
    ) {
        let mut full = prefix.into_bytes();
        full.extend_from_slice(&body);
        let rules = RobotsRules::parse("crawler", &full);
        let mut work = 0;
        let url = format!("http://a.test/{path}");
        rules.allows_counting(&url, &mut work);
        rules.allows(&path);
        let bound = 2 * rules.patterns.len() as u64 + rules.rule_count() as u64 * (url.len() as u64 * 3 + 1);
        prop_assert!(work <= bound);
        prop_assert!(rules.heap_bytes() <= 64 + full.len() * 9 / 2 + rules.rule_count() * 20 + 2048);
    }

    #[test]
    fn structured_files_agree_with_a_direct_reading(
        rules in proptest::collection::vec(("[ab/*]{0,5}", any::<bool>(), any::<bool>()), 0..6),
        path in "/[ab/]{0,8}",
    ) {
        let mut body = String::from("User-agent: *\n");
        for (pattern, allow, anchored) in &rules {
            body.push_str(if *allow { "Allow: /" } else { "Disallow: /" });
            body.push_str(pattern);
            if *anchored {
                body.push('$');
            }
            body.push('\n');
        }
        // The most octets win, then Allow; an exponential matcher decides each rule.
        fn reference(p: &[u8], anchored: bool, s: &[u8]) -> bool {
            match p.split_first() {
                None => !anchored || s.is_empty(),
                Some((b'*', rest)) => (0..=s.len()).any(|i| reference(rest, anchored, &s[i..])),
                Some((c, rest)) => s.first() == Some(c) && reference(rest, anchored, &s[1..]),
            }
        }
        let mut best: Option<(usize, bool)> = None;
        for (pattern, allow, anchored) in &rules {
            let full = format!("/{pattern}");
            if reference(full.as_bytes(), *anchored, path.as_bytes()) {
                let key = (full.len() + usize::from(*anchored), *allow);
                if best.is_none_or(|b| key > b) {
                    best = Some(key);
                }
            }
        }
        let expected = best.is_none_or(|(_, allow)| allow);
        let parsed = RobotsRules::parse("crawler", body.as_bytes());
        prop_assert_eq!(parsed.allows(&format!("http://a.test{path}")), expected, "{}", body);
    }
}

#[test]
fn verdict_names_the_deciding_rule_and_its_line() {
    let body = "# comment\nUser-agent: *\nDisallow: /private/\nAllow: /private/open\r\nDisallow: /*.pdf$\n";
    let rules = RobotsRules::parse("crawler", body.as_bytes());
    let rule = |line, allow, pattern: &str| Verdict {
        allowed: allow,
        reason: Reason::Rule {
            line,
            allow,
            pattern: pattern.to_string(),
        },
    };
    assert_eq!(
        rules.verdict("http://a.test/private/x"),
        rule(3, false, "/private/")
    );
    assert_eq!(
        rules.verdict("http://a.test/private/open/y"),
        rule(4, true, "/private/open")
    );
    assert_eq!(
        rules.verdict("http://a.test/a.pdf"),
        rule(5, false, "/*.pdf$")
    );
    assert_eq!(
        rules.verdict("http://a.test/public").reason,
        Reason::NoMatchingRule
    );
    assert_eq!(
        rules.verdict("http://a.test/robots.txt").reason,
        Reason::RobotsTxt
    );
    assert_eq!(
        source_line(body.as_bytes(), 4).as_deref(),
        Some("Allow: /private/open")
    );
    assert_eq!(source_line(body.as_bytes(), 0), None);
    assert_eq!(source_line(body.as_bytes(), 6), None);
    // Of two equal rules the first in the file is named; a rule in two groups keeps its line.
    let rules = RobotsRules::parse(
        "crawler",
        b"User-agent: crawler\nUser-agent: *\nDisallow: /a\nDisallow: /a\n",
    );
    assert_eq!(rules.verdict("/a/b"), rule(3, false, "/a"));
    // Agrees with `allows` everywhere.
    for url in ["/", "/a", "/b", "/robots.txt"] {
        assert_eq!(rules.verdict(url).allowed, rules.allows(url), "{url}");
    }
}

#[test]
fn a_byte_order_mark_cut_short_is_skipped_like_a_whole_one() {
    for bom in [&b"\xEF\xBB\xBF"[..], b"\xEF\xBB", b"\xEF"] {
        let mut body = bom.to_vec();
        body.extend_from_slice(b"User-agent: foo\nDisallow: /x\n");
        let rules = RobotsRules::parse("foo", &body);
        assert_eq!(rules.skipped_lines, 0, "{bom:?}");
        assert!(!rules.allows("/x"), "{bom:?}");
        assert!(RobotsRules::parse("bar", &body).allows("/x"), "{bom:?}");
        assert_eq!(source_line(&body, 1).as_deref(), Some("User-agent: foo"));
    }
    // Anything else before the first directive makes that line unreadable.
    let rules = RobotsRules::parse("foo", b"\xEF\x11\xBFUser-agent: foo\nDisallow: /x\n");
    assert_eq!(rules.skipped_lines, 1);
}

#[test]
fn other_records_do_not_end_a_list_of_user_agents() {
    // Crawl-delay is an other record (RFC 9309 §2.2.4): `yourbot` joins `mybot`'s group, and the
    // delay goes to the agents named before it.
    let body = "User-agent: mybot\nCrawl-delay: 10\nUser-agent: yourbot\nDisallow: /private/\n";
    let mybot = RobotsRules::parse("mybot", body.as_bytes());
    assert!(!mybot.allows("/private/x"));
    assert_eq!(mybot.crawl_delay, Some(Duration::from_secs(10)));
    let yourbot = RobotsRules::parse("yourbot", body.as_bytes());
    assert!(!yourbot.allows("/private/x"));
    assert_eq!(yourbot.crawl_delay, None);
}

#[test]
fn product_tokens_end_at_the_first_character_outside_a_token() {
    for value in ["One, Two", "One<BR>", "one/1.0", "ONE (+x)", "One#c"] {
        let body = format!("User-agent: {value}\nDisallow: /\n");
        assert!(!allowed(&body, "One", "/x"), "{value}");
    }
    assert!(allowed("User-agent: Onex\nDisallow: /\n", "One", "/x"));
    assert!(!allowed("User-agent: *<BR>\nDisallow: /\n", "Any", "/x"));
    assert!(allowed("User-agent: *bot\nDisallow: /\n", "Any", "/x"));
    assert_eq!(agent_token("  FooBot, BarBot"), "FooBot");
}

#[test]
fn utf16_files_with_a_byte_order_mark_are_decoded() {
    let text = "User-agent: *\nDisallow: /profile\n";
    for (bom, encode) in [
        ([0xFF, 0xFE], u16::to_le_bytes as fn(u16) -> [u8; 2]),
        ([0xFE, 0xFF], u16::to_be_bytes),
    ] {
        let mut body = bom.to_vec();
        body.extend(text.encode_utf16().flat_map(encode));
        let rules = RobotsRules::parse("foobot", &body);
        assert!(!rules.allows("/profile"));
        assert_eq!(
            rules.verdict("/profile").reason,
            Reason::Rule {
                line: 2,
                allow: false,
                pattern: "/profile".into()
            }
        );
        assert_eq!(source_line(&body, 2).as_deref(), Some("Disallow: /profile"));
    }
}

#[test]
fn a_sitemap_named_twice_is_kept_once() {
    let rules = RobotsRules::parse(
        "crawler",
        b"Sitemap: http://a.test/s.xml\nsitemap: http://a.test/s.xml\nSitemap: http://a.test/t.xml\n",
    );
    assert_eq!(
        rules.sitemaps,
        ["http://a.test/s.xml", "http://a.test/t.xml"]
    );
    assert_eq!(rules.skipped_lines, 0);
}
