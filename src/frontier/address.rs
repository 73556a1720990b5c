//! The server address of each host, for the per-address budget (`politeness.per_ip_rps`,
//! `per_ip_concurrency`): known before a request is admitted, looked up ahead of it.
//!
//! Guarantees (with per-address limits on): no request of a host is admitted before its
//! address is known and unexpired; a host whose address is unknown, or whose answer's TTL
//! ran out, is parked (off the heap) and its name handed to the caller as an
//! [`AddressLookup`]; the answer ([`Frontier::address_resolved`]) moves the host onto its
//! address's budget and back into the heap. The frontier never resolves a name itself: it is
//! owned by one task that must not wait on the network, so the crawl's driver runs the
//! lookups as tasks (through the request gate's resolver, whose cache then answers the HTTP
//! client's own lookup: the address connected to is the one budgeted). A name that does not
//! resolve is served without an address budget for [`FAILED_RETRY`] (its fetches fail on the
//! same answer and are recorded with the resolver's error), then looked up again. An IP
//! literal is its own address, without a lookup.

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::budget::BudgetKey;
use super::{Frontier, HostId};

/// How long a name that failed to resolve is served without an address budget before it is
/// looked up again.
pub(crate) const FAILED_RETRY: Duration = Duration::from_secs(30);

/// What the frontier knows of a host's address.
#[derive(Debug, Clone)]
pub(crate) enum AddressState {
    /// Per-address limits are off.
    NotNeeded,
    /// Not looked up yet (or its answer expired and the host was evicted).
    Unknown,
    /// Handed out as an [`AddressLookup`]; the host is parked until the answer.
    Resolving {
        /// The answer it had, charged until the new one comes (an expired TTL).
        previous: Option<IpAddr>,
    },
    /// The address requests are charged to, until `expires` (the answer's TTL).
    Known { ip: IpAddr, expires: Instant },
    /// The name did not resolve: no address budget until `retry_at`.
    Failed { retry_at: Instant },
}

impl AddressState {
    /// The address budget requests are charged to now, if any.
    pub(crate) fn budget(&self) -> Option<BudgetKey> {
        match self {
            AddressState::Known { ip, .. } | AddressState::Resolving { previous: Some(ip) } => {
                Some(BudgetKey::Address(*ip))
            }
            _ => None,
        }
    }
}

/// A host name to resolve for the frontier; give the answer back with
/// [`Frontier::address_resolved`].
#[derive(Debug, Clone)]
pub struct AddressLookup {
    pub(crate) host: HostId,
    /// The name to resolve (as in the URL; an IPv6 literal never comes here).
    pub name: String,
}

/// The answer to an [`AddressLookup`], defined with the resolver that gives it.
pub use crate::dns::AddressAnswer;

impl Frontier {
    /// The address budget of resident host `id` at `now`: `Ok(None)` when per-address limits
    /// are off or the name did not resolve; `Err(())` when the host must wait for a lookup
    /// (handed out by [`Frontier::take_lookups`]).
    pub(crate) fn address_budget(
        &mut self,
        id: HostId,
        now: Instant,
    ) -> Result<Option<BudgetKey>, ()> {
        let Some(host) = self.resident.hosts.get_mut(&id) else {
            return Ok(None);
        };
        let previous = match &host.address {
            AddressState::NotNeeded => return Ok(None),
            AddressState::Known { ip, expires } if *expires > now => {
                return Ok(Some(BudgetKey::Address(*ip)))
            }
            AddressState::Failed { retry_at } if *retry_at > now => return Ok(None),
            AddressState::Resolving { .. } => return Err(()),
            AddressState::Known { ip, .. } => Some(*ip),
            AddressState::Unknown | AddressState::Failed { .. } => None,
        };
        let name = crate::host::key_name(&host.key).into_owned();
        if name.is_empty() {
            return Ok(None);
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            // An IP literal: its own address, for as long as the crawl runs.
            let far = now + Duration::from_secs(100 * 365 * 86_400);
            self.set_address(id, AddressState::Known { ip, expires: far }, now);
            return Ok(Some(BudgetKey::Address(ip)));
        }
        host.address = AddressState::Resolving { previous };
        self.lookups.push(AddressLookup { host: id, name });
        Err(())
    }

    /// Names to resolve for parked hosts: run each lookup off the frontier's task and give
    /// the answer back with [`Frontier::address_resolved`].
    pub fn take_lookups(&mut self) -> Vec<AddressLookup> {
        std::mem::take(&mut self.lookups)
    }

    /// The answer to a lookup: the host is charged to its address's budget from now on and
    /// goes back into the heap.
    pub fn address_resolved(&mut self, lookup: AddressLookup, answer: AddressAnswer) {
        let now = Instant::now();
        let id = lookup.host;
        if !self.resident.hosts.contains_key(&id) {
            // Not evicted while resolving (see `residency.rs`); kept for safety.
            self.unpark(id, now);
            return;
        }
        let state = match answer {
            Ok((ip, expires)) => AddressState::Known { ip, expires },
            Err(reason) => {
                tracing::debug!("{}: {reason}", lookup.name);
                AddressState::Failed {
                    retry_at: now + FAILED_RETRY,
                }
            }
        };
        self.set_address(id, state, now);
        self.unpark(id, now);
    }

    /// Gives a host a new address state, moving it between address budgets.
    fn set_address(&mut self, id: HostId, state: AddressState, now: Instant) {
        let Some(host) = self.resident.hosts.get_mut(&id) else {
            return;
        };
        let old = host.address.budget();
        let new = state.budget();
        host.address = state;
        if old != new {
            if let Some(key) = new {
                self.budgets.join(key);
            }
            if let Some(key) = old {
                self.budgets.leave(key, now);
            }
        }
    }

    /// Puts a host parked on its lookup back into the heap (see [`Frontier::wake`]).
    fn unpark(&mut self, id: HostId, now: Instant) {
        if self.store.len(id) > 0 || self.has_robots_hops(id) {
            self.wake(id, now);
        } else if let Some(tally) = self.store.tally_if_kept(id) {
            tally.scheduled = false;
        }
    }
}
