//! When each host may next be served: the min-heap of hosts by ready instant, the per-host
//! GCRA rate limiter (with robots.txt crawl-delay) and the per-host in-flight cap.
//!
//! Guarantees: a host has at most one entry in the heap (its tally's `scheduled` flag), put
//! there only when it has something queued and room under its in-flight cap, never with an
//! instant earlier than its `not_before` (retry backoff, Retry-After); a request is handed
//! out only when the host's limiter gives a token, and a crawl-delay never makes a host
//! faster than the configured rate. Ties between hosts ready at the same instant go first
//! come, first served (a sequence number), so hosts take turns.
//!
//! Why a heap of hosts rather than of URLs: see the module doc of [`super`]. A host that must
//! wait costs one heap entry until its time comes, whatever it has queued.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use tokio::time::Instant;

use super::residency::HostState;
use super::{Frontier, FrontierPolicy, HostId};
use crate::robots::RobotsRules;

/// The GCRA limiter of one host.
pub(crate) type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    DefaultClock,
    governor::middleware::NoOpMiddleware<<DefaultClock as Clock>::Instant>,
>;

/// Hosts that have work, earliest ready instant first.
#[derive(Default)]
pub(crate) struct ReadyHeap {
    /// Min-heap of (ready instant, tie-break sequence, host).
    heap: BinaryHeap<Reverse<(Instant, u64, HostId)>>,
    sequence: u64,
}

impl ReadyHeap {
    /// Adds an entry for `id`, ready at `at`. The caller keeps one entry per host.
    pub(crate) fn push(&mut self, id: HostId, at: Instant) {
        self.sequence += 1;
        self.heap.push(Reverse((at, self.sequence, id)));
    }

    /// When the earliest host becomes ready.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes the earliest host if it is ready at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<HostId> {
        let Reverse((at, _, id)) = *self.heap.peek()?;
        if at > now {
            return None;
        }
        self.heap.pop();
        Some(id)
    }

    /// Estimated bytes of the heap.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<(Instant, u64, HostId)>() as u64;
        self.heap.capacity() as u64 * entry
    }
}

/// A fresh limiter for a host, or `None` when the rate limit is off.
pub(crate) fn new_limiter(policy: &FrontierPolicy, clock: &DefaultClock) -> Option<Limiter> {
    policy
        .quota
        .map(|q| RateLimiter::direct_with_clock(q, clock.clone()))
}

/// Installs a host's crawl-delay, never faster than the configured rate.
pub(crate) fn apply_crawl_delay(
    host: &mut HostState,
    rules: &RobotsRules,
    policy_period: Duration,
    clock: DefaultClock,
) {
    if let Some(delay) = rules.crawl_delay {
        let period = delay.max(policy_period);
        if let Some(quota) = Quota::with_period(period) {
            host.limiter = Some(RateLimiter::direct_with_clock(quota, clock));
            host.limiter_refill = period;
        }
    }
}

/// Spends one of the host's rate tokens for a request at `now`, or says when the next
/// token comes.
pub(crate) fn take_token(
    host: &mut HostState,
    now: Instant,
    clock: &DefaultClock,
) -> Result<(), Instant> {
    if let Some(limiter) = &host.limiter {
        if let Err(not_until) = limiter.check() {
            return Err(now + not_until.wait_time_from(clock.now()));
        }
        host.last_request = Some(now);
    }
    Ok(())
}

impl Frontier {
    /// Puts a host in the heap if it has work and room for another fetch.
    pub(crate) fn schedule(&mut self, id: HostId, now: Instant) {
        let hops = self.has_robots_hops(id);
        if self.tallies.get(&id).is_some_and(|t| t.scheduled) || (self.store.len(id) == 0 && !hops)
        {
            return;
        }
        let at = match self.resident.hosts.get(&id) {
            Some(host) => {
                // A host waiting on its own robots.txt still serves hops into it.
                if host.in_flight >= self.policy.per_host_concurrency
                    || (host.robots.is_fetching() && !hops)
                {
                    return;
                }
                host.not_before.max(now)
            }
            None => now,
        };
        self.push_ready(id, at);
    }

    /// Puts a host in the heap at `at` and marks it scheduled.
    pub(crate) fn push_ready(&mut self, id: HostId, at: Instant) {
        self.tallies.entry(id).or_default().scheduled = true;
        self.ready.push(id, at);
    }
}
