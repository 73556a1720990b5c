//! The crawl's cookie jar (`network.cookies`, off by default): a cookie a host sets is sent
//! back to the hosts RFC 6265 says it belongs to, and the jar survives `--resume`.
//!
//! Storage and matching are the `cookie_store` crate's (domain and path matching, `Secure`,
//! expiry, `Max-Age`, host-only cookies): the crate reqwest's own `Jar` is built on, at the
//! same version. reqwest's `Jar` cannot be saved or bounded, so this jar wraps a
//! `cookie_store::CookieStore` itself and plugs into the client through reqwest's
//! `CookieStore` trait (its `cookies` feature).
//!
//! Guarantees:
//! - **Bounded**: at most `network.max_cookies` cookies (RFC 6265 §6.1 asks for at least
//!   3000); once full, new cookies are not kept (replacing one already held still works),
//!   and that is logged once. A host setting a fresh cookie per page cannot grow memory or
//!   the checkpoint.
//! - **Kept across resume**: the jar is written beside each checkpoint as
//!   `OUT/checkpoint/cookies.json` (atomically: a crash leaves the previous one) and read
//!   back by `--resume`. Session cookies (no `Expires`) are saved too: for the crawl they
//!   last as long as the crawl, which a resume continues. Cookies set between the last
//!   checkpoint and a `kill -9` are lost, like a browser's unsaved session.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use reqwest::header::HeaderValue;
use url::Url;

use crate::durable::IoAt;

/// Why the jar could not be saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CookieJarError {
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("{}: not a cookie jar this crawler wrote: {message}", path.display())]
    Format { path: PathBuf, message: String },
}

/// The jar: shared by the client (which calls it for every request and response) and the
/// checkpoints (which save it).
pub(crate) struct CookieJar {
    store: Mutex<cookie_store::CookieStore>,
    max_cookies: usize,
    warned_full: AtomicBool,
}

impl CookieJar {
    pub(crate) fn new(max_cookies: usize) -> CookieJar {
        CookieJar::with_store(cookie_store::CookieStore::default(), max_cookies)
    }

    fn with_store(store: cookie_store::CookieStore, max_cookies: usize) -> CookieJar {
        CookieJar {
            store: Mutex::new(store),
            max_cookies,
            warned_full: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, cookie_store::CookieStore> {
        // A panic while holding it cannot leave the store half-changed in a way that
        // matters more than losing the crawl's cookies would.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cookies held (expired ones not yet dropped included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().iter_any().count()
    }

    /// Where the jar is kept in an output directory.
    pub(crate) fn path(out: &Path) -> PathBuf {
        crate::checkpoint::checkpoint_dir(out).join("cookies.json")
    }

    /// The jar as saved: JSON, one object per cookie, session cookies included.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        // Writing to a Vec fails only if a cookie does not serialize, which it always does.
        if let Err(e) =
            cookie_store::serde::json::save_incl_expired_and_nonpersistent(&self.lock(), &mut bytes)
        {
            tracing::warn!("cookie jar: cannot be saved: {e}");
            bytes.clear();
        }
        bytes
    }

    /// Writes `json` (from [`CookieJar::to_json`]) atomically as the output directory's jar.
    pub(crate) fn save(out: &Path, json: &[u8]) -> Result<(), IoAt> {
        let path = CookieJar::path(out);
        let tmp = path.with_extension("json.tmp");
        crate::durable::replace(&path, tmp, json)
    }

    /// The jar saved in `out`, or an empty one if there is none (a crawl that had cookies
    /// off until now).
    pub(crate) fn load(out: &Path, max_cookies: usize) -> Result<CookieJar, CookieJarError> {
        let path = CookieJar::path(out);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(CookieJar::new(max_cookies))
            }
            Err(source) => {
                return Err(CookieJarError::Io(IoAt {
                    action: "open",
                    path,
                    source,
                }))
            }
        };
        let store =
            cookie_store::serde::json::load_all(std::io::BufReader::new(file)).map_err(|e| {
                CookieJarError::Format {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
        Ok(CookieJar::with_store(store, max_cookies))
    }
}

impl reqwest::cookie::CookieStore for CookieJar {
    fn set_cookies(&self, cookie_headers: &mut dyn Iterator<Item = &HeaderValue>, url: &Url) {
        let mut store = self.lock();
        let mut held = store.iter_any().count();
        for header in cookie_headers {
            let Ok(text) = header.to_str() else { continue };
            let Ok(cookie) = cookie_store::RawCookie::parse(text.to_string()) else {
                continue;
            };
            let path = cookie.path().unwrap_or("/").to_string();
            let domain = cookie
                .domain()
                .map(str::to_string)
                .or_else(|| url.host_str().map(str::to_string))
                .unwrap_or_default();
            let replaces = store.contains_any(&domain, &path, cookie.name());
            if held >= self.max_cookies && !replaces {
                if !self.warned_full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "cookie jar: full at network.max_cookies = {}; new cookies are not kept",
                        self.max_cookies
                    );
                }
                continue;
            }
            if store.insert_raw(&cookie, url).is_ok() && !replaces {
                held += 1;
            }
        }
    }

    fn cookies(&self, url: &Url) -> Option<HeaderValue> {
        let store = self.lock();
        let pairs: Vec<String> = store
            .get_request_values(url)
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        if pairs.is_empty() {
            return None;
        }
        HeaderValue::from_str(&pairs.join("; ")).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::cookie::CookieStore as _;

    fn set(jar: &CookieJar, url: &str, header: &str) {
        let url = Url::parse(url).unwrap();
        let value = HeaderValue::from_str(header).unwrap();
        jar.set_cookies(&mut std::iter::once(&value), &url);
    }

    fn sent(jar: &CookieJar, url: &str) -> Option<String> {
        jar.cookies(&Url::parse(url).unwrap())
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn a_cookie_goes_back_to_its_host_only() {
        let jar = CookieJar::new(10);
        set(&jar, "http://a.test/x", "sid=1; Path=/");
        assert_eq!(sent(&jar, "http://a.test/y").as_deref(), Some("sid=1"));
        assert_eq!(sent(&jar, "http://b.test/y"), None);
    }

    #[test]
    fn the_jar_stops_growing_at_its_bound_but_replaces() {
        let jar = CookieJar::new(2);
        set(&jar, "http://a.test/", "a=1");
        set(&jar, "http://a.test/", "b=1");
        set(&jar, "http://a.test/", "c=1");
        assert_eq!(jar.len(), 2);
        set(&jar, "http://a.test/", "a=2");
        let header = sent(&jar, "http://a.test/").unwrap();
        assert!(header.contains("a=2") && !header.contains("c="), "{header}");
    }

    #[test]
    fn saved_and_loaded_with_session_cookies() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(crate::checkpoint::checkpoint_dir(dir.path())).unwrap();
        let jar = CookieJar::new(10);
        set(&jar, "http://a.test/", "sid=abc");
        CookieJar::save(dir.path(), &jar.to_json()).unwrap();
        let loaded = CookieJar::load(dir.path(), 10).unwrap();
        assert_eq!(sent(&loaded, "http://a.test/").as_deref(), Some("sid=abc"));
    }
}
