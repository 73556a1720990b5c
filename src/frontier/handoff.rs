//! When a host may be handed to another process (distributed mode, `crate::distributed`):
//! the instant from which a fresh rate limiter in another process is no faster than this
//! frontier's limiter would be.
//!
//! A GCRA limiter idle for `period × burst` is as good as new, so a host whose last request
//! was at `t` may get a fresh limiter (a full burst) from `t + period × burst`, or later if
//! its `not_before` (retry backoff, Retry-After) says so. A Crawl-delay has replaced the
//! limiter's period and `limiter_refill` with it (see `schedule::apply_crawl_delay`), so it
//! is included. A host whose state was evicted was idle at least that long.

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
        if let Some(last) = host.last_request {
            until = until.max(last + host.limiter_refill);
        }
        until.saturating_duration_since(now)
    }
}
