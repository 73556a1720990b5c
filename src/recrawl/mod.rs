//! Keeping a collection fresh: what earlier generations of a crawl found for each URL, and
//! what the next generation asks with (`crawler recrawl`; the source of work is
//! `crate::crawl::recrawl_source`).
//!
//! # Generations
//! A crawl directory holds generations of one collection: the first crawl is generation 1,
//! each `crawler recrawl --out DIR` the next. Their records share `OUT/pages.jsonl`, which
//! stays the journal (each record of generation ≥ 2 carries `"generation"`), and their
//! archive files share `OUT/warc/`.
//!
//! # Where a recrawl's state lives: the state store
//! What a recrawl knows of each URL is its `crate::state_store::UrlState` in the per-URL
//! state store on disk (`OUT/state/urls/`), the fold of its records in order
//! (`state_store::state_after`): validators, payload digest and the record a revisit refers
//! to, change counts, the schedule's interval and next due time. A recrawl opens it brought
//! up to the journal (rebuilt from `pages.jsonl` if missing, e.g. after a first crawl with
//! `[state] enabled = false`; the records after its durable point re-applied otherwise),
//! writes it as its own records are written and makes it durable with each checkpoint (the
//! store's sink), so a `kill -9` resumes it like the rest of the crawl. Nothing of it is kept
//! in memory per URL: fetches look their URL up in the store (`KnownUrls`); a generation's
//! due URLs come out of one pass over the store sorted by due time on disk
//! (`state_store::DueOrder`) and go into the frontier, on disk, in batches. What stays in
//! RAM per URL: nothing for a one-shot recrawl (the Bloom filter's bits aside, as in any
//! crawl), and 16 bytes (due time and fingerprint) for each URL waiting in a continuous
//! recrawl's schedule. Measured (`cargo bench --bench state_store`, its "recrawl start"
//! line; 10^6 URLs, debug build): 16.0 bytes a URL at the start (the due order's one chunk
//! of 16-byte pairs; past 2^20 URLs the chunks go to disk, so ~16 MiB in all plus 64 KiB a
//! chunk), against 886 bytes a URL for every state in a map by URL, which is how this
//! module held the collection before (its `History`, folded from the whole journal).
//!
//! # Which URLs a generation fetches
//! - **Due**: every URL recorded before that is not *retired* and was last fetched at least
//!   `[recrawl] min_interval` ago (with `min_interval = 0`, all of them), the one fetched
//!   longest ago first; with `--continuous`, a URL is due when its adaptive interval
//!   ([`schedule`]) has passed since its last fetch, or at the `<lastmod>` a sitemap read
//!   since gives it if that is sooner, and is fetched again each time it falls due.
//! - **Retired**: a URL answering 404 or 410 in two generations in a row is not fetched
//!   again (one such answer may be a hiccup; two are a page gone).
//! - **New links** are admitted as in any crawl: each generation has a fresh seen-set in
//!   which the URLs it takes on (the due ones first) are inserted as they are queued, so a
//!   page's links to URLs of the collection are seen, and those to new URLs are new. Why a
//!   fresh filter rather than one that forgets: a generation is bounded (it ends), so a fresh
//!   Bloom filter sized for it has its promised false-positive rate, which a decaying filter
//!   never states; and it needs nothing that a crash could lose (resume restores it from the
//!   generation's checkpoint like any crawl's).
//! - **`max_urls`** bounds each generation: the URLs it takes on, the due ones counted first
//!   (one per host first, the generation's seeds, which give its scope the collection's
//!   hosts; then the others, the one fetched longest ago first), then new links. A
//!   collection that outgrew it refreshes the `max_urls` URLs it fetched longest ago.
//!
//! # What a `304` admits
//! Nothing: a `304 Not Modified` has no body, and the links of the page as it was were
//! admitted when it was fetched whole (the URLs it linked are in the collection, due on
//! their own schedule). Re-extracting them from the archived copy would cost a read of the
//! archive per page for links the collection already has.
//!
//! # Validators
//! A URL is asked again with the `ETag` and `Last-Modified` of its last response that had
//! them, verbatim (`If-None-Match`, `If-Modified-Since`); a `304` refers (in the archive)
//! to the record holding the payload it stands for: see `crate::warc`.

//!
//! # Measured (2026-11-26, debug build on the shared 2-core machine; `scripts/recrawl-measure`)
//! - 30,000 pages (20 hosts, 16 KiB synthetic pages), crawl, 10% changed, recrawl: 3,088
//!   changed pages all fetched whole (200); of the 26,912 unchanged, 25,578 answered 304
//!   (95.0%; the rest are the host that sends no validator). Crawl 214 s, recrawl 186 s.
//! - What a 304 costs in the archive: 1,329 bytes (2,000 pages of 16 KiB, `scripts/recrawl-measure
//!   once` with `PAGES=2000 FEATURES=none,conditional PAGE_BYTES=16384`): its request record
//!   656 (467 of WARC header, 162 of HTTP request) and its revisit 673 (646 of WARC header,
//!   an empty block since the pywb fix, which took ~300 off), both under the 1 KiB below
//!   which the archive stores records uncompressed. Pages of real size (`real_size`, mean
//!   ~240 KB): 53-59x fewer archive bytes for the pages answered 304 than the first crawl
//!   wrote for them; the plain 16 KiB synthetic pages compress to 1,856 bytes (+656 of
//!   request), so there a 304 saves 1.8x. What would be left to cut: deflating the small
//!   records (request 454, revisit 420 at level 1: 874 a 304, 2.9x) and not archiving the
//!   request of a 304 (420, 6.0x); 20x is out of reach at this page size, whose compressed
//!   payload is smaller than 20 WARC headers' worth. Neither is done: small records are
//!   stored for the archive's CPU (`crate::warc::record`), and the request is the record of
//!   what was asked (the validators).
//! - `--continuous` for 600 s over 3,000 pages (10% changing every 20 s, 10% every 120 s,
//!   80% never; min_interval 10 s, max_interval 600 s): 21.9, 5.9 and 3.5 requests a page
//!   (the first crawl's included).
//! - pywb 2.10 replays the page for each kind of record: the original response, an
//!   identical-payload revisit and a server-not-modified revisit (e2e
//!   `recrawl::pywb_replays_the_page_of_each_kind_of_record`). The last replayed as an
//!   empty 304 while its block held the 304's head; it is empty now (see
//!   `crate::warc::record`'s `not_modified_member`).

pub mod schedule;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::fetch::Validators;
use crate::state_store::{StateStore, StateStoreError, UrlState};
use crate::warc::record::{parse_digest_label, NotModified, Original};

/// Why a recrawl cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RecrawlError {
    #[error("{}: cannot read", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no records: nothing to recrawl (crawl it first)", path.display())]
    Empty { path: PathBuf },
    #[error("{}: no URL is due ({known} known, {retired} retired; the next falls due in {next_in}): nothing to recrawl yet (recrawl.min_interval = {min_interval:?})", dir.display())]
    NothingDue {
        dir: PathBuf,
        known: usize,
        retired: usize,
        next_in: String,
        min_interval: String,
    },
    #[error("generation marker")]
    Marker(#[from] crate::output::OutputError),
    #[error("state store")]
    Store(#[from] StateStoreError),
    #[error("{}: holds an unfinished plain crawl, not a recrawl: resume it with `crawler --resume --out {}` (or discard it with --fresh), then recrawl", dir.display(), dir.display())]
    NotARecrawl { dir: PathBuf },
}

/// `OUT/generation`: the number of the latest generation started in OUT (absent: only the
/// first crawl). Written before a generation's first checkpoint, so that a resume after a
/// crash knows which generation it goes on with, and that a plain `--resume` can refuse
/// to go on with a recrawl as if it were a crawl.
pub fn generation_path(out: &Path) -> PathBuf {
    out.join("generation")
}

/// The latest generation started in `out`, if a recrawl ever started there.
pub fn started_generation(out: &Path) -> Option<u32> {
    std::fs::read_to_string(generation_path(out))
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

pub(crate) fn start_generation(out: &Path, generation: u32) -> Result<(), RecrawlError> {
    let path = generation_path(out);
    crate::output::write_atomically(&path, format!("{generation}\n").as_bytes())?;
    Ok(())
}

/// What a 304 for `state` stands for (see `crate::warc::record::NotModified`).
fn not_modified(state: &UrlState) -> NotModified {
    NotModified {
        payload_digest: state.payload_digest.as_deref().and_then(parse_digest_label),
        original: match (&state.warc_record_id, &state.warc_date) {
            (Some(record_id), Some(date)) => Some(Original {
                target_uri: state.url.clone(),
                date: date.clone(),
                record_id: record_id.clone(),
            }),
            _ => None,
        },
    }
}

/// The collection's URLs as the fetch tasks see them: each fetch looks its URL up in the
/// state store (one lookup in the memtable or one 4 KiB block of a run), which a recrawl's
/// own records keep up to date, so a continuous recrawl asks again with what the last
/// fetch found.
pub(crate) struct KnownUrls {
    store: Arc<StateStore>,
}

impl KnownUrls {
    pub(crate) fn new(store: Arc<StateStore>) -> KnownUrls {
        KnownUrls { store }
    }

    pub(crate) fn store(&self) -> &Arc<StateStore> {
        &self.store
    }

    /// What a fetch of `url` asks with, and what a 304 for it stands for. A store that
    /// cannot be read makes the fetch unconditional (it is named in the log): the page comes
    /// back whole, which costs bytes, not correctness.
    pub(crate) fn asking(&self, url: &str) -> Option<(Validators, NotModified)> {
        let state = match self.store.get(url) {
            Ok(state) => state?,
            Err(e) => {
                tracing::warn!("recrawl: {url}: asked without validators: {e}");
                return None;
            }
        };
        let validators = Validators {
            etag: state.etag.clone(),
            last_modified: state.last_modified.clone(),
        };
        Some((validators, not_modified(&state)))
    }
}

impl std::fmt::Debug for KnownUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownUrls({})", self.store.dir().display())
    }
}

pub(crate) fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_304_stands_for_the_payload_and_record_of_the_last_response() {
        let state = UrlState {
            url: "http://a.test/".into(),
            payload_digest: Some("sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".into()),
            warc_record_id: Some("<urn:uuid:1>".into()),
            warc_date: Some("2026-01-01T00:00:00Z".into()),
            ..UrlState::default()
        };
        let nm = not_modified(&state);
        assert!(nm.payload_digest.is_some());
        let original = nm.original.unwrap();
        assert_eq!(original.target_uri, "http://a.test/");
        assert_eq!(original.record_id, "<urn:uuid:1>");
        let bare = not_modified(&UrlState::default());
        assert!(bare.payload_digest.is_none() && bare.original.is_none());
    }
}
