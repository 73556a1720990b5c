//! robots.txt: fetching, the rules for our user agent, and the per-host cache entry.
//!
//! Parsing and matching are texting_robots' (RFC 9309: groups by user agent with `*` as
//! the fallback, `Allow`/`Disallow` with `*` and `$` wildcards, longest match wins and
//! `Allow` wins a tie, `Crawl-delay`), a maintained crate tested against Google's
//! reference cases; writing our own would only add bugs. This module adds what the
//! crate leaves to the crawler, following RFC 9309 §2.3 and common practice:
//! - a 2xx answer is parsed; only the first 500 KiB are read (RFC 9309 asks crawlers to
//!   parse at least 500 KiB, and a larger file is almost always an error);
//! - redirects are followed up to 5 hops; each hop is a request of its own, scheduled by
//!   the frontier under the politeness of the host it goes to and passing the request gate
//!   (`crate::gate`); a hop the gate refuses ends the chain like the hop limit does;
//! - any other 4xx means "no rules": everything is allowed;
//! - 5xx, 429 or no answer means "unreachable": nothing on the host is fetched until a
//!   later attempt succeeds; attempts back off (1 s, 2 s, 4 s, …) and after
//!   `MAX_UNAVAILABLE_ATTEMPTS` the host's queued URLs are given up with that reason,
//!   so a host whose robots.txt never answers cannot hold the crawl open forever;
//! - an entry is kept for `politeness.robots_ttl_secs` (24 h by default), then fetched
//!   again before the host's next page.
//!
//! The robots.txt request is a request like any other: the frontier schedules it under
//! the host's rate limit and concurrency cap.

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::fetch::{FetchError, FetchErrorKind, Fetcher};
use crate::gate::RequestKind;

/// RFC 9309 §2.5: crawlers must parse at least 500 KiB.
pub const ROBOTS_MAX_BYTES: u64 = 500 * 1024;
/// RFC 9309 §2.3.1.2: follow at least five consecutive redirects.
pub const ROBOTS_MAX_REDIRECTS: u32 = 5;
/// Attempts at an unreachable robots.txt before the host's URLs are given up.
pub const MAX_UNAVAILABLE_ATTEMPTS: u32 = 5;

/// The rules that apply to us on one host.
#[derive(Debug)]
pub struct RobotsRules {
    robot: Option<texting_robots::Robot>,
    /// `Crawl-delay` for our group, if any.
    pub crawl_delay: Option<Duration>,
}

impl RobotsRules {
    /// Everything allowed (no robots.txt, or a 4xx).
    pub fn allow_all() -> Self {
        RobotsRules {
            robot: None,
            crawl_delay: None,
        }
    }

    /// Parses a robots.txt body for `agent` (the product token of our user agent).
    pub fn parse(agent: &str, body: &[u8]) -> Self {
        match texting_robots::Robot::new(agent, body) {
            Ok(robot) => {
                let crawl_delay = robot
                    .delay
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .map(|d| Duration::from_secs_f32(d.min(86_400.0)));
                RobotsRules {
                    robot: Some(robot),
                    crawl_delay,
                }
            }
            // The parser is forgiving; a file it still cannot read is treated like a
            // missing one, which is what RFC 9309 says for unparsable lines.
            Err(_) => Self::allow_all(),
        }
    }

    /// Whether `url` may be fetched.
    pub fn allows(&self, url: &str) -> bool {
        match &self.robot {
            Some(robot) => robot.allowed(url),
            None => true,
        }
    }
}

/// What fetching a host's robots.txt produced.
#[derive(Debug, Clone)]
pub enum RobotsOutcome {
    /// Rules to apply, and the body they were parsed from (`None`: no robots.txt or a 4xx,
    /// everything allowed). The frontier keeps the body in its disk cache so that a host
    /// evicted from memory gets its rules back without another fetch.
    Rules {
        rules: Arc<RobotsRules>,
        body: Option<Vec<u8>>,
    },
    /// Unreachable (5xx, 429, network error): allow nothing for now.
    Unavailable { reason: String },
    /// A redirect to `to`: the next hop, a request of its own (the frontier follows up to
    /// [`ROBOTS_MAX_REDIRECTS`] hops, then treats robots.txt as missing).
    Redirect { to: Url },
}

impl RobotsOutcome {
    /// No robots.txt (or one treated as missing): everything allowed.
    pub fn allow_all() -> Self {
        RobotsOutcome::Rules {
            rules: Arc::new(RobotsRules::allow_all()),
            body: None,
        }
    }
}

/// The robots.txt product token of a user agent: `crawler/0.1 (+url)` → `crawler`.
pub fn agent_token(user_agent: &str) -> String {
    user_agent
        .split(|c: char| c == '/' || c.is_whitespace())
        .next()
        .unwrap_or(user_agent)
        .to_string()
}

/// The robots.txt URL of the host with key `host_key` (`scheme://host[:port]`).
pub fn robots_url(host_key: &str) -> Result<Url, url::ParseError> {
    Url::parse(host_key).and_then(|u| u.join("/robots.txt"))
}

/// One request of a robots.txt fetch: `url` is the host's robots.txt or, after a redirect,
/// the hop to request next. A redirect is returned, not followed: every hop is a request of
/// its own, handed out by the frontier under its own host's politeness and passing the
/// request gate (see `crate::gate`); the frontier counts the hops.
pub async fn fetch_robots(fetcher: &Fetcher, url: &Url, agent: &str) -> RobotsOutcome {
    let fetched = match fetcher
        .fetch_capped(url, RequestKind::Robots, ROBOTS_MAX_BYTES)
        .await
    {
        Ok(fetched) => fetched,
        // A redirect the request gate refuses (off the crawl's sites, or into a private
        // network) is a redirect that cannot be followed: like one past the redirect
        // limit, robots.txt counts as unavailable (4xx), RFC 9309 §2.3.1.2.
        Err(FetchError {
            kind: FetchErrorKind::Refused,
            message,
        }) => {
            tracing::debug!("{url}: robots.txt {message}");
            return RobotsOutcome::allow_all();
        }
        Err(FetchError { message, .. }) => {
            return RobotsOutcome::Unavailable {
                reason: format!("robots.txt: {message}"),
            }
        }
    };
    match fetched.status {
        200..=299 => {
            let body = fetched.body.unwrap_or_default();
            RobotsOutcome::Rules {
                rules: Arc::new(RobotsRules::parse(agent, &body)),
                body: Some(body),
            }
        }
        301 | 302 | 303 | 307 | 308 => {
            let next = fetched
                .location
                .as_deref()
                .and_then(|location| url.join(location.trim()).ok());
            match next {
                Some(to) => RobotsOutcome::Redirect { to },
                None => RobotsOutcome::allow_all(),
            }
        }
        429 => RobotsOutcome::Unavailable {
            reason: "robots.txt: HTTP 429".into(),
        },
        400..=499 => RobotsOutcome::allow_all(),
        status => RobotsOutcome::Unavailable {
            reason: format!("robots.txt: HTTP {status}"),
        },
    }
}

/// Delay before attempt number `attempt` (1-based) at an unreachable robots.txt.
pub fn unavailable_backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.saturating_sub(1).min(12))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn backoff_grows() {
        assert_eq!(unavailable_backoff(1), Duration::from_secs(1));
        assert_eq!(unavailable_backoff(3), Duration::from_secs(4));
    }
}
