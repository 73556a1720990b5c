//! When each host may next be served: the min-heap of hosts by ready instant, and the one
//! place a request is admitted under every budget it belongs to (see [`super::budget`]): its
//! origin's robots.txt crawl-delay, its host name's rate and cap, its address's.
//!
//! Guarantees: a host has at most one place in the schedule (its tally's `scheduled` flag):
//! an entry in the heap, or parked (in a budget's waiters, or waiting for its address); it is
//! put there only when it has something queued, never with an instant earlier than its
//! `not_before` (retry backoff, Retry-After); a request is handed out only when every budget
//! allows it ([`Frontier::admit`]), and a crawl-delay never makes a host faster than the
//! configured rate. Ties between hosts ready at the same instant go first come, first served
//! (a sequence number), so hosts take turns.
//!
//! Why a heap of hosts rather than of URLs: see the module doc of [`super`]. A host that must
//! wait costs one heap entry until its time comes, whatever it has queued; one parked on a
//! full budget costs nothing until a request of that budget completes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::budget::{BudgetKeys, Gcra, Rate, Refusal};
use super::residency::HostState;
use super::{Frontier, HostId};
use crate::robots::RobotsRules;

/// Hosts that have work, earliest ready instant first.
///
/// Two parts: a min-heap, and a *run*, entries each ready no earlier than the run's last one,
/// in a queue. A push that is no earlier than the run's last entry (most pushes: a host served
/// now is due again now or at a later instant, and `now` only grows) goes to the back of the
/// run, in O(1) and without touching the heap; any other goes to the heap. A pop takes the
/// earlier of the two fronts. Why: with ~1e6 hosts queued the heap's ~32 MB do not fit in any
/// cache, and a pop's sift down its ~20 levels waited for memory at each of the lower ones (the
/// heap and the schedule were ~5 % of all samples in the scale bench at 3e6 URLs). Exact: the
/// run is sorted, entries are ordered by (instant, sequence) and sequences are unique, so the
/// smaller of the two fronts is the smallest entry: the same host comes out first as from one
/// heap of them all.
#[derive(Default)]
pub(crate) struct ReadyHeap {
    /// Min-heap of (ready instant, tie-break sequence, host).
    heap: BinaryHeap<Reverse<(Instant, u64, HostId)>>,
    /// Entries in the order pushed, each ready no earlier than the one before.
    run: VecDeque<(Instant, u64, HostId)>,
    sequence: u64,
}

impl ReadyHeap {
    /// Adds an entry for `id`, ready at `at`. The caller keeps one entry per host.
    pub(crate) fn push(&mut self, id: HostId, at: Instant) {
        self.sequence += 1;
        let entry = (at, self.sequence, id);
        if self.run.back().is_none_or(|last| last.0 <= at) {
            self.run.push_back(entry);
        } else {
            self.heap.push(Reverse(entry));
        }
    }

    /// The earliest entry, and whether it is the run's (else the heap's).
    fn first(&self) -> Option<((Instant, u64, HostId), bool)> {
        match (self.heap.peek(), self.run.front()) {
            (Some(Reverse(h)), Some(r)) => Some(if r < h { (*r, true) } else { (*h, false) }),
            (Some(Reverse(h)), None) => Some((*h, false)),
            (None, Some(r)) => Some((*r, true)),
            (None, None) => None,
        }
    }

    /// When the earliest host becomes ready.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.first().map(|((at, _, _), _)| at)
    }

    /// Takes the earliest host if it is ready at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<HostId> {
        let ((at, _, id), in_run) = self.first()?;
        if at > now {
            return None;
        }
        if in_run {
            self.run.pop_front();
        } else {
            self.heap.pop();
        }
        Some(id)
    }

    /// Estimated bytes of the heap and the run.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<(Instant, u64, HostId)>() as u64;
        (self.heap.capacity() + self.run.capacity()) as u64 * entry
    }
}

/// Installs a host's crawl-delay as its origin's own rate, when it is slower than the
/// configured per-name rate (which the name's budget keeps anyway).
pub(crate) fn apply_crawl_delay(
    host: &mut HostState,
    rules: &RobotsRules,
    policy_period: Duration,
) {
    if let Some(delay) = rules.crawl_delay.filter(|d| *d > policy_period) {
        host.crawl_delay = Some(Gcra::new(Rate {
            period: delay,
            burst: 1,
        }));
    }
}

/// Why a host's request was not admitted.
pub(crate) enum NotAdmitted {
    /// Ask again at this instant (a rate).
    Until(Instant),
    /// The host left the schedule: parked on a full budget, or waiting for its address.
    Parked,
}

impl Frontier {
    /// Puts a host in the heap if it has work and is not already scheduled or parked.
    pub(crate) fn schedule(&mut self, id: HostId, now: Instant) {
        let hops = self.has_robots_hops(id);
        if self.store.tally(id).is_some_and(|t| t.scheduled) || (self.store.len(id) == 0 && !hops) {
            return;
        }
        let at = match self.resident.hosts.get(&id) {
            Some(host) => {
                // A host waiting on its own robots.txt still serves hops into it.
                if host.robots.is_fetching() && !hops {
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
        self.store.tally_mut(id).scheduled = true;
        self.ready.push(id, at);
    }

    /// Marks a host scheduled without a heap entry: it is parked and comes back when woken.
    fn park_host(&mut self, id: HostId) {
        self.store.tally_mut(id).scheduled = true;
    }

    /// Admits one request of resident host `id` at `now` if every budget it belongs to allows
    /// it, and charges it to all of them (the host's and the frontier's in-flight counts
    /// included). Returns the budgets to release when the request is over.
    pub(crate) fn admit(&mut self, id: HostId, now: Instant) -> Result<BudgetKeys, NotAdmitted> {
        let address = match self.address_budget(id, now) {
            Ok(address) => address,
            Err(()) => {
                self.park_host(id);
                return Err(NotAdmitted::Parked);
            }
        };
        let Some(host) = self.resident.hosts.get_mut(&id) else {
            return Err(NotAdmitted::Until(now));
        };
        if let Some(Err(at)) = host.crawl_delay.as_ref().map(|g| g.allows(now)) {
            return Err(NotAdmitted::Until(at));
        }
        let keys = BudgetKeys::new(host.name, address);
        match self.budgets.check(keys.as_slice(), now) {
            Ok(()) => {}
            Err(Refusal::RateUntil(at)) => return Err(NotAdmitted::Until(at)),
            Err(Refusal::Full(key)) => {
                self.budgets.park(key, id);
                self.park_host(id);
                return Err(NotAdmitted::Parked);
            }
        }
        if let Some(gcra) = host.crawl_delay.as_mut() {
            gcra.charge(now);
        }
        host.in_flight += 1;
        self.in_flight += 1;
        self.budgets.charge(keys.as_slice(), now);
        Ok(keys)
    }

    /// A request admitted under `keys` is over: its slots are free, and the hosts parked
    /// on them are woken, one per slot.
    pub(crate) fn release(&mut self, keys: BudgetKeys, now: Instant) {
        let mut woken = std::mem::take(&mut self.woken);
        self.budgets.release(keys.as_slice(), &mut woken);
        for id in woken.drain(..) {
            self.wake(id, now);
        }
        self.woken = woken;
    }

    /// Puts a parked host back into the heap, due from its own `not_before`: it has waited
    /// for a slot or an answer, not for time.
    pub(crate) fn wake(&mut self, id: HostId, now: Instant) {
        let due = self.resident.hosts.get(&id).map_or(now, |h| h.not_before);
        self.push_ready(id, due.min(now));
    }

    /// Host `id` was taken from the heap and sent nothing: if it had been woken for a free
    /// slot, the next waiter of that budget gets its chance.
    pub(crate) fn pass_on(&mut self, id: HostId, now: Instant) {
        let Some(host) = self.resident.hosts.get(&id) else {
            return;
        };
        let keys = BudgetKeys::new(host.name, host.address.budget());
        let mut woken = std::mem::take(&mut self.woken);
        self.budgets.pass_on(keys.as_slice(), &mut woken);
        for id in woken.drain(..) {
            self.wake(id, now);
        }
        self.woken = woken;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The heap and its run together hand out exactly what one heap of all the entries
        /// would: the earliest due entry, ties first pushed first, and nothing not yet due;
        /// pushes in order (to the run) and out of order (to the heap) interleaved with pops.
        #[test]
        fn hands_out_in_the_order_of_one_heap(
            ops in proptest::collection::vec((0u64..40, 0u64..6, any::<bool>()), 1..300),
        ) {
            let base = Instant::now();
            let at = |ms: u64| base + Duration::from_millis(ms);
            let mut ready = ReadyHeap::default();
            // The model: every entry, (instant, push number, host), the smallest due first.
            let mut model: Vec<(Instant, u64, HostId)> = Vec::new();
            let mut clock = 0u64;
            for (n, &(ms, step, pop)) in ops.iter().enumerate() {
                clock += step;
                if pop {
                    let due = model
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| e.0 <= at(clock))
                        .min_by_key(|(_, e)| (e.0, e.1))
                        .map(|(i, _)| i);
                    let want = due.map(|i| model.remove(i).2);
                    prop_assert_eq!(ready.pop_due(at(clock)), want);
                } else {
                    // Mostly from the clock on (the run), sometimes earlier (the heap).
                    let when = at(if ms % 3 == 0 { ms } else { clock + ms % 7 });
                    ready.push(n as HostId, when);
                    model.push((when, n as u64, n as HostId));
                }
                prop_assert_eq!(ready.next_at(), model.iter().map(|e| e.0).min());
            }
        }
    }
}
