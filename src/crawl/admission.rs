//! Admission: the one path by which a discovered URL (a page's link, a redirect's target, a
//! canonical link, a sitemap entry) becomes a queued URL, and the one place its refusals
//! are counted.
//!
//! Admission has two halves, because two of its rules need the single writer and the rest
//! must not wait for it:
//!
//! 1. **Screening** ([`Admission`], shared by the parse threads and the fetch tasks): the
//!    page-level rules (nofollow, `max_depth`), then per URL normalization and the scope
//!    rules, and then, for the page's candidates in one batch, a lock-free `contains` on the
//!    seen-set that drops what is certainly seen, and the per-page duplicate check on what
//!    is left. It runs where the page was parsed, in parallel, and hands the
//!    dispatcher only the few URLs that are probably new ([`Candidates`]).
//!    URLs travel as [`Link`]s, the text and offsets the extractor built: normalization
//!    (`Normalizer::canonicalize_link`), the scope rules (`Scope::check_link`), the host key
//!    and the seen-set read them as they are, and a `Url` is built only for a link the
//!    normalizer must rewrite (or a redirect's target, a sitemap entry, a canonical: those
//!    arrive as `Url`s and pass the same steps as `Link::from(url)`). At ~80 links per page,
//!    a `Url` per link was ~60 ns of the extraction budget.
//! 2. **Acceptance** ([`Acceptance`], owned by the dispatcher): `max_urls`,
//!    `max_pages_per_host`, the seen-set's exactly-once insert, the queue log and the push
//!    into the frontier. One task does this, so "no URL queued twice" and "never more than
//!    `max_urls`" are exact, not probable: each cap is checked before the seen-set is
//!    touched, so the seen-set holds only URLs that were queued.
//!
//! Every refusal, whichever half decides it, is a [`Refusal`] counted by
//! [`Refusal::count`]; no other code increments a link counter. They are counted in the
//! [`PageCounts`] of the record of the page (or redirect, or sitemap) that found the links,
//! which the dispatcher adds to the crawl's counters with the record (see
//! `super::counters`): so a checkpoint and a resume count each page's links exactly once.

use std::collections::HashSet;
use std::sync::Arc;

use url::Url;

use super::messages::Candidates;
use super::CrawlError;
use super::CrawlFrontier;
use crate::checkpoint::QueueLog;
use crate::config::Config;
use crate::counters::{CrawlCounters, PageCounts};
use crate::distributed::session::Admitted;
use crate::extract::Extracted;
use crate::frontier::QueuedUrl;
use crate::near_duplicate::NearDuplicates;
use crate::normalize::{Link, Normalizer};
use crate::scope::{OutOfScope, Scope, SiteMemo};
use crate::seen::{SeenBackend, SeenSet};

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
    /// On a page that is a near-duplicate of an earlier page of its host
    /// ([`crate::near_duplicate`]).
    NearDuplicate,
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
    pub(crate) fn count(self, counters: &mut PageCounts, n: u64) {
        if n == 0 {
            return;
        }
        let counter = match self {
            Refusal::NotHttp => &mut counters.links_not_http,
            Refusal::Invalid => &mut counters.links_invalid,
            Refusal::Nofollow => &mut counters.links_nofollow,
            Refusal::TooDeep => &mut counters.links_too_deep,
            Refusal::OverPageCap => &mut counters.links_over_page_cap,
            Refusal::NearDuplicate => &mut counters.links_near_duplicate,
            Refusal::OutOfScope(reason) => return counters.add_out_of_scope(reason, n),
            Refusal::Seen => &mut counters.links_seen,
            Refusal::OverMaxUrls => &mut counters.links_over_cap,
            Refusal::HostCap => &mut counters.links_host_cap,
            Refusal::RedirectLimit => &mut counters.redirects_over_limit,
        };
        *counter += n;
    }
}

/// The screening half: shared, read-only, used from any thread.
pub(crate) struct Admission {
    normalizer: Normalizer,
    scope: Arc<Scope>,
    seen: Arc<dyn SeenBackend>,
    max_depth: u32,
    max_redirects: u32,
    follow_nofollow: bool,
    follow_canonical: bool,
    /// Page digests seen per host: the trap rule that replaces depth.
    near_duplicates: NearDuplicates,
    /// The seen-set is exact (`[seen] exact`): its "maybe seen" is confirmed per page.
    exact: bool,
}

impl Admission {
    pub(crate) fn new(
        config: &Config,
        normalizer: Normalizer,
        scope: Arc<Scope>,
        seen: Arc<dyn SeenBackend>,
    ) -> Admission {
        Admission {
            normalizer,
            scope,
            max_depth: config.crawl.max_depth,
            max_redirects: config.crawl.max_redirects,
            follow_nofollow: config.crawl.follow_nofollow,
            follow_canonical: config.crawl.follow_canonical,
            near_duplicates: NearDuplicates::default(),
            exact: seen.is_exact(),
            seen,
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
            extracted.links.push(canonical.clone().into());
        }
        // Recorded in canonical form when it has one; a `mailto:` canonical as it is.
        let _ = self.normalizer.canonicalize(&mut canonical);
        Some(canonical.as_str().to_string())
    }

    /// The links of a page at `depth` (its own depth + 1), as extracted; `header_nofollow`
    /// is the response's `X-Robots-Tag`. `scratch` is the caller's, reused from page to
    /// page. Returns the candidates in page order; counts in `c` (the page's).
    pub(crate) fn screen_links(
        &self,
        extracted: Extracted,
        depth: u32,
        header_nofollow: bool,
        scratch: &mut ScreenScratch,
        c: &mut PageCounts,
    ) -> Candidates {
        let found = Self::count_extracted(&extracted, c);
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
        let (mut not_http, mut seen) = (0u64, 0u64);
        // Most links pass normalization and scope (the seen-set drops them after): room for
        // all, rather than a reallocation and copy per doubling.
        candidates.urls.reserve_exact(extracted.links.len());
        for link in extracted.links {
            match self.screen_marked(link, false, scratch) {
                Ok(url) => candidates.urls.push(url),
                Err(Refusal::NotHttp) => not_http += 1,
                Err(Refusal::Seen) => seen += 1,
                Err(other) => other.count(c, 1),
            }
        }
        seen += self.drop_seen(&mut candidates.urls);
        Refusal::NotHttp.count(c, not_http);
        Refusal::Seen.count(c, seen);
        candidates
    }

    /// Drops the page's candidates that are already seen, in one batch at the end of the
    /// page rather than one lookup per link as it is screened: the seen-set's batch lookup
    /// overlaps the cache misses of all of them ([`crate::seen::SeenSet::contains_batch`]).
    /// With an exact seen-set (`[seen] exact`) the filter's "maybe seen" is then confirmed
    /// in one more batch, and only those certainly seen are dropped. Then the page's
    /// repeats of a URL it offered already ([`drop_repeats`]). Returns how many in all.
    fn drop_seen(&self, urls: &mut Vec<Link>) -> u64 {
        self.drop_seen_by_the_set(urls) + drop_repeats(urls)
    }

    /// The seen-set's part of [`Self::drop_seen`].
    fn drop_seen_by_the_set(&self, urls: &mut Vec<Link>) -> u64 {
        if urls.is_empty() {
            return 0;
        }
        let keys: Vec<&[u8]> = urls.iter().map(|u| u.as_str().as_bytes()).collect();
        let mut seen = Vec::with_capacity(keys.len());
        self.seen.contains_batch(&keys, &mut seen);
        if self.exact {
            let maybe: Vec<usize> = (0..keys.len()).filter(|&i| seen[i]).collect();
            if maybe.is_empty() {
                return 0;
            }
            let asked: Vec<&[u8]> = maybe.iter().map(|&i| keys[i]).collect();
            let mut held = Vec::with_capacity(asked.len());
            self.seen.confirm_seen_batch(&asked, &mut held);
            for (&i, &held) in maybe.iter().zip(&held) {
                seen[i] = held;
            }
        }
        drop(keys);
        let dropped = seen.iter().filter(|&&s| s).count() as u64;
        if dropped != 0 {
            let mut i = 0;
            urls.retain(|_| {
                i += 1;
                !seen[i - 1]
            });
        }
        dropped
    }

    /// Counts what extraction found and already refused; returns the resolved links' count.
    fn count_extracted(extracted: &Extracted, c: &mut PageCounts) -> u64 {
        let found = extracted.links.len() as u64;
        c.links_found += found;
        Refusal::Nofollow.count(c, extracted.nofollow_skipped as u64);
        Refusal::Invalid.count(c, extracted.invalid as u64);
        Refusal::OverPageCap.count(c, extracted.over_limit as u64);
        // Refused before being built, for the same reason the scope would refuse them.
        Refusal::OutOfScope(OutOfScope::TooLong).count(c, extracted.too_long as u64);
        found
    }

    /// `parent`, when the page at `page` (whose digest is `digest`) is the same as that
    /// page of its host that linked it, but for its digits: then `page` is a near-duplicate,
    /// counted here, and its links are to be passed to [`Self::refuse_near_duplicate`]
    /// instead of [`Self::screen_links`].
    pub(crate) fn near_duplicate_of(
        &self,
        page: &Url,
        parent: Option<&str>,
        digest: u64,
        c: &mut PageCounts,
    ) -> Option<String> {
        let parent = self.near_duplicates.check(page.as_str(), parent, digest)?;
        c.near_duplicate_pages += 1;
        Some(parent)
    }

    /// Rebuilds the near-duplicate memory of a resumed crawl from its records.
    pub(crate) fn learn_near_duplicates(&self, pages: &std::path::Path) {
        match self.near_duplicates.learn_from_records(pages) {
            Ok(n) => tracing::debug!(pages = n, "resume: near-duplicate digests read back"),
            // Costs a few trap pages, not the crawl.
            Err(err) => tracing::warn!(
                "resume: cannot read {} back for near-duplicate digests: {err}",
                pages.display()
            ),
        }
    }

    /// The links of a near-duplicate page: counted like any page's, none followed.
    pub(crate) fn refuse_near_duplicate(
        &self,
        extracted: Extracted,
        c: &mut PageCounts,
    ) -> Candidates {
        let found = Self::count_extracted(&extracted, c);
        Refusal::NearDuplicate.count(c, found);
        Candidates::default()
    }

    /// The target of a redirect from `from` (at `depth`, `hops` redirects into its chain) to
    /// `location`. Returns the canonical target when there is one (the record's
    /// `final_url`, followed or not), and the candidate or the reason the record gives for
    /// not following it; a refusal is counted in `c` (the redirect's).
    pub(crate) fn screen_redirect(
        &self,
        from: &Url,
        location: &str,
        (depth, hops): (u32, u32),
        c: &mut PageCounts,
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
            Refusal::OutOfScope(reason).count(c, 1);
            let why = format!("redirect target not followed: {reason}");
            return (Some(target), Err(why));
        }
        if hops >= self.max_redirects {
            Refusal::RedirectLimit.count(c, 1);
            let why = format!(
                "redirect chain longer than max_redirects = {}",
                self.max_redirects
            );
            return (Some(target), Err(why));
        }
        let candidates = Candidates {
            urls: vec![Link::from(target.clone())],
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
    /// like pages and the fetch task knows to read them as sitemaps. Counts in `c`.
    pub(crate) fn screen_discovered<'a>(
        &self,
        base: &Url,
        locs: impl IntoIterator<Item = &'a str>,
        (as_sitemaps, depth): (bool, u32),
        c: &mut PageCounts,
    ) -> Candidates {
        let mut candidates = Candidates {
            urls: Vec::new(),
            depth,
            redirect_hops: 0,
        };
        let mut scratch = ScreenScratch::default();
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
            match self.screen_marked(url.into(), as_sitemaps, &mut scratch) {
                Ok(url) => candidates.urls.push(url),
                Err(refusal) => refusal.count(c, 1),
            }
        }
        let seen = self.drop_seen(&mut candidates.urls);
        Refusal::Seen.count(c, seen);
        c.links_found += found;
        candidates
    }

    /// Normalization and scope: the per-URL rules that need no single writer and no other
    /// URL. The URL is marked as a sitemap after normalization if `sitemap`. The caller
    /// gathers the accepted ones for [`Self::drop_seen`] (certainly seen, and repeated on
    /// the page).
    fn screen_marked(
        &self,
        mut url: Link,
        sitemap: bool,
        scratch: &mut ScreenScratch,
    ) -> Result<Link, Refusal> {
        self.normalizer
            .canonicalize_link(&mut url)
            .map_err(|_| Refusal::NotHttp)?;
        self.scope
            .check_link(&url, &mut scratch.site)
            .map_err(Refusal::OutOfScope)?;
        if sitemap {
            super::sitemaps::mark(&mut url);
        }
        // The seen-set and the page's repeats are asked once per page, for all of its
        // candidates: `drop_seen`.
        Ok(url)
    }
}

/// Drops the URLs `urls` holds a second time, keeping each first one in its place; returns
/// how many. It runs on what the seen-set left of a page, a few URLs as a rule (a page's
/// links are mostly known already, its repeats among them), so it compares them pairwise,
/// and hashes only a longer list (a page of many new links): the check per link it replaced
/// (a keyed hash of every link of the page, before the seen-set) cost more than the rest of
/// the page's screening. A repeat is counted as seen, as it was: the first of it is queued
/// or is seen.
fn drop_repeats(urls: &mut Vec<Link>) -> u64 {
    /// Up to this many URLs, pairwise comparison is the cheaper.
    const PAIRWISE_MAX: usize = 16;
    if urls.len() < 2 {
        return 0;
    }
    let first: Vec<bool> = if urls.len() <= PAIRWISE_MAX {
        urls.iter()
            .enumerate()
            .map(|(i, url)| {
                !urls
                    .get(..i)
                    .is_some_and(|before| before.iter().any(|b| b.as_str() == url.as_str()))
            })
            .collect()
    } else {
        // std's keyed hash: a hostile page cannot choose URLs that collide.
        let mut offered = HashSet::with_capacity(urls.len());
        urls.iter()
            .map(|url| offered.insert(url.as_str()))
            .collect()
    };
    let repeats = first.iter().filter(|&&first| !first).count();
    if repeats > 0 {
        let mut i = 0;
        urls.retain(|_| {
            i += 1;
            first.get(i - 1).copied().unwrap_or(true)
        });
    }
    repeats as u64
}

/// What screening keeps from URL to URL, reused from page to page by each thread that
/// screens: the scope's memo of the last hosts' site rules.
#[derive(Debug, Default)]
pub(crate) struct ScreenScratch {
    site: SiteMemo,
}

/// The acceptance half: owned by the dispatcher, the single writer of the seen-set and of
/// the accepted count.
pub(crate) struct Acceptance {
    seen: Arc<dyn SeenBackend>,
    counters: Arc<CrawlCounters>,
    max_urls: u64,
    max_pages_per_host: u64,
    /// `[[site]]` sections: a matching host's `max_pages` replaces `max_pages_per_host`.
    sites: crate::site::Sites,
    /// Reused buffer of the seen-set's batch insert.
    batch_out: Vec<bool>,
    /// The seen-set's estimated false-positive rate, read again every 1/4,096 of
    /// `max_urls` accepted.
    fpp: FppEstimate,
}

/// The seen-set's estimated false-positive rate, read again after every 1/4,096 of
/// `max_urls` accepted rather than for each page: the estimate sums a series of powers
/// (`seen::plan::blocked_fpp_at_load`), 1.9% of the driver's samples when read per page,
/// and it moves by a 4,096th of its course between two reads (the course from 0 at an
/// empty set to the planned rate at `max_urls`), which is what the page's count of
/// estimated false positives can be off by.
struct FppEstimate {
    fpp: f64,
    /// URLs accepted since `fpp` was read (`refresh_every` at first: read at the first call).
    since: u64,
    refresh_every: u64,
}

impl FppEstimate {
    fn new(max_urls: u64) -> FppEstimate {
        let refresh_every = (max_urls / 4096).max(1);
        FppEstimate {
            fpp: 0.0,
            since: refresh_every,
            refresh_every,
        }
    }

    /// The estimate for `queued` URLs just accepted, read from `seen` when due.
    fn after(&mut self, seen: &dyn SeenBackend, queued: u64) -> f64 {
        self.since += queued;
        if self.since >= self.refresh_every {
            self.fpp = seen.stats().estimated_fpp;
            self.since = 0;
        }
        self.fpp
    }
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
            sites: crate::site::Sites::new(&config.site).unwrap_or_default(),
            batch_out: Vec::new(),
            fpp: FppEstimate::new(config.crawl.max_urls.0),
        }
    }

    /// Inserts candidates into the seen-set and queues the new ones (queue log first, then
    /// the frontier), never past `max_urls` or `max_pages_per_host`. Returns how many were
    /// queued (added to `accepted` at once: it is what `max_urls` is checked against); the
    /// refusals are counted in `counts`, the finding page's.
    pub(crate) fn accept<F: CrawlFrontier>(
        &mut self,
        frontier: &mut F,
        mut queue_log: Option<&mut QueueLog>,
        (candidates, parent): (Candidates, Option<String>),
        counts: &mut PageCounts,
    ) -> Result<u64, CrawlError> {
        let Candidates {
            urls,
            depth,
            redirect_hops,
        } = candidates;
        if urls.is_empty() {
            return Ok(0);
        }
        // One shared text for the page's links (see `QueuedUrl::parent`).
        let parent: Option<Arc<str>> = parent.map(Arc::from);
        let c = self.counters.clone();
        let accepted = CrawlCounters::get(&c.accepted);
        let room = self.max_urls.saturating_sub(accepted) as usize;
        let host_cap = self.max_pages_per_host;
        // The link's own string becomes the queued URL's: no copy per queued URL.
        let queue = |frontier: &mut F, log: &mut Option<&mut QueueLog>, url: Link| {
            // Most canonical links start with their host key: then it is not copied out.
            let key_len = crate::frontier::plain_host_key_len(&url);
            let key = if key_len.is_none() {
                url.host_key()
            } else {
                String::new()
            };
            let item = QueuedUrl::new(url.into_string(), depth, parent.clone(), redirect_hops);
            if let Some(log) = log.as_deref_mut() {
                // Not logged, the URL would be in neither the checkpoint nor the log, and a
                // crash would forget it: the crawl stops instead, its last checkpoint intact
                // (the error says to --resume).
                log.append(&item)?;
            }
            match key_len {
                Some(len) => frontier.push_keyed_by_prefix(len, item)?,
                None => frontier.push(&key, item)?,
            }
            Ok::<(), CrawlError>(())
        };
        let mut queued = 0u64;
        let sites = &self.sites;
        let cap_of = |url: &Link| {
            url.host_str()
                .and_then(|host| sites.for_host(host))
                .and_then(|s| s.max_pages)
                .unwrap_or(host_cap)
        };
        if room < urls.len() || host_cap > 0 || sites.caps_pages() {
            // Where a cap can bind, URLs are taken one by one in page order, each cap
            // checked before the seen-set is touched.
            let (mut considered, offered) = (0, urls.len());
            for url in urls {
                if queued as usize == room {
                    break;
                }
                considered += 1;
                let cap = cap_of(&url);
                if cap > 0 && frontier.host_total_queued(&url.host_key()) >= cap {
                    Refusal::HostCap.count(counts, 1);
                    continue;
                }
                if self.seen.insert_new(url.as_str().as_bytes()) {
                    queued += 1;
                    queue(frontier, &mut queue_log, url)?;
                } else {
                    Refusal::Seen.count(counts, 1);
                }
            }
            Refusal::OverMaxUrls.count(counts, (offered - considered) as u64);
        } else {
            // The common case: one batch per page, hashed first and prefetched.
            let keys: Vec<&[u8]> = urls.iter().map(|u| u.as_str().as_bytes()).collect();
            let mut fresh = std::mem::take(&mut self.batch_out);
            self.seen.insert_new_batch(&keys, &mut fresh);
            drop(keys);
            // Most candidates are new: their hosts' records are fetched together first.
            frontier.prefetch_hosts(&urls);
            let mut seen = 0;
            for (url, &is_new) in urls.into_iter().zip(&fresh) {
                if is_new {
                    queued += 1;
                    queue(frontier, &mut queue_log, url)?;
                } else {
                    seen += 1;
                }
            }
            Refusal::Seen.count(counts, seen);
            self.batch_out = fresh;
        }
        if queued > 0 && !self.seen.is_exact() {
            // Each new URL was a query that could have been a false positive (an exact
            // seen-set skips none).
            let fpp = self.fpp.after(&*self.seen, queued);
            counts.false_positive_micros += (fpp * queued as f64 * 1e6).round() as u64;
        }
        if queued > 0 {
            CrawlCounters::add(&c.accepted, queued);
        }
        Ok(queued)
    }
}

/// The candidates a distributed process's `cache` of the shared seen-set does not know, as
/// URLs to send to the shared admission (with their host keys); those it knows are counted
/// as seen in `counts` (the finding page's), as [`Acceptance::accept`] would.
pub(crate) fn unknown_to(
    cache: &SeenSet,
    candidates: Candidates,
    parent: Option<String>,
    counts: &mut PageCounts,
) -> Vec<(String, QueuedUrl)> {
    let mut items = Vec::new();
    let mut known = 0;
    let parent: Option<Arc<str>> = parent.map(Arc::from);
    for url in candidates.urls {
        if cache.contains(url.as_str().as_bytes()) {
            known += 1;
            continue;
        }
        let item = QueuedUrl::new(
            url.as_str().to_string(),
            candidates.depth,
            parent.clone(),
            candidates.redirect_hops,
        );
        items.push((url.host_key(), item));
    }
    Refusal::Seen.count(counts, known);
    items
}

/// The shared admission's answers (Redis's `admit.lua`, for a distributed process) for a
/// page's `items`, counted in `counts` as [`Acceptance::accept`] counts its own refusals, and
/// the URLs the shared seen-set now holds put in the process's `cache` (links to them need no
/// round trip). Returns how many were queued.
pub(crate) fn count_shared(
    cache: &SeenSet,
    items: &[(String, QueuedUrl)],
    answers: &[Admitted],
    counts: &mut PageCounts,
) -> u64 {
    let mut queued = 0;
    for ((_, item), answer) in items.iter().zip(answers) {
        match answer {
            Admitted::Queued => {
                cache.insert_new(item.url.as_bytes());
                queued += 1;
            }
            Admitted::Seen => {
                cache.insert_new(item.url.as_bytes());
                Refusal::Seen.count(counts, 1);
            }
            Admitted::OverMaxUrls => Refusal::OverMaxUrls.count(counts, 1),
            Admitted::HostCap => Refusal::HostCap.count(counts, 1),
        }
    }
    queued
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(texts: &[&str]) -> Vec<Link> {
        texts
            .iter()
            .map(|t| Url::parse(t).unwrap().into())
            .collect()
    }

    #[test]
    fn repeats_are_dropped_and_first_ones_kept_in_place() {
        let texts = |urls: &[Link]| {
            urls.iter()
                .map(|u| u.as_str().to_string())
                .collect::<Vec<_>>()
        };
        // Both ways of finding them: pairwise, and hashed past `PAIRWISE_MAX`.
        for n in [3, 40] {
            let mut offered: Vec<String> = (0..n).map(|i| format!("http://a.test/{i}")).collect();
            offered.insert(1, "http://a.test/0".into());
            offered.push("http://a.test/2".into());
            offered.push("http://a.test/0".into());
            let refs: Vec<&str> = offered.iter().map(String::as_str).collect();
            let mut list = urls(&refs);
            assert_eq!(drop_repeats(&mut list), 3, "{n} URLs");
            let want: Vec<String> = (0..n).map(|i| format!("http://a.test/{i}")).collect();
            assert_eq!(texts(&list), want, "{n} URLs");
        }
        let mut one = urls(&["http://a.test/"]);
        assert_eq!(drop_repeats(&mut one), 0);
        assert_eq!(one.len(), 1);
    }

    #[test]
    fn the_fpp_estimate_is_read_again_every_4096th_of_max_urls() {
        let max_urls = 40_960;
        let seen = SeenSet::new(crate::seen::Plan::for_fpp(max_urls, 0.01).unwrap()).unwrap();
        let mut estimate = FppEstimate::new(max_urls);
        assert_eq!(estimate.after(&seen, 1), 0.0, "read at once: an empty set");
        let keys: Vec<String> = (0..20_000).map(|i| format!("http://a.test/{i}")).collect();
        for key in &keys {
            seen.insert_new(key.as_bytes());
        }
        let now = seen.stats().estimated_fpp;
        assert!(now > 0.0);
        // 10 URLs a read: the 9 URLs since the last one are not yet due.
        assert_eq!(estimate.after(&seen, 9), 0.0);
        assert_eq!(estimate.after(&seen, 1), now);
        // A tiny crawl reads it for every page.
        let mut tiny = FppEstimate::new(100);
        assert_eq!(tiny.after(&seen, 1), now);
        seen.insert_new(b"http://a.test/one-more");
        assert_eq!(tiny.after(&seen, 1), seen.stats().estimated_fpp);
    }
}
