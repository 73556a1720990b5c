//! The reference link extractor, built on scraper (html5ever's spec tree builder), and the
//! differential comparison between it and the fast streaming extractor in `crawler::extract`.
//!
//! Shared by the `extract_*` modules of `tests/api/`, by `benches/extract.rs` and by the fuzz
//! target (all three `#[path]`-include it), so that the same comparison can run over any
//! corpus, the synthetic web's pages included.
//!
//! # One source tag, one link
//! The tree builder clones formatting elements (`<a>` is one) when markup is misnested:
//! `<a href=x><div></a>` or `<p><a href=x></p>more` leave a second `<a href=x>` in the DOM,
//! and scraper reports the link again. Those clones are an artefact of building a tree, not
//! links in the source. To count each source tag once, the tokens are tagged on their way from
//! html5ever's tokenizer to its tree builder: every start tag of a link element gets a
//! private attribute with a serial number; a clone copies its original's attributes, serial
//! included, so the reference keeps the first element of each serial. The extra attribute
//! changes nothing else the tree builder does: only the "Noah's Ark" clause compares
//! attributes, and it only decides which clones are made, never whether a source element is.
//!
//! scraper's `Html::select` walks its node arena in creation order, which is source order for
//! everything that is not a clone, so the reference order is document order too (foster
//! parenting, which moves nodes in the tree, does not change it).
//!
//! # Known differences
//! [`differential`] returns `Ok(Outcome::KnownDifference)` instead of `Err` only for the
//! differences documented in `crawler::extract` (malformed `<svg>`/`<math>` foreign content,
//! `<frameset>` documents), and only if the mismatch disappears when those tags are renamed
//! away (`<svg` → `<xvg`): the rest of the page must still agree. Anything else is `Err`.

#![allow(dead_code)] // each test binary uses a different part

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use crawler::extract::{ExtractOptions, Extracted};
use crawler::normalize::Link;
use encoding_rs::{Encoding, UTF_8};
use html5ever::interface::TreeSink;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{ns, Attribute, LocalName, QualName, TokenizerResult};
use scraper::{Html, HtmlTreeSink, Selector};
use url::Url;

/// The private attribute carrying a start tag's serial number.
const SERIAL: &str = "data-crawler-extract-serial";

/// Passes tokens to the tree builder, numbering the start tags of link elements.
struct SerialTagger<S> {
    inner: S,
    next: Cell<u64>,
}

impl<S: TokenSink> TokenSink for SerialTagger<S> {
    type Handle = S::Handle;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<Self::Handle> {
        let token = match token {
            Token::TagToken(mut tag) if is_link_start_tag(&tag) => {
                let serial = self.next.get();
                self.next.set(serial + 1);
                tag.attrs.push(Attribute {
                    name: QualName::new(None, ns!(), LocalName::from(SERIAL)),
                    value: StrTendril::from(serial.to_string()),
                });
                Token::TagToken(tag)
            }
            other => other,
        };
        self.inner.process_token(token, line_number)
    }

    fn end(&self) {
        self.inner.end()
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.inner
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

fn is_link_start_tag(tag: &Tag) -> bool {
    tag.kind == TagKind::StartTag && matches!(&*tag.name, "a" | "area" | "frame" | "iframe")
}

/// Parses a document as scraper does (`Html::parse_document`: html5ever defaults, scripting
/// enabled), with link start tags numbered.
fn parse(text: &str) -> Html {
    let tree_builder = TreeBuilder::new(
        HtmlTreeSink::new(Html::new_document()),
        TreeBuilderOpts::default(),
    );
    let tagger = SerialTagger {
        inner: tree_builder,
        next: Cell::new(0),
    };
    let tokenizer = Tokenizer::new(tagger, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(text));
    // A `Script` result only pauses the tokenizer (nothing runs scripts here): keep feeding.
    while !matches!(tokenizer.feed(&input), TokenizerResult::Done) {}
    tokenizer.end();
    tokenizer.sink.inner.sink.finish()
}

/// Decodes the body as the fast extractor does: BOM, else the label, else a `<meta>`
/// declaration, else UTF-8. The decision is `crawler::charset::sniff`'s (tested on its own
/// in `src/charset.rs`): this reference checks link extraction, not the sniffing.
pub fn decode_body<'a>(html: &'a [u8], encoding: Option<&str>) -> (String, &'static Encoding) {
    let sniffed = crawler::charset::sniff(html, crawler::charset::transport_encoding(encoding));
    let (enc, bom) = (sniffed.encoding, sniffed.bom_len);
    let body: &'a [u8] = html.get(bom..).unwrap_or_default();
    (enc.decode_without_bom_handling(body).0.into_owned(), enc)
}

fn resolve(base: &Url, href: &str, enc: &'static Encoding) -> Option<Url> {
    let enc = enc.output_encoding();
    if enc == UTF_8 {
        return base.join(href).ok();
    }
    let encode = encoder(enc);
    Url::options()
        .base_url(Some(base))
        .encoding_override(Some(&encode))
        .parse(href)
        .ok()
}

fn encoder(enc: &'static Encoding) -> impl for<'a> Fn(&'a str) -> std::borrow::Cow<'a, [u8]> {
    move |s| enc.encode(s).0
}

/// The reference extractor: scraper's DOM, the semantics documented in `crawler::extract`.
pub fn reference_extract(
    html: &[u8],
    page_url: &Url,
    encoding: Option<&str>,
    opts: &ExtractOptions,
) -> Extracted {
    let (text, enc) = decode_body(html, encoding);
    extract_from_dom(&parse(&text), page_url, enc, opts)
}

/// The scanner (`crawler::extract`'s) does not keep a stack of open elements. It approximates
/// the tree builder's namespace with a stack of namespace *changes* (`<svg>`, `<math>`,
/// integration points), exact for well-formed foreign content. Malformed foreign content can
/// leave it believing it is in SVG when the tree builder is back in HTML (or the other way
/// round), and then `<script>`/`<style>`/`<title>`… content is tokenized differently:
/// - an end tag of an HTML ancestor (`<a><svg></a>`, `<button><svg></button>`) closes the
///   foreign content in the tree builder, not in the scanner;
/// - `</title>` inside `<svg><title><a>` is ignored by the tree builder (SVG `title` is
///   special) but leaves the integration point in the scanner.
const FOREIGN_CONTENT: &str =
    "malformed <svg>/<math> foreign content (the scanner approximates it)";

/// In `<frameset>` documents the tree builder drops what a frameset cannot hold (an `<a>`
/// inside or after it), and ignores a `<frameset>` that comes after body content, frames
/// and all; the streaming extractor reports what the tags say. Framesets are obsolete; the
/// extra links are real URLs the page names.
const FRAMESET: &str = "<frameset> document (the tree builder drops content around it)";

/// Documented differences: (tag names whose start and end tags cause it, reason).
const KNOWN: &[(&[&[u8]], &str)] = &[
    (&[b"svg", b"math"], FOREIGN_CONTENT),
    (&[b"frameset"], FRAMESET),
];

/// Positions of the first letter of each `<name` / `</name` in the bytes (ASCII
/// case-insensitive; a following name character is not checked, so `<svgx` counts too,
/// which only makes the check more conservative).
fn tag_name_positions(html: &[u8], names: &[&[u8]]) -> Vec<usize> {
    let mut found = Vec::new();
    for (i, &b) in html.iter().enumerate() {
        if b != b'<' {
            continue;
        }
        let at = if html.get(i + 1) == Some(&b'/') {
            i + 2
        } else {
            i + 1
        };
        let rest = html.get(at..).unwrap_or_default();
        if names
            .iter()
            .any(|n| rest.len() >= n.len() && rest[..n.len()].eq_ignore_ascii_case(n))
        {
            found.push(at);
        }
    }
    found
}

/// The same bytes with those tags renamed (`<svg` → `<xvg`), so that the construct is gone
/// and nothing else moves.
pub fn without_tags(html: &[u8], names: &[&[u8]]) -> Vec<u8> {
    let mut out = html.to_vec();
    for at in tag_name_positions(html, names) {
        out[at] = b'x';
    }
    out
}

fn extract_from_dom(
    doc: &Html,
    page_url: &Url,
    enc: &'static Encoding,
    opts: &ExtractOptions,
) -> Extracted {
    let sel = |s: &str| Selector::parse(s).unwrap_or_else(|e| panic!("selector {s}: {e:?}"));

    let base_href = doc
        .select(&sel("base[href]"))
        .find(|el| el.value().name.ns == ns!(html))
        .and_then(|el| el.value().attr("href").map(str::to_owned));
    let base = base_href.and_then(|h| resolve(page_url, &h, enc));
    let effective = base.clone().unwrap_or_else(|| page_url.clone());

    let meta_nofollow = doc.select(&sel("meta[name]")).any(|el| {
        let v = el.value();
        v.name.ns == ns!(html)
            && v.attr("name").is_some_and(|n| {
                n.trim_matches(|c: char| c.is_ascii_whitespace())
                    .eq_ignore_ascii_case("robots")
            })
            && v.attr("content").is_some_and(|c| {
                c.split(|ch: char| ch == ',' || ch.is_ascii_whitespace())
                    .any(|t| t.eq_ignore_ascii_case("nofollow") || t.eq_ignore_ascii_case("none"))
            })
    });

    let canonical = doc
        .select(&sel("link[rel][href]"))
        .find(|el| {
            el.value().name.ns == ns!(html)
                && el.value().attr("rel").is_some_and(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|t| t.eq_ignore_ascii_case("canonical"))
                })
        })
        .and_then(|el| el.value().attr("href"))
        .filter(|href| opts.max_url_length == 0 || href.len() <= opts.max_url_length)
        .and_then(|href| resolve(&effective, href, enc))
        .filter(|url| opts.max_url_length == 0 || url.as_str().len() <= opts.max_url_length);
    let mut out = Extracted {
        meta_nofollow,
        base,
        canonical,
        ..Extracted::default()
    };
    let mut serials_seen = HashSet::new();
    for el in doc.select(&sel("a[href], area[href], frame[src], iframe[src]")) {
        let v = el.value();
        // `<a>` in any namespace; the others only as HTML elements (an SVG element that is
        // called `iframe` is not a frame).
        let is_link = v.name.ns == ns!(html) || v.name() == "a";
        if !is_link {
            continue;
        }
        // Keep the first element of each source tag (see the module doc).
        if let Some(serial) = v.attr(SERIAL) {
            if !serials_seen.insert(serial.to_owned()) {
                continue;
            }
        }
        let value = match v.name() {
            "a" | "area" => {
                let nofollow = v.attr("rel").is_some_and(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|t| t.eq_ignore_ascii_case("nofollow"))
                });
                if nofollow && !opts.follow_nofollow {
                    out.nofollow_skipped += 1;
                    continue;
                }
                v.attr("href")
            }
            _ => v.attr("src"),
        };
        let Some(value) = value else { continue };
        match resolve(&effective, value, enc) {
            Some(mut url) => {
                if opts.drop_fragments {
                    url.set_fragment(None);
                }
                out.links.push(url.into());
            }
            None => out.invalid += 1,
        }
    }
    out
}

/// How the fast extractor and the reference disagree on one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mismatch {
    pub what: Vec<String>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.what {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// Compares two extractions: same links in the same order, same counts, same base.
pub fn compare(fast: &Extracted, reference: &Extracted) -> Result<(), Mismatch> {
    let mut what = Vec::new();
    let f: Vec<&str> = fast.links.iter().map(Link::as_str).collect();
    let r: Vec<&str> = reference.links.iter().map(Link::as_str).collect();
    if f != r {
        let first = f
            .iter()
            .zip(&r)
            .position(|(a, b)| a != b)
            .unwrap_or(f.len().min(r.len()));
        what.push(format!(
            "links differ at index {first}: fast has {} links, reference {}\n  fast:      {f:?}\n  reference: {r:?}",
            f.len(),
            r.len()
        ));
    }
    if fast.canonical != reference.canonical {
        what.push(format!(
            "canonical: fast {:?} reference {:?}",
            fast.canonical.as_ref().map(Url::as_str),
            reference.canonical.as_ref().map(Url::as_str)
        ));
    }
    if fast.nofollow_skipped != reference.nofollow_skipped {
        what.push(format!(
            "nofollow_skipped: fast {} reference {}",
            fast.nofollow_skipped, reference.nofollow_skipped
        ));
    }
    if fast.invalid != reference.invalid {
        what.push(format!(
            "invalid: fast {} reference {}",
            fast.invalid, reference.invalid
        ));
    }
    if fast.meta_nofollow != reference.meta_nofollow {
        what.push(format!(
            "meta_nofollow: fast {} reference {}",
            fast.meta_nofollow, reference.meta_nofollow
        ));
    }
    if fast.base != reference.base {
        what.push(format!(
            "base: fast {:?} reference {:?}",
            fast.base.as_ref().map(Url::as_str),
            reference.base.as_ref().map(Url::as_str)
        ));
    }
    if what.is_empty() {
        Ok(())
    } else {
        Err(Mismatch { what })
    }
}

/// The result of a differential run that did not find a bug.
#[derive(Debug, Clone)]
// One value per document compared: the size of the variants costs nothing worth boxing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    /// Both extractors found the same thing.
    Agreed(Extracted),
    /// They disagree, in a way documented as a known difference; the reason is given.
    KnownDifference {
        reason: &'static str,
        fast: Extracted,
        reference: Extracted,
    },
}

/// Runs both extractors on one document (whole, and streamed in small chunks) and compares.
/// The function to point at every page of a corpus (the synthetic web's, say): `Err` is a bug.
pub fn differential(
    html: &[u8],
    page_url: &Url,
    encoding: Option<&str>,
    opts: &ExtractOptions,
) -> Result<Outcome, Mismatch> {
    let fast = crawler::extract::extract_links(html, page_url, encoding, opts);
    let reference = reference_extract(html, page_url, encoding, opts);
    if let Err(mismatch) = compare(&fast, &reference) {
        // A documented difference explains the mismatch only if the mismatch goes away with
        // the construct: the rest of the document must still agree.
        let present: Vec<_> = KNOWN
            .iter()
            .filter(|(names, _)| !tag_name_positions(html, names).is_empty())
            .collect();
        if present.is_empty() {
            return Err(mismatch);
        }
        let mut plain = html.to_vec();
        for (names, _) in &present {
            plain = without_tags(&plain, names);
        }
        let fast_plain = crawler::extract::extract_links(&plain, page_url, encoding, opts);
        let reference_plain = reference_extract(&plain, page_url, encoding, opts);
        if let Err(mut still) = compare(&fast_plain, &reference_plain) {
            still.what.insert(
                0,
                "mismatch remains with <svg>/<math>/<frameset> renamed away:".to_string(),
            );
            still.what.extend(mismatch.what);
            return Err(still);
        }
        let reason = present
            .iter()
            .map(|(_, reason)| *reason)
            .next()
            .unwrap_or(FRAMESET);
        return Ok(Outcome::KnownDifference {
            reason,
            fast,
            reference,
        });
    }
    // Chunk boundaries must not matter: split everywhere a streaming parser could be caught
    // mid-token.
    for chunk_len in [1, 7, 4096] {
        let mut streaming = crawler::extract::LinkExtractor::new(page_url.clone(), encoding, opts);
        for chunk in html.chunks(chunk_len) {
            if let Err(err) = streaming.write(chunk) {
                return Err(Mismatch {
                    what: vec![format!(
                        "streaming write failed with {chunk_len}-byte chunks: {err}"
                    )],
                });
            }
        }
        compare(&streaming.finish(), &fast).map_err(|mut m| {
            m.what
                .insert(0, format!("streamed in {chunk_len}-byte chunks vs whole:"));
            m
        })?;
    }
    Ok(Outcome::Agreed(fast))
}
