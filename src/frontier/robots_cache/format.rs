//! The data file's format (below), and the few reads and writes that know it: the file
//! header, a record's header encoded and checked, a record read back whole.
//!
//! # On-disk format (integers little-endian)
//!
//! Directory: [`DATA_FILE`](super::DATA_FILE) (`robots-cache.log`), and
//! [`COMPACT_FILE`](super::COMPACT_FILE) while a compaction writes it. Nothing else in the
//! directory is touched.
//!
//! File header, 16 bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLRBTC` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | zero |
//!
//! Then records back to back, no padding; a record at offset `o`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` (0 ..= 512,000, [`MAX_BODY`](super::MAX_BODY)) |
//! | 4 | 1 | kind: 0 = allow all (`L` = 0), 1 = body |
//! | 5 | 3 | zero |
//! | 8 | 8 | host id |
//! | 16 | 8 | expiry, Unix milliseconds |
//! | 24 | 8 | XXH3-64 of bytes 0..24 followed by the body |
//! | 32 | `L` | body: the robots.txt bytes as fetched |
//!
//! In memory, a location is `o << 24 | (32 + L)`: records end below 1 TiB
//! ([`RobotsCacheError::Full`] beyond).

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::RobotsCacheError;
use crate::durable::{self, checksum_of, FileError, Header, IoAt};

pub(super) const MAGIC: [u8; 8] = *b"CRWLRBTC";
pub(super) const VERSION: u32 = 1;
pub(super) const FILE_HEADER: u64 = 16;
pub(super) const RECORD_HEADER: usize = 32;
pub(super) const KIND_ALLOW_ALL: u8 = 0;
pub(super) const KIND_BODY: u8 = 1;
/// A location packs a record's offset (high 40 bits) and length (low 24 bits) in one `u64`.
pub(super) const LEN_BITS: u32 = 24;
pub(super) const LEN_MASK: u64 = (1 << LEN_BITS) - 1;
/// Records must end below this offset (1 TiB): the 40 bits of a location's offset.
pub(super) const MAX_END: u64 = 1 << (64 - LEN_BITS);

pub(super) fn pack(offset: u64, len: usize) -> u64 {
    offset << LEN_BITS | len as u64
}
pub(super) fn loc_offset(loc: u64) -> u64 {
    loc >> LEN_BITS
}
pub(super) fn loc_len(loc: u64) -> usize {
    (loc & LEN_MASK) as usize
}

/// A record's decoded header.
pub(super) struct RecordHeader {
    pub(super) body_len: u32,
    pub(super) kind: u8,
    pub(super) pad: [u8; 3],
    pub(super) host: u64,
    pub(super) expires_unix_ms: u64,
    pub(super) checksum: u64,
}

impl RecordHeader {
    pub(super) fn parse(h: &[u8; RECORD_HEADER]) -> RecordHeader {
        let h = Header::new(h);
        RecordHeader {
            body_len: h.u32(0),
            kind: h.u8(4),
            pad: h.array(5),
            host: h.u64(8),
            expires_unix_ms: h.u64(16),
            checksum: h.u64(24),
        }
    }
}

/// The checksum of a record: bytes 0..24 of its header, then its body.
pub(super) fn record_checksum(header: &[u8; RECORD_HEADER], body: &[u8]) -> u64 {
    checksum_of(&[&header[..24], body])
}

pub(super) fn encode_header(
    host: u64,
    expires_unix_ms: u64,
    kind: u8,
    body: &[u8],
) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    h[4] = kind;
    h[8..16].copy_from_slice(&host.to_le_bytes());
    h[16..24].copy_from_slice(&expires_unix_ms.to_le_bytes());
    let sum = record_checksum(&h, body);
    h[24..32].copy_from_slice(&sum.to_le_bytes());
    h
}

/// Checks a whole record (`rec`, read from `offset` of `path`) that the index says is
/// `host`'s: length, checksum, kind, host. Returns its header.
pub(super) fn verify(
    rec: &[u8],
    host: u64,
    path: &Path,
    offset: u64,
) -> Result<RecordHeader, FileError> {
    let Some((header, body)) = rec.split_first_chunk::<RECORD_HEADER>() else {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("record of {} bytes is shorter than its header", rec.len()),
        ));
    };
    let h = RecordHeader::parse(header);
    if h.body_len as usize != body.len() {
        return Err(FileError::corrupt(
            path,
            offset,
            format!(
                "length field says {} bytes of body, the index {}",
                h.body_len,
                body.len()
            ),
        ));
    }
    let sum = record_checksum(header, body);
    if sum != h.checksum {
        return Err(FileError::corrupt(
            path,
            offset,
            format!(
                "checksum mismatch (stored {:016x}, computed {sum:016x})",
                h.checksum
            ),
        ));
    }
    if h.pad != [0; 3] || !(h.kind == KIND_BODY || (h.kind == KIND_ALLOW_ALL && h.body_len == 0)) {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("kind {} with {} bytes of body", h.kind, h.body_len),
        ));
    }
    if h.host != host {
        return Err(FileError::corrupt(
            path,
            offset,
            format!("record is host {:016x}'s, not {host:016x}'s", h.host),
        ));
    }
    Ok(h)
}

pub(super) fn create_data_file(path: &Path) -> Result<File, RobotsCacheError> {
    let mut header = [0u8; FILE_HEADER as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    Ok(durable::create_with_header(path, &header)?)
}

/// Reads from `offset` until `buf` is full or the file ends; returns the bytes read.
pub(super) fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads `buf.len()` bytes at `offset`; a file that ends first is damage at `offset`.
pub(super) fn read_exact_at(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    path: &Path,
) -> Result<(), FileError> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == ErrorKind::UnexpectedEof {
            FileError::corrupt(
                path,
                offset,
                format!("the file ends before the record's {} bytes", buf.len()),
            )
        } else {
            IoAt {
                action: "read",
                path: path.to_path_buf(),
                source: e,
            }
            .into()
        }
    })
}
