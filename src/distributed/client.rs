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

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Pipeline, Value};

use super::DistributedError;

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
    url: String,
    conn: ConnectionManager,
    pub(crate) scripts: Scripts,
    timeout: Duration,
    round_trips: AtomicU64,
}

impl Redis {
    /// Connects (retrying for up to `timeout`) and loads the scripts.
    pub(crate) async fn connect(url: &str, timeout: Duration) -> Result<Redis, DistributedError> {
        let client = redis::Client::open(url).map_err(|source| DistributedError::Url {
            url: url.to_string(),
            source,
        })?;
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
                Err(source) if started.elapsed() < timeout => {
                    tracing::warn!("redis {url}: {source}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                Err(source) => {
                    return Err(DistributedError::Unreachable {
                        url: url.to_string(),
                        secs: timeout.as_secs_f64(),
                        source,
                    })
                }
            }
        };
        let redis = Redis {
            url: url.to_string(),
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
                        self.url
                    );
                    self.load_scripts().await?;
                }
                Err(DistributedError::Command { source, .. }) if has_code(&source, "CRAWLGONE") => {
                    return Err(DistributedError::Gone {
                        url: self.url.clone(),
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
                        tracing::warn!("redis {}: reachable again", self.url);
                    }
                    return Ok(value);
                }
                Err(source) if transient(&source) => {
                    if started.elapsed() >= self.timeout {
                        return Err(DistributedError::Unreachable {
                            url: self.url.clone(),
                            secs: self.timeout.as_secs_f64(),
                            source,
                        });
                    }
                    if !warned {
                        tracing::warn!("redis {}: {source}; retrying", self.url);
                        warned = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                Err(source) => {
                    return Err(DistributedError::Command {
                        url: self.url.clone(),
                        source,
                    })
                }
            }
        }
    }
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
