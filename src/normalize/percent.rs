//! Percent-encoding normalization: one spelling per octet, for the path and the query
//! (RFC 3986 §2 and §6.2.2). Every octet of the input is read as raw or escaped (`%XX`, two
//! hex digits) and written back as follows:
//!
//! - an unreserved character (`A-Z a-z 0-9 - . _ ~`, RFC 3986 §2.3) is written raw, so an
//!   escape of one is decoded (`%7E` → `~`, `%41` → `A`);
//! - a reserved character (`: / ? # [ ] @ ! $ & ' ( ) * + , ; =`, RFC 3986 §2.2) is written
//!   as it came: raw stays raw and an escape stays an escape (with uppercase hex). The two
//!   spellings of a delimiter can mean different things to the server (`a%26b=1` is one
//!   parameter, `a&b=1` two; `%2F` is not a segment boundary, `/` is), so neither is turned
//!   into the other;
//! - every other octet (controls, space, `"` `<` `>` `\` `^` `` ` `` `{` `|` `}`, DEL,
//!   non-ASCII) is written escaped, with uppercase hex (`^` → `%5E`, `%c3%a9` → `%C3%A9`,
//!   `é` → `%C3%A9`): none of them may appear raw in a URI (RFC 3986 §2), so a server can
//!   only read the raw one as the escaped one;
//! - a `%` that starts no escape (not followed by two hex digits) is such an octet too and
//!   becomes `%25` (`/a%zz` → `/a%25zz`, the spelling of `/a%25zz`).
//!
//! The same rules serve the path and the query: the delimiters with a meaning in either are
//! all in the reserved set, which is left alone. Because no raw `%` survives, the rules are
//! local to each octet: normalizing a whole path equals normalizing each of its segments and
//! parameters, and the output is a fixed point (idempotent). The output is ASCII and keeps
//! raw only unreserved and reserved characters, so the url crate's own encoding (which
//! escapes a subset of the "other" octets, and `'` in a query) leaves it as it is.

use std::borrow::Cow;

/// RFC 3986 §2.3 unreserved characters: the only ones whose escapes are always equivalent
/// to the character itself.
#[inline]
pub(crate) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 §2.2 reserved characters (gen-delims and sub-delims).
const RESERVED: &[u8] = b":/?#[]@!$&'()*+,;=";

/// `KEEP[b]`: the octet `b`, raw, is already in its canonical spelling (unreserved or
/// reserved). A lookup per byte is the whole cost of a component that needs no change.
static KEEP: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
        b += 1;
    }
    let mut i = 0;
    while i < RESERVED.len() {
        table[RESERVED[i] as usize] = true;
        i += 1;
    }
    table
};

/// The value of one hex digit (either case).
#[inline]
pub(crate) fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_escape(buf: &mut String, octet: u8) {
    buf.push('%');
    buf.push(char::from(UPPER_HEX[usize::from(octet >> 4)]));
    buf.push(char::from(UPPER_HEX[usize::from(octet & 15)]));
}

/// Whether `s` is already in canonical form as far as raw octets go: only unreserved and
/// reserved characters, and no `%` (escapes are checked by [`normalize`]). Eight lookups
/// per branch: the lookups are independent, so this runs well under a cycle per byte,
/// where a branch per byte would not.
#[inline]
pub(crate) fn is_plain(s: &str) -> bool {
    let mut chunks = s.as_bytes().chunks_exact(8);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |ok, &b| ok & KEEP[usize::from(b)]) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| KEEP[usize::from(b)])
}

/// Normalizes the percent-encoding of `s` (see the module doc); borrows when nothing
/// changes, which is the common case: a link with no `%` and no character to escape is only
/// scanned.
pub(crate) fn normalize(s: &str) -> Cow<'_, str> {
    if is_plain(s) {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let first = bytes
        .iter()
        .position(|&b| !KEEP[usize::from(b)])
        .unwrap_or(bytes.len());
    let mut out: Option<String> = None;
    // `s[..copied]` is already in `out`; `copied` and `i` stay on char boundaries of `s`
    // (they only ever step over ASCII bytes or whole characters).
    let mut copied = 0;
    let mut i = first;
    while i < bytes.len() {
        let b = bytes[i];
        if KEEP[usize::from(b)] {
            i += 1;
            continue;
        }
        if b == b'%' {
            let hex = bytes
                .get(i + 1)
                .and_then(|&h| hex_value(h))
                .zip(bytes.get(i + 2).and_then(|&l| hex_value(l)));
            if let Some((hi, lo)) = hex {
                let octet = (hi << 4) | lo;
                let decode = is_unreserved(octet);
                if decode || bytes[i + 1].is_ascii_lowercase() || bytes[i + 2].is_ascii_lowercase()
                {
                    let buf = out.get_or_insert_with(|| String::with_capacity(s.len() + 8));
                    buf.push_str(&s[copied..i]);
                    if decode {
                        buf.push(char::from(octet));
                    } else {
                        push_escape(buf, octet);
                    }
                    copied = i + 3;
                }
                i += 3;
                continue;
            }
        }
        // An octet to escape: a lone `%`, an ASCII character outside both sets, or a
        // non-ASCII character (all its UTF-8 bytes).
        let len = if b.is_ascii() {
            1
        } else {
            s[i..].chars().next().map_or(1, char::len_utf8)
        };
        let buf = out.get_or_insert_with(|| String::with_capacity(s.len() + 8));
        buf.push_str(&s[copied..i]);
        for &octet in &bytes[i..i + len] {
            push_escape(buf, octet);
        }
        i += len;
        copied = i;
    }
    match out {
        None => Cow::Borrowed(s),
        Some(mut buf) => {
            buf.push_str(&s[copied..]);
            Cow::Owned(buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_plain, normalize};

    #[test]
    fn escapes() {
        for (input, want) in [
            ("", ""),
            ("plain", "plain"),
            ("%66oo", "foo"),
            ("%7e%7E%2d%2E%5f", "~~-._"),
            ("%2f%3f%26%3d%23", "%2F%3F%26%3D%23"),
            ("%c3%a9", "%C3%A9"),
            ("%C3%A9", "%C3%A9"),
            ("x%41", "xA"),
            ("%41x", "Ax"),
            ("%2541", "%2541"),
            // reserved characters stay as they came, raw or escaped
            (":/?#[]@!$&'()*+,;=", ":/?#[]@!$&'()*+,;="),
            (
                "%3a%2F%5b%5D%40%21%24%27%28%29%2a%2B%2c%3b",
                "%3A%2F%5B%5D%40%21%24%27%28%29%2A%2B%2C%3B",
            ),
            // other characters are escaped, raw or not
            ("a^b|c", "a%5Eb%7Cc"),
            ("a%5eb%7Cc", "a%5Eb%7Cc"),
            ("\"<>\\`{}", "%22%3C%3E%5C%60%7B%7D"),
            (" \t\u{7f}", "%20%09%7F"),
            ("\u{e9}\u{20ac}x", "%C3%A9%E2%82%ACx"),
            // a `%` that starts no escape is an escaped `%`
            ("%", "%25"),
            ("a%", "a%25"),
            ("a%4", "a%254"),
            ("%zz%41", "%25zzA"),
            ("%%41", "%25A"),
            ("%%30a", "%250a"),
            ("%3%30", "%2530"),
            ("%a%62", "%25ab"),
            ("%%3a", "%25%3A"),
            ("%\u{e9}", "%25%C3%A9"),
        ] {
            let got = normalize(input);
            assert_eq!(got, want, "{input:?}");
            assert_eq!(normalize(&got), got, "not idempotent: {input:?}");
        }
        for unchanged in ["%2F%20/no/change", "a=1&b=%C3%A9", "/p/1"] {
            assert!(matches!(
                normalize(unchanged),
                std::borrow::Cow::Borrowed(_)
            ));
        }
        assert!(is_plain("/a/b;c=d?e&f+g"));
        assert!(!is_plain("/a%20"));
        assert!(!is_plain("a^"));
    }
}
