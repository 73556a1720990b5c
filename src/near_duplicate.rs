//! Near-duplicate pages: how the crawl stops traps by what they are, not by how deep they go.
//!
//! # What it does
//! A trap is a host that makes up pages forever: an endless calendar (`/cal/2026/11` links
//! `/cal/2026/12`, and so on), a session id or a counter written into every page and every
//! link. Its pages differ only in their numbers. [`DigitlessDigest`] hashes a page's bytes
//! with every ASCII digit left out (xxh3, fed chunk by chunk while the extractor streams the
//! page); [`NearDuplicates`] remembers, per host, the first URL that produced each digest.
//! A page whose digest its host already produced is a *near-duplicate*: its record says
//! `"duplicate_of": "<that first URL>"`, it is counted (`near_duplicate_pages` and
//! `links_near_duplicate` in the summary) and its links are not followed. A calendar then
//! ends after its first month and that month's neighbours, whatever `max_depth` is.
//!
//! # What is hashed, and why the links are part of it
//! The whole document as the HTML parser reads it (decoded to UTF-8 when it is not
//! ASCII-compatible), markup and `href`s included, minus the digits. Two pages are merged
//! only when everything but their numbers is the same, *links included*: a listing's page 2
//! links other items than its page 1 (other titles, other slugs), so it is not a
//! near-duplicate and its links are followed. Hashing the text alone would merge pages whose
//! words agree but whose links do not (two indexes of different sections under one
//! template), and that would lose real pages; leaving the links in costs nothing for traps,
//! whose links differ only in their numbers too. What is knowingly merged: pages of one host
//! that differ *only* in digits everywhere, links included: a listing whose items are bare
//! numbers (`/item/17` titled "17") loses the pages reached only through its later pages.
//! A page of no digits is still its own digest: two identical pages of a host (a page under
//! two URLs the normalizer cannot fold) are merged, which is right: their links are the same.
//!
//! # Memory, and what survives a resume
//! One entry per distinct digest per host: the key (64 bits from the host and the digest)
//! and the first URL. At most [`MAX_ENTRIES`] entries are kept (about 13 MB with URLs of
//! ~60 bytes); past that the oldest entry is forgotten first (a FIFO, not an LRU, so that a
//! lookup is one hash probe under the lock and no reordering). A trap's digest is inserted
//! by its first page and hit by its next ones; if that entry was evicted before the next page
//! came (more than [`MAX_ENTRIES`] distinct pages later), that page becomes the first again
//! and the trap costs one more page per [`MAX_ENTRIES`] distinct pages: bounded, and small
//! beside the crawl. Each parsed page's record carries its digest (`near_digest`), and a
//! resumed crawl rebuilds the memory from the tail of `pages.jsonl` ([`TAIL_BYTES`], about
//! as many records as the memory holds): so a resume after a crash forgets no trap (a page
//! whose record was lost is fetched and parsed again, which teaches its digest again), and
//! the resume reads a bounded amount whatever the crawl's size. In a distributed crawl each
//! process has its own memory: a host is leased to one process at a time, but passes to
//! another when its queue runs dry or its holder dies, and a trap on it then costs the
//! first page and its neighbours again on each process it passes through (a few pages per
//! process, not per depth). Sharing the memory in Redis would cost a round trip per parsed
//! page for those few pages.
//!
//! # Cost
//! Leaving digits out means copying the rest: the input is scanned 32 bytes at a time (a
//! branch-free test the compiler vectorizes), blocks without a digit are copied whole, and
//! the copy is hashed 4 KiB at a time with xxh3 (`xxhash-rust`, already the crate's
//! non-cryptographic hash: ~10 GB/s). `benches/extract.rs` prints the extractor's throughput
//! with and without the digest.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use xxhash_rust::xxh3::{xxh3_64_with_seed, Xxh3};

/// Bytes scanned for digits at once: one or two vector compares.
const LANES: usize = 32;
/// Digitless bytes gathered before they are hashed.
const FLUSH_BYTES: usize = 4096;

/// A streaming digest of a page's bytes with every ASCII digit left out.
pub struct DigitlessDigest {
    hasher: Xxh3,
    kept: Vec<u8>,
}

impl Default for DigitlessDigest {
    fn default() -> Self {
        Self {
            hasher: Xxh3::new(),
            kept: Vec::with_capacity(FLUSH_BYTES + LANES),
        }
    }
}

impl std::fmt::Debug for DigitlessDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigitlessDigest").finish_non_exhaustive()
    }
}

impl DigitlessDigest {
    /// Feeds the next bytes of the page.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut blocks = bytes.chunks_exact(LANES);
        for block in &mut blocks {
            // `fold` with `|` rather than `any`: no early exit, so it vectorizes.
            let has_digit = block.iter().fold(false, |any, b| any | b.is_ascii_digit());
            if has_digit {
                // Branch-free compaction: every byte is written, the cursor moves past the
                // non-digits only (a filtering iterator costs a branch and a capacity check
                // per byte, and was 2-3 times slower).
                let mut compact = [0u8; 2 * LANES];
                let mut n = 0;
                for &b in block {
                    compact[n & (2 * LANES - 1)] = b;
                    n += usize::from(!b.is_ascii_digit());
                }
                self.kept.extend_from_slice(&compact[..n.min(LANES)]);
            } else {
                self.kept.extend_from_slice(block);
            }
            if self.kept.len() >= FLUSH_BYTES {
                self.hasher.update(&self.kept);
                self.kept.clear();
            }
        }
        self.kept.extend(
            blocks
                .remainder()
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_digit()),
        );
    }

    /// The digest of everything fed.
    pub fn finish(mut self) -> u64 {
        self.hasher.update(&self.kept);
        self.hasher.digest()
    }
}

/// Distinct (host, digest) pairs remembered at most.
pub const MAX_ENTRIES: usize = 200_000;

/// Bytes at the end of `pages.jsonl` a resume reads back: records are ~300 bytes, so about
/// [`MAX_ENTRIES`] of them.
pub const TAIL_BYTES: u64 = 64 << 20;

/// What a resume reads of a `pages.jsonl` record (other fields are ignored).
#[derive(serde::Deserialize)]
struct DigestLine {
    url: String,
    near_digest: Option<String>,
}

/// The record field for `digest`: 16 hex digits.
pub fn digest_field(digest: u64) -> String {
    format!("{digest:016x}")
}

/// The first URL of each page digest, per host, bounded (see the module doc).
#[derive(Debug, Default)]
pub struct NearDuplicates {
    inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    first: HashMap<u64, Box<str>>,
    order: VecDeque<u64>,
}

impl NearDuplicates {
    /// Records that the page at `url`, on `host`, has `digest`. Returns the first URL of
    /// that host that had it, if it was another page (then this one is a near-duplicate).
    pub fn first_with(&self, host: &str, digest: u64, url: &str) -> Option<String> {
        let key = xxh3_64_with_seed(host.as_bytes(), digest);
        let mut memory = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(first) = memory.first.get(&key) {
            // The same URL again (a page fetched again after a resume) is not its own
            // duplicate.
            return (**first != *url).then(|| first.to_string());
        }
        if memory.order.len() >= MAX_ENTRIES {
            if let Some(oldest) = memory.order.pop_front() {
                memory.first.remove(&oldest);
            }
        }
        memory.first.insert(key, url.into());
        memory.order.push_back(key);
        None
    }

    /// Learns the digests recorded in the last [`TAIL_BYTES`] of the records file `path`
    /// (`pages.jsonl`), in file order, as if those pages had just been parsed; returns how
    /// many were learnt. A missing file teaches nothing; a line that does not parse (the
    /// first, cut by the seek, or one of another format) is skipped.
    pub fn learn_from_records(&self, path: &Path) -> std::io::Result<usize> {
        let mut file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
        let mut learnt = 0;
        for line in BufReader::new(file).split(b'\n') {
            let line = line?;
            let Ok(record) = serde_json::from_slice::<DigestLine>(&line) else {
                continue;
            };
            let Some(digest) = record
                .near_digest
                .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            else {
                continue;
            };
            let Ok(url) = url::Url::parse(&record.url) else {
                continue;
            };
            self.first_with(url.host_str().unwrap_or_default(), digest, url.as_str());
            learnt += 1;
        }
        Ok(learnt)
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .len()
    }

    /// Whether nothing is remembered yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(chunks: &[&[u8]]) -> u64 {
        let mut d = DigitlessDigest::default();
        for c in chunks {
            d.update(c);
        }
        d.finish()
    }

    #[test]
    fn pages_that_differ_only_in_digits_have_one_digest() {
        let nov = b"<h1>Calendar 2026-11</h1><a href=\"/cal/2026/10\">prev</a><a href=\"/cal/2026/12\">next</a>";
        let jan = b"<h1>Calendar 2027-1</h1><a href=\"/cal/2027/0\">prev</a><a href=\"/cal/2027/2\">next</a>";
        assert_eq!(digest_of(&[nov]), digest_of(&[jan]));
        let other = b"<h1>Calendar 2026-11</h1><a href=\"/cal/2026/10\">prev</a><a href=\"/cal/2026/12\">nxt</a>";
        assert_ne!(digest_of(&[nov]), digest_of(&[other]));
    }

    #[test]
    fn the_digest_does_not_depend_on_how_the_page_is_chunked() {
        // Long enough to cross several 32-byte blocks and a 4 KiB flush, digits everywhere.
        let page: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("<p>{i} word{}</p>", i % 7).into_bytes())
            .collect();
        let whole = digest_of(&[&page]);
        for size in [1, 7, 31, 32, 33, 4095, 4096, 10_000] {
            let chunks: Vec<&[u8]> = page.chunks(size).collect();
            assert_eq!(digest_of(&chunks), whole, "chunks of {size}");
        }
        let digitless: Vec<u8> = page
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_digit())
            .collect();
        assert_eq!(whole, xxhash_rust::xxh3::xxh3_64(&digitless));
    }

    #[test]
    fn a_digest_is_a_duplicate_only_on_the_same_host_and_another_url() {
        let seen = NearDuplicates::default();
        assert_eq!(seen.first_with("a.test", 7, "http://a.test/1"), None);
        assert_eq!(
            seen.first_with("a.test", 7, "http://a.test/2").as_deref(),
            Some("http://a.test/1")
        );
        assert_eq!(seen.first_with("a.test", 7, "http://a.test/1"), None);
        assert_eq!(seen.first_with("b.test", 7, "http://b.test/1"), None);
        assert_eq!(seen.first_with("a.test", 8, "http://a.test/3"), None);
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn a_resume_learns_the_digests_recorded_in_pages_jsonl() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.jsonl");
        let seen = NearDuplicates::default();
        assert_eq!(seen.learn_from_records(&path).unwrap(), 0);
        let lines = [
            format!(
                r#"{{"url":"http://a.test/cal/1","near_digest":"{}"}}"#,
                digest_field(7)
            ),
            r#"{"url":"http://a.test/robots","status":404}"#.to_string(),
            "{\"url\":\"http://a.te".to_string(),
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        assert_eq!(seen.learn_from_records(&path).unwrap(), 1);
        assert_eq!(
            seen.first_with("a.test", 7, "http://a.test/cal/2")
                .as_deref(),
            Some("http://a.test/cal/1")
        );
    }

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest_first() {
        let seen = NearDuplicates::default();
        for d in 0..(MAX_ENTRIES as u64 + 10) {
            seen.first_with("a.test", d, "u");
        }
        assert_eq!(seen.len(), MAX_ENTRIES);
        // The first ten were forgotten: their digests are new again.
        assert_eq!(seen.first_with("a.test", 0, "v"), None);
        assert_eq!(
            seen.first_with("a.test", MAX_ENTRIES as u64 + 9, "v")
                .as_deref(),
            Some("u")
        );
    }
}
