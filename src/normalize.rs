//! URL canonical form: the one function the whole crawler uses to decide whether two
//! spellings are the same URL before the seen-set is asked.
//!
//! Parsing is the `url` crate's (WHATWG URL Standard), which already lowercases the
//! scheme and host, converts IDN hosts to punycode, removes default ports, resolves dot
//! segments and turns an empty path into `/`. On top of that this first version drops the
//! fragment (it never reaches the server) and a trailing empty query (`?`), and refuses
//! everything that is not `http`/`https` with a host. Richer rules (query parameter
//! stripping, percent-encoding normalization) arrive with the normalization issue; they
//! belong here and nowhere else.

use url::Url;

/// Why a link was not turned into a crawlable URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("not an http(s) URL")]
    Scheme,
    #[error("URL has no host")]
    NoHost,
    #[error("URL has credentials")]
    Credentials,
    #[error("not a valid URL")]
    Unparsable,
}

/// Canonicalizes an already parsed URL in place.
pub fn canonicalize(url: &mut Url) -> Result<(), Rejected> {
    match url.scheme() {
        "http" | "https" => {}
        _ => return Err(Rejected::Scheme),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Rejected::NoHost);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Rejected::Credentials);
    }
    url.set_fragment(None);
    if url.query() == Some("") {
        url.set_query(None);
    }
    Ok(())
}

/// Parses and canonicalizes a URL written by a person or found in a page.
pub fn normalize_str(input: &str) -> Result<Url, Rejected> {
    let mut url = Url::parse(input.trim()).map_err(|_| Rejected::Unparsable)?;
    canonicalize(&mut url)?;
    Ok(url)
}

/// The politeness key of a URL: scheme, host and port, e.g. `http://a.test:8080`.
/// Requests to one key share one rate limit and one concurrency cap.
pub fn host_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{}:{}", url.scheme(), host, port),
        None => format!("{}://{}", url.scheme(), host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_url_agree() {
        for input in [
            "HTTP://Example.COM:80/a/./b/../b#frag",
            "http://example.com/a/b",
            "http://example.com/a/b?",
            "http://example.com/a/c/../b#",
        ] {
            assert_eq!(
                normalize_str(input).unwrap().as_str(),
                "http://example.com/a/b",
                "{input}"
            );
        }
        assert_eq!(
            normalize_str("https://example.com:443").unwrap().as_str(),
            "https://example.com/"
        );
    }

    #[test]
    fn non_http_is_rejected() {
        assert_eq!(normalize_str("mailto:a@b.c").unwrap_err(), Rejected::Scheme);
        assert_eq!(
            normalize_str("javascript:void(0)").unwrap_err(),
            Rejected::Scheme
        );
        assert_eq!(normalize_str("ftp://x.y/").unwrap_err(), Rejected::Scheme);
        assert_eq!(
            normalize_str("not a url").unwrap_err(),
            Rejected::Unparsable
        );
        assert_eq!(
            normalize_str("http://user:pw@x.y/").unwrap_err(),
            Rejected::Credentials
        );
    }

    #[test]
    fn host_keys() {
        let u = Url::parse("http://A.test:8080/x").unwrap();
        assert_eq!(host_key(&u), "http://a.test:8080");
        let u = Url::parse("https://a.test/x").unwrap();
        assert_eq!(host_key(&u), "https://a.test");
    }
}
