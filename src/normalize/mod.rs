//! URL canonical form: the one place that decides whether two spellings are the same URL,
//! before the seen-set is asked.
//!
//! # What it does
//!
//! Parsing is the `url` crate's, an implementation of the WHATWG URL Standard (what
//! browsers do, so what links on real pages mean). Parsing alone already lowercases the
//! scheme and host, converts IDN hosts to punycode (`bücher.de` → `xn--bcher-kva.de`),
//! canonicalizes IPv4/IPv6 hosts (`0x7f.1` → `127.0.0.1`), removes default ports
//! (`:80` for http, `:443` for https, and an empty `:`), resolves dot segments (also
//! spelled `%2e`), turns an empty path into `/`, and percent-encodes what must be encoded
//! (spaces, controls, non-ASCII, `"<>`…). [`Normalizer::canonicalize`] then adds:
//!
//! 1. Only `http` and `https` URLs with a non-empty host and without credentials are
//!    accepted; everything else (`mailto:`, `javascript:`, `data:`, `tel:`, `ftp:`,
//!    `file:`…) is [`Rejected`], and the caller counts it.
//! 2. Trailing dots of a domain are removed (`example.org.` → `example.org`, also
//!    `example.org..`): the fully qualified spelling names the same DNS host, and
//!    politeness and scope must see one host ([`host_key`] folds them too). A domain whose
//!    last label is a number keeps two (`foo.09...` → `foo.09..`): without them the WHATWG
//!    parser reads it as an IPv4 address and refuses it. A host made only of dots (`.`,
//!    `..`, valid WHATWG hosts that name the DNS root) is rejected ([`Rejected::NoHost`]).
//! 3. The fragment is dropped: it never reaches the server.
//! 4. Percent-encoding gets one spelling per octet in path and query (RFC 3986 §2, §6.2.2;
//!    the rules exactly are in `percent.rs`): unreserved characters (`A-Z a-z 0-9 - . _ ~`)
//!    are raw (`%7Euser` → `~user`, `/%70/` → `/p/`); reserved characters
//!    (`: / ? # [ ] @ ! $ & ' ( ) * + , ; =`) stay as they came, raw or escaped (`%26`,
//!    `%2F`, `%3D`, `%2B` are never decoded: `a%26b` and `a&b` are different queries);
//!    every other octet is escaped (`^` → `%5E`, `|` → `%7C`, `` ` `` → `%60`, non-ASCII and
//!    controls, which the parser already escapes), a `%` that starts no escape becomes
//!    `%25` (`/a%zz` → `/a%25zz`), and all hex is uppercase (`%c3%a9` → `%C3%A9`).
//! 5. An empty query (a trailing `?`) is removed.
//! 6. Query parameters whose name matches `strip_params` (names or globs, ASCII
//!    case-insensitive; by default `utm_*`, `gclid`, `fbclid`, `jsessionid`, `phpsessid`,
//!    `sid`) are removed, as are path parameters with such a name (`/a.jsp;jsessionid=…`).
//!    The remaining parameters keep their order and spelling (`+`, `&&` and all).
//! 7. Optional (all off by default): `sort_query` (stable sort by parameter name, so
//!    repeated names keep their relative order), `strip_default_documents` (a last path
//!    segment `index.html`, `index.htm`, `index.php`, `default.asp` or `default.aspx`,
//!    any case, is removed, leaving the directory), `fold_www` (leading `www.` labels are
//!    removed from a domain that keeps at least two labels), `collapse_slashes` (runs of
//!    `/` in the path become one: `/a//b` → `/a/b`; `%2F` is not a slash and stays). Dot
//!    segments are resolved first, when the link is parsed, as a browser does before it
//!    sends the request: `/a//../b` is `/a/b`, not `/b`.
//!
//! # Guarantees
//!
//! - Idempotent: canonicalizing a canonical URL changes nothing, and its string form parses
//!   back to itself (property-tested, for every combination of options).
//! - Never panics, whatever the input (property-tested and a fuzz target).
//! - Nothing that could change meaning is decoded: only escapes of unreserved characters
//!   are, and a character is escaped only where its raw form is not allowed in a URI, so a
//!   server reads both spellings as one. Escapes are normalized octet by octet, so that
//!   stripping or sorting parameters never changes how the rest reads.
//! - Two inputs the `url` crate parses to the same URL normalize to the same URL.
//! - With the default options, only rules 1–6 apply: rules 2–5 never change what the
//!   server is asked for (rule 2 changes only the spelling of the host), rule 6 only
//!   removes tracking and session parameters. The optional rules are heuristics an
//!   operator opts into.
//!
//! # Why this way
//!
//! A crawler resolves links the way a browser does, so it must parse the way a browser
//! does: the WHATWG parser is the reference for that, and the `url` crate implements it.
//! The extra rules are the RFC 3986 §6 equivalences the WHATWG parser leaves out on
//! purpose (it never decodes, and it leaves some characters raw that it escapes elsewhere:
//! `^` and `|` in a path, `` ` ``, `{`, `}`, `\`, `^`, `|` in a query, so that `?q=a^` and
//! `?q=a%5E` would be two URLs), plus the tracking/session parameter stripping every
//! crawler needs. Deliberately *not* done (some other normalizers do, e.g. crawler-commons
//! and Nutch): collapsing `//` in paths by default (an empty segment is a different path to
//! many servers; `collapse_slashes` opts in), percent-encoding reserved characters the
//! WHATWG parser leaves raw (`[`, `]` in a query: they may be delimiters to the server, and
//! browsers send them raw), keeping IDN hosts in Unicode (punycode is what DNS and the
//! `Host` header see), and lowercasing paths. See `tests/api/normalize_table.rs` for the
//! case-by-case comparison.
//!
//! # Cost
//!
//! [`Normalizer::canonicalize`] is on the hot path (every extracted link). Patterns are
//! compiled once in [`Normalizer::new`]; a URL whose path and query hold only unreserved
//! and reserved characters (no `%`, nothing to escape), with no trailing dot on the host,
//! no `;` or `//` to act on, no fragment and no parameter to strip, is only scanned (a
//! table lookup per byte, eight per branch), never re-serialized or allocated. Measured
//! with `cargo bench --bench normalize` (median of 7 rounds) on the loaded 2-core
//! development machine: about 15–25 ns per typical link without a query and 35 ns with
//! one, against 600–1000 ns for `Url::parse` of the same link; a link that is rewritten
//! costs 110–140 ns (`url` re-serializes).
//!

mod join;
mod link;
mod pattern;
pub(crate) mod percent;

use std::borrow::Cow;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use url::Url;

pub use join::{before_fragment, fragment_cut, is_plain_url_byte, PreparedBase};
pub use link::{reads_as, Link, LinkBatch};
use pattern::PatternSet;

/// Why a link was not turned into a crawlable URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("not an http(s) URL")]
    Scheme,
    #[error("URL has no host")]
    NoHost,
    #[error("URL has credentials")]
    Credentials,
    #[error("not a valid URL")]
    Unparsable,
}

/// The parameters stripped by default: tracking parameters and session ids.
pub(crate) const DEFAULT_STRIP_PARAMS: &[&str] =
    &["utm_*", "gclid", "fbclid", "jsessionid", "phpsessid", "sid"];

/// The last path segments `strip_default_documents` removes (compared ASCII
/// case-insensitively).
pub(crate) const DEFAULT_DOCUMENTS: &[&str] = &[
    "index.html",
    "index.htm",
    "index.php",
    "default.asp",
    "default.aspx",
];

/// The `[normalize]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizeOptions {
    /// Sort query parameters by name (stable: repeated names keep their order).
    pub sort_query: bool,
    /// Query and path parameters to remove: names or globs (`*`, `?`), ASCII
    /// case-insensitive, matched against the whole (normalized) parameter name.
    pub strip_params: Vec<String>,
    /// Remove a last path segment `index.html`, `index.htm`, `index.php`,
    /// `default.asp` or `default.aspx`.
    pub strip_default_documents: bool,
    /// Remove leading `www.` labels from the host.
    pub fold_www: bool,
    /// Collapse runs of `/` in the path into one (`/a//b` → `/a/b`). Off by default: an
    /// empty segment is part of the path, and some servers answer `/a//b` and `/a/b`
    /// differently.
    pub collapse_slashes: bool,
}

impl Default for NormalizeOptions {
    fn default() -> Self {
        Self {
            sort_query: false,
            strip_params: DEFAULT_STRIP_PARAMS.iter().map(|s| s.to_string()).collect(),
            strip_default_documents: false,
            fold_www: false,
            collapse_slashes: false,
        }
    }
}

/// An invalid `[normalize]` section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeConfigError {
    #[error("normalize.strip_params: invalid pattern {pattern:?}: {reason}")]
    InvalidPattern {
        pattern: String,
        reason: &'static str,
    },
}

/// [`NormalizeOptions`] compiled for the hot path. Immutable, `Send + Sync`, cheap to
/// share (`&Normalizer` or an `Arc`); build it once per crawl.
#[derive(Clone)]
pub struct Normalizer {
    options: NormalizeOptions,
    strip: PatternSet,
}

impl std::fmt::Debug for Normalizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Normalizer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Default for Normalizer {
    fn default() -> Self {
        Self::new(&NormalizeOptions::default()).expect("the default patterns are valid")
    }
}

impl Normalizer {
    /// Compiles the options; an invalid `strip_params` pattern is an error naming it.
    pub fn new(options: &NormalizeOptions) -> Result<Self, NormalizeConfigError> {
        Ok(Self {
            strip: PatternSet::new(&options.strip_params)?,
            options: options.clone(),
        })
    }

    /// The options this normalizer was built from.
    pub fn options(&self) -> &NormalizeOptions {
        &self.options
    }

    /// Canonicalizes an already parsed URL in place, or says why it is not crawlable (the
    /// URL may then be partly modified).
    pub fn canonicalize(&self, url: &mut Url) -> Result<(), Rejected> {
        match url.scheme() {
            "http" | "https" => {}
            _ => return Err(Rejected::Scheme),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Rejected::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Rejected::Credentials);
        }
        fold_trailing_dots(url)?;
        if url.fragment().is_some() {
            url.set_fragment(None);
        }
        self.normalize_path(url);
        self.normalize_query(url);
        if self.options.fold_www {
            fold_www(url);
        }
        Ok(())
    }

    /// [`Self::canonicalize`] of a [`Link`]: the same result, without building a `Url` for
    /// a fast-path link that needs no rewriting beyond dropping its fragment (the common
    /// case: the checks below are the ones [`Self::canonicalize`] makes, on the link's
    /// parts). Anything else is canonicalized as a `Url`.
    pub fn canonicalize_link(&self, link: &mut Link) -> Result<(), Rejected> {
        if let Some(url) = link.parsed_mut() {
            return self.canonicalize(url);
        }
        // A fast-path link is http(s) with a domain host and no credentials: rule 1 holds.
        link.drop_fragment();
        if !self.needs_rewrite(link) {
            return Ok(());
        }
        let mut url = link.to_url().map_err(|_| Rejected::Unparsable)?;
        self.canonicalize(&mut url)?;
        *link = Link::from(url);
        Ok(())
    }

    /// Whether rules 2 and 4–7 would change a fast-path link (without its fragment).
    fn needs_rewrite(&self, link: &Link) -> bool {
        // A trailing dot comes from the base's host (a link's own host has none).
        if link
            .host_str()
            .is_none_or(|host| host.is_empty() || host.ends_with('.'))
        {
            return true;
        }
        let path = link.path();
        if matches!(percent::normalize(path), Cow::Owned(_))
            || (!self.strip.is_empty() && path.contains(';'))
            || (self.options.collapse_slashes && path.contains("//"))
        {
            return true;
        }
        if self.options.strip_default_documents {
            let last = &path[path.rfind('/').map_or(0, |i| i + 1)..];
            if DEFAULT_DOCUMENTS
                .iter()
                .any(|d| last.eq_ignore_ascii_case(d))
            {
                return true;
            }
        }
        if let Some(query) = link.query() {
            if query.is_empty()
                || matches!(percent::normalize(query), Cow::Owned(_))
                || (self.options.sort_query && !is_sorted_by_name(query))
                || (!self.strip.is_empty() && self.strip.matches_any_param(query))
            {
                return true;
            }
        }
        self.options.fold_www && link.host_str().is_some_and(|h| h.starts_with("www."))
    }

    /// Parses and canonicalizes a URL written by a person or found in a page. Parsing is
    /// exactly `Url::parse` (which already ignores leading and trailing spaces and control
    /// characters, and tabs and newlines anywhere), so two inputs it parses equal always
    /// normalize equal.
    pub fn normalize_str(&self, input: &str) -> Result<Url, Rejected> {
        let mut url = Url::parse(input).map_err(|_| Rejected::Unparsable)?;
        self.canonicalize(&mut url)?;
        Ok(url)
    }

    fn normalize_path(&self, url: &mut Url) {
        let path = url.path();
        let normalized = percent::normalize(path);
        let strip = !self.strip.is_empty() && normalized.as_bytes().contains(&b';');
        let collapse = self.options.collapse_slashes && normalized.contains("//");
        if strip || collapse || matches!(normalized, Cow::Owned(_)) {
            let mut new = if strip {
                self.strip_path_params(&normalized)
            } else {
                normalized.into_owned()
            };
            if self.options.collapse_slashes {
                collapse_slashes(&mut new);
            }
            if new != url.path() {
                // Re-parsing resolves any dot segment that stripping a path parameter
                // uncovered (`/a/..;jsessionid=1/b` → `/b`); it never makes a new `//` out
                // of a path without one, nor re-encodes a normalized path.
                url.set_path(&new);
            }
        }
        if self.options.strip_default_documents {
            let path = url.path();
            let last = &path[path.rfind('/').map_or(0, |i| i + 1)..];
            if DEFAULT_DOCUMENTS
                .iter()
                .any(|d| last.eq_ignore_ascii_case(d))
            {
                let dir = path[..path.len() - last.len()].to_string();
                url.set_path(&dir);
            }
        }
    }

    /// The (already percent-normalized) path without its `;name=value` parameters whose
    /// name matches `strip_params`. Escapes are normalized octet by octet, so removing a
    /// parameter never changes how the rest reads.
    fn strip_path_params(&self, path: &str) -> String {
        let mut out = String::with_capacity(path.len());
        for (i, segment) in path.split('/').enumerate() {
            if i > 0 {
                out.push('/');
            }
            for (j, piece) in segment.split(';').enumerate() {
                if j > 0 {
                    if self.strip.matches(param_name(piece)) {
                        continue;
                    }
                    out.push(';');
                }
                out.push_str(piece);
            }
        }
        out
    }

    fn normalize_query(&self, url: &mut Url) {
        let Some(query) = url.query() else { return };
        if query.is_empty() {
            url.set_query(None);
            return;
        }
        // Escapes are normalized octet by octet, so doing it on the whole query is doing it
        // per parameter: removing or moving one never changes how the others read. Names are
        // matched and sorted in their normalized spelling.
        let normalized = percent::normalize(query);
        let sort = self.options.sort_query && !is_sorted_by_name(&normalized);
        let strip = !self.strip.is_empty() && self.strip.matches_any_param(&normalized);
        if !sort && !strip {
            // The common case: at most the escapes change.
            if let Cow::Owned(new) = normalized {
                url.set_query(Some(&new));
            }
            return;
        }
        let mut params: Vec<&str> = normalized.split('&').collect();
        if strip {
            params.retain(|p| !self.strip.matches(param_name(p)));
        }
        if sort {
            params.sort_by(|a, b| param_name(a).cmp(param_name(b)));
        }
        let new = params.join("&");
        if new != query {
            url.set_query((!new.is_empty()).then_some(new.as_str()));
        }
    }
}

/// The name of a `name=value` (or bare `name`) parameter.
#[inline]
fn param_name(param: &str) -> &str {
    param.split_once('=').map_or(param, |(name, _)| name)
}

fn is_sorted_by_name(query: &str) -> bool {
    let mut names = query.split('&').map(param_name);
    let Some(mut prev) = names.next() else {
        return true;
    };
    for name in names {
        if name < prev {
            return false;
        }
        prev = name;
    }
    true
}

/// `//` → `/`, for runs of any length (`collapse_slashes`).
fn collapse_slashes(path: &mut String) {
    let mut after_slash = false;
    path.retain(|c| {
        let keep = !(c == '/' && after_slash);
        after_slash = c == '/';
        keep
    });
}

/// `example.org.` → `example.org`: removes the trailing dots of a domain; `Err` if nothing
/// else is left (a host of dots names no host to crawl).
fn fold_trailing_dots(url: &mut Url) -> Result<(), Rejected> {
    let Some(url::Host::Domain(host)) = url.host() else {
        return Ok(());
    };
    if !host.ends_with('.') {
        return Ok(());
    }
    let folded = host.trim_end_matches('.');
    if folded.is_empty() {
        return Err(Rejected::NoHost);
    }
    let folded = folded.to_string();
    if url.set_host(Some(&folded)).is_ok() {
        return Ok(());
    }
    // Without its trailing dots a domain may read as an address: a last label that is a
    // number makes the host an IPv4 address (`1.2.3.4..` → `1.2.3.4`, the host it names,
    // taken above), and `foo.09` or `.0x7f` are none, so the parser refuses them. With one
    // trailing dot the last label is still the number; with two, the WHATWG parser reads a
    // domain (web-platform-tests' `http://foo.09..` is valid, `http://foo.09.` is not).
    // So such a host keeps exactly two: the one valid spelling of every `foo.09..…`, as the
    // dots the other domains lose make one spelling of theirs.
    url.set_host(Some(&format!("{folded}..")))
        .map_err(|_| Rejected::Unparsable)
}

/// Removes leading `www.` labels while at least two labels with a dot between remain.
fn fold_www(url: &mut Url) {
    let Some(url::Host::Domain(host)) = url.host() else {
        return;
    };
    let mut folded = host;
    while let Some(rest) = folded.strip_prefix("www.") {
        let core = rest.trim_end_matches('.');
        if core.starts_with('.') || !core.contains('.') {
            break;
        }
        folded = rest;
    }
    if folded.len() != host.len() {
        let folded = folded.to_string();
        // Cannot fail for a suffix of a valid domain; if it did, the host stays as it was.
        let _ = url.set_host(Some(&folded));
    }
}

/// The normalizer with the default options, used by the free functions.
pub(crate) fn default_normalizer() -> &'static Normalizer {
    static DEFAULT: OnceLock<Normalizer> = OnceLock::new();
    DEFAULT.get_or_init(Normalizer::default)
}

/// Parses and canonicalizes a URL with the default options
/// (see [`Normalizer::normalize_str`]).
pub fn normalize_str(input: &str) -> Result<Url, Rejected> {
    default_normalizer().normalize_str(input)
}

/// The politeness key of a URL (see [`crate::host`], where host identity is derived).
pub use crate::host::host_key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_url_agree() {
        for input in [
            "HTTP://Example.COM:80/a/./b/../b#frag",
            "http://example.com/a/b",
            "http://example.com/a/b?",
            "http://example.com/a/c/../b#",
        ] {
            assert_eq!(
                normalize_str(input).unwrap().as_str(),
                "http://example.com/a/b",
                "{input}"
            );
        }
        assert_eq!(
            normalize_str("https://example.com:443").unwrap().as_str(),
            "https://example.com/"
        );
    }

    #[test]
    fn non_http_is_rejected() {
        assert_eq!(normalize_str("mailto:a@b.c").unwrap_err(), Rejected::Scheme);
        assert_eq!(
            normalize_str("javascript:void(0)").unwrap_err(),
            Rejected::Scheme
        );
        assert_eq!(normalize_str("ftp://x.y/").unwrap_err(), Rejected::Scheme);
        assert_eq!(
            normalize_str("not a url").unwrap_err(),
            Rejected::Unparsable
        );
        assert_eq!(
            normalize_str("http://user:pw@x.y/").unwrap_err(),
            Rejected::Credentials
        );
    }

    #[test]
    fn free_functions_use_the_default_options() {
        assert_eq!(default_normalizer().options(), &NormalizeOptions::default());
        let n = Normalizer::default();
        for input in [
            "http://a.test/x?utm_source=1&b=%41#f",
            "https://www.a.test/index.html",
        ] {
            assert_eq!(normalize_str(input), n.normalize_str(input));
        }
        fn shareable<T: Send + Sync>() {}
        shareable::<Normalizer>();
    }

    #[test]
    fn canonical_urls_are_not_reserialized() {
        let all = Normalizer::new(&NormalizeOptions {
            sort_query: true,
            strip_default_documents: true,
            fold_www: true,
            collapse_slashes: true,
            ..NormalizeOptions::default()
        })
        .unwrap();
        for input in [
            "http://example.com/",
            "https://example.com/a/b.html",
            "https://example.com/a%2Fb;v=1/c?a=1&b=%C3%A9&c",
            "http://127.0.0.1:8080/p/1?q=x+y",
        ] {
            for n in [default_normalizer(), &all] {
                let mut url = Url::parse(input).unwrap();
                let before = url.as_str().as_ptr();
                n.canonicalize(&mut url).unwrap();
                assert_eq!(url.as_str(), input);
                assert_eq!(url.as_str().as_ptr(), before, "{input} was rewritten");
            }
        }
    }

    #[test]
    fn host_keys() {
        let u = Url::parse("http://A.test:8080/x").unwrap();
        assert_eq!(host_key(&u), "http://a.test:8080");
        let u = Url::parse("https://a.test/x").unwrap();
        assert_eq!(host_key(&u), "https://a.test");
        let u = Url::parse("https://A.test.:8443/x").unwrap();
        assert_eq!(host_key(&u), "https://a.test:8443");
        let u = Url::parse("http://[::1]/").unwrap();
        assert_eq!(host_key(&u), "http://[::1]");
    }

    #[test]
    fn trailing_dots_and_slashes() {
        for (input, want) in [
            ("http://www.example.org./", Ok("http://www.example.org/")),
            ("http://Example.ORG../a", Ok("http://example.org/a")),
            ("http://127.0.0.1./", Ok("http://127.0.0.1/")),
            ("http://a.test.:8080/", Ok("http://a.test:8080/")),
        ] {
            assert_eq!(
                normalize_str(input).as_ref().map(Url::as_str),
                want,
                "{input}"
            );
        }
        if let Ok(mut url) = Url::parse("http://./") {
            assert_eq!(
                default_normalizer().canonicalize(&mut url),
                Err(Rejected::NoHost)
            );
        }
        let collapse = Normalizer::new(&NormalizeOptions {
            collapse_slashes: true,
            ..NormalizeOptions::default()
        })
        .unwrap();
        for (input, want) in [
            ("http://a.test//a///b//", "http://a.test/a/b/"),
            ("http://a.test/a/;sid=1/b", "http://a.test/a/b"),
            ("http://a.test/x//..;sid=1/y", "http://a.test/y"),
            ("http://a.test/a%2F%2Fb", "http://a.test/a%2F%2Fb"),
        ] {
            assert_eq!(collapse.normalize_str(input).unwrap().as_str(), want);
        }
        assert_eq!(
            normalize_str("http://a.test//a//b").unwrap().as_str(),
            "http://a.test//a//b"
        );
    }
}
