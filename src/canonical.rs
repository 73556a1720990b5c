//! Canonical links: the URL a page names as its preferred form, from the HTTP `Link` header
//! (`Link: <https://example.org/a>; rel="canonical"`, RFC 8288 and RFC 6596) or the HTML
//! `<link rel=canonical href>` (found by [`crate::extract`]).
//!
//! # What the crawl does with it
//! - It is recorded in `pages.jsonl` (`canonical`), resolved against the page (the header's
//!   target against the request URL, as RFC 8288 §3.2 says; the element's against the
//!   document's base) and in the crawl's canonical form when the normalizer takes it. When a
//!   response has both, the header wins: it is the server's word and also covers responses
//!   that are not HTML (a PDF can only have the header).
//! - With `crawl.follow_canonical` (default on) it is admitted like one more link of the
//!   page: the same admission step, so the same normalizer, scope rules, depth limit,
//!   page-level nofollow and seen-set (a page that names itself, the common case, is simply
//!   already seen). It counts among the page's `links`.
//!
//! # Guarantees
//! [`from_link_header`] never fails and never panics on any header value: a malformed
//! link-value (no `<`, no `>`, an unterminated quoted string) ends the parse of that header
//! line, and what was read before it still counts. It reads each value once, left to right.
//!
//! # Why built this way
//! The `Link` grammar is small (a URI reference in angle brackets, then `;`-separated
//! parameters whose values are tokens or quoted strings, link-values separated by commas
//! that may also appear inside quotes), and the one parameter wanted is `rel`, so a short
//! hand-written scanner does it without a dependency.

/// The target of the first link-value with relation type `canonical` in these `Link` header
/// values (one per header line, in order), unresolved.
pub fn from_link_header<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    values.into_iter().find_map(canonical_in)
}

/// The first canonical target in one header value.
fn canonical_in(value: &str) -> Option<String> {
    let b = value.as_bytes();
    let mut pos = 0;
    loop {
        // A link-value: `<` URI-Reference `>` then parameters.
        while pos < b.len() && (b[pos] == b',' || b[pos].is_ascii_whitespace()) {
            pos += 1;
        }
        if b.get(pos) != Some(&b'<') {
            return None;
        }
        let end = pos + 1 + value.get(pos + 1..)?.find('>')?;
        let target = value.get(pos + 1..end)?.trim();
        pos = end + 1;
        let mut is_canonical = false;
        // Parameters, until the comma that ends this link-value.
        loop {
            while pos < b.len() && b[pos].is_ascii_whitespace() {
                pos += 1;
            }
            match b.get(pos) {
                None => break,
                Some(b',') => break,
                Some(b';') => pos += 1,
                // Junk between parameters: give up on this header value.
                Some(_) => return None,
            }
            while pos < b.len() && b[pos].is_ascii_whitespace() {
                pos += 1;
            }
            let name_start = pos;
            while pos < b.len() && !matches!(b[pos], b'=' | b';' | b',') {
                pos += 1;
            }
            let name = value.get(name_start..pos)?.trim();
            if b.get(pos) != Some(&b'=') {
                continue;
            }
            pos += 1;
            while pos < b.len() && b[pos].is_ascii_whitespace() {
                pos += 1;
            }
            let param = if b.get(pos) == Some(&b'"') {
                // quoted-string with `\` escapes.
                pos += 1;
                let mut out = String::new();
                let mut chars = value.get(pos..)?.char_indices();
                loop {
                    let (i, c) = chars.next()?;
                    match c {
                        '"' => {
                            pos += i + 1;
                            break;
                        }
                        '\\' => {
                            let (_, escaped) = chars.next()?;
                            out.push(escaped);
                        }
                        c => out.push(c),
                    }
                }
                out
            } else {
                let start = pos;
                while pos < b.len() && !matches!(b[pos], b';' | b',') {
                    pos += 1;
                }
                value.get(start..pos)?.trim().to_string()
            };
            if name.eq_ignore_ascii_case("rel")
                && param
                    .split_ascii_whitespace()
                    .any(|t| t.eq_ignore_ascii_case("canonical"))
            {
                is_canonical = true;
            }
        }
        if is_canonical {
            return Some(target.to_string());
        }
        if pos >= b.len() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one(v: &str) -> Option<String> {
        from_link_header([v])
    }

    #[test]
    fn canonical_link_header_forms() {
        assert_eq!(
            one(r#"<https://a.test/x>; rel="canonical""#).as_deref(),
            Some("https://a.test/x")
        );
        assert_eq!(one("</rel>;rel=canonical").as_deref(), Some("/rel"));
        assert_eq!(
            one(r#"<https://a.test/de>; rel="alternate"; hreflang=de, <https://a.test/c>; rel="Canonical""#)
                .as_deref(),
            Some("https://a.test/c")
        );
        assert_eq!(
            one(r#"<x>; title="a, b; c"; rel="preload canonical""#).as_deref(),
            Some("x")
        );
        assert_eq!(one(r#"<x>; rel="canonicalx""#), None);
        assert_eq!(one(r#"<x>; rel="alternate""#), None);
        assert_eq!(
            one("https://a.test/; rel=canonical"),
            None,
            "no angle brackets"
        );
        assert_eq!(one(r#"<x; rel="canonical""#), None, "no closing >");
        assert_eq!(one(r#"<x>; rel="canonical"#), None, "unterminated quote");
        assert_eq!(
            from_link_header(["<a>; rel=next", r#"<b>; rel="canonical""#]).as_deref(),
            Some("b"),
            "the second header line"
        );
    }

    proptest! {
        #[test]
        fn canonical_link_header_never_panics(v in "\\PC*") {
            let _ = one(&v);
        }

        #[test]
        fn canonical_link_header_of_link_soup(parts in proptest::collection::vec(prop_oneof![
            Just("<"), Just(">"), Just(";"), Just(","), Just("rel"), Just("="), Just("\""),
            Just("\\"), Just("canonical"), Just(" "), Just("é"), Just("/x"),
        ], 0..30)) {
            let _ = one(&parts.concat());
        }
    }
}
