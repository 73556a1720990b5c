//! File descriptors: the crawl's budget of open files and sockets, so that a crawl of many
//! hosts waits for descriptors instead of dying for lack of them.
//!
//! Every host the crawl talks to costs a socket, and the HTTP client keeps an idle
//! keep-alive connection per host for a while after its last request, because reusing it
//! is what makes a crawl of one site fast. One page linking 50,000 hosts therefore opens
//! sockets far faster than idle ones close; at the process's descriptor limit, the next
//! file the crawl must open (the output, a checkpoint) fails and the crawl dies.
//!
//! Three defenses, in order:
//! 1. [`raise_limit`] lifts the soft limit to the hard one at start (the soft default is
//!    often 1,024 while the hard one is far higher).
//! 2. The HTTP client closes idle connections after a short idle timeout (see
//!    [`crate::fetch`]), so idle sockets follow the recent request rate, not the crawl's
//!    history.
//! 3. [`Descriptors`] watches how many are open (counted in `/proc/self/fd`, at most every
//!    [`CHECK_EVERY`], and only once the count could be past half the ceiling) and tells the driver to hand out no new work while fewer than a
//!    reserve are left ([`Descriptors::exhausted`]); the driver then has the fetcher
//!    close its idle connections (`Fetcher::shed_idle_connections`), fetches in flight
//!    finish, and dispatching goes on. The reserve covers the files the crawl
//!    itself opens (output, checkpoints, the frontier's segments), so those never fail for
//!    want of a descriptor.
//!
//! Counting `/proc/self/fd` is exact (sockets, files, everything) where the client's pool
//! cannot be asked; reading a directory of 20,000 entries costs a few milliseconds, so it
//! is done only when the last count was close to the limit or stale.

use std::time::Duration;

use tokio::time::Instant;

/// How often the open descriptors are counted when the last count was not close to the
/// limit.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The shortest interval between two counts while at the ceiling: what the driver
/// waits before looking again.
pub(crate) const RECOUNT_AFTER: Duration = Duration::from_millis(10);

/// Raises the soft limit on open files to the hard limit. Returns the soft limit in force
/// afterwards (`None` when it cannot be read).
pub(crate) fn raise_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

/// Descriptors open in this process now (`None` without `/proc`).
pub(crate) fn open_now() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|dir| dir.count())
}

/// The driver's view of the descriptor budget.
#[derive(Debug)]
pub(crate) struct Descriptors {
    /// Above this many open, no new work is handed out.
    ceiling: Option<usize>,
    /// Open at the last count.
    last_count: usize,
    /// Requests handed out since the last count: each may open one more socket.
    opened_since: usize,
    checked: Option<Instant>,
    /// The last count (with what was in flight) was at the ceiling.
    over: bool,
    /// Times dispatching paused for descriptors.
    pub(crate) pauses: u64,
}

impl Descriptors {
    /// A budget under the soft limit `limit` (after [`raise_limit`]): a tenth of it, at
    /// least 64 and at most 1,024, is kept for the crawl's own files.
    pub(crate) fn new(limit: Option<u64>) -> Descriptors {
        let ceiling = limit.map(|limit| {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let reserve = (limit / 10).clamp(64, 1024);
            limit.saturating_sub(reserve).max(16)
        });
        Descriptors::with_ceiling(ceiling)
    }

    /// A budget that pauses at `ceiling` open descriptors.
    pub(crate) fn with_ceiling(ceiling: Option<usize>) -> Descriptors {
        Descriptors {
            ceiling,
            last_count: 0,
            opened_since: 0,
            checked: None,
            over: false,
            pauses: 0,
        }
    }

    /// A request was handed out: it may open a socket.
    pub(crate) fn dispatched(&mut self) {
        self.opened_since += 1;
    }

    /// Whether too few descriptors may be left to hand out new work now, with `in_flight`
    /// requests out (each may still open its socket). The last count plus the requests
    /// handed out since plus those in flight is an upper bound of what will be open; only
    /// when that bound reaches the ceiling (or the count is older than [`CHECK_EVERY`]) is
    /// `/proc/self/fd` counted again, at most every [`RECOUNT_AFTER`].
    pub(crate) fn exhausted(&mut self, now: Instant, in_flight: u64) -> bool {
        let Some(ceiling) = self.ceiling else {
            return false;
        };
        let in_flight = usize::try_from(in_flight).unwrap_or(usize::MAX);
        let bound = (self.last_count + self.opened_since).saturating_add(in_flight);
        // The bound only overestimates (sockets closed since the count are not subtracted),
        // so far from the ceiling a stale count needs no refresh: listing /proc/self/fd costs
        // milliseconds at tens of thousands of sockets (measured: ~10% of a 20,000-host
        // crawl's samples), on the driver's thread.
        let stale = bound >= ceiling / 2 && self.checked.is_none_or(|at| now >= at + CHECK_EVERY);
        if bound < ceiling && !stale {
            return false;
        }
        if self.checked.is_some_and(|at| now < at + RECOUNT_AFTER) {
            return bound >= ceiling;
        }
        if let Some(count) = open_now() {
            let was_over = self.over;
            self.last_count = count;
            self.opened_since = 0;
            if count.saturating_add(in_flight) >= ceiling && !was_over {
                self.pauses += 1;
                // Said once; later pauses are the same story.
                let level_warn = self.pauses == 1;
                if !level_warn {
                    tracing::debug!(
                        "{count} file descriptors open and {in_flight} requests in flight: pause {}",
                        self.pauses
                    );
                } else {
                    tracing::warn!(
                    "{count} file descriptors open and {in_flight} requests in flight, at the crawl's ceiling of {ceiling}: no new fetches until some close (the summary counts these pauses)"
                    );
                }
            }
        } else {
            // No /proc: nothing to count, nothing to hold back.
            self.ceiling = None;
            return false;
        }
        self.checked = Some(now);
        self.over = self.last_count.saturating_add(in_flight) >= ceiling;
        self.over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_keeps_or_lifts_the_limit() {
        let limit = raise_limit().expect("a limit");
        assert!(limit >= 16);
        assert!(open_now().expect("/proc") >= 3);
    }

    #[test]
    fn the_ceiling_leaves_a_reserve() {
        assert_eq!(Descriptors::new(Some(1024)).ceiling, Some(1024 - 102));
        assert_eq!(Descriptors::new(Some(100)).ceiling, Some(36));
        assert_eq!(
            Descriptors::new(Some(1 << 20)).ceiling,
            Some((1 << 20) - 1024)
        );
        assert_eq!(Descriptors::new(None).ceiling, None);
    }

    #[test]
    fn pauses_when_over_the_ceiling_and_not_below() {
        // Standard input, output and error are open: a ceiling of one is always reached.
        let mut low = Descriptors::with_ceiling(Some(1));
        assert!(low.exhausted(Instant::now(), 0));
        assert!(low.exhausted(Instant::now() + RECOUNT_AFTER, 0));
        assert_eq!(low.pauses, 1, "one pause, however long");
        // Requests handed out since the last count are counted as open.
        let open = open_now().expect("/proc");
        let mut near = Descriptors::with_ceiling(Some(open + 1000));
        let now = Instant::now();
        assert!(!near.exhausted(now, 0));
        for _ in 0..1000 {
            near.dispatched();
        }
        // The bound is reached: the count is taken (none was yet, far from the ceiling), and
        // nothing was really opened.
        assert!(!near.exhausted(now, 0), "bound reached, recounted");
        for _ in 0..1000 {
            near.dispatched();
        }
        assert!(
            near.exhausted(now, 0),
            "bound reached again, no recount this soon"
        );
        let mut busy = Descriptors::with_ceiling(Some(open + 1000));
        assert!(busy.exhausted(now, 1000), "in flight counts as open");
        let mut high = Descriptors::new(Some(1 << 20));
        assert!(!high.exhausted(Instant::now(), 0));
    }
}
