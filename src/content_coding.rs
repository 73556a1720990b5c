//! Undoing a response's `Content-Encoding` for parsing, with the body cap applied to the
//! decoded bytes.
//!
//! The crawler asks for the codings of `network.accept_encoding` itself (`gzip, deflate` by
//! default, `br` when configured) and turns reqwest's automatic decompression off: reqwest
//! would delete `Content-Encoding` and `Content-Length` and hand over only decoded bytes, and
//! the archive (see [`crate::warc`]) must keep the bytes as they were sent. Whatever the
//! offer, every coding below is decoded when it arrives: servers do send codings nobody
//! asked for. So the fetch keeps the bytes as received and, when the page will be parsed,
//! feeds them through a [`BodyDecoder`] as they arrive.
//!
//! Guarantees:
//! - **Bounded memory.** The decoded body never grows past its cap: the sink refuses the
//!   first byte beyond it, the decompressor stops on that refusal, and the fetch stops reading.
//!   A compression bomb (a few KB that inflate to gigabytes) costs at most the cap in memory
//!   and about one chunk's worth of inflation past it in CPU.
//! - **Never a panic on input.** A corrupt or cut stream is an error that names the coding;
//!   what was decoded before the damage is kept, as a browser would show it.
//!
//! One coding per response is supported (`gzip`/`x-gzip`, `deflate`, `br`, or none); a stack
//! of several (`gzip, br`) or an unknown one (`zstd`) is reported as unsupported and the body
//! is archived but not parsed. Servers answer the codings a client offers, and we offer
//! single ones. The decoders come from the crates reqwest itself used: flate2 (on the
//! zlib-rs backend) and brotli-decompressor.

use std::io::{self, Write};

/// A content coding the crawler can undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    Identity,
    Gzip,
    /// `deflate` is the zlib format (RFC 9110 §8.4.1.2), not a raw deflate stream.
    Deflate,
    Brotli,
}

impl Coding {
    /// The coding of a response from its `Content-Encoding` values; the error names what
    /// cannot be undone.
    pub(crate) fn from_header<'a>(
        values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<Coding, String> {
        let mut codings = Vec::new();
        for value in values {
            for token in value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.is_empty() || token.eq_ignore_ascii_case(b"identity") {
                    continue;
                }
                codings.push(token);
            }
        }
        match codings.as_slice() {
            [] => Ok(Coding::Identity),
            [one] if one.eq_ignore_ascii_case(b"gzip") || one.eq_ignore_ascii_case(b"x-gzip") => {
                Ok(Coding::Gzip)
            }
            [one] if one.eq_ignore_ascii_case(b"deflate") => Ok(Coding::Deflate),
            [one] if one.eq_ignore_ascii_case(b"br") => Ok(Coding::Brotli),
            [one] => Err(format!(
                "Content-Encoding {:?} is not supported",
                String::from_utf8_lossy(one)
            )),
            many => Err(format!(
                "Content-Encoding {:?} stacks {} codings; only one is supported",
                many.iter()
                    .map(|c| String::from_utf8_lossy(c))
                    .collect::<Vec<_>>()
                    .join(", "),
                many.len()
            )),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
        }
    }
}

/// Decoded bytes up to a cap; a write past it stores what fits and fails, which is how a
/// decompressor is stopped in the middle of a chunk.
#[derive(Debug, Default)]
pub(crate) struct CappedSink {
    bytes: Vec<u8>,
    cap: usize,
    full: bool,
}

impl Write for CappedSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.cap - self.bytes.len();
        if buf.len() > room {
            self.bytes.extend_from_slice(&buf[..room]);
            self.full = true;
            return Err(io::Error::other(BODY_CAP));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const BODY_CAP: &str = "decoded body reached its cap";

enum Stage {
    Identity(CappedSink),
    Gzip(flate2::write::MultiGzDecoder<CappedSink>),
    Deflate(flate2::write::ZlibDecoder<CappedSink>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<CappedSink>>),
}

/// The most [`BodyDecoder::expect`] reserves ahead of the body's bytes.
const RESERVE_MAX: u64 = 1 << 20;

/// A body being decoded as it arrives.
pub(crate) struct BodyDecoder {
    coding: Coding,
    stage: Stage,
    /// The first decoding error; once set, further input is ignored.
    error: Option<String>,
}

/// What a [`BodyDecoder`] produced.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) bytes: Vec<u8>,
    /// The decoded body reached the cap and was cut there.
    pub(crate) capped: bool,
    /// Why the stream could not be decoded to its end (the bytes before are kept).
    pub(crate) error: Option<String>,
}

impl BodyDecoder {
    pub(crate) fn new(coding: Coding, cap: u64) -> BodyDecoder {
        let sink = CappedSink {
            bytes: Vec::new(),
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
            full: false,
        };
        let stage = match coding {
            Coding::Identity => Stage::Identity(sink),
            Coding::Gzip => Stage::Gzip(flate2::write::MultiGzDecoder::new(sink)),
            Coding::Deflate => Stage::Deflate(flate2::write::ZlibDecoder::new(sink)),
            Coding::Brotli => Stage::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(sink, 16 * 1024),
            )),
        };
        BodyDecoder {
            coding,
            stage,
            error: None,
        }
    }

    /// Room for a body announced as `length` bytes (its `Content-Length`), so that an
    /// identity-coded body is received into one allocation instead of a growing one (a
    /// reallocation and copy per doubling: 3% of the crawl bench's CPU in the profile).
    /// Reserves at most [`RESERVE_MAX`]: the header is the server's word, and a body that
    /// is longer grows as before. Coded bodies decode to an unknown length: nothing reserved.
    pub(crate) fn expect(&mut self, length: u64) {
        if let Stage::Identity(sink) = &mut self.stage {
            let room = length.min(RESERVE_MAX).min(sink.cap as u64) as usize;
            sink.bytes.reserve(room.saturating_sub(sink.bytes.len()));
        }
    }

    fn sink(&self) -> &CappedSink {
        match &self.stage {
            Stage::Identity(s) => s,
            Stage::Gzip(d) => d.get_ref(),
            Stage::Deflate(d) => d.get_ref(),
            Stage::Brotli(d) => d.get_ref(),
        }
    }

    /// The decoded body reached its cap: reading further is pointless.
    pub(crate) fn is_full(&self) -> bool {
        self.sink().full
    }

    /// Feeds the next bytes as received.
    pub(crate) fn write(&mut self, chunk: &[u8]) {
        if self.error.is_some() || self.is_full() {
            return;
        }
        let result = match &mut self.stage {
            Stage::Identity(s) => s.write_all(chunk),
            Stage::Gzip(d) => d.write_all(chunk),
            Stage::Deflate(d) => d.write_all(chunk),
            Stage::Brotli(d) => d.write_all(chunk),
        };
        if let Err(e) = result {
            if !self.is_full() {
                self.error = Some(format!("{} stream: {e}", self.coding.name()));
            }
        }
    }

    /// The decoded body. `complete` says whether the input was read to its end (not cut by
    /// a cap): only then is an unfinished stream an error.
    pub(crate) fn finish(mut self, complete: bool) -> Decoded {
        let check_end = complete && self.error.is_none() && !self.is_full();
        // Finishing flushes what the decompressor still holds; the sink is then taken out
        // (the decoder dropped with an empty one), so the bytes decoded before a failure are
        // kept too.
        let end_error = match &mut self.stage {
            Stage::Identity(_) => None,
            Stage::Gzip(d) => check_end.then(|| d.try_finish().err()).flatten(),
            Stage::Deflate(d) => check_end.then(|| d.try_finish().err()).flatten(),
            Stage::Brotli(d) => check_end
                .then(|| d.close().err().map(|e| io::Error::other(format!("{e:?}"))))
                .flatten(),
        };
        let sink = match &mut self.stage {
            Stage::Identity(s) => std::mem::take(s),
            Stage::Gzip(d) => std::mem::take(d.get_mut()),
            Stage::Deflate(d) => std::mem::take(d.get_mut()),
            Stage::Brotli(d) => std::mem::take(d.get_mut()),
        };
        if let Some(e) = end_error {
            if !sink.full {
                self.error
                    .get_or_insert_with(|| format!("{} stream: {e}", self.coding.name()));
            }
        }
        Decoded {
            capped: sink.full,
            bytes: sink.bytes,
            error: self.error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(coding: Coding, input: &[u8], cap: u64, chunk: usize) -> Decoded {
        let mut d = BodyDecoder::new(coding, cap);
        for piece in input.chunks(chunk.max(1)) {
            d.write(piece);
            if d.is_full() {
                return d.finish(false);
            }
        }
        d.finish(true)
    }

    #[test]
    fn codings_from_headers() {
        let one = |v: &str| Coding::from_header([v.as_bytes()].into_iter());
        assert_eq!(one(""), Ok(Coding::Identity));
        assert_eq!(one("identity"), Ok(Coding::Identity));
        assert_eq!(one("GZIP"), Ok(Coding::Gzip));
        assert_eq!(one("x-gzip"), Ok(Coding::Gzip));
        assert_eq!(one(" br "), Ok(Coding::Brotli));
        assert_eq!(one("deflate"), Ok(Coding::Deflate));
        assert!(one("zstd")
            .unwrap_err()
            .contains("\"zstd\" is not supported"));
        assert!(one("gzip, br").unwrap_err().contains("stacks 2 codings"));
    }

    #[test]
    fn gzip_round_trips_in_any_chunking() {
        let page = b"<html><a href=/x>x</a></html>".repeat(500);
        let wire = gzip(&page);
        for chunk in [1, 7, 4096, wire.len()] {
            let out = decode(Coding::Gzip, &wire, 1 << 20, chunk);
            assert_eq!(out.bytes, page, "chunk {chunk}");
            assert!(!out.capped && out.error.is_none());
        }
    }

    #[test]
    fn deflate_and_brotli_round_trip() {
        let page = b"hello deflate and brotli ".repeat(300);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&page).unwrap();
        let out = decode(Coding::Deflate, &z.finish().unwrap(), 1 << 20, 100);
        assert_eq!(out.bytes, page);
        let mut br = Vec::new();
        {
            let mut w = brotli_decompressor_compat::compress(&page);
            br.append(&mut w);
        }
        let out = decode(Coding::Brotli, &br, 1 << 20, 100);
        assert_eq!(out.bytes, page);
        assert!(out.error.is_none());
    }

    /// testweb's brotli encoder is a dev-dependency of the tests; a tiny stored-block brotli
    /// stream is enough here.
    mod brotli_decompressor_compat {
        /// A valid brotli stream of uncompressed meta-blocks (RFC 7932 §9.2).
        pub(super) fn compress(data: &[u8]) -> Vec<u8> {
            let mut bits = BitWriter::default();
            bits.put(0, 1); // WBITS = 16
            for block in data.chunks(1 << 16) {
                bits.put(0, 1); // ISLAST = 0
                let len = block.len() - 1;
                bits.put(0, 2); // MNIBBLES = 4
                bits.put(len as u64, 16);
                bits.put(1, 1); // ISUNCOMPRESSED
                bits.align();
                bits.bytes.extend_from_slice(block);
            }
            bits.put(1, 1); // ISLAST
            bits.put(1, 1); // ISLASTEMPTY
            bits.align();
            bits.bytes
        }

        #[derive(Default)]
        struct BitWriter {
            bytes: Vec<u8>,
            acc: u64,
            n: u32,
        }

        impl BitWriter {
            fn put(&mut self, value: u64, width: u32) {
                self.acc |= value << self.n;
                self.n += width;
                while self.n >= 8 {
                    self.bytes.push(self.acc as u8);
                    self.acc >>= 8;
                    self.n -= 8;
                }
            }
            fn align(&mut self) {
                if self.n > 0 {
                    self.bytes.push(self.acc as u8);
                    self.acc = 0;
                    self.n = 0;
                }
            }
        }
    }

    #[test]
    fn an_announced_length_is_reserved_within_bounds_and_changes_nothing() {
        let body = b"<html>announced</html>".repeat(100);
        let capacity = |length: u64, cap: u64| {
            let mut d = BodyDecoder::new(Coding::Identity, cap);
            d.expect(length);
            d.sink().bytes.capacity()
        };
        assert!(capacity(body.len() as u64, 1 << 30) >= body.len());
        assert!(capacity(u64::MAX, 1 << 30) as u64 <= 2 * RESERVE_MAX);
        assert!(capacity(u64::MAX, 100) < 200);
        let mut gzip_decoder = BodyDecoder::new(Coding::Gzip, 1 << 30);
        gzip_decoder.expect(1 << 20);
        assert_eq!(gzip_decoder.sink().bytes.capacity(), 0);
        // The body decoded is the same with or without the announcement, and a body longer
        // than announced grows past it.
        for announced in [None, Some(body.len() as u64), Some(10)] {
            let mut d = BodyDecoder::new(Coding::Identity, 1 << 30);
            if let Some(length) = announced {
                d.expect(length);
            }
            for chunk in body.chunks(333) {
                d.write(chunk);
            }
            let decoded = d.finish(true);
            assert_eq!(decoded.bytes, body, "{announced:?}");
            assert!(decoded.error.is_none() && !decoded.capped);
        }
    }

    #[test]
    fn a_bomb_stops_at_the_cap() {
        let wire = gzip(&vec![b' '; 50 << 20]);
        assert!(wire.len() < 100 << 10, "{}", wire.len());
        let out = decode(Coding::Gzip, &wire, 1 << 20, 8192);
        assert_eq!(out.bytes.len(), 1 << 20);
        assert!(out.capped);
        assert!(out.error.is_none(), "{:?}", out.error);
    }

    #[test]
    fn a_cut_or_corrupt_stream_is_an_error_that_keeps_the_prefix() {
        let page = b"<p>abcdefghijklmnopqrstuvwxyz0123456789</p>".repeat(2000);
        let wire = gzip(&page);
        let cut = decode(Coding::Gzip, &wire[..wire.len() / 2], 1 << 20, 512);
        assert!(cut
            .error
            .as_deref()
            .unwrap_or("")
            .starts_with("gzip stream"));
        assert!(!cut.bytes.is_empty() && page.starts_with(&cut.bytes));
        let garbage = decode(Coding::Gzip, b"this is not gzip at all", 1 << 20, 4);
        assert!(garbage.error.is_some());
        assert!(garbage.bytes.is_empty());
        let bad_br = decode(Coding::Brotli, &[0xff; 64], 1 << 20, 16);
        assert!(bad_br.error.is_some());
    }
}
