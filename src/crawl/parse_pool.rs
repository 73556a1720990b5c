//! The parse pool: a few OS threads that turn fetched HTML into screened links.
//!
//! Parsing is CPU work (tens to hundreds of microseconds per page) and would stall the
//! async reactor if it ran on it, so it runs on `parse_threads` OS threads (default one per
//! core) fed by a crossbeam channel. Each thread extracts a page's links (a streaming
//! extractor, see [`crate::extract`]), screens them through [`Admission`], builds the page's
//! archive records when the crawl archives ([`crate::warc`]) and reports the completion to
//! the dispatcher itself: the completions of jobs it finds waiting back to back go in one
//! message, so a busy pool wakes the dispatcher once per burst, not once per page. The
//! channel closes when the last fetch task is gone, which is how the threads know to stop.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::admission::{Admission, ScreenScratch};
use super::faults::{panic_message, Faults};
use super::handoffs::{self, Handoff};
use super::messages::{Candidates, Completion, Outcome, ParseJob};
use crate::counters::CrawlCounters;
use crate::cpu_time::thread_cpu_ns;
use crate::extract::{extract_links, ExtractOptions};

/// A parse thread could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start parse thread {index}")]
pub struct ParseThreadError {
    index: usize,
    #[source]
    source: std::io::Error,
}

/// What parse threads share.
pub(crate) struct ParseShared {
    pub(crate) admission: Arc<Admission>,
    pub(crate) counters: Arc<CrawlCounters>,
    pub(crate) completions: mpsc::UnboundedSender<Completion>,
    pub(crate) options: ExtractOptions,
    pub(crate) faults: Faults,
    /// Builds the archive's records of each parsed page's fetch (`[output] warc`).
    pub(crate) archiver: Option<crate::warc::Archiver>,
}

/// The running parse threads.
pub(crate) struct ParsePool {
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl ParsePool {
    /// Starts `threads` parse threads (0 = one per core) on `jobs`.
    pub(crate) fn start(
        threads: usize,
        jobs: crossbeam_channel::Receiver<ParseJob>,
        shared: Arc<ParseShared>,
    ) -> Result<ParsePool, ParseThreadError> {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let jobs = jobs.clone();
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("parse-{index}"))
                .spawn(move || parse_loop(jobs, shared))
                .map_err(|source| ParseThreadError { index, source })?;
            handles.push(handle);
        }
        Ok(ParsePool { handles })
    }

    /// Waits for every thread to finish (their channel must be closed first).
    pub(crate) async fn join(self) {
        for handle in self.handles {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }
}

/// A parse thread: extracts a page's links, screens them, and reports the completions to
/// the dispatcher, those of back-to-back jobs in one message.
fn parse_loop(jobs: crossbeam_channel::Receiver<ParseJob>, shared: Arc<ParseShared>) {
    let started_cpu = thread_cpu_ns();
    let counters = &shared.counters;
    let mut scratch = ScreenScratch::default();
    let mut done = Vec::with_capacity(MAX_BATCH);
    loop {
        // While jobs are waiting, completions gather; they go to the driver when the queue
        // runs dry or the batch is full (see `MAX_BATCH`).
        let next = if done.is_empty() {
            jobs.recv().ok()
        } else {
            match jobs.try_recv() {
                Ok(job) => Some(job),
                Err(crossbeam_channel::TryRecvError::Empty) => {
                    hand_over(&shared, &mut done);
                    continue;
                }
                Err(crossbeam_channel::TryRecvError::Disconnected) => None,
            }
        };
        let Some(job) = next else {
            hand_over(&shared, &mut done);
            break;
        };
        let ParseJob {
            dispatch,
            url,
            mut fetched,
            mut record,
        } = job;
        let depth = dispatch.item.depth + 1;
        // A panic here (a bug in extraction or screening, on hostile bytes) costs this page
        // only: the thread goes on with the next job, so the pool never shrinks and the URL
        // never stays in flight.
        let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if shared.faults.panic_parse.as_deref() == Some(dispatch.item.url.as_str()) {
                panic!("injected fault: panic while parsing {}", dispatch.item.url);
            }
            let body = fetched.body.as_deref().unwrap_or_default();
            let mut extracted =
                extract_links(body, &url, fetched.charset.as_deref(), &shared.options);
            let canonical = shared.admission.take_canonical(
                &url,
                fetched.link_canonical.as_deref(),
                &mut extracted,
            );
            let links = extracted.found() as u64;
            // Trap pages are stopped by what they are: a page its host already produced, up
            // to its digits, leads nowhere new.
            let extracted_digest = extracted.digest;
            let duplicate_of = extracted_digest.and_then(|digest| {
                // The near-duplicate memory is one map behind a mutex, shared by the pool.
                handoffs::count(Handoff::Lock, 1);
                shared.admission.near_duplicate_of(
                    &url,
                    dispatch.item.parent.as_deref(),
                    digest,
                    &mut record.counts,
                )
            });
            let candidates = match duplicate_of {
                Some(_) => shared
                    .admission
                    .refuse_near_duplicate(extracted, &mut record.counts),
                None => shared.admission.screen_links(
                    extracted,
                    depth,
                    fetched.header_nofollow,
                    &mut scratch,
                    &mut record.counts,
                ),
            };
            let digest = extracted_digest.map(crate::near_duplicate::digest_field);
            (links, candidates, canonical, (duplicate_of, digest))
        }));
        let candidates = match parsed {
            Ok((links, candidates, canonical, (duplicate_of, near_digest))) => {
                record.counts.parsed += 1;
                record.links = links;
                record.canonical = canonical;
                record.duplicate_of = duplicate_of;
                record.near_digest = near_digest;
                candidates
            }
            Err(payload) => {
                record.counts.panics += 1;
                record.error = Some(format!(
                    "crawler bug: parsing panicked: {}",
                    panic_message(&*payload)
                ));
                Candidates::default()
            }
        };
        // The page's records are built here too, on this thread: digests and compression are
        // CPU work like parsing, kept off the async workers and the dispatcher.
        let archive = shared
            .archiver
            .as_ref()
            .and_then(|archiver| archiver.archive_taking(&dispatch.item.url, &mut fetched));
        done.push(Completion::Page {
            dispatch,
            outcome: Outcome::Done {
                record,
                candidates,
                archive,
            },
        });
        if done.len() >= MAX_BATCH {
            hand_over(&shared, &mut done);
        }
    }
    CrawlCounters::add(
        &counters.parse_cpu_ns,
        thread_cpu_ns().saturating_sub(started_cpu),
    );
}

/// The most completions a parse thread holds before handing them over: a page's
/// completion waits at most for this many pages' parsing on its thread (16 × ~50 µs at
/// 16 KB) while its fetch slot stays taken, and the driver is woken once per batch.
const MAX_BATCH: usize = 16;

/// Hands the gathered completions to the driver in one message.
fn hand_over(shared: &ParseShared, done: &mut Vec<Completion>) {
    let message = match done.len() {
        0 => return,
        1 => done.pop(),
        _ => Some(Completion::Batch(std::mem::replace(
            done,
            Vec::with_capacity(MAX_BATCH),
        ))),
    };
    if let Some(message) = message {
        handoffs::count(Handoff::Completion, 1);
        // The driver is gone only when the crawl is over.
        let _ = shared.completions.send(message);
    }
}
