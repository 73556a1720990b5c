//! When a host may be handed to another process (distributed mode, `crate::distributed`):
//! the instant from which a fresh rate limiter in another process is no faster than this
//! frontier's limiter would be.
//!
//! A GCRA rate idle until its theoretical arrival time is as good as new, so a host may get a
//! fresh limiter (a full burst) from the later of its name's budget and its Crawl-delay rate
//! being full again (see `budget.rs`), or later if its `not_before` (retry backoff,
//! Retry-After) says so. A host whose state was evicted was idle at least that long.

use std::time::Duration;

use tokio::time::Instant;

use super::{host_id, Frontier};

impl Frontier {
    /// How long from `now` until the host with key `key` may be served by a fresh limiter.
    pub(crate) fn handoff_wait(&self, key: &str, now: Instant) -> Duration {
        let Some(host) = self.resident.hosts.get(&host_id(key)) else {
            return Duration::ZERO;
        };
        let mut until = host.not_before;
        if let Some(at) = self.budgets.full_at(host.name) {
            until = until.max(at);
        }
        if let Some(at) = host.crawl_delay.as_ref().and_then(|g| g.full_at()) {
            until = until.max(at);
        }
        until.saturating_duration_since(now)
    }
}
