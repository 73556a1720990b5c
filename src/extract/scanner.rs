//! The HTML scanner under [`crate::extract`]: finds the start tags that carry links in one
//! pass over the bytes, with the tokenizer rules that decide what is a tag and what is text.
//!
//! # What it does
//! [`scan`] walks a document (bytes of an ASCII-compatible encoding) and calls a
//! [`TagSink`] for each start tag of `a`, `area`, `iframe`, `frame` (inside a `<frameset>`),
//! `base`, `meta` and `link`, with the raw bytes of the attributes the extractor reads
//! (`href`, `src`, `rel`, `name`, `content`; the first of each name, as the tokenizer keeps
//! the first of duplicate attributes). Everything else is skipped by the tokenizer's rules:
//! - **Tags and attributes** as the HTML tokenizer reads them: names end at whitespace, `/`
//!   or `>`; values are double-quoted, single-quoted (a `>` inside does not end the tag) or
//!   unquoted; `=` may start an attribute name; a tag cut off by the end of the document is
//!   no tag. End tags are lexed the same way (their attributes can hold a `>`).
//! - **Comments**: `<!--` … `-->`, `--!>`, the abrupt `<!-->` and `<!--->`; bogus comments
//!   (`<!x …>`, `<?…>`, `</1…>`) and doctypes end at the first `>`.
//! - **Raw text** (`script`, `style`, `xmp`, `iframe`, `noembed`, `noframes`, and `noscript`
//!   because the reference parser runs with scripting on), **escapable raw text** (`title`,
//!   `textarea`) and **`plaintext`**: nothing until the matching end tag (name, then
//!   whitespace, `/` or `>`) is a tag; in `script`, the escaped and double-escaped states
//!   (`<!-- <script> … </script> -->`) are followed, because there a `</script>` does not
//!   end the element.
//! - **Foreign content** (`<svg>`, `<math>`): a stack of namespaces, as lol_html keeps it,
//!   with the tree builder's rules where they are cheap to follow: raw-text elements are not
//!   raw text there, `<![CDATA[ … ]]>` is a CDATA section (a bogus comment in HTML), HTML
//!   integration points (`foreignObject`, `desc`, `title`; `mi` … `mtext`) go back to HTML
//!   (`annotation-xml` does not: scraper's tree sink does not mark it, and scraper is the
//!   reference), the breakout tags (`<p>`, `<div>`, `<font
//!   color>` …, `</p>`, `</br>`) close *all* the foreign elements up to HTML, and a
//!   self-closing `<svg/>` opens nothing. `<a>` is a link in any namespace; the other link
//!   elements only in HTML.
//!
//! Character references in values are not decoded here (the extractor decodes the few values
//! it keeps); NUL in a tag or attribute name makes it match nothing, as U+FFFD would.
//!
//! # What it does not handle (and why that is acceptable)
//! It keeps no stack of open HTML elements, so tree-builder decisions that need one are
//! approximated, as lol_html did: an HTML end tag that closes foreign content from outside
//! (`<a><svg></a>`, `<button><svg></button>`), an end tag ignored because a special element
//! is open (`<svg><foreignObject><div></foreignObject>`), the SVG `title` integration point
//! with unbalanced end tags, and `<frameset>` documents (the tree builder drops content
//! around a frameset, and ignores a frameset after body content). Those are the documented
//! differences of [`crate::extract`], recognised by the differential test. It reads bytes,
//! not characters: for multi-byte encodings whose trail bytes may be ASCII (Shift_JIS, GBK)
//! it reads tags as lol_html did, which is how browsers' fast paths read them too (no
//! trail byte is `<`, `>`, `=`, a quote or whitespace).
//!
//! # Why it exists
//! lol_html, the extractor before this one, ran at ~250 MB/s on the extract bench's 16 KB
//! page (`cargo bench --bench extract` prints both side by side): it is a rewriter, so it
//! lexes every tag into a token with all its attributes, runs selector matching on each,
//! and keeps its output machinery running. A crawler only needs the handful of tags that
//! carry links, and real pages (mean ~240 KB) are mostly inline scripts, styles, JSON and
//! text, which the scanner crosses with `memchr` (SIMD) from one `<` (or, in scripts and
//! comments, `-`) to the next. Tags it does not want are skipped without looking at their
//! names twice, and outside foreign content most without reading their names at all (a
//! start tag whose first letter begins no name it acts on, an end tag other than
//! `</frameset>`: one search to the `>`); the ones it wants are lexed into fixed slots.
//! Nothing here allocates (the namespace stack is a fixed array), so the cost per page is
//! the bytes it reads.
//! On a documentation page the time goes to the tags (~370 on a 12 KB page), and there the
//! position is a chain of short searches, each waiting for the one before: where the answer
//! is usually at one place (the next `<` right after a `>`, the `>` of `</a>` and of
//! `</span>`), that byte is checked first, a branch the CPU predicts and runs ahead of.
//! Any other end tag (`</div>`, `</li>`) goes to its search for the `>` at once, not
//! through `skip_tag`'s call and its checks for a start tag's ` class="`: doc corpus
//! 876 → 891 MB/s interleaved, 940 → 949 alone; 16 KB page 933 → 957, 973 → 1,012 alone;
//! real-size pages 3,357 → 3,500, 3,583 → 3,662 alone (alternated with the code before,
//! three runs each, medians).
//! The same goes for attributes: ` class="` and ` href="` (~60% of a documentation page's
//! attributes, ~125 of them) are recognised by one 8-byte compare where an attribute may
//! start, and a `<span class="…">` or `<div class="…">` goes to the attribute lexer without
//! first searching for its `>`: corpus 7.65 → 7.31 µs per page (median of 7, old and new
//! scanner alternated in one binary).
//! ` title="` and ` id="` are taken the same way, and so are the unquoted ` href=` and
//! ` id=` of minified pages (rustdoc numbers its source pages' lines with
//! `<a href=#12 id=12 data-nosnippet>`: nearly a third of the doc corpus's links), ~77% of a
//! documentation page's ~280 attributes in all, an unquoted value's end found with one
//! 16-byte compare; all are looked for only where the byte is a space, not at every tag's
//! `>` (without that check the 16 KB page lost 1-4%). `cargo bench --bench extract`, before
//! and after alternated, three runs each, medians: doc corpus 878 → 907 MB/s interleaved,
//! 930 → 958 alone; 16 KB page 938 → 945, 968 → 983 alone; real-size pages 3,401 → 3,462,
//! 3,695 → 3,717 alone.
//! (Bitmasks of 64-byte blocks searched instead of the inline searches measured slower
//! here, 0.77-0.87×: the masks cost more than the searches they replace. So did lexing
//! each attribute from a 16-byte block's masks of whitespace, `=`, `/`, `>` and quotes:
//! 0.89×, the loads and masks a chain of data dependencies where the byte loops are
//! predicted branches. Nor did these, tried on top of the attributes above before they
//! were looked for at spaces only (same bench, alternated, medians of 3): letting a start
//! tag through by its first two letters rather than its first, so that `span` and
//! `section` are skipped unclassified, gained nothing on the doc corpus and cost the 16 KB
//! page (a skipped `<span class>` pays `skip_tag`'s call and then the lexer's, where the
//! inlined start-tag path paid one); finding every attribute name's end, and a skipped
//! tag's, with a 16-byte compare as well cost the 16 KB page another 4% and the doc corpus
//! 1%.)
//! `memchr` is the well-kept crate for the SIMD search (already in the build through
//! regex); the tokenizer rules are hand-written because no crate offers a lexer that skips
//! what it does not need, which is the whole point.

use std::ops::Range;

use memchr::{memchr, memchr2, memchr3, memmem};

/// The link-carrying tags reported to a [`TagSink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkTag {
    /// `<a>`, in any namespace.
    A,
    /// `<area>`.
    Area,
    /// `<iframe>`.
    Iframe,
    /// `<frame>` inside a `<frameset>`.
    Frame,
    /// `<base>`.
    Base,
    /// `<meta>`.
    Meta,
    /// `<link>`.
    Link,
}

/// The raw values (byte ranges of the input) of the attributes the extractor reads: the
/// first of each name; a valueless attribute is an empty range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attrs {
    pub href: Option<Range<usize>>,
    pub src: Option<Range<usize>>,
    pub rel: Option<Range<usize>>,
    pub name: Option<Range<usize>>,
    pub content: Option<Range<usize>>,
    /// `<font>` has `color`, `face` or `size`: it breaks out of foreign content.
    font_breakout: bool,
}

/// Receives the link-carrying start tags, in document order.
pub(crate) trait TagSink {
    /// One start tag; `attrs` index the scanned bytes.
    fn tag(&mut self, tag: LinkTag, attrs: &Attrs);
}

/// Scans `input` to its end, reporting link tags to `sink`.
pub(crate) fn scan(input: &[u8], sink: &mut impl TagSink) {
    let mut scanner = Scanner {
        b: input,
        ns: NsStack::default(),
        frameset_depth: 0,
    };
    scanner.run(sink);
}

/// A tag name the scanner acts on; everything else is [`Name::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Link(LinkTag),
    Frameset,
    Script,
    /// Raw text: `style`, `xmp`, `iframe` is handled as a link tag, `noembed`, `noframes`,
    /// `noscript`.
    RawText(&'static [u8]),
    /// Escapable raw text: `title` (also an SVG integration point), `textarea`.
    RcData(&'static [u8]),
    Plaintext,
    Svg,
    Math,
    /// SVG HTML integration points other than `title`: `foreignObject`, `desc`.
    SvgIntegration,
    /// MathML text integration points: `mi`, `mo`, `mn`, `ms`, `mtext`.
    MathText,
    Font,
    /// A start tag that leaves foreign content (`p` and `br` also as end tags).
    Breakout,
    P,
    Br,
    Other,
}

/// The longest name [`classify`] knows (`foreignobject`).
const NAME_MAX: usize = 13;

fn classify(raw: &[u8]) -> Name {
    if raw.len() > NAME_MAX {
        return Name::Other;
    }
    let mut buf = [0u8; NAME_MAX];
    let Some(lower) = buf.get_mut(..raw.len()) else {
        return Name::Other;
    };
    for (to, from) in lower.iter_mut().zip(raw) {
        *to = from.to_ascii_lowercase();
    }
    match &*lower {
        b"a" => Name::Link(LinkTag::A),
        b"area" => Name::Link(LinkTag::Area),
        b"iframe" => Name::Link(LinkTag::Iframe),
        b"frame" => Name::Link(LinkTag::Frame),
        b"base" => Name::Link(LinkTag::Base),
        b"meta" => Name::Link(LinkTag::Meta),
        b"link" => Name::Link(LinkTag::Link),
        b"frameset" => Name::Frameset,
        b"script" => Name::Script,
        b"style" => Name::RawText(b"style"),
        b"xmp" => Name::RawText(b"xmp"),
        b"noembed" => Name::RawText(b"noembed"),
        b"noframes" => Name::RawText(b"noframes"),
        b"noscript" => Name::RawText(b"noscript"),
        b"title" => Name::RcData(b"title"),
        b"textarea" => Name::RcData(b"textarea"),
        b"plaintext" => Name::Plaintext,
        b"svg" => Name::Svg,
        b"math" => Name::Math,
        b"foreignobject" | b"desc" => Name::SvgIntegration,
        b"mi" | b"mo" | b"mn" | b"ms" | b"mtext" => Name::MathText,
        b"font" => Name::Font,
        b"p" => Name::P,
        b"br" => Name::Br,
        b"b" | b"big" | b"blockquote" | b"body" | b"center" | b"code" | b"dd" | b"div" | b"dl"
        | b"dt" | b"em" | b"embed" | b"h1" | b"h2" | b"h3" | b"h4" | b"h5" | b"h6" | b"head"
        | b"hr" | b"i" | b"img" | b"li" | b"listing" | b"menu" | b"nobr" | b"ol" | b"pre"
        | b"ruby" | b"s" | b"small" | b"span" | b"strong" | b"strike" | b"sub" | b"sup"
        | b"table" | b"tt" | b"u" | b"ul" | b"var" => Name::Breakout,
        _ => Name::Other,
    }
}

/// [`classify`] for a tag met where no foreign content is open (the namespace stack is
/// empty, as on nearly every page nearly all the time): there only the names that carry
/// links or change the text model matter, and everything else (the breakout tags, `font`,
/// the integration points) is [`Name::Other`]. Nearly every tag of a page is one of these
/// others, so this is the per-tag path: the name loaded into a `u64` with its length and
/// folded to lowercase in one step ([`folded_key`]), one integer match.
/// The name is `b[at..end]`.
#[inline(always)]
fn classify_in_html(b: &[u8], at: usize, end: usize) -> Name {
    let Some(key) = folded_key(b, at, end) else {
        return match b.get(at..end) {
            Some(raw) if raw.eq_ignore_ascii_case(b"plaintext") => Name::Plaintext,
            _ => Name::Other,
        };
    };
    const A: u64 = name_key(b"a");
    const AREA: u64 = name_key(b"area");
    const IFRAME: u64 = name_key(b"iframe");
    const FRAME: u64 = name_key(b"frame");
    const BASE: u64 = name_key(b"base");
    const META: u64 = name_key(b"meta");
    const LINK: u64 = name_key(b"link");
    const FRAMESET: u64 = name_key(b"frameset");
    const SCRIPT: u64 = name_key(b"script");
    const STYLE: u64 = name_key(b"style");
    const XMP: u64 = name_key(b"xmp");
    const NOEMBED: u64 = name_key(b"noembed");
    const NOFRAMES: u64 = name_key(b"noframes");
    const NOSCRIPT: u64 = name_key(b"noscript");
    const TITLE: u64 = name_key(b"title");
    const TEXTAREA: u64 = name_key(b"textarea");
    const SVG: u64 = name_key(b"svg");
    const MATH: u64 = name_key(b"math");
    match key {
        A => Name::Link(LinkTag::A),
        AREA => Name::Link(LinkTag::Area),
        IFRAME => Name::Link(LinkTag::Iframe),
        FRAME => Name::Link(LinkTag::Frame),
        BASE => Name::Link(LinkTag::Base),
        META => Name::Link(LinkTag::Meta),
        LINK => Name::Link(LinkTag::Link),
        FRAMESET => Name::Frameset,
        SCRIPT => Name::Script,
        STYLE => Name::RawText(b"style"),
        XMP => Name::RawText(b"xmp"),
        NOEMBED => Name::RawText(b"noembed"),
        NOFRAMES => Name::RawText(b"noframes"),
        NOSCRIPT => Name::RawText(b"noscript"),
        TITLE => Name::RcData(b"title"),
        TEXTAREA => Name::RcData(b"textarea"),
        SVG => Name::Svg,
        MATH => Name::Math,
        _ => Name::Other,
    }
}

/// A name of at most 8 bytes as one integer: its bytes, and below 8 bytes its length in the
/// top byte (so that `a` and `a` followed by NUL differ; an 8-byte name's last byte is a
/// letter, never a length).
const fn pack(bytes: [u8; 8], len: usize) -> u64 {
    let mut key = u64::from_le_bytes(bytes);
    if len < 8 {
        key |= (len as u64) << 56;
    }
    key
}

/// The name `b[at..end]` (1 to 8 bytes) as [`pack`] packs it, with bit 5 of every byte set:
/// `None` for any other length. Setting bit 5 lowercases ASCII letters, and it turns no
/// byte other than a letter's two cases into a lowercase letter, so the key equals a
/// [`name_key`] of letters exactly when the name is that one, in any case: one 8-byte load
/// and an integer compare instead of a byte loop.
#[inline(always)]
fn folded_key(b: &[u8], at: usize, end: usize) -> Option<u64> {
    let len = end.checked_sub(at).filter(|len| (1..=8).contains(len))?;
    let word = match b.get(at..at + 8) {
        Some(&[b0, b1, b2, b3, b4, b5, b6, b7]) => {
            u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7])
        }
        _ => {
            // Near the end of the input: byte by byte.
            let mut bytes = [0u8; 8];
            for (to, from) in bytes.iter_mut().zip(b.get(at..end)?) {
                *to = *from;
            }
            u64::from_le_bytes(bytes)
        }
    };
    let kept = u64::MAX >> (64 - 8 * len);
    let key = (word | 0x2020_2020_2020_2020) & kept;
    Some(if len < 8 {
        key | (len as u64) << 56
    } else {
        key
    })
}

/// [`pack`] of a lowercase name, for the match arms.
const fn name_key(name: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let mut i = 0;
    while i < name.len() {
        bytes[i] = name[i];
        i += 1;
    }
    pack(bytes, name.len())
}

impl Name {
    /// A start tag that closes the foreign elements up to HTML (`meta` is one too).
    fn breaks_out(self, attrs: &Attrs) -> bool {
        match self {
            Name::Breakout | Name::P | Name::Br | Name::Link(LinkTag::Meta) => true,
            Name::Font => attrs.font_breakout,
            _ => false,
        }
    }

    /// Whether the attributes of this tag are worth recording.
    fn wants_attrs(self) -> bool {
        matches!(self, Name::Link(_) | Name::Font)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ns {
    Html,
    Svg,
    MathMl,
}

/// Namespace changes, innermost last (the document's HTML is implicit below them). A fixed
/// array: past its depth, entries are counted, not kept, and the innermost kept one stands
/// for them (such nesting is hostile; foreign content is approximated anyway).
#[derive(Debug)]
struct NsStack {
    kept: [Ns; NS_DEPTH],
    len: usize,
}

const NS_DEPTH: usize = 64;

impl Default for NsStack {
    fn default() -> Self {
        NsStack {
            kept: [Ns::Html; NS_DEPTH],
            len: 0,
        }
    }
}

impl NsStack {
    fn at(&self, depth: usize) -> Ns {
        if depth == 0 {
            return Ns::Html;
        }
        self.kept
            .get(depth.min(NS_DEPTH) - 1)
            .copied()
            .unwrap_or(Ns::Html)
    }

    fn current(&self) -> Ns {
        self.at(self.len)
    }

    /// The namespace below the current one.
    fn previous(&self) -> Option<Ns> {
        (self.len >= 2).then(|| self.at(self.len - 1))
    }

    fn push(&mut self, ns: Ns) {
        if let Some(slot) = self.kept.get_mut(self.len) {
            *slot = ns;
        }
        self.len = self.len.saturating_add(1);
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    /// Pops foreign namespaces until HTML (the document or an integration point).
    fn leave_foreign(&mut self) {
        while self.len > 0 && self.current() != Ns::Html {
            self.pop();
        }
    }
}

/// Whether a tag whose name starts with `first` may be one [`classify_in_html`] names: the
/// first letters of those names, in either case.
fn may_matter_in_html(first: u8) -> bool {
    matches!(
        first.to_ascii_lowercase(),
        b'a' | b'b' | b'f' | b'i' | b'l' | b'm' | b'n' | b'p' | b's' | b't' | b'x'
    )
}

/// Where the first `needle` at or after `at` is in `b`. Tags are ~35 bytes apart on a
/// documentation page, attribute values shorter: most searches end within a few dozen bytes,
/// where a call into `memchr` (its CPU dispatch, its set-up for long haystacks) costs more
/// than the search. So the next 32 bytes are looked at here, inline, 16 at a time, and only
/// a longer stretch (text, scripts) goes to `memchr`'s wide loop.
#[inline(always)]
fn find(b: &[u8], at: usize, needle: u8) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(head) = block16(b, at) {
        let mask = sse2::eq_mask(head, needle);
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        if let Some(next) = block16(b, at + 16) {
            let mask = sse2::eq_mask(next, needle);
            if mask != 0 {
                return Some(at + 16 + mask.trailing_zeros() as usize);
            }
            return memchr(needle, b.get(at + 32..)?).map(|i| at + 32 + i);
        }
        return memchr(needle, b.get(at + 16..)?).map(|i| at + 16 + i);
    }
    memchr(needle, b.get(at..)?).map(|i| at + i)
}

/// Where the first `>`, `"` or `'` at or after `at` is in `b` ([`find`]'s way).
#[inline(always)]
fn find_tag_end(b: &[u8], at: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(head) = block16(b, at) {
        let ends = |block: &[u8; 16]| {
            sse2::eq_mask(block, b'>') | sse2::eq_mask(block, b'"') | sse2::eq_mask(block, b'\'')
        };
        let mask = ends(head);
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        if let Some(next) = block16(b, at + 16) {
            let mask = ends(next);
            if mask != 0 {
                return Some(at + 16 + mask.trailing_zeros() as usize);
            }
            return memchr3(b'>', b'"', b'\'', b.get(at + 32..)?).map(|i| at + 32 + i);
        }
        return memchr3(b'>', b'"', b'\'', b.get(at + 16..)?).map(|i| at + 16 + i);
    }
    memchr3(b'>', b'"', b'\'', b.get(at..)?).map(|i| at + i)
}

/// The 16 bytes of `b` from `at`, if it has that many.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn block16(b: &[u8], at: usize) -> Option<&[u8; 16]> {
    b.get(at..at.checked_add(16)?)?.try_into().ok()
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};

    /// Bit `i` set where `head[i] == needle`, for the first 16 bytes of `head`.
    #[inline(always)]
    pub(super) fn eq_mask(head: &[u8; 16], needle: u8) -> u32 {
        // SAFETY: SSE2 is part of the x86_64 baseline, and the unaligned load reads the 16
        // bytes of `head`.
        let bits = unsafe {
            let block = _mm_loadu_si128(head.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(block, _mm_set1_epi8(needle as i8)))
        };
        bits as u32 & 0xffff
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// What follows a tag: the text model the tokenizer switches to.
#[derive(Debug, Clone, Copy)]
enum After {
    Data,
    Script,
    RawText(&'static [u8]),
    Plaintext,
}

/// A lexed tag: where the data after it starts, and whether it ended with `/>`.
struct Lexed {
    end: usize,
    self_closing: bool,
}

struct Scanner<'a> {
    b: &'a [u8],
    ns: NsStack,
    frameset_depth: usize,
}

impl Scanner<'_> {
    fn run(&mut self, sink: &mut impl TagSink) {
        let b = self.b;
        let mut at = 0;
        let mut attrs = Attrs::default();
        while at < b.len() {
            // The scanner's position is a chain of searches, each waiting on the one
            // before; on a documentation page the next `<` follows a tag's `>` at once
            // (`</a></li>`) about 40% of the time, and a branch on that byte, predicted,
            // lets the next tag start without waiting for a search.
            let lt = if b.get(at) == Some(&b'<') {
                at
            } else {
                let Some(lt) = find(b, at, b'<') else {
                    return;
                };
                lt
            };
            let (next, after) = self.markup(lt + 1, &mut attrs, sink);
            at = match after {
                After::Data => next,
                After::Script => self.script_data(next),
                After::RawText(name) => self.raw_text(next, name),
                After::Plaintext => b.len(),
            };
        }
    }

    /// What starts with the `<` just before `at`: returns where data resumes and in which
    /// text model.
    fn markup(&mut self, at: usize, attrs: &mut Attrs, sink: &mut impl TagSink) -> (usize, After) {
        let b = self.b;
        let Some(&first) = b.get(at) else {
            return (b.len(), After::Data);
        };
        match first {
            c if c.is_ascii_alphabetic() => self.start_tag(at, attrs, sink),
            b'/' => match b.get(at + 1) {
                None => (b.len(), After::Data),
                Some(c) if c.is_ascii_alphabetic() => (self.end_tag(at + 1), After::Data),
                Some(b'>') => (at + 2, After::Data),
                Some(_) => (self.bogus_comment(at + 1), After::Data),
            },
            b'!' => (self.declaration(at + 1), After::Data),
            b'?' => (self.bogus_comment(at), After::Data),
            // `<` followed by anything else is text; rescan from that byte (it may be `<`).
            _ => (at, After::Data),
        }
    }

    fn start_tag(
        &mut self,
        at: usize,
        attrs: &mut Attrs,
        sink: &mut impl TagSink,
    ) -> (usize, After) {
        let b = self.b;
        if self.ns.len == 0 && !b.get(at).is_some_and(|&c| may_matter_in_html(c)) {
            // Nearly every tag of a page: outside foreign content, a name no tag that matters
            // starts with. Skipped to its end without reading its name.
            return (self.skip_tag(at).unwrap_or(b.len()), After::Data);
        }
        let name_end = self.name_end(at);
        let name = self.classify(at, name_end);
        let want = name.wants_attrs();
        if want {
            *attrs = Attrs::default();
        }
        // Whether the tag ended with `/>` matters only to these (which open, or do not
        // open, a namespace); any other tag whose attributes are not wanted is skipped to
        // its `>` with one search when no quote comes first.
        let quick = !want
            && !matches!(
                name,
                Name::Svg | Name::Math | Name::SvgIntegration | Name::MathText | Name::RcData(_)
            )
            // `<span class="…">`: a quote comes before the `>`, so the search for which comes
            // first would only lead to the lexer.
            && common_attribute(b, name_end).is_none();
        let lexed = match quick.then(|| self.tag_end(name_end)).flatten() {
            Some(end) => Lexed {
                end,
                self_closing: false,
            },
            None => match self.attributes(name_end, want.then_some(&mut *attrs)) {
                Some(lexed) => lexed,
                None => return (b.len(), After::Data),
            },
        };
        let end = lexed.end;
        let mut ns = self.ns.current();
        if ns != Ns::Html {
            match name {
                Name::Svg | Name::Math => {}
                _ if name.breaks_out(attrs) => {
                    self.ns.leave_foreign();
                    ns = self.ns.current();
                }
                Name::SvgIntegration | Name::RcData(b"title") if ns == Ns::Svg => {
                    if !lexed.self_closing {
                        self.ns.push(Ns::Html);
                    }
                    return (end, After::Data);
                }
                Name::MathText if ns == Ns::MathMl => {
                    if !lexed.self_closing {
                        self.ns.push(Ns::Html);
                    }
                    return (end, After::Data);
                }
                Name::Link(LinkTag::A) => {
                    sink.tag(LinkTag::A, attrs);
                    return (end, After::Data);
                }
                // A foreign element: no raw text, no link.
                _ => return (end, After::Data),
            }
        }
        match name {
            Name::Svg => {
                if !lexed.self_closing {
                    self.ns.push(Ns::Svg);
                }
                (end, After::Data)
            }
            Name::Math => {
                if !lexed.self_closing {
                    self.ns.push(Ns::MathMl);
                }
                (end, After::Data)
            }
            _ if ns != Ns::Html => (end, After::Data),
            Name::Link(tag) => {
                match tag {
                    LinkTag::Frame if self.frameset_depth == 0 => {}
                    _ => sink.tag(tag, attrs),
                }
                if tag == LinkTag::Iframe {
                    (end, After::RawText(b"iframe"))
                } else {
                    (end, After::Data)
                }
            }
            Name::Frameset => {
                // `<frameset/>` stays open in the tree builder too.
                self.frameset_depth = self.frameset_depth.saturating_add(1);
                (end, After::Data)
            }
            Name::Script => (end, After::Script),
            Name::RawText(name) | Name::RcData(name) => (end, After::RawText(name)),
            Name::Plaintext => (end, After::Plaintext),
            _ => (end, After::Data),
        }
    }

    /// An end tag whose name starts at `at`: lexed (its attributes may hold a `>`), and
    /// followed through the namespace stack. Returns where data resumes.
    fn end_tag(&mut self, at: usize) -> usize {
        let b = self.b;
        if self.ns.len == 0 && !b.get(at).is_some_and(|c| c.eq_ignore_ascii_case(&b'f')) {
            // Outside foreign content only `</frameset>` changes anything (see below).
            // `</a>`, and `</span>` or `</code>`, are most end tags of a page: their `>` is
            // checked for where it would be, which the CPU predicts and goes on from,
            // instead of waiting for a search (see `run`). `b[at]` is a letter, so a `>`
            // there with no `>` or quote before it ends the tag.
            if b.get(at + 1) == Some(&b'>') {
                return at + 2;
            }
            if let Some(&[_, c1, c2, c3, b'>']) = b.get(at..at + 5) {
                if ![c1, c2, c3]
                    .iter()
                    .any(|c| matches!(c, b'>' | b'"' | b'\''))
                {
                    return at + 5;
                }
            }
            // Any other end tag (`</div>`, `</li>`): one search to the `>`, here rather than
            // through `skip_tag`, whose shortcut for a start tag's ` class="` an end tag has
            // no use for (a call and its checks per end tag).
            return match self.tag_end(at) {
                Some(end) => end,
                None => self
                    .attributes(self.name_end(at), None)
                    .map_or(b.len(), |lexed| lexed.end),
            };
        }
        let name_end = self.name_end(at);
        let name = self.classify(at, name_end);
        let end = match self.tag_end(name_end) {
            Some(end) => end,
            None => match self.attributes(name_end, None) {
                Some(lexed) => lexed.end,
                None => return b.len(),
            },
        };
        match self.ns.current() {
            Ns::Html => {
                if name == Name::Frameset {
                    self.frameset_depth = self.frameset_depth.saturating_sub(1);
                }
                let leaves = matches!(
                    (self.ns.previous(), name),
                    (Some(Ns::Svg), Name::SvgIntegration | Name::RcData(b"title"))
                        | (Some(Ns::MathMl), Name::MathText)
                );
                if leaves {
                    self.ns.pop();
                }
            }
            ns => match name {
                Name::Svg if ns == Ns::Svg => self.ns.pop(),
                Name::Math if ns == Ns::MathMl => self.ns.pop(),
                Name::P | Name::Br => self.ns.leave_foreign(),
                _ => {}
            },
        }
        end
    }

    /// A tag name's class: all of them inside foreign content (or an integration point),
    /// only those that matter there outside it.
    #[inline(always)]
    fn classify(&self, at: usize, end: usize) -> Name {
        if self.ns.len == 0 {
            classify_in_html(self.b, at, end)
        } else {
            classify(self.b.get(at..end).unwrap_or_default())
        }
    }

    /// Where a tag whose name starts at `at` ends (`None` if the document ends first), for a
    /// tag that matters only by where it ends: no `/>`, no attributes to record. The end of
    /// its name does not matter either: a quote in the name leads to the attributes' lexer
    /// as one after it does.
    fn skip_tag(&self, at: usize) -> Option<usize> {
        // `<div class="…">`, `<h4 class="…">`: a quote comes before the `>` (see
        // `start_tag`); a name of two or three letters or digits is checked in place.
        let b = self.b;
        let alnum = |i: usize| b.get(i).is_some_and(u8::is_ascii_alphanumeric);
        if alnum(at + 1) {
            let name_end = if alnum(at + 2) { at + 3 } else { at + 2 };
            if common_attribute(b, name_end).is_some() {
                return self.attributes(name_end, None).map(|lexed| lexed.end);
            }
        }
        match self.tag_end(at) {
            Some(end) => Some(end),
            None => self
                .attributes(self.name_end(at), None)
                .map(|lexed| lexed.end),
        }
    }

    /// Where a tag whose name ends at `at` ends, when the first `>`, `"` or `'` after its
    /// name is a `>`: outside a quoted value every state of a tag ends at `>`, and only a
    /// quote can start a quoted value. `None` when a quote comes first (or nothing): the
    /// caller lexes the attributes.
    fn tag_end(&self, at: usize) -> Option<usize> {
        let i = find_tag_end(self.b, at)?;
        (self.b.get(i) == Some(&b'>')).then_some(i + 1)
    }

    /// The end of a tag name starting at `at` (the first whitespace, `/` or `>`).
    fn name_end(&self, at: usize) -> usize {
        let b = self.b;
        let rest = b.get(at..).unwrap_or_default();
        at + rest
            .iter()
            .position(|&c| is_space(c) || c == b'/' || c == b'>')
            .unwrap_or(rest.len())
    }

    /// Lexes the attributes from just after the tag name to the closing `>`, recording the
    /// wanted ones in `attrs`. `None` if the document ends first (the tag is dropped).
    fn attributes(&self, at: usize, attrs: Option<&mut Attrs>) -> Option<Lexed> {
        self.lex_attributes::<true>(at, attrs)
    }

    /// [`Self::attributes`], with ` class="` and ` href="` taken whole where they come
    /// (`GUESS`) or byte by byte like any other attribute (the tests' reference).
    #[inline(always)]
    fn lex_attributes<const GUESS: bool>(
        &self,
        mut at: usize,
        mut attrs: Option<&mut Attrs>,
    ) -> Option<Lexed> {
        let b = self.b;
        loop {
            // Before attribute name.
            let c = *b.get(at)?;
            if is_space(c) {
                // The attributes taken whole start with a space: only there are they looked
                // for (at the `>` of every tag they were two loads and six compares more).
                if GUESS && c == b' ' {
                    if let Some((attribute, start)) = common_attribute(b, at) {
                        let end = find(b, start, b'"')?;
                        if let (Some(attrs), CommonAttribute::Href) =
                            (attrs.as_deref_mut(), attribute)
                        {
                            attrs.href.get_or_insert(start..end);
                        }
                        at = end + 1;
                        continue;
                    }
                    if let Some((attribute, start)) = unquoted_attribute(b, at) {
                        let end = find_value_end(b, start)?;
                        if let (Some(attrs), CommonAttribute::Href) =
                            (attrs.as_deref_mut(), attribute)
                        {
                            attrs.href.get_or_insert(start..end);
                        }
                        at = end;
                        continue;
                    }
                }
                at += 1;
                continue;
            }
            match c {
                b'>' => {
                    return Some(Lexed {
                        end: at + 1,
                        self_closing: false,
                    })
                }
                b'/' => {
                    // Self-closing start tag state: `>` ends, anything else is reconsumed.
                    if *b.get(at + 1)? == b'>' {
                        return Some(Lexed {
                            end: at + 2,
                            self_closing: true,
                        });
                    }
                    at += 1;
                    continue;
                }
                _ => {}
            }
            // Attribute name: the first byte is taken whatever it is (`=` included).
            let name_start = at;
            at += 1;
            loop {
                let c = *b.get(at)?;
                if is_space(c) || matches!(c, b'/' | b'>' | b'=') {
                    break;
                }
                at += 1;
            }
            let name = name_start..at;
            // After attribute name.
            while is_space(*b.get(at)?) {
                at += 1;
            }
            if b.get(at) != Some(&b'=') {
                // No value; `/`, `>` or the next name is handled by the loop.
                if let Some(attrs) = attrs.as_deref_mut() {
                    record(b, attrs, name, at..at);
                }
                continue;
            }
            at += 1;
            while is_space(*b.get(at)?) {
                at += 1;
            }
            let value = match *b.get(at)? {
                quote @ (b'"' | b'\'') => {
                    let start = at + 1;
                    let end = find(b, start, quote)?;
                    at = end + 1;
                    start..end
                }
                b'>' => at..at,
                _ => {
                    let start = at;
                    loop {
                        let c = *b.get(at)?;
                        if is_space(c) || c == b'>' {
                            break;
                        }
                        at += 1;
                    }
                    start..at
                }
            };
            if let Some(attrs) = attrs.as_deref_mut() {
                record(b, attrs, name, value);
            }
        }
    }

    /// After `<!`: a comment, a CDATA section (in foreign content), or a bogus comment (a
    /// doctype among them: it ends at the first `>` too).
    fn declaration(&self, at: usize) -> usize {
        let b = self.b;
        let rest = b.get(at..).unwrap_or_default();
        if rest.starts_with(b"--") {
            self.comment(at + 2)
        } else if rest.starts_with(b"[CDATA[") && self.ns.current() != Ns::Html {
            let body = at + 7;
            match b.get(body..).and_then(|rest| memmem::find(rest, b"]]>")) {
                Some(i) => body + i + 3,
                None => b.len(),
            }
        } else {
            self.bogus_comment(at)
        }
    }

    /// A bogus comment (or doctype) from `at` to the first `>`.
    fn bogus_comment(&self, at: usize) -> usize {
        let b = self.b;
        match b.get(at..).and_then(|rest| memchr(b'>', rest)) {
            Some(i) => at + i + 1,
            None => b.len(),
        }
    }

    /// A comment whose text starts at `at` (after `<!--`); returns where data resumes.
    fn comment(&self, mut at: usize) -> usize {
        let b = self.b;
        // Comment start and comment start dash states: `<!-->` and `<!--->` end at once,
        // `<!---->` is an empty comment.
        match b.get(at) {
            Some(b'>') => return at + 1,
            Some(b'-') => match b.get(at + 1) {
                Some(b'>') => return at + 2,
                Some(b'-') => match self.comment_end(at + 2) {
                    Ok(end) => return end,
                    Err(resume) => at = resume,
                },
                _ => at += 1,
            },
            _ => {}
        }
        loop {
            // Comment state: jump to the next `-`; two in a row enter the comment end state.
            // (The comment less-than sign states only report nesting errors: `<!--` inside
            // a comment ends nothing, and its dashes count like any others.)
            let Some(dash) = b.get(at..).and_then(|rest| memchr(b'-', rest)) else {
                return b.len();
            };
            let dash = at + dash;
            match b.get(dash + 1) {
                None => return b.len(),
                Some(b'-') => match self.comment_end(dash + 2) {
                    Ok(end) => return end,
                    Err(resume) => at = resume,
                },
                Some(_) => at = dash + 1,
            }
        }
    }

    /// The comment end state at `at` (after `--`): `Ok` with where data resumes if the
    /// comment ends here (`>`, more dashes then `>`, `!>`), else `Err` with where the comment
    /// state resumes.
    fn comment_end(&self, mut at: usize) -> Result<usize, usize> {
        let b = self.b;
        loop {
            match b.get(at) {
                None => return Ok(b.len()),
                Some(b'>') => return Ok(at + 1),
                Some(b'-') => at += 1,
                Some(b'!') => {
                    // Comment end bang state.
                    return match b.get(at + 1) {
                        None => Ok(b.len()),
                        Some(b'>') => Ok(at + 2),
                        Some(b'-') => match b.get(at + 2) {
                            // Comment end dash, then a second dash: the end state again.
                            None => Ok(b.len()),
                            Some(b'-') => {
                                at += 3;
                                continue;
                            }
                            Some(_) => Err(at + 2),
                        },
                        Some(_) => Err(at + 1),
                    };
                }
                Some(_) => return Err(at),
            }
        }
    }

    /// Raw text or escapable raw text of element `name` from `at`: nothing is markup until
    /// `</name` followed by whitespace, `/` or `>`, which is lexed as an end tag. Returns
    /// where data resumes.
    fn raw_text(&mut self, mut at: usize, name: &[u8]) -> usize {
        let b = self.b;
        loop {
            let Some(lt) = b.get(at..).and_then(|rest| memchr(b'<', rest)) else {
                return b.len();
            };
            let lt = at + lt;
            if self.is_end_tag_of(lt, name) {
                return self.end_tag(lt + 2);
            }
            at = lt + 1;
        }
    }

    /// `</name` at `lt`, followed by whitespace, `/` or `>` (ASCII case-insensitive): an
    /// appropriate end tag for raw text.
    fn is_end_tag_of(&self, lt: usize, name: &[u8]) -> bool {
        let b = self.b;
        b.get(lt + 1) == Some(&b'/')
            && b.get(lt + 2..lt + 2 + name.len())
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
            && b.get(lt + 2 + name.len())
                .is_some_and(|&c| is_space(c) || c == b'/' || c == b'>')
    }

    /// `<script>` content from `at`, through the script data, escaped and double-escaped
    /// states: returns where data resumes (after `</script …>`).
    fn script_data(&mut self, mut at: usize) -> usize {
        const SCRIPT: &[u8] = b"script";
        let b = self.b;
        'data: loop {
            // Script data state: only `</script` and `<!--` matter.
            let Some(lt) = b.get(at..).and_then(|rest| memchr(b'<', rest)) else {
                return b.len();
            };
            let lt = at + lt;
            if self.is_end_tag_of(lt, SCRIPT) {
                return self.end_tag(lt + 2);
            }
            if !b.get(lt + 1..).is_some_and(|rest| rest.starts_with(b"!--")) {
                at = lt + 1;
                continue;
            }
            // Script data escaped dash dash state, right after `<!--`.
            at = lt + 4;
            let mut dashes = 2usize;
            let mut double = false;
            loop {
                // Escaped (or double-escaped) states: `-` and `<` matter.
                if dashes == 0 {
                    let Some(i) = b.get(at..).and_then(|rest| memchr2(b'-', b'<', rest)) else {
                        return b.len();
                    };
                    at += i;
                }
                let Some(&c) = b.get(at) else {
                    return b.len();
                };
                match c {
                    b'-' => {
                        dashes = dashes.saturating_add(1);
                        at += 1;
                    }
                    b'>' if dashes >= 2 => {
                        at += 1;
                        continue 'data;
                    }
                    b'<' => {
                        dashes = 0;
                        if !double && self.is_end_tag_of(at, SCRIPT) {
                            return self.end_tag(at + 2);
                        }
                        // `<script` (or, double-escaped, `</script`) followed by
                        // whitespace, `/` or `>` switches between escaped and
                        // double-escaped.
                        let name_at = if double { at + 2 } else { at + 1 };
                        let opener = if double {
                            b.get(at + 1) == Some(&b'/')
                        } else {
                            true
                        };
                        let switches = opener
                            && b.get(name_at..name_at + SCRIPT.len())
                                .is_some_and(|n| n.eq_ignore_ascii_case(SCRIPT))
                            && b.get(name_at + SCRIPT.len())
                                .is_some_and(|&c| is_space(c) || c == b'/' || c == b'>');
                        if switches {
                            double = !double;
                            // The terminator is consumed by the double escape (end) state.
                            at = name_at + SCRIPT.len() + 1;
                        } else {
                            at += 1;
                        }
                    }
                    _ => {
                        dashes = 0;
                        at += 1;
                    }
                }
            }
        }
    }
}

/// An attribute whose name and opening quote [`common_attribute`] checks in one compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommonAttribute {
    /// `class`, `title` or `id`: not read, only crossed.
    Crossed,
    Href,
}

/// ` class="`, ` href="`, ` id="` or ` title="` at `at` (lowercase, one space: how nearly
/// every page spells them; 63% of a documentation page's attributes, `class` and `href`
/// most of them): which, and where its value starts. Where an attribute may start (after a
/// tag name or a value, or in whitespace) these bytes are exactly whitespace, the name, `=`
/// and an opening quote to the tokenizer, so the lexer takes them in one 8-byte compare, a
/// branch the CPU predicts and runs ahead of, instead of a branch per byte.
#[inline(always)]
fn common_attribute(b: &[u8], at: usize) -> Option<(CommonAttribute, usize)> {
    const CLASS: u64 = u64::from_le_bytes(*b" class=\"");
    const TITLE: u64 = u64::from_le_bytes(*b" title=\"");
    const HREF: u64 = u64::from_le_bytes(*b" href=\"\0");
    const ID: u64 = u64::from_le_bytes(*b" id=\"\0\0\0");
    const SEVEN: u64 = u64::MAX >> 8;
    const FIVE: u64 = u64::MAX >> 24;
    let word = u64::from_le_bytes(*b.get(at..at + 8)?.first_chunk()?);
    if word == CLASS || word == TITLE {
        Some((CommonAttribute::Crossed, at + 8))
    } else if word & SEVEN == HREF {
        Some((CommonAttribute::Href, at + 7))
    } else if word & FIVE == ID {
        Some((CommonAttribute::Crossed, at + 5))
    } else {
        None
    }
}

/// ` href=` or ` id=` at `at` followed by an unquoted value (a minified page's way, and
/// rustdoc's for the line anchors of its source pages, `<a href=#12 id=12 …>`, nearly a
/// third of the doc corpus's links): which, and where its value starts. As for
/// [`common_attribute`], these bytes are whitespace, the name and `=` to the tokenizer, and
/// a first byte that is not whitespace, a quote or `>` starts an unquoted value, which
/// [`find_value_end`] ends.
#[inline(always)]
fn unquoted_attribute(b: &[u8], at: usize) -> Option<(CommonAttribute, usize)> {
    const HREF: u64 = u64::from_le_bytes(*b" href=\0\0");
    const ID: u64 = u64::from_le_bytes(*b" id=\0\0\0\0");
    const SIX: u64 = u64::MAX >> 16;
    const FOUR: u64 = u64::MAX >> 32;
    let word = u64::from_le_bytes(*b.get(at..at + 8)?.first_chunk()?);
    let (attribute, start) = if word & SIX == HREF {
        (CommonAttribute::Href, at + 6)
    } else if word & FOUR == ID {
        (CommonAttribute::Crossed, at + 4)
    } else {
        return None;
    };
    let first = *b.get(start)?;
    (!is_space(first) && !matches!(first, b'"' | b'\'' | b'>')).then_some((attribute, start))
}

/// Where an unquoted attribute value starting at `at` ends: the first whitespace or `>`
/// (`None` if the document ends first). The next 16 bytes are classed at once (a value's
/// length varies, and a byte loop's exit from it was a mispredicted branch per value).
#[inline(always)]
fn find_value_end(b: &[u8], at: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(head) = block16(b, at) {
        let mask = sse2::eq_mask(head, b' ')
            | sse2::eq_mask(head, b'>')
            | sse2::eq_mask(head, b'\n')
            | sse2::eq_mask(head, b'\t')
            | sse2::eq_mask(head, b'\r')
            | sse2::eq_mask(head, b'\x0c');
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
    }
    let rest = b.get(at..)?;
    rest.iter()
        .position(|&c| is_space(c) || c == b'>')
        .map(|i| at + i)
}

/// Records attribute `name`'s value if it is one the extractor reads and the first of its
/// name. Names are matched by [`folded_key`]: every attribute of a link tag comes through
/// here, so one load and one integer match each, not a case-insensitive compare per
/// candidate.
#[inline(always)]
fn record(b: &[u8], attrs: &mut Attrs, name: Range<usize>, value: Range<usize>) {
    const REL: u64 = name_key(b"rel");
    const SRC: u64 = name_key(b"src");
    const HREF: u64 = name_key(b"href");
    const NAME: u64 = name_key(b"name");
    const SIZE: u64 = name_key(b"size");
    const FACE: u64 = name_key(b"face");
    const COLOR: u64 = name_key(b"color");
    const CONTENT: u64 = name_key(b"content");
    let slot = match folded_key(b, name.start, name.end) {
        Some(REL) => &mut attrs.rel,
        Some(SRC) => &mut attrs.src,
        Some(HREF) => &mut attrs.href,
        Some(NAME) => &mut attrs.name,
        Some(SIZE | FACE | COLOR) => {
            attrs.font_breakout = true;
            return;
        }
        Some(CONTENT) => &mut attrs.content,
        _ => return,
    };
    if slot.is_none() {
        *slot = Some(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tags and `href`/`src` values a document reports, as text.
    fn tags(html: &str) -> Vec<String> {
        struct Collect<'a>(&'a [u8], Vec<String>);
        impl TagSink for Collect<'_> {
            fn tag(&mut self, tag: LinkTag, attrs: &Attrs) {
                let value = attrs.href.clone().or(attrs.src.clone()).map(|range| {
                    String::from_utf8_lossy(self.0.get(range).unwrap_or_default()).into_owned()
                });
                self.1
                    .push(format!("{tag:?}={}", value.unwrap_or_default()));
            }
        }
        let mut sink = Collect(html.as_bytes(), Vec::new());
        scan(html.as_bytes(), &mut sink);
        sink.1
    }

    #[test]
    fn the_inline_searches_find_what_a_byte_loop_finds() {
        // Needles at every distance from the start, across the 16- and 32-byte steps and
        // past them, in inputs of every length around those steps.
        for len in 0..80 {
            for place in 0..len {
                for needle in [b'<', b'>', b'"', b'\'', b' ', b'\x0c'] {
                    let mut b = vec![b'x'; len];
                    b[place] = needle;
                    if place + 7 < len {
                        b[place + 7] = b'<';
                    }
                    for at in 0..=len + 1 {
                        let naive = |wanted: &dyn Fn(u8) -> bool| {
                            b.get(at..)
                                .and_then(|rest| rest.iter().position(|&c| wanted(c)))
                                .map(|i| at + i)
                        };
                        assert_eq!(find(&b, at, needle), naive(&|c| c == needle));
                        assert_eq!(
                            find_tag_end(&b, at),
                            naive(&|c| matches!(c, b'>' | b'"' | b'\''))
                        );
                        assert_eq!(find_value_end(&b, at), naive(&|c| is_space(c) || c == b'>'));
                    }
                }
            }
        }
    }

    /// Bytes of tags: the ones the attribute lexer's states turn on, the names it records,
    /// sometimes anything.
    fn tag_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let pieces = prop_oneof![
            4 => prop::sample::select(vec![
                " ", "\t", "\n", "\x0c", "\r", "=", "\"", "'", ">", "/", "<", "href", "HREF",
                "rel", "src", "name", "content", "color", "x", "y-z", " class=\"", " title=\"",
                " id=\"", " ID=\"", " href=", " id=", "#1", "=\"", "='",
                "\" ", "\">", "\"/>",
            ]).prop_map(|piece: &str| piece.as_bytes().to_vec()),
            1 => any::<u8>().prop_map(|b| vec![b]),
        ];
        proptest::collection::vec(pieces, 0..40).prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// The attribute lexer with its common attributes taken whole against the lexer
        /// reading them byte by byte, from every place a tag name can end.
        #[test]
        fn common_attributes_taken_whole_are_read_as_byte_by_byte(input in tag_bytes()) {
            let scanner = Scanner {
                b: &input,
                ns: NsStack::default(),
                frameset_depth: 0,
            };
            for at in 0..=input.len() {
                let naive_end = at + input[at..]
                    .iter()
                    .position(|&c| is_space(c) || c == b'/' || c == b'>')
                    .unwrap_or(input.len() - at);
                if at < input.len() && naive_end != at {
                    continue;
                }
                let (mut fast, mut slow) = (Attrs::default(), Attrs::default());
                let ends = |l: Option<Lexed>| l.map(|l| (l.end, l.self_closing));
                let lexed = ends(scanner.attributes(at, Some(&mut fast)));
                let expected = ends(scanner.lex_attributes::<false>(at, Some(&mut slow)));
                proptest::prop_assert_eq!(lexed, expected, "at {}", at);
                if expected.is_some() {
                    proptest::prop_assert_eq!(&fast, &slow, "at {}", at);
                }
                proptest::prop_assert_eq!(
                    ends(scanner.attributes(at, None)),
                    ends(scanner.lex_attributes::<false>(at, None))
                );
            }
        }
    }

    #[test]
    fn a_folded_key_matches_a_name_in_any_case_and_nothing_else() {
        // Every name the scanner compares by key, with each byte replaced by every value:
        // the key must match exactly when an ASCII case-insensitive compare does, whether
        // the 8-byte load runs past the name (more input follows) or the name ends the input.
        let names: [&[u8]; 24] = [
            b"a",
            b"area",
            b"iframe",
            b"frame",
            b"base",
            b"meta",
            b"link",
            b"frameset",
            b"script",
            b"style",
            b"xmp",
            b"noembed",
            b"noframes",
            b"noscript",
            b"title",
            b"textarea",
            b"svg",
            b"math",
            b"rel",
            b"src",
            b"href",
            b"name",
            b"color",
            b"content",
        ];
        for name in names {
            let key = name_key(name);
            for place in 0..name.len() {
                for byte in 0..=255u8 {
                    let mut spelled = name.to_vec();
                    spelled[place] = byte;
                    let same = spelled.eq_ignore_ascii_case(name);
                    let alone = spelled.clone();
                    let mut followed = spelled.clone();
                    followed.extend_from_slice(b"xxxxxxxx");
                    for input in [&alone, &followed] {
                        assert_eq!(
                            folded_key(input, 0, name.len()) == Some(key),
                            same,
                            "{:?}",
                            String::from_utf8_lossy(&spelled)
                        );
                    }
                }
            }
            // A name one byte longer or shorter is another name.
            let mut longer = name.to_vec();
            longer.push(b'a');
            assert_ne!(folded_key(&longer, 0, longer.len()), Some(key));
            assert_ne!(folded_key(name, 0, name.len() - 1), Some(key));
        }
        // Through the scanner: names and attribute names in odd cases, and bytes that only
        // look like a letter once bit 5 is set (`@` is 0x40: `` ` `` with it).
        assert_eq!(
            tags("<A HREF=1><a hReF=2><a h\u{0}ref=no><aREA href=3><a @href=no HRef=4>"),
            ["A=1", "A=2", "A=", "Area=3", "A=4"]
        );
        assert_eq!(
            tags("<A\u{1} href=no><\u{1}a href=no><iFrAmE src=5>"),
            ["Iframe=5"]
        );
    }

    #[test]
    fn scanner_reads_quoting_duplicates_and_cut_tags() {
        assert_eq!(
            tags("<a href=1 href=2><A HREF='q>'><a title=\">\" href=\"d\"><a href=cut"),
            ["A=1", "A=q>", "A=d"]
        );
        assert_eq!(tags("<a/href=s><a =x href=e>"), ["A=s", "A=e"]);
    }

    #[test]
    fn scanner_skips_comments_raw_text_and_script_escapes() {
        assert_eq!(
            tags("<!--><a href=1><!-- <a href=no> --!><a href=2><?x <a href=no>><a href=3>"),
            ["A=1", "A=2", "A=3"]
        );
        assert_eq!(
            tags("<style></styles><a href=no></style ><title><a href=no></title><a href=1>"),
            ["A=1"]
        );
        assert_eq!(
            tags("<script><!--<script></script><a href=no></script>--></script><a href=1>"),
            ["A=1"]
        );
        assert_eq!(
            tags("<plaintext></plaintext><a href=no>"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_name_that_matters_in_html_passes_the_first_letter_test() {
        let names = [
            "a",
            "area",
            "iframe",
            "frame",
            "base",
            "meta",
            "link",
            "frameset",
            "script",
            "style",
            "xmp",
            "noembed",
            "noframes",
            "noscript",
            "title",
            "textarea",
            "plaintext",
            "svg",
            "math",
            "div",
            "p",
            "span",
            "foreignObject",
            "desc",
            "mi",
            "font",
            "br",
            "h1",
        ];
        let mut mattering = 0;
        for name in names {
            for spelled in [name.to_string(), name.to_ascii_uppercase()] {
                if classify_in_html(spelled.as_bytes(), 0, spelled.len()) != Name::Other {
                    mattering += 1;
                    assert!(may_matter_in_html(spelled.as_bytes()[0]), "{spelled}");
                }
            }
        }
        assert_eq!(mattering, 2 * 19);
        assert!(!may_matter_in_html(b'd') && !may_matter_in_html(b'H'));
        // Skipped tags still end where the tokenizer ends them: after a quoted `>`, and
        // not at all when cut off.
        assert_eq!(
            tags("<div title='>'><a href=1></div x='>'><a href=2>"),
            ["A=1", "A=2"]
        );
        assert_eq!(tags("<a href=1><div title='>"), ["A=1"]);
        assert_eq!(
            tags("<frameset><frame src=1></Frameset><frame src=no>"),
            ["Frame=1"]
        );
    }

    #[test]
    fn scanner_follows_foreign_content() {
        // CDATA only in foreign content; breakouts close every foreign element.
        assert_eq!(
            tags("<svg><![CDATA[<a href=no>]]><svg><p><style><a href=no></style><a href=1>"),
            ["A=1"]
        );
        // In SVG, `<style>` is not raw text and `iframe` is not a frame; `<a>` is a link.
        assert_eq!(
            tags("<svg><style><a href=1></style><iframe src=no></iframe></svg><iframe src=2>"),
            ["A=1", "Iframe=2"]
        );
        // Frames count inside a frameset only.
        assert_eq!(
            tags("<frame src=no><frameset><frame src=1></frameset><frame src=no>"),
            ["Frame=1"]
        );
    }
}
