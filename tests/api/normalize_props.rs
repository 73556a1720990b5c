//! Property tests of URL normalization, bounded in time (a few thousand cases each, well
//! under a second per property in a debug build): it never panics, it is idempotent for
//! every combination of options, it decodes only what does not change meaning, spellings
//! of one URL agree, and inputs the `url` crate parses equal normalize equal. The same
//! inputs are what `fuzz-normalize/` throws at it without a bound. (The hot path's speed is
//! measured by `cargo bench --bench normalize`.)

use crawler::normalize::{
    reads_as, LinkBatch, NormalizeOptions, Normalizer, PreparedBase, Rejected,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use url::Url;

/// `cases` per property, or `PROPTEST_CASES` from the environment for a longer run. Failures
/// are kept beside this file, in `normalize_props.proptest-regressions`.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

/// Any combination of the options, with the default, no, or custom glob patterns.
fn options() -> impl Strategy<Value = Normalizer> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        select(vec![0usize, 1, 2]),
    )
        .prop_map(
            |(sort_query, strip_default_documents, fold_www, collapse_slashes, strip)| {
                let strip_params = match strip {
                    0 => NormalizeOptions::default().strip_params,
                    1 => Vec::new(),
                    _ => vec!["*id".into(), "a?c".into(), "x*y*z".into()],
                };
                Normalizer::new(&NormalizeOptions {
                    sort_query,
                    strip_params,
                    strip_default_documents,
                    fold_www,
                    collapse_slashes,
                })
                .unwrap()
            },
        )
}

/// Pieces URLs are made of, weighted towards what normalization looks at.
const TOKENS: &[&str] = &[
    "http:",
    "https:",
    "HTTP:",
    "hTTpS:",
    "ftp:",
    "mailto:",
    "//",
    "/",
    "/",
    "/",
    "\\",
    "%",
    "%2e",
    "%2E",
    "%41",
    "%7e",
    "%7E",
    "%2f",
    "%3F",
    "%c3%a9",
    "%C3",
    "%zz",
    "%25",
    "..",
    ".",
    "?",
    "?",
    "#",
    "&",
    "&",
    "=",
    "=",
    ";",
    ";jsessionid=1",
    "@",
    ":",
    ":80",
    ":443",
    ":8080",
    "[",
    "]",
    "[::1]",
    "www.",
    "www.",
    "a",
    "B",
    "x",
    "z",
    "utm_x",
    "sid",
    "gclid",
    "index.html",
    "Default.aspx",
    "xn--",
    "b\u{fc}cher",
    "\u{e9}",
    "\u{20ac}",
    " ",
    "\t",
    "\n",
    "\u{0}",
    "\u{1a}",
    "\u{a0}",
    "0x7f",
    "127.0.0.1",
    "example.com",
    "a.test",
    "+",
    "'",
    "\"",
    "<",
    "{",
    "|",
    "^",
    "`",
    "~",
    "-",
    "_",
    "0",
    "9",
];

/// Strings made of URL pieces: most parse, many are weird.
fn url_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(select(TOKENS), 0..24).prop_map(|t| t.concat())
}

/// Concatenations of `min..max` tokens (much cheaper than regex strategies in a debug
/// build).
fn soup(tokens: &'static [&'static str], len: std::ops::Range<usize>) -> BoxedStrategy<String> {
    prop::collection::vec(select(tokens), len)
        .prop_map(|t| t.concat())
        .boxed()
}

const LABELS: &[&str] = &[
    "a",
    "b",
    "x1",
    "www",
    "WWW",
    "Example",
    "test",
    "b\u{fc}cher",
    "xn--bcher-kva",
    "h-0",
    "q",
];
const TLDS: &[&str] = &["com", "test", "ORG", "de", "xn--p1ai", "test."];
const SEGMENT: &[&str] = &[
    "a",
    "B",
    "z",
    "0",
    "9",
    ".",
    "_",
    "~",
    "-",
    "!",
    "$",
    "'",
    "(",
    "*",
    "+",
    ",",
    "=",
    ":",
    "@",
    ";",
    "%",
    "%41",
    "%7e",
    "%7E",
    "%2f",
    "%2F",
    "%3b",
    "%3d",
    "%25",
    "%30",
    "%c3%a9",
    "%zz",
    "%2e",
    "%2E",
    ";jsessionid=1",
    ";sid=2",
    ";v=1",
    "index.html",
    "INDEX.PHP",
    "\u{e9}",
    " ",
    "[",
    "|",
    "^",
    "{",
    "\"",
];
const NAME: &[&str] = &[
    "utm_", "UTM_", "source", "gclid", "sid", "Sid", "%73", "id", "utm%5f", "a", "b", "c", "q",
    "session_", "x", "y", "z", "1", "%", "%41", ".", "~",
];
const VALUE: &[&str] = &[
    "a", "Z", "0", "+", "/", ":", "?", "=", "@", "-", "%", "%20", "%2b", "%41", "%26", "%3D",
    "%c3%a9", "\u{e9}", "'", " ", "[", "]",
];

/// A well-formed http(s) URL spelled in many ways.
fn url_like() -> impl Strategy<Value = String> {
    let scheme = select(vec!["http", "HTTP", "https", "HtTpS"]);
    let host = prop_oneof![
        select(vec![
            "example.com",
            "WWW.Example.COM",
            "www.www.a.test",
            "www.test",
            "a.test.",
            "127.0.0.1",
            "0x7f.1",
            "[::1]",
            "[0:0::1]",
            "b\u{fc}cher.de",
            "www.xn--bcher-kva.de",
        ])
        .prop_map(String::from),
        (prop::collection::vec(select(LABELS), 0..3), select(TLDS)).prop_map(|(labels, tld)| {
            let mut host = labels.join(".");
            if !host.is_empty() {
                host.push('.');
            }
            host + tld
        }),
    ];
    let port = select(vec!["", "", ":", ":80", ":443", ":8080"]);
    let segment = prop_oneof![
        4 => soup(SEGMENT, 0..6),
        1 => select(vec![".", "..", "%2e", "%2E%2e", "index.html", "Default.aspx", ";jsessionid=1",
            "a;sid=2;v=1", "..;jsessionid=x", "%2e;jsessionid=x", "%%30", "%3%30"])
            .prop_map(String::from),
    ];
    let path = prop::collection::vec(segment, 0..6).prop_map(|s| {
        if s.is_empty() {
            String::new()
        } else {
            format!("/{}", s.join("/"))
        }
    });
    let param =
        (soup(NAME, 0..3), prop::option::of(soup(VALUE, 0..4))).prop_map(|(n, v)| match v {
            Some(v) => format!("{n}={v}"),
            None => n,
        });
    let query = prop::option::of(prop::collection::vec(param, 0..5).prop_map(|p| p.join("&")));
    let fragment = prop::option::of(soup(&["a", "#", "?", "%", "/", "%41"], 0..4));
    (scheme, host, port, path, query, fragment).prop_map(|(s, h, p, path, q, f)| {
        let mut url = format!("{s}://{h}{p}{path}");
        if let Some(q) = q {
            url.push('?');
            url.push_str(&q);
        }
        if let Some(f) = f {
            url.push('#');
            url.push_str(&f);
        }
        url
    })
}

/// The invariants of every successful normalization.
fn check_canonical(n: &Normalizer, input: &str, out: &Url) -> Result<(), TestCaseError> {
    prop_assert!(
        matches!(out.scheme(), "http" | "https"),
        "{input:?} → {out}"
    );
    prop_assert!(out.host_str().is_some_and(|h| !h.is_empty()));
    prop_assert!(out.username().is_empty() && out.password().is_none());
    prop_assert_eq!(out.fragment(), None);
    prop_assert_ne!(out.query(), Some(""));
    // One spelling per octet in path and query: unreserved raw, other escapes uppercase,
    // nothing raw but unreserved and reserved characters (so no lone `%`).
    for part in [out.path(), out.query().unwrap_or("")] {
        for unit in units(part) {
            match unit {
                Unit::Escaped(b, upper) => {
                    prop_assert!(!unreserved(b), "{input:?} → {out}: escaped unreserved");
                    prop_assert!(upper, "{input:?} → {out}: lowercase hex");
                }
                Unit::Raw(b) => prop_assert!(
                    unreserved(b) || reserved(b),
                    "{input:?} → {out}: raw {:?}",
                    char::from(b)
                ),
            }
        }
    }
    if n.options().collapse_slashes {
        prop_assert!(!out.path().contains("//"), "{input:?} → {out}");
    }
    // No trailing dot, but the two a domain keeps when without them it reads as an invalid
    // address (`foo.09..`; see `crawler::normalize`, rule 2).
    if let Some(host) = out.host_str().filter(|h| h.ends_with('.')) {
        let dotless = host.trim_end_matches('.');
        prop_assert!(
            host.len() == dotless.len() + 2 && Url::parse(&format!("http://{dotless}/")).is_err(),
            "{input:?} → {out}"
        );
    }
    // a fixed point of the url crate's parser (which escapes some characters on its own)
    let parsed = Url::parse(out.as_str());
    prop_assert_eq!(parsed.as_ref(), Ok(out), "parser changes {:?}", input);
    // idempotent, both on the Url and through its string form
    let mut again = out.clone();
    prop_assert_eq!(n.canonicalize(&mut again), Ok(()));
    prop_assert_eq!(&again, out, "not idempotent: {:?}", input);
    let reparsed = n.normalize_str(out.as_str());
    prop_assert_eq!(
        reparsed.as_ref(),
        Ok(out),
        "string form not stable: {:?}",
        input
    );
    Ok(())
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// RFC 3986 §2.2 gen-delims and sub-delims.
fn reserved(b: u8) -> bool {
    b":/?#[]@!$&'()*+,;=".contains(&b)
}

/// An independent reading of percent-encoding: a string as a sequence of octets, each
/// either raw or escaped (with whether its hex was uppercase).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Unit {
    Raw(u8),
    Escaped(u8, bool),
}

fn units(s: &str) -> Vec<Unit> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = &s[i + 1..i + 3];
            if hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                let upper = !hex.bytes().any(|c| c.is_ascii_lowercase());
                out.push(Unit::Escaped(u8::from_str_radix(hex, 16).unwrap(), upper));
                i += 3;
                continue;
            }
        }
        out.push(Unit::Raw(b[i]));
        i += 1;
    }
    out
}

/// What a server sees: an escaped unreserved octet is the octet itself, an escaped reserved
/// octet (a delimiter) stays distinct from the raw one, and any other octet (one that may not
/// appear raw in a URI, a lone `%` included) is the same raw or escaped; the case of the hex
/// does not matter.
fn meaning(s: &str) -> Vec<(u8, bool)> {
    units(s)
        .into_iter()
        .map(|u| match u {
            Unit::Raw(b) | Unit::Escaped(b, _) if unreserved(b) => (b, false),
            Unit::Raw(b) if reserved(b) => (b, false),
            Unit::Raw(b) | Unit::Escaped(b, _) => (b, true),
        })
        .collect()
}

/// Pieces of links as pages write them, weighted towards what resolution turns on: dot
/// segments (also escaped), slashes, queries and fragments, hosts and ports, schemes, and
/// bytes the parser escapes or drops.
const LINK: &[&str] = &[
    "a",
    "b.html",
    "Ab",
    "0",
    "9",
    "-",
    "_",
    "~",
    "/",
    "/",
    "/",
    "/",
    ".",
    "..",
    "../",
    "./",
    "%2e",
    "%2E",
    "%2e%2E",
    ".%2e",
    "?",
    "?",
    "#",
    "x=1",
    "&",
    "&amp;",
    ":",
    "@",
    ";",
    "!",
    "$",
    "(",
    "*",
    "+",
    ",",
    "=",
    "%41",
    "%zz",
    "%",
    "//",
    "//h.test",
    "//h.test:8080",
    "//H.test",
    "//H.TEST",
    "//XN--p1ai",
    "HtTpS://",
    "\r",
    "\u{0}",
    "\u{1f}",
    "//h.test:80",
    "//xn--p1ai",
    "//1.2",
    "//a..b",
    "http://",
    "https://",
    "http:",
    "HTTP://",
    "mailto:",
    "h.test",
    ":443",
    ":0",
    ":65536",
    "'",
    " ",
    "\\",
    "\t",
    "\n",
    "\u{e9}",
    "[",
    "]",
    "|",
    "^",
    "{",
    "`",
    "\"",
    "<",
];

/// A link: a soup of [`LINK`] pieces, or a whole URL spelled in many ways.
fn link() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::collection::vec(select(LINK), 0..10).prop_map(|t| t.concat()),
        1 => url_like(),
        1 => url_soup(),
    ]
}

/// Every component of a URL (`Url`'s `==` compares only the text); also used by `whatwg_url`.
pub(crate) fn components(url: &Url) -> [Option<String>; 9] {
    [
        Some(url.as_str().to_string()),
        Some(url.scheme().to_string()),
        Some(url.username().to_string()),
        url.password().map(str::to_string),
        url.host().map(|h| format!("{h:?}")),
        url.port().map(|p| p.to_string()),
        Some(url.path().to_string()),
        url.query().map(str::to_string),
        url.fragment().map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn normalize_arbitrary_strings_never_panic_and_are_idempotent(n in options(), input in any::<String>()) {
        if let Ok(out) = n.normalize_str(&input) {
            check_canonical(&n, &input, &out)?;
        }
    }

    #[test]
    fn normalize_url_soup_never_panics_and_is_idempotent(n in options(), input in url_soup()) {
        if let Ok(out) = n.normalize_str(&input) {
            check_canonical(&n, &input, &out)?;
        }
    }

    #[test]
    fn normalize_url_like_is_idempotent(n in options(), input in url_like()) {
        match n.normalize_str(&input) {
            Ok(out) => check_canonical(&n, &input, &out)?,
            Err(e) => prop_assert!(
                matches!(e, Rejected::Unparsable),
                "{input:?}: {e:?}"
            ),
        }
    }

    /// The extractor's resolver (`PreparedBase::join`, which builds the common forms of
    /// links without the URL parser, and `join_link`, which builds them without a `Url`) is
    /// `Url::join`: the same URL, component by component, or the same error; and so the
    /// crawl's canonical form of every link (`canonicalize`, or `canonicalize_link` of the
    /// `Link`) is byte-identical whichever resolved it.
    #[test]
    fn prepared_base_joins_as_the_parser_does(n in options(), base in url_like(), href in link()) {
        let Ok(base) = Url::parse(&base) else { return Ok(()) };
        let prepared = PreparedBase::new(&base);
        let want = base.join(&href);
        let got = prepared.join(&href);
        let link = prepared.join_link(&href);
        match (want, got, link) {
            (Ok(mut want), Ok(mut got), Ok(mut link)) => {
                prop_assert_eq!(components(&want), components(&got), "{} + {:?}", base, href);
                prop_assert!(reads_as(&link, &want), "{} + {:?}: link {:?}", base, href, link);
                let (w, g) = (n.canonicalize(&mut want), n.canonicalize(&mut got));
                let l = n.canonicalize_link(&mut link);
                prop_assert_eq!(w, g);
                prop_assert_eq!(w, l);
                prop_assert_eq!(want.as_str(), got.as_str());
                if w.is_ok() {
                    prop_assert!(reads_as(&link, &want), "{} + {:?}: canonical {:?}", base, href, link);
                }
            }
            (want, got, link) => {
                prop_assert_eq!(&want, &got, "{} + {:?}", base, href);
                prop_assert_eq!(want.err(), link.err(), "{} + {:?}", base, href);
            }
        }
    }

    /// Resolved without its fragment (the extractor's way for the crawl: the `href` up to its
    /// `#`, or the whole `href` and its link's fragment dropped after), a link is
    /// `Url::join`'s without the fragment: the same URL, component by component, or the same
    /// error.
    #[test]
    fn prepared_base_joins_without_fragment_as_the_parser_does(
        base in url_like(),
        href in link(),
        fragment in link(),
    ) {
        let Ok(base) = Url::parse(&base) else { return Ok(()) };
        let prepared = PreparedBase::new(&base);
        // A fragment of its own, more often than the pieces give one.
        let href = format!("{href}#{fragment}");
        let want = base.join(&href).map(|mut url| {
            url.set_fragment(None);
            url
        });
        let mut batch = LinkBatch::default();
        let got = prepared.join_into_without_fragment(&href, &mut batch);
        let mut links = Vec::new();
        batch.finish_into(&mut links);
        match (want, got) {
            (Ok(want), Ok(_)) => {
                prop_assert_eq!(links.len(), 1);
                let link = &links[0];
                prop_assert!(reads_as(link, &want), "{} + {:?}: {:?} for {}", base, href, link, want);
                let parsed = link.to_url().map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(components(&parsed), components(&want), "{} + {:?}", base, href);
            }
            (want, got) => prop_assert_eq!(want.err(), got.err(), "{} + {:?}", base, href),
        }
    }

    /// With nothing stripped, sorted or folded, normalization changes no octet the server
    /// sees: the path and query mean the same, and scheme, host and port are the parser's.
    #[test]
    fn normalize_nothing_that_changes_meaning_is_decoded(input in url_like()) {
        let n = Normalizer::new(&NormalizeOptions {
            strip_params: Vec::new(),
            ..NormalizeOptions::default()
        }).unwrap();
        let Ok(parsed) = Url::parse(&input) else { return Ok(()) };
        let out = n.normalize_str(&input).unwrap();
        prop_assert_eq!(meaning(out.path()), meaning(parsed.path()), "{:?} → {}", input, out);
        let query = parsed.query().filter(|q| !q.is_empty());
        prop_assert_eq!(out.query().map(meaning), query.map(meaning), "{:?} → {}", input, out);
        // (but for the trailing dots of a domain)
        prop_assert_eq!(
            out.host_str(),
            parsed.host_str().map(|h| h.trim_end_matches('.')),
        );
        prop_assert_eq!(out.port_or_known_default(), parsed.port_or_known_default());
        prop_assert_eq!(out.scheme(), parsed.scheme());
    }

    /// Spellings of one URL agree: case of scheme and host, default port, escapes of
    /// unreserved characters in any hex case, lowercase hex, dot segments, fragment, empty
    /// query, tracking parameters, surrounding whitespace.
    #[test]
    fn normalize_spellings_of_one_url_agree(base in base_url(), flags in any::<[bool; 9]>(), seed in any::<u64>()) {
        let n = Normalizer::default();
        let variant = respell(&base, flags, seed);
        let a = n.normalize_str(&base.to_string());
        let b = n.normalize_str(&variant);
        prop_assert!(a.is_ok(), "{}", base.to_string());
        prop_assert_eq!(a, b, "{} vs {}", base.to_string(), variant);
    }
}

/// A plain URL the respellings start from.
#[derive(Debug, Clone)]
struct Base {
    https: bool,
    host: String,
    segments: Vec<String>,
    params: Vec<(String, String)>,
}

impl std::fmt::Display for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}/{}", self.host, self.segments.join("/"))?;
        if !self.params.is_empty() {
            let q: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, "?{}", q.join("&"))?;
        }
        Ok(())
    }
}

const CHUNK: &[&str] = &[
    "a", "b", "Z", "0", "7", ".", "_", "~", "-", "%2F", "%2f", "%2B", "%26", "%3D", "%3f",
    "%C3%A9", "%c3%a9",
];

fn base_url() -> impl Strategy<Value = Base> {
    (
        any::<bool>(),
        prop::collection::vec(select(&["a", "b", "c1", "host", "x-y"][..]), 2..4),
        prop::collection::vec(soup(CHUNK, 1..8), 0..4).prop_filter("not a dot segment", |s| {
            s.iter().all(|seg| !seg.chars().all(|c| c == '.'))
        }),
        prop::collection::vec(
            (
                select(&["a", "b", "id", "page", "q", "ref"][..]),
                soup(CHUNK, 0..6),
            ),
            0..4,
        ),
    )
        .prop_map(|(https, labels, segments, params)| Base {
            https,
            host: labels.join("."),
            segments,
            params: params
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        })
}

/// Another spelling of `base`, chosen by `flags` and `seed`.
fn respell(base: &Base, flags: [bool; 9], seed: u64) -> String {
    let mut rng = seed | 1;
    let mut coin = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng & 1 == 1
    };
    // Escape unreserved characters and flip the hex case of existing escapes, at random.
    let mut respell_text = |s: &str| -> String {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '%' {
                let hex: String = chars.by_ref().take(2).collect();
                out.push('%');
                out.push_str(&if coin() {
                    hex.to_lowercase()
                } else {
                    hex.to_uppercase()
                });
            } else if c.is_ascii() && unreserved(c as u8) && coin() {
                let hex = format!("{:02X}", c as u8);
                out.push('%');
                out.push_str(&if coin() { hex.to_lowercase() } else { hex });
            } else {
                out.push(c);
            }
        }
        out
    };
    let scheme = match (base.https, flags[0]) {
        (false, false) => "http",
        (false, true) => "HTTP",
        (true, false) => "https",
        (true, true) => "HtTpS",
    };
    let host = if flags[1] {
        base.host.to_uppercase()
    } else {
        base.host.clone()
    };
    let port = match (flags[2], base.https) {
        (false, _) => "",
        (true, false) => ":80",
        (true, true) => ":443",
    };
    let mut segments: Vec<String> = base.segments.iter().map(|s| respell_text(s)).collect();
    if flags[3] {
        segments.insert(0, ".".into());
    }
    if flags[4] && !segments.is_empty() {
        segments.insert(segments.len() - 1, "zz".into());
        segments.insert(segments.len() - 1, "..".into());
    }
    let mut params: Vec<String> = base
        .params
        .iter()
        .map(|(k, v)| format!("{}={}", respell_text(k), respell_text(v)))
        .collect();
    if flags[5] {
        params.insert(params.len() / 2, "utm_source=respell".into());
        params.push("GCLID=x".into());
    }
    let mut url = format!("{scheme}://{host}{port}/{}", segments.join("/"));
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    } else if flags[6] {
        url.push('?');
    }
    if flags[7] {
        url.push_str("#fragment?x=1");
    }
    if flags[8] {
        url = format!("  {url}\t\n");
    }
    url
}

/// Inputs the url crate parses equal normalize equal (through `normalize_str`, with every
/// combination of options). Pairs are made likely to parse equal; the test checks that
/// enough of them did, so that it is not vacuous.
#[test]
fn parse_equal_means_normalize_equal() {
    let mut runner = TestRunner::new(config(3000));
    let equal = std::cell::Cell::new(0u32);
    runner
        .run(
            &(
                options(),
                url_like(),
                any::<u8>(),
                any::<prop::sample::Index>(),
            ),
            |(n, a, how, at)| {
                let b = mutate(&a, how, at.index(a.len() + 1));
                if let (Ok(pa), Ok(pb)) = (Url::parse(&a), Url::parse(&b)) {
                    if pa == pb {
                        equal.set(equal.get() + 1);
                        prop_assert_eq!(
                            n.normalize_str(&a),
                            n.normalize_str(&b),
                            "{:?} vs {:?}",
                            a,
                            b
                        );
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    assert!(
        equal.get() > 1000,
        "only {} pairs parsed equal",
        equal.get()
    );
}

/// A change the WHATWG parser mostly ignores.
fn mutate(s: &str, how: u8, at: usize) -> String {
    let at = (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    match how % 5 {
        0 => format!("{}\t{}", &s[..at], &s[at..]),
        1 => format!("{}\n{}", &s[..at], &s[at..]),
        2 => format!(" {s}\u{1}"),
        3 => s.replacen("://", ":\\\\", 1),
        _ => {
            let colon = s.find(':').unwrap_or(0);
            format!("{}{}", s[..colon].to_uppercase(), &s[colon..])
        }
    }
}

/// One octet of a generated path or query, in two spellings the server reads as one.
#[derive(Debug, Clone, Copy)]
enum Octet {
    /// Unreserved: raw, or escaped with either hex case.
    Unreserved(u8),
    /// Not allowed raw in a URI (nor a delimiter): raw, or escaped with either hex case.
    Other(char),
    /// A `%` that starts no escape (it is followed by `g`), or `%25`.
    LonePercent,
    /// A delimiter: spelled the same in both, raw or escaped (its two spellings differ).
    Reserved(u8, bool),
}

/// Characters that may not appear raw in a URI, as `url_like` inputs spell them. (Not tab
/// or newline, which the parser removes, nor `\` in a path, which it reads as `/`.)
const OTHER_PATH: &[char] = &[
    ' ', '"', '<', '>', '^', '`', '{', '|', '}', '\u{1}', '\u{7f}', '\u{e9}', '\u{20ac}',
];
const OTHER_QUERY: &[char] = &[
    ' ', '"', '<', '>', '^', '`', '{', '|', '}', '\\', '\u{1}', '\u{e9}', '\u{20ac}',
];
/// Delimiters spelled alike on both sides (not `?` or `#`, which would end the component,
/// nor `/`, `&`, `;`, `.`-only segments, which other properties cover).
const DELIMS: &[u8] = b":@!$'()*+,=[]";

fn octet(others: &'static [char]) -> impl Strategy<Value = Octet> {
    prop_oneof![
        4 => select(b"aZ09-._~".to_vec()).prop_map(Octet::Unreserved),
        3 => select(others).prop_map(Octet::Other),
        1 => Just(Octet::LonePercent),
        2 => (select(DELIMS), any::<bool>()).prop_map(|(b, esc)| Octet::Reserved(b, esc)),
    ]
}

/// One spelling of `octets`, the choices drawn from `coin`.
fn spell(octets: &[Octet], coin: &mut impl FnMut() -> bool) -> String {
    let mut out = String::new();
    let escape = |out: &mut String, bytes: &[u8], lower: bool| {
        for b in bytes {
            let hex = format!("%{b:02X}");
            out.push_str(&if lower { hex.to_lowercase() } else { hex });
        }
    };
    for &o in octets {
        match o {
            Octet::Unreserved(b) if coin() => out.push(char::from(b)),
            Octet::Unreserved(b) => escape(&mut out, &[b], coin()),
            Octet::Other(c) if coin() => out.push(c),
            Octet::Other(c) => escape(&mut out, c.to_string().as_bytes(), coin()),
            Octet::LonePercent if coin() => out.push_str("%g"),
            Octet::LonePercent => out.push_str("%25g"),
            Octet::Reserved(b, false) => out.push(char::from(b)),
            Octet::Reserved(b, true) => escape(&mut out, &[b], false),
        }
    }
    out
}

/// A URL as octets: host labels, path segments, query parameters (name and value).
type Shape = (
    Vec<&'static str>,
    Vec<Vec<Octet>>,
    Vec<(Vec<Octet>, Vec<Octet>)>,
);

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec(select(&["a", "b", "host", "x-y", "www"][..]), 2..4),
        prop::collection::vec(prop::collection::vec(octet(OTHER_PATH), 1..6), 0..4),
        prop::collection::vec(
            (
                prop::collection::vec(octet(OTHER_QUERY), 1..4),
                prop::collection::vec(octet(OTHER_QUERY), 0..5),
            ),
            0..4,
        ),
    )
}

/// One spelling of a shape: `dots` trailing dots on the host, `slashes` extra `/` before each
/// segment chosen by `coin`. The path ends in `/e` and the query in `&z=e`, so that no
/// spelling ends in a space (which the parser would trim).
fn spell_url(shape: &Shape, dots: usize, extra_slashes: bool, seed: u64) -> String {
    let mut rng = seed | 1;
    let mut coin = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng & 1 == 1
    };
    let (labels, segments, params) = shape;
    let mut url = format!("http://{}{}", labels.join("."), ".".repeat(dots));
    for segment in segments {
        url.push('/');
        if extra_slashes && coin() {
            url.push('/');
        }
        url.push_str(&spell(segment, &mut coin));
    }
    url.push_str("/e");
    if !params.is_empty() {
        url.push('?');
        for (name, value) in params {
            url.push_str(&spell(name, &mut coin));
            url.push('=');
            url.push_str(&spell(value, &mut coin));
            url.push('&');
        }
        url.push_str("z=e");
    }
    url
}

proptest! {
    #![proptest_config(config(2000))]

    /// Issue 13: spellings a server reads as one normalize equal, rule by rule: unreserved
    /// and "other" characters raw or escaped, either hex case, a lone `%` or `%25`, trailing
    /// dots on the host or not, and with `collapse_slashes` `//` or `/`. Both results are
    /// canonical (which includes idempotent).
    #[test]
    fn normalize_equivalent_spellings_agree(
        shape in shape(),
        dots in (0usize..3, 0usize..3),
        seeds in any::<(u64, u64)>(),
        collapse in any::<bool>(),
    ) {
        let n = Normalizer::new(&NormalizeOptions {
            collapse_slashes: collapse,
            ..NormalizeOptions::default()
        }).unwrap();
        // Dot segments are resolved when the link is parsed, before any collapsing (as a
        // browser does before it sends the request): `/a//../b` asks for `/a/b`, `/a/../b`
        // for `/b`. So extra slashes are only equivalent where no segment is a dot segment.
        let dot_segment = shape.1.iter().any(|s| s.iter().all(|o| matches!(o, Octet::Unreserved(b'.'))));
        let slashes = collapse && !dot_segment;
        let a = spell_url(&shape, dots.0, slashes, seeds.0);
        let b = spell_url(&shape, dots.1, slashes, seeds.1);
        let (na, nb) = (n.normalize_str(&a), n.normalize_str(&b));
        let out = na.clone().map_err(|e| TestCaseError::fail(format!("{a:?}: {e:?}")))?;
        check_canonical(&n, &a, &out)?;
        prop_assert_eq!(na, nb, "{:?} vs {:?}", a, b);
    }

    /// Encoded delimiters are never decoded: a URL with one delimiter escaped normalizes
    /// differently from the same URL with it raw, and keeps the escape (uppercased).
    #[test]
    fn normalize_escaped_delimiters_stay_distinct(
        shape in shape(),
        seed in any::<u64>(),
        delim in select(b"&=+;,:@!$()*[]/?".to_vec()),
        in_query in any::<bool>(),
        lower in any::<bool>(),
    ) {
        let n = Normalizer::new(&NormalizeOptions {
            strip_params: Vec::new(),
            ..NormalizeOptions::default()
        }).unwrap();
        let base = spell_url(&shape, 0, false, seed);
        let hex = format!("%{delim:02X}");
        let escaped = if lower { hex.to_lowercase() } else { hex.clone() };
        // `?` raw in a path would start the query: only in the query.
        let in_query = in_query || delim == b'?';
        let (raw, esc) = if in_query {
            let sep = if base.contains('?') { '&' } else { '?' };
            (
                format!("{base}{sep}k=v{}w", char::from(delim)),
                format!("{base}{sep}k=v{escaped}w"),
            )
        } else {
            let (head, query) = base.split_once('?').map_or((base.as_str(), String::new()), |(h, q)| (h, format!("?{q}")));
            (
                format!("{head}/v{}w{query}", char::from(delim)),
                format!("{head}/v{escaped}w{query}"),
            )
        };
        let (nr, ne) = (n.normalize_str(&raw).unwrap(), n.normalize_str(&esc).unwrap());
        prop_assert_ne!(&nr, &ne, "{:?} vs {:?}", raw, esc);
        let part = if in_query { ne.query().unwrap_or("") } else { ne.path() };
        prop_assert!(part.contains(&format!("v{hex}w")), "{esc:?} → {ne}");
        check_canonical(&n, &esc, &ne)?;
        check_canonical(&n, &raw, &nr)?;
    }
}
