//! robots.txt: fetching, the rules for our user agent, and the per-host cache entry.
//!
//! # Rules ([`RobotsRules`])
//!
//! RFC 9309, parsed here in one pass over the body:
//! - groups: the `User-agent` lines of a group (several in a row share it, and other records
//!   such as `Crawl-delay` or `Sitemap` between them do not split it, RFC 9309 §2.2.4) name
//!   product tokens, compared case-insensitively with ours; a value's token is its leading run
//!   of letters, digits, `-` and `_` (`FooBot/1.2`, `FooBot, BarBot`, `FooBot<BR>` name
//!   `FooBot`, as the reference parser reads them), `*` the wildcard; all groups that name us
//!   are merged; if none does, the `*` groups are, and if there is none either,
//!   no rule applies. Rules before the first `User-agent` line belong to no group and are
//!   ignored, except in a file that has no `User-agent` line at all, where they apply to
//!   everyone (the protective reading of what such a file means);
//! - `Allow` / `Disallow` with `*` (any run of octets) and a final `$` (end of the path); the
//!   matching rule with the longest pattern wins, `Allow` wins a tie, no match allows, an
//!   empty `Disallow:` allows; patterns and the URL's path and query are compared after
//!   percent-encoding normalization (RFC 9309 §2.2.2: `%62` is `b`, `%2F` is not `/`, hex is
//!   uppercased, octets outside ASCII are encoded; a `*` or `$` in the URL is matched by a
//!   pattern's `%2A` or `%24`, §2.2.3);
//! - `Crawl-delay` (a non-negative number of seconds, capped at a day) of our group, or one
//!   above every group; `Sitemap:` lines from anywhere, collected in
//!   `RobotsRules::sitemaps`; directive names case-insensitive, with the common misspellings
//!   of `Disallow` and `User-agent` accepted (those of the reference parser and of
//!   crawler-commons); a UTF-8 BOM (also cut short, as the reference parser accepts it), a
//!   UTF-16 file with its BOM (decoded: read as UTF-8 it would allow everything), LF/CR/CRLF
//!   line ends, `#` comments.
//! - every rule keeps the number of its line: [`RobotsRules::verdict`] says which rule decided
//!   and where it is in the file (`crawler robots` prints it). The line numbers sit in an array
//!   beside the rules, so the matching loop of [`RobotsRules::allows`] does not carry them.
//!
//! What it guarantees, for any body:
//! - parsing never fails and never gives up on the file: a line it cannot take (no `:`, an
//!   unknown directive, a bad `Crawl-delay`, longer than [`MAX_LINE_BYTES`], past a cap such
//!   as [`MAX_RULES`]) is skipped and counted in `RobotsRules::skipped_lines`, the first few
//!   with a reason in `RobotsRules::notes`; every other line still counts. A host cannot
//!   turn its `Disallow: /private/` off with one line we cannot read;
//! - memory is linear in the body: only our group's rules are kept, their canonical patterns
//!   back to back in one string (at most 3 bytes per body byte, 1 for ASCII, 4.5 for a
//!   UTF-16 body) plus 20 bytes a
//!   rule (16 for the rule, 4 for its line number); no automaton is built;
//! - time is linear: parsing is one pass; [`RobotsRules::allows`] costs
//!   O(Σ pattern + rules × path) at worst (each pattern is matched in O(pattern + path), see
//!   `pattern`'s doc), and stops at the first, most specific, matching rule.
//!
//! `cargo bench --bench robots` measures a hostile 500 KiB file: a few ms to parse, under
//! 1 MiB of peak heap; thousands of `allows` a second, tens in the worst case (every one of
//! ~4,400 rules scanning a 2 KiB path).
//!
//! Hand-written, because what is available was measured and failed one of these: a crate
//! that compiles a regex per wildcard rule held >100 MiB for a 500 KiB file of a few thousand
//! `*`/`$` rules and rejected the whole file over one rule with 80 wildcards (its size limit),
//! which made us allow everything; a port of the reference parser (the one published with
//! RFC 9309) re-parses the body on every query (about 5 queries per second on that file).
//! The reference parser's REP test cases (google/robotstxt `robots_test.cc`) and
//! crawler-commons' robots tests run as tables in `tests/api/robots_suites.rs`, with their data
//! under `tests/data/robots/`; where we differ on purpose, the table says so and why.
//!
//! # Fetching (`robots_outcome`)
//!
//! Following RFC 9309 §2.3 and common practice:
//! - a 2xx answer is parsed; only the first 500 KiB are read (RFC 9309 asks crawlers to
//!   parse at least 500 KiB, and a larger file is almost always an error);
//! - redirects are followed up to 5 hops; each hop is a request of its own, scheduled by
//!   the frontier under the politeness of the host it goes to and passing the request gate
//!   (`crate::gate`); a hop the gate refuses ends the chain like the hop limit does;
//! - any other 4xx means "no rules": everything is allowed;
//! - 5xx, 429 or no answer means "unreachable": nothing on the host is fetched until a
//!   later attempt succeeds; attempts back off (1 s, 2 s, 4 s, …) and after
//!   `MAX_UNAVAILABLE_ATTEMPTS` the host's queued URLs are given up with that reason,
//!   so a host whose robots.txt never answers cannot hold the crawl open forever; a
//!   failure that no retry can mend (a TLS certificate the crawl does not trust) gives
//!   the host's URLs up at the first attempt;
//! - an entry is kept for `politeness.robots_ttl_secs` (24 h by default), then fetched
//!   again before the host's next page.
//!
//! The robots.txt request is a request like any other: the frontier schedules it under
//! the host's rate limit and concurrency cap.

mod pattern;
mod rules;
#[cfg(test)]
mod tests;

pub use rules::{
    source_line, Reason, RobotsRules, Verdict, MAX_LINE_BYTES, MAX_NOTES, MAX_RULES, MAX_SITEMAPS,
};

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::fetch::{FetchError, FetchErrorKind};

/// RFC 9309 §2.5: crawlers must parse at least 500 KiB.
pub const ROBOTS_MAX_BYTES: u64 = 500 * 1024;
/// RFC 9309 §2.3.1.2: follow at least five consecutive redirects.
pub(crate) const ROBOTS_MAX_REDIRECTS: u32 = 5;
/// Attempts at an unreachable robots.txt before the host's URLs are given up.
pub(crate) const MAX_UNAVAILABLE_ATTEMPTS: u32 = 5;

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
    /// Unreachable (5xx, 429, network error): allow nothing for now. `permanent`: asking
    /// again cannot help (the host's TLS certificate is not trusted), so the host's URLs are
    /// given up at once instead of after `MAX_UNAVAILABLE_ATTEMPTS` backed-off attempts.
    Unavailable { reason: String, permanent: bool },
    /// A redirect to `to`: the next hop, a request of its own (the frontier follows up to
    /// `ROBOTS_MAX_REDIRECTS` hops, then treats robots.txt as missing).
    Redirect { to: Url },
}

impl RobotsOutcome {
    /// What the record of a URL given up because of this outcome says (empty unless the
    /// robots.txt is unavailable).
    pub(crate) fn give_up_reason(&self) -> String {
        match self {
            RobotsOutcome::Unavailable {
                reason,
                permanent: true,
            } => format!("{reason}; not asked again"),
            RobotsOutcome::Unavailable { reason, .. } => {
                format!("{reason}; gave up after repeated attempts")
            }
            RobotsOutcome::Rules { .. } | RobotsOutcome::Redirect { .. } => String::new(),
        }
    }

    /// No robots.txt (or one treated as missing): everything allowed.
    pub(crate) fn allow_all() -> Self {
        RobotsOutcome::Rules {
            rules: Arc::new(RobotsRules::allow_all()),
            body: None,
        }
    }
}

/// The robots.txt product token of a user agent: `crawler/0.1 (+url)` → `crawler`. The same
/// reading as a `User-agent` line's value gets (see `rules::product_token`), so that a crawl
/// matches the group written for it.
pub fn agent_token(user_agent: &str) -> String {
    let token = rules::product_token(user_agent.trim_start().as_bytes());
    String::from_utf8_lossy(token).into_owned()
}

/// The robots.txt URL of the host with key `host_key` (`scheme://host[:port]`).
pub(crate) fn robots_url(host_key: &str) -> Result<Url, url::ParseError> {
    Url::parse(host_key).and_then(|u| u.join("/robots.txt"))
}

/// What one robots.txt request at `url` says, from its response (or its failure). `url`
/// is the host's robots.txt or, after a redirect, the hop requested. A redirect is returned,
/// not followed: every hop is a request of its own, handed out by the frontier under its own
/// host's politeness and passing the request gate (see `crate::gate`); the frontier counts
/// the hops.
pub(crate) fn robots_outcome(
    url: &Url,
    fetched: Result<crate::fetch::Fetched, FetchError>,
    agent: &str,
) -> RobotsOutcome {
    let fetched = match fetched {
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
        Err(FetchError { message, kind }) => {
            return RobotsOutcome::Unavailable {
                reason: format!("robots.txt: {message}"),
                permanent: kind == FetchErrorKind::Certificate,
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
            permanent: false,
        },
        400..=499 => RobotsOutcome::allow_all(),
        status => RobotsOutcome::Unavailable {
            reason: format!("robots.txt: HTTP {status}"),
            permanent: false,
        },
    }
}

/// Delay before attempt number `attempt` (1-based) at an unreachable robots.txt.
pub(crate) fn unavailable_backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.saturating_sub(1).min(12))
}
