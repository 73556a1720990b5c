//! A page's character encoding, decided as the HTML standard decides it.
//!
//! # What it does
//! [`sniff`] takes the first bytes of a body and the `charset` of its Content-Type and
//! returns the encoding to decode it with, in the standard's order ("determining the
//! character encoding", HTML §13.2.3.2):
//! 1. a byte-order mark (UTF-8, UTF-16LE, UTF-16BE) wins over everything;
//! 2. else the transport layer's label (the Content-Type `charset`), if encoding_rs knows it;
//! 3. else `<meta charset=…>` or `<meta http-equiv=Content-Type content="…; charset=…">`
//!    found by [`prescan`] in the first [`PRESCAN_BYTES`] bytes;
//! 4. else UTF-8 (the standard allows a locale-dependent guess or a statistical detector
//!    here; a crawler has no locale, and today's unlabelled pages are overwhelmingly UTF-8).
//!
//! The decision matters for links twice: the bytes of an `href` are decoded in it, and the
//! query string of a link is percent-encoded in it (the URL standard's "encoding override",
//! `Url::options().encoding_override`, used by [`crate::extract`]). A Shift_JIS page's
//! `?q=検索` is `?q=%8C%9F%8D%F5`, not the UTF-8 `%E6%A4%9C%E7%B4%A2` — the server would not
//! recognise the latter.
//!
//! # Guarantees
//! - Never fails and never panics, whatever the bytes: an unknown label is ignored (the next
//!   step decides), a truncated or malformed `<meta>` is no declaration.
//! - Reads at most [`PRESCAN_BYTES`] bytes (the standard's 1,024), in one pass.
//! - [`prescan`] follows the standard's "prescan a byte stream to determine its encoding"
//!   algorithm: comments are skipped, attributes are tokenized as the algorithm says (so
//!   `<meta content="charset=x">` without `http-equiv` is no declaration, `<meta charset>`
//!   inside another tag's attribute value is not seen), a declared UTF-16 means UTF-8 (a
//!   page that can declare anything in ASCII is not UTF-16) and `x-user-defined` means
//!   windows-1252.
//!
//! # Why built this way
//! encoding_rs (already the crate lol_html decodes with) implements the WHATWG Encoding
//! standard's labels and decoders exactly, so label lookup and decoding are its; what it does
//! not have is the HTML prescan, a small state machine written here. The crates that do have
//! one (chardetng, html5ever's) either guess statistically or need the whole tree builder.
//! The prescan runs on every page without a transport label, so it does not allocate: the
//! algorithm lowercases attribute names and values, but every comparison made of them
//! ignores ASCII case (`Encoding::for_label` too), so they are read as slices of the page,
//! and its list of attribute names seen is three flags (only three names decide anything).
//! With the copies the prescan was 3.5% of extraction's samples on the doc corpus (perf,
//! `EXTRACT_BENCH_PROFILE=corpus`), 2.3% without; a property test checks the decision
//! against the copying reference kept in the tests. Text between tags is skipped with
//! `memchr` to the next `<` (the walk was byte by byte there): 2.2% of the samples → 1.0%.

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1252, X_USER_DEFINED};

/// How many leading bytes [`prescan`] looks at (the HTML standard's limit).
pub const PRESCAN_BYTES: usize = 1024;

/// Which rule decided the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A byte-order mark.
    Bom,
    /// The Content-Type `charset`.
    Transport,
    /// A `<meta>` declaration in the first [`PRESCAN_BYTES`] bytes.
    Meta,
    /// None of the above: UTF-8.
    Default,
}

/// The decision of [`sniff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    /// The encoding to decode the body with.
    pub encoding: &'static Encoding,
    /// Length of the byte-order mark to skip (0 without one).
    pub bom_len: usize,
    /// Which rule decided.
    pub source: Source,
}

/// The encoding a transport label (a Content-Type `charset`) names, if encoding_rs knows it.
pub fn transport_encoding(label: Option<&str>) -> Option<&'static Encoding> {
    label.and_then(|label| Encoding::for_label(label.trim().as_bytes()))
}

/// Decides the encoding of a body from its first bytes (`head`: at least [`PRESCAN_BYTES`]
/// of them, or the whole body if it is shorter) and the transport's encoding.
pub fn sniff(head: &[u8], transport: Option<&'static Encoding>) -> Sniffed {
    if let Some((encoding, bom_len)) = Encoding::for_bom(head) {
        return Sniffed {
            encoding,
            bom_len,
            source: Source::Bom,
        };
    }
    if let Some(encoding) = transport {
        return Sniffed {
            encoding,
            bom_len: 0,
            source: Source::Transport,
        };
    }
    match prescan(head) {
        Some(encoding) => Sniffed {
            encoding,
            bom_len: 0,
            source: Source::Meta,
        },
        None => Sniffed {
            encoding: UTF_8,
            bom_len: 0,
            source: Source::Default,
        },
    }
}

/// The encoding a `<meta>` in the first [`PRESCAN_BYTES`] bytes of `bytes` declares, by the
/// HTML standard's prescan algorithm; `None` if there is none (or it names no encoding
/// encoding_rs knows).
pub fn prescan(bytes: &[u8]) -> Option<&'static Encoding> {
    prescan_with::<true>(bytes, meta, |b, pos| attribute(b, pos).is_some())
}

/// The prescan's walk over comments and tags, given what it does at a `<meta` and how it
/// steps over another tag's attribute: the tests run this same walk with the copying
/// reference versions of both, so the two prescans differ only where they are meant to.
///
/// `JUMP_TO_TAGS`: text between tags is skipped to the next `<` with `memchr` (the
/// reference in the tests steps over it byte by byte, as the algorithm is written).
fn prescan_with<const JUMP_TO_TAGS: bool>(
    bytes: &[u8],
    meta: impl Fn(&[u8], &mut usize) -> Option<&'static Encoding>,
    skip_attribute: impl Fn(&[u8], &mut usize) -> bool,
) -> Option<&'static Encoding> {
    let b = bytes.get(..PRESCAN_BYTES).unwrap_or(bytes);
    let mut pos = 0;
    while pos < b.len() {
        // Every step below starts at a `<`; any other byte is stepped over one at a time by
        // the algorithm, so the walk jumps to the next `<` at once (a third of the doc
        // corpus's pages name no charset and are walked for all 1,024 bytes).
        if JUMP_TO_TAGS && b[pos] != b'<' {
            match memchr::memchr(b'<', &b[pos..]) {
                Some(at) => pos += at,
                None => return None,
            }
        }
        let rest = &b[pos..];
        if rest.starts_with(b"<!--") {
            // Comment: skip to the end of `-->` (the `--` may be the opening one's, as in the
            // algorithm: `<!-->` ends at once).
            pos = match find(&b[pos + 2..], b"-->") {
                Some(at) => pos + 2 + at + 3,
                None => return None,
            };
            continue;
        }
        if starts_with_ignore_case(rest, b"<meta")
            && rest.get(5).is_some_and(|&c| is_space(c) || c == b'/')
        {
            pos += 5;
            if let Some(encoding) = meta(b, &mut pos) {
                return Some(encoding);
            }
            continue;
        }
        let tag_start = rest.first() == Some(&b'<')
            && (rest.get(1).is_some_and(u8::is_ascii_alphabetic)
                || (rest.get(1) == Some(&b'/')
                    && rest.get(2).is_some_and(u8::is_ascii_alphabetic)));
        if tag_start {
            // Any other tag: skip its name, then its attributes (a `>` inside a quoted value
            // does not end it).
            pos += if rest.get(1) == Some(&b'/') { 2 } else { 1 };
            while pos < b.len() && !is_space(b[pos]) && b[pos] != b'>' {
                pos += 1;
            }
            while skip_attribute(b, &mut pos) {}
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            pos = match rest.iter().position(|&c| c == b'>') {
                Some(at) => pos + at + 1,
                None => return None,
            };
            continue;
        }
        pos += 1;
    }
    None
}

/// The attributes of one `<meta` (after its name), as the prescan judges them. `pos` is left
/// after the tag.
fn meta(b: &[u8], pos: &mut usize) -> Option<&'static Encoding> {
    // The algorithm's "attribute list" only decides for the three names below (a repeated
    // one is ignored); any other name is ignored whether repeated or not, so three flags
    // are the list.
    let (mut seen_pragma, mut seen_content, mut seen_charset) = (false, false, false);
    let mut got_pragma = false;
    // None: no charset found yet; Some(true): from `content`, needs http-equiv; Some(false):
    // from `charset`.
    let mut need_pragma: Option<bool> = None;
    let mut charset: Option<&'static Encoding> = None;
    while let Some((name, value)) = attribute(b, pos) {
        // Names and values are compared ASCII case-insensitively where the algorithm
        // lowercases them (`Encoding::for_label` ignores case too).
        if name.eq_ignore_ascii_case(b"http-equiv") {
            if !seen_pragma && value.eq_ignore_ascii_case(b"content-type") {
                got_pragma = true;
            }
            seen_pragma = true;
        } else if name.eq_ignore_ascii_case(b"content") {
            if !seen_content && charset.is_none() {
                if let Some(found) = charset_in_content(value) {
                    charset = Some(found);
                    need_pragma = Some(true);
                }
            }
            seen_content = true;
        } else if name.eq_ignore_ascii_case(b"charset") {
            if !seen_charset {
                charset = Encoding::for_label(trim_space(value));
                need_pragma = Some(false);
            }
            seen_charset = true;
        }
    }
    meta_decides(need_pragma, got_pragma, charset)
}

/// The end of the prescan's `<meta` step: the charset found, if the tag had what it needs
/// (`need_pragma`: `None` if no charset was found, `Some(true)` if it came from `content`
/// and so needs `http-equiv="content-type"`), with UTF-16 read as UTF-8 and
/// x-user-defined as windows-1252, as the algorithm says.
fn meta_decides(
    need_pragma: Option<bool>,
    got_pragma: bool,
    charset: Option<&'static Encoding>,
) -> Option<&'static Encoding> {
    let need_pragma = need_pragma?;
    if need_pragma && !got_pragma {
        return None;
    }
    let charset = charset?;
    Some(if charset == UTF_16BE || charset == UTF_16LE {
        UTF_8
    } else if charset == X_USER_DEFINED {
        WINDOWS_1252
    } else {
        charset
    })
}

/// "Get an attribute" of the prescan: the next attribute's name and value, as they are in
/// `b` (the algorithm lowercases both; every comparison made of them ignores ASCII case, so
/// they are not copied to be lowercased: no allocation per attribute), or `None` at the
/// tag's end (or the input's).
fn attribute<'a>(b: &'a [u8], pos: &mut usize) -> Option<(&'a [u8], &'a [u8])> {
    while *pos < b.len() && (is_space(b[*pos]) || b[*pos] == b'/') {
        *pos += 1;
    }
    let first = *b.get(*pos)?;
    if first == b'>' {
        *pos += 1;
        return None;
    }
    let name_start = *pos;
    let no_value: &[u8] = &[];
    // The name: a leading `=` is part of it (the algorithm's first step).
    let name = loop {
        let c = *b.get(*pos)?;
        let name = b.get(name_start..*pos).unwrap_or_default();
        if c == b'=' && !name.is_empty() {
            *pos += 1;
            break name;
        }
        if is_space(c) {
            while *pos < b.len() && is_space(b[*pos]) {
                *pos += 1;
            }
            if b.get(*pos) != Some(&b'=') {
                // An attribute without a value; the next one starts here.
                return Some((name, no_value));
            }
            *pos += 1;
            break name;
        }
        if c == b'/' || c == b'>' {
            return Some((name, no_value));
        }
        *pos += 1;
    };
    while *pos < b.len() && is_space(b[*pos]) {
        *pos += 1;
    }
    let c = *b.get(*pos)?;
    if c == b'"' || c == b'\'' {
        *pos += 1;
        let value = value_up_to(b, pos, |v| v == c)?;
        // Past the closing quote.
        *pos += 1;
        return Some((name, value));
    }
    if c == b'>' {
        return Some((name, no_value));
    }
    value_up_to(b, pos, |v| is_space(v) || v == b'>').map(|value| (name, value))
}

/// The bytes from `pos` to the first for which `end` holds, `pos` left on that byte; or
/// `None` with `pos` at the end of `b` when there is none (the input ends inside the value,
/// and the prescan with it).
fn value_up_to<'a>(b: &'a [u8], pos: &mut usize, end: impl Fn(u8) -> bool) -> Option<&'a [u8]> {
    let rest = b.get(*pos..).unwrap_or_default();
    match rest.iter().position(|&v| end(v)) {
        Some(len) => {
            *pos += len;
            rest.get(..len)
        }
        None => {
            *pos = b.len();
            None
        }
    }
}

/// "Extract a character encoding from a meta element": the `charset=` inside a `content`
/// value such as `text/html; charset=Shift_JIS`.
fn charset_in_content(content: &[u8]) -> Option<&'static Encoding> {
    let mut pos = 0;
    loop {
        let at = find_ignore_case(content.get(pos..)?, b"charset")?;
        pos += at + b"charset".len();
        while pos < content.len() && is_space(content[pos]) {
            pos += 1;
        }
        if content.get(pos) == Some(&b'=') {
            pos += 1;
            break;
        }
        // `charset` not followed by `=`: look for the next one.
    }
    while pos < content.len() && is_space(content[pos]) {
        pos += 1;
    }
    let rest = content.get(pos..)?;
    let value = match rest.first()? {
        &q @ (b'"' | b'\'') => {
            let inner = &rest[1..];
            let end = inner.iter().position(|&c| c == q)?;
            &inner[..end]
        }
        _ => {
            let end = rest
                .iter()
                .position(|&c| is_space(c) || c == b';')
                .unwrap_or(rest.len());
            &rest[..end]
        }
    };
    Encoding::for_label(value)
}

/// ASCII whitespace as the prescan means it (TAB, LF, FF, CR, space).
fn is_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

fn trim_space(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&c| !is_space(c)).unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&c| !is_space(c))
        .map_or(start, |e| e + 1);
    &v[start..end]
}

fn starts_with_ignore_case(hay: &[u8], prefix: &[u8]) -> bool {
    hay.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{GBK, SHIFT_JIS, WINDOWS_1251};
    use proptest::prelude::*;

    fn name(html: &str) -> Option<&'static str> {
        prescan(html.as_bytes()).map(Encoding::name)
    }

    #[test]
    fn charset_meta_declarations_are_found() {
        assert_eq!(name("<meta charset=shift_jis>"), Some("Shift_JIS"));
        assert_eq!(name("<META CHARSET='GBK'>"), Some("GBK"));
        assert_eq!(
            name("<meta charset = \" windows-1252 \" >"),
            Some("windows-1252")
        );
        assert_eq!(
            name(r#"<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">"#),
            Some("Shift_JIS")
        );
        assert_eq!(
            name(r#"<meta content='text/html;charset="gb2312"' http-equiv=content-type>"#),
            Some("GBK")
        );
        assert_eq!(
            name("<!doctype html><html lang=ja><head><title>x</title><meta charset=euc-jp>"),
            Some("EUC-JP")
        );
        // `latin1` is a label of windows-1252 in the Encoding standard.
        assert_eq!(name("<meta/charset=latin1>"), Some("windows-1252"));
    }

    #[test]
    fn charset_what_is_not_a_declaration() {
        // content without http-equiv, unknown labels, comments, attribute values of other
        // tags, and `<meta` as the start of a longer tag name.
        assert_eq!(name(r#"<meta content="text/html; charset=gbk">"#), None);
        assert_eq!(name("<meta charset=no-such-thing>"), None);
        assert_eq!(name("<!-- <meta charset=gbk> --><p>"), None);
        assert_eq!(name("<div title='<meta charset=gbk>'>"), None);
        assert_eq!(name("<metadata charset=gbk>"), None);
        assert_eq!(
            name("<meta charset=gbk"),
            None,
            "cut before the tag ends: no value end"
        );
        assert_eq!(name("<meta name=x>"), None);
        assert_eq!(name(""), None);
        // The first declaration wins; the second `charset` of one tag is ignored.
        assert_eq!(name("<meta charset=gbk charset=big5>"), Some("GBK"));
        assert_eq!(name("<meta charset=gbk><meta charset=big5>"), Some("GBK"));
        // A comment that ends at once.
        assert_eq!(name("<!--><meta charset=gbk>"), Some("GBK"));
    }

    #[test]
    fn charset_utf16_and_x_user_defined_are_replaced() {
        assert_eq!(name("<meta charset=utf-16le>"), Some("UTF-8"));
        assert_eq!(name("<meta charset=utf-16>"), Some("UTF-8"));
        assert_eq!(name("<meta charset=x-user-defined>"), Some("windows-1252"));
    }

    #[test]
    fn charset_only_the_first_1024_bytes_count() {
        let pad = " ".repeat(PRESCAN_BYTES - 20);
        assert_eq!(name(&format!("{pad}<meta charset=gbk>")), Some("GBK"));
        let pad = " ".repeat(PRESCAN_BYTES);
        assert_eq!(name(&format!("{pad}<meta charset=gbk>")), None);
    }

    #[test]
    fn charset_order_bom_then_transport_then_meta_then_utf8() {
        let meta = b"<meta charset=gbk><a href=x>";
        let s = sniff(meta, None);
        assert_eq!((s.encoding, s.source), (GBK, Source::Meta));
        let s = sniff(meta, Some(SHIFT_JIS));
        assert_eq!((s.encoding, s.source), (SHIFT_JIS, Source::Transport));
        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice(meta);
        let s = sniff(&bom, Some(SHIFT_JIS));
        assert_eq!((s.encoding, s.bom_len, s.source), (UTF_8, 3, Source::Bom));
        let s = sniff(b"<a href=x>", None);
        assert_eq!((s.encoding, s.source), (UTF_8, Source::Default));
        assert_eq!(transport_encoding(Some(" cp1251 ")), Some(WINDOWS_1251));
        assert_eq!(transport_encoding(Some("bogus")), None);
    }

    // The prescan with attribute names and values copied and lowercased as the algorithm
    // says (as it was written first): the reference the allocation-free one is checked
    // against.
    fn reference_prescan(bytes: &[u8]) -> Option<&'static Encoding> {
        prescan_with::<false>(bytes, reference_meta, |b, pos| {
            reference_attribute(b, pos).is_some()
        })
    }

    /// The attributes of one `<meta` (after its name), as the prescan judges them. `pos` is left
    /// after the tag.
    fn reference_meta(b: &[u8], pos: &mut usize) -> Option<&'static Encoding> {
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut got_pragma = false;
        // None: no charset found yet; Some(true): from `content`, needs http-equiv; Some(false):
        // from `charset`.
        let mut need_pragma: Option<bool> = None;
        let mut charset: Option<&'static Encoding> = None;
        while let Some((name, value)) = reference_attribute(b, pos) {
            if seen.contains(&name) {
                continue;
            }
            match name.as_slice() {
                b"http-equiv" if value.eq_ignore_ascii_case(b"content-type") => got_pragma = true,
                b"content" if charset.is_none() => {
                    if let Some(found) = charset_in_content(&value) {
                        charset = Some(found);
                        need_pragma = Some(true);
                    }
                }
                b"charset" => {
                    charset = Encoding::for_label(trim_space(&value));
                    need_pragma = Some(false);
                }
                _ => {}
            }
            seen.push(name);
        }
        meta_decides(need_pragma, got_pragma, charset)
    }

    /// "Get an attribute" of the prescan: the next attribute's lowercased name and its value
    /// (lowercased too, as the algorithm does), or `None` at the tag's end (or the input's).
    fn reference_attribute(b: &[u8], pos: &mut usize) -> Option<(Vec<u8>, Vec<u8>)> {
        while *pos < b.len() && (is_space(b[*pos]) || b[*pos] == b'/') {
            *pos += 1;
        }
        let first = *b.get(*pos)?;
        if first == b'>' {
            *pos += 1;
            return None;
        }
        let mut name = Vec::new();
        let mut value = Vec::new();
        // The name: a leading `=` is part of it (the algorithm's first step).
        loop {
            let c = *b.get(*pos)?;
            if c == b'=' && !name.is_empty() {
                *pos += 1;
                break;
            }
            if is_space(c) {
                while *pos < b.len() && is_space(b[*pos]) {
                    *pos += 1;
                }
                if b.get(*pos) != Some(&b'=') {
                    // An attribute without a value; the next one starts here.
                    return Some((name, value));
                }
                *pos += 1;
                break;
            }
            if c == b'/' || c == b'>' {
                return Some((name, value));
            }
            name.push(c.to_ascii_lowercase());
            *pos += 1;
        }
        while *pos < b.len() && is_space(b[*pos]) {
            *pos += 1;
        }
        let c = *b.get(*pos)?;
        if c == b'"' || c == b'\'' {
            *pos += 1;
            loop {
                let v = *b.get(*pos)?;
                *pos += 1;
                if v == c {
                    return Some((name, value));
                }
                value.push(v.to_ascii_lowercase());
            }
        }
        if c == b'>' {
            return Some((name, value));
        }
        loop {
            let v = *b.get(*pos)?;
            if is_space(v) || v == b'>' {
                return Some((name, value));
            }
            value.push(v.to_ascii_lowercase());
            *pos += 1;
        }
    }

    proptest! {
        // Hostile input: any bytes, never a panic, and the result only ever depends on the
        // first 1,024 bytes.
        #[test]
        fn charset_prescan_never_panics_and_reads_1024_bytes(
            head in proptest::collection::vec(any::<u8>(), 0..1200),
            tail in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let a = prescan(&head);
            let mut longer = head.clone();
            longer.extend_from_slice(&tail);
            if head.len() >= PRESCAN_BYTES {
                prop_assert_eq!(a, prescan(&longer));
            }
        }

        // Tag soup made of the prescan's own tokens: still never a panic.
        #[test]
        fn charset_prescan_on_tag_soup(parts in proptest::collection::vec(prop_oneof![
            Just("<meta "), Just("charset="), Just("gbk"), Just("'"), Just("\""), Just(">"),
            Just("<!--"), Just("-->"), Just("http-equiv=content-type "), Just("content="),
            Just("text/html;charset=shift_jis"), Just("<a "), Just("</"), Just("<?"), Just(" "),
            Just("/"), Just("="),
        ], 0..40)) {
            let html: String = parts.concat();
            prop_assert_eq!(prescan(html.as_bytes()), reference_prescan(html.as_bytes()));
        }

        // Any bytes, and the prescan's tokens in any case between any bytes: the same
        // decision as the reference.
        #[test]
        fn charset_prescan_decides_as_the_reference(parts in proptest::collection::vec(prop_oneof![
            Just("<meta ".to_owned()), Just("<META\t".to_owned()), Just("CharSet".to_owned()),
            Just("charset".to_owned()), Just("=".to_owned()), Just(" = ".to_owned()),
            Just("GBK".to_owned()), Just("utf-16".to_owned()), Just("x-user-defined".to_owned()),
            Just("'".to_owned()), Just("\"".to_owned()), Just(">".to_owned()),
            Just("<!--".to_owned()), Just("-->".to_owned()), Just("HTTP-EQUIV".to_owned()),
            Just("content-type".to_owned()), Just("Content".to_owned()),
            Just("text/html; charset=".to_owned()), Just("/".to_owned()), Just("<a ".to_owned()),
            Just("</".to_owned()), Just("<!".to_owned()), Just("<?".to_owned()), Just(" ".to_owned()),
            "[ -~]{0,4}".prop_map(|s| s),
            proptest::collection::vec(any::<u8>(), 0..4)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        ], 0..48)) {
            let html: String = parts.concat();
            prop_assert_eq!(prescan(html.as_bytes()), reference_prescan(html.as_bytes()));
        }
    }
}
