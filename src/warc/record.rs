//! One WARC/1.1 record, built and gzip-compressed as a member of its own.
//!
//! A record is its header block (`WARC/1.1`, named fields, an empty line), its content block
//! and two CRLFs (ISO 28500 §4). Each record is compressed as one gzip member, so that an
//! offset and a length in a `.warc.gz` address exactly one record and a reader can start at
//! any of them (what CDXJ indexes and replay tools rely on).
//!
//! Digests are SHA-1 in base32 (`sha1:…`), the form every WARC tool reads: the block digest
//! covers the whole content block (HTTP head and body as kept), the payload digest only the
//! entity body as sent, still content-coded; a response's two are computed in one pass
//! ([`super::digest`]). Building a record is pure CPU and runs off the
//! driver's path (on the parse threads or a fetch task); only appending the finished
//! bytes is left to the output thread.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use sha1::{Digest, Sha1};
use uuid::Uuid;

/// A SHA-1 digest.
pub(crate) type Sha1Digest = [u8; 20];

/// `sha1:` and the digest in base32, as WARC headers and CDXJ carry it.
pub(crate) fn digest_label(digest: &Sha1Digest) -> String {
    DigestLabel::of(digest).as_str().to_owned()
}

/// A [`digest_label`] in place: a response's payload digest is written into its header and
/// into its `pages.jsonl` line, encoded once for both (see [`Sealed::payload_label`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DigestLabel([u8; DIGEST_LABEL_LEN]);

/// `sha1:` and 32 base32 digits.
const DIGEST_LABEL_LEN: usize = "sha1:".len() + 32;

impl DigestLabel {
    pub(crate) fn of(digest: &Sha1Digest) -> DigestLabel {
        let mut label = [0u8; DIGEST_LABEL_LEN];
        label[..5].copy_from_slice(b"sha1:");
        data_encoding::BASE32.encode_mut(digest, &mut label[5..]);
        DigestLabel(label)
    }

    pub(crate) fn as_str(&self) -> &str {
        // `sha1:` and base32 digits: ASCII, so UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// The digest of a `sha1:BASE32` label, if it is one.
pub(crate) fn parse_digest_label(label: &str) -> Option<Sha1Digest> {
    let encoded = label.strip_prefix("sha1:")?;
    let bytes = data_encoding::BASE32.decode(encoded.as_bytes()).ok()?;
    bytes.try_into().ok()
}

pub(crate) fn sha1_of(parts: &[&[u8]]) -> Sha1Digest {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// `<urn:uuid:…>`, the form of `WARC-Record-ID` and of the fields that refer to one.
pub(crate) fn record_id(id: Uuid) -> String {
    let mut text = String::with_capacity(RECORD_ID_LEN);
    push_record_id(&mut text, id);
    text
}

/// The length of a [`record_id`].
const RECORD_ID_LEN: usize = "<urn:uuid:>".len() + uuid::fmt::Hyphenated::LENGTH;

/// Appends [`record_id`]`(id)` to `text`: written straight from the uuid's digits, not
/// through `format!` (a fetch's records carry five of these, built on the parse threads).
fn push_record_id(text: &mut String, id: Uuid) {
    text.push_str("<urn:uuid:");
    text.push_str(id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
    text.push('>');
}

/// A WARC date: UTC, to the microsecond (WARC/1.1 allows fractions of a second).
pub(crate) fn warc_date(time: std::time::SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}

/// The named fields of a record, in the order they are added.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    text: String,
}

impl Fields {
    pub(crate) fn new(kind: &str, id: Uuid, date: &str) -> Fields {
        let mut fields = Fields {
            text: String::with_capacity(512),
        };
        fields.text.push_str("WARC/1.1\r\n");
        fields.add("WARC-Type", kind);
        fields.add_record_id("WARC-Record-ID", id);
        fields.add("WARC-Date", date);
        fields
    }

    /// Adds a field whose value is [`record_id`]`(id)`.
    pub(crate) fn add_record_id(&mut self, name: &str, id: Uuid) -> &mut Fields {
        self.text.push_str(name);
        self.text.push_str(": ");
        push_record_id(&mut self.text, id);
        self.text.push_str("\r\n");
        self
    }

    /// Adds one field. Values never contain a line break: those that come from outside
    /// (URLs) are already canonical, and anything else is replaced to keep the header valid.
    pub(crate) fn add(&mut self, name: &str, value: &str) -> &mut Fields {
        self.text.push_str(name);
        self.text.push_str(": ");
        if memchr::memchr2(b'\r', b'\n', value.as_bytes()).is_some() {
            self.text.push_str(&value.replace(['\r', '\n'], " "));
        } else {
            self.text.push_str(value);
        }
        self.text.push_str("\r\n");
        self
    }

    /// The header block for a content block of `length` bytes. An empty block has no
    /// `Content-Type` (WARC 1.1 asks for one where there is content to describe).
    fn finish(mut self, content_type: &str, length: usize) -> String {
        if length > 0 {
            self.add("Content-Type", content_type);
        }
        let _ = write!(self.text, "Content-Length: {length}\r\n\r\n");
        self.text
    }
}

/// The `level` that writes a member's deflate stream as stored blocks: for a payload that is
/// compressed already (see [`already_compressed`]). Never a configured level (those are 1–9).
pub(crate) const STORED: u32 = 0;

/// Whether a payload is compressed data already, so that deflating it again gains nothing
/// and costs the most: a content coding (`gzip`, `br`, … as sent) or a media type that is
/// compressed in itself. Measured on real-size pages coded gzip (zlib-rs level 1, thread CPU):
/// 131–170 MB/s to shrink them by 0–5%, against ~50 GB/s for the CRC and copy of stored
/// blocks; on a crawl of the web most HTML arrives coded, so most of the archive's
/// compression time went there.
pub(crate) fn already_compressed(content_coded: bool, media_type: Option<&str>) -> bool {
    content_coded
        || media_type.is_some_and(|t| {
            (t.starts_with("image/") && t != "image/svg+xml" && t != "image/bmp")
                || t.starts_with("video/")
                || t.starts_with("audio/")
                || t.starts_with("font/woff")
                || matches!(
                    t,
                    "application/zip"
                        | "application/gzip"
                        | "application/x-gzip"
                        | "application/zstd"
                        | "application/x-bzip2"
                        | "application/x-xz"
                        | "application/x-7z-compressed"
                        | "application/vnd.rar"
                )
        })
}

/// Compresses one record (header, the block's parts in order, the closing CRLFs) as a gzip
/// member; `level` [`STORED`] stores it.
pub(crate) fn member(fields: Fields, content_type: &str, block: &[&[u8]], level: u32) -> Vec<u8> {
    let length: usize = block.iter().map(|p| p.len()).sum();
    let head = fields.finish(content_type, length);
    let mut parts: Vec<&[u8]> = Vec::with_capacity(block.len() + 2);
    parts.push(head.as_bytes());
    parts.extend_from_slice(block);
    parts.push(b"\r\n\r\n");
    gzip_member(&parts, level)
}

thread_local! {
    /// This thread's deflate state, reset for each member. A fresh compressor allocates a
    /// few hundred KB of window and hash tables; one per record (two records a fetch) cost
    /// more than the compression itself (measured: 0.45 ms a page instead of 0.06 ms once
    /// those blocks were mapped and unmapped for each record).
    static DEFLATE: std::cell::RefCell<Option<(u32, flate2::Compress)>> =
        const { std::cell::RefCell::new(None) };
}

/// Records up to this size are stored, not compressed (see [`gzip_member`]).
const STORED_UP_TO: usize = 1024;

/// Largest stored deflate block (its length is 16 bits).
const STORED_BLOCK: usize = 0xffff;

/// The gzip header: magic, deflate, no flags, no time, no extra flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// `parts`, concatenated, as one gzip member (RFC 1952: header, raw deflate, CRC-32 and
/// length), with this thread's reused compressor, or as stored blocks for level [`STORED`].
pub(crate) fn gzip_member(parts: &[&[u8]], level: u32) -> Vec<u8> {
    gzip_member_of(parts, level, None)
}

/// [`gzip_member`], with the CRC-32 of `parts` when it is known already (a sealed response
/// record's, see [`Sealed::crc`]).
fn gzip_member_of(parts: &[&[u8]], level: u32, known_crc: Option<u32>) -> Vec<u8> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if total <= STORED_UP_TO || level == STORED {
        // A small record (a request, a revisit's head): compressing a few hundred bytes saves
        // little, and resetting the compressor's tables costs more than the whole record. A
        // compressed payload: see `already_compressed`.
        let mut out = Vec::with_capacity(stored_member_len(total));
        // Writing to a Vec cannot fail.
        let _ = write_stored_member(&mut out, parts, total, known_crc);
        return out;
    }
    // Compressed HTML is a fraction of its size; a quarter is a good first guess.
    let mut out = Vec::with_capacity(total / 4 + 64);
    out.extend_from_slice(&GZIP_HEADER);
    let mut crc = crc32fast::Hasher::new();
    DEFLATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compress = match slot.as_mut() {
            Some((at, compress)) if *at == level => {
                compress.reset();
                compress
            }
            _ => {
                let fresh = flate2::Compress::new(flate2::Compression::new(level), false);
                &mut slot.insert((level, fresh)).1
            }
        };
        for part in parts {
            if known_crc.is_none() {
                crc.update(part);
            }
            deflate_into(compress, part, &mut out, flate2::FlushCompress::None);
        }
        deflate_into(compress, &[], &mut out, flate2::FlushCompress::Finish);
    });
    let crc = known_crc.unwrap_or_else(|| crc.finalize());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out
}

/// The length of the gzip member that stores `total` bytes: the header and trailer (18
/// bytes), and 5 bytes per stored block (one empty block when there are no bytes).
pub(crate) fn stored_member_len(total: usize) -> usize {
    18 + 5 * total.div_ceil(STORED_BLOCK).max(1) + total
}

/// Writes `parts` (`total` bytes) to `out` as one gzip member of stored blocks of up to
/// [`STORED_BLOCK`] bytes, [`stored_member_len`] bytes in all (their CRC-32 computed unless
/// it is `known_crc`).
pub(crate) fn write_stored_member(
    out: &mut impl std::io::Write,
    parts: &[&[u8]],
    total: usize,
    known_crc: Option<u32>,
) -> std::io::Result<()> {
    stored_member_pieces(parts, total, known_crc, |piece| match piece {
        StoredPiece::Framing(bytes) => out.write_all(bytes),
        StoredPiece::Part(part, range) => out.write_all(&parts[part][range]),
    })
}

/// A piece of a stored gzip member, in file order: the member's own bytes (gzip header,
/// block headers, CRC and length), or a range of one of the parts it stores.
pub(crate) enum StoredPiece<'a> {
    Framing(&'a [u8]),
    Part(usize, std::ops::Range<usize>),
}

/// Walks the gzip member that stores `parts` (`total` bytes) in stored blocks of up to
/// [`STORED_BLOCK`] bytes, computing its CRC unless it is `known_crc` already, and hands
/// `emit` its pieces in order: what [`write_stored_member`] copies, and what the archive's
/// writer hands to the OS straight from the record's own buffers (`super::gather`), so that
/// a record stored is never copied in user space.
pub(crate) fn stored_member_pieces(
    parts: &[&[u8]],
    total: usize,
    known_crc: Option<u32>,
    mut emit: impl FnMut(StoredPiece<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    emit(StoredPiece::Framing(&GZIP_HEADER))?;
    let mut crc = crc32fast::Hasher::new();
    let mut left = total;
    let mut part = 0;
    let mut at = 0;
    loop {
        let block = left.min(STORED_BLOCK);
        left -= block;
        let mut block_head = [u8::from(left == 0), 0, 0, 0, 0]; // BFINAL on the last, BTYPE = stored
        block_head[1..3].copy_from_slice(&(block as u16).to_le_bytes());
        block_head[3..5].copy_from_slice(&(!(block as u16)).to_le_bytes());
        emit(StoredPiece::Framing(&block_head))?;
        let mut need = block;
        while need > 0 {
            let Some(piece) = parts.get(part) else {
                // `total` is the parts' sum: they cannot run out first.
                break;
            };
            let take = need.min(piece.len() - at);
            if take > 0 {
                if known_crc.is_none() {
                    crc.update(&piece[at..at + take]);
                }
                emit(StoredPiece::Part(part, at..at + take))?;
            }
            at += take;
            need -= take;
            if at == piece.len() {
                part += 1;
                at = 0;
            }
        }
        if left == 0 {
            break;
        }
    }
    let mut trailer = [0u8; 8];
    let crc = known_crc.unwrap_or_else(|| crc.finalize());
    trailer[..4].copy_from_slice(&crc.to_le_bytes());
    trailer[4..].copy_from_slice(&(total as u32).to_le_bytes());
    emit(StoredPiece::Framing(&trailer))
}

/// Feeds `input` to `compress`, growing `out` as needed, until all of it is taken (and, for
/// `Finish`, until the stream ends). Compressing into memory cannot fail; a status that
/// makes no progress ends the loop rather than spinning.
fn deflate_into(
    compress: &mut flate2::Compress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: flate2::FlushCompress,
) {
    loop {
        if out.capacity() - out.len() < 4096 {
            out.reserve(out.capacity().max(8192));
        }
        let before_in = compress.total_in();
        let before_out = compress.total_out();
        let status = compress.compress_vec(input, out, flush);
        let taken = (compress.total_in() - before_in) as usize;
        input = &input[taken.min(input.len())..];
        let progressed = taken > 0 || compress.total_out() > before_out;
        match status {
            Ok(flate2::Status::StreamEnd) => return,
            Ok(_) if input.is_empty() && flush == flate2::FlushCompress::None => return,
            Ok(_) if progressed || out.capacity() == out.len() => continue,
            _ => return,
        }
    }
}

/// What the archive writes for one fetch that ended: its response (or, for a payload already
/// archived, a revisit) and its request. Built off the driver's path; the output thread
/// decides response or revisit (it owns the digest index) and appends.
#[derive(Debug)]
pub(crate) struct ArchivedFetch {
    pub(crate) target_uri: String,
    pub(crate) date: String,
    /// The id the response record has, and a revisit written instead takes.
    pub(crate) response_id: Uuid,
    pub(crate) warcinfo_id: Uuid,
    /// The response record: its header and block, and its gzip member once made (see
    /// [`ResponseRecord`]). Shared with the deflate threads while they work on it.
    pub(crate) response: Arc<ResponseRecord>,
    pub(crate) request_member: Vec<u8>,
    /// Entity-body bytes as sent (what a revisit saves).
    pub(crate) payload_bytes: u64,
    pub(crate) peer: Option<IpAddr>,
    pub(crate) http2: bool,
    /// The original of this payload that another process of a distributed crawl archived
    /// (from Redis: `crate::distributed`'s `payloads.rs`), for the writer to refer to when
    /// its own index knows none.
    pub(crate) shared_original: Option<Original>,
    /// Set for a `304 Not Modified` to a recrawl's conditional request: written as a
    /// `revisit` of profile server-not-modified referring to what this names.
    pub(crate) not_modified: Option<Box<NotModified>>,
}

impl ArchivedFetch {
    /// Whether the records can be written as they are meant to be: the response's digests
    /// are computed, and its member is deflated or is one that is stored anyway.
    pub(crate) fn made(&self) -> bool {
        self.response.made()
    }

    /// SHA-1 of the payload as sent: what decides revisit or response. Computed by the
    /// first that asks, if nobody computed it yet (see [`ResponseRecord::seal`]).
    pub(crate) fn payload_digest(&self) -> Sha1Digest {
        self.response.seal().payload_digest
    }

    /// Memory these records hold until written (what the output thread's waiting room
    /// counts).
    pub(crate) fn held_bytes(&self) -> usize {
        self.response.held_bytes() + self.request_member.len()
    }
}

/// A response record whose digests and gzip member are made when there is CPU for them. Its
/// named fields but the two digests are final when the fetch ends; the digests (and with
/// them the header, [`ResponseRecord::seal`]) and deflating the block can wait: a deflate
/// thread makes both ([`ResponseRecord::deflate`]), and if the output thread must write the
/// record first, it computes the digests itself and writes the bytes as a stored member
/// ([`ResponseRecord::member`]). Both are the same record to every reader.
#[derive(Debug)]
pub(crate) struct ResponseRecord {
    /// The record's header block (`WARC/1.1` to the empty line) without its digest fields,
    /// which go at `digests_at`; empty once deflated in place.
    fields: String,
    digests_at: usize,
    /// The digests and the whole header, once computed.
    sealed: OnceLock<Sealed>,
    /// The HTTP status line and headers as received: the block's start, and the whole
    /// block of a revisit written instead.
    pub(crate) head: Vec<u8>,
    /// The entity body as sent; empty once deflated in place.
    payload: Vec<u8>,
    /// The level to deflate at, or [`STORED`] for a record stored anyway (a compressed
    /// payload, level 0, a record too small to gain).
    level: u32,
    deflated: OnceLock<Vec<u8>>,
    /// The output thread writes the record as it is: no deflate thread starts on it.
    withdrawn: AtomicBool,
}

/// What a response record's digests settle: its header, whole, and the payload digest.
#[derive(Debug)]
pub(crate) struct Sealed {
    /// Empty once deflated in place.
    header: String,
    pub(crate) payload_digest: Sha1Digest,
    /// The payload digest's label, as the header carries it.
    pub(crate) payload_label: DigestLabel,
    /// The CRC-32 of the record's bytes ([`ResponseRecord::parts`]): its gzip member's, stored
    /// or deflated. Computed with the digests, where they are: a thread of idle priority
    /// that seals a record leaves the output thread only the write of a record stored (the
    /// CRC was ~3% of its CPU), and one that deflates it takes the CRC from here; the output
    /// thread, sealing a record nobody got to, computes it once as it did before.
    pub(crate) crc: u32,
}

/// The bytes the two digest fields take in a response's header (labels are fixed-length:
/// `sha1:` and 32 base32 digits).
const DIGEST_FIELDS_LEN: usize = "WARC-Block-Digest: ".len()
    + "WARC-Payload-Digest: ".len()
    + 2 * (DIGEST_LABEL_LEN + "\r\n".len());

/// A response record's gzip member as the output thread writes it.
pub(crate) enum Member<'a> {
    /// Made already: deflated (by a deflate thread, or where the fetch ended), or a record
    /// built whole (a revisit).
    Made(&'a [u8]),
    /// To be written stored: these parts, in order, and their CRC-32 ([`Sealed::crc`]).
    Stored([&'a [u8]; 4], u32),
}

impl Member<'_> {
    /// Its length in the file.
    pub(crate) fn len(&self) -> usize {
        match self {
            Member::Made(bytes) => bytes.len(),
            Member::Stored(parts, _) => stored_member_len(parts.iter().map(|p| p.len()).sum()),
        }
    }

    pub(crate) fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        match self {
            Member::Made(bytes) => out.write_all(bytes),
            Member::Stored(parts, crc) => {
                write_stored_member(out, parts, parts.iter().map(|p| p.len()).sum(), Some(*crc))
            }
        }
    }
}

impl ResponseRecord {
    /// What a stored member holds, in order: the header (digests computed now if they are
    /// not yet), the HTTP head, the payload, the closing CRLFs.
    pub(crate) fn parts(&self) -> [&[u8]; 4] {
        self.parts_under(&self.seal().header)
    }

    /// The record's bytes under `header`: what [`Self::parts`] hands out, and what the CRC
    /// of [`Sealed`] covers.
    fn parts_under<'a>(&'a self, header: &'a str) -> [&'a [u8]; 4] {
        [header.as_bytes(), &self.head, &self.payload, b"\r\n\r\n"]
    }

    /// The block and payload digests, computed now if nobody did yet, and the header with
    /// them. Two threads may compute them at once (a deflate thread and the output thread,
    /// which must not wait for a thread of idle priority): the first to finish keeps its
    /// result, the same bytes either way.
    pub(crate) fn seal(&self) -> &Sealed {
        if let Some(sealed) = self.sealed.get() {
            return sealed;
        }
        self.seal_with(super::digest::block_and_payload(&self.head, &self.payload))
    }

    /// Seals up to [`super::digest::MANY`] records at once, those not sealed yet
    /// ([`super::digest::blocks_and_payloads_of_many`]: their streams side by side where
    /// the CPU has AVX-512 and that is faster, else two records at a time): what a deflate
    /// thread does with the newest records waiting, and the output thread with the records
    /// it must write that no idle thread digested.
    pub(crate) fn seal_many(records: &[&ResponseRecord]) {
        let todo: Vec<&ResponseRecord> =
            records.iter().copied().filter(|r| !r.is_sealed()).collect();
        let blocks: Vec<(&[u8], &[u8])> = todo
            .iter()
            .map(|r| (r.head.as_slice(), r.payload.as_slice()))
            .collect();
        for (record, digests) in todo
            .iter()
            .zip(super::digest::blocks_and_payloads_of_many(&blocks))
        {
            record.seal_with(digests);
        }
    }

    /// The header with these digests, kept unless another thread sealed the record first.
    fn seal_with(&self, (block_digest, payload_digest): (Sha1Digest, Sha1Digest)) -> &Sealed {
        let (before, after) = self.fields.split_at(self.digests_at);
        let payload_label = DigestLabel::of(&payload_digest);
        let mut header = String::with_capacity(self.fields.len() + DIGEST_FIELDS_LEN);
        header.push_str(before);
        for (name, label) in [
            ("WARC-Block-Digest: ", DigestLabel::of(&block_digest)),
            ("WARC-Payload-Digest: ", payload_label),
        ] {
            header.push_str(name);
            header.push_str(label.as_str());
            header.push_str("\r\n");
        }
        header.push_str(after);
        let mut crc = crc32fast::Hasher::new();
        for part in self.parts_under(&header) {
            crc.update(part);
        }
        let crc = crc.finalize();
        self.sealed.get_or_init(|| Sealed {
            header,
            payload_digest,
            payload_label,
            crc,
        })
    }

    /// The deflated member, once made.
    pub(crate) fn deflated(&self) -> Option<&[u8]> {
        self.deflated.get().map(Vec::as_slice)
    }

    /// Whether the digests are computed.
    pub(crate) fn is_sealed(&self) -> bool {
        self.sealed.get().is_some()
    }

    /// Marks the record as being written as it is (see [`super::deflate_pool`]).
    pub(crate) fn withdraw(&self) {
        self.withdrawn.store(true, Ordering::Relaxed);
    }

    pub(crate) fn withdrawn(&self) -> bool {
        self.withdrawn.load(Ordering::Relaxed)
    }

    /// Computes the digests and makes the deflated member, unless the record is stored
    /// anyway or it is made already.
    pub(crate) fn deflate(&self) {
        if self.made() {
            return;
        }
        let crc = self.seal().crc;
        if self.level != STORED {
            let _ = self
                .deflated
                .set(gzip_member_of(&self.parts(), self.level, Some(crc)));
        }
    }

    /// Deflates now and lets the header and payload go: the records made where the fetch
    /// ended (`output.warc_deflate = "always"`).
    pub(crate) fn deflate_in_place(&mut self) {
        self.deflate();
        if self.deflated.get().is_some() {
            self.fields = String::new();
            self.digests_at = 0;
            self.payload = Vec::new();
            if let Some(sealed) = self.sealed.get_mut() {
                sealed.header = String::new();
            }
        }
    }

    /// Whether the member is as it is meant to be: digests computed, and deflated or stored
    /// anyway.
    pub(crate) fn made(&self) -> bool {
        self.sealed.get().is_some() && (self.level == STORED || self.deflated.get().is_some())
    }

    /// The member to write now: deflated if it is, else stored. Taken once, so that the
    /// length a file's rotation counts is that of the bytes written, even if a deflate
    /// thread finishes meanwhile.
    pub(crate) fn member(&self) -> Member<'_> {
        match self.deflated.get() {
            Some(bytes) => Member::Made(bytes),
            None => Member::Stored(self.parts(), self.seal().crc),
        }
    }

    fn held_bytes(&self) -> usize {
        self.fields.len()
            + self.head.len()
            + self.payload.capacity()
            + self.deflated.get().map_or(0, Vec::len)
    }
}

/// What a `304 Not Modified` stands for: the payload an earlier generation archived for
/// the URL. The writer finds its original record by `payload_digest` in the digest index
/// (the record that holds the bytes, even when the URL's last fetch was itself a revisit),
/// else takes `original`, the URL's own last response record.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotModified {
    pub(crate) payload_digest: Option<Sha1Digest>,
    pub(crate) original: Option<Original>,
}

/// Where the original of a duplicate payload is: what a revisit record refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Original {
    pub(crate) target_uri: String,
    pub(crate) date: String,
    pub(crate) record_id: String,
}

pub(crate) const HTTP_RESPONSE: &str = "application/http; msgtype=response";
pub(crate) const HTTP_REQUEST: &str = "application/http; msgtype=request";
pub(crate) const REVISIT_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";
pub(crate) const NOT_MODIFIED_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/server-not-modified";

/// The fields every record of a fetch carries.
fn fetch_fields(kind: &str, id: Uuid, fetch: &FetchParts<'_>) -> Fields {
    let mut fields = Fields::new(kind, id, &fetch.date);
    // The rest of the fields, the URI aside, take ~250 bytes: one allocation for the header.
    fields.text.reserve(fetch.target_uri.len() + 256);
    fields.add("WARC-Target-URI", fetch.target_uri);
    if let Some(ip) = fetch.peer {
        // An address's text has no line break: written in place, not through a String.
        let _ = write!(fields.text, "WARC-IP-Address: {ip}\r\n");
    }
    if fetch.http2 {
        fields.add("WARC-Protocol", "h2");
    }
    fields.add_record_id("WARC-Warcinfo-ID", fetch.warcinfo_id);
    fields
}

/// The parts of one fetch that go into its records.
pub(crate) struct FetchParts<'a> {
    pub(crate) target_uri: &'a str,
    pub(crate) date: String,
    pub(crate) warcinfo_id: Uuid,
    pub(crate) request_head: &'a [u8],
    pub(crate) response_head: &'a [u8],
    pub(crate) payload: &'a [u8],
    pub(crate) peer: Option<IpAddr>,
    pub(crate) http2: bool,
    pub(crate) truncated: bool,
    /// The payload is compressed data already ([`already_compressed`]): its record is
    /// stored, not deflated again.
    pub(crate) payload_compressed: bool,
}

/// Builds and compresses the response and request records of one fetch, now (the tests'
/// records; the crawl's are built by `Archiver`).
#[cfg(test)]
pub(crate) fn encode_fetch(fetch: FetchParts<'_>, level: u32) -> ArchivedFetch {
    let block = (fetch.response_head.to_vec(), fetch.payload.to_vec());
    let mut archived = prepare(&fetch, level).with_block(block);
    if let Some(response) = Arc::get_mut(&mut archived.response) {
        response.deflate_in_place();
    }
    archived
}

/// A fetch's records but for the response's block (which [`FetchParts`] lends) and its
/// digests: the response's named fields, the request record.
pub(crate) struct Prepared {
    target_uri: String,
    date: String,
    response_id: Uuid,
    warcinfo_id: Uuid,
    fields: String,
    digests_at: usize,
    level: u32,
    request_member: Vec<u8>,
    peer: Option<IpAddr>,
    http2: bool,
}

/// The response's named fields and the request record of `fetch`: what is built where the
/// fetch ends. The response's digests are not: whoever needs them first computes them
/// ([`ResponseRecord::seal`]): where the fetch ends when the crawl needs the payload digest
/// there (a distributed crawl asks Redis by it before the output thread sees the fetch), a
/// deflate thread when it gets there first, else the output thread.
pub(crate) fn prepare(fetch: &FetchParts<'_>, level: u32) -> Prepared {
    let response_id = Uuid::new_v4();
    let request_id = Uuid::new_v4();
    let mut response = fetch_fields("response", response_id, fetch);
    if fetch.truncated {
        response.add("WARC-Truncated", "length");
    }
    let digests_at = response.text.len();
    let block = fetch.response_head.len() + fetch.payload.len();
    let fields = response.finish(HTTP_RESPONSE, block);
    let total = fields.len() + DIGEST_FIELDS_LEN + block + 4;
    let response_level = if fetch.payload_compressed || total <= STORED_UP_TO {
        STORED
    } else {
        level
    };
    let mut request = fetch_fields("request", request_id, fetch);
    request.add_record_id("WARC-Concurrent-To", response_id);
    request.add(
        "WARC-Block-Digest",
        &digest_label(&sha1_of(&[fetch.request_head])),
    );
    Prepared {
        target_uri: fetch.target_uri.to_string(),
        date: fetch.date.clone(),
        response_id,
        warcinfo_id: fetch.warcinfo_id,
        fields,
        digests_at,
        level: response_level,
        request_member: member(request, HTTP_REQUEST, &[fetch.request_head], level),
        peer: fetch.peer,
        http2: fetch.http2,
    }
}

impl Prepared {
    /// The records, with the response's block: `(head, payload)`, the same bytes as the
    /// [`FetchParts`] this was prepared from, now owned (taken from the fetch, not copied,
    /// where the fetch is done with them).
    pub(crate) fn with_block(self, (head, payload): (Vec<u8>, Vec<u8>)) -> ArchivedFetch {
        ArchivedFetch {
            target_uri: self.target_uri,
            date: self.date,
            response_id: self.response_id,
            warcinfo_id: self.warcinfo_id,
            payload_bytes: payload.len() as u64,
            response: Arc::new(ResponseRecord {
                fields: self.fields,
                digests_at: self.digests_at,
                sealed: OnceLock::new(),
                withdrawn: AtomicBool::new(false),
                head,
                payload,
                level: self.level,
                deflated: OnceLock::new(),
            }),
            request_member: self.request_member,
            peer: self.peer,
            http2: self.http2,
            not_modified: None,
            shared_original: None,
        }
    }
}

/// The revisit record that stands for `fetch`'s response when its payload is `original`'s:
/// the HTTP head as block, the payload by reference (profile identical-payload-digest).
pub(crate) fn revisit_member(fetch: &ArchivedFetch, original: &Original, level: u32) -> Vec<u8> {
    revisit_with(
        fetch,
        original,
        (REVISIT_PROFILE, Some(&fetch.payload_digest())),
        (&fetch.response.head, level),
    )
}

/// The revisit record of a `304 Not Modified` (profile server-not-modified): referring to
/// `original`, whose payload digest it carries when known (the digest of the payload it says
/// is unchanged, as WARC 1.1 §6.7.3 allows, which lets replay tools find the original by
/// digest as well as by URI and date), with an **empty block**.
///
/// Why empty, where an identical-payload revisit keeps its response's head: replay tools
/// answer a revisit with the HTTP head in its block and the original's payload (pywb since
/// webrecorder/pywb#751), and a head whose status is 3xx as a redirect without payload
/// (pywb's `resolvingloader.py`, "always replay zero-length payload"): with the 304's head
/// in the block, pywb 2.10 replayed the page as an empty 304. A revisit without a head is
/// answered with the original's head and payload (warcio reads it as "empty revisit with no
/// http headers, is ok"), which is what the 304 said: the page is the one archived then.
/// What is not archived is the 304's own header fields; the journal's record keeps the
/// validators it carried (`etag`, `last_modified`). It also makes the record ~300 bytes
/// smaller.
pub(crate) fn not_modified_member(
    fetch: &ArchivedFetch,
    original: &Original,
    payload_digest: Option<&Sha1Digest>,
    level: u32,
) -> Vec<u8> {
    revisit_with(
        fetch,
        original,
        (NOT_MODIFIED_PROFILE, payload_digest),
        (&[], level),
    )
}

fn revisit_with(
    fetch: &ArchivedFetch,
    original: &Original,
    (profile, payload_digest): (&str, Option<&Sha1Digest>),
    (block, level): (&[u8], u32),
) -> Vec<u8> {
    let mut fields = Fields::new("revisit", fetch.response_id, &fetch.date);
    fields.add("WARC-Target-URI", &fetch.target_uri);
    if let Some(ip) = fetch.peer {
        fields.add("WARC-IP-Address", &ip.to_string());
    }
    if fetch.http2 {
        fields.add("WARC-Protocol", "h2");
    }
    fields.add_record_id("WARC-Warcinfo-ID", fetch.warcinfo_id);
    fields.add("WARC-Profile", profile);
    fields.add("WARC-Refers-To", &original.record_id);
    fields.add("WARC-Refers-To-Target-URI", &original.target_uri);
    fields.add("WARC-Refers-To-Date", &original.date);
    fields.add("WARC-Block-Digest", &digest_label(&sha1_of(&[block])));
    if let Some(digest) = payload_digest {
        fields.add("WARC-Payload-Digest", &digest_label(digest));
    }
    member(fields, HTTP_RESPONSE, &[block], level)
}

/// The `warcinfo` record that opens each file: what wrote it and how the crawl was set up
/// (`application/warc-fields`, one `name: value` per line).
pub(crate) fn warcinfo_member(
    id: Uuid,
    date: &str,
    filename: &str,
    info: &[(&str, String)],
    level: u32,
) -> Vec<u8> {
    let mut fields = Fields::new("warcinfo", id, date);
    fields.add("WARC-Filename", filename);
    let mut block = String::new();
    for (name, value) in info {
        let _ = write!(block, "{name}: {}\r\n", value.replace(['\r', '\n'], " "));
    }
    let digest = sha1_of(&[block.as_bytes()]);
    fields.add("WARC-Block-Digest", &digest_label(&digest));
    member(
        fields,
        "application/warc-fields",
        &[block.as_bytes()],
        level,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn record_ids_are_urn_uuids_as_uuid_formats_them() {
        for id in [Uuid::nil(), Uuid::max(), Uuid::new_v4(), Uuid::new_v4()] {
            let text = record_id(id);
            assert_eq!(text, format!("<urn:uuid:{id}>"));
            assert_eq!(text.len(), RECORD_ID_LEN);
            let mut fields = Fields::default();
            fields.add_record_id("WARC-Concurrent-To", id);
            assert_eq!(fields.text, format!("WARC-Concurrent-To: {text}\r\n"));
        }
    }

    /// The response's member as the output thread would write it now.
    fn response_member(fetch: &ArchivedFetch) -> Vec<u8> {
        let mut out = Vec::new();
        fetch.response.member().write_to(&mut out).unwrap();
        out
    }

    fn gunzip(member: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(member)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn parts<'a>(payload: &'a [u8], head: &'a [u8]) -> FetchParts<'a> {
        FetchParts {
            target_uri: "http://example.test/a?b=c",
            date: "2026-11-23T16:00:00.000001Z".into(),
            warcinfo_id: Uuid::nil(),
            request_head: b"GET /a?b=c HTTP/1.1\r\nhost: example.test\r\n\r\n",
            response_head: head,
            payload,
            peer: Some("127.0.0.1".parse().unwrap()),
            http2: false,
            truncated: false,
            payload_compressed: false,
        }
    }

    #[test]
    fn digests_are_sha1_in_base32() {
        // The SHA-1 of the empty string, as every WARC writer labels it.
        assert_eq!(
            digest_label(&sha1_of(&[b""])),
            "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
        );
        let d = sha1_of(&[b"abc"]);
        assert_eq!(parse_digest_label(&digest_label(&d)), Some(d));
        assert_eq!(parse_digest_label("sha1:not base32"), None);
        assert_eq!(parse_digest_label("md5:AAAA"), None);
    }

    #[test]
    fn a_response_record_is_one_member_with_exact_length_and_digests() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n";
        let payload = b"<html>hello</html>";
        let fetch = encode_fetch(parts(payload, head), 6);
        let text = gunzip(&response_member(&fetch));
        let split = text.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let header = std::str::from_utf8(&text[..split]).unwrap();
        assert!(header.starts_with("WARC/1.1\r\nWARC-Type: response\r\n"));
        let block = &text[split + 4..text.len() - 4];
        assert_eq!(&text[text.len() - 4..], b"\r\n\r\n");
        assert!(header.contains(&format!("Content-Length: {}", block.len())));
        assert_eq!(block, [&head[..], &payload[..]].concat());
        assert!(header.contains(&format!(
            "WARC-Payload-Digest: {}",
            digest_label(&sha1_of(&[payload]))
        )));
        assert!(header.contains(&format!(
            "WARC-Block-Digest: {}",
            digest_label(&sha1_of(&[block]))
        )));
        assert!(header.contains("WARC-IP-Address: 127.0.0.1"));
        assert!(!header.contains("WARC-Truncated"));
        let request = String::from_utf8(gunzip(&fetch.request_member)).unwrap();
        assert!(request.contains(&format!(
            "WARC-Concurrent-To: {}",
            record_id(fetch.response_id)
        )));
        assert!(request.contains("Content-Type: application/http; msgtype=request"));
    }

    #[test]
    fn digests_left_for_later_are_the_ones_computed_at_once() {
        // The crawl leaves the digests to whoever needs them first; the record is the same
        // bytes as one whose digests were computed where it was built.
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n";
        let payload = b"<p>later</p>".repeat(200);
        let mut truncated = parts(&payload, head);
        truncated.truncated = true;
        for fetch in [parts(&payload, head), truncated] {
            let block = (head.to_vec(), payload.clone());
            let later = prepare(&fetch, 1).with_block(block.clone());
            assert!(later.response.sealed.get().is_none() && !later.made());
            let fields = later.response.fields.len();
            let now = encode_fetch(fetch, 1);
            assert_eq!(later.payload_digest(), sha1_of(&[&payload]));
            assert_eq!(later.payload_digest(), now.payload_digest());
            let text = gunzip(&response_member(&later));
            // The same record but for its id (a new one each time).
            let without_id = |text: &[u8]| {
                String::from_utf8_lossy(text)
                    .lines()
                    .filter(|l| !l.starts_with("WARC-Record-ID: "))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert!(
                without_id(&text) == without_id(&gunzip(&response_member(&now))),
                "records differ"
            );
            // What the level was chosen by: the header's length, digests included.
            let header = text.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            assert_eq!(header, fields + DIGEST_FIELDS_LEN);
            assert!(text.starts_with(b"WARC/1.1\r\nWARC-Type: response\r\n"));
        }
    }

    #[test]
    fn a_revisit_refers_to_its_original_and_keeps_only_the_head() {
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        let fetch = encode_fetch(parts(b"same bytes", head), 1);
        let original = Original {
            target_uri: "http://example.test/first".into(),
            date: "2026-11-23T15:00:00Z".into(),
            record_id: "<urn:uuid:00000000-0000-0000-0000-000000000001>".into(),
        };
        let text = String::from_utf8(gunzip(&revisit_member(&fetch, &original, 1))).unwrap();
        assert!(text.contains("WARC-Type: revisit\r\n"));
        assert!(text.contains(&format!("WARC-Profile: {REVISIT_PROFILE}\r\n")));
        assert!(text.contains("WARC-Refers-To-Target-URI: http://example.test/first\r\n"));
        assert!(text.contains(&format!("Content-Length: {}\r\n", head.len())));
        assert!(text.ends_with("HTTP/1.1 200 OK\r\n\r\n\r\n\r\n"));
    }

    #[test]
    fn a_not_modified_revisit_has_its_profile_and_refers_to_the_original() {
        let head = b"HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n";
        let fetch = encode_fetch(parts(b"", head), 1);
        let original = Original {
            target_uri: "http://example.test/a?b=c".into(),
            date: "2026-11-23T15:00:00Z".into(),
            record_id: "<urn:uuid:00000000-0000-0000-0000-000000000002>".into(),
        };
        let digest = sha1_of(&[b"the page as first archived"]);
        let member = not_modified_member(&fetch, &original, Some(&digest), 1);
        let text = String::from_utf8(gunzip(&member)).unwrap();
        assert!(text.contains("WARC-Type: revisit\r\n"));
        assert!(text.contains(&format!("WARC-Profile: {NOT_MODIFIED_PROFILE}\r\n")));
        assert!(text.contains(&format!("WARC-Refers-To: {}\r\n", original.record_id)));
        assert!(text.contains("WARC-Refers-To-Date: 2026-11-23T15:00:00Z\r\n"));
        assert!(text.contains(&format!(
            "WARC-Payload-Digest: {}\r\n",
            digest_label(&digest)
        )));
        // No head in the block: replay takes the original's (see `not_modified_member`).
        assert!(text.contains("Content-Length: 0\r\n\r\n\r\n\r\n"), "{text}");
        assert!(
            text.ends_with("Content-Length: 0\r\n\r\n\r\n\r\n"),
            "{text}"
        );
        assert!(!text.contains("304"), "{text}");
        assert!(!text.contains("Content-Type"), "{text}");
    }

    #[test]
    fn members_from_the_reused_compressor_decode_to_their_input() {
        // Incompressible and compressible, empty and over the compressor's buffers, at two
        // levels in turn on one thread (the state is reset, or rebuilt for a new level).
        let mut noise = Vec::with_capacity(1 << 20);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        while noise.len() < 1 << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.extend_from_slice(&x.to_le_bytes());
        }
        let text = b"<a href=\"/p/1\">one</a> ".repeat(20_000);
        for level in [1, 6, STORED, 1] {
            for input in [
                &b""[..],
                b"x",
                &text[..1020],
                &text,
                &noise,
                &noise[..70_001],
            ] {
                let member = gzip_member(&[input, b"tail"], level);
                let mut expected = input.to_vec();
                expected.extend_from_slice(b"tail");
                assert_eq!(
                    gunzip(&member),
                    expected,
                    "level {level}, {} bytes",
                    input.len()
                );
            }
        }
    }

    #[test]
    fn a_compressed_payload_is_stored_and_reads_back_the_same() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n\r\n";
        // Stored blocks hold at most 65,535 bytes: a payload across three of them, with the
        // head's bytes at the start of the first.
        let payload: Vec<u8> = (0..150_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut coded = parts(&payload, head);
        coded.payload_compressed = true;
        let stored = encode_fetch(coded, 1);
        let deflated = encode_fetch(parts(&payload, head), 1);
        let (stored_member, deflated_member) =
            (response_member(&stored), response_member(&deflated));
        let text = gunzip(&stored_member);
        let block = [&head[..], &payload[..], b"\r\n\r\n"].concat();
        assert!(text.ends_with(&block));
        assert!(gunzip(&deflated_member).ends_with(&block));
        // Stored: the bytes plus 5 per block, the gzip header and trailer.
        assert_eq!(stored_member.len(), text.len() + 5 * 3 + 18);
        assert_eq!(stored_member.len(), stored.response.member().len());
        assert_eq!(stored.payload_digest(), deflated.payload_digest());
        assert!(deflated_member.len() < stored_member.len());
    }

    #[test]
    fn compressed_payloads_are_told_by_coding_and_media_type() {
        assert!(already_compressed(true, Some("text/html")));
        assert!(already_compressed(false, Some("image/png")));
        assert!(already_compressed(false, Some("application/zip")));
        assert!(!already_compressed(false, Some("text/html")));
        assert!(!already_compressed(false, Some("image/svg+xml")));
        assert!(!already_compressed(false, None));
    }

    #[test]
    fn field_values_cannot_break_the_header() {
        let mut fields = Fields::new("warcinfo", Uuid::nil(), "d");
        fields.add("X", "a\r\nWARC-Type: evil");
        let text = fields.finish("text/plain", 0);
        assert_eq!(text.matches("\r\nWARC-Type").count(), 1);
    }
}
