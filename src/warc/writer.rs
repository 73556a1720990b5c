//! Appending finished records to `OUT/warc/PREFIX-TIMESTAMP-SERIAL.warc.gz`, rotating files,
//! and deciding response or revisit. Owned by the output thread, next to `pages.jsonl`.
//!
//! # What it guarantees
//! - **Each file opens with a `warcinfo` record** and is closed (flushed and fsynced) once it
//!   reaches `output.warc_max_bytes`; a fetch's records never straddle two files.
//! - **Records before their line.** A fetch's request and response (or revisit) records are
//!   handed to the OS before its `pages.jsonl` line (the output thread flushes the archive
//!   before any write of `pages.jsonl` that could reach the OS), and fsynced before it (the
//!   checkpoint's flush and the background sync both sync the archive first). So after
//!   `kill -9` or a power loss, every line's records exist, and only records whose line
//!   did not make it can be in excess: resume cuts those ([`super::recovery`]).
//! - **A duplicate payload is written once.** The first response with a payload digest is
//!   archived in full; a later one is a `revisit` referring to it, decided here against the
//!   digest index, which only this thread writes (so two equal payloads fetched at once
//!   cannot both become originals or both revisits). In a distributed crawl, a payload
//!   another process archived comes with its original (`ArchivedFetch::shared_original`,
//!   from Redis) and is a revisit too.
//!
//! `WARC-Warcinfo-ID`: records are built on other threads before the file they land in is
//! known; they name the `warcinfo` of the file being written when they were built. Across a
//! rotation a few records therefore name the previous file's `warcinfo`, which describes the
//! same crawl run: the field is an association, not a location (ISO 28500 §5.14).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::digest_index::PayloadIndex;
use super::gather::Gather;
use super::record::{
    digest_label, not_modified_member, record_id, revisit_member, warc_date, warcinfo_member,
    ArchivedFetch, Member, Original, Sha1Digest,
};
use crate::durable::{At, IoAt};
use crate::output::PageRecord;

/// Where a fetch's response (or revisit) record is: what `pages.jsonl` carries for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarcLocation {
    /// The file's name, in `OUT/warc/`.
    pub file: String,
    /// Offset and length of the record's gzip member.
    pub offset: u64,
    pub length: u64,
    /// `response` or `revisit`.
    pub record: String,
    /// The record's `WARC-Record-ID` and `WARC-Date`.
    pub id: String,
    pub date: String,
}

/// What the writer needs to know from the configuration.
#[derive(Debug, Clone)]
pub(crate) struct ArchiveOptions {
    pub(crate) dir: PathBuf,
    pub(crate) prefix: String,
    pub(crate) max_bytes: u64,
    pub(crate) gzip_level: u32,
    /// The `warcinfo` fields: software, format, the crawl's configuration summary.
    pub(crate) info: Vec<(&'static str, String)>,
}

/// The `warcinfo` record id of the file being written, read by whoever builds records, and
/// the file's path, read by the background sync (which fsyncs it before `pages.jsonl`).
#[derive(Debug, Default)]
pub(crate) struct CurrentFile {
    state: Mutex<CurrentState>,
}

#[derive(Debug, Default, Clone)]
struct CurrentState {
    warcinfo: Uuid,
    path: Option<PathBuf>,
    generation: u64,
}

impl CurrentFile {
    pub(crate) fn warcinfo_id(&self) -> Uuid {
        self.lock().warcinfo
    }

    /// The current file and a number that changes whenever it does.
    pub(crate) fn path(&self) -> (Option<PathBuf>, u64) {
        let state = self.lock();
        (state.path.clone(), state.generation)
    }

    fn set(&self, warcinfo: Uuid, path: PathBuf) {
        let mut state = self.lock();
        state.warcinfo = warcinfo;
        state.path = Some(path);
        state.generation += 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CurrentState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Figures of the archive, added to the crawl's counters by the output thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArchiveTally {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) payload_bytes: u64,
    pub(crate) revisits: u64,
    pub(crate) bytes_saved: u64,
    /// Responses archived in full whose member is stored, not deflated (see
    /// `output.warc_deflate`).
    pub(crate) stored: u64,
}

/// The archive being written.
pub(crate) struct ArchiveWriter {
    options: ArchiveOptions,
    /// `YYYYmmddHHMMSS` of this run's start: every file of the run carries it.
    stamp: String,
    serial: u32,
    name: String,
    path: PathBuf,
    file: Gather,
    /// Bytes in the file, buffered ones included.
    length: u64,
    /// The file's blocks are reserved up to here (see [`PREALLOCATE`]).
    reserved_to: u64,
    /// Reserving is given up after the file system refused it once.
    reserving: bool,
    /// Where the bytes whose writeback has not been started begin (see [`WRITEBACK_STEP`]).
    writeback_from: u64,
    /// Where the last writeback started begins: the bytes before it were started a step or
    /// more ago, and are let go of at the next step (see [`release_due`]).
    last_writeback_from: u64,
    /// The bytes before this were let go of at least once (see [`release_due`]).
    released_to: u64,
    /// Fetches written to the file: a file always takes at least one, so a fetch bigger
    /// than `max_bytes` gets a file of its own rather than an endless rotation.
    fetches_in_file: u64,
    current: Arc<CurrentFile>,
    index: PayloadIndex,
    /// `pages.jsonl`, read back to confirm a digest hit and learn the original.
    pages: PathBuf,
    pages_reader: Option<File>,
}

impl ArchiveWriter {
    /// Opens a new file numbered `first_serial` (one past the files a resumed crawl already
    /// has), with `index` holding the digests archived before.
    pub(crate) fn start(
        options: ArchiveOptions,
        first_serial: u32,
        index: PayloadIndex,
        pages: PathBuf,
        current: Arc<CurrentFile>,
    ) -> Result<ArchiveWriter, IoAt> {
        std::fs::create_dir_all(&options.dir).at("create", &options.dir)?;
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>();
        let (name, path, file) = open_file(&options, &stamp, first_serial)?;
        let mut writer = ArchiveWriter {
            options,
            stamp,
            serial: first_serial,
            name,
            path,
            file,
            length: 0,
            reserved_to: 0,
            reserving: true,
            writeback_from: 0,
            last_writeback_from: 0,
            released_to: 0,
            fetches_in_file: 0,
            current,
            index,
            pages,
            pages_reader: None,
        };
        writer.begin_file()?;
        crate::durable::sync_dir(&writer.options.dir)?;
        Ok(writer)
    }

    fn begin_file(&mut self) -> Result<(), IoAt> {
        let id = Uuid::new_v4();
        let date = warc_date(std::time::SystemTime::now());
        let member = warcinfo_member(
            id,
            &date,
            &self.name,
            &self.options.info,
            self.options.gzip_level,
        );
        self.file.write_all(&member).at("write", &self.path)?;
        self.length = member.len() as u64;
        self.reserved_to = 0;
        self.writeback_from = 0;
        self.last_writeback_from = 0;
        self.released_to = 0;
        self.fetches_in_file = 0;
        self.current.set(id, self.path.clone());
        Ok(())
    }

    /// Closes the current file (flushed, its reserved blocks let go, fsynced) and opens the
    /// next.
    fn rotate(&mut self) -> Result<(), IoAt> {
        self.close_file()?;
        self.serial += 1;
        let (name, path, file) = open_file(&self.options, &self.stamp, self.serial)?;
        (self.name, self.path, self.file) = (name, path, file);
        self.begin_file()?;
        crate::durable::sync_dir(&self.options.dir)?;
        Ok(())
    }

    /// Hands buffered records to the OS, and starts the disk's writes of what it holds
    /// once [`WRITEBACK_STEP`] of it waits; then lets go of the pages written back before.
    pub(crate) fn flush(&mut self) -> Result<(), IoAt> {
        self.file.flush().at("write", &self.path)?;
        if let Some((offset, len)) = writeback_due(self.writeback_from, self.length) {
            if let Some((from, len)) = release_due(self.released_to, self.last_writeback_from) {
                release_pages(self.file.get_ref(), from, len);
                self.released_to = self.last_writeback_from;
            }
            start_writeback(self.file.get_ref(), offset, len);
            self.last_writeback_from = offset;
            self.writeback_from = offset + len;
        }
        Ok(())
    }

    /// Hands buffered records to the OS and waits for the disk.
    pub(crate) fn sync(&mut self) -> Result<(), IoAt> {
        self.flush()?;
        self.file.get_ref().sync_data().at("fsync", &self.path)
    }

    /// The file's last records handed to the OS, the blocks reserved past them let go (a
    /// truncation to the file's own length), and the file fsynced.
    fn close_file(&mut self) -> Result<(), IoAt> {
        self.flush()?;
        if self.reserved_to > self.length {
            self.file
                .get_ref()
                .set_len(self.length)
                .at("let go of the blocks reserved past the end of", &self.path)?;
            self.reserved_to = self.length;
        }
        self.sync()?;
        // Every byte is on disk now: none of the file need stay in memory.
        release_pages(self.file.get_ref(), 0, self.length);
        self.released_to = self.length;
        Ok(())
    }

    /// Reserves the file's blocks up to `end` and [`PREALLOCATE`] past it, if they are not
    /// yet. Best effort: a file system that cannot reserve (or a full disk, which the writes
    /// themselves will report) only makes the writes cost what they did without.
    fn reserve(&mut self, end: u64) {
        if !self.reserving || end <= self.reserved_to {
            return;
        }
        let to = end + PREALLOCATE;
        if reserve_blocks(self.file.get_ref(), self.reserved_to, to - self.reserved_to) {
            self.reserved_to = to;
        } else {
            self.reserving = false;
        }
    }

    /// Appends `fetch`'s records and fills in `record`'s digest and location. `line_at` is
    /// where `record`'s line will start in `pages.jsonl` (the digest index points there).
    /// `flush_pages` hands `pages.jsonl`'s buffer to the OS when a line must be read back.
    pub(crate) fn write(
        &mut self,
        fetch: &ArchivedFetch,
        record: &mut PageRecord,
        line_at: u64,
        flush_pages: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<ArchiveTally, IoAt> {
        // Encoded once, when the header took it.
        let mut label = fetch.response.seal().payload_label.as_str().to_owned();
        let (original, revisit) = match fetch.not_modified.as_deref() {
            Some(unchanged) => {
                // A 304: the page is what an earlier generation archived, found by its
                // digest (the record holding the bytes), else the URL's last response.
                let by_digest = match &unchanged.payload_digest {
                    Some(digest) => {
                        label = digest_label(digest);
                        self.original_of((digest, None), &label, flush_pages)?
                    }
                    None => None,
                };
                let original = by_digest.or_else(|| unchanged.original.clone());
                let revisit = original.as_ref().map(|o| {
                    not_modified_member(
                        fetch,
                        o,
                        unchanged.payload_digest.as_ref(),
                        self.options.gzip_level,
                    )
                });
                (original, revisit)
            }
            None => {
                let original = self.original_of(
                    (&fetch.payload_digest(), fetch.shared_original.as_ref()),
                    &label,
                    flush_pages,
                )?;
                let revisit = original
                    .as_ref()
                    .map(|o| revisit_member(fetch, o, self.options.gzip_level));
                (original, revisit)
            }
        };
        // Taken once: a deflate thread may finish this member while it is written stored.
        let response = match &revisit {
            Some(revisit) => Member::Made(revisit),
            None => fetch.response.member(),
        };
        let stored = matches!(response, Member::Stored(..));
        let response_len = response.len() as u64;
        let pair = fetch.request_member.len() as u64 + response_len;
        if self.length + pair > self.options.max_bytes && self.fetches_in_file > 0 {
            self.rotate()?;
        }
        self.fetches_in_file += 1;
        self.reserve(self.length + pair);
        self.file
            .write_all(&fetch.request_member)
            .at("write", &self.path)?;
        let offset = self.length + fetch.request_member.len() as u64;
        // The response's big bytes are handed to the OS from the record itself (see
        // `super::gather`).
        match (&revisit, stored) {
            (Some(revisit), _) => self.file.write_all(revisit),
            (None, true) => self.file.write_stored(&fetch.response),
            (None, false) => self.file.write_deflated(&fetch.response),
        }
        .at("write", &self.path)?;
        self.length += pair;
        record.payload_digest = Some(label);
        record.warc = Some(WarcLocation {
            file: self.name.clone(),
            offset,
            length: response_len,
            record: if original.is_some() {
                "revisit"
            } else {
                "response"
            }
            .into(),
            id: record_id(fetch.response_id),
            date: fetch.date.clone(),
        });
        let mut tally = ArchiveTally {
            records: 2,
            bytes: pair,
            ..ArchiveTally::default()
        };
        if fetch.not_modified.is_some() {
            // Nothing was sent to save, and the 304's empty payload is no original.
            tally.revisits = u64::from(original.is_some());
        } else if original.is_some() {
            tally.revisits = 1;
            tally.bytes_saved = fetch.payload_bytes;
        } else {
            tally.payload_bytes = fetch.payload_bytes;
            tally.stored = u64::from(stored);
            self.index.insert(&fetch.payload_digest(), line_at);
        }
        Ok(tally)
    }

    /// The archived original of `fetch`'s payload, if the index knows one (each candidate
    /// line is read back from `pages.jsonl` and its full digest compared), else the one
    /// another process of a distributed crawl archived, if any.
    fn original_of(
        &mut self,
        (digest, shared): (&Sha1Digest, Option<&Original>),
        label: &str,
        flush_pages: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<Option<Original>, IoAt> {
        let candidates = self.index.candidates(digest);
        if candidates.is_empty() {
            return Ok(shared.cloned());
        }
        // The lines to read back may still be in the output's buffer; the archive goes to the
        // OS first, as always.
        self.flush()?;
        flush_pages()?;
        for at in candidates {
            let Some(line) = self.read_line(at)? else {
                continue;
            };
            let Ok(original) = serde_json::from_slice::<PageRecord>(&line) else {
                continue;
            };
            if original.payload_digest.as_deref() != Some(label) {
                continue;
            }
            if let Some(location) = original.warc.filter(|w| w.record == "response") {
                return Ok(Some(Original {
                    target_uri: original.url,
                    date: location.date,
                    record_id: location.id,
                }));
            }
        }
        Ok(shared.cloned())
    }

    /// The line of `pages.jsonl` starting at `at`, without its newline.
    fn read_line(&mut self, at: u64) -> Result<Option<Vec<u8>>, IoAt> {
        if self.pages_reader.is_none() {
            self.pages_reader = Some(File::open(&self.pages).at("open", &self.pages)?);
        }
        let Some(reader) = self.pages_reader.as_mut() else {
            return Ok(None);
        };
        reader
            .seek(SeekFrom::Start(at))
            .at("seek in", &self.pages)?;
        let mut line = Vec::with_capacity(1024);
        let mut chunk = [0u8; 4096];
        loop {
            let n = reader.read(&mut chunk).at("read", &self.pages)?;
            if n == 0 {
                return Ok(None);
            }
            if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&chunk[..end]);
                return Ok(Some(line));
            }
            line.extend_from_slice(&chunk[..n]);
            if line.len() > 1 << 20 {
                return Ok(None);
            }
        }
    }

    /// The current file, as the record builders and the background sync see it.
    pub(crate) fn current(&self) -> Arc<CurrentFile> {
        self.current.clone()
    }

    /// Flushes and fsyncs the last file.
    pub(crate) fn finish(mut self) -> Result<(), IoAt> {
        tracing::info!(
            "archive: {} ends the run; the dedup index holds {} payload digests ({} forgotten for room)",
            self.path.display(),
            self.index.len(),
            self.index.evictions()
        );
        self.close_file()
    }
}

/// The name of file number `serial` of the run started at `stamp`.
pub(crate) fn file_name(prefix: &str, stamp: &str, serial: u32) -> String {
    format!("{prefix}-{stamp}-{serial:05}.warc.gz")
}

/// The serial number in a file name this crawler writes, if it is one.
pub(crate) fn serial_of(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".warc.gz")?;
    let (_, serial) = stem.rsplit_once('-')?;
    serial.parse().ok()
}

/// Whether `name` is a file this crawler writes with `prefix` (`PREFIX-TIMESTAMP-SERIAL.warc.gz`
/// exactly): in distributed mode each process's prefix ends with its id, and this tells its
/// files from those of a process whose id merely starts the same.
pub(crate) fn written_with_prefix(name: &str, prefix: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(".warc.gz"))
    else {
        return false;
    };
    let Some((stamp, serial)) = rest.split_once('-') else {
        return false;
    };
    stamp.len() == 14
        && stamp.bytes().all(|b| b.is_ascii_digit())
        && !serial.is_empty()
        && serial.bytes().all(|b| b.is_ascii_digit())
}

fn open_file(
    options: &ArchiveOptions,
    stamp: &str,
    serial: u32,
) -> Result<(String, PathBuf, Gather), IoAt> {
    let name = file_name(&options.prefix, stamp, serial);
    let path = options.dir.join(&name);
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .at("create", &path)?;
    Ok((name, path, Gather::new(file)))
}

// The file's pending bytes (`super::gather`) go to the OS in writes of up to 1 MiB: a burst
// of records (the output thread hands each burst to the OS when its channel runs dry, so a
// `kill -9` loses none) goes in one write. Measured on this machine's ext4 (kernel 6.18,
// sys time per 16 KiB appended, medians of 5): writes of ~60 KB (the 64 KiB buffer before)
// 6.3 µs, of 200 KB (a burst of ~12 pages) 4.6 µs, of 1 MiB 3.8 µs: the page cache takes
// bigger writes in bigger folios.

/// How far ahead of the records the file's blocks are reserved (`fallocate` with
/// `FALLOC_FL_KEEP_SIZE`: the file's length, all a reader or a resume sees, is unchanged).
/// Appending into reserved blocks skips ext4's per-block delayed allocation: sys time per
/// 16 KiB appended 4.6 → 3.7 µs in writes of 200 KB, 3.8 → 2.8 µs in writes of 1 MiB
/// (medians of 5, same machine). The reservation past the last record is let go when the
/// file is closed; after a crash it stays reserved (disk space, no bytes) until a resume
/// cuts the file.
const PREALLOCATE: u64 = 16 << 20;

/// Bytes handed to the OS after which the output thread asks the kernel to start writing
/// them to disk (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`, which queues the writes and
/// does not wait for them). Left to itself the kernel writes an archive back only at the
/// next fsync (the background sync's, every `checkpoint.sync_interval_secs`, or a
/// checkpoint's, or the file's close: its dirty-page thresholds are gigabytes), so each
/// fsync waited for a second's archive at once: 67–97 ms a time at ~200 MB/s of archive
/// (`perf trace -e fdatasync` of `cargo bench --bench crawl -- --warc-only`), and the crawl
/// waits for the last of them, at its end and at each checkpoint's pause. Started every
/// 8 MiB, the writes go out as the archive grows and an fsync finds little left to do.
/// The bytes and the CPU of writing them back are the same; RocksDB's `bytes_per_sync`
/// and PostgreSQL's `backend_flush_after` do this for the same reason.
const WRITEBACK_STEP: u64 = 8 << 20;

/// The bytes to let go of from the page cache (as `(offset, len)`), when the writeback of
/// those before `to` was started a step or more ago and those before `released_to` were
/// let go of once already.
///
/// An archive is written once and read by nobody while the crawl runs (a revisit reads its
/// original's line in `pages.jsonl`, not the archive; a resume reads the file from disk).
/// Left to the kernel, its pages stay cached until memory runs short: a crawl writing
/// ~200 MB of archive a second fills the page cache with it in minutes, evicting what the
/// crawl does read again (the frontier's spilled blocks, `pages.jsonl`), and in a container
/// the cache counts against the crawl's memory limit. So, as PostgreSQL does with the WAL
/// segments it will not read back, the writer asks the kernel to drop the pages whose
/// writeback it started a step or more ago ([`WRITEBACK_STEP`]: by then the disk has had
/// ~50 ms for 8 MiB at the crawl bench's rate), and a closed file's pages once it is
/// fsynced. It never waits for the disk to do so: the kernel drops only the pages already
/// written back (a dirty page or one being written stays), so each step asks again for the
/// [`RELEASE_WINDOW`] before the bytes it lets go of, and a page a slow disk had not written
/// yet goes with a later step. With a disk that keeps up, the archive holds a few steps of
/// the page cache (29–50 MB at the crawl bench's peaks, see `super`'s doc), not gigabytes;
/// with one that does not, what it has not written stays
/// until the kernel writes it, as without (a wait here would stall the crawl on every
/// burst the page cache used to absorb).
///
/// The range starts on a [`RELEASE_ALIGN`] boundary: the kernel drops whole pages only, so
/// the page the last range ended in is in the next.
fn release_due(released_to: u64, to: u64) -> Option<(u64, u64)> {
    let from = released_to.min(to.saturating_sub(RELEASE_WINDOW));
    let from = from - from % RELEASE_ALIGN;
    (to > released_to).then_some((from, to - from))
}

/// How far back each step asks again for pages to be dropped (see [`release_due`]).
const RELEASE_WINDOW: u64 = 4 * WRITEBACK_STEP;

/// A multiple of every page size (4 KiB on x86-64, up to 64 KiB on arm64).
const RELEASE_ALIGN: u64 = 64 << 10;

/// A range of a file as the system call taking it counts bytes (`off_t`, `off64_t`), or
/// `None` where it does not fit (the callers then leave the range to the kernel, as without).
#[cfg(target_os = "linux")]
fn kernel_range<T: TryFrom<u64>>(offset: u64, len: u64) -> Option<(T, T)> {
    Some((T::try_from(offset).ok()?, T::try_from(len).ok()?))
}

/// Lets the kernel drop from the page cache the pages of `len` bytes of `file` from `offset`
/// that are on disk (`POSIX_FADV_DONTNEED`: whole pages only, so the page the next bytes go
/// to stays; dirty pages and those being written stay too). Best effort: where the kernel
/// refuses, the pages stay cached, as without.
#[cfg(target_os = "linux")]
fn release_pages(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let Some((offset, len)) = kernel_range(offset, len) else {
        return;
    };
    // SAFETY: `posix_fadvise` on a descriptor this `File` owns, with no pointers.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(not(target_os = "linux"))]
fn release_pages(_file: &File, _offset: u64, _len: u64) {}

/// Reserves `len` bytes of `file`'s blocks from `offset` without changing its length;
/// whether the file system did.
#[cfg(target_os = "linux")]
fn reserve_blocks(file: &File, offset: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Some((offset, len)) = kernel_range(offset, len) else {
        return false;
    };
    // SAFETY: `fallocate` on a descriptor this `File` owns, with no pointers.
    unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, len) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn reserve_blocks(_file: &File, _offset: u64, _len: u64) -> bool {
    false
}

/// The bytes whose writeback is to start, once the file's first `length` bytes are with the
/// OS and it was started up to `from`: all those after `from`, once they are
/// [`WRITEBACK_STEP`] or more (as `(offset, len)`).
fn writeback_due(from: u64, length: u64) -> Option<(u64, u64)> {
    let waiting = length.checked_sub(from)?;
    (waiting >= WRITEBACK_STEP).then_some((from, waiting))
}

/// Starts the disk's writes of `len` bytes of `file` from `offset` (see [`WRITEBACK_STEP`]).
/// Best effort: where the kernel refuses, the next fsync writes them, as without.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let Some((offset, len)) = kernel_range(offset, len) else {
        return;
    };
    // SAFETY: `sync_file_range` on a descriptor this `File` owns, with no pointers.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

/// Removes the archive of an earlier crawl in `out` (`--fresh`): the `.warc.gz` files this
/// crawler names, and their `.cdxj` indexes.
pub fn remove_archive(out: &Path) -> Result<(), IoAt> {
    let dir = out.join("warc");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).at("list", &dir),
    };
    for entry in entries {
        let entry = entry.at("list", &dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let base = name.strip_suffix(".cdxj").unwrap_or(&name);
        if serial_of(base).is_some() {
            std::fs::remove_file(entry.path()).at("remove", &entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of disk a file holds.
    #[cfg(target_os = "linux")]
    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn files_closed_hold_no_blocks_past_their_records() {
        // Files rotated (the fixture's are 1 MiB) and the last one finished: what was
        // reserved ahead of the records is let go, whatever the file system reserved.
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            crate::warc::fixture::writer(dir.path(), "test", dir.path().join("pages.jsonl"));
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..30 {
            // Incompressible, different for each page: 30 responses in full, ~3 MB deflated.
            let payload: Vec<u8> = (0..100_000)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            crate::warc::fixture::archive_fetch(
                &mut writer,
                &format!("http://a.test/{i}"),
                &payload,
                0,
            );
        }
        writer.finish().unwrap();
        let files: Vec<_> = std::fs::read_dir(dir.path().join("warc"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(files.len() >= 3, "{files:?}");
        for file in files {
            let length = std::fs::metadata(&file).unwrap().len();
            assert!(
                allocated(&file) <= length.next_multiple_of(4096) + (64 << 10),
                "{}: {} bytes of disk for {length} bytes",
                file.display(),
                allocated(&file)
            );
        }
    }

    #[test]
    fn writeback_starts_once_a_step_waits_and_covers_all_that_waits() {
        assert_eq!(writeback_due(0, WRITEBACK_STEP - 1), None);
        assert_eq!(writeback_due(0, WRITEBACK_STEP), Some((0, WRITEBACK_STEP)));
        // A burst that crosses the step by much: all of it, from where the last one ended.
        let from = 3 * WRITEBACK_STEP + 17;
        assert_eq!(
            writeback_due(from, from + WRITEBACK_STEP + 1000),
            Some((from, WRITEBACK_STEP + 1000))
        );
        assert_eq!(writeback_due(from, from + WRITEBACK_STEP - 1), None);
        // A new file (its length reset below where the last one's writeback ended): nothing
        // until the step is reached in it.
        assert_eq!(writeback_due(from, 4096), None);
    }

    #[test]
    fn release_covers_all_not_released_and_the_window_before() {
        assert_eq!(release_due(0, 0), None);
        assert_eq!(release_due(0, WRITEBACK_STEP), Some((0, WRITEBACK_STEP)));
        // Steps after the window: the window again, for what was being written then.
        let to = 10 * WRITEBACK_STEP;
        let from = to - RELEASE_WINDOW;
        assert_eq!(
            release_due(9 * WRITEBACK_STEP, to),
            Some((from, RELEASE_WINDOW))
        );
        // A burst that took many steps at once: all of it, whatever the window.
        assert_eq!(
            release_due(WRITEBACK_STEP, to),
            Some((WRITEBACK_STEP, to - WRITEBACK_STEP))
        );
        // On a page boundary, so the page the last range ended in is in this one.
        let odd = from + 17;
        assert_eq!(
            release_due(odd + RELEASE_WINDOW, odd + RELEASE_WINDOW + 4096),
            Some((from, RELEASE_WINDOW + 4096 + 17))
        );
        assert_eq!(release_due(to, to), None);
        assert_eq!(release_due(to, to - 1), None);
    }

    /// How many of `path`'s pages in `range` are in the page cache, and how many there are;
    /// `None` where the file system keeps a file's pages as its storage (tmpfs), so that
    /// none can be let go of.
    #[cfg(target_os = "linux")]
    fn resident_pages(path: &Path, range: std::ops::Range<u64>) -> Option<(usize, usize)> {
        use std::os::fd::AsRawFd;
        let file = File::open(path).unwrap();
        // SAFETY: `statfs` writes into the struct given, for a path that is a C string.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::statfs(c_path.as_ptr(), &mut fs) }, 0);
        if fs.f_type == libc::TMPFS_MAGIC {
            return None;
        }
        let page = 4096u64;
        let (from, to) = (range.start / page * page, range.end / page * page);
        let len = (to - from) as usize;
        let pages = len / page as usize;
        let mut vec = vec![0u8; pages];
        // SAFETY: a shared read-only mapping of a file this test opened, never touched, only
        // asked which of its pages are resident, and unmapped.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                from as libc::off_t,
            );
            assert_ne!(at, libc::MAP_FAILED);
            assert_eq!(libc::mincore(at, len, vec.as_mut_ptr()), 0);
            libc::munmap(at, len);
        }
        Some((vec.iter().filter(|&&b| b & 1 == 1).count(), pages))
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_archive_lets_go_of_its_pages_on_disk_a_step_later_and_a_closed_files_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = ArchiveWriter::start(
            ArchiveOptions {
                dir: dir.path().join("warc"),
                prefix: "test".into(),
                max_bytes: 1 << 30,
                gzip_level: 0,
                info: vec![("software", "test".into())],
            },
            0,
            PayloadIndex::with_memory(1 << 16),
            dir.path().join("pages.jsonl"),
            Arc::new(CurrentFile::default()),
        )
        .unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut payload: Vec<u8> = (0..1 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for i in 0..5 * WRITEBACK_STEP / (1 << 20) {
            // Incompressible, and a different payload each time (no revisit): ~1 MiB a record.
            payload[..8].copy_from_slice(&i.to_le_bytes());
            crate::warc::fixture::archive_fetch(
                &mut writer,
                &format!("http://a.test/{i}"),
                &payload,
                0,
            );
            if i == 3 * WRITEBACK_STEP / (1 << 20) {
                // All on disk (the test does not wait for the disk as the crawl does not):
                // the next two steps let go of the first three's pages.
                writer.sync().unwrap();
            }
        }
        let path = writer.path.clone();
        let length = writer.length;
        assert!(length >= 5 * WRITEBACK_STEP, "{length}");
        let Some((resident, pages)) = resident_pages(&path, 0..length - 3 * WRITEBACK_STEP) else {
            eprintln!("skipped: the archive is on tmpfs, whose pages are the file");
            return;
        };
        assert!(
            resident <= 1,
            "{resident} of the first {pages} pages still cached"
        );
        writer.finish().unwrap();
        let (resident, pages) = resident_pages(&path, 0..length).unwrap();
        assert!(
            resident <= 1,
            "{resident} of {pages} pages of a closed file cached"
        );
    }

    #[test]
    fn file_names_carry_prefix_stamp_and_serial() {
        let name = file_name("crawler", "20261123160000", 7);
        assert_eq!(name, "crawler-20261123160000-00007.warc.gz");
        assert_eq!(serial_of(&name), Some(7));
        assert_eq!(serial_of("notes.txt"), None);
        assert_eq!(serial_of("x-y.warc.gz"), None);
    }

    #[test]
    fn a_prefix_owns_its_files_and_not_those_of_a_longer_one() {
        let mine = file_name("crawler-h-12-345", "20261123160000", 3);
        assert!(written_with_prefix(&mine, "crawler-h-12-345"));
        // A process whose id extends this one's (`-1`: a second crawl in one process).
        let theirs = file_name("crawler-h-12-345-1", "20261123160000", 3);
        assert!(!written_with_prefix(&theirs, "crawler-h-12-345"));
        assert!(written_with_prefix(&theirs, "crawler-h-12-345-1"));
        assert!(!written_with_prefix(
            "crawler-h-12-345-2026-1.warc.gz",
            "crawler-h-12-345"
        ));
        assert!(!written_with_prefix(
            &format!("{mine}.cdxj"),
            "crawler-h-12-345"
        ));
    }
}
