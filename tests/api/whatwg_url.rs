//! The WHATWG URL Standard's parsing tests (web-platform-tests `urltestdata.json`, checked
//! in under `tests/data/whatwg-url/` with its licence) put to the normalizer, as links on
//! pages would be: each input resolved against its base and canonicalized
//! (`Normalizer::canonicalize`, what `crawler normalize` and the crawl do).
//!
//! For every case:
//! - an input the standard parses to an `http(s)` URL normalizes to a valid URL (its string
//!   parses back to itself), idempotently, to the same URL as the standard's own answer
//!   (`href`) normalizes to. Refused by design only: credentials (`Rejected::Credentials`)
//!   and hosts made only of dots (`http://./`, the DNS root: `Rejected::NoHost`);
//! - an input the standard parses to another scheme is refused;
//! - an input the standard refuses (`"failure": true`) is refused with an error;
//! - nothing panics.
//!
//! The `url` crate (2.5) refuses a few inputs the standard accepts: [`URL_CRATE_REFUSES`],
//! listed in rust-url's own `expected_failures.txt` too. They must be refused with an error
//! (never parsed to another URL), and the list is exact, so an upgrade that fixes them
//! shows here.
//!
//! Every case is run and every disagreement listed before the test fails, so one run shows
//! the whole picture.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::normalize_props::components;
use crawler::normalize::{reads_as, LinkBatch, Normalizer, PreparedBase, Rejected};
use serde_json::Value;
use url::Url;

const DATA: &str = include_str!("../data/whatwg-url/urltestdata.json");

/// (input, base) of the valid http(s) cases the `url` crate refuses: three or more slashes
/// before a host, against an http base (the standard skips them all).
const URL_CRATE_REFUSES: &[(&str, &str)] = &[
    ("///test", "http://example.org/"),
    ("///\\//\\//test", "http://example.org/"),
    ("///example.org/path", "http://example.org/"),
    ("///example.org/../path", "http://example.org/"),
    ("///example.org/../../", "http://example.org/"),
    ("///example.org/../path/../../", "http://example.org/"),
    ("///example.org/../path/../../path", "http://example.org/"),
];

/// One test of `urltestdata.json`.
struct Case {
    input: String,
    base: Option<String>,
    /// The standard's answer: the URL it parses to, or `None` for a failure.
    href: Option<String>,
}

fn cases() -> Vec<Case> {
    let data: Vec<Value> = serde_json::from_str(DATA).expect("urltestdata.json is JSON");
    data.iter()
        // Strings are comments.
        .filter_map(Value::as_object)
        .map(|case| Case {
            input: case["input"].as_str().expect("input").to_string(),
            base: case["base"].as_str().map(str::to_string),
            href: if case.get("failure").and_then(Value::as_bool) == Some(true) {
                None
            } else {
                Some(case["href"].as_str().expect("href").to_string())
            },
        })
        .collect()
}

/// The input resolved against its base and canonicalized, as a link on the base's page is.
fn normalize(normalizer: &Normalizer, case: &Case) -> Result<Url, Rejected> {
    let base = match &case.base {
        Some(base) => Some(Url::parse(base).map_err(|_| Rejected::Unparsable)?),
        None => None,
    };
    let mut url = Url::options()
        .base_url(base.as_ref())
        .parse(&case.input)
        .map_err(|_| Rejected::Unparsable)?;
    normalizer.canonicalize(&mut url)?;
    Ok(url)
}

/// What is wrong with the normalizer's answer for `case`, if anything.
fn disagreement(normalizer: &Normalizer, case: &Case) -> Option<String> {
    let got = normalize(normalizer, case);
    let Some(href) = &case.href else {
        return got
            .ok()
            .map(|url| format!("the standard refuses it; normalized to {url}"));
    };
    let http = href.starts_with("http:") || href.starts_with("https:");
    if !http {
        return got
            .ok()
            .map(|url| format!("{href} is not http(s); normalized to {url}"));
    }
    let known = URL_CRATE_REFUSES
        .iter()
        .any(|(input, base)| case.input == *input && case.base.as_deref() == Some(*base));
    let url = match got {
        Ok(_) if known => {
            return Some("listed in URL_CRATE_REFUSES, but accepted now: update the list".into())
        }
        Err(Rejected::Unparsable) if known => return None,
        Ok(url) => url,
        // Refused by design (see `crawler::normalize`): credentials, and a host of dots.
        Err(Rejected::Credentials) => {
            let Ok(standard) = Url::parse(href) else {
                return Some(format!("the url crate cannot parse the standard's {href}"));
            };
            return (standard.username().is_empty() && standard.password().is_none())
                .then(|| format!("refused for credentials, but {href} has none"));
        }
        Err(Rejected::NoHost) => {
            let Ok(standard) = Url::parse(href) else {
                return Some(format!("the url crate cannot parse the standard's {href}"));
            };
            let dots = standard
                .host_str()
                .is_some_and(|h| h.bytes().all(|b| b == b'.'));
            return (!dots).then(|| format!("refused for its host, but {href} has one"));
        }
        Err(e) => return Some(format!("{href} is valid; refused: {e}")),
    };
    let text = url.as_str();
    match Url::parse(text) {
        Ok(again) if again.as_str() == text => {}
        Ok(again) => return Some(format!("{text} parses back as {again}")),
        Err(e) => return Some(format!("{text} is not a valid URL: {e}")),
    }
    match normalizer.normalize_str(text) {
        Ok(twice) if twice == url => {}
        twice => return Some(format!("not idempotent: {text} normalizes to {twice:?}")),
    }
    match normalizer.normalize_str(href) {
        Ok(standard) if standard == url => None,
        standard => Some(format!(
            "normalized to {text}; the standard's {href} normalizes to {standard:?}"
        )),
    }
}

#[test]
fn whatwg_url_tests_normalize_to_valid_urls_idempotently_and_refusals_are_errors() {
    let normalizer = Normalizer::default();
    let cases = cases();
    let http_valid = cases
        .iter()
        .filter(|c| {
            c.href
                .as_deref()
                .is_some_and(|h| h.starts_with("http:") || h.starts_with("https:"))
        })
        .count();
    let failures = cases.iter().filter(|c| c.href.is_none()).count();
    eprintln!(
        "{} cases: {http_valid} valid http(s), {failures} failures",
        cases.len()
    );
    assert!(
        http_valid > 200 && failures > 200,
        "the whole suite is read"
    );
    let mut wrong = Vec::new();
    for case in &cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| disagreement(&normalizer, case)));
        let problem = match outcome {
            Ok(problem) => problem,
            Err(_) => Some("panicked".to_string()),
        };
        if let Some(problem) = problem {
            wrong.push(format!(
                "{:?} against {:?}: {problem}",
                case.input, case.base
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases disagree:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// The extractor's resolver (`PreparedBase::join`, which builds the common forms without
/// the parser) gives what `Url::join` gives on every case of the suite, component by
/// component: against the case's own base, and (for the absolute inputs, which have none)
/// against http and https bases.
#[test]
fn whatwg_url_tests_resolve_with_the_prepared_base_as_url_join_does() {
    let cases = cases();
    let defaults = [
        Url::parse("http://example.test/dir/page.html").expect("static URL"),
        Url::parse("https://example.test:8443/a/b/?q#f").expect("static URL"),
    ];
    let (mut compared, mut fast) = (0, 0);
    let mut wrong = Vec::new();
    for case in &cases {
        let own = case.base.as_deref().and_then(|b| Url::parse(b).ok());
        let bases: Vec<&Url> = match &own {
            Some(base) => vec![base],
            None => defaults.iter().collect(),
        };
        for base in bases {
            let prepared = PreparedBase::new(base);
            let want = base.join(&case.input);
            let got = prepared.join(&case.input);
            compared += 1;
            fast += usize::from(prepared.join_fast(&case.input).is_some());
            let link = prepared.join_link(&case.input);
            let same = match (&want, &got, &link) {
                (Ok(w), Ok(g), Ok(l)) => components(w) == components(g) && reads_as(l, w),
                (w, g, l) => w == g && w.as_ref().err() == l.as_ref().err(),
            };
            if !same {
                wrong.push(format!(
                    "{:?} against {base}: join {want:?}, prepared {got:?}",
                    case.input
                ));
            }
            // Without the fragment, as the crawl's extractor resolves: cut before the `#`.
            let want = want.map(|mut url| {
                url.set_fragment(None);
                url
            });
            let mut batch = LinkBatch::default();
            let got = prepared.join_into_without_fragment(&case.input, &mut batch);
            let mut links = Vec::new();
            batch.finish_into(&mut links);
            let same = match (&want, &got, links.first()) {
                (Ok(w), Ok(_), Some(l)) => reads_as(l, w),
                (w, g, _) => w.as_ref().err() == g.as_ref().err(),
            };
            if !same {
                wrong.push(format!(
                    "{:?} against {base}, without fragment: join {want:?}, prepared {got:?}",
                    case.input
                ));
            }
        }
    }
    eprintln!("{compared} joins compared, {fast} on the fast path");
    assert!(fast > 100, "the fast path took only {fast}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
