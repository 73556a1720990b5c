//! Per-host robots.txt: what each host serves and how the ground truth reads it.
//!
//! With `features.robots`, host `i` serves variant `i % 5`:
//! 0. a `BadBot` group disallowing everything (must not apply to us) and `*` disallowing `/private/`;
//! 1. 404 (everything allowed);
//! 2. 503 to the first request, then `*` disallowing `/private/` (for the "5xx robots blocks the
//!    host until it recovers" test);
//! 3. `Allow: /private/open` beating `Disallow: /private/` by being longer (with the opt-in
//!    `crawl_delay` feature also `Crawl-delay: 1`);
//! 4. wildcards: `Disallow: /private/*.html$` and `Disallow: /private/page`.
//!
//! Without the feature every host answers 404. The ground truth parses the very body the
//! server sends ([`rules_for`]), with the RFC 9309 matching rules (longest match wins, `Allow`
//! wins ties, `*` and `$`), for a crawler whose user agent matches only the `*` group.

use super::graph::{BodyKind, Graph, Head};

const PLAIN: &str = "text/plain; charset=utf-8";

const BODY_BADBOT: &str = "# h0-style robots.txt\nUser-agent: BadBot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n";
const BODY_RECOVERED: &str = "User-agent: *\nDisallow: /private/\n";
const BODY_ALLOW: &str = "User-agent: *\nAllow: /private/open\nDisallow: /private/\n";
const BODY_ALLOW_DELAY: &str =
    "User-agent: *\nCrawl-delay: 1\nAllow: /private/open\nDisallow: /private/\n";
const BODY_WILDCARD: &str =
    "User-agent: *\nDisallow: /private/*.html$\nDisallow: /private/page\nDisallow:\n";

/// The server's answer to the `attempt`-th request for `http://h{host}.test/robots.txt`.
pub fn head(graph: &Graph, host: u32, attempt: u32) -> Head {
    let text = |status, body: &'static str| Head {
        status,
        content_type: PLAIN,
        redirect: None,
        delay: None,
        x_robots_tag: None,
        body: BodyKind::Fixed(body.as_bytes()),
    };
    if !graph.spec.features.robots {
        return text(404, "no robots.txt here\n");
    }
    match host % 5 {
        0 => text(200, BODY_BADBOT),
        1 => text(404, "no robots.txt here\n"),
        2 if attempt == 0 => text(503, "robots.txt temporarily unavailable\n"),
        2 => text(200, BODY_RECOVERED),
        3 if graph.spec.features.crawl_delay => text(200, BODY_ALLOW_DELAY),
        3 => text(200, BODY_ALLOW),
        _ => text(200, BODY_WILDCARD),
    }
}

/// One rule of the `*` group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub pattern: String,
}

/// The rules that apply to a `*` crawler on `host`, as the ground truth assumes the crawler
/// ends up with: the robots.txt of the first 2xx answer (a 5xx robots.txt recovers on the
/// next request), no rules for a 4xx.
pub fn rules_for(graph: &Graph, host: u32) -> Vec<Rule> {
    for attempt in 0..4 {
        let head = head(graph, host, attempt);
        match (head.status, head.body) {
            (200..=299, BodyKind::Fixed(body)) => {
                return parse_star_group(&String::from_utf8_lossy(body));
            }
            (500..=599, _) => continue,
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

/// Parses the rules of the `User-agent: *` group(s).
pub fn parse_star_group(text: &str) -> Vec<Rule> {
    let mut rules = Vec::new();
    let mut in_star = false;
    let mut last_was_agent = false;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        match key.as_str() {
            "user-agent" => {
                if !last_was_agent {
                    in_star = false;
                }
                in_star |= value == "*";
                last_was_agent = true;
            }
            "allow" | "disallow" => {
                last_was_agent = false;
                if in_star && !value.is_empty() {
                    rules.push(Rule {
                        allow: key == "allow",
                        pattern: value.to_string(),
                    });
                }
            }
            _ => last_was_agent = false,
        }
    }
    rules
}

/// RFC 9309: the longest matching pattern decides; on a tie `Allow` wins; no match allows.
pub fn allowed(rules: &[Rule], path: &str) -> bool {
    if path == "/robots.txt" {
        return true;
    }
    let mut best: Option<(usize, bool)> = None;
    for rule in rules {
        if pattern_matches(rule.pattern.as_bytes(), path.as_bytes()) {
            let len = rule.pattern.len();
            best = match best {
                Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                _ => Some((len, rule.allow)),
            };
        }
    }
    best.is_none_or(|(_, allow)| allow)
}

fn pattern_matches(pattern: &[u8], path: &[u8]) -> bool {
    match pattern.split_first() {
        None => true,
        Some((b'$', [])) => path.is_empty(),
        Some((b'*', rest)) => (0..=path.len()).any(|i| pattern_matches(rest, &path[i..])),
        Some((c, rest)) => path.first() == Some(c) && pattern_matches(rest, &path[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WebSpec;

    #[test]
    fn star_group_is_picked_out() {
        let rules = parse_star_group(BODY_BADBOT);
        assert_eq!(
            rules,
            vec![Rule {
                allow: false,
                pattern: "/private/".into()
            }]
        );
        let grouped = parse_star_group(
            "User-agent: a\nUser-agent: *\nDisallow: /x\n\nUser-agent: b\nDisallow: /y\n",
        );
        assert_eq!(grouped.len(), 1);
    }

    #[test]
    fn matching_follows_rfc_9309() {
        let allow = parse_star_group(BODY_ALLOW);
        assert!(allowed(&allow, "/private/open"));
        assert!(!allowed(&allow, "/private/page"));
        assert!(allowed(&allow, "/p/1"));
        let wild = parse_star_group(BODY_WILDCARD);
        assert!(!allowed(&wild, "/private/doc.html"));
        assert!(allowed(&wild, "/private/doc.html5"));
        assert!(allowed(&wild, "/private/open"));
        assert!(!allowed(&wild, "/private/page"));
        assert!(allowed(&wild, "/robots.txt"));
        let tie = vec![
            Rule {
                allow: false,
                pattern: "/a".into(),
            },
            Rule {
                allow: true,
                pattern: "/a".into(),
            },
        ];
        assert!(allowed(&tie, "/a"));
    }

    #[test]
    fn hosts_get_their_variant() {
        let g = Graph::new(WebSpec::small(1));
        assert_eq!(head(&g, 1, 0).status, 404);
        assert_eq!(head(&g, 2, 0).status, 503);
        assert_eq!(head(&g, 2, 1).status, 200);
        assert_eq!(rules_for(&g, 2).len(), 1);
        let mut delayed = WebSpec::small(1);
        delayed.features.crawl_delay = true;
        let delayed = Graph::new(delayed);
        assert_eq!(
            head(&delayed, 3, 0).body,
            BodyKind::Fixed(BODY_ALLOW_DELAY.as_bytes())
        );
        assert_eq!(rules_for(&delayed, 3), rules_for(&g, 3));
        assert!(rules_for(&g, 1).is_empty());
        let mut off = WebSpec::small(1);
        off.features.robots = false;
        assert_eq!(head(&Graph::new(off), 0, 0).status, 404);
    }
}
