//! Stopping a crawl from outside: Ctrl-C and SIGTERM handlers in the CLI, tests.
//!
//! A watch channel rather than a flag: the driver `select!`s on it, so a stop is seen
//! at once even while the driver waits for a host's next slot, and every clone of the
//! handle stops the same crawl.
//!
//! `crawl.max_duration` is one more caller: a timer started with the run stops it through
//! the same handle, so a time limit ends a crawl exactly as Ctrl-C does (grace, final
//! checkpoint, summary), and the handle remembers that the limit was the reason so the CLI
//! can say so. The limit counts per run: a `--resume` starts a new timer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// Stops a running crawl from outside (signal handlers, tests).
#[derive(Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
    /// Stopped by `crawl.max_duration` (before anything else stopped it).
    timed_out: Arc<AtomicBool>,
}

impl ShutdownHandle {
    pub fn new() -> Self {
        ShutdownHandle {
            tx: Arc::new(watch::channel(false).0),
            timed_out: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the crawl was stopped because `crawl.max_duration` ran out.
    pub fn stopped_by_time_limit(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Stops the crawl once `limit` has passed; the returned timer is aborted when the
    /// crawl ends first.
    pub(crate) fn stop_after(&self, limit: Duration) -> TimeLimit {
        let handle = self.clone();
        TimeLimit(tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            if !handle.is_stopping() {
                handle.timed_out.store(true, Ordering::Relaxed);
                tracing::info!(
                    "crawl.max_duration ({}) reached: stopping",
                    humantime::format_duration(limit)
                );
                handle.stop();
            }
        }))
    }

    /// Asks the crawl to stop taking new work and finish.
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_stopping(&self) -> bool {
        *self.tx.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

impl Default for ShutdownHandle {
    fn default() -> Self {
        Self::new()
    }
}

/// The `crawl.max_duration` timer of one run; dropping it cancels it.
pub(crate) struct TimeLimit(tokio::task::JoinHandle<()>);

impl Drop for TimeLimit {
    fn drop(&mut self) {
        self.0.abort();
    }
}
