//! Parameter-name patterns for `strip_params`: a literal name or a glob with `*` (any run
//! of characters, also none) and `?` (exactly one character), matched against the whole
//! name, ASCII case-insensitively. Compiled once; matching is a few byte comparisons for
//! the usual exact names and `prefix*` patterns, no allocation and no regex.

use super::NormalizeConfigError;

#[derive(Debug, Clone)]
enum Pattern {
    /// No wildcard: the name itself, lowercased.
    Exact(Box<[u8]>),
    /// `prefix*` with no other wildcard, lowercased.
    Prefix(Box<[u8]>),
    /// Anything else, lowercased.
    Glob(Box<[u8]>),
}

/// A compiled list of patterns; matches a name if any pattern does.
#[derive(Debug, Clone, Default)]
pub(crate) struct PatternSet {
    patterns: Vec<Pattern>,
    /// Bit `b` set: some pattern can match a name whose first byte, lowercased, is `b`
    /// (all bits set if a pattern starts with a wildcard). Most parameter names of a
    /// typical link are rejected by this one test.
    first_bytes: [u64; 4],
}

impl PatternSet {
    pub(crate) fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, NormalizeConfigError> {
        let patterns = patterns
            .iter()
            .map(|p| compile(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut first_bytes = [0u64; 4];
        for pattern in &patterns {
            let (Pattern::Exact(lit) | Pattern::Prefix(lit) | Pattern::Glob(lit)) = pattern;
            match lit.first() {
                Some(&b) if b != b'*' && b != b'?' => {
                    // `lit` is lowercase ASCII; names match it case-insensitively.
                    for b in [b, b.to_ascii_uppercase()] {
                        first_bytes[usize::from(b >> 6)] |= 1 << (b & 63);
                    }
                }
                // A wildcard (or an empty prefix, i.e. `*`) first: any name may match.
                _ => first_bytes = [u64::MAX; 4],
            }
        }
        Ok(Self {
            patterns,
            first_bytes,
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `name` (a parameter name as it appears in the normalized URL) matches.
    #[inline]
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.matches_bytes(name.as_bytes())
    }

    /// Whether the name of any `&`-separated `name[=value]` parameter of `query` matches:
    /// the hot-path test, one pass over the bytes.
    pub(crate) fn matches_any_param(&self, query: &str) -> bool {
        let bytes = query.as_bytes();
        let mut start = 0;
        loop {
            let mut end = start;
            while end < bytes.len() && bytes[end] != b'=' && bytes[end] != b'&' {
                end += 1;
            }
            if self.matches_bytes(&bytes[start..end]) {
                return true;
            }
            while end < bytes.len() && bytes[end] != b'&' {
                end += 1;
            }
            if end == bytes.len() {
                return false;
            }
            start = end + 1;
        }
    }

    #[inline]
    fn matches_bytes(&self, name: &[u8]) -> bool {
        let first = name.first().copied().unwrap_or(0);
        if self.first_bytes[usize::from(first >> 6)] & (1 << (first & 63)) == 0 {
            return false;
        }
        self.patterns.iter().any(|p| match p {
            Pattern::Exact(lit) => name.eq_ignore_ascii_case(lit),
            Pattern::Prefix(lit) => {
                name.len() >= lit.len() && name[..lit.len()].eq_ignore_ascii_case(lit)
            }
            Pattern::Glob(glob) => glob_match(glob, name),
        })
    }
}

fn compile(pattern: &str) -> Result<Pattern, NormalizeConfigError> {
    let invalid = |reason: &'static str| NormalizeConfigError::InvalidPattern {
        pattern: pattern.to_string(),
        reason,
    };
    if pattern.is_empty() {
        return Err(invalid("empty pattern"));
    }
    if !pattern.is_ascii() {
        return Err(invalid(
            "non-ASCII characters never appear in a parameter name of a normalized URL \
             (they are percent-encoded); write the %XX escapes instead",
        ));
    }
    if pattern
        .bytes()
        .any(|b| b.is_ascii_control() || b.is_ascii_whitespace())
    {
        return Err(invalid("contains whitespace or a control character"));
    }
    if pattern
        .bytes()
        .any(|b| matches!(b, b'&' | b'=' | b'#' | b';'))
    {
        return Err(invalid(
            "contains '&', '=', ';' or '#', which end a parameter name",
        ));
    }
    let lower: Box<[u8]> = pattern.to_ascii_lowercase().into_bytes().into();
    let wildcards = lower.iter().filter(|&&b| b == b'*' || b == b'?').count();
    Ok(if wildcards == 0 {
        Pattern::Exact(lower)
    } else if wildcards == 1 && lower.last() == Some(&b'*') {
        Pattern::Prefix(lower[..lower.len() - 1].into())
    } else {
        Pattern::Glob(lower)
    })
}

/// Glob match with `*` and `?` over bytes, `glob` already lowercase; linear-time
/// backtracking to the last `*` (the classic two-pointer algorithm).
fn glob_match(glob: &[u8], name: &[u8]) -> bool {
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == b'?' || c == name[n].to_ascii_lowercase() => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &[&str]) -> PatternSet {
        PatternSet::new(p).unwrap()
    }

    #[test]
    fn exact_prefix_and_glob() {
        let s = set(&["sid", "utm_*", "*_ID", "x?z", "a*b*c"]);
        for yes in [
            "sid",
            "SID",
            "utm_",
            "utm_source",
            "UTM_Medium",
            "session_id",
            "_id",
            "xyz",
            "XAZ",
            "abc",
            "aXbYc",
            "abbbc",
            "a*b*c",
        ] {
            assert!(s.matches(yes), "{yes}");
        }
        for no in [
            "",
            "sids",
            "side",
            "xsid",
            "utm",
            "ut_m",
            "session_idx",
            "xz",
            "xyyz",
            "ab",
            "acb",
        ] {
            assert!(!s.matches(no), "{no}");
        }
        assert!(set(&["*"]).matches(""));
        assert!(set(&["**"]).matches("anything"));
        assert!(!PatternSet::default().matches("sid"));
        for (query, want) in [
            ("a=1&b=2", false),
            ("a=1&sid=2", true),
            ("sid", true),
            ("a&SID", true),
            ("a=sid&b=sid", false),
            ("&&", false),
            ("utm_x=1", true),
            ("", false),
        ] {
            assert_eq!(s.matches_any_param(query), want, "{query}");
            assert_eq!(
                query
                    .split('&')
                    .any(|p| s.matches(p.split('=').next().unwrap())),
                want
            );
        }
    }

    #[test]
    fn invalid_patterns_name_themselves() {
        for bad in ["", "a=b", "a&b", "a b", "\tx", "ü", "frag#", "j;x"] {
            let err = PatternSet::new(&[bad]).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }
}
