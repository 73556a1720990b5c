//! The archive: every fetch the crawl ends on, kept as WARC/1.1 (ISO 28500), the format
//! Heritrix, wget, Browsertrix and Common Crawl write and warcio, pywb and cdxj-indexer read.
//!
//! With `[output] warc = true` the crawl writes `OUT/warc/PREFIX-TIMESTAMP-SERIAL.warc.gz`:
//! a `warcinfo` record first in each file, then for each fetch that ends (pages, redirects,
//! errors with a response, robots.txt) a `request` record and a `response` record sharing
//! `WARC-Date` and `WARC-Target-URI`, the request naming the response in
//! `WARC-Concurrent-To`. A response whose payload was already archived in this crawl is a
//! `revisit` record instead (profile identical-payload-digest): content-level dedup, the
//! second half of deduplication after the URL-level seen-set.
//!
//! | file | job |
//! |---|---|
//! | `record.rs` | one record's bytes: fields, digests, one gzip member per record |
//! | `digest.rs` | a response's block and payload digests in one pass (SHA-NI, two streams) |
//! | `writer.rs` | appending, rotating files, response or revisit (output thread) |
//! | `digest_index.rs` | the payload digests archived, in fixed memory |
//! | `recovery.rs` | on resume: cut records whose `pages.jsonl` line was lost; rebuild the index; the same for a dead distributed process's files (sealing) |
//! | `reader.rs` | members and records read back (index, recovery) |
//! | `cdxj.rs` | `crawler index FILE…`: CDXJ for pywb |
//!
//! # What it guarantees
//! - **The bytes as received.** The response block is the status line and headers as the
//!   server sent them (`Transfer-Encoding` renamed `X-Crawler-Transfer-Encoding`, since the
//!   body kept is de-chunked) and the entity body as sent, still content-coded: the crawler
//!   decodes for parsing itself ([`crate::content_coding`]). A body cut at `max_body_bytes`
//!   is marked `WARC-Truncated: length`. The payload digest is over the body as sent.
//! - **The archive and `pages.jsonl` agree.** Every record pair has exactly one line, which
//!   carries the payload digest and the record's file, offset and length; with the archive
//!   on, robots.txt fetches get a line too (`"kind": "robots"`). A response that is answered
//!   by a retry (a 503 tried again) is not archived: the attempt that ends the URL is. A crash
//!   leaves at most records in excess, which resume cuts ([`recovery`]).
//! - **Off the driver's path.** Digests and compression run where the response is
//!   finished (parse threads, fetch tasks); the output thread only appends finished members.
//!
//! Why our own writer rather than the `warc` crate: it compresses a whole file as one gzip
//! stream, so no record has an offset of its own, and it builds records from buffered
//! copies. The tests read our files with that crate and with warcio, as independent checks.

pub mod cdxj;
pub(crate) mod digest;
pub(crate) mod digest_index;
#[cfg(test)]
pub(crate) mod fixture;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod recovery;
pub(crate) mod sink;
/// warcio on the archives the library's tests write, the helper the end-to-end tests use
/// (shared with the test binaries, where its items must be `pub`).
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "../../tests/warcio_support/mod.rs"]
pub(crate) mod warcio_check;
pub(crate) mod writer;

use std::sync::Arc;

pub use writer::{remove_archive, WarcLocation};
pub(crate) use writer::{ArchiveOptions, ArchiveTally, ArchiveWriter, CurrentFile};

use crate::fetch::Fetched;
use record::{encode_fetch, warc_date, ArchivedFetch, FetchParts};

/// What building records needs: the current file's `warcinfo`, the gzip level, and whether
/// payloads compressed already are stored.
#[derive(Clone)]
pub(crate) struct Archiver {
    pub(crate) current: Arc<CurrentFile>,
    pub(crate) gzip_level: u32,
    /// `output.warc_store_compressed`: payloads compressed already are stored, not deflated.
    pub(crate) store_compressed: bool,
}

impl Archiver {
    /// The records of a finished fetch of `url`, if the fetch kept its exchange.
    pub(crate) fn archive(&self, url: &str, fetched: &Fetched) -> Option<Box<ArchivedFetch>> {
        let exchange = fetched.exchange.as_deref()?;
        Some(Box::new(encode_fetch(
            FetchParts {
                target_uri: url,
                date: warc_date(exchange.date),
                warcinfo_id: self.current.warcinfo_id(),
                request_head: &exchange.request_head,
                response_head: &exchange.response_head,
                payload: exchange.payload(fetched.body.as_deref()),
                peer: exchange.peer,
                http2: exchange.http2,
                truncated: exchange.truncated,
                payload_compressed: self.store_compressed
                    && record::already_compressed(
                        exchange.content_coded,
                        fetched.content_type.as_deref(),
                    ),
            },
            self.gzip_level,
        )))
    }
}

/// One fetch's record building as the crawl does it, for `benches/warc.rs` (what each
/// `output.warc_gzip_level` and the digests cost per page); not an interface.
#[doc(hidden)]
pub mod cost {
    use super::record::{encode_fetch, FetchParts};

    /// Builds a fetch's request and response records at `level` (0: stored) and returns
    /// their bytes.
    pub fn records(request_head: &[u8], response_head: &[u8], payload: &[u8], level: u32) -> usize {
        let fetch = encode_fetch(
            FetchParts {
                target_uri: "http://h0.test/p/1",
                date: "2026-11-26T12:00:00.000001Z".into(),
                warcinfo_id: uuid::Uuid::nil(),
                request_head,
                response_head,
                payload,
                peer: None,
                http2: false,
                truncated: false,
                payload_compressed: false,
            },
            level,
        );
        fetch.response_member.len() + fetch.request_member.len()
    }

    /// A response's block and payload digests as records get them (one pass).
    pub fn digests(head: &[u8], payload: &[u8]) -> [u8; 20] {
        super::digest::block_and_payload(head, payload).0
    }

    /// The same two digests by the `sha1` crate, one after the other (as before).
    pub fn digests_one_by_one(head: &[u8], payload: &[u8]) -> [u8; 20] {
        super::digest::one_by_one(head, payload).0
    }
}

/// The `warcinfo` fields of a crawl with `config`: what wrote the files and how.
pub(crate) fn info_fields(config: &crate::config::Config) -> Vec<(&'static str, String)> {
    let c = &config.crawl;
    vec![
        ("software", format!("crawler/{}", env!("CARGO_PKG_VERSION"))),
        ("format", "WARC File Format 1.1".into()),
        (
            "conformsTo",
            "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
                .into(),
        ),
        ("http-header-user-agent", c.user_agent.clone()),
        ("robots", if config.politeness.respect_robots { "obey" } else { "ignore" }.into()),
        (
            "description",
            format!(
                "max_urls={} max_depth={} max_body_bytes={} concurrency={} scope={:?} per_host_rps={}",
                c.max_urls.0,
                c.max_depth,
                c.max_body_bytes.0,
                c.concurrency,
                config.scope.mode,
                config.politeness.per_host_rps
            ),
        ),
    ]
}
