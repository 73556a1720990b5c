//! `/status.json`: every figure the monitor shows, in one object (its fields are named in
//! the README). The page and `/metrics` are drawn from it, so the three never disagree.

use std::time::SystemTime;

use serde::Serialize;

use super::history::Point;
use super::{Sampled, Shared};
use crate::counters::CounterValues;

/// The whole status, as served.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `running`, `finished` or `stopped`.
    pub state: &'static str,
    /// The sample the rates are from (1, 2, …, one per second).
    pub sample: u64,
    pub started_at: String,
    pub elapsed_secs: f64,
    pub max_urls: u64,
    /// Pages and errors per second over the last five seconds.
    pub pages_per_sec: f64,
    pub errors_per_sec: f64,
    /// Failures that make the exit code 1 (as `summary.json`'s `failures`).
    pub failures: u64,
    /// Every crawl counter, under its `summary.json` name.
    pub counters: CounterValues,
    pub frontier: FrontierFigures,
    pub seen: SeenFigures,
    /// The current checkpoint (`null` before the first, and in distributed mode).
    pub checkpoint: Option<CheckpointFigures>,
    /// Redis round trips so far (`null` unless distributed).
    pub redis_round_trips: Option<u64>,
    /// The busiest hosts (most URLs ever queued) and then the failing ones.
    pub top_hosts: Vec<HostFigures>,
    /// Pages and errors per second, one point per second, oldest first (five minutes).
    pub history: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FrontierFigures {
    pub queued: u64,
    pub in_flight: u64,
    pub hosts: u64,
    pub hosts_queued: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeenFigures {
    pub insertions: u64,
    pub fill: f64,
    pub estimated_fpp: f64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckpointFigures {
    pub seq: Option<u64>,
    pub at: String,
    pub age_secs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostFigures {
    pub host: String,
    /// Among the busiest (most URLs ever queued); otherwise listed for its failures.
    pub busiest: bool,
    pub queued: u64,
    pub queued_ever: u64,
    pub in_flight: u64,
    pub pages_per_sec: f64,
    /// Fetches that failed (4xx, 5xx, no response) since this process started.
    pub errors: u64,
    /// `not_needed`, `unknown`, `fetching`, `ready`, `unavailable` or `not_resident`.
    pub robots: &'static str,
    /// Seconds until its next request is allowed (`null` when its state is on disk).
    pub next_allowed_in_secs: Option<f64>,
}

/// Fetches that did not end well: 4xx, 5xx and 429, no response, robots.txt unreachable, a
/// panic. The charts' errors.
pub(crate) fn errors_of(c: &CounterValues) -> u64 {
    c.client_errors + c.failures()
}

impl Status {
    pub(super) fn new(shared: &Shared, mut counters: CounterValues, sampled: &Sampled) -> Status {
        let snapshot = &sampled.shown;
        counters.descriptor_pauses += snapshot.descriptor_pauses_pending;
        let (pages_per_sec, errors_per_sec) = sampled.history.rates();
        let now = SystemTime::now();
        Status {
            state: sampled.phase.as_str(),
            sample: sampled.history.taken(),
            started_at: crate::output::rfc3339(shared.started),
            elapsed_secs: now
                .duration_since(shared.started)
                .unwrap_or_default()
                .as_secs_f64(),
            max_urls: shared.max_urls,
            pages_per_sec,
            errors_per_sec,
            failures: counters.failures(),
            counters,
            frontier: FrontierFigures {
                queued: snapshot.queued,
                in_flight: snapshot.in_flight,
                hosts: snapshot.hosts,
                hosts_queued: snapshot.hosts_queued,
            },
            seen: SeenFigures {
                insertions: snapshot.seen_insertions,
                fill: snapshot.seen_fill,
                estimated_fpp: snapshot.seen_estimated_fpp,
                bytes: snapshot.seen_bytes,
            },
            checkpoint: sampled.checkpoint.map(|c| CheckpointFigures {
                seq: c.seq,
                at: crate::output::rfc3339(c.at),
                age_secs: now.duration_since(c.at).unwrap_or_default().as_secs_f64(),
            }),
            redis_round_trips: snapshot.redis_round_trips,
            top_hosts: snapshot
                .hosts_report
                .iter()
                .enumerate()
                .map(|(i, (r, errors))| HostFigures {
                    host: r.host.clone(),
                    busiest: i < snapshot.busiest,
                    queued: r.queued,
                    queued_ever: r.queued_ever,
                    in_flight: r.in_flight,
                    pages_per_sec: sampled.history.host_rate(&r.host),
                    errors: *errors,
                    robots: r.robots,
                    next_allowed_in_secs: r.next_allowed_in.map(|d| d.as_secs_f64()),
                })
                .collect(),
            history: sampled.history.points(),
        }
    }
}
