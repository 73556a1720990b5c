//! CDXJ indexes (`crawler index FILE…`): one line per response or revisit record, sorted,
//! so that pywb and other replay tools find a URL's record without re-reading the WARC.
//!
//! Each line is `SURT TIMESTAMP JSON`, as pywb's `cdxj-indexer` writes it: the URL in SURT
//! form (host labels reversed, `www.` dropped, lowercased, query parameters sorted), the
//! 14-digit capture time, and a JSON object with `url`, `mime`, `status`, `digest`, `length`,
//! `offset` and `filename`. Request, warcinfo and other records are not indexed (replay looks
//! up responses). The index is written next to the file as `FILE.cdxj`, atomically.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::reader::{parse_record, Members};
use crate::durable::IoAt;

/// Why a file could not be indexed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("{path}: the record at byte {offset}: {message}")]
    Record {
        path: PathBuf,
        offset: u64,
        message: String,
    },
}

#[derive(Serialize)]
struct Entry<'a> {
    url: &'a str,
    mime: String,
    status: String,
    digest: &'a str,
    length: String,
    offset: String,
    filename: &'a str,
}

/// The SURT form of `url` used as the sort key (see the module doc).
pub(crate) fn surt(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return url.to_ascii_lowercase();
    };
    let host = parsed.host_str().unwrap_or("").to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    let host = match host.strip_prefix("www") {
        Some(rest) => {
            let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            digits.strip_prefix('.').unwrap_or(host)
        }
        None => host,
    };
    let mut key = host.split('.').rev().collect::<Vec<_>>().join(",");
    if let Some(port) = parsed.port() {
        key.push_str(&format!(":{port}"));
    }
    key.push(')');
    key.push_str(&parsed.path().to_ascii_lowercase());
    if let Some(query) = parsed.query() {
        let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        params.sort_unstable();
        if !params.is_empty() {
            key.push('?');
            key.push_str(&params.join("&").to_ascii_lowercase());
        }
    }
    key
}

/// Indexes one `.warc.gz`: returns its sorted CDXJ lines.
pub fn index_lines(path: &Path) -> Result<Vec<String>, IndexError> {
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = Vec::new();
    for member in Members::open(path)? {
        let member = member?;
        let bad = |message: String| IndexError::Record {
            path: path.to_path_buf(),
            offset: member.offset,
            message,
        };
        let record = parse_record(&member.bytes).map_err(bad)?;
        let kind = record.field("WARC-Type").unwrap_or("");
        if kind != "response" && kind != "revisit" {
            continue;
        }
        let url = record
            .field("WARC-Target-URI")
            .ok_or_else(|| bad("no WARC-Target-URI".into()))?;
        let date = record.field("WARC-Date").unwrap_or("");
        let timestamp: String = date.chars().filter(char::is_ascii_digit).take(14).collect();
        let (status, mime) = http_status_and_mime(record.block);
        let entry = Entry {
            url,
            mime: if kind == "revisit" {
                "warc/revisit".into()
            } else {
                mime
            },
            status,
            digest: record.field("WARC-Payload-Digest").unwrap_or("-"),
            length: member.length.to_string(),
            offset: member.offset.to_string(),
            filename: &filename,
        };
        let json = serde_json::to_string(&entry).map_err(|e| bad(e.to_string()))?;
        lines.push(format!("{} {timestamp} {json}", surt(url)));
    }
    lines.sort();
    Ok(lines)
}

/// Writes `FILE.cdxj` next to `path`; returns the index's path and its number of lines.
pub fn write_index(path: &Path) -> Result<(PathBuf, usize), IndexError> {
    let lines = index_lines(path)?;
    let mut target = path.as_os_str().to_owned();
    target.push(".cdxj");
    let target = PathBuf::from(target);
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    crate::durable::replace(&target, target.with_extension("cdxj.tmp"), text.as_bytes())?;
    Ok((target, lines.len()))
}

/// The status code and media type of an HTTP response block (`-` when unreadable).
fn http_status_and_mime(block: &[u8]) -> (String, String) {
    let head_end = block
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(block.len());
    let head = String::from_utf8_lossy(&block[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .filter(|s| s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or("-")
        .to_string();
    let mime = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "unk".into());
    (status, mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surt_keys_sort_by_reversed_host() {
        assert_eq!(
            surt("http://www.Example.com/A/b?z=1&a=2"),
            "com,example)/a/b?a=2&z=1"
        );
        assert_eq!(surt("https://h1.test:8080/p/3"), "test,h1:8080)/p/3");
        assert_eq!(surt("http://www2.example.org/"), "org,example)/");
        assert_eq!(surt("http://wwwexample.org/"), "org,wwwexample)/");
        assert_eq!(surt("not a url"), "not a url");
    }

    #[test]
    fn status_and_mime_from_the_http_head() {
        let (s, m) = http_status_and_mime(
            b"HTTP/1.1 404 Not Found\r\nContent-Type: Text/HTML; charset=x\r\n\r\nbody",
        );
        assert_eq!((s.as_str(), m.as_str()), ("404", "text/html"));
        let (s, m) = http_status_and_mime(b"garbage");
        assert_eq!((s.as_str(), m.as_str()), ("-", "unk"));
    }
}
