//! Per-site settings: the `[[site]]` sections of the configuration, matched by host pattern,
//! and what each overrides for the hosts it matches.
//!
//! A section names a host pattern (`host = "example.com"` or `"*.example.com"`, the same
//! matcher as `[network] resolve`: `crate::config::host_matches`) and overrides, for the
//! hosts it matches, `per_host_rps`, `per_host_burst`, `per_host_concurrency` (the frontier
//! gives the host name's budget these limits when it makes it), `user_agent`, extra request
//! `headers` and HTTP basic `auth` (the fetcher adds them to every request to the host,
//! robots.txt included), and `max_pages` (admission's cap on URLs queued for the host, in
//! place of `scope.max_pages_per_host`).
//!
//! Guarantees: the first section whose pattern matches wins, whole (sections are not
//! merged), so the order in the file is the order of precedence; a host no section matches
//! gets the crawl's settings unchanged. Credentials are never logged: [`SiteAuth`]'s `Debug`
//! and its serialization (`crawler config`) show the password as `[redacted]`, and the
//! archive's request record writes `authorization: Basic [redacted]` rather than the header
//! the request sent (a WARC is meant to be shared; the credentials are not). The robots.txt
//! product token stays the crawl's `user_agent`'s: a site's user agent changes what servers
//! see, not which robots.txt group the crawl obeys.
//!
//! Why one module: the frontier, admission and the fetcher each ask it about a host (once
//! per request for the fetcher), so matching lives in one place and cannot disagree.
//! Matching is a linear scan of the sections: a configuration has a handful, and a scan of
//! a few suffix comparisons costs less than any index.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::config::host_matches;

/// One `[[site]]` section as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SiteSection {
    /// The host pattern: a host name, or `*.suffix` for every name under it.
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host_rps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host_burst: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host_concurrency: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// Extra request headers, name to value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// URLs ever queued per host it matches (0 = no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<SiteAuth>,
}

/// HTTP basic credentials: `auth = { user = "...", password = "..." }`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteAuth {
    pub user: String,
    pub password: String,
}

const REDACTED: &str = "[redacted]";

impl fmt::Debug for SiteAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SiteAuth")
            .field("user", &self.user)
            .field("password", &REDACTED)
            .finish()
    }
}

impl Serialize for SiteAuth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("SiteAuth", 2)?;
        st.serialize_field("user", &self.user)?;
        st.serialize_field("password", REDACTED)?;
        st.end()
    }
}

/// The checked sections, in the order of the file.
#[derive(Debug, Clone, Default)]
pub struct Sites {
    sections: Vec<Site>,
}

/// One section, ready for use.
#[derive(Debug, Clone)]
pub struct Site {
    pattern: String,
    pub(crate) rps: Option<f64>,
    pub(crate) burst: Option<u32>,
    pub(crate) concurrency: Option<u32>,
    pub(crate) max_pages: Option<u64>,
    /// The user agent and extra headers, to set on each request.
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) auth: Option<SiteAuth>,
}

/// Why a `[[site]]` section was refused: the key, and the problem.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("site[{index}].{key}: {message}")]
pub struct SiteError {
    pub index: usize,
    pub key: String,
    pub message: String,
}

impl Sites {
    /// Checks `sections` (in file order) and prepares them.
    pub fn new(sections: &[SiteSection]) -> Result<Sites, SiteError> {
        let mut out = Vec::with_capacity(sections.len());
        for (index, s) in sections.iter().enumerate() {
            let error = |key: &str, message: String| SiteError {
                index,
                key: key.to_string(),
                message,
            };
            let pattern = s.host.to_ascii_lowercase();
            let body = pattern.strip_prefix("*.").unwrap_or(&pattern);
            if body.is_empty() || body.contains(['*', '/', ':', ' ']) {
                return Err(error(
                    "host",
                    format!("{:?}: a host pattern is a host name or *.suffix", s.host),
                ));
            }
            if let Some(rps) = s.per_host_rps {
                if !(rps.is_finite() && rps > 0.0) {
                    return Err(error(
                        "per_host_rps",
                        format!("{rps} is not a positive number of requests per second"),
                    ));
                }
            }
            for (key, value) in [
                ("per_host_burst", s.per_host_burst),
                ("per_host_concurrency", s.per_host_concurrency),
            ] {
                if value == Some(0) {
                    return Err(error(key, "must be at least 1".into()));
                }
            }
            let mut headers = reqwest::header::HeaderMap::new();
            if let Some(agent) = &s.user_agent {
                let value = reqwest::header::HeaderValue::from_str(agent).map_err(|_| {
                    error(
                        "user_agent",
                        format!("{agent:?} is not a valid header value"),
                    )
                })?;
                headers.insert(reqwest::header::USER_AGENT, value);
            }
            for (name, value) in &s.headers {
                let key = format!("headers.{name}");
                let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| error(&key, "is not a valid header name".into()))?;
                if header == reqwest::header::AUTHORIZATION {
                    return Err(error(
                        &key,
                        "use auth = { user = \"...\", password = \"...\" }, which is never logged"
                            .into(),
                    ));
                }
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|_| error(&key, format!("{value:?} is not a valid header value")))?;
                headers.insert(header, value);
            }
            if let Some(auth) = &s.auth {
                if auth.user.contains(':') {
                    return Err(error(
                        "auth.user",
                        "a basic-auth user name cannot hold ':'".into(),
                    ));
                }
            }
            out.push(Site {
                pattern,
                rps: s.per_host_rps,
                burst: s.per_host_burst,
                concurrency: s.per_host_concurrency,
                max_pages: s.max_pages,
                headers,
                auth: s.auth.clone(),
            });
        }
        Ok(Sites { sections: out })
    }

    /// The settings for `host` (a host name, any case): the first section that matches.
    pub fn for_host(&self, host: &str) -> Option<&Site> {
        if self.sections.is_empty() {
            return None;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.sections
            .iter()
            .find(|s| host_matches(&s.pattern, &host))
    }

    /// The settings for the host of `url`.
    pub(crate) fn for_url(&self, url: &url::Url) -> Option<&Site> {
        self.for_host(url.host_str()?)
    }

    /// Whether any section caps a host's pages (admission then checks each URL's host).
    pub(crate) fn caps_pages(&self) -> bool {
        self.sections.iter().any(|s| s.max_pages.is_some())
    }

    /// Whether there are no sections.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }
}

impl Site {
    /// Adds this site's headers and credentials to a request.
    pub(crate) fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.headers(self.headers.clone());
        match &self.auth {
            Some(auth) => request.basic_auth(&auth.user, Some(&auth.password)),
            None => request,
        }
    }

    /// The request's header lines as the archive records them: the site's headers, and
    /// its credentials redacted.
    pub(crate) fn archived_lines(&self) -> String {
        let mut lines = String::new();
        for (name, value) in &self.headers {
            if name == reqwest::header::USER_AGENT {
                continue;
            }
            lines.push_str(name.as_str());
            lines.push_str(": ");
            lines.push_str(&String::from_utf8_lossy(value.as_bytes()));
            lines.push_str("\r\n");
        }
        if self.auth.is_some() {
            lines.push_str("authorization: Basic [redacted]\r\n");
        }
        lines
    }

    /// The user agent this site sends, if it has its own.
    pub(crate) fn user_agent(&self) -> Option<&str> {
        self.headers
            .get(reqwest::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(host: &str) -> SiteSection {
        SiteSection {
            host: host.into(),
            ..SiteSection::default()
        }
    }

    #[test]
    fn the_first_matching_section_wins() {
        let sites = Sites::new(&[
            SiteSection {
                per_host_rps: Some(2.0),
                ..section("a.example.com")
            },
            SiteSection {
                per_host_rps: Some(5.0),
                ..section("*.example.com")
            },
        ])
        .unwrap();
        assert_eq!(sites.for_host("a.example.com").unwrap().rps, Some(2.0));
        assert_eq!(sites.for_host("B.Example.com").unwrap().rps, Some(5.0));
        assert_eq!(sites.for_host("x.b.example.com").unwrap().rps, Some(5.0));
        assert!(sites.for_host("example.com").is_none());
        assert!(sites.for_host("notexample.com").is_none());
    }

    #[test]
    fn bad_sections_are_refused_with_their_key() {
        let bad = |s: SiteSection| Sites::new(&[section("ok.test"), s]).unwrap_err();
        assert_eq!(bad(section("")).key, "host");
        assert_eq!(bad(section("a.*.test")).key, "host");
        let e = bad(SiteSection {
            per_host_rps: Some(0.0),
            ..section("a.test")
        });
        assert_eq!((e.index, e.key.as_str()), (1, "per_host_rps"));
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_string(), "Basic x".to_string());
        let e = bad(SiteSection {
            headers,
            ..section("a.test")
        });
        assert_eq!(e.key, "headers.Authorization");
        let mut headers = BTreeMap::new();
        headers.insert("bad name".to_string(), "v".to_string());
        assert_eq!(
            bad(SiteSection {
                headers,
                ..section("a.test")
            })
            .key,
            "headers.bad name"
        );
    }

    #[test]
    fn credentials_never_show_in_debug_serialization_or_the_archive() {
        let s = SiteSection {
            auth: Some(SiteAuth {
                user: "alice".into(),
                password: "s3cret".into(),
            }),
            ..section("a.test")
        };
        assert!(!format!("{s:?}").contains("s3cret"));
        assert!(!toml::to_string(&s).unwrap().contains("s3cret"));
        let sites = Sites::new(&[s]).unwrap();
        let site = sites.for_host("a.test").unwrap();
        let lines = site.archived_lines();
        assert_eq!(lines, "authorization: Basic [redacted]\r\n");
        let request = site
            .apply(reqwest::Client::new().get("http://a.test/"))
            .build()
            .unwrap();
        // What the request itself sends: base64("alice:s3cret").
        assert_eq!(request.headers()["authorization"], "Basic YWxpY2U6czNjcmV0");
    }
}

#[cfg(test)]
mod config_tests {
    use crate::config::Config;

    #[test]
    fn site_sections_load_and_unknown_keys_name_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[[site]]\nhost = \"*.example.com\"\nper_host_rps = 2.0\nheaders = { \"X-A\" = \"1\" }\n\
             auth = { user = \"u\", password = \"p\" }\n\n[[site]]\nhost = \"b.test\"\nmax_pagez = 3\n",
        )
        .unwrap();
        let e = Config::load(Some(&path), &[]).unwrap_err().to_string();
        assert!(
            e.contains("c.toml:9") && e.contains("\"max_pagez\"") && e.contains("[[site]]"),
            "{e}"
        );
        std::fs::write(
            &path,
            "[[site]]\nhost = \"*.example.com\"\nper_host_rps = 2.0\n\n[[site]]\nhost = \"b/x\"\n",
        )
        .unwrap();
        let e = Config::load(Some(&path), &[]).unwrap_err().to_string();
        assert!(e.contains("site[1].host"), "{e}");
        std::fs::write(&path, "[[site]]\nhost = \"a.test\"\nmax_pages = 3\n").unwrap();
        let c = Config::load(Some(&path), &[]).unwrap();
        assert_eq!(c.site[0].max_pages, Some(3));
    }
}
