//! Admission: the one path by which a discovered URL (a page's link, a redirect's target, a
//! canonical link, a sitemap entry) becomes a queued URL, and the one place its refusals
//! are counted.
//!
//! Admission has two halves, because two of its rules need the single writer and the rest
//! must not wait for it:
//!
//! 1. **Screening** ([`Admission`], shared by the parse threads and the fetch tasks): the
//!    page-level rules (nofollow, `max_depth`), then per URL normalization, the scope rules,
//!    the per-page duplicate check and a lock-free `contains` on the seen-set that drops
//!    what is certainly seen. It runs where the page was parsed, in parallel, and hands the
//!    dispatcher only the few URLs that are probably new ([`Candidates`]).
//! 2. **Acceptance** ([`Acceptance`], owned by the dispatcher): `max_urls`,
//!    `max_pages_per_host`, the seen-set's exactly-once insert, the queue log and the push
//!    into the frontier. One task does this, so "no URL queued twice" and "never more than
//!    `max_urls`" are exact, not probable: each cap is checked before the seen-set is
//!    touched, so the seen-set holds only URLs that were queued.
//!
//! Every refusal, whichever half decides it, is a [`Refusal`] counted by
//! [`Refusal::count`]; no other code increments a link counter.

use std::collections::HashSet;
use std::sync::Arc;

use url::Url;

use super::counters::CrawlCounters;
use super::messages::Candidates;
use super::CrawlError;
use super::CrawlFrontier;
use crate::checkpoint::QueueLog;
use crate::config::Config;
use crate::extract::Extracted;
use crate::frontier::QueuedUrl;
use crate::normalize::{host_key, Normalizer};
use crate::scope::{OutOfScope, Scope};
use crate::seen::SeenBackend;

/// Why a discovered URL was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not http(s), or normalization refused it.
    NotHttp,
    /// An `href` that did not resolve to a URL.
    Invalid,
    /// `rel=nofollow`, meta robots or `X-Robots-Tag` nofollow.
    Nofollow,
    /// Deeper than `max_depth`.
    TooDeep,
    /// Past `max_links_per_page` or the page's extraction budget.
    OverPageCap,
    /// Broke a scope rule.
    OutOfScope(OutOfScope),
    /// Already in the seen-set or earlier on the same page.
    Seen,
    /// `max_urls` reached.
    OverMaxUrls,
    /// Its host reached `scope.max_pages_per_host`.
    HostCap,
    /// A redirect chain longer than `max_redirects`.
    RedirectLimit,
}

impl Refusal {
    /// Counts `n` refusals of this kind: the only place link counters are incremented.
    pub(crate) fn count(self, counters: &CrawlCounters, n: u64) {
        if n == 0 {
            return;
        }
        let counter = match self {
            Refusal::NotHttp => &counters.links_not_http,
            Refusal::Invalid => &counters.links_invalid,
            Refusal::Nofollow => &counters.links_nofollow,
            Refusal::TooDeep => &counters.links_too_deep,
            Refusal::OverPageCap => &counters.links_over_page_cap,
            Refusal::OutOfScope(reason) => return counters.add_out_of_scope(reason, n),
            Refusal::Seen => &counters.links_seen,
            Refusal::OverMaxUrls => &counters.links_over_cap,
            Refusal::HostCap => &counters.links_host_cap,
            Refusal::RedirectLimit => &counters.redirects_over_limit,
        };
        CrawlCounters::add(counter, n);
    }
}

/// The screening half: shared, read-only, used from any thread.
pub(crate) struct Admission {
    normalizer: Normalizer,
    scope: Arc<Scope>,
    seen: Arc<dyn SeenBackend>,
    counters: Arc<CrawlCounters>,
    max_depth: u32,
    max_redirects: u32,
    follow_nofollow: bool,
    follow_canonical: bool,
}

impl Admission {
    pub(crate) fn new(
        config: &Config,
        normalizer: Normalizer,
        scope: Arc<Scope>,
        seen: Arc<dyn SeenBackend>,
        counters: Arc<CrawlCounters>,
    ) -> Admission {
        Admission {
            normalizer,
            scope,
            seen,
            counters,
            max_depth: config.crawl.max_depth,
            max_redirects: config.crawl.max_redirects,
            follow_nofollow: config.crawl.follow_nofollow,
            follow_canonical: config.crawl.follow_canonical,
        }
    }

    /// The canonical URL of the page at `page` (see [`crate::canonical`]): the `Link`
    /// header's target (`header`, resolved against `page`), else the HTML one in
    /// `extracted`, in the crawl's canonical form when the normalizer takes it; this is what
    /// the record keeps. With `crawl.follow_canonical` it is also appended to
    /// `extracted.links`, so that it passes admission as one more link of the page (same
    /// normalizer, scope, depth, nofollow and seen-set; a page naming itself is already
    /// seen).
    pub(crate) fn take_canonical(
        &self,
        page: &Url,
        header: Option<&str>,
        extracted: &mut Extracted,
    ) -> Option<String> {
        let from_header = header.and_then(|target| page.join(target.trim()).ok());
        let mut canonical = from_header.or_else(|| extracted.canonical.take())?;
        if self.follow_canonical {
            extracted.links.push(canonical.clone());
        }
        // Recorded in canonical form when it has one; a `mailto:` canonical as it is.
        let _ = self.normalizer.canonicalize(&mut canonical);
        Some(canonical.as_str().to_string())
    }

    /// The links of a page at `depth` (its own depth + 1), as extracted; `header_nofollow`
    /// is the response's `X-Robots-Tag`. `on_page` is the caller's reusable set for the
    /// per-page duplicate check. Returns the candidates in page order.
    pub(crate) fn screen_links(
        &self,
        extracted: Extracted,
        depth: u32,
        header_nofollow: bool,
        on_page: &mut HashSet<String>,
    ) -> Candidates {
        let c = &self.counters;
        let found = extracted.links.len() as u64;
        CrawlCounters::add(&c.links_found, found);
        Refusal::Nofollow.count(c, extracted.nofollow_skipped as u64);
        Refusal::Invalid.count(c, extracted.invalid as u64);
        Refusal::OverPageCap.count(c, extracted.over_limit as u64);
        // Refused before being built, for the same reason the scope would refuse them.
        Refusal::OutOfScope(OutOfScope::TooLong).count(c, extracted.too_long as u64);
        let mut candidates = Candidates {
            urls: Vec::new(),
            depth,
            redirect_hops: 0,
        };
        let follow = !(header_nofollow || extracted.meta_nofollow) || self.follow_nofollow;
        if !follow {
            Refusal::Nofollow.count(c, found);
            return candidates;
        }
        if depth > self.max_depth {
            Refusal::TooDeep.count(c, found);
            return candidates;
        }
        on_page.clear();
        let (mut not_http, mut seen) = (0u64, 0u64);
        for link in extracted.links {
            match self.screen_one(link, on_page) {
                Ok(url) => candidates.urls.push(url),
                Err(Refusal::NotHttp) => not_http += 1,
                Err(Refusal::Seen) => seen += 1,
                Err(other) => other.count(c, 1),
            }
        }
        Refusal::NotHttp.count(c, not_http);
        Refusal::Seen.count(c, seen);
        candidates
    }

    /// The target of a redirect from `from` (at `depth`, `hops` redirects into its chain) to
    /// `location`. Returns the canonical target when there is one (the record's
    /// `final_url`, followed or not), and the candidate or the reason the record gives for
    /// not following it.
    pub(crate) fn screen_redirect(
        &self,
        from: &Url,
        location: &str,
        depth: u32,
        hops: u32,
    ) -> (Option<Url>, Result<Candidates, String>) {
        let mut target = match from.join(location.trim()) {
            Ok(target) => target,
            Err(e) => {
                return (
                    None,
                    Err(format!("redirect to an invalid URL {location:?}: {e}")),
                )
            }
        };
        if let Err(reason) = self.normalizer.canonicalize(&mut target) {
            return (None, Err(format!("redirect to {location:?}: {reason}")));
        }
        if let Err(reason) = self.scope.check(&target) {
            Refusal::OutOfScope(reason).count(&self.counters, 1);
            let why = format!("redirect target not followed: {reason}");
            return (Some(target), Err(why));
        }
        if hops >= self.max_redirects {
            Refusal::RedirectLimit.count(&self.counters, 1);
            let why = format!(
                "redirect chain longer than max_redirects = {}",
                self.max_redirects
            );
            return (Some(target), Err(why));
        }
        let candidates = Candidates {
            urls: vec![target.clone()],
            depth,
            redirect_hops: hops + 1,
        };
        (Some(target), Ok(candidates))
    }

    /// URLs found by sitemaps, at `depth`: the sitemaps a robots.txt names (and a host's
    /// `/sitemap.xml`) or a sitemap index lists (`as_sitemaps`), or the pages a `<urlset>`
    /// lists. Each `loc` is resolved against `base` and then passes exactly the rules of a
    /// link (`max_depth`, normalization, scope, duplicates, certainly-seen); sitemap URLs
    /// come out marked as such ([`super::sitemaps::mark`]), so the frontier hands them out
    /// like pages and the fetch task knows to read them as sitemaps.
    pub(crate) fn screen_discovered<'a>(
        &self,
        base: &Url,
        locs: impl IntoIterator<Item = &'a str>,
        as_sitemaps: bool,
        depth: u32,
    ) -> Candidates {
        let c = &self.counters;
        let mut candidates = Candidates {
            urls: Vec::new(),
            depth,
            redirect_hops: 0,
        };
        let mut on_page = HashSet::new();
        let mut found = 0u64;
        for loc in locs {
            found += 1;
            if depth > self.max_depth {
                Refusal::TooDeep.count(c, 1);
                continue;
            }
            let Ok(url) = base.join(loc.trim()) else {
                Refusal::Invalid.count(c, 1);
                continue;
            };
            match self.screen_marked(url, as_sitemaps, &mut on_page) {
                Ok(url) => candidates.urls.push(url),
                Err(refusal) => refusal.count(c, 1),
            }
        }
        CrawlCounters::add(&c.links_found, found);
        candidates
    }

    /// Normalization, scope, per-page duplicate, certainly-seen: the per-URL rules that
    /// need no single writer.
    fn screen_one(&self, url: Url, on_page: &mut HashSet<String>) -> Result<Url, Refusal> {
        self.screen_marked(url, false, on_page)
    }

    /// [`Self::screen_one`], the URL marked as a sitemap after normalization if `sitemap`.
    fn screen_marked(
        &self,
        mut url: Url,
        sitemap: bool,
        on_page: &mut HashSet<String>,
    ) -> Result<Url, Refusal> {
        self.normalizer
            .canonicalize(&mut url)
            .map_err(|_| Refusal::NotHttp)?;
        self.scope.check(&url).map_err(Refusal::OutOfScope)?;
        if sitemap {
            super::sitemaps::mark(&mut url);
        }
        if on_page.contains(url.as_str()) || self.seen.contains(url.as_str().as_bytes()) {
            return Err(Refusal::Seen);
        }
        on_page.insert(url.as_str().to_string());
        Ok(url)
    }
}

/// The acceptance half: owned by the dispatcher, the single writer of the seen-set and of
/// the accepted count.
pub(crate) struct Acceptance {
    seen: Arc<dyn SeenBackend>,
    counters: Arc<CrawlCounters>,
    max_urls: u64,
    max_pages_per_host: u64,
    /// Reused buffer of the seen-set's batch insert.
    batch_out: Vec<bool>,
}

impl Acceptance {
    pub(crate) fn new(
        config: &Config,
        seen: Arc<dyn SeenBackend>,
        counters: Arc<CrawlCounters>,
    ) -> Self {
        Acceptance {
            seen,
            counters,
            max_urls: config.crawl.max_urls.0,
            max_pages_per_host: config.scope.max_pages_per_host,
            batch_out: Vec::new(),
        }
    }

    /// Inserts candidates into the seen-set and queues the new ones (queue log first, then
    /// the frontier), never past `max_urls` or `max_pages_per_host`. Returns how many were
    /// queued.
    pub(crate) fn accept<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        mut queue_log: Option<&mut QueueLog>,
        candidates: Candidates,
        parent: Option<String>,
    ) -> Result<u64, CrawlError> {
        let Candidates {
            urls,
            depth,
            redirect_hops,
        } = candidates;
        if urls.is_empty() {
            return Ok(0);
        }
        let c = self.counters.clone();
        let accepted = CrawlCounters::get(&c.accepted);
        let room = self.max_urls.saturating_sub(accepted) as usize;
        let host_cap = self.max_pages_per_host;
        let queue = |frontier: &mut F, log: &mut Option<&mut QueueLog>, url: &Url| {
            let item = QueuedUrl {
                url: url.as_str().to_string(),
                depth,
                parent: parent.clone(),
                redirect_hops,
                attempts: 0,
            };
            if let Some(log) = log.as_deref_mut() {
                // Not logged, the URL would be in neither the checkpoint nor the log, and a
                // crash would forget it: the crawl stops instead, its last checkpoint intact
                // (the error says to --resume).
                log.append(&item)?;
            }
            Ok::<(), CrawlError>(frontier.push(&host_key(url), item)?)
        };
        let mut queued = 0u64;
        if room < urls.len() || host_cap > 0 {
            // Where a cap can bind, URLs are taken one by one in page order, each cap
            // checked before the seen-set is touched.
            let mut considered = 0;
            for url in &urls {
                if queued as usize == room {
                    break;
                }
                considered += 1;
                if host_cap > 0 && frontier.host_total_queued(&host_key(url)) >= host_cap {
                    Refusal::HostCap.count(&c, 1);
                    continue;
                }
                if self.seen.insert_new(url.as_str().as_bytes()) {
                    queued += 1;
                    queue(frontier, &mut queue_log, url)?;
                } else {
                    Refusal::Seen.count(&c, 1);
                }
            }
            Refusal::OverMaxUrls.count(&c, (urls.len() - considered) as u64);
        } else {
            // The common case: one batch per page, hashed first and prefetched.
            let keys: Vec<&[u8]> = urls.iter().map(|u| u.as_str().as_bytes()).collect();
            let mut fresh = std::mem::take(&mut self.batch_out);
            self.seen.insert_new_batch(&keys, &mut fresh);
            let mut seen = 0;
            for (url, &is_new) in urls.iter().zip(&fresh) {
                if is_new {
                    queued += 1;
                    queue(frontier, &mut queue_log, url)?;
                } else {
                    seen += 1;
                }
            }
            Refusal::Seen.count(&c, seen);
            self.batch_out = fresh;
        }
        if queued > 0 {
            CrawlCounters::add(&c.accepted, queued);
            // Each new URL was a query that could have been a false positive.
            let fpp = self.seen.stats().estimated_fpp;
            CrawlCounters::add(
                &c.false_positive_micros,
                (fpp * queued as f64 * 1e6).round() as u64,
            );
        }
        Ok(queued)
    }
}
