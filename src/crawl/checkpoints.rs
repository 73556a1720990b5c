//! The crawl's side of checkpoints: when to take one, the short pause that captures a
//! consistent state, and the phases it goes through in the background until it is
//! published.
//!
//! What a checkpoint holds and why it is consistent is [`crate::checkpoint`]'s business;
//! this module only sequences it against the dispatcher: at most one checkpoint is being
//! written at a time, the queue log rotates at the instant of the snapshot, and the
//! publication waits until the queue log that covers "after the snapshot" is flushed here
//! and fsynced there (the seen-set file is streamed from the live set and may hold the bits
//! of URLs accepted after the snapshot, each of which that log records).
//!
//! It also keeps, as the previous checkpoint of each publication, the one it knows to be good
//! (resumed from, then last published: see [`checkpoint::publish`]), and between checkpoints
//! has the queue log and `pages.jsonl` fsynced in the background every
//! `checkpoint.sync_interval_secs` ([`BackgroundSync`]; the dispatcher only names the new log
//! when it rotates).
//!
//! Each checkpoint also records the crawl's time across runs ([`CrawlTime`]): how many runs,
//! and the seconds they spent, so that a resumed crawl reports its own run and the whole
//! crawl apart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

use super::CrawlError;
use super::CrawlFrontier;
use crate::checkpoint::{self, CheckpointError, Expectation, Manifest, QueueLog};
use crate::cookie_jar::CookieJar;
use crate::counters::CrawlCounters;
use crate::output::{rfc3339, BackgroundSync, OutputSender};
use crate::seen::SeenSet;

/// Where a checkpoint being written in the background stands.
pub(crate) enum CheckpointPhase {
    /// Files written; to publish once the queue log is flushed (see [`checkpoint`]).
    Prepared(checkpoint::Prepared),
    /// Current: the frontier may reclaim what only older checkpoints needed.
    Published(Manifest),
}

/// The background write of a checkpoint, as the dispatcher awaits it.
pub(crate) type PendingPhase = Result<Result<CheckpointPhase, CheckpointError>, JoinError>;

/// The crawl's time across its runs (`--resume` starts a new run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CrawlTime {
    /// Runs so far, this one included.
    pub(crate) runs: u64,
    /// Seconds the earlier runs spent crawling (each up to its last record or checkpoint).
    pub(crate) before_secs: f64,
    /// When this run started.
    pub(crate) started: Instant,
}

impl CrawlTime {
    /// The first run of a crawl, started at `started`.
    pub(crate) fn first_run(started: Instant) -> CrawlTime {
        CrawlTime {
            runs: 1,
            before_secs: 0.0,
            started,
        }
    }

    /// Seconds of this run so far.
    pub(crate) fn run_secs(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Seconds of all runs so far.
    pub(crate) fn crawl_secs(&self) -> f64 {
        self.before_secs + self.run_secs()
    }
}

/// Checkpoint bookkeeping: one write in the background at a time.
pub(crate) struct Checkpoints {
    out_dir: PathBuf,
    pub(crate) interval: Duration,
    seq: u64,
    expectation: Expectation,
    seen: Arc<SeenSet>,
    counters: Arc<CrawlCounters>,
    time: CrawlTime,
    /// The checkpoint being written: its files, then its publication.
    pending: Option<JoinHandle<Result<CheckpointPhase, CheckpointError>>>,
    /// URLs accepted since the last checkpoint was taken.
    queue_log: Option<QueueLog>,
    /// The checkpoint known to be good: the one resumed from, then the last published. A
    /// publication keeps it as the previous one (see [`checkpoint::publish`]).
    good: Option<u64>,
    /// Fsyncs the queue log and `pages.jsonl` between checkpoints.
    sync: BackgroundSync,
    /// `network.cookies`' jar, saved with each checkpoint ([`crate::cookie_jar`]).
    cookies: Option<Arc<CookieJar>>,
}

impl Checkpoints {
    /// `seq` is the highest checkpoint number already used in `out_dir`; `resumed_from` the
    /// checkpoint a resumed crawl loaded.
    pub(crate) fn new(
        out_dir: PathBuf,
        (interval, sync): (Duration, BackgroundSync),
        seq: u64,
        resumed_from: Option<u64>,
        expectation: Expectation,
        (seen, counters): (Arc<SeenSet>, Arc<CrawlCounters>),
        time: CrawlTime,
    ) -> Result<Checkpoints, CrawlError> {
        Ok(Checkpoints {
            out_dir,
            interval,
            seq,
            expectation,
            seen,
            counters,
            time,
            pending: None,
            queue_log: None,
            good: resumed_from,
            sync,
            cookies: None,
        })
    }

    /// Saves `cookies` with every checkpoint from now on.
    pub(crate) fn keep_cookies(&mut self, cookies: Option<Arc<CookieJar>>) {
        self.cookies = cookies;
    }

    /// The log that every URL accepted from now on must be appended to.
    pub(crate) fn queue_log(&mut self) -> Option<&mut QueueLog> {
        self.queue_log.as_mut()
    }

    /// A checkpoint is being written and has not finished.
    pub(crate) fn is_busy(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| !p.is_finished())
    }

    /// Awaits the background write's next phase; pending forever when there is none, for a
    /// `select!` branch guarded by [`Checkpoints::has_pending`].
    pub(crate) async fn next_phase(&mut self) -> PendingPhase {
        match self.pending.as_mut() {
            Some(pending) => {
                let phase = pending.await;
                self.pending = None;
                phase
            }
            None => std::future::pending().await,
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Takes a consistent snapshot of the crawl state and writes it in the background. The
    /// crawl pauses only for flushing the output and the frontier's part (its store's tails
    /// and table, its tallies); the seen-set is streamed from the live set. `orphans` are
    /// the dispatcher's (see `Dispatcher::orphans`).
    pub(crate) async fn start<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        output: &OutputSender,
        finished: bool,
        orphans: &std::collections::BTreeMap<String, u64>,
    ) -> Result<(), CrawlError> {
        let paused = Instant::now();
        let position = output.flush().await?;
        let frontier_snapshot = frontier.begin_checkpoint()?;
        let e = &self.expectation;
        let manifest = Manifest {
            format_version: checkpoint::FORMAT_VERSION,
            seq: self.seq + 1,
            created_at: rfc3339(SystemTime::now()),
            finished,
            pages_bytes: position.bytes,
            pages_records: position.records,
            frontier: None,
            max_urls: e.max_urls,
            seen_m_bits: e.seen_m_bits,
            seen_k: e.seen_k,
            seen_seed: e.seen_seed,
            seen_xxh3: 0,
            seeds_xxh3: e.seeds_xxh3,
            seeds: e.seeds,
            counters: self.counters.to_map(),
            runs: self.time.runs,
            crawl_secs: self.time.crawl_secs(),
            orphans: orphans.clone(),
        };
        self.seq += 1;
        // From this instant on, accepted URLs go to the next checkpoint's queue log.
        if let Some(mut log) = self.queue_log.take() {
            log.flush()?;
        }
        self.queue_log = Some(QueueLog::create(&self.out_dir, self.seq)?);
        self.sync
            .queue_log(checkpoint::queue_log_path(&self.out_dir, self.seq));
        tracing::debug!(
            "checkpoint {}: paused {:?} ({} queued, {} in flight)",
            manifest.seq,
            paused.elapsed(),
            frontier.queued(),
            frontier.in_flight()
        );
        let out = self.out_dir.clone();
        let seen = self.seen.clone();
        // Taken in the pause (a bounded jar: a few hundred KiB at most), written with the rest.
        let cookies = self.cookies.as_ref().map(|jar| jar.to_json());
        self.pending = Some(tokio::task::spawn_blocking(move || {
            if let Some(json) = cookies {
                CookieJar::save(&out, &json).map_err(|e| CheckpointError::Io {
                    path: e.path,
                    source: e.source,
                })?;
            }
            checkpoint::prepare(
                &out,
                checkpoint::Snapshot {
                    seen,
                    frontier: frontier_snapshot,
                    manifest,
                },
            )
            .map(CheckpointPhase::Prepared)
        }));
        Ok(())
    }

    /// Moves the checkpoint in the background to its next phase: a prepared one is
    /// published once the queue log (every URL accepted since the snapshot, whose bits the
    /// seen-set file may hold) is flushed here and fsynced there; a published one lets the
    /// frontier reclaim space.
    pub(crate) fn advance<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        phase: PendingPhase,
    ) -> Result<(), CrawlError> {
        let phase = phase.map_err(|e| CheckpointError::Io {
            path: self.out_dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })??;
        match phase {
            CheckpointPhase::Prepared(prepared) => {
                let log = match self.queue_log.as_mut() {
                    Some(log) => Some(log.flushed_file()?),
                    None => None,
                };
                let good = self.good;
                self.pending = Some(tokio::task::spawn_blocking(move || {
                    if let Some((path, file)) = log {
                        file.sync_data()
                            .map_err(|source| CheckpointError::Io { path, source })?;
                    }
                    checkpoint::publish(prepared, good).map(CheckpointPhase::Published)
                }));
            }
            CheckpointPhase::Published(manifest) => {
                self.good = Some(manifest.seq);
                if let Some(saved) = &manifest.frontier {
                    frontier.finish_checkpoint(saved)?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the checkpoint being written, then lets the frontier reclaim what only
    /// older checkpoints needed.
    pub(crate) async fn wait<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
    ) -> Result<(), CrawlError> {
        while let Some(pending) = self.pending.take() {
            let phase = pending.await;
            self.advance(frontier, phase)?;
        }
        Ok(())
    }
}
