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

use super::record::ArchivedFetch;
use super::{ArchiveOptions, ArchiveWriter, Archiver, CurrentFile};
use crate::config::Config;
use crate::counters::{CrawlCounters, PageCounts};
use crate::durable::IoAt;
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
    Ok(Some(OpenedArchive {
        sink: Box::new(WarcSink { writer, counters }),
        archiver: Archiver {
            current: current.clone(),
            gzip_level: o.warc_gzip_level,
            store_compressed: o.warc_store_compressed,
        },
        current,
    }))
}

/// The archive writer with the counters its figures go to.
struct WarcSink {
    writer: ArchiveWriter,
    counters: Arc<CrawlCounters>,
}

impl Sink for WarcSink {
    fn write(
        &mut self,
        fetch: &ArchivedFetch,
        record: &mut PageRecord,
        line_at: u64,
        flush_journal: &mut dyn FnMut() -> Result<(), IoAt>,
    ) -> Result<(), IoAt> {
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
