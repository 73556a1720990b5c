//! Which hosts' state is in memory: the `[frontier] host_memory` budget, eviction of idle
//! hosts (least recently served first) and their restore when their turn comes again.
//!
//! Guarantees: a host with anything in flight, a wait pending, a crawl-delay rate not yet full
//! again, an address lookup in progress, a robots.txt fetch in progress or a robots.txt backoff
//! with URLs waiting on it is never evicted, so eviction changes nothing of politeness: a
//! restored host gets a fresh crawl-delay rate, which is exactly an idle one (GCRA state is
//! "full" after `burst × period` without requests), and its robots.txt rules from the disk
//! cache, without a request. The budgets a host shares with others (its name's, its
//! address's: see [`super::budget`]) are not the host's: they stay while any resident host
//! uses them or they are not idle, so evicting one host of a busy name or address loses none
//! of their rate. Over budget, idle hosts are looked for at each restore and every 10 ms, so
//! the resident state exceeds its budget only by hosts that are busy.
//!
//! A resumed frontier's limiters start empty, as if each host had just been sent a request:
//! a host made resident within one rate period of the resume (or its robots.txt
//! `Crawl-delay`, if longer and cached) waits until that long after the resume. The limiters
//! are not checkpointed, and the last request before a crash may have been just before it;
//! one period is what the limiter itself would have asked for. (Hosts only restored later
//! have waited that long anyway.)
//!
//! Why: per-host state (limiter, schedule, parsed rules) is the one part of the frontier that
//! would otherwise grow with every host ever seen; see the module doc of [`super`].

use std::collections::VecDeque;
use std::time::Duration;

use rustc_hash::FxHashMap;
use tokio::time::Instant;

use super::address::AddressState;
use super::budget::{name_key, Budget, BudgetKey, Gcra};
use super::robots_gate::RobotsState;
use super::schedule::apply_crawl_delay;
use super::{queued_key, Frontier, FrontierError, HostId};

/// Bytes a resident host costs beyond its key and rules, what the budget charges it: its entry
/// in the map of resident hosts and its name's budget's entry (the budget a host joins, one
/// per name: see [`super::budget`]), each at the lowest load a hash map has right after it
/// doubled (7/16: a hashbrown array of `n` buckets holds up to `7n/8` entries), and up to four
/// LRU entries of 16 bytes (see `compact_lru`).
///
/// Why so much: 256 bytes were charged before, the struct alone; heaptrack at the peak of the
/// scale bench (1e6 hosts, politeness off, `host_memory` 64 MiB) found the resident hosts' map
/// at 122 MiB and the budgets' map at 80 MiB, 234 k hosts in arrays of 2^19 buckets, more than
/// three times the budget. Charging the worst load keeps them under `host_memory` whenever
/// the maps last doubled; the extra evictions cost a restore each (one peek and a key's parse),
/// which a host served again after more than the resident count of other hosts pays anyway.
const HOST_STATE_BYTES: u64 = ((std::mem::size_of::<(HostId, HostState)>()
    + 1
    + std::mem::size_of::<(BudgetKey, Budget)>()
    + 1)
    * 16
    / 7
    + 4 * std::mem::size_of::<(u64, HostId)>()) as u64;
/// How often to look for idle hosts while the resident state is over budget and no host is
/// being restored (a restore looks at once).
const EVICTION_RETRY: Duration = Duration::from_millis(10);
/// Parsed robots.txt rules are estimated at this many times their body.
const RULES_PER_BODY_BYTE: u64 = 3;

/// The state of a host being served (resident).
pub(crate) struct HostState {
    pub(crate) key: String,
    pub(crate) in_flight: u32,
    /// Not before this instant (retry backoff, Retry-After, crawl-delay).
    pub(crate) not_before: Instant,
    /// The origin's own rate: its robots.txt Crawl-delay, when slower than the name's rate.
    pub(crate) crawl_delay: Option<Gcra>,
    /// The budget of its host name (shared by its schemes and ports).
    pub(crate) name: BudgetKey,
    /// Its server address, for the address's budget.
    pub(crate) address: AddressState,
    pub(crate) robots: RobotsState,
    /// Consecutive failed robots.txt fetches.
    pub(crate) robots_failures: u32,
    /// The LRU tick of the last time the host was served.
    touched: u64,
    /// Estimated bytes this state holds (struct, key, parsed rules).
    pub(crate) bytes: u64,
    /// robots.txt redirect hops into this host, waiting for its politeness (a token and a
    /// slot), on behalf of the hosts whose robots.txt they are (this one included).
    pub(crate) robots_hops: Vec<RobotsHop>,
}

/// A robots.txt redirect hop waiting to be sent to the host that holds it.
#[derive(Debug, Clone)]
pub(crate) struct RobotsHop {
    /// The host whose robots.txt is being fetched.
    pub(crate) for_host: HostId,
    pub(crate) url: String,
    /// Redirects followed before this request.
    pub(crate) hops: u32,
}

/// The resident hosts and their bookkeeping.
pub(crate) struct Residency {
    /// By host id: ids are XXH3 hashes already, so FxHash (one multiply), not SipHash; it is
    /// looked up several times per pop.
    pub(crate) hosts: FxHashMap<HostId, HostState>,
    /// Sum of the resident hosts' `bytes`.
    pub(crate) bytes: u64,
    /// Least recently served first: (tick, host); an entry whose tick is not the host's
    /// `touched` is stale and skipped.
    lru: VecDeque<(u64, HostId)>,
    tick: u64,
    pub(crate) evictions: u64,
    pub(crate) restores: u64,
    /// When to look for idle hosts again while over budget.
    next_eviction: Instant,
}

impl Residency {
    pub(crate) fn new() -> Self {
        Residency {
            hosts: FxHashMap::default(),
            bytes: 0,
            lru: VecDeque::new(),
            tick: 0,
            evictions: 0,
            restores: 0,
            next_eviction: Instant::now(),
        }
    }

    /// Estimated bytes held now: the keys and rules charged, the map's and the LRU list's
    /// arrays as they are (the budgets' map is counted by [`super::budget::Budgets`]).
    pub(crate) fn memory_bytes(&self) -> u64 {
        let charged_fixed = self.hosts.len() as u64 * HOST_STATE_BYTES;
        let entry = std::mem::size_of::<(HostId, HostState)>() as u64 + 1;
        // `capacity` is 7/8 of the buckets, all of which the array holds.
        let buckets = match self.hosts.capacity() {
            0 => 0,
            items => (items * 8 / 7).next_power_of_two() as u64,
        };
        self.bytes.saturating_sub(charged_fixed)
            + buckets * entry
            + self.lru.capacity() as u64 * std::mem::size_of::<(u64, HostId)>() as u64
    }

    /// Keeps the LRU list from filling with stale entries.
    fn compact_lru(&mut self) {
        if self.lru.len() <= 4 * self.hosts.len() + 1024 {
            return;
        }
        let mut live: Vec<(u64, HostId)> = self
            .hosts
            .iter()
            .map(|(&id, state)| (state.touched, id))
            .collect();
        live.sort_unstable();
        self.lru = live.into();
    }
}

/// Estimated bytes of a resident host with key `key` and a robots.txt body of `robots_body`.
pub(crate) fn state_bytes(key: &str, robots_body: u64) -> u64 {
    HOST_STATE_BYTES + key.len() as u64 + robots_body * RULES_PER_BODY_BYTE
}

impl Frontier {
    /// Over budget with no host restored lately: hosts that were busy may be idle now.
    pub(crate) fn evict_if_over_budget(&mut self, now: Instant) {
        if self.resident.bytes > self.options.host_memory && now >= self.resident.next_eviction {
            self.evict_idle(now, None);
            self.resident.next_eviction = now + EVICTION_RETRY;
        }
    }

    /// Brings a host's state into memory (from the robots.txt cache if it was evicted), and
    /// evicts idle hosts beyond the budget.
    pub(crate) fn make_resident(&mut self, id: HostId, now: Instant) -> Result<(), FrontierError> {
        if self.touch(id) {
            return Ok(());
        }
        let key = match self.store.peek(id)? {
            Some(front) => queued_key(&front.url),
            None => return Ok(()),
        };
        self.restore_state(id, key, now);
        Ok(())
    }

    /// Brings the state of the host with key `key` into memory, whether or not it has URLs
    /// queued (a robots.txt redirect may lead to a host the crawl has no page of).
    pub(crate) fn make_resident_as(&mut self, id: HostId, key: &str, now: Instant) {
        if !self.touch(id) {
            self.restore_state(id, key.to_string(), now);
        }
    }

    /// Marks a resident host as served now (the LRU's newest); false if it is not resident.
    fn touch(&mut self, id: HostId) -> bool {
        self.resident.tick += 1;
        let tick = self.resident.tick;
        let Some(state) = self.resident.hosts.get_mut(&id) else {
            return false;
        };
        state.touched = tick;
        self.resident.lru.push_back((tick, id));
        self.resident.compact_lru();
        true
    }

    /// A new resident state for a host that has none (fresh limiter, robots.txt rules from
    /// the cache when unexpired), then evicts idle hosts beyond the budget.
    fn restore_state(&mut self, id: HostId, key: String, now: Instant) {
        let tick = self.resident.tick;
        let (robots, body_len, crawl_delay_rules) = self.restore_robots(id, now);
        let name = name_key(&key);
        let own = self.policy.site_limits(&key);
        self.budgets.join_with(name, own);
        let mut state = HostState {
            bytes: state_bytes(&key, body_len),
            key,
            in_flight: 0,
            not_before: now,
            crawl_delay: None,
            name,
            address: if self.policy.addresses.is_some() {
                AddressState::Unknown
            } else {
                AddressState::NotNeeded
            },
            robots,
            robots_failures: 0,
            touched: tick,
            robots_hops: Vec::new(),
        };
        let mut gap = self.policy.period;
        if let Some(rules) = crawl_delay_rules {
            apply_crawl_delay(&mut state, &rules, self.policy.period);
            gap = gap.max(rules.crawl_delay.unwrap_or_default());
        }
        if let Some(resumed) = self.resumed_at {
            // See the module doc: the first request after a resume keeps the rate.
            state.not_before = state.not_before.max(resumed + gap);
        }
        self.resident.bytes += state.bytes;
        self.resident.hosts.insert(id, state);
        self.resident.lru.push_back((tick, id));
        self.resident.restores += 1;
        if self.resident.bytes > self.options.host_memory {
            self.evict_idle(now, Some(id));
        }
        self.resident.compact_lru();
    }

    /// Evicts idle hosts, least recently served first, until the resident state fits its
    /// budget or no idle host is left among those looked at. `keep` is the host being served.
    fn evict_idle(&mut self, now: Instant, keep: Option<HostId>) {
        let mut budget = self.resident.lru.len();
        while self.resident.bytes > self.options.host_memory && budget > 0 {
            budget -= 1;
            let Some((tick, id)) = self.resident.lru.pop_front() else {
                break;
            };
            let Some(state) = self.resident.hosts.get(&id) else {
                continue;
            };
            if state.touched != tick {
                continue; // stale: the host was served again later
            }
            if Some(id) == keep || !self.is_idle(id, state, now) {
                self.resident.lru.push_back((tick, id));
                continue;
            }
            if let Some(state) = self.resident.hosts.remove(&id) {
                self.resident.bytes -= state.bytes;
                self.resident.evictions += 1;
                self.budgets.leave(state.name, now);
                if let Some(key) = state.address.budget() {
                    self.budgets.leave(key, now);
                }
            }
        }
        self.budgets.sweep(now);
    }

    /// Whether a host's state can be dropped now and rebuilt later without changing what
    /// happens: nothing in flight, no wait pending, its crawl-delay rate full again, no address
    /// lookup or robots.txt
    /// fetch in progress and no backoff with URLs waiting on it.
    fn is_idle(&self, id: HostId, state: &HostState, now: Instant) -> bool {
        if state.in_flight > 0 || state.not_before > now || !state.robots_hops.is_empty() {
            return false;
        }
        if state.crawl_delay.as_ref().is_some_and(|g| !g.is_full(now))
            || matches!(state.address, AddressState::Resolving { .. })
        {
            return false;
        }
        match state.robots {
            RobotsState::Fetching => false,
            RobotsState::Unavailable { retry_at } => retry_at <= now && self.store.len(id) == 0,
            _ => true,
        }
    }
}
