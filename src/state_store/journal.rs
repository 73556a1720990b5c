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
/// never recorded); `None` for a record that is not a page's (a robots.txt fetch).
///
/// What a record does not say is kept from before: the validators and archive record of an
/// earlier fetch survive a fetch that failed, and the schedule (`interval_secs`,
/// `next_due`) is the recrawl's to set. A revisit record keeps the response record it refers
/// to as the one to refer to. A fetch compares when both it and the state before have a
/// payload digest (`checks`), and counts a change when they differ (`changes`).
pub fn state_after(before: Option<&UrlState>, record: &PageRecord) -> Option<UrlState> {
    if !record.kind.is_page() {
        return None;
    }
    let mut state = before.cloned().unwrap_or_default();
    state.url.clone_from(&record.url);
    state.fetched_at = unix_secs(&record.fetched_at);
    state.status = record.status.unwrap_or(0);
    if let Some(digest) = &record.payload_digest {
        if let Some(previous) = before.and_then(|b| b.payload_digest.as_deref()) {
            state.checks = state.checks.saturating_add(1);
            if previous != digest {
                state.changes = state.changes.saturating_add(1);
            }
        }
        state.payload_digest = Some(digest.clone());
    }
    if let Some(warc) = record.warc.as_ref().filter(|w| w.record == "response") {
        state.warc_record_id = Some(warc.id.clone());
        state.warc_date = Some(warc.date.clone());
    }
    state.gone_generations = match record.status {
        Some(404 | 410) => state.gone_generations.saturating_add(1),
        _ => 0,
    };
    Some(state)
}

/// Applies `records` in order (a URL recorded twice in them ends with its second state).
pub(super) fn apply_records(
    store: &StateStore,
    records: &[PageRecord],
) -> Result<(), StateStoreError> {
    let pages: Vec<&PageRecord> = records.iter().filter(|r| r.kind.is_page()).collect();
    if pages.is_empty() {
        return Ok(());
    }
    let fps: Vec<UrlFingerprint> = pages.iter().map(|r| UrlFingerprint::of(&r.url)).collect();
    let before = store.get_batch(&fps)?;
    let mut latest: std::collections::HashMap<UrlFingerprint, UrlState> =
        std::collections::HashMap::with_capacity(pages.len());
    let mut order = Vec::with_capacity(pages.len());
    for ((record, fp), before) in pages.iter().zip(&fps).zip(before) {
        let prior = latest.get(fp).cloned().or(before);
        if let Some(state) = state_after(prior.as_ref(), record) {
            if latest.insert(*fp, state).is_none() {
                order.push(*fp);
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
        pages: &Path,
        journal_len: u64,
        resumed: bool,
    ) -> Result<StateSink, StateStoreError> {
        let dir = StateStore::dir_of(out);
        if !resumed {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (store, note) = StateStore::open_for_journal(&dir, pages, journal_len)?;
        if resumed {
            tracing::info!("{note}");
        }
        Ok(StateSink {
            store: Arc::new(store),
        })
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

    #[test]
    fn a_state_follows_its_records() {
        let first = state_after(None, &record("http://a.test/", 200, Some("sha1:A"))).unwrap();
        assert_eq!(first.status, 200);
        assert_eq!(first.fetched_at, 1_795_680_000);
        assert_eq!((first.checks, first.changes), (0, 0));
        assert_eq!(first.warc_record_id.as_deref(), Some("<urn:uuid:sha1:A>"));
        let same = state_after(Some(&first), &record("http://a.test/", 200, Some("sha1:A")));
        let same = same.unwrap();
        assert_eq!((same.checks, same.changes), (1, 0));
        let changed = state_after(Some(&same), &record("http://a.test/", 200, Some("sha1:B")));
        let changed = changed.unwrap();
        assert_eq!((changed.checks, changed.changes), (2, 1));
        // A failure keeps what the earlier fetch archived.
        let mut failed = record("http://a.test/", 0, None);
        failed.status = None;
        let failed = state_after(Some(&changed), &failed).unwrap();
        assert_eq!(failed.status, 0);
        assert_eq!(failed.payload_digest.as_deref(), Some("sha1:B"));
        let gone = state_after(Some(&failed), &record("http://a.test/", 404, None)).unwrap();
        let gone = state_after(Some(&gone), &record("http://a.test/", 410, None)).unwrap();
        assert_eq!(gone.gone_generations, 2);
        let mut robots = record("http://a.test/robots.txt", 200, None);
        robots.kind = crate::output::RecordKind::Robots;
        assert!(state_after(None, &robots).is_none());
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
        let (parts, _) =
            StateStore::open_for_journal(&dir.path().join("b"), &pages, ends[149]).unwrap();
        parts.flush().unwrap();
        parts.close().unwrap();
        drop(parts);
        let (parts, note) =
            StateStore::open_for_journal(&dir.path().join("b"), &pages, len).unwrap();
        assert!(note.contains(&format!("from byte {}", ends[149])), "{note}");
        let fps: Vec<UrlFingerprint> = (0..100)
            .map(|i| UrlFingerprint::of(&format!("http://a.test/{i}")))
            .collect();
        let a = whole.get_batch(&fps).unwrap();
        assert_eq!(a, parts.get_batch(&fps).unwrap());
        assert!(a.iter().all(|s| s.as_ref().is_some_and(|s| s.checks == 2)));
        // A store ahead of its journal (a power loss) is rebuilt.
        let (ahead, note) =
            StateStore::open_for_journal(&dir.path().join("a"), &pages, ends[10]).unwrap();
        assert!(note.contains("rebuilt"), "{note}");
        assert!(ahead.get_batch(&fps[50..51]).unwrap()[0].is_none());
    }
}
