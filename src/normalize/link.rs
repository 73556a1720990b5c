//! A resolved link as a string with the offsets of its parts, without a `Url`.
//!
//! # What it does
//! [`Link`] is what link resolution hands on: the link's text, exactly as `Url::join` would
//! serialize it, and where its scheme, host, port, path, query and fragment are. A link
//! resolved on [`super::PreparedBase`]'s fast path (an http(s) URL with a canonical domain
//! host and no credentials) is only that: a string and a few integers. Any other link keeps
//! the `Url` the parser built for it. Everything downstream of extraction reads links through
//! the same accessors (`as_str`, `host_str`, `path`, …), so it does not care which.
//!
//! # Guarantees
//! - A `Link` reads exactly as the `Url` of its text: every accessor gives what the `Url`'s
//!   gives (unit tests below and `normalize::join`'s, the property test
//!   `api normalize_props::prepared_base_joins_as_the_parser_does`).
//! - [`Link::into_url`] gives that `Url`, without parsing the text for a fast-path link
//!   (see `normalize::join` for how a `Url` is assembled from its parts).
//! - Never panics: offsets are checked when read, and a text whose offsets do not hold goes
//!   through the parser.
//!
//! # Why built this way
//! At ~80 links per 16 KB page, extraction's budget for 1 GB/s is ~100 ns per link, scanning
//! included; assembling a `Url` from parts costs ~60 ns of it (the `url` crate's
//! `deserialize_internal`, through serde). What admission asks of a link (its text for the
//! seen-set, its host for scope and politeness, its path for the path rules, its length) is
//! known while the string is built, so the fast path keeps those offsets and builds no
//! `Url`; only what needs one (a rewrite by the normalizer, a redirect) converts.

use std::fmt;

use url::{Host, Url};

use super::join::Parts;

/// A resolved link: its text and where its parts are (see the module documentation).
#[derive(Clone)]
pub struct Link {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// An http(s) URL with a domain host in canonical form and no credentials.
    Plain { text: String, parts: Parts },
    /// Anything else, as the parser built it.
    Parsed(Url),
}

impl Link {
    /// A fast-path link: `text` with the offsets in `parts` (the caller built both).
    pub(super) fn plain(text: String, parts: Parts) -> Link {
        Link {
            repr: Repr::Plain { text, parts },
        }
    }

    /// The link's text: what `Url::as_str` gives.
    pub fn as_str(&self) -> &str {
        match &self.repr {
            Repr::Plain { text, .. } => text,
            Repr::Parsed(url) => url.as_str(),
        }
    }

    /// The link's text, taken out of it (no copy).
    pub fn into_string(self) -> String {
        match self.repr {
            Repr::Plain { text, .. } => text,
            Repr::Parsed(url) => url.into(),
        }
    }

    /// Whether the link was built without the parser (for tests and benches).
    pub fn is_plain(&self) -> bool {
        matches!(self.repr, Repr::Plain { .. })
    }

    /// The scheme, lowercase.
    pub fn scheme(&self) -> &str {
        match &self.repr {
            Repr::Plain { text, parts } => text.get(..parts.scheme_end as usize).unwrap_or(""),
            Repr::Parsed(url) => url.scheme(),
        }
    }

    /// The host's text, as `Url::host_str` gives it.
    pub fn host_str(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => text.get(parts.scheme_end as usize + 3..parts.host_end),
            Repr::Parsed(url) => url.host_str(),
        }
    }

    /// The host, as `Url::host` gives it.
    pub fn host(&self) -> Option<Host<&str>> {
        match &self.repr {
            Repr::Plain { .. } => self.host_str().map(Host::Domain),
            Repr::Parsed(url) => url.host(),
        }
    }

    /// The port, unless it is the scheme's default.
    pub fn port(&self) -> Option<u16> {
        match &self.repr {
            Repr::Plain { parts, .. } => parts.port,
            Repr::Parsed(url) => url.port(),
        }
    }

    /// The path, as `Url::path` gives it.
    pub fn path(&self) -> &str {
        match &self.repr {
            Repr::Plain { text, parts } => text.get(parts.path_start..parts.path_end(text.len())),
            Repr::Parsed(url) => return url.path(),
        }
        .unwrap_or("")
    }

    /// The query without its `?`, as `Url::query` gives it.
    pub fn query(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => {
                let start = parts.query_start? + 1;
                text.get(start..parts.fragment_start.unwrap_or(text.len()))
            }
            Repr::Parsed(url) => url.query(),
        }
    }

    /// The fragment without its `#`, as `Url::fragment` gives it.
    pub fn fragment(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => text.get(parts.fragment_start? + 1..),
            Repr::Parsed(url) => url.fragment(),
        }
    }

    /// The link's `Url`: built from the parts for a fast-path link (no parsing), else the
    /// parser's. An error only if the text is not a URL, which a `Link` never is.
    pub fn into_url(self) -> Result<Url, url::ParseError> {
        match self.repr {
            Repr::Plain { text, parts } => match parts.assemble(text.clone()) {
                Some(url) => Ok(url),
                None => Url::parse(&text),
            },
            Repr::Parsed(url) => Ok(url),
        }
    }

    /// [`Self::into_url`] of a copy.
    pub fn to_url(&self) -> Result<Url, url::ParseError> {
        self.clone().into_url()
    }

    /// Removes the fragment, as `Url::set_fragment(None)` does.
    pub(super) fn drop_fragment(&mut self) {
        match &mut self.repr {
            Repr::Plain { text, parts } => {
                if let Some(start) = parts.fragment_start.take() {
                    text.truncate(start);
                }
            }
            Repr::Parsed(url) => url.set_fragment(None),
        }
    }

    /// Sets the fragment (without its `#`), or removes it, as `Url::set_fragment` does for
    /// a fragment of plain bytes; anything else is set through the parser.
    pub fn set_fragment(&mut self, fragment: Option<&str>) {
        self.drop_fragment();
        let Some(fragment) = fragment else { return };
        match &mut self.repr {
            Repr::Plain { text, parts } if fragment.bytes().all(is_plain_fragment_byte) => {
                parts.fragment_start = Some(text.len());
                text.push('#');
                text.push_str(fragment);
            }
            Repr::Plain { .. } => {
                if let Ok(mut url) = self.to_url() {
                    url.set_fragment(Some(fragment));
                    *self = Link::from(url);
                }
            }
            Repr::Parsed(url) => url.set_fragment(Some(fragment)),
        }
    }

    /// The link's host key (`scheme://host[:port]`), as [`crate::host::host_key`] gives it
    /// for the link's `Url`.
    pub fn host_key(&self) -> String {
        match &self.repr {
            Repr::Plain { .. } => {
                crate::host::host_key_of(self.scheme(), self.host_str().unwrap_or(""), self.port())
            }
            Repr::Parsed(url) => crate::host::host_key(url),
        }
    }

    /// The parsed URL, when the link is one (the normalizer rewrites those in place).
    pub(super) fn parsed_mut(&mut self) -> Option<&mut Url> {
        match &mut self.repr {
            Repr::Plain { .. } => None,
            Repr::Parsed(url) => Some(url),
        }
    }
}

impl From<Url> for Link {
    fn from(url: Url) -> Link {
        Link {
            repr: Repr::Parsed(url),
        }
    }
}

impl PartialEq for Link {
    fn eq(&self, other: &Link) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Link {}

impl PartialEq<Url> for Link {
    fn eq(&self, other: &Url) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for Link {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// A byte `Url::set_fragment` keeps as it is: ASCII letters and digits and the
/// punctuation the fragment percent-encode set leaves alone.
fn is_plain_fragment_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b)
}

/// Every accessor of `link` gives what the same accessor of `url` gives (for tests).
pub fn reads_as(link: &Link, url: &Url) -> bool {
    link.as_str() == url.as_str()
        && link.scheme() == url.scheme()
        && link.host_str() == url.host_str()
        && link.host() == url.host()
        && link.port() == url.port()
        && link.path() == url.path()
        && link.query() == url.query()
        && link.fragment() == url.fragment()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::PreparedBase;

    #[test]
    fn a_plain_link_reads_as_its_url() {
        let base = Url::parse("https://a.test:8443/d/p.html?x#y").unwrap();
        let prepared = PreparedBase::new(&base);
        for href in [
            "q",
            "/r?s=1#t",
            "#f",
            "?",
            "//b.test/c",
            "http://c.test:81/?#",
            "",
        ] {
            let link = prepared.join_link(href).unwrap();
            assert!(link.is_plain(), "{href:?}");
            let url = base.join(href).unwrap();
            assert!(reads_as(&link, &url), "{href:?}: {link:?}");
            let built = link.clone().into_url().unwrap();
            assert!(super::super::join::same_url(&built, &url), "{href:?}");
            assert_eq!(link.host_key(), crate::host::host_key(&url), "{href:?}");
            let mut marked = link.clone();
            marked.set_fragment(Some("sitemap"));
            let mut want = url.clone();
            want.set_fragment(Some("sitemap"));
            assert!(marked.is_plain() && reads_as(&marked, &want), "{href:?}");
            let mut dropped = link.clone();
            dropped.drop_fragment();
            let mut want = url.clone();
            want.set_fragment(None);
            assert!(reads_as(&dropped, &want), "{href:?}: {dropped:?}");
        }
    }

    #[test]
    fn a_parsed_link_reads_as_its_url() {
        for text in [
            "mailto:a@b.test",
            "http://[::1]:8/x?y#z",
            "http://u:p@a.test/",
        ] {
            let url = Url::parse(text).unwrap();
            let link = Link::from(url.clone());
            assert!(!link.is_plain());
            assert!(reads_as(&link, &url), "{text}");
            assert_eq!(link.into_url().unwrap(), url);
        }
    }
}
