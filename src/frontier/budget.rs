//! Politeness budgets shared by several queues: a request rate (GCRA) and a cap on requests
//! in flight, each kept once for everything that must share it.
//!
//! A request belongs to up to three budgets, and is handed out only when every one allows it:
//! its origin's robots.txt `Crawl-delay` (kept on the origin, see `schedule.rs`), its host
//! *name*'s budget (`per_host_rps`, `per_host_burst`, `per_host_concurrency`: `http://a`,
//! `https://a` and `http://a:8080` are one server's name and share it), and, with
//! `per_ip_rps` / `per_ip_concurrency` on, its server *address*'s budget (every name that
//! resolves to that address shares it: virtual hosts, CDNs).
//!
//! Guarantees: a budget's rate and cap hold over every request charged to it (pages, robots.txt
//! and its redirect hops), whichever queue asked; a queue that a budget refuses leaves the
//! ready heap: on a rate, until the instant the budget's next request is allowed; on a cap,
//! parked in the budget's FIFO of waiters until one of its requests completes (one waiter
//! woken per freed slot, and a woken queue that does not use the slot passes it on), so no
//! fetch task ever sleeps holding a slot and no queue polls. A budget lives as long as a
//! resident queue uses it or it is not idle (requests in flight, waiters, a rate not full
//! again): dropping it then loses nothing, since a fresh budget is exactly an idle one.
//!
//! A budget also adapts (see [`super::adapt`]): each finished page fetch's [`ServerSignal`]
//! may lengthen its interval (throttling, slow answers) or bring it back towards the
//! configured one; a slowed budget is not idle, so its slow-down is not forgotten by dropping
//! it. A host name's budget may have limits of its own (a `[[site]]` section): given when the
//! budget is made, by the first queue that joins it.
//!
//! Why a hand-written GCRA rather than governor (used before): a request must be checked
//! against all its budgets before it is charged to any. governor's `check` takes a token as it
//! tests, so a request refused by its address's budget would still have spent its name's token
//! (slowing the name for nothing, and wasting the shared address's tokens the other way round).
//! GCRA is a dozen lines (one "theoretical arrival time" per budget) with test-then-charge, on
//! tokio's `Instant`, so the frontier's unit tests drive it with the `now` they pass instead of
//! sleeping.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use rustc_hash::FxHashMap;
use tokio::time::Instant;

use super::adapt::{note_slowed, AdaptPolicy, ServerSignal, Slowdown, SlowedHost};
use super::HostId;

/// A GCRA rate: `burst` requests back to back, then one per `period`.
#[derive(Debug, Clone)]
pub(crate) struct Gcra {
    period: Duration,
    /// `period × (burst − 1)`: how far ahead of schedule a request may come.
    tolerance: Duration,
    /// Theoretical arrival time of the next request; `None` while it is in the past.
    tat: Option<Instant>,
}

/// A rate: the period between requests and how many may come back to back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate {
    pub(crate) period: Duration,
    pub(crate) burst: u32,
}

impl Gcra {
    pub(crate) fn new(rate: Rate) -> Gcra {
        Gcra {
            period: rate.period,
            tolerance: rate.period * rate.burst.max(1).saturating_sub(1),
            tat: None,
        }
    }

    /// Whether a request at `now` is allowed; if not, from when.
    pub(crate) fn allows(&self, now: Instant) -> Result<(), Instant> {
        match self.tat {
            Some(tat) if now + self.tolerance < tat => {
                Err(now + tat.duration_since(now + self.tolerance))
            }
            _ => Ok(()),
        }
    }

    /// Charges a request at `now` (after [`Gcra::allows`] said yes).
    pub(crate) fn charge(&mut self, now: Instant) {
        let base = self.tat.map_or(now, |tat| tat.max(now));
        self.tat = Some(base + self.period);
    }

    /// Changes the rate, the request last charged included: the next one is allowed one
    /// *new* period after it (a slow-down applies at once, not after one more request).
    pub(crate) fn set_rate(&mut self, rate: Rate) {
        if let Some(tat) = self.tat {
            self.tat = if rate.period >= self.period {
                Some(tat + (rate.period - self.period))
            } else {
                tat.checked_sub(self.period - rate.period).or(Some(tat))
            };
        }
        self.period = rate.period;
        self.tolerance = rate.period * rate.burst.max(1).saturating_sub(1);
    }

    /// Whether the rate is as good as new at `now`: a fresh one would behave the same.
    pub(crate) fn is_full(&self, now: Instant) -> bool {
        self.tat.is_none_or(|tat| tat <= now)
    }

    /// From when the rate is as good as new (`None`: it already was at the last charge).
    pub(crate) fn full_at(&self) -> Option<Instant> {
        self.tat
    }
}

/// The budgets one request is charged to: its name's, and its address's when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetKeys {
    keys: [BudgetKey; 2],
    len: u8,
}

impl BudgetKeys {
    pub(crate) fn new(name: BudgetKey, address: Option<BudgetKey>) -> BudgetKeys {
        match address {
            Some(address) => BudgetKeys {
                keys: [name, address],
                len: 2,
            },
            None => BudgetKeys {
                keys: [name, name],
                len: 1,
            },
        }
    }

    pub(crate) fn as_slice(&self) -> &[BudgetKey] {
        &self.keys[..self.len as usize]
    }
}

/// Which budget: a host name's or a server address's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BudgetKey {
    /// XXH3-64 of the host name (no scheme, no port), see [`name_key`].
    Name(u64),
    Address(IpAddr),
}

/// The budget of the name in host key `key` (`scheme://host[:port]`).
pub(crate) fn name_key(key: &str) -> BudgetKey {
    BudgetKey::Name(xxhash_rust::xxh3::xxh3_64(
        crate::host::key_name(key).as_bytes(),
    ))
}

/// What a kind of budget allows: its rate (none: unlimited) and its cap on requests in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limits {
    pub(crate) rate: Option<Rate>,
    pub(crate) concurrency: u32,
}

impl Limits {
    pub(crate) const UNLIMITED: Limits = Limits {
        rate: None,
        concurrency: u32::MAX,
    };
}

/// One shared budget.
#[derive(Debug)]
pub(crate) struct Budget {
    rate: Option<Gcra>,
    /// The configured rate, which adaptation never goes faster than.
    base: Option<Rate>,
    /// Set once adaptation has slowed it.
    slowdown: Option<Box<Slowdown>>,
    cap: u32,
    in_flight: u32,
    /// Queues parked until a slot frees, first parked first woken.
    waiters: VecDeque<HostId>,
    /// Resident queues that charge it.
    users: u32,
}

impl Budget {
    fn new(limits: Limits) -> Budget {
        Budget {
            rate: limits.rate.map(Gcra::new),
            base: limits.rate,
            slowdown: None,
            cap: limits.concurrency.max(1),
            in_flight: 0,
            waiters: VecDeque::new(),
            users: 0,
        }
    }

    fn is_idle(&self, now: Instant) -> bool {
        self.in_flight == 0
            && self.waiters.is_empty()
            && self.rate.as_ref().is_none_or(|r| r.is_full(now))
            && self
                .slowdown
                .as_ref()
                .is_none_or(|s| !s.is_slowed(self.base_period()))
    }

    fn base_period(&self) -> Duration {
        self.base.map_or(Duration::ZERO, |r| r.period)
    }

    /// Takes a finished fetch's signal into account; the slow-down if it has one.
    fn adapt(&mut self, signal: &ServerSignal, policy: &AdaptPolicy) -> Option<&Slowdown> {
        let base = self.base_period();
        let interval = match self.slowdown.as_mut() {
            Some(slowdown) => slowdown.observe(signal, base, policy),
            None => {
                let mut slowdown = Slowdown::default();
                let interval = slowdown.observe(signal, base, policy);
                if interval > base {
                    self.slowdown = Some(Box::new(slowdown));
                }
                interval
            }
        };
        if interval > base {
            // Slowed: one request per interval, no burst.
            let rate = Rate {
                period: interval,
                burst: 1,
            };
            match self.rate.as_mut() {
                Some(gcra) => gcra.set_rate(rate),
                None => self.rate = Some(Gcra::new(rate)),
            }
        } else {
            match (self.base, self.rate.as_mut()) {
                (Some(rate), Some(gcra)) => gcra.set_rate(rate),
                (Some(rate), None) => self.rate = Some(Gcra::new(rate)),
                (None, _) => self.rate = None,
            }
        }
        self.slowdown.as_deref()
    }
}

/// Why a budget refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its rate allows the next request at this instant.
    RateUntil(Instant),
    /// Its cap is reached: wait for a completion.
    Full(BudgetKey),
}

/// Every shared budget in use.
#[derive(Debug)]
pub(crate) struct Budgets {
    /// FxHash: the keys are XXH3 hashes of names, or addresses; looked up at each pop.
    map: FxHashMap<BudgetKey, Budget>,
    names: Limits,
    addresses: Limits,
    adapt: AdaptPolicy,
    /// The slowed budgets with the largest slow-downs (see [`super::adapt::REPORT_LEN`]).
    report: Vec<SlowedHost>,
    /// Budgets no resident queue uses that were not idle when the last one left: looked at
    /// again by [`Budgets::sweep`].
    lingering: Vec<BudgetKey>,
}

impl Budgets {
    pub(crate) fn new(names: Limits, addresses: Limits) -> Budgets {
        Budgets {
            map: FxHashMap::default(),
            names,
            addresses,
            adapt: AdaptPolicy::OFF,
            report: Vec::new(),
            lingering: Vec::new(),
        }
    }

    fn limits(&self, key: BudgetKey) -> Limits {
        match key {
            BudgetKey::Name(_) => self.names,
            BudgetKey::Address(_) => self.addresses,
        }
    }

    /// Budgets that adapt to what servers answer (see [`super::adapt`]).
    pub(crate) fn with_adaptation(mut self, adapt: AdaptPolicy) -> Budgets {
        self.adapt = adapt;
        self
    }

    /// A resident queue starts charging `key`.
    pub(crate) fn join(&mut self, key: BudgetKey) {
        self.join_with(key, None);
    }

    /// [`Budgets::join`], with limits of its own (a `[[site]]`'s) if the budget is new.
    pub(crate) fn join_with(&mut self, key: BudgetKey, own: Option<Limits>) {
        let limits = own.unwrap_or_else(|| self.limits(key));
        self.map
            .entry(key)
            .or_insert_with(|| Budget::new(limits))
            .users += 1;
    }

    /// A page fetch charged to `keys` ended with `signal`: each budget adapts. `name` is
    /// the host name the name's budget is reported under.
    pub(crate) fn adapt(&mut self, keys: &[BudgetKey], signal: &ServerSignal, name: &str) {
        if !self.adapt.enabled {
            return;
        }
        for key in keys {
            let Some(budget) = self.map.get_mut(key) else {
                continue;
            };
            let base = budget.base_period();
            let Some(slowdown) = budget.adapt(signal, &self.adapt) else {
                continue;
            };
            let (label, kind) = match key {
                BudgetKey::Name(_) => (name.to_string(), "name"),
                BudgetKey::Address(ip) => (ip.to_string(), "address"),
            };
            let entry = SlowedHost::new(label, kind, base, slowdown, &self.adapt);
            note_slowed(&mut self.report, entry);
        }
    }

    /// The slowed budgets with the largest slow-downs, largest first.
    pub(crate) fn slowed(&self) -> &[SlowedHost] {
        &self.report
    }

    /// A queue stops charging `key` (evicted, or its address changed). The budget goes when
    /// nothing needs it any more.
    pub(crate) fn leave(&mut self, key: BudgetKey, now: Instant) {
        let Some(budget) = self.map.get_mut(&key) else {
            return;
        };
        budget.users = budget.users.saturating_sub(1);
        if budget.users == 0 {
            if budget.is_idle(now) {
                self.map.remove(&key);
            } else {
                self.lingering.push(key);
            }
        }
    }

    /// Drops the lingering budgets that became idle.
    pub(crate) fn sweep(&mut self, now: Instant) {
        let map = &mut self.map;
        self.lingering.retain(|key| match map.get(key) {
            Some(b) if b.users == 0 && b.is_idle(now) => {
                map.remove(key);
                false
            }
            Some(b) => b.users == 0,
            None => false,
        });
    }

    /// Whether every budget of `keys` allows a request at `now`; the first refusal if not
    /// (a full cap before a rate: a rate wait is pointless while the cap holds the queue).
    pub(crate) fn check(&self, keys: &[BudgetKey], now: Instant) -> Result<(), Refusal> {
        let mut wait: Option<Instant> = None;
        for key in keys {
            let Some(budget) = self.map.get(key) else {
                continue;
            };
            if budget.in_flight >= budget.cap {
                return Err(Refusal::Full(*key));
            }
            if let Some(Err(at)) = budget.rate.as_ref().map(|r| r.allows(now)) {
                wait = Some(wait.map_or(at, |w| w.max(at)));
            }
        }
        match wait {
            Some(at) => Err(Refusal::RateUntil(at)),
            None => Ok(()),
        }
    }

    /// Charges a request at `now` to every budget of `keys` (after [`Budgets::check`]).
    pub(crate) fn charge(&mut self, keys: &[BudgetKey], now: Instant) {
        for key in keys {
            let limits = self.limits(*key);
            let budget = self.map.entry(*key).or_insert_with(|| Budget::new(limits));
            if let Some(rate) = budget.rate.as_mut() {
                rate.charge(now);
            }
            budget.in_flight += 1;
        }
    }

    /// A request charged to `keys` is over; returns the queues to wake, one per budget that
    /// has a waiter.
    pub(crate) fn release(&mut self, keys: &[BudgetKey], woken: &mut Vec<HostId>) {
        for key in keys {
            if let Some(budget) = self.map.get_mut(key) {
                budget.in_flight = budget.in_flight.saturating_sub(1);
                if budget.in_flight < budget.cap {
                    woken.extend(budget.waiters.pop_front());
                }
            }
        }
    }

    /// Parks queue `id` until a request of `key` completes.
    pub(crate) fn park(&mut self, key: BudgetKey, id: HostId) {
        if let Some(budget) = self.map.get_mut(&key) {
            budget.waiters.push_back(id);
        }
    }

    /// A queue woken for a free slot of one of `keys` did not take it: the next waiter of
    /// each budget with room gets its chance.
    pub(crate) fn pass_on(&mut self, keys: &[BudgetKey], woken: &mut Vec<HostId>) {
        for key in keys {
            if let Some(budget) = self.map.get_mut(key) {
                if budget.in_flight < budget.cap {
                    woken.extend(budget.waiters.pop_front());
                }
            }
        }
    }

    /// From when `key`'s rate is as good as new, if it is not yet.
    pub(crate) fn full_at(&self, key: BudgetKey) -> Option<Instant> {
        self.map.get(&key)?.rate.as_ref()?.full_at()
    }

    /// Requests in flight charged to `key` (0 if it has no budget).
    #[cfg(test)]
    pub(crate) fn in_flight(&self, key: BudgetKey) -> u32 {
        self.map.get(&key).map_or(0, |b| b.in_flight)
    }

    /// Budgets in memory.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Estimated bytes.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<(BudgetKey, Budget)>() as u64 + 8;
        self.map.capacity() as u64 * entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_sec: u32, burst: u32) -> Rate {
        Rate {
            period: Duration::from_secs(1) / per_sec,
            burst,
        }
    }

    #[test]
    fn gcra_allows_the_burst_then_one_per_period() {
        let t0 = Instant::now();
        let mut g = Gcra::new(rate(10, 3));
        for _ in 0..3 {
            assert_eq!(g.allows(t0), Ok(()));
            g.charge(t0);
        }
        let next = g.allows(t0).unwrap_err();
        assert_eq!(next, t0 + Duration::from_millis(100));
        assert_eq!(g.allows(next), Ok(()));
        g.charge(next);
        assert_eq!(g.allows(next).unwrap_err(), t0 + Duration::from_millis(200));
        assert!(!g.is_full(next));
        assert!(g.is_full(t0 + Duration::from_millis(400)));
        // Idle long enough, the whole burst is back.
        let later = t0 + Duration::from_secs(5);
        for _ in 0..3 {
            assert_eq!(g.allows(later), Ok(()));
            g.charge(later);
        }
        assert!(g.allows(later).is_err());
    }

    #[test]
    fn names_share_one_budget_across_schemes_and_ports() {
        assert_eq!(name_key("http://a.example"), name_key("https://a.example"));
        assert_eq!(
            name_key("http://a.example"),
            name_key("http://a.example:8080")
        );
        assert_ne!(name_key("http://a.example"), name_key("http://b.example"));
        assert_eq!(name_key("http://[::1]:80"), name_key("https://[::1]"));
        assert_ne!(name_key("http://[::1]"), name_key("http://[::2]"));
    }

    #[test]
    fn a_request_is_checked_against_every_budget_before_any_is_charged() {
        let t0 = Instant::now();
        let name = BudgetKey::Name(1);
        let addr = BudgetKey::Address("10.0.0.1".parse().unwrap());
        let mut b = Budgets::new(
            Limits {
                rate: Some(rate(1, 1)),
                concurrency: 5,
            },
            Limits {
                rate: Some(rate(10, 1)),
                concurrency: 5,
            },
        );
        let other = BudgetKey::Name(2);
        for key in [name, addr, other] {
            b.join(key);
        }
        b.charge(&[other, addr], t0);
        // The address refuses: the name's token is not spent.
        let refusal = b.check(&[name, addr], t0).unwrap_err();
        assert_eq!(refusal, Refusal::RateUntil(t0 + Duration::from_millis(100)));
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(b.check(&[name, addr], t1), Ok(()));
        b.charge(&[name, addr], t1);
        assert_eq!(b.in_flight(addr), 2);
        assert_eq!(b.in_flight(name), 1);
    }

    #[test]
    fn a_full_cap_parks_and_a_release_wakes_one_waiter_per_slot() {
        let t0 = Instant::now();
        let addr = BudgetKey::Address("10.0.0.1".parse().unwrap());
        let mut b = Budgets::new(
            Limits::UNLIMITED,
            Limits {
                rate: None,
                concurrency: 2,
            },
        );
        b.join(addr);
        b.charge(&[addr], t0);
        b.charge(&[addr], t0);
        assert_eq!(b.check(&[addr], t0), Err(Refusal::Full(addr)));
        b.park(addr, 7);
        b.park(addr, 8);
        let mut woken = Vec::new();
        b.release(&[addr], &mut woken);
        assert_eq!(woken, vec![7]);
        // 7 did not take the slot: 8 gets it.
        woken.clear();
        b.pass_on(&[addr], &mut woken);
        assert_eq!(woken, vec![8]);
        woken.clear();
        b.pass_on(&[addr], &mut woken);
        assert!(woken.is_empty());
    }

    #[test]
    fn a_budget_outlives_its_users_until_idle() {
        let t0 = Instant::now();
        let name = BudgetKey::Name(1);
        let mut b = Budgets::new(
            Limits {
                rate: Some(rate(1, 1)),
                concurrency: 2,
            },
            Limits::UNLIMITED,
        );
        b.join(name);
        b.charge(&[name], t0);
        b.release(&[name], &mut Vec::new());
        b.leave(name, t0);
        // Its rate is not full again: kept, so a queue coming back keeps the rate.
        assert_eq!(b.len(), 1);
        b.join(name);
        assert!(b.check(&[name], t0).is_err());
        b.leave(name, t0);
        b.sweep(t0 + Duration::from_millis(500));
        assert_eq!(b.len(), 1);
        b.sweep(t0 + Duration::from_secs(1));
        assert_eq!(b.len(), 0);
    }
}
