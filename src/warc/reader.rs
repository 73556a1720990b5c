//! Reading a `.warc.gz` back, one gzip member (one record) at a time, with each member's
//! offset and length: what the CDXJ index and the resume's cut need.
//!
//! This is the crawler's own reader, used on files it wrote; the tests check those files
//! with independent readers (warcio, and the `warc` crate) instead of with this one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::durable::{At, IoAt};

/// A `BufRead` that counts the bytes consumed from it: after a gzip member is decoded, the
/// count is where the next member starts.
struct Counting<R> {
    inner: R,
    consumed: u64,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amount: usize) {
        self.consumed += amount as u64;
        self.inner.consume(amount);
    }
}

/// One record as read: where its member is, and its decompressed bytes.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) bytes: Vec<u8>,
}

/// The members of a `.warc.gz`, in order. Stops at the end of the file; a member that cannot
/// be decoded (a torn end) ends the iteration with an error naming its offset.
pub(crate) struct Members {
    reader: Counting<BufReader<File>>,
    path: std::path::PathBuf,
    done: bool,
}

impl Members {
    pub(crate) fn open(path: &Path) -> Result<Members, IoAt> {
        let file = File::open(path).at("open", path)?;
        Ok(Members {
            reader: Counting {
                inner: BufReader::with_capacity(1 << 16, file),
                consumed: 0,
            },
            path: path.to_path_buf(),
            done: false,
        })
    }
}

impl Iterator for Members {
    type Item = Result<Member, IoAt>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.reader.fill_buf() {
            Ok([]) => {
                self.done = true;
                return None;
            }
            Ok(_) => {}
            Err(e) => {
                self.done = true;
                return Some(Err(e).at("read", &self.path));
            }
        }
        let offset = self.reader.consumed;
        let mut bytes = Vec::new();
        let result = flate2::bufread::GzDecoder::new(&mut self.reader).read_to_end(&mut bytes);
        if let Err(e) = result {
            self.done = true;
            let message = format!("the gzip member at byte {offset} is damaged: {e}");
            return Some(Err(std::io::Error::other(message)).at("read", &self.path));
        }
        Some(Ok(Member {
            offset,
            length: self.reader.consumed - offset,
            bytes,
        }))
    }
}

/// A record split into its named fields and its content block.
#[derive(Debug)]
pub(crate) struct ParsedRecord<'a> {
    pub(crate) fields: Vec<(&'a str, &'a str)>,
    pub(crate) block: &'a [u8],
}

impl ParsedRecord<'_> {
    /// A field's value (names compare case-insensitively).
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// Splits one decompressed record; the error says what is wrong with it.
pub(crate) fn parse_record(bytes: &[u8]) -> Result<ParsedRecord<'_>, String> {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of the header block")?;
    let head = std::str::from_utf8(&bytes[..end]).map_err(|_| "the header is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let version = lines.next().unwrap_or_default();
    if version != "WARC/1.1" && version != "WARC/1.0" {
        return Err(format!("{version:?} is not a WARC version line"));
    }
    let mut fields = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("header line {line:?} has no colon"))?;
        fields.push((name.trim(), value.trim()));
    }
    let record = ParsedRecord { fields, block: &[] };
    let length: usize = record
        .field("Content-Length")
        .and_then(|l| l.parse().ok())
        .ok_or("no valid Content-Length")?;
    let start = end + 4;
    let block = bytes
        .get(start..start + length)
        .ok_or_else(|| format!("Content-Length {length} runs past the record"))?;
    if bytes.get(start + length..) != Some(b"\r\n\r\n") {
        return Err("the block is not followed by exactly two CRLFs".into());
    }
    Ok(ParsedRecord { block, ..record })
}
