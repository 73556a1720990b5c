//! The parse pool: a few OS threads that turn fetched HTML into screened links.
//!
//! Parsing is CPU work (tens to hundreds of microseconds per page) and would stall the
//! async reactor if it ran on it, so it runs on `parse_threads` OS threads (default one per
//! core) fed by a crossbeam channel. Each thread extracts a page's links (a streaming
//! extractor, see [`crate::extract`]), screens them through [`Admission`], builds the page's
//! archive records when the crawl archives ([`crate::warc`]) and reports the completion to
//! the dispatcher itself: the completions of jobs it finds waiting back to back, and of
//! those that come within [`HOLD`] of the first, go in one message, so a busy pool wakes
//! the dispatcher once per burst, not once per page. The
//! channel closes when the last fetch task is gone, which is how the threads know to stop.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    let mut held_since = Instant::now();
    loop {
        // Completions gather while jobs keep coming; they go to the driver when the queue
        // has stayed dry until `HOLD` after the first of them, or the batch is full
        // (`MAX_BATCH`).
        let job = match next_job(&jobs, (!done.is_empty()).then_some(held_since)) {
            Next::Job(job) => job,
            Next::HandOver => {
                hand_over(&shared, &mut done);
                continue;
            }
            Next::Closed => {
                hand_over(&shared, &mut done);
                break;
            }
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
        if done.len() == 1 {
            held_since = Instant::now();
        }
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

/// How long a parse thread holds its completions, from the first, for more to join them
/// when its queue runs dry. Handing them over as soon as the queue was empty woke the
/// driver ~0.17 times a page on a quiet machine (bursts of ~6 pages: the parse threads
/// drain their queue faster than fetches refill it), each wake-up a sleep of the driver and
/// a round that wakes a tokio worker: 30–50% of the driver's CPU was the kernel's
/// (`cargo bench --bench crawl -- --cores 2`). Held 300 µs: 0.06 wake-ups a page, the
/// driver's CPU per page 4.4–4.8 µs against 5.4–6.1, and 8–19% more pages/s (figures in
/// the module doc of `crate::crawl`). 300 µs is a fetch slot kept a little longer: nothing
/// next to a page's round trip on the web, and at most ~5 slots of 64 at the bench's
/// 18,000 pages/s.
const HOLD: Duration = Duration::from_micros(300);

/// What a parse thread does next.
enum Next<T> {
    /// Parse this job.
    Job(T),
    /// Hand the completions held over: the queue stayed dry for the rest of [`HOLD`].
    HandOver,
    /// The queue is closed and empty: the crawl is over.
    Closed,
}

/// Waits for the next job: as long as it takes when nothing is held, else until [`HOLD`]
/// after `held_since`, the time the first completion held was made.
fn next_job<T>(jobs: &crossbeam_channel::Receiver<T>, held_since: Option<Instant>) -> Next<T> {
    use crossbeam_channel::RecvTimeoutError;
    match held_since {
        None => jobs.recv().map_or(Next::Closed, Next::Job),
        Some(since) => match jobs.recv_timeout(HOLD.saturating_sub(since.elapsed())) {
            Ok(job) => Next::Job(job),
            Err(RecvTimeoutError::Timeout) => Next::HandOver,
            Err(RecvTimeoutError::Disconnected) => Next::Closed,
        },
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_held_it_waits_for_a_job_or_the_end() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(HOLD * 4);
            tx.send(7).unwrap();
        });
        assert!(matches!(next_job(&rx, None), Next::Job(7)));
        sender.join().unwrap();
        assert!(matches!(next_job(&rx, None), Next::Closed));
    }

    #[test]
    fn held_completions_go_after_the_hold_with_the_queue_open() {
        let (tx, rx) = crossbeam_channel::unbounded::<u32>();
        let since = Instant::now();
        assert!(matches!(next_job(&rx, Some(since)), Next::HandOver));
        assert!(since.elapsed() >= HOLD, "handed over before the hold ended");
        // A hold already over: at once, not another HOLD.
        let late = Instant::now() - HOLD * 10;
        let asked = Instant::now();
        assert!(matches!(next_job(&rx, Some(late)), Next::HandOver));
        assert!(asked.elapsed() < Duration::from_secs(1));
        drop(tx);
    }

    #[test]
    fn a_job_in_the_hold_joins_the_held_ones_and_the_end_is_seen() {
        let (tx, rx) = crossbeam_channel::unbounded();
        tx.send(1).unwrap();
        assert!(matches!(next_job(&rx, Some(Instant::now())), Next::Job(1)));
        drop(tx);
        assert!(matches!(next_job(&rx, Some(Instant::now())), Next::Closed));
    }
}
