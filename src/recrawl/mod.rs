//! Keeping a collection fresh: what earlier generations of a crawl found for each URL, and
//! what the next generation asks with (`crawler recrawl`; the source of work is
//! `crate::crawl::recrawl_source`).
//!
//! # Generations
//! A crawl directory holds generations of one collection: the first crawl is generation 1,
//! each `crawler recrawl --out DIR` the next. Their records share `OUT/pages.jsonl`, which
//! stays the journal (each record of generation ≥ 2 carries `"generation"`), and their
//! archive files share `OUT/warc/`. The state a recrawl needs is read back from that journal
//! ([`History::read`]): one [`UrlState`] per URL, the fold of its records in order. Kept in
//! memory here (about 200 bytes per URL); the per-URL state store on disk (`state_store`,
//! another branch) is meant to replace it behind the same fields.
//!
//! # Which URLs a generation fetches
//! - **Due** ([`History::due`]): every URL recorded before that is not *retired* and was
//!   last fetched at least `[recrawl] min_interval` ago (with `min_interval = 0`, all of
//!   them); with `--continuous`, a URL is due when its adaptive interval ([`schedule`]) has
//!   passed since its last fetch, or at the `<lastmod>` a sitemap read since gives it if
//!   that is sooner, and is fetched again each time it falls due.
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
//!   (in the order the collection first recorded them), then new links. A collection that
//!   outgrew it refreshes its first `max_urls` URLs.
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
//! - What a 304 costs in the archive: ~1,500 bytes (its request and revisit records). Pages
//!   of real size (`real_size`, mean ~240 KB): 53-55x fewer archive bytes for the pages
//!   answered 304 than the first crawl wrote for them (300 and 200 pages); the plain 16 KiB
//!   synthetic pages compress to ~2.4 KB, so there a revisit saves only 1.6x.
//! - `--continuous` for 600 s over 3,000 pages (10% changing every 20 s, 10% every 120 s,
//!   80% never; min_interval 10 s, max_interval 600 s): 21.9, 5.9 and 3.5 requests a page
//!   (the first crawl's included).
//! - pywb 2.10 replays the original response and an identical-payload revisit (200, the
//!   page), and a server-not-modified revisit as a 304 without body: it takes status and
//!   headers from the revisit record, whose block is the 304's head as WARC 1.1 says.

pub mod schedule;

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, SystemTime};

use crate::fetch::Validators;
use crate::output::{PageRecord, RecordKind};
use crate::warc::record::{parse_digest_label, NotModified, Original};

/// Why the journal could not be read back.
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

/// What the collection knows of one URL: the fold of its records so far. The field names
/// follow the state store's `UrlState`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct UrlState {
    /// The generation of its last record.
    pub(crate) generation: u32,
    /// Its last fetch (a record with a response), seconds since the epoch.
    pub(crate) fetched_at: f64,
    pub(crate) status: Option<u16>,
    pub(crate) validators: Validators,
    /// The payload digest of its last response with a payload (kept through 304s).
    pub(crate) payload_digest: Option<String>,
    /// Its last page's digest without digits (`crate::near_duplicate`): how a crawl without
    /// the archive (no payload digest) tells a changed page from an unchanged one.
    pub(crate) near_digest: Option<String>,
    /// Its last `response` record: what a 304 refers to when the digest index has forgotten.
    pub(crate) original: Option<Original>,
    /// Fetches that found it changed, and fetches that could tell (all but the first).
    pub(crate) changes: u32,
    pub(crate) checks: u32,
    /// The adaptive interval ([`schedule`]), seconds, and when it is due next.
    pub(crate) interval_secs: f64,
    pub(crate) next_due: f64,
    /// Generations in a row whose answer was 404 or 410.
    pub(crate) gone_generations: u32,
    /// When the collection first recorded it (its journal line number): the order due URLs
    /// are taken in.
    pub(crate) first_seen: u64,
}

impl UrlState {
    /// Whether a 404/410 in two generations in a row has retired it.
    pub(crate) fn retired(&self) -> bool {
        self.gone_generations >= 2
    }

    /// What a `304` for it stands for (see `crate::warc::record::NotModified`).
    pub(crate) fn not_modified(&self) -> NotModified {
        NotModified {
            payload_digest: self.payload_digest.as_deref().and_then(parse_digest_label),
            original: self.original.clone(),
        }
    }

    /// Folds in one of its records, of generation `generation`.
    pub(crate) fn observe(
        &mut self,
        record: &PageRecord,
        generation: u32,
        bounds: &schedule::Bounds,
    ) {
        let last_generation = self.generation;
        self.generation = generation;
        let Some(status) = record.status else {
            // Not fetched (robots.txt, a network error): nothing learnt about the page.
            return;
        };
        let fetched_at = humantime::parse_rfc3339_weak(&record.fetched_at)
            .or_else(|_| humantime::parse_rfc3339(&record.fetched_at))
            .unwrap_or_else(|_| SystemTime::now());
        let first = self.status.is_none();
        self.fetched_at = epoch_secs(fetched_at);
        self.status = Some(status);
        if status == 404 || status == 410 {
            if generation != last_generation || first {
                self.gone_generations += 1;
            }
        } else {
            self.gone_generations = 0;
        }
        let changed = match status {
            304 => Some(false),
            200..=299 => {
                let changed = match (&self.payload_digest, &record.payload_digest) {
                    (Some(before), Some(now)) => before != now,
                    _ => match (&self.near_digest, &record.near_digest) {
                        (Some(before), Some(now)) => before != now,
                        // Nothing to compare: a 200 to a conditional request is a change.
                        _ => true,
                    },
                };
                self.payload_digest = record.payload_digest.clone();
                self.near_digest = record.near_digest.clone();
                self.original = match record.warc.as_ref() {
                    Some(w) if w.record == "response" => Some(Original {
                        target_uri: record.url.clone(),
                        date: w.date.clone(),
                        record_id: w.id.clone(),
                    }),
                    // A revisit of an identical payload: the digest finds its original.
                    _ if !changed => self.original.take(),
                    _ => None,
                };
                Some(changed)
            }
            _ => None,
        };
        let fresh = Validators {
            etag: record.etag.clone(),
            last_modified: record.last_modified.clone(),
        };
        match status {
            // A 304 may carry updated validators; without them the old ones hold.
            304 if fresh.is_empty() => {}
            200..=299 | 304 => self.validators = fresh,
            _ => self.validators = Validators::default(),
        }
        self.interval_secs = match (first, changed) {
            (true, _) => bounds.first(fetched_at, record.last_modified.as_deref()),
            (false, Some(changed)) => {
                self.checks += 1;
                self.changes += u32::from(changed);
                bounds.next(self.interval_secs, changed)
            }
            (false, None) => self.interval_secs,
        };
        self.next_due = self.fetched_at + self.interval_secs;
    }
}

/// The known URLs' states, shared by the recrawl source (which updates them as pages are
/// done) and the fetch tasks (which ask with their validators). A lock rather than a
/// snapshot because a continuous recrawl fetches a URL again with what its last fetch found.
#[derive(Debug, Default)]
pub(crate) struct KnownUrls {
    urls: RwLock<HashMap<String, UrlState>>,
}

impl KnownUrls {
    pub(crate) fn new(urls: HashMap<String, UrlState>) -> KnownUrls {
        KnownUrls {
            urls: RwLock::new(urls),
        }
    }

    /// What a fetch of `url` asks with, and what a 304 for it stands for.
    pub(crate) fn asking(&self, url: &str) -> Option<(Validators, NotModified)> {
        let urls = self.urls.read().unwrap_or_else(|e| e.into_inner());
        let state = urls.get(url)?;
        Some((state.validators.clone(), state.not_modified()))
    }

    /// Folds in a record of `generation`; returns the URL's next due time (epoch seconds).
    pub(crate) fn observe(
        &self,
        record: &PageRecord,
        generation: u32,
        bounds: &schedule::Bounds,
        first_seen: u64,
    ) -> Option<f64> {
        let mut urls = self.urls.write().unwrap_or_else(|e| e.into_inner());
        let state = urls.entry(record.url.clone()).or_insert_with(|| UrlState {
            first_seen,
            ..UrlState::default()
        });
        state.observe(record, generation, bounds);
        (!state.retired()).then_some(state.next_due)
    }
}

/// A sitemap's `<lastmod>` (W3C datetime: `2026-11-01`, `2026-11-01T12:00:00Z`, with
/// fractions or an offset) as epoch seconds; an offset is read as UTC (off by at most a
/// day's part, which a schedule in hours and days does not notice).
fn w3c_datetime(text: &str) -> Option<f64> {
    let text = text.trim();
    let whole = if text.len() >= 19 {
        format!("{}Z", text.get(..19)?)
    } else {
        format!("{}T00:00:00Z", text.get(..10)?)
    };
    humantime::parse_rfc3339(&whole).ok().map(epoch_secs)
}

pub(crate) fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The collection's state, read back from its journal.
#[derive(Debug, Default)]
pub(crate) struct History {
    pub(crate) urls: HashMap<String, UrlState>,
    /// The highest generation recorded.
    pub(crate) generation: u32,
    /// The journal's length and line count: where the next generation's records start.
    pub(crate) bytes: u64,
    pub(crate) records: u64,
}

impl History {
    /// Reads `pages` (the whole journal), folding each page record into its URL's state.
    /// A resumed generation reads its own records too: a URL it already fetched is not
    /// fetched again in it (the seen-set says so) but a continuous recrawl schedules it
    /// from them.
    pub(crate) fn read(pages: &Path, bounds: &schedule::Bounds) -> Result<History, RecrawlError> {
        let read_error = |source| RecrawlError::Read {
            path: pages.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(pages).map_err(read_error)?;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
        let mut history = History::default();
        let mut lastmods: Vec<(String, f64)> = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).map_err(read_error)?;
            if n == 0 || line.last() != Some(&b'\n') {
                // A torn last line is the resume's to cut, not a record.
                break;
            }
            history.bytes += n as u64;
            history.records += 1;
            let Ok(record) = serde_json::from_slice::<PageRecord>(&line) else {
                continue;
            };
            if record.kind != RecordKind::Page {
                continue;
            }
            let generation = record.generation.unwrap_or(1);
            history.generation = history.generation.max(generation);
            if let Some(sitemap) = &record.sitemap {
                lastmods.extend(
                    sitemap
                        .lastmod
                        .iter()
                        .filter_map(|(loc, date)| Some((loc.clone(), w3c_datetime(date)?))),
                );
            }
            let first_seen = history.records;
            history
                .urls
                .entry(record.url.clone())
                .or_insert_with(|| UrlState {
                    first_seen,
                    ..UrlState::default()
                })
                .observe(&record, generation, bounds);
        }
        history.apply_lastmods(lastmods);
        if history.urls.is_empty() {
            return Err(RecrawlError::Empty {
                path: pages.to_path_buf(),
            });
        }
        Ok(history)
    }

    /// The URLs a one-shot generation fetches at `now`: not retired, last fetched at least
    /// `min_interval` ago, in the order the collection first recorded them.
    pub(crate) fn due(&self, now: SystemTime, min_interval: Duration) -> Vec<&str> {
        let now = epoch_secs(now);
        let min = min_interval.as_secs_f64();
        let mut due: Vec<(&String, &UrlState)> = self
            .urls
            .iter()
            .filter(|(_, s)| !s.retired() && now - s.fetched_at >= min)
            .collect();
        due.sort_by_key(|(_, s)| s.first_seen);
        due.into_iter().map(|(url, _)| url.as_str()).collect()
    }

    /// A sitemap's `<lastmod>` later than a URL's last fetch says the page changed since:
    /// it is due at that time rather than at the end of its interval (the schedule trusts
    /// the site's own word where it gives one).
    fn apply_lastmods(&mut self, lastmods: Vec<(String, f64)>) {
        for (loc, modified) in lastmods {
            let Ok(url) = crate::normalize::normalize_str(&loc) else {
                continue;
            };
            if let Some(state) = self.urls.get_mut(url.as_str()) {
                if modified > state.fetched_at {
                    state.next_due = state.next_due.min(modified);
                }
            }
        }
    }

    /// The URL not retired whose last fetch is the oldest: the one due first.
    pub(crate) fn first_due(&self) -> Option<&str> {
        self.urls
            .iter()
            .filter(|(_, s)| !s.retired())
            .min_by(|a, b| a.1.fetched_at.total_cmp(&b.1.fetched_at))
            .map(|(url, _)| url.as_str())
    }

    /// Why a one-shot recrawl of `dir` has nothing to do now.
    pub(crate) fn nothing_due(&self, dir: &Path, min: Duration, min_text: &str) -> RecrawlError {
        let now = epoch_secs(SystemTime::now());
        let next = self
            .urls
            .values()
            .filter(|s| !s.retired())
            .map(|s| s.fetched_at + min.as_secs_f64() - now)
            .fold(f64::INFINITY, f64::min);
        RecrawlError::NothingDue {
            dir: dir.to_path_buf(),
            known: self.urls.len(),
            retired: self.urls.values().filter(|s| s.retired()).count(),
            next_in: if next.is_finite() {
                humantime::format_duration(Duration::from_secs(next.max(0.0).ceil() as u64))
                    .to_string()
            } else {
                "never (every URL is retired)".into()
            },
            min_interval: min_text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::WarcLocation;

    fn bounds() -> schedule::Bounds {
        schedule::Bounds::new(Duration::ZERO, Duration::from_secs(1000))
    }

    fn record(status: u16, digest: &str, at: &str) -> PageRecord {
        PageRecord {
            url: "http://a.test/".into(),
            status: Some(status),
            fetched_at: at.into(),
            payload_digest: Some(digest.into()),
            etag: Some("\"e1\"".into()),
            warc: Some(WarcLocation {
                file: "f".into(),
                offset: 0,
                length: 1,
                record: "response".into(),
                id: "<urn:uuid:1>".into(),
                date: at.into(),
            }),
            ..PageRecord::default()
        }
    }

    #[test]
    fn a_304_keeps_the_payload_and_counts_an_unchanged_check() {
        let b = bounds();
        let mut s = UrlState::default();
        s.observe(&record(200, "sha1:A", "2026-01-01T00:00:00Z"), 1, &b);
        assert_eq!(s.validators.etag.as_deref(), Some("\"e1\""));
        let mut not_modified = record(304, "sha1:A", "2026-01-01T00:01:00Z");
        not_modified.etag = None;
        not_modified.warc = None;
        s.observe(&not_modified, 2, &b);
        assert_eq!((s.checks, s.changes), (1, 0));
        assert_eq!(s.validators.etag.as_deref(), Some("\"e1\""));
        assert_eq!(s.payload_digest.as_deref(), Some("sha1:A"));
        assert_eq!(
            s.original.as_ref().map(|o| o.record_id.as_str()),
            Some("<urn:uuid:1>")
        );
        s.observe(&record(200, "sha1:B", "2026-01-01T00:02:00Z"), 3, &b);
        assert_eq!((s.checks, s.changes), (2, 1));
    }

    #[test]
    fn a_sitemap_lastmod_after_the_last_fetch_makes_a_url_due_then() {
        assert_eq!(w3c_datetime("1970-01-02"), Some(86_400.0));
        assert_eq!(w3c_datetime("1970-01-02T00:00:10+01:00"), Some(86_410.0));
        assert_eq!(w3c_datetime("soon"), None);
        let mut history = History::default();
        let mut s = UrlState::default();
        s.observe(&record(200, "sha1:A", "2026-01-01T00:00:00Z"), 1, &bounds());
        s.interval_secs = 1e9;
        s.next_due = 2e9;
        history.urls.insert("http://a.test/".into(), s);
        history.apply_lastmods(vec![
            ("http://A.test/".into(), 1.0),
            ("http://a.test".into(), 1_800_000_000.0),
        ]);
        assert_eq!(history.urls["http://a.test/"].next_due, 1_800_000_000.0);
    }

    #[test]
    fn two_generations_of_404_retire_a_url_and_one_does_not() {
        let b = bounds();
        let mut s = UrlState::default();
        s.observe(&record(404, "x", "2026-01-01T00:00:00Z"), 1, &b);
        assert!(!s.retired());
        s.observe(&record(410, "x", "2026-01-02T00:00:00Z"), 2, &b);
        assert!(s.retired());
        let mut back = UrlState::default();
        back.observe(&record(404, "x", "2026-01-01T00:00:00Z"), 1, &b);
        back.observe(&record(200, "y", "2026-01-02T00:00:00Z"), 2, &b);
        back.observe(&record(404, "x", "2026-01-03T00:00:00Z"), 3, &b);
        assert!(!back.retired());
    }
}
