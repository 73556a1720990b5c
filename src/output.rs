//! Records of fetched pages: `OUT/pages.jsonl`, one JSON object per line, and
//! `OUT/summary.json` at the end.
//!
//! Records travel through a bounded channel to one writer thread. The channel applies
//! back-pressure instead of dropping: a slow disk slows the crawl, it never loses a
//! record. The writer owns the file and buffers it, hands each burst to the OS as soon as
//! the channel runs dry (so `kill -9` loses nothing written), and on request flushes and
//! fsyncs, which is what a checkpoint needs to know how much of the file is durable. It
//! also counts the records it has handed to the OS (`Handed`), which a distributed
//! process reads to acknowledge URLs without a round trip to this thread. After a burst
//! it lingers a millisecond before waiting on the channel again, so that a busy
//! crawl hands it records in batches instead of waking it once per record (see `LINGER`).
//!
//! A sink may make part of a fetch's records later, off the crawl's CPU (the archive
//! deflates on idle-priority threads, `crate::warc::deflate_pool`): records then wait in
//! the writer, in the order sent, until made, or until the waiting ones hold more than the
//! sink allows or have waited 5 ms, when the oldest is written as it is (see `Waiting`).
//! The crawl never waits for that work, and a flush (a checkpoint, a distributed process's
//! acknowledgement) writes every record waiting first. Records waiting are, for a crash,
//! like those in the channel: still inside the crawler, fetched again on `--resume`.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::counters::PageCounts;
use crate::durable::{self, At, IoAt};
use crate::warc::record::{ArchivedFetch, ResponseRecord};

/// One line of `pages.jsonl`: the outcome of one accepted URL. `Default` is a record with
/// nothing known yet; each stage fills in the fields it owns, and only those:
///
/// | stage | fields |
/// |---|---|
/// | fetch task (`crawl/fetch_task.rs`) | `url`, `final_url`, `status`, `content_type`, `bytes`, `depth`, `parent`, `fetched_at`, `elapsed_ms`, `error`, `attempts`, `truncated`, `kind`, `canonical` (from the header), `links` (of a redirect) |
/// | parse pool (`crawl/parse_pool.rs`, `crawl/sitemaps.rs`) | `links`, `canonical` (from the page), `sitemap` |
/// | the source of work (`crawl/local_source.rs`, `crawl/lease_source.rs`) | `new_links`, once the links are admitted |
/// | the driver's recorder, for a URL not fetched (`crawl/driver.rs`) | `error`, `attempts` (0), `fetched_at` |
/// | an archive sink, on the output thread (`Sink`) | `payload_digest`, `warc` |
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageRecord {
    /// The canonical URL that was requested.
    pub url: String,
    /// Where the response came from; for a redirect, the canonical target it pointed to.
    pub final_url: Option<String>,
    /// HTTP status, or `None` when no response arrived (or the URL was not fetched).
    pub status: Option<u16>,
    pub content_type: Option<String>,
    /// Body bytes received (after decompression), up to `max_body_bytes`.
    pub bytes: u64,
    pub depth: u32,
    pub parent: Option<String>,
    /// Links found in the page, every one: followed or not (nofollow, invalid, too long, over
    /// the page's limits, duplicates included).
    pub links: u64,
    /// Links this page added to the frontier.
    pub new_links: u64,
    /// RFC 3339 time the response (or the final error) arrived.
    pub fetched_at: String,
    pub elapsed_ms: u64,
    /// Why the page has no usable response, or why its links were not taken.
    pub error: Option<String>,
    /// Fetch attempts made (1 unless retried).
    pub attempts: u32,
    /// The body was cut at `max_body_bytes`.
    pub truncated: bool,
    /// What was fetched: a page (an accepted URL), or, with the archive on, a robots.txt
    /// request, listed so that every archived fetch has its line.
    #[serde(default, skip_serializing_if = "RecordKind::is_page")]
    pub kind: RecordKind,
    /// SHA-1 of the body as received (`sha1:BASE32`), when the fetch was archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_digest: Option<String>,
    /// Where the fetch's response (or revisit) record is in the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warc: Option<crate::warc::WarcLocation>,
    /// The page's canonical URL (`Link: <…>; rel="canonical"`, else `<link rel=canonical>`;
    /// see `crate::canonical`), absent when it names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    /// For a sitemap (`crawl.sitemaps`), what it held; absent for pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitemap: Option<Box<SitemapRecord>>,
    /// What this fetch added to the crawl's counters, by their `summary.json` names: only
    /// those it moved, besides the record itself (`finished`) and its `new_links`
    /// (`accepted`). A resume adds those of the records written after its checkpoint (see
    /// `crate::crawl::counters`).
    #[serde(default)]
    pub counts: PageCounts,
    /// For a near-duplicate page (`crate::near_duplicate`: its host already produced a page
    /// identical to it but for its digits), the URL of that first page; its links were not
    /// followed. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// For a parsed page, the digest of its bytes without their digits (16 hex digits; see
    /// `crate::near_duplicate`): what a resumed crawl reads back to remember which pages
    /// each host produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_digest: Option<String>,
    /// The response's `ETag` and `Last-Modified`, verbatim, when it sent them: what the
    /// next generation asks with (`If-None-Match`, `If-Modified-Since`; `crate::recrawl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The generation of the collection this record belongs to: absent for the first crawl
    /// (generation 1), 2 for the first `crawler recrawl`, and so on (`crate::recrawl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
}

/// What a line of `pages.jsonl` records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    #[default]
    Page,
    Robots,
}

impl RecordKind {
    pub fn is_page(&self) -> bool {
        *self == RecordKind::Page
    }
}

/// The `sitemap` field of a sitemap's record in `pages.jsonl` (see `crate::crawl::sitemaps`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SitemapRecord {
    /// `urlset` or `sitemapindex`; absent if no root element was read.
    pub kind: Option<crate::sitemap::Kind>,
    /// Entries read (at most 50,000); those admitted are in the record's `new_links`.
    pub entries: u64,
    /// Entries past 50,000: counted, not taken.
    pub cut: u64,
    /// The body was gzip-compressed.
    pub gzip: bool,
    /// The uncompressed XML was over 50 MiB and was read only that far.
    pub over_size: bool,
    /// The `<lastmod>` of each entry that has one, as `[loc, lastmod]` pairs in document
    /// order (`loc` as written in the sitemap).
    pub lastmod: Vec<(String, String)>,
}

/// Why output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("output writer stopped")]
    Stopped,
}

enum Message {
    Record(Box<PageRecord>, Option<Box<ArchivedFetch>>),
    /// Records sent together (the driver's burst), written in order.
    Records(Vec<(Box<PageRecord>, Option<Box<ArchivedFetch>>)>),
    Flush(oneshot::Sender<Result<OutputPosition, IoAt>>),
    /// Hand everything before to the OS, without waiting for the disk.
    Handed(oneshot::Sender<Result<(), IoAt>>),
}

/// The crawl's journal: one JSON record per URL, the one file a resume reads. Every other
/// mention of the name goes through [`journal_path`] (or the process variant), so the
/// directory's layout is written here once.
const JOURNAL: &str = "pages.jsonl";
const SUMMARY: &str = "summary.json";

/// `OUT/pages.jsonl`: a single-process crawl's journal.
pub fn journal_path(out: &Path) -> PathBuf {
    out.join(JOURNAL)
}

/// `OUT/summary.json`: the crawl's summary (a distributed crawl's once it is over).
pub fn summary_path(out: &Path) -> PathBuf {
    out.join(SUMMARY)
}

/// `OUT/pages-<process>.jsonl`: a distributed process's journal.
pub fn process_journal_path(out: &Path, process: &str) -> PathBuf {
    out.join(format!("pages-{process}.jsonl"))
}

/// `OUT/summary-<process>.json`: a distributed process's own summary.
pub fn process_summary_path(out: &Path, process: &str) -> PathBuf {
    out.join(format!("summary-{process}.json"))
}

/// The temporary file a distributed process writes `summary.json` through.
pub(crate) fn process_summary_tmp(out: &Path, process: &str) -> PathBuf {
    out.join(format!("{SUMMARY}.{process}.tmp"))
}

/// `OUT/work-<process>/`: a distributed process's local frontier (a cache of its leases).
pub(crate) fn process_work_dir(out: &Path, process: &str) -> PathBuf {
    out.join(format!("work-{process}"))
}

/// A format written beside the journal by the output thread: the archive
/// ([`crate::warc::sink`]) today, any later one the same way. The thread hands each fetch's
/// records to every sink before it writes the fetch's line, so a crash can only leave a
/// sink with records in excess (cut on resume), never a line without its records.
///
/// A sink's module also opens it (new, or recovered: its files cut back to what the journal
/// points to on a resume) and seals a dead distributed process's files the same way; see
/// `crate::warc::sink::open` and `crate::warc::recovery::seal`.
pub(crate) trait Sink: Send {
    /// Writes `fetch`'s records and fills in the fields of `record` this sink owns (see
    /// [`PageRecord`]). `line_at` is where `record`'s line will start in the journal;
    /// `flush_journal` hands the journal's buffer to the OS (for a sink that reads it back).
    fn write(
        &mut self,
        fetch: &ArchivedFetch,
        record: &mut PageRecord,
        line_at: u64,
        flush_journal: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<(), IoAt>;
    /// Fetches whose records this sink makes later, off the crawl's path (the archive's
    /// deflate, on threads of idle priority), as they reach the output thread: the sink
    /// starts that work here. Each is written with [`Sink::write`] once it is made
    /// ([`ArchivedFetch::made`]) or once it cannot wait longer (see [`Sink::hold_bytes`]).
    fn accept(&mut self, _fetches: &mut dyn Iterator<Item = &ArchivedFetch>) {}
    /// How many bytes of records may wait for their fetches' records to be made before the
    /// oldest is written as it is; 0: none waits.
    fn hold_bytes(&self) -> usize {
        0
    }
    /// Every record (archived or not), once its line is written with the fields sinks
    /// filled in; `line_end` is where its line ends in the journal. For a sink kept from the
    /// journal, like the state store ([`crate::state_store`]).
    fn recorded(&mut self, _record: &PageRecord, _line_end: u64) -> Result<(), IoAt> {
        Ok(())
    }
    /// Hands buffered records to the OS.
    fn flush(&mut self) -> Result<(), IoAt>;
    /// Hands buffered records to the OS and waits for the disk.
    fn sync(&mut self) -> Result<(), IoAt>;
    /// The run's end: everything written and synced.
    fn finish(self: Box<Self>) -> Result<(), IoAt>;
}

/// How far `pages.jsonl` has been written: the file's length and its number of records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputPosition {
    pub bytes: u64,
    pub(crate) records: u64,
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub(crate) struct OutputSender {
    tx: mpsc::Sender<Message>,
    handed: std::sync::Arc<Handed>,
}

/// How many records this writer has handed to the OS (archive records first), and a wake-up
/// each time that grows: a distributed process acknowledges a URL once its record is
/// counted here, without a round trip to the writer.
#[derive(Default)]
pub(crate) struct Handed {
    records: std::sync::atomic::AtomicU64,
    pub(crate) grew: tokio::sync::Notify,
}

impl Handed {
    /// Records sent through this writer (in this run) and handed to the OS so far.
    pub(crate) fn records(&self) -> u64 {
        self.records.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl OutputSender {
    /// Queues a record and the archive's records of the same fetch, written together.
    pub(crate) async fn send_archived(
        &self,
        record: Box<PageRecord>,
        archive: Option<Box<ArchivedFetch>>,
    ) -> Result<(), OutputError> {
        self.tx
            .send(Message::Record(record, archive))
            .await
            .map_err(|_| OutputError::Stopped)
    }

    /// Queues records (each with the archive's records of its fetch) in one message,
    /// written in order.
    pub(crate) async fn send_batch(
        &self,
        records: Vec<(Box<PageRecord>, Option<Box<ArchivedFetch>>)>,
    ) -> Result<(), OutputError> {
        self.tx
            .send(Message::Records(records))
            .await
            .map_err(|_| OutputError::Stopped)
    }

    /// How many records the writer has handed to the OS, and a wake-up when that grows.
    pub(crate) fn progress(&self) -> std::sync::Arc<Handed> {
        self.handed.clone()
    }

    /// Waits until everything sent so far is handed to the OS (archive first), without
    /// waiting for the disk: what a distributed process needs before it acknowledges URLs.
    pub(crate) async fn handed(&self) -> Result<(), OutputError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Message::Handed(tx))
            .await
            .map_err(|_| OutputError::Stopped)?;
        // The writer's own error, with its file and the OS's reason (a full disk is told
        // by the latter).
        rx.await
            .map_err(|_| OutputError::Stopped)?
            .map_err(OutputError::from)
    }

    /// Flushes everything sent so far to the OS and returns the file's length and record
    /// count (those before the writer started included).
    pub(crate) async fn flush(&self) -> Result<OutputPosition, OutputError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Message::Flush(tx))
            .await
            .map_err(|_| OutputError::Stopped)?;
        rx.await
            .map_err(|_| OutputError::Stopped)?
            .map_err(OutputError::from)
    }
}

/// The writer thread.
pub(crate) struct OutputWriter {
    handle: JoinHandle<Result<u64, OutputError>>,
}

impl OutputWriter {
    /// Opens (appending) the pages file at `path` (`journal_path`, or a distributed
    /// process's `process_journal_path`) and starts the writer; `start` is where the file
    /// stands (records already in it, for a resumed crawl). With `archive`, the fetches' WARC
    /// records are written by the same thread, each just before its line.
    pub(crate) fn start_at(
        path: PathBuf,
        capacity: usize,
        start: OutputPosition,
        sinks: Vec<Box<dyn Sink>>,
    ) -> Result<(OutputWriter, OutputSender), OutputError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .at("open", &path)?;
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let handed = std::sync::Arc::new(Handed::default());
        let handle = std::thread::Builder::new()
            .name("output".into())
            .spawn({
                let path = path.clone();
                let handed = handed.clone();
                move || write_loop(file, path, rx, start, sinks, &handed)
            })
            .at("start the writer of", &path)?;
        Ok((OutputWriter { handle }, OutputSender { tx, handed }))
    }

    /// Waits for the writer to drain and close (all senders must be dropped first).
    pub(crate) fn finish(self) -> Result<u64, OutputError> {
        self.handle.join().unwrap_or(Err(OutputError::Stopped))
    }
}

/// How long the writer waits, after handing a burst to the OS, before it looks for the next
/// one. A writer blocked on the channel is woken by every record sent (a futex wake on the
/// driver's thread, and a context switch here, per page: 2–3% of the crawl's CPU on the
/// crawl bench's profile); one that lingers finds the next records already queued and takes
/// them in one go. What this costs: a record waits in the channel up to this long, which a
/// crash may lose like any record still inside the crawler (its page is fetched again on
/// `--resume`), and a checkpoint's flush may wait as long.
const LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// The longest a record waits for its fetch's records to be made (see [`Waiting`]): past
/// this it is written as it is. It bounds what a `kill -9` loses of the records waiting
/// (pages fetched again on `--resume`): 5 ms of the crawl, a record or two on a slow one
/// (`recrawl::kill_9_during_a_recrawl_resumes_exactly` allows 8 pages fetched again per
/// kill, in flight included: with 0.5 s it saw ~29 a kill, with 20 ms 9 once in 5 runs). On
/// a deflate thread a 16 KiB page takes ~20 µs: a record not made in 5 ms is one no spare
/// CPU was going to make soon.
const MAX_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

/// Records received and not written yet, in the order they came: a record whose fetch's
/// records are not made yet ([`ArchivedFetch::made`]: its response is still to be deflated
/// on a thread of idle priority), and every record after it, since lines and records are
/// written in the order sent (a distributed process counts them so). The oldest is written
/// once its records are made, or as it is once the waiting records hold more than
/// [`Sink::hold_bytes`] or it has waited [`MAX_WAIT`], and every record is written on a
/// flush: the crawl never waits for a deflate.
#[derive(Default)]
struct Waiting {
    records: std::collections::VecDeque<WaitingRecord>,
    bytes: usize,
}

struct WaitingRecord {
    record: Box<PageRecord>,
    fetch: Option<Box<ArchivedFetch>>,
    since: std::time::Instant,
    bytes: usize,
}

impl Waiting {
    fn push(
        &mut self,
        record: Box<PageRecord>,
        fetch: Option<Box<ArchivedFetch>>,
        since: std::time::Instant,
    ) {
        let bytes = fetch.as_deref().map_or(0, ArchivedFetch::held_bytes);
        self.bytes += bytes;
        self.records.push_back(WaitingRecord {
            record,
            fetch,
            since,
            bytes,
        });
    }

    /// Writes the oldest records while they are due (all of them with `all`); how many.
    fn write_due(
        &mut self,
        to: &mut RecordTarget<'_>,
        position: &mut OutputPosition,
        (hold, all): (usize, bool),
    ) -> Result<u64, IoAt> {
        let now = std::time::Instant::now();
        let mut written = 0;
        while let Some(oldest) = self.records.front() {
            let due = all
                || self.bytes > hold
                || oldest.fetch.as_deref().is_none_or(ArchivedFetch::made)
                || now.duration_since(oldest.since) >= MAX_WAIT;
            if !due {
                break;
            }
            let Some(oldest) = self.records.pop_front() else {
                break;
            };
            if let Some(fetch) = oldest.fetch.as_deref().filter(|f| !f.response.is_sealed()) {
                // Its digests are computed here (no idle thread got to them): with those of
                // the next records written now that need them too, all at once (see
                // `ResponseRecord::seal_many`).
                let mut batch = vec![&*fetch.response];
                batch.extend(
                    self.records
                        .iter()
                        .take_while(|r| all || now.duration_since(r.since) >= MAX_WAIT)
                        .filter_map(|r| r.fetch.as_deref())
                        .filter(|f| !f.response.is_sealed())
                        .map(|f| &*f.response)
                        .take(crate::warc::digest::MANY - 1),
                );
                ResponseRecord::seal_many(&batch);
            }
            self.bytes -= oldest.bytes;
            to.write(oldest.record, oldest.fetch, position)?;
            written += 1;
        }
        Ok(written)
    }
}

/// Where the writer thread puts a record: the pages file's buffer, the archive's sinks
/// (each fetch's records just before its line), and a line buffer reused.
struct RecordTarget<'a> {
    out: &'a mut BufWriter<File>,
    path: &'a Path,
    sinks: &'a mut Vec<Box<dyn Sink>>,
    line: &'a mut Vec<u8>,
}

impl RecordTarget<'_> {
    fn write(
        &mut self,
        mut record: Box<PageRecord>,
        fetch: Option<Box<ArchivedFetch>>,
        position: &mut OutputPosition,
    ) -> Result<(), IoAt> {
        let (out, path, line) = (&mut *self.out, self.path, &mut *self.line);
        if let Some(fetch) = fetch {
            for sink in self.sinks.iter_mut() {
                let mut flush_pages = || out.flush().at("write", path);
                sink.write(&fetch, &mut record, position.bytes, &mut flush_pages)?;
            }
        }
        line.clear();
        serde_json::to_writer(&mut *line, &record)
            .map_err(std::io::Error::other)
            .at("encode a record for", path)?;
        line.push(b'\n');
        if out.capacity() - out.buffer().len() < line.len() {
            for sink in self.sinks.iter_mut() {
                sink.flush()?;
            }
        }
        let appended = if crate::checkpoint::fault::hit("pages") {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            out.write_all(line)
        };
        appended.at("write", path)?;
        position.records += 1;
        position.bytes += line.len() as u64;
        for sink in self.sinks.iter_mut() {
            sink.recorded(&record, position.bytes)?;
        }
        Ok(())
    }
}

fn write_loop(
    file: File,
    path: PathBuf,
    mut rx: mpsc::Receiver<Message>,
    start: OutputPosition,
    mut sinks: Vec<Box<dyn Sink>>,
    handed: &Handed,
) -> Result<u64, OutputError> {
    let hand = |written: u64| {
        handed
            .records
            .store(written, std::sync::atomic::Ordering::Release);
        handed.grew.notify_one();
    };
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let mut written: u64 = 0;
    let mut handed_so_far: u64 = 0;
    let mut position = start;
    let mut line = Vec::with_capacity(512);
    let hold = sinks
        .iter()
        .map(|sink| sink.hold_bytes())
        .max()
        .unwrap_or(0);
    let mut waiting = Waiting::default();
    // Records reach the OS (not the disk) as soon as the queue runs dry and they are
    // written: a killed crawler then loses no record it has written, at the cost of one
    // write per burst. The archive reaches the OS before `pages.jsonl` does: before each
    // burst's flush, and before any line that would make the buffer spill (see
    // `crate::warc::writer`).
    let mut pending = rx.blocking_recv();
    if pending.is_some() {
        loop {
            let arrived = std::time::Instant::now();
            while let Some(message) = pending.take() {
                let mut to = RecordTarget {
                    out: &mut out,
                    path: &path,
                    sinks: &mut sinks,
                    line: &mut line,
                };
                match message {
                    Message::Record(record, fetch) => {
                        if let Some(fetch) = fetch.as_deref() {
                            for sink in to.sinks.iter_mut() {
                                sink.accept(&mut std::iter::once(fetch));
                            }
                        }
                        waiting.push(record, fetch, arrived);
                    }
                    Message::Records(records) => {
                        for sink in to.sinks.iter_mut() {
                            sink.accept(&mut records.iter().filter_map(|(_, f)| f.as_deref()));
                        }
                        for (record, fetch) in records {
                            waiting.push(record, fetch, arrived);
                        }
                    }
                    Message::Flush(reply) => {
                        // A record that cannot be written stops the writer, as anywhere:
                        // the flush is then answered `Stopped`, and the error is the
                        // writer's.
                        written += waiting.write_due(&mut to, &mut position, (hold, true))?;
                        let archived = to.sinks.iter_mut().try_for_each(|sink| sink.sync());
                        let result = archived.and_then(|()| {
                            out.flush()
                                .and_then(|()| out.get_ref().sync_data())
                                .map(|()| position)
                                .at("flush", &path)
                        });
                        let _ = reply.send(result);
                    }
                    Message::Handed(reply) => {
                        written += waiting.write_due(&mut to, &mut position, (hold, true))?;
                        let archived = to.sinks.iter_mut().try_for_each(|sink| sink.flush());
                        let result = archived.and_then(|()| out.flush().at("write", &path));
                        if result.is_ok() {
                            hand(written);
                            handed_so_far = written;
                        }
                        let _ = reply.send(result);
                    }
                }
                pending = rx.try_recv().ok();
            }
            let mut to = RecordTarget {
                out: &mut out,
                path: &path,
                sinks: &mut sinks,
                line: &mut line,
            };
            written += waiting.write_due(&mut to, &mut position, (hold, false))?;
            if written != handed_so_far {
                for sink in &mut sinks {
                    sink.flush()?;
                }
                out.flush().at("write", &path)?;
                hand(written);
                handed_so_far = written;
            }
            // The burst is with the OS; let the next one gather before waiting on the
            // channel (see `LINGER`), and the deflate threads work on the records waiting.
            std::thread::sleep(LINGER);
            match rx.try_recv() {
                Ok(message) => pending = Some(message),
                // The records waiting are looked at again.
                Err(mpsc::error::TryRecvError::Empty) if !waiting.records.is_empty() => {}
                Err(mpsc::error::TryRecvError::Empty) => match rx.blocking_recv() {
                    Some(message) => pending = Some(message),
                    None => break,
                },
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            }
        }
    }
    let mut to = RecordTarget {
        out: &mut out,
        path: &path,
        sinks: &mut sinks,
        line: &mut line,
    };
    written += waiting.write_due(&mut to, &mut position, (hold, true))?;
    for sink in sinks {
        sink.finish()?;
    }
    out.flush().at("write", &path)?;
    out.get_ref().sync_data().at("fsync", &path)?;
    Ok(written)
}

/// Fsyncs, every `checkpoint.sync_interval_secs`, what the crawl appended since its last
/// checkpoint: the current queue log first, then `pages.jsonl` (a record's links reach the
/// log before the record is written, so this order makes a synced record's links synced
/// too). It runs on a thread of its own, never in the driver's path: the driver only
/// names the new queue log when it rotates.
///
/// Why: `kill -9` loses nothing the crawl handed to the OS, but a power loss loses what the
/// OS had not written yet. Checkpoints fsync everything they cover; between them this bounds
/// what a power loss costs to about one interval of pages, fetched again after the resume
/// (which cuts a record whose links did not survive: see [`crate::checkpoint`]). Each file
/// is opened anew, not duplicated, so that a write-back error this thread's fsync reports is
/// still reported to the checkpoint's own fsync of the writer's descriptor. A failed fsync
/// here is a warning: the next checkpoint's fsync is the one that decides.
pub(crate) struct BackgroundSync {
    shared: std::sync::Arc<SyncShared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct SyncShared {
    state: std::sync::Mutex<SyncState>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct SyncState {
    stop: bool,
    /// The queue log being appended to, and whether it changed since the last round.
    queue_log: Option<PathBuf>,
    queue_log_changed: bool,
}

impl BackgroundSync {
    /// Starts fsyncing `pages` (and the queue log named by [`BackgroundSync::queue_log`],
    /// and the archive's current file) every `interval`.
    pub(crate) fn start(
        interval: std::time::Duration,
        pages: PathBuf,
        archive: Option<std::sync::Arc<crate::warc::CurrentFile>>,
    ) -> Result<Self, OutputError> {
        let shared = std::sync::Arc::new(SyncShared::default());
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sync".into())
            .spawn(move || sync_loop(&thread_shared, interval, pages.clone(), archive))
            .at("start the background fsync of", Path::new(JOURNAL))?;
        Ok(BackgroundSync {
            shared,
            thread: Some(thread),
        })
    }

    /// The queue log appended to from now on (opened by the sync thread, not here).
    pub(crate) fn queue_log(&self, path: PathBuf) {
        let mut state = lock(&self.shared.state);
        state.queue_log = Some(path);
        state.queue_log_changed = true;
    }
}

impl Drop for BackgroundSync {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sync_loop(
    shared: &SyncShared,
    interval: std::time::Duration,
    pages_path: PathBuf,
    archive: Option<std::sync::Arc<crate::warc::CurrentFile>>,
) {
    let open = |path: &Path| match File::open(path) {
        Ok(file) => Some(file),
        Err(e) => {
            tracing::warn!("cannot open {} to fsync it: {e}", path.display());
            None
        }
    };
    let sync = |file: &Option<File>, path: &Path| {
        if let Some(file) = file {
            if let Err(e) = file.sync_data() {
                tracing::warn!("background fsync of {}: {e}", path.display());
            }
        }
    };
    let pages = open(&pages_path);
    let mut log: Option<(PathBuf, Option<File>)> = None;
    let mut archive_file: (u64, Option<(PathBuf, Option<File>)>) = (0, None);
    loop {
        let mut state = lock(&shared.state);
        if !state.stop {
            state = shared
                .wake
                .wait_timeout(state, interval)
                .map(|(state, _)| state)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        if state.stop {
            return;
        }
        let changed = std::mem::take(&mut state.queue_log_changed);
        let log_path = state.queue_log.clone();
        drop(state);
        if changed {
            log = log_path.map(|path| {
                let file = open(&path);
                (path, file)
            });
        }
        if let Some((path, file)) = &log {
            sync(file, path);
        }
        // The archive before `pages.jsonl`: a synced line's records are synced too.
        if let Some(current) = &archive {
            let (path, generation) = current.path();
            if generation != archive_file.0 {
                archive_file = (
                    generation,
                    path.map(|path| {
                        let file = open(&path);
                        (path, file)
                    }),
                );
            }
            if let Some((path, file)) = &archive_file.1 {
                sync(file, path);
            }
        }
        sync(&pages, &pages_path);
    }
}

/// Formats a time as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(time: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// Writes `contents` to `path` atomically (through `path` with the extension `tmp`, see
/// [`crate::durable`]), so a reader never sees half a file, and a crash leaves the old one or
/// the new one.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), OutputError> {
    Ok(durable::replace(
        path,
        path.with_extension("tmp"),
        contents,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u64) -> PageRecord {
        PageRecord {
            url: format!("http://a.test/{i}"),
            status: Some(200),
            content_type: Some("text/html".into()),
            bytes: i,
            depth: 1,
            parent: Some("http://a.test/".into()),
            links: 3,
            new_links: 1,
            fetched_at: rfc3339(std::time::SystemTime::UNIX_EPOCH),
            elapsed_ms: 5,
            attempts: 1,
            ..PageRecord::default()
        }
    }

    #[test]
    fn background_sync_follows_the_queue_log_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let pages = dir.path().join("pages.jsonl");
        std::fs::write(&pages, b"").unwrap();
        let log = dir.path().join("queued-1.jsonl");
        std::fs::write(&log, b"").unwrap();
        let sync = BackgroundSync::start(std::time::Duration::from_millis(5), pages, None).unwrap();
        sync.queue_log(log);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let dropped = std::time::Instant::now();
        drop(sync);
        assert!(dropped.elapsed() < std::time::Duration::from_secs(1));
    }

    #[tokio::test]
    async fn every_record_is_written_even_with_a_tiny_channel() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, tx) = OutputWriter::start_at(
            journal_path(dir.path()),
            1,
            OutputPosition::default(),
            Vec::new(),
        )
        .unwrap();
        for i in 0..1000 {
            tx.send_archived(Box::new(record(i)), None).await.unwrap();
        }
        tx.handed().await.unwrap();
        assert_eq!(tx.progress().records(), 1000, "all handed to the OS");
        let position = tx.flush().await.unwrap();
        assert_eq!(position.records, 1000);
        let length = std::fs::metadata(dir.path().join("pages.jsonl"))
            .unwrap()
            .len();
        assert_eq!(position.bytes, length);
        drop(tx);
        let written = tokio::task::spawn_blocking(move || writer.finish())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(written, 1000);
        let text = std::fs::read_to_string(dir.path().join("pages.jsonl")).unwrap();
        let lines: Vec<PageRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[999], record(999));
        assert_eq!(lines[0].fetched_at, "1970-01-01T00:00:00.000Z");
    }
}
