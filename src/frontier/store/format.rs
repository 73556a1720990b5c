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
//! | 8 | 4 | format version, 2 |
//! | 12 | 4 | segment number |
//!
//! Block, at an 8-aligned offset `o` of a segment; its *location* is `segment << 32 | o`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` in bytes (1 ..= 64 MiB) |
//! | 4 | 2 | item count (≥ 1) |
//! | 6 | 1 | flags: bit 0, the body is LZ4-compressed; the other bits are zero |
//! | 7 | 1 | zero |
//! | 8 | 8 | host id |
//! | 16 | 4 | block sequence number (wrapping): each block's is the previous block's plus one along the log |
//! | 20 | 4 | the low 32 bits of the XXH3-64 of bytes 0..20 followed by the body |
//! | 24 | 8 | `next`: location of the host's next block, 0 if none yet (patched later; not checksummed) |
//! | 32 | `L` | body: the items, front-coded (layout in `codec.rs`), compressed if flag 0 |
//! | 32+`L` | 0–7 | zero padding to a multiple of 8 |
//!
//! Version 1 (until the frontier's disk format was made compact) had a 40-byte header with a
//! 64-bit sequence and checksum and stored each item's strings whole; a store of that version
//! is refused with its version named (see [`version_error`]), never read as this one.
//!
//! Why 32 bits of sequence and checksum: the sequence only has to tell the block that follows
//! from stale bytes of an earlier one (it is checked for equality with the expected number,
//! so wrapping is harmless), and the checksum only has to catch torn writes and flipped bits,
//! where a miss has a chance of 2⁻³² per damaged block; eight bytes per block are ~10% of a
//! one-URL block.
//!
//! Item in a table (a [`QueuedUrl`] recorded at the front of its queue): `u32` URL length, URL
//! bytes (UTF-8), `u32` depth, `u32` parent length or `0xFFFF_FFFF` for no parent, parent
//! bytes, `u32` redirect hops, `u32` attempts.
//!
//! Table:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQTB` |
//! | 8 | 4 | format version, 2 |
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
pub(super) const VERSION: u32 = 2;
pub(super) const SEGMENT_HEADER: u64 = 16;
pub(super) const BLOCK_HEADER: usize = 32;
/// The bytes of a block's header that its checksum covers.
const CHECKED_HEADER: usize = 20;
pub(super) const NEXT_FIELD: u64 = 24;
/// Block flag: the body is LZ4-compressed.
pub(super) const FLAG_LZ4: u8 = 1;
/// Most items in one block (the header's count is 16 bits).
pub(super) const MAX_BLOCK_ITEMS: usize = u16::MAX as usize;
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

/// What a file of another version of the format is told: which version it is and what to do.
pub(super) fn version_error(version: u32) -> String {
    format!(
        "frontier format version {version}, this crawler reads version {VERSION} only (a crawl \
         written by another version of the crawler: resume it with that version, or start \
         again with --fresh)"
    )
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
    pub(super) flags: u8,
    /// Byte 7, zero in a block this version wrote.
    pub(super) reserved: u8,
    pub(super) host: u64,
    pub(super) seq: u32,
    pub(super) checksum: u32,
    pub(super) next: u64,
}

impl BlockHeader {
    pub(super) fn parse(h: &[u8; BLOCK_HEADER]) -> BlockHeader {
        let h = Header::new(h);
        BlockHeader {
            body_len: h.u32(0),
            count: u16::from_le_bytes(h.array(4)) as u32,
            flags: h.u8(6),
            reserved: h.u8(7),
            host: h.u64(8),
            seq: h.u32(16),
            checksum: h.u32(20),
            next: h.u64(24),
        }
    }

    /// The header of a block about to be written (its checksum and `next` still zero).
    pub(super) fn encode(
        body_len: usize,
        count: usize,
        flags: u8,
        host: u64,
        seq: u64,
    ) -> [u8; BLOCK_HEADER] {
        let mut h = [0u8; BLOCK_HEADER];
        h[0..4].copy_from_slice(&(body_len as u32).to_le_bytes());
        h[4..6].copy_from_slice(&(count as u16).to_le_bytes());
        h[6] = flags;
        h[8..16].copy_from_slice(&host.to_le_bytes());
        h[16..20].copy_from_slice(&(seq as u32).to_le_bytes());
        h
    }

    /// Whether the body is LZ4-compressed.
    pub(super) fn compressed(&self) -> bool {
        self.flags & FLAG_LZ4 != 0
    }
    /// Bytes the block takes in its segment, padding included.
    pub(super) fn span(&self) -> u64 {
        (BLOCK_HEADER as u64 + self.body_len as u64).next_multiple_of(8)
    }
}

/// The checksum of a block: bytes 0..20 of its header, then its body.
pub(super) fn block_checksum(header: &[u8; BLOCK_HEADER], body: &[u8]) -> u32 {
    checksum_of(&[&header[..CHECKED_HEADER], body]) as u32
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
        return Err(FileError::corrupt(path, 8, version_error(version)));
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
