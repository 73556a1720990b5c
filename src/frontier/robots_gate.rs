//! robots.txt per host: when to fetch it, what its rules let through, how long to back off
//! when it is unreachable, and its disk cache ([`super::robots_cache`]) for evicted hosts.
//!
//! Guarantees (with `respect_robots`): no page of a host is handed out before its robots.txt
//! has been fetched (or read back from the cache, unexpired); while that fetch is in flight the
//! host's pages wait; a URL the rules disallow comes out as [`Work::Disallowed`] without a
//! request and without spending a rate token; an unreachable robots.txt blocks the host with
//! growing backoff ([`unavailable_backoff`]) and after [`MAX_UNAVAILABLE_ATTEMPTS`] failures
//! its queued URLs are given up, returned to the caller to record (except those recorded after
//! the checkpoint a resumed frontier started from, which are dropped: a URL is recorded once).
//! Rules expire after `robots_ttl` and are fetched again. A host whose Crawl-delay is over
//! `max_crawl_delay` is not crawled: its URLs come out as [`Work::Deferred`], each without a
//! request, so one such host cannot keep the crawl alive for days.
//!
//! [`Work::Deferred`]: super::Work::Deferred
//!
//! Why the cache: a host evicted from memory (see [`super::residency`]) comes back with its
//! rules for one read and one parse, never a second request.
//!
//! [`Work::Disallowed`]: super::Work::Disallowed

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::residency::state_bytes;
use super::residency::RobotsHop;
use super::robots_cache::CachedRobots;
use super::schedule::{apply_crawl_delay, NotAdmitted};
use super::{host_id, Frontier, FrontierError, HostId, QueuedUrl, RobotsFetch, Work};
use crate::robots::{
    unavailable_backoff, RobotsOutcome, RobotsRules, MAX_UNAVAILABLE_ATTEMPTS, ROBOTS_MAX_REDIRECTS,
};

/// Where a host stands with its robots.txt.
#[derive(Debug, Clone)]
pub(crate) enum RobotsState {
    /// robots.txt is not consulted (`respect_robots = false`).
    NotNeeded,
    /// Not fetched yet (or its cache entry expired).
    Unknown,
    /// A fetch is in flight; the host's pages wait.
    Fetching,
    /// Rules in force until `expires`.
    Ready {
        rules: Arc<RobotsRules>,
        expires: Instant,
    },
    /// Unreachable: nothing is fetched before `retry_at`.
    Unavailable { retry_at: Instant },
}

impl RobotsState {
    pub(crate) fn is_fetching(&self) -> bool {
        matches!(self, RobotsState::Fetching)
    }
}

/// What robots.txt says about serving a resident host's next URL now.
pub(crate) enum RobotsGate {
    /// Go on: the front URL may be fetched (rate limit permitting).
    Open,
    /// robots.txt must be fetched first (unknown, expired, or its backoff is over).
    FetchRobots,
    /// Nothing to do for this host now; it is scheduled again when its fetch ends.
    Skip,
    /// Blocked by an unreachable robots.txt until this instant.
    WaitUntil(Instant),
    /// The front URL, taken off the queue: the rules disallow it.
    Disallowed(QueuedUrl),
    /// The front URL, taken off the queue: the host's Crawl-delay is over the crawl's limit.
    Deferred {
        item: QueuedUrl,
        crawl_delay: Duration,
    },
}

impl Frontier {
    /// The robots.txt state of a host being restored: unexpired rules from the cache, or
    /// unknown. Also the cached body's length (for the state's size) and the rules, whose
    /// crawl-delay the caller installs.
    pub(crate) fn restore_robots(
        &mut self,
        id: HostId,
        now: Instant,
    ) -> (RobotsState, u64, Option<Arc<RobotsRules>>) {
        let mut robots = if self.policy.respect_robots {
            RobotsState::Unknown
        } else {
            RobotsState::NotNeeded
        };
        let mut body_len = 0;
        let mut crawl_delay_rules = None;
        if let Some(cache) = self.robots_cache.as_mut() {
            let now_ms = unix_ms(SystemTime::now());
            let cached = match cache.get_with_expiry(id, now_ms) {
                Ok(cached) => cached,
                Err(e) => {
                    // Forgotten by the cache: robots.txt is simply fetched again.
                    tracing::warn!("{e}; robots.txt will be fetched again");
                    None
                }
            };
            if let Some((entry, expires_ms)) = cached {
                let rules = match &entry {
                    CachedRobots::AllowAll => RobotsRules::allow_all(),
                    CachedRobots::Body(body) => {
                        body_len = body.len() as u64;
                        RobotsRules::parse(&self.options.robots_agent, body)
                    }
                };
                let rules = Arc::new(rules);
                let left = Duration::from_millis(expires_ms.saturating_sub(now_ms));
                crawl_delay_rules = Some(rules.clone());
                robots = RobotsState::Ready {
                    rules,
                    expires: now + left,
                };
            }
        }
        (robots, body_len, crawl_delay_rules)
    }

    /// Decides, for a resident host, what its robots.txt allows at `now`.
    pub(crate) fn robots_gate(
        &mut self,
        id: HostId,
        now: Instant,
    ) -> Result<RobotsGate, FrontierError> {
        let Some(host) = self.resident.hosts.get(&id) else {
            return Ok(RobotsGate::Skip);
        };
        Ok(match &host.robots {
            RobotsState::NotNeeded => RobotsGate::Open,
            RobotsState::Fetching => RobotsGate::Skip,
            RobotsState::Unavailable { retry_at } if *retry_at > now => {
                RobotsGate::WaitUntil(*retry_at)
            }
            RobotsState::Ready { rules, expires } if *expires > now => {
                if let Some(crawl_delay) = rules
                    .crawl_delay
                    .filter(|delay| *delay > self.policy.max_crawl_delay)
                {
                    // Refused without a request, like a disallowed URL: the host asked for
                    // fewer requests than the crawl can wait for.
                    return Ok(match self.store.pop(id)? {
                        Some(item) => RobotsGate::Deferred { item, crawl_delay },
                        None => RobotsGate::Skip,
                    });
                }
                let rules = rules.clone();
                let allowed = self
                    .store
                    .peek(id)?
                    .is_none_or(|front| rules.allows(&front.url));
                if allowed {
                    RobotsGate::Open
                } else {
                    // Refused without a request, so without spending a rate token.
                    match self.store.pop(id)? {
                        Some(item) => RobotsGate::Disallowed(item),
                        None => RobotsGate::Skip,
                    }
                }
            }
            _ => RobotsGate::FetchRobots,
        })
    }

    /// Whether robots.txt redirect hops wait to be sent to host `id`.
    pub(crate) fn has_robots_hops(&self, id: HostId) -> bool {
        self.resident
            .hosts
            .get(&id)
            .is_some_and(|h| !h.robots_hops.is_empty())
    }

    /// Hands out the next robots.txt hop waiting for host `id` if its rate limit allows now,
    /// else says when it will.
    pub(crate) fn hand_out_robots_hop(
        &mut self,
        id: HostId,
        now: Instant,
    ) -> Result<Work, NotAdmitted> {
        let budgets = self.admit(id, now)?;
        let Some(host) = self.resident.hosts.get_mut(&id) else {
            return Err(NotAdmitted::Until(now));
        };
        let hop = host.robots_hops.remove(0);
        // The hop leaves the state it was counted in (whichever host that is).
        host.bytes = host.bytes.saturating_sub(hop_bytes(&hop.url));
        self.resident.bytes = self.resident.bytes.saturating_sub(hop_bytes(&hop.url));
        self.schedule(id, now);
        Ok(Work::Robots(RobotsFetch {
            host: hop.for_host,
            via: id,
            url: hop.url,
            hops: hop.hops,
            budgets,
        }))
    }

    fn queue_robots_hop(&mut self, for_host: HostId, to: &url::Url, hops: u32, now: Instant) {
        let key = crate::normalize::host_key(to);
        let target = host_id(&key);
        self.make_resident_as(target, &key, now);
        let Some(state) = self.resident.hosts.get_mut(&target) else {
            return;
        };
        let url = to.as_str().to_string();
        state.bytes += hop_bytes(&url);
        self.resident.bytes += hop_bytes(&url);
        state.robots_hops.push(RobotsHop {
            for_host,
            url,
            hops,
        });
        if !self.store.tally(target).is_some_and(|t| t.scheduled) {
            let at = state.not_before.max(now);
            self.push_ready(target, at);
        }
    }

    /// The body of [`Frontier::robots_done`].
    pub(crate) fn record_robots(
        &mut self,
        fetch: RobotsFetch,
        outcome: RobotsOutcome,
    ) -> Result<Vec<QueuedUrl>, FrontierError> {
        let now = Instant::now();
        // The request is over: its slot on the host it went to is free again.
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(via) = self.resident.hosts.get_mut(&fetch.via) {
            via.in_flight = via.in_flight.saturating_sub(1);
        }
        self.release(fetch.budgets, now);
        if fetch.via != fetch.host {
            self.schedule(fetch.via, now);
        }
        let outcome = match outcome {
            RobotsOutcome::Redirect { to } if fetch.hops < ROBOTS_MAX_REDIRECTS => {
                self.queue_robots_hop(fetch.host, &to, fetch.hops + 1, now);
                if self.resident.hosts.contains_key(&fetch.host) {
                    return Ok(Vec::new());
                }
                // The host's state went (it cannot while fetching; kept for safety): its
                // pages are served again once robots.txt is fetched anew.
                RobotsOutcome::allow_all()
            }
            // RFC 9309 §2.3.1.2: past the redirect limit, robots.txt may be treated as
            // unavailable (4xx): everything is allowed.
            RobotsOutcome::Redirect { .. } => RobotsOutcome::allow_all(),
            other => other,
        };
        let id = fetch.host;
        let policy_period = self.policy.period;
        let Some(host) = self.resident.hosts.get_mut(&id) else {
            return Ok(Vec::new());
        };
        let mut given_up = Vec::new();
        match outcome {
            RobotsOutcome::Rules { rules, body } => {
                host.robots_failures = 0;
                apply_crawl_delay(host, &rules, policy_period);
                let body_len = body.as_ref().map_or(0, |b| b.len() as u64);
                let old = host.bytes;
                host.bytes = state_bytes(&host.key, body_len);
                let expires = now + self.policy.robots_ttl;
                host.robots = RobotsState::Ready { rules, expires };
                self.resident.bytes = self.resident.bytes - old + host.bytes;
                if let Some(cache) = self.robots_cache.as_mut() {
                    let entry = match body {
                        Some(body) => CachedRobots::Body(body),
                        None => CachedRobots::AllowAll,
                    };
                    let expires_ms = unix_ms(SystemTime::now() + self.policy.robots_ttl);
                    cache.put(id, expires_ms, &entry)?;
                }
            }
            RobotsOutcome::Redirect { .. } => {}
            RobotsOutcome::Unavailable { permanent, .. } => {
                host.robots_failures = if permanent {
                    MAX_UNAVAILABLE_ATTEMPTS
                } else {
                    host.robots_failures + 1
                };
                host.robots = RobotsState::Unavailable {
                    retry_at: now + unavailable_backoff(host.robots_failures),
                };
                if host.robots_failures >= MAX_UNAVAILABLE_ATTEMPTS {
                    while let Some(item) = self.store.pop(id)? {
                        // Recorded after the checkpoint resumed from: recorded once already.
                        if self.already_done.remove(&super::url_hash(&item.url)) {
                            continue;
                        }
                        given_up.push(item);
                    }
                }
            }
        }
        self.schedule(id, now);
        Ok(given_up)
    }
}

/// What a waiting robots.txt hop adds to its host's state: its URL and its bookkeeping.
fn hop_bytes(url: &str) -> u64 {
    url.len() as u64 + std::mem::size_of::<RobotsHop>() as u64
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
