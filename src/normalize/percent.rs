//! Percent-encoding normalization (RFC 3986 §6.2.2.2): `%XX` escapes of unreserved
//! characters (`A-Z a-z 0-9 - . _ ~`) are decoded, every other escape keeps its octet and
//! gets uppercase hex. Nothing else is touched: raw characters stay raw, and an escape of a
//! reserved or non-ASCII octet (`%2F`, `%3F`, `%26`, `%3D`, `%C3`...) stays an escape,
//! because decoding it could change what the server sees.
//!
//! One trap: a `%` that starts no escape (the url crate keeps it raw) could combine with a
//! decoded hex digit into a new escape (`%%30a` → `%0a`), which would change the meaning and
//! break idempotence. So where such a lone `%` occurs, escapes of hex digits are kept (their
//! hex uppercased) instead of decoded.

use std::borrow::Cow;

/// RFC 3986 §2.3 unreserved characters: the only ones whose escapes are always equivalent
/// to the character itself.
#[inline]
pub(crate) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

#[inline]
fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

fn is_escape_at(bytes: &[u8], i: usize) -> bool {
    i + 2 < bytes.len() && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit()
}

/// Normalizes the escapes in `s`; borrows when nothing changes (the common case: no `%`).
pub(crate) fn normalize(s: &str) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    let Some(first) = bytes.iter().position(|&b| b == b'%') else {
        return Cow::Borrowed(s);
    };
    let lone_percent = (first..bytes.len()).any(|i| bytes[i] == b'%' && !is_escape_at(bytes, i));
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes[..copied] are already in `out`
    let mut i = first;
    while i + 2 < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        let (Some(hi), Some(lo)) = (hex_value(bytes[i + 1]), hex_value(bytes[i + 2])) else {
            // A lone `%` is kept as it is (the url crate keeps it too).
            i += 1;
            continue;
        };
        let octet = (hi << 4) | lo;
        let decode = is_unreserved(octet) && !(lone_percent && octet.is_ascii_hexdigit());
        if decode || bytes[i + 1].is_ascii_lowercase() || bytes[i + 2].is_ascii_lowercase() {
            // `i` sits on an ASCII `%`, so it is a char boundary of `s`.
            let buf = out.get_or_insert_with(|| String::with_capacity(s.len()));
            buf.push_str(&s[copied..i]);
            if decode {
                buf.push(char::from(octet));
            } else {
                buf.push('%');
                buf.push(char::from(UPPER_HEX[usize::from(hi)]));
                buf.push(char::from(UPPER_HEX[usize::from(lo)]));
            }
            copied = i + 3;
        }
        i += 3;
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
    use super::normalize;

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
            ("%", "%"),
            ("a%", "a%"),
            ("a%4", "a%4"),
            ("%zz%41", "%zz%41"),
            ("%%41", "%%41"),
            ("%2541", "%2541"),
            ("x%41", "xA"),
            ("%41x", "Ax"),
            // a lone `%` must not capture a decoded hex digit
            ("%%30a", "%%30a"),
            ("%3%30", "%3%30"),
            ("%a%62", "%a%62"),
            ("%%61", "%%61"),
            ("%%3a", "%%3A"),
            ("%%67", "%g"),
            ("%%2f", "%%2F"),
        ] {
            assert_eq!(normalize(input), want, "{input:?}");
        }
        assert!(matches!(
            normalize("%2F%20/no/change"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
