//! Fuzzing of robots.txt parsing and matching: for any bytes, `RobotsRules::parse`, `allows`
//! and `verdict` must return (never panic) and agree, the deciding line must exist, and what the
//! rules hold must stay linear in the body.
//!
//! The input is `body \0 path`: the bytes after the last NUL are the path asked about (as an
//! absolute URL and as given), the rest is the robots.txt body. The body is parsed for two
//! agents, one that a fuzzed `User-agent` line can name and `*`.

#![no_main]

use crawler::robots::RobotsRules;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let (body, path) = match data.iter().rposition(|&b| b == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (data, &b"/"[..]),
    };
    let path = String::from_utf8_lossy(path);
    for agent in ["a", "*"] {
        let rules = RobotsRules::parse(agent, body);
        rules.allows(&path);
        let url = format!("http://h.test/{path}");
        let verdict = rules.verdict(&url);
        assert_eq!(verdict.allowed, rules.allows(&url));
        // The deciding rule's line is a line of the body.
        if let crawler::robots::Reason::Rule { line, .. } = verdict.reason {
            assert!(crawler::robots::source_line(body, line).is_some(), "line {line}");
        }
        assert!(rules.allows("http://h.test/robots.txt"));
        // Patterns take at most 3 bytes per body byte (percent-encoding; 4.5 for a UTF-16
        // body), a rule 20 more, sitemaps and notes a few dozen bytes per line.
        let bound = 4096 + 8 * body.len() + 20 * rules.rule_count();
        assert!(rules.heap_bytes() <= bound, "{} > {bound}", rules.heap_bytes());
        let lines = body.iter().filter(|&&b| b == b'\n' || b == b'\r').count() + 1;
        assert!(rules.skipped_lines as usize <= lines);
    }
}
