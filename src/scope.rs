//! Crawl scope and crawler-trap defenses at the URL level: which of the links a crawl
//! discovers it may take on at all.
//!
//! # What
//! A [`Scope`] is compiled once from the `[scope]` section ([`ScopeOptions`]) and the seed
//! URLs, then asked about every new link ([`Scope::check`]). It answers `Ok(())` or the
//! first rule the URL breaks ([`OutOfScope`]), whose [`OutOfScope::as_str`] name is what
//! counters and `summary.json` report. It decides on the URL alone: robots.txt, the
//! per-host page cap (held here as [`ScopeOptions::max_pages_per_host`], enforced by the
//! driver), `max_depth` and the private-address check of *resolved names* (which uses
//! [`is_private_ip`]) live elsewhere.
//!
//! # Guarantees
//! - `check` never panics and does not allocate (except for a path of more than 64
//!   segments, possible only when `max_path_segments` allows it); it is a few hash
//!   lookups, one public-suffix lookup (`seed-domains`), at most two [`regex::RegexSet`]
//!   scans and one pass over the path. The crawl's screening calls `check_link`, which
//!   gives the same answers and skips the host lookups for a host it checked recently (a
//!   `SiteMemo` per screening thread). `Scope` is `Send + Sync`, so every parse thread can
//!   share one.
//! - The rules are checked in a fixed order and the first that fails is reported:
//!   [`TooLong`](OutOfScope::TooLong), [`PrivateAddress`](OutOfScope::PrivateAddress),
//!   [`OffSite`](OutOfScope::OffSite), [`Denied`](OutOfScope::Denied),
//!   [`NotAllowed`](OutOfScope::NotAllowed), [`TooManySegments`](OutOfScope::TooManySegments),
//!   [`RepeatedSegments`](OutOfScope::RepeatedSegments). So one refused link is counted
//!   once, under one name.
//! - A bad pattern is refused by [`Scope::new`] (and [`ScopeOptions::validate`]) naming the
//!   list (`scope.allow` / `scope.deny`), the index and the pattern: before any work starts.
//!
//! # Why
//! A crawler that follows every link leaves the site it was asked to crawl within a few
//! hops, can be steered by any public page into an internal network (`http://10.0.0.1/`,
//! `http://169.254.169.254/` — server-side request forgery), and gets lost in *crawler
//! traps*: sites that generate endless URLs, most often a relative link resolved against a
//! path the server answers for any suffix (`/a/b/` → `/a/b/a/b/` → …), or calendars. The
//! defenses are the ones production crawlers converged on: Heritrix's scope rules
//! (`SurtPrefixedDecideRule` for hosts/domains, `MatchesRegexDecideRule` /
//! `NotMatchesRegexDecideRule`, `TooManyPathSegmentsDecideRule`,
//! `PathologicalPathDecideRule`), and Nutch's `db.ignore.external.links` (with
//! `db.ignore.external.links.mode` = `byHost` / `byDomain`), `regex-urlfilter.txt` (its
//! default rule `-.*(/[^/]+)/[^/]+\1/[^/]+\1/` "to break loops") and
//! `urlfilter.validator` / URL length limits. Calendars are not recognisable from one
//! URL: they are recognised by their pages, which differ only in their numbers
//! ([`crate::near_duplicate`]); `max_depth` and the per-host page cap are the backstops.
//!
//! # The rules, exactly
//! A URL is checked as given (the crawl passes canonical URLs: http(s), lowercase host,
//! default port removed, dot segments resolved). A limit of `0` switches its rule off.
//! 1. **Length** (`too_long`): `url.as_str().len()` (bytes, fragment included if any)
//!    must be ≤ `max_url_length` (default 8192: the request-line limit of common servers,
//!    Apache's 8,190 and nginx's 8 KiB buffers; browsers send far longer URLs, and real
//!    sites have URLs past 2,048 bytes, so the older 2,048 cut pages of ordinary sites).
//! 2. **Private address** (`private_address`): unless `allow_private`, a URL whose host is
//!    an IP literal for which [`is_private_ip`] holds, or the name `localhost` or a name
//!    under `.localhost` (RFC 6761: always loopback), is refused — unless a seed is on that
//!    same IP (compared after unmapping `::ffff:a.b.c.d`) or that same name. Note the url
//!    crate has already turned `http://0x7f.1/` and `http://2130706433/` into `127.0.0.1`.
//! 3. **Site** (`off_site`), by `mode`:
//!    - `seed-hosts`: the host must equal a seed's host exactly (port and scheme ignored,
//!      so `http://a.test:8080/` is on the site of seed `https://a.test/`; `www.a.test` is
//!      not).
//!    - `seed-domains` (default): the host's *registrable domain* must equal a seed's,
//!      see [`registrable_domain`]: `shop.example.co.uk` is on the site of seed
//!      `www.example.co.uk` (both `example.co.uk`), `other.co.uk` is not, and
//!      `a.github.io` is not on the site of `b.github.io` (the private section of the list
//!      is used: those are different owners). IP literals compare exactly.
//!    - `any`: every host is on the site.
//!
//!    A URL without a host (not a crawlable URL) is always off-site. One trailing dot of a
//!    host is ignored (`example.com.` is `example.com`).
//! 4. **Deny** (`denied`): a URL matching any `deny` regex is refused. Deny wins over
//!    allow, and applies to seeds too.
//! 5. **Allow** (`not_allowed`): if `allow` is non-empty, a URL must match one of its
//!    regexes — except the seeds themselves (so `allow = ['^https://a\.test/docs/']` with
//!    seed `https://a.test/` crawls the home page and follows only the docs links).
//!
//!    Patterns use the [`regex`] crate's syntax and are *searched* in the full URL string
//!    (`url.as_str()`), not implicitly anchored: write `^…$` to anchor, `(?i)` to ignore
//!    case. Example: `deny = ['\.(pdf|zip)$', '[?&]sort=']`.
//! 6. **Path segments** (`too_many_segments`): the path must have ≤ `max_path_segments`
//!    segments (default 32). Segments are what lies between slashes, not counting the empty
//!    one after a trailing slash: `/` has 0, `/a` and `/a/` have 1, `/a//b` has 3.
//! 7. **Repeated segments** (`repeated_segments`): no block of 1 to [`MAX_PERIOD`] (8)
//!    consecutive path segments may occur more than `max_repeated_segments` times in a row
//!    (default 3). With the default, `/a/a/a/` and `/a/b/a/b/a/b/` pass, `/a/a/a/a/` and
//!    `/a/b/a/b/a/b/a/b/` and `/x/a/b/c/a/b/c/a/b/c/a/b/c/y` are traps. Empty segments count
//!    too (`/a/////` repeats the empty segment four times).
//!
//!    Why consecutive repetition and not "a segment value occurring more than N times
//!    anywhere in the path": the loops that generate endless paths (a relative link
//!    resolved against a path the server answers for any suffix, a `<base>` gone wrong)
//!    append the *same block* again and again, so they always produce an exactly periodic
//!    run, which this rule catches after N copies. A value recurring non-consecutively is
//!    normal in real URLs: `/api/v1/users/1/posts/1/comments/1/likes/1`,
//!    `/2026/11/11/`, `/en/news/en/sport/` — counting anywhere would refuse them. This is
//!    Heritrix's `PathologicalPathDecideRule` (regex `.*?/(.*?/)\1{N,}.*`, a block repeated
//!    more than N times in a row; its default N is 2, ours 3 to spare real paths), with the
//!    block length bounded so the check stays one cheap pass: with the default limits any
//!    block that could repeat 4 times within 32 segments has ≤ 8 segments, so the bound
//!    loses nothing. Nutch's default loop rule (`-.*(/[^/]+)/[^/]+\1/[^/]+\1/`, a segment
//!    recurring three times with one other segment between) refuses `/a/x/a/y/a/`, which
//!    is legitimate often enough (`/en/x/en/y/en/`) that we do not copy it.
//!
//! Only the path is examined for segments; the query string is subject to the length
//! limit and the regexes only.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::host::host_name;
use crate::normalize::Link;

/// The longest block of path segments whose consecutive repetition is detected.
pub const MAX_PERIOD: usize = 8;

/// Paths with up to this many segments are checked for repetition without allocating.
const STACK_SEGMENTS: usize = 64;

/// `[scope]`: where the crawl may go and the trap limits. Every field has the documented
/// default; `0` switches a limit off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScopeOptions {
    /// Which hosts are on the site: `"seed-hosts"`, `"seed-domains"` (default) or `"any"`.
    pub mode: ScopeMode,
    /// Regexes; if non-empty, a URL must match one (seeds are exempt).
    pub allow: Vec<String>,
    /// Regexes; a URL matching one is refused (deny wins over allow).
    pub deny: Vec<String>,
    /// Allow IP-literal hosts in private, loopback, link-local… ranges (default false).
    pub allow_private: bool,
    /// Longest URL in bytes (default 8192; 0 = unlimited).
    pub max_url_length: usize,
    /// Most path segments (default 32; 0 = unlimited).
    pub max_path_segments: usize,
    /// Most consecutive repetitions of a block of path segments (default 3; 0 = unlimited).
    pub max_repeated_segments: usize,
    /// Most pages fetched per host (default 0 = unlimited). Enforced by the driver.
    pub max_pages_per_host: u64,
}

impl Default for ScopeOptions {
    fn default() -> Self {
        ScopeOptions {
            mode: ScopeMode::SeedDomains,
            allow: Vec::new(),
            deny: Vec::new(),
            allow_private: false,
            max_url_length: 8192,
            max_path_segments: 32,
            max_repeated_segments: 3,
            max_pages_per_host: 0,
        }
    }
}

impl ScopeOptions {
    /// The keys of `[scope]`, for the config's `--set` error messages. A test keeps this in
    /// step with the struct.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "mode",
        "allow",
        "deny",
        "allow_private",
        "max_url_length",
        "max_path_segments",
        "max_repeated_segments",
        "max_pages_per_host",
    ];

    /// Checks what can be checked without seeds (the regexes), so the config loader can
    /// refuse a bad pattern before anything else happens.
    pub fn validate(&self) -> Result<(), ScopeError> {
        compile_set("scope.allow", &self.allow)?;
        compile_set("scope.deny", &self.deny)?;
        Ok(())
    }
}

/// Which hosts are on the crawl's site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScopeMode {
    /// Exactly the seeds' hosts (port ignored).
    SeedHosts,
    /// The seeds' registrable domains (eTLD+1).
    SeedDomains,
    /// Anywhere.
    Any,
}

/// Why a URL is not taken on. [`OutOfScope::as_str`] gives the stable counter name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum OutOfScope {
    #[error("off the seeds' site (scope.mode)")]
    OffSite,
    #[error("matches a scope.deny pattern")]
    Denied,
    #[error("matches no scope.allow pattern")]
    NotAllowed,
    #[error("private, loopback or link-local address (scope.allow_private)")]
    PrivateAddress,
    #[error("URL longer than scope.max_url_length")]
    TooLong,
    #[error("more path segments than scope.max_path_segments")]
    TooManySegments,
    #[error("path segments repeat more than scope.max_repeated_segments times in a row (a crawler trap)")]
    RepeatedSegments,
}

impl OutOfScope {
    /// Every reason, in declaration order: use it to list (and zero) the counters.
    pub const ALL: [OutOfScope; 7] = [
        OutOfScope::OffSite,
        OutOfScope::Denied,
        OutOfScope::NotAllowed,
        OutOfScope::PrivateAddress,
        OutOfScope::TooLong,
        OutOfScope::TooManySegments,
        OutOfScope::RepeatedSegments,
    ];

    /// Stable snake_case name for counters and `summary.json`.
    pub fn as_str(&self) -> &'static str {
        match self {
            OutOfScope::OffSite => "off_site",
            OutOfScope::Denied => "denied",
            OutOfScope::NotAllowed => "not_allowed",
            OutOfScope::PrivateAddress => "private_address",
            OutOfScope::TooLong => "too_long",
            OutOfScope::TooManySegments => "too_many_segments",
            OutOfScope::RepeatedSegments => "repeated_segments",
        }
    }
}

/// Why a [`Scope`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// A pattern that is not a valid regex (or too large to compile alone).
    #[error("{list}[{index}]: invalid regex {pattern:?}: {message}")]
    BadPattern {
        /// `"scope.allow"` or `"scope.deny"`.
        list: &'static str,
        /// Position of the pattern in its list, from 0.
        index: usize,
        pattern: String,
        message: String,
    },
    /// Every pattern compiles alone, but the list as a whole is too large.
    #[error("{list}: the {count} patterns together are too large to compile: {message}")]
    PatternSetTooLarge {
        list: &'static str,
        count: usize,
        message: String,
    },
}

/// The compiled scope: cheap to query, shared by every thread.
#[derive(Debug)]
pub struct Scope {
    options: ScopeOptions,
    allow: Option<RegexSet>,
    deny: Option<RegexSet>,
    /// Seed URLs as given, exempt from `allow`.
    seed_urls: HashSet<Box<str>>,
    /// Seed hosts ([`host_name`]s), for `seed-hosts` and the private-name exemption (here
    /// and in the request gate: [`Scope::is_seed_host`]).
    seed_hosts: HashSet<Box<str>>,
    /// Registrable domains of the seeds (IP literals as their host string).
    seed_domains: HashSet<Box<str>>,
    /// IP-literal seeds, unmapped (`::ffff:a.b.c.d` → `a.b.c.d`).
    seed_ips: HashSet<IpAddr>,
}

impl Scope {
    /// Compiles the options against the seeds (canonical, as the crawl queues them).
    pub fn new(options: &ScopeOptions, seeds: &[Url]) -> Result<Scope, ScopeError> {
        let allow = compile_set("scope.allow", &options.allow)?;
        let deny = compile_set("scope.deny", &options.deny)?;
        let mut scope = Scope {
            options: options.clone(),
            allow,
            deny,
            seed_urls: HashSet::with_capacity(seeds.len()),
            seed_hosts: HashSet::new(),
            seed_domains: HashSet::new(),
            seed_ips: HashSet::new(),
        };
        for seed in seeds {
            scope.seed_urls.insert(seed.as_str().into());
            let Some(host) = seed.host() else { continue };
            let name = host_name(seed.host_str().unwrap_or(""));
            let name = name.as_ref();
            scope.seed_hosts.insert(name.into());
            match host {
                Host::Ipv4(ip) => {
                    scope.seed_ips.insert(IpAddr::V4(ip));
                    scope.seed_domains.insert(name.into());
                }
                Host::Ipv6(ip) => {
                    scope.seed_ips.insert(IpAddr::V6(ip).to_canonical());
                    scope.seed_domains.insert(name.into());
                }
                Host::Domain(_) => {
                    scope.seed_domains.insert(domain_of_name(name).into());
                }
            }
        }
        Ok(scope)
    }

    /// The options this scope was built from.
    pub fn options(&self) -> &ScopeOptions {
        &self.options
    }

    /// Whether the crawl may connect to `ip`, by this scope's private-address rule: true if
    /// `allow_private` is set, `ip` is not [`is_private_ip`], or a seed URL is on that IP
    /// literal (compared unmapped). For the fetcher's check of *resolved* addresses; seeds
    /// on host *names* that resolve to a private address are that check's business (it
    /// knows what the names resolved to).
    pub fn permits_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.options.allow_private || !is_private_ip(ip) || self.seed_ips.contains(&ip)
    }

    /// Whether the crawl may take `url` on; if not, the first rule it breaks (see the
    /// module documentation for the order).
    pub fn check(&self, url: &Url) -> Result<(), OutOfScope> {
        // No memo: one URL, and the gate asks this once per request, where building a memo
        // (64 slots, a copy of the host) cost more than the rules themselves.
        let parts = (url.as_str(), url.host(), url.host_str(), url.path());
        self.check_parts(parts, None)
    }

    /// [`Self::check`], remembering in `memo` the verdict of rules 2 and 3 for the hosts
    /// recently asked about: those rules (a public-suffix lookup and a hash lookup, about
    /// half the cost of `check`) depend on the host alone, and a crawl's links keep naming
    /// the same few hosts. Same answer as `check` (the tests' reference for the memo).
    #[cfg(test)]
    pub(crate) fn check_with(&self, url: &Url, memo: &mut SiteMemo) -> Result<(), OutOfScope> {
        let parts = (url.as_str(), url.host(), url.host_str(), url.path());
        self.check_parts(parts, Some(memo))
    }

    /// `Self::check_with` of a [`Link`], read through its offsets: no `Url` is built.
    pub(crate) fn check_link(&self, link: &Link, memo: &mut SiteMemo) -> Result<(), OutOfScope> {
        let parts = (link.as_str(), link.host(), link.host_str(), link.path());
        self.check_parts(parts, Some(memo))
    }

    /// The rules on a URL's text, host (as `Url::host` and `Url::host_str` give it) and path.
    fn check_parts(
        &self,
        (text, host, host_str, path): (&str, Option<Host<&str>>, Option<&str>, &str),
        memo: Option<&mut SiteMemo>,
    ) -> Result<(), OutOfScope> {
        let o = &self.options;
        if o.max_url_length > 0 && text.len() > o.max_url_length {
            return Err(OutOfScope::TooLong);
        }
        match (host_str, memo) {
            // A URL without a host is off-site; nothing to remember.
            (None, _) | (_, None) => self.check_host(host, host_str)?,
            (Some(name), Some(memo)) => {
                let slot = &mut memo.slots[SiteMemo::slot_of(name)];
                match slot {
                    Some((known, verdict)) if known == name => (*verdict)?,
                    _ => {
                        let verdict = self.check_host(host, host_str);
                        match slot {
                            Some((known, remembered)) => {
                                known.clear();
                                known.push_str(name);
                                *remembered = verdict;
                            }
                            None => *slot = Some((name.to_string(), verdict)),
                        }
                        verdict?
                    }
                }
            }
        }
        if self.deny.as_ref().is_some_and(|set| set.is_match(text)) {
            return Err(OutOfScope::Denied);
        }
        if self
            .allow
            .as_ref()
            .is_some_and(|set| !set.is_match(text) && !self.seed_urls.contains(text))
        {
            return Err(OutOfScope::NotAllowed);
        }
        check_path(path, o.max_path_segments, o.max_repeated_segments)
    }

    /// Rules 2 and 3 alone (private address, site): whether the crawl may send any request
    /// to `url`'s host. For requests that are not pages of the crawl (robots.txt and its
    /// redirects), whose paths the URL rules were not written for.
    pub(crate) fn check_site(&self, url: &Url) -> Result<(), OutOfScope> {
        self.check_host(url.host(), url.host_str())
    }

    /// [`Self::check_site`] of a host, as `Url::host` and `Url::host_str` give it.
    fn check_host(
        &self,
        host: Option<Host<&str>>,
        host_str: Option<&str>,
    ) -> Result<(), OutOfScope> {
        let o = &self.options;
        let Some(host) = host else {
            return Err(OutOfScope::OffSite);
        };
        let name = host_name(host_str.unwrap_or(""));
        let name = name.as_ref();
        if !o.allow_private && self.is_private_host(&host, name) {
            return Err(OutOfScope::PrivateAddress);
        }
        let on_site = match o.mode {
            ScopeMode::Any => true,
            ScopeMode::SeedHosts => self.seed_hosts.contains(name),
            ScopeMode::SeedDomains => {
                let domain = match host {
                    Host::Domain(_) => domain_of_name(name),
                    Host::Ipv4(_) | Host::Ipv6(_) => name,
                };
                self.seed_domains.contains(domain)
            }
        };
        if !on_site {
            return Err(OutOfScope::OffSite);
        }
        Ok(())
    }

    /// Whether `name` (a [`host_name`]) is a seed's host: the one seed-host set, which the
    /// request gate's private-address exception asks too.
    pub(crate) fn is_seed_host(&self, name: &str) -> bool {
        self.seed_hosts.contains(name)
    }

    fn is_private_host(&self, host: &Host<&str>, name: &str) -> bool {
        match *host {
            Host::Ipv4(ip) => !self.permits_ip(IpAddr::V4(ip)),
            Host::Ipv6(ip) => !self.permits_ip(IpAddr::V6(ip)),
            Host::Domain(_) => is_localhost_name(name) && !self.seed_hosts.contains(name),
        }
    }
}

/// The verdicts of the site rules (2 and 3) for recently checked hosts, kept by
/// [`Scope::check_link`]: one per thread of screening, reused across URLs. A small
/// direct-mapped table (a slot per hash of the host, the newest host wins its slot), so it
/// stays small and costs one hash and one comparison per URL whatever the crawl; a host's
/// buffer is reused when its slot changes hands, so nothing is allocated once the slots are
/// filled. The verdict depends on the host alone: for http(s) URLs the host's text says
/// whether it is a name or an IP literal.
#[derive(Debug)]
pub(crate) struct SiteMemo {
    slots: Box<[Option<SiteVerdict>; SiteMemo::SLOTS]>,
}

/// A host, and the site rules' verdict on it.
type SiteVerdict = (String, Result<(), OutOfScope>);

impl Default for SiteMemo {
    fn default() -> Self {
        SiteMemo {
            slots: Box::new(std::array::from_fn(|_| None)),
        }
    }
}

impl SiteMemo {
    const SLOTS: usize = 64;

    fn slot_of(host: &str) -> usize {
        // A hostile page can make its hosts share a slot; that only makes them miss.
        (xxhash_rust::xxh3::xxh3_64(host.as_bytes()) % Self::SLOTS as u64) as usize
    }
}

/// The path rules 6 and 7 (module documentation), on a URL's path.
fn check_path(path: &str, max_segments: usize, max_repeats: usize) -> Result<(), OutOfScope> {
    let n = segment_count(path);
    if max_segments > 0 && n > max_segments {
        return Err(OutOfScope::TooManySegments);
    }
    // N repetitions allowed: a run needs at least N+1 segments to be refused.
    if max_repeats == 0 || n <= max_repeats {
        return Ok(());
    }
    let repeated = if n <= STACK_SEGMENTS {
        let mut buf = [""; STACK_SEGMENTS];
        let mut len = 0;
        for (slot, segment) in buf.iter_mut().zip(segments(path)) {
            *slot = segment;
            len += 1;
        }
        has_periodic_run(&buf[..len], max_repeats)
    } else {
        let all: Vec<&str> = segments(path).collect();
        has_periodic_run(&all, max_repeats)
    };
    if repeated {
        Err(OutOfScope::RepeatedSegments)
    } else {
        Ok(())
    }
}

/// The path's segments: between slashes, without the empty one after a trailing slash.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    // `/` (and an empty path) has no segment; `//` has one, empty.
    let inner = (!path.is_empty() && path != "/").then(|| {
        let inner = path.strip_prefix('/').unwrap_or(path);
        inner.strip_suffix('/').unwrap_or(inner)
    });
    inner.into_iter().flat_map(|inner| inner.split('/'))
}

/// Number of items [`segments`] yields, without splitting.
fn segment_count(path: &str) -> usize {
    if path.is_empty() || path == "/" {
        return 0;
    }
    let inner = path.strip_prefix('/').unwrap_or(path);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    1 + inner.bytes().filter(|&b| b == b'/').count()
}

/// Whether some block of 1..=[`MAX_PERIOD`] segments occurs more than `max_repeats` times
/// in a row. A block of length `p` repeated `k` times in a row is a stretch where
/// `s[j] == s[j + p]` holds for `(k - 1) * p` consecutive `j`.
fn has_periodic_run(segs: &[&str], max_repeats: usize) -> bool {
    let n = segs.len();
    for period in 1..=MAX_PERIOD {
        let needed = max_repeats.saturating_mul(period);
        if needed.saturating_add(period) > n {
            break;
        }
        let mut run = 0;
        for j in 0..n - period {
            if segs[j] == segs[j + period] {
                run += 1;
                if run >= needed {
                    return true;
                }
            } else {
                run = 0;
            }
        }
    }
    false
}

fn trim_dot(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// The registrable domain ("eTLD+1") of a host name as the url crate writes it (lowercase,
/// punycode), using the public suffix list embedded by the `psl` crate (ICANN and private
/// sections): `www.example.co.uk` → `example.co.uk`, `a.github.io` → `a.github.io`.
///
/// Fallbacks: an IP literal (`10.0.0.1`, `[::1]`) is its own domain; a name under a TLD
/// the list does not know (`h3.test`, `a.b.internal`) gets the list's implicit `*` rule,
/// i.e. its last two labels (`a.b.test` → `b.test`); a name with no label left of its
/// public suffix (`localhost`, `co.uk`) is its own domain. One trailing dot is ignored.
pub fn registrable_domain(host: &str) -> &str {
    let name = trim_dot(host);
    if name.starts_with('[') || name.parse::<Ipv4Addr>().is_ok() {
        return name;
    }
    domain_of_name(name)
}

fn domain_of_name(name: &str) -> &str {
    match psl::domain(name.as_bytes()) {
        // The domain is a suffix of `name`, so slicing by length keeps the `&str`.
        Some(domain) => &name[name.len() - domain.as_bytes().len()..],
        None => name,
    }
}

/// Whether `ip` is an address a crawler must not be steered to: not a globally reachable
/// unicast address. Used for IP-literal URLs here and for resolved names by the fetcher.
///
/// IPv4: `0.0.0.0/8` (this network, unspecified), `10/8`, `172.16/12`, `192.168/16`
/// (private), `100.64/10` (CGNAT shared), `127/8` (loopback), `169.254/16` (link-local,
/// cloud metadata), `192.0.0/24` (IETF protocol assignments), `192.0.2/24`,
/// `198.51.100/24`, `203.0.113/24` (documentation), `198.18/15` (benchmarking),
/// `224/4` (multicast), `240/4` (reserved, broadcast).
///
/// IPv6: `::` and `::1`; `fc00::/7` (unique local), `fe80::/10` (link-local),
/// `fec0::/10` (old site-local), `ff00::/8` (multicast), `100::/64` (discard),
/// `2001:db8::/32` and `3fff::/20` (documentation), `64:ff9b:1::/48` (local NAT64);
/// addresses that carry an IPv4 address to which traffic may go are judged by that address:
/// `::ffff:a.b.c.d` (mapped), `::a.b.c.d` (deprecated compatible), `64:ff9b::a.b.c.d`
/// (NAT64), `2002:AABB:CCDD::/48` (6to4).
pub fn is_private_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_private_v4(ip),
        IpAddr::V6(ip) => is_private_v6(ip),
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    const RANGES: [(u32, u32); 14] = [
        (0x0000_0000, 8),  // 0.0.0.0/8
        (0x0A00_0000, 8),  // 10.0.0.0/8
        (0x6440_0000, 10), // 100.64.0.0/10
        (0x7F00_0000, 8),  // 127.0.0.0/8
        (0xA9FE_0000, 16), // 169.254.0.0/16
        (0xAC10_0000, 12), // 172.16.0.0/12
        (0xC000_0000, 24), // 192.0.0.0/24
        (0xC000_0200, 24), // 192.0.2.0/24
        (0xC0A8_0000, 16), // 192.168.0.0/16
        (0xC612_0000, 15), // 198.18.0.0/15
        (0xC633_6400, 24), // 198.51.100.0/24
        (0xCB00_7100, 24), // 203.0.113.0/24
        (0xE000_0000, 4),  // 224.0.0.0/4
        (0xF000_0000, 4),  // 240.0.0.0/4
    ];
    let a = u32::from(ip);
    RANGES
        .iter()
        .any(|&(net, bits)| a & (u32::MAX << (32 - bits)) == net)
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let a = u128::from(ip);
    let embedded = |a: u128| Ipv4Addr::from((a & 0xFFFF_FFFF) as u32);
    let prefix = |bits: u32, net: u128| a & (u128::MAX << (128 - bits)) == net;
    if a == 0 || a == 1 {
        return true; // :: and ::1
    }
    // ::a.b.c.d (compatible), ::ffff:a.b.c.d (mapped), 64:ff9b::a.b.c.d (NAT64).
    if prefix(96, 0) || prefix(96, 0xFFFF_0000_0000) || prefix(96, 0x0064_FF9B << 96) {
        return is_private_v4(embedded(a));
    }
    if prefix(16, 0x2002 << 112) {
        return is_private_v4(embedded(a >> 80)); // 6to4: 2002:AABB:CCDD::
    }
    prefix(48, 0x0064_FF9B_0001 << 80) // local NAT64
        || prefix(64, 0x0100 << 112) // discard-only
        || prefix(32, 0x2001_0DB8 << 96) // documentation
        || prefix(20, 0x3FFF << 112) // documentation
        || prefix(7, 0xFC << 120) // unique local
        || prefix(10, 0xFE80 << 112) // link-local
        || prefix(10, 0xFEC0 << 112) // site-local (deprecated)
        || prefix(8, 0xFF << 120) // multicast
}

/// Compiles one list; each pattern alone first, so that an error names the bad one.
fn compile_set(list: &'static str, patterns: &[String]) -> Result<Option<RegexSet>, ScopeError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    for (index, pattern) in patterns.iter().enumerate() {
        Regex::new(pattern).map_err(|e| ScopeError::BadPattern {
            list,
            index,
            pattern: pattern.clone(),
            message: regex_message(&e),
        })?;
    }
    RegexSet::new(patterns)
        .map(Some)
        .map_err(|e| ScopeError::PatternSetTooLarge {
            list,
            count: patterns.len(),
            message: regex_message(&e),
        })
}

/// A regex error on one line: the syntax error's `error: …` line, or the whole text.
fn regex_message(e: &regex::Error) -> String {
    let text = e.to_string();
    match text.lines().find_map(|l| l.trim().strip_prefix("error: ")) {
        Some(line) => line.to_string(),
        None => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

impl fmt::Display for ScopeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScopeMode::SeedHosts => "seed-hosts",
            ScopeMode::SeedDomains => "seed-domains",
            ScopeMode::Any => "any",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_with_a_memo_answers_as_check() {
        let seeds: Vec<Url> = ["http://a.example.org/", "http://10.0.0.1/", "http://[::1]/"]
            .iter()
            .map(|s| Url::parse(s).unwrap())
            .collect();
        let options = ScopeOptions {
            max_url_length: 40,
            deny: vec!["/denied".into()],
            ..ScopeOptions::default()
        };
        let scope = Scope::new(&options, &seeds).unwrap();
        // Hosts repeat and alternate, so the memo is hit, missed and replaced; each rule
        // (length before site, site, deny, path) comes up right after a memo hit too.
        let urls = [
            "http://b.example.org/x",
            "http://b.example.org/y",
            "http://b.example.org/denied",
            "http://b.example.org/a/a/a/a/a/a",
            "http://b.example.org/a-path-long-enough-to-be-refused",
            "http://other.test/x",
            "http://other.test/y",
            "http://b.example.org/z",
            "http://localhost/x",
            "http://localhost/y",
            "http://10.0.0.1/x",
            "http://10.0.0.2/x",
            "http://10.0.0.2/y",
            "http://[::1]/x",
            "http://[::2]/x",
            "http://a.example.org./x",
            "http://a.example.org/x",
        ];
        // More hosts than the memo has slots: slots change hands.
        let many: Vec<String> = (0..3 * SiteMemo::SLOTS)
            .map(|i| match i % 3 {
                0 => format!("http://h{i}.example.org/p"),
                1 => format!("http://h{i}.other.test/p"),
                _ => format!("http://10.1.0.{}/p", i % 250),
            })
            .collect();
        let mut memo = SiteMemo::default();
        // Links read through their offsets (those with a domain host are built without a
        // `Url`) get the same answers.
        let base = Url::parse("http://a.example.org/").unwrap();
        let prepared = crate::normalize::PreparedBase::new(&base);
        let (mut link_memo, mut plain) = (SiteMemo::default(), 0);
        for round in 0..2 {
            for text in urls.iter().copied().chain(many.iter().map(String::as_str)) {
                let url = Url::parse(text).unwrap();
                assert_eq!(
                    scope.check_with(&url, &mut memo),
                    scope.check(&url),
                    "{text} (round {round})"
                );
                let link = prepared.join_link(text).unwrap();
                plain += usize::from(link.is_plain());
                assert_eq!(
                    scope.check_link(&link, &mut link_memo),
                    scope.check(&url),
                    "{text} as a link (round {round})"
                );
            }
        }
        assert!(plain > 100, "only {plain} links were plain");
    }

    #[test]
    fn segment_count_matches_segments() {
        let table: &[(&str, &[&str])] = &[
            ("", &[]),
            ("/", &[]),
            ("/a", &["a"]),
            ("/a/", &["a"]),
            ("/a/b", &["a", "b"]),
            ("/a/b/", &["a", "b"]),
            ("//", &[""]),
            ("///", &["", ""]),
            ("/a//b", &["a", "", "b"]),
            ("/a//", &["a", ""]),
            ("x", &["x"]), // cannot-be-a-base paths (mailto:x) have no leading slash
        ];
        for &(path, expected) in table {
            let got: Vec<&str> = segments(path).collect();
            assert_eq!(got, expected, "segments({path:?})");
            assert_eq!(
                segment_count(path),
                expected.len(),
                "segment_count({path:?})"
            );
        }
    }

    fn split(path: &str) -> Vec<&str> {
        segments(path).collect()
    }

    #[test]
    fn periodic_runs() {
        let traps = [
            "/a/a/a/a",
            "/a/a/a/a/",
            "/x/a/a/a/a/y",
            "/a/b/a/b/a/b/a/b/",
            "/x/a/b/c/a/b/c/a/b/c/a/b/c/y",
            "/1/2/3/4/5/6/7/8/1/2/3/4/5/6/7/8/1/2/3/4/5/6/7/8/1/2/3/4/5/6/7/8",
            "/a/////",
        ];
        for path in traps {
            assert!(has_periodic_run(&split(path), 3), "{path} is a trap");
        }
        let fine = [
            "/a/a/a",
            "/a/b/a/b/a/b/",
            "/a/b/a/b/a/b/a",
            "/2026/11/11/",
            "/api/v1/users/1/posts/1/comments/1/likes/1",
            "/en/news/en/sport/en/weather/en",
            "/a/a/a/b/a/a/a",
            // A period of 9 is beyond MAX_PERIOD (and beyond 32 segments at 4 copies).
            "/1/2/3/4/5/6/7/8/9/1/2/3/4/5/6/7/8/9/1/2/3/4/5/6/7/8/9/1/2/3/4/5/6/7/8/9",
        ];
        for path in fine {
            assert!(!has_periodic_run(&split(path), 3), "{path} is fine");
        }
        assert!(has_periodic_run(&split("/a/a"), 1));
        assert!(!has_periodic_run(&split("/a/b/a"), 1));
        assert!(has_periodic_run(&split("/a/b/a/b"), 1));
        assert!(!has_periodic_run(&[], 3));
        assert!(!has_periodic_run(&split("/a/a/a/a"), usize::MAX));
    }

    #[test]
    fn long_paths_use_the_heap_path_alike() {
        let many: String = (0..100).map(|i| format!("/s{i}")).collect();
        assert_eq!(check_path(&many, 0, 3), Ok(()));
        let looping = format!("{many}/x/x/x/x");
        assert_eq!(
            check_path(&looping, 0, 3),
            Err(OutOfScope::RepeatedSegments)
        );
        assert_eq!(check_path(&looping, 0, 4), Ok(()));
    }

    #[test]
    fn keys_are_in_step_with_the_struct() {
        let value = serde_json::to_value(ScopeOptions::default()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = ScopeOptions::KEYS.to_vec();
        let mut keys = keys;
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected);
    }

    #[test]
    fn regex_errors_are_one_line() {
        let pattern = String::from("(abc"); // not a literal: clippy checks those
        let e = Regex::new(&pattern).unwrap_err();
        let message = regex_message(&e);
        assert!(!message.contains('\n'), "{message}");
        assert!(message.contains("unclosed group"), "{message}");
    }

    #[test]
    fn scope_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Scope>();
    }
}
