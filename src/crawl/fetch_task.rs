//! The fetch task: one dispatched URL, fetched once, turned into an outcome: a record and
//! the redirect target to admit, a retry to schedule, or a page for the parse pool.
//!
//! A fetch task never sleeps for politeness and never follows a redirect itself: the
//! frontier decides when a host may be fetched (retries included, so a retry obeys the
//! host's rate like any request), and a redirect target goes through admission like a link
//! (normalized, scoped, checked against the seen-set), so redirect loops end by themselves.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;
use url::Url;

use super::admission::Admission;
use super::faults::{panic_message, Faults};
use super::handoffs::{self, Handoff};
use super::messages::{Candidates, Completion, Outcome, ParseJob};
use crate::config::Config;
use crate::counters::CrawlCounters;
use crate::fetch::{FetchError, Fetched, Fetcher};
use crate::frontier::{Dispatch, QueuedUrl, RobotsFetch, ServerSignal};
use crate::output::{rfc3339, PageRecord, RecordKind};
use crate::robots::{agent_token, robots_outcome, RobotsOutcome, ROBOTS_MAX_BYTES};
use crate::warc::record::ArchivedFetch;
use crate::warc::Archiver;

/// The longest backoff between retries (a `Retry-After` longer than
/// `politeness.max_crawl_delay_secs` is not waited for at all: the URL ends).
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// What fetch tasks share. Only fetch tasks hold the parse-job sender, so the parse
/// threads see their channel close once the last fetch task is gone.
pub(crate) struct FetchShared {
    pub(crate) config: Config,
    pub(crate) admission: Arc<Admission>,
    pub(crate) fetcher: Fetcher,
    /// The gate's resolver, for the frontier's address lookups (per-address politeness).
    pub(crate) resolver: crate::gate::GateResolver,
    pub(crate) counters: Arc<CrawlCounters>,
    pub(crate) completions: mpsc::UnboundedSender<Completion>,
    pub(crate) parse_jobs: crossbeam_channel::Sender<ParseJob>,
    pub(crate) faults: Faults,
    /// Builds the archive's records of each finished fetch (`[output] warc`).
    pub(crate) archiver: Option<Archiver>,
    /// A recrawl's known URLs: pages are asked for with their validators.
    pub(crate) known: Option<Arc<crate::recrawl::KnownUrls>>,
}

/// Payloads above this size have their records built (digests, and deflate with
/// `output.warc_deflate = "always"`) on a blocking thread, not on the async workers: a
/// 10 MB PDF's digests alone take milliseconds.
const ARCHIVE_INLINE_BYTES: usize = 256 << 10;

/// The archive's records of a fetch of `url` that ended here, built off the async workers
/// when the payload is large.
async fn archive_fetch(
    shared: &FetchShared,
    url: &str,
    mut fetched: Fetched,
) -> Option<Box<ArchivedFetch>> {
    let archiver = shared.archiver.clone()?;
    let exchange = fetched.exchange.as_deref()?;
    if exchange.payload(fetched.body.as_deref()).len() <= ARCHIVE_INLINE_BYTES {
        return archiver.archive_taking(url, &mut fetched);
    }
    let url = url.to_string();
    tokio::task::spawn_blocking(move || archiver.archive_taking(&url, &mut fetched))
        .await
        .ok()
        .flatten()
}

/// Runs `work` to its end and returns its output, or the message of its panic. `work` is
/// polled in place, inside `catch_unwind`, rather than spawned as a task of its own: a task
/// per fetch cost an allocation, a scheduling and a wake-up of this task for nothing (the
/// crawl bench's profile showed them). Dropping this future (a fetch abandoned at shutdown)
/// drops `work` with it, so nothing outlives the crawl; a `work` that panicked is never
/// polled again, only dropped.
async fn catching_panics<T>(work: impl std::future::Future<Output = T>) -> Result<T, String> {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(&*payload))),
        }
    })
    .await
}

/// Fetches one dispatched URL and reports how it ended (directly, or through the parse
/// pool for a page to parse). A panic while fetching costs this URL only: it is recorded
/// with the panic's message and counted, and the crawl goes on.
pub(crate) async fn fetch_task(shared: Arc<FetchShared>, mut dispatch: Dispatch) {
    let mut signal = None;
    // Boxed: the fetch's state (reqwest's request and response futures, the body being
    // decoded) is several KB, and a task's future is moved by value when it is spawned and
    // as it is polled (the crawl bench's profile showed those copies, 4% of the workers'
    // CPU). Boxed, it is allocated once where it runs, and the task stays small.
    let fetching = Box::pin(fetch_outcome(&shared, &dispatch.item, &mut signal));
    let step = catching_panics(fetching).await;
    // The frontier's budgets adapt to it when the dispatch is given back.
    dispatch.signal = signal;
    let step = match step {
        Ok(step) => step,
        Err(message) => {
            let mut record = base_record(&dispatch.item);
            record.counts.panics += 1;
            record.error = Some(format!("crawler bug: the fetch panicked: {message}"));
            record.fetched_at = rfc3339(SystemTime::now());
            FetchStep::Finished(Outcome::Done {
                record,
                candidates: Candidates::default(),
                archive: None,
            })
        }
    };
    match step {
        FetchStep::Finished(outcome) => {
            handoffs::count(Handoff::Completion, 1);
            let _ = shared
                .completions
                .send(Completion::Page { dispatch, outcome });
        }
        FetchStep::Parse(parts) => {
            // The parse threads own the job from here and report the completion.
            let ParsePart {
                url,
                fetched,
                record,
            } = *parts;
            let job = ParseJob {
                dispatch,
                url,
                fetched,
                record,
            };
            handoffs::count(Handoff::ParseJob, 1);
            if let Err(crossbeam_channel::SendError(job)) = shared.parse_jobs.send(job) {
                let mut record = job.record;
                record.error = Some("crawl shutting down before the page was parsed".into());
                let _ = shared.completions.send(Completion::Page {
                    dispatch: job.dispatch,
                    outcome: Outcome::Done {
                        record,
                        candidates: Candidates::default(),
                        archive: None,
                    },
                });
            }
        }
    }
}

/// Sends one request of a host's robots.txt (its first, or a redirect hop) and reports the
/// outcome to the driver, with the fetch's line and records when the crawl archives.
pub(crate) async fn robots_task(shared: Arc<FetchShared>, fetch: RobotsFetch) {
    let agent = agent_token(&shared.config.crawl.user_agent);
    let (outcome, archived) = match Url::parse(&fetch.url) {
        Ok(url) => {
            let inner = shared.clone();
            let hops = fetch.hops;
            let request = async move {
                let started = Instant::now();
                let fetched = inner
                    .fetcher
                    .fetch_capped(&url, crate::gate::RequestKind::Robots, ROBOTS_MAX_BYTES)
                    .await;
                let archived = match &fetched {
                    Ok(response) if response.exchange.is_some() => {
                        let record = robots_record(&url, response, started);
                        let archive = inner
                            .archiver
                            .as_ref()
                            .and_then(|a| a.archive(url.as_str(), response));
                        archive.map(|archive| (record, archive))
                    }
                    _ => None,
                };
                let outcome = robots_outcome(&url, fetched, &agent);
                // The sitemaps it names are admitted before the robots.txt completes.
                if let (true, RobotsOutcome::Rules { rules, .. }) =
                    (inner.config.crawl.sitemaps, &outcome)
                {
                    if let Some(found) =
                        super::sitemaps::from_robots(&inner.admission, &url, hops, rules)
                    {
                        handoffs::count(Handoff::Completion, 1);
                        let _ = inner.completions.send(found);
                    }
                }
                (outcome, archived)
            };
            // Boxed for the reason given in `fetch_task`.
            catching_panics(Box::pin(request))
                .await
                .unwrap_or_else(|message| {
                    CrawlCounters::add(&shared.counters.panics, 1);
                    let reason = format!("crawler bug: the robots.txt fetch panicked: {message}");
                    (
                        RobotsOutcome::Unavailable {
                            reason,
                            permanent: false,
                        },
                        None,
                    )
                })
        }
        Err(e) => (
            RobotsOutcome::Unavailable {
                reason: format!("robots.txt URL {}: {e}", fetch.url),
                permanent: true,
            },
            None,
        ),
    };
    handoffs::count(Handoff::Completion, 1);
    let _ = shared.completions.send(Completion::Robots {
        fetch,
        outcome,
        archived,
    });
}

/// The `pages.jsonl` line of a robots.txt fetch (written only with the archive on, so that
/// every archived fetch has its line).
fn robots_record(url: &Url, fetched: &Fetched, started: Instant) -> Box<PageRecord> {
    let mut record = base_record(&QueuedUrl::new(url.as_str().to_string(), 0, None, 0));
    record.kind = RecordKind::Robots;
    record.status = Some(fetched.status);
    record.content_type = fetched.content_type.clone();
    record.bytes = fetched.bytes;
    record.truncated = fetched.truncated;
    record.final_url = Some(url.as_str().to_string());
    record.elapsed_ms = started.elapsed().as_millis() as u64;
    record.fetched_at = rfc3339(SystemTime::now());
    record
}

/// The record of `item` before its fetch: what is known from the queue, the retries made
/// for it counted.
pub(crate) fn base_record(item: &QueuedUrl) -> Box<PageRecord> {
    let mut record = Box::new(PageRecord {
        url: item.url.clone(),
        depth: item.depth,
        parent: item.parent.as_deref().map(String::from),
        attempts: item.attempts + 1,
        ..PageRecord::default()
    });
    record.counts.retries = u64::from(item.attempts);
    record
}

enum FetchStep {
    Finished(Outcome),
    /// A page to parse; boxed to keep the step small.
    Parse(Box<ParsePart>),
}

struct ParsePart {
    url: Url,
    fetched: Fetched,
    record: Box<PageRecord>,
}

/// Exponential backoff for retry number `attempt` (0-based): 0.5 s, 1 s, 2 s, … capped.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << attempt.min(10))).min(MAX_RETRY_DELAY)
}

async fn fetch_outcome(
    shared: &FetchShared,
    item: &QueuedUrl,
    signal: &mut Option<ServerSignal>,
) -> FetchStep {
    if shared.faults.panic_fetch.as_deref() == Some(item.url.as_str()) {
        panic!("injected fault: panic while fetching {}", item.url);
    }
    let config = &shared.config.crawl;
    let mut record = base_record(item);
    let started = Instant::now();
    let stamp = |record: &mut PageRecord| {
        record.elapsed_ms = started.elapsed().as_millis() as u64;
        record.fetched_at = rfc3339(SystemTime::now());
    };
    let done = |mut record: Box<PageRecord>, candidates: Candidates| {
        stamp(&mut record);
        FetchStep::Finished(Outcome::Done {
            record,
            candidates,
            archive: None,
        })
    };
    let url = match Url::parse(&item.url) {
        Ok(url) => url,
        Err(e) => {
            record.error = Some(format!("unparsable queued URL: {e}"));
            record.counts.network_errors += 1;
            return done(record, Candidates::default());
        }
    };
    let can_retry = item.attempts < config.retries;
    let is_sitemap = super::sitemaps::is_sitemap(&url);
    // A recrawl asks again with what the last fetch's response said.
    let previous = match (&shared.known, is_sitemap) {
        (Some(known), false) => known.asking(&item.url),
        _ => None,
    };
    let fetching = if is_sitemap {
        let kind = crate::gate::RequestKind::Sitemap;
        shared
            .fetcher
            .fetch_capped(&url, kind, crate::sitemap::MAX_BYTES)
            .await
    } else if let Some((validators, _)) = previous.as_ref().filter(|(v, _)| !v.is_empty()) {
        shared.fetcher.fetch_conditional(&url, validators).await
    } else {
        shared.fetcher.fetch(&url).await
    };
    let mut fetched = match fetching {
        Ok(fetched) => fetched,
        Err(error) => return fetch_failed(error, can_retry, item, record, done),
    };
    *signal = Some(ServerSignal {
        status: fetched.status,
        retry_after: fetched.retry_after.is_some(),
        elapsed: started.elapsed(),
    });
    record.counts.bytes += fetched.bytes;
    record.status = Some(fetched.status);
    record.content_type = fetched.content_type.clone();
    record.bytes = fetched.bytes;
    record.truncated = fetched.truncated;
    record.final_url = Some(item.url.clone());
    record.etag = fetched.validators.etag.clone();
    record.last_modified = fetched.validators.last_modified.clone();
    // A fetch that ends here (not retried, not parsed) is archived with its record.
    let ended = |mut record: Box<PageRecord>, candidates: Candidates, fetched: Fetched| async move {
        stamp(&mut record);
        let archive = archive_fetch(shared, &item.url, fetched).await;
        FetchStep::Finished(Outcome::Done {
            record,
            candidates,
            archive,
        })
    };
    let status = fetched.status;
    if status >= 500 || status == 429 {
        let limit = shared.config.politeness.max_crawl_delay_secs;
        let asked = fetched.retry_after.unwrap_or_default();
        if asked.as_secs_f64() > limit {
            // A server asking for a longer pause than the crawl waits for any host: the URL
            // ends here rather than holding the crawl open.
            record.counts.server_errors += 1;
            record.error = Some(format!(
                "HTTP {status} with Retry-After {} s, over politeness.max_crawl_delay_secs = {limit} s; not retried",
                asked.as_secs()
            ));
            return ended(record, Candidates::default(), fetched).await;
        }
        if can_retry {
            let delay = asked.max(backoff(item.attempts)).min(MAX_RETRY_DELAY);
            return FetchStep::Finished(Outcome::Retry { delay });
        }
        record.counts.server_errors += 1;
        record.error = Some(format!(
            "HTTP {status} after {} attempts",
            item.attempts + 1
        ));
        return ended(record, Candidates::default(), fetched).await;
    }
    if let (304, Some((_, unchanged))) = (status, previous) {
        // Not modified since the last generation: no body, no links (`crate::recrawl`);
        // archived as a revisit of what it stands for.
        record.counts.not_modified += 1;
        stamp(&mut record);
        let mut archive = archive_fetch(shared, &item.url, fetched).await;
        if let Some(archive) = archive.as_mut() {
            archive.not_modified = Some(Box::new(unchanged));
        }
        return FetchStep::Finished(Outcome::Done {
            record,
            candidates: Candidates::default(),
            archive,
        });
    }
    if fetched.is_redirect() {
        record.counts.redirects += 1;
        let Some(location) = fetched.location.clone() else {
            record.error = Some("redirect without a Location header".into());
            return ended(record, Candidates::default(), fetched).await;
        };
        let (target, screened) = shared.admission.screen_redirect(
            &url,
            &location,
            (item.depth, item.redirect_hops),
            &mut record.counts,
        );
        if let Some(target) = target {
            record.final_url = Some(target.as_str().to_string());
        }
        return match screened {
            Ok(mut candidates) => {
                if is_sitemap {
                    // A sitemap that moved is still a sitemap.
                    candidates.urls.iter_mut().for_each(super::sitemaps::mark);
                }
                record.links = 1;
                ended(record, candidates, fetched).await
            }
            Err(reason) => {
                record.error = Some(reason);
                ended(record, Candidates::default(), fetched).await
            }
        };
    }
    if (400..500).contains(&status) {
        record.counts.client_errors += 1;
    } else if (200..300).contains(&status) {
        record.counts.ok += 1;
    }
    if let Some(problem) = fetched.decode_error.take() {
        // The coding could not be undone (to its end): said in the record; whatever was
        // decoded is still parsed, as a browser would show it.
        record.error = Some(problem);
    }
    if is_sitemap {
        // Archived like any fetch (under its URL as requested, without the crawl's
        // `#sitemap` marker), then read for its entries.
        let mut target = url.clone();
        target.set_fragment(None);
        let archive = shared
            .archiver
            .as_ref()
            .and_then(|a| a.archive(target.as_str(), &fetched));
        let candidates = match (fetched.body, (200..300).contains(&status)) {
            (Some(body), true) => {
                super::sitemaps::read(&shared.admission, &url, item.depth, body, &mut record).await
            }
            _ => Candidates::default(),
        };
        stamp(&mut record);
        return FetchStep::Finished(Outcome::Done {
            record,
            candidates,
            archive,
        });
    }
    if fetched.body.is_none() && (200..300).contains(&status) && fetched.link_canonical.is_some() {
        // Not parsed (not HTML), but its `Link` header names a canonical URL.
        let mut extracted = crate::extract::Extracted::default();
        record.canonical = shared.admission.take_canonical(
            &url,
            fetched.link_canonical.as_deref(),
            &mut extracted,
        );
        record.links = extracted.found() as u64;
        let candidates = shared.admission.screen_links(
            extracted,
            item.depth + 1,
            fetched.header_nofollow,
            &mut super::admission::ScreenScratch::default(),
            &mut record.counts,
        );
        return ended(record, candidates, fetched).await;
    }
    if fetched.body.is_some() {
        stamp(&mut record);
        return FetchStep::Parse(Box::new(ParsePart {
            url,
            fetched,
            record,
        }));
    }
    ended(record, Candidates::default(), fetched).await
}

fn fetch_failed(
    error: FetchError,
    can_retry: bool,
    item: &QueuedUrl,
    mut record: Box<PageRecord>,
    done: impl FnOnce(Box<PageRecord>, Candidates) -> FetchStep,
) -> FetchStep {
    if error.is_transient() && can_retry {
        return FetchStep::Finished(Outcome::Retry {
            delay: backoff(item.attempts),
        });
    }
    record.counts.network_errors += 1;
    record.error = Some(error.message);
    done(record, Candidates::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `task` returns, without calling it.
    fn future_size<A, B, F: std::future::Future>(_task: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_spawned_task_is_small_whatever_the_fetch_holds() {
        // Spawning copies a task's whole future; the fetch's own state is boxed inside.
        assert!(
            future_size(fetch_task) <= 1024,
            "{}",
            future_size(fetch_task)
        );
        assert!(
            future_size(robots_task) <= 1024,
            "{}",
            future_size(robots_task)
        );
        // What boxing saves: the fetch itself is several times that.
        let outcome = |shared: &'static FetchShared, item: &'static QueuedUrl| {
            fetch_outcome(shared, item, Box::leak(Box::new(None)))
        };
        assert!(future_size(outcome) > 2048, "{}", future_size(outcome));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(500));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(4));
        assert_eq!(backoff(40), MAX_RETRY_DELAY);
    }
}
