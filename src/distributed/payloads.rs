//! Archive dedup across the processes of a crawl: the payloads archived in full by any
//! process, in one Redis hash (`payloads`: digest → where its original record is), so that
//! a payload one process archived is a `revisit` in every other, as within one process.
//!
//! # What is stored, and the memory bound
//! A field is the first [`FIELD_BYTES`] (96 bits) of the payload's SHA-1; its value the
//! original's `WARC-Date` (microseconds, 8 bytes), `WARC-Record-ID` (the UUID's 16 bytes)
//! and `WARC-Target-URI` (its text): what a revisit record names. About URL bytes + 110 of
//! Redis per payload (a hash entry's own overhead included). The hash is capped at
//! `distributed.shared_payloads` entries (0: off, each process dedups only its own): new
//! payloads are added only while it holds fewer, so Redis memory stays under the cap times
//! that figure (plus one sync's worth per process: the count is read, then added to). What
//! is kept is the first payloads archived, which is where repeats are likeliest (a site's
//! boilerplate answers, error pages, robots.txt files); a payload first met after the cap is
//! archived in full once per process, as with dedup off: space, never correctness.
//!
//! # What it guarantees
//! - **No revisit without its original**: an entry is published only after the original's
//!   record and its pages line were handed to the OS (with the URL's acknowledgement, in
//!   the same sync), so a process killed at any moment leaves no entry whose record a
//!   sealing would cut. Entries go out in record order with `HSETNX`: a later record of the
//!   same payload (a revisit in its own process) never replaces the original's entry.
//! - **Wrong revisits are as unlikely as a 96-bit collision**: two different payloads of
//!   one crawl sharing their first 96 bits of SHA-1 (about 6e-14 for 1e8 payloads). The
//!   field is not the whole digest to keep an entry in a smaller allocation (16 bytes
//!   rather than 32 with Redis's string header).
//! - Two processes fetching one payload at the same instant may both archive it in full
//!   (neither has published yet): bounded by what is in flight between a lookup and a
//!   publish, a fraction of a second of pages.
//!
//! # Why this way
//! Each process's own index ([`crate::warc`]'s `digest_index.rs`) confirms a hit against
//! the full digest in its own `pages.jsonl`; across processes, possibly on other machines,
//! nothing but Redis is shared, so the entry carries what the revisit needs. The lookup
//! (`HMGET` of a batch of pages) runs beside, and at the same time as, the admission of
//! the same pages, so it adds no wait; the publish rides in the sync that acknowledges
//! the URL. Only with `output.warc` on.

use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::warc::record::{record_id, warc_date, ArchivedFetch, Original, Sha1Digest};

/// Bytes of the SHA-1 a field keeps.
pub(crate) const FIELD_BYTES: usize = 12;

/// The field of a payload digest.
pub(crate) fn field(digest: &Sha1Digest) -> Vec<u8> {
    digest[..FIELD_BYTES].to_vec()
}

/// The entry that makes `fetch`'s response the original of its payload for other
/// processes; `None` if its date does not read back (never, for dates the crawler makes).
pub(crate) fn entry(fetch: &ArchivedFetch) -> Option<Vec<u8>> {
    let date = humantime::parse_rfc3339(&fetch.date).ok()?;
    let micros = date
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?
        .as_micros();
    let micros = u64::try_from(micros).ok()?;
    let mut out = Vec::with_capacity(24 + fetch.target_uri.len());
    out.extend_from_slice(&micros.to_le_bytes());
    out.extend_from_slice(fetch.response_id.as_bytes());
    out.extend_from_slice(fetch.target_uri.as_bytes());
    Some(out)
}

/// The original an [`entry`] names; `None` for bytes that are not one.
pub(crate) fn original(entry: &[u8]) -> Option<Original> {
    let micros = u64::from_le_bytes(entry.get(..8)?.try_into().ok()?);
    let id = Uuid::from_slice(entry.get(8..24)?).ok()?;
    let target_uri = std::str::from_utf8(entry.get(24..)?).ok()?;
    let date = SystemTime::UNIX_EPOCH.checked_add(Duration::from_micros(micros))?;
    Some(Original {
        target_uri: target_uri.to_string(),
        date: warc_date(date),
        record_id: record_id(id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_names_the_original_as_its_own_record_does() {
        let fetch = crate::warc::record::encode_fetch(
            crate::warc::record::FetchParts {
                target_uri: "http://a.test/x",
                date: warc_date(SystemTime::now()),
                warcinfo_id: Uuid::nil(),
                request_head: b"GET /x HTTP/1.1\r\n\r\n",
                response_head: b"HTTP/1.1 200 OK\r\n\r\n",
                payload: b"payload",
                peer: None,
                http2: false,
                truncated: false,
                payload_compressed: false,
            },
            1,
        );
        let entry = entry(&fetch).unwrap();
        assert_eq!(entry.len(), 24 + "http://a.test/x".len());
        let original = original(&entry).unwrap();
        assert_eq!(original.target_uri, "http://a.test/x");
        assert_eq!(original.date, fetch.date);
        assert_eq!(original.record_id, record_id(fetch.response_id));
        assert!(super::original(&entry[..20]).is_none());
        assert!(super::original(b"").is_none());
        assert_eq!(field(&fetch.payload_digest()).len(), FIELD_BYTES);
    }
}
