//! Link extraction from HTML: the URLs a page points at, resolved to absolute form.
//!
//! # What it does
//! [`extract_links`] (or the streaming [`LinkExtractor`]) reads one HTML document and reports
//! the targets of `a[href]`, `area[href]`, `frame[src]` (inside a `<frameset>`) and
//! `iframe[src]`, in document order, resolved against the page's effective base URL.
//! Duplicates are kept (the crawl's seen-set deduplicates), fragments are left in place, or
//! not resolved at all for the crawl, whose normalizer drops them
//! ([`ExtractOptions::drop_fragments`]), and every scheme the URL parser accepts is returned
//! (`javascript:`, `mailto:`, `data:` …: the normalizer keeps only http(s)); only values the
//! URL parser rejects are dropped, and counted in [`Extracted::invalid`].
//!
//! # Guarantees
//! - Never panics, whatever the bytes: HTML is hostile input. Nothing here unwraps input.
//! - Bounded work per page when limits are set ([`ExtractOptions::max_links`],
//!   [`ExtractOptions::max_url_length`]): at most `max_links` values are buffered, no URL
//!   much longer than `max_url_length` is built (an over-long `href` is refused as it is;
//!   links relative to an over-long `<base>` are refused without copying it; see
//!   `relative_to_long_base`), and resolved links stop at a budget of
//!   [`BUDGET_PER_BODY_BYTE`] × body + [`BUDGET_BASE`] bytes, counting each [`Url`] whole
//!   (its text and its struct). So a 9 MB page with a 4 MB `<base href>` and 200,000 links
//!   costs about its own size, not 800 GB of URLs, and a page of a million links holds at
//!   most 16 times its own size however many links it has. What is refused is counted
//!   ([`Extracted::over_limit`], [`Extracted::too_long`]); [`Extracted::found`] counts every
//!   link of the page, taken or not.
//! - With [`ExtractOptions::digest`], the page's bytes are also hashed with their digits
//!   left out, as they stream by ([`crate::near_duplicate`]): [`Extracted::digest`].
//! - Finds exactly what the DOM parser the project was specified with (scraper, i.e. html5ever's
//!   spec tree builder) finds, up to the documented differences below; a differential test over
//!   hand-written edge cases and generated tag soup (`tests/api/extract_differential.rs`, and the
//!   fuzz target `fuzz/fuzz_targets/extract_differential.rs`) checks it.
//!
//! # Semantics (decided to match the HTML spec and scraper)
//! - **Base**: the first `<base>` element *that has an `href`* sets the base, wherever it
//!   appears: as in the spec (the document base URL is a property of the whole document), a
//!   `<base>` that comes after some links still applies to those links. Its value is resolved
//!   against the page URL; if that fails, the page URL stays the base and
//!   [`Extracted::base`] is `None`. Later `<base>` elements are ignored. Because a streaming
//!   parser cannot know about a later `<base>`, link values are buffered (as ranges of the
//!   document, or decoded into one string arena: no allocation per link) and resolved when
//!   the document ends.
//! - **Empty href** (`<a href="">`, `<a href>`) resolves to the base URL itself, as in a
//!   browser. The seen-set makes it harmless.
//! - **rel=nofollow**: `rel` is a set of ASCII-whitespace-separated, ASCII-case-insensitive
//!   tokens (`rel="NoFollow noopener"` counts). Only `a` and `area` have `rel`. Unless
//!   [`ExtractOptions::follow_nofollow`], such links are skipped and counted in
//!   [`Extracted::nofollow_skipped`] (whether or not they would have resolved).
//! - **meta robots**: `<meta name="robots" content="…">` whose comma/whitespace-separated
//!   tokens include `nofollow` or `none` (ASCII case-insensitive) sets
//!   [`Extracted::meta_nofollow`]; links are still reported and the caller decides.
//! - **Entities and whitespace**: attribute values are entity-decoded with the HTML5
//!   attribute rules (`&amp;`, `&#x2F;`, named references, the legacy no-semicolon rules
//!   where `&copy=` stays literal) and U+0000 becomes U+FFFD, as the HTML tokenizer does;
//!   stripping of leading/trailing C0 controls and spaces and removal of tab/CR/LF is left to
//!   the URL parser, which does exactly that.
//! - **Raw text**: nothing inside `<script>`, `<style>`, comments, `<textarea>`, `<title>`,
//!   `<xmp>`, `<iframe>`, `<noembed>`, `<noframes>`, `<plaintext>` or `<noscript>` is a link;
//!   `<noscript>` is raw text because scraper parses with scripting enabled (html5ever's
//!   default), like a browser with JavaScript on. `<template>` content *is* searched: scraper
//!   keeps it in the document, and a crawler wants those URLs anyway.
//! - **Frames**: `frame[src]` only counts inside a `<frameset>`: the tree builder drops a
//!   `<frame>` anywhere else, and so do browsers.
//! - **Encoding**: decided by [`crate::charset::sniff`]: a byte-order mark wins, then the
//!   `charset` label from Content-Type, then a `<meta charset>` / `http-equiv` declaration in
//!   the first 1,024 bytes (the HTML prescan), else UTF-8. Without a usable transport label
//!   the extractor holds back the first 1,024 bytes (or the whole body if shorter) to
//!   prescan them; with one, only the 3 a byte-order mark needs. ASCII-compatible encodings
//!   are scanned as they are; UTF-16 and ISO-2022-JP are transcoded to UTF-8 on the way in. Query strings are encoded with the document's encoding when resolving, as the
//!   URL standard asks.
//!
//! - **Canonical**: the first HTML `<link>` whose `rel` tokens include `canonical` (ASCII
//!   case-insensitive) and that has an `href`, wherever it is (a crawler meets `<link>` in
//!   `<body>` too), resolved against the effective base like a link, is
//!   [`Extracted::canonical`]; it is not one of [`Extracted::links`] (the caller decides
//!   whether to follow it). An `href` that does not resolve, or is longer than
//!   `max_url_length`, gives no canonical.
//!
//! - **Namespaces**: `<a>` is a link in any namespace (SVG has links; scraper's `a[href]`
//!   matches them all); `area`, `frame`, `iframe`, `base` and `meta` count only as HTML
//!   elements (an SVG element that happens to be called `iframe` is not a frame).
//!
//! # Known differences from scraper (and why they are acceptable)
//! The differential test recognises each of these and checks that the mismatch disappears
//! when the construct is renamed away (`tests/extract_support`), so nothing else hides
//! behind them.
//! - **Misnested `<a>`** (`<a href><div></a>`, `<p><a href></p>text`): the tree builder
//!   *clones* the `<a>` (adoption agency, "reconstruct the active formatting elements"), so
//!   scraper reports one source link several times. We report each `<a>` tag in the source
//!   once, which is what the page says. This one is not a difference in the differential
//!   test: the reference collapses clones by numbering source start tags before tree
//!   building.
//! - **Malformed foreign content**: the scanner tracks `<svg>`/`<math>` with a stack of
//!   namespace changes, not the tree builder's stack of open elements. For well-formed SVG
//!   and MathML it is exact (breakout tags such as `<svg><svg><p>` close every foreign
//!   element, as in the tree builder); after `<a><svg></a>`, `<button><svg></button>`
//!   or `<svg><title>…</title>` it can disagree with the tree builder about whether the
//!   following `<script>`/`<style>`/`<textarea>`… content is raw text, so a link-like string
//!   in such a script is reported or a link after such a `<style>` is missed.
//! - **`<frameset>` documents**: the tree builder drops what a frameset cannot hold (an `<a>`
//!   inside or after it) and ignores a `<frameset>` that follows body content, frames and
//!   all; we report what the tags say. Framesets are obsolete and these are real URLs.
//! - The scanner never refuses a page over a parsing ambiguity: it takes the reading above,
//!   which the differential test has not caught disagreeing outside these cases.
//!
//! # Why built this way
//! A crawl has little CPU per page for everything (`cargo bench --bench crawl`), and real
//! pages average ~240 KB, so extraction must run at memory speed. It does not build a DOM
//! (scraper: ~220 µs per 12 KB page) and no longer streams through lol_html (~250 MB/s: a
//! rewriter lexes every tag and runs its selectors on it): `scanner` is a purpose-built
//! tokenizer for the few link-carrying tags, which crosses scripts, styles and text with
//! `memchr` and does not allocate. Its module doc says what it follows of the HTML rules and
//! what it approximates; the differential test keeps it honest against scraper, and
//! `benches/extract.rs` times it against the lol_html extractor it replaced
//! (`benches/extract_baseline/`) on the same pages in one run.
//! Attribute values come out raw, so entities are decoded here with
//! `htmlize::unescape_attribute`, which implements the HTML5 attribute-value rules (and
//! borrows when there is no `&`, the common case). A whole document is scanned in place;
//! a streamed one is gathered first (a late `<base>` decides how every link resolves, so
//! nothing can be resolved before the end anyway). Link values that need decoding (a
//! character reference, a NUL, non-ASCII bytes) are decoded into one arena, the others
//! (nearly all) stay where they are in the document, and all are resolved at the end against the effective base taken apart once
//! ([`crate::normalize::PreparedBase`]): the common forms of links are built from the
//! base's parts without the URL parser, as [`Link`]s (text and offsets, no `Url`), the rest
//! with `Url::join`, with the same results. The links' texts are written back to back into
//! one [`crate::normalize::LinkBatch`] and shared by the page's links: one allocation for a
//! page's links, not one per link (per-link allocation and free were a tenth of the time on
//! the doc corpus, and the allocator's consolidation of the freed strings another part).
//! An `href` the page already had is not resolved again: its link is the first one's, text
//! shared (`Repeats`; 40% of the links of the doc corpus's first 500 pages, as `cargo bench
//! --bench extract` counts them), which is what resolving it would
//! give, so the links handed on are the same, in the same order, duplicates kept. Keeping
//! fragments, a fragment-only `href` (`#section`) is not looked up: written again it costs
//! about what the lookup does. Without them (the crawl), each value is cut before its `#`
//! as it is buffered (`crate::normalize::fragment_cut`, at the `#` found by the pass that
//! classes the value's bytes), so that a page's links to parts of one target
//! (`struct.Vec.html#method.len`, `…#method.push`) and all its fragment-only links are
//! repeats, resolved once (67% of the doc corpus's hrefs repeat one of their page so, against
//! 40% whole). `cargo bench --bench extract`, before and after alternated, three invocations
//! each: the doc corpus 684 → 757 MB/s interleaved, 800 → 854 MB/s alone (medians); a search
//! of its own for the `#`, before the class's pass found it, cost ~7% and took the gain back.

mod scanner;

use std::borrow::Cow;
use std::cell::RefCell;
use std::hash::BuildHasher;
use std::ops::Range;

use encoding_rs::{Decoder, Encoding, UTF_8};
use url::Url;

use crate::near_duplicate::DigitlessDigest;
use crate::normalize::{before_fragment, fragment_cut, Link, LinkBatch, PreparedBase};

use self::scanner::{Attrs, LinkTag, TagSink};

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
    /// Resolve links without their fragments (what the crawl wants: its normalizer drops
    /// them, as they never reach the server). Each `href` is resolved up to its `#`
    /// ([`crate::normalize::before_fragment`]), so the links of a page to parts of one
    /// target are resolved once and shared, and a fragment-only link is the page itself.
    /// An `href` is then measured against [`Self::max_url_length`] without its fragment.
    /// Default `false`: the links are `Url::join`'s, fragments included.
    pub drop_fragments: bool,
}

impl ExtractOptions {
    /// The options a crawl with `config` extracts with (`benches/extract.rs` times these).
    pub fn for_crawl(config: &crate::config::Config) -> Self {
        ExtractOptions {
            follow_nofollow: config.crawl.follow_nofollow,
            max_links: config.crawl.max_links_per_page,
            max_url_length: config.scope.max_url_length,
            digest: config.crawl.near_duplicates,
            // The normalizer drops every fragment (`crate::normalize`, rule 3).
            drop_fragments: true,
        }
    }
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
    /// kept, fragments left as they are (or dropped: [`ExtractOptions::drop_fragments`]):
    /// as [`Link`]s, text and offsets, which the common forms of links are built as without
    /// a `Url` ([`crate::normalize::Link`]).
    pub links: Vec<Link>,
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
    /// The page's bytes hashed without their ASCII digits ([`crate::near_duplicate`]), when
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
    /// The document is larger than the extractor can hold (its length overflowed `usize`);
    /// what came before is still scanned.
    #[error("document too large to extract links from: over {bytes} bytes")]
    TooLarge { bytes: usize },
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
    let label_encoding = crate::charset::transport_encoding(encoding);
    let sniffed = crate::charset::sniff(html, label_encoding);
    let body = html.get(sniffed.bom_len..).unwrap_or_default();
    let mut buffers = Buffers::take_spare();
    let mut transcoded = std::mem::take(&mut buffers.input);
    let text: &[u8] = if is_ascii_compatible(sniffed.encoding) {
        // The common case: scanned in place, no copy.
        body
    } else {
        let mut decoder = sniffed.encoding.new_decoder_without_bom_handling();
        transcode(&mut decoder, body, &mut transcoded, true);
        &transcoded
    };
    let digest = opts.digest.then(|| {
        let digest = buffers.digest.get_or_insert_with(DigitlessDigest::default);
        digest.update(text);
        digest.finish_and_reset()
    });
    let mut extracted = collect(text, page_url, sniffed.encoding, opts, &mut buffers);
    extracted.digest = digest;
    buffers.input = transcoded;
    buffers.keep_spare();
    extracted
}

/// Streaming link extraction: feed the body chunk by chunk as it arrives, then
/// [`finish`](Self::finish). `Send`, so it can live in a fetch task between chunks. The
/// chunks are gathered (the scanner reads the whole document at the end, as a `<base>` late
/// in the page decides how every link resolves anyway), so chunk boundaries never matter.
pub struct LinkExtractor {
    page_url: Url,
    opts: ExtractOptions,
    /// Encoding named by the caller (the transport label), if it names one; a byte-order
    /// mark overrides it, and without it a `<meta>` declaration may decide.
    label_encoding: Option<&'static Encoding>,
    /// Bytes held back until there are enough to decide the encoding: a byte-order mark's
    /// worth with a transport label, the prescan's 1,024 without.
    sniff: Option<Vec<u8>>,
    /// The document's encoding once decided (used to encode query strings).
    encoding: &'static Encoding,
    /// For encodings the scanner cannot read (UTF-16, ISO-2022-JP): transcode to UTF-8.
    transcoder: Option<Decoder>,
    /// The document so far, in an ASCII-compatible encoding.
    buffers: Buffers,
    /// The near-duplicate digest, when asked for: fed what the scanner reads.
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
        let label_encoding = crate::charset::transport_encoding(encoding);
        Self {
            page_url,
            opts: opts.clone(),
            label_encoding,
            sniff: Some(Vec::new()),
            encoding: label_encoding.unwrap_or(UTF_8),
            transcoder: None,
            buffers: Buffers::take_spare(),
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
        let mut buffers = std::mem::take(&mut self.buffers);
        let input = std::mem::take(&mut buffers.input);
        let mut extracted = collect(
            &input,
            &self.page_url,
            self.encoding,
            &self.opts,
            &mut buffers,
        );
        extracted.digest = self.digest.take().map(DigitlessDigest::finish);
        buffers.input = input;
        buffers.keep_spare();
        extracted
    }

    /// Bytes needed before the encoding can be decided.
    fn sniff_len(&self) -> usize {
        match self.label_encoding {
            Some(_) => BOM_MAX,
            None => crate::charset::PRESCAN_BYTES,
        }
    }

    /// Decides the encoding from the first bytes and feeds `data`.
    fn start(&mut self, data: &[u8]) -> Result<(), ExtractError> {
        // A byte-order mark overrides the transport label, which overrides `<meta>`, as in
        // the HTML spec.
        let sniffed = crate::charset::sniff(data, self.label_encoding);
        self.encoding = sniffed.encoding;
        if !is_ascii_compatible(sniffed.encoding) {
            self.transcoder = Some(sniffed.encoding.new_decoder_without_bom_handling());
        }
        self.feed(data.get(sniffed.bom_len..).unwrap_or_default(), false)
    }

    fn feed(&mut self, data: &[u8], last: bool) -> Result<(), ExtractError> {
        if self.sniff.is_some() {
            return Ok(());
        }
        let input = &mut self.buffers.input;
        let before = input.len();
        if before.checked_add(data.len()).is_none() {
            return Err(ExtractError::TooLarge { bytes: before });
        }
        match self.transcoder.as_mut() {
            None => input.extend_from_slice(data),
            Some(decoder) => transcode(decoder, data, input, last),
        }
        if let Some(digest) = self.digest.as_mut() {
            digest.update(input.get(before..).unwrap_or_default());
        }
        Ok(())
    }
}

/// Whether the scanner can read this encoding's bytes as they are: every encoding but
/// UTF-16 and ISO-2022-JP (the ones whose ASCII bytes may not be ASCII characters).
fn is_ascii_compatible(encoding: &'static Encoding) -> bool {
    encoding.is_ascii_compatible() && encoding != encoding_rs::ISO_2022_JP
}

/// Appends `data`, decoded to UTF-8, to `out`.
fn transcode(decoder: &mut Decoder, data: &[u8], out: &mut Vec<u8>, last: bool) {
    let needed = decoder
        .max_utf8_buffer_length(data.len())
        .unwrap_or(data.len().saturating_mul(3).saturating_add(16));
    let start = out.len();
    out.resize(start.saturating_add(needed), 0);
    let Some(room) = out.get_mut(start..) else {
        return;
    };
    // With room for the decoder's maximum, one call consumes all.
    let (_, _, written, _) = decoder.decode_to_utf8(data, room, last);
    out.truncate(start + written);
}

/// Scans `text` and resolves what it links to.
fn collect(
    text: &[u8],
    page_url: &Url,
    encoding: &'static Encoding,
    opts: &ExtractOptions,
    buffers: &mut Buffers,
) -> Extracted {
    let mut collector = Collector {
        input: text,
        encoding,
        follow_nofollow: opts.follow_nofollow,
        arena: std::mem::take(&mut buffers.arena),
        spans: std::mem::take(&mut buffers.spans),
        values_len: 0,
        nofollow_skipped: 0,
        meta_nofollow: false,
        base: None,
        canonical: None,
        max_links: opts.max_links,
        over_limit: 0,
        drop_fragments: opts.drop_fragments,
    };
    scanner::scan(text, &mut collector);
    let extracted = collector.resolve(
        page_url,
        text.len(),
        opts.max_url_length,
        (&mut buffers.batch, &mut buffers.repeats),
    );
    buffers.arena = collector.arena;
    buffers.spans = collector.spans;
    extracted
}

/// The growable buffers of one extraction (the document when it had to be gathered or
/// transcoded, the decoded link values and their ranges). Each thread keeps those of its
/// last finished extraction for its next one: the parse threads extract page after page,
/// and growing these from empty cost about twenty allocations and copies per page (the crawl
/// bench's profile showed the reallocations under `push_decoded` and `Vec::push`). Buffers
/// that grew past [`SPARE_MAX_BYTES`] are freed, not kept, so that one huge page does not
/// pin its memory in every thread.
#[derive(Default)]
struct Buffers {
    input: Vec<u8>,
    arena: String,
    spans: Vec<Span>,
    /// The resolved links' text, shared by the page's links (see [`LinkBatch`]).
    batch: LinkBatch,
    /// The page's hrefs resolved so far, for its repeated ones.
    repeats: Repeats,
    /// The near-duplicate digest of a whole document, emptied after each (its 8 KiB
    /// buffer is the point of keeping it).
    digest: Option<DigitlessDigest>,
}

/// A link value: its range of the scanned document when it is its own decoding (nearly
/// every one: no copy), else of the arena it was decoded into; and whether all its bytes
/// are ones the URL parser keeps as they are (then resolution need not check them again).
#[derive(Clone)]
struct Span {
    range: Range<usize>,
    decoded: bool,
    url_plain: bool,
    /// The value was not cut before its `#` ([`crate::normalize::before_fragment`]): its
    /// link's fragment is dropped once resolved.
    fragment_left: bool,
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
            || bytes(self.spans.capacity(), std::mem::size_of::<Span>()) > SPARE_MAX_BYTES
            || self.batch.capacity_bytes() > SPARE_MAX_BYTES
            || self.repeats.capacity_bytes() > SPARE_MAX_BYTES
        {
            return;
        }
        self.input.clear();
        self.arena.clear();
        self.spans.clear();
        let _ = SPARE.try_with(|spare| *spare.borrow_mut() = Some(self));
    }
}

/// The `href`s of a page resolved so far, each with its link's place in the page's
/// [`LinkBatch`] (or that it did not resolve), so that a repeated `href` gets the link
/// resolved for its first occurrence ([`LinkBatch::repeat`]: the same text, shared) instead
/// of being resolved again. Pages name one target many times (on the doc corpus's first 500
/// pages 40% of the links repeat an earlier `href` of their page: a type in every signature, the
/// crate's root, a section's anchor twice), and the same `href` against the same base
/// always resolves to the same link, so the links handed on are exactly those resolving
/// each would give. An open-addressing table of a few probes, emptied per page: a
/// collision past the probes (a hostile page's, or a table full on a page of thousands of
/// links) only means resolving that `href` again. Fragment-only `href`s are kept out of it
/// (see `Collector::resolve`).
#[derive(Default)]
struct Repeats {
    slots: Vec<RepeatSlot>,
}

/// One `href` of the page: 0 in `found` is an empty slot, 1 an `href` that did not
/// resolve, `n + 2` the link at batch index `n`.
#[derive(Clone, Copy, Default)]
struct RepeatSlot {
    hash: u32,
    span: u32,
    found: u32,
}

/// What [`Repeats::find`] knows of an `href`.
enum Found {
    /// Resolved before: its link's index in the batch.
    Resolved(usize),
    /// Did not resolve before.
    Invalid,
    /// Not seen (or not findable): the slot to remember it in, if there is one.
    New(Option<(usize, u32)>),
}

/// Probes per lookup: enough for a table at most half full, few enough that colliding
/// `href`s cost a few comparisons each.
const REPEAT_PROBES: usize = 4;
/// The largest table (slots): a page of more distinct `href`s than half this resolves the
/// rest as they come.
const REPEAT_SLOTS_MAX: usize = 1 << 14;

impl Repeats {
    /// Empties the table and sizes it for a page of `links` links.
    fn clear_for(&mut self, links: usize) {
        let size = links
            .saturating_mul(2)
            .next_power_of_two()
            .clamp(16, REPEAT_SLOTS_MAX);
        self.slots.clear();
        self.slots.resize(size, RepeatSlot::default());
    }

    /// Looks `href` up among the `href`s remembered (`value` gives the text of a span).
    fn find<'a>(
        &self,
        href: &str,
        spans: &[Span],
        value: impl Fn(&Span) -> Option<&'a str>,
    ) -> Found {
        let hash = rustc_hash::FxBuildHasher.hash_one(href.as_bytes());
        let mask = self.slots.len().wrapping_sub(1);
        let short = (hash >> 32) as u32;
        let mut at = hash as usize;
        for _ in 0..REPEAT_PROBES {
            let Some(slot) = self.slots.get(at & mask) else {
                break;
            };
            match slot.found {
                0 => return Found::New(Some((at & mask, short))),
                found if slot.hash == short => {
                    let same = spans.get(slot.span as usize).and_then(&value) == Some(href);
                    if same {
                        return match found {
                            1 => Found::Invalid,
                            n => Found::Resolved(n as usize - 2),
                        };
                    }
                }
                _ => {}
            }
            at = at.wrapping_add(1);
        }
        Found::New(None)
    }

    /// Remembers the `href` of span `span`, which [`Self::find`] gave `slot` for: resolved
    /// to the batch's link `link`, or not resolved.
    fn remember(&mut self, slot: Option<(usize, u32)>, span: usize, link: Option<usize>) {
        let Some((slot, hash)) = slot else { return };
        let found = match link {
            None => Some(1),
            Some(index) => u32::try_from(index).ok().and_then(|i| i.checked_add(2)),
        };
        if let (Some(entry), Ok(span), Some(found)) =
            (self.slots.get_mut(slot), u32::try_from(span), found)
        {
            *entry = RepeatSlot { hash, span, found };
        }
    }

    /// Bytes the table holds.
    fn capacity_bytes(&self) -> usize {
        self.slots
            .capacity()
            .saturating_mul(std::mem::size_of::<RepeatSlot>())
    }
}

/// What the scanner's tags add up to while the document is scanned.
struct Collector<'a> {
    /// The scanned document: attribute values are sliced from it.
    input: &'a [u8],
    encoding: &'static Encoding,
    follow_nofollow: bool,
    /// Decoded link values (those that are not their own decoding), back to back: one
    /// allocation for the whole page (kept across pages, see [`Buffers`]).
    arena: String,
    /// The link values, one per link, in document order.
    spans: Vec<Span>,
    /// The link values' bytes.
    values_len: usize,
    nofollow_skipped: usize,
    meta_nofollow: bool,
    /// Decoded value of the first `<base href>`.
    base: Option<String>,
    /// Decoded `href` of the first `<link rel=canonical>`.
    canonical: Option<String>,
    /// Links buffered at most (0 = all).
    max_links: usize,
    /// Links seen past `max_links`.
    over_limit: usize,
    /// [`ExtractOptions::drop_fragments`].
    drop_fragments: bool,
}

impl TagSink for Collector<'_> {
    fn tag(&mut self, tag: LinkTag, attrs: &Attrs) {
        let (input, encoding) = (self.input, self.encoding);
        let attr = |range: &Option<Range<usize>>| {
            range
                .clone()
                .map(|range| text(input.get(range).unwrap_or_default(), encoding))
        };
        match tag {
            LinkTag::A | LinkTag::Area => {
                let Some(href) = attrs.href.clone() else {
                    return;
                };
                if !self.follow_nofollow
                    && attr(&attrs.rel).is_some_and(|rel| rel_has_nofollow(&rel))
                {
                    self.nofollow_skipped += 1;
                } else {
                    self.push_link(href);
                }
            }
            LinkTag::Iframe | LinkTag::Frame => {
                if let Some(src) = attrs.src.clone() {
                    self.push_link(src);
                }
            }
            LinkTag::Base => {
                if self.base.is_none() {
                    if let Some(href) = attr(&attrs.href) {
                        let mut decoded = String::new();
                        push_decoded(&mut decoded, &href);
                        self.base = Some(decoded);
                    }
                }
            }
            LinkTag::Meta => {
                if let (Some(name), Some(content)) = (attr(&attrs.name), attr(&attrs.content)) {
                    if meta_robots_nofollow(&name, &content) {
                        self.meta_nofollow = true;
                    }
                }
            }
            LinkTag::Link => {
                if self.canonical.is_none()
                    && attr(&attrs.rel).is_some_and(|rel| {
                        decode(&rel)
                            .split_ascii_whitespace()
                            .any(|t| t.eq_ignore_ascii_case("canonical"))
                    })
                {
                    if let Some(href) = attr(&attrs.href) {
                        let mut decoded = String::new();
                        push_decoded(&mut decoded, &href);
                        self.canonical = Some(decoded);
                    }
                }
            }
        }
    }
}

impl Collector<'_> {
    /// Buffers one link value, entity-decoded, for resolution at the end, unless
    /// `max_links` are buffered already.
    fn push_link(&mut self, range: Range<usize>) {
        if self.max_links > 0 && self.spans.len() >= self.max_links {
            self.over_limit += 1;
            return;
        }
        let (raw, range) = match self.input.get(range.clone()) {
            Some(raw) => (raw, range),
            None => (&[][..], 0..0),
        };
        let (class, hash) = value_class(raw);
        let span = match class & NOT_PLAIN_ASCII {
            // Nearly every link: the value is its own decoding (checked in one pass, instead
            // of validating UTF-8 and then searching for `&` and NUL), so it stays where it
            // is, in the document (copying it into the arena was a tenth of buffering a
            // link), and the same pass said whether resolving may skip its own check of the
            // bytes. The scanned bytes are in an ASCII-compatible encoding or transcoded to
            // UTF-8, so ASCII reads as ASCII.
            0 => {
                // Without fragments, cut before the `#` the class's pass found (as
                // `Self::without_fragment` does for a decoded value).
                let (len, fragment_left) = if self.drop_fragments {
                    fragment_cut(raw, hash)
                } else {
                    (raw.len(), false)
                };
                Span {
                    range: range.start..range.start + len.min(raw.len()),
                    decoded: false,
                    url_plain: class & NOT_PLAIN_URL == 0,
                    fragment_left,
                }
            }
            _ => {
                let start = self.arena.len();
                push_decoded(&mut self.arena, &text(raw, self.encoding));
                let span = Span {
                    range: start..self.arena.len(),
                    decoded: true,
                    url_plain: false,
                    fragment_left: false,
                };
                if self.drop_fragments {
                    self.without_fragment(span)
                } else {
                    span
                }
            }
        };
        self.values_len = self.values_len.saturating_add(span.range.len());
        self.spans.push(span);
    }

    /// `span` cut before its fragment, when that resolves to its link without the fragment
    /// ([`crate::normalize::before_fragment`]); once per value, when it is buffered, rather
    /// than in each lookup of the page's repeats.
    fn without_fragment(&self, mut span: Span) -> Span {
        if let Some(value) = self.value(&span) {
            let (cut, fragment_left) = before_fragment(value);
            // `cut` is a prefix of `value`.
            span.range.end = span.range.start + cut.len().min(value.len());
            span.fragment_left = fragment_left;
        }
        span
    }

    /// The text of a link value.
    fn value(&self, span: &Span) -> Option<&str> {
        if span.decoded {
            self.arena.get(span.range.clone())
        } else {
            let bytes = self.input.get(span.range.clone())?;
            debug_assert!(bytes.is_ascii(), "{bytes:?}");
            // Not validated again: `from_utf8` here, once per link and once per repeat
            // table comparison, cost more than the copy into the arena it replaces.
            // SAFETY: a span that is not `decoded` is one `push_link` found ASCII
            // (`value_class`), of `input`, which does not change while it is scanned and
            // resolved; ASCII is valid UTF-8.
            Some(unsafe { std::str::from_utf8_unchecked(bytes) })
        }
    }

    /// Resolves the buffered links. With `max_len` set, no URL much longer than it is ever
    /// built: an `href` longer than `max_len` is refused as it is, and a `<base>` longer
    /// than `max_len` only serves links whose result does not start with it (absolute,
    /// scheme-relative and root-relative ones; see [`relative_to_long_base`]).
    fn resolve(
        &self,
        page_url: &Url,
        body_len: usize,
        max_len: usize,
        (batch, repeats): (&mut LinkBatch, &mut Repeats),
    ) -> Extracted {
        let query_encoding = self.encoding.output_encoding();
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
        // A UTF-8 page's links are resolved from the base's parts, taken apart once
        // (`crate::normalize::PreparedBase`); other encodings need the parser's query
        // encoding.
        let prepared = (query_encoding == UTF_8).then(|| PreparedBase::new(effective));
        // The most text the fast path writes for a link is the base, the `href` and a few
        // bytes (a scheme, a `/`): room for that at once, up to a few times the page (a
        // hostile page's links, or its long `<base>`, must not reserve gigabytes; past
        // that the text grows as it is written).
        let longest = if long_base {
            0
        } else {
            effective.as_str().len()
        } + 8;
        batch.reserve(
            self.spans.len(),
            self.spans
                .len()
                .saturating_mul(longest)
                .saturating_add(self.values_len)
                .min(body_len.saturating_mul(4).saturating_add(64 << 10)),
        );
        repeats.clear_for(self.spans.len());
        let mut used = 0usize;
        let mut out = Extracted {
            links: Vec::new(),
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
        for (index, span) in self.spans.iter().enumerate() {
            let Some(href) = self.value(span) else {
                out.invalid += 1;
                continue;
            };
            if too_long(href) || (long_base && relative_to_long_base(href)) {
                out.too_long += 1;
                continue;
            }
            let resolved = match &prepared {
                Some(prepared) => {
                    // Without fragments, values were cut before their `#` (`push_link`): the
                    // links to one target's parts are repeats of the first, and so is every
                    // fragment-only `href` (a fifth of a documentation page's): the page.
                    let found = if !self.drop_fragments && href.starts_with('#') {
                        // A fragment-only `href` (a third of a documentation page's distinct
                        // ones) is written as the base's text and itself, about what looking
                        // it up costs: it skips the table (measured: a doc corpus page 2%
                        // faster than with it).
                        Found::New(None)
                    } else {
                        repeats.find(href, &self.spans, |span| self.value(span))
                    };
                    match found {
                        Found::Resolved(first) => match batch.repeat(first) {
                            Some(len) => Some(len),
                            None => prepared.join_into(href, batch).ok(),
                        },
                        Found::Invalid => None,
                        Found::New(slot) => {
                            let at = batch.len();
                            let resolved = if span.url_plain {
                                prepared.join_plain_into(href, batch)
                            } else {
                                prepared.join_into(href, batch)
                            }
                            .ok();
                            repeats.remember(slot, index, resolved.map(|_| at));
                            resolved
                        }
                    }
                }
                None => resolve(effective, href, query_encoding).map(|url| {
                    let len = url.as_str().len();
                    batch.push(Link::from(url));
                    len
                }),
            };
            if span.fragment_left && resolved.is_some() {
                // An `href` resolved whole, or as `#`, where the cut would not give its link
                // (`crate::normalize::fragment_cut`): its fragment goes now.
                batch.drop_last_fragment();
            }
            match resolved {
                Some(len) => {
                    used = used.saturating_add(len + std::mem::size_of::<Link>());
                    if budget.is_some_and(|budget| used > budget) {
                        batch.pop();
                        out.over_limit += self.spans.len() - index;
                        break;
                    }
                }
                None => out.invalid += 1,
            }
        }
        out.links.reserve_exact(batch.len());
        batch.finish_into(&mut out.links);
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
    if !raw.contains('\0') {
        // The common cases, straight into `out`: no reference at all, or only `&amp;` (a
        // query's separators) and numeric references, which htmlize would decode into a
        // string of its own.
        if !raw.contains('&') {
            out.push_str(raw);
            return;
        }
        let start = out.len();
        if push_simple_references(out, raw) {
            return;
        }
        out.truncate(start);
    }
    let decoded = htmlize::unescape_attribute(raw);
    if decoded.contains('\0') {
        out.push_str(&decoded.replace('\0', "\u{FFFD}"));
    } else {
        out.push_str(&decoded);
    }
}

/// Appends `raw` with its character references decoded, when each is `&amp;` or a numeric
/// reference (`&#104;`, `&#x2F;`, the `;` optional) of at most six digits whose character
/// the tokenizer emits as it is: U+0001 to U+007F, and U+00A0 up except surrogates. Those are
/// decoded the same in any context, with no table; anything else (a named reference, a
/// bare `&`, a reference the tokenizer replaces, such as `&#0;` or `&#x80;`) returns
/// `false`, with part of `raw` appended, and is left to htmlize.
fn push_simple_references(out: &mut String, raw: &str) -> bool {
    let mut rest = raw;
    while let Some(amp) = memchr::memchr(b'&', rest.as_bytes()) {
        let (Some(before), Some(after)) = (rest.get(..amp), rest.get(amp + 1..)) else {
            return false;
        };
        out.push_str(before);
        if let Some(tail) = after.strip_prefix("amp;") {
            out.push('&');
            rest = tail;
            continue;
        }
        let Some(number) = after.strip_prefix('#') else {
            return false;
        };
        let (radix, digits) = match number.strip_prefix(['x', 'X']) {
            Some(hex) => (16, hex),
            None => (10, number),
        };
        let len = digits
            .bytes()
            .take_while(|b| b.is_ascii_digit() || (radix == 16 && b.is_ascii_hexdigit()))
            .count();
        if len == 0 || len > 6 {
            return false;
        }
        let character = digits
            .get(..len)
            .and_then(|digits| u32::from_str_radix(digits, radix).ok())
            .filter(|&code| matches!(code, 0x01..=0x7f | 0xa0..=0x10_ffff))
            .and_then(char::from_u32);
        let (Some(character), Some(tail)) = (character, digits.get(len..)) else {
            return false;
        };
        out.push(character);
        rest = tail.strip_prefix(';').unwrap_or(tail);
    }
    out.push_str(rest);
    true
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

/// What the bytes of a link value say about it, in [`BYTE_CLASS`] bits: without
/// [`NOT_PLAIN_ASCII`] it is ASCII without `&` or NUL, so no character reference or NUL
/// needs decoding and it reads the same in every ASCII-compatible encoding; then, without
/// [`NOT_PLAIN_URL`], every byte is one the URL parser keeps as it is
/// ([`crate::normalize::is_plain_url_byte`]), which resolution would check again. (With
/// [`NOT_PLAIN_ASCII`], the other bit may be missing.) And, in the same pass, where its
/// first `#` is (for a value without [`NOT_PLAIN_ASCII`]: a link resolved without its
/// fragment is cut there, see [`crate::normalize::fragment_cut`]; a search of its own was
/// 7% of the doc corpus's extraction).
fn value_class(raw: &[u8]) -> (u8, Option<usize>) {
    #[cfg(target_arch = "x86_64")]
    return sse2_value_class(raw);
    #[cfg(not(target_arch = "x86_64"))]
    return table_value_class(raw);
}

/// [`value_class`] by table lookups: what other CPUs run, and what the SSE2 code is tested
/// against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn table_value_class(raw: &[u8]) -> (u8, Option<usize>) {
    // Eight bytes per step: a value is ~35 bytes, and the table lookups are independent.
    let class = |bytes: &[u8]| {
        bytes
            .iter()
            .fold(0u8, |class, &b| class | BYTE_CLASS[usize::from(b)])
    };
    let hash = || raw.iter().position(|&b| b == b'#');
    let mut chunks = raw.chunks_exact(8);
    let mut seen = 0u8;
    for chunk in &mut chunks {
        seen |= class(chunk);
        if seen & NOT_PLAIN_ASCII != 0 {
            return (seen, hash());
        }
    }
    (seen | class(chunks.remainder()), hash())
}

/// [`value_class`] with SSE2 (part of x86-64 itself), 16 bytes per step: a handful of
/// compares instead of sixteen table lookups (the lookups were most of buffering a link on
/// the doc corpus). The bytes [`crate::normalize::is_plain_url_byte`] refuses are the
/// controls, the space and every byte from 0x80 (one signed compare), `"`, `'`, `<`, `>`,
/// `` ` ``, DEL, and the runs `[\]^` and `{|}`.
#[cfg(target_arch = "x86_64")]
// The intrinsics below are safe functions from Rust 1.87 on (SSE2 is always enabled on
// x86-64), unsafe before: the blocks are needed for the oldest Rust this builds with.
#[allow(unused_unsafe)]
fn sse2_value_class(raw: &[u8]) -> (u8, Option<usize>) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x, _mm_sub_epi8,
    };
    // SAFETY (every block below): SSE2 is part of x86-64; a load reads the 16 bytes of a
    // 16-byte array (an unaligned load is allowed).
    let load = |bytes: &[u8; 16]| unsafe { _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>()) };
    // SAFETY: SSE2 is part of x86-64.
    let hashes =
        |v: __m128i| unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'#' as i8))) };
    let classify = |v: __m128i| -> (i32, i32) {
        unsafe {
            let is = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            // `v - first <= span`, unsigned: `v` is in `first..=first + span`.
            let within = |first: u8, span: u8| {
                let x = _mm_sub_epi8(v, _mm_set1_epi8(first as i8));
                _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(span as i8)), x)
            };
            let not_ascii = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(v, is(b'&')), is(0)));
            // Signed: the controls and the space, and every byte from 0x80.
            let low_or_high = _mm_cmplt_epi8(v, _mm_set1_epi8(0x21));
            let quotes = _mm_or_si128(_mm_or_si128(is(b'"'), is(b'\'')), is(b'`'));
            let angles = _mm_or_si128(_mm_or_si128(is(b'<'), is(b'>')), is(0x7f));
            let runs = _mm_or_si128(within(b'[', 3), within(b'{', 2));
            let not_url = _mm_movemask_epi8(_mm_or_si128(
                _mm_or_si128(low_or_high, quotes),
                _mm_or_si128(angles, runs),
            ));
            (not_ascii, not_url)
        }
    };
    let (mut not_ascii, mut not_url) = (0, 0);
    let mut hash = None;
    let mut chunks = raw.chunks_exact(16);
    for (at, chunk) in (&mut chunks).enumerate() {
        let Ok(block) = <&[u8; 16]>::try_from(chunk) else {
            continue;
        };
        let v = load(block);
        let (ascii, url) = classify(v);
        not_ascii |= ascii;
        not_url |= url;
        if hash.is_none() {
            let found = hashes(v);
            if found != 0 {
                hash = Some(at * 16 + found.trailing_zeros() as usize);
            }
        }
    }
    // The rest: the last 16 bytes again when there are that many (classes are a union, so
    // the overlap does not matter), else the first and last 8 (overlapping) as two
    // integers; shorter ones by table. Not a copy into a padded block: read back at once
    // as a vector, it waited for its stores (a failed store-to-load forwarding, a third of
    // the time here).
    let len = raw.len();
    let word = |from: usize| {
        raw.get(from..from + 8)
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map(i64::from_le_bytes)
    };
    // Where the tail's lanes are in `raw`: the last 16 bytes, or the first 8 then the last 8.
    // A `#` in what the tail shares with the blocks before was found there first.
    let tail = if chunks.remainder().is_empty() {
        None
    } else if len >= 16 {
        raw.get(len - 16..)
            .and_then(|tail| <&[u8; 16]>::try_from(tail).ok())
            .map(|tail| (load(tail), len - 16, len - 16 + 8))
    } else {
        match (word(0), word(len.saturating_sub(8))) {
            // SAFETY: SSE2 is part of x86-64.
            (Some(first), Some(last)) => Some((unsafe { _mm_set_epi64x(last, first) }, 0, len - 8)),
            _ => return table_value_class(raw),
        }
    };
    if let Some((v, low, high)) = tail {
        let (ascii, url) = classify(v);
        not_ascii |= ascii;
        not_url |= url;
        let found = hashes(v);
        if hash.is_none() && found != 0 {
            let lane = found.trailing_zeros() as usize;
            hash = Some(if lane < 8 {
                low + lane
            } else {
                high + lane - 8
            });
        }
    }
    let class = (if not_ascii != 0 { NOT_PLAIN_ASCII } else { 0 })
        | (if not_url != 0 { NOT_PLAIN_URL } else { 0 });
    (class, hash)
}

/// [`BYTE_CLASS`]: the byte keeps a value from being its own decoding (non-ASCII, `&` or
/// NUL).
const NOT_PLAIN_ASCII: u8 = 1;
/// [`BYTE_CLASS`]: the byte is not one the URL parser keeps as it is.
const NOT_PLAIN_URL: u8 = 2;

/// What byte `b` says about a value ([`value_class`]): [`NOT_PLAIN_ASCII`] and
/// [`NOT_PLAIN_URL`] bits.
static BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if b >= 0x80 || b == b'&' as usize || b == 0 {
            table[b] |= NOT_PLAIN_ASCII;
        }
        if !crate::normalize::is_plain_url_byte(b as u8) {
            table[b] |= NOT_PLAIN_URL;
        }
        b += 1;
    }
    table
};

/// Raw attribute bytes as text, in the document's encoding.
fn text<'a>(raw: &'a [u8], encoding: &'static Encoding) -> Cow<'a, str> {
    if encoding == UTF_8 || !is_ascii_compatible(encoding) {
        // UTF-8, or transcoded to it. `from_utf8` first: its validation is several times
        // faster than the chunk by chunk walk of `from_utf8_lossy`, and gives the same text
        // for the valid UTF-8 that nearly every attribute is.
        match std::str::from_utf8(raw) {
            Ok(valid) => Cow::Borrowed(valid),
            Err(_) => String::from_utf8_lossy(raw),
        }
    } else {
        encoding.decode_without_bom_handling(raw).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(html: &str) -> Vec<String> {
        let page = Url::parse("http://example.test/dir/page.html").ok();
        let Some(page) = page else { return Vec::new() };
        extract_links(html.as_bytes(), &page, None, &ExtractOptions::default())
            .links
            .iter()
            .map(|u| u.to_string())
            .collect()
    }

    #[test]
    fn extract_basic_tags_and_base() {
        assert_eq!(
            links(r#"<a href="a">x</a><AREA HREF='/b'><iframe src=c></iframe><base href="/x/">"#),
            [
                "http://example.test/x/a",
                "http://example.test/b",
                "http://example.test/x/c"
            ]
        );
    }

    #[test]
    fn extract_entities_and_nofollow() {
        assert_eq!(
            links(r#"<a href="?a=1&amp;b=2&#x2F;">x</a><a rel="NoFollow noopener" href="n">"#),
            ["http://example.test/dir/page.html?a=1&b=2/"]
        );
    }

    fn limited(html: &str, max_links: usize, max_url_length: usize) -> Extracted {
        let page = Url::parse("http://example.test/dir/page.html").unwrap();
        let opts = ExtractOptions {
            max_links,
            max_url_length,
            ..ExtractOptions::default()
        };
        extract_links(html.as_bytes(), &page, None, &opts)
    }

    #[test]
    fn links_past_the_page_limit_are_counted_not_kept() {
        let html: String = (0..10).map(|i| format!("<a href=/p{i}>x</a>")).collect();
        let out = limited(&html, 3, 0);
        let kept: Vec<&str> = out.links.iter().map(Link::path).collect();
        assert_eq!(kept, ["/p0", "/p1", "/p2"]);
        assert_eq!(out.over_limit, 7);
        assert_eq!(limited(&html, 0, 0).links.len(), 10);
    }

    #[test]
    fn an_over_long_href_or_base_builds_no_long_url() {
        let long = "a".repeat(5000);
        let html = format!(
            "<base href='/{long}/'><a href=x>1</a><a href='?q'>2</a><a href=''>3</a>\
             <a href=/root>4</a><a href=//other.test/y>5</a><a href=https://abs.test/z>6</a>\
             <a href='/{long}'>7</a>"
        );
        let out = limited(&html, 6000, 2048);
        let kept: Vec<&str> = out.links.iter().map(Link::as_str).collect();
        assert_eq!(
            kept,
            [
                "http://example.test/root",
                "http://other.test/y",
                "https://abs.test/z"
            ]
        );
        assert_eq!(
            out.too_long, 4,
            "three relative to the long base, one long href"
        );
        // Without a length limit the same page resolves everything, as the spec says.
        assert_eq!(limited(&html, 0, 0).links.len(), 7);
    }

    #[test]
    fn resolved_links_stay_within_the_page_budget() {
        // 200,000 one-byte relative links against a 2,000-byte page URL would resolve to
        // 400 MB; the budget stops at 16 bytes per body byte + 1 MiB.
        let dir = "d".repeat(1990);
        let page = Url::parse(&format!("http://example.test/{dir}/p")).unwrap();
        let html = "<a href=x>".repeat(200_000);
        let opts = ExtractOptions {
            max_links: 1_000_000,
            max_url_length: 4096,
            ..ExtractOptions::default()
        };
        let out = extract_links(html.as_bytes(), &page, None, &opts);
        let bytes: usize = out
            .links
            .iter()
            .map(|u| u.as_str().len() + std::mem::size_of::<Link>())
            .sum();
        assert!(
            bytes <= html.len() * BUDGET_PER_BODY_BYTE + BUDGET_BASE,
            "{bytes}"
        );
        assert_eq!(out.links.len() + out.over_limit, 200_000);
        assert!(out.over_limit > 0);
        // Every link but the first repeats it (one text, shared): taking back the one over
        // the budget must not take the first's text.
        let want = page.join("x").unwrap();
        assert!(out.links.iter().all(|link| link.as_str() == want.as_str()));
    }

    #[test]
    fn found_counts_every_link_taken_or_not() {
        let mut html: String = (0..10).map(|i| format!("<a href=/p{i}>x</a>")).collect();
        html.push_str("<a rel=nofollow href=/n>n</a><a href='http://[bad'>i</a>");
        html.push_str(&format!("<a href='/{}'>long</a>", "l".repeat(100)));
        let out = limited(&html, 3, 50);
        assert_eq!(
            (out.links.len(), out.over_limit, out.nofollow_skipped),
            (3, 9, 1)
        );
        assert_eq!(out.found(), 13);
    }

    #[test]
    fn a_page_of_100000_links_is_taken_whole_under_the_default_cap() {
        let html: String = (0..100_000)
            .map(|i| format!("<a href=/api/item{i}.html>x</a>"))
            .collect();
        let opts = ExtractOptions {
            max_links: crate::config::Config::default().crawl.max_links_per_page,
            max_url_length: 8192,
            ..ExtractOptions::default()
        };
        let page = Url::parse("http://example.test/all.html").unwrap();
        let out = extract_links(html.as_bytes(), &page, None, &opts);
        assert_eq!((out.links.len(), out.over_limit), (100_000, 0));
    }

    #[test]
    fn the_digest_is_the_pages_bytes_without_digits_however_they_arrive() {
        let page = Url::parse("http://example.test/cal/2026/11").unwrap();
        let opts = ExtractOptions {
            digest: true,
            ..ExtractOptions::default()
        };
        let month = |y: u32, m: u32| {
            format!(
                "<!doctype html><meta charset=utf-8><h1>{y}-{m}</h1><a href=/cal/{y}/{}>prev</a>\
                 <a href=/cal/{y}/{}>next</a>{}",
                m - 1,
                m + 1,
                "<td>1</td>".repeat(300)
            )
        };
        let nov = month(2026, 11);
        let whole = extract_links(nov.as_bytes(), &page, None, &opts).digest;
        let digitless: Vec<u8> = nov.bytes().filter(|b| !b.is_ascii_digit()).collect();
        assert_eq!(whole, Some(xxhash_rust::xxh3::xxh3_64(&digitless)));
        let mut streaming = LinkExtractor::new(page.clone(), Some("utf-8"), &opts);
        for chunk in nov.as_bytes().chunks(7) {
            streaming.write(chunk).unwrap();
        }
        assert_eq!(streaming.finish().digest, whole);
        let feb = month(1999, 2);
        assert_eq!(
            extract_links(feb.as_bytes(), &page, None, &opts).digest,
            whole
        );
        let other = nov.replace("next", "later");
        assert_ne!(
            extract_links(other.as_bytes(), &page, None, &opts).digest,
            whole
        );
        assert_eq!(
            extract_links(nov.as_bytes(), &page, None, &ExtractOptions::default()).digest,
            None
        );
    }

    #[test]
    fn extract_meta_charset_decides_paths_and_queries() {
        let page = Url::parse("http://example.test/").unwrap();
        // "検索" in Shift_JIS, declared only by <meta>, after 1,000 bytes of padding, fed in
        // 5-byte chunks so the prescan's hold-back is crossed mid-tag.
        let mut html = b"<!doctype html><!--".to_vec();
        html.extend(std::iter::repeat_n(b'-', 900));
        html.extend_from_slice(
            b"--><meta charset=Shift_JIS><a href=\"/\x8c\x9f?q=\x8c\x9f\x8d\xf5\">",
        );
        let mut streaming = LinkExtractor::new(page.clone(), None, &ExtractOptions::default());
        for chunk in html.chunks(5) {
            streaming.write(chunk).unwrap();
        }
        let streamed: Vec<String> = streaming
            .finish()
            .links
            .iter()
            .map(Link::to_string)
            .collect();
        // The path is UTF-8 percent-encoded (the URL standard always does so); the query in
        // the page's encoding.
        assert_eq!(streamed, ["http://example.test/%E6%A4%9C?q=%8C%9F%8D%F5"]);
        let whole = extract_links(&html, &page, None, &ExtractOptions::default());
        assert_eq!(whole.links.len(), 1);
        assert_eq!(whole.links[0].as_str(), streamed[0]);
        // A Content-Type label wins over the <meta>: windows-1252 reads the bytes differently.
        let labelled = extract_links(
            &html,
            &page,
            Some("windows-1252"),
            &ExtractOptions::default(),
        );
        assert_eq!(
            labelled.links[0].as_str(),
            "http://example.test/%C5%92%C5%B8?q=%8C%9F%8D%F5"
        );
    }

    #[test]
    fn reused_buffers_change_nothing() {
        // One thread extracts page after page with the buffers of the previous one: a long
        // page, then short ones, then one whose buffers are too large to keep.
        let page = Url::parse("http://example.test/dir/page.html").unwrap();
        let opts = ExtractOptions::default();
        let long: String = (0..500)
            .map(|i| format!("<a href='/l{i}?a=1&amp;b=2'>x</a>"))
            .collect();
        let huge = format!(
            "<base href='/b/'>{}<a href=x>",
            "<p>filler</p>".repeat(SPARE_MAX_BYTES / 8)
        );
        let pages = [
            long.as_str(),
            "<a href=one>1</a>",
            "<base href='/x/'><a href=two>2</a><iframe src=three>",
            huge.as_str(),
            "<a href=/four>4</a>",
            "",
            long.as_str(),
        ];
        // Each expected answer from fresh buffers (the spare ones thrown away first).
        let expected: Vec<Vec<String>> = pages
            .iter()
            .map(|html| {
                drop(Buffers::take_spare());
                links(html)
            })
            .collect();
        for _ in 0..2 {
            for (html, want) in pages.iter().zip(&expected) {
                let got: Vec<String> = extract_links(html.as_bytes(), &page, None, &opts)
                    .links
                    .iter()
                    .map(Link::to_string)
                    .collect();
                assert_eq!(&got, want);
            }
        }
        assert_eq!(expected[0].len(), 500);
        assert_eq!(expected[3], ["http://example.test/b/x"]);
        // What a thread keeps after a page is empty and no larger than the limit.
        let spare = Buffers::take_spare();
        assert!(spare.input.is_empty() && spare.arena.is_empty() && spare.spans.is_empty());
        assert!(spare.input.capacity() <= SPARE_MAX_BYTES);
    }

    #[test]
    fn plain_links_resolve_as_url_join_does() {
        let bases = [
            "http://example.test/dir/page.html",
            "https://user:pw@example.test:8443/a/b/?q=1#f",
            "http://127.0.0.1/",
            "https://example.test",
            "http://example.test/dir/?x",
            "http://xn--bcher-kva.test/a;b/c",
            "http://example.test/a/b/c/d/e.html",
            "http://example.test/a//b/",
        ];
        let hrefs = [
            "a",
            "a/b.html",
            "/root",
            "/root?x=1&y=2",
            "?q",
            "?",
            "#",
            "#frag",
            "x?y#z",
            "a:b",
            "a/b:c",
            "//other.test/p",
            "../up",
            "./here",
            "a/./b",
            "a/..",
            ".",
            "..",
            ".hidden",
            "a..b",
            "http://abs.test/x",
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
            "%41",
            "a b",
            "\\x",
        ];
        let mut fast = 0;
        for base in bases {
            let base = Url::parse(base).unwrap();
            let prepared = PreparedBase::new(&base);
            for href in hrefs {
                let joined = base.join(href).ok();
                if prepared.join_fast(href).is_some() {
                    fast += 1;
                }
                assert_eq!(prepared.join(href).ok(), joined, "{base} + {href:?}");
                assert_eq!(resolve(&base, href, UTF_8), joined, "{base} + {href:?}");
            }
        }
        assert!(fast > 150, "the fast path took only {fast} of them");
    }

    #[test]
    fn repeated_hrefs_resolve_as_each_would_alone() {
        let page = Url::parse("http://example.test/dir/page.html").unwrap();
        let hrefs = [
            "a.html",
            "#f",
            "a.html",
            "http://[bad",
            "mailto:x@y.test",
            "../up?q=1&amp;r=2",
            "#f",
            "http://[bad",
            "mailto:x@y.test",
            "../up?q=1&amp;r=2",
            "../up?q=1&r=2",
            "a.html",
            " a.html",
            "a.html#f",
            "",
            "",
            "#",
            "#",
            "#f&amp;g",
            "#f&amp;g",
            "#f g",
            "#f g",
            "#f",
        ];
        let html: String = hrefs
            .iter()
            .map(|href| format!("<a href=\"{href}\">x</a>"))
            .collect();
        let out = extract_links(html.as_bytes(), &page, None, &ExtractOptions::default());
        let want: Vec<String> = hrefs
            .iter()
            .filter_map(|href| page.join(&href.replace("&amp;", "&")).ok())
            .map(String::from)
            .collect();
        let got: Vec<String> = out.links.iter().map(Link::to_string).collect();
        assert_eq!(got, want);
        assert_eq!(out.invalid, 2);
        for (link, want) in out.links.iter().zip(&want) {
            assert!(
                crate::normalize::reads_as(link, &Url::parse(want).unwrap()),
                "{want}"
            );
        }
    }

    #[test]
    fn a_full_repeat_table_resolves_the_rest_as_they_come() {
        // More distinct hrefs than the table holds, each twice.
        let n = REPEAT_SLOTS_MAX;
        let page = Url::parse("http://example.test/").unwrap();
        let html: String = (0..2 * n)
            .map(|i| format!("<a href=p{}>x</a>", i % n))
            .collect();
        let out = extract_links(html.as_bytes(), &page, None, &ExtractOptions::default());
        assert_eq!(out.links.len(), 2 * n);
        for (i, link) in out.links.iter().enumerate() {
            assert_eq!(link.path(), format!("/p{}", i % n));
        }
    }

    #[test]
    fn decoding_into_the_arena_is_htmlizes_decoding() {
        for raw in [
            "",
            "plain",
            "a&amp;b",
            "&amp;",
            "&amp;&amp;x&amp;",
            "&amp",
            "&ampx",
            "&amp;amp;",
            "a&b",
            "&amp;&lt;",
            "&AMP;",
            "x\0y&amp;",
            "&#38;",
            "?a=1&amp;b=2&c=3",
            "&#104;ttp:&#x2F;/h.test/p",
            "&#x2f",
            "&#X2F;x",
            "&#104",
            "&#104x",
            "&#x68g",
            "&#65;&#66",
            "&#;",
            "&#x;",
            "&#",
            "&#x",
            "a&#",
            "&#0;",
            "&#1;",
            "&#9;&#10;&#12;&#13;",
            "&#127;",
            "&#128;",
            "&#x80;",
            "&#x81;",
            "&#x9F;",
            "&#159;",
            "&#160;",
            "&#xA0;",
            "&#xD800;",
            "&#xDFFF;",
            "&#xFFFE;",
            "&#x10FFFF;",
            "&#x110000;",
            "&#1114111;",
            "&#1114112;",
            "&#1234567;",
            "&#0000104;",
            "&#x00068;",
            "&#x1F600;",
            "&#104;&amp;&#x2F;&lt;",
            "&#104;&copy",
            "é&#233;",
        ] {
            let mut fast = String::from("prefix");
            push_decoded(&mut fast, raw);
            let reference = htmlize::unescape_attribute(raw).replace('\0', "\u{FFFD}");
            assert_eq!(fast, format!("prefix{reference}"), "{raw:?}");
        }
        // The references a page's links are written with are decoded without htmlize.
        for raw in [
            "&#104;ttp:&#x2F;/h.test/p",
            "/a?b=1&amp;c=&#x32;",
            "&#233;&#xA0;",
        ] {
            assert!(push_simple_references(&mut String::new(), raw), "{raw:?}");
        }
    }

    #[test]
    fn every_byte_is_classed_as_the_table_says_wherever_it_is() {
        for b in 0..=255u8 {
            for len in [1, 7, 15, 16, 17, 31, 32, 33, 40] {
                for at in [0, len / 2, len - 1] {
                    let mut raw = vec![b'a'; len];
                    raw[at] = b;
                    let want = BYTE_CLASS[usize::from(b)];
                    let hash = (b == b'#').then_some(at);
                    assert_eq!(value_class(&raw), (want, hash), "{b:#x} at {at} of {len}");
                    assert_eq!(
                        table_value_class(&raw),
                        (want, hash),
                        "{b:#x} at {at} of {len}"
                    );
                }
            }
        }
        assert_eq!(value_class(b""), (0, None));
    }

    proptest::proptest! {
        // The SSE2 classes are the table's, for values of any bytes and length (the table's
        // may stop early at a non-ASCII byte: then only that bit is compared).
        #[test]
        fn value_classes_are_the_tables(
            raw in proptest::collection::vec(proptest::prop_oneof![
                proptest::num::u8::ANY,
                proptest::sample::select(b"azAZ09-./?#&%:\"'<>[]^`{|}~ ".to_vec()),
            ], 0..80)
        ) {
            let (fast, table) = (value_class(&raw), table_value_class(&raw));
            proptest::prop_assert_eq!(fast.0 & NOT_PLAIN_ASCII, table.0 & NOT_PLAIN_ASCII);
            if table.0 & NOT_PLAIN_ASCII == 0 {
                proptest::prop_assert_eq!(fast, table);
                proptest::prop_assert_eq!(fast.1, raw.iter().position(|&b| b == b'#'));
            }
        }
    }

    #[test]
    fn absolute_is_a_scheme_and_a_colon() {
        assert!(is_absolute("http://a"));
        assert!(is_absolute(" mailto:x"));
        assert!(is_absolute("web+cal:x"));
        assert!(!is_absolute("/a:b"));
        assert!(!is_absolute("a/b:c"));
        assert!(!is_absolute(":x"));
        assert!(!is_absolute("1a:x"));
    }
}
