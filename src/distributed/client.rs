//! The crawl's connection to Redis: one auto-reconnecting connection, the four Lua scripts,
//! a retry loop with backoff around every round trip, and the round-trip count.
//!
//! Guarantees: every call is one round trip (a pipeline counts once), counted in
//! [`Redis::round_trips`]. A call that fails because the connection dropped or Redis is
//! restarting is sent again after a backoff (50 ms doubling to 1 s) until
//! `redis_timeout_secs` have passed without an answer; then it fails with
//! [`DistributedError::Unreachable`]. Sending again is safe because every call is idempotent in
//! effect (see each script): an admission answered twice finds its bits set and queues
//! nothing twice, a release of a released lease is a no-op, and a claim whose answer was
//! lost leaves a lease that expires and is reclaimed. A script unknown to the server (a
//! restarted Redis forgets them) is loaded again and the call re-sent.
//!
//! Why `EVALSHA` with our own reload rather than the crate's `Script::invoke`: the calls are
//! pipelined (a page's admission with the acknowledgements), and `invoke` works only alone.
//!
//! # Credentials and TLS
//!
//! A Redis URL may carry a password (`redis://user:password@host:port/db`, or `?pass=` in a
//! `redis+unix://` URL). [`RedisUrl`] keeps the URL as given for connecting and shows it only
//! through [`redacted_url`], the one function every log line, error and status output uses:
//! the password becomes `***`, the user name stays (it says which ACL user was refused).
//!
//! `rediss://` speaks TLS through rustls (the redis crate's `tokio-rustls-comp`: the rustls
//! and aws-lc-rs that reqwest already brings, no OpenSSL). The server's certificate is
//! checked against the system's roots plus `network.ca_file` (the fetcher's extra roots, so
//! one file serves a private CA for both); the crate takes a custom root store only in place
//! of the system's, so the system's roots are added to it here.
//!
//! A refused password or user (`WRONGPASS`, `NOAUTH`), a missing ACL permission (`NOPERM`)
//! or a certificate the client does not trust is not transient: retrying for
//! `redis_timeout_secs` would only delay the same answer, so it fails at once with one line
//! saying what to fix.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Pipeline, Value};

use super::DistributedError;

/// A Redis URL as given (with its password, for connecting), shown redacted, with the extra
/// roots a `rediss://` URL's certificate is checked against.
#[derive(Clone, PartialEq)]
pub struct RedisUrl {
    text: String,
    ca_file: Option<PathBuf>,
}

impl RedisUrl {
    /// `text` as given; `ca_file` is `network.ca_file` (used for `rediss://` only).
    pub fn new(text: &str, ca_file: Option<&Path>) -> RedisUrl {
        RedisUrl {
            text: text.to_string(),
            ca_file: ca_file.map(Path::to_path_buf),
        }
    }

    fn is_tls(&self) -> bool {
        let scheme = self.text.split(':').next().unwrap_or_default();
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    }

    /// The client for this URL: with TLS and `ca_file`, a root store of the system's roots
    /// and the file's.
    fn client(&self) -> Result<redis::Client, DistributedError> {
        let invalid = |source| DistributedError::Url {
            url: self.to_string(),
            source,
        };
        match &self.ca_file {
            Some(path) if self.is_tls() => {
                let extra = std::fs::read(path).map_err(|source| DistributedError::CaFile {
                    path: path.clone(),
                    source,
                })?;
                let mut roots = system_roots_pem();
                roots.extend_from_slice(&extra);
                redis::Client::build_with_tls(
                    self.text.as_str(),
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(roots),
                    },
                )
                .map_err(invalid)
            }
            _ => redis::Client::open(self.text.as_str()).map_err(invalid),
        }
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redacted_url(&self.text))
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisUrl")
            .field("url", &redacted_url(&self.text))
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// What a password in a shown URL becomes.
const HIDDEN: &str = "***";

/// `url` with its password replaced by `***` (the user name kept): how a Redis URL is shown
/// anywhere (logs, errors, `crawler status`, `crawler config`).
///
/// Done on the text rather than on a parsed URL so that no spelling gets through: a password
/// with a raw `/`, `?` or `#` parses as a port, a path or a query (or not at all), so the
/// user information is everything before the URL's last `@`, and is shown only as far as a
/// plain user name goes.
pub fn redacted_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let mut shown = scheme;
    let host_part = match rest.rsplit_once('@') {
        Some((userinfo, host_part)) => {
            match userinfo.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => {
                    shown.push_str(user);
                    shown.push(':');
                    shown.push_str(HIDDEN);
                }
                None if !userinfo.contains(['/', '?', '#']) => shown.push_str(userinfo),
                _ => shown.push_str(HIDDEN),
            }
            shown.push('@');
            host_part
        }
        None => rest,
    };
    // `redis+unix:///path?user=u&pass=p`: the password is a query parameter.
    match host_part.split_once('?') {
        Some((before, query)) => {
            shown.push_str(before);
            shown.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_password_key(key) => format!("{key}={HIDDEN}"),
                    _ => pair.to_string(),
                })
                .collect();
            shown.push_str(&pairs.join("&"));
        }
        None => shown.push_str(host_part),
    }
    shown
}

fn is_password_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("pass") || key.eq_ignore_ascii_case("password")
}

/// The system's trusted roots as PEM (what the redis crate trusts without a custom store);
/// unreadable ones are skipped, as the fetcher's verifier does.
fn system_roots_pem() -> Vec<u8> {
    use data_encoding::BASE64;
    let mut pem = Vec::new();
    for certificate in rustls_native_certs::load_native_certs().certs {
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        for line in BASE64.encode(certificate.as_ref()).as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    pem
}

/// One of the crawl's Lua scripts: its text and SHA-1.
pub(crate) struct Script {
    name: &'static str,
    code: &'static str,
    sha: String,
}

impl Script {
    fn new(name: &'static str, code: &'static str) -> Script {
        let sha = redis::Script::new(code).get_hash().to_string();
        Script { name, code, sha }
    }

    /// An `EVALSHA` of this script with one key (the crawl's meta hash) and `args`.
    pub(crate) fn call(&self, pipe: &mut Pipeline, key: &str, args: &[Vec<u8>]) {
        let cmd = pipe.cmd("EVALSHA").arg(&self.sha).arg(1).arg(key);
        for a in args {
            cmd.arg(a.as_slice());
        }
    }
}

/// The scripts, loaded on connect and again after a Redis restart.
pub(crate) struct Scripts {
    pub(crate) admit: Script,
    pub(crate) claim: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            admit: Script::new("admit", include_str!("admit.lua")),
            claim: Script::new("claim", include_str!("claim.lua")),
            release: Script::new("release", include_str!("release.lua")),
            renew: Script::new("renew", include_str!("renew.lua")),
        }
    }

    fn all(&self) -> [&Script; 4] {
        [&self.admit, &self.claim, &self.release, &self.renew]
    }
}

/// The connection, the scripts and the figures.
pub(crate) struct Redis {
    /// The URL as shown: redacted.
    shown: String,
    conn: ConnectionManager,
    pub(crate) scripts: Scripts,
    timeout: Duration,
    round_trips: AtomicU64,
}

impl Redis {
    /// Connects (retrying for up to `timeout` while Redis is unreachable; at once failing
    /// on a refused password or certificate) and loads the scripts.
    pub(crate) async fn connect(
        url: &RedisUrl,
        timeout: Duration,
    ) -> Result<Redis, DistributedError> {
        let client = url.client()?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(50);
        let conn = loop {
            match client
                .get_connection_manager_with_config(config.clone())
                .await
            {
                Ok(conn) => break conn,
                Err(source) => {
                    if let Some(error) = refusal(&url.to_string(), &source) {
                        return Err(error);
                    }
                    if started.elapsed() >= timeout {
                        return Err(DistributedError::Unreachable {
                            url: url.to_string(),
                            secs: timeout.as_secs_f64(),
                            source,
                        });
                    }
                    tracing::warn!("redis {url}: {source}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        };
        let redis = Redis {
            shown: url.to_string(),
            conn,
            scripts: Scripts::new(),
            timeout,
            round_trips: AtomicU64::new(0),
        };
        redis.load_scripts().await?;
        Ok(redis)
    }

    /// Round trips made so far.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    async fn load_scripts(&self) -> Result<(), DistributedError> {
        let mut pipe = redis::pipe();
        for script in self.scripts.all() {
            pipe.cmd("SCRIPT").arg("LOAD").arg(script.code);
        }
        let shas: Vec<String> = self.raw(&pipe).await?;
        for (script, sha) in self.scripts.all().iter().zip(&shas) {
            if *sha != script.sha {
                return Err(DistributedError::Reply {
                    what: script.name,
                    detail: format!("SCRIPT LOAD answered {sha}, expected {}", script.sha),
                });
            }
        }
        Ok(())
    }

    /// Sends `pipe` until it is answered (see the module doc), reloading the scripts if
    /// Redis forgot them. Returns the replies, one per command.
    pub(crate) async fn run(&self, pipe: &Pipeline) -> Result<Vec<Value>, DistributedError> {
        for _ in 0..3 {
            match self.raw::<Vec<Value>>(pipe).await {
                Err(DistributedError::Command { source, .. }) if has_code(&source, "NOSCRIPT") => {
                    tracing::info!(
                        "redis {}: scripts unknown (a restart?); loading them",
                        self.shown
                    );
                    self.load_scripts().await?;
                }
                Err(DistributedError::Command { source, .. }) if has_code(&source, "CRAWLGONE") => {
                    return Err(DistributedError::Gone {
                        url: self.shown.clone(),
                    })
                }
                other => return other,
            }
        }
        Err(DistributedError::Reply {
            what: "script",
            detail: "Redis keeps forgetting the crawl's scripts".into(),
        })
    }

    /// One round trip, retried while Redis is unreachable.
    async fn raw<T: redis::FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, DistributedError> {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(50);
        let mut warned = false;
        loop {
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            let mut conn = self.conn.clone();
            match pipe.query_async::<T>(&mut conn).await {
                Ok(value) => {
                    if warned {
                        tracing::warn!("redis {}: reachable again", self.shown);
                    }
                    return Ok(value);
                }
                Err(source) => {
                    if let Some(error) = refusal(&self.shown, &source) {
                        return Err(error);
                    }
                    if !transient(&source) {
                        return Err(DistributedError::Command {
                            url: self.shown.clone(),
                            source,
                        });
                    }
                    if started.elapsed() >= self.timeout {
                        return Err(DistributedError::Unreachable {
                            url: self.shown.clone(),
                            secs: self.timeout.as_secs_f64(),
                            source,
                        });
                    }
                    if !warned {
                        tracing::warn!("redis {}: {source}; retrying", self.shown);
                        warned = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// The error for a request Redis (or its certificate) refused, if `e` is one: the
/// credentials (`NOAUTH`: none given, `WRONGPASS`), an ACL permission (`NOPERM`), or the
/// server's certificate. Asking again would get the same answer.
fn refusal(shown: &str, e: &redis::RedisError) -> Option<DistributedError> {
    let url = shown.to_string();
    if has_code(e, "NOAUTH") {
        return Some(DistributedError::Auth {
            url,
            detail: "Redis asks for a password (NOAUTH) and the URL gives none",
        });
    }
    if e.kind() == redis::ErrorKind::AuthenticationFailed || has_code(e, "WRONGPASS") {
        return Some(DistributedError::Auth {
            url,
            detail: "Redis refused the user name or password (WRONGPASS)",
        });
    }
    if has_code(e, "NOPERM") {
        return Some(DistributedError::Permission {
            url,
            detail: first_detail(e),
        });
    }
    certificate_error(e).map(|detail| DistributedError::Certificate { url, detail })
}

/// The words of Redis's (first) error in `e`, a pipeline's included.
fn first_detail(e: &redis::RedisError) -> String {
    if let Some(detail) = e.detail() {
        return detail.to_string();
    }
    e.clone()
        .into_server_errors()
        .and_then(|items| {
            items
                .first()
                .map(|(_, item)| item.details().unwrap_or(item.code()).to_string())
        })
        .unwrap_or_else(|| e.to_string())
}

/// rustls's words for a server certificate it refused, when the TLS handshake failed on
/// one. Found in the error's text: the redis crate keeps the `io::Error` carrying rustls's
/// error behind an `Arc<dyn Error>` whose `source()` skips it, so no downcast reaches it.
fn certificate_error(e: &redis::RedisError) -> Option<String> {
    if !e.is_io_error() {
        return None;
    }
    let text = e.to_string();
    // rustls::Error::InvalidCertificate and NoCertificatesPresented, as rustls 0.23 says them.
    ["invalid peer certificate", "peer sent no certificates"]
        .iter()
        .find_map(|words| text.find(words).map(|at| text[at..].to_string()))
}

/// Errors that a later attempt may not meet: the connection, a timeout, a server loading
/// its data after a restart.
fn transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || ["LOADING", "TRYAGAIN", "BUSY"]
            .iter()
            .any(|code| has_code(e, code))
}

/// Whether Redis answered with the error `code`, alone or for any command of a pipeline
/// (a pipeline's errors carry their codes one by one).
fn has_code(e: &redis::RedisError, code: &str) -> bool {
    e.code() == Some(code)
        || e.clone()
            .into_server_errors()
            .is_some_and(|items| items.iter().any(|(_, item)| item.code() == code))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each spelling of a password, in the places a URL can carry one, comes out as `***`
    /// with the rest of the URL (user name included) as given; the secret never shows.
    #[test]
    fn redacted_url_hides_every_spelling_of_a_password() {
        let cases = [
            (
                "redis://crawler:secret@10.0.0.5:6379/0",
                "redis://crawler:***@10.0.0.5:6379/0",
            ),
            ("redis://:secret@host/3", "redis://:***@host/3"),
            (
                "rediss://crawler:se%40cret@host:6380/0#insecure",
                "rediss://crawler:***@host:6380/0#insecure",
            ),
            // Raw `@`, `/`, `?`, `#` in a password: the user information ends at the last `@`.
            (
                "redis://crawler:s/e?c#r@et@host:1/0",
                "redis://crawler:***@host:1/0",
            ),
            // No `:` but not a plain user name either: all of it hidden.
            ("redis://se/cret@host:1/0", "redis://***@host:1/0"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=secret",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "unix:///run/redis.sock?user=crawler&PASSWORD=secret",
                "unix:///run/redis.sock?user=crawler&PASSWORD=***",
            ),
            // Not a URL at all: still no password through.
            ("crawler:secret@host", "crawler:***@host"),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted_url(url), shown, "{url}");
            assert!(!redacted_url(url).contains("secret"), "{url}");
        }
        for plain in [
            "redis://127.0.0.1:6379/0",
            "redis://crawler@host:6379/0",
            "rediss://host/0",
            "127.0.0.1:6379",
        ] {
            assert_eq!(redacted_url(plain), plain);
        }
    }

    /// A `RedisUrl` printed either way (a log line, a `{:?}` of the settings) is redacted.
    #[test]
    fn a_redis_url_is_never_printed_with_its_password() {
        let url = RedisUrl::new("redis://crawler:secret@host:6379/0", None);
        assert_eq!(url.to_string(), "redis://crawler:***@host:6379/0");
        assert!(!format!("{url:?}").contains("secret"));
        assert!(!format!("{url:#?}").contains("secret"));
    }

    #[test]
    fn only_rediss_urls_use_tls() {
        assert!(RedisUrl::new("rediss://h/0", None).is_tls());
        assert!(RedisUrl::new("REDISS://h/0", None).is_tls());
        assert!(!RedisUrl::new("redis://h/0", None).is_tls());
        assert!(!RedisUrl::new("redis+unix:///s", None).is_tls());
    }
}
