//! The monitor: live figures of a running crawl over HTTP, for a person (`/`, a status
//! page) and for a scraper (`/metrics`, Prometheus text format; `/status.json`).
//!
//! What it guarantees:
//! - Off unless `[monitor] listen` (or `--listen`) is set. The address is taken as given;
//!   one that is not loopback is logged as such, since anyone who reaches it reads the
//!   crawl's hosts and figures. Read-only: GET and HEAD, anything else is `405`.
//! - Nothing on the crawl's hot path: the counters are the crawl's own relaxed atomics
//!   ([`CrawlCounters`]), read when a scrape comes; what only the frontier's task knows
//!   (queue sizes, hosts, the top hosts) reaches the monitor as a [`CrawlSnapshot`] the
//!   driver builds once per [`REFRESH`] and hands over by swapping one `Arc` under a mutex
//!   nobody else holds for longer than a clone. Rates and the charts' history come from a
//!   sampler task of the monitor's own, once per [`REFRESH`]. The last checkpoint is read
//!   from its manifest's modification time (a `stat` per sample), not asked of the crawl.
//! - Per-host series are bounded: at most `monitor.top_hosts` (≤ [`MAX_TOP_HOSTS`]) busiest
//!   hosts plus as many failing ones, whatever the number of hosts crawled.
//! - `monitor.linger_secs` keeps the final figures served after the crawl's end, so a
//!   scraper polling every few seconds still reads the last ones.
//!
//! Crates: `prometheus-client` (the Prometheus project's Rust client) encodes the exposition:
//! names, escaping and the text format's rules are its job, and its `Collector` reads
//! values at scrape time, so nothing is mirrored into registry objects while the crawl runs.
//! The server is `hyper` 1 with `hyper-util`, already built for the synthetic web
//! (crates/testweb): three read-only routes need no router, and axum would be one more
//! framework to build. The page's charts are SVG drawn here: no script and nothing from
//! another origin, so the page works with JavaScript off and offline, refreshed by
//! `<meta http-equiv="refresh">`.

mod history;
mod metrics;
mod page;
mod server;
mod status;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::MonitorSection;
use crate::counters::CrawlCounters;
use crate::frontier::HostReport;
use history::History;
pub use status::Status;

/// How often the driver hands a snapshot and the sampler takes a sample.
pub const REFRESH: Duration = Duration::from_secs(1);

/// The most hosts `monitor.top_hosts` may ask for (the frontier ranks 20).
pub const MAX_TOP_HOSTS: usize = 20;

/// How many failing hosts are tracked between two snapshots (the rest are not named; the
/// crawl's totals still count them).
const FAILING_HOSTS_TRACKED: usize = 256;

/// Why the monitor could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("monitor.listen {addr}: cannot listen")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("monitor.listen {listen:?}: not an IP:port address such as \"127.0.0.1:9187\"")]
    Address { listen: String },
}

/// What only the frontier's task knows, handed to the monitor once per [`REFRESH`].
#[derive(Debug, Clone, Default)]
pub struct CrawlSnapshot {
    pub queued: u64,
    pub in_flight: u64,
    /// Hosts known to the frontier, and those with URLs queued.
    pub hosts: u64,
    pub hosts_queued: u64,
    pub seen_insertions: u64,
    pub seen_fill: f64,
    pub seen_estimated_fpp: f64,
    pub seen_bytes: u64,
    /// The busiest hosts and then the failing ones (see [`crate::frontier::HostReport`]),
    /// with each one's failed fetches since the start of this process.
    pub hosts_report: Vec<(HostReport, u64)>,
    /// How many of `hosts_report` are the busiest.
    pub busiest: usize,
    /// Round trips to Redis, in distributed mode.
    pub redis_round_trips: Option<u64>,
    /// Descriptor pauses the driver has not yet added to the counters (it adds them at
    /// the end): shown live on top of the counter.
    pub descriptor_pauses_pending: u64,
}

/// How the crawl stands, as the page and `/status.json` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    Finished,
    Stopped,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Finished => "finished",
            Phase::Stopped => "stopped",
        }
    }
}

/// The last checkpoint, as its manifest on disk says.
#[derive(Debug, Clone, Copy)]
struct CheckpointSeen {
    at: SystemTime,
    /// Its number, read from the manifest when its time changes.
    seq: Option<u64>,
}

/// What the sampler keeps and the server reads.
#[derive(Debug)]
struct Sampled {
    /// The latest snapshot the driver published.
    snapshot: Arc<CrawlSnapshot>,
    /// The snapshot the latest sample took: what `/status.json` and the page show, so that
    /// everything but the live counters in one reading is of one sample (its number tells
    /// two readings apart; the driver publishes on a clock of its own).
    shown: Arc<CrawlSnapshot>,
    /// Whether the driver has published a snapshot, and whether `shown` is one.
    published: bool,
    shown_published: bool,
    history: History,
    phase: Phase,
    checkpoint: Option<CheckpointSeen>,
}

impl Sampled {
    /// Before the first sample: nothing published, nothing shown, the crawl running.
    fn new() -> Sampled {
        Sampled {
            snapshot: Arc::new(CrawlSnapshot::default()),
            shown: Arc::new(CrawlSnapshot::default()),
            published: false,
            shown_published: false,
            history: History::default(),
            phase: Phase::Running,
            checkpoint: None,
        }
    }
}

/// What the server's handlers share.
#[derive(Debug)]
struct Shared {
    counters: Arc<CrawlCounters>,
    started: SystemTime,
    max_urls: u64,
    top_hosts: usize,
    out_dir: PathBuf,
    sampled: Mutex<Sampled>,
}

impl Shared {
    /// Keeps the driver's latest snapshot for the next sample to take.
    fn publish(&self, snapshot: CrawlSnapshot) {
        let mut sampled = match self.sampled.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        sampled.snapshot = Arc::new(snapshot);
        sampled.published = true;
        if !sampled.shown_published {
            // No sample has taken a published snapshot yet: show this one rather than
            // nothing (a distributed process's Redis figures, the first hosts).
            sampled.shown = sampled.snapshot.clone();
        }
    }

    /// `/status.json` as of now: live counters, the latest sample and the snapshot it took.
    fn status(&self) -> Status {
        let counters = self.counters.values();
        let sampled = match self.sampled.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        Status::new(self, counters, &sampled)
    }
}

/// The running monitor. Dropping it stops the server at once; [`Monitor::finish`] serves
/// the final figures for `linger_secs` first.
pub struct Monitor {
    shared: Arc<Shared>,
    addr: SocketAddr,
    linger: Duration,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Failed fetches per host key since the last snapshot was built (bounded).
    failing: std::collections::HashMap<String, u64>,
}

impl Monitor {
    /// Starts the monitor if `section.listen` is set: binds the address now (so a port in
    /// use is a start-up error, named), then serves and samples in tasks of its own.
    pub async fn start(
        section: &MonitorSection,
        out_dir: &Path,
        max_urls: u64,
        counters: Arc<CrawlCounters>,
    ) -> Result<Option<Monitor>, MonitorError> {
        let Some(listen) = &section.listen else {
            return Ok(None);
        };
        let addr: SocketAddr = listen.parse().map_err(|_| MonitorError::Address {
            listen: listen.clone(),
        })?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| MonitorError::Bind { addr, source })?;
        let addr = listener.local_addr().unwrap_or(addr);
        if addr.ip().is_loopback() {
            tracing::info!("monitor: http://{addr}/ (metrics at /metrics, status at /status.json)");
        } else {
            tracing::warn!(
                "monitor: listening on {addr}, NOT loopback as configured: anyone who can reach it reads the crawl's status (http://{addr}/)"
            );
        }
        let shared = Arc::new(Shared {
            counters,
            started: SystemTime::now(),
            max_urls,
            top_hosts: section.top_hosts.clamp(1, MAX_TOP_HOSTS),
            out_dir: out_dir.to_path_buf(),
            sampled: Mutex::new(Sampled::new()),
        });
        let (stop, stop_rx) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(server::serve(listener, shared.clone(), stop_rx.clone())),
            tokio::spawn(sample_every(shared.clone(), stop_rx)),
        ];
        Ok(Some(Monitor {
            shared,
            addr,
            linger: Duration::from_secs_f64(section.linger_secs),
            stop,
            tasks,
            failing: std::collections::HashMap::new(),
        }))
    }

    /// The address served (the port chosen, when the configured one was 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many hosts the snapshot should report (the busiest; failing ones come on top).
    pub fn top_hosts(&self) -> usize {
        self.shared.top_hosts
    }

    /// A fetch of `url` failed (4xx, 5xx or no response): counted for its host. Called for
    /// failures only, which are few; bounded, so a crawl of failing hosts does not grow it.
    pub fn note_failure(&mut self, url: &str) {
        let key = crate::frontier::key_of(url);
        if let Some(n) = self.failing.get_mut(&key) {
            *n += 1;
        } else if self.failing.len() < FAILING_HOSTS_TRACKED {
            self.failing.insert(key, 1);
        }
    }

    /// The failing hosts to report, most failures first (at most `top_hosts`), with their
    /// counts: for the snapshot.
    pub fn failing_hosts(&self) -> Vec<(String, u64)> {
        let mut hosts: Vec<(String, u64)> =
            self.failing.iter().map(|(k, n)| (k.clone(), *n)).collect();
        hosts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hosts.truncate(self.shared.top_hosts);
        hosts
    }

    /// Failures counted for `host` so far.
    pub fn failures_of(&self, host: &str) -> u64 {
        self.failing.get(host).copied().unwrap_or(0)
    }

    /// The crawl's figures now, from the task that owns `frontier`: the frontier's totals
    /// and its report of the busiest and the failing hosts, the seen-set's figures
    /// (`seen_bytes` its size), Redis's round trips in distributed mode, and the descriptor
    /// pauses not yet in the counters.
    pub fn snapshot_of<F: crate::frontier::FrontierBackend>(
        &self,
        frontier: &F,
        seen: crate::seen::SeenStats,
        seen_bytes: u64,
        redis_round_trips: Option<u64>,
        descriptor_pauses_pending: u64,
    ) -> CrawlSnapshot {
        let stats = frontier.stats();
        let failing: Vec<String> = self.failing_hosts().into_iter().map(|(k, _)| k).collect();
        let busiest = frontier.host_count().min(self.shared.top_hosts);
        let hosts_report = frontier
            .host_reports(self.shared.top_hosts, &failing)
            .into_iter()
            .map(|r| {
                let errors = self.failures_of(&r.host);
                (r, errors)
            })
            .collect();
        CrawlSnapshot {
            queued: stats.queued,
            in_flight: stats.in_flight,
            hosts: stats.hosts,
            hosts_queued: stats.hosts_queued,
            seen_insertions: seen.insertions,
            seen_fill: seen.fill,
            seen_estimated_fpp: seen.estimated_fpp,
            seen_bytes,
            hosts_report,
            busiest,
            redis_round_trips,
            descriptor_pauses_pending,
        }
    }

    /// Hands over the crawl's latest figures.
    pub fn publish(&self, snapshot: CrawlSnapshot) {
        self.shared.publish(snapshot);
    }

    /// The crawl is over (`stopped` before its end): the final figures are published and
    /// sampled, served for `linger_secs` (cut short by a stop request sent on
    /// `stop_requests` from now on: Ctrl-C), then the server stops.
    pub async fn finish(
        mut self,
        snapshot: CrawlSnapshot,
        stopped: bool,
        mut stop_requests: watch::Receiver<bool>,
    ) {
        self.publish(snapshot);
        {
            let mut sampled = match self.shared.sampled.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            sampled.phase = if stopped {
                Phase::Stopped
            } else {
                Phase::Finished
            };
        }
        sample(&self.shared);
        if !self.linger.is_zero() {
            tracing::info!(
                "monitor: final figures served at http://{} for {:.0} s (Ctrl-C to exit now)",
                self.addr,
                self.linger.as_secs_f64()
            );
            stop_requests.borrow_and_update();
            tokio::select! {
                _ = tokio::time::sleep(self.linger) => {}
                _ = stop_requests.changed() => {}
            }
        }
        let _ = self.stop.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Samples every [`REFRESH`] until stopped.
async fn sample_every(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => sample(&shared),
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

/// One sample: the counters the charts need, the hosts' done counts, the checkpoint's age.
fn sample(shared: &Shared) {
    let known = match shared.sampled.lock() {
        Ok(guard) => guard.checkpoint,
        Err(poisoned) => poisoned.into_inner().checkpoint,
    };
    let checkpoint = last_checkpoint(&shared.out_dir, known);
    let c = &shared.counters;
    let finished = CrawlCounters::get(&c.finished);
    let errors = status::errors_of(&c.values());
    let elapsed = shared.started.elapsed().unwrap_or_default();
    let mut sampled = match shared.sampled.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let snapshot = sampled.snapshot.clone();
    if checkpoint.is_some() {
        sampled.checkpoint = checkpoint;
    }
    sampled.history.push(elapsed, finished, errors, &snapshot);
    sampled.shown = snapshot;
    sampled.shown_published = sampled.published;
}

/// When the current checkpoint was published (its manifest's modification time), and its
/// number (the manifest is read only when that time changes).
fn last_checkpoint(out_dir: &Path, known: Option<CheckpointSeen>) -> Option<CheckpointSeen> {
    let manifest = crate::checkpoint::checkpoint_dir(out_dir).join("manifest.json");
    let at = std::fs::metadata(&manifest).ok()?.modified().ok()?;
    if let Some(known) = known.filter(|k| k.at == at) {
        return Some(known);
    }
    let seq = crate::checkpoint::current_manifest(out_dir)
        .and_then(Result::ok)
        .map(|m| m.seq);
    Some(CheckpointSeen { at, seq })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(n: u64) -> CrawlSnapshot {
        CrawlSnapshot {
            queued: n,
            ..CrawlSnapshot::default()
        }
    }

    /// A reading shows the snapshot its sample took, so two readings with the same sample
    /// number agree however often the driver publishes in between.
    #[test]
    fn a_status_shows_the_snapshot_of_its_sample() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared {
            counters: Arc::new(CrawlCounters::default()),
            started: SystemTime::now(),
            max_urls: 100,
            top_hosts: 5,
            out_dir: dir.path().to_path_buf(),
            sampled: Mutex::new(Sampled::new()),
        };
        // Before any sample, the first published snapshot is shown rather than nothing.
        shared.publish(queued(1));
        assert_eq!(shared.status().frontier.queued, 1);
        sample(&shared);
        let first = shared.status();
        shared.publish(queued(2));
        let again = shared.status();
        assert_eq!(again.sample, first.sample);
        assert_eq!(
            again.frontier.queued, 1,
            "published after the sample: not shown yet"
        );
        sample(&shared);
        let next = shared.status();
        assert_eq!(next.sample, first.sample + 1);
        assert_eq!(next.frontier.queued, 2);
    }
}
