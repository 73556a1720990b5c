//! [`RobotsRules`]: one pass over a robots.txt body that keeps only the group that applies to
//! us, with its patterns in one canonical-form arena (see the parent module's doc for what is
//! parsed and what is guaranteed).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::fmt;
use std::time::Duration;

use url::{Position, Url};

use super::pattern;

/// Longer lines are skipped: longer than any URL the crawler keeps (2 KiB by default) many
/// times over, so only a hostile file has them.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Rules kept for our group; the 500 KiB body cap allows ~64 Ki of the shortest ones.
pub const MAX_RULES: usize = 65_536;
/// `Sitemap:` lines kept.
pub const MAX_SITEMAPS: usize = 1_024;
/// Skipped lines described in `RobotsRules::notes`; the rest are only counted.
pub const MAX_NOTES: usize = 16;
/// A longer `Crawl-delay` is taken as this (a day): the host is crawled, just very slowly.
const MAX_CRAWL_DELAY_SECS: f64 = 86_400.0;

/// One `Allow`/`Disallow` rule; its pattern is `patterns[start..start + len]`.
#[derive(Clone, Copy, Debug)]
struct Rule {
    start: u32,
    len: u32,
    /// The length of the canonical pattern as written (with its `*`s and `$`): RFC 9309's
    /// "most octets" that decides between matching rules.
    priority: u32,
    allow: bool,
    /// The pattern ended in `$` (which is not stored).
    anchored: bool,
}

/// The rules that apply to us on one host.
pub struct RobotsRules {
    /// Canonical patterns, back to back.
    pub(super) patterns: Box<str>,
    /// Most specific first, `Allow` before `Disallow` of the same length: the first rule that
    /// matches decides.
    rules: Box<[Rule]>,
    /// The line of the file each rule comes from (`lines[i]` for `rules[i]`, 1-based). Beside
    /// the rules, not in them: only [`RobotsRules::verdict`] reads it, and the matching loop
    /// keeps walking 16-byte rules.
    lines: Box<[u32]>,
    /// `Crawl-delay` for our group, if any.
    pub(crate) crawl_delay: Option<Duration>,
    /// `Sitemap:` URLs as written, from anywhere in the file (they belong to no group), at most
    /// [`MAX_SITEMAPS`].
    pub(crate) sitemaps: Vec<String>,
    /// Lines that were not understood or were dropped by a cap (every other line still counts).
    pub skipped_lines: u32,
    /// Why, for the first [`MAX_NOTES`] skipped lines and for caps: `line N: reason`.
    pub(crate) notes: Vec<String>,
}

impl fmt::Debug for RobotsRules {
    // Not the patterns: a hostile file makes them half a megabyte.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsRules")
            .field("rules", &self.rules.len())
            .field("pattern_bytes", &self.patterns.len())
            .field("crawl_delay", &self.crawl_delay)
            .field("sitemaps", &self.sitemaps.len())
            .field("skipped_lines", &self.skipped_lines)
            .field("notes", &self.notes)
            .finish()
    }
}

impl RobotsRules {
    /// Everything allowed (no robots.txt, or a 4xx).
    pub(crate) fn allow_all() -> Self {
        RobotsRules {
            patterns: Box::default(),
            rules: Box::default(),
            lines: Box::default(),
            crawl_delay: None,
            sitemaps: Vec::new(),
            skipped_lines: 0,
            notes: Vec::new(),
        }
    }

    /// Parses a robots.txt body for `agent` (the product token of our user agent). Never
    /// fails: what cannot be read is skipped line by line and counted in
    /// `skipped_lines`.
    pub fn parse(agent: &str, body: &[u8]) -> Self {
        let mut parser = Parser::new(agent.trim());
        let body = utf8_body(body);
        let body = strip_byte_order_mark(&body);
        for (index, line) in Lines(body).enumerate() {
            parser.line(index + 1, line);
        }
        parser.finish()
    }

    /// Whether `url` (absolute, or a path) may be fetched. Its path and query are matched.
    pub fn allows(&self, url: &str) -> bool {
        self.allows_counting(url, &mut 0)
    }

    /// [`allows`](Self::allows), adding the bytes the matcher examined to `work`.
    pub(crate) fn allows_counting(&self, url: &str, work: &mut u64) -> bool {
        match self.decide(url, work) {
            Decision::Rule(index) => self.rules[index].allow,
            Decision::NoRule | Decision::RobotsTxt => true,
        }
    }

    /// Whether `url` may be fetched and why: the deciding rule and its line, what
    /// `crawler robots` prints. Decided exactly as [`allows`](Self::allows) decides.
    pub fn verdict(&self, url: &str) -> Verdict {
        match self.decide(url, &mut 0) {
            Decision::Rule(index) => {
                let rule = self.rules[index];
                let start = rule.start as usize;
                let mut pattern = self.patterns[start..start + rule.len as usize].to_string();
                if rule.anchored {
                    pattern.push('$');
                }
                Verdict {
                    allowed: rule.allow,
                    reason: Reason::Rule {
                        line: self.lines[index],
                        allow: rule.allow,
                        pattern,
                    },
                }
            }
            Decision::NoRule => Verdict {
                allowed: true,
                reason: Reason::NoMatchingRule,
            },
            Decision::RobotsTxt => Verdict {
                allowed: true,
                reason: Reason::RobotsTxt,
            },
        }
    }

    /// The rule that decides for `url`, by its index in `rules`: the first that matches, the
    /// most specific one.
    fn decide(&self, url: &str, work: &mut u64) -> Decision {
        if self.rules.is_empty() {
            return Decision::NoRule;
        }
        let path = path_and_query(url);
        let path = if pattern::is_canonical_path(path.as_bytes()) {
            path
        } else {
            let mut canonical = String::with_capacity(path.len() + 8);
            pattern::normalize_path_into(path.as_bytes(), &mut canonical);
            Cow::Owned(canonical)
        };
        // RFC 9309 §2.2.2: robots.txt itself is always allowed.
        if path == "/robots.txt" {
            return Decision::RobotsTxt;
        }
        for (index, rule) in self.rules.iter().enumerate() {
            let start = rule.start as usize;
            let pat = &self.patterns[start..start + rule.len as usize];
            if pattern::matches(pat, rule.anchored, &path, work) {
                return Decision::Rule(index);
            }
        }
        Decision::NoRule
    }

    /// `Crawl-delay` of our group (or one above every group), if positive.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }

    /// `Sitemap:` URLs as written, from anywhere in the file.
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }

    /// Why lines were skipped: `line N: reason`, for the first [`MAX_NOTES`].
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Number of `Allow`/`Disallow` rules kept.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Heap bytes held (patterns, rules, sitemaps, notes), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.patterns.len()
            + std::mem::size_of_val(&*self.rules)
            + std::mem::size_of_val(&*self.lines)
            + self.sitemaps.capacity() * std::mem::size_of::<String>()
            + self.sitemaps.iter().map(String::capacity).sum::<usize>()
            + self.notes.capacity() * std::mem::size_of::<String>()
            + self.notes.iter().map(String::capacity).sum::<usize>()
    }
}

/// What [`RobotsRules::decide`] found.
#[derive(Clone, Copy)]
enum Decision {
    /// `rules[index]` is the most specific rule that matches.
    Rule(usize),
    /// No rule matches (or there is none): allowed.
    NoRule,
    /// The URL is `/robots.txt`, always allowed.
    RobotsTxt,
}

/// Whether a URL may be fetched, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: Reason,
}

/// What decided a [`Verdict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The most specific matching rule: an `Allow` (`allow`) or `Disallow` at `line` of the
    /// file (1-based, as [`source_line`] counts), with its pattern in canonical form.
    Rule {
        line: u32,
        allow: bool,
        pattern: String,
    },
    /// No rule of the group that applies to us matches (or no group does).
    NoMatchingRule,
    /// `/robots.txt` itself is always allowed (RFC 9309 §2.2.2).
    RobotsTxt,
}

/// Line `line` (1-based) of a robots.txt body, counted as the parser counts (LF, CR or CRLF
/// end a line; a byte order mark is not part of line 1), without its line end.
pub fn source_line(body: &[u8], line: u32) -> Option<String> {
    let index = usize::try_from(line).ok()?.checked_sub(1)?;
    let body = utf8_body(body);
    Lines(strip_byte_order_mark(&body))
        .nth(index)
        .map(|line| String::from_utf8_lossy(line).into_owned())
}

/// `body` as UTF-8: as it is, unless a UTF-16 byte order mark says it is UTF-16 (RFC 9309 asks
/// for UTF-8, but such files exist, and read as UTF-8 they are garbage that allows everything).
fn utf8_body(body: &[u8]) -> Cow<'_, [u8]> {
    match encoding_rs::Encoding::for_bom(body) {
        Some((encoding, _)) if encoding != encoding_rs::UTF_8 => {
            let (text, _) = encoding.decode_with_bom_removal(body);
            Cow::Owned(text.into_owned().into_bytes())
        }
        _ => Cow::Borrowed(body),
    }
}

/// The product token at the start of a `User-agent` value: its leading run of letters, digits,
/// `-` and `_` (RFC 9309 §2.2.1 allows letters, `-` and `_`; digits are common in real names).
/// What follows it (a version, a comment, a second name, markup) is not part of it.
pub(crate) fn product_token(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        .unwrap_or(value.len());
    &value[..end]
}

/// `body` without its UTF-8 byte order mark, whole or cut short as some editors and servers
/// leave it (`EF BB`, `EF`): the reference parser skips those too, and the first line is
/// then read instead of being skipped as an unknown directive.
fn strip_byte_order_mark(body: &[u8]) -> &[u8] {
    for mark in [&b"\xEF\xBB\xBF"[..], b"\xEF\xBB", b"\xEF"] {
        if let Some(rest) = body.strip_prefix(mark) {
            return rest;
        }
    }
    body
}

/// The path and query of `url`, `/` if it has none. Something that is not an absolute URL is
/// taken as a path (less its fragment).
fn path_and_query(url: &str) -> Cow<'_, str> {
    match Url::parse(url) {
        Ok(parsed) if !parsed.cannot_be_a_base() => {
            let path = &parsed[Position::BeforePath..Position::AfterQuery];
            Cow::Owned(if path.is_empty() { "/" } else { path }.to_string())
        }
        _ => {
            let path = url.split('#').next().unwrap_or("");
            Cow::Borrowed(if path.is_empty() { "/" } else { path })
        }
    }
}

/// Lines ended by LF, CR or CRLF.
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let end = self
            .0
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(self.0.len());
        let line = &self.0[..end];
        let rest = &self.0[end..];
        self.0 = match rest {
            [b'\r', b'\n', rest @ ..] | [_, rest @ ..] => rest,
            [] => rest,
        };
        Some(line)
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !first.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    UserAgent,
    Allow,
    Disallow,
    CrawlDelay,
    Sitemap,
    Other,
}

impl Key {
    /// Case-insensitive, with the misspellings the reference parser and crawler-commons accept
    /// for the same directives: a typo in `Disallow` should still protect the site.
    fn of(key: &[u8]) -> Key {
        let key = key.to_ascii_lowercase();
        match key.as_slice() {
            b"user-agent" | b"useragent" | b"user agent" | b"user-agents" | b"user-agnet"
            | b"users-agent" | b"ser-agent" | b"useg-agent" => Key::UserAgent,
            b"allow" => Key::Allow,
            b"disallow" | b"dissallow" | b"dissalow" | b"disalow" | b"diasllow" | b"disallaw"
            | b"desallow" | b"dssalow" | b"dsallow" | b"diallow" | b"disallows" => Key::Disallow,
            b"crawl-delay" | b"crawldelay" | b"crawl delay" => Key::CrawlDelay,
            b"sitemap" | b"site-map" => Key::Sitemap,
            _ => Key::Other,
        }
    }
}

/// The rules gathered for one set of user agents.
#[derive(Default)]
struct Group {
    patterns: String,
    rules: Vec<Rule>,
    /// The line of each rule, parallel to `rules`.
    lines: Vec<u32>,
    crawl_delay: Option<f64>,
}

impl Group {
    /// Adds a rule whose canonical pattern (with its `*`s and `$`) is `canonical`.
    fn add(&mut self, line: u32, allow: bool, canonical: &str) -> Result<(), String> {
        if self.rules.len() >= MAX_RULES {
            return Err(format!("more than {MAX_RULES} rules for our group"));
        }
        let (body, anchored) = match canonical.strip_suffix('$') {
            Some(body) => (body, true),
            None => (canonical, false),
        };
        let start = self.patterns.len();
        let mut previous_star = false;
        for c in body.chars() {
            if c == '$' {
                // Only a final `$` anchors; elsewhere it is the character, encoded as it is
                // in paths.
                self.patterns.push_str("%24");
            } else if !(c == '*' && previous_star) {
                // `**` means `*`; storing one keeps the matcher's segments non-empty.
                self.patterns.push(c);
            }
            previous_star = c == '*';
        }
        // Every match is a prefix match: a trailing `*` adds nothing unless `$` follows.
        if !anchored {
            while self.patterns.len() > start && self.patterns.ends_with('*') {
                self.patterns.pop();
            }
        }
        let len = self.patterns.len() - start;
        let (Ok(start), Ok(len), Ok(priority)) = (
            u32::try_from(start),
            u32::try_from(len),
            u32::try_from(canonical.len()),
        ) else {
            self.patterns.truncate(start);
            return Err("patterns past 4 GiB".into());
        };
        self.rules.push(Rule {
            start,
            len,
            priority,
            allow,
            anchored,
        });
        self.lines.push(line);
        Ok(())
    }
}

struct Parser<'a> {
    agent: &'a str,
    ours: Group,
    star: Group,
    /// Rules before any `User-agent` line: they apply to everyone in a file that has no
    /// `User-agent` line at all, and are dropped at the first one.
    ungrouped: Group,
    /// The last group line was a `User-agent` line: another one joins the same group.
    in_agents: bool,
    current_ours: bool,
    current_star: bool,
    seen_agent: bool,
    named_us: bool,
    seen_star: bool,
    sitemaps: Vec<String>,
    skipped: u32,
    notes: Vec<String>,
    scratch: String,
}

impl<'a> Parser<'a> {
    fn new(agent: &'a str) -> Self {
        Parser {
            agent,
            ours: Group::default(),
            star: Group::default(),
            ungrouped: Group::default(),
            in_agents: false,
            current_ours: false,
            current_star: false,
            seen_agent: false,
            named_us: false,
            seen_star: false,
            sitemaps: Vec::new(),
            skipped: 0,
            notes: Vec::new(),
            scratch: String::new(),
        }
    }

    fn skip(&mut self, line: usize, reason: impl FnOnce() -> String) {
        self.skipped = self.skipped.saturating_add(1);
        if self.notes.len() < MAX_NOTES {
            self.notes.push(format!("line {line}: {}", reason()));
        }
    }

    fn line(&mut self, n: usize, raw: &[u8]) {
        if raw.len() > MAX_LINE_BYTES {
            self.skip(n, || format!("longer than {MAX_LINE_BYTES} bytes"));
            return;
        }
        let content = match raw.iter().position(|&b| b == b'#') {
            Some(hash) => &raw[..hash],
            None => raw,
        };
        let content = trim(content);
        if content.is_empty() {
            return;
        }
        // `key value` without the colon is a common slip that the reference parser accepts too.
        let separator = content
            .iter()
            .position(|&b| b == b':')
            .or_else(|| content.iter().position(u8::is_ascii_whitespace));
        let Some(separator) = separator else {
            self.skip(n, || "no `:`".into());
            return;
        };
        let key = trim(&content[..separator]);
        let value = trim(&content[separator + 1..]);
        match Key::of(key) {
            Key::UserAgent => self.user_agent(value),
            Key::Allow => self.rule(n, true, value),
            Key::Disallow => self.rule(n, false, value),
            Key::CrawlDelay => self.crawl_delay(n, value),
            Key::Sitemap => {
                let sitemap = String::from_utf8_lossy(value);
                if value.is_empty() {
                    self.skip(n, || "empty sitemap".into());
                } else if self.sitemaps.iter().any(|known| *known == sitemap) {
                    // Named twice: fetched once.
                } else if self.sitemaps.len() >= MAX_SITEMAPS {
                    self.skip(n, || format!("more than {MAX_SITEMAPS} sitemaps"));
                } else {
                    self.sitemaps.push(sitemap.into_owned());
                }
            }
            Key::Other => {
                // RFC 9309 §2.2.4: other records may be ignored; they do not end a group.
                let key = String::from_utf8_lossy(&key[..key.len().min(40)]).into_owned();
                self.skip(n, || format!("unknown directive `{key}`"));
            }
        }
    }

    fn user_agent(&mut self, value: &[u8]) {
        if !self.in_agents {
            self.current_ours = false;
            self.current_star = false;
        }
        self.in_agents = true;
        if !self.seen_agent {
            self.seen_agent = true;
            let dropped = self.ungrouped.rules.len();
            if dropped > 0 {
                self.skipped = self.skipped.saturating_add(dropped as u32);
                if self.notes.len() < MAX_NOTES {
                    self.notes.push(format!(
                        "{dropped} rules before the first User-agent line ignored"
                    ));
                }
                self.ungrouped.rules = Vec::new();
                self.ungrouped.lines = Vec::new();
                self.ungrouped.patterns = String::new();
            }
        }
        // The product token, as in `agent_token`: `FooBot/1.2 (+url)` names `FooBot`, and so
        // do `FooBot, BarBot` and `FooBot<BR>`; `*` followed by anything but a token character
        // is the wildcard.
        let token = product_token(value);
        let star = value
            .strip_prefix(b"*")
            .is_some_and(|rest| product_token(rest).is_empty());
        if star {
            self.current_star = true;
            self.seen_star = true;
        } else if !self.agent.is_empty() && token.eq_ignore_ascii_case(self.agent.as_bytes()) {
            self.current_ours = true;
            self.named_us = true;
        }
    }

    /// The groups the current line feeds.
    fn targets(&mut self) -> [Option<&mut Group>; 2] {
        if !self.seen_agent {
            return [Some(&mut self.ungrouped), None];
        }
        [
            self.current_ours.then_some(&mut self.ours),
            self.current_star.then_some(&mut self.star),
        ]
    }

    fn rule(&mut self, n: usize, allow: bool, value: &[u8]) {
        self.in_agents = false;
        // RFC 9309 §2.2.2: an empty value is a rule that matches nothing.
        if value.is_empty() {
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        // A pattern must start with `/`; `Disallow: private/` surely means `/private/`.
        if !matches!(value[0], b'/' | b'*') {
            scratch.push('/');
        }
        pattern::normalize_into(value, &mut scratch);
        let mut failure = None;
        let line = u32::try_from(n).unwrap_or(u32::MAX);
        for group in self.targets().into_iter().flatten() {
            if let Err(reason) = group.add(line, allow, &scratch) {
                failure = Some(reason);
            }
        }
        self.scratch = scratch;
        if let Some(reason) = failure {
            self.skip(n, || reason);
        }
    }

    fn crawl_delay(&mut self, n: usize, value: &[u8]) {
        // Not a rule (RFC 9309 §2.2.4: an other record): a `User-agent` line after it still
        // joins the same group. The delay goes to the agents named so far.
        let seconds = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0);
        let Some(seconds) = seconds else {
            let value = String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
            self.skip(n, || {
                format!("Crawl-delay `{value}` is not a non-negative number")
            });
            return;
        };
        for group in self.targets().into_iter().flatten() {
            group.crawl_delay.get_or_insert(seconds);
        }
    }

    fn finish(mut self) -> RobotsRules {
        // RFC 9309 §2.2.1: our own group(s) if any names us, else the `*` group(s), else none.
        // A file without any `User-agent` line applies to everyone (what its author meant,
        // and the protective reading).
        let group = if self.named_us {
            std::mem::take(&mut self.ours)
        } else if self.seen_star {
            std::mem::take(&mut self.star)
        } else if !self.seen_agent {
            std::mem::take(&mut self.ungrouped)
        } else {
            Group::default()
        };
        // A `Crawl-delay` above every group is meant for all.
        let crawl_delay = group
            .crawl_delay
            .or(self.ungrouped.crawl_delay)
            .filter(|s| *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_CRAWL_DELAY_SECS)));
        // Stable: file order among equals, which no outcome depends on (only the line
        // reported: the first of equal rules in the file).
        let mut pairs: Vec<(Rule, u32)> = group.rules.into_iter().zip(group.lines).collect();
        pairs.sort_by_key(|(rule, _)| (Reverse(rule.priority), !rule.allow));
        let rules: Box<[Rule]> = pairs.iter().map(|&(rule, _)| rule).collect();
        let lines: Box<[u32]> = pairs.iter().map(|&(_, line)| line).collect();
        self.sitemaps.shrink_to_fit();
        RobotsRules {
            patterns: group.patterns.into_boxed_str(),
            rules,
            lines,
            crawl_delay,
            sitemaps: self.sitemaps,
            skipped_lines: self.skipped,
            notes: self.notes,
        }
    }
}
