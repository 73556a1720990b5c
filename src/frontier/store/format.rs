//! The store's byte formats: segment headers, blocks, items and table headers, and where
//! each file lives in the store's directory. Nothing here does I/O.
//!
//! # On-disk format (all integers little-endian)
//!
//! Directory: `seg-NNNNNNNN.log` (segment number, 8 decimal digits, from 1) and
//! `table-GGGGGGGGGGGGGGGG.bin` (generation, 16 decimal digits, from 1), plus `*.tmp` while a
//! table is written.
//!
//! Segment: a 16-byte header, then records back to back, each padded to a multiple of 8 bytes.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CRWLFQSG` |
//! | 8 | 4 | format version, 3 (2 is still read, see below) |
//! | 12 | 4 | segment number (below 2²⁴) |
//!
//! Version 3's record is a *group*: the runs (*entries*) of items of 1 to 255 hosts, written
//! together. An entry is what version 2 called a block: consecutive items of one host, the
//! unit a host's chain links and a pop reads. A group starts at an 8-aligned offset `o` of a
//! segment; the *location* of its entry `i` is `i << 56 | segment << 32 | o` (entry 0's is the
//! group's, and is version 2's block location):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` in bytes (1 ..= 64 MiB) |
//! | 4 | 2 | entry count `n` (1 ..= 255) |
//! | 6 | 1 | flags: bit 0, the body is LZ4-compressed; the other bits are zero |
//! | 7 | 1 | zero |
//! | 8 | 4 | group sequence number (wrapping): each record's is the previous one's plus one along the log |
//! | 12 | 4 | the low 32 bits of the XXH3-64 of bytes 0..12, then the host ids, then the body |
//! | 16 | 8`n` | `next` of each entry: location of its host's next entry, 0 if none yet (patched later; not checksummed) |
//! | 16+8`n` | 8`n` | host id of each entry |
//! | 16+16`n` | `L` | body (layout in `codec.rs`): per entry its item count and byte length, then the entries' items, front-coded; compressed if flag 0 |
//! | | 0–7 | zero padding to a multiple of 8 |
//!
//! Why groups: with 1e6 hosts and links spread over them, most hosts' tails hold one URL
//! when they are written, and version 2 gave each its own block: 32 bytes of header, the URL
//! whole and its parent, ~140 bytes. A group shares the header, and compresses the URLs of
//! many hosts together (the same scheme, the same `www.`, the same paths, the same parent for
//! the links of one page), for 16 bytes per entry of ids and links that no compressor could
//! shrink. Each entry keeps its own `next` (8-aligned: never torn, as in version 2).
//!
//! Version 2 (before groups) wrote one host's items per *block*, whose location is
//! `segment << 32 | offset`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | body length `L` in bytes (1 ..= 64 MiB) |
//! | 4 | 2 | item count (≥ 1) |
//! | 6 | 1 | flags: bit 0, the body is LZ4-compressed; the other bits are zero |
//! | 7 | 1 | zero |
//! | 8 | 8 | host id |
//! | 16 | 4 | block sequence number (wrapping) |
//! | 20 | 4 | the low 32 bits of the XXH3-64 of bytes 0..20 followed by the body |
//! | 24 | 8 | `next`: location of the host's next block, 0 if none yet (patched later; not checksummed) |
//! | 32 | `L` | body: the items, front-coded (layout in `codec.rs`), compressed if flag 0 |
//! | 32+`L` | 0–7 | zero padding to a multiple of 8 |
//!
//! A store of version 2 is still read: its tables have the same layout as version 3's, and
//! its segments' blocks are read as blocks (a pop, a replay, a link patched into one) while
//! everything new goes to version-3 segments after them (reopening such a store starts a new
//! segment). Version 1 (40-byte headers, strings whole) is refused with its version named
//! (see [`version_error`]), never read as another.
//!
//! Why 32 bits of sequence and checksum: the sequence only has to tell the record that
//! follows from stale bytes of an earlier one (it is checked for equality with the expected
//! number, so wrapping is harmless), and the checksum only has to catch torn writes and
//! flipped bits, where a miss has a chance of 2⁻³² per damaged record.
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
//! | 8 | 4 | format version, 3 (2 is read too: the same layout) |
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
pub(super) const VERSION: u32 = 3;
/// The version before groups, whose stores are still read.
pub(super) const VERSION_2: u32 = 2;
pub(super) const SEGMENT_HEADER: u64 = 16;
/// Bytes of a version-2 block's header.
pub(super) const BLOCK_HEADER: usize = 32;
/// Bytes of a group's fixed header (then `next` slots and host ids, 16 per entry).
pub(super) const GROUP_HEADER: usize = 16;
/// The bytes of a group's header that its checksum covers.
const CHECKED_GROUP_HEADER: usize = 12;
/// Most entries in one group (a location has 8 bits for the entry).
pub(super) const MAX_GROUP_ENTRIES: usize = 255;
/// The highest segment number a location can hold (24 bits).
pub(super) const MAX_SEGMENT: u32 = (1 << 24) - 1;
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
/// The location of entry `entry` of the group at `offset` of `segment`.
pub(super) fn entry_loc(segment: u32, offset: u64, entry: usize) -> u64 {
    (entry as u64) << 56 | loc(segment, offset)
}
pub(super) fn loc_segment(l: u64) -> u32 {
    ((l >> 32) & MAX_SEGMENT as u64) as u32
}
pub(super) fn loc_entry(l: u64) -> usize {
    (l >> 56) as usize
}
/// Where the `next` field of the entry (or version-2 block) at `l` is in its segment file.
pub(super) fn next_field_offset(l: u64, version: u32) -> u64 {
    if version == VERSION_2 {
        loc_offset(l) + NEXT_FIELD
    } else {
        loc_offset(l) + GROUP_HEADER as u64 + 8 * loc_entry(l) as u64
    }
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
        "frontier format version {version}, this crawler reads versions {VERSION_2} and \
         {VERSION} only (a crawl written by another version of the crawler: resume it with \
         that version, or start again with --fresh)"
    )
}

/// Whether this crawler reads files of format `version`.
pub(super) fn version_readable(version: u32) -> bool {
    version == VERSION || version == VERSION_2
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
        Some(string(c, plen)?.into())
    };
    Ok(QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops: c.u32()?,
        attempts: c.u32()?,
    })
}

/// A decoded block header (version 2).
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
    /// The header of a block as version 2 wrote it (checksum and `next` still zero): for
    /// tests that make a store of that version.
    #[cfg(test)]
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

/// A decoded group header.
pub(super) struct GroupHeader {
    pub(super) body_len: u32,
    pub(super) entries: usize,
    pub(super) flags: u8,
    /// Byte 7, zero in a group this version wrote.
    pub(super) reserved: u8,
    pub(super) seq: u32,
    pub(super) checksum: u32,
}

impl GroupHeader {
    pub(super) fn parse(h: &[u8; GROUP_HEADER]) -> GroupHeader {
        let h = Header::new(h);
        GroupHeader {
            body_len: h.u32(0),
            entries: u16::from_le_bytes(h.array(4)) as usize,
            flags: h.u8(6),
            reserved: h.u8(7),
            seq: h.u32(8),
            checksum: h.u32(12),
        }
    }

    /// The header of a group about to be written (its checksum still zero).
    pub(super) fn encode(
        body_len: usize,
        entries: usize,
        flags: u8,
        seq: u64,
    ) -> [u8; GROUP_HEADER] {
        let mut h = [0u8; GROUP_HEADER];
        h[0..4].copy_from_slice(&(body_len as u32).to_le_bytes());
        h[4..6].copy_from_slice(&(entries as u16).to_le_bytes());
        h[6] = flags;
        h[8..12].copy_from_slice(&(seq as u32).to_le_bytes());
        h
    }

    /// What is wrong with this header, if anything (lengths, count, flags).
    pub(super) fn check(&self) -> Result<(), String> {
        if self.body_len == 0 || self.body_len > MAX_BODY {
            return Err(format!("impossible group body length {}", self.body_len));
        }
        if self.entries == 0 || self.entries > MAX_GROUP_ENTRIES {
            return Err(format!("impossible entry count {}", self.entries));
        }
        if self.flags & !FLAG_LZ4 != 0 || self.reserved != 0 {
            return Err(format!(
                "unknown group flags {:#04x} {:#04x}",
                self.flags, self.reserved
            ));
        }
        Ok(())
    }

    /// Whether the body is LZ4-compressed.
    pub(super) fn compressed(&self) -> bool {
        self.flags & FLAG_LZ4 != 0
    }
    /// Offset of the host ids from the group's start.
    pub(super) fn hosts_at(&self) -> usize {
        GROUP_HEADER + 8 * self.entries
    }
    /// Offset of the body from the group's start.
    pub(super) fn body_at(&self) -> usize {
        GROUP_HEADER + 16 * self.entries
    }
    /// Bytes the group takes in its segment, padding included.
    pub(super) fn span(&self) -> u64 {
        (self.body_at() as u64 + self.body_len as u64).next_multiple_of(8)
    }
}

/// The checksum of a group: bytes 0..12 of its header, its host ids, then its body.
pub(super) fn group_checksum(header: &[u8; GROUP_HEADER], hosts: &[u8], body: &[u8]) -> u32 {
    checksum_of(&[&header[..CHECKED_GROUP_HEADER], hosts, body]) as u32
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
    if !version_readable(version) {
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
