//! Politeness that adapts: a budget (a host name's, a server address's) slows down when its
//! server says it is struggling, and speeds back up only gradually.
//!
//! Two signals, from every finished page fetch ([`ServerSignal`], carried back on the
//! dispatch so that the crawl's dispatcher needs no hook of its own):
//! - **Throttling**: a `429` or `503` *without* `Retry-After` (with one, the server said how
//!   long to wait, and the retry already waits that long). The budget's interval doubles
//!   (multiplicative decrease of the rate), bounded by `politeness.adaptive_max_interval_secs`;
//!   every other answer takes `adaptive_recovery` × the configured interval off it (additive
//!   increase), so a struggling server is left alone quickly and probed again slowly: AIMD,
//!   as TCP does, which converges under the server's limit instead of oscillating around it.
//! - **Latency**: the interval is at least `adaptive_latency_factor` × the last fetch's
//!   duration, capped by `adaptive_max_latency_delay_secs` (Heritrix's `delayFactor` 5 and
//!   `maxDelayMs` 30 s). A server that answers slower is asked less often, never by more
//!   connections: the in-flight cap (`per_host_concurrency`) is never raised by anything here.
//!
//! Guarantees: the interval never drops below the configured one (adaptation only slows);
//! a slowed budget asks for one request at a time (no burst) until it is back to the
//! configured rate; the report of slowed budgets is bounded ([`REPORT_LEN`] entries, the
//! largest slow-downs), whatever the number of hosts.
//!
//! Why per budget and not per host queue: the budgets are what the frontier already shares
//! between the schemes and ports of a name and between the names on an address, so a
//! slow-down lands on the same thing a rate does, per-address budgets included.

use std::time::Duration;

use serde::Serialize;

/// How many slowed budgets the summary lists.
pub(crate) const REPORT_LEN: usize = 20;

/// What one finished request says about its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSignal {
    /// The HTTP status.
    pub status: u16,
    /// Whether the answer carried a `Retry-After`.
    pub retry_after: bool,
    /// From sending the request to the end of the body.
    pub elapsed: Duration,
}

impl ServerSignal {
    /// A `429` or `503` that did not say how long to wait: the server is throttling us.
    pub(crate) fn is_throttle(&self) -> bool {
        (self.status == 429 || self.status == 503) && !self.retry_after
    }
}

/// `[politeness]`'s adaptive settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct AdaptPolicy {
    pub(crate) enabled: bool,
    /// The longest interval throttling may reach.
    pub(crate) max_interval: Duration,
    /// The fraction of the configured interval one success takes off a throttled one.
    pub(crate) recovery: f64,
    /// The interval is at least this many times the last fetch's duration.
    pub(crate) latency_factor: f64,
    /// … capped at this.
    pub(crate) max_latency_delay: Duration,
    /// Where doubling starts for a budget with no rate of its own (an address budget with
    /// only a cap): the configured per-name interval.
    pub(crate) start: Duration,
}

impl AdaptPolicy {
    pub(crate) const OFF: AdaptPolicy = AdaptPolicy {
        enabled: false,
        max_interval: Duration::ZERO,
        recovery: 0.0,
        latency_factor: 0.0,
        max_latency_delay: Duration::ZERO,
        start: Duration::ZERO,
    };
}

/// One budget's adaptation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slowdown {
    /// The throttled interval (zero: not throttled).
    throttle: Duration,
    /// The latency delay from the last fetch.
    latency: Duration,
    /// For the report.
    pub(crate) throttled: u64,
    pub(crate) slowest: Duration,
    pub(crate) peak: Duration,
}

impl Slowdown {
    /// The interval this budget keeps now, given its configured one (`base`).
    pub(crate) fn interval(&self, base: Duration) -> Duration {
        base.max(self.throttle).max(self.latency)
    }

    /// Whether it asks for more than `base`.
    pub(crate) fn is_slowed(&self, base: Duration) -> bool {
        self.interval(base) > base
    }

    /// Takes one answer into account; returns the new interval.
    pub(crate) fn observe(
        &mut self,
        signal: &ServerSignal,
        base: Duration,
        policy: &AdaptPolicy,
    ) -> Duration {
        let unit = base.max(policy.start);
        if signal.is_throttle() {
            self.throttled += 1;
            let from = self.throttle.max(unit);
            self.throttle = (from * 2).min(policy.max_interval.max(unit));
        } else if !self.throttle.is_zero() {
            let step = unit.mul_f64(policy.recovery.max(0.0));
            self.throttle = self.throttle.saturating_sub(step);
            if self.throttle <= base {
                self.throttle = Duration::ZERO;
            }
        }
        self.latency = signal
            .elapsed
            .mul_f64(policy.latency_factor.max(0.0))
            .min(policy.max_latency_delay);
        self.slowest = self.slowest.max(signal.elapsed);
        let interval = self.interval(base);
        self.peak = self.peak.max(interval);
        interval
    }
}

/// A slowed budget, as the summary shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowedHost {
    /// The host name, or the server address for a per-address budget.
    pub host: String,
    /// `name` or `address`.
    pub budget: &'static str,
    /// The configured interval between requests, in ms.
    pub configured_interval_ms: u64,
    /// The longest interval adaptation set, in ms.
    pub peak_interval_ms: u64,
    /// The interval at the end, in ms.
    pub interval_ms: u64,
    /// Answers `429`/`503` without `Retry-After`.
    pub throttled_responses: u64,
    /// The slowest fetch, in ms.
    pub slowest_response_ms: u64,
    /// Why: `throttled` (429/503 without Retry-After) and/or `slow responses`.
    pub reasons: Vec<&'static str>,
}

impl SlowedHost {
    pub(crate) fn new(
        host: String,
        budget: &'static str,
        base: Duration,
        slowdown: &Slowdown,
        policy: &AdaptPolicy,
    ) -> SlowedHost {
        let mut reasons = Vec::new();
        if slowdown.throttled > 0 {
            reasons.push("throttled: 429/503 without Retry-After");
        }
        if slowdown.slowest.mul_f64(policy.latency_factor) > base {
            reasons.push("slow responses");
        }
        SlowedHost {
            host,
            budget,
            configured_interval_ms: base.as_millis() as u64,
            peak_interval_ms: slowdown.peak.as_millis() as u64,
            interval_ms: slowdown.interval(base).as_millis() as u64,
            throttled_responses: slowdown.throttled,
            slowest_response_ms: slowdown.slowest.as_millis() as u64,
            reasons,
        }
    }
}

/// Keeps `entry` in `report` (at most [`REPORT_LEN`], largest peak first), replacing the
/// entry of the same budget.
pub(crate) fn note_slowed(report: &mut Vec<SlowedHost>, entry: SlowedHost) {
    if let Some(old) = report
        .iter_mut()
        .find(|e| e.host == entry.host && e.budget == entry.budget)
    {
        *old = entry;
    } else if report.len() < REPORT_LEN {
        report.push(entry);
    } else if report
        .last()
        .is_some_and(|last| entry.peak_interval_ms > last.peak_interval_ms)
    {
        report.pop();
        report.push(entry);
    } else {
        return;
    }
    report.sort_by(|a, b| {
        b.peak_interval_ms
            .cmp(&a.peak_interval_ms)
            .then_with(|| a.host.cmp(&b.host))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AdaptPolicy {
        AdaptPolicy {
            enabled: true,
            max_interval: Duration::from_secs(8),
            recovery: 0.25,
            latency_factor: 5.0,
            max_latency_delay: Duration::from_secs(3),
            start: Duration::from_millis(500),
        }
    }

    fn answer(status: u16, retry_after: bool, ms: u64) -> ServerSignal {
        ServerSignal {
            status,
            retry_after,
            elapsed: Duration::from_millis(ms),
        }
    }

    #[test]
    fn throttling_doubles_the_interval_up_to_the_cap() {
        let base = Duration::from_millis(500);
        let mut s = Slowdown::default();
        let p = policy();
        let seen: Vec<u64> = (0..6)
            .map(|_| s.observe(&answer(429, false, 1), base, &p).as_millis() as u64)
            .collect();
        assert_eq!(seen, vec![1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(s.throttled, 6);
        assert_eq!(s.peak, Duration::from_secs(8));
    }

    #[test]
    fn a_503_is_throttling_but_not_with_retry_after_and_not_a_500() {
        let base = Duration::from_millis(500);
        let p = policy();
        let mut s = Slowdown::default();
        assert_eq!(s.observe(&answer(503, false, 1), base, &p), base * 2);
        let mut s = Slowdown::default();
        assert_eq!(s.observe(&answer(503, true, 1), base, &p), base);
        assert_eq!(s.observe(&answer(429, true, 1), base, &p), base);
        assert_eq!(s.observe(&answer(500, false, 1), base, &p), base);
        assert_eq!(s.throttled, 0);
    }

    #[test]
    fn recovery_is_additive_per_success_and_stops_at_the_configured_interval() {
        let base = Duration::from_millis(500);
        let p = policy();
        let mut s = Slowdown::default();
        s.observe(&answer(429, false, 1), base, &p);
        s.observe(&answer(429, false, 1), base, &p);
        // 2000 ms, then 125 ms (a quarter of 500) off per success.
        let seen: Vec<u64> = (0..14)
            .map(|_| s.observe(&answer(200, false, 1), base, &p).as_millis() as u64)
            .collect();
        assert_eq!(
            seen,
            vec![1875, 1750, 1625, 1500, 1375, 1250, 1125, 1000, 875, 750, 625, 500, 500, 500]
        );
        assert!(!s.is_slowed(base));
    }

    #[test]
    fn latency_sets_a_floor_of_five_times_the_last_fetch_capped() {
        let base = Duration::from_millis(100);
        let p = policy();
        let mut s = Slowdown::default();
        assert_eq!(s.observe(&answer(200, false, 10), base, &p), base);
        assert_eq!(
            s.observe(&answer(200, false, 200), base, &p),
            Duration::from_secs(1)
        );
        assert_eq!(
            s.observe(&answer(200, false, 5000), base, &p),
            Duration::from_secs(3)
        );
        // Fast again: the floor follows the last fetch.
        assert_eq!(s.observe(&answer(200, false, 10), base, &p), base);
        assert_eq!(s.slowest, Duration::from_secs(5));
    }

    #[test]
    fn a_budget_without_a_rate_starts_doubling_from_the_name_interval() {
        let p = policy();
        let mut s = Slowdown::default();
        assert_eq!(
            s.observe(&answer(429, false, 1), Duration::ZERO, &p),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn the_report_keeps_the_largest_slowdowns() {
        let p = policy();
        let mut report = Vec::new();
        for i in 0..(REPORT_LEN as u64 + 5) {
            let s = Slowdown {
                peak: Duration::from_millis(100 * (i + 1)),
                ..Slowdown::default()
            };
            let entry = SlowedHost::new(format!("h{i}"), "name", Duration::ZERO, &s, &p);
            note_slowed(&mut report, entry);
        }
        assert_eq!(report.len(), REPORT_LEN);
        assert_eq!(report[0].host, format!("h{}", REPORT_LEN + 4));
        assert_eq!(report.last().map(|e| e.peak_interval_ms), Some(600));
    }

    /// Through the frontier: a throttled answer delays the host's next request by twice the
    /// interval, on its name's budget and its address's; the summary's report names both.
    #[test]
    fn a_throttled_host_waits_twice_the_interval_on_its_name_and_address() {
        use crate::config::PolitenessSection;
        use crate::frontier::{Frontier, FrontierOptions, FrontierPolicy, QueuedUrl, Work};
        use tokio::time::Instant;

        let dir = tempfile::tempdir().unwrap();
        let policy = FrontierPolicy::from_config(&PolitenessSection {
            per_host_rps: 10.0,
            per_host_concurrency: 4,
            per_ip_rps: 10.0,
            respect_robots: false,
            ..PolitenessSection::default()
        });
        let options = FrontierOptions {
            dir: dir.path().join("frontier"),
            queue_memory: 1 << 20,
            host_memory: 1 << 20,
            robots_agent: "crawler".into(),
        };
        let mut f = Frontier::create(policy, options).unwrap();
        for i in 0..3 {
            let item = QueuedUrl {
                url: format!("http://a.test/{i}"),
                depth: 0,
                parent: None,
                redirect_hops: 0,
                attempts: 0,
            };
            f.push("http://a.test", item).unwrap();
        }
        let t0 = Instant::now();
        assert!(matches!(f.pop_ready(t0), Ok(None)), "parked on its lookup");
        for lookup in f.take_lookups() {
            let ip = "10.0.0.1".parse().unwrap();
            f.address_resolved(lookup, Ok((ip, t0 + Duration::from_secs(600))));
        }
        let Ok(Some(Work::Fetch(mut d))) = f.pop_ready(t0) else {
            panic!("no fetch")
        };
        d.signal = Some(answer(429, false, 1));
        f.complete(d);
        // 100 ms is the configured interval; throttled, it is 200 ms.
        assert!(matches!(
            f.pop_ready(t0 + Duration::from_millis(150)),
            Ok(None)
        ));
        let Ok(Some(Work::Fetch(mut d))) = f.pop_ready(t0 + Duration::from_millis(200)) else {
            panic!("no fetch at twice the interval")
        };
        d.signal = Some(answer(200, false, 1));
        f.complete(d);
        // One success: 10 ms (0.1 × 100 ms) off, so 190 ms.
        let t1 = t0 + Duration::from_millis(200);
        assert!(matches!(
            f.pop_ready(t1 + Duration::from_millis(185)),
            Ok(None)
        ));
        assert!(matches!(
            f.pop_ready(t1 + Duration::from_millis(190)),
            Ok(Some(Work::Fetch(_)))
        ));
        let report = f.slowed_hosts();
        let mut slowed: Vec<(&str, &str)> =
            report.iter().map(|e| (e.host.as_str(), e.budget)).collect();
        slowed.sort();
        assert_eq!(slowed, vec![("10.0.0.1", "address"), ("a.test", "name")]);
        assert!(report.iter().all(|e| e.throttled_responses == 1
            && e.peak_interval_ms == 200
            && e.configured_interval_ms == 100));
    }

    /// Politeness off, or adaptation off: nothing slows.
    #[test]
    fn adaptation_is_off_with_politeness_or_with_its_switch() {
        use crate::config::PolitenessSection;
        use crate::frontier::FrontierPolicy;
        for section in [
            PolitenessSection {
                enabled: false,
                ..PolitenessSection::default()
            },
            PolitenessSection {
                adaptive: false,
                ..PolitenessSection::default()
            },
        ] {
            assert!(!FrontierPolicy::from_config(&section).adapt.enabled);
        }
        assert!(
            FrontierPolicy::from_config(&PolitenessSection::default())
                .adapt
                .enabled
        );
    }
}
