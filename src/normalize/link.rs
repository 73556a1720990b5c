//! A resolved link as a string with the offsets of its parts, without a `Url`.
//!
//! # What it does
//! [`Link`] is what link resolution hands on: the link's text, exactly as `Url::join` would
//! serialize it, and where its scheme, host, port, path, query and fragment are. A link
//! resolved on [`super::PreparedBase`]'s fast path (an http(s) URL with a canonical domain
//! host and no credentials) is only that: a string and a few integers; the string is its own,
//! or a range of the text a page's links share ([`LinkBatch`], what the extractor hands
//! out: one allocation per page, and a link is copied out of it only when it is queued,
//! [`Link::into_string`], or extended, [`Link::set_fragment`]). Any other link keeps
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
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

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
    Plain { text: Text, parts: Parts },
    /// Anything else, as the parser built it (boxed: the rare case, which would otherwise
    /// make every link, and every page's list of them, half as large again).
    Parsed(Box<Url>),
}

/// A plain link's text: a string of its own, or its range of the text a page's links share
/// ([`LinkBatch`]: one allocation for a page's links, not one per link; a `String`, not a
/// `str`, so that the text is handed over as it was written, not copied).
#[derive(Clone)]
enum Text {
    Own(String),
    Shared {
        page: PageText,
        start: u32,
        end: u32,
    },
}

/// The text a page's links share, counted like an `Arc<String>` but handed out to all of
/// them with one atomic add ([`PageText::handles`]): an `Arc` cloned per link was an atomic
/// increment per link, each waiting for the last (the same cache line), a twentieth of
/// extracting a doc corpus page (perf: `lock incq` in `finish_into`). Dropping a handle
/// is an atomic decrement, as for an `Arc`: links are dropped one by one, anywhere.
struct PageText {
    inner: NonNull<PageInner>,
}

struct PageInner {
    /// Handles alive (and not yet handed out, see [`Handles`]).
    count: AtomicUsize,
    text: String,
}

// SAFETY: a `PageText` gives shared, read-only access to a `String` (`Send + Sync`), and its
// count is atomic: as for `Arc<String>`, which is `Send + Sync`.
unsafe impl Send for PageText {}
// SAFETY: as above.
unsafe impl Sync for PageText {}

/// `n` handles on one [`PageText`], handed out one by one; those not taken when this is
/// dropped are given back at once.
struct Handles {
    inner: Option<NonNull<PageInner>>,
    left: usize,
}

impl PageText {
    /// `text` shared by `n` handles, counted once.
    fn handles(text: String, n: usize) -> Handles {
        if n == 0 {
            return Handles {
                inner: None,
                left: 0,
            };
        }
        let inner = Box::new(PageInner {
            count: AtomicUsize::new(n),
            text,
        });
        Handles {
            inner: Some(NonNull::from(Box::leak(inner))),
            left: n,
        }
    }

    fn as_str(&self) -> &str {
        // SAFETY: `inner` stays allocated while a handle (this one) counts it.
        unsafe { self.inner.as_ref() }.text.as_str()
    }

    /// Gives back `n` handles' counts; frees the text if they were the last ones.
    ///
    /// # Safety
    /// `inner` is a live `PageInner` of which the caller owns `n` counts, and uses none of
    /// them after this.
    unsafe fn release(inner: NonNull<PageInner>, n: usize) {
        // SAFETY: the caller's counts keep `inner` allocated until the subtraction.
        if unsafe { inner.as_ref() }
            .count
            .fetch_sub(n, Ordering::Release)
            != n
        {
            return;
        }
        // Every other handle's use of the text happens before the free (as in `Arc`'s drop).
        fence(Ordering::Acquire);
        // SAFETY: the count reached zero: no handle is left, and `inner` came from
        // `Box::leak` in `handles`.
        drop(unsafe { Box::from_raw(inner.as_ptr()) });
    }
}

impl Clone for PageText {
    fn clone(&self) -> Self {
        // SAFETY: as in `as_str`.
        let old = unsafe { self.inner.as_ref() }
            .count
            .fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc` does: a count this high means handles were leaked by the billion.
            std::process::abort();
        }
        PageText { inner: self.inner }
    }
}

impl Drop for PageText {
    fn drop(&mut self) {
        // SAFETY: this handle owns one count and is gone after this.
        unsafe { PageText::release(self.inner, 1) }
    }
}

impl Iterator for Handles {
    type Item = PageText;

    fn next(&mut self) -> Option<PageText> {
        let inner = self.inner?;
        self.left = self.left.checked_sub(1)?;
        Some(PageText { inner })
    }
}

impl Drop for Handles {
    fn drop(&mut self) {
        if let (Some(inner), 1..) = (self.inner, self.left) {
            // SAFETY: the `left` counts not handed out are this iterator's own.
            unsafe { PageText::release(inner, self.left) }
        }
    }
}

impl Text {
    fn as_str(&self) -> &str {
        match self {
            Text::Own(text) => text,
            Text::Shared { page, start, end } => page
                .as_str()
                .get(*start as usize..*end as usize)
                .unwrap_or(""),
        }
    }

    /// Keeps the first `len` bytes (a char boundary: a plain link is ASCII).
    fn truncate(&mut self, len: usize) {
        match self {
            Text::Own(text) => text.truncate(len),
            Text::Shared { start, end, .. } => {
                let len = u32::try_from(len).unwrap_or(u32::MAX);
                *end = (*end).min(start.saturating_add(len));
            }
        }
    }

    fn into_string(self) -> String {
        match self {
            Text::Own(text) => text,
            Text::Shared { .. } => self.as_str().to_owned(),
        }
    }
}

impl Link {
    /// A fast-path link: `text` with the offsets in `parts` (the caller built both).
    pub(super) fn plain(text: String, parts: Parts) -> Link {
        Link {
            repr: Repr::Plain {
                text: Text::Own(text),
                parts,
            },
        }
    }

    /// The link's text: what `Url::as_str` gives.
    pub fn as_str(&self) -> &str {
        match &self.repr {
            Repr::Plain { text, .. } => text.as_str(),
            Repr::Parsed(url) => url.as_str(),
        }
    }

    /// The link's text, taken out of it (no copy).
    pub fn into_string(self) -> String {
        match self.repr {
            Repr::Plain { text, .. } => text.into_string(),
            Repr::Parsed(url) => (*url).into(),
        }
    }

    /// Whether the link was built without the parser (for tests and benches).
    pub fn is_plain(&self) -> bool {
        matches!(self.repr, Repr::Plain { .. })
    }

    /// The scheme, lowercase.
    pub fn scheme(&self) -> &str {
        match &self.repr {
            Repr::Plain { text, parts } => {
                text.as_str().get(..parts.scheme_end as usize).unwrap_or("")
            }
            Repr::Parsed(url) => url.scheme(),
        }
    }

    /// The host's text, as `Url::host_str` gives it.
    pub fn host_str(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => text
                .as_str()
                .get(parts.scheme_end as usize + 3..parts.host_end as usize),
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
            Repr::Plain { text, parts } => {
                let text = text.as_str();
                text.get(parts.path_start as usize..parts.path_end(text.len()))
            }
            Repr::Parsed(url) => return url.path(),
        }
        .unwrap_or("")
    }

    /// The query without its `?`, as `Url::query` gives it.
    pub fn query(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => {
                let text = text.as_str();
                let start = parts.query_start()? as usize + 1;
                text.get(start..parts.fragment_start().map_or(text.len(), |i| i as usize))
            }
            Repr::Parsed(url) => url.query(),
        }
    }

    /// The fragment without its `#`, as `Url::fragment` gives it.
    pub fn fragment(&self) -> Option<&str> {
        match &self.repr {
            Repr::Plain { text, parts } => {
                text.as_str().get(parts.fragment_start()? as usize + 1..)
            }
            Repr::Parsed(url) => url.fragment(),
        }
    }

    /// The link's `Url`: built from the parts for a fast-path link (no parsing), else the
    /// parser's. An error only if the text is not a URL, which a `Link` never is.
    pub fn into_url(self) -> Result<Url, url::ParseError> {
        match self.repr {
            Repr::Plain { text, parts } => {
                let text = text.into_string();
                match parts.assemble(text.clone()) {
                    Some(url) => Ok(url),
                    None => Url::parse(&text),
                }
            }
            Repr::Parsed(url) => Ok(*url),
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
                if let Some(start) = parts.take_fragment_start() {
                    text.truncate(start as usize);
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
        // Where the `#` goes, for a fragment of plain bytes that keeps the link under 4 GiB.
        let plain_at = match &self.repr {
            Repr::Plain { text, .. } if fragment.bytes().all(is_plain_fragment_byte) => {
                let len = text.as_str().len();
                u32::try_from(len)
                    .ok()
                    .filter(|_| len.saturating_add(fragment.len()) < u32::MAX as usize)
                    .and_then(NonZeroU32::new)
            }
            _ => None,
        };
        match (&mut self.repr, plain_at) {
            (Repr::Plain { text, parts }, Some(at)) => {
                let mut own = std::mem::replace(text, Text::Own(String::new())).into_string();
                parts.set_fragment_start(at);
                own.push('#');
                own.push_str(fragment);
                *text = Text::Own(own);
            }
            (Repr::Plain { .. }, None) => {
                if let Ok(mut url) = self.to_url() {
                    url.set_fragment(Some(fragment));
                    *self = Link::from(url);
                }
            }
            (Repr::Parsed(url), _) => url.set_fragment(Some(fragment)),
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
            Repr::Parsed(url) => Some(&mut **url),
        }
    }
}

/// A page's links resolved into one text they share: [`super::PreparedBase::join_into`]
/// appends each fast-path link's text to it, and [`Self::finish_into`] hands the links out
/// as [`Link`]s that read their text from one shared `String`: one allocation for the page's
/// links instead of one per link (at ~60 links per page, per-link allocations and frees
/// were a tenth of the extractor's time on the doc corpus). A link keeps its page's text
/// alive only until it is queued ([`Link::into_string`] copies it out) or dropped. Kept
/// from page to page by its owner, so that its buffers are allocated once.
#[derive(Default)]
pub struct LinkBatch {
    pub(super) text: String,
    pending: Vec<Pending>,
    /// The index of the last link whose text was written (not [`Self::repeat`]ed): the one
    /// [`Self::pop`] may take its text back from.
    last_written: Option<usize>,
}

/// A link of a batch before the batch's text is shared.
enum Pending {
    /// A fast-path link: its range of the batch's text, and its parts (relative to it).
    Plain { start: u32, end: u32, parts: Parts },
    /// A link with a text of its own (the parser's; boxed, as the rare case, so that a
    /// pending link is the size of a plain one: one more allocation for each of these, 1%
    /// of the doc corpus's links, against 16 bytes less written and read for every link).
    Other(Box<Link>),
}

impl LinkBatch {
    /// Links in the batch.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether the batch holds no link.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds a link that has its own text.
    pub fn push(&mut self, link: Link) {
        self.pending.push(Pending::Other(Box::new(link)));
    }

    /// Adds the fast-path link whose text was appended to `self.text` from `start`; returns
    /// its length.
    // Inlined: called out of line, it read `parts` back from the caller's stack, where
    // it had been written field by field, and waited for the stores each time (a failed
    // store-to-load forwarding: most of this function's time on the doc corpus).
    #[inline(always)]
    pub(super) fn push_plain(&mut self, start: usize, parts: Parts) -> usize {
        let end = self.text.len();
        let len = end.saturating_sub(start);
        match (u32::try_from(start), u32::try_from(end)) {
            (Ok(start), Ok(end)) => {
                self.last_written = Some(self.pending.len());
                self.pending.push(Pending::Plain { start, end, parts });
            }
            // Past 4 GiB of links (a hostile page without limits): a text of its own.
            _ => {
                let own = self.text.get(start..).unwrap_or_default().to_owned();
                self.text.truncate(start.min(end));
                self.pending
                    .push(Pending::Other(Box::new(Link::plain(own, parts))));
            }
        }
        len
    }

    /// Makes room for `links` more links and `bytes` more bytes of their text, so that the
    /// batch is filled without growing (on a long page, growing by doubling copied the text
    /// and the links several times over, and faulted in fresh pages at each step).
    pub fn reserve(&mut self, links: usize, bytes: usize) {
        self.pending.reserve(links);
        self.text.reserve(bytes);
    }

    /// Adds the link at `index` (of this batch, not yet finished) once more, sharing its
    /// text, and returns its length: a page that names one target several times gets that
    /// target's link once resolved. `None` (nothing added) unless that link is a fast-path
    /// one (another is as cheap to resolve again as to copy).
    pub fn repeat(&mut self, index: usize) -> Option<usize> {
        match self.pending.get(index) {
            Some(&Pending::Plain { start, end, parts }) => {
                self.pending.push(Pending::Plain { start, end, parts });
                Some(end.saturating_sub(start) as usize)
            }
            _ => None,
        }
    }

    /// Drops the fragment of the last link added, if it has one: a link resolved from an
    /// `href` that could not be cut before its fragment ([`super::before_fragment`]).
    pub fn drop_last_fragment(&mut self) {
        let index = self.pending.len().checked_sub(1);
        match self.pending.last_mut() {
            Some(Pending::Plain { start, end, parts }) => {
                if let Some(at) = parts.take_fragment_start() {
                    *end = start.saturating_add(at).min(*end);
                    if index == self.last_written && self.text.is_char_boundary(*end as usize) {
                        self.text.truncate(*end as usize);
                    }
                }
            }
            Some(Pending::Other(link)) => link.set_fragment(None),
            None => {}
        }
    }

    /// Removes the last link added (and its text, unless that text is another link's too).
    pub fn pop(&mut self) {
        let index = self.pending.len().checked_sub(1);
        if let Some(Pending::Plain { start, .. }) = self.pending.pop() {
            if index == self.last_written {
                self.text.truncate(start as usize);
                self.last_written = None;
            }
        }
    }

    /// Appends the batch's links to `out` in the order they were added, and empties the
    /// batch. The text is handed to the links as it is, not copied (a copy was a
    /// tenth of resolving on long pages); the list of links keeps its buffer.
    pub fn finish_into(&mut self, out: &mut Vec<Link>) {
        let mut text = std::mem::take(&mut self.text);
        if text.capacity() - text.len() > text.len() / 4 {
            // Reserved for the longest the links could have been: the rest is given back
            // (in place) rather than held for as long as the links are.
            text.shrink_to_fit();
        }
        self.last_written = None;
        let shared = self
            .pending
            .iter()
            .filter(|pending| matches!(pending, Pending::Plain { .. }))
            .count();
        let mut pages = PageText::handles(text, shared);
        out.extend(self.pending.drain(..).map(|pending| match pending {
            Pending::Plain { start, end, parts } => Link {
                repr: Repr::Plain {
                    text: match pages.next() {
                        Some(page) => Text::Shared { page, start, end },
                        // Never: there is a handle per plain link.
                        None => Text::Own(String::new()),
                    },
                    parts,
                },
            },
            Pending::Other(link) => *link,
        }));
    }

    /// Bytes the batch's buffers hold (their capacity).
    pub fn capacity_bytes(&self) -> usize {
        self.text.capacity().saturating_add(
            self.pending
                .capacity()
                .saturating_mul(std::mem::size_of::<Pending>()),
        )
    }
}

impl From<Url> for Link {
    fn from(url: Url) -> Link {
        Link {
            repr: Repr::Parsed(Box::new(url)),
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
    fn links_of_a_batch_share_its_text_and_read_as_their_urls() {
        let base = Url::parse("https://a.test/d/e/p.html?x#y").unwrap();
        let prepared = PreparedBase::new(&base);
        let hrefs = [
            "../q.html#f",
            "mailto:a@b.test",
            "#g",
            "//B.test",
            "?z",
            "./r/./s",
            "",
        ];
        let mut batch = LinkBatch::default();
        for round in 0..2 {
            // The first link and the one after a `pop` must not leave anything behind.
            assert!(prepared.join_into("dropped", &mut batch).is_ok());
            batch.pop();
            for href in hrefs {
                let len = prepared.join_into(href, &mut batch).unwrap();
                assert_eq!(len, base.join(href).unwrap().as_str().len(), "{href:?}");
            }
            let mut links = Vec::new();
            batch.finish_into(&mut links);
            assert!(batch.is_empty(), "round {round}");
            assert_eq!(links.len(), hrefs.len());
            for (link, href) in links.iter().zip(hrefs) {
                let url = base.join(href).unwrap();
                assert!(reads_as(link, &url), "{href:?}: {link:?}");
                assert_eq!(link.is_plain(), !href.starts_with("mailto"), "{href:?}");
                let mut dropped = link.clone();
                dropped.drop_fragment();
                let mut want = url.clone();
                want.set_fragment(None);
                assert!(reads_as(&dropped, &want), "{href:?}");
                let mut marked = link.clone();
                marked.set_fragment(Some("m"));
                want.set_fragment(Some("m"));
                assert!(reads_as(&marked, &want), "{href:?}");
                assert_eq!(link.clone().into_string(), url.as_str());
                assert!(super::super::join::same_url(
                    &link.clone().into_url().unwrap(),
                    &url
                ));
            }
        }
    }

    #[test]
    fn a_repeated_link_shares_its_text_and_popping_it_keeps_the_first() {
        let base = Url::parse("https://a.test/d/p.html").unwrap();
        let prepared = PreparedBase::new(&base);
        let mut batch = LinkBatch::default();
        prepared.join_into("x/y.html#f", &mut batch).unwrap();
        prepared.join_into("mailto:a@b.test", &mut batch).unwrap();
        let text_len = batch.text.len();
        assert_eq!(batch.repeat(0), Some("https://a.test/d/x/y.html#f".len()));
        assert_eq!(batch.repeat(1), None, "a parser's link is resolved again");
        assert_eq!(batch.text.len(), text_len, "a repeat writes no text");
        // Over a budget, the extractor takes back the last link: a repeat's text is its
        // first occurrence's, which stays.
        batch.pop();
        prepared.join_into("z", &mut batch).unwrap();
        batch.pop();
        assert_eq!(batch.repeat(0), Some(27));
        let mut links = Vec::new();
        batch.finish_into(&mut links);
        let texts: Vec<&str> = links.iter().map(Link::as_str).collect();
        assert_eq!(
            texts,
            [
                "https://a.test/d/x/y.html#f",
                "mailto:a@b.test",
                "https://a.test/d/x/y.html#f"
            ]
        );
        assert!(reads_as(&links[2], &base.join("x/y.html#f").unwrap()));
    }

    #[test]
    fn page_text_handles_count_what_they_hand_out() {
        let count = |page: &PageText| unsafe { page.inner.as_ref() }.count.load(Ordering::Relaxed);
        let mut handles = PageText::handles("shared".to_owned(), 3);
        let first = handles.next().unwrap();
        let second = handles.next().unwrap();
        assert_eq!(count(&first), 3);
        // The handle not taken is given back with the iterator.
        drop(handles);
        assert_eq!(count(&first), 2);
        let third = second.clone();
        assert_eq!(count(&first), 3);
        drop(second);
        drop(first);
        assert_eq!((count(&third), third.as_str()), (1, "shared"));
        let mut none = PageText::handles("unused".to_owned(), 0);
        assert!(none.next().is_none());
        let mut two = PageText::handles("two".to_owned(), 2);
        assert!(two.next().is_some() && two.next().is_some() && two.next().is_none());
    }

    #[test]
    fn a_link_is_small() {
        // A page's links are written, read and dropped by the dozen per page: a link is its
        // text's handle and 32-bit offsets (an absent query or fragment in a `NonZeroU32`'s
        // niche), the parser's rare `Url` boxed; a pending one its range and offsets.
        let sizes = (
            std::mem::size_of::<Parts>(),
            std::mem::size_of::<Link>(),
            std::mem::size_of::<Pending>(),
        );
        assert!(
            sizes.0 <= 24 && sizes.1 <= 48 && sizes.2 <= 32,
            "parts, link, pending: {sizes:?}"
        );
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
