//! Test fixture: an archive written the way the output thread writes it, for the tests of
//! recovery (`super::recovery`) and of sealing a dead process's output
//! (`crate::distributed::seal`), which both need files a crash could have left.
//!
//! Only compiled for tests. It goes through the real [`ArchiveWriter`] and
//! [`encode_fetch`], so what the tests cut back is what a crawl writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::digest_index::PayloadIndex;
use super::record::{encode_fetch, FetchParts};
use super::{ArchiveOptions, ArchiveWriter, CurrentFile};
use crate::output::PageRecord;

/// A writer into `out/warc` whose files start with `prefix`, its lines going to `pages`.
pub(crate) fn writer(out: &Path, prefix: &str, pages: PathBuf) -> ArchiveWriter {
    ArchiveWriter::start(
        ArchiveOptions {
            dir: out.join("warc"),
            prefix: prefix.into(),
            max_bytes: 1 << 20,
            gzip_level: 1,
            info: vec![("software", "test".into())],
        },
        0,
        PayloadIndex::with_memory(1 << 16),
        pages,
        Arc::new(CurrentFile::default()),
    )
    .unwrap()
}

/// A plain fetch of `url` for the archive's tests: `GET`, then `response_head` and `payload`
/// as received, no peer, nothing truncated or content-coded.
pub(crate) fn fetch_parts<'a>(
    url: &'a str,
    response_head: &'a [u8],
    payload: &'a [u8],
) -> FetchParts<'a> {
    FetchParts {
        target_uri: url,
        date: "2026-11-26T12:00:00.000001Z".into(),
        warcinfo_id: uuid::Uuid::nil(),
        request_head: b"GET / HTTP/1.1\r\n\r\n",
        response_head,
        payload,
        peer: None,
        http2: false,
        truncated: false,
        payload_compressed: false,
    }
}

/// Archives a 200 response of `url` with `payload`, as the output thread does (records
/// first, handed to the OS), for a line that goes at offset `at` of the pages file. Returns
/// the record (with its `warc` location) and its line, newline included.
pub(crate) fn archive_fetch(
    writer: &mut ArchiveWriter,
    url: &str,
    payload: &[u8],
    at: u64,
) -> (PageRecord, Vec<u8>) {
    let fetch = encode_fetch(fetch_parts(url, b"HTTP/1.1 200 OK\r\n\r\n", payload), 1);
    let mut record = PageRecord {
        url: url.into(),
        status: Some(200),
        attempts: 1,
        ..PageRecord::default()
    };
    writer
        .write(&fetch, &mut record, at, &mut || Ok(()))
        .unwrap();
    writer.flush().unwrap();
    let mut line = serde_json::to_vec(&record).unwrap();
    line.push(b'\n');
    (record, line)
}
