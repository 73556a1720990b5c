//! Bringing the archive back in line with `pages.jsonl` when a crawl resumes.
//!
//! `pages.jsonl` is the truth: the resume has already cut it to its last trusted line (see
//! [`crate::checkpoint`]). Records reach the OS, and the disk, before their line (see
//! [`super::writer`]), so the only disagreement a crash can leave is records *in excess*: at
//! the end of the last file, records whose lines were lost, possibly torn. Each file is cut
//! back to the end of the last record a line points into (or, for a file no line points
//! into, to the end of its `warcinfo`; a file whose `warcinfo` itself is torn is removed).
//! Then every record in the archive has its line, and every line's records are there.
//!
//! The same pass over `pages.jsonl` rebuilds the digest index, so content-level dedup goes
//! on across the resume. Its cost is one read of `pages.jsonl`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::digest_index::PayloadIndex;
use super::reader::Members;
use super::record::parse_digest_label;
use super::writer::serial_of;
use crate::durable::{At, IoAt};
use crate::output::PageRecord;

/// The archive's state after [`recover`].
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) index: PayloadIndex,
    /// The serial number the resumed run's first file takes.
    pub(crate) next_serial: u32,
    /// What was cut or removed, for the log.
    pub(crate) notes: Vec<String>,
}

/// Cuts the archive under `out/warc` back to what the first `pages_end` bytes of
/// `out/pages.jsonl` point to, and rebuilds the digest index from those lines.
pub(crate) fn recover(out: &Path, pages_end: u64, dedup_memory: u64) -> Result<Recovered, IoAt> {
    let mut index = PayloadIndex::with_memory(dedup_memory);
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    let pages = out.join("pages.jsonl");
    if pages.exists() {
        let file = std::fs::File::open(&pages).at("open", &pages)?;
        let mut reader = BufReader::with_capacity(1 << 16, file.take(pages_end));
        let mut line = Vec::new();
        let mut at: u64 = 0;
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).at("read", &pages)?;
            if n == 0 {
                break;
            }
            let start = at;
            at += n as u64;
            // Most lines of a crawl without the archive have no location: skip the parse.
            if !line.windows(7).any(|w| w == b"\"warc\":") {
                continue;
            }
            let Ok(record) = serde_json::from_slice::<PageRecord>(&line) else {
                continue;
            };
            let Some(location) = record.warc else {
                continue;
            };
            let end = ends.entry(location.file.clone()).or_insert(0);
            *end = (*end).max(location.offset + location.length);
            if location.record == "response" {
                if let Some(digest) = record
                    .payload_digest
                    .as_deref()
                    .and_then(parse_digest_label)
                {
                    index.insert(&digest, start);
                }
            }
        }
    }
    let dir = out.join("warc");
    let mut notes = Vec::new();
    let mut highest: Option<u32> = None;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.collect::<Result<Vec<_>, _>>().at("list", &dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).at("list", &dir),
    };
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(serial) = serial_of(&name) else {
            continue;
        };
        highest = Some(highest.map_or(serial, |h| h.max(serial)));
        let path = entry.path();
        let length = entry.metadata().at("read metadata of", &path)?.len();
        let keep = match ends.get(&name) {
            Some(&end) => end,
            None => match Members::open(&path)?.next() {
                Some(Ok(first)) => first.offset + first.length,
                _ => {
                    std::fs::remove_file(&path).at("remove", &path)?;
                    notes.push(format!(
                        "{}: removed (its warcinfo record was torn)",
                        path.display()
                    ));
                    continue;
                }
            },
        };
        if length < keep {
            return Err(std::io::Error::other(format!(
                "{length} bytes, shorter than the {keep} bytes pages.jsonl points into; the archive was damaged"
            )))
            .at("check", &path);
        }
        if length > keep {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .at("open", &path)?;
            file.set_len(keep).at("truncate", &path)?;
            file.sync_all().at("fsync", &path)?;
            notes.push(format!(
                "{}: cut from {length} to {keep} bytes (records whose pages.jsonl line was lost)",
                path.display()
            ));
        }
    }
    Ok(Recovered {
        index,
        next_serial: highest.map_or(0, |h| h + 1),
        notes,
    })
}
