//! The adaptive schedule: how long until a URL is due again, from what its fetches found.
//!
//! A URL's interval halves when a fetch finds it changed and doubles when it finds it
//! unchanged (a `304`, or a `200` with the payload digest of the last one), always within
//! `[recrawl] min_interval ..= max_interval` (the doubling starts from one second when the
//! interval is 0). This is the multiplicative rule of StormCrawler's adaptive fetch
//! scheduler and of Nutch's `AdaptiveFetchSchedule`: it needs no history beyond the current
//! interval (one number per URL in the state), converges to within a factor of two of a
//! page's change period, and backs off fast from pages that never change.
//!
//! `Last-Modified`, where a server sends it on a URL's first fetch, sets the first interval
//! to a tenth of the page's age (the heuristic freshness of RFC 9111 §4.2.2), bounded: an
//! old page is not asked about again soon. Without it the first interval is `min_interval`.

use std::time::{Duration, SystemTime};

/// `[recrawl]`'s bounds, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub min_secs: f64,
    pub max_secs: f64,
}

impl Default for Bounds {
    /// `[recrawl]`'s defaults (config.toml): 1 hour and 30 days.
    fn default() -> Bounds {
        Bounds::new(Duration::from_secs(3600), Duration::from_secs(30 * 86_400))
    }
}

impl Bounds {
    pub fn new(min: Duration, max: Duration) -> Bounds {
        let min_secs = min.as_secs_f64();
        Bounds {
            min_secs,
            max_secs: max.as_secs_f64().max(min_secs),
        }
    }

    fn clamp(&self, secs: f64) -> f64 {
        secs.clamp(self.min_secs, self.max_secs)
    }

    /// The first interval of a URL just fetched at `fetched_at`, whose response said
    /// `Last-Modified: last_modified` (an HTTP date), if it did.
    pub fn first(&self, fetched_at: SystemTime, last_modified: Option<&str>) -> f64 {
        let age = last_modified
            .and_then(|d| httpdate::parse_http_date(d).ok())
            .and_then(|modified| fetched_at.duration_since(modified).ok());
        match age {
            Some(age) => self.clamp(age.as_secs_f64() / 10.0),
            None => self.min_secs,
        }
    }

    /// The next interval after one of `interval` secs, the fetch having found the page
    /// changed or not.
    pub fn next(&self, interval: f64, changed: bool) -> f64 {
        if changed {
            self.clamp(interval / 2.0)
        } else {
            self.clamp(interval.max(1.0) * 2.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds::new(Duration::from_secs(60), Duration::from_secs(86_400))
    }

    #[test]
    fn intervals_shrink_on_change_and_grow_without_within_the_bounds() {
        let b = bounds();
        let mut i = 3600.0;
        i = b.next(i, true);
        assert_eq!(i, 1800.0);
        for _ in 0..20 {
            i = b.next(i, true);
        }
        assert_eq!(i, 60.0);
        for _ in 0..30 {
            i = b.next(i, false);
        }
        assert_eq!(i, 86_400.0);
    }

    #[test]
    fn the_default_bounds_are_the_configs() {
        let (min, max) = crate::config::Config::default()
            .recrawl_intervals()
            .unwrap();
        assert_eq!(Bounds::default(), Bounds::new(min, max));
    }

    #[test]
    fn a_zero_minimum_still_grows_when_nothing_changes() {
        let b = Bounds::new(Duration::ZERO, Duration::from_secs(100));
        assert_eq!(b.next(0.0, false), 2.0);
        assert_eq!(b.next(0.0, true), 0.0);
    }

    #[test]
    fn last_modified_sets_the_first_interval_to_a_tenth_of_the_age() {
        let b = bounds();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ten_hours_old = httpdate::fmt_http_date(now - Duration::from_secs(36_000));
        assert_eq!(b.first(now, Some(&ten_hours_old)), 3600.0);
        let ancient = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH);
        assert_eq!(b.first(now, Some(&ancient)), 86_400.0);
        assert_eq!(b.first(now, None), 60.0);
        assert_eq!(b.first(now, Some("not a date")), 60.0);
    }
}
