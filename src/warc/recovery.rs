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
//!
//! In distributed mode each process has its own pages file and archive beside the others'
//! ([`recover_files`] takes the pages file and which archive files are its), and nobody
//! resumes a dead process: its files are *sealed* instead ([`seal`]: the torn last line cut,
//! then the same cut of the archive), by another process (`crate::distributed::seal`).

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
    recover_files(
        &crate::output::journal_path(out),
        pages_end,
        &out.join("warc"),
        &|name| serial_of(name).is_some(),
        dedup_memory,
    )
}

/// The same for one writer's files: the first `pages_end` bytes of the pages file `pages`
/// and the files of `warc_dir` whose names `owned` accepts (in distributed mode, one
/// process's pages file and archive, beside the other processes' in the same directories).
pub(crate) fn recover_files(
    pages: &Path,
    pages_end: u64,
    warc_dir: &Path,
    owned: &dyn Fn(&str) -> bool,
    dedup_memory: u64,
) -> Result<Recovered, IoAt> {
    let mut index = PayloadIndex::with_memory(dedup_memory);
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    if pages.exists() {
        let file = std::fs::File::open(pages).at("open", pages)?;
        let mut reader = BufReader::with_capacity(1 << 16, file.take(pages_end));
        let mut line = Vec::new();
        let mut at: u64 = 0;
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).at("read", pages)?;
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
    let dir = warc_dir;
    let mut notes = Vec::new();
    let mut highest: Option<u32> = None;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries.collect::<Result<Vec<_>, _>>().at("list", dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).at("list", dir),
    };
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !owned(&name) {
            continue;
        }
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

/// Seals the output of a writer that will never write again (in distributed mode, a
/// process killed with `kill -9`: its id is never reused, so nobody resumes its files): the
/// pages file is cut after its last complete line (a torn last line is one the writer did not
/// finish), then its archive is cut back to what the kept lines point to ([`recover_files`]).
/// Returns what was cut, for the log. Idempotent: sealing sealed files changes nothing.
pub(crate) fn seal(
    pages: &Path,
    warc_dir: &Path,
    owned: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, IoAt> {
    let mut notes = Vec::new();
    let pages_end = match std::fs::metadata(pages) {
        Ok(_) => cut_torn_line(pages, &mut notes)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).at("read metadata of", pages),
    };
    // The index is not kept: nobody archives into these files again.
    let recovered = recover_files(pages, pages_end, warc_dir, owned, 1 << 16)?;
    notes.extend(recovered.notes);
    Ok(notes)
}

/// Cuts `path` after its last newline; returns the length kept.
fn cut_torn_line(path: &Path, notes: &mut Vec<String>) -> Result<u64, IoAt> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .at("open", path)?;
    let length = file.metadata().at("read metadata of", path)?.len();
    // Back from the end, a block at a time, to the last newline.
    let mut end = length;
    let mut block = vec![0u8; 64 << 10];
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(block.len() as u64);
        let chunk = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start)).at("seek in", path)?;
        file.read_exact(chunk).at("read", path)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    if keep < length {
        file.set_len(keep).at("truncate", path)?;
        file.sync_all().at("fsync", path)?;
        notes.push(format!(
            "{}: cut from {length} to {keep} bytes (a torn last line)",
            path.display()
        ));
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::fixture;
    use std::io::Write as _;

    /// Writes `n` fetches (every third repeating the first payload) through the writer, with
    /// their lines, as the output thread does; returns the lines' ends.
    fn crawl(out: &Path, n: usize) -> Vec<u64> {
        let pages_path = out.join("pages.jsonl");
        let mut pages = std::fs::File::create(&pages_path).unwrap();
        let mut writer = fixture::writer(out, "t", pages_path);
        let mut ends = Vec::new();
        let mut at = 0;
        for i in 0..n {
            let url = format!("http://a.test/{i}");
            let payload = if i % 3 == 0 {
                b"the same".to_vec()
            } else {
                format!("page {i}").into_bytes()
            };
            let (_, line) = fixture::archive_fetch(&mut writer, &url, &payload, at);
            pages.write_all(&line).unwrap();
            at += line.len() as u64;
            ends.push(at);
        }
        writer.finish().unwrap();
        ends
    }

    fn only_file(out: &Path) -> std::path::PathBuf {
        let mut files: Vec<_> = std::fs::read_dir(out.join("warc"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        files.remove(0)
    }

    #[test]
    fn records_past_the_last_kept_line_are_cut_and_the_index_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let ends = crawl(dir.path(), 9);
        let file = only_file(dir.path());
        // A torn member after the last record, as a crash mid-write leaves.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(&[0x1f, 0x8b, 8, 0, 0])
            .unwrap();
        // Keep the first 5 lines: records 6..9 lost their lines.
        let recovered = recover(dir.path(), ends[4], 1 << 16).unwrap();
        let kept: Vec<PageRecord> = std::fs::read_to_string(dir.path().join("pages.jsonl"))
            .unwrap()
            .lines()
            .take(5)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let last = kept[4].warc.as_ref().unwrap();
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            last.offset + last.length
        );
        let members: Vec<_> = Members::open(&file).unwrap().collect();
        assert!(members.iter().all(Result::is_ok));
        // warcinfo + 5 × (request + response or revisit), whole for warcio too.
        assert_eq!(members.len(), 11);
        use crate::warc::warcio_check::{check, Brotli};
        assert_eq!(
            check(std::slice::from_ref(&file), Brotli::AsInstalled),
            [11]
        );
        assert_eq!(recovered.next_serial, 1);
        assert_eq!(recovered.notes.len(), 1, "{:?}", recovered.notes);
        // Lines 0 and 3 share a payload: 0 is the original, 3 a revisit; the index knows the
        // original (and only originals).
        assert_eq!(kept[3].warc.as_ref().unwrap().record, "revisit");
        let digest = parse_digest_label(kept[0].payload_digest.as_ref().unwrap()).unwrap();
        let mut index = recovered.index;
        assert_eq!(index.candidates(&digest), vec![0]);
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn a_file_whose_warcinfo_is_torn_is_removed_and_an_intact_archive_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ends = crawl(dir.path(), 3);
        let file = only_file(dir.path());
        let length = std::fs::metadata(&file).unwrap().len();
        let recovered = recover(dir.path(), *ends.last().unwrap(), 1 << 16).unwrap();
        assert!(recovered.notes.is_empty());
        assert_eq!(std::fs::metadata(&file).unwrap().len(), length);
        let torn = dir.path().join("warc/t-20261123000000-00007.warc.gz");
        std::fs::write(&torn, [0x1f, 0x8b, 8]).unwrap();
        let recovered = recover(dir.path(), *ends.last().unwrap(), 1 << 16).unwrap();
        assert!(!torn.exists());
        assert_eq!(recovered.next_serial, 8);
    }

    #[test]
    fn a_torn_last_line_is_cut_at_the_last_newline_however_far_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages-x.jsonl");
        // A last line longer than the block read back from the end.
        let mut text = b"{\"a\":1}\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 200 << 10));
        std::fs::write(&path, &text).unwrap();
        let mut notes = Vec::new();
        assert_eq!(cut_torn_line(&path, &mut notes).unwrap(), 8);
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n");
        assert_eq!(notes.len(), 1);
        // Whole lines: nothing cut; no newline at all: all cut.
        assert_eq!(cut_torn_line(&path, &mut notes).unwrap(), 8);
        assert_eq!(notes.len(), 1);
        std::fs::write(&path, b"torn").unwrap();
        assert_eq!(cut_torn_line(&path, &mut notes).unwrap(), 0);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn lines_pointing_past_a_file_are_damage_named_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ends = crawl(dir.path(), 3);
        let file = only_file(dir.path());
        let length = std::fs::metadata(&file).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(length - 10)
            .unwrap();
        let error = recover(dir.path(), *ends.last().unwrap(), 1 << 16).unwrap_err();
        let message = format!(
            "{error}: {}",
            std::error::Error::source(&error)
                .map(|e| e.to_string())
                .unwrap_or_default()
        );
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(message.contains("shorter than"), "{message}");
    }
}
