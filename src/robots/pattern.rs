//! Path patterns: percent-encoding normalization (RFC 9309 §2.2.2) and the wildcard matcher.
//!
//! Patterns and paths are brought to one canonical form before they meet, so that matching is
//! a plain byte comparison: every octet is either an RFC 3986 unreserved or reserved character,
//! or `%XX` with uppercase hex; a `%XX` that encodes an unreserved character is decoded
//! (`%62` → `b`), one that encodes a reserved character is kept (`%2F` stays distinct from
//! `/`), and everything else (non-ASCII, spaces, controls, a `%` that starts no escape) is
//! encoded. The canonical form is ASCII, so patterns are stored in a `str` arena and searched
//! with `str::find`.
//!
//! Matching splits a pattern at its `*`s into literal segments: the first must be a prefix of
//! the path, each later one is found at its leftmost occurrence after the previous one, and
//! under a final `$` the last must end the path. Leftmost is always the right choice for
//! `*`-only globs (it leaves the most path for what follows), so nothing is ever revisited:
//! one pattern costs O(pattern + path) with a linear substring search (`str::find` is
//! Two-Way), where a backtracking glob would cost O(pattern × path) and a regex its automaton.

/// Whether `b` may appear literally in the canonical form (RFC 3986 unreserved or reserved).
fn literal_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b)
}

// The URL normalizer's definitions of the two, so that robots.txt patterns and the URLs
// they are matched against are decoded by the same rules.
use crate::normalize::percent::{hex_value, is_unreserved as unreserved};

fn push_escaped(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(b >> 4)] as char);
    out.push(HEX[usize::from(b & 0xf)] as char);
}

/// Appends the canonical form of the pattern `input` to `out` (see the module doc). `*` and `$`
/// are reserved characters, so they pass through and keep their meaning in patterns.
pub(crate) fn normalize_into(input: &[u8], out: &mut String) {
    normalize(input, out, false);
}

/// Appends the canonical form of the URL path `input` to `out`: as [`normalize_into`], and a
/// `*` or `$` in it is encoded, since in a path they are plain characters that only a pattern's
/// `%2A` or `%24` matches (RFC 9309 §2.2.3).
pub(crate) fn normalize_path_into(input: &[u8], out: &mut String) {
    normalize(input, out, true);
}

/// Whether the URL path `input` is already canonical (then it needs no copy).
pub(crate) fn is_canonical_path(input: &[u8]) -> bool {
    !input.iter().any(|&b| b == b'*' || b == b'$') && is_canonical(input)
}

fn normalize(input: &[u8], out: &mut String, path: bool) {
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'%' {
            if let (Some(hi), Some(lo)) = (
                input.get(i + 1).copied().and_then(hex_value),
                input.get(i + 2).copied().and_then(hex_value),
            ) {
                let decoded = hi << 4 | lo;
                if unreserved(decoded) {
                    out.push(decoded as char);
                } else {
                    push_escaped(out, decoded);
                }
                i += 3;
                continue;
            }
            push_escaped(out, b);
        } else if literal_ok(b) && !(path && (b == b'*' || b == b'$')) {
            out.push(b as char);
        } else {
            push_escaped(out, b);
        }
        i += 1;
    }
}

/// Whether `input` is already canonical (then a path needs no copy).
pub(crate) fn is_canonical(input: &[u8]) -> bool {
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'%' {
            match (
                input.get(i + 1).copied().and_then(hex_value),
                input.get(i + 2).copied().and_then(hex_value),
            ) {
                (Some(hi), Some(lo))
                    if !unreserved(hi << 4 | lo)
                        && !input[i + 1].is_ascii_lowercase()
                        && !input[i + 2].is_ascii_lowercase() =>
                {
                    i += 3;
                    continue;
                }
                _ => return false,
            }
        }
        if !literal_ok(b) {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether the canonical pattern `pattern` (its final `$`, if any, already taken off and given
/// as `anchored`) matches the canonical `path`. `work` grows by the bytes examined, an upper
/// bound of the time spent up to the constant of the substring search.
pub(crate) fn matches(pattern: &str, anchored: bool, path: &str, work: &mut u64) -> bool {
    let Some((head, last)) = pattern.rsplit_once('*') else {
        *work += pattern.len() as u64;
        return if anchored {
            path == pattern
        } else {
            path.starts_with(pattern)
        };
    };
    let (first, middle) = head.split_once('*').unwrap_or((head, ""));
    *work += first.len() as u64;
    if !path.starts_with(first) {
        return false;
    }
    let mut pos = first.len();
    // Under `$` the last segment is the path's end: checked first (it is O(1) to find), and the
    // middle segments are searched only in what lies between.
    let end = if anchored {
        *work += last.len() as u64;
        if path.len() - pos < last.len() || !path.ends_with(last) {
            return false;
        }
        path.len() - last.len()
    } else {
        path.len()
    };
    for segment in middle.split('*').filter(|s| !s.is_empty()) {
        match path[pos..end].find(segment) {
            Some(at) => {
                *work += (at + segment.len()) as u64;
                pos += at + segment.len();
            }
            None => {
                *work += (end - pos + segment.len()) as u64;
                return false;
            }
        }
    }
    if anchored || last.is_empty() {
        true
    } else {
        *work += (path.len() - pos + last.len()) as u64;
        path[pos..].contains(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(s: &str) -> String {
        let mut out = String::new();
        normalize_into(s.as_bytes(), &mut out);
        out
    }

    /// The definition, exponential in the number of `*`s: for small inputs only.
    fn reference(pattern: &[u8], anchored: bool, path: &[u8]) -> bool {
        match pattern.split_first() {
            None => !anchored || path.is_empty(),
            Some((b'*', rest)) => (0..=path.len()).any(|i| reference(rest, anchored, &path[i..])),
            Some((c, rest)) => path.first() == Some(c) && reference(rest, anchored, &path[1..]),
        }
    }

    #[test]
    fn normalization_follows_rfc_9309() {
        assert_eq!(canon("/foo/bar/%62%61%7A"), "/foo/bar/baz");
        assert_eq!(canon("/foo/bar/ツ"), "/foo/bar/%E3%83%84");
        assert_eq!(canon("/foo/bar/%e3%83%84"), "/foo/bar/%E3%83%84");
        assert_eq!(canon("/a%2fb"), "/a%2Fb");
        assert_eq!(canon("/a%2Fb"), "/a%2Fb");
        assert_ne!(canon("/a%2Fb"), canon("/a/b"));
        assert_eq!(canon("/a b"), "/a%20b");
        assert_eq!(canon("/100%"), "/100%25");
        assert_eq!(canon("/%zz"), "/%25zz");
        assert_eq!(canon("/*.pdf$"), "/*.pdf$");
        assert_eq!(canon("/a?b=c&d=e"), "/a?b=c&d=e");
        // In a path `*` and `$` are characters, which only an encoded pattern matches.
        let mut path = String::new();
        normalize_path_into(b"/a*b$c%2a%24", &mut path);
        assert_eq!(path, "/a%2Ab%24c%2A%24");
        assert!(is_canonical_path(path.as_bytes()));
        assert!(!is_canonical_path(b"/a*b"));
        assert!(!is_canonical_path(b"/a$"));
        for s in ["/a b", "/%62", "/ツ", "/%2f", "/100%", "/x"] {
            assert_eq!(is_canonical(s.as_bytes()), canon(s) == s, "{s}");
            assert!(is_canonical(canon(s).as_bytes()), "{s}");
        }
    }

    #[test]
    fn wildcards_and_anchor() {
        let m = |p: &str, a: bool, s: &str| matches(p, a, s, &mut 0);
        assert!(m("/fish", false, "/fish.html"));
        assert!(!m("/fish", false, "/Fish"));
        assert!(m("/fish*", false, "/fish"));
        assert!(m("/*.php", false, "/folder/filename.php?parameters"));
        assert!(m("/*.php", true, "/folder/filename.php"));
        assert!(!m("/*.php", true, "/filename.php?parameters"));
        assert!(!m("/*.php", true, "/filename.php5"));
        assert!(m("/fish*.php", false, "/fish.php"));
        assert!(!m("/fish*.php", false, "/Fish.PHP"));
        assert!(m("/a$b", false, "/a$bc"));
        assert!(m("/ab*b", true, "/abb"));
        assert!(!m("/ab*ab", true, "/ab"));
        assert!(m("", true, ""));
        assert!(!m("", true, "/"));
        assert!(m("", false, "/"));
    }

    #[test]
    fn work_is_linear_in_pattern_plus_path() {
        // A backtracking matcher spends |path| × |segment| here.
        let path = format!("/{}", "a".repeat(4000));
        let pattern = format!("/*{}b*{}b", "a".repeat(500), "a".repeat(500));
        let mut work = 0;
        assert!(!matches(&pattern, false, &path, &mut work));
        assert!(work <= (path.len() + pattern.len()) as u64, "{work}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn agrees_with_the_reference(
            pattern in "[ab*/]{0,8}",
            anchored: bool,
            path in "[ab/]{0,10}",
        ) {
            prop_assert_eq!(
                matches(&pattern, anchored, &path, &mut 0),
                reference(pattern.as_bytes(), anchored, path.as_bytes()),
            );
        }

        #[test]
        fn normalizing_is_idempotent(input in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut raw = String::new();
            normalize_into(&input, &mut raw);
            prop_assert!(raw.is_ascii());
            prop_assert!(is_canonical(raw.as_bytes()));
            let mut twice = String::new();
            normalize_into(raw.as_bytes(), &mut twice);
            prop_assert_eq!(&twice, &raw);
        }
    }
}
