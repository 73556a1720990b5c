//! The frontier: every accepted URL that is not yet fetched, organised so that fetches
//! are polite and fair.
//!
//! URLs wait in per-host FIFO queues (a host is scheme + host + port, see
//! [`crate::normalize::host_key`]). Hosts, not URLs, are scheduled: a min-heap orders the
//! hosts that have work by the instant each may next be fetched, so one host with a
//! million queued URLs never starves a host with ten, and a host that must wait costs
//! nothing until its time comes. Each host has a governor GCRA rate limiter
//! (`per_host_rps`, `per_host_burst`) and an in-flight cap (`per_host_concurrency`); a
//! host whose cap is reached leaves the heap and comes back when a fetch completes.
//! Retries and `Retry-After` push a host's next time forward instead of sleeping inside a
//! fetch task, so a retry is a request like any other: rate-limited and counted.
//!
//! The frontier is owned by one task (the crawl's dispatcher) and is not shared: no lock
//! is needed, and its state at any instant is one consistent value that checkpoints can
//! copy. Storage is behind [`HostQueue`], so the bulk of the queues can move to disk
//! without changing the scheduling.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::PolitenessSection;
use crate::robots::{unavailable_backoff, RobotsOutcome, RobotsRules, MAX_UNAVAILABLE_ATTEMPTS};

pub mod robots_cache;
pub mod store;

/// One accepted URL waiting to be fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedUrl {
    /// The canonical URL.
    pub url: String,
    /// Links followed from a seed (seeds are 0; redirects keep their source's depth).
    pub depth: u32,
    /// The page the URL was found on (or that redirected to it); `None` for seeds.
    pub parent: Option<String>,
    /// Redirects followed to reach this URL.
    pub redirect_hops: u32,
    /// Fetch attempts already made (retries).
    pub attempts: u32,
}

impl QueuedUrl {
    pub fn seed(url: String) -> Self {
        QueuedUrl {
            url,
            depth: 0,
            parent: None,
            redirect_hops: 0,
            attempts: 0,
        }
    }
}

/// Index of a host in the frontier.
pub type HostId = usize;

/// A URL handed out for fetching. Give it back with [`Frontier::complete`] or
/// [`Frontier::retry`].
#[derive(Debug)]
pub struct Dispatch {
    pub host: HostId,
    pub item: QueuedUrl,
}

/// What the frontier hands out next.
#[derive(Debug)]
pub enum Work {
    /// Fetch this URL.
    Fetch(Dispatch),
    /// Fetch this host's robots.txt, then report with [`Frontier::robots_done`].
    Robots { host: HostId, key: String },
    /// This URL is disallowed by robots.txt: record it, do not fetch it. It is no
    /// longer queued and not in flight.
    Disallowed(QueuedUrl),
}

/// Where a host stands with its robots.txt.
#[derive(Debug, Clone)]
enum RobotsState {
    /// robots.txt is not consulted (`respect_robots = false`).
    NotNeeded,
    /// Not fetched yet.
    Unknown,
    /// A fetch is in flight; the host's pages wait.
    Fetching,
    /// Rules in force until `expires`.
    Ready {
        rules: std::sync::Arc<RobotsRules>,
        expires: Instant,
    },
    /// Unreachable: nothing is fetched before `retry_at`.
    Unavailable { retry_at: Instant },
}

type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    DefaultClock,
    governor::middleware::NoOpMiddleware<<DefaultClock as Clock>::Instant>,
>;

/// A host's queue. In memory now; the durable frontier keeps only a window of it here.
#[derive(Debug, Default)]
pub struct HostQueue {
    items: VecDeque<QueuedUrl>,
}

impl HostQueue {
    fn push_back(&mut self, item: QueuedUrl) {
        self.items.push_back(item);
    }
    fn push_front(&mut self, item: QueuedUrl) {
        self.items.push_front(item);
    }
    fn pop_front(&mut self) -> Option<QueuedUrl> {
        self.items.pop_front()
    }
    fn len(&self) -> usize {
        self.items.len()
    }
    fn front(&self) -> Option<&QueuedUrl> {
        self.items.front()
    }
    fn iter(&self) -> impl Iterator<Item = &QueuedUrl> {
        self.items.iter()
    }
}

struct HostState {
    key: String,
    queue: HostQueue,
    in_flight: u32,
    /// Not before this instant (retry backoff, Retry-After, crawl-delay).
    not_before: Instant,
    limiter: Option<Limiter>,
    /// Whether the host currently has an entry in the ready heap.
    scheduled: bool,
    robots: RobotsState,
    /// Consecutive failed robots.txt fetches.
    robots_failures: u32,
    /// URLs ever queued for this host: an operator watches this to see a trap grow.
    total_queued: u64,
}

/// The frontier's politeness settings.
#[derive(Debug, Clone)]
pub struct FrontierPolicy {
    /// `None` disables the rate limit (benchmarks, `politeness.enabled = false`).
    pub quota: Option<Quota>,
    /// The configured interval between requests to one host (zero when disabled).
    pub period: Duration,
    pub per_host_concurrency: u32,
    /// Consult robots.txt before a host's first page.
    pub respect_robots: bool,
    /// How long robots.txt rules are kept.
    pub robots_ttl: Duration,
}

impl FrontierPolicy {
    pub fn from_config(p: &PolitenessSection) -> Self {
        let robots_ttl = Duration::from_secs_f64(p.robots_ttl_secs);
        if !p.enabled {
            return FrontierPolicy {
                quota: None,
                period: Duration::ZERO,
                per_host_concurrency: u32::MAX,
                respect_robots: p.respect_robots,
                robots_ttl,
            };
        }
        let period = Duration::from_secs_f64(1.0 / p.per_host_rps);
        let burst = NonZeroU32::new(p.per_host_burst).unwrap_or(NonZeroU32::MIN);
        FrontierPolicy {
            quota: Quota::with_period(period).map(|q| q.allow_burst(burst)),
            period,
            per_host_concurrency: p.per_host_concurrency.max(1),
            respect_robots: p.respect_robots,
            robots_ttl,
        }
    }
}

/// Per-host queues and the schedule of hosts.
pub struct Frontier {
    policy: FrontierPolicy,
    clock: DefaultClock,
    hosts: Vec<HostState>,
    index: HashMap<String, HostId>,
    /// Min-heap of (ready instant, tie-break sequence, host).
    ready: BinaryHeap<std::cmp::Reverse<(Instant, u64, HostId)>>,
    sequence: u64,
    queued: u64,
    in_flight: u64,
}

impl Frontier {
    pub fn new(policy: FrontierPolicy) -> Self {
        Frontier {
            policy,
            clock: DefaultClock::default(),
            hosts: Vec::new(),
            index: HashMap::new(),
            ready: BinaryHeap::new(),
            sequence: 0,
            queued: 0,
            in_flight: 0,
        }
    }

    /// Queues an accepted URL at the back of its host's queue.
    pub fn push(&mut self, host_key: &str, item: QueuedUrl) {
        let id = self.host_id(host_key);
        let host = &mut self.hosts[id];
        host.queue.push_back(item);
        host.total_queued += 1;
        self.queued += 1;
        self.schedule(id, Instant::now());
    }

    /// Puts a URL that was handed out back at the front of its host's queue, to be tried
    /// again no sooner than `delay` from now. The host as a whole waits that long too:
    /// a 429 or 503 is about the host, not the URL.
    pub fn retry(&mut self, dispatch: Dispatch, delay: Duration) {
        let Dispatch { host: id, mut item } = dispatch;
        item.attempts += 1;
        let now = Instant::now();
        let host = &mut self.hosts[id];
        host.in_flight = host.in_flight.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_sub(1);
        host.not_before = host.not_before.max(now + delay);
        host.queue.push_front(item);
        self.queued += 1;
        self.schedule(id, now);
    }

    /// Marks a handed-out URL as done (fetched, failed or refused).
    pub fn complete(&mut self, host: HostId) {
        let state = &mut self.hosts[host];
        state.in_flight = state.in_flight.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.schedule(host, Instant::now());
    }

    /// Asks a host to wait until `until` before its next request (crawl-delay,
    /// Retry-After on a response that is not retried).
    pub fn defer_host(&mut self, host: HostId, until: Instant) {
        let state = &mut self.hosts[host];
        state.not_before = state.not_before.max(until);
    }

    /// Hands out the next piece of work whose host may be served at `now`, if any.
    pub fn pop_ready(&mut self, now: Instant) -> Option<Work> {
        while let Some(std::cmp::Reverse((at, _, id))) = self.ready.peek().copied() {
            if at > now {
                return None;
            }
            self.ready.pop();
            let host = &mut self.hosts[id];
            host.scheduled = false;
            if host.queue.len() == 0 || host.in_flight >= self.policy.per_host_concurrency {
                continue;
            }
            if host.not_before > now {
                let at = host.not_before;
                self.push_ready(id, at);
                continue;
            }
            let fetch_robots = match &host.robots {
                RobotsState::NotNeeded => false,
                RobotsState::Fetching => continue,
                RobotsState::Unavailable { retry_at } if *retry_at > now => {
                    let at = *retry_at;
                    self.push_ready(id, at);
                    continue;
                }
                RobotsState::Ready { rules, expires } if *expires > now => {
                    let allowed = host
                        .queue
                        .front()
                        .is_none_or(|front| rules.allows(&front.url));
                    if !allowed {
                        // Refused without a request, so without spending a rate token.
                        let Some(item) = host.queue.pop_front() else {
                            continue;
                        };
                        self.queued -= 1;
                        self.schedule(id, now);
                        return Some(Work::Disallowed(item));
                    }
                    false
                }
                _ => true,
            };
            if let Some(limiter) = &host.limiter {
                if let Err(not_until) = limiter.check() {
                    let wait = not_until.wait_time_from(self.clock.now());
                    self.push_ready(id, now + wait);
                    continue;
                }
            }
            if fetch_robots {
                host.robots = RobotsState::Fetching;
                host.in_flight += 1;
                self.in_flight += 1;
                let key = host.key.clone();
                return Some(Work::Robots { host: id, key });
            }
            let Some(item) = host.queue.pop_front() else {
                continue;
            };
            host.in_flight += 1;
            self.queued -= 1;
            self.in_flight += 1;
            self.schedule(id, now);
            return Some(Work::Fetch(Dispatch { host: id, item }));
        }
        None
    }

    /// Records the result of a robots.txt fetch handed out as [`Work::Robots`]. When the
    /// host's robots.txt has been unreachable too many times, its queued URLs are given
    /// up and returned, so that the caller records them.
    pub fn robots_done(&mut self, id: HostId, outcome: RobotsOutcome) -> Vec<QueuedUrl> {
        let now = Instant::now();
        self.in_flight = self.in_flight.saturating_sub(1);
        let policy_period = self.policy.period;
        let clock = self.clock.clone();
        let host = &mut self.hosts[id];
        host.in_flight = host.in_flight.saturating_sub(1);
        let mut given_up = Vec::new();
        match outcome {
            RobotsOutcome::Rules(rules) => {
                host.robots_failures = 0;
                if let Some(delay) = rules.crawl_delay {
                    // Crawl-delay never makes the host faster than the configured rate.
                    let period = delay.max(policy_period);
                    if let Some(quota) = Quota::with_period(period) {
                        host.limiter = Some(RateLimiter::direct_with_clock(quota, clock));
                    }
                }
                host.robots = RobotsState::Ready {
                    rules,
                    expires: now + self.policy.robots_ttl,
                };
            }
            RobotsOutcome::Unavailable { .. } => {
                host.robots_failures += 1;
                host.robots = RobotsState::Unavailable {
                    retry_at: now + unavailable_backoff(host.robots_failures),
                };
                if host.robots_failures >= MAX_UNAVAILABLE_ATTEMPTS {
                    while let Some(item) = host.queue.pop_front() {
                        given_up.push(item);
                    }
                    self.queued -= given_up.len() as u64;
                }
            }
        }
        self.schedule(id, now);
        given_up
    }

    /// When the earliest scheduled host becomes ready, if any host is scheduled.
    pub fn next_ready_at(&self) -> Option<Instant> {
        self.ready.peek().map(|std::cmp::Reverse((at, _, _))| *at)
    }

    /// URLs waiting (not in flight).
    pub fn queued(&self) -> u64 {
        self.queued
    }

    /// URLs handed out and not yet completed.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Nothing queued and nothing in flight: the crawl is over.
    pub fn is_finished(&self) -> bool {
        self.queued == 0 && self.in_flight == 0
    }

    /// Hosts known to the frontier.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// URLs ever queued for a host (0 for a host not seen yet).
    pub fn host_total_queued(&self, key: &str) -> u64 {
        self.index
            .get(key)
            .map_or(0, |&id| self.hosts[id].total_queued)
    }

    /// The host key of a host id.
    pub fn host_key(&self, host: HostId) -> &str {
        &self.hosts[host].key
    }

    /// Hosts with the most URLs ever queued, largest first: where a trap would show.
    pub fn top_hosts(&self, count: usize) -> Vec<(String, u64, usize)> {
        let mut all: Vec<(String, u64, usize)> = self
            .hosts
            .iter()
            .map(|h| (h.key.clone(), h.total_queued, h.queue.len()))
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(count);
        all
    }

    /// The host with the most URLs queued right now (a growing trap shows here first),
    /// with its count and how many it has had in all.
    pub fn busiest_host(&self) -> Option<(&str, usize, u64)> {
        self.hosts
            .iter()
            .max_by_key(|h| h.queue.len())
            .filter(|h| h.queue.len() > 0)
            .map(|h| (h.key.as_str(), h.queue.len(), h.total_queued))
    }

    /// Every queued URL (not those in flight), host by host: for checkpoints and tests.
    pub fn queued_urls(&self) -> impl Iterator<Item = &QueuedUrl> {
        self.hosts.iter().flat_map(|h| h.queue.iter())
    }

    fn host_id(&mut self, key: &str) -> HostId {
        if let Some(&id) = self.index.get(key) {
            return id;
        }
        let id = self.hosts.len();
        let limiter = self
            .policy
            .quota
            .map(|q| RateLimiter::direct_with_clock(q, self.clock.clone()));
        self.hosts.push(HostState {
            key: key.to_string(),
            queue: HostQueue::default(),
            in_flight: 0,
            not_before: Instant::now(),
            limiter,
            scheduled: false,
            total_queued: 0,
            robots: if self.policy.respect_robots {
                RobotsState::Unknown
            } else {
                RobotsState::NotNeeded
            },
            robots_failures: 0,
        });
        self.index.insert(key.to_string(), id);
        id
    }

    /// Puts a host in the heap if it has work and room for another fetch.
    fn schedule(&mut self, id: HostId, now: Instant) {
        let host = &self.hosts[id];
        if host.scheduled
            || host.queue.len() == 0
            || host.in_flight >= self.policy.per_host_concurrency
        {
            return;
        }
        let at = host.not_before.max(now);
        self.push_ready(id, at);
    }

    fn push_ready(&mut self, id: HostId, at: Instant) {
        self.sequence += 1;
        self.hosts[id].scheduled = true;
        self.ready.push(std::cmp::Reverse((at, self.sequence, id)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rps: f64, burst: u32, conc: u32) -> FrontierPolicy {
        FrontierPolicy::from_config(&PolitenessSection {
            per_host_rps: rps,
            per_host_burst: burst,
            per_host_concurrency: conc,
            respect_robots: false,
            ..PolitenessSection::default()
        })
    }

    fn fetch(work: Option<Work>) -> Dispatch {
        match work {
            Some(Work::Fetch(d)) => d,
            other => panic!("expected a fetch, got {other:?}"),
        }
    }

    fn item(url: &str) -> QueuedUrl {
        QueuedUrl::seed(url.to_string())
    }

    #[test]
    fn hosts_take_turns_and_concurrency_is_capped() {
        let mut f = Frontier::new(policy(1000.0, 1000, 1));
        for i in 0..3 {
            f.push("http://a", item(&format!("http://a/{i}")));
        }
        f.push("http://b", item("http://b/0"));
        let now = Instant::now();
        let first = fetch(f.pop_ready(now));
        let second = fetch(f.pop_ready(now));
        assert_ne!(first.host, second.host, "b must not wait behind a");
        // Both hosts are at their cap of one in flight.
        assert!(f.pop_ready(now).is_none());
        assert_eq!(f.in_flight(), 2);
        f.complete(first.host);
        let third = fetch(f.pop_ready(Instant::now()));
        assert_eq!(third.item.url, "http://a/1");
    }

    #[test]
    fn rate_limit_delays_the_host() {
        let mut f = Frontier::new(policy(10.0, 1, 100));
        f.push("http://a", item("http://a/0"));
        f.push("http://a", item("http://a/1"));
        let now = Instant::now();
        assert!(f.pop_ready(now).is_some());
        assert!(f.pop_ready(now).is_none());
        let next = f.next_ready_at().unwrap();
        let wait = next - now;
        assert!(
            wait > Duration::from_millis(50) && wait <= Duration::from_millis(110),
            "{wait:?}"
        );
    }

    #[test]
    fn retry_goes_first_and_waits() {
        let mut f = Frontier::new(policy(1000.0, 1000, 4));
        f.push("http://a", item("http://a/0"));
        f.push("http://a", item("http://a/1"));
        let d = fetch(f.pop_ready(Instant::now()));
        f.retry(d, Duration::from_millis(200));
        assert_eq!(f.queued(), 2);
        assert!(f.pop_ready(Instant::now()).is_none());
        let later = Instant::now() + Duration::from_millis(250);
        let again = fetch(f.pop_ready(later));
        assert_eq!(again.item.url, "http://a/0");
        assert_eq!(again.item.attempts, 1);
    }

    #[test]
    fn finished_only_when_nothing_queued_or_in_flight() {
        let mut f = Frontier::new(policy(1000.0, 1000, 4));
        assert!(f.is_finished());
        f.push("http://a", item("http://a/0"));
        assert!(!f.is_finished());
        let d = fetch(f.pop_ready(Instant::now()));
        assert!(!f.is_finished());
        f.complete(d.host);
        assert!(f.is_finished());
    }

    #[test]
    fn robots_comes_first_then_gates_each_url() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = Frontier::new(p);
        f.push("http://a", item("http://a/private/x"));
        f.push("http://a", item("http://a/open"));
        let now = Instant::now();
        let Some(Work::Robots { host, key }) = f.pop_ready(now) else {
            panic!("robots.txt first")
        };
        assert_eq!(key, "http://a");
        // Nothing else for the host while its robots.txt is in flight.
        assert!(f.pop_ready(now).is_none());
        let rules = RobotsRules::parse("crawler", b"User-agent: *\nDisallow: /private/\n");
        let given_up = f.robots_done(host, RobotsOutcome::Rules(std::sync::Arc::new(rules)));
        assert!(given_up.is_empty());
        match f.pop_ready(Instant::now()) {
            Some(Work::Disallowed(item)) => assert_eq!(item.url, "http://a/private/x"),
            other => panic!("{other:?}"),
        }
        assert_eq!(fetch(f.pop_ready(Instant::now())).item.url, "http://a/open");
    }

    #[test]
    fn unreachable_robots_blocks_then_gives_up() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = Frontier::new(p);
        f.push("http://a", item("http://a/1"));
        let mut now = Instant::now();
        for attempt in 1..=MAX_UNAVAILABLE_ATTEMPTS {
            let Some(Work::Robots { host, .. }) = f.pop_ready(now) else {
                panic!("attempt {attempt}: robots.txt again")
            };
            let given_up = f.robots_done(
                host,
                RobotsOutcome::Unavailable {
                    reason: "HTTP 503".into(),
                },
            );
            // Nothing is fetched from the host meanwhile.
            assert!(f.pop_ready(Instant::now()).is_none());
            if attempt < MAX_UNAVAILABLE_ATTEMPTS {
                assert!(given_up.is_empty());
                now = Instant::now() + unavailable_backoff(attempt) + Duration::from_millis(1);
            } else {
                assert_eq!(given_up.len(), 1);
                assert!(f.is_finished());
            }
        }
    }

    #[test]
    fn crawl_delay_slows_the_host() {
        let mut p = policy(1000.0, 1000, 4);
        p.respect_robots = true;
        let mut f = Frontier::new(p);
        for i in 0..3 {
            f.push("http://a", item(&format!("http://a/{i}")));
        }
        let Some(Work::Robots { host, .. }) = f.pop_ready(Instant::now()) else {
            panic!()
        };
        let rules = RobotsRules::parse("crawler", b"User-agent: *\nCrawl-delay: 2\n");
        f.robots_done(host, RobotsOutcome::Rules(std::sync::Arc::new(rules)));
        let now = Instant::now();
        fetch(f.pop_ready(now));
        assert!(f.pop_ready(now).is_none());
        let wait = f.next_ready_at().unwrap() - now;
        assert!(wait > Duration::from_millis(1500), "{wait:?}");
    }
}
