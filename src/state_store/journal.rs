//! The state store fed from the crawl's journal: each record's state ([`state_after`]),
//! the sink that writes it as the output thread writes the record ([`StateSink`]), and the
//! replay of `pages.jsonl` that brings a store up to date or rebuilds it.
//!
//! Why from the records and not from the fetch: the record is what the crawl made durable
//! (`pages.jsonl` is the truth a resume goes by), and by the time the output thread holds
//! it, the archive sink has filled in its payload digest and WARC record. So the store is
//! a function of the journal: applying the same records in the same order gives the same
//! store, which is what makes re-applying after a crash, and rebuilding, exact.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use super::{StateStore, StateStoreError, UrlFingerprint, UrlState};
use crate::durable::{At, IoAt};
use crate::output::{PageRecord, Sink};
use crate::recrawl::schedule::Bounds;
use crate::warc::record::ArchivedFetch;

/// Records applied per batch when replaying the journal.
const REPLAY_BATCH: usize = 4096;

/// Unix seconds of an RFC 3339 time (0 if it does not parse).
pub fn unix_secs(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339(rfc3339)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

/// The state of a URL after its record `record`, given its state before (`None` for a URL
/// never recorded) and the recrawl schedule's bounds; `None` for a record that is not a
/// page's (a robots.txt fetch). This is the one fold of a URL's records: the store written
/// as a crawl goes, the store rebuilt from the journal and a continuous recrawl's next due
/// time all come from it.
///
/// - A record without a response (robots.txt said no, a network error) only moves the
///   generation: nothing was learnt about the page, so what an earlier fetch found stands.
/// - **Changed**: a `304` is unchanged; a `2xx` is changed when its payload digest differs
///   from the last one (or, in a crawl without the archive, its digest without digits,
///   `near_digest`), and is a change when there is nothing to compare with. `checks` counts
///   the fetches that could tell, `changes` those that found a change.
/// - **Validators**: those of the last `2xx`/`304` that sent any (a `304` without them keeps
///   the old ones); any other status drops them.
/// - The payload digest and the response record a revisit refers to survive `304`s (a
///   revisit of an identical payload keeps its original too).
/// - **Gone**: a 404/410 counts once per generation; two in a row retire the URL.
/// - **Schedule** ([`Bounds`]): the first fetch's interval from its `Last-Modified` (or the
///   minimum), then halved on a change and doubled otherwise; `next_due` is the last fetch
///   plus the interval.
pub fn state_after(
    before: Option<&UrlState>,
    record: &PageRecord,
    bounds: &Bounds,
) -> Option<UrlState> {
    if !record.kind.is_page() {
        return None;
    }
    let mut state = before.cloned().unwrap_or_default();
    state.url.clone_from(&record.url);
    let last_generation = state.generation;
    let generation = record.generation.unwrap_or(1);
    state.generation = generation;
    let fetched_at = humantime::parse_rfc3339_weak(&record.fetched_at)
        .or_else(|_| humantime::parse_rfc3339(&record.fetched_at))
        .unwrap_or_else(|_| std::time::SystemTime::now());
    let fetched_secs = fetched_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let Some(status) = record.status else {
        // Not answered (a network error, a refusal): what was known stays, and the URL is
        // asked about again an interval after this attempt, not at once: a continuous
        // recrawl would otherwise ask a failing URL again in a loop.
        let wait = (state.interval_secs as f64).max(bounds.min_secs).max(1.0);
        state.next_due = fetched_secs.saturating_add(wait.round() as u64);
        return Some(state);
    };
    let first = before.is_none_or(|b| b.status == 0);
    state.fetched_at = fetched_secs;
    state.status = status;
    if status == 404 || status == 410 {
        if generation != last_generation || first {
            state.gone_generations = state.gone_generations.saturating_add(1);
        }
    } else {
        state.gone_generations = 0;
    }
    let changed = match status {
        304 => Some(false),
        200..=299 => {
            let changed = match (&state.payload_digest, &record.payload_digest) {
                (Some(before), Some(now)) => before != now,
                _ => match (&state.near_digest, &record.near_digest) {
                    (Some(before), Some(now)) => before != now,
                    _ => true,
                },
            };
            state.payload_digest.clone_from(&record.payload_digest);
            state.near_digest.clone_from(&record.near_digest);
            match record.warc.as_ref() {
                Some(w) if w.record == "response" => {
                    state.warc_record_id = Some(w.id.clone());
                    state.warc_date = Some(w.date.clone());
                }
                // A revisit of an identical payload: its original stays the one to refer to.
                _ if !changed => {}
                _ => {
                    state.warc_record_id = None;
                    state.warc_date = None;
                }
            }
            Some(changed)
        }
        _ => None,
    };
    let fresh = (record.etag.clone(), record.last_modified.clone());
    match status {
        304 if fresh.0.is_none() && fresh.1.is_none() => {}
        200..=299 | 304 => (state.etag, state.last_modified) = fresh,
        _ => (state.etag, state.last_modified) = (None, None),
    }
    let interval = match (first, changed) {
        (true, _) => bounds.first(fetched_at, record.last_modified.as_deref()),
        (false, Some(changed)) => {
            state.checks = state.checks.saturating_add(1);
            state.changes = state.changes.saturating_add(u32::from(changed));
            bounds.next(state.interval_secs as f64, changed)
        }
        (false, None) => state.interval_secs as f64,
    };
    state.interval_secs = interval.round() as u64;
    state.next_due = state.fetched_at.saturating_add(state.interval_secs);
    Some(state)
}

/// A sitemap's `<lastmod>` (W3C datetime: `2026-11-01`, `2026-11-01T12:00:00Z`, with
/// fractions or an offset) as unix seconds; an offset is read as UTC (off by at most a
/// day's part, which a schedule in hours and days does not notice).
fn w3c_datetime(text: &str) -> Option<u64> {
    let text = text.trim();
    let whole = if text.len() >= 19 {
        format!("{}Z", text.get(..19)?)
    } else {
        format!("{}T00:00:00Z", text.get(..10)?)
    };
    humantime::parse_rfc3339(&whole)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

/// Applies `records` in order (a URL recorded twice in them ends with its second state), and
/// then the `<lastmod>` of the sitemaps among them: a page the site says changed after its
/// last fetch is due at that time rather than at the end of its interval (the schedule
/// trusts the site's own word where it gives one). Pages not recorded yet are left alone:
/// their first fetch comes after the sitemap that lists them.
pub(super) fn apply_records(
    store: &StateStore,
    records: &[PageRecord],
) -> Result<(), StateStoreError> {
    let pages: Vec<&PageRecord> = records.iter().filter(|r| r.kind.is_page()).collect();
    if pages.is_empty() {
        return Ok(());
    }
    let bounds = store.schedule();
    let fps: Vec<UrlFingerprint> = pages.iter().map(|r| UrlFingerprint::of(&r.url)).collect();
    let before = store.get_batch(&fps)?;
    let mut latest: std::collections::HashMap<UrlFingerprint, UrlState> =
        std::collections::HashMap::with_capacity(pages.len());
    let mut order = Vec::with_capacity(pages.len());
    let mut lastmods: Vec<(UrlFingerprint, u64)> = Vec::new();
    for ((record, fp), before) in pages.iter().zip(&fps).zip(before) {
        let prior = latest.get(fp).cloned().or(before);
        if let Some(state) = state_after(prior.as_ref(), record, &bounds) {
            if latest.insert(*fp, state).is_none() {
                order.push(*fp);
            }
        }
        if let Some(sitemap) = &record.sitemap {
            lastmods.extend(sitemap.lastmod.iter().filter_map(|(loc, date)| {
                let url = crate::normalize::normalize_str(loc).ok()?;
                Some((UrlFingerprint::of(url.as_str()), w3c_datetime(date)?))
            }));
        }
    }
    if !lastmods.is_empty() {
        let unknown: Vec<UrlFingerprint> = lastmods
            .iter()
            .map(|(fp, _)| *fp)
            .filter(|fp| !latest.contains_key(fp))
            .collect();
        for (fp, state) in unknown.iter().zip(store.get_batch(&unknown)?) {
            if let Some(state) = state {
                latest.insert(*fp, state);
                order.push(*fp);
            }
        }
        for (fp, modified) in lastmods {
            if let Some(state) = latest.get_mut(&fp) {
                if state.status != 0 && modified > state.fetched_at {
                    state.next_due = state.next_due.min(modified);
                }
            }
        }
    }
    let entries: Vec<(UrlFingerprint, UrlState)> = order
        .into_iter()
        .filter_map(|fp| latest.remove(&fp).map(|s| (fp, s)))
        .collect();
    store.put_batch(&entries)
}

/// Applies the records of `pages` between byte `from` and byte `to` (both at line starts),
/// and sets the store's journal point to `to`. A line that is not a record is skipped and
/// named in the log (the resume has already cut the journal back to what it trusts).
/// Returns how many records were applied.
pub(super) fn apply_journal(
    store: &StateStore,
    pages: &Path,
    from: u64,
    to: u64,
) -> Result<u64, StateStoreError> {
    if to <= from {
        store.set_covers(to);
        return Ok(0);
    }
    let mut file = std::fs::File::open(pages).at("open", pages)?;
    file.seek(SeekFrom::Start(from)).at("seek in", pages)?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(to - from));
    let (mut line, mut number, mut applied) = (Vec::new(), 0u64, 0u64);
    let mut batch = Vec::with_capacity(REPLAY_BATCH);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).at("read", pages)?;
        if n == 0 {
            break;
        }
        number += 1;
        match serde_json::from_slice::<PageRecord>(&line) {
            Ok(record) => batch.push(record),
            Err(e) => tracing::warn!(
                "state store: {} line {number} after byte {from} is not a record ({e}); skipped",
                pages.display()
            ),
        }
        if batch.len() == REPLAY_BATCH {
            apply_records(store, &batch)?;
            applied += batch.len() as u64;
            batch.clear();
        }
    }
    apply_records(store, &batch)?;
    applied += batch.len() as u64;
    store.set_covers(to);
    Ok(applied)
}

/// The URLs of the page records in the first `len` bytes of the journal `pages` (lines that
/// are not records are skipped): what an admitted set is rebuilt from.
pub fn journal_urls(pages: &Path, len: u64) -> Result<Vec<String>, StateStoreError> {
    let file = match std::fs::File::open(pages) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(IoAt {
                action: "open",
                path: pages.to_path_buf(),
                source,
            }
            .into())
        }
    };
    #[derive(serde::Deserialize)]
    struct UrlOnly {
        url: String,
        #[serde(default)]
        kind: crate::output::RecordKind,
    }
    let mut reader = BufReader::with_capacity(1 << 20, file.take(len));
    let (mut line, mut urls) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).at("read", pages)? == 0 {
            return Ok(urls);
        }
        if let Ok(record) = serde_json::from_slice::<UrlOnly>(&line) {
            if record.kind.is_page() {
                urls.push(record.url);
            }
        }
    }
}

/// The state store as a sink of the output thread: every record's state, applied as its
/// line is written; a durable point at each checkpoint's flush (written in the background,
/// so the checkpoint's pause does not wait for it) and at the end.
pub(crate) struct StateSink {
    store: Arc<StateStore>,
}

impl StateSink {
    /// The sink of `[state] enabled`: the store in `OUT/state/urls/` brought up to the journal
    /// `pages` as it stands (`journal_len` bytes, already cut back on a resume); a fresh
    /// crawl starts an empty store.
    pub(crate) fn open(
        out: &Path,
        (pages, journal_len): (&Path, u64),
        resumed: bool,
        schedule: Bounds,
    ) -> Result<StateSink, StateStoreError> {
        let dir = StateStore::dir_of(out);
        if !resumed {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (store, note) = StateStore::open_for_journal(&dir, (pages, journal_len), schedule)?;
        if resumed {
            tracing::info!("{note}");
        }
        Ok(StateSink {
            store: Arc::new(store),
        })
    }

    /// The sink of a store opened already (a recrawl's, which its source reads).
    pub(crate) fn over(store: Arc<StateStore>) -> StateSink {
        StateSink { store }
    }

    fn io(&self, e: StateStoreError) -> IoAt {
        IoAt {
            action: "write the state store in",
            path: self.store.dir().to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        }
    }
}

impl Sink for StateSink {
    fn write(
        &mut self,
        _fetch: &ArchivedFetch,
        _record: &mut PageRecord,
        _line_at: u64,
        _flush_journal: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<(), IoAt> {
        Ok(())
    }

    fn recorded(&mut self, record: &PageRecord, line_end: u64) -> Result<(), IoAt> {
        self.store
            .apply_record(record, line_end)
            .map_err(|e| self.io(e))
    }

    fn flush(&mut self) -> Result<(), IoAt> {
        Ok(())
    }

    fn sync(&mut self) -> Result<(), IoAt> {
        // The journal reaches the disk in this same flush; the store's run is written in
        // the background and its manifest says how far it goes (`open_for_journal` copes
        // with a store that is behind, or ahead after a power loss).
        let manifest = StateStore::manifest(self.store.dir());
        self.store
            .table
            .persist_in_background(&manifest, self.store.covers())
            .map_err(|e| self.io(e))
    }

    fn finish(self: Box<Self>) -> Result<(), IoAt> {
        self.store.flush().map_err(|e| self.io(e))?;
        self.store.close().map_err(|e| self.io(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::WarcLocation;

    fn record(url: &str, status: u16, digest: Option<&str>) -> PageRecord {
        PageRecord {
            url: url.into(),
            status: Some(status),
            fetched_at: "2026-11-26T08:00:00.000Z".into(),
            payload_digest: digest.map(String::from),
            warc: digest.map(|d| WarcLocation {
                file: "f.warc.gz".into(),
                offset: 0,
                length: 1,
                record: "response".into(),
                id: format!("<urn:uuid:{d}>"),
                date: "2026-11-26T08:00:00Z".into(),
            }),
            ..PageRecord::default()
        }
    }

    fn bounds() -> Bounds {
        Bounds::new(
            std::time::Duration::ZERO,
            std::time::Duration::from_secs(1000),
        )
    }

    #[test]
    fn a_state_follows_its_records() {
        let b = bounds();
        let first = state_after(None, &record("http://a.test/", 200, Some("sha1:A")), &b).unwrap();
        assert_eq!(first.status, 200);
        assert_eq!(first.generation, 1);
        assert_eq!(first.fetched_at, 1_795_680_000);
        assert_eq!((first.checks, first.changes), (0, 0));
        assert_eq!(first.warc_record_id.as_deref(), Some("<urn:uuid:sha1:A>"));
        let same = state_after(
            Some(&first),
            &record("http://a.test/", 200, Some("sha1:A")),
            &b,
        )
        .unwrap();
        assert_eq!((same.checks, same.changes), (1, 0));
        let changed = state_after(
            Some(&same),
            &record("http://a.test/", 200, Some("sha1:B")),
            &b,
        )
        .unwrap();
        assert_eq!((changed.checks, changed.changes), (2, 1));
        // A failure keeps what the earlier fetch found.
        let mut failed = record("http://a.test/", 0, None);
        failed.status = None;
        let failed = state_after(Some(&changed), &failed, &b).unwrap();
        assert_eq!(failed.status, 200);
        assert_eq!(failed.payload_digest.as_deref(), Some("sha1:B"));
        // ... and is due again an interval after the failed attempt, not at once.
        assert_eq!(failed.fetched_at, changed.fetched_at);
        assert_eq!(
            failed.next_due,
            1_795_680_000 + changed.interval_secs.max(1),
            "a failure is not due again at once"
        );
        let mut never = record("http://b.test/", 0, None);
        never.status = None;
        let never = state_after(
            None,
            &never,
            &Bounds::new(
                std::time::Duration::from_secs(60),
                std::time::Duration::from_secs(1000),
            ),
        )
        .unwrap();
        assert_eq!(
            never.next_due,
            1_795_680_000 + 60,
            "min_interval after a first failure"
        );
        let mut robots = record("http://a.test/robots.txt", 200, None);
        robots.kind = crate::output::RecordKind::Robots;
        assert!(state_after(None, &robots, &b).is_none());
    }

    #[test]
    fn a_304_keeps_the_payload_and_counts_an_unchanged_check() {
        let b = bounds();
        let mut first = record("http://a.test/", 200, Some("sha1:A"));
        first.etag = Some("\"e1\"".into());
        let s = state_after(None, &first, &b).unwrap();
        assert_eq!(s.etag.as_deref(), Some("\"e1\""));
        let mut not_modified = record("http://a.test/", 304, None);
        not_modified.generation = Some(2);
        not_modified.payload_digest = Some("sha1:A".into());
        let s = state_after(Some(&s), &not_modified, &b).unwrap();
        assert_eq!((s.checks, s.changes, s.generation), (1, 0, 2));
        assert_eq!(s.etag.as_deref(), Some("\"e1\""), "kept through a 304");
        assert_eq!(s.payload_digest.as_deref(), Some("sha1:A"));
        assert_eq!(s.warc_record_id.as_deref(), Some("<urn:uuid:sha1:A>"));
        // Unchanged: the interval doubled (from 0, to 2 s).
        assert_eq!(s.interval_secs, 2);
        assert_eq!(s.next_due, s.fetched_at + 2);
        let s = state_after(Some(&s), &record("http://a.test/", 200, Some("sha1:B")), &b).unwrap();
        assert_eq!((s.checks, s.changes), (2, 1));
        assert_eq!(s.interval_secs, 1, "halved on a change");
        assert_eq!(s.etag, None, "the new response sent none");
    }

    #[test]
    fn without_the_archive_the_digest_without_digits_tells_a_change() {
        let b = bounds();
        let mut one = record("http://a.test/", 200, None);
        one.near_digest = Some("1111".into());
        let s = state_after(None, &one, &b).unwrap();
        let s = state_after(Some(&s), &one, &b).unwrap();
        assert_eq!((s.checks, s.changes), (1, 0));
        one.near_digest = Some("2222".into());
        let s = state_after(Some(&s), &one, &b).unwrap();
        assert_eq!((s.checks, s.changes), (2, 1));
    }

    #[test]
    fn two_generations_of_404_retire_a_url_and_one_does_not() {
        let b = bounds();
        let at = |status, generation| PageRecord {
            generation: Some(generation),
            ..record("http://a.test/", status, None)
        };
        let s = state_after(None, &at(404, 1), &b).unwrap();
        assert!(!s.retired());
        let s = state_after(Some(&s), &at(410, 2), &b).unwrap();
        assert!(s.retired());
        let s = state_after(None, &at(404, 1), &b).unwrap();
        let s = state_after(Some(&s), &at(200, 2), &b).unwrap();
        let s = state_after(Some(&s), &at(404, 3), &b).unwrap();
        assert!(!s.retired());
        // Twice in one generation (a continuous recrawl) counts once.
        let s = state_after(None, &at(404, 2), &b).unwrap();
        let s = state_after(Some(&s), &at(404, 2), &b).unwrap();
        assert!(!s.retired());
    }

    #[test]
    fn a_sitemap_lastmod_after_the_last_fetch_makes_a_url_due_then() {
        assert_eq!(w3c_datetime("1970-01-02"), Some(86_400));
        assert_eq!(w3c_datetime("1970-01-02T00:00:10+01:00"), Some(86_410));
        assert_eq!(w3c_datetime("soon"), None);
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = StateStore::open_for_journal(
            dir.path(),
            (&dir.path().join("none.jsonl"), 0),
            Bounds::new(
                std::time::Duration::from_secs(10_000_000),
                std::time::Duration::from_secs(1_000_000_000),
            ),
        )
        .unwrap();
        let page = record("http://a.test/", 200, Some("sha1:A"));
        apply_records(&store, std::slice::from_ref(&page)).unwrap();
        let before = store.get("http://a.test/").unwrap().unwrap();
        assert!(before.next_due > 1_800_000_000);
        let mut sitemap = record("http://a.test/sitemap.xml", 200, None);
        sitemap.sitemap = Some(Box::new(crate::output::SitemapRecord {
            kind: None,
            entries: 3,
            cut: 0,
            gzip: false,
            over_size: false,
            lastmod: vec![
                ("http://A.test/".into(), "1970-01-02".into()),
                ("http://a.test".into(), "2027-01-15T08:00:00Z".into()),
                ("http://b.test/never-fetched".into(), "2027-01-15".into()),
            ],
        }));
        apply_records(&store, &[sitemap]).unwrap();
        let after = store.get("http://a.test/").unwrap().unwrap();
        assert_eq!(after.next_due, unix_secs("2027-01-15T08:00:00Z"));
        assert!(store.get("http://b.test/never-fetched").unwrap().is_none());
    }

    #[test]
    fn replaying_a_journal_in_two_parts_equals_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages.jsonl");
        let mut text = Vec::new();
        let mut ends = Vec::new();
        for i in 0..300 {
            let url = format!("http://a.test/{}", i % 100);
            let digest = format!("sha1:{}", i % 7);
            serde_json::to_writer(&mut text, &record(&url, 200, Some(&digest))).unwrap();
            text.push(b'\n');
            ends.push(text.len() as u64);
        }
        text.extend_from_slice(b"not json\n");
        std::fs::write(&pages, &text).unwrap();
        let len = text.len() as u64;
        let whole = StateStore::rebuild_from_journal(&dir.path().join("a"), &pages).unwrap();
        let b = Bounds::default();
        let (parts, _) =
            StateStore::open_for_journal(&dir.path().join("b"), (&pages, ends[149]), b).unwrap();
        parts.flush().unwrap();
        parts.close().unwrap();
        drop(parts);
        let (parts, note) =
            StateStore::open_for_journal(&dir.path().join("b"), (&pages, len), b).unwrap();
        assert!(note.contains(&format!("from byte {}", ends[149])), "{note}");
        let fps: Vec<UrlFingerprint> = (0..100)
            .map(|i| UrlFingerprint::of(&format!("http://a.test/{i}")))
            .collect();
        let a = whole.get_batch(&fps).unwrap();
        assert_eq!(a, parts.get_batch(&fps).unwrap());
        assert!(a.iter().all(|s| s.as_ref().is_some_and(|s| s.checks == 2)));
        // A store ahead of its journal (a power loss) is rebuilt.
        let (ahead, note) =
            StateStore::open_for_journal(&dir.path().join("a"), (&pages, ends[10]), b).unwrap();
        assert!(note.contains("rebuilt"), "{note}");
        assert!(ahead.get_batch(&fps[50..51]).unwrap()[0].is_none());
    }
}
