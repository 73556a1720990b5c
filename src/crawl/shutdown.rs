//! Stopping a crawl from outside: Ctrl-C and SIGTERM handlers in the CLI, tests.
//!
//! A watch channel rather than a flag: the driver `select!`s on it, so a stop is seen
//! at once even while the driver waits for a host's next slot, and every clone of the
//! handle stops the same crawl.

use std::sync::Arc;

use tokio::sync::watch;

/// Stops a running crawl from outside (signal handlers, tests).
#[derive(Clone)]
pub struct ShutdownHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl ShutdownHandle {
    pub fn new() -> Self {
        ShutdownHandle {
            tx: Arc::new(watch::channel(false).0),
        }
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
