//! What the frontier tells the monitor about single hosts: a bounded list of reports,
//! read once per monitor refresh by the task that owns the frontier.
//!
//! Only hosts the caller names or the frontier already ranks (its top hosts by URLs ever
//! queued, kept up to date at no cost as URLs are queued) are reported, so a report costs
//! O(count) whatever the number of hosts; nothing is added to the per-URL path.

use std::time::Duration;

use tokio::time::Instant;

use super::budget::Refusal;
use super::robots_gate::RobotsState;
use super::{host_id, Frontier, HostId};

/// One host as the monitor shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostReport {
    /// The host key (`scheme://host[:port]`).
    pub host: String,
    /// URLs waiting now.
    pub queued: u64,
    /// URLs ever queued (saturating at `u32::MAX`).
    pub queued_ever: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Where its robots.txt stands: `not_needed`, `unknown`, `fetching`, `ready`,
    /// `unavailable`, or `not_resident` (its state is on disk, evicted while idle).
    pub robots: &'static str,
    /// How long until its next request is allowed (`None`: not known, the host's state is
    /// not in memory; zero: allowed now).
    pub next_allowed_in: Option<Duration>,
}

impl Frontier {
    /// Reports for the `count` hosts with the most URLs ever queued, then for each of
    /// `also` (host keys) not among them.
    pub(crate) fn host_reports(&self, count: usize, also: &[String]) -> Vec<HostReport> {
        let now = Instant::now();
        let mut reports: Vec<HostReport> = self
            .top
            .iter()
            .take(count)
            .map(|(id, key, _)| self.host_report(*id, key, now))
            .collect();
        for key in also {
            if reports.iter().all(|r| &r.host != key) {
                reports.push(self.host_report(host_id(key), key, now));
            }
        }
        reports
    }

    fn host_report(&self, id: HostId, key: &str, now: Instant) -> HostReport {
        let queued = self.store.len(id);
        let queued_ever = self.store.tally(id).map_or(0, |t| t.queued_ever as u64);
        let Some(host) = self.resident.hosts.get(&id) else {
            return HostReport {
                host: key.to_string(),
                queued,
                queued_ever,
                in_flight: 0,
                robots: "not_resident",
                next_allowed_in: None,
            };
        };
        let robots = match host.robots {
            RobotsState::NotNeeded => "not_needed",
            RobotsState::Unknown => "unknown",
            RobotsState::Fetching => "fetching",
            RobotsState::Ready { .. } => "ready",
            RobotsState::Unavailable { .. } => "unavailable",
        };
        let mut at = host.not_before;
        if let Err(Refusal::RateUntil(until)) = self.budgets.check(&[host.name], now) {
            at = at.max(until);
        }
        if let Some(Err(until)) = host.crawl_delay.as_ref().map(|g| g.allows(now)) {
            at = at.max(until);
        }
        HostReport {
            host: key.to_string(),
            queued,
            queued_ever,
            in_flight: host.in_flight as u64,
            robots,
            next_allowed_in: Some(at.saturating_duration_since(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FrontierSection, PolitenessSection};
    use crate::frontier::{FrontierOptions, FrontierPolicy, QueuedUrl, Work};

    #[test]
    fn reports_the_busiest_then_the_named_hosts_with_their_wait() {
        let dir = tempfile::tempdir().unwrap();
        let policy = FrontierPolicy::from_config(&PolitenessSection {
            per_host_rps: 2.0,
            per_host_burst: 1,
            per_host_concurrency: 4,
            respect_robots: false,
            ..PolitenessSection::default()
        });
        let options = FrontierOptions::from_config(&FrontierSection::default(), dir.path(), "t");
        let mut f = Frontier::create(policy, options).unwrap();
        for i in 0..3 {
            f.push(
                "http://a",
                QueuedUrl::new(format!("http://a/{i}"), 0, None, 0),
            )
            .unwrap();
        }
        f.push("http://b", QueuedUrl::new("http://b/0".into(), 0, None, 0))
            .unwrap();
        let dispatched = match f.pop_ready(Instant::now()) {
            Ok(Some(Work::Fetch(d))) => d,
            other => panic!("expected a fetch, got {other:?}"),
        };
        assert_eq!(dispatched.item.url, "http://a/0");

        let reports = f.host_reports(1, &["http://b".into(), "http://never".into()]);
        let hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["http://a", "http://b", "http://never"]);
        let a = &reports[0];
        assert_eq!((a.queued, a.queued_ever, a.in_flight), (2, 3, 1));
        assert_eq!(a.robots, "not_needed");
        // One request just went at 2 per second: the next is at most half a second away
        // (less by however long this test took since).
        let wait = a.next_allowed_in.unwrap();
        assert!(wait <= Duration::from_millis(500), "{wait:?}");
        assert_eq!((reports[1].queued, reports[1].queued_ever), (1, 1));
        assert_eq!(reports[2].queued_ever, 0);
        assert_eq!(reports[2].next_allowed_in, None);
    }
}
