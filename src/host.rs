//! Host identity: how the crawl names a host wherever it compares, budgets or queues by host.
//! Two forms, each derived here and nowhere else:
//!
//! - the **host key** `scheme://host[:port]` ([`host_key`], [`key_of`]): the frontier's
//!   queues, per-host politeness, Redis's queues and leases; one per site;
//! - the **host name** ([`host_name`]): lowercase, without IPv6 brackets and trailing dots;
//!   what scope rules, the request gate's seed exception, the per-name budget and address
//!   look-ups compare (one per name, shared by its http and https sites).
//!
//! Guarantees: `a.test.` and `a.test` are one host in both forms; `[::1]` in a URL and
//! `::1` in a rule are one name; the name of a key ([`key_name`]) is the name of the URL the
//! key was made from. Why one module: the crawl once derived host identity in six places
//! with three different trims, so two spellings of one host could be two hosts to one
//! stage and one to another.

use std::borrow::Cow;

use url::Url;

/// A host as compared: lowercase, without IPv6 brackets, without trailing dots (a host
/// made only of dots keeps them). Borrows unless it must lowercase.
pub fn host_name(host: &str) -> Cow<'_, str> {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let trimmed = host.trim_end_matches('.');
    let host = if trimmed.is_empty() { host } else { trimmed };
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// The host key of a URL: scheme, host and port, e.g. `http://a.test:8080`. Requests to one
/// key share one rate limit and one concurrency cap. A domain's trailing dots are left out
/// (`a.test.` and `a.test` are one host), also for a URL that was not canonicalized.
pub fn host_key(url: &Url) -> String {
    host_key_of(url.scheme(), url.host_str().unwrap_or(""), url.port())
}

/// The host key of a URL given as its parts (see [`host_key`]): for links kept as text
/// with offsets (`normalize::Link`), which have the parts without a `Url`.
pub fn host_key_of(scheme: &str, host: &str, port: Option<u16>) -> String {
    let folded = host.trim_end_matches('.');
    // IP addresses never end in a dot; a host made only of dots keeps them.
    let host = if folded.is_empty() { host } else { folded };
    match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// The host key of URL text (empty if it is not a URL).
pub fn key_of(url: &str) -> String {
    Url::parse(url).map(|u| host_key(&u)).unwrap_or_default()
}

/// The host name of host key `key` (no scheme, no port; see [`host_name`]).
pub fn key_name(key: &str) -> Cow<'_, str> {
    host_name(key_host(key))
}

/// The host part of host key `key` (`scheme://host[:port]`) as it is spelled there: no
/// scheme, no port, not folded (keys made by [`host_key`] are folded already).
pub fn key_host(key: &str) -> &str {
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    // An IPv6 literal keeps its brackets in a key, so the port is what follows `]:`.
    match rest.rfind(']') {
        Some(end) => &rest[..=end],
        None => rest.rsplit_once(':').map_or(rest, |(host, _)| host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_whatever_its_spelling() {
        assert_eq!(host_name("A.Test."), "a.test");
        assert_eq!(host_name("[::1]"), "::1");
        assert_eq!(host_name("::1"), "::1");
        assert_eq!(host_name(".."), "..");
        assert!(matches!(host_name("a.test"), Cow::Borrowed(_)));
        let url = Url::parse("http://a.test.:8080/x").unwrap();
        assert_eq!(host_key(&url), "http://a.test:8080");
        assert_eq!(key_of("https://[::1]/p"), "https://[::1]");
        assert_eq!(key_of("not a url"), "");
    }

    #[test]
    fn a_keys_name_is_its_urls_name() {
        for url in [
            "http://a.test/",
            "https://a.test:8443/x",
            "http://[::1]:80/",
            "https://[2001:db8::1]/",
            "http://10.0.0.1:8080/",
        ] {
            let parsed = Url::parse(url).unwrap();
            assert_eq!(
                key_name(&host_key(&parsed)),
                host_name(parsed.host_str().unwrap()),
                "{url}"
            );
        }
    }
}
