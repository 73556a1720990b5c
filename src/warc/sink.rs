//! The archive as a sink of the output thread ([`crate::output::Sink`]): opened fresh or
//! recovered (cut back to the journal on a resume), written beside the journal, each fetch's
//! records before its line, and its figures added to the crawl's counters.
//!
//! Guarantees: [`open`] on a resume leaves no record the journal does not point to (see
//! [`super::recovery`]); a dead distributed process's files are sealed the same way by
//! [`super::recovery::seal`]. Why here and not in the driver: what an archive needs at its
//! start is the archive's business; the driver only asks for the sinks of a run.

use std::path::PathBuf;
use std::sync::Arc;

use super::deflate_pool::DeflatePool;
use super::record::{ArchivedFetch, STORED};
use super::{ArchiveOptions, ArchiveWriter, Archiver, CurrentFile, WarcDeflate};
use crate::config::Config;
use crate::counters::{CrawlCounters, PageCounts};
use crate::durable::{At, IoAt};
use crate::output::{OutputError, PageRecord, Sink};

/// Where a run's archive goes and how it starts.
pub(crate) struct ArchivePlan {
    /// The journal the archive follows (its digest index points into it).
    pub(crate) journal: PathBuf,
    /// The journal's length: a resumed archive is cut back to what this points to.
    pub(crate) journal_bytes: u64,
    /// The files' name prefix (a distributed process's includes its id).
    pub(crate) prefix: String,
    pub(crate) resumed: bool,
    /// The crawl reads each fetch's payload digest before the output thread does (a
    /// distributed crawl's shared dedup, a continuous recrawl's schedule): the digests are
    /// then computed where the fetch ends, not left to the deflate threads.
    pub(crate) digest_before_output: bool,
}

/// An opened archive: the sink for the output thread, the current file for the background
/// fsync, and what the fetch tasks build records with.
pub(crate) struct OpenedArchive {
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) current: Arc<CurrentFile>,
    pub(crate) archiver: Archiver,
}

/// The archive when `[output] warc` is on: for a resumed crawl, first cut back to what the
/// journal (already cut to `plan.journal_bytes`) points to, and the digest index rebuilt
/// from it; otherwise new.
pub(crate) fn open(
    config: &Config,
    plan: ArchivePlan,
    counters: Arc<CrawlCounters>,
) -> Result<Option<OpenedArchive>, OutputError> {
    let o = &config.output;
    if !o.warc {
        return Ok(None);
    }
    let recovered = if plan.resumed {
        let recovered =
            super::recovery::recover(&o.dir, plan.journal_bytes, o.warc_dedup_memory.0)?;
        for note in &recovered.notes {
            tracing::warn!("resume: {note}");
        }
        recovered
    } else {
        super::recovery::Recovered {
            index: super::digest_index::PayloadIndex::with_memory(o.warc_dedup_memory.0),
            next_serial: 0,
            notes: Vec::new(),
        }
    };
    let writer = ArchiveWriter::start(
        ArchiveOptions {
            dir: o.dir.join("warc"),
            prefix: plan.prefix,
            max_bytes: o.warc_max_bytes.0,
            gzip_level: o.warc_gzip_level,
            info: super::info_fields(config),
        },
        recovered.next_serial,
        recovered.index,
        plan.journal,
        Arc::new(CurrentFile::default()),
    )?;
    let current = writer.current();
    // Deflate threads only where there is something for them: records deflated where the
    // fetch ends (`always`) or stored (level 0) need none.
    let pool = if o.warc_deflate == WarcDeflate::SpareCpu && o.warc_gzip_level != STORED {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool =
            DeflatePool::start(threads).at("start the deflate threads of", &o.dir.join("warc"))?;
        tracing::debug!(
            "archive: {threads} deflate threads at {} priority, {} of records may wait for them",
            pool.priority(),
            crate::quantity::HumanBytes(o.warc_deflate_window.0)
        );
        Some((pool, o.warc_deflate_window.0 as usize))
    } else {
        None
    };
    let digests_where_fetched = plan.digest_before_output || pool.is_none();
    Ok(Some(OpenedArchive {
        sink: Box::new(WarcSink {
            writer,
            counters,
            pool,
        }),
        archiver: Archiver {
            current: current.clone(),
            gzip_level: o.warc_gzip_level,
            store_compressed: o.warc_store_compressed,
            deflate: o.warc_deflate,
            digests_where_fetched,
        },
        current,
    }))
}

/// The archive writer with the counters its figures go to, and the deflate threads with
/// the memory records may hold waiting for them (`output.warc_deflate = "spare-cpu"`).
struct WarcSink {
    writer: ArchiveWriter,
    counters: Arc<CrawlCounters>,
    pool: Option<(DeflatePool, usize)>,
}

impl Sink for WarcSink {
    fn accept(&mut self, fetches: &mut dyn Iterator<Item = &ArchivedFetch>) {
        if let Some((pool, _)) = &self.pool {
            pool.submit(
                fetches
                    .filter(|fetch| !fetch.made())
                    .map(|fetch| fetch.response.clone()),
            );
        }
    }

    fn hold_bytes(&self) -> usize {
        self.pool.as_ref().map_or(0, |(_, window)| *window)
    }

    fn write(
        &mut self,
        fetch: &ArchivedFetch,
        record: &mut PageRecord,
        line_at: u64,
        flush_journal: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<(), IoAt> {
        if let Some((pool, _)) = &self.pool {
            if !fetch.made() {
                // Written stored now: no thread should deflate it any more.
                pool.withdraw(&fetch.response);
            }
        }
        let tally = self.writer.write(fetch, record, line_at, flush_journal)?;
        // Counted in the line it belongs to, and at once: a checkpoint's flush returns
        // after this, with the counters holding it.
        record.counts.add_archive(tally);
        let mut archived = PageCounts::default();
        archived.add_archive(tally);
        self.counters.add_page(&archived);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoAt> {
        self.writer.flush()
    }

    fn sync(&mut self) -> Result<(), IoAt> {
        self.writer.sync()
    }

    fn finish(self: Box<Self>) -> Result<(), IoAt> {
        self.writer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{journal_path, OutputPosition, OutputWriter};
    use crate::warc::fixture::fetch_parts;
    use crate::warc::reader::{parse_record, Members};
    use crate::warc::record::{digest_label, prepare, sha1_of};

    /// A page of ~16 KiB, different for each `i`.
    fn payload(i: usize) -> Vec<u8> {
        format!("<p>page {i}</p> <a href=\"/p/{i}\">{i}</a>\n")
            .repeat(16 << 10 >> 5)
            .into_bytes()
    }

    fn url(i: usize) -> String {
        format!("http://a.test/p/{i}")
    }

    /// Fetch `i`'s records as the crawl builds them with `"spare-cpu"`: not deflated yet.
    fn fetch(i: usize) -> ArchivedFetch {
        let (url, payload) = (url(i), payload(i));
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n".to_vec();
        let prepared = prepare(&fetch_parts(&url, &head, &payload), 1);
        prepared.with_block((head, payload))
    }

    /// Whether a gzip member's deflate stream starts with a stored block (BTYPE 00).
    fn stored(member: &[u8]) -> bool {
        (member[10] >> 1) & 3 == 0
    }

    /// Writes `fetches` through the output thread into an archive with deflate threads
    /// `threads` and `window` bytes of waiting room; checks that every line points at its
    /// own response record, whole, and warcio reads every file. Returns, per line, whether
    /// its response is stored, and the counters.
    async fn write_and_read_back(
        fetches: Vec<ArchivedFetch>,
        threads: usize,
        window: usize,
    ) -> (Vec<bool>, Arc<CrawlCounters>) {
        let dir = tempfile::tempdir().unwrap();
        let pages = journal_path(dir.path());
        let counters = Arc::new(CrawlCounters::default());
        let sink = WarcSink {
            writer: crate::warc::fixture::writer(dir.path(), "test", pages.clone()),
            counters: counters.clone(),
            pool: Some((DeflatePool::start(threads).unwrap(), window)),
        };
        let (writer, tx) = OutputWriter::start_at(
            pages.clone(),
            16,
            OutputPosition::default(),
            vec![Box::new(sink)],
        )
        .unwrap();
        let n = fetches.len();
        for (i, fetch) in fetches.into_iter().enumerate() {
            let record = PageRecord {
                url: url(i),
                status: Some(200),
                attempts: 1,
                ..PageRecord::default()
            };
            tx.send_archived(Box::new(record), Some(Box::new(fetch)))
                .await
                .unwrap();
        }
        drop(tx);
        tokio::task::spawn_blocking(move || writer.finish())
            .await
            .unwrap()
            .unwrap();
        let lines: Vec<PageRecord> = std::fs::read_to_string(&pages)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), n);
        let mut stored_lines = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            // In the order sent.
            assert_eq!(line.url, url(i));
            let at = line.warc.as_ref().unwrap();
            let file = std::fs::read(dir.path().join("warc").join(&at.file)).unwrap();
            let member = &file[at.offset as usize..(at.offset + at.length) as usize];
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(member), &mut bytes)
                .unwrap();
            let record = parse_record(&bytes).unwrap();
            assert_eq!(record.field("WARC-Type"), Some("response"));
            assert_eq!(record.field("WARC-Target-URI"), Some(url(i).as_str()));
            assert!(record.block.ends_with(&payload(i)));
            assert_eq!(
                record.field("WARC-Block-Digest"),
                Some(digest_label(&sha1_of(&[record.block])).as_str())
            );
            stored_lines.push(stored(member));
        }
        let mut files: Vec<_> = std::fs::read_dir(dir.path().join("warc"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let members: usize = files
            .iter()
            .map(|f| Members::open(f).unwrap().map(Result::unwrap).count())
            .sum();
        // A warcinfo per file, a request and a response per fetch.
        assert_eq!(members, files.len() + 2 * n);
        use crate::warc::warcio_check::{check, Brotli};
        assert_eq!(
            check(&files, Brotli::AsInstalled).iter().sum::<usize>(),
            members
        );
        (stored_lines, counters)
    }

    #[tokio::test]
    async fn records_no_thread_deflated_are_stored_in_order_and_read_back_whole() {
        // No deflate thread and a waiting room of ~8 records: every response is written
        // stored, when the room overflows or at the end.
        let fetches = (0..60).map(fetch).collect();
        let (stored, counters) = write_and_read_back(fetches, 0, 128 << 10).await;
        assert!(stored.iter().all(|s| *s));
        let counts = counters.values();
        assert_eq!(counts.warc_stored, 60);
        assert_eq!(counts.warc_records, 120);
    }

    #[tokio::test]
    async fn records_deflated_before_they_are_written_are_deflated_and_the_rest_stored() {
        // What the deflate threads made in time is written deflated; what they did not is
        // stored; both in one file, in order, each line pointing at its own record.
        let fetches: Vec<_> = (0..40).map(fetch).collect();
        for fetch in fetches.iter().step_by(2) {
            fetch.response.deflate();
        }
        let (stored, counters) = write_and_read_back(fetches, 0, 64 << 20).await;
        let expected: Vec<bool> = (0..40).map(|i| i % 2 == 1).collect();
        assert_eq!(stored, expected);
        assert_eq!(counters.values().warc_stored, 20);
    }

    #[tokio::test]
    async fn with_deflate_threads_every_record_is_whole_however_many_they_made() {
        // Threads and a small waiting room: which records the threads make in time depends
        // on the machine; whatever it is, the archive is valid and counted right.
        let fetches = (0..120).map(fetch).collect();
        let (stored, counters) = write_and_read_back(fetches, 2, 256 << 10).await;
        let n_stored = stored.iter().filter(|s| **s).count() as u64;
        assert_eq!(counters.values().warc_stored, n_stored);
    }
}
