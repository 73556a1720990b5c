//! The crawl's connection to Redis: one auto-reconnecting connection to a single server, or
//! the redis crate's cluster client (`cluster-async`: slot map, `MOVED`, failover) to a
//! Redis Cluster; the Lua scripts; a retry loop with backoff around every request; and the
//! round-trip count.
//!
//! Guarantees: every call is one round of [`Group`]s, one group per hash tag (a shard, or
//! the crawl's own keys): to a single server one pipeline, to a cluster one pipeline per
//! group, all sent at once (a cluster pipeline must stay in one slot; the crate refuses a
//! cross-slot one). A round counts once in [`Redis::round_trips`]. With
//! `distributed.replicas` set, each writing group on a cluster ends with `WAIT`, and
//! writes a replica did not confirm are counted ([`Redis::unreplicated`]).
//!
//! A request that fails because the connection dropped, Redis is restarting or a cluster
//! is failing over (`CLUSTERDOWN`, `TRYAGAIN`, `MOVED`, a primary refusing connections) is
//! sent again after a backoff (50 ms doubling to 1 s) until `redis_timeout_secs` have
//! passed without an answer; then it fails with [`DistributedError::Unreachable`]. Sending
//! again is safe because every call is idempotent in effect (see each script): an admission
//! answered twice finds its bits set and queues nothing twice, a grant hands out running
//! totals, a release of a released lease is a no-op, and a claim whose answer was lost
//! leaves a lease that expires and is reclaimed. A script unknown to the server (a
//! restarted Redis forgets them; a promoted replica may not have them) is loaded again (on
//! a cluster into every primary) and the call re-sent.
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
use redis::cluster_async::ClusterConnection;
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

    /// The URLs given: one, or a cluster's seed nodes separated by commas.
    fn seeds(&self) -> Vec<&str> {
        self.text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    fn is_tls(&self) -> bool {
        let scheme = self.text.split(':').next().unwrap_or_default();
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    }

    /// With TLS and `ca_file`, a root store of the system's roots and the file's.
    fn roots(&self) -> Result<Option<Vec<u8>>, DistributedError> {
        match &self.ca_file {
            Some(path) if self.is_tls() => {
                let extra = std::fs::read(path).map_err(|source| DistributedError::CaFile {
                    path: path.clone(),
                    source,
                })?;
                let mut roots = system_roots_pem();
                roots.extend_from_slice(&extra);
                Ok(Some(roots))
            }
            _ => Ok(None),
        }
    }

    fn invalid(&self, source: redis::RedisError) -> DistributedError {
        DistributedError::Url {
            url: self.to_string(),
            source,
        }
    }

    /// The client for a single server.
    fn client(&self, url: &str) -> Result<redis::Client, DistributedError> {
        match self.roots()? {
            Some(roots) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(roots),
                },
            )
            .map_err(|e| self.invalid(e)),
            None => redis::Client::open(url).map_err(|e| self.invalid(e)),
        }
    }

    /// The client for a cluster known by `seeds`.
    fn cluster_client(
        &self,
        seeds: &[&str],
    ) -> Result<redis::cluster::ClusterClient, DistributedError> {
        let mut builder =
            redis::cluster::ClusterClient::builder(seeds.iter().map(|s| s.to_string()))
                .connection_timeout(Duration::from_secs(2))
                .response_timeout(Duration::from_secs(10))
                .retries(2)
                .max_retry_wait(500);
        if let Some(roots) = self.roots()? {
            builder = builder.certs(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(roots),
            });
        }
        builder.build().map_err(|e| self.invalid(e))
    }

    /// A connection: to a cluster when several seed nodes are given or the one given says
    /// it is in one (`INFO cluster`), to a single server otherwise. The outer error is a
    /// URL or file that will never do; the inner one Redis's answer.
    async fn connect(&self) -> Result<redis::RedisResult<Connection>, DistributedError> {
        let seeds = self.seeds();
        if seeds.len() > 1 {
            let client = self.cluster_client(&seeds)?;
            return Ok(client.get_async_connection().await.map(Connection::Cluster));
        }
        let url = seeds.first().copied().unwrap_or(self.text.as_str());
        let client = self.client(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let mut conn = match client.get_connection_manager_with_config(config).await {
            Ok(conn) => conn,
            Err(e) => return Ok(Err(e)),
        };
        // An ACL user without `INFO` (the README's rule refuses @dangerous commands) is
        // taken to be on a single server: on a cluster, give several seed nodes.
        let info: String = match redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut conn)
            .await
        {
            Ok(info) => info,
            Err(e) if has_code(&e, "NOPERM") => String::new(),
            Err(e) => return Ok(Err(e)),
        };
        if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
            let client = self.cluster_client(&[url])?;
            return Ok(client.get_async_connection().await.map(Connection::Cluster));
        }
        Ok(Ok(Connection::Single(conn)))
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self.text.split(',').map(redacted_url).collect();
        f.write_str(&shown.join(","))
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisUrl")
            .field("url", &self.to_string())
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
    code: String,
    sha: String,
}

impl Script {
    fn new(name: &'static str, code: &'static str) -> Script {
        let code = checked(code);
        let sha = redis::Script::new(&code).get_hash().to_string();
        Script { name, code, sha }
    }

    /// An `EVALSHA` of this script with `keys` (every key it touches: Redis Cluster's rule)
    /// and `args`.
    pub(crate) fn call(&self, group: &mut Group, keys: &[String], args: &[Vec<u8>]) {
        let cmd = self.call_with_keys(group, keys);
        for a in args {
            cmd.arg(a.as_slice());
        }
    }

    /// An `EVALSHA` of this script with `keys`, its arguments to be added to the command
    /// returned (written straight into the command: no argument list built first).
    pub(crate) fn call_with_keys<'g>(
        &self,
        group: &'g mut Group,
        keys: &[String],
    ) -> &'g mut redis::Cmd {
        let cmd = group.cmd("EVALSHA").arg(&self.sha).arg(keys.len());
        for key in keys {
            cmd.arg(key.as_str());
        }
        cmd
    }
}

/// In the unit tests every script runs with each key it touches checked against its
/// `KEYS` (Redis Cluster's rule, which a single server does not enforce): a key not
/// declared is an `UNDECLARED` error, so the script tests prove the rule. Outside tests the
/// script as written.
pub(crate) fn checked(code: &str) -> String {
    if cfg!(test) {
        const CHECK: &str = "local declared__ = {}\n\
            for _, k in ipairs(KEYS) do declared__[k] = true end\n\
            local function checked__(cmd, ...)\n\
              if cmd ~= 'TIME' and not declared__[(select(1, ...))] then\n\
                return error('UNDECLARED key ' .. tostring((select(1, ...))) .. ' in ' .. cmd)\n\
              end\n\
              return redis.call(cmd, ...)\n\
            end\n";
        format!("{CHECK}{}", code.replace("redis.call(", "checked__("))
    } else {
        code.to_string()
    }
}

/// The scripts, loaded on connect and again after a Redis restart or failover.
pub(crate) struct Scripts {
    pub(crate) admit: Script,
    pub(crate) grant: Script,
    pub(crate) claim: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) beat: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            admit: Script::new("admit", include_str!("admit.lua")),
            grant: Script::new("grant", include_str!("grant.lua")),
            claim: Script::new(
                "claim",
                concat!(include_str!("end_lease.lua"), include_str!("claim.lua")),
            ),
            release: Script::new(
                "release",
                concat!(include_str!("end_lease.lua"), include_str!("release.lua")),
            ),
            renew: Script::new("renew", include_str!("renew.lua")),
            beat: Script::new("beat", include_str!("beat.lua")),
        }
    }

    fn all(&self) -> [&Script; 6] {
        [
            &self.admit,
            &self.grant,
            &self.claim,
            &self.release,
            &self.renew,
            &self.beat,
        ]
    }
}

/// The commands of one round for the keys of one hash tag (one slot: a shard, or the
/// crawl's own keys), answered one reply per command.
#[derive(Default)]
pub(crate) struct Group {
    cmds: Vec<redis::Cmd>,
    writes: bool,
}

impl Group {
    /// Adds a command; its reply comes back in order.
    pub(crate) fn cmd(&mut self, name: &str) -> &mut redis::Cmd {
        self.writes |= !matches!(
            name,
            "HGETALL" | "HGET" | "HMGET" | "HLEN" | "ZCARD" | "TIME" | "LLEN"
        );
        self.cmds.push(redis::cmd(name));
        self.cmds.last_mut().expect("just pushed")
    }

    pub(crate) fn len(&self) -> usize {
        self.cmds.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    fn pipeline(&self) -> Pipeline {
        let mut pipe = redis::pipe();
        for cmd in &self.cmds {
            pipe.add_command(cmd.clone());
        }
        pipe
    }
}

/// A single server or a cluster.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The connection, the scripts and the figures.
pub(crate) struct Redis {
    /// The URL as shown: redacted.
    shown: String,
    url: RedisUrl,
    /// Replaced when a cluster's client stays stuck on a topology that changed (see
    /// [`Redis::with_retries`]).
    conn: std::sync::RwLock<Connection>,
    cluster: bool,
    pub(crate) scripts: Scripts,
    timeout: Duration,
    /// Replicas a round's writes wait for (cluster only; 0: none).
    replicas: u32,
    round_trips: AtomicU64,
    unreplicated: AtomicU64,
    wait_paused_until: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long a round's `WAIT` waits for replicas before the process goes on (counted).
const REPLICA_WAIT_MS: u64 = 100;
/// How much longer a round's `WAIT` waits when the first did not see its replicas: a
/// replica that merely lags on a loaded machine catches up within it, one that is gone
/// does not.
const REPLICA_WAIT_LONGER_MS: u64 = 1000;
/// How long rounds go without `WAIT` after one a replica did not confirm.
const REPLICA_WAIT_PAUSE: Duration = Duration::from_secs(5);

/// What a round's `WAIT` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replication {
    /// Every primary's replica holds the round's writes.
    Confirmed,
    /// A replica did not confirm them in time: the round is sent again.
    Unconfirmed,
    /// Not asked: within [`REPLICA_WAIT_PAUSE`] of an unconfirmed round (counted).
    Paused,
}

impl Redis {
    /// Connects (retrying for up to `timeout` while Redis is unreachable; at once failing
    /// on a refused password or certificate) and loads the scripts. Several URLs (seed
    /// nodes, comma-separated), or one naming a node with `cluster_enabled:1`, make a
    /// cluster connection.
    pub(crate) async fn connect(
        url: &RedisUrl,
        timeout: Duration,
    ) -> Result<Redis, DistributedError> {
        Redis::connect_with(url, timeout, 0).await
    }

    /// [`Redis::connect`], with every writing round of a cluster waiting for `replicas`.
    pub(crate) async fn connect_with(
        url: &RedisUrl,
        timeout: Duration,
        replicas: u32,
    ) -> Result<Redis, DistributedError> {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(50);
        let conn = loop {
            match url.connect().await? {
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
            url: url.clone(),
            cluster: matches!(conn, Connection::Cluster(_)),
            conn: std::sync::RwLock::new(conn),
            scripts: Scripts::new(),
            timeout,
            replicas,
            round_trips: AtomicU64::new(0),
            unreplicated: AtomicU64::new(0),
            wait_paused_until: std::sync::Mutex::new(None),
        };
        redis.load_scripts().await?;
        Ok(redis)
    }

    /// Whether this is a Redis Cluster (a script then reaches one shard's keys only).
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// Round trips made so far (a round sent to several nodes at once counts once).
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Writes whose `WAIT` saw fewer replicas than asked (a primary without its replica).
    pub(crate) fn unreplicated(&self) -> u64 {
        self.unreplicated.load(Ordering::Relaxed)
    }

    async fn load_scripts(&self) -> Result<(), DistributedError> {
        for script in self.scripts.all() {
            // On a cluster `SCRIPT LOAD` goes to every primary (the crate routes it so).
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("LOAD").arg(&script.code);
            let sha: String = self
                .with_retries(|conn| cmd.clone().query_owned(conn))
                .await?;
            if sha != script.sha {
                return Err(DistributedError::Reply {
                    what: script.name,
                    detail: format!("SCRIPT LOAD answered {sha}, expected {}", script.sha),
                });
            }
        }
        Ok(())
    }

    /// One group's round (see [`Redis::run_groups`]).
    pub(crate) async fn run(&self, group: &Group) -> Result<Vec<Value>, DistributedError> {
        let mut replies = self.run_groups(std::slice::from_ref(group)).await?;
        Ok(replies.pop().unwrap_or_default())
    }

    /// Sends the groups until answered (see the module doc), reloading the scripts if
    /// Redis forgot them: one pipeline to a single server; one per group, all at once, to
    /// a cluster (a pipeline there must stay in one slot). Returns each group's replies.
    pub(crate) async fn run_groups(
        &self,
        groups: &[Group],
    ) -> Result<Vec<Vec<Value>>, DistributedError> {
        if groups.iter().all(Group::is_empty) {
            // Nothing to say (a claim that asks no shard, with nothing else): no round.
            return Ok(groups.iter().map(|_| Vec::new()).collect());
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        if !self.cluster {
            // One copy of each command, into the one pipeline.
            let mut pipe = redis::pipe();
            for cmd in groups.iter().flat_map(|g| &g.cmds) {
                pipe.add_command(cmd.clone());
            }
            let mut replies = self.run_pipeline(&pipe).await?.into_iter();
            return Ok(groups
                .iter()
                .map(|g| replies.by_ref().take(g.len()).collect())
                .collect());
        }
        let mut replies = self.send_to_cluster(groups).await?;
        if self.replicas > 0
            && groups.iter().any(|g| g.writes)
            && self.wait_for_replicas().await? == Replication::Unconfirmed
        {
            // No replica confirmed the writes, even given longer: their primary may have
            // died with them (a failover: the replica promoted never had them), and an
            // answer used now would be an answer to writes the crawl no longer has (an
            // admission lost is URLs nobody queues again). Every call is idempotent in
            // effect (see the module doc), so the round goes again, to whichever primary
            // serves each slot now, and its answers are the ones used. Its own `WAIT` falls
            // in the pause that follows (a primary without a replica, after a failover):
            // counted, not waited for.
            replies = self.send_to_cluster(groups).await?;
            self.wait_for_replicas().await?;
        }
        Ok(replies)
    }

    /// The groups to a cluster, one pipeline each, all at once.
    async fn send_to_cluster(&self, groups: &[Group]) -> Result<Vec<Vec<Value>>, DistributedError> {
        let calls = groups.iter().map(|group| async move {
            if group.is_empty() {
                return Ok(Vec::new());
            }
            self.run_pipeline(&group.pipeline()).await
        });
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<_, _>>()
    }

    /// After a round's writes: `WAIT` on every primary (the crate sends it to all and
    /// answers the least), on the connections that carried them, so a replica holds them
    /// before their answers are used. A replica that lags (a loaded machine) is given
    /// [`REPLICA_WAIT_LONGER_MS`] more before the writes count as unconfirmed. A primary
    /// without its replica (after a failover) would make every round wait the whole
    /// timeout: after one unconfirmed round the rounds of the next [`REPLICA_WAIT_PAUSE`]
    /// do not wait, and all are counted unreplicated.
    async fn wait_for_replicas(&self) -> Result<Replication, DistributedError> {
        let paused = self
            .wait_paused_until
            .lock()
            .map(|until| until.is_some_and(|t| t > std::time::Instant::now()))
            .unwrap_or(false);
        if paused {
            self.unreplicated.fetch_add(1, Ordering::Relaxed);
            return Ok(Replication::Paused);
        }
        let mut confirmed = false;
        for wait_ms in [REPLICA_WAIT_MS, REPLICA_WAIT_LONGER_MS] {
            let mut cmd = redis::cmd("WAIT");
            cmd.arg(self.replicas).arg(wait_ms);
            let acked: Value = self
                .with_retries(|conn| {
                    let cmd = cmd.clone();
                    async move { conn.query_cmd(&cmd).await }
                })
                .await?;
            if super::int(&acked, "WAIT")? >= i64::from(self.replicas) {
                confirmed = true;
                break;
            }
        }
        if !confirmed {
            self.unreplicated.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut until) = self.wait_paused_until.lock() {
                *until = Some(std::time::Instant::now() + REPLICA_WAIT_PAUSE);
            }
            tracing::warn!(
                "redis {}: a primary has no replica confirming writes (a failover?); the round is sent again, and writes are counted as unreplicated_writes for {} s",
                self.shown,
                REPLICA_WAIT_PAUSE.as_secs()
            );
            return Ok(Replication::Unconfirmed);
        }
        Ok(Replication::Confirmed)
    }

    /// One pipeline until answered, reloading the scripts if Redis forgot them.
    async fn run_pipeline(&self, pipe: &Pipeline) -> Result<Vec<Value>, DistributedError> {
        for _ in 0..3 {
            match self.with_retries(|conn| conn.query_pipeline(pipe)).await {
                Err(DistributedError::Command { source, .. }) if has_code(&source, "NOSCRIPT") => {
                    tracing::info!(
                        "redis {}: scripts unknown (a restart or a failover?); loading them",
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

    /// One request, retried while Redis is unreachable (or a cluster fails over).
    async fn with_retries<T, F, Fut>(&self, request: F) -> Result<T, DistributedError>
    where
        F: Fn(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(50);
        let mut warned = false;
        let mut failures = 0;
        loop {
            let conn = match self.conn.read() {
                Ok(conn) => conn.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            };
            match request(conn).await {
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
                    failures += 1;
                    if self.cluster && failures % 4 == 0 {
                        self.reconnect().await;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

impl Redis {
    /// A new cluster client, which reads the topology afresh from the seed nodes: the
    /// crate's own client, after a primary died, was seen to keep sending to it until its
    /// requests timed out, for longer than any failover takes.
    async fn reconnect(&self) {
        match self.url.connect().await {
            Ok(Ok(conn)) => {
                if let Ok(mut current) = self.conn.write() {
                    *current = conn;
                }
                tracing::info!("redis {}: reconnected to the cluster", self.shown);
            }
            Ok(Err(e)) => tracing::debug!("redis {}: reconnecting: {e}", self.shown),
            Err(e) => tracing::debug!("redis {}: reconnecting: {e}", self.shown),
        }
    }
}

impl Connection {
    async fn query_cmd(self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        match self {
            Connection::Single(mut conn) => cmd.query_async(&mut conn).await,
            Connection::Cluster(mut conn) => cmd.query_async(&mut conn).await,
        }
    }

    async fn query_pipeline(self, pipe: &Pipeline) -> redis::RedisResult<Vec<Value>> {
        match self {
            Connection::Single(mut conn) => pipe.query_async(&mut conn).await,
            Connection::Cluster(mut conn) => pipe.query_async(&mut conn).await,
        }
    }
}

/// A command that can be sent on either kind of connection, owning what it needs.
trait QueryOwned {
    async fn query_owned(self, conn: Connection) -> redis::RedisResult<String>;
}

impl QueryOwned for redis::Cmd {
    async fn query_owned(self, conn: Connection) -> redis::RedisResult<String> {
        match conn {
            Connection::Single(mut conn) => self.query_async(&mut conn).await,
            Connection::Cluster(mut conn) => self.query_async(&mut conn).await,
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
        || e.is_cluster_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || [
            "LOADING",
            "TRYAGAIN",
            "BUSY",
            "CLUSTERDOWN",
            "MASTERDOWN",
            "READONLY",
        ]
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
