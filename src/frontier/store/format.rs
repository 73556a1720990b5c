//! The store's byte formats: segment headers, blocks, items and table headers, and where
//! each file lives in the store's directory. Nothing here does I/O.
//!
//! # On-disk format (all integers little-endian)
//!
//! Directory: `seg-NNNNNNNN.log` (segment number, 8 decimal digits, from 1) and
//! `table-GGGGGGGGGGGGGGGG.bin` (generation, 16 decimal digits, from 1), plus `*.tmp` while a
//! table is written.
//!
//! Segment: a 16-byte header, then blocks back to back, each padded to a multiple of 8 bytes.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQSG` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | segment number |
//!
//! Block, at an 8-aligned offset `o` of a segment; its *location* is `segment << 32 | o`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` in bytes (1 ..= 64 MiB) |
//! | 4 | 4 | item count (≥ 1) |
//! | 8 | 8 | host id |
//! | 16 | 8 | block sequence number, strictly increasing along the log |
//! | 24 | 8 | XXH3-64 of bytes 0..24 followed by the body |
//! | 32 | 8 | `next`: location of the host's next block, 0 if none yet (patched later; not checksummed) |
//! | 40 | `L` | body: the items, one after another |
//! | 40+`L` | 0–7 | zero padding to a multiple of 8 |
//!
//! Item (a [`QueuedUrl`]): `u32` URL length, URL bytes (UTF-8), `u32` depth, `u32` parent length
//! or `0xFFFF_FFFF` for no parent, parent bytes, `u32` redirect hops, `u32` attempts.
//!
//! Table:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQTB` |
//! | 8 | 4 | format version, 1 |
//! | 12 | 4 | zero |
//! | 16 | 8 | generation |
//! | 24 | 8 | log end: location just past the last block written before the sync |
//! | 32 | 8 | next block sequence number |
//! | 40 | 8 | oldest segment this table needs |
//! | 48 | 8 | host count `H` |
//! | 56 | 8 | segment count `S` |
//! | 64 | | `H` host records: host id `u64`, head location `u64` (0 if nothing on disk), items popped from the head block `u32`, front item count `u32`, unread items on disk `u64`, tail location `u64`, then the front items (item format) |
//! | | | `S` segment records: segment number `u64`, unread items in it `u64` |
//! | end−8 | 8 | XXH3-64 of every byte before it |

use std::path::{Path, PathBuf};

use super::{QueuedUrl, StoreError};
use crate::durable::{checksum_of, Cursor, FileError, Header, TRAILER_LEN};

pub(super) const SEGMENT_MAGIC: [u8; 8] = *b"CRWLFQSG";
pub(super) const TABLE_MAGIC: [u8; 8] = *b"CRWLFQTB";
pub(super) const VERSION: u32 = 1;
pub(super) const SEGMENT_HEADER: u64 = 16;
pub(super) const BLOCK_HEADER: usize = 40;
pub(super) const NEXT_FIELD: u64 = 32;
pub(super) const MAX_BODY: u32 = 64 << 20;
pub(super) const NO_PARENT: u32 = u32::MAX;
/// Bytes of a table's header, and of the shortest table (a header and its trailer).
pub(super) const TABLE_HEADER: usize = 64;
pub(super) const TABLE_MIN: usize = TABLE_HEADER + TRAILER_LEN;

pub(super) fn loc(segment: u32, offset: u64) -> u64 {
    (segment as u64) << 32 | offset
}
pub(super) fn loc_segment(l: u64) -> u32 {
    (l >> 32) as u32
}
pub(super) fn loc_offset(l: u64) -> u64 {
    l & 0xFFFF_FFFF
}

pub(super) fn segment_path(dir: &Path, segment: u32) -> PathBuf {
    dir.join(format!("seg-{segment:08}.log"))
}
pub(super) fn table_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("table-{generation:016}.bin"))
}

pub(super) fn encode_item(out: &mut Vec<u8>, item: &QueuedUrl) {
    // Destructured so that a new field fails to compile here instead of being dropped.
    let QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops,
        attempts,
    } = item;
    out.extend_from_slice(&(url.len() as u32).to_le_bytes());
    out.extend_from_slice(url.as_bytes());
    out.extend_from_slice(&depth.to_le_bytes());
    match parent {
        Some(p) => {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            out.extend_from_slice(p.as_bytes());
        }
        None => out.extend_from_slice(&NO_PARENT.to_le_bytes()),
    }
    out.extend_from_slice(&redirect_hops.to_le_bytes());
    out.extend_from_slice(&attempts.to_le_bytes());
}

/// Decodes the next item (format in the module doc) at `c`; errors say what was expected.
pub(super) fn decode_item(c: &mut Cursor) -> Result<QueuedUrl, String> {
    fn string(c: &mut Cursor, len: u32) -> Result<String, String> {
        let b = c.take(len as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| "a string is not UTF-8".to_string())
    }
    let len = c.u32()?;
    let url = string(c, len)?;
    let depth = c.u32()?;
    let plen = c.u32()?;
    let parent = if plen == NO_PARENT {
        None
    } else {
        Some(string(c, plen)?)
    };
    Ok(QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops: c.u32()?,
        attempts: c.u32()?,
    })
}

/// A decoded block header.
pub(super) struct BlockHeader {
    pub(super) body_len: u32,
    pub(super) count: u32,
    pub(super) host: u64,
    pub(super) seq: u64,
    pub(super) checksum: u64,
    pub(super) next: u64,
}

impl BlockHeader {
    pub(super) fn parse(h: &[u8; BLOCK_HEADER]) -> BlockHeader {
        let h = Header::new(h);
        BlockHeader {
            body_len: h.u32(0),
            count: h.u32(4),
            host: h.u64(8),
            seq: h.u64(16),
            checksum: h.u64(24),
            next: h.u64(32),
        }
    }
    /// Bytes the block takes in its segment, padding included.
    pub(super) fn span(&self) -> u64 {
        (BLOCK_HEADER as u64 + self.body_len as u64).next_multiple_of(8)
    }
}

/// The checksum of a block: bytes 0..24 of its header, then its body.
pub(super) fn block_checksum(header: &[u8; BLOCK_HEADER], body: &[u8]) -> u64 {
    checksum_of(&[&header[..24], body])
}

#[derive(Debug, Clone)]
pub(super) struct TableHeader {
    pub(super) generation: u64,
    pub(super) log_end: u64,
    pub(super) next_seq: u64,
    pub(super) oldest_needed: u32,
    pub(super) hosts: u64,
    pub(super) segments: u64,
}

/// Parses the header of a table from its first bytes (the whole table, or at least
/// [`TABLE_MIN`] bytes of it).
pub(super) fn parse_table_header(path: &Path, bytes: &[u8]) -> Result<TableHeader, StoreError> {
    let header = bytes.first_chunk::<TABLE_HEADER>();
    let Some(h) = header.filter(|_| bytes.len() >= TABLE_MIN).map(Header::new) else {
        return Err(FileError::corrupt(
            path,
            0,
            format!("{} bytes, shorter than a table", bytes.len()),
        ));
    };
    if h.array(0) != TABLE_MAGIC {
        return Err(FileError::corrupt(
            path,
            0,
            "not a frontier table (bad magic)",
        ));
    }
    let version = h.u32(8);
    if version != VERSION {
        return Err(FileError::corrupt(
            path,
            8,
            format!("format version {version}"),
        ));
    }
    Ok(TableHeader {
        generation: h.u64(16),
        log_end: h.u64(24),
        next_seq: h.u64(32),
        oldest_needed: h.u64(40) as u32,
        hosts: h.u64(48),
        segments: h.u64(56),
    })
}
