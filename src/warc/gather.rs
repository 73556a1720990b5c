//! An archive file's pending bytes as a list of slices, handed to the OS in one `writev`:
//! small pieces (gzip framing, WARC and HTTP headers, request records) copied into a
//! buffer, and the big ones (a stored response's payload, a deflated member) left where
//! they are, in the response records, which are held until the write.
//!
//! Why: most responses are written stored on a busy machine (`output.warc_deflate =
//! "spare-cpu"`), and a buffered file copied each one's payload into its buffer before the
//! kernel copied it again into the page cache: that first copy was ~10% of the output
//! thread's CPU in the crawl bench (`perf` of `cargo bench --bench crawl -- --warc-only`:
//! `memcpy` under `write_stored_member`). Now the kernel reads the payload from the record.
//!
//! What it guarantees, as the buffered file did: the bytes reach the OS in the order they
//! were written, whole, at [`Gather::flush`] or earlier (when a megabyte or
//! [`MAX_PIECES`] slices are pending), never later; a record's memory is let go once its
//! bytes are with the OS.

use std::fs::File;
use std::io::{IoSlice, Write};
use std::sync::Arc;

use super::record::{stored_member_pieces, ResponseRecord, StoredPiece};

/// Pending bytes past which they go to the OS at once: a burst of records in one write (see
/// `super::writer`'s figures for the size of writes).
const PENDING_BYTES: usize = 1 << 20;

/// Slices past which the pending bytes go to the OS (the kernel takes 1,024 per `writev`).
const MAX_PIECES: usize = 1000;

/// Pieces shorter than this are copied: a slice of its own would cost the kernel more than
/// the copy.
const COPY_UP_TO: usize = 4096;

/// One pending piece, in file order.
enum Piece {
    /// `copied[start..end]`.
    Copied(usize, usize),
    /// Bytes `range` of part `part` of `held[record]` (see [`Gather::part`]).
    Held {
        record: usize,
        part: usize,
        range: std::ops::Range<usize>,
    },
}

/// Which of a response record's buffers a held piece is in: its stored parts
/// ([`ResponseRecord::parts`]), or its deflated member.
const DEFLATED: usize = 4;

/// A file and the bytes on their way to it.
pub(crate) struct Gather {
    file: File,
    copied: Vec<u8>,
    pieces: Vec<Piece>,
    held: Vec<Arc<ResponseRecord>>,
    pending: usize,
}

impl Gather {
    pub(crate) fn new(file: File) -> Gather {
        Gather {
            file,
            copied: Vec::with_capacity(64 << 10),
            pieces: Vec::with_capacity(MAX_PIECES),
            held: Vec::new(),
            pending: 0,
        }
    }

    pub(crate) fn get_ref(&self) -> &File {
        &self.file
    }

    /// Appends `bytes`, copied.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.copy(bytes);
        self.spill()
    }

    /// Appends `record`'s deflated member, left in the record.
    pub(crate) fn write_deflated(&mut self, record: &Arc<ResponseRecord>) -> std::io::Result<()> {
        let length = record.deflated().map_or(0, <[u8]>::len);
        self.refer(record, DEFLATED, 0..length);
        self.spill()
    }

    /// Appends `record` as a stored gzip member ([`stored_member_pieces`]), its big parts
    /// left in the record.
    pub(crate) fn write_stored(&mut self, record: &Arc<ResponseRecord>) -> std::io::Result<()> {
        let parts = record.parts();
        let total = parts.iter().map(|p| p.len()).sum();
        let crc = record.seal().crc;
        stored_member_pieces(&parts, total, Some(crc), |piece| {
            match piece {
                StoredPiece::Framing(bytes) => self.copy(bytes),
                StoredPiece::Part(part, range) => self.refer(record, part, range),
            }
            Ok(())
        })?;
        self.spill()
    }

    fn copy(&mut self, bytes: &[u8]) {
        let start = self.copied.len();
        self.copied.extend_from_slice(bytes);
        self.pending += bytes.len();
        match self.pieces.last_mut() {
            Some(Piece::Copied(_, end)) if *end == start => *end = self.copied.len(),
            _ => self.pieces.push(Piece::Copied(start, self.copied.len())),
        }
    }

    fn refer(&mut self, record: &Arc<ResponseRecord>, part: usize, range: std::ops::Range<usize>) {
        if range.len() < COPY_UP_TO {
            let bytes = Self::part(record, part);
            self.copy(&bytes[range]);
            return;
        }
        let index = match self.held.last() {
            Some(last) if Arc::ptr_eq(last, record) => self.held.len() - 1,
            _ => {
                self.held.push(record.clone());
                self.held.len() - 1
            }
        };
        self.pending += range.len();
        self.pieces.push(Piece::Held {
            record: index,
            part,
            range,
        });
    }

    /// Part `part` of `record`: one of its stored parts or its deflated member. Both stay as
    /// they are once the record is written (its digests and deflated member are set once).
    fn part(record: &ResponseRecord, part: usize) -> &[u8] {
        if part == DEFLATED {
            record.deflated().unwrap_or_default()
        } else {
            record.parts()[part]
        }
    }

    /// Hands the pending bytes to the OS if there are enough of them.
    fn spill(&mut self) -> std::io::Result<()> {
        if self.pending >= PENDING_BYTES || self.pieces.len() >= MAX_PIECES {
            self.flush()?;
        }
        Ok(())
    }
}

impl Write for Gather {
    /// Appends `bytes`, copied (for whoever writes a whole record built elsewhere).
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    /// Hands every pending byte to the OS, in order.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let mut slices: Vec<IoSlice<'_>> = self
            .pieces
            .iter()
            .map(|piece| match piece {
                Piece::Copied(start, end) => IoSlice::new(&self.copied[*start..*end]),
                Piece::Held {
                    record,
                    part,
                    range,
                } => IoSlice::new(&Self::part(&self.held[*record], *part)[range.clone()]),
            })
            .collect();
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            match self.file.write_vectored(slices) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut slices, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pieces.clear();
        self.copied.clear();
        self.held.clear();
        self.pending = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::fixture::fetch_parts;
    use crate::warc::record::{prepare, write_stored_member};

    fn record(payload: &[u8]) -> Arc<ResponseRecord> {
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        prepare(&fetch_parts("http://a.test/x", head, payload), 1)
            .with_block((head.to_vec(), payload.to_vec()))
            .response
    }

    #[test]
    fn what_is_gathered_reaches_the_file_as_the_buffered_copy_would_write_it() {
        // Payloads small and big (several stored blocks), stored and deflated, between
        // copied bytes: the file holds exactly the bytes the copying writer produces.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut gather = Gather::new(File::create(&path).unwrap());
        let mut expected = Vec::new();
        // A small member of its own, as a request record is.
        let request = crate::warc::record::gzip_member(&[b"a request"], 1);
        for (i, size) in [10, 5_000, 70_000, 200_000, 0, 16_384]
            .into_iter()
            .enumerate()
        {
            let payload: Vec<u8> = (0..size).map(|b| (b * 7 + i) as u8).collect();
            let record = record(&payload);
            gather.write_all(&request).unwrap();
            expected.extend_from_slice(&request);
            if i % 2 == 1 {
                record.deflate();
                gather.write_deflated(&record).unwrap();
                expected.extend_from_slice(record.deflated().unwrap());
            } else {
                gather.write_stored(&record).unwrap();
                let parts = record.parts();
                let total = parts.iter().map(|p| p.len()).sum();
                write_stored_member(&mut expected, &parts, total, None).unwrap();
            }
            if i == 3 {
                gather.flush().unwrap();
            }
        }
        gather.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        // Every member reads back: the six responses, each after its request.
        let mut text = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::MultiGzDecoder::new(&expected[..]),
            &mut text,
        )
        .unwrap();
        let responses = text
            .windows(29)
            .filter(|w| w == b"WARC/1.1\r\nWARC-Type: response")
            .count();
        assert_eq!(responses, 6);
        assert_eq!(text.windows(9).filter(|w| w == b"a request").count(), 6);
    }

    #[test]
    fn nothing_pending_stays_behind_past_a_megabyte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut gather = Gather::new(File::create(&path).unwrap());
        let payload = vec![7u8; 300_000];
        let records: Vec<_> = (0..4).map(|_| record(&payload)).collect();
        for record in &records {
            gather.write_stored(record).unwrap();
        }
        // Four members of ~300 KB: the first three or four are with the OS already.
        let written = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(written >= 900_000, "{written}");
        assert!(gather.pending < PENDING_BYTES);
        assert!(gather.held.len() <= 1);
    }
}
