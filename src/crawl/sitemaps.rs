//! Sitemaps in the crawl (`crawl.sitemaps`, off by default): where they come from, how they
//! are fetched, what is admitted from them and how they are recorded. Reading one sitemap
//! file is [`crate::sitemap`]'s job.
//!
//! # Where sitemaps come from
//! - Each host's robots.txt: its `Sitemap:` lines (collected by the robots parser from
//!   anywhere in the file) and, for the host's own robots.txt (not one reached by a
//!   redirect to another host), the host's `/sitemap.xml`. They are found when robots.txt
//!   is fetched (`super::fetch_task::robots_task`), at depth 0 with the robots.txt as
//!   parent, and reach the driver as a `Completion::Discovered` sent before the
//!   robots.txt's own completion.
//! - Without `politeness.respect_robots` no robots.txt is read, so only the seeds' hosts'
//!   `/sitemap.xml` are queued, with the seeds.
//! - A sitemap index's entries are sitemaps, one level deeper.
//!
//! # How they are fetched: as queued URLs, marked
//! A sitemap is an accepted URL like a page, marked by the fragment [`MARK`]
//! (`http://host/sitemap.xml#sitemap`). Canonical URLs never have a fragment (the normalizer
//! drops it), so the mark cannot collide with a page, and it travels through everything that
//! carries a URL unchanged: the seen-set, the queue log, the on-disk frontier, checkpoints
//! and resume, the distributed frontier. So a sitemap is handed out by the frontier under
//! its host's rate limit, concurrency cap and robots.txt rules (a disallowed sitemap is
//! recorded as disallowed, not fetched), passes the request gate (`RequestKind::Sitemap`:
//! the page rules) and is retried like a page; the fragment is never sent (it is not part
//! of an HTTP request target). A redirect's target stays a sitemap.
//!
//! # What is admitted
//! Every `<loc>` goes through the crawl's one admission step
//! (`Admission::screen_discovered`): resolved, normalized, checked against the scope rules
//! (an off-site entry is refused and counted like an off-site link), `max_depth` (a page a
//! sitemap lists is one level deeper than the sitemap) and the seen-set.
//!
//! # How a sitemap is accounted
//! - It counts against `max_urls` and `max_pages_per_host` (it is a request the crawl makes,
//!   and the cap must bound requests).
//! - It gets one `pages.jsonl` record like a page (`url` with the `#sitemap` mark, status,
//!   content type, bytes; `links` = entries read, `new_links` = URLs admitted) plus a
//!   `sitemap` field: kind, entries, `cut` (past 50,000), `gzip`, `over_size` (over 50 MiB
//!   uncompressed) and `lastmod`: the `<lastmod>` of every entry that has one. `<lastmod>`
//!   is kept there, with its sitemap, rather than in the listed pages' records, because a
//!   URL's record is written when it is fetched, possibly after a resume, and the queue
//!   carries no per-URL metadata.
//! - Counters: `sitemaps_read`, `sitemap_entries`, `sitemap_entries_cut`, `sitemap_errors`
//!   (a problem is also the record's `error`, with the entries read before it taken).

use std::sync::Arc;

use url::Url;

use super::admission::Admission;
use super::messages::{Candidates, Completion};
use crate::counters::PageCounts;
use crate::output::{PageRecord, SitemapRecord};
use crate::robots::RobotsRules;
use crate::sitemap;

/// The fragment that marks a queued URL as a sitemap.
pub(crate) const MARK: &str = "sitemap";

/// Marks `url` (already normalized) as a sitemap.
pub(crate) fn mark(url: &mut crate::normalize::Link) {
    url.set_fragment(Some(MARK));
}

/// Whether a queued URL is a sitemap.
pub(crate) fn is_sitemap(url: &Url) -> bool {
    url.fragment() == Some(MARK)
}

/// The sitemaps a host's robots.txt points to (see the module doc), as a completion for the
/// driver; `None` when there are none to admit. `robots_url` is the URL that answered,
/// `hops` the redirects before it.
pub(crate) fn from_robots(
    admission: &Admission,
    robots_url: &Url,
    hops: u32,
    rules: &RobotsRules,
) -> Option<Completion> {
    let mut locs: Vec<&str> = rules.sitemaps.iter().map(String::as_str).collect();
    if hops == 0 {
        locs.push("/sitemap.xml");
    }
    let mut counts = Box::<PageCounts>::default();
    let candidates = admission.screen_discovered(robots_url, locs, (true, 0), &mut counts);
    (!candidates.urls.is_empty()).then(|| Completion::Discovered {
        candidates,
        parent: robots_url.as_str().to_string(),
        counts,
    })
}

/// The seeds' hosts' `/sitemap.xml` (used without `respect_robots`), at depth 0; counted in
/// `counts`.
pub(crate) fn for_seeds(
    admission: &Admission,
    seeds: &[Url],
    counts: &mut PageCounts,
) -> Candidates {
    let mut all = Candidates::default();
    for seed in seeds {
        let found = admission.screen_discovered(seed, ["/sitemap.xml"], (true, 0), counts);
        all.urls.extend(found.urls);
    }
    all
}

/// Reads a fetched sitemap (`url`, queued at `depth`) into its record and the candidates to
/// admit. `record.truncated` says the body was cut at the fetch cap ([`sitemap::MAX_BYTES`]:
/// a plain or transfer-compressed sitemap over 50 MiB). Parsing runs on a blocking thread:
/// a 50 MiB sitemap is tens of milliseconds of CPU, which must not stall the fetch tasks'
/// reactor.
pub(crate) async fn read(
    admission: &Arc<Admission>,
    url: &Url,
    depth: u32,
    body: Vec<u8>,
    record: &mut PageRecord,
) -> Candidates {
    let parsed = tokio::task::spawn_blocking(move || sitemap::parse(&body)).await;
    let mut parsed = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            record.counts.panics += 1;
            record.error = Some(format!("crawler bug: reading the sitemap failed: {e}"));
            return Candidates::default();
        }
    };
    if record.truncated {
        // Cut by the fetch at the limit: the XML ends mid-document by our doing, as when the
        // parser stops a gzip stream at the limit.
        parsed.over_size = true;
        if matches!(parsed.error, Some(sitemap::SitemapError::Xml { .. })) {
            parsed.error = None;
        }
    }
    record.counts.sitemaps_read += 1;
    record.counts.sitemap_entries += parsed.entries.len() as u64;
    record.counts.sitemap_entries_cut += parsed.cut;
    if parsed.error.is_some() || parsed.over_size {
        record.counts.sitemap_errors += 1;
    }
    if let Some(error) = &parsed.error {
        record.error = Some(error.to_string());
    } else if parsed.over_size {
        record.error = Some(format!(
            "sitemap over {} bytes uncompressed: read that far",
            sitemap::MAX_BYTES
        ));
    }
    record.links = parsed.entries.len() as u64;
    let as_sitemaps = parsed.kind == Some(sitemap::Kind::Sitemapindex);
    let candidates = admission.screen_discovered(
        url,
        parsed.entries.iter().map(|e| e.loc.as_str()),
        (as_sitemaps, depth + 1),
        &mut record.counts,
    );
    record.sitemap = Some(Box::new(SitemapRecord {
        kind: parsed.kind,
        entries: parsed.entries.len() as u64,
        cut: parsed.cut,
        gzip: parsed.gzip,
        over_size: parsed.over_size,
        lastmod: parsed
            .entries
            .into_iter()
            .filter_map(|e| e.lastmod.map(|lastmod| (e.loc, lastmod)))
            .collect(),
    }));
    candidates
}
