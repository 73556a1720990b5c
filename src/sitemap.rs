//! Sitemaps (sitemaps.org protocol 0.9): reading one sitemap file into the URLs it lists.
//!
//! # What it does
//! [`parse`] reads one fetched sitemap body — XML, or gzip-compressed XML (recognised by its
//! magic bytes, whatever the URL or Content-Type say, since `.xml.gz` files are served as
//! anything from `application/x-gzip` to `application/octet-stream`) — and returns its kind
//! (`<urlset>` or `<sitemapindex>`), each entry's `<loc>` and `<lastmod>`, and what was cut.
//! How the crawl uses it (where sitemaps come from, how they are fetched, admitted and
//! recorded) is in `crate::crawl::sitemaps`.
//!
//! # Guarantees
//! - **The protocol's limits**: at most [`MAX_ENTRIES`] (50,000) entries are taken from one
//!   file; later ones are counted in [`Parsed::cut`], not kept. At most [`MAX_BYTES`]
//!   (50 MiB) of uncompressed XML are read; a file that is longer is cut there
//!   ([`Parsed::over_size`]). So one sitemap costs at most 50 MiB of reading and 50,000
//!   entries of memory, whatever a server sends (a gzip bomb is read to 50 MiB and stopped).
//! - **Never panics, never gives up silently**: malformed XML, a truncated or corrupt gzip
//!   stream, a `<loc>` that is not text: the entries read before the problem are kept and
//!   the problem is in [`Parsed::error`] (counted by the crawl).
//! - Entities and character references in `<loc>` are resolved (`&amp;` is `&`, as the
//!   protocol requires them to be escaped); surrounding whitespace is trimmed; element names
//!   are compared without their namespace prefix (sitemaps in the wild use `xmlns:s`).
//!
//! # Why built this way
//! quick-xml is a pull parser: events are read from a `BufRead` one at a time, so the
//! document is never held as a tree, and gzip is decoded on the fly by flate2 (already in
//! the dependency tree through reqwest) under a byte budget. A 50 MiB sitemap is read in one
//! pass with memory for the entries kept and one element's text at a time.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read};

use quick_xml::events::Event;
use quick_xml::Reader;

/// Most entries one sitemap file may list (sitemaps.org).
pub const MAX_ENTRIES: usize = 50_000;
/// Most uncompressed bytes one sitemap file may have (sitemaps.org: 50 MB, 52,428,800 bytes).
pub const MAX_BYTES: u64 = 50 * 1024 * 1024;

/// What kind of sitemap a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `<urlset>`: its entries are pages.
    Urlset,
    /// `<sitemapindex>`: its entries are sitemaps.
    Sitemapindex,
}

/// One `<url>` or `<sitemap>` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `<loc>`, entity-decoded and trimmed (not yet resolved nor normalized).
    pub loc: String,
    /// `<lastmod>` as written (W3C datetime), trimmed.
    pub lastmod: Option<String>,
}

/// Why a sitemap could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitemapError {
    #[error("sitemap: malformed XML at byte {position}: {message}")]
    Xml { position: u64, message: String },
    #[error(
        "sitemap: cannot read the body at byte {position} (corrupt or truncated gzip?): {message}"
    )]
    Read { position: u64, message: String },
    #[error("sitemap: the root element is <{0}>, not <urlset> or <sitemapindex>")]
    NotASitemap(String),
}

/// What one sitemap file held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// `None` if no root element was read.
    pub kind: Option<Kind>,
    /// At most [`MAX_ENTRIES`], in document order.
    pub entries: Vec<Entry>,
    /// Entries past [`MAX_ENTRIES`]: counted, not kept.
    pub cut: u64,
    /// The uncompressed XML was longer than [`MAX_BYTES`]; reading stopped there.
    pub over_size: bool,
    /// The body was gzip-compressed.
    pub gzip: bool,
    /// Uncompressed bytes read.
    pub bytes: u64,
    /// Why reading stopped early, if it did.
    pub error: Option<SitemapError>,
}

/// Reads one sitemap body (see the module doc).
pub fn parse(body: &[u8]) -> Parsed {
    parse_limited(body, MAX_ENTRIES, MAX_BYTES)
}

/// [`parse`] with other limits (tests use small ones).
pub fn parse_limited(body: &[u8], max_entries: usize, max_bytes: u64) -> Parsed {
    let gzip = body.starts_with(&[0x1f, 0x8b]);
    let source: Box<dyn Read + '_> = if gzip {
        // Multi-member streams (`cat a.gz b.gz`) are valid gzip too.
        Box::new(flate2::read::MultiGzDecoder::new(body))
    } else {
        Box::new(body)
    };
    // One byte more than allowed, to tell "exactly the limit" from "over it".
    let counted = Counted {
        inner: source.take(max_bytes + 1),
        read: 0,
    };
    let mut reader = Reader::from_reader(BufReader::new(counted));
    let mut out = Parsed {
        gzip,
        ..Parsed::default()
    };
    read(&mut reader, &mut out, max_entries);
    let read = reader.get_ref().get_ref().read;
    out.bytes = read.min(max_bytes);
    if read > max_bytes {
        out.over_size = true;
        // The cut XML ends mid-document: that is the limit's doing, not the file's.
        if matches!(out.error, Some(SitemapError::Xml { .. })) {
            out.error = None;
        }
    }
    out
}

/// Which text is being collected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    None,
    Loc,
    Lastmod,
}

fn read<R: BufRead>(reader: &mut Reader<R>, out: &mut Parsed, max_entries: usize) {
    let mut buf = Vec::new();
    let mut in_entry = false;
    let mut field = Field::None;
    let mut loc = String::new();
    let mut lastmod = String::new();
    let mut has_lastmod = false;
    loop {
        buf.clear();
        let event = match reader.read_event_into(&mut buf) {
            Ok(event) => event,
            Err(e) => {
                let position = reader.error_position();
                out.error = Some(match e {
                    quick_xml::Error::Io(io) => SitemapError::Read {
                        position,
                        message: io.to_string(),
                    },
                    other => SitemapError::Xml {
                        position,
                        message: other.to_string(),
                    },
                });
                return;
            }
        };
        match event {
            Event::Start(e) | Event::Empty(e) => {
                let name = e.local_name();
                let name = name.as_ref();
                if out.kind.is_none() {
                    out.kind = match name {
                        b"urlset" => Some(Kind::Urlset),
                        b"sitemapindex" => Some(Kind::Sitemapindex),
                        other => {
                            out.error = Some(SitemapError::NotASitemap(
                                String::from_utf8_lossy(other).into_owned(),
                            ));
                            return;
                        }
                    };
                    continue;
                }
                match name {
                    b"url" | b"sitemap" => {
                        in_entry = true;
                        loc.clear();
                        lastmod.clear();
                        has_lastmod = false;
                    }
                    b"loc" if in_entry => field = Field::Loc,
                    b"lastmod" if in_entry => {
                        field = Field::Lastmod;
                        has_lastmod = true;
                    }
                    _ => field = Field::None,
                }
            }
            Event::End(e) => {
                let name = e.local_name();
                match name.as_ref() {
                    b"url" | b"sitemap" if in_entry => {
                        in_entry = false;
                        let trimmed = loc.trim();
                        if !trimmed.is_empty() {
                            if out.entries.len() < max_entries {
                                let lastmod = lastmod.trim();
                                out.entries.push(Entry {
                                    loc: trimmed.to_string(),
                                    lastmod: (has_lastmod && !lastmod.is_empty())
                                        .then(|| lastmod.to_string()),
                                });
                            } else {
                                out.cut += 1;
                            }
                        }
                    }
                    _ => field = Field::None,
                }
            }
            Event::Text(t) => push(field, &mut loc, &mut lastmod, t.decode()),
            Event::CData(t) => push(field, &mut loc, &mut lastmod, t.decode()),
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) => Cow::Owned(c.to_string()),
                    Ok(None) => match &*r {
                        b"amp" => Cow::Borrowed("&"),
                        b"lt" => Cow::Borrowed("<"),
                        b"gt" => Cow::Borrowed(">"),
                        b"quot" => Cow::Borrowed("\""),
                        b"apos" => Cow::Borrowed("'"),
                        // An undefined entity: the URL is not what the file meant; keep
                        // the reference as written (the URL parser will reject or escape it).
                        other => Cow::Owned(format!("&{};", String::from_utf8_lossy(other))),
                    },
                    Err(_) => Cow::Borrowed("\u{FFFD}"),
                };
                push::<()>(field, &mut loc, &mut lastmod, Ok(text));
            }
            Event::Eof => return,
            _ => {}
        }
    }
}

fn push<E>(field: Field, loc: &mut String, lastmod: &mut String, text: Result<Cow<'_, str>, E>) {
    let Ok(text) = text else { return };
    match field {
        // A `<loc>` longer than any URL worth fetching is cut by the crawl's scope later;
        // here it is bounded by MAX_BYTES.
        Field::Loc => loc.push_str(&text),
        Field::Lastmod => lastmod.push_str(&text),
        Field::None => {}
    }
}

/// A reader that counts the bytes it hands out.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn urlset(n: usize) -> String {
        let mut s = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for i in 0..n {
            s.push_str(&format!(
                "<url><loc>http://a.test/p/{i}?a=1&amp;b=2</loc><lastmod>2026-11-{:02}</lastmod></url>\n",
                i % 28 + 1
            ));
        }
        s.push_str("</urlset>\n");
        s
    }

    #[test]
    fn sitemap_urlset_entries_and_lastmod() {
        let p = parse(urlset(3).as_bytes());
        assert_eq!(p.kind, Some(Kind::Urlset));
        assert_eq!(p.error, None);
        assert_eq!(p.entries.len(), 3);
        assert_eq!(p.entries[1].loc, "http://a.test/p/1?a=1&b=2");
        assert_eq!(p.entries[1].lastmod.as_deref(), Some("2026-11-02"));
        assert!(!p.gzip && !p.over_size && p.cut == 0);
    }

    #[test]
    fn sitemap_index_prefixes_cdata_and_char_refs() {
        let xml = "<s:sitemapindex xmlns:s=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
            <s:sitemap><s:loc>\n  http://a.test/s1.xml.gz  \n</s:loc></s:sitemap>\
            <s:sitemap><s:loc><![CDATA[http://a.test/s2.xml?x=<1>]]></s:loc><s:lastmod>2026-01-01T00:00:00Z</s:lastmod></s:sitemap>\
            <s:sitemap><s:loc>http://a.test/&#x73;3&#46;xml</s:loc></s:sitemap>\
            <s:sitemap><s:lastmod>2026</s:lastmod></s:sitemap>\
            </s:sitemapindex>";
        let p = parse(xml.as_bytes());
        assert_eq!(p.kind, Some(Kind::Sitemapindex));
        let locs: Vec<&str> = p.entries.iter().map(|e| e.loc.as_str()).collect();
        assert_eq!(
            locs,
            [
                "http://a.test/s1.xml.gz",
                "http://a.test/s2.xml?x=<1>",
                "http://a.test/s3.xml"
            ],
            "an entry without <loc> is skipped"
        );
        assert_eq!(
            p.entries[1].lastmod.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(p.error, None);
    }

    #[test]
    fn sitemap_gzip_is_recognised_by_its_bytes() {
        let p = parse(&gz(urlset(10).as_bytes()));
        assert!(p.gzip);
        assert_eq!(p.entries.len(), 10);
        assert_eq!(p.error, None);
    }

    #[test]
    fn sitemap_limits_cut_and_count() {
        let p = parse_limited(urlset(10).as_bytes(), 4, MAX_BYTES);
        assert_eq!((p.entries.len(), p.cut), (4, 6));
        assert_eq!(p.entries[3].loc, "http://a.test/p/3?a=1&b=2");
        // The byte limit: an endless-looking gzip stream stops at the limit, no error.
        let big = urlset(2000);
        let p = parse_limited(&gz(big.as_bytes()), MAX_ENTRIES, 10_000);
        assert!(p.over_size);
        assert_eq!(p.bytes, 10_000);
        assert!(
            p.entries.len() > 50 && p.entries.len() < 200,
            "{}",
            p.entries.len()
        );
        assert_eq!(p.error, None);
        let p = parse_limited(big.as_bytes(), MAX_ENTRIES, big.len() as u64);
        assert!(!p.over_size, "exactly the limit is allowed");
        assert_eq!(p.entries.len(), 2000);
    }

    #[test]
    fn sitemap_broken_input_keeps_what_was_read() {
        let whole = gz(urlset(50).as_bytes());
        let p = parse(&whole[..whole.len() / 2]);
        assert!(matches!(p.error, Some(SitemapError::Read { .. })), "{p:?}");
        assert!(!p.entries.is_empty() && p.entries.len() < 50);
        let p = parse(b"<urlset><url><loc>http://a.test/</loc></url><url><loc>x</lo></url>");
        assert!(matches!(p.error, Some(SitemapError::Xml { .. })), "{p:?}");
        assert_eq!(p.entries.len(), 1);
        let p = parse(b"<html><body>not a sitemap</body></html>");
        assert_eq!(p.error, Some(SitemapError::NotASitemap("html".into())));
        assert!(p.entries.is_empty());
        let p = parse(b"");
        assert_eq!((p.kind, p.error), (None, None));
    }

    proptest::proptest! {
        #[test]
        fn sitemap_parse_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000)) {
            let p = parse_limited(&body, 10, 1000);
            proptest::prop_assert!(p.entries.len() <= 10);
        }

        #[test]
        fn sitemap_parse_of_tag_soup(parts in proptest::collection::vec(proptest::prop_oneof![
            proptest::strategy::Just("<urlset>"), proptest::strategy::Just("<url>"),
            proptest::strategy::Just("</url>"), proptest::strategy::Just("<loc>"),
            proptest::strategy::Just("</loc>"), proptest::strategy::Just("http://a.test/"),
            proptest::strategy::Just("&amp;"), proptest::strategy::Just("&#xFFFFFF;"),
            proptest::strategy::Just("&bogus;"), proptest::strategy::Just("<![CDATA[x"),
            proptest::strategy::Just("]]>"), proptest::strategy::Just("<lastmod>"),
            proptest::strategy::Just("</urlset>"), proptest::strategy::Just("<sitemapindex>"),
        ], 0..40)) {
            let p = parse_limited(parts.concat().as_bytes(), 5, 10_000);
            proptest::prop_assert!(p.entries.len() <= 5);
        }
    }
}
