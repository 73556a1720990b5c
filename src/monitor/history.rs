//! The monitor's memory of the last minutes: one sample per [`super::REFRESH`], from which
//! the rates and the page's charts are computed.
//!
//! Bounded: [`KEPT`] samples, and a short series per reported host (the hosts of the
//! latest snapshot only), so the monitor's memory does not grow with the crawl.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::CrawlSnapshot;

/// Samples kept: five minutes at one per second.
pub(crate) const KEPT: usize = 300;

/// Samples a rate is taken over (the latest and this many before it).
const RATE_WINDOW: usize = 5;

#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Seconds since the monitor started.
    t: f64,
    finished: u64,
    errors: u64,
}

/// A point of the charts: when, and the rates over the interval ending then.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    pub t: f64,
    pub pages_per_sec: f64,
    pub errors_per_sec: f64,
}

#[derive(Debug, Default)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
    /// Samples taken since the start: which sample the figures are from.
    taken: u64,
    /// Per reported host: (t, URLs done) of its last samples.
    hosts: HashMap<String, VecDeque<(f64, u64)>>,
}

impl History {
    pub(crate) fn push(
        &mut self,
        elapsed: Duration,
        finished: u64,
        errors: u64,
        snapshot: &CrawlSnapshot,
    ) {
        let t = elapsed.as_secs_f64();
        if self.samples.len() == KEPT {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            t,
            finished,
            errors,
        });
        self.taken += 1;
        let mut hosts = HashMap::with_capacity(snapshot.hosts_report.len());
        for (report, _) in &snapshot.hosts_report {
            let mut series = self.hosts.remove(&report.host).unwrap_or_default();
            if series.len() > RATE_WINDOW {
                series.pop_front();
            }
            let done = report
                .queued_ever
                .saturating_sub(report.queued + report.in_flight);
            series.push_back((t, done));
            hosts.insert(report.host.clone(), series);
        }
        self.hosts = hosts;
    }

    /// Samples taken so far (the number of the latest).
    pub(crate) fn taken(&self) -> u64 {
        self.taken
    }

    /// Pages and errors per second over the last few samples.
    pub(crate) fn rates(&self) -> (f64, f64) {
        let n = self.samples.len();
        if n < 2 {
            return (0.0, 0.0);
        }
        let last = self.samples[n - 1];
        let first = self.samples[n.saturating_sub(RATE_WINDOW + 1)];
        rate_between(first, last)
    }

    /// URLs per second done for `host` over its last samples.
    pub(crate) fn host_rate(&self, host: &str) -> f64 {
        let Some(series) = self.hosts.get(host) else {
            return 0.0;
        };
        match (series.front(), series.back()) {
            (Some(&(t0, d0)), Some(&(t1, d1))) if t1 > t0 => {
                d1.saturating_sub(d0) as f64 / (t1 - t0)
            }
            _ => 0.0,
        }
    }

    /// One point per sample interval, oldest first (the charts).
    pub(crate) fn points(&self) -> Vec<Point> {
        self.samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .map(|(a, b)| {
                let (pages_per_sec, errors_per_sec) = rate_between(*a, *b);
                Point {
                    t: b.t,
                    pages_per_sec,
                    errors_per_sec,
                }
            })
            .collect()
    }
}

fn rate_between(a: Sample, b: Sample) -> (f64, f64) {
    let dt = b.t - a.t;
    if dt <= 0.0 {
        return (0.0, 0.0);
    }
    (
        b.finished.saturating_sub(a.finished) as f64 / dt,
        b.errors.saturating_sub(a.errors) as f64 / dt,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::HostReport;

    fn host(queued_ever: u64, queued: u64) -> (HostReport, u64) {
        (
            HostReport {
                host: "http://a.test".into(),
                queued,
                queued_ever,
                in_flight: 0,
                robots: "ready",
                next_allowed_in: None,
            },
            0,
        )
    }

    #[test]
    fn rates_come_from_the_last_samples() {
        let mut h = History::default();
        let snap = |q| CrawlSnapshot {
            hosts_report: vec![host(100, q)],
            ..CrawlSnapshot::default()
        };
        h.push(Duration::from_secs(1), 0, 0, &snap(100));
        assert_eq!(h.rates(), (0.0, 0.0));
        h.push(Duration::from_secs(2), 10, 1, &snap(95));
        h.push(Duration::from_secs(3), 30, 1, &snap(90));
        assert_eq!(h.rates(), (15.0, 0.5));
        assert_eq!(h.host_rate("http://a.test"), 5.0);
        assert_eq!(h.host_rate("http://b.test"), 0.0);
        let points = h.points();
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].pages_per_sec, 20.0);
        assert_eq!(h.taken(), 3);
    }

    #[test]
    fn memory_stays_bounded() {
        let mut h = History::default();
        for i in 0..(KEPT as u64 + 50) {
            h.push(Duration::from_secs(i), i, 0, &CrawlSnapshot::default());
        }
        assert_eq!(h.points().len(), KEPT - 1);
        assert_eq!(h.rates().0, 1.0);
    }
}
