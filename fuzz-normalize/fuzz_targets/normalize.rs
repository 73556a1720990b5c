//! Fuzz target for URL normalization: any bytes, read as a string, through every
//! combination of options. Checks what tests/normalize_props.rs checks, without a bound:
//! never panics, the result is canonical (http/https, host, no fragment, no empty query)
//! and idempotent, also through its string form.
#![no_main]

use std::sync::OnceLock;

use crawler::normalize::{NormalizeOptions, Normalizer};
use libfuzzer_sys::fuzz_target;

fn normalizers() -> &'static [Normalizer] {
    static ALL: OnceLock<Vec<Normalizer>> = OnceLock::new();
    ALL.get_or_init(|| {
        (0..64u8)
            .map(|bits| {
                let strip_params = match bits >> 4 {
                    0 => NormalizeOptions::default().strip_params,
                    1 => Vec::new(),
                    2 => vec!["*id".into(), "a?c".into(), "x*y*z".into()],
                    _ => vec!["*".into()],
                };
                Normalizer::new(&NormalizeOptions {
                    sort_query: bits & 1 != 0,
                    strip_default_documents: bits & 2 != 0,
                    fold_www: bits & 4 != 0,
                    collapse_slashes: bits & 8 != 0,
                    strip_params,
                })
                .expect("valid options")
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let input = String::from_utf8_lossy(rest);
    let n = &normalizers()[usize::from(selector) % normalizers().len()];
    let Ok(out) = n.normalize_str(&input) else {
        return;
    };
    assert!(matches!(out.scheme(), "http" | "https"), "{input:?} → {out}");
    assert!(out.host_str().is_some_and(|h| !h.is_empty()), "{input:?} → {out}");
    assert_eq!(out.fragment(), None, "{input:?} → {out}");
    assert_ne!(out.query(), Some(""), "{input:?} → {out}");
    let mut again = out.clone();
    assert_eq!(n.canonicalize(&mut again), Ok(()), "{input:?} → {out}");
    assert_eq!(again, out, "not idempotent: {input:?}");
    assert_eq!(n.normalize_str(out.as_str()).as_ref(), Ok(&out), "{input:?}");
});
