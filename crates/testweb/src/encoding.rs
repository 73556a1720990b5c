//! Transfer shapes of the synthetic web's answers, for archive tests: content codings the
//! client offered (`gzip`, `br`) and chunked framing, on top of the same pages.
//!
//! With [`crate::ServerOptions::encodings`] on, every whole-buffer answer to a request whose
//! `Accept-Encoding` offers them is sent as one of: identity, `gzip` or `br`, and with either
//! `Content-Length` or chunked framing (three chunks). The choice is a function of the *body's
//! bytes*, not of the URL, so identical content under different URLs (redirect bodies, error
//! pages, the `advanced_variants` spellings) is sent byte for byte alike: that is what lets a
//! crawler's content-level dedup find it. The pages and links are unchanged, so the ground
//! truth is the same with or without this option.
//!
//! The server logs a 64-bit FNV-1a hash of the bytes it sent ([`crate::RequestRecord::body_hash`]),
//! the independent truth of which answers were identical.

use std::io::Write;

use bytes::Bytes;

/// How one body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) coding: Option<&'static str>,
    pub(crate) chunked: bool,
}

/// FNV-1a, 64 bits: a stable hash of the bytes sent (not cryptographic; only equal bodies
/// are compared).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The shape of `body` for a client offering `accept_encoding`.
pub(crate) fn shape_of(body: &[u8], accept_encoding: &str) -> Shape {
    let hash = fnv1a(body);
    let offers = |name: &str| {
        accept_encoding.split(',').any(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case(name)
        })
    };
    let coding = match hash % 3 {
        1 if offers("gzip") => Some("gzip"),
        2 if offers("br") => Some("br"),
        _ => None,
    };
    Shape {
        coding,
        chunked: (hash / 3) % 2 == 1,
    }
}

/// `body` encoded with `coding` (deterministic: the same bytes always encode alike).
pub(crate) fn encode(body: &[u8], coding: &str) -> Bytes {
    match coding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            // Writing into a Vec cannot fail.
            let _ = e.write_all(body);
            Bytes::from(e.finish().unwrap_or_default())
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut w = brotli::CompressorWriter::new(&mut out, 4096, 4, 22);
                let _ = w.write_all(body);
            }
            Bytes::from(out)
        }
        _ => Bytes::copy_from_slice(body),
    }
}

/// The body cut in three chunks (fewer when it is shorter), for chunked framing.
pub(crate) fn in_chunks(body: Bytes) -> Vec<Bytes> {
    let third = body.len().div_ceil(3).max(1);
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let end = (start + third).min(body.len());
        chunks.push(body.slice(start..end));
        start = end;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn equal_bodies_get_equal_shapes_and_every_shape_occurs() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200 {
            let body = format!("<html>page {i}</html>");
            let a = shape_of(body.as_bytes(), "gzip, deflate, br");
            assert_eq!(a, shape_of(body.as_bytes(), "br, gzip"));
            seen.insert((a.coding, a.chunked));
        }
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(shape_of(b"x", "").coding.is_none());
    }

    #[test]
    fn encodings_round_trip() {
        let body = b"<html><a href=/p/1>one</a></html>".repeat(40);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&encode(&body, "gzip")[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, body);
        let mut out = Vec::new();
        brotli::Decompressor::new(&encode(&body, "br")[..], 4096)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, body);
        assert_eq!(encode(&body, "gzip"), encode(&body, "gzip"));
        let chunks = in_chunks(Bytes::from(body.clone()));
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), body);
    }
}
