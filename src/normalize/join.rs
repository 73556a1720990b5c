//! Resolving a page's links against its base without the URL parser, for the common cases.
//!
//! # What it does
//! [`PreparedBase`] takes a page's base URL apart once (scheme, host, port, path, query) and
//! then resolves each link of the page with [`PreparedBase::join`], which always gives what
//! `Url::join` gives: the same URL, byte for byte, with the same components, or the same
//! error. Links in the forms real pages are made of are resolved textually, from the base's
//! parts and the link's bytes, and the result is assembled into a [`Url`] without parsing
//! it again, or, by [`PreparedBase::join_link`], handed on as a [`Link`] (the text and its
//! offsets, no `Url` at all: what the extractor does):
//! - relative paths (`item.html`, `../guide/x.html#s`, `a/./b/..`), dot segments
//!   (`.`, `..`, `%2e`) resolved as the URL standard resolves them;
//! - root-relative paths (`/docs/a.html`), queries (`?q=1`), fragments (`#f`) and the empty
//!   link;
//! - scheme-relative (`//cdn.example/x`) and absolute `http://` / `https://` links (the
//!   scheme in any case) whose host is ASCII letters, digits, `-` and `.` (lowercased, as
//!   the parser does; not punycode, not an address) with an optional port;
//! - any of these with what the parser strips first: leading and trailing C0 controls and
//!   spaces, and ASCII tabs and newlines anywhere (`href=" /x.html\n"`, as pages write
//!   them).
//!
//! Anything else goes to `Url::join`: a byte the parser would percent-encode or drop
//! elsewhere (spaces and controls inside, non-ASCII, `"`, `'`, `<`, `>`, `` ` ``, `{`, `}`,
//! `\`, `|`, `^`, `[`, `]`), a punycode or numeric host or one with other characters,
//! credentials, another scheme, a base that is not http(s) or whose host is an address.
//!
//! # Guarantees
//! - Equal to `Url::join` on every input: property-tested against it
//!   (`tests/api/normalize_props.rs`, generated bases and links made of the pieces URL
//!   parsing turns on), on the WHATWG URL test suite (`tests/api/whatwg_url.rs`), on the
//!   extractor's differential tests, and in the unit tests below, which in a debug build
//!   also run the `url` crate's own invariant check on each assembled URL.
//! - The fast path allocates once per link, the URL's own string sized in advance
//!   ([`PreparedBase::join_link`]), or not at all ([`PreparedBase::join_into`] writes into
//!   the text a [`LinkBatch`]'s links share).
//! - Never panics: slicing is checked, and a failure anywhere falls back to the parser.
//!
//! # Why built this way
//! The extractor resolves every link of every page: on a 16 KB page of 80 links, parsing
//! each result with `Url::parse` (or `Url::join`) cost ~19 µs, more than scanning the page.
//! Resolution itself is string work; what the parser adds is validation and its component
//! offsets. For the forms above, validation is a table lookup per byte, and the offsets are
//! known while the string is built. The `url` crate builds a `Url` from its parts through
//! [`Url::deserialize_internal`] (public, with its `serde` feature: "sacrifices some
//! invariant-checking for speed"), so the crawl keeps the `url` crate's type everywhere
//! else. That function's input is the crate's internal layout, pinned by `Cargo.lock`; a
//! layout change would fail the tests, and at run time [`assembly_works`] checks once per
//! process that an assembled URL reads back exactly as a parsed one, and turns the fast path
//! off if not.
//!
//! Where an `href`'s delimiters are (`/`, `?`, `#`, `:`, and the `.` or `%` a dot segment
//! starts with) is found once per link, in one pass of SSE2 compares that gives a bit mask
//! per kind of byte (`Shape`; up to 64 bytes, a byte search per question past that): the
//! questions resolution asks (where the first segment ends, whether it holds a scheme's
//! `:`, where the path ends, whether a segment may be a dot segment, where the fragment
//! starts) were each a byte loop of their own, nearly a third of the time resolving a link
//! took on the doc corpus (`cargo bench --bench extract`, perf). A property test checks
//! every answer against a byte-by-byte search.

use std::num::NonZeroU32;
use std::sync::OnceLock;

use serde::de::value::{Error as PartsError, SeqDeserializer, U16Deserializer, U32Deserializer};
use serde::de::{self, IntoDeserializer, Visitor};
use url::{Host, Position, Url};

use super::{Link, LinkBatch};

/// A base URL taken apart for resolving many links against it.
#[derive(Debug, Clone)]
pub struct PreparedBase<'a> {
    url: &'a Url,
    /// The parts the fast path builds from, when the base is one it serves.
    fast: Option<BaseParts<'a>>,
}

/// An http(s) base with a domain host and no credentials, as offsets into its text.
#[derive(Debug, Clone)]
struct BaseParts<'a> {
    whole: &'a str,
    /// `http` (4) or `https` (5): where the scheme ends.
    scheme_end: u32,
    host_end: usize,
    port: Option<u16>,
    /// Where the path starts (after `scheme://host[:port]`).
    path_start: usize,
    /// Where the path ends (the query's `?`, the fragment's `#`, or the end).
    path_end: usize,
    /// Where the query ends (the fragment's `#`, or the end).
    query_end: usize,
    /// Where the base path's last segment starts: a relative path replaces it.
    last_segment: usize,
    /// Where the directories above the base's end: `dirs[k]` is the `/` that ends the
    /// directory `k` levels up (`dirs[0]` is `last_segment`, the last kept one the path's
    /// first `/`), for `k` below `dir_count`; so a relative link's leading `../`s cost a
    /// lookup, not a search back through the text per `../`.
    dirs: [u32; DIRS],
    dir_count: u8,
    /// Whether `dirs` holds every `/` of the path (a path of at most [`DIRS`] of them).
    dirs_complete: bool,
    /// Whether a segment of the path looks like a Windows drive letter (`c:`), which `..`
    /// does not remove in the `url` crate's hands (see [`is_drive_letter`]).
    drive_segment: bool,
}

/// The directories above a base that [`BaseParts`] keeps: a link that climbs higher in a
/// deeper path is resolved by the general path code.
const DIRS: usize = 16;

/// Longest link the fast path builds: longer ones are rare, and go to the parser.
const FAST_MAX: usize = 1 << 16;

impl<'a> PreparedBase<'a> {
    /// Takes `base` apart once.
    pub fn new(base: &'a Url) -> Self {
        PreparedBase {
            url: base,
            fast: BaseParts::of(base),
        }
    }

    /// The base URL.
    pub fn url(&self) -> &'a Url {
        self.url
    }

    /// Whether links are resolved without the parser (for tests and benches).
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// `href` resolved against the base: exactly `self.url().join(href)`.
    pub fn join(&self, href: &str) -> Result<Url, url::ParseError> {
        if let Some(url) = self.join_fast(href) {
            return Ok(url);
        }
        self.url.join(href)
    }

    /// `href` resolved on the fast path only: `None` where [`Self::join`] asks the parser.
    pub fn join_fast(&self, href: &str) -> Option<Url> {
        let mut text = String::new();
        let parts = self.fast.as_ref()?.join(href, &mut text)?;
        parts.assemble(text)
    }

    /// `href` resolved against the base as a [`Link`]: the text and parts of
    /// `self.url().join(href)`, built without a `Url` on the fast path.
    pub fn join_link(&self, href: &str) -> Result<Link, url::ParseError> {
        let mut text = String::new();
        match self
            .fast
            .as_ref()
            .and_then(|fast| fast.join(href, &mut text))
        {
            Some(parts) => Ok(Link::plain(text, parts)),
            None => self.url.join(href).map(Link::from),
        }
    }

    /// [`Self::join_into`] of an `href` whose bytes are all [`is_plain_url_byte`] (the
    /// caller checked them, while it read them for its own purposes): the fast path skips
    /// its own check (and the trimming: such an `href` has nothing to trim), so the result
    /// is exactly `self.url().join(href)` only if the caller is right. A debug build
    /// (the tests, the fuzz target) asserts that it is.
    pub(crate) fn join_plain_into(
        &self,
        href: &str,
        batch: &mut LinkBatch,
    ) -> Result<usize, url::ParseError> {
        debug_assert!(is_plain(href.as_bytes()), "not plain: {href:?}");
        if let (Some(fast), true) = (&self.fast, href.len() <= FAST_MAX) {
            let start = batch.text.len();
            if let Some(parts) = fast.join_plain(href, &mut batch.text) {
                return Ok(batch.push_plain(start, parts));
            }
            batch.text.truncate(start);
        }
        self.join_into(href, batch)
    }

    /// [`Self::join_link`], added to `batch` (a fast-path link's text goes into the text
    /// the batch's links share: no allocation of its own). Returns the link's length.
    pub fn join_into(&self, href: &str, batch: &mut LinkBatch) -> Result<usize, url::ParseError> {
        if let Some(fast) = &self.fast {
            let start = batch.text.len();
            if let Some(parts) = fast.join(href, &mut batch.text) {
                return Ok(batch.push_plain(start, parts));
            }
        }
        let link = Link::from(self.url.join(href)?);
        let len = link.as_str().len();
        batch.push(link);
        Ok(len)
    }

    /// [`Self::join_into`] of `href`'s link without its fragment, as the crawl's extractor
    /// resolves it ([`before_fragment`]; the extractor cuts each value once, for its table
    /// of repeats, and then does the same): `Url::join`'s URL without the fragment, or the
    /// same error.
    pub fn join_into_without_fragment(
        &self,
        href: &str,
        batch: &mut LinkBatch,
    ) -> Result<usize, url::ParseError> {
        let (cut, fragment_left) = before_fragment(href);
        let len = self.join_into(cut, batch)?;
        if fragment_left {
            batch.drop_last_fragment();
        }
        Ok(len)
    }
}

impl<'a> BaseParts<'a> {
    fn of(base: &'a Url) -> Option<Self> {
        let scheme_end = match base.scheme() {
            "http" => 4,
            "https" => 5,
            _ => return None,
        };
        if !matches!(base.host(), Some(Host::Domain(_)))
            || !base.username().is_empty()
            || base.password().is_some()
            || !assembly_works()
        {
            return None;
        }
        let whole = base.as_str();
        let host_end = base[..Position::AfterHost].len();
        let path_start = base[..Position::BeforePath].len();
        let path_end = base[..Position::AfterPath].len();
        let query_end = base[..Position::AfterQuery].len();
        let path = whole.get(path_start..path_end)?;
        let last_segment = path_start + path.rfind('/')?;
        if whole.len() > u32::MAX as usize / 2 {
            return None;
        }
        let mut dirs = [0u32; DIRS];
        let mut dir_count = 0;
        // memchr's search, not a byte loop: this runs once per page, and was 4% of
        // resolving a page's links on the doc corpus.
        let mut slashes = memchr::memrchr_iter(b'/', path.as_bytes()).map(|i| path_start + i);
        for (slot, slash) in dirs.iter_mut().zip(&mut slashes) {
            *slot = u32::try_from(slash).ok()?;
            dir_count += 1;
        }
        let dirs_complete = slashes.next().is_none();
        Some(BaseParts {
            whole,
            scheme_end,
            host_end,
            port: base.port(),
            path_start,
            path_end,
            query_end,
            last_segment,
            dirs,
            dir_count,
            dirs_complete,
            drive_segment: path.split('/').any(is_drive_letter),
        })
    }

    /// Where the directory `ups` levels above the base's ends (the root's, if `ups` climbs
    /// higher, as `..` never removes the origin): `None` if not kept.
    fn dir_above(&self, ups: usize) -> Option<usize> {
        if ups < usize::from(self.dir_count) {
            return self.dirs.get(ups).map(|&dir| dir as usize);
        }
        self.dirs_complete.then_some(self.path_start)
    }

    /// `href` resolved and appended to `out`, with its offsets (from where it starts in
    /// `out`), or `None` for the parser, `out` as it was. As the parser does first, leading
    /// and trailing C0 controls and spaces are trimmed and ASCII tabs and newlines removed
    /// (pages do write `href=" /x\n"`); the second costs a copy, only when there is one.
    fn join(&self, href: &str, out: &mut String) -> Option<Parts> {
        let start = out.len();
        let parts = self.join_trimmed(href, out);
        if parts.is_none() {
            out.truncate(start);
        }
        parts
    }

    fn join_trimmed(&self, href: &str, out: &mut String) -> Option<Parts> {
        if href.len() > FAST_MAX {
            return None;
        }
        let href = href.trim_matches(|c: char| c <= ' ');
        if is_plain(href.as_bytes()) {
            return self.join_plain(href, out);
        }
        if !href.bytes().any(is_tab_or_newline) {
            return None;
        }
        let cleaned: String = href
            .chars()
            .filter(|&c| !u8::try_from(c).is_ok_and(is_tab_or_newline))
            .collect();
        if !is_plain(cleaned.as_bytes()) {
            return None;
        }
        self.join_plain(&cleaned, out)
    }

    /// [`Self::join`] of an `href` made of [`PLAIN`] bytes only (`out` may be left with
    /// part of a link when it gives `None`).
    fn join_plain(&self, href: &str, out: &mut String) -> Option<Parts> {
        let bytes = href.as_bytes();
        let whole = self.whole;
        match bytes.first() {
            // The base without its fragment.
            None => self.keep_base(self.query_end, "", out),
            // The fragment-only link (a fifth of a documentation page's): the base's text
            // without its fragment, then the `href` as it is (plain bytes are what the
            // parser writes them as).
            Some(b'#') => self.keep_base(self.query_end, href, out),
            Some(b'?') => self.keep_base(self.path_end, href, out),
            Some(b'/') if bytes.get(1) == Some(&b'/') => {
                absolute(self.scheme_end == 5, href, 2, &Shape::of(bytes), out)
            }
            Some(b'/') => {
                let start = out.len();
                out.reserve(self.path_start + href.len() + 1);
                out.push_str(whole.get(..self.path_start)?);
                self.finish_same_origin(out, start, href, 1, &Shape::of(bytes))
            }
            Some(_) => {
                // One pass over the `href` finds its delimiters for every question below
                // (each was a byte loop of its own: together nearly a third of resolving a
                // link).
                let shape = Shape::of(bytes);
                let first_segment = shape.first(Shape::PATH_END, 0).unwrap_or(href.len());
                if let Some(colon) = shape.first(Shape::COLON, 0).filter(|&c| c < first_segment) {
                    // A scheme (or what the parser must decide about); the parser lowercases
                    // it.
                    href.get(colon + 1..)?.strip_prefix("//")?;
                    let scheme = href.get(..colon)?;
                    return if scheme.eq_ignore_ascii_case("http") {
                        absolute(false, href, colon + 3, &shape, out)
                    } else if scheme.eq_ignore_ascii_case("https") {
                        absolute(true, href, colon + 3, &shape, out)
                    } else {
                        None
                    };
                }
                let start = out.len();
                // The leading `../` and `./` of a relative link (half the links of a
                // documentation site: `../../core/str/index.html`) pick the directory the
                // rest is relative to, which is copied once. They are not the path's last
                // segment (a `/` follows), so no trailing `/` is due for them.
                let (ups, rest) = leading_dot_segments(href);
                if ups > 0 && self.drive_segment {
                    // A `..` may meet a segment the parser keeps: its answer, not ours.
                    return None;
                }
                let (dir, from) = match self.dir_above(ups) {
                    Some(dir) => (dir, href.len() - rest.len()),
                    None => (self.last_segment, 0),
                };
                out.reserve(dir + href.len() + 1);
                out.push_str(whole.get(..dir)?);
                self.finish_same_origin(out, start, href, from, &shape)
            }
        }
    }

    /// The base up to `end` (its path, or its query), then `tail` (a query or fragment).
    fn keep_base(&self, end: usize, tail: &str, out: &mut String) -> Option<Parts> {
        out.reserve(end + tail.len());
        out.push_str(self.whole.get(..end)?);
        let query_start = if end == self.path_end {
            // `tail` is the new query, if any.
            None
        } else {
            (self.query_end > self.path_end).then_some(self.path_end)
        };
        out.push_str(tail);
        let (query, fragment) = tail_offsets(end, tail);
        Parts::new(
            self.scheme_end,
            self.host_end,
            self.port,
            self.path_start,
            query_start.or(query),
            fragment,
        )
    }

    /// `out` holds, from `start`, the base's origin and the directory `href` is relative
    /// to; appends `href[from..]` (path, query, fragment), whose delimiters `shape` knows.
    fn finish_same_origin(
        &self,
        out: &mut String,
        start: usize,
        href: &str,
        from: usize,
        shape: &Shape<'_>,
    ) -> Option<Parts> {
        let path_end = shape
            .first(Shape::QUERY_OR_FRAGMENT, from)
            .unwrap_or(href.len());
        let path = href.get(from..path_end)?;
        if shape.may_have_dot_segment(from, path_end) {
            push_path(out, start + self.path_start, path)?;
        } else {
            // Nearly every link: each segment appended as it is.
            out.push('/');
            out.push_str(path);
        }
        let (query, fragment) = shape.tail_offsets(path_end, out.len() - start);
        out.push_str(href.get(path_end..)?);
        Parts::new(
            self.scheme_end,
            self.host_end,
            self.port,
            self.path_start,
            query,
            fragment,
        )
    }
}

/// An `http(s)://` link, appended to `out`: `href[at..]` is what follows the `//`, and
/// `shape` is `href`'s.
fn absolute(
    https: bool,
    href: &str,
    at: usize,
    shape: &Shape<'_>,
    out: &mut String,
) -> Option<Parts> {
    let authority_end = shape.first(Shape::PATH_END, at).unwrap_or(href.len());
    let authority = href.get(at..authority_end)?;
    let (host, port) = match shape.first(Shape::COLON, at).filter(|&c| c < authority_end) {
        None => (authority, None),
        Some(colon) => (
            href.get(at..colon)?,
            parse_port(href.get(colon + 1..authority_end)?, https)?,
        ),
    };
    if !is_plain_host(host) {
        return None;
    }
    let scheme = if https { "https://" } else { "http://" };
    let start = out.len();
    out.reserve(scheme.len() + href.len() - at + 1);
    out.push_str(scheme);
    out.push_str(host);
    let host_end = out.len() - start;
    // The parser lowercases an ASCII host (the only mapping a plain host gets).
    if let Some(written) = out.get_mut(start + scheme.len()..start + host_end) {
        written.make_ascii_lowercase();
    }
    if let Some(port) = port {
        push_port(out, port);
    }
    let path_start = out.len() - start;
    let path_end = shape
        .first(Shape::QUERY_OR_FRAGMENT, authority_end)
        .unwrap_or(href.len());
    match href.get(authority_end..path_end)?.strip_prefix('/') {
        Some(path) => {
            if shape.may_have_dot_segment(authority_end + 1, path_end) {
                push_path(out, start + path_start, path)?;
            } else {
                out.push('/');
                out.push_str(path);
            }
        }
        // No path: a special URL's path is `/`.
        None => out.push('/'),
    }
    let (query, fragment) = shape.tail_offsets(path_end, out.len() - start);
    out.push_str(href.get(path_end..)?);
    Parts::new(
        if https { 5 } else { 4 },
        host_end,
        port,
        path_start,
        query,
        fragment,
    )
}

/// Where the delimiters of an `href` are: `/`, `?`, `#`, `:`, and the `.` and `%` a dot
/// segment starts with. Found in one pass for an `href` of up to 64 bytes (SSE2 compares,
/// 16 bytes at a time, on x86-64: every one of them has it; a byte loop elsewhere), as a
/// bit per byte, so that each question about the `href` is a mask and a count of trailing
/// zeros; a longer `href` is searched byte by byte for each question, as before.
#[derive(Debug, Clone, Copy)]
enum Shape<'a> {
    /// `masks[class]`: bit `i` set when byte `i` is of that class.
    Short {
        masks: [u64; CLASSES],
    },
    Long(&'a [u8]),
}

/// Byte classes [`Shape`] knows (indices into its masks).
const CLASSES: usize = 6;

impl<'a> Shape<'a> {
    /// `/`, `?` or `#`: where an authority, or a relative path's first segment, ends.
    const PATH_END: usize = 0;
    /// `?` or `#`: where a path ends.
    const QUERY_OR_FRAGMENT: usize = 1;
    /// `#`.
    const FRAGMENT: usize = 2;
    /// `:`.
    const COLON: usize = 3;
    /// `/`.
    const SLASH: usize = 4;
    /// `.` or `%`: what a dot segment ([`dots`]) starts with.
    const DOT_OR_PERCENT: usize = 5;

    fn of(bytes: &'a [u8]) -> Shape<'a> {
        if bytes.len() > 64 {
            return Shape::Long(bytes);
        }
        Shape::Short {
            masks: short_masks(bytes),
        }
    }

    /// Whether byte `b` is of `class`.
    fn is(class: usize, b: u8) -> bool {
        match class {
            Self::PATH_END => matches!(b, b'/' | b'?' | b'#'),
            Self::QUERY_OR_FRAGMENT => matches!(b, b'?' | b'#'),
            Self::FRAGMENT => b == b'#',
            Self::COLON => b == b':',
            Self::SLASH => b == b'/',
            _ => matches!(b, b'.' | b'%'),
        }
    }

    /// The first byte of `class` at or after `from`.
    fn first(&self, class: usize, from: usize) -> Option<usize> {
        match self {
            Shape::Short { masks } => {
                let above = masks[class].checked_shr(from as u32).unwrap_or(0);
                (above != 0).then(|| from + above.trailing_zeros() as usize)
            }
            Shape::Long(bytes) => {
                let rest = bytes.get(from..)?;
                rest.iter()
                    .position(|&b| Self::is(class, b))
                    .map(|i| from + i)
            }
        }
    }

    /// Whether a segment of the path `bytes[from..to]` (relative, or absolute without its
    /// first `/`) starts with `.` or `%`, as every one [`dots`] counts does.
    fn may_have_dot_segment(&self, from: usize, to: usize) -> bool {
        match self {
            Shape::Short { masks } => {
                let range = bits_below(to) & !bits_below(from);
                let starts = (masks[Self::SLASH] << 1) | 1u64.checked_shl(from as u32).unwrap_or(0);
                masks[Self::DOT_OR_PERCENT] & starts & range != 0
            }
            Shape::Long(bytes) => bytes.get(from..to).is_some_and(may_have_dot_segment),
        }
    }

    /// Where the query and fragment start in a result whose tail (`bytes[path_end..]`:
    /// empty, `?…` or `#…`) is appended at `at`.
    fn tail_offsets(&self, path_end: usize, at: usize) -> (Option<usize>, Option<usize>) {
        let fragment = self.first(Self::FRAGMENT, path_end);
        let query = match self.first(Self::QUERY_OR_FRAGMENT, path_end) {
            Some(i) if i == path_end && fragment != Some(i) => Some(at),
            _ => None,
        };
        (query, fragment.map(|i| at + i - path_end))
    }
}

/// The bits below bit `n` (all 64 from `n = 64` up).
fn bits_below(n: usize) -> u64 {
    1u64.checked_shl(n as u32).map_or(u64::MAX, |bit| bit - 1)
}

/// [`Shape`]'s masks of an `href` of at most 64 bytes (bytes past 64 are not looked at).
#[cfg(target_arch = "x86_64")]
fn short_masks(bytes: &[u8]) -> [u64; CLASSES] {
    sse2_masks(bytes)
}

/// [`Shape`]'s masks of an `href` of at most 64 bytes (bytes past 64 are not looked at).
#[cfg(not(target_arch = "x86_64"))]
fn short_masks(bytes: &[u8]) -> [u64; CLASSES] {
    portable_masks(bytes)
}

/// [`short_masks`] a byte at a time: what other CPUs run, and what the SSE2 code is tested
/// against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn portable_masks(bytes: &[u8]) -> [u64; CLASSES] {
    let mut masks = [0u64; CLASSES];
    for (i, &b) in bytes.iter().enumerate().take(64) {
        for (class, mask) in masks.iter_mut().enumerate() {
            if Shape::is(class, b) {
                *mask |= 1 << i;
            }
        }
    }
    masks
}

/// [`short_masks`] with SSE2 (part of x86-64 itself): six compares and six `pmovmskb` per
/// 16 bytes.
#[cfg(target_arch = "x86_64")]
// The intrinsics below are safe functions from Rust 1.87 on (SSE2 is always enabled on
// x86-64), unsafe before: the blocks are needed for the oldest Rust this builds with.
#[allow(unused_unsafe)]
fn sse2_masks(bytes: &[u8]) -> [u64; CLASSES] {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let len = bytes.len().min(64);
    let mut padded = [0u8; 64];
    if let (Some(to), Some(from)) = (padded.get_mut(..len), bytes.get(..len)) {
        to.copy_from_slice(from);
    }
    // `/`, `?`, `#`, `:`, `.`, `%`: a zero byte (the padding) is none of them.
    let mut hits = [0u64; 6];
    for (k, chunk) in padded.chunks_exact(16).enumerate() {
        if k * 16 >= len {
            break;
        }
        // SAFETY: reads the 16 bytes of `chunk` (an unaligned load is allowed).
        let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>()) };
        for (mask, c) in hits.iter_mut().zip(*b"/?#:.%") {
            // SAFETY: SSE2 is part of x86-64.
            let found = unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8))) };
            *mask |= u64::from(found as u16) << (16 * k);
        }
    }
    let [slash, question, hash, colon, dot, percent] = hits;
    [
        slash | question | hash,
        question | hash,
        hash,
        colon,
        slash,
        dot | percent,
    ]
}

/// A port as the parser reads it: digits, at most 65535, the scheme's default dropped.
/// `None` for what the fast path leaves to the parser (an empty port, more than 5 digits).
fn parse_port(text: &str, https: bool) -> Option<Option<u16>> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = text.parse().ok()?;
    let default = if https { 443 } else { 80 };
    Some((port != default).then_some(port))
}

fn push_port(out: &mut String, port: u16) {
    use std::fmt::Write;
    let _ = write!(out, ":{port}");
}

/// A host the parser keeps as it is but for lowercasing it: ASCII letters, digits, `-` and
/// `.` in non-empty labels, no punycode label (`xn--` in any case: the parser validates
/// those), and a last label that starts with a letter (one that is a number makes the host
/// an address, or invalid).
fn is_plain_host(host: &str) -> bool {
    let bytes = host.as_bytes();
    // A label is empty, or punycode, seen from its first byte.
    let bad_label = |start: usize| match bytes.get(start..) {
        None | Some([]) | Some([b'.', ..]) => true,
        Some(label) => label
            .get(..4)
            .is_some_and(|head| head.eq_ignore_ascii_case(b"xn--")),
    };
    let mut label = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'.' {
            if bad_label(label) {
                return false;
            }
            label = i + 1;
        } else if !(b.is_ascii_alphanumeric() || b == b'-') {
            return false;
        }
    }
    !bad_label(label) && bytes.get(label).is_some_and(|b| b.is_ascii_alphabetic())
}

/// Where the first byte of `s` for which `wanted` holds is. A byte loop: the searches here
/// are for ASCII delimiters in short strings, where `str::find` with a set of `char`s
/// decodes UTF-8 for nothing (it showed in the crawl bench's profile).
fn find_byte(s: &str, wanted: impl Fn(u8) -> bool) -> Option<usize> {
    s.bytes().position(wanted)
}

/// What the URL parser removes from anywhere in its input.
fn is_tab_or_newline(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\r')
}

/// Appends the segments of `path` (a relative path, or an absolute one without its first
/// `/`) to `out`, whose path starts at `floor`, resolving dot segments as the URL standard's
/// path state does: `..` removes the last segment (never the origin), `.` nothing, and
/// either as the last segment leaves the path ending in `/`. `None` where a `..` meets a
/// segment the parser would keep (a drive letter, see [`is_drive_letter`]).
fn push_path(out: &mut String, floor: usize, mut path: &str) -> Option<()> {
    // A relative link's leading `../` and `./` (half the links of a documentation site:
    // `../../core/str/index.html`): each `../` drops the directory's last segment, at
    // once, without the segment loop below. They are not the path's last segment (a `/`
    // follows), which is what the loop would do with them too.
    loop {
        if let Some(rest) = path.strip_prefix("../") {
            if out.len() > floor {
                let cut = out
                    .as_bytes()
                    .get(floor..)
                    .and_then(|p| memchr::memrchr(b'/', p))
                    .map_or(floor, |i| floor + i);
                pop_segment(out, cut)?;
            }
            path = rest;
        } else if let Some(rest) = path.strip_prefix("./") {
            path = rest;
        } else {
            break;
        }
    }
    if !may_have_dot_segment(path.as_bytes()) {
        // Nearly every link: each segment would be appended as it is.
        out.push('/');
        out.push_str(path);
        return Some(());
    }
    let mut segments = path.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match dots(segment) {
            2 => {
                if out.len() > floor {
                    let cut = out
                        .get(floor..)
                        .and_then(|p| p.rfind('/'))
                        .map_or(floor, |i| floor + i);
                    pop_segment(out, cut)?;
                }
                if last {
                    out.push('/');
                }
            }
            1 => {
                if last {
                    out.push('/');
                }
            }
            _ => {
                out.push('/');
                out.push_str(segment);
            }
        }
    }
    Some(())
}

/// Removes `out`'s last segment, which starts after the `/` at `cut`; `None`, `out` as it
/// was, if that segment is a drive letter (see [`is_drive_letter`]).
fn pop_segment(out: &mut String, cut: usize) -> Option<()> {
    if out.get(cut + 1..).is_some_and(is_drive_letter) {
        return None;
    }
    out.truncate(cut);
    Some(())
}

/// Whether a path segment is a Windows drive letter (`c:` or `c|`). The `url` crate (2.5,
/// `Parser::last_slash_can_be_removed`) keeps such a segment when a `..` would remove it,
/// in every scheme, where the URL standard does so for `file:` URLs only: for an http URL,
/// `http://h/a:/` joined with `../` is `http://h/a:/` there, not `http://h/`. The fast path
/// must give what `Url::join` gives (the crawl compares URLs resolved either way), so it
/// leaves any `..` that meets one to the parser. Found by the property test against
/// `Url::join` (`tests/api/normalize_props.rs`).
fn is_drive_letter(segment: &str) -> bool {
    matches!(segment.as_bytes(), [letter, b':' | b'|'] if letter.is_ascii_alphabetic())
}

/// The `../` segments `href` starts with, counted, and what follows them and any `./`
/// among them.
fn leading_dot_segments(mut href: &str) -> (usize, &str) {
    let mut ups = 0;
    loop {
        if let Some(rest) = href.strip_prefix("../") {
            ups += 1;
            href = rest;
        } else if let Some(rest) = href.strip_prefix("./") {
            href = rest;
        } else {
            return (ups, href);
        }
    }
}

/// Whether a segment of `path` starts with `.` or `%`, as every one [`dots`] counts does.
fn may_have_dot_segment(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(b'.' | b'%'))
        || bytes
            .windows(2)
            .any(|pair| pair[0] == b'/' && matches!(pair[1], b'.' | b'%'))
}

/// 1 for a single-dot segment (`.`, `%2e`), 2 for a double-dot one (`..`, `.%2e`, `%2e.`,
/// `%2e%2e`, any case), else 0.
fn dots(segment: &str) -> u8 {
    let is = |s: &str| segment.eq_ignore_ascii_case(s);
    match segment.len() {
        1 if segment == "." => 1,
        2 if segment == ".." => 2,
        3 if is("%2e") => 1,
        4 if is(".%2e") || is("%2e.") => 2,
        6 if is("%2e%2e") => 2,
        _ => 0,
    }
}

/// Where the query and fragment start in a result whose `tail` (empty, `?…` or `#…`) is
/// appended at `at`.
fn tail_offsets(at: usize, tail: &str) -> (Option<usize>, Option<usize>) {
    let fragment = find_byte(tail, |b| b == b'#');
    let query = tail.starts_with('?').then_some(at);
    (query, fragment.map(|i| at + i))
}

/// What to resolve for the link `href` names, when that link is wanted without its
/// fragment (the crawl drops every fragment: it never reaches the server): `href` up to its
/// first `#`, and whether the link resolved from that may still have a fragment to drop
/// ([`LinkBatch::drop_last_fragment`]).
///
/// The parser reads a link left to right and meets its first `#` as it would the end of
/// the input: everything before it is decided as if the link ended there, and the fragment
/// after it changes no other part of the URL and never makes it fail. So `href` cut at its
/// first `#` resolves to the URL `href` resolves to, but for the fragment. Exceptions:
/// - the parser trims C0 controls and spaces from the end of the whole `href` only, so a
///   cut that left such a byte at the end would lose it where the whole `href` keeps it
///   (percent-encoded);
/// - the `url` crate, whose answer is the contract, reads an input that *ends* in some
///   bytes otherwise than one where a `#` follows them: `ahttp://@` is `ahttp://` to it,
///   `ahttp://@#x` an empty-host error (the property test below found it);
/// - a link that *starts* with `#` is the one thing a base with an opaque path
///   (`javascript:void(0)`, `mailto:…`) resolves, where the empty link fails.
///
/// So an `href` is cut only where the byte before its `#` is one that ends a path
/// segment or a query value (an ASCII letter or digit, `/`, `.`, `-`, `_`, `~`: nearly
/// every real `href`'s); any other is resolved whole (`true`); and a fragment-only `href`
/// is resolved as `#` (`true`), the same for every one of them.
///
/// Cutting makes the page's links to parts of one target (`struct.Vec.html#method.len`,
/// `struct.Vec.html#method.insert`) one link, resolved once ([`LinkBatch::repeat`]), and
/// every fragment-only link one, the page itself; the property test
/// `prepared_base_joins_without_fragment_as_the_parser_does` checks it.
pub fn before_fragment(href: &str) -> (&str, bool) {
    let (len, fragment_left) = fragment_cut(href.as_bytes(), find_byte(href, |b| b == b'#'));
    (href.get(..len).unwrap_or(href), fragment_left)
}

/// [`before_fragment`] as a length, for an `href` whose first `#` is known to be at `hash`
/// (the extractor finds it in the pass that classes the value's bytes).
pub fn fragment_cut(href: &[u8], hash: Option<usize>) -> (usize, bool) {
    match hash {
        None => (href.len(), false),
        Some(0) => (1, true),
        Some(at) => match href.get(at - 1) {
            Some(&before) if ends_a_segment(before) => (at, false),
            _ => (href.len(), true),
        },
    }
}

/// The bytes an `href` is cut after, before its `#` ([`fragment_cut`]).
fn ends_a_segment(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'~')
}

/// Whether the parser keeps byte `b` as it is in a path, a query and a fragment of an
/// http(s) URL (for a UTF-8 document), so that a link of these bytes needs no encoding:
/// ASCII letters and digits, `-._~!$&()*+,;=:@/?#%`. Not `'` (escaped in a query), nor
/// anything the parser escapes or drops (spaces and controls among them, so a link of these
/// bytes has nothing to trim either).
pub const fn is_plain_url_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'/'
                | b'?'
                | b'#'
                | b'%'
        )
}

/// `PLAIN[b]`: [`is_plain_url_byte`] as a table.
static PLAIN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_plain_url_byte(b as u8);
        b += 1;
    }
    table
};

/// Whether every byte of `bytes` is [`PLAIN`]; eight independent lookups per branch.
fn is_plain(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |ok, &b| ok & PLAIN[usize::from(b)]) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| PLAIN[usize::from(b)])
}

/// The offsets of an http(s) URL with a domain host and no credentials, in its text: 32-bit
/// (the fast path builds no link of 4 GiB), so that a page's links, a few dozen of these
/// each, take half the memory they took with `usize`s; the query's and the fragment's, never
/// 0 (a scheme comes first), `NonZeroU32`, so that being absent takes no room of its own (24
/// bytes, not 32: a page's links are written twice and read once each).
#[derive(Debug, Clone, Copy)]
pub(super) struct Parts {
    /// `http` (4) or `https` (5): where the scheme ends.
    pub(super) scheme_end: u32,
    pub(super) host_end: u32,
    pub(super) path_start: u32,
    query: Option<NonZeroU32>,
    fragment: Option<NonZeroU32>,
    pub(super) port: Option<u16>,
}

impl Parts {
    /// The parts at these offsets; `None` if one does not fit 32 bits.
    pub(super) fn new(
        scheme_end: u32,
        host_end: usize,
        port: Option<u16>,
        path_start: usize,
        query_start: Option<usize>,
        fragment_start: Option<usize>,
    ) -> Option<Parts> {
        let index = |i: usize| u32::try_from(i).ok();
        // A start of 0 (never: a scheme comes first) is refused, as one past 32 bits is.
        let optional = |i: Option<usize>| match i {
            Some(i) => index(i).and_then(NonZeroU32::new).map(Some),
            None => Some(None),
        };
        Some(Parts {
            scheme_end,
            host_end: index(host_end)?,
            path_start: index(path_start)?,
            query: optional(query_start)?,
            fragment: optional(fragment_start)?,
            port,
        })
    }

    /// Where the query's `?` is, if there is a query.
    pub(super) fn query_start(&self) -> Option<u32> {
        self.query.map(NonZeroU32::get)
    }

    /// Where the fragment's `#` is, if there is a fragment.
    pub(super) fn fragment_start(&self) -> Option<u32> {
        self.fragment.map(NonZeroU32::get)
    }

    /// Removes the fragment's offset; returns it.
    pub(super) fn take_fragment_start(&mut self) -> Option<u32> {
        self.fragment.take().map(NonZeroU32::get)
    }

    /// Sets where the fragment's `#` is.
    pub(super) fn set_fragment_start(&mut self, start: NonZeroU32) {
        self.fragment = Some(start);
    }

    /// Where the path ends in a text of `len` bytes.
    pub(super) fn path_end(&self, len: usize) -> usize {
        self.query_start()
            .or(self.fragment_start())
            .map_or(len, |i| i as usize)
    }

    /// The `Url` of `text` with these offsets, without parsing `text`.
    pub(super) fn assemble(self, text: String) -> Option<Url> {
        let host_start = self.scheme_end + 3;
        let parts = [
            Part::Text(text),
            Part::Index(self.scheme_end),
            // No credentials: the username ends where the host starts.
            Part::Index(host_start),
            Part::Index(host_start),
            Part::Index(self.host_end),
            Part::Domain,
            Part::Port(self.port),
            Part::Index(self.path_start),
            Part::OptIndex(self.query_start()),
            Part::OptIndex(self.fragment_start()),
        ];
        Url::deserialize_internal(SeqDeserializer::<_, PartsError>::new(parts.into_iter())).ok()
    }
}

/// One field of `Url`'s internal representation, as [`Url::deserialize_internal`] reads
/// it (a tuple: text, scheme end, username end, host start, host end, host kind, port,
/// path start, query start, fragment start).
enum Part {
    Text(String),
    Index(u32),
    OptIndex(Option<u32>),
    Port(Option<u16>),
    /// The host kind `Domain`: variant 1 of the crate's host enum.
    Domain,
}

impl<'de> de::Deserializer<'de> for Part {
    type Error = PartsError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PartsError> {
        match self {
            Part::Text(text) => visitor.visit_string(text),
            Part::Index(i) => visitor.visit_u32(i),
            Part::OptIndex(None) | Part::Port(None) => visitor.visit_none(),
            Part::OptIndex(Some(i)) => visitor.visit_some(U32Deserializer::<PartsError>::new(i)),
            Part::Port(Some(port)) => visitor.visit_some(U16Deserializer::<PartsError>::new(port)),
            Part::Domain => visitor.visit_enum(U32Deserializer::<PartsError>::new(1)),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, PartsError> for Part {
    type Deserializer = Part;

    fn into_deserializer(self) -> Part {
        self
    }
}

/// Whether URLs assembled from parts read back exactly as parsed ones, checked once per
/// process on URLs of every shape the fast path builds: if the `url` crate's internal layout
/// ever changes under us, the fast path turns itself off instead of building wrong URLs.
pub(crate) fn assembly_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        let works = [
            "https://a.test:8443/p/q?x=1#f",
            "http://a.test/",
            "http://b.example/x#y?z",
            "https://c.test/?",
        ]
        .iter()
        .all(|text| {
            let (Ok(parsed), Some(built)) = (Url::parse(text), absolute_from_text(text)) else {
                return false;
            };
            same_url(&parsed, &built)
        });
        if !works {
            tracing::warn!(
                "the url crate's internal layout differs from what link resolution expects: \
                 links are resolved by the parser (slower, same results)"
            );
        }
        works
    })
}

/// An absolute URL's text through [`absolute`], assembled.
fn absolute_from_text(text: &str) -> Option<Url> {
    let mut out = String::new();
    let shape = Shape::of(text.as_bytes());
    let parts = if text.starts_with("https://") {
        absolute(true, text, "https://".len(), &shape, &mut out)?
    } else if text.starts_with("http://") {
        absolute(false, text, "http://".len(), &shape, &mut out)?
    } else {
        return None;
    };
    parts.assemble(out)
}

/// Every component equal, not only the text (`Url`'s `==` compares the text).
pub(crate) fn same_url(a: &Url, b: &Url) -> bool {
    a.as_str() == b.as_str()
        && a.scheme() == b.scheme()
        && a.username() == b.username()
        && a.password() == b.password()
        && a.host() == b.host()
        && a.port() == b.port()
        && a.path() == b.path()
        && a.query() == b.query()
        && a.fragment() == b.fragment()
        && a[..Position::BeforePath] == b[..Position::BeforePath]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_href_is_cut_before_its_fragment_only_after_a_byte_that_ends_a_segment() {
        for (href, want) in [
            ("a.html#x", ("a.html", false)),
            ("#x", ("#", true)),
            ("#", ("#", true)),
            ("", ("", false)),
            ("a.html", ("a.html", false)),
            ("a#b#c", ("a", false)),
            ("?q#f", ("?q", false)),
            ("a.html #x", ("a.html #x", true)),
            ("a.html\t#x", ("a.html\t#x", true)),
            ("a.html\u{1}#x", ("a.html\u{1}#x", true)),
            (" #x", (" #x", true)),
            ("a.html#x ", ("a.html", false)),
            ("dir/#x", ("dir/", false)),
            ("?q=1#x", ("?q=1", false)),
            ("ahttp://@#x", ("ahttp://@#x", true)),
            ("?q=#x", ("?q=#x", true)),
            ("h:#x", ("h:#x", true)),
        ] {
            assert_eq!(before_fragment(href), want, "{href:?}");
        }
    }

    const BASES: &[&str] = &[
        "http://example.test/dir/page.html",
        "https://example.test:8443/a/b/?q=1#f",
        "https://example.test",
        "http://example.test/dir/?x",
        "http://example.test/a/b/c/d/e.html",
        "http://example.test/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/p.html",
        "http://example.test/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/p.html",
        "http://example.test/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/",
        "http://example.test/a//b/",
        "http://example.test/?only",
        "http://example.test/p#frag",
        "https://user:pw@example.test/a/b",
        "http://127.0.0.1:8080/x/y",
        "http://xn--bcher-kva.test/a;b/c",
        "mailto:someone@example.test",
        "file:///etc/x",
        // Segments the `url` crate takes for drive letters (see `is_drive_letter`).
        "http://example.test/a:/",
        "http://example.test/x/c|/y/p.html",
        "http://example.test/x/Z:",
        "http://example.test/x/ab:/y",
    ];

    const HREFS: &[&str] = &[
        "",
        "../",
        "../../x",
        "./../y",
        "b/c:/../d",
        "b/c:/./../../d",
        "/a:/../x",
        "/q/%2e%2e/a|/../x",
        "https://abs.test/z:/../y",
        "a",
        "a/b.html",
        "/root",
        "/root?x=1&y=2",
        "?q",
        "?",
        "#",
        "#frag",
        "x?y#z",
        "x#y?z",
        "a:b",
        "a/b:c",
        "//other.test/p",
        "//other.test",
        "//other.test?q#f",
        "//other.test:81/p",
        "//other.test:80/p",
        "//other.test:0080/p",
        "//other.test:/p",
        "//other.test:99999/p",
        "//Other.test/p",
        "//a..b/p",
        "//.a/p",
        "//a./p",
        "//xn--bcher-kva.test/",
        "//1.2.3.4/",
        "//a.0x7f/",
        "//a.1/",
        "//user@a.test/",
        "//a%41.test/",
        "///x",
        "http://abs.test/x",
        "https://abs.test/x/../y/./z",
        "https://abs.test",
        "https://abs.test:443/",
        "https://abs.test:80/",
        "http:abs.test/x",
        "http:/abs.test/x",
        "HTTP://abs.test/",
        "ftp://abs.test/",
        "../up",
        "../../../../../up",
        "../../../../../../../../../../../../../../../x",
        "../../../../../../../../../../../../../../../../x",
        "../../../../../../../../../../../../../../../../../x",
        "../../../../../../../../../../../../../../../../../../../../x",
        "./.././../../../../../../../../../../../../../.././../../x/../y",
        "../../../../../../../../../../../../../../../../..",
        "../../core/str/index.html#method.len",
        "./../x",
        ".././x/./y",
        "../a/../b",
        "../..",
        "../../",
        "../%2e%2e/x",
        "../.%2E/x?q",
        ".../x",
        "..//x",
        ".//x",
        "./.",
        "../#f",
        "../?q",
        "./here",
        "a/./b",
        "a/..",
        "a/../",
        "a/../..",
        ".",
        "..",
        "./",
        "../",
        ".hidden",
        "a..b",
        "%2e/x",
        "%2E%2e/x",
        ".%2E",
        "%2e.",
        "a/%2e%2E",
        "%2ex",
        "/a/b/../../../c",
        "/..",
        "/.",
        "/a;jsessionid=1",
        "~user/",
        "a@b",
        "&x=1",
        "/p(1)*!$,",
        "Upper/CASE",
        "a#b?c",
        "/#",
        "/?",
        "'q'",
        "?a='1'",
        "%41",
        "%zz/%",
        "a b",
        "\\x",
        "a\tb",
        "é",
        "//é.test/",
        "HTTP://Abs.TEST/x",
        "HTTP://H3.TEST:80/p/1",
        "hTTps://ABS.test:443/y",
        "Https://abs.test:80/",
        "//XN--bcher-kva.test/",
        "//Xn--bcher-kva.test/",
        "//A.1/",
        "//A.B1/",
        "//a_b.test/",
        "  http://abs.test/p\tq\n ",
        "  /root\t/x\n ",
        "\u{0}/root\u{1f}",
        "http://abs.test/a\rb",
        "ht\ttp://abs.test/",
        "//abs.\ntest/",
        " ?q ",
        "\t#f",
        "a\u{b}b",
        "\u{c}x",
        "\t\n\r",
        " ",
        "a \tb",
        "\u{a0}x",
        // Past 64 bytes (the delimiters are searched for byte by byte there).
        "../../core/iter/traits/iterator/trait.Iterator.html#method.map_while_and_more",
        "../../core/iter/traits/iterator/./../trait.Iterator.html?q=1&r=2#method.map",
        "//other.test/a/very/long/path/that/goes/on/and/on/past/sixty/four/bytes?q=1#f",
        "https://abs.test:8080/a/very/long/path/that/goes/on/and/on/past/sixty/four/..",
        "/a/very/long/root/relative/path/that/goes/on/and/on/past/sixty/four/bytes/%2e",
        "a/very/long/relative/path/that/goes/on/and/on/past/sixty/four/bytes:x/y#f?z",
        "a23456789012345678901234567890123456789012345678901234567890123/..",
        "a234567890123456789012345678901234567890123456789012345678901234/..",
        "https://abs.test/2345678901234567890123456789012345678901234567/.",
        "//abs.test/x2345678901234567890123456789012345678901234567890/%2E",
    ];

    #[test]
    fn joins_as_the_parser_does() {
        let mut fast = 0;
        for base in BASES {
            let base = Url::parse(base).unwrap();
            let prepared = PreparedBase::new(&base);
            for href in HREFS {
                let want = base.join(href);
                let got = prepared.join(href);
                match (&want, &got) {
                    (Ok(want), Ok(got)) => {
                        assert!(same_url(want, got), "{base} + {href:?}: {want} vs {got}")
                    }
                    _ => assert_eq!(want, got, "{base} + {href:?}"),
                }
                match (&want, prepared.join_link(href)) {
                    (Ok(want), Ok(link)) => {
                        assert!(
                            super::super::link::reads_as(&link, want),
                            "{base} + {href:?}"
                        )
                    }
                    (want, got) => assert_eq!(want.clone().err(), got.err(), "{base} + {href:?}"),
                }
                if let Some(url) = prepared.join_fast(href) {
                    fast += 1;
                    assert!(want.as_ref().is_ok_and(|w| same_url(w, &url)));
                    // The crate's own invariants (the text's components where the offsets
                    // say).
                    url.check_invariants().unwrap();
                }
            }
        }
        assert!(fast > 300, "the fast path took only {fast}");
    }

    /// Every question [`Shape`] answers, asked of `shape` for `bytes`.
    fn answers(shape: &Shape<'_>, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for from in 0..=bytes.len() + 1 {
            for class in 0..CLASSES {
                out.push(format!(
                    "first {class} {from}: {:?}",
                    shape.first(class, from)
                ));
            }
            for to in from..=bytes.len() {
                out.push(format!(
                    "dots {from}..{to}: {}",
                    shape.may_have_dot_segment(from, to)
                ));
            }
            if from <= bytes.len() {
                out.push(format!("tail {from}: {:?}", shape.tail_offsets(from, 7)));
            }
        }
        out
    }

    proptest::proptest! {
        // The one-pass masks give what searching byte by byte gives, for every question
        // resolution asks, and the SSE2 masks are the portable ones.
        #[test]
        fn a_shape_answers_as_searching_does(
            bytes in proptest::collection::vec(proptest::sample::select(
                b"/?#:.%a0-~".to_vec()), 0..=64)
        ) {
            let short = Shape::of(&bytes);
            let is_short = matches!(short, Shape::Short { .. });
            proptest::prop_assert!(is_short);
            proptest::prop_assert_eq!(answers(&short, &bytes), answers(&Shape::Long(&bytes), &bytes));
            proptest::prop_assert_eq!(short_masks(&bytes), portable_masks(&bytes));
            // `dots`' own reading of the path agrees with the mask's.
            for from in 0..=bytes.len() {
                for to in from..=bytes.len() {
                    proptest::prop_assert_eq!(
                        short.may_have_dot_segment(from, to),
                        may_have_dot_segment(&bytes[from..to])
                    );
                }
            }
        }
    }

    #[test]
    fn a_dot_dot_that_meets_a_drive_letter_segment_is_the_parsers() {
        // What the property test found: the `url` crate keeps `a:` where `..` meets it.
        let base = Url::parse("http://example.com/a:/").unwrap();
        let prepared = PreparedBase::new(&base);
        assert!(prepared.is_fast());
        let want = base.join("../").unwrap();
        assert_eq!(want.as_str(), "http://example.com/a:/");
        assert_eq!(prepared.join("../").unwrap(), want);
        assert_eq!(prepared.join_link("../").unwrap().as_str(), want.as_str());
        assert!(prepared.join_fast("../").is_none());
        // A link's own drive-letter segment, on a base without one.
        let base = Url::parse("http://example.com/d/p").unwrap();
        let prepared = PreparedBase::new(&base);
        let want = base.join("b:/../x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(prepared.join("b:/../x").ok(), Some(want));
        let want = base.join("y/b:/../x").unwrap();
        assert_eq!(want.as_str(), "http://example.com/d/y/b:/x");
        assert_eq!(prepared.join("y/b:/../x").unwrap(), want);
        assert!(prepared.join_fast("y/b:/../x").is_none());
        // Segments that only look alike stay on the fast path.
        assert!(prepared.join_fast("y/bc:/../x").is_some());
        assert!(prepared.join_fast("y/1:/../x").is_some());
        assert!(prepared.join_fast("y/b:/x").is_some());
    }

    #[test]
    fn what_the_parser_only_strips_or_lowercases_stays_on_the_fast_path() {
        let base = Url::parse("http://h0.test/p/1").unwrap();
        let prepared = PreparedBase::new(&base);
        for href in [
            "HTTP://H3.TEST:80/p/1",
            "Https://A-b.Test/x",
            "//H3.test/x",
            "  http://h3.test/p\t/2\n ",
            "\u{0}/x\u{1f}",
            "\r\n../q?a=1#f",
        ] {
            let url = prepared.join_fast(href);
            assert!(url.is_some(), "{href:?} went to the parser");
            assert!(
                same_url(&url.unwrap(), &base.join(href).unwrap()),
                "{href:?}"
            );
        }
        for href in ["//XN--bcher-kva.test/", "a \tb", "//A.1/", "//a_b.test/"] {
            assert!(prepared.join_fast(href).is_none(), "{href:?} stayed fast");
        }
    }

    #[test]
    fn only_http_domain_bases_without_credentials_are_fast() {
        let fast = |base: &str| PreparedBase::new(&Url::parse(base).unwrap()).is_fast();
        assert!(fast("http://a.test/x") && fast("https://a.test:8443/"));
        assert!(!fast("http://1.2.3.4/") && !fast("http://[::1]/"));
        assert!(!fast("http://u@a.test/") && !fast("ftp://a.test/"));
        assert!(assembly_works());
    }
}
