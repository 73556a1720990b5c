//! The link extractor as it was before `src/extract/scanner.rs` (commit c86783d's
//! `src/extract.rs`, built on lol_html), kept whole as the extract bench's baseline: the
//! bench times it against `crawler::extract` on the same pages in one run. Only the crate
//! paths changed (`crate::` → `crawler::`); its doc and tests are in that commit.

#![allow(dead_code)]

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use encoding_rs::{Decoder, Encoding, UTF_8};
use lol_html::send::{Element, ElementContentHandlers, HtmlRewriter, Settings};
use lol_html::{AsciiCompatibleEncoding, HandlerResult, OutputSink, Selector};
use url::Url;

use crawler::near_duplicate::DigitlessDigest;

/// How links are chosen. The default skips `rel=nofollow` links.
#[derive(Debug, Clone, Default)]
pub struct ExtractOptions {
    /// Report `rel=nofollow` links too. Default `false`: they are skipped (and counted).
    pub follow_nofollow: bool,
    /// Links kept per page (0 = all). Later ones are counted in [`Extracted::over_limit`],
    /// not buffered. With a limit set, the resolved links of a page also stay within a
    /// memory budget of [`BUDGET_PER_BODY_BYTE`] × the body + [`BUDGET_BASE`] bytes.
    pub max_links: usize,
    /// Longest URL worth building (0 = no limit): an `href` longer than this, or a relative
    /// one whose `<base>` is longer than this, is counted in [`Extracted::too_long`] without
    /// being resolved.
    pub max_url_length: usize,
    /// Compute [`Extracted::digest`], the page's digest for near-duplicate detection.
    pub digest: bool,
}

/// With [`ExtractOptions::max_links`] set, resolved links (text and [`Url`] struct) may
/// take this many bytes per byte of the page's body...
pub const BUDGET_PER_BODY_BYTE: usize = 16;
/// ...plus this many, so that short pages of long relative links still resolve.
pub const BUDGET_BASE: usize = 1 << 20;

/// What one document links to.
#[derive(Debug, Default, Clone)]
pub struct Extracted {
    /// Absolute URLs, resolved against the effective base, in document order, duplicates
    /// kept, fragments left as they are.
    pub links: Vec<Url>,
    /// Links skipped because of `rel=nofollow`.
    pub nofollow_skipped: usize,
    /// `href`/`src` values that did not resolve to a URL.
    pub invalid: usize,
    /// Links past [`ExtractOptions::max_links`] or the page's memory budget: not resolved.
    pub over_limit: usize,
    /// Links that would be longer than [`ExtractOptions::max_url_length`]: not resolved.
    pub too_long: usize,
    /// `<meta name="robots">` said `nofollow` (or `none`). Links are reported anyway.
    pub meta_nofollow: bool,
    /// The effective `<base href>`, if the document has one that resolves.
    pub base: Option<Url>,
    /// The first `<link rel=canonical href>`, resolved, if the document has one.
    pub canonical: Option<Url>,
    /// The page's bytes hashed without their ASCII digits ([`crawler::near_duplicate`]), when
    /// [`ExtractOptions::digest`] asked for it.
    pub digest: Option<u64>,
}

impl Extracted {
    /// Every link the page has, followed or not: resolved ([`Self::links`]), skipped for
    /// `rel=nofollow`, invalid, over the page's limits, or too long.
    pub fn found(&self) -> usize {
        self.links.len() + self.nofollow_skipped + self.invalid + self.over_limit + self.too_long
    }
}

/// Why streaming extraction stopped early. Links found before the error are still reported
/// by [`LinkExtractor::finish`].
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// lol_html gave up on the document (it does not in the configuration used here: no
    /// memory limit, non-strict parsing; kept so that a future lol_html cannot make us panic).
    #[error("HTML rewriter stopped: {0}")]
    Rewriter(String),
}

/// Extracts the links of a whole document held in memory.
///
/// `encoding` is the charset label from the Content-Type header (`None` means UTF-8).
pub fn extract_links(
    html: &[u8],
    page_url: &Url,
    encoding: Option<&str>,
    opts: &ExtractOptions,
) -> Extracted {
    let mut extractor = LinkExtractor::new(page_url.clone(), encoding, opts);
    if let Err(err) = extractor.write(html) {
        // The links found before the error are still worth having.
        tracing::debug!(url = %page_url, %err, "link extraction stopped early");
    }
    extractor.finish()
}

/// Streaming link extraction: feed the body chunk by chunk as it arrives, then
/// [`finish`](Self::finish). `Send`, so it can live in a fetch task between chunks.
pub struct LinkExtractor {
    page_url: Url,
    follow_nofollow: bool,
    max_url_length: usize,
    /// Encoding named by the caller (the transport label), if it names one; a byte-order
    /// mark overrides it, and without it a `<meta>` declaration may decide.
    label_encoding: Option<&'static Encoding>,
    /// Bytes held back until there are enough to decide the encoding: a byte-order mark's
    /// worth with a transport label, the prescan's 1,024 without.
    sniff: Option<Vec<u8>>,
    /// The document's encoding once decided (used to encode query strings).
    encoding: &'static Encoding,
    /// For encodings lol_html cannot read (UTF-16, ISO-2022-JP): transcode to UTF-8 first.
    transcoder: Option<(Decoder, String)>,
    /// `None` before the encoding is decided and after lol_html failed.
    rewriter: Option<HtmlRewriter<'static, Discard>>,
    state: Arc<Mutex<Collector>>,
    /// The near-duplicate digest, when asked for: fed what lol_html is fed.
    digest: Option<DigitlessDigest>,
}

impl std::fmt::Debug for LinkExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkExtractor")
            .field("page_url", &self.page_url.as_str())
            .field("encoding", &self.encoding.name())
            .finish_non_exhaustive()
    }
}

/// Longest byte-order mark (UTF-8).
const BOM_MAX: usize = 3;

impl LinkExtractor {
    /// A new extractor for the page at `page_url`. `encoding` is the Content-Type charset
    /// label; `None` or an unknown label means UTF-8.
    pub fn new(page_url: Url, encoding: Option<&str>, opts: &ExtractOptions) -> Self {
        let label_encoding = crawler::charset::transport_encoding(encoding);
        let Buffers {
            input,
            arena,
            spans,
        } = Buffers::take_spare();
        let collector = Collector {
            input,
            arena,
            spans,
            max_links: opts.max_links,
            ..Collector::default()
        };
        Self {
            page_url,
            follow_nofollow: opts.follow_nofollow,
            max_url_length: opts.max_url_length,
            label_encoding,
            sniff: Some(Vec::new()),
            encoding: label_encoding.unwrap_or(UTF_8),
            transcoder: None,
            rewriter: None,
            state: Arc::new(Mutex::new(collector)),
            digest: opts.digest.then(DigitlessDigest::default),
        }
    }

    /// Feeds the next chunk of the body.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), ExtractError> {
        match self.sniff.take() {
            None => self.feed(chunk, false),
            Some(mut head) => {
                if head.len() + chunk.len() < self.sniff_len() {
                    head.extend_from_slice(chunk);
                    self.sniff = Some(head);
                    return Ok(());
                }
                if head.is_empty() {
                    // The common case: the first chunk is long enough, no copy.
                    self.start(chunk)
                } else {
                    head.extend_from_slice(chunk);
                    self.start(&head)
                }
            }
        }
    }

    /// Ends the document and resolves the links found.
    pub fn finish(mut self) -> Extracted {
        if let Some(head) = self.sniff.take() {
            // Fewer bytes in the whole document than the encoding decision waits for.
            if let Err(err) = self.start(&head) {
                tracing::debug!(url = %self.page_url, %err, "link extraction stopped early");
            }
        }
        if let Err(err) = self.feed(&[], true) {
            tracing::debug!(url = %self.page_url, %err, "link extraction stopped early");
        }
        if let Some(rewriter) = self.rewriter.take() {
            if let Err(err) = rewriter.end() {
                tracing::debug!(url = %self.page_url, %err, "link extraction stopped early");
            }
        }
        let collector = std::mem::take(&mut *lock(&self.state));
        let mut extracted = collector.resolve(&self.page_url, self.encoding, self.max_url_length);
        extracted.digest = self.digest.take().map(DigitlessDigest::finish);
        Buffers {
            input: collector.input,
            arena: collector.arena,
            spans: collector.spans,
        }
        .keep_spare();
        extracted
    }

    /// Bytes needed before the encoding can be decided.
    fn sniff_len(&self) -> usize {
        match self.label_encoding {
            Some(_) => BOM_MAX,
            None => crawler::charset::PRESCAN_BYTES,
        }
    }

    /// Decides the encoding from the first bytes, builds the rewriter and feeds `data`.
    fn start(&mut self, data: &[u8]) -> Result<(), ExtractError> {
        // A byte-order mark overrides the transport label, which overrides `<meta>`, as in
        // the HTML spec.
        let sniffed = crawler::charset::sniff(data, self.label_encoding);
        let (encoding, bom_len) = (sniffed.encoding, sniffed.bom_len);
        self.encoding = encoding;
        let lol_encoding = match AsciiCompatibleEncoding::new(encoding) {
            Some(ascii_compatible) => ascii_compatible,
            None => {
                self.transcoder =
                    Some((encoding.new_decoder_without_bom_handling(), String::new()));
                AsciiCompatibleEncoding::utf_8()
            }
        };
        self.rewriter = Some(build_rewriter(
            lol_encoding,
            Arc::clone(&self.state),
            self.follow_nofollow,
        ));
        self.feed(data.get(bom_len..).unwrap_or_default(), false)
    }

    fn feed(&mut self, data: &[u8], last: bool) -> Result<(), ExtractError> {
        let Some(rewriter) = self.rewriter.as_mut() else {
            return Ok(());
        };
        let bytes = match self.transcoder.as_mut() {
            None => data,
            Some((decoder, buf)) => {
                buf.clear();
                let needed = decoder
                    .max_utf8_buffer_length(data.len())
                    .unwrap_or(data.len().saturating_mul(3).saturating_add(16));
                buf.reserve(needed);
                // With the buffer reserved to the decoder's maximum, one call consumes all.
                let _ = decoder.decode_to_string(data, buf, last);
                buf.as_bytes()
            }
        };
        // The handlers read attribute values from the copy (see `Collector::input`).
        lock(&self.state).input.extend_from_slice(bytes);
        if let Some(digest) = self.digest.as_mut() {
            digest.update(bytes);
        }
        let result = rewriter.write(bytes);
        result.map_err(|err| {
            // lol_html must not be used after an error; keep what was found.
            self.rewriter = None;
            ExtractError::Rewriter(err.to_string())
        })
    }
}

/// The growable buffers of one extraction (a copy of the input, the decoded link values
/// and their ranges). Each thread keeps those of its last finished extraction for its next
/// one: the parse threads extract page after page, and growing these from empty cost about
/// twenty allocations and copies per page (the crawl bench's profile showed the
/// reallocations under `push_decoded` and `Vec::push`, and a page-sized allocation for the
/// input). Buffers that grew past [`SPARE_MAX_BYTES`] are freed, not kept, so that one huge
/// page does not pin its memory in every thread.
#[derive(Default)]
struct Buffers {
    input: Vec<u8>,
    arena: String,
    spans: Vec<(usize, usize)>,
}

/// The largest buffers a thread keeps between extractions, in bytes (each of the three).
const SPARE_MAX_BYTES: usize = 256 << 10;

thread_local! {
    static SPARE: RefCell<Option<Buffers>> = const { RefCell::new(None) };
}

impl Buffers {
    /// This thread's spare buffers (empty, their capacity kept), or new ones.
    fn take_spare() -> Buffers {
        SPARE
            .try_with(|spare| spare.borrow_mut().take())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Keeps these buffers, emptied, for this thread's next extraction, unless they grew
    /// too large to keep.
    fn keep_spare(mut self) {
        let bytes = |capacity: usize, item: usize| capacity.saturating_mul(item);
        if bytes(self.input.capacity(), 1) > SPARE_MAX_BYTES
            || bytes(self.arena.capacity(), 1) > SPARE_MAX_BYTES
            || bytes(self.spans.capacity(), std::mem::size_of::<(usize, usize)>()) > SPARE_MAX_BYTES
        {
            return;
        }
        self.input.clear();
        self.arena.clear();
        self.spans.clear();
        let _ = SPARE.try_with(|spare| *spare.borrow_mut() = Some(self));
    }
}

/// lol_html is a rewriter; extraction throws its output away.
struct Discard;

impl OutputSink for Discard {
    fn handle_chunk(&mut self, _chunk: &[u8]) {}
}

/// What the element handlers gather while the document streams by.
#[derive(Debug, Default)]
struct Collector {
    /// Every byte given to lol_html so far: attribute values are sliced from here by their
    /// source locations (no allocation per attribute).
    input: Vec<u8>,
    /// Decoded link values, back to back: one allocation for the whole page.
    arena: String,
    /// `arena` ranges, one per link, in document order.
    spans: Vec<(usize, usize)>,
    nofollow_skipped: usize,
    meta_nofollow: bool,
    /// Open `<frameset>` elements.
    frameset_depth: usize,
    /// Decoded value of the first `<base href>`.
    base: Option<String>,
    /// Decoded `href` of the first `<link rel=canonical>`.
    canonical: Option<String>,
    /// Links buffered at most (0 = all).
    max_links: usize,
    /// Links seen past `max_links`.
    over_limit: usize,
}

/// Buffers one link value, entity-decoded, for resolution at the end, unless `max_links`
/// are buffered already.
fn push_link(
    arena: &mut String,
    spans: &mut Vec<(usize, usize)>,
    (max_links, over_limit): (usize, &mut usize),
    raw: &str,
) {
    if max_links > 0 && spans.len() >= max_links {
        *over_limit += 1;
        return;
    }
    let start = arena.len();
    push_decoded(arena, raw);
    spans.push((start, arena.len()));
}

impl Collector {
    /// Resolves the buffered links. With `max_len` set, no URL much longer than it is ever
    /// built: an `href` longer than `max_len` is refused as it is, and a `<base>` longer
    /// than `max_len` only serves links whose result does not start with it (absolute,
    /// scheme-relative and root-relative ones; see [`relative_to_long_base`]).
    fn resolve(&self, page_url: &Url, encoding: &'static Encoding, max_len: usize) -> Extracted {
        let body_len = self.input.len();
        let query_encoding = encoding.output_encoding();
        let too_long = |text: &str| max_len > 0 && text.len() > max_len;
        let base = self
            .base
            .as_deref()
            // Built once whatever its length (its bytes are in the body): it is the links
            // relative to it that must not each copy it.
            .and_then(|href| resolve(page_url, href, query_encoding));
        let effective = base.as_ref().unwrap_or(page_url);
        let long_base = too_long(effective.as_str());
        let budget = (self.max_links > 0).then(|| {
            body_len
                .saturating_mul(BUDGET_PER_BODY_BYTE)
                .saturating_add(BUDGET_BASE)
        });
        let mut used = 0usize;
        let mut out = Extracted {
            links: Vec::with_capacity(self.spans.len()),
            nofollow_skipped: self.nofollow_skipped,
            invalid: 0,
            over_limit: self.over_limit,
            too_long: 0,
            meta_nofollow: self.meta_nofollow,
            base: None,
            digest: None,
            canonical: self
                .canonical
                .as_deref()
                .filter(|href| !too_long(href))
                .and_then(|href| resolve(effective, href, query_encoding))
                .filter(|url| !too_long(url.as_str())),
        };
        for (index, &(start, end)) in self.spans.iter().enumerate() {
            let Some(href) = self.arena.get(start..end) else {
                out.invalid += 1;
                continue;
            };
            if too_long(href) || (long_base && relative_to_long_base(href)) {
                out.too_long += 1;
                continue;
            }
            match resolve(effective, href, query_encoding) {
                Some(url) => {
                    used = used.saturating_add(url.as_str().len() + std::mem::size_of::<Url>());
                    if budget.is_some_and(|budget| used > budget) {
                        out.over_limit += self.spans.len() - index;
                        break;
                    }
                    out.links.push(url)
                }
                None => out.invalid += 1,
            }
        }
        out.base = base;
        out
    }
}

/// Whether `href` has a scheme (`http:`, `mailto:` …): its result ignores the base.
fn is_absolute(href: &str) -> bool {
    let href = href.trim_start_matches(|c: char| c <= ' ');
    let Some((scheme, _)) = href.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Whether resolving `href` against a base copies the base's path (a relative path, a
/// query, a fragment, or the empty href): against an over-long base, such a result is
/// over-long too, so it is refused without being built. Absolute (`http://…`),
/// scheme-relative (`//host/…`) and root-relative (`/path`) hrefs keep at most the base's
/// scheme and host and are resolved as usual. (A relative path full of `../` could in
/// principle climb back under the limit; no page needs that, and a hostile one must not
/// make us build a multi-megabyte URL per link to find out.)
fn relative_to_long_base(href: &str) -> bool {
    let trimmed = href.trim_start_matches(|c: char| c <= ' ');
    !(is_absolute(trimmed) || trimmed.starts_with('/') || trimmed.starts_with('\\'))
}

/// Resolves `href` against `base` as the URL standard does for a document in `encoding`.
fn resolve(base: &Url, href: &str, encoding: &'static Encoding) -> Option<Url> {
    if encoding == UTF_8 {
        return base.join(href).ok();
    }
    let encode = encoder(encoding);
    Url::options()
        .base_url(Some(base))
        .encoding_override(Some(&encode))
        .parse(href)
        .ok()
}

/// The query-string encoder the URL parser needs for a non-UTF-8 document.
fn encoder(encoding: &'static Encoding) -> impl for<'a> Fn(&'a str) -> Cow<'a, [u8]> {
    move |s| encoding.encode(s).0
}

/// Appends `raw` to `out`, entity-decoded as an HTML attribute value, with U+0000 replaced
/// by U+FFFD as the HTML tokenizer does.
fn push_decoded(out: &mut String, raw: &str) {
    let decoded = htmlize::unescape_attribute(raw);
    if decoded.contains('\0') {
        out.push_str(&decoded.replace('\0', "\u{FFFD}"));
    } else {
        out.push_str(&decoded);
    }
}

fn decode(raw: &str) -> Cow<'_, str> {
    htmlize::unescape_attribute(raw)
}

/// `rel` contains the `nofollow` keyword.
fn rel_has_nofollow(rel: &str) -> bool {
    decode(rel)
        .split_ascii_whitespace()
        .any(|token| token.eq_ignore_ascii_case("nofollow"))
}

/// `<meta name=robots content=…>` forbids following links.
fn meta_robots_nofollow(name: &str, content: &str) -> bool {
    if !decode(name)
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .eq_ignore_ascii_case("robots")
    {
        return false;
    }
    decode(content)
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .any(|token| token.eq_ignore_ascii_case("nofollow") || token.eq_ignore_ascii_case("none"))
}

fn lock(state: &Mutex<Collector>) -> MutexGuard<'_, Collector> {
    // A handler never panics while holding the lock; if one ever did, the data is still
    // consistent enough to report.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Parses a selector that is a constant of this module (not input). Never panics: a typo
/// here would leave its elements unreported, which every test notices at once.
fn selector(source: &str) -> Option<Selector> {
    source
        .parse()
        .map_err(|err| tracing::error!(source, %err, "invalid built-in selector"))
        .ok()
}

static SEL_A: LazyLock<Option<Selector>> = LazyLock::new(|| selector("a[href]"));
static SEL_AREA: LazyLock<Option<Selector>> = LazyLock::new(|| selector("area[href]"));
static SEL_IFRAME: LazyLock<Option<Selector>> = LazyLock::new(|| selector("iframe[src]"));
// Not `frameset frame[src]`: a descendant combinator makes lol_html track every element's
// nesting, about 7% slower on ordinary pages that have no frames; the frameset depth is
// counted by hand instead (see `build_rewriter`).
static SEL_FRAME: LazyLock<Option<Selector>> = LazyLock::new(|| selector("frame[src]"));
static SEL_FRAMESET: LazyLock<Option<Selector>> = LazyLock::new(|| selector("frameset"));
static SEL_BASE: LazyLock<Option<Selector>> = LazyLock::new(|| selector("base[href]"));
static SEL_META: LazyLock<Option<Selector>> = LazyLock::new(|| selector("meta[name]"));
static SEL_LINK: LazyLock<Option<Selector>> = LazyLock::new(|| selector("link[rel]"));

type El<'r, 't> = Element<'r, 't>;

const HTML_NS: &str = "http://www.w3.org/1999/xhtml";

/// The elements the rewriter reports, one handler each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `a[href]`: a link in any namespace (SVG has links too, and scraper's `a[href]`
    /// matches them all); obeys `rel`.
    A,
    /// `area[href]`: obeys `rel`.
    Area,
    /// `iframe[src]`.
    Iframe,
    /// `frame[src]`: only inside a `<frameset>`.
    Frame,
    /// `frameset`: counted, for `Frame`.
    Frameset,
    /// `base[href]`: the first one sets the base.
    Base,
    /// `meta[name]`: robots directives.
    Meta,
    /// `link[rel]`: the first `rel=canonical` one names the canonical URL.
    Link,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::A,
        Kind::Area,
        Kind::Iframe,
        Kind::Frameset,
        Kind::Frame,
        Kind::Base,
        Kind::Meta,
        Kind::Link,
    ];

    fn selector(self) -> Option<&'static Selector> {
        let selector: &'static LazyLock<Option<Selector>> = match self {
            Kind::A => &SEL_A,
            Kind::Area => &SEL_AREA,
            Kind::Iframe => &SEL_IFRAME,
            Kind::Frame => &SEL_FRAME,
            Kind::Frameset => &SEL_FRAMESET,
            Kind::Base => &SEL_BASE,
            Kind::Meta => &SEL_META,
            Kind::Link => &SEL_LINK,
        };
        selector.as_ref()
    }
}

/// The raw value of attribute `name` (first occurrence, as in HTML), read from the input
/// through lol_html's source locations: lol_html's own accessors allocate two or three
/// strings per call, and this runs for every link. A valueless attribute (`<a href>`) is "".
fn raw_attr<'i>(el: &El<'_, '_>, input: &'i [u8], name: &[u8]) -> Option<&'i [u8]> {
    for attr in el.attributes() {
        let Some(attr_name) = attr
            .name_source_location()
            .and_then(|loc| input.get(loc.bytes()))
        else {
            continue;
        };
        if attr_name.eq_ignore_ascii_case(name) {
            return match attr.value_source_location() {
                Some(loc) => input.get(loc.bytes()),
                None => Some(&[]),
            };
        }
    }
    None
}

/// Raw attribute bytes as text, in the encoding lol_html was given.
fn text<'a>(raw: &'a [u8], encoding: &'static Encoding) -> Cow<'a, str> {
    if encoding == UTF_8 {
        // `from_utf8` first: its validation is several times faster than the chunk by chunk
        // walk of `from_utf8_lossy` (1% of the crawl's instructions), and gives the same
        // text for the valid UTF-8 that nearly every attribute is.
        match std::str::from_utf8(raw) {
            Ok(valid) => Cow::Borrowed(valid),
            Err(_) => String::from_utf8_lossy(raw),
        }
    } else {
        encoding.decode_without_bom_handling(raw).0
    }
}

fn element_handler(
    kind: Kind,
    state: Arc<Mutex<Collector>>,
    encoding: &'static Encoding,
    follow_nofollow: bool,
) -> impl FnMut(&mut El<'_, '_>) -> HandlerResult + Send + 'static {
    move |el| {
        // Only `<a>` is a link outside HTML: an SVG element called `iframe` is not a frame.
        if kind != Kind::A && el.namespace_uri() != HTML_NS {
            return Ok(());
        }
        let mut guard = lock(&state);
        // Disjoint borrows: attribute values are read from `input` into the other fields.
        let Collector {
            input,
            arena,
            spans,
            nofollow_skipped,
            meta_nofollow,
            frameset_depth,
            base,
            canonical,
            max_links,
            over_limit,
        } = &mut *guard;
        let limit = (*max_links, over_limit);
        let input: &[u8] = input;
        let attr = |name: &[u8]| raw_attr(el, input, name).map(|raw| text(raw, encoding));
        match kind {
            Kind::A | Kind::Area => {
                if !follow_nofollow && attr(b"rel").is_some_and(|rel| rel_has_nofollow(&rel)) {
                    *nofollow_skipped += 1;
                } else if let Some(href) = attr(b"href") {
                    push_link(arena, spans, limit, &href);
                }
            }
            Kind::Iframe => {
                if let Some(src) = attr(b"src") {
                    push_link(arena, spans, limit, &src);
                }
            }
            Kind::Frame => {
                if *frameset_depth > 0 {
                    if let Some(src) = attr(b"src") {
                        push_link(arena, spans, limit, &src);
                    }
                }
            }
            Kind::Base => {
                if base.is_none() {
                    if let Some(href) = attr(b"href") {
                        let mut decoded = String::new();
                        push_decoded(&mut decoded, &href);
                        *base = Some(decoded);
                    }
                }
            }
            Kind::Meta => {
                if let (Some(name), Some(content)) = (attr(b"name"), attr(b"content")) {
                    if meta_robots_nofollow(&name, &content) {
                        *meta_nofollow = true;
                    }
                }
            }
            Kind::Link => {
                if canonical.is_none()
                    && attr(b"rel").is_some_and(|rel| {
                        decode(&rel)
                            .split_ascii_whitespace()
                            .any(|t| t.eq_ignore_ascii_case("canonical"))
                    })
                {
                    if let Some(href) = attr(b"href") {
                        let mut decoded = String::new();
                        push_decoded(&mut decoded, &href);
                        *canonical = Some(decoded);
                    }
                }
            }
            Kind::Frameset => {
                *frameset_depth += 1;
                drop(guard);
                let end_state = Arc::clone(&state);
                // Fails only for `<frameset/>`, which the tree builder leaves open too.
                let _ = el.on_end_tag(Box::new(move |_end| {
                    let mut st = lock(&end_state);
                    st.frameset_depth = st.frameset_depth.saturating_sub(1);
                    Ok(())
                }));
            }
        }
        Ok(())
    }
}

fn build_rewriter(
    encoding: AsciiCompatibleEncoding,
    state: Arc<Mutex<Collector>>,
    follow_nofollow: bool,
) -> HtmlRewriter<'static, Discard> {
    let mut settings = Settings::new_send()
        .with_encoding(encoding)
        // Never refuse a page over a parsing ambiguity: take lol_html's best guess.
        .with_strict(false);
    for kind in Kind::ALL {
        let Some(selector) = kind.selector() else {
            continue;
        };
        let handlers = ElementContentHandlers::default().element(element_handler(
            kind,
            Arc::clone(&state),
            <&'static Encoding>::from(encoding),
            follow_nofollow,
        ));
        settings = settings.append_element_content_handler((Cow::Borrowed(selector), handlers));
    }
    HtmlRewriter::new(settings, Discard)
}
